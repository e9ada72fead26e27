"""The language of the figures' words: English, or Chinese in the book's Chinese edition.

    from bertcourse.viz import lang
    lang.set_language("zh_CN")        # what the Chinese build does for a page that opts in
    ax.set_xlabel(lang.label("head size $d_k$"))   # "头的维度 $d_k$" in Chinese, as is in English

A plot function wraps each word it draws in `label()`. The translations live in the gettext
catalogue `locales/zh_CN/LC_MESSAGES/figures.po`, beside the pages' catalogues, and
`python scripts/i18n.py update` extracts every `label("...")` of `bertcourse/viz/*.py` into it
(babel's Python extractor), so figure labels are translated, checked and refreshed like the
prose. A label without a translation stays English; math (`$...$`) must be kept as is.

Chinese text needs a CJK font: `set_language("zh_CN")` registers the Simplified Chinese face of
Noto Sans CJK (the static Regular collection of the PyPI package `noto-cjk-sans-otc`, pinned in
requirements.txt) with matplotlib and puts it first in `font.family`, before DejaVu Sans (mathtext
draws the words around `$...$` in the first family only, without per-glyph fallback; math itself
keeps the book's math font). Without the font, matplotlib draws empty boxes and warns that a glyph
is missing.

How the Chinese build reaches this without executing the book twice: the execution cache is
keyed on a page's code, so it serves the English outputs to the Chinese build. A page whose
front matter says `figure_language: true` gets, in the Chinese build only, a hidden first cell
`lang.set_language("zh_CN")` (bertcourse/viz/i18n_ext.py): its code differs, so that page alone
is executed again, with Chinese labels; every other page comes from the cache.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

ENGLISH = "en"
LANGUAGES = (ENGLISH, "zh_CN")
ENV_VAR = "BERTCOURSE_LANGUAGE"
CJK_FAMILY = "Noto Sans CJK SC"
CJK_PACKAGE = "noto_cjk_sans_otc"
CJK_FILE = "NotoSansCJK-Regular.ttc"
# locales/ of a source checkout (the book is built from one; a wheel has no catalogues)
LOCALES = Path(__file__).resolve().parents[2] / "locales"

_language = os.environ.get(ENV_VAR, ENGLISH)


def set_language(language: str) -> None:
    """Draw the labels of later figures in `language` ("en" or "zh_CN"; "zh" means "zh_CN")."""
    global _language
    language = "zh_CN" if language in ("zh", "zh-CN", "zh_CN") else language
    if language not in LANGUAGES:
        raise ValueError(f"viz.lang: no figure language {language!r}; choose one of {LANGUAGES}")
    if language != ENGLISH:
        use_cjk_font()
    _language = language


def get_language() -> str:
    return _language


@functools.cache
def _catalog(language: str) -> dict[str, str]:
    """msgid -> msgstr of `figures.po` for `language` (translated, not fuzzy, entries only)."""
    po = LOCALES / language / "LC_MESSAGES" / "figures.po"
    if not po.is_file():
        return {}
    import polib

    return {
        e.msgid: e.msgstr
        for e in polib.pofile(str(po))
        if e.msgstr and not e.fuzzy and not e.obsolete
    }


def label(text: str) -> str:
    """`text` in the current figure language (unchanged in English or when untranslated)."""
    if _language == ENGLISH:
        return text
    return _catalog(_language).get(text, text)


def cjk_font_path() -> Path:
    """The Noto Sans CJK collection shipped by the PyPI package `noto-cjk-sans-otc`."""
    import importlib.util

    spec = importlib.util.find_spec(CJK_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"viz.lang: Chinese figure labels need the font package {CJK_PACKAGE}: "
            "run `python -m pip install noto-cjk-sans-otc==0.0.1` (requirements.txt)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / CJK_FILE
    if not path.is_file():
        raise RuntimeError(f"viz.lang: {path} is missing; reinstall noto-cjk-sans-otc")
    return path


def use_cjk_font() -> str:
    """Register Noto Sans CJK SC with matplotlib and make it the first font family."""
    import matplotlib as mpl
    from matplotlib import font_manager

    path = cjk_font_path()
    if CJK_FAMILY not in {f.name for f in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(str(path))  # every face of the collection
    families = [f for f in mpl.rcParams["font.family"] if f != CJK_FAMILY]
    if families == ["sans-serif"]:
        families = list(mpl.rcParams["font.sans-serif"][:1])
    # first, not as a fallback: mathtext draws the words around `$...$` in the first family
    # alone, with no per-glyph fallback; Noto Sans CJK has Latin letters and digits too
    mpl.rcParams["font.family"] = [CJK_FAMILY, *families]
    return CJK_FAMILY
