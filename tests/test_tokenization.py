"""bertcourse.tokenization against transformers 5.23: the same ids as ``BertTokenizer`` (=
``BertTokenizerFast``, backed by tokenizers) on the whole offline corpus, a hard set, every
vocabulary entry and every Unicode code point; the documented differences from the legacy
pure-Python tokenizer; truncation, padding and the errors."""

from __future__ import annotations

import pytest
import torch

from bertcourse import data
from bertcourse import tokenization as tk

transformers = pytest.importorskip("transformers")
from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy  # noqa: E402

VOCAB = data.bert_vocab_path()


@pytest.fixture(scope="module")
def ours() -> tk.BertTokenizer:
    return tk.load_bert_uncased()


@pytest.fixture(scope="module")
def references() -> dict:
    """transformers' tokenizers for the same vocabulary, built both ways that work in v5."""
    return {
        "BertTokenizer(vocab=...)": transformers.BertTokenizer(vocab=str(VOCAB)),
        "BertTokenizerFast.from_pretrained": transformers.BertTokenizerFast.from_pretrained(
            str(VOCAB.parent)
        ),
    }


@pytest.fixture(scope="module")
def legacy() -> BertTokenizerLegacy:
    return BertTokenizerLegacy(str(VOCAB))


@pytest.fixture(scope="module")
def corpus_sentences() -> list[str]:
    return [s for d in data.stdlib_corpus() for s in d.sentences]


def _fields(encoding) -> dict[str, list[int]]:
    return {k: list(encoding[k]) for k in ("input_ids", "token_type_ids", "attention_mask")}


HARD_SET = [
    # accents, cases, ligatures, Turkish and Greek
    "Héllo Wörld! Ça va? Crème brûlée, naïve café, São Paulo, Œuvre, Straße, ﬁnance",
    "İstanbul ıstakoz IĞDIR; ΟΔΟΣ Σ ΣΑΣ σς; Ǆemal ǅ ǆ",
    "e\u0301 vs \u00e9 (combining acute), a\u0308\u0301, \u1e9b\u0323",
    # CJK ideographs, Japanese kana, Korean Hangul, fullwidth forms
    "我爱自然语言处理。BERT是谷歌的模型",
    "東京は日本の首都です。カタカナとひらがな、한국어 문장입니다",
    "ＦＵＬＬＷＩＤＴＨ　ｔｅｘｔ！１２３",
    "\U00020000\U0002a700\U0002b740\U0002b820\U0002b920 extension B-F ideographs",
    # emoji: single, ZWJ sequences, skin tones, flags, keycaps, newer emoji
    "I ❤️ NLP 😀😂🤖 👩‍👩‍👧‍👦 👍🏽 🇫🇷🇯🇵 1️⃣ 🥰🫠🪿",
    # control, format and zero-width characters, odd whitespace
    "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom soft\u00adhyphen",
    "nul\x00byte bell\x07 tab\tnew\nline\r\nvt\x0bff\x0c sep\x1c\x1d\x1e\x1f del\x7f",
    "nbsp\u00a0thin\u2009ideo\u3000line\u2028para\u2029nel\x85 ogham\u1680mark",
    "replacement \ufffd char, private \ue000 use, unassigned \u0378 \U000e0001 tag",
    # long words: 100 characters is still WordPiece, 101 is [UNK]
    "a" * 100,
    "b" * 101,
    "supercalifragilisticexpialidocious " * 3,
    "pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    # numbers, URLs, code, e-mail, punctuation
    "3.14159 1,000,000 1e-10 -42 +7 50% $19.99 €5 £3 ¥100 2nd 21st 1/2 ½ ² 10^9 0x1F",
    "https://www.example.com/path/to/page?query=value&x=1#anchor user@example.org",
    "def f(x): return x**2 // 3 != 4 and y[0] >= {'a': 1} | ~b",
    "“smart quotes” ‘single’ «guillemets» — em dash – en dash … ellipsis ¿qué? ¡sí!",
    # mixed scripts
    "Москва is Москва; Αθήνα; القاهرة; ירושלים; दिल्ली; ประเทศไทย; ქართული; Ελληνικά",
    "mixedСкрипт wordsΩ και English, Deutsch: Übergrößenträger",
    # scripts and symbols tokenizers knows with older Unicode tables than Python
    "Adlam \U0001e922\U0001e944\U0001e95e, new punctuation \u2e43\u2e50, Arabic \u0898\u061d",
    "Garay \U00010d50\U00010d51 and Latin \ua7cb\ua7cc capitals (Unicode 16)",
    # special tokens written in the text (exact case only)
    "the [MASK] sat on the [MASK]. [CLS] [SEP] [PAD] [UNK] [mask] [Mask] x[MASK]y",
    # empty and blank
    "",
    "   \t\n  ",
    "\u200b\u200b",
]
HARD_PAIRS = [
    ("How old are you?", "I am six years old."),
    ("Héllo, 世界!", "😀 [MASK] ok"),
    ("only one side", ""),
    ("", "second only"),
    ("a" * 101, "b c d"),
]


def test_load_bert_uncased(ours):
    assert ours.vocab_size == len(ours) == 30522
    ids = (ours.pad_token_id, ours.unk_token_id, ours.cls_token_id, ours.sep_token_id)
    assert ids == (0, 100, 101, 102) and ours.mask_token_id == 103
    assert ours.tokenize("Unaffable HELLO!") == ["una", "##ffa", "##ble", "hello", "!"]


def test_corpus_ids_identical(ours, references, legacy, corpus_sentences):
    """Every sentence of every document of the offline corpus (18,591 sentences, 344,585
    tokens with Python 3.11): the same ids as both transformers tokenizers and the legacy one."""
    mine = [ours.convert_tokens_to_ids(ours.tokenize(s)) for s in corpus_sentences]
    for name, ref in references.items():
        theirs = ref(corpus_sentences, add_special_tokens=False)["input_ids"]
        bad = [i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b]
        assert not bad, f"{name}: {len(bad)} sentences differ, first {corpus_sentences[bad[0]]!r}"
    theirs = [legacy.convert_tokens_to_ids(legacy.tokenize(s)) for s in corpus_sentences]
    assert mine == theirs
    n_tokens = sum(map(len, mine))
    print(f"corpus: {len(corpus_sentences)} sentences, {n_tokens} tokens identical")
    assert len(corpus_sentences) > 10_000 and n_tokens > 200_000  # the whole corpus, not a stub


def test_corpus_pairs_identical(ours, references, corpus_sentences):
    """Consecutive sentences as pairs, with and without truncation: ids, types and mask."""
    ref = references["BertTokenizer(vocab=...)"]
    pairs = list(zip(corpus_sentences[0:4000:2], corpus_sentences[1:4000:2]))
    for max_length, truncation in [(None, False), (32, "longest_first"), (24, "only_second")]:
        kwargs = {"max_length": max_length, "truncation": truncation} if truncation else {}
        for a, b in pairs:
            try:
                theirs = _fields(ref(a, b, **kwargs))
            except Exception:  # tokenizers refuses: only_second cannot fit
                with pytest.raises(ValueError, match="only_second"):
                    ours.encode(a, b, **kwargs)
                continue
            assert ours.encode(a, b, **kwargs) == theirs, (a, b, kwargs)


@pytest.mark.parametrize("text", HARD_SET, ids=range(len(HARD_SET)))
def test_hard_set_identical(ours, references, text):
    for name, ref in references.items():
        assert ours.tokenize(text) == ref.tokenize(text), name
        assert ours.encode(text) == _fields(ref(text)), name


@pytest.mark.parametrize("pair", HARD_PAIRS, ids=range(len(HARD_PAIRS)))
def test_hard_pairs_identical(ours, references, pair):
    for ref in references.values():
        assert ours.encode(*pair) == _fields(ref(*pair))
        for strategy in tk.TRUNCATION_STRATEGIES:
            kwargs = {"max_length": 7, "truncation": strategy}
            try:
                theirs = _fields(ref(*pair, **kwargs))
            except Exception:
                with pytest.raises(ValueError):
                    ours.encode(*pair, **kwargs)
            else:
                assert ours.encode(*pair, **kwargs) == theirs


def test_hard_set_counts(ours):
    """The hard set exercises what it claims: [UNK], CJK splits, the 100-character limit."""
    assert ours.tokenize("a" * 100) != ["[UNK]"] and ours.tokenize("b" * 101) == ["[UNK]"]
    assert tk.basic_tokenize("我爱") == ["我", "爱"]
    assert ours.tokenize("我爱") == ["我", "[UNK]"]  # 爱 is not among the uncased pieces
    assert ours.tokenize("zero\u200bwidth") == ours.tokenize("zerowidth")  # U+200B is deleted
    assert ours.tokenize("x[MASK]y [mask]") == ["x", "[MASK]", "y", "[", "mask", "]"]
    assert ours.tokenize("\U0001f970") == ["[UNK]"]
    tokens = sum(len(ours.encode(t)["input_ids"]) for t in HARD_SET)
    print(f"hard set: {len(HARD_SET)} texts + {len(HARD_PAIRS)} pairs, {tokens} tokens")


def test_every_vocabulary_entry(ours, references):
    """Each of the 30,522 pieces written as text (## removed) tokenizes as in transformers."""
    texts = [t.removeprefix("##") for t in ours.vocab]
    theirs = references["BertTokenizer(vocab=...)"](texts, add_special_tokens=False)["input_ids"]
    mine = [ours.convert_tokens_to_ids(ours.tokenize(t)) for t in texts]
    assert mine == theirs


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case", [True, False])
def test_every_code_point(references, do_lower_case):
    """The basic tokenizer equals tokenizers' BertNormalizer + BertPreTokenizer on every Unicode
    code point (surrogates excluded), alone and inside words: this checks the tables of
    char_category, the lowercase and decomposition exceptions and the CJK ranges."""
    from tokenizers import normalizers

    pre = references["BertTokenizer(vocab=...)"].backend_tokenizer.pre_tokenizer
    norm = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=do_lower_case
    )
    code_points = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    bad = []
    for start in range(0, len(code_points), 64):
        text = "".join(f"A{chr(cp)}Éb {chr(cp)}" for cp in code_points[start : start + 64])
        theirs = [w for w, _ in pre.pre_tokenize_str(norm.normalize_str(text))]
        if tk.basic_tokenize(text, do_lower_case) != theirs:
            bad.append(hex(code_points[start]))
    assert not bad, f"blocks of 64 code points that differ, starting at {bad[:10]}"


def test_truncation_grid(ours, references):
    """Every pair of lengths 0-8, every max_length from the special tokens up to 19, every
    strategy: the same ids as transformers, or an error where transformers raises one."""
    ref = references["BertTokenizer(vocab=...)"]
    words = "a b c d e f g h".split()
    compared = 0
    for len_a in range(9):
        for len_b in range(9):
            a, b = " ".join(words[:len_a]), " ".join(words[:len_b])
            for max_length in range(3, 20):
                for strategy in tk.TRUNCATION_STRATEGIES:
                    kwargs = {"max_length": max_length, "truncation": strategy}
                    try:
                        theirs = _fields(ref(a, b, **kwargs))
                    except Exception:
                        with pytest.raises(ValueError, match="must go to fit|needs a text pair"):
                            ours.encode(a, b, **kwargs)
                    else:
                        assert ours.encode(a, b, **kwargs) == theirs, (len_a, len_b, kwargs)
                    compared += 1
    assert compared == 9 * 9 * 17 * 3


def test_truncated_lengths_rule():
    assert tk.truncated_lengths(10, 2, 8) == (6, 2)  # the short one fits in its half: kept
    assert tk.truncated_lengths(5, 5, 7) == (3, 4)  # a tie: the odd token goes to B
    assert tk.truncated_lengths(6, 5, 7) == (4, 3)  # otherwise to the longer one
    assert tk.truncated_lengths(10, None, 4) == (4, None)
    assert tk.truncated_lengths(3, 2, 8) == (3, 2)
    assert tk.truncated_lengths(10, 4, 8, "only_first") == (4, 4)
    with pytest.raises(ValueError, match="only_second"):
        tk.truncated_lengths(10, 4, 8, "only_second")
    with pytest.raises(ValueError, match="truncation must be"):
        tk.truncated_lengths(10, 4, 8, "longest")


def test_legacy_differences_are_the_documented_ones(ours, references, legacy):
    """Where transformers' pure-Python BertTokenizerLegacy disagrees, we match BertTokenizer."""
    ref = references["BertTokenizer(vocab=...)"]
    cases = {
        "final sigma": "ΟΔΟΣ",
        "unassigned code point kept": "a\u0378b",
        "Extension E at U+2B820": "a\U0002b820b",
        "punctuation newer than Unicode 8": "a\u2e43b",
        "combining mark newer than Unicode 8": "a\u0898b",
    }
    for what, text in cases.items():
        mine = ours.encode(text)["input_ids"]
        assert mine == ref(text)["input_ids"], what
        assert mine != legacy(text)["input_ids"], f"{what}: legacy agrees, the docstring is stale"
    # cased models: the legacy code composes characters (NFC), tokenizers does not
    cased_legacy = BertTokenizerLegacy(str(VOCAB), do_lower_case=False)
    assert tk.basic_tokenize("cafe\u0301", do_lower_case=False) == ["cafe\u0301"]
    assert cased_legacy.basic_tokenizer.tokenize("cafe\u0301") == ["caf\u00e9"]
    # longest_first with equal lengths and an odd budget: one token apart
    a, b = "a b c d e", "f g h i j"
    mine = ours.encode(a, b, max_length=10, truncation=True)["input_ids"]
    theirs = legacy(a, b, max_length=10, truncation=True)["input_ids"]
    sep = ours.sep_token_id
    assert mine.index(sep) == 4  # [CLS] a b c [SEP] f g h i [SEP]
    assert theirs.index(sep) == 5  # [CLS] a b c d [SEP] f g h [SEP]


def test_padding_and_batch(ours, references):
    ref = references["BertTokenizer(vocab=...)"]
    enc = ours.encode("hello world", max_length=6, padding=True)
    assert enc == _fields(ref("hello world", max_length=6, padding="max_length"))
    assert enc["attention_mask"] == [1, 1, 1, 1, 0, 0] and enc["input_ids"][-2:] == [0, 0]
    texts, pairs = ["short", "a longer first text here", "x"], ["b", "c d", "e f g h"]
    batch = ours.batch_encode(texts, pairs, max_length=8, truncation=True)
    theirs = ref(texts, pairs, max_length=8, truncation=True, padding=True, return_tensors="pt")
    for key, value in batch.to_dict().items():
        assert value.dtype == torch.long and value.shape == (3, 8)
        assert torch.equal(value, theirs[key]), key
    fixed = ours.batch_encode(["a", "b c"], padding="max_length", max_length=5)
    assert fixed.input_ids.shape == (2, 5)
    with pytest.raises(ValueError, match="truncation=True"):
        ours.batch_encode(["a b c d e f"], padding="max_length", max_length=4)


def test_decode_and_conversions(ours):
    ids = ours.encode("Unaffable, the [MASK]!")["input_ids"]
    assert ours.decode(ids) == "[CLS] unaffable , the [MASK] ! [SEP]"
    assert ours.decode(ids, skip_special_tokens=True) == "unaffable , the !"
    assert ours.convert_ids_to_tokens(ids[:2]) == ["[CLS]", "una"]
    assert ours.convert_tokens_to_ids("no-such-piece") == ours.unk_token_id


def test_wordpiece_greedy_longest_match():
    vocab = {"un", "una", "##aff", "##able", "##ffa", "##ble", "a", "##b"}
    assert tk.wordpiece("unaffable", vocab) == ["una", "##ffa", "##ble"]  # the longest first
    assert tk.wordpiece("unaffablex", vocab) == ["[UNK]"]  # one gap: the whole word
    assert tk.wordpiece("ab", vocab) == ["a", "##b"]
    assert tk.wordpiece("a" * 5, {"a", "##a"}, max_chars=4) == ["[UNK]"]


def test_greedy_dead_end_gives_unk_like_tokenizers():
    """`una` is the longest first piece, nothing continues `ffable`: [UNK], though
    `un ##affable` covers the word. The Rust WordPiece model of `tokenizers` agrees."""
    from tokenizers import Tokenizer, models

    toy = ["[UNK]", "un", "una", "##affable"]
    rust = Tokenizer(models.WordPiece({p: i for i, p in enumerate(toy)}, unk_token="[UNK]"))
    assert tk.wordpiece("unaffable", set(toy)) == rust.encode("unaffable").tokens == ["[UNK]"]
    assert tk.wordpiece("unaffable", set(toy) - {"una"}) == ["un", "##affable"]


def test_greedy_costs_pieces_on_the_real_vocabulary(ours, references):
    # greedy takes `lexi`; `lex ##ically` (2 pieces) is also in the vocabulary
    assert {"lex", "##ically"} <= set(ours.vocab)
    for tok in (ours, *references.values()):
        assert tok.tokenize("lexically") == ["lexi", "##cal", "##ly"]


def test_japanese_and_korean(ours, references):
    """Kana are not spaced (one word, [UNK]; accent stripping turns で into て); Hangul
    syllables decompose into jamo, one piece each."""
    ja = "わたしはきのうとしょかんでほんをよみました。"
    ko = "나는 어제 도서관에서 책을 읽었습니다."
    assert tk.basic_tokenize(ja) == ["わたしはきのうとしょかんてほんをよみました", "。"]
    assert ours.tokenize(ja) == ["[UNK]", "。"]
    pieces = ours.tokenize(ko)
    assert len(pieces) == 28 and pieces[-2:] == ["[UNK]", "."]
    assert all(len(p.removeprefix("##")) == 1 for p in pieces if p != "[UNK]")
    for text in (ja, ko):
        for ref in references.values():
            assert ref(text)["input_ids"] == ours.encode(text)["input_ids"]


def test_rust_pre_tokenizer_gives_the_basic_tokenizer_words(corpus_sentences):
    """The book counts words with `tokenizers`' normalizer and pre-tokenizer (fast)."""
    fast = data.bert_tokenizer()
    for sentence in corpus_sentences[::7]:
        words = [
            w
            for w, _ in fast.pre_tokenizer.pre_tokenize_str(fast.normalizer.normalize_str(sentence))
        ]
        assert words == tk.basic_tokenize(sentence), sentence


def test_wordpiece_trainer_merges_like_bpe():
    """`tokenizers`' WordPieceTrainer wraps BpeTrainer: trained on the same text, the two
    vocabularies agree up to ties between equally frequent pairs."""
    from pydoc_data.topics import topics

    from tokenizers import Tokenizer, models, trainers

    docs = [data.document_from_text(k, [topics[k]]) for k in sorted(topics)]
    wordpiece = data.train_wordpiece(docs, vocab_size=1000)
    bpe = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##"))
    bpe.normalizer, bpe.pre_tokenizer = wordpiece.normalizer, wordpiece.pre_tokenizer
    trainer = trainers.BpeTrainer(
        vocab_size=1000,
        min_frequency=2,
        special_tokens=list(data.SPECIAL_TOKENS),
        continuing_subword_prefix="##",
        show_progress=False,
    )
    bpe.train_from_iterator((s for d in docs for s in d.sentences), trainer=trainer)
    shared = set(wordpiece.get_vocab()) & set(bpe.get_vocab())
    assert 990 <= len(shared) <= 1000


def test_tokenization_plots():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from bertcourse.viz import tokenization as viz

    fig = viz.plot_vocab_size([250, 500], [0.3, 0.2], [250, 500], [0.0, 0.0], [2.4, 1.9])
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    fig = viz.plot_parameter_share([1000, 2000], {"tiny": [0.2, 0.3]}, marks=[1500])
    assert isinstance(fig, Figure)
    with pytest.raises(ValueError, match="pieces_per_word has 1 values for 2 vocabulary sizes"):
        viz.plot_vocab_size([250, 500], [0.3, 0.2], [250, 500], [0.0, 0.0], [2.4])
    with pytest.raises(ValueError, match="tiny has 3 values"):
        viz.plot_parameter_share([1000, 2000], {"tiny": [0.2, 0.3, 0.4]})


def test_basic_tokenizer_steps():
    assert tk.clean_text("a\x00b\u200bc\td\ufffd") == "abc d"
    assert tk.space_chinese_chars("ab我c") == "ab 我 c"
    assert tk.strip_accents("Crème") == "Creme"
    assert tk.split_on_punctuation("don't!") == ["don", "'", "t", "!"]
    assert tk.basic_tokenize("Héllo, WÖRLD!") == ["hello", ",", "world", "!"]
    assert tk.basic_tokenize("Héllo, WÖRLD!", do_lower_case=False) == ["Héllo", ",", "WÖRLD", "!"]
    assert tk.is_punctuation("$") and tk.is_punctuation("¿") and not tk.is_punctuation("€")
    assert tk.char_category("\u2e43") == "Cn" and tk.char_category("\u166d") == "Po"


def test_errors_name_the_problem(ours, tmp_path):
    with pytest.raises(ValueError, match="lacks the special tokens"):
        tk.BertTokenizer(["a", "b", "[PAD]"])
    with pytest.raises(FileNotFoundError, match="no vocabulary file"):
        tk.BertTokenizer(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="truncation needs max_length"):
        ours.encode("a", truncation=True)
    with pytest.raises(ValueError, match="max_length leaves -1"):
        ours.encode("a", "b", max_length=2, truncation=True)
    with pytest.raises(ValueError, match="2 texts but 1"):
        ours.batch_encode(["a", "b"], ["c"])


def test_vocab_as_list_or_dict():
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "##s", "world"]
    a = tk.BertTokenizer(pieces)
    b = tk.BertTokenizer({p: i for i, p in enumerate(pieces)})
    assert a.encode("Hellos world")["input_ids"] == b.encode("Hellos world")["input_ids"]
    assert a.encode("Hellos world")["input_ids"] == [2, 5, 6, 7, 3]
