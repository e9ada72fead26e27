"""Forbidden references: the functions a part asks the learner to write, disabled while it runs.

In the learner's own kernel (visible checks, plain nbgrader) this is the rule itself. Under the
referee (`python -m bertcourse.grade`) the rule is decided outside the kernel by static analysis
(`bertcourse.grading.rules`); the stubs still run in the kernel as a second signal.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from bertcourse.grading.dynamic import unwrap as _unwrap
from bertcourse.grading.values import ForbiddenCallError, GradingError, _fn_name, describe

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
        "bertcourse.losses.log_softmax",
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

_SDPA_OPS = (
    "aten::_safe_softmax",  # the math path of scaled_dot_product_attention (and nothing else)
    "aten::_scaled_dot_product_attention_math",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention",
)
_NLL_OPS = ("aten::nll_loss_forward", "aten::nll_loss2d_forward")
# forbidden name -> the ATen operators that only it (or its library kin) runs: recorded in the
# kernel while a graded call runs (`remote.serve`); one of them fails the call, whatever name
# reached it (torch.ops.aten, torch._C, a private helper). A second signal: it can only lower a
# score. Ops that honest code runs too (mul, exp, sum, a backward's) are not listed.
FORBIDDEN_OPS: dict[str, tuple[str, ...]] = {
    "torch.nn.functional.scaled_dot_product_attention": _SDPA_OPS,
    "torch.nn.functional.multi_head_attention_forward": _SDPA_OPS,
    "torch.log_softmax": ("aten::_log_softmax", "aten::special_log_softmax"),
    "torch.logsumexp": ("aten::logsumexp",),
    "torch.nn.functional.cross_entropy": _NLL_OPS,
    "torch.nn.functional.nll_loss": _NLL_OPS,
    "torch.optim.Adam.step": ("aten::_fused_adam_", "aten::_fused_adamw_"),
}


def forbidden_ops(names: str | Iterable[str]) -> frozenset[str]:
    """The ATen operators whose run fails a call that forbids `names`."""
    return frozenset(op for name in _expand(names) for op in FORBIDDEN_OPS.get(name, ()))


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


def is_forbidden_object(fn: Any, names: str | Iterable[str]) -> str | None:
    """The forbidden name `fn` is (the same object, through partials and bound methods), or
    None."""
    for name in _expand(names):
        try:
            resolved = _resolve(name)
        except LookupError:
            continue
        if resolved is not None and _unwrap(fn) is _unwrap(resolved[2]):
            return name
    return None


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
    if getattr(type(fn), "remote", False):  # a remote.RemoteFunction: decided by the referee
        return fn.call(args, kwargs, forbid=_expand(forbid), use_reference=use_reference)
    names = _expand(forbid)
    if not callable(fn):
        raise GradingError(f"expected a function to check, got {describe(fn)}")
    itself = is_forbidden_object(fn, names)
    if itself:
        raise GradingError(
            f"{_fn_name(fn)} is {itself} itself: this part asks you to write it yourself."
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
