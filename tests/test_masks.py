"""Mask conventions: 1 = token, additive bias with finfo.min, SDPA and MultiheadAttention polarity."""

import pytest
import torch
import torch.nn.functional as F

from bertcourse.masks import (
    extended_attention_mask,
    key_padding_mask,
    padding_mask,
    query_key_mask,
    to_sdpa_bool_mask,
)


def test_padding_mask_from_ids():
    ids = torch.tensor([[101, 7, 102, 0, 0], [101, 5, 6, 7, 102]])
    assert padding_mask(ids).tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    with pytest.raises(ValueError, match="shape"):
        padding_mask(ids[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_extended_mask_values_and_shape(dtype):
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    bias = extended_attention_mask(mask, dtype)
    assert bias.shape == (2, 1, 1, 3) and bias.dtype == dtype
    assert bias[0, 0, 0, 2] == torch.finfo(dtype).min
    assert torch.all(bias[1] == 0)  # an unpadded row is all zeros (printed as -0.)
    assert torch.isfinite(bias).all()


def test_minus_inf_would_nan_but_finfo_min_does_not():
    scores = torch.randn(1, 4)
    dead = torch.zeros(1, 4, dtype=torch.long)
    finite = torch.softmax(scores + extended_attention_mask(dead)[0, 0], -1)
    assert torch.isfinite(finite).all()
    torch.testing.assert_close(finite, torch.full((1, 4), 0.25))  # uniform over masked keys
    assert torch.isnan(torch.softmax(scores + float("-inf"), -1)).all()


def test_three_dimensional_mask():
    qk = query_key_mask(torch.tensor([[1, 1, 0]]))
    assert qk.tolist() == [[[1, 1, 0], [1, 1, 0], [0, 0, 0]]]
    assert extended_attention_mask(qk).shape == (1, 1, 3, 3)
    assert to_sdpa_bool_mask(qk).shape == (1, 1, 3, 3)


def test_polarities_agree_with_torch():
    """SDPA's boolean mask (True = attend) and MultiheadAttention's key_padding_mask
    (True = ignore) express the same padding with opposite polarity."""
    torch.manual_seed(0)
    B, L, E = 2, 5, 8
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    x = torch.randn(B, L, E)
    mha = torch.nn.MultiheadAttention(E, 1, batch_first=True, bias=False).eval()
    ref, _ = mha(x, x, x, key_padding_mask=key_padding_mask(mask))
    w_q, w_k, w_v = mha.in_proj_weight.chunk(3)
    q, k, v = (x @ w.T for w in (w_q, w_k, w_v))
    ctx = F.scaled_dot_product_attention(
        q[:, None], k[:, None], v[:, None], attn_mask=to_sdpa_bool_mask(mask)
    )
    torch.testing.assert_close(mha.out_proj(ctx[:, 0]), ref, atol=1e-5, rtol=1e-5)
    # Passing the 1 = token mask where True = ignore is expected inverts the attention.
    wrong, _ = mha(x, x, x, key_padding_mask=mask.bool()[:, :])
    assert not torch.allclose(wrong[0], ref[0], atol=1e-3)
