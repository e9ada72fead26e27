"""Known mistakes of the tokenization exercises (chapter 0): what each gives, computed.

Each `compute` takes the arguments of the part's reference: `(word)` for the punctuation
split, `(text)` for the basic tokenizer, `(word, vocab)` for WordPiece and
`(ids_a, ids_b, max_length, cls_id=101, sep_id=102, pad_id=0)` for a pair.
"""

from __future__ import annotations

import string
import unicodedata
from collections.abc import Callable

from bertcourse import tokenization as tk
from bertcourse.grading.mistakes import Mistake

PUNCTUATION = "chapter 0, 'Stage 1: the basic tokenizer' (BERT's punctuation)"
BASIC = "chapter 0, 'Stage 1: the basic tokenizer'"
WORDPIECE = "chapter 0, 'Stage 2: WordPiece, greedy longest match first'"
PAIRS = "chapter 0, 'Stage 3: special tokens, pairs, truncation, the mask'"


# --- the punctuation split ------------------------------------------------------------------


def _split(word: str, is_punct: Callable[[str], bool]) -> list[str]:
    pieces: list[str] = []
    start_new = True
    for char in word:
        if is_punct(char):
            pieces.append(char)
            start_new = True
        else:
            if start_new:
                pieces.append("")
                start_new = False
            pieces[-1] += char
    return pieces


def _split_runs(word: str) -> list[str]:
    """A run of punctuation kept as one word."""
    pieces: list[str] = []
    previous = None
    for char in word:
        kind = tk.is_punctuation(char)
        if kind != previous:
            pieces.append("")
        pieces[-1] += char
        previous = kind
    return pieces


# --- the basic tokenizer --------------------------------------------------------------------


def _basic(
    text: str,
    *,
    form: str | None = "NFD",
    lower: Callable[[str], str] | None = tk.lowercase,
    chinese: bool = True,
) -> list[str]:
    text = tk.clean_text(text)
    if chinese:
        text = tk.space_chinese_chars(text)
    if form is not None:
        text = "".join(
            c for c in unicodedata.normalize(form, text) if unicodedata.category(c) != "Mn"
        )
    if lower is not None:
        text = lower(text)
    return [piece for word in text.split() for piece in tk.split_on_punctuation(word)]


# --- WordPiece ------------------------------------------------------------------------------


def _wordpiece(
    word: str,
    vocab: list[str],
    *,
    first: str = "",
    rest: str = "##",
    keep_partial: bool = False,
    max_chars: int = 100,
    length: Callable[[str], int] = len,
) -> list[str]:
    pieces_in = set(vocab)
    if length(word) > max_chars:
        return ["[UNK]"]
    pieces: list[str] = []
    start = 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = (first if start == 0 else rest) + word[start:end]
            if piece in pieces_in:
                break
            end -= 1
        if end == start:
            return pieces + ["[UNK]"] if keep_partial else ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


def _utf8_bytes(word: str) -> int:
    return len(word.encode("utf-8"))


def _from_the_end(word: str, vocab: list[str]) -> list[str]:
    """The longest match taken at the end of the word, right to left."""
    pieces_in = set(vocab)
    if len(word) > 100:
        return ["[UNK]"]
    pieces: list[str] = []
    end = len(word)
    while end > 0:
        start = 0
        while start < end:
            piece = ("##" if start else "") + word[start:end]
            if piece in pieces_in:
                break
            start += 1
        if start == end:
            return ["[UNK]"]
        pieces.insert(0, piece)
        end = start
    return pieces


def _shortest_first(word: str, vocab: list[str]) -> list[str]:
    pieces_in = set(vocab)
    if len(word) > 100:
        return ["[UNK]"]
    pieces: list[str] = []
    start = 0
    while start < len(word):
        for end in range(start + 1, len(word) + 1):
            piece = ("##" if start else "") + word[start:end]
            if piece in pieces_in:
                break
        else:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


# --- pairs ----------------------------------------------------------------------------------


def _one_at_a_time(len_a: int, len_b: int, places: int) -> tuple[int, int]:
    """The original truncate_seq_pair: one token from the longer one (B on a tie)."""
    while len_a + len_b > places:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return len_a, len_b


def _a_first(len_a: int, len_b: int, places: int) -> tuple[int, int]:
    cut_a = min(len_a, max(0, len_a + len_b - places))
    return len_a - cut_a, min(len_b, places - (len_a - cut_a))


def _only_second(len_a: int, len_b: int, places: int) -> tuple[int, int]:
    return len_a, max(0, min(len_b, places - len_a))


def _pair(
    ids_a: list[int],
    ids_b: list[int],
    max_length: int,
    cls_id: int = 101,
    sep_id: int = 102,
    pad_id: int = 0,
    *,
    lengths: Callable[[int, int, int], tuple[int, int]] | None = None,
    last_sep_type: int = 1,
    pad_type: int = 0,
    mask_padding: bool = True,
    specials: int = 3,
) -> dict[str, list[int]]:
    places = max_length - specials
    if lengths is None:
        keep_a, keep_b = tk.truncated_lengths(len(ids_a), len(ids_b), places)
    else:
        keep_a, keep_b = lengths(len(ids_a), len(ids_b), places)
    input_ids = [cls_id, *ids_a[:keep_a], sep_id, *ids_b[:keep_b], sep_id]
    types = [0] * (keep_a + 2) + [1] * keep_b + [last_sep_type]
    n_pad = max_length - len(input_ids)
    return {
        "input_ids": input_ids + [pad_id] * n_pad,
        "token_type_ids": types + [pad_type] * n_pad,
        "attention_mask": [1] * len(input_ids) + [0 if mask_padding else 1] * n_pad,
    }


CATALOGUE: dict[str, list[Mistake]] = {
    "split": [
        Mistake(
            "string.punctuation (ASCII only)",
            "BERT's punctuation is every ASCII non-alphanumeric character plus Unicode's P* "
            "categories, so '¿', '—' and '«' split too: use the given is_punctuation",
            PUNCTUATION,
            lambda word: _split(word, lambda c: c in string.punctuation),
        ),
        Mistake(
            "Unicode's punctuation categories only (P*)",
            "BERT counts every ASCII non-alphanumeric character as punctuation, '$', '^', '+', "
            "'|' and '~' included, though Unicode calls them symbols: use is_punctuation",
            PUNCTUATION,
            lambda word: _split(word, lambda c: unicodedata.category(c).startswith("P")),
        ),
        Mistake(
            "a run of punctuation kept as one word",
            "each punctuation character is a word of its own: '?!' is ['?', '!']",
            PUNCTUATION,
            _split_runs,
        ),
    ],
    "basic": [
        Mistake(
            "the accents kept",
            "an uncased model strips them: NFD, then drop the combining marks (Mn)",
            BASIC,
            # as learners write it: Python's str.lower on the whole text (a mistake of its own,
            # below, that a learner who keeps the accents almost always makes too)
            lambda text: _basic(text, form=None, lower=str.lower),
        ),
        Mistake(
            "no lowercasing (a cased lookup)",
            "bert-base-uncased's vocabulary has no capitals: lowercase every character",
            BASIC,
            lambda text: _basic(text, lower=None),
        ),
        Mistake(
            "str.lower on the whole text (a word-final 'ς')",
            "tokenizers lowercases each character on its own, so a final Σ becomes σ",
            BASIC,
            lambda text: _basic(text, lower=str.lower),
        ),
        Mistake(
            "NFKD instead of NFD",
            "the compatibility decomposition also rewrites ligatures, fractions and numerals "
            "('ﬁ' -> 'fi', '½' -> '1⁄2'); BERT decomposes with NFD only",
            BASIC,
            lambda text: _basic(text, form="NFKD"),
        ),
        Mistake(
            "the CJK ideographs not spaced",
            "each CJK ideograph is a word of its own: space_chinese_chars before splitting",
            BASIC,
            lambda text: _basic(text, chinese=False, lower=str.lower),  # str.lower, as above
        ),
    ],
    "wordpiece": [
        Mistake(
            "no '##' on the pieces that continue a word",
            "a piece after the first is looked up as '##' + piece",
            WORDPIECE,
            lambda word, vocab: _wordpiece(word, vocab, rest=""),
        ),
        Mistake(
            "'##' on the first piece too",
            "the first piece of a word is looked up without the prefix",
            WORDPIECE,
            lambda word, vocab: _wordpiece(word, vocab, first="##"),
        ),
        Mistake(
            "the pieces found before a gap kept, then [UNK]",
            "a word that cannot be covered is one [UNK], never a partial split",
            WORDPIECE,
            lambda word, vocab: _wordpiece(word, vocab, keep_partial=True),
        ),
        Mistake(
            "the shortest match first",
            "WordPiece is greedy: the longest piece in the vocabulary at each position",
            WORDPIECE,
            _shortest_first,
        ),
        Mistake(
            "[UNK] for a word of exactly 100 characters",
            "only words longer than max_input_chars_per_word (100) become [UNK] at once",
            WORDPIECE,
            lambda word, vocab: _wordpiece(word, vocab, max_chars=99),
        ),
        Mistake(
            "the length limit counted in UTF-8 bytes, not characters",
            "max_input_chars_per_word counts characters (len(word)), as transformers and "
            "tokenizers do: 'ω' is one character and two bytes",
            WORDPIECE,
            lambda word, vocab: _wordpiece(word, vocab, length=_utf8_bytes),
        ),
        Mistake(
            "the longest match taken from the end of the word",
            "WordPiece reads left to right: the longest piece that starts at the current position",
            WORDPIECE,
            _from_the_end,
        ),
    ],
    "pair": [
        Mistake(
            "the original truncate_seq_pair (one token at a time)",
            "transformers 5 (tokenizers) gives each text half the places and the odd one to "
            "the longer text, B on a tie; popping one at a time leaves it to A",
            PAIRS,
            lambda *a, **k: _pair(*a, **k, lengths=_one_at_a_time),
        ),
        Mistake(
            "A truncated first",
            "longest_first cuts the longer text, not always A",
            PAIRS,
            lambda *a, **k: _pair(*a, **k, lengths=_a_first),
        ),
        Mistake(
            "only the second text truncated",
            "longest_first cuts the longer text, not always B",
            PAIRS,
            lambda *a, **k: _pair(*a, **k, lengths=_only_second),
        ),
        Mistake(
            "the last [SEP] with token type 0",
            "B's [SEP] belongs to segment B: token type 1",
            PAIRS,
            lambda *a, **k: _pair(*a, **k, last_sep_type=0),
        ),
        Mistake(
            "padding with token type 1",
            "padding has token type 0 (transformers' pad_token_type_id)",
            PAIRS,
            lambda *a, **k: _pair(*a, **k, pad_type=1),
        ),
        Mistake(
            "padding counted in the attention mask",
            "the attention mask is 1 for a token and 0 for padding",
            PAIRS,
            lambda *a, **k: _pair(*a, **k, mask_padding=False),
        ),
        Mistake(
            "room for two special tokens instead of three",
            "a pair has three: [CLS], and a [SEP] after each text",
            PAIRS,
            lambda *a, **k: _pair(*a, **k, specials=2),
        ),
    ],
}


# --- probes: inputs on which these mistakes all differ (tests/test_catalogues.py) -----------

_TOY = ["una", "un", "##ffa", "##aff", "##ble", "##able", "a", "##b", "##un", "ab", "##a"]

PROBES: dict[str, Callable[[], list[tuple[tuple, dict]]]] = {
    "split": lambda: [(("don't¿$x?!«a»",), {}), (("a—b^c",), {})],
    "basic": lambda: [  # one feature each: a learner's other slip does not hide the first
        (("Crème brûlée",), {}),
        (("Hello WORLD",), {}),
        (("ΟΔΟΣ ΣΟΦΟΣ",), {}),
        (("ﬁne ½",), {}),
        (("中文abc",), {}),
    ],
    "wordpiece": lambda: [
        (("unaffable", _TOY), {}),
        (("unaffablex", _TOY), {}),
        (("ab", _TOY), {}),
        (("aab", _TOY), {}),
        (("a" * 100, _TOY), {}),
        (("ω" * 70, [*_TOY, "ω", "##ω"]), {}),
        (("bab", ["b", "##ab", "ba", "##b"]), {}),
    ],
    "pair": lambda: [
        (([1, 2, 3, 4, 5], [6, 7, 8], 9), {}),
        (([1, 2], [3, 4, 5, 6, 7, 8], 8), {}),
        (([1, 2], [3], 9), {}),
        (([1, 2, 3], [4, 5, 6], 6), {}),
        (([1], [2, 3], 5), {}),
        (([1, 2], [3], 5), {}),
        (([], [], 5), {}),
    ],
}
