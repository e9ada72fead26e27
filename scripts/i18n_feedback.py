"""The catalogue of the grading feedback's translations: extract, merge, check, compile.

    python scripts/i18n_feedback.py update    # extract the msgids, merge into the .po
    python scripts/i18n_feedback.py check     # exit 1 unless the .po is current, complete, and
                                              # the shipped .mo is compiled from it
    python scripts/i18n_feedback.py compile   # the .po -> bertcourse/locale/<lang>/.../feedback.mo

The msgids (the English, as it is shown; `bertcourse/grading/i18n.py` explains the lookup):

* the fixed words of the helpers, `i18n.HELPER_MESSAGES`, and every message the grading
  package raises as a `GradingError` or `ForbiddenCallError` (`GradingError` translates);
* every named mistake (`mistakes.CATALOGUE` and `bertcourse/grading/catalogues/chNN.py`): its
  name, its explanation (`why`), its book section and the remark after it;
* the literal messages, hints and `what`s that the exercises' cells (`solutions/_src/*.py`)
  pass to `grading.*` checks: a plain string is one msgid per line; an f-string is a template
  whose placeholders are its expressions as written (`{which}`, `{variance:.2f}`), which the
  translation must keep; a name bound to a string at module level is followed, and so is a
  parameter of a helper the cells define (the literals its calls pass for it);
* `VALUES`: words that fill those placeholders (the loops' `which` in chapter 6).

`update` keeps every translation; an entry whose msgid is new gets the translation of the
closest vanished msgid (difflib, as msgmerge does), marked fuzzy, with the old msgid beside it.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import functools
import importlib
import importlib.util
import pkgutil
import re
import sys
from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bertcourse.grading import i18n, mistakes  # noqa: E402

LANG = "zh_CN"
PO = ROOT / "locales" / LANG / "LC_MESSAGES" / f"{i18n.DOMAIN}.po"
MO = Path(i18n.LOCALE_DIR) / LANG / "LC_MESSAGES" / f"{i18n.DOMAIN}.mo"
SOURCES = ROOT / "solutions" / "_src"

# Words that test cells put into a message's placeholders (not literal message arguments).
VALUES = ("decayed", "not-decayed", "training", "eval")

# grading.<check>: the positional index of each argument that is shown to the learner
SHOWN_POSITIONAL = {"check_true": {1}, "check_value": {2}, "check_proportion": {3}}
SHOWN_KEYWORDS = {"message", "hint", "what"}


# --- extraction ---------------------------------------------------------------------------


def _placeholder(node: ast.FormattedValue) -> str:
    text = ast.unparse(node.value)
    if node.conversion != -1:
        text += "!" + chr(node.conversion)
    if node.format_spec is not None:
        assert isinstance(node.format_spec, ast.JoinedStr)
        text += ":" + "".join(
            v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"
            for v in node.format_spec.values
        )
    return "{" + text + "}"


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _strings(node: ast.AST, constants: dict[str, ast.AST]) -> list[str]:
    """The msgid texts (before splitting into lines) an argument expression can show."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [_escape(node.value)]
    if isinstance(node, ast.JoinedStr):
        return [
            "".join(
                _escape(v.value) if isinstance(v, ast.Constant) else _placeholder(v)
                for v in node.values
            )
        ]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _strings(node.left, constants), _strings(node.right, constants)
        if left and not right:  # "text: " + "; ".join(...): the rest is a placeholder
            return [text + "{" + ast.unparse(node.right) + "}" for text in left]
        return left + right
    if isinstance(node, ast.IfExp):
        return _strings(node.body, constants) + _strings(node.orelse, constants)
    if isinstance(node, ast.Name) and node.id in constants:
        return _strings(constants[node.id], constants)
    return []  # a call (a named mistake's message) or a variable: not a literal


def _shown_arguments(call: ast.Call) -> list[ast.AST]:
    func = call.func
    if not (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "grading"
    ):
        return []
    shown = [call.args[i] for i in SHOWN_POSITIONAL.get(func.attr, ()) if i < len(call.args)]
    return shown + [kw.value for kw in call.keywords if kw.arg in SHOWN_KEYWORDS]


def _forwarded(tree: ast.Module, argument: ast.AST) -> list[ast.AST]:
    """When `argument` is a parameter of the function around it (a test cell's helper,
    `check_step(..., what)`), the arguments every call of that function passes for it."""
    if not isinstance(argument, ast.Name):
        return []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef) or not any(
            n is argument for n in ast.walk(function)
        ):
            continue
        names = [a.arg for a in function.args.args]
        if argument.id not in names:
            return []
        index = names.index(argument.id)
        passed = []
        for call in ast.walk(tree):
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) == function.name:
                passed += call.args[index : index + 1]
                passed += [k.value for k in call.keywords if k.arg == argument.id]
        return passed
    return []


def source_messages(path: Path) -> dict[str, list[tuple[str, int]]]:
    """msgid -> occurrences, from the grading calls of one exercise source."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    constants = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    found: dict[str, list[tuple[str, int]]] = {}
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        shown = _shown_arguments(call)
        for argument in shown + [a for s in shown for a in _forwarded(tree, s)]:
            for text in _strings(argument, constants):
                for line in text.split("\n"):
                    if line.strip() and i18n.parse(line.strip()) != [(True, line.strip())]:
                        where = (str(path.relative_to(ROOT)), argument.lineno)
                        found.setdefault(line.strip(), []).append(where)
    return found


RAISED = ("GradingError", "ForbiddenCallError")
# the learner-facing raises: a forbidden call, the referee's calls across the boundary
RAISED_IN = (
    "bertcourse/grading/forbid.py",
    "bertcourse/grade/boundary/remote.py",
    "bertcourse/grade/boundary/execute.py",
)


def raised_messages() -> dict[str, list[tuple[str, int]]]:
    """msgid -> occurrences: the messages the grading package raises itself (the forbidden
    calls, the referee's remote calls), translated by `GradingError`."""
    found: dict[str, list[tuple[str, int]]] = {}
    for path in (ROOT / name for name in RAISED_IN):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for call in ast.walk(tree):
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) in RAISED:
                for text in _strings(call.args[0], {}) if call.args else []:
                    where = (str(path.relative_to(ROOT)), call.lineno)
                    found.setdefault(text.strip(), []).append(where)
    return found


def catalogue_modules() -> list:
    package = importlib.import_module("bertcourse.grading.catalogues")
    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__))
    return [mistakes] + [importlib.import_module(f"{package.__name__}.{n}") for n in names]


def mistake_messages() -> dict[str, list[tuple[str, int]]]:
    """msgid -> occurrences ("module", 0): every mistake's name, why, section and remark."""
    found: dict[str, list[tuple[str, int]]] = {}
    for module in catalogue_modules():
        where = (module.__name__.replace(".", "/") + ".py", 0)
        for entries in module.CATALOGUE.values():
            for mistake in entries:
                texts = [mistake.name, mistake.why]
                match = mistakes._WHERE.match(mistake.where)
                if match:
                    texts.append(match.group(2))
                    remark = mistake.where[match.end() :].strip()
                    if remark:
                        texts.append(remark.removeprefix("(").removesuffix(")"))
                else:
                    texts.append(mistake.where)
                for text in texts:
                    occurrences = found.setdefault(_escape(text), [])
                    if where not in occurrences:
                        occurrences.append(where)
    return found


def extract() -> dict[str, list[tuple[str, int]]]:
    """Every msgid, with where it comes from, in a stable order."""
    found: dict[str, list[tuple[str, int]]] = {}
    for text in i18n.HELPER_MESSAGES:
        found.setdefault(text, []).append(("bertcourse/grading/i18n.py", 0))
    for text in VALUES:
        found.setdefault(text, []).append(("scripts/i18n_feedback.py", 0))
    sources = [raised_messages(), mistake_messages()]
    sources += [source_messages(p) for p in sorted(SOURCES.glob("*.py"))]
    for source in sources:
        for text, where in source.items():
            found.setdefault(text, []).extend(w for w in where if w not in found.get(text, []))
    return found


# --- the catalogue ------------------------------------------------------------------------


def _new_po() -> polib.POFile:
    po = polib.POFile(wrapwidth=100)
    po.metadata = {
        "Project-Id-Version": "bertcourse feedback",
        "Language": LANG,
        "MIME-Version": "1.0",
        "Content-Type": "text/plain; charset=UTF-8",
        "Content-Transfer-Encoding": "8bit",
    }
    return po


def merge(po: polib.POFile, found: dict[str, list[tuple[str, int]]]) -> polib.POFile:
    """A catalogue with exactly the msgids of `found`, translations kept or carried as fuzzy."""
    old = {e.msgid: e for e in po if not e.obsolete}
    vanished = [m for m in old if m not in found and old[m].msgstr]
    merged = _new_po()
    merged.metadata = po.metadata or merged.metadata
    for msgid, where in found.items():
        entry = polib.POEntry(msgid=msgid, occurrences=[(f, str(n)) for f, n in where])
        if i18n.placeholders(msgid):
            entry.flags.append("python-brace-format")
        if msgid in old:
            entry.msgstr = old[msgid].msgstr
            if old[msgid].fuzzy:
                entry.flags.insert(0, "fuzzy")
                entry.previous_msgid = old[msgid].previous_msgid
        else:
            close = difflib.get_close_matches(msgid, vanished, n=1, cutoff=0.7)
            if close:
                entry.msgstr = old[close[0]].msgstr
                entry.flags.insert(0, "fuzzy")
                entry.previous_msgid = close[0]
        merged.append(entry)
    return merged


# identifiers a translation keeps as they are: dotted names, snake_case, camelCase
_IDENTIFIER = re.compile(
    r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[A-Za-z0-9]*_[A-Za-z0-9_]+|\b[a-z]+[A-Z]\w*|\b[A-Z][a-z]+[A-Z]\w*"
)


@functools.cache
def _book_checks():
    """scripts/i18n.py, the book's catalogue checks (numbers, inline code, math kept)."""
    spec = importlib.util.spec_from_file_location("book_i18n", ROOT / "scripts" / "i18n.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def faithfulness(msgid: str, msgstr: str, book=None) -> list[str]:
    """What a translation must keep: the placeholders, the identifiers, and (the book's own
    rules) every number, inline code and math."""
    out = []
    if sorted(i18n.placeholders(msgstr)) != sorted(i18n.placeholders(msgid)):
        out.append("placeholders differ")
    lost = [t for t in _IDENTIFIER.findall(msgid) if t != "e.g" and t not in msgstr]
    if lost:
        out.append(f"identifiers missing: {lost}")
    return out + (book or _book_checks()).invariant_problems(msgid, msgstr)


def problems(po: polib.POFile, found: dict[str, list[tuple[str, int]]]) -> list[str]:
    """What keeps the catalogue from being complete, current and faithful."""
    out = []
    book = _book_checks()
    entries = {e.msgid: e for e in po if not e.obsolete}
    out += [f"missing from {PO.name}: {m!r}" for m in found if m not in entries]
    out += [f"no longer extracted: {m!r}" for m in entries if m not in found]
    for msgid, entry in entries.items():
        if not entry.msgstr.strip():
            out.append(f"untranslated: {msgid!r}")
        elif entry.fuzzy:
            out.append(f"fuzzy: {msgid!r}")
        else:
            out += [
                f"{p}: {msgid!r} -> {entry.msgstr!r}"
                for p in faithfulness(msgid, entry.msgstr, book)
            ]
    return out


def compiled(po: polib.POFile) -> dict[str, str]:
    return {e.msgid: e.msgstr for e in po.translated_entries()}


def mo_problems(po: polib.POFile) -> list[str]:
    if not MO.exists():
        return [f"{MO.relative_to(ROOT)} is missing: run scripts/i18n_feedback.py compile"]
    shipped = {e.msgid: e.msgstr for e in polib.mofile(str(MO)) if e.msgid}
    if shipped != compiled(po):
        return [f"{MO.relative_to(ROOT)} is not compiled from {PO.name}: run compile"]
    return []


def cmd_update(_: argparse.Namespace) -> int:
    po = polib.pofile(str(PO), wrapwidth=100) if PO.exists() else _new_po()
    merged = merge(po, extract())
    PO.parent.mkdir(parents=True, exist_ok=True)
    merged.save(str(PO))
    untranslated = sum(1 for e in merged if not e.msgstr or e.fuzzy)
    print(f"{PO.relative_to(ROOT)}: {len(merged)} entries, {untranslated} to translate")
    return 0


def cmd_compile(_: argparse.Namespace) -> int:
    po = polib.pofile(str(PO))
    MO.parent.mkdir(parents=True, exist_ok=True)
    po.save_as_mofile(str(MO))
    print(f"{MO.relative_to(ROOT)}: {len(po.translated_entries())} translations")
    return 0


def cmd_check(_: argparse.Namespace) -> int:
    po = polib.pofile(str(PO))
    found = problems(po, extract()) + mo_problems(po)
    for line in found:
        print(line)
    print(f"{PO.relative_to(ROOT)}: {len(found)} problem(s)")
    return 1 if found else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, fn in (("update", cmd_update), ("check", cmd_check), ("compile", cmd_compile)):
        sub.add_parser(name).set_defaults(fn=fn)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
