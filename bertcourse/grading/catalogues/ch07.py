"""Known mistakes of chapter 7's heads."""

from __future__ import annotations

import torch.nn.functional as F

from bertcourse.grading.mistakes import Mistake

HEAD = "chapter 7, 'The forward pass, stage by stage'"


def _head(head, hidden_states, act="erf", transform=True, bias=True, eps=None):
    t = head.transform
    x = hidden_states
    if transform:
        x = F.gelu(t.dense(x), approximate="tanh" if act == "tanh" else "none")
        ln = t.layer_norm
        x = F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps if eps is None else eps)
    out = x @ head.decoder.weight.T
    return out + head.bias if bias else out


CATALOGUE: dict[str, list[Mistake]] = {
    "mlm_head": [
        Mistake(
            "the tanh approximation of GELU",
            "BERT's head uses the exact GELU, x * Phi(x) with the error function",
            HEAD,
            lambda head, h: _head(head, h, act="tanh"),
        ),
        Mistake(
            "the decoder without the transform",
            "the hidden vector first goes through dense, GELU and LayerNorm",
            HEAD,
            lambda head, h: _head(head, h, transform=False),
        ),
        Mistake(
            "the decoder without its output bias",
            "the decoder's weight is tied to the embeddings, but it has its own bias",
            HEAD,
            lambda head, h: _head(head, h, bias=False),
        ),
        Mistake(
            "LayerNorm with PyTorch's default eps 1e-5",
            "use the module's eps (config.layer_norm_eps, 1e-12 in BERT)",
            HEAD,
            lambda head, h: _head(head, h, eps=1e-5),
        ),
    ],
}
