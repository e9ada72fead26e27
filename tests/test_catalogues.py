"""The catalogues of known mistakes against each other: a name must be right before it is given.

A mistake is named in a learner's feedback only when the learner's output equals what it gives
on the failing inputs *and* on every probe of its catalogue (`PROBES`: inputs on which the
catalogue's mistakes all differ). Here each entry, played as a learner's answer, must be named
as itself, never as another entry, and must really be wrong (it differs from the reference on
some probe). Catalogues of random draws (ch03's replacement, ch05's pair sampling) are
recognised by a property of the output in their test cells and have no probes.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from bertcourse.grading import catalogues, mistakes
from bertcourse.grading.mistakes import HEADLINE_WIDTH, diagnose, probes, resolve
from bertcourse.grading.values import _compare

# catalogues whose mistakes are random draws: the test cells recognise them by a property
RANDOM = {"ch03:replace", "ch05:nsp_pairs", "ch05:sop_pairs", "ch10:corrupt"}


def catalogue_keys() -> list[str]:
    keys = list(mistakes.CATALOGUE)
    for info in pkgutil.iter_modules(catalogues.__path__):
        module = importlib.import_module(f"bertcourse.grading.catalogues.{info.name}")
        keys += [f"{info.name}:{key}" for key in module.CATALOGUE]
    return keys


KEYS = catalogue_keys()


def compare(got, wanted):
    return _compare(got, wanted, "output", None, None, True)


def test_every_deterministic_catalogue_has_probes():
    assert set(KEYS) >= RANDOM
    missing = [key for key in KEYS if key not in RANDOM and not probes(key)]
    assert not missing, f"catalogues without PROBES: {missing}"


@pytest.mark.parametrize("key", [k for k in KEYS if k not in RANDOM])
def test_each_mistake_is_named_as_itself_and_nothing_else(key):
    entries = resolve(key)
    cases = probes(key)
    problems = []
    for entry in entries:
        applicable = [
            (args, kwargs, out)
            for args, kwargs in cases
            if (out := _safe(entry.compute, args, kwargs)) is not None
        ]
        if not applicable:
            problems.append(f"{entry.name!r}: applies to no probe")
            continue
        args, kwargs, got = applicable[0]
        named = diagnose(got, key, args, kwargs, compare, call=entry.compute)
        if named is not entry:
            problems.append(
                f"{entry.name!r} is named {named.name if named else None!r} on the probes"
            )
    assert not problems, "\n".join(problems)


def _safe(fn, args, kwargs):
    from bertcourse.grading.values import _copy

    try:
        a, k = _copy((args, kwargs))
        return fn(*a, **k)
    except Exception:  # noqa: BLE001 - a mistake that does not apply to these inputs
        return None


@pytest.mark.parametrize("key", KEYS)
def test_headlines_fit_the_validate_views(key):
    """The first line of a named failure (mistake + section) fits nbgrader validate's 83
    visible characters and names the section when it fits."""
    for entry in resolve(key):
        assert len(entry.headline) <= HEADLINE_WIDTH, entry.headline
        assert entry.headline.startswith(entry.name) and " — chapter " in entry.headline


def test_a_learner_sees_the_mistake_first_and_no_grading_frame():
    """What JupyterLab and `nbgrader validate` show for a failed check (checks.learner_traceback):
    the headline first, every line within the validate views' width, no grading frame."""
    import sys

    import torch

    from bertcourse import grading
    from bertcourse.grading import checks

    def scaled_dot_product_attention(q, k, v, bias=None):  # the d_k mistake
        scores = q @ k.transpose(-2, -1) / q.shape[-1]
        probs = torch.softmax(scores if bias is None else scores + bias, dim=-1)
        return probs @ v, probs

    q, k, v = (grading.randn(1, 2, 4, 8, seed=s) for s in (1, 2, 3))
    checks._PARTS.pre_run_cell()
    try:
        grading.check_close(
            scaled_dot_product_attention,
            "bertcourse.attention.scaled_dot_product_attention",
            q, k, v, forbid="sdpa", mistakes="sdpa",
        )  # fmt: skip
    except grading.GradingError:
        _, error, tb = sys.exc_info()
    else:
        raise AssertionError("the d_k mistake passed")
    lines = checks.learner_traceback(error, tb)
    (sdpa,) = [m for m in resolve("sdpa") if "d_k, not" in m.name]
    assert lines[0] == sdpa.headline == str(error).splitlines()[0]
    assert all(len(line) <= HEADLINE_WIDTH for line in lines), lines
    assert lines[-2].startswith("Parts checked so far: ✗ scaled_dot_product_attention")
    assert "in this cell" in lines[-1] and "grading.check_close(" in lines[-1]
    assert not any("checks.py" in line or "GradingError(" in line for line in lines)
