"""Checking a functional optimizer step against a torch-style optimizer, step by step."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from bertcourse.grading.checks import _fail
from bertcourse.grading.forbid import run
from bertcourse.grading.memo import once
from bertcourse.grading.mistakes import Mistake, diagnose
from bertcourse.grading.mistakes import message as mistake_message
from bertcourse.grading.values import _call_text, _compare, _fn_name, describe

# --- optimizers -----------------------------------------------------------------------------


def _moments(optimizer: torch.optim.Optimizer, p: Tensor) -> tuple[Tensor, Tensor]:
    state = optimizer.state[p]
    return state["exp_avg"].detach().clone(), state["exp_avg_sq"].detach().clone()


def functional_step(
    optimizer_class: type[torch.optim.Optimizer], **fixed: Any
) -> Callable[..., Any]:
    """An Adam-family optimizer class as a function `(param, grad, m, v, t, **hyper) -> (param, m, v)`.

    `t` is the number of the step being taken (1 for the first). For `use_reference`: the
    class's `step` is captured now, so the function keeps working while `step` is forbidden.
    """
    step_impl = optimizer_class.step

    def reference_step(
        param: Tensor, grad: Tensor, m: Tensor, v: Tensor, t: int, **hyper: Any
    ) -> Any:
        p = nn.Parameter(param.detach().clone())
        p.grad = grad.detach().clone()
        optimizer = optimizer_class([p], **{**fixed, **hyper})
        done = t - 1
        if optimizer_class.__module__.startswith("torch."):
            done = torch.tensor(float(done))  # torch.optim keeps the step count as a tensor
        optimizer.state[p] = {
            "step": done,
            "exp_avg": m.detach().clone(),
            "exp_avg_sq": v.detach().clone(),
        }
        step_impl(optimizer)
        return (p.detach().clone(), *_moments(optimizer, p))

    reference_step.__name__ = f"{optimizer_class.__name__}_step"
    if not fixed:  # named across the grader's boundary as functional_step(optimizer_class)
        reference_step._functional_step_of = optimizer_class
    return reference_step


def _reference_trajectory(
    optimizer_class: type[torch.optim.Optimizer],
    param: Tensor,
    grads: list[Tensor],
    settings: Mapping[str, Any],
) -> list[tuple[Tensor, Tensor, Tensor]]:
    """(param, m, v) after each of `optimizer_class`'s steps over `grads`, from `param`."""
    ref_p = nn.Parameter(param.detach().clone())
    optimizer = optimizer_class([ref_p], **settings)
    trajectory = []
    for g in grads:
        ref_p.grad = g.clone()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optimizer.step()
        trajectory.append((ref_p.detach().clone(), *_moments(optimizer, ref_p)))
    return trajectory


def check_optimizer_steps(
    step_fn: Callable[..., Any],
    optimizer_class: type[torch.optim.Optimizer],
    param: Tensor,
    grads: Iterable[Tensor],
    *,
    forbid: str | Iterable[str] = (),
    use_reference: Mapping[str, Callable[..., Any] | str] | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    hint: str | None = None,
    mistakes: str | Sequence[Mistake] = (),
    reference_hyper: Mapping[str, Any] | None = None,
    **hyper: Any,
) -> None:
    """Run the learner's functional step over `grads` beside a torch-style optimizer.

    The learner's `step_fn(param, grad, m, v, t, **hyper)` returns the new `(param, m, v)`,
    starting from m = v = 0 and t = 1. The reference is
    `optimizer_class([param], **hyper, **reference_hyper)` stepped with the same gradients
    (`reference_hyper`: settings the learner's function does not take, such as
    `bias_correction=False`, or its defaults left out of the call); after every step the
    parameter and both moments must agree. The message names the first step where they do not.
    """
    __tracebackhide__ = True
    grads = [g.detach().clone() for g in grads]
    # the same for every student: a grader computes it once (`memo`)
    trajectory = once(
        _reference_trajectory, optimizer_class, param, grads, {**hyper, **(reference_hyper or {})}
    )
    p, m, v = param.detach().clone(), torch.zeros_like(param), torch.zeros_like(param)
    for t, (g, expected) in enumerate(zip(grads, trajectory, strict=True), start=1):
        call = _call_text(step_fn, (p, g, m, v, t), hyper)
        got = run(
            step_fn,
            p.clone(),
            g.clone(),
            m.clone(),
            v.clone(),
            t,
            forbid=forbid,
            use_reference=use_reference,
            **hyper,
        )
        if not (isinstance(got, (tuple, list)) and len(got) == 3):
            _fail(f"{call} must return (param, m, v), got {describe(got)}", [], hint)
        lines = []
        for name, g_value, e_value in zip(("param", "m", "v"), got, expected):
            lines += _compare(g_value, e_value, name, atol, rtol, check_dtype=True)
        if lines:
            header = (
                f"step t={t} of {len(grads)} differs from {optimizer_class.__module__}."
                f"{optimizer_class.__name__}{_hyper_text({**hyper, **(reference_hyper or {})})}:"
            )
            known = mistakes and diagnose(
                tuple(got),
                mistakes,
                (p, g, m, v, t),
                dict(hyper),
                lambda x, w: _compare_steps(x, w, atol, rtol),
                call=lambda *a, **k: run(
                    step_fn, *a, forbid=forbid, use_reference=use_reference, **k
                ),
            )
            if known:  # the mistake's headline first: the line the validate views show
                header = f"{mistake_message(known)}\n{header}"
            _fail(f"{header}\n  {call}", lines, hint)
        p, m, v = got
    print(
        f"OK {_fn_name(step_fn)}: {len(grads)} steps agree with {optimizer_class.__name__}{_hyper_text(hyper)}"
    )


def _compare_steps(got: tuple, wrong: tuple, atol: float | None, rtol: float | None) -> list[str]:
    lines = []
    for name, g_value, w_value in zip(("param", "m", "v"), got, wrong):
        lines += _compare(g_value, w_value, name, atol, rtol, check_dtype=True)
    return lines


def _hyper_text(hyper: Mapping[str, Any]) -> str:
    return "(" + ", ".join(f"{k}={v!r}" for k, v in hyper.items()) + ")"
