# Source of solutions/ch00_tokenization/tokenization.ipynb (build: python solutions/_build_notebooks.py)

# %% [markdown] id=intro
# # Exercises 0: From text to ids
#
# You will write the pieces of BERT's tokenizer: the punctuation split and the rest of the
# basic tokenizer, WordPiece's greedy longest match, and the encoding of a pair with token
# types, truncation, padding and the attention mask. Chapter 0 of the book ("From text to
# ids") explains them. The reference is `bertcourse.tokenization`, whose ids are those of
# transformers' `BertTokenizer`.
#
# **How to work.** Write your code where a cell says `# YOUR CODE HERE`, replacing the
# `raise NotImplementedError()`, then run the test cell below it (`OK ...` or a message).
# Hidden tests run at grading time with other inputs. What a part asks you to write is
# disabled while it is checked, in `bertcourse.tokenization` and in the libraries that have it
# (`tokenizers`' BERT normalizer, pre-tokenizer and WordPiece model, transformers'
# tokenizers): an answer that calls them earns nothing.
# Check everything with **Validate** (or `nbgrader validate`).
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
# Everything here is plain Python: strings, lists of strings, lists of ints.

# %% [code] id=setup
import functools
import random
import unicodedata

from bertcourse import grading
from bertcourse import tokenization as tk
from bertcourse.tokenization import clean_text, is_punctuation, space_chinese_chars

# What the parts ask you to write, in bertcourse and in the libraries that have it too.
FORBID = (
    "bertcourse.tokenization.split_on_punctuation",
    "bertcourse.tokenization.basic_tokenize",
    "bertcourse.tokenization.strip_accents",
    "bertcourse.tokenization.wordpiece",
    "bertcourse.tokenization.truncated_lengths",
    "bertcourse.tokenization.BertTokenizer.tokenize",
    "bertcourse.tokenization.BertTokenizer.encode",
    "tokenizers.normalizers.BertNormalizer",
    "tokenizers.pre_tokenizers.BertPreTokenizer",
    "tokenizers.models.WordPiece",
    "transformers.models.bert.tokenization_bert.BertTokenizer.__init__",
    "transformers.models.bert.tokenization_bert_legacy.BertTokenizerLegacy.__init__",
    "transformers.models.bert.tokenization_bert_legacy.BasicTokenizer.tokenize",
    "transformers.models.bert.tokenization_bert_legacy.BasicTokenizer._run_split_on_punc",
    "transformers.models.bert.tokenization_bert_legacy.BasicTokenizer._run_strip_accents",
    "transformers.models.bert.tokenization_bert_legacy.WordpieceTokenizer.tokenize",
)
VOCAB = sorted(tk.load_bert_uncased().vocab)  # the 30,522 pieces of bert-base-uncased


@functools.cache
def _characters_by_category():
    by_category = {}
    for cp in range(0x30000):
        char = chr(cp)
        category = unicodedata.category(char)
        if category in ("Cs", "Cn") or tk.char_category(char) != category or char.lower() != tk.lowercase(char):
            continue
        if char == tk._NOT_DECOMPOSED or 0x2B820 <= cp <= 0x2B91F:  # see bertcourse.tokenization
            continue
        by_category.setdefault(category, []).append(char)
    return by_category


def unicode_sample(per_category, seed):
    """Up to `per_category` characters of every Unicode general category (Lu, Mn, Po, Sm, Cc,
    Zs...), drawn at random. Left out: the few hundred characters on which this Python's
    Unicode 14.0 tables and tokenizers' Unicode 8.0 tables disagree (see `tk.char_category`),
    and surrogates."""
    by_category = _characters_by_category()
    rng = random.Random(seed)
    return [c for cat in sorted(by_category) for c in rng.sample(by_category[cat], min(per_category, len(by_category[cat])))]


# %% [markdown] id=split_text
# ## Part 1: split off punctuation (2 points)
#
# After cleaning and lowercasing, the basic tokenizer splits the text on whitespace, then
# makes **every punctuation character a word of its own**: `"don't!"` becomes
# `["don", "'", "t", "!"]`, and `"?!"` becomes `["?", "!"]`. Write
# `split_on_punctuation(word)` for a word without whitespace. Use the given
# `is_punctuation(char)`: it follows BERT's definition (every printable ASCII character that
# is not a letter or digit, plus Unicode's punctuation categories, so `¿` and `—` too).

# %% [solution] id=split
def split_on_punctuation(word):
    """'don't!' -> ['don', "'", 't', '!']."""
    ### BEGIN SOLUTION
    pieces = []
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
    ### END SOLUTION

# %% [tests] id=split_tests points=2
REFERENCE_SPLIT = "bertcourse.tokenization.split_on_punctuation"
grading.check_equal(split_on_punctuation, REFERENCE_SPLIT, "don't!", forbid=FORBID, mistakes="ch00:split")
grading.check_equal(split_on_punctuation, REFERENCE_SPLIT, "hello", forbid=FORBID, mistakes="ch00:split")
### BEGIN HIDDEN TESTS
for word in ["?!", "...", "a.b.c", "¿qué?", "x—y", "$5", "", "co-operate", "(x)", "«a»", "^+|~`=<>", "€5"]:
    grading.check_equal(split_on_punctuation, REFERENCE_SPLIT, word, forbid=FORBID, mistakes="ch00:split")


def tokenizers_split(word):
    """From outside: the pre-tokenizer of the `tokenizers` library (BERT's), on one word."""
    from tokenizers.pre_tokenizers import BertPreTokenizer

    return [piece for piece, _ in BertPreTokenizer().pre_tokenize_str(word)]


# Every Unicode category, each character between letters and in runs: no whitespace in a word.
sample = [c for c in unicode_sample(40, seed=0) if not c.isspace()]
grading.check_equal(split_on_punctuation, tokenizers_split, "".join(c + "x" for c in sample), forbid=FORBID, mistakes="ch00:split")
grading.check_equal(split_on_punctuation, tokenizers_split, "".join(sample), forbid=FORBID, mistakes="ch00:split")
### END HIDDEN TESTS

# %% [markdown] id=basic_text
# ## Part 2: the basic tokenizer (2 points)
#
# Write `basic_tokenize(text)` for an *uncased* model, in BERT's order:
#
# 1. `clean_text(text)` (given): control characters deleted, every whitespace made a space;
# 2. `space_chinese_chars(text)` (given): a space on each side of each CJK ideograph;
# 3. strip accents: decompose with `unicodedata.normalize("NFD", text)` and drop the combining
#    marks (characters whose `unicodedata.category` is `"Mn"`), **then** lowercase, each
#    character on its own (`"".join(c.lower() for c in text)`, as `tokenizers` does: Python's
#    `str.lower` on a whole string writes a word-final capital sigma `Σ` as `ς`, BERT as `σ`);
# 4. split on whitespace, and split each word with your `split_on_punctuation`.
#
# `basic_tokenize("Héllo,  WÖRLD!")` is `["hello", ",", "world", "!"]`. The hidden tests
# compare with the `tokenizers` library on characters of every Unicode category, except the
# few hundred (new in rare scripts) that Python and `tokenizers` classify differently.

# %% [solution] id=basic
def basic_tokenize(text):
    """Text -> words (uncased), before WordPiece."""
    ### BEGIN SOLUTION
    text = space_chinese_chars(clean_text(text))
    text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
    text = "".join(c.lower() for c in text)  # not text.lower(): a final Σ must become σ
    words = []
    for word in text.split():
        words.extend(split_on_punctuation(word))
    return words
    ### END SOLUTION

# %% [tests] id=basic_tests points=2
REFERENCE_BASIC = "bertcourse.tokenization.basic_tokenize"
EARLIER = {"split_on_punctuation": REFERENCE_SPLIT}
grading.check_equal(basic_tokenize, REFERENCE_BASIC, "Héllo,  WÖRLD!", forbid=FORBID, use_reference=EARLIER, mistakes="ch00:basic")
grading.check_equal(basic_tokenize, REFERENCE_BASIC, "Crème brûlée\tand\ncafé", forbid=FORBID, use_reference=EARLIER, mistakes="ch00:basic")
### BEGIN HIDDEN TESTS
for text in [
    "我爱BERT模型。", "zero\u200bwidth  spaces\u00a0here", "", "   ", "Ça va? Très bien!",
    "São Paulo — Ñandú, Øresund", "e\u0301 and \u00e9", "Don't STOP (now)...",
    "ΟΔΟΣ ΟΔΟΣ.", "İSTANBUL", "ﬁne ½ Ⅻ", "a\x00b\ufffdc\u00add\x1fe", "tab\there\u3000ideographic\u2028line",
]:
    grading.check_equal(basic_tokenize, REFERENCE_BASIC, text, forbid=FORBID, use_reference=EARLIER, mistakes="ch00:basic")


def tokenizers_basic(text):
    """From outside: BERT's normalizer (uncased) and pre-tokenizer in the `tokenizers` library."""
    from tokenizers.normalizers import BertNormalizer
    from tokenizers.pre_tokenizers import BertPreTokenizer

    normalizer = BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True)
    return [word for word, _ in BertPreTokenizer().pre_tokenize_str(normalizer.normalize_str(text))]


rng = random.Random(1)
sample = unicode_sample(40, seed=1)
text = "".join(c + rng.choice(["a", "B", "É", " ", "中", "Σ", "ǅ"]) for c in sample)
grading.check_equal(basic_tokenize, tokenizers_basic, text, forbid=FORBID, use_reference=EARLIER, mistakes="ch00:basic")
### END HIDDEN TESTS

# %% [markdown] id=wordpiece_text
# ## Part 3: WordPiece, greedy longest match first (3 points)
#
# Write `wordpiece(word, vocab)`: `vocab` is a list of pieces. Starting at the first
# character, take the **longest** substring that is in the vocabulary; continue from where it
# ends, now looking up candidates with the prefix `"##"` (a piece that continues a word). If at
# some position no candidate (not even one character) is in the vocabulary, return
# `["[UNK]"]` for the whole word. A word longer than 100 characters is `["[UNK]"]` at once
# (a word of exactly 100 is tokenized; characters, as `len(word)` counts them, not UTF-8 bytes).
# Do not modify `vocab`.
#
# `wordpiece("unaffable", ["una", "un", "##ffa", "##aff", "##ble", "##able"])` is
# `["una", "##ffa", "##ble"]`: greedy, not the fewest pieces.
#
# *Hint:* turn the list into a `set` first: looking up in a list of 30,522 is slow.

# %% [solution] id=wordpiece
def wordpiece(word, vocab):
    """Greedy longest-match-first WordPiece of one word -> list of pieces."""
    ### BEGIN SOLUTION
    vocab = set(vocab)
    if len(word) > 100:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces
    ### END SOLUTION

# %% [tests] id=wordpiece_tests points=3
def reference_wordpiece(word, vocab):
    return tk.wordpiece(word, set(vocab))


TOY = ["una", "un", "##ffa", "##aff", "##ble", "##able", "a", "##b", "##un"]
grading.check_equal(wordpiece, reference_wordpiece, "unaffable", TOY, forbid=FORBID, mistakes="ch00:wordpiece")
grading.check_equal(wordpiece, reference_wordpiece, "tokenization", VOCAB, forbid=FORBID, mistakes="ch00:wordpiece")
### BEGIN HIDDEN TESTS
grading.check_equal(wordpiece, reference_wordpiece, "unaffablex", TOY, forbid=FORBID, inputs_unchanged=True, mistakes="ch00:wordpiece")
grading.check_equal(wordpiece, reference_wordpiece, "ab", TOY, forbid=FORBID, inputs_unchanged=True, mistakes="ch00:wordpiece")


def tokenizers_wordpiece(word, vocab):
    """From outside: the WordPiece model of the `tokenizers` library on the same vocabulary."""
    from tokenizers.models import WordPiece

    model = WordPiece({piece: i for i, piece in enumerate(vocab)}, unk_token="[UNK]", max_input_chars_per_word=100)
    return [token.value for token in model.tokenize(word)]


# Held-out words: the words of Unicode's character names (text no one here wrote), and edges.
rng = random.Random(2)
names = sorted({w for c in unicode_sample(3, seed=2) for w in unicodedata.name(c, "").lower().replace("-", " ").split()})
words = rng.sample(names, 12) + ["electroencephalography", "huggingface", "a" * 100, "a" * 101, "😀", "the", "zzzqx", "##a", "a##"]
# The limit counts characters, not bytes: non-ASCII words of at most 100 characters and more than 100 UTF-8 bytes.
words += ["ω" * 70, "中" * 100, "я" * 51 + "ß" * 49, "中" * 101]
for word in words:
    grading.check_equal(wordpiece, tokenizers_wordpiece, word, VOCAB, forbid=FORBID, mistakes="ch00:wordpiece")
# Properties: the pieces are in the vocabulary, only the first has no "##", and they spell the word.
known = set(VOCAB)
for word in rng.sample(names, 8):
    pieces = grading.run(wordpiece, word, VOCAB, forbid=FORBID)
    grading.check_true(pieces == ["[UNK]"] or (all(p in known for p in pieces) and not pieces[0].startswith("##") and all(p.startswith("##") for p in pieces[1:])), f"wordpiece: pieces not in the vocabulary, or '##' misplaced: {pieces}")
    grading.check_true(pieces == ["[UNK]"] or "".join([pieces[0]] + [p[2:] for p in pieces[1:]]) == word, f"wordpiece: the pieces {pieces} do not spell the word back")
toy = list(TOY)
grading.run(wordpiece, "unaffable", toy, forbid=FORBID)
grading.check_true(toy == TOY, "wordpiece modified the vocabulary it was given")
### END HIDDEN TESTS

# %% [markdown] id=pair_text
# ## Part 4: encode a pair (3 points)
#
# Write `encode_pair(ids_a, ids_b, max_length, cls_id=101, sep_id=102, pad_id=0)` that returns
# a dict with three lists of length `max_length`:
#
# - `"input_ids"`: `[CLS] A [SEP] B [SEP]`, then `pad_id` up to `max_length`;
# - `"token_type_ids"`: 0 for `[CLS] A [SEP]`, 1 for `B [SEP]`, 0 on padding;
# - `"attention_mask"`: 1 for every token (special ones included), 0 on padding.
#
# If A and B do not fit in the `max_length - 3` places left, truncate them (cut their ends)
# with `longest_first` as transformers does: if the shorter one fits in half of the places
# (its length `<= places - its length`) keep it whole and give the rest to the longer one;
# otherwise each gets `places // 2`, and the odd place, if any, goes to the longer one (to B if
# they are equally long). This is the rule of the `tokenizers` library (transformers 5's
# `BertTokenizer`); the original `truncate_seq_pair` removes one token at a time from the
# longer one, which differs when both are long and `places` is odd (chapter 0 shows it).
# Do not modify `ids_a` and `ids_b` (the original cuts its lists in place); `places` may be 0.

# %% [solution] id=pair
def encode_pair(ids_a, ids_b, max_length, cls_id=101, sep_id=102, pad_id=0):
    """-> {"input_ids", "token_type_ids", "attention_mask"}, each of length max_length."""
    ### BEGIN SOLUTION
    places = max_length - 3
    a, b = list(ids_a), list(ids_b)
    if len(a) + len(b) > places:
        shorter = min(len(a), len(b))
        if shorter <= places - shorter:
            keep_a, keep_b = (len(a), places - len(a)) if len(a) == shorter else (places - len(b), len(b))
        else:
            half, odd = divmod(places, 2)
            keep_a, keep_b = (half + odd, half) if len(a) > len(b) else (half, half + odd)
        a, b = a[:keep_a], b[:keep_b]
    input_ids = [cls_id] + a + [sep_id] + b + [sep_id]
    token_type_ids = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    n_pad = max_length - len(input_ids)
    return {
        "input_ids": input_ids + [pad_id] * n_pad,
        "token_type_ids": token_type_ids + [0] * n_pad,
        "attention_mask": [1] * len(input_ids) + [0] * n_pad,
    }
    ### END SOLUTION

# %% [tests] id=pair_tests points=3
def reference_encode_pair(ids_a, ids_b, max_length, cls_id=101, sep_id=102, pad_id=0):
    keep_a, keep_b = tk.truncated_lengths(len(ids_a), len(ids_b), max_length - 3)
    input_ids = [cls_id, *ids_a[:keep_a], sep_id, *ids_b[:keep_b], sep_id]
    token_type_ids = [0] * (keep_a + 2) + [1] * (keep_b + 1)
    n_pad = max_length - len(input_ids)
    return {
        "input_ids": input_ids + [pad_id] * n_pad,
        "token_type_ids": token_type_ids + [0] * n_pad,
        "attention_mask": [1] * len(input_ids) + [0] * n_pad,
    }


grading.check_equal(encode_pair, reference_encode_pair, [7592, 2088], [2003, 2204], 10, forbid=FORBID, mistakes="ch00:pair")
grading.check_equal(encode_pair, reference_encode_pair, list(range(1000, 1012)), [5, 6], 10, forbid=FORBID, mistakes="ch00:pair")
### BEGIN HIDDEN TESTS
PAIR = dict(forbid=FORBID, inputs_unchanged=True, mistakes="ch00:pair")
grading.check_equal(encode_pair, reference_encode_pair, list(range(1000, 1005)), list(range(2000, 2005)), 10, **PAIR)
grading.check_equal(encode_pair, reference_encode_pair, list(range(1000, 1006)), list(range(2000, 2005)), 10, **PAIR)
grading.check_equal(encode_pair, reference_encode_pair, [1], list(range(2000, 2020)), 8, **PAIR)
grading.check_equal(encode_pair, reference_encode_pair, [1, 2, 3], [4], 7, 2, 3, 9, **PAIR)
grading.check_equal(encode_pair, reference_encode_pair, list(range(1000, 1030)), list(range(2000, 2030)), 16, **PAIR)


def tokenizers_encode_pair(ids_a, ids_b, max_length, cls_id=101, sep_id=102, pad_id=0):
    """From outside: the `tokenizers` library with BERT's post-processor, truncation and padding
    (one word per id, so that the ids pass through unchanged)."""
    from tokenizers import Tokenizer, models, processors

    tokenizer = Tokenizer(models.WordLevel({str(i): i for i in {*ids_a, *ids_b, pad_id}}, unk_token=str(pad_id)))
    tokenizer.post_processor = processors.BertProcessing(("[SEP]", sep_id), ("[CLS]", cls_id))
    tokenizer.enable_truncation(max_length, strategy="longest_first")
    tokenizer.enable_padding(length=max_length, pad_id=pad_id)
    out = tokenizer.encode([str(i) for i in ids_a], [str(i) for i in ids_b], is_pretokenized=True)
    return {"input_ids": out.ids, "token_type_ids": out.type_ids, "attention_mask": out.attention_mask}


# Every pair of lengths 0..7 at budgets odd and even, 0 included (max_length 3).
for len_a, len_b, max_length in [(a, b, m) for a in range(8) for b in range(8) for m in (3, 4, 7, 8, 12)][::3]:
    grading.check_equal(encode_pair, tokenizers_encode_pair, list(range(1000, 1000 + len_a)), list(range(2000, 2000 + len_b)), max_length, **PAIR)
### END HIDDEN TESTS

# %% [markdown] id=outro
# ## Going further (not graded)
#
# - Compare `"ΟΔΟΣ".lower()` with lowercasing one character at a time. Which rule of Greek
#   spelling does `str.lower` follow, and why can a tokenizer with a fixed vocabulary not?
# - Tokenize a paragraph of a language you know with `tk.load_bert_uncased()`: which share of
#   its words becomes `[UNK]`?

# %% [scratch]
