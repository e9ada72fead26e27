"""Both ends of one call across the grader's trust boundary.

Referee side (`python -m bertcourse.grade`, outside the jail): the learner's functions are
`RemoteFunction`s. Calling one

1. asks the static rules (`rules.StudentCode`) whether the code reachable from that function
   uses a forbidden reference or hides a call; if so the call fails without running;
2. encodes the arguments as plain data (`codec`) and sends them to the kernel;
3. decodes the reply (plain data, size-limited; nothing in it can run code), copies the
   arguments' state after the call into the referee's own arguments (`mirror`: the learner's
   in-place changes become visible, as in one process) and returns the result.

The reference, the expected values, the tolerances and the hidden inputs' seeds never leave the
referee; the kernel sees only the inputs of each call. A kernel that lies can only return
numbers, and only correct numbers pass the referee's comparison.

Kernel side: `serve(request)` runs in the learner's kernel (`serve_calls` reads the requests
from a Unix socket in the kernel's folder, within one execute request for all the calls of a
test): it decodes
the request, calls the learner's function from the notebook's namespace with the earlier parts
replaced by references (`use_reference`) and the forbidden references stubbed (a second
signal; the rule itself is static), and encodes the result. A call with a `probe`
(`bertcourse.grading.probe.measure`) also takes the referee's fixed
autograd measurement around the learner's function and sends it back as values.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import random
import traceback
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from bertcourse.grade.boundary import codec
from bertcourse.grading.forbid import (
    _reference_callable,
    forbidden,
    forbidden_ops,
    is_forbidden_object,
)
from bertcourse.grading.probe import Meter, Probe, measurement
from bertcourse.grading.values import GradingError, plain_items

MAX_TRACEBACK = 3000
GET = "__bertcourse_get__"
# the trace record of a call with forbidden operators: the canary operator reached the trace
# right before and right after the learner's function
TRACED = [True, True]
CANARY = "aten::empty"


# --- referee side ---------------------------------------------------------------------------


@dataclasses.dataclass
class Session:
    """The referee's link to one kernel: how to send a request, and the static rules."""

    send: Callable[[str], str | bytes]  # request -> reply (raises on timeout / dead kernel)
    code: Any  # rules.StudentCode of the submission
    limits: codec.Limits = dataclasses.field(default_factory=codec.Limits)
    calls: int = 0
    until: float | None = None  # the current call's time limit (`time.monotonic()`), if any
    # what a call showed that only a person can judge (the submission is `needs_review`)
    review: list[str] = dataclasses.field(default_factory=list)

    def unverifiable(self, finding: str) -> GradingError:
        """Record `finding` for review; the error that fails the part (0 points)."""
        self.review.append(finding)
        return GradingError(f"{finding}: the grader cannot vouch for this call (0 points; review)")


class KernelError(GradingError):
    """The learner's function raised in the kernel (the message carries its traceback)."""


class RemoteFunction:
    """Stands for the learner's function `name` in the referee's copy of a test cell."""

    remote = True  # `forbid.run` hands the call to `call` (the rule is decided by the referee)

    def __init__(self, name: str, session: Session) -> None:
        self.__name__ = name
        self.session = session

    def __repr__(self) -> str:
        return f"<your function {self.__name__}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # A direct call inside an expression (`check_value(f(x), g(x))`) must not let the
        # learner's in-place changes reach `x` before the expected value is computed from it:
        # only `grading.run`, whose callers check purity explicitly, copies the state back.
        return self.call(args, kwargs, mirror_arguments=False)

    def call(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        forbid: Iterable[str] = (),
        use_reference: Mapping[str, Any] | None = None,
        mirror_arguments: bool = True,
        probe: Probe | None = None,
    ) -> Any:
        """The learner's result; with `probe`, a `probe.Measurement` of the call taken in the
        kernel (its autograd facts as values: see `bertcourse.grading.probe`)."""
        __tracebackhide__ = True
        name = self.__name__
        forbid = list(forbid)
        findings = self.session.code.violations(
            name, list(forbid), args, kwargs, replaced=set(use_reference or {})
        )
        if findings:
            raise GradingError(
                f"{name} may not be graded automatically: "
                + "; ".join(f.describe() for f in findings[:5])
            )
        references = {}
        for key, ref in (use_reference or {}).items():
            if not (isinstance(ref, str) or getattr(ref, "_functional_step_of", None)):
                raise codec.CodecError(
                    f"grading setup: use_reference[{key!r}] must be a dotted path or "
                    "grading.functional_step(...) to be sent to the kernel"
                )
            references[key] = ref
        request = codec.encode(
            {
                "fn": name,
                "args": tuple(args),
                "kwargs": dict(kwargs),
                "use_reference": references,
                "forbid": list(forbid),
                **({"probe": probe.as_data()} if probe is not None else {}),
            }
        )
        self.session.calls += 1
        reply_text = self.session.send(request)
        try:
            reply = codec.decode(reply_text, "referee", self.session.limits, self.session.until)
        except codec.CodecError as error:
            raise GradingError(f"{name}: the kernel's reply was not valid data ({error})") from None
        if not isinstance(reply, dict) or reply.get("ok") not in (True, False):
            raise GradingError(f"{name}: the kernel's reply was not a result")
        traced = forbidden_ops(list(forbid))  # the kernel traces these operators
        if traced and reply["ok"] and not reply.get("forbidden") and reply.get("trace") != TRACED:
            raise self.session.unverifiable(
                f"{name}: the operator trace was off during the call (a disabled dispatch, or a "
                "reply without its trace record)"
            )
        if reply.get("forbidden"):
            raise GradingError(
                f"{name} called {reply['forbidden'][0]}, which this part asks you to write "
                "yourself; an answer that calls it earns no points."
            )
        if not reply["ok"]:
            error = reply.get("error") if isinstance(reply.get("error"), dict) else {}
            kind = str(error.get("type", "Error"))[:100]
            message = str(error.get("message", ""))[:1000]
            tb = str(error.get("traceback", ""))[-MAX_TRACEBACK:]
            raise KernelError(f"{name} raised {kind}: {message}\n{tb}".rstrip())
        after = reply.get("args_after")
        if mirror_arguments and isinstance(after, tuple) and len(after) == 2:
            mirror(args, after[0])
            mirror(kwargs, after[1])
        if probe is None:
            return reply.get("result")
        if isinstance(reply.get("probe_error"), str):  # the measurement failed on the result
            raise GradingError(reply["probe_error"][:1000])
        return measurement(reply.get("result"), reply.get("probe"))


def mirror(local: Any, after: Any) -> Any:
    """Copy the state `after` a call into the referee's own object `local`, in place.

    Returns the value the referee should hold (the same object where it could be updated in
    place). Nothing is built from `after` but tensors, numbers and containers of them.
    """
    if isinstance(local, Tensor):
        if not isinstance(after, Tensor):
            return local
        if after.shape != local.shape or after.dtype != local.dtype:
            raise GradingError(
                f"an input tensor {tuple(local.shape)} {local.dtype} was changed in place into "
                f"{tuple(after.shape)} {after.dtype}"
            )
        if torch.equal(local, after):
            return local
        with torch.no_grad():
            try:
                local.copy_(after)
            except RuntimeError:  # an expanded view: in one process it could not change either
                pass
        return local
    if isinstance(local, nn.Module) and isinstance(after, codec.ModuleState):
        own = local.state_dict(keep_vars=True)
        with torch.no_grad():
            for key, value in after.state.items():
                if key in own and own[key].shape == value.shape and own[key].dtype == value.dtype:
                    own[key].copy_(value)
        params = dict(local.named_parameters())
        for key, param in params.items():
            grad = after.grads.get(key)
            ok = isinstance(grad, Tensor) and grad.shape == param.shape
            param.grad = grad.to(param.dtype).clone() if ok else None
        for name, sub in local.named_modules():  # train/eval mode, as the call left it
            if name in after.training:
                sub.training = after.training[name]
        return local
    if isinstance(local, torch.optim.Optimizer) and isinstance(after, codec.OptimizerState):
        try:
            local.load_state_dict(after.state_dict)
        except Exception as error:
            raise GradingError(
                f"the optimizer's state after the call is not valid: {error}"
            ) from None
        return local
    if isinstance(local, torch.Generator) and isinstance(after, torch.Generator):
        local.set_state(after.get_state())
        return local
    if isinstance(local, random.Random) and isinstance(after, random.Random):
        local.setstate(after.getstate())
        return local
    if isinstance(local, list) and isinstance(after, list):
        if plain_items(local) and plain_items(after):  # what the item-wise copy would give
            if local != after:
                local[:] = after
        elif len(local) == len(after):
            local[:] = [mirror(a, b) for a, b in zip(local, after)]
        else:
            local[:] = after
        return local
    if isinstance(local, dict) and isinstance(after, dict):
        for key in list(local):
            if key not in after:
                del local[key]
        for key, value in after.items():
            local[key] = mirror(local[key], value) if key in local else value
        return local
    if isinstance(local, tuple) and isinstance(after, tuple) and len(local) == len(after):
        return tuple(mirror(a, b) for a, b in zip(local, after))
    if isinstance(local, (bool, int, float, str, type(None))) and not isinstance(
        after, (Tensor, nn.Module, list, dict, tuple)
    ):
        return after
    return local


# --- kernel side ----------------------------------------------------------------------------


def _namespace() -> dict[str, Any]:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("bertcourse.grade.boundary.remote.serve runs inside an IPython kernel")
    return shell.user_ns


def serve_calls(path: str, token: str) -> None:
    """Kernel side: answer the referee's calls until it ends them (closes the socket).

    Runs as the user expression of one execute request (an expression, as `serve` was: a
    learner's input or AST transformers do not touch it). The calls come on the Unix socket
    the grader listens on in the kernel's own folder (`path`), one frame of codec text each
    (`codec.read_frame`), and each reply goes back as one frame: no Jupyter message,
    signature or output flush per call. The first frame is `token`, fresh for this request
    and sent in it (no earlier cell could read it): the grader serves no other connection.
    The socket is `_socket.socket`, a C type no cell can patch (a relay set on
    `socket.socket` never sees the calls). The request has no stdin, and while the learner's
    function runs `input` raises `StdinNotImplementedError` as in a graded cell.
    """
    import _socket
    import builtins

    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.connect(path)
        codec.write_frame(conn, token.encode())
        while True:
            request = codec.read_frame(conn, codec.Limits().max_bytes)
            if request is None:
                return
            builtins.input, saved = _no_stdin, builtins.input
            try:
                reply = serve(request)
            finally:
                builtins.input = saved
            codec.write_frame(conn, reply.encode())
    finally:
        conn.close()


def _no_stdin(prompt: str = "") -> str:
    from IPython.core.error import StdinNotImplementedError

    raise StdinNotImplementedError("input() is not available while a graded function runs")


def serve(request: str | bytes | bytearray) -> str:
    """Kernel side: run one call of the learner's function; the reply as codec text."""
    try:
        call = codec.decode(request, "kernel")
        namespace = _namespace()
        if call["fn"] == GET:  # the referee asks for the value of a name the answers bind
            name = call["args"][0]
            if name not in namespace:
                return _reply(
                    {
                        "ok": False,
                        "error": {"type": "NameError", "message": f"{name} is not defined"},
                    }
                )
            return _reply({"ok": True, "result": namespace[name]})
        fn = namespace.get(call["fn"])
        if not callable(fn):
            return _reply(
                {
                    "ok": False,
                    "error": {"type": "NameError", "message": f"{call['fn']} is not defined"},
                }
            )
        itself = is_forbidden_object(fn, call["forbid"])
        if itself:  # the graded function is the library's own: refused, not called
            return _reply({"ok": True, "result": None, "forbidden": [itself]})
        references = dict(call["use_reference"])  # dotted paths or functional steps
        args, kwargs = call["args"], call["kwargs"]
        probe = Probe.from_data(call["probe"]) if "probe" in call else None
    except Exception as error:
        return _reply({"ok": False, "error": {"type": "GraderError", "message": repr(error)[:500]}})
    try:
        trace = OpTrace(forbidden_ops(call["forbid"]))
        # the earlier parts' references run untraced: their operators are not the learner's
        references = {k: trace.exempt(_reference_callable(v)) for k, v in references.items()}
        with forbidden(call["forbid"], fn, references) as calls, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                meter = Meter(probe) if probe is not None else None
                with trace, meter or contextlib.nullcontext():
                    traced = [trace.on()]
                    result = fn(*args, **kwargs)
                    traced.append(trace.on())
                outcome: dict[str, Any] = {"ok": True, "result": result}
                if trace.ops:
                    outcome["trace"] = traced
                if meter is not None:  # the referee's fixed measurement, outside the trace
                    try:
                        outcome["probe"] = meter.report(result, args, call["fn"])
                    except GradingError as error:
                        outcome["probe_error"] = str(error)
            except BaseException as error:  # noqa: BLE001 (reported to the referee)
                if isinstance(error, (KeyboardInterrupt, SystemExit)):
                    raise
                outcome = {
                    "ok": False,
                    "error": {
                        "type": type(error).__name__,
                        "message": str(error)[:1000],
                        "traceback": "".join(traceback.format_exception(error))[-MAX_TRACEBACK:],
                    },
                }
        outcome["forbidden"] = list(calls) + [f"the ATen operator {op}" for op in trace.seen]
    except BaseException as error:  # noqa: BLE001 (the grading setup itself failed here)
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        outcome = {"ok": False, "error": {"type": "GraderError", "message": repr(error)[:500]}}
    outcome["args_after"] = (args, kwargs)
    return _reply(outcome)


class OpTrace:
    """Records which of `ops` (ATen operator names, "aten::_log_softmax") run inside the
    block: a dispatch mode, below every Python name a learner could use to reach them."""

    def __init__(self, ops: frozenset[str]) -> None:
        self.ops = ops
        self.seen: list[str] = []
        self.paused = 0
        self.canaries = 0
        self._mode: Any = None

    def on(self) -> bool:
        """Does an operator run in this thread now reach the trace? (a canary operator; True
        when there is nothing to trace)"""
        if self._mode is None:
            return True
        before = self.canaries
        torch.empty(0)
        return self.canaries == before + 1

    def exempt(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn`, whose operators are not recorded (a reference standing for an earlier part)."""

        @functools.wraps(fn)
        def untraced(*args: Any, **kwargs: Any) -> Any:
            self.paused += 1
            try:
                return fn(*args, **kwargs)
            finally:
                self.paused -= 1

        return untraced

    def __enter__(self) -> OpTrace:
        if self.ops:
            self._mode = _trace_mode_class()(self)
            self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._mode is not None:
            self._mode.__exit__(*exc)
            self._mode = None


@functools.cache
def _trace_mode_class() -> type:
    """The dispatch mode behind `OpTrace`, defined once per kernel (torch imported lazily).

    `_should_skip_dynamo` is False: otherwise torch wraps the handler in `_disable_dynamo`,
    which imports `torch._dynamo` on the first traced call (1.8 s of CPU in every kernel,
    measured with py-spy) for a guard that only matters under `torch.compile`."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _TraceMode(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False

        def __init__(self, trace: OpTrace) -> None:
            super().__init__()
            self.trace = trace

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            trace, name = self.trace, func._overloadpacket._qualified_op_name
            if name == CANARY:
                trace.canaries += 1
            if not trace.paused and name in trace.ops and name not in trace.seen:
                trace.seen.append(name)
            return func(*args, **(kwargs or {}))

    return _TraceMode


def _reply(outcome: dict[str, Any]) -> str:
    """The outcome as codec text (the prompt that carries it back to the referee)."""
    try:
        return codec.encode(outcome, side="kernel")
    except codec.CodecError as error:
        what = "result" if outcome.get("ok") else "error"
        return codec.encode(
            {
                "ok": False,
                "error": {
                    "type": "UnsupportedValue",
                    "message": f"the {what} cannot be graded: {error}",
                },
                "forbidden": outcome.get("forbidden", []),
            },
            side="kernel",
        )
