#!/usr/bin/env bash
# Install what the website needs (scripts/install.sh), then build it with warnings as errors:
#   bash scripts/build_book.sh            # build into _build/html: Python only (no root, apt, node);
#                                         # then check that no page shows an error output
#   bash scripts/build_book.sh --check    # ... and open every page in headless Chromium
#                                         # (installs the Debian package chromium when missing)
# Everything runs in the environment install.sh picks: the active virtualenv or conda environment,
# otherwise the project's .venv (created on the first run).
# Pages are executed at build time, each kernel on one thread; outputs are cached in
# _build/.jupyter_cache/<hash>, where <hash> is taken over bertcourse/**/*.py
# (bertcourse/viz/book_ext.py), so editing the package re-executes the pages. Only successful
# executions are cached: a page that failed is executed again on the next run, and after a
# failed build every page is read again, so its warnings are reported again.
# `rm -rf _build` gives a build from clean. The build's log is kept in _build/build.log (the
# Chinese edition's in _build/i18n.log).
#
# The last lines are always: the website's path, or `== FAILED:` with the page, the cell and the
# error (or the step that failed); then the `source .../activate` line when one is needed.
set -euo pipefail
_BC_CALLER_PWD="$PWD"
cd "$(dirname "$0")/.."

check=0
for arg in "$@"; do
  case "$arg" in
    --check) check=1 ;;
    *) echo "usage: bash scripts/build_book.sh [--check]" >&2; exit 2 ;;
  esac
done

_bc_failure="the install (see the messages above)"
_bc_finish() {
  local status=$?
  if [ "$status" = 0 ]; then
    echo "== the website is at file://$(pwd)/_build/html/index.html"
  else
    echo "== FAILED: $_bc_failure"
  fi
  if [ -n "${BERTCOURSE_NEXT:-}" ]; then
    echo "== next: $BERTCOURSE_NEXT   (then python, jupyter lab, nbgrader, pytest are the project's)"
  fi
}
trap _bc_finish EXIT

install_args=()
if [ "$check" = 1 ]; then install_args+=(--chromium); fi
# shellcheck source=scripts/install.sh
source scripts/install.sh ${install_args[@]+"${install_args[@]}"}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1
export TOKENIZERS_PARALLELISM=false PYDEVD_DISABLE_FILE_VALIDATION=1

echo "== jupyter-book build -W -n --keep-going ."
mkdir -p _build
log=_build/build.log
start=$(date +%s)
set +e
"$BERTCOURSE_PYTHON" -c "import sys; from jupyter_book.cli.main import main; sys.exit(main())" \
  build -W -n --keep-going . 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
if [ "$status" != 0 ]; then
  _bc_failure="$("$BERTCOURSE_PYTHON" bertcourse/viz/book_ext.py summary "$log" --root . --build _build)" \
    || _bc_failure="the book build (exit $status; see $log)"
  exit "$status"
fi
echo "== book built in $(($(date +%s) - start)) s"
# the Chinese edition into _build/html/zh, from the same execution cache (locales/README.md). Its
# log is kept in _build/i18n.log; the catalogue check's glossary notes (a translated paragraph
# without the glossary's Chinese term, a hint for translators: `python scripts/i18n.py check`)
# go there only, not to the terminal, where a learner would read them as the build's last words.
_bc_failure="the Chinese edition (python scripts/i18n.py build: see the FAIL lines or warnings above, and _build/i18n.log)"
set +e
PYTHONUNBUFFERED=1 "$BERTCOURSE_PYTHON" scripts/i18n.py build 2>&1 | tee _build/i18n.log \
  | grep -v '^  glossary warning: '
status=${PIPESTATUS[0]}
set -e
if [ "$status" != 0 ]; then exit "$status"; fi

# the pages must show no error output (and, with --check, render in headless Chromium)
site_args=(--no-browser)
if [ "$check" = 1 ]; then site_args=(--screenshots _build/screenshots); fi
_bc_failure="the site check (see the PROBLEM lines above)"
set +e
"$BERTCOURSE_PYTHON" scripts/check_site.py _build/html "${site_args[@]}" | tee _build/check_site.log
status=${PIPESTATUS[0]}
set -e
if [ "$status" != 0 ]; then
  first="$(grep -m1 '^PROBLEM ' _build/check_site.log || true)"
  count="$(grep -c '^PROBLEM ' _build/check_site.log || true)"
  if [ -n "$first" ]; then
    _bc_failure="the site check found $count problems; the first: ${first#PROBLEM }"
  fi
  exit "$status"
fi

echo "   (to serve the website: python -m http.server --directory _build/html 8000, then open http://127.0.0.1:8000)"
