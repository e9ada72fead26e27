"""The exercises pipeline: solutions -> nbgrader release -> simulated students -> grades.

Answers come from the instructor's solution (solutions/), and from
tests/exercise_answers/<assignment>.py: realistic wrong answers (each must lose exactly the
points of its part) and correct answers written differently (einsum, loops: full marks).

Two levels, for every assignment:

- `test_answers_in_process`: every answer variant on its own, its notebook's cells executed in
  this process (as the kernel would, hidden tests included), in milliseconds: the alternatives
  pass every test cell, the untouched release fails every one, and each wrong answer fails
  exactly the test cell of its part. (The solution alone runs in a kernel under nbval:
  tests/test_nbval.py.)
- `test_assignment_grades`: the real thing, in a temporary copy of the course
  (nbgrader_config.py + solutions/): `nbgrader generate_assignment` (the release must equal the
  committed exercises/), students made from the release notebook as a learner fills it in,
  `nbgrader zip_collect` of an LMS-style zip for two of them ("alice": the solution, "bob": the
  untouched release), ONE `nbgrader autograde` for all (nbgrader grades one notebook after the
  other; one command saves its ~2 s start-up per student), `generate_feedback`, `export` to CSV.
  Scores per test cell come from the gradebook, totals from the CSV. To keep CI time down, the
  first two wrong answers of each part go through nbgrader, grouped: round r gives the r-th
  wrong answer of every other part to one student ("wrongR-a": parts 1, 3, ...; "wrongR-b":
  parts 2, 4, ...), so each student's right parts show that its wrong answers cost nothing
  elsewhere.

Assignments are separate tests so that pytest-xdist runs them in parallel.
"""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = Path(__file__).resolve().parent / "exercise_answers"
COURSE_ID = "bertcourse"
# Wrong answers per part that go through nbgrader (the others run in process only): the issue's
# minimum of two, which keeps the seven pipeline tests within their CI budget.
NBGRADER_WRONG_PER_PART = 2


def _load_builder():
    spec = importlib.util.spec_from_file_location(
        "_build_notebooks", ROOT / "solutions" / "_build_notebooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


builder = _load_builder()
ASSIGNMENTS = builder.assignment_names()

BLOCK = re.compile(r"^# %% (wrong|alternative) ([\w-]+): (.+)$")


# --- answers --------------------------------------------------------------------------------


@dataclass
class Answer:
    kind: str  # "wrong" or "alternative"
    grade_id: str  # the answer cell it replaces
    label: str
    source: str
    names: str = ""  # for a wrong answer: what its feedback must name ("# names: ..." line)
    split: str = ""  # for a wrong answer: "dev" or "eval" ("# split: ..." line, issue 37)


def load_answers(assignment: str) -> list[Answer]:
    """The blocks of tests/exercise_answers/<assignment>.py."""
    path = ANSWERS / f"{assignment}.py"
    answers: list[Answer] = []
    lines: list[str] = []
    for line in path.read_text().splitlines():
        match = BLOCK.match(line)
        if match:
            lines = []
            answers.append(Answer(match.group(1), match.group(2), match.group(3), ""))
        elif answers and not lines and line.startswith("# names: "):
            answers[-1].names = line.removeprefix("# names: ").strip()
        elif answers and not lines and line.startswith("# split: "):
            answers[-1].split = line.removeprefix("# split: ").strip()
        elif answers:
            lines.append(line)
            answers[-1].source = "\n".join(lines).strip("\n")
    return answers


solution_answers = builder.solution_answers  # grade id -> the instructor's answer
fill = builder.fill  # a release notebook with answer cells filled in


# --- the course copy ------------------------------------------------------------------------


def nbgrader(course: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"nbgrader {' '.join(args)} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
        )
    return result


def make_course(tmp_path: Path, assignment: str) -> Path:
    """A course root with the config and this assignment's source only."""
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions" / assignment, course / "solutions" / assignment)
    return course


def notebook_fingerprint(nb: nbformat.NotebookNode) -> list[tuple]:
    """What must agree between two releases: cell types, sources and nbgrader metadata."""
    return [
        (c.cell_type, c.source, json.dumps(c.metadata.get("nbgrader", {}), sort_keys=True))
        for c in nb.cells
    ]


def cell_scores(course: Path, assignment: str, notebook: str) -> dict[str, dict[str, float]]:
    """student -> {test cell grade id -> auto score}, from the course's gradebook."""
    from nbgrader.api import Gradebook

    scores: dict[str, dict[str, float]] = {}
    with Gradebook(f"sqlite:///{course / '.grading' / 'gradebook.db'}", COURSE_ID) as gb:
        for submission in gb.assignment_submissions(assignment):
            nb = gb.find_submission_notebook(notebook, assignment, submission.student_id)
            scores[submission.student_id] = {g.name: g.auto_score for g in nb.grades}
    return scores


def run_in_process(
    source_nb: nbformat.NotebookNode, answers: dict[str, str]
) -> dict[str, str | None]:
    """Execute the source notebook (hidden tests included) with `answers` in its answer cells.

    Returns test cell id -> None when it passed, else the error. Cells run in one namespace,
    in order, as in a kernel; an error in one cell does not stop the next (as nbgrader).
    """
    namespace: dict = {"__name__": "__main__"}
    results: dict[str, str | None] = {}
    with torch.random.fork_rng(devices=[]):  # the notebooks seed torch's global generator
        _run_cells(source_nb, answers, namespace, results)
    return results


def _run_cells(source_nb, answers, namespace, results) -> None:
    for cell in source_nb.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        source = (
            answers.get(meta.get("grade_id"), cell.source) if meta.get("solution") else cell.source
        )
        error = None
        try:
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                exec(compile(source, f"<cell {meta.get('grade_id')}>", "exec"), namespace)
        except BaseException as e:  # noqa: BLE001 - a cell may raise anything, as in a kernel
            error = f"{type(e).__name__}: {str(e)[:300]}"
        if meta.get("grade"):
            results[meta["grade_id"]] = error


def release_answers(release_nb: nbformat.NotebookNode) -> dict[str, str]:
    """grade id -> the release's answer cell (`raise NotImplementedError()`)."""
    return {
        c.metadata.nbgrader["grade_id"]: c.source
        for c in release_nb.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }


@dataclass
class Student:
    id: str
    answers: dict[str, str]
    expected_zero: set[str] = field(default_factory=set)  # test cells that must score 0
    all_zero: bool = False
    via_zip: bool = False
    why: str = ""


# --- tests ----------------------------------------------------------------------------------


# assignments whose chapter page is not written yet (none now)
AHEAD_OF_CHAPTER: set[str] = set()


def test_solution_notebooks_match_their_sources():
    """solutions/chNN_*/<topic>.ipynb is what solutions/_src/chNN_*.py builds."""
    chapters = {p.stem.split("_")[0] for p in (ROOT / "book").glob("ch[0-9][0-9]_*.md")}
    # every chapter has an assignment, and no assignment lacks its chapter but those that come
    # before it (when the chapter lands, it must leave AHEAD_OF_CHAPTER)
    without_assignment: set[str] = set()
    assert not AHEAD_OF_CHAPTER & chapters, f"{AHEAD_OF_CHAPTER & chapters} have chapters now"
    numbers = {a.split("_")[0] for a in ASSIGNMENTS}
    assert numbers - AHEAD_OF_CHAPTER == chapters - without_assignment, (ASSIGNMENTS, chapters)
    stale = [
        name
        for name in ASSIGNMENTS
        if json.loads(builder.notebook_path(name).read_text())
        != json.loads(builder.render(builder.build_notebook(name)))
    ]
    assert not stale, f"rebuild with `python solutions/_build_notebooks.py --release`: {stale}"


def test_the_books_parts_table_is_built_from_the_sources():
    """book/exercises.md lists every assignment's parts and points as the notebooks have them."""
    page = builder.EXERCISES_PAGE.read_text()
    assert page == builder.exercises_page(), "rebuild with `python solutions/_build_notebooks.py`"
    for name in ASSIGNMENTS:
        nb = builder.build_notebook(name)
        points = [
            c.metadata.nbgrader["points"]
            for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade")
        ]
        row = next(line for line in page.splitlines() if f"`exercises/{name}/" in line)
        assert [int(p) for p in re.findall(r"\((\d+)\)", row.rsplit("|", 2)[1])] == points, (
            name,
            row,
        )


def test_exercise_titles_match_the_chapters():
    """`# Exercises N: <title>` where <title> is the chapter's own title in book/."""
    for name in ASSIGNMENTS:
        number = name.split("_")[0]
        if number in AHEAD_OF_CHAPTER:
            continue
        pages = list((ROOT / "book").glob(f"{number}_*.md"))
        assert len(pages) == 1, (name, pages)
        title = next(
            line[2:] for line in pages[0].read_text().splitlines() if re.match(r"^# [A-Z]", line)
        )
        first = builder.build_notebook(name).cells[0].source.splitlines()[0]
        assert first == f"# Exercises {int(number[2:])}: {title}", (name, first)


# (assignment, a wrong answer's label, the mistake its feedback must name): issue 12's
# "feedback that names the misconception", checked on the realistic wrong answers
KNOWN_MISTAKES = [
    ("ch01_attention", "no 1/sqrt(d_k) scaling", "no 1/sqrt(d_k) scaling"),
    ("ch01_attention", "divides by d_k instead", "divided by d_k, not sqrt(d_k)"),
    ("ch01_attention", "softmax over the queries", "the softmax over the queries"),
    ("ch02_masks", "inverted (1 = padding)", "an inverted mask (1 = padding)"),
    ("ch02_masks", "the original's -10000", "-10000 instead of the dtype's minimum"),
    ("ch02_masks", "-inf", "-inf instead of the dtype's minimum"),
    ("ch02_masks", "inverted (masks the tokens", "an inverted mask (the padding kept"),
    ("ch02_masks", "MultiheadAttention's polarity", "polarity (True = ignore)"),
    ("ch03_mlm", "int() truncates", "int() truncation"),
    ("ch03_mlm", "rounds halves up", "halves rounded up"),
    ("ch04_loss", "averaged over all positions", "the mean over every position"),
    ("ch04_loss", "the sum instead of the mean", "the sum instead of the mean"),
    ("ch04_loss", "forgets to divide", "not divided by the number of labelled items"),
    ("ch04_loss", "divides by all items", "divided by every item"),
    ("ch04_loss", "one_hot - softmax", "the opposite sign"),
    ("ch06_adam", "no bias correction", "no bias correction"),
    ("ch06_adam", "one step late", "bias correction with t + 1"),
    ("ch06_adam", "L2 in the gradient", "L2 regularisation instead of decoupled"),
    ("ch06_adam", "warm-up one step ahead", "warm-up one step early"),
    ("ch06_adam", "decays over all T steps", "the decay over all total_steps"),
]


# ... and every wrong answer whose block in tests/exercise_answers/ has a "# names: ..." line
KNOWN_MISTAKES += [
    (name, answer.label, answer.names)
    for name in ASSIGNMENTS
    for answer in load_answers(name)
    if answer.kind == "wrong" and answer.names
]


def _catalogues() -> dict[str, list]:
    import importlib
    import pkgutil

    from bertcourse.grading import catalogues, mistakes

    found = {f"mistakes:{k}": v for k, v in mistakes.CATALOGUE.items()}
    for info in pkgutil.iter_modules(catalogues.__path__):
        module = importlib.import_module(f"bertcourse.grading.catalogues.{info.name}")
        found.update({f"{info.name}:{k}": v for k, v in module.CATALOGUE.items()})
    return found


# issue 25's goal: a name for at least half of the wrong answers a learner really makes (the
# bank's answers that call a forbidden library function are not misconceptions and not counted)
NAMED_SHARE_GOAL = 0.5


def expected_name(assignment: str, answer: Answer) -> str:
    """What the feedback of a wrong answer must name ("" for none), as name_problems checks."""
    return answer.names or next(
        (n for a, label, n in KNOWN_MISTAKES if a == assignment and label in answer.label), ""
    )


def test_named_mistakes_cover_half_of_the_wrong_answers():
    """Counted over the banks: each name counted here is checked by test_answers_in_process
    (the answer's feedback gives exactly that name, and a name on any other answer fails)."""
    counts = {}
    for assignment in ASSIGNMENTS:
        wrong = [
            a
            for a in load_answers(assignment)
            if a.kind == "wrong" and "(forbidden)" not in a.label
        ]
        named = sum(bool(expected_name(assignment, a)) for a in wrong)
        counts[assignment] = (named, len(wrong))
    named, total = (sum(c[i] for c in counts.values()) for i in (0, 1))
    table = ", ".join(f"{a} {n}/{t}" for a, (n, t) in counts.items())
    print(f"\nnamed wrong answers: {named}/{total} ({named / total:.0%}): {table}")
    assert named / total >= NAMED_SHARE_GOAL, table
    assert all(t > 0 for _, t in counts.values()), f"an assignment without wrong answers: {table}"


def test_every_known_mistake_links_a_section_of_the_book():
    """A mistake's feedback names "chapter N, 'Section'": that section must exist (a heading of
    book/chNN_*.md that starts with the name; $, backslashes and backticks ignored)."""
    where = re.compile(r"chapter (\d+), '(.*?)'(?= \(|$)")
    clean = lambda text: re.sub(r"[$\\`]", "", text)  # noqa: E731
    problems = []
    for key, catalogue in _catalogues().items():
        for mistake in catalogue:
            match = where.match(mistake.where)
            if not match:
                problems.append(f"{key}: {mistake.where!r} is not \"chapter N, 'Section'\"")
                continue
            (page,) = (ROOT / "book").glob(f"ch{int(match.group(1)):02d}_*.md")
            headings = [
                clean(line.lstrip("#").strip())
                for line in page.read_text().splitlines()
                if line.startswith("## ") or line.startswith("### ")
            ]
            if not any(h.startswith(clean(match.group(2))) for h in headings):
                problems.append(f"{key}: no section {match.group(2)!r} in {page.name}")
    assert not problems, "\n".join(problems)


# every mistake's headline: the first line of a failure that names it
HEADLINES = {m.headline for catalogue in _catalogues().values() for m in catalogue}


def named_mistake(error: str) -> str | None:
    """The headline a failure's first line gives ("GradingError: <headline>"), or None."""
    first = error.split(": ", 1)[-1].splitlines()[0] if error else ""
    return first if first in HEADLINES else None


@pytest.mark.parametrize("assignment, label, mistake", KNOWN_MISTAKES)
def test_feedback_names_the_mistake(assignment, label, mistake):
    """The wrong answer fails its part, and the first line of the message names its mistake
    (the referee shows only that line for a hidden test)."""
    source = nbformat.read(builder.notebook_path(assignment), as_version=4)
    wrong = [a for a in load_answers(assignment) if a.kind == "wrong"]
    matches = [a for a in wrong if a.label == label] or [a for a in wrong if label in a.label]
    assert len(matches) == 1, (assignment, label, [a.label for a in matches])
    answer = matches[0]
    namespace: dict = {"__name__": "__main__"}
    messages = {}
    with torch.random.fork_rng(devices=[]):
        for cell in source.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code":
                continue
            code = answer.source if meta.get("grade_id") == answer.grade_id else cell.source
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(code, f"<cell {meta.get('grade_id')}>", "exec"), namespace)
            except Exception as error:  # noqa: BLE001 - a test cell's failure is its message
                messages[meta.get("grade_id")] = str(error)
    first_line = messages.get(f"{answer.grade_id}_tests", "(passed)").splitlines()[0]
    assert first_line in HEADLINES and mistake in first_line, first_line


def test_assignments_are_well_formed():
    """3-8 graded parts each; every answer cell has a test cell <id>_tests and answers to test it."""
    for name in ASSIGNMENTS:
        nb = builder.build_notebook(name)
        metas = [c.metadata["nbgrader"] for c in nb.cells if "nbgrader" in c.metadata]
        solutions = [m["grade_id"] for m in metas if m["solution"]]
        tests = {m["grade_id"]: m["points"] for m in metas if m["grade"]}
        assert 3 <= len(tests) <= 8, (name, tests)
        assert set(tests) == {f"{s}_tests" for s in solutions}, (name, solutions, tests)
        answers = load_answers(name)
        for grade_id in solutions:
            wrong = [a for a in answers if a.kind == "wrong" and a.grade_id == grade_id]
            assert len(wrong) >= 2, f"{name}: part {grade_id} needs at least two wrong answers"
        assert any(a.kind == "alternative" for a in answers), name
        for answer in answers:
            assert answer.grade_id in solutions, (name, answer.grade_id)
            compile(answer.source, f"{name}:{answer.label}", "exec")  # no accidental syntax errors


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_answers_in_process(assignment):
    """Each answer variant alone: exactly the expected test cells fail."""
    source = nbformat.read(builder.notebook_path(assignment), as_version=4)
    release = nbformat.read(
        ROOT / "exercises" / assignment / builder.notebook_path(assignment).name, as_version=4
    )
    correct = solution_answers(source)
    problems = []
    # the solution alone runs clean: tests/test_nbval.py, in a kernel (pytest --nbval-lax)
    results = run_in_process(source, release_answers(release))
    passed = [k for k, v in results.items() if v is None]
    if passed:
        problems.append(f"the untouched release passes {passed}")
    for answer in load_answers(assignment):
        results = run_in_process(source, {**correct, answer.grade_id: answer.source})
        failed = {k for k, v in results.items() if v is not None}
        expected = {f"{answer.grade_id}_tests"} if answer.kind == "wrong" else set()
        if failed != expected:
            details = {k: results[k] for k in failed}
            problems.append(
                f"{answer.kind} {answer.grade_id} ({answer.label}): expected to fail {expected or 'nothing'}, failed {details or 'nothing'}"
            )
        elif answer.kind == "wrong":
            problems += name_problems(assignment, answer, results[f"{answer.grade_id}_tests"])
    assert not problems, "\n".join(problems)


def name_problems(assignment: str, answer: Answer, error: str) -> list[str]:
    """A wrong answer's failure names its mistake ("# names: ...") or names none: a name
    given to an answer that makes another mistake teaches the wrong lesson."""
    named = named_mistake(error)
    names = expected_name(assignment, answer)
    if names and (named is None or names not in named):
        return [f"wrong {answer.grade_id} ({answer.label}): should name {names!r}: {error}"]
    if named and not names:
        return [f"wrong {answer.grade_id} ({answer.label}): named {named!r}, a wrong name"]
    return []


def wrong_and_alternative_students(
    answers: list[Answer], parts: list[str], correct: dict[str, str]
) -> list[Student]:
    """The simulated students of the nbgrader chain besides the solution and the untouched
    release: the first NBGRADER_WRONG_PER_PART wrong answers of each part (every variant runs
    in test_answers_in_process), round r of them in two students, one wrong in the even parts
    and one in the odd parts, so each wrong part sits next to right ones that must keep their
    points. The alternative answers fill those right parts where they can (each once), so they
    need no notebook of their own; what does not fit gets its own student, as before."""
    wrong = {p: [a for a in answers if a.kind == "wrong" and a.grade_id == p][:NBGRADER_WRONG_PER_PART] for p in parts}  # fmt: skip
    pending = [a for p in parts for a in answers if a.kind == "alternative" and a.grade_id == p]
    students = []
    for r in range(max(len(v) for v in wrong.values())):
        for name, group in zip("ab", [parts[0::2], parts[1::2]]):
            chosen = {p: wrong[p][r] for p in group if r < len(wrong[p])}
            if not chosen:
                continue
            alternative = {}
            for a in list(pending):
                if a.grade_id not in chosen and a.grade_id not in alternative:
                    alternative[a.grade_id] = a
                    pending.remove(a)
            why = [f"wrong {p}: {a.label}" for p, a in chosen.items()]
            why += [f"alternative {p}: {a.label}" for p, a in alternative.items()]
            students.append(
                Student(
                    f"wrong{r}-{name}",
                    {**correct, **{p: a.source for p, a in {**alternative, **chosen}.items()}},
                    expected_zero={f"{p}_tests" for p in chosen},
                    why="; ".join(why),
                )
            )
    for r in itertools.count():  # alternatives that found no place: a student per round
        chosen = {}
        for a in list(pending):
            if a.grade_id not in chosen:
                chosen[a.grade_id] = a
                pending.remove(a)
        if not chosen:
            break
        students.append(
            Student(
                f"alternative{r}",
                {**correct, **{p: a.source for p, a in chosen.items()}},
                why="; ".join(f"alternative {p}: {a.label}" for p, a in chosen.items()),
            )
        )
    return students


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_assignment_grades(tmp_path, assignment):
    """The instructor chain with nbgrader on simulated students; scores per test cell and CSV."""
    course = make_course(tmp_path, assignment)
    notebook = builder.notebook_path(assignment).stem
    problems: list[str] = []
    timings: dict[str, float] = {}

    # 1. release, and compare it with the committed student version
    start = time.perf_counter()
    nbgrader(course, "generate_assignment", assignment)
    timings["generate_assignment"] = time.perf_counter() - start
    release = nbformat.read(course / "exercises" / assignment / f"{notebook}.ipynb", as_version=4)
    committed = ROOT / "exercises" / assignment / f"{notebook}.ipynb"
    if not committed.exists() or notebook_fingerprint(
        nbformat.read(committed, as_version=4)
    ) != notebook_fingerprint(release):
        problems.append(
            f"exercises/{assignment} is out of date with solutions/: run "
            f"`python solutions/_build_notebooks.py --release {assignment}` and commit exercises/"
        )

    # 2. the students
    solution = nbformat.read(course / "solutions" / assignment / f"{notebook}.ipynb", as_version=4)
    correct = solution_answers(solution)
    points = {
        c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader["points"]
        for c in solution.cells
        if c.metadata.get("nbgrader", {}).get("grade")
    }
    parts = list(correct)  # answer cells in notebook order
    answers = load_answers(assignment)
    students = [
        Student("alice", correct, via_zip=True, why="the solution"),
        Student("bob", {}, all_zero=True, via_zip=True, why="the untouched release"),
    ]
    students += wrong_and_alternative_students(answers, parts, correct)

    downloaded = course / ".grading" / "downloaded" / assignment / "archive"
    downloaded.mkdir(parents=True)
    with zipfile.ZipFile(downloaded / "submissions.zip", "w") as zf:
        for number, student in enumerate(s for s in students if s.via_zip):
            nb = fill(release, student.answers)
            zf.writestr(
                f"{student.id}_{1000 + number}_{5000 + number}_{notebook}.ipynb",
                nbformat.writes(nb),
            )
    for student in students:
        if not student.via_zip:
            folder = course / ".grading" / "submitted" / student.id / assignment
            folder.mkdir(parents=True)
            nbformat.write(fill(release, student.answers), folder / f"{notebook}.ipynb")

    # 3. the instructor chain
    def step(name: str, *args: str) -> None:
        start = time.perf_counter()
        nbgrader(course, *args)
        timings[name] = time.perf_counter() - start

    step("zip_collect", "zip_collect", assignment)
    for student in students:
        if student.via_zip:
            assert (
                course / ".grading" / "submitted" / student.id / assignment / f"{notebook}.ipynb"
            ).exists(), student.id
    step("autograde", "autograde", assignment)
    step("generate_feedback", "generate_feedback", assignment)
    csv_path = course / "grades.csv"
    step("export", "export", "--to", str(csv_path))

    scores = cell_scores(course, assignment, notebook)
    total = float(sum(points.values()))
    with csv_path.open() as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    for student in students:
        got = scores.get(student.id)
        if got is None:
            problems.append(f"{student.id} ({student.why}): not graded")
            continue
        expected = {
            g: (0.0 if student.all_zero or g in student.expected_zero else float(p))
            for g, p in points.items()
        }
        got_tests = {g: got.get(g) for g in points}
        if got_tests != expected:
            problems.append(f"{student.id} ({student.why}): expected {expected}, got {got_tests}")
        row = rows.get(student.id)
        if (
            row is None
            or row["assignment"] != assignment
            or float(row["max_score"]) != total
            or float(row["score"]) != sum(expected.values())
        ):
            problems.append(
                f"{student.id}: CSV row {row} does not match the expected {sum(expected.values())} of {total}"
            )
        feedback = course / ".grading" / "feedback" / student.id / assignment / f"{notebook}.html"
        if not feedback.exists():
            problems.append(f"{student.id}: no feedback file {feedback.relative_to(course)}")
    # 4. the same students through the referee (python -m bertcourse.grade): same scores
    problems += referee_disagreements(course, assignment, students, points, timings)
    print(
        f"\n{assignment}: {len(students)} students, autograde {timings['autograde'] / len(students):.2f} s per notebook; "
        + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items())
    )
    assert not problems, "\n".join(problems)


def referee_disagreements(
    course: Path, assignment: str, students: list[Student], points: dict[str, float], timings
) -> list[str]:
    """Grade the course's submissions with the referee; where it disagrees with the expectation.

    The referee runs every test cell outside the kernel and calls the learner's functions with
    data, so this proves that each assignment's tests work across that boundary: the solution
    and the alternatives keep full marks, each wrong answer loses exactly its part.
    """
    from bertcourse.grade.runner import Options, run

    start = time.perf_counter()
    os.environ.setdefault("BERTCOURSE_REFEREE_KEY", "00" * 32)
    summary = run(
        Options(
            assignment=assignment, course=str(course), workers=2, progress=False, memory_mib=3072
        ),
        log=lambda *a: None,
    )
    timings["referee"] = time.perf_counter() - start
    with open(summary.csv, newline="") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    problems = []
    for student in students:
        row = rows.get(student.id)
        expected = {
            g: (0.0 if student.all_zero or g in student.expected_zero else float(p))
            for g, p in points.items()
        }
        if row is None:
            problems.append(f"referee: {student.id} has no row")
            continue
        got = {g: float(row[g] or 0.0) for g in points}
        if got != expected or row["status"] != "graded":
            problems.append(
                f"referee: {student.id} ({student.why}): expected graded {expected}, got "
                f"{row['status']} {got}: {row['detail'][:600]}"
            )
    return problems
