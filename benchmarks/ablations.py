"""Chapter 10: were BERT's pretraining choices right? The paper's ablations, re-run on the
course's Chinese BERT (issue 38).

Every row pretrains the `--lang zh` recipe with one choice changed, for the same budget (the
same number of steps of the same batch of pairs of at most 64 tokens: the 9,000 steps that 10
idle minutes give, `bertcourse.zh.PRETRAIN_RECIPE`; the tokens each run saw are recorded),
then fine-tunes it on chapter 9's two tasks with `benchmarks/zh_finetune.py`'s protocol: a grid
of learning rates, validation after every epoch, the rate and epoch chosen by the mean
validation score over the row's seeds, the test set scored once per seed with the chosen
weights. It also records the held-out accuracy at [MASK] (the same questions for every run:
15% of single characters, 80/10/10, `bertcourse.pretraining.evaluation`), which means little
for a row whose training never shows [MASK] (`mask_acc_comparable`).

The reference row `base` is BERT's choices on the course's recipe: 15% of tokens, MASK/SAME/RND
80/10/10, NSP, dynamic masking, single characters. The other rows change one thing:

- BERT Table 8's splits: 100/0/0, 80/0/20, 80/20/0, 0/20/80, 0/0/100;
- the masking rate, 40% (Wettig et al. 2023): with 80/10/10, and with the best split at 15%
  (`--best-split`, else read from the split rows already in the JSON);
- the sentence task: ALBERT's sentence order (SOP), none (RoBERTa);
- static masking: the original release's data, cut and masked once in `STATIC_COPIES` copies;
- whole-word masking (Chinese-BERT-wwm): the gold words, jieba's words.

    python benchmarks/ablations.py --rows base split-100-0-0 --seeds 0 1 2 --device cuda
    python benchmarks/ablations.py --smoke --rows base sop --seeds 0 --json /tmp/ablations.json

Rows already in the JSON are kept; a row run again replaces its entry (so rows can be run and
committed as they finish). Each row holds `name`, `config` (what it changes, and the run's whole
`PretrainConfig`), `seeds`, `metrics` (one value per seed: `seg_f1`, `reviews_acc`, `mask_acc`,
`mlm_acc`, `tokens_seen`) and the fine-tuning choices; `comparisons` holds each row against its
reference, paired by seed (`bertcourse.stats.paired_comparison`: "differs" only beyond 2 SE).
`--smoke` is CI's tiny slice (a one-layer model, a few steps, `zh_finetune.QUICK`): never the
committed file.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks import zh_finetune as zf  # noqa: E402
from bertcourse import zh  # noqa: E402
from bertcourse import zh_tasks as zt  # noqa: E402
from bertcourse.mlm import MaskSplit  # noqa: E402
from bertcourse.pretraining.config import PretrainConfig  # noqa: E402
from bertcourse.stats import paired_comparison  # noqa: E402

DEFAULT_JSON = ROOT / "benchmarks" / "ablations.json"
WATCHED = ["bertcourse", "benchmarks/ablations.py", "benchmarks/zh_finetune.py"]
METRICS = ("seg_f1", "reviews_acc", "mask_acc", "mlm_acc", "tokens_seen")
TASK_METRIC = {"segmentation": "seg_f1", "reviews": "reviews_acc"}
STATIC_COPIES = 4
"""--static-masking's copies: the 9,000 steps of 32 pairs are ~11 epochs of the corpus, so each
fixed mask is seen about 3 times (BERT's original: 10 copies over ~40 epochs, 4 times each)."""
BASE = {"mlm_probability": 0.15}
"""The reference: BERT's 15% on the course's recipe (80/10/10, NSP, dynamic, characters)."""


@dataclass(frozen=True)
class Row:
    name: str
    question: str
    options: dict = field(default_factory=dict)  # PretrainConfig changes over BASE
    reference: str = "base"  # the row it is compared with, seed by seed


def _split(mask: float, same: float, rnd: float) -> Row:
    name = f"split-{round(100 * mask)}-{round(100 * same)}-{round(100 * rnd)}"
    return Row(name, "Table 8: what a chosen token shows (MASK/SAME/RND)",
               {"mask_split": MaskSplit(mask, same, rnd)})  # fmt: skip


ROWS = {
    row.name: row
    for row in [
        Row("base", "BERT's choices: 15%, 80/10/10, NSP, dynamic, characters", {}, ""),
        _split(1.0, 0.0, 0.0),
        _split(0.8, 0.0, 0.2),
        _split(0.8, 0.2, 0.0),
        _split(0.0, 0.2, 0.8),
        _split(0.0, 0.0, 1.0),
        Row("rate-40", "Wettig et al.: 40% of tokens, 80/10/10", {"mlm_probability": 0.4}),
        Row("rate-40-best-split", "40% with the best split at 15%", {"mlm_probability": 0.4}),
        Row("sop", "ALBERT: sentence order instead of NSP", {"sentence_task": "sop"}),
        Row("no-sentence-task", "RoBERTa: no sentence task", {"sentence_task": "none"}),
        Row(
            "static",
            f"the original's static masks, {STATIC_COPIES} copies",
            {"static_masking": STATIC_COPIES},
        ),  # fmt: skip
        Row("wwm-gold", "whole words (the gold segmentation)", {"whole_word_mask": True}),
        Row(
            "wwm-jieba", "whole words (jieba's)", {"whole_word_mask": True, "word_source": "jieba"}
        ),  # fmt: skip
    ]
}


@dataclass(frozen=True)
class Budget:
    """What every row's pretraining gets (the same for all rows of one JSON)."""

    steps: int = zh.PRETRAIN_RECIPE["steps"]
    model: dict = field(default_factory=dict)  # PretrainConfig model changes (none: tiny)
    eval_examples: int = zh.PRETRAIN_RECIPE["eval_examples"]
    threads: int = 1


SMOKE = Budget(steps=3, model={"model": "custom", "layers": 1, "hidden": 64, "heads": 2,
                               "intermediate": 128, "batch_size": 8}, eval_examples=32)  # fmt: skip


# --- One row -----------------------------------------------------------------------------------


def best_split(rows: dict[str, dict]) -> MaskSplit:
    """The split at 15% with the best mean of the two downstream scores over the seeds."""
    candidates = {n: r for n, r in rows.items() if n == "base" or n.startswith("split-")}
    if not candidates:
        raise SystemExit("rate-40-best-split needs the split rows first (or --best-split M,S,R)")

    def mean_score(r: dict) -> float:
        return statistics.mean(r["metrics"]["seg_f1"] + r["metrics"]["reviews_acc"])

    best = max(sorted(candidates), key=lambda n: mean_score(candidates[n]))
    return MaskSplit(**candidates[best]["config"]["pretrain"]["mask_split"])


def row_options(row: Row, split: MaskSplit | None) -> dict:
    """What the row changes in the zh recipe (BASE, the row's own choice)."""
    options = {**BASE, **row.options}
    if row.name == "rate-40-best-split":
        if split is None:
            raise ValueError("rate-40-best-split needs the best split (--best-split M,S,R)")
        options["mask_split"] = split
    return options


def pretrain_config(row: Row, seed: int, budget: Budget, device: str, out: Path, split: MaskSplit | None) -> PretrainConfig:  # fmt: skip
    return PretrainConfig.for_language(
        "zh", **row_options(row, split), **budget.model, steps=budget.steps, seed=seed,
        eval_examples=budget.eval_examples,
        output_dir=str(out), device=device, threads=budget.threads, progress=False,
        plots=False, measure_peak=False, checkpoint_every=0, eval_every=0,
    )  # fmt: skip


def _new_model(task: str, pretrained: torch.nn.Module, seed: int, device: str) -> torch.nn.Module:
    """The task's model: the pretrained encoder, a new head drawn from `seed`."""
    from bertcourse.model import BertForSequenceClassification

    torch.manual_seed(seed)
    if task == "reviews":
        model = BertForSequenceClassification(pretrained.config, len(zh.REVIEW_LABELS))
    else:
        model = zt.BertForTokenClassification(pretrained.config, len(zh.TAGS))
    model.bert.load_state_dict(pretrained.bert.state_dict())
    return model.to(device)


def _task_data(setup: zf.Setup, task: str, tokenizer) -> dict:
    if task == "reviews":
        texts = zf.review_texts(setup)
        return {n: zt.encode_classification(tokenizer, *texts[n])[0].to(setup.device)
                for n in zf.SPLITS}  # fmt: skip
    sentences = zf.segmentation_sentences(setup)
    return {n: zf.on_device(zt.encode_tagging(tokenizer, sentences[n]), setup.device)
            for n in zf.SPLITS}  # fmt: skip


def finetune_row(name: str, checkpoints: dict[int, Path], setup: zf.Setup, state_dir: str) -> dict:
    """zh_finetune's protocol for one row: every (task, rate, seed) trained, validation after
    every epoch, (rate, epoch) chosen by the mean over the seeds, test once per seed."""
    from bertcourse.pretraining.checkpoint import load_checkpoint

    result: dict = {"chosen": {}, "test": {}}
    for task in zf.TASKS:
        runs, states = [], {}
        for seed, path in checkpoints.items():
            pretrained, tokenizer = load_checkpoint(path)
            splits = _task_data(setup, task, tokenizer)
            for rate in setup.rates:
                model = _new_model(task, pretrained, seed, setup.device)
                _, epochs = zt.fine_tune(model, splits["train"], setup.recipe(rate, seed), splits["validation"])  # fmt: skip
                spec = {"task": task, "init": name, "rate": rate, "seed": seed}
                runs.append({"spec": spec, "epochs": [{"epoch": e.epoch, "validation": e.validation} for e in epochs]})  # fmt: skip
                for e in epochs:
                    states[(rate, seed, e.epoch)] = Path(state_dir) / f"{name}-{task}-{rate:g}-{seed}-{e.epoch}.pt"  # fmt: skip
                    torch.save(e.state, states[(rate, seed, e.epoch)])
        choice = result["chosen"][task] = zf.choose(runs, task, name)
        scores = []
        for seed, path in checkpoints.items():
            pretrained, tokenizer = load_checkpoint(path)
            model = _new_model(task, pretrained, seed, setup.device)
            model.load_state_dict(torch.load(states[(choice["rate"], seed, choice["epoch"])]))
            scores.append(zt.score(model, _task_data(setup, task, tokenizer)["test"]))
        result["test"][TASK_METRIC[task]] = scores
    return result


def run_row(row: Row, seeds: list[int], budget: Budget, setup: zf.Setup, split: MaskSplit | None, work: Path) -> dict:  # fmt: skip
    """Pretrain the row once per seed, then fine-tune and score it; the row's JSON entry."""
    from bertcourse.pretrain import run

    checkpoints, reports, config = {}, {}, None
    for seed in seeds:
        cfg = pretrain_config(row, seed, budget, setup.device, work / f"{row.name}-s{seed}", split)
        started = time.perf_counter()
        reports[seed] = run(cfg) | {"seconds": round(time.perf_counter() - started, 1)}
        checkpoints[seed] = Path(cfg.output_dir)
        config = {
            k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("seed", "output_dir")
        }
    with tempfile.TemporaryDirectory() as state_dir:
        tuned = finetune_row(row.name, checkpoints, setup, state_dir)
    final = [reports[s]["final_eval"] for s in seeds]
    split_used = MaskSplit(**config["mask_split"])
    return {
        "name": row.name,
        "question": row.question,
        "reference": row.reference,
        "config": {
            "changes": {
                k: str(v) if isinstance(v, MaskSplit) else v
                for k, v in row_options(row, split).items()
            },
            "pretrain": config,
        },  # fmt: skip
        "seeds": list(seeds),
        "metrics": {
            "seg_f1": tuned["test"]["seg_f1"],
            "reviews_acc": tuned["test"]["reviews_acc"],
            "mask_acc": [f["mlm_acc_at_mask"] for f in final],
            "mlm_acc": [f["mlm_acc"] for f in final],
            "tokens_seen": [reports[s]["tokens_seen"] for s in seeds],
        },
        "mask_acc_comparable": split_used.mask > 0,  # a model that never saw [MASK] in training
        "finetune_chosen": tuned["chosen"],
        "pretrain_seconds": [reports[s]["seconds"] for s in seeds],
    }


# --- The file ----------------------------------------------------------------------------------


def _by_seed(row: dict, metric: str, seeds: list[int]) -> list[float]:
    return [row["metrics"][metric][row["seeds"].index(s)] for s in seeds]


def comparisons(rows: dict[str, dict]) -> list[dict]:
    """Each row against its reference on every downstream metric, paired by the common seeds."""
    out = []
    for name, row in rows.items():
        ref = rows.get(row["reference"])
        if ref is None:
            continue
        common = [s for s in row["seeds"] if s in ref["seeds"]]
        if len(common) < 2:
            continue
        for metric in ("seg_f1", "reviews_acc", "mask_acc"):
            c = paired_comparison(_by_seed(row, metric, common), _by_seed(ref, metric, common))
            out.append({"row": name, "against": ref["name"], "metric": metric, "seeds": common,
                        **dataclasses.asdict(c)})  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--steps", type=int, default=Budget.steps,
                        help="pretraining steps of every row (default: the zh recipe's 9,000)")  # fmt: skip
    parser.add_argument("--best-split", type=MaskSplit.parse, help="M,S,R for rate-40-best-split")
    parser.add_argument("--smoke", action="store_true", help="CI's tiny slice (needs --json)")
    parser.add_argument("--json", type=Path, help=f"default {DEFAULT_JSON.relative_to(ROOT)}")
    parser.add_argument("--work", type=Path, help="where the runs go (default: a temporary folder)")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here")
    if args.smoke and args.json is None:
        raise SystemExit("--smoke writes a slice, never the committed file: give --json PATH")
    if args.steps < 1:
        raise SystemExit(f"--steps must be at least 1, got {args.steps}")
    budget = SMOKE if args.smoke else Budget(steps=args.steps)
    setup = dataclasses.replace(zf.QUICK if args.smoke else zf.Setup(seeds=tuple(args.seeds)),
                                device=args.device)  # fmt: skip
    path = args.json or DEFAULT_JSON
    previous = json.loads(path.read_text()) if path.is_file() else {}
    if previous and previous.get("budget") != dataclasses.asdict(budget):
        raise SystemExit(f"{path} holds rows of another budget {previous.get('budget')}: "
                         "give another --json")  # fmt: skip
    rows = {r["name"]: r for r in previous.get("rows", [])}
    record = zf.run_provenance(argv) | {"command": "python benchmarks/ablations.py " + " ".join(argv)}  # fmt: skip
    torch.set_num_threads(budget.threads)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        for name in args.rows:
            split = args.best_split or (best_split(rows) if name == "rate-40-best-split" else None)
            rows[name] = run_row(ROWS[name], args.seeds, budget, setup, split, work)
            print(f"[{time.perf_counter() - started:7.1f} s] {name}: "
                  + ", ".join(f"{m} {rows[name]['metrics'][m]}" for m in METRICS), flush=True)  # fmt: skip
    ordered = [rows[n] for n in ROWS if n in rows]
    result = {
        **record,
        "smoke": args.smoke,
        "device": args.device,
        "budget": dataclasses.asdict(budget),
        "finetune_setup": dataclasses.asdict(setup),
        "rows": ordered,
        "comparisons": comparisons({r["name"]: r for r in ordered}),
        "seconds_this_command": round(time.perf_counter() - started, 1),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
