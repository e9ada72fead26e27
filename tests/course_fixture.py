"""The toy course of the grader's tests (tests/hostile/course), set up once.

`make_toy_course(target)` copies the course to `target` with its release already generated
(`nbgrader generate_assignment toy`, run once per test process on a template) and returns the
solution, the release and an honest submission (the release with the instructor's answers).
The fixture `toy_course` is the same as a factory: `toy_course("name")` gives a fresh copy in a
new temporary folder. Registered in tests/conftest.py (`pytest_plugins`).
"""

from __future__ import annotations

import atexit
import dataclasses
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest
from hostile.bank import make_student_notebook
from nbformat import NotebookNode

SOURCE = Path(__file__).parent / "hostile" / "course"
_template: Path | None = None


@dataclasses.dataclass
class ToyCourse:
    root: Path
    source: NotebookNode  # solutions/toy/toy.ipynb
    release: NotebookNode  # exercises/toy/toy.ipynb
    honest: NotebookNode  # the release with the instructor's answers: full marks

    @property
    def submitted(self) -> Path:
        return self.root / ".grading" / "submitted"


def _generated() -> Path:
    global _template
    if _template is None:
        base = Path(tempfile.mkdtemp(prefix="toy-course-"))
        atexit.register(shutil.rmtree, base, True)
        course = base / "course"
        shutil.copytree(SOURCE, course)
        done = subprocess.run(
            [sys.executable, "-m", "nbgrader", "generate_assignment", "toy", "--force"],
            cwd=course,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"nbgrader generate_assignment toy failed ({done.returncode}):\n"
                f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
            )
        _template = course
    return _template


def make_toy_course(target: Path) -> ToyCourse:
    """A copy of the toy course at `target` (which must not exist), release generated."""
    shutil.copytree(_generated(), target, symlinks=True)
    source = nbformat.read(target / "solutions" / "toy" / "toy.ipynb", as_version=4)
    release = nbformat.read(target / "exercises" / "toy" / "toy.ipynb", as_version=4)
    return ToyCourse(target, source, release, make_student_notebook(release, source))


@pytest.fixture(scope="session")
def toy_course(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], ToyCourse]:
    def make(name: str = "toy") -> ToyCourse:
        return make_toy_course(tmp_path_factory.mktemp(name) / "course")

    return make
