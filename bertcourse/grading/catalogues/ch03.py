"""Known mistakes of chapter 3's replacement rule (80% [MASK], 10% random, 10% kept).

`replace_chosen` draws at random, so its check recognises these mistakes by a property of the
output (every row with the same number of chosen tokens gets the same counts; 2% random ids
instead of 10%) and uses the entries for the message; `compute` gives each mistake itself, drawn
with the generator it is given.
"""

from __future__ import annotations

import torch
from torch import Tensor

from bertcourse.config import IGNORE_INDEX
from bertcourse.grading.mistakes import Mistake

MISTAKES = "chapter 3, 'Common mistakes'"
SPLIT = "chapter 3, 'The `int(n * 0.8)` bias'"


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


CATALOGUE: dict[str, list[Mistake]] = {
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
    ],
}
