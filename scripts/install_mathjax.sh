#!/usr/bin/env bash
# Install an offline copy of MathJax 3 for the book.
#
# `npm install mathjax@3` goes into _mathjax/npm (git-ignored); the three pieces the page needs
# (the combined tex-mml-chtml.js, its woff-v2 fonts and the TeX extensions it may lazy-load) are
# copied into _mathjax/site/mathjax/, which _config.yml publishes with `html_extra_path`, so the
# built site serves MathJax itself at _build/html/mathjax/tex-mml-chtml.js.
# (Not under book/_static: Sphinx would inject every .js found there into each page.)
# Idempotent: when the copy is complete it exits at once.
set -euo pipefail
cd "$(dirname "$0")/.."

dest=_mathjax/site/mathjax
if [ -f "$dest/tex-mml-chtml.js" ] && [ -d "$dest/output/chtml/fonts/woff-v2" ] \
  && [ -d "$dest/input/tex/extensions" ]; then
  echo "== MathJax already in $dest"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "install_mathjax.sh: npm not found; install it (apt-get install -y npm) and run again" >&2
  exit 1
fi

echo "== npm install mathjax@3 into _mathjax/npm"
mkdir -p _mathjax/npm
npm install --prefix _mathjax/npm --no-audit --no-fund --silent mathjax@3 >/dev/null
src=_mathjax/npm/node_modules/mathjax/es5
if [ ! -f "$src/tex-mml-chtml.js" ]; then
  echo "install_mathjax.sh: $src/tex-mml-chtml.js missing after npm install" >&2
  exit 1
fi

rm -rf "$dest.tmp"
mkdir -p "$dest.tmp/output/chtml/fonts" "$dest.tmp/input/tex"
cp "$src/tex-mml-chtml.js" "$dest.tmp/"
cp -r "$src/output/chtml/fonts/woff-v2" "$dest.tmp/output/chtml/fonts/"
cp -r "$src/input/tex/extensions" "$dest.tmp/input/tex/"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "== MathJax $(node -p "require('./_mathjax/npm/node_modules/mathjax/package.json').version" 2>/dev/null || echo 3) copied to $dest"
