"""The language of the figures' words: English, or Chinese in the book's Chinese edition.

    from bertcourse.viz import lang
    lang.set_language("zh_CN")        # what the Chinese build does for a page that opts in
    ax.set_xlabel(lang.label("head size $d_k$"))   # "头的维度 $d_k$" in Chinese, as is in English

A plot function wraps each word it draws in `label()` and returns its figure through
`translate_figure()`, which translates the words its caller gave too (a title, a legend's
names). The translations live in the gettext catalogue `locales/zh_CN/LC_MESSAGES/figures.po`,
beside the pages' catalogues, and `python scripts/i18n.py update` extracts into it every
`label("...")` of `bertcourse/viz/*.py` and the words the book's pages hand to plot functions
(see locales/README.md), so figure labels are translated, checked and refreshed like the prose.
A label without a translation stays English; math (`$...$`) must be kept as is.

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
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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


# A label made by an f-string is catalogued with its fields as written in the source,
# `"layer {layer}, head {head}"`: a field is `{...}` outside `$...$` (braces inside math are TeX).
_MATH = re.compile(r"\$[^$]*\$")
_FIELD = re.compile(r"\{[^{}]*\}")


@dataclass(frozen=True)
class _Pattern:
    """A catalogue entry with fields: the English as a regular expression, the Chinese template."""

    regex: re.Pattern
    fields: tuple[str, ...]
    msgstr: str


def _pattern(msgid: str, msgstr: str) -> _Pattern | None:
    """The regex of `msgid`'s fields (None when it has none outside math)."""
    parts, fields, at = [], [], 0
    for math in [*_MATH.finditer(msgid), None]:
        end = math.start() if math else len(msgid)
        for field_ in _FIELD.finditer(msgid, at, end):
            parts.append(re.escape(msgid[at : field_.start()]))
            parts.append("(.+?)")
            fields.append(field_.group(0))
            at = field_.end()
        if math:
            parts.append(re.escape(msgid[at : math.end()]))
            at = math.end()
    if not fields:
        return None
    parts.append(re.escape(msgid[at:]))
    return _Pattern(re.compile("".join(parts), re.S), tuple(fields), msgstr)


@dataclass(frozen=True)
class _Catalogue:
    exact: dict[str, str]  # msgid -> msgstr
    patterns: tuple[_Pattern, ...]  # the entries with fields


@functools.cache
def _catalog(language: str) -> _Catalogue:
    """The translated, not fuzzy, entries of `figures.po` for `language`."""
    po = LOCALES / language / "LC_MESSAGES" / "figures.po"
    if not po.is_file():
        return _Catalogue({}, ())
    import polib

    exact = {
        e.msgid: e.msgstr
        for e in polib.pofile(str(po))
        if e.msgstr and not e.fuzzy and not e.obsolete
    }
    found = (_pattern(msgid, msgstr) for msgid, msgstr in exact.items())
    return _Catalogue(exact, tuple(p for p in found if p is not None))


def label(text: str) -> str:
    """`text` in the current figure language (unchanged in English or when untranslated).

    A catalogue entry with fields (`"layer {layer}, head {head}"`, from an f-string) matches the
    formatted text (`"layer 3, head 7"`); each field's value is translated in turn and put in
    the Chinese at the place of the same field.
    """
    if _language == ENGLISH or not text:
        return text
    catalogue = _catalog(_language)
    exact = catalogue.exact.get(text)
    if exact is not None:
        return exact
    for pattern in catalogue.patterns:
        match = pattern.regex.fullmatch(text)
        if match:
            out = pattern.msgstr
            for name, value in zip(pattern.fields, match.groups()):
                out = out.replace(name, label(value), 1)
            return out
    return text


def translate_figure(fig: Figure) -> Figure:
    """Every word drawn in `fig` through `label()`: titles, axis labels, tick labels, legends,
    annotations, colour-bar labels (no-op in English). Each plot function of bertcourse.viz
    returns its figure through this, so a caller's words (a title, a legend's names) are
    translated as well as the function's own."""
    if _language == ENGLISH:
        return fig
    from matplotlib.text import Text

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            _translate_tick_labels(axis)
    for text in fig.findobj(Text):
        words = text.get_text()
        translated = label(words)
        if translated != words:
            text.set_text(translated)
    return fig


def _translate_tick_labels(axis) -> None:
    """Tick labels given as words (`set_yticks(y, names)`) are written by the axis' formatter
    at draw time: it is made to translate them (numeric formatters are left alone)."""
    from matplotlib.ticker import FixedFormatter, FuncFormatter

    for major, formatter in (
        (True, axis.get_major_formatter()),
        (False, axis.get_minor_formatter()),
    ):
        if isinstance(formatter, FixedFormatter):
            formatter.seq = [label(str(s)) for s in formatter.seq]
        elif isinstance(formatter, FuncFormatter) and not getattr(formatter, "translated", False):
            words = FuncFormatter(lambda x, pos, words=formatter: label(str(words(x, pos))))
            words.translated = True
            (axis.set_major_formatter if major else axis.set_minor_formatter)(words)


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
