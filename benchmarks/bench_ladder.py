"""The speed ladder of the appendix "Making BERT fast on a CPU": one rung per idea, each rung
keeping the ideas of the rungs before it, from a naive pretraining step to today's.

Every rung trains the same model (same initial weights) on the same real pretraining batches
of ``python -m bertcourse.pretrain`` (the standard-library corpus, NSP pairs, MLM masks);
only the way the step is computed changes:

0. naive: eager attention (an explicit softmax), the MLM head on all B x L positions (the
   (B, L, V) logits of transformers' ``BertForPreTraining``), bertcourse's readable AdamW (a
   Python loop over the parameters), 1 thread;
1. gather the labelled positions before the vocabulary projection (~15% of the rows);
2. PyTorch's fused attention, ``F.scaled_dot_product_attention`` (SDPA);
3. ``torch.optim.AdamW(fused=True)``: one kernel for all parameters;
4. packing: several pairs per row, no padding (:mod:`bertcourse.packing`);
5. two threads.

A step = forward with both losses, backward, gradient clipping, optimizer step. The rungs are
timed interleaved (one step of each rung per round, the order reversed every round), so that
load on a shared machine hits all rungs alike; the table gives the median step. tokens/s counts
real tokens (padding excluded); MFU = model FLOPs (:func:`bertcourse.flops.bert_flops`, the
same count for every rung: what BERT needs, so extra work is not credited) per second over the
fp32 matmul peak measured at the start of the run with the rung's thread count.

    python benchmarks/bench_ladder.py                                   # tiny, ~3 min
    python benchmarks/bench_ladder.py --model mini --repeats 15 --out benchmarks/results/ladder_mini.json
    python benchmarks/bench_ladder.py --out benchmarks/figures/ladder.json   # what the book shows
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from bertcourse import BertForPreTraining
from bertcourse.config import IGNORE_INDEX
from bertcourse.data import load_corpus, pretraining_dataloader
from bertcourse.flops import bert_flops, matmul_peak
from bertcourse.optim import AdamW, bert_param_groups
from bertcourse.packing import packed_forward
from bertcourse.pretrain import PretrainConfig


@dataclass(frozen=True)
class Rung:
    name: str  # what this rung adds
    attention: str = "eager"  # "eager" or "sdpa"
    gather: bool = False  # MLM head at the labelled positions only
    optimizer: str = "loop"  # "loop" (bertcourse.optim.AdamW) or "fused" (torch)
    packing: bool = False
    threads: int = 1


RUNGS = (
    Rung("naive"),
    Rung("+ gather labelled positions", gather=True),
    Rung("+ SDPA attention", "sdpa", gather=True),
    Rung("+ fused AdamW", "sdpa", gather=True, optimizer="fused"),
    Rung("+ packing", "sdpa", gather=True, optimizer="fused", packing=True),
    Rung("+ 2 threads", "sdpa", gather=True, optimizer="fused", packing=True, threads=2),
)


@dataclass
class RungResult:
    rung: Rung
    step_s: float  # median seconds per step
    step_times: list[float]
    tokens_per_step: float  # real tokens, mean over the batches used
    positions_per_step: float  # B * L computed, padding included
    flops_per_step: float  # model FLOPs, mean over the batches used
    tokens_per_s: float
    mfu: float
    peak_flops_per_s: float  # the peak measured with this rung's threads


def losses_naive(model: BertForPreTraining, batch: dict) -> torch.Tensor:
    """transformers' way: logits at every position (B, L, V), then ignore_index drops ~85%."""
    kw = {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
    out = model(**kw)  # no labels: the head runs on all positions
    V = out.prediction_logits.shape[-1]
    mlm = F.cross_entropy(out.prediction_logits.view(-1, V), batch["labels"].view(-1), ignore_index=IGNORE_INDEX)  # fmt: skip
    return mlm + F.cross_entropy(out.seq_relationship_logits, batch["next_sentence_label"])


def losses_gathered(model: BertForPreTraining, batch: dict) -> torch.Tensor:
    if "cls_positions" in batch:
        out = packed_forward(model, **batch)
    else:
        out = model(**batch)
    mlm = F.cross_entropy(out.prediction_logits, out.mlm_targets)
    return mlm + F.cross_entropy(out.seq_relationship_logits, batch["next_sentence_label"])


def make_step(rung: Rung, cfg: PretrainConfig, model_config, state: dict) -> Callable[[dict], None]:
    torch.manual_seed(cfg.seed)
    model = BertForPreTraining(model_config.replace(attn_implementation=rung.attention)).train()
    model.load_state_dict(state)
    groups = bert_param_groups(model, cfg.weight_decay)
    if rung.optimizer == "fused":
        opt = torch.optim.AdamW(groups, lr=cfg.lr, eps=cfg.adam_eps, fused=True)
    else:
        opt = AdamW(groups, lr=cfg.lr, eps=cfg.adam_eps)
    losses = losses_gathered if rung.gather else losses_naive

    def step(batch: dict) -> None:
        loss = losses(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()

    return step


def batch_figures(batch: dict, model_config) -> tuple[float, float, float]:
    """(real tokens, computed positions, model FLOPs of a training step) of a batch."""
    am = batch["attention_mask"]
    tokens = float(am.sum() if am.dim() == 2 else am.amax(-1).sum())
    B, L = batch["input_ids"].shape
    n = int((batch["labels"] != IGNORE_INDEX).sum())
    return tokens, float(B * L), bert_flops(model_config, B, L, n).total


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default="tiny", choices=["tiny", "mini", "small", "base"])
    p.add_argument("--tokenizer", default="wordpiece-8192", help="as python -m bertcourse.pretrain")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--repeats", type=int, default=9, help="timed steps per rung (median)")
    p.add_argument("--batches", type=int, default=4, help="distinct batches cycled through")
    p.add_argument("--out", default="benchmarks/results/ladder.json", help="JSON output")
    p.add_argument("--note", default="", help="free text stored with the results (machine load)")
    args = p.parse_args(argv)

    # BERT's dropout 0.1 (the pretraining command's default is 0): a step as BERT trains it
    cfg = PretrainConfig(model=args.model, tokenizer=args.tokenizer, batch_size=args.batch_size,
                         max_seq_length=args.max_seq_length, dropout=0.1)  # fmt: skip
    corpus, _ = load_corpus(cfg.tokenizer)
    train, _ = corpus.split(cfg.heldout_percent)
    model_config = cfg.model_config(corpus.vocab)
    plain, packed = [], []
    for packing, into in ((False, plain), (True, packed)):
        loader = pretraining_dataloader(train, batch_size=cfg.batch_size, seed=cfg.seed,
                                        max_seq_length=cfg.max_seq_length, packing=packing)  # fmt: skip
        for batch in loader:
            into.append(batch)
            if len(into) == args.batches:
                break
    torch.manual_seed(cfg.seed)
    state = BertForPreTraining(model_config).state_dict()

    peaks = {}
    for threads in sorted({r.threads for r in RUNGS}):
        torch.set_num_threads(threads)
        peaks[threads] = matmul_peak().flops_per_s
        print(
            f"fp32 matmul peak, {threads} thread(s): {peaks[threads] / 1e9:.1f} GFLOP/s", flush=True
        )

    steps = [make_step(r, cfg, model_config, state) for r in RUNGS]
    times: list[list[float]] = [[] for _ in RUNGS]
    order = list(range(len(RUNGS)))
    for round_ in range(-1, args.repeats):  # round -1: warm-up, not timed
        for i in order if round_ % 2 else order[::-1]:
            rung = RUNGS[i]
            batches = packed if rung.packing else plain
            batch = batches[max(round_, 0) % len(batches)]
            torch.set_num_threads(rung.threads)
            t0 = time.perf_counter()
            steps[i](batch)
            if round_ >= 0:
                times[i].append(time.perf_counter() - t0)
        if round_ >= 0:
            print(f"round {round_ + 1}/{args.repeats} done", flush=True)

    results = []
    for rung, t in zip(RUNGS, times):
        batches = packed if rung.packing else plain
        used = [batches[r % len(batches)] for r in range(args.repeats)]
        figs = [batch_figures(b, model_config) for b in used]
        tokens = statistics.mean(f[0] for f in figs)
        positions = statistics.mean(f[1] for f in figs)
        flops = statistics.mean(f[2] for f in figs)
        step_s = statistics.median(t)
        results.append(RungResult(rung, step_s, t, tokens, positions, flops, tokens / step_s,
                                  flops / step_s / peaks[rung.threads], peaks[rung.threads]))  # fmt: skip

    print(f"\n{args.model} model, batch {args.batch_size} x {args.max_seq_length}, "
          f"median of {args.repeats} interleaved steps, torch {torch.__version__}")  # fmt: skip
    print(
        f"{'rung':32s} {'step ms':>9s} {'tokens/s':>10s} {'padding':>8s} {'MFU':>6s} {'x naive':>8s}"
    )
    for r in results:
        pad = 1 - r.tokens_per_step / r.positions_per_step
        print(f"{r.rung.name:32s} {r.step_s * 1e3:9.1f} {r.tokens_per_s:10,.0f} {pad:8.1%} "
              f"{r.mfu:6.1%} {r.tokens_per_s / results[0].tokens_per_s:7.2f}x")  # fmt: skip
    out = {
        "model": args.model,
        "model_config": model_config.to_dict(),
        "tokenizer": args.tokenizer,
        "batch_size": args.batch_size,
        "max_seq_length": args.max_seq_length,
        "repeats": args.repeats,
        "torch": torch.__version__,
        "machine": {
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "load_average_at_end": os.getloadavg() if hasattr(os, "getloadavg") else None,
        },
        "note": args.note,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python benchmarks/bench_ladder.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "matmul_peak_flops_per_s": {str(k): v for k, v in peaks.items()},
        "rungs": [{**asdict(r), "rung": asdict(r.rung)} for r in results],
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"\nwritten: {args.out}")
    return out


if __name__ == "__main__":
    main()
