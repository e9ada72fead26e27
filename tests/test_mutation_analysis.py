"""scripts/mutation_analysis.py: the operators make real mutants, and a mutant's fate is read
from a forked child (passed, failed, or stopped by the time limit)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location(
    "mutation_analysis", ROOT / "scripts" / "mutation_analysis.py"
)
ma = importlib.util.module_from_spec(spec)
sys.modules["mutation_analysis"] = ma  # dataclasses look their module up
spec.loader.exec_module(ma)

ANSWER = '''def f(x, n=2):
    """a docstring"""
    ### BEGIN SOLUTION
    y = x * n + 1
    if y > 3:
        return abs(y)
    return y
    ### END SOLUTION
'''


def _notebook(test_source: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    answer = nbformat.v4.new_code_cell(ANSWER)
    answer.metadata["nbgrader"] = {"grade_id": "f", "solution": True, "grade": False}
    tests = nbformat.v4.new_code_cell(test_source)
    tests.metadata["nbgrader"] = {"grade_id": "f_tests", "solution": False, "grade": True}
    nb.cells = [answer, tests]
    return nb


def test_every_kind_of_operator_mutates_only_the_solution_region():
    mutants = ma.mutants_of("toy", "f", ANSWER)
    kinds = {m.kind for m, _ in mutants}
    afters = {m.after for m, _ in mutants}
    assert len(kinds) >= 4, kinds  # operators, comparisons, constants, calls, statements
    assert "y = x / n + 1" in afters and "y = x * n - 1" in afters, afters
    assert "if y >= 3:" in afters and "return y" in afters, afters  # abs() dropped
    assert all(4 <= m.line <= 7 for m, _ in mutants), [m.line for m, _ in mutants]
    for _, text in mutants:  # the signature and docstring outside the region never change
        assert text.startswith("def f(x, n=2):") and "a docstring" in text


@pytest.mark.parametrize(
    "test_source, fate",
    [
        ("assert f(1) == 3 and f(2) == 5", "passed"),
        ("assert f(1) == 4", "failed"),
        ("while True:\n    pass", "timeout"),
    ],
)
def test_a_mutants_fate_comes_from_a_forked_child(test_source, fate):
    nb = _notebook(test_source)
    answers = {"f": ANSWER}
    assert ma._run(nb, answers, "f", seconds=2) == fate


def test_survivors_judged_equivalent_are_matched_by_their_statements(tmp_path, monkeypatch):
    table = tmp_path / "equivalent.toml"
    table.write_text(
        '[[equivalent]]\nassignment = "toy"\ncell = "f"\nbefore = "return abs(y)"\n'
        'after = "return y"\nwhy = "y > 3 here, so abs(y) == y"\n'
    )
    monkeypatch.setattr(ma, "EQUIVALENT", table)
    same = ma.Mutant("toy", "f", 6, "drop call", "return abs(y)", "return y")
    other = ma.Mutant("toy", "f", 4, "constant", "y = x * n + 1", "y = x * n + 2")
    assert ma._judged_equivalent(same) == "y > 3 here, so abs(y) == y"
    assert ma._judged_equivalent(other) == ""
