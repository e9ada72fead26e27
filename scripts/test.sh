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
# A second lane runs beside the suite's two pytest workers, one test after another: first the
# busy-machine book build (the suite's workers are the CPU-bound processes it must survive, with
# one burner of its own; the test measures the load and fails if it was not busy enough), then
# two long tests that need no other test: the Chinese site and the speed-options benchmark. The
# suite alone leaves CPU time unused (its tests wait on kernels, servers and browsers), so the
# lane costs it little and saves the ~780 s its three tests took (CI, issue 21). Its output
# comes after the suite's.
lane_tests=(
  "tests/test_book.py::test_book_builds_on_a_busy_machine_offline_and_renders"
  "tests/test_zh_site.py::test_the_chinese_site_builds_and_renders"
  "tests/test_benchmarks.py::test_bench_options_writes_figures_that_agree_with_its_timings"
)
echo "== pytest"
if [ "$#" -gt 0 ]; then
  "$BERTCOURSE_PYTHON" -m pytest -p no:cacheprovider -n 2 --dist worksteal --durations=15 "$@"
else
  lane_log="$(mktemp)"
  BERTCOURSE_BUILD_BESIDE_SUITE=1 "$BERTCOURSE_PYTHON" -m pytest -p no:cacheprovider \
    --durations=5 "${lane_tests[@]}" >"$lane_log" 2>&1 &
  lane_pid=$!
  deselect=()
  for test in "${lane_tests[@]}"; do deselect+=(--deselect "$test"); done
  suite=0
  "$BERTCOURSE_PYTHON" -m pytest -p no:cacheprovider -n 2 --dist worksteal --durations=60 "${deselect[@]}" || suite=$?
  lane=0
  wait "$lane_pid" || lane=$?
  echo "== pytest: the lane beside the suite (the busy build, the Chinese site, bench_options): exit $lane"
  cat "$lane_log"
  rm -f "$lane_log"
  if [ "$suite" -ne 0 ] || [ "$lane" -ne 0 ]; then
    echo "== tests failed: the suite exit $suite, the lane beside it exit $lane"
    exit 1
  fi
fi
