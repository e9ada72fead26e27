"""The checks a test cell calls: each raises `GradingError` with a message a learner can act on."""

from __future__ import annotations

import dataclasses
import linecache
import math
import os
import textwrap
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from bertcourse.grading import i18n
from bertcourse.grading.forbid import _reference_callable, run
from bertcourse.grading.mistakes import HEADLINE_WIDTH, Mistake, diagnose
from bertcourse.grading.mistakes import message as mistake_message
from bertcourse.grading.values import (
    ForbiddenCallError,
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
    raise GradingError(text)  # (in the feedback's language: GradingError translates)


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
    _PARTS.checking(fn)
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
            call=lambda *a, **k: run(fn, *a, forbid=forbid, use_reference=use_reference, **k),
        )
        if known:
            header = f"{mistake_message(known)}\n{header}"
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
    mistakes: str | Sequence[Mistake] = (),
    args: tuple[Any, ...] = (),
    call: Callable[..., Any] | None = None,
) -> None:
    """Compare a value the cell computed (e.g. with `run`) with the expected one.

    `mistakes`, `args`, `call`: as in `check_close`, for a value that is not simply what the
    learner's function returns (a step's loss and the parameters after it): `got` came from
    the reference's arguments `args`, and `call(*probe_args)` gives the same kind of value for
    the learner on a probe, so that a known mistake is named only on its whole signature.
    """
    __tracebackhide__ = True
    lines = _compare(got, expected, what, atol, rtol, check_dtype)
    if lines:
        header = f"wrong {what}:"
        known = mistakes and diagnose(
            got,
            mistakes,
            args,
            {},
            lambda g, w: _compare(g, w, what, atol, rtol, check_dtype),
            call=call,
        )
        if known:
            header = f"{mistake_message(known)}\n{header}"
        _fail(header, lines, hint)


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


# --- what a learner sees in JupyterLab and `nbgrader validate` --------------------------------
#
# IPython prints every frame of a traceback and never hides the innermost one, so a failed
# check would end in this file (`raise GradingError(text)`), and `nbgrader validate` cuts each
# line at 87 characters. In an IPython kernel, a failed check is shown instead as: the message
# (its first line names the mistake and the book's section), the parts checked so far in this
# kernel (passed ones too), and the line of the learner's cell that failed. `str(error)` (what
# the referee and nbgrader's autograder keep) is unchanged.

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass
class _PartLog:
    """The test cells run in this kernel: part (the learner's function) -> passed."""

    results: dict[str, bool] = dataclasses.field(default_factory=dict)
    current: list[str] = dataclasses.field(default_factory=list)

    def checking(self, fn: Any) -> None:
        name = getattr(fn, "__name__", None)
        if isinstance(name, str) and name not in self.current:
            self.current.append(name)

    def pre_run_cell(self, *_: Any) -> None:
        self.current = []

    def post_run_cell(self, result: Any) -> None:
        if self.current:
            part = self.current[0]
            self.results.pop(part, None)  # a part run again moves to the end
            self.results[part] = bool(getattr(result, "success", True))

    def summary(self, failing: str | None) -> str:
        marks = [f"{'✓' if ok else '✗'} {name}" for name, ok in self.results.items()]
        if failing:
            marks.append("✗ " + i18n.format("{part} (this cell)", part=failing))
        parts = ", ".join(marks) if marks else i18n.gettext("none")
        return i18n.format("Parts checked so far: {parts}", parts=parts)


_PARTS = _PartLog()


def _learner_frame(tb: Any) -> Any:
    """The last frame of the traceback outside the grading package (the learner's cell)."""
    last = tb
    while tb is not None:
        if not os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(PACKAGE_DIR):
            last = tb
        tb = tb.tb_next
    return last


def learner_traceback(error: BaseException, tb: Any) -> list[str]:
    """The lines a learner sees for a failed check: the message first (its first line is the
    mistake's headline), the parts so far, then the cell and line that failed, and no frame
    of the grading package."""
    lines = str(error).splitlines() or [type(error).__name__]
    if not isinstance(error, GradingError):
        lines[0] = f"{type(error).__name__}: {lines[0]}"
    failing = _PARTS.current[0] if _PARTS.current else None
    lines.append(_PARTS.summary(failing))
    frame = _learner_frame(tb)
    if frame is not None:
        code = frame.tb_frame.f_code
        source = linecache.getline(code.co_filename, frame.tb_lineno).strip()
        lines.append(
            i18n.format(
                "(in this cell, line {line}: {source})", line=str(frame.tb_lineno), source=source
            )
        )
    return [wrapped for line in lines for wrapped in _wrap(line)]


def _wrap(line: str) -> list[str]:
    """A line cut into lines of at most HEADLINE_WIDTH columns, with its indent kept: Chinese
    feedback by display width (a Chinese character takes two columns, i18n.wrap)."""
    if i18n.display_width(line) != len(line):
        return i18n.wrap(line, HEADLINE_WIDTH)
    indent = line[: len(line) - len(line.lstrip())]
    return textwrap.wrap(
        line,
        HEADLINE_WIDTH,
        subsequent_indent=indent + "    ",
        break_long_words=True,
        break_on_hyphens=False,
    ) or [line]


def _ipython_handler(shell: Any, etype: Any, value: Any, tb: Any, tb_offset: Any = None):
    """IPython's CustomTB: it shows the traceback itself (the kernel sends it as the error).
    A failed check gets `learner_traceback`; any other error keeps IPython's traceback, with
    the parts so far below it when it happened in a test cell."""
    if isinstance(value, (GradingError, ForbiddenCallError)):
        lines = learner_traceback(value, tb)
    else:
        lines = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
        if _PARTS.current:
            lines = [*lines, *_wrap(_PARTS.summary(_PARTS.current[0]))]
    shell._showtraceback(etype, value, lines)


def _install_in_ipython() -> None:
    """Show failed checks as `learner_traceback` in an IPython kernel that has no custom handler."""
    try:
        from IPython import get_ipython
    except ImportError:  # not in a kernel
        return
    shell = get_ipython()
    if shell is None or getattr(shell, "_bertcourse_checks", False):
        return
    shell._bertcourse_checks = True
    shell.events.register("pre_run_cell", _PARTS.pre_run_cell)
    shell.events.register("post_run_cell", _PARTS.post_run_cell)
    if not shell.custom_exceptions:
        shell.set_custom_exc((Exception,), _ipython_handler)


_install_in_ipython()
