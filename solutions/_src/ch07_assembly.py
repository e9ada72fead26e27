# Source of solutions/ch07_assembly/assembly.ipynb (build: python solutions/_build_notebooks.py)

# %% [markdown] id=intro
# # Exercises 7: The assembled model
#
# Time to put the pieces together. You will write the input embeddings, one post-LN encoder
# layer from its parts, the parameter count of a configuration by formula, and one
# pre-training step of `BertForPreTraining`. Chapter 7 of the book ("The whole model")
# explains the architecture.
#
# **How to work.** Write your code where a cell says `# YOUR CODE HERE`, replacing the
# `raise NotImplementedError()`, then run the test cell below it (`OK ...` or a message).
# Your functions receive bertcourse modules and must reproduce their `forward` from their
# sub-modules; those `forward` methods (and, in part 3, the model constructors) are disabled
# while your answers are checked. Hidden tests use other sizes and inputs. Check everything
# with **Validate** (or `nbgrader validate`).
#
# Shapes: B batch, L sequence length, H hidden size, I intermediate size, V vocabulary size.

# %% [code] id=setup
import copy

import torch
import torch.nn.functional as F

from bertcourse import grading
from bertcourse.config import IGNORE_INDEX, BertConfig
from bertcourse.embeddings import BertEmbeddings
from bertcourse.encoder import BertLayer
from bertcourse.masks import extended_attention_mask
from bertcourse.model import BertForPreTraining, BertModel


def small_config(**changes):
    """A small BERT without dropout (so that results do not depend on random dropout masks)."""
    base = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                max_position_embeddings=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation="eager")
    return BertConfig(**{**base, **changes})


def randomize(module, seed):
    """Draw every parameter at random (LayerNorm and biases too, so that every mistake shows)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return module.eval()


# %% [markdown] id=embed_text
# ## Part 1: the input embeddings (2 points)
#
# BERT's input vector for token $i$ is the sum of three learned embeddings, then LayerNorm
# (and dropout, a no-op in evaluation):
#
# $$e_i = \mathrm{LayerNorm}\big(E_{\text{word}}[x_i] + E_{\text{pos}}[i] + E_{\text{type}}[t_i]\big),
# \qquad i = 0, \dots, L - 1.$$
#
# The positions are a learned table (`max_position_embeddings` rows), not the sinusoids of the
# original Transformer. Write `embed(embeddings, input_ids, token_type_ids)` for a
# `bertcourse.embeddings.BertEmbeddings`, using its `word_embeddings`, `position_embeddings`,
# `token_type_embeddings` (three `nn.Embedding`), `layer_norm` and `dropout`; `input_ids` and
# `token_type_ids` are `(B, L)`; return `(B, L, H)`.
#
# *Hint:* `torch.arange(L)` gives the positions; an `(L, H)` tensor broadcasts over the batch.

# %% [solution] id=embed
def embed(embeddings, input_ids, token_type_ids):
    """(B, L) ids and token types -> (B, L, H) input vectors."""
    ### BEGIN SOLUTION
    positions = torch.arange(input_ids.shape[1])  # (L,)
    x = (
        embeddings.word_embeddings(input_ids)
        + embeddings.position_embeddings(positions)
        + embeddings.token_type_embeddings(token_type_ids)
    )  # (B, L, H)
    return embeddings.dropout(embeddings.layer_norm(x))
    ### END SOLUTION

# %% [tests] id=embed_tests points=2
def reference_embed(embeddings, input_ids, token_type_ids):
    return embeddings(input_ids, token_type_ids)


embeddings = randomize(BertEmbeddings(small_config()), seed=1)
ids = grading.randint(0, 100, 2, 7, seed=2)
types = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1]])
grading.check_close(embed, reference_embed, embeddings, ids, types, forbid="embeddings")
### BEGIN HIDDEN TESTS
embeddings = randomize(BertEmbeddings(small_config(hidden_size=24, type_vocab_size=3)), seed=3)
grading.check_close(embed, reference_embed, embeddings, grading.randint(0, 100, 3, 16, seed=4), grading.randint(0, 3, 3, 16, seed=5), forbid="embeddings")
grading.check_close(embed, reference_embed, embeddings, grading.randint(0, 100, 1, 1, seed=6), torch.zeros(1, 1, dtype=torch.long), forbid="embeddings")
### END HIDDEN TESTS

# %% [markdown] id=layer_text
# ## Part 2: one encoder layer, post-LN (3 points)
#
# A BERT layer has two sublayers, each followed by a residual connection and then LayerNorm
# ("post-LN", as in the original Transformer):
#
# $$h' = \mathrm{LN}_1\big(h + \mathrm{Dropout}(\mathrm{MultiHead}(h)\, W_O + b_O)\big), \qquad
# h'' = \mathrm{LN}_2\big(h' + \mathrm{Dropout}(\mathrm{GELU}(h' W_1 + b_1)\, W_2 + b_2)\big).$$
#
# Write `encoder_layer(layer, hidden_states, bias=None)` for a `bertcourse.encoder.BertLayer`:
#
# - `layer.attention.self_attn(hidden_states, bias)` returns `(context, probs)`: the merged
#   multi-head context `(B, L, H)` (you wrote it in exercises 1);
# - `layer.attention.output.dense`, `.dropout`, `.layer_norm`: $W_O$, the dropout, $\mathrm{LN}_1$;
# - `layer.intermediate.dense`: $W_1$ (H → I); the activation is GELU, exact (erf) form;
# - `layer.output.dense`, `.dropout`, `.layer_norm`: $W_2$ (I → H), the dropout, $\mathrm{LN}_2$.
#
# Return $h''$, shape `(B, L, H)`. (Many later models use "pre-LN", $h + f(\mathrm{LN}(h))$;
# BERT does not.)

# %% [solution] id=layer
def encoder_layer(layer, hidden_states, bias=None):
    """One post-LN BERT layer: (B, L, H) -> (B, L, H)."""
    ### BEGIN SOLUTION
    context, _ = layer.attention.self_attn(hidden_states, bias)  # (B, L, H)
    out = layer.attention.output
    h = out.layer_norm(hidden_states + out.dropout(out.dense(context)))
    inner = F.gelu(layer.intermediate.dense(h))  # (B, L, I)
    return layer.output.layer_norm(h + layer.output.dropout(layer.output.dense(inner)))
    ### END SOLUTION

# %% [tests] id=layer_tests points=3
def reference_layer(layer, hidden_states, bias=None):
    return layer(hidden_states, bias)[0]


layer = randomize(BertLayer(small_config()), seed=1)
x = grading.randn(2, 5, 32, seed=2)
grading.check_close(encoder_layer, reference_layer, layer, x, forbid="layer")
### BEGIN HIDDEN TESTS
bias = extended_attention_mask(torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]))
grading.check_close(encoder_layer, reference_layer, layer, x, bias, forbid="layer")
layer = randomize(BertLayer(small_config(hidden_size=24, num_attention_heads=3, intermediate_size=40)), seed=3)
grading.check_close(encoder_layer, reference_layer, layer, grading.randn(3, 9, 24, seed=4, scale=3.0), forbid="layer")
### END HIDDEN TESTS

# %% [markdown] id=count_text
# ## Part 3: how many parameters? (1 point)
#
# Count the parameters of `BertModel(config)` (embeddings, encoder layers and pooler; no
# pre-training heads) **by formula**, from the configuration alone: the model constructors are
# disabled while your answer is checked. Every `nn.Linear(n_in, n_out)` has
# $n_{\text{in}} n_{\text{out}} + n_{\text{out}}$ parameters, every `nn.LayerNorm(H)` has $2H$,
# an `nn.Embedding(n, H)` has $nH$. Write `count_parameters(config)` returning an `int`; for
# BERT-base it gives about 110 million.
#
# *Hint:* per layer: Q, K, V and the attention output projection (4 of H → H), a LayerNorm,
# H → I, I → H, another LayerNorm. The pooler is one more H → H.

# %% [solution] id=count
def count_parameters(config):
    """Number of parameters of BertModel(config), by formula."""
    ### BEGIN SOLUTION
    H, I = config.hidden_size, config.intermediate_size
    embeddings = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * H + 2 * H
    layer = 4 * (H * H + H) + 2 * H + (H * I + I) + (I * H + H) + 2 * H
    pooler = H * H + H
    return embeddings + config.num_hidden_layers * layer + pooler
    ### END SOLUTION

# %% [tests] id=count_tests points=1
def reference_count(config):
    return sum(p.numel() for p in BertModel(config).parameters())


grading.check_equal(count_parameters, reference_count, BertConfig.tiny(vocab_size=1000), forbid="modules")
### BEGIN HIDDEN TESTS
grading.check_equal(count_parameters, reference_count, small_config(type_vocab_size=3, num_hidden_layers=3, intermediate_size=50), forbid="modules")
grading.check_equal(count_parameters, reference_count, small_config(vocab_size=7, hidden_size=12, num_attention_heads=2, max_position_embeddings=9), forbid="modules")
### END HIDDEN TESTS

# %% [markdown] id=step_text
# ## Part 4: one pre-training step (3 points)
#
# One step of BERT's pre-training, given a batch (a dict with `input_ids`, `token_type_ids`,
# `attention_mask`, `labels` (-100 where not predicted) and `next_sentence_label`):
#
# 1. zero the gradients (`optimizer.zero_grad()`), **first**;
# 2. run the model on the whole batch: `model(**batch)` returns an output whose `.loss` is the
#    MLM loss plus the NSP loss;
# 3. back-propagate the loss;
# 4. clip the gradients to a global norm of `max_grad_norm`
#    (`torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)`), as the original;
# 5. take the optimizer step.
#
# Write `pretraining_step(model, batch, optimizer, max_grad_norm=1.0)` that does this and
# returns the loss as a Python float (its value before the step).

# %% [solution] id=step
def pretraining_step(model, batch, optimizer, max_grad_norm=1.0):
    """zero_grad, forward, backward, clip, step -> the loss (float)."""
    ### BEGIN SOLUTION
    optimizer.zero_grad()
    loss = model(**batch).loss  # MLM + NSP
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()
    ### END SOLUTION

# %% [tests] id=step_tests points=3
def make_batch(config, batch_size, length, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, config.vocab_size, (batch_size, length), generator=g)
    labels = torch.where(torch.rand(ids.shape, generator=g) < 0.3, ids, IGNORE_INDEX)
    ids = torch.where(labels != IGNORE_INDEX, 3, ids)  # 3 plays [MASK]
    return {
        "input_ids": ids,
        "token_type_ids": (torch.arange(length) >= length // 2).long().expand(batch_size, length),
        "attention_mask": torch.ones(batch_size, length, dtype=torch.long),
        "labels": labels,
        "next_sentence_label": torch.randint(0, 2, (batch_size,), generator=g),
    }


config = small_config()
torch.manual_seed(0)
model = BertForPreTraining(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
batch = make_batch(config, 4, 12, seed=1)
with torch.no_grad():
    expected_loss = copy.deepcopy(model)(**batch).loss.item()
before = copy.deepcopy(model.state_dict())
loss = grading.run(pretraining_step, model, batch, optimizer)
grading.check_value(loss, expected_loss, "the returned loss (MLM + NSP, before the step)")
changed = sum(not torch.equal(before[k], v) for k, v in model.state_dict().items())
grading.check_true(changed > 0, "no parameter changed: did the optimizer step run?")
print("OK pretraining_step: loss", round(loss, 4))
### BEGIN HIDDEN TESTS
def reference_step(model, batch, optimizer, max_grad_norm=1.0):
    optimizer.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


torch.manual_seed(1)
model = BertForPreTraining(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
for p in model.parameters():
    p.grad = torch.randn_like(p)  # stale gradients from an earlier step: must be zeroed first
ref_model, ref_optimizer = copy.deepcopy((model, optimizer))
for step in range(2):
    batch = make_batch(config, 4, 12, seed=2 + step)
    expected = reference_step(ref_model, batch, ref_optimizer, 0.05)
    got = grading.run(pretraining_step, model, batch, optimizer, 0.05)
    grading.check_value(got, expected, f"the loss at step {step + 1}", rtol=1e-4, atol=1e-5)
    grading.check_value(dict(model.named_parameters()), dict(ref_model.named_parameters()), f"the parameters after step {step + 1} (max_grad_norm=0.05)", rtol=1e-4, atol=1e-6)
print("OK pretraining_step: 2 steps")
### END HIDDEN TESTS

# %% [markdown] id=outro
# ## Going further (not graded)
#
# - Run `count_parameters(BertConfig.base())` and `BertConfig.large()`: where do most of the
#   parameters sit, embeddings or layers?
# - Train the small model for a few hundred steps with `pretraining_step` on one batch: the
#   loss should go to near 0 (it can memorise it). What does that tell you about a bug-free
#   training loop?

# %% [scratch]
