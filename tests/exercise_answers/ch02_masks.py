# ruff: noqa
# Wrong and alternative answers for the cells of solutions/ch02_masks (tests/test_exercises.py).
# "# %% wrong <grade id>: <what>" replaces that solution cell and must lose exactly its points;
# "# %% alternative <grade id>: <what>" is correct but written differently: full marks.
# Every block is graded in process; the first two wrong answers of a part also go through nbgrader.
# "# split: dev|eval" (tests/answer_split.py): entries of the mistake catalogues are written
# from the dev half; named/right/wrong is measured on the eval half (scripts/named_mistakes.py).


# %% wrong padding_mask: inverted (1 = padding)
# split: dev
def padding_mask(input_ids, pad_token_id=0):
    return (input_ids == pad_token_id).long()


# %% wrong padding_mask: padding id hard-coded to 0
# split: dev
# names: the padding id hard-coded to 0
def padding_mask(input_ids, pad_token_id=0):
    return (input_ids > 0).long()


# %% wrong padding_mask: returns booleans, not 0/1 integers
# split: dev
# names: booleans instead of 0/1 integers
def padding_mask(input_ids, pad_token_id=0):
    return input_ids != pad_token_id


# %% wrong extended_mask: the original's -10000 instead of the dtype's minimum
# split: dev
def extended_attention_mask(attention_mask, dtype=torch.float32):
    mask = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - mask) * -10000.0


# %% wrong extended_mask: -inf
# split: dev
def extended_attention_mask(attention_mask, dtype=torch.float32):
    mask = attention_mask[:, None, None, :].to(dtype)
    return torch.zeros_like(mask).masked_fill(mask == 0, float("-inf"))


# %% wrong extended_mask: inverted (masks the tokens, keeps the padding)
# split: eval
def extended_attention_mask(attention_mask, dtype=torch.float32):
    mask = attention_mask[:, None, None, :].to(dtype)
    return mask * torch.finfo(dtype).min


# %% wrong extended_mask: masks query rows (B, 1, L, 1) instead of key columns
# split: eval
# names: the query rows masked
def extended_attention_mask(attention_mask, dtype=torch.float32):
    mask = attention_mask[:, None, :, None].to(dtype)
    return (1.0 - mask) * torch.finfo(dtype).min


# %% wrong masked_softmax: masks with minus infinity (NaN for a fully masked row)
# split: dev
# names: a fully masked row gives NaN
def masked_softmax(scores, attention_mask):
    scores = scores.masked_fill(attention_mask[:, None, None, :] == 0, float("-inf"))
    return torch.softmax(scores, dim=-1)


# %% wrong masked_softmax: multiplies the scores by the mask
# split: dev
# names: the scores multiplied by the mask
def masked_softmax(scores, attention_mask):
    return torch.softmax(scores * attention_mask[:, None, None, :], dim=-1)


# %% wrong masked_softmax: softmax first, then zero the padding and renormalise (0/0 when all masked)
# split: eval
# names: a fully masked row gives NaN
def masked_softmax(scores, attention_mask):
    probs = torch.softmax(scores, dim=-1) * attention_mask[:, None, None, :]
    return probs / probs.sum(dim=-1, keepdim=True)


# %% wrong sdpa_mask: nn.MultiheadAttention's polarity (True = ignore)
# split: dev
def to_sdpa_bool_mask(attention_mask):
    return attention_mask[:, None, None, :] == 0


# %% wrong sdpa_mask: a float 0/1 mask (the fused kernel would ADD it to the scores)
# split: eval
# names: a float 0/1 mask instead of booleans
def to_sdpa_bool_mask(attention_mask):
    return attention_mask[:, None, None, :].float()


# %% alternative padding_mask: torch.where
def padding_mask(input_ids, pad_token_id=0):
    return torch.where(input_ids == pad_token_id, 0, 1)


# %% alternative extended_mask: masked_fill of zeros, with unsqueeze
def extended_attention_mask(attention_mask, dtype=torch.float32):
    keep = attention_mask.unsqueeze(1).unsqueeze(2).bool()
    return torch.zeros(keep.shape, dtype=dtype).masked_fill(~keep, torch.finfo(dtype).min)


# %% alternative masked_softmax: masked_fill with the dtype minimum, then an explicit softmax
def masked_softmax(scores, attention_mask):
    keep = attention_mask[:, None, None, :].bool()
    scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    exp = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return exp / exp.sum(dim=-1, keepdim=True)


# %% alternative sdpa_mask: view and a comparison
def to_sdpa_bool_mask(attention_mask):
    B, L = attention_mask.shape
    return (attention_mask != 0).view(B, 1, 1, L)


# %% alternative padding_mask: copy-constructs a tensor (PyTorch warns: silenced by the test helpers)
def padding_mask(input_ids, pad_token_id=0):
    return torch.tensor(input_ids != pad_token_id, dtype=torch.long)


# %% alternative masked_softmax: a library warning printed on stderr (nbgrader's IgnorePattern drops it)
import sys
import warnings


def masked_softmax(scores, attention_mask):
    sys.stderr.write(warnings.formatwarning("a library warning", UserWarning, "library.py", 1))
    bias = (1.0 - attention_mask[:, None, None, :].to(scores.dtype)) * torch.finfo(scores.dtype).min
    return torch.softmax(scores + bias, dim=-1)


# %% wrong kpm: SDPA's polarity (True = may attend)
# split: dev
# names: SDPA's polarity
def key_padding_mask(attention_mask):
    return attention_mask.bool()


# %% wrong kpm: 0/1 integers instead of booleans
# split: eval
# names: a 0/1 integer mask
def key_padding_mask(attention_mask):
    return 1 - attention_mask


# %% wrong kpm: shaped (B, 1, 1, L) like the SDPA mask
# split: eval
# names: shaped (B, 1, 1, L) like the SDPA mask
def key_padding_mask(attention_mask):
    return (attention_mask == 0)[:, None, None, :]


# %% alternative kpm: the logical not of the boolean mask
def key_padding_mask(attention_mask):
    return torch.logical_not(attention_mask.to(torch.bool))


# %% wrong padding_mask: an int32 mask (.int())
# split: eval
# names: an int32 mask (.int()) instead of torch.long
def padding_mask(input_ids, pad_token_id=0):
    return (input_ids != pad_token_id).int()


# %% wrong extended_mask: float32's minimum whatever the dtype asked
# split: dev
# names: float32's minimum whatever the dtype
def extended_attention_mask(attention_mask, dtype=torch.float32):
    mask = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - mask) * torch.finfo(torch.float32).min


# %% wrong masked_softmax: the softmax over the queries (dim=-2)
# split: eval
# names: the softmax over the queries (dim=-2)
def masked_softmax(scores, attention_mask):
    bias = extended_attention_mask(attention_mask, scores.dtype)
    return torch.softmax(scores + bias, dim=-2)


# %% wrong sdpa_mask: a (B, L) boolean mask, not (B, 1, 1, L)
# split: eval
# names: shaped (B, L), not (B, 1, 1, L)
def to_sdpa_bool_mask(attention_mask):
    return attention_mask.bool()
