"""`python -m bertcourse.grade ASSIGNMENT`: grading that survives hostile and broken submissions.

Built on nbgrader (its gradebook, its cell-restoring preprocessors, its feedback template):

    runner      the batch: students, N worker processes, progress bar, CSV and plot
    worker      one submission end to end; never raises, always leaves a status
    submission  read, find tampering, rebuild the graded notebook (nbgrader preprocessors)
    boundary/   the trust boundary: the notebook run in the jailed kernel (`execute`), the
                referee outside it (`referee`), both ends of a call (`remote`) and what may
                cross (`codec`)
    jail/       what a kernel may see and use: the host's capabilities, the allow-listed root
                file system, one kernel's limits and cgroups, the zygote, the launcher
    status      the statuses, their meaning, colour and precedence
    results     one typed record per stage and the one final score
    gradebook   statuses and scores in the gradebook, written atomically
    feedback    nbgrader's feedback HTML without the hidden tests
    report      the CSV and the grade-distribution plot; lms, late, classreport: exports,
                deadlines, the class report

Statuses: `status.Status` (meaning, colour and precedence in one place).
The instructors' guide (book/instructors.md) explains the commands and the threat model.

This package's __init__ imports nothing heavy.
"""

from bertcourse.grade.status import Status  # noqa: E402

__all__ = ["Status"]
