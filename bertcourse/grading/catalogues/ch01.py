"""Known mistakes of chapter 1 (attention math): what each gives, computed.

`sdpa` extends the shared catalogue `mistakes.CATALOGUE["sdpa"]` (the scaling and the softmax's
axis) with the numerics of a hand-written softmax and of a half-precision input; each `compute`
takes the reference's arguments: `(q, k, v, bias=None)`, `(x, num_heads)` for the split,
`(x)` for the merge and `(module, hidden_states, bias=None)` for self-attention.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from bertcourse.grading import mistakes
from bertcourse.grading.mistakes import Mistake

SDPA = "chapter 1, 'Scaled dot-product attention'"
HEADS = "chapter 1, 'Multi-head attention: split and merge'"


def _attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None, scale: float, softmax):
    scores = q @ k.transpose(-2, -1) * scale
    if bias is not None:
        scores = scores + bias
    probs = softmax(scores)
    return probs @ v, probs


def _unshifted_softmax(scores: Tensor) -> Tensor:
    """exp(s) / sum exp(s), without subtracting the row's maximum: inf / inf = NaN."""
    e = scores.exp()
    return e / e.sum(dim=-1, keepdim=True)


def _softmax(scores: Tensor) -> Tensor:
    return torch.softmax(scores, dim=-1)


def _masked_after_softmax(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None = None):
    """The softmax over every key, then the masked keys' weights set to 0 (rows sum to < 1)."""
    probs = torch.softmax(q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5, dim=-1)
    if bias is not None:
        probs = probs * (bias == 0)
    return probs @ v, probs


def _in_float32(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None = None):
    """The attention computed in float32 and returned in float32, whatever the inputs' dtype."""
    q, k, v = q.float(), k.float(), v.float()
    bias = None if bias is None else bias.float()
    return _attention(q, k, v, bias, q.shape[-1] ** -0.5, _softmax)


# --- self-attention -------------------------------------------------------------------------


def _split(x: Tensor, num_heads: int) -> Tensor:
    B, L, H = x.shape
    return x.view(B, L, num_heads, H // num_heads).transpose(1, 2)


def _merge(x: Tensor) -> Tensor:
    B, A, L, D = x.shape
    return x.transpose(1, 2).reshape(B, L, A * D)


def _self_attention(module, hidden_states: Tensor, bias: Tensor | None, *, scale=None, value=None):
    A = module.num_heads
    q = _split(module.query(hidden_states), A)
    k = _split(module.key(hidden_states), A)
    v = _split((module.value if value is None else value)(hidden_states), A)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return _merge(_attention(q, k, v, bias, scale, _softmax)[0])


def _one_head(module, hidden_states: Tensor, bias: Tensor | None = None) -> Tensor:
    """A single head over the whole hidden vector (scaled by sqrt(H))."""
    q, k, v = module.query(hidden_states), module.key(hidden_states), module.value(hidden_states)
    bias = None if bias is None else bias[:, 0]
    return _attention(q, k, v, bias, hidden_states.shape[-1] ** -0.5, _softmax)[0]


CATALOGUE: dict[str, list[Mistake]] = {
    "sdpa": [
        *mistakes.CATALOGUE["sdpa"],
        Mistake(
            "a softmax by hand without subtracting the row maximum",
            "exp overflows to inf for scores near 90 (float32), and inf / inf is NaN; "
            "torch.softmax subtracts each row's maximum first",
            SDPA,
            lambda q, k, v, bias=None: _attention(
                q, k, v, bias, q.shape[-1] ** -0.5, _unshifted_softmax
            ),
        ),
        Mistake(
            "a float32 result for half-precision inputs (not cast back)",
            "half-precision inputs give half-precision outputs: cast the result back "
            "(.to(q.dtype)), or compute in the inputs' dtype",
            SDPA,
            _in_float32,
        ),
        Mistake(
            "the mask applied after the softmax (weights not renormalised)",
            "the bias is added to the scores before the softmax, so that the weights of the "
            "keys that remain still sum to 1",
            "chapter 2, 'From padding to an additive bias'",
            _masked_after_softmax,
        ),
    ],
    "split_heads": [
        Mistake(
            "a single view or reshape to (B, A, L, D), no transpose",
            "it cuts the heads across tokens: view the last dimension as (A, D) first, then "
            "move A before L (transpose(1, 2))",
            HEADS,
            lambda x, num_heads: x.view(x.shape[0], num_heads, x.shape[1], x.shape[2] // num_heads),
        ),
        Mistake(
            "the heads interleaved: view(B, L, D, A) instead of (B, L, A, D)",
            "head a holds the D consecutive dimensions a*D ... (a+1)*D - 1, not every A-th one",
            HEADS,
            lambda x, num_heads: x.view(
                x.shape[0], x.shape[1], x.shape[2] // num_heads, num_heads
            ).permute(0, 3, 1, 2),
        ),
    ],
    "merge_heads": [
        Mistake(
            "a reshape without moving the heads back (no transpose)",
            "(B, A, L, D) must become (B, L, A, D) before the reshape to (B, L, H), or it "
            "mixes tokens",
            HEADS,
            lambda x: x.reshape(x.shape[0], x.shape[2], x.shape[1] * x.shape[3]),
        ),
        Mistake(
            "the heads interleaved: (B, L, D, A) flattened instead of (B, L, A, D)",
            "head a's D values are consecutive in the merged vector: transpose(1, 2), then reshape",
            HEADS,
            lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1),
        ),
    ],
    "self_attention": [
        Mistake(
            "scores scaled by sqrt(H), the hidden size, not sqrt(D)",
            "each head attends with d_k = D = H / A, its own size",
            HEADS,
            lambda module, hidden_states, bias=None: _self_attention(
                module, hidden_states, bias, scale=hidden_states.shape[-1] ** -0.5
            ),
        ),
        Mistake(
            "the values from the key projection",
            "V = module.value(hidden_states); the keys only score, the values are averaged",
            "chapter 1, 'Scaled dot-product attention'",
            lambda module, hidden_states, bias=None: _self_attention(
                module, hidden_states, bias, value=module.key
            ),
        ),
        Mistake(
            "one head over the whole hidden vector",
            "split Q, K and V into module.num_heads heads of D = H / A dimensions, attend in "
            "each, then merge",
            HEADS,
            _one_head,
        ),
    ],
}


# --- probes: inputs on which these mistakes all differ (tests/test_catalogues.py) -----------


def _randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32, scale: float = 1.0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator, dtype=torch.float64) * scale).to(dtype)


def _sdpa_probes() -> list[tuple[tuple, dict]]:
    large = tuple(_randn(2, 3, 16, seed=s, scale=30.0) for s in (111, 112, 113))
    half = tuple(_randn(2, 3, 16, seed=s, dtype=torch.float16) for s in (114, 115, 116))
    return [*mistakes.PROBES["sdpa"](), (large, {}), (half, {})]


def _self_attention_probes() -> list[tuple[tuple, dict]]:
    from bertcourse.attention import BertSelfAttention
    from bertcourse.config import BertConfig

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(117)
        config = BertConfig.tiny(hidden_size=16, num_attention_heads=4, attn_implementation="eager")
        module = BertSelfAttention(config).eval()
    x = _randn(2, 3, 16, seed=118)
    bias = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, torch.finfo(torch.float32).min]])
    return [((module, x), {}), ((module, x, bias[:, None, None, :]), {})]


PROBES: dict[str, Callable[[], list[tuple[tuple, dict]]]] = {
    "sdpa": _sdpa_probes,
    "split_heads": lambda: [((torch.arange(24.0).view(1, 2, 12), 3), {})],
    "merge_heads": lambda: [((torch.arange(24.0).view(1, 2, 3, 4),), {})],
    "self_attention": _self_attention_probes,
}
