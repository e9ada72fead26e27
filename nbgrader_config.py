"""nbgrader configuration of the bertcourse exercises (read by every `nbgrader` command run here).

Layout (all paths relative to this file's folder, the course root):

    solutions/<assignment>/<notebook>.ipynb   instructor versions: solutions + hidden tests
    exercises/<assignment>/<notebook>.ipynb   student versions, made by `nbgrader generate_assignment`
    .grading/                                 everything about students (git ignores it):
        submitted/<student>/<assignment>/       submissions (from `nbgrader zip_collect` or collect)
        autograded/  feedback/                  autograde and generate_feedback output
        downloaded/<assignment>/archive/        LMS zip files for `nbgrader zip_collect`
        gradebook.db                            the SQLite gradebook
        solution/  source_with_tests/           output of generate_solution / generate_source_with_tests

nbgrader joins `CourseDirectory.root` with `directory_structure`
("{nbgrader_step}/{student_id}/{assignment_id}"), where `nbgrader_step` is one of the
`*_directory` names below, so a step name may contain a "/" (".grading/submitted").
"""

import atexit
import os
import shutil
import tempfile

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

COURSE_ROOT = os.path.dirname(os.path.abspath(__file__))
GRADING_DIR = ".grading"

c.CourseDirectory.course_id = "bertcourse"
# The course root is this folder wherever nbgrader is started from (default: the current folder).
c.CourseDirectory.root = COURSE_ROOT

c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = f"{GRADING_DIR}/submitted"
c.CourseDirectory.autograded_directory = f"{GRADING_DIR}/autograded"
c.CourseDirectory.feedback_directory = f"{GRADING_DIR}/feedback"
# generate_solution writes here (a separate trait from source_directory, default "solution")
c.CourseDirectory.solution_directory = f"{GRADING_DIR}/solution"
c.CourseDirectory.source_with_tests_directory = f"{GRADING_DIR}/source_with_tests"

# The gradebook lives with the student data. SQLite cannot create a missing folder.
os.makedirs(os.path.join(COURSE_ROOT, GRADING_DIR), exist_ok=True)
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(COURSE_ROOT, GRADING_DIR, "gradebook.db")

# `nbgrader zip_collect <assignment>` reads the LMS download from
# .grading/downloaded/<assignment>/archive/ (zip files or loose notebooks) and extracts it to
# .grading/downloaded/<assignment>/extracted/. File names like
#     <student_id>_<anything>_<notebook>.ipynb   e.g. alice_12345_67890_attention.ipynb
# (Canvas "submissions.zip" style; Canvas adds "late_" and numeric ids) give the student id and
# the notebook. For another LMS, change this regular expression (it sees the full path).
c.ZipCollectApp.downloaded_directory = f"{GRADING_DIR}/downloaded"
c.FileNameCollectorPlugin.named_regexp = (
    r".*/(?P<student_id>[A-Za-z0-9.\-]+)_(?:late_)?(?:[0-9]+_)*(?P<file_id>[A-Za-z][\w\-]*\.ipynb)$"
)

# Autograding. Each cell may run this long (every cell is designed to take < 30 s on a laptop
# CPU; the margin is for slow machines and loop-based answers). A timed-out cell scores 0.
c.Execute.timeout = 60
# A test cell that writes to stderr counts as failed in nbgrader. PyTorch and NumPy warnings go
# to stderr ("...: UserWarning: ..."), so remove stderr outputs that are Python warnings before
# grading: correct code that triggers a deprecation warning keeps its points. Errors are not
# stderr streams, so failing tests still fail. (`nbgrader validate` does not run this
# preprocessor; the test helpers in bertcourse.grading silence warnings themselves.)
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"\w*Warning: "

# Kernels over IPC, not TCP: ipykernel 7 warns "Kernel is running over TCP without encryption"
# at every kernel start over TCP (once per `nbgrader validate`). nbgrader's kernels (validate, the
# Validate button, autograde) run on this machine, so their sockets are files in a private folder
# (mode 0700) of each process that reads this file, removed at its exit. `ip` must be set: a
# manager without a connection file (nbclient's) names the sockets "kernel-ipc-<n>" in its own
# current folder, not the kernel's. A Unix socket's path holds at most 107 bytes; on Windows (no
# IPC) or with a longer temporary folder the kernels keep TCP. (The book build's kernels:
# bertcourse/viz/kernels_ext.py. The grader's jailed kernels use IPC on their own.)
_KERNEL_SOCKETS = os.path.join(tempfile.mkdtemp(prefix="nbgrader-kernel-"), "kernel")
atexit.register(shutil.rmtree, os.path.dirname(_KERNEL_SOCKETS), ignore_errors=True)
if os.name == "posix" and len(os.fsencode(_KERNEL_SOCKETS)) + len("-99") <= 107:
    c.KernelManager.transport = "ipc"
    c.KernelManager.ip = _KERNEL_SOCKETS

# A translated release (exercises-zh_CN/, notebook metadata {"bertcourse": {"lang": "zh_CN"}})
# ends its set-up cell with `grading.set_language("zh_CN")`: the feedback's language. autograde's
# OverwriteCells puts the gradebook's English set-up cell back, so the line is added again after
# it (the statements stay the gradebook's English: a learner's markdown never reaches the
# feedback). scripts/i18n_exercises.py writes the line; tests/test_exercises_zh.py checks both.
from nbgrader.preprocessors import (  # noqa: E402
    CheckCellMetadata,
    ClearOutput,
    DeduplicateIds,
    NbGraderPreprocessor,
    OverwriteCells,
    OverwriteKernelspec,
)


class RestoreLanguage(NbGraderPreprocessor):
    languages = ("zh_CN",)

    def preprocess(self, nb, resources):
        meta = nb.metadata.get("bertcourse")
        lang = meta.get("lang") if isinstance(meta, dict) else None
        setup = [
            cell
            for cell in nb.cells
            if cell.cell_type == "code"
            and cell.metadata.get("nbgrader", {}).get("grade_id") == "setup"
        ]
        if lang in self.languages and len(setup) == 1:
            setup[0].source += f'\ngrading.set_language("{lang}")'
        return nb, resources


c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    DeduplicateIds,
    OverwriteKernelspec,
    OverwriteCells,
    RestoreLanguage,
    CheckCellMetadata,
]
