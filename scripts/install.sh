#!/usr/bin/env bash
# Install everything bertcourse needs on a fresh Debian machine:
#   system packages (Chromium for the browser check, PostgreSQL for the grading tests),
#   the exact Python pins, bertcourse itself (editable), and the offline MathJax copy.
# Safe to run again: every step skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== apt-get install ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

echo "== pip install -r requirements.txt -e ."
export PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m pip install -q -r requirements.txt -e . 2>&1 | grep -v "is ignored" || true
python3 -c "import bertcourse, torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"

if [ -f scripts/install_mathjax.sh ]; then
  bash scripts/install_mathjax.sh
fi
echo "== installed"
