"""The Chinese release of the exercises (exercises-zh_CN/): statements from catalogues, same grading.

- every assignment has its catalogue and its Chinese release, and the release is what
  solutions/_src, the English release and the catalogue make now;
- every cell but the markdown and the setup cell is the English release's, byte for byte (grade
  ids, points, checksums, sources); the translated locked cells carry their own checksums;
- the catalogues keep the book's rules (scripts/i18n.py's checks: inline code, math, roles,
  links, numbers) and have no fuzzy or untranslated entry where declared translated;
- one assignment through nbgrader: a Chinese submission validates, and autograding it gives
  the English release's scores, into the same gradebook.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat
import pytest
from markdown_it import MarkdownIt
from nbgrader.utils import compute_checksum

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import i18n_exercises as zh  # noqa: E402
from test_exercises import (  # noqa: E402  (the English chain's helpers)
    builder,
    cell_scores,
    fill,
    load_answers,
    make_course,
    nbgrader,
    solution_answers,
)

ASSIGNMENTS = builder.assignment_names()
LANG = zh.LANGUAGE
E2E_ASSIGNMENT = "ch01_attention"  # the cheapest to grade (about 1 s of tests per notebook)


def english(assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "exercises" / assignment / _name(assignment), as_version=4)


def chinese(assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(zh.release_dir(LANG) / assignment / _name(assignment), as_version=4)


def _name(assignment: str) -> str:
    return builder.notebook_path(assignment).name


def _without_checksum(cell: nbformat.NotebookNode) -> str:
    meta = json.loads(json.dumps(cell.metadata))
    meta.get("nbgrader", {}).pop("checksum", None)
    return json.dumps({"id": cell.get("id"), "type": cell.cell_type, "meta": meta}, sort_keys=True)


# --- the cutting of markdown into messages ----------------------------------------------------

SAMPLE = """## Part 2: a heading (2 points)

A paragraph written
on two lines, with `code`, $x^2$ and 15%.

| Block | Code points |
|---|---|
| Extension A | U+3400..U+4DBF |

$$a = b
+ c.$$

- an item
  continued;
- another item.

1. first
2. second

```python
x = 1
```"""


def test_a_cell_is_cut_like_sphinx_cuts_a_page() -> None:
    assert zh.messages(SAMPLE) == [
        "Part 2: a heading (2 points)",
        "A paragraph written on two lines, with `code`, $x^2$ and 15%.",
        "Block",
        "Code points",
        "Extension A",
        "U+3400..U+4DBF",  # a message (`update` fills it with the English: nothing to translate)
        "an item continued;",
        "another item.",
        "first",
        "second",
    ]  # the table's rule, the math block and the code are not messages
    table = {m: f"〈{m}〉" for m in zh.messages(SAMPLE)}
    out = zh.translate_markdown(SAMPLE, table)
    assert "## 〈Part 2: a heading (2 points)〉\n\n〈A paragraph written on two lines" in out
    assert (
        "| 〈Block〉 | 〈Code points〉 |\n|---|---|\n| 〈Extension A〉 | 〈U+3400..U+4DBF〉 |"
        in out
    )
    assert "$$a = b\n+ c.$$" in out and "```python\nx = 1\n```" in out
    assert "- 〈an item continued;〉\n- 〈another item.〉\n\n1. 〈first〉\n2. 〈second〉" in out


def test_without_translations_every_cell_renders_as_the_english() -> None:
    """Cut and put back together with no translation, each markdown cell of every assignment
    renders to the same HTML (up to white space): nothing is lost or moved by the cutting."""
    md = MarkdownIt("commonmark").enable("table")
    norm = lambda html: re.sub(r"\s+", " ", html)  # noqa: E731
    for name in ASSIGNMENTS:
        for cell in builder.build_notebook(name).cells:
            if cell.cell_type == "markdown":
                again = zh.translate_markdown(cell.source, {})
                assert norm(md.render(again)) == norm(md.render(cell.source)), (name, cell.id)


# --- catalogues and releases --------------------------------------------------------------------


def test_the_catalogues_are_current_and_keep_the_rules() -> None:
    """No stale catalogue, no lost code/math/number, nothing left where declared translated."""
    problems = zh.check(verbose=False)
    assert problems == [], "\n".join(problems)


def test_the_checks_catch_a_lost_number_and_a_declared_gap(tmp_path, monkeypatch) -> None:
    """The checks above can fail: a translation without a number, a declared assignment with an
    untranslated entry, a catalogue missing an English paragraph."""
    import polib

    name = ASSIGNMENTS[0]
    po = polib.pofile(str(zh.po_path(name)))
    entries = [e for e in po if not e.obsolete]
    (numbered,) = [e for e in entries if re.search(r"\(\d+ points?\)", e.msgid)][:1]
    numbered.msgstr = re.sub(r"\d+", "", numbered.msgid)
    numbered.flags = []
    entries[1].msgstr = ""
    po.remove(entries[-1])
    folder = tmp_path / LANG / "LC_MESSAGES" / "exercises"
    folder.mkdir(parents=True)
    po.save(str(folder / f"{name}.po"))
    for other in ASSIGNMENTS[1:]:
        (folder / f"{other}.po").write_bytes(zh.po_path(other).read_bytes())
    (tmp_path / LANG / "exercises-translated.txt").write_text(f"{name}\n")
    monkeypatch.setattr(zh.i18n, "LOCALES", tmp_path)
    monkeypatch.setattr(zh, "TRANSLATED_LIST", tmp_path / LANG / "exercises-translated.txt")
    problems = "\n".join(zh.check(verbose=False))
    assert "numbers missing from the translation" in problems
    assert f"{name}: declared translated but" in problems
    assert f"{name}: catalogue stale against solutions/_src (1 new" in problems


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_chinese_release_is_current(assignment) -> None:
    """exercises-zh_CN/ is what the English release and the catalogue make now, and its markdown
    is the translation of solutions/_src's (not of an older English release)."""
    path = zh.release_dir(LANG) / assignment / _name(assignment)
    assert path.is_file(), f"run `python solutions/_build_notebooks.py --release --lang {LANG}`"
    assert path.read_text(encoding="utf-8") == zh.release_text(assignment, LANG), (
        f"{path.relative_to(ROOT)} is out of date: run "
        f"`python solutions/_build_notebooks.py --release --lang {LANG} {assignment}`"
    )
    table = zh.translations(assignment, LANG)
    source = [c for c in builder.build_notebook(assignment).cells if c.cell_type == "markdown"]
    release = [c for c in chinese(assignment).cells if c.cell_type == "markdown"]
    assert [c.source for c in release] == [zh.translate_markdown(c.source, table) for c in source]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_graded_cells_are_the_english_releases(assignment) -> None:
    en, cn = english(assignment), chinese(assignment)
    assert cn.metadata == {**en.metadata, "bertcourse": {"lang": LANG}}
    assert len(cn.cells) == len(en.cells)
    setups = 0
    for a, b in zip(en.cells, cn.cells):
        if a.cell_type == "markdown" or b.source == a.source + f'\ngrading.set_language("{LANG}")':
            setups += a.cell_type == "code"
            assert _without_checksum(a) == _without_checksum(b), a.get("id")
            assert b.metadata["nbgrader"]["checksum"] == compute_checksum(b), a.get("id")
        else:  # answers, tests, read-only code: the English cell as it is
            assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True), a.get("id")
    assert setups == 1, "one setup cell sets the language"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_setup_cell_sets_the_language(assignment) -> None:
    """The set-up cell ends with set_language, and bertcourse.grading accepts the language."""
    import bertcourse.grading as grading

    setup = next(c for c in chinese(assignment).cells if c.cell_type == "code")
    assert setup.source.splitlines()[-1] == f'grading.set_language("{LANG}")'
    assert zh.SETUP_IMPORT in setup.source.splitlines()
    if not hasattr(grading, "set_language"):
        pytest.skip("bertcourse.grading.set_language is not there yet")
    before = grading.get_language() if hasattr(grading, "get_language") else "en"
    try:
        grading.set_language(LANG)
    finally:
        grading.set_language(before)


def _spec(assignment: str):
    """The referee's view of the instructor's notebook (as bertcourse.grade.assignment reads it
    from the gradebook): every cell with a grade id."""
    from bertcourse.grade.assignment import CellSpec, NotebookSpec, strip_hidden_tests

    cells = []
    for cell in nbformat.read(builder.notebook_path(assignment), as_version=4).cells:
        md = cell.metadata.get("nbgrader")
        if md:
            cells.append(
                CellSpec(
                    md["grade_id"], cell.cell_type, md["locked"], cell.source,
                    strip_hidden_tests(cell.source), None, md["grade"], md["solution"],
                    md["task"], md.get("points"),
                )
            )  # fmt: skip
    return NotebookSpec(builder.notebook_path(assignment).stem, cells, [])


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_referee_sees_no_tampering_in_a_chinese_release(assignment) -> None:
    """python -m bertcourse.grade accepts the set-up cell's language line of a release whose
    metadata names the language, and nothing else: the line without the metadata, or another
    line, is an edit of a read-only cell."""
    from bertcourse.grade.submission import find_tampering

    spec = _spec(assignment)
    assert find_tampering(chinese(assignment), spec) == []
    assert find_tampering(english(assignment), spec) == []
    unmarked = chinese(assignment)
    del unmarked.metadata["bertcourse"]
    assert find_tampering(unmarked, spec) == ["edited read-only cell 'setup'"]
    other = chinese(assignment)
    setup = next(c for c in other.cells if c.cell_type == "code")
    setup.source = setup.source.replace("set_language", "set_lang")
    assert find_tampering(other, spec) == ["edited read-only cell 'setup'"]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_declared_assignments_have_chinese_statements(assignment) -> None:
    """An assignment declared translated shows Chinese in every statement cell."""
    if assignment not in zh.declared_translated():
        pytest.skip(f"{assignment} is not declared translated yet")
    cjk = re.compile(r"[\u4e00-\u9fff]")
    for cell in chinese(assignment).cells:
        if cell.cell_type == "markdown":
            assert cjk.search(cell.source), (assignment, cell.id, cell.source[:200])


# --- through nbgrader (slow) --------------------------------------------------------------------


def test_a_chinese_submission_validates_and_grades_as_the_english(tmp_path) -> None:
    """The English release generated in a copy of the course, its Chinese release made from it;
    a learner's Chinese notebook passes `nbgrader validate`; autograding gives the solution full
    marks and a wrong answer loses exactly its part, in the course's one gradebook."""
    assignment = E2E_ASSIGNMENT
    course = make_course(tmp_path, assignment)
    notebook = builder.notebook_path(assignment).stem
    nbgrader(course, "generate_assignment", assignment)
    en_path = course / "exercises" / assignment / f"{notebook}.ipynb"
    release = nbformat.reads(zh.release_text(assignment, LANG, english=en_path), as_version=4)
    solution = nbformat.read(course / "solutions" / assignment / f"{notebook}.ipynb", 4)
    correct = solution_answers(solution)
    points = {
        c.metadata.nbgrader["grade_id"]: float(c.metadata.nbgrader["points"])
        for c in solution.cells
        if c.metadata.get("nbgrader", {}).get("grade")
    }
    wrong = next(a for a in load_answers(assignment) if a.kind == "wrong")
    students = {"zhang": correct, "li": {**correct, wrong.grade_id: wrong.source}}
    for student, answers in students.items():
        folder = course / ".grading" / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(fill(release, answers), folder / f"{notebook}.ipynb")
    submitted = course / ".grading" / "submitted" / "zhang" / assignment / f"{notebook}.ipynb"
    result = nbgrader(course, "validate", str(submitted))
    assert "Success! Your notebook passes all the tests." in result.stdout, result.stdout[-2000:]
    assert "HAVE CHANGED" not in result.stdout
    nbgrader(course, "autograde", assignment)
    scores = cell_scores(course, assignment, notebook)
    assert scores["zhang"] == points
    assert scores["li"] == {**points, f"{wrong.grade_id}_tests": 0.0}, wrong.label
    # autograde puts the gradebook's (English) source back into every locked cell: the graded
    # notebook's statements, hence its feedback HTML's, are English (a learner's markdown never
    # reaches the feedback); nbgrader_config.py's RestoreLanguage adds the set-up cell's
    # language line again, so the messages of the failed test are Chinese
    graded = {
        s: nbformat.read(course / ".grading" / "autograded" / s / assignment / f"{notebook}.ipynb", 4)
        for s in students
    }  # fmt: skip
    en = nbformat.read(en_path, 4)
    md = lambda nb: [c.source for c in nb.cells if c.cell_type == "markdown"]  # noqa: E731
    assert md(graded["zhang"]) == md(en) != md(release)
    assert graded["zhang"].metadata["bertcourse"] == {"lang": LANG}
    setup = next(c for c in graded["li"].cells if c.get("id") == "setup")
    assert setup.source.endswith(f'\ngrading.set_language("{LANG}")')
    (failed,) = [c for c in graded["li"].cells if c.get("id") == f"{wrong.grade_id}_tests"]
    error = "\n".join(o.get("evalue", "") for o in failed.outputs if o.output_type == "error")
    assert re.search(r"[\u4e00-\u9fff]", error), error[:600]
