"""The benchmark of torch.compile and bf16 autocast: it times the same model three ways."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_options  # noqa: E402
from bench_model import build_pair, make_inputs  # noqa: E402

from bertcourse.flops import bert_flops  # noqa: E402


def test_a_way_that_computes_another_model_is_refused() -> None:
    ours, _, config = build_pair("tiny", seed=0)
    other, _, _ = build_pair("tiny", seed=1)  # other weights: another model
    x = make_inputs(config, batch=2, seq=16)
    bench_options.check_same_loss(ours, x, "compile", ours)  # the same model passes
    bench_options.check_same_loss(ours, x, "bf16")  # and so does bf16, within its rounding
    with pytest.raises(RuntimeError, match="compile gives loss"):
        bench_options.check_same_loss(ours, x, "compile", other)


def test_bench_options_writes_figures_that_agree_with_its_timings(tmp_path: Path) -> None:
    out = tmp_path / "options.json"
    threads = torch.get_num_threads()  # the benchmark sets its own; give them back after
    # small peak products: a 2048 x 2048 bf16 product takes over a minute on a CPU without
    # bf16 instructions, and the test checks how the figures agree, not how high they are;
    # one thread, so as not to add threads to a busy machine (scripts/test.sh runs it in the
    # lane beside the suite, after the busy build: 61-73 s there)
    bench_options.main(["--sizes", "tiny", "--repeats", "1", "--peak-repeats", "1", "--threads", "1",
                        "--peak-sizes", "256", "512", "--json", str(out)])  # fmt: skip
    torch.set_num_threads(threads)
    result = json.loads(out.read_text())
    assert result["peaks"]["fp32"] > 0 and result["peaks"]["bf16"] > 0
    (row,) = result["rows"]
    config = bench_options.SIZES["tiny"]()
    x = make_inputs(config, row["batch"], row["seq"])
    flops = bert_flops(config, row["batch"], row["seq"], int((x.labels != -100).sum())).total
    # torch.compile needs a C++ compiler, and Inductor's linker command breaks on a torch
    # installed under a path with spaces: there the benchmark must say so and go on.
    can_compile = (shutil.which("g++") or shutil.which("c++")) and not any(
        c.isspace() for c in str(Path(torch.__file__).parent)
    )
    measured = ["eager", "bf16"] + (["compile"] if can_compile else [])
    assert (row["compile_error"] is None) == bool(can_compile), row["compile_error"]
    for mode in measured:
        s = row[f"{mode}_s"]
        assert s > 0
        assert row[f"{mode}_speedup"] == pytest.approx(row["eager_s"] / s)
        assert row[f"{mode}_tokens_per_s"] == pytest.approx(row["batch"] * row["seq"] / s)
        peak = result["peaks"]["bf16" if mode == "bf16" else "fp32"]
        assert row[f"{mode}_mfu"] == pytest.approx(flops / s / peak)
