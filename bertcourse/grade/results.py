"""What grading one submission produced, as small typed records.

A worker returns one `SubmissionResult` per student (picklable: the graded notebooks stay in
the worker); the gradebook, the feedback page, the CSV and the LMS exports read it. Problems
are kept as a list until they are written (`detail` joins them for the CSV and the gradebook).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bertcourse.grade.status import Status

COMMENT_LIMIT = 500  # characters of a failure kept as the answer cell's auto comment
# statuses whose points a person releases: the gradebook keeps them, every export withholds
# them until an instructor approves (`python -m bertcourse.grade approve`)
WITHHELD_STATUSES = (Status.NEEDS_REVIEW.value, Status.TAMPERED.value)
AWAITING_REVIEW = "awaiting review"  # the CSV's review column while a part is undecided


def part_comment(outcome: str, message: str) -> str | None:
    """The auto comment of an answer cell whose test cell did not pass: its outcome and the
    first line of the failure (which names the mistake when a catalogue knows it)."""
    if outcome == "passed":
        return None
    first = message.strip().splitlines()[0] if message.strip() else outcome
    return first[:COMMENT_LIMIT]


def final_score(score: float, late_penalty: float) -> float:
    """The one definition of the score that is published: the referee's score less the late
    penalty, never below 0 (the CSV, the gradebook, the plot and the LMS files use it)."""
    return max(0.0, score - late_penalty)


@dataclasses.dataclass
class PartResult:
    """One graded test cell: its score (None: not graded), what happened, the message."""

    score: float | None = 0.0
    outcome: str = "not_run"  # passed, failed, timed_out, not_run
    message: str = ""


@dataclasses.dataclass
class NotebookResult:
    """One notebook of a submission."""

    status: Status
    parts: dict[str, PartResult]
    problems: list[str] = dataclasses.field(default_factory=list)
    comments: dict[str, str | None] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    peak_memory: int = 0
    notebook: Any = None  # the graded notebook (worker only; dropped before pickling)

    @property
    def score(self) -> float:
        return sum(p.score or 0.0 for p in self.parts.values())


@dataclasses.dataclass
class SubmissionResult:
    """One student's submission of one assignment."""

    student: str
    assignment: str
    run_id: str
    max_score: float
    status: Status = Status.CRASHED
    notebooks: dict[str, NotebookResult] = dataclasses.field(default_factory=dict)
    problems: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    submitted: bool = False
    late_penalty: float = 0.0  # points taken by the late policy (0 without one)
    late: str = ""  # the late policy's one-line explanation
    digest: str = ""  # sha256 of the submitted notebooks' bytes (`gradebook.submission_digest`)

    @property
    def withheld(self) -> bool:
        """Are the points held until an instructor approves them?"""
        return self.status.value in WITHHELD_STATUSES

    @property
    def score(self) -> float:
        """The referee's score, before any late penalty; 0 for the statuses that score 0."""
        if self.status.zero:
            return 0.0
        return sum(nb.score for nb in self.notebooks.values())

    @property
    def final_score(self) -> float:
        return final_score(self.score, self.late_penalty)

    @property
    def detail(self) -> str:
        return "; ".join(self.problems)

    def without_notebooks(self) -> SubmissionResult:
        """The same result without the graded notebooks (small enough to send between processes)."""
        notebooks = {k: dataclasses.replace(v, notebook=None) for k, v in self.notebooks.items()}
        return dataclasses.replace(self, notebooks=notebooks)


@dataclasses.dataclass(frozen=True)
class Decision:
    """An instructor's decision on a submission held for review: approve releases the points
    the grader computed, reject gives the part 0. It holds for the bytes it was made on."""

    notebook: str  # with grade_id, the part; both "" for every part of the submission
    grade_id: str
    approved: bool
    digest: str  # the submission's digest when it was made
    reason: str = ""
    by: str = ""
    at: str = ""


@dataclasses.dataclass
class StoredGrade:
    """One student's grade as the gradebook holds it (what the CSV and the plot are made from)."""

    student_id: str
    status: str
    detail: str
    score: float
    max_score: float
    parts: dict[tuple[str, str], float | None]  # (notebook, grade id) -> score
    late_penalty: float = 0.0
    late: str = ""
    digest: str = ""  # the graded submission's digest
    decisions: list[Decision] = dataclasses.field(default_factory=list)

    @property
    def final_score(self) -> float:
        return final_score(self.score, self.late_penalty)

    @property
    def withheld(self) -> bool:
        return self.status in WITHHELD_STATUSES

    def decision(self, notebook: str, grade_id: str) -> Decision | None:
        """The decision that holds for one part of the submission graded now: the part's
        own, else the whole submission's; a decision made on other bytes holds for nothing."""
        current = [d for d in self.decisions if self.digest and d.digest == self.digest]
        for key in ((notebook, grade_id), ("", "")):
            found = [d for d in current if (d.notebook, d.grade_id) == key]
            if found:
                return found[-1]
        return None
