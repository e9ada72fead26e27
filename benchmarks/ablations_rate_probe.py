"""Chapter 10: did the rows that never show a chosen token itself fail because of the peak rate?

The grid (`benchmarks/ablations.py`) keeps the recipe's peak learning rate, 2e-3, in every row:
an ablation changes one thing. At that rate always [MASK] (`split-100-0-0`) did not learn: in
all three runs its held-out MLM accuracy ended at the unigram baseline's; 80/0/20
(`split-80-0-20`), whose chosen tokens never show themselves either, stayed within 0.004 of
it (0/0/100, measured after this probe ran, ended at the baseline too).
This probe asks whether a lower rate rescues them. It pretrains `base` and those two rows,
seed 0, at a peak rate four times lower, 5e-4, with everything else as in the grid, and writes
the training MLM loss of each row at both rates (the runs at 2e-3 are the grid's own, read from
its work folder) and their held-out scores to `benchmarks/figures/ablations_rate_probe.json`,
which chapter 10 plots. One seed and one lower rate: a probe of the cause, not a row of the grid (it changes a
second setting, so it is compared with nothing but itself).

    python benchmarks/ablations.py --rows base split-100-0-0 split-80-0-20 --seeds 0   # the 2e-3 runs
    python benchmarks/ablations_rate_probe.py                                           # the rest

The runs at 5e-4 go to `<work>/rate-probe/<row>-lr<rate>-s<seed>/`; a finished run there
(its report.json) is reused when it was pretrained with the same settings, so the command can
be repeated. Each costs what a run of the grid costs (its report's `train_seconds`). A run's training loss is logged every 10 steps (`log_every`); the JSON keeps the mean of
each 100 steps.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import ablations  # noqa: E402

ROWS = ("base", "split-100-0-0", "split-80-0-20")
RECIPE_RATE = 2e-3  # bertcourse.pretraining.config's peak rate, every row of the grid
LOWER_RATE = 5e-4
SEED = 0
BIN = 100  # steps averaged into one point of a curve
NOT_TRAINING = ("checkpoint_every", "eval_every", "log_every", "progress", "plots", "measure_peak",
                "peak_gflops")  # fmt: skip
"""Settings that change what a run reports, not what it trains: two runs that differ only in
these train the same weights."""
DEFAULT_JSON = ablations.ROOT / "benchmarks" / "figures" / "ablations_rate_probe.json"


def training_settings(cfg_fields: dict) -> dict:
    """What a run trains, but its rate (and where and how it ran, which changes no weight)."""
    return {
        k: v for k, v in cfg_fields.items() if k not in (*NOT_TRAINING, *ablations.RUN_ONLY, "lr")
    }


def probe_config(row: str, rate: float, work: Path, device: str):
    """The grid's configuration of `row`, seed `SEED`, at peak rate `rate`."""
    folder = (work / "pretrain" / f"{row}-s{SEED}" if rate == RECIPE_RATE
              else work / "rate-probe" / f"{row}-lr{rate:g}-s{SEED}")  # fmt: skip
    cfg = ablations.pretrain_config(
        ablations.ROWS[row], SEED, ablations.Budget(), device, folder, None
    )
    if cfg.lr != RECIPE_RATE:
        raise SystemExit(
            f"the recipe's peak rate is now {cfg.lr:g}, not {RECIPE_RATE:g}: update RECIPE_RATE"
        )
    return cfg.replace(lr=rate)


def finished_report(cfg) -> dict | None:
    """The report of a finished run of `cfg` in its folder, refusing one trained otherwise."""
    path = Path(cfg.output_dir) / "report.json"
    if not path.is_file():
        return None
    report = json.loads(path.read_text())
    kept, asked = report["config"], ablations.settings(cfg)
    if training_settings(kept) != training_settings(asked) or kept["lr"] != cfg.lr:
        changed = sorted(k for k in {*training_settings(kept), *training_settings(asked), "lr"}
                         if kept.get(k) != asked.get(k))  # fmt: skip
        raise SystemExit(f"{path} was pretrained with other settings ({', '.join(changed)}): "
                         "move it away to run it again")  # fmt: skip
    if report["steps_done"] != cfg.steps:
        return None  # cut short: pretraining again goes on from its checkpoint
    return report


def curve(report: dict) -> dict:
    """The training MLM loss, the mean of each `BIN` steps' logged windows."""
    bins: dict[int, list[float]] = {}
    for window in report["history"]["train"]:
        bins.setdefault((window["step"] - 1) // BIN, []).append(window["mlm_loss"])
    return {"step": [(b + 1) * BIN for b in sorted(bins)],
            "mlm_loss": [round(statistics.mean(bins[b]), 4) for b in sorted(bins)]}  # fmt: skip


def run_probe(row: str, rate: float, work: Path, device: str) -> dict:
    from bertcourse import pretrain

    cfg = probe_config(row, rate, work, device)
    report = finished_report(cfg)
    if report is None and rate == RECIPE_RATE:
        raise SystemExit(f"no finished grid run in {cfg.output_dir}: first run "
                         f"python benchmarks/ablations.py --rows {row} --seeds {SEED}")  # fmt: skip
    if report is None:
        checkpoint = Path(cfg.output_dir) / "checkpoint" / "trainer_state.pt"
        report = pretrain.run(
            cfg.replace(resume=str(cfg.output_dir)) if checkpoint.is_file() else cfg
        )
    return {"row": row, "mask_split": report["config"]["mask_split"], "lr": rate, "seed": SEED,
            "folder": os.path.relpath(cfg.output_dir, ablations.ROOT),
            "steps": report["steps_done"], "tokens_seen": report["tokens_seen"],
            "final_eval": report["final_eval"], "unigram_baseline": report["unigram_baseline"],
            "curve": curve(report)}  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--work", type=Path, default=ablations.DEFAULT_WORK, help="the grid's work folder"
    )
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    from benchmarks import zh_finetune as zf

    runs = [
        run_probe(row, rate, args.work, args.device)
        for row in ROWS
        for rate in (RECIPE_RATE, LOWER_RATE)
    ]
    watched = [*ablations.WATCHED, "benchmarks/ablations_rate_probe.py"]
    result = zf.run_provenance(sys.argv[1:] if argv is None else argv, "benchmarks/ablations_rate_probe.py",
                               watched) | {"runs": runs}  # fmt: skip
    ablations.write_json(args.json, result)
    for r in runs:
        print(
            f"{r['row']:<14} lr {r['lr']:g}: held-out MLM acc {r['final_eval']['mlm_acc']:.4f} "
            f"(at [MASK] {r['final_eval']['mlm_acc_at_mask']:.4f}; unigram {r['unigram_baseline']['mlm_acc']:.4f})"
        )
    print(f"wrote {args.json}")
    return result


if __name__ == "__main__":
    main()
