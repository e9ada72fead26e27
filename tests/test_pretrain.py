"""python -m bertcourse.pretrain: a short smoke run (loss goes down, report and plots written),
exact resume from a checkpoint, fill-mask, the unigram baseline, and the command line."""

from __future__ import annotations

import json
import re

import pytest
import torch

from bertcourse import data
from bertcourse.config import IGNORE_INDEX
from bertcourse.mlm import MaskSplit
from bertcourse.pretrain import (
    MIN_STEPS_TO_LEARN,
    BatchStats,
    PretrainConfig,
    evaluate,
    evaluate_checkpoint,
    fill_mask,
    heldout_batches,
    load_checkpoint,
    main,
    run,
    too_few_steps_warning,
    unigram_baseline,
)

# A small, fast run on the real corpus: 1 layer, hidden 64, short sequences, few eval pairs.
SMOKE = PretrainConfig(
    model="custom",
    tokenizer="bert",  # the shipped vocabulary: nothing to train in CI
    layers=1,
    hidden=64,
    heads=2,
    dropout=0.1,  # BERT's (the default is 0): resume and same-seed tests cover its seeded noise
    mlm_probability=0.15,  # BERT's (the default is 0.25)
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
        assert all(isinstance(x.token, str) and tok.id_to_token(x.token_id) == x.token for x in p)
    with pytest.raises(ValueError, match="no \\[MASK\\]"):
        fill_mask(model, tok, "nothing to fill")


def test_fill_mask_command_line(smoke_run, capsys):
    main(["fill-mask", "--checkpoint", str(smoke_run[0]), "--top-k", "3", "a [MASK] test."])
    out = capsys.readouterr().out
    assert "a [MASK] test." in out and "[MASK] 1:" in out
    # Every probability is printed readably: 12 steps leave them all small, none is "0.000".
    model, tok = load_checkpoint(smoke_run[0])
    want = fill_mask(model, tok, "a [MASK] test.", top_k=3)[0]
    shown = re.findall(r"(\S+) (\d\S*)", out.split("[MASK] 1:")[1])
    assert [t for t, _ in shown] == [x.token for x in want]
    for (_, text), x in zip(shown, want):
        assert float(text) == pytest.approx(x.probability, rel=5e-3) and text != "0.000"


def test_help_shows_the_subcommands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    usage = capsys.readouterr().out.split("\n\n")[0]  # the usage block, before the description
    for sub in ("[train]", "fill-mask --checkpoint DIR", "evaluate DIR"):
        assert sub in usage, usage


def test_an_unknown_language_is_refused_with_the_known_ones(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--lang", "xx", "--steps", "1", "--output", str(tmp_path)])
    assert e.value.code == 2
    assert "unknown language 'xx': the languages are en, zh" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing was started
    with pytest.raises(ValueError, match="unknown language"):
        PretrainConfig(lang="xx")
    assert PretrainConfig().lang == "en" and SMOKE.replace(lang="en").model_config


def test_a_warm_up_in_steps_needs_steps(tmp_path):
    cfg = SMOKE.replace(steps=None, max_minutes=0.05, warmup_steps=10, eval_every=0)
    with pytest.raises(ValueError, match=r"--warmup-steps needs --steps: with --max-minutes alone the warm-up is the first 10% of the training time"):  # fmt: skip
        run(cfg.replace(output_dir=str(tmp_path)))


def test_too_few_steps_warn_and_say_how_many_minutes_are_needed():
    # 1 step at 500 ms with 40 s of fixed costs: 1,500 steps need 40 + 750 s = 13.2 minutes.
    warning = too_few_steps_warning(1, 0.5, 40.0)
    assert warning.startswith("WARNING: 1 step is too few to learn")
    assert (
        f"about {MIN_STEPS_TO_LEARN:,} steps" in warning and "--max-minutes 14 or more" in warning
    )
    assert "2 steps are too few" in too_few_steps_warning(2, 0.5, 40.0)
    assert too_few_steps_warning(MIN_STEPS_TO_LEARN, 0.5, 40.0) is None


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
    # what the labelled positions show: [MASK] (103), the answer itself, or another token
    shown = torch.tensor([[103, 1600, 5, 42], [7, 0, 103, 1999]])
    res = unigram_baseline(train, [{"labels": labels, "input_ids": shown}])
    assert res["token_id"] == 1500 and res["n_predictions"] == 6
    assert res["mlm_acc"] == pytest.approx(3 / 6)
    # at [MASK]: (0,0) 1500 and (1,2) 1500, both right; at another token: (0,3) 1700, (1,0) 1500
    assert (res["n_at_mask"], res["mlm_acc_at_mask"]) == (2, pytest.approx(1.0))
    assert (res["n_at_random"], res["mlm_acc_at_random"]) == (2, pytest.approx(0.5))
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


def test_report_has_speed_padding_and_mfu(smoke_run):
    _, report = smoke_run
    assert report["tokens_per_second"] > 0
    assert 0.0 <= report["padding_share"] < 1.0
    peak = report["matmul_peak_flops_per_second"]
    assert peak > 1e8  # measured at the start of the run
    # MFU = model FLOPs per second / peak: a share, and the product gives the FLOP rate back.
    assert 0.0 < report["mfu"] < 1.0
    assert report["mfu"] * peak == pytest.approx(report["model_flops_per_second"])
    assert all(r["tokens_per_s"] > 0 and 0 < r["mfu"] < 1 for r in report["history"]["train"])


def test_batch_stats_add_up_and_evaluate_reuses_them():
    a = BatchStats(n_predictions=4, mlm_loss_sum=8.0, mlm_correct=1, n_at_mask=2,
                   mlm_correct_at_mask=1, n_at_random=1, mlm_correct_at_random=0, n_pairs=2,
                   nsp_loss_sum=1.0, nsp_correct=2, tokens=30, positions=40, flops=1e6)  # fmt: skip
    b = BatchStats.from_tensor(a.as_tensor())
    assert b == a
    m = (a + a).metrics()
    assert m["mlm_loss"] == 2.0 and m["mlm_acc"] == 0.25 and m["mlm_acc_at_mask"] == 0.5
    assert m["mlm_acc_at_random"] == 0.0 and (m["n_at_mask"], m["n_at_random"]) == (4, 2)
    assert m["nsp_loss"] == 0.5 and m["nsp_acc"] == 1.0 and m["n_predictions"] == 8
    assert (a + a).padding_share == pytest.approx(0.25)


def test_evaluate_matches_a_hand_computation(smoke_run):
    model, _ = load_checkpoint(smoke_run[0])
    corpus, _ = data.load_corpus("bert")
    _, heldout = corpus.split()
    batches = data.eval_batches(heldout, max_seq_length=48, max_examples=16)
    got = evaluate(model, batches, corpus.vocab.mask_id, torch.device("cpu"))
    logits, targets, shown, nsp_right, n_pairs = [], [], [], 0, 0
    with torch.no_grad():
        for b in batches:
            out = model(b["input_ids"], b["token_type_ids"], b["attention_mask"])  # no labels
            chosen = b["labels"] != IGNORE_INDEX
            logits.append(out.prediction_logits[chosen])  # (N_b, V) from the full (B, L, V)
            targets.append(b["labels"][chosen])
            shown.append(b["input_ids"][chosen])
            nsp_right += int((out.seq_relationship_logits.argmax(-1) == b["next_sentence_label"]).sum())  # fmt: skip
            n_pairs += len(b["next_sentence_label"])
    logits, targets = torch.cat(logits), torch.cat(targets)
    assert got["n_predictions"] == len(targets) and got["n_pairs"] == n_pairs
    ce = torch.nn.functional.cross_entropy(logits, targets).item()
    assert got["mlm_loss"] == pytest.approx(ce, rel=1e-5)
    assert got["mlm_acc"] == pytest.approx((logits.argmax(-1) == targets).double().mean().item())
    assert got["nsp_acc"] == pytest.approx(nsp_right / n_pairs)
    right, shown = logits.argmax(-1) == targets, torch.cat(shown)
    at_mask = shown == corpus.vocab.mask_id
    at_random = (shown != corpus.vocab.mask_id) & (shown != targets)  # nor the answer
    assert 0 < at_random.sum() < at_mask.sum() and (at_mask | at_random).sum() < len(targets)
    assert (got["n_at_mask"], got["n_at_random"]) == (at_mask.sum(), at_random.sum())
    assert got["mlm_acc_at_mask"] == pytest.approx(right[at_mask].double().mean().item())
    assert got["mlm_acc_at_random"] == pytest.approx(right[at_random].double().mean().item())


def test_heldout_set_is_the_same_for_every_run():
    """Runs with other seeds, mask rates and lengths answer the same held-out questions."""
    corpus, _ = data.load_corpus("bert")
    _, heldout = corpus.split()
    base = SMOKE.replace(max_seq_length=64, eval_examples=40)
    ref = heldout_batches(heldout, base)
    assert max(int(b["attention_mask"].sum(-1).max()) for b in ref) == 64  # cut to 64
    for other in (dict(seed=7), dict(mlm_probability=0.4), dict(max_seq_length=128)):
        got = heldout_batches(heldout, base.replace(**other))
        assert len(got) == len(ref), other
        for a, b in zip(got, ref):
            assert a.keys() == b.keys()
            assert all(torch.equal(a[k], b[k]) for k in a), other
    # A run shorter than eval_seq_length is judged on pairs of its own length.
    short = heldout_batches(heldout, base.replace(max_seq_length=32))
    assert max(int(b["input_ids"].shape[1]) for b in short) <= 32
    # The mask rate is BERT's 15% whatever the run trains with.
    chosen = sum(int((b["labels"] != IGNORE_INDEX).sum()) for b in ref)
    real = sum(int(b["attention_mask"].sum()) for b in ref) - 3 * sum(len(b["input_ids"]) for b in ref)  # fmt: skip
    assert chosen / real == pytest.approx(0.15, abs=0.02)


def test_evaluate_checkpoint_reproduces_the_runs_figures(smoke_run, capsys):
    out, report = smoke_run
    got = evaluate_checkpoint(out, with_transformers=True)
    final = report["final_eval"]
    for k in ("n_predictions", "n_pairs"):
        assert got[k] == final[k]
    for k in ("mlm_loss", "mlm_acc", "mlm_acc_at_mask", "nsp_acc"):
        assert got[k] == pytest.approx(final[k], rel=1e-6), k
    assert got["unigram_baseline"] == pytest.approx(report["unigram_baseline"])
    # The same weights run by transformers score the same (an argmax tie could differ: none here).
    for k, v in got["transformers"].items():
        assert v == pytest.approx(final[k], abs=1e-9), k
    main(["evaluate", str(out), "--transformers"])
    printed = capsys.readouterr().out
    assert f"MLM acc {final['mlm_acc']:.3f}" in printed and "pairs of <= 48 tokens" in printed
    assert "transformers' BertForPreTraining" in printed


def test_packed_run_trains_with_little_padding(tmp_path):
    report = run(SMOKE.replace(steps=8, packing=True, eval_every=0, plots=False, output_dir=str(tmp_path)))  # fmt: skip
    losses = [r["loss"] for r in report["history"]["train"]]
    assert len(losses) == 8 and losses[0] == pytest.approx(11.0, abs=0.4)
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3
    assert report["padding_share"] < 0.05  # unpacked: ~20% at max_seq_length 48
    assert report["final_eval"]["n_pairs"] > 0  # evaluation stays unpacked


@pytest.mark.parametrize("threads", [1, 2])
def test_same_seed_same_threads_same_run(tmp_path, threads):
    # On CPU the whole run is a function of (settings, seed, thread count): data order, masks
    # and dropout are seeded, and the kernels split their work the same way for a given
    # number of threads. (The thread count itself may change the rounding of sums.)
    cfg = SMOKE.replace(steps=5, eval_every=0, plots=False, threads=threads)
    a = run(cfg.replace(output_dir=str(tmp_path / "a")))
    b = run(cfg.replace(output_dir=str(tmp_path / "b")))
    assert [r["loss"] for r in a["history"]["train"]] == [r["loss"] for r in b["history"]["train"]]
    assert a["final_eval"] == b["final_eval"]
    ma, _ = load_checkpoint(tmp_path / "a")
    mb, _ = load_checkpoint(tmp_path / "b")
    for (name, p), q in zip(ma.named_parameters(), mb.parameters()):
        assert torch.equal(p, q), name


# --- the pretraining choices as options (chapter 10's ablations) ---------------------------
def _toy_corpus(seed: int = 0) -> data.TokenizedCorpus:
    """20 documents of 10 sentences of random ids 5..199 (0-4 special)."""
    import random

    rng = random.Random(seed)
    docs = [[[rng.randint(5, 199) for _ in range(rng.randint(3, 12))] for _ in range(10)]
            for _ in range(20)]  # fmt: skip
    return data.TokenizedCorpus([f"d{i}" for i in range(20)], docs, data.Vocab(200, 0, 1, 2, 3, 4))


def _epoch_rows(corpus, epoch: int, **options) -> list[tuple]:
    """Every (input ids, labels) row of an epoch, sorted: the epoch's data whatever its order
    (batches of 1: no incomplete batch dropped)."""
    loader = data.pretraining_dataloader(corpus, batch_size=1, epoch=epoch, seed=1,
                                         max_seq_length=24, **options)  # fmt: skip
    rows = []
    for batch in loader:
        for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist()):
            rows.append((tuple(ids), tuple(labels)))
    return sorted(rows)


def test_static_masking_repeats_its_copies_and_dynamic_never_does():
    """--static-masking N: epoch e reads copy e mod N, the same pairs with the same masks;
    dynamic (the default) cuts and masks anew every epoch."""
    corpus = _toy_corpus()
    static = [_epoch_rows(corpus, e, static_masking=2) for e in range(4)]
    assert static[0] == static[2] and static[1] == static[3] and static[0] != static[1]
    dynamic = [_epoch_rows(corpus, e) for e in range(3)]
    assert dynamic[0] != dynamic[2] and dynamic[0] == static[0]  # copy 0 is epoch 0's draw


def test_the_options_reach_the_batches():
    """--mask-split, --mask-rate and --sentence-task change what the loader gives."""
    corpus = _toy_corpus(1)
    loader = data.pretraining_dataloader(corpus, batch_size=64, seed=0, max_seq_length=24,
                                         mlm_probability=0.4, task="none",
                                         mask_split=MaskSplit(1.0, 0.0, 0.0))  # fmt: skip
    batch = next(iter(loader))
    chosen = batch["labels"] != IGNORE_INDEX
    assert (batch["input_ids"][chosen] == corpus.vocab.mask_id).all()  # 100% [MASK]
    real = (batch["attention_mask"] == 1) & (batch["input_ids"] > 4) | chosen
    n_chosen, n = int(chosen.sum()), int(real.sum())
    assert abs(n_chosen / n - 0.4) < 4 * (0.24 / n) ** 0.5  # the rate, within 4 SE
    assert (batch["next_sentence_label"] == 0).all()  # no sentence task: pairs in order


@pytest.mark.parametrize(
    "args, message",
    [
        (["--mask-split", "0.8,0.1,0.2"], "must sum to 1"),
        (["--mask-split", "0.8,0.2"], "three comma-separated"),
        (["--mask-rate", "0"], r"masking rate \(--mask-rate\) must be in \(0, 1\)"),
        (["--mlm-probability", "1.5"], r"must be in \(0, 1\)"),
        (["--static-masking", "0"], "number of copies >= 1"),
        (["--whole-word-masking", "jieba"], "needs --lang zh"),
        (["--sentence-task", "order"], "invalid choice"),
    ],
)
def test_bad_pretraining_choices_are_refused_clearly(args, message, capsys):
    with pytest.raises(SystemExit):
        main([*args, "--steps", "1", "--output", "/nonexistent/never-written"])
    assert re.search(message, capsys.readouterr().err)


def test_the_choices_are_saved_and_a_resume_keeps_them(tmp_path):
    argv = ["--model", "custom", "--tokenizer", "bert", "--layers", "1", "--hidden", "32", "--heads", "2",
            "--max-seq-length", "32", "--batch-size", "4", "--steps", "3", "--stop-after", "2",
            "--eval-examples", "8", "--eval-every", "0", "--no-progress", "--no-plots", "--no-peak",
            "--threads", "1", "--output", str(tmp_path), "--mask-split", "0,0.2,0.8",
            "--mask-rate", "0.4", "--sentence-task", "none", "--static-masking", "3",
            "--whole-word-masking"]  # fmt: skip
    main(argv)
    saved = PretrainConfig.load(tmp_path)
    assert (saved.mask_split, saved.mlm_probability, saved.sentence_task) == (MaskSplit(0, 0.2, 0.8), 0.4, "none")  # fmt: skip
    assert (saved.static_masking, saved.whole_word_mask, saved.word_source) == (3, True, "gold")
    report = main(["--resume", str(tmp_path), "--no-progress", "--threads", "1"])
    assert report["steps_done"] == 3 and report["config"]["mask_split"] == {"mask": 0.0, "same": 0.2, "random": 0.8}  # fmt: skip
    with pytest.raises(ValueError, match="sentence_task='nsp'"):
        run(saved.replace(sentence_task="nsp", steps=3, resume=str(tmp_path), progress=False))


def test_no_sentence_task_leaves_the_nsp_head_untrained(tmp_path):
    """--sentence-task none: the loss is MLM alone, so the NSP head and the pooler below it,
    which only the sentence loss reads, get no gradient (AdamW skips them: no decay either)
    while the MLM head learns. A classifier fine-tuned on [CLS] starts from an untrained pooler."""
    from bertcourse.model import BertForPreTraining

    cfg = SMOKE.replace(steps=3, output_dir=str(tmp_path), sentence_task="none", eval_every=0,
                        plots=False, measure_peak=False)  # fmt: skip
    run(cfg)
    trained, tokenizer = load_checkpoint(tmp_path)
    torch.manual_seed(cfg.seed)  # the run's initialisation (bertcourse.pretrain._prepare)
    init = BertForPreTraining(cfg.model_config(data.Vocab.from_tokenizer(tokenizer)))
    for name, before in init.state_dict().items():
        after = trained.state_dict()[name]
        if "seq_relationship" in name or "pooler" in name:
            assert torch.equal(before, after), name
    assert not torch.equal(init.state_dict()["cls.predictions.bias"], trained.state_dict()["cls.predictions.bias"])  # fmt: skip
    assert sum("pooler" in name for name in init.state_dict()) == 2  # weight and bias, both checked


def test_jieba_word_starts_follow_jiebas_words():
    """--whole-word-masking jieba: a token starts a word where jieba's cut starts one. jieba's
    README example: 我来到北京清华大学 -> 我 / 来到 / 北京 / 清华大学 (its default dictionary)."""
    from bertcourse.zh import jieba_word_starts

    assert jieba_word_starts(list("我来到北京清华大学")) == [1, 1, 0, 1, 0, 1, 0, 0, 0]
    # tokens of several characters, "##" pieces counted by their text
    assert jieba_word_starts(["我", "来到", "北", "##京", "清华", "##大学"]) == [1, 1, 1, 0, 1, 0]


# --- --max-minutes: the schedule runs on the time (a fake clock) ----------------------------
class FakeClock:
    """Time that passes only when a training step says so (set-up, evaluations: no time)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def _steps_take(monkeypatch, clock: FakeClock, seconds) -> None:
    """Each training step advances ``clock`` by ``seconds(step)``."""
    import bertcourse.pretrain as pretrain

    real = pretrain.train_step

    def timed_step(*args, **kwargs):
        out = real(*args, **kwargs)
        clock.now += seconds(kwargs["step"])
        return out

    monkeypatch.setattr(pretrain, "train_step", timed_step)


TIME_RUN = SMOKE.replace(steps=None, warmup_steps=None, max_minutes=0.1, eval_every=0, plots=False,
                         measure_peak=False, dropout=0.0)  # fmt: skip  # 6 s of fake time
# seconds per step: 26, 9 and 21 steps in the 6 s (no pace divides 6 s exactly; at 0.7 s the
# ninth step ends 0.3 s late, nearer the budget than stopping 0.4 s early)
PACES = {
    "fast": lambda step: 0.23,
    "slow": lambda step: 0.7,
    "sudden slow-down": lambda step: 0.11 if step < 10 else 0.43,
}


@pytest.mark.parametrize("pace", PACES)
def test_a_time_budget_is_used_whole_and_its_schedule_completes(tmp_path, monkeypatch, pace):
    """Whatever the steps' times, the run trains until the next step would end more than half a
    step past the budget (so it ends within half a step of it), and each step's rate is the schedule at the share of the time spent before it: warm-up over
    the first 10%, then linear decay to 0 at the end (computed here from the steps' times)."""
    clock, seconds = FakeClock(), PACES[pace]
    _steps_take(monkeypatch, clock, seconds)
    report = run(TIME_RUN.replace(output_dir=str(tmp_path)), clock=clock)
    budget = 60 * TIME_RUN.max_minutes  # set-up and evaluations take no fake time
    n = report["steps_done"]
    spent = sum(seconds(k) for k in range(n))
    assert report["stopped_by"] == "time_budget"
    assert report["time_budget"] == pytest.approx(
        {"seconds": budget, "minutes": 0.1, "spent": spent}
    )
    assert abs(spent - budget) <= seconds(n - 1) / 2  # within half a step of the budget
    assert clock.now - 1000.0 == pytest.approx(spent)
    assert report["wall_seconds_this_run"] == pytest.approx(spent)  # the end takes no fake time
    lrs = [r["lr"] for r in report["history"]["train"]]
    for k, lr in enumerate(lrs):
        f = sum(seconds(j) for j in range(k)) / budget
        # abs: the schedule is read on a grid of 1e-6 of the run, 1e-8 of the rate at most
        assert lr == pytest.approx(TIME_RUN.lr * min(f / 0.1, (1 - f) / 0.9), abs=2e-8), k
    # complete: the last step started within 1.5 steps of the end, its rate that close to 0
    assert lrs[-1] <= TIME_RUN.lr * 1.5 * seconds(n - 1) / (0.9 * budget)


def test_a_time_budget_warns_with_the_minutes_this_machine_needs(tmp_path, monkeypatch, capsys):
    """At 0.7 s a step, 6 s give 8 whole steps: the warning names 1,500 x 0.7 s = 17.5 -> 18 minutes."""
    clock = FakeClock()
    _steps_take(monkeypatch, clock, PACES["slow"])
    run(TIME_RUN.replace(output_dir=str(tmp_path)), clock=clock)
    log = capsys.readouterr().err
    assert "700 ms per step over 1 step -> about 8 steps" in log
    assert re.search(r"WARNING: 8 steps are too few to learn.* at 700 ms per step, give --max-minutes 18 or more", log)  # fmt: skip


def test_a_time_budget_resumes_exactly(tmp_path, monkeypatch):
    """Stopped after 8 steps and resumed (a new process: another clock), the run continues its
    schedule from the seconds it had spent and ends with the weights of a run that never stopped."""
    clock = FakeClock()
    _steps_take(monkeypatch, clock, PACES["sudden slow-down"])
    cfg = TIME_RUN.replace(dropout=0.1)  # seeded dropout noise too
    whole = run(cfg.replace(output_dir=str(tmp_path / "whole")), clock=clock)
    clock.now = 5000.0
    run(cfg.replace(output_dir=str(tmp_path / "parts"), stop_after=8), clock=clock)
    clock.now = 9000.0
    parts = run(cfg.replace(output_dir=str(tmp_path / "parts"), resume=str(tmp_path / "parts"),
                            max_minutes=None), clock=clock)  # fmt: skip
    assert parts["steps_done"] == whole["steps_done"] > 8
    assert parts["time_budget"] == pytest.approx(whole["time_budget"])
    assert [r["lr"] for r in parts["history"]["train"]] == [r["lr"] for r in whole["history"]["train"]]  # fmt: skip
    a, _ = load_checkpoint(tmp_path / "whole")
    b, _ = load_checkpoint(tmp_path / "parts")
    for name, tensor in a.state_dict().items():
        assert torch.equal(tensor, b.state_dict()[name]), name
    with pytest.raises(ValueError, match="runs on the time of --max-minutes; resume it without --steps"):  # fmt: skip
        run(cfg.replace(steps=50, resume=str(tmp_path / "parts"), output_dir=str(tmp_path / "x")))


def test_the_chinese_recipe_runs_chapter_9s_steps():
    """Chapter 9 and the README say `--lang zh` runs 9,000 steps (benchmarks/zh_pretraining.py)."""
    assert PretrainConfig.for_language("zh").steps == 9000
    assert PretrainConfig.for_language("en").steps == PretrainConfig().steps == 1000
