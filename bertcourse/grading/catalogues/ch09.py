"""Known mistakes of the Chinese BERT exercises (chapter 9): what each gives, computed.

Each `compute` takes the arguments of its part's reference:

- `isolate`: `(text)` -> the text with a space on each side of every CJK ideograph
  (`bertcourse.tokenization.space_chinese_chars`);
- `whole_words`: `(word_ids, rng, masked_lm_prob=0.15, max_predictions=20)` -> the sorted
  positions whole-word masking chooses (`bertcourse.grading.references.whole_word_positions`);
  every mistake draws from `rng` as the learner's code would;
- `bmes`: `(words)` -> one BMES tag per character (`bertcourse.zh.bmes_tags`);
- `read_bmes`: `(chars, tags)` -> the words the tags mark, read leniently
  (`bertcourse.grading.references.words_from_tags_lenient`).
"""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Callable, Sequence

from bertcourse.grading.mistakes import Mistake
from bertcourse.tokenization import CJK_RANGES

CHINESE = "chapter 9, 'Which characters are \"Chinese\"'"
WWM = "chapter 9, 'Whole-word masking'"
TAGS = "chapter 9, 'Word segmentation as a token-level task'"
BUDGET = "chapter 3, 'The two rules'"

# --- part 1: isolating CJK ideographs -----------------------------------------------------

Ranges = Sequence[tuple[int, int]]
COMPATIBILITY = ((0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _isolate(text: str, is_cjk: Callable[[str], bool], spaced: str = " {} ") -> str:
    return "".join(spaced.format(c) if is_cjk(c) else c for c in text)


def _in_ranges(ranges: Ranges) -> Callable[[str], bool]:
    return lambda c: any(lo <= ord(c) <= hi for lo, hi in ranges)


def _ranges(text: str, ranges: Ranges) -> str:
    return _isolate(text, _in_ranges(ranges))


def _extension_e_from_unicode(ranges: Ranges) -> list[tuple[int, int]]:
    return [(0x2B820, hi) if lo == 0x2B920 else (lo, hi) for lo, hi in ranges]


def _east_asian_wide(c: str) -> bool:
    return unicodedata.east_asian_width(c) in ("W", "F")


def _unified_name(c: str) -> bool:
    return unicodedata.name(c, "").startswith("CJK UNIFIED IDEOGRAPH")


ISOLATE = [
    Mistake(
        "the common regex [\\u4e00-\\u9fa5] (Unicode 1.1's ideographs only)",
        "U+9FA6..U+9FFF, Extension A, the plane-2 extensions and the compatibility "
        "ideographs are Chinese characters for BERT too: check all eight ranges",
        CHINESE,
        lambda text: _ranges(text, [(0x4E00, 0x9FA5)]),
    ),
    Mistake(
        "the main block U+4E00..U+9FFF only",
        "BERT's rule also covers Extensions A to E and the two compatibility blocks",
        CHINESE,
        lambda text: _ranges(text, [(0x4E00, 0x9FFF)]),
    ),
    Mistake(
        "the plane-2 ranges left out (Extensions B to E, U+2F800)",
        "a character is a code point, not a 16-bit unit: five of the eight ranges lie above U+FFFF",
        CHINESE,
        lambda text: _ranges(text, [(lo, hi) for lo, hi in CJK_RANGES if hi <= 0xFFFF]),
    ),
    Mistake(
        "the compatibility ideographs left out",
        "U+F900..U+FAFF and U+2F800..U+2FA1F are in BERT's ranges: isolate them too",
        CHINESE,
        lambda text: _ranges(text, [r for r in CJK_RANGES if r not in COMPATIBILITY]),
    ),
    Mistake(
        "each range's last code point left out (an exclusive end)",
        "both ends of a range belong to it: lo <= cp <= hi, or range(lo, hi + 1)",
        CHINESE,
        lambda text: _ranges(text, [(lo, hi - 1) for lo, hi in CJK_RANGES]),
    ),
    Mistake(
        "each range's first code point left out",
        "both ends of a range belong to it: lo <= cp <= hi",
        CHINESE,
        lambda text: _ranges(text, [(lo + 1, hi) for lo, hi in CJK_RANGES]),
    ),
    Mistake(
        "Extension E from U+2B820 (the original Python rule)",
        "tokenizers, which transformers' BertTokenizer runs, starts Extension E at U+2B920: "
        "256 code points are not isolated",
        CHINESE,
        lambda text: _ranges(text, _extension_e_from_unicode(CJK_RANGES)),
    ),
    Mistake(
        "wide characters (East Asian Width W or F) taken for Chinese",
        "kana, Hangul, full-width digits and punctuation are wide but not ideographs: "
        "BERT isolates its eight ranges only",
        CHINESE,
        lambda text: _isolate(text, _east_asian_wide),
    ),
    Mistake(
        "Unicode names (CJK UNIFIED IDEOGRAPH) instead of BERT's ranges",
        "the names add Extensions F and G and U+2B820..U+2B91F, and miss the compatibility "
        "ideographs and the unassigned code points of the ranges",
        CHINESE,
        lambda text: _isolate(text, _unified_name),
    ),
    Mistake(
        "a space before each ideograph only",
        "the rule puts a space on each side: ' c ', so that the next character starts a word",
        CHINESE,
        lambda text: _isolate(text, _in_ranges(CJK_RANGES), " {}"),
    ),
]


def _isolate_probes() -> list[tuple[tuple, dict]]:
    """Every range's ends and neighbours, the code points that only some mistakes isolate."""
    points = [
        0x4E00, 0x9FA5, 0x9FA6, 0x9FFF, 0xA000, 0x33FF, 0x3400, 0x4DBF, 0x4DC0,
        0xF8FF, 0xF900, 0xFA6E, 0xFAFF, 0x1FFFF, 0x20000, 0x2A6DF, 0x2A700, 0x2B81F,
        0x2B820, 0x2B91F, 0x2B920, 0x2CEAF, 0x2CEB0, 0x2F800, 0x2FA1F, 0x30000,
        0x3002, 0xFF0C, 0xFF11, 0x3042, 0xAC00,
    ]  # fmt: skip
    text = "".join(f"a{chr(p)}" for p in points)
    return [((text,), {}), (("１９９８年，江泽民在ＡＰＥＣ会议上讲话。",), {})]


# --- part 2: whole words within the budget ------------------------------------------------


def _runs(word_ids: Sequence[int | None]) -> list[list[int]]:
    """Positions grouped into words: runs of equal ids, None (special) in no word."""
    words: list[list[int]] = []
    previous = None
    for position, word in enumerate(word_ids):
        if word is not None and word == previous:
            words[-1].append(position)
        elif word is not None:
            words.append([position])
        previous = word
    return words


def _by_id(word_ids: Sequence[int | None]) -> list[list[int]]:
    """Positions grouped by the value of their id (a pair's two segments merged)."""
    groups: dict[int, list[int]] = {}
    for position, word in enumerate(word_ids):
        if word is not None:
            groups.setdefault(word, []).append(position)
    return list(groups.values())


def _with_specials(word_ids: Sequence[int | None]) -> list[list[int]]:
    """Runs, and each special token a word of its own."""
    marked = [("special", p) if w is None else w for p, w in enumerate(word_ids)]
    return _runs(marked)


def _budget(
    n: int, prob: float, cap: int, *, rounding: Callable[[float], int] = round, floor: int = 1
) -> int:
    return min(cap, max(floor, int(rounding(n * prob))))


def _walk(words: list[list[int]], budget: int, overflow: str = "skip") -> list[int]:
    """The original's walk over shuffled words; `overflow`: what a word that does not fit gets."""
    taken: list[int] = []
    for word in words:
        if len(taken) >= budget:
            break
        if len(taken) + len(word) > budget:
            if overflow == "skip":
                continue
            if overflow == "stop":
                break
            if overflow == "cut":
                taken += word[: budget - len(taken)]
                continue
        taken += word  # overflow == "take": the word crosses the budget
    return sorted(taken)


def _choice(
    word_ids: Sequence[int | None],
    rng: random.Random,
    masked_lm_prob: float = 0.15,
    max_predictions: int = 20,
    *,
    group: Callable[[Sequence[int | None]], list[list[int]]] = _runs,
    shuffle: bool = True,
    overflow: str = "skip",
    length: Callable[[Sequence[int | None]], int] = len,
    rounding: Callable[[float], int] = round,
    floor: int = 1,
) -> list[int]:
    words = group(word_ids)
    if shuffle:
        rng.shuffle(words)
    budget = _budget(
        length(word_ids), masked_lm_prob, max_predictions, rounding=rounding, floor=floor
    )
    return _walk(words, budget, overflow)


def _words_counted(word_ids, rng, masked_lm_prob=0.15, max_predictions=20) -> list[int]:
    words = _runs(word_ids)
    rng.shuffle(words)
    budget = _budget(len(word_ids), masked_lm_prob, max_predictions)
    return sorted(p for word in words[:budget] for p in word)


def _tokens_then_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20) -> list[int]:
    """Tokens shuffled, each drawn token's whole word taken: a word of k tokens is k times
    as likely to come first."""
    words = _runs(word_ids)
    word_of = {p: i for i, word in enumerate(words) for p in word}
    positions = list(word_of)
    rng.shuffle(positions)
    budget = _budget(len(word_ids), masked_lm_prob, max_predictions)
    taken: list[int] = []
    seen: set[int] = set()
    for position in positions:
        if len(taken) >= budget:
            break
        word = words[word_of[position]]
        if word_of[position] in seen or len(taken) + len(word) > budget:
            continue
        seen.add(word_of[position])
        taken += word
    return sorted(taken)


def _ordinary(word_ids: Sequence[int | None]) -> int:
    return sum(w is not None for w in word_ids)


WHOLE_WORDS = [
    Mistake(
        "the budget counted in words instead of tokens",
        "round(0.15 n) counts tokens, so a chosen word of k characters uses k of it",
        WWM,
        _words_counted,
    ),
    Mistake(
        "a word cut to fill the budget (masked in part)",
        "a word that does not fit whole is skipped, never cut: try the next word",
        WWM,
        lambda *a, **k: _choice(*a, **k, overflow="cut"),
    ),
    Mistake(
        "the walk stops at the first word that does not fit",
        "the original skips that word and tries the next ones: a shorter word may still fit",
        WWM,
        lambda *a, **k: _choice(*a, **k, overflow="stop"),
    ),
    Mistake(
        "the word that crosses the budget taken whole",
        "a word that would exceed the budget is skipped: never more than the budget",
        WWM,
        lambda *a, **k: _choice(*a, **k, overflow="take"),
    ),
    Mistake(
        "the budget from the words' tokens only, [CLS] and [SEP] left out",
        "the original counts the whole sequence, special tokens included: round(0.15 n)",
        WWM,
        lambda *a, **k: _choice(*a, **k, length=_ordinary),
    ),
    Mistake(
        "the budget truncated with int() instead of round()",
        "the original rounds n x 0.15 (half to even in Python 3), it does not truncate",
        BUDGET,
        lambda *a, **k: _choice(*a, **k, rounding=int),
    ),
    Mistake(
        "no minimum of one prediction",
        "a short sequence still gets max(1, round(0.15 n)) predictions",
        BUDGET,
        lambda *a, **k: _choice(*a, **k, floor=0),
    ),
    Mistake(
        "max_predictions ignored",
        "the budget is at most max_predictions (20 for length 128)",
        BUDGET,
        lambda *a, **k: _choice(*a, **{**k, "max_predictions": 10**9}),
    ),
    Mistake(
        "special tokens ([CLS], [SEP]) among the candidates",
        "a token with word id None belongs to no word and is never chosen",
        WWM,
        lambda *a, **k: _choice(*a, **k, group=_with_specials),
    ),
    Mistake(
        "tokens grouped by word id across the pair (A's and B's word 0 merged)",
        "a word is a run of consecutive tokens with the same id: word ids restart in segment B",
        WWM,
        lambda *a, **k: _choice(*a, **k, group=_by_id),
    ),
    Mistake(
        "tokens shuffled, then their words taken (long words favoured)",
        "shuffle the words, not the tokens: each word must be equally likely to come first",
        WWM,
        _tokens_then_words,
    ),
    Mistake(
        "the words taken in order, not shuffled",
        "shuffle the list of words with rng.shuffle before walking it",
        WWM,
        lambda *a, **k: _choice(*a, **k, shuffle=False),
    ),
]


def _ids(lengths: Sequence[int], pair_at: int | None = None) -> list[int | None]:
    """[CLS] + words of the given lengths (ids 0, 1, ...) + [SEP]; with `pair_at`, a [SEP]
    after that many words and ids restarting at 0 for segment B."""
    ids: list[int | None] = [None]
    word = 0
    for i, n in enumerate(lengths):
        if pair_at is not None and i == pair_at:
            ids.append(None)
            word = 0
        ids += [word] * n
        word += 1
    return ids + [None]


def _whole_word_probes() -> list[tuple[tuple, dict]]:
    mixed = [1, 2, 3, 1, 2, 4, 1, 1, 2, 3, 2, 1, 1, 2, 5, 1, 2, 2, 1, 3]
    return [
        ((_ids(mixed), random.Random(1)), {}),
        ((_ids(mixed, pair_at=10), random.Random(2)), {}),
        ((_ids([1] * 10), random.Random(3)), {}),  # 12 tokens: round(1.8) = 2, int(1.8) = 1
        (
            (_ids([1] * 15), random.Random(4)),
            {"masked_lm_prob": 0.3},
        ),  # 17: 5, without [CLS]/[SEP] 4
        ((_ids([1]), random.Random(5)), {}),  # 3 tokens: round(0.45) = 0, at least 1
        ((_ids([1, 2] * 50), random.Random(6)), {}),  # 152 tokens: round(22.8), capped at 20
        ((_ids([4, 3, 1, 4, 2]), random.Random(7)), {"masked_lm_prob": 0.3}),  # 16 tokens: 5
        ((_ids([3, 3, 1, 3, 3]), random.Random(8)), {"masked_lm_prob": 0.25}),  # 15 tokens: 4
    ]


# --- part 3: BMES tags and back ------------------------------------------------------------


def _tags(words: Sequence[str], single: str = "S", last: str = "E", first: str = "B") -> list[str]:
    tags: list[str] = []
    for word in words:
        if len(word) == 1:
            tags.append(single)
        else:
            tags += [first] + ["M"] * (len(word) - 2) + [last]
    return tags


BMES = [
    Mistake(
        "B and E swapped",
        "B begins a word of two or more characters, E ends it",
        TAGS,
        lambda words: _tags(words, first="E", last="B"),
    ),
    Mistake(
        "a one-character word tagged B (not S)",
        "S marks a word of one character; B begins a word of two or more",
        TAGS,
        lambda words: _tags(words, single="B"),
    ),
    Mistake(
        "the last character tagged M (no E)",
        "every word of two or more characters ends with E: B M ... M E",
        TAGS,
        lambda words: _tags(words, last="M"),
    ),
    Mistake(
        "B then M only (BIO's scheme: no E, no S)",
        "BMES marks a word's end (E) and single characters (S): B E, B M E, S",
        TAGS,
        lambda words: _tags(words, single="B", last="M"),
    ),
    Mistake(
        "one tag per word instead of one per character",
        "a tagger labels characters: a word of n characters gets n tags",
        TAGS,
        lambda words: ["S" if len(word) == 1 else "B" for word in words],
    ),
]


def _read(
    chars: Sequence[str],
    tags: Sequence[str],
    *,
    end_before_start: bool = True,
    keep_open: bool = True,
    starts: str = "BS",
    ends: str = "ES",
) -> list[str]:
    words: list[str] = []
    current = ""
    for char, tag in zip(chars, tags):
        if end_before_start and tag in starts and current:
            words.append(current)
            current = ""
        current += char
        if tag in ends:
            words.append(current)
            current = ""
    if current and keep_open:
        words.append(current)
    return words


def _split_at_starts(chars: Sequence[str], tags: Sequence[str]) -> list[str]:
    """A word starts at B or S; any other character joins the word before it."""
    words: list[str] = []
    for char, tag in zip(chars, tags):
        if tag in "BS" or not words:
            words.append(char)
        else:
            words[-1] += char
    return words


READ_BMES = [
    Mistake(
        "B and E swapped",
        "B begins a word, E ends it",
        TAGS,
        lambda chars, tags: _read(chars, tags, starts="ES", ends="BS"),
    ),
    Mistake(
        "the word left open at the end dropped",
        "when the tags end inside a word (no E), the characters still form a last word",
        TAGS,
        lambda chars, tags: _read(chars, tags, keep_open=False),
    ),
    Mistake(
        "an open word not ended by the next B or S",
        "a B or S starts a new word even when the word before it has no E",
        TAGS,
        lambda chars, tags: _read(chars, tags, end_before_start=False),
    ),
    Mistake(
        "a word ended only by B or S (E and S do not close it)",
        "a word also ends after E or S: an M or E after it starts a new word",
        TAGS,
        _split_at_starts,
    ),
]


def _read_probes() -> list[tuple[tuple, dict]]:
    chars = list("被告被判有罪中华人民共和国")
    return [
        ((chars[:9], list("BESSBESBE")), {}),
        ((chars[:6], list("BMBSEM")), {}),  # invalid: B before E, E after S, M at the end
        ((chars[:7], list("EBMSBEM")), {}),  # invalid: E first, S inside a word
        ((chars[:5], list("SBEBM")), {}),  # ends inside a word
    ]


CATALOGUE: dict[str, list[Mistake]] = {
    "isolate": ISOLATE,
    "whole_words": WHOLE_WORDS,
    "bmes": BMES,
    "read_bmes": READ_BMES,
}

PROBES = {
    "isolate": _isolate_probes,
    "whole_words": _whole_word_probes,
    "bmes": lambda: [
        ((["被告", "被", "判", "有罪"],), {}),
        ((["中华人民共和国", "成立", "了"],), {}),
        ((["我", "在", "北京"],), {}),
    ],
    "read_bmes": _read_probes,
}
