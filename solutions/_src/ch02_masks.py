# Source of solutions/ch02_masks/masks.ipynb (build: python solutions/_build_notebooks.py)

# %% [markdown] id=intro
# # Exercises 2: Attention-mask semantics
#
# A batch of sentences of different lengths is padded to one length $L$. Attention must not
# look at the padding: you will build the padding mask from the token ids, turn it into the
# additive bias that every layer adds to its scores, write a masked softmax that stays finite
# even when a whole row is masked, and convert the mask to the boolean convention of PyTorch's
# fused attention. Chapter 2 of the book ("Masks") explains why.
#
# **How to work.** Write your code where a cell says `# YOUR CODE HERE`, replacing the
# `raise NotImplementedError()`, then run the test cell below it (`OK ...` or a message).
# Hidden tests run at grading time with other shapes, dtypes and ids. Functions of
# `bertcourse.masks` are disabled while your answers are checked. Check everything with
# **Validate** (or `nbgrader validate`).
#
# **What an answer may use.** A part that asks you to write something PyTorch or bertcourse
# already has allows a list of building blocks: tensor arithmetic, reductions, shapes, creation,
# comparison and indexing, `softmax`, `gelu` and a few other functions of `torch.nn.functional`,
# `math`, Python's plain builtins (`len`, `range`, `zip`, `sorted`, ...), a few helpers of the
# standard library (`itertools`, `collections.Counter` and `defaultdict`, `functools.reduce` and
# `partial`, `dataclasses.dataclass`, `copy.deepcopy`), your own functions and classes, and the
# functions and classes the set-up cell defines or imports by name. Some parts add what their
# work needs, such as a few layers of `torch.nn` (`nn.Linear`, `nn.LayerNorm`, `nn.Dropout`,
# ...) in the parts that take a model or its modules, and `random` in the parts that draw at
# random. Whatever the list holds, what already does the part's work is disabled while your
# answer is checked: an answer that calls it earns nothing. When your course grades with the
# course's grader (`python -m bertcourse.grade`), an answer that uses anything outside the list
# earns nothing for that part either, and your submission waits for a person: its other points
# count only once an instructor approves them.
#
# Conventions (the same as transformers): `attention_mask` is `(B, L)`, 1 for a real token and
# 0 for padding; the padding id of bert-base-uncased is 0 (`[PAD]`).

# %% [code] id=setup
import torch

import bertcourse.masks
from bertcourse import grading

# %% [markdown] id=padding_text
# ## Part 1: the padding mask (1 point)
#
# Write `padding_mask(input_ids, pad_token_id=0)`: for `input_ids` of shape `(B, L)`, return a
# `(B, L)` tensor of dtype `torch.long` holding 1 where the id is a real token and 0 where it
# is `pad_token_id`.
#
# *Hint:* a comparison gives a `bool` tensor; `.long()` converts it. Use the argument, not the
# number 0: RoBERTa's padding id is 1.

# %% [solution] id=padding_mask
def padding_mask(input_ids, pad_token_id=0):
    """(B, L) ids -> (B, L) long, 1 = token, 0 = padding."""
    ### BEGIN SOLUTION
    return (input_ids != pad_token_id).long()
    ### END SOLUTION

# %% [tests] id=padding_mask_tests points=1
ids = torch.tensor([[101, 7592, 2088, 102, 0, 0], [101, 2023, 2003, 1037, 3231, 102]])
grading.check_equal(padding_mask, "bertcourse.masks.padding_mask", ids, forbid="masks", mistakes="ch02:padding_mask")
### BEGIN HIDDEN TESTS
ids = grading.randint(0, 5, 4, 9, seed=1)
grading.check_equal(padding_mask, "bertcourse.masks.padding_mask", ids, forbid="masks", mistakes="ch02:padding_mask")
grading.check_equal(padding_mask, "bertcourse.masks.padding_mask", ids, pad_token_id=1, forbid="masks", mistakes="ch02:padding_mask")
### END HIDDEN TESTS

# %% [markdown] id=extended_text
# ## Part 2: the additive attention bias (2 points)
#
# The mask is applied by *adding* a bias to the attention scores before the softmax: 0 where a
# key may be attended, a very negative number $m$ where it is padding, so that
# $\exp(s + m) \approx 0$. transformers computes it once per batch, with shape `(B, 1, 1, L)`
# so that it broadcasts over the heads and the query rows of the `(B, A, L, L)` scores:
#
# $$\text{bias}_{b,1,1,j} = (1 - \text{mask}_{b,j}) \cdot m, \qquad m = \texttt{torch.finfo(dtype).min}.$$
#
# Write `extended_attention_mask(attention_mask, dtype=torch.float32)` returning this bias with
# the given dtype. (The original TensorFlow code used $m = -10000$; transformers moved to the
# dtype's minimum, which is the value expected here. Do not use $-\infty$: see part 3.)
#
# *Hint:* `attention_mask[:, None, None, :]` has shape `(B, 1, 1, L)`; convert it to `dtype`
# before the arithmetic.

# %% [solution] id=extended_mask
def extended_attention_mask(attention_mask, dtype=torch.float32):
    """(B, L) 0/1 -> (B, 1, 1, L) additive bias of `dtype`: 0 or torch.finfo(dtype).min."""
    ### BEGIN SOLUTION
    mask = attention_mask[:, None, None, :].to(dtype)  # (B, 1, 1, L)
    return (1.0 - mask) * torch.finfo(dtype).min
    ### END SOLUTION

# %% [tests] id=extended_mask_tests points=2
REFERENCE = "bertcourse.masks.extended_attention_mask"
mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
grading.check_close(extended_attention_mask, REFERENCE, mask, forbid="masks", mistakes="ch02:extended_mask")
### BEGIN HIDDEN TESTS
mask = (grading.randint(0, 4, 3, 7, seed=2) > 0).long()
for dtype in (torch.float16, torch.bfloat16, torch.float64):
    grading.check_close(extended_attention_mask, REFERENCE, mask, dtype, forbid="masks", mistakes="ch02:extended_mask")
### END HIDDEN TESTS

# %% [markdown] id=softmax_text
# ## Part 3: a masked softmax that stays finite (3 points)
#
# Write `masked_softmax(scores, attention_mask)` for scores of shape `(B, A, L, L)` (query
# rows, key columns) and a `(B, L)` mask: the softmax over the keys of the scores plus the bias
# of part 2 (in the scores' dtype), so that padded keys get probability 0.
#
# A row in which **every** key is masked (e.g. a batch row that is all padding) must not become
# NaN: with a finite bias $m$ all its scores become $\approx m$ and the softmax is uniform,
# $1/L$ per key. With $-\infty$ it would be $\exp(-\infty)/\sum \exp(-\infty) = 0/0$.
# The hidden tests check such a row in float16 and bfloat16 too (the result keeps the scores'
# dtype).
#
# *Hint:* the softmax runs over the last dimension. You may call your
# `extended_attention_mask` from part 2.

# %% [solution] id=masked_softmax
def masked_softmax(scores, attention_mask):
    """softmax over keys of scores (B, A, Lq, Lk) with padded keys (mask (B, Lk) == 0) masked."""
    ### BEGIN SOLUTION
    bias = extended_attention_mask(attention_mask, scores.dtype)  # (B, 1, 1, Lk)
    return torch.softmax(scores + bias, dim=-1)
    ### END SOLUTION

# %% [tests] id=masked_softmax_tests points=3
def reference_masked_softmax(scores, attention_mask):
    bias = bertcourse.masks.extended_attention_mask(attention_mask, scores.dtype)
    return torch.softmax(scores + bias, dim=-1)


EARLIER_PARTS = {"extended_attention_mask": REFERENCE}
scores = grading.randn(2, 2, 4, 4, seed=3)
mask = torch.tensor([[1, 1, 1, 0], [0, 0, 0, 0]])  # the second row is all padding
grading.check_close(masked_softmax, reference_masked_softmax, scores, mask, forbid="masks", use_reference=EARLIER_PARTS, mistakes="ch02:masked_softmax")
probs = grading.run(masked_softmax, scores, mask, forbid="masks", use_reference=EARLIER_PARTS)
grading.check_true(torch.isfinite(probs).all(), "masked_softmax gave NaN or inf", hint="use a finite bias, not -inf")
### BEGIN HIDDEN TESTS
scores = grading.randn(3, 4, 6, 6, seed=4, dtype=torch.float64, scale=30.0)
mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]])
grading.check_close(masked_softmax, reference_masked_softmax, scores, mask, forbid="masks", use_reference=EARLIER_PARTS, mistakes="ch02:masked_softmax")
grading.check_close(masked_softmax, reference_masked_softmax, scores[:2, :, :3], mask[:2], forbid="masks", use_reference=EARLIER_PARTS, mistakes="ch02:masked_softmax")
# a row whose keys are all masked, in half precision: finite and uniform (1/L), in the scores' dtype
for dtype in (torch.float16, torch.bfloat16):
    half = grading.randn(3, 2, 4, 4, seed=12, dtype=dtype)
    probs = grading.run(masked_softmax, half, torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]]), forbid="masks", use_reference=EARLIER_PARTS)
    grading.check_tensor(probs, shape=half.shape, dtype=dtype, what=f"masked_softmax of {dtype} scores")
    grading.check_value(probs[1].float(), torch.full((2, 4, 4), 0.25), f"the fully masked row in {dtype} (uniform)", atol=1e-3, rtol=0.0)
### END HIDDEN TESTS

# %% [markdown] id=sdpa_text
# ## Part 4: the boolean mask of PyTorch's fused attention (1 point)
#
# `torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=...)` also accepts a
# boolean mask, in which **True means "may attend"**. (Beware: `nn.MultiheadAttention`'s
# `key_padding_mask` uses the opposite, True = "ignore this key".) Write
# `to_sdpa_bool_mask(attention_mask)` that turns a `(B, L)` 0/1 mask into a `(B, 1, 1, L)`
# `torch.bool` mask for the fused attention.

# %% [solution] id=sdpa_mask
def to_sdpa_bool_mask(attention_mask):
    """(B, L) 0/1 -> (B, 1, 1, L) bool, True = may attend."""
    ### BEGIN SOLUTION
    return attention_mask[:, None, None, :].bool()
    ### END SOLUTION

# %% [tests] id=sdpa_mask_tests points=1
mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
grading.check_equal(to_sdpa_bool_mask, "bertcourse.masks.to_sdpa_bool_mask", mask, forbid="masks", mistakes="ch02:sdpa_mask")
### BEGIN HIDDEN TESTS
mask = (grading.randint(0, 3, 4, 8, seed=5) > 0).long()
mask[:, 0] = 1  # no fully masked row: torch 2.13's fused kernel returns zeros there on CPU (eager -inf gives NaN)
grading.check_equal(to_sdpa_bool_mask, "bertcourse.masks.to_sdpa_bool_mask", mask, forbid="masks", mistakes="ch02:sdpa_mask")
# the fused kernel with this mask equals the additive bias of part 2
q, k, v = (grading.randn(4, 2, 8, 4, seed=s) for s in (6, 7, 8))
bool_mask = grading.run(to_sdpa_bool_mask, mask, forbid="masks")
fused = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bool_mask)
additive = torch.softmax(q @ k.transpose(-2, -1) / 2.0 + bertcourse.masks.extended_attention_mask(mask), dim=-1) @ v
grading.check_value(fused, additive, "fused attention with your mask", atol=1e-5, rtol=1e-4)
### END HIDDEN TESTS

# %% [markdown] id=kpm_text
# ## Part 5: the other boolean convention, `key_padding_mask` (1 point)
#
# `torch.nn.MultiheadAttention` and `nn.TransformerEncoderLayer` take the padding as
# `key_padding_mask`, a `(B, L)` `torch.bool` tensor in which **True means "ignore this key"**:
# the opposite polarity of the fused attention's mask of part 4. Write
# `key_padding_mask(attention_mask)` that turns a `(B, L)` 0/1 mask (1 = token) into it.
# The hidden tests feed your mask to a real `nn.MultiheadAttention` and compare its output with
# attention under the additive bias of part 2.

# %% [solution] id=kpm
def key_padding_mask(attention_mask):
    """(B, L) 0/1 -> (B, L) bool, True = padding (a key to ignore)."""
    ### BEGIN SOLUTION
    return attention_mask == 0
    ### END SOLUTION

# %% [tests] id=kpm_tests points=1
mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
grading.check_equal(key_padding_mask, "bertcourse.masks.key_padding_mask", mask, forbid="masks", mistakes="ch02:key_padding_mask")
### BEGIN HIDDEN TESTS
mask = (grading.randint(0, 3, 3, 6, seed=9) > 0).long()
mask[:, 0] = 1  # every row keeps a key
grading.check_equal(key_padding_mask, "bertcourse.masks.key_padding_mask", mask, forbid="masks", mistakes="ch02:key_padding_mask")
# from outside: nn.MultiheadAttention with this mask equals attention under the additive bias
torch.manual_seed(10)
mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
x = grading.randn(3, 6, 8, seed=11)
kpm = grading.run(key_padding_mask, mask, forbid="masks")
grading.check_tensor(kpm, shape=mask.shape, dtype=torch.bool, what="key_padding_mask(...)")
with torch.no_grad():
    got = mha(x, x, x, key_padding_mask=kpm, need_weights=False)[0]
    q, k, v = torch.nn.functional.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)
    split = lambda t: t.view(3, 6, 2, 4).transpose(1, 2)  # noqa: E731
    scores = split(q) @ split(k).transpose(-2, -1) / 2.0 + bertcourse.masks.extended_attention_mask(mask)
    context = (torch.softmax(scores, dim=-1) @ split(v)).transpose(1, 2).reshape(3, 6, 8)
    expected = mha.out_proj(context)
grading.check_value(got, expected, "nn.MultiheadAttention with your key_padding_mask", atol=1e-5, rtol=1e-4)
### END HIDDEN TESTS

# %% [markdown] id=outro
# ## Going further (not graded)
#
# - Rows of padded *queries* still get values in BERT: only keys are masked. Why is that
#   harmless? (Chapter 2 answers it.)
# - Try $m = -10000$ with scores of size 1e5 (e.g. after a bad initialisation). What happens?

# %% [scratch]
