"""Known mistakes of chapter 6's newer parts (the original BERT optimizer)."""

from __future__ import annotations

from torch import nn

from bertcourse.grading.mistakes import Mistake, Neighbour, _adam_step

ORIGINAL = "chapter 6, 'BERT's optimizer: decoupled weight decay without bias correction'"


def _original(p, g, m, v, t, lr=1e-4, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01, **wrong):
    """The original step with one thing changed (`wrong`): bias correction, eps, L2, lr,
    eps inside the square root."""
    b1, b2 = betas
    if wrong.get("l2"):
        g = g + weight_decay * p
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    if wrong.get("bias_correction"):
        m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
    else:
        m_hat, v_hat = m, v
    if wrong.get("eps_inside"):
        update = m_hat / (v_hat + eps).sqrt()
    else:
        update = m_hat / (v_hat.sqrt() + wrong.get("eps", eps))
    if wrong.get("l2"):
        return p - lr * update, m, v
    if wrong.get("decay_without_lr"):
        return p - lr * update - weight_decay * p, m, v
    return p - lr * (update + weight_decay * p), m, v


CATALOGUE: dict[str, list[Mistake]] = {
    "bert_adam": [
        Mistake(
            "bias correction (that is torch's AdamW, not the original)",
            "the original AdamWeightDecayOptimizer uses m and v without dividing by 1 - beta^t",
            ORIGINAL,
            lambda p, g, m, v, t, **h: _original(p, g, m, v, t, bias_correction=True, **h),
        ),
        Mistake(
            "eps = 1e-8 (torch's default) instead of the original's 1e-6",
            "the original's default epsilon is 1e-6; it matters when sqrt(v) is small",
            ORIGINAL,
            lambda p, g, m, v, t, **h: _original(p, g, m, v, t, eps=1e-8, **h),
        ),
        Mistake(
            "L2 regularisation (the decay added to the gradient)",
            "the original adds weight_decay x param to the update, after the division by "
            "sqrt(v) + eps, not to the gradient",
            ORIGINAL,
            lambda p, g, m, v, t, **h: _original(p, g, m, v, t, l2=True, **h),
        ),
        Mistake(
            "the decay not multiplied by the learning rate",
            "the original multiplies the whole update, decay included, by the learning rate",
            ORIGINAL,
            lambda p, g, m, v, t, **h: _original(p, g, m, v, t, decay_without_lr=True, **h),
        ),
        Mistake(
            "eps inside the square root",
            "the original divides by sqrt(v) + eps: eps is added after the square root",
            ORIGINAL,
            lambda p, g, m, v, t, **h: _original(p, g, m, v, t, eps_inside=True, **h),
        ),
    ],
}

__all__ = ["CATALOGUE", "_adam_step"]


def _probes():
    import torch

    generator = torch.Generator().manual_seed(110)
    p, g, m = (torch.randn(3, 4, generator=generator) for _ in range(3))
    v = torch.rand(3, 4, generator=generator) * 1e-6  # small: eps matters
    hyper = dict(lr=0.1, betas=(0.8, 0.99), weight_decay=0.1)
    return [((p, g, m * 0.1, v, t), hyper) for t in (1, 3)]


PROBES = {"bert_adam": _probes}


# --- which parameters are decayed: a grouping is told by its names (what the test cell checks)

Groups = list[tuple[list[str], float]]


def group_names(groups) -> Groups:
    """[(param_names, weight_decay), ...] of optimizer parameter groups."""
    return [(list(group["param_names"]), group["weight_decay"]) for group in groups]


def _groups(model, weight_decay, *, rule, duplicates=False, frozen=True) -> Groups:
    """The decayed and the not-decayed names under `rule(name) -> not decayed`."""
    named = list(model.named_parameters(remove_duplicate=not duplicates))
    kept = [n for n, p in named if frozen or p.requires_grad]
    return [([n for n in kept if not rule(n)], weight_decay), ([n for n in kept if rule(n)], 0.0)]


def _original_rule(name: str) -> bool:
    return any(pattern in name for pattern in ("LayerNorm", "layer_norm", "bias"))


class NormNames(nn.Module):
    """A probe for the groups: a dense layer and a norm under each spelling of its name
    (transformers' `LayerNorm`, bertcourse's `layer_norm`). On bertcourse's models a rule that
    matches `LayerNorm` only decays what a rule that matches `bias` only decays; here they
    differ. Built from a BertConfig, so that it crosses the grader's boundary."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size)


def _bert_only(compute):
    """A mistake about tied, frozen or embedding parameters: it does not apply to the names
    probe (`NormNames`), where a learner's own spelling of the norms' rule may differ."""
    return lambda model, wd: None if isinstance(model, NormNames) else compute(model, wd)


CATALOGUE["groups"] = [
    Mistake(
        "only the name 'LayerNorm' excluded (bertcourse's norms: layer_norm)",
        "the original excludes LayerNorm, layer_norm and bias wherever they appear in the name",
        ORIGINAL,
        lambda model, wd: _groups(model, wd, rule=lambda n: "bias" in n or "LayerNorm" in n),
    ),
    Mistake(
        "only the biases excluded (the norms' weights decayed)",
        "the original excludes the LayerNorm parameters too (LayerNorm, layer_norm in the name)",
        ORIGINAL,
        lambda model, wd: _groups(model, wd, rule=lambda n: "bias" in n),
    ),
    Mistake(
        "the tied decoder weight listed twice",
        "named_parameters() gives a tied weight once; remove_duplicate=False gives it twice",
        ORIGINAL,
        _bert_only(lambda model, wd: _groups(model, wd, rule=_original_rule, duplicates=True)),
    ),
    Mistake(
        "frozen parameters (requires_grad=False) left out",
        "every parameter appears once, frozen or not (transformers' Trainer drops them; the "
        "statement does not)",
        ORIGINAL,
        _bert_only(lambda model, wd: _groups(model, wd, rule=_original_rule, frozen=False)),
    ),
    Mistake(
        "the embeddings left out of the decay",
        "the original decays the embeddings: only norms and biases are excluded",
        ORIGINAL,
        _bert_only(
            lambda model, wd: _groups(
                model, wd, rule=lambda n: _original_rule(n) or "embeddings" in n
            )
        ),
    ),
]

NEIGHBOURS = {
    "groups": [
        Neighbour(
            "the norms excluded, the biases decayed",
            lambda model, wd: _groups(model, wd, rule=lambda n: "norm" in n.lower()),
        ),
        Neighbour(
            "every parameter decayed", lambda model, wd: _groups(model, wd, rule=lambda n: False)
        ),
    ],
}


def _groups_probes():
    """A model with tied weights, the same with frozen embeddings, and both spellings of the
    norms' name in one model."""
    from bertcourse import BertConfig, BertForPreTraining

    config = BertConfig(
        vocab_size=20,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=8,
    )
    model = BertForPreTraining(config)
    frozen = BertForPreTraining(config)
    frozen.bert.embeddings.requires_grad_(False)
    return [((model, 0.1), {}), ((frozen, 0.1), {}), ((NormNames(config), 0.1), {})]


PROBES["groups"] = _groups_probes
