"""Chapter 10: the training curves of the grid's pretraining runs, for the page to draw.

`benchmarks/ablations.json` keeps what each run ended at; how it got there (a run that sits on a
plateau for longer than the others, say) is in each run's report in the grid's work folder,
which is not committed. This script reads the report of every run of every row in the JSON and
writes its training MLM loss, the mean of each 100 steps (`ablations_rate_probe.curve`), with
the unigram baseline's loss on the held-out questions, to `benchmarks/figures/ablations_curves.json`:

    python benchmarks/ablations.py --jobs 2      # the grid
    python benchmarks/ablations_curves.py        # then its curves

A run whose report is not the run the JSON measured (other tokens) stops the script with the
path: the curves are always those of the measured runs. The work folder is not committed, so a
new checkout lacks the reports of the rows measured before it; a run whose report is missing
keeps its curve from the JSON written before (`--json`), if that curve is of the run the grid
measured (its steps, and its tokens where it records them), and otherwise stops the script with
the report's path.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import ablations  # noqa: E402
from benchmarks.ablations_rate_probe import curve  # noqa: E402

DEFAULT_JSON = ablations.ROOT / "benchmarks" / "figures" / "ablations_curves.json"


def run_curve(row: dict, seed: int, work: Path, kept: dict[tuple[str, int], dict]) -> dict:
    """The curve of `row`'s run with `seed`, checked against what the grid measured: from its
    report in `work`, or else the one `kept` from the JSON written before."""
    path = work / "pretrain" / f"{row['name']}-s{seed}" / "report.json"
    i = row["seeds"].index(seed)
    tokens, steps = row["metrics"]["tokens_seen"][i], row["token_budget"]["steps"][i]
    if not path.is_file():
        old = kept.get((row["name"], seed))
        if old is None or old["steps"] != steps or old.get("tokens_seen", tokens) != tokens:
            raise SystemExit(f"{path}: no report of {row['name']}'s seed {seed}, and no curve of "
                             "that run in --json (give the grid's --work)")  # fmt: skip
        return old
    report = json.loads(path.read_text())
    if report["tokens_seen"] != tokens:
        raise SystemExit(f"{path} read {report['tokens_seen']:,} tokens, the grid's run {tokens:,}: "
                         "not the run that benchmarks/ablations.json measured")  # fmt: skip
    return {"row": row["name"], "seed": seed, "steps": report["steps_done"],
            "tokens_seen": report["tokens_seen"], "curve": curve(report),
            "unigram_mlm_loss": report["unigram_baseline"]["mlm_loss"]}  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=ablations.DEFAULT_WORK,
                        help="the grid's work folder")  # fmt: skip
    parser.add_argument("--grid", type=Path, default=ablations.DEFAULT_JSON,
                        help="the grid's results")  # fmt: skip
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    grid = json.loads(args.grid.read_text())
    before = json.loads(args.json.read_text())["runs"] if args.json.is_file() else []
    kept = {(r["row"], r["seed"]): r for r in before}
    runs = [run_curve(row, seed, args.work, kept) for row in grid["rows"] for seed in row["seeds"]]
    from benchmarks import zh_finetune as zf

    watched = [*ablations.WATCHED, "benchmarks/ablations_curves.py"]
    result = zf.run_provenance(sys.argv[1:] if argv is None else argv, "benchmarks/ablations_curves.py",
                               watched) | {"runs": runs}  # fmt: skip
    ablations.write_json(args.json, result)
    print(f"wrote {args.json}: {len(runs)} runs of {len(grid['rows'])} rows")
    return result


if __name__ == "__main__":
    main()
