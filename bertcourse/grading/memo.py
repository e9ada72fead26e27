"""`once(fn, *args, **kwargs)`: a reference computation done once for equal inputs.

A test cell that computes its expected values with code of its own (chapter 6 trains a small
model in float64 to compare with the learner's training loop) repeats that work for every
student, with the same inputs: the hidden inputs depend on the course's key, not on the
student. `grading.once` keeps the result in the process (the referee's worker grades
hundreds of notebooks) and hands out deep copies, keyed by a fingerprint of everything the
result can depend on:

- the function's code, its defaults and its closure's values;
- for a function of the notebook (a test cell's), every global name its code (nested
  functions included) reads, which must be a module: a function that reads anything else
  from the notebook's namespace (a learner's function, a value fetched from the kernel) is
  called every time, never cached. A function or class of an installed bertcourse or torch
  module is that module's (`check_optimizer_steps` caches its reference optimizer run);
- the arguments' values: tensors by dtype, shape and bytes, bertcourse modules by class,
  config, state and training mode, generators by state, numbers, strings, containers,
  library classes by name;
- and, for a call that drew from the global random generators (torch's, Python's), their
  state: it is reused only from the same state, and a reuse leaves them as the call did.

Anything the fingerprint cannot describe means no caching: `once` then simply calls `fn`. In
the learner's own kernel it works the same (one notebook, so it rarely matters).
"""

from __future__ import annotations

import copy
import dataclasses
import dis
import hashlib
import marshal
import random
import sys
import types
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

MAX_ENTRIES = 256  # results kept per process, least recently used first out
MAX_ITEMS = 1000  # a longer list or dict among the inputs: no caching (cheaper to call)
LIBRARIES = ("bertcourse", "torch")  # their functions' globals are the installed modules'


@dataclasses.dataclass
class _Entry:
    result: Any
    # the global generators (torch's, Python's) after the call, if it drew from them: a hit
    # leaves them so
    rng_after: tuple[Tensor, Any] | None = None


_results: OrderedDict[str, _Entry] = OrderedDict()
_drawing: set[str] = set()  # keys of calls that drew: their generators' state is an input


class _Opaque(Exception):
    """A value the fingerprint cannot describe: no caching."""


_GLOBAL_OPS = {"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL", "STORE_NAME"}


def _code_globals(code: types.CodeType) -> set[str]:
    """The global names the code reads or writes (not attribute names), nested code included."""
    names = {i.argval for i in dis.get_instructions(code) if i.opname in _GLOBAL_OPS}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_globals(const)
    return names


def _feed(h: Any, x: Any, depth: int = 0) -> None:
    if depth > 20:
        raise _Opaque
    kind = type(x)
    if x is None or kind in (bool, int, float, str, bytes, complex):
        h.update(f"{kind.__name__}:{x!r};".encode())
    elif isinstance(x, Tensor):
        if type(x) not in (Tensor, nn.Parameter) or x.is_sparse or x.device.type == "meta":
            raise _Opaque
        plain = x.detach().cpu().contiguous()
        h.update(f"tensor:{plain.dtype}:{tuple(plain.shape)}:{x.requires_grad};".encode())
        h.update(plain.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(x, torch.dtype):
        h.update(f"dtype:{x};".encode())
    elif isinstance(x, type) and _library(x):  # torch.optim.Adam: the installed class
        h.update(f"class:{x.__module__}.{x.__qualname__};".encode())
    elif isinstance(x, torch.Generator):
        _feed(h, x.get_state(), depth + 1)
    elif isinstance(x, nn.Module):
        config = getattr(x, "config", None)
        if not x.__class__.__module__.startswith("bertcourse.") or not dataclasses.is_dataclass(
            config
        ):
            raise _Opaque  # a module's behaviour is its class, config, state and mode
        h.update(f"module:{x.__class__.__module__}.{x.__class__.__qualname__};".encode())
        _feed(h, dataclasses.asdict(config), depth + 1)
        _feed(h, [(n, m.training) for n, m in x.named_modules()], depth + 1)
        _feed(h, dict(x.state_dict(keep_vars=True)), depth + 1)
    elif kind in (list, tuple):
        if len(x) > MAX_ITEMS:  # a vocabulary: hashing it item by item costs more than a call
            raise _Opaque
        h.update(f"{kind.__name__}:{len(x)}[".encode())
        for item in x:
            _feed(h, item, depth + 1)
        h.update(b"]")
    elif kind in (dict, OrderedDict):
        if len(x) > MAX_ITEMS:
            raise _Opaque
        h.update(f"dict:{len(x)}{{".encode())
        for key, value in x.items():
            _feed(h, key, depth + 1)
            _feed(h, value, depth + 1)
        h.update(b"}")
    else:
        raise _Opaque


def _library(obj: Any) -> bool:
    """Defined in an installed module of bertcourse or torch (not a notebook's namespace)."""
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    return module is not None and module.__name__.split(".")[0] in LIBRARIES


def fingerprint(fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> str | None:
    """The cache key of `fn(*args, **kwargs)`, or None when it cannot be cached (see above)."""
    if not isinstance(fn, types.FunctionType):
        return None
    library = _library(fn) and sys.modules[fn.__module__].__dict__ is fn.__globals__
    names = _code_globals(fn.__code__)
    if not library and any(
        name in fn.__globals__ and not isinstance(fn.__globals__[name], types.ModuleType)
        for name in names
    ):
        return None  # it reads the namespace: the learner's functions may be there
    h = hashlib.sha256()
    h.update(marshal.dumps(fn.__code__))  # the same for the same cell source, in any namespace
    try:
        _feed(h, (fn.__defaults__, fn.__kwdefaults__), 0)
        _feed(h, [cell.cell_contents for cell in fn.__closure__ or ()], 0)
        _feed(h, (args, dict(sorted(kwargs.items()))), 0)
    except (_Opaque, ValueError):  # ValueError: an empty closure cell
        return None
    return h.hexdigest()


def _plain(x: Any, depth: int = 0) -> bool:
    """Data a deep copy reproduces exactly: tensors outside autograd, numbers, strings, None,
    and lists, tuples and dicts of them."""
    if depth > 20:
        return False
    if x is None or type(x) in (bool, int, float, str, bytes, complex, torch.dtype):
        return True
    if isinstance(x, Tensor):
        return type(x) is Tensor and not x.requires_grad
    if type(x) in (list, tuple):
        return all(_plain(v, depth + 1) for v in x)
    if type(x) is dict:
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in x.items())
    return False


def _rng_state() -> tuple[Tensor, Any]:
    return torch.random.get_rng_state(), random.getstate()


def _rng_digest(state: tuple[Tensor, Any]) -> str:
    return hashlib.sha256(state[0].numpy().tobytes() + repr(state[1]).encode()).hexdigest()


def once(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)`, computed once per process for equal inputs (a deep copy each
    time); called every time when the inputs or the function cannot be fingerprinted.

    A call that drew from the global random generators (torch's, Python's) is reused only
    from the same generator state, and leaves them as the call did. Only plain results are
    kept (tensors outside autograd, numbers, strings, containers of them); any other is
    computed every time, since a test may use its graph. `fn` must return everything the
    test needs: what it changes in its arguments happens on the first call only."""
    base = fingerprint(fn, args, kwargs)
    if base is None:
        return fn(*args, **kwargs)
    before = _rng_state()
    key = f"{base}:{_rng_digest(before)}" if base in _drawing else base
    entry = _results.get(key)
    if entry is None:
        result = fn(*args, **kwargs)
        if not _plain(result):  # an autograd graph, a module: the test may need it live
            return result
        after = _rng_state()
        if not torch.equal(before[0], after[0]) or before[1] != after[1]:
            _drawing.add(base)
            key = f"{base}:{_rng_digest(before)}"
            entry = _Entry(result, after)
        else:
            entry = _Entry(result)
        _results[key] = entry
        while len(_results) > MAX_ENTRIES:
            _results.popitem(last=False)
    elif entry.rng_after is not None:
        torch.random.set_rng_state(entry.rng_after[0])
        random.setstate(entry.rng_after[1])
    _results.move_to_end(key)
    return copy.deepcopy(entry.result)
