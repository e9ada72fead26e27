"""Attention masks: from padding to the additive bias every layer adds to its scores.

One convention in, one out:

* in:  `attention_mask` of shape (B, L), 1 for a real token and 0 for padding (transformers'
  public convention), or (B, L, L) for a mask per query row;
* out: an additive bias of shape (B, 1, 1, L) (or (B, 1, L, L)) holding 0 where attention is
  allowed and `torch.finfo(dtype).min` where it is not. It is made once per forward pass and
  added to the scores of every layer and every head (broadcast over heads, and over query rows
  for a (B, L) mask).

Why the dtype minimum and not -inf or -10000?
  * -inf gives NaN for a row with no allowed key: softmax(-inf, ..., -inf) = 0/0.
  * -10000 (the original TensorFlow code) is not small enough when scores are large, and
    does not fit the range of fp16 well; transformers moved to `finfo(dtype).min` in 2022.
  * `finfo(dtype).min` is finite, so a fully masked row stays finite (a uniform softmax);
    its output is garbage but never NaN, and padded rows are ignored downstream anyway.

Shapes legend: B batch, L sequence length, A heads.
"""

from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(input_ids: Tensor, pad_token_id: int = 0) -> Tensor:
    """1 for real tokens, 0 for padding.

    Args:
        input_ids: (B, L) token ids.
        pad_token_id: id of [PAD] (0 in bert-base-uncased).
    Returns:
        (B, L) long tensor of 1/0.
    """
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must have shape (B, L), got {tuple(input_ids.shape)}")
    return (input_ids != pad_token_id).long()


def check_attention_mask(attention_mask: Tensor, batch_size: int, seq_len: int) -> None:
    """Raise a clear error unless `attention_mask` is (B, L) or (B, L, L) and holds 0/1."""
    shape = tuple(attention_mask.shape)
    ok = shape == (batch_size, seq_len) or shape == (batch_size, seq_len, seq_len)
    if not ok:
        raise ValueError(
            f"attention_mask has shape {shape}, but input_ids has shape ({batch_size}, {seq_len}): "
            f"expected ({batch_size}, {seq_len}) (1 = token, 0 = padding) or "
            f"({batch_size}, {seq_len}, {seq_len}) (one row per query)"
        )
    if attention_mask.dtype != torch.bool and not bool(
        ((attention_mask == 0) | (attention_mask == 1)).all()
    ):
        raise ValueError(
            "attention_mask must hold only 0 (padding) and 1 (token); got other values. "
            "If you have an additive mask (0 / large negative), pass the 0/1 mask instead."
        )


def extended_attention_mask(attention_mask: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """Turn a 0/1 mask into the additive bias added to attention scores.

    Args:
        attention_mask: (B, L) with 1 = token, 0 = padding; or (B, L, L), row i = which keys
            query i may see.
        dtype: dtype of the scores the bias will be added to.
    Returns:
        (B, 1, 1, L) for a (B, L) mask, (B, 1, L, L) for a (B, L, L) mask: 0.0 where attention
        is allowed, `torch.finfo(dtype).min` where it is masked. An unpadded batch gives all
        zeros (printed as -0.): nothing is masked, which is correct.
    """
    if attention_mask.dim() == 2:
        mask = attention_mask[:, None, None, :]  # (B, 1, 1, L): broadcast over heads and queries
    elif attention_mask.dim() == 3:
        mask = attention_mask[:, None, :, :]  # (B, 1, L, L): broadcast over heads
    else:
        raise ValueError(
            f"attention_mask must be (B, L) or (B, L, L), got shape {tuple(attention_mask.shape)}"
        )
    mask = mask.to(dtype)
    return (1.0 - mask) * torch.finfo(dtype).min


def to_sdpa_bool_mask(attention_mask: Tensor) -> Tensor:
    """The boolean mask of `torch.nn.functional.scaled_dot_product_attention`.

    SDPA's boolean `attn_mask` uses True = "may attend". (Opposite polarity to
    `nn.MultiheadAttention`'s `key_padding_mask`, where True = "ignore": see `key_padding_mask`.)

    Args:
        attention_mask: (B, L) or (B, L, L), 1 = token.
    Returns:
        (B, 1, 1, L) or (B, 1, L, L) bool, True where attention is allowed.
    """
    if attention_mask.dim() == 2:
        return attention_mask[:, None, None, :].bool()
    if attention_mask.dim() == 3:
        return attention_mask[:, None, :, :].bool()
    raise ValueError(
        f"attention_mask must be (B, L) or (B, L, L), got shape {tuple(attention_mask.shape)}"
    )


def key_padding_mask(attention_mask: Tensor) -> Tensor:
    """`nn.MultiheadAttention`'s `key_padding_mask`: (B, L) bool, True = padding (ignore)."""
    if attention_mask.dim() != 2:
        raise ValueError(f"attention_mask must be (B, L), got shape {tuple(attention_mask.shape)}")
    return attention_mask == 0


def query_key_mask(attention_mask: Tensor) -> Tensor:
    """The (B, L, L) "from-to" mask: entry [b, i, j] = 1 when query i and key j are both tokens.

    This is the mask some texts build explicitly. Only its key (column) part matters: rows of
    padded queries produce vectors that no later computation reads (every layer masks them as
    keys and the loss ignores them), so BERT only masks columns, with a (B, 1, 1, L) bias.
    """
    m = attention_mask.long()
    return m[:, :, None] * m[:, None, :]  # (B, L, 1) * (B, 1, L) -> (B, L, L)
