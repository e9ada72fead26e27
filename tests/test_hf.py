"""Real weights: MiniLM (6 layers, hidden 384, bert-base-uncased vocabulary) loaded offline into
bertcourse gives transformers' outputs on real sentences."""

import pytest
import torch
import transformers

from bertcourse.config import CLS_ID, MASK_ID, PAD_ID, SEP_ID, UNK_ID
from bertcourse.hf import convert_hf_state_dict, hf_to_bertcourse_key, load_minilm, minilm_path

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "BERT reads the whole sentence at once.",
    "Attention is all you need?",
]


@pytest.fixture(scope="module")
def minilm():
    return load_minilm("eager")


@pytest.fixture(scope="module")
def reference():
    return transformers.BertModel.from_pretrained(
        str(minilm_path()), attn_implementation="eager"
    ).eval()


def test_tokenizer_is_bert_base_uncased(minilm):
    _, tok = minilm
    assert len(tok) == 30522
    ids = [tok.convert_tokens_to_ids(t) for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]]
    assert ids == [PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID]
    enc = tok("Hello World")
    assert enc["input_ids"][0] == CLS_ID and enc["input_ids"][-1] == SEP_ID
    assert tok.convert_ids_to_tokens(enc["input_ids"][1:-1]) == ["hello", "world"]  # lower-cased


def test_minilm_matches_transformers(minilm, reference):
    model, tok = minilm
    enc = tok(SENTENCES, padding=True, return_tensors="pt")
    assert (enc["attention_mask"] == 0).any()  # the batch really is padded
    with torch.no_grad():
        ours = model(
            enc["input_ids"], enc["token_type_ids"], enc["attention_mask"], output_attentions=True
        )
        ref = reference(**enc, output_attentions=True)
    real = enc["attention_mask"].bool()
    torch.testing.assert_close(
        ours.last_hidden_state[real], ref.last_hidden_state[real], atol=1e-4, rtol=1e-4
    )
    torch.testing.assert_close(ours.pooler_output, ref.pooler_output, atol=1e-4, rtol=1e-4)
    for a, b in zip(ours.attentions, ref.attentions):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_sdpa_minilm_matches_eager(minilm):
    eager, tok = minilm
    sdpa, _ = load_minilm("sdpa")
    enc = tok(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        a = eager(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"]).last_hidden_state
        b = sdpa(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"]).last_hidden_state
    torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_key_map_is_explicit():
    assert (
        hf_to_bertcourse_key("encoder.layer.3.attention.self.query.weight")
        == "encoder.layer.3.attention.self_attn.query.weight"
    )
    assert hf_to_bertcourse_key("embeddings.LayerNorm.gamma") == "embeddings.layer_norm.weight"
    sd = {"cls.predictions.decoder.bias": torch.zeros(1), "embeddings.position_ids": torch.zeros(1)}
    assert convert_hf_state_dict(sd) == {}
