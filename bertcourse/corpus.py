"""The offline English corpus: documents and sentences from the standard library's docstrings.

The text is the docstrings of Python's standard library plus the language-reference topics
that ship with ``pydoc`` (``pydoc_data``), extracted by fixed rules (below). Nothing is
downloaded. The extraction ran once, on CPython 3.11.7, and its result ships with the package
(``bertcourse/corpus_data/stdlib-docstrings.jsonl.gz``, 553 documents, 18,591 sentences):
every installation then reads the same corpus, whatever its Python. (Measured: Debian's
3.11.2 leaves out ``idlelib``, ``turtledemo`` and ``tkinter`` and its docstrings differ in
places, so an extraction there gives 473 documents, and every number the book asserts about
the corpus would change.) ``stdlib_corpus(stdlib=path)`` runs the extraction on another
standard library; ``python -m bertcourse.corpus`` rewrites the shipped file.

Corpus rules (decisions, stated once):

- Document = one standard-library source file (all its docstrings in source order: module,
  then classes and functions depth-first) or one ``pydoc`` topic. Files are read in sorted
  path order; ``test``/``tests``/``idle_test``/``site-packages`` folders and ``test_*.py``
  are skipped. Sources are parsed with :mod:`ast`, never imported (no side effects).
- Paragraph = a block between blank lines. A paragraph is dropped when it holds a doctest
  (``>>>``), when its first line is indented (literal blocks, grammar rules, indented
  lists), or when it has a heading underline (a line of punctuation only). A paragraph is cut
  at a line ending in ``::`` (reST: a code block follows) and at the first line indented
  deeper than its first line. Exact duplicate paragraphs are kept once (first occurrence).
- reST markup is reduced to its text (``:mod:`json``` -> ``json``, ````x```` -> ``x``).
- Sentences are split after ``.``, ``!`` or ``?`` followed by a space and a capital letter,
  digit or opening quote/bracket, except after abbreviations (e.g., i.e., etc., ...).
  A sentence is kept when it has at least 3 words, at least 60% letters or spaces, and does
  not parse as Python code (``ast.parse``), so stray code lines cannot slip through.
- Documents with fewer than 2 sentences are dropped (NSP needs a next sentence).
- Held-out documents: those whose ``zlib.crc32(name) % 100 < heldout_percent`` (default 5):
  the split does not depend on the order or number of the other documents.

Your own text: :func:`load_text_files` (one document per file, or per blank-line block).
"""

from __future__ import annotations

import ast
import gzip
import json
import os
import re
import sysconfig
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bertcourse.assets import PACKAGE_DATA

# Bumped whenever a rule above changes, so old caches are not reused.
CORPUS_VERSION = 3
SHIPPED = PACKAGE_DATA / "stdlib-docstrings.jsonl.gz"

# --------------------------------------------------------------------------------------------
# Documents and sentences
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    """One document: a name (where it came from) and its sentences, in order."""

    name: str
    sentences: tuple[str, ...]


_ABBREVIATIONS = frozenset(
    "e.g. i.e. etc. vs. cf. al. approx. resp. incl. no. nos. fig. figs. eq. sec. ch. "
    "mr. mrs. ms. dr. st. jr. sr. prof. vol. pp. ed. eds. ver. v.".split()
)
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9])")
_PUNCT_ONLY = re.compile(r"^[\s\W_]+$")
_ROLE = re.compile(r":[\w:.-]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")  # :mod:`json`, :func:`~a.b <x>`
_LITERAL = re.compile(r"``(.+?)``")
_BACKTICK = re.compile(r"`([^`]+)`_{0,2}")
_EMPHASIS = re.compile(r"(?<![\w*])\*{1,2}([^*\s][^*]*?)\*{1,2}(?![\w*])")
_URL = re.compile(r"<https?://[^>\s]*>|https?://[^\s<>\"]*[^\s<>\".,;:)]")


def clean_markup(text: str) -> str:
    """Reduce reST/Markdown markup to plain text: roles, literals, emphasis, URLs."""
    text = _ROLE.sub(r"\1", text)
    text = _LITERAL.sub(r"\1", text)
    text = _BACKTICK.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\1", text)
    text = _URL.sub("", text)
    return re.sub(r"\s+", " ", text).strip()


def split_sentences(text: str) -> list[str]:
    """Split one paragraph of plain text into sentences (rule in the module docstring)."""
    text = re.sub(r"\s+", " ", text).strip()
    if not text:
        return []
    sentences, start = [], 0
    for m in _BOUNDARY.finditer(text):
        before = text[start : m.start()].rsplit(" ", 1)[-1].lower()
        # "e.g. Foo", "J. Smith", "sec. 3": not the end of a sentence.
        if before in _ABBREVIATIONS or re.fullmatch(r"[a-z]\.", before):
            continue
        sentences.append(text[start : m.end()].strip())
        start = m.end()
    sentences.append(text[start:].strip())
    return [s for s in sentences if s]


def _parses_as_python(text: str) -> bool:
    """True when ``text`` is valid Python on its own (a code line, not prose)."""
    for candidate in (text, text + "\n    pass"):
        try:
            ast.parse(candidate)
            return True
        except (SyntaxError, ValueError):
            pass
    return False


_SIGNATURE = re.compile(r"^(async def |def |class )?[\w.]+\(.*\)(\s*->.*)?:?$")


def _is_code_line(line: str) -> bool:
    """A line that is valid Python on its own and has code punctuation, or a signature
    such as ``class pdb.Pdb(completekey='tab')`` (reference pages list them alone on a line)."""
    line = line.strip()
    if _SIGNATURE.match(line):
        return True
    return any(c in line for c in "()[]{}=") and _parses_as_python(line)


def is_prose_sentence(sentence: str) -> bool:
    """The sentence filter: >= 3 words, >= 60% letters/spaces, and not parseable Python."""
    words = sentence.split()
    if len(words) < 3 or ">>>" in sentence:
        return False
    letters = sum(c.isalpha() or c == " " for c in sentence)
    if letters < 0.6 * len(sentence):
        return False
    return not _parses_as_python(sentence)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def prose_paragraphs(text: str) -> list[str]:
    """The prose paragraphs of a docstring or doc page, each joined into one line.

    Rules in the module docstring: doctest paragraphs, indented blocks and headings are
    dropped; a paragraph is cut at ``::`` and at a deeper-indented line.
    """
    blocks = re.split(r"\n[ \t]*\n", text.expandtabs(8))
    out = []
    for block in blocks:
        lines = [line.rstrip() for line in block.split("\n") if line.strip()]
        if not lines or _indent(lines[0]) > 0:
            continue
        if any(line.lstrip().startswith((">>>", "...")) for line in lines):
            continue
        if any(_PUNCT_ONLY.match(line) for line in lines):
            continue
        kept = []
        for line in lines:
            if _indent(line) > 0 and kept and _indent(line) > _indent(lines[0]):
                break  # an indented block (code, a table) starts here
            if _is_code_line(line):
                continue  # "t = Timer(30.0, f)", "object.__iadd__(self, other)"
            if line.endswith("::"):
                kept.append(line[:-1])  # reST "text::" reads as "text:"; code follows
                break
            kept.append(line)
        out.append(" ".join(line.strip() for line in kept))
    return out


def document_from_text(name: str, texts: Iterable[str], seen: set[str] | None = None) -> Document:
    """Build a :class:`Document` from raw docstrings/pages, applying every filter.

    ``seen`` (shared across documents) drops exact duplicate paragraphs after the first.
    """
    sentences: list[str] = []
    for text in texts:
        for paragraph in prose_paragraphs(text):
            paragraph = clean_markup(paragraph)
            if seen is not None:
                if paragraph in seen:
                    continue
                seen.add(paragraph)
            sentences.extend(s for s in split_sentences(paragraph) if is_prose_sentence(s))
    return Document(name, tuple(sentences))


def _docstrings_in_order(tree: ast.AST) -> list[str]:
    """Docstrings of a module and its classes/functions, depth-first in source order."""
    out = []
    doc = ast.get_docstring(tree, clean=True)  # type: ignore[arg-type]
    if doc:
        out.append(doc)
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            out.extend(_docstrings_in_order(node))
    return out


_SKIP_DIRS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}


def stdlib_source_files(stdlib: str | Path | None = None) -> list[Path]:
    """The standard library's ``.py`` files, sorted by relative path, tests excluded."""
    root = Path(stdlib or sysconfig.get_paths()["stdlib"])
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [
            d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(("config-", "lib-"))
        ]
        for f in filenames:
            if f.endswith(".py") and not f.startswith("test_"):
                files.append(Path(dirpath) / f)
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def stdlib_corpus(stdlib: str | Path | None = None, *, topics: bool = True) -> list[Document]:
    """The offline corpus: standard-library docstrings plus ``pydoc`` topics, as documents.

    Without arguments, the shipped extraction (the same on every installation). With `stdlib`
    (a folder) or `topics=False`, the extraction runs here on that standard library
    (deterministic for a given Python version; ~5 s on one core).
    """
    if stdlib is None and topics:
        return read_shipped()
    return extract_stdlib_corpus(stdlib, topics=topics)


def read_shipped(path: Path = SHIPPED) -> list[Document]:
    """The shipped corpus (JSON lines, gzip: {"name": ..., "sentences": [...]} per document)."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [Document(r["name"], tuple(r["sentences"])) for r in rows]


def write_shipped(documents: Sequence[Document], path: Path = SHIPPED) -> None:
    text = "".join(
        json.dumps({"name": d.name, "sentences": list(d.sentences)}, ensure_ascii=False) + "\n"
        for d in documents
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text.encode("utf-8"), 9, mtime=0))


def extract_stdlib_corpus(
    stdlib: str | Path | None = None, *, topics: bool = True
) -> list[Document]:
    """Extract the corpus from a standard library (this Python's by default)."""
    root = Path(stdlib or sysconfig.get_paths()["stdlib"])
    seen: set[str] = set()
    docs = []
    for path in stdlib_source_files(root):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue  # a few files are deliberately invalid (lib2to3 data); skip them
        name = "stdlib/" + path.relative_to(root).as_posix()
        docs.append(document_from_text(name, _docstrings_in_order(tree), seen))
    if topics:
        try:
            from pydoc_data.topics import topics as pydoc_topics
        except ImportError:  # pragma: no cover - some distributions strip pydoc_data
            pydoc_topics = {}
        for key in sorted(pydoc_topics):
            docs.append(document_from_text("pydoc/" + key, [pydoc_topics[key]], seen))
    return [d for d in docs if len(d.sentences) >= 2]


def load_text_files(
    paths: str | Path | Sequence[str | Path],
    *,
    documents: str = "file",
    encoding: str = "utf-8",
) -> list[Document]:
    """Load your own plain-text files as documents.

    Args:
        paths: files, or folders (every ``*.txt`` inside, recursively, sorted).
        documents: ``"file"`` (default): each file is one document, its paragraphs (blocks
            between blank lines) split into sentences; good for books and articles.
            ``"block"``: each blank-line-separated block is one document, one sentence per
            line - the input format of the original BERT ``create_pretraining_data.py``.
        encoding: the files' encoding.

    No code filter is applied (your text is taken as prose); lines are joined within a
    paragraph and markup is left as it is. Documents with fewer than 2 sentences are dropped.
    """
    if documents not in ("file", "block"):
        raise ValueError(f"documents must be 'file' or 'block', got {documents!r}")
    if isinstance(paths, str | Path):
        paths = [paths]
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(p.rglob("*.txt")))
        elif p.is_file():
            files.append(p)
        else:
            raise FileNotFoundError(f"no such file or folder: {p}")
    out = []
    for f in files:
        text = f.read_text(encoding=encoding)
        blocks = [b for b in re.split(r"\n[ \t]*\n", text) if b.strip()]
        if documents == "file":
            sentences = [s for b in blocks for s in split_sentences(b)]
            out.append(Document(str(f), tuple(sentences)))
        else:
            for i, b in enumerate(blocks):
                lines = tuple(line.strip() for line in b.split("\n") if line.strip())
                out.append(Document(f"{f}#{i}", lines))
    return [d for d in out if len(d.sentences) >= 2]


def is_heldout(name: str, heldout_percent: float = 5.0) -> bool:
    """The held-out rule: ``crc32(name) % 100 < heldout_percent`` (independent of order)."""
    return zlib.crc32(name.encode("utf-8")) % 100 < heldout_percent


if __name__ == "__main__":  # python -m bertcourse.corpus: rewrite the shipped extraction
    import platform

    documents = extract_stdlib_corpus()
    write_shipped(documents)
    count = sum(len(d.sentences) for d in documents)
    print(
        f"{SHIPPED}: {len(documents)} documents, {count} sentences (Python {platform.python_version()})"
    )
