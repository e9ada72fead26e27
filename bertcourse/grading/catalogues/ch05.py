"""Known mistakes of chapter 5 (next-sentence and sentence-order prediction).

The sampling parts draw at random, so their checks recognise a mistake by a property of the
output (every label the other way round, a negative whose first segment is still A) and use
these entries for the message; `compute` gives the mistake with the solution's own draws.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from bertcourse.config import CLS_ID, SEP_ID
from bertcourse.grading.mistakes import Mistake

LABEL = "chapter 5, 'Common mistakes'"
TYPES = "chapter 5, 'Token types'"
SOP = "chapter 5, 'Sentence-order prediction falls to chance'"
LOSS = "chapter 5, 'From [CLS] to the loss'"

Documents = Sequence[Sequence[Sequence[int]]]


def _pair(a, b, cls_id=CLS_ID, sep_id=SEP_ID, *, wrong: str = ""):
    """The solution's make_pair with one mistake (`wrong`)."""
    ids = [cls_id, *a, sep_id, *b, sep_id]
    if wrong == "b_type_from_sep":
        return ids, [0] * (len(a) + 1) + [1] * (len(b) + 2)
    if wrong == "last_sep_type_0":
        return ids, [0] * (len(a) + 2) + [1] * len(b) + [0]
    if wrong == "no_last_sep":
        return ids[:-1], [0] * (len(a) + 2) + [1] * len(b)
    return ids, [0] * (len(a) + 2) + [1] * (len(b) + 1)


def _nsp_pairs(
    documents: Documents, rng: random.Random, *, inverted: bool = False, coin_per_document=False
) -> list:
    """The solution's nsp_pairs (same draws), with its labels inverted or one coin per
    document."""
    pairs = []
    for d, document in enumerate(documents):
        coin = coin_per_document and rng.random() < 0.5
        for i in range(len(document) - 1):
            if coin if coin_per_document else rng.random() < 0.5:
                other = rng.randrange(len(documents) - 1)
                other += other >= d
                b = documents[other][rng.randrange(len(documents[other]))]
                pairs.append((document[i], b, 0 if inverted else 1))
            else:
                pairs.append((document[i], document[i + 1], 1 if inverted else 0))
    return pairs


def _sop_pairs(
    documents: Documents,
    rng: random.Random,
    cls_id: int = CLS_ID,
    sep_id: int = SEP_ID,
    *,
    wrong: str = "",
) -> list:
    """The solution's sop_pairs (same draws) with one mistake (`wrong`)."""
    examples = []
    for document in documents:
        coin = wrong == "coin_per_document" and rng.random() < 0.5
        for a, b in zip(document[:-1], document[1:]):
            a, b = list(a), list(b)
            swap = coin if wrong == "coin_per_document" else rng.random() < 0.5
            label = int(swap) if wrong != "inverted" else int(not swap)
            if not swap:
                examples.append((*_pair(a, b, cls_id, sep_id), label))
            elif wrong == "reversed":
                examples.append((*_pair(b[::-1], a[::-1], cls_id, sep_id), label))
            elif wrong == "types":
                ids = [cls_id, *b, sep_id, *a, sep_id]
                examples.append((ids, [0] + [1] * (len(b) + 1) + [0] * (len(a) + 1), label))
            else:
                examples.append((*_pair(b, a, cls_id, sep_id), label))
    return examples


def _nsp_loss(logits: Tensor, labels: Tensor, *, wrong: str = ""):
    """The solution's loss and accuracy with one mistake (`wrong`)."""
    targets = 1 - labels if wrong == "inverted" else labels
    picked = torch.log_softmax(logits.float() if wrong == "float32" else logits, dim=-1)
    if wrong == "log_of_softmax":
        picked = torch.log(torch.softmax(logits, dim=-1))
    picked = picked.gather(1, targets[:, None]).squeeze(1)
    loss = picked.sum() / -logits.shape[1] if wrong == "over_classes" else -picked.mean()
    if wrong == "bce":
        loss = F.binary_cross_entropy_with_logits(logits[:, 1], labels.float())
    predicted = logits.argmax(dim=0)[labels] if wrong == "argmax_batch" else logits.argmax(-1)
    return loss, (predicted == targets).float().mean()


CATALOGUE: dict[str, list[Mistake]] = {
    "pair": [
        Mistake(
            "segment B's token type starting at the [SEP] after A",
            "the [SEP] that closes A belongs to segment A (type 0); type 1 starts at B's first "
            "token",
            TYPES,
            lambda a, b, cls_id=CLS_ID, sep_id=SEP_ID: _pair(
                a, b, cls_id, sep_id, wrong="b_type_from_sep"
            ),  # fmt: skip
        ),
        Mistake(
            "the final [SEP] typed 0",
            "the [SEP] that closes B belongs to segment B: type 1, like B's tokens",
            TYPES,
            lambda a, b, cls_id=CLS_ID, sep_id=SEP_ID: _pair(
                a, b, cls_id, sep_id, wrong="last_sep_type_0"
            ),  # fmt: skip
        ),
        Mistake(
            "no [SEP] after segment B",
            "a pair is [CLS] A [SEP] B [SEP]: each segment ends with its own [SEP]",
            "chapter 5, 'The task'",
            lambda a, b, cls_id=CLS_ID, sep_id=SEP_ID: _pair(
                a, b, cls_id, sep_id, wrong="no_last_sep"
            ),  # fmt: skip
        ),
    ],
    "nsp_pairs": [
        Mistake(
            "NSP labels inverted (1 = B follows A)",
            "BERT, its original release and transformers label a true continuation 0 (IS_NEXT) "
            "and a random B 1 (NOT_NEXT)",
            LABEL,
            lambda documents, rng: _nsp_pairs(documents, rng, inverted=True),
        ),
        Mistake(
            "a random B from A's own document",
            "a NOT_NEXT segment B is drawn from another document: redraw while the document is "
            "A's own",
            "chapter 5, 'Pairs from a real corpus'",
            lambda documents, rng: None,
        ),
        Mistake(
            "one coin per document, not one per pair",
            "each pair draws its own rng.random() < 0.5: the pairs of one document are "
            "independent, not all IS_NEXT or all NOT_NEXT",
            "chapter 5, 'Pairs from a real corpus'",
            lambda documents, rng: _nsp_pairs(documents, rng, coin_per_document=True),
        ),
    ],
    "sop_pairs": [
        Mistake(
            "SOP labels inverted (1 = in order)",
            "ALBERT's sentence_order_label is 0 for the original order and 1 for the swapped pair",
            SOP,
            lambda *args: _sop_pairs(*args, wrong="inverted"),
        ),
        Mistake(
            "a random B from another document (NSP, not SOP)",
            "a sentence-order negative is the same two consecutive sentences in swapped order, "
            "both from A's document",
            SOP,
            lambda *args: None,
        ),
        Mistake(
            "the tokens reversed instead of the segments swapped",
            "the negative keeps each sentence's own word order and only exchanges the two "
            "sentences",
            SOP,
            lambda *args: _sop_pairs(*args, wrong="reversed"),
        ),
        Mistake(
            "token types that follow the sentences, not the positions",
            "the token type marks the position: 0 for the first segment, 1 for the second, "
            "whichever sentence is there",
            TYPES,
            lambda *args: _sop_pairs(*args, wrong="types"),
        ),
        Mistake(
            "one coin per document, not one per pair",
            "each pair draws its own rng.random() < 0.5: the pairs of one document are "
            "independent, not all swapped or all in order",
            SOP,
            lambda *args: _sop_pairs(*args, wrong="coin_per_document"),
        ),
    ],
    "loss": [
        Mistake(
            "NSP labels inverted (1 = B follows A)",
            "column 0 of the NSP logits scores IS_NEXT: label 0 means B follows A",
            LABEL,
            lambda logits, labels: _nsp_loss(logits, labels, wrong="inverted"),
        ),
        Mistake(
            "a sigmoid on column 1 (binary cross-entropy), no 2-way softmax",
            "BERT's NSP head has two logits and a 2-way cross-entropy over them",
            LOSS,
            lambda logits, labels: _nsp_loss(logits, labels, wrong="bce"),
        ),
        Mistake(
            "log(softmax) in two steps (inf for a sure, wrong prediction)",
            "the softmax of a sure, wrong prediction underflows to 0 and its log to -inf: "
            "use log_softmax",
            LOSS,
            lambda logits, labels: _nsp_loss(logits, labels, wrong="log_of_softmax"),
        ),
        Mistake(
            "the loss in float32, not the logits' dtype",
            "the statement asks for the loss in the logits' dtype, as F.cross_entropy returns "
            "it: cast back after computing in float32",
            LOSS,
            lambda logits, labels: _nsp_loss(logits, labels, wrong="float32"),
        ),
        Mistake(
            "the loss divided by the 2 classes, not by the batch size",
            "the loss is the mean over the B pairs of the batch",
            LOSS,
            lambda logits, labels: _nsp_loss(logits, labels, wrong="over_classes"),
        ),
        Mistake(
            "the accuracy's argmax over the batch (dim=0), not the 2 classes",
            "each pair's prediction is the larger of its two logits: argmax(dim=-1)",
            LOSS,
            lambda logits, labels: _nsp_loss(logits, labels, wrong="argmax_batch"),
        ),
    ],
}


def _loss_probes() -> list[tuple[tuple, dict]]:
    """Ordinary logits, sure predictions (two of them wrong), float16 logits."""
    generator = torch.Generator().manual_seed(109)
    logits = torch.randn(6, 2, generator=generator) * 3
    sure = torch.tensor([[100.0, -100.0], [-300.0, 300.0], [250.0, -250.0], [-120.0, 120.0]])
    return [
        ((logits, torch.tensor([0, 1, 1, 0, 0, 1])), {}),
        ((sure, torch.tensor([1, 1, 0, 0])), {}),
        ((logits.half(), torch.tensor([1, 1, 0, 1, 0, 0])), {}),
    ]


PROBES = {
    "pair": lambda: [(([5, 6, 7], [8, 9]), {}), (([5], [8, 9, 10, 11]), {"sep_id": 3})],
    "loss": _loss_probes,
}
