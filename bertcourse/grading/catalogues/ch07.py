"""Known mistakes of chapter 7's assembled model: what each gives, computed.

Each `compute` takes the arguments of its part's reference: `(embeddings, input_ids,
token_type_ids)` for the input embeddings, `(layer, hidden_states, bias=None)` for one encoder
layer, `(head, hidden_states)` for the MLM head, `(model, sequence_output)` for the NSP
scores, `(config,)` for the parameter count and `(model, input_ids, token_type_ids,
attention_mask, labels, next_sentence_label)` for the whole forward pass.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from bertcourse.grading.mistakes import Mistake, Neighbour

HEAD = "chapter 7, 'The forward pass, stage by stage'"
STAGES = HEAD
PARAMETERS = "chapter 7, 'Where the parameters are'"


def _head(head, hidden_states, act="erf", transform=True, bias=True, eps=None, norm=True):
    t = head.transform
    x = hidden_states
    if transform:
        x = F.gelu(t.dense(x), approximate="tanh" if act == "tanh" else "none")
        ln = t.layer_norm
        if norm:
            eps = ln.eps if eps is None else eps
            x = F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, eps)
    out = x @ head.decoder.weight.T
    return out + head.bias if bias else out


def _embed(
    embeddings, input_ids, token_type_ids, *, positions=True, first=0, norm_early=False, types=True
):
    """The input embeddings; `first`: the first position's index; `norm_early`: LayerNorm
    before the token types are added; `types`: whether they are added at all."""
    table = embeddings.position_embeddings
    length = input_ids.shape[1]
    x = embeddings.word_embeddings(input_ids)
    if positions:
        x = x + table(torch.arange(first, first + length).clamp(max=table.num_embeddings - 1))
    if not types:
        return embeddings.dropout(embeddings.layer_norm(x))
    types = embeddings.token_type_embeddings(token_type_ids)
    if norm_early:
        return embeddings.dropout(embeddings.layer_norm(x) + types)
    return embeddings.dropout(embeddings.layer_norm(x + types))


def _layer(
    layer,
    hidden_states,
    bias=None,
    *,
    act=F.gelu,
    ffn_residual=None,
    pre_ln=False,
    attn_residual=True,
):
    """One encoder layer; `ffn_residual(h, h')`: what the feed-forward residual adds;
    `attn_residual`: whether the attention sublayer adds its input."""
    attention, out = layer.attention.output, layer.output
    if pre_ln:
        context, _ = layer.attention.self_attn(attention.layer_norm(hidden_states), bias)
        h = hidden_states + attention.dropout(attention.dense(context))
        inner = act(layer.intermediate.dense(out.layer_norm(h)))
        return h + out.dropout(out.dense(inner))
    context, _ = layer.attention.self_attn(hidden_states, bias)
    h = attention.dropout(attention.dense(context))
    h = attention.layer_norm(hidden_states + h if attn_residual else h)
    inner = act(layer.intermediate.dense(h))
    residual = h if ffn_residual is None else ffn_residual(hidden_states, h)
    return out.layer_norm(residual + out.dropout(out.dense(inner)))


def _nsp(model, sequence_output, pick=lambda x: x[:, 0], tanh=True, dense=True):
    pooled = pick(sequence_output)
    pooled = model.bert.pooler.dense(pooled) if dense else pooled
    return model.cls.seq_relationship(torch.tanh(pooled) if tanh else pooled)


def _count(config, *, biases=True, pooler=True, positions=None, types=None) -> int:
    """BertModel's parameters by formula; `positions`, `types`: numbers written in."""
    H, inner = config.hidden_size, config.intermediate_size
    P = config.max_position_embeddings if positions is None else positions
    T = config.type_vocab_size if types is None else types

    def linear(n_in: int, n_out: int) -> int:
        return n_in * n_out + (n_out if biases else 0)

    embeddings = (config.vocab_size + P + T) * H + 2 * H
    layer = 4 * linear(H, H) + 2 * H + linear(H, inner) + linear(inner, H) + 2 * H
    return embeddings + config.num_hidden_layers * layer + (linear(H, H) if pooler else 0)


def _forward(
    model,
    input_ids: Tensor,
    token_type_ids: Tensor,
    attention_mask: Tensor,
    labels: Tensor,
    next_sentence_label: Tensor,
    *,
    mask: Callable[[Tensor], Tensor | None] = lambda m: m,
    layers: slice = slice(None),
    mlm_mean_over_all: bool = False,
):
    """The pre-training forward pass from bertcourse's own parts, with one stage changed."""
    from bertcourse.masks import extended_attention_mask

    h = model.bert.embeddings(input_ids, token_type_ids)
    keep = mask(attention_mask)
    bias = None if keep is None else extended_attention_mask(keep, h.dtype)
    for layer in list(model.bert.encoder.layer)[layers]:
        h = layer(h, bias)[0]
    logits = model.cls.predictions(h)
    seq = model.cls.seq_relationship(model.bert.pooler(h))
    flat = logits.reshape(-1, logits.shape[-1])
    if mlm_mean_over_all:
        mlm = F.cross_entropy(flat, labels.reshape(-1), reduction="sum") / labels.numel()
    else:
        mlm = F.cross_entropy(flat, labels.reshape(-1))
    return logits, seq, mlm + F.cross_entropy(seq, next_sentence_label)


CATALOGUE: dict[str, list[Mistake]] = {
    "embed": [
        Mistake(
            "no position embeddings",
            "BERT adds a learned position vector E_pos[i] to each token's word and type vectors",
            STAGES,
            lambda e, ids, types: _embed(e, ids, types, positions=False),
        ),
        Mistake(
            "positions counted from 1",
            "the first token reads row 0 of the position table: torch.arange(L)",
            STAGES,
            lambda e, ids, types: _embed(e, ids, types, first=1),
        ),
        Mistake(
            "LayerNorm before the token types are added",
            "the three embeddings are summed first, then normalised once",
            STAGES,
            lambda e, ids, types: _embed(e, ids, types, norm_early=True),
        ),
        Mistake(
            "no token type (segment) embeddings",
            "BERT adds a third vector, E_type[token_type_ids], that tells segment A from B",
            STAGES,
            lambda e, ids, types: _embed(e, ids, types, types=False),
        ),
    ],
    "layer": [
        Mistake(
            "pre-LN (LayerNorm before each sublayer)",
            "BERT is post-LN: each sublayer's output is added to its input, then normalised",
            STAGES,
            lambda layer, h, bias=None: _layer(layer, h, bias, pre_ln=True),
        ),
        Mistake(
            "ReLU instead of GELU",
            "BERT's feed-forward activation is GELU, x * Phi(x), in its exact erf form",
            "chapter 7, 'Common mistakes' (ReLU in the feed-forward sublayer)",
            lambda layer, h, bias=None: _layer(layer, h, bias, act=torch.relu),
        ),
        Mistake(
            "the feed-forward residual adds the layer input",
            "the second residual adds h', the output of the attention sublayer, not h",
            STAGES,
            lambda layer, h, bias=None: _layer(layer, h, bias, ffn_residual=lambda x, y: x),
        ),
        Mistake(
            "no residual around the attention sublayer",
            "the attention's output is added to the layer's input before the LayerNorm: "
            "LayerNorm(h + Dropout(W_O c))",
            STAGES,
            lambda layer, h, bias=None: _layer(layer, h, bias, attn_residual=False),
        ),
        Mistake(
            "no residual connections at all",
            "each sublayer adds its input to its output before the LayerNorm; without them the "
            "layer is a plain stack that deep models cannot train",
            STAGES,
            lambda layer, h, bias=None: _layer(
                layer, h, bias, attn_residual=False, ffn_residual=lambda x, y: 0
            ),
        ),
    ],
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
            "the transform without its LayerNorm",
            "the transform is dense, GELU, then LayerNorm (head.transform.layer_norm), before "
            "the decoder",
            HEAD,
            lambda head, h: _head(head, h, norm=False),
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
    "nsp": [
        Mistake(
            "the mean of the sequence instead of the [CLS] vector",
            "BERT's pooler reads the final vector of the first token, [CLS], alone",
            STAGES,
            lambda model, seq: _nsp(model, seq, pick=lambda x: x.mean(dim=1)),
        ),
        Mistake(
            "the last token instead of [CLS]",
            "[CLS] is the first token: sequence_output[:, 0]",
            STAGES,
            lambda model, seq: _nsp(model, seq, pick=lambda x: x[:, -1]),
        ),
        Mistake(
            "the pooler without its tanh",
            "the pooled vector is tanh(h_[CLS] W_P + b_P)",
            STAGES,
            lambda model, seq: _nsp(model, seq, tanh=False),
        ),
        Mistake(
            "the pooler's dense layer skipped (tanh of h_[CLS])",
            "the pooler is a dense layer, then tanh: tanh(h_[CLS] W_P + b_P)",
            STAGES,
            lambda model, seq: _nsp(model, seq, dense=False),
        ),
        Mistake(
            "no pooler: h_[CLS] straight into the classifier",
            "the NSP classifier reads the pooled vector tanh(h_[CLS] W_P + b_P), not h_[CLS]",
            STAGES,
            lambda model, seq: _nsp(model, seq, dense=False, tanh=False),
        ),
    ],
    "count": [
        Mistake(
            "the biases left out",
            "every nn.Linear(n_in, n_out) has n_out biases besides its n_in x n_out weights",
            PARAMETERS,
            lambda config: _count(config, biases=False),
        ),
        Mistake(
            "the pooler left out",
            "BertModel ends with the pooler, one more H -> H dense layer (H^2 + H)",
            PARAMETERS,
            lambda config: _count(config, pooler=False),
        ),
        Mistake(
            "BERT-base's 512 positions and 2 types written in",
            "read max_position_embeddings and type_vocab_size from the configuration",
            PARAMETERS,
            lambda config: _count(config, positions=512, types=2),
        ),
    ],
    "forward": [
        Mistake(
            "the padding mask left out",
            "every layer's attention needs the additive bias of attention_mask (chapter 2)",
            STAGES,
            lambda m, *a: _forward(m, *a, mask=lambda mask: None),
        ),
        Mistake(
            "an inverted padding mask (the padding attended)",
            "attention_mask is 1 for a token and 0 for padding; pass it as it is",
            STAGES,
            lambda m, *a: _forward(m, *a, mask=lambda mask: 1 - mask),
        ),
        Mistake(
            "the MLM loss averaged over every position",
            "the mean runs over the labelled positions only (-100 elsewhere)",
            "chapter 4, 'The MLM loss is a mean over the chosen positions'",
            lambda m, *a: _forward(m, *a, mlm_mean_over_all=True),
        ),
        Mistake(
            "only the first encoder layer",
            "the hidden states go through every layer of model.bert.encoder.layer in turn",
            STAGES,
            lambda m, *a: _forward(m, *a, layers=slice(1)),
        ),
        Mistake(
            "the encoder loop stops one layer early",
            "the hidden states go through every layer, the last one included "
            "(model.bert.encoder.layer, not layer[:-1])",
            STAGES,
            lambda m, *a: _forward(m, *a, layers=slice(-1)),
        ),
    ],
}

# plausible wrong answers that are not named, which the probes must tell apart from every entry
NEIGHBOURS = {
    "forward": [
        Neighbour(
            "the last encoder layer only", lambda m, *a: _forward(m, *a, layers=slice(-1, None))
        ),
        Neighbour("the first layer skipped", lambda m, *a: _forward(m, *a, layers=slice(1, None))),
    ],
}


def _randomized(module, seed: int):
    """`module` with every parameter drawn at random (LayerNorm and biases too), in eval mode."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    return module.eval()


def _config(**changes):
    from bertcourse.config import BertConfig

    base = dict(
        vocab_size=23, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=16, max_position_embeddings=9, type_vocab_size=3,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation="eager",
    )  # fmt: skip
    return BertConfig(**{**base, **changes})


def _build(cls, seed: int, **changes):
    with torch.random.fork_rng(devices=[]):  # the module's init must not move the global seed
        return _randomized(cls(_config(**changes)), seed)


def _draw(*shape: int, seed: int) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _ints(low: int, high: int, *shape: int, seed: int) -> Tensor:
    return torch.randint(low, high, shape, generator=torch.Generator().manual_seed(seed))


def _head_probes() -> list[tuple[tuple, dict]]:
    from bertcourse.heads import BertLMPredictionHead

    head = _build(BertLMPredictionHead, 113, vocab_size=11, layer_norm_eps=0.5)
    return [((head, _draw(2, 3, 8, seed=114) * 2), {})]


def _embed_probes() -> list[tuple[tuple, dict]]:
    from bertcourse.embeddings import BertEmbeddings

    embeddings = _build(BertEmbeddings, 115)
    return [((embeddings, _ints(0, 23, 2, 5, seed=116), _ints(0, 3, 2, 5, seed=117)), {})]


def _layer_probes() -> list[tuple[tuple, dict]]:
    from bertcourse.encoder import BertLayer
    from bertcourse.masks import extended_attention_mask

    layer = _build(BertLayer, 118)
    bias = extended_attention_mask(torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]]))
    return [((layer, _draw(2, 4, 8, seed=119) * 2, bias), {})]


def _nsp_probes() -> list[tuple[tuple, dict]]:
    from bertcourse.model import BertForPreTraining

    model = _build(BertForPreTraining, 120)
    return [((model, _draw(3, 4, 8, seed=121) * 2), {})]


def _count_probes() -> list[tuple[tuple, dict]]:
    return [((_config(),), {}), ((_config(max_position_embeddings=512, type_vocab_size=2),), {})]


def _forward_probes() -> list[tuple[tuple, dict]]:
    from bertcourse.config import IGNORE_INDEX
    from bertcourse.model import BertForPreTraining

    model = _build(BertForPreTraining, 122, num_hidden_layers=3)  # 2 layers: first = all but last
    ids = _ints(5, 23, 2, 6, seed=123)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    labels = torch.where(_ints(0, 3, 2, 6, seed=124) == 0, ids, IGNORE_INDEX)
    labels[0, 0], labels[1, 4:] = (
        int(ids[0, 0]),
        IGNORE_INDEX,
    )  # one label at least, none on padding
    types = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1]])
    return [((model, ids, types, mask, labels, torch.tensor([0, 1])), {})]


PROBES = {
    "embed": _embed_probes,
    "layer": _layer_probes,
    "mlm_head": _head_probes,
    "nsp": _nsp_probes,
    "count": _count_probes,
    "forward": _forward_probes,
}
