"""bertcourse's model against transformers: same weights, same inputs, same numbers.

Weights are redrawn much larger than BERT's N(0, 0.02) initialisation (LayerNorm gains and
biases too) so that a wrong activation, a missing epsilon or a misplaced LayerNorm changes the
outputs by far more than the tolerance.
"""

import pytest
import torch
import torch.nn.functional as F
import transformers

import bertcourse
from bertcourse import BertConfig, BertForPreTraining, BertModel
from bertcourse.hf import bertcourse_to_hf_key, config_to_hf, from_hf, to_hf

# (vocab, hidden, layers, heads, intermediate, max_pos, type_vocab, act): odd sizes on purpose.
CONFIGS = [
    (101, 36, 1, 3, 50, 40, 2, "gelu"),
    (257, 48, 2, 4, 70, 33, 3, "gelu_new"),
    (99, 30, 3, 5, 41, 64, 2, "gelu"),
    (64, 64, 4, 8, 96, 24, 2, "gelu_new"),
]


def make_config(spec, impl, dropout=0.0):
    vocab, hidden, layers, heads, inter, max_pos, types, act = spec
    return BertConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=inter,
        max_position_embeddings=max_pos,
        type_vocab_size=types,
        hidden_act=act,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        attn_implementation=impl,
    )


def randomize_(model, seed):
    """Redraw every parameter: weights N(0, 0.3^2), LayerNorm gains around 1, biases N(0, 0.2^2)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return model


def make_batch(config, seed, B=3, L=None):
    g = torch.Generator().manual_seed(seed)
    L = L or min(config.max_position_embeddings, 13)
    input_ids = torch.randint(1, config.vocab_size, (B, L), generator=g)
    lengths = [L, L - 4, 2][:B]  # one full row, one padded row, one almost empty row
    attention_mask = torch.zeros(B, L, dtype=torch.long)
    for b, n in enumerate(lengths):
        attention_mask[b, :n] = 1
    input_ids = input_ids * attention_mask  # [PAD] = 0 at padding
    token_type_ids = torch.randint(0, config.type_vocab_size, (B, L), generator=g) * attention_mask
    labels = torch.full((B, L), -100)
    chosen = (torch.rand(B, L, generator=g) < 0.3) & attention_mask.bool()
    chosen[:, 1] = True  # at least one label per row
    labels[chosen] = torch.randint(0, config.vocab_size, (int(chosen.sum()),), generator=g)
    nsp = torch.randint(0, 2, (B,), generator=g)
    return input_ids, token_type_ids, attention_mask, labels, nsp


def pair(spec, impl, seed):
    """A randomized transformers BertForPreTraining and the bertcourse copy of it."""
    config = make_config(spec, impl)
    torch.manual_seed(seed)
    hf = randomize_(transformers.BertForPreTraining(config_to_hf(config)), seed).eval()
    ours = from_hf(hf).eval()
    return config, hf, ours


def close(a, b, tol=2e-4):
    a, b = a.detach(), b.detach()
    scale = max(1.0, float(b.abs().max()))
    err = float((a - b).abs().max())
    assert err <= tol * scale, f"max abs error {err:.3g} > {tol * scale:.3g}"


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
@pytest.mark.parametrize("spec", CONFIGS, ids=[f"cfg{i}" for i in range(len(CONFIGS))])
def test_parity_with_transformers(spec, impl):
    config, hf, ours = pair(spec, impl, seed=len(spec) + CONFIGS.index(spec))
    ids, types, mask, labels, nsp = make_batch(config, seed=1)
    with torch.no_grad():
        ref = hf(input_ids=ids, token_type_ids=types, attention_mask=mask)
        ref_loss = hf(
            input_ids=ids,
            token_type_ids=types,
            attention_mask=mask,
            labels=labels,
            next_sentence_label=nsp,
        ).loss
        ref_base = hf.bert(input_ids=ids, token_type_ids=types, attention_mask=mask)
        full = ours(ids, types, mask)
        got = ours(ids, types, mask, labels=labels, next_sentence_label=nsp)
    real = mask.bool()
    close(full.last_hidden_state[real], ref_base.last_hidden_state[real])
    close(full.pooler_output, ref_base.pooler_output)
    close(full.prediction_logits[real], ref.prediction_logits[real])
    close(full.seq_relationship_logits, ref.seq_relationship_logits)
    # With labels: logits only at the labelled positions, in row-major order.
    chosen = labels != -100
    assert got.prediction_logits.shape == (int(chosen.sum()), config.vocab_size)
    close(got.prediction_logits, ref.prediction_logits[chosen])
    close(got.loss, ref_loss)
    close(got.mlm_loss + got.nsp_loss, got.loss, tol=1e-6)


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_one_training_step_matches(impl):
    """Equal losses, equal gradients for every parameter, equal parameters after a step.

    SGD, not Adam: Adam divides each gradient by its own magnitude, so for parameters whose
    true gradient is exactly zero (the key bias: softmax ignores a shift shared by all keys)
    it turns float noise of 1e-9 into a full step of size lr."""
    config, hf, ours = pair(CONFIGS[1], impl, seed=7)
    ids, types, mask, labels, nsp = make_batch(config, seed=2)
    hf.train(), ours.train()  # dropout is 0 in these configs: training mode is deterministic
    opt_hf = torch.optim.SGD(hf.parameters(), lr=0.1)
    opt_ours = torch.optim.SGD(ours.parameters(), lr=0.1)
    loss_hf = hf(
        input_ids=ids,
        token_type_ids=types,
        attention_mask=mask,
        labels=labels,
        next_sentence_label=nsp,
    ).loss
    loss_ours = ours(ids, types, mask, labels=labels, next_sentence_label=nsp).loss
    close(loss_ours, loss_hf)
    loss_hf.backward()
    loss_ours.backward()
    hf_params = dict(hf.named_parameters())
    for name, p in ours.named_parameters():
        ref = hf_params[bertcourse_to_hf_key(name)]
        assert p.grad is not None, name
        close(p.grad, ref.grad, tol=5e-4)
    opt_hf.step()
    opt_ours.step()
    for name, p in ours.named_parameters():
        close(p.detach(), hf_params[bertcourse_to_hf_key(name)].detach(), tol=5e-5)


def test_round_trip_to_hf_and_back():
    config = make_config(CONFIGS[2], "eager")
    ours = randomize_(BertForPreTraining(config), seed=3)
    back = from_hf(to_hf(ours))
    a, b = ours.state_dict(), back.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    # The decoder stays tied to the word embeddings on both sides.
    hf = to_hf(ours)
    assert (
        hf.cls.predictions.decoder.weight.data_ptr()
        == hf.bert.embeddings.word_embeddings.weight.data_ptr()
    )
    assert back.cls.predictions.decoder.weight is back.bert.embeddings.word_embeddings.weight


def test_base_model_round_trip_and_parity():
    config = make_config(CONFIGS[0], "sdpa")
    ours = randomize_(BertModel(config), seed=4).eval()
    hf = to_hf(ours).eval()
    ids, types, mask, _, _ = make_batch(config, seed=5)
    with torch.no_grad():
        a = ours(ids, types, mask)
        b = hf(input_ids=ids, token_type_ids=types, attention_mask=mask)
    close(a.last_hidden_state[mask.bool()], b.last_hidden_state[mask.bool()])
    close(a.pooler_output, b.pooler_output)
    assert isinstance(from_hf(hf), BertModel)


def test_attention_probabilities_match_transformers_eager():
    config, hf, ours = pair(CONFIGS[1], "eager", seed=11)
    ids, types, mask, _, _ = make_batch(config, seed=6)
    with torch.no_grad():
        ref = hf.bert(
            input_ids=ids, token_type_ids=types, attention_mask=mask, output_attentions=True
        )
        got = ours.bert(ids, types, mask, output_attentions=True)
    assert len(got.attentions) == config.num_hidden_layers
    for a, b in zip(got.attentions, ref.attentions):
        assert a.shape == (3, config.num_attention_heads, ids.shape[1], ids.shape[1])
        close(a, b, tol=1e-5)
        # Padded keys get exactly zero probability; each row sums to one.
        assert torch.all(a.masked_select(~mask.bool()[:, None, None, :]) == 0)
        torch.testing.assert_close(a.sum(-1), torch.ones_like(a.sum(-1)))


def test_eager_equals_sdpa():
    spec = CONFIGS[3]
    eager = randomize_(BertForPreTraining(make_config(spec, "eager")), seed=8).eval()
    sdpa = BertForPreTraining(make_config(spec, "sdpa")).eval()
    sdpa.load_state_dict(eager.state_dict())
    ids, types, mask, _, _ = make_batch(eager.config, seed=9)
    with torch.no_grad():
        close(sdpa(ids, types, mask).prediction_logits, eager(ids, types, mask).prediction_logits)
    # output_attentions with sdpa falls back to the explicit math and returns probabilities.
    out = sdpa.bert(ids, types, mask, output_attentions=True)
    assert out.attentions is not None and out.attentions[0].shape[-1] == ids.shape[1]


def test_padding_invariance():
    """A sequence gives the same vectors alone and padded inside a batch."""
    model = randomize_(BertModel(make_config(CONFIGS[1], "sdpa")), seed=12).eval()
    g = torch.Generator().manual_seed(0)
    short = torch.randint(1, model.config.vocab_size, (1, 7), generator=g)
    long = torch.randint(1, model.config.vocab_size, (1, 12), generator=g)
    batch = torch.zeros(2, 12, dtype=torch.long)
    batch[0, :7], batch[1] = short[0], long[0]
    mask = (batch != 0).long()
    mask[1] = 1
    with torch.no_grad():
        alone = model(short)
        padded = model(batch, attention_mask=mask)
    close(padded.last_hidden_state[0, :7], alone.last_hidden_state[0], tol=1e-5)
    close(padded.pooler_output[0], alone.pooler_output[0], tol=1e-5)
    # Without the mask the padding leaks into the real tokens: the test can fail.
    with torch.no_grad():
        leaky = model(batch)
    assert (leaky.last_hidden_state[0, :7] - alone.last_hidden_state[0]).abs().max() > 1e-3


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_fully_masked_sequence_stays_finite(dtype):
    model = BertForPreTraining(BertConfig.tiny(vocab_size=50, attn_implementation="eager")).eval()
    model.to(dtype)
    ids = torch.randint(1, 50, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1] = 0  # a row with no key to attend to
    with torch.no_grad():
        out = model(ids, attention_mask=mask)
    assert out.prediction_logits.dtype == dtype
    assert torch.isfinite(out.prediction_logits).all()
    assert torch.isfinite(out.seq_relationship_logits).all()


def test_half_precision_close_to_float32():
    model = BertModel(BertConfig.tiny(vocab_size=50)).eval()
    ids = torch.randint(1, 50, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[0, 5:] = 0
    with torch.no_grad():
        ref = model(ids, attention_mask=mask).last_hidden_state
        got = model.to(torch.bfloat16)(ids, attention_mask=mask).last_hidden_state
    err = (got.float() - ref)[mask.bool()].abs().max()
    assert err < 0.1, err  # bf16 keeps ~3 significant digits; LayerNorm outputs are O(1)


def test_labels_without_positions_give_nan_like_cross_entropy():
    model = BertForPreTraining(BertConfig.tiny(vocab_size=50)).eval()
    ids = torch.randint(1, 50, (2, 5))
    out = model(ids, labels=torch.full_like(ids, -100))
    ref = F.cross_entropy(torch.zeros(0, 50), torch.zeros(0, dtype=torch.long))
    assert torch.isnan(ref) and torch.isnan(out.mlm_loss)
    assert out.prediction_logits.shape == (0, 50)


def test_decoder_is_tied_and_counted_once():
    model = BertForPreTraining(BertConfig())
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    n = sum(p.numel() for p in model.bert.parameters())
    assert 108e6 < n < 111e6  # BERT-base: ~110M parameters (109.5M with the pooler)


def test_bad_input_errors():
    config = BertConfig.tiny(vocab_size=50, max_position_embeddings=16)
    model = BertForPreTraining(config)
    with pytest.raises(ValueError, match="divisible by num_attention_heads"):
        BertConfig(hidden_size=100, num_attention_heads=12)
    with pytest.raises(ValueError, match="id 50, outside the vocabulary"):
        model(torch.tensor([[1, 2, 50]]))
    with pytest.raises(ValueError, match="exceeds max_position_embeddings=16"):
        model(torch.ones(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match=r"attention_mask has shape \(1, 4\).*\(2, 5\)"):
        model(torch.ones(2, 5, dtype=torch.long), attention_mask=torch.ones(1, 4))
    with pytest.raises(ValueError, match="only 0"):
        model(torch.ones(1, 3, dtype=torch.long), attention_mask=torch.tensor([[0.0, -1e4, 0.0]]))
    with pytest.raises(ValueError, match="labels holds 77"):
        model(torch.ones(1, 3, dtype=torch.long), labels=torch.tensor([[-100, 77, -100]]))
    with pytest.raises(ValueError, match="token_type_ids must be in"):
        model(torch.ones(1, 3, dtype=torch.long), token_type_ids=torch.tensor([[0, 1, 2]]))
    with pytest.raises(ValueError, match="shape \\(batch, seq_len\\)"):
        model(torch.ones(3, dtype=torch.long))
    with pytest.raises(ValueError, match="hidden_act"):
        BertConfig(hidden_act="swish")


def test_package_exports():
    assert bertcourse.BertConfig is BertConfig
    c = BertConfig()
    assert (c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads) == (
        30522,
        768,
        12,
        12,
    )
    assert (c.intermediate_size, c.layer_norm_eps, c.hidden_act) == (3072, 1e-12, "gelu")
