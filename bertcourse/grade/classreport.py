"""What the class got wrong: `python -m bertcourse.grade report ASSIGNMENT [...] --out DIR`.

Read from the gradebook (SQLite or PostgreSQL: a class graded by several machines into one
gradebook gives one report), never from the graders' memory:

- each graded part: the score distribution, the share of students who passed, every named
  mistake (a headline of `bertcourse.grading` catalogues, found in the failure's first line,
  which the grader keeps as the answer cell's auto comment) with its count, its share of the
  part's failures, the book section and the students; the failures no catalogue names,
  grouped by their first line (same check, same exception type and message), largest first;
- the statuses (`tampered`, `needs_review`, `timed_out`, ...) in rows of their own, and the
  submissions whose points are withheld until an instructor approves or rejects them;
- across assignments: students who made named mistakes in several assignments;
- across re-grades: `--before OLD/report.json` gives each count's previous value.

`--anonymous` writes counts only: no student id anywhere, and every group smaller than
`--min-group` merged into one "other" row. Outputs: DIR/index.html (plots embedded, works
offline), DIR/report.json, DIR/report.csv.
"""

from __future__ import annotations

import argparse
import base64
import csv
import dataclasses
import datetime
import html
import io
import json
import os
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable

from bertcourse.grade.status import Status

HIDDEN_PREFIX = "a hidden test failed: "
NOT_GRADED = "not graded"


# --- what the grader stores -----------------------------------------------------------------


def _headlines() -> dict[str, tuple[str, str]]:
    """Every catalogue's headlines, as shown and as a hidden test shows them -> (name, where)."""
    import importlib
    import itertools
    import pkgutil

    from bertcourse.grade.boundary.referee import _HIDDEN_VALUES
    from bertcourse.grading import catalogues, i18n, mistakes

    entries = [m for c in mistakes.CATALOGUE.values() for m in c]
    for info in pkgutil.iter_modules(catalogues.__path__):
        module = importlib.import_module(f"bertcourse.grading.catalogues.{info.name}")
        entries += [m for c in module.CATALOGUE.values() for m in c]
    found: dict[str, tuple[str, str]] = {}
    for mistake, lang in itertools.product(entries, i18n.LANGUAGES):  # a Chinese release too
        with i18n.language(lang):
            headline = mistake.headline
        hidden = re.sub(r"(expected|got|observed).*$", r"\1 ... (hidden)", headline)
        for pattern, mark in _HIDDEN_VALUES:
            hidden = pattern.sub(mark, hidden)
        for text in (headline, hidden):
            found.setdefault(text, (mistake.name, mistake.where))
    return found


# --- the report's records -------------------------------------------------------------------


@dataclasses.dataclass
class Group:
    """Students who share something: a named mistake, a failure's first line, a status."""

    label: str
    count: int
    share: float  # of the part's failures (of the assignment's students for a status)
    where: str = ""  # the book section (named mistakes)
    students: list[str] = dataclasses.field(default_factory=list)
    before: int | None = None  # the count in the previous report (--before), if it had one


@dataclasses.dataclass
class Part:
    assignment: str
    notebook: str
    part: str  # the test cell's grade id
    max_score: float
    students: int  # with a score for this part
    passed: int
    pass_share: float
    scores: dict[str, int]  # score -> students
    failed: int
    mistakes: list[Group]
    unnamed: list[Group]


@dataclasses.dataclass
class Assignment:
    name: str
    students: int
    statuses: list[Group]
    parts: list[Part]
    awaiting: int = 0  # submissions whose points are withheld until an instructor decides
    awaiting_students: list[str] = dataclasses.field(default_factory=list)  # empty: anonymous


@dataclasses.dataclass
class Persistent:
    student: str
    mistakes: list[str]  # "assignment / part: mistake", two assignments or more


@dataclasses.dataclass
class Report:
    created: str
    course_id: str
    anonymous: bool
    min_group: int
    assignments: list[Assignment]
    persistent: list[Persistent]  # empty when anonymous
    persistent_counts: dict[str, int]  # number of assignments with a named mistake -> students
    before: str = ""  # the previous report compared with (--before)


# --- reading the gradebook ------------------------------------------------------------------


@dataclasses.dataclass
class Row:
    """One student's part: score (None: not graded) and the stored failure's first line."""

    student: str
    notebook: str
    part: str
    max_score: float
    score: float | None
    comment: str | None


def read_assignment(db_url: str, course_id: str, assignment: str) -> tuple[dict, list[Row]]:
    """The statuses (student -> status) and every part of every submission, in two queries."""
    from nbgrader.api import Assignment as NbAssignment
    from nbgrader.api import (
        Comment,
        Grade,
        Gradebook,
        GradeCell,
        Notebook,
        SolutionCell,
        SubmittedAssignment,
        SubmittedNotebook,
    )

    from bertcourse.grade.gradebook import GradeStatus

    with Gradebook(db_url, course_id) as gb:
        db = gb.db
        statuses = {
            r.student_id: r.status
            for r in db.query(GradeStatus).filter_by(course_id=course_id, assignment=assignment)
        }
        base = (
            db.query(SubmittedAssignment.student_id, Notebook.name)
            .join(NbAssignment, SubmittedAssignment.assignment_id == NbAssignment.id)
            .join(SubmittedNotebook, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
            .join(Notebook, SubmittedNotebook.notebook_id == Notebook.id)
            .filter(NbAssignment.name == assignment, NbAssignment.course_id == course_id)
        )
        grades = base.join(Grade, Grade.notebook_id == SubmittedNotebook.id).join(
            GradeCell, Grade.cell_id == GradeCell.id
        )
        grades = grades.with_entities(
            SubmittedAssignment.student_id,
            Notebook.name,
            GradeCell.name,
            GradeCell.max_score,
            Grade.auto_score,
            Grade.manual_score,
        ).order_by(Notebook.id, GradeCell.id)  # the parts in the notebook's order
        comments = base.join(Comment, Comment.notebook_id == SubmittedNotebook.id).join(
            SolutionCell, Comment.cell_id == SolutionCell.id
        )
        comments = comments.with_entities(
            SubmittedAssignment.student_id, Notebook.name, SolutionCell.name, Comment.auto_comment
        )
        texts = {(s, nb, cell): text for s, nb, cell, text in comments}
        rows = []
        for student, notebook, part, max_score, auto, manual in grades:
            score = manual if manual is not None else auto
            answer = part.removesuffix("_tests")
            rows.append(
                Row(
                    student,
                    notebook,
                    part,
                    float(max_score),
                    score,
                    texts.get((student, notebook, answer)),
                )
            )
    return statuses, rows


def awaiting_review(db_url: str, course_id: str, assignment: str) -> list[str]:
    """Students whose submission is held for review with a part no instructor has decided
    (for the bytes graded now)."""
    from bertcourse.grade.gradebook import read_results

    return [
        g.student_id
        for g in read_results(db_url, course_id, assignment)
        if g.withheld and any(g.decision(*part) is None for part in g.parts or [("", "")])
    ]


# --- building the report --------------------------------------------------------------------


def _signature(comment: str | None) -> str:
    """What unnamed failures have in common: the first line, numbers of a value elided."""
    if not comment:
        return "(no message stored)"
    text = comment.removeprefix(HIDDEN_PREFIX)
    return re.sub(r"(max abs error|observed|got|expected)\s+[-\d.e+]+", r"\1 …", text)


def _named(comment: str | None, headlines: dict[str, tuple[str, str]]) -> tuple[str, str] | None:
    if not comment:
        return None
    first = comment.removeprefix(HIDDEN_PREFIX).strip()
    return headlines.get(first)


def _groups(
    members: dict[str, list[str]], total: int, where: dict[str, str] | None = None
) -> list[Group]:
    groups = [
        Group(
            label,
            len(students),
            len(students) / total if total else 0.0,
            (where or {}).get(label, ""),
            sorted(students),
        )
        for label, students in members.items()
    ]
    return sorted(groups, key=lambda g: (-g.count, g.label))


def build_part(
    assignment: str,
    notebook: str,
    part: str,
    rows: list[Row],
    headlines: dict[str, tuple[str, str]],
) -> Part:
    graded = [r for r in rows if r.score is not None]
    max_score = rows[0].max_score if rows else 0.0
    passed = [r for r in graded if r.score >= r.max_score - 1e-9]
    failed = [r for r in graded if r.score < r.max_score - 1e-9]
    named: dict[str, list[str]] = defaultdict(list)
    where: dict[str, str] = {}
    unnamed: dict[str, list[str]] = defaultdict(list)
    for r in failed:
        found = _named(r.comment, headlines)
        if found:
            named[found[0]].append(r.student)
            where[found[0]] = found[1]
        else:
            unnamed[_signature(r.comment)].append(r.student)
    scores = Counter(f"{r.score:g}" for r in graded)
    return Part(
        assignment=assignment,
        notebook=notebook,
        part=part,
        max_score=max_score,
        students=len(graded),
        passed=len(passed),
        pass_share=len(passed) / len(graded) if graded else 0.0,
        scores=dict(sorted(scores.items(), key=lambda kv: float(kv[0]))),
        failed=len(failed),
        mistakes=_groups(named, len(failed), where),
        unnamed=_groups(unnamed, len(failed)),
    )


def build_assignment(
    name: str, statuses: dict[str, str], rows: list[Row], headlines: dict
) -> Assignment:
    by_part: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        by_part[(r.notebook, r.part)].append(r)
    students = sorted(set(statuses) | {r.student for r in rows})
    by_status: dict[str, list[str]] = defaultdict(list)
    for student in students:
        by_status[statuses.get(student, NOT_GRADED)].append(student)
    order = {s.value: i for i, s in enumerate(Status)}
    status_groups = _groups(by_status, len(students))
    status_groups.sort(key=lambda g: order.get(g.label, len(order)))
    parts = [
        build_part(name, notebook, part, part_rows, headlines)
        for (notebook, part), part_rows in by_part.items()
    ]
    return Assignment(name, len(students), status_groups, parts)


def build(
    db_url: str,
    course_id: str,
    assignments: Iterable[str],
    *,
    anonymous: bool = False,
    min_group: int = 5,
    before: Report | None = None,
    before_path: str = "",
) -> Report:
    headlines = _headlines()
    built = []
    for name in assignments:
        statuses, rows = read_assignment(db_url, course_id, name)
        if not statuses and not rows:
            raise ValueError(f"assignment {name!r} has no grades in the gradebook {db_url}")
        built.append(build_assignment(name, statuses, rows, headlines))
        built[-1].awaiting_students = awaiting_review(db_url, course_id, name)
        built[-1].awaiting = len(built[-1].awaiting_students)
    persistent = _persistent(built)
    counts = Counter(len({m.split(" / ")[0] for m in p.mistakes}) for p in persistent)
    report = Report(
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        course_id=course_id,
        anonymous=anonymous,
        min_group=min_group if anonymous else 1,
        assignments=built,
        persistent=persistent,
        persistent_counts={str(k): v for k, v in sorted(counts.items())},
        before=before_path,
    )
    if before is not None:
        _compare_with(report, before)
    if anonymous:
        _anonymise(report, min_group)
    return report


def _persistent(assignments: list[Assignment]) -> list[Persistent]:
    """Students with named mistakes in two assignments or more."""
    made: dict[str, list[str]] = defaultdict(list)
    for a in assignments:
        for part in a.parts:
            for group in part.mistakes:
                for student in group.students:
                    made[student].append(f"{a.name} / {part.part}: {group.label}")
    return [
        Persistent(student, sorted(items))
        for student, items in sorted(made.items())
        if len({i.split(" / ")[0] for i in items}) >= 2
    ]


def _compare_with(report: Report, before: Report) -> None:
    """Each group's count in the previous report (a re-grade after a re-teach)."""
    old: dict[tuple, int] = {}
    for a in before.assignments:
        for g in a.statuses:
            old[(a.name, "status", g.label)] = g.count
        for p in a.parts:
            old[(a.name, p.part, "passed")] = p.passed
            for g in p.mistakes + p.unnamed:
                old[(a.name, p.part, g.label)] = g.count
    for a in report.assignments:
        for g in a.statuses:
            g.before = old.get((a.name, "status", g.label), 0)
        for p in a.parts:
            for g in p.mistakes + p.unnamed:
                g.before = old.get((a.name, p.part, g.label), 0)


def _merge_small(groups: list[Group], min_group: int, total: int) -> list[Group]:
    kept = [dataclasses.replace(g, students=[]) for g in groups if g.count >= min_group]
    small = [g for g in groups if g.count < min_group]
    if small:
        count = sum(g.count for g in small)
        before = None if any(g.before is None for g in small) else sum(g.before for g in small)
        kept.append(
            Group(
                f"other ({len(small)} groups of fewer than {min_group})",
                count,
                count / total if total else 0.0,
                before=before,
            )
        )
    return kept


def _anonymise(report: Report, min_group: int) -> None:
    """Counts only: no student id, groups smaller than `min_group` merged."""
    report.persistent = []
    for a in report.assignments:
        a.awaiting_students = []
        a.statuses = _merge_small(a.statuses, min_group, a.students)
        for p in a.parts:
            p.mistakes = _merge_small(p.mistakes, min_group, p.failed)
            p.unnamed = _merge_small(p.unnamed, min_group, p.failed)


def load(path: str) -> Report:
    """A report.json back as a `Report` (for --before)."""
    with open(path) as f:
        data = json.load(f)
    assignments = []
    for a in data["assignments"]:
        parts = [
            Part(
                **{
                    **p,
                    "mistakes": [Group(**g) for g in p["mistakes"]],
                    "unnamed": [Group(**g) for g in p["unnamed"]],
                }
            )
            for p in a["parts"]
        ]
        statuses = [Group(**g) for g in a["statuses"]]
        assignments.append(
            Assignment(
                a["name"],
                a["students"],
                statuses,
                parts,
                a.get("awaiting", 0),
                a.get("awaiting_students", []),
            )
        )
    return Report(
        **{
            **data,
            "assignments": assignments,
            "persistent": [Persistent(**p) for p in data["persistent"]],
        }
    )


# --- writing it -----------------------------------------------------------------------------


def csv_rows(report: Report) -> list[dict[str, str]]:
    """One row per group: assignment, part, kind (status, passed, mistake, unnamed), label,
    section, count, share, before, students (empty when anonymous)."""
    rows = []

    def add(a, part, kind, label, count, share, where="", before=None, students=()):
        rows.append(
            {
                "assignment": a,
                "part": part,
                "kind": kind,
                "label": label,
                "section": where,
                "count": str(count),
                "share": f"{share:.4f}",
                "before": "" if before is None else str(before),
                "students": " ".join(students),
            }
        )

    for a in report.assignments:
        if a.awaiting:
            share = a.awaiting / a.students if a.students else 0.0
            add(
                a.name,
                "",
                "awaiting review",
                "points withheld",
                a.awaiting,
                share,
                students=a.awaiting_students,
            )
        for g in a.statuses:
            add(
                a.name,
                "",
                "status",
                g.label,
                g.count,
                g.share,
                before=g.before,
                students=g.students,
            )
        for p in a.parts:
            add(a.name, p.part, "passed", "passed", p.passed, p.pass_share)
            for kind, groups in (("mistake", p.mistakes), ("unnamed", p.unnamed)):
                for g in groups:
                    add(
                        a.name,
                        p.part,
                        kind,
                        g.label,
                        g.count,
                        g.share,
                        g.where,
                        g.before,
                        g.students,
                    )
    return rows


def _plot(a: Assignment) -> str:
    """One horizontal bar per part: passed, named mistakes, unnamed failures (PNG, base64)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [p.part for p in a.parts]
    passed = [p.passed for p in a.parts]
    named = [sum(g.count for g in p.mistakes) for p in a.parts]
    unnamed = [sum(g.count for g in p.unnamed) for p in a.parts]
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(labels) + 1.2), dpi=100)
    y = range(len(labels))
    ax.barh(y, passed, color="#55a868", label="passed")
    ax.barh(y, named, left=passed, color="#c44e52", label="named mistake")
    left = [p + n for p, n in zip(passed, named)]
    ax.barh(y, unnamed, left=left, color="#8c8c8c", label="other failure")
    ax.set_yticks(list(y), labels)
    ax.invert_yaxis()
    ax.set_xlabel("students")
    ax.set_title(f"{a.name}: {a.students} students")
    ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, -0.3), fontsize="small", frameon=False, ncols=3
    )
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


CSS = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:1rem auto;padding:0 1rem}
table{border-collapse:collapse;margin:.5rem 0 1rem}td,th{border:1px solid #ccc;padding:.2rem .5rem;
text-align:left;vertical-align:top}td.n{text-align:right}.ids{font-size:.8em;color:#555;
max-width:22rem}h3{margin-bottom:.2rem}.status-flag{background:#fdecea}"""


def _count(g: Group) -> str:
    text = str(g.count)
    if g.before is not None:
        text += f" <small>(was {g.before})</small>"
    return text


def _group_table(groups: list[Group], kind: str, anonymous: bool, with_where: bool) -> str:
    if not groups:
        return f"<p><i>no {kind}</i></p>"
    head = "<tr><th>" + kind + "</th><th>students</th><th>share of failures</th>"
    head += "<th>book section</th>" if with_where else ""
    head += "" if anonymous else "<th>who</th>"
    rows = []
    for g in groups:
        cells = f"<td>{html.escape(g.label)}</td><td class=n>{_count(g)}</td>"
        cells += f"<td class=n>{g.share:.0%}</td>"
        cells += f"<td>{html.escape(g.where)}</td>" if with_where else ""
        cells += "" if anonymous else f"<td class=ids>{html.escape(', '.join(g.students))}</td>"
        rows.append(f"<tr>{cells}</tr>")
    return "<table>" + head + "</tr>" + "".join(rows) + "</table>"


def _who(group: Group) -> str:
    """The students of a status row; not the long list of those graded normally."""
    if group.label == Status.GRADED.value:
        return f"<i>{group.count} students</i>"
    return html.escape(", ".join(group.students))


def _awaiting_html(a: Assignment, anonymous: bool) -> str:
    """The submissions whose points wait for an instructor's decision."""
    if not a.awaiting:
        return "<h3>Awaiting review</h3><p><i>no submission awaits review</i></p>"
    who = "" if anonymous else f": {html.escape(', '.join(a.awaiting_students))}"
    command = html.escape(f"python -m bertcourse.grade approve {a.name} STUDENT")
    return (
        f"<h3>Awaiting review</h3><p class=status-flag>{a.awaiting} submission"
        f"{'s' if a.awaiting != 1 else ''}, points withheld from the CSV, the LMS files and "
        f"the feedback pages until you decide{who}. Read the code the grader lists in each "
        f"CSV row's detail, then <code>{command}</code> (or <code>reject</code>; "
        "<code>--part</code> for one part).</p>"
    )


def render_html(report: Report) -> str:
    out = [
        "<!doctype html><html><head><meta charset=utf-8>",
        f"<title>Class report: {html.escape(', '.join(a.name for a in report.assignments))}"
        f"</title><style>{CSS}</style></head><body>",
        f"<h1>What the class got wrong</h1><p>Course {html.escape(report.course_id)}, from the "
        f"gradebook, {html.escape(report.created)}."
        + (
            f" Anonymous: counts only, groups under {report.min_group} merged."
            if report.anonymous
            else " <b>Instructor's copy: it names students.</b>"
        )
        + (f" Counts in brackets: {html.escape(report.before)}." if report.before else "")
        + "</p>",
    ]
    for a in report.assignments:
        out.append(f"<h2 id={html.escape(a.name)}>{html.escape(a.name)}</h2>")
        out.append(
            f'<img alt="{html.escape(a.name)}: parts" src="data:image/png;base64,{_plot(a)}">'
        )
        status_rows = "".join(
            f"<tr{' class=status-flag' if g.label not in ('graded',) else ''}>"
            f"<td>{html.escape(g.label)}</td><td class=n>{_count(g)}</td>"
            f"<td class=n>{g.share:.0%}</td>"
            + ("" if report.anonymous else f"<td class=ids>{_who(g)}</td>")
            + "</tr>"
            for g in a.statuses
        )
        out.append(
            "<h3>Statuses</h3><table><tr><th>status</th><th>students</th><th>share</th>"
            + ("" if report.anonymous else "<th>who</th>")
            + f"</tr>{status_rows}</table>"
        )
        out.append(_awaiting_html(a, report.anonymous))
        for p in a.parts:
            scores = ", ".join(f"{s}: {n}" for s, n in p.scores.items())
            out.append(
                f"<h3>{html.escape(p.part)}</h3><p>{p.passed} of {p.students} passed "
                f"({p.pass_share:.0%}); scores (of {p.max_score:g}): {html.escape(scores)}</p>"
            )
            out.append(_group_table(p.mistakes, "named mistake", report.anonymous, True))
            out.append(_group_table(p.unnamed, "other failure", report.anonymous, False))
    if report.persistent:
        out.append("<h2>Mistakes that persist across assignments</h2><table>")
        out.append("<tr><th>student</th><th>named mistakes</th></tr>")
        for p in report.persistent:
            items = "<br>".join(html.escape(m) for m in p.mistakes)
            out.append(f"<tr><td>{html.escape(p.student)}</td><td>{items}</td></tr>")
        out.append("</table>")
    if report.persistent_counts:
        counts = ", ".join(f"{k} assignments: {v}" for k, v in report.persistent_counts.items())
        out.append(f"<p>Students with named mistakes in several assignments: {counts}.</p>")
    out.append("</body></html>")
    return "\n".join(out)


def write(report: Report, out_dir: str) -> dict[str, str]:
    """DIR/index.html, DIR/report.json, DIR/report.csv; returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {
        name: os.path.join(out_dir, name) for name in ("index.html", "report.json", "report.csv")
    }
    with open(paths["report.json"], "w") as f:
        json.dump(dataclasses.asdict(report), f, indent=1, ensure_ascii=False)
    rows = csv_rows(report)
    with open(paths["report.csv"], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["assignment"])
        writer.writeheader()
        writer.writerows(rows)
    with open(paths["index.html"], "w") as f:
        f.write(render_html(report))
    return paths


# --- the command ----------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bertcourse.grade report",
        description="What the class got wrong, from the gradebook: per part, the pass share, "
        "the named mistakes (with the book's section), the other failures grouped, the "
        "statuses; across assignments and re-grades.",
    )
    parser.add_argument("assignments", nargs="+", metavar="ASSIGNMENT")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder to write into")
    parser.add_argument("--course", default=".", help="course folder with nbgrader_config.py")
    parser.add_argument("--db", help="gradebook URL (default: CourseDirectory.db_url)")
    parser.add_argument(
        "--anonymous", action="store_true", help="counts only: no student ids, small groups merged"
    )
    parser.add_argument(
        "--min-group",
        type=int,
        default=5,
        help="with --anonymous, groups smaller than this are merged (%(default)s)",
    )
    parser.add_argument(
        "--before", metavar="JSON", help="an earlier report.json: show each count's change"
    )
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.min_group < 1:
        print("--min-group must be at least 1", file=sys.stderr)
        return 2
    from bertcourse.grade.assignment import load_coursedir

    coursedir, _ = load_coursedir(args.course, args.db)
    try:
        before = load(args.before) if args.before else None
        report = build(
            coursedir.db_url,
            coursedir.course_id,
            args.assignments,
            anonymous=args.anonymous,
            min_group=args.min_group,
            before=before,
            before_path=args.before or "",
        )
    except (ValueError, FileNotFoundError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    paths = write(report, args.out)
    print(f"class report: {paths['index.html']} (JSON {paths['report.json']})")
    return 0
