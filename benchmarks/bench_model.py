"""bertcourse vs transformers' BertForPreTraining: training step, eval forward, peak memory.

Same config, same weights (copied with `bertcourse.hf.to_hf`), same inputs (masked with
`bertcourse.mlm.mask_tokens`, NSP labels), CPU fp32, `torch.set_num_threads(2)`:

- train step = zero_grad + forward with MLM and NSP labels + backward + `torch.optim.AdamW`
  step (the same optimizer for both, so only the models differ: `--adamw fused`, the default,
  is PyTorch's fused CPU/GPU kernel; `--adamw foreach` and `--adamw loop` its other two
  implementations); dropout on (0.1).
- eval forward = `model.eval()`, `torch.no_grad()`, forward with labels (the loss an
  evaluation computes).

Timings are medians over interleaved repeats (bertcourse and transformers alternate, and the
order flips every repeat), so background load hits both alike; the speed-up ratio printed is
from the same run. Peak memory: one subprocess per measurement reads `ru_maxrss` after
building the model and again after running it; the table shows the growth (activations,
gradients, optimizer state) and the process peak.

Shapes: tiny (2 layers, hidden 128), mini (4 layers, hidden 256), base (12 layers, hidden 768),
all with the bert-base-uncased vocabulary (30,522) and sequence length 128.

MFU (model FLOPs utilisation): the model FLOPs of a step (:func:`bertcourse.flops.bert_flops`:
``6 * N_layer + 12 * n * T * H`` per token for the encoder, the MLM head at the labelled
positions only; the same count for both libraries) divided by the time, over the machine's
fp32 matrix-multiply peak measured at the start of the same run (best of ``--peak-repeats``
square ``torch.mm`` of ``--peak-sizes`` on the same threads). On a loaded machine the peak and
the steps are both slowed, so the MFU is less affected than either alone, but it is still
only indicative; the speed-up ratios are measured interleaved in the same run.

    python benchmarks/bench_model.py                      # all three sizes, ~4 min
    python benchmarks/bench_model.py --sizes tiny mini --repeats 15
    python benchmarks/bench_model.py --gpu                # + BERT-base bf16 on CUDA, if present

With a GPU (``--gpu``, or automatically when CUDA is available): BERT-base, bf16 autocast,
sequence 128: tokens/s for both and model FLOPs utilisation (MFU) against the GPU's dense
bf16 peak.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch  # noqa: E402

from bertcourse import BertConfig, BertForPreTraining  # noqa: E402
from bertcourse.config import MASK_ID, SPECIAL_IDS  # noqa: E402
from bertcourse.flops import bert_flops, matmul_peak  # noqa: E402
from bertcourse.mlm import mask_tokens  # noqa: E402

SIZES = {"tiny": BertConfig.tiny, "mini": BertConfig.mini, "base": BertConfig.base}
DEFAULT_BATCH = {"tiny": 32, "mini": 32, "base": 8}


@dataclass
class Inputs:
    input_ids: torch.Tensor  # (B, L)
    token_type_ids: torch.Tensor  # (B, L)
    attention_mask: torch.Tensor  # (B, L)
    labels: torch.Tensor  # (B, L), -100 where not predicted
    next_sentence_label: torch.Tensor  # (B,)

    def to(self, device: str) -> Inputs:
        return Inputs(*(t.to(device) for t in self.__dict__.values()))

    def kwargs(self) -> dict:
        return dict(self.__dict__)


def make_inputs(config: BertConfig, batch: int, seq: int, seed: int = 0) -> Inputs:
    """Random token ids with [CLS] A [SEP] B [SEP] structure, ~15% MLM labels, NSP labels."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, config.vocab_size, (batch, seq), generator=g)
    half = seq // 2
    ids[:, 0], ids[:, half], ids[:, -1] = 101, 102, 102
    tt = torch.zeros_like(ids)
    tt[:, half + 1 :] = 1
    am = torch.ones_like(ids)
    masked, labels = mask_tokens(
        ids,
        vocab_size=config.vocab_size,
        mask_token_id=MASK_ID,
        special_token_ids=SPECIAL_IDS,
        generator=g,
    )
    nsp = torch.randint(0, 2, (batch,), generator=g)
    return Inputs(masked, tt, am, labels, nsp)


def build_pair(size: str, seed: int = 0) -> tuple[torch.nn.Module, torch.nn.Module, BertConfig]:
    """(bertcourse model, transformers model with the same weights), both sdpa attention."""
    from bertcourse.hf import to_hf

    config = SIZES[size](attn_implementation="sdpa")
    torch.manual_seed(seed)
    ours = BertForPreTraining(config)
    theirs = to_hf(ours)
    return ours, theirs, config


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: Inputs) -> float:
    opt.zero_grad(set_to_none=True)
    out = model(**x.kwargs())
    out.loss.backward()
    opt.step()
    return out.loss.item()


@torch.no_grad()
def eval_forward(model: torch.nn.Module, x: Inputs) -> float:
    return model(**x.kwargs()).loss.item()


def median_times(fns: dict[str, callable], repeats: int, warmup: int = 1) -> dict[str, list[float]]:
    """Time each fn `repeats` times, interleaved, order flipped every repeat."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    names = list(fns)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            t0 = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - t0)
    return times


ADAMW = {"fused": {"fused": True}, "foreach": {"foreach": True}, "loop": {"foreach": False}}


def bench_cpu(
    size: str, batch: int, seq: int, repeats: int, adamw: str = "fused", peak: float | None = None
) -> dict:
    ours, theirs, config = build_pair(size)
    x = make_inputs(config, batch, seq)
    # Same loss before any step: same weights, same inputs (dropout off for this check).
    ours.eval(), theirs.eval()
    l1, l2 = eval_forward(ours, x), eval_forward(theirs, x)
    if abs(l1 - l2) > 1e-3 * max(1.0, abs(l2)):
        raise RuntimeError(f"{size}: losses differ before timing: {l1} vs {l2}")
    ours.train(), theirs.train()
    opt_ours = torch.optim.AdamW(ours.parameters(), lr=1e-4, **ADAMW[adamw])
    opt_theirs = torch.optim.AdamW(theirs.parameters(), lr=1e-4, **ADAMW[adamw])
    train = median_times(
        {
            "bertcourse": lambda: train_step(ours, opt_ours, x),
            "transformers": lambda: train_step(theirs, opt_theirs, x),
        },
        repeats,
    )
    ours.eval(), theirs.eval()
    evals = median_times(
        {
            "bertcourse": lambda: eval_forward(ours, x),
            "transformers": lambda: eval_forward(theirs, x),
        },
        repeats,
    )
    n_params = sum(p.numel() for p in ours.parameters())
    res = {"size": size, "batch": batch, "seq": seq, "params": n_params, "repeats": repeats}
    res["adamw"] = adamw
    for kind, t in (("train", train), ("eval", evals)):
        for impl in t:
            res[f"{kind}_{impl}_s"] = statistics.median(t[impl])
        res[f"{kind}_speedup"] = res[f"{kind}_transformers_s"] / res[f"{kind}_bertcourse_s"]
    # MFU: the same model FLOPs for both (what BERT needs), over the measured matmul peak.
    n_labelled = int((x.labels != -100).sum())
    for kind, training in (("train", True), ("eval", False)):
        flops = bert_flops(config, batch, seq, n_labelled, training=training).total
        res[f"{kind}_flops"] = flops
        for impl in ("bertcourse", "transformers"):
            s = res[f"{kind}_{impl}_s"]
            res[f"{kind}_{impl}_gflops_per_s"] = flops / s / 1e9
            res[f"{kind}_{impl}_mfu"] = flops / s / peak if peak else None
    return res


def _proc_status_mib(field: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset this process's peak RSS (VmHWM) to its current RSS (Linux: clear_refs 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss_mib() -> float:
    """Peak RSS of this process: VmHWM on Linux (ru_maxrss would include the pre-exec parent's
    peak, which a child inherits across fork + exec), else ru_maxrss."""
    hwm = _proc_status_mib("VmHWM")
    if hwm is not None:
        return hwm
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def memory_child(
    size: str, impl: str, kind: str, batch: int, seq: int, adamw: str = "loop"
) -> dict:
    """Runs in a fresh process: RSS with the model built, and the peak during 2 steps of
    `kind` with `impl` (the peak is reset after building, so it is the steps' own peak)."""
    torch.set_num_threads(2)
    ours, theirs, config = build_pair(size)
    model = ours if impl == "bertcourse" else theirs
    del ours, theirs
    x = make_inputs(config, batch, seq)
    if kind == "train":
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **ADAMW[adamw])
    else:
        model.eval()
    before = _proc_status_mib("VmRSS") or _peak_rss_mib()
    _reset_peak_rss()
    for _ in range(2):
        train_step(model, opt, x) if kind == "train" else eval_forward(model, x)
    return {"before_mib": before, "peak_mib": _peak_rss_mib()}


def bench_memory(size: str, batch: int, seq: int, adamw: str) -> dict:
    out = {}
    for kind in ("train", "eval"):
        for impl in ("bertcourse", "transformers"):
            cmd = [
                sys.executable,
                __file__,
                "--memory-child",
                json.dumps([size, impl, kind, batch, seq, adamw]),
            ]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            r = json.loads(res.stdout.strip().splitlines()[-1])
            out[f"{kind}_{impl}_peak_mib"] = r["peak_mib"]
            out[f"{kind}_{impl}_growth_mib"] = r["peak_mib"] - r["before_mib"]
    return out


# --- GPU ----------------------------------------------------------------------------------

# Dense bf16 peak (no sparsity), FLOP/s, by a substring of torch.cuda.get_device_name().
GPU_PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "A10G": 70e12}


def model_flops_per_step(config: BertConfig, batch: int, seq: int, n_labelled: int) -> float:
    """FLOPs of one training step that the model needs: :func:`bertcourse.flops.bert_flops`
    (matrix multiplies; the MLM head at the labelled positions only, so a model that projects
    every position to the vocabulary does extra work that MFU does not credit)."""
    return bert_flops(config, batch, seq, n_labelled).total


def bench_gpu(batch: int, seq: int, steps: int, device: str = "cuda", size: str = "base") -> dict:
    ours, theirs, config = build_pair(size)
    ours, theirs = ours.to(device).train(), theirs.to(device).train()
    x = make_inputs(config, batch, seq).to(device)
    n_labelled = int((x.labels != -100).sum())
    opts = {
        "bertcourse": torch.optim.AdamW(ours.parameters(), lr=1e-4, fused=device == "cuda"),
        "transformers": torch.optim.AdamW(theirs.parameters(), lr=1e-4, fused=device == "cuda"),
    }
    models = {"bertcourse": ours, "transformers": theirs}

    def run(name: str) -> None:
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            opts[name].zero_grad(set_to_none=True)
            loss = models[name](**x.kwargs()).loss
        loss.backward()
        opts[name].step()

    def timed(name: str) -> float:
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            run(name)
        if device == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) / steps

    for name in models:
        for _ in range(3):
            run(name)  # warm-up (kernel selection, allocator)
    times = median_times({k: (lambda k=k: timed(k)) for k in models}, repeats=5, warmup=0)
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    peak = next((v for k, v in GPU_PEAK_BF16.items() if k in name), None)
    flops = model_flops_per_step(config, batch, seq, n_labelled)
    res = {"device": name, "batch": batch, "seq": seq, "steps_per_timing": steps}
    for impl, t in times.items():
        step_s = statistics.median(t)
        res[f"{impl}_step_s"] = step_s
        res[f"{impl}_tokens_per_s"] = batch * seq / step_s
        res[f"{impl}_mfu"] = flops / step_s / peak if peak else None
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
            run(impl)
            torch.cuda.synchronize()
            res[f"{impl}_peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    res["speedup"] = res["transformers_step_s"] / res["bertcourse_step_s"]
    return res


# --- main -----------------------------------------------------------------------------------


def fmt_table(rows: list[dict], mem: dict) -> str:
    lines = [
        "| size | batch x seq | params | train step bertcourse (MFU) | transformers (MFU) | speed-up "
        "| eval fwd bertcourse | transformers | speed-up | train peak RSS (growth) bertcourse "
        "| transformers |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        m = mem.get(r["size"], {})

        def mib(impl: str, m: dict = m) -> str:
            if not m:
                return "-"
            return f"{m[f'train_{impl}_peak_mib']:.0f} MiB (+{m[f'train_{impl}_growth_mib']:.0f})"

        lines.append(
            f"| {r['size']} | {r['batch']} x {r['seq']} | {r['params'] / 1e6:.1f}M "
            f"| {r['train_bertcourse_s'] * 1e3:.0f} ms ({r['train_bertcourse_mfu']:.0%}) "
            f"| {r['train_transformers_s'] * 1e3:.0f} ms ({r['train_transformers_mfu']:.0%}) "
            f"| **{r['train_speedup']:.2f}x** "
            f"| {r['eval_bertcourse_s'] * 1e3:.0f} ms | {r['eval_transformers_s'] * 1e3:.0f} ms "
            f"| {r['eval_speedup']:.2f}x | {mib('bertcourse')} | {mib('transformers')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", nargs="+", default=["tiny", "mini", "base"], choices=list(SIZES))
    p.add_argument("--repeats", type=int, default=9, help="interleaved repeats per measurement")
    p.add_argument("--batch", type=int, default=None, help="default: 32 (tiny, mini), 8 (base)")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--adamw", choices=list(ADAMW), default="fused", help="torch AdamW variant")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    p.add_argument("--peak-sizes", type=int, nargs="+", default=[512, 1024, 2048],
                   help="square matmul sizes for the fp32 peak")  # fmt: skip
    p.add_argument("--peak-repeats", type=int, default=5, help="best of N for the peak")
    p.add_argument("--gpu", action="store_true", help="GPU section (default: when CUDA exists)")
    p.add_argument("--gpu-batch", type=int, default=64)
    p.add_argument("--json", default=None, help="also write all figures to this JSON file")
    p.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.memory_child:
        print(json.dumps(memory_child(*json.loads(args.memory_child))))
        return

    torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {args.threads} threads, CPU fp32; "
        f"medians of {args.repeats} interleaved repeats; torch.optim.AdamW ({args.adamw})"
    )
    peak = matmul_peak(sizes=tuple(args.peak_sizes), repeats=args.peak_repeats)
    print(
        f"fp32 matmul peak on {peak.threads} threads: {peak.flops_per_s / 1e9:.1f} GFLOP/s "
        f"(best of {args.peak_repeats}, at {peak.size}x{peak.size}; "
        + ", ".join(f"{n}: {r / 1e9:.1f}" for n, r in peak.rates.items())
        + ")",
        flush=True,
    )
    rows, mem = [], {}
    for size in args.sizes:
        batch = args.batch or DEFAULT_BATCH[size]
        r = bench_cpu(size, batch, args.seq, args.repeats, args.adamw, peak.flops_per_s)
        rows.append(r)
        print(
            f"{size:5s} train: bertcourse {r['train_bertcourse_s'] * 1e3:7.1f} ms "
            f"(MFU {r['train_bertcourse_mfu']:.0%}), transformers "
            f"{r['train_transformers_s'] * 1e3:7.1f} ms (MFU {r['train_transformers_mfu']:.0%})"
            f" -> {r['train_speedup']:.2f}x | eval: {r['eval_bertcourse_s'] * 1e3:6.1f} ms "
            f"(MFU {r['eval_bertcourse_mfu']:.0%}) vs {r['eval_transformers_s'] * 1e3:6.1f} ms "
            f"(MFU {r['eval_transformers_mfu']:.0%}) -> {r['eval_speedup']:.2f}x",
            flush=True,
        )
        if not args.no_memory:
            mem[size] = bench_memory(size, batch, args.seq, args.adamw)
            m = mem[size]
            print(
                f"{size:5s} peak RSS train: bertcourse {m['train_bertcourse_peak_mib']:.0f} MiB "
                f"(+{m['train_bertcourse_growth_mib']:.0f}), transformers "
                f"{m['train_transformers_peak_mib']:.0f} MiB (+{m['train_transformers_growth_mib']:.0f})"
                f" | eval: {m['eval_bertcourse_peak_mib']:.0f} vs "
                f"{m['eval_transformers_peak_mib']:.0f} MiB",
                flush=True,
            )
    print()
    print(fmt_table(rows, mem))
    result = {"cpu": rows, "memory": mem, "matmul_peak": peak.__dict__}
    if args.gpu or torch.cuda.is_available():
        if torch.cuda.is_available():
            g = bench_gpu(args.gpu_batch, args.seq, steps=10)
            result["gpu"] = g
            print(
                f"\nGPU {g['device']}, BERT-base bf16, batch {g['batch']} x {g['seq']}: "
                f"bertcourse {g['bertcourse_tokens_per_s']:,.0f} tokens/s "
                f"(MFU {g['bertcourse_mfu'] or float('nan'):.1%}), transformers "
                f"{g['transformers_tokens_per_s']:,.0f} tokens/s "
                f"(MFU {g['transformers_mfu'] or float('nan'):.1%}) -> {g['speedup']:.2f}x"
            )
        else:
            print("\nGPU section skipped: CUDA is not available")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
