"""Chapter 9's Chinese BERT: the default `--lang zh` recipe at a fixed number of steps, with
character masking and with whole-word masking, over seeds; the results, the first steps of
the schedule (which tests/test_zh.py reproduces), and both seed-0 models' weights in float16
for the chapter's fill-in-the-blank cells.

    python benchmarks/zh_pretraining.py train --scheme wwm --seed 0   # one run (~10 idle min)
    python benchmarks/zh_pretraining.py collect                       # the JSON, the model

`train` runs `python -m bertcourse.pretrain --lang zh ... --steps 9000` into
runs/zh/9000/<scheme>-s<seed>/. `collect` reads every finished run there and writes
benchmarks/figures/zh_pretraining.json (commands, seeds, versions, commit, each run's report,
the mean and spread per scheme, the first steps, both seed-0 models on both kinds of held-out
questions) and the seed-0 models in float16: benchmarks/figures/zh_pretraining_model/ (character
masking, the chapter's fill-in-the-blank model) and zh_pretraining_model_wwm/ (whole words). `--steps N` (both commands) runs and collects a shorter
schedule instead: what the committed file holds when the machine was too busy for 9,000.

Why 9,000 steps: the runs here were made on a shared, busy machine, where a `--max-minutes 10`
run gets a fraction of its idle steps. The number of steps is the recipe instead: the English
default gets 8,255-8,661 steps in 10 minutes on the idle 2-core machine (benchmarks/RESULTS.md);
a step of the Chinese model costs 7.03 model GFLOP against 8.30 (its output layer has 4,733
entries, not 8,192), which would give ~9,900 steps if time followed FLOPs; not all of a tiny
model's step does, so we take 9,000.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bertcourse.zh import PRETRAIN_RECIPE  # noqa: E402

DEFAULT_JSON = ROOT / "benchmarks" / "figures" / "zh_pretraining.json"
MODEL_DIR = ROOT / "benchmarks" / "figures" / "zh_pretraining_model"  # char masking, seed 0
MODEL_DIRS = {
    "char": MODEL_DIR,
    "wwm": ROOT / "benchmarks" / "figures" / "zh_pretraining_model_wwm",
}
RUNS = ROOT / "runs" / "zh"
SCHEMES = {"char": [], "wwm": ["--whole-word-masking"]}
STEPS = PRETRAIN_RECIPE["steps"]  # 9,000: what 10 idle minutes on 2 cores give (the docstring)
ENGLISH_IDLE_STEPS = (8255, 8661)  # benchmarks/RESULTS.md, the default recipe's 10-minute runs
SLICE_STEPS = 4
WATCHED = ["bertcourse", "benchmarks/zh_pretraining.py"]


def run_dir(scheme: str, seed: int, steps: int = STEPS) -> Path:
    return RUNS / str(steps) / f"{scheme}-s{seed}"


def run_options(steps: int) -> list[str]:
    every = str(min(1000, steps // 4))
    return ["--steps", str(steps), "--eval-every", every, "--checkpoint-every", every,
            "--threads", "1", "--no-progress"]  # fmt: skip


def run_command(scheme: str, seed: int, steps: int = STEPS, device: str = "cpu") -> list[str]:
    """The command line of one run (the recipe's defaults, a fixed number of steps), on the CPU
    or on a GPU (`cuda`: the same recipe in float32, for when no idle CPU hour is at hand)."""
    output = run_dir(scheme, seed, steps).relative_to(ROOT)
    return ["python", "-m", "bertcourse.pretrain", "--lang", "zh", *SCHEMES[scheme],
            *run_options(steps), "--seed", str(seed), "--output", str(output),
            "--device", device]  # fmt: skip


def recipe(scheme: str, seed: int = 0, steps: int = STEPS, **changes):
    """The PretrainConfig of `run_command(scheme, seed, steps)` (what the slice and tests run)."""
    from bertcourse.pretraining.config import PretrainConfig

    every = min(1000, steps // 4)
    settings = dict(whole_word_mask=scheme == "wwm", steps=steps, eval_every=every,
                    checkpoint_every=every, threads=1, progress=False, seed=seed)  # fmt: skip
    return PretrainConfig.for_language("zh", **{**settings, **changes})


def first_steps(scheme: str, schedule_steps: int = STEPS, steps: int = SLICE_STEPS) -> list[dict]:
    """The training losses of the schedule's first `steps` steps (seed 0, one thread), logged
    at every step: what the committed runs did first, re-checked in tests."""
    import contextlib
    import io

    import torch

    from bertcourse.pretrain import train

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as out:
        cfg = recipe(scheme, steps=schedule_steps, stop_after=steps, log_every=1, eval_every=0, checkpoint_every=0,
                     plots=False, measure_peak=False, output_dir=out)  # fmt: skip
        with contextlib.redirect_stderr(io.StringIO()):
            report = train(cfg).report
    return [{k: row[k] for k in ("step", "mlm_loss", "nsp_loss", "mlm_acc")}
            for row in report["history"]["train"]]  # fmt: skip


def step_flops() -> dict:
    """Model GFLOP of one training step: the English default against the Chinese recipe."""
    from bertcourse.flops import bert_flops
    from bertcourse.pretraining.config import PretrainConfig
    from bertcourse.vocab import Vocab

    out = {}
    for lang, vocab_size in (("en", 8192), ("zh", 4733)):
        cfg = PretrainConfig.for_language(lang)
        config = cfg.model_config(Vocab(vocab_size, 0, 1, 2, 3, 4))
        chosen = cfg.batch_size * (cfg.max_seq_length - 3) * cfg.mlm_probability
        out[lang] = bert_flops(config, cfg.batch_size, cfg.max_seq_length, chosen).total / 1e9
    return out


KEPT = ("parameters", "steps_done", "tokens_seen", "train_seconds", "tokens_per_second",
        "threads", "device", "matmul_peak_flops_per_second", "mfu", "unigram_baseline", "final_eval",
        "mlm_acc_over_baseline")  # fmt: skip


def run_record(scheme: str, seed: int, steps: int, report: dict) -> dict:
    final, baseline = report["final_eval"], report["unigram_baseline"]
    return {
        "scheme": scheme,
        "seed": seed,
        "command": " ".join(run_command(scheme, seed, steps, report["device"].split(":")[0])),
        "finished": report["steps_done"] == steps,
        **{k: report[k] for k in KEPT},
        "mlm_acc_at_mask_over_baseline": final["mlm_acc_at_mask"] / baseline["mlm_acc"],
        "corpus": report["corpus"],
        "first_logged_train": report["history"]["train"][0],  # tests: the recipe's start, re-run
        "eval_history": report["history"]["eval"],
    }


def stopped_run_report(path: Path) -> dict:
    """The report of a run stopped before its last step, from its last checkpoint: the held-out
    figures of `python -m bertcourse.pretrain evaluate` (the same questions), the position."""
    import torch

    from bertcourse.pretraining.evaluation import evaluate_checkpoint

    state = torch.load(path / "checkpoint" / "trainer_state.pt", weights_only=False)
    res = evaluate_checkpoint(path)
    baseline = res.pop("unigram_baseline")
    config = json.loads((path / "checkpoint" / "config.json").read_text())
    return {
        "parameters": None,
        "steps_done": state["step"],
        "tokens_seen": state["tokens"],
        "train_seconds": state["train_seconds"],
        "tokens_per_second": state["tokens"] / state["train_seconds"],
        "threads": config["pretrain"]["threads"],
        "device": "cpu",
        "matmul_peak_flops_per_second": None,  # not in a checkpoint
        "mfu": None,
        "unigram_baseline": baseline,
        "final_eval": res,
        "mlm_acc_over_baseline": res["mlm_acc"] / baseline["mlm_acc"],
        "corpus": {"lang": "zh", "tokenizer": config["pretrain"]["tokenizer"]},
        "history": state["history"],
    }


def summary(records: list[dict]) -> dict:
    def spread(values: list[float]) -> dict:
        sd = statistics.stdev(values) if len(values) > 1 else None
        return {"mean": statistics.fmean(values), "sd": sd, "values": values}

    out = {}
    for scheme in SCHEMES:
        rs = [r for r in records if r["scheme"] == scheme]
        if rs:
            out[scheme] = {
                "seeds": [r["seed"] for r in rs],
                "mlm_acc_at_mask": spread([r["final_eval"]["mlm_acc_at_mask"] for r in rs]),
                "mlm_acc": spread([r["final_eval"]["mlm_acc"] for r in rs]),
                "nsp_acc": spread([r["final_eval"]["nsp_acc"] for r in rs]),
                "mlm_loss": spread([r["final_eval"]["mlm_loss"] for r in rs]),
                "at_mask_over_baseline": spread([r["mlm_acc_at_mask_over_baseline"] for r in rs]),
            }
    return out


def export_model(run_dir: Path, dest: Path = MODEL_DIR) -> dict:
    """The run's final weights in float16 (tied weights once), its config and tokenizer."""
    import torch
    from safetensors.torch import save_model

    from bertcourse.pretraining.checkpoint import load_checkpoint

    model, _ = load_checkpoint(run_dir)
    dest.mkdir(parents=True, exist_ok=True)
    save_model(model.to(torch.float16), str(dest / "model.safetensors"))
    for name in ("config.json", "tokenizer.json"):
        shutil.copyfile(run_dir / "checkpoint" / name, dest / name)
    return {"from": str(run_dir.relative_to(ROOT)), "dtype": "float16",
            "bytes": {p.name: p.stat().st_size for p in sorted(dest.iterdir())}}  # fmt: skip


def cross_evaluation(path: Path) -> dict:
    """A run's final weights on both sets of held-out questions: single characters masked (what
    every run is scored on) and whole words masked (what a whole-word run trained on)."""
    from bertcourse.pretraining.evaluation import evaluate_checkpoint

    out = {}
    for name, whole in (("characters_masked", False), ("whole_words_masked", True)):
        res = evaluate_checkpoint(path, whole_word_mask=whole)
        out[name] = {k: res[k] for k in ("mlm_acc_at_mask", "mlm_acc", "mlm_loss", "n_predictions")}
        out[name]["unigram_acc"] = res["unigram_baseline"]["mlm_acc"]
    return out


def collect(args: argparse.Namespace) -> dict:
    from benchmarks.provenance import provenance

    records = []
    for scheme in SCHEMES:
        for seed in range(10):
            path = run_dir(scheme, seed, args.steps)
            if (path / "report.json").is_file():
                report = json.loads((path / "report.json").read_text())
            elif args.stopped and (path / "checkpoint").is_dir():
                report = stopped_run_report(path)
            else:
                continue
            records.append(run_record(scheme, seed, args.steps, report))
    if not records:
        raise SystemExit(f"no finished run in {RUNS / str(args.steps)}: run `train` first")
    flops = step_flops()
    models, cross = {}, {}
    for scheme, dest in MODEL_DIRS.items():
        seed0 = run_dir(scheme, 0, args.steps)
        if args.model and (seed0 / "checkpoint" / "model.safetensors").is_file():
            models[scheme] = export_model(seed0, dest)
            cross[scheme] = cross_evaluation(seed0)
    out = {
        **provenance("benchmarks/zh_pretraining.py", sys.argv[1:], WATCHED),
        "conditions": args.conditions,
        "steps": args.steps,
        "recipe_steps": STEPS,
        "steps_reason": {
            "english_idle_10_minute_steps": list(ENGLISH_IDLE_STEPS),
            "gflop_per_step": flops,
            "steps_if_time_followed_flops": round(
                statistics.fmean(ENGLISH_IDLE_STEPS) * flops["en"] / flops["zh"]
            ),
        },
        "recipe": {
            k: v
            for k, v in asdict(recipe("char", steps=args.steps)).items()
            if k not in ("output_dir", "seed", "whole_word_mask")
        },  # fmt: skip
        "runs": records,
        "summary": summary(records),
        "first_steps": {scheme: first_steps(scheme, args.steps) for scheme in SCHEMES},
        "model": models.get("char"),
        "models": models,
        "seed0_cross_evaluation": cross,
    }
    args.json.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    return out


def train_one(args: argparse.Namespace) -> None:
    command = run_command(args.scheme, args.seed, args.steps, args.device)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    subprocess.run([sys.executable, *command[1:]], cwd=ROOT, env=env, check=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    t = sub.add_parser("train", help="one run of the recipe")
    t.add_argument("--scheme", choices=sorted(SCHEMES), required=True)
    t.add_argument("--seed", type=int, required=True)
    t.add_argument("--steps", type=int, default=STEPS, help=f"default {STEPS}, the recipe's")
    t.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="default cpu")
    c = sub.add_parser("collect", help="the JSON from the finished runs, and the model")
    c.add_argument("--json", type=Path, default=DEFAULT_JSON)
    c.add_argument("--steps", type=int, default=STEPS, help="collect the runs of this schedule")
    c.add_argument(
        "--no-model", dest="model", action="store_false", help="do not export the seed-0 model"
    )
    c.add_argument(
        "--stopped", action="store_true", help="also runs stopped early: their last checkpoint"
    )
    c.add_argument("--conditions", default="", help="the machine's load while the runs ran")
    args = parser.parse_args(argv)
    if args.what == "train":
        train_one(args)
    else:
        collect(args)


if __name__ == "__main__":
    main()
