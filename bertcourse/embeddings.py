"""Input embeddings: token + learned position + segment (token type), then LayerNorm and dropout.

BERT's positions are a learned table of shape (max_position_embeddings, H), sliced to the
sequence length, not the fixed sinusoids of the original Transformer.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from bertcourse.config import BertConfig


class BertEmbeddings(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.word_embeddings = nn.Embedding(
            config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id
        )
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """input_ids (B, L), token_type_ids (B, L) or None (all segment 0) -> (B, L, H)."""
        check_ids(input_ids, token_type_ids, self.config)
        B, L = input_ids.shape
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = torch.arange(L, device=input_ids.device)  # (L,), broadcast over the batch
        x = (
            self.word_embeddings(input_ids)  # (B, L, H)
            + self.position_embeddings(positions)  # (L, H)
            + self.token_type_embeddings(token_type_ids)  # (B, L, H)
        )
        return self.dropout(self.layer_norm(x))


def check_ids(input_ids: Tensor, token_type_ids: Tensor | None, config: BertConfig) -> None:
    """Clear errors for the inputs an embedding lookup would reject with an opaque message."""
    if input_ids.dim() != 2:
        raise ValueError(
            f"input_ids must have shape (batch, seq_len), got {tuple(input_ids.shape)}; "
            "add a batch dimension with input_ids[None] for a single sequence"
        )
    if input_ids.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"input_ids must be an integer tensor, got dtype {input_ids.dtype}")
    L = input_ids.shape[1]
    if L > config.max_position_embeddings:
        raise ValueError(
            f"sequence length {L} exceeds max_position_embeddings={config.max_position_embeddings}: "
            "BERT's position table has no row for later positions; truncate the input"
        )
    if input_ids.numel():
        lo, hi = int(input_ids.min()), int(input_ids.max())
        if lo < 0 or hi >= config.vocab_size:
            bad = hi if hi >= config.vocab_size else lo
            raise ValueError(
                f"input_ids holds id {bad}, outside the vocabulary [0, {config.vocab_size}); "
                "was the text tokenized with a different vocabulary?"
            )
    if token_type_ids is not None:
        if token_type_ids.shape != input_ids.shape:
            raise ValueError(
                f"token_type_ids has shape {tuple(token_type_ids.shape)} but input_ids has shape "
                f"{tuple(input_ids.shape)}"
            )
        if token_type_ids.numel() and (
            int(token_type_ids.min()) < 0 or int(token_type_ids.max()) >= config.type_vocab_size
        ):
            raise ValueError(
                f"token_type_ids must be in [0, {config.type_vocab_size}), got values in "
                f"[{int(token_type_ids.min())}, {int(token_type_ids.max())}]"
            )
