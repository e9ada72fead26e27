"""Shared test set-up: offline transformers, deterministic torch, small thread count, tiers.

Two tiers: `pytest -m "not slow"` is the everyday run (under 3 minutes on an idle 2-core
machine); CI (`bash scripts/test.sh`) runs everything. The heavy tests are marked `slow` here,
by file and test name (`SLOW_FILES`, `SLOW_TESTS`), so that their own files need no edit.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402

pytest_plugins = ["course_fixture"]  # the grader tests' toy course (tests/course_fixture.py)
import torch  # noqa: E402

# pytest-xdist runs two workers on two cores: one thread each avoids oversubscription.
torch.set_num_threads(1)

# every test of these files is slow: the hostile submission bank (one grading run of dozens of
# submissions), PostgreSQL, two-process DDP, the formgrader in JupyterLab and Chromium, the
# grader's worker pool under attack, the class report, the Chinese site, the Validate dialog
SLOW_FILES = frozenset(
    {
        "test_grade_hostile.py",
        "test_grade_postgres.py",
        "test_ddp.py",
        "test_formgrader.py",
        "test_grade_pool.py",  # real workers killed, a reply bomb and a full disk
        "test_class_report.py",  # runs the wrong-answer bank for real feedback messages
        "test_zh_site.py",  # the Chinese edition built and opened in Chromium
        "test_validate_dialog.py",  # JupyterLab and Chromium; Validate runs a notebook (~90 s)
    }
)
# (file, test function or one parametrized case): the book built from clean beside two
# CPU-bound processes, the failed-page rebuilds, each assignment's full nbgrader chain
# (generate, submit, autograde), chapter 0's answers run in process (85 s of CPU: it trains a
# WordPiece vocabulary), the options benchmark (torch.compile's Inductor builds the model)
SLOW_TESTS = frozenset(
    {
        ("test_benchmarks.py", "test_bench_options_writes_figures_that_agree_with_its_timings"),
        ("test_book.py", "test_book_builds_on_a_busy_machine_offline_and_renders"),
        ("test_book.py", "test_a_failed_page_fails_every_build_until_it_is_fixed"),
        ("test_exercises.py", "test_assignment_grades"),
        ("test_exercises.py", "test_answers_in_process[ch00_tokenization]"),
    }
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = item.path.name
        function = getattr(item, "originalname", item.name)
        if name in SLOW_FILES or {(name, function), (name, item.name)} & SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
    # The slow tests first (stable: each file's order kept): pytest-xdist then hands the short
    # ones out last, so neither worker sits idle while the other ends on a long test.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
