"""The status of a graded submission: its meaning, colour and precedence, in one place.

A submission gets exactly one status. When several notebooks (or several problems of one
notebook) disagree, the one that comes first in `Status` wins: a notebook that is not a
notebook outranks a cheat, a cheat outranks running out of memory, and so on.
"""

from __future__ import annotations

import enum


class Status(str, enum.Enum):
    """One submission's outcome. A `str` so that it is written as its name everywhere."""

    INVALID_NOTEBOOK = "invalid_notebook"
    TAMPERED = "tampered"
    NEEDS_REVIEW = "needs_review"
    MEMORY_EXCEEDED = "memory_exceeded"
    TIMED_OUT = "timed_out"
    CRASHED = "crashed"
    MISSING = "missing"
    GRADED = "graded"

    def __str__(self) -> str:
        return self.value

    @property
    def meaning(self) -> str:
        """What the status tells the instructor (the CLI's --help lists these)."""
        return _MEANING[self]

    @property
    def feedback(self) -> str:
        """What the student reads on the feedback page."""
        return _FEEDBACK[self]

    @property
    def colour(self) -> str:
        return _COLOUR[self]

    @property
    def zero(self) -> bool:
        """Does this status score 0 whatever the tests said?"""
        return self in (Status.INVALID_NOTEBOOK, Status.MISSING)

    @property
    def rank(self) -> int:
        return list(Status).index(self)

    @classmethod
    def worst(cls, statuses: list[Status]) -> Status:
        """The status that decides when several apply (GRADED when there is none)."""
        return min(statuses, key=lambda s: s.rank, default=Status.GRADED)


_MEANING = {
    Status.GRADED: "every cell ran; the score is what the referee's checks gave",
    Status.TIMED_OUT: (
        "a cell or a call ran past --cell-timeout, the notebook past --notebook-timeout, or the "
        "whole submission (reading to feedback) past its one clock"
    ),
    Status.CRASHED: "the kernel died (os._exit, a segfault) or the grader failed",
    Status.MEMORY_EXCEEDED: "the kernel reached --memory",
    Status.INVALID_NOTEBOOK: "the file is not a readable notebook, or a link/FIFO/device (score 0)",
    Status.TAMPERED: (
        "tests or their metadata were changed, or the code reaches for the grading machinery "
        "(frames, gc, sys.modules, hooks, ...); graded by the referee, for review"
    ),
    Status.NEEDS_REVIEW: (
        "the code uses dynamic access (getattr with a computed name, eval, importlib, ...) "
        "that could hide a forbidden call, or something ran beside a graded call (a thread or "
        "process the code started, a second connection to the calls' socket, the operator "
        "trace off), or its cells could not be read in time; its points wait for a review"
    ),
    Status.MISSING: "no notebook was submitted (score 0)",
}
_FEEDBACK = {
    Status.GRADED: "graded",
    Status.TIMED_OUT: "timed out: a cell or the whole notebook ran past its time limit",
    Status.CRASHED: "crashed: the Python kernel stopped while running your notebook",
    Status.MEMORY_EXCEEDED: "stopped: your notebook used more memory than allowed",
    Status.INVALID_NOTEBOOK: "not gradable: the file is not a valid notebook",
    Status.TAMPERED: "flagged for review: the tests were changed or the code reaches into the grader",
    Status.NEEDS_REVIEW: "flagged for review: dynamic code (getattr, eval, ...) the grader cannot read",
    Status.MISSING: "missing: no notebook was submitted",
}
_COLOUR = {
    Status.GRADED: "#4c72b0",
    Status.TAMPERED: "#c44e52",
    Status.NEEDS_REVIEW: "#e5ae38",
    Status.TIMED_OUT: "#dd8452",
    Status.CRASHED: "#8c8c8c",
    Status.MEMORY_EXCEEDED: "#937860",
    Status.INVALID_NOTEBOOK: "#da8bc3",
    Status.MISSING: "#cccccc",
}
PENDING = "pending"  # written while a submission is being graded; never a final status
# statuses whose scores stay out of the learning platform until an instructor has looked
HELD_FOR_REVIEW = (PENDING, Status.NEEDS_REVIEW.value, Status.TAMPERED.value)
