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
# The busy-machine book build runs beside the rest of the suite, not after it: the suite's two
# pytest workers are the CPU-bound processes the build must survive (with one burner of its own;
# the test measures the load and fails if it was not busy enough). Its output comes after the
# suite's. This saves the ~400 s it took on its own (CI, issue 21).
busy_build="tests/test_book.py::test_book_builds_on_a_busy_machine_offline_and_renders"
echo "== pytest"
if [ "$#" -gt 0 ]; then
  "$BERTCOURSE_PYTHON" -m pytest -p no:cacheprovider -n 2 --durations=15 "$@"
else
  busy_log="$(mktemp)"
  BERTCOURSE_BUILD_BESIDE_SUITE=1 "$BERTCOURSE_PYTHON" -m pytest -p no:cacheprovider \
    --durations=5 "$busy_build" >"$busy_log" 2>&1 &
  busy_pid=$!
  suite=0
  "$BERTCOURSE_PYTHON" -m pytest -p no:cacheprovider -n 2 --durations=40 --deselect "$busy_build" || suite=$?
  busy=0
  wait "$busy_pid" || busy=$?
  echo "== pytest: the book built beside the suite (exit $busy)"
  cat "$busy_log"
  rm -f "$busy_log"
  if [ "$suite" -ne 0 ] || [ "$busy" -ne 0 ]; then
    echo "== tests failed: the suite exit $suite, the busy build exit $busy"
    exit 1
  fi
fi
