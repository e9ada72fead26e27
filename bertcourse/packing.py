"""Packing: several NSP pairs in one row, so that a batch carries no padding.

BERT's instances (:mod:`bertcourse.nsp`, as the original ``create_pretraining_data.py``)
already gather sentences into chunks of up to ``max_seq_length`` tokens, but a document's last
chunk, short documents and the ``short_seq_prob`` draws leave many pairs shorter than that:
on the standard-library corpus ~20% of a 128-token batch is padding. Packing puts several
*whole* pairs in one row (first-fit decreasing), and keeps them apart inside the model, as
Graphcore's packed BERT (Krell et al. 2021, "Efficient sequence packing without
cross-contamination"):

- every pair keeps its own positions 0, 1, 2, ... (``position_ids``), its own ``[CLS]`` and
  its token types, exactly as if it were alone;
- attention is block-diagonal: a token attends only to the tokens of its own pair
  (a (B, L, L) ``attention_mask``), so a pair cannot see its neighbours;
- NSP is predicted from each pair's ``[CLS]`` (``cls_positions``), MLM as usual.

So the pairs, the masks and the losses are the unpacked ones (tested: same logits to 1e-5);
only the shapes change. Nothing crosses a document boundary that the unpacked pairs do not
cross already (NSP's random B).

Shapes: B rows, L row length, P pairs in the batch, N labelled positions, H hidden, V vocab.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from bertcourse.losses import gather_labelled
from bertcourse.masks import extended_attention_mask
from bertcourse.model import BertForPreTraining
from bertcourse.nsp import NspExample


def pack_lengths(lengths: Sequence[int], max_length: int) -> list[list[int]]:
    """Group items into rows of at most ``max_length`` tokens: first-fit decreasing.

    Returns rows of item indices (each row in decreasing length; rows in the order opened).
    Deterministic: ties are broken by the index. Longest first, each item goes into the first
    row that still has room, else opens a new row.
    """
    too_long = [i for i, n in enumerate(lengths) if n > max_length]
    if too_long:
        raise ValueError(
            f"item {too_long[0]} has {lengths[too_long[0]]} tokens, more than the row "
            f"length {max_length}"
        )
    rows: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        for r, free in enumerate(room):
            if lengths[i] <= free:
                rows[r].append(i)
                room[r] -= lengths[i]
                break
        else:
            rows.append([i])
            room.append(max_length - lengths[i])
    return rows


def padding_share(lengths: Sequence[int], row_length: int, rows: int | None = None) -> float:
    """Share of a (rows, row_length) batch that is padding, for items of ``lengths``."""
    rows = len(lengths) if rows is None else rows
    return 1.0 - sum(lengths) / (rows * row_length)


def pack_batch(
    examples: Sequence[NspExample], rows: Sequence[Sequence[int]], *, pad_id: int, length: int
) -> dict[str, Tensor]:
    """Lay the examples out in packed rows (``rows[r]`` = indices into ``examples``).

    Returns long tensors: ``input_ids``, ``token_type_ids``, ``position_ids`` (B, L);
    ``attention_mask`` (B, L, L), 1 where query and key belong to the same pair;
    ``cls_positions`` (P, 2) (row, column) of each pair's [CLS], in the order of the
    examples as they appear row by row; ``next_sentence_label`` (P,).
    """
    B = len(rows)
    input_ids = torch.full((B, length), pad_id, dtype=torch.long)  # (B, L)
    token_type_ids = torch.zeros((B, length), dtype=torch.long)  # (B, L)
    position_ids = torch.zeros((B, length), dtype=torch.long)  # (B, L)
    pair_of = torch.full((B, length), -1, dtype=torch.long)  # (B, L) which pair; -1 = padding
    cls_positions, nsp = [], []
    for r, row in enumerate(rows):
        start = 0
        for k, i in enumerate(row):
            ex = examples[i]
            n = len(ex.input_ids)
            if start + n > length:
                raise ValueError(f"row {r} holds {start + n} tokens, more than {length}")
            input_ids[r, start : start + n] = torch.tensor(ex.input_ids)
            token_type_ids[r, start : start + n] = torch.tensor(ex.token_type_ids)
            position_ids[r, start : start + n] = torch.arange(n)
            pair_of[r, start : start + n] = k
            cls_positions.append((r, start))
            nsp.append(ex.next_sentence_label)
            start += n
    same = pair_of[:, :, None] == pair_of[:, None, :]  # (B, L, L)
    real = (pair_of >= 0)[:, None, :]  # (B, 1, L) keys that are tokens
    attention_mask = (same & real).long()  # (B, L, L); padding queries see nothing
    return {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "position_ids": position_ids,
        "attention_mask": attention_mask,
        "cls_positions": torch.tensor(cls_positions, dtype=torch.long),  # (P, 2)
        "next_sentence_label": torch.tensor(nsp, dtype=torch.long),  # (P,)
    }


@dataclass
class PackedOutput:
    prediction_logits: Tensor  # (N, V) at the labelled positions
    mlm_targets: Tensor  # (N,)
    seq_relationship_logits: Tensor  # (P, 2), one row per pair


def packed_forward(
    model: BertForPreTraining,
    input_ids: Tensor,
    token_type_ids: Tensor,
    position_ids: Tensor,
    attention_mask: Tensor,
    cls_positions: Tensor,
    labels: Tensor,
    **_: Tensor,
) -> PackedOutput:
    """``BertForPreTraining`` on packed rows, with the model's own modules and weights.

    The same computation as ``model(...)`` for each pair alone, except that the positions come
    from ``position_ids`` (every pair starts at 0) and the (B, L, L) block-diagonal mask keeps
    the pairs apart; NSP reads every pair's [CLS]. Extra keys (``next_sentence_label``) are
    ignored, so a whole batch dict can be passed with ``**batch``.
    """
    emb = model.bert.embeddings
    x = (
        emb.word_embeddings(input_ids)  # (B, L, H)
        + emb.position_embeddings(position_ids)  # (B, L, H): each pair from 0
        + emb.token_type_embeddings(token_type_ids)  # (B, L, H)
    )
    x = emb.dropout(emb.layer_norm(x))
    bias = extended_attention_mask(attention_mask, x.dtype)  # (B, 1, L, L)
    h, _ = model.bert.encoder(x, bias, False)  # (B, L, H)
    h_chosen, targets = gather_labelled(h, labels)  # (N, H), (N,)
    cls = h[cls_positions[:, 0], cls_positions[:, 1]]  # (P, H)
    pooled = model.bert.pooler(cls[:, None, :])  # the pooler reads position 0: (P, 1, H) -> (P, H)
    return PackedOutput(
        prediction_logits=model.cls.predictions(h_chosen),  # (N, V)
        mlm_targets=targets,
        seq_relationship_logits=model.cls.seq_relationship(pooled),  # (P, 2)
    )


def is_packed(batch: dict[str, Tensor]) -> bool:
    return "cls_positions" in batch
