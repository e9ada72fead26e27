#!/usr/bin/env bash
# The whole test suite, from a fresh machine (what CI runs, see .ci/run): install everything
# (scripts/install.sh, with Chromium and PostgreSQL for the tests), lint, then run every test
# (package, exercises and grading pipeline, pretraining and DDP smoke tests, the book build
# with warnings as errors beside two CPU-bound processes, and its headless-Chromium check).
# Arguments go to pytest. Everyday work: `python -m pytest -m "not slow"` (the heavy tier,
# marked in tests/conftest.py, left out).
# Everything runs in the environment install.sh picks: the active virtualenv or conda environment,
# otherwise the project's .venv (created on the first run).
set -euo pipefail
_BC_CALLER_PWD="$PWD"
cd "$(dirname "$0")/.."
# shellcheck source=scripts/install.sh
source scripts/install.sh --chromium --postgresql
if [ -n "$BERTCOURSE_NEXT" ]; then
  trap 'echo "== next: $BERTCOURSE_NEXT   (then python, jupyter lab, nbgrader, pytest are the project'"'"'s)"' EXIT
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TOKENIZERS_PARALLELISM=false
echo "== ruff"
"$BERTCOURSE_PYTHON" -m ruff check .
"$BERTCOURSE_PYTHON" -m ruff format --check bertcourse tests benchmarks
# The busy-machine book build runs on its own, after the rest: its two CPU-bound processes
# would otherwise also load the grading tests beside it, whose kernels have time limits.
busy_build="tests/test_book.py::test_book_builds_on_a_busy_machine_offline_and_renders"
echo "== pytest"
if [ "$#" -gt 0 ]; then
  "$BERTCOURSE_PYTHON" -m pytest -p no:cacheprovider -n 2 --durations=15 "$@"
else
  "$BERTCOURSE_PYTHON" -m pytest -p no:cacheprovider -n 2 --durations=40 --deselect "$busy_build"
  echo "== pytest: the book built beside two CPU-bound processes"
  "$BERTCOURSE_PYTHON" -m pytest -p no:cacheprovider --durations=5 "$busy_build"
fi
