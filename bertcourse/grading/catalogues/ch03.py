"""Known mistakes of chapter 3 (masked-language-model sampling): what each gives, computed.

`replace_chosen` draws at random, so its check recognises those mistakes by a property of the
output (every row with the same number of chosen tokens gets the same counts; 2% random ids
instead of 10%; every chosen position [MASK]; labels everywhere; the caller's ids changed; the
same seed giving other ids; a division by zero at mask_replace_prob = 1) and uses the entries
for the message; `compute` gives each mistake itself, drawn with the generator it is given.
`choose` is recognised the same way (a special token chosen, the same count in every row, 15%
chosen where 0.3 was asked, the same choice for two seeds; the generator and in-place entries
of `replace` serve both parts), but its entries are deterministic given the generator, so they
have probes; so have `num_predictions` (the original's count) and `words` (whole-word groups).
"""

from __future__ import annotations

import torch
from torch import Tensor

from bertcourse.config import IGNORE_INDEX
from bertcourse.grading import mistakes
from bertcourse.grading.mistakes import Mistake

MISTAKES = "chapter 3, 'Common mistakes'"
SPLIT = "chapter 3, 'The `int(n * 0.8)` bias'"
RULES = "chapter 3, 'The two rules'"
WORDS = "chapter 3, 'Whole-word masking'"


def _choose(
    input_ids: Tensor,
    special_token_ids,
    mlm_probability: float = 0.15,
    generator: torch.Generator | None = None,
    *,
    specials: bool = False,
    probability: float | None = None,
    own_seed: int | None = None,
) -> Tensor:
    """Independent draws, or one of the mistakes named by the keywords."""
    if own_seed is not None:
        generator = torch.Generator().manual_seed(own_seed)
    p = mlm_probability if probability is None else probability
    chosen = torch.rand(input_ids.shape, generator=generator) < p
    if specials:
        return chosen
    return chosen & ~torch.isin(input_ids, torch.tensor(list(special_token_ids)))


def _fixed_count(
    input_ids: Tensor,
    special_token_ids,
    mlm_probability: float = 0.15,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The original's rule in place of independent draws: round(p x n) per row, at random."""
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    chosen = torch.zeros_like(special)
    for b in range(input_ids.shape[0]):
        candidates = (~special[b]).nonzero().flatten()
        k = round(len(candidates) * mlm_probability)
        chosen[b, candidates[torch.randperm(len(candidates), generator=generator)[:k]]] = True
    return chosen


def _labels(input_ids: Tensor, chosen: Tensor) -> Tensor:
    return input_ids.long().masked_fill(~chosen, IGNORE_INDEX)


def _per_row_split(
    input_ids: Tensor,
    chosen: Tensor,
    *,
    vocab_size: int,
    mask_token_id: int,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Seed 002's rule: int(n * 0.8) of a row's n chosen tokens get [MASK], int(n * 0.1) a
    random id, in a random order."""
    masked = input_ids.clone()
    for b in range(input_ids.shape[0]):
        positions = chosen[b].nonzero().squeeze(-1)
        positions = positions[torch.randperm(len(positions), generator=generator)]
        n_mask = int(len(positions) * mask_replace_prob)
        n_random = int(len(positions) * random_replace_prob)
        masked[b, positions[:n_mask]] = mask_token_id
        rand = positions[n_mask : n_mask + n_random]
        masked[b, rand] = torch.randint(vocab_size, (len(rand),), generator=generator)
    return masked, _labels(input_ids, chosen)


def _unconditional_second_draw(
    input_ids: Tensor,
    chosen: Tensor,
    *,
    vocab_size: int,
    mask_token_id: int,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """The second draw at random_replace_prob instead of random_replace_prob / (1 - mask_replace_prob)."""
    masked = input_ids.clone()
    to_mask = (torch.rand(input_ids.shape, generator=generator) < mask_replace_prob) & chosen
    masked[to_mask] = mask_token_id
    second = torch.rand(input_ids.shape, generator=generator) < random_replace_prob
    to_random = second & chosen & ~to_mask
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator)
    masked[to_random] = random_ids[to_random]
    return masked, _labels(input_ids, chosen)


def _replace(
    input_ids: Tensor,
    chosen: Tensor,
    *,
    vocab_size: int,
    mask_token_id: int,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
    generator: torch.Generator | None = None,
    all_mask: bool = False,
    labels_everywhere: bool = False,
    in_place: bool = False,
    unguarded: bool = False,
) -> tuple[Tensor, Tensor]:
    """The two draws of transformers, or one of the mistakes named by the flags."""
    labels = input_ids.clone().long() if labels_everywhere else _labels(input_ids, chosen)
    masked = input_ids if in_place else input_ids.clone()
    if all_mask:
        masked[chosen] = mask_token_id
        return masked, labels
    to_mask = (torch.rand(input_ids.shape, generator=generator) < mask_replace_prob) & chosen
    masked[to_mask] = mask_token_id
    if mask_replace_prob < 1 or unguarded:
        p_random = random_replace_prob / (1.0 - mask_replace_prob)  # 1 / 0 when unguarded
        to_random = (
            (torch.rand(input_ids.shape, generator=generator) < p_random) & chosen & ~to_mask
        )
        random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator)
        masked[to_random] = random_ids[to_random]
    return masked, labels


def _global_generator(input_ids: Tensor, chosen: Tensor, *, generator=None, **rates):
    """The draws from PyTorch's global generator, whatever `generator` is given."""
    return _replace(input_ids, chosen, generator=None, **rates)


def _count(n: int, prob: float, cap: int, *, minimum: int = 1, specials: int = 0) -> int:
    return min(cap, max(minimum, round((n - specials) * prob)))


def _groups(
    tokens: list[str],
    special_tokens=("[CLS]", "[SEP]"),
    *,
    skip_specials: bool = True,
    join: bool = True,
    join_after: bool = False,
) -> list[list[int]]:
    groups: list[list[int]] = []
    for position, token in enumerate(tokens):
        if skip_specials and token in special_tokens:
            continue
        continues = tokens[position - 1].startswith("##") if join_after else token.startswith("##")
        if join and groups and continues:
            groups[-1].append(position)
        else:
            groups.append([position])
    return groups


CATALOGUE: dict[str, list[Mistake]] = {
    "choose": [
        Mistake(
            "special tokens chosen too",
            "[CLS], [SEP] and [PAD] are never predicted: leave the special_token_ids out",
            RULES,
            lambda *a, **k: _choose(*a, **k, specials=True),
        ),
        Mistake(
            "a fixed number chosen per row, not independent draws",
            "transformers chooses each token on its own with probability p, so the count "
            "per row is binomial; a fixed round(p x n) is the original's rule",
            RULES,
            _fixed_count,
        ),
        Mistake(
            "0.15 hard-coded instead of mlm_probability",
            "draw with the mlm_probability argument: 0.15 is only its default",
            RULES,
            lambda *a, **k: _choose(*a, **k, probability=0.15),
        ),
        Mistake(
            "the same draws whatever the generator's seed",
            "draw from the generator given (generator=generator), not from one seeded inside "
            "the function",
            RULES,
            lambda *a, **k: _choose(*a, **k, own_seed=0),
        ),
    ],
    "replace": [
        Mistake(
            "a per-row split by counts (int(n * 0.8), int(n * 0.1))",
            "int() rounds down, so a row with fewer than 10 chosen tokens never gets a random id; "
            "draw each chosen position on its own",
            SPLIT,
            _per_row_split,
        ),
        Mistake(
            "the unconditional 0.1 as the second draw's probability",
            "among the positions left after the 80% [MASK] draw, a random id needs probability "
            "0.1 / (1 - 0.8) = 0.5; 0.1 there gives 2% random ids instead of 10%",
            MISTAKES,
            _unconditional_second_draw,
        ),
        Mistake(
            "every chosen position [MASK] (no random id, none kept)",
            "80% [MASK], 10% a random id, 10% the original token: the model must not learn "
            "that only [MASK] positions are predicted",
            "chapter 3, 'Why not always [MASK]?'",
            lambda *a, **k: _replace(*a, **k, all_mask=True),
        ),
        Mistake(
            "labels at every position, not -100 where nothing was chosen",
            "the label is the original id at a chosen position and -100 (ignored by the loss) "
            "elsewhere",
            "chapter 4, 'The MLM loss is a mean over the chosen positions'",
            lambda *a, **k: _replace(*a, **k, labels_everywhere=True),
        ),
        Mistake(
            "the caller's input_ids modified in place",
            "dynamic masking masks the same batch again at every epoch: work on input_ids.clone()",
            "chapter 3, 'Static and dynamic masking'",
            lambda *a, **k: _replace(*a, **k, in_place=True),
        ),
        Mistake(
            "random numbers not drawn from the generator argument",
            "pass generator=generator to every torch.rand, torch.bernoulli and torch.randint, "
            "so that the same seed gives the same batch",
            RULES,
            _global_generator,
        ),
        Mistake(
            "no guard for mask_replace_prob = 1 (0.1 / (1 - 1))",
            "when every chosen position gets [MASK] nothing is left for the second draw: "
            "skip it, as transformers does",
            RULES,
            lambda *a, **k: _replace(*a, **k, unguarded=True),
        ),
    ],
    "num_predictions": [
        *mistakes.CATALOGUE["num_predictions"],
        Mistake(
            "[CLS] and [SEP] left out of n (seq_len - 2)",
            "the original's count rounds seq_len x 0.15, the special tokens included",
            RULES,
            lambda n, prob=0.15, cap=20: _count(n, prob, cap, specials=2),
        ),
        Mistake(
            "no minimum of 1 (a short sequence gets no target)",
            "the original masks max(1, round(n x 0.15)) positions: at least one",
            RULES,
            lambda n, prob=0.15, cap=20: _count(n, prob, cap, minimum=0),
        ),
    ],
    "words": [
        Mistake(
            "special tokens grouped as words",
            "[CLS], [SEP] (the special_tokens) belong to no word: skip them",
            WORDS,
            lambda tokens, special_tokens=("[CLS]", "[SEP]"): _groups(
                tokens, special_tokens, skip_specials=False
            ),
        ),
        Mistake(
            "every piece a word of its own ('##' ignored)",
            "a '##' piece continues the word of the piece before it",
            WORDS,
            lambda tokens, special_tokens=("[CLS]", "[SEP]"): _groups(
                tokens, special_tokens, join=False
            ),
        ),
        Mistake(
            "a '##' piece joined to the word after it",
            "a '##' piece continues the word before it; the piece after it starts a new word "
            "unless it starts with '##' too",
            WORDS,
            lambda tokens, special_tokens=("[CLS]", "[SEP]"): _groups(
                tokens, special_tokens, join_after=True
            ),
        ),
    ],
}


# --- probes of the deterministic catalogues (tests/test_catalogues.py) ---------------------

_TOKENS = ["[CLS]", "the", "em", "##bed", "##ding", "is", "learn", "##ed", "[SEP]", "b", "[SEP]"]


def _choose_probes() -> list[tuple[tuple, dict]]:
    ids = torch.tensor([[101, 5, 6, 7, 8, 9, 10, 11, 102, 12, 13, 14, 15, 16, 17, 102, 0, 0]] * 4)
    return [
        ((ids, (0, 101, 102), p), {"generator": torch.Generator().manual_seed(seed)})
        for p, seed in ((0.5, 301), (0.3, 302))
    ]


PROBES = {
    "choose": _choose_probes,
    "num_predictions": lambda: [
        *mistakes.PROBES["num_predictions"](),
        ((1,), {}),
        ((3,), {}),
        ((10, 0.5), {}),  # seq_len - 2: 4, the others 5
        ((12, 0.25), {}),
    ],
    "words": lambda: [
        ((_TOKENS,), {}),
        ((["[CLS]", "##x", "a", "[PAD]", "##b"], ("[CLS]", "[PAD]")), {}),
    ],
}
