"""The book's page sources, read as text: promises the introduction makes, and clean characters.

No page is executed here (the whole-book build in `test_book.py` does that); these checks read
the MyST sources under `book/` and fail with the page and line to fix:

- no control character but the newline in any page source (a `\\t` of `\\text` once became a
  TAB in a table of chapter 2 and the formula rendered as garbage);
- every chapter page (book/chNN_*.md, from chapter 0) has the parts the introduction promises: learning goals, at least two
  figures, a common-mistakes box and a questions section;
- one notation for the pooler: the pooled vector is $\\mathbf{c}$ and vectors are rows
  ($h W_p$, never $W_p h$), as the introduction's notation table says;
- the introduction's chapter table has a row for every chapter, and the questions page lists
  every seed question a chapter answers: at least as many questions linking into the chapter,
  citing every seed the chapter's questions cite.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from myst_nb.core.read import read_myst_markdown_notebook

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
PAGE_SUFFIXES = {".md", ".ipynb", ".rst"}
CHAPTERS = sorted(BOOK.glob("ch[0-9][0-9]_*.md"))

# a control character is C0 (0x00-0x1f) or DEL (0x7f); only the newline belongs in a page
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")
# a code cell that draws: the book's plotting helpers (bertcourse.viz.*.plot_*) or matplotlib
FIGURE_CALL = re.compile(r"\b\w*viz\w*\.plot_\w+\(|\bplt\.(?:subplots|figure|imshow|plot)\(")
# a figure in the text itself: a MyST figure or image directive, or a Markdown image
FIGURE_DIRECTIVE = re.compile(r"^(?:```+|:::+)\{(?:figure|image)\}|!\[[^\]]*\]\(", re.MULTILINE)
LEARNING_GOALS = re.compile(r"^(?:```+|:::+)\{admonition\} Learning goals", re.MULTILINE)
MISTAKES_HEADING = re.compile(r"^##+ Common mistakes\s*$", re.MULTILINE)
MISTAKE_BOX = re.compile(r"^(?:```+|:::+)\{admonition\} Mistake\b", re.MULTILINE)
QUESTIONS_HEADING = re.compile(r"^##+ .*\b[Qq]uestions\b", re.MULTILINE)


def pages() -> list[Path]:
    return sorted(p for p in BOOK.rglob("*") if p.is_file() and p.suffix in PAGE_SUFFIXES)


def control_characters(text: str) -> list[str]:
    """`line N, column C: 0xXX` for every control character other than the newline."""
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        for match in CONTROL.finditer(line):
            found.append(f"line {number}, column {match.start() + 1}: {ord(match.group()):#04x}")
    return found


def chapter_parts(path: Path) -> dict[str, int]:
    """How many of each promised part a chapter's source holds."""
    text = path.read_text(encoding="utf-8")
    notebook = read_myst_markdown_notebook(text, path=path)
    code = [c.source for c in notebook.cells if c.cell_type == "code"]
    markdown = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    return {
        "learning goals": len(LEARNING_GOALS.findall(markdown)),
        "figures": sum(bool(FIGURE_CALL.search(s)) for s in code)
        + len(FIGURE_DIRECTIVE.findall(markdown)),
        "common-mistakes heading": len(MISTAKES_HEADING.findall(markdown)),
        "mistake boxes": len(MISTAKE_BOX.findall(markdown)),
        "questions heading": len(QUESTIONS_HEADING.findall(markdown)),
    }


def missing_parts(parts: dict[str, int]) -> list[str]:
    need = {"figures": 2}
    return [
        f"{name}: {count} (need {need.get(name, 1)})"
        for name, count in parts.items()
        if count < need.get(name, 1)
    ]


def test_the_checks_see_every_chapter_and_page() -> None:
    numbers = [int(p.stem[2:4]) for p in CHAPTERS]
    assert numbers == list(range(len(numbers))) and len(numbers) >= 9, [p.name for p in CHAPTERS]
    assert {BOOK / "intro.md", BOOK / "questions.md"} <= set(pages())


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(BOOK)))
def test_no_control_characters_in_page_sources(page: Path) -> None:
    found = control_characters(page.read_text(encoding="utf-8"))
    assert not found, f"{page.relative_to(ROOT)} holds control characters: {found[:10]}"


def test_the_control_character_check_can_fail() -> None:
    # what a lost backslash does: "\text" in a Python string is a TAB followed by "ext"
    broken = "| a | $L_\text{from}$ |\nnext line\r\n"
    assert control_characters(broken) == ["line 1, column 10: 0x09", "line 2, column 10: 0x0d"]
    assert control_characters("$L_\\text{from}$\n\n") == []


def test_the_introduction_makes_the_promise_checked_here() -> None:
    intro = (BOOK / "intro.md").read_text(encoding="utf-8")
    promise = " ".join(intro.split())
    for part in (
        "learning goals",
        "at least two figures",
        "**common mistakes** box",
        "the questions",
    ):
        assert part in promise, f"intro.md no longer promises {part!r}: update this test"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_has_the_promised_parts(chapter: Path) -> None:
    parts = chapter_parts(chapter)
    missing = missing_parts(parts)
    assert not missing, f"{chapter.name} lacks what intro.md promises: {missing}"


def test_the_parts_check_can_fail(tmp_path: Path) -> None:
    header = "---\njupytext:\n  text_representation:\n    format_name: myst\n---\n\n"
    page = tmp_path / "ch09_bare.md"
    page.write_text(
        header
        + ":::{admonition} Learning goals\n:class: note\nGoals.\n:::\n\n"
        + "```{code-cell} ipython3\nfig = viz.plot_curves({})\n```\n\n"
        + "```{code-cell} ipython3\n# viz.plot_curves is not called here\nx = 1\n```\n",
        encoding="utf-8",
    )
    parts = chapter_parts(page)
    assert parts["learning goals"] == 1 and parts["figures"] == 1
    assert missing_parts(parts) == [
        "figures: 1 (need 2)",
        "common-mistakes heading: 0 (need 1)",
        "mistake boxes: 0 (need 1)",
        "questions heading: 0 (need 1)",
    ]
    page.write_text(
        page.read_text(encoding="utf-8")
        + "\n```{figure} ../_static/x.svg\n:alt: x\n```\n\n## Common mistakes\n\n"
        + ":::{admonition} Mistake: something\n:class: warning\nWrong.\n:::\n\n"
        + "## The seed questions, answered\n\nAnswers.\n",
        encoding="utf-8",
    )
    assert missing_parts(chapter_parts(page)) == []


# the pooler written with a column vector (W_p h) or with another symbol for the pooled vector
COLUMN_POOLER = re.compile(r"W_p\s*(?:\\[,;!]\s*)?h")
OTHER_POOLED_SYMBOL = re.compile(r"(?<![\\\w])(?:[pu]|\\mathbf\{[pu]\})\s*=\s*\\tanh")


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(BOOK)))
def test_one_notation_for_the_pooler(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    wrong = [
        f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group()!r}"
        for pattern in (COLUMN_POOLER, OTHER_POOLED_SYMBOL)
        for m in pattern.finditer(text)
    ]
    assert not wrong, (
        f"{page.relative_to(ROOT)}: write the pooler as \\mathbf{{c}} = \\tanh(h W_p + b_p) "
        f"(intro.md's notation): {wrong}"
    )


def test_the_notation_check_can_fail() -> None:
    assert COLUMN_POOLER.search(r"$p = \tanh(W_p h_{[CLS]} + b_p)$")
    assert COLUMN_POOLER.search(r"\tanh(W_p\, h + b_p)")
    assert OTHER_POOLED_SYMBOL.search(r"$p = \tanh(h W_p + b_p)$")
    assert OTHER_POOLED_SYMBOL.search(r"u = \tanh\bigl(h W_p\bigr)")
    assert not COLUMN_POOLER.search(r"\mathbf{c} = \tanh(h_{\texttt{[CLS]}} W_p + b_p)")
    assert not OTHER_POOLED_SYMBOL.search(r"\mathbf{c} = \tanh(h_{\texttt{[CLS]}} W_p + b_p)")


# --- every chapter in the introduction's table, every seed question on the questions page -----

QUESTIONS = BOOK / "questions.md"
# a seed question in a chapter: an emphasised question followed by the seed(s) it comes from
SEED_QUESTION = re.compile(r"^(\*\*?)([^*]+?\?)\1\s+\((seeds? \d{3}[^)]*)\)", re.MULTILINE)
SEED_NUMBER = re.compile(r"\b\d{3}\b")
LABEL = re.compile(r"^\(([\w-]+)\)=\s*$", re.MULTILINE)
LINK = re.compile(r"\{(ref|doc)\}`(?:[^`<]*<)?([^`<>]+)>?`")
NUMBERED_ITEM = re.compile(r"^\d+\. ", re.MULTILINE)
SEEDS_CITED = re.compile(r"\((seeds? \d{3}[^)]*)\)")


def questions_section(text: str) -> str:
    """The text of a chapter's seed-questions section (empty if it has none)."""
    heading = QUESTIONS_HEADING.search(text)
    if heading is None:
        return ""
    rest = text[heading.end() :]
    following = re.search(r"^## ", rest, re.MULTILINE)
    return rest[: following.start()] if following else rest


def seed_questions(text: str) -> list[tuple[str, set[str]]]:
    """(question, the seeds it cites) for each seed question of a chapter's page source."""
    return [
        (" ".join(m.group(2).split()), set(SEED_NUMBER.findall(m.group(3))))
        for m in SEED_QUESTION.finditer(questions_section(text))
    ]


def listed_questions(text: str, labels: dict[str, str]) -> list[tuple[set[str], set[str]]]:
    """(chapters it links into, seeds it cites) for each numbered question of the questions page;
    `labels` maps each label to the chapter (page stem) that defines it."""
    starts = [m.start() for m in NUMBERED_ITEM.finditer(text)]
    items = []
    for start, end in zip(starts, [*starts[1:], len(text)]):
        item = re.split(r"\n\s*\n|\n#", text[start:end])[0]
        chapters = {
            target if kind == "doc" else labels.get(target, "")
            for kind, target in LINK.findall(item)
        }
        seeds = {n for cited in SEEDS_CITED.findall(item) for n in SEED_NUMBER.findall(cited)}
        items.append((chapters - {""}, seeds))
    return items


def seed_question_gaps(chapters: dict[str, str], questions_page: str) -> list[str]:
    """What the questions page misses of the chapters' seed questions ({stem: page source})."""
    labels = {label: stem for stem, text in chapters.items() for label in LABEL.findall(text)}
    listed = listed_questions(questions_page, labels)
    gaps = []
    for stem, text in chapters.items():
        asked = seed_questions(text)
        linking = [seeds for linked, seeds in listed if stem in linked]
        if len(linking) < len(asked):
            gaps.append(f"{stem}: {len(asked)} seed questions, {len(linking)} listed")
        missing = set().union(*(seeds for _, seeds in asked)) - set().union(*linking)
        if missing:
            gaps.append(f"{stem}: no listed question cites seed {', '.join(sorted(missing))}")
    return gaps


def chapter_table_rows(intro: str) -> set[int]:
    return {int(n) for n in re.findall(r"^\| (\d+) \|", intro, re.MULTILINE)}


def test_the_introduction_lists_every_chapter() -> None:
    rows = chapter_table_rows((BOOK / "intro.md").read_text(encoding="utf-8"))
    numbers = {int(p.stem[2:4]) for p in CHAPTERS}
    assert rows == numbers, (
        f"intro.md's chapter table: rows {sorted(rows)}, chapters {sorted(numbers)}"
    )


def test_the_questions_page_lists_every_seed_question() -> None:
    chapters = {p.stem: p.read_text(encoding="utf-8") for p in CHAPTERS}
    # a chapter whose questions section cites a seed must yield its questions (format changed?)
    unread = [
        s for s, t in chapters.items() if "(seed" in questions_section(t) and not seed_questions(t)
    ]
    assert not unread, f"seed questions cited but not found in {unread}: update SEED_QUESTION"
    gaps = seed_question_gaps(chapters, QUESTIONS.read_text(encoding="utf-8"))
    assert not gaps, f"book/questions.md lacks the chapters' seed questions: {gaps}"


def test_the_seed_question_check_can_fail() -> None:
    chapter = (
        "(chX-a)=\n## A\n\n## The seed questions, answered\n\n"
        "*Why?* (seeds 001, 002) Because.\n\n**How?** (seed 003: a quote) So.\n\n"
        "*Not a seed question?* Unattributed.\n\n## Exercise\n\n*After?* (seed 004) No.\n"
    )
    assert seed_questions(chapter) == [("Why?", {"001", "002"}), ("How?", {"003"})]
    complete = (
        "### X\n\n1. Why? (seeds 001, 002) {ref}`chX-a`\n2. How? (seed 003)\n   {doc}`ch99_x`\n"
    )
    assert seed_question_gaps({"ch99_x": chapter}, complete) == []
    one_missing = "### X\n\n1. Why? (seeds 001, 002) {ref}`the answer <chX-a>`\n\n### Y\n"
    assert seed_question_gaps({"ch99_x": chapter}, one_missing) == [
        "ch99_x: 2 seed questions, 1 listed",
        "ch99_x: no listed question cites seed 003",
    ]
    elsewhere = (
        "1. Why? (seeds 001, 002, 003) {doc}`ch01_attention`\n2. How? (seed 003) {ref}`ch01-x`\n"
    )
    assert (
        seed_question_gaps({"ch99_x": chapter}, elsewhere)[0]
        == "ch99_x: 2 seed questions, 0 listed"
    )
    assert chapter_table_rows("| Chapter | x |\n|---|---|\n| 0 | a |\n| 10 | b |\n") == {0, 10}
