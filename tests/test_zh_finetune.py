"""Chapter 9's fine-tuning benchmark: labels aligned to tokens, padded batches, the token head,
word F1, the baselines, and the committed benchmarks/figures/zh_finetune.json re-checked
(choices on validation, the test set once per run, the summaries, the split sizes, the first
losses re-run)."""

from __future__ import annotations

import json
import random
import shutil
import statistics
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks import zh_finetune as bench  # noqa: E402
from bertcourse import zh  # noqa: E402
from bertcourse import zh_tasks as zt  # noqa: E402

COMMITTED = json.loads((ROOT / "benchmarks" / "figures" / "zh_finetune.json").read_text())


def committed_setup(record: dict = COMMITTED) -> bench.Setup:
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in record["setup"].items()}
    return bench.Setup(**values)


@pytest.fixture(scope="module")
def tokenizer():
    return bench.tokenizer()


# --- labels aligned to tokens ------------------------------------------------------------------


def test_token_tags_are_bmes_when_every_character_is_a_token(tokenizer):
    _, heldout = zh.split_paragraphs()
    sentences = [s for p in heldout[:40] for s in zh.sentences_of(p)]
    checked = 0
    for words in sentences:
        tagged = zt.tag_sentence(tokenizer, words)
        if all(b - a == 1 for a, b in tagged.offsets) and len(tagged.ids) == len(tagged.text):
            assert [zh.TAGS[t] for t in tagged.tags] == zh.bmes_tags(words)
            checked += 1
        # reading the gold tags back gives the gold words, whatever the tokens
        tags = [zh.TAGS[t] for t in tagged.tags]
        assert zt.words_from_token_tags(tagged.text, tagged.offsets, tags) == list(words)
    assert checked > 50


def test_unknown_runs_and_dropped_characters_align(tokenizer):
    # half-width Latin letters are not in the vocabulary: "ABC" is one [UNK] over 3 characters
    words = ["我", "用", "ABC", "，"]
    tagged = zt.tag_sentence(tokenizer, words)
    unk = tokenizer.token_to_id("[UNK]")
    assert tagged.ids[2] == unk and tagged.offsets[2] == (2, 5)
    assert [zh.TAGS[t] for t in tagged.tags] == ["S", "S", "S", "S"]
    # a word boundary inside the [UNK] cannot be tagged: the token covers both words
    split = zt.tag_sentence(tokenizer, ["我", "AB", "C"])
    assert [zh.TAGS[t] for t in split.tags] == ["S", "S"]
    read = zt.words_from_token_tags(split.text, split.offsets, ["S", "S"])
    assert read == ["我", "ABC"]
    assert zh.segmentation_f1([["我", "AB", "C"]], [read]).correct_words == 1
    # a character the tokenizer drops (a space) stays with the word before it
    encoding = tokenizer.encode("我 爱你", add_special_tokens=False)
    assert [tuple(o) for o in encoding.offsets] == [(0, 1), (2, 3), (3, 4)]
    assert zt.words_from_token_tags("我 爱你", encoding.offsets, ["S", "B", "E"]) == ["我 ", "爱你"]
    # a token starting inside a word and ending it
    assert zt.token_tags(["被告人"], [(0, 1), (1, 3)]) == ["B", "E"]
    with pytest.raises(ValueError, match="outside"):
        zt.token_tags(["被告"], [(0, 3)])


def test_any_tags_read_leniently_spell_the_text():
    rng = random.Random(0)
    text = "中华人民共和国今天成立了"
    offsets = [(i, i + 1) for i in range(len(text))]
    for _ in range(200):
        tags = [rng.choice(zh.TAGS) for _ in text]
        words = zt.words_from_token_tags(text, offsets, tags)
        assert "".join(words) == text and all(words)
        # where the tags are valid BMES, the lenient reading is zh.words_from_tags
        try:
            strict = zh.words_from_tags(list(text), tags)
        except ValueError:
            continue
        assert words == strict
    with pytest.raises(ValueError, match="one tag per token"):
        zt.words_from_token_tags(text, offsets, ["S"])
    with pytest.raises(ValueError, match="not one of"):
        zt.words_from_token_tags("中", [(0, 1)], ["X"])


def test_word_f1_counts_spans():
    # gold 我们|在|北京, predicted 我|们在|北京: only 北京 has a gold span
    score = zh.segmentation_f1([["我们", "在", "北京"]], [["我", "们在", "北京"]])
    assert (score.correct_words, score.gold_words, score.predicted_words) == (1, 3, 3)
    assert score.f1 == pytest.approx(1 / 3)
    # the same word at another place is not correct: 北京|北京 against 北|京北|京
    score = zh.segmentation_f1([["北京", "北京"]], [["北", "京北", "京"]])
    assert score.correct_words == 0 and score.f1 == 0.0


# --- batches, windows, the head ------------------------------------------------------------------


def test_collate_pads_masks_and_ignores():
    batch = zt.collate([[2, 7, 3], [2, 3]], [[-100, 1, -100], [-100, -100]], pad_id=0)
    assert batch.input_ids.tolist() == [[2, 7, 3], [2, 3, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch.labels.tolist() == [[-100, 1, -100], [-100, -100, -100]]
    trimmed = batch.batch(torch.tensor([1]))
    assert trimmed.input_ids.tolist() == [[2, 3]] and trimmed.labels.shape == (1, 2)
    assert zt.collate([[2, 3]], [1]).labels.tolist() == [1]
    with pytest.raises(ValueError, match="labels"):
        zt.collate([[2, 7, 3]], [[1]])
    with pytest.raises(ValueError, match="empty"):
        zt.collate([[]], [0])


def test_long_sentences_are_tagged_in_windows_and_put_back(tokenizer, monkeypatch):
    _, heldout = zh.split_paragraphs()
    sentences = sorted((s for p in heldout[:200] for s in zh.sentences_of(p)), key=len)[-3:]
    sentences.append(["短", "句"])
    data = zt.encode_tagging(tokenizer, sentences)
    assert max(len("".join(s)) for s in sentences) > 2 * (zt.MAX_TOKENS - 2)
    assert data.encoded.input_ids.shape[1] <= zt.MAX_TOKENS
    assert len(data.windows) > len(sentences) + 2
    # each window is [CLS] .. [SEP], its labels the sentence's tags in order
    cls, sep, _ = zt.special_ids(tokenizer)
    for row, (index, first) in enumerate(data.windows):
        n = int(data.encoded.attention_mask[row].sum())
        ids = data.encoded.input_ids[row, :n].tolist()
        assert ids[0] == cls and ids[-1] == sep
        assert ids[1:-1] == list(data.sentences[index].ids[first : first + n - 2])
        labels = data.encoded.labels[row].tolist()
        assert labels[0] == labels[n - 1] == zt.IGNORE_INDEX
        assert all(label == zt.IGNORE_INDEX for label in labels[n:])  # padding
        assert labels[1 : n - 1] == list(data.sentences[index].tags[first : first + n - 2])

    # a "model" whose logits are the gold labels: the windows put back give the gold words
    def gold_logits(model, encoded, batch_size=256):
        return F.one_hot(encoded.labels.clamp(min=0), len(zh.TAGS)).float()

    monkeypatch.setattr(zt, "logits_of", gold_logits)
    model = zt.BertForTokenClassification(bench.new_model("segmentation", "random", 0).config)
    assert zt.segment(model, data) == [list(s) for s in sentences]
    assert zt.word_f1(model, data).f1 == 1.0


def test_token_head_loss_reads_only_labelled_positions():
    model = bench.new_model("segmentation", "random", 0).eval()
    ids = torch.tensor([[2, 10, 11, 12, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0]])
    labels = torch.tensor([[-100, 0, 2, 3, -100, -100]])
    out = model(ids, mask, labels)
    assert out.logits.shape == (1, 6, len(zh.TAGS))
    expected = F.cross_entropy(out.logits[0, 1:4], labels[0, 1:4])
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-6)
    # a padded position changes nothing at the real ones
    shorter = model(ids[:, :5], mask[:, :5]).logits
    torch.testing.assert_close(shorter[0], out.logits[0, :5], atol=1e-5, rtol=1e-5)


def test_pretrained_encoder_is_the_committed_model_and_the_head_is_new():
    from bertcourse.pretraining.checkpoint import load_checkpoint

    pretrained, _ = load_checkpoint(bench.MODEL_DIR)
    for task in bench.TASKS:
        model = bench.new_model(task, "pretrained", 1)
        for name, value in pretrained.bert.state_dict().items():
            torch.testing.assert_close(model.bert.state_dict()[name], value, rtol=0, atol=0)
        random_model = bench.new_model(task, "random", 1)
        word = "embeddings.word_embeddings.weight"
        assert not torch.equal(random_model.bert.state_dict()[word], model.bert.state_dict()[word])
        # the head is drawn from the seed, the same for both inits
        torch.testing.assert_close(random_model.classifier.weight, model.classifier.weight)


def test_a_pretraining_runs_folder_is_an_init_if_it_has_the_datas_vocabulary(tmp_path):
    """A run's output folder (its checkpoint/ inside) gives its encoder: the committed model's
    files there give the "pretrained" model, head and all; another vocabulary is refused."""
    from tokenizers import Tokenizer

    shutil.copytree(bench.MODEL_DIR, tmp_path / "run" / "checkpoint")
    for task in bench.TASKS:
        model = bench.new_model(task, str(tmp_path / "run"), 1).state_dict()
        for name, value in bench.new_model(task, "pretrained", 1).state_dict().items():
            torch.testing.assert_close(model[name], value, rtol=0, atol=0)
    assert bench.RunSpec("reviews", str(tmp_path / "run"), 1e-3, 0).name() == "reviews-run-0.001-s0"
    shutil.copytree(bench.MODEL_DIR, tmp_path / "other")
    other = Tokenizer.from_file(str(tmp_path / "other" / "tokenizer.json"))
    other.add_tokens(["龘龘"])
    other.save(str(tmp_path / "other" / "tokenizer.json"))
    with pytest.raises(ValueError, match="has another vocabulary"):
        bench.new_model("segmentation", str(tmp_path / "other"), 0)
    with pytest.raises(ValueError, match="or a pretraining run's folder"):
        bench.new_model("reviews", str(tmp_path / "missing"), 0)


def test_fine_tune_stops_where_asked_and_keeps_each_epochs_weights(tokenizer):
    data, _ = zt.encode_classification(
        tokenizer, ["很好", "太差了", "不错", "糟糕"] * 4, [1, 0] * 8
    )
    model = bench.new_model("reviews", "pretrained", 0)
    losses, epochs = zt.fine_tune(model, data, zt.Recipe(1e-3, epochs=2, batch_size=4), data)
    assert len(losses) == 8 and [e.step for e in epochs] == [4, 8]
    assert all(0 <= e.validation <= 1 for e in epochs)
    torch.testing.assert_close(epochs[-1].state["classifier.weight"], model.classifier.weight)
    again = bench.new_model("reviews", "pretrained", 0)
    first, records = zt.fine_tune(
        again, data, zt.Recipe(1e-3, 2, 4, stop_after=3), keep_states=False
    )
    assert first == losses[:3] and records[-1].state is None


def test_bag_of_characters_learns_a_separable_rule():
    texts = ["好书好书", "好看", "很好", "差", "很差劲", "差差"] * 3
    labels = [1, 1, 1, 0, 0, 0] * 3
    model = zt.CharacterLogisticRegression.fit(texts, labels, penalty=1e-4)
    assert model.accuracy(texts, labels) == 1.0
    assert model.accuracy(["好", "差"], [1, 0]) == 1.0
    features = model.features(["好好 好"]).to_dense()
    assert features.sum() == 1 and features.max() == 1  # presence, not counts; spaces ignored


def test_seeded_split_is_a_partition_of_the_stated_sizes():
    parts = zt.seeded_split(17363, (0.8, 0.1, 0.1), seed=0)
    assert [len(p) for p in parts] == [13890, 1736, 1737]
    assert sorted(i for p in parts for i in p) == list(range(17363))
    assert parts == zt.seeded_split(17363, (0.8, 0.1, 0.1), seed=0)
    with pytest.raises(ValueError, match="sum to 1"):
        zt.seeded_split(10, (0.5, 0.4), seed=0)


def test_cuda_asked_without_cuda_is_refused_clearly(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(SystemExit, match="no CUDA device"):
        bench.main(["--device", "cuda", "--quick", "--json", str(tmp_path / "x.json")])
    with pytest.raises(SystemExit, match="give --json"):
        bench.main(["--quick"])


# --- the committed result file ----------------------------------------------------------------------


def check_record(record: dict) -> None:
    """What must hold in any result file of the script, the committed one and the slice's."""
    setup = committed_setup(record)
    specs = {(t, i, r, s) for t in bench.TASKS for i in bench.INITS for r in setup.rates
             for s in setup.seeds}  # fmt: skip
    runs = {tuple(run["spec"].values()): run for run in record["runs"]}
    assert set(runs) == specs and len(record["runs"]) == len(specs)
    for run in record["runs"]:
        assert [e["epoch"] for e in run["epochs"]] == list(range(1, setup.epochs + 1))
        assert run["epochs"][-1]["step"] == run["steps"]
        assert all(0 <= e["validation"] <= 1 for e in run["epochs"])
    for task in bench.TASKS:
        for init in bench.INITS:
            chosen = record["chosen"][task][init]
            # the choice is the argmax of the mean validation score over the seeds
            means = {(r, e): statistics.mean(runs[task, init, r, s]["epochs"][e - 1]["validation"]
                                             for s in setup.seeds)
                     for r in setup.rates for e in range(1, setup.epochs + 1)}  # fmt: skip
            assert chosen["mean_validation"] == pytest.approx(max(means.values()), abs=1e-12)
            assert means[chosen["rate"], chosen["epoch"]] == pytest.approx(max(means.values()))
            # the test set: once per seed, with the chosen rate and epoch
            tests = [t for t in record["tests"] if (t["task"], t["init"]) == (task, init)]
            assert sorted(t["seed"] for t in tests) == sorted(setup.seeds)
            assert {(t["rate"], t["epoch"]) for t in tests} == {(chosen["rate"], chosen["epoch"])}
            summary = record["test_summary"][task][init]
            values = [t["test"] for t in tests]
            assert summary["mean"] == pytest.approx(statistics.mean(values), abs=1e-12)
            assert summary["n"] == len(values)
            if len(values) > 1:
                assert summary["sd"] == pytest.approx(statistics.stdev(values), abs=1e-12)
    assert len(record["tests"]) == len(bench.TASKS) * len(bench.INITS) * len(setup.seeds)


def test_committed_file_holds_its_choices_and_uses_the_test_set_once():
    check_record(COMMITTED)
    assert COMMITTED["conditions"] and not COMMITTED["quick"]
    assert COMMITTED["recipe"]["epochs"] == COMMITTED["setup"]["epochs"]
    bag = COMMITTED["baselines"]["reviews"]["bag_of_characters"]
    best = max(bag["runs"], key=lambda r: r["validation"])
    assert bag["chosen_penalty"] == best["penalty"]


def test_committed_split_sizes_are_the_data_functions():
    setup = committed_setup()
    data = COMMITTED["data"]
    reviews = zh.load_reviews()
    counts = {"lines_read": reviews.lines_read, "repeats_removed": reviews.repeats_removed,
              "conflicts_removed": reviews.conflicts_removed, "kept": len(reviews.texts)}  # fmt: skip
    assert {k: data["reviews"][k] for k in counts} == counts
    texts = bench.review_texts(setup)
    assert data["reviews"]["sizes"] == {s: len(texts[s][0]) for s in bench.SPLITS}
    assert data["reviews"]["label_counts"] == {
        s: [texts[s][1].count(c) for c in (0, 1)] for s in bench.SPLITS
    }
    sentences = bench.segmentation_sentences(setup)
    assert data["segmentation"]["sizes"] == {s: len(sentences[s]) for s in bench.SPLITS}
    assert data["segmentation"]["characters"] == {
        s: sum(len("".join(x)) for x in sentences[s]) for s in bench.SPLITS
    }
    # test sentences are the held-out paragraphs' (never seen in pretraining), all of them
    _, heldout = zh.split_paragraphs()
    assert sentences["test"] == [s for p in heldout for s in zh.sentences_of(p)]
    majority = COMMITTED["baselines"]["reviews"]["majority"]
    labels = texts["test"][1]
    share = labels.count(COMMITTED["baselines"]["reviews"]["majority_class"]) / len(labels)
    assert majority["test"] == pytest.approx(share)
    # the every-character-a-word baseline, recomputed from the test sentences
    singles = zh.segmentation_f1(sentences["test"], [list("".join(s)) for s in sentences["test"]])
    recorded = COMMITTED["baselines"]["segmentation"]["test"]["every_character_a_word"]
    assert recorded["f1"] == pytest.approx(singles.f1)


def test_committed_file_names_the_committed_model():
    # files written before the hashes were recorded rely on the first losses (below) instead
    if "model_sha256" in COMMITTED:
        assert COMMITTED["model_sha256"] == bench.model_sha256()


def test_committed_first_losses_reproduce():
    """The first training steps of both tasks from the committed model, on the CPU (a first
    loss comes before any update: it changes with the model's weights, not the rate)."""
    again = bench.slice_first_losses()
    for task in bench.TASKS:
        assert again[task] == pytest.approx(COMMITTED["slice_first_losses"][task], abs=1e-4)


def test_quick_slice_runs_and_holds_its_choices(tmp_path):
    out = tmp_path / "quick.json"
    record = bench.main(["--quick", "--json", str(out)])
    assert json.loads(out.read_text())["runs"] == record["runs"]
    assert record["quick"] and record["conditions"] == "quick slice"
    check_record(record)
    for task in bench.TASKS:
        expected = COMMITTED["slice_first_losses"][task]
        assert record["slice_first_losses"][task] == pytest.approx(expected, abs=1e-4)
    assert record["data"]["segmentation"]["sizes"] == {"train": 64, "validation": 32, "test": 32}
    assert record["model_sha256"] == bench.model_sha256()


@pytest.mark.skipif(not Path("/proc/cpuinfo").is_file(), reason="reads Linux's /proc/cpuinfo")
def test_a_cpu_run_records_the_processors_model_name():
    names = [
        line.partition(":")[2].strip()
        for line in Path("/proc/cpuinfo").read_text().splitlines()
        if line.partition(":")[0].strip() == "model name"
    ]
    assert bench.device_name("cpu") == names[0]  # not only the architecture, "x86_64"
