"""benchmarks/ablations.py (chapter 10): a smoke run of two rows checked for its schema and
ranges, the paired comparisons it writes, and its refusals; the grid of units kept in the work
folder: a second command reuses them, a unit killed leaves nothing trusted, two processes give
the numbers of one, a command stopped writes only complete rows. The committed grid is not
re-run."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks import ablations  # noqa: E402
from benchmarks import zh_finetune as zf  # noqa: E402
from bertcourse.mlm import MaskSplit  # noqa: E402
from bertcourse.stats import paired_comparison  # noqa: E402

SMOKE_ARGS = ["--smoke", "--rows", "base", "split-100-0-0", "--seeds", "0"]


def smoke_command(work: Path, json_path: Path, *extra: str) -> dict:
    return ablations.main([*SMOKE_ARGS, "--work", str(work), "--json", str(json_path), *extra])


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke slice run once, one unit at a time: its JSON, and its work folder ("work")."""
    folder = tmp_path_factory.mktemp("ablations")
    smoke_command(folder / "work", folder / "ablations.json")
    return json.loads((folder / "ablations.json").read_text()) | {"work": folder / "work"}


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
    for row in smoke["rows"]:  # each row says which command, code and machine completed it
        made = row["provenance"]
        assert made["command"] == smoke["command"] and made["device"] == "cpu"
        for key in ("bertcourse_commit", "date", "device_name", "torch", "python"):
            assert made[key] == smoke[key], key
        seconds = made["unit_seconds"]  # a smoke test unit can take under 0.005 s
        assert set(seconds) == {"pretrain", "finetune", "test"} and min(seconds.values()) >= 0
        assert seconds["pretrain"] > 0
        assert 0 < made["wall_seconds_this_command"] <= smoke["seconds_this_command"]
        assert made["units_from"] == [{k: smoke[k] for k in ablations.STAMP}]


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


# --- The grid of units: kept, resumed, in parallel, rows only when complete ----------------------


def numbers(record: dict) -> list[tuple]:
    """What a result file says of its rows: every metric and choice, nothing of time."""
    return [(r["name"], r["seeds"], r["metrics"], r["finetune_chosen"]) for r in record["rows"]]


def all_units(work: Path, rows: list[str], seeds: tuple[int, ...] = (0,)) -> list[ablations.Unit]:
    grid = ablations.Grid(work, ablations.SMOKE, zf.QUICK, seeds, {})
    return [u for row in rows for u in grid.units(row)]


@pytest.fixture
def recorded(monkeypatch):
    """Which units run (their entry points wrapped): a list of Units, in order."""
    calls: list[ablations.Unit] = []
    real = (ablations.pretrain_unit, ablations.finetune_unit, ablations.test_unit)

    def pretrain(cfg, stamp):
        row, seed = Path(cfg.output_dir).name.rsplit("-s", 1)
        calls.append(ablations.Unit("pretrain", row, int(seed)))
        return real[0](cfg, stamp)

    def finetune(setup, spec, row, record, stamp):
        calls.append(ablations.Unit("finetune", row, spec.seed, spec.task, spec.rate))
        return real[1](setup, spec, row, record, stamp)

    def test(setup, spec, state_dir, chosen, seeds, record, stamp):
        calls.append(ablations.Unit("test", record.parent.name, spec.seed, spec.task))
        return real[2](setup, spec, state_dir, chosen, seeds, record, stamp)

    monkeypatch.setattr(ablations, "pretrain_unit", pretrain)
    monkeypatch.setattr(ablations, "finetune_unit", finetune)
    monkeypatch.setattr(ablations, "test_unit", test)
    return calls


def forbid_training(monkeypatch) -> None:
    """Every entry point of a unit raises: a command can only reuse what the work folder holds."""
    from bertcourse import pretrain

    def refuse(*args, **kwargs):
        raise AssertionError("a finished unit was run again")

    monkeypatch.setattr(pretrain, "run", refuse)
    monkeypatch.setattr(zf, "run_one", refuse)
    monkeypatch.setattr(zf, "test_score", refuse)


def test_a_second_command_reuses_every_finished_unit(smoke, tmp_path, monkeypatch):
    """The smoke run's work folder again, into a new JSON, with no unit allowed to run: the
    rows come from the kept records, number for number."""
    work = tmp_path / "work"
    shutil.copytree(smoke["work"], work)
    forbid_training(monkeypatch)
    again = smoke_command(work, tmp_path / "again.json")
    assert numbers(again) == numbers(smoke) and again["units_left"] == 0
    # the rows' weights were deleted once the rows were written; the records stay
    assert not list(work.glob("finetune/*/*.pt")) and len(list(work.glob("finetune/*/*.json"))) == 4


def test_d_a_stopped_command_writes_complete_rows_only_and_the_next_finishes(smoke, tmp_path, monkeypatch, recorded, capsys):  # fmt: skip
    """Each fine-tuning run takes one minute of a fake clock; --stop-after-minutes 2.5 stops
    in the second row: the JSON holds the first row alone, whole, and says how many units are
    left; the same command again runs exactly those and gives the uninterrupted run's numbers."""
    clock = [0.0]
    monkeypatch.setattr(ablations, "now", lambda: clock[0])
    real = ablations.finetune_unit

    def one_minute(*args):
        real(*args)
        clock[0] += 60

    monkeypatch.setattr(ablations, "finetune_unit", one_minute)
    work, path = tmp_path / "work", tmp_path / "a.json"
    first = smoke_command(work, path, "--stop-after-minutes", "2.5")
    units = all_units(work, ["base", "split-100-0-0"])
    # base's 5 units, then split's pretraining and first fine-tuning (minutes 2 to 3): stop
    assert recorded == units[:7]
    assert [r["name"] for r in json.loads(path.read_text())["rows"]] == ["base"]
    assert first["units_left"] == len(units) - 7 and numbers(first) == numbers(smoke)[:1]
    assert f"{len(units) - 7} units left" in capsys.readouterr().out
    recorded.clear()
    second = smoke_command(work, path)
    assert recorded == units[7:] and second["units_left"] == 0
    assert numbers(second) == numbers(smoke)


def test_b_an_interrupted_unit_leaves_nothing_trusted(smoke, tmp_path, monkeypatch):
    """A pretraining run killed after its first step (its checkpoint and report.json written,
    not unit.json) goes on from that checkpoint; half-written temporary files are ignored; the
    numbers are the uninterrupted run's."""
    from bertcourse import pretrain

    real_run = pretrain.run

    def killed(cfg):
        real_run(cfg.replace(stop_after=1))
        raise KeyboardInterrupt  # the process dies here, before unit.json

    monkeypatch.setattr(pretrain, "run", killed)
    work, path = tmp_path / "work", tmp_path / "b.json"
    args = ["--smoke", "--rows", "base", "--seeds", "0", "--work", str(work), "--json", str(path)]
    with pytest.raises(KeyboardInterrupt):
        ablations.main(args)
    folder = work / "pretrain" / "base-s0"
    assert (folder / "report.json").is_file() and not (folder / ablations.UNIT_FILE).is_file()
    assert not path.exists()
    # what a kill inside a write leaves: a temporary file, half written
    (work / "finetune" / "base").mkdir(parents=True)
    for name in ("reviews-base-s0-0.001-s0.json", "reviews-base-s0-0.001-s0-e1.pt"):
        (work / "finetune" / "base" / f".{name}.x1y2.tmp").write_text('{"spec": {"ta')
    monkeypatch.setattr(pretrain, "run", real_run)
    record = ablations.main(args)
    assert json.loads((folder / ablations.UNIT_FILE).read_text())["resumed"] is True
    assert numbers(record) == numbers(smoke)[:1]
    assert not list(work.rglob("*.tmp"))  # removed, never read


def test_one_command_at_a_time_in_a_work_folder(tmp_path):
    import fcntl

    (tmp_path / "work").mkdir()
    with open(tmp_path / "work" / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(SystemExit, match="another command is using"):
            smoke_command(tmp_path / "work", tmp_path / "x.json")


def test_b_an_atomic_write_is_whole_or_absent(tmp_path):
    target = tmp_path / "record.json"
    ablations.write_json(target, {"old": 1})

    def half_then_killed(tmp: Path) -> None:
        tmp.write_text('{"new": ')
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        zf.save_atomically(target, half_then_killed)
    assert json.loads(target.read_text()) == {"old": 1} and os.listdir(tmp_path) == ["record.json"]  # fmt: skip


@pytest.mark.slow  # two spawned processes importing torch: 20 s on the busy 2-core machine
def test_c_two_jobs_give_the_same_numbers_as_one(smoke, tmp_path):
    """Two processes of one thread each against one in-process unit at a time: every unit is
    computed by the same code on the same thread count, so the numbers are bit-identical."""
    record = smoke_command(tmp_path / "work", tmp_path / "c.json", "--jobs", "2")
    assert record["jobs"] == 2 and numbers(record) == numbers(smoke)


def test_a_work_folder_of_other_settings_is_refused(smoke, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(smoke["work"], work)
    unit = work / "pretrain" / "base-s0" / ablations.UNIT_FILE
    kept = json.loads(unit.read_text())
    kept["config"]["lr"] = 1.0
    unit.write_text(json.dumps(kept))
    # seeds 0 and 1: base's tests are not all done, so its pretraining run s0 is checked
    with pytest.raises(SystemExit, match=r"other settings \(lr: 1.0 there, 0.002 asked\)"):
        ablations.main(["--smoke", "--rows", "base", "--seeds", "0", "1", "--work", str(work),
                        "--json", str(tmp_path / "x.json")])  # fmt: skip
    grid = json.loads((work / "grid.json").read_text())
    grid["budget"]["steps"] = 4
    (work / "grid.json").write_text(json.dumps(grid))
    with pytest.raises(SystemExit, match="another budget"):
        smoke_command(work, tmp_path / "y.json")


def test_a_json_of_another_grid_is_refused_before_any_work(tmp_path):
    import dataclasses

    path = tmp_path / "a.json"
    setup = dataclasses.asdict(zf.QUICK)
    other = {"budget": dataclasses.asdict(ablations.Budget()), "finetune_setup": setup, "rows": []}
    path.write_text(json.dumps(other))
    with pytest.raises(SystemExit, match="is a grid of another budget"):
        smoke_command(tmp_path / "work", path)
    other |= {
        "budget": dataclasses.asdict(ablations.SMOKE),
        "finetune_setup": setup | {"epochs": 2},
    }
    path.write_text(json.dumps(other))
    with pytest.raises(SystemExit, match="is a grid of another finetune protocol"):
        smoke_command(tmp_path / "work", path)
    assert not (tmp_path / "work").exists()
