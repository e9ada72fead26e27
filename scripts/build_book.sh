#!/usr/bin/env bash
# Install everything (scripts/install.sh), then build the website with warnings as errors:
#   bash scripts/build_book.sh            # build into _build/html
#   bash scripts/build_book.sh --check    # ... then open every page in headless Chromium
# Pages are executed at build time; outputs are cached in _build/.jupyter_cache/<hash>, where
# <hash> is taken over bertcourse/**/*.py (bertcourse/viz/book_ext.py), so editing the package
# re-executes the pages. `rm -rf _build` gives a build from clean.
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
for arg in "$@"; do
  case "$arg" in
    --check) check=1 ;;
    *) echo "usage: bash scripts/build_book.sh [--check]" >&2; exit 2 ;;
  esac
done

bash scripts/install.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1
export TOKENIZERS_PARALLELISM=false PYDEVD_DISABLE_FILE_VALIDATION=1

echo "== jupyter-book build -W -n --keep-going ."
start=$(date +%s)
python3 -c "import sys; from jupyter_book.cli.main import main; sys.exit(main())" \
  build -W -n --keep-going .
echo "== book built in $(( $(date +%s) - start )) s"

if [ "$check" = 1 ]; then
  python3 scripts/check_site.py _build/html --screenshots _build/screenshots
fi

site="$(pwd)/_build/html/index.html"
echo "== the website is at file://$site"
echo "   (or serve it: python3 -m http.server --directory _build/html 8000, then open http://127.0.0.1:8000)"
