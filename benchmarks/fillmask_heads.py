"""Chapter 7's fill-mask heads, too long for a book page: an MLM head trained on MiniLM's
frozen encoder with the blanks fed as `[MASK]`, and the same head with the blanks fed as
`[UNK]`, at equal data (the same chunks, the same blanks, the same seed), against the unigram
baseline on the same held-out blanks, at two training sizes. Also writes the trained `[UNK]`
head (transform and bias, float32, ~0.7 MB) that the chapter loads for its fill-in-the-blank
queries. Written with the command, seed and versions to benchmarks/figures/fillmask_heads.json,
which the chapter renders and asserts on and tests/test_fillmask_heads.py re-checks (a small
slice re-run, and the committed head's held-out accuracy).

Fixed chunk counts, one thread, fixed seeds, float32 (bfloat16 autocast is slow on a CPU
without bfloat16 matrix units): the same numbers however busy the machine is.

    python benchmarks/fillmask_heads.py            # 2 sizes x 2 heads + the slice; ~3 min of
                                                   # CPU on one thread
    python benchmarks/fillmask_heads.py --chunks 300 --json /tmp/h.json --head /tmp/h.pt
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.provenance import provenance as shared_provenance  # noqa: E402
from bertcourse import fillmask  # noqa: E402
from bertcourse.data import load_corpus  # noqa: E402
from bertcourse.hf import load_minilm  # noqa: E402

DEFAULT_JSON = ROOT / "benchmarks" / "figures" / "fillmask_heads.json"
DEFAULT_HEAD = ROOT / "benchmarks" / "figures" / "fillmask_unk_head.pt"
BLANKS = ("[MASK]", "[UNK]")
SIZES = (300, 1000)  # training chunks; the held-out chunks stay at FillMaskConfig's 200
# The cheap slice the test re-runs: a few chunks, one epoch.
SLICE = dict(train_chunks=24, eval_chunks=12, epochs=1, batch_size=64)
THREADS = 1


def base_config(**changes) -> fillmask.FillMaskConfig:
    """FillMaskConfig's defaults in float32 (bf16=False: see the module docstring)."""
    return fillmask.FillMaskConfig(bf16=False, **changes)


def head_state(model) -> dict[str, torch.Tensor]:
    """The trained part of the MLM head: the transform and the output bias (the decoder
    weight is MiniLM's word-embedding table, which the chapter loads itself)."""
    head = model.cls.predictions
    state = {f"transform.{k}": v for k, v in head.transform.state_dict().items()}
    state["bias"] = head.bias.detach()
    return {k: v.detach().clone().float().contiguous() for k, v in state.items()}


def run(config: fillmask.FillMaskConfig, corpus=None) -> tuple[dict, fillmask.FillMaskResult]:
    """Train one head on a fresh MiniLM and return its record and the result."""
    corpus = corpus or load_corpus("bert")[0]
    train_docs, heldout_docs = corpus.split()
    t0 = time.process_time()
    result = fillmask.train_fill_mask(load_minilm()[0], train_docs, heldout_docs, config)
    record = {
        "config": asdict(config),
        "n_train": result.n_train,
        "n_heldout": result.heldout.n,
        "tokens_encoded": result.tokens_encoded,
        "head": {
            "top1": result.heldout.top1,
            "top5": result.heldout.top5,
            "cross_entropy": result.heldout_loss,
        },  # fmt: skip
        "unigram": {
            "top1": result.unigram.top1,
            "top5": result.unigram.top5,
            "cross_entropy": result.unigram_loss,
        },  # fmt: skip
        "losses": result.losses,
        "cpu_seconds": time.process_time() - t0,
    }
    return record, result


def provenance(argv: list[str]) -> dict:
    return shared_provenance(
        "benchmarks/fillmask_heads.py",
        argv,
        ["bertcourse/fillmask.py", "benchmarks/fillmask_heads.py"],
        threads=THREADS,
        note="cpu_seconds: process CPU time of one run, on a busy machine",
    )


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, nargs="+", default=list(SIZES),
                        help="training chunk counts; the [UNK] head of the largest is saved")  # fmt: skip
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--head", type=Path, default=DEFAULT_HEAD)
    args = parser.parse_args(argv)
    torch.set_num_threads(THREADS)
    corpus, _ = load_corpus("bert")
    runs, saved = [], None
    for n in sorted(args.chunks):
        for blank in BLANKS:
            record, result = run(base_config(train_chunks=n, blank_token=blank), corpus)
            runs.append(record)
            print(f"{n} chunks, blank {blank}: head top-1 {record['head']['top1']:.3f}, "
                  f"unigram {record['unigram']['top1']:.3f}", flush=True)  # fmt: skip
            if blank == "[UNK]":
                saved = head_state(result.model)
    slices = {blank: run(base_config(blank_token=blank, **SLICE), corpus)[0] for blank in BLANKS}
    args.head.parent.mkdir(parents=True, exist_ok=True)
    torch.save(saved, args.head)
    out = {
        **provenance(argv),
        "seed": base_config().seed,
        "runs": runs,
        "saved_head": {
            "file": args.head.name,
            "train_chunks": max(args.chunks),
            "blank_token": "[UNK]",
        },  # fmt: skip
        "slice": slices,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.json} and {args.head}")
    return out


def find(results: dict, train_chunks: int, blank_token: str) -> dict:
    """The committed run with these settings."""
    for r in results["runs"]:
        if (r["config"]["train_chunks"], r["config"]["blank_token"]) == (train_chunks, blank_token):
            return r
    raise KeyError(f"no committed run with {train_chunks} chunks at {blank_token}")


def replace_config(record: dict, **changes) -> fillmask.FillMaskConfig:
    """The FillMaskConfig of a committed record, with `changes`."""
    return replace(fillmask.FillMaskConfig(**record["config"]), **changes)


if __name__ == "__main__":
    main()
