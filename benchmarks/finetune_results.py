"""Chapter 8's experiments, too long for a book page: MiniLM fine-tuned on the movie-review
snippets over a grid of learning rates and seeds, the same fine-tuning from random weights,
and a classifier on the frozen encoder's features. Every choice is made on a validation split;
the test split is scored once, for the chosen settings only. Written with the command, seeds,
versions and every run's settings to benchmarks/figures/finetune.json, which the chapter
renders and asserts on and tests/test_finetune.py re-checks (the first steps of a run).

No time budget anywhere: fixed step counts, one thread per run, fixed seeds, so a run gives
the same numbers however busy the machine is.

    python benchmarks/finetune_results.py --jobs 2     # the full grid: 18 runs; ~30 min on a
                                                       # busy 2-core machine, ~8 min idle
    python benchmarks/finetune_results.py --rates 2e-4 --seeds 0 --random-rates 2e-4 --json /tmp/f.json
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
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.provenance import provenance as shared_provenance  # noqa: E402
from bertcourse import finetune as ft  # noqa: E402
from bertcourse.model import BertForSequenceClassification, BertModel  # noqa: E402

DEFAULT_JSON = ROOT / "benchmarks" / "figures" / "finetune.json"
INITS = ("pretrained", "random")
WORD_EMBEDDINGS = "bert.embeddings.word_embeddings.weight"


@dataclass(frozen=True)
class Setup:
    """The data and the recipe shared by every run."""

    n_train: int = 256
    n_validation: int = 500
    n_test: int = 1000
    max_length: int = 32
    split_seed: int = 0
    epochs: int = 2
    batch_size: int = 8
    rates: tuple[float, ...] = (2e-5, 5e-5, 2e-4, 1e-3)
    seeds: tuple[int, ...] = (0, 1, 2)
    random_rates: tuple[float, ...] = (2e-5, 5e-5, 2e-4, 1e-3)  # random weights, seed 0 only
    threads: int = 1

    def config(self, learning_rate: float, seed: int, stop_after: int = 0) -> ft.FineTuneConfig:
        return ft.FineTuneConfig(
            learning_rate=learning_rate,
            epochs=self.epochs,
            batch_size=self.batch_size,
            seed=seed,
            train_word_embeddings=False,
            stop_after=stop_after,
        )


@dataclass(frozen=True)
class RunSpec:
    init: str  # "pretrained": MiniLM's weights; "random": the same architecture, N(0, 0.02^2)
    learning_rate: float
    seed: int
    stop_after: int = 0

    def __post_init__(self) -> None:
        if self.init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {self.init!r}")


@dataclass
class RunRecord:
    spec: RunSpec
    config: dict
    losses: list[float]  # training loss of every step
    validation_accuracy: float
    validation_loss: float
    one_class_share: float  # share of the validation snippets given the most frequent answer
    relative_weight_change: float  # |w - w0| / |w0| over every trained tensor
    drift: float | None  # cosine(pretrained, fine-tuned) mean vectors on validation
    probe_after: float | None = None  # a new classifier on the fine-tuned mean vectors
    state_file: str = field(default="", repr=False)


# --- Data and models, once per process ------------------------------------------------------


@cache
def encoder_and_data(setup: Setup) -> tuple[BertModel, dict[str, ft.EncodedData]]:
    from bertcourse.hf import load_minilm

    torch.set_num_threads(setup.threads)
    encoder, _ = load_minilm()
    reviews = ft.load_movie_reviews()
    sizes = [setup.n_train, setup.n_validation, setup.n_test]
    splits = ft.stratified_splits(reviews, sizes, seed=setup.split_seed)
    names = ("train", "validation", "test")
    return encoder.eval(), {n: ft.encode_texts(d, setup.max_length) for n, d in zip(names, splits)}


@cache
def pretrained_features(setup: Setup, split: str) -> dict[str, torch.Tensor]:
    encoder, data = encoder_and_data(setup)
    return ft.sentence_features(encoder, data[split])


def initial_encoder(setup: Setup, spec: RunSpec) -> BertModel:
    encoder, _ = encoder_and_data(setup)
    if spec.init == "pretrained":
        return encoder
    torch.manual_seed(spec.seed)
    return BertModel(encoder.config)  # BERT's initialisation, drawn from the seed


def trained_tensors(model: BertForSequenceClassification) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if n != WORD_EMBEDDINGS}


def classify(model: BertForSequenceClassification, features: dict[str, torch.Tensor]):
    """Logits from the pooled vectors of `sentence_features` (dropout off): what
    `ft.evaluate` computes, from the pass that also gives the mean vectors."""
    with torch.no_grad():
        return model.classifier(features["cls"])  # (N, C)


def run_one(setup: Setup, spec: RunSpec, state_dir: str = "") -> RunRecord:
    """Fine-tune one model and score it on the validation split."""
    _, data = encoder_and_data(setup)
    model = ft.new_classifier(initial_encoder(setup, spec), seed=spec.seed)
    before = trained_tensors(model)
    config = setup.config(spec.learning_rate, spec.seed, spec.stop_after)
    result = ft.fine_tune(model, data["train"], config)
    validation = data["validation"]
    features = ft.sentence_features(model.bert, validation)
    logits = classify(model, features)
    predictions = logits.argmax(-1)
    after = trained_tensors(model)
    moved = sum(float((after[n] - w).norm() ** 2) for n, w in before.items()) ** 0.5
    size = sum(float(w.norm() ** 2) for w in before.values()) ** 0.5
    record = RunRecord(
        spec=spec,
        config=asdict(config),
        losses=[round(x, 6) for x in result.losses],
        validation_accuracy=float((predictions == validation.labels).float().mean()),
        validation_loss=float(F.cross_entropy(logits, validation.labels)),
        one_class_share=float(torch.bincount(predictions, minlength=2).max()) / len(validation),
        relative_weight_change=moved / size,
        drift=None,
    )
    if spec.init == "pretrained":
        pretrained = pretrained_features(setup, "validation")["mean"]
        record.drift = ft.feature_drift(pretrained, features["mean"])
        if spec.seed == setup.seeds[0]:
            train_mean = ft.sentence_features(model.bert, data["train"])["mean"]
            probe = ft.train_linear_probe(train_mean, data["train"].labels, seed=0)
            record.probe_after = ft.probe_accuracy(
                probe.classifier, features["mean"], validation.labels
            )
    if state_dir:
        record.state_file = str(
            Path(state_dir) / f"{spec.init}-{spec.learning_rate:g}-{spec.seed}.pt"
        )
        torch.save(after, record.state_file)
    return record


def test_accuracy(setup: Setup, record: RunRecord) -> float:
    """The chosen runs only: the saved weights, scored on the test split."""
    _, data = encoder_and_data(setup)
    model = ft.new_classifier(initial_encoder(setup, record.spec), seed=record.spec.seed)
    model.load_state_dict(torch.load(record.state_file), strict=False)  # word embeddings: as given
    return ft.evaluate(model, data["test"]).accuracy


# --- The frozen encoder ----------------------------------------------------------------------


def frozen_results(setup: Setup) -> dict:
    """A linear classifier on cached features, for each pooling and seed; the pooling is chosen
    on validation, then its classifiers are scored on test."""
    _, data = encoder_and_data(setup)
    train, validation = (
        pretrained_features(setup, "train"),
        pretrained_features(setup, "validation"),
    )
    rows, probes = [], {}
    for pooling in ft.POOLINGS:
        for seed in setup.seeds:
            probe = ft.train_linear_probe(train[pooling], data["train"].labels, seed=seed)
            probes[pooling, seed] = probe.classifier
            acc = ft.probe_accuracy(
                probe.classifier, validation[pooling], data["validation"].labels
            )
            rows.append({"pooling": pooling, "seed": seed, "validation_accuracy": acc,
                         "train_accuracy": probe.train_accuracy})  # fmt: skip
    mean = {p: statistics.mean(r["validation_accuracy"] for r in rows if r["pooling"] == p)
            for p in ft.POOLINGS}  # fmt: skip
    chosen = max(ft.POOLINGS, key=mean.get)
    test = pretrained_features(setup, "test")[chosen]
    return {
        "runs": rows,
        "chosen_pooling": chosen,
        "test_accuracy": {
            str(s): ft.probe_accuracy(probes[chosen, s], test, data["test"].labels)
            for s in setup.seeds
        },
    }


# --- What Adam on the word-embedding table costs ---------------------------------------------


def embedding_table_cost(setup: Setup, steps: int = 6) -> dict:
    """Seconds per training step with the (V, H) word-embedding table trained and fixed, timed
    interleaved on one thread (median of `steps` each after one warm-up step): a ratio measured
    in one run, on whatever machine ran the script."""
    encoder, data = encoder_and_data(setup)
    model = ft.new_classifier(encoder, seed=0)
    batch = data["train"].batch(torch.arange(setup.batch_size))
    seconds: dict[str, list[float]] = {"trained": [], "fixed": []}
    optimizers = {}
    for name in seconds:
        params = [
            p for n, p in model.named_parameters() if name == "trained" or n != WORD_EMBEDDINGS
        ]
        optimizers[name] = (params, torch.optim.AdamW(params, lr=1e-9, eps=1e-8))
    for i in range(steps + 1):
        for name, (params, optimizer) in optimizers.items():
            model.bert.embeddings.word_embeddings.weight.requires_grad_(name == "trained")
            start = time.perf_counter()
            loss = model(
                batch.input_ids, batch.token_type_ids, batch.attention_mask, batch.labels
            ).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            if i:
                seconds[name].append(time.perf_counter() - start)
    table = model.bert.embeddings.word_embeddings.weight
    return {
        "steps_timed": steps,
        "median_seconds": {k: statistics.median(v) for k, v in seconds.items()},
        "ratio_trained_over_fixed": statistics.median(seconds["trained"]) / statistics.median(seconds["fixed"]),
        "table_elements": table.numel(),
        "other_trained_elements": sum(p.numel() for n, p in model.named_parameters() if n != WORD_EMBEDDINGS),
        "distinct_training_tokens": len(torch.unique(data["train"].input_ids)),
        "load_average_at_end": list(os.getloadavg()),
    }  # fmt: skip


# --- Choices on validation, the test set once ------------------------------------------------


def mean_validation(records: list[RunRecord], init: str, rate: float) -> float:
    return statistics.mean(r.validation_accuracy for r in records
                           if r.spec.init == init and r.spec.learning_rate == rate)  # fmt: skip


def provenance(argv: list[str]) -> dict:
    return shared_provenance(
        "benchmarks/finetune_results.py",
        argv,
        ["bertcourse/finetune.py", "benchmarks/finetune_results.py"],
    )


def run_many(setup: Setup, specs: list[RunSpec], jobs: int, state_dir: str) -> list[RunRecord]:
    if jobs == 1:
        return [run_one(setup, s, state_dir) for s in specs]
    with ProcessPoolExecutor(jobs) as pool:
        return list(pool.map(run_one, [setup] * len(specs), specs, [state_dir] * len(specs)))


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=list(Setup.rates))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(Setup.seeds))
    parser.add_argument("--random-rates", type=float, nargs="+", default=list(Setup.random_rates))
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel, one thread each")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    setup = Setup(
        rates=tuple(args.rates), seeds=tuple(args.seeds), random_rates=tuple(args.random_rates)
    )
    torch.set_num_threads(setup.threads)
    first = setup.seeds[0]
    with tempfile.TemporaryDirectory() as state_dir:
        specs = [RunSpec("pretrained", lr, s) for lr in setup.rates for s in setup.seeds]
        specs += [RunSpec("random", lr, first) for lr in setup.random_rates]
        records = run_many(setup, specs, args.jobs, state_dir)
        # Random weights: the rate chosen on seed 0's validation accuracy, then the other seeds.
        random_rate = max(setup.random_rates, key=lambda lr: mean_validation(records, "random", lr))
        records += run_many(setup, [RunSpec("random", random_rate, s) for s in setup.seeds[1:]],
                            args.jobs, state_dir)  # fmt: skip
        best_rate = max(setup.rates, key=lambda lr: mean_validation(records, "pretrained", lr))
        chosen = {"pretrained": best_rate, "random": random_rate}
        tests = {init: {str(r.spec.seed): test_accuracy(setup, r) for r in records
                        if r.spec.init == init and r.spec.learning_rate == rate}
                 for init, rate in chosen.items()}  # fmt: skip
    _, data = encoder_and_data(setup)
    result = {
        **provenance(argv),
        "threads": setup.threads,
        "setup": asdict(setup),
        "majority_baseline": {
            split: ft.majority_baseline(data["train"].labels, data[split].labels)
            for split in ("validation", "test")
        },
        "runs": [{**asdict(r), "spec": asdict(r.spec), "state_file": None} for r in records],
        "chosen_rate": chosen,
        "test_accuracy": tests,
        "frozen": frozen_results(setup),
        "embedding_table_cost": embedding_table_cost(setup),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.json}: chosen rates {chosen}, test accuracy {tests}")
    return result


if __name__ == "__main__":
    main()
