"""Sphinx extension for the bertcourse book (loaded by `_config.yml`, `sphinx.local_extensions`).

It is imported by Sphinx as the top-level module `book_ext` (its folder is put on `sys.path`),
so it must not import bertcourse or torch: a broken package must still give a readable build log.

Four jobs:

1. Key the execution cache to the package source. jupyter-cache re-executes a page only when the
   page's own code changes; an edit to `bertcourse/*.py` would leave stale outputs. On
   `config-inited` this sets `nb_execution_cache_path` to `_build/.jupyter_cache/<hash>`, where
   `<hash>` is a SHA-256 of every `bertcourse/**/*.py` (path and content). A package edit gives a
   new, empty cache folder, so every executed page runs again; the changed config value also
   makes Sphinx re-read every page. Folders of older hashes are deleted.
2. Serve MathJax from the site, offline, with nothing but Python packages: on `config-inited`
   the three pieces of MathJax 3.2.2 the pages need (the combined `tex-mml-chtml.js`, its woff-v2
   fonts and the TeX extensions it may lazy-load) are copied from the installed PyPI package
   `django-static-mathjax` into `_mathjax/site/mathjax/` (`bertcourse_mathjax_site`), which
   `_config.yml` publishes with `html_extra_path`. No node, npm or root. A missing package fails
   the build with the `pip install` line that fixes it. `scripts/install_mathjax.sh` runs the same
   copy (`python bertcourse/viz/book_ext.py install-mathjax`).
3. Point the launch buttons (JupyterLab/Binder, Colab) of a chapter at its exercise notebook:
   a page whose front matter has `exercise: exercises/chNN_topic/name.ipynb` gets launch links
   to that notebook instead of to the chapter's own MyST source (Colab cannot open .md).
4. Keep pages free of console errors: sphinx-thebe (always loaded by Jupyter Book 1) declares
   `const THEBE_JS_URL` twice in every page (a SyntaxError in the browser) and points at
   unpkg.com. Live code (thebe) is off in `_config.yml`, so its scripts are dropped from pages.
5. Failures are loud and not remembered. jupyter-cache stores only successful executions (myst-nb
   `core/execute/cache.py` caches a notebook only when `result.err is None`), but Sphinx keeps
   every page it has read, failed or not, in `environment.pickle` and reads a page again only
   when its source changes: a second build reported "build succeeded" and showed the failed
   page's traceback. So a page whose execution failed is always read (and executed) again
   (`env-get-outdated`), and after a build with warnings the saved environment is deleted, as
   Sphinx itself does after an exception, so the next build reads every page again (from the
   execution cache where it succeeded) and reports every warning again.
6. One thread per kernel: `OMP_NUM_THREADS=1` (and MKL's) is set for the kernels the build
   starts, so no page oversubscribes a busy machine's cores; a page that measures threads sets
   them itself with `torch.set_num_threads`.
7. Pages execute side by side. myst-nb executes each page when Sphinx reads it, one after
   another, so a 2-core machine ran one single-threaded kernel at a time. On
   `env-before-read-docs` the pages about to be read whose code is not in the execution cache
   run first, `BERTCOURSE_BUILD_JOBS` at a time (default: the CPU count, at most 4), each in
   its own process exactly as myst-nb's cache client runs it (`single_nb_execution`, the same
   notebook, working folder, timeout and error rule), and each success is stored in the cache
   as myst-nb stores it. Sphinx then reads every page from the cache. A page that fails here is
   not stored: Sphinx's read executes it again and reports it as before (5.).

`python bertcourse/viz/book_ext.py summary LOG` (scripts/build_book.sh) reads a build's log and
prints one line: the first problem, naming the page, the cell and the error.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from sphinx.application import ENV_PICKLE_FILENAME, Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

PACKAGE = "bertcourse"
# MathJax from PyPI: django-static-mathjax 3.2.2.1 ships MathJax 3.2.2 (npm's `mathjax-full`) as
# package data under mathjax/static/mathjax/; its es5/ folder is the browser build.
MATHJAX_DIST = "django-static-mathjax"
MATHJAX_PIN = "django-static-mathjax==3.2.2.1"
MATHJAX_VERSION = "3.2.2"
MATHJAX_ES5 = "mathjax/static/mathjax/es5"
# the parts of es5/ the pages load: the combined component, its fonts, TeX extensions on demand
MATHJAX_PARTS = ("tex-mml-chtml.js", "output/chtml/fonts/woff-v2", "input/tex/extensions")
MATHJAX_FILE = "mathjax/tex-mml-chtml.js"  # relative to the html_extra_path folder
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


class MathJaxCopy(NamedTuple):
    """Where MathJax was copied, from which package folder, and whether anything was copied.

    (A NamedTuple, not a dataclass: Sphinx and the tests load this file outside a package.)
    """

    dest: Path  # .../mathjax, served as <site>/mathjax/tex-mml-chtml.js
    source: Path  # the es5/ folder inside the installed django-static-mathjax
    version: str
    copied: bool  # False when `dest` already held exactly these files


class MathJaxError(RuntimeError):
    """The offline MathJax copy cannot be made (package missing, wrong version, incomplete)."""


def mathjax_source() -> tuple[Path, str]:
    """The es5/ folder of MathJax in the installed django-static-mathjax, and its version."""
    try:
        dist = importlib.metadata.distribution(MATHJAX_DIST)
    except importlib.metadata.PackageNotFoundError:
        raise MathJaxError(
            f"the offline MathJax comes from the PyPI package {MATHJAX_DIST}, which is not "
            f"installed in {sys.prefix}: run `python -m pip install {MATHJAX_PIN}` "
            "(or `bash scripts/install.sh`)"
        ) from None
    es5 = Path(dist.locate_file(MATHJAX_ES5))
    package_json = es5.parent / "package.json"
    if not package_json.is_file():
        raise MathJaxError(f"{MATHJAX_DIST} {dist.version}: no {package_json}; reinstall it")
    version = json.loads(package_json.read_text(encoding="utf-8"))["version"]
    if version != MATHJAX_VERSION:
        raise MathJaxError(
            f"{MATHJAX_DIST} {dist.version} holds MathJax {version}, the book needs "
            f"{MATHJAX_VERSION}: run `python -m pip install {MATHJAX_PIN}`"
        )
    return es5, version


def _files(folder: Path, part: str) -> dict[str, int]:
    """Relative path -> size of the file `part` or of every file below the folder `part`."""
    path = folder / part
    if path.is_file():
        return {part: path.stat().st_size}
    return {
        p.relative_to(folder).as_posix(): p.stat().st_size
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def mathjax_files(folder: Path) -> dict[str, int]:
    """Every file of MATHJAX_PARTS below `folder` (an es5/ folder or a copy), with its size."""
    out: dict[str, int] = {}
    for part in MATHJAX_PARTS:
        out.update(_files(folder, part))
    return out


def install_mathjax(site: Path) -> MathJaxCopy:
    """Copy MATHJAX_PARTS from the installed package into `site`/mathjax (idempotent).

    The copy is made in a temporary sibling folder and renamed into place, so an interrupted
    run never leaves a half copy that looks complete. When `site`/mathjax already holds the
    same files (names and sizes) nothing is copied.
    """
    source, version = mathjax_source()
    wanted = mathjax_files(source)
    if not wanted.get("tex-mml-chtml.js") or not any("woff-v2/" in f for f in wanted):
        raise MathJaxError(f"{source} lacks tex-mml-chtml.js or its woff-v2 fonts")
    dest = site / "mathjax"
    if dest.is_dir() and mathjax_files(dest) == wanted:
        return MathJaxCopy(dest, source, version, copied=False)
    site.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".mathjax-", dir=site))  # one per process (pytest -n 2)
    tmp.chmod(0o755)  # mkdtemp makes it 0700
    try:
        for part in MATHJAX_PARTS:
            src, out = source / part, tmp / part
            out.parent.mkdir(parents=True, exist_ok=True)
            if src.is_file():
                shutil.copy2(src, out)
            else:
                shutil.copytree(src, out)
        shutil.rmtree(dest, ignore_errors=True)
        try:
            tmp.rename(dest)
        except OSError:  # another process put its (identical) copy there first
            if mathjax_files(dest) != wanted:
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return MathJaxCopy(dest, source, version, copied=True)


def _provide_mathjax(app: Sphinx, config: Config) -> None:
    root = Path(app.srcdir)
    site = Path(config.bertcourse_mathjax_site)
    extra = [Path(p) for p in config.html_extra_path]
    if site not in extra:
        raise ExtensionError(
            f"book_ext: the offline MathJax folder {site} is not in html_extra_path {extra}; "
            f"add it there (and set mathjax_path: ../{MATHJAX_FILE})"
        )
    try:
        copy = install_mathjax(root / site)
    except MathJaxError as err:
        raise ExtensionError(f"book_ext: {err}") from None
    if copy.copied:
        logger.info(f"book_ext: MathJax {copy.version} copied from {copy.source} to {copy.dest}")


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


# --- 5. failures are not remembered ---------------------------------------------------------


def failed_pages(env) -> list[str]:
    """Pages whose last execution failed, as myst-nb recorded it (`exec_data["succeeded"]`)."""
    metadata = getattr(env, "nb_metadata", {}) or {}
    return sorted(
        doc
        for doc, data in metadata.items()
        if (data.get("exec_data") or {}).get("succeeded") is False
    )


def _reread_failed_pages(app: Sphinx, env, added, changed, removed) -> list[str]:
    pages = [doc for doc in failed_pages(env) if doc in env.found_docs and doc not in removed]
    if pages:
        logger.info(f"book_ext: executing again the pages that failed last time: {pages}")
    return pages


def _forget_a_build_with_warnings(app: Sphinx, exception: Exception | None) -> None:
    """After warnings, delete the saved environment: the next build reads every page again.

    (Sphinx does this after an exception; with `-W --keep-going` warnings are no exception.)
    """
    if not getattr(app, "_warncount", 0):
        return
    envfile = Path(app.doctreedir) / ENV_PICKLE_FILENAME
    if envfile.is_file():
        envfile.unlink()
        logger.info("book_ext: the build had warnings: the next build reads every page again")


# --- 6. one thread per kernel ----------------------------------------------------------------

ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _one_thread_per_kernel(app: Sphinx, config: Config) -> None:
    os.environ.update(ONE_THREAD)  # inherited by the kernels jupyter-cache starts


# --- 7. pages execute side by side -----------------------------------------------------------

MAX_JOBS = 4  # kernels at once by default (each page's kernel can take ~1 GB)


def build_jobs() -> int:
    """How many pages execute at once: BERTCOURSE_BUILD_JOBS, else the CPUs (at most MAX_JOBS)."""
    value = os.environ.get("BERTCOURSE_BUILD_JOBS", "")
    if not value:
        return max(1, min(MAX_JOBS, os.cpu_count() or 1))
    if not value.isdigit() or int(value) < 1:
        raise ExtensionError(f"BERTCOURSE_BUILD_JOBS must be a whole number >= 1, got {value!r}")
    return int(value)


def _execute_page(notebook_json: str, cwd: str, timeout, allow_errors: bool) -> tuple[str, str | None, float]:  # fmt: skip
    """One page, in a worker process, as myst-nb's cache client executes it:
    (the executed notebook, the error or None, seconds)."""
    import nbformat
    from kernels_ext import single_nb_execution  # jupyter-cache's, the kernel over IPC

    notebook = nbformat.reads(notebook_json, as_version=4)
    result = single_nb_execution(notebook, cwd=cwd, timeout=timeout, allow_errors=allow_errors,
                                 meta_override=True)  # fmt: skip
    error = None if result.err is None else f"{type(result.err).__name__}: {result.err}"
    return nbformat.writes(notebook), error, result.time


def _pages_to_execute(env, docnames) -> list[tuple[str, Path, object, dict | None]]:
    """(docname, path, notebook, read format) of each page to be read that has code cells and
    no match in the execution cache."""
    from jupyter_cache import get_cache
    from myst_nb.core.read import create_nb_reader

    cache = get_cache(env.mystnb_config.execution_cache_path or ".jupyter_cache")
    todo = []
    for docname in sorted(docnames):
        path = Path(env.doc2path(docname))
        if not path.is_file() or any(
            PurePosixPath(path.as_posix()).match(pattern)
            for pattern in env.mystnb_config.execution_excludepatterns
        ):  # myst-nb does not execute an excluded page: neither does this
            continue
        text = path.read_text(encoding="utf-8")
        if env.config.language and env.config.language != "en":  # as Sphinx will read it
            from i18n_ext import figure_language_cell  # (the other local extension)

            text = figure_language_cell(text, env.config.language)
        reader = create_nb_reader(str(path), env.myst_config, env.mystnb_config, text)
        if reader is None:
            continue
        notebook = reader.read(text)
        if not any(c.cell_type == "code" for c in notebook.cells):
            continue
        try:
            cache.match_cache_notebook(notebook)
            continue  # cached: Sphinx's read takes it from there
        except KeyError:
            todo.append((docname, path, notebook, reader.read_fmt))
    return todo


def _execute_pages_side_by_side(app: Sphinx, env, docnames: list[str]) -> None:
    config = env.mystnb_config
    jobs = build_jobs()
    if config.execution_mode != "cache" or config.execution_in_temp or jobs < 2:
        return
    todo = _pages_to_execute(env, docnames)
    if len(todo) < 2:
        return
    import concurrent.futures
    import multiprocessing
    import time

    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    from jupyter_cache.cache.db import NbProjectRecord

    cache = get_cache(config.execution_cache_path or ".jupyter_cache")
    logger.info(f"book_ext: executing {len(todo)} pages, {jobs} at a time")
    start = time.monotonic()
    context = multiprocessing.get_context("spawn")  # no fork of a threaded Sphinx process
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
        futures = {
            pool.submit(_execute_page, nbformat.writes(nb), str(path.parent),
                        config.execution_timeout, config.execution_allow_errors): (doc, path, nb, fmt)
            for doc, path, nb, fmt in todo
        }  # fmt: skip
        for future in concurrent.futures.as_completed(futures):
            docname, path, notebook, read_fmt = futures[future]
            try:
                executed, error, seconds = future.result()
            except Exception as e:  # a worker that died: Sphinx's read executes the page
                executed, error, seconds = None, f"{type(e).__name__}: {e}", 0.0
            if error is not None:
                logger.info(f"book_ext: {docname} failed ({error}); Sphinx runs it again")
                continue
            stage = cache.add_nb_to_project(str(path), read_data=read_fmt) if read_fmt else cache.add_nb_to_project(str(path))  # fmt: skip
            NbProjectRecord.remove_tracebacks([stage.pk], cache.db)
            bundle = CacheBundleIn(nbformat.reads(executed, as_version=4), stage.uri,
                                   data={"execution_seconds": seconds})  # fmt: skip
            cache.cache_notebook_bundle(bundle, check_validity=False, overwrite=True)
            logger.info(f"book_ext: executed {docname} in {seconds:.1f} s")
    logger.info(f"book_ext: {len(todo)} pages executed in {time.monotonic() - start:.0f} s")


def setup(app: Sphinx) -> dict:
    # priority < 500: run before myst-nb reads its configuration on builder-inited.
    app.connect("config-inited", _key_cache_to_package, priority=400)
    app.add_config_value("bertcourse_mathjax_site", "_mathjax/site", "env", [str])
    # before Sphinx drops html_extra_path entries that do not exist (priority 800)
    app.connect("config-inited", _provide_mathjax, priority=400)
    app.connect("html-page-context", _drop_thebe)
    # after sphinx-book-theme's add_launch_buttons (priority 501)
    app.connect("html-page-context", _launch_exercise, priority=502)
    app.connect("config-inited", _one_thread_per_kernel)
    app.connect("env-get-outdated", _reread_failed_pages)
    app.connect("env-before-read-docs", _execute_pages_side_by_side)
    app.connect("build-finished", _forget_a_build_with_warnings)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}


# --- the one-line summary of a failed build (scripts/build_book.sh) ---------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Sphinx: "<file>[:<line>]: WARNING: <message> [<type>]", the message possibly over many lines
_WARNING = re.compile(r"^(?:(?P<file>\S[^:]*?)(?::(?P<line>\d+))?: )?(?:WARNING|ERROR|CRITICAL): ")
_CODE_CELL = re.compile(r"^(`{3,}|~{3,})\{code-cell\}")
_EXCEPTION = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception|Interrupt|Exit))(?::\s*(.*))?$")


class Problem(NamedTuple):
    """One warning or error of a build log."""

    page: str | None  # the file, relative to the book's root when it is inside it
    line: int | None
    message: str  # the whole message, over all its lines


class FailedCell(NamedTuple):
    """The cell of an executed notebook that failed, numbered as a reader counts them."""

    number: int  # 1-based, among the page's code cells
    line: int | None  # where its ```{code-cell} starts in the MyST source
    error: str  # "ValueError: the flag file is missing"


def build_problems(log: str, root: Path) -> list[Problem]:
    """Every WARNING/ERROR of a Sphinx/jupyter-book log, in order, with its page and line."""
    problems: list[Problem] = []
    current: list[str] | None = None
    where: tuple[str | None, int | None] = (None, None)

    def close() -> None:
        if current is not None:
            text = "\n".join(current).strip()
            text = re.sub(r"\s*\[[\w.]+\]$", "", text)  # the warning type, e.g. [mystnb.exec]
            problems.append(Problem(where[0], where[1], text))

    for raw in _ANSI.sub("", log).splitlines():
        m = _WARNING.match(raw)
        if m:
            close()
            page = m.group("file")
            if page:
                path = Path(page)
                if path.is_absolute() and path.is_relative_to(root):
                    page = path.relative_to(root).as_posix()
            where = (page, int(m.group("line")) if m.group("line") else None)
            current = [raw[m.end() :]]
        elif current is not None:
            # a multi-line message (a traceback) goes on until a line of Sphinx's own
            if raw.startswith(
                ("looking for now-outdated", "pickling environment", "reading sources")
            ):
                close()
                current = None
            else:
                current.append(raw)
                if re.search(r"\[[\w.]+\]$", raw):
                    close()
                    current = None
    close()
    # myst-nb's second line about a failure (where it saved the traceback) is no problem of its own
    return [p for p in problems if not p.message.startswith("Notebook exception traceback saved")]


def failed_cell(notebook: dict, source: str | None = None) -> FailedCell | None:
    """The first code cell with an error output (not tagged `raises-exception`), else the last
    cell that started to run (a time-out or a dead kernel leaves no error output)."""
    code = [c for c in notebook.get("cells", []) if c.get("cell_type") == "code"]
    fences = [i + 1 for i, ln in enumerate((source or "").splitlines()) if _CODE_CELL.match(ln)]
    found = None
    for number, cell in enumerate(code, 1):
        if "raises-exception" in cell.get("metadata", {}).get("tags", []):
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if errors:
            evalue = (errors[0].get("evalue") or "").strip().splitlines()
            found = (number, f"{errors[0].get('ename')}: {evalue[0] if evalue else ''}".strip(": "))
            break
        if cell.get("execution_count") is not None:
            found = (number, "")
    if found is None:
        return None
    number, error = found
    line = fences[number - 1] if len(fences) >= number else None
    return FailedCell(number, line, error)


def _execution_error(message: str) -> str:
    """ "CellTimeoutError: a cell timed out after 600 s" from myst-nb's failure message."""
    kind = re.match(r"Executing notebook failed: (\w+)", message)
    kind_name = kind.group(1) if kind else "execution failed"
    timed_out = re.search(r"timed out while it was being executed, after (\d+) seconds", message)
    if timed_out:
        return f"{kind_name}: a cell ran longer than the {timed_out.group(1)} s cell limit"
    for line in reversed(message.splitlines()):
        m = _EXCEPTION.match(line.strip())
        if m and m.group(1) != kind_name:
            return f"{m.group(1)}: {m.group(2) or ''}".strip(": ")
    return kind_name


def build_summary(log: str, root: Path, build_dir: Path) -> str:
    """One line naming the first problem of a failed build: page, cell and error."""
    problems = build_problems(log, root)
    if not problems:
        lines = [ln.strip() for ln in _ANSI.sub("", log).splitlines() if ln.strip()]
        errors = [ln for ln in lines if _EXCEPTION.match(ln)]
        last = errors[-1] if errors else (lines[-1] if lines else "no output")
        return f"the build failed without a warning; its last error: {last[:300]}"
    first = next((p for p in problems if p.message.startswith("Executing notebook")), problems[0])
    more = f" (and {len(problems) - 1} more above)" if len(problems) > 1 else ""
    where = first.page or "the build"
    if first.message.startswith("Executing notebook") and first.page:
        page = Path(first.page)
        executed = build_dir / "jupyter_execute" / page.with_suffix(".ipynb")
        source = root / page
        cell = None
        if executed.is_file():
            cell = failed_cell(
                json.loads(executed.read_text(encoding="utf-8")),
                source.read_text(encoding="utf-8") if source.is_file() else None,
            )
        error = _execution_error(first.message)
        if cell is not None:
            at = f", line {cell.line}" if cell.line else ""
            error = cell.error if cell.error and "timed out" not in first.message else error
            return f"{where}{at} (code cell {cell.number}): {error}{more}"
        return f"{where}: {error}{more}"
    at = f", line {first.line}" if first.line else ""
    text = first.message.strip().splitlines()[0] if first.message.strip() else "a warning"
    return f"{where}{at}: {text[:300]}{more}"


def main(argv: list[str] | None = None) -> int:
    """`python bertcourse/viz/book_ext.py install-mathjax [SITE]` (scripts/install_mathjax.sh),
    `python bertcourse/viz/book_ext.py summary LOG [--root .] [--build _build]` (build_book.sh)."""
    parser = argparse.ArgumentParser(description="Tools of the bertcourse book extension.")
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("install-mathjax", help=install_mathjax.__doc__.splitlines()[0])
    cmd.add_argument("site", nargs="?", type=Path, default=Path("_mathjax/site"))
    summary = sub.add_parser("summary", help=build_summary.__doc__.splitlines()[0])
    summary.add_argument("log", type=Path)
    summary.add_argument("--root", type=Path, default=Path("."))
    summary.add_argument("--build", type=Path, default=Path("_build"))
    args = parser.parse_args(argv)
    if args.command == "summary":
        log = args.log.read_text(encoding="utf-8", errors="replace")
        print(build_summary(log, args.root.resolve(), args.build))
        return 0
    try:
        copy = install_mathjax(args.site)
    except MathJaxError as err:
        print(f"install-mathjax: {err}", file=sys.stderr)
        return 1
    n = len(mathjax_files(copy.dest))
    what = "copied" if copy.copied else "already"
    print(f"== MathJax {copy.version}: {what} in {copy.dest} ({n} files, from {copy.source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
