"""Grades for learning platforms: a Canvas gradebook import CSV and a Moodle grade import CSV.

Both are written from typed rows (`GradeRow`: one student, one assignment, after the late
policy of `bertcourse.grade.late`), with a roster where the platform identifies students by
something other than the nbgrader student id.

Canvas ("Import grades in the Gradebook"; the parser is `GradebookImporter` in
instructure/canvas-lms, `lib/gradebook_importer.rb`, read for this module):

    Student,ID,SIS User ID,SIS Login ID,Section,ch01_attention (4521),ch02_masks (4522)
        Points Possible,,,,,7,7
    "Doe, Alice",1043,S001,alice,A1,7,6.3

* The header must start `Student,ID` and its student columns end at `Section`; with `SIS User ID`
  there must be `SIS Login ID` right after it.
* A student is found by the Canvas user `ID` (digits), else by `SIS User ID`, else by
  `SIS Login ID`, else by name. Without a roster we write the nbgrader id in one of these
  columns (`identity`, default `sis_login_id`: nbgrader ids are usually the login names).
* An assignment column is `Title (canvas assignment id)` (the importer reads the id from
  `/\\A(.*)\\s\\((\\d+)\\)\\z/`); a title alone is matched by title or becomes a NEW assignment, so
  a title that itself ends in "(digits)" is refused, and so is one containing a name the importer
  strips as a total column ("Current Score", "Final Grade", ...). Any other extra column would
  also become an assignment: the Canvas file has no status or comment column.
* A row whose first cell contains "Points Possible" gives each assignment's points (the importer
  copies them onto the assignment, so they must be the points it has in Canvas); optional.
* An empty cell (or "-") is "no score" to the importer; where Canvas already holds a score, its
  import preview lists the cell as a change. Held submissions (below) are left empty, a student
  with nothing to import is left out: with several assignments in one file, read the preview.

Moodle ("Grade import", CSV; the parser is `gradeimport_csv_load_data` in moodle/moodle,
`grade/import/csv/classes/load_data.php`):

    Username,ch01_attention,ch01_attention (Feedback)
    alice,6.3,graded; late by 2 h 5 min (...): 1 day x 10% = 10% of 7 points = -0.7

* On import the instructor maps one column to the user ("Map from" Username/Email address/ID
  number, "Map to" username/useremail/useridnumber), the grade column to a grade item, and the
  feedback column to "feedback for" that item. Other columns are ignored unless mapped.
* A user that Moodle cannot find aborts the whole import, so every row must be a real user:
  students missing from the roster are an error here. An empty cell or "-" is imported as
  "no grade" (`finalgrade = null`), so held submissions are left out and a file holds one
  assignment: a row never carries a cell for a grade it should not touch. Grades above `gradepointmax` (100 unless the site allows more) are refused
  by Moodle; they are refused here first.

Both files: UTF-8 without a byte-order mark, RFC 4180 quoting (Python's csv module), scores
rounded half-up to 2 decimals (as both platforms display them), and no cell that a spreadsheet
would run as a formula (a text cell starting with = + - @ gets a leading apostrophe; an
identifier starting so is an error, since changing it would break the match).
"""

from __future__ import annotations

import csv
import dataclasses
import os
import re
from collections.abc import Collection, Iterable, Mapping
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

from bertcourse.grade.late import LateResult
from bertcourse.grade.results import final_score
from bertcourse.grade.status import HELD_FOR_REVIEW, Status

CANVAS_STUDENT_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_POSSIBLE = "    Points Possible"  # as Canvas's own export writes it
CANVAS_IDENTITY = {"id": "ID", "sis_user_id": "SIS User ID", "sis_login_id": "SIS Login ID"}
# Headers the importer strips from the assignments (gradebook_importer.rb), matched as substrings.
CANVAS_NON_ASSIGNMENT = (
    "Current Score", "Current Points", "Current Grade", "Final Score", "Final Points",
    "Final Grade", "Override Score", "Override Grade", "Override Status",
)  # fmt: skip
CANVAS_RESERVED = (
    *CANVAS_STUDENT_COLUMNS,
    "LastName",
    "FirstName",
    "Integration ID",
    "Root Account",
)
MOODLE_IDENTITY = {"username": "Username", "email": "Email address", "id_number": "ID number"}
REVIEWED = ("approved", "rejected", "approved in part")  # the CSV's review column, decided

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


@dataclasses.dataclass(frozen=True)
class GradeRow:
    """One student's grade on one assignment, as the grader decided it."""

    student_id: str  # the nbgrader id (the submission folder's name)
    assignment: str
    score: float | None  # before the late penalty; None: no score to export
    max_score: float
    status: str = Status.GRADED.value
    late_penalty: float = 0.0  # points taken off by the late policy
    late_explanation: str = ""
    review: str = ""  # an instructor's decision on a held submission (the CSV's review column)

    @property
    def reviewed(self) -> bool:
        """Has an instructor decided every part of a submission held for review?"""
        return self.review in REVIEWED

    @property
    def final_score(self) -> float | None:
        return None if self.score is None else final_score(self.score, self.late_penalty)

    def with_late(self, result: LateResult) -> GradeRow:
        """This row with the late policy's verdict on it."""
        return dataclasses.replace(
            self, late_penalty=result.penalty, late_explanation=result.explanation
        )

    @property
    def comment(self) -> str:
        """One line for the platform's feedback column: the status, the review, then the
        late verdict."""
        return "; ".join(x for x in (self.status, self.review, self.late_explanation) if x)


@dataclasses.dataclass(frozen=True)
class RosterEntry:
    """How the platforms know one student. Only the fields a file needs must be filled."""

    student_id: str  # nbgrader id
    name: str = ""  # Canvas "Student" ("Last, First" as Canvas exports it)
    canvas_id: str = ""  # Canvas user id (digits)
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""
    email: str = ""  # Moodle "Email address"
    username: str = ""  # Moodle username
    id_number: str = ""  # Moodle "ID number"


Roster = Mapping[str, RosterEntry]
ROSTER_COLUMNS = tuple(f.name for f in dataclasses.fields(RosterEntry))


@dataclasses.dataclass
class ExportSummary:
    path: str
    students: int  # student rows written
    assignments: list[str]
    held: list[GradeRow]  # rows left out: no score (withheld for review), or a status in
    # `hold` that no instructor's decision has released


def load_roster(path: str | Path) -> dict[str, RosterEntry]:
    """A roster CSV whose header names columns of `RosterEntry` (student_id required)."""
    path = Path(path)
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        unknown = [c for c in header if c not in ROSTER_COLUMNS]
        if "student_id" not in header or unknown:
            raise ValueError(
                f"{path}: line 1: the header must name student_id and only these columns: "
                f"{', '.join(ROSTER_COLUMNS)}"
                + (f" (unknown: {', '.join(unknown)})" if unknown else "")
            )
        roster: dict[str, RosterEntry] = {}
        for row in reader:
            line = reader.line_num
            if None in row:
                raise ValueError(f"{path}: line {line}: more cells than header columns")
            values = {k: (v or "").strip() for k, v in row.items()}
            student = values["student_id"]
            if not student:
                raise ValueError(f"{path}: line {line}: empty student_id")
            if student in roster:
                raise ValueError(f"{path}: line {line}: student_id {student!r} appears twice")
            roster[student] = RosterEntry(**values)
    return roster


def grade_row(row: Mapping[str, str]) -> GradeRow:
    """One row of the grades CSV (`report.csv_rows`, or the file read back) as a `GradeRow`:
    student_id, assignment, status, score, max_score; if present, review, late_penalty and
    late (the late policy's points and explanation); other columns are ignored. An empty score
    (points withheld for review) is None.
    Raises ValueError for a number that does not read."""
    score = float(row["score"]) if row["score"].strip() else None
    return GradeRow(
        row["student_id"],
        row["assignment"],
        score,
        float(row["max_score"]),
        row["status"],
        late_penalty=float(row.get("late_penalty") or 0.0),
        late_explanation=row.get("late") or "",
        review=row.get("review") or "",
    )


def read_grades_csv(path: str | Path) -> list[GradeRow]:
    """The rows of a CSV that `python -m bertcourse.grade` wrote (see `grade_row`)."""
    path = Path(path)
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        needed = ("student_id", "assignment", "status", "score", "max_score")
        missing = [c for c in needed if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: line 1: no column {', '.join(missing)}")
        rows = []
        for row in reader:
            try:
                rows.append(grade_row(row))
            except ValueError as error:
                raise ValueError(f"{path}: line {reader.line_num}: {error}") from error
    return rows


# --- Canvas ---------------------------------------------------------------------------------


def write_canvas_csv(
    rows: Iterable[GradeRow],
    path: str | Path,
    *,
    roster: Roster | None = None,
    identity: str = "sis_login_id",
    assignment_ids: Mapping[str, int | str] | None = None,
    titles: Mapping[str, str] | None = None,
    hold: Collection[str] = HELD_FOR_REVIEW,
    decimals: int = 2,
    points_possible_row: bool = True,
) -> ExportSummary:
    """A file for Canvas's Grades > Import: one row per student, one column per assignment.

    `assignment_ids` maps an assignment to its Canvas id (the number in the assignment's URL);
    without one, Canvas matches the column by its title (`titles`, default the assignment
    name) or creates a new assignment. Without a roster, the nbgrader id goes to the column
    `identity` ("sis_login_id", "sis_user_id" or "id").
    """
    if identity not in CANVAS_IDENTITY:
        raise ValueError(f"identity must be one of {sorted(CANVAS_IDENTITY)}, got {identity!r}")
    table, held = _table(rows, hold)
    assignments = sorted(
        {a for cells in table.values() for a in cells} | {r.assignment for r in held}
    )
    max_scores = _max_scores([*[r for cells in table.values() for r in cells.values()], *held])
    header = [*CANVAS_STUDENT_COLUMNS]
    for a in assignments:
        header.append(_canvas_column(a, (assignment_ids or {}).get(a), (titles or {}).get(a, a)))
    points = [CANVAS_POINTS_POSSIBLE, "", "", "", ""]
    points += [_number(max_scores[a], decimals) for a in assignments]
    body: list[list[str]] = []
    entries = _roster_entries(sorted(table), roster, "Canvas")
    for student in sorted(table):
        entry = entries.get(student)
        if entry is None:
            ids = {"id": "", "sis_user_id": "", "sis_login_id": "", identity: student}
            name, section = "", ""
        else:
            ids = {
                "id": entry.canvas_id,
                "sis_user_id": entry.sis_user_id,
                "sis_login_id": entry.sis_login_id,
            }
            name, section = entry.name, entry.section
            if not any(ids.values()):
                raise ValueError(
                    f"roster: {student} has no canvas_id, sis_user_id or sis_login_id: Canvas "
                    "would match the row by name only"
                )
        if ids["id"] and not ids["id"].isdigit():
            raise ValueError(f"Canvas user ID of {student} must be digits, got {ids['id']!r}")
        for key, value in ids.items():
            if value:
                _identifier(value, f"{CANVAS_IDENTITY[key]} of {student}")
        cells = [
            _number(table[student][a].final_score, decimals) if a in table[student] else ""
            for a in assignments
        ]
        body.append(
            [
                _text(name),
                ids["id"],
                ids["sis_user_id"],
                ids["sis_login_id"],
                _text(section),
                *cells,
            ]
        )
    _write(path, [header, points, *body] if points_possible_row else [header, *body])
    return ExportSummary(str(path), len(body), assignments, held)


def _canvas_column(assignment: str, canvas_id: int | str | None, title: str) -> str:
    if not title.strip():
        raise ValueError(f"empty Canvas title for {assignment}")
    for name in CANVAS_NON_ASSIGNMENT:
        if name in title:
            raise ValueError(
                f"Canvas title {title!r} contains {name!r}: Canvas's importer drops such columns as totals"
            )
    if title in CANVAS_RESERVED:
        raise ValueError(f"Canvas title {title!r} is the name of a student column")
    if canvas_id is not None:
        if not str(canvas_id).isdigit():
            raise ValueError(
                f"Canvas assignment id of {assignment} must be digits, got {canvas_id!r}"
            )
        return _text(f"{title} ({canvas_id})")
    if re.search(r"\s\(\d+\)$", title):
        raise ValueError(
            f"Canvas title {title!r} ends in '(digits)', which Canvas reads as an assignment id: "
            "give its Canvas id in assignment_ids, or another title"
        )
    return _text(title)


# --- Moodle ---------------------------------------------------------------------------------


def write_moodle_csv(
    rows: Iterable[GradeRow],
    path: str | Path,
    *,
    roster: Roster | None = None,
    identity: str = "username",
    item_name: str | None = None,
    feedback: bool = True,
    hold: Collection[str] = HELD_FOR_REVIEW,
    decimals: int = 2,
    grade_point_max: float | None = 100.0,
) -> ExportSummary:
    """A file for Moodle's Grades > Import > CSV file: one assignment, one row per student.

    Map the first column to the user field named by `identity` ("username", "email" or
    "id_number"), the second to the grade item, the third (with `feedback`) to its feedback.
    Without a roster, the nbgrader id is the identity. `grade_point_max` is Moodle's
    `gradepointmax` (None: do not check).
    """
    if identity not in MOODLE_IDENTITY:
        raise ValueError(f"identity must be one of {sorted(MOODLE_IDENTITY)}, got {identity!r}")
    table, held = _table(rows, hold)
    assignments = sorted(
        {a for cells in table.values() for a in cells} | {r.assignment for r in held}
    )
    if len(assignments) != 1:
        raise ValueError(
            f"a Moodle file holds one assignment (an empty cell is imported as 'no grade' for "
            f"the other), got {len(assignments)}: {', '.join(assignments) or 'none'}"
        )
    (assignment,) = assignments
    item = item_name or assignment
    header = [MOODLE_IDENTITY[identity], _text(item)]
    if feedback:
        header.append(_text(f"{item} (Feedback)"))
    body = []
    entries = _roster_entries(sorted(table), roster, "Moodle")
    for student in sorted(table):
        row = table[student][assignment]
        value = getattr(entries[student], identity) if student in entries else student
        if not value:
            raise ValueError(f"roster: {student} has no {identity}")
        _identifier(value, f"{MOODLE_IDENTITY[identity]} of {student}")
        if identity == "email" and "@" not in value:
            raise ValueError(
                f"{student}: {value!r} is not an email address (give a roster with email)"
            )
        score = row.final_score
        if grade_point_max is not None and score > grade_point_max:
            raise ValueError(
                f"{student}: {score:g} points is above Moodle's gradepointmax ({grade_point_max:g}): "
                "Moodle refuses the file (raise the limit in Site administration > Grades > "
                "General settings and pass grade_point_max)"
            )
        line = [value, _number(score, decimals)]
        if feedback:
            line.append(_text(row.comment))
        body.append(line)
    _write(path, [header, *body])
    return ExportSummary(str(path), len(body), assignments, held)


# --- shared ---------------------------------------------------------------------------------


def _table(
    rows: Iterable[GradeRow], hold: Collection[str]
) -> tuple[dict[str, dict[str, GradeRow]], list[GradeRow]]:
    """student -> assignment -> row, for the rows to export; the held rows apart."""
    table: dict[str, dict[str, GradeRow]] = {}
    held: list[GradeRow] = []
    seen: set[tuple[str, str]] = set()
    for row in rows:
        key = (row.student_id, row.assignment)
        if key in seen:
            raise ValueError(f"two rows for {row.student_id} on {row.assignment}")
        seen.add(key)
        if not row.student_id:
            raise ValueError(f"a row of {row.assignment} has an empty student_id")
        if row.score is None or (row.status in hold and not row.reviewed):
            held.append(row)
        else:
            table.setdefault(row.student_id, {})[row.assignment] = row
    return table, held


def _max_scores(rows: list[GradeRow]) -> dict[str, float]:
    found: dict[str, float] = {}
    for row in rows:
        if found.setdefault(row.assignment, row.max_score) != row.max_score:
            raise ValueError(
                f"{row.assignment}: two maximum scores ({found[row.assignment]:g} and {row.max_score:g})"
            )
    return found


def _roster_entries(
    students: list[str], roster: Roster | None, platform: str
) -> Mapping[str, RosterEntry]:
    if roster is None:
        return {}
    missing = [s for s in students if s not in roster]
    if missing:
        raise ValueError(
            f"not in the roster: {', '.join(missing)} ({platform} cannot match them; "
            "add them to the roster or grade them apart)"
        )
    return roster


def _number(value: float, decimals: int) -> str:
    """Half-up rounding on the decimal value as written (2.675 -> 2.68), no trailing zeros."""
    quantum = Decimal(1).scaleb(-decimals)
    d = Decimal(repr(float(value))).quantize(quantum, rounding=ROUND_HALF_UP)
    text = format(d.normalize(), "f") if d else "0"
    return "0" if text in ("-0", "") else text


def _text(value: str) -> str:
    """Free text, defused for spreadsheets: no leading formula character, one line."""
    value = " ".join(value.splitlines())
    return "'" + value if value.startswith(_FORMULA_START) else value


def _identifier(value: str, what: str) -> None:
    """An identifier must reach the platform exactly as it is: refuse what a spreadsheet mangles."""
    if value != value.strip() or any(ord(c) < 32 for c in value):
        raise ValueError(f"{what} {value!r} has leading/trailing spaces or control characters")
    if value.startswith(_FORMULA_START):
        raise ValueError(f"{what} {value!r} starts with a formula character (= + - @)")


def _write(path: str | Path, lines: list[list[str]]) -> None:
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(lines)
    os.replace(tmp, path)
