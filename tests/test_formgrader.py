"""nbgrader's formgrader in JupyterLab, driven in headless Chromium (scripts/check_formgrader.py).

A temporary course with every assignment's source and three submissions of ch02_masks, graded
by one `nbgrader autograde`: alice (the solution), bob (the untouched release), carol (the
solution with a locked test cell replaced by `pass`). Then `python -m bertcourse.grade
--student carol`. The browser must show every assignment, the three submissions with the
scores of nbgrader's gradebook, bob's failed tests and carol flagged. Screenshots go to
_build/screenshots/formgrader_{lab,submissions,gradebook}.png.

The instructor's tools are off in the project's environment (scripts/install.sh); this
JupyterLab turns them on for itself only, with its own HOME and Jupyter folders in tmp_path
(check_formgrader.write_lab_config), so nothing left by an earlier run counts.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "check_formgrader", ROOT / "scripts" / "check_formgrader.py"
)
fg = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = fg  # dataclasses look their module up there
_spec.loader.exec_module(fg)

A = fg.ASSIGNMENT


def _points(notebook: Path) -> float:
    """The points of the notebook's graded cells, read from their nbgrader metadata."""
    nb = nbformat.read(notebook, as_version=4)
    return float(sum(c.metadata.get("nbgrader", {}).get("points", 0) for c in nb.cells))


STUDENTS = ["alice", "bob", "carol"]


@pytest.mark.slow
def test_formgrader_shows_the_graded_submissions(tmp_path):
    pytest.importorskip("playwright", reason="pip install -r requirements.txt (playwright)")
    if fg.find_chromium() is None:
        pytest.skip("no Chromium: the test suite installs it (scripts/install.sh --chromium)")
    assignments = fg._builder().assignment_names()
    course = tmp_path / "course"
    notebook = fg.build_course(course)

    log = fg.autograde(course)
    by_nbgrader = fg.gradebook_rows(course, A, notebook)
    total = _points(course / "solutions" / A / f"{notebook}.ipynb")
    assert total >= 5, f"{A} should have at least 5 points, its notebook has {total}"
    assert {
        s: (r.score, r.max_score, r.failed_tests, r.flagged) for s, r in by_nbgrader.items()
    } == {
        "alice": (total, total, False, False),
        "bob": (0.0, total, True, False),
        "carol": (total, total, False, False),  # nbgrader restored her test cell and says nothing
    }
    # its only trace of the edit is a warning it prints for every student of this assignment
    # (their copies lack the hidden tests), so it cannot tell carol apart
    warning = f"Attribute 'checksum' for cell {fg.TAMPERED_CELL} has changed"
    assert log.count(warning) == len(STUDENTS), log[-3000:]

    fg.regrade_with_bertcourse(course, A, ["carol"])
    expected = fg.gradebook_rows(course, A, notebook)
    assert expected["carol"].flagged, "bertcourse.grade did not flag the edited test cell"
    assert expected["alice"] == by_nbgrader["alice"] and expected["bob"] == by_nbgrader["bob"]

    shots = fg.SCREENSHOTS
    shots.mkdir(parents=True, exist_ok=True)
    with fg.jupyter_lab(course, tmp_path / "jupyter") as lab, fg.chromium_page() as page:
        panel = fg.open_formgrader_in_lab(page, lab, shots / "formgrader_lab.png")
        assert panel == assignments  # JupyterLab's Nbgrader > Formgrader panel
        counts = fg.manage_assignments(page, lab)
        assert counts == {a: 3 if a == A else 0 for a in assignments}
        submissions = fg.manage_submissions(page, lab, A, shots / "formgrader_submissions.png")
        assert sorted(
            (line.student, line.name, line.status, line.score) for line in submissions
        ) == [
            (s, f"{fg.NAMES[s][1]}, {fg.NAMES[s][0]}", "graded", fg.score_text(expected[s]))
            for s in STUDENTS
        ]
        shown = fg.notebook_gradebook(page, lab, A, notebook, shots / "formgrader_gradebook.png")
    student_of = {f"{last}, {first}": s for s, (first, last) in fg.NAMES.items()}
    shown = {student_of[line.name]: line for line in shown}  # the page orders by submission id
    assert shown == {
        s: fg.GradebookLine(
            f"{fg.NAMES[s][1]}, {fg.NAMES[s][0]}",
            fg.score_text(expected[s]),
            expected[s].failed_tests,
            expected[s].flagged,
        )
        for s in STUDENTS
    }
    assert {s: (line.failed_tests, line.flagged) for s, line in shown.items()} == {
        "alice": (False, False),
        "bob": (True, False),
        "carol": (False, True),
    }
    for name in ("lab", "submissions", "gradebook"):
        assert (shots / f"formgrader_{name}.png").stat().st_size > 10_000
