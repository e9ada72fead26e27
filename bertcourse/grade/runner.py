"""Grade every submission of an assignment with N worker processes, then write the reports."""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import multiprocessing
import os
import resource
import secrets
import signal
import sys
import tempfile
import time
import uuid
import zlib
from collections import Counter
from multiprocessing.connection import Connection, wait

from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory

from bertcourse.grade import gradebook, late, lms, report
from bertcourse.grade.assignment import (
    AssignmentSpec,
    ensure_in_gradebook,
    load_assignment,
    load_coursedir,
)
from bertcourse.grade.jail import (
    GRADER_USER,
    Capabilities,
    Limits,
    clean_after,
    detect,
    release,
)
from bertcourse.grade.results import StoredGrade, SubmissionResult
from bertcourse.grade.status import HELD_FOR_REVIEW, Status
from bertcourse.grade.worker import Task, grade_submission, submission_budget

KILL_GRACE_S = 15.0  # past its submission's clock, a worker that has not answered is stopped
WORKER_START_S = 120.0  # a new worker's imports (torch), before it reads its first task


@dataclasses.dataclass
class Options:
    assignment: str
    course: str = "."
    workers: int = 0  # 0: os.cpu_count()
    db: str | None = None
    csv: str | None = None
    plot: str | None = None
    students: list[str] = dataclasses.field(default_factory=list)  # glob patterns
    shard: tuple[int, int] = (0, 1)  # (k, n): this grader takes students with crc32 % n == k
    cell_timeout: float | None = None  # default: nbgrader's Execute.timeout from the config
    notebook_timeout: float = 600.0
    memory_mib: int = 2048
    worker_memory_mib: int = 4096  # each grader worker's own cap (0: none)
    max_processes: int = 256
    feedback: bool = True
    isolate: bool = True
    user: str = GRADER_USER
    progress: bool = True
    zygote: bool = True
    hide: list[str] = dataclasses.field(default_factory=list)  # more folders to hide
    init_only: bool = False  # record the assignment and create the tables, grade nothing
    report_only: bool = False  # write the CSV and the plot from the gradebook, grade nothing
    late_policy: str | None = None  # None: <course>/late_policy.toml if it exists; "": none
    canvas: str | None = None  # write a Canvas gradebook import CSV here
    moodle: str | None = None  # write a Moodle grade import CSV here
    roster: str | None = None  # student id -> LMS identities (lms.load_roster)
    canvas_identity: str = "sis_login_id"
    canvas_assignment_id: str | None = None
    moodle_identity: str = "username"
    hold: list[str] = dataclasses.field(default_factory=list)  # statuses left out of LMS files


@dataclasses.dataclass
class Summary:
    csv: str
    plot: str
    counts: Counter
    seconds: float
    caps: Capabilities
    results: list[SubmissionResult] | list[StoredGrade]


def student_id(folder: str) -> tuple[str, str | None]:
    """(the id the gradebook and the CSV use, why the folder name is unusable or None).

    A folder name that is not valid UTF-8 (os.listdir gives it with surrogate escapes) cannot be
    stored in a database: the student keeps a row, under the name with the bad bytes escaped
    (`\\xff`), with the status invalid_notebook.
    """
    try:
        folder.encode("utf-8")
    except UnicodeEncodeError:
        safe = folder.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return safe, "the folder name is not valid UTF-8 (its bytes are shown escaped)"
    if len(folder) > 128 or any(ord(c) < 32 for c in folder):
        safe = folder.encode("unicode_escape").decode("ascii")[:120]
        return safe, "the folder name has control characters or is longer than 128 characters"
    return folder, None


def _students(coursedir: CourseDirectory, opts: Options) -> dict[str, str]:
    """Student id -> the submission folder's name, for every student to grade (roster included)."""
    parent = os.path.dirname(
        coursedir.format_path(coursedir.submitted_directory, "x", opts.assignment)
    )
    base = os.path.dirname(parent)
    found: dict[str, str] = {}
    try:
        names = os.listdir(base)
    except OSError:
        names = []
    for name in names:
        if os.path.isdir(os.path.join(base, name, opts.assignment)):
            found[student_id(name)[0]] = name
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        for s in gb.students:
            found.setdefault(s.id, s.id)
    if opts.students:
        found = {
            s: f for s, f in found.items() if any(fnmatch.fnmatch(s, p) for p in opts.students)
        }
    k, n = opts.shard
    return {s: found[s] for s in sorted(found) if zlib.crc32(s.encode()) % n == k}


def _hidden_paths(coursedir: CourseDirectory, opts: Options, outputs: list[str]) -> list[str]:
    """Folders the kernels must not see: the course, the gradebook's folder, the outputs."""
    paths = [coursedir.root, *opts.hide, *_source_checkout()]
    db = coursedir.db_url
    if db.startswith("sqlite:///"):
        paths.append(os.path.dirname(os.path.abspath(db[len("sqlite:///") :])))
    paths += [os.path.dirname(os.path.abspath(p)) for p in outputs]
    return sorted({os.path.realpath(p) for p in paths if p and p != "/"})


def _source_checkout() -> list[str]:
    """The repository bertcourse is installed from (editable install), hidden as a whole: the
    kernels get the package folder alone, read-only, never solutions/ beside it."""
    import bertcourse

    parent = os.path.dirname(os.path.dirname(os.path.abspath(bertcourse.__file__)))
    if os.path.basename(parent) in ("site-packages", "dist-packages"):
        return []
    return [parent]


def referee_secret(grading_dir: str) -> bytes:
    """The course's key for hidden inputs: `<grading dir>/referee.key`, made once (0600).

    Hidden inputs depend on it, so graders on several machines (shards) must share the file;
    `BERTCOURSE_REFEREE_KEY` (hex) overrides it.
    """
    env = os.environ.get("BERTCOURSE_REFEREE_KEY")
    if env:
        return bytes.fromhex(env)
    path = os.path.join(grading_dir, "referee.key")
    os.makedirs(grading_dir, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            key = f.read(256).strip()
        try:
            return bytes.fromhex(key.decode())
        except (UnicodeDecodeError, ValueError):
            raise ValueError(f"{path} is not a hex key: delete it to make a new one") from None
    key = secrets.token_hex(32)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    return bytes.fromhex(key)


def _safe_url(url: str) -> str:
    """The database URL without its password."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _crashed(task: Task, error: str, status: Status = Status.CRASHED) -> SubmissionResult:
    return SubmissionResult(
        task.student,
        task.spec.name,
        task.run_id,
        task.spec.max_score,
        status=status,
        problems=[f"grader worker failed: {error}"],
    )


def _with_unsaved(rows: list[StoredGrade], results: list[SubmissionResult]) -> list[StoredGrade]:
    """The gradebook's rows plus a row for every graded student the gradebook lacks (its write
    failed): every student of the run appears in the CSV, with an explicit status."""
    known = {r.student_id for r in rows}
    for result in results:
        if result.student not in known:
            detail = "the grade could not be saved in the gradebook: " + result.detail[:500]
            rows.append(
                StoredGrade(result.student, Status.CRASHED.value, detail, 0.0, result.max_score, {})
            )
    return sorted(rows, key=lambda r: r.student_id)


def _late_policy(coursedir: CourseDirectory, opts: Options):
    """The course's late policy (`late_policy.toml` at its root, or --late-policy), or None."""
    if opts.late_policy == "":
        return None
    path = opts.late_policy or os.path.join(coursedir.root, late.POLICY_FILE)
    if opts.late_policy is None and not os.path.exists(path):
        return None
    return late.load_policy(path)  # PolicyError names the file, the key and the line


def _reports(
    opts: Options, spec: AssignmentSpec, rows: list[StoredGrade], csv_path: str, plot_path: str, log
) -> None:
    """The CSV, the plot and the learning platforms' import files."""
    has_late = any(r.late for r in rows)
    report.write_csv(csv_path, spec, rows, late=has_late)
    report.plot_distribution(plot_path, spec, rows)
    log(f"grades: {csv_path}\nplot:   {plot_path}")
    if not (opts.canvas or opts.moodle):
        return
    grade_rows = [lms.grade_row(row) for row in report.csv_rows(spec, rows)]  # as in the CSV
    roster = lms.load_roster(opts.roster) if opts.roster else None
    hold = opts.hold or HELD_FOR_REVIEW
    if opts.canvas:
        ids = {spec.name: opts.canvas_assignment_id} if opts.canvas_assignment_id else None
        done = lms.write_canvas_csv(
            grade_rows,
            opts.canvas,
            roster=roster,
            identity=opts.canvas_identity,
            assignment_ids=ids,
            hold=hold,
        )
        log(
            f"canvas: {opts.canvas}"
            + (f" (held for review: {', '.join(done.held)})" if done.held else "")
        )
    if opts.moodle:
        done = lms.write_moodle_csv(
            grade_rows, opts.moodle, roster=roster, identity=opts.moodle_identity, hold=hold
        )
        log(
            f"moodle: {opts.moodle}"
            + (f" (held for review: {', '.join(done.held)})" if done.held else "")
        )


@dataclasses.dataclass
class _Plan:
    """One assignment of a run, before its submissions are graded."""

    opts: Options
    spec: AssignmentSpec
    coursedir: CourseDirectory
    cell_timeout: float  # --cell-timeout, else nbgrader's Execute.timeout, else 60 s
    csv_path: str
    plot_path: str
    tasks: list[Task] = dataclasses.field(default_factory=list)


def run(opts: Options, log=print) -> Summary:
    """Grade the assignment (see `bertcourse.grade`); returns the summary."""
    return run_all([opts], log)[0]


def run_all(runs: list[Options], log=print) -> list[Summary]:
    """Grade several assignments of one course in one pool of workers (the workers, their
    zygotes and the imports are paid once, not once per assignment); one summary each, in
    order. The options other than the assignment, the CSV and the plot come from the first."""
    start = time.monotonic()
    first = runs[0]
    plans: list[_Plan] = []
    summaries: dict[int, Summary] = {}
    for index, opts in enumerate(runs):
        plan = _plan(opts, log)
        if isinstance(plan, Summary):  # --init-only, --report-only: nothing to grade
            summaries[index] = dataclasses.replace(plan, seconds=time.monotonic() - start)
        else:
            plans.append(plan)
    if plans:
        workers = first.workers or os.cpu_count() or 1
        caps = detect(first.user, isolate=first.isolate)
        log(f"isolation: {caps.describe()}")
        run_id = uuid.uuid4().hex[:12]
        # one zygote per worker for the whole run: it imports what every assignment needs
        preload = tuple(sorted({m for p in plans for nb in p.spec.notebooks for m in nb.preload}))
        rosters = [_students(plan.coursedir, plan.opts) for plan in plans]
        everyone = {s for roster in rosters for s in roster}  # a student of one is in all
        for plan, roster in zip(plans, rosters):
            roster.update({s: s for s in everyone - set(roster)})
            plan.tasks = _tasks(
                plan, dict(sorted(roster.items())), caps, workers, run_id, preload, log
            )
        db_url = plans[0].coursedir.db_url
        try:
            results = _run_pool(
                [task for plan in plans for task in plan.tasks],
                workers,
                first.progress,
                db_url,
                plans[0].coursedir.course_id,
                first.worker_memory_mib << 20,
            )
        finally:
            release(caps)
        graded = iter(plans)
        for index in range(len(runs)):
            if index not in summaries:
                plan = next(graded)
                mine = [r for r in results if r.assignment == plan.spec.name]
                summaries[index] = _finish(plan, mine, caps, time.monotonic() - start, log)
    return [summaries[i] for i in range(len(runs))]


def _plan(opts: Options, log) -> _Plan | Summary:
    """The gradebook ready, the assignment recorded, its report paths; a summary at once for
    --init-only and --report-only."""
    coursedir, config = load_coursedir(opts.course, opts.db)
    db_url, course_id = coursedir.db_url, coursedir.course_id
    gradebook.retrying(lambda: gradebook.prepare(db_url, course_id), attempts=5)
    ensure_in_gradebook(coursedir, opts.assignment, log=log)
    spec: AssignmentSpec = load_assignment(coursedir, opts.assignment)
    if opts.init_only:
        log(f"{spec.name} is in the gradebook {_safe_url(db_url)}; nothing graded")
        return Summary("", "", Counter(), 0.0, detect(isolate=False), [])
    grading_dir = os.path.dirname(coursedir.submitted_directory.rstrip("/")) or "."
    reports = os.path.join(coursedir.root, grading_dir, "reports")
    csv_path = os.path.abspath(opts.csv or os.path.join(reports, f"{opts.assignment}_grades.csv"))
    plot_path = os.path.abspath(
        opts.plot or os.path.join(os.path.dirname(csv_path), f"{opts.assignment}_distribution.png")
    )
    if opts.report_only:
        rows = gradebook.read_results(db_url, course_id, spec.name)
        _reports(opts, spec, rows, csv_path, plot_path, log)
        counts = Counter(r.status for r in rows)
        return Summary(csv_path, plot_path, counts, 0.0, detect(isolate=False), rows)
    if "Execute" in config and "timeout" in config.Execute:
        default_timeout = float(config.Execute.timeout)
    else:
        default_timeout = 60.0
    cell_timeout = opts.cell_timeout or default_timeout
    return _Plan(opts, spec, coursedir, cell_timeout, csv_path, plot_path)


def _tasks(
    plan: _Plan,
    students: dict[str, str],
    caps: Capabilities,
    workers: int,
    run_id: str,
    preload: tuple[str, ...],
    log,
) -> list[Task]:
    """One task per student (id -> submission folder name) of the assignment."""
    opts, spec, coursedir = plan.opts, plan.spec, plan.coursedir
    grading_dir = os.path.dirname(coursedir.submitted_directory.rstrip("/")) or "."
    policy = _late_policy(coursedir, opts)
    if policy is not None:
        log(f"late policy: {opts.late_policy or os.path.join(coursedir.root, late.POLICY_FILE)}")
    limits = Limits(memory_bytes=opts.memory_mib << 20, max_processes=opts.max_processes)
    hide = _hidden_paths(coursedir, opts, [plan.csv_path, plan.plot_path])
    secret = referee_secret(os.path.join(coursedir.root, grading_dir))
    tasks = [
        Task(
            student=s,
            spec=spec,
            course_root=coursedir.root,
            submitted_dir=coursedir.format_path(coursedir.submitted_directory, folder, spec.name),
            bad_name=student_id(folder)[1],
            autograded_dir=coursedir.format_path(coursedir.autograded_directory, s, spec.name),
            feedback_dir=coursedir.format_path(coursedir.feedback_directory, s, spec.name),
            db_url=coursedir.db_url,
            run_id=run_id,
            caps_json=caps.to_json(),
            limits=limits,
            hide=hide,
            workers=workers,
            cell_timeout=plan.cell_timeout,
            notebook_timeout=opts.notebook_timeout,
            feedback=opts.feedback,
            zygote=opts.zygote,
            preload=preload,
            secret=secret,
            late_policy=policy,
            budget_s=submission_budget(len(spec.notebooks), opts.notebook_timeout),
        )
        for s, folder in students.items()
    ]
    log(
        f"grading {spec.name}: {len(tasks)} students, {len(spec.notebooks)} notebook(s), "
        f"max score {spec.max_score:g}, {workers} workers"
    )
    return tasks


def _finish(
    plan: _Plan, results: list[SubmissionResult], caps: Capabilities, seconds: float, log
) -> Summary:
    """The assignment's rows from the gradebook (and any the gradebook lacks), its reports."""
    opts, spec, coursedir = plan.opts, plan.spec, plan.coursedir
    counts = Counter(r.status.value for r in results)
    rows = _with_unsaved(
        gradebook.read_results(coursedir.db_url, coursedir.course_id, spec.name), results
    )
    log(
        "{} done in {:.1f} s: {}".format(
            spec.name,
            seconds,
            ", ".join(f"{counts[s]} {s}" for s in map(str, Status) if counts[s]),
        )
    )
    _reports(opts, spec, rows, plan.csv_path, plan.plot_path, log)
    if opts.feedback:
        log(
            f"feedback: {coursedir.format_path(coursedir.feedback_directory, '<student>', spec.name)}"
        )
    return Summary(plan.csv_path, plan.plot_path, counts, seconds, caps, results)


def _limit_memory(memory_bytes: int) -> None:
    """A grader worker's own memory cap (RLIMIT_DATA: heap and private mappings): a reply that
    would blow it up fails that worker's submission, never the machine or a classmate."""
    if memory_bytes > 0:
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        limit = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def _worker_loop(conn: Connection, memory_bytes: int, grade=grade_submission) -> None:
    """A grader worker: one task at a time from the parent, one result back."""
    _limit_memory(memory_bytes)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send(grade(task))


@dataclasses.dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    task: Task | None = None
    until: float = math.inf  # when the parent stops this worker (its task's clock, and grace)
    fresh: bool = True  # it has not finished a task yet (it may still be importing)

    def take(self, task: Task) -> None:
        self.task = task
        self.until = math.inf
        if task.budget_s:
            start = WORKER_START_S if self.fresh else 0.0
            self.until = time.monotonic() + start + task.budget_s + KILL_GRACE_S
        self.conn.send(task)


def _death_reason(process: multiprocessing.process.BaseProcess) -> str:
    process.join(60)
    code = process.exitcode
    if code is None:
        return "the grader worker stopped answering"
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        hint = " (the worker's memory limit or the system's OOM killer)" if -code == 9 else ""
        return f"the grader worker was killed by {name}{hint}"
    return f"the grader worker exited with code {code}"


def _out_of_time(task: Task) -> str:
    return (
        f"the submission ran past its wall-clock limit of {task.budget_s:g} s (reading, "
        "analysis, kernels and feedback together); its worker was stopped"
    )


def _clean_after(task: Task) -> None:
    """What a dead worker leaves under the task's scratch folder: cgroups, mounts, folders."""
    clean_after(task.scratch_dir)


def _save_crash(task: Task, result: SubmissionResult, db_url: str, course_id: str) -> None:
    try:
        writer = gradebook.GradebookWriter(db_url, course_id)
        try:
            writer.save_result(task.spec.name, task.student, result)
        finally:
            writer.close()
    except Exception as error:  # the CSV still gets its row (_with_unsaved)
        result.problems.append(f"the gradebook write failed: {error}")


def _run_pool(
    tasks: list[Task],
    workers: int,
    progress: bool,
    db_url: str,
    course_id: str,
    worker_memory: int = 0,
    grade=grade_submission,
) -> list[SubmissionResult]:
    """Run the tasks on `workers` processes, one task at a time each. A worker that dies costs
    the one submission it was grading (`crashed`, with the reason), never another: the parent
    knows which task each worker holds, cleans up after it and starts a new worker."""
    from tqdm import tqdm

    results: list[SubmissionResult] = []
    pending = list(reversed(tasks))
    bar = tqdm(
        total=len(tasks), unit="student", disable=not progress, file=sys.stderr, dynamic_ncols=True
    )
    counts: Counter = Counter()
    context = multiprocessing.get_context("spawn")
    pool: list[_Worker] = []

    def start() -> _Worker:
        parent, child = context.Pipe()
        process = context.Process(
            target=_worker_loop, args=(child, worker_memory, grade), daemon=True
        )
        process.start()
        child.close()
        return _Worker(process, parent)

    def finish(result: SubmissionResult) -> None:
        results.append(result)
        counts[result.status.value] += 1
        bar.set_postfix_str(", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        bar.update(1)

    try:
        while pending or any(w.task for w in pool):
            for worker in pool:
                if worker.task is None and pending:
                    task = pending.pop()
                    task.scratch_dir = tempfile.mkdtemp(prefix="bcg-")
                    os.chmod(task.scratch_dir, 0o711)
                    worker.take(task)
            while pending and len(pool) < min(workers, len(tasks)):
                pool.append(start())
            busy = [w for w in pool if w.task is not None]
            if not busy:
                continue
            first_end = min(w.until for w in busy) - time.monotonic()
            handles = [w.conn for w in busy] + [w.process.sentinel for w in busy]
            ready = set(wait(handles, None if first_end == math.inf else max(0.0, first_end)))
            for worker in busy:
                task = worker.task
                if worker.conn not in ready and worker.process.sentinel not in ready:
                    if time.monotonic() < worker.until:
                        continue
                    worker.process.kill()  # the submission's one clock ran out
                    worker.process.join(10)
                    result = _crashed(task, _out_of_time(task), Status.TIMED_OUT)
                    _save_crash(task, result, db_url, course_id)
                    pool.remove(worker)
                    _clean_after(task)
                    worker.task = None
                    finish(result)
                    continue
                try:
                    result = worker.conn.recv()
                except (EOFError, OSError):
                    result = _crashed(task, _death_reason(worker.process))
                    _save_crash(task, result, db_url, course_id)
                    pool.remove(worker)
                _clean_after(task)
                worker.task = None
                worker.fresh = False
                finish(result)
    finally:
        for worker in pool:
            try:
                worker.conn.send(None)
            except OSError:
                pass
        for worker in pool:
            worker.process.join(10)
            if worker.process.is_alive():
                worker.process.kill()
        bar.close()
    return results
