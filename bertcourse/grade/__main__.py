"""Command line: `python -m bertcourse.grade ASSIGNMENT [ASSIGNMENT ...] [--workers N] [--db URL]`;
`... report ASSIGNMENT ...` (the class report); `... approve|reject ASSIGNMENT STUDENT` (a
submission held for review)."""

from __future__ import annotations

import argparse
import os
import sys
import textwrap

EPILOG_TEMPLATE = textwrap.dedent(
    """\
    Every submission under the course's submitted folder (nbgrader layout:
    <submitted>/<student>/<assignment>/<notebook>.ipynb) and every student of the
    gradebook gets exactly one status:

{statuses}
    Scores and statuses go to the gradebook (SQLite from nbgrader_config.py, or --db
    postgresql://user:password@host/db) and to the CSV; feedback HTML to the feedback
    folder; a grade-distribution plot next to the CSV. Grading again recomputes
    everything from scratch. Run as root for the full jail (own user, namespaces,
    cgroups); see book/instructors.md.

    needs_review and tampered withhold their points from the CSV, the LMS files and
    the feedback page until an instructor decides:
      python -m bertcourse.grade approve ASSIGNMENT STUDENT [--part P] [--reason ...]
      python -m bertcourse.grade reject ASSIGNMENT STUDENT [--part P] [--reason ...]
    The class report (python -m bertcourse.grade report ...) lists them.
    """
)


def _epilog() -> str:
    from bertcourse.grade.status import Status

    lines = []
    for status in Status:
        wrapped = textwrap.wrap(status.meaning, 64)
        lines.append(f"  {status.value:<18}{wrapped[0]}")
        lines += [" " * 20 + line for line in wrapped[1:]]
    return EPILOG_TEMPLATE.replace("{statuses}", "\n".join(lines))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bertcourse.grade",
        description="Grade every submission of an nbgrader assignment in isolated, "
        "resource-limited kernels, in parallel.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "assignment",
        nargs="+",
        help="assignment name, e.g. ch01_attention; several are graded in one pool of workers "
        "(started once), each with its own CSV, plot and feedback",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="parallel kernels (default: the number of cores, %(default)s here)",
    )
    parser.add_argument("--db", help="gradebook URL (default: CourseDirectory.db_url)")
    parser.add_argument(
        "--csv", help="CSV to write (default: <grading folder>/reports/ASSIGNMENT_grades.csv)"
    )
    parser.add_argument("--course", default=".", help="course folder with nbgrader_config.py")
    parser.add_argument("--plot", help="PNG of the grade distribution (default: beside the CSV)")
    parser.add_argument(
        "--student",
        action="append",
        default=[],
        metavar="PATTERN",
        help="grade only students matching this glob (repeatable)",
    )
    parser.add_argument(
        "--shard",
        default="0/1",
        metavar="K/N",
        help="grade only the students with crc32(id) %% N == K (several machines, one gradebook)",
    )
    parser.add_argument(
        "--cell-timeout",
        type=float,
        help="seconds per cell (default: Execute.timeout of nbgrader_config.py, else 60)",
    )
    parser.add_argument(
        "--notebook-timeout", type=float, default=600.0, help="seconds per notebook (%(default)s)"
    )
    parser.add_argument(
        "--memory", type=int, default=2048, help="MiB per kernel, children included (%(default)s)"
    )
    parser.add_argument(
        "--worker-memory",
        type=int,
        default=4096,
        help="MiB per grader worker, the referee's side of one submission (0: no cap; %(default)s)",
    )
    parser.add_argument(
        "--max-processes", type=int, default=256, help="processes/threads per kernel (%(default)s)"
    )
    parser.add_argument("--no-feedback", action="store_true", help="do not write feedback HTML")
    parser.add_argument(
        "--no-isolation",
        action="store_true",
        help="do not use a separate user, namespaces or cgroups even as root (weaker)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--no-zygote",
        action="store_true",
        help="start every kernel from scratch instead of forking it from a process that has "
        "already imported torch (slower; the jail is the same)",
    )
    parser.add_argument(
        "--init-only",
        action="store_true",
        help="create the gradebook tables and record the assignment, then stop "
        "(run once before starting graders on several machines)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="write the CSV and the plot from the gradebook without grading "
        "(after the graders of all shards have finished)",
    )
    parser.add_argument(
        "--hide",
        action="append",
        default=[],
        metavar="PATH",
        help="another folder the kernels must not see (repeatable)",
    )
    lms_group = parser.add_argument_group("deadlines and learning platforms")
    lms_group.add_argument(
        "--late-policy",
        metavar="TOML",
        help="due dates, extensions and the penalty rule (default: late_policy.toml at the "
        "course root, if there is one; see book/instructors.md)",
    )
    lms_group.add_argument("--no-late-policy", action="store_true", help="apply no late policy")
    lms_group.add_argument(
        "--canvas", metavar="CSV", help="also write a Canvas gradebook import file"
    )
    lms_group.add_argument("--moodle", metavar="CSV", help="also write a Moodle grade import file")
    lms_group.add_argument(
        "--roster",
        metavar="CSV",
        help="student_id -> LMS identities (name, sis_login_id, username, ...)",
    )
    lms_group.add_argument(
        "--canvas-identity", default="sis_login_id", choices=["sis_login_id", "sis_user_id", "id"]
    )
    lms_group.add_argument("--canvas-assignment-id", metavar="N", help="the assignment's Canvas id")
    lms_group.add_argument(
        "--moodle-identity", default="username", choices=["username", "email", "id_number"]
    )
    lms_group.add_argument(
        "--hold",
        action="append",
        default=[],
        metavar="STATUS",
        help="leave students with this status out of the LMS files until an instructor "
        "has decided on them (repeatable; default: pending, needs_review, tampered); points "
        "withheld for review never reach the files",
    )
    return parser.parse_args(argv)


def parse_decision(argv: list[str], approve: bool) -> argparse.Namespace:
    verb = "approve" if approve else "reject"
    parser = argparse.ArgumentParser(
        prog=f"python -m bertcourse.grade {verb}",
        description=(
            "Release the points the grader computed for a submission held for review "
            "(needs_review, tampered), after reading the code it flagged."
            if approve
            else "Give 0 to a submission held for review (needs_review, tampered)."
        )
        + " The decision is recorded in the gradebook for the submission's exact bytes: a "
        "re-grade keeps it only if the submission is byte-identical. Write the CSV and the "
        "LMS files again with --report-only.",
    )
    parser.add_argument("assignment")
    parser.add_argument("student")
    parser.add_argument(
        "--part",
        metavar="P",
        help="one part (its column in the CSV: the test cell's grade id); default: every part",
    )
    parser.add_argument("--reason", default="", help="why (kept with the decision)")
    parser.add_argument("--course", default=".", help="course folder with nbgrader_config.py")
    parser.add_argument("--db", help="gradebook URL (default: CourseDirectory.db_url)")
    return parser.parse_args(argv)


def decide(argv: list[str], approve: bool) -> int:
    """`approve` / `reject`: an instructor's decision on a submission held for review."""
    import getpass

    from bertcourse.grade import gradebook
    from bertcourse.grade.assignment import load_assignment, load_coursedir
    from bertcourse.grade.results import Decision

    args = parse_decision(argv, approve)
    try:
        coursedir, _ = load_coursedir(args.course, args.db)
        spec = load_assignment(coursedir, args.assignment)
        part = ("", "")
        if args.part:
            columns = {column: (nb, gid) for column, nb, gid in spec.part_columns()}
            if args.part not in columns:
                raise ValueError(
                    f"{args.assignment} has no part {args.part!r} (parts: {', '.join(columns)})"
                )
            part = columns[args.part]
        grade = gradebook.record_decision(
            coursedir.db_url,
            coursedir.course_id,
            args.assignment,
            args.student,
            Decision(*part, approved=approve, digest="", reason=args.reason, by=getpass.getuser()),
        )
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    from bertcourse.grade import report

    (row,) = report.csv_rows(spec, [grade])
    which = f"part {args.part}" if args.part else "every part"
    print(
        f"{'approved' if approve else 'rejected'}: {args.student}, {args.assignment}, {which}; "
        f"review: {row['review']}, score: {row['score'] or 'withheld'} / {row['max_score']}. "
        f"Write the reports again: python -m bertcourse.grade {args.assignment} --report-only"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["report"]:  # the class report: python -m bertcourse.grade report A [A ...]
        from bertcourse.grade import classreport

        return classreport.main(argv[1:])
    if argv[:1] in (["approve"], ["reject"]):  # a held submission's points, released or not
        return decide(argv[1:], approve=argv[0] == "approve")
    args = parse_args(argv)
    from bertcourse.grade.runner import Options, run_all

    try:
        k, n = (int(x) for x in args.shard.split("/"))
        if not 0 <= k < n:
            raise ValueError
    except ValueError:
        print(f"--shard must be K/N with 0 <= K < N, got {args.shard!r}", file=sys.stderr)
        return 2
    if args.workers < 1:
        print("--workers must be at least 1", file=sys.stderr)
        return 2
    single = ("csv", "plot", "canvas", "moodle", "canvas_assignment_id")
    given = [f"--{name.replace('_', '-')}" for name in single if getattr(args, name)]
    if len(args.assignment) > 1 and given:
        print(
            f"{', '.join(given)}: one assignment at a time (grade the others with the default "
            "reports, then `--report-only` with these options for each)",
            file=sys.stderr,
        )
        return 2
    common = dict(
        course=args.course,
        workers=args.workers,
        db=args.db,
        csv=args.csv,
        plot=args.plot,
        students=args.student,
        shard=(k, n),
        cell_timeout=args.cell_timeout,
        notebook_timeout=args.notebook_timeout,
        memory_mib=args.memory,
        worker_memory_mib=args.worker_memory,
        max_processes=args.max_processes,
        feedback=not args.no_feedback,
        isolate=not args.no_isolation,
        progress=not args.quiet,
        init_only=args.init_only,
        report_only=args.report_only,
        hide=args.hide,
        zygote=not args.no_zygote,
        late_policy="" if args.no_late_policy else args.late_policy,
        canvas=args.canvas,
        moodle=args.moodle,
        roster=args.roster,
        canvas_identity=args.canvas_identity,
        canvas_assignment_id=args.canvas_assignment_id,
        moodle_identity=args.moodle_identity,
        hold=args.hold,
    )
    runs = [Options(assignment=name, **common) for name in dict.fromkeys(args.assignment)]
    from bertcourse.grade import late

    try:
        run_all(runs)
    except (FileNotFoundError, late.PolicyError, ValueError) as error:  # a bad file, named
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
