#!/usr/bin/env bash
# Install what the website needs (scripts/install.sh), then build it with warnings as errors:
#   bash scripts/build_book.sh            # build into _build/html: Python only (no root, apt, node)
#   bash scripts/build_book.sh --check    # ... then open every page in headless Chromium
#                                         # (installs the Debian package chromium when missing)
# Everything runs in the environment install.sh picks: the active virtualenv or conda environment,
# otherwise the project's .venv (created on the first run).
# Pages are executed at build time; outputs are cached in _build/.jupyter_cache/<hash>, where
# <hash> is taken over bertcourse/**/*.py (bertcourse/viz/book_ext.py), so editing the package
# re-executes the pages. `rm -rf _build` gives a build from clean.
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

install_args=()
if [ "$check" = 1 ]; then install_args+=(--chromium); fi
# shellcheck source=scripts/install.sh
source scripts/install.sh ${install_args[@]+"${install_args[@]}"}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1
export TOKENIZERS_PARALLELISM=false PYDEVD_DISABLE_FILE_VALIDATION=1

echo "== jupyter-book build -W -n --keep-going ."
start=$(date +%s)
"$BERTCOURSE_PYTHON" -c "import sys; from jupyter_book.cli.main import main; sys.exit(main())" \
  build -W -n --keep-going .
echo "== book built in $(($(date +%s) - start)) s"

if [ "$check" = 1 ]; then
  "$BERTCOURSE_PYTHON" scripts/check_site.py _build/html --screenshots _build/screenshots
fi

site="$(pwd)/_build/html/index.html"
echo "== the website is at file://$site"
echo "   (or serve it: python -m http.server --directory _build/html 8000, then open http://127.0.0.1:8000)"
if [ -n "$BERTCOURSE_NEXT" ]; then
  echo "== next: $BERTCOURSE_NEXT   (then python, jupyter lab, nbgrader, pytest are the project's)"
fi
