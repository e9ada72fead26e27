"""benchmarks/ablations_curves.py (chapter 10's training curves): it writes, for every run of
every row of the grid's JSON, the curve of that very run, and refuses a report that belongs to
another run (other tokens read) by its path. A missing report (a new checkout has no work folder)
keeps the run's curve from the JSON written before, only if that curve is of the same run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks import ablations_curves as curves  # noqa: E402


def _grid(tmp_path: Path, tokens: dict[tuple[str, int], int]) -> Path:
    """A grid JSON of two rows, two seeds each, and a report for each run in a work folder."""
    rows = []
    for name in ("base", "sop"):
        seeds = [0, 1]
        rows.append({"name": name, "seeds": seeds, "token_budget": {"steps": [200, 200]},
                     "metrics": {"tokens_seen": [tokens[name, s] for s in seeds]}})  # fmt: skip
        for s in seeds:
            folder = tmp_path / "work" / "pretrain" / f"{name}-s{s}"
            folder.mkdir(parents=True)
            windows = [
                {"step": step, "mlm_loss": 6.0 - s - step / 1000} for step in range(10, 210, 10)
            ]
            report = {"tokens_seen": 1000 + s, "steps_done": 200, "history": {"train": windows},
                      "unigram_baseline": {"mlm_loss": 6.58}}  # fmt: skip
            (folder / "report.json").write_text(json.dumps(report))
    path = tmp_path / "grid.json"
    path.write_text(json.dumps({"rows": rows}))
    return path


def _run(tmp_path: Path, grid: Path) -> dict:
    out = tmp_path / "curves.json"
    curves.main(["--work", str(tmp_path / "work"), "--grid", str(grid), "--json", str(out)])
    return json.loads(out.read_text())


def test_every_measured_run_gets_its_own_curve(tmp_path):
    grid = _grid(tmp_path, {(n, s): 1000 + s for n in ("base", "sop") for s in (0, 1)})
    got = _run(tmp_path, grid)
    assert [(r["row"], r["seed"]) for r in got["runs"]] == [
        ("base", 0),
        ("base", 1),
        ("sop", 0),
        ("sop", 1),
    ]
    seed_1 = got["runs"][1]
    assert seed_1["curve"]["step"] == [100, 200] and seed_1["unigram_mlm_loss"] == 6.58
    assert seed_1["tokens_seen"] == 1001 and seed_1["steps"] == 200
    assert seed_1["curve"]["mlm_loss"] == [
        round(5.0 - 0.055, 4),
        round(5.0 - 0.155, 4),
    ]  # its own windows' means
    assert got["command"].startswith("python benchmarks/ablations_curves.py")


def test_a_report_of_another_run_is_refused_by_its_path(tmp_path):
    grid = _grid(
        tmp_path, {("base", 0): 1000, ("base", 1): 1001, ("sop", 0): 1000, ("sop", 1): 999}
    )
    with pytest.raises(
        SystemExit, match=r"sop-s1/report.json read 1,001 tokens, the grid's run 999"
    ):
        _run(tmp_path, grid)


def test_a_missing_report_is_named(tmp_path):
    grid = _grid(tmp_path, {(n, s): 1000 + s for n in ("base", "sop") for s in (0, 1)})
    (tmp_path / "work" / "pretrain" / "base-s1" / "report.json").unlink()
    with pytest.raises(SystemExit, match=r"base-s1/report.json: no report of base's seed 1"):
        _run(tmp_path, grid)


def test_a_missing_report_keeps_the_curve_written_before_only_for_the_same_run(tmp_path):
    grid = _grid(tmp_path, {(n, s): 1000 + s for n in ("base", "sop") for s in (0, 1)})
    before = _run(tmp_path, grid)  # every report there: the JSON a new checkout would hold
    (tmp_path / "work" / "pretrain" / "base-s1" / "report.json").unlink()
    again = _run(tmp_path, grid)
    assert again["runs"] == before["runs"]  # base's seed 1 kept, the others from their reports
    rows = json.loads(grid.read_text())
    # the grid now holds another run of base, seed 1
    rows["rows"][0]["metrics"]["tokens_seen"][1] = 999
    grid.write_text(json.dumps(rows))
    with pytest.raises(SystemExit, match=r"base-s1/report.json: no report of base's seed 1"):
        _run(tmp_path, grid)
    rows["rows"][0]["metrics"]["tokens_seen"][1] = 1001
    rows["rows"][0]["token_budget"]["steps"][1] = 199  # or the same tokens in other steps
    grid.write_text(json.dumps(rows))
    with pytest.raises(SystemExit, match=r"no curve of that run in --json"):
        _run(tmp_path, grid)
