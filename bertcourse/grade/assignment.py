"""What the grader knows about an assignment before it looks at any submission.

Everything comes from nbgrader: the gradebook's source cells (the instructor's version of each
locked cell, hidden tests included, its checksum and points) and, for the order of the cells
and the set-up imports, the source notebook in the course's source folder. The result is a
plain, picklable `AssignmentSpec` that the main process builds once and sends to the workers.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import tempfile

import nbformat
from nbformat import NotebookNode
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import ClearHiddenTests
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

# modules every kernel imports: the zygote imports them once (jail.Zygote)
ALWAYS_PRELOADED = [
    "torch",
    "torch._dynamo",  # torch.optim imports it on first use (`_disable_dynamo`): 1.8 s a kernel
    "numpy",
    "bertcourse",
    "bertcourse.grading",
    "bertcourse.grade.boundary.remote",
]


def normalize_db_url(url: str) -> str:
    """`postgresql://...` through psycopg2 (pinned here) when psycopg 3 is not installed.

    SQLAlchemy 2.1 reads a bare `postgresql://` as psycopg 3.
    """
    import importlib.util

    if url.startswith("postgresql://") and importlib.util.find_spec("psycopg") is None:
        if importlib.util.find_spec("psycopg2") is not None:
            return "postgresql+psycopg2://" + url[len("postgresql://") :]
    return url


def load_coursedir(course: str, db: str | None) -> tuple[CourseDirectory, Config]:
    """The course's nbgrader configuration (nbgrader_config.py in the course folder)."""
    root = os.path.abspath(course)
    path = os.path.join(root, "nbgrader_config.py")
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"no nbgrader_config.py in {root}: run from the course folder or pass --course"
        )
    config = PyFileConfigLoader("nbgrader_config.py", path=root).load_config()
    if "root" not in config.CourseDirectory:
        config.CourseDirectory.root = root
    if db:
        config.CourseDirectory.db_url = normalize_db_url(db)
    coursedir = CourseDirectory(config=config)
    return coursedir, config


@dataclasses.dataclass
class CellSpec:
    """One cell of the instructor's notebook that nbgrader tracks (it has a grade_id)."""

    name: str
    cell_type: str
    locked: bool
    source: str  # as stored in the gradebook: hidden tests included
    visible_source: str  # what students were given: hidden tests removed
    checksum: str | None
    grade: bool
    solution: bool
    task: bool
    points: float | None

    @property
    def is_test(self) -> bool:
        """An autograded test cell (a code grade cell that is not an answer cell)."""
        return self.grade and not self.solution and self.cell_type == "code"

    def metadata(self) -> dict:
        """The nbgrader cell metadata the instructor's version carries."""
        md = {
            "grade": self.grade,
            "grade_id": self.name,
            "locked": self.locked,
            "schema_version": 3,
            "solution": self.solution,
            "task": self.task,
        }
        if self.grade or self.task:
            md["points"] = self.points
        if self.checksum:
            md["checksum"] = self.checksum
        return md


@dataclasses.dataclass
class NotebookSpec:
    name: str
    cells: list[CellSpec]  # in the order of the source notebook
    preload: list[str]  # modules the notebook's instructor cells import (for the zygote)

    @property
    def parts(self) -> list[CellSpec]:
        """The graded cells (tests, manually graded answers, tasks) in notebook order."""
        return [c for c in self.cells if c.grade or c.task]

    def cell(self, name: str) -> CellSpec | None:
        for c in self.cells:
            if c.name == name:
                return c
        return None


@dataclasses.dataclass
class AssignmentSpec:
    name: str
    course_id: str
    notebooks: list[NotebookSpec]

    @property
    def max_score(self) -> float:
        return sum(c.points or 0.0 for nb in self.notebooks for c in nb.parts)

    def part_columns(self) -> list[tuple[str, str, str]]:
        """(column name, notebook, grade_id) for every graded part, in order."""
        names = [c.name for nb in self.notebooks for c in nb.parts]
        out = []
        for nb in self.notebooks:
            for c in nb.parts:
                column = c.name if names.count(c.name) == 1 else f"{nb.name}/{c.name}"
                out.append((column, nb.name, c.name))
        return out


def strip_hidden_tests(source: str) -> str:
    """The source without its `### BEGIN HIDDEN TESTS` ... `### END HIDDEN TESTS` regions."""
    cell = NotebookNode(cell_type="code", source=source, metadata={}, outputs=[])
    ClearHiddenTests(enforce_metadata=False)._remove_hidden_test_region(cell)
    return cell.source


def _imports(source: str, skip: set[str]) -> tuple[list[str], set[str]]:
    """Top-level import statements of a cell (minus names in `skip`) and the modules they name."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [], set()
    lines, modules = [], set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            keep = [a for a in stmt.names if (a.asname or a.name).split(".")[0] not in skip]
            modules.update(a.name for a in stmt.names)
            if keep:
                lines.append(ast.unparse(ast.Import(names=keep)))
        elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
            keep = [a for a in stmt.names if (a.asname or a.name) not in skip and a.name != "*"]
            modules.add(stmt.module)
            if keep:
                lines.append(ast.unparse(ast.ImportFrom(module=stmt.module, names=keep, level=0)))
    return lines, modules


def _preload(cells: list[CellSpec]) -> list[str]:
    """The modules the instructor's code cells import (the zygote imports them once)."""
    modules = set(ALWAYS_PRELOADED)
    for c in cells:
        if c.cell_type == "code" and c.locked:
            modules |= _imports(c.source, set())[1]
    return sorted(modules)


def _source_order(coursedir: CourseDirectory, assignment: str, notebook: str) -> list[str]:
    for step in (coursedir.source_directory, coursedir.release_directory):
        path = os.path.join(coursedir.format_path(step, ".", assignment), f"{notebook}.ipynb")
        if os.path.exists(path):
            nb = nbformat.read(path, as_version=4)
            return [
                c.metadata["nbgrader"]["grade_id"]
                for c in nb.cells
                if isinstance(c.metadata.get("nbgrader"), dict)
                and "grade_id" in c.metadata["nbgrader"]
            ]
    return []


def ensure_in_gradebook(coursedir: CourseDirectory, assignment: str, log=None) -> None:
    """Record the assignment in the gradebook as `nbgrader generate_assignment` does.

    The release goes to a temporary folder: the course's release folder is left alone.
    """
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        try:
            gb.find_assignment(assignment)
            if gb.find_assignment(assignment).notebooks:
                return
        except MissingEntry:
            pass
    from nbgrader.converters import GenerateAssignment
    from traitlets.config import Config

    source = coursedir.format_path(coursedir.source_directory, ".", assignment)
    if not os.path.isdir(source):
        raise FileNotFoundError(
            f"assignment {assignment!r} is neither in the gradebook ({coursedir.db_url}) nor in "
            f"the source folder ({source}): check the name, or run `nbgrader generate_assignment`"
        )
    with tempfile.TemporaryDirectory(prefix="bertcourse-release-") as tmp:
        config = Config()
        config.CourseDirectory.root = coursedir.root
        config.CourseDirectory.course_id = coursedir.course_id
        config.CourseDirectory.db_url = coursedir.db_url
        config.CourseDirectory.source_directory = coursedir.source_directory
        config.CourseDirectory.release_directory = tmp
        config.CourseDirectory.assignment_id = assignment
        config.GenerateAssignment.create_assignment = True
        config.BaseConverter.force = True
        tmp_dir = CourseDirectory(config=config)
        converter = GenerateAssignment(coursedir=tmp_dir, config=config)
        if log is not None:
            log(f"recording {assignment} in the gradebook (as nbgrader generate_assignment does)")
        try:
            converter.start()
        except Exception:
            # another grader may have recorded it at the same moment
            with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
                try:
                    if gb.find_assignment(assignment).notebooks:
                        return
                except MissingEntry:
                    pass
            raise


def load_assignment(coursedir: CourseDirectory, assignment: str) -> AssignmentSpec:
    """Read the assignment's notebooks and cells from the gradebook (see the module docstring)."""
    notebooks = []
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        record = gb.find_assignment(assignment)
        for notebook in sorted(record.notebooks, key=lambda n: n.name):
            grades = {c.name: c for c in notebook.grade_cells}
            tasks = {c.name: c for c in notebook.task_cells}
            solutions = {c.name for c in notebook.solution_cells}
            cells = []
            for sc in notebook.source_cells:
                grade, task = sc.name in grades, sc.name in tasks
                solution = sc.name in solutions
                graded = grades.get(sc.name) or tasks.get(sc.name)
                points = float(graded.max_score) if graded is not None else None
                cells.append(
                    CellSpec(
                        name=sc.name,
                        cell_type=sc.cell_type,
                        locked=bool(sc.locked),
                        source=sc.source or "",
                        visible_source=strip_hidden_tests(sc.source or ""),
                        checksum=sc.checksum,
                        grade=grade,
                        solution=solution,
                        task=task,
                        points=points,
                    )
                )
            order = _source_order(coursedir, assignment, notebook.name)
            rank = {name: i for i, name in enumerate(order)}
            cells.sort(key=lambda c: (rank.get(c.name, len(rank)), c.name))
            notebooks.append(NotebookSpec(notebook.name, cells, _preload(cells)))
    return AssignmentSpec(assignment, coursedir.course_id, notebooks)
