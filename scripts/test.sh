#!/usr/bin/env bash
# The whole test suite, from a fresh machine: install everything, lint, then run every test
# (package, exercises and grading pipeline, pretraining and DDP smoke tests, the book build
# with warnings as errors and its headless-Chromium check).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TOKENIZERS_PARALLELISM=false
echo "== ruff"
python3 -m ruff check .
python3 -m ruff format --check bertcourse tests benchmarks
echo "== pytest"
python3 -m pytest -p no:cacheprovider -n 2 --durations=15 "$@"
