"""The website: built from clean with warnings as errors, fully offline, rendered by Chromium.

`test_book_builds_offline_and_renders` is the CI check of issue 4: one test (so that pytest-xdist
never builds the book twice) that builds into a fresh temporary folder with
`jupyter-book build -W -n --keep-going` (every page executed, a warning fails), scans the HTML
for assets loaded from the internet, then opens every page in headless Chromium
(scripts/check_site.py): MathJax rendered, images loaded, no console errors. Screenshots of
every page go to _build/screenshots/.

The other tests show that the checks themselves can fail.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "_build" / "screenshots"
MATHJAX_SITE = ROOT / "_mathjax" / "site"
JUPYTER_BOOK = "import sys; from jupyter_book.cli.main import main; sys.exit(main())"
BUILD_TIMEOUT_S = 1200  # the goal is 5 minutes (a measurement); this only stops a hung build

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


def test_book_builds_offline_and_renders(tmp_path: Path) -> None:
    _ensure_mathjax()
    out = tmp_path / "book"
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", JUPYTER_BOOK, "build", "-W", "-n", "--keep-going"]
        + ["--path-output", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=BUILD_TIMEOUT_S,
        cwd=ROOT,
    )
    build_s = time.monotonic() - t0
    log = proc.stdout + proc.stderr
    warnings = [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line]
    assert proc.returncode == 0, (
        f"jupyter-book build -W -n failed (exit {proc.returncode}) after {build_s:.0f} s.\n"
        + "\n".join(warnings[:40])
        + "\n--- end of log ---\n"
        + log[-6000:]
    )
    html = out / "_build" / "html"
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
    print(f"book build {build_s:.0f} s, browser check {browser_s:.0f} s")
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
