"""The FLOP count of bertcourse.flops against PyTorch's own counter, and the MFU helpers."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from bertcourse import BertConfig, BertForPreTraining
from bertcourse.config import IGNORE_INDEX
from bertcourse.flops import bert_flops, matmul_peak, mfu

# transformers' tiny test config, with an odd intermediate size so H and I cannot be swapped.
CONFIG = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              intermediate_size=37, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # fmt: skip


def _batch(B: int, T: int, every: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 99, (B, T), generator=g)  # (B, T)
    labels = torch.full((B, T), IGNORE_INDEX)
    labels[:, ::every] = ids[:, ::every]  # T / every labelled positions per row
    return ids, labels, torch.zeros(B, dtype=torch.long)


@pytest.mark.parametrize("B,T,every", [(3, 16, 4), (2, 40, 7)])
def test_flops_equal_torch_flop_counter(B: int, T: int, every: int) -> None:
    # Eager attention: its QK^T and PV are torch.matmul calls, which FlopCounterMode counts
    # (the fused CPU SDPA kernel has no FLOP formula registered, so it would count 0).
    config = BertConfig(**CONFIG, attn_implementation="eager")
    torch.manual_seed(0)
    model = BertForPreTraining(config)
    ids, labels, nsp = _batch(B, T, every)
    n_labelled = int((labels != IGNORE_INDEX).sum())
    with FlopCounterMode(display=False) as fwd:
        model(ids, labels=labels, next_sentence_label=nsp)
    with FlopCounterMode(display=False) as step:
        model(ids, labels=labels, next_sentence_label=nsp).loss.backward()
    ours_fwd = bert_flops(config, B, T, n_labelled, training=False)
    ours_step = bert_flops(config, B, T, n_labelled)
    assert ours_fwd.total == fwd.get_total_flops()
    assert ours_step.total == step.get_total_flops()
    assert ours_step.total == 3 * ours_fwd.total


def test_flops_hand_count_bert_base() -> None:
    # nanoGPT's rule: 6 FLOPs per weight per token + 12 * n * H * T per token for attention.
    c = BertConfig()  # bert-base: n=12, H=768, I=3072, V=30522
    f = bert_flops(c, batch_size=8, seq_len=128, n_labelled=0)
    weights = 12 * (4 * 768 * 768 + 2 * 768 * 3072)  # 84,934,656 encoder matmul weights
    assert weights == 84_934_656
    assert f.encoder == 6 * weights * 8 * 128
    assert f.attention == 12 * 12 * 768 * 128 * 8 * 128
    assert f.mlm_head == 0.0
    # The MLM head grows with the labelled positions only.
    assert bert_flops(c, 8, 128, n_labelled=10).mlm_head == 6 * (768 * 768 + 768 * 30522) * 10


def test_matmul_peak_is_plausible() -> None:
    peak = matmul_peak(sizes=(64, 128), repeats=2, min_seconds=0.005)
    assert set(peak.rates) == {64, 128}
    assert peak.flops_per_s == max(peak.rates.values())
    assert peak.threads == torch.get_num_threads()
    # Any CPU of the last 20 years does more than 100 MFLOP/s; none does a PFLOP/s in fp32.
    assert 1e8 < peak.flops_per_s < 1e15


def test_mfu() -> None:
    assert mfu(2e9, 0.5, 8e9) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="positive"):
        mfu(1e9, 0.0, 1e9)
