"""Cross-entropy from the inside, and the two losses of BERT pre-training (chapter 4).

BERT is trained on the sum of two classification losses:

- the masked-LM loss: at each *chosen* position, a V-way classification (V = 30,522 for
  bert-base-uncased) of the original token; every other position carries the label
  `IGNORE_INDEX` (-100) and contributes nothing;
- the next-sentence loss: one 2-way classification per pair (`IS_NEXT` = 0, `NOT_NEXT` = 1).

Both are the same function, cross-entropy, written here from `log_softmax` so the reader sees
every step, and tested to give the same numbers as `torch.nn.functional.cross_entropy`.

Shape legend:
    B  batch size              L  sequence length          H  hidden size
    V  number of classes (the vocabulary for MLM, 2 for NSP)
    N  number of labelled positions (labels != IGNORE_INDEX) in the whole batch

Convention: the class dimension is the *last* one, `(..., V)` logits with `(...)` targets, as
in transformers (`logits.view(-1, V)`). `F.cross_entropy` instead wants the classes in
dimension 1, so `(B, L, V)` logits must be flattened to `(B*L, V)` before calling it.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import torch
from torch import Tensor

from bertcourse.config import IGNORE_INDEX

Reduction = Literal["mean", "sum", "none"]
_REDUCTIONS = ("mean", "sum", "none")

ORIGINAL_LOSS_EPS = 1e-5
"""The original release divides the summed MLM loss by `sum(label_weights) + 1e-5`."""


class LabelledPositions(NamedTuple):
    """What `gather_labelled` returns; unpacks like a tuple: `hidden, targets = ...`."""

    hidden_states: Tensor
    """(N, H) the hidden vectors at the labelled positions, batch-major order."""
    targets: Tensor
    """(N,) the labels at those positions (never `ignore_index`)."""


def gather_labelled(
    hidden_states: Tensor, labels: Tensor, ignore_index: int = IGNORE_INDEX
) -> LabelledPositions:
    """Keep only the positions that carry a label, before the vocabulary projection.

    The MLM head maps a hidden vector to V = 30,522 logits, by far its most expensive step.
    Only ~15% of the positions have a label, so the original release (and NVIDIA's) first
    *gathers* those positions and projects just them: ~15% of the logits, and the (B, L, V)
    tensor is never built. The loss is unchanged, because ignored positions contribute
    nothing to it anyway.

    Args:
        hidden_states: (B, L, H) encoder output (any leading shape `(...)` works).
        labels: (B, L) token ids to predict, `ignore_index` where nothing is predicted.
        ignore_index: the "not predicted" label, -100 by convention.

    Returns:
        `LabelledPositions(hidden_states (N, H), targets (N,))` in row-major order (batch 0's
        positions left to right, then batch 1's, ...), the same order as
        `labels[labels != ignore_index]`. Gradients flow back into `hidden_states`.
    """
    if hidden_states.dim() < 2:
        raise ValueError(
            "hidden_states must have shape (B, L, H) (at least 2 dims), "
            f"got {tuple(hidden_states.shape)}"
        )
    if labels.shape != hidden_states.shape[:-1]:
        raise ValueError(
            f"labels shape {tuple(labels.shape)} does not match hidden_states shape "
            f"{tuple(hidden_states.shape)}: expected labels of shape "
            f"{tuple(hidden_states.shape[:-1])} (one label per position)"
        )
    keep = labels != ignore_index  # (B, L) bool
    return LabelledPositions(hidden_states[keep], labels[keep])  # (N, H), (N,)


def _check_logits_targets(logits: Tensor, targets: Tensor, ignore_index: int) -> None:
    """Raise a clear error for mistakes `F.cross_entropy` reports cryptically (or not at all)."""
    if not torch.is_floating_point(logits):
        raise TypeError(f"logits must be a floating-point tensor, got dtype {logits.dtype}")
    if torch.is_floating_point(targets) or targets.dtype == torch.bool:
        raise TypeError(
            f"targets must hold integer class ids, got dtype {targets.dtype} "
            "(class probabilities are not supported here)"
        )
    if logits.dim() < 1 or logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits shape {tuple(logits.shape)} does not fit targets shape "
            f"{tuple(targets.shape)}: expected logits (..., V) and targets (...), e.g. (N, V) "
            "with (N,) or (B, L, V) with (B, L); the classes are the LAST dimension"
        )
    num_classes = logits.shape[-1]
    labelled = targets[targets != ignore_index]
    bad = labelled[(labelled < 0) | (labelled >= num_classes)]
    if bad.numel() > 0:
        raise ValueError(
            f"target id {bad[0].item()} is out of range for {num_classes} classes "
            f"(valid: 0..{num_classes - 1}, or ignore_index={ignore_index} for 'not predicted'); "
            f"{bad.numel()} target(s) are out of range"
        )


def log_softmax(logits: Tensor) -> Tensor:
    """Log-probabilities over the last dimension: `z - logsumexp(z)`, computed stably.

    (..., V) -> (..., V). The exercises' part 1 of chapter 4 asks for this function; the
    grader uses this one in its place while it checks the later parts.
    """
    return torch.log_softmax(logits, dim=-1)


def cross_entropy(
    logits: Tensor,
    targets: Tensor,
    ignore_index: int = IGNORE_INDEX,
    reduction: Reduction = "mean",
    *,
    zero_when_all_ignored: bool = False,
) -> Tensor:
    """Cross-entropy written out: `-log softmax(logits)[target]`, averaged over labelled items.

    For one item with logits z (V,) and target t: `loss = -log(exp(z_t) / sum_j exp(z_j))
    = logsumexp(z) - z_t`. `log_softmax` computes this stably (it subtracts max(z) first),
    which is why we never take `log(softmax(z))` in two steps: softmax can underflow to 0
    and its log to -inf.

    Args:
        logits: (N, V) or (B, L, V) -- any `(..., V)`; the classes are the last dimension.
        targets: (N,) or (B, L) -- any `(...)`; integer class ids, or `ignore_index`.
        ignore_index: items with this target contribute 0 and are not counted.
        reduction: "mean" (sum over labelled items / their count, PyTorch's rule), "sum",
            or "none" (per-item losses, shape of `targets`, 0 at ignored items).
        zero_when_all_ignored: only for "mean". If every target is `ignore_index`, the mean
            is 0 / 0. By default the result is NaN, exactly as `F.cross_entropy` (PyTorch
            chose this deliberately: an empty average is undefined, and a silent 0 would hide
            a data bug such as a batch with no masked token). With True the result is 0.0 (and
            its gradient 0), which keeps a training loop alive on such a batch.

    Returns:
        A scalar for "mean"/"sum"; a tensor shaped like `targets` for "none".
        Equal to `F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ...)` up to
        float rounding.
    """
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    _check_logits_targets(logits, targets, ignore_index)

    log_probs = log_softmax(logits)  # (..., V)
    keep = targets != ignore_index  # (...) bool: the items that count
    # gather needs a valid index everywhere; ignored items point at class 0 and are zeroed below
    safe_targets = targets.long().masked_fill(~keep, 0)  # (...)
    target_log_probs = log_probs.gather(-1, safe_targets.unsqueeze(-1)).squeeze(-1)  # (...)
    # torch.where, not multiplication by keep: 0 * (-inf) would be NaN
    losses = torch.where(keep, -target_log_probs, torch.zeros_like(target_log_probs))  # (...)

    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    count = keep.sum()
    if zero_when_all_ignored:
        count = count.clamp(min=1)  # 0 / 1 = 0 when nothing is labelled
    return losses.sum() / count  # 0 / 0 = NaN when nothing is labelled, as in PyTorch


def cross_entropy_grad(
    logits: Tensor,
    targets: Tensor,
    ignore_index: int = IGNORE_INDEX,
    reduction: Literal["mean", "sum"] = "mean",
) -> Tensor:
    """The gradient of `cross_entropy(logits, targets)` with respect to the logits, in closed form.

    Per labelled item, d loss / d z = softmax(z) - one_hot(t): push the target's logit up by
    (1 - p_t) and every other logit down by its probability p_j. The rows sum to zero. For the
    mean, each row is divided by the number of labelled items; ignored items get 0.

    Args:
        logits: (..., V), targets: (...), as for `cross_entropy`.
        reduction: "mean" or "sum" (the reduction whose gradient you want).

    Returns:
        (..., V), the same shape as `logits`. With no labelled item the gradient is all zeros
        (also what autograd gives for PyTorch's NaN mean: no item contributes).
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    _check_logits_targets(logits, targets, ignore_index)
    keep = targets != ignore_index  # (...)
    safe_targets = targets.long().masked_fill(~keep, 0)  # (...)
    one_hot = torch.nn.functional.one_hot(safe_targets, logits.shape[-1]).to(logits.dtype)
    grad = torch.softmax(logits, dim=-1) - one_hot  # (..., V)
    grad = grad * keep.unsqueeze(-1).to(logits.dtype)  # ignored rows -> 0
    if reduction == "mean":
        grad = grad / keep.sum().clamp(min=1).to(logits.dtype)
    return grad


def mlm_loss(prediction_logits: Tensor, labels: Tensor, ignore_index: int = IGNORE_INDEX) -> Tensor:
    """The masked-LM loss: mean cross-entropy over the labelled positions of the whole batch.

    The mean is over all labelled tokens of the batch together (transformers' rule), not an
    average of per-sequence means: a sequence with 20 masked tokens weighs 20 times one with 1.

    Accepts three layouts:
        - full logits (B, L, V) with labels (B, L), -100 where nothing is predicted
          (transformers' `BertForPreTraining`);
        - gathered logits (N, V) with the (N,) labelled targets (`gather_labelled`'s output);
        - gathered logits (N, V) with the full (B, L) labels: the targets are gathered here
          (`labels[labels != ignore_index]`, the order `gather_labelled` uses).

    With no labelled position at all the result is NaN, like `F.cross_entropy` (see
    `cross_entropy`).
    """
    if prediction_logits.dim() == 2 and labels.dim() != 1:
        # gathered logits with full labels: bring the labels into the same (N,) order
        targets = labels[labels != ignore_index]  # (N,)
        if targets.shape[0] != prediction_logits.shape[0]:
            raise ValueError(
                f"prediction_logits has {prediction_logits.shape[0]} rows but labels "
                f"{tuple(labels.shape)} have {targets.shape[0]} labelled positions: gathered "
                "(N, V) logits need exactly one row per label != ignore_index"
            )
        return cross_entropy(prediction_logits, targets, ignore_index=ignore_index)
    return cross_entropy(prediction_logits, labels, ignore_index=ignore_index)


def nsp_loss(
    seq_relationship_logits: Tensor, next_sentence_label: Tensor, ignore_index: int = IGNORE_INDEX
) -> Tensor:
    """The next-sentence-prediction loss: mean 2-way cross-entropy over the batch.

    Args:
        seq_relationship_logits: (B, 2), column 0 scores "B follows A" (`IS_NEXT` = 0),
            column 1 "B is random" (`NOT_NEXT` = 1).
        next_sentence_label: (B,) 0 or 1 (-100 skips a pair, as in transformers).
    """
    if seq_relationship_logits.dim() != 2 or seq_relationship_logits.shape[-1] != 2:
        raise ValueError(
            f"seq_relationship_logits must have shape (B, 2), got "
            f"{tuple(seq_relationship_logits.shape)}"
        )
    if next_sentence_label.dim() != 1:
        raise ValueError(
            f"next_sentence_label must have shape (B,), got {tuple(next_sentence_label.shape)}"
        )
    return cross_entropy(seq_relationship_logits, next_sentence_label, ignore_index=ignore_index)


def original_mlm_loss(logits: Tensor, label_ids: Tensor, label_weights: Tensor) -> Tensor:
    """The MLM loss as the original release computes it, for comparison in the book.

    The original stores a fixed number of prediction slots per sequence
    (`max_predictions_per_seq`, 20 at length 128); unused slots have label id 0 and weight 0.
    Its loss is `sum(weight * per_slot_loss) / (sum(weight) + 1e-5)`: the 1e-5 avoids a
    division by zero, so a batch without any prediction gives 0 instead of NaN, and every
    other batch gives a value smaller than the exact mean by a relative ~1e-5 / N.

    Args:
        logits: (..., V), e.g. (B * P, V) or (B, P, V), P = slots per sequence.
        label_ids: (...) the target id in each slot (0 in unused slots).
        label_weights: (...) 1.0 for a real slot, 0.0 for padding.
    """
    if label_weights.shape != label_ids.shape:
        raise ValueError(
            f"label_weights shape {tuple(label_weights.shape)} must equal label_ids shape "
            f"{tuple(label_ids.shape)}"
        )
    per_slot = cross_entropy(logits, label_ids, reduction="none")  # (...)
    weights = label_weights.to(per_slot.dtype)
    return (per_slot * weights).sum() / (weights.sum() + ORIGINAL_LOSS_EPS)
