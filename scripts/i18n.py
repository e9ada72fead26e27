"""The Chinese edition's catalogues: extract, refresh, check, build.

    python scripts/i18n.py update     # after an English edit: extract, merge into locales/zh_CN
    python scripts/i18n.py check      # what CI checks (exit 1 on a problem); --fast: no execution
    python scripts/i18n.py stat       # coverage per page
    python scripts/i18n.py build      # the Chinese site into _build/html/zh (English site untouched)

The English `book/` is the only source. `update` runs Sphinx's gettext builder on the Jupyter Book
configuration (`_config.yml`, `_toc.yml`, the local extensions), one `.pot` per page
(`gettext_compact = False`), with outputs from the execution cache (so a caption set in a cell's
metadata is extracted too; pages missing from the cache are executed, as a book build would),
into `_build/gettext/`, then merges each `.pot` into `locales/zh_CN/LC_MESSAGES/<page>.po` the
way `sphinx-intl update` does (babel's `Catalog.update`): translations are kept, an entry whose
English changed becomes fuzzy with its old translation, and, unlike sphinx-intl, the previous
English is written beside it (`#| msgid "..."`) so the translator sees what changed. Entries with
nothing to translate (only code, math, numbers, links) are filled with the English.

`check` fails (exit 1) on:
* a fuzzy or untranslated entry in a page declared translated (`locales/zh_CN/translated.txt`;
  the other pages are reported as coverage, so the check is green while translation goes on);
* a catalogue stale against the current English: the pages are extracted again into a
  temporary folder and each page's messages must be exactly the catalogue's (with `--fast`,
  extraction runs without executing the pages: messages that come from outputs are then
  missing from it, so only "every English message has its catalogue entry" is required);
* a translation that drops or changes what must stay identical: inline code, math, roles
  ({ref}`text <target>` keeps its role and target, {doc}`x` stays as is), link targets,
  numbers; a catalogue whose Language is not zh_CN, a page without a catalogue.
It also lists translations that do not use the glossary's term for an English term
(book/glossary.md), as warnings.
"""

from __future__ import annotations

import argparse
import ast
import html
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LANGUAGE = "zh_CN"
LOCALES = ROOT / "locales"
CATALOGS = LOCALES / LANGUAGE / "LC_MESSAGES"
TRANSLATED_LIST = LOCALES / LANGUAGE / "translated.txt"
GLOSSARY = ROOT / "book" / "glossary.md"
# (myst-nb writes executed notebooks beside a Sphinx output folder: keep them out of _build/)
POT_DIR = ROOT / "_build" / "i18n" / "gettext"
ZH_SITE = ROOT / "_build" / "html" / "zh"
ZH_BUILD = ROOT / "_build" / "zh" / "html"
# catalogues of the theme's and Sphinx's own words (not pages): see bertcourse/viz/i18n_ext.py
THEME_DOMAINS = ("sphinx", "booktheme")
# the words of the figures: every `label("...")` in bertcourse/viz (bertcourse/viz/lang.py)
FIGURES_DOMAIN = "figures"
FEEDBACK_DOMAIN = "feedback"  # not a page: the grader's feedback (scripts/i18n_feedback.py)
FIGURE_SOURCES = ROOT / "bertcourse" / "viz"
# the Chinese SVGs' font: the one matplotlib draws the Chinese figures with, then what the reader has
ZH_SVG_FONTS = (
    "'Noto Sans CJK SC', 'Source Han Sans SC', 'PingFang SC', 'Microsoft YaHei', sans-serif"
)
PO_WIDTH = 79


# --- Sphinx runs ------------------------------------------------------------------------------


def sphinx_overrides(language: str | None, execute: str = "cache") -> dict:
    """Configuration on top of `_config.yml` shared by the gettext and the translated builds."""
    overrides = {
        "external_toc_path": "_toc.yml",
        "latex_individualpages": False,
        "locale_dirs": ["locales"],
        "gettext_compact": False,  # one catalogue per page, named after it (book/ch03_mlm.po)
        "gettext_location": False,  # no "#: file:line" comments: they churn with every edit
        "gettext_uuid": False,
        "gettext_auto_build": True,
        # the English build's execution cache (book_ext keys a folder below it to the package,
        # and deletes the folders of other package versions: an extraction that executes
        # nothing must not touch it)
        "nb_execution_cache_path": str(
            ROOT / "_build" / (".jupyter_cache" if execute == "cache" else "i18n/.jupyter_cache")
        ),
        "nb_execution_mode": execute,
    }
    if language:
        overrides["language"] = language
    return overrides


_SPHINX_ERROR = re.compile(r": (ERROR|SEVERE): ")  # a docutils message that loses a page's text


def run_sphinx(builder: str, outdir: Path, doctrees: Path, overrides: dict, strict: bool) -> int:
    """Build with Jupyter Book's configuration, in a child process (Sphinx keeps global state)."""
    code = (
        "import sys, json; from jupyter_book.sphinx import build_sphinx; "
        "a = json.loads(sys.argv[1]); "
        "r = build_sphinx(a['src'], a['out'], noconfig=True, path_config=a['config'], "
        "confoverrides=a['overrides'], doctreedir=a['doctrees'], builder=a['builder'], "
        "warningiserror=a['strict'], keep_going=a['strict'], quiet=True); "
        "sys.exit(r if isinstance(r, int) else 1)"
    )
    import json

    args = {
        "src": str(ROOT),
        "out": str(outdir),
        "config": str(ROOT / "_config.yml"),
        "overrides": {**overrides, "nitpicky": True},
        "doctrees": str(doctrees),
        "builder": builder,
        "strict": strict,
    }
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        TOKENIZERS_PARALLELISM="false",
        PYDEVD_DISABLE_FILE_VALIDATION="1",
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(args)],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    sys.stderr.write(done.stderr)
    if done.returncode == 0 and not strict and _SPHINX_ERROR.search(done.stderr):
        # a page that docutils cannot parse (a broken list-table, say) loses its messages, and
        # a merge would then drop their translations: never go on from such a build
        return 1
    return done.returncode


def extract(out: Path, execute: str = "cache") -> dict[str, Path]:
    """Run the gettext builder into `out`; return page -> .pot (page as 'book/ch03_mlm').

    Its doctrees are kept in _build/i18n (one folder per execution mode), so an extraction
    after an English edit reads only the pages that changed.
    """
    doctrees = ROOT / "_build" / "i18n" / f".doctrees-{execute}"
    rc = run_sphinx("gettext", out, doctrees, sphinx_overrides(None, execute), strict=False)
    if rc != 0:
        raise SystemExit(
            f"i18n: sphinx-build -b gettext failed (exit {rc}, or an ERROR above): "
            "fix the page first; no catalogue was changed"
        )
    return {p.relative_to(out).with_suffix("").as_posix(): p for p in sorted(out.rglob("*.pot"))}


# --- the words of the figures ------------------------------------------------------------------
#
# Two sources, one catalogue (figures.po): every `label("...")` of bertcourse/viz/*.py, and the
# words a book page hands to a plot function, `viz.plot_x(..., title="...")`, which
# `lang.translate_figure` translates when the figure is drawn. From a page, the strings taken
# are those inside the arguments of a `plot_*` call and the keys of its dict literals (a series'
# name becomes a legend entry: `{"untrained tiny BERT": p}`; `d["name"] = p` too), when they read
# as names (_names: "mlm_loss" is data, not a label). An f-string is catalogued with its fields as
# written (`"layer {layer}, head {head}"`): `lang.label` fills them in. The texts of the book's
# SVG figures (`book/_static/<name>.svg`) are catalogued too; `update` writes each one's Chinese
# copy `<name>.zh_CN.svg`, which Sphinx's `figure_language_filename` ("{root}.{language}{ext}")
# puts on the Chinese pages in place of the English one.
# A record that a plot function draws the names of, `viz.Pair("title", "random", ...)`, is
# read like a `plot_*` call.

FIGURE_FIELD_NOTE = "{...} is filled in when the figure is drawn: keep it as it is"
_CODE_CELL = re.compile(r"^(`{3,})\{code-cell\}[^\n]*\n(.*?)^\1\s*$", re.M | re.S)
_HAS_WORDS = re.compile(r"[A-Za-z]{2}")
SVG_FIGURES = ROOT / "book" / "_static"


def _fstring_msgid(node: ast.JoinedStr) -> str:
    """`f"layer {layer}, head {head}"` as the text `layer {layer}, head {head}`."""
    out = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            out.append(str(value.value))
        else:  # ast.FormattedValue
            spec = f":{_fstring_msgid(value.format_spec)}" if value.format_spec else ""
            conversion = f"!{chr(value.conversion)}" if value.conversion != -1 else ""
            out.append(f"{{{ast.unparse(value.value)}{conversion}{spec}}}")
    return "".join(out)


def _literal(node: ast.AST) -> str | None:
    """The text of a string constant or f-string with words outside math, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif isinstance(node, ast.JoinedStr):
        text = _fstring_msgid(node)
        node = ast.Constant("".join(v.value for v in node.values if isinstance(v, ast.Constant)))
        if not _HAS_WORDS.search(node.value):  # f"{a:.1%}": only numbers
            return None
    else:
        return None
    return text if _HAS_WORDS.search(re.sub(r"\$[^$]*\$", "", text)) else None


def _strings_inside(node: ast.AST) -> list[str]:
    """The strings of an argument: itself, or inside its dicts, lists, tuples, comprehensions,
    conditionals (not in subscripts, attributes or other calls: those compute data)."""
    found = _literal(node)
    if found is not None:
        return [found]
    if isinstance(node, ast.Dict):
        parts = [*(k for k in node.keys if k is not None), *node.values]
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        parts = node.elts
    elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        parts = [node.elt]
    elif isinstance(node, ast.DictComp):
        parts = [node.key, node.value]
    elif isinstance(node, ast.IfExp):
        parts = [node.body, node.orelse]
    else:
        parts = []
    return [s for part in parts for s in _strings_inside(part)]


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _viz_record(call: ast.Call) -> bool:
    """`viz.Pair("title", "random", "pretrained", ...)`: a record a plot function draws the names
    of (a capitalised name called on `viz`)."""
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "viz"
        and func.attr[:1].isupper()
    )


def figure_words_of_module(source: str) -> list[str]:
    """The first argument of every `label(...)` / `lang.label(...)` call in a Python module."""
    return [
        text
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and _call_name(node) == "label" and node.args
        for text in [_literal(node.args[0])]
        if text is not None
    ]


def figure_words_of_page(markdown: str) -> list[str]:
    """The words a MyST page's code cells give to plot functions (see above)."""
    words = []
    for cell in _CODE_CELL.finditer(markdown):
        lines = [ln for ln in cell.group(2).splitlines() if not ln.startswith((":", "%", "!"))]
        try:
            tree = ast.parse("\n".join(lines))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (
                _call_name(node).startswith("plot_") or _viz_record(node)
            ):
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    words += _strings_inside(arg)
            elif isinstance(node, (ast.Dict, ast.DictComp, ast.Assign)):
                if isinstance(node, ast.Assign):  # counts[f"L = {n}"] = ...: a key too
                    keys = [t.slice for t in node.targets if isinstance(t, ast.Subscript)]
                else:
                    keys = node.keys if isinstance(node, ast.Dict) else [node.key]
                words += _names(key for key in keys if key is not None)
    return words


def _names(keys) -> list[str]:
    """The keys that read as names: with a space ("whole words (gold)"), or a plain word
    ("characters") in a dict whose keys mostly have one; "mlm_loss" is data."""
    texts = [text for text in map(_literal, keys) if text is not None]
    if 2 * sum(" " in text.strip() for text in texts) < len(texts):
        return [text for text in texts if " " in text.strip()]
    return [text for text in texts if " " in text.strip() or text.isalpha()]


def svg_texts(svg: str, words_only: bool = True) -> list[str]:
    """The words of an SVG figure: its <text> and <title> elements and its aria-label (those
    with Latin words, unless `words_only` is False)."""
    texts = re.findall(r"<(?:text|title)\b[^>]*>([^<]+)</(?:text|title)>", svg)
    texts += re.findall(r'\baria-label="([^"]+)"', svg)
    return [html.unescape(t) for t in texts if _HAS_WORDS.search(t) or not words_only]


def english_svgs() -> list[Path]:
    """The book's SVG figures (not their translated copies, `<name>.<language>.svg`)."""
    svgs = (p for p in sorted(SVG_FIGURES.glob("*.svg")) if "." not in p.stem)
    return [p for p in svgs if svg_texts(p.read_text(encoding="utf-8"))]


def translated_svg(svg: str, translate) -> str:
    """`svg` with the words of svg_texts() replaced by `translate(words)`."""

    def text(m: re.Match) -> str:
        words = html.unescape(m.group(2))
        return m.group(1) + html.escape(translate(words), quote=False) + m.group(3)

    svg = re.sub(r"(<(?:text|title)\b[^>]*>)([^<]+)(</(?:text|title)>)", text, svg)
    return re.sub(
        r'(\baria-label=")([^"]+)(")',
        lambda m: m.group(1) + html.escape(translate(html.unescape(m.group(2)))) + m.group(3),
        svg,
    )


def zh_svg_path(svg: Path) -> Path:
    return svg.with_name(f"{svg.stem}.{LANGUAGE}{svg.suffix}")


def figure_words() -> list[tuple[str, str]]:
    """(words, where) of every figure: bertcourse/viz, the pages' plot calls, the SVGs."""
    out = []
    for path in sorted(FIGURE_SOURCES.glob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        out += [(w, where) for w in figure_words_of_module(path.read_text(encoding="utf-8"))]
    for page in toc_pages():
        path = ROOT / f"{page}.md"
        if path.is_file():
            words = figure_words_of_page(path.read_text(encoding="utf-8"))
            out += [(w, f"{page}.md") for w in words]
    for svg in english_svgs():
        where = svg.relative_to(ROOT).as_posix()
        out += [(w, where) for w in svg_texts(svg.read_text(encoding="utf-8"))]
    return out


def extract_figure_labels(pot: Path) -> set[str]:
    """Write the words of every figure (figure_words) into `pot`; return them."""
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po

    catalog = Catalog(project="bertcourse", fuzzy=False)
    for words, where in figure_words():
        if words in catalog:
            continue
        note = [where] + ([FIGURE_FIELD_NOTE] if lang_fields(words) else [])
        catalog.add(words, auto_comments=note)
    pot.parent.mkdir(parents=True, exist_ok=True)
    with pot.open("wb") as f:
        write_po(f, catalog, omit_header=False)
    return {m.id for m in catalog if m.id}


def lang_fields(words: str) -> bool:
    """Whether `words` has f-string fields, as bertcourse.viz.lang reads them."""
    return bool(re.search(r"\{[^{}]*\}", re.sub(r"\$[^$]*\$", "", words)))


def write_zh_svgs(check_only: bool = False) -> list[Path]:
    """Write (or, `check_only`, compare) each SVG's Chinese copy from figures.po; return the
    copies that were (or would be) changed."""
    import polib

    po = CATALOGS / f"{FIGURES_DOMAIN}.po"
    table = {
        e.msgid: e.msgstr
        for e in (polib.pofile(str(po)) if po.is_file() else [])
        if e.msgstr and not e.fuzzy and not e.obsolete
    }
    changed = []
    for svg in english_svgs():
        out = zh_svg_path(svg)
        text = translated_svg(svg.read_text(encoding="utf-8"), lambda w: table.get(w, w))
        text = text.replace('font-family="sans-serif"', f'font-family="{ZH_SVG_FONTS}"', 1)
        if not out.is_file() or out.read_text(encoding="utf-8") != text:
            changed.append(out)
            if not check_only:
                out.write_text(text, encoding="utf-8")
    return changed


def toc_pages() -> list[str]:
    """The pages of `_toc.yml` (the ones the site builds), as 'book/ch03_mlm'."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [toc["root"]]
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            pages.append(chapter["file"])
            pages += [s["file"] for s in chapter.get("sections", [])]
    return [p.removesuffix(".md") for p in pages]


# --- catalogues -------------------------------------------------------------------------------


def po_path(page: str) -> Path:
    return CATALOGS / f"{page}.po"


def page_catalogs() -> dict[str, Path]:
    """page -> .po of every page catalogue in locales/zh_CN (theme catalogues left out)."""
    out = {}
    for po in sorted(CATALOGS.rglob("*.po")):
        page = po.relative_to(CATALOGS).with_suffix("").as_posix()
        if page.startswith("exercises/"):  # the assignments' (scripts/i18n_exercises.py)
            continue
        if page == FEEDBACK_DOMAIN:  # the grader's messages (scripts/i18n_feedback.py)
            continue
        if page not in THEME_DOMAINS and page != FIGURES_DOMAIN:
            out[page] = po
    return out


def declared_translated() -> list[str]:
    if not TRANSLATED_LIST.is_file():
        return []
    lines = TRANSLATED_LIST.read_text(encoding="utf-8").splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


# What must survive translation unchanged. Order matters: code and math are cut out of the text
# first, so that a `$` or a number inside code is not read twice.
_ROLE = re.compile(r"\{([\w:-]+)\}(`+)(.+?)\2")
_CODE = re.compile(r"(`+)(.+?)\1")
_DMATH = re.compile(r"\$\$(.+?)\$\$", re.S)
_MATH = re.compile(r"(?<![\\$])\$(?!\s)([^$\n]+?)(?<![\s\\])\$(?!\d)")
_LINK = re.compile(r"\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
_URL = re.compile(r"(?<![(<\w])https?://[^\s)>\]]+")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])[-+−]?\d+(?:[,.]\d+)*(?:[eE][-+]?\d+)?%?")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[A-Za-z]{2,}")


@dataclass
class Invariants:
    """The parts of a message that a translation must keep exactly (as multisets)."""

    code: Counter = field(default_factory=Counter)
    roles: Counter = field(default_factory=Counter)  # "{ref}<target>" or "{doc}`text`"
    math: Counter = field(default_factory=Counter)
    links: Counter = field(default_factory=Counter)
    numbers: Counter = field(default_factory=Counter)
    rest: str = ""  # the text with all of the above cut out


def _role_key(role: str, body: str) -> str:
    target = re.search(r"<([^<>]+)>\s*$", body)
    if target:  # {ref}`text <target>`: the text is translated, the target is not
        return f"{{{role}}}<{target.group(1).strip()}>"
    return f"{{{role}}}`{body}`"


def invariants(text: str) -> Invariants:
    inv = Invariants()

    def cut(pattern: re.Pattern, bucket: Counter, key, keep=lambda m: "") -> None:
        """Count each match in `bucket`; leave only its translatable text (`keep`) behind."""
        nonlocal text

        def sub(m: re.Match) -> str:
            bucket[key(m)] += 1
            return f" {keep(m)} "

        text = pattern.sub(sub, text)

    def role_text(m: re.Match) -> str:  # {ref}`text <target>`: "text" is translated
        target = re.search(r"<([^<>]+)>\s*$", m.group(3))
        return m.group(3)[: target.start()] if target else ""

    cut(_ROLE, inv.roles, lambda m: _role_key(m.group(1), m.group(3)), role_text)
    cut(_CODE, inv.code, lambda m: m.group(2).strip())
    cut(_DMATH, inv.math, lambda m: "$$" + m.group(1).strip())
    cut(_MATH, inv.math, lambda m: m.group(1).strip())
    cut(_LINK, inv.links, lambda m: m.group(2), lambda m: m.group(1))
    cut(_AUTOLINK, inv.links, lambda m: m.group(1))
    cut(_URL, inv.links, lambda m: m.group(0))
    for m in _NUMBER.finditer(text):
        inv.numbers[m.group(0).replace(",", "").replace("−", "-").lstrip("+")] += 1
    inv.rest = text
    return inv


def invariant_problems(msgid: str, msgstr: str) -> list[str]:
    """Why `msgstr` is not a faithful translation of `msgid` as far as a program can tell."""
    src, dst = invariants(msgid), invariants(msgstr)
    problems = []
    for name in ("code", "roles", "math", "links"):
        a, b = getattr(src, name), getattr(dst, name)
        if a != b:
            lost, added = sorted((a - b).elements()), sorted((b - a).elements())
            what = {
                "code": "inline code",
                "roles": "roles",
                "math": "math",
                "links": "link targets",
            }
            problems.append(f"{what[name]} differ: missing {lost}, extra {added}")
    lost_numbers = sorted((src.numbers - dst.numbers).elements())
    if lost_numbers:
        problems.append(f"numbers missing from the translation: {lost_numbers}")
    if msgstr.count("`") % 2 or dst.rest.count("**") % 2:  # (** inside code is code)
        problems.append("unbalanced ` or ** in the translation")
    return problems


def needs_translation(msgid: str) -> bool:
    """False for a message that is only code, math, roles, links and numbers (kept as is)."""
    rest = invariants(msgid).rest
    return bool(_WORD.search(rest) or _CJK.search(rest))


# --- update -----------------------------------------------------------------------------------


_PREVIOUS = ("| msgid ", "| msgid_plural ", '| "')  # "#| ..." lines as babel reads them


def merge(pot: Path, po: Path, header: str | None = None) -> tuple[str, int, int]:
    """Merge `pot` into `po` as sphinx-intl does, keeping the previous English of fuzzy entries."""
    import polib
    from babel.messages.pofile import read_po, write_po

    with pot.open("rb") as f:
        template = read_po(f)
    previous: dict[str, str] = {}
    if po.is_file():
        # babel does not read "#| msgid": remember it for entries that are still fuzzy
        previous = {
            e.msgid: e.previous_msgid for e in polib.pofile(str(po)) if e.fuzzy and e.previous_msgid
        }
        with po.open("rb") as f:
            catalog = read_po(f, locale=LANGUAGE)
        before = {m.id for m in catalog if m.id}
        catalog.update(template, update_header_comment=False, update_creation_date=False)
        status = "updated"
    else:
        catalog = template
        catalog.locale = LANGUAGE
        catalog.fuzzy = False
        before = set()
        status = "created"
    page = (
        po.relative_to(CATALOGS).with_suffix("").as_posix()
        if po.is_relative_to(CATALOGS)
        else po.stem
    )
    catalog.project = "bertcourse"
    catalog.copyright_holder = "the bertcourse authors"
    catalog.language_team = "bertcourse Chinese edition"
    catalog.header_comment = header or (
        f"# {page}.md in Chinese (zh_CN): translate the msgstr lines.\n"
        "# Refreshed by `python scripts/i18n.py update`; see locales/README.md.\n#"
    )
    filled = 0
    for message in catalog:
        if not message.id:
            continue
        # babel reads polib's "#| msgid" lines (the previous English) as a translator's comment
        # and would write them back as "# | msgid": drop them (re-added below while fuzzy)
        message.user_comments = [c for c in message.user_comments if not c.startswith(_PREVIOUS)]
        if message.fuzzy and not message.previous_id and message.id in previous:
            message.previous_id = [previous[message.id]]
        if not message.fuzzy and not message.string and not needs_translation(message.id):
            message.string = message.id
            filled += 1
    after = {m.id for m in catalog if m.id}
    buf = io.BytesIO()
    # babel wraps a long previous msgid as comment text, cutting its quoted pieces apart ("#|
    # while its " "page ..."), which no PO reader parses: write without it, then let polib,
    # which writes "#| msgid" correctly, add the previous English of each fuzzy entry
    write_po(buf, catalog, width=PO_WIDTH, include_previous=False, ignore_obsolete=True)
    old_english = {m.id: m.previous_id[0] for m in catalog if m.id and m.fuzzy and m.previous_id}
    entries = polib.pofile(buf.getvalue().decode("utf-8"), wrapwidth=PO_WIDTH)
    for entry in entries:
        if entry.fuzzy and entry.msgid in old_english:
            entry.previous_msgid = old_english[entry.msgid]
    data = entries.__unicode__().encode("utf-8")
    if po.is_file() and po.read_bytes() == data:
        return "unchanged", 0, 0
    po.parent.mkdir(parents=True, exist_ok=True)
    po.write_bytes(data)
    return status, len(after - before), filled


def cmd_update(args: argparse.Namespace) -> int:
    if POT_DIR.exists():
        shutil.rmtree(POT_DIR)
    pots = extract(POT_DIR, args.execute)
    for page, pot in pots.items():
        status, added, filled = merge(pot, po_path(page))
        if status != "unchanged":
            print(
                f"{status}: {po_path(page).relative_to(ROOT)} (+{added} new, {filled} kept as is)"
            )
    figures_pot = POT_DIR / f"{FIGURES_DOMAIN}.pot"
    labels = extract_figure_labels(figures_pot)
    status, added, _ = merge(figures_pot, CATALOGS / f"{FIGURES_DOMAIN}.po")
    if status != "unchanged":
        print(
            f"{status}: figure labels, {len(labels)} in bertcourse/viz, pages, SVGs (+{added} new)"
        )
    for svg in write_zh_svgs():
        print(f"written: {svg.relative_to(ROOT)} (from {FIGURES_DOMAIN}.po)")
    for page, po in page_catalogs().items():
        if page not in pots:
            po.unlink()
            print(f"removed: {po.relative_to(ROOT)} (no such page any more)")
    print(f"== {len(pots)} catalogues in {CATALOGS.relative_to(ROOT)}; now translate, then check")
    return 0


# --- check ------------------------------------------------------------------------------------


@dataclass
class PageReport:
    page: str
    total: int = 0
    translated: int = 0
    fuzzy: int = 0
    untranslated: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _short(text: str, n: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def check_catalog(page: str, po: Path, glossary: list[tuple[str, str]]) -> PageReport:
    import polib

    report = PageReport(page)
    catalog = polib.pofile(str(po))
    lang = catalog.metadata.get("Language", "")
    if lang != LANGUAGE:
        report.errors.append(f"Language header is {lang!r}, not {LANGUAGE!r}")
    for entry in catalog:
        if entry.obsolete:
            continue
        report.total += 1
        if entry.fuzzy:
            report.fuzzy += 1
        elif not entry.msgstr:
            report.untranslated += 1
        else:
            report.translated += 1
        if not entry.msgstr or entry.fuzzy:  # Sphinx does not use a fuzzy entry
            continue
        for problem in invariant_problems(entry.msgid, entry.msgstr):
            report.errors.append(f"{problem}: {_short(entry.msgid)!r}")
        report.warnings += glossary_problems(entry.msgid, entry.msgstr, glossary)
    return report


def glossary_problems(msgid: str, msgstr: str, glossary: list[tuple[str, str]]) -> list[str]:
    """English glossary terms in `msgid` whose Chinese term is missing from `msgstr`."""
    if not _CJK.search(msgstr):
        return []
    # special tokens ([MASK], [CLS]) are names, not the words "mask" and "cls"
    text = re.sub(r"\[[A-Z]+\]", " ", invariants(msgid).rest).lower()
    out = []
    for zh, en in glossary:
        for variant in (v.strip() for v in re.sub(r"\(.*?\)", "", en).split(";")):
            if (
                variant
                and re.search(rf"\b{re.escape(variant.lower())}s?\b", text)
                and zh not in msgstr
            ):
                out.append(f"{en!r} without {zh!r}: {_short(msgid, 50)!r}")
                break
    return out


def glossary_entries() -> list[tuple[str, str]]:
    if not GLOSSARY.is_file():
        return []
    sys.path.insert(0, str(ROOT / "bertcourse" / "viz"))
    try:
        from i18n_ext import glossary_terms
    finally:
        sys.path.pop(0)
    return glossary_terms(GLOSSARY)


def stale_problems(fast: bool) -> list[str]:
    """Differences between the catalogues' messages and a fresh extraction of the English."""
    import polib

    problems = []
    with tempfile.TemporaryDirectory(prefix="bertcourse-gettext-") as tmp:
        pots = extract(Path(tmp) / "gettext", "off" if fast else "cache")
        catalogs = page_catalogs()
        for page, pot in pots.items():
            if page not in catalogs:
                problems.append(f"{page}: no catalogue (run `python scripts/i18n.py update`)")
                continue
            fresh = {e.msgid for e in polib.pofile(str(pot))}
            have = {e.msgid for e in polib.pofile(str(catalogs[page])) if not e.obsolete}
            new, gone = fresh - have, have - fresh
            if new:
                problems.append(
                    f"{page}: {len(new)} English message(s) not in the catalogue, e.g. "
                    f"{_short(sorted(new)[0])!r} (run `python scripts/i18n.py update`)"
                )
            if gone and not fast:
                problems.append(
                    f"{page}: {len(gone)} catalogue message(s) no longer in the English, e.g. "
                    f"{_short(sorted(gone)[0])!r} (run `python scripts/i18n.py update`)"
                )
        for page in catalogs:
            if page not in pots:
                problems.append(f"{page}: catalogue of a page that is not built")
        figures = CATALOGS / f"{FIGURES_DOMAIN}.po"
        labels = extract_figure_labels(Path(tmp) / f"{FIGURES_DOMAIN}.pot")
        have = (
            {e.msgid for e in polib.pofile(str(figures)) if not e.obsolete}
            if figures.is_file()
            else set()
        )
        if labels != have:
            problems.append(
                f"{FIGURES_DOMAIN}.po: {len(labels - have)} figure label(s) missing, "
                f"{len(have - labels)} no longer used (run `python scripts/i18n.py update`)"
            )
        for svg in write_zh_svgs(check_only=True):
            problems.append(
                f"{svg.relative_to(ROOT)}: not what {FIGURES_DOMAIN}.po gives "
                "(run `python scripts/i18n.py update`)"
            )
    return problems


def check(
    stale: bool = True, fast: bool = False, verbose: bool = True, declared_strict: bool = True
) -> list[str]:
    """All problems (empty = pass); prints coverage and warnings.

    With `declared_strict=False` (the build), a page declared translated that has fuzzy or
    untranslated entries is a warning: after an English edit the site is still built, and
    shows those paragraphs in English until the catalogue is fixed.
    """
    glossary = glossary_entries()
    declared = declared_translated()
    catalogs = page_catalogs()
    problems = []
    for page in declared:
        if page not in catalogs:
            problems.append(f"{page}: declared translated in {TRANSLATED_LIST.name}, no catalogue")
    total = done = 0
    figures = CATALOGS / f"{FIGURES_DOMAIN}.po"
    if figures.is_file():
        catalogs = {**catalogs, FIGURES_DOMAIN: figures}
    for page, po in catalogs.items():
        report = check_catalog(page, po, glossary)
        total += report.total
        done += report.translated
        mark = "declared" if page in declared else "in progress"
        if verbose:
            pct = 100 * report.translated / max(report.total, 1)
            print(
                f"{page:28s} {report.translated:4d}/{report.total:<4d} {pct:5.1f}%  "
                f"fuzzy {report.fuzzy:3d}  untranslated {report.untranslated:3d}  ({mark})"
            )
        problems += [f"{page}: {e}" for e in report.errors]
        if page in declared and (report.fuzzy or report.untranslated):
            message = (
                f"{page}: declared translated but {report.fuzzy} fuzzy and "
                f"{report.untranslated} untranslated entries"
            )
            if declared_strict:
                problems.append(message)
            else:
                print(f"  warning: {message} (shown in English; run update and translate)")
        if verbose:
            for w in report.warnings:
                print(f"  glossary warning: {page}: {w}")
    if verbose:
        print(
            f"== coverage: {done}/{total} entries ({100 * done / max(total, 1):.1f}%), "
            f"{len(declared)} of {len(catalogs) - (FIGURES_DOMAIN in catalogs)} pages declared translated"
        )
    if stale:
        problems += stale_problems(fast)
    return problems


def cmd_check(args: argparse.Namespace) -> int:
    problems = check(stale=not args.no_stale, fast=args.fast)
    for p in problems:
        print(f"FAIL {p}")
    print(f"== i18n check: {'FAILED, ' + str(len(problems)) + ' problem(s)' if problems else 'ok'}")
    return 1 if problems else 0


def cmd_stat(args: argparse.Namespace) -> int:
    check(stale=False)
    return 0


# --- build ------------------------------------------------------------------------------------


def cmd_build(args: argparse.Namespace) -> int:
    """The Chinese site into _build/html/zh, from the English build's execution cache.

    Sphinx builds into _build/zh/html (myst-nb keeps its executed notebooks and images beside
    the output folder, in _build/zh/jupyter_execute, not inside the English site), and the result
    is copied to _build/html/zh, where the language switch expects it.
    """
    # the cheap checks (the stale check re-extracts every page: tests/test_i18n.py, `check`)
    problems = check(stale=False, declared_strict=False)
    if problems:
        for p in problems:
            print(f"FAIL {p}")
        print("== Chinese edition not built: fix the catalogues (locales/README.md)")
        return 1
    start = time.monotonic()
    rc = run_sphinx(
        "html",
        ZH_BUILD,
        ROOT / "_build" / "zh" / ".doctrees",
        sphinx_overrides(LANGUAGE, args.execute),
        strict=args.strict,
    )
    built_s = time.monotonic() - start
    if (ZH_BUILD / "index.html").is_file():
        if ZH_SITE.exists():
            shutil.rmtree(ZH_SITE)
        shutil.copytree(ZH_BUILD, ZH_SITE, ignore=shutil.ignore_patterns(".buildinfo"))
    status = "built" if rc == 0 else f"FAILED (exit {rc})"
    print(f"== Chinese edition {status} in {built_s:.0f} s: {ZH_SITE / 'index.html'}")
    return rc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("update", help="extract the English and merge it into the catalogues")
    up.add_argument("--execute", choices=["cache", "off"], default="cache")
    ck = sub.add_parser("check", help="fail on fuzzy/untranslated/stale/unfaithful entries")
    ck.add_argument("--fast", action="store_true", help="extract without executing any page")
    ck.add_argument("--no-stale", action="store_true", help="skip the re-extraction")
    sub.add_parser("stat", help="coverage per page")
    bd = sub.add_parser("build", help="build the Chinese site into _build/html/zh")
    bd.add_argument("--no-strict", dest="strict", action="store_false", help="warnings pass")
    bd.add_argument(
        "--execute",
        choices=["cache", "off"],
        default="cache",
        help="off: no outputs, a quick look at the translations",
    )
    args = parser.parse_args(argv)
    return {"update": cmd_update, "check": cmd_check, "stat": cmd_stat, "build": cmd_build}[
        args.command
    ](args)


if __name__ == "__main__":
    sys.exit(main())
