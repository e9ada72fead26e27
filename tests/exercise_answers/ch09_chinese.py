# ruff: noqa
# Wrong and alternative answers for the cells of solutions/ch09_chinese (tests/test_exercises.py).
# "# %% wrong <grade id>: <what>" replaces that solution cell and must lose exactly its points;
# "# %% alternative <grade id>: <what>" is correct but written differently: full marks.
# "# names: ..." under a wrong answer: what its feedback must name.
# Every block is graded in process; the first two wrong answers of a part also go through nbgrader.
# "# split: dev|eval" (tests/answer_split.py): entries of the mistake catalogues are written
# from the dev half; named/right/wrong is measured on the eval half (scripts/named_mistakes.py).


# %% wrong isolate: the common regex [\u4e00-\u9fa5]
# split: eval
# names: the common regex
def isolate_chinese(text):
    import re

    return re.sub("([\u4e00-\u9fa5])", r" \1 ", text)


# %% wrong isolate: the main block U+4E00..U+9FFF only (no extension, no compatibility block)
# split: dev
# names: the main block U+4E00..U+9FFF only
def isolate_chinese(text):
    return "".join(f" {c} " if 0x4E00 <= ord(c) <= 0x9FFF else c for c in text)


# %% wrong isolate: the ranges written with range(lo, hi): each last code point left out
# split: dev
# names: each range's last code point left out
RANGES = [
    range(0x4E00, 0x9FFF),
    range(0x3400, 0x4DBF),
    range(0x20000, 0x2A6DF),
    range(0x2A700, 0x2B73F),
    range(0x2B740, 0x2B81F),
    range(0x2B920, 0x2CEAF),
    range(0xF900, 0xFAFF),
    range(0x2F800, 0x2FA1F),
]


def isolate_chinese(text):
    return "".join(f" {c} " if any(ord(c) in r for r in RANGES) else c for c in text)


# %% wrong isolate: the 16-bit ranges only (the plane-2 extensions and supplement forgotten)
# split: dev
# names: the plane-2 ranges left out
def isolate_chinese(text):
    out = ""
    for c in text:
        cp = ord(c)
        if 0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0xF900 <= cp <= 0xFAFF:
            out += " " + c + " "
        else:
            out += c
    return out


# %% wrong isolate: the unified ideographs only, compatibility blocks forgotten
# split: eval
# names: the compatibility ideographs left out
def isolate_chinese(text):
    ranges = [
        (0x4E00, 0x9FFF),
        (0x3400, 0x4DBF),
        (0x20000, 0x2A6DF),
        (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F),
        (0x2B920, 0x2CEAF),
    ]
    return "".join(f" {c} " if any(lo <= ord(c) <= hi for lo, hi in ranges) else c for c in text)


# %% wrong isolate: google-research/bert's Python rule (Extension E from U+2B820)
# split: dev
# names: Extension E from U+2B820
def isolate_chinese(text):
    ranges = [
        (0x4E00, 0x9FFF),
        (0x3400, 0x4DBF),
        (0x20000, 0x2A6DF),
        (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F),
        (0x2B820, 0x2CEAF),
        (0xF900, 0xFAFF),
        (0x2F800, 0x2FA1F),
    ]
    return "".join(f" {c} " if any(lo <= ord(c) <= hi for lo, hi in ranges) else c for c in text)


# %% wrong isolate: every wide character (East Asian Width W or F) taken for Chinese
# split: eval
# names: wide characters
def isolate_chinese(text):
    import unicodedata

    return "".join(f" {c} " if unicodedata.east_asian_width(c) in ("W", "F") else c for c in text)


# %% wrong isolate: the Unicode names (CJK UNIFIED IDEOGRAPH-...) instead of the ranges
# split: eval
# names: Unicode names
def isolate_chinese(text):
    import unicodedata

    return "".join(
        f" {c} " if unicodedata.name(c, "").startswith("CJK UNIFIED IDEOGRAPH") else c for c in text
    )


# %% wrong isolate: a space before each ideograph only
# split: dev
# names: a space before each ideograph only
def isolate_chinese(text):
    ranges = [
        (0x4E00, 0x9FFF),
        (0x3400, 0x4DBF),
        (0x20000, 0x2A6DF),
        (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F),
        (0x2B920, 0x2CEAF),
        (0xF900, 0xFAFF),
        (0x2F800, 0x2FA1F),
    ]
    return "".join(" " + c if any(lo <= ord(c) <= hi for lo, hi in ranges) else c for c in text)


# %% wrong isolate: the pieces joined by single spaces (the text's own spacing changed)
# split: dev
def isolate_chinese(text):
    ranges = [
        (0x4E00, 0x9FFF),
        (0x3400, 0x4DBF),
        (0x20000, 0x2A6DF),
        (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F),
        (0x2B920, 0x2CEAF),
        (0xF900, 0xFAFF),
        (0x2F800, 0x2FA1F),
    ]
    spaced = "".join(f" {c} " if any(lo <= ord(c) <= hi for lo, hi in ranges) else c for c in text)
    return " ".join(spaced.split())


# %% wrong isolate: the tokenizers library's BERT normalizer does it (forbidden)
# split: dev
def isolate_chinese(text):
    from tokenizers.normalizers import BertNormalizer

    normalizer = BertNormalizer(
        clean_text=False, handle_chinese_chars=True, strip_accents=False, lowercase=False
    )
    return normalizer.normalize_str(text)


# %% alternative isolate: one regular expression with the eight ranges
import re

CJK = re.compile(
    "([\u4e00-\u9fff\u3400-\u4dbf\U00020000-\U0002a6df\U0002a700-\U0002b73f"
    "\U0002b740-\U0002b81f\U0002b920-\U0002ceaf\uf900-\ufaff\U0002f800-\U0002fa1f])"
)


def isolate_chinese(text):
    return CJK.sub(r" \1 ", text)


# %% alternative isolate: a set of every code point of the ranges, built once
CHINESE = {
    cp
    for lo, hi in (
        (0x4E00, 0x9FFF),
        (0x3400, 0x4DBF),
        (0x20000, 0x2A6DF),
        (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F),
        (0x2B920, 0x2CEAF),
        (0xF900, 0xFAFF),
        (0x2F800, 0x2FA1F),
    )
    for cp in range(lo, hi + 1)
}


def isolate_chinese(text):
    pieces = []
    for c in text:
        pieces.append(" " + c + " " if ord(c) in CHINESE else c)
    return "".join(pieces)


# %% wrong whole_words: the budget counted in words (a chosen word of k characters counts once)
# split: eval
# names: the budget counted in words instead of tokens
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    words = []
    for position, word in enumerate(word_ids):
        if word is None:
            continue
        if position > 0 and word_ids[position - 1] == word:
            words[-1].append(position)
        else:
            words.append([position])
    rng.shuffle(words)
    budget = min(max_predictions, max(1, round(len(word_ids) * masked_lm_prob)))
    return sorted(p for word in words[:budget] for p in word)


# %% wrong whole_words: the last word cut to fill the budget exactly (a word masked in part)
# split: eval
# names: a word cut to fill the budget
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    words = []
    previous = None
    for position, word in enumerate(word_ids):
        if word is not None and word == previous:
            words[-1].append(position)
        elif word is not None:
            words.append([position])
        previous = word
    rng.shuffle(words)
    budget = min(max_predictions, max(1, round(len(word_ids) * masked_lm_prob)))
    chosen = []
    for word in words:
        for position in word:
            if len(chosen) < budget:
                chosen.append(position)
    return sorted(chosen)


# %% wrong whole_words: break at the first word that does not fit
# split: dev
# names: the walk stops at the first word that does not fit
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    words = []
    previous = None
    for position, word in enumerate(word_ids):
        if word is not None and word == previous:
            words[-1].append(position)
        elif word is not None:
            words.append([position])
        previous = word
    rng.shuffle(words)
    budget = min(max_predictions, max(1, round(len(word_ids) * masked_lm_prob)))
    chosen = []
    for word in words:
        if len(chosen) + len(word) > budget:
            break
        chosen += word
    return sorted(chosen)


# %% wrong whole_words: the word that crosses the budget is taken whole (more than the budget)
# split: eval
# names: the word that crosses the budget taken whole
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    words = []
    previous = None
    for position, word in enumerate(word_ids):
        if word is not None and word == previous:
            words[-1].append(position)
        elif word is not None:
            words.append([position])
        previous = word
    rng.shuffle(words)
    budget = min(max_predictions, max(1, round(len(word_ids) * masked_lm_prob)))
    chosen = []
    for word in words:
        if len(chosen) >= budget:
            break
        chosen += word
    return sorted(chosen)


# %% wrong whole_words: the budget from the ordinary tokens only ([CLS] and [SEP] not counted)
# split: dev
# names: the budget from the words' tokens only
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    words = []
    previous = None
    for position, word in enumerate(word_ids):
        if word is not None and word == previous:
            words[-1].append(position)
        elif word is not None:
            words.append([position])
        previous = word
    rng.shuffle(words)
    n = sum(len(word) for word in words)
    budget = min(max_predictions, max(1, round(n * masked_lm_prob)))
    chosen = []
    for word in words:
        if len(chosen) >= budget:
            break
        if len(chosen) + len(word) <= budget:
            chosen += word
    return sorted(chosen)


# %% wrong whole_words: int() truncates the budget
# split: eval
# names: the budget truncated with int()
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    words = []
    previous = None
    for position, word in enumerate(word_ids):
        if word is not None and word == previous:
            words[-1].append(position)
        elif word is not None:
            words.append([position])
        previous = word
    rng.shuffle(words)
    budget = min(max_predictions, max(1, int(len(word_ids) * masked_lm_prob)))
    chosen = []
    for word in words:
        if len(chosen) >= budget:
            break
        if len(chosen) + len(word) <= budget:
            chosen += word
    return sorted(chosen)


# %% wrong whole_words: words grouped by their id in a dict (a pair's word 0 of A and of B merged)
# split: eval
# names: tokens grouped by word id across the pair
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    groups = {}
    for position, word in enumerate(word_ids):
        if word is not None:
            groups.setdefault(word, []).append(position)
    words = list(groups.values())
    rng.shuffle(words)
    budget = min(max_predictions, max(1, round(len(word_ids) * masked_lm_prob)))
    chosen = []
    for word in words:
        if len(chosen) >= budget:
            break
        if len(chosen) + len(word) <= budget:
            chosen += word
    return sorted(chosen)


# %% wrong whole_words: tokens shuffled, each drawn token's word taken (long words favoured)
# split: eval
# names: tokens shuffled, then their words taken
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    words = []
    previous = None
    for position, word in enumerate(word_ids):
        if word is not None and word == previous:
            words[-1].append(position)
        elif word is not None:
            words.append([position])
        previous = word
    word_of = {p: i for i, word in enumerate(words) for p in word}
    positions = list(word_of)
    rng.shuffle(positions)
    budget = min(max_predictions, max(1, round(len(word_ids) * masked_lm_prob)))
    chosen, done = [], set()
    for position in positions:
        if len(chosen) >= budget:
            break
        word = words[word_of[position]]
        if word_of[position] not in done and len(chosen) + len(word) <= budget:
            done.add(word_of[position])
            chosen += word
    return sorted(chosen)


# %% wrong whole_words: [CLS] and [SEP] among the candidates
# split: eval
# names: special tokens ([CLS], [SEP]) among the candidates
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    words = []
    for position, word in enumerate(word_ids):
        if word is not None and position > 0 and word_ids[position - 1] == word:
            words[-1].append(position)
        else:
            words.append([position])
    rng.shuffle(words)
    budget = min(max_predictions, max(1, round(len(word_ids) * masked_lm_prob)))
    chosen = []
    for word in words:
        if len(chosen) >= budget:
            break
        if len(chosen) + len(word) <= budget:
            chosen += word
    return sorted(chosen)


# %% wrong whole_words: Python's global random.shuffle instead of rng (not the original's draw)
# split: dev
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    import random

    words = []
    previous = None
    for position, word in enumerate(word_ids):
        if word is not None and word == previous:
            words[-1].append(position)
        elif word is not None:
            words.append([position])
        previous = word
    random.shuffle(words)
    budget = min(max_predictions, max(1, round(len(word_ids) * masked_lm_prob)))
    chosen = []
    for word in words:
        if len(chosen) >= budget:
            break
        if len(chosen) + len(word) <= budget:
            chosen += word
    return sorted(chosen)


# %% wrong whole_words: the positions in the order taken, not sorted
# split: eval
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    words = []
    previous = None
    for position, word in enumerate(word_ids):
        if word is not None and word == previous:
            words[-1].append(position)
        elif word is not None:
            words.append([position])
        previous = word
    rng.shuffle(words)
    budget = min(max_predictions, max(1, round(len(word_ids) * masked_lm_prob)))
    chosen = []
    for word in words:
        if len(chosen) >= budget:
            break
        if len(chosen) + len(word) <= budget:
            chosen += word
    return chosen


# %% wrong whole_words: the words taken in order of position (never shuffled)
# split: dev
# names: the words taken in order, not shuffled
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    words = []
    previous = None
    for position, word in enumerate(word_ids):
        if word is not None and word == previous:
            words[-1].append(position)
        elif word is not None:
            words.append([position])
        previous = word
    budget = min(max_predictions, max(1, round(len(word_ids) * masked_lm_prob)))
    chosen = []
    for word in words:
        if len(chosen) >= budget:
            break
        if len(chosen) + len(word) <= budget:
            chosen += word
    return sorted(chosen)


# %% wrong whole_words: round(n * p) without max(1, ...): a short sequence gets no prediction
# split: dev
# names: no minimum of one prediction
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    words = []
    previous = None
    for position, word in enumerate(word_ids):
        if word is not None and word == previous:
            words[-1].append(position)
        elif word is not None:
            words.append([position])
        previous = word
    rng.shuffle(words)
    budget = min(max_predictions, round(len(word_ids) * masked_lm_prob))
    chosen = []
    for word in words:
        if len(chosen) >= budget:
            break
        if len(chosen) + len(word) <= budget:
            chosen += word
    return sorted(chosen)


# %% wrong whole_words: max_predictions never used (a long sequence gets more than 20)
# split: dev
# names: max_predictions ignored
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    words = []
    previous = None
    for position, word in enumerate(word_ids):
        if word is not None and word == previous:
            words[-1].append(position)
        elif word is not None:
            words.append([position])
        previous = word
    rng.shuffle(words)
    budget = max(1, round(len(word_ids) * masked_lm_prob))
    chosen = []
    for word in words:
        if len(chosen) >= budget:
            break
        if len(chosen) + len(word) <= budget:
            chosen += word
    return sorted(chosen)


# %% wrong whole_words: bertcourse.mlm's create_masked_lm_predictions does it (forbidden)
# split: dev
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    from bertcourse.mlm import create_masked_lm_predictions

    tokens = [0 if word is None else 1 for word in word_ids]
    return create_masked_lm_predictions(
        tokens,
        special_token_ids=(0,),
        vocab_size=3,
        mask_token_id=2,
        masked_lm_prob=masked_lm_prob,
        max_predictions_per_seq=max_predictions,
        rng=rng,
        word_ids=word_ids,
    ).positions


# %% alternative whole_words: itertools.groupby over the runs, and a running count
import itertools


def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    candidates = [
        [position for position, _ in run]
        for word, run in itertools.groupby(enumerate(word_ids), key=lambda item: item[1])
        if word is not None
    ]
    rng.shuffle(candidates)
    budget = min(max_predictions, max(1, round(len(word_ids) * masked_lm_prob)))
    chosen, count = set(), 0
    for word in candidates:
        if count >= budget:
            break
        if count + len(word) <= budget:
            chosen.update(word)
            count += len(word)
    return sorted(chosen)


# %% alternative whole_words: word starts found first, then a while loop over the shuffled words
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    n = len(word_ids)
    starts = [
        i
        for i in range(n)
        if word_ids[i] is not None and (i == 0 or word_ids[i - 1] != word_ids[i])
    ]
    words = []
    for start in starts:
        end = start
        while end + 1 < n and word_ids[end + 1] == word_ids[start]:
            end += 1
        words.append(list(range(start, end + 1)))
    rng.shuffle(words)
    budget = max(1, round(n * masked_lm_prob))
    budget = min(budget, max_predictions)
    chosen = []
    i = 0
    while i < len(words) and len(chosen) < budget:
        if len(chosen) + len(words[i]) <= budget:
            chosen.extend(words[i])
        i += 1
    chosen.sort()
    return chosen


# %% wrong tags: B and E swapped in bmes_tags
# split: dev
# names: B and E swapped
def bmes_tags(words):
    tags = []
    for word in words:
        if len(word) == 1:
            tags.append("S")
        else:
            tags += ["E"] + ["M"] * (len(word) - 2) + ["B"]
    return tags


def words_from_tags(chars, tags):
    words, current = [], ""
    for char, tag in zip(chars, tags):
        if tag in "BS" and current:
            words.append(current)
            current = ""
        current += char
        if tag in "ES":
            words.append(current)
            current = ""
    if current:
        words.append(current)
    return words


# %% wrong tags: a one-character word tagged B
# split: dev
# names: a one-character word tagged B
def bmes_tags(words):
    tags = []
    for word in words:
        tags.append("B")
        if len(word) > 1:
            tags += ["M"] * (len(word) - 2) + ["E"]
    return tags


def words_from_tags(chars, tags):
    words, current = [], ""
    for char, tag in zip(chars, tags):
        if tag in "BS" and current:
            words.append(current)
            current = ""
        current += char
        if tag in "ES":
            words.append(current)
            current = ""
    if current:
        words.append(current)
    return words


# %% wrong tags: M up to the end of a word (no E)
# split: eval
# names: the last character tagged M
def bmes_tags(words):
    tags = []
    for word in words:
        tags += ["S"] if len(word) == 1 else ["B"] + ["M"] * (len(word) - 1)
    return tags


def words_from_tags(chars, tags):
    words, current = [], ""
    for char, tag in zip(chars, tags):
        if tag in "BS" and current:
            words.append(current)
            current = ""
        current += char
        if tag in "ES":
            words.append(current)
            current = ""
    if current:
        words.append(current)
    return words


# %% wrong tags: NER's BIO habit (B, then M for the rest; no E, no S)
# split: dev
# names: BIO's scheme
def bmes_tags(words):
    return [("B" if i == 0 else "M") for word in words for i in range(len(word))]


def words_from_tags(chars, tags):
    words, current = [], ""
    for char, tag in zip(chars, tags):
        if tag in "BS" and current:
            words.append(current)
            current = ""
        current += char
        if tag in "ES":
            words.append(current)
            current = ""
    if current:
        words.append(current)
    return words


# %% wrong tags: one tag per word
# split: dev
# names: one tag per word instead of one per character
def bmes_tags(words):
    return ["S" if len(word) == 1 else "B" for word in words]


def words_from_tags(chars, tags):
    words, current = [], ""
    for char, tag in zip(chars, tags):
        if tag in "BS" and current:
            words.append(current)
            current = ""
        current += char
        if tag in "ES":
            words.append(current)
            current = ""
    if current:
        words.append(current)
    return words


# %% wrong tags: the reader forgets the word left open after the last character
# split: eval
# names: the word left open at the end dropped
def bmes_tags(words):
    tags = []
    for word in words:
        if len(word) == 1:
            tags.append("S")
        else:
            tags += ["B"] + ["M"] * (len(word) - 2) + ["E"]
    return tags


def words_from_tags(chars, tags):
    words, current = [], ""
    for char, tag in zip(chars, tags):
        if tag in "BS" and current:
            words.append(current)
            current = ""
        current += char
        if tag in "ES":
            words.append(current)
            current = ""
    return words


# %% wrong tags: the reader closes words only at E or S (a B does not end the open word)
# split: eval
# names: an open word not ended by the next B or S
def bmes_tags(words):
    tags = []
    for word in words:
        if len(word) == 1:
            tags.append("S")
        else:
            tags += ["B"] + ["M"] * (len(word) - 2) + ["E"]
    return tags


def words_from_tags(chars, tags):
    words, current = [], ""
    for char, tag in zip(chars, tags):
        current += char
        if tag in "ES":
            words.append(current)
            current = ""
    if current:
        words.append(current)
    return words


# %% wrong tags: the reader starts words at B and S only; every other character joins the last word
# split: eval
# names: a word ended only by B or S
def bmes_tags(words):
    tags = []
    for word in words:
        if len(word) == 1:
            tags.append("S")
        else:
            tags += ["B"] + ["M"] * (len(word) - 2) + ["E"]
    return tags


def words_from_tags(chars, tags):
    words = []
    for char, tag in zip(chars, tags):
        if tag in "BS" or not words:
            words.append(char)
        else:
            words[-1] += char
    return words


# %% wrong tags: the reader with B and E swapped
# split: dev
# names: B and E swapped
def bmes_tags(words):
    tags = []
    for word in words:
        if len(word) == 1:
            tags.append("S")
        else:
            tags += ["B"] + ["M"] * (len(word) - 2) + ["E"]
    return tags


def words_from_tags(chars, tags):
    words, current = [], ""
    for char, tag in zip(chars, tags):
        if tag in "ES" and current:
            words.append(current)
            current = ""
        current += char
        if tag in "BS":
            words.append(current)
            current = ""
    if current:
        words.append(current)
    return words


# %% wrong tags: a two-character word tagged B M E (one tag too many)
# split: dev
def bmes_tags(words):
    tags = []
    for word in words:
        if len(word) == 1:
            tags.append("S")
        else:
            tags += ["B"] + ["M"] * (len(word) - 1) + ["E"]
    return tags


def words_from_tags(chars, tags):
    words, current = [], ""
    for char, tag in zip(chars, tags):
        if tag in "BS" and current:
            words.append(current)
            current = ""
        current += char
        if tag in "ES":
            words.append(current)
            current = ""
    if current:
        words.append(current)
    return words


# %% wrong tags: bertcourse.zh's functions do it (forbidden)
# split: dev
from bertcourse import zh


def bmes_tags(words):
    return zh.bmes_tags(words)


def words_from_tags(chars, tags):
    return zh.words_from_tags(chars, tags, strict=False)


# %% alternative tags: word lengths from the tags' boundaries, the tags by a comprehension
def bmes_tags(words):
    return [
        "S" if len(word) == 1 else "B" if i == 0 else "E" if i == len(word) - 1 else "M"
        for word in words
        for i in range(len(word))
    ]


def words_from_tags(chars, tags):
    n = len(chars)
    # a word starts at 0, at a B or S, and after an E or S
    starts = [i for i in range(n) if i == 0 or tags[i] in "BS" or tags[i - 1] in "ES"]
    ends = starts[1:] + [n]
    return ["".join(chars[a:b]) for a, b in zip(starts, ends)] if n else []
