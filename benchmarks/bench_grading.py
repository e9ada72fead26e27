"""Grading benchmark: `python -m bertcourse.grade` beside plain serial `nbgrader autograde`.

Simulates a class: every student submits every assignment of the course (the committed
release notebooks with answers filled in: 7 in 10 students give the instructor's answers, 1
hands in the release untouched, 1 leaves one part unanswered, 1 leaves two). Both graders
work on identical copies of the same submissions, in the same run, one after the other:

    python benchmarks/bench_grading.py                    # 100 students x the whole course
    python benchmarks/bench_grading.py --students 10      # smaller
    python benchmarks/bench_grading.py --students 100 --baseline-students 10
        # nbgrader on the first 10 students only (its time per notebook is then reported
        # and extrapolated to the full class, marked as such)

The grader grades all the assignments in one run (`python -m bertcourse.grade A B ...`: its
workers and their zygotes start once), as an instructor grading the course would; with
`--separate`, one run per assignment (the per-assignment figures, each paying the start-up).
It prints the wall time of each, in total (and per assignment with --separate), the notebooks
per minute, and
whether the two agree on the scores of the students both graded (nbgrader counts a torch
warning on stderr as a failure unless the course's IgnorePattern is set; the course sets it).
Figures go to benchmarks/results/bench_grading.json too.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]


def _gid(cell) -> str | None:
    md = cell.get("metadata", {}).get("nbgrader")
    return md.get("grade_id") if isinstance(md, dict) else None


def _assignments(course: Path) -> list[str]:
    return sorted(
        p.name for p in (course / "solutions").iterdir() if p.is_dir() and p.name[0] != "_"
    )


def _notebooks(course: Path, assignment: str) -> list[str]:
    return sorted(p.stem for p in (course / "exercises" / assignment).glob("*.ipynb"))


def _student_notebook(course: Path, assignment: str, name: str, variant: int):
    release = nbformat.read(course / "exercises" / assignment / f"{name}.ipynb", 4)
    source = nbformat.read(course / "solutions" / assignment / f"{name}.ipynb", 4)
    answers = [
        (_gid(c), c.source)
        for c in source.cells
        if (c.metadata.get("nbgrader") or {}).get("solution") and c.cell_type == "code"
    ]
    if variant == 7:
        return release  # handed in untouched
    skip = set()
    if variant == 8:
        skip = {answers[0][0]} if answers else set()
    elif variant == 9:
        skip = {a for a, _ in answers[-2:]}
    filled = dict(answers)
    for cell in release.cells:
        gid = _gid(cell)
        if gid in filled and gid not in skip:
            cell.source = filled[gid]
    return release


def make_course(target: Path, students: int, assignments: list[str]) -> None:
    target.mkdir(parents=True)
    shutil.copy(REPO / "nbgrader_config.py", target)
    for folder in ("solutions", "exercises"):
        for a in assignments:
            shutil.copytree(REPO / folder / a, target / folder / a)
    for a in assignments:
        for name in _notebooks(target, a):
            variants = {v: _student_notebook(target, a, name, v) for v in (0, 7, 8, 9)}
            for i in range(students):
                v = i % 10 if i % 10 in (7, 8, 9) else 0
                folder = target / ".grading" / "submitted" / f"s{i:03d}" / a
                folder.mkdir(parents=True, exist_ok=True)
                nbformat.write(variants[v], folder / f"{name}.ipynb")


def _run(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        print(proc.stdout[-2000:], proc.stderr[-4000:], file=sys.stderr)
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return seconds


def _scores_ours(course: Path, assignment: str) -> dict[str, tuple[str, float]]:
    path = course / ".grading" / "reports" / f"{assignment}_grades.csv"
    with open(path, newline="") as f:
        return {r["student_id"]: (r["status"], float(r["score"])) for r in csv.DictReader(f)}


def _scores_nbgrader(course: Path) -> dict[tuple[str, str], float]:
    out = course / "nbgrader_export.csv"
    subprocess.run(
        [sys.executable, "-m", "nbgrader", "export", "--to", str(out)],
        cwd=course,
        check=True,
        capture_output=True,
    )
    with open(out, newline="") as f:
        return {
            (r["student_id"], r["assignment"]): float(r["raw_score"] or 0)
            for r in csv.DictReader(f)
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--baseline-students", type=int, help="nbgrader on the first N only")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--assignments", help="comma-separated (default: all in solutions/)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary courses")
    parser.add_argument(
        "--separate", action="store_true", help="one grader run per assignment (default: one run)"
    )
    args = parser.parse_args()
    assignments = args.assignments.split(",") if args.assignments else _assignments(REPO)
    base = Path(tempfile.mkdtemp(prefix="bench-grading-"))
    ours_dir, theirs_dir = base / "ours", base / "nbgrader"
    print(f"building {args.students} students x {len(assignments)} assignments in {base}")
    make_course(ours_dir, args.students, assignments)
    n_base = (
        args.students
        if args.baseline_students is None
        else min(args.baseline_students, args.students)
    )
    if not args.no_baseline:
        make_course(theirs_dir, n_base, assignments)
    grade = [sys.executable, "-m", "bertcourse.grade"]
    results: dict = {
        "students": args.students,
        "assignments": assignments,
        "workers": args.workers,
        "cores": os.cpu_count(),
        "ours": {},
        "nbgrader": {},
    }
    _run([*grade, *assignments, "--init-only", "--quiet"], ours_dir)
    if not args.no_baseline:
        _run([*grade, *assignments, "--init-only", "--quiet"], theirs_dir)
    notebooks = sum(len(_notebooks(ours_dir, a)) for a in assignments) * args.students
    runs = [[a] for a in assignments] if args.separate else [assignments]
    results["ours"]["one_run"] = not args.separate
    total_ours = 0.0
    for names in runs:
        seconds = _run([*grade, *names, "--workers", str(args.workers), "--quiet"], ours_dir)
        total_ours += seconds
        for a in names:
            scores = _scores_ours(ours_dir, a)
            statuses = sorted({s for s, _ in scores.values()})
            results["ours"][a] = {"statuses": statuses}
            if args.separate:
                results["ours"][a]["seconds"] = round(seconds, 1)
                print(f"bertcourse.grade  {a:16s} {seconds:7.1f} s  statuses {statuses}")
            else:
                print(f"bertcourse.grade  {a:16s} (one run)  statuses {statuses}")
    results["ours"]["total_seconds"] = round(total_ours, 1)
    print(
        f"bertcourse.grade  total            {total_ours:7.1f} s  for {notebooks} notebooks "
        f"({notebooks / total_ours * 60:.0f} per minute, {args.workers} workers)"
    )
    if not args.no_baseline:
        total_base = 0.0
        for a in assignments:
            seconds = _run(
                [sys.executable, "-m", "nbgrader", "autograde", a, "--force"], theirs_dir
            )
            total_base += seconds
            results["nbgrader"][a] = {"seconds": round(seconds, 1)}
            print(f"nbgrader autograde {a:16s} {seconds:7.1f} s  ({n_base} students)")
        base_notebooks = sum(len(_notebooks(theirs_dir, a)) for a in assignments) * n_base
        per_nb = total_base / base_notebooks
        results["nbgrader"].update(
            total_seconds=round(total_base, 1),
            students=n_base,
            seconds_per_notebook=round(per_nb, 2),
            extrapolated_total_seconds=round(per_nb * notebooks, 1),
        )
        label = "" if n_base == args.students else f" (extrapolated from {n_base} students)"
        print(
            f"nbgrader autograde total            {total_base:7.1f} s  for {base_notebooks} notebooks; "
            f"{per_nb * notebooks:.0f} s for the class{label}"
        )
        theirs = _scores_nbgrader(theirs_dir)
        disagree = []
        for a in assignments:
            ours = _scores_ours(ours_dir, a)
            for (student, assignment), score in theirs.items():
                if assignment == a and student in ours and abs(ours[student][1] - score) > 1e-9:
                    disagree.append((student, a, ours[student], score))
        results["disagreements"] = disagree[:50]
        print(f"score disagreements with nbgrader: {len(disagree)}", *disagree[:10], sep="\n  ")
    out = REPO / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_grading.json").write_text(json.dumps(results, indent=2))
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print(f"kept {base}")


if __name__ == "__main__":
    main()
