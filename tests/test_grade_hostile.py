"""The hostile bank, graded in one batch by `python -m bertcourse.grade` (tests/hostile/bank.py).

One module-scoped run grades every case of the bank (plus an honest student and one who is
in the gradebook but submitted nothing) with two workers; each test then checks one
student's status and part scores, and that every other student's grade is what it should
be. A second, smaller run re-grades a few students: identical results, and a submission that
now crashes keeps no stale marks. Cases that need root (a separate user, namespaces) are
skipped without it.
"""

from __future__ import annotations

import csv
import fcntl
import hashlib
import html as html_module
import json
import os
import pwd
import re
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from course_fixture import make_toy_course
from hostile.bank import (
    CASES,
    FULL,
    MISSING_STUDENT,
    PARTS,
    Case,
    Listener,
    prepend,
    write_submission,
)

from bertcourse.grade import gradebook
from bertcourse.grade.jail import GRADER_USER, ensure_grader_user
from bertcourse.grade.results import AWAITING_REVIEW, WITHHELD_STATUSES
from bertcourse.grade.runner import Options, run

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the grading jail is Linux-only")

HERE = Path(__file__).parent
ROOT = os.geteuid() == 0
NEEDS_ROOT = {
    "writes_outside",
    "reads_secrets",
    "network",
    "fork_bomb",
    "memory_children",
    "unix_sockets",
    "local_service",
    "reads_referee_key",
    "reads_repository",
    "fills_scratch",
}
REGRADE = Case(
    "regrade_crash", "honest first, os._exit on the re-grade", lambda nb, ctx: nb, "graded"
)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_csv(path: str) -> dict[str, dict[str, str]]:
    with open(path, newline="") as f:
        return {row["student_id"]: row for row in csv.DictReader(f)}


def _copy_course(source: Path, target: Path) -> None:
    """A copy of a graded course: links stay links, FIFOs are left out (copytree would block),
    and the gradebook is copied through SQLite's backup API (a test on the other worker may
    be reading it: its -wal and -shm files come and go while the folder is copied)."""
    import sqlite3

    def special(folder: str, names: list[str]) -> list[str]:
        return [
            n
            for n in names
            if n.endswith(("-wal", "-shm"))
            or stat.S_ISFIFO(os.lstat(os.path.join(folder, n)).st_mode)
        ]

    shutil.copytree(source, target, symlinks=True, ignore=special)
    for db in source.rglob("*.db"):
        src, dst = sqlite3.connect(db), sqlite3.connect(target / db.relative_to(source))
        try:
            src.backup(dst)
        finally:
            src.close()
            dst.close()


def _grade(course: Path, **options) -> tuple[Any, dict[str, dict[str, str]]]:
    """Grade the toy assignment of `course` as the bank does; (summary, CSV rows by student)."""
    summary = run(
        Options(
            assignment="toy",
            course=str(course),
            workers=2,
            memory_mib=1024,
            notebook_timeout=120,
            progress=False,
            **options,
        ),
        log=lambda *a: None,
    )
    return summary, _read_csv(summary.csv)


def _expected(case: Case) -> tuple[str, dict[str, float]]:
    return case.status, case.expected_parts()


def _points(row: dict[str, str], kept: dict[str, float]) -> dict[str, float]:
    """The points the referee gave each part: the CSV's, or, where the CSV withholds them
    until an instructor approves (needs_review, tampered), the gradebook's (`kept`)."""
    if row["review"] == AWAITING_REVIEW:
        if row["score"] != "" or any(row[k] != "" for k in FULL):
            return {}  # a withheld row that shows points: never equal to an expectation
        return {k: kept[k] for k in FULL}
    return {k: float(row[k]) for k in FULL}


def _mismatch(row: dict[str, str], case: Case, kept: dict[str, float]) -> str | None:
    status, parts = _expected(case)
    got = _points(row, kept)
    if row["status"] != status or got != parts:
        if any(_mismatch(row, other, kept) is None for other in case.otherwise):
            return None  # one of the case's other exact outcomes
        return f"{case.name}: expected {status} {parts}, got {row['status']} {got} ({row['detail'][:400]})"
    return None


def _build_bank(base: Path) -> dict:
    toy = make_toy_course(base / "course")
    course, honest = toy.root, toy.honest
    submitted = course / ".grading" / "submitted"
    import bertcourse.grading

    # a service outside the course, on this machine, that any local process can reach
    service = Listener() if ROOT else None
    ctx = {
        "root": str(course),
        "solution": str(course / "solutions" / "toy" / "toy.ipynb"),
        "gradebook": str(course / ".grading" / "gradebook.db"),
        "other_submission": str(submitted / "correct" / "toy" / "toy.ipynb"),
        "package_file": bertcourse.grading.__file__,
        "service_socket": service.socket_path if service else "",
        "service_abstract": "\0" + service.abstract if service else "",
        "service_file": service.file_path if service else "",
    }
    cases = [c for c in CASES if ROOT or c.name not in NEEDS_ROOT] + [REGRADE]
    for case in cases:
        write_submission(case, honest, ctx, str(submitted / case.name / "toy"), "toy")
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{ctx['gradebook']}", "hostile") as gb:
        gb.update_or_create_student(MISSING_STUDENT)
    protected = [ctx["solution"], ctx["other_submission"], ctx["package_file"]]
    before = {p: _sha(Path(p)) for p in protected}
    if ROOT:  # the grader creates its user on first use: that write is not the student's
        ensure_grader_user()
    passwd = _sha(Path("/etc/passwd"))
    try:
        service_reachable = service.reachable_from_here() if service else False
        control = service.connections if service else 0
        summary, rows = _grade(course)
        service_connections = service.connections - control if service else 0
        kept = {
            r.student_id: {gid: v for (_, gid), v in r.parts.items()}
            for r in gradebook.read_results(f"sqlite:///{ctx['gradebook']}", "hostile", "toy")
        }
    finally:
        if service:
            service.close()
    return {
        "course": str(course),
        "cases": [c.name for c in cases],
        "rows": rows,
        "kept": kept,  # the gradebook's part scores (what an approval would release)
        "csv": summary.csv,
        "plot": summary.plot,
        "before": before,
        "passwd": passwd,
        "honest": honest,
        "ctx": ctx,
        "service": {"reachable": service_reachable, "connections": service_connections},
    }


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The graded bank, built once even when pytest-xdist runs this module in two workers."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # shared by the workers of this session
    done = base / "grade_bank.json"
    with open(base / "grade_bank.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            work = base / "grade_bank"
            work.mkdir()
            done.write_text(json.dumps(_build_bank(work)))
    data = json.loads(done.read_text())
    data["course"] = Path(data["course"])
    all_cases = {c.name: c for c in [*CASES, REGRADE]}
    data["cases"] = {n: all_cases[n] for n in data["cases"]}
    return data


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_submission(bank: dict, case: Case) -> None:
    if case.name not in bank["cases"]:
        pytest.skip("needs root (a separate user, namespaces, cgroups)")
    row, kept = bank["rows"][case.row_id], bank["kept"].get(case.row_id, {})
    assert _mismatch(row, case, kept) is None, _mismatch(row, case, kept)
    matched = next(c for c in (case, *case.otherwise) if c.status == row["status"])
    assert sum(_points(row, kept).values()) == sum(matched.expected_parts().values())
    if row["review"] != AWAITING_REVIEW:
        assert float(row["score"]) == sum(matched.expected_parts().values())
    assert float(row["max_score"]) == sum(FULL.values())
    # ... and every other student's grade is intact
    others = [
        _mismatch(bank["rows"][c.row_id], c, bank["kept"].get(c.row_id, {}))
        for n, c in bank["cases"].items()
        if n != case.name
    ]
    assert [m for m in others if m] == []


def test_missing_student_gets_status_missing(bank: dict) -> None:
    row = bank["rows"][MISSING_STUDENT]
    assert (row["status"], float(row["score"])) == ("missing", 0.0)
    assert all(float(row[t]) == 0.0 for t in FULL)


def test_csv_columns_and_plot(bank: dict) -> None:
    with open(bank["csv"], newline="") as f:
        header = next(csv.reader(f))
    assert header == [
        "student_id", "assignment", "status", "review", "score", "max_score", *FULL, "detail"
    ]  # fmt: skip
    assert set(bank["rows"]) == {c.row_id for c in bank["cases"].values()} | {MISSING_STUDENT}
    png = Path(bank["plot"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_gradebook_holds_the_same_statuses_and_scores(bank: dict) -> None:
    results = gradebook.read_results(f"sqlite:///{bank['ctx']['gradebook']}", "hostile", "toy")
    for r in results:
        row = bank["rows"][r.student_id]
        assert r.status == row["status"], r.student_id
        scored = [v for v in r.parts.values() if v is not None]
        shown = sum(_points(row, bank["kept"][r.student_id]).values()) if r.parts else 0.0
        assert sum(scored) == pytest.approx(shown)
        # a held submission's points reach the CSV only once an instructor approves them
        assert (row["review"] == AWAITING_REVIEW) == (r.status in WITHHELD_STATUSES), row


def test_course_files_untouched(bank: dict) -> None:
    for path, digest in bank["before"].items():
        assert _sha(Path(path)) == digest, f"{path} was modified"
    assert not (bank["course"] / "planted.txt").exists()
    assert _sha(Path("/etc/passwd")) == bank["passwd"]


@pytest.mark.skipif(not ROOT, reason="needs root")
def test_escape_attempts_all_failed(bank: dict) -> None:
    nb = nbformat.read(
        bank["course"] / ".grading" / "autograded" / "writes_outside" / "toy" / "toy.ipynb", 4
    )
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "ESCAPE" in text and "DONE" not in text, text[:2000]


def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, owner uid) of every process of this machine."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                table[int(entry)] = (
                    int(stat.rsplit(")", 1)[1].split()[1]),
                    os.stat(f"/proc/{entry}").st_uid,
                )
            except (OSError, ValueError):
                pass
    return table


@pytest.mark.skipif(not ROOT, reason="needs root")
def test_no_process_of_the_grading_user_survives(bank: dict) -> None:
    """No kernel of this run is left: none below this test process, and none orphaned (its
    launcher gone, adopted by init). Kernels of another grading run on the same machine (a
    concurrent test, another course), below their own live launcher, are not this run's."""
    uid = pwd.getpwnam(GRADER_USER).pw_uid
    table = _processes()
    alive = []
    for pid, (parent, owner) in table.items():
        if owner != uid:
            continue
        while parent in table and table[parent][1] == uid:  # up to the launcher, run as root
            parent = table[parent][0]
        chain = []
        while parent in table and parent not in chain:
            chain.append(parent)
            parent = table[parent][0]
        if os.getpid() in chain or len(chain) <= 1:  # ours, or adopted by init
            alive.append(Path(f"/proc/{pid}/cmdline").read_bytes()[:80])
    assert alive == []


def _outputs(bank: dict, student: str) -> str:
    path = bank["course"] / ".grading" / "autograded" / student / "toy" / "toy.ipynb"
    nb = nbformat.read(path, 4)
    return "".join(
        str(o.get("text", "")) for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )


def test_output_flood_is_capped(bank: dict) -> None:
    path = bank["course"] / ".grading" / "autograded" / "output_flood" / "toy" / "toy.ipynb"
    assert path.stat().st_size < 2_000_000
    assert "output truncated" in _outputs(bank, "output_flood")


@pytest.mark.skipif(not ROOT, reason="needs root")
def test_fork_bomb_is_capped(bank: dict) -> None:
    row = bank["rows"]["fork_bomb"]
    text = _outputs(bank, "fork_bomb")
    if "FORKED" in text:  # the pids cgroup (or RLIMIT_NPROC) stopped it: the cell went on
        forked = int(text.split("FORKED")[1].split()[0])
        assert 0 < forked < 300
    else:  # the memory or the time limit stopped it first: the kernel was stopped, and the
        # grade says which
        assert row["status"] in ("memory_exceeded", "timed_out"), row


def _text(page: str) -> str:
    """The visible text of an HTML page (code is split into highlighting spans)."""
    return html_module.unescape(re.sub(r"<[^>]+>", "", page))


def test_feedback_has_no_hidden_tests(bank: dict) -> None:
    page = bank["course"] / ".grading" / "feedback" / "correct" / "toy" / "toy.html"
    html = _text(page.read_text())
    assert "Grading status: graded" in html
    assert "seed=2), -0.5)" not in html and "seed=6)" not in html  # hidden test lines
    assert "seed=1), 2.0)" in html  # a visible test line
    tampered = (
        bank["course"] / ".grading" / "feedback" / "edited_test" / "toy" / "toy.html"
    ).read_text()
    assert "flagged for review" in tampered


def test_a_graded_function_cannot_prompt_for_input(bank: dict) -> None:
    """The calls of a test come on a socket of their own, not on the kernel's stdin channel:
    the learner's own input() gets the error of any graded cell, and its output still reaches
    the page."""
    if "asks_for_input" not in bank["cases"]:
        pytest.skip("needs root (a separate user, namespaces, cgroups)")
    page = bank["course"] / ".grading" / "feedback" / "asks_for_input" / "toy" / "toy.html"
    raw = page.read_text()
    assert "StdinNotImplementedError: input() is not available while a graded function runs" in (
        _text(raw)
    )
    assert "<pre>count_positive: strictly positive?" in raw  # the print, as an output


def test_regrade_is_idempotent_and_leaves_no_stale_marks(bank: dict, tmp_path: Path) -> None:
    course = tmp_path / "course"  # a copy: the other tests keep reading the first run's files
    _copy_course(bank["course"], course)
    first = dict(bank["rows"])
    assert (
        first["regrade_crash"]["status"] == "graded" and float(first["regrade_crash"]["score"]) == 6
    )
    crashing = prepend(nbformat.from_dict(bank["honest"]), "softmax", "import os\nos._exit(3)")
    nbformat.write(
        crashing, course / ".grading" / "submitted" / "regrade_crash" / "toy" / "toy.ipynb"
    )
    _, second = _grade(course, students=["correct", "edited_test", "regrade_crash"])
    for student in first:
        if student != "regrade_crash":
            assert second[student] == first[student], student
    row = second["regrade_crash"]
    assert row["status"] == "crashed"
    parts = {PARTS[a][0]: float(row[PARTS[a][0]]) for a in PARTS}
    assert parts == {"scale_tests": 2.0, "softmax_tests": 0.0, "count_tests": 0.0}


def test_exec_mode_grades_like_the_zygote(bank: dict, tmp_path: Path) -> None:
    """`--no-zygote` (each kernel a fresh process) gives the same rows as the default run."""
    course = tmp_path / "course"
    _copy_course(bank["course"], course)
    students = ["correct", "wrong_answer", "kernel_death", "monkeypatch_torch", "endless_thread"]
    if ROOT:
        students += ["reads_secrets", "writes_outside"]
    _, rows = _grade(course, students=students, zygote=False)
    for student in students:
        expected = {k: v for k, v in bank["rows"][student].items() if k != "detail"}
        assert {k: v for k, v in rows[student].items() if k != "detail"} == expected, student


def test_feedback_pages_carry_no_script_from_a_submission(bank: dict) -> None:
    for student in ("html_output", "markdown_script"):
        page = bank["course"] / ".grading" / "feedback" / student / "toy" / "toy.html"
        text = page.read_text()
        assert "<script>window.PWNED" not in text, student
        assert "<img src=x onerror" not in text, student  # escaped as text is fine
        assert "<b id='pwned-html'>" not in text, student


@pytest.mark.skipif(not ROOT, reason="needs root")
def test_a_service_outside_the_course_is_not_there(bank: dict) -> None:
    """The listener answered the test's own connection, never a kernel's: inside the jail its
    socket file and its answers file do not exist and its abstract socket refuses."""
    assert bank["service"] == {"reachable": True, "connections": 0}
    text = _outputs(bank, "local_service")
    for line in (
        "SOCKET FileNotFoundError",
        "ABSTRACT ConnectionRefusedError",
        "FILE FileNotFoundError",
    ):
        assert line in text, text[:1000]


@pytest.mark.skipif(not ROOT, reason="needs root")
def test_scratch_folder_is_capped(bank: dict) -> None:
    text = _outputs(bank, "fills_scratch")
    assert "STOPPED" in text, text[:500]
    written = int(text.split("STOPPED")[1].split()[1])
    assert written <= 260, text[:500]  # 256 MiB tmpfs


def test_every_walled_case_is_named_in_the_detail(bank: dict) -> None:
    for student, words in {
        "link_to_other_student": "symbolic link",
        "linked_folder": "symbolic link",
        "fifo_notebook": "FIFO",
        "bad_name\\xff": "UTF-8",
        "deep_json": "nested",
        "many_cells": "cells",
        "computed_getattr": "getattr",
        "frame_walk": "frame",
    }.items():
        assert words in bank["rows"][student]["detail"], (student, bank["rows"][student]["detail"])


def test_every_submission_that_ran_has_a_feedback_page(bank: dict) -> None:
    lacking = [
        case.name
        for case in bank["cases"].values()
        if case.status not in ("missing", "invalid_notebook")
        and not (
            bank["course"] / ".grading" / "feedback" / case.row_id / "toy" / "toy.html"
        ).exists()
    ]
    assert lacking == []


def test_a_held_submission_shows_its_points_as_pending(bank: dict) -> None:
    """needs_review and tampered: the feedback page shows no score until an instructor decides."""
    for case in bank["cases"].values():
        page = bank["course"] / ".grading" / "feedback" / case.row_id / "toy" / "toy.html"
        if bank["rows"][case.row_id]["review"] != AWAITING_REVIEW or not page.exists():
            continue
        text = page.read_text()
        assert "pending review" in text and not re.search(r"Score: -?[\d.]+ /", text), case.name
