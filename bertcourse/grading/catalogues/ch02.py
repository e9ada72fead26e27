"""Known mistakes of chapter 2's newer parts (nn.MultiheadAttention's key_padding_mask)."""

from __future__ import annotations

import torch

from bertcourse.grading.mistakes import Mistake

POLARITY = "chapter 2, 'Boolean masks: two opposite conventions'"

CATALOGUE: dict[str, list[Mistake]] = {
    "key_padding_mask": [
        Mistake(
            "SDPA's polarity (True = may attend)",
            "nn.MultiheadAttention's key_padding_mask is True where a key is ignored (padding)",
            POLARITY,
            lambda mask: mask.bool(),
        ),
        Mistake(
            "a 0/1 integer mask instead of booleans",
            "key_padding_mask is a torch.bool tensor, True where the attention_mask is 0",
            POLARITY,
            lambda mask: (mask == 0).long(),
        ),
    ],
}


PROBES = {"key_padding_mask": lambda: [((torch.tensor([[1, 1, 0], [1, 0, 0]]),), {})]}
