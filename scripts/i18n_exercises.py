"""The assignments' statements in Chinese: catalogues of the English text, and the Chinese release.

    python scripts/i18n_exercises.py update [ASSIGNMENT ...]  # after an English edit of
                                              # solutions/_src: extract, merge into the catalogues
    python scripts/i18n_exercises.py check    # what CI checks (exit 1 on a problem)
    python scripts/i18n_exercises.py stat     # coverage per assignment
    python scripts/i18n_exercises.py todo ASSIGNMENT           # JSON of the entries to translate
    python scripts/i18n_exercises.py apply ASSIGNMENT FILE.json  # {msgid: msgstr} into the .po

    python solutions/_build_notebooks.py --release --lang zh_CN   # the Chinese release

One source: solutions/_src/<assignment>.py builds solutions/<assignment>/<topic>.ipynb, nbgrader
releases it as exercises/<assignment>/<topic>.ipynb, and the Chinese release
exercises-zh_CN/<assignment>/<topic>.ipynb is that English release with its markdown cells
translated from `locales/zh_CN/LC_MESSAGES/exercises/<assignment>.po`, one more line in its setup
cell (`grading.set_language("zh_CN")`, the feedback's language) and `{"bertcourse": {"lang":
"zh_CN"}}` in its metadata. Every other cell (answers, tests, their grade ids, points and
checksums) is the English release's, byte for byte: a Chinese submission is graded by the same
nbgrader assignment into the same gradebook. The translated locked cells carry their own
checksums, so `nbgrader validate` passes; `nbgrader autograde` puts the English of every locked
cell back (OverwriteCells), so the graded notebook and its feedback show the English statements
(a learner's markdown never reaches the feedback), and nbgrader_config.py's RestoreLanguage adds
the set-up cell's language line again, so the failures' messages are Chinese. The referee
(`python -m bertcourse.grade`) takes the language from the metadata.

A markdown cell is cut as Sphinx cuts a page: one message per paragraph, heading (without its
`#`), list item and table cell; the lines of a paragraph are joined by one space (re-wrapping the
English changes no message). Display math (`$$ ... $$`) and fenced code stay as they are. The
rules of the book's catalogues apply (scripts/i18n.py, locales/README.md): inline code, math,
roles, link targets and numbers kept exactly; an assignment listed in
locales/zh_CN/exercises-translated.txt must have no fuzzy or untranslated entry.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import i18n  # noqa: E402  (scripts/i18n.py: the book's catalogues, merge and checks)

LANGUAGE = i18n.LANGUAGE
TRANSLATED_LIST = i18n.LOCALES / LANGUAGE / "exercises-translated.txt"
RELEASE = ROOT / "exercises"
SET_LANGUAGE = 'grading.set_language("{lang}")'
SETUP_IMPORT = "from bertcourse import grading"
SETUP = "setup"  # the set-up cell's grade id (nbgrader_config.py's RestoreLanguage finds it so too)


def release_dir(lang: str) -> Path:
    """exercises-zh_CN/: beside exercises/, so nothing that lists exercises/* sees it."""
    return ROOT / f"exercises-{lang}"


def builder():
    """solutions/_build_notebooks.py as a module (it is a script, not a package)."""
    if "_build_notebooks" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "_build_notebooks", ROOT / "solutions" / "_build_notebooks.py"
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules["_build_notebooks"] = module
        spec.loader.exec_module(module)
    return sys.modules["_build_notebooks"]


def po_path(assignment: str, lang: str = LANGUAGE) -> Path:
    """locales/zh_CN/LC_MESSAGES/exercises/<assignment>.po"""
    return i18n.LOCALES / lang / "LC_MESSAGES" / "exercises" / f"{assignment}.po"


# --- cutting markdown into messages -------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6}) +(.*?)\s*$")
_ITEM = re.compile(r"^( {0,3})([-*+]|\d{1,9}[.)]) +(.*)$")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


@dataclass
class Piece:
    """A part of a markdown cell: `text` is a message when `translate`, else kept verbatim."""

    text: str
    translate: bool
    prefix: str = ""  # "## ", "- ", "1. " before the message


def _table_pieces(lines: list[str]) -> list[Piece]:
    pieces: list[Piece] = []
    for line in lines:
        if _TABLE_RULE.match(line):
            pieces.append(Piece(line + "\n", False))
            continue
        cells = line.strip().strip("|").split("|")
        pieces.append(Piece("|", False))
        for cell in cells:
            text = cell.strip()
            pieces.append(Piece(" ", False))
            if text:
                pieces.append(Piece(text, i18n.needs_translation(text)))
            pieces.append(Piece(" |", False))
        pieces.append(Piece("\n", False))
    pieces[-1] = Piece("", False)  # no newline after the last row
    return pieces


def _block_pieces(lines: list[str]) -> list[Piece]:
    """One block (no blank line inside): a heading, a table, or paragraphs and list items."""
    if all(line.lstrip().startswith("|") for line in lines):
        return _table_pieces(lines)
    pieces: list[Piece] = []
    current: list[str] = []
    prefix = ""

    def flush() -> None:
        if current:
            if pieces:
                pieces.append(Piece("\n", False))
            pieces.append(Piece(" ".join(s.strip() for s in current), True, prefix))
            current.clear()

    for line in lines:
        heading = _HEADING.match(line)
        item = _ITEM.match(line)
        if heading:
            flush()
            prefix = heading.group(1) + " "
            current.append(heading.group(2))
            flush()
            prefix = ""
        elif item:
            flush()
            prefix = f"{item.group(1)}{item.group(2)} "
            current.append(item.group(3))
        else:
            current.append(line)
    flush()
    return pieces


def cut(markdown: str) -> list[Piece]:
    """The pieces of a markdown cell; joined (translated or not) they give the cell back."""
    pieces: list[Piece] = []
    blocks: list[tuple[bool, list[str]]] = []  # (verbatim, lines)
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        fence = re.match(r"^\s*(```+|~~~+)", line)
        if fence or line.lstrip().startswith("$$"):
            end = fence.group(1) if fence else "$$"
            j = i
            closed = not fence and line.rstrip().endswith("$$") and len(line.strip()) > 2
            while not closed and j + 1 < len(lines):
                j += 1
                closed = lines[j].rstrip().endswith(end)
            blocks.append((True, lines[i : j + 1]))
            i = j + 1
            continue
        j = i
        while j < len(lines) and lines[j].strip() and not lines[j].lstrip().startswith("$$"):
            j += 1
        blocks.append((False, lines[i:j]))
        i = j
    for verbatim, block in blocks:
        if pieces:
            pieces.append(Piece("\n\n", False))
        if verbatim:
            pieces.append(Piece("\n".join(block), False))
        else:
            pieces += _block_pieces(block)
    return pieces


def messages(markdown: str) -> list[str]:
    return [p.text for p in cut(markdown) if p.translate]


def translate_markdown(markdown: str, table: dict[str, str]) -> str:
    """The cell with each message replaced by its translation (the English where there is none).

    A message's lines were joined into one: a translated paragraph is written on one line (a
    line break inside Chinese text would show as a space).
    """
    return "".join(
        p.prefix + (table.get(p.text) or p.text) if p.translate else p.text for p in cut(markdown)
    )


# --- catalogues -------------------------------------------------------------------------------


def source_messages(assignment: str) -> list[tuple[str, str]]:
    """(message, grade id of its cell) in the order of the instructor's notebook."""
    nb = builder().build_notebook(assignment)
    return [
        (text, cell.metadata["nbgrader"]["grade_id"])
        for cell in nb.cells
        if cell.cell_type == "markdown"
        for text in messages(cell.source)
    ]


def write_pot(assignment: str, pot: Path) -> set[str]:
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po

    catalog = Catalog(project="bertcourse", fuzzy=False)
    for text, grade_id in source_messages(assignment):
        catalog.add(text, auto_comments=[f"cell {grade_id}"])
    pot.parent.mkdir(parents=True, exist_ok=True)
    with pot.open("wb") as f:
        write_po(f, catalog, width=i18n.PO_WIDTH)
    return {m.id for m in catalog if m.id}


def header(assignment: str) -> str:
    return (
        f"# solutions/_src/{assignment}.py's statements in Chinese (zh_CN).\n"
        "# Translate the msgstr lines (locales/README.md has the rules).\n"
        "# Refreshed by `python scripts/i18n_exercises.py update`; the release by\n"
        "# `python solutions/_build_notebooks.py --release --lang zh_CN`.\n"
        "# Once complete, list the assignment in\n"
        "# locales/zh_CN/exercises-translated.txt (not translated.txt).\n#"
    )


def cmd_update(args: argparse.Namespace) -> int:
    names = args.assignments or builder().assignment_names()
    with tempfile.TemporaryDirectory(prefix="bertcourse-exercises-") as tmp:
        for name in names:
            pot = Path(tmp) / f"{name}.pot"
            write_pot(name, pot)
            status, added, filled = i18n.merge(pot, po_path(name), header=header(name))
            if status != "unchanged":
                print(f"{status}: {po_path(name).relative_to(ROOT)} (+{added} new, {filled} kept)")
    return 0


def declared_translated() -> list[str]:
    if not TRANSLATED_LIST.is_file():
        return []
    lines = TRANSLATED_LIST.read_text(encoding="utf-8").splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def translations(assignment: str, lang: str = LANGUAGE) -> dict[str, str]:
    """msgid -> msgstr of the catalogue's usable entries (neither fuzzy nor empty)."""
    import polib

    po = po_path(assignment, lang)
    if not po.is_file():
        raise SystemExit(
            f"no catalogue {po.relative_to(ROOT)}: run scripts/i18n_exercises.py update"
        )
    return {
        e.msgid: e.msgstr
        for e in polib.pofile(str(po))
        if e.msgstr and not e.fuzzy and not e.obsolete
    }


def check(verbose: bool = True) -> list[str]:
    """Every problem of the exercise catalogues (empty: pass); prints coverage and warnings."""
    import polib

    glossary = i18n.glossary_entries()
    declared = declared_translated()
    names = builder().assignment_names()
    problems = [f"{d}: declared translated, no such assignment" for d in declared if d not in names]
    for name in names:
        po = po_path(name)
        if not po.is_file():
            problems.append(f"{name}: no catalogue (run `python scripts/i18n_exercises.py update`)")
            continue
        report = i18n.check_catalog(f"exercises/{name}", po, glossary)
        problems += [f"{name}: {e}" for e in report.errors]
        if name in declared and (report.fuzzy or report.untranslated):
            problems.append(
                f"{name}: declared translated but {report.fuzzy} fuzzy and "
                f"{report.untranslated} untranslated entries"
            )
        fresh = {text for text, _ in source_messages(name)}
        have = {e.msgid for e in polib.pofile(str(po)) if not e.obsolete}
        if fresh != have:
            problems.append(
                f"{name}: catalogue stale against solutions/_src ({len(fresh - have)} new, "
                f"{len(have - fresh)} gone; run `python scripts/i18n_exercises.py update`)"
            )
        if verbose:
            mark = "declared" if name in declared else "in progress"
            print(
                f"{name:20s} {report.translated:4d}/{report.total:<4d} fuzzy {report.fuzzy:3d}  "
                f"untranslated {report.untranslated:3d}  ({mark})"
            )
            for w in report.warnings:
                print(f"  glossary warning: {name}: {w}")
    return problems


def cmd_check(args: argparse.Namespace) -> int:
    problems = check()
    if args.release:
        stale = write_releases(builder().assignment_names(), LANGUAGE, check=True)
        problems += [f"out of date: {p.relative_to(ROOT)}" for p in stale]
    for p in problems:
        print(f"FAIL {p}")
    print(f"== exercises i18n check: {'FAILED' if problems else 'ok'}")
    return 1 if problems else 0


def cmd_stat(args: argparse.Namespace) -> int:
    check()
    return 0


def cmd_todo(args: argparse.Namespace) -> int:
    import polib

    out = {}
    for e in polib.pofile(str(po_path(args.assignment))):
        if e.obsolete or (e.msgstr and not e.fuzzy):
            continue
        item = {"msgstr": ""}
        if e.fuzzy:
            item = {"old_translation": e.msgstr, "previous_english": e.previous_msgid}
        out[e.msgid] = item
    print(json.dumps(out, ensure_ascii=False, indent=1))
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    """Write {msgid: msgstr} from a JSON file into the catalogue (idempotent)."""
    import polib

    po = polib.pofile(str(po_path(args.assignment)), wrapwidth=i18n.PO_WIDTH)
    table = json.loads(Path(args.json).read_text(encoding="utf-8"))
    by_id = {e.msgid: e for e in po if not e.obsolete}
    applied = 0
    for msgid, msgstr in table.items():
        entry = by_id.get(msgid)
        if entry is None:
            print(f"NOT IN CATALOGUE (English changed?): {i18n._short(msgid, 100)}")
            continue
        if not isinstance(msgstr, str) or not msgstr.strip():
            continue
        entry.msgstr = msgstr
        if entry.fuzzy:
            entry.flags.remove("fuzzy")
        entry.previous_msgid = None
        applied += 1
        for problem in i18n.invariant_problems(msgid, msgstr):
            print(f"PROBLEM {problem}: {i18n._short(msgid)}")
    po.save(str(po_path(args.assignment)))
    left = sum(1 for e in po if not e.obsolete and (not e.msgstr or e.fuzzy))
    print(f"{args.assignment}: applied {applied}; {left} entries still untranslated or fuzzy")
    return 0


# --- the release ------------------------------------------------------------------------------


def translate_release(release, lang: str, table: dict[str, str]):
    """The English release notebook in `lang`: markdown translated, the setup cell told the
    language, checksums of the changed locked cells recomputed (nbgrader validate checks them)."""
    import nbformat
    from nbgrader.utils import compute_checksum

    nb = nbformat.reads(nbformat.writes(release), as_version=4)
    setup = next(
        (c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == SETUP), None
    )
    if setup is None or SETUP_IMPORT not in setup.source.splitlines():
        raise ValueError(
            f"no cell {SETUP!r} with {SETUP_IMPORT!r}: cannot set the feedback language"
        )
    setup.source += "\n" + SET_LANGUAGE.format(lang=lang)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = translate_markdown(cell.source, table)
        meta = cell.metadata.get("nbgrader", {})
        if (cell is setup or cell.cell_type == "markdown") and "checksum" in meta:
            meta["checksum"] = compute_checksum(cell)
    nb.metadata["bertcourse"] = {"lang": lang}
    return nb


def release_text(assignment: str, lang: str = LANGUAGE, english: Path | None = None) -> str:
    """The Chinese release of `assignment` as it must be written, from the English release."""
    import nbformat

    name = builder().notebook_path(assignment).name
    english = english or RELEASE / assignment / name
    table = translations(assignment, lang)
    nb = translate_release(nbformat.read(english, as_version=4), lang, table)
    return builder().render(nb)


def write_releases(names: list[str], lang: str, check: bool = False) -> list[Path]:
    """Write exercises-<lang>/<assignment>/<topic>.ipynb from the English release (with
    `check`, write nothing); return the notebooks that were out of date."""
    stale = []
    for name in names:
        path = release_dir(lang) / name / builder().notebook_path(name).name
        text = release_text(name, lang)
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(path)
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("update", help="extract the statements, merge them into the catalogues")
    up.add_argument("assignments", nargs="*", help="default: all")
    ck = sub.add_parser("check", help="fail on fuzzy/untranslated/stale/unfaithful entries")
    ck.add_argument(
        "--release", action="store_true", help="also fail on an out-of-date Chinese release"
    )
    sub.add_parser("stat", help="coverage per assignment")
    td = sub.add_parser("todo", help="JSON of the entries still to translate")
    td.add_argument("assignment")
    ap = sub.add_parser("apply", help="write a JSON {msgid: msgstr} into the catalogue")
    ap.add_argument("assignment")
    ap.add_argument("json")
    args = parser.parse_args(argv)
    commands = {
        "update": cmd_update,
        "check": cmd_check,
        "stat": cmd_stat,
        "todo": cmd_todo,
        "apply": cmd_apply,
    }
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
