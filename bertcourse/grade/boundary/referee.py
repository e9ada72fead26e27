"""The referee: decides every point outside the student's process.

For one notebook, the referee holds its own namespace, built only from the instructor's cells
(from the gradebook, never from the submission): the set-up cells run here as they run in the
kernel, and each test cell runs here, hidden tests included. In that namespace the learner's
functions are `remote.RemoteFunction`s: a check calls the reference here, sends the same
inputs to the jailed kernel as plain data, gets plain data back and compares here. Names the
answer cells bind to values (not functions) are fetched from the kernel as data before each test.

So the expected values, the references, the tolerances, the hidden tests' code and the seeds of
hidden inputs never enter the kernel, and nothing the kernel sends can run code here: the
kernel's only way to score is to return the right numbers.

Hidden inputs: inside a test cell's hidden region, `grading.randn` / `grading.randint` seeds are
mapped through an HMAC keyed by the course's referee secret (`.grading/referee.key`), so the
hidden inputs are not those written in `solutions/` (a public repository) and no released
file holds them.

Feedback: a failure in a visible region shows the check's full message (the learner has those
inputs already); a failure in a hidden region says which check failed and why in words, never
the inputs or the expected values.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import hashlib
import hmac
import inspect
import io
import re
import time
from collections.abc import Callable
from typing import Any

from bertcourse.grade.assignment import CellSpec, NotebookSpec
from bertcourse.grade.boundary import codec
from bertcourse.grade.boundary.remote import KernelError, RemoteFunction, Session
from bertcourse.grading import inputs
from bertcourse.grading.rules import StudentCode
from bertcourse.grading.values import GradingError

HIDDEN = re.compile(
    r"^[ \t]*### BEGIN HIDDEN TESTS[ \t]*\n(.*?)^[ \t]*### END HIDDEN TESTS[ \t]*$", re.S | re.M
)
MAX_OUTPUT = 64 << 10


class KernelGone(RuntimeError):
    """The kernel died or stopped answering during a call: the run ends. `timed_out`: it was
    stopped because the call ran past its time limit (the status is then `timed_out`)."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


@dataclasses.dataclass
class TestOutcome:
    """The referee's verdict on one test cell."""

    passed: bool
    message: str = ""
    output: str = ""  # what the checks printed (OK lines), capped
    hidden_failure: bool = False
    timed_out: bool = False  # a call ran past its time limit, or the test past the deadline


def segments(source: str) -> list[tuple[str, bool]]:
    """The test cell's code as (code, hidden) pieces, in order."""
    out: list[tuple[str, bool]] = []
    pos = 0
    for match in HIDDEN.finditer(source):
        out.append((source[pos : match.start()], False))
        out.append((match.group(1), True))
        pos = match.end()
    out.append((source[pos:], False))
    return [(code, hidden) for code, hidden in out if code.strip()]


def seed_mapper(secret: bytes, scope: str) -> Callable[[int], int]:
    def mapped(seed: int) -> int:
        digest = hmac.new(secret, f"{scope}:{seed}".encode(), hashlib.sha256).digest()
        return int.from_bytes(digest[:7], "big")

    return mapped


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> inspect.Signature:
    """The parameter names of the instructor's answer (for messages: `fn(q=Tensor(...), ...)`)."""
    kinds = inspect.Parameter
    params = [kinds(a.arg, kinds.POSITIONAL_ONLY) for a in node.args.posonlyargs]
    params += [kinds(a.arg, kinds.POSITIONAL_OR_KEYWORD) for a in node.args.args]
    if node.args.vararg:
        params.append(kinds(node.args.vararg.arg, kinds.VAR_POSITIONAL))
    params += [kinds(a.arg, kinds.KEYWORD_ONLY) for a in node.args.kwonlyargs]
    if node.args.kwarg:
        params.append(kinds(node.args.kwarg.arg, kinds.VAR_KEYWORD))
    return inspect.Signature(params)


def _defined_functions(
    cells: list[CellSpec],
) -> tuple[dict[str, inspect.Signature | None], set[str]]:
    """(functions and classes with their signatures, other names) the answer cells define."""
    functions: dict[str, inspect.Signature | None] = {}
    values: set[str] = set()
    for cell in cells:
        if not (cell.solution and cell.cell_type == "code"):
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                try:
                    functions[node.name] = _signature(node)
                except ValueError:  # an unusual signature: messages show positional values
                    functions[node.name] = None
            elif isinstance(node, ast.ClassDef):
                functions[node.name] = None
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    values |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return functions, values - set(functions)


class Referee:
    """Runs the instructor's cells of one notebook against one kernel (see the module docstring)."""

    def __init__(
        self,
        spec: NotebookSpec,
        assignment: str,
        student_cells: list[tuple[int, str]],
        send: Callable[[str], str],
        secret: bytes | None = None,
    ) -> None:
        self.spec = spec
        self.assignment = assignment
        setup = [c.source for c in spec.cells if c.cell_type == "code" and c.locked and not c.grade]
        self.code = StudentCode(student_cells, context=setup)
        self.session = Session(send=send, code=self.code)
        self.secret = secret
        self.functions, self.values = _defined_functions(spec.cells)
        self.namespace: dict[str, Any] = {"__name__": "__referee__"}
        self._install_functions()
        self.setup_error: str | None = None

    def _install_functions(self) -> None:
        for name, signature in self.functions.items():
            remote = RemoteFunction(name, self.session)
            if signature is not None:
                remote.__signature__ = signature
            self.namespace[name] = remote

    # --- cells ------------------------------------------------------------------------------

    def run_setup(self, grade_id: str) -> None:
        """Run an instructor set-up cell (imports, data) in the referee's namespace."""
        cell = self.spec.cell(grade_id)
        if cell is None or cell.cell_type != "code":
            return
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(cell.source, f"<set-up {grade_id}>", "exec"), self.namespace)
        except Exception as error:  # the instructor's own cell: the assignment is broken
            self.setup_error = f"set-up cell {grade_id} failed in the referee: {error!r}"
        self._install_functions()  # an instructor cell must not shadow the learner's functions

    def _fetch_values(self) -> None:
        for name in sorted(self.values):
            try:
                value = self._get(name)
            except (GradingError, codec.CodecError):
                self.namespace.pop(name, None)
            else:
                self.namespace[name] = value

    def _get(self, name: str) -> Any:
        return RemoteFunction("__bertcourse_get__", self.session).call((name,), {})

    def run_test(self, grade_id: str, deadline: float) -> TestOutcome:
        """Run one test cell here; the learner's functions are called in the kernel."""
        cell = self.spec.cell(grade_id)
        if cell is None:
            return TestOutcome(False, "the grader has no source for this test")
        if self.setup_error:
            return TestOutcome(False, self.setup_error)
        self._fetch_values()
        out = io.StringIO()
        for code, hidden in segments(cell.source):
            if time.monotonic() > deadline:
                return TestOutcome(
                    False, "the test ran out of time", _cap(out.getvalue()), timed_out=True
                )
            mapper = (
                seed_mapper(self.secret, f"{self.assignment}:{grade_id}")
                if hidden and self.secret
                else None
            )
            try:
                with contextlib.redirect_stdout(out), inputs.mapped_seeds(mapper):
                    exec(compile(code, f"<test {grade_id}>", "exec"), self.namespace)
            except KernelGone:
                raise
            except TimeoutError as error:  # a call of the learner's function ran too long
                return TestOutcome(False, str(error), _cap(out.getvalue()), hidden, timed_out=True)
            except KernelError as error:
                message = str(error) if not hidden else _hidden_message(error)
                return TestOutcome(False, message, _cap(out.getvalue()), hidden)
            except GradingError as error:
                message = str(error) if not hidden else _hidden_message(error)
                return TestOutcome(False, message, _cap(out.getvalue()), hidden)
            except Exception as error:
                text = f"{type(error).__name__}: {error}"
                message = (
                    text if not hidden else f"a hidden test failed with {type(error).__name__}"
                )
                return TestOutcome(False, message, _cap(out.getvalue()), hidden)
        return TestOutcome(True, "", _cap(out.getvalue()))


_HIDDEN_VALUES = (
    (re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""), "'…'"),  # string literals
    (re.compile(r"\[[^\[\]]*\]"), "[…]"),  # lists of plain values
    (re.compile(r"(?<==)-?\d[\d.e+-]*"), "…"),  # a number given as an argument
)


def _hidden_message(error: Exception) -> str:
    """The first line of a hidden test's failure: the call, its shapes and the mistake's name;
    never an input value (strings, lists, numbers) or an expected or obtained value."""
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    first = re.sub(r"(expected|got|observed|应为|实际为|观测到).*$", r"\1 ... (hidden)", first)
    for pattern, mark in _HIDDEN_VALUES:
        first = pattern.sub(mark, first)
    return f"a hidden test failed: {first[:300]}"


def _cap(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT else text[:MAX_OUTPUT] + "\n... (output truncated)\n"
