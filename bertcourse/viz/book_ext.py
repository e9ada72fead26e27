"""Sphinx extension for the bertcourse book (loaded by `_config.yml`, `sphinx.local_extensions`).

It is imported by Sphinx as the top-level module `book_ext` (its folder is put on `sys.path`),
so it must not import bertcourse or torch: a broken package must still give a readable build log.

Two jobs:

1. Key the execution cache to the package source. jupyter-cache re-executes a page only when the
   page's own code changes; an edit to `bertcourse/*.py` would leave stale outputs. On
   `config-inited` this sets `nb_execution_cache_path` to `_build/.jupyter_cache/<hash>`, where
   `<hash>` is a SHA-256 of every `bertcourse/**/*.py` (path and content). A package edit gives a
   new, empty cache folder, so every executed page runs again; the changed config value also
   makes Sphinx re-read every page. Folders of older hashes are deleted.
2. Fail early, with the fix named, when the offline MathJax copy is missing.
3. Point the launch buttons (JupyterLab/Binder, Colab) of a chapter at its exercise notebook:
   a page whose front matter has `exercise: exercises/chNN_topic/name.ipynb` gets launch links
   to that notebook instead of to the chapter's own MyST source (Colab cannot open .md).
4. Keep pages free of console errors: sphinx-thebe (always loaded by Jupyter Book 1) declares
   `const THEBE_JS_URL` twice in every page (a SyntaxError in the browser) and points at
   unpkg.com. Live code (thebe) is off in `_config.yml`, so its scripts are dropped from pages.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

PACKAGE = "bertcourse"
MATHJAX_FILE = "mathjax/tex-mml-chtml.js"
_HASH_DIR = re.compile(r"^[0-9a-f]{16}$")


def package_hash(root: Path, package: str = PACKAGE) -> str:
    """SHA-256 (first 16 hex digits) of every `<package>/**/*.py` below `root`."""
    pkg = root / package
    if not pkg.is_dir():
        raise ExtensionError(f"book_ext: package folder {pkg} not found; build from the repo root")
    digest = hashlib.sha256()
    for path in sorted(pkg.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _key_cache_to_package(app: Sphinx, config: Config) -> None:
    root = Path(app.srcdir)
    key = package_hash(root)
    base = config.nb_execution_cache_path
    base = Path(base) if base else Path(app.outdir).parent / ".jupyter_cache"
    if not base.is_absolute():
        base = root / base
    cache = base / key
    if base.is_dir():
        for old in base.iterdir():
            if old.is_dir() and _HASH_DIR.match(old.name) and old.name != key:
                shutil.rmtree(old, ignore_errors=True)
                logger.info(f"book_ext: removed execution cache of an older package: {old}")
    config.nb_execution_cache_path = str(cache)
    logger.info(f"book_ext: execution cache keyed to {PACKAGE} source hash {key}: {cache}")


def _check_mathjax(app: Sphinx) -> None:
    if app.builder.format != "html":
        return
    config = app.config
    root = Path(app.srcdir)
    for extra in config.html_extra_path:
        candidate = root / extra / MATHJAX_FILE
        if candidate.is_file():
            return
    raise ExtensionError(
        f"book_ext: offline MathJax not found ({MATHJAX_FILE} in html_extra_path "
        f"{list(config.html_extra_path)}); run `bash scripts/install_mathjax.sh` first"
    )


def _drop_thebe(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    if app.config.html_theme_options.get("launch_buttons", {}).get("thebe"):
        return
    scripts = context.get("script_files")
    if scripts is None:
        return
    kept = []
    for script in scripts:
        name = str(getattr(script, "filename", script) or "")
        body = str(getattr(script, "attributes", {}).get("body", ""))
        if "sphinx-thebe" in name or "THEBE_JS_URL" in body:
            continue
        kept.append(script)
    context["script_files"] = kept


def _launch_exercise(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    exercise = app.env.metadata.get(pagename, {}).get("exercise")
    source = Path(app.env.doc2path(pagename, base=False)).as_posix()
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        buttons = group.get("buttons", [])
        if exercise:
            for button in buttons:
                if source in button.get("url", ""):
                    button["url"] = button["url"].replace(source, exercise)
                    button["tooltip"] = f"{button.get('tooltip', 'Launch')}: the exercise notebook"
        elif source.endswith(".md"):
            # Colab opens .ipynb files only: no button rather than a broken one
            group["buttons"] = [b for b in buttons if "colab." not in b.get("url", "")]


def setup(app: Sphinx) -> dict:
    # priority < 500: run before myst-nb reads its configuration on builder-inited.
    app.connect("config-inited", _key_cache_to_package, priority=400)
    app.connect("builder-inited", _check_mathjax)
    app.connect("html-page-context", _drop_thebe)
    # after sphinx-book-theme's add_launch_buttons (priority 501)
    app.connect("html-page-context", _launch_exercise, priority=502)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
