"""Attention math against PyTorch's own kernels and closed-form facts."""

import math

import pytest
import torch
import torch.nn.functional as F

from bertcourse import BertConfig
from bertcourse.attention import (
    BertSelfAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from bertcourse.masks import extended_attention_mask, to_sdpa_bool_mask


@pytest.mark.parametrize("shape", [(2, 3, 5, 8), (1, 1, 7, 4), (3, 12, 9, 16)])
def test_sdpa_math_matches_torch(shape):
    q, k, v = (torch.randn(shape) for _ in range(3))
    mask = torch.ones(shape[0], shape[2], dtype=torch.long)
    mask[0, -2:] = 0
    bias = extended_attention_mask(mask)
    ctx, probs = scaled_dot_product_attention(q, k, v, bias)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=to_sdpa_bool_mask(mask))
    torch.testing.assert_close(ctx, ref, atol=1e-5, rtol=1e-5)
    # The probabilities are softmax(QK^T / sqrt(d)) with masked keys at zero.
    manual = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(shape[-1]) + bias, dim=-1)
    torch.testing.assert_close(probs, manual)
    assert torch.all(probs[0, ..., -2:] == 0)


def test_missing_scale_would_be_caught():
    q, k, v = (torch.randn(1, 1, 6, 64) for _ in range(3))
    ctx, _ = scaled_dot_product_attention(q, k, v)
    unscaled = torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v
    assert (ctx - unscaled).abs().max() > 1e-2


def test_split_merge_heads_round_trip_and_layout():
    x = torch.arange(2 * 3 * 12, dtype=torch.float32).view(2, 3, 12)
    h = split_heads(x, 4)
    assert h.shape == (2, 4, 3, 3)
    # Head a of token l holds hidden dims [3a, 3a + 3).
    torch.testing.assert_close(h[1, 2, 0], x[1, 0, 6:9])
    torch.testing.assert_close(merge_heads(h), x)
    with pytest.raises(ValueError, match="not divisible"):
        split_heads(x, 5)


def test_self_attention_eager_equals_sdpa():
    config = BertConfig.tiny(attention_probs_dropout_prob=0.0)
    eager = BertSelfAttention(config.replace(attn_implementation="eager")).eval()
    sdpa = BertSelfAttention(config.replace(attn_implementation="sdpa")).eval()
    sdpa.load_state_dict(eager.state_dict())
    x = torch.randn(2, 6, config.hidden_size)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2])
    bias = extended_attention_mask(mask)
    a, probs = eager(x, bias, output_attentions=True)
    b, none = sdpa(x, bias)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert none is None and probs.shape == (2, config.num_attention_heads, 6, 6)


def test_scores_variance_grows_with_dk():
    """Var(q . k) = d_k for unit-variance entries; scaling by 1/sqrt(d_k) brings it back to 1."""
    g = torch.Generator().manual_seed(0)
    for d in (16, 64, 256):
        q, k = torch.randn(20000, d, generator=g), torch.randn(20000, d, generator=g)
        dots = (q * k).sum(-1)
        # Var of the sample variance of 20000 draws is ~ 2 d^2 / 20000 -> relative SE ~1%.
        assert abs(dots.var().item() / d - 1) < 0.05
        assert abs((dots / math.sqrt(d)).var().item() - 1) < 0.05
