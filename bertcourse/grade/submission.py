"""Read a submitted notebook, find what was tampered with, and rebuild the graded version.

nbgrader 0.9 restores locked cells from the gradebook (`OverwriteCells`), but a duplicated
test cell aborts its whole batch, a deleted one is silently worth 0 (or re-added without
question with `add_missing_cells`, which fails when the cell before it is gone too), flipped
`grade`/`solution` flags go unnoticed, and a corrupt file exports as a plain 0. Here:

- `load_notebook` separates unreadable files (`InvalidNotebook`: not JSON, not a notebook,
  not nbformat 4, too large) from readable ones;
- `find_tampering` lists every change to what the instructor locked: edited, deleted,
  duplicated test cells, test cells whose nbgrader metadata was stripped, changed metadata
  (points, flags, cell type), cells claiming grade ids that do not exist;
- `repair` rebuilds the notebook to grade, with nbgrader's own preprocessors where they fit
  (`ClearOutput`, `DeduplicateIds`, `CheckCellMetadata`; `OverwriteCells`' work is done from
  the spec, read from the gradebook once per run): nbgrader metadata is rewritten from the
  gradebook, missing test and read-only code cells are put back after
  the nearest surviving cell that precedes them in the instructor's notebook, and locked
  cells get the gradebook's source (so the hidden tests are back, in memory only).

A tampered submission is still graded (its tests are the instructor's again, so the edits
earn nothing) and its status says `tampered`, with the list, for the instructor to review.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import stat
from collections import Counter
from typing import Any

import nbformat
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell
from nbgrader.preprocessors import (
    CheckCellMetadata,
    ClearOutput,
    DeduplicateIds,
    OverwriteCells,
)

from bertcourse.grade.assignment import NotebookSpec

MAX_NOTEBOOK_BYTES = 50 << 20
MAX_CELLS = 5000  # the course's notebooks have about 20
MAX_DEPTH = 64  # nbformat's own schema nests about 8 deep


class InvalidNotebook(ValueError):
    """The file cannot be read as a Jupyter notebook; the message says why."""


def read_regular_file(path: str, max_bytes: int) -> bytes:
    """The bytes of a plain file, opened without following a link; `InvalidNotebook` for a
    symbolic link, a FIFO, a device, a folder or a file over `max_bytes`.

    The grader runs as root: a link in a submission to another student's folder, to
    `solutions/` or to /etc/shadow must never be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise InvalidNotebook(
                "the file is a symbolic link; submit the notebook itself"
            ) from None
        raise InvalidNotebook(f"cannot read the file: {error.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a FIFO"
                if stat.S_ISFIFO(mode)
                else "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a regular file"
            )
            raise InvalidNotebook(f"the file is {kind}; submit the notebook itself")
        raw = f.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise InvalidNotebook(f"the file is larger than {max_bytes >> 20} MiB")
    return raw


def load_notebook(
    path: str, max_bytes: int = MAX_NOTEBOOK_BYTES, max_cells: int = MAX_CELLS
) -> NotebookNode:
    """Read and validate a submitted notebook, or raise `InvalidNotebook`."""
    raw = read_regular_file(path, max_bytes)
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise InvalidNotebook(f"not UTF-8 text: {error}") from None
    except json.JSONDecodeError as error:
        raise InvalidNotebook(f"not valid JSON: {error}") from None
    except RecursionError:
        raise InvalidNotebook("the JSON is nested too deeply to be a notebook") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise InvalidNotebook("valid JSON, but not a Jupyter notebook (no list of cells)")
    if len(data["cells"]) > max_cells:
        raise InvalidNotebook(
            f"{len(data['cells'])} cells: more than {max_cells} is not a notebook to grade"
        )
    if _depth(data) > MAX_DEPTH:
        raise InvalidNotebook(f"the JSON is nested deeper than {MAX_DEPTH} levels")
    try:
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
        nbformat.validator.normalize(nb)
        nbformat.validate(nb)
    except RecursionError:
        raise InvalidNotebook("the JSON is nested too deeply to be a notebook") from None
    except Exception as error:  # nbformat raises several types
        raise InvalidNotebook(
            f"not a valid nbformat 4 notebook: {str(error).splitlines()[0][:300]}"
        ) from None
    return nb


def _depth(data: object) -> int:
    """How deeply JSON data nests (iteratively: a deep document cannot overflow the stack)."""
    deepest, todo = 0, [(data, 1)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            return depth
        if isinstance(node, dict):
            todo.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            todo.extend((v, depth + 1) for v in node)
    return deepest


def _norm(source: str) -> str:
    lines = [line.rstrip() for line in source.replace("\r\n", "\n").split("\n")]
    return "\n".join(lines).strip("\n")


def _nbgrader_md(cell: NotebookNode) -> dict | None:
    md = cell.get("metadata", {}).get("nbgrader")
    return md if isinstance(md, dict) else None


def _language_line(nb: NotebookNode) -> str | None:
    """The line a translated release (metadata {"bertcourse": {"lang": ...}}) adds at the end
    of its set-up cell (scripts/i18n_exercises.py); None for the English release."""
    meta = nb.get("metadata")
    meta = meta.get("bertcourse") if isinstance(meta, dict) else None
    lang = meta.get("lang") if isinstance(meta, dict) else None
    if isinstance(lang, str) and lang.replace("_", "").isalpha() and len(lang) <= 10:
        return f'grading.set_language("{lang}")'
    return None


def find_tampering(nb: NotebookNode, spec: NotebookSpec) -> list[str]:
    """Every change to what the instructor locked, as messages (empty: none)."""
    problems: list[str] = []
    language_line = _language_line(nb)
    known = {c.name: c for c in spec.cells}
    counts: Counter[str] = Counter()
    stripped: set[str] = set()
    test_sources = {_norm(c.visible_source): c.name for c in spec.cells if c.is_test}
    for cell in nb.cells:
        raw = cell.get("metadata", {}).get("nbgrader")
        if raw is not None and not isinstance(raw, dict):
            problems.append("a cell has corrupt nbgrader metadata")
            continue
        md = raw or {}
        gid = md.get("grade_id")
        if not gid:
            if md.get("grade") or md.get("solution") or md.get("locked") or md.get("task"):
                problems.append("a cell has nbgrader flags but no grade_id")
            elif cell.get("cell_type") == "code" and _norm(cell.get("source", "")) in test_sources:
                stripped.add(test_sources[_norm(cell.get("source", ""))])
            continue
        if gid not in known:
            if md.get("grade") or md.get("task") or md.get("locked"):
                problems.append(f"cell '{gid}' is not in the instructor's notebook")
            continue
        counts[gid] += 1
        src = known[gid]
        changes = []
        for flag, expected in (
            ("grade", src.grade),
            ("solution", src.solution),
            ("locked", src.locked),
            ("task", src.task),
        ):
            if bool(md.get(flag, False)) != expected:
                changes.append(f"{flag} {expected} -> {bool(md.get(flag, False))}")
        if src.grade or src.task:
            try:
                got_points = float(md.get("points"))
            except (TypeError, ValueError):
                got_points = None
            if got_points != src.points:
                changes.append(f"points {src.points:g} -> {md.get('points')!r}")
        if cell.get("cell_type") != src.cell_type:
            changes.append(f"cell type {src.cell_type} -> {cell.get('cell_type')}")
        if changes:
            problems.append(f"changed nbgrader metadata of '{gid}' ({', '.join(changes)})")
        if src.locked and not src.solution and src.cell_type == "code":
            got, want = _norm(cell.get("source", "")), _norm(src.visible_source)
            translated = language_line and not src.is_test and got == f"{want}\n{language_line}"
            if got != want and not translated:
                kind = "test cell" if src.is_test else "read-only cell"
                problems.append(f"edited {kind} '{gid}'")
    for src in spec.cells:
        if not (src.is_test or (src.locked and src.cell_type == "code" and not src.solution)):
            continue
        kind = "test cell" if src.is_test else "read-only cell"
        if counts[src.name] == 0:
            if src.name in stripped:
                problems.append(f"{kind} '{src.name}' lost its nbgrader metadata")
            else:
                problems.append(f"deleted {kind} '{src.name}'")
        elif counts[src.name] > 1:
            problems.append(f"duplicated {kind} '{src.name}' ({counts[src.name]} copies)")
    return problems


def _insert_missing(nb: NotebookNode, spec: NotebookSpec) -> None:
    """Put back deleted test cells and read-only code cells, in the instructor's order."""
    present = {}
    for i, cell in enumerate(nb.cells):
        md = _nbgrader_md(cell)
        if md and md.get("grade_id"):
            present[md["grade_id"]] = i
    for k, src in enumerate(spec.cells):
        needed = src.is_test or (src.locked and src.cell_type == "code" and not src.solution)
        if not needed or src.name in present:
            continue
        position = 0
        for prev in reversed(spec.cells[:k]):
            if prev.name in present:
                position = present[prev.name] + 1
                break
        cell = new_code_cell(source=src.source)
        cell.metadata = NotebookNode(
            {"deletable": False, "editable": False, "nbgrader": src.metadata()}
        )
        nb.cells.insert(position, cell)
        present = {
            md["grade_id"]: i
            for i, c in enumerate(nb.cells)
            if (md := _nbgrader_md(c)) and md.get("grade_id")
        }


def repair(nb: NotebookNode, spec: NotebookSpec) -> NotebookNode:
    """The notebook to grade: the student's cells, the instructor's locked cells and tests."""
    nb = copy.deepcopy(nb)
    known = {c.name: c for c in spec.cells}
    resources: dict[str, Any] = {}
    nb, resources = ClearOutput().preprocess(nb, resources)
    for cell in nb.cells:
        md = cell.get("metadata", {}).get("nbgrader")
        gid = md.get("grade_id") if isinstance(md, dict) else None
        if gid in known:
            cell.metadata["nbgrader"] = NotebookNode(known[gid].metadata())
        elif "nbgrader" in cell.get("metadata", {}):
            del cell.metadata["nbgrader"]  # unknown or corrupt: an ordinary cell from now on
    nb, resources = DeduplicateIds().preprocess(nb, resources)
    for cell in nb.cells:  # DeduplicateIds empties the metadata of the extra copies
        if cell.get("metadata", {}).get("nbgrader") == {}:
            del cell.metadata["nbgrader"]
    _insert_missing(nb, spec)
    # What nbgrader's OverwriteCells does, from the spec (read from the same gradebook once per
    # run) instead of two queries per cell on a new database engine per notebook: the
    # metadata is already the instructor's (above); the cell type and the locked cells'
    # source, hidden tests included, come back here (tests/test_grade_units.py checks that
    # OverwriteCells then finds nothing to change).
    overwrite = OverwriteCells()
    for cell in nb.cells:
        md = _nbgrader_md(cell)
        if md and md.get("grade_id") in known:
            src = known[md["grade_id"]]
            overwrite.update_cell_type(cell, src.cell_type)
            if src.locked and not src.solution:
                cell.source = src.source
    nb, resources = CheckCellMetadata().preprocess(nb, resources)
    nbformat.validate(nb)
    return nb


def student_cells(nb: NotebookNode) -> list[tuple[int, str]]:
    """(index, source) of the code cells the learner wrote in a repaired notebook: the answer
    cells and any cell without nbgrader's locked metadata (the ones they added)."""
    out = []
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        md = _nbgrader_md(cell) or {}
        if md.get("solution") or not md.get("locked"):
            out.append((index, cell.get("source", "")))
    return out
