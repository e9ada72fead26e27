"""Languages as configurations: which documents, which vocabularies, which normalization.

Everything the pretraining path needs to know about a language is one :class:`Language`
value; the code path is the same for every language. ``python -m bertcourse.pretrain
--lang CODE`` and ``load_corpus(..., lang=CODE)`` look the code up in :data:`LANGUAGES`.
The registry has two entries: ``"en"``, the standard library's docstrings
(:mod:`bertcourse.corpus`) with bert-base-uncased's vocabulary or a WordPiece vocabulary
trained on them, and ``"zh"``, the People's Daily of January 1998 with a character vocabulary
(:mod:`bertcourse.zh`). A language is an entry, not a copy of the English code: a module that
builds its :class:`Language` and calls :func:`register_language` when imported, named in
:data:`LANGUAGE_MODULES` so that ``--lang CODE`` imports it on first use.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertcourse import assets, corpus
from bertcourse.corpus import Document


@dataclass(frozen=True)
class Language:
    """One language of the pretraining path.

    Attributes:
        code: the ``--lang`` value (``"en"``).
        name: for messages (``"English"``).
        documents: the offline corpus, ``() -> list[Document]`` (deterministic: the same
            documents on every machine).
        corpus_name: what reports call the corpus (``"stdlib"``).
        corpus_version: bumped when the corpus rules change (keys the caches).
        corpus_digest: ``() -> str``, the SHA-256 of the bytes the documents are built from
            (keys the caches of what is built from them: vocabularies, tokenized corpora).
        pretrained_vocab: ``() -> Path`` of the ``vocab.txt`` that the tokenizer name
            ``"bert"`` loads (a published model's vocabulary), or None if there is none.
        lowercase: the normalizer lowercases and strips accents (uncased vocabularies).
        default_tokenizer: the tokenizer name a pretraining run uses unless told otherwise.
        vocabularies: more tokenizer names: name -> ``(cache_dir) -> Path`` of a ``vocab.txt``
            (Chinese: ``"chars"``, the training part's characters).
        is_heldout: ``(document name) -> bool``, a fixed held-out split of the documents;
            None: the name-hash rule of :func:`bertcourse.corpus.is_heldout`.
        recipe: the pretraining defaults that differ for this language
            (:class:`bertcourse.pretraining.config.PretrainConfig` fields).
    """

    code: str
    name: str
    documents: Callable[[], list[Document]]
    corpus_name: str
    corpus_version: int
    corpus_digest: Callable[[], str]
    pretrained_vocab: Callable[[], Path] | None = None
    lowercase: bool = True
    default_tokenizer: str = "wordpiece-8192"
    vocabularies: Mapping[str, Callable[[Path], Path]] = field(default_factory=dict)
    is_heldout: Callable[[str], bool] | None = None
    recipe: Mapping[str, Any] = field(default_factory=dict)


@functools.cache  # package data: it does not change while the process runs
def _stdlib_digest() -> str:
    return assets.file_digest(corpus.SHIPPED)  # the shipped extraction: the same on every Python


ENGLISH = Language(
    code="en",
    name="English",
    documents=corpus.stdlib_corpus,
    corpus_name="stdlib",
    corpus_version=corpus.CORPUS_VERSION,
    corpus_digest=_stdlib_digest,
    pretrained_vocab=assets.bert_vocab_path,
)

LANGUAGES: dict[str, Language] = {ENGLISH.code: ENGLISH}

# Languages defined in modules of their own (which call register_language when imported):
# code -> module, imported on first use, so that `import bertcourse` stays light and
# `--lang CODE` works without an import by hand.
LANGUAGE_MODULES: dict[str, str] = {"zh": "bertcourse.zh"}


def register_language(language: Language) -> Language:
    """Add ``language`` to :data:`LANGUAGES` (a code can be registered once)."""
    if language.code in LANGUAGES and LANGUAGES[language.code] != language:
        raise ValueError(f"language {language.code!r} is already registered")
    LANGUAGES[language.code] = language
    return language


def get_language(code: str | Language) -> Language:
    """The registered :class:`Language` of ``code`` (a Language is returned as it is)."""
    if isinstance(code, Language):
        return code
    if code not in LANGUAGES and code in LANGUAGE_MODULES:
        import importlib

        importlib.import_module(LANGUAGE_MODULES[code])  # registers the language
    try:
        return LANGUAGES[code]
    except KeyError:
        raise ValueError(
            f"unknown language {code!r}: the languages are {', '.join(language_codes())} "
            "(add one with bertcourse.languages.register_language)"
        ) from None


def language_codes() -> Sequence[str]:
    """Every language code that :func:`get_language` accepts."""
    return sorted(set(LANGUAGES) | set(LANGUAGE_MODULES))
