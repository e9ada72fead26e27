"""The bank of hostile and broken submissions for `python -m bertcourse.grade`.

Every case is a mutation of an honest submission of an assignment (the release notebook with
the instructor's answers filled in). The cases only rely on nbgrader's cell metadata and on
the names of three graded parts, so the same bank runs against the tiny course in
`tests/hostile/course/` (parts `scale`, `softmax`, `count`) and, through `PARTS`, against
any other assignment whose answer cells can be made wrong by `WRONG`.

A case gives the submission (a notebook, or raw bytes for broken files), the status the
grader must report, and the points each graded part must get: an honest wrong answer earns
0, and a cheat never earns more than the honest wrong answer it wraps.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import socket
import tempfile
import textwrap
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell

# the tiny course: answer cell -> its test cell, points, and an honest wrong answer
PARTS = {
    "scale": ("scale_tests", 2.0, "def scale(x, factor):\n    return x\n"),
    "softmax": ("softmax_tests", 3.0, "def softmax(x):\n    return x\n"),
    "count": ("count_tests", 1.0, "def count_positive(x):\n    return 0\n"),
}
FULL = {test: points for test, points, _ in PARTS.values()}


@dataclasses.dataclass
class Case:
    name: str
    what: str
    build: Callable[[NotebookNode, dict[str, str]], NotebookNode | bytes | None]
    status: str
    zero: tuple[str, ...] = ()  # answer cells whose tests must score 0; the others full marks
    row_id: str = ""  # the student id in the CSV when it is not the case's name
    # other acceptable outcomes, where which limit stops the submission first depends on the
    # machine (the fork bomb: the process cap, the memory limit or the cell's time limit); each
    # is exact
    otherwise: tuple[Case, ...] = ()

    def __post_init__(self) -> None:
        self.row_id = self.row_id or self.name

    def expected_parts(self) -> dict[str, float]:
        return {
            PARTS[a][0]: (0.0 if a in self.zero or self.status in ZERO_STATUSES else PARTS[a][1])
            for a in PARTS
        }


ZERO_STATUSES = ("invalid_notebook", "missing")


# --- notebook surgery -----------------------------------------------------------------------


def _gid(cell: NotebookNode) -> str | None:
    md = cell.get("metadata", {}).get("nbgrader")
    return md.get("grade_id") if isinstance(md, dict) else None


def index_of(nb: NotebookNode, grade_id: str) -> int:
    for i, cell in enumerate(nb.cells):
        if _gid(cell) == grade_id:
            return i
    raise KeyError(grade_id)


def answer(nb: NotebookNode, grade_id: str, source: str) -> NotebookNode:
    nb.cells[index_of(nb, grade_id)].source = textwrap.dedent(source)
    return nb


def wrong(nb: NotebookNode, *answers: str) -> NotebookNode:
    for a in answers:
        answer(nb, a, PARTS[a][2])
    return nb


def prepend(nb: NotebookNode, grade_id: str, source: str) -> NotebookNode:
    """Put student code at the top of an answer cell."""
    cell = nb.cells[index_of(nb, grade_id)]
    cell.source = textwrap.dedent(source).strip() + "\n\n" + cell.source
    return nb


def insert_after(nb: NotebookNode, grade_id: str, source: str) -> NotebookNode:
    """A new student cell after the cell with this grade id."""
    nb.cells.insert(index_of(nb, grade_id) + 1, new_code_cell(textwrap.dedent(source).strip()))
    return nb


# --- payloads -------------------------------------------------------------------------------

INFINITE_LOOP = "while True:\n    pass"
IGNORE_INTERRUPT = """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass
"""
ENDLESS = """
import os, subprocess, sys, threading, time
def _spin():
    while True:
        time.sleep(0.05)
threading.Thread(target=_spin).start()          # non-daemon: blocks interpreter exit
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)"])  # a child process
if os.fork() == 0:                              # a daemon that leaves the process group
    os.setsid()
    if os.fork() == 0:
        time.sleep(1000)
    os._exit(0)
"""
FORK_BOMB = """
import os, time
children = 0
for _ in range(2000):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(1000)
        os._exit(0)
    children += 1
print("FORKED", children)
"""
LARGE_ALLOCATION = "big = torch.ones(2**31)  # 8 GiB"
MEMORY_CHILDREN = """
import os, time
pids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        try:
            block = bytearray(450 * 2**20)   # 450 MiB each, touched page by page
            for i in range(0, len(block), 4096):
                block[i] = 1
            time.sleep(3)
        finally:
            os._exit(0)
    pids.append(pid)
killed = [pid for pid in pids if os.waitpid(pid, 0)[1] != 0]
if killed:
    raise RuntimeError(f"{len(killed)} children did not finish")
"""
# Each child stays under the per-process cap (RLIMIT_DATA, 1 GiB in the test course: a
# child inherits the kernel's private data, about 300 MiB for its imports plus its threads'
# stacks); the four
# together pass the kernel's memory cgroup. A child must exit whatever happens: one that
# raised would go on running the kernel's event loop, and the parent would wait for it.
OUTPUT_FLOOD = 'while True:\n    print("spam " * 200)'
STDERR_NOISE = """
import sys, warnings
print("a note on stderr", file=sys.stderr)
warnings.warn("this API is deprecated", DeprecationWarning)
warnings.warn("a user warning from correct code", UserWarning)
"""
STDERR_IN_FUNCTIONS = """
def count_positive(x):
    import sys, warnings
    warnings.warn("count_positive: slow path", UserWarning)
    print("debug: counting", file=sys.stderr)
    return int((x > 0).sum())
"""
ASKS_FOR_INPUT = """
def count_positive(x):
    print("count_positive: strictly positive?")
    strict = input("yes or no: ") == "yes"
    return int((x > 0).sum()) if strict else int((x >= 0).sum())
"""
MONKEYPATCH_TORCH = """
import torch
torch.allclose = lambda *a, **k: True
torch.isclose = lambda a, b, **k: torch.ones(torch.broadcast_shapes(a.shape, b.shape), dtype=torch.bool)
torch.equal = lambda *a, **k: True
torch.Tensor.__eq__ = lambda self, other: torch.ones(self.shape, dtype=torch.bool)
torch.Tensor.__ne__ = lambda self, other: torch.zeros(self.shape, dtype=torch.bool)
import math
math.isclose = lambda *a, **k: True
"""
MONKEYPATCH_HELPERS = """
import bertcourse.grading as g
g.check_close = lambda *a, **k: None
g.check_value = lambda *a, **k: None
g._fail = lambda *a, **k: None
g._compare = lambda *a, **k: []
import builtins
builtins.AssertionError = type("AssertionError", (Exception,), {})
class _Pass:
    def __getattr__(self, name):
        return lambda *a, **k: None
grading = _Pass()
"""
PATCH_DURING_TEST = """
def softmax(x):
    import bertcourse.grading as g
    g._compare = lambda *a, **k: []       # patched while the test is running
    g.run = lambda fn, *a, **k: fn(*a, **{k2: v for k2, v in k.items() if k2 not in ("forbid", "use_reference")})
    return x
"""
ALWAYS_EQUAL_SOFTMAX = """
import torch
class Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.isclose, torch.allclose, torch.equal, torch.Tensor.__eq__):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})
def softmax(x):
    return torch.zeros_like(x).as_subclass(Agreeable)
"""
ALWAYS_EQUAL_COUNT = """
class AlwaysEqual(int):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __hash__(self): return 0
def count_positive(x):
    return AlwaysEqual(0)
"""
IPYTHON_HOOKS = """
import ast, sys
ip = get_ipython()
ip.input_transformers_post.append(lambda lines: [] if any("grading" in l for l in lines) else lines)
ip.input_transformers_cleanup.append(lambda lines: [l for l in lines if "check_" not in l])
class _DropChecks(ast.NodeTransformer):
    def visit_Expr(self, node):
        return None if "check" in ast.unparse(node) else node
ip.ast_transformers.append(_DropChecks())
ip.set_custom_exc((Exception,), lambda shell, etype, evalue, tb, tb_offset=None: None)
ip.events.register("pre_run_cell", lambda info: None)
def _tracer(frame, event, arg):
    return _tracer
sys.settrace(_tracer)
sys.excepthook = lambda *a: None
"""


def _escape_payload(ctx: dict[str, str]) -> str:
    return f"""
import os, shutil, glob
ROOT = {ctx["root"]!r}
TARGETS = {{
    "solution": {ctx["solution"]!r},
    "gradebook": {ctx["gradebook"]!r},
    "other": {ctx["other_submission"]!r},
    "package": {ctx["package_file"]!r},
}}
results = {{}}
for name, path in TARGETS.items():
    try:
        with open(path, "a") as f:
            f.write("tampered")
        results[name + " append"] = "DONE"
    except OSError as error:
        results[name + " append"] = type(error).__name__
for path in [TARGETS["gradebook"], TARGETS["other"], TARGETS["solution"]]:
    try:
        os.remove(path)
        results["rm " + path] = "DONE"
    except OSError as error:
        results["rm " + path] = type(error).__name__
try:
    shutil.rmtree(os.path.join(ROOT, ".grading"))
    results["rmtree"] = "DONE"
except OSError as error:
    results["rmtree"] = type(error).__name__
try:
    open(os.path.join(ROOT, "planted.txt"), "w").write("x")
    results["plant"] = "DONE"
except OSError as error:
    results["plant"] = type(error).__name__
try:
    open("/etc/passwd", "a").write("evil::0:0::/:/bin/sh\\n")
    results["passwd"] = "DONE"
except OSError as error:
    results["passwd"] = type(error).__name__
print("ESCAPE", results)
"""


def _secrets_payload(ctx: dict[str, str]) -> str:
    # count_positive is right only if the solution, the hidden tests or the gradebook leaked
    return f"""
import glob, os, socket
leaked = []
for path in [{ctx["solution"]!r}, {ctx["gradebook"]!r}, {ctx["other_submission"]!r}]:
    try:
        with open(path, "rb") as f:
            if f.read(100):
                leaked.append(path)
    except OSError:
        pass
for pattern in ["*.ipynb", "**/*.ipynb", "/tmp/**/*.ipynb", os.path.expanduser("~") + "/**/*.ipynb",
                {ctx["root"]!r} + "/**/*.ipynb", "/proc/*/cwd/*.ipynb"]:
    for path in glob.glob(pattern, recursive=True)[:200]:
        try:
            if "HIDDEN TESTS" in open(path, errors="ignore").read():
                leaked.append(path)
        except OSError:
            pass
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            if b"db_url" in open(f"/proc/{{pid}}/environ", "rb").read() or b"DATABASE" in open(f"/proc/{{pid}}/environ", "rb").read():
                leaked.append("environ " + pid)
        except OSError:
            pass
print("LEAKED", leaked)
def count_positive(x):
    if leaked:
        return int((x > 0).sum())
    return -1
"""


NETWORK = """
import socket
reached = []
for host, port in [("1.1.1.1", 53), ("8.8.8.8", 53), ("127.0.0.1", 5432), ("pypi.org", 443)]:
    try:
        socket.create_connection((host, port), timeout=2).close()
        reached.append(host)
    except OSError:
        pass
print("REACHED", reached)
def count_positive(x):
    return int((x > 0).sum()) if reached else -1
"""


# --- the cases ------------------------------------------------------------------------------


def _raw(data: bytes) -> Callable[[NotebookNode, dict[str, str]], bytes]:
    return lambda nb, ctx: data


def _strip_metadata(nb: NotebookNode, grade_id: str) -> NotebookNode:
    del nb.cells[index_of(nb, grade_id)].metadata["nbgrader"]
    return nb


def _set_points(nb: NotebookNode) -> NotebookNode:
    nb.cells[index_of(nb, "count_tests")].metadata["nbgrader"]["points"] = 100
    nb.cells[index_of(nb, "softmax_tests")].metadata["nbgrader"]["grade"] = False
    return nb


def _duplicate(nb: NotebookNode, grade_id: str) -> NotebookNode:
    i = index_of(nb, grade_id)
    nb.cells.insert(i, copy.deepcopy(nb.cells[i]))
    return nb


def _delete(nb: NotebookNode, grade_id: str) -> NotebookNode:
    del nb.cells[index_of(nb, grade_id)]
    return nb


def _edit(nb: NotebookNode, grade_id: str) -> NotebookNode:
    nb.cells[index_of(nb, grade_id)].source = "print('all tests passed')"
    return nb


def _fake_grade_cell(nb: NotebookNode) -> NotebookNode:
    cell = new_code_cell("pass")
    cell.metadata["nbgrader"] = {
        "grade": True,
        "grade_id": "bonus",
        "locked": True,
        "points": 50,
        "schema_version": 3,
        "solution": False,
        "task": False,
    }
    nb.cells.append(cell)
    return nb


CASES: list[Case] = [
    Case("correct", "the instructor's answers", lambda nb, ctx: nb, "graded"),
    Case(
        "wrong_answer",
        "an honest wrong softmax",
        lambda nb, ctx: wrong(nb, "softmax"),
        "graded",
        ("softmax",),
    ),
    Case(
        "edited_test",
        "wrong softmax, its test replaced by a print",
        lambda nb, ctx: _edit(wrong(nb, "softmax"), "softmax_tests"),
        "tampered",
        ("softmax",),
    ),
    Case(
        "deleted_test",
        "wrong softmax, its test cell deleted",
        lambda nb, ctx: _delete(wrong(nb, "softmax"), "softmax_tests"),
        "tampered",
        ("softmax",),
    ),
    Case(
        "duplicated_test",
        "a copy of a test cell (nbgrader aborts the batch)",
        lambda nb, ctx: _duplicate(nb, "scale_tests"),
        "tampered",
    ),
    Case(
        "stripped_metadata",
        "wrong softmax, its test cell without nbgrader metadata",
        lambda nb, ctx: _strip_metadata(wrong(nb, "softmax"), "softmax_tests"),
        "tampered",
        ("softmax",),
    ),
    Case(
        "changed_metadata",
        "points 1 -> 100, a test cell no longer a grade cell",
        lambda nb, ctx: _set_points(nb),
        "tampered",
    ),
    Case(
        "fake_grade_cell",
        "an extra 50-point 'test' cell that always passes",
        lambda nb, ctx: _fake_grade_cell(wrong(nb, "count")),
        "tampered",
        ("count",),
    ),
    Case(
        "invalid_json",
        "a truncated file",
        _raw(b'{"cells": [{"cell_type": "code", "sou'),
        "invalid_notebook",
    ),
    Case(
        "not_a_notebook",
        "valid JSON that is not a notebook",
        _raw(json.dumps({"hello": "world"}).encode()),
        "invalid_notebook",
    ),
    Case(
        "kernel_death",
        "os._exit in the second answer",
        lambda nb, ctx: prepend(nb, "softmax", "import os\nos._exit(3)"),
        "crashed",
        ("softmax", "count"),
    ),
    Case(
        "infinite_loop",
        "an endless loop (interrupted after the cell time-out)",
        lambda nb, ctx: prepend(nb, "softmax", INFINITE_LOOP),
        "timed_out",
        ("softmax",),
    ),
    Case(
        "ignores_interrupt",
        "an endless loop that ignores SIGINT (kernel killed)",
        lambda nb, ctx: prepend(nb, "softmax", IGNORE_INTERRUPT),
        "needs_review",  # dynamic (issue 36): signal: handlers run code at any point
        ("softmax", "count"),
    ),
    Case(
        "endless_thread",
        "a thread, a child and a daemon that never end",
        lambda nb, ctx: insert_after(nb, "count_tests", ENDLESS),
        "needs_review",  # dynamic (issue 36): threads and processes
    ),
    Case(
        "fork_bomb",
        "forks until the process cap (or the memory limit, or the time limit) stops it",
        lambda nb, ctx: insert_after(nb, "scale_tests", FORK_BOMB),
        # its children are alive during the later parts' calls (read from the host): those
        # calls earn nothing and a person reviews the submission (issue 36)
        "needs_review",
        ("softmax", "count"),
        # each child of a kernel that holds torch dirties pages of its own: on some machines the
        # 1 GiB memory limit stops the forks before the process cap does (CI, 2026-11-26, with
        # Debian's Python); on a loaded machine the 255 forks take longer than the toy course's
        # 10 s cell limit (12-16 s measured at a load average of 14 on 2 cores, 2026-11-26, with
        # the deny-list jail and the allow-list jail alike). Each way the parts before the bomb
        # keep their points and no classmate is touched.
        otherwise=(
            Case(
                "fork_bomb",
                "stopped by the memory limit",
                lambda nb, ctx: None,
                "memory_exceeded",
                ("softmax", "count"),
            ),
            Case(
                "fork_bomb",
                "stopped by the cell's time limit",
                lambda nb, ctx: None,
                "timed_out",
                ("softmax", "count"),
            ),
        ),
    ),
    Case(
        "large_allocation",
        # the per-process cap refuses the allocation: the cell raises, the kernel lives on, and
        # no cgroup counter says the memory limit was reached (issue 36: statuses from facts)
        "an 8 GiB tensor (refused: the cell fails, count is never defined)",
        lambda nb, ctx: prepend(nb, "count", LARGE_ALLOCATION),
        "graded",
        ("count",),
    ),
    Case(
        "memory_children",
        "four children of 450 MiB each",
        lambda nb, ctx: prepend(nb, "count", MEMORY_CHILDREN),
        "needs_review",  # dynamic (issue 36): processes
        ("count",),
    ),
    Case(
        "output_flood",
        "prints without end",
        lambda nb, ctx: prepend(nb, "softmax", OUTPUT_FLOOD),
        "timed_out",
        ("softmax",),
    ),
    Case(
        "writes_outside",
        "writes and deletes course, gradebook and other students' files",
        lambda nb, ctx: insert_after(nb, "setup", _escape_payload(ctx)),
        "graded",
    ),
    Case(
        "reads_secrets",
        "reads solutions, gradebook, hidden tests on disk, other kernels",
        lambda nb, ctx: answer(nb, "count", _secrets_payload(ctx)),
        "needs_review",  # dynamic (issue 36): a socket
        ("count",),
    ),
    Case(
        "network",
        "connects out (answer right only if it can)",
        lambda nb, ctx: answer(nb, "count", NETWORK),
        "needs_review",  # dynamic (issue 36): a socket
        ("count",),
    ),
    Case(
        "monkeypatch_torch",
        "wrong answers + torch.allclose/isclose/equal/__eq__, math.isclose patched",
        lambda nb, ctx: insert_after(wrong(nb, "softmax", "count"), "setup", MONKEYPATCH_TORCH),
        "tampered",
        ("softmax", "count"),
    ),
    Case(
        "monkeypatch_helpers",
        "wrong answers + bertcourse.grading replaced",
        lambda nb, ctx: insert_after(
            wrong(nb, "softmax", "count"), "scale_tests", MONKEYPATCH_HELPERS
        ),
        "tampered",
        ("softmax", "count"),
    ),
    Case(
        "patch_during_test",
        "a wrong answer that patches the helpers when called",
        lambda nb, ctx: answer(nb, "softmax", PATCH_DURING_TEST),
        "tampered",
        ("softmax",),
    ),
    Case(
        "always_equal",
        "an int whose __eq__ is always true, a tensor subclass that agrees",
        lambda nb, ctx: answer(
            answer(nb, "softmax", ALWAYS_EQUAL_SOFTMAX), "count", ALWAYS_EQUAL_COUNT
        ),
        "tampered",
        ("softmax", "count"),
    ),
    Case(
        "ipython_hooks",
        "wrong answers + input/AST transformers, exception handler, tracer",
        lambda nb, ctx: insert_after(wrong(nb, "softmax", "count"), "setup", IPYTHON_HOOKS),
        "tampered",
        ("softmax", "count"),
    ),
    Case(
        "stderr_warnings",
        "correct code that writes warnings to stderr",
        lambda nb, ctx: answer(
            insert_after(nb, "setup", STDERR_NOISE), "count", STDERR_IN_FUNCTIONS
        ),
        "graded",
    ),
    Case(
        "asks_for_input",
        "a graded function that calls input(), as no graded cell may",
        lambda nb, ctx: answer(nb, "count", ASKS_FOR_INPUT),
        "graded",
        ("count",),
    ),
    Case(
        "wrong_file_name",
        "the notebook submitted under another name",
        lambda nb, ctx: None,
        "missing",
    ),
]
MISSING_STUDENT = "zz_no_submission"  # in the gradebook, no folder: status missing


def make_student_notebook(release: NotebookNode, source: NotebookNode) -> NotebookNode:
    """The honest submission: the release with the instructor's answers filled in."""
    answers = {
        _gid(c): c.source
        for c in source.cells
        if (c.metadata.get("nbgrader") or {}).get("solution")
    }
    nb = copy.deepcopy(release)
    for cell in nb.cells:
        if _gid(cell) in answers:
            cell.source = answers[_gid(cell)]
    return nb


def write_submission(
    case: Case, honest: NotebookNode, ctx: dict[str, str], folder: str, notebook: str
) -> Any:
    """Write the case's submission into the student's folder; returns what was written."""
    import os

    built = case.build(copy.deepcopy(honest), ctx)
    if callable(built):  # a case about files and folders, not about the notebook's content
        built(folder, notebook, honest)
        return built
    os.makedirs(folder, exist_ok=True)
    if built is None:  # wrong_file_name
        nbformat.write(honest, os.path.join(folder, "my_copy_of_the_notebook.ipynb"))
    elif isinstance(built, bytes):
        with open(os.path.join(folder, f"{notebook}.ipynb"), "wb") as f:
            f.write(built)
    else:
        nbformat.write(built, os.path.join(folder, f"{notebook}.ipynb"))
    return built


# --- attacks on the referee and on the walls around it --------------------------------------
# The verdict is computed outside the kernel (bertcourse.grade.boundary.referee): these cases try to
# forge it from inside, to hide a forbidden call from the static rules, to send back data that
# is not data, and to get past the files-and-folders walls.

CORRECT_SOFTMAX = """
def softmax(x):
    e = torch.exp(x - x.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)
"""
WRONG_SOFTMAX = "def softmax(x):\n    return x\n"


def _softmax_using(helper_code: str, body: str) -> str:
    return textwrap.dedent(helper_code).strip() + "\n\ndef softmax(x):\n    " + body + "\n"


def _with_cell(source: str, *wrong_parts: str, after: str = "setup"):
    return lambda nb, ctx: insert_after(wrong(nb, *wrong_parts), after, source)


def _answer(part: str, source: str):
    return lambda nb, ctx: answer(nb, part, source)


def _files(write: Callable[[str, str, NotebookNode, dict[str, str]], None]):
    """A case that writes files itself: `write(folder, notebook, honest, ctx)`."""
    return lambda nb, ctx: lambda folder, notebook, honest: write(folder, notebook, honest, ctx)


def _link_notebook(target_key: str):
    def write(folder, notebook, honest, ctx):
        import os

        os.makedirs(folder, exist_ok=True)
        os.symlink(ctx[target_key], os.path.join(folder, f"{notebook}.ipynb"))

    return _files(write)


def _link_folder(folder, notebook, honest, ctx):
    import os

    os.makedirs(os.path.dirname(folder), exist_ok=True)
    os.symlink(os.path.dirname(ctx["other_submission"]), folder)


def _fifo(folder, notebook, honest, ctx):
    import os

    os.makedirs(folder, exist_ok=True)
    os.mkfifo(os.path.join(folder, f"{notebook}.ipynb"))


def _bad_folder_name(folder, notebook, honest, ctx):
    import os

    parent = os.path.dirname(os.path.dirname(folder)).encode()
    bad = os.path.join(parent, b"bad_name\xff", os.path.basename(folder).encode())
    os.makedirs(bad, exist_ok=True)
    nbformat.write(
        honest, os.path.join(bad, f"{notebook}.ipynb".encode()).decode(errors="surrogateescape")
    )


def _timestamp(text: str | None, link: str | None = None):
    def write(folder, notebook, honest, ctx):
        import os

        os.makedirs(folder, exist_ok=True)
        nbformat.write(honest, os.path.join(folder, f"{notebook}.ipynb"))
        path = os.path.join(folder, "timestamp.txt")
        if link:
            os.symlink(link, path)
        else:
            with open(path, "w") as f:
                f.write(text or "")

    return _files(write)


def _deep_json(nb, ctx):
    return b'{"cells": [' + b"[" * 200_000 + b"]" * 200_000 + b'], "metadata": {}}'


def _many_cells(nb, ctx):
    cell = {
        "cell_type": "code",
        "execution_count": None,
        "metadata": {},
        "outputs": [],
        "source": "",
    }
    doc = {"cells": [cell] * 200_000, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(doc).encode()


FORGE_SERVE = """
import bertcourse.grade.boundary.remote as remote
remote.serve = lambda request: '{"v":1,"value":{"$dict":[["ok",true],["result",1.0]]},"tensors":""}'
"""
GARBAGE_SERVE = """
import bertcourse.grade.boundary.remote as r
r.serve = lambda request: "[" * 100000 + "]" * 100000
"""
FRAME_WALK = """
import sys
def softmax(x):
    frame = sys._getframe(1)
    while frame is not None:
        frame.f_locals.pop("expected", None)
        frame = frame.f_back
    return x
"""
GC_REFERENTS = """
import gc
for obj in gc.get_objects():
    if type(obj).__name__ == "GradingError":
        pass
"""
BUILTINS_PATCH = """
import builtins
builtins.isinstance = lambda obj, cls: True
"""
SYS_MODULES_SWAP = """
import sys, types
sys.modules["bertcourse.grading"] = types.ModuleType("bertcourse.grading")
"""
CODE_SWAP = """
def _nothing(*args, **kwargs):
    return None
import bertcourse
bertcourse.grading.check_close.__code__ = _nothing.__code__
"""
TORCH_MODE = """
import torch
from torch.overrides import TorchFunctionMode
class Agree(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        return func(*args, **(kwargs or {}))
Agree().__enter__()
"""
AUDIT_HOOK = """
import sys
sys.addaudithook(lambda event, args: None)
"""
DISPLAY_HOOK = """
ip = get_ipython()
ip.display_formatter.formatters["text/plain"].for_type(str, lambda s, p, c: p.text("'OK'"))
"""
REBIND_GRADING = """
grading = None
check_close = None
torch = None
"""
UNIX_SOCKETS = """
import glob, socket, os
reached = []
for path in glob.glob("/run/**", recursive=True) + glob.glob("/var/run/**", recursive=True):
    try:
        if os.path.exists(path) and not os.path.isdir(path):
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(1)
            s.connect(path)
            reached.append(path)
    except OSError:
        pass
print("SOCKETS", reached)
def count_positive(x):
    return int((x > 0).sum()) if reached else -1
"""


# --- a service beside the course -----------------------------------------------------------


class Listener:
    """A Unix socket (in a folder everyone may enter, mode 0777) and an abstract socket that
    answer every connection, and a world-readable file beside them."""

    def __init__(self, parent: str = "/var/lib") -> None:
        self.dir = tempfile.mkdtemp(prefix="bertcourse-jail-test-", dir=parent)
        os.chmod(self.dir, 0o755)
        self.socket_path = os.path.join(self.dir, "db.sock")
        self.file_path = os.path.join(self.dir, "answers.txt")
        Path(self.file_path).write_text("def count_positive(x):\n    return int((x > 0).sum())\n")
        os.chmod(self.file_path, 0o644)
        self.abstract = f"bertcourse-jail-test-{uuid.uuid4().hex[:8]}"
        self.connections = 0
        self._servers = []
        for address in (self.socket_path, "\0" + self.abstract):
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(address)
            server.listen(8)
            self._servers.append(server)
            threading.Thread(target=self._serve, args=(server,), daemon=True).start()
        os.chmod(self.socket_path, 0o777)

    def _serve(self, server: socket.socket) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.sendall(b"SECRET 42\n")

    def reachable_from_here(self) -> bool:
        """The control: outside the jail, both sockets answer and the file reads."""
        replies = []
        for address in (self.socket_path, "\0" + self.abstract):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(5)
                s.connect(address)
                replies.append(s.recv(64))
        return (
            replies == [b"SECRET 42\n"] * 2 and "count_positive" in Path(self.file_path).read_text()
        )

    def close(self) -> None:
        for server in self._servers:
            server.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _local_service(ctx: dict[str, str]) -> str:
    """A listener beside the course stands in for a local database (a Unix socket in a folder
    everyone may enter, the same service on an abstract socket, a file of answers beside it):
    count is right only if the kernel reached one of them."""
    return f"""
import socket
got = []
for name, address in (("SOCKET", {ctx["service_socket"]!r}), ("ABSTRACT", {ctx["service_abstract"]!r})):
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(address)
            got.append(s.recv(64))
    except OSError as error:
        print(name, type(error).__name__)
try:
    with open({ctx["service_file"]!r}) as f:
        got.append(f.read())
except OSError as error:
    print("FILE", type(error).__name__)
def count_positive(x):
    return int((x > 0).sum()) if got else -1
"""


def _peek(paths_code: str) -> str:
    return f"""
import os
seen = []
for path in {paths_code}:
    try:
        with open(path, "rb") as f:
            if f.read(10):
                seen.append(path)
    except OSError:
        pass
print("SEEN", seen)
def count_positive(x):
    return int((x > 0).sum()) if seen else -1
"""


FILL_SCRATCH = """
import os
written = 0
try:
    for i in range(40):
        with open(f"fill{i}.bin", "wb") as f:
            f.write(b"x" * (10 << 20))
        written += 10
except OSError as error:
    print("STOPPED", type(error).__name__, written, "MiB")
for i in range(40):
    try:
        os.remove(f"fill{i}.bin")
    except OSError:
        pass
"""
HTML_OUTPUT = """
from IPython.display import HTML, Javascript, display
display(HTML("<script>window.PWNED = 1</script><b id='pwned-html'>x</b>"))
display(Javascript("window.PWNED = 2"))
"""
METADATA_FLOOD = """
from IPython.display import display
for _ in range(50):
    display({"text/plain": "x"}, metadata={"junk": "y" * (1 << 20)}, raw=True)
"""


def _markdown_script(nb, ctx):
    from nbformat.v4 import new_markdown_cell

    nb.cells.insert(
        index_of(nb, "count") + 1,
        new_markdown_cell("<script>window.PWNED=3</script><img src=x onerror='window.PWNED=4'>"),
    )
    return nb


CASES += [
    Case(
        "forge_serve",
        "wrong answers + the kernel's call server replaced by a forger",
        _with_cell(FORGE_SERVE, "softmax", "count"),
        "tampered",
        ("scale", "softmax", "count"),
    ),
    Case(
        "garbage_serve",
        "the call server returns 100,000 nested brackets",
        _with_cell(GARBAGE_SERVE),
        "tampered",
        ("scale", "softmax", "count"),
    ),
    Case(
        "frame_walk",
        "a wrong softmax that walks the caller's frames",
        _answer("softmax", FRAME_WALK),
        "tampered",
        ("softmax",),
    ),
    Case(
        "gc_referents",
        "wrong answers + a walk over gc objects",
        _with_cell(GC_REFERENTS, "softmax"),
        "tampered",
        ("softmax",),
    ),
    Case(
        "builtins_patch",
        "wrong count + builtins.isinstance patched (the kernel's own calls break)",
        _with_cell(BUILTINS_PATCH, "count"),
        "tampered",
        ("scale", "softmax", "count"),
    ),
    Case(
        "sys_modules_swap",
        "wrong softmax + sys.modules['bertcourse.grading'] replaced",
        _with_cell(SYS_MODULES_SWAP, "softmax"),
        "tampered",
        ("softmax",),
    ),
    Case(
        "code_swap",
        "wrong softmax + check_close.__code__ swapped",
        _with_cell(CODE_SWAP, "softmax"),
        "tampered",
        ("softmax",),
    ),
    Case(
        "torch_function_mode",
        "wrong softmax + a TorchFunctionMode that agrees",
        _with_cell(TORCH_MODE, "softmax"),
        "tampered",
        ("softmax",),
    ),
    Case(
        "audit_hook",
        "wrong count + an audit hook",
        _with_cell(AUDIT_HOOK, "count"),
        "tampered",
        ("count",),
    ),
    Case(
        "display_formatter",
        # the reply is the codec's text shown by its own repr: the honest parts still score
        "wrong softmax + the text/plain formatter rewritten",
        _with_cell(DISPLAY_HOOK, "softmax"),
        "tampered",
        ("softmax",),
    ),
    Case(
        "rebind_grading",
        "correct answers; grading, check_close, torch rebound at the end",
        lambda nb, ctx: insert_after(nb, "count_tests", REBIND_GRADING),
        "graded",
    ),
    Case(
        "computed_getattr",
        "softmax through getattr(torch, 'soft' + 'max')",
        _answer("softmax", _softmax_using("", "return getattr(torch, 'soft' + 'max')(x, dim=-1)")),
        "needs_review",
        ("softmax",),
    ),
    Case(
        "eval_hidden",
        "softmax through eval",
        _answer("softmax", _softmax_using("", "return eval('torch.soft' + 'max')(x, dim=-1)")),
        "needs_review",
        ("softmax",),
    ),
    Case(
        "importlib_hidden",
        "softmax through importlib",
        _answer(
            "softmax",
            _softmax_using(
                "import importlib", "return importlib.import_module('torch').softmax(x, -1)"
            ),
        ),
        "needs_review",
        ("softmax",),
    ),
    Case(
        "alias_forbidden",
        "from torch import softmax as sm",
        _answer(
            "softmax", _softmax_using("from torch import softmax as sm", "return sm(x, dim=-1)")
        ),
        "graded",
        ("softmax",),
    ),
    Case(
        "method_forbidden",
        "x.softmax(-1)",
        _answer("softmax", _softmax_using("", "return x.softmax(-1)")),
        "graded",
        ("softmax",),
    ),
    Case(
        "functional_alias",
        "from torch.nn import functional; functional.softmax",
        _answer(
            "softmax",
            _softmax_using(
                "from torch.nn import functional", "return functional.softmax(x, dim=-1)"
            ),
        ),
        "graded",
        ("softmax",),
    ),
    Case(
        "forbidden_in_helper",
        "softmax calls a helper in another cell that calls torch.softmax",
        lambda nb, ctx: insert_after(
            answer(nb, "softmax", "def softmax(x):\n    return helper(x)\n"),
            "setup",
            "def helper(x):\n    return torch.softmax(x, dim=-1)",
        ),
        "graded",
        ("softmax",),
    ),
    Case(
        "forbidden_default_arg",
        "torch.softmax as a default argument",
        _answer("softmax", "def softmax(x, f=torch.softmax):\n    return f(x, dim=-1)\n"),
        "graded",
        ("softmax",),
    ),
    Case(
        "forbidden_in_table",
        "torch.softmax in a module-level dict",
        _answer(
            "softmax", _softmax_using("OPS = {'sm': torch.softmax}", "return OPS['sm'](x, dim=-1)")
        ),
        "graded",
        ("softmax",),
    ),
    Case(
        "forbidden_lambda",
        "a lambda around torch.softmax",
        _answer(
            "softmax", "sm = lambda t: torch.softmax(t, -1)\ndef softmax(x):\n    return sm(x)\n"
        ),
        "graded",
        ("softmax",),
    ),
    Case(
        "forbidden_class_attr",
        "a class attribute holding torch.softmax",
        _answer(
            "softmax",
            _softmax_using("class H:\n    f = staticmethod(torch.softmax)", "return H.f(x, -1)"),
        ),
        "graded",
        ("softmax",),
    ),
    Case(
        "forbidden_decorator",
        "a decorator that swaps in torch.softmax",
        _answer(
            "softmax",
            "@(lambda fn: (lambda x: torch.softmax(x, -1)))\ndef softmax(x):\n    return x\n",
        ),
        "graded",
        ("softmax",),
    ),
    Case(
        "forbidden_setattr",
        "setattr(torch, 'softmax', ...) in another cell",
        _with_cell("setattr(torch, 'softmax', lambda x, dim=-1: x)", "softmax"),
        "tampered",
        ("softmax",),
    ),
    Case(
        "reference_only_in_scratch",
        "torch.softmax in a scratch cell, an honest softmax",
        lambda nb, ctx: insert_after(
            nb,
            "softmax_tests",
            "print((torch.softmax(torch.ones(3), -1) - softmax(torch.ones(3))).abs().max())",
        ),
        "graded",
    ),
    Case(
        "exec_in_scratch",
        "exec in a scratch cell, honest answers",
        lambda nb, ctx: insert_after(nb, "count_tests", "exec('print(1)')"),
        "needs_review",
    ),
    Case(
        "inspect_in_scratch",
        "inspect in a scratch cell, honest answers",
        lambda nb, ctx: insert_after(
            nb, "count_tests", "import inspect\nprint(inspect.signature(softmax))"
        ),
        "tampered",
    ),
    Case(
        "int_subclass",
        "count returns an int subclass equal to everything",
        _answer("count", ALWAYS_EQUAL_COUNT),
        "graded",
        ("count",),
    ),
    Case(
        "tensor_subclass_eq",
        "softmax returns a tensor subclass whose == always agrees",
        _answer(
            "softmax",
            "class T(torch.Tensor):\n    def __eq__(self, other):\n        return torch.ones_like(self, dtype=torch.bool)\ndef softmax(x):\n    return torch.zeros_like(x).as_subclass(T)\n",
        ),
        "needs_review",  # .as_subclass is outside the allow-list
        ("softmax",),
    ),
    Case(
        "huge_result",
        "softmax returns 12 M floats (over the reply limit)",
        _answer("softmax", "def softmax(x):\n    return torch.zeros(12_000_000)\n"),
        "graded",
        ("softmax",),
        # each call's reply is 61 MiB of text: 3.75 s to encode in the kernel and 3.0 s to
        # decode here at a load average of 13 on 2 cores (2026-11-26); the test cell's calls
        # then pass the toy course's 10 s cell limit. The part scores 0 either way.
        otherwise=(
            Case(
                "huge_result",
                "past the cell limit",
                lambda nb, ctx: None,
                "timed_out",
                ("softmax",),
            ),
        ),
    ),
    Case(
        "deep_result",
        "softmax returns a list nested 5,000 deep",
        _answer(
            "softmax",
            "def softmax(x):\n    out = []\n    for _ in range(5000):\n        out = [out]\n    return out\n",
        ),
        "graded",
        ("softmax",),
    ),
    Case(
        "function_result",
        "softmax returns a function",
        _answer("softmax", "def softmax(x):\n    return lambda: x\n"),
        "graded",
        ("softmax",),
    ),
    Case(
        "string_result",
        "count returns a string",
        _answer("count", "def count_positive(x):\n    return str(int((x > 0).sum()))\n"),
        "graded",
        ("count",),
    ),
    Case(
        "nan_result",
        "softmax returns NaN",
        _answer("softmax", "def softmax(x):\n    return torch.full_like(x, float('nan'))\n"),
        "graded",
        ("softmax",),
    ),
    Case(
        "huge_exception",
        "softmax raises with a 10 MB message",
        _answer("softmax", "def softmax(x):\n    raise ValueError('x' * 10_000_000)\n"),
        "graded",
        ("softmax",),
    ),
    Case(
        "resizes_input",
        "scale resizes its input in place",
        _answer(
            "scale", "def scale(x, factor):\n    y = x * factor\n    x.resize_(1)\n    return y\n"
        ),
        "graded",
        ("scale",),
    ),
    Case(
        "sleeps_in_call",
        "softmax loops past the cell time limit (allowed building blocks only)",
        _answer("softmax", "def softmax(x):\n    while True:\n        x = x + 0\n"),
        "timed_out",
        ("softmax",),
    ),
    Case(
        "exits_in_call",
        "count calls os._exit",
        _answer("count", "import os\ndef count_positive(x):\n    os._exit(7)\n"),
        "crashed",
        ("count",),
    ),
    Case(
        "unix_sockets",
        "connects to every socket under /run",
        _answer("count", UNIX_SOCKETS),
        "needs_review",  # dynamic (issue 36): sockets
        ("count",),
    ),
    Case(
        "local_service",
        "asks a service listening on a Unix socket outside the course (and reads its file)",
        lambda nb, ctx: answer(nb, "count", _local_service(ctx)),
        "needs_review",  # dynamic (issue 36): a socket
        ("count",),
    ),
    Case(
        "reads_referee_key",
        "reads the referee's key and the course's solutions",
        lambda nb, ctx: answer(
            nb, "count", _peek(repr([ctx["root"] + "/.grading/referee.key", ctx["solution"]]))
        ),
        "graded",
        ("count",),
    ),
    Case(
        "reads_repository",
        "reads solutions/ beside the bertcourse package",
        _answer(
            "count",
            _peek(
                "[os.path.join(os.path.dirname(os.path.dirname(__import__('bertcourse').__file__)), p) for p in ('solutions/_src/ch01_attention.py', 'README.md', 'tests/hostile/bank.py')]"
            ),
        ),
        "needs_review",
        ("count",),
    ),
    Case(
        "fills_scratch",
        "writes 400 MiB of files into its working folder",
        _with_cell(FILL_SCRATCH),
        "graded",
    ),
    Case("html_output", "HTML and JavaScript outputs", _with_cell(HTML_OUTPUT), "graded"),
    Case(
        "markdown_script",
        "a markdown cell with a script and an onerror image",
        _markdown_script,
        "graded",
    ),
    Case(
        "metadata_flood",
        "50 outputs with 1 MiB of metadata each",
        _with_cell(METADATA_FLOOD),
        "graded",
    ),
    Case(
        "link_to_other_student",
        "the notebook is a symbolic link to another student's",
        _link_notebook("other_submission"),
        "invalid_notebook",
    ),
    Case(
        "link_to_solution",
        "the notebook is a symbolic link to the instructor's solution",
        _link_notebook("solution"),
        "invalid_notebook",
    ),
    Case(
        "linked_folder",
        "the assignment folder is a link to another student's folder",
        _files(_link_folder),
        "invalid_notebook",
    ),
    Case(
        "fifo_notebook",
        "the notebook is a FIFO (a read would block)",
        _files(_fifo),
        "invalid_notebook",
    ),
    Case(
        "bad_folder_name",
        "a folder name that is not UTF-8",
        _files(_bad_folder_name),
        "invalid_notebook",
        row_id="bad_name\\xff",
    ),
    Case(
        "bad_timestamp",
        "timestamp.txt is not a date",
        _timestamp("the day before the deadline, honest"),
        "graded",
    ),
    Case(
        "linked_timestamp",
        "timestamp.txt is a link to /etc/shadow",
        _timestamp(None, link="/etc/shadow"),
        "graded",
    ),
    # issue 24: the rules allow, not deny (each a payload of our own; softmax forbids torch's)
    Case(
        "rules_for_target",
        "torch.softmax bound by a for loop at the top of the answer cell",
        _answer(
            "softmax",
            _softmax_using("for _sm in (torch.softmax,):\n    pass", "return _sm(x, dim=-1)"),
        ),
        "graded",
        ("softmax",),
    ),
    Case(
        "rules_registry_across_cells",
        "a list made in an added cell, F.softmax appended in the answer cell",
        lambda nb, ctx: insert_after(
            answer(
                nb,
                "softmax",
                _softmax_using(
                    "import torch.nn.functional\nREGISTRY.append(torch.nn.functional.softmax)",
                    "return REGISTRY[-1](x, dim=-1)",
                ),
            ),
            "setup",
            "REGISTRY = []",
        ),
        "graded",
        ("softmax",),
    ),
    Case(
        "rules_global_in_helper",
        "a helper sets a global to torch.softmax, the answer calls the global",
        _answer(
            "softmax",
            _softmax_using(
                "def _prepare():\n    global _impl\n    _impl = torch.softmax\n_prepare()",
                "return _impl(x, dim=-1)",
            ),
        ),
        "graded",
        ("softmax",),
    ),
    Case(
        "rules_star_import",
        "from torch.nn.functional import *, the library's softmax kept under another name",
        _answer(
            "softmax",
            "from torch.nn.functional import *\n_keep = softmax\n\ndef softmax(x):\n    return _keep(x, dim=-1)\n",
        ),
        "graded",
        ("softmax",),
    ),
    Case(
        "rules_shell_line",
        "a shell-escape line in the answer cell (the rest must still be read)",
        _answer(
            "softmax",
            "listing = !echo hi\n" + _softmax_using("", "return torch.softmax(x, dim=-1)"),
        ),
        "needs_review",  # dynamic (issue 36): a shell escape starts a process
        ("softmax",),
    ),
    Case(
        "rules_the_function_is_the_library",
        "softmax is torch.nn.functional.softmax itself",
        _answer(
            "softmax",
            "import functools\nimport torch.nn.functional\nsoftmax = functools.partial(torch.nn.functional.softmax, dim=-1)\n",
        ),
        "graded",
        ("softmax",),
    ),
    Case(
        "rules_aten_entry",
        "torch.ops.aten._softmax: outside the allow-list",
        _answer("softmax", _softmax_using("", "return torch.ops.aten._softmax(x, -1, False)")),
        "needs_review",
        ("softmax",),
    ),
    Case(
        "rules_getattr_value",
        "functools.reduce(getattr, [...], torch): getattr used as a value",
        _answer(
            "softmax",
            _softmax_using(
                "import functools",
                "return functools.reduce(getattr, ['nn', 'functional', 'softmax'], torch)(x, dim=-1)",
            ),
        ),
        "needs_review",
        ("softmax",),
    ),
    Case(
        "rules_unparsable_cell",
        "correct answers and an added cell that does not parse",
        lambda nb, ctx: insert_after(nb, "count_tests", "def broken(:\n    pass\n"),
        "needs_review",
    ),
    Case("deep_json", "JSON nested 200,000 deep", _deep_json, "invalid_notebook"),
    Case("many_cells", "200,000 empty cells", _many_cells, "invalid_notebook"),
]


# --- issue 36: rebindings the rules did not see, evaluators and modules in the allow-list (dyn_)
# Each rebinds the graded softmax (or a building block it calls) to torch's private
# torch._softmax, which the kernel's stubs do not replace: before issue 36 each scored full
# marks (dyn_exec_scratch: needs_review, but its points reached the CSV). Now each is dynamic
# (bertcourse.grading.dynamic): the submission needs review and its points are withheld; where
# the rebinding is code the graded function reaches, the call itself earns nothing.

DYN_PRIVATE = "lambda x: torch._softmax(x, -1, False)"
DYN_CAPTURE_THREAD = f"""
%%capture
import threading
def _rebind():
    global softmax
    softmax = {DYN_PRIVATE}
_t = threading.Thread(target=_rebind)
_t.start()
_t.join()
"""
DYN_CLASS_GLOBAL = f"class _Setup:\n    global softmax\n    softmax = {DYN_PRIVATE}\n"
DYN_RAD2DEG = "def softmax(x):\n    return torch.rad2deg(x)\n"
DYN_TYPE_HINTS = """
import typing
def _h(f: "torch._softmax"):
    pass
def softmax(x):
    return typing.get_type_hints(_h)["f"](x, -1, False)
"""
DYN_TYPING_SYS = """
import typing
def softmax(x):
    s = typing.sys
    return s.modules["torch"]._softmax(x, -1, False)
"""


def _after_wrong_softmax(source: str):
    return lambda nb, ctx: insert_after(wrong(nb, "softmax"), "softmax", source)


CASES += [
    Case(
        "dyn_capture_thread",
        "a %%capture cell rebinds softmax to torch's private softmax in a thread",
        _after_wrong_softmax(DYN_CAPTURE_THREAD),
        "needs_review",
        ("softmax",),
    ),
    Case(
        "dyn_class_global",
        "global softmax in a class body, bound to torch's private softmax",
        _after_wrong_softmax(DYN_CLASS_GLOBAL),
        "needs_review",
        ("softmax",),
    ),
    Case(
        "dyn_main_setattr",
        "__main__.__setattr__ rebinds softmax (points kept for review, withheld)",
        _after_wrong_softmax(f"import __main__\n__main__.__setattr__('softmax', {DYN_PRIVATE})"),
        "needs_review",
    ),
    Case(
        "dyn_torch_setattr",
        "torch.__setattr__ turns the allowed torch.rad2deg into a softmax",
        lambda nb, ctx: insert_after(
            answer(nb, "softmax", DYN_RAD2DEG),
            "setup",
            f"torch.__setattr__('rad2deg', {DYN_PRIVATE})",
        ),
        "needs_review",
    ),
    Case(
        "dyn_map_setattr",
        "map(setattr, [torch], ...) turns the allowed torch.rad2deg into a softmax",
        lambda nb, ctx: insert_after(
            answer(nb, "softmax", DYN_RAD2DEG),
            "setup",
            f"list(map(setattr, [torch], ['rad2deg'], [{DYN_PRIVATE}]))",
        ),
        "needs_review",
    ),
    Case(
        "dyn_exec_scratch",
        "exec in a scratch cell rebinds softmax (points kept for review, withheld)",
        _after_wrong_softmax(f"exec('softmax = {DYN_PRIVATE}')"),
        "needs_review",
    ),
    Case(
        "dyn_type_hints",
        "typing.get_type_hints evaluates a string annotation into torch's private softmax",
        _answer("softmax", DYN_TYPE_HINTS),
        "needs_review",
        ("softmax",),
    ),
    Case(
        "dyn_typing_sys",
        "typing.sys, kept in a local, reaches sys.modules",
        _answer("softmax", DYN_TYPING_SYS),
        "needs_review",
        ("softmax",),
    ),
]

# --- issue 36: isolation, the calls' channel, time, statuses from facts (iso_) ---------------
# Each case is the learner's process against the runtime side of the grader: what the referee
# reads from the host (threads and processes beside the kernel, the calls' socket's peers), one
# clock per submission, statuses from facts. (The operator trace's record, the relay and the
# disabled dispatch need a part with traced operators: tests/test_grade_isolation.py.)

ISO_MEMORY_TEXT = """
raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 GiB")
"""
ISO_SLEEPER = """
import threading, time
threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
"""
ISO_CHILD = """
import subprocess, sys
_child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
"""
# serves the grader's calls itself, with the grader's own serve function, from a thread that
# connects to the calls' socket before the serve loop does
ISO_ROGUE_SERVER = """
import os, socket, threading, time
from bertcourse.grade.boundary import codec, remote
def _rogue():
    path = os.path.join(os.getcwd(), "calls.sock")
    while True:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(path)
            while (request := codec.read_frame(conn, 1 << 26)) is not None:
                codec.write_frame(conn, remote.serve(request).encode())
        except Exception:
            time.sleep(0.002)
        finally:
            conn.close()
threading.Thread(target=_rogue, daemon=True).start()
"""
# IPython's transformer re-tokenizes the whole cell once per shell escape
ISO_ESCAPES = "!echo hi\n" * 200 + "a = 1\n" * 133_000
# a call that ends a moment after its time limit (the toy course's cell limit is 10 s)
ISO_LATE = """
import time
def scale(x, factor):
    end = time.monotonic() + 10.05
    while time.monotonic() < end:
        pass
    return x * factor
"""

CASES += [
    Case(
        "iso_memory_text",
        "honest answers and a cell that raises an error saying it cannot allocate memory",
        lambda nb, ctx: insert_after(nb, "count_tests", ISO_MEMORY_TEXT),
        "graded",
    ),
    Case(
        "iso_thread_at_call",
        "honest answers and a thread alive during every call (the static rules see it)",
        _with_cell(ISO_SLEEPER),
        "needs_review",
    ),
    Case(
        "iso_process_at_call",
        "honest answers and a child process alive during every call",
        _with_cell(ISO_CHILD),
        "needs_review",
        ("scale", "softmax", "count"),
    ),
    Case(
        "iso_rogue_server",
        "honest answers; a thread connects to the calls' socket first and answers the calls",
        _with_cell(ISO_ROGUE_SERVER),
        "tampered",  # it imports the grader's own modules
        ("scale", "softmax", "count"),
    ),
    Case(
        "iso_escapes",
        "honest answers and a 0.8 MB cell of 200 shell escapes (IPython: one pass per escape)",
        lambda nb, ctx: insert_after(nb, "count_tests", ISO_ESCAPES),
        "needs_review",
        ("scale", "softmax", "count"),
    ),
    Case(
        "iso_late_interrupt",
        "scale returns 50 ms after its call's limit; softmax and count, after it, are honest",
        _answer("scale", ISO_LATE),
        "timed_out",
        ("scale",),
    ),
]
