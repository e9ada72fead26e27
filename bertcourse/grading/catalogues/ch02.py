"""Known mistakes of chapter 2 (attention-mask semantics): what each gives, computed.

`padding_mask`, `extended_mask` and `sdpa_mask` extend the shared catalogues of
`bertcourse.grading.mistakes` (polarity and constant) with the shapes, dtypes and ids a learner
gets wrong; each `compute` takes the reference's arguments.
"""

from __future__ import annotations

import torch
from torch import Tensor

from bertcourse.grading import mistakes
from bertcourse.grading.mistakes import Mistake

POLARITY = "chapter 2, 'Boolean masks: two opposite conventions'"
BIAS = "chapter 2, 'From padding to an additive bias'"
FULLY_MASKED = "chapter 2, 'A fully masked row'"


def _bias(attention_mask: Tensor, dtype: torch.dtype) -> Tensor:
    return (1.0 - attention_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


def _nan_rows(scores: Tensor, attention_mask: Tensor) -> Tensor:
    """-inf at the padded keys (or a renormalised softmax): a fully masked row is 0/0 = NaN."""
    keep = attention_mask[:, None, None, :].bool()
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)


CATALOGUE: dict[str, list[Mistake]] = {
    "padding_mask": [
        *mistakes.CATALOGUE["padding_mask"],
        Mistake(
            "the padding id hard-coded to 0",
            "use the pad_token_id argument: RoBERTa's padding id is 1",
            BIAS,
            lambda ids, pad_token_id=0: (ids != 0).long(),
        ),
        Mistake(
            "booleans instead of 0/1 integers (torch.long)",
            "the mask is a torch.long tensor of 0 and 1, as transformers' attention_mask: "
            "convert the comparison with .long()",
            BIAS,
            lambda ids, pad_token_id=0: ids != pad_token_id,
        ),
        Mistake(
            "an int32 mask (.int()) instead of torch.long",
            "transformers' attention_mask is torch.long (int64): convert with .long()",
            BIAS,
            lambda ids, pad_token_id=0: (ids != pad_token_id).int(),
        ),
    ],
    "extended_mask": [
        *mistakes.CATALOGUE["extended_mask"],
        Mistake(
            "the query rows masked, (B, 1, L, 1), not the key columns",
            "the bias is (B, 1, 1, L): it masks the padded keys of every query row",
            "chapter 2, 'Keys are masked, queries are not'",
            lambda mask, dtype=torch.float32: (
                (1.0 - mask[:, None, :, None].to(dtype)) * torch.finfo(dtype).min
            ),
        ),
        Mistake(
            "float32's minimum whatever the dtype",
            "the constant is torch.finfo(dtype).min of the dtype asked: float32's overflows to "
            "-inf in float16 and bfloat16, and is not float64's",
            mistakes.MASKS,
            lambda mask, dtype=torch.float32: (
                (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(torch.float32).min
            ),
        ),
    ],
    "masked_softmax": [
        Mistake(
            "a fully masked row gives NaN (-inf, or 0/0 after renormalising)",
            "with a finite bias (the dtype's minimum) a row with every key masked is uniform, "
            "1/L; -inf or zeroing then renormalising gives 0/0",
            FULLY_MASKED,
            _nan_rows,
        ),
        Mistake(
            "the scores multiplied by the mask instead of a bias added",
            "a score times 0 is 0, not a very negative number: the padded keys keep exp(0) = 1",
            BIAS,
            lambda scores, attention_mask: torch.softmax(
                scores * attention_mask[:, None, None, :], dim=-1
            ),
        ),
        Mistake(
            "the softmax over the queries (dim=-2)",
            "each query's weights sum to 1 over the keys, the last dimension",
            mistakes.SDPA_DIM,
            lambda scores, attention_mask: torch.softmax(
                scores + _bias(attention_mask, scores.dtype), dim=-2
            ),
        ),
    ],
    "sdpa_mask": [
        *mistakes.CATALOGUE["sdpa_mask"],
        Mistake(
            "a float 0/1 mask instead of booleans",
            "the fused attention adds a float mask to the scores (0 or 1 there, nothing "
            "masked); True/False selects: use .bool()",
            POLARITY,
            lambda mask: mask[:, None, None, :].float(),
        ),
        Mistake(
            "shaped (B, L), not (B, 1, 1, L)",
            "the fused attention broadcasts the mask against the (B, A, L, L) scores: the key "
            "dimension last, 1 for the heads and the queries",
            POLARITY,
            lambda mask: mask.bool(),
        ),
    ],
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
        Mistake(
            "shaped (B, 1, 1, L) like the SDPA mask, not (B, L)",
            "nn.MultiheadAttention's key_padding_mask is (B, L), one flag per key",
            POLARITY,
            lambda mask: (mask == 0)[:, None, None, :],
        ),
    ],
}


def _masked_softmax_probes() -> list[tuple[tuple, dict]]:
    scores = torch.randn(2, 1, 2, 3, generator=torch.Generator().manual_seed(201))
    return [((scores, torch.tensor([[1, 1, 0], [0, 0, 0]])), {})]


PROBES = {
    "padding_mask": mistakes.PROBES["padding_mask"],
    "extended_mask": lambda: [
        *mistakes.PROBES["extended_mask"](),
        ((torch.tensor([[1, 0]]), torch.float64), {}),
    ],
    "masked_softmax": _masked_softmax_probes,
    "sdpa_mask": mistakes.PROBES["sdpa_mask"],
    "key_padding_mask": lambda: [((torch.tensor([[1, 1, 0], [1, 0, 0]]),), {})],
}
