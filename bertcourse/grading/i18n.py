"""The language of the feedback: English, or Chinese for the Chinese release of the exercises.

A Chinese release notebook (notebook metadata `{"bertcourse": {"lang": "zh_CN"}}`) ends its
set-up cell with `grading.set_language("zh_CN")`; its test cells are the English ones, byte for
byte, so the English message is the key of its translation (the gettext `msgid`). The catalogue
is `locales/zh_CN/LC_MESSAGES/feedback.po`, compiled into `bertcourse/locale/` by
`scripts/i18n_feedback.py compile` (the .mo ships with the package).

A failure's text is translated line by line when the check raises (`translate`):

- a line that is a msgid (a static message or hint of a test cell) gets its msgstr;
- a line built from a template (an f-string of a test cell, `"wrong {what}:"` of a helper) is
  matched against the templates of the catalogue, whose placeholders (`{which}`, `{what}`) match
  any text; the matched values are translated in turn when they are msgids themselves
  (`"wrong {what}:"` with what = `"the loss"`), and go into the msgstr's placeholders;
- a value's name followed by a part of it (`output[1]`, `the loss at step 3['loss']`) gets
  the name's translation, the index kept;
- anything else stays English. A translation never raises and is never empty.

The named mistakes are translated where they are shown (`mistakes.message`): their names,
explanations and book sections are msgids too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gettext as _gettext
import os
import re
import unicodedata
from collections.abc import Iterator

LANGUAGES = ("en", "zh_CN")
DOMAIN = "feedback"
LOCALE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "locale")

# The fixed words of the helpers (checks, values, optim, mistakes): templates whose
# placeholders are filled when a check fails. `scripts/i18n_feedback.py` extracts them from here.
HELPER_MESSAGES = (
    # checks
    "{call} returned a wrong result:",
    "{call} modified its input in place:",
    "work on a copy (x.clone()).",
    "wrong {what}:",
    "Hint: {hint}",
    "{what}: expected a torch.Tensor, got {got}",
    "{what}: expected shape {expected}, got {got}",
    "{what}: expected dtype {expected}, got {got}",
    "{what}: nothing to count (total = {total})",
    "{what}: observed {observed} ({count} of {total}), expected {p} ± {margin} "
    "({num_sd} standard errors)",
    "Parts checked so far: {parts}",
    "none",
    "{part} (this cell)",
    "(in this cell, line {line}: {source})",
    # the names `_compare` gives to values
    "value",
    "result",
    "output",
    "input",
    # values._compare
    "{where}: expected whole numbers ({dtype}), got fractions",
    "{where}: {count} of {total} entries differ; first at index {index}: expected {expected}, "
    "got {got}",
    "{where}: got NaN at {count} position(s), e.g. index {index} where {expected} was expected",
    "{where}: {count} of {total} values differ (atol={atol}, rtol={rtol}); max abs error "
    "{error} at index {index}: expected {expected}, got {got}",
    "expected {values}",
    "got      {values}",
    "{where}: expected a torch.Tensor {expected}, got {got}",
    "{where}: expected a number ({expected}), got {got}",
    "{where}: expected {expected}, got {got}",
    "{where}: expected {expected}, got {got} (abs error {error})",
    "{where}: expected a {kind} of {count}, got {got}",
    "{where}: expected {count} items, got {got}",
    "{where}: expected a dict, got {got}",
    "{where}: expected keys {expected}, got {got}",
    "{where}: expected None, got {got}",
    # optim
    "{call} must return (param, m, v), got {got}",
    "step t={t} of {steps} differs from {reference}:",
    # mistakes.message
    "chapter {number}, {section}",
    "chapter {number}",
    "chapter {number}, '{section}'",
    "chapter {number}, '{section}' ({remark})",
    "Why: {why}.",
    "Read: {where}.",
)

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{")


@dataclasses.dataclass(frozen=True)
class Template:
    """A msgid with placeholders, its msgstr, and the pattern that matches a filled msgid."""

    pattern: re.Pattern[str]
    names: tuple[str, ...]  # the placeholders of the msgid, in order ("{which}", ...)
    msgstr: str
    literal: int  # characters outside placeholders: the more, the more specific

    def fill(self, values: list[str]) -> str:
        return fill(self.msgstr, dict(zip(self.names, values)))


def parse(msgid: str) -> list[tuple[bool, str]]:
    """A msgid as (is_placeholder, text) pieces: `{expr}` is a placeholder (its braces
    balanced, `expr` may hold any Python expression and format spec), `{{`/`}}` are braces."""
    pieces: list[tuple[bool, str]] = []
    literal, i = "", 0
    while i < len(msgid):
        if msgid.startswith(("{{", "}}"), i):
            literal += msgid[i]
            i += 2
        elif msgid[i] == "{":
            depth, j = 0, i
            while j < len(msgid):
                depth += {"{": 1, "}": -1}.get(msgid[j], 0)
                if depth == 0:
                    break
                j += 1
            if literal:
                pieces.append((False, literal))
            pieces.append((True, msgid[i : j + 1]))
            literal, i = "", j + 1
        else:
            literal += msgid[i]
            i += 1
    if literal:
        pieces.append((False, literal))
    return pieces


def placeholders(text: str) -> list[str]:
    return [piece for is_placeholder, piece in parse(text) if is_placeholder]


def unescape(text: str) -> str:
    """A msgid without placeholders as the text it matches (`{{` -> `{`)."""
    return "".join(piece for _, piece in parse(text))


_CJK = re.compile(r"[\u3400-\u9fff]")
_LATIN = re.compile(r"[A-Za-z0-9_]")


def _joined(left: str, right: str) -> str:
    """`left + right`, with a space where a Chinese character meets a Latin letter or digit."""
    if left and right:
        a, b = left[-1], right[0]
        if (_CJK.match(a) and _LATIN.match(b)) or (_LATIN.match(a) and _CJK.match(b)):
            return left + " " + right
    return left + right


def fill(msgstr: str, values: dict[str, str]) -> str:
    """`msgstr` with each placeholder replaced by its value (a placeholder without a value
    stays as it is), spaced from the Chinese around it when the value is Latin
    ("{what}有误" gives "labels 有误" and "第 3 步的损失有误")."""
    text = ""
    for is_placeholder, piece in parse(msgstr):
        text = _joined(text, values.get(piece, piece) if is_placeholder else piece)
    return text


def _template(msgid: str, msgstr: str) -> Template | None:
    pieces = parse(msgid)
    names = tuple(p for is_p, p in pieces if is_p)
    if not names or not any(not is_p for is_p, _ in pieces):
        return None  # no placeholder, or nothing but placeholders (it would match anything)
    if set(placeholders(msgstr)) != set(names):
        return None  # a translation that drops or invents a value: keep the English
    pattern = "".join("(.+?)" if is_p else re.escape(p) for is_p, p in pieces)
    literal = sum(len(p) for is_p, p in pieces if not is_p)
    return Template(re.compile(pattern, re.DOTALL), names, msgstr, literal)


@dataclasses.dataclass(frozen=True)
class Catalogue:
    exact: dict[str, str]  # msgids without placeholders
    templates: tuple[Template, ...]  # the others, the most specific first
    formats: dict[str, str]  # the templates' msgid -> msgstr


@functools.cache
def catalogue(lang: str) -> Catalogue:
    """The compiled catalogue of `lang` (empty when there is none: everything stays English)."""
    if lang == "en":
        return Catalogue({}, (), {})
    translation = _gettext.translation(DOMAIN, LOCALE_DIR, [lang], fallback=True)
    entries = getattr(translation, "_catalog", {})  # GNUTranslations' msgid -> msgstr
    exact, templates, formats = {}, [], {}
    for msgid, msgstr in entries.items():
        if not isinstance(msgid, str) or not msgid or not msgstr.strip():
            continue
        template = _template(msgid, msgstr)
        if template is not None:
            templates.append(template)
            formats[msgid] = msgstr
        elif not placeholders(msgid):
            exact[unescape(msgid)] = unescape(msgstr)
    templates.sort(key=lambda t: -t.literal)
    return Catalogue(exact, tuple(templates), formats)


_state = {"lang": "en"}


def set_language(lang: str) -> None:
    """The language of the feedback from now on in this process: "en" (the default) or
    "zh_CN" (the Chinese release's set-up cell calls it)."""
    if lang not in LANGUAGES:
        raise ValueError(
            f"set_language: unknown language {lang!r}; choose one of {', '.join(LANGUAGES)}"
        )
    _state["lang"] = lang


def get_language() -> str:
    return _state["lang"]


@contextlib.contextmanager
def language(lang: str) -> Iterator[None]:
    """`set_language(lang)` for the block, the language before it restored after."""
    before = _state["lang"]
    set_language(lang)
    try:
        yield
    finally:
        _state["lang"] = before


def gettext(text: str) -> str:
    """The translation of one msgid without placeholders (`text` itself when there is none)."""
    if _state["lang"] == "en" or not text:
        return text
    return catalogue(_state["lang"]).exact.get(text) or text


def format(msgid: str, **values: str) -> str:  # noqa: A001 (the gettext idiom)
    """The translation of a helper's template (one of HELPER_MESSAGES) with its values."""
    translated = catalogue(_state["lang"]).formats.get(msgid, msgid)
    return fill(translated, {f"{{{k}}}": v for k, v in values.items()})


# a part of a value, after its name: "output[1]", "the loss at step 3['loss']", "output.context"
_PART = re.compile(r"(?:\[[^\[\]]*\]|\.[A-Za-z_]\w*)+$")


def _lookup(cat: Catalogue, text: str, depth: int) -> str:
    if text in cat.exact:
        return cat.exact[text]
    if depth >= 3 or not text:
        return text
    part = _PART.search(text)
    if part and part.start() > 0:  # the name translated, the index or field kept
        name = _lookup(cat, text[: part.start()], depth + 1)
        if name != text[: part.start()]:
            return name + part.group(0)
    for template in cat.templates:
        match = template.pattern.fullmatch(text)
        if match:
            return template.fill([_lookup(cat, value, depth + 1) for value in match.groups()])
    return text


def translate(text: str) -> str:
    """A failure's text in the current language, line by line (each line's indent kept)."""
    if _state["lang"] == "en" or not text:
        return text
    cat = catalogue(_state["lang"])
    lines = []
    for line in text.split("\n"):
        body = line.strip()
        start = line.find(body) if body else len(line)
        translated = _lookup(cat, body, 0) if body else body
        lines.append(line[:start] + (translated or body) + line[start + len(body) :])
    return "\n".join(lines)


# --- lines that fit a terminal's columns -------------------------------------------------------

# punctuation that must not begin a line: it closes what precedes it
_NO_LINE_START = set("，。、；：！？）》」』”’】〉…％),.:;!?]}%")
# and that must not end one: it opens what follows
_NO_LINE_END = set("（《「『“‘【〈")


def display_width(text: str) -> int:
    """Columns `text` takes on a terminal or in a monospaced <pre>: a wide (Chinese) character
    takes two (Unicode's East Asian Width W or F)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _is_wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in "WF"


def _tokens(text: str) -> list[str]:
    """`text` as the pieces a line may break between: runs of spaces, a wide character, a run
    of narrow non-space characters (a Latin word, a number, code), each with the closing
    punctuation right after it and the opening punctuation right before it."""
    tokens: list[str] = []
    for char in text:
        last = tokens[-1] if tokens else ""
        if char.isspace():
            glue = bool(last) and last[-1].isspace()
        elif char in _NO_LINE_START:
            glue = bool(last) and not last[-1].isspace()
        elif _is_wide(char):
            glue = False
        else:  # narrow: joins a narrow word
            glue = bool(last) and not last[-1].isspace() and not _is_wide(last[-1])
        if glue or (last and last[-1] in _NO_LINE_END and not char.isspace()):
            tokens[-1] += char
        else:
            tokens.append(char)
    return tokens


def wrap(line: str, width: int, indent: str = "    ") -> list[str]:
    """`line` cut into lines of at most `width` columns (display_width), its own indent kept and
    `indent` more on the lines after the first. Breaks between words, between two Chinese
    characters, never before closing punctuation (，。）); a word longer than a line is cut."""
    lead = line[: len(line) - len(line.lstrip())]
    rest_lead = lead + indent
    if display_width(rest_lead) >= width:
        raise ValueError(f"wrap: the indent {rest_lead!r} leaves no room in {width} columns")
    lines: list[str] = []
    current, used = lead, display_width(lead)
    for token in _tokens(line[len(lead) :]):
        size = display_width(token)
        if token.isspace():
            if current.strip():
                current, used = current + token, used + size
            continue
        if used + size > width and current.strip():
            lines.append(current.rstrip())
            current, used = rest_lead, display_width(rest_lead)
        while used + size > width:  # longer than a whole line: cut it
            room, cut = width - used, 0
            while cut < len(token) and display_width(token[: cut + 1]) <= room:
                cut += 1
            lines.append(current + token[:cut])
            token = token[cut:]
            size = display_width(token)
            current, used = rest_lead, display_width(rest_lead)
        current, used = current + token, used + size
    if current.strip() or not lines:
        lines.append(current.rstrip() if current.strip() else line)
    return lines
