"""The Chinese edition as a reader gets it: built from the catalogues, opened in Chromium.

`python scripts/i18n.py build --execute off` builds the Chinese site from `locales/zh_CN`
without executing a page (the catalogues hold prose only; the English build's cache gives the
outputs when there is one), into `_build/html/zh`. Every page of `_toc.yml` must be there, in
Chinese (`<html lang="zh-CN">`), with a switch to the same page of the English site, and pass the
same headless-Chromium check as the English site (raw TeX, broken images, console errors). The
screenshots go to `_build/screenshots/zh/` (with Debian's fonts-noto-cjk installed by
`scripts/install.sh --chromium`, the Chinese text shows in them, not boxes).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import check_site  # noqa: E402

pytestmark = pytest.mark.slow
ZH_SITE = ROOT / "_build" / "html" / "zh"
SCREENSHOTS = ROOT / "_build" / "screenshots" / "zh"


def _toc_pages() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [toc["root"]]
    for part in toc.get("parts", []):
        pages += [chapter["file"] for chapter in part.get("chapters", [])]
    return pages


def test_the_chinese_site_builds_and_renders() -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run(
        [sys.executable, "scripts/i18n.py", "build", "--execute", "off"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    for page in _toc_pages():
        path = ZH_SITE / f"{page}.html"
        assert path.is_file(), f"{page} is in _toc.yml but has no Chinese page"
        text = path.read_text(encoding="utf-8")
        assert re.search(r'<html[^>]*lang="zh-CN"', text), f"{page}: not marked as Chinese"
        # the switch leads to the same page of the English site
        depth = page.count("/") + 1  # zh/<page>.html -> ../<page>.html, one level per folder
        english = "../" * depth + f"{page}.html"
        assert f'href="{english}"' in text, f"{page}: no link to {english}"
        # the theme's words that the book adds: the footer, the prompts of hidden cells
        assert "Built offline" not in text and "离线构建" in text, f"{page}: English footer"
        assert "Show code cell" not in text, f"{page}: an English prompt of a hidden cell"
    hidden = [
        p for p in _toc_pages() if "显示代码单元" in (ZH_SITE / f"{p}.html").read_text("utf-8")
    ]
    assert hidden, "no Chinese page shows a hidden cell's prompt in Chinese"
    # the intro's architecture figure is its Chinese copy (Sphinx's figure_language_filename)
    intro = (ZH_SITE / "book" / "intro.html").read_text(encoding="utf-8")
    assert "bert_architecture.zh_CN.svg" in intro
    problems = check_site.browser_check(ZH_SITE, SCREENSHOTS)
    assert problems == [], "\n".join(problems)
