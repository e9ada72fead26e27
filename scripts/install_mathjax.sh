#!/usr/bin/env bash
# Copy MathJax 3.2.2 for the offline website from the PyPI package django-static-mathjax
# (requirements.txt; no node, npm or root).
#
# The three pieces the pages need (the combined tex-mml-chtml.js, its woff-v2 fonts and the TeX
# extensions it may lazy-load) go to _mathjax/site/mathjax/ (git-ignored), which _config.yml
# publishes with `html_extra_path`, so the built site serves _build/html/mathjax/tex-mml-chtml.js.
# (Not under book/_static: Sphinx would inject every .js found there into each page.)
# The book build makes the same copy itself (bertcourse/viz/book_ext.py, `install_mathjax`);
# this script is for scripts/install.sh. Idempotent: an identical copy is left as it is.
#
# Uses $BERTCOURSE_PYTHON (set by scripts/install.sh), else the python3 on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${BERTCOURSE_PYTHON:-python3}" bertcourse/viz/book_ext.py install-mathjax _mathjax/site
