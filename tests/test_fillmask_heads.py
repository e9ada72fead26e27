"""The committed results chapter 7 renders, re-checked cheaply: benchmarks/fillmask_heads.py
(the [MASK] and [UNK] fill-mask heads at equal data, and the saved [UNK] head) and
benchmarks/ch07_pretraining.py (the 400-step pretraining run)."""

import importlib.util
import json
import sys
import tempfile
from dataclasses import asdict, fields
from pathlib import Path

import pytest
import torch

from bertcourse import fillmask
from bertcourse.hf import load_minilm

ROOT = Path(__file__).resolve().parents[1]


def load_script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module, json.loads(module.DEFAULT_JSON.read_text())


@pytest.fixture(scope="module")
def heads():
    return load_script("fillmask_heads")


@pytest.fixture(scope="module")
def pretraining():
    return load_script("ch07_pretraining")


def check_provenance(committed):
    for key in ("command", "date", "torch", "transformers", "python", "seed"):
        assert committed[key] is not None and committed[key] != "", key
    assert len(committed["bertcourse_commit"]) == 40 and committed["threads"] == 1


def test_committed_heads_are_complete_and_at_equal_data(heads):
    module, committed = heads
    check_provenance(committed)
    assert not committed["uncommitted_changes_to"]
    runs = {(r["config"]["train_chunks"], r["config"]["blank_token"]): r for r in committed["runs"]}
    assert set(runs) == {(n, b) for n in module.SIZES for b in module.BLANKS}
    for (n, blank), r in runs.items():  # the recipe: FillMaskConfig's defaults in float32
        assert r["config"] == asdict(module.base_config(train_chunks=n, blank_token=blank))
        other = runs[n, "[UNK]" if blank == "[MASK]" else "[MASK]"]
        # equal data and the same held-out blanks: the unigram baseline is the same measurement
        assert (r["n_train"], r["n_heldout"], r["unigram"]) == (
            other["n_train"], other["n_heldout"], other["unigram"])  # fmt: skip
        assert 0 < r["unigram"]["top1"] < r["unigram"]["top5"] < 1 and 0 < r["head"]["top1"] < 1
    assert runs[1000, "[MASK]"]["n_train"] > 3 * runs[300, "[MASK]"]["n_train"]


@pytest.mark.parametrize("blank", ["[MASK]", "[UNK]"])
def test_slice_reproduces_the_committed_figures(heads, blank):
    """The cheap slice CI re-runs: a few chunks, one epoch, both heads."""
    module, committed = heads
    torch.set_num_threads(1)
    record = committed["slice"][blank]
    assert record["config"] == asdict(module.base_config(blank_token=blank, **module.SLICE))
    again, _ = module.run(module.replace_config(record))
    assert again["n_train"] == record["n_train"] and again["n_heldout"] == record["n_heldout"]
    assert again["losses"] == pytest.approx(record["losses"], abs=1e-4)
    for k in ("head", "unigram"):
        assert again[k] == pytest.approx(record[k], abs=1e-4)
    assert max(again["losses"]) - min(again["losses"]) > 1e-3  # losses that depend on the run


def test_saved_head_is_the_committed_unk_head(heads):
    """The file the chapter loads: the [UNK] head of the largest run, the shapes of MiniLM's
    head, and a bias that training moved away from its unigram start."""
    module, committed = heads
    saved = torch.load(module.DEFAULT_HEAD)
    assert committed["saved_head"]["file"] == module.DEFAULT_HEAD.name
    assert committed["saved_head"]["train_chunks"] == max(module.SIZES)
    assert module.DEFAULT_HEAD.stat().st_size < 1_000_000
    model = fillmask.mlm_model(load_minilm()[0])
    expected = {k: v.shape for k, v in module.head_state(model).items()}
    assert {k: v.shape for k, v in saved.items()} == expected
    assert all(v.dtype == torch.float32 and torch.isfinite(v).all() for v in saved.values())


def test_committed_pretraining_run(pretraining):
    module, committed = pretraining
    check_provenance(committed)
    report = committed["report"]
    assert report["steps_done"] == committed["config"]["steps"] == 400
    with tempfile.TemporaryDirectory() as d:
        config = module.page_config(d)
    mine = {k: v for k, v in asdict(config).items() if k != "output_dir"}
    # a setting added to the code after the run (whole-word masking) is compared at its default
    defaults = {f.name: f.default for f in fields(config)}
    assert set(committed["config"]) <= set(mine)
    assert mine == {k: committed["config"].get(k, defaults[k]) for k in mine}
    assert set(committed["fill_mask"]) == set(module.QUERIES)
    assert abs(committed["by_kind"]["share"]["[MASK]"] - 0.8) < 0.03


def test_pretraining_first_steps_reproduce(pretraining):
    """The slice: the first 20 steps of the committed schedule give the committed losses."""
    module, committed = pretraining
    from bertcourse.pretrain import train

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as d:
        result = train(module.page_config(d, stop_after=20, eval_examples=32))
    here = {r["step"]: r["mlm_loss"] for r in result.report["history"]["train"]}
    there = {r["step"]: r["mlm_loss"] for r in committed["report"]["history"]["train"]}
    assert len(here) >= 2
    # the same on every machine but for the float32 kernels' rounding (the chapter explains the
    # tolerance: benchmarks/ch07_pretraining.slice_tolerance)
    tolerance = committed["slice_tolerance"]
    assert 0 < tolerance < 1e-3
    assert [here[k] for k in sorted(here)] == pytest.approx(
        [there[k] for k in sorted(here)], abs=tolerance
    )
