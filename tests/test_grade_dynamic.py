"""Dynamic code goes to a person, with its points withheld until an instructor approves.

Two halves (issue 36, items 1 and 2):

- the static rules' one definition of "dynamic" (`bertcourse.grading.dynamic`): each class
  of attack, in several spellings, is found in every kind of cell (module level, class body,
  function body, a magic's body), and the honest answers of every assignment are not;
- the promise about points: a `needs_review` (or `tampered`) submission keeps its computed
  points in the gradebook, and no export (CSV, LMS files) carries them until an instructor
  approves, for the exact bytes graded; `approve` / `reject` record that decision.
"""

from __future__ import annotations

import csv
import sys
import types
from pathlib import Path

import pytest

from bertcourse.grade import __main__ as cli
from bertcourse.grade import gradebook, lms, report
from bertcourse.grade.assignment import AssignmentSpec, CellSpec, NotebookSpec
from bertcourse.grade.results import (
    AWAITING_REVIEW,
    Decision,
    NotebookResult,
    PartResult,
    SubmissionResult,
)
from bertcourse.grade.status import Status
from bertcourse.grading import allow, dynamic, forbid
from bertcourse.grading.rules import StudentCode, _building_block, _rule

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX = forbid._expand(["torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax"])
ANSWER = "def softmax(x):\n    return x.exp() / x.exp().sum(-1, keepdim=True)\n"

# --- the rules: each class of attack, several spellings, every kind of cell -----------------

# class of attack -> spellings (each a whole cell); every one must be found by dynamic()
ATTACKS: dict[str, list[str]] = {
    "runs a string as code": [
        "exec('softmax = None')",
        "f = eval\nf('1')",
        "import builtins as b\nb.compile('1', 'x', 'exec')",
        "class C:\n    run = exec",
        "def g():\n    return [eval][0]('1')",
        "%%time\nx = 1",
        "%%capture\nsoftmax = None",
        "%time softmax = None",
        "%timeit -n 1 softmax = None",
        "get_ipython().run_cell_magic('capture', '', 'x = 1')",
        "!echo hi",
        "x = !echo hi",
        "import pickle",
        "from timeit import timeit",
        "import torch\ntorch.compile(lambda x: x)",
        "import torch\nf = torch.jit.script",
    ],
    "evaluates strings (annotations, attribute names)": [
        "import typing\ndef f(x: 'torch.softmax'): pass\ntyping.get_type_hints(f)",
        "from typing import get_type_hints",
        "from typing import *\nget_type_hints(print)",
        "import functools\n@functools.singledispatch\ndef f(x): pass",
        "from operator import attrgetter",
        "import torch\ngetattr(torch, 'soft' + 'max')",
        "import functools, torch\nfunctools.reduce(getattr, ['softmax'], torch)",
        "hasattr(object, name)",
    ],
    "writes attributes of modules or types": [
        "import __main__\n__main__.__setattr__('softmax', max)",
        "import torch\ntorch.__setattr__('rad2deg', max)",
        "import math\nlist(map(setattr, [math], ['log'], [abs]))",
        "import functools, math\nfunctools.partial(setattr, math)('log', abs)",
        "import torch\nobject.__setattr__(torch, 'x', 1)",
        "import torch\ntype.__setattr__(torch.Tensor, 'add', max)",
        "import torch\ntorch.Tensor.__dict__",
        "import math\nvars(math)['log'] = abs",
        "import torch\ntorch.rad2deg = max",
        "import torch\nfor torch.rad2deg in [max]:\n    pass",
        "import torch\nclass C:\n    def f(self):\n        torch.rad2deg = max",
        "import torch\nT = torch.Tensor\nT.add = max",
        "import torch\ntype(torch.zeros(1)).add = max",
        "import torch\ndel torch.rad2deg",
        "x = (1).__class__",
        "f = print.__self__",
        "setattr",
    ],
    "reaches sys.modules or the import machinery": [
        "import sys\nsys.modules['torch']",
        "import typing\ntyping.sys.modules['torch']",
        "import warnings\nm = warnings.sys",
        "import typing\ndef f():\n    s = typing.sys\n    return s.modules",
        "import importlib",
        "from importlib import import_module",
        "__import__('torch')",
        "import torch\ntorch.nn.functional.torch",
        "from sys import modules",
        "import pkgutil",
        "from . import x",
        "import no_such_module_anywhere",
        "import math\ng = [math]",
        "import math\ndef f():\n    m = math\n    return m",
    ],
    "starts threads or processes": [
        "import threading",
        "from threading import Thread",
        "import concurrent.futures",
        "from concurrent.futures import ThreadPoolExecutor",
        "import multiprocessing",
        "import subprocess",
        "import _thread",
        "import os\nos.fork()",
        "from os import fork",
        "import os\nos.system('true')",
        "import asyncio",
        "import torch.multiprocessing",
        "import signal",
    ],
    "opens sockets": ["import socket", "from socket import socket", "import http.client"],
    "calls native code": [
        "import ctypes",
        "from ctypes import CDLL",
        "import torch\ntorch.ops.load_library",
    ],
    "reaches the dispatcher's escape hatches": [
        "import torch\nwith torch._C._DisableTorchDispatch():\n    pass",
        "import torch\ntorch._C._dispatch_tls_set_dispatch_key_excluded",
        "from torch._C import _DisableTorchDispatch",
        "import torch.library",
        "import torch\ntorch.library.Library",
        "class T:\n    __torch_dispatch__ = None\nT.__torch_dispatch__",
        "import torch\nclass T(torch.Tensor):\n    @classmethod\n    def f(cls):\n        return super().__torch_function__",
        "import torch\nf = torch.optim.adam._single_tensor_adam",
    ],
}


def _dynamic(source: str) -> list[str]:
    return [f.what for f in StudentCode([(0, source)]).dynamic()]


@pytest.mark.parametrize(
    "attack, source",
    [(attack, source) for attack, sources in ATTACKS.items() for source in sources],
)
def test_every_spelling_of_every_dynamic_class_is_found(attack: str, source: str) -> None:
    assert _dynamic(source), (attack, source)


@pytest.mark.parametrize("wrap", ["{}", "class C:\n{}", "def f():\n{}", "%%capture\n{}"])
def test_every_kind_of_cell_is_read(wrap: str) -> None:
    """Module level, a class body, a function body and a magic's body: the same finding."""
    body = "    import threading" if wrap.endswith(":\n{}") else "import threading"
    assert any("threads" in w for w in _dynamic(wrap.format(body))), wrap


HONEST = [
    "import math\nimport torch\n%matplotlib inline\n" + ANSWER,
    "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.lin = torch.nn.Linear(2, 2)\n    def forward(self, x):\n        return self.lin(x)",
    "import sys, warnings\nsys.stderr.write(warnings.formatwarning('w', UserWarning, 'f', 1))",
    "import os\nos.path.join(os.getcwd(), 'a')\nos.makedirs('x', exist_ok=True)",
    "import typing\nfrom typing import List\ndef f(x: List[int]) -> typing.Optional[int]:\n    return None",
    "import torch.nn.functional as F\nF2 = F\nhasattr(F, 'softmax')\ngetattr(F, 'softmax', None)",
    "if __name__ == '__main__':\n    print(type(1).__name__)",
    "from __future__ import annotations\nimport dataclasses\n@dataclasses.dataclass\nclass P:\n"
    "    x: int = 0\n    def __post_init__(self):\n        self.x += 1",
    "import torch\nm = torch.nn.Linear(2, 2)\nm.weight = torch.nn.Parameter(torch.zeros(2, 2))",
    "import numpy as np\nimport matplotlib.pyplot as plt\nplt.plot(np.arange(3))",
]


@pytest.mark.parametrize("source", HONEST)
def test_plain_code_is_not_dynamic(source: str) -> None:
    assert _dynamic(source) == [], source


def test_the_course_answers_are_not_dynamic() -> None:
    """No false alarm: every solution, and every alternative and wrong answer of every
    assignment in tests/exercise_answers/ (honest code, right or wrong), reads as plain."""
    sys.path.insert(0, str(ROOT / "solutions"))
    sys.path.insert(0, str(ROOT / "tests"))
    import _build_notebooks as builder
    from test_exercises import load_answers

    flagged, read = [], 0
    for name in builder.assignment_names():
        nb = builder.build_notebook(name)
        solution = [
            (i, c.source)
            for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")
        ]
        variants = [("solution", solution)]
        variants += [
            (f"{a.kind} {a.grade_id}: {a.label}", [(0, a.source)]) for a in load_answers(name)
        ]
        for label, cells in variants:
            code = StudentCode(cells)
            found = code.dynamic() + code.machinery()
            read += 1
            if found:
                flagged.append((name, label, [f.describe() for f in found]))
    assert flagged == [], flagged
    assert read >= 100  # the answers were really read


def test_a_rebinding_the_rules_could_not_see_now_costs_the_call() -> None:
    """Rebindings of the graded name in a magic's body or in a class body are bindings the
    rules follow: the forbidden function behind them fails the call."""
    for cell in (
        "%%capture\nimport torch\ndef softmax(x):\n    return torch.softmax(x, -1)",
        "import torch\nclass _C:\n    global softmax\n    softmax = torch.softmax",
        "import torch\nclass _C:\n    global softmax\n    softmax = torch._softmax",
    ):
        code = StudentCode([(0, ANSWER), (1, cell)])
        found = code.violations("softmax", SOFTMAX, (), {})
        assert [f for f in found if f.cell == 1], cell


def test_star_allows_callables_never_modules_nor_evaluators() -> None:
    """`<module>.*` of the allow-list: what it expands to, for every such entry."""
    entries = [e for group in (allow.BASE, *allow.EXTRA.values()) for e in group]
    starred = {e[:-2] for e in entries if e.endswith(".*")}
    assert {"typing", "warnings", "math"} <= starred
    expanded = 0
    for module_name in starred:
        module = sys.modules.get(module_name) or __import__(module_name)
        for name, value in vars(module).items():
            if _building_block(name, value):
                expanded += 1
                assert callable(value) and not isinstance(value, types.ModuleType), name
                assert dynamic.object_reason(value) is None, (module_name, name)
    assert expanded > 100  # the expansion still hands out the plain helpers
    import typing
    import warnings

    rule = _rule(tuple(SOFTMAX), ())
    for escaped in (typing.get_type_hints, typing.sys, warnings.sys, typing.types):
        assert id(escaped) not in rule.allowed, escaped


def test_nothing_reached_through_an_allowed_object_escapes() -> None:
    for route in (
        "typing.sys.maxsize",
        "warnings.sys.modules",
        "math.__dict__",
        "torch.nn.functional.torch",
    ):
        source = f"import math, typing, warnings, torch\ndef softmax(x):\n    return {route}"
        found = StudentCode([(0, source)]).violations("softmax", SOFTMAX, (), {})
        assert found, route


# --- the points: withheld until an instructor approves ---------------------------------------

COURSE, ASSIGNMENT, NOTEBOOK = "dyn", "toy", "toy"
PARTS = {"scale_tests": 2.0, "softmax_tests": 3.0}


@pytest.fixture
def course(tmp_path: Path):
    """A gradebook with one assignment of two parts and a course folder for the commands."""
    from nbgrader.api import Gradebook

    db = f"sqlite:///{tmp_path / 'gradebook.db'}"
    gradebook.prepare(db, COURSE)
    with Gradebook(db, COURSE) as gb:
        gb.add_assignment(ASSIGNMENT)
        gb.add_notebook(NOTEBOOK, ASSIGNMENT)
        for part, points in PARTS.items():
            gb.add_grade_cell(part, NOTEBOOK, ASSIGNMENT, max_score=points, cell_type="code")
            gb.add_source_cell(part, NOTEBOOK, ASSIGNMENT, cell_type="code", locked=True)
    (tmp_path / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.course_id = {COURSE!r}\n"
        f"c.CourseDirectory.db_url = {db!r}\n"
    )
    return tmp_path, db


SPEC = AssignmentSpec(
    ASSIGNMENT,
    COURSE,
    [
        NotebookSpec(
            NOTEBOOK,
            [
                CellSpec(p, "code", True, "", "", None, True, False, False, points)
                for p, points in PARTS.items()
            ],
            [],
        )
    ],
)


def _save(db: str, student: str, status: Status, digest: str, scores=(2.0, 3.0)) -> None:
    writer = gradebook.GradebookWriter(db, COURSE)
    try:
        writer.mark_pending(ASSIGNMENT, student, "run", None, True)
        result = SubmissionResult(student, ASSIGNMENT, "run", sum(PARTS.values()), status)
        result.submitted, result.digest = True, digest
        parts = {p: PartResult(s, "passed") for p, s in zip(PARTS, scores)}
        result.notebooks = {NOTEBOOK: NotebookResult(status, parts)}
        writer.save_result(ASSIGNMENT, student, result)
    finally:
        writer.close()


def _exports(db: str, tmp_path: Path) -> tuple[dict, dict, dict]:
    """(CSV rows, Canvas rows, Moodle rows) by student, as `--report-only` writes them."""
    rows = gradebook.read_results(db, COURSE, ASSIGNMENT)
    report.write_csv(str(tmp_path / "grades.csv"), SPEC, rows)
    with open(tmp_path / "grades.csv", newline="") as f:
        table = {r["student_id"]: r for r in csv.DictReader(f)}
    grade_rows = [lms.grade_row(r) for r in table.values()]
    lms.write_canvas_csv(grade_rows, tmp_path / "canvas.csv")
    lms.write_moodle_csv(grade_rows, tmp_path / "moodle.csv", hold=())  # even with no hold
    with open(tmp_path / "canvas.csv", newline="") as f:
        canvas = {r["SIS Login ID"]: r for r in csv.DictReader(f) if r["SIS Login ID"]}
    with open(tmp_path / "moodle.csv", newline="") as f:
        moodle = {r["Username"]: r for r in csv.DictReader(f)}
    return table, canvas, moodle


@pytest.mark.parametrize("status", [Status.NEEDS_REVIEW, Status.TAMPERED])
def test_held_points_reach_no_export_until_approved(course, status: Status) -> None:
    tmp_path, db = course
    _save(db, "held", status, "a" * 64)
    _save(db, "honest", Status.GRADED, "b" * 64, scores=(2.0, 0.0))
    table, canvas, moodle = _exports(db, tmp_path)
    # kept in the gradebook (an approval can release them) ...
    kept = {g.student_id: g.parts for g in gradebook.read_results(db, COURSE, ASSIGNMENT)}
    assert sorted(v for v in kept["held"].values()) == [2.0, 3.0]
    # ... withheld from every export
    held = table["held"]
    assert held["review"] == AWAITING_REVIEW
    assert (held["score"], held["final_score"] if "final_score" in held else "") == ("", "")
    assert all(held[p] == "" for p in PARTS)
    assert "held" not in canvas and "held" not in moodle
    assert (table["honest"]["score"], canvas["honest"][ASSIGNMENT]) == ("2", "2")


def test_approval_releases_exactly_the_decided_parts_for_the_same_bytes(course) -> None:
    tmp_path, db = course
    _save(db, "s", Status.NEEDS_REVIEW, "a" * 64)
    part = Decision(NOTEBOOK, "softmax_tests", approved=True, digest="")
    gradebook.record_decision(db, COURSE, ASSIGNMENT, "s", part)
    table, canvas, _ = _exports(db, tmp_path)
    row = table["s"]  # one part decided: that part shown, the total still withheld
    assert (row["softmax_tests"], row["scale_tests"], row["score"]) == ("3", "", "")
    assert "s" not in canvas
    reject = Decision(NOTEBOOK, "scale_tests", approved=False, digest="")
    gradebook.record_decision(db, COURSE, ASSIGNMENT, "s", reject)
    table, canvas, moodle = _exports(db, tmp_path)
    assert (table["s"]["review"], table["s"]["score"]) == ("approved in part", "3")
    assert canvas["s"][ASSIGNMENT] == "3" and moodle["s"][ASSIGNMENT] == "3"
    # a re-grade of the same bytes keeps the decisions; other bytes void them
    _save(db, "s", Status.NEEDS_REVIEW, "a" * 64)
    assert _exports(db, tmp_path)[0]["s"]["score"] == "3"
    _save(db, "s", Status.NEEDS_REVIEW, "c" * 64)
    table, canvas, _ = _exports(db, tmp_path)
    assert (table["s"]["review"], table["s"]["score"]) == (AWAITING_REVIEW, "")
    assert "s" not in canvas


def test_the_commands_record_decisions_and_refuse_what_they_cannot(course, capsys) -> None:
    tmp_path, db = course
    _save(db, "held", Status.NEEDS_REVIEW, "a" * 64)
    _save(db, "fine", Status.GRADED, "b" * 64)
    base = ["--course", str(tmp_path)]
    assert cli.main(["approve", ASSIGNMENT, "fine", *base]) == 2
    assert "no points are withheld" in capsys.readouterr().err
    assert cli.main(["approve", ASSIGNMENT, "held", "--part", "nope", *base]) == 2
    assert "no part 'nope'" in capsys.readouterr().err
    assert cli.main(["reject", ASSIGNMENT, "held", "--part", "scale_tests", *base]) == 0
    assert cli.main(["approve", ASSIGNMENT, "held", "--reason", "read it", *base]) == 0
    assert "score: 3 / 5" in capsys.readouterr().out  # the part's rejection outranks the whole
    (grade,) = [g for g in gradebook.read_results(db, COURSE, ASSIGNMENT) if g.student_id == "held"]
    assert {(d.grade_id, d.approved, d.reason) for d in grade.decisions} == {
        ("scale_tests", False, ""),
        ("", True, "read it"),
    }


def test_the_class_report_lists_the_submissions_awaiting_review(course) -> None:
    from bertcourse.grade import classreport

    tmp_path, db = course
    _save(db, "held", Status.NEEDS_REVIEW, "a" * 64)
    _save(db, "decided", Status.TAMPERED, "b" * 64)
    _save(db, "fine", Status.GRADED, "c" * 64)
    gradebook.record_decision(db, COURSE, ASSIGNMENT, "decided", Decision("", "", False, ""))
    assert classreport.awaiting_review(db, COURSE, ASSIGNMENT) == ["held"]
    page = classreport.render_html(classreport.build(db, COURSE, [ASSIGNMENT]))
    assert "Awaiting review" in page and "held" in page.split("Awaiting review")[1][:600]


def test_the_digest_is_of_the_bytes(tmp_path: Path) -> None:
    (tmp_path / "toy.ipynb").write_bytes(b"{}")
    first = gradebook.submission_digest(str(tmp_path), ["toy"])
    assert gradebook.submission_digest(str(tmp_path), ["toy"]) == first
    (tmp_path / "toy.ipynb").write_bytes(b"{} ")
    assert gradebook.submission_digest(str(tmp_path), ["toy"]) != first
    (tmp_path / "toy.ipynb").unlink()
    (tmp_path / "toy.ipynb").symlink_to(tmp_path / "elsewhere.ipynb")
    assert gradebook.submission_digest(str(tmp_path), ["toy"]) != first  # never followed
