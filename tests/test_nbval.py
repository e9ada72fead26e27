"""The notebooks under nbval, as its users run it: `pytest --nbval-lax <notebooks>` (issue 34).

For each assignment, one `python -m pytest --nbval-lax` from the repository's root runs its
solution notebook (solutions/) and its released notebook (exercises/), each in a kernel of its
own, every code cell a test ("Cell N", N counting code cells); `--nbval-lax` checks that a cell
runs, not what it prints. Then:

- every cell of the solution runs (the answers, the visible and the hidden tests: this replaces
  the in-process run of the solution that tests/test_exercises.py used to make);
- the released notebook, as a learner gets it, fails only where a part is still to be written:
  each failing cell fails with NotImplementedError (no NameError, ImportError or missing file
  a learner could not fix), and every graded test cell fails (no point for an empty answer).

nbval runs each kernel with its stderr sent to os.devnull (nbval/kernel.py), so no kernel
warning reaches the output. The results come from pytest's JUnit XML report.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted(p for p in (ROOT / "solutions").glob("ch*/*.ipynb"))
UNWRITTEN = "NotImplementedError"
# seconds a cell may run: the longest measured was 22 s (solutions/ch06_adam, cell 14, at a load
# of 13 on 2 cores); this limit only stops a kernel that hangs or died (nbval's own is 2,000 s)
CELL_TIMEOUT_S = 300


@dataclass(frozen=True)
class CellResult:
    notebook: str  # relative to the root: solutions/ch01_attention/attention.ipynb
    cell: int  # among the notebook's code cells, as nbval numbers them
    error: str | None  # the failure's text (nbval's message and the kernel's traceback)


def nbval(notebooks: list[Path], report: Path) -> list[CellResult]:
    """`pytest --nbval-lax` on `notebooks`, from the root; each code cell's result."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval-lax", f"--nbval-cell-timeout={CELL_TIMEOUT_S}",
         "-p", "no:cacheprovider", "-q", f"--junitxml={report}",
         *(str(n.relative_to(ROOT)) for n in notebooks)],
        cwd=ROOT, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert report.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    results = []
    for case in ET.parse(report).iter("testcase"):
        # classname "solutions.ch01_attention.attention.ipynb", name "Cell 3"
        folder, assignment, notebook = case.get("classname").split(".", 2)
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        error = None if problem is None else f"{problem.get('message', '')}\n{problem.text or ''}"
        cell = int(case.get("name").removeprefix("Cell "))
        results.append(CellResult(f"{folder}/{assignment}/{notebook}", cell, error))
    return results


def graded_test_cells(notebook: Path) -> set[int]:
    """The code-cell numbers of the notebook's graded test cells (nbgrader `grade`, no answer)."""
    code = [c for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code"]
    graded = set()
    for number, cell in enumerate(code):
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            graded.add(number)
    return graded


def code_cells(notebook: Path) -> int:
    return sum(c.cell_type == "code" for c in nbformat.read(notebook, as_version=4).cells)


@pytest.mark.parametrize("solution", SOLUTIONS, ids=lambda p: p.parent.name)
def test_notebooks_under_nbval_lax(tmp_path: Path, solution: Path) -> None:
    release = ROOT / "exercises" / solution.parent.name / solution.name
    notebooks = [solution] + ([release] if release.is_file() else [])
    results = nbval(notebooks, tmp_path / "nbval.xml")
    by_notebook = {
        n: [r for r in results if r.notebook == str(n.relative_to(ROOT))] for n in notebooks
    }
    for notebook in notebooks:  # every code cell ran as a test
        assert len(by_notebook[notebook]) == code_cells(notebook), notebook

    broken = {r.cell: r.error for r in by_notebook[solution] if r.error}
    assert broken == {}, f"{solution.relative_to(ROOT)}: cells that fail: {broken}"
    if release not in by_notebook:  # an assignment not released yet (tests/test_exercises.py)
        return
    failed = {r.cell: r.error for r in by_notebook[release] if r.error}
    other = {cell: error for cell, error in failed.items() if UNWRITTEN not in error}
    assert other == {}, (
        f"{release.relative_to(ROOT)}: cells that fail but not as unwritten: {other}"
    )
    passing = graded_test_cells(release) - set(failed)
    assert passing == set(), (
        f"{release.relative_to(ROOT)}: test cells pass an empty answer: {passing}"
    )
