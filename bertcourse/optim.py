"""Adam, AdamW, the original BERT optimizer and its learning-rate schedules (chapter 6).

Optimizers are small `torch.optim.Optimizer` subclasses whose `step` reads like the math:

    g      = grad  (+ weight_decay * p      for Adam's L2 penalty)
    m      = beta1 * m + (1 - beta1) * g            first moment
    v      = beta2 * v + (1 - beta2) * g**2         second moment
    m_hat  = m / (1 - beta1**t)                     bias correction (skipped by the original BERT)
    v_hat  = v / (1 - beta2**t)
    p      = p - lr * m_hat / (sqrt(v_hat) + eps)   (AdamW first shrinks p by 1 - lr * weight_decay)

- `Adam` gives the same numbers as `torch.optim.Adam` (weight decay added to the gradient,
  so it flows through m and v: L2 regularisation).
- `AdamW` gives the same numbers as `torch.optim.AdamW` (decoupled decay). With
  `bias_correction=False, eps=1e-6` it is the original release's `AdamWeightDecayOptimizer`,
  also available as `bert_adam(...)`.
- `bert_param_groups` splits a model's parameters into a decayed and a not-decayed group.
- Schedules are pure functions of the step that return the multiplier of the peak rate:
  `warmup_linear_decay` (transformers' `get_linear_schedule_with_warmup`) and
  `polynomial_decay_with_warmup` (the original release). `make_lr_scheduler` wraps either
  in a `torch.optim.lr_scheduler.LambdaLR`. `FractionLR` runs the same shapes on the
  fraction of a run done instead of the step (a run with a time budget: `--max-minutes`).
- Gradient clipping: the original clips to global norm `MAX_GRAD_NORM = 1.0`; use
  `torch.nn.utils.clip_grad_norm_` (re-exported here), do not rewrite it.

Where the original and transformers differ, both are here and the docstrings say which is which.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn
from torch.nn.utils import clip_grad_norm_
from torch.optim.lr_scheduler import LambdaLR

__all__ = [
    "Adam",
    "AdamW",
    "bert_adam",
    "bert_param_groups",
    "warmup_linear_decay",
    "polynomial_decay_with_warmup",
    "make_lr_scheduler",
    "schedule_at_fraction",
    "FractionLR",
    "clip_grad_norm_",
    "MAX_GRAD_NORM",
    "NO_DECAY_NAME_PATTERNS",
]

MAX_GRAD_NORM = 1.0
"""The original clips all gradients together to global norm 1.0 before every update
(`tf.clip_by_global_norm`, which scales by `1.0 / max(norm, 1.0)`). The PyTorch equivalent is
`torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)`, which scales by
`1.0 / (norm + 1e-6)` when that is below 1: the same up to the 1e-6."""

NO_DECAY_NAME_PATTERNS = ("LayerNorm", "layer_norm", "bias")
"""Substrings of a parameter name that exclude it from weight decay: the original's
`exclude_from_weight_decay` list (matched anywhere in the name, as its `re.search` does)."""


# --- Argument checks ---------------------------------------------------------------------
def _check_hyperparameters(owner: str, group: dict[str, Any]) -> None:
    """Raise a ValueError naming the bad hyper-parameter of one parameter group."""
    lr, betas, eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
    if isinstance(lr, torch.Tensor):
        raise TypeError(f"{owner}: lr must be a Python float, got a tensor; use float(lr)")
    if not (isinstance(lr, (int, float)) and lr >= 0.0):  # `not >=` also catches NaN
        raise ValueError(f"{owner}: lr must be a non-negative number, got {lr!r}")
    if not (isinstance(betas, (tuple, list)) and len(betas) == 2):
        raise ValueError(f"{owner}: betas must be a pair (beta1, beta2), got {betas!r}")
    for i, beta in enumerate(betas):
        if not (isinstance(beta, (int, float)) and 0.0 <= beta < 1.0):
            raise ValueError(
                f"{owner}: betas[{i}] must be in [0, 1), got {beta!r} "
                "(BERT uses betas=(0.9, 0.999))"
            )
    if not (isinstance(eps, (int, float)) and eps >= 0.0):
        raise ValueError(f"{owner}: eps must be a non-negative number, got {eps!r}")
    if not (isinstance(weight_decay, (int, float)) and weight_decay >= 0.0):
        raise ValueError(
            f"{owner}: weight_decay must be a non-negative number, got {weight_decay!r}"
        )


# --- The shared Adam direction -------------------------------------------------------------
def _adam_direction(
    state: dict[str, Any],
    p: torch.Tensor,
    g: torch.Tensor,
    beta1: float,
    beta2: float,
    eps: float,
    bias_correction: bool,
) -> torch.Tensor:
    """Update the moments of `p` with gradient `g` and return m_hat / (sqrt(v_hat) + eps).

    The caller moves the parameter by `-lr` times this direction. `state` holds
    step t (an int), m ("exp_avg") and v ("exp_avg_sq"), named as torch names them.
    """
    if len(state) == 0:  # lazy initialisation: m = v = 0 before the first step
        state["step"] = 0
        state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    state["step"] += 1
    t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]

    m.lerp_(g, 1 - beta1)  # m = beta1 * m + (1 - beta1) * g
    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)  # v = beta2 * v + (1 - beta2) * g^2

    if bias_correction:
        m_hat = m / (1 - beta1**t)
        v_hat = v / (1 - beta2**t)
    else:  # the original BERT optimizer: raw moments
        m_hat, v_hat = m, v
    return m_hat / (v_hat.sqrt() + eps)


def _dense_grad(owner: str, p: torch.Tensor) -> torch.Tensor:
    if p.grad.is_sparse:
        raise RuntimeError(
            f"{owner} does not support sparse gradients (an nn.Embedding(sparse=True)?): "
            "use torch.optim.SparseAdam for those parameters or a dense embedding"
        )
    return p.grad


class Adam(torch.optim.Optimizer):
    """Adam (Kingma & Ba, 2015) with optional L2 weight decay; equal to `torch.optim.Adam`.

    `weight_decay` is added to the gradient (`g = grad + weight_decay * p`) before the moments,
    as `torch.optim.Adam` does. Adam then divides it by sqrt(v): large-gradient weights are
    decayed less. AdamW's decoupled decay does not have that effect.

    Args:
        params: parameters or parameter groups (dicts), as for any torch optimizer.
        lr: step size (>= 0). betas: (beta1, beta2), each in [0, 1).
        eps: added to sqrt(v_hat) in the denominator. weight_decay: L2 coefficient (>= 0).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}
        _check_hyperparameters(type(self).__name__, defaults)
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        super().add_param_group(param_group)
        _check_hyperparameters(type(self).__name__, self.param_groups[-1])

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, (beta1, beta2) = group["lr"], group["betas"]
            eps, weight_decay = group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:  # no gradient this step: no update, no moment decay
                    continue
                g = _dense_grad("Adam", p)
                if weight_decay != 0:
                    g = g.add(p, alpha=weight_decay)  # L2: the decay goes through m and v
                direction = _adam_direction(self.state[p], p, g, beta1, beta2, eps, True)
                p.add_(direction, alpha=-lr)  # p = p - lr * m_hat / (sqrt(v_hat) + eps)
        return loss


class AdamW(torch.optim.Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019).

    With `bias_correction=True` (default) it equals `torch.optim.AdamW`:

        p = p * (1 - lr * weight_decay)
        p = p - lr * m_hat / (sqrt(v_hat) + eps)

    With `bias_correction=False, eps=1e-6` it is the original release's
    `AdamWeightDecayOptimizer`, which computes

        update = m / (sqrt(v) + eps) + weight_decay * p
        p = p - lr * update

    The two decay forms are the same formula, not an approximation of each other: the Adam
    direction does not depend on p, so p - lr*(u + wd*p) = p*(1 - lr*wd) - lr*u exactly.
    Only float rounding differs. This class uses the first form for both.

    Args:
        params: parameters or parameter groups (e.g. `bert_param_groups(model, 0.01)`).
        lr: step size (>= 0). betas: (beta1, beta2), each in [0, 1).
        eps: added to sqrt(v_hat). weight_decay: decoupled decay coefficient (>= 0).
        bias_correction: divide m and v by (1 - beta^t) (True: torch; False: original BERT).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        bias_correction: bool = True,
    ) -> None:
        if not isinstance(bias_correction, bool):
            raise TypeError(
                f"AdamW: bias_correction must be True or False, got {bias_correction!r}"
            )
        defaults = {
            "lr": lr,
            "betas": tuple(betas),
            "eps": eps,
            "weight_decay": weight_decay,
            "bias_correction": bias_correction,
        }
        _check_hyperparameters(type(self).__name__, defaults)
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        super().add_param_group(param_group)
        _check_hyperparameters(type(self).__name__, self.param_groups[-1])

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, (beta1, beta2) = group["lr"], group["betas"]
            eps, weight_decay = group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = _dense_grad("AdamW", p)
                if weight_decay != 0:
                    p.mul_(1 - lr * weight_decay)  # decoupled: never enters m or v
                direction = _adam_direction(
                    self.state[p], p, g, beta1, beta2, eps, group["bias_correction"]
                )
                p.add_(direction, alpha=-lr)
        return loss


def bert_adam(
    params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
    lr: float = 1e-4,
    weight_decay: float = 0.01,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-6,
) -> AdamW:
    """The original release's `AdamWeightDecayOptimizer`: `AdamW` without bias correction.

    Defaults are the paper's pre-training recipe (lr 1e-4, weight decay 0.01, eps 1e-6).
    Pass `bert_param_groups(model, weight_decay)` as `params` to exclude LayerNorm and biases
    from the decay as the original does (a plain parameter list decays everything).
    Not to be confused with pytorch-pretrained-bert's old `BertAdam`, which also applied the
    schedule and the clipping inside the optimizer.
    """
    return AdamW(
        params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, bias_correction=False
    )


# --- Parameter groups ---------------------------------------------------------------------
def bert_param_groups(
    model: nn.Module,
    weight_decay: float,
    *,
    no_decay_patterns: Iterable[str] = NO_DECAY_NAME_PATTERNS,
    no_decay_modules: tuple[type[nn.Module], ...] = (nn.LayerNorm,),
) -> list[dict[str, Any]]:
    """Split `model`'s parameters into `[decay_group, no_decay_group]` for an optimizer.

    A parameter is NOT decayed when its name contains one of `no_decay_patterns`
    ("LayerNorm", "layer_norm", "bias": the original's list) or when it belongs directly to a
    module of a type in `no_decay_modules` (nn.LayerNorm), whatever the attribute is called.
    Everything else is decayed, embeddings included (as in the original).

    Every parameter appears exactly once: `model.named_parameters()` yields a tied weight (the
    MLM decoder shares the word-embedding matrix) once, under its first name. Frozen
    parameters (requires_grad=False) are included: they get no gradient, so no update.

    Returns:
        Two dicts with keys "params" (tensors), "param_names" (their names, which torch
        optimizers keep) and "weight_decay" (`weight_decay`, then 0.0). Either may be empty.
    """
    if not (isinstance(weight_decay, (int, float)) and weight_decay >= 0.0):
        raise ValueError(f"weight_decay must be a non-negative number, got {weight_decay!r}")
    patterns = tuple(no_decay_patterns)
    norm_param_ids = {
        id(p)
        for module in model.modules()
        if isinstance(module, no_decay_modules)
        for p in module.parameters(recurse=False)
    }

    decay: list[tuple[str, nn.Parameter]] = []
    no_decay: list[tuple[str, nn.Parameter]] = []
    for name, p in model.named_parameters():  # tied parameters come once
        if id(p) in norm_param_ids or any(pattern in name for pattern in patterns):
            no_decay.append((name, p))
        else:
            decay.append((name, p))

    n_unique = len({id(p) for p in model.parameters()})
    assert len(decay) + len(no_decay) == n_unique, "a parameter was lost or counted twice"
    return [
        {
            "params": [p for _, p in decay],
            "param_names": [n for n, _ in decay],
            "weight_decay": float(weight_decay),
        },
        {
            "params": [p for _, p in no_decay],
            "param_names": [n for n, _ in no_decay],
            "weight_decay": 0.0,
        },
    ]


# --- Learning-rate schedules (pure functions of the step) --------------------------------
def _check_schedule(step: int, warmup_steps: int, total_steps: int) -> None:
    for name, value in (
        ("step", step),
        ("warmup_steps", warmup_steps),
        ("total_steps", total_steps),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if total_steps < 1:
        raise ValueError(f"total_steps must be at least 1, got {total_steps}")
    if warmup_steps > total_steps:
        raise ValueError(
            f"warmup_steps ({warmup_steps}) is larger than total_steps ({total_steps}): the "
            "rate would never decay. Use fewer warm-up steps (BERT: 10k of 1M)."
        )


def warmup_linear_decay(step: int, *, warmup_steps: int, total_steps: int) -> float:
    """transformers' `get_linear_schedule_with_warmup` multiplier of the peak rate at `step`.

    1. Warm-up, step < warmup_steps: rise linearly from 0, `step / warmup_steps`.
    2. Then decay linearly from 1 at `warmup_steps` to 0 at `total_steps`, over the
       `total_steps - warmup_steps` remaining steps: `(total - step) / (total - warmup)`.
    3. After `total_steps`: 0.

    `step` counts optimizer updates already done, so the first update uses step 0 (rate 0
    when warming up), as with `LambdaLR`. No drop at the end of warm-up (compare
    `polynomial_decay_with_warmup`).
    """
    _check_schedule(step, warmup_steps, total_steps)
    if step < warmup_steps:
        return step / warmup_steps
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def polynomial_decay_with_warmup(
    step: int,
    *,
    warmup_steps: int,
    total_steps: int,
    power: float = 1.0,
    end_factor: float = 0.0,
) -> float:
    """The original release's schedule (`optimization.create_optimizer`), as a multiplier.

    1. Polynomial decay over ALL steps, from step 0 (TensorFlow's `polynomial_decay`):
       `(1 - end_factor) * (1 - min(step, total) / total) ** power + end_factor`.
    2. While step < warmup_steps it is replaced by linear warm-up: `step / warmup_steps`.

    So warm-up climbs toward 1, but right after it the rate is `1 - warmup/total` (power 1):
    a small drop at the boundary (0.99 for BERT's 10k of 1M steps). transformers'
    `get_polynomial_decay_schedule_with_warmup` decays from the peak over
    `total - warmup` steps instead: a different function (see `warmup_linear_decay`).
    `end_factor` is `end_learning_rate / init_lr` (0 in the original).
    """
    _check_schedule(step, warmup_steps, total_steps)
    if not (isinstance(power, (int, float)) and power > 0):
        raise ValueError(f"power must be a positive number, got {power!r}")
    if not (isinstance(end_factor, (int, float)) and 0.0 <= end_factor <= 1.0):
        raise ValueError(f"end_factor must be in [0, 1], got {end_factor!r}")
    if step < warmup_steps:
        return step / warmup_steps
    fraction_left = 1.0 - min(step, total_steps) / total_steps
    return (1.0 - end_factor) * fraction_left**power + end_factor


SCHEDULES: dict[str, Callable[..., float]] = {
    "linear": warmup_linear_decay,
    "polynomial": polynomial_decay_with_warmup,
}


def make_lr_scheduler(
    optimizer: torch.optim.Optimizer,
    schedule: str | Callable[..., float] = "linear",
    *,
    warmup_steps: int,
    total_steps: int,
    **schedule_kwargs: Any,
) -> LambdaLR:
    """A `LambdaLR` whose multiplier at step s is `schedule(s, warmup_steps=..., ...)`.

    `schedule` is "linear" (`warmup_linear_decay`, transformers' default), "polynomial"
    (`polynomial_decay_with_warmup`, the original) or any function with that signature.
    The optimizer's `lr` is the peak rate. Call `scheduler.step()` after `optimizer.step()`.
    """
    if isinstance(schedule, str):
        if schedule not in SCHEDULES:
            raise ValueError(
                f"schedule must be one of {sorted(SCHEDULES)} or a function, got {schedule!r}"
            )
        schedule = SCHEDULES[schedule]
    kwargs = {"warmup_steps": warmup_steps, "total_steps": total_steps, **schedule_kwargs}
    schedule(0, **kwargs)  # check the arguments now, not at the first step

    def multiplier(step: int) -> float:
        return schedule(step, **kwargs)

    return LambdaLR(optimizer, multiplier)


# --- The same schedules on the fraction of a run done (a time budget) ---------------------
SCHEDULE_RESOLUTION = 1_000_000
"""`schedule_at_fraction` evaluates a step schedule on a grid of this many steps."""


def schedule_at_fraction(
    fraction: float, *, schedule: str = "linear", warmup_share: float = 0.1
) -> float:
    """The multiplier of a schedule of `SCHEDULES` at `fraction` in [0, 1] of the run, instead
    of at a step: warm-up over the first `warmup_share` of the run, then the decay, 0 at 1.

    It is the step function itself on a run of `SCHEDULE_RESOLUTION` steps (one shape, two
    clocks): `warmup_linear_decay` gives `f / w` while `f < w`, then `(1 - f) / (1 - w)`.
    Fractions are clamped to [0, 1].
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {sorted(SCHEDULES)}, got {schedule!r}")
    if not 0.0 <= warmup_share < 1.0:
        raise ValueError(f"warmup_share must be in [0, 1), got {warmup_share!r}")
    n = SCHEDULE_RESOLUTION
    step = round(min(max(float(fraction), 0.0), 1.0) * n)
    return SCHEDULES[schedule](step, warmup_steps=round(warmup_share * n), total_steps=n)


class FractionLR:
    """A learning-rate scheduler driven by how much of the run is done, not by the step count.

    `progress()` returns the fraction done in [0, 1] (for a time budget: the share of the
    training time spent). Every `step()` sets each group's rate to its peak (the `lr` the
    optimizer was built with) times `schedule_at_fraction(progress())`; calling it twice in a
    row changes nothing. The state of the run lives in `progress`; `state_dict` holds the peaks.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        progress: Callable[[], float],
        *,
        schedule: str = "linear",
        warmup_share: float = 0.1,
    ) -> None:
        schedule_at_fraction(0.0, schedule=schedule, warmup_share=warmup_share)  # check now
        self.optimizer, self.progress = optimizer, progress
        self.schedule, self.warmup_share = schedule, warmup_share
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
        self.step()

    def multiplier(self) -> float:
        return schedule_at_fraction(
            self.progress(), schedule=self.schedule, warmup_share=self.warmup_share
        )

    def step(self) -> None:
        factor = self.multiplier()
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = base * factor

    def get_last_lr(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        return {"base_lrs": list(self.base_lrs), "schedule": self.schedule,
                "warmup_share": self.warmup_share}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.base_lrs = list(state["base_lrs"])
        self.schedule, self.warmup_share = state["schedule"], state["warmup_share"]
        self.step()
