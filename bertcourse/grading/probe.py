"""Autograd properties of one call of the learner's function, measured where it runs.

An autograd graph does not cross the referee's boundary (`grade.boundary.codec` sends values), and the test
cell of a graded part runs outside the learner's process under `python -m bertcourse.grade`.
So a property of the graph ("the gradient reaches the tied weight", "no graph is recorded")
cannot be checked on the returned value there. `measure` asks the process that runs the
learner's code to take, in the same call, a fixed measurement defined here (not by the
learner, not by the test cell):

- `graph`: for each tensor of the result (depth first: tuples and lists in order, dict values
  in insertion order), whether it has an autograd graph (`grad_fn`);
- `saved`: how many tensors autograd saved for a backward while the function ran
  (`torch.autograd.graph.saved_tensors_hooks`): 0 when no graph was recorded, even if the
  result was detached afterwards;
- `grad_enabled`: autograd's mode (`torch.is_grad_enabled()`) before and after the call; the
  mode before is restored afterwards, so one part's mistake costs no other part;
- `grads` (when `upstream` and `module` are given): `torch.autograd.grad` of the result's
  tensors with the upstream gradients `upstream` (one per tensor of the result) with respect to
  every trainable parameter of the positional argument `module`, by parameter name (None where
  no gradient reaches it). `.grad` is left as it was.

The same call works in the three places a test cell runs (the learner's notebook, nbgrader's
kernel, the referee): in process `measure` wraps `grading.run`; for a
`remote.RemoteFunction` the measurement travels as an option of the call (`probe` in the
request), the kernel runs it around the learner's function (`remote.serve`) and sends back
values only. The test cell compares them with the same measurement of the reference, taken
in the referee's own process.

What a forged report can gain (the measurement runs in the learner's process, which the
learner's code could tamper with):

- `grads` are compared with the reference's gradients computed outside the kernel: a report
  passes only with the right numbers, which takes computing the right gradient (the work the
  part asks for).
- `graph`, `saved` and `grad_enabled` are facts the kernel reports; they are checked as "must
  be false / zero / unchanged", so a forged report can only hide a recorded graph or a
  disabled autograd, never make a correct answer fail. Hiding one takes code written against
  the grader (its own `saved_tensors_hooks` around the forward, or patching this module in the
  kernel), not a learner's mistake; the values the part returns are still checked outside. That
  is the residual risk, the same as any fact only the learner's process can see.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from bertcourse.grading.values import GradingError


@dataclasses.dataclass(frozen=True)
class Measurement:
    """The result of one call and the autograd facts measured around it (module docstring)."""

    result: Any
    graph: tuple[bool, ...]  # per tensor of the result: has an autograd graph
    saved: int  # tensors saved for a backward during the call
    grad_enabled: tuple[bool, bool]  # autograd's mode before and after the call
    grads: dict[str, Tensor | None] | None  # the module's gradients, when asked for


@dataclasses.dataclass(frozen=True)
class Probe:
    """What to measure: upstream gradients, one per tensor of the result, and the index of the
    positional argument (a module) whose parameters' gradients to report."""

    upstream: tuple[Tensor, ...] | None = None
    module: int | None = None

    def __post_init__(self) -> None:
        if (self.upstream is None) != (self.module is None):
            raise GradingError("grading setup: measure needs both upstream and module, or neither")
        if self.upstream is not None and not all(isinstance(u, Tensor) for u in self.upstream):
            raise GradingError("grading setup: upstream must be a sequence of tensors")
        if self.module is not None and (isinstance(self.module, bool) or self.module < 0):
            raise GradingError("grading setup: module is the index of a positional argument")

    def as_data(self) -> dict[str, Any]:
        """The probe as the request sends it (`codec` data)."""
        return {"upstream": self.upstream, "module": self.module}

    @classmethod
    def from_data(cls, data: Any) -> Probe:
        if not isinstance(data, dict) or set(data) != {"upstream", "module"}:
            raise GradingError("the probe of the request is not valid")
        upstream = data["upstream"]
        module = data["module"]
        if not (upstream is None or isinstance(upstream, (tuple, list))):
            raise GradingError("the probe's upstream gradients are not a sequence")
        if not (module is None or isinstance(module, int)):
            raise GradingError("the probe's module is not an argument index")
        return cls(None if upstream is None else tuple(upstream), module)


def tensors_of(value: Any) -> list[Tensor]:
    """The tensors of a result, depth first (tuples and lists in order, dict values in order)."""
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors_of(v)]
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in tensors_of(v)]
    return []


class Meter:
    """Around the learner's call: counts saved tensors and reads autograd's mode; on exit,
    restores the mode that was on before. `report` then measures the result."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.saved = 0
        self.before = self.after = True
        self._hooks: Any = None

    def _pack(self, t: Tensor) -> Tensor:
        self.saved += 1
        return t

    def __enter__(self) -> Meter:
        self.before = torch.is_grad_enabled()
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._hooks.__exit__(*exc)
        self.after = torch.is_grad_enabled()
        torch.set_grad_enabled(self.before)

    def report(self, result: Any, args: Sequence[Any], name: str) -> dict[str, Any]:
        """The measurement as plain data (the result itself travels apart)."""
        tensors = tensors_of(result)
        return {
            "graph": tuple(t.grad_fn is not None for t in tensors),
            "saved": self.saved,
            "grad_enabled": (self.before, self.after),
            "grads": self._grads(tensors, args, name),
        }

    def _grads(
        self, tensors: list[Tensor], args: Sequence[Any], name: str
    ) -> dict[str, Tensor | None] | None:
        probe = self.probe
        if probe.upstream is None or probe.module is None:
            return None
        module = args[probe.module] if probe.module < len(args) else None
        if not isinstance(module, nn.Module):
            raise GradingError(f"grading setup: argument {probe.module} is not a module")
        if len(tensors) != len(probe.upstream):
            raise GradingError(
                f"{name} returned {len(tensors)} tensor(s); the check back-propagates through "
                f"{len(probe.upstream)}"
            )
        out: dict[str, Tensor | None] = {n: None for n, _ in module.named_parameters()}
        trainable = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        pairs = [(t, u) for t, u in zip(tensors, probe.upstream) if t.requires_grad]
        if not pairs or not trainable:
            return out
        for t, u in pairs:
            if t.shape != u.shape:
                raise GradingError(
                    f"{name} returned a tensor of shape {tuple(t.shape)} where the check "
                    f"back-propagates a gradient of shape {tuple(u.shape)}"
                )
        with torch.enable_grad():
            grads = torch.autograd.grad(
                [t for t, _ in pairs],
                [p for _, p in trainable],
                [u.to(t.dtype) for t, u in pairs],
                allow_unused=True,
            )
        out.update({n: None if g is None else g.detach() for (n, _), g in zip(trainable, grads)})
        return out


def _unpack(t: Tensor) -> Tensor:
    return t


def measurement(result: Any, report: Any) -> Measurement:
    """A `Measurement` from a report as data (the kernel's reply): checked field by field."""
    if not isinstance(report, dict):
        raise GradingError("the kernel's measurement is not valid")
    graph, saved, enabled, grads = (
        report.get(k) for k in ("graph", "saved", "grad_enabled", "grads")
    )
    valid = (
        isinstance(graph, tuple)
        and all(isinstance(g, bool) for g in graph)
        and isinstance(saved, int)
        and not isinstance(saved, bool)
        and saved >= 0
        and isinstance(enabled, tuple)
        and len(enabled) == 2
        and all(isinstance(e, bool) for e in enabled)
        and (
            grads is None
            or (
                isinstance(grads, dict)
                and all(
                    isinstance(k, str) and (v is None or isinstance(v, Tensor))
                    for k, v in grads.items()
                )
            )
        )
    )
    if not valid:
        raise GradingError("the kernel's measurement is not valid")
    return Measurement(result, graph, saved, enabled, grads)


def measure(
    fn: Any,
    *args: Any,
    upstream: Iterable[Tensor] | None = None,
    module: int | None = None,
    forbid: str | Iterable[str] = (),
    use_reference: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Measurement:
    """Call `fn(*args, **kwargs)` as `grading.run` does, and measure autograd around the call
    where `fn` runs (module docstring). `upstream` (one gradient per tensor of the result) and
    `module` (a positional argument's index) ask for the module's parameter gradients."""
    __tracebackhide__ = True
    from bertcourse.grading.forbid import _expand, run

    probe = Probe(None if upstream is None else tuple(upstream), module)
    if getattr(type(fn), "remote", False):  # a remote.RemoteFunction: measured in the kernel
        return fn.call(
            args, kwargs, forbid=_expand(forbid), use_reference=use_reference, probe=probe
        )
    with Meter(probe) as meter:
        result = run(fn, *args, forbid=forbid, use_reference=use_reference, **kwargs)
    name = getattr(fn, "__name__", "the function")
    return measurement(result, meter.report(result, args, name))
