"""torchrun with 2 CPU processes (DistributedDataParallel, gloo): both ranks end with identical
parameters, and the losses equal a single-process run with the same global batch.

Run directly, this file is the worker that torchrun starts (see `_worker`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bertcourse.pretrain import PretrainConfig, load_checkpoint, run, train

# Dropout off: otherwise the two runs draw different noise (the rank is part of its seed).
CFG = PretrainConfig(
    model="custom",
    tokenizer="bert",  # the shipped vocabulary: nothing to train in CI
    layers=1,
    hidden=64,
    heads=2,
    dropout=0.0,
    max_seq_length=48,
    batch_size=8,  # global: 4 per process under torchrun
    steps=4,
    lr=2e-3,
    warmup_steps=1,
    eval_examples=16,
    eval_every=0,
    checkpoint_every=0,
    log_every=1,
    progress=False,
    plots=False,
    threads=1,
)


def _worker(out_dir: str) -> None:
    """One torchrun process: train, then save this rank's parameters."""
    model, _, report = train(CFG.replace(output_dir=out_dir))
    rank = torch.distributed.get_rank()
    torch.save(
        {k: v.detach().clone() for k, v in model.state_dict().items()},
        Path(out_dir) / f"rank{rank}.pt",
    )
    if rank == 0:
        (Path(out_dir) / "losses.json").write_text(
            json.dumps([r["loss"] for r in report["history"]["train"]])
        )
    torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_two_processes_match_one(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[1])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           __file__, str(tmp_path / "ddp")]  # fmt: skip
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]

    r0 = torch.load(tmp_path / "ddp" / "rank0.pt")
    r1 = torch.load(tmp_path / "ddp" / "rank1.pt")
    assert r0.keys() == r1.keys()
    for k in r0:
        assert torch.equal(r0[k], r1[k]), f"ranks differ in {k}"

    single = run(CFG.replace(output_dir=str(tmp_path / "single")))
    ddp_losses = json.loads((tmp_path / "ddp" / "losses.json").read_text())
    single_losses = [r["loss"] for r in single["history"]["train"]]
    # Same data, same masks, same global normalisation: equal up to float summation order.
    assert ddp_losses == pytest.approx(single_losses, rel=1e-5)
    assert single_losses[-1] < single_losses[0]  # and it trained
    model, _ = load_checkpoint(tmp_path / "single")
    for k, v in model.state_dict().items():
        torch.testing.assert_close(r0[k], v, rtol=1e-4, atol=1e-5, msg=f"DDP vs single: {k}")


if __name__ == "__main__":
    _worker(sys.argv[1])
