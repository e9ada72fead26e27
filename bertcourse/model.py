"""The assembled models: `BertModel` (embeddings + encoder + pooler) and `BertForPreTraining`
(+ MLM and NSP heads and their losses).

Shapes legend: B batch, L sequence length, H hidden size, V vocabulary size, A heads,
N number of labelled (masked) positions in the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from bertcourse.config import IGNORE_INDEX, BertConfig
from bertcourse.embeddings import BertEmbeddings
from bertcourse.encoder import BertEncoder
from bertcourse.heads import BertPooler, BertPreTrainingHeads
from bertcourse.losses import gather_labelled, mlm_loss, nsp_loss
from bertcourse.masks import check_attention_mask, extended_attention_mask


@dataclass
class BertModelOutput:
    last_hidden_state: Tensor  # (B, L, H)
    pooler_output: Tensor  # (B, H)
    attentions: tuple[Tensor, ...] | None = None  # per layer (B, A, L, L), when asked


@dataclass
class BertPreTrainingOutput:
    prediction_logits: (
        Tensor  # (B, L, V) without labels; (N, V) at the labelled positions with labels
    )
    seq_relationship_logits: Tensor  # (B, 2)
    loss: Tensor | None = None  # mlm_loss + nsp_loss (or whichever of them was asked for)
    mlm_loss: Tensor | None = None
    nsp_loss: Tensor | None = None
    masked_positions: Tensor | None = None  # (N, 2) (batch, position) rows of prediction_logits
    mlm_targets: Tensor | None = None  # (N,) the labels at those positions
    last_hidden_state: Tensor | None = None  # (B, L, H)
    pooler_output: Tensor | None = None  # (B, H)
    attentions: tuple[Tensor, ...] | None = None


def init_weights(module: nn.Module, initializer_range: float) -> None:
    """BERT's initialisation (as transformers): N(0, 0.02) weights, zero biases, LayerNorm 1/0,
    and a zero row for the padding embedding."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=initializer_range)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=initializer_range)
        if module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class BertModel(nn.Module):
    """BERT's encoder: input ids -> contextual vectors (B, L, H) and the pooled [CLS] (B, H)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config)
        self.apply(lambda m: init_weights(m, config.initializer_range))

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        output_attentions: bool = False,
    ) -> BertModelOutput:
        """
        Args:
            input_ids: (B, L) token ids.
            token_type_ids: (B, L) segment ids, 0 for `[CLS] A [SEP]`, 1 for `B [SEP]`; default 0.
            attention_mask: (B, L), 1 = token, 0 = padding (or (B, L, L)); default all ones.
            output_attentions: also return each layer's attention probabilities (B, A, L, L).
        """
        x = self.embeddings(input_ids, token_type_ids)  # (B, L, H)
        bias = None
        if attention_mask is not None:
            check_attention_mask(attention_mask, *input_ids.shape)
            # Made once, added in every layer and head: (B, 1, 1, L), 0 or finfo(dtype).min.
            bias = extended_attention_mask(attention_mask, x.dtype)
        x, attentions = self.encoder(x, bias, output_attentions)  # (B, L, H)
        return BertModelOutput(x, self.pooler(x), attentions)


class BertForPreTraining(nn.Module):
    """BERT with its two pretraining heads: masked-language modelling and next-sentence
    prediction.

    With `labels`, the MLM head runs only at the labelled positions (the gather of the original
    TensorFlow and NVIDIA implementations): about 15% of the tokens, so the (B, L, V) logits are
    never built. The MLM loss is the mean cross-entropy over those positions, which is exactly
    transformers' `CrossEntropyLoss(ignore_index=-100)` over all positions.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.cls = BertPreTrainingHeads(config)
        self.apply(lambda m: init_weights(m, config.initializer_range))
        self.tie_weights()

    def tie_weights(self) -> None:
        """The decoder reuses the input word-embedding matrix (V, H): one parameter, two uses."""
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        labels: Tensor | None = None,
        next_sentence_label: Tensor | None = None,
        output_attentions: bool = False,
    ) -> BertPreTrainingOutput:
        """
        Args:
            input_ids, token_type_ids, attention_mask: as `BertModel`.
            labels: (B, L) original ids at the positions to predict, -100 elsewhere.
            next_sentence_label: (B,) 0 = B follows A, 1 = B is random.
        """
        out = self.bert(input_ids, token_type_ids, attention_mask, output_attentions)
        h = out.last_hidden_state  # (B, L, H)
        mlm = nsp = positions = targets = None
        if labels is None:
            prediction_logits = self.cls.predictions(h)  # (B, L, V)
        else:
            check_labels(labels, input_ids, self.config.vocab_size)
            # Gather before projecting: (B, L, H) -> (N, H), then only N rows of logits.
            h_chosen, targets = gather_labelled(h, labels)  # (N, H), (N,)
            positions = (labels != IGNORE_INDEX).nonzero()  # (N, 2)
            prediction_logits = self.cls.predictions(h_chosen)  # (N, V)
            # Mean over the N chosen positions; NaN when N == 0, like F.cross_entropy.
            mlm = mlm_loss(prediction_logits, targets)
        seq_relationship_logits = self.cls.seq_relationship(out.pooler_output)  # (B, 2)
        if next_sentence_label is not None:
            if next_sentence_label.shape != (input_ids.shape[0],):
                raise ValueError(
                    f"next_sentence_label must have shape ({input_ids.shape[0]},), "
                    f"got {tuple(next_sentence_label.shape)}"
                )
            nsp = nsp_loss(seq_relationship_logits, next_sentence_label)
        losses = [x for x in (mlm, nsp) if x is not None]
        return BertPreTrainingOutput(
            prediction_logits=prediction_logits,
            seq_relationship_logits=seq_relationship_logits,
            loss=sum(losses) if losses else None,
            mlm_loss=mlm,
            nsp_loss=nsp,
            masked_positions=positions,
            mlm_targets=targets,
            last_hidden_state=h,
            pooler_output=out.pooler_output,
            attentions=out.attentions,
        )


def check_labels(labels: Tensor, input_ids: Tensor, vocab_size: int) -> None:
    if labels.shape != input_ids.shape:
        raise ValueError(
            f"labels has shape {tuple(labels.shape)} but input_ids has shape "
            f"{tuple(input_ids.shape)}: give one label per token (-100 where not predicted)"
        )
    bad = (labels != IGNORE_INDEX) & ((labels < 0) | (labels >= vocab_size))
    if bool(bad.any()):
        value = int(labels[bad][0])
        raise ValueError(
            f"labels holds {value}: a label must be a token id in [0, {vocab_size}) or "
            f"{IGNORE_INDEX} (not predicted)"
        )
