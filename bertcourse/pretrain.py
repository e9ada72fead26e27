"""Pretrain a small BERT on your laptop, offline: MLM + NSP on the standard library's docs.

Command line (``python -m bertcourse.pretrain --help`` lists every option)::

    python -m bertcourse.pretrain --model tiny --steps 2000 --output runs/tiny
    python -m bertcourse.pretrain --model tiny --max-minutes 10   # steps fitted to 10 minutes
    python -m bertcourse.pretrain --resume runs/tiny --steps 3000        # continue, exactly
    python -m bertcourse.pretrain fill-mask --checkpoint runs/tiny "return the [MASK] of x."
    python -m bertcourse.pretrain evaluate runs/tiny runs/other   # the held-out figures again

Python (what the book's chapter 7 calls)::

    from bertcourse.pretrain import PretrainConfig, run, fill_mask, load_checkpoint
    report = run(PretrainConfig(model="tiny", steps=300, output_dir="runs/demo"))
    model, tokenizer = load_checkpoint("runs/demo")
    fill_mask(model, tokenizer, "the [MASK] of a list is its number of items.")

What one run does:

1. Data: the offline corpus of :mod:`bertcourse.data` (or ``--text-files``), tokenized with
   an uncased WordPiece vocabulary of 8,192 pieces trained on that corpus (the default: for a
   tiny model it trains ~1.75x more steps per second than bert-base-uncased's 30,522 pieces
   and learns about as much per step, more at ``[MASK]`` positions; see
   ``benchmarks/RESULTS.md``. ``--tokenizer bert`` uses the real vocabulary),
   cached in ``~/.cache/bertcourse``; ~5% of the documents are held out for evaluation.
   Each epoch cuts new NSP pairs (:mod:`bertcourse.nsp`); every batch gets fresh MLM masks
   (:func:`bertcourse.mlm.mask_tokens`). Pairs have at most 64 tokens by default (``--max-seq-length``;
   in a fixed time a small model learns more from shorter pairs and more steps, see
   ``benchmarks/RESULTS.md``). ``--packing`` puts several pairs in each row
   (:mod:`bertcourse.packing`): no padding (at 64 tokens it did not pay, see RESULTS.md).
   The held-out questions are the same for every run of a corpus: pairs of 64 tokens
   (``--eval-seq-length``), 15% chosen, drawn with one fixed seed, whatever the run's seed.
2. Model: :class:`bertcourse.BertForPreTraining` (tiny, mini, base, or custom sizes).
   Two settings differ from BERT's, because they pay in a short run (each measured with one
   seed, the recipe against BERT's over three, in ``benchmarks/RESULTS.md``): no dropout (``--dropout``, BERT: 0.1) and 25% of
   the tokens chosen for prediction (``--mlm-probability``, BERT: 0.15; still 80/10/10).
3. Optimizer: :class:`bertcourse.optim.AdamW` on :func:`bertcourse.optim.bert_param_groups`
   (no decay for LayerNorm and biases), linear warm-up then linear decay
   (:func:`bertcourse.optim.warmup_linear_decay`; ``--schedule polynomial`` for the
   original's), gradients clipped to norm 1.0.
4. A tqdm bar with loss, MLM accuracy, NSP accuracy, tokens/s and MFU (model FLOPs per
   second over the fp32 matmul peak measured at the start, :mod:`bertcourse.flops`); held-out
   evaluation every ``--eval-every`` steps; a checkpoint (``model.safetensors`` + optimizer,
   scheduler and data position) every ``--checkpoint-every`` steps and at the end;
   ``report.json`` with every figure, ``curves.png`` (losses, accuracies) and ``lr.png``.

A time budget: ``--max-minutes M`` without ``--steps`` times a few real steps (then undoes
them), and sets the steps so that training, the evaluations and the final checkpoint fit in M
minutes; warm-up and decay are then 10% and 90% of those steps. At the end of warm-up, where
the learning rate is at its peak, it fits the steps once more from the mean time of the
hundreds of steps run so far (a machine's speed drifts), which continues the schedule exactly.
The final numbers are printed and saved: ``--steps N --warmup-steps W`` with them repeats the
run exactly (timings differ between machines, so the fitted N does too).

Exact resume: the data order depends only on ``(seed, epoch)``, each example's mask on
``(seed, epoch, example)``, and the dropout noise of step ``s`` on ``(seed, s, rank)``; the
checkpoint stores the step, the epoch and the position in it, and the optimizer and
scheduler state. A run stopped and resumed ends with the same weights as a run that never
stopped.

Several processes (DistributedDataParallel)::

    torchrun --nproc_per_node=2 -m bertcourse.pretrain --model tiny --batch-size 64

``--batch-size`` is the *global* batch: each of the N processes takes ``batch_size / N``
examples of every global batch, so the data, the masks and (up to float rounding) the
results do not depend on N. Backend: gloo on CPU, nccl on GPU (one GPU per process,
``cuda:LOCAL_RANK``). The MLM loss is normalised by the number of masked tokens of the whole
global batch (an all-reduce), not per process, so it equals the single-process loss.
Only rank 0 evaluates, writes checkpoints and reports.

Several machines: run the same command on every node with the rendezvous of the first::

    # on each of 2 nodes with 8 GPUs (NODE_RANK = 0 on the first, 1 on the second)
    torchrun --nnodes=2 --nproc_per_node=8 --node_rank=$NODE_RANK \\
        --rdzv_backend=c10d --rdzv_endpoint=$FIRST_NODE_HOST:29500 --rdzv_id=bert1 \\
        -m bertcourse.pretrain --model base --batch-size 256 --output /shared/runs/base

Every node needs the same bertcourse and Python version (the corpus depends on it) and the
output folder should be on a shared file system (rank 0 writes it; ``--resume`` reads it on
every rank). On CPU nodes, gloo needs the nodes to reach each other on the rendezvous port
and set ``--threads`` to the cores per process.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from bertcourse.config import IGNORE_INDEX, BertConfig
from bertcourse.data import (
    TokenizedCorpus,
    Vocab,
    _mix_seed,
    eval_batches,
    load_corpus,
    load_text_files,
    pretraining_dataloader,
    stdlib_corpus,
    tokenize_documents,
)
from bertcourse.flops import bert_flops, matmul_peak
from bertcourse.model import BertForPreTraining
from bertcourse.optim import AdamW, bert_param_groups, make_lr_scheduler
from bertcourse.packing import is_packed, packed_forward

MODEL_SIZES = ("tiny", "mini", "small", "base", "custom")
HELDOUT_SEED = 0  # the held-out pairs and masks: the same for every run (see eval_seq_length)
CHECKPOINT_DIR = "checkpoint"


@dataclass
class PretrainConfig:
    """Everything a run needs. The command-line options have the same names (with dashes)."""

    # model
    model: str = "tiny"  # tiny (2x128), mini (4x256), small (4x512), base (12x768), custom
    layers: int | None = None  # override the preset's num_hidden_layers
    hidden: int | None = None  # hidden_size
    heads: int | None = None  # num_attention_heads (custom default: hidden // 64, at least 1)
    intermediate: int | None = None  # intermediate_size (custom default: 4 * hidden)
    # Hidden and attention dropout. 0, not BERT's 0.1: a ten-minute run sees each token a few
    # dozen times and is far from overfitting, and without dropout it learns more per step
    # (benchmarks/RESULTS.md: 0.192 vs 0.150 at [MASK] for seed 0). Use 0.1 for long runs.
    dropout: float = 0.0
    attn_implementation: str = "sdpa"
    # data
    # "wordpiece-8192" (trained on the corpus; faster and better for tiny/mini models, see
    # benchmarks/RESULTS.md) or "bert" (the bert-base-uncased vocabulary, 30,522 pieces)
    tokenizer: str = "wordpiece-8192"
    text_files: list[str] | None = None  # your own .txt files/folders instead of the stdlib
    documents: str = "file"  # for text_files: "file" or "block" (see bertcourse.data)
    # 64, not BERT's 128: in the same 10 minutes a tiny model learns more from twice the steps
    # on shorter pairs (with BERT's dropout and mask rate, seed 0: 0.150 at [MASK] against
    # 0.075 at 128; benchmarks/RESULTS.md)
    max_seq_length: int = 64
    packing: bool = False  # several pairs per row, no padding (bertcourse.packing)
    # Share of tokens chosen for prediction in training. 0.25, not BERT's 0.15: more
    # predictions per step for the same encoder work (0.40 was worse; benchmarks/RESULTS.md).
    # The 80/10/10 split of the chosen tokens is BERT's. The held-out set always uses 0.15.
    mlm_probability: float = 0.25
    heldout_percent: float = 5.0
    # The held-out set is one set of questions for every run: pairs cut to eval_seq_length
    # tokens (or the run's max_seq_length if shorter), drawn with HELDOUT_SEED and BERT's 15%
    # whatever the run's seed, length and mlm_probability, so runs compare question by question
    eval_seq_length: int = 64
    eval_examples: int | None = None  # cap on held-out pairs (None: all, ~600)
    # optimisation
    steps: int | None = 1000  # optimizer steps of the schedule; None: fit it to max_minutes
    batch_size: int = 32  # global batch (split across DDP processes)
    lr: float = 2e-3  # peak learning rate: beat 1e-3 and 3e-3 in the default recipe (RESULTS.md)
    warmup_steps: int | None = None  # default: 10% of steps
    schedule: str = "linear"  # "linear" (transformers) or "polynomial" (original BERT)
    weight_decay: float = 0.01
    adam_eps: float = 1e-6
    bias_correction: bool = True
    grad_clip: float = 1.0
    seed: int = 0
    # running
    output_dir: str = "runs/pretrain"
    resume: str | None = None  # an output dir or a checkpoint dir
    eval_every: int = 200
    checkpoint_every: int = 500
    log_every: int = 10
    stop_after: int | None = None  # stop after this many steps *in this run* (schedule unchanged)
    max_minutes: float | None = None  # stop (checkpoint, evaluate, report) after this long
    threads: int | None = None  # torch.set_num_threads
    peak_gflops: float | None = None  # the machine's matmul peak for MFU (None: measure it)
    measure_peak: bool = True  # measure the matmul peak at the start (~1 s) to report MFU
    device: str = "auto"  # "auto" (cuda if available), "cpu", "cuda"
    bf16: bool = False  # bf16 autocast: GPUs; on a CPU it pays only with AMX and larger models
    num_workers: int = 0  # DataLoader workers
    progress: bool = True  # tqdm bar (rank 0)
    plots: bool = True
    cache_dir: str | None = None

    def replace(self, **changes: Any) -> PretrainConfig:
        return dataclasses.replace(self, **changes)

    def model_config(self, vocab: Vocab) -> BertConfig:
        """The BertConfig of this run for a vocabulary (size and [PAD] id)."""
        if self.model not in MODEL_SIZES:
            raise ValueError(f"model must be one of {MODEL_SIZES}, got {self.model!r}")
        presets = {
            "tiny": (2, 128, 2, 512),
            "mini": (4, 256, 4, 1024),
            "small": (4, 512, 8, 2048),
            "base": (12, 768, 12, 3072),
        }
        if self.model == "custom":
            if self.layers is None or self.hidden is None:
                raise ValueError("--model custom needs --layers and --hidden (and optionally --heads, --intermediate)")  # fmt: skip
            layers, hidden = self.layers, self.hidden
            heads = self.heads or max(1, hidden // 64)
            inter = self.intermediate or 4 * hidden
        else:
            layers, hidden, heads, inter = presets[self.model]
            layers, hidden = self.layers or layers, self.hidden or hidden
            heads, inter = self.heads or heads, self.intermediate or inter
        if self.max_seq_length > 512:
            raise ValueError(f"max_seq_length {self.max_seq_length} exceeds BERT's 512 positions")
        return BertConfig(
            vocab_size=vocab.size,
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=inter,
            hidden_dropout_prob=self.dropout,
            attention_probs_dropout_prob=self.dropout,
            pad_token_id=vocab.pad_id,
            attn_implementation=self.attn_implementation,
        )

    @property
    def heldout_seq_length(self) -> int:
        """The held-out pairs' length: eval_seq_length, or max_seq_length if that is shorter
        (a model has no position embeddings trained beyond its own length)."""
        return min(self.eval_seq_length, self.max_seq_length)

    @property
    def warmup(self) -> int:
        if self.warmup_steps is not None:
            return self.warmup_steps
        if self.steps is None:
            raise ValueError("the warm-up is 10% of steps, which are not fitted yet")
        return round(0.1 * self.steps)

    @classmethod
    def load(cls, path: str | Path) -> PretrainConfig:
        """The config a run was started with, from its output or checkpoint folder."""
        d = json.loads((_checkpoint_path(path) / "config.json").read_text())["pretrain"]
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


# --------------------------------------------------------------------------------------------
# Distributed set-up
# --------------------------------------------------------------------------------------------


@dataclass
class Dist:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.enabled:
            torch.distributed.barrier()

    def all_reduce_sum(self, t: Tensor) -> Tensor:
        if self.enabled:
            torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
        return t


def setup_distributed(device: str = "auto") -> Dist:
    """Read torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK) and start the process group:
    nccl with one GPU per process when CUDA is used, gloo on CPU. One process: no group."""
    use_cuda = torch.cuda.is_available() if device == "auto" else device.startswith("cuda")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
    else:
        dev = torch.device("cpu")
    if world > 1 and not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend="nccl" if use_cuda else "gloo")
    return Dist(rank, world, local, dev)


# --------------------------------------------------------------------------------------------
# One step: forward, losses and statistics (shared by training and evaluation)
# --------------------------------------------------------------------------------------------


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
            "nsp_loss": self.nsp_loss_sum / max(self.n_pairs, 1),
            "nsp_acc": self.nsp_correct / max(self.n_pairs, 1),
            "n_predictions": int(self.n_predictions),
            "n_pairs": int(self.n_pairs),
        }


def forward_losses(
    model: torch.nn.Module, batch: dict[str, Tensor], mask_id: int, *, training: bool = True
) -> tuple[Tensor, Tensor, Tensor]:
    """Forward with labels: ``(mlm_sum, nsp_loss, stats)``.

    ``mlm_sum`` is the MLM cross-entropy *summed* over the labelled positions (the caller
    divides by the count of the global batch), ``nsp_loss`` the mean NSP cross-entropy, and
    ``stats`` a (11,) float64 tensor of :class:`BatchStats` fields for this process, still on
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
        at_mask = batch["input_ids"][chosen] == mask_id  # (N,) in the order of mlm_targets
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
            torch.tensor(float(P), device=logits.device),
            nsp_loss.detach() * P,
            (nsp_logits.argmax(-1) == nsp_labels).sum(),
            real_tokens,
            torch.tensor(float(B * L), device=logits.device),
            torch.tensor(flops, device=logits.device),
        ]).double()  # fmt: skip
    return mlm_sum, nsp_loss, stats


def train_step(
    model: torch.nn.Module,
    batch: dict[str, Tensor],
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    *,
    mask_id: int,
    dist: Dist,
    seed: int,
    step: int,
    grad_clip: float = 1.0,
    bf16: bool = False,
) -> BatchStats:
    """One optimizer step on one batch (``model`` may be the DDP wrapper); returns the batch's
    statistics summed over all processes."""
    batch = {k: v.to(dist.device, non_blocking=True) for k, v in batch.items()}
    # Dropout noise of this step depends only on (seed, step, rank): exact resume.
    torch.manual_seed(_mix_seed(seed, step, dist.rank, 3))
    with torch.autocast(dist.device.type, dtype=torch.bfloat16, enabled=bf16):
        mlm_sum, nsp_loss, stats = forward_losses(model, batch, mask_id)
    stats = dist.all_reduce_sum(stats).cpu()
    # Mean over the masked tokens of the GLOBAL batch. DDP averages gradients over the
    # W processes, hence the factor W: sum_r W * sum_r / (W * N) = global mean.
    n_global = stats[0].item()
    mlm_loss = mlm_sum * (dist.world_size / n_global) if n_global else mlm_sum * 0.0
    loss = mlm_loss + nsp_loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    scheduler.step()
    return BatchStats.from_tensor(stats)


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

    Returns its accuracy on the labelled positions of ``batches`` and the cross-entropy of
    the add-one-smoothed unigram distribution there (what an MLM loss should beat).
    """
    counts = torch.from_numpy(train.unigram_counts()).double()
    for i in train.vocab.special_ids:
        counts[i] = 0
    best = int(counts.argmax())
    logp = torch.log((counts + 1) / (counts + 1).sum())
    targets = torch.cat([b["labels"][b["labels"] != IGNORE_INDEX] for b in batches])
    return {
        "token_id": best,
        "mlm_acc": float((targets == best).double().mean()),
        "mlm_loss": float(-logp[targets].mean()),
        "n_predictions": int(targets.numel()),
    }


# --------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------


def _checkpoint_path(path: str | Path) -> Path:
    """Accept an output folder (uses its ``checkpoint/``) or a checkpoint folder."""
    path = Path(path)
    if (path / "model.safetensors").is_file():
        return path
    if (path / CHECKPOINT_DIR / "model.safetensors").is_file():
        return path / CHECKPOINT_DIR
    raise FileNotFoundError(
        f"no checkpoint in {path}: expected {path}/model.safetensors or "
        f"{path}/{CHECKPOINT_DIR}/model.safetensors (written by python -m bertcourse.pretrain)"
    )


def save_checkpoint(
    out_dir: Path,
    model: BertForPreTraining,
    tokenizer: Any,
    cfg: PretrainConfig,
    state: dict,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
) -> Path:
    """Write ``out_dir/checkpoint/``: model.safetensors (tied weights stored once),
    config.json, tokenizer.json and trainer_state.pt. Written to a temporary folder first, then
    renamed, so a crash never leaves half a checkpoint."""
    import shutil

    from safetensors.torch import save_model

    final = out_dir / CHECKPOINT_DIR
    tmp = out_dir / (CHECKPOINT_DIR + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_model(model, str(tmp / "model.safetensors"))
    meta = {"model": model.config.to_dict(), "pretrain": dataclasses.asdict(cfg)}
    (tmp / "config.json").write_text(json.dumps(meta, indent=2))
    tokenizer.save(str(tmp / "tokenizer.json"))
    torch.save(
        {**state, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()},
        tmp / "trainer_state.pt",
    )
    old = out_dir / (CHECKPOINT_DIR + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(
    path: str | Path, device: str | torch.device = "cpu"
) -> tuple[BertForPreTraining, Any]:
    """``(model in eval mode, tokenizers.Tokenizer)`` from an output or checkpoint folder."""
    from safetensors.torch import load_model
    from tokenizers import Tokenizer

    ckpt = _checkpoint_path(path)
    meta = json.loads((ckpt / "config.json").read_text())
    model = BertForPreTraining(BertConfig.from_dict(meta["model"]))
    load_model(model, str(ckpt / "model.safetensors"), device=str(device))
    model.tie_weights()
    return model.to(device).eval(), Tokenizer.from_file(str(ckpt / "tokenizer.json"))


# --------------------------------------------------------------------------------------------
# Fill-mask
# --------------------------------------------------------------------------------------------


@torch.no_grad()
def fill_mask(
    model: BertForPreTraining, tokenizer: Any, text: str, top_k: int = 5
) -> list[list[tuple[str, float]]]:
    """Top-k predictions (token, probability) for each ``[MASK]`` in ``text``.

    ``tokenizer`` is a ``tokenizers.Tokenizer`` (from :func:`load_checkpoint` or
    :func:`bertcourse.data.bert_tokenizer`). Works with any BertForPreTraining, e.g. one
    pretrained here or one converted from transformers with the bert-base-uncased vocab.
    """
    mask_id = tokenizer.token_to_id("[MASK]")
    enc = tokenizer.encode(text)
    ids = torch.tensor([enc.ids])  # (1, L)
    positions = (ids[0] == mask_id).nonzero().flatten()
    if positions.numel() == 0:
        raise ValueError(f"no [MASK] in {text!r}: write [MASK] where a word should be guessed")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out = model(ids.to(device), torch.tensor([enc.type_ids], device=device))
    model.train(was_training)
    probs = out.prediction_logits[0, positions].float().softmax(-1)  # (M, V)
    top = probs.topk(top_k, dim=-1)
    return [
        [(tokenizer.id_to_token(int(i)), float(p)) for p, i in zip(ps, ix)]
        for ps, ix in zip(top.values, top.indices)
    ]


# --------------------------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------------------------


def save_plots(report: dict, out_dir: Path) -> list[str]:
    """``curves.png`` (MLM/NSP loss and accuracy, train and held-out) and ``lr.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train, ev = report["history"]["train"], report["history"]["eval"]
    base = report["unigram_baseline"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    s = [r["step"] for r in train]
    es = [r["step"] for r in ev]
    ax = axes[0]
    ax.plot(s, [r["mlm_loss"] for r in train], label="MLM train", color="C0", alpha=0.7)
    ax.plot(es, [r["mlm_loss"] for r in ev], "o-", label="MLM held-out", color="C0")
    ax.plot(s, [r["nsp_loss"] for r in train], label="NSP train", color="C1", alpha=0.7)
    ax.plot(es, [r["nsp_loss"] for r in ev], "o-", label="NSP held-out", color="C1")
    ax.axhline(base["mlm_loss"], ls="--", color="gray", label="unigram MLM loss")
    ax.set(xlabel="step", ylabel="cross-entropy (nats)", title="Losses")
    ax.legend(fontsize=8)
    ax = axes[1]
    ax.plot(s, [r["mlm_acc"] for r in train], label="train", color="C0", alpha=0.7)
    ax.plot(es, [r["mlm_acc"] for r in ev], "o-", label="held-out", color="C0")
    ax.plot(es, [r["mlm_acc_at_mask"] for r in ev], "s:", label="held-out, [MASK] only", color="C2")
    ax.axhline(base["mlm_acc"], ls="--", color="gray", label="unigram baseline")
    ax.set(xlabel="step", ylabel="accuracy", title="MLM accuracy", ylim=(0, None))
    ax.legend(fontsize=8)
    ax = axes[2]
    ax.plot(s, [r["nsp_acc"] for r in train], label="train", color="C1", alpha=0.7)
    ax.plot(es, [r["nsp_acc"] for r in ev], "o-", label="held-out", color="C1")
    ax.axhline(0.5, ls="--", color="gray", label="chance")
    ax.set(xlabel="step", ylabel="accuracy", title="NSP accuracy", ylim=(0, 1))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "curves.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r["step"] for r in train], [r["lr"] for r in train])
    ax.set(xlabel="step", ylabel="learning rate", title=f"Schedule: {report['config']['schedule']}")
    fig.tight_layout()
    fig.savefig(out_dir / "lr.png", dpi=100)
    plt.close(fig)
    return ["curves.png", "lr.png"]


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------


def _check_resume(cfg: PretrainConfig, saved: PretrainConfig) -> None:
    fixed = ("model", "layers", "hidden", "heads", "intermediate", "tokenizer", "text_files",
             "documents", "max_seq_length", "batch_size", "seed", "heldout_percent",
             "eval_seq_length")  # fmt: skip
    diff = [f for f in fixed if getattr(cfg, f) != getattr(saved, f)]
    if diff:
        raise ValueError(
            "cannot resume: these settings differ from the checkpoint's: "
            + ", ".join(
                f"{f}={getattr(cfg, f)!r} (checkpoint: {getattr(saved, f)!r})" for f in diff
            )
            + ". Start from PretrainConfig.load(dir) (the command line does this for you)."
        )


class TrainResult(NamedTuple):
    model: BertForPreTraining  # this process's model (not the DDP wrapper), in train mode
    tokenizer: Any  # tokenizers.Tokenizer
    report: dict  # empty on ranks other than 0


@dataclass
class Session:
    """What one run holds while it trains: the pieces, the position (``state``, saved in every
    checkpoint) and the evaluation set. Its methods are the loop's three side jobs."""

    cfg: PretrainConfig
    dist: Dist
    model: BertForPreTraining
    optimizer: torch.optim.Optimizer
    scheduler: Any
    tokenizer: Any
    vocab: Vocab
    ev_batches: list[dict[str, Tensor]]
    baseline: dict
    out_dir: Path
    state: dict[str, Any]
    train_corpus: TokenizedCorpus
    bar: Any = None
    time_fit: TimeFit | None = None  # set while a --max-minutes schedule awaits its refit

    def log(self, msg: str) -> None:
        if self.dist.is_main:
            (self.bar.write if self.bar is not None else print)(msg, file=sys.stderr)

    def evaluate(self) -> dict:
        """Held-out metrics at the current step (rank 0; the others wait)."""
        res: dict = {}
        if self.dist.is_main:
            ev = evaluate(self.model, self.ev_batches, self.vocab.mask_id, self.dist.device, self.cfg.bf16)  # fmt: skip
            res = {"step": self.state["step"], **ev}
            self.state["history"]["eval"].append(res)
            self.log(
                f"step {res['step']}: held-out MLM acc {res['mlm_acc']:.3f} ([MASK] only "
                f"{res['mlm_acc_at_mask']:.3f}; unigram {self.baseline['mlm_acc']:.3f}), MLM "
                f"loss {res['mlm_loss']:.3f}, NSP acc {res['nsp_acc']:.3f}"
            )
        self.dist.barrier()
        return res

    def checkpoint(self) -> None:
        if self.dist.is_main:
            save_checkpoint(self.out_dir, self.model, self.tokenizer, self.cfg, self.state,
                            self.optimizer, self.scheduler)  # fmt: skip
        self.dist.barrier()

    def loader(self) -> torch.utils.data.DataLoader:
        """The rest of the current epoch's batches for this process."""
        cfg = self.cfg
        return pretraining_dataloader(
            self.train_corpus,
            batch_size=cfg.batch_size // self.dist.world_size,
            epoch=self.state["epoch"],
            seed=cfg.seed,
            rank=self.dist.rank,
            world_size=self.dist.world_size,
            skip_batches=self.state["batch_in_epoch"],
            max_seq_length=cfg.max_seq_length,
            mlm_probability=cfg.mlm_probability,
            num_workers=cfg.num_workers,
            packing=cfg.packing,
        )


class _ConstantLR:
    """A scheduler that does nothing: the calibration steps run before the schedule exists."""

    def step(self) -> None:
        pass

    def state_dict(self) -> dict:
        return {}


@dataclass
class TimeFit:
    """A schedule fitted to a time budget: the steps, and what the budget's end needs."""

    steps: int
    minutes: float
    t_start: float  # time.perf_counter() at the start of the run
    final_seconds: float  # the final evaluation and checkpoint, measured


def fit_steps_to_time(s: Session, minutes: float, t_start: float, eval_seconds: float) -> TimeFit:
    """The number of steps that fit in ``minutes`` (counted from ``t_start``): time a few real
    steps, then undo them (model and optimizer restored), so the run that follows is exactly
    ``--steps N`` with the N returned. The loop fits it again at the end of warm-up, from
    hundreds of steps (:func:`refit_steps_to_time`).

    Budget = minutes - time already spent - final evaluation and checkpoint - cutting the
    first epoch's pairs; each step costs its measured time plus its share of the periodic
    evaluations and of the later epochs' pairs; 3% is kept as a margin.
    """
    import copy

    cfg = s.cfg
    model_state = copy.deepcopy(s.model.state_dict())
    optim_state = copy.deepcopy(s.optimizer.state_dict())
    budget = 60.0 * minutes
    times: list[float] = []
    t_epoch = time.perf_counter()
    epoch_loader = s.loader()  # cutting an epoch's pairs takes a moment: timed too
    epoch_seconds, batches_per_epoch = time.perf_counter() - t_epoch, len(epoch_loader)
    loader = iter(epoch_loader)
    for i in range(3 + 20):  # 3 warm-up steps (allocator, kernel choice), then up to 20 timed
        t0 = time.perf_counter()  # the batch's preparation (masking, padding) counts too
        batch = next(loader, None)
        if batch is None:
            break
        train_step(s.model, batch, s.optimizer, _ConstantLR(), mask_id=s.vocab.mask_id,
                   dist=s.dist, seed=cfg.seed, step=i, grad_clip=cfg.grad_clip, bf16=cfg.bf16)  # fmt: skip
        if i >= 3:
            times.append(time.perf_counter() - t0)
        # Stop early when timing eats into the budget (decided together: every process must
        # run the same number of steps, each all-reduces its statistics).
        late = float(len(times) >= 3 and time.perf_counter() - t_start > 0.1 * budget)
        if s.dist.all_reduce_sum(torch.tensor([late])).item() > 0:
            break
    s.model.load_state_dict(model_state)
    s.optimizer.load_state_dict(optim_state)
    if not times:
        raise ValueError("cannot time a step: an epoch has fewer than 4 batches")
    step_seconds = sorted(times)[len(times) // 2]  # the median: robust to a slow outlier
    t_ckpt = time.perf_counter()
    if s.dist.is_main:  # the cost of the final checkpoint, measured
        save_checkpoint(s.out_dir, s.model, s.tokenizer, cfg.replace(steps=1), s.state,
                        s.optimizer, _ConstantLR())  # fmt: skip
    ckpt_seconds = time.perf_counter() - t_ckpt
    # Fixed costs: the final evaluation and checkpoint, the loop's first epoch of pairs.
    left = budget - (time.perf_counter() - t_start) - eval_seconds - ckpt_seconds - epoch_seconds
    per_step = (
        step_seconds
        + (eval_seconds / cfg.eval_every if cfg.eval_every else 0.0)
        + epoch_seconds / max(batches_per_epoch, 1)  # a new epoch of pairs now and then
    )
    tensor = torch.tensor([float(max(1, int(0.97 * left / per_step)))])
    steps = int(s.dist.all_reduce_sum(tensor).item() / s.dist.world_size)  # same N everywhere
    s.log(
        f"schedule fitted to {minutes:g} min: {step_seconds * 1e3:.0f} ms per step (median of "
        f"{len(times)}), evaluation {eval_seconds:.1f} s -> {steps} steps"
    )
    return TimeFit(steps, minutes, t_start, eval_seconds + ckpt_seconds)


REFIT_MIN_STEPS = 20  # a warm-up shorter than this is too short to time: no refit


def refit_steps_to_time(s: Session, seconds_per_step: float) -> PretrainConfig:
    """Fit the steps to the time again at the end of warm-up, from the mean time of the steps
    run so far (evaluations included), and return the run's new config.

    The first fit times 20 steps, and a machine's speed drifts by several percent over
    minutes, so it may leave time unused or run out of it. Here the learning rate is at its
    peak and the decay has not begun, so a new number of steps N' continues the schedule
    exactly: the run equals one started with ``--steps N' --warmup-steps W`` (printed and
    saved). 1% of the time left is kept as a margin.
    """
    cfg, fit = s.cfg, s.time_fit
    assert fit is not None
    left = 60.0 * fit.minutes - (time.perf_counter() - fit.t_start) - fit.final_seconds
    more = torch.tensor([float(max(1, int(0.99 * left / seconds_per_step)))])
    more_steps = int(s.dist.all_reduce_sum(more).item() / s.dist.world_size)  # same everywhere
    step = s.state["step"]
    cfg = cfg.replace(steps=step + more_steps, warmup_steps=cfg.warmup)
    s.scheduler = make_lr_scheduler(
        s.optimizer, cfg.schedule, warmup_steps=cfg.warmup, total_steps=cfg.steps
    )
    s.scheduler.last_epoch = step - 1
    s.scheduler.step()  # the rate of step `step` under the new schedule (the peak)
    s.cfg, s.time_fit = cfg, None
    if s.bar is not None:
        s.bar.total = cfg.steps
        s.bar.refresh()
    s.log(
        f"schedule fitted again at the end of warm-up: {seconds_per_step * 1e3:.0f} ms per "
        f"step (mean of {step}) -> {fit.steps} becomes {cfg.steps} steps (reproduce with "
        f"--steps {cfg.steps} --warmup-steps {cfg.warmup})"
    )
    return cfg


def run(cfg: PretrainConfig) -> dict:
    """Pretrain (or resume) and return the report (also written to ``output_dir/report.json``).

    Works in one process or under torchrun (see the module docstring). The report holds the
    final held-out metrics (``report["final_eval"]``), the unigram baseline
    (``report["unigram_baseline"]``), their ratio, timings, corpus sizes and the history.
    """
    return train(cfg).report


def split_heldout(corpus: TokenizedCorpus, cfg: PretrainConfig) -> tuple[TokenizedCorpus, TokenizedCorpus]:  # fmt: skip
    """``(train, held-out)`` documents by the rule of :func:`bertcourse.data.is_heldout`."""
    train_corpus, heldout = corpus.split(cfg.heldout_percent)
    if len(heldout) < 2:  # tiny user corpora: hold out the last two documents instead
        keep = [i < len(corpus) - 2 for i in range(len(corpus))]
        train_corpus, heldout = corpus.subset(keep), corpus.subset([not k for k in keep])
    return train_corpus, heldout


def heldout_batches(heldout: TokenizedCorpus, cfg: PretrainConfig) -> list[dict[str, Tensor]]:
    """The held-out questions: the same pairs and masks for every run of a corpus (drawn with
    HELDOUT_SEED and BERT's 15%, cut to ``cfg.heldout_seq_length``)."""
    return eval_batches(
        heldout,
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
) -> dict:
    """A saved run's metrics on its corpus's held-out set (the one :func:`train` uses).

    The documents are tokenized again with the checkpoint's own ``tokenizer.json``, so the
    figures do not depend on this machine's cached vocabulary. ``eval_seq_length`` overrides
    the run's (it is still cut to the run's ``max_seq_length``). ``with_transformers`` also
    scores the same weights with transformers' ``BertForPreTraining`` (``result["transformers"]``):
    a check of the figures from outside this package's model code.
    """
    cfg = PretrainConfig.load(path)
    if eval_seq_length is not None:
        cfg = cfg.replace(eval_seq_length=eval_seq_length)
    model, tokenizer = load_checkpoint(path, device)
    docs = load_text_files(cfg.text_files, documents=cfg.documents) if cfg.text_files else stdlib_corpus()  # fmt: skip
    train_corpus, heldout = split_heldout(tokenize_documents(docs, tokenizer), cfg)
    batches = heldout_batches(heldout, cfg)
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


def _prepare(cfg: PretrainConfig, dist: Dist) -> tuple[Session, TokenizedCorpus, dict]:
    """Data, model and optimizer of a run (the schedule comes later: it may need a timing)."""
    out_dir = Path(cfg.output_dir)
    if dist.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
    # Data: rank 0 builds the cache, the others then read it.
    kwargs = dict(text_files=cfg.text_files, documents=cfg.documents, cache_dir=cfg.cache_dir)
    if dist.is_main:
        corpus, tokenizer = load_corpus(cfg.tokenizer, **kwargs)
    dist.barrier()
    if not dist.is_main:
        corpus, tokenizer = load_corpus(cfg.tokenizer, **kwargs)
    train_corpus, heldout = split_heldout(corpus, cfg)
    ev_batches = heldout_batches(heldout, cfg)
    torch.manual_seed(cfg.seed)
    model = BertForPreTraining(cfg.model_config(corpus.vocab)).to(dist.device)
    optimizer = AdamW(
        bert_param_groups(model, cfg.weight_decay),
        lr=cfg.lr,
        eps=cfg.adam_eps,
        bias_correction=cfg.bias_correction,
    )
    state: dict[str, Any] = {"step": 0, "epoch": 0, "batch_in_epoch": 0, "tokens": 0,
                             "train_seconds": 0.0, "history": {"train": [], "eval": []}}  # fmt: skip
    session = Session(cfg, dist, model, optimizer, None, tokenizer, corpus.vocab, ev_batches,
                      unigram_baseline(train_corpus, ev_batches), out_dir, state, train_corpus)  # fmt: skip
    return session, heldout, {"corpus": corpus}


def _report(
    s: Session,
    corpus: TokenizedCorpus,
    heldout: TokenizedCorpus,
    final: dict,
    run_total: BatchStats,
    step_seconds: float,
    peak: float | None,
    *,
    stop_reason: str,
    batches_per_epoch: int,
    wall_seconds: float,
) -> dict:
    """Write ``report.json`` (and the plots) and log the summary line; returns the report.

    ``tokens_per_second`` is over all training time of the run (evaluations included, as the
    earlier reports); ``mfu`` and ``model_flops_per_second`` over this invocation's steps only.
    """
    cfg, state, model = s.cfg, s.state, s.model
    flops_per_s = run_total.flops / max(step_seconds, 1e-9)
    report = {
        "config": dataclasses.asdict(cfg),
        "model_config": model.config.to_dict(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "stopped_by": stop_reason,
        "steps_done": state["step"],
        "epochs_done": state["epoch"] + state["batch_in_epoch"] / max(batches_per_epoch, 1),
        "tokens_seen": state["tokens"],
        "train_seconds": state["train_seconds"],
        "wall_seconds_this_run": wall_seconds,
        "tokens_per_second": state["tokens"] / max(state["train_seconds"], 1e-9),
        "padding_share": run_total.padding_share,
        "model_flops_per_second": flops_per_s,
        "matmul_peak_flops_per_second": peak,
        "mfu": flops_per_s / peak if peak else None,
        "world_size": s.dist.world_size,
        "device": str(s.dist.device),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "corpus": {
            "source": corpus.meta.get("source", "stdlib"),
            "tokenizer": cfg.tokenizer,
            "vocab_size": s.vocab.size,
            "train": s.train_corpus.stats(),
            "heldout": {
                **heldout.stats(),
                "seq_length": cfg.heldout_seq_length,
                "seed": HELDOUT_SEED,
            },
        },
        "unigram_baseline": s.baseline,
        "final_eval": final,
        "mlm_acc_over_baseline": final["mlm_acc"] / max(s.baseline["mlm_acc"], 1e-12),
        "history": state["history"],
    }
    (s.out_dir / "report.json").write_text(json.dumps(report, indent=2))
    if cfg.plots:
        report["plots"] = save_plots(report, s.out_dir)
    mfu_text = f", MFU {report['mfu']:.0%}" if peak else ""
    s.log(
        f"done: {state['step']} steps in {state['train_seconds']:.0f} s "
        f"({report['tokens_per_second']:,.0f} tokens/s{mfu_text}, "
        f"{report['padding_share']:.1%} padding); held-out MLM acc "
        f"{final['mlm_acc']:.3f} = {report['mlm_acc_over_baseline']:.2f}x the unigram "
        f"baseline {s.baseline['mlm_acc']:.3f}; NSP acc {final['nsp_acc']:.3f}. "
        f"Report: {s.out_dir / 'report.json'}"
    )
    return report


def _check_run(cfg: PretrainConfig, dist: Dist) -> None:
    if cfg.batch_size % dist.world_size:
        raise ValueError(
            f"batch_size {cfg.batch_size} (global) must be divisible by the number of "
            f"processes {dist.world_size}"
        )
    if cfg.packing and dist.enabled:
        raise ValueError("--packing runs in one process: it is not wired into DDP yet")
    if cfg.steps is None and cfg.max_minutes is None:
        raise ValueError("give --steps, or --max-minutes to fit the number of steps to the time")


def _resume(s: Session, path: str | Path) -> None:
    """Load model, optimizer, scheduler and position from a checkpoint of the same settings."""
    from safetensors.torch import load_model

    ckpt = _checkpoint_path(path)
    _check_resume(s.cfg, PretrainConfig.load(ckpt))
    load_model(s.model, str(ckpt / "model.safetensors"), device=str(s.dist.device))
    s.model.tie_weights()
    saved = torch.load(ckpt / "trainer_state.pt", map_location=s.dist.device, weights_only=False)
    s.optimizer.load_state_dict(saved.pop("optimizer"))
    s.scheduler.load_state_dict(saved.pop("scheduler"))
    s.state.update(saved)
    if s.state["step"] > s.cfg.steps:
        raise ValueError(f"the checkpoint is at step {s.state['step']}, beyond steps={s.cfg.steps}")


def _log_row(s: Session, window: BatchStats, seconds: float, lr: float, peak: float | None) -> dict:
    """One row of the training history (the sums since the last row), also shown on the bar."""
    m = window.metrics()
    row = {
        "step": s.state["step"],
        "lr": lr,
        **{k: m[k] for k in ("mlm_loss", "nsp_loss", "mlm_acc", "nsp_acc")},
        "loss": m["mlm_loss"] + m["nsp_loss"],
        "tokens_per_s": window.tokens / seconds,
        "mfu": window.flops / seconds / peak if peak else None,
    }
    s.state["history"]["train"].append(row)
    if s.bar is not None:
        s.bar.set_postfix(
            loss=f"{row['loss']:.3f}",
            mlm_acc=f"{row['mlm_acc']:.3f}",
            nsp_acc=f"{row['nsp_acc']:.3f}",
            lr=f"{lr:.1e}",
            tok_s=f"{row['tokens_per_s']:,.0f}",
            **({"mfu": f"{row['mfu']:.0%}"} if peak else {}),
            refresh=False,
        )
    return row


@dataclass
class LoopResult:
    """What the training loop of one invocation did (for the report)."""

    total: BatchStats  # this invocation's sums (tokens/s, padding, MFU)
    stop_reason: str  # "steps", "stop_after" or "max_minutes"
    batches_per_epoch: int
    step_seconds: float  # training time without the evaluations and checkpoints inside the loop


def _train_loop(
    s: Session, model: torch.nn.Module, peak: float | None, t_start: float
) -> LoopResult:
    """Train from ``s.state`` to ``cfg.steps`` (or until a stop), evaluating, logging and
    checkpointing on the way. ``model`` is the model to step: the DDP wrapper under torchrun."""
    cfg, state, dist = s.cfg, s.state, s.dist
    window, t_window = BatchStats(), time.perf_counter()  # sums since the last log line
    result = LoopResult(BatchStats(), "steps", 0, 0.0)
    steps_this_run, side_seconds = 0, 0.0  # side: evaluations and checkpoints inside the loop
    t_train, train_seconds_before = time.perf_counter(), state["train_seconds"]
    s.model.train()
    while state["step"] < cfg.steps:
        loader = s.loader()
        if state["batch_in_epoch"] == 0 and len(loader) == 0:
            raise ValueError(
                f"an epoch has fewer than {cfg.batch_size} sentence pairs: use a smaller "
                "--batch-size or more text"
            )
        result.batches_per_epoch = state["batch_in_epoch"] + len(loader)
        for batch in loader:
            lr = s.optimizer.param_groups[0]["lr"]  # the rate this step uses
            stats = train_step(model, batch, s.optimizer, s.scheduler, mask_id=s.vocab.mask_id,
                               dist=dist, seed=cfg.seed, step=state["step"],
                               grad_clip=cfg.grad_clip, bf16=cfg.bf16)  # fmt: skip
            state["step"] += 1
            state["batch_in_epoch"] += 1
            state["tokens"] += int(stats.tokens)
            steps_this_run += 1
            window, result.total = window + stats, result.total + stats
            if s.bar is not None:
                s.bar.update(1)
            if state["step"] % cfg.log_every == 0 or state["step"] == cfg.steps:
                seconds, t_window = time.perf_counter() - t_window, time.perf_counter()
                _log_row(s, window, seconds, lr, peak)
                window = BatchStats()
            state["train_seconds"] = train_seconds_before + time.perf_counter() - t_train
            t_side = time.perf_counter()
            if cfg.eval_every and state["step"] % cfg.eval_every == 0 and state["step"] < cfg.steps:
                s.evaluate()
            if cfg.checkpoint_every and state["step"] % cfg.checkpoint_every == 0:
                s.checkpoint()
            side_seconds += time.perf_counter() - t_side
            t_window += time.perf_counter() - t_side  # tokens/s and MFU count the steps only
            if s.time_fit is not None and state["step"] == cfg.warmup:
                cfg = refit_steps_to_time(s, (time.perf_counter() - t_train) / steps_this_run)
            if state["step"] >= cfg.steps:
                break
            if cfg.stop_after is not None and steps_this_run >= cfg.stop_after:
                result.stop_reason = "stop_after"
                break
            if cfg.max_minutes is not None:
                over = torch.tensor([float(time.perf_counter() - t_start > 60 * cfg.max_minutes)])
                if dist.all_reduce_sum(over).item() > 0:
                    result.stop_reason = "max_minutes"
                    break
        else:  # the epoch ran out
            state["epoch"] += 1
            state["batch_in_epoch"] = 0
        if result.stop_reason != "steps":
            break
    result.step_seconds = time.perf_counter() - t_train - side_seconds
    return result


def train(cfg: PretrainConfig) -> TrainResult:
    """:func:`run`, also returning the trained model and the tokenizer."""
    t_start = time.perf_counter()
    dist = setup_distributed(cfg.device)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    _check_run(cfg, dist)
    s, heldout, extra = _prepare(cfg, dist)
    model, n_params = s.model, sum(p.numel() for p in s.model.parameters())
    peak = cfg.peak_gflops * 1e9 if cfg.peak_gflops else None
    if peak is None and cfg.measure_peak:
        dtype = torch.bfloat16 if cfg.bf16 else torch.float32
        peak = matmul_peak((256, 512, 1024), 3, dtype=dtype, device=dist.device).flops_per_s
    s.log(
        f"{cfg.model} model ({n_params / 1e6:.2f}M parameters), train "
        f"{s.train_corpus.num_tokens:,} tokens in {len(s.train_corpus)} docs, held-out "
        f"{heldout.num_tokens:,} tokens ({sum(len(b['input_ids']) for b in s.ev_batches)} pairs of "
        f"<= {cfg.heldout_seq_length} tokens), "
        f"world size {dist.world_size}, device {dist.device}, {torch.get_num_threads()} threads"
        + (f", matmul peak {peak / 1e9:.0f} GFLOP/s" if peak else "")
    )

    first_eval: dict | None = None
    if cfg.steps is None:  # fit the schedule to the time given
        t0 = time.perf_counter()
        first_eval = evaluate(s.model, s.ev_batches, s.vocab.mask_id, dist.device, cfg.bf16)
        eval_seconds = time.perf_counter() - t0
        fit = fit_steps_to_time(s, cfg.max_minutes, t_start, eval_seconds)
        cfg = s.cfg = cfg.replace(steps=fit.steps)
        if cfg.warmup >= REFIT_MIN_STEPS:  # else too short a warm-up to time: the fit stands
            s.time_fit = fit
    s.scheduler = make_lr_scheduler(
        s.optimizer, cfg.schedule, warmup_steps=cfg.warmup, total_steps=cfg.steps
    )
    if cfg.resume:
        _resume(s, cfg.resume)
    ddp_model: torch.nn.Module = model
    if dist.enabled:
        from torch.nn.parallel import DistributedDataParallel as DDP

        ddp_model = DDP(model, device_ids=[dist.local_rank] if dist.device.type == "cuda" else None)
    if dist.is_main and cfg.progress:
        from tqdm.auto import tqdm

        s.bar = tqdm(total=cfg.steps, initial=s.state["step"], desc="pretrain", dynamic_ncols=True)
    if cfg.eval_every and s.state["step"] == 0:
        if first_eval is not None:  # already computed while fitting the schedule
            s.state["history"]["eval"].append({"step": 0, **first_eval})
        else:
            s.evaluate()  # the starting point of the held-out curves

    loop = _train_loop(s, ddp_model, peak, t_start)
    if s.bar is not None:
        s.bar.close()
    final = s.evaluate()
    s.checkpoint()
    report: dict = {}
    if dist.is_main:
        report = _report(s, extra["corpus"], heldout, final, loop.total, loop.step_seconds, peak,
                         stop_reason=loop.stop_reason, batches_per_epoch=loop.batches_per_epoch,
                         wall_seconds=time.perf_counter() - t_start)  # fmt: skip
    if dist.enabled:
        torch.distributed.barrier()
    return TrainResult(model, s.tokenizer, report)


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def _train_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bertcourse.pretrain",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = PretrainConfig()
    g = p.add_argument_group("model")
    g.add_argument("--model", choices=MODEL_SIZES, help=f"size preset (default {d.model})")
    g.add_argument("--layers", type=int, help="number of layers (overrides the preset)")
    g.add_argument("--hidden", type=int, help="hidden size")
    g.add_argument("--heads", type=int, help="attention heads")
    g.add_argument("--intermediate", type=int, help="feed-forward size")
    g.add_argument("--dropout", type=float, help=f"dropout (default {d.dropout}; BERT: 0.1)")
    g = p.add_argument_group("data")
    g.add_argument(
        "--tokenizer",
        help="'wordpiece-8192' (default: trained on the corpus, best for small models), any "
        "'wordpiece-N', or 'bert' (the bert-base-uncased vocabulary)",
    )
    g.add_argument("--text-files", nargs="+", help="your own .txt files or folders")
    g.add_argument("--documents", choices=["file", "block"], help="document unit of --text-files")
    g.add_argument("--max-seq-length", type=int, help=f"default {d.max_seq_length}")
    g.add_argument(
        "--packing",
        action="store_true",
        default=None,
        help="pack several pairs per row (no padding); --batch-size then counts rows",
    )
    g.add_argument(
        "--mlm-probability",
        type=float,
        help=f"share of tokens chosen for prediction in training (default {d.mlm_probability}; "
        "BERT: 0.15)",
    )
    g.add_argument(
        "--eval-seq-length",
        type=int,
        help=f"length of the held-out pairs, the same for every run (default {d.eval_seq_length})",
    )
    g.add_argument("--eval-examples", type=int, help="cap on held-out pairs")
    g = p.add_argument_group("optimisation")
    g.add_argument(
        "--steps",
        type=int,
        help=f"optimizer steps (default {d.steps}; with --max-minutes and no --steps, the "
        "steps that fit in the time, measured at the start)",
    )
    g.add_argument("--batch-size", type=int, help=f"global batch (default {d.batch_size})")
    g.add_argument("--lr", type=float, help=f"peak learning rate (default {d.lr})")
    g.add_argument("--warmup-steps", type=int, help="default: 10%% of --steps")
    g.add_argument("--schedule", choices=["linear", "polynomial"], help="default linear")
    g.add_argument("--weight-decay", type=float, help=f"default {d.weight_decay}")
    g.add_argument("--seed", type=int, help=f"default {d.seed}")
    a = p.add_argument_group("running").add_argument
    a("--output", dest="output_dir", help=f"output folder (default {d.output_dir})")
    a("--resume", help="continue from this output/checkpoint folder (its settings are reused)")
    a("--eval-every", type=int, help=f"held-out evaluation every N steps (default {d.eval_every})")
    a("--checkpoint-every", type=int, help=f"default {d.checkpoint_every}")
    a("--log-every", type=int, help=f"default {d.log_every}")
    a("--stop-after", type=int, help="stop after N steps of this run (resume later)")
    a("--max-minutes", type=float, help="stop after this many minutes (then evaluate, save)")
    a("--threads", type=int, help="torch threads per process")
    a("--peak-gflops", type=float, help="matmul peak for MFU (default: measured at the start)")
    a("--no-peak", dest="measure_peak", action="store_false", default=None, help="no MFU")
    a("--device", choices=["auto", "cpu", "cuda"], help="default auto")
    a("--bf16", action="store_true", default=None, help="bf16 autocast (GPU; CPU: AMX only)")
    a("--num-workers", type=int, help="DataLoader workers (default 0)")
    a("--no-progress", dest="progress", action="store_false", default=None, help="no tqdm bar")
    a("--no-plots", dest="plots", action="store_false", default=None, help="no PNG plots")
    return p


def _fill_mask_main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(
        prog="python -m bertcourse.pretrain fill-mask",
        description="Print a trained model's top predictions for each [MASK] in a sentence.",
    )
    p.add_argument("--checkpoint", required=True, help="output or checkpoint folder of a run")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("text", nargs="+", help='e.g. "return the [MASK] of the list."')
    args = p.parse_args(argv)
    model, tokenizer = load_checkpoint(args.checkpoint)
    for text in args.text:
        print(text)
        for i, preds in enumerate(fill_mask(model, tokenizer, text, args.top_k)):
            shown = "  ".join(f"{tok} {p:.3f}" for tok, p in preds)
            print(f"  [MASK] {i + 1}: {shown}")


def _evaluate_main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(
        prog="python -m bertcourse.pretrain evaluate",
        description="Held-out metrics of saved runs, on the set their training reported.",
    )
    p.add_argument("checkpoints", nargs="+", help="output or checkpoint folders of runs")
    p.add_argument("--eval-seq-length", type=int, help="held-out pair length (default: the run's)")
    p.add_argument(
        "--transformers",
        action="store_true",
        help="also score the weights with transformers' BertForPreTraining (a check from outside)",
    )
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args(argv)
    results = {}
    for path in args.checkpoints:
        r = results[path] = evaluate_checkpoint(
            path, eval_seq_length=args.eval_seq_length, with_transformers=args.transformers
        )
        print(
            f"{path}: MLM acc {r['mlm_acc']:.3f} ([MASK] only {r['mlm_acc_at_mask']:.3f}; "
            f"unigram {r['unigram_baseline']['mlm_acc']:.3f}), MLM loss {r['mlm_loss']:.3f}, "
            f"NSP acc {r['nsp_acc']:.3f} ({r['n_predictions']} predictions, {r['n_pairs']} "
            f"pairs of <= {r['seq_length']} tokens)"
        )
        if args.transformers:
            t = r["transformers"]
            print(
                f"  transformers' BertForPreTraining, same weights: MLM acc {t['mlm_acc']:.3f} "
                f"([MASK] only {t['mlm_acc_at_mask']:.3f}), NSP acc {t['nsp_acc']:.3f}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


def main(argv: list[str] | None = None) -> dict | None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "fill-mask":
        _fill_mask_main(argv[1:])
        return None
    if argv and argv[0] == "evaluate":
        _evaluate_main(argv[1:])
        return None
    if argv and argv[0] == "train":
        argv = argv[1:]
    args = vars(_train_parser().parse_args(argv))
    given = {k: v for k, v in args.items() if v is not None}
    base = PretrainConfig()
    if given.get("resume"):
        # The saved settings, except the per-invocation limits.
        base = PretrainConfig.load(given["resume"]).replace(stop_after=None, max_minutes=None)
    cfg = base.replace(**given)
    if not given.get("resume"):
        cfg = cfg.replace(resume=None)
        if "max_minutes" in given and "steps" not in given:
            cfg = cfg.replace(steps=None)  # the schedule fits itself to the time given
    report = run(cfg)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return report


if __name__ == "__main__":
    main()
