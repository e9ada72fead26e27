"""Grades and statuses in nbgrader's gradebook (SQLite or PostgreSQL), written atomically.

nbgrader's tables keep the scores: one `Grade` row per graded cell of each submitted notebook
(`auto_score`), so `nbgrader export`, `generate_feedback` and the formgrader keep working. The
status of every submission lives beside them, in the same database, in one table of ours:

    bertcourse_grade_status(course_id, assignment, student_id, status, detail, score,
                            max_score, run_id, host, seconds, graded_at)

A submission is written twice: `mark_pending` (status `pending`, every auto score cleared, in
one transaction) before its kernel starts, and `save_result` (all scores, comments, the
status, in one transaction) at the end. A grader that dies in between leaves `pending`, not
the previous run's marks. Writes are retried when SQLite reports a lock (several worker
processes share the file; WAL mode lets readers and the writer overlap).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import os
import random
import socket
import stat
import time
from collections.abc import Callable
from typing import Any, TypeVar

from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy import Boolean, Column, DateTime, Float, String, Text, create_engine, text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, declarative_base

from bertcourse.grade.results import Decision, StoredGrade, SubmissionResult  # noqa: E402
from bertcourse.grade.status import PENDING, Status  # noqa: E402

Base = declarative_base()
T = TypeVar("T")


class GradeStatus(Base):
    """The outcome of the last grading run of one submission."""

    __tablename__ = "bertcourse_grade_status"
    course_id = Column(String(128), primary_key=True)
    assignment = Column(String(128), primary_key=True)
    student_id = Column(String(128), primary_key=True)
    status = Column(String(32), nullable=False)
    detail = Column(Text(), nullable=False, default="")
    score = Column(Float(), nullable=False, default=0.0)
    max_score = Column(Float(), nullable=False, default=0.0)
    run_id = Column(String(64), nullable=False, default="")
    host = Column(String(255), nullable=False, default="")
    seconds = Column(Float(), nullable=False, default=0.0)
    graded_at = Column(DateTime(), nullable=True)
    late_penalty = Column(Float(), nullable=True, default=0.0)  # points the late policy took
    late = Column(Text(), nullable=True, default="")  # its one-line explanation
    digest = Column(String(64), nullable=True, default="")  # sha256 of the graded notebooks


class ReviewDecision(Base):
    """An instructor's decision on a submission held for review (`results.Decision`): one per
    part, or for the whole submission (notebook and grade_id empty); a new one replaces it."""

    __tablename__ = "bertcourse_review_decision"
    course_id = Column(String(128), primary_key=True)
    assignment = Column(String(128), primary_key=True)
    student_id = Column(String(128), primary_key=True)
    notebook = Column(String(128), primary_key=True, default="")
    grade_id = Column(String(128), primary_key=True, default="")
    approved = Column(Boolean(), nullable=False)
    digest = Column(String(64), nullable=False)  # the submission it was made on
    reason = Column(Text(), nullable=False, default="")
    decided_by = Column(String(128), nullable=False, default="")
    decided_at = Column(DateTime(), nullable=False)


def prepare(db_url: str, course_id: str) -> None:
    """Create nbgrader's tables and ours; put SQLite in WAL mode. Run once, before workers."""
    with Gradebook(db_url, course_id):
        pass
    engine = create_engine(db_url, future=True)
    try:
        Base.metadata.create_all(engine)
        _add_missing_columns(engine)
        if engine.dialect.name == "sqlite":
            with engine.connect() as conn:
                conn.execute(text("PRAGMA journal_mode=WAL"))
                conn.commit()
    finally:
        engine.dispose()


def _add_missing_columns(engine) -> None:
    """Columns added after a gradebook was created (late_penalty, late): ALTER TABLE ADD."""
    from sqlalchemy import inspect as sa_inspect

    have = {c["name"] for c in sa_inspect(engine).get_columns(GradeStatus.__tablename__)}
    with engine.connect() as conn:
        for column in GradeStatus.__table__.columns:
            if column.name not in have:
                kind = column.type.compile(dialect=engine.dialect)
                conn.execute(
                    text(f"ALTER TABLE {GradeStatus.__tablename__} ADD COLUMN {column.name} {kind}")
                )
        conn.commit()


def retrying(fn: Callable[[], T], attempts: int = 60) -> T:
    """Run `fn`, retrying on lock contention and dropped connections (backoff up to ~2 s)."""
    for attempt in range(attempts):
        try:
            return fn()
        except (OperationalError, DBAPIError) as error:
            text_ = str(error).lower()
            transient = any(
                s in text_
                for s in (
                    "locked",
                    "busy",
                    "deadlock",
                    "could not serialize",
                    "connection",
                    "already exists",  # two graders creating the tables at once
                    "duplicate key",
                )
            )
            if not transient or attempt == attempts - 1:
                raise
            time.sleep(min(2.0, 0.05 * (1.5**attempt)) * (0.5 + random.random()))
    raise RuntimeError("unreachable")


class GradebookWriter:
    """One worker's connection to the gradebook."""

    def __init__(self, db_url: str, course_id: str) -> None:
        self.db_url = db_url
        self.course_id = course_id
        self.gb = Gradebook(db_url, course_id)
        self.db = self.gb.db
        self.host = socket.gethostname()

    def close(self) -> None:
        self.gb.close()

    def _status_row(self, assignment: str, student: str) -> GradeStatus:
        """The student's status row, created if missing: an upsert (a row another process
        wrote meanwhile, a dead worker's included, is updated, never inserted twice)."""
        key = (self.course_id, assignment, student)
        row = self.db.get(GradeStatus, key)
        if row is None:
            try:
                with self.db.begin_nested():
                    row = GradeStatus(
                        course_id=self.course_id,
                        assignment=assignment,
                        student_id=student,
                        status=PENDING,
                    )
                    self.db.add(row)
            except IntegrityError:
                row = self.db.get(GradeStatus, key, populate_existing=True)
        return row

    def _transaction(self, body: Callable[[], None]) -> None:
        def attempt() -> None:
            try:
                body()
                self.db.commit()
            except BaseException:
                self.db.rollback()
                raise

        retrying(attempt)

    def mark_pending(
        self, assignment: str, student: str, run_id: str, timestamp: Any | None, submitted: bool
    ) -> None:
        """Clear the student's previous marks and say the submission is being graded."""

        def body() -> None:
            gb = self.gb
            gb.update_or_create_student(student)
            if submitted:
                kwargs = {"timestamp": timestamp} if timestamp else {}
                submission = gb.update_or_create_submission(assignment, student, **kwargs)
                for notebook in submission.notebooks:
                    notebook.flagged = False
                    for grade in notebook.grades:
                        grade.auto_score = None
                        grade.needs_manual_grade = True
                    for comment in notebook.comments:
                        comment.auto_comment = None
            else:
                try:
                    gb.remove_submission(assignment, student)  # a stale row would export marks
                except MissingEntry:
                    pass
            row = self._status_row(assignment, student)
            row.status = PENDING
            row.detail = "grading started"
            row.score = 0.0
            row.run_id = run_id
            row.host = self.host

        self._transaction(body)

    def save_result(self, assignment: str, student: str, result: SubmissionResult) -> None:
        """Write every score and the status in one transaction."""

        def body() -> None:
            gb = self.gb
            if result.submitted:
                submission = gb.find_submission(assignment, student)
                for notebook in submission.notebooks:
                    graded = result.notebooks.get(notebook.name)
                    notebook.flagged = result.status is not Status.GRADED
                    first = notebook.name == min(result.notebooks, default=notebook.name)
                    # nbgrader sums the penalty over a submission's notebooks: put it on one
                    notebook.late_submission_penalty = result.late_penalty if first else 0.0
                    for grade in notebook.grades:
                        part = graded.parts.get(grade.cell.name) if graded else None
                        if part is None or part.score is None:
                            grade.auto_score = None
                            grade.needs_manual_grade = True
                        else:
                            grade.auto_score = float(part.score)
                            grade.needs_manual_grade = grade.manual_score is not None
                    for comment in notebook.comments:
                        comment.auto_comment = (
                            graded.comments.get(comment.cell.name) if graded else None
                        )
            row = self._status_row(assignment, student)
            row.status = result.status.value
            row.detail = result.detail[:20000]
            row.score = float(result.score)
            row.max_score = float(result.max_score)
            row.run_id = result.run_id
            row.host = self.host
            row.seconds = float(result.seconds)
            row.late_penalty = float(result.late_penalty)
            row.late = result.late
            row.digest = result.digest
            row.graded_at = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)

        self._transaction(body)


def read_results(db_url: str, course_id: str, assignment: str) -> list[StoredGrade]:
    """Status, score and per-part scores of every student known for the assignment."""
    rows = []
    with Gradebook(db_url, course_id) as gb:
        decisions = _decisions(gb.db, course_id, assignment)
        statuses = {
            r.student_id: r
            for r in gb.db.query(GradeStatus).filter_by(course_id=course_id, assignment=assignment)
        }
        for student in sorted(statuses):
            row = statuses[student]
            parts: dict[tuple[str, str], float | None] = {}
            try:
                submission = gb.find_submission(assignment, student)
            except MissingEntry:
                submission = None
            if submission is not None:
                for notebook in submission.notebooks:
                    for grade in notebook.grades:
                        score = (
                            grade.score
                            if grade.auto_score is not None or grade.manual_score is not None
                            else None
                        )
                        parts[(notebook.name, grade.cell.name)] = score
            rows.append(
                StoredGrade(
                    student_id=student,
                    status=row.status,
                    detail=row.detail,
                    score=row.score,
                    max_score=row.max_score,
                    parts=parts,
                    late_penalty=row.late_penalty or 0.0,
                    late=row.late or "",
                    digest=row.digest or "",
                    decisions=decisions.get(student, []),
                )
            )
    return rows


def _decisions(db: Any, course_id: str, assignment: str) -> dict[str, list[Decision]]:
    """student -> the decisions recorded for the assignment, oldest first."""
    found: dict[str, list[Decision]] = {}
    query = db.query(ReviewDecision).filter_by(course_id=course_id, assignment=assignment)
    for d in query.order_by(ReviewDecision.decided_at):
        found.setdefault(d.student_id, []).append(
            Decision(
                d.notebook,
                d.grade_id,
                bool(d.approved),
                d.digest,
                d.reason,
                d.decided_by,
                d.decided_at.isoformat(timespec="seconds"),
            )
        )
    return found


def record_decision(
    db_url: str,
    course_id: str,
    assignment: str,
    student: str,
    decision: Decision,
) -> StoredGrade:
    """Record an instructor's decision on a submission held for review, bound to the digest
    of the submission graded now; returns the student's grade with it. Raises ValueError
    when there is nothing to decide (no such grade, a status that is not held, a part the
    submission does not have)."""
    prepare(db_url, course_id)  # the decisions' table in a gradebook made before it existed
    grades = {g.student_id: g for g in read_results(db_url, course_id, assignment)}
    grade = grades.get(student)
    if grade is None:
        raise ValueError(f"{student} has no grade for {assignment} in the gradebook {db_url}")
    if not grade.withheld:
        raise ValueError(
            f"{student}'s {assignment} has the status {grade.status}: no points are withheld"
        )
    if not grade.digest:
        raise ValueError(
            f"{student}'s {assignment} was graded before decisions were recorded: grade it "
            "again, then decide"
        )
    part = (decision.notebook, decision.grade_id)
    if part != ("", "") and part not in grade.parts:
        known = ", ".join(f"{nb}/{gid}" for nb, gid in grade.parts)
        raise ValueError(f"{assignment} has no part {'/'.join(part)} (parts: {known})")
    decision = dataclasses.replace(decision, digest=grade.digest)
    at = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    engine = create_engine(db_url, future=True)
    try:
        with Session(engine) as db, db.begin():
            db.merge(
                ReviewDecision(
                    course_id=course_id,
                    assignment=assignment,
                    student_id=student,
                    notebook=decision.notebook,
                    grade_id=decision.grade_id,
                    approved=decision.approved,
                    digest=decision.digest,
                    reason=decision.reason,
                    decided_by=decision.by,
                    decided_at=at,
                )
            )
    finally:
        engine.dispose()
    return next(g for g in read_results(db_url, course_id, assignment) if g.student_id == student)


def submission_digest(folder: str, notebooks: list[str]) -> str:
    """sha256 of the submission as the grader reads it: each notebook's name and bytes (a
    missing notebook or one that is not a regular file counts as such, never followed)."""
    digest = hashlib.sha256()
    for name in sorted(notebooks):
        digest.update(f"{name}.ipynb\0".encode())
        try:
            fd = os.open(
                os.path.join(folder, f"{name}.ipynb"), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
            )
        except OSError as error:
            digest.update(f"absent: {error.errno}\0".encode())
            continue
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                digest.update(b"not a regular file\0")
                continue
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()
