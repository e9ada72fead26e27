"""Pretrain a small BERT on your laptop, offline: MLM + NSP on the standard library's docs.

Command line (``python -m bertcourse.pretrain --help`` lists every option)::

    python -m bertcourse.pretrain --model tiny --steps 2000 --output runs/tiny
    python -m bertcourse.pretrain --model tiny --max-minutes 10   # the schedule runs on 10 minutes
    python -m bertcourse.pretrain --resume runs/tiny --steps 3000        # continue, exactly
    python -m bertcourse.pretrain fill-mask --checkpoint runs/tiny "return the [MASK] of x."
    python -m bertcourse.pretrain evaluate runs/tiny runs/other   # the held-out figures again

Python (what the book's chapter 7 calls)::

    from bertcourse.pretrain import PretrainConfig, run, fill_mask, load_checkpoint
    report = run(PretrainConfig(model="tiny", steps=300, output_dir="runs/demo"))
    model, tokenizer = load_checkpoint("runs/demo")
    fill_mask(model, tokenizer, "the [MASK] of a list is its number of items.")  # Predictions

Where the parts live: this file holds the run (one training step, the loop, the time budget,
the report); :mod:`bertcourse.pretraining` the settings, checkpoints, evaluation and the
command line; :mod:`bertcourse.distributed` the process group; :mod:`bertcourse.fillmask` the
one ``fill_mask``; :mod:`bertcourse.viz.training` the figures.

What one run does:

1. Data: the offline corpus of the language (``--lang``, :mod:`bertcourse.languages`; ``en``,
   the only one so far: :mod:`bertcourse.corpus`) or ``--text-files``, tokenized with
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

A time budget: ``--max-minutes M`` without ``--steps`` runs the learning-rate schedule on the
share of the training time spent instead of on steps (:class:`TimeBudget`,
:class:`bertcourse.optim.FractionLR`): warm-up over the first 10% of the training time, linear
decay to 0 at its end, whatever the machine's speed or its changes. The M minutes count from the
process's start (the command line) and hold the set-up, the training and the end (the final
evaluation, timed on two of its batches at the start, the checkpoint and the figures, each
timed at the start; no evaluation at step 0); the loop stops when its next step would end more
than half a step past its share. At the end of warm-up it says how many steps the budget
will give at the pace measured so far, and warns when they are fewer than
``MIN_STEPS_TO_LEARN`` (1,500), naming the minutes that would give that many. The rate of each
step followed the clock, so such a run is not repeated step for step; ``--steps N`` runs a
schedule of the same length on steps. ``--max-minutes`` with ``--steps`` only stops the run.

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

import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor

from bertcourse.distributed import Dist, setup_distributed
from bertcourse.fillmask import fill_mask  # noqa: F401 - the one fill_mask, for the CLI and book
from bertcourse.flops import matmul_peak
from bertcourse.loaders import mix_seed, pretraining_dataloader
from bertcourse.model import BertForPreTraining
from bertcourse.optim import AdamW, bert_param_groups, make_lr_scheduler
from bertcourse.pretraining.checkpoint import load_checkpoint, resume, save_checkpoint  # noqa: F401
from bertcourse.pretraining.config import (  # noqa: F401
    CHECKPOINT_DIR,
    HELDOUT_SEED,
    MODEL_SIZES,
    PretrainConfig,
)
from bertcourse.pretraining.evaluation import (  # noqa: F401
    BatchStats,
    evaluate,
    evaluate_checkpoint,
    forward_losses,
    heldout_batches,
    split_heldout,
    unigram_baseline,
)
from bertcourse.textdata import TokenizedCorpus, load_corpus
from bertcourse.vocab import Vocab


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
    sentence_loss: bool = True,
) -> BatchStats:
    """One optimizer step on one batch (``model`` may be the DDP wrapper); returns the batch's
    statistics summed over all processes. ``sentence_loss=False`` (``--sentence-task none``):
    the MLM loss alone (the NSP head's figures are still measured, not learned)."""
    batch = {k: v.to(dist.device, non_blocking=True) for k, v in batch.items()}
    # Dropout noise of this step depends only on (seed, step, rank): exact resume.
    torch.manual_seed(mix_seed(seed, step, dist.rank, 3))
    with torch.autocast(dist.device.type, dtype=torch.bfloat16, enabled=bf16):
        mlm_sum, nsp_loss, stats = forward_losses(model, batch, mask_id)
    stats = dist.all_reduce_sum(stats).cpu()
    # Mean over the masked tokens of the GLOBAL batch. DDP averages gradients over the
    # W processes, hence the factor W: sum_r W * sum_r / (W * N) = global mean.
    n_global = stats[0].item()
    mlm_loss = mlm_sum * (dist.world_size / n_global) if n_global else mlm_sum * 0.0
    loss = mlm_loss + nsp_loss if sentence_loss else mlm_loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    scheduler.step()
    return BatchStats.from_tensor(stats)


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
            whole_word_mask=cfg.whole_word_mask,
            mask_split=cfg.mask_split,
            task=cfg.sentence_task,
            static_masking=cfg.static_masking,
        )


WARMUP_SHARE = 0.1
"""Warm-up is this share of a run: 10% of ``--steps`` (unless ``--warmup-steps``), or 10% of
the training time of a ``--max-minutes`` budget."""
TIMED_EVAL_BATCHES = 2
"""A time budget times this many held-out batches at the start and scales to all of them."""
FINAL_EVAL_MARGIN = 1.25
"""The final evaluation is reserved this many times the first one's measured time (a busy
machine's speed drifts by tens of percent within minutes)."""


@dataclass
class TimeBudget:
    """``--max-minutes`` without ``--steps``: the learning-rate schedule runs on the share of
    the training time spent, so that it is complete when the time is, at any speed.

    ``seconds`` is the training loop's share of the budget: the minutes given, less the set-up
    already spent (from the process's start) and what the end needs (the final evaluation,
    checkpoint and figures, measured or reserved). ``spent`` counts the loop's seconds so far,
    evaluations and checkpoints inside it included. Both are kept in ``state["time_budget"]``,
    saved with every checkpoint, so a resumed run continues the schedule where it stopped.
    """

    seconds: float
    minutes: float  # the whole budget, --max-minutes
    spent: float = 0.0

    def fraction(self) -> float:
        return min(1.0, self.spent / self.seconds)

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def _time_budget(s: Session) -> TimeBudget | None:
    saved = s.state.get("time_budget")
    return None if saved is None else TimeBudget(**saved)


def make_time_scheduler(s: Session) -> Any:
    """The :class:`bertcourse.optim.FractionLR` of a time budget: its progress is read from
    ``s.state["time_budget"]`` (so a resume, which replaces the state, carries it on)."""
    from bertcourse.optim import FractionLR

    def progress() -> float:
        budget = _time_budget(s)
        return budget.fraction() if budget is not None else 0.0

    return FractionLR(s.optimizer, progress, schedule=s.cfg.schedule, warmup_share=WARMUP_SHARE)


def _rehearse_plots(s: Session, clock: Callable[[], float]) -> float:
    """Seconds to draw and save the report's figures, measured by drawing them once on a
    stand-in report of the same shape (on a busy 2-core machine: 10 s, not 1)."""
    import tempfile

    train_row = {"step": 0, "lr": 0.0, "mlm_loss": 1.0, "nsp_loss": 1.0, "mlm_acc": 0.0, "nsp_acc": 0.5}  # fmt: skip
    eval_row = {**train_row, "mlm_acc_at_mask": 0.0}
    stand_in = {"history": {"train": [train_row] * 2, "eval": [eval_row] * 2},
                "unigram_baseline": s.baseline, "config": {"schedule": s.cfg.schedule}}  # fmt: skip
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401 - imported once, before the timing (set-up's time)

    import bertcourse.viz.training  # noqa: F401

    t0 = clock()
    with tempfile.TemporaryDirectory() as folder:
        save_plots(stand_in, Path(folder))
    return clock() - t0


def plan_time_budget(
    s: Session, minutes: float, t_start: float, eval_seconds: float, clock: Callable[[], float]
) -> TimeBudget:
    """The loop's seconds out of ``minutes`` counted from ``t_start``: what is left after the
    set-up, less the end's reserve (the final evaluation at ``FINAL_EVAL_MARGIN`` times
    ``eval_seconds``, a checkpoint, timed here by writing the first one, and the figures,
    timed by drawing them once on a stand-in report)."""
    t0 = clock()
    s.checkpoint()  # the step-0 checkpoint: also the cost of the final one, measured
    end_seconds = FINAL_EVAL_MARGIN * eval_seconds + (clock() - t0)
    if s.cfg.plots and s.dist.is_main:
        end_seconds += _rehearse_plots(s, clock)  # a first drawing: slower than the final one
    left = 60.0 * minutes - (clock() - t_start) - end_seconds
    if left <= 0:
        raise ValueError(
            f"--max-minutes {minutes:g} leaves no time to train: the set-up took "
            f"{clock() - t_start:.0f} s and the end needs {end_seconds:.0f} s; give more minutes"
        )
    s.log(
        f"time budget {minutes:g} min: {clock() - t_start:.0f} s of set-up, {left:.0f} s of "
        f"training (warm-up over the first {WARMUP_SHARE:.0%}, then decay to 0 at the end), "
        f"{end_seconds:.0f} s kept for the final evaluation, checkpoint and figures"
    )
    return TimeBudget(left, minutes)


# Fewer steps than this learn little beyond the unigram baseline. The measured learning curve
# of the tiny model on pairs of 64 tokens (benchmarks/RESULTS.md): a 1,500-step schedule ends
# at 1.55x the unigram baseline at [MASK] (2.64x over all chosen positions), the default
# ten-minute run (~8,400 steps) at 4x; chapter 7's 400-step run stays below the baseline at
# [MASK], and 60 steps of the default recipe end below it over all positions (0.89x).
MIN_STEPS_TO_LEARN = 1500


def _steps(n: int) -> str:
    return f"{n:,} step" + ("" if n == 1 else "s")


def too_few_steps_warning(steps: int, seconds_per_step: float, fixed_seconds: float) -> str | None:
    """A warning when a time budget gives fewer than :data:`MIN_STEPS_TO_LEARN` steps,
    saying how many minutes would give that many at ``seconds_per_step`` (``fixed_seconds``:
    what the run spends besides its steps: start-up, final evaluation, checkpoint, figures)."""
    if steps >= MIN_STEPS_TO_LEARN:
        return None
    need = (fixed_seconds + MIN_STEPS_TO_LEARN * seconds_per_step) / 60
    return (
        f"WARNING: {_steps(steps)} {'is' if steps == 1 else 'are'} too few to learn: the model "
        f"will stay near the unigram baseline (always the most frequent token). Learning needs "
        f"about {_steps(MIN_STEPS_TO_LEARN)} (benchmarks/RESULTS.md): at "
        f"{seconds_per_step * 1e3:.0f} ms per step, give --max-minutes {math.ceil(need)} or "
        f"more, or a smaller model or batch."
    )


def _warn_if_too_few(s: Session, budget: TimeBudget, steps_done: int) -> None:
    """At the end of warm-up (hundreds of steps timed, evaluations included): the steps the
    whole budget will give at this pace, and a warning when they are too few."""
    per_step = budget.spent / max(steps_done, 1)
    projected = int(budget.seconds / per_step)
    s.log(
        f"end of warm-up: {per_step * 1e3:.0f} ms per step over {_steps(steps_done)} -> about "
        f"{_steps(projected)} in the {budget.seconds:.0f} s of training"
    )
    warning = too_few_steps_warning(projected, per_step, 60.0 * budget.minutes - budget.seconds)
    if warning:
        s.log(warning)


def run(cfg: PretrainConfig, *, clock: Callable[[], float] = time.perf_counter, started_at: float | None = None) -> dict:  # fmt: skip
    """Pretrain (or resume) and return the report (also written to ``output_dir/report.json``).

    Works in one process or under torchrun (see the module docstring). The report holds the
    final held-out metrics (``report["final_eval"]``), the unigram baseline
    (``report["unigram_baseline"]``), their ratio, timings, corpus sizes and the history.
    ``clock`` and ``started_at``: see :func:`train`.
    """
    return train(cfg, clock=clock, started_at=started_at).report


def _prepare(cfg: PretrainConfig, dist: Dist) -> tuple[Session, TokenizedCorpus, dict]:
    """Data, model and optimizer of a run (the schedule comes later: it may need a timing)."""
    out_dir = Path(cfg.output_dir)
    if dist.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
    # Data: rank 0 builds the cache, the others then read it.
    kwargs = dict(lang=cfg.lang, text_files=cfg.text_files, documents=cfg.documents,
                  cache_dir=cfg.cache_dir)  # fmt: skip
    if dist.is_main:
        corpus, tokenizer = load_corpus(cfg.tokenizer, **kwargs)
    dist.barrier()
    if not dist.is_main:
        corpus, tokenizer = load_corpus(cfg.tokenizer, **kwargs)
    if cfg.whole_word_mask and cfg.word_source == "jieba":
        from bertcourse.zh import with_jieba_words

        corpus = with_jieba_words(corpus, tokenizer)
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
        "time_budget": state.get("time_budget"),  # --max-minutes alone: seconds, spent
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
            "lang": cfg.lang,
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


def save_plots(report: dict, out_dir: Path) -> list[str]:
    """``curves.png`` (MLM/NSP loss and accuracy, train and held-out) and ``lr.png``, drawn by
    :mod:`bertcourse.viz.training`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bertcourse.viz.training import plot_lr_schedule, plot_pretraining_curves

    names = []
    for name, plot in (("curves.png", plot_pretraining_curves), ("lr.png", plot_lr_schedule)):
        fig = plot(report)
        fig.savefig(out_dir / name, dpi=100)
        plt.close(fig)
        names.append(name)
    return names


def _check_run(cfg: PretrainConfig, dist: Dist) -> None:
    if cfg.batch_size % dist.world_size:
        raise ValueError(
            f"batch_size {cfg.batch_size} (global) must be divisible by the number of "
            f"processes {dist.world_size}"
        )
    if cfg.packing and dist.enabled:
        raise ValueError("--packing runs in one process: it is not wired into DDP yet")
    if cfg.steps is None and cfg.max_minutes is None and not cfg.resume:
        raise ValueError("give --steps, or --max-minutes to run the schedule on the time")
    if cfg.steps is None and cfg.warmup_steps is not None:
        raise ValueError(
            "--warmup-steps needs --steps: with --max-minutes alone the warm-up is the first "
            f"{WARMUP_SHARE:.0%} of the training time"
        )


def _resume(s: Session, path: str | Path) -> None:
    """Continue from a checkpoint of the same settings: weights, optimizer, schedule, position
    (and a time budget's seconds spent: its schedule goes on where it stopped)."""
    on_time = PretrainConfig.load(path).steps is None
    if on_time != (s.cfg.steps is None):
        raise ValueError(
            "cannot resume: the checkpoint's schedule runs on "
            + ("the time of --max-minutes; resume it without --steps" if on_time
               else "steps; give --steps (the command line reuses the saved ones)")
        )  # fmt: skip
    saved = resume(path, s.cfg, s.model, s.optimizer, s.scheduler, s.dist.device)
    s.state.update(saved)


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
    stop_reason: str  # "steps", "time_budget" (its schedule complete), "stop_after", "max_minutes"
    batches_per_epoch: int
    step_seconds: float  # training time without the evaluations and checkpoints inside the loop


def _same_everywhere(dist: Dist, seconds: float) -> float:
    """The processes' mean of ``seconds``: one clock for the schedule of every process."""
    if not dist.enabled:
        return seconds
    return dist.all_reduce_sum(torch.tensor([seconds], dtype=torch.float64)).item() / dist.world_size  # fmt: skip


def _train_loop(
    s: Session, model: torch.nn.Module, peak: float | None, t_start: float,
    clock: Callable[[], float],
) -> LoopResult:  # fmt: skip
    """Train from ``s.state`` to ``cfg.steps``, or to the end of the time budget, or until a
    stop, evaluating, logging and checkpointing on the way. ``model`` is the model to step:
    the DDP wrapper under torchrun.

    A time budget (:class:`TimeBudget`) adds each iteration's seconds to its ``spent`` (one
    figure for all processes), sets the next step's rate from the fraction spent, and stops
    when the next step, as long as this one, would end more than half a step past the budget
    (the training then ends within half a step of its share, early or late)."""
    cfg, state, dist = s.cfg, s.state, s.dist
    total_steps = cfg.steps if cfg.steps is not None else math.inf  # a time budget: no count
    window, t_window = BatchStats(), clock()  # sums since the last log line
    result = LoopResult(BatchStats(), "steps", 0, 0.0)
    steps_this_run, side_seconds = 0, 0.0  # side: evaluations and checkpoints inside the loop
    t_train, train_seconds_before = clock(), state["train_seconds"]
    budget = _time_budget(s)
    warned = budget is None or budget.fraction() >= WARMUP_SHARE
    t_last = clock()
    s.model.train()
    while state["step"] < total_steps:
        loader = s.loader()
        if state["batch_in_epoch"] == 0 and len(loader) == 0:
            raise ValueError(
                f"an epoch has fewer than {cfg.batch_size} sentence pairs: use a smaller "
                "--batch-size or more text"
            )
        result.batches_per_epoch = state["batch_in_epoch"] + len(loader)
        for batch in loader:
            lr = s.optimizer.param_groups[0]["lr"]  # the rate this step uses
            t_step = clock()
            stats = train_step(model, batch, s.optimizer, s.scheduler, mask_id=s.vocab.mask_id,
                               dist=dist, seed=cfg.seed, step=state["step"],
                               grad_clip=cfg.grad_clip, bf16=cfg.bf16,
                               sentence_loss=cfg.sentence_task != "none")  # fmt: skip
            this_step = clock() - t_step
            state["step"] += 1
            state["batch_in_epoch"] += 1
            state["tokens"] += int(stats.tokens)
            steps_this_run += 1
            window, result.total = window + stats, result.total + stats
            if s.bar is not None:
                s.bar.update(1)
            if state["step"] % cfg.log_every == 0 or state["step"] == total_steps:
                seconds, t_window = clock() - t_window, clock()
                _log_row(s, window, seconds, lr, peak)
                window = BatchStats()
            state["train_seconds"] = train_seconds_before + clock() - t_train
            t_side = clock()
            if cfg.eval_every and state["step"] % cfg.eval_every == 0 and state["step"] < total_steps:  # fmt: skip
                s.evaluate()
            if cfg.checkpoint_every and state["step"] % cfg.checkpoint_every == 0:
                s.checkpoint()
            side_seconds += clock() - t_side
            t_window += clock() - t_side  # tokens/s and MFU count the steps only
            if budget is not None:
                now = clock()
                budget.spent += _same_everywhere(dist, now - t_last)
                t_last = now
                state["time_budget"] = budget.as_dict()
                s.scheduler.step()  # the next step's rate, from the time spent
                if not warned and budget.fraction() >= WARMUP_SHARE:
                    _warn_if_too_few(s, budget, state["step"])
                    warned = True
                # stop when the next step would end more than half a step past the budget:
                # the training ends within half a step of it, early or late
                over = budget.spent + 0.5 * _same_everywhere(dist, this_step) > budget.seconds
                if dist.any(over):
                    result.stop_reason = "time_budget"
                    break
            if state["step"] >= total_steps:
                break
            if cfg.stop_after is not None and steps_this_run >= cfg.stop_after:
                result.stop_reason = "stop_after"
                break
            if cfg.max_minutes is not None:
                if dist.any(clock() - t_start > 60 * cfg.max_minutes):
                    result.stop_reason = "max_minutes"
                    break
        else:  # the epoch ran out
            state["epoch"] += 1
            state["batch_in_epoch"] = 0
        if result.stop_reason != "steps":
            break
    result.step_seconds = clock() - t_train - side_seconds
    return result


def _schedule(s: Session, clock: Callable[[], float], t_start: float) -> None:
    """Give ``s`` its learning-rate schedule (and resume it): over ``--steps``, or over the
    time of ``--max-minutes`` (:class:`TimeBudget`), whose plan times the final evaluation on
    ``TIMED_EVAL_BATCHES`` of its batches after a first one (allocations, kernel choice)."""
    cfg = s.cfg
    if cfg.steps is not None:
        s.scheduler = make_lr_scheduler(
            s.optimizer, cfg.schedule, warmup_steps=cfg.warmup, total_steps=cfg.steps
        )
        if cfg.resume:
            _resume(s, cfg.resume)
        return
    s.scheduler = make_time_scheduler(s)
    if cfg.resume:
        _resume(s, cfg.resume)
        s.scheduler.step()  # the rate at the saved share of the time (idempotent)
        return
    evaluate(s.model, s.ev_batches[:1], s.vocab.mask_id, s.dist.device, cfg.bf16)  # warm-up
    timed = s.ev_batches[1 : 1 + TIMED_EVAL_BATCHES] or s.ev_batches[:1]
    t0 = clock()
    evaluate(s.model, timed, s.vocab.mask_id, s.dist.device, cfg.bf16)
    eval_seconds = (clock() - t0) * len(s.ev_batches) / len(timed)
    s.state["time_budget"] = TimeBudget(
        60.0 * cfg.max_minutes, cfg.max_minutes
    ).as_dict()  # for the step-0 save
    budget = plan_time_budget(s, cfg.max_minutes, t_start, eval_seconds, clock)
    s.state["time_budget"] = budget.as_dict()
    s.scheduler.step()


def train(
    cfg: PretrainConfig,
    *,
    clock: Callable[[], float] = time.perf_counter,
    started_at: float | None = None,
) -> TrainResult:
    """:func:`run`, also returning the trained model and the tokenizer.

    ``clock`` is the time source of the time budget, the stops and the speed figures (a test
    passes a fake one); ``started_at`` its reading when the run began (the command line passes
    the process's start, so that ``--max-minutes`` counts Python's start-up and imports too);
    by default the time of this call.
    """
    t_start = clock() if started_at is None else started_at
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
    _schedule(s, clock, t_start)
    ddp_model: torch.nn.Module = model
    if dist.enabled:
        from torch.nn.parallel import DistributedDataParallel as DDP

        ddp_model = DDP(model, device_ids=[dist.local_rank] if dist.device.type == "cuda" else None)
    if dist.is_main and cfg.progress:
        from tqdm.auto import tqdm

        s.bar = tqdm(total=cfg.steps, initial=s.state["step"], desc="pretrain", dynamic_ncols=True)
    # the starting point of the held-out curves; a time budget's minutes go to training
    # instead (its curves start at the first periodic evaluation)
    if cfg.eval_every and s.state["step"] == 0 and cfg.steps is not None:
        s.evaluate()

    loop = _train_loop(s, ddp_model, peak, t_start, clock)
    if s.bar is not None:
        s.bar.close()
    if loop.stop_reason == "time_budget":
        s.log(
            f"time budget used: {_steps(s.state['step'])}, the schedule complete (the rate of "
            f"each step followed the clock; --steps {s.state['step']} runs a schedule of the "
            "same length on steps)"
        )
    final = s.evaluate()
    s.checkpoint()
    report: dict = {}
    if dist.is_main:
        report = _report(s, extra["corpus"], heldout, final, loop.total, loop.step_seconds, peak,
                         stop_reason=loop.stop_reason, batches_per_epoch=loop.batches_per_epoch,
                         wall_seconds=clock() - t_start)  # fmt: skip
    if dist.enabled:
        torch.distributed.barrier()
    return TrainResult(model, s.tokenizer, report)


def main(argv: list[str] | None = None) -> dict | None:
    """The command line (:mod:`bertcourse.pretraining.cli`)."""
    from bertcourse.pretraining.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    main()
    # Everything is written and closed; skip the interpreter's teardown of torch and
    # matplotlib, which took 11 s on a 2-core machine at load 14 (0.5 s idle): part of the
    # --max-minutes a learner sees.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
