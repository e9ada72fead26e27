# Source of solutions/ch05_nsp/nsp.ipynb (build: python solutions/_build_notebooks.py)

# %% [markdown] id=intro
# # Exercises 5: Next-sentence prediction
#
# BERT's second pre-training task: given `[CLS] A [SEP] B [SEP]`, predict whether B really
# follows A in the text (label `IS_NEXT` = 0) or was drawn from another document (`NOT_NEXT` =
# 1). You will encode a pair with its token types, truncate a pair the way the original
# release does, sample the 50/50 pairs from documents, and compute the NSP loss and accuracy.
# Chapter 5 of the book ("Next-sentence prediction") explains the task.
#
# **How to work.** Write your code where a cell says `# YOUR CODE HERE`, replacing the
# `raise NotImplementedError()`, then run the test cell below it (`OK ...` or a message).
# Hidden tests run at grading time with other inputs. `bertcourse.nsp`, `F.cross_entropy` and
# `bertcourse.losses` are disabled while your answers are checked. Check everything with
# **Validate** (or `nbgrader validate`).
#
# Sentences and segments are lists of token ids (ints); a document is a list of sentences.

# %% [code] id=setup
import random

import torch
import torch.nn.functional as F

from bertcourse import grading
from bertcourse.config import CLS_ID, IS_NEXT, NOT_NEXT, SEP_ID
from bertcourse.nsp import make_pair as reference_make_pair
from bertcourse.nsp import truncate_seq_pair as reference_truncate_seq_pair

# %% [markdown] id=pair_text
# ## Part 1: encode a pair (2 points)
#
# The input of a pair is `[CLS] A [SEP] B [SEP]`. A second embedding, the *token type* (or
# segment) embedding, tells the model which segment a token belongs to: type 0 for
# `[CLS] A [SEP]`, type 1 for `B [SEP]`:
#
# | | `[CLS]` | $a_1 \dots a_m$ | `[SEP]` | $b_1 \dots b_n$ | `[SEP]` |
# |---|---|---|---|---|---|
# | token type | 0 | 0 | 0 | 1 | 1 |
#
# Write `make_pair(tokens_a, tokens_b, cls_id=CLS_ID, sep_id=SEP_ID)` returning the two lists
# `(input_ids, token_type_ids)`, each of length $m + n + 3$.

# %% [solution] id=pair
def make_pair(tokens_a, tokens_b, cls_id=CLS_ID, sep_id=SEP_ID):
    """-> (input_ids, token_type_ids): [CLS] A [SEP] B [SEP] with types 0...0 1...1."""
    ### BEGIN SOLUTION
    input_ids = [cls_id] + list(tokens_a) + [sep_id] + list(tokens_b) + [sep_id]
    token_type_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    return input_ids, token_type_ids
    ### END SOLUTION

# %% [tests] id=pair_tests points=2
def reference_pair(tokens_a, tokens_b, cls_id=CLS_ID, sep_id=SEP_ID):
    example = reference_make_pair(tokens_a, tokens_b, cls_id, sep_id)
    return example.input_ids, example.token_type_ids


grading.check_equal(make_pair, reference_pair, [7592, 2088], [2003, 2204, 999], forbid="nsp")
### BEGIN HIDDEN TESTS
grading.check_equal(make_pair, reference_pair, [5], [6], forbid="nsp")
grading.check_equal(make_pair, reference_pair, list(range(1000, 1020)), [42], 1, 2, forbid="nsp")
### END HIDDEN TESTS

# %% [markdown] id=truncate_text
# ## Part 2: truncate a pair like the original (2 points)
#
# A pair must fit in `max_num_tokens` tokens (the length minus the 3 special tokens). The
# original `truncate_seq_pair` removes one token at a time **from the longer segment** (from B
# when they have the same length) until `len(A) + len(B) <= max_num_tokens`; each time it draws
# `rng.random()` and removes the **first** token if the draw is `< 0.5`, else the **last**
# ("to add more randomness and avoid biases").
#
# Write `truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)` returning the truncated
# `(tokens_a, tokens_b)` as new lists, without modifying the inputs. Draw exactly one
# `rng.random()` per removed token, as described, so that the same `random.Random` state gives
# the original's result.

# %% [solution] id=truncate
def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """-> (a, b) cut to len(a) + len(b) <= max_num_tokens, one token at a time from the longer."""
    ### BEGIN SOLUTION
    a, b = list(tokens_a), list(tokens_b)
    while len(a) + len(b) > max_num_tokens:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()
    return a, b
    ### END SOLUTION

# %% [tests] id=truncate_tests points=2
def reference_truncate(tokens_a, tokens_b, max_num_tokens, rng):
    a, b = list(tokens_a), list(tokens_b)
    reference_truncate_seq_pair(a, b, max_num_tokens, rng)
    return a, b


grading.check_equal(truncate_seq_pair, reference_truncate, list(range(10)), list(range(100, 104)), 8, random.Random(0), forbid="nsp")
### BEGIN HIDDEN TESTS
for seed in range(20):
    rng = random.Random(seed)
    a = list(range(rng.randint(1, 30)))
    b = list(range(100, 100 + rng.randint(1, 30)))
    grading.check_equal(truncate_seq_pair, reference_truncate, a, b, rng.randint(2, 30), random.Random(seed), forbid="nsp", quiet=True)
grading.check_equal(truncate_seq_pair, reference_truncate, [1, 2, 3], [4, 5, 6], 4, random.Random(1), forbid="nsp")
print("OK truncate_seq_pair on 21 pairs")
### END HIDDEN TESTS

# %% [markdown] id=pairs_text
# ## Part 3: sampling pairs from documents (3 points)
#
# Write `nsp_pairs(documents, rng)` that returns, for every document $d$ (in order) and every
# pair of consecutive sentences $(d_i, d_{i+1})$ (in order), one triple `(A, B, label)` with
# $A = d_i$ and
#
# - with probability 1/2 (`rng.random() < 0.5`): $B$ = a random sentence of a random **other**
#   document, `label = NOT_NEXT` (1);
# - otherwise $B = d_{i+1}$, `label = IS_NEXT` (0).
#
# (This is the heart of the original recipe; the real one also packs several sentences into a
# segment, see `bertcourse.nsp.create_instances_from_document`.) Draw all random numbers from
# `rng`, a `random.Random`. Beware of the label convention: 0 means "B follows A" in both the
# original release and transformers; some tutorials invert it.
#
# *Hint:* `rng.randrange(n)` draws an index; draw again while it is the current document.

# %% [solution] id=pairs
def nsp_pairs(documents, rng):
    """-> [(A, B, label), ...] for the consecutive sentences of every document; 50% random B."""
    ### BEGIN SOLUTION
    pairs = []
    for d, document in enumerate(documents):
        for i in range(len(document) - 1):
            if rng.random() < 0.5:
                other = rng.randrange(len(documents) - 1)
                other += other >= d  # any document but d
                b = documents[other][rng.randrange(len(documents[other]))]
                pairs.append((document[i], b, NOT_NEXT))
            else:
                pairs.append((document[i], document[i + 1], IS_NEXT))
    return pairs
    ### END SOLUTION

# %% [tests] id=pairs_tests points=3
def make_documents(n_documents, seed):
    """Documents of 3 to 30 sentences; every sentence is unique (its first id names it)."""
    rng = random.Random(seed)
    return [[[1000 * d + i] + [rng.randrange(2000, 30000) for _ in range(rng.randint(1, 8))] for i in range(rng.randint(3, 30))] for d in range(n_documents)]


def check_nsp_pairs(documents, seed):
    home = {tuple(sentence): d for d, document in enumerate(documents) for sentence in document}
    pairs = grading.run(nsp_pairs, documents, random.Random(seed), forbid="nsp")
    grading.check_true(isinstance(pairs, list), f"nsp_pairs must return a list, got {type(pairs).__name__}")
    expected_a = [s for document in documents for s in document[:-1]]
    grading.check_value([list(p[0]) for p in pairs], expected_a, "the segments A (every sentence that has a next one, in order)")
    position = {tuple(s): (d, i) for d, document in enumerate(documents) for i, s in enumerate(document)}
    for a, b, label in pairs:
        d, i = position[tuple(a)]
        grading.check_true(label in (IS_NEXT, NOT_NEXT), f"label {label!r} is neither IS_NEXT (0) nor NOT_NEXT (1)")
        if label == IS_NEXT:
            grading.check_true(list(b) == list(documents[d][i + 1]), f"label IS_NEXT (0) but B is not the sentence after A (document {d}, sentence {i})", hint="0 means 'B follows A'")
        else:
            grading.check_true(tuple(b) in home, "B is not a sentence of the documents")
            grading.check_true(home[tuple(b)] != d, f"label NOT_NEXT but B comes from A's own document {d}", hint="draw a different document")
    random_count = sum(label == NOT_NEXT for _, _, label in pairs)
    grading.check_proportion(random_count, len(pairs), 0.5, "share of NOT_NEXT pairs")
    again = grading.run(nsp_pairs, documents, random.Random(seed), forbid="nsp")
    grading.check_true(again == pairs, "the same rng seed gave other pairs", hint="draw only from rng")
    return pairs


pairs = check_nsp_pairs(make_documents(40, seed=0), seed=1)
print(f"OK nsp_pairs: {len(pairs)} pairs")
### BEGIN HIDDEN TESTS
pairs = check_nsp_pairs(make_documents(2, seed=2), seed=3)  # two documents: B always from the other one
pairs = check_nsp_pairs(make_documents(60, seed=4), seed=5)
### END HIDDEN TESTS

# %% [markdown] id=loss_text
# ## Part 4: NSP loss and accuracy (2 points)
#
# The NSP head maps the pooled `[CLS]` vector to 2 logits: column 0 scores "B follows A"
# (`IS_NEXT`), column 1 "B is random" (`NOT_NEXT`). The loss is the mean 2-way cross-entropy
# over the batch, the accuracy the share of pairs whose larger logit is the label's:
#
# $$\mathcal{L} = -\frac{1}{B}\sum_{b} \log \mathrm{softmax}(z_b)_{y_b}, \qquad
# \mathrm{acc} = \frac{1}{B}\sum_b \big[\arg\max_c z_{b,c} = y_b\big].$$
#
# Write `nsp_loss_and_accuracy(logits, labels)` for logits `(B, 2)` and labels `(B,)`,
# returning `(loss, accuracy)`, both 0-dimensional tensors (or the accuracy as a float).
#
# *Hint:* `torch.log_softmax` is allowed here.

# %% [solution] id=loss
def nsp_loss_and_accuracy(logits, labels):
    """(B, 2) logits, (B,) labels -> (mean cross-entropy, accuracy)."""
    ### BEGIN SOLUTION
    log_probs = torch.log_softmax(logits, dim=-1)  # (B, 2)
    loss = -log_probs.gather(1, labels[:, None]).mean()
    accuracy = (logits.argmax(dim=-1) == labels).float().mean()
    return loss, accuracy
    ### END SOLUTION

# %% [tests] id=loss_tests points=2
def reference_nsp(logits, labels):
    return F.cross_entropy(logits, labels), (logits.argmax(dim=-1) == labels).float().mean()


logits = grading.randn(8, 2, seed=1)
labels = torch.tensor([0, 1, 1, 0, 0, 1, 0, 1])
grading.check_close(nsp_loss_and_accuracy, reference_nsp, logits, labels, forbid="cross_entropy")
### BEGIN HIDDEN TESTS
grading.check_close(nsp_loss_and_accuracy, reference_nsp, grading.randn(2, 2, seed=2, dtype=torch.float64), torch.tensor([1, 1]), forbid="cross_entropy")
grading.check_close(nsp_loss_and_accuracy, reference_nsp, grading.randn(33, 2, seed=3, scale=4.0), grading.randint(0, 2, 33, seed=4), forbid="cross_entropy")
### END HIDDEN TESTS

# %% [markdown] id=outro
# ## Going further (not graded)
#
# - RoBERTa dropped NSP; ALBERT replaced it with sentence-order prediction, whose negative is
#   A and B swapped. Why is SOP harder to solve from the topic alone?
# - In the original recipe a chunk with a single sentence always gets a random B. What share
#   of NOT_NEXT pairs does `bertcourse.nsp.create_instances` produce on a corpus of short
#   documents?

# %% [scratch]
