# Source of solutions/ch04_loss/loss.ipynb (build: python solutions/_build_notebooks.py)

# %% [markdown] id=intro
# # Exercises 4: The loss
#
# Both pre-training tasks of BERT are classifications trained with cross-entropy. You will
# write it from the inside: a numerically stable log-softmax, the cross-entropy with an
# `ignore_index` (the -100 labels of the positions that are not predicted), its gradient by
# hand, and the masked-LM loss computed only at the chosen positions. Chapter 4 of the book
# ("The loss") explains each step.
#
# **How to work.** Write your code where a cell says `# YOUR CODE HERE`, replacing the
# `raise NotImplementedError()`, then run the test cell below it (`OK ...` or a message).
# Hidden tests run at grading time with other shapes, dtypes and edge cases. The functions
# each part asks you to write (PyTorch's `log_softmax`, `cross_entropy`, `nll_loss`, autograd,
# and `bertcourse.losses`) are disabled while your answer is checked. Check everything with
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
# Convention: the classes are the **last** dimension: logits `(..., V)`, targets `(...)`.

# %% [code] id=setup
import torch
import torch.nn.functional as F

from bertcourse import grading
from bertcourse.config import IGNORE_INDEX

# %% [markdown] id=log_softmax_text
# ## Part 1: a stable log-softmax (2 points)
#
# $$\log \mathrm{softmax}(z)_j = z_j - \log \sum_k e^{z_k}.$$
#
# Computed literally, $e^{z_k}$ overflows to `inf` once $z_k > 88$ in float32. Since
# $\log \sum_k e^{z_k} = c + \log \sum_k e^{z_k - c}$ for any $c$, take $c = \max_k z_k$ **of
# each row**: then every exponent is $\le 0$ and the largest term is exactly 1.
#
# Write `log_softmax(logits)` over the last dimension, for logits of any shape `(..., V)`,
# without `torch.log_softmax`, `F.log_softmax` or `torch.logsumexp`. The result has the dtype
# of `logits`: the hidden tests also pass float64, float16 and bfloat16 logits (float16's
# largest number is 65504, so $e^{12}$ already overflows there).
#
# *Hint:* `logits.amax(dim=-1, keepdim=True)`; `keepdim=True` keeps the shape broadcastable.

# %% [solution] id=log_softmax
def log_softmax(logits):
    """(..., V) -> (..., V): log of the softmax over the last dimension, stable for large logits."""
    ### BEGIN SOLUTION
    shifted = logits - logits.amax(dim=-1, keepdim=True)  # (..., V), max 0 per row
    return shifted - torch.log(torch.exp(shifted).sum(dim=-1, keepdim=True))
    ### END SOLUTION

# %% [tests] id=log_softmax_tests points=2
def reference_log_softmax(logits):
    return torch.log_softmax(logits, dim=-1)


grading.check_close(log_softmax, reference_log_softmax, grading.randn(4, 10, seed=1), forbid="log_softmax", mistakes="ch04:log_softmax")
grading.check_close(log_softmax, reference_log_softmax, grading.randn(3, 5, seed=2, scale=1000.0), forbid="log_softmax", mistakes="ch04:log_softmax")
### BEGIN HIDDEN TESTS
grading.check_close(log_softmax, reference_log_softmax, grading.randn(2, 3, 7, seed=3, dtype=torch.float64), forbid="log_softmax", mistakes="ch04:log_softmax")
rows_of_different_size = torch.stack([grading.randn(6, seed=4) + 1000.0, grading.randn(6, seed=5)])
grading.check_close(log_softmax, reference_log_softmax, rows_of_different_size, forbid="log_softmax", mistakes="ch04:log_softmax")
grading.check_close(log_softmax, reference_log_softmax, grading.randn(5, 2, seed=6, scale=300.0), forbid="log_softmax", mistakes="ch04:log_softmax")
# in the input's dtype; e^z overflows float16 without the max. Computing m + log(sum) first and
# then z - (m + ...) rounds at the scale of |z|: a few units of that, not of the result
for dtype in (torch.float16, torch.bfloat16):
    z = grading.randn(8, 50, seed=7, scale=5.0).to(dtype)
    ulps = 4 * torch.finfo(dtype).eps * z.abs().max().item()
    grading.check_close(log_softmax, reference_log_softmax, z, forbid="log_softmax", atol=ulps, mistakes="ch04:log_softmax")
### END HIDDEN TESTS

# %% [markdown] id=ce_text
# ## Part 2: cross-entropy with ignored positions (3 points)
#
# For an item with logits $z$ and target class $t$ the loss is $-\log \mathrm{softmax}(z)_t$.
# Items whose target is `ignore_index` (-100) contribute nothing and are not counted: the mean
# runs over the $N$ labelled items only,
#
# $$\mathcal{L} = \frac{1}{N} \sum_{i:\ t_i \neq -100} -\log \mathrm{softmax}(z_i)_{t_i}.$$
#
# Write `cross_entropy(logits, targets, ignore_index=-100)` for logits `(..., V)` and integer
# targets `(...)`, returning a 0-dimensional tensor equal to
# `F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))`, **in the dtype of `logits`**
# (that of `F.cross_entropy`: float16 logits give a float16 loss, bfloat16 a bfloat16 one; the
# hidden tests pass both). If **every** target is ignored, return NaN (0 / 0), as PyTorch does.
#
# *Hint:* `gather` cannot index with -100: replace ignored targets by any valid class (e.g. 0)
# before gathering, then leave those items out of the sum and the count. You may use your
# `log_softmax` or `torch.log_softmax`.

# %% [solution] id=ce
def cross_entropy(logits, targets, ignore_index=IGNORE_INDEX):
    """Mean of -log softmax(logits)[target] over the items whose target is not ignore_index."""
    ### BEGIN SOLUTION
    log_probs = torch.log_softmax(logits, dim=-1)  # (..., V)
    keep = targets != ignore_index  # (...)
    safe = targets.masked_fill(~keep, 0)
    picked = log_probs.gather(-1, safe.unsqueeze(-1)).squeeze(-1)  # (...)
    return -(picked[keep]).sum() / keep.sum()
    ### END SOLUTION

# %% [tests] id=ce_tests points=3
logits = grading.randn(6, 5, seed=1)
targets = torch.tensor([1, 0, IGNORE_INDEX, 4, 2, IGNORE_INDEX])
grading.check_close(cross_entropy, "bertcourse.losses.cross_entropy", logits, targets, forbid="cross_entropy", use_reference={"log_softmax": "bertcourse.losses.log_softmax"}, mistakes="cross_entropy")
### BEGIN HIDDEN TESTS
EARLIER = {"log_softmax": "bertcourse.losses.log_softmax"}
logits = grading.randn(2, 4, 7, seed=2, dtype=torch.float64, scale=3.0)  # (B, L, V)
targets = torch.tensor([[3, IGNORE_INDEX, 0, 6], [IGNORE_INDEX, IGNORE_INDEX, 2, 1]])
grading.check_close(cross_entropy, "bertcourse.losses.cross_entropy", logits, targets, forbid="cross_entropy", use_reference=EARLIER, mistakes="cross_entropy")
grading.check_close(cross_entropy, "bertcourse.losses.cross_entropy", logits, torch.full((2, 4), IGNORE_INDEX), forbid="cross_entropy", use_reference=EARLIER, mistakes="cross_entropy")
grading.check_close(cross_entropy, "bertcourse.losses.cross_entropy", logits, targets.clamp(min=0), 0, forbid="cross_entropy", use_reference=EARLIER, mistakes="cross_entropy")
grading.check_close(cross_entropy, F.cross_entropy, grading.randn(40, 3, seed=3), grading.randint(0, 3, 40, seed=4), forbid="cross_entropy", use_reference=EARLIER, mistakes="cross_entropy")
# a confident, correct prediction: its loss is exactly 0.0 (float32) and it still counts in N
logits = grading.randn(5, 6, seed=9)
targets = torch.tensor([2, IGNORE_INDEX, 5, 0, 1])
logits[0, 2] = 200.0
grading.check_close(cross_entropy, "bertcourse.losses.cross_entropy", logits, targets, forbid="cross_entropy", use_reference=EARLIER, mistakes="cross_entropy")
# extreme logits (one row at +-1e4) and a batch of one item
logits[3] = grading.randn(6, seed=10, scale=1e4)
grading.check_close(cross_entropy, "bertcourse.losses.cross_entropy", logits, targets, forbid="cross_entropy", use_reference=EARLIER, mistakes="cross_entropy")
grading.check_close(cross_entropy, "bertcourse.losses.cross_entropy", logits[:1], targets[:1], forbid="cross_entropy", use_reference=EARLIER, mistakes="cross_entropy")
# half precision: the loss in the logits' dtype, as F.cross_entropy gives it (computing in
# float32 is fine if the loss is cast back); a sum in float16/bfloat16 rounds: 4 units of the dtype
def reference_flat(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


half_targets = torch.tensor([[3, IGNORE_INDEX, 0, 6, 1], [IGNORE_INDEX, 2, 2, 5, IGNORE_INDEX]])
for dtype in (torch.float16, torch.bfloat16):
    half_logits = grading.randn(2, 5, 7, seed=15, scale=2.0).to(dtype)
    grading.check_close(cross_entropy, reference_flat, half_logits, half_targets, forbid="cross_entropy", use_reference=EARLIER, atol=0.0, rtol=4 * torch.finfo(dtype).eps, mistakes="cross_entropy")
# purity: the inputs are unchanged after the call
before = (logits.clone(), targets.clone())
grading.run(cross_entropy, logits, targets, forbid="cross_entropy", use_reference=EARLIER)
grading.check_true(torch.equal(logits, before[0]) and torch.equal(targets, before[1]), "cross_entropy modified its inputs", hint="work on new tensors (masked_fill, not masked_fill_)")
### END HIDDEN TESTS

# %% [markdown] id=grad_text
# ## Part 3: the gradient by hand (3 points)
#
# For one item, $\frac{\partial}{\partial z_j}\big(-\log \mathrm{softmax}(z)_t\big) =
# \mathrm{softmax}(z)_j - [j = t]$: push the target's logit up by $1 - p_t$ and every other
# logit down by its probability. For the mean of part 2, each labelled row is divided by $N$;
# ignored rows get 0:
#
# $$\frac{\partial \mathcal{L}}{\partial z_i} = \frac{[t_i \neq -100]}{N}\big(\mathrm{softmax}(z_i) - \mathrm{onehot}(t_i)\big).$$
#
# Write `cross_entropy_grad(logits, targets, ignore_index=-100)` returning this gradient, of the
# shape of `logits`, without autograd (`backward`, `torch.autograd.grad` are disabled). If
# every target is ignored the gradient is all zeros (what autograd gives too).
#
# *Hint:* `F.one_hot(safe_targets, V)` builds the one-hot rows; multiply by the mask of
# labelled items, `keep[..., None]`.

# %% [solution] id=grad
def cross_entropy_grad(logits, targets, ignore_index=IGNORE_INDEX):
    """d cross_entropy(logits, targets) / d logits, shape (..., V)."""
    ### BEGIN SOLUTION
    keep = targets != ignore_index  # (...)
    safe = targets.masked_fill(~keep, 0)
    one_hot = F.one_hot(safe, logits.shape[-1]).to(logits.dtype)  # (..., V)
    grad = (torch.softmax(logits, dim=-1) - one_hot) * keep[..., None]
    return grad / keep.sum().clamp(min=1)
    ### END SOLUTION

# %% [tests] id=grad_tests points=3
FORBID_GRAD = ("autograd", "cross_entropy")
logits = grading.randn(6, 5, seed=1)
targets = torch.tensor([1, 0, IGNORE_INDEX, 4, 2, IGNORE_INDEX])
grading.check_close(cross_entropy_grad, "bertcourse.losses.cross_entropy_grad", logits, targets, forbid=FORBID_GRAD, mistakes="cross_entropy_grad")
# the same thing, with autograd
z = logits.clone().requires_grad_()
F.cross_entropy(z, targets).backward()
grading.check_value(grading.run(cross_entropy_grad, logits, targets, forbid=FORBID_GRAD), z.grad, "gradient vs autograd")
### BEGIN HIDDEN TESTS
logits = grading.randn(2, 4, 7, seed=2, dtype=torch.float64)
targets = torch.tensor([[3, IGNORE_INDEX, 0, 6], [IGNORE_INDEX, IGNORE_INDEX, 2, 1]])
grading.check_close(cross_entropy_grad, "bertcourse.losses.cross_entropy_grad", logits, targets, forbid=FORBID_GRAD, mistakes="cross_entropy_grad")
grading.check_close(cross_entropy_grad, "bertcourse.losses.cross_entropy_grad", logits, torch.full((2, 4), IGNORE_INDEX), forbid=FORBID_GRAD, mistakes="cross_entropy_grad")
grading.check_close(cross_entropy_grad, "bertcourse.losses.cross_entropy_grad", logits, targets.clamp(min=0), 0, forbid=FORBID_GRAD, mistakes="cross_entropy_grad")
# exactly one labelled item (N = 1), and a batch of one item
one = torch.full((2, 4), IGNORE_INDEX)
one[1, 2] = 5
grading.check_close(cross_entropy_grad, "bertcourse.losses.cross_entropy_grad", logits, one, forbid=FORBID_GRAD, mistakes="cross_entropy_grad")
grading.check_close(cross_entropy_grad, "bertcourse.losses.cross_entropy_grad", logits[0, :1], targets[0, :1], forbid=FORBID_GRAD, mistakes="cross_entropy_grad")
# extreme logits: finite, and equal to autograd's
big = grading.randn(3, 7, seed=11, scale=1e4)
grading.check_close(cross_entropy_grad, "bertcourse.losses.cross_entropy_grad", big, torch.tensor([0, 6, IGNORE_INDEX]), forbid=FORBID_GRAD, mistakes="cross_entropy_grad")
before = logits.clone()
grading.run(cross_entropy_grad, logits, targets, forbid=FORBID_GRAD)
grading.check_true(torch.equal(logits, before), "cross_entropy_grad modified the logits", hint="softmax_ and friends work in place: use the out-of-place versions")
### END HIDDEN TESTS

# %% [markdown] id=mlm_text
# ## Part 4: the MLM loss, only where it counts (2 points)
#
# The MLM head turns each hidden vector $h$ (size $H$) into $V$ logits, $h W^\top + b$ with
# $W$ of shape $(V, H)$ (the word-embedding matrix: the weights are tied). With
# $V = 30{,}522$ this projection is the most expensive step of the head, yet only ~15% of the
# positions carry a label. The original release therefore **gathers** the $N$ labelled
# positions first and projects only those.
#
# Write `mlm_loss_gathered(hidden_states, labels, decoder_weight, decoder_bias)` for
# `hidden_states` `(B, L, H)`, `labels` `(B, L)` (-100 = not predicted), `decoder_weight`
# `(V, H)`, `decoder_bias` `(V,)`. Return `(loss, logits)`: `logits` of shape `(N, V)` at the
# labelled positions, in row-major order (the order of `labels[labels != -100]`), and the mean
# cross-entropy over them. It must equal the loss computed on all $B \cdot L$ positions with
# `ignore_index=-100`.
#
# *Hint:* boolean indexing `hidden_states[labels != -100]` gives `(N, H)`. You may use your
# `cross_entropy` from part 2.

# %% [solution] id=mlm
def mlm_loss_gathered(hidden_states, labels, decoder_weight, decoder_bias):
    """-> (mean loss over the labelled positions, logits (N, V) at those positions)."""
    ### BEGIN SOLUTION
    keep = labels != IGNORE_INDEX  # (B, L)
    hidden = hidden_states[keep]  # (N, H)
    logits = hidden @ decoder_weight.T + decoder_bias  # (N, V)
    return cross_entropy(logits, labels[keep]), logits
    ### END SOLUTION

# %% [tests] id=mlm_tests points=2
def reference_mlm_loss(hidden_states, labels, decoder_weight, decoder_bias):
    all_logits = hidden_states @ decoder_weight.T + decoder_bias  # (B, L, V): every position
    loss = F.cross_entropy(all_logits.reshape(-1, all_logits.shape[-1]), labels.reshape(-1))
    return loss, all_logits[labels != IGNORE_INDEX]


EARLIER = {"log_softmax": "bertcourse.losses.log_softmax", "cross_entropy": "bertcourse.losses.cross_entropy"}
FORBID_MLM = ("cross_entropy", "gather")
hidden = grading.randn(2, 6, 8, seed=1)
labels = torch.tensor([[IGNORE_INDEX, 3, IGNORE_INDEX, IGNORE_INDEX, 17, IGNORE_INDEX], [5, IGNORE_INDEX, IGNORE_INDEX, 0, 9, 12]])
W, b = grading.randn(20, 8, seed=2), grading.randn(20, seed=3)
grading.check_close(mlm_loss_gathered, reference_mlm_loss, hidden, labels, W, b, forbid=FORBID_MLM, use_reference=EARLIER, mistakes="ch04:mlm")
### BEGIN HIDDEN TESTS
hidden = grading.randn(3, 16, 12, seed=4, dtype=torch.float64)
labels = torch.where(grading.randint(0, 100, 3, 16, seed=5) < 15, grading.randint(0, 50, 3, 16, seed=6), IGNORE_INDEX)
labels[1] = IGNORE_INDEX  # a sequence without any prediction
W, b = grading.randn(50, 12, seed=7, dtype=torch.float64), grading.randn(50, seed=8, dtype=torch.float64)
grading.check_close(mlm_loss_gathered, reference_mlm_loss, hidden, labels, W, b, forbid=FORBID_MLM, use_reference=EARLIER, mistakes="ch04:mlm")
# a position predicted with certainty (its loss is exactly 0.0 in float32) still counts
hidden, W, b = grading.randn(2, 5, 8, seed=12), grading.randn(30, 8, seed=13), grading.randn(30, seed=14)
labels = torch.tensor([[IGNORE_INDEX, 7, IGNORE_INDEX, 3, IGNORE_INDEX], [11, IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX, 29]])
hidden[0, 1] = 1000.0 * W[7]  # the logit of class 7 exceeds the others by hundreds
grading.check_close(mlm_loss_gathered, reference_mlm_loss, hidden, labels, W, b, forbid=FORBID_MLM, use_reference=EARLIER, mistakes="ch04:mlm")
### END HIDDEN TESTS

# %% [markdown] id=outro
# ## Going further (not graded)
#
# - For BERT-base at length 128, how many multiply-adds does the vocabulary projection cost
#   for all positions, and for 15% of them?
# - Why does PyTorch return NaN, and not 0, when every target is ignored?

# %% [scratch]
