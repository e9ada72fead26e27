# Source of solutions/ch08_finetuning/finetuning.ipynb (build: python solutions/_build_notebooks.py)

# %% [markdown] id=intro
# # Exercises 8: Fine-tuning
#
# Fine-tuning adds one small layer to a pretrained BERT and trains everything on labelled
# examples. You will write the classification head and its loss, one fine-tuning step that
# gives exactly what transformers' `BertForSequenceClassification` gives on the same weights,
# and an evaluation loop that measures a model without changing it. The book's chapter
# "Fine-tuning" explains why each step is there.
#
# **How to work.** Write your code where a cell says `# YOUR CODE HERE`, replacing the
# `raise NotImplementedError()`, then run the test cell below it (`OK ...` or a message).
# Your functions receive tensors, numbers and bertcourse models, and return tensors, numbers or
# dicts of them. Hidden tests use other sizes and inputs. Check everything with **Validate**
# (or `nbgrader validate`).
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
# Shapes: B batch, L sequence length, H hidden size, C number of labels, N examples.

# %% [code] id=setup
import copy

import torch
import torch.nn.functional as F

from bertcourse import grading
from bertcourse.config import BertConfig
from bertcourse.model import BertForSequenceClassification


def small_config(**changes):
    """A small BERT without dropout (so that results do not depend on random dropout masks)."""
    base = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                max_position_embeddings=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation="eager")
    return BertConfig(**{**base, **changes})


def randomize(module, seed, scale=0.3):
    """Draw every parameter at random (LayerNorm and biases too, so that every mistake shows)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * scale)
    return module


def make_batch(config, batch_size, length, seed, pad=True):
    """A batch as a dict: random ids, the last rows padded, one class id in {0, 1} per row."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, config.vocab_size, (batch_size, length), generator=g)
    mask = torch.ones(batch_size, length, dtype=torch.long)
    if pad:
        for row in range(1, batch_size):
            mask[row, max(2, length - 2 * row):] = 0
    return {
        "input_ids": ids * mask,
        "token_type_ids": torch.zeros_like(ids),
        "attention_mask": mask,
        "labels": torch.randint(0, 2, (batch_size,), generator=g),
    }


# %% [markdown] id=head_text
# ## Part 1: the classification head and its loss (3 points)
#
# `BertForSequenceClassification` reads one vector per sequence, the pooled `[CLS]` vector
# $p = \tanh(W_p h_{[CLS]} + b_p)$ of shape `(B, H)`, and maps it to $C$ scores with one linear
# layer (dropout comes before it during training; leave it out here):
#
# $$z = p\,W^\top + b, \qquad W \in \mathbb{R}^{C \times H},\ b \in \mathbb{R}^{C}.$$
#
# The loss depends on the task, by transformers' rule:
#
# - $C > 1$ and integer labels `(B,)` (class ids): **classification**, the mean cross-entropy
#   $-\frac1B \sum_b \log \mathrm{softmax}(z_b)_{y_b}$;
# - $C = 1$ and float labels `(B,)`: **regression** (a similarity score, a rating), the mean
#   squared error $\frac1B \sum_b (z_{b,0} - y_b)^2$.
#
# Write `classifier_head(pooled, weight, bias, labels)` returning `(logits, loss)`: logits
# `(B, C)` and the loss as a 0-dimensional tensor, both in the dtype of `pooled` (float64 in,
# float64 out; regression labels may come in another float dtype). You may use
# `F.cross_entropy` and `F.mse_loss`, but not `BertForSequenceClassification` itself. The
# hidden tests include logits in the thousands (a confident prediction whose loss is exactly 0
# next to a confident mistake), float64 inputs and a batch of one; do not modify the inputs.
#
# *Hint:* compare the shapes of `z` and `y` in the regression case before subtracting.

# %% [solution] id=head
def classifier_head(pooled, weight, bias, labels):
    """(B, H) pooled vectors, (C, H) weight, (C,) bias, (B,) labels -> ((B, C) logits, loss)."""
    ### BEGIN SOLUTION
    logits = pooled @ weight.T + bias  # (B, C)
    if logits.shape[1] == 1:  # regression: one number per sequence
        loss = F.mse_loss(logits[:, 0], labels.to(logits.dtype))
    else:
        loss = F.cross_entropy(logits, labels)
    return logits, loss
    ### END SOLUTION

# %% [tests] id=head_tests points=3
def reference_head(pooled, weight, bias, labels):
    logits = F.linear(pooled, weight, bias)
    if weight.shape[0] == 1:
        return logits, F.mse_loss(logits.view(-1), labels.view(-1).to(logits.dtype))
    return logits, F.cross_entropy(logits, labels)


HEAD_FORBID = ["bertcourse.model.BertForSequenceClassification.forward", "bertcourse.model.sequence_classification_loss"]
pooled = torch.tanh(grading.randn(4, 8, seed=1, scale=2.0))
HEAD = dict(forbid=HEAD_FORBID, mistakes="ch08:head")
grading.check_close(classifier_head, reference_head, pooled, grading.randn(3, 8, seed=2), grading.randn(3, seed=3), torch.tensor([0, 2, 1, 2]), **HEAD)
### BEGIN HIDDEN TESTS
HEAD["inputs_unchanged"] = True
grading.check_close(classifier_head, reference_head, torch.tanh(grading.randn(6, 12, seed=4)), grading.randn(2, 12, seed=5), grading.randn(2, seed=6), torch.tensor([1, 0, 0, 1, 1, 0]), **HEAD)
grading.check_close(classifier_head, reference_head, torch.tanh(grading.randn(5, 12, seed=7)), grading.randn(1, 12, seed=8), grading.randn(1, seed=9), grading.randn(5, seed=10), **HEAD)
grading.check_close(classifier_head, reference_head, torch.tanh(grading.randn(1, 8, seed=11)), grading.randn(4, 8, seed=12), grading.randn(4, seed=13), torch.tensor([3]), **HEAD)
# A batch of one in regression: (1, 1) logits against (1,) labels.
grading.check_close(classifier_head, reference_head, torch.tanh(grading.randn(1, 8, seed=14)), grading.randn(1, 8, seed=15), grading.randn(1, seed=16), grading.randn(1, seed=17), **HEAD)
# float64 in, float64 out; regression labels in float32 with float64 logits.
pooled64 = torch.tanh(grading.randn(5, 12, seed=18)).double()
grading.check_close(classifier_head, reference_head, pooled64, grading.randn(3, 12, seed=19).double(), grading.randn(3, seed=20).double(), torch.tensor([2, 0, 1, 1, 0]), **HEAD)
grading.check_close(classifier_head, reference_head, pooled64, grading.randn(1, 12, seed=21).double(), grading.randn(1, seed=22).double(), grading.randn(5, seed=23), **HEAD)
# Regression labels in every float dtype, for pooled in each dtype the statement names: the labels
# are cast to the dtype of pooled (float64 labels must not make a float32 model's loss float64;
# promotion hides a missing cast only when pooled is the wider one).
for pooled_dtype in (torch.float32, torch.float64):
    for label_dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        grading.check_close(classifier_head, reference_head, torch.tanh(grading.randn(5, 12, seed=24)).to(pooled_dtype), grading.randn(1, 12, seed=25).to(pooled_dtype), grading.randn(1, seed=26).to(pooled_dtype), grading.randn(5, seed=27).to(label_dtype), **HEAD)
# Logits in the thousands: rows 0-1 confident and right (loss exactly 0), row 2 confident and wrong.
weight = torch.tensor([[3000.0, 0.0], [-3000.0, 0.0], [0.0, 2000.0]])
extreme_pooled = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [1.0, 0.0]])
grading.check_close(classifier_head, reference_head, extreme_pooled[:2], weight, torch.zeros(3), torch.tensor([0, 1]), **HEAD)
grading.check_close(classifier_head, reference_head, extreme_pooled, weight, torch.zeros(3), torch.tensor([0, 1, 2]), **HEAD)
### END HIDDEN TESTS

# %% [markdown] id=step_text
# ## Part 2: one fine-tuning step (3 points)
#
# One step of fine-tuning on a batch (a dict with `input_ids`, `token_type_ids`,
# `attention_mask` and `labels`), for a `BertForSequenceClassification`:
#
# 1. put the model in training mode (`model.train()`: dropout on) and zero the gradients left
#    by any earlier step (`model.zero_grad()`), **first**;
# 2. run the model on the batch: `model(**batch)` returns an output whose `.loss` is the mean
#    cross-entropy of the batch;
# 3. back-propagate the loss;
# 4. clip the gradients to a global norm of `max_grad_norm`
#    (`torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)`), as BERT does;
# 5. move every parameter against its gradient: $\theta \leftarrow \theta - \mathrm{lr}\cdot g$
#    (plain gradient descent, so that the step shows the gradient itself; the book's
#    fine-tuning uses AdamW). Do it under `torch.no_grad()`, or with `torch.optim.SGD`.
#
# Write `fine_tuning_step(model, batch, lr, max_grad_norm=1.0)` that updates `model` in place
# and returns the loss as a Python float (its value before the step). The test compares your
# step with transformers' own `BertForSequenceClassification` holding the same weights.

# %% [solution] id=step
def fine_tuning_step(model, batch, lr, max_grad_norm=1.0):
    """train mode, zero_grad, forward, backward, clip, gradient step -> the loss (float)."""
    ### BEGIN SOLUTION
    model.train()
    model.zero_grad()
    loss = model(**batch).loss  # mean cross-entropy of the batch
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p -= lr * p.grad
    return loss.item()
    ### END SOLUTION

# %% [tests] id=step_tests points=3
def transformers_step(model, batch, lr, max_grad_norm=1.0):
    """The same step on transformers' BertForSequenceClassification with the same weights; the
    loss and bertcourse-named parameters after it."""
    from bertcourse.hf import from_hf, to_hf

    hf = to_hf(model).train()
    optimizer = torch.optim.SGD(hf.parameters(), lr=lr)
    loss = hf(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(hf.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item(), dict(from_hf(hf).named_parameters())


def step_outcome(model, batch, lr, max_grad_norm, grads):
    """The learner's step on a model holding `grads`: {"loss": returned, "parameters": after}."""
    for name, p in model.named_parameters():
        p.grad = grads[name].clone() if name in grads else None
    loss = grading.run(fine_tuning_step, model, batch, lr, max_grad_norm)
    return {"loss": loss, "parameters": dict(model.named_parameters())}


def check_step(model, batch, lr, max_grad_norm, what):
    """One fine_tuning_step against transformers' on the same weights: the returned loss (before
    the step) and the parameters after it; a known mistake of the step is named."""
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    before = (copy.deepcopy(model), batch, lr, max_grad_norm, grads)  # deepcopy drops .grad
    expected_loss, expected_params = transformers_step(copy.deepcopy(model), batch, lr, max_grad_norm)
    got = step_outcome(model, batch, lr, max_grad_norm, grads)
    grading.check_value(got, {"loss": expected_loss, "parameters": expected_params}, what, rtol=1e-4, atol=1e-5, mistakes="ch08:step", args=before, call=step_outcome)
    return got["loss"]


config = small_config()
model = randomize(BertForSequenceClassification(config), seed=1)
loss = check_step(model, make_batch(config, 4, 10, seed=2), 0.1, 1.0, "loss (before the step) and parameters after it (lr=0.1)")
print("OK fine_tuning_step: loss", round(loss, 4))
### BEGIN HIDDEN TESTS
config = small_config(hidden_size=24, num_attention_heads=3, intermediate_size=40, num_hidden_layers=1)
model = randomize(BertForSequenceClassification(config), seed=3, scale=0.5)
for p in model.parameters():
    p.grad = torch.randn_like(p)  # stale gradients from an earlier step: must be zeroed first
for step in range(2):
    check_step(model, make_batch(config, 5, 12, seed=4 + step), 0.5, 0.05, f"loss and parameters at step {step + 1} (lr=0.5, max_grad_norm=0.05)")
print("OK fine_tuning_step: 2 steps, stale gradients, clipping")
# The model arrives in eval mode, with a classifier dropout of 1: in training mode the dropout
# zeroes the pooled vector (deterministic: no random mask to match), in eval mode it does not.
model = randomize(BertForSequenceClassification(small_config(), classifier_dropout=1.0), seed=6).eval()
check_step(model, make_batch(model.config, 3, 9, seed=7), 0.2, 1.0, "loss and parameters of a model that arrived in eval mode (model.train() first?)")
print("OK fine_tuning_step: training mode set")
### END HIDDEN TESTS

# %% [markdown] id=eval_text
# ## Part 3: the evaluation loop (2 points)
#
# Measuring a model must not change it, and must measure the model you will use, without
# dropout. Write `evaluate(model, batches)` for a list of batches (dicts as in part 2, of
# **different sizes**) that
#
# 1. switches dropout off with `model.eval()`, and turns it back on at the end if the model
#    came in training mode (`model.training` tells);
# 2. runs every batch under `torch.no_grad()`: no graph is recorded (less memory, faster), and
#    autograd is as it was once `evaluate` returns (a `with torch.no_grad():` block, not a
#    `torch.set_grad_enabled(False)` left on: the training that goes on needs its gradients);
# 3. returns a dict with `"logits"`: the `(N, C)` logits of all N examples in order,
#    `"loss"`: the mean cross-entropy over the N **examples** (a Python float), and
#    `"accuracy"`: the fraction of examples whose largest logit is their label (a float).
#
# *Hint:* the mean of the batch means is not the mean over examples when the batches differ in
# size; `F.cross_entropy(..., reduction="sum")` gives a batch's total.

# %% [solution] id=eval
def evaluate(model, batches):
    """{"logits": (N, C), "loss": mean cross-entropy per example, "accuracy": float}."""
    ### BEGIN SOLUTION
    was_training = model.training
    model.eval()
    logits, labels = [], []
    with torch.no_grad():
        for batch in batches:
            out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
            logits.append(out.logits)  # (B, C)
            labels.append(batch["labels"])
    model.train(was_training)
    logits, labels = torch.cat(logits), torch.cat(labels)  # (N, C), (N,)
    loss = F.cross_entropy(logits, labels).item()
    accuracy = (logits.argmax(-1) == labels).float().mean().item()
    return {"logits": logits, "loss": loss, "accuracy": accuracy}
    ### END SOLUTION

# %% [tests] id=eval_tests points=2
from bertcourse.grading.probe import measure  # noqa: E402


def reference_evaluate(model, batches):
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(**{k: v for k, v in b.items() if k != "labels"}).logits for b in batches])
    labels = torch.cat([b["labels"] for b in batches])
    return {"logits": logits, "loss": F.cross_entropy(logits, labels).item(),
            "accuracy": (logits.argmax(-1) == labels).float().mean().item()}


def check_evaluate(model, batches):
    """The learner's evaluate against the reference, no autograd graph recorded or returned,
    autograd enabled after it as before, and the model as it was: same weights, no gradients,
    the same mode. Autograd's state is measured where the learner's function runs
    (probe.measure: the grader's referee runs the test outside the learner's process)."""
    before, was_training = copy.deepcopy(model.state_dict()), model.training
    args = (copy.deepcopy(model), batches)
    expected = reference_evaluate(copy.deepcopy(model), batches)
    measured = measure(evaluate, model, batches)  # restores autograd's mode afterwards
    got = measured.result
    grad_before, grad_after = measured.grad_enabled
    grading.check_true(grad_after == grad_before, "evaluate left gradients disabled after it returned: training after it would learn nothing", hint="use `with torch.no_grad():`, which restores autograd at the end of the block")
    grading.check_true(isinstance(got, dict) and torch.is_tensor(got.get("logits")), "evaluate must return a dict with a tensor under 'logits'")
    grading.check_true(not any(measured.graph) and not got["logits"].requires_grad, "the logits carry an autograd graph: run the model under torch.no_grad()")
    grading.check_true(measured.saved == 0, "evaluate recorded an autograd graph (detached afterwards?): run the model under torch.no_grad()")
    grading.check_value(got, expected, "evaluate(model, batches)", rtol=1e-4, atol=1e-5, mistakes="ch08:evaluate", args=args, call=lambda m, b: grading.run(evaluate, m, b))
    grading.check_value(model.state_dict(), before, "the model's weights after evaluate (it must not change them)", rtol=0.0, atol=0.0)
    grading.check_true(all(p.grad is None for p in model.parameters()), "evaluate left gradients in the model")
    grading.check_true(model.training == was_training, f"the model came in {'training' if was_training else 'eval'} mode and left in {'training' if model.training else 'eval'} mode: restore its mode at the end")


# Dropout 0.5, and the model arrives in training mode: without model.eval() the logits are noisy.
config = small_config(hidden_dropout_prob=0.5, attention_probs_dropout_prob=0.5)
model = randomize(BertForSequenceClassification(config), seed=5).train()
check_evaluate(model, [make_batch(config, 4, 8, seed=6), make_batch(config, 3, 11, seed=7)])
print("OK evaluate: 2 batches of 4 and 3 examples")
### BEGIN HIDDEN TESTS
model = randomize(BertForSequenceClassification(config), seed=8, scale=0.6).train()
check_evaluate(model, [make_batch(config, 1, 5, seed=9), make_batch(config, 6, 12, seed=10), make_batch(config, 2, 7, seed=11, pad=False)])
print("OK evaluate: batches of 1, 6 and 2 examples")
# A model that comes in eval mode stays there; a single batch of one example.
model = randomize(BertForSequenceClassification(config), seed=12).eval()
check_evaluate(model, [make_batch(config, 1, 6, seed=13)])
print("OK evaluate: eval mode kept, one batch of one")
### END HIDDEN TESTS

# %% [markdown] id=outro
# ## Going further (not graded)
#
# - Run `fine_tuning_step` a few hundred times on one batch of the small model: the loss should
#   go to near 0. Then run `evaluate` on another batch: what does memorising one batch give?
# - Replace the gradient step of part 2 by `torch.optim.AdamW(model.parameters(), lr=...)`
#   created once outside the loop. Why can't the optimizer be created inside the step function
#   (look at what Adam keeps between steps)?

# %% [scratch]
