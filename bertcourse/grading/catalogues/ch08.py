"""Known mistakes of the fine-tuning exercises (chapter 8): what each gives, computed.

Each `compute` takes the arguments of the part's reference: `(pooled, weight, bias, labels)`
for the classification head, `(model, batch, lr, max_grad_norm, grads)` for one fine-tuning
step (`grads`: the gradients the model holds before the step, by parameter name, since a deep
copy of a parameter drops its `.grad`; it gives the step's outcome, `{"loss": the returned
float, "parameters": the parameters after}`) and `(model, batches)` for the evaluation loop.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from bertcourse.grading.mistakes import Mistake

HEAD = "chapter 8, 'The model: one linear layer on the pooled [CLS] vector'"
TUNING = "chapter 8, 'Full fine-tuning'"
EVALUATION = "chapter 8, 'Common mistakes' (evaluating without model.eval())"


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


def _step(
    model,
    batch: dict,
    lr: float,
    max_grad_norm: float,
    grads: dict,
    *,
    train: bool = True,
    zero_first: bool = True,
    zero_after_backward: bool = False,
    clip: str = "global",
    loss_after: bool = False,
) -> dict:
    """One fine-tuning step (plain gradient descent) with one thing changed; its outcome."""
    for name, parameter in model.named_parameters():
        parameter.grad = grads[name].clone() if name in grads else None
    if train:
        model.train()
    if zero_first:
        model.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    if zero_after_backward:
        model.zero_grad(set_to_none=False)
    parameters = list(model.parameters())
    if clip == "global":
        torch.nn.utils.clip_grad_norm_(parameters, max_grad_norm)
    elif clip == "each":
        for parameter in parameters:
            torch.nn.utils.clip_grad_norm_([parameter], max_grad_norm)
    with torch.no_grad():
        for parameter in parameters:
            if parameter.grad is not None:
                parameter -= lr * parameter.grad
        value = model(**batch).loss.item() if loss_after else loss.item()
    return {"loss": value, "parameters": dict(model.named_parameters())}


def _evaluate(model, batches: list[dict], *, per_batch_loss=False, per_batch_accuracy=False):
    """The evaluation loop (eval mode, no graph) with one mean taken over the batches."""
    model.eval()
    logits, losses, accuracies = [], [], []
    with torch.no_grad():
        for batch in batches:
            z = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]).logits
            logits.append(z)
            losses.append(F.cross_entropy(z, batch["labels"]).item())
            accuracies.append((z.argmax(-1) == batch["labels"]).float().mean().item())
    labels = torch.cat([batch["labels"] for batch in batches])
    z = torch.cat(logits)
    loss = F.cross_entropy(z, labels).item()
    accuracy = (z.argmax(-1) == labels).float().mean().item()
    return {
        "logits": z,
        "loss": sum(losses) / len(losses) if per_batch_loss else loss,
        "accuracy": sum(accuracies) / len(accuracies) if per_batch_accuracy else accuracy,
    }


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
        Mistake(
            "a cross-entropy for a single output (regression)",
            "with one output the task is regression, the mean squared error: a softmax over "
            "one score is always 1, so its cross-entropy is 0 and nothing is learned",
            HEAD,
            lambda p, w, b, y: _head(
                p,
                w,
                b,
                y,
                regression=lambda z, t: F.cross_entropy(z, t.long().clamp(0, z.shape[1] - 1)),
            ),
        ),
        Mistake(
            "regression labels rounded to integers",
            "a regression label is a float (a score of 0.7 stays 0.7): cast it to the logits' "
            "float dtype, not to the class-id dtype long",
            HEAD,
            lambda p, w, b, y: _head(
                p,
                w,
                b,
                y,
                regression=lambda z, t: F.mse_loss(z[:, 0], t.long().to(z.dtype)),
            ),
        ),
        Mistake(
            "regression labels not cast to the logits' dtype",
            "F.mse_loss promotes to the wider dtype: float64 labels make a float32 model's loss "
            "float64; cast the labels to the logits' dtype",
            HEAD,
            lambda p, w, b, y: _head(p, w, b, y, regression=lambda z, t: F.mse_loss(z[:, 0], t)),
        ),
        Mistake(
            "float32 results for float64 inputs",
            "compute in the dtype of pooled: .float() drops float64's precision",
            HEAD,
            lambda p, w, b, y: _head(p.float(), w.float(), b.float(), y),
        ),
    ],
    "step": [
        Mistake(
            "stale gradients added (no zero_grad first)",
            "backward adds to .grad: the gradients of an earlier step must be zeroed first",
            TUNING,
            lambda model, batch, lr, norm, grads: _step(
                model, batch, lr, norm, grads, zero_first=False
            ),
        ),
        Mistake(
            "the update with the unclipped gradient",
            "clip_grad_norm_ runs between backward and the update; without it, or after the "
            "update, the step uses the raw gradient",
            TUNING,
            lambda model, batch, lr, norm, grads: _step(model, batch, lr, norm, grads, clip="none"),
        ),
        Mistake(
            "each parameter's gradient clipped on its own",
            "clip_grad_norm_(model.parameters(), ...) scales every gradient by one factor, "
            "from their global norm",
            TUNING,
            lambda model, batch, lr, norm, grads: _step(model, batch, lr, norm, grads, clip="each"),
        ),
        Mistake(
            "zero_grad between backward and the update",
            "zeroing after backward erases the gradients: the update moves nothing",
            TUNING,
            lambda model, batch, lr, norm, grads: _step(
                model, batch, lr, norm, grads, zero_after_backward=True
            ),
        ),
        Mistake(
            "the loss after the update, not before",
            "the step returns the loss its gradient came from, computed before the update",
            TUNING,
            lambda model, batch, lr, norm, grads: _step(
                model, batch, lr, norm, grads, loss_after=True
            ),
        ),
        Mistake(
            "no model.train() first",
            "a model that arrives in eval mode would be trained with its dropout off",
            EVALUATION,
            lambda model, batch, lr, norm, grads: _step(model, batch, lr, norm, grads, train=False),
        ),
    ],
    "evaluate": [
        Mistake(
            "the loss as the mean of the batch means",
            "batches of different sizes weigh their examples differently: sum the losses "
            "(reduction='sum') and divide by the number of examples",
            TUNING,
            lambda model, batches: _evaluate(model, batches, per_batch_loss=True),
        ),
        Mistake(
            "the accuracy as the mean of the batch accuracies",
            "batches of different sizes weigh their examples differently: count the right "
            "answers and divide by the number of examples",
            TUNING,
            lambda model, batches: _evaluate(model, batches, per_batch_accuracy=True),
        ),
    ],
}


def _head_probes() -> list[tuple[tuple, dict]]:
    generator = torch.Generator().manual_seed(111)
    pooled = torch.randn(4, 6, generator=generator) * 3
    weight, bias = torch.randn(3, 6, generator=generator), torch.randn(3, generator=generator)
    w1, b1 = weight[:1], bias[:1]
    labels = torch.tensor([0, 2, 1, 2])
    scores = torch.tensor([0.5, -1.0, 2.0, 0.0])
    return [
        ((pooled, weight, bias, labels), {}),
        ((pooled, w1, b1, scores), {}),
        ((pooled * 100, weight, bias, labels), {}),  # confident mistakes: softmax underflows
        ((pooled.double(), weight.double(), bias.double(), labels), {}),
        ((pooled.double(), w1.double(), b1.double(), scores), {}),
        ((pooled, w1, b1, scores.double()), {}),  # float64 labels for a float32 model
        ((pooled.double(), w1.double(), b1.double(), scores.half()), {}),
    ]


def _classifier(seed: int, **changes):
    """A small BertForSequenceClassification, every parameter drawn at random."""
    from bertcourse.config import BertConfig
    from bertcourse.model import BertForSequenceClassification

    config = BertConfig(
        vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=16, max_position_embeddings=12, attn_implementation="eager",
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):  # the module's init must not move the global seed
        model = BertForSequenceClassification(config, **changes)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    return model


def _batch(size: int, length: int, seed: int) -> dict:
    generator = torch.Generator().manual_seed(seed)
    mask = torch.ones(size, length, dtype=torch.long)
    mask[1:, length - 2 :] = 0  # the rows after the first padded
    return {
        "input_ids": torch.randint(5, 30, (size, length), generator=generator) * mask,
        "token_type_ids": torch.zeros(size, length, dtype=torch.long),
        "attention_mask": mask,
        "labels": torch.randint(0, 2, (size,), generator=generator),
    }


def _step_probes() -> list[tuple[tuple, dict]]:
    model = _classifier(131).train()
    generator = torch.Generator().manual_seed(132)
    stale = {  # gradients left by an earlier step
        name: torch.randn(p.shape, generator=generator) for name, p in model.named_parameters()
    }
    arrives_in_eval = _classifier(133, classifier_dropout=1.0).eval()
    return [
        ((model, _batch(3, 6, 134), 20.0, 0.05, stale), {}),
        ((arrives_in_eval, _batch(3, 6, 135), 5.0, 0.05, {}), {}),
    ]


def _evaluate_probes() -> list[tuple[tuple, dict]]:
    model = _classifier(136).train()
    return [
        ((model, [_batch(1, 5, 137), _batch(3, 6, 138)]), {}),
        ((model, [_batch(2, 4, 139), _batch(5, 6, 140), _batch(1, 3, 141)]), {}),
    ]


PROBES = {"head": _head_probes, "step": _step_probes, "evaluate": _evaluate_probes}
