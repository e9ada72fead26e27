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
