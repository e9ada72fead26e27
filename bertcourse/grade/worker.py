"""Grade one submission from start to end; what each worker process runs.

`grade_submission(task)` never raises: whatever goes wrong (a file that is not a notebook, a
kernel that dies, an error in the grader itself) ends up as the submission's status, so one
submission cannot stop the batch. Every submission has one clock (`submission_budget`,
started when the worker takes the task; the pool's parent stops a worker that passes it):
each phase below stops at it. The order of events for one student:

1. `mark_pending` in the gradebook (old marks cleared, status `pending`);
2. per notebook: read it (`invalid_notebook`), list tampering, rebuild the graded version,
   run it in a fresh jailed kernel, score every test cell from its verdict;
3. write the autograded notebooks (nbgrader's layout, so its formgrader can show them);
4. `save_result`: scores, comments and the status in one transaction;
5. the feedback HTML for the student (nbgrader's feedback template, hidden tests removed).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import os
import shutil
import signal
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Iterator
from typing import Any

import nbformat
from nbgrader import utils as nbutils
from nbgrader.preprocessors import LimitOutput
from sqlalchemy.exc import SAWarning

from bertcourse.grade import feedback as feedback_mod
from bertcourse.grade import late
from bertcourse.grade.assignment import AssignmentSpec, NotebookSpec
from bertcourse.grade.boundary.execute import CellResult, NotebookRun, RunResult
from bertcourse.grade.boundary.referee import Referee
from bertcourse.grade.gradebook import GradebookWriter, submission_digest
from bertcourse.grade.jail import Capabilities, KernelJail, Limits, Zygote
from bertcourse.grade.results import NotebookResult, PartResult, SubmissionResult, part_comment
from bertcourse.grade.status import Status
from bertcourse.grade.submission import (
    InvalidNotebook,
    find_tampering,
    load_notebook,
    read_regular_file,
    repair,
    student_cells,
)

POST_LIMIT_S = 60.0  # reading, repairing, output limiting and feedback, each
# reading the learner's cells as the kernel runs them (IPython's transformation, the rules):
# milliseconds for a notebook of the course; a cell built to make IPython re-tokenize it once
# per shell escape (200 `!` lines in 0.8 MiB: 200 s) is a submission for a person to read
ANALYSIS_LIMIT_S = 10.0
KERNEL_START_S = 120.0  # a kernel's start (the grader's own work, not the learner's code)
SUBMISSION_SLACK_S = 60.0  # reading, analysis, feedback: what a notebook's clock does not hold


def submission_budget(notebooks: int, notebook_timeout: float) -> float:
    """The one wall clock of a submission, from its first byte read to its feedback page: the
    worker stops each phase at it, and the pool's parent ends a worker that passes it."""
    return notebooks * (notebook_timeout + KERNEL_START_S) + SUBMISSION_SLACK_S


@dataclasses.dataclass
class Task:
    """Everything a worker needs to grade one student (picklable)."""

    student: str
    spec: AssignmentSpec
    course_root: str
    submitted_dir: str  # .../submitted/<student>/<assignment>
    autograded_dir: str  # .../autograded/<student>/<assignment>
    feedback_dir: str  # .../feedback/<student>/<assignment>
    db_url: str
    run_id: str
    caps_json: str
    limits: Limits
    hide: list[str]
    workers: int
    cell_timeout: float
    notebook_timeout: float
    feedback: bool = True
    zygote: bool = True  # fork kernels from a process that has imported torch (faster)
    preload: tuple[str, ...] = ()  # what the zygote imports (the run's assignments together)
    bad_name: str | None = None  # why the student's folder name cannot be used (see runner)
    late_policy: late.LatePolicy | None = None  # due dates, extensions, penalty (late.py)
    secret: bytes | None = None  # the referee's key for hidden inputs (never sent to a kernel)
    scratch_dir: str = ""  # made by the parent, which cleans it up if this worker dies
    budget_s: float = 0.0  # the submission's wall clock (`submission_budget`; 0: none)
    deadline: float | None = None  # set by the worker when it starts the task (`monotonic`)

    def remaining(self, at_most: float) -> float:
        """What is left of the submission's clock, at most `at_most` seconds (at least a
        hair: `time_limit` needs a positive time)."""
        if self.deadline is None:
            return at_most
        return max(0.01, min(at_most, self.deadline - time.monotonic()))


_writer: GradebookWriter | None = None
# nbgrader's add_submission triggers harmless SQLAlchemy autoflush warnings
warnings.filterwarnings("ignore", category=SAWarning)


_zygote: Zygote | None = None
_zygote_key: tuple = ()


def _get_zygote(task: Task) -> Zygote | None:
    """This worker's zygote for the assignment's modules (None: start kernels by exec)."""
    global _zygote, _zygote_key
    if not task.zygote:
        return None
    preload = sorted(task.preload or {m for nb in task.spec.notebooks for m in nb.preload})
    key = (tuple(preload), task.caps_json)
    if _zygote is not None and (_zygote_key != key or not _zygote.alive()):
        _zygote.close()
        _zygote = None
    if _zygote is None:
        try:
            _zygote = Zygote(preload)
            _zygote_key = key
            atexit.register(_zygote.close)
        except Exception:
            return None  # exec mode still works
    return _zygote


def _no_kernel(request: str) -> str:
    raise RuntimeError("the referee called the kernel before the kernel started")


def _gradebook(task: Task) -> GradebookWriter:
    global _writer
    if _writer is None or _writer.db_url != task.db_url:
        _writer = GradebookWriter(task.db_url, task.spec.course_id)
    return _writer


def _timestamp(path: str) -> str | None:
    """The submission's timestamp.txt as nbgrader reads it, or None when it is missing, a link,
    too large or not a date (a bad timestamp never stops the grading of the notebook)."""
    try:
        raw = read_regular_file(os.path.join(path, "timestamp.txt"), 1024)
        text = raw.decode("utf-8").strip()
        nbutils.parse_utc(text)  # raises on anything that is not a date
    except Exception:
        return None
    return text or None


class OutOfTime(BaseException):
    """A phase of the grading ran past its time (`time_limit(..., error=OutOfTime)`): not an
    `Exception`, so that no `except Exception` in the code it stops can swallow it."""


@contextlib.contextmanager
def time_limit(
    seconds: float, what: str, error: type[BaseException] = TimeoutError
) -> Iterator[None]:
    """Raise `error` (`TimeoutError`) naming `what` if the block runs longer than `seconds`
    (workers are processes whose main thread runs the task, so SIGALRM reaches it)."""

    def expired(_signum: int, _frame: Any) -> None:
        raise error(f"{what} took longer than {seconds:g} s")

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _unsafe_path(task: Task) -> str | None:
    """Why the submission's folders cannot be trusted (a link to another student's folder or
    to the course), or None."""
    for path in (os.path.dirname(task.submitted_dir), task.submitted_dir):
        if os.path.islink(path):
            return f"{os.path.basename(path)} is a symbolic link, not a folder"
    return None


def _not_graded(nb_spec: NotebookSpec, status: Status, problem: str) -> NotebookResult:
    parts = {c.name: PartResult(0.0, "not_run") for c in nb_spec.cells if c.is_test}
    return NotebookResult(status, parts, [problem])


def _read(task: Task, nb_spec: NotebookSpec) -> tuple[Any, list[str]] | NotebookResult:
    """The repaired notebook and the tampering found, or the result of a notebook that cannot
    be graded (missing, not a notebook, cannot be repaired)."""
    path = os.path.join(task.submitted_dir, f"{nb_spec.name}.ipynb")
    if not os.path.lexists(path):
        return _not_graded(nb_spec, Status.MISSING, f"{nb_spec.name}.ipynb was not submitted")
    try:
        with time_limit(task.remaining(POST_LIMIT_S), "reading the notebook"):
            raw = load_notebook(path)
    except (InvalidNotebook, TimeoutError) as error:
        return _not_graded(nb_spec, Status.INVALID_NOTEBOOK, f"{nb_spec.name}.ipynb: {error}")
    tampering = find_tampering(raw, nb_spec)
    try:
        with time_limit(task.remaining(POST_LIMIT_S), "repairing the notebook"):
            nb = repair(raw, nb_spec)
    except Exception as error:
        problem = f"{nb_spec.name}.ipynb could not be repaired: {error}"
        result = _not_graded(nb_spec, Status.INVALID_NOTEBOOK, problem)
        result.problems += tampering
        return result
    return nb, tampering


def _run_status(
    task: Task, nb_spec: NotebookSpec, run: RunResult, jail: KernelJail
) -> tuple[Status, list[str]]:
    """The status the kernel's run gives, and its problems."""
    name = nb_spec.name
    if run.memory_exceeded:
        return Status.MEMORY_EXCEEDED, [
            f"{name}: memory limit of {task.limits.memory_bytes >> 20} MiB reached"
        ]
    if run.timed_out:
        what = "the notebook's time limit" if run.deadline_hit else "a cell's time limit"
        return Status.TIMED_OUT, [f"{name}: {what} was reached"]
    if run.kernel_died or not run.started or run.error:
        reason = run.error or "the kernel died"
        log = jail.read_log(600).strip()
        if not run.started and log:
            reason += f" (kernel log: {log[-300:]})"
        return Status.CRASHED, [f"{name}: {reason}"]
    return Status.GRADED, []


def _use_notebook_language(nb: Any) -> None:
    """The referee's feedback in the notebook's language: a Chinese release says
    {"bertcourse": {"lang": "zh_CN"}} in its metadata; anything else gives English."""
    from bertcourse.grading import i18n

    meta = nb.metadata.get("bertcourse", {}) if isinstance(nb.metadata, dict) else {}
    lang = meta.get("lang", "en") if isinstance(meta, dict) else "en"
    i18n.set_language(lang if lang in i18n.LANGUAGES else "en")


def _grade_notebook(task: Task, nb_spec: NotebookSpec, base_dir: str) -> NotebookResult:
    """Status, part scores and the graded notebook of one notebook of the submission."""
    read = _read(task, nb_spec)
    if isinstance(read, NotebookResult):
        return read
    nb, tampering = read
    _use_notebook_language(nb)
    tests = {c.name: CellResult(c.name, c.points or 0.0) for c in nb_spec.cells if c.is_test}
    try:
        budget = task.remaining(ANALYSIS_LIMIT_S)
        with time_limit(budget, "reading the learner's cells", OutOfTime):
            referee = Referee(
                nb_spec, task.spec.name, student_cells(nb), send=_no_kernel, secret=task.secret
            )
    except OutOfTime as error:  # nothing ran: no part is graded, a person reads it
        problem = f"{nb_spec.name}: {error}: not graded, for review"
        result = _not_graded(nb_spec, Status.NEEDS_REVIEW, problem)
        result.notebook = nb  # as submitted (repaired): the reviewer and the feedback page read it
        return result
    jail = KernelJail(
        Capabilities.from_json(task.caps_json), task.limits, base_dir, task.hide, task.workers
    )
    run = RunResult(cells=tests)
    try:
        client = NotebookRun(
            nb,
            jail,
            cell_timeout=task.cell_timeout,
            notebook_timeout=task.notebook_timeout,
            referee=referee,
            zygote=_get_zygote(task),
            preload=tuple(nb_spec.preload),
            deadline=task.deadline,
        )
        asyncio.run(client.run(tests, run))
    except Exception as error:  # the grader's own failure: reported as a crash
        run.error = f"grader error: {type(error).__name__}: {error}"
    finally:
        jail.close()
    run.peak_memory = jail.peak_memory
    # a fact of the cgroup (or of the watchdog), never text the learner's code can print
    run.memory_exceeded = jail.killed_for_memory or jail.oom

    status, problems = _run_status(task, nb_spec, run, jail)
    problems = [f"{nb_spec.name}: {t}" for t in tampering] + problems
    machinery = referee.code.machinery()
    dynamic = referee.code.dynamic() + sorted(
        referee.code.review, key=lambda f: (f.cell, f.line, f.what)
    )
    if tampering or machinery:
        status = Status.worst([status, Status.TAMPERED])
        problems += [
            f"{nb_spec.name}: reaches for the grading machinery: {f.describe()}"
            for f in machinery[:10]
        ]
    if dynamic:
        status = Status.worst([status, Status.NEEDS_REVIEW])
        problems += [f"{nb_spec.name}: review: {f.describe()}" for f in dynamic[:10]]
    seen = list(dict.fromkeys(referee.session.review))  # at run time, from outside the kernel
    if seen:  # the parts whose calls saw it earned 0 (execute.NotebookRun._vouch)
        status = Status.worst([status, Status.NEEDS_REVIEW])
        problems += [f"{nb_spec.name}: review: {finding}" for finding in seen[:10]]
    if run.output_truncated:
        problems.append(f"{nb_spec.name}: output truncated")
    for result in tests.values():
        if result.outcome == "not_run" and run.started:
            result.message = "not run (the kernel had stopped)"
    with time_limit(task.remaining(POST_LIMIT_S), "limiting the outputs"):
        nb, _ = LimitOutput().preprocess(nb, {})
    comments = {}
    for cell in nb.cells:
        if nbutils.is_solution(cell):
            md = cell.metadata.nbgrader
            unchanged = md.get("checksum") == nbutils.compute_checksum(cell)
            test = tests.get(f"{md['grade_id']}_tests")  # the failure's first line (class report)
            failure = part_comment(test.outcome, test.message) if test else None
            comments[md["grade_id"]] = "No response." if unchanged else failure
    return NotebookResult(
        status=status,
        parts={n: PartResult(r.score, r.outcome, r.message) for n, r in tests.items()},
        problems=problems,
        comments=comments,
        seconds=run.seconds,
        peak_memory=run.peak_memory,
        notebook=nb,
    )


def _write_autograded(task: Task, notebooks: dict[str, NotebookResult]) -> None:
    """nbgrader's autograded/<student>/<assignment>/ folder, replaced as a whole."""
    parent = os.path.dirname(task.autograded_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=parent)
    for name, result in notebooks.items():
        if result.notebook is not None:
            nbformat.write(result.notebook, os.path.join(tmp, f"{name}.ipynb"))
    ts = _timestamp(task.submitted_dir)
    if ts:
        with open(os.path.join(tmp, "timestamp.txt"), "w") as f:
            f.write(ts)
    old = task.autograded_dir + ".old"
    shutil.rmtree(old, ignore_errors=True)
    if os.path.exists(task.autograded_dir):
        os.rename(task.autograded_dir, old)
    os.rename(tmp, task.autograded_dir)
    shutil.rmtree(old, ignore_errors=True)


def _apply_late_policy(task: Task, result: SubmissionResult, timestamp: str | None) -> None:
    if task.late_policy is None or not result.submitted:
        return
    try:
        submitted_at = late.parse_timestamp(timestamp) if timestamp else None
    except ValueError as error:
        submitted_at = None
        result.problems.append(f"timestamp.txt unreadable: {error}")
    judged = late.apply(
        task.late_policy, task.spec.name, task.student, submitted_at, result.score, result.max_score
    )
    result.late_penalty = judged.penalty
    result.late = judged.explanation


def grade_submission(task: Task) -> SubmissionResult:
    """Grade one student's submission (see the module docstring); never raises."""
    start = time.monotonic()
    if task.budget_s:  # the parent's clock started when it sent the task: the same one
        task.deadline = start + task.budget_s
    spec = task.spec
    result = SubmissionResult(task.student, spec.name, task.run_id, spec.max_score)
    result.submitted = os.path.isdir(task.submitted_dir) and any(
        os.path.lexists(os.path.join(task.submitted_dir, f"{nb.name}.ipynb"))
        for nb in spec.notebooks
    )
    try:
        writer = _gradebook(task)
        timestamp = _timestamp(task.submitted_dir)
        writer.mark_pending(spec.name, task.student, task.run_id, timestamp, result.submitted)
        for path in (task.autograded_dir, task.feedback_dir):
            shutil.rmtree(path, ignore_errors=True)  # no stale files from an earlier run
        unsafe = task.bad_name or (_unsafe_path(task) if result.submitted else None)
        if not result.submitted:
            result.status, result.problems = Status.MISSING, ["no submission"]
        elif unsafe:
            result.status, result.problems = Status.INVALID_NOTEBOOK, [unsafe]
            result.submitted = False
        else:  # an instructor's approval holds for these bytes only
            result.digest = submission_digest(task.submitted_dir, [n.name for n in spec.notebooks])
            base = task.scratch_dir or tempfile.mkdtemp(prefix="bcg-")
            os.chmod(base, 0o711)
            try:
                result.notebooks = {
                    nb.name: _grade_notebook(task, nb, base) for nb in spec.notebooks
                }
            finally:
                shutil.rmtree(base, ignore_errors=True)
            result.status = Status.worst([r.status for r in result.notebooks.values()])
            result.problems = [p for r in result.notebooks.values() for p in r.problems]
            if result.status.zero:
                for notebook in result.notebooks.values():
                    for part in notebook.parts.values():
                        part.score = 0.0
            _write_autograded(task, result.notebooks)
            _apply_late_policy(task, result, timestamp)
        result.seconds = time.monotonic() - start
        writer.save_result(spec.name, task.student, result)
        if task.feedback and result.submitted:
            try:
                with time_limit(task.remaining(POST_LIMIT_S), "writing the feedback"):
                    feedback_mod.write_feedback(task, result)
            except Exception as error:  # feedback is a convenience: never fail the grade
                result.problems.append(f"feedback not written: {error}")
    except Exception as error:
        result.status = Status.CRASHED
        result.problems = [
            f"grader error: {type(error).__name__}: {error}\n{traceback.format_exc()[-2000:]}"
        ]
        try:
            _gradebook(task).save_result(spec.name, task.student, result)
        except Exception:
            pass
    result.seconds = time.monotonic() - start
    return result.without_notebooks()
