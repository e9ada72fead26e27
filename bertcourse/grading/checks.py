"""The checks a test cell calls: each raises `GradingError` with a message a learner can act on."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from bertcourse.grading.forbid import _reference_callable, run
from bertcourse.grading.mistakes import Mistake, diagnose
from bertcourse.grading.mistakes import message as mistake_message
from bertcourse.grading.values import (
    GradingError,
    _call_text,
    _compare,
    _copy,
    describe,
)

# --- the checks -----------------------------------------------------------------------------


def _fail(header: str, lines: list[str], hint: str | None) -> None:
    __tracebackhide__ = True
    text = header + "\n" + "\n".join("  " + line for line in lines)
    if hint:
        text += f"\nHint: {hint}"
    raise GradingError(text)


def check_close(
    fn: Callable[..., Any],
    reference: Callable[..., Any] | str,
    *args: Any,
    atol: float | None = None,
    rtol: float | None = None,
    forbid: str | Iterable[str] = (),
    use_reference: Mapping[str, Callable[..., Any] | str] | None = None,
    check_dtype: bool = True,
    inputs_unchanged: bool = False,
    hint: str | None = None,
    quiet: bool = False,
    mistakes: str | Sequence[Mistake] = (),
    **kwargs: Any,
) -> None:
    """Check that the learner's `fn(*args, **kwargs)` gives what `reference` gives.

    Args:
        fn: the learner's function.
        reference: the correct function, or its dotted path ("bertcourse.attention.split_heads").
            It runs first, on its own copy of the inputs, with nothing forbidden.
        atol, rtol: tolerances (default by the expected dtype). Outputs may be tensors,
            numbers, None, or tuples / lists / dicts of them (compared item by item).
        forbid: what `fn` may not call (see `run`).
        use_reference: earlier parts to replace by their reference while `fn` runs.
        check_dtype: tensors must also have the expected dtype.
        inputs_unchanged: fail if `fn` modified one of its tensor inputs in place.
        hint: shown below the message when the check fails.
        quiet: do not print the one-line success message.
        mistakes: known mistakes of this part (a key of `mistakes.CATALOGUE` or a list): when
            the output is wrong and equals what one of them gives, the message names it.
        **kwargs: keyword arguments for both functions.
    """
    __tracebackhide__ = True
    call = _call_text(fn, args, kwargs)
    ref = _reference_callable(reference)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_args, ref_kwargs = _copy((args, kwargs))
        expected = ref(*ref_args, **ref_kwargs)
    student_args, student_kwargs = _copy((args, kwargs))
    got = run(fn, *student_args, forbid=forbid, use_reference=use_reference, **student_kwargs)
    if inputs_unchanged:
        changed = _compare(
            (student_args, student_kwargs), (args, kwargs), "input", 0.0, 0.0, check_dtype=True
        )
        if changed:
            _fail(
                f"{call} modified its input in place:",
                changed,
                hint or "work on a copy (x.clone()).",
            )
    lines = _compare(got, expected, "output", atol, rtol, check_dtype)
    if lines:
        header = f"{call} returned a wrong result:"
        known = mistakes and diagnose(
            got,
            mistakes,
            args,
            kwargs,
            lambda g, w: _compare(g, w, "output", atol, rtol, check_dtype),
        )
        if known:
            header = f"{call} returned a wrong result. {mistake_message(known)}"
        _fail(header, lines, hint)
    if not quiet:
        print(f"OK {call}")


def check_equal(
    fn: Callable[..., Any], reference: Callable[..., Any] | str, *args: Any, **kwargs: Any
) -> None:
    """`check_close` with exact equality (for ids, masks, counts)."""
    __tracebackhide__ = True
    kwargs.setdefault("atol", 0.0)
    kwargs.setdefault("rtol", 0.0)
    check_close(fn, reference, *args, **kwargs)


def check_value(
    got: Any,
    expected: Any,
    what: str = "value",
    *,
    atol: float | None = None,
    rtol: float | None = None,
    check_dtype: bool = True,
    hint: str | None = None,
) -> None:
    """Compare a value the cell computed (e.g. with `run`) with the expected one."""
    __tracebackhide__ = True
    lines = _compare(got, expected, what, atol, rtol, check_dtype)
    if lines:
        _fail(f"wrong {what}:", lines, hint)


def check_true(condition: Any, message: str, *, hint: str | None = None) -> None:
    """Fail with `message` unless `condition` is true (a bool or a one-element tensor)."""
    __tracebackhide__ = True
    if isinstance(condition, Tensor):
        condition = bool(condition.all())
    if condition is not True and condition is not False:
        condition = bool(condition)
    if not condition:
        _fail(message, [], hint)


def check_tensor(
    value: Any,
    *,
    shape: tuple[int, ...] | None = None,
    dtype: torch.dtype | None = None,
    what: str = "result",
    hint: str | None = None,
) -> None:
    """Fail unless `value` is a tensor with the given shape and dtype."""
    __tracebackhide__ = True
    if type(value) not in (Tensor, nn.Parameter):
        _fail(f"{what}: expected a torch.Tensor, got {describe(value)}", [], hint)
    if shape is not None and tuple(value.shape) != tuple(shape):
        _fail(f"{what}: expected shape {tuple(shape)}, got {tuple(value.shape)}", [], hint)
    if dtype is not None and value.dtype != dtype:
        _fail(f"{what}: expected dtype {dtype}, got {value.dtype}", [], hint)


def check_proportion(
    count: int | Tensor,
    total: int | Tensor,
    p: float,
    what: str,
    *,
    num_sd: float = 5.0,
    hint: str | None = None,
) -> None:
    """Check that `count / total` is within `num_sd` binomial standard errors of `p`.

    With a fixed seed the check is deterministic; `num_sd = 5` makes a false failure of a
    correct answer (under another seed) a ~1-in-a-million event, while rates that are wrong by
    more than a few standard errors (e.g. 100% [MASK] instead of 80%) fail.
    """
    __tracebackhide__ = True
    count, total = int(count), int(total)
    if total <= 0:
        _fail(f"{what}: nothing to count (total = {total})", [], hint)
    observed = count / total
    se = math.sqrt(max(p * (1 - p), 1e-12) / total)
    if abs(observed - p) > num_sd * se:
        _fail(
            f"{what}: observed {observed:.4f} ({count} of {total}), expected {p:.4f} "
            f"± {num_sd * se:.4f} ({num_sd:g} standard errors)",
            [],
            hint,
        )
