"""Several assignments graded in one run (`python -m bertcourse.grade A B ...`): one pool of
workers and zygotes for all of them, and for each assignment exactly what a run of its own gives
(every student of the roster once, the same statuses and scores, its own CSV)."""

from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from course_fixture import make_toy_course

from bertcourse.grade.__main__ import main
from bertcourse.grade.runner import Options, run, run_all

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the grading jail is Linux-only")

# student -> what they hand in for toy and toy2 (None: nothing)
SUBMISSIONS = {
    "alice": ("honest", "honest"),
    "bob": ("release", None),
    "carol": (None, "honest"),
}


def _course(target: Path) -> Path:
    """The toy course with a second assignment, toy2 (the same notebook), and the submissions."""
    toy = make_toy_course(target)
    for folder in ("solutions", "exercises"):
        shutil.copytree(toy.root / folder / "toy", toy.root / folder / "toy2")
    notebooks = {"honest": toy.honest, "release": toy.release}
    for student, handed in SUBMISSIONS.items():
        for assignment, kind in zip(("toy", "toy2"), handed):
            if kind is not None:
                folder = toy.submitted / student / assignment
                folder.mkdir(parents=True)
                nbformat.write(notebooks[kind], folder / "toy.ipynb")
    return toy.root


def _rows(path: str) -> dict[str, tuple[str, str]]:
    with open(path, newline="") as f:
        return {r["student_id"]: (r["status"], r["score"]) for r in csv.DictReader(f)}


def _options(course: Path, assignment: str) -> Options:
    return Options(
        assignment=assignment,
        course=str(course),
        workers=1,  # one pool all the same; two workers on a busy CI machine only add a zygote
        memory_mib=1024,
        notebook_timeout=120,
        progress=False,
        feedback=False,
    )


def test_several_assignments_in_one_run_grade_as_runs_of_their_own(tmp_path: Path) -> None:
    together, apart = _course(tmp_path / "together"), _course(tmp_path / "apart")
    quiet = lambda *a: None  # noqa: E731
    summaries = run_all([_options(together, "toy"), _options(together, "toy2")], log=quiet)
    alone = [run(_options(apart, name), log=quiet) for name in ("toy", "toy2")]
    for one_run, own_run, name in zip(summaries, alone, ("toy", "toy2")):
        assert Path(one_run.csv).name == f"{name}_grades.csv"
        got, want = _rows(one_run.csv), _rows(own_run.csv)
        assert set(got) == set(SUBMISSIONS)  # every student of the run, once
        if name == "toy2":  # graded second alone, it knows bob and alice from the gradebook
            assert got == want, name
        else:  # alone, toy knows nothing of carol, who handed in only toy2
            assert got == {**want, "carol": ("missing", "0")}, name
        assert {r.assignment for r in one_run.results} == {name}
    toy, toy2 = (_rows(s.csv) for s in summaries)
    assert toy["alice"][0] == toy2["alice"][0] == "graded"
    assert float(toy["alice"][1]) > 0 and float(toy["bob"][1]) == 0
    assert toy["carol"][0] == toy2["bob"][0] == "missing"


def test_a_report_path_is_refused_with_several_assignments(capsys) -> None:
    """--csv, --plot and the LMS files name one assignment's file: with several the command
    stops before grading anything and says which option and what to do instead."""
    code = main(["toy", "toy2", "--csv", "grades.csv", "--canvas", "canvas.csv"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--csv" in err and "--canvas" in err and "--report-only" in err
