"""Fine-tuning: bertcourse's BertForSequenceClassification against transformers' (logits, losses,
gradients, an optimizer step, both conversion directions), MiniLM's real encoder inside it, the
labelled movie-review data and the training and evaluation helpers of `bertcourse.finetune`."""

import pytest
import torch
import transformers

import bertcourse
from bertcourse import BertForSequenceClassification, BertModel
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
