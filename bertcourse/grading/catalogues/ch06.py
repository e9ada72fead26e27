"""Known mistakes of chapter 6's newer parts (the original BERT optimizer)."""

from __future__ import annotations

from bertcourse.grading.mistakes import Mistake, _adam_step

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


CATALOGUE["groups"] = [
    Mistake(
        "only the name 'LayerNorm' excluded (bertcourse's norms: layer_norm)",
        "the original excludes LayerNorm, layer_norm and bias wherever they appear in the name",
        ORIGINAL,
        lambda model, wd: _groups(model, wd, rule=lambda n: "bias" in n or "LayerNorm" in n),
    ),
    Mistake(
        "the tied decoder weight listed twice",
        "named_parameters() gives a tied weight once; remove_duplicate=False gives it twice",
        ORIGINAL,
        lambda model, wd: _groups(model, wd, rule=_original_rule, duplicates=True),
    ),
    Mistake(
        "frozen parameters (requires_grad=False) left out",
        "every parameter appears once, frozen or not (transformers' Trainer drops them; the "
        "statement does not)",
        ORIGINAL,
        lambda model, wd: _groups(model, wd, rule=_original_rule, frozen=False),
    ),
    Mistake(
        "the embeddings left out of the decay",
        "the original decays the embeddings: only norms and biases are excluded",
        ORIGINAL,
        lambda model, wd: _groups(model, wd, rule=lambda n: _original_rule(n) or "embeddings" in n),
    ),
]


def _groups_probes():
    """A model with tied weights, and the same with frozen embeddings."""
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
    return [((model, 0.1), {}), ((frozen, 0.1), {})]


PROBES["groups"] = _groups_probes
