"""The CSV of grades and the grade-distribution plot, both read back from the gradebook."""

from __future__ import annotations

import csv
import os
from collections import Counter
from typing import Any

from bertcourse.grade.assignment import AssignmentSpec
from bertcourse.grade.results import AWAITING_REVIEW, StoredGrade, final_score
from bertcourse.grade.status import Status

LATE_COLUMNS = ["late_penalty", "final_score", "late"]


def csv_rows(spec: AssignmentSpec, results: list[StoredGrade]) -> list[dict[str, Any]]:
    """One row per student: student_id, assignment, status, review, score, max_score, parts,
    the late policy's penalty, final score and explanation, detail.

    A submission held for review (`results.WITHHELD_STATUSES`) shows a part's points only
    once an instructor has approved them (0 once rejected); until every part is decided its
    parts and score are empty and `review` says `awaiting review`."""
    rows = []
    for r in results:
        row: dict[str, Any] = {
            "student_id": r.student_id,
            "assignment": spec.name,
            "status": r.status,
        }
        parts: dict[str, float | None] = {}
        decided = []
        for column, notebook, grade_id in spec.part_columns():
            value = r.parts.get((notebook, grade_id))
            if value is None and Status(r.status).zero:
                value = 0.0
            if r.withheld:
                decision = r.decision(notebook, grade_id)
                decided.append(decision.approved if decision else None)
                value = value if decision and decision.approved else (0.0 if decision else None)
            parts[column] = value
        known = [v for v in parts.values() if v is not None]
        score = sum(known) if r.parts else r.score
        row["review"] = _review(decided) if r.withheld else ""
        awaiting = row["review"] == AWAITING_REVIEW
        row["score"] = "" if awaiting else _num(score)
        row["max_score"] = _num(spec.max_score)
        for column, value in parts.items():
            row[column] = "" if value is None else _num(value)
        row["late_penalty"] = _num(r.late_penalty)
        row["final_score"] = "" if awaiting else _num(final_score(score, r.late_penalty))
        row["late"] = r.late
        row["detail"] = r.detail.replace("\n", " ")
        rows.append(row)
    return rows


def _review(decided: list[bool | None]) -> str:
    """The review column of a held submission, from its parts' decisions (None: undecided)."""
    if None in decided or not decided:
        return AWAITING_REVIEW
    return "approved" if all(decided) else "rejected" if not any(decided) else "approved in part"


def _num(x: float) -> str:
    return f"{float(x):g}"


def write_csv(
    path: str, spec: AssignmentSpec, results: list[StoredGrade], late: bool = False
) -> None:
    """The CSV (atomically replaced); the late columns only when a late policy was applied."""
    columns = ["student_id", "assignment", "status", "review", "score", "max_score"]
    columns += [c for c, _, _ in spec.part_columns()]
    columns += (LATE_COLUMNS if late else []) + ["detail"]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in csv_rows(spec, results):
            writer.writerow(row)
    os.replace(tmp, path)


COLORS = {s.value: s.colour for s in Status}


def plot_distribution(path: str, spec: AssignmentSpec, results: list[StoredGrade]) -> None:
    """Histogram of the final scores (after any late penalty), bars stacked by status, with the
    mean of graded work."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [r for r in csv_rows(spec, results) if r["final_score"] != ""]  # none withheld
    awaiting = len(results) - len(rows)
    top = max(spec.max_score, 1.0)
    bins = np.linspace(0, top, min(int(top), 20) + 1 if top >= 1 else 11)
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    data, labels, colors = [], [], []
    counts = Counter(r["status"] for r in rows)
    for status in map(str, Status):
        scores = [float(r["final_score"]) for r in rows if r["status"] == status]
        if scores:
            data.append(scores)
            labels.append(f"{status} ({len(scores)})")
            colors.append(COLORS[status])
    if data:
        ax.hist(data, bins=bins, stacked=True, label=labels, color=colors, edgecolor="white")
        graded = [float(r["final_score"]) for r in rows if r["status"] == Status.GRADED.value]
        if graded:
            mean = float(np.mean(graded))
            ax.axvline(mean, color="black", linestyle="--", linewidth=1)
            ax.text(mean, ax.get_ylim()[1] * 0.95, f" mean {mean:.1f}", va="top", fontsize=8)
        ax.legend(fontsize=8, frameon=False)
    ax.set_xlim(0, top)
    ax.set_xlabel(f"score (out of {spec.max_score:g})")
    ax.set_ylabel("students")
    held = f", {awaiting} awaiting review" if awaiting else ""
    ax.set_title(f"{spec.name}: grade distribution ({sum(counts.values())} students{held})")
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
