"""python -m bertcourse.pretrain: a short smoke run (loss goes down, report and plots written),
exact resume from a checkpoint, fill-mask, the unigram baseline, and the command line."""

from __future__ import annotations

import json

import pytest
import torch

from bertcourse import data
from bertcourse.config import IGNORE_INDEX
from bertcourse.pretrain import (
    PretrainConfig,
    fill_mask,
    load_checkpoint,
    main,
    run,
    unigram_baseline,
)

# A small, fast run on the real corpus: 1 layer, hidden 64, short sequences, few eval pairs.
SMOKE = PretrainConfig(
    model="custom",
    tokenizer="bert",  # the shipped vocabulary: nothing to train in CI
    layers=1,
    hidden=64,
    heads=2,
    max_seq_length=48,
    batch_size=8,
    lr=2e-3,
    warmup_steps=2,
    eval_examples=24,
    eval_every=4,
    checkpoint_every=0,
    log_every=1,
    progress=False,
    threads=1,
)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke")
    report = run(SMOKE.replace(steps=12, output_dir=str(out)))
    return out, report


def test_smoke_run_learns_and_reports(smoke_run):
    out, report = smoke_run
    losses = [r["loss"] for r in report["history"]["train"]]
    assert len(losses) == 12 and all(map(lambda x: x == x, losses))  # no NaN
    # From ~ln(30522) + ln(2) = 11.0 at initialisation, the first steps must bring it down.
    assert losses[0] == pytest.approx(11.0, abs=0.4)
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.3  # 11.01 -> 10.54 here
    # The held-out MLM loss goes down too.
    ev = report["history"]["eval"]
    assert [e["step"] for e in ev] == [0, 4, 8, 12]
    assert ev[-1]["mlm_loss"] < ev[0]["mlm_loss"]
    # Files: report, plots, checkpoint.
    on_disk = json.loads((out / "report.json").read_text())
    assert on_disk["steps_done"] == 12 and on_disk["final_eval"] == report["final_eval"]
    for png in ("curves.png", "lr.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for f in ("model.safetensors", "config.json", "tokenizer.json", "trainer_state.pt"):
        assert (out / "checkpoint" / f).is_file()
    assert report["corpus"]["train"]["tokens"] > 100_000
    assert report["unigram_baseline"]["mlm_acc"] > 0
    # The learning rate followed warm-up then linear decay (bertcourse.optim).
    lrs = [r["lr"] for r in report["history"]["train"]]
    assert lrs[0] == 0.0 and lrs[2] == pytest.approx(2e-3)
    assert lrs[-1] == pytest.approx(2e-3 * 1 / 10)


def test_resume_continues_exactly(tmp_path, smoke_run):
    _, full = smoke_run  # 12 steps without stopping
    cfg = SMOKE.replace(steps=12, output_dir=str(tmp_path), eval_every=0, plots=False)
    first = run(cfg.replace(stop_after=5))
    assert first["steps_done"] == 5 and first["stopped_by"] == "stop_after"
    second = run(cfg.replace(resume=str(tmp_path)))
    assert second["steps_done"] == 12
    assert [r["loss"] for r in second["history"]["train"]] == [
        r["loss"] for r in full["history"]["train"]
    ]
    a, _ = load_checkpoint(tmp_path)
    b, _ = load_checkpoint(smoke_run[0])
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(p, q), name
    # The final held-out metrics are the same numbers.
    assert second["final_eval"] == full["final_eval"]


def test_resume_refuses_a_different_model(tmp_path, smoke_run):
    with pytest.raises(ValueError, match="hidden"):
        run(SMOKE.replace(hidden=32, output_dir=str(tmp_path), resume=str(smoke_run[0])))


def test_fill_mask(smoke_run):
    model, tok = load_checkpoint(smoke_run[0])
    preds = fill_mask(model, tok, "the [MASK] of a list is its [MASK] of items.", top_k=4)
    assert len(preds) == 2 and all(len(p) == 4 for p in preds)
    for p in preds:
        probs = [x[1] for x in p]
        assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6
        assert all(isinstance(t, str) for t, _ in p)
    with pytest.raises(ValueError, match="no \\[MASK\\]"):
        fill_mask(model, tok, "nothing to fill")


def test_fill_mask_command_line(smoke_run, capsys):
    main(["fill-mask", "--checkpoint", str(smoke_run[0]), "--top-k", "3", "a [MASK] test."])
    out = capsys.readouterr().out
    assert "a [MASK] test." in out and "[MASK] 1:" in out


def test_command_line_and_resume_defaults(tmp_path):
    argv = ["--model", "custom", "--tokenizer", "bert", "--layers", "1", "--hidden", "32", "--heads", "2",
            "--max-seq-length", "32", "--batch-size", "4", "--steps", "3", "--stop-after", "2",
            "--eval-examples", "8", "--eval-every", "0", "--no-progress", "--no-plots",
            "--threads", "1", "--output", str(tmp_path)]  # fmt: skip
    report = main(argv)
    assert report["steps_done"] == 2 and report["model_config"]["hidden_size"] == 32
    # --resume alone reuses the saved settings (a 32-wide model, 3 steps) and finishes.
    report = main(["--resume", str(tmp_path), "--no-progress", "--threads", "1"])
    assert report["steps_done"] == 3 and report["stopped_by"] == "steps"
    assert not (tmp_path / "curves.png").exists()  # --no-plots was kept too


def test_unigram_baseline_by_hand():
    vocab = data.Vocab(2000, 0, 100, 101, 102, 103)
    # Token 1500 is the most frequent non-special token; 101 (special) is more frequent.
    docs = [[[1500, 1500, 1500, 1600], [101, 101, 101, 101, 101]], [[1600, 1700]]]
    train = data.TokenizedCorpus(["a", "b"], docs, vocab)
    labels = torch.tensor([[1500, 1600, IGNORE_INDEX, 1700], [1500, IGNORE_INDEX, 1500, 1999]])
    res = unigram_baseline(train, [{"labels": labels}])
    assert res["token_id"] == 1500 and res["n_predictions"] == 6
    assert res["mlm_acc"] == pytest.approx(3 / 6)
    counts = torch.zeros(2000, dtype=torch.float64)
    counts[1500], counts[1600], counts[1700] = 3, 2, 1
    p = (counts + 1) / (counts + 1).sum()
    targets = torch.tensor([1500, 1600, 1700, 1500, 1500, 1999])
    assert res["mlm_loss"] == pytest.approx(float(-p[targets].log().mean()))


def test_config_sizes():
    v = data.Vocab(30522, 0, 100, 101, 102, 103)
    assert PretrainConfig(model="tiny").model_config(v).num_hidden_layers == 2
    mini = PretrainConfig(model="mini").model_config(v)
    assert (mini.num_hidden_layers, mini.hidden_size) == (4, 256)
    custom = PretrainConfig(model="custom", layers=3, hidden=192).model_config(v)
    assert (custom.num_attention_heads, custom.intermediate_size) == (3, 768)
    with pytest.raises(ValueError, match="--layers and --hidden"):
        PretrainConfig(model="custom").model_config(v)
    assert PretrainConfig(steps=1000).warmup == 100
