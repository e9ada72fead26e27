"""Mutation analysis of the exercises' solution regions: do the tests catch every real bug?

    python3 scripts/mutation_analysis.py                 # every assignment
    python3 scripts/mutation_analysis.py ch04_loss --show-survivors
    python3 scripts/mutation_analysis.py --json benchmarks/results/mutation.json

For each answer cell of `solutions/_src/chNN_*.py`, the code between `### BEGIN SOLUTION` and
`### END SOLUTION` is mutated one change at a time, with mutmut's kinds of operators:

- swap an arithmetic operator (+ -, * /, // %, ** *) or a comparison (< <=, > >=, == !=),
  `and`/`or`, negate a condition (`not`);
- change a constant (n -> n + 1, n -> 0, x.y -> x.y * 2, True <-> False, -1 -> -2 as an axis);
- drop a call (`f(x)` -> `x`), drop a keyword argument;
- delete a statement (replaced by `pass`).

Each mutant replaces that answer in the instructor's notebook, which runs in one process with
its hidden tests (as `tests/test_exercises.py` does). The mutant is *killed* when the answer's
own test cell fails; it *survives* when every test passes. A survivor is either a test gap or an
equivalent mutant (same behaviour, e.g. `x * 2` vs `x + x`): the report lists each with its
line, for a human to decide. Mutants that fail to compile are not counted.

A human's decisions are kept in `scripts/mutation_equivalent.toml` (assignment, cell, the
statement before and after, and why the mutant is equivalent): the report then separates the
survivors judged equivalent from the unexplained ones. Mutants killed only by the time limit
are listed apart (a busy machine can time out a correct test).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import io
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "solutions"))
import _build_notebooks as builder  # noqa: E402

SWAP_BIN = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mod,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.MatMult: ast.Mult,
}
SWAP_CMP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


@dataclass
class Mutant:
    assignment: str
    cell: str
    line: int  # in the answer cell
    kind: str
    before: str
    after: str
    killed: bool | None = None  # None: did not compile
    timed_out: bool = False  # killed by the time limit only (listed: re-run it on a quiet machine)
    equivalent: str = (
        ""  # a surviving mutant judged equivalent: why (scripts/mutation_equivalent.toml)
    )


def _solution_region(source: str) -> tuple[int, int]:
    lines = source.splitlines()
    start = next(i for i, text in enumerate(lines) if "### BEGIN SOLUTION" in text)
    end = next(i for i, text in enumerate(lines) if "### END SOLUTION" in text)
    return start + 1, end + 1  # 1-based line numbers strictly inside the region


class _Mutator(ast.NodeTransformer):
    """Applies the `target`-th possible mutation inside lines (lo, hi); counts them all."""

    def __init__(self, target: int, lo: int, hi: int) -> None:
        self.target, self.lo, self.hi = target, lo, hi
        self.count = 0
        self.done: tuple[str, int] | None = None

    def _here(self, node: ast.AST) -> bool:
        return self.lo < getattr(node, "lineno", 0) < self.hi

    def _hit(self, kind: str, node: ast.AST) -> bool:
        if not self._here(node):
            return False
        hit = self.count == self.target
        self.count += 1
        if hit:
            self.done = (kind, node.lineno)
        return hit

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if type(node.op) in SWAP_BIN and self._hit("operator", node):
            node.op = SWAP_BIN[type(node.op)]()
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if type(node.ops[0]) in SWAP_CMP and self._hit("comparison", node):
            node.ops[0] = SWAP_CMP[type(node.ops[0])]()
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        if self._hit("and/or", node):
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return node

    def visit_If(self, node: ast.If) -> ast.AST:
        self.generic_visit(node)
        if self._hit("negated condition", node):
            node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, bool):
            if self._hit("constant", node):
                return ast.copy_location(ast.Constant(not node.value), node)
        elif isinstance(node.value, int):
            if self._hit("constant", node):
                return ast.copy_location(ast.Constant(node.value + 1), node)
            if node.value != 0 and self._hit("constant", node):
                return ast.copy_location(ast.Constant(0), node)
        elif isinstance(node.value, float):
            if self._hit("constant", node):
                return ast.copy_location(ast.Constant(node.value * 2 if node.value else 1.0), node)
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.USub) and self._hit("sign", node):
            return node.operand
        if isinstance(node.op, ast.Not) and self._hit("negated condition", node):
            return node.operand
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if node.args and self._hit("dropped call", node):
            return node.args[0]
        for i in range(len(node.keywords)):
            if self._hit("dropped keyword", node):
                node.keywords = node.keywords[:i] + node.keywords[i + 1 :]
                return node
        return node

    def _statements(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out = []
        for stmt in body:
            if not isinstance(stmt, (ast.Return, ast.FunctionDef)) and self._hit(
                "deleted statement", stmt
            ):
                out.append(ast.copy_location(ast.Pass(), stmt))
            else:
                out.append(stmt)
        return out

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for field in ("body", "orelse"):
            body = getattr(node, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                setattr(node, field, self._statements(body))
        return super().generic_visit(node)


def mutants_of(assignment: str, grade_id: str, source: str) -> list[tuple[Mutant, str]]:
    lo, hi = _solution_region(source)
    tree = ast.parse(source)
    counter = _Mutator(-1, lo, hi)
    counter.visit(copy.deepcopy(tree))
    out = []
    for target in range(counter.count):
        mutator = _Mutator(target, lo, hi)
        mutated = ast.fix_missing_locations(mutator.visit(copy.deepcopy(tree)))
        if mutator.done is None:
            continue
        kind, line = mutator.done
        try:
            text = ast.unparse(mutated)
            compile(text, "<mutant>", "exec")
        except (SyntaxError, ValueError):
            continue
        before = source.splitlines()[line - 1].strip()
        out.append(
            (
                Mutant(assignment, grade_id, line, kind, before, _changed_line(source, text, line)),
                text,
            )
        )
    return out


def _changed_line(original: str, mutated: str, line: int) -> str:
    """The mutated statement as text (ast.unparse drops comments, so line numbers shift)."""
    a = [line.strip() for line in ast.unparse(ast.parse(original)).splitlines()]
    b = [line.strip() for line in mutated.splitlines()]
    for x, y in zip(a, b):
        if x != y:
            return y
    return b[-1] if len(b) > len(a) else "(removed)"


def _run(source_nb, answers: dict[str, str], target: str, seconds: int = 30) -> str:
    """ "passed", "failed" or "timeout": does the test cell `<target>_tests` pass with these
    answers? Each mutant runs in a forked child with a time and memory limit: a mutant that
    loops forever, allocates without bound or crashes the interpreter is killed (its test would
    fail), and cannot stop the run. A time-out is reported apart: on a busy machine a correct but
    slow test can hit the limit too."""
    import os
    import resource
    import signal

    pid = os.fork()
    if pid == 0:  # the child: run, exit 0 when the test passed
        try:
            signal.alarm(seconds)
            resource.setrlimit(resource.RLIMIT_DATA, (4 << 30, 4 << 30))
            os._exit(0 if _run_here(source_nb, answers, target) else 1)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM:
        return "timeout"
    return "passed" if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else "failed"


def _run_here(source_nb, answers: dict[str, str], target: str) -> bool:
    import torch

    namespace: dict = {"__name__": "__main__"}
    passed = True
    with torch.random.fork_rng(devices=[]):
        for cell in source_nb.cells:
            if cell.cell_type != "code":
                continue
            meta = cell.metadata.get("nbgrader", {})
            code = (
                answers.get(meta.get("grade_id"), cell.source)
                if meta.get("solution")
                else cell.source
            )
            try:
                with (
                    contextlib.redirect_stdout(io.StringIO()),
                    contextlib.redirect_stderr(io.StringIO()),
                ):
                    exec(compile(code, f"<cell {meta.get('grade_id')}>", "exec"), namespace)
            except BaseException:  # noqa: BLE001 - a failing cell is the result
                if meta.get("grade_id") == f"{target}_tests":
                    passed = False
            if meta.get("grade_id") == f"{target}_tests":
                return passed
    return passed


EQUIVALENT = ROOT / "scripts" / "mutation_equivalent.toml"


def _judged_equivalent(m: Mutant) -> str:
    """Why this survivor is equivalent, if a human judged it so in EQUIVALENT, else ""."""
    import tomllib

    if not EQUIVALENT.exists():
        return ""
    for entry in tomllib.loads(EQUIVALENT.read_text()).get("equivalent", []):
        key = (entry["assignment"], entry["cell"], entry["before"].strip(), entry["after"].strip())
        if key == (m.assignment, m.cell, m.before.strip(), m.after.strip()):
            return entry["why"]
    return ""


def analyse(assignment: str, log) -> list[Mutant]:
    nb = builder.build_notebook(assignment)
    answers = builder.solution_answers(nb)
    marked = {  # the answer cells with their ### BEGIN/END SOLUTION markers
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }
    results = []
    for grade_id, source in marked.items():
        for mutant, text in mutants_of(assignment, grade_id, source):
            fate = _run(nb, {**answers, grade_id: text}, grade_id)
            mutant.killed, mutant.timed_out = fate != "passed", fate == "timeout"
            mutant.equivalent = "" if mutant.killed else _judged_equivalent(mutant)
            results.append(mutant)
        killed = sum(m.killed for m in results if m.cell == grade_id)
        total = sum(1 for m in results if m.cell == grade_id)
        log(f"{assignment}/{grade_id}: {killed}/{total} killed")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*", help="default: every assignment")
    parser.add_argument("--show-survivors", action="store_true")
    parser.add_argument("--json", type=Path, help="write every mutant and its fate here")
    args = parser.parse_args()
    start = time.monotonic()
    names = args.assignments or builder.assignment_names()
    mutants: list[Mutant] = []
    for name in names:
        mutants += analyse(name, print)
    killed = sum(m.killed for m in mutants)
    survivors = [m for m in mutants if not m.killed]
    equivalent = [m for m in survivors if m.equivalent]
    timeouts = [m for m in mutants if m.timed_out]
    print(
        f"== {killed}/{len(mutants)} mutants killed ({100 * killed / max(1, len(mutants)):.1f}%) "
        f"in {time.monotonic() - start:.0f} s; {len(equivalent)} survivors judged equivalent "
        f"({EQUIVALENT.name}), {len(survivors) - len(equivalent)} not; "
        f"{len(timeouts)} killed by the time limit only"
    )
    if args.show_survivors or len(survivors) <= 40:
        for m in survivors:
            label = f"equivalent: {m.equivalent}" if m.equivalent else "SURVIVED"
            print(
                f"{label} | {m.assignment}/{m.cell} line {m.line} [{m.kind}]: {m.before!r} -> {m.after!r}"
            )
        for m in timeouts:
            print(
                f"TIMEOUT {m.assignment}/{m.cell} line {m.line} [{m.kind}]: {m.before!r} -> {m.after!r}"
            )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([asdict(m) for m in mutants], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
