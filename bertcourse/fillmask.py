"""A BERT that fills blanks: MiniLM's real, frozen encoder under a masked-LM head trained here.

The published all-MiniLM-L6-v2 weights have no MLM head (they were tuned for sentence
embeddings), so we train one, and only one: `BertLMPredictionHead` (dense -> GELU ->
LayerNorm, then the decoder) whose decoder weight *is* MiniLM's real word-embedding matrix
(tied, frozen) plus its own output bias. The encoder never changes, which makes the training
cheap on a CPU:

    1. cut text chunks from the offline corpus, blank ~15% of their tokens;
    2. run the frozen encoder once and keep the hidden vectors at the blanks, (N, H);
    3. train the head on those vectors: a classification of N examples into V tokens.

One decision the numbers forced (chapter 7 measures it): MiniLM's `[MASK]` row does not look
learned. Its norm is 0.25, the shortest of the 30,522 rows (median 1.11, unused placeholder
rows 0.46), and a head trained at `[MASK]` blanks is only slightly above the unigram
baseline, where the same head at `[UNK]` about doubles it at equal data
(benchmarks/fillmask_heads.py, rendered in chapter 7). The blanks are therefore fed as
`[UNK]`, a token that real text produces (in place of a whole word that the vocabulary
cannot spell) and whose row looks like a trained one:
`FillMaskConfig.blank_token`. `fill_mask(..., blank_token="[UNK]")` accepts text with
`[MASK]` and does the substitution. `fill_mask` is the package's one fill-in-the-blank
function: `python -m bertcourse.pretrain fill-mask` uses it too.

Shapes: N blanks, H hidden size, V vocabulary size, S tokens seen in the training text.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from bertcourse.config import IGNORE_INDEX
from bertcourse.losses import gather_labelled
from bertcourse.mlm import mask_tokens
from bertcourse.model import BertForPreTraining, BertModel
from bertcourse.optim import bert_param_groups, warmup_linear_decay
from bertcourse.textdata import TokenizedCorpus


@dataclass(frozen=True)
class FillMaskConfig:
    """How the head's training set is cut and how the head is trained."""

    max_seq_length: int = 64  # tokens per chunk, [CLS] and [SEP] included
    train_chunks: int = 1000  # chunks of training documents, encoded once
    eval_chunks: int = 200  # chunks of held-out documents
    mlm_probability: float = 0.15  # share of tokens blanked, as in BERT
    blank_token: str = "[UNK]"  # what the encoder reads at a blank (see the module docstring)
    epochs: int = 6
    batch_size: int = 256
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup_steps: int = 10
    seed: int = 0
    # bfloat16 autocast for the encoder pass (training and held-out blanks) and the head's
    # training: 2-3x faster on CPUs with bfloat16 matrix units (Intel AMX), but many times
    # slower on a laptop CPU without them, hence off by default (as `PretrainConfig.bf16`).
    # The head's logits at evaluation, and `fill_mask`, are float32.
    bf16: bool = False
    encode_batch_size: int = 32

    def __post_init__(self) -> None:
        if self.max_seq_length < 3:
            raise ValueError(
                f"max_seq_length must be >= 3 ([CLS] x [SEP]), got {self.max_seq_length}"
            )
        if not 0 < self.mlm_probability < 1:
            raise ValueError(f"mlm_probability must be in (0, 1), got {self.mlm_probability}")
        for name in ("train_chunks", "eval_chunks", "epochs", "batch_size", "encode_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


@dataclass
class BlankStates:
    """The frozen encoder's output at the blanks: the head's training or evaluation set."""

    hidden: Tensor  # (N, H) float32
    targets: Tensor  # (N,) the original token ids
    tokens_encoded: int  # real tokens that went through the encoder ([CLS]/[SEP] included)

    def __len__(self) -> int:
        return self.targets.numel()


@dataclass(frozen=True)
class TopK:
    """Top-1 and top-5 accuracy at the blanks."""

    top1: float
    top5: float
    n: int  # blanks evaluated


class Prediction(NamedTuple):
    """One guess at a `[MASK]`. A tuple whose first two items are (token, probability)."""

    token: str
    probability: float
    token_id: int


@dataclass
class FillMaskResult:
    """What `train_fill_mask` returns: the model and its measurements."""

    model: BertForPreTraining  # MiniLM's encoder + the trained MLM head (NSP head untrained)
    config: FillMaskConfig
    heldout: TopK  # the trained head on held-out blanks
    unigram: TopK  # always the 1 (5) most frequent training tokens, same blanks
    heldout_loss: float  # cross-entropy (nats) over all V tokens on the held-out blanks
    unigram_loss: float  # cross-entropy of the smoothed unigram distribution there
    losses: list[float] = field(default_factory=list)  # training loss per step
    n_train: int = 0  # training blanks
    tokens_encoded: int = 0  # tokens run through the encoder (training + held-out)
    seconds: dict[str, float] = field(default_factory=dict)  # encode / train / evaluate


# --- 1. the data: chunks of consecutive sentences, blanked ---------------------------------


def text_chunks(corpus: TokenizedCorpus, max_tokens: int) -> list[list[int]]:
    """Consecutive sentences of each document packed into chunks of at most `max_tokens` ids
    (no [CLS]/[SEP]); a sentence longer than that is cut. In document order."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    chunks = []
    for document in corpus.documents:
        current: list[int] = []
        for sentence in document:
            if current and len(current) + len(sentence) > max_tokens:
                chunks.append(current)
                current = []
            current = current + sentence[: max_tokens - len(current)]
        if current:
            chunks.append(current)
    return chunks


def sample_chunks(
    corpus: TokenizedCorpus, n: int, max_seq_length: int, seed: int
) -> list[list[int]]:
    """`n` chunks drawn without replacement (all of them if there are fewer), fixed by `seed`."""
    chunks = text_chunks(corpus, max_seq_length - 2)
    if not chunks:
        raise ValueError("the corpus has no tokens to cut chunks from")
    random.Random(seed).shuffle(chunks)
    return chunks[:n]


@torch.no_grad()
def encode_blanks(
    encoder: BertModel,
    chunks: Sequence[Sequence[int]],
    *,
    cls_id: int,
    sep_id: int,
    blank_id: int,
    special_ids: Sequence[int],
    mlm_probability: float = 0.15,
    generator: torch.Generator | None = None,
    bf16: bool = False,
    batch_size: int = 32,
) -> BlankStates:
    """Blank a share of each chunk's tokens and keep the encoder's vectors at the blanks.

    Every chosen token becomes `blank_id` (no 10% random / 10% unchanged: we measure filling
    blanks, and a visible token would give itself away). Chunks are encoded as
    `[CLS] chunk [SEP]`, padded per batch.
    """
    if not chunks:
        raise ValueError("no chunks to encode")
    hidden, targets, tokens = [], [], 0
    vocab_size = encoder.config.vocab_size
    for start in range(0, len(chunks), batch_size):
        batch = chunks[start : start + batch_size]
        length = max(len(c) for c in batch) + 2
        input_ids = torch.zeros(len(batch), length, dtype=torch.long)  # (B, L), 0 = [PAD]
        attention_mask = torch.zeros_like(input_ids)  # (B, L)
        for row, chunk in enumerate(batch):
            input_ids[row, : len(chunk) + 2] = torch.tensor([cls_id, *chunk, sep_id])
            attention_mask[row, : len(chunk) + 2] = 1
        blanked, labels = mask_tokens(
            input_ids,
            vocab_size=vocab_size,
            mask_token_id=blank_id,
            special_token_ids=special_ids,
            mlm_probability=mlm_probability,
            mask_replace_prob=1.0,
            random_replace_prob=0.0,
            generator=generator,
        )
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            h = encoder(blanked, None, attention_mask).last_hidden_state  # (B, L, H)
        h_blank, y = gather_labelled(h.float(), labels)  # (n, H), (n,)
        hidden.append(h_blank)
        targets.append(y)
        tokens += int(attention_mask.sum())
    return BlankStates(torch.cat(hidden), torch.cat(targets), tokens)


# --- 2. the model: the real encoder, a fresh head, the decoder tied ------------------------


def mlm_model(encoder: BertModel) -> BertForPreTraining:
    """`BertForPreTraining` around `encoder` itself (not a copy), the encoder frozen.

    The MLM head is freshly initialised (N(0, 0.02), as BERT) and its decoder weight is the
    encoder's word-embedding parameter: the same storage. The NSP head stays untrained.
    """
    model = BertForPreTraining(encoder.config)
    model.bert = encoder
    model.tie_weights()
    encoder.requires_grad_(False)
    return model.eval()


def unigram_log_probs(counts: Tensor) -> Tensor:
    """(V,) log of the add-one-smoothed frequencies: the bias the head starts from."""
    counts = counts.double()
    return torch.log((counts + 1) / (counts + 1).sum()).float()


def train_head(
    model: BertForPreTraining,
    states: BlankStates,
    counts: Tensor,
    config: FillMaskConfig,
) -> list[float]:
    """Train the MLM head (transform and bias) on `states`; the encoder and decoder stay fixed.

    The bias starts at the log unigram frequencies (`counts`, (V,)), so the untrained head
    starts close to the unigram baseline and training has to add the context.
    To save time, the softmax during training runs over the S tokens that occur in the
    training text (`counts > 0`): a token that never occurs cannot be learned, and its logit
    keeps the lowest bias. Evaluation and `fill_mask` use all V tokens.
    Returns the loss of every step.
    """
    head = model.cls.predictions
    if len(states) == 0:
        raise ValueError("no blanks to train on: encode more chunks")
    seen = (counts > 0).nonzero().flatten()  # (S,)
    index_in_seen = torch.full((counts.numel(),), IGNORE_INDEX, dtype=torch.long)  # (V,)
    index_in_seen[seen] = torch.arange(seen.numel())
    targets = index_in_seen[states.targets]  # (N,)
    if bool((targets == IGNORE_INDEX).any()):
        raise ValueError("a training target never occurs in `counts`: count the training text")
    with torch.no_grad():
        head.bias.copy_(unigram_log_probs(counts))
    decoder_seen = head.decoder.weight.detach()[seen]  # (S, H), frozen

    # AdamW with BERT's decay rule (no decay for LayerNorm and biases) and the linear
    # warmup-then-decay schedule of chapter 6. The decoder weight is frozen: no gradient.
    optimizer = torch.optim.AdamW(bert_param_groups(head, config.weight_decay), lr=config.lr)
    steps = config.epochs * math.ceil(len(states) / config.batch_size)
    warmup = min(config.warmup_steps, steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: warmup_linear_decay(step, warmup_steps=warmup, total_steps=steps)
    )
    generator = torch.Generator().manual_seed(config.seed)
    losses = []
    head.train()
    for _ in range(config.epochs):
        order = torch.randperm(len(states), generator=generator)
        for start in range(0, len(states), config.batch_size):
            idx = order[start : start + config.batch_size]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.bf16):
                u = head.transform(states.hidden[idx])  # (b, H)
                logits = F.linear(u, decoder_seen, head.bias[seen])  # (b, S)
            loss = F.cross_entropy(logits.float(), targets[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
    head.eval()
    return losses


# --- 3. measuring: top-k accuracy against the unigram baseline -----------------------------


@torch.no_grad()
def head_logits(model: BertForPreTraining, hidden: Tensor, chunk: int = 512) -> Tensor:
    """(N, H) hidden vectors -> (N, V) float32 logits of the MLM head, `chunk` rows at a time."""
    return torch.cat(
        [model.cls.predictions(hidden[i : i + chunk]) for i in range(0, len(hidden), chunk)]
    )


def topk_accuracy(logits: Tensor, targets: Tensor) -> TopK:
    """Share of rows whose target is the top-1 / among the top-5 logits. (N, V), (N,)."""
    if logits.shape[:-1] != targets.shape or logits.ndim != 2:
        raise ValueError(
            f"logits (N, V) and targets (N,) expected, got {tuple(logits.shape)} and {tuple(targets.shape)}"
        )
    if targets.numel() == 0:
        raise ValueError("no targets: accuracy over zero blanks is undefined")
    top = logits.topk(5, dim=-1).indices  # (N, 5)
    hit = top == targets[:, None]  # (N, 5)
    return TopK(
        float(hit[:, 0].double().mean()), float(hit.any(1).double().mean()), targets.numel()
    )


def unigram_topk(counts: Tensor, targets: Tensor, special_ids: Sequence[int]) -> TopK:
    """The context-free baseline: always answer the 1 (5) most frequent non-special tokens."""
    counts = counts.double().clone()
    counts[list(special_ids)] = 0
    return topk_accuracy(counts.expand(targets.numel(), -1), targets)


# --- 4. the whole recipe, and using the model -----------------------------------------------


def train_fill_mask(
    encoder: BertModel,
    train: TokenizedCorpus,
    heldout: TokenizedCorpus,
    config: FillMaskConfig = FillMaskConfig(),
    blank_id: int | None = None,
) -> FillMaskResult:
    """Steps 1-3 of the module docstring, then top-k on held-out blanks against unigram.

    `train` and `heldout` must be tokenized with the encoder's vocabulary (bert-base-uncased
    for MiniLM: `bertcourse.data.load_corpus("bert")`). `blank_id` defaults to the id of
    `config.blank_token` in that vocabulary ([UNK] = 100 for bert-base-uncased).
    """
    vocab = train.vocab
    if vocab.size != encoder.config.vocab_size:
        raise ValueError(
            f"the corpus vocabulary has {vocab.size} tokens but the encoder {encoder.config.vocab_size}: "
            "tokenize with the encoder's own vocabulary"
        )
    if blank_id is None:
        blank_id = {"[UNK]": vocab.unk_id, "[MASK]": vocab.mask_id}.get(config.blank_token)
        if blank_id is None:
            raise ValueError(f"blank_token must be '[UNK]' or '[MASK]', got {config.blank_token!r}")
    with torch.random.fork_rng(devices=[]):  # the head's initialisation, seeded, no side effect
        torch.manual_seed(config.seed)
        model = mlm_model(encoder)
    generator = torch.Generator().manual_seed(config.seed)
    common = dict(
        cls_id=vocab.cls_id,
        sep_id=vocab.sep_id,
        blank_id=blank_id,
        special_ids=vocab.special_ids,
        mlm_probability=config.mlm_probability,
        generator=generator,
        bf16=config.bf16,
        batch_size=config.encode_batch_size,
    )
    seconds = {}
    t0 = time.perf_counter()
    train_chunks = sample_chunks(train, config.train_chunks, config.max_seq_length, config.seed)
    eval_chunks = sample_chunks(heldout, config.eval_chunks, config.max_seq_length, config.seed)
    train_states = encode_blanks(encoder, train_chunks, **common)
    eval_states = encode_blanks(encoder, eval_chunks, **common)
    seconds["encode"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    counts = torch.from_numpy(train.unigram_counts())  # (V,)
    counts[list(vocab.special_ids)] = 0
    losses = train_head(model, train_states, counts, config)
    seconds["train"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    logits = head_logits(model, eval_states.hidden)  # (N, V)
    heldout_loss = float(F.cross_entropy(logits, eval_states.targets))
    unigram_loss = float(-unigram_log_probs(counts)[eval_states.targets].mean())
    result = FillMaskResult(
        model=model,
        config=config,
        heldout=topk_accuracy(logits, eval_states.targets),
        unigram=unigram_topk(counts, eval_states.targets, vocab.special_ids),
        heldout_loss=heldout_loss,
        unigram_loss=unigram_loss,
        losses=losses,
        n_train=len(train_states),
        tokens_encoded=train_states.tokens_encoded + eval_states.tokens_encoded,
    )
    seconds["evaluate"] = time.perf_counter() - t0
    result.seconds = seconds
    return result


def _token_ids(tokenizer: Any, text: str) -> tuple[list[int], list[int]]:
    """``(input_ids, token_type_ids)`` of ``text`` with [CLS]/[SEP], from any of the tokenizers
    of :func:`bertcourse.vocab.load_tokenizer`: a ``tokenizers.Tokenizer`` (``encode``
    returns an ``Encoding``), transformers' (callable) or the course's (``encode``), both of
    which return a dict."""
    if hasattr(tokenizer, "token_to_id"):  # tokenizers.Tokenizer
        enc = tokenizer.encode(text)
        return enc.ids, enc.type_ids
    enc = (
        tokenizer(text) if callable(tokenizer) else tokenizer.encode(text)
    )  # transformers / course
    return list(enc["input_ids"]), list(enc["token_type_ids"])


def _convert(tokenizer: Any, *, token: str | None = None, token_id: int | None = None):
    """Token -> id or id -> token, whichever tokenizer it is (see `_token_ids`)."""
    if hasattr(tokenizer, "token_to_id"):
        return tokenizer.token_to_id(token) if token is not None else tokenizer.id_to_token(token_id)  # fmt: skip
    if token is not None:
        return tokenizer.convert_tokens_to_ids(token)
    return tokenizer.convert_ids_to_tokens(token_id)


@torch.no_grad()
def fill_mask(
    model: BertForPreTraining,
    tokenizer: Any,
    text: str,
    top_k: int = 5,
    *,
    blank_token: str = "[MASK]",
) -> list[list[Prediction]]:
    """The `top_k` most probable tokens at each `[MASK]` of `text`, most probable first.

    Works with any `BertForPreTraining` (one pretrained by `bertcourse.pretrain`, one converted
    from transformers, MiniLM's encoder with the head trained here) and any tokenizer of
    `bertcourse.vocab.load_tokenizer` (`tokenizers.Tokenizer`, transformers' or the course's
    `BertTokenizer`). Each `[MASK]` is fed to the encoder as `blank_token`: `"[MASK]"` for a
    model pretrained with masks, `"[UNK]"` for the MiniLM head of this module (the token it
    was trained at: `FillMaskConfig.blank_token`).
    Returns one list of `Prediction(token, probability, token_id)` per `[MASK]`.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    mask_id = _convert(tokenizer, token="[MASK]")
    blank_id = _convert(tokenizer, token=blank_token)
    if mask_id is None or blank_id is None:
        raise ValueError(f"the tokenizer has no [MASK] or {blank_token} token")
    input_ids, type_ids = _token_ids(tokenizer, text)
    ids = torch.tensor([input_ids])  # (1, L)
    positions = (ids[0] == mask_id).nonzero().flatten()  # (M,)
    if positions.numel() == 0:
        raise ValueError(f"no [MASK] in {text!r}: write [MASK] where a word should be guessed")
    ids[0, positions] = blank_id
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out = model(ids.to(device), torch.tensor([type_ids], device=device))
    model.train(was_training)
    probs = out.prediction_logits[0, positions].float().softmax(-1)  # (M, V)
    top = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
    return [
        [Prediction(_convert(tokenizer, token_id=int(i)), float(p), int(i)) for p, i in zip(ps, ix)]
        for ps, ix in zip(top.values, top.indices)
    ]


def format_probability(p: float, digits: int = 3) -> str:
    """A probability to read: 3 significant digits, in scientific notation below 0.001
    (``0.412``, ``0.0314``, ``0.00127``, ``4.21e-05``), so that small ones do not print
    as ``0.000``."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"a probability lies in [0, 1], got {p}")
    if p == 0.0:
        return "0"
    if p < 1e-3:
        return f"{p:.{digits - 1}e}"
    return f"{p:.{digits}g}"
