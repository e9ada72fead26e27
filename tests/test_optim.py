"""bertcourse.optim against torch.optim, transformers' schedules and the original TF formulas.

The references are independent of the code under test: torch.optim.Adam/AdamW, transformers'
`get_linear_schedule_with_warmup`, and closed-form re-statements (in numpy / plain Python) of
the original release's `AdamWeightDecayOptimizer` and `create_optimizer` schedule.
"""

from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest
import torch
from torch import nn

from bertcourse.optim import (
    MAX_GRAD_NORM,
    NO_DECAY_NAME_PATTERNS,
    Adam,
    AdamW,
    bert_adam,
    bert_param_groups,
    clip_grad_norm_,
    make_lr_scheduler,
    polynomial_decay_with_warmup,
    warmup_linear_decay,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

N_STEPS = 60


# --- A small model with everything the optimizer must handle -------------------------------
class TinyNet(nn.Module):
    """Embedding (rows not looked up get exact zero gradients), Linear, LayerNorm under an odd
    attribute name, a decoder tied to the embedding, and its own output bias."""

    def __init__(self, vocab: int = 11, hidden: int = 6) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.dense = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden)  # not called "LayerNorm": found by module type
        self.decoder = nn.Linear(hidden, vocab, bias=False)
        self.decoder.weight = self.word_embeddings.weight  # tied
        self.out_bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.norm(torch.tanh(self.dense(self.word_embeddings(ids))))  # (B, L, H)
        return self.decoder(h) + self.out_bias  # (B, L, V)


def make_net(dtype: torch.dtype = torch.float64) -> TinyNet:
    torch.manual_seed(0)
    net = TinyNet().to(dtype)
    with torch.no_grad():  # non-trivial LayerNorm parameters so their decay would show
        net.norm.weight.add_(0.3 * torch.randn_like(net.norm.weight))
        net.norm.bias.add_(0.3 * torch.randn_like(net.norm.bias))
    return net


def compute_grads(net: TinyNet, step: int) -> None:
    g = torch.Generator().manual_seed(1000 + step)
    ids = torch.randint(0, 7, (4, 5), generator=g)  # ids 7..10 never used: zero grad rows
    target = torch.randint(0, 11, (4, 5), generator=g)
    logits = net(ids)
    loss = nn.functional.cross_entropy(logits.reshape(-1, 11), target.reshape(-1))
    loss.backward()
    if step % 3 == 1:  # some steps give the output bias no gradient at all (grad None)
        net.out_bias.grad = None
    if step % 5 == 2:  # and some give dense a gradient that is exactly zero
        net.dense.weight.grad.zero_()


def run_pair(ours, ref, net_a, net_b, n_steps=N_STEPS, atol=1e-12, rtol=1e-10):
    """Same gradients into both optimizers every step; parameters must stay equal."""
    worst = 0.0
    for step in range(n_steps):
        for net, opt in ((net_a, ours), (net_b, ref)):
            opt.zero_grad(set_to_none=True)
            compute_grads(net, step)
            opt.step()
        for (name, p), q in zip(net_a.named_parameters(), net_b.parameters()):
            torch.testing.assert_close(p, q, atol=atol, rtol=rtol, msg=f"{name} at step {step}")
            worst = max(worst, (p - q).abs().max().item())
    return worst


# --- Adam / AdamW vs torch.optim ---------------------------------------------------------------
@pytest.mark.parametrize("weight_decay", [0.0, 0.05])
def test_adam_matches_torch(weight_decay):
    a, b = make_net(), make_net()
    ours = Adam(a.parameters(), lr=3e-2, weight_decay=weight_decay)
    ref = torch.optim.Adam(b.parameters(), lr=3e-2, weight_decay=weight_decay)
    run_pair(ours, ref, a, b)
    # the step count is per parameter: skipped steps (grad None) are not counted
    for p, q in zip(a.parameters(), b.parameters()):
        assert ours.state[p]["step"] == int(ref.state[q]["step"])
    assert ours.state[a.out_bias]["step"] < N_STEPS


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adamw_matches_torch(weight_decay):
    a, b = make_net(), make_net()
    ours = AdamW(a.parameters(), lr=3e-2, weight_decay=weight_decay, betas=(0.8, 0.99))
    ref = torch.optim.AdamW(b.parameters(), lr=3e-2, weight_decay=weight_decay, betas=(0.8, 0.99))
    run_pair(ours, ref, a, b)


def test_adamw_with_bert_groups_and_schedule_matches_torch():
    a, b = make_net(), make_net()
    ours = AdamW(bert_param_groups(a, 0.1), lr=5e-2)
    ref = torch.optim.AdamW(bert_param_groups(b, 0.1), lr=5e-2)
    sched_a = make_lr_scheduler(ours, "polynomial", warmup_steps=5, total_steps=N_STEPS)
    sched_b = make_lr_scheduler(ref, "polynomial", warmup_steps=5, total_steps=N_STEPS)
    for step in range(N_STEPS):
        for net, opt, sched in ((a, ours, sched_a), (b, ref, sched_b)):
            opt.zero_grad()
            compute_grads(net, step)
            opt.step()
            sched.step()
        for p, q in zip(a.parameters(), b.parameters()):
            torch.testing.assert_close(p, q, atol=1e-12, rtol=1e-10)


def test_float32_matches_torch_tightly():
    a, b = make_net(torch.float32), make_net(torch.float32)
    ours = AdamW(a.parameters(), lr=1e-2, weight_decay=0.01)
    ref = torch.optim.AdamW(b.parameters(), lr=1e-2, weight_decay=0.01)
    # a few float32 ulps of parameters of size ~1 (measured: ~1e-7 after 60 steps)
    run_pair(ours, ref, a, b, atol=2e-6, rtol=1e-5)


def test_adam_l2_and_adamw_decay_differ():
    """Guard against mixing up the two decays: same hyper-parameters, different results."""
    a, b = make_net(), make_net()
    with pytest.raises(AssertionError):
        run_pair(Adam(a.parameters(), lr=3e-2, weight_decay=0.1), AdamW(b.parameters(), lr=3e-2, weight_decay=0.1), a, b, n_steps=5)  # fmt: skip


# --- The original BERT optimizer (no bias correction) ---------------------------------------
def original_bert_step(params, grads, m, v, lr, decay_mask, wd, b1=0.9, b2=0.999, eps=1e-6):
    """optimization.py AdamWeightDecayOptimizer.apply_gradients, restated in numpy."""
    for k in params:
        m[k] = b1 * m[k] + (1.0 - b1) * grads[k]
        v[k] = b2 * v[k] + (1.0 - b2) * np.square(grads[k])
        update = m[k] / (np.sqrt(v[k]) + eps)
        if decay_mask[k]:
            update = update + wd * params[k]
        params[k] = params[k] - lr * update


def original_schedule(step, init_lr, total, warmup, power=1.0, end_lr=0.0):
    """optimization.create_optimizer: tf.train.polynomial_decay, then the warm-up blend."""
    global_step = min(step, total)  # polynomial_decay with cycle=False
    decayed = (init_lr - end_lr) * (1 - global_step / total) ** power + end_lr
    if warmup:
        is_warmup = float(step < warmup)
        warmup_lr = init_lr * (step / warmup)
        decayed = (1.0 - is_warmup) * decayed + is_warmup * warmup_lr
    return decayed


def test_bias_correction_false_is_the_original_optimizer():
    net = make_net()
    wd, peak, total, warmup = 0.01, 5e-2, N_STEPS, 6
    opt = bert_adam(bert_param_groups(net, wd), lr=peak, weight_decay=wd)
    assert isinstance(opt, AdamW) and opt.defaults["eps"] == 1e-6
    assert opt.defaults["bias_correction"] is False
    sched = make_lr_scheduler(opt, "polynomial", warmup_steps=warmup, total_steps=total)

    # the original excludes by re.search on the variable name; TinyNet's LayerNorm is `norm`,
    # so its names are listed here as the TF graph would call them ("LayerNorm/gamma")
    names = [n for n, _ in net.named_parameters()]
    tf_names = {n: n.replace("norm.weight", "LayerNorm/gamma").replace("norm.bias", "LayerNorm/beta") for n in names}  # fmt: skip
    decay_mask = {n: not any(re.search(r, tf_names[n]) for r in ["LayerNorm", "layer_norm", "bias"]) for n in names}  # fmt: skip
    ref = {n: p.detach().numpy().copy() for n, p in net.named_parameters()}
    m = {n: np.zeros_like(x) for n, x in ref.items()}
    v = {n: np.zeros_like(x) for n, x in ref.items()}

    for step in range(total):
        opt.zero_grad()
        compute_grads(net, step)
        if net.out_bias.grad is None:  # TF always has a gradient: use zeros on both sides
            net.out_bias.grad = torch.zeros_like(net.out_bias)
        grads = {n: p.grad.detach().numpy().copy() for n, p in net.named_parameters()}
        lr = original_schedule(step, peak, total, warmup)
        assert opt.param_groups[0]["lr"] == pytest.approx(lr, rel=1e-12, abs=1e-15)
        opt.step()
        sched.step()
        original_bert_step(ref, grads, m, v, lr, decay_mask, wd)
        for n, p in net.named_parameters():
            np.testing.assert_allclose(p.detach().numpy(), ref[n], rtol=1e-10, atol=1e-12, err_msg=f"{n} step {step}")  # fmt: skip


def test_first_uncorrected_step_is_larger():
    """Without bias correction the first update is (1-b1)/sqrt(1-b2) ~ 3.16 times lr."""
    p = nn.Parameter(torch.zeros(3, dtype=torch.float64))
    opt = AdamW([p], lr=1e-3, weight_decay=0.0, eps=0.0, bias_correction=False)
    p.grad = torch.tensor([2.0, -0.5, 1e-3], dtype=torch.float64)
    opt.step()
    expected = -1e-3 * 0.1 / math.sqrt(0.001) * torch.sign(p.grad)
    torch.testing.assert_close(p.detach(), expected, rtol=1e-12, atol=0)


def test_closure_returns_loss():
    p = nn.Parameter(torch.ones(2))
    opt = Adam([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p**2).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == pytest.approx(2.0)
    assert (p < 1).all()


# --- Argument checks -----------------------------------------------------------------------
@pytest.mark.parametrize("cls", [Adam, AdamW])
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lr": -1e-3}, "lr"),
        ({"lr": float("nan")}, "lr"),
        ({"betas": (1.0, 0.999)}, r"betas\[0\]"),
        ({"betas": (0.9, -0.1)}, r"betas\[1\]"),
        ({"betas": (0.9,)}, "pair"),
        ({"eps": -1e-8}, "eps"),
        ({"weight_decay": -0.01}, "weight_decay"),
    ],
)
def test_bad_hyperparameters(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls([nn.Parameter(torch.zeros(1))], **kwargs)


def test_bad_group_hyperparameters_and_sparse_grads():
    with pytest.raises(ValueError, match="lr"):
        AdamW([{"params": [nn.Parameter(torch.zeros(1))], "lr": -1.0}])
    with pytest.raises(TypeError, match="bias_correction"):
        AdamW([nn.Parameter(torch.zeros(1))], bias_correction="no")
    emb = nn.Embedding(5, 2, sparse=True)
    opt = Adam(emb.parameters())
    emb(torch.tensor([1])).sum().backward()
    with pytest.raises(RuntimeError, match="sparse"):
        opt.step()


# --- Parameter groups --------------------------------------------------------------------------
def test_param_groups_every_parameter_once_tied_counted_once():
    net = make_net()
    decay, no_decay = bert_param_groups(net, 0.01)
    all_ids = [id(p) for g in (decay, no_decay) for p in g["params"]]
    assert len(all_ids) == len(set(all_ids))
    assert set(all_ids) == {id(p) for p in net.parameters()}
    # tied: the decoder weight IS the embedding, listed once, decayed (embeddings are)
    assert sum(p is net.decoder.weight for g in (decay, no_decay) for p in g["params"]) == 1
    assert decay["param_names"] == ["word_embeddings.weight", "dense.weight"]
    assert no_decay["param_names"] == ["out_bias", "dense.bias", "norm.weight", "norm.bias"]
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    # torch accepts the groups as they are (a duplicate would raise there)
    torch.optim.AdamW(bert_param_groups(net, 0.01))


def test_param_groups_by_name_pattern_alone():
    class Named(nn.Module):
        def __init__(self):
            super().__init__()
            self.LayerNorm = nn.Parameter(torch.ones(3))  # not a LayerNorm module: name rule
            self.w = nn.Parameter(torch.ones(3))
            self.layer_norm_scale = nn.Parameter(torch.ones(3))

    decay, no_decay = bert_param_groups(Named(), 0.1)
    assert decay["param_names"] == ["w"]
    assert no_decay["param_names"] == ["LayerNorm", "layer_norm_scale"]
    assert NO_DECAY_NAME_PATTERNS == ("LayerNorm", "layer_norm", "bias")
    with pytest.raises(ValueError, match="weight_decay"):
        bert_param_groups(Named(), -0.1)


def test_param_groups_on_bert_for_pretraining():
    from bertcourse import BertConfig, BertForPreTraining

    config = BertConfig.tiny()
    model = BertForPreTraining(config)
    decay, no_decay = bert_param_groups(model, 0.01)
    named = dict(model.named_parameters())
    ids = [id(p) for g in (decay, no_decay) for p in g["params"]]
    assert len(ids) == len(set(ids)) == len({id(p) for p in model.parameters()})
    word = model.bert.embeddings.word_embeddings.weight
    assert sum(p is word for p in decay["params"]) == 1  # tied to the decoder, listed once
    # post-LN BERT: one LayerNorm in the embeddings, two per layer, one in the MLM head
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    assert len(norms) == 2 + 2 * config.num_hidden_layers
    norm_ids = {id(p) for m in norms for p in m.parameters()}
    expected = {n for n, p in named.items() if "bias" in n or id(p) in norm_ids}
    assert set(no_decay["param_names"]) == expected
    assert set(decay["param_names"]) == set(named) - expected
    assert all(p.dim() == 2 for p in decay["params"])  # only matrices (incl. embeddings)


# --- Schedules vs transformers and the original --------------------------------------------------
SCHEDULE_CASES = [(10, 100), (0, 50), (7, 7), (1, 1), (3, 20), (25, 26)]


@pytest.mark.parametrize(("warmup", "total"), SCHEDULE_CASES)
def test_warmup_linear_decay_matches_transformers_every_step(warmup, total):
    from transformers.optimization import get_linear_schedule_with_warmup

    peak = 3e-4
    ref_opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=peak)
    ref = get_linear_schedule_with_warmup(ref_opt, warmup, total)
    our_opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=peak)
    ours = make_lr_scheduler(our_opt, "linear", warmup_steps=warmup, total_steps=total)
    for step in range(total + 5):  # past the end too
        ref_lr = ref_opt.param_groups[0]["lr"]
        assert warmup_linear_decay(step, warmup_steps=warmup, total_steps=total) * peak == pytest.approx(ref_lr, rel=1e-12, abs=1e-18)  # fmt: skip
        assert our_opt.param_groups[0]["lr"] == pytest.approx(ref_lr, rel=1e-12, abs=1e-18)
        ref_opt.step()
        ref.step()
        our_opt.step()
        ours.step()


def test_warmup_linear_decay_landmarks():
    f = lambda s: warmup_linear_decay(s, warmup_steps=10, total_steps=110)  # noqa: E731
    assert f(0) == 0.0 and f(5) == 0.5 and f(10) == 1.0 and f(60) == 0.5 and f(110) == 0.0
    assert f(500) == 0.0
    assert warmup_linear_decay(0, warmup_steps=0, total_steps=4) == 1.0


@pytest.mark.parametrize(("warmup", "total"), SCHEDULE_CASES)
@pytest.mark.parametrize(("power", "end"), [(1.0, 0.0), (2.0, 0.0), (0.5, 0.1)])
def test_polynomial_matches_original_every_step(warmup, total, power, end):
    for step in range(total + 5):
        ours = polynomial_decay_with_warmup(
            step, warmup_steps=warmup, total_steps=total, power=power, end_factor=end
        )
        assert ours == pytest.approx(original_schedule(step, 1.0, total, warmup, power, end), rel=1e-12, abs=1e-15)  # fmt: skip


def test_polynomial_boundary_drop_and_endpoints():
    w, t = 10_000, 1_000_000  # the paper's recipe
    f = lambda s: polynomial_decay_with_warmup(s, warmup_steps=w, total_steps=t)  # noqa: E731
    assert f(0) == 0.0
    assert f(w - 1) == pytest.approx((w - 1) / w)  # 0.9999 just before the boundary
    assert f(w) == pytest.approx(1 - w / t)  # 0.99 right after: the small drop
    assert f(w) < f(w - 1)
    assert f(t - 1) == pytest.approx(1 / t) and f(t) == 0.0 and f(t + 7) == 0.0
    assert polynomial_decay_with_warmup(0, warmup_steps=0, total_steps=5) == 1.0
    # not transformers' linear schedule, which peaks at exactly 1 at the boundary
    assert warmup_linear_decay(w, warmup_steps=w, total_steps=t) == 1.0


def test_polynomial_is_not_transformers_polynomial():
    from transformers.optimization import get_polynomial_decay_schedule_with_warmup

    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    hf = get_polynomial_decay_schedule_with_warmup(opt, 10, 100, lr_end=0.0)
    for _ in range(10):
        opt.step()
        hf.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(1.0)  # decays over total - warmup
    assert polynomial_decay_with_warmup(10, warmup_steps=10, total_steps=100) == pytest.approx(0.9)  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"step": 0, "warmup_steps": 11, "total_steps": 10}, "warmup_steps"),
        ({"step": -1, "warmup_steps": 1, "total_steps": 10}, "step"),
        ({"step": 0, "warmup_steps": 0, "total_steps": 0}, "total_steps"),
        ({"step": 0, "warmup_steps": 1.5, "total_steps": 10}, "warmup_steps"),
    ],
)
@pytest.mark.parametrize("fn", [warmup_linear_decay, polynomial_decay_with_warmup])
def test_schedule_argument_errors(fn, kwargs, match):
    kwargs = dict(kwargs)
    step = kwargs.pop("step")
    with pytest.raises(ValueError, match=match):
        fn(step, **kwargs)


def test_make_lr_scheduler_errors_early():
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    with pytest.raises(ValueError, match="warmup_steps"):
        make_lr_scheduler(opt, "linear", warmup_steps=20, total_steps=10)
    with pytest.raises(ValueError, match="schedule"):
        make_lr_scheduler(opt, "cosine", warmup_steps=1, total_steps=10)
    with pytest.raises(ValueError, match="power"):
        polynomial_decay_with_warmup(3, warmup_steps=1, total_steps=10, power=0)


def test_clip_grad_norm_is_torchs():
    assert clip_grad_norm_ is torch.nn.utils.clip_grad_norm_ and MAX_GRAD_NORM == 1.0
    p = nn.Parameter(torch.zeros(2))
    p.grad = torch.tensor([3.0, 4.0])
    clip_grad_norm_([p], MAX_GRAD_NORM)
    assert p.grad.norm().item() == pytest.approx(1.0, abs=1e-6)


def test_bert_for_pretraining_steps_match_torch_adamw():
    from bertcourse import BertConfig, BertForPreTraining

    torch.manual_seed(0)
    a = BertForPreTraining(BertConfig.tiny()).eval()  # eval: no dropout, same gradients
    b = BertForPreTraining(BertConfig.tiny()).eval()
    b.load_state_dict(a.state_dict())
    ours = AdamW(bert_param_groups(a, 0.01), lr=1e-3)
    ref = torch.optim.AdamW(bert_param_groups(b, 0.01), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        ids = torch.randint(5, 1000, (2, 12), generator=g)
        labels = torch.where(torch.rand(2, 12, generator=g) < 0.3, ids, -100)
        nsp = torch.tensor([0, 1])
        for model, opt in ((a, ours), (b, ref)):
            opt.zero_grad()
            model(ids, labels=labels, next_sentence_label=nsp).loss.backward()
            clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
            opt.step()
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5, msg=name)
