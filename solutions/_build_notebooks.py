"""Build the instructor notebooks solutions/chNN_<topic>/<topic>.ipynb from their text sources.

The sources are solutions/_src/chNN_<topic>.py, in the "percent" format (as jupytext), one
cell per `# %%` marker, with the cell's nbgrader role in brackets:

    # %% [markdown]                      read-only text (lines start with "# ")
    # %% [code]                          read-only code the learner runs (imports, data)
    # %% [solution] id=sdpa              the learner's answer: nbgrader "autograded answer";
                                         the code between ### BEGIN SOLUTION / ### END SOLUTION
                                         is replaced by `raise NotImplementedError()` in the release
    # %% [tests] id=sdpa_tests points=3  nbgrader "autograder tests", read-only; the lines between
                                         ### BEGIN HIDDEN TESTS / ### END HIDDEN TESTS are removed
                                         from the release and restored when grading
    # %% [scratch]                       a free code cell for the learner (not graded)

Usage (from the repository root):

    python solutions/_build_notebooks.py            # write the .ipynb files and the parts
                                                    # table of book/exercises.md
    python solutions/_build_notebooks.py --release  # ... and regenerate exercises/ with nbgrader
    python solutions/_build_notebooks.py --check    # exit 1 if a notebook is out of date
    python solutions/_build_notebooks.py --release --lang zh_CN
        # ... and write the Chinese release exercises-zh_CN/ from exercises/ and the catalogues
        # locales/zh_CN/LC_MESSAGES/exercises/*.po (scripts/i18n_exercises.py; with --check,
        # also exit 1 if a Chinese release is out of date)
    python solutions/_build_notebooks.py --time-autograde 8
        # in a temporary copy of the course: autograde the solutions as one student, assignment
        # by assignment, then 8 students of chapter 1 in one command; print the times

Edit the sources, not the notebooks: tests/test_exercises.py fails when a notebook differs
from what its source builds, or when exercises/ differs from what nbgrader generates.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
SRC = HERE / "_src"
ROOT = HERE.parent

MARKER = re.compile(r"^# %% \[(markdown|code|solution|tests|scratch)\](.*)$")
KINDS = ("markdown", "code", "solution", "tests", "scratch")


def assignment_names() -> list[str]:
    """The assignments, from the source files: ch01_attention, ch02_masks, ..."""
    return sorted(p.stem for p in SRC.glob("ch[0-9][0-9]_*.py"))


def notebook_path(assignment: str) -> Path:
    """solutions/ch01_attention/attention.ipynb for "ch01_attention"."""
    topic = assignment.split("_", 1)[1]
    return HERE / assignment / f"{topic}.ipynb"


def _parse_options(text: str, where: str) -> dict[str, str]:
    options = {}
    for item in text.split():
        if "=" not in item:
            raise ValueError(f"{where}: expected key=value in the cell marker, got {item!r}")
        key, value = item.split("=", 1)
        options[key] = value
    return options


def parse_source(path: Path) -> list[dict]:
    """The cells of a source file: dicts with kind, options, and source text."""
    cells: list[dict] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = MARKER.match(line)
        if match:
            where = f"{path.name}:{number}"
            cells.append(
                {
                    "kind": match.group(1),
                    "options": _parse_options(match.group(2), where),
                    "lines": [],
                    "where": where,
                }
            )
        elif cells:
            cells[-1]["lines"].append(line)
        elif line.strip() and not line.startswith("#"):
            raise ValueError(f"{path.name}:{number}: text before the first '# %%' cell marker")
    for cell in cells:
        lines = cell.pop("lines")
        while lines and not lines[-1].strip():
            lines.pop()
        if cell["kind"] == "markdown":
            lines = [_uncomment(line, cell["where"]) for line in lines]
        cell["source"] = "\n".join(lines).strip("\n")
    return cells


def _uncomment(line: str, where: str) -> str:
    if line == "#":
        return ""
    if line.startswith("# "):
        return line[2:]
    if not line.strip():
        return ""
    raise ValueError(f"{where}: markdown lines must start with '# ', got {line!r}")


def build_notebook(assignment: str) -> nbformat.NotebookNode:
    """The nbgrader notebook of one assignment, with ids and metadata set for every cell."""
    cells = parse_source(SRC / f"{assignment}.py")
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    seen: set[str] = set()
    counters = {kind: 0 for kind in KINDS}
    for cell in cells:
        kind, options = cell["kind"], cell["options"]
        counters[kind] += 1
        grade_id = options.get("id") or f"{kind}-{counters[kind]:02d}"
        if kind in ("solution", "tests") and "id" not in options:
            raise ValueError(f"{cell['where']}: a [{kind}] cell needs id=<grade id>")
        if grade_id in seen:
            raise ValueError(f"{cell['where']}: duplicate cell id {grade_id!r}")
        seen.add(grade_id)
        source = cell["source"]
        meta = {
            "grade": kind == "tests",
            "grade_id": grade_id,
            "locked": kind in ("markdown", "code", "tests"),
            "schema_version": 3,
            "solution": kind == "solution",
            "task": False,
        }
        if kind == "tests":
            meta["points"] = int(options["points"])
            if "### BEGIN HIDDEN TESTS" not in source:
                raise ValueError(f"{cell['where']}: a [tests] cell needs hidden tests")
        if kind == "solution" and "### BEGIN SOLUTION" not in source:
            raise ValueError(f"{cell['where']}: a [solution] cell needs ### BEGIN SOLUTION")
        if kind == "markdown":
            new = nbformat.v4.new_markdown_cell(source)
        else:
            new = nbformat.v4.new_code_cell(source)
        new.id = grade_id
        if kind != "scratch":
            new.metadata["nbgrader"] = meta
        nb.cells.append(new)
    nbformat.validate(nb)
    return nb


PART = re.compile(r"^## Part \d+: (.+) \((\d+) points?\)$", re.MULTILINE)
TABLE_START = "<!-- parts table: written by solutions/_build_notebooks.py from solutions/_src -->"
TABLE_END = "<!-- end of the parts table -->"
EXERCISES_PAGE = ROOT / "book" / "exercises.md"


def parts_table() -> str:
    """The book's table of assignments, parts and points (book/exercises.md), from the sources."""
    rows = ["| Chapter | Notebook | Parts (points) |", "|---|---|---|"]
    for name in assignment_names():
        nb = build_notebook(name)
        title = nb.cells[0].source.splitlines()[0].split(": ", 1)[1]  # "# Exercises 1: Attention"
        parts = [
            f"{text} ({points})"
            for cell in nb.cells
            if cell.cell_type == "markdown"
            for text, points in PART.findall(cell.source)
        ]
        number = name[2:4]
        chapter = f"{int(number)}. {title}"
        pages = list((ROOT / "book").glob(f"ch{number}_*.md"))
        if pages:  # (an assignment may come before its chapter: chapter 10, issue 38)
            (page,) = pages
            chapter = f"[{chapter}]({page.name})"
        notebook = notebook_path(name).relative_to(HERE)
        rows.append(f"| {chapter} | `exercises/{notebook}` | {', '.join(parts)} |")
    return "\n".join(rows)


def exercises_page() -> str:
    """book/exercises.md with its parts table rewritten."""
    text = EXERCISES_PAGE.read_text()
    head, rest = text.split(TABLE_START + "\n", 1)
    _, tail = rest.split(TABLE_END, 1)
    return f"{head}{TABLE_START}\n{parts_table()}\n{TABLE_END}{tail}"


def render(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def solution_answers(solution: nbformat.NotebookNode) -> dict[str, str]:
    """grade id -> the instructor's answer in a solution notebook, BEGIN/END SOLUTION lines removed."""
    delimiters = ("### BEGIN SOLUTION", "### END SOLUTION")
    return {
        c.metadata.nbgrader["grade_id"]: "\n".join(
            line for line in c.source.splitlines() if line.strip() not in delimiters
        )
        for c in solution.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }


def fill(release: nbformat.NotebookNode, answers: dict[str, str]) -> nbformat.NotebookNode:
    """A copy of a release notebook with the given answer cells filled in, as a learner would."""
    nb = nbformat.reads(nbformat.writes(release), as_version=4)
    for c in nb.cells:
        meta = c.metadata.get("nbgrader", {})
        if meta.get("solution") and meta["grade_id"] in answers:
            c.source = answers[meta["grade_id"]]
    return nb


def time_autograde(names: list[str], batch: int) -> None:
    """Print autograde wall and CPU times (nbgrader and its kernels) for solved notebooks."""

    def nbgrader(course: Path, *args: str) -> tuple[float, float]:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "nbgrader", *args], cwd=course, check=True, capture_output=True
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
        return time.perf_counter() - start, cpu

    with tempfile.TemporaryDirectory() as tmp:
        course = Path(tmp)
        shutil.copy(ROOT / "nbgrader_config.py", course)
        for name in names:
            shutil.copytree(HERE / name, course / "solutions" / name)
            nbgrader(course, "generate_assignment", name)

        def submit(student: str, name: str) -> None:
            nb_name = notebook_path(name).name
            release = nbformat.read(course / "exercises" / name / nb_name, as_version=4)
            solution = nbformat.read(course / "solutions" / name / nb_name, as_version=4)
            folder = course / ".grading" / "submitted" / student / name
            folder.mkdir(parents=True, exist_ok=True)
            nbformat.write(fill(release, solution_answers(solution)), folder / nb_name)

        total_wall = total_cpu = 0.0
        for name in names:
            submit("one", name)
            wall, cpu = nbgrader(course, "autograde", name, "--student=one")
            total_wall, total_cpu = total_wall + wall, total_cpu + cpu
            print(f"one student, {name}: {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
        print(f"one student, all {len(names)}: {total_wall:.1f} s wall, {total_cpu:.1f} s CPU")
        if batch:
            for i in range(batch):
                submit(f"batch{i:03d}", names[0])
            wall, cpu = nbgrader(course, "autograde", names[0], "--student=batch*")
            print(
                f"{batch} students of {names[0]} in one command: {wall:.1f} s wall "
                f"({wall / batch:.2f} s per notebook), {cpu:.1f} s CPU ({cpu / batch:.2f} s per notebook)"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check, write nothing")
    parser.add_argument(
        "--release", action="store_true", help="then run nbgrader generate_assignment"
    )
    parser.add_argument(
        "--time-autograde",
        type=int,
        metavar="N",
        default=None,
        help="time autograding the solutions (one student, then N students of the first assignment)",
    )
    parser.add_argument(
        "--lang",
        choices=["zh_CN"],
        help="then write the release in this language too (exercises-<lang>/)",
    )
    parser.add_argument("assignments", nargs="*", help="default: all")
    args = parser.parse_args(argv)
    names = args.assignments or assignment_names()
    if args.time_autograde is not None:
        time_autograde(names, args.time_autograde)
        return 0
    stale = []
    for name in names:
        path = notebook_path(name)
        text = render(build_notebook(name))
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    page = exercises_page()
    if EXERCISES_PAGE.read_text() != page:
        stale.append(EXERCISES_PAGE)
        if not args.check:
            EXERCISES_PAGE.write_text(page)
            print(f"wrote {EXERCISES_PAGE.relative_to(ROOT)}")
    if args.check:
        if args.lang:
            stale += translated_releases(names, args.lang, check=True)
        for path in stale:
            print(f"out of date: {path.relative_to(ROOT)}")
        return 1 if stale else 0
    if args.release:
        for name in names:
            subprocess.run(
                [sys.executable, "-m", "nbgrader", "generate_assignment", name, "--force"],
                cwd=ROOT,
                check=True,
            )
    if args.lang:
        translated_releases(names, args.lang, check=False)
    return 0


def translated_releases(names: list[str], lang: str, check: bool) -> list[Path]:
    """The release in `lang` from exercises/ and the catalogues (scripts/i18n_exercises.py)."""
    sys.modules.setdefault("_build_notebooks", sys.modules[__name__])
    spec = importlib.util.spec_from_file_location(
        "i18n_exercises", ROOT / "scripts" / "i18n_exercises.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["i18n_exercises"] = module  # (its dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module.write_releases(names, lang, check=check)


if __name__ == "__main__":
    sys.exit(main())
