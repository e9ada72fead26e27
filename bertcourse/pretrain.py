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

A time budget: ``--max-minutes M`` without ``--steps`` times a few real steps (then undoes
them), and sets the steps so that training, the evaluations and the final checkpoint fit in M
minutes; warm-up and decay are then 10% and 90% of those steps. When the time allows fewer
than ``MIN_STEPS_TO_LEARN`` (1,500) steps, it warns and says how many minutes would do. At the end of warm-up, where
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

import dataclasses
import json
import math
import sys
import time
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
            whole_word_mask=cfg.whole_word_mask,
            mask_split=cfg.mask_split,
            task=cfg.sentence_task,
            static_masking=cfg.static_masking,
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
        if s.dist.any(len(times) >= 3 and time.perf_counter() - t_start > 0.1 * budget):
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
    steps = s.dist.mean_int(max(1, int(0.97 * left / per_step)))  # the same N everywhere
    s.log(
        f"schedule fitted to {minutes:g} min: {step_seconds * 1e3:.0f} ms per step (median of "
        f"{len(times)}), evaluation {eval_seconds:.1f} s -> {_steps(steps)}"
    )
    warning = too_few_steps_warning(steps, per_step / 0.97, budget - left)
    if warning:
        s.log(warning)
    return TimeFit(steps, minutes, t_start, eval_seconds + ckpt_seconds)


REFIT_MIN_STEPS = 20  # a warm-up shorter than this is too short to time: no refit

# Fewer steps than this learn little beyond the unigram baseline. The measured learning curve
# of the tiny model on pairs of 64 tokens (benchmarks/RESULTS.md): a 1,500-step schedule ends
# at 1.55x the unigram baseline at [MASK] (2.64x over all chosen positions), the default
# ten-minute run (~8,400 steps) at 4x; chapter 7's 400-step run stays below the baseline at
# [MASK], and 60 steps of the default recipe end below it over all positions (0.89x).
MIN_STEPS_TO_LEARN = 1500


def _steps(n: int) -> str:
    return f"{n:,} step" + ("" if n == 1 else "s")


def too_few_steps_warning(steps: int, seconds_per_step: float, fixed_seconds: float) -> str | None:
    """A warning when a time-fitted schedule has fewer than :data:`MIN_STEPS_TO_LEARN` steps,
    saying how many minutes would give that many at ``seconds_per_step`` (``fixed_seconds``:
    what the run spends besides its steps: start-up, timing, final evaluation and checkpoint)."""
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
    more_steps = s.dist.mean_int(max(1, int(0.99 * left / seconds_per_step)))  # same everywhere
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
    besides_steps = time.perf_counter() - fit.t_start - step * seconds_per_step + fit.final_seconds
    warning = too_few_steps_warning(cfg.steps, seconds_per_step / 0.99, besides_steps)
    if warning and fit.steps >= MIN_STEPS_TO_LEARN:  # else already said at the first fit
        s.log(warning)
    return cfg


def run(cfg: PretrainConfig) -> dict:
    """Pretrain (or resume) and return the report (also written to ``output_dir/report.json``).

    Works in one process or under torchrun (see the module docstring). The report holds the
    final held-out metrics (``report["final_eval"]``), the unigram baseline
    (``report["unigram_baseline"]``), their ratio, timings, corpus sizes and the history.
    """
    return train(cfg).report


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
    if cfg.steps is None and cfg.max_minutes is None:
        raise ValueError("give --steps, or --max-minutes to fit the number of steps to the time")


def _resume(s: Session, path: str | Path) -> None:
    """Continue from a checkpoint of the same settings: weights, optimizer, schedule, position."""
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
                               grad_clip=cfg.grad_clip, bf16=cfg.bf16,
                               sentence_loss=cfg.sentence_task != "none")  # fmt: skip
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
                if dist.any(time.perf_counter() - t_start > 60 * cfg.max_minutes):
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
        if cfg.warmup_steps is not None and fit.steps <= cfg.warmup_steps:
            raise ValueError(
                f"{cfg.max_minutes:g} minutes fit only {_steps(fit.steps)} on this machine, not "
                f"more than --warmup-steps {cfg.warmup_steps}: give more --max-minutes, or "
                "leave --warmup-steps out (10% of the fitted steps)"
            )
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


def main(argv: list[str] | None = None) -> dict | None:
    """The command line (:mod:`bertcourse.pretraining.cli`)."""
    from bertcourse.pretraining.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    main()
