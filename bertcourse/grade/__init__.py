"""`python -m bertcourse.grade ASSIGNMENT`: grading that survives hostile and broken submissions.

Built on nbgrader (its gradebook, its cell-restoring preprocessors, its feedback template):

    runner      the batch: students, N worker processes, progress bar, CSV and plot
    worker      one submission end to end; never raises, always leaves a status
    submission  read, find tampering, rebuild the graded notebook (nbgrader preprocessors)
    execute     run it in a jailed kernel; test cells through the guard, with a deadline
    guard       in the kernel: restore torch, the helpers and IPython, then run one test
    isolation   what this machine can enforce; grading user, cgroups, watchdog, the spec
    sandbox     the launcher that builds the jail (namespaces, mounts, limits, setuid)
    gradebook   statuses and scores in the gradebook, written atomically
    feedback    nbgrader's feedback HTML without the hidden tests
    report      the CSV and the grade-distribution plot

Statuses: graded, timed_out, crashed, memory_exceeded, invalid_notebook, tampered, missing.
The instructors' guide (book/instructors.md) explains the commands and the threat model.

This package's __init__ imports nothing heavy: `guard` runs inside student kernels.
"""

STATUSES = (
    "graded",
    "timed_out",
    "crashed",
    "memory_exceeded",
    "invalid_notebook",
    "tampered",
    "missing",
)
