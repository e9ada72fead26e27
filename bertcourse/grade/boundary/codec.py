"""Plain data across the grader's trust boundary: JSON plus one safetensors blob.

The referee (outside the jail) and the student's kernel exchange only what this module writes:
a JSON document whose leaves are numbers, strings, booleans and null, and whose tensors live in
one safetensors buffer (base64 in the JSON). Reading it executes nothing: `json.loads`,
`base64.b64decode` and `safetensors.torch.load` parse data, and every node is checked against a
short list of tags before anything is built from it. There is no pickle anywhere.

Tags (a JSON object with one `$tag` key; any other object is an error):

    {"$tuple": [...]}                 a tuple (JSON arrays are lists)
    {"$dict": [[key, value], ...]}    a dict (keys: str, int, float, bool, None or tuples of those)
    {"$float": "nan" | "inf" | "-inf"} a float JSON cannot write
    {"$tensor": name, "requires_grad": bool}
    {"$dtype": "float16"}
    {"$set": [...]}                   a set (of hashable values)
    {"$generator": name}              a torch.Generator, by its state tensor
    {"$random": [version, [ints], gauss]}   a random.Random, by its state
    {"$config": {...}}                a bertcourse BertConfig (referee -> kernel only)
    {"$module": class, "config": {...}, "state": {...}, "grads": {...}, "training": bool}
                                      a bertcourse nn.Module (referee -> kernel only)
    {"$module_state": {...}, "grads": {...}, "training": {submodule: bool}}
                                      a module after a call (kernel -> referee)
    {"$optimizer": class, "param_refs": [[module index, name], ...], "state_dict": ...}
                                      an optimizer over parameters of module arguments
    {"$functional_step": class}       `grading.functional_step(class)` (for use_reference)

Modules and optimizers are built only from classes in `ALLOWED_CLASSES`, and only by the kernel
side: the referee never builds an object from what a kernel sent, it copies numbers into the
objects it already holds (`remote.mirror`).
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
import json
import math
import random
import socket
import struct
import sys
import time
from typing import Any

import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors
from torch import Tensor, nn

from bertcourse.grading.values import plain_items

DTYPES = {
    str(dtype).removeprefix("torch."): dtype
    for dtype in (
        torch.bool,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
    )
}
SAFETENSORS_DTYPES = {
    torch.bool: "BOOL",
    torch.uint8: "U8",
    torch.int8: "I8",
    torch.int16: "I16",
    torch.int32: "I32",
    torch.int64: "I64",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.float32: "F32",
    torch.float64: "F64",
}
_JSON_SCALARS = frozenset({str, int, bool, type(None)})  # exact types JSON writes as they are
# Classes the kernel side may build from a message (module prefixes; the referee builds none).
ALLOWED_CLASSES = ("bertcourse.", "torch.optim.")


class CodecError(ValueError):
    """A value that cannot cross the boundary, or a message that is not valid data."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """What a message may hold; a message over a limit is refused before it is decoded."""

    max_bytes: int = 64 << 20
    max_depth: int = 48
    max_nodes: int = 200_000
    max_tensor_elements: int = 16 << 20
    # a BERT of the course with its gradients and Adam's two moments is about 800 tensors;
    # building each costs microseconds, so 250,000 one-byte tensors cost seconds
    max_tensors: int = 10_000


@dataclasses.dataclass
class ModuleState:
    """A module's parameters and buffers (and gradients) after a call, as the kernel sent them."""

    state: dict[str, Tensor]
    grads: dict[str, Tensor]
    training: dict[str, bool] = dataclasses.field(default_factory=dict)  # submodule -> mode


@dataclasses.dataclass
class ConfigData:
    """A BertConfig's fields as the kernel sent them (the referee builds no config from it)."""

    fields: Any


@dataclasses.dataclass
class OptimizerState:
    """An optimizer's `state_dict()` after a call, as the kernel sent it."""

    state_dict: dict[str, Any]


# --- encoding -------------------------------------------------------------------------------


class _Encoder:
    def __init__(self, side: str) -> None:
        self.side = side  # "referee": modules go out whole; "kernel": only their state
        self.tensors: dict[str, tuple[torch.dtype, list[int], bytes]] = {}
        self.modules: list[nn.Module] = []

    def tensor(self, t: Tensor) -> str:
        if t.is_sparse or t.is_complex() or t.device.type == "meta":
            raise CodecError(f"a {t.layout} {t.dtype} tensor on {t.device} cannot be sent")
        if str(t.dtype).removeprefix("torch.") not in DTYPES:
            raise CodecError(f"tensors of dtype {t.dtype} cannot be sent")
        name = f"t{len(self.tensors)}"
        plain = torch.Tensor._make_subclass(torch.Tensor, t.detach().cpu(), False)
        data = plain.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()  # a copy now
        self.tensors[name] = (plain.dtype, list(plain.shape), data)
        return name

    def value(self, x: Any, depth: int = 0) -> Any:
        if depth > 40:
            raise CodecError("the value is nested too deeply")
        kind = type(x)  # the exact types of token lists and pairs first: thousands per call
        if kind in _JSON_SCALARS:
            return x
        if kind is float:
            return x if math.isfinite(x) else {"$float": repr(x)}
        if kind is list or kind is tuple:
            items = x if plain_items(x) else [self.value(v, depth + 1) for v in x]
            return items if kind is list else {"$tuple": items}
        return self.other(x, depth)

    def other(self, x: Any, depth: int) -> Any:
        """Any value but an exact list, tuple, str, int, bool or None."""
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int):
            return int(x)
        if isinstance(x, float):
            x = float(x)
            return x if math.isfinite(x) else {"$float": repr(x)}
        if isinstance(x, Tensor):
            return {"$tensor": self.tensor(x), "requires_grad": bool(x.requires_grad)}
        if isinstance(x, torch.dtype):
            return {"$dtype": str(x).removeprefix("torch.")}
        if isinstance(x, (set, frozenset)):
            return {"$set": [self.value(v, depth + 1) for v in sorted(x, key=repr)]}
        if isinstance(x, torch.Generator):
            return {"$generator": self.tensor(x.get_state())}
        if isinstance(x, random.Random):
            version, internal, gauss = x.getstate()
            return {"$random": [version, list(internal), gauss]}
        if isinstance(x, nn.Module):
            return self.module(x)
        if isinstance(x, torch.optim.Optimizer):
            return self.optimizer(x)
        if getattr(x, "_functional_step_of", None) is not None:
            return {"$functional_step": _class_path(x._functional_step_of)}
        if _is_config(x):
            return {"$config": self.value(dataclasses.asdict(x), depth + 1)}
        if isinstance(x, (tuple, list)):  # subclasses (a named tuple) as their base
            items = list(x) if plain_items(x) else [self.value(v, depth + 1) for v in x]
            return {"$tuple": items} if isinstance(x, tuple) else items
        if isinstance(x, dict):
            return {
                "$dict": [
                    [self.value(k, depth + 1), self.value(v, depth + 1)] for k, v in x.items()
                ]
            }
        try:  # numpy scalars and 0-d arrays, Python-number-like objects
            import numpy as np

            if isinstance(x, np.generic):
                return self.value(x.item(), depth + 1)
        except ImportError:  # pragma: no cover
            pass
        raise CodecError(
            f"a {type(x).__module__}.{type(x).__qualname__} cannot be sent: use tensors, numbers, "
            "strings, None, or lists / tuples / dicts of them"
        )

    def module(self, m: nn.Module) -> dict[str, Any]:
        state = {k: self.value(v) for k, v in m.state_dict(keep_vars=False).items()}
        grads = {k: self.value(p.grad) for k, p in m.named_parameters() if p.grad is not None}
        if self.side == "kernel":
            training = {name: sub.training for name, sub in m.named_modules()}
            return {"$module_state": state, "grads": grads, "training": training}
        config = getattr(m, "config", None)
        if not _is_config(config):
            raise CodecError(
                f"grading setup: a {type(m).__name__} without a BertConfig `.config` cannot be sent"
            )
        self.modules.append(m)
        return {
            "$module": _class_path(type(m)),
            "index": len(self.modules) - 1,
            "config": self.value(dataclasses.asdict(config)),
            "init": self.value(m.init_kwargs() if hasattr(m, "init_kwargs") else {}),
            "state": state,
            "grads": grads,
            "training": m.training,
            # parameters that take no gradient (frozen): the kernel's copy is frozen the same way
            "frozen": [k for k, p in m.named_parameters() if not p.requires_grad],
        }

    def optimizer(self, opt: torch.optim.Optimizer) -> dict[str, Any]:
        state_dict = self.value(opt.state_dict())
        if self.side == "kernel":
            return {"$optimizer_state": state_dict}
        owners = {
            id(p): [i, name] for i, m in enumerate(self.modules) for name, p in m.named_parameters()
        }
        refs = []
        for group in opt.param_groups:
            for p in group["params"]:
                if id(p) not in owners:
                    raise CodecError(
                        "grading setup: an optimizer can be sent only after the module that owns "
                        "its parameters (pass the model before the optimizer)"
                    )
                refs.append(owners[id(p)])
        return {"$optimizer": _class_path(type(opt)), "param_refs": refs, "state_dict": state_dict}


def _is_config(x: Any) -> bool:
    return (
        dataclasses.is_dataclass(x) and type(x).__name__ == "BertConfig" and not isinstance(x, type)
    )


def _class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _safetensors(tensors: dict[str, tuple[torch.dtype, list[int], bytes]]) -> bytes:
    """The tensors in the safetensors format (an 8-byte little-endian header length, the JSON
    header, the data), written here because `safetensors.torch.save` costs about 60 us a
    tensor in Python checks (7x this for a call's few small tensors). Reading stays with
    `safetensors.torch.load`, the library's own parser (tests/test_referee.py checks every
    dtype both ways)."""
    if sys.byteorder != "little":  # the format is little-endian: the library swaps the bytes
        return save_safetensors(
            {
                name: torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)
                for name, (dtype, shape, data) in tensors.items()
            }
        )
    header: dict[str, Any] = {}
    chunks: list[bytes] = []
    offset = 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {
            "dtype": SAFETENSORS_DTYPES[dtype],
            "shape": shape,
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as the library writes it
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def encode(value: Any, side: str = "referee") -> str:
    """`value` as a JSON text (tensors in an embedded safetensors buffer)."""
    encoder = _Encoder(side)
    tree = encoder.value(value)
    blob = _safetensors(encoder.tensors) if encoder.tensors else b""
    return json.dumps(
        {"v": 1, "value": tree, "tensors": base64.b64encode(blob).decode("ascii")},
        allow_nan=False,
        separators=(",", ":"),
    )


# --- decoding -------------------------------------------------------------------------------


def _load_class(path: str) -> type:
    if not isinstance(path, str) or not path.startswith(ALLOWED_CLASSES):
        raise CodecError(f"class {path!r} is not allowed across the boundary")
    module_name, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module_name), name, None)
    if not isinstance(cls, type):
        raise CodecError(f"{path!r} is not a class")
    return cls


_CLOCK_EVERY = 4096  # nodes between two looks at the clock while decoding


class _Decoder:
    def __init__(
        self, tensors: dict[str, Tensor], side: str, limits: Limits, until: float | None = None
    ) -> None:
        self.tensors = tensors
        self.side = side  # "referee": build no object; "kernel": build modules and optimizers
        self.limits = limits
        self.until = until
        self.nodes = 0
        self._next_look = _CLOCK_EVERY
        self.modules: list[nn.Module] = []

    def tensor(self, name: Any) -> Tensor:
        if not isinstance(name, str) or name not in self.tensors:
            raise CodecError(f"unknown tensor {name!r}")
        return self.tensors[name]

    def _count(self, nodes: int, depth: int) -> None:
        self.nodes += nodes
        if self.nodes > self.limits.max_nodes or depth > self.limits.max_depth:
            raise CodecError("the message is too large or nested too deeply")
        if self.nodes >= self._next_look:
            self._next_look = self.nodes + _CLOCK_EVERY
            _check_clock(self.until)

    def value(self, node: Any, depth: int = 0) -> Any:
        self._count(1, depth)
        kind = type(node)  # exact: json.loads makes nothing else
        if kind in _JSON_SCALARS or kind is float:
            return node
        if kind is list:
            return self.items(node, depth)
        if kind is not dict or len(node) < 1:
            raise CodecError(f"unexpected node {kind.__name__}")
        tag = next(iter(node))
        body = node[tag]
        if tag == "$tuple" and type(body) is list:
            return tuple(self.items(body, depth))
        if tag == "$dict" and isinstance(body, list):
            out = {}
            for item in body:
                if not (isinstance(item, list) and len(item) == 2):
                    raise CodecError("a dict item is not a [key, value] pair")
                key = self.value(item[0], depth + 1)
                try:
                    hash(key)
                except TypeError:
                    raise CodecError("a dict key is not hashable") from None
                out[key] = self.value(item[1], depth + 1)
            return out
        if tag == "$set" and isinstance(body, list):
            items = [self.value(v, depth + 1) for v in body]
            try:
                return set(items)
            except TypeError:
                raise CodecError("a set item is not hashable") from None
        if tag == "$float" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "$tensor":
            t = self.tensor(body)
            if node.get("requires_grad") is True and t.is_floating_point():
                t = t.clone().requires_grad_(True)
            return t
        if tag == "$dtype" and body in DTYPES:
            return DTYPES[body]
        if tag == "$generator":
            g = torch.Generator()
            g.set_state(self.tensor(body))
            return g
        if tag == "$random" and isinstance(body, list) and len(body) == 3:
            r = random.Random()
            version, internal, gauss = body
            try:
                r.setstate((version, tuple(internal), gauss))
            except (TypeError, ValueError) as error:
                raise CodecError(f"invalid random.Random state: {error}") from None
            return r
        if tag == "$module_state":
            modes = node.get("training", {})
            training = (
                {str(k): v for k, v in modes.items() if isinstance(v, bool)}
                if isinstance(modes, dict)
                else {}
            )
            return ModuleState(
                self._tensor_dict(body, depth),
                self._tensor_dict(node.get("grads", {}), depth),
                training,
            )
        if tag == "$optimizer_state":
            return OptimizerState(self.value(body, depth + 1))
        if tag == "$config" and self.side == "referee":  # a config after a call: data only
            return ConfigData(self.value(body, depth + 1))
        if self.side == "kernel":
            return self.build(tag, body, node, depth)
        raise CodecError(f"unexpected tag {tag!r}")

    def items(self, body: list[Any], depth: int) -> list[Any]:
        """The items of a JSON array (fresh from `json.loads`: nothing else refers to it)."""
        if plain_items(body):
            self._count(len(body), depth + 1)
            return body
        return [self.value(v, depth + 1) for v in body]

    def _tensor_dict(self, body: Any, depth: int) -> dict[str, Tensor]:
        if not isinstance(body, dict):
            raise CodecError("a module state is not a mapping")
        out = {}
        for key, value in body.items():
            t = self.value(value, depth + 1)
            if not isinstance(t, Tensor):
                raise CodecError(f"module state {key!r} is not a tensor")
            out[str(key)] = t.detach()
        return out

    def build(self, tag: str, body: Any, node: dict[str, Any], depth: int) -> Any:
        """Kernel side only: configs, modules, optimizers and functional steps."""
        from bertcourse.config import BertConfig

        if tag == "$config":
            return BertConfig(**self.value(body, depth + 1))
        if tag == "$module":
            cls = _load_class(body)
            init = self.value(node.get("init", {"$dict": []}), depth + 1)
            if not isinstance(init, dict) or not all(
                isinstance(k, str) and (v is None or isinstance(v, (bool, int, float, str)))
                for k, v in init.items()
            ):
                raise CodecError(
                    "a module's constructor arguments must be plain numbers or strings"
                )
            module = cls(BertConfig(**self.value(node["config"], depth + 1)), **init)
            state = self._tensor_dict(node["state"], depth)
            dtypes = {t.dtype for t in state.values() if t.is_floating_point()}
            if len(dtypes) == 1:  # a float64 (or half) module stays one: load_state_dict would cast
                module.to(dtypes.pop())
            module.load_state_dict(state)
            params = dict(module.named_parameters())
            for name, grad in self._tensor_dict(node.get("grads", {}), depth).items():
                params[name].grad = grad.clone()
            frozen = node.get("frozen", [])
            if not isinstance(frozen, list) or not set(frozen) <= set(params):
                raise CodecError("a module's frozen parameters are not names of its parameters")
            for name in frozen:
                params[name].requires_grad_(False)
            module.train(bool(node.get("training", False)))
            self.modules.append(module)
            return module
        if tag == "$optimizer":
            cls = _load_class(body)
            state_dict = self.value(node["state_dict"], depth + 1)
            named = [dict(m.named_parameters()) for m in self.modules]
            params = [named[i][name] for i, name in node["param_refs"]]
            groups, start = [], 0
            for group in state_dict["param_groups"]:
                n = len(group["params"])
                hyper = {k: v for k, v in group.items() if k != "params"}
                groups.append({"params": params[start : start + n], **hyper})
                start += n
            optimizer = cls(groups)
            optimizer.load_state_dict(state_dict)
            return optimizer
        if tag == "$functional_step":
            from bertcourse.grading.optim import functional_step

            return functional_step(_load_class(body))
        raise CodecError(f"unexpected tag {tag!r}")


def _check_clock(until: float | None) -> None:
    if until is not None and time.monotonic() > until:
        raise TimeoutError("the reply could not be read before the call's time limit")


_HEADER_BYTES_PER_TENSOR = 256  # a header entry: name, dtype, shape, offsets (about 60 bytes)


def _check_header(blob: bytes, limits: Limits) -> None:
    """Refuse a safetensors buffer over the count or size limits from its header alone,
    before a single tensor is built."""
    if len(blob) < 8:
        raise CodecError("the tensors are not a valid safetensors buffer: no header")
    (size,) = struct.unpack("<Q", blob[:8])
    if size > len(blob) - 8:
        raise CodecError("the tensors are not a valid safetensors buffer: bad header")
    if size > limits.max_tensors * _HEADER_BYTES_PER_TENSOR:  # too many to parse, even
        raise CodecError(f"the message holds more than {limits.max_tensors} tensors")
    try:
        header = json.loads(blob[8 : 8 + size])
    except (ValueError, RecursionError):
        header = None
    if not isinstance(header, dict):
        raise CodecError("the tensors are not a valid safetensors buffer: bad header")
    entries = {k: v for k, v in header.items() if k != "__metadata__"}
    if len(entries) > limits.max_tensors:
        raise CodecError(f"the message holds {len(entries)} tensors (limit {limits.max_tensors})")
    for name, entry in entries.items():
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
            raise CodecError(f"the tensors are not a valid safetensors buffer: tensor {name!r}")
        if math.prod(shape) > limits.max_tensor_elements:
            raise CodecError(
                f"tensor {name} has {math.prod(shape)} elements "
                f"(limit {limits.max_tensor_elements})"
            )


def decode(
    text: str | bytes | bytearray,
    side: str = "referee",
    limits: Limits = Limits(),
    until: float | None = None,
) -> Any:
    """The value of a message written by `encode`; `CodecError` for anything else, and
    `TimeoutError` once the clock passes `until` (a `time.monotonic()` time) while decoding:
    the number of items and of tensors is limited, not only the bytes."""
    if len(text) > limits.max_bytes:
        raise CodecError(f"the message is larger than {limits.max_bytes >> 20} MiB")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise CodecError(f"the message is not valid JSON: {str(error)[:200]}") from None
    _check_clock(until)
    if not isinstance(doc, dict) or doc.get("v") != 1 or not isinstance(doc.get("tensors"), str):
        raise CodecError("the message is not a bertcourse grading message")
    try:
        blob = base64.b64decode(doc["tensors"], validate=True)
    except ValueError as error:
        raise CodecError(
            f"the tensors are not a valid safetensors buffer (base64): {str(error)[:200]}"
        ) from None
    if blob:
        _check_header(blob, limits)
    try:
        tensors = load_safetensors(blob) if blob else {}
    except Exception as error:  # safetensors raises its own error types on bad headers
        raise CodecError(
            f"the tensors are not a valid safetensors buffer: {str(error)[:200]}"
        ) from None
    _check_clock(until)
    try:
        return _Decoder(tensors, side, limits, until).value(doc.get("value"))
    except RecursionError:
        raise CodecError("the message is nested too deeply") from None


# --- frames on the calls' socket --------------------------------------------------------------

_FRAME_HEADER = struct.Struct("<Q")  # the length of the message that follows


def write_frame(sock: socket.socket, data: bytes, until: float | None = None) -> None:
    """Send one message (`data`, encoded text) as a frame: its length, then its bytes.
    Raises `TimeoutError` at `until` (a `time.monotonic()` time; None: wait)."""
    sock.settimeout(None if until is None else max(0.001, until - time.monotonic()))
    sock.sendall(_FRAME_HEADER.pack(len(data)))
    sock.sendall(data)


def read_frame(sock: socket.socket, max_bytes: int, until: float | None = None) -> bytearray | None:
    """The next frame's message; None when the other side closed the socket (before or
    within a frame). Raises `CodecError` for a frame over `max_bytes` (nothing of it is read)
    and `TimeoutError` at `until` (a `time.monotonic()` time; None: wait)."""
    header = _read_exact(sock, _FRAME_HEADER.size, until)
    if header is None:
        return None
    (size,) = _FRAME_HEADER.unpack(header)
    if size > max_bytes:
        raise CodecError(f"the message is larger than {max_bytes >> 20} MiB")
    return _read_exact(sock, size, until)


def _read_exact(sock: socket.socket, size: int, until: float | None) -> bytearray | None:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        remaining = None if until is None else until - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise TimeoutError("no complete message before the time limit")
        sock.settimeout(remaining)
        count = sock.recv_into(view[got:])  # raises TimeoutError (socket.timeout) at `until`
        if count == 0:
            return None
        got += count
    return buffer
