"""Comparing two training recipes run with the same seeds (chapter 10's ablations).

Two recipes A and B, each run with seeds s_1..s_n, give scores a_i and b_i. Runs with the same
seed share their initialisation and data order, so the *paired* differences d_i = a_i - b_i
cancel much of the seed-to-seed noise that the scores themselves carry. The comparison reports

- the mean difference  d̄ = (1/n) Σ d_i,
- its standard error   SE = s_d / √n, with s_d the sample standard deviation of the d_i
  (n - 1 in the denominator),
- a verdict: "differs" only when |d̄| > 2 SE (`SE_MULTIPLE`), else "cannot tell".

Two standard errors is the usual rough 95% line; with 3 seeds it is a lenient one (Student's
t with 2 degrees of freedom needs 4.3 SE for 95%), so "differs" here is a first sign, not a
proof, and "cannot tell" says the budget and seeds cannot separate the two recipes, not that
they are equal. One seed has no standard error: it is refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

SE_MULTIPLE = 2.0
"""A difference is claimed when the mean paired difference exceeds this many standard errors."""
DIFFERS, CANNOT_TELL = "differs", "cannot tell"


@dataclass(frozen=True)
class PairedComparison:
    """The paired-by-seed comparison of recipe A against recipe B (A - B)."""

    mean_difference: float
    standard_error: float
    n: int  # pairs (seeds)
    verdict: str  # DIFFERS or CANNOT_TELL


def paired_comparison(a: Sequence[float], b: Sequence[float]) -> PairedComparison:
    """Compare scores ``a[i]`` and ``b[i]`` of the same seed i (see the module docstring).

    Raises ValueError when the lists differ in length, hold fewer than 2 pairs or a value that
    is not a finite number.
    """
    if len(a) != len(b):
        raise ValueError(
            f"paired scores need one value per seed on both sides, got {len(a)} and {len(b)}"
        )
    if len(a) < 2:
        raise ValueError(
            f"a paired comparison needs at least 2 seeds (one seed has no standard error), "
            f"got {len(a)}"
        )
    for name, values in (("a", a), ("b", b)):
        for i, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{name}[{i}] = {v!r} is not a finite number")
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    se = sd / math.sqrt(n)
    verdict = DIFFERS if abs(mean) > SE_MULTIPLE * se else CANNOT_TELL
    return PairedComparison(mean, se, n, verdict)
