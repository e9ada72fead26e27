"""The tokenized corpus: documents as token ids, cached on disk, split into train and held-out.

``load_corpus("wordpiece-8192")`` reads a language's documents (:mod:`bertcourse.languages`;
English: :mod:`bertcourse.corpus`) or your own text files, tokenizes every sentence with
:func:`bertcourse.vocab.load_tokenizer` and caches the ids in one ``.npz`` file; the next
call reads the file. :mod:`bertcourse.loaders` turns the result into batches.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
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
    No [CLS]/[SEP] are added here (the NSP pair builder adds them). ``word_starts[d][s][t]``
    is 1 when token ``t`` begins a word (whole-word masking): its offset leaves a gap after
    the previous token's end, as transformers' whole-word collator decides.
    """

    names: list[str]
    documents: list[list[list[int]]]
    vocab: Vocab
    meta: dict = field(default_factory=dict)
    word_starts: list[list[list[int]]] | None = None

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
        starts = None if self.word_starts is None else [self.word_starts[i] for i in idx]
        return TokenizedCorpus(
            [self.names[i] for i in idx], [self.documents[i] for i in idx], self.vocab, self.meta,
            starts,
        )  # fmt: skip

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
        if self.word_starts is not None:
            arrays["word_starts"] = np.array(
                [b for d in self.word_starts for s in d for b in s], dtype=np.int8
            )
        assets.write_atomic(Path(path), lambda tmp: _write_npz(tmp, arrays))

    @classmethod
    def load(cls, path: str | Path) -> TokenizedCorpus:
        with np.load(path) as z:
            header = json.loads(str(z["header"]))
            flat, sent_lens, doc_lens = z["ids"], z["sent_lens"], z["doc_lens"]
            flat_starts = z["word_starts"] if "word_starts" in z else None
        sent_ends = np.cumsum(sent_lens)

        def nest(values: np.ndarray) -> list[list[list[int]]]:
            sentences = [a.tolist() for a in np.split(values, sent_ends[:-1])] if len(sent_lens) else []  # fmt: skip
            docs, i = [], 0
            for n in doc_lens.tolist():
                docs.append(sentences[i : i + n])
                i += n
            return docs

        starts = None if flat_starts is None else nest(flat_starts)
        return cls(header["names"], nest(flat), Vocab(**header["vocab"]), header.get("meta", {}),
                   starts)  # fmt: skip


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``np.savez``'s format with a fixed timestamp in the zip headers (``np.savez`` writes the
    time of writing), so the same corpus gives the same bytes on every machine and run."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, value in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with z.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(value), allow_pickle=False)


def tokenize_documents(documents: Sequence[Document], tokenizer: Tokenizer) -> TokenizedCorpus:
    """Tokenize every sentence (batched, in Rust) into a :class:`TokenizedCorpus`."""
    flat = [s for d in documents for s in d.sentences]
    encodings = tokenizer.encode_batch(flat, add_special_tokens=False) if flat else []
    docs, starts, i = [], [], 0
    for d in documents:
        sents = [e for e in encodings[i : i + len(d.sentences)] if e.ids]
        docs.append([e.ids for e in sents])
        starts.append([_word_starts(e.offsets) for e in sents])
        i += len(d.sentences)
    vocab = Vocab.from_tokenizer(tokenizer)
    return TokenizedCorpus([d.name for d in documents], docs, vocab, word_starts=starts)


def _word_starts(offsets: Sequence[tuple[int, int]]) -> list[int]:
    """1 where a token begins a word: the first token, and each token after a gap."""
    return [int(i == 0 or offsets[i][0] > offsets[i - 1][1]) for i in range(len(offsets))]


def _text_files_digest(text_files: Sequence[str | Path]) -> str:
    """SHA-256 over the names (relative to what was given) and bytes of every file of
    ``text_files``, in sorted order: the same text gives the same key wherever it lies."""
    h = hashlib.sha256()
    for given in map(Path, text_files):
        files = sorted(given.rglob("*.txt")) if given.is_dir() else [given]
        for file in files:
            h.update(str(file.relative_to(given) if given.is_dir() else file.name).encode())
            h.update(b"\0")
            h.update(assets.file_digest(file.resolve()).encode())
    return h.hexdigest()


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
            (see :func:`bertcourse.corpus.load_text_files`); their names and bytes key the
            cache.
        documents: ``"file"`` or ``"block"``, for ``text_files``.
        cache_dir: where to cache (default :func:`bertcourse.assets.cache_dir`).

    The cache key covers the corpus rules' version, the bytes the documents are built from
    (:attr:`Language.corpus_digest`, or the text files'), the tokenizer's vocabulary, and the
    source of the code that extracts and tokenizes, so a change to any of them rebuilds, and
    the file is the same, byte for byte, on every machine.
    """
    language = get_language(lang)
    cache = assets.cache_dir(cache_dir)
    tok = fast_tokenizer(tokenizer, lang=language, cache_dir=cache)
    sources = _text_files_digest(text_files) if text_files else language.corpus_digest()
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
