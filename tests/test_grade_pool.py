"""The grader's worker pool: a worker that dies costs the one submission it was grading.

No kernels here: the workers run a stand-in for `grade_submission` that behaves as a hostile
submission makes the real one behave (a reply that blows up the worker's memory, a worker
killed from outside, a full disk) and honestly for everyone else.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from pathlib import Path

from bertcourse.grade import gradebook, runner
from bertcourse.grade.assignment import AssignmentSpec
from bertcourse.grade.jail import Limits
from bertcourse.grade.results import SubmissionResult
from bertcourse.grade.status import Status
from bertcourse.grade.worker import Task

SPEC = AssignmentSpec("a1", "course", [])


def _task(student: str, tmp: Path) -> Task:
    return Task(
        student=student,
        spec=SPEC,
        course_root=str(tmp),
        submitted_dir=str(tmp / "submitted" / student),
        autograded_dir=str(tmp / "autograded" / student),
        feedback_dir=str(tmp / "feedback" / student),
        db_url=f"sqlite:///{tmp}/gradebook.db",
        run_id="r",
        caps_json="{}",
        limits=Limits(),
        hide=[],
        workers=2,
        cell_timeout=1.0,
        notebook_timeout=1.0,
    )


def stand_in(task: Task) -> SubmissionResult:
    """What grading does to the worker, by student name."""
    # the worker's scratch folder holds something, as a jail's would
    Path(task.scratch_dir, "k-x").mkdir()
    if task.student == "reply-bomb":
        blob = bytearray(1 << 30)  # a decoded reply far above the worker's cap
        blob[-1] = 1
    elif task.student == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    elif task.student == "full-disk":
        raise OSError(errno.ENOSPC, "No space left on device")
    return SubmissionResult(task.student, task.spec.name, task.run_id, 1.0, Status.GRADED)


def test_a_dead_worker_costs_only_its_own_submission(tmp_path: Path, monkeypatch) -> None:
    """A reply bomb (MemoryError at the worker's cap), a worker killed from outside and a full
    disk: each is `crashed` with its reason; every classmate graded, exactly one row each."""
    hostile = {
        "reply-bomb": "exited with code 1",  # MemoryError at the cap
        "killed": "killed by SIGKILL",
        "full-disk": "exited with code 1",
    }
    students = ["alice", "reply-bomb", "bob", "killed", "carol", "full-disk", "dave"]
    tasks = [_task(s, tmp_path) for s in students]
    # nbgrader creates a gradebook with the `alembic` command of this environment
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    gradebook.prepare(tasks[0].db_url, "course")
    results = runner._run_pool(
        tasks, 2, False, tasks[0].db_url, "course", worker_memory=400 << 20, grade=stand_in
    )
    by_student = {r.student: r for r in results}
    assert sorted(by_student) == sorted(students) and len(results) == len(students)
    for student in students:
        result = by_student[student]
        if student in hostile:
            assert result.status is Status.CRASHED, student
            assert hostile[student] in result.detail, result.detail
        else:
            assert result.status is Status.GRADED, (student, result.detail)
    assert all(not os.path.exists(t.scratch_dir) for t in tasks)  # the parent cleaned up
    rows = {r.student_id: r.status for r in gradebook.read_results(tasks[0].db_url, "course", "a1")}
    assert {s: rows.get(s) for s in hostile} == dict.fromkeys(hostile, "crashed")
