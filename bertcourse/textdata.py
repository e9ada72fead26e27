"""The tokenized corpus: documents as token ids, cached on disk, split into train and held-out.

``load_corpus("wordpiece-8192")`` reads a language's documents (:mod:`bertcourse.languages`;
English: :mod:`bertcourse.corpus`) or your own text files, tokenizes every sentence with
:func:`bertcourse.vocab.load_tokenizer` and caches the ids in one ``.npz`` file; the next
call reads the file. :mod:`bertcourse.loaders` turns the result into batches.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bertcourse import assets
from bertcourse import corpus as _corpus_module
from bertcourse.corpus import Document, is_heldout, load_text_files
from bertcourse.languages import Language, get_language
from bertcourse.vocab import Vocab, fast_tokenizer

if TYPE_CHECKING:  # pragma: no cover
    from tokenizers import Tokenizer


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
        sent_lens = np.array([len(s) for d in self.documents for s in d], dtype=np.int32)
        doc_lens = np.array([len(d) for d in self.documents], dtype=np.int32)
        flat = np.array([t for d in self.documents for s in d for t in s], dtype=np.int32)
        header = json.dumps({"names": self.names, "vocab": self.vocab.__dict__, "meta": self.meta})
        arrays = dict(ids=flat, sent_lens=sent_lens, doc_lens=doc_lens, header=np.array(header))
        assets.write_atomic(Path(path), lambda tmp: np.savez(tmp, **arrays))

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


def _text_file_sources(text_files: Sequence[str | Path]) -> list[tuple[str, int, int]]:
    """Path, size and mtime of every file of ``text_files`` (they key the cache)."""
    files = sorted(
        q for t in text_files for q in (Path(t).rglob("*.txt") if Path(t).is_dir() else [Path(t)])
    )
    return [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files]


def load_corpus(
    tokenizer: str = "bert",
    *,
    lang: str | Language = "en",
    text_files: Sequence[str | Path] | None = None,
    documents: str = "file",
    cache_dir: str | Path | None = None,
) -> tuple[TokenizedCorpus, Tokenizer]:
    """The tokenized corpus and its tokenizer, from the on-disk cache when possible.

    Args:
        tokenizer: ``"bert"`` or ``"wordpiece-N"`` (see :func:`bertcourse.vocab.load_tokenizer`).
        lang: the language (:mod:`bertcourse.languages`): its documents, its vocabularies.
        text_files: your own files/folders instead of the language's corpus
            (see :func:`bertcourse.corpus.load_text_files`); their paths, sizes and mtimes
            key the cache.
        documents: ``"file"`` or ``"block"``, for ``text_files``.
        cache_dir: where to cache (default :func:`bertcourse.assets.cache_dir`).

    The cache key covers the corpus rules' version, the corpus's source (for English: the
    Python version and stdlib path), the tokenizer's vocabulary, and the source of the code
    that extracts and tokenizes, so a change to any of them rebuilds.
    """
    language = get_language(lang)
    cache = assets.cache_dir(cache_dir)
    tok = fast_tokenizer(tokenizer, lang=language, cache_dir=cache)
    sources = _text_file_sources(text_files) if text_files else language.corpus_source()
    vocab_hash = hashlib.sha256(tok.to_str().encode("utf-8")).hexdigest()
    version = (language.code, language.corpus_version)
    key = assets.cache_key(version, sources, documents, vocab_hash, _source_hash())
    path = cache / f"corpus-{tokenizer}-{key}.npz"
    if path.is_file():
        return TokenizedCorpus.load(path), tok
    if text_files:
        docs = load_text_files(text_files, documents=documents)
    else:
        docs = language.documents()
    corpus = tokenize_documents(docs, tok)
    source = "files" if text_files else language.corpus_name
    corpus.meta = {"tokenizer": tokenizer, "source": source, "lang": language.code}
    corpus.save(path)
    return corpus, tok


def _source_hash() -> str:
    """The corpus rules and the tokenization code: a change to either rebuilds the cache."""
    import bertcourse.vocab

    h = hashlib.sha256(Path(_corpus_module.__file__).read_bytes())
    h.update(_corpus_module.SHIPPED.read_bytes())  # the shipped extraction itself
    h.update(Path(__file__).read_bytes())
    h.update(Path(bertcourse.vocab.__file__).read_bytes())
    return h.hexdigest()[:16]
