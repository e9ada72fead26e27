# Source of solutions/ch07_assembly/assembly.ipynb (build: python solutions/_build_notebooks.py)

# %% [markdown] id=intro
# # Exercises 7: The assembled model
#
# Time to put the pieces together. You will write the input embeddings, one post-LN encoder
# layer from its parts, the MLM head and the NSP head, the parameter count of a configuration
# by formula, one pre-training step of `BertForPreTraining`, and its whole forward pass. Chapter 7 of the book ("The whole model")
# explains the architecture.
#
# **How to work.** Write your code where a cell says `# YOUR CODE HERE`, replacing the
# `raise NotImplementedError()`, then run the test cell below it (`OK ...` or a message).
# Your functions receive bertcourse modules and must reproduce their `forward` from their
# sub-modules; those `forward` methods (and, in part 5, the model constructors) are disabled
# while your answers are checked. Hidden tests use other sizes and inputs. Check everything
# with **Validate** (or `nbgrader validate`).
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
# In training mode the module's `dropout` is active (the hidden tests check it), in
# evaluation mode it does nothing.

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
grading.check_close(embed, reference_embed, embeddings, ids, types, forbid="embeddings", mistakes="ch07:embed")
### BEGIN HIDDEN TESTS
embeddings = randomize(BertEmbeddings(small_config(hidden_size=24, type_vocab_size=3)), seed=3)
grading.check_close(embed, reference_embed, embeddings, grading.randint(0, 100, 3, 16, seed=4), grading.randint(0, 3, 3, 16, seed=5), forbid="embeddings", mistakes="ch07:embed")
grading.check_close(embed, reference_embed, embeddings, grading.randint(0, 100, 1, 1, seed=6), torch.zeros(1, 1, dtype=torch.long), forbid="embeddings", mistakes="ch07:embed")
# training mode: the dropout after LayerNorm is active (checked by its statistics: the mask is random)
training = randomize(BertEmbeddings(small_config(hidden_dropout_prob=0.5)), seed=7).train()
ids = grading.randint(0, 100, 8, 16, seed=8)
out = grading.run(embed, training, ids, torch.zeros_like(ids), forbid="embeddings")
clean = reference_embed(copy.deepcopy(training).eval(), ids, torch.zeros_like(ids))
dropped = out == 0
grading.check_proportion(dropped.sum(), out.numel(), 0.5, "share of the values dropped in training mode (dropout 0.5)")
grading.check_value(out[~dropped], clean[~dropped] / 0.5, "the kept values in training mode (scaled by 1 / (1 - p))", atol=1e-5, rtol=1e-4)
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
# Return $h''$, shape `(B, L, H)`. In training mode the two dropouts are active (the hidden tests
# check it); in evaluation mode they do nothing. (Many later models use "pre-LN", $h + f(\mathrm{LN}(h))$;
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
grading.check_close(encoder_layer, reference_layer, layer, x, forbid="layer", mistakes="ch07:layer")
### BEGIN HIDDEN TESTS
bias = extended_attention_mask(torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]))
grading.check_close(encoder_layer, reference_layer, layer, x, bias, forbid="layer", mistakes="ch07:layer")
layer = randomize(BertLayer(small_config(hidden_size=24, num_attention_heads=3, intermediate_size=40)), seed=3)
grading.check_close(encoder_layer, reference_layer, layer, grading.randn(3, 9, 24, seed=4, scale=3.0), forbid="layer", mistakes="ch07:layer")
# training mode with dropout 1 - 1e-9: every dropout zeroes its input (that one of the ~1,000
# values survives has a chance of about 1e-6), so the result is h' = LN1(h), h'' = LN2(h'):
# deterministic, and it shows whether both dropouts are in their places
ALMOST_ALL = 1.0 - 1e-9
dropping = randomize(BertLayer(small_config(hidden_dropout_prob=ALMOST_ALL, attention_probs_dropout_prob=ALMOST_ALL)), seed=5).train()
grading.check_close(encoder_layer, reference_layer, dropping, grading.randn(2, 5, 32, seed=6), forbid="layer", mistakes="ch07:layer")
### END HIDDEN TESTS

# %% [markdown] id=mlm_head_text
# ## Part 3: the MLM head (2 points)
#
# The masked-language-model head turns a final hidden vector into scores over the vocabulary:
# a transform (dense H → H, GELU in its exact erf form, LayerNorm with the config's
# `layer_norm_eps`), then the **decoder**, whose weight is the word-embedding matrix $E$
# (`(V, H)`, tied: one parameter used twice) plus its own output bias $b$:
#
# $$\text{logits} = \mathrm{LN}\big(\mathrm{GELU}(h W_T + b_T)\big)\, E^\top + b.$$
#
# Write `mlm_head(head, hidden_states)` for a `bertcourse.heads.BertLMPredictionHead` with
# `head.transform.dense`, `head.transform.layer_norm`, `head.decoder.weight` and `head.bias`;
# `hidden_states` is `(..., H)`; return `(..., V)`. Use the modules' own settings (the hidden tests
# use another `layer_norm_eps`). Training updates the word embeddings through this product too,
# so the gradient of the scores must reach $E$: use `head.decoder.weight` itself, not its
# `.data` or `.detach()` (the hidden tests back-propagate through your scores).

# %% [solution] id=mlm_head
def mlm_head(head, hidden_states):
    """(..., H) -> (..., V) vocabulary scores."""
    ### BEGIN SOLUTION
    x = head.transform.layer_norm(F.gelu(head.transform.dense(hidden_states)))  # (..., H)
    return x @ head.decoder.weight.T + head.bias  # (..., V)
    ### END SOLUTION

# %% [tests] id=mlm_head_tests points=2
from transformers.models.bert import modeling_bert  # noqa: E402

from bertcourse.heads import BertLMPredictionHead  # noqa: E402
from bertcourse.hf import config_to_hf  # noqa: E402


def transformers_head(head):
    """transformers' own BertLMPredictionHead with the same weights: the check from outside."""
    theirs = modeling_bert.BertLMPredictionHead(config_to_hf(head.config)).eval()
    with torch.no_grad():
        t = theirs.transform
        t.dense.weight.copy_(head.transform.dense.weight)
        t.dense.bias.copy_(head.transform.dense.bias)
        t.LayerNorm.weight.copy_(head.transform.layer_norm.weight)
        t.LayerNorm.bias.copy_(head.transform.layer_norm.bias)
        theirs.decoder.weight.copy_(head.decoder.weight)
        theirs.bias.copy_(head.bias)
        theirs.decoder.bias.copy_(head.bias)  # standalone, transformers 5 does not tie decoder.bias to .bias
    return lambda hidden_states: theirs(hidden_states)


head = randomize(BertLMPredictionHead(small_config()), seed=11)
h = grading.randn(2, 5, 32, seed=12)
grading.check_close(mlm_head, "bertcourse.heads.BertLMPredictionHead.forward", head, h, forbid=("bertcourse.heads.BertLMPredictionHead.forward",), mistakes="ch07:mlm_head")
### BEGIN HIDDEN TESTS
FORBID_HEAD = ("bertcourse.heads.BertLMPredictionHead.forward", "bertcourse.heads.BertPredictionHeadTransform.forward")
head = randomize(BertLMPredictionHead(small_config(hidden_size=24, vocab_size=50, layer_norm_eps=0.5)), seed=13)
h = grading.randn(3, 24, seed=14, scale=3.0)  # (N, H): gathered positions
grading.check_close(mlm_head, lambda head, h: transformers_head(head)(h), head, h, forbid=FORBID_HEAD, mistakes="ch07:mlm_head")
before = copy.deepcopy(head.state_dict())
grading.run(mlm_head, head, h, forbid=FORBID_HEAD)
grading.check_true(all(torch.equal(before[k], v) for k, v in head.state_dict().items()), "mlm_head changed the head's weights")
# the decoder's weight is the tied word-embedding matrix: a backward through the scores must put
# on it (and on every other weight) the gradient that the module's own forward gives. The
# backward runs where the learner's function runs (probe.measure: in the grader's referee the
# scores arrive as values, without their graph); the gradients are compared here.
from bertcourse.grading.probe import measure  # noqa: E402

TIED = "mlm_head's scores carry no gradient to the tied decoder weight"
upstream = [grading.randn(3, 50, seed=15)]  # d(loss)/d(scores), (N, V)
got = measure(mlm_head, head, h, upstream=upstream, module=0, forbid=FORBID_HEAD)
expected = measure(lambda head, h: head(h), copy.deepcopy(head), h, upstream=upstream, module=0)
grading.check_true(got.graph == (True,), TIED, hint="use head.decoder.weight, not .data or .detach(), and no torch.no_grad()")
grading.check_value(got.grads["decoder.weight"], expected.grads["decoder.weight"], "gradient on the tied decoder weight (the word embeddings)", hint="use head.decoder.weight, not .data or .detach()")
grading.check_value(got.grads, expected.grads, "gradients of the head weights")
### END HIDDEN TESTS

# %% [markdown] id=nsp_text
# ## Part 4: the pooler and the NSP classifier (1 point)
#
# Next-sentence prediction reads one vector per sequence: the **pooler** takes the final
# hidden vector of the first token, `[CLS]`, through a dense layer and **tanh**; a linear
# classifier then gives two scores (index 0: B follows A; index 1: B is random):
#
# $$\text{nsp} = \tanh(h_{[\text{CLS}]} W_P + b_P)\, W_C + b_C.$$
#
# Write `nsp_logits(model, sequence_output)` for a `BertForPreTraining` `model`, using
# `model.bert.pooler.dense` and `model.cls.seq_relationship`; `sequence_output` is `(B, L, H)`;
# return `(B, 2)`.

# %% [solution] id=nsp
def nsp_logits(model, sequence_output):
    """(B, L, H) -> (B, 2) next-sentence scores from the [CLS] vector."""
    ### BEGIN SOLUTION
    pooled = torch.tanh(model.bert.pooler.dense(sequence_output[:, 0]))  # (B, H)
    return model.cls.seq_relationship(pooled)  # (B, 2)
    ### END SOLUTION

# %% [tests] id=nsp_tests points=1
FORBID_NSP = ("bertcourse.heads.BertPooler.forward", "bertcourse.model.BertModel.forward", "bertcourse.model.BertForPreTraining.forward")
model = randomize(BertForPreTraining(small_config()), seed=15)
grading.check_close(nsp_logits, "bertcourse.grading.references.nsp_logits", model, grading.randn(2, 6, 32, seed=16), forbid=FORBID_NSP, mistakes="ch07:nsp")
### BEGIN HIDDEN TESTS
model = randomize(BertForPreTraining(small_config(hidden_size=24, num_attention_heads=3)), seed=17)
grading.check_close(nsp_logits, "bertcourse.grading.references.nsp_logits", model, grading.randn(4, 9, 24, seed=18, scale=2.0), forbid=FORBID_NSP, mistakes="ch07:nsp")
grading.check_close(nsp_logits, "bertcourse.grading.references.nsp_logits", model, grading.randn(1, 1, 24, seed=19), forbid=FORBID_NSP, mistakes="ch07:nsp")
### END HIDDEN TESTS

# %% [markdown] id=count_text
# ## Part 5: how many parameters? (1 point)
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


grading.check_equal(count_parameters, reference_count, BertConfig.tiny(vocab_size=1000), forbid="modules", mistakes="ch07:count")
### BEGIN HIDDEN TESTS
grading.check_equal(count_parameters, reference_count, small_config(type_vocab_size=3, num_hidden_layers=3, intermediate_size=50), forbid="modules", mistakes="ch07:count")
grading.check_equal(count_parameters, reference_count, small_config(vocab_size=7, hidden_size=12, num_attention_heads=2, max_position_embeddings=9), forbid="modules", mistakes="ch07:count")
### END HIDDEN TESTS

# %% [markdown] id=step_text
# ## Part 6: one pre-training step (3 points)
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
# returns the loss as a Python float (its value before the step). The model comes in training
# mode (dropout on): leave it so, no `model.eval()` in a training step.

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
grading.check_true(all(m.training for m in model.modules()), "pretraining_step left the model in eval mode: dropout would be off for the rest of training", hint="a training step keeps the model's training mode")
print("OK pretraining_step: 2 steps")
### END HIDDEN TESTS

# %% [markdown] id=forward_text
# ## Part 7: the whole forward pass (3 points)
#
# Assemble BERT's pre-training forward pass from your parts: embeddings (part 1), the additive
# attention bias of the padding mask (`extended_attention_mask`, chapter 2), every encoder layer
# in turn (part 2), the MLM head at **every** position (part 3), the NSP scores (part 4), and the
# loss: the mean cross-entropy over the labelled positions (`labels`, -100 elsewhere) plus the
# NSP cross-entropy.
#
# Write `pretraining_forward(model, input_ids, token_type_ids, attention_mask, labels,
# next_sentence_label)` for a `BertForPreTraining` `model` (`model.bert.embeddings`,
# `model.bert.encoder.layer`, `model.cls.predictions`), returning `(prediction_logits,
# seq_relationship_logits, loss)` of shapes `(B, L, V)`, `(B, 2)` and `()`, with their autograd
# graph (a training step back-propagates this loss: no `torch.no_grad()`), and leave the model
# in the mode it came in (no `model.eval()` or `model.train()`). The tests compare
# them with transformers' `BertForPreTraining` holding the same weights, and use the reference
# versions of parts 1-4, so a mistake there costs its own part only.

# %% [solution] id=forward
def pretraining_forward(model, input_ids, token_type_ids, attention_mask, labels, next_sentence_label):
    """-> (prediction logits (B, L, V), NSP logits (B, 2), MLM + NSP loss)."""
    ### BEGIN SOLUTION
    h = embed(model.bert.embeddings, input_ids, token_type_ids)  # (B, L, H)
    bias = extended_attention_mask(attention_mask, h.dtype)  # (B, 1, 1, L)
    for layer in model.bert.encoder.layer:
        h = encoder_layer(layer, h, bias)
    prediction_logits = mlm_head(model.cls.predictions, h)  # (B, L, V)
    seq_logits = nsp_logits(model, h)  # (B, 2)
    V = prediction_logits.shape[-1]
    loss = F.cross_entropy(prediction_logits.reshape(-1, V), labels.reshape(-1)) + F.cross_entropy(seq_logits, next_sentence_label)
    return prediction_logits, seq_logits, loss
    ### END SOLUTION

# %% [tests] id=forward_tests points=3
from bertcourse.hf import to_hf  # noqa: E402

PARTS = {
    "embed": "bertcourse.embeddings.BertEmbeddings.forward",
    "encoder_layer": "bertcourse.grading.references.encoder_layer",
    "mlm_head": "bertcourse.heads.BertLMPredictionHead.forward",
    "nsp_logits": "bertcourse.grading.references.nsp_logits",
}
FORBID_FORWARD = ("bertcourse.model.BertForPreTraining.forward", "bertcourse.model.BertModel.forward", "bertcourse.encoder.BertEncoder.forward")


def transformers_forward(model, input_ids, token_type_ids, attention_mask, labels, next_sentence_label):
    """transformers' BertForPreTraining with the same weights (bertcourse.hf.to_hf): from outside."""
    theirs = to_hf(model).eval()
    with torch.no_grad():
        out = theirs(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask, labels=labels, next_sentence_label=next_sentence_label)
    return out.prediction_logits, out.seq_relationship_logits, out.loss


def pretraining_inputs(config, batch_size, length, seed, padded=0):
    ids = grading.randint(5, config.vocab_size, batch_size, length, seed=seed)
    mask = torch.ones(batch_size, length, dtype=torch.long)
    mask[:padded, length - length // 3 :] = 0  # padded rows
    labels = torch.where(grading.randint(0, 100, batch_size, length, seed=seed + 1) < 25, ids, IGNORE_INDEX)
    labels[mask == 0] = IGNORE_INDEX
    types = (torch.arange(length) >= length // 2).long().expand(batch_size, length).clone()
    return ids, types, mask, labels, grading.randint(0, 2, batch_size, seed=seed + 2)


model = randomize(BertForPreTraining(small_config()), seed=21)
grading.check_close(pretraining_forward, transformers_forward, model, *pretraining_inputs(model.config, 2, 8, seed=22, padded=1), forbid=FORBID_FORWARD, use_reference=PARTS, rtol=1e-4, atol=1e-4, mistakes="ch07:forward")
### BEGIN HIDDEN TESTS
model = randomize(BertForPreTraining(small_config(hidden_size=24, num_attention_heads=3, num_hidden_layers=3, type_vocab_size=2)), seed=23)
grading.check_close(pretraining_forward, transformers_forward, model, *pretraining_inputs(model.config, 3, 11, seed=24, padded=2), forbid=FORBID_FORWARD, use_reference=PARTS, rtol=1e-4, atol=1e-4, mistakes="ch07:forward")
# a model in training mode (dropout 0: the same values): its mode and the graph stay as they were
training = randomize(BertForPreTraining(small_config()), seed=25).train()
inputs = pretraining_inputs(training.config, 2, 7, seed=26, padded=1)
expected = transformers_forward(copy.deepcopy(training), *inputs)
# its graph: a backward of upstream gradients through the three outputs must give the model's
# weights (the tied word embeddings included) the gradients of bertcourse's own forward; the
# backward runs where the learner's function runs (probe.measure), the comparison here
from bertcourse.grading.probe import measure  # noqa: E402


def own_forward(model, input_ids, token_type_ids, attention_mask, labels, next_sentence_label):
    full = model(input_ids, token_type_ids, attention_mask)  # logits at every position
    loss = model(input_ids, token_type_ids, attention_mask, labels, next_sentence_label).loss
    return full.prediction_logits, full.seq_relationship_logits, loss


upstream = [grading.randn(2, 7, training.config.vocab_size, seed=28), grading.randn(2, 2, seed=29), torch.tensor(0.5)]
reference_graph = measure(own_forward, copy.deepcopy(training), *inputs, upstream=upstream, module=0)
measured = measure(pretraining_forward, training, *inputs, upstream=upstream, module=0, forbid=FORBID_FORWARD, use_reference=PARTS)
got = measured.result
grading.check_true(all(m.training for m in training.modules()), "pretraining_forward switched a model in training mode to eval mode", hint="leave the model's mode to the caller")
grading.run(pretraining_forward, model, *pretraining_inputs(model.config, 2, 5, seed=27), forbid=FORBID_FORWARD, use_reference=PARTS)
grading.check_true(not any(m.training for m in model.modules()), "pretraining_forward switched a model in eval mode to training mode", hint="leave the model's mode to the caller")
grading.check_true(isinstance(got, (tuple, list)) and len(got) == 3 and measured.graph == (True, True, True), "pretraining_forward returned no autograd graph (torch.no_grad() or .detach()?): a training step back-propagates its loss")
grading.check_value(got, expected, "pretraining_forward of a model in training mode (dropout 0)", rtol=1e-4, atol=1e-4)
grading.check_value(measured.grads, reference_graph.grads, "gradients of the model weights back-propagated through the outputs of pretraining_forward", rtol=1e-3, atol=1e-5, hint="keep the autograd graph: no torch.no_grad(), .detach() or .data")
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
