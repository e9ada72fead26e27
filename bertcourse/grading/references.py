"""Reference implementations of exercise functions that no bertcourse function matches in
signature, so that a later part can use them in place of the learner's earlier parts
(`use_reference={"encoder_layer": "bertcourse.grading.references.encoder_layer"}`: across the
referee's boundary a reference must be a dotted path). Each is one line over the package."""

from __future__ import annotations

import random
from collections.abc import Sequence

from torch import Tensor

from bertcourse.encoder import BertLayer
from bertcourse.mlm import create_masked_lm_predictions
from bertcourse.model import BertForPreTraining
from bertcourse.zh import words_from_tags


def encoder_layer(layer: BertLayer, hidden_states: Tensor, bias: Tensor | None = None) -> Tensor:
    """Exercises 7, part 2: one post-LN layer, (B, L, H) -> (B, L, H)."""
    return layer(hidden_states, bias)[0]


def nsp_logits(model: BertForPreTraining, sequence_output: Tensor) -> Tensor:
    """Exercises 7, part 4: the pooled [CLS] vector through the NSP classifier, (B, L, H) -> (B, 2)."""
    return model.cls.seq_relationship(model.bert.pooler(sequence_output))


def whole_word_positions(
    word_ids: Sequence[int | None],
    rng: random.Random,
    masked_lm_prob: float = 0.15,
    max_predictions: int = 20,
) -> list[int]:
    """Exercises 9, part 2: the positions the original's whole-word masking chooses (its
    shuffle and budget; the 80/10/10 draws that follow do not change them)."""
    tokens = [0 if word is None else 1 for word in word_ids]  # id 0 special, 1 ordinary
    return create_masked_lm_predictions(
        tokens,
        special_token_ids=(0,),
        vocab_size=3,
        mask_token_id=2,
        masked_lm_prob=masked_lm_prob,
        max_predictions_per_seq=max_predictions,
        rng=rng,
        word_ids=word_ids,
    ).positions


def words_from_tags_lenient(chars: Sequence[str], tags: Sequence[str]) -> list[str]:
    """Exercises 9, part 3: BMES tags read back to words, leniently (a model's tags)."""
    return words_from_tags(chars, tags, strict=False)
