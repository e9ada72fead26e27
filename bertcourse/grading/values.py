"""Describing and comparing values for the checks' messages: shapes, dtypes, the largest error."""

from __future__ import annotations

import copy
import inspect
import math
import random
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from bertcourse.grading import i18n

_PLAIN = frozenset({type(None), bool, int, str})  # exact types JSON writes and reads as is
_PLAIN_OR_FLOAT = _PLAIN | {float}  # floats too when finite


def plain_items(items: list[Any] | tuple[Any, ...]) -> bool:
    """Every item a JSON scalar (finite floats included): a list of token ids or losses is
    then written and read in one step, not one call per item."""
    kinds = set(map(type, items))  # C speed: these lists hold thousands of token ids
    if kinds <= _PLAIN:
        return True
    return kinds <= _PLAIN_OR_FLOAT and all(math.isfinite(v) for v in items if type(v) is float)


class GradingError(AssertionError):
    """A check failed; the message says what was called, what was expected and what came back."""

    def __init__(self, *args: Any) -> None:  # in the feedback's language (grading.i18n)
        super().__init__(*(i18n.translate(a) if isinstance(a, str) else a for a in args))


class ForbiddenCallError(RuntimeError):
    """The learner's code called a function that the part asks them to write themselves."""


# --- describing values ------------------------------------------------------------------


def describe(x: Any) -> str:
    """A short description of a value for messages: shapes and dtypes, not contents."""
    if isinstance(x, Tensor):
        dtype = str(x.dtype).replace("torch.", "")
        return f"Tensor{tuple(x.shape)} {dtype}"
    if isinstance(x, nn.Module):
        return f"{type(x).__name__}(...)"
    if isinstance(x, torch.Generator):
        return "torch.Generator"
    if isinstance(x, random.Random):
        return "random.Random"
    if isinstance(x, (list, tuple)):
        if len(x) <= 20:  # more items cannot print in 60 characters: not printed at all
            text = repr(x)
            if len(text) <= 60:
                return text
        kinds = sorted({type(v).__name__ for v in x})
        return f"{type(x).__name__} of {len(x)} {'/'.join(kinds)}"
    if isinstance(x, Mapping):
        return f"dict with keys {sorted(map(str, x))}"
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def _fn_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def _call_text(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """`fn(q=Tensor(2, 3) float32, ...)`, with parameter names when the signature allows."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
        parts = [f"{k}={describe(v)}" for k, v in bound.arguments.items()]
    except (TypeError, ValueError):
        parts = [describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in kwargs.items()]
    return f"{_fn_name(fn)}({', '.join(parts)})"


def _fmt(value: float) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return f"{value:.6g}"


# --- copies of the inputs -----------------------------------------------------------------


def _copy(x: Any) -> Any:
    """An independent deep copy (tensors, modules and optimizers keep their links to each other).

    Values that cannot be deep-copied (a tensor in the middle of a graph) are copied item by
    item, and tensors are then cloned.
    """
    if type(x) in (list, tuple) and plain_items(x):  # a vocabulary: no copy per item
        return list(x) if type(x) is list else x
    try:
        return copy.deepcopy(x)
    except Exception:
        pass
    if isinstance(x, Tensor):
        return x.detach().clone()
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # namedtuple
        return type(x)(*(_copy(v) for v in x))
    if isinstance(x, (list, tuple)):
        return type(x)(_copy(v) for v in x)
    if isinstance(x, dict):
        return {k: _copy(v) for k, v in x.items()}
    return x  # an object that cannot be copied is passed as it is


# --- comparing values ---------------------------------------------------------------------

_DEFAULT_TOL = {
    torch.float16: (1e-3, 1e-2),
    torch.bfloat16: (1e-2, 2e-2),
    torch.float32: (1e-5, 1e-4),
    torch.float64: (1e-10, 1e-8),
}


def _tolerances(expected: Any, atol: float | None, rtol: float | None) -> tuple[float, float]:
    dtype = expected.dtype if isinstance(expected, Tensor) else torch.float64
    default_atol, default_rtol = _DEFAULT_TOL.get(dtype, (1e-5, 1e-4))
    return (default_atol if atol is None else atol, default_rtol if rtol is None else rtol)


def _index_text(flat_index: int, shape: tuple[int, ...]) -> str:
    if not shape:
        return "()"
    idx = []
    for size in reversed(shape):
        idx.append(flat_index % size)
        flat_index //= size
    return str(tuple(reversed(idx)))


def _compare_tensors(
    got: Tensor,
    expected: Tensor,
    where: str,
    atol: float | None,
    rtol: float | None,
    check_dtype: bool,
) -> list[str]:
    if got.shape != expected.shape:
        return [f"{where}: expected shape {tuple(expected.shape)}, got {tuple(got.shape)}"]
    if check_dtype and got.dtype != expected.dtype:
        return [f"{where}: expected dtype {expected.dtype}, got {got.dtype}"]
    g = got.detach().cpu()
    e = expected.detach().cpu()
    if expected.numel() == 0:
        return []
    if not (torch.is_floating_point(e) or e.is_complex()):
        if torch.is_floating_point(g):
            if not torch.equal(g, g.round()):
                return [f"{where}: expected whole numbers ({expected.dtype}), got fractions"]
        diff = g.to(torch.float64) != e.to(torch.float64)
        if not bool(diff.any()):
            return []
        first = int(diff.flatten().nonzero()[0])
        return [
            f"{where}: {int(diff.sum())} of {e.numel()} entries differ; first at index "
            f"{_index_text(first, tuple(e.shape))}: expected {e.flatten()[first].item()}, "
            f"got {g.flatten()[first].item()}",
            *_small_values(g, e),
        ]
    a, r = _tolerances(expected, atol, rtol)
    g64, e64 = g.to(torch.float64), e.to(torch.float64)
    close = torch.isclose(g64, e64, rtol=r, atol=a, equal_nan=True)
    if bool(close.all()):
        return []
    lines = []
    nan_got = torch.isnan(g64) & ~torch.isnan(e64)
    if bool(nan_got.any()):
        first = int(nan_got.flatten().nonzero()[0])
        lines.append(
            f"{where}: got NaN at {int(nan_got.sum())} position(s), e.g. index "
            f"{_index_text(first, tuple(e.shape))} where {_fmt(e64.flatten()[first].item())} was "
            "expected"
        )
    err = (g64 - e64).abs().masked_fill(close, 0.0).nan_to_num(nan=math.inf)
    first = int(err.flatten().argmax())
    lines.append(
        f"{where}: {int((~close).sum())} of {e.numel()} values differ (atol={a:g}, rtol={r:g}); "
        f"max abs error {_fmt(err.flatten()[first].item())} at index "
        f"{_index_text(first, tuple(e.shape))}: expected {_fmt(e64.flatten()[first].item())}, "
        f"got {_fmt(g64.flatten()[first].item())}"
    )
    lines += _small_values(g, e)
    return lines


def _small_values(g: Tensor, e: Tensor) -> list[str]:
    """Both tensors in full when they are small, with 4 significant digits."""
    if e.numel() > 12:
        return []
    return [f"    expected {_short(e.tolist())}", f"    got      {_short(g.tolist())}"]


def _short(values: Any) -> str:
    if isinstance(values, list):
        return "[" + ", ".join(_short(v) for v in values) + "]"
    if isinstance(values, float):
        return f"{values:.4g}"
    return repr(values)


def _is_number(x: Any) -> bool:
    if isinstance(x, bool):
        return True
    if isinstance(x, (int, float)):
        return True
    return type(x).__module__ == "numpy" and hasattr(x, "item") and getattr(x, "ndim", 1) == 0


def _compare(
    got: Any,
    expected: Any,
    where: str,
    atol: float | None,
    rtol: float | None,
    check_dtype: bool,
) -> list[str]:
    """Differences between `got` and `expected`, as message lines (empty when equal)."""
    if isinstance(expected, Tensor):
        if _is_number(got) and expected.dim() == 0:
            got = torch.tensor(got, dtype=expected.dtype)
            check_dtype = False
        if type(got) not in (Tensor, nn.Parameter):
            return [f"{where}: expected a torch.Tensor {describe(expected)}, got {describe(got)}"]
        return _compare_tensors(got, expected, where, atol, rtol, check_dtype)
    if _is_number(expected):
        if isinstance(got, Tensor) and got.dim() == 0 and type(got) in (Tensor, nn.Parameter):
            got = got.item()
        if not _is_number(got):
            return [f"{where}: expected a number ({_fmt(expected)}), got {describe(got)}"]
        if isinstance(expected, bool) or (
            isinstance(expected, int) and isinstance(got, int) and atol is None and rtol is None
        ):
            return [] if got == expected else [f"{where}: expected {expected!r}, got {got!r}"]
        a, r = _tolerances(expected, atol, rtol)
        e, g = float(expected), float(got)
        if (math.isnan(e) and math.isnan(g)) or math.isclose(g, e, rel_tol=r, abs_tol=a):
            return []
        return [f"{where}: expected {_fmt(e)}, got {_fmt(g)} (abs error {_fmt(abs(g - e))})"]
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)):
            return [
                f"{where}: expected a {type(expected).__name__} of {len(expected)}, got {describe(got)}"
            ]
        if len(got) != len(expected):
            lines = [f"{where}: expected {len(expected)} items, got {len(got)}"]
            if len(expected) <= 30 and len(got) <= 30:
                lines += [f"    expected {expected!r}", f"    got      {got!r}"]
            return lines
        fields = getattr(expected, "_fields", None)
        for i, (g, e) in enumerate(zip(got, expected)):
            name = f"{where}.{fields[i]}" if fields else f"{where}[{i}]"
            lines = _compare(g, e, name, atol, rtol, check_dtype)
            if lines:
                if len(expected) <= 30 and all(_is_number(v) for v in expected):
                    lines += [f"    expected {list(expected)!r}", f"    got      {list(got)!r}"]
                return lines
        return []
    if isinstance(expected, Mapping):
        if not isinstance(got, Mapping):
            return [f"{where}: expected a dict, got {describe(got)}"]
        if set(got) != set(expected):
            return [
                f"{where}: expected keys {sorted(map(str, expected))}, got {sorted(map(str, got))}"
            ]
        for key in expected:
            lines = _compare(got[key], expected[key], f"{where}[{key!r}]", atol, rtol, check_dtype)
            if lines:
                return lines
        return []
    if expected is None:
        return [] if got is None else [f"{where}: expected None, got {describe(got)}"]
    if type(got) is not type(expected) or got != expected:
        return [f"{where}: expected {expected!r}, got {got!r}"]
    return []
