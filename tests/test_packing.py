"""Packing several NSP pairs per row: the layout, the model's outputs (same as unpacked), the
padding it removes on the real corpus, and a packed training run."""

from __future__ import annotations

import random

import pytest
import torch

from bertcourse import BertConfig, BertForPreTraining, data
from bertcourse.config import IGNORE_INDEX
from bertcourse.nsp import create_instances, pad_batch
from bertcourse.packing import pack_batch, pack_lengths, packed_forward, padding_share


def test_pack_lengths_first_fit_decreasing():
    rows = pack_lengths([5, 9, 3, 7, 2, 10], max_length=10)
    # Longest first (10, 9, 7, 5, 3, 2), each into the first row with room: 3 joins 7, 2 joins 5.
    assert rows == [[5], [1], [3, 2], [0, 4]]  # 10 | 9 | 7+3 | 5+2
    lengths = [5, 9, 3, 7, 2, 10]
    assert sorted(i for r in rows for i in r) == list(range(6))  # every item exactly once
    assert all(sum(lengths[i] for i in r) <= 10 for r in rows)
    with pytest.raises(ValueError, match="more than the row length 8"):
        pack_lengths([3, 9], max_length=8)


def test_padding_share():
    assert padding_share([4, 4], row_length=8) == 0.5
    assert padding_share([4, 4], row_length=8, rows=1) == 0.0


def _examples(n_docs: int = 8, seed: int = 0):
    rng = random.Random(seed)
    docs = [[[rng.randrange(5, 90) for _ in range(rng.randint(2, 9))]
             for _ in range(rng.randint(2, 5))] for _ in range(n_docs)]  # fmt: skip
    return create_instances(docs, rng=random.Random(seed), max_seq_length=24, cls_id=2, sep_id=3)


def test_pack_batch_layout():
    examples = _examples()
    rows = pack_lengths([len(e.input_ids) for e in examples], 32)
    b = pack_batch(examples, rows, pad_id=0, length=32)
    assert b["attention_mask"].shape == (len(rows), 32, 32)
    assert len(b["next_sentence_label"]) == len(examples) == len(b["cls_positions"])
    for (r, c), label, k in zip(b["cls_positions"].tolist(), b["next_sentence_label"].tolist(),
                                (i for row in rows for i in row)):  # fmt: skip
        ex = examples[k]
        n = len(ex.input_ids)
        assert b["input_ids"][r, c : c + n].tolist() == ex.input_ids  # starts with [CLS]
        assert b["position_ids"][r, c : c + n].tolist() == list(range(n))  # own positions
        assert b["token_type_ids"][r, c : c + n].tolist() == ex.token_type_ids
        assert label == ex.next_sentence_label
        # A token of this pair attends to exactly the n tokens of its own pair.
        assert b["attention_mask"][r, c].nonzero().flatten().tolist() == list(range(c, c + n))


def test_packed_forward_equals_each_pair_alone():
    config = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=64)  # fmt: skip
    torch.manual_seed(0)
    model = BertForPreTraining(config).eval()
    examples = _examples()
    rows = pack_lengths([len(e.input_ids) for e in examples], 40)
    assert len(rows) < len(examples)  # something was packed together
    b = pack_batch(examples, rows, pad_id=0, length=40)
    g = torch.Generator().manual_seed(1)
    labels = torch.where(torch.rand(b["input_ids"].shape, generator=g) < 0.3, b["input_ids"], IGNORE_INDEX)  # fmt: skip
    labels[b["attention_mask"].amax(-1) == 0] = IGNORE_INDEX  # padding is never labelled
    with torch.no_grad():
        packed = packed_forward(model, labels=labels, **b)
        order = [i for row in rows for i in row]  # pairs in packed order
        logits, nsp = [], []
        for (r, c), k in zip(b["cls_positions"].tolist(), order):
            n = len(examples[k].input_ids)
            alone = pad_batch([examples[k]], pad_id=0)
            lab = labels[r, c : c + n][None]  # (1, n)
            out = model(alone["input_ids"], alone["token_type_ids"], alone["attention_mask"], labels=lab)  # fmt: skip
            logits.append(out.prediction_logits)
            nsp.append(out.seq_relationship_logits)
    # Rows are read row-major, pairs sit left to right: the same labelled positions, same order.
    torch.testing.assert_close(packed.prediction_logits, torch.cat(logits), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(packed.seq_relationship_logits, torch.cat(nsp), rtol=1e-5, atol=1e-5)


def test_packing_removes_padding_on_the_corpus():
    corpus, _ = data.load_corpus("bert")
    train, _ = corpus.split()
    pairs = data.NspPairs(train, epoch=0, seed=0, max_seq_length=128)
    lengths = [len(e.input_ids) for e in pairs.examples]
    packed = data.PackedNspPairs(pairs, 128)
    before = padding_share(lengths, 128)
    after = padding_share(lengths, 128, rows=len(packed))
    assert before > 0.10  # a document's last chunk and short_seq_prob leave short pairs
    assert after < 0.03 and after < before / 4
    # Every pair is in exactly one row, rows hold at most 128 tokens.
    assert sorted(i for r in packed.rows for i in r) == list(range(len(pairs)))
    assert max(sum(lengths[i] for i in r) for r in packed.rows) <= 128


def test_packed_loader_keeps_each_pairs_mask():
    corpus, _ = data.load_corpus("bert")
    train, _ = corpus.split()
    plain = next(iter(data.pretraining_dataloader(train, batch_size=4, max_seq_length=64)))
    loader = data.pretraining_dataloader(train, batch_size=4, max_seq_length=64, packing=True)
    b = next(iter(loader))
    assert b["attention_mask"].dim() == 3 and b["labels"].shape == b["input_ids"].shape
    assert (b["labels"] != IGNORE_INDEX).sum() > 0
    assert plain["attention_mask"].dim() == 2
    # The collator masks each pair as the unpacked one does: rebuild one pair's mask.
    pairs = loader.dataset
    row = pairs[loader.sampler[0]]  # the first row of the first batch
    index, ex = row[0]
    masked, lab = loader.collate_fn.mask(index, ex)
    n = len(ex.input_ids)
    assert b["input_ids"][0, :n].tolist() == masked.input_ids
    assert b["labels"][0, :n].tolist() == lab.tolist()
