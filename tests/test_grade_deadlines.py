"""Deadlines and learning platforms, end to end through `python -m bertcourse.grade`.

Three students of the toy course: on time, two days late, and one without a timestamp, with a
late policy at the course root (10 % of the maximum per started day) and a roster. One grading
run must write the penalty and the explanation into the gradebook, the CSV and the feedback
page, and Canvas and Moodle import files whose numbers are the final scores.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import nbformat
import pytest
from course_fixture import make_toy_course

from bertcourse.grade.__main__ import main

HERE = Path(__file__).parent
POLICY = """
timezone = "UTC"
[penalty]
per = "day"
percent = 10
[assignments.toy]
due = 2026-03-01T12:00:00
"""
ROSTER = """student_id,name,sis_login_id,username
ontime,On Time,ontime@uni,ontime
late,Two Days,late@uni,late
nostamp,No Stamp,nostamp@uni,nostamp
"""


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    toy = make_toy_course(tmp_path_factory.mktemp("deadlines") / "course")
    course, honest = toy.root, toy.honest
    for student, stamp in [
        ("ontime", "2026-03-01 11:59:00.000000 UTC"),
        ("late", "2026-03-03 09:00:00.000000 UTC"),
        ("nostamp", None),
    ]:
        folder = course / ".grading" / "submitted" / student / "toy"
        folder.mkdir(parents=True)
        nbformat.write(honest, folder / "toy.ipynb")
        if stamp:
            (folder / "timestamp.txt").write_text(stamp)
    (course / "late_policy.toml").write_text(POLICY)
    (course / "roster.csv").write_text(ROSTER)
    code = main(
        [
            "toy",
            "--course",
            str(course),
            "--workers",
            "1",
            "--quiet",
            "--csv",
            str(course / "grades.csv"),
            "--canvas",
            str(course / "canvas.csv"),
            "--moodle",
            str(course / "moodle.csv"),
            "--roster",
            str(course / "roster.csv"),
        ]
    )
    assert code == 0
    return course


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_the_csv_carries_the_penalty(graded: Path) -> None:
    rows = {r["student_id"]: r for r in _rows(graded / "grades.csv")}
    assert {k: rows[k]["status"] for k in rows} == dict.fromkeys(rows, "graded")
    assert (rows["ontime"]["score"], rows["ontime"]["late_penalty"]) == ("6", "0")
    # 1 day and 21 hours late: two started days, 2 x 10 % of 6 points
    assert rows["late"]["late_penalty"] == "1.2" and rows["late"]["final_score"] == "4.8"
    assert "late" in rows["late"]["late"]
    assert (
        rows["nostamp"]["late_penalty"] == "0" and "no submission time" in rows["nostamp"]["late"]
    )


def test_feedback_names_the_penalty(graded: Path) -> None:
    page = (graded / ".grading" / "feedback" / "late" / "toy" / "toy.html").read_text()
    assert "Late submission" in page


def test_lms_files_hold_the_final_scores(graded: Path) -> None:
    canvas = (graded / "canvas.csv").read_text().splitlines()
    assert canvas[0].startswith("Student,ID,SIS User ID,SIS Login ID,Section")
    assert any("late@uni" in line and line.endswith(",4.8") for line in canvas), canvas
    moodle = _rows(graded / "moodle.csv")
    by_user = {r[next(iter(r))]: r for r in moodle}
    assert set(by_user) == {"ontime", "late", "nostamp"}
    assert "4.8" in by_user["late"].values()


def test_a_bad_policy_file_is_named(tmp_path: Path, graded: Path, capsys) -> None:
    course = tmp_path / "course"
    shutil.copytree(graded, course, ignore=shutil.ignore_patterns(".grading"))
    (course / "late_policy.toml").write_text("[penalty]\npercnt = 10\n")
    assert main(["toy", "--course", str(course), "--quiet", "--workers", "1"]) == 2
    assert "percnt" in capsys.readouterr().err
