"""Known mistakes, computed: feedback that names the misconception.

When a learner's output is wrong, the check computes what each known mistake of that part
gives on the same inputs; if the learner's output equals one of them, the message says which
mistake it is and where the book explains it ("your boolean mask is inverted: for
`F.scaled_dot_product_attention`, True means *may attend*"). It works the same in the visible
checks (the learner's own process) and under the referee (the learner's output is data there,
the wrong variants run in the referee). It never shows an input or an expected value: only the
name of the mistake.

A catalogue is a list of `Mistake`s; a test cell passes one with `mistakes=` (a key of
`CATALOGUE`, or a list). Each `Mistake.compute` takes the reference's arguments.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from bertcourse.grading import i18n

# The first line of a failure must fit what `nbgrader validate` prints of a traceback line
# (Validator.width 90: 4 spaces of indent, lines cut after 87 characters) and the JupyterLab
# Validate dialog, which does not wrap.
HEADLINE_WIDTH = 83
_WHERE = re.compile(r"chapter (\d+), '(.*?)'(?= \(|$)")


def _width(text: str) -> int:
    """Columns on a terminal: a wide (Chinese) character takes two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


@dataclasses.dataclass(frozen=True)
class Mistake:
    name: str  # short: "scores divided by d_k, not sqrt(d_k)"
    why: str  # one sentence: what is wrong and what is right
    where: str  # the book section that explains it: "chapter N, 'Section'" (+ a remark)
    compute: Callable[..., Any]  # what the mistake gives, from the reference's arguments

    def _full_chapter(self) -> tuple[str, str] | None:
        """("chapter N, Section", "chapter N") in the feedback's language (`i18n`)."""
        match = _WHERE.match(self.where)
        if not match:
            return None
        number, section = match.group(1), i18n.gettext(match.group(2))
        return (
            i18n.format("chapter {number}, {section}", number=number, section=section),
            i18n.format("chapter {number}", number=number),
        )

    @property
    def chapter(self) -> str:
        """ "chapter N, Section" (no quotes, no remark), or "chapter N" when that is too long
        (in columns: a Chinese character takes two), in the feedback's language."""
        parts = self._full_chapter()
        if parts is None:
            return i18n.gettext(self.where)
        full, short = parts
        return (
            full if _width(i18n.gettext(self.name)) + 3 + _width(full) <= HEADLINE_WIDTH else short
        )

    @property
    def headline(self) -> str:
        """The failure's first line: what is wrong, where the book explains it."""
        return f"{i18n.gettext(self.name)} — {self.chapter}"

    @property
    def shortened(self) -> bool:
        """Does the headline leave out part of `where` (a remark, or the section's name)?"""
        match = _WHERE.match(self.where)
        parts = self._full_chapter()
        return bool(match and parts) and (match.end() < len(self.where) or self.chapter != parts[0])

    @property
    def where_text(self) -> str:
        """`where` in the feedback's language."""
        match = _WHERE.match(self.where)
        if i18n.get_language() == "en" or not match:
            return i18n.gettext(self.where)
        number, section = match.group(1), i18n.gettext(match.group(2))
        remark = self.where[match.end() :].strip()
        if remark.startswith("(") and remark.endswith(")"):
            return i18n.format(
                "chapter {number}, '{section}' ({remark})",
                number=number,
                section=section,
                remark=i18n.gettext(remark[1:-1]),
            )
        return i18n.format("chapter {number}, '{section}'", number=number, section=section)


def _attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None, scale: float, dim: int):
    scores = q @ k.transpose(-2, -1) * scale
    if bias is not None:
        scores = scores + bias
    probs = torch.softmax(scores, dim=dim)
    return probs @ v, probs


def _bias(mask: Tensor, dtype: torch.dtype, value: float, inverted: bool = False) -> Tensor:
    keep = mask[:, None, None, :].to(torch.bool)
    if inverted:
        keep = ~keep
    return torch.where(keep, 0.0, value).to(dtype)


def _ce_terms(logits: Tensor, targets: Tensor, ignore_index: int) -> tuple[Tensor, Tensor]:
    keep = targets != ignore_index
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, targets.clamp(min=0).long().unsqueeze(-1)).squeeze(-1)
    return torch.where(keep, -picked, torch.zeros_like(picked)), keep


def _ce_grad(
    logits: Tensor, targets: Tensor, ignore_index: int, count: Callable, sign: float = 1.0
) -> Tensor:
    keep = targets != ignore_index
    grad = torch.softmax(logits, dim=-1)
    grad = grad - F.one_hot(targets.clamp(min=0).long(), logits.shape[-1]).to(logits.dtype)
    grad = grad * keep.unsqueeze(-1)
    return sign * grad / count(keep)


def _ce_mean(logits: Tensor, targets: Tensor, ignore_index: int) -> Tensor:
    terms, keep = _ce_terms(logits, targets, ignore_index)
    return terms.sum() / keep.sum()


def _adam_step(
    param,
    grad,
    m,
    v,
    t,
    lr=1e-3,
    betas=(0.9, 0.999),
    eps=1e-8,
    correction_t=None,
    weight_decay=0.0,
    l2=False,
    decay_without_lr=False,
    eps_inside=False,
    abs_grad=False,
    correct_m=True,
    correct_v=True,
):
    """One Adam(W) step, or one of its mistakes (each flag changes one thing)."""
    b1, b2 = betas
    if l2:
        grad = grad + weight_decay * param
    m = b1 * m + (1 - b1) * grad
    v = b2 * v + (1 - b2) * (grad.abs() if abs_grad else grad * grad)
    tc = t if correction_t is None else correction_t
    m_hat = m / (1 - b1**tc) if tc and correct_m else m
    v_hat = v / (1 - b2**tc) if tc and correct_v else v
    denominator = (v_hat + eps).sqrt() if eps_inside else v_hat.sqrt() + eps
    new = param - lr * m_hat / denominator
    if weight_decay and not l2:
        new = new - (1.0 if decay_without_lr else lr) * weight_decay * param
    return new, m, v


def _half_up(x: float) -> int:
    return math.floor(x + 0.5)


SDPA_DIM = "chapter 1, 'Scaled dot-product attention'"
MASKS = "chapter 2, 'Which constant?' (the dtype's minimum, not -10000 or -inf)"
LOSS = "chapter 4, 'The MLM loss is a mean over the chosen positions'"

CATALOGUE: dict[str, list[Mistake]] = {
    "sdpa": [
        Mistake(
            "no 1/sqrt(d_k) scaling",
            "without it the scores grow with the head size and the softmax saturates",
            SDPA_DIM,
            lambda q, k, v, bias=None: _attention(q, k, v, bias, 1.0, -1),
        ),
        Mistake(
            "scores divided by d_k, not sqrt(d_k)",
            "the dot product's standard deviation grows like sqrt(d_k), so that is the divisor",
            SDPA_DIM,
            lambda q, k, v, bias=None: _attention(q, k, v, bias, 1.0 / q.shape[-1], -1),
        ),
        Mistake(
            "the softmax over the queries (dim=-2)",
            "each query's weights must sum to 1 over the keys, the last dimension",
            "chapter 1, 'Scaled dot-product attention'",
            lambda q, k, v, bias=None: _attention(q, k, v, bias, q.shape[-1] ** -0.5, -2),
        ),
    ],
    "extended_mask": [
        Mistake(
            "-10000 instead of the dtype's minimum",
            "the original's constant is not small enough for large scores and overflows in "
            "float16; use torch.finfo(dtype).min",
            MASKS,
            lambda mask, dtype=torch.float32: _bias(mask, dtype, -10000.0),
        ),
        Mistake(
            "-inf instead of the dtype's minimum",
            "a row with every key masked becomes NaN (inf - inf); use torch.finfo(dtype).min",
            MASKS,
            lambda mask, dtype=torch.float32: _bias(mask, dtype, float("-inf")),
        ),
        Mistake(
            "an inverted mask (the padding kept, the tokens masked)",
            "attention_mask is 1 for a token and 0 for padding; the bias is 0 where it is 1",
            "chapter 2, 'From padding to an additive bias'",
            lambda mask, dtype=torch.float32: _bias(mask, dtype, torch.finfo(dtype).min, True),
        ),
    ],
    "padding_mask": [
        Mistake(
            "an inverted mask (1 = padding)",
            "the convention is 1 for a token and 0 for padding",
            "chapter 2, 'From padding to an additive bias'",
            lambda ids, pad_token_id=0: (ids == pad_token_id).long(),
        ),
    ],
    "sdpa_mask": [
        Mistake(
            "nn.MultiheadAttention's polarity (True = ignore)",
            "for F.scaled_dot_product_attention a boolean mask's True means *may attend*; "
            "nn.MultiheadAttention's key_padding_mask uses the opposite",
            "chapter 2, 'Boolean masks: two opposite conventions'",
            lambda mask: (mask == 0)[:, None, None, :],
        ),
    ],
    "num_predictions": [
        Mistake(
            "int() truncation instead of rounding",
            "the original rounds n x 0.15 (round half to even in Python 3), it does not truncate",
            "chapter 3, 'The two rules'",
            lambda n, prob=0.15, cap=20: min(cap, max(1, int(n * prob))),
        ),
        Mistake(
            "halves rounded up instead of to even",
            "Python 3's round() sends 2.5 to 2: the original's counts follow it",
            "chapter 3, 'The two rules'",
            lambda n, prob=0.15, cap=20: min(cap, max(1, _half_up(n * prob))),
        ),
    ],
    "cross_entropy": [
        Mistake(
            "the mean over every position, ignored ones counted as 0",
            "the mean runs over labelled positions only; padding would dilute the loss",
            LOSS,
            lambda logits, targets, ignore_index=-100: _ce_terms(logits, targets, ignore_index)[
                0
            ].mean(),
        ),
        Mistake(
            "the sum instead of the mean",
            "PyTorch's default reduction is the mean over labelled items",
            LOSS,
            lambda logits, targets, ignore_index=-100: _ce_terms(logits, targets, ignore_index)[
                0
            ].sum(),
        ),
        Mistake(
            "the mean of the non-zero losses (seed 000's loss[loss != 0])",
            "a confident correct prediction has loss exactly 0 and must still count",
            LOSS,
            lambda logits, targets, ignore_index=-100: (lambda terms: terms[terms != 0].mean())(
                _ce_terms(logits, targets, ignore_index)[0]
            ),
        ),
        Mistake(
            "the ignored items counted as class 0 (targets clamped, not left out)",
            "an item labelled -100 is not predicted: leave it out of the sum and of N",
            LOSS,
            lambda logits, targets, ignore_index=-100: _ce_mean(
                logits, targets.masked_fill(targets == ignore_index, 0), ignore_index
            ),
        ),
        Mistake(
            "the loss in float32, not the logits' dtype (not cast back)",
            "F.cross_entropy returns the logits' dtype; compute in float32 if you like, then "
            "cast the loss back",
            "chapter 4, 'Common mistakes'",
            lambda logits, targets, ignore_index=-100: _ce_mean(
                logits.float(), targets, ignore_index
            ),
        ),
    ],
    "cross_entropy_grad": [
        Mistake(
            "the gradient not divided by the number of labelled items",
            "the loss is a mean, so each item's gradient carries 1/N",
            "chapter 4, 'The gradient is p - y'",
            lambda logits, targets, ignore_index=-100: _ce_grad(
                logits, targets, ignore_index, lambda keep: 1.0
            ),
        ),
        Mistake(
            "the gradient divided by every item, ignored ones included",
            "N counts the labelled items only",
            "chapter 4, 'The gradient is p - y'",
            lambda logits, targets, ignore_index=-100: _ce_grad(
                logits, targets, ignore_index, lambda keep: keep.numel()
            ),
        ),
        Mistake(
            "the opposite sign (one_hot - softmax)",
            "the gradient of the loss is softmax - one_hot; descent subtracts it",
            "chapter 4, 'The gradient is p - y'",
            lambda logits, targets, ignore_index=-100: _ce_grad(
                logits, targets, ignore_index, lambda keep: keep.sum().clamp(min=1), sign=-1.0
            ),
        ),
        Mistake(
            "0/0 when every target is ignored (NaN, not zeros)",
            "with N = 0 every row is 0 already: divide by max(N, 1), as autograd's gradient is 0",
            "chapter 4, 'When nothing is chosen'",
            lambda logits, targets, ignore_index=-100: _ce_grad(
                logits, targets, ignore_index, lambda keep: keep.sum()
            ),
        ),
    ],
    "adam": [
        Mistake(
            "no bias correction",
            "that is the original BERT optimizer, not Adam: the first steps are too small",
            "chapter 6, 'What bias correction does'",
            lambda p, g, m, v, t, **h: _adam_step(p, g, m, v, t, correction_t=0, **h),
        ),
        Mistake(
            "bias correction with t - 1",
            "at step t (1 for the first) the moments are divided by 1 - beta^t",
            "chapter 6, 'What bias correction does'",
            lambda p, g, m, v, t, **h: _adam_step(p, g, m, v, t, correction_t=t - 1, **h),
        ),
        Mistake(
            "bias correction with t + 1",
            "at step t (1 for the first) the moments are divided by 1 - beta^t",
            "chapter 6, 'What bias correction does'",
            lambda p, g, m, v, t, **h: _adam_step(p, g, m, v, t, correction_t=t + 1, **h),
        ),
        Mistake(
            "eps inside the square root",
            "Adam divides by sqrt(v_hat) + eps: eps is added after the square root",
            "chapter 6, 'From gradient descent to Adam'",
            lambda p, g, m, v, t, **h: _adam_step(p, g, m, v, t, eps_inside=True, **h),
        ),
        Mistake(
            "v averages |g|, not the squared gradient g * g",
            "the second moment is the running mean of g^2; its square root scales the step",
            "chapter 6, 'From gradient descent to Adam'",
            lambda p, g, m, v, t, **h: _adam_step(p, g, m, v, t, abs_grad=True, **h),
        ),
        Mistake(
            "bias correction of v only (m used as it is)",
            "both moments start at 0 and both are divided by 1 - beta^t: m by 1 - beta1^t, "
            "v by 1 - beta2^t",
            "chapter 6, 'What bias correction does'",
            lambda p, g, m, v, t, **h: _adam_step(p, g, m, v, t, correct_m=False, **h),
        ),
        Mistake(
            "bias correction of m only (v used as it is)",
            "both moments start at 0 and both are divided by 1 - beta^t: m by 1 - beta1^t, "
            "v by 1 - beta2^t",
            "chapter 6, 'What bias correction does'",
            lambda p, g, m, v, t, **h: _adam_step(p, g, m, v, t, correct_v=False, **h),
        ),
    ],
    "warmup_linear": [
        Mistake(
            "warm-up one step early ((step + 1) / warmup_steps)",
            "the first update uses step 0, so its rate is 0 during warm-up (LambdaLR's order)",
            "chapter 6, 'The schedule: warmup, then linear decay'",
            lambda step, *, warmup_steps, total_steps: (
                (step + 1) / warmup_steps
                if step < warmup_steps
                else max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))
            ),
        ),
        Mistake(
            "the decay over all total_steps (the original's formula)",
            "transformers' schedule decays over the steps after warm-up, total - warmup",
            "chapter 6, 'The schedule: warmup, then linear decay'",
            lambda step, *, warmup_steps, total_steps: (
                step / warmup_steps if step < warmup_steps else max(0.0, 1 - step / total_steps)
            ),
        ),
        Mistake(
            "no clamp at 0 after the last step (negative rates)",
            "after total_steps the multiplier stays at 0: max(0, (T - s) / (T - w))",
            "chapter 6, 'The schedule: warmup, then linear decay'",
            lambda step, *, warmup_steps, total_steps: (
                step / warmup_steps
                if step < warmup_steps
                else (total_steps - step) / max(1, total_steps - warmup_steps)
            ),
        ),
    ],
    "adamw": [
        Mistake(
            "L2 regularisation instead of decoupled weight decay",
            "AdamW subtracts lr x weight_decay x param outside the adaptive step; adding "
            "weight_decay x param to the gradient is Adam with L2",
            "chapter 6, 'BERT's optimizer: decoupled weight decay without bias correction'",
            lambda p, g, m, v, t, **h: _adam_step(p, g, m, v, t, l2=True, **h),
        ),
        Mistake(
            "the decay not multiplied by the learning rate",
            "AdamW shrinks the parameter by the factor 1 - lr x weight_decay, not 1 - weight_decay",
            "chapter 6, 'BERT's optimizer: decoupled weight decay without bias correction'",
            lambda p, g, m, v, t, **h: _adam_step(p, g, m, v, t, decay_without_lr=True, **h),
        ),
    ],
}


Probe = tuple[tuple[Any, ...], dict[str, Any]]  # the reference's (args, kwargs)


def _split_key(mistakes: str) -> tuple[Any, str]:
    """The module whose catalogue holds `mistakes` ("chNN:key" or a key of this module)."""
    if ":" not in mistakes:
        return importlib.import_module(__name__), mistakes
    chapter, key = mistakes.split(":", 1)
    try:
        return importlib.import_module(f"bertcourse.grading.catalogues.{chapter}"), key
    except ModuleNotFoundError:
        return None, key


def resolve(mistakes: str | Sequence[Mistake]) -> list[Mistake]:
    """The catalogue named `mistakes`: a key of `CATALOGUE`, or "chNN:key" for a key of the
    `CATALOGUE` of `bertcourse.grading.catalogues.chNN` (one module per chapter)."""
    if not isinstance(mistakes, str):
        return list(mistakes)
    module, key = _split_key(mistakes)
    catalogue = getattr(module, "CATALOGUE", {})
    if key not in catalogue:
        raise LookupError(f"grading setup: no catalogue of mistakes named {mistakes!r}")
    return catalogue[key]


def probes(mistakes: str | Sequence[Mistake]) -> list[Probe]:
    """The inputs that tell the mistakes of a catalogue apart (its module's `PROBES[key]`, a
    function that builds them): a mistake is named only when the learner's function also
    gives what it gives on every one of them (where the mistake applies)."""
    if not isinstance(mistakes, str):
        return []
    module, key = _split_key(mistakes)
    build = getattr(module, "PROBES", {}).get(key)
    return list(build()) if build else []


@dataclasses.dataclass(frozen=True)
class Neighbour:
    """A plausible wrong answer that is not named (too rare, or no lesson of its own), which
    the probes must still tell apart from every named mistake of its part: a learner who makes
    it must never get a named mistake's name. `compute` as in `Mistake`."""

    what: str
    compute: Callable[..., Any]


def neighbours(mistakes: str | Sequence[Mistake]) -> list[Neighbour]:
    """The unnamed neighbours of a catalogue (its module's `NEIGHBOURS[key]`)."""
    if not isinstance(mistakes, str):
        return []
    module, key = _split_key(mistakes)
    return list(getattr(module, "NEIGHBOURS", {}).get(key, ()))


def _output(mistake: Mistake | Neighbour, args: tuple, kwargs: dict) -> Any:
    """What `mistake` gives on these inputs; None when it does not apply to them."""
    from bertcourse.grading.values import _copy

    try:
        a, k = _copy((args, kwargs))
        return mistake.compute(*a, **k)
    except Exception:  # a mistake that does not apply to these inputs
        return None


def separated(
    first: Any, second: Any, cases: Sequence[Probe], compare: Callable[[Any, Any], list[str]]
) -> bool:
    """Does some probe tell `first` and `second` (mistakes or neighbours) apart: both apply to
    it and their outputs differ?"""
    for args, kwargs in cases:
        a, b = _output(first, args, kwargs), _output(second, args, kwargs)
        if a is not None and b is not None and compare(a, b):
            return True
    return False


def diagnose(
    got: Any,
    mistakes: str | Sequence[Mistake],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    compare: Callable[[Any, Any], list[str]],
    call: Callable[..., Any] | None = None,
) -> Mistake | None:
    """The one known mistake that gives `got` on these inputs and, when the catalogue has
    probes, gives what the learner's function (`call`) gives on every probe the mistake applies
    to. The probes separate each entry from every other entry of the part and from its
    neighbours (tests/test_mistake_separation.py), so an answer that matches one entry on all of
    them cannot be another entry. A probe the learner's function cannot take (it raises: a
    3-D input to an answer written for 4-D ones) is left out, and then the probes that remain
    must still separate the mistake from every other entry and neighbour. None when no mistake,
    or more than one, fits, or when the catalogue has probes and `call` is None: a wrong name
    is worse than none."""
    from bertcourse.grading.values import _copy

    fits = [
        m
        for m in resolve(mistakes)
        if (wrong := _output(m, args, kwargs)) is not None and not compare(got, wrong)
    ]
    cases = probes(mistakes)
    if fits and cases and call is None:
        return None
    tried = {id(m): False for m in fits}
    used: list[Probe] = []
    skipped = False
    for p_args, p_kwargs in cases:
        if not fits:
            break
        outputs = {id(m): _output(m, p_args, p_kwargs) for m in fits}
        if all(out is None for out in outputs.values()):
            continue
        try:
            a, k = _copy((p_args, p_kwargs))
            learner = call(*a, **k)
        except Exception:  # the learner's function does not take this input: no evidence
            skipped = True
            continue
        used.append((p_args, p_kwargs))
        fits = [m for m in fits if outputs[id(m)] is None or not compare(learner, outputs[id(m)])]
        tried.update({id(m): True for m in fits if outputs[id(m)] is not None})
    if cases:  # a mistake that applies to no probe is never checked on its signature
        fits = [m for m in fits if tried[id(m)]]
    if len(fits) != 1:
        return None
    others = [m for m in resolve(mistakes) if m is not fits[0]] + neighbours(mistakes)
    if skipped and not all(separated(fits[0], other, used, compare) for other in others):
        return None
    return fits[0]


def message(mistake: Mistake) -> str:
    """The headline, then why (and the section when the headline names only the chapter)."""
    text = mistake.headline + "\n  " + i18n.format("Why: {why}.", why=i18n.gettext(mistake.why))
    if mistake.shortened:
        text += "\n  " + i18n.format("Read: {where}.", where=mistake.where_text)
    return text


# --- probes: inputs on which this module's mistakes all differ (tests/test_catalogues.py) ---


def _randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32, scale: float = 1.0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator, dtype=torch.float64) * scale).to(dtype)


def _sdpa_probes() -> list[Probe]:
    q, k, v = (_randn(2, 2, 3, 16, seed=s) for s in (101, 102, 103))
    bias = torch.tensor([0.0, 0.0, torch.finfo(torch.float32).min])[None, None, None, :]
    return [((q, k, v), {}), ((q, k, v, bias.expand(2, 1, 1, 3)), {})]


def _ce_probes() -> list[Probe]:
    """Labelled and ignored items with a confident correct one (loss 0), every item ignored,
    and float16 logits."""
    logits = _randn(2, 4, 5, seed=104)
    logits[0, 0] = torch.tensor([60.0, 0.0, 0.0, 0.0, 0.0])  # a confident correct item: loss 0
    targets = torch.tensor([[0, 1, -100, 3], [4, -100, -100, 2]])
    return [
        ((logits, targets), {}),
        ((logits, torch.full_like(targets, -100)), {}),
        ((_randn(2, 4, 5, seed=111, dtype=torch.float16), targets), {}),
    ]


def _adam_probes(**decay: float) -> list[Probe]:
    p, g = _randn(3, 4, seed=105), _randn(3, 4, seed=106)
    m, v = _randn(3, 4, seed=107) * 0.1, _randn(3, 4, seed=108).abs() * 0.1
    hyper = dict(lr=0.1, betas=(0.8, 0.99), eps=1e-3, **decay)
    return [((p, g, m, v, t), hyper) for t in (1, 3)]


PROBES: dict[str, Callable[[], list[Probe]]] = {
    "sdpa": _sdpa_probes,
    "extended_mask": lambda: [
        ((torch.tensor([[1, 1, 0], [1, 0, 0]]),), {}),
        ((torch.tensor([[1, 0], [0, 0]]), torch.float16), {}),
    ],
    "padding_mask": lambda: [
        ((torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0]]),), {}),
        ((torch.tensor([[5, 1, 1]]),), {"pad_token_id": 1}),
    ],
    "sdpa_mask": lambda: [((torch.tensor([[1, 1, 0], [1, 0, 0]]),), {})],
    "num_predictions": lambda: [((n,), {}) for n in (5, 10, 13, 17, 30, 33, 50, 70, 128, 200)],
    "cross_entropy": _ce_probes,
    "cross_entropy_grad": _ce_probes,
    "adam": _adam_probes,
    "adamw": lambda: _adam_probes(weight_decay=0.1),
    "warmup_linear": lambda: [
        ((step,), {"warmup_steps": 4, "total_steps": 10}) for step in (0, 2, 4, 7, 10, 12)
    ],
}
