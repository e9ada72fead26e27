"""Known mistakes of chapter 4's log-softmax and gathered MLM loss (the cross-entropy and its
gradient are in `bertcourse.grading.mistakes.CATALOGUE`)."""

from __future__ import annotations

import torch
from torch import Tensor

from bertcourse.config import IGNORE_INDEX
from bertcourse.grading.mistakes import Mistake, _randn

STABLE = "chapter 4, 'From logits to probabilities'"
MEAN = "chapter 4, 'The MLM loss is a mean over the chosen positions'"
GATHER = "chapter 4, 'Where the logits are computed: gather, then project'"


def _log_softmax(logits: Tensor, *, shift: str = "row", upcast: bool = False) -> Tensor:
    """The log-softmax with one thing changed: the max of each row, of the tensor or none."""
    z = logits.float() if upcast else logits
    if shift == "row":
        z = z - z.amax(dim=-1, keepdim=True)
    elif shift == "all":
        z = z - z.max()
    return z - torch.log(torch.exp(z).sum(dim=-1, keepdim=True))


def _mlm(hidden, labels, weight, bias, *, divide_by_all=False, drop_zeros=False, no_bias=False):
    """The gathered MLM loss with one thing changed: (loss, logits at the labelled positions)."""
    keep = labels != IGNORE_INDEX
    logits = hidden[keep] @ weight.T
    if not no_bias:
        logits = logits + bias
    losses = -torch.log_softmax(logits, dim=-1).gather(-1, labels[keep][:, None]).squeeze(-1)
    if divide_by_all:
        return losses.sum() / labels.numel(), logits
    if drop_zeros:
        return losses[losses != 0].mean(), logits
    return losses.mean(), logits


CATALOGUE: dict[str, list[Mistake]] = {
    "log_softmax": [
        Mistake(
            "no max subtracted (exp overflows for large logits)",
            "log sum exp(z) = m + log sum exp(z - m) with m the row's max: every exponent <= 0",
            STABLE,
            lambda logits: _log_softmax(logits, shift="none"),
        ),
        Mistake(
            "log(softmax(z)) in two steps (log 0 = -inf)",
            "a probability that underflows to 0 has log -inf; z - m - log sum exp(z - m) does not",
            STABLE,
            lambda logits: torch.log(torch.softmax(logits, dim=-1)),
        ),
        Mistake(
            "the max of the whole tensor, not of each row",
            "a row far below the largest logit then underflows to exp(...) = 0: take "
            "amax(dim=-1, keepdim=True)",
            STABLE,
            lambda logits: _log_softmax(logits, shift="all"),
        ),
        Mistake(
            "a float32 result, not the logits' dtype",
            "the result has the logits' dtype: compute in float32 if you like, then cast back",
            STABLE,
            lambda logits: _log_softmax(logits, upcast=True),
        ),
    ],
    "mlm": [
        Mistake(
            "the MLM loss divided by B x L, not by the N labelled positions",
            "the mean runs over the chosen positions only; padding and unchosen tokens dilute it",
            MEAN,
            lambda *args: _mlm(*args, divide_by_all=True),
        ),
        Mistake(
            "the mean of the non-zero losses (seed 000's loss[loss != 0])",
            "a position predicted with certainty has loss exactly 0 and must still count",
            MEAN,
            lambda *args: _mlm(*args, drop_zeros=True),
        ),
        Mistake(
            "the decoder bias left out of the logits",
            "the MLM head's logits are h W^T + b: the tied weight and the decoder's own bias",
            GATHER,
            lambda *args: _mlm(*args, no_bias=True),
        ),
    ],
}


def _log_softmax_probes():
    """Rows far apart (the max of the tensor), large logits (overflow, underflow), float16."""
    rows = torch.stack([_randn(6, seed=120) + 1000.0, _randn(6, seed=121)])
    return [
        ((rows,), {}),
        ((_randn(3, 5, seed=122, scale=1000.0),), {}),
        ((_randn(4, 8, seed=123, scale=5.0, dtype=torch.float16),), {}),
    ]


def _mlm_probes():
    """One position predicted with certainty (loss 0), unchosen positions, a non-zero bias."""
    hidden, weight, bias = _randn(2, 5, 8, seed=124), _randn(30, 8, seed=125), _randn(30, seed=126)
    labels = torch.tensor(
        [[IGNORE_INDEX, 7, IGNORE_INDEX, 3, IGNORE_INDEX], [11, -100, -100, -100, 29]]
    )
    hidden[0, 1] = 1000.0 * weight[7]
    return [((hidden, labels, weight, bias), {})]


PROBES = {"log_softmax": _log_softmax_probes, "mlm": _mlm_probes}
