"""Measuring a pretraining run: the losses and statistics of one batch (shared by training
and evaluation), the held-out set, the unigram baseline, and a saved run scored again.

The held-out questions are the same for every run of a corpus: pairs of held-out documents
cut to ``eval_seq_length`` tokens, 15% of their tokens chosen, drawn with ``HELDOUT_SEED``
whatever the run's seed, so runs compare question by question.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from bertcourse.config import IGNORE_INDEX
from bertcourse.corpus import Document, load_text_files
from bertcourse.flops import bert_flops
from bertcourse.languages import get_language
from bertcourse.loaders import eval_batches
from bertcourse.model import BertForPreTraining
from bertcourse.packing import is_packed, packed_forward
from bertcourse.pretraining.checkpoint import load_checkpoint
from bertcourse.pretraining.config import HELDOUT_SEED, PretrainConfig
from bertcourse.textdata import TokenizedCorpus, tokenize_documents
from bertcourse.vocab import Vocab


@dataclass
class BatchStats:
    """Sums over one batch (all processes), or over several added with ``+``: everything a log
    line or an evaluation averages. Sums, not means, so that batches of different sizes and
    processes add up exactly."""

    n_predictions: float = 0.0  # labelled MLM positions
    mlm_loss_sum: float = 0.0  # cross-entropy summed over them
    mlm_correct: float = 0.0
    n_at_mask: float = 0.0  # labelled positions whose input is [MASK] (not random/kept)
    mlm_correct_at_mask: float = 0.0
    n_at_random: float = 0.0  # labelled positions whose input is another token, not [MASK]
    mlm_correct_at_random: float = 0.0
    n_pairs: float = 0.0  # NSP pairs
    nsp_loss_sum: float = 0.0
    nsp_correct: float = 0.0
    tokens: float = 0.0  # real tokens (attention_mask 1)
    positions: float = 0.0  # B * L: tokens as computed, padding included
    flops: float = 0.0  # model FLOPs (bertcourse.flops), training or forward only

    def __add__(self, other: BatchStats) -> BatchStats:
        return BatchStats(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other))))  # fmt: skip

    def as_tensor(self, device: torch.device | str = "cpu") -> Tensor:
        return torch.tensor(dataclasses.astuple(self), dtype=torch.float64, device=device)

    @classmethod
    def from_tensor(cls, t: Tensor) -> BatchStats:
        return cls(*t.tolist())

    @property
    def padding_share(self) -> float:
        return 1.0 - self.tokens / max(self.positions, 1.0)

    def metrics(self) -> dict[str, float]:
        mlm_loss = self.mlm_loss_sum / max(self.n_predictions, 1)
        return {
            "mlm_loss": mlm_loss,
            "mlm_perplexity": math.exp(min(mlm_loss, 50.0)),
            "mlm_acc": self.mlm_correct / max(self.n_predictions, 1),
            "mlm_acc_at_mask": self.mlm_correct_at_mask / max(self.n_at_mask, 1),
            "mlm_acc_at_random": self.mlm_correct_at_random / max(self.n_at_random, 1),
            "nsp_loss": self.nsp_loss_sum / max(self.n_pairs, 1),
            "nsp_acc": self.nsp_correct / max(self.n_pairs, 1),
            "n_predictions": int(self.n_predictions),
            "n_at_mask": int(self.n_at_mask),
            "n_at_random": int(self.n_at_random),
            "n_pairs": int(self.n_pairs),
        }


def forward_losses(
    model: torch.nn.Module, batch: dict[str, Tensor], mask_id: int, *, training: bool = True
) -> tuple[Tensor, Tensor, Tensor]:
    """Forward with labels: ``(mlm_sum, nsp_loss, stats)``.

    ``mlm_sum`` is the MLM cross-entropy *summed* over the labelled positions (the caller
    divides by the count of the global batch), ``nsp_loss`` the mean NSP cross-entropy, and
    ``stats`` a (13,) float64 tensor of :class:`BatchStats` fields for this process, still on
    the device (one transfer per step, after the all-reduce).
    """
    if is_packed(batch):  # several pairs per row (bertcourse.packing)
        out = packed_forward(getattr(model, "module", model), **batch)
    else:
        out = model(**batch)
    logits, targets = out.prediction_logits.float(), out.mlm_targets  # (N, V), (N,)
    nsp_logits, nsp_labels = out.seq_relationship_logits.float(), batch["next_sentence_label"]
    mlm_sum = F.cross_entropy(logits, targets, reduction="sum")
    nsp_loss = F.cross_entropy(nsp_logits, nsp_labels)
    with torch.no_grad():
        chosen = batch["labels"] != IGNORE_INDEX  # (B, L)
        at_mask, at_random = shown_kinds(batch["input_ids"][chosen], targets, mask_id)
        # max(-1).indices is argmax (the first maximum), measured 3x faster on CPU: (512, 8192)
        # float32 logits, 2 threads, 1.0 ms against 2.9 ms (~3% of a tiny model's step)
        right = logits.max(-1).indices == targets  # (N,)
        B, L = batch["input_ids"].shape
        P = nsp_labels.numel()  # pairs: B, or more when packed
        am = batch["attention_mask"]  # (B, L), or (B, L, L) when packed
        real_tokens = am.sum() if am.dim() == 2 else am.amax(-1).sum()
        config = getattr(model, "module", model).config
        flops = bert_flops(config, B, L, targets.numel(), training=training).total
        stats = torch.stack([
            torch.tensor(float(targets.numel()), device=logits.device),
            mlm_sum.detach(),
            right.sum(),
            at_mask.sum(),
            right[at_mask].sum(),
            at_random.sum(),
            right[at_random].sum(),
            torch.tensor(float(P), device=logits.device),
            nsp_loss.detach() * P,
            (nsp_logits.argmax(-1) == nsp_labels).sum(),
            real_tokens,
            torch.tensor(float(B * L), device=logits.device),
            torch.tensor(flops, device=logits.device),
        ]).double()  # fmt: skip
    return mlm_sum, nsp_loss, stats


def shown_kinds(shown: Tensor, targets: Tensor, mask_id: int) -> tuple[Tensor, Tensor]:
    """What each labelled position's input shows (``shown``, in the order of ``targets``):
    ``[MASK]``, or another token than its answer (a random one). The rest show their answer
    (kept, or a random draw that hit it), which a model can get right by copying its input."""
    at_mask = shown == mask_id
    return at_mask, ~at_mask & (shown != targets)


@torch.no_grad()
def evaluate(
    model: BertForPreTraining,
    batches: Sequence[dict[str, Tensor]],
    mask_id: int,
    device: torch.device,
    bf16: bool = False,
) -> dict:
    """MLM loss/accuracy (all predicted positions, and [MASK] positions only), NSP loss/acc:
    :func:`forward_losses` on every batch, summed into one :class:`BatchStats`."""
    was_training = model.training
    model.eval()
    total = BatchStats()
    for b in batches:
        b = {k: v.to(device) for k, v in b.items()}
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            _, _, stats = forward_losses(model, b, mask_id, training=False)
        total = total + BatchStats.from_tensor(stats.cpu())
    model.train(was_training)
    return total.metrics()


def unigram_baseline(train: TokenizedCorpus, batches: Sequence[dict[str, Tensor]]) -> dict:
    """The best context-free guess: always the most frequent non-special training token.

    Returns its accuracy on the labelled positions of ``batches`` (all, those whose input is
    ``[MASK]``, those whose input is another token: :func:`shown_kinds`, with their counts) and
    the cross-entropy of the add-one-smoothed unigram distribution there (what an MLM loss
    should beat).
    """
    counts = torch.from_numpy(train.unigram_counts()).double()
    for i in train.vocab.special_ids:
        counts[i] = 0
    best = int(counts.argmax())
    logp = torch.log((counts + 1) / (counts + 1).sum())
    targets = torch.cat([b["labels"][b["labels"] != IGNORE_INDEX] for b in batches])
    shown = torch.cat([b["input_ids"][b["labels"] != IGNORE_INDEX] for b in batches])
    at_mask, at_random = shown_kinds(shown, targets, train.vocab.mask_id)
    right = (targets == best).double()

    def accuracy(where: Tensor) -> float:  # 0 where there is no such position, as in BatchStats
        return float(right[where].sum() / max(int(where.sum()), 1))

    return {
        "token_id": best,
        "mlm_acc": float(right.mean()),
        "mlm_acc_at_mask": accuracy(at_mask),
        "mlm_acc_at_random": accuracy(at_random),
        "mlm_loss": float(-logp[targets].mean()),
        "n_predictions": int(targets.numel()),
        "n_at_mask": int(at_mask.sum()),
        "n_at_random": int(at_random.sum()),
    }


def run_documents(cfg: PretrainConfig) -> list[Document]:
    """The documents of a run: its text files, else its language's corpus."""
    if cfg.text_files:
        return load_text_files(cfg.text_files, documents=cfg.documents)
    return get_language(cfg.lang).documents()


def split_heldout(corpus: TokenizedCorpus, cfg: PretrainConfig) -> tuple[TokenizedCorpus, TokenizedCorpus]:  # fmt: skip
    """``(train, held-out)`` documents: the language's fixed split (``Language.is_heldout``:
    Chinese holds out the month's last 10%), else the name-hash rule of
    :func:`bertcourse.corpus.is_heldout` with ``cfg.heldout_percent``."""
    rule = get_language(cfg.lang).is_heldout
    if rule is not None and not cfg.text_files:
        held = [rule(name) for name in corpus.names]
        return corpus.subset([not h for h in held]), corpus.subset(held)
    train_corpus, heldout = corpus.split(cfg.heldout_percent)
    if len(heldout) < 2:  # tiny user corpora: hold out the last two documents instead
        keep = [i < len(corpus) - 2 for i in range(len(corpus))]
        train_corpus, heldout = corpus.subset(keep), corpus.subset([not k for k in keep])
    return train_corpus, heldout


def heldout_batches(
    heldout: TokenizedCorpus, cfg: PretrainConfig, *, whole_word_mask: bool = False
) -> list[dict[str, Tensor]]:
    """The held-out questions: the same pairs and masks for every run of a corpus (drawn with
    HELDOUT_SEED and BERT's 15%, cut to ``cfg.heldout_seq_length``), single tokens masked
    whatever the run's scheme; ``whole_word_mask=True``: the same pairs with whole words
    masked (a second set of questions, to compare the two schemes on each other's task)."""
    return eval_batches(
        heldout,
        whole_word_mask=whole_word_mask,
        seed=HELDOUT_SEED,
        max_seq_length=cfg.heldout_seq_length,
        max_examples=cfg.eval_examples,
    )


def evaluate_checkpoint(
    path: str | Path,
    *,
    eval_seq_length: int | None = None,
    device: str = "cpu",
    with_transformers: bool = False,
    whole_word_mask: bool = False,
) -> dict:
    """A saved run's metrics on its corpus's held-out set (the one :func:`train` uses).

    The documents are tokenized again with the checkpoint's own ``tokenizer.json``, so the
    figures do not depend on this machine's cached vocabulary. ``eval_seq_length`` overrides
    the run's (it is still cut to the run's ``max_seq_length``). ``with_transformers`` also
    scores the same weights with transformers' ``BertForPreTraining`` (``result["transformers"]``):
    a check of the figures from outside this package's model code. ``whole_word_mask``: the
    held-out pairs with whole words masked instead (:func:`heldout_batches`).
    """
    cfg = PretrainConfig.load(path)
    if eval_seq_length is not None:
        cfg = cfg.replace(eval_seq_length=eval_seq_length)
    model, tokenizer = load_checkpoint(path, device)
    train_corpus, heldout = split_heldout(tokenize_documents(run_documents(cfg), tokenizer), cfg)
    batches = heldout_batches(heldout, cfg, whole_word_mask=whole_word_mask)
    mask_id = Vocab.from_tokenizer(tokenizer).mask_id
    res = evaluate(model, batches, mask_id, torch.device(device))
    res |= {"seq_length": cfg.heldout_seq_length,
            "unigram_baseline": unigram_baseline(train_corpus, batches)}  # fmt: skip
    if with_transformers:
        res["transformers"] = _accuracy_with_transformers(model, batches, mask_id)
    return res


@torch.no_grad()
def _accuracy_with_transformers(
    model: BertForPreTraining, batches: Sequence[dict[str, Tensor]], mask_id: int
) -> dict[str, float]:
    """MLM accuracy (all chosen positions, [MASK] only) and NSP accuracy of ``model``'s weights
    run by transformers' BertForPreTraining, from the logits at every position."""
    from bertcourse.hf import to_hf

    hf = to_hf(model).eval()
    right = at_mask = right_at_mask = n = nsp_right = pairs = 0
    for b in batches:
        out = hf(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"],
                 attention_mask=b["attention_mask"])  # fmt: skip
        chosen = b["labels"] != IGNORE_INDEX  # (B, L)
        hit = out.prediction_logits[chosen].argmax(-1) == b["labels"][chosen]  # (N,)
        is_mask = b["input_ids"][chosen] == mask_id  # (N,)
        right, n = right + int(hit.sum()), n + hit.numel()
        right_at_mask, at_mask = right_at_mask + int(hit[is_mask].sum()), at_mask + int(is_mask.sum())  # fmt: skip
        nsp_right += int((out.seq_relationship_logits.argmax(-1) == b["next_sentence_label"]).sum())
        pairs += len(b["next_sentence_label"])
    return {"mlm_acc": right / max(n, 1), "mlm_acc_at_mask": right_at_mask / max(at_mask, 1),
            "nsp_acc": nsp_right / max(pairs, 1)}  # fmt: skip
