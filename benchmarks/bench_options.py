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
can be slower than fp32. The flags found are printed.

    python benchmarks/bench_options.py                          # tiny, mini, base; ~6 min
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
from torch._dynamo.utils import counters

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


def check_same_loss(model: torch.nn.Module, compiled: torch.nn.Module, x) -> None:
    """The three ways must compute the same model: compare their losses with dropout off."""
    model.eval()
    with torch.no_grad():
        eager = model(**x.kwargs()).loss.item()
        other = {"compile": compiled(**x.kwargs()).loss.item()}
        with torch.autocast("cpu", dtype=torch.bfloat16):
            other["bf16"] = model(**x.kwargs()).loss.item()
    for mode, loss in other.items():
        tol = 1e-4 if mode == "compile" else 2e-2  # bf16 keeps 8 bits of mantissa
        if abs(loss - eager) > tol * max(1.0, abs(eager)):
            raise RuntimeError(f"{mode} gives loss {loss:.6f}, eager fp32 {eager:.6f}")


def bench_size(size: str, batch: int, seq: int, repeats: int, peaks: dict[str, float]) -> dict:
    ours, _, config = build_pair(size)
    ours.train()
    x = make_inputs(config, batch, seq)
    opt = torch.optim.AdamW(ours.parameters(), lr=1e-4, fused=True)
    counters.clear()
    compiled = torch.compile(ours)
    check_same_loss(ours, compiled, x)
    ours.train()
    step_compiled = _step(compiled, opt, x, bf16=False)
    step_compiled()  # the first call compiles (forward and backward graphs)
    graph_breaks = sum(counters["graph_break"].values())
    steps = {
        "eager": _step(ours, opt, x, bf16=False),
        "compile": step_compiled,
        "bf16": _step(ours, opt, x, bf16=True),
    }
    times = median_times(steps, repeats, warmup=1)
    flops = bert_flops(config, batch, seq, int((x.labels != -100).sum())).total
    res = {"size": size, "batch": batch, "seq": seq, "repeats": repeats}
    res["graph_breaks"] = graph_breaks
    for mode in MODES:
        s = statistics.median(times[mode])
        res[f"{mode}_s"] = s
        res[f"{mode}_tokens_per_s"] = batch * seq / s
        res[f"{mode}_mfu"] = flops / s / peaks["bf16" if mode == "bf16" else "fp32"]
        res[f"{mode}_speedup"] = res["eager_s"] / s
    return res


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", nargs="+", default=["tiny", "mini", "base"], choices=list(SIZES))
    p.add_argument("--repeats", type=int, default=7, help="interleaved repeats per mode")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--peak-repeats", type=int, default=5, help="best of N for each peak")
    p.add_argument("--json", default=None, help="also write all figures to this JSON file")
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    peaks = {
        name: matmul_peak(repeats=args.peak_repeats, dtype=dtype).flops_per_s
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
        print(
            f"{size:5s} {r['batch']} x {r['seq']}: "
            + " | ".join(
                f"{m} {r[f'{m}_s'] * 1e3:.0f} ms ({r[f'{m}_speedup']:.2f}x, MFU {r[f'{m}_mfu']:.0%})"
                for m in MODES
            )
            + f" | {r['graph_breaks']} graph breaks",
            flush=True,
        )
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
