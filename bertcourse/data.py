"""Text for pretraining: an offline English corpus, tokenization, a cache, and DataLoaders.

This module is the front door and holds no code of its own; the work is split by stage,
each module importing only the ones above it:

- :mod:`bertcourse.assets`: where the shipped files and the cache are;
- :mod:`bertcourse.corpus`: text extraction (documents and sentences, the rules below);
- :mod:`bertcourse.languages`: a language as a configuration (documents, vocabularies);
- :mod:`bertcourse.vocab`: the tokenizers (:func:`load_tokenizer`) and :class:`Vocab`;
- :mod:`bertcourse.textdata`: the tokenized corpus with its on-disk cache;
- :mod:`bertcourse.loaders`: NSP pairs + MLM masks as DataLoaders, packed or padded.

Every public name of those modules can also be imported from here.

The corpus is on every Python installation: the docstrings of the standard library's own
source files plus the language-reference topics that ship with ``pydoc`` (``pydoc_data``).
Nothing is downloaded. Code is filtered out by fixed rules, so the same Python version always
gives the same documents, sentences and tokens.

Pipeline, one function per step::

    documents = stdlib_corpus()                       # list[Document], sentences as str
    tokenizer = load_tokenizer("bert")                # bert-base-uncased WordPiece (fast)
    corpus = tokenize_documents(documents, tokenizer) # token ids
    corpus, tokenizer = load_corpus("bert")           # the two steps above, cached on disk
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

# Re-exports only: bertcourse.data is the front door of the modules below.
from bertcourse.assets import bert_vocab_path  # noqa: F401
from bertcourse.assets import cache_dir as default_cache_dir  # noqa: F401
from bertcourse.corpus import (  # noqa: F401
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
from bertcourse.languages import LANGUAGES, Language, get_language  # noqa: F401
from bertcourse.loaders import (  # noqa: F401
    MlmCollator,
    NspPairs,
    PackedMlmCollator,
    PackedNspPairs,
    eval_batches,
    mix_seed,
    pretraining_dataloader,
)
from bertcourse.textdata import TokenizedCorpus, load_corpus, tokenize_documents  # noqa: F401
from bertcourse.vocab import (  # noqa: F401
    SPECIAL_TOKENS,
    Vocab,
    bert_tokenizer,
    fast_tokenizer,
    load_tokenizer,
    train_wordpiece,
)

# Earlier names, kept so that existing code keeps working: the fast tokenizer of a vocabulary
# name, and the seed mixer.
corpus_tokenizer = fast_tokenizer
_mix_seed = mix_seed
