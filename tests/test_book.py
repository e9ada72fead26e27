"""The website: built from clean with warnings as errors, fully offline, rendered by Chromium.

`test_book_builds_on_a_busy_machine_offline_and_renders` is the CI check of issues 4 and 21: one
test (so that pytest-xdist never builds the book twice) that builds into a fresh temporary folder
with `jupyter-book build -W -n --keep-going` (every page executed, a warning fails) while two
CPU-bound processes run beside it (no page may depend on the machine's speed), checks that no
page shows an error output, scans the HTML for assets loaded from the internet, then opens every
page in headless Chromium (scripts/check_site.py): MathJax rendered without errors, images
loaded, no console errors. Screenshots of every page go to _build/screenshots/.

`test_a_failed_page_fails_every_build_until_it_is_fixed` builds a two-page book three times:
a page that raised fails the build, is executed again on the next run (and fails it again), and
the build's one-line summary names its page, cell and error.

The other tests show that the checks themselves can fail.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "_build" / "screenshots"
MATHJAX_SITE = ROOT / "_mathjax" / "site"
JUPYTER_BOOK = "import sys; from jupyter_book.cli.main import main; sys.exit(main())"
# the goal is 3 minutes idle (a measurement, README); this only stops a hung build
BUILD_TIMEOUT_S = 1500
BUSY_PROCESSES = 2  # CPU-bound processes beside the build (issue 21: a busy 2-core machine)
# scripts/test.sh runs the busy build beside the rest of the suite, whose two pytest workers are
# CPU-bound processes too: then one burner is enough, and the measured load says so
BESIDE_SUITE = os.environ.get("BERTCOURSE_BUILD_BESIDE_SUITE") == "1"
PAGE_BUDGET_S = 60  # every page, on an idle 2-core machine

# chapter page -> its exercise notebook (issue 4: each chapter links to it)
EXERCISES = {
    "ch00_tokenization": "exercises/ch00_tokenization/tokenization.ipynb",
    "ch01_attention": "exercises/ch01_attention/attention.ipynb",
    "ch02_masks": "exercises/ch02_masks/masks.ipynb",
    "ch03_mlm": "exercises/ch03_mlm/mlm.ipynb",
    "ch04_loss": "exercises/ch04_loss/loss.ipynb",
    "ch05_nsp": "exercises/ch05_nsp/nsp.ipynb",
    "ch06_adam": "exercises/ch06_adam/adam.ipynb",
    "ch07_model": "exercises/ch07_assembly/assembly.ipynb",
    "ch08_finetuning": "exercises/ch08_finetuning/finetuning.ipynb",
    "ch09_chinese": "exercises/ch09_chinese/chinese.ipynb",
    "ch10_ablations": "exercises/ch10_ablations/ablations.ipynb",
}


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_site = _load("check_site", ROOT / "scripts" / "check_site.py")


def _toc_pages() -> list[str]:
    """Every `file:`/`root:` entry of _toc.yml (without suffix)."""
    text = (ROOT / "_toc.yml").read_text()
    return re.findall(r"^\s*(?:-\s*)?(?:file|root):\s*(\S+)", text, flags=re.MULTILINE)


def _ensure_mathjax() -> None:
    """The offline MathJax, copied from the PyPI package django-static-mathjax (no npm)."""
    _load("book_ext", ROOT / "bertcourse" / "viz" / "book_ext.py").install_mathjax(MATHJAX_SITE)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        TOKENIZERS_PARALLELISM="false",
        PYDEVD_DISABLE_FILE_VALIDATION="1",
    )
    return env


def _build(source: Path, out: Path, timeout: float = BUILD_TIMEOUT_S):
    return subprocess.run(
        [sys.executable, "-c", JUPYTER_BOOK, "build", "-W", "-n", "--keep-going"]
        + ["--path-output", str(out), str(source)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=timeout,
        cwd=source,
    )


class _Runnable(threading.Thread):
    """Samples the number of runnable processes (/proc/loadavg's 4th field, less this sampler)
    every second until stopped: how many compete for the CPUs while the book builds."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[int] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(1.0):
            running = Path("/proc/loadavg").read_text().split()[3].split("/")[0]
            self.samples.append(int(running) - 1)

    def stop(self) -> float:
        self._stop_event.set()
        self.join()
        return sum(self.samples) / max(1, len(self.samples))


def _busy(n: int) -> list[subprocess.Popen]:
    """`n` CPU-bound processes, each keeping one core busy until killed or until this process
    ends (a test run cut short by `timeout` or Ctrl-C runs no `finally`: the burners notice that
    their parent changed and stop, rather than spinning on for hours)."""
    burn = f"import os\nwhile os.getppid() == {os.getpid()}: pass"
    return [
        subprocess.Popen(
            [sys.executable, "-c", burn],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        for _ in range(n)
    ]


def test_burners_stop_when_the_test_run_that_started_them_is_killed() -> None:
    # a parent that starts a burner and dies without cleaning up (as pytest under `timeout`)
    code = (f"import os, sys; sys.path.insert(0, {str(ROOT)!r}); from tests.test_book import _busy; "
            "print(_busy(1)[0].pid, flush=True); os._exit(0)")  # fmt: skip
    pid = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, timeout=120).stdout.split()[-1])  # fmt: skip
    deadline = time.monotonic() + 30  # the burner checks its parent on every loop
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except FileNotFoundError:
            return  # gone, and reaped
        if state == "Z":
            return  # exited; its new parent has not reaped it yet
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    raise AssertionError(f"burner {pid} still spinning 30 s after its parent died")


def test_book_builds_on_a_busy_machine_offline_and_renders(tmp_path: Path) -> None:
    _ensure_mathjax()
    out = tmp_path / "book"
    burners = _busy(1 if BESIDE_SUITE else BUSY_PROCESSES)
    runnable = _Runnable()
    runnable.start()
    t0 = time.monotonic()
    try:
        proc = _build(ROOT, out)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
        competing = runnable.stop()
    build_s = time.monotonic() - t0
    assert all(b.returncode is not None for b in burners)
    # the build itself and at least BUSY_PROCESSES others wanted the 2 cores, on average
    assert competing >= 1 + BUSY_PROCESSES, (
        f"only {competing:.1f} runnable processes on average during the build: not busy enough "
        f"to prove anything ({len(burners)} burners, beside the suite: {BESIDE_SUITE})"
    )
    log = proc.stdout + proc.stderr
    warnings = [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line]
    assert proc.returncode == 0, (
        f"jupyter-book build -W -n failed (exit {proc.returncode}) after {build_s:.0f} s.\n"
        + "\n".join(warnings[:40])
        + "\n--- end of log ---\n"
        + log[-6000:]
    )
    assert TCP_WARNING not in log  # the pages' kernels run over IPC (kernels_ext)
    html = out / "_build" / "html"
    assert check_site.find_error_outputs(html) == []
    for page in _toc_pages():
        assert (html / f"{page}.html").is_file(), f"{page} is in _toc.yml but was not built"

    # Each chapter links to its exercise notebook (a GitHub/Binder/Colab URL).
    for chapter, notebook in EXERCISES.items():
        text = (html / "book" / f"{chapter}.html").read_text(encoding="utf-8")
        assert notebook in text, f"book/{chapter} does not link to its exercise {notebook}"

    # Offline: MathJax is served by the site, and nothing is loaded from the internet.
    assert (html / "mathjax" / "tex-mml-chtml.js").is_file(), "MathJax not copied into the site"
    assert check_site.find_external_assets(html) == []

    t1 = time.monotonic()
    problems = check_site.browser_check(html, SCREENSHOTS)
    browser_s = time.monotonic() - t1
    print(
        f"book build {build_s:.0f} s with {competing:.1f} runnable processes on average "
        f"({len(burners)} burners{', beside the suite' if BESIDE_SUITE else ''}), "
        f"browser check {browser_s:.0f} s"
    )
    assert problems == [], "\n".join(problems)
    for chapter in EXERCISES:
        shot = SCREENSHOTS / f"book__{chapter}.png"
        assert shot.is_file() and shot.stat().st_size > 10_000, f"no screenshot {shot}"


# --- the checks can fail -----------------------------------------------------------------


def test_external_asset_scan_flags_cdn_loads_but_not_hyperlinks(tmp_path: Path) -> None:
    page = """<html><head>
    <script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>
    <link rel="stylesheet" href="//fonts.googleapis.com/css?family=Lato">
    <link rel="next" href="https://example.org/next.html">
    <link rel="stylesheet" href="_static/local.css">
    <style>@import url("https://fonts.example/x.css");</style>
    </head><body>
    <img src="http://example.org/plot.png"><img src="local.png">
    <a href="https://github.com/bertcourse/bertcourse">plain hyperlink: allowed</a>
    </body></html>"""
    (tmp_path / "page.html").write_text(page)
    (tmp_path / "site.css").write_text("body { background: url('https://x.example/bg.png'); }")
    problems = check_site.find_external_assets(tmp_path)
    flagged = " ".join(problems)
    for url in (
        "cdn.jsdelivr.net",
        "fonts.googleapis.com",
        "fonts.example/x.css",
        "example.org/plot.png",
        "x.example/bg.png",
    ):
        assert url in flagged, f"{url} not flagged: {problems}"
    assert "github.com" not in flagged and "next.html" not in flagged
    assert len(problems) == 5


def test_browser_check_finds_raw_tex_broken_images_and_console_errors(tmp_path: Path) -> None:
    _ensure_mathjax()
    shutil.copytree(MATHJAX_SITE / "mathjax", tmp_path / "mathjax")
    # (an inline favicon: otherwise Chromium asks for /favicon.ico, a 404 the check reports)
    good = """<html><head><link rel="icon" href="data:,"><script defer src="mathjax/tex-mml-chtml.js"></script></head><body>
    <p>Inline <span class="math notranslate nohighlight">\\(\\sqrt{d_k}\\)</span>.</p>
    <div class="math notranslate nohighlight">\\[\\mathrm{softmax}(z)_i = e^{z_i}/\\sum_j e^{z_j}\\]</div>
    <pre>$$ inside code is fine $$</pre></body></html>"""
    bad = """<html><head><link rel="icon" href="data:,"></head><body>
    <p>Unrendered: <span class="math notranslate nohighlight">\\(x^2\\)</span> and $$y$$</p>
    <img src="missing.png">
    <script>console.error("boom")</script></body></html>"""
    (tmp_path / "good.html").write_text(good)
    (tmp_path / "bad.html").write_text(bad)
    problems = check_site.browser_check(
        tmp_path, tmp_path / "shots", pages=["good.html", "bad.html"]
    )
    assert not [p for p in problems if p.startswith("good.html")], problems
    bad_problems = "\n".join(p for p in problems if p.startswith("bad.html"))
    assert "math not rendered" in bad_problems
    assert "raw TeX" in bad_problems
    assert "image did not load: missing.png" in bad_problems
    assert "console.error: boom" in bad_problems
    assert (tmp_path / "shots" / "good.png").stat().st_size > 1000


def test_execution_cache_is_keyed_to_the_package_source(tmp_path: Path) -> None:
    pytest.importorskip("sphinx")
    book_ext = _load("book_ext", ROOT / "bertcourse" / "viz" / "book_ext.py")
    pkg = tmp_path / "bertcourse"
    (pkg / "viz" / "__pycache__").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "masks.py").write_text("MIN = 'finfo'\n")
    (pkg / "viz" / "plots.py").write_text("def plot(): ...\n")
    key = book_ext.package_hash(tmp_path)
    (pkg / "viz" / "__pycache__" / "plots.cpython-311.pyc").write_bytes(b"\0")
    (pkg / "notes.txt").write_text("not code")
    assert book_ext.package_hash(tmp_path) == key  # bytecode and non-.py files do not count
    (pkg / "viz" / "plots.py").write_text("def plot(): return 1\n")
    changed = book_ext.package_hash(tmp_path)
    assert changed != key
    (pkg / "masks.py").rename(pkg / "masks2.py")
    assert book_ext.package_hash(tmp_path) not in (key, changed)  # a rename counts too


def test_launch_buttons_open_the_exercise_notebook() -> None:
    pytest.importorskip("sphinx")
    book_ext = _load("book_ext", ROOT / "bertcourse" / "viz" / "book_ext.py")

    class Env:
        metadata = {
            "book/ch01_attention": {"exercise": "exercises/ch01_attention/attention.ipynb"},
            "book/ch09_draft": {},
        }

        def doc2path(self, docname: str, base: bool = True) -> str:
            return f"{docname}.md"

    class App:
        env = Env()

    def context(page: str) -> dict:
        base = "https://github.com/bertcourse/bertcourse/blob/main"
        urls = {
            "Binder": f"https://mybinder.org/v2/gh/bertcourse/bertcourse/main?urlpath=lab/tree/{page}.md",
            "Colab": f"https://colab.research.google.com/github/bertcourse/bertcourse/blob/main/{page}.md",
        }
        buttons = [{"text": k, "tooltip": f"Launch on {k}", "url": u} for k, u in urls.items()]
        return {
            "header_buttons": [
                {"label": "download-buttons", "buttons": [{"url": f"{base}/{page}.md"}]},
                {"label": "launch-buttons", "buttons": buttons},
            ]
        }

    chapter = context("book/ch01_attention")
    book_ext._launch_exercise(App(), "book/ch01_attention", "page.html", chapter, None)
    launch = chapter["header_buttons"][1]["buttons"]
    assert [b["url"].endswith("exercises/ch01_attention/attention.ipynb") for b in launch] == [
        True,
        True,
    ]
    assert chapter["header_buttons"][0]["buttons"][0]["url"].endswith("ch01_attention.md")

    draft = context("book/ch09_draft")  # no exercise: Colab cannot open .md, so no Colab button
    book_ext._launch_exercise(App(), "book/ch09_draft", "page.html", draft, None)
    assert [b["text"] for b in draft["header_buttons"][1]["buttons"]] == ["Binder"]


def test_every_chapter_links_its_exercise_in_jupyterlab() -> None:
    """The learner opens each chapter's exercise in their own JupyterLab (no Binder or Colab:
    bertcourse and the CPU build of torch cannot be installed there), and the site offers no
    launch button that would fail."""
    for page, notebook in EXERCISES.items():
        text = (ROOT / "book" / f"{page}.md").read_text()
        assert f"http://localhost:8888/lab/tree/{notebook}" in text, page
        assert (ROOT / notebook).exists(), notebook
    config = (ROOT / "_config.yml").read_text()
    assert "binderhub_url" not in config and "colab_url" not in config


# --- failures are loud and not remembered (issue 21) ---------------------------------------

# ipykernel 7's warning at each start of a kernel over TCP (bertcourse/viz/kernels_ext.py)
TCP_WARNING = "Kernel is running over TCP"
MINI_CONFIG = """title: mini
only_build_toc_files: true
execute:
  execute_notebooks: cache
  timeout: 600
  allow_errors: false
  stderr_output: warn
sphinx:
  local_extensions:
    book_ext: {ext}
    kernels_ext: {ext}
  config:
    nb_execution_show_tb: true
    html_extra_path: [_mathjax/site]
    mathjax_path: ../mathjax/tex-mml-chtml.js
"""
MINI_PAGE = """---
jupytext:
  text_representation:
    format_name: myst
kernelspec:
  name: python3
  display_name: Python 3
---
# {title}

```{{code-cell}}
import os
threads = os.environ.get("OMP_NUM_THREADS")
```

{body}
"""
FAILING_CELL = """```{{code-cell}}
if not os.path.exists({flag!r}):
    raise ValueError("the flag file is missing")
```"""


def _mini_book(folder: Path, flag: Path) -> Path:
    """A book of two pages: `good` runs, `bad` raises in its 2nd code cell until `flag` exists."""
    (folder / "bertcourse").mkdir(parents=True)  # book_ext keys the cache to this package
    (folder / "bertcourse" / "__init__.py").write_text("")
    ext = ROOT / "bertcourse" / "viz"
    (folder / "_config.yml").write_text(MINI_CONFIG.format(ext=ext))
    (folder / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n  - file: good\n  - file: bad\n"
    )
    (folder / "intro.md").write_text("# Intro\n\nTwo pages.\n")
    (folder / "good.md").write_text(
        MINI_PAGE.format(title="Good", body="```{code-cell}\nassert threads == '1', threads\n```")
    )
    bad = MINI_PAGE.format(title="Bad", body=FAILING_CELL.format(flag=str(flag)))
    (folder / "bad.md").write_text(bad)
    return folder


def test_a_failed_page_fails_every_build_until_it_is_fixed(tmp_path: Path) -> None:
    book_ext = _load("book_ext", ROOT / "bertcourse" / "viz" / "book_ext.py")
    flag = tmp_path / "flag"
    book = _mini_book(tmp_path / "mini", flag)
    out = book / "_build"
    line = next(
        i + 1
        for i, text in enumerate((book / "bad.md").read_text().splitlines())
        if "raise ValueError" in text
    )
    for attempt in (1, 2):  # issue 21: the second run said "build succeeded"
        proc = _build(book, book, timeout=600)
        log = proc.stdout + proc.stderr
        assert proc.returncode == 1, f"build {attempt} passed with a failing page:\n{log[-3000:]}"
        assert "/bad.md: Executing notebook" in log, f"build {attempt} did not execute bad.md"
        summary = book_ext.build_summary(log, book, out)
        assert (
            summary
            == f"bad.md, line {line - 2} (code cell 2): ValueError: the flag file is missing"
        )
    assert "/good.md: Executing notebook" not in log  # the page that ran is taken from the cache
    flag.write_text("")  # fixed outside the page: no source changed
    proc = _build(book, book, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "/bad.md: Executing notebook" in proc.stdout + proc.stderr
    assert TCP_WARNING not in log + proc.stdout + proc.stderr  # myst-nb's kernels: IPC too
    assert check_site.find_error_outputs(out / "html") == []


MEET_CELL = """```{{code-cell}}
import pathlib, time
pathlib.Path({here!r}).touch()
deadline = time.monotonic() + 300
while not pathlib.Path({there!r}).exists() and time.monotonic() < deadline:
    time.sleep(0.2)
assert pathlib.Path({there!r}).exists(), "the other page never ran beside this one"
```"""


def test_pages_execute_side_by_side_into_the_cache(tmp_path: Path) -> None:
    """Two pages that each wait for the other to start: they pass only when executed at the
    same time (book_ext, 7.), and Sphinx's read then takes both from the execution cache."""
    book = _mini_book(tmp_path / "mini", tmp_path / "flag")
    a, b = tmp_path / "a-started", tmp_path / "b-started"
    for name, here, there in (("good", a, b), ("bad", b, a)):
        body = MEET_CELL.format(here=str(here), there=str(there))
        (book / f"{name}.md").write_text(MINI_PAGE.format(title=name, body=body))
    env = _env() | {"BERTCOURSE_BUILD_JOBS": "2"}
    proc = subprocess.run(
        [sys.executable, "-c", JUPYTER_BOOK, "build", "-W", "-n", "--keep-going", str(book)],
        capture_output=True, text=True, env=env, timeout=900, cwd=book,
    )  # fmt: skip
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "book_ext: executing 2 pages, 2 at a time" in log
    assert "Executing notebook" not in log  # Sphinx's read found both in the cache
    assert log.count("Using cached notebook") >= 2
    assert TCP_WARNING not in log  # book_ext's page workers start their kernels over IPC
    assert check_site.find_error_outputs(book / "_build" / "html") == []


def test_build_jobs_reads_its_variable(monkeypatch) -> None:
    book_ext = _load("book_ext", ROOT / "bertcourse" / "viz" / "book_ext.py")
    monkeypatch.setenv("BERTCOURSE_BUILD_JOBS", "3")
    assert book_ext.build_jobs() == 3
    monkeypatch.delenv("BERTCOURSE_BUILD_JOBS")
    assert 1 <= book_ext.build_jobs() <= book_ext.MAX_JOBS
    monkeypatch.setenv("BERTCOURSE_BUILD_JOBS", "two")
    with pytest.raises(Exception, match="BERTCOURSE_BUILD_JOBS must be a whole number"):
        book_ext.build_jobs()


def _cell(tags=(), outputs=(), count=1) -> dict:
    return {
        "cell_type": "code",
        "metadata": {"tags": list(tags)},
        "outputs": list(outputs),
        "execution_count": count,
        "source": "",
    }


def test_build_summary_names_the_page_the_cell_and_the_error(tmp_path: Path) -> None:
    book_ext = _load("book_ext", ROOT / "bertcourse" / "viz" / "book_ext.py")
    page = tmp_path / "book" / "ch09.md"
    page.parent.mkdir()
    page.write_text("# T\n\n```{code-cell}\nx = 1\n```\n\n```{code-cell}\nfit()\n```\n")
    executed = tmp_path / "_build" / "jupyter_execute" / "book" / "ch09.ipynb"
    executed.parent.mkdir(parents=True)
    error = {"output_type": "error", "ename": "KeyError", "evalue": "'lr'\nmore", "traceback": []}
    notebook = {"cells": [{"cell_type": "markdown"}, _cell(), _cell(outputs=[error], count=2)]}
    executed.write_text(json.dumps(notebook))
    red = "\x1b[91m"  # Sphinx colours its warnings
    log = (
        f"reading sources... [ 50%] book/ch09\n{red}{page}: WARNING: Executing notebook failed: "
        "CellExecutionError\nTraceback ...\nKeyError: 'lr'\n [mystnb.exec]\x1b[39;49;00m\n"
        f"{page}: WARNING: Notebook exception traceback saved in: /x/reports/ch09.err.log "
        "[mystnb.exec]\n"
        f"{tmp_path}/book/ch02.md:17: WARNING: stderr was found in the cell outputs of cell 3 "
        "[mystnb.stderr]\nlooking for now-outdated files... none found\n"
    )
    build = tmp_path / "_build"
    summary = book_ext.build_summary(log, tmp_path, build)
    assert summary == "book/ch09.md, line 7 (code cell 2): KeyError: 'lr' (and 1 more above)"

    # a time-out leaves no error output on the cell that ran last; the limit is named
    notebook["cells"][2]["outputs"] = []
    executed.write_text(json.dumps(notebook))
    timeout = log.replace(
        "Traceback ...", "A cell timed out while it was being executed, after 600 seconds."
    ).replace("CellExecutionError", "CellTimeoutError")
    assert book_ext.build_summary(timeout, tmp_path, build) == (
        "book/ch09.md, line 7 (code cell 2): CellTimeoutError: a cell ran longer than the "
        "600 s cell limit (and 1 more above)"
    )
    # a cell tagged raises-exception is not the failure
    notebook["cells"][1] = _cell(tags=["raises-exception"], outputs=[error])
    assert book_ext.failed_cell(notebook, page.read_text()).number == 2
    # a plain warning: its file and line
    only_stderr = log.split(f"{tmp_path}/book/ch02.md", 1)[1]
    summary = book_ext.build_summary(f"{tmp_path}/book/ch02.md{only_stderr}", tmp_path, build)
    assert summary == "book/ch02.md, line 17: stderr was found in the cell outputs of cell 3"


def test_failed_pages_are_read_again_and_warnings_are_not_forgotten(tmp_path: Path) -> None:
    """Sphinx reads a page again only when its source changes; book_ext adds the pages whose
    execution failed, and after a build with warnings deletes the saved environment."""
    book_ext = _load("book_ext", ROOT / "bertcourse" / "viz" / "book_ext.py")

    class Env:
        found_docs = {"book/ch01", "book/ch08", "book/gone"}
        nb_metadata = {
            "book/ch01": {"exec_data": {"succeeded": True}},
            "book/ch08": {"exec_data": {"succeeded": False, "error": "CellTimeoutError"}},
            "book/gone": {"exec_data": {"succeeded": False}},
            "book/intro": {},
        }

    assert book_ext._reread_failed_pages(None, Env(), set(), set(), {"book/gone"}) == ["book/ch08"]

    class App:
        doctreedir = str(tmp_path)
        _warncount = 0

    pickle = tmp_path / "environment.pickle"
    pickle.write_bytes(b"env")
    book_ext._forget_a_build_with_warnings(App(), None)
    assert pickle.exists()  # a clean build is kept: the next build is incremental
    App._warncount = 2
    book_ext._forget_a_build_with_warnings(App(), None)
    assert not pickle.exists()


def test_no_page_depends_on_the_machines_speed() -> None:
    """The cell limit only stops a hung kernel (far above a page's 60 s budget), and every
    kernel the build starts runs on one thread."""
    import yaml

    book_ext = _load("book_ext", ROOT / "bertcourse" / "viz" / "book_ext.py")
    execute = yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]
    assert execute["timeout"] >= 20 * PAGE_BUDGET_S
    saved = {k: os.environ.get(k) for k in book_ext.ONE_THREAD}
    try:
        os.environ["OMP_NUM_THREADS"] = "2"
        book_ext._one_thread_per_kernel(None, None)
        assert os.environ["OMP_NUM_THREADS"] == "1" and os.environ["MKL_NUM_THREADS"] == "1"
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_the_site_check_rejects_error_outputs_unless_the_cell_expects_them(tmp_path: Path) -> None:
    cell = '<div class="cell{tags} docutils container"><div class="cell_output docutils container">'
    page = (
        cell.format(tags="")
        + '<div class="output stream highlight-myst-ansi notranslate"><pre>ok</pre></div></div></div>'
        + cell.format(tags=" tag_raises-exception")
        + '<div class="output traceback highlight-ipythontb notranslate"><pre>'
        "ValueError: shown on purpose</pre></div></div></div>"
        + cell.format(tags="")
        + '<div class="output traceback highlight-ipythontb notranslate"><pre>Traceback\n'
        "  Cell In[3], line 1\nKeyboardInterrupt: </pre></div></div></div>"
        + cell.format(tags="")
        + '<div class="output stderr highlight-myst-ansi notranslate"><pre>UserWarning: x'
        "</pre></div></div></div>"
    )
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "ch08.html").write_text(f"<html><body>{page}</body></html>")
    assert check_site.find_error_outputs(tmp_path) == [
        "book/ch08.html: cell 3: an error output: KeyboardInterrupt:",
        "book/ch08.html: cell 4: stderr output: UserWarning: x",
    ]
