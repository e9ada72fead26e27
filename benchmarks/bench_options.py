"""Two options that are not the course's default, measured against it on this CPU.

The training step of `bench_model.py` (zero_grad + forward with MLM and NSP labels + backward +
`torch.optim.AdamW(fused=True)`, dropout on, the same weights and inputs) for bertcourse's
model, three ways, timed interleaved in one run:

- ``eager``: the course's model as the book shows it, fp32 (the reference of every ratio);
- ``compile``: the same model through ``torch.compile`` (TorchInductor, which generates fused
  C++ kernels for the elementwise work around the matrix products: dropout masks, GELU,
  LayerNorm, softmax). The first call compiles and is not timed. The model's input checks
  (which read tensor values, e.g. the ids' largest value) and the gathering of the labelled
  positions (an output whose shape depends on the data) break the graph; their count is
  printed. The encoder layers, where the time goes, compile as whole graphs. (Capturing the
  breaks with ``torch._dynamo.config.capture_scalar_outputs`` and
  ``capture_dynamic_output_shape_ops`` fails in Inductor with torch 2.13.);
- ``bf16``: eager under ``torch.autocast("cpu", dtype=torch.bfloat16)``: matrix products in
  bfloat16 (oneDNN; AMX tiles where the CPU has them), weights and optimizer state in fp32.

MFU is against the fp32 matmul peak for ``eager`` and ``compile``, and against the bf16
matmul peak for ``bf16``, both measured at the start of the same run (best of
``--peak-repeats`` square products). Whether an option pays depends on the CPU: bf16 is fast
only with native bf16 matrix units (Intel AMX, ``amx_bf16`` in ``/proc/cpuinfo``); elsewhere it
can be slower than fp32. The flags found are printed. Where torch.compile cannot build its
kernels (no C++ compiler; a torch installed under a path with spaces), the other two ways are
still measured and the reason is printed and saved.

    python benchmarks/bench_options.py                          # tiny, mini, base; ~3 min
    python benchmarks/bench_options.py --sizes mini --repeats 9 --json options.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch._dynamo.exc import BackendCompilerFailed
from torch._dynamo.utils import counters
from torch._inductor.exc import InductorError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_model import DEFAULT_BATCH, SIZES, build_pair, make_inputs, median_times  # noqa: E402

from bertcourse.flops import bert_flops, matmul_peak  # noqa: E402

MODES = ("eager", "compile", "bf16")


def cpu_flags() -> list[str]:
    """The matrix-unit flags of this CPU that matter for bf16 (Linux; empty elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.startswith("flags")), [])  # fmt: skip
    return sorted(f for f in flags if f in {"avx512_bf16", "amx_bf16", "amx_tile", "avx512f"})


def _step(model: torch.nn.Module, opt: torch.optim.Optimizer, x, bf16: bool):
    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(**x.kwargs()).loss
        loss.backward()
        opt.step()

    return step


TOLERANCE = {"compile": 1e-4, "bf16": 2e-2}  # relative; bf16 keeps 8 bits of mantissa


def check_same_loss(
    model: torch.nn.Module, x, mode: str, other: torch.nn.Module | None = None
) -> None:
    """`mode` must compute the same model as eager fp32: their losses with dropout off agree.

    other: the module that runs `mode` (the compiled model for "compile"; default `model`).
    """
    model.eval()
    with torch.no_grad():
        eager = model(**x.kwargs()).loss.item()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
            loss = (model if other is None else other)(**x.kwargs()).loss.item()
    model.train()
    if abs(loss - eager) > TOLERANCE[mode] * max(1.0, abs(eager)):
        raise RuntimeError(f"{mode} gives loss {loss:.6f}, eager fp32 {eager:.6f}")


def compiled_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x):
    """(the compiled training step, its graph breaks, None), or (None, 0, why) where
    torch.compile cannot build its kernels here (no C++ compiler, or a torch installed under
    a path with spaces, which Inductor's linker command splits). A compiled model that
    computes something else is an error, not a missing option."""
    counters.clear()
    compiled = torch.compile(model)
    try:
        check_same_loss(model, x, "compile", compiled)
        step = _step(compiled, opt, x, bf16=False)
        step()  # the first training call compiles the forward and backward graphs
    except (BackendCompilerFailed, InductorError) as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        why = f"{type(e).__name__}: {' '.join(lines[:2])}"
        if any(c.isspace() for c in str(Path(torch.__file__).parent)):
            why += " (torch is installed under a path with spaces)"
        return None, 0, why
    return step, sum(counters["graph_break"].values()), None


def bench_size(size: str, batch: int, seq: int, repeats: int, peaks: dict[str, float]) -> dict:
    ours, _, config = build_pair(size)
    ours.train()
    x = make_inputs(config, batch, seq)
    opt = torch.optim.AdamW(ours.parameters(), lr=1e-4, fused=True)
    check_same_loss(ours, x, "bf16")
    step_compiled, graph_breaks, compile_error = compiled_step(ours, opt, x)
    steps = {"eager": _step(ours, opt, x, bf16=False), "bf16": _step(ours, opt, x, bf16=True)}
    if step_compiled is not None:
        steps["compile"] = step_compiled
    times = median_times(steps, repeats, warmup=1)
    flops = bert_flops(config, batch, seq, int((x.labels != -100).sum())).total
    res = {"size": size, "batch": batch, "seq": seq, "repeats": repeats}
    res["graph_breaks"], res["compile_error"] = graph_breaks, compile_error
    for mode in (m for m in MODES if m in steps):
        s = statistics.median(times[mode])
        res[f"{mode}_s"] = s
        res[f"{mode}_tokens_per_s"] = batch * seq / s
        res[f"{mode}_mfu"] = flops / s / peaks["bf16" if mode == "bf16" else "fp32"]
        res[f"{mode}_speedup"] = res["eager_s"] / s
    return res


def _summary(r: dict) -> str:
    cells = [
        f"{m} {r[f'{m}_s'] * 1e3:.0f} ms ({r[f'{m}_speedup']:.2f}x, MFU {r[f'{m}_mfu']:.0%})"
        if f"{m}_s" in r
        else f"{m}: not measured, {r['compile_error']}"
        for m in MODES
    ]
    return " | ".join(cells) + f" | {r['graph_breaks']} graph breaks"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", nargs="+", default=["tiny", "mini", "base"], choices=list(SIZES))
    p.add_argument("--repeats", type=int, default=7, help="interleaved repeats per mode")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--peak-repeats", type=int, default=5, help="best of N for each peak")
    p.add_argument(
        "--peak-sizes",
        type=int,
        nargs="+",
        default=[512, 1024, 2048],
        help="square matrix sizes the peaks are measured at (the best size counts)",
    )
    p.add_argument("--json", default=None, help="also write all figures to this JSON file")
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    peaks = {
        name: matmul_peak(tuple(args.peak_sizes), args.peak_repeats, dtype=dtype).flops_per_s
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))
    }
    print(
        f"torch {torch.__version__}, {args.threads} threads; CPU flags: "
        f"{', '.join(cpu_flags()) or 'unknown'}\nmatmul peak: fp32 {peaks['fp32'] / 1e9:.0f} "
        f"GFLOP/s, bf16 {peaks['bf16'] / 1e9:.0f} GFLOP/s (measured now)",
        flush=True,
    )
    rows = []
    for size in args.sizes:
        r = bench_size(size, DEFAULT_BATCH[size], args.seq, args.repeats, peaks)
        rows.append(r)
        print(f"{size:5s} {r['batch']} x {r['seq']}: {_summary(r)}", flush=True)
    if args.json:
        out = {
            "date": time.strftime("%Y-%m-%d"),
            "torch": torch.__version__,
            "threads": args.threads,
            "cpu_flags": cpu_flags(),
            "load_average_at_end": os.getloadavg(),
            "peaks": peaks,
            "rows": rows,
        }
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
