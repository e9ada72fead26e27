"""Fast checks of the grader's parts, without starting Jupyter kernels.

The jail (what a kernel can see and do), the referee's data boundary (tests/test_referee.py),
tamper detection and repair of notebooks, the
notebook reader, the CSV and the command line. The whole pipeline, with kernels, is in
test_grade_hostile.py and test_grade_postgres.py.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from course_fixture import make_toy_course

from bertcourse.grade.assignment import (
    ensure_in_gradebook,
    load_assignment,
    load_coursedir,
    strip_hidden_tests,
)
from bertcourse.grade.jail import Capabilities, KernelJail, Limits, detect, release
from bertcourse.grade.report import csv_rows
from bertcourse.grade.results import StoredGrade
from bertcourse.grade.submission import InvalidNotebook, find_tampering, load_notebook, repair

HERE = Path(__file__).parent
ROOT = os.geteuid() == 0
linux = pytest.mark.skipif(sys.platform != "linux", reason="Linux only")


# --- the jail -------------------------------------------------------------------------------


def _in_jail(caps: Capabilities, code: str, hide: list[str]) -> tuple[int, str]:
    base = tempfile.mkdtemp(prefix="bcg-test-")
    os.chmod(base, 0o711)
    jail = KernelJail(caps, Limits(memory_bytes=1 << 30), base, hide, 1)
    try:
        cmd = jail.command([sys.executable, "-c", code])
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        return proc.returncode, proc.stdout + proc.stderr
    finally:
        jail.close()
        shutil.rmtree(base, ignore_errors=True)


PROBE = """
import json, os, resource, socket
out = {"uid": os.getuid(), "pid": os.getpid(), "procs": sorted(p for p in os.listdir("/proc") if p.isdigit())}
out["secret_visible"] = os.path.exists(SECRET)
out["tmp"] = os.listdir("/tmp")
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    out["network"] = True
except OSError:
    out["network"] = False
import bertcourse.grading
out["package"] = bertcourse.grading.__file__
try:
    open(bertcourse.grading.__file__, "a")
    out["package_writable"] = True
except OSError:
    out["package_writable"] = False
out["data_limit"] = resource.getrlimit(resource.RLIMIT_DATA)[0]
print("PROBE" + json.dumps(out))
"""


@linux
@pytest.mark.skipif(not ROOT, reason="the full jail needs root")
def test_jail_hides_the_course_and_drops_privileges(tmp_path: Path) -> None:
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    secret = course / "solutions" / "answers.ipynb"
    secret.write_text("{}")
    course.chmod(0o755)
    caps = detect()
    assert caps.namespaces, "namespaces should be available to root here"
    code = f"SECRET = {str(secret)!r}\n" + PROBE
    try:
        rc, out = _in_jail(caps, code, [str(course)])
    finally:
        release(caps)
    assert rc == 0, out
    probe = json.loads(out.split("PROBE", 1)[1].splitlines()[0])
    assert probe["uid"] == caps.uid != 0
    assert probe["pid"] == 1 and probe["procs"] == ["1"]  # its own PID namespace
    assert probe["secret_visible"] is False
    assert probe["network"] is False
    assert probe["package_writable"] is False
    assert probe["data_limit"] == 1 << 30
    assert not any(name.startswith("pytest-of") for name in probe["tmp"])  # a private /tmp


@linux
def test_launcher_without_root_kills_what_the_kernel_left_behind(tmp_path: Path) -> None:
    caps = Capabilities(False, False, None, None, None, None, None)
    marker = tmp_path / "daemon.pid"
    code = f"""
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open({str(marker)!r}, "w").write(str(os.getpid()))
        time.sleep(300)
    os._exit(0)
time.sleep(1)
"""
    rc, out = _in_jail(caps, code, [])
    assert rc == 0, out
    pid = int(marker.read_text())
    # the launcher is a child subreaper: the orphaned daemon was re-parented to it and killed
    assert (
        not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    )


# --- notebooks: reading, tampering, repair --------------------------------------------------


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory):
    toy = make_toy_course(tmp_path_factory.mktemp("units") / "course")
    coursedir, _ = load_coursedir(str(toy.root), None)
    ensure_in_gradebook(coursedir, "toy")
    spec = load_assignment(coursedir, "toy")
    return coursedir, spec, toy.honest


def _cell(nb, gid):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid)


def test_hidden_tests_are_in_the_spec_but_not_in_the_release(toy) -> None:
    _, spec, honest = toy
    nb_spec = spec.notebooks[0]
    test = nb_spec.cell("scale_tests")
    assert "BEGIN HIDDEN TESTS" in test.source and "HIDDEN" not in test.visible_source
    assert strip_hidden_tests(test.source) == test.visible_source
    assert _cell(honest, "scale_tests").source.strip() == test.visible_source.strip()
    assert [c.name for c in nb_spec.parts] == ["scale_tests", "softmax_tests", "count_tests"]
    assert spec.max_score == 6


def test_tampering_is_found_and_repaired(toy) -> None:
    coursedir, spec, honest = toy
    nb_spec = spec.notebooks[0]
    assert find_tampering(honest, nb_spec) == []
    nb = copy.deepcopy(honest)
    _cell(nb, "softmax_tests").source = "pass"  # edited
    nb.cells.remove(_cell(nb, "count_tests"))  # deleted
    nb.cells.insert(2, copy.deepcopy(_cell(nb, "scale_tests")))  # duplicated
    _cell(nb, "scale_tests").metadata.nbgrader["points"] = 99  # changed metadata
    problems = find_tampering(nb, nb_spec)
    assert "edited test cell 'softmax_tests'" in problems
    assert "deleted test cell 'count_tests'" in problems
    assert "duplicated test cell 'scale_tests' (2 copies)" in problems
    assert any("points 2 -> 99" in p for p in problems)
    fixed = repair(nb, nb_spec)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in fixed.cells]
    assert ids.count("scale_tests") == 1 and ids.count("count_tests") == 1
    assert ids.index("count_tests") == ids.index("count") + 1  # put back after its answer
    for name in ("scale_tests", "softmax_tests", "count_tests"):
        cell = _cell(fixed, name)
        assert cell.source == nb_spec.cell(name).source  # hidden tests back, edits undone
        assert cell.metadata.nbgrader["points"] == nb_spec.cell(name).points


def test_repair_leaves_nbgraders_overwritecells_nothing_to_change(toy) -> None:
    """`repair` does OverwriteCells' work from the spec, without the gradebook: nbgrader's own
    preprocessor, reading the gradebook, then finds nothing to change in the repaired notebook
    (cell types, locked sources with their hidden tests, points, checksums, locks)."""
    from nbgrader.preprocessors import OverwriteCells

    coursedir, spec, honest = toy
    nb_spec = spec.notebooks[0]
    nb = copy.deepcopy(honest)
    test = _cell(nb, "softmax_tests")  # a test cell turned into markdown
    test.cell_type = "markdown"
    del test["outputs"], test["execution_count"]
    _cell(nb, "scale_tests").metadata.nbgrader.update(locked=False, checksum="0", points=9)
    _cell(nb, "count_tests").source = "pass"
    fixed = repair(nb, nb_spec)
    resources = {"nbgrader": {"notebook": nb_spec.name, "assignment": "toy"}}
    resources["nbgrader"]["db_url"] = coursedir.db_url
    again, _ = OverwriteCells().preprocess(copy.deepcopy(fixed), resources)
    assert again == fixed
    assert _cell(fixed, "softmax_tests").cell_type == "code"
    assert _cell(fixed, "count_tests").source == nb_spec.cell("count_tests").source


def test_stripped_metadata_is_reported(toy) -> None:
    _, spec, honest = toy
    nb = copy.deepcopy(honest)
    del _cell(nb, "softmax_tests").metadata["nbgrader"]
    assert find_tampering(nb, spec.notebooks[0]) == [
        "test cell 'softmax_tests' lost its nbgrader metadata"
    ]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"cells": [', "not valid JSON"),
        (b"\xff\xfe\x00", "not UTF-8"),
        (b"[1, 2]", "not a Jupyter notebook"),
        (b'{"cells": [], "nbformat": 4, "nbformat_minor": 5, "metadata": 3}', "nbformat 4"),
    ],
)
def test_invalid_notebooks_are_named(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "n.ipynb"
    path.write_bytes(content)
    with pytest.raises(InvalidNotebook, match=reason):
        load_notebook(str(path))


def test_csv_rows_give_zero_parts_for_unreadable_and_missing(toy) -> None:
    _, spec, _ = toy
    parts = {
        ("toy", "scale_tests"): 2.0,
        ("toy", "softmax_tests"): 3.0,
        ("toy", "count_tests"): 0.0,
    }
    results = [
        StoredGrade("a", "graded", "", 5.0, 6.0, parts, late_penalty=1.5, late="1 day late"),
        StoredGrade("b", "invalid_notebook", "not JSON", 0.0, 6.0, {}),
    ]
    rows = csv_rows(spec, results)
    assert rows[0]["score"] == "5" and rows[0]["count_tests"] == "0"
    assert rows[1]["status"] == "invalid_notebook" and rows[1]["softmax_tests"] == "0"
    assert (rows[0]["late_penalty"], rows[0]["final_score"], rows[0]["late"]) == (
        "1.5",
        "3.5",
        "1 day late",
    )


def test_help_lists_the_statuses() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bertcourse.grade", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0
    for word in ("--workers", "--db", "--csv", "timed_out", "memory_exceeded", "tampered"):
        assert word in out.stdout


# --- the grader's layout --------------------------------------------------------------------


def _grader_imports() -> dict[str, set[str]]:
    """Every module of bertcourse.grade and bertcourse.grading -> the package modules it
    imports, at module level or inside a function (a lazy import hides a cycle, not removes it).
    `from bertcourse.grade.boundary import codec` counts as an import of that submodule."""
    import ast
    import importlib.util
    import pkgutil

    import bertcourse.grade
    import bertcourse.grading

    names = {"bertcourse.grade", "bertcourse.grading"}
    for package in (bertcourse.grade, bertcourse.grading):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            names.add(info.name)
    graph: dict[str, set[str]] = {}
    for name in names:
        tree = ast.parse(Path(importlib.util.find_spec(name).origin).read_text())
        deps: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    deps.add(full if full in names else node.module)
            elif isinstance(node, ast.Import):
                deps |= {alias.name for alias in node.names}
        graph[name] = {d for d in deps if d in names and d != name}
    return graph


def test_the_grader_has_no_import_cycle_and_the_checks_do_not_import_it() -> None:
    """The learner's checks (`bertcourse.grading`, imported by every exercise notebook) never
    import the grader (`bertcourse.grade`: the jail, the boundary, the batch), and no module of
    either reaches itself through imports, lazy ones included."""
    graph = _grader_imports()
    assert len(graph) > 30  # every module was found (the walk did not stop at a package)
    into_grader = {
        name: sorted(d for d in deps if d.split(".")[:2] == ["bertcourse", "grade"])
        for name, deps in graph.items()
        if name.startswith("bertcourse.grading")
    }
    assert not any(into_grader.values()), into_grader

    def reach(start: str) -> set[str]:
        seen, todo = set(), list(graph[start])
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(graph[n])
        return seen

    # a package's __init__ re-exporting its submodules is not a cycle unless one of them
    # imports the package itself back
    cycles = {n: sorted(graph[n]) for n in graph if n in reach(n)}
    assert not cycles, cycles


# --- the feedback page ------------------------------------------------------------------------


def test_the_feedback_exporter_gives_nbconverts_page_without_its_soup_pass() -> None:
    """`FeedbackExporter` skips nbconvert's BeautifulSoup pass over the page and adds the
    images' alternative text itself: on nbgrader's feedback template the page parses to the
    same document as `HTMLExporter`'s (images with and without alt text, markdown images,
    code, streams, errors, learner text that looks like a tag)."""
    import base64

    from bs4 import BeautifulSoup
    from nbconvert.exporters import HTMLExporter
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
    from nbgrader.converters import GenerateFeedback
    from traitlets.config import Config

    from bertcourse.grade.feedback import NO_ALT_TEXT, FeedbackExporter

    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
    nb = new_notebook(
        cells=[
            new_markdown_cell("# Title\n\n![a plot](plot.png) and <img src='x.png'>"),
            new_code_cell(
                "print('<img src=y.png>')",
                outputs=[
                    new_output("stream", name="stdout", text="<img src=y.png> <b>bold</b>\n"),
                    new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"}),
                    new_output("error", ename="ValueError", evalue="<img>", traceback=["tb"]),
                ],
            ),
        ]
    )
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    config = Config(GenerateFeedback().config)
    resources = {
        "nbgrader": {
            "notebook": "n",
            "assignment": "a",
            "student": "s",
            "score": 1,
            "max_score": 2,
            "late_penalty": 0,
        }
    }
    theirs, _ = HTMLExporter(config=config).from_notebook_node(nb, resources=dict(resources))
    ours, _ = FeedbackExporter(config=config).from_notebook_node(nb, resources=dict(resources))
    assert ours != theirs  # not re-serialised by a parser
    soup_ours = BeautifulSoup(ours, "html.parser")
    assert soup_ours.prettify() == BeautifulSoup(theirs, "html.parser").prettify()
    images = soup_ours.find_all("img")
    assert len(images) >= 3 and all(img.get("alt") for img in images)
    assert sum(img["alt"] == NO_ALT_TEXT for img in images) >= 2  # the output and the raw tag

    # the locked cells' highlighting is remembered: the same exporter's second page, with a
    # locked source once more and once under another cell magic's language, is still
    # nbconvert's page; a learner's (unlocked) cell is never kept
    locked = {"nbgrader": {"locked": True, "grade_id": "t"}}
    source = "print('<img src=y.png>')"
    nb.cells += [
        new_code_cell(source, metadata=locked),
        new_code_cell(source, metadata={**locked, "magics_language": "bash"}),
        new_code_cell("x = 'a learner cell'"),
    ]
    exporter = FeedbackExporter(config=config)
    theirs, _ = HTMLExporter(config=config).from_notebook_node(nb, resources=dict(resources))
    for _ in range(2):
        ours, _ = exporter.from_notebook_node(nb, resources=dict(resources))
        parsed = BeautifulSoup(ours, "html.parser")
        assert parsed.prettify() == BeautifulSoup(theirs, "html.parser").prettify()
    assert len({str(p) for p in parsed.find_all("div", class_="highlight")}) >= 3
    assert sorted(key[0] for key in exporter._highlighted) == [source, source]
