# Source of solutions/ch01_attention/attention.ipynb (build: python solutions/_build_notebooks.py)

# %% [markdown] id=intro
# # Exercises 1: Attention math
#
# You will write the attention of one BERT layer from the bottom up: the scaled dot-product,
# the split of the hidden vector into heads and back, and a multi-head self-attention
# forward pass that gives the same numbers as `bertcourse.attention.BertSelfAttention`.
# Chapter 1 of the book ("Attention math") explains the ideas.
#
# **How to work.** Write your code where a cell says `# YOUR CODE HERE`, replacing the
# `raise NotImplementedError()`. Then run the test cell below it: it prints `OK ...` or a
# message with the shapes, the expected and the obtained values. When your notebook is graded,
# hidden tests also run, with other shapes, dtypes and edge cases: write general code, not code
# for the example. The functions that do a part's work (here
# `torch.nn.functional.scaled_dot_product_attention`, `nn.MultiheadAttention` and bertcourse's
# own attention) are disabled while your answer is checked. Check the whole notebook with the
# **Validate** button (or `nbgrader validate`).
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
# Shapes: B batch, L sequence length, H hidden size, A heads, D = H / A head size.

# %% [code] id=setup
import math

import torch

from bertcourse import grading
from bertcourse.attention import BertSelfAttention
from bertcourse.config import BertConfig
from bertcourse.masks import extended_attention_mask

# %% [markdown] id=sdpa_text
# ## Part 1: scaled dot-product attention (3 points)
#
# Each query $q_i$ scores every key $k_j$ with a dot product, scaled by $\sqrt{d_k}$ so that the
# scores keep a variance near 1 whatever the head size; an additive `bias` (0 where attention is
# allowed, a very negative number where it is masked) is added before the softmax over the keys:
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right) V,
# \qquad P_{ij} = \frac{\exp(s_{ij})}{\sum_{j'} \exp(s_{ij'})}.$$
#
# Write `scaled_dot_product_attention(q, k, v, bias=None)` for inputs of shape
# `(..., L_q, d_k)`, `(..., L_k, d_k)`, `(..., L_k, d_v)` (any number of leading dimensions,
# e.g. `(B, A, L, D)`) and a `bias` that broadcasts to `(..., L_q, L_k)`. Return the pair
# `(context, probs)`: `probs` of shape `(..., L_q, L_k)` (each row sums to 1 over the keys) and
# `context = probs @ v` of shape `(..., L_q, d_v)`.
#
# *Hint:* `k.transpose(-2, -1)` swaps the last two dimensions; `d_k` is `q.shape[-1]`; the softmax
# runs over the keys, the **last** dimension of the scores.

# %% [solution] id=sdpa
def scaled_dot_product_attention(q, k, v, bias=None):
    """softmax(q k^T / sqrt(d_k) + bias) v -> (context (..., Lq, Dv), probs (..., Lq, Lk))."""
    ### BEGIN SOLUTION
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., Lq, Lk)
    if bias is not None:
        scores = scores + bias
    probs = torch.softmax(scores, dim=-1)  # over the keys
    return probs @ v, probs
    ### END SOLUTION

# %% [tests] id=sdpa_tests points=3
REFERENCE = "bertcourse.attention.scaled_dot_product_attention"
q, k, v = (grading.randn(1, 2, 4, 8, seed=s) for s in (1, 2, 3))
grading.check_close(scaled_dot_product_attention, REFERENCE, q, k, v, forbid="sdpa", mistakes="ch01:sdpa")
bias = extended_attention_mask(torch.tensor([[1, 1, 1, 0]]))  # (1, 1, 1, 4): the last key is padding
grading.check_close(scaled_dot_product_attention, REFERENCE, q, k, v, bias, forbid="sdpa", mistakes="ch01:sdpa")
### BEGIN HIDDEN TESTS
# L_q != L_k, d_v != d_k, padding in the batch
q, k, v = grading.randn(2, 3, 5, 16, seed=4), grading.randn(2, 3, 7, 16, seed=5), grading.randn(2, 3, 7, 4, seed=6)
bias = extended_attention_mask(torch.tensor([[1] * 7, [1, 1, 1, 0, 0, 0, 0]]))
grading.check_close(scaled_dot_product_attention, REFERENCE, q, k, v, bias, forbid="sdpa", mistakes="ch01:sdpa")
# no head dimension, float64, a large head size where the scaling matters most
q, k, v = (grading.randn(3, 6, 64, seed=s, dtype=torch.float64) for s in (7, 8, 9))
grading.check_close(scaled_dot_product_attention, REFERENCE, q, k, v, forbid="sdpa", mistakes="ch01:sdpa")
# scores in the thousands: the softmax must stay finite (no NaN from exp overflow)
q, k, v = (grading.randn(2, 4, 8, seed=s, scale=100.0) for s in (10, 11, 12))
grading.check_close(scaled_dot_product_attention, REFERENCE, q, k, v, forbid="sdpa", mistakes="ch01:sdpa")
# half precision in, half precision out
for dtype in (torch.bfloat16, torch.float16):
    q, k, v = (grading.randn(2, 2, 5, 8, seed=s, dtype=dtype) for s in (13, 14, 15))
    grading.check_close(scaled_dot_product_attention, REFERENCE, q, k, v, forbid="sdpa", mistakes="ch01:sdpa")
# a row whose keys are all masked gets uniform weights (the bias is finite), and the inputs are unchanged
bias = extended_attention_mask(torch.tensor([[1, 1, 1, 1], [0, 0, 0, 0]]))
q, k, v = (grading.randn(2, 3, 4, 8, seed=s) for s in (16, 17, 18))
before = [t.clone() for t in (q, k, v)]
grading.check_close(scaled_dot_product_attention, REFERENCE, q, k, v, bias, forbid="sdpa", mistakes="ch01:sdpa")
grading.run(scaled_dot_product_attention, q, k, v, bias, forbid="sdpa")
grading.check_true(all(torch.equal(a, b) for a, b in zip((q, k, v), before)), "scaled_dot_product_attention modified its inputs", hint="use out-of-place operations (q / x, not q /= x)")
### END HIDDEN TESTS

# %% [markdown] id=split_text
# ## Part 2: split the hidden vector into heads (2 points)
#
# Multi-head attention runs $A$ attentions side by side, each on its own slice of $D = H / A$
# dimensions: head $a$ gets dimensions $aD, \dots, (a+1)D - 1$ of every token's hidden vector.
# Write `split_heads(x, num_heads)` that turns `x` of shape `(B, L, H)` into `(B, A, L, D)`,
# so that `split_heads(x, A)[b, a, i]` is `x[b, i, a*D:(a+1)*D]`.
#
# *Hint:* first `view` the last dimension as `(A, D)`, then move the head dimension in front of
# the sequence dimension. A single `view(B, A, L, D)` has the right shape and the wrong content.

# %% [solution] id=split_heads
def split_heads(x, num_heads):
    """(B, L, H) -> (B, A, L, D) with D = H / A."""
    ### BEGIN SOLUTION
    B, L, H = x.shape
    return x.view(B, L, num_heads, H // num_heads).transpose(1, 2)  # (B, A, L, D)
    ### END SOLUTION

# %% [tests] id=split_heads_tests points=2
x = torch.arange(2 * 3 * 8, dtype=torch.float32).view(2, 3, 8)  # (B, L, H) = (2, 3, 8)
grading.check_equal(split_heads, "bertcourse.attention.split_heads", x, 2, forbid="heads", mistakes="ch01:split_heads")
### BEGIN HIDDEN TESTS
grading.check_equal(split_heads, "bertcourse.attention.split_heads", grading.randn(3, 5, 12, seed=1), 4, forbid="heads", mistakes="ch01:split_heads")
grading.check_equal(split_heads, "bertcourse.attention.split_heads", grading.randn(1, 7, 6, seed=2), 6, forbid="heads", mistakes="ch01:split_heads")
### END HIDDEN TESTS

# %% [markdown] id=merge_text
# ## Part 3: merge the heads back (1 point)
#
# After attention, the $A$ context vectors of a token are concatenated back into one vector of
# size $H$: write `merge_heads(x)`, the inverse of `split_heads`, from `(B, A, L, D)` to
# `(B, L, H)`.
#
# *Hint:* a transposed tensor is not contiguous in memory: `view` refuses it, `reshape` (or
# `.contiguous().view(...)`) works.

# %% [solution] id=merge_heads
def merge_heads(x):
    """(B, A, L, D) -> (B, L, A * D)."""
    ### BEGIN SOLUTION
    B, A, L, D = x.shape
    return x.transpose(1, 2).reshape(B, L, A * D)
    ### END SOLUTION

# %% [tests] id=merge_heads_tests points=1
x = torch.arange(2 * 2 * 3 * 4, dtype=torch.float32).view(2, 2, 3, 4)  # (B, A, L, D)
grading.check_equal(merge_heads, "bertcourse.attention.merge_heads", x, forbid="heads", mistakes="ch01:merge_heads")
### BEGIN HIDDEN TESTS
grading.check_equal(merge_heads, "bertcourse.attention.merge_heads", grading.randn(3, 4, 5, 3, seed=1), forbid="heads", mistakes="ch01:merge_heads")
grading.check_equal(merge_heads, "bertcourse.attention.merge_heads", grading.randn(1, 6, 7, 1, seed=2), forbid="heads", mistakes="ch01:merge_heads")
### END HIDDEN TESTS

# %% [markdown] id=mha_text
# ## Part 4: multi-head self-attention (3 points)
#
# In self-attention the queries, keys and values are three linear projections of the same
# hidden states $X$ (shape `(B, L, H)`, one row per token): $Q = X W_Q + b_Q$, and so on (the
# book's row-vector convention; `nn.Linear` stores $W_Q^\top$ as `query.weight`). Each is split into
# heads, every head attends on its own with $d_k = D$, and the heads are merged again:
#
# $$\mathrm{MultiHead}(X) = \mathrm{merge}\big(\mathrm{head}_1, \dots, \mathrm{head}_A\big), \qquad
# \mathrm{head}_a = \mathrm{Attention}(Q_a, K_a, V_a).$$
#
# Write `self_attention(module, hidden_states, bias=None)` where `module` is a
# `bertcourse.attention.BertSelfAttention`: use its three `nn.Linear` layers `module.query`,
# `module.key`, `module.value` and its `module.num_heads`. Return the merged context
# `(B, L, H)` (no output projection: that belongs to the next sublayer). `bias` is the additive
# mask `(B, 1, 1, L)` or None. Use your functions from parts 1–3.
#
# *Hint:* `module.query(hidden_states)` applies $X W_Q + b_Q$.

# %% [solution] id=self_attention
def self_attention(module, hidden_states, bias=None):
    """(B, L, H) -> the merged context (B, L, H) of `module`'s heads."""
    ### BEGIN SOLUTION
    q = split_heads(module.query(hidden_states), module.num_heads)  # (B, A, L, D)
    k = split_heads(module.key(hidden_states), module.num_heads)
    v = split_heads(module.value(hidden_states), module.num_heads)
    context, _ = scaled_dot_product_attention(q, k, v, bias)  # (B, A, L, D)
    return merge_heads(context)  # (B, L, H)
    ### END SOLUTION

# %% [tests] id=self_attention_tests points=3
def reference_self_attention(module, hidden_states, bias=None):
    return module(hidden_states, bias)[0]


EARLIER_PARTS = {
    "scaled_dot_product_attention": REFERENCE,
    "split_heads": "bertcourse.attention.split_heads",
    "merge_heads": "bertcourse.attention.merge_heads",
}
torch.manual_seed(0)
config = BertConfig.tiny(hidden_size=16, num_attention_heads=4, attn_implementation="eager")
module = BertSelfAttention(config).eval()
x = grading.randn(2, 5, 16, seed=1)
grading.check_close(self_attention, reference_self_attention, module, x, forbid="self_attention", use_reference=EARLIER_PARTS, mistakes="ch01:self_attention")
### BEGIN HIDDEN TESTS
bias = extended_attention_mask(torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]))
grading.check_close(self_attention, reference_self_attention, module, x, bias, forbid="self_attention", use_reference=EARLIER_PARTS, mistakes="ch01:self_attention")
torch.manual_seed(1)
module = BertSelfAttention(BertConfig.tiny(hidden_size=24, num_attention_heads=2, attn_implementation="eager")).eval()
grading.check_close(self_attention, reference_self_attention, module, grading.randn(3, 4, 24, seed=2), forbid="self_attention", use_reference=EARLIER_PARTS, mistakes="ch01:self_attention")
### END HIDDEN TESTS

# %% [markdown] id=outro
# ## Going further (not graded)
#
# - Compare your `scaled_dot_product_attention` with `torch.nn.functional.scaled_dot_product_attention`
#   (which returns only the context) in the free cell below. How large is the difference?
# - Without the $1/\sqrt{d_k}$, what happens to the largest probability of each row as `d_k`
#   grows from 4 to 1024 for random unit-variance `q` and `k`?

# %% [scratch]
