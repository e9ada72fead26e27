"""The paragraph "What an answer may use" of every assignment's introduction, against the rules.

The paragraph names building blocks; the referee's static rules (`bertcourse.grading.rules`,
allow-list in `bertcourse.grading.allow`) decide what a part's answer may reach. For every part
that forbids something (`forbid=` in its test cell), an answer that uses what the paragraph names
must get no finding from `StudentCode.violations`, the call the referee makes before each graded
call. The parts and their forbidden names are read from the test cells of the built solution
notebooks (`solutions/chNN_*/<topic>.ipynb`), the set-up cells as the referee passes them
(`referee.Referee`: locked code cells that are not graded). A part that forbids nothing has no
allow-list (only the scans for machinery and dynamic code apply there).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import itertools
import math
import re
import types
from pathlib import Path

import nbformat
import pytest

from bertcourse.grading import forbid, rules

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "solutions" / "_src").glob("ch[0-9][0-9]_*.py"))
ASSIGNMENTS = [p.stem for p in SOURCES]
HEADING = "**What an answer may use.**"

# the words of the paragraph -> the objects they name (dotted paths; builtins by their name)
NAMED: dict[str, tuple[str, ...]] = {
    "`softmax`": ("torch.nn.functional.softmax",),
    "`gelu`": ("torch.nn.functional.gelu",),
    "`math`": tuple(f"math.{n}" for n in dir(math) if not n.startswith("_") and n[0].islower()),
    "(`len`, `range`, `zip`, `sorted`, ...)": ("len", "range", "zip", "sorted"),
    "`itertools`": tuple(
        f"itertools.{n}" for n in dir(itertools) if not n.startswith("_") and n[0].islower()
    ),
    "`collections.Counter`": ("collections.Counter",),
    "`defaultdict`": ("collections.defaultdict",),
    "`functools.reduce`": ("functools.reduce",),
    "`partial`": ("functools.partial",),
    "`dataclasses.dataclass`": ("dataclasses.dataclass",),
    "`copy.deepcopy`": ("copy.deepcopy",),
}
# "in the parts that take a model or its modules": the graded function has one of these
# parameters; "in the parts that draw at random": one of those
MODULE_PARAMETERS = {"model", "module", "embeddings", "layer", "head"}
MODULE_BLOCKS = ("torch.nn.Linear", "torch.nn.LayerNorm", "torch.nn.Dropout")
RANDOM_PARAMETERS = {"rng", "generator"}
RANDOM_BLOCKS = ("random.Random", "random.random", "random.shuffle", "random.sample")
# a standard-library helper the paragraph does not name, refused everywhere: the check sees refusals
UNNAMED = "functools.total_ordering"


@dataclasses.dataclass(frozen=True)
class Part:
    """One graded call that forbids something: the learner's function and the forbidden names."""

    function: str
    forbidden: tuple[str, ...]
    parameters: frozenset[str]


@dataclasses.dataclass
class Assignment:
    paragraph: str
    setup: list[str]  # the set-up cells, the referee's context
    parts: list[Part]


def _paragraph(source: Path) -> str:
    """The paragraph of the introduction that starts with HEADING, as one line."""
    text = source.read_text(encoding="utf-8")
    match = re.search(r"^# " + re.escape(HEADING) + r".*?(?=\n#\n)", text, re.S | re.M)
    assert match, f"{source.name}: no paragraph {HEADING!r} in the introduction"
    return " ".join(line.removeprefix("#").strip() for line in match.group(0).splitlines())


def _constants(sources: list[str]) -> dict[str, object]:
    """Module-level `NAME = <expression of literals and earlier names>` of the cells (FORBID
    tuples, `dict(forbid=..., ...)` keyword sets); the rest is left out."""
    namespace: dict[str, object] = {"dict": dict}
    assignments = [
        node
        for source in sources
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
    ]
    for node in assignments:
        try:
            value = eval(compile(ast.Expression(node.value), "<cell>", "eval"), {}, namespace)
        except Exception:  # anything but literals and names of literals: not a forbid set
            continue
        namespace[node.targets[0].id] = value
    return namespace


def _forbid_of(call: ast.Call, constants: dict[str, object]) -> tuple[str, ...] | None:
    for keyword in call.keywords:
        if keyword.arg == "forbid":
            value = eval(compile(ast.Expression(keyword.value), "<test>", "eval"), {}, constants)
        elif keyword.arg is None and isinstance(keyword.value, ast.Name):  # **PAIR
            keywords = constants.get(keyword.value.id)
            value = keywords.get("forbid") if isinstance(keywords, dict) else None
        else:
            continue
        if value is not None:
            return (value,) if isinstance(value, str) else tuple(value)
    return None


def _load(name: str) -> Assignment:
    path = next((ROOT / "solutions" / name).glob("*.ipynb"))
    setup, tests, answers = [], [], []
    for cell in nbformat.read(path, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        if meta.get("locked") and not meta.get("grade"):
            setup.append(cell.source)
        elif meta.get("grade") and not meta.get("solution"):
            tests.append(cell.source)
        elif meta.get("solution"):
            answers.append(cell.source)
    parameters = {
        node.name: frozenset(a.arg for a in [*node.args.args, *node.args.kwonlyargs])
        for source in answers
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef)
    }
    constants = _constants(setup + tests)
    parts = set()
    for source in tests:
        for node in ast.walk(ast.parse(source)):
            if not (
                isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name)
            ):
                continue
            forbidden = _forbid_of(node, constants)
            function = node.args[0].id
            if forbidden and function in parameters:
                parts.add(Part(function, forbidden, parameters[function]))
    return Assignment(
        _paragraph(ROOT / "solutions" / "_src" / f"{name}.py"),
        setup,
        sorted(parts, key=lambda p: (p.function, p.forbidden)),
    )


@pytest.fixture(scope="module")
def assignments() -> dict[str, Assignment]:
    return {name: _load(name) for name in ASSIGNMENTS}


def _answer(function: str, paths: list[str]) -> str:
    """A learner's cell: `function` reaches every object of `paths`."""
    modules = sorted({p.rsplit(".", 1)[0] for p in paths if "." in p})
    lines = [f"import {m}" for m in modules] + [f"def {function}(*args, **kwargs):"]
    lines += [f"    _ = {p}" for p in paths] + ["    return None"]
    return "\n".join(lines)


def _findings(assignment: Assignment, part: Part, paths: list[str]) -> list[rules.Finding]:
    code = rules.StudentCode([(0, _answer(part.function, paths))], context=assignment.setup)
    # the names expanded as `forbid.run` sends them to the referee
    return code.violations(part.function, forbid._expand(part.forbidden), (), {})


def _setup_functions(setup: list[str]) -> list[str]:
    """The functions and classes the set-up cells define or import by name (`from m import f`)."""
    names = []
    for source in setup:
        for node in ast.parse(source).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.append(node.name)
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    obj = getattr(importlib.import_module(node.module), alias.name, None)
                    if obj is not None and not isinstance(obj, types.ModuleType) and callable(obj):
                        names.append(alias.asname or alias.name)
    return names


def test_the_paragraph_is_the_same_in_every_assignment(assignments):
    paragraphs = {a.paragraph for a in assignments.values()}
    assert len(paragraphs) == 1, "\n\n".join(sorted(paragraphs))


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_what_the_paragraph_names_is_allowed_in_every_part(assignments, name):
    assignment = assignments[name]
    assert assignment.parts, f"{name}: no part forbids anything (the test reads no test cell?)"
    for words in NAMED:
        assert words in assignment.paragraph, f"{name}: the paragraph no longer says {words}"
    named = [path for paths in NAMED.values() for path in paths]
    for part in assignment.parts:
        found = _findings(assignment, part, named)
        assert not found, (name, part.function, [f.what for f in found])
        refused = _findings(assignment, part, [UNNAMED])
        assert [f.review for f in refused] == [True], (name, part.function, UNNAMED)


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_set_up_cells_functions_are_allowed_unless_they_do_the_parts_work(assignments, name):
    """The paragraph says "...and the functions and classes the set-up cell defines or imports
    by name", and "whatever the list holds, what already does the part's work is disabled": a
    set-up name may be forbidden in a part (chapter 5 imports `make_pair` as its reference),
    never sent to review."""
    assignment = assignments[name]
    names = _setup_functions(assignment.setup)
    for part in assignment.parts:
        for found in _findings(assignment, part, names):
            assert not found.review, (name, part.function, found.what)


def test_the_parts_that_take_a_model_or_draw_at_random_allow_what_the_paragraph_says(
    assignments,
):
    checked: dict[str, set[str]] = {"modules": set(), "random": set()}
    for name, assignment in assignments.items():
        for part in assignment.parts:
            for kind, parameters, blocks in (
                ("modules", MODULE_PARAMETERS, MODULE_BLOCKS),
                ("random", RANDOM_PARAMETERS, RANDOM_BLOCKS),
            ):
                if part.parameters & parameters:
                    checked[kind].add(name.split("_")[0])
                    found = _findings(assignment, part, list(blocks))
                    assert not found, (name, part.function, [f.what for f in found])
    # the parameters still find the parts: those of chapters 1, 6 and 7 that take a model or
    # its modules, those of chapters 3, 5, 9 and 10 that take an rng or a generator
    assert checked == {
        "modules": {"ch01", "ch06", "ch07"},
        "random": {"ch03", "ch05", "ch09", "ch10"},
    }


def test_the_named_objects_exist():
    """A typo in NAMED would make the checks above judge nothing."""
    for paths in NAMED.values():
        for path in paths:
            module, _, attr = path.rpartition(".")
            assert hasattr(importlib.import_module(module or "builtins"), attr), path
