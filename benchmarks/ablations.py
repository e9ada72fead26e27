"""Chapter 10: were BERT's pretraining choices right? The paper's ablations, re-run on the
course's Chinese BERT (issue 38).

Every row pretrains the `--lang zh` recipe with one choice changed, for the same budget: the
tokens that the reference row reads in the 9,000 steps of 32 pairs of at most 64 tokens that 10
idle minutes give (`bertcourse.zh.PRETRAIN_RECIPE`), seed by seed. A row that changes only the
masking (`MASKING_ONLY`: the rate, the split, whole words) reads the reference's very pairs in
the same 9,000 steps. A row that changes how pairs are cut or read (`matches_tokens`: SOP and
no sentence task cut consecutive pairs only, shorter; static masking re-reads its copies) gets
the steps whose pairs hold the reference's tokens: before it trains, a "budget" unit builds the
exact batches both runs read (the same seed, every epoch they cover) and takes the step count
whose running total of tokens comes closest, within half a batch's tokens (about 1,000 of 18
million). Each row records its steps, the reference's tokens and its own (`token_budget`,
`metrics.tokens_seen`). Measured on 2026-11-28 for seeds 0, 1, 2 (18.0 million tokens each):
SOP 9,470-9,482 steps, no sentence task 9,477-9,482, static masking 8,995-9,004, each within
0.005% of base's tokens; at 9,000 steps SOP and no sentence task would read 4.97-5.08% fewer,
static masking 0.06% more to 0.04% fewer. Each run is then fine-tuned on chapter 9's two tasks
with `benchmarks/zh_finetune.py`'s protocol and code (`RunSpec`, `run_one`, `choose`,
`test_score`; the pretraining run's folder is the initialisation): a grid of learning rates,
validation after every epoch, the rate and epoch chosen by the mean validation score over the
row's seeds, the test set scored once per seed with the chosen weights. It also records the
held-out accuracy at [MASK] (the same questions for every run: 15% of single characters,
80/10/10, `bertcourse.pretraining.evaluation`), which means little for a row whose split never
shows [MASK] (`mask_acc_comparable`; it meets [MASK] only when a random draw gives it, one in
the vocabulary's size), and at the random characters of the same questions (`random_acc`),
where such a row is judged whether it learned at all (`pretraining_learned`).

The reference row `base` is BERT's choices on the course's recipe: 15% of tokens, MASK/SAME/RND
80/10/10, NSP, dynamic masking, single characters. The other rows change one thing:

- BERT Table 8's splits: 100/0/0, 80/0/20, 80/20/0, 0/20/80, 0/0/100;
- the masking rate, 40% (Wettig et al. 2023): with 80/10/10, and with the best other split at
  15% (`--best-split`, else the best of the split rows of the JSON and of this command besides
  80/10/10, which then waits for them);
- the sentence task: ALBERT's sentence order (SOP), none (no sentence loss, consecutive pairs
  kept: cf. the paper's Table 5 "No NSP"; RoBERTa dropped NSP);
- static masking: the original release's data, cut and masked once in `STATIC_COPIES` copies;
- whole-word masking (Chinese-BERT-wwm): the gold words, jieba's words.

**A grid of units, kept as they finish.** A row is 3 pretraining runs (one per seed; before
them, 3 budget units where the row reads other pairs), 24 fine-tuning runs (2 tasks x 4 rates x
3 seeds, 3 epochs each) and 6 test scores (a task and a seed). Each is a unit, run in one of
`--jobs` processes with one thread each, and kept in the work folder (`--work`, default
`.ablations-work/` at the repository root, ignored by git):

    budget/<row>-s<seed>.json   the steps that read the reference's tokens (`matches_tokens` rows)
    pretrain/<row>-s<seed>/     the pretraining run (checkpoint/ every CHECKPOINT_EVERY steps:
                                a run cut short goes on from its last one); unit.json when done
    finetune/<row>/<run>.json   a fine-tuning run's record, beside its epochs' weights (.pt)
    test/<row>/<task>-s<seed>.json   a test score, with the choice it used

Every record (and checkpoint) is written to a temporary file and renamed, and a unit is done
only when its record exists, so a command killed at any moment (`timeout`, a machine's cut) loses at most the units
in flight. The same command again skips what is done; `--stop-after-minutes M` submits no unit
after M minutes, waits for those running and exits with the number left. Units are taken in the
order of the rows (a row's pretraining, its fine-tuning, its tests) as soon as what they need is
done, so a command cut short leaves whole rows. A row enters the JSON when it is complete, with
its own provenance (the command, commit, date, device that completed it; the units' commits,
dates and devices; their seconds). Then its epoch weights are deleted (its records stay), as
are a finished pretraining run's optimizer state (`trainer_state.pt`). A row already in the JSON
with the same seeds is not run again. Units do not record the code they ran beyond the commit:
after a change to the code they run, start a new work folder.

Finishing the grid (the default: every row, seeds 0 1 2, written to benchmarks/ablations.json):

    # a CPU over several days: the same command, again after each stop, until it says 0 left
    mkdir -p .ablations-work && nohup python benchmarks/ablations.py --jobs 2 >> .ablations-work/log 2>&1 &
    # what is left, without running anything (and the complete rows written)
    python benchmarks/ablations.py --stop-after-minutes 0
    # a machine whose commands are cut at 10 minutes: repeat until no unit remains (where
    # the work folder is not kept between commands, the rows not complete start again)
    timeout 590 python benchmarks/ablations.py --device cuda --jobs 16 --stop-after-minutes 7
    # a subset, or CI's tiny slice (a temporary work folder unless --work is given)
    python benchmarks/ablations.py --rows base split-100-0-0 --seeds 0 1 2
    python benchmarks/ablations.py --smoke --rows base sop --seeds 0 --json /tmp/ablations.json

Cost, measured 2026-11-28 on the course's 2-core CPU machine, one thread, at a load of about 2
from other work: a pretraining step of the zh recipe 0.18 s (200 steps timed: a run of 9,000 steps
~27 minutes); a fine-tuning epoch (the first 100 steps timed) of the reviews 90 s (435 steps,
0.21 s each) and of the segmentation 48 s (307 steps, 0.155 s each), validation 2-3 s, a test
score 3 s (reviews) and 8 s (segmentation). A row is then ~2.8 hours of one core (pretraining
1.4 h, reviews 0.9 h, segmentation 0.5 h), the 13 rows ~36 hours: ~18 hours with `--jobs 2` if
the two cores are free (not counted: jieba's segmentation of the corpus at the start of each
wwm-jieba pretraining run, and the 9 budget units, under a minute each at a load of ~3.5). The
first two rows (`row_hours`: their jobs' own wall-clock hours, one thread each, at a load of 2
to 5 on the 2 cores): base 2.69, split-100-0-0 2.30.

Rows of another budget (steps, model, held-out size) or fine-tuning protocol (data, rates,
epochs) are refused, in the JSON and in the work folder. Each row holds `name`, `config` (what
it changes, and the run's whole `PretrainConfig` but its seed and steps), `seeds`, `metrics`
(one value per seed: `seg_f1`, `reviews_acc`, `mask_acc`, `random_acc`, `mlm_acc`,
`tokens_seen`), `unigram` (the unigram baseline's accuracy at each kind of held-out position),
`token_budget` (per seed: its `steps` and, where they were matched, the `reference_tokens`;
null where the row reads the reference's own pairs and steps), `first_windows` (per seed: the
first `FIRST_WINDOWS` logged training windows, the step each ends at and its mean MLM and
sentence losses: what CI re-runs on a CPU for base's seed 0), the fine-tuning choices and its
`provenance`; `comparisons` holds each row against its reference, paired by seed
(`bertcourse.stats.paired_comparison`: "differs" only beyond 2 SE). `--smoke` is CI's tiny
slice (a one-layer model, a few steps, `zh_finetune.QUICK`): never the committed file."""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks import zh_finetune as zf  # noqa: E402
from bertcourse import zh  # noqa: E402
from bertcourse.mlm import MaskSplit  # noqa: E402
from bertcourse.pretraining.config import PretrainConfig  # noqa: E402
from bertcourse.stats import paired_comparison  # noqa: E402

DEFAULT_JSON = ROOT / "benchmarks" / "ablations.json"
DEFAULT_WORK = ROOT / ".ablations-work"
WATCHED = ["bertcourse", "benchmarks/ablations.py", "benchmarks/zh_finetune.py"]
METRICS = ("seg_f1", "reviews_acc", "mask_acc", "random_acc", "mlm_acc", "tokens_seen")
STATIC_COPIES = 4
"""--static-masking's copies: the 9,000 steps of 32 pairs are ~11 epochs of the corpus, so each
fixed mask is seen about 3 times (RoBERTa's static baseline: 10 copies over 40 epochs, 4 times
each)."""
BASE = {"mlm_probability": 0.15}
"""The reference: BERT's 15% on the course's recipe (80/10/10, NSP, dynamic, characters)."""
CHECKPOINT_EVERY = 1000
"""Pretraining steps between checkpoints: a run cut short goes on from its last one."""
UNIT_FILE = "unit.json"
"""Written in a pretraining run's folder when it is done (its report.json is not trusted: a
run killed while writing it, or stopped early, leaves one)."""
HELDOUT_FILE = "heldout.json"
"""A finished pretraining run's weights scored again on the held-out questions, by the kind of
position (`heldout_scores`), beside its unit.json."""
STAMP = ("bertcourse_commit", "date", "device", "device_name")
"""What each unit record says of the command that ran it."""
RUN_ONLY = ("output_dir", "device", "resume", "stop_after")
"""PretrainConfig fields that say where and how far one invocation ran, not what the run is:
not compared on reuse."""
MASKING_ONLY = ("mlm_probability", "mask_split", "whole_word_mask", "word_source")
"""PretrainConfig fields that change which tokens of a pair are chosen and what they show,
never which pairs a step reads nor their length: a row that changes only these reads its
reference's pairs, token for token, in the same steps."""
FIRST_WINDOWS = 5
"""The first logged training windows (`log_every` steps each) kept per run: CI's slice."""


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
        Row("rate-40-best-split", "40% with the best other split at 15%", {"mlm_probability": 0.4}),
        Row("sop", "ALBERT: sentence order instead of NSP", {"sentence_task": "sop"}),
        Row(
            "no-sentence-task",
            "no sentence loss, consecutive pairs kept (cf. BERT's No NSP)",
            {"sentence_task": "none"},
        ),  # fmt: skip
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


# --- What a row pretrains ----------------------------------------------------------------------


def best_split(rows: dict[str, dict]) -> MaskSplit:
    """The split at 15% with the best mean of the two downstream scores over the seeds, of the
    splits other than rate-40's (`RATE_40_SPLIT`): were it that one, rate-40-best-split would run
    rate-40's very runs again, where it can measure 40% with a second split."""
    candidates = {n: r for n, r in rows.items() if is_split_row(n)
                  and MaskSplit(**r["config"]["pretrain"]["mask_split"]) != RATE_40_SPLIT}  # fmt: skip
    if not candidates:
        raise SystemExit(NEEDS_SPLIT)

    def mean_score(r: dict) -> float:
        return statistics.mean(r["metrics"]["seg_f1"] + r["metrics"]["reviews_acc"])

    best = max(sorted(candidates), key=lambda n: mean_score(candidates[n]))
    return MaskSplit(**candidates[best]["config"]["pretrain"]["mask_split"])


NEEDS_SPLIT = "rate-40-best-split needs the split rows first (or --best-split M,S,R)"
RATE_40_SPLIT = MaskSplit()
"""rate-40's split: the recipe's, BERT's 80/10/10."""


def is_split_row(name: str) -> bool:
    """The rows at 15% that rate-40-best-split chooses its split from."""
    return name == "base" or name.startswith("split-")


def matches_tokens(row: Row) -> bool:
    """Whether `row` reads other pairs than its reference (it changes a setting besides the
    masking ones: the sentence task, static masking...): its steps are then the ones that read
    the reference's tokens (`match_tokens`), measured by a "budget" unit."""
    if not row.reference:
        return False
    ref = ROWS[row.reference].options
    return any(row.options.get(k) != ref.get(k) for k in {*row.options, *ref} - set(MASKING_ONLY))


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
        plots=False, measure_peak=False, checkpoint_every=CHECKPOINT_EVERY, eval_every=0,
    )  # fmt: skip


def settings(cfg: PretrainConfig) -> dict:
    """What a pretraining run is (as JSON reads it back), without where it ran (`RUN_ONLY`)."""
    fields = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in RUN_ONLY}
    return json.loads(json.dumps(fields))


# --- The same tokens for every row ---------------------------------------------------------------


@dataclass(frozen=True)
class TokenMatch:
    """A run's steps matched on the tokens of its reference's (the same seed)."""

    reference_steps: int
    reference_tokens: int  # what the reference's steps read (its tokens_seen)
    steps: int  # the steps whose tokens come closest to those
    tokens: int  # what they read (the run's tokens_seen): within half a batch's tokens


def training_corpus(cfg: PretrainConfig):
    """The corpus a run trains on (`bertcourse.pretrain`'s, held-out part removed)."""
    from bertcourse.pretraining.evaluation import split_heldout
    from bertcourse.textdata import load_corpus

    corpus, _ = load_corpus(cfg.tokenizer, lang=cfg.lang, text_files=cfg.text_files,
                            documents=cfg.documents, cache_dir=cfg.cache_dir)  # fmt: skip
    return split_heldout(corpus, cfg)[0]


def batch_tokens(cfg: PretrainConfig, corpus) -> Iterator[int]:
    """The real tokens of each batch a run reads, in order, epoch after epoch: the pairs of its
    data loader (`bertcourse.loaders.pretraining_dataloader`), unmasked (masking, whole words
    included, changes no length)."""
    from bertcourse.loaders import pretraining_dataloader

    if cfg.packing:
        raise ValueError("token matching counts unpacked pairs: a run with packing is not matched")  # fmt: skip
    for epoch in itertools.count():
        loader = pretraining_dataloader(corpus, batch_size=cfg.batch_size, epoch=epoch,
                                        seed=cfg.seed, max_seq_length=cfg.max_seq_length,
                                        task=cfg.sentence_task, static_masking=cfg.static_masking)  # fmt: skip
        if len(loader) == 0:
            raise ValueError(f"an epoch has fewer than {cfg.batch_size} pairs: nothing to count")
        lengths = [len(loader.dataset.examples[i].input_ids) for i in loader.sampler]
        for start in range(0, len(loader) * cfg.batch_size, cfg.batch_size):
            yield sum(lengths[start : start + cfg.batch_size])


def match_tokens(reference: PretrainConfig, cfg: PretrainConfig, corpus=None) -> TokenMatch:
    """The steps of `cfg` that read the tokens of `reference`'s steps (the same corpus, loaded
    unless given): the count whose running total of tokens comes closest, within half a
    batch's tokens."""
    corpus = training_corpus(cfg) if corpus is None else corpus
    budget = sum(itertools.islice(batch_tokens(reference, corpus), reference.steps))
    steps = tokens = 0
    for batch in batch_tokens(cfg, corpus):
        if tokens + batch / 2 >= budget:  # one more batch would go further past than short
            break
        steps, tokens = steps + 1, tokens + batch
    return TokenMatch(reference.steps, budget, steps, tokens)


# --- Files -----------------------------------------------------------------------------------


def write_json(path: Path, value: object) -> None:
    """`value` as JSON at `path`, whole or not at all (`zh_finetune.save_atomically`)."""
    text = json.dumps(value, indent=1, ensure_ascii=False) + "\n"
    zf.save_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def read_json(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


# --- The units -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """One piece of a row, done once and kept: the steps that read the reference's tokens (a
    row that reads other pairs, `matches_tokens`), a pretraining run (`task` and `rate` None for
    both), a fine-tuning run, or a test score (`rate` None)."""

    kind: str  # "budget", "pretrain", "finetune" or "test"
    row: str
    seed: int
    task: str | None = None
    rate: float | None = None

    def __str__(self) -> str:
        parts = [self.kind, self.row, self.task, None if self.rate is None else f"{self.rate:g}"]
        return " ".join(p for p in parts if p) + f" s{self.seed}"


@dataclass
class Grid:
    """Where a command's units live and what they share (the same in every process)."""

    work: Path
    budget: Budget
    setup: zf.Setup
    seeds: tuple[int, ...]
    stamp: dict  # what every unit record says of the command that ran it

    def pretrain_dir(self, row: str, seed: int) -> Path:
        return self.work / "pretrain" / f"{row}-s{seed}"

    def budget_record(self, row: str, seed: int) -> Path:
        return self.work / "budget" / f"{row}-s{seed}.json"

    def state_dir(self, row: str) -> Path:
        return self.work / "finetune" / row

    def spec(self, unit: Unit, rate: float | None = None) -> zf.RunSpec:
        init = str(self.pretrain_dir(unit.row, unit.seed))
        return zf.RunSpec(unit.task, init, unit.rate if rate is None else rate, unit.seed)

    def finetune_record(self, unit: Unit) -> Path:
        return self.state_dir(unit.row) / f"{self.spec(unit).name()}.json"

    def test_record(self, unit: Unit) -> Path:
        return self.work / "test" / unit.row / f"{unit.task}-s{unit.seed}.json"

    def units(self, row: str) -> list[Unit]:
        """A row's units in the order they are taken: its steps, pretraining, fine-tuning,
        tests."""
        budget = [Unit("budget", row, s) for s in self.seeds if matches_tokens(ROWS[row])]
        pretrain = [Unit("pretrain", row, s) for s in self.seeds]
        finetune = [Unit("finetune", row, s, task, rate) for task in zf.TASKS
                    for rate in self.setup.rates for s in self.seeds]  # fmt: skip
        tests = [Unit("test", row, s, task) for task in zf.TASKS for s in self.seeds]
        return budget + pretrain + finetune + tests

    def needs(self, unit: Unit) -> list[Unit]:
        """The units that must be done before `unit` (within its row)."""
        if unit.kind == "finetune":
            return [Unit("pretrain", unit.row, unit.seed)]
        if unit.kind == "pretrain" and matches_tokens(ROWS[unit.row]):
            return [Unit("budget", unit.row, unit.seed)]
        if unit.kind == "test":
            return [Unit("finetune", unit.row, s, unit.task, rate)
                    for rate in self.setup.rates for s in self.seeds]  # fmt: skip
        return []

    def done(self, unit: Unit, cfg: PretrainConfig | None = None) -> bool:
        """Whether `unit` is kept in the work folder (a pretraining run: when `cfg` is known,
        and refused when the folder holds a run of other settings)."""
        if unit.kind == "pretrain":
            if cfg is None:
                return False
            kept = read_json(self.pretrain_dir(unit.row, unit.seed) / UNIT_FILE)
            if kept is None:
                check_partial_run(cfg)
                return False
            check_same_settings(Path(cfg.output_dir), kept["config"], settings(cfg))
            return True
        if unit.kind == "budget":
            return self.budget_record(unit.row, unit.seed).is_file()
        if unit.kind == "finetune":
            record = read_json(self.finetune_record(unit))
            state_dir, name = self.state_dir(unit.row), self.spec(unit).name()
            return record is not None and all(
                (state_dir / f"{name}-e{e['epoch']}.pt").is_file() for e in record["epochs"]
            )
        record = read_json(self.test_record(unit))
        return record is not None and record["seeds"] == list(self.seeds)

    def finetune_runs(self, row: str, task: str) -> list[dict]:
        """The records of a row's fine-tuning runs of `task` (every rate and seed)."""
        units = [Unit("finetune", row, s, task, r) for r in self.setup.rates for s in self.seeds]
        return [read_json(self.finetune_record(u)) for u in units]


def check_same_settings(folder: Path, kept: dict, asked: dict) -> None:
    if kept != asked:
        diff = sorted(k for k in set(kept) | set(asked) if kept.get(k) != asked.get(k))
        raise SystemExit(
            f"{folder} holds a pretraining run of other settings ("
            + ", ".join(f"{k}: {kept.get(k)!r} there, {asked.get(k)!r} asked" for k in diff)
            + "): delete that folder, or give another --work"
        )


def check_partial_run(cfg: PretrainConfig) -> None:
    """A run cut short is continued (see `pretrain_unit`): only if its settings are these."""
    try:
        kept = PretrainConfig.load(cfg.output_dir)
    except FileNotFoundError:  # no checkpoint yet: the run starts again
        return
    check_same_settings(Path(cfg.output_dir), settings(kept), settings(cfg))


# --- Running one unit (in a worker process, one thread) ------------------------------------------


def pretrain_unit(cfg: PretrainConfig, stamp: dict) -> None:
    """Pretrain (going on from the checkpoint of a run cut short: exact resume), then write
    unit.json and drop the optimizer's state (only the weights are needed from now on)."""
    from bertcourse import pretrain
    from bertcourse.pretraining.config import CHECKPOINT_DIR

    folder = Path(cfg.output_dir)
    state, before = folder / CHECKPOINT_DIR / "trainer_state.pt", 0.0
    if state.is_file():  # else: from the start
        cfg = cfg.replace(resume=str(folder))  # the seconds of the part before count too
        before = float(torch.load(state, map_location="cpu", weights_only=False)["train_seconds"])
    started = time.perf_counter()
    report = pretrain.run(cfg)
    write_json(folder / UNIT_FILE, {
        "config": settings(cfg), "resumed": cfg.resume is not None,
        "final_eval": report["final_eval"], "tokens_seen": report["tokens_seen"],
        "steps_done": report["steps_done"], "train_seconds": report["train_seconds"],
        "first_windows": first_windows(report),
        "seconds": round(before + time.perf_counter() - started, 2),
        **stamp,
    })  # fmt: skip
    (folder / CHECKPOINT_DIR / "trainer_state.pt").unlink(missing_ok=True)


def first_windows(report: dict) -> list[dict]:
    """The first `FIRST_WINDOWS` logged training windows of a run's report: the step each
    ends at, and its mean MLM and sentence losses."""
    keys = ("step", "mlm_loss", "nsp_loss")
    return [{k: row[k] for k in keys} for row in report["history"]["train"][:FIRST_WINDOWS]]


def budget_unit(reference: PretrainConfig, cfg: PretrainConfig, record: Path, stamp: dict) -> None:
    """`match_tokens`, written to `record` (the run's steps are read from it)."""
    started = time.perf_counter()
    match = match_tokens(reference, cfg)
    write_json(record, {**dataclasses.asdict(match), "seconds": round(time.perf_counter() - started, 2), **stamp})  # fmt: skip


def finetune_unit(setup: zf.Setup, spec: zf.RunSpec, row: str, record: Path, stamp: dict) -> None:
    """`zh_finetune.run_one` from the row's pretraining run; its record names the row as the
    init (the choice groups a row's seeds), after its epochs' weights are written."""
    run = zf.run_one(setup, spec, str(record.parent))
    run["spec"]["init"] = row
    write_json(record, run | {"pretrained_from": Path(spec.init).name, **stamp})


def test_unit(setup: zf.Setup, spec: zf.RunSpec, state_dir: Path, chosen: dict, seeds: list[int], record: Path, stamp: dict) -> None:  # fmt: skip
    """The test split scored once, with the chosen rate's and epoch's weights of one seed."""
    torch.set_num_threads(setup.threads)
    started = time.perf_counter()
    score = zf.test_score(setup, spec, chosen["epoch"], str(state_dir))
    write_json(record, {"task": spec.task, "seed": spec.seed, "seeds": seeds, "chosen": chosen,
                        "test": score, "seconds": round(time.perf_counter() - started, 2),
                        **stamp})  # fmt: skip


# --- The scheduler -----------------------------------------------------------------------------


class InlineExecutor(Executor):
    """--jobs 1: a unit runs in this process when it is submitted."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:  # noqa: BLE001 - handed to the caller by future.result()
            future.set_exception(error)
        return future


def executor(jobs: int) -> Executor:
    return InlineExecutor() if jobs == 1 else zf.process_pool(jobs)


now = time.monotonic
"""The clock of --stop-after-minutes (a test replaces it)."""


@dataclass
class Command:
    """What one command completes: `todo` rows of `grid`, into `rows` (the JSON's, kept)."""

    grid: Grid
    todo: list[str]
    rows: dict[str, dict]
    split: MaskSplit | None  # --best-split
    device: str
    record: dict  # the command's provenance
    on_row: object  # called with a row's name when it is complete
    started: float = 0.0  # now() when run() began
    pending: list[Unit] = field(default_factory=list)  # in the order they are taken
    running: dict[Future, Unit] = field(default_factory=dict)

    def recipe_config(self, row: str, seed: int) -> PretrainConfig | None:
        """The pretraining run of a (row, seed) at the budget's steps; None while its split is
        not known yet."""
        split = self.split
        if row == "rate-40-best-split" and split is None:
            if any(is_split_row(n) for n in self.open_rows()):
                return None  # it waits for the split rows of this command
            split = best_split(self.rows)
        folder = self.grid.pretrain_dir(row, seed)
        return pretrain_config(ROWS[row], seed, self.grid.budget, self.device, folder, split)

    def config(self, unit: Unit) -> PretrainConfig | None:
        """The pretraining run of a (row, seed): a row that reads other pairs than its
        reference gets the steps its budget unit measured; None while those (or its split)
        are not known yet."""
        cfg = self.recipe_config(unit.row, unit.seed)
        if cfg is None or not matches_tokens(ROWS[unit.row]):
            return cfg
        record = read_json(self.grid.budget_record(unit.row, unit.seed))
        return None if record is None else cfg.replace(steps=record["steps"])

    def open_rows(self) -> set[str]:
        return {u.row for u in self.pending} | {u.row for u in self.running.values()}

    def plan(self) -> None:
        """Every unit not done yet; a row whose tests are all done is complete at once (written
        after the others' units are counted: the file says how many are left)."""
        grid, complete = self.grid, []
        for name in self.todo:
            tasks_left = {u.task for u in grid.units(name) if u.kind == "test" and not grid.done(u)}
            if not tasks_left:  # in self.rows now: rate-40-best-split may choose from it
                self.assemble(name)
                complete.append(name)
                continue
            for unit in grid.units(name):
                if unit.kind == "pretrain":
                    if not grid.done(unit, self.config(unit)):  # None: checked when taken
                        self.pending.append(unit)
                elif (unit.kind == "budget" or unit.task in tasks_left) and not grid.done(unit):
                    self.pending.append(unit)
        for name in complete:
            self.on_row(name)

    def ready(self, unit: Unit) -> bool:
        waiting = set(self.pending) | set(self.running.values())
        if any(need in waiting for need in self.grid.needs(unit)):
            return False
        if unit.kind == "budget":
            return self.recipe_config(unit.row, unit.seed) is not None
        return unit.kind != "pretrain" or self.config(unit) is not None

    def submit(self, pool: Executor, unit: Unit) -> Future | None:
        """The unit started in `pool`, or None when the work folder has it already."""
        grid, stamp = self.grid, self.grid.stamp
        if unit.kind == "pretrain":
            cfg = self.config(unit)
            return None if grid.done(unit, cfg) else pool.submit(pretrain_unit, cfg, stamp)
        if grid.done(unit):
            return None
        if unit.kind == "budget":
            reference = self.recipe_config(ROWS[unit.row].reference, unit.seed)
            return pool.submit(budget_unit, reference, self.recipe_config(unit.row, unit.seed),
                               grid.budget_record(unit.row, unit.seed), stamp)  # fmt: skip
        if unit.kind == "finetune":
            record = grid.finetune_record(unit)
            return pool.submit(finetune_unit, grid.setup, grid.spec(unit), unit.row, record, stamp)
        chosen = zf.choose(grid.finetune_runs(unit.row, unit.task), unit.task, unit.row)
        spec = grid.spec(unit, rate=chosen["rate"])
        return pool.submit(test_unit, grid.setup, spec, grid.state_dir(unit.row), chosen,
                           list(grid.seeds), grid.test_record(unit), stamp)  # fmt: skip

    def finished(self, unit: Unit, kept: bool = False) -> None:
        print(f"[{now() - self.started:7.1f} s] {'kept' if kept else 'done'}: {unit}", flush=True)
        if unit.row not in self.open_rows():
            self.complete(unit.row)

    def assemble(self, name: str) -> None:
        self.rows[name] = assemble_row(self.grid, ROWS[name], self.record, now() - self.started)
        metrics = self.rows[name]["metrics"]
        print(f"[{now() - self.started:7.1f} s] row {name}: "
              + ", ".join(f"{m} {metrics[m]}" for m in METRICS), flush=True)  # fmt: skip

    def complete(self, name: str) -> None:
        self.assemble(name)
        self.on_row(name)

    def run(self, jobs: int, stop_minutes: float | None) -> int:
        """Take the units in order as soon as what they need is done, `jobs` at a time, until
        none is left or `stop_minutes` have passed; returns how many are left."""
        self.started = now()
        self.plan()
        with executor(jobs) as pool:
            while self.pending or self.running:
                stopping = stop_minutes is not None and now() - self.started >= 60 * stop_minutes
                while not stopping and len(self.running) < jobs:
                    unit = next((u for u in self.pending if self.ready(u)), None)
                    if unit is None:
                        break
                    self.pending.remove(unit)
                    future = self.submit(pool, unit)
                    if future is None:
                        self.finished(unit, kept=True)
                    else:
                        self.running[future] = unit
                if not self.running:
                    if stopping or not self.pending:
                        break
                    raise RuntimeError(f"no unit can start, {self.pending[0]} first")  # a bug
                done, _ = wait(self.running, return_when=FIRST_COMPLETED)
                for future in done:
                    unit = self.running.pop(future)
                    future.result()  # a unit's error ends the command (the others end first)
                    self.finished(unit)
        return len(self.pending)


# --- A row, from its units' records ------------------------------------------------------------


def heldout_scores(folder: Path, unit: dict) -> dict:
    """A finished pretraining run's final weights scored again on the held-out questions
    (`evaluate_checkpoint`: accuracy at every chosen position, at those showing `[MASK]` and at
    those showing a random character, and the unigram baseline's at each), once, kept in
    `HELDOUT_FILE`. It must give the run's own final accuracies back (over every chosen position
    and at `[MASK]`: a check of the weights kept);
    runs recorded before the kinds of position were counted (2026-11-29) get them here."""
    from bertcourse.pretraining.config import CHECKPOINT_DIR
    from bertcourse.pretraining.evaluation import evaluate_checkpoint

    scores = read_json(folder / HELDOUT_FILE)
    if scores is None:
        scores = evaluate_checkpoint(folder / CHECKPOINT_DIR)
        for key in ("mlm_acc", "mlm_acc_at_mask"):
            if abs(scores[key] - unit["final_eval"][key]) > 1e-9:
                raise SystemExit(f"{folder}: its weights score {key} {scores[key]} on the held-out "
                                 f"questions, not the run's own {unit['final_eval'][key]}: "
                                 "delete the folder to train the run again")  # fmt: skip
        write_json(folder / HELDOUT_FILE, scores)
    return scores


def unigram_by_kind(scores: list[dict]) -> dict:
    """The unigram baseline at each kind of held-out position (the same questions for every
    run: checked), with the number of positions of each kind."""
    kept = {json.dumps(s["unigram_baseline"], sort_keys=True) for s in scores}
    if len(kept) != 1:
        raise SystemExit(
            f"the runs of a row were scored on other held-out questions: {sorted(kept)}"
        )
    u = json.loads(kept.pop())
    return {"mask_acc": u["mlm_acc_at_mask"], "random_acc": u["mlm_acc_at_random"],
            "n_mask": u["n_at_mask"], "n_random": u["n_at_random"]}  # fmt: skip


def assemble_row(grid: Grid, row: Row, record: dict, wall_seconds: float) -> dict:
    """The row's JSON entry from the work folder (every one of its units done)."""
    seeds = list(grid.seeds)
    pretrained = [read_json(grid.pretrain_dir(row.name, s) / UNIT_FILE) for s in seeds]
    tests = {task: [read_json(grid.test_record(Unit("test", row.name, s, task))) for s in seeds]
             for task in zf.TASKS}  # fmt: skip
    finetuned = [r for task in zf.TASKS for r in grid.finetune_runs(row.name, task)]
    units = {"pretrain": pretrained, "finetune": finetuned, "test": [t for ts in tests.values() for t in ts]}  # fmt: skip
    if matches_tokens(row):
        units = {"budget": [read_json(grid.budget_record(row.name, s)) for s in seeds], **units}
    if any(u is None for us in units.values() for u in us):
        raise SystemExit(f"{grid.work}: a record of row {row.name} is missing: delete its folder "
                         f"test/{row.name}/ to run again what the row needs")  # fmt: skip
    config = {k: v for k, v in pretrained[0]["config"].items() if k not in ("seed", "steps")}
    split = MaskSplit(**config["mask_split"])
    scores = [heldout_scores(grid.pretrain_dir(row.name, s), p) for s, p in zip(seeds, pretrained)]
    stamps = {tuple(u[k] for k in STAMP) for us in units.values() for u in us}
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
        "seeds": seeds,
        "metrics": {
            "seg_f1": [t["test"] for t in tests["segmentation"]],
            "reviews_acc": [t["test"] for t in tests["reviews"]],
            "mask_acc": [p["final_eval"]["mlm_acc_at_mask"] for p in pretrained],
            "random_acc": [s["mlm_acc_at_random"] for s in scores],
            "mlm_acc": [p["final_eval"]["mlm_acc"] for p in pretrained],
            "tokens_seen": [p["tokens_seen"] for p in pretrained],
        },
        "token_budget": {
            "matched_on_tokens": "budget" in units,
            "steps": [p["config"]["steps"] for p in pretrained],
            "reference_tokens": [b["reference_tokens"] for b in units["budget"]]
            if "budget" in units
            else None,
        },  # fmt: skip
        # a unit.json from before first_windows were recorded (the grid begun on 2026-11-28):
        # the run's report.json, written whole before its unit.json
        "first_windows": [
            p.get("first_windows")
            or first_windows(read_json(grid.pretrain_dir(row.name, s) / "report.json"))
            for s, p in zip(seeds, pretrained)
        ],  # fmt: skip
        "mask_acc_comparable": split.mask > 0,  # else [MASK] only by a chance random draw
        "unigram": unigram_by_kind(scores),
        "finetune_chosen": {task: tests[task][0]["chosen"] for task in zf.TASKS},
        "pretrain_seconds": [round(p["train_seconds"], 1) for p in pretrained],
        "provenance": record
        | {
            "wall_seconds_this_command": round(wall_seconds, 1),
            "unit_seconds": {k: round(sum(u["seconds"] for u in us), 2) for k, us in units.items()},
            "units_from": [dict(zip(STAMP, s)) for s in sorted(stamps, key=str)],
        },  # fmt: skip
    }


# --- The file ----------------------------------------------------------------------------------


LEARNED_STANDARD_ERRORS = 4.5
"""A pretraining run learned if its held-out accuracy ends more than this many standard errors
above the unigram baseline's (always the most frequent character, the comma), at the positions
where it is judged (`learned_at`): the standard error of an accuracy equal to the baseline's
over those positions. On the zh questions that is 0.011 above 0.045 at their 7,106 `[MASK]`
positions and 0.032 above 0.046 at their 835 random characters; a run that learned nothing ends
within one of it (split-100-0-0's three runs)."""


def learned_at(row: dict) -> str:
    """The metric a row's learning is judged by: accuracy at the held-out positions showing
    `[MASK]` for a row that trains with it, else at those showing a random character (the two
    Table 8 splits without `[MASK]` see it only in chance random draws). Never at a position
    that shows its own answer,
    which a model that only copies its input gets right."""
    return "mask_acc" if row["config"]["pretrain"]["mask_split"]["mask"] > 0 else "random_acc"


def learned(accuracy: float, unigram: float, n: int) -> bool:
    """Whether `accuracy` is more than `LEARNED_STANDARD_ERRORS` standard errors above the
    unigram baseline's accuracy `unigram` on the same `n` positions."""
    return accuracy > unigram + LEARNED_STANDARD_ERRORS * (unigram * (1 - unigram) / n) ** 0.5


def row_hours(row: dict) -> float:
    """The wall-clock hours of a row's one-thread jobs: its pretraining runs' training time
    (`pretrain_seconds`, summed over a run's resumed parts) and its fine-tuning and test units'
    seconds. On a machine shared by more jobs than it has cores they exceed the CPU time."""
    seconds = row["provenance"]["unit_seconds"]
    return (sum(row["pretrain_seconds"]) + seconds["finetune"] + seconds["test"]) / 3600


def pretraining_learned(row: dict) -> list[bool]:
    """Per seed of `row` (a row of the JSON): whether its pretraining learned (`learned`, at the
    positions of `learned_at`). A row whose runs did not learn is compared with its reference
    all the same; a reader needs to know."""
    metric = learned_at(row)
    kind = metric.removesuffix("_acc")
    u = row["unigram"]
    return [learned(a, u[metric], u[f"n_{kind}"]) for a in row["metrics"][metric]]


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


def grid_id(budget: dict, setup: dict) -> dict:
    """What every row of one JSON shares: the pretraining budget and the fine-tuning protocol
    (`zh_finetune.Setup` but its seeds and device, which are the rows'), as JSON reads it."""
    protocol = {k: v for k, v in setup.items() if k not in ("seeds", "device")}
    return json.loads(json.dumps({"budget": budget, "finetune_protocol": protocol}))


def check_same_grid(where: str, kept: dict, asked: dict) -> None:
    """Rows of another budget or fine-tuning protocol never mix."""
    for key in ("budget", "finetune_protocol"):
        if kept.get(key) != asked[key]:
            raise SystemExit(f"{where} is a grid of another {key.replace('_', ' ')}: "
                             f"{kept.get(key)} there, {asked[key]} asked: give another --json or --work")  # fmt: skip


@contextmanager
def work_folder(work: Path) -> Iterator[Path]:
    """`work`, for this command alone (a lock while it runs; where there is no fcntl, none),
    cleared of the temporary files of killed commands."""
    work.mkdir(parents=True, exist_ok=True)
    with open(work / ".lock", "w") as handle:
        try:
            import fcntl

            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:
            pass
        except BlockingIOError:
            raise SystemExit(f"another command is using {work}: wait for it, or give another --work") from None  # fmt: skip
        for leftover in work.rglob(".*.tmp"):  # `zh_finetune.save_atomically`'s, never renamed
            leftover.unlink()
        yield work


def write_result(path: Path, result: dict) -> None:
    write_json(path, result)
    print(f"wrote {path} ({len(result['rows'])} rows)", flush=True)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--jobs", type=int, default=1,
                        help="units run at once, each in its own process with one thread")  # fmt: skip
    parser.add_argument("--steps", type=int, help=(
        "the reference's pretraining steps (default: the zh recipe's 9,000; --smoke: "
        f"{SMOKE.steps}); rows that read other pairs get the steps of its tokens"))  # fmt: skip
    parser.add_argument("--best-split", type=MaskSplit.parse, help="M,S,R for rate-40-best-split")
    parser.add_argument("--smoke", action="store_true", help="CI's tiny slice (needs --json)")
    parser.add_argument("--json", type=Path, help=f"default {DEFAULT_JSON.relative_to(ROOT)}")
    parser.add_argument("--work", type=Path, help=(
        f"where every finished unit is kept, for the next command to skip (one command at a time; default "
        f"{DEFAULT_WORK.relative_to(ROOT)}/; --smoke: a temporary folder). A pretraining folder "
        "there of other settings than the ones asked for is refused with an error naming them: "
        "delete it, or give another --work"))  # fmt: skip
    parser.add_argument("--stop-after-minutes", type=float, metavar="M", help=(
        "submit no unit after M minutes; wait for those running, write the complete rows and "
        "exit 0 saying how many units are left (the same command again goes on)"))  # fmt: skip
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here")
    if args.smoke and args.json is None:
        raise SystemExit("--smoke writes a slice, never the committed file: give --json PATH")
    if args.steps is not None and args.steps < 1:
        raise SystemExit(f"--steps must be at least 1, got {args.steps}")
    if args.jobs < 1:
        raise SystemExit(f"--jobs must be at least 1, got {args.jobs}")
    if len(set(args.seeds)) != len(args.seeds):
        raise SystemExit(f"--seeds must differ, got {args.seeds}")
    if args.stop_after_minutes is not None and args.stop_after_minutes < 0:
        raise SystemExit(f"--stop-after-minutes must be >= 0, got {args.stop_after_minutes}")
    return args


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    budget = SMOKE if args.smoke else Budget()
    budget = budget if args.steps is None else dataclasses.replace(budget, steps=args.steps)
    setup = dataclasses.replace(zf.QUICK if args.smoke else zf.Setup(),
                                seeds=tuple(args.seeds), device=args.device)  # fmt: skip
    this_grid = grid_id(dataclasses.asdict(budget), dataclasses.asdict(setup))
    path = args.json or DEFAULT_JSON
    previous = read_json(path) or {}
    if previous:
        check_same_grid(str(path), grid_id(previous["budget"], previous["finetune_setup"]), this_grid)  # fmt: skip
    rows = {r["name"]: r for r in previous.get("rows", [])}
    todo = [n for n in ROWS if n in args.rows and rows.get(n, {}).get("seeds") != args.seeds]
    for name in sorted(set(args.rows) - set(todo), key=list(ROWS).index):
        print(f"{name}: in {path} with seeds {args.seeds} already (delete it there to redo it)")
    if "rate-40-best-split" in todo and args.best_split is None:
        if not any(is_split_row(n) for n in [*rows, *todo]):
            raise SystemExit(NEEDS_SPLIT)
    record = zf.run_provenance(argv, "benchmarks/ablations.py", WATCHED) | {
        "device": args.device, "device_name": zf.device_name(args.device), "jobs": args.jobs}  # fmt: skip
    stamp = {k: record.get(k) for k in STAMP}
    torch.set_num_threads(budget.threads)
    started = time.perf_counter()

    def result(left: int) -> dict:
        ordered = [rows[n] for n in ROWS if n in rows]
        return {**record, "smoke": args.smoke, "budget": this_grid["budget"],
                "finetune_setup": dataclasses.asdict(setup), "rows": ordered,
                "comparisons": comparisons({r["name"]: r for r in ordered}),
                "units_left": left,
                "seconds_this_command": round(time.perf_counter() - started, 1)}  # fmt: skip

    with tempfile.TemporaryDirectory() as tmp, work_folder(args.work or (Path(tmp) if args.smoke else DEFAULT_WORK)) as work:  # fmt: skip
        kept = read_json(work / "grid.json")
        if kept is None:
            write_json(work / "grid.json", this_grid)
        else:
            check_same_grid(str(work), kept, this_grid)
        grid = Grid(work, budget, setup, tuple(args.seeds), stamp)

        def on_row(name: str) -> None:
            write_result(path, result(len(command.pending) + len(command.running)))
            for leftover in grid.state_dir(name).glob("*.pt"):  # the row is written: not needed
                leftover.unlink()

        command = Command(grid, todo, rows, args.best_split, args.device, record, on_row)
        left = command.run(args.jobs, args.stop_after_minutes)
    final = result(left)
    write_result(path, final)
    print(f"{left} units left" + (": run the same command again to finish them" if left else ""))
    return final


if __name__ == "__main__":
    main()
