"""Checks for the test cells of the exercises (`exercises/`, `solutions/`).

A test cell calls one helper per check, and the helper raises `GradingError` (an
`AssertionError`) with a message a learner can act on: the call with the shapes of its
inputs, expected against got, the largest error and where it is, and a hint. nbgrader gives a
test cell its points when it runs without an error; the helpers return None, so a cell never
ends on a number that nbgrader would read as partial credit.

    check_close(fn, reference, *args, **kwargs)   the learner's fn against a reference, same inputs
    check_equal(...)                               the same with exact equality
    check_value(got, expected, what=...)           compare values a cell already has
    check_true(condition, message)                 a property (e.g. "rows sum to 1")
    check_tensor(x, shape=..., dtype=...)          a tensor of the expected shape and dtype
    check_proportion(count, total, p, what=...)    a rate within a few binomial standard errors
    check_optimizer_steps(step_fn, torch.optim.Adam, param, grads, lr=...)
                                                   a functional optimizer step, step by step
    run(fn, *args, **kwargs)                       call the learner's fn under the same rules

The rules, common to all of them:

- **Forbidden references.** `forbid=` names functions the part asks the learner to write (the
  PyTorch built-in, bertcourse's own version): while the learner's code runs, each is replaced
  by a stub that raises `ForbiddenCallError` and records the call, so an answer that merely
  calls the reference earns nothing, even if it catches the error. Names are dotted paths
  ("torch.nn.functional.scaled_dot_product_attention", "torch.optim.Adam.step") or keys of
  `FORBIDDEN`. Aliases in the notebook (`from torch.nn.functional import
  scaled_dot_product_attention as sdpa`) are replaced too. Modules that are not imported yet
  (transformers) are left alone: code that uses them must import them first, which patches
  nothing but is visible in the notebook.
- **Earlier parts.** `use_reference={"split_heads": "bertcourse.attention.split_heads"}` lets a
  part be graded on its own: while the learner's function runs, the notebook's `split_heads`
  is bertcourse's, so a mistake in part 2 does not cost the points of part 3 again.
- **Copies.** The reference and the learner's function each get their own deep copy of the
  inputs (tensors, modules, generators), so in-place changes cannot leak between them.
- **Warnings** raised while the checked code runs are silenced: they go to stderr, which
  nbgrader (and `nbgrader validate`) would count as a failure of correct code.
- **Tolerances** default by dtype (float32: atol 1e-5, rtol 1e-4; float64: 1e-10, 1e-8), loose
  enough for a correct answer written differently (einsum, loops, another equivalent formula).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import inspect
import math
import random
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import torch
from torch import Tensor, nn

__all__ = [
    "FORBIDDEN",
    "ForbiddenCallError",
    "GradingError",
    "check_close",
    "check_equal",
    "check_optimizer_steps",
    "check_proportion",
    "check_tensor",
    "check_true",
    "check_value",
    "forbidden",
    "functional_step",
    "randint",
    "randn",
    "run",
]


class GradingError(AssertionError):
    """A check failed; the message says what was called, what was expected and what came back."""


class ForbiddenCallError(RuntimeError):
    """The learner's code called a function that the part asks them to write themselves."""


# Groups of forbidden names, by topic. A dotted path names a module attribute or a class
# attribute (a method: patching `Adam.step` also covers AdamW, which inherits it).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "sdpa": (
        "torch.nn.functional.scaled_dot_product_attention",
        "torch._C._nn.scaled_dot_product_attention",
        "torch.nn.functional.multi_head_attention_forward",
        "torch.nn.MultiheadAttention.forward",
        "bertcourse.attention.scaled_dot_product_attention",
    ),
    "heads": (
        "bertcourse.attention.split_heads",
        "bertcourse.attention.merge_heads",
    ),
    "self_attention": (
        "bertcourse.attention.BertSelfAttention.forward",
        "bertcourse.attention.BertAttention.forward",
        "torch.nn.functional.scaled_dot_product_attention",
        "torch._C._nn.scaled_dot_product_attention",
        "torch.nn.functional.multi_head_attention_forward",
        "torch.nn.MultiheadAttention.forward",
    ),
    "embeddings": ("bertcourse.embeddings.BertEmbeddings.forward",),
    "layer": (
        "bertcourse.encoder.BertLayer.forward",
        "bertcourse.encoder.BertIntermediate.forward",
        "bertcourse.encoder.BertOutput.forward",
        "bertcourse.attention.BertAttention.forward",
        "bertcourse.attention.BertSelfOutput.forward",
        "torch.nn.TransformerEncoderLayer.forward",
    ),
    "modules": tuple(
        f"bertcourse.{module}.{name}.__init__"
        for module, names in (
            ("model", ("BertModel", "BertForPreTraining")),
            ("embeddings", ("BertEmbeddings",)),
            ("encoder", ("BertEncoder", "BertLayer", "BertIntermediate", "BertOutput")),
            ("attention", ("BertAttention", "BertSelfAttention", "BertSelfOutput")),
            ("heads", ("BertPooler", "BertPreTrainingHeads", "BertLMPredictionHead")),
        )
        for name in names
    ),
    "masks": (
        "bertcourse.masks.padding_mask",
        "bertcourse.masks.extended_attention_mask",
        "bertcourse.masks.to_sdpa_bool_mask",
        "bertcourse.masks.key_padding_mask",
        "bertcourse.masks.query_key_mask",
    ),
    "mlm": (
        "bertcourse.mlm.mask_tokens",
        "bertcourse.mlm.create_masked_lm_predictions",
        "bertcourse.mlm.num_predictions",
        "bertcourse.mlm.special_tokens_mask",
        "transformers.DataCollatorForLanguageModeling.torch_mask_tokens",
    ),
    "nsp": (
        "bertcourse.nsp.make_pair",
        "bertcourse.nsp.truncate_seq_pair",
        "bertcourse.nsp.create_instances_from_document",
        "bertcourse.nsp.create_instances",
    ),
    "log_softmax": (
        "torch.log_softmax",
        "torch.nn.functional.log_softmax",
        "torch.special.log_softmax",
        "torch.Tensor.log_softmax",
        "torch.logsumexp",
        "torch.special.logsumexp",
        "torch.Tensor.logsumexp",
    ),
    "cross_entropy": (
        "torch.nn.functional.cross_entropy",
        "torch.nn.functional.nll_loss",
        "torch.nn.CrossEntropyLoss.forward",
        "torch.nn.NLLLoss.forward",
        "torch._C._nn.cross_entropy_loss",
        "torch._C._nn.nll_loss",
        "torch._C._nn.nll_loss_nd",
        "bertcourse.losses.cross_entropy",
        "bertcourse.losses.mlm_loss",
        "bertcourse.losses.nsp_loss",
        "bertcourse.losses.original_mlm_loss",
    ),
    "autograd": (
        "torch.autograd.grad",
        "torch.autograd.backward",
        "torch.Tensor.backward",
        "torch.func.grad",
        "torch.func.vjp",
        "torch.func.jacrev",
        "bertcourse.losses.cross_entropy_grad",
    ),
    "gather": ("bertcourse.losses.gather_labelled",),
    "optim": (
        "torch.optim.Adam.step",
        "torch.optim.adam.adam",
        "torch.optim._functional.adam",
        "torch.optim.adamw.adamw",
        "torch.optim._functional.adamw",
        "bertcourse.optim.Adam.step",
        "bertcourse.optim.AdamW.step",
    ),
    "schedules": (
        "bertcourse.optim.warmup_linear_decay",
        "bertcourse.optim.polynomial_decay_with_warmup",
        "transformers.get_linear_schedule_with_warmup",
        "transformers.optimization.get_linear_schedule_with_warmup",
        "transformers.optimization._get_linear_schedule_with_warmup_lr_lambda",
    ),
}


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


# --- forbidden references -----------------------------------------------------------------


def _resolve(dotted: str, import_missing: bool = False) -> tuple[Any, str, Any] | None:
    """(owner, attribute, value) for "pkg.module.attr" or "pkg.module.Class.attr".

    Returns None when the package is not imported (it cannot have been called yet) unless
    `import_missing`. bertcourse modules are always imported.
    """
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:i])
        module = sys.modules.get(module_name)
        if module is None and (import_missing or module_name.startswith("bertcourse")):
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                module = None
        if module is not None:
            break
    else:
        return None
    owner: Any = module
    for name in parts[i:-1]:
        try:
            owner = getattr(owner, name)
        except AttributeError:
            raise LookupError(
                f"grading setup: {dotted!r} does not exist ({name!r} missing)"
            ) from None
    try:
        value = getattr(owner, parts[-1])
    except AttributeError:
        raise LookupError(f"grading setup: {dotted!r} does not exist") from None
    return owner, parts[-1], value


def _expand(names: str | Iterable[str]) -> list[str]:
    if isinstance(names, str):
        names = (names,)
    out: list[str] = []
    for name in names:
        out.extend(FORBIDDEN.get(name, (name,)))
    return list(dict.fromkeys(out))


def _reference_callable(reference: Callable[..., Any] | str) -> Callable[..., Any]:
    if isinstance(reference, str):
        resolved = _resolve(reference, import_missing=True)
        if resolved is None:
            raise LookupError(f"grading setup: cannot find the reference {reference!r}")
        return resolved[2]
    return reference


def _unwrap(fn: Any) -> Any:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__func__", fn)


def _make_stub(name: str, fn_name: str, calls: list[str]) -> Callable[..., Any]:
    def forbidden_stub(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        raise ForbiddenCallError(
            f"{fn_name} called {name}, which this part asks you to write yourself. It is "
            "disabled while your answer is checked: an answer that calls it earns no points. "
            "Write the computation with basic tensor operations instead."
        )

    forbidden_stub.__name__ = name.rsplit(".", 1)[-1]
    return forbidden_stub


@contextlib.contextmanager
def forbidden(
    names: str | Iterable[str],
    fn: Callable[..., Any] | None = None,
    use_reference: Mapping[str, Callable[..., Any] | str] | None = None,
) -> Iterator[list[str]]:
    """Within the block, the named functions raise `ForbiddenCallError` when called.

    Args:
        names: dotted paths or keys of `FORBIDDEN`.
        fn: the learner's function; aliases of forbidden functions in its module globals,
            default arguments and closure are replaced as well, and `use_reference` applies
            to its globals.
        use_reference: global name -> reference (callable or dotted path) to install in
            `fn`'s globals for the duration of the block.
    Yields:
        The list of forbidden names that were called (appended to as they are called).
    """
    calls: list[str] = []
    fn_name = _fn_name(fn) if fn is not None else "your code"
    # resolve the references first: once the stubs are in place, a dotted path would find a stub
    references = {k: _reference_callable(v) for k, v in (use_reference or {}).items()}
    restore: list[Callable[[], None]] = []
    stubs: dict[int, Callable[..., Any]] = {}
    try:
        for name in _expand(names):
            resolved = _resolve(name)
            if resolved is None:
                continue
            owner, attr, original = resolved
            stub = stubs.setdefault(id(original), _make_stub(name, fn_name, calls))
            had_own = not isinstance(owner, type) or attr in vars(owner)
            setattr(owner, attr, stub)
            if had_own:
                restore.append(functools.partial(setattr, owner, attr, original))
            else:  # an inherited method: remove the override again
                restore.append(functools.partial(delattr, owner, attr))
        target = _unwrap(fn) if fn is not None else None
        namespace = getattr(target, "__globals__", None)
        if namespace is not None:
            originals = {k: v for k, v in namespace.items() if id(v) in stubs}
            for key, value in originals.items():
                namespace[key] = stubs[id(value)]
                restore.append(functools.partial(namespace.__setitem__, key, value))
            for key, reference in references.items():
                had = key in namespace
                old = namespace.get(key)
                namespace[key] = reference
                if had:
                    restore.append(functools.partial(namespace.__setitem__, key, old))
                else:
                    restore.append(functools.partial(namespace.pop, key, None))
        if target is not None and getattr(target, "__defaults__", None):
            defaults = target.__defaults__
            if any(id(d) in stubs for d in defaults):
                target.__defaults__ = tuple(stubs.get(id(d), d) for d in defaults)
                restore.append(functools.partial(setattr, target, "__defaults__", defaults))
        for cell in getattr(target, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if id(value) in stubs:
                cell.cell_contents = stubs[id(value)]
                restore.append(functools.partial(setattr, cell, "cell_contents", value))
        yield calls
    finally:
        for undo in reversed(restore):
            undo()


def run(
    fn: Callable[..., Any],
    *args: Any,
    forbid: str | Iterable[str] = (),
    use_reference: Mapping[str, Callable[..., Any] | str] | None = None,
    **kwargs: Any,
) -> Any:
    """Call the learner's `fn(*args, **kwargs)` with `forbid` disabled and warnings silenced.

    Raises `GradingError` if `fn` is itself a forbidden function or called one (even if it
    caught the `ForbiddenCallError`). Exceptions raised by `fn` propagate unchanged, so the
    learner sees their own traceback.
    """
    __tracebackhide__ = True
    names = _expand(forbid)
    if not callable(fn):
        raise GradingError(f"expected a function to check, got {describe(fn)}")
    for name in names:
        resolved = _resolve(name)
        if resolved is not None and _unwrap(fn) is _unwrap(resolved[2]):
            raise GradingError(
                f"{_fn_name(fn)} is {name} itself: this part asks you to write it yourself."
            )
    with forbidden(names, fn, use_reference) as calls, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = fn(*args, **kwargs)
        except ForbiddenCallError as error:
            raise GradingError(str(error)) from None
    if calls:
        raise GradingError(
            f"{_fn_name(fn)} called {calls[0]}, which this part asks you to write yourself; "
            "an answer that calls it earns no points (the call was caught even though your "
            "code handled the error)."
        )
    return result


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
        _fail(f"{call} returned a wrong result:", lines, hint)
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
    return reference_step


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
    **hyper: Any,
) -> None:
    """Run the learner's functional step over `grads` beside a torch-style optimizer.

    The learner's `step_fn(param, grad, m, v, t, **hyper)` returns the new `(param, m, v)`,
    starting from m = v = 0 and t = 1. The reference is `optimizer_class([param], **hyper)`
    stepped with the same gradients; after every step the parameter and both moments must
    agree. The message names the first step where they do not.
    """
    __tracebackhide__ = True
    grads = [g.detach().clone() for g in grads]
    ref_p = nn.Parameter(param.detach().clone())
    optimizer = optimizer_class([ref_p], **hyper)
    p, m, v = param.detach().clone(), torch.zeros_like(param), torch.zeros_like(param)
    for t, g in enumerate(grads, start=1):
        ref_p.grad = g.clone()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optimizer.step()
        expected = (ref_p.detach().clone(), *_moments(optimizer, ref_p))
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
            _fail(
                f"step t={t} of {len(grads)} differs from {optimizer_class.__module__}."
                f"{optimizer_class.__name__}{_hyper_text(hyper)}:\n  {call}",
                lines,
                hint,
            )
        p, m, v = got
    print(
        f"OK {_fn_name(step_fn)}: {len(grads)} steps agree with {optimizer_class.__name__}{_hyper_text(hyper)}"
    )


def _hyper_text(hyper: Mapping[str, Any]) -> str:
    return "(" + ", ".join(f"{k}={v!r}" for k, v in hyper.items()) + ")"


# --- inputs ---------------------------------------------------------------------------------


def randn(
    *shape: int, seed: int = 0, dtype: torch.dtype = torch.float32, scale: float = 1.0
) -> Tensor:
    """Standard normal values from their own generator (the global RNG is left alone)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def randint(low: int, high: int, *shape: int, seed: int = 0) -> Tensor:
    """Uniform int64 values in [low, high) from their own generator."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=g)
