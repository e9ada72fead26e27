"""Chapter 7's short pretraining run, too long for a book page on a busy machine: BERT-tiny
with the 8,192-piece WordPiece vocabulary, 400 steps, one thread. Writes its training and
held-out curves, the held-out accuracy split by what the model read at each chosen position,
and its fill-in-the-blank answers, with the command, seed and versions, to
benchmarks/figures/ch07_pretraining.json. The chapter renders that file and asserts on it,
and runs the first steps of the same schedule itself (`stop_after`), checking that its losses
equal the committed ones; tests/test_fillmask_heads.py does the same.

    python benchmarks/ch07_pretraining.py      # ~90 s of CPU on one thread
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bertcourse.data import load_corpus  # noqa: E402
from bertcourse.pretrain import (  # noqa: E402
    PretrainConfig,
    fill_mask,
    heldout_batches,
    split_heldout,
    train,
)

DEFAULT_JSON = ROOT / "benchmarks" / "figures" / "ch07_pretraining.json"
QUERIES = (
    "return the [MASK] of the list.",
    "if the file does not [MASK], an error is raised.",
    "this module provides [MASK] for working with dates.",
)


def page_config(output_dir: str, **changes) -> PretrainConfig:
    """The run of chapter 7 (the chapter builds the same config with `stop_after`)."""
    settings = dict(
        model="tiny", tokenizer="wordpiece-8192", max_seq_length=32, batch_size=32,
        steps=400, lr=2e-3, warmup_steps=40, eval_every=100, checkpoint_every=0, log_every=10,
        threads=1, progress=False, plots=False, measure_peak=False, output_dir=output_dir,
    )  # fmt: skip
    settings.update(changes)
    return PretrainConfig(**settings)


@torch.no_grad()
def accuracy_by_kind(model, config: PretrainConfig) -> dict:
    """Held-out accuracy at the chosen positions, split by what the model read there:
    [MASK], a random token, or the token itself (the 80/10/10 rule), on the batches the run
    was evaluated on; and the best constant guess on those targets."""
    corpus, _ = load_corpus(config.tokenizer)
    _, heldout = split_heldout(corpus, config)
    batches = heldout_batches(heldout, config)
    right, total = {}, {}
    model.eval()
    for b in batches:
        out = model(b["input_ids"], b["token_type_ids"], b["attention_mask"], labels=b["labels"])
        seen = b["input_ids"][b["labels"] != -100]  # (N,) what the model read there
        correct = out.prediction_logits.argmax(-1) == out.mlm_targets  # (N,)
        for s, t, c in zip(seen.tolist(), out.mlm_targets.tolist(), correct.tolist()):
            kind = "[MASK]" if s == corpus.vocab.mask_id else "unchanged" if s == t else "random"
            right[kind] = right.get(kind, 0) + c
            total[kind] = total.get(kind, 0) + 1
    targets = torch.cat([b["labels"][b["labels"] != -100] for b in batches])
    best = int(torch.bincount(targets).argmax())
    return {
        "share": {k: total[k] / sum(total.values()) for k in total},
        "accuracy": {k: right[k] / total[k] for k in total},
        "count": total,
        "best_constant": {"token_id": best, "accuracy": float((targets == best).double().mean())},
    }


def slice_losses(perturb_seed: int | None = None) -> dict[int, float]:
    """The training losses of the page's 40-step slice; with ``perturb_seed``, every initial
    weight moved by half a unit in the last place (float32: a relative 2**-24, signs drawn
    from the seed), the size of one rounding that another machine's kernels may do otherwise."""
    import bertcourse.pretrain as pretrain

    plain = pretrain.BertForPreTraining

    class Perturbed(plain):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            g = torch.Generator().manual_seed(perturb_seed)
            with torch.no_grad():
                for p in self.parameters():
                    sign = torch.randint(0, 2, p.shape, generator=g).to(p.dtype) * 2 - 1
                    p.mul_(1 + sign * 2.0**-24)

    pretrain.BertForPreTraining = plain if perturb_seed is None else Perturbed
    try:
        with tempfile.TemporaryDirectory() as run_dir, contextlib.redirect_stderr(io.StringIO()):
            result = train(page_config(run_dir, stop_after=40, eval_examples=128))
    finally:
        pretrain.BertForPreTraining = plain
    return {r["step"]: r["mlm_loss"] for r in result.report["history"]["train"]}


def rounding_spread() -> float:
    """How far one rounding's difference in every weight moves the slice's losses: the largest
    change at a logged step over two draws of the signs."""
    base = slice_losses()
    return max(abs(slice_losses(seed)[k] - base[k]) for seed in (1, 2) for k in base)


def slice_tolerance(spread: float, config: PretrainConfig) -> float:
    """How close another machine's slice must come to the committed losses: the corpus and the
    vocabulary ship with the package, so only the float32 kernels' rounding may differ. n terms
    added in another order may differ by up to about n roundings; the softmax and the gradient
    that the output layer sends back each add one term per piece of the vocabulary, so
    ``vocabulary size x spread``. An estimate, not a bound (the chapter says why: the gradient
    clipping's norm is a longer sum still, though only its scale reaches the update)."""
    vocab_size = int(config.tokenizer.rsplit("-", 1)[1])  # "wordpiece-8192"
    return vocab_size * spread


def main(argv: list[str] | None = None) -> dict:
    from benchmarks.fillmask_heads import provenance

    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    t0 = time.process_time()
    with tempfile.TemporaryDirectory() as run_dir:
        config = page_config(run_dir)
        log = io.StringIO()
        with contextlib.redirect_stderr(log):
            result = train(config)
    report = result.report
    out = {
        **provenance(argv),
        "command": "python benchmarks/ch07_pretraining.py " + " ".join(argv),
        "seed": config.seed,
        "config": {k: v for k, v in asdict(config).items() if k != "output_dir"},
        "report": {
            k: report[k]
            for k in (
                "parameters",
                "steps_done",
                "tokens_seen",
                "unigram_baseline",
                "final_eval",
                "history",
            )
        },  # fmt: skip
        "unigram_token": result.tokenizer.id_to_token(report["unigram_baseline"]["token_id"]),
        "by_kind": accuracy_by_kind(result.model, config),
        "fill_mask": {
            q: [
                [p.token, p.probability] for p in fill_mask(result.model, result.tokenizer, q, 6)[0]
            ]
            for q in QUERIES
        },
        "rounding_spread": (spread := rounding_spread()),
        "slice_tolerance": slice_tolerance(spread, config),
        "cpu_seconds": time.process_time() - t0,
    }
    best = out["by_kind"]["best_constant"]
    best["token"] = result.tokenizer.id_to_token(best["token_id"])
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.json}")
    return out


if __name__ == "__main__":
    main()
