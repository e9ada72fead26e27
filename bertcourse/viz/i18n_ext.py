"""Sphinx extension of the bertcourse book's Chinese edition (`_config.yml`, `local_extensions`).

Like `book_ext`, Sphinx imports it as the top-level module `i18n_ext`, so it must not import
bertcourse or torch. It does five things, in both editions unless said otherwise:

1. Display math is not for translators: a transform marks every `math_block` untranslatable
   before Sphinx extracts (gettext builder) or applies (`-D language=zh_CN`) the catalogues, so
   `$$...$$` never reaches a `.po` file. The same goes for the first two columns of the glossary
   table (class `bertcourse-glossary`: the Chinese term and the English term are the same in both
   editions).
2. Table-of-contents captions in other languages: sphinx-external-toc inserts the toctrees of
   `_toc.yml` (transform priority 100) after Sphinx's Locale transform (priority 20) has
   translated the page, so their captions stay English. A transform at priority 101 translates
   them from the page's own catalogue (the gettext builder puts them there).
3. A language switch on every page: the template `bertcourse-language-switch.html` takes the
   place of the theme's `article-header-buttons.html` in `article_header_end` and includes it,
   so the switch sits in the same row, in front of the buttons; it links to the same page in the other edition with a
   relative link computed from `pagename` (the English site in `_build/html/`, the Chinese one
   in `_build/html/zh/`), so it works from any folder, on a file:// URL too.
4. In the Chinese edition: the book title and the search box text are overridden
   (`bertcourse_i18n_titles`, `bertcourse_i18n_search_text`); Sphinx's Chinese search splits
   words with jieba (installed: requirements.txt) and learns the glossary's terms as words
   (a jieba user dictionary written from `book/glossary.md`, so 掩码语言模型 is one word).
5. The theme's own words: `locales/<lang>/LC_MESSAGES/sphinx.po` overrides Sphinx's and
   pydata-sphinx-theme's messages (Sphinx reads `locale_dirs` first), and `booktheme.po` there
   overrides sphinx-book-theme's (its zh_CN catalogue uses some Taiwanese wording); this
   extension compiles it and puts it in front of the theme's own. `sphinx.po` also holds the
   words the book itself gives the theme (`extra_footer` in `_config.yml`) and myst-nb's prompts
   of hidden cells ("Show code cell source"), which this extension translates from it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.locale import init as init_locale
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.i18n import docname_to_domain

logger = logging.getLogger(__name__)

SOURCE_LANGUAGE = "en"
# Where each edition's site lives, relative to the English site's root (_build/html).
EDITION_PREFIX = {"en": "", "zh_CN": "zh/"}
# What the switch says, in the language it leads to.
EDITION_LABEL = {"en": "English", "zh_CN": "中文"}
HTML_LANG = {"en": "en", "zh_CN": "zh-CN"}
TEMPLATE = "bertcourse-language-switch.html"
GLOSSARY_CLASS = "bertcourse-glossary"
GLOSSARY_PAGE = "book/glossary.md"
THEME_CATALOG = "booktheme"  # sphinx-book-theme's MESSAGE_CATALOG_NAME

BUTTONS = "article-header-buttons.html"  # sphinx-book-theme's default article_header_end
# One header item, the switch and the theme's buttons side by side in one flex row: as separate
# items of article_header_end they are stacked.
_SWITCH_HTML = """\
<div class="bertcourse-header-end" style="display: flex; align-items: center; gap: 0.25rem">
{%- for link in bertcourse_language_switch %}
<a class="btn btn-sm bertcourse-language-switch" href="{{ link.href }}" hreflang="{{ link.hreflang }}"
   lang="{{ link.hreflang }}" title="{{ link.title }}">{{ link.label }}</a>
{%- endfor %}
INCLUDE
</div>
"""


def language_of(config: Config) -> str:
    return config.language or SOURCE_LANGUAGE


def switch_href(pagename: str, from_lang: str, to_lang: str) -> str:
    """Relative URL of `pagename` in the `to_lang` edition, seen from the `from_lang` one."""
    for lang in (from_lang, to_lang):
        if lang not in EDITION_PREFIX:
            raise ValueError(
                f"i18n_ext: no edition for language {lang!r}: {sorted(EDITION_PREFIX)}"
            )
    here = posixpath.dirname(EDITION_PREFIX[from_lang] + pagename)
    there = EDITION_PREFIX[to_lang] + pagename + ".html"
    return posixpath.relpath(there, here or ".")


# --- 1. what is not translated ---------------------------------------------------------------


class KeepUntranslated(SphinxTransform):
    """Mark display math and the glossary's term columns untranslatable (before Locale: 20)."""

    default_priority = 10

    def apply(self, **kwargs) -> None:
        for node in self.document.findall(nodes.math_block):
            node["translatable"] = False
        for table in self.document.findall(nodes.table):
            if GLOSSARY_CLASS not in table.get("classes", []):
                continue
            for row in table.findall(nodes.row):
                for entry in list(row.findall(nodes.entry))[:2]:
                    for para in entry.findall(nodes.TextElement):
                        para["translatable"] = False


# --- 2. toctree captions ---------------------------------------------------------------------


class TranslateTocCaptions(SphinxTransform):
    """Translate the captions of toctrees that sphinx-external-toc inserted after Locale."""

    default_priority = 101  # sphinx_external_toc.events.InsertToctrees is 100

    def apply(self, **kwargs) -> None:
        config = self.config
        if language_of(config) == SOURCE_LANGUAGE or not config.locale_dirs:
            return
        toctrees = [t for t in self.document.findall(addnodes.toctree) if t.get("caption")]
        if not toctrees:
            return
        domain = docname_to_domain(self.env.docname, config.gettext_compact)
        dirs = [str(Path(self.env.srcdir) / d) for d in config.locale_dirs]
        catalog, has_catalog = init_locale(dirs, config.language, domain)
        if not has_catalog:
            return
        for toctree in toctrees:
            original = toctree["rawcaption"] if toctree.get("rawcaption") else toctree["caption"]
            translated = catalog.gettext(original)
            if translated and translated != original:
                toctree.apply_translated_message(original, translated)


# --- 3. language switch ----------------------------------------------------------------------


def _add_switch_template(app: Sphinx, config: Config) -> None:
    folder = Path(app.doctreedir) / "bertcourse_i18n_templates"
    folder.mkdir(parents=True, exist_ok=True)
    options = config.html_theme_options
    end = list(options.get("article_header_end") or [BUTTONS])
    if BUTTONS in end:  # the switch goes in front of the theme's buttons, in the same row
        end[end.index(BUTTONS)] = TEMPLATE
        html = _SWITCH_HTML.replace("INCLUDE", f'{{% include "{BUTTONS}" %}}')
    else:
        end.insert(0, TEMPLATE)
        html = _SWITCH_HTML.replace("INCLUDE", "")
    options["article_header_end"] = [t for i, t in enumerate(end) if t not in end[:i]]
    template = folder / TEMPLATE
    if not template.is_file() or template.read_text(encoding="utf-8") != html:
        template.write_text(html, encoding="utf-8")
    config.templates_path = [*config.templates_path, str(folder)]


def _switch_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    lang = language_of(app.config)
    if lang not in EDITION_PREFIX or doctree is None:  # genindex, search: no counterpart check
        context["bertcourse_language_switch"] = []
        return
    links = []
    for other in EDITION_PREFIX:
        if other == lang:
            continue
        links.append(
            {
                "href": switch_href(pagename, lang, other),
                "hreflang": HTML_LANG[other],
                "label": EDITION_LABEL[other],
                "title": "Read this page in English" if other == "en" else "阅读本页的中文版",
            }
        )
    context["bertcourse_language_switch"] = links


# --- 4. titles, search -----------------------------------------------------------------------


def glossary_terms(path: Path) -> list[tuple[str, str]]:
    """(Chinese, English) pairs of the glossary table in `book/glossary.md` (list-table rows)."""
    text = path.read_text(encoding="utf-8")
    rows = re.findall(r"^\* - (.+)\n  - (.+)$", text, flags=re.M)
    return [(zh.strip(), en.strip()) for zh, en in rows if zh.strip() != "中文"]


def _localise_config(app: Sphinx, config: Config) -> None:
    lang = language_of(config)
    if lang == SOURCE_LANGUAGE:
        return
    title = config.bertcourse_i18n_titles.get(lang)
    if title:
        config.html_title = title
        config.project = title
    search = config.bertcourse_i18n_search_text.get(lang)
    if search:
        config.html_theme_options["search_bar_text"] = search
    footer = config.html_theme_options.get("extra_footer")
    if footer:  # _config.yml's words: translated in locales/<lang>/LC_MESSAGES/sphinx.po
        config.html_theme_options["extra_footer"] = _theme_words(footer)
    if lang.startswith("zh"):
        glossary = Path(app.srcdir) / GLOSSARY_PAGE
        if glossary.is_file() and "dict" not in config.html_search_options:
            words = Path(app.doctreedir) / "bertcourse_jieba_userdict.txt"
            words.parent.mkdir(parents=True, exist_ok=True)
            terms = sorted({zh for zh, _ in glossary_terms(glossary)})
            # jieba user dictionary: "word frequency"; a high frequency keeps the word whole
            words.write_text("".join(f"{t} 20000\n" for t in terms), encoding="utf-8")
            config.html_search_options = {**config.html_search_options, "dict": str(words)}
        _jieba_cache_in(Path(app.doctreedir))


def _jieba_cache_in(folder: Path) -> None:
    """jieba (Sphinx's Chinese search) caches its dictionary in the build's own folder, quietly.

    By default it writes `jieba.cache` into the system's temporary folder: on a machine where
    another user made that file first, every build printed a PermissionError traceback."""
    try:
        import jieba
    except ImportError:  # Sphinx then says that Chinese search needs jieba
        return
    folder.mkdir(parents=True, exist_ok=True)
    jieba.dt.tmp_dir = str(folder)
    jieba.setLogLevel(30)  # logging.WARNING (this module's `logging` is Sphinx's)


def _theme_words(message: str) -> str:
    """`message` translated by the Sphinx catalogue (ours, locales/<lang>/sphinx.po, first)."""
    from sphinx.locale import get_translation

    return str(get_translation("sphinx")(message))


class TranslateCellPrompts(SphinxPostTransform):
    """ "Show code cell source" and the other prompts of hidden cells, in the edition's language.

    myst-nb's HideInputCells (post-transform 199) writes them from `nb_code_prompt_show/hide`
    with "{type}" replaced by an English word (source, outputs, content); each whole prompt is
    translated here by the Sphinx catalogue (locales/<lang>/LC_MESSAGES/sphinx.po)."""

    default_priority = 200
    formats = ("html",)

    def run(self, **kwargs) -> None:
        if language_of(self.config) == SOURCE_LANGUAGE:
            return
        for node in self.document.findall(nodes.Element):
            for key in ("prompt_show", "prompt_hide"):
                if isinstance(node.get(key), str):
                    node[key] = _theme_words(node[key])


# --- figures in the edition's language -------------------------------------------------------

FIGURE_FLAG = "figure_language"  # front matter: `figure_language: true`
_FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.S)


def figure_language_cell(source: str, language: str) -> str:
    """`source` with a hidden first cell `lang.set_language(language)` when the page opts in.

    The execution cache is keyed on a page's code, so this page alone is executed again in the
    other language (its figures get translated labels); the others come from the cache.
    """
    front = _FRONT_MATTER.match(source)
    if not front or not re.search(rf"^{FIGURE_FLAG}:\s*true\s*$", front.group(1), re.M):
        return source
    cell = (
        "\n```{code-cell} ipython3\n:tags: [remove-cell]\n"
        f'from bertcourse.viz import lang\nlang.set_language("{language}")\n```\n'
    )
    title = re.search(r"^# .*$", source[front.end() :], re.M)
    at = front.end() + (title.end() + 1 if title else 0)
    return source[:at] + cell + source[at:]


def _figure_language(app: Sphinx, docname: str, source: list[str]) -> None:
    lang = language_of(app.config)
    if lang != SOURCE_LANGUAGE:
        source[0] = figure_language_cell(source[0], lang)


# --- 5. the theme's own words ----------------------------------------------------------------


def _register_theme_catalog(app: Sphinx) -> None:
    """Compile locales/<lang>/LC_MESSAGES/booktheme.po and put it in front of the theme's own.

    Jupyter Book loads sphinx-book-theme before the local extensions, so the theme's catalogue is
    registered first (and Sphinx makes a later one a fallback); on builder-inited this one is put
    first, with the theme's behind it for the messages it does not override.
    """
    import gettext

    from sphinx.locale import translators

    lang = app.config.language
    if not lang or lang == SOURCE_LANGUAGE:
        return
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    for locale_dir in app.config.locale_dirs:
        base = Path(app.srcdir) / locale_dir
        po = base / lang / "LC_MESSAGES" / f"{THEME_CATALOG}.po"
        if not po.is_file():
            continue
        mo = po.with_suffix(".mo")
        if not mo.is_file() or mo.stat().st_mtime < po.stat().st_mtime:
            with po.open("rb") as f:
                catalog = read_po(f, locale=lang)
            with mo.open("wb") as f:
                write_mo(f, catalog)
        ours = gettext.translation(THEME_CATALOG, localedir=str(base), languages=[lang])
        theirs = translators.get(("general", THEME_CATALOG))
        if theirs is not None and theirs is not ours:
            ours.add_fallback(theirs)
        translators["general", THEME_CATALOG] = ours
        return


def setup(app: Sphinx) -> dict:
    app.add_config_value(
        "bertcourse_i18n_titles", {"zh_CN": "bertcourse：从内部理解 BERT"}, "html", [dict]
    )
    app.add_config_value("bertcourse_i18n_search_text", {"zh_CN": "在本书中搜索……"}, "html", [dict])
    app.add_transform(KeepUntranslated)
    app.add_transform(TranslateTocCaptions)
    app.add_post_transform(TranslateCellPrompts)
    app.connect("config-inited", _localise_config, priority=450)
    app.connect("config-inited", _add_switch_template, priority=450)
    app.connect("html-page-context", _switch_context)
    app.connect("source-read", _figure_language)
    app.connect("builder-inited", _register_theme_catalog)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
