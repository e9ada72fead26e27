"""benchmarks/ablations_rate_probe.py (chapter 10's probe of the peak rate): its curves average
the logged windows of each 100 steps, and a finished run is reused only when it trained the same
weights (the settings that only change what a run reports may differ), never one trained
otherwise."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks import ablations  # noqa: E402
from benchmarks import ablations_rate_probe as probe  # noqa: E402


def test_a_curve_point_is_the_mean_of_its_100_steps_windows():
    windows = [{"step": s, "mlm_loss": float(s)} for s in range(10, 310, 10)]  # steps 10..300
    got = probe.curve({"history": {"train": windows}})
    assert got["step"] == [100, 200, 300]
    assert got["mlm_loss"] == [55.0, 155.0, 255.0]  # the means of 10..100, 110..200, 210..300


def _write_report(cfg, **changes) -> None:
    folder = Path(cfg.output_dir)
    folder.mkdir(parents=True)
    steps_done = changes.pop("steps_done", cfg.steps)
    fields = {**ablations.settings(cfg), "output_dir": "/elsewhere", "device": "auto", **changes}
    report = {"config": fields, "steps_done": steps_done}
    (folder / "report.json").write_text(json.dumps(report))


def test_a_finished_run_is_reused_when_only_its_reporting_differs(tmp_path):
    cfg = probe.probe_config("split-100-0-0", probe.LOWER_RATE, tmp_path, "cpu")
    assert cfg.lr == probe.LOWER_RATE and cfg.mask_split.mask == 1.0
    _write_report(cfg, eval_every=1000, checkpoint_every=500, progress=True)
    assert probe.finished_report(cfg)["config"]["eval_every"] == 1000


@pytest.mark.parametrize("changes", [{"lr": 2e-3}, {"mask_split": {"mask": 0.8, "same": 0.1, "random": 0.1}},
                                     {"seed": 1}, {"mlm_probability": 0.25}])  # fmt: skip
def test_a_run_trained_otherwise_is_refused_by_name(tmp_path, changes):
    cfg = probe.probe_config("split-100-0-0", probe.LOWER_RATE, tmp_path, "cpu")
    _write_report(cfg, **changes)
    with pytest.raises(SystemExit, match=next(iter(changes))):
        probe.finished_report(cfg)


def test_a_run_cut_short_is_not_finished(tmp_path):
    cfg = probe.probe_config("base", probe.LOWER_RATE, tmp_path, "cpu")
    _write_report(cfg, steps_done=cfg.steps - 500)
    assert probe.finished_report(cfg) is None
