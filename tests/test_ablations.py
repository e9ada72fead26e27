"""benchmarks/ablations.py (chapter 10): a smoke run of two rows checked for its schema and
ranges, the paired comparisons it writes, and its refusals. The committed grid is not re-run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks import ablations  # noqa: E402
from bertcourse.mlm import MaskSplit  # noqa: E402
from bertcourse.stats import paired_comparison  # noqa: E402


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    path = tmp_path_factory.mktemp("ablations") / "ablations.json"
    ablations.main(["--smoke", "--rows", "base", "split-100-0-0", "--seeds", "0", "--json", str(path)])  # fmt: skip
    return json.loads(path.read_text())


def test_smoke_run_writes_the_schema_with_numbers_in_range(smoke):
    for key in ("command", "bertcourse_commit", "torch", "transformers", "python", "budget"):
        assert key in smoke, key
    assert smoke["smoke"] is True and smoke["comparisons"] == []  # one seed: nothing to pair
    assert [r["name"] for r in smoke["rows"]] == ["base", "split-100-0-0"]
    for row in smoke["rows"]:
        assert row["seeds"] == [0]
        assert set(ablations.METRICS) <= set(row["metrics"])
        for metric in ("seg_f1", "reviews_acc", "mask_acc", "mlm_acc"):
            (value,) = row["metrics"][metric]
            assert 0.0 <= value <= 1.0, (row["name"], metric, value)
        # the test split of 64 reviews and 32 sentences: a score is a count over them
        assert round(row["metrics"]["reviews_acc"][0] * 64, 9).is_integer()
        assert row["metrics"]["seg_f1"][0] > 0.1  # 'every character a word' alone scores ~0.3
        assert set(row["finetune_chosen"]) == {"reviews", "segmentation"}
        assert row["mask_acc_comparable"] is True
    base, split = smoke["rows"]
    assert base["config"]["pretrain"]["mask_split"] == {"mask": 0.8, "same": 0.1, "random": 0.1}
    assert split["config"]["changes"] == {"mlm_probability": 0.15, "mask_split": "1,0,0"}
    assert MaskSplit(**split["config"]["pretrain"]["mask_split"]) == MaskSplit(1.0, 0.0, 0.0)
    # the same budget: the same pairs, so the same tokens (masking changes no token count)
    assert base["metrics"]["tokens_seen"] == split["metrics"]["tokens_seen"] != [0]


def _row(name: str, seeds: list[int], seg: list[float], reference: str = "base") -> dict:
    metrics = {"seg_f1": seg, "reviews_acc": [0.8] * len(seeds), "mask_acc": [0.2] * len(seeds)}
    return {"name": name, "seeds": seeds, "metrics": metrics, "reference": reference,
            "config": {"pretrain": {"mask_split": {"mask": 0.8, "same": 0.0, "random": 0.2}}}}  # fmt: skip


def test_comparisons_pair_the_common_seeds():
    """Seeds listed in another order are paired by seed; a seed only one row has is left out."""
    rows = {
        "base": _row("base", [0, 1, 2], [0.50, 0.60, 0.70], ""),
        "sop": _row("sop", [2, 0, 1, 3], [0.75, 0.52, 0.66, 0.9]),
    }
    (seg,) = [c for c in ablations.comparisons(rows) if c["metric"] == "seg_f1"]
    want = paired_comparison([0.52, 0.66, 0.75], [0.50, 0.60, 0.70])
    assert seg["seeds"] == [2, 0, 1]
    assert (seg["mean_difference"], seg["standard_error"], seg["verdict"]) == pytest.approx(
        (want.mean_difference, want.standard_error, want.verdict)
    )
    assert ablations.comparisons({"sop": rows["sop"]}) == []  # no reference row yet


def test_best_split_and_refusals(tmp_path):
    rows = {
        "base": _row("base", [0], [0.5], ""),
        "split-80-0-20": _row("split-80-0-20", [0], [0.9]),
    }
    rows["base"]["config"]["pretrain"]["mask_split"] = {"mask": 0.8, "same": 0.1, "random": 0.1}
    assert ablations.best_split(rows) == MaskSplit(0.8, 0.0, 0.2)
    with pytest.raises(SystemExit, match="needs the split rows first"):
        ablations.best_split({})
    with pytest.raises(SystemExit, match="never the committed file"):
        ablations.main(["--smoke", "--rows", "base"])
