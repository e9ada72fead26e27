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
            "a fixed LayerNorm eps, not the module's",
            "read the module's eps (head.transform.layer_norm.eps, from config.layer_norm_eps); "
            "a written-in 1e-12 or 1e-5 is wrong for a model configured otherwise",
            HEAD,
            lambda head, h: (
                None if head.transform.layer_norm.eps < 1e-4 else _head(head, h, eps=1e-12)
            ),
        ),
    ],
}


def _head_probes() -> list[tuple[tuple, dict]]:
    import torch

    from bertcourse.config import BertConfig
    from bertcourse.heads import BertLMPredictionHead

    config = BertConfig.tiny(
        hidden_size=8, num_attention_heads=2, intermediate_size=16, vocab_size=11,
        layer_norm_eps=0.5,
    )  # fmt: skip
    generator = torch.Generator().manual_seed(113)
    with torch.random.fork_rng(devices=[]):  # the module's init must not move the global seed
        head = BertLMPredictionHead(config)
    with torch.no_grad():
        for parameter in head.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
    return [((head, torch.randn(2, 3, 8, generator=generator)), {})]


PROBES = {"mlm_head": _head_probes}
