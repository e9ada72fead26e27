"""`python -m bertcourse.grade ASSIGNMENT`: grading that survives hostile and broken submissions.

Built on nbgrader (its gradebook, its cell-restoring preprocessors, its feedback template):

    runner      the batch: students, N worker processes, progress bar, CSV and plot
    worker      one submission end to end; never raises, always leaves a status
    submission  read, find tampering, rebuild the graded notebook (nbgrader preprocessors)
    execute     run it in a jailed kernel, cell by cell, with deadlines; test cells go to
                the referee
    referee     outside the jail: runs the instructor's test cells, calls the learner's
                functions in the kernel with data, compares, decides every point
    status      the statuses, their meaning, colour and precedence
    isolation   what this machine can enforce; grading user, cgroups, watchdog, the spec
    sandbox     the launcher that builds the jail (namespaces, mounts, limits, setuid)
    gradebook   statuses and scores in the gradebook, written atomically
    feedback    nbgrader's feedback HTML without the hidden tests
    report      the CSV and the grade-distribution plot

Statuses: `status.Status` (meaning, colour and precedence in one place).
The instructors' guide (book/instructors.md) explains the commands and the threat model.

This package's __init__ imports nothing heavy.
"""

from bertcourse.grade.status import Status  # noqa: E402

__all__ = ["Status"]
