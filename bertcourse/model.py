"""The assembled models: `BertModel` (embeddings + encoder + pooler), `BertForPreTraining`
(+ MLM and NSP heads and their losses) and `BertForSequenceClassification` (+ dropout and a
linear classifier on the pooled [CLS] vector, the model of fine-tuning).

Shapes legend: B batch, L sequence length, H hidden size, V vocabulary size, A heads,
N number of labelled (masked) positions in the batch, C number of labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
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


# --- Fine-tuning: one label (or one number) per sequence -------------------------------------

PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")


@dataclass
class SequenceClassifierOutput:
    logits: Tensor  # (B, C)
    loss: Tensor | None = None  # a scalar, when labels were given
    pooler_output: Tensor | None = None  # (B, H), the pooled [CLS] vector before dropout
    attentions: tuple[Tensor, ...] | None = None


def infer_problem_type(num_labels: int, labels: Tensor) -> str:
    """transformers' rule when `problem_type` is not set: one output is a regression; integer
    labels are single-label classification; float labels with C > 1 outputs are multi-label."""
    if num_labels == 1:
        return "regression"
    if labels.dtype in (torch.long, torch.int):
        return "single_label_classification"
    return "multi_label_classification"


def sequence_classification_loss(logits: Tensor, labels: Tensor, problem_type: str) -> Tensor:
    """The loss of `BertForSequenceClassification` for logits (B, C).

    * regression: mean squared error against float labels (B,) (C == 1) or (B, C);
    * single_label_classification: mean cross-entropy against class ids (B,) in [0, C);
    * multi_label_classification: mean binary cross-entropy with logits against (B, C) in [0, 1].
    """
    B, C = logits.shape
    if problem_type == "regression":
        target = labels.to(logits.dtype)
        if C == 1:  # (B,) or (B, 1) labels: one number per sequence
            return F.mse_loss(logits.view(-1), target.view(-1))
        return F.mse_loss(logits, target)
    if problem_type == "single_label_classification":
        labels = labels.view(-1)
        if labels.shape[0] != B:
            raise ValueError(
                f"labels: expected {B} class ids (one per sequence), got {labels.numel()}"
            )
        if labels.is_floating_point():
            raise ValueError(
                f"labels of single_label_classification are class ids (torch.long), got {labels.dtype}"
            )
        bad = (labels < 0) | (labels >= C)
        if bool(bad.any()):
            raise ValueError(
                f"labels holds {int(labels[bad][0])}: a class id must be in [0, {C}) "
                f"(the model has num_labels={C})"
            )
        return F.cross_entropy(logits, labels)
    if problem_type == "multi_label_classification":
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
    raise ValueError(f"problem_type must be one of {PROBLEM_TYPES}, got {problem_type!r}")


class BertForSequenceClassification(nn.Module):
    """BERT for a label per sequence (sentiment, topic, entailment) or a number (similarity).

    The pooled [CLS] vector tanh(W h_[CLS] + b) -> dropout -> Linear(H, num_labels): the head of
    the paper's GLUE experiments, of the original `run_classifier.py` and of transformers. Only
    the classifier is new; everything else comes from a pretrained checkpoint.

    The loss follows transformers' `problem_type` rules: with `problem_type=None` it is chosen
    per call by `infer_problem_type` (transformers fixes it at the first call instead).
    """

    def __init__(
        self,
        config: BertConfig,
        num_labels: int = 2,
        problem_type: str | None = None,
        classifier_dropout: float | None = None,
    ):
        super().__init__()
        if not isinstance(num_labels, int) or isinstance(num_labels, bool) or num_labels < 1:
            raise ValueError(f"num_labels must be a positive integer, got {num_labels!r}")
        if problem_type is not None and problem_type not in PROBLEM_TYPES:
            raise ValueError(
                f"problem_type must be None or one of {PROBLEM_TYPES}, got {problem_type!r}"
            )
        self.config = config
        self.num_labels = num_labels
        self.problem_type = problem_type
        # transformers: config.classifier_dropout, or the hidden dropout when it is None.
        p = config.hidden_dropout_prob if classifier_dropout is None else classifier_dropout
        self.classifier_dropout = classifier_dropout
        self.bert = BertModel(config)
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        init_weights(self.classifier, config.initializer_range)

    def init_kwargs(self) -> dict[str, int | str | float | None]:
        """The constructor's arguments besides `config`: what it takes to rebuild this model
        from its config and state dict (as the grader does across its process boundary)."""
        return {
            "num_labels": self.num_labels,
            "problem_type": self.problem_type,
            "classifier_dropout": self.classifier_dropout,
        }

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool = False,
    ) -> SequenceClassifierOutput:
        """
        Args:
            input_ids, token_type_ids, attention_mask: as `BertModel`, (B, L).
            labels: (B,) class ids (torch.long) for classification, (B,) or (B, C) floats for
                regression, (B, C) floats in [0, 1] for multi-label classification.
        """
        out = self.bert(input_ids, token_type_ids, attention_mask, output_attentions)
        pooled = out.pooler_output  # (B, H)
        logits = self.classifier(self.dropout(pooled))  # (B, C)
        loss = None
        if labels is not None:
            problem = self.problem_type or infer_problem_type(self.num_labels, labels)
            loss = sequence_classification_loss(logits, labels, problem)
        return SequenceClassifierOutput(logits, loss, pooled, out.attentions)
