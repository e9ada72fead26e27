"""The class report (`python -m bertcourse.grade report`) on a simulated class.

The class is written straight into a gradebook through the grader's own write path
(`GradebookWriter.save_result`, the answer cells' auto comments from `part_comment`), not by
running kernels: 200 students per assignment, each part's answer drawn from the bank's wrong
answers (tests/exercise_answers/) at known rates, their real failure messages (the first line,
as a visible test shows it or as the referee shows a hidden one), and some statuses. The report
must give back exactly the counts the mixing made.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import nbformat
import pytest

from bertcourse.grade import classreport, gradebook, results
from bertcourse.grade.boundary.referee import _hidden_message
from bertcourse.grade.status import Status
from bertcourse.grading.values import GradingError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import test_exercises as te  # noqa: E402

COURSE = "bertcourse"
STUDENTS = 200
ASSIGNMENTS = ["ch01_attention", "ch04_loss"]  # the bank's answers run in process (seconds)
# statuses mixed in: (status, students); their parts are not graded
STATUS_MIX = [(Status.TAMPERED, 3), (Status.NEEDS_REVIEW, 4), (Status.TIMED_OUT, 2)]


def bank_messages(assignment: str) -> dict[str, list[tuple[str, str, str]]]:
    """answer cell -> [(label, first line of the failure, the name it must get)] of the bank's
    wrong answers, each run in process with the solution's other answers."""
    source = nbformat.read(te.builder.notebook_path(assignment), as_version=4)
    correct = te.solution_answers(source)
    found: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for answer in te.load_answers(assignment):
        if answer.kind != "wrong":
            continue
        error = _failure(source, {**correct, answer.grade_id: answer.source}, answer.grade_id)
        if error is None:
            continue
        found[answer.grade_id].append((answer.label, error, te.expected_name(assignment, answer)))
    return found


def _failure(source, answers, grade_id) -> str | None:
    """The failure of `grade_id`'s test cell as the learner reads it (None if it passed)."""
    error = te.run_in_process(source, answers)[f"{grade_id}_tests"]
    prefix = f"{GradingError.__name__}: "
    return error.removeprefix(prefix) if error else None


@pytest.fixture(scope="module")
def bank():
    return {a: bank_messages(a) for a in ASSIGNMENTS}


def parts_of(assignment: str) -> tuple[str, list[tuple[str, float]]]:
    nb = nbformat.read(te.builder.notebook_path(assignment), as_version=4)
    cells = [c.metadata.nbgrader for c in nb.cells if "nbgrader" in c.metadata]
    tests = [(m["grade_id"], float(m["points"])) for m in cells if m.get("grade")]
    return te.builder.notebook_path(assignment).stem, tests


@pytest.fixture(scope="module")
def simulated(tmp_path_factory, bank):
    """The gradebook of a simulated class, and what the mixing put into it."""
    db = f"sqlite:///{tmp_path_factory.mktemp('class') / 'gradebook.db'}"
    expected = make_class(db, bank, STUDENTS)
    return db, expected


def make_class(db: str, bank, students: int, assignments=None):
    """Write the class straight into the gradebook's rows (nbgrader's tables and the grader's
    status table), one transaction per assignment; return what the mixing put in."""
    from nbgrader.api import Gradebook

    gradebook.prepare(db, COURSE)
    expected = {"named": {}, "unnamed": {}, "status": {}, "passed": {}, "who": defaultdict(set)}
    with Gradebook(db, COURSE) as gb:
        for s in range(students):
            gb.update_or_create_student(f"s{s:03d}")
        for a in assignments or list(bank):
            _write_assignment(gb, a, bank[a], students, expected)
    return expected


def _write_assignment(gb, a, bank_a, students, expected) -> None:
    from nbgrader import api

    notebook, tests = parts_of(a)
    gb.add_assignment(a)
    gb.add_notebook(notebook, a)
    cells = {}
    for part, points in tests:
        grade_cell = gb.add_grade_cell(part, notebook, a, max_score=points, cell_type="code")
        answer_cell = gb.add_solution_cell(part.removesuffix("_tests"), notebook, a)
        cells[part] = (grade_cell, answer_cell)
    assignment, nb = gb.find_assignment(a), gb.find_notebook(notebook, a)
    statuses = [st for st, n in STATUS_MIX for _ in range(n)]
    db = gb.db
    for s in range(students):
        student = f"s{s:03d}"
        status = statuses[s] if s < len(statuses) else Status.GRADED
        submission = api.SubmittedAssignment(
            assignment=assignment, student=gb.find_student(student)
        )
        submitted = api.SubmittedNotebook(assignment=submission, notebook=nb)
        db.add_all([submission, submitted])
        for p, (part, points) in enumerate(tests):
            grade_cell, answer_cell = cells[part]
            answer = answer_cell.name
            wrong = bank_a.get(answer, [])
            k = (s + 7 * p) % 10  # student s makes wrong answer k of part p: 10% each
            score, comment = None, None
            if status is Status.GRADED and k < len(wrong):
                label, message, name = wrong[k]
                shown = _hidden_message(GradingError(message)) if s % 2 else message
                score, comment = 0.0, results.part_comment("failed", shown)
                if name:
                    expected["named"].setdefault((a, part), Counter())[name] += 1
                    expected["who"][(a, part, name)].add(student)
                else:
                    first = comment.removeprefix(classreport.HIDDEN_PREFIX)
                    expected["unnamed"].setdefault((a, part), Counter())[first] += 1
            elif status is Status.GRADED:
                score = points
                expected["passed"][(a, part)] = expected["passed"].get((a, part), 0) + 1
            db.add(api.Grade(cell=grade_cell, notebook=submitted, auto_score=score))
            db.add(api.Comment(cell=answer_cell, notebook=submitted, auto_comment=comment))
        expected["status"].setdefault(a, Counter())[status.value] += 1
        db.add(
            gradebook.GradeStatus(
                course_id=COURSE, assignment=a, student_id=student, status=status.value
            )
        )
    db.commit()


def _by_part(report):
    return {(a.name, p.part): p for a in report.assignments for p in a.parts}


def test_counts_are_exact(simulated):
    db, expected = simulated
    report = classreport.build(db, COURSE, ASSIGNMENTS)
    parts = _by_part(report)
    assert set(expected["named"]) | set(expected["unnamed"]) <= set(parts)
    for key, part in parts.items():
        named = {g.label: g.count for g in part.mistakes}
        want = expected["named"].get(key, Counter())
        # the bank's "names" is a part of the mistake's name: match it to the report's label
        got = Counter()
        for label, count in named.items():
            (hit,) = [n for n in want if n in label] or [label]
            got[hit] += count
        assert got == want, (key, named, want)
        unnamed = Counter()
        for g in part.unnamed:
            unnamed[g.label] += g.count
        want_unnamed = Counter(
            {classreport._signature(k): v for k, v in expected["unnamed"].get(key, {}).items()}
        )
        assert unnamed == want_unnamed, key
        assert part.passed == expected["passed"].get(key, 0), key
        assert part.failed == sum(want.values()) + sum(want_unnamed.values())
        assert [g.count for g in part.unnamed] == sorted(
            (g.count for g in part.unnamed), reverse=True
        )
        for g in part.mistakes:  # shares and students
            assert g.share == pytest.approx(g.count / part.failed)
            assert g.where.startswith("chapter ")
            (hit,) = [n for n in want if n in g.label]
            assert set(g.students) == expected["who"][(key[0], key[1], hit)]
    for a in report.assignments:
        assert {g.label: g.count for g in a.statuses} == dict(expected["status"][a.name])
        assert a.students == STUDENTS
    named_total = sum(sum(c.values()) for c in expected["named"].values())
    assert named_total > 0 and sum(sum(c.values()) for c in expected["unnamed"].values()) > 0


def test_anonymous_form_has_no_ids(simulated, tmp_path):
    db, expected = simulated
    report = classreport.build(db, COURSE, ASSIGNMENTS, anonymous=True, min_group=5)
    paths = classreport.write(report, str(tmp_path / "anon"))
    text = "".join(Path(p).read_text() for p in paths.values())
    assert not re.search(r"\bs\d{3}\b", text), "a student id in the anonymous report"
    for a in report.assignments:
        assert all(g.count >= 5 or g.label.startswith("other (") for g in a.statuses)
        for p in a.parts:
            for g in p.mistakes + p.unnamed:
                assert not g.students
                assert g.count >= 5 or g.label.startswith("other (")
            # merging keeps the totals
            assert sum(g.count for g in p.mistakes + p.unnamed) == p.failed
    full = classreport.build(db, COURSE, ASSIGNMENTS)
    assert re.search(r"\bs\d{3}\b", json.dumps(classreport.dataclasses.asdict(full)))


def test_regrade_and_persistence(simulated, tmp_path):
    db, _ = simulated
    first = classreport.build(db, COURSE, ASSIGNMENTS)
    paths = classreport.write(first, str(tmp_path / "first"))
    again = classreport.build(
        db, COURSE, ASSIGNMENTS, before=classreport.load(paths["report.json"])
    )
    for a in again.assignments:
        for p in a.parts:
            for g in p.mistakes + p.unnamed:
                assert g.before == g.count  # nothing changed in between
    # persistence: a student with named mistakes in both assignments is listed with both
    for item in first.persistent:
        assert {m.split(" / ")[0] for m in item.mistakes} == set(ASSIGNMENTS)
    assert first.persistent and sum(first.persistent_counts.values()) == len(first.persistent)


def test_command_line_and_page(simulated, tmp_path):
    """`python -m bertcourse.grade report` writes the three files; the page renders in
    headless Chromium (screenshot in _build/screenshots/)."""
    db, _ = simulated
    out = tmp_path / "report"
    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text(f"c.CourseDirectory.course_id = {COURSE!r}\n")
    result = subprocess.run(
        [sys.executable, "-m", "bertcourse.grade", "report", *ASSIGNMENTS, "--out", str(out),
         "--course", str(course), "--db", db],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for name in ("index.html", "report.json", "report.csv"):
        assert (out / name).stat().st_size > 0
    page = (out / "index.html").read_text()
    assert page.count("data:image/png;base64,") == len(ASSIGNMENTS)
    bad = subprocess.run(
        [sys.executable, "-m", "bertcourse.grade", "report", "nope", "--out", str(out),
         "--course", str(course), "--db", db],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert bad.returncode == 2 and "'nope' has no grades" in bad.stderr
    _screenshot(out / "index.html", ROOT / "_build" / "screenshots" / "class_report.png")


def _screenshot(page: Path, png: Path) -> None:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip("no chromium for the page check")
    from playwright.sync_api import sync_playwright

    png.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        tab = browser.new_page(viewport={"width": 1100, "height": 1400})
        tab.goto(page.as_uri())
        sizes = tab.eval_on_selector_all("img", "els => els.map(e => [e.naturalWidth, e.complete])")
        assert sizes and all(w > 100 and done for w, done in sizes), sizes
        assert "What the class got wrong" in tab.inner_text("h1")
        tab.screenshot(path=str(png), full_page=False)
        browser.close()
    assert png.stat().st_size > 10_000


def test_report_for_100_students_by_every_assignment(tmp_path):
    """100 students x every assignment (synthetic messages: the named ones are real headlines).
    The time is printed, for the README's figure, and not asserted: a busy machine is no bug."""
    from bertcourse.grading.mistakes import CATALOGUE

    headlines = [m.headline for c in CATALOGUE.values() for m in c]
    fake = {}
    for a in te.ASSIGNMENTS:
        _, tests = parts_of(a)
        fake[a] = {
            part.removesuffix("_tests"): [
                ("named", headlines[i % len(headlines)], ""),
                ("other", f"{part}: returned a wrong result:", ""),
            ]
            for i, (part, _) in enumerate(tests)
        }
    db = f"sqlite:///{tmp_path / 'big.db'}"
    make_class(db, fake, 100, assignments=te.ASSIGNMENTS)
    start = time.perf_counter()
    report = classreport.build(db, COURSE, te.ASSIGNMENTS)
    built = time.perf_counter() - start
    classreport.write(report, str(tmp_path / "big"))
    seconds = time.perf_counter() - start
    print(
        f"\nclass report, 100 students x {len(te.ASSIGNMENTS)} assignments: {seconds:.1f} s "
        f"({built:.1f} s reading the gradebook and building, the rest writing and plotting)"
    )
    assert [a.name for a in report.assignments] == te.ASSIGNMENTS
    assert all(a.students == 100 for a in report.assignments)
