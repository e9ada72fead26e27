"""bertcourse.nsp: pairs as the original create_pretraining_data.py builds them, SOP, batching.

The reference for NSP is a line-by-line restatement of the original release's
`create_instances_from_document` and `truncate_seq_pair` (without the MLM masking that the
original interleaves); statistical checks use fixed seeds and tolerances of a few standard errors.
"""

from __future__ import annotations

import math
import random

import pytest
import torch

from bertcourse.config import CLS_ID, IS_NEXT, NOT_NEXT, PAD_ID, SEP_ID
from bertcourse.nsp import (
    NspExample,
    create_instances,
    create_instances_from_document,
    make_pair,
    pad_batch,
    truncate_seq_pair,
)

DOC_STRIDE = 100_000  # token id = 1000 + DOC_STRIDE * document + position: ids tell where from


def make_corpus(n_docs, n_sentences, min_len=3, max_len=12, seed=0, unique=True):
    """Documents whose token ids encode (document, position), never a special id."""
    rng = random.Random(seed)
    documents = []
    for d in range(n_docs):
        position, doc = 0, []
        for _ in range(n_sentences if isinstance(n_sentences, int) else rng.randint(*n_sentences)):
            n = rng.randint(min_len, max_len)
            if unique:
                doc.append([1000 + DOC_STRIDE * d + position + k for k in range(n)])
            else:
                doc.append([rng.randint(1000, 2000) for _ in range(n)])
            position += n
        documents.append(doc)
    return documents


def doc_of(token):
    return (token - 1000) // DOC_STRIDE


def check_layout(ex: NspExample, max_seq_length: int) -> None:
    ids, types = ex.input_ids, ex.token_type_ids
    assert len(ids) == len(types) == ex.len_a + ex.len_b + 3 <= max_seq_length
    assert ex.len_a >= 1 and ex.len_b >= 1
    assert ids[0] == CLS_ID and ids[ex.len_a + 1] == SEP_ID and ids[-1] == SEP_ID
    assert CLS_ID not in ids[1:] and ids.count(SEP_ID) == 2
    assert types == [0] * (ex.len_a + 2) + [1] * (ex.len_b + 1)
    assert ex.next_sentence_label in (IS_NEXT, NOT_NEXT)
    assert ex.is_random_next == (ex.next_sentence_label == NOT_NEXT)


# --- The original, restated ------------------------------------------------------------------
def original_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    while True:
        total_length = len(tokens_a) + len(tokens_b)
        if total_length <= max_num_tokens:
            break
        trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        assert len(trunc_tokens) >= 1
        if rng.random() < 0.5:
            del trunc_tokens[0]
        else:
            trunc_tokens.pop()


def original_instances(all_documents, document_index, max_seq_length, short_seq_prob, rng):
    document = all_documents[document_index]
    max_num_tokens = max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)
    instances = []
    current_chunk = []
    current_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            if current_chunk:
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)
                tokens_a = []
                for j in range(a_end):
                    tokens_a.extend(current_chunk[j])
                tokens_b = []
                if len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    target_b_length = target_seq_length - len(tokens_a)
                    for _ in range(10):
                        random_document_index = rng.randint(0, len(all_documents) - 1)
                        if random_document_index != document_index:
                            break
                    random_document = all_documents[random_document_index]
                    random_start = rng.randint(0, len(random_document) - 1)
                    for j in range(random_start, len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    num_unused_segments = len(current_chunk) - a_end
                    i -= num_unused_segments
                else:
                    is_random_next = False
                    for j in range(a_end, len(current_chunk)):
                        tokens_b.extend(current_chunk[j])
                original_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                tokens = [CLS_ID, *tokens_a, SEP_ID, *tokens_b, SEP_ID]
                segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                instances.append((tokens, segment_ids, int(is_random_next)))
            current_chunk = []
            current_length = 0
        i += 1
    return instances


@pytest.mark.parametrize(
    ("max_seq_length", "short_seq_prob", "seed"),
    [(128, 0.1, 0), (32, 0.1, 1), (16, 0.5, 2), (64, 0.0, 3), (9, 1.0, 4)],
)
def test_same_pairs_as_the_original(max_seq_length, short_seq_prob, seed):
    documents = make_corpus(8, (1, 40), max_len=20, seed=seed)
    ours_rng, ref_rng = random.Random(seed), random.Random(seed)
    n = 0
    for index in range(len(documents)):
        ours = create_instances_from_document(
            documents, index, rng=ours_rng, max_seq_length=max_seq_length, short_seq_prob=short_seq_prob
        )  # fmt: skip
        ref = original_instances(documents, index, max_seq_length, short_seq_prob, ref_rng)
        assert [(e.input_ids, e.token_type_ids, e.next_sentence_label) for e in ours] == ref
        n += len(ours)
    assert n > 20
    assert ours_rng.random() == ref_rng.random()  # the same number of draws


# --- Layout, lengths, labels -----------------------------------------------------------------
@pytest.mark.parametrize("task", ["nsp", "sop"])
@pytest.mark.parametrize("max_seq_length", [5, 12, 64])
def test_layout_and_lengths(task, max_seq_length):
    documents = make_corpus(10, (1, 40), max_len=25, seed=max_seq_length)
    instances = create_instances(documents, rng=7, max_seq_length=max_seq_length, task=task)
    assert len(instances) > 20
    for ex in instances:
        check_layout(ex, max_seq_length)
        assert ex.tokens_a == ex.input_ids[1 : 1 + ex.len_a]
        assert ex.tokens_b == ex.input_ids[ex.len_a + 2 : -1]


def test_nsp_labels_balanced_and_b_from_the_right_document():
    # short_seq_prob=0 and sentences much shorter than the target: a chunk has a single
    # sentence (B forced random) at most once per document, so P(random) is in
    # [0.5, 0.5 + n_docs / (2 N)].
    documents = make_corpus(100, 400, seed=11)
    instances = create_instances(documents, rng=12, max_seq_length=64, short_seq_prob=0.0)
    n = len(instances)
    assert n > 5000
    frac = sum(e.is_random_next for e in instances) / n
    se = math.sqrt(0.25 / n)
    assert abs(frac - 0.5) < 4 * se + len(documents) / (2 * n), (frac, n)
    for ex in instances:
        docs_a = {doc_of(t) for t in ex.tokens_a}
        docs_b = {doc_of(t) for t in ex.tokens_b}
        assert len(docs_a) == 1 and len(docs_b) == 1
        if ex.is_random_next:
            assert docs_a != docs_b
        else:  # the real continuation: B starts right after A ends (a truncated A loses its end)
            assert docs_a == docs_b and max(ex.tokens_a) < min(ex.tokens_b)


def test_random_b_never_from_the_same_document_with_two_documents(monkeypatch):
    # With two documents, the original's 10 redraws all hit the current one with p = 1/1024
    # (it then uses the current document); bertcourse picks the other document instead.
    import bertcourse.nsp as nsp

    gave_up = []
    draw = nsp._random_other_document

    def counting_draw(n_documents, document_index, rng):
        replay = random.Random()
        replay.setstate(rng.getstate())
        if all(replay.randint(0, n_documents - 1) == document_index for _ in range(10)):
            gave_up.append(document_index)
        return draw(n_documents, document_index, rng)

    monkeypatch.setattr(nsp, "_random_other_document", counting_draw)
    documents = make_corpus(2, 10_000, min_len=1, max_len=3, seed=5)
    instances = create_instances(documents, rng=3, max_seq_length=8, short_seq_prob=0.0)
    randoms = [e for e in instances if e.is_random_next]
    assert len(randoms) > 4000 and len(gave_up) >= 2  # the fallback was exercised
    for ex in randoms:
        assert doc_of(ex.tokens_a[0]) != doc_of(ex.tokens_b[0])


def test_single_sentence_chunks_are_always_random_next():
    documents = make_corpus(4, 10, min_len=70, max_len=80, seed=1)  # each sentence > target
    instances = create_instances(documents, rng=0, max_seq_length=64, short_seq_prob=0.0)
    assert len(instances) == 40 and all(e.is_random_next for e in instances)
    assert all(len(e.input_ids) == 64 for e in instances)  # truncated to max_seq_length


def test_short_seq_prob_gives_shorter_pairs():
    # one-token sentences: a chunk ends exactly at the target length, so in-order pairs
    # have exactly `target` tokens: max_seq_length - 3 unless a short target was drawn
    documents = make_corpus(20, 400, min_len=1, max_len=1, seed=2)

    def full_fraction(p):
        inst = create_instances(documents, rng=1, max_seq_length=23, short_seq_prob=p)
        in_order = [e for e in inst if not e.is_random_next]
        return sum(e.len_a + e.len_b == 20 for e in in_order) / len(in_order)

    # without short targets only a document's last chunk can be short
    assert full_fraction(0.0) > 0.9
    assert full_fraction(1.0) < 0.2  # target = randint(2, 20) for every document


def test_determinism():
    documents = make_corpus(5, (2, 20), seed=3)
    kwargs = {"max_seq_length": 32, "task": "nsp"}
    a = create_instances(documents, rng=random.Random(42), **kwargs)
    b = create_instances(documents, rng=42, **kwargs)
    c = create_instances(documents, rng=43, **kwargs)
    assert a == b and a != c
    assert create_instances(documents, rng=1, dupe_factor=3, **kwargs) == create_instances(documents, rng=1, dupe_factor=3, **kwargs)  # fmt: skip


def test_shuffle_and_dupe_factor():
    documents = make_corpus(5, (2, 20), seed=3)
    once = create_instances(documents, rng=9, max_seq_length=32, shuffle=False)
    thrice = create_instances(documents, rng=9, max_seq_length=32, shuffle=False, dupe_factor=3)
    assert thrice[: len(once)] == once and len(thrice) > 2 * len(once)
    # unshuffled output follows the document order
    firsts = [doc_of(e.tokens_a[0]) for e in once]
    assert firsts == sorted(firsts)


# --- Sentence-order prediction -----------------------------------------------------------------
def test_sop_negatives_are_exact_swaps_and_balanced():
    documents = make_corpus(30, 200, seed=8)
    max_seq_length = 48
    instances = create_instances(documents, rng=4, max_seq_length=max_seq_length, task="sop")
    n = len(instances)
    frac = sum(e.is_random_next for e in instances) / n
    assert abs(frac - 0.5) < 4 * math.sqrt(0.25 / n), (frac, n)  # no forced negatives in SOP
    untruncated = 0
    for ex in instances:
        first, second = (ex.tokens_b, ex.tokens_a) if ex.is_random_next else (ex.tokens_a, ex.tokens_b)  # fmt: skip
        assert {doc_of(t) for t in first + second} == {doc_of(first[0])}  # one document
        assert max(first) < min(second)  # in the document's order once un-swapped
        if ex.len_a + ex.len_b < max_seq_length - 3:  # not truncated: one contiguous text
            untruncated += 1
            assert first + second == list(range(first[0], first[0] + len(first + second)))
    assert untruncated > 100


def test_sop_coin_is_independent_pair_to_pair():
    """An independent coin per pair: in document order, a pair's label equals the previous
    pair's half the time (a coin per chunk or per document would make runs), within 4 SE."""
    documents = make_corpus(30, 200, seed=9)
    labels = [e.next_sentence_label
              for e in create_instances(documents, rng=5, max_seq_length=32, task="sop", shuffle=False)]  # fmt: skip
    n = len(labels) - 1
    same = sum(a == b for a, b in zip(labels, labels[1:])) / n
    assert abs(same - 0.5) < 4 * math.sqrt(0.25 / n), (same, n)


@pytest.mark.parametrize("max_seq_length", [12, 48])
def test_no_sentence_task_gives_consecutive_pairs_in_order(max_seq_length):
    """task="none": SOP's pairs never swapped: label 0, one document, A before B, contiguous."""
    documents = make_corpus(20, (1, 30), seed=10)
    instances = create_instances(documents, rng=6, max_seq_length=max_seq_length, task="none",
                                 dupe_factor=4)  # fmt: skip
    assert len(instances) > 200
    untruncated = 0
    for ex in instances:
        check_layout(ex, max_seq_length)
        assert ex.next_sentence_label == IS_NEXT
        assert {doc_of(t) for t in ex.tokens_a + ex.tokens_b} == {doc_of(ex.tokens_a[0])}
        assert max(ex.tokens_a) < min(ex.tokens_b)
        if ex.len_a + ex.len_b < max_seq_length - 3:
            untruncated += 1
            whole = ex.tokens_a + ex.tokens_b
            assert whole == list(range(whole[0], whole[0] + len(whole)))
    assert untruncated > 20
    with pytest.raises(ValueError, match="task must be one of"):
        create_instances(documents, rng=0, task="order")


def test_sop_works_with_one_document_and_splits_single_sentences():
    documents = [[[1000 + k for k in range(50)]]]  # one document of one long sentence
    instances = create_instances(documents, rng=0, max_seq_length=64, task="sop", dupe_factor=20)  # fmt: skip
    assert len(instances) == 20
    for ex in instances:
        check_layout(ex, 64)
        first, second = (ex.tokens_b, ex.tokens_a) if ex.is_random_next else (ex.tokens_a, ex.tokens_b)  # fmt: skip
        assert first + second == list(range(1000, 1050))
    assert {e.next_sentence_label for e in instances} == {IS_NEXT, NOT_NEXT}
    # a one-token single sentence cannot be split: no pair
    assert create_instances([[[1000]]], rng=0, task="sop") == []


# --- Truncation and make_pair -------------------------------------------------------------------
def test_truncate_longer_first_ties_cut_b_deterministic_from_back():
    a, b = list(range(10)), [20, 21, 22]
    truncate_seq_pair(a, b, 8)
    assert a == [0, 1, 2, 3, 4] and b == [20, 21, 22]
    a, b = [1, 2], [3, 4]
    truncate_seq_pair(a, b, 3)
    assert a == [1, 2] and b == [3]
    a, b = [1], [2]
    truncate_seq_pair(a, b, 2)
    assert a == [1] and b == [2]


def test_truncate_front_or_back_at_random():
    # 50 removals from a, each from the front with p = 1/2: a[0] ~ Binomial(50, 1/2)
    rng = random.Random(0)
    trials, fronts = 400, []
    for _ in range(trials):
        a, b = list(range(100)), [0]
        truncate_seq_pair(a, b, 51, rng)
        assert len(a) == 50 and a == list(range(a[0], a[0] + 50))  # still contiguous
        fronts.append(a[0])
    mean, se = sum(fronts) / trials, math.sqrt(50 * 0.25 / trials)
    assert abs(mean - 25) < 4 * se


def test_make_pair():
    a, b = [5, 6, 7, 8], [9, 10]
    ex = make_pair(a, b, CLS_ID, SEP_ID, 8)
    assert ex.input_ids == [CLS_ID, 5, 6, 7, SEP_ID, 9, 10, SEP_ID]
    assert ex.token_type_ids == [0, 0, 0, 0, 0, 1, 1, 1]
    assert ex.next_sentence_label == IS_NEXT and (a, b) == ([5, 6, 7, 8], [9, 10])  # not modified
    ex = make_pair(a, b, 1, 2, label=NOT_NEXT)  # other special ids, no truncation
    assert ex.input_ids == [1, 5, 6, 7, 8, 2, 9, 10, 2] and ex.is_random_next
    with pytest.raises(ValueError, match="max_len"):
        make_pair(a, b, CLS_ID, SEP_ID, 4)
    with pytest.raises(ValueError, match="at least one token"):
        make_pair([], b)
    with pytest.raises(ValueError, match="label"):
        make_pair(a, b, label=2)


# --- Bad input -------------------------------------------------------------------------------
def test_bad_input_errors():
    docs = make_corpus(3, 5, seed=0)
    with pytest.raises(ValueError, match="max_seq_length"):
        create_instances(docs, rng=0, max_seq_length=4)
    with pytest.raises(ValueError, match="document 1 is empty"):
        create_instances([docs[0], [], docs[2]], rng=0)
    with pytest.raises(ValueError, match="sentence 2 of document 0"):
        create_instances([docs[0][:2] + [[]], docs[1]], rng=0)
    with pytest.raises(ValueError, match="at least 2 documents"):
        create_instances(docs[:1], rng=0)
    with pytest.raises(ValueError, match="documents is empty"):
        create_instances([], rng=0)
    with pytest.raises(ValueError, match="task"):
        create_instances(docs, rng=0, task="mlm")
    with pytest.raises(ValueError, match="short_seq_prob"):
        create_instances(docs, rng=0, short_seq_prob=1.5)
    with pytest.raises(TypeError, match="rng"):
        create_instances(docs, rng=None)
    with pytest.raises(IndexError, match="document_index"):
        create_instances_from_document(docs, 3, rng=0)
    with pytest.raises(ValueError, match="dupe_factor"):
        create_instances(docs, rng=0, dupe_factor=0)


# --- Batching ----------------------------------------------------------------------------------
def test_pad_batch():
    examples = [make_pair([5, 6, 7], [8]), make_pair([5], [6], label=NOT_NEXT)]
    batch = pad_batch(examples)
    assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "next_sentence_label"}
    assert all(t.dtype == torch.long for t in batch.values())
    assert batch["input_ids"].tolist() == [
        [CLS_ID, 5, 6, 7, SEP_ID, 8, SEP_ID],
        [CLS_ID, 5, SEP_ID, 6, SEP_ID, PAD_ID, PAD_ID],
    ]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1] * 7, [1] * 5 + [0] * 2]
    assert batch["next_sentence_label"].tolist() == [IS_NEXT, NOT_NEXT]
    assert pad_batch(examples, max_length=10)["input_ids"].shape == (2, 10)
    with pytest.raises(ValueError, match="max_length"):
        pad_batch(examples, max_length=5)
    with pytest.raises(ValueError, match="at least one"):
        pad_batch([])


def test_batch_runs_through_bert_for_pretraining():
    from bertcourse import BertConfig, BertForPreTraining

    config = BertConfig.tiny()
    documents = make_corpus(4, 20, unique=False, seed=1)
    documents = [[[5 + t % (config.vocab_size - 5) for t in s] for s in d] for d in documents]
    examples = create_instances(documents, rng=0, max_seq_length=32, cls_id=1, sep_id=2)[:6]
    batch = pad_batch(examples)
    torch.manual_seed(0)
    out = BertForPreTraining(config).eval()(**batch)
    assert out.seq_relationship_logits.shape == (6, 2)
    assert torch.isfinite(out.nsp_loss)
