"""Reference implementations of exercise functions that no bertcourse function matches in
signature, so that a later part can use them in place of the learner's earlier parts
(`use_reference={"encoder_layer": "bertcourse.grading.references.encoder_layer"}`: across the
referee's boundary a reference must be a dotted path). Each is one line over the package."""

from __future__ import annotations

from torch import Tensor

from bertcourse.encoder import BertLayer
from bertcourse.model import BertForPreTraining


def encoder_layer(layer: BertLayer, hidden_states: Tensor, bias: Tensor | None = None) -> Tensor:
    """Exercises 7, part 2: one post-LN layer, (B, L, H) -> (B, L, H)."""
    return layer(hidden_states, bias)[0]


def nsp_logits(model: BertForPreTraining, sequence_output: Tensor) -> Tensor:
    """Exercises 7, part 4: the pooled [CLS] vector through the NSP classifier, (B, L, H) -> (B, 2)."""
    return model.cls.seq_relationship(model.bert.pooler(sequence_output))
