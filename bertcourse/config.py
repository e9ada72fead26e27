"""The model configuration and the conventions every module shares.

`BertConfig` uses the field names of transformers' `BertConfig`, so a config can be copied
field by field in both directions (see `bertcourse.hf`). Its defaults are bert-base-uncased.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

# --- Conventions (one of each, used everywhere) ------------------------------------------
IGNORE_INDEX = -100
"""Label of a position that is not predicted (the default `ignore_index` of PyTorch's
cross-entropy, and transformers' convention for MLM labels)."""

IS_NEXT = 0
"""NSP label: segment B really follows segment A (original release and transformers agree)."""
NOT_NEXT = 1
"""NSP label: segment B was drawn at random."""

# Special token ids of the bert-base-uncased WordPiece vocabulary (30,522 entries).
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = 0, 100, 101, 102, 103
SPECIAL_IDS = (PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID)

ACTIVATIONS = ("gelu", "gelu_new", "relu")
ATTN_IMPLEMENTATIONS = ("eager", "sdpa")


@dataclass
class BertConfig:
    """Hyper-parameters of a BERT encoder. Defaults: bert-base-uncased (L=12, H=768, A=12).

    Field names are transformers' own. `hidden_act` is "gelu" (exact, erf form, the first
    release), "gelu_new" (tanh approximation) or "relu" (for experiments only: BERT never used
    it). `attn_implementation` picks the explicit softmax(QK^T/sqrt(d) + bias)V ("eager",
    which can return attention probabilities) or PyTorch's fused
    `F.scaled_dot_product_attention` ("sdpa", faster, same numbers up to rounding).
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    initializer_range: float = 0.02
    attn_implementation: str = "sdpa"

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"BertConfig.{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads}): each head gets hidden_size / num_attention_heads "
                f"dimensions. Try num_attention_heads in "
                f"{[a for a in range(1, 33) if self.hidden_size % a == 0]}."
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act must be one of {ACTIVATIONS}, got {self.hidden_act!r}")
        if self.attn_implementation not in ATTN_IMPLEMENTATIONS:
            raise ValueError(
                f"attn_implementation must be one of {ATTN_IMPLEMENTATIONS}, "
                f"got {self.attn_implementation!r}"
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            p = getattr(self, name)
            if not 0.0 <= p < 1.0:
                raise ValueError(f"BertConfig.{name} must be in [0, 1), got {p!r}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(
                f"pad_token_id ({self.pad_token_id}) must be a valid id below vocab_size "
                f"({self.vocab_size})"
            )
        if self.layer_norm_eps <= 0:
            raise ValueError(f"layer_norm_eps must be positive, got {self.layer_norm_eps!r}")

    @property
    def head_size(self) -> int:
        """Dimension d_k of one attention head."""
        return self.hidden_size // self.num_attention_heads

    def replace(self, **changes: Any) -> BertConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BertConfig:
        """Build from a dict (e.g. a transformers config.json); unknown keys are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in names}
        if (
            "attn_implementation" not in kwargs
            and d.get("_attn_implementation") in ATTN_IMPLEMENTATIONS
        ):
            kwargs["attn_implementation"] = d["_attn_implementation"]
        return cls(**kwargs)

    # Named sizes used across the course.
    @classmethod
    def tiny(cls, **overrides: Any) -> BertConfig:
        """2 layers, hidden 128, 2 heads: BERT-Tiny's shape (Turc et al. 2019)."""
        base = dict(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512
        )
        return cls(**{**base, **overrides})

    @classmethod
    def mini(cls, **overrides: Any) -> BertConfig:
        """4 layers, hidden 256, 4 heads: BERT-Mini's shape."""
        base = dict(
            hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024
        )
        return cls(**{**base, **overrides})

    @classmethod
    def base(cls, **overrides: Any) -> BertConfig:
        """bert-base: 12 layers, hidden 768, 12 heads (~110M parameters)."""
        return cls(**overrides)

    @classmethod
    def large(cls, **overrides: Any) -> BertConfig:
        """bert-large: 24 layers, hidden 1024, 16 heads (~340M parameters)."""
        base = dict(
            hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096
        )
        return cls(**{**base, **overrides})
