"""Known mistakes of chapter 10 (the ablations' tools): what each gives, computed.

`corrupt` draws at random, so its check recognises those mistakes by a property of the output
(the RND share of the unconditioned second draw, SAME and RND swapped, labels only at [MASK],
15% chosen where 0.4 was asked, a division by zero at MASK = 1, an exact float comparison of the
sum, an invalid split accepted, the same seed giving other ids) and uses the entries for the
message; `compute` gives each mistake itself, drawn with the generator it is given. `static`
and `paired` are deterministic given their inputs (`rng` for `static`), so they have probes.
"""

from __future__ import annotations

import math
import random

import torch
from torch import Tensor

from bertcourse.config import IGNORE_INDEX
from bertcourse.grading.mistakes import Mistake

SPLIT = "chapter 3, 'Why not always [MASK]?'"
RULES = "chapter 3, 'The two rules'"
STATIC = "chapter 3, 'Static and dynamic masking'"
SEEDS = "chapter 8, 'Seeds'"


# --- corrupt: any MASK/SAME/RND split -------------------------------------------------------


def _corrupt(
    input_ids: Tensor,
    special_token_ids,
    split,
    *,
    vocab_size: int,
    mask_token_id: int,
    mlm_probability: float = 0.15,
    generator: torch.Generator | None = None,
    rate: float | None = None,
    unconditioned: bool = False,
    swapped: bool = False,
    labels_at_mask_only: bool = False,
    specials: bool = False,
    exact_sum: bool = False,
    unchecked: bool = False,
    in_place: bool = False,
    unguarded: bool = False,
) -> tuple[Tensor, Tensor]:
    """The two Bernoulli draws of transformers for any split, or a mistake named by a flag."""
    mask, same, rnd = split
    if not unchecked:
        total = mask + same + rnd
        if min(split) < 0 or (total != 1 if exact_sum else abs(total - 1) > 1e-9):
            raise ValueError(f"not a split: {split}")
    if swapped:
        same, rnd = rnd, same
    p = mlm_probability if rate is None else rate
    chosen = torch.rand(input_ids.shape, generator=generator) < p
    if not specials:
        chosen &= ~torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    corrupted = input_ids if in_place else input_ids.clone()
    to_mask = (torch.rand(input_ids.shape, generator=generator) < mask) & chosen
    labels = input_ids.long().masked_fill(
        ~(to_mask if labels_at_mask_only else chosen), IGNORE_INDEX
    )
    if unconditioned:
        p_random = rnd
    elif mask < 1 or unguarded:
        p_random = rnd / (1.0 - mask)  # 1 / 0 at mask = 1 when unguarded
    else:
        p_random = 0.0
    to_random = (torch.rand(input_ids.shape, generator=generator) < p_random) & chosen & ~to_mask
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator)
    corrupted[to_mask] = mask_token_id
    corrupted[to_random] = random_ids[to_random]
    return corrupted, labels


def _global_generator(input_ids, special_token_ids, split, *, generator=None, **kwargs):
    """The draws from PyTorch's global generator, whatever `generator` is given."""
    return _corrupt(input_ids, special_token_ids, split, generator=None, **kwargs)


# --- static: the original's static masking with a duplicate factor -------------------------


def _static(
    sequences,
    dupe_factor: int,
    rng,
    *,
    once: bool = False,
    by_sequence: bool = False,
    shuffle: str = "all",
    fewer: int = 0,
    **masking,
):
    """The original's copies (copy by copy, one shuffle at the end), or a mistake named by a
    keyword: `once` masks each sequence once and repeats that mask; `by_sequence` draws the
    copies of a sequence one after the other; `shuffle` "none", "each" (every copy on its
    own) or "all"; `fewer` copies fewer than dupe_factor."""
    from bertcourse.mlm import create_masked_lm_predictions

    n = dupe_factor - fewer

    def masked(tokens):
        return create_masked_lm_predictions(tokens, rng=rng, **masking)

    instances: list = []
    if by_sequence:
        instances = [masked(tokens) for tokens in sequences for _ in range(n)]
    once_masked = [masked(tokens) for tokens in sequences] if once else None
    for _ in range(0 if by_sequence else n):
        copy = list(once_masked) if once else [masked(tokens) for tokens in sequences]
        if shuffle == "each":
            rng.shuffle(copy)
        instances += copy
    if shuffle == "all":
        rng.shuffle(instances)
    return instances


# --- paired: the paired comparison over seeds -----------------------------------------------


def _paired(
    a,
    b,
    *,
    unpaired: bool = False,
    ddof: int = 1,
    root_n: bool = True,
    per_n: bool = False,
    at_two: bool = False,
    signed: bool = False,
) -> tuple[float, float, str]:
    """Mean difference, standard error and verdict, or a mistake named by a keyword."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("one score per seed in each row, at least 2 seeds")
    n = len(a)

    def variance(xs: list[float]) -> float:
        mean = math.fsum(xs) / n
        return math.fsum((x - mean) ** 2 for x in xs) / (n - ddof)

    d = [x - y for x, y in zip(a, b)]
    mean = math.fsum(d) / n
    if unpaired:  # the two rows' own spreads, as if different seeds had made them
        se = math.sqrt(variance(list(a)) / n + variance(list(b)) / n)
    else:
        se = math.sqrt(variance(d))
        se = se / n if per_n else se / math.sqrt(n) if root_n else se
    size = mean if signed else abs(mean)
    differs = size >= 2 * se if at_two else size > 2 * se
    return mean, se, "differs" if differs else "cannot tell"


CATALOGUE: dict[str, list[Mistake]] = {
    "corrupt": [
        Mistake(
            "the second draw not conditioned on the first",
            "among the positions left after the [MASK] draw a random id needs probability "
            "random / (1 - mask); random alone gives random x (1 - mask) random ids",
            SPLIT,
            lambda *a, **k: _corrupt(*a, **k, unconditioned=True),
        ),
        Mistake(
            "no guard for a MASK share of 1 (random / (1 - 1))",
            "when every chosen position shows [MASK] nothing is left for a second draw: skip it",
            RULES,
            lambda *a, **k: _corrupt(*a, **k, unguarded=True),
        ),
        Mistake(
            "SAME and RND swapped",
            "the split is (mask, same, random), the order of the paper's Table 8: the second "
            "share keeps the token, the third draws a random id",
            SPLIT,
            lambda *a, **k: _corrupt(*a, **k, swapped=True),
        ),
        Mistake(
            "labels only where [MASK] is shown",
            "every chosen position is predicted, whatever it shows: the model must also "
            "predict under a random id and under its own token",
            SPLIT,
            lambda *a, **k: _corrupt(*a, **k, labels_at_mask_only=True),
        ),
        Mistake(
            "special tokens chosen too",
            "[CLS], [SEP] and [PAD] are never predicted: leave the special_token_ids out",
            RULES,
            lambda *a, **k: _corrupt(*a, **k, specials=True),
        ),
        Mistake(
            "0.15 hard-coded instead of mlm_probability",
            "draw with the mlm_probability argument: the ablations also mask 40%",
            RULES,
            lambda *a, **k: _corrupt(*a, **k, rate=0.15),
        ),
        Mistake(
            "the sum of the shares compared with 1 exactly",
            "floats do not add exactly (0.7 + 0.2 + 0.1 is 0.9999999999999999): accept a sum "
            "within 1e-9 of 1",
            SPLIT,
            lambda *a, **k: _corrupt(*a, **k, exact_sum=True),
        ),
        Mistake(
            "an invalid split accepted",
            "three shares of the chosen positions are non-negative and sum to 1: refuse "
            "anything else with a ValueError, before it silently corrupts a pretraining run",
            SPLIT,
            lambda *a, **k: _corrupt(*a, **k, unchecked=True),
        ),
        Mistake(
            "the caller's input_ids modified in place",
            "a batch is corrupted again for every run of an ablation: work on input_ids.clone()",
            STATIC,
            lambda *a, **k: _corrupt(*a, **k, in_place=True),
        ),
        Mistake(
            "random numbers not drawn from the generator argument",
            "pass generator=generator to every torch.rand, torch.bernoulli and torch.randint, "
            "so that a seed gives the same batch in every row of the ablation",
            RULES,
            _global_generator,
        ),
    ],
    "static": [
        Mistake(
            "the same mask in every copy",
            "each copy is masked with new draws of the same rng: one mask repeated "
            "dupe_factor times shows the model nothing new",
            STATIC,
            lambda *a, **k: _static(*a, **k, once=True),
        ),
        Mistake(
            "the copies drawn sequence by sequence",
            "the original masks the whole corpus once per copy (for each copy, for each "
            "sequence): the same rng then gives the original's data",
            STATIC,
            lambda *a, **k: _static(*a, **k, by_sequence=True),
        ),
        Mistake(
            "the instances not shuffled",
            "the original shuffles all the copies together once at the end: unshuffled, "
            "training reads copy 1 of every sequence before copy 2",
            STATIC,
            lambda *a, **k: _static(*a, **k, shuffle="none"),
        ),
        Mistake(
            "each copy shuffled on its own",
            "the original shuffles once, all the copies together, after the last copy",
            STATIC,
            lambda *a, **k: _static(*a, **k, shuffle="each"),
        ),
        Mistake(
            "dupe_factor - 1 copies",
            "range(dupe_factor) makes dupe_factor copies",
            STATIC,
            lambda *a, **k: _static(*a, **k, fewer=1),
        ),
    ],
    "paired": [
        Mistake(
            "an unpaired standard error (the rows' own spreads)",
            "the same seed makes both runs: the spread that matters is that of the "
            "differences a_i - b_i, not of a and b separately",
            SEEDS,
            lambda a, b: _paired(a, b, unpaired=True),
        ),
        Mistake(
            "the population standard deviation (n, not n - 1)",
            "the sample standard deviation divides by n - 1: with 3 seeds n makes the standard "
            "error 18% too small",
            SEEDS,
            lambda a, b: _paired(a, b, ddof=0),
        ),
        Mistake(
            "the standard deviation instead of the standard error",
            "the standard error of a mean of n differences is s_d / sqrt(n)",
            SEEDS,
            lambda a, b: _paired(a, b, root_n=False),
        ),
        Mistake(
            "the standard error divided by n, not sqrt(n)",
            "the standard error of a mean of n differences is s_d / sqrt(n)",
            SEEDS,
            lambda a, b: _paired(a, b, per_n=True),
        ),
        Mistake(
            "a difference claimed at exactly 2 SE (>=, not >)",
            "a difference is claimed only when it exceeds two standard errors: two identical "
            "rows (0 and 0) cannot be told apart",
            SEEDS,
            lambda a, b: _paired(a, b, at_two=True),
        ),
        Mistake(
            "a difference of b over a never claimed (mean, not |mean|)",
            "the difference is claimed in either direction when |mean| > 2 SE: a negative mean "
            "says b is better",
            SEEDS,
            lambda a, b: _paired(a, b, signed=True),
        ),
    ],
}


# --- probes of the deterministic catalogues (tests/test_catalogues.py) ---------------------

PROBES = {
    "static": lambda: [
        ((_probe_sequences(5, seed), dupe_factor, random.Random(seed)), dict(_PROBE_MASKING))
        for seed, dupe_factor in ((301, 3), (302, 2))
    ],
    "paired": lambda: [
        (([0.81, 0.84, 0.80, 0.86], [0.78, 0.83, 0.76, 0.83]), {}),  # a better
        (([0.70, 0.75, 0.72], [0.74, 0.79, 0.80]), {}),  # b better
        (([0.7, 0.8, 0.9], [0.7, 0.8, 0.9]), {}),  # identical rows
        (([0.5, 0.7, 0.6, 0.65, 0.55], [0.6, 0.5, 0.6, 0.62, 0.61]), {}),  # cannot tell
    ],
}


_PROBE_MASKING = {"special_token_ids": (101, 102), "vocab_size": 30522, "mask_token_id": 103}


def _probe_sequences(count: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [
        [101, *(rng.randrange(999, 30522) for _ in range(rng.randint(8, 20))), 102]
        for _ in range(count)
    ]
