"""Known mistakes of the fine-tuning exercises (chapter 8): what each gives, computed.

Each `compute` takes the arguments of the part's reference: `(pooled, weight, bias, labels)`
for the classification head.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from bertcourse.grading.mistakes import Mistake

HEAD = "chapter 8, 'The model: one linear layer on the pooled [CLS] vector'"


def _head(
    pooled: Tensor,
    weight: Tensor,
    bias: Tensor,
    labels: Tensor,
    *,
    use_bias: bool = True,
    classification: Callable[[Tensor, Tensor], Tensor] | None = None,
    regression: Callable[[Tensor, Tensor], Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    logits = pooled @ weight.T + (bias if use_bias else 0)  # (B, C)
    if weight.shape[0] == 1:
        fn = regression or (lambda z, y: F.mse_loss(z[:, 0], y.to(z.dtype)))
    else:
        fn = classification or F.cross_entropy
    return logits, fn(logits, labels)


def _broadcast_mse(z: Tensor, y: Tensor) -> Tensor:
    with warnings.catch_warnings():  # F.mse_loss warns about the broadcast: keep stderr clean
        warnings.simplefilter("ignore")
        return F.mse_loss(z, y.to(z.dtype))


CATALOGUE: dict[str, list[Mistake]] = {
    "head": [
        Mistake(
            "a softmax before the cross-entropy",
            "F.cross_entropy takes the logits and applies log-softmax itself; a softmax "
            "before it squashes the scores into [0, 1] and the loss never reaches 0",
            HEAD,
            lambda p, w, b, y: _head(
                p, w, b, y, classification=lambda z, t: F.cross_entropy(z.softmax(-1), t)
            ),
        ),
        Mistake(
            "the log of the softmax, computed in two steps",
            "softmax underflows to 0 for a confident mistake and log(0) is -inf: use "
            "log_softmax (or F.cross_entropy), which subtracts the maximum",
            HEAD,
            lambda p, w, b, y: _head(
                p,
                w,
                b,
                y,
                classification=lambda z, t: -torch.log(z.softmax(-1)).gather(1, t[:, None]).mean(),
            ),
        ),
        Mistake(
            "the sum of the losses instead of their mean",
            "transformers' loss is the mean over the batch",
            HEAD,
            lambda p, w, b, y: _head(
                p,
                w,
                b,
                y,
                classification=lambda z, t: F.cross_entropy(z, t, reduction="sum"),
                regression=lambda z, t: F.mse_loss(z[:, 0], t.to(z.dtype), reduction="sum"),
            ),
        ),
        Mistake(
            "the bias left out",
            "the classifier is a linear layer: z = p W^T + b",
            HEAD,
            lambda p, w, b, y: _head(p, w, b, y, use_bias=False),
        ),
        Mistake(
            "(B, 1) logits against (B,) labels (broadcast to (B, B))",
            "squeeze the logits to (B,) (or view the labels as (B, 1)) before subtracting",
            HEAD,
            lambda p, w, b, y: _head(p, w, b, y, regression=_broadcast_mse),
        ),
    ],
}


def _head_probes() -> list[tuple[tuple, dict]]:
    generator = torch.Generator().manual_seed(111)
    pooled = torch.randn(4, 6, generator=generator) * 3
    weight, bias = torch.randn(3, 6, generator=generator), torch.randn(3, generator=generator)
    w1, b1 = weight[:1], bias[:1]
    labels = torch.tensor([0, 2, 1, 2])
    return [
        ((pooled, weight, bias, labels), {}),
        ((pooled, w1, b1, torch.tensor([0.5, -1.0, 2.0, 0.0])), {}),
        ((pooled * 100, weight, bias, labels), {}),  # confident mistakes: softmax underflows
    ]


PROBES = {"head": _head_probes}
