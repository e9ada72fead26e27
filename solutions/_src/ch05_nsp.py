# Source of solutions/ch05_nsp/nsp.ipynb (build: python solutions/_build_notebooks.py)

# %% [markdown] id=intro
# # Exercises 5: Next-sentence prediction
#
# BERT's second pre-training task: given `[CLS] A [SEP] B [SEP]`, predict whether B really
# follows A in the text (label `IS_NEXT` = 0) or was drawn from another document (`NOT_NEXT` =
# 1). You will encode a pair with its token types, truncate a pair the way the original
# release does, sample the 50/50 pairs from documents, compute the NSP loss and accuracy, and
# build ALBERT's sentence-order pairs. Chapter 5 of the book ("Next-sentence prediction")
# explains the task. No answer may modify its inputs (lists or tensors): the tests check them
# after every call.
#
# **How to work.** Write your code where a cell says `# YOUR CODE HERE`, replacing the
# `raise NotImplementedError()`, then run the test cell below it (`OK ...` or a message).
# Hidden tests run at grading time with other inputs. `bertcourse.nsp`, `F.cross_entropy` and
# `bertcourse.losses` are disabled while your answers are checked. Check everything with
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
# Sentences and segments are lists of token ids (ints); a document is a list of sentences.

# %% [code] id=setup
import copy
import random

import torch
import torch.nn.functional as F

from bertcourse import grading
from bertcourse.config import CLS_ID, IS_NEXT, NOT_NEXT, SEP_ID
from bertcourse.grading.mistakes import message, resolve
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


grading.check_equal(
    make_pair, reference_pair, [7592, 2088], [2003, 2204, 999], forbid="nsp", mistakes="ch05:pair"
)
### BEGIN HIDDEN TESTS
grading.check_equal(make_pair, reference_pair, [5], [6], forbid="nsp", mistakes="ch05:pair")
grading.check_equal(
    make_pair,
    reference_pair,
    list(range(1000, 1020)),
    [42],
    1,
    2,
    forbid="nsp",
    mistakes="ch05:pair",
)
grading.check_equal(
    make_pair,
    reference_pair,
    [42],
    list(range(1000, 1020)),
    101,
    102,
    forbid="nsp",
    mistakes="ch05:pair",
)
segment_a, segment_b = [11, 12, 13], [21, 22]
grading.run(make_pair, segment_a, segment_b, forbid="nsp")
grading.check_value(
    (segment_a, segment_b),
    ([11, 12, 13], [21, 22]),
    "tokens_a and tokens_b after the call",
    hint="build new lists; do not modify the inputs",
)
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


grading.check_equal(
    truncate_seq_pair,
    reference_truncate,
    list(range(10)),
    list(range(100, 104)),
    8,
    random.Random(0),
    forbid="nsp",
)
segment_a, segment_b = list(range(10)), list(range(100, 104))
grading.run(truncate_seq_pair, segment_a, segment_b, 8, random.Random(0), forbid="nsp")
grading.check_value(
    (segment_a, segment_b),
    (list(range(10)), list(range(100, 104))),
    "tokens_a and tokens_b after the call",
    hint="truncate copies (list(tokens_a)), not the inputs",
)
### BEGIN HIDDEN TESTS
for seed in range(20):
    rng = random.Random(seed)
    a = list(range(rng.randint(1, 30)))
    b = list(range(100, 100 + rng.randint(1, 30)))
    grading.check_equal(
        truncate_seq_pair,
        reference_truncate,
        a,
        b,
        rng.randint(2, 30),
        random.Random(seed),
        forbid="nsp",
        quiet=True,
    )
grading.check_equal(
    truncate_seq_pair, reference_truncate, [1, 2, 3], [4, 5, 6], 4, random.Random(1), forbid="nsp"
)
grading.check_equal(
    truncate_seq_pair, reference_truncate, [1, 2], [3, 4], 4, random.Random(2), forbid="nsp"
)  # nothing to cut
for seed, (segment_a, segment_b, limit) in enumerate(
    [
        (list(range(12)), [50, 51], 6),
        ([50, 51], list(range(12)), 6),
        (list(range(8)), list(range(20, 28)), 5),
    ]
):
    before = (list(segment_a), list(segment_b))
    grading.run(truncate_seq_pair, segment_a, segment_b, limit, random.Random(seed), forbid="nsp")
    grading.check_value(
        (segment_a, segment_b),
        before,
        "tokens_a and tokens_b after the call",
        hint="truncate copies (list(tokens_a)), not the inputs",
    )
print("OK truncate_seq_pair on 25 pairs, inputs unmodified")
### END HIDDEN TESTS

# %% [markdown] id=pairs_text
# ## Part 3: sampling pairs from documents (3 points)
#
# Write `nsp_pairs(documents, rng)` that returns, for every document $d$ (in order) and every
# pair of consecutive sentences $(d_i, d_{i+1})$ (in order), one triple `(A, B, label)` with
# $A = d_i$ and
#
# - with probability 1/2 (`rng.random() < 0.5`, one draw **for each pair**: the pairs of a
#   document are independent): $B$ = a random sentence of a random **other** document,
#   `label = NOT_NEXT` (1);
# - otherwise $B = d_{i+1}$, `label = IS_NEXT` (0).
#
# (This is the heart of the original recipe; the real one also packs several sentences into a
# segment, see `bertcourse.nsp.create_instances_from_document`.) Draw all random numbers from
# `rng`, a `random.Random` (the same seed must give the same pairs, another seed other pairs),
# and do not modify `documents`. Beware of the label convention: 0 means "B follows A" in both
# the original release and transformers; some tutorials invert it.
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
    return [
        [
            [1000 * d + i] + [rng.randrange(2000, 30000) for _ in range(rng.randint(1, 8))]
            for i in range(rng.randint(3, 30))
        ]
        for d in range(n_documents)
    ]


def known(catalogue, name):
    """The feedback of a known mistake of this chapter (bertcourse.grading.catalogues.ch05)."""
    return message(next(m for m in resolve(catalogue) if m.name == name))


def check_one_coin_per_pair(labels, document_of, catalogue):
    """The labels of two neighbouring pairs of one document are independent fair coins, so they
    differ for half of the neighbours (binomial; one coin per document: never)."""
    differ = [
        labels[k] != labels[k + 1]
        for k in range(len(labels) - 1)
        if document_of[k] == document_of[k + 1]
    ]
    if len(differ) >= 20 and not any(differ):  # 2**-20 for independent coins
        grading.check_true(False, known(catalogue, "one coin per document, not one per pair"))
    grading.check_proportion(
        sum(differ),
        len(differ),
        0.5,
        "share of neighbouring pairs of one document whose labels differ",
        hint="draw rng.random() < 0.5 once for each pair: the pairs are independent",
    )


def check_nsp_pairs(documents, seed):
    before = copy.deepcopy(documents)
    rng = random.Random(seed)
    pairs = grading.run(nsp_pairs, documents, rng, forbid="nsp")
    grading.check_value(
        documents, before, "documents after the call (nsp_pairs must not modify them)"
    )
    grading.check_true(
        rng.getstate() != random.Random(seed).getstate(),
        "nsp_pairs did not draw from the rng it was given",
        hint="draw every random number from rng",
    )
    home = {tuple(sentence): d for d, document in enumerate(documents) for sentence in document}
    grading.check_true(
        isinstance(pairs, list), f"nsp_pairs must return a list, got {type(pairs).__name__}"
    )
    expected_a = [s for document in documents for s in document[:-1]]
    grading.check_value(
        [list(p[0]) for p in pairs],
        expected_a,
        "the segments A (every sentence that has a next one, in order)",
    )
    position = {
        tuple(s): (d, i) for d, document in enumerate(documents) for i, s in enumerate(document)
    }
    follows = [
        list(b) == list(documents[position[tuple(a)][0]][position[tuple(a)][1] + 1])
        for a, b, _ in pairs
    ]
    labels = [label for _, _, label in pairs]
    if labels and all(f == (label == NOT_NEXT) for f, label in zip(follows, labels)):
        grading.check_true(False, known("ch05:nsp_pairs", "NSP labels inverted (1 = B follows A)"))
    for a, b, label in pairs:
        d, i = position[tuple(a)]
        grading.check_true(
            label in (IS_NEXT, NOT_NEXT), f"label {label!r} is neither IS_NEXT (0) nor NOT_NEXT (1)"
        )
        if label == IS_NEXT:
            grading.check_true(
                list(b) == list(documents[d][i + 1]),
                f"label IS_NEXT (0) but B is not the sentence after A (document {d}, sentence {i})",
                hint="0 means 'B follows A'",
            )
        else:
            grading.check_true(tuple(b) in home, "B is not a sentence of the documents")
            if home[tuple(b)] == d:
                grading.check_true(
                    False, known("ch05:nsp_pairs", "a random B from A's own document")
                )
    document_of = [position[tuple(a)][0] for a, _, _ in pairs]
    check_one_coin_per_pair(labels, document_of, "ch05:nsp_pairs")
    random_count = sum(label == NOT_NEXT for _, _, label in pairs)
    grading.check_proportion(random_count, len(pairs), 0.5, "share of NOT_NEXT pairs")
    again = grading.run(nsp_pairs, documents, random.Random(seed), forbid="nsp")
    grading.check_true(
        again == pairs, "the same rng seed gave other pairs", hint="draw only from rng"
    )
    other = grading.run(nsp_pairs, documents, random.Random(seed + 1000), forbid="nsp")
    grading.check_true(
        other != pairs,
        "two different rng seeds gave the same pairs",
        hint="draw from the rng you are given, not from a generator of your own",
    )
    return pairs


pairs = check_nsp_pairs(make_documents(40, seed=0), seed=1)
print(f"OK nsp_pairs: {len(pairs)} pairs")
### BEGIN HIDDEN TESTS
pairs = check_nsp_pairs(
    make_documents(2, seed=2), seed=3
)  # two documents: B always from the other one
pairs = check_nsp_pairs(make_documents(60, seed=4), seed=5)
# one long document: its 399 pairs draw 399 independent coins
long_document = [[900_000 + i, 2000 + i % 7] for i in range(400)]
pairs = check_nsp_pairs([long_document, *make_documents(3, seed=6)], seed=7)
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
# Write `nsp_loss_and_accuracy(logits, labels)` for logits `(B, 2)` (float16, bfloat16,
# float32 or float64) and labels `(B,)` (long), returning `(loss, accuracy)`: the loss a
# 0-dimensional tensor **in the logits' dtype**, the accuracy a 0-dimensional float32 tensor or
# a Python float. It must stay exact for confident logits (±100 and more: a right prediction
# that sure has a loss of exactly 0, not `nan` or `inf`), for a batch of one, and must not
# modify its inputs.
#
# *Hint:* `torch.log_softmax` is allowed here (`torch.log(torch.softmax(...))` is not stable).


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
grading.check_close(
    nsp_loss_and_accuracy,
    reference_nsp,
    logits,
    labels,
    forbid="cross_entropy",
    inputs_unchanged=True,
    mistakes="ch05:loss",
)
### BEGIN HIDDEN TESTS
grading.check_close(
    nsp_loss_and_accuracy,
    reference_nsp,
    grading.randn(2, 2, seed=2, dtype=torch.float64),
    torch.tensor([1, 1]),
    forbid="cross_entropy",
    inputs_unchanged=True,
    mistakes="ch05:loss",
)
grading.check_close(
    nsp_loss_and_accuracy,
    reference_nsp,
    grading.randn(33, 2, seed=3, scale=4.0),
    grading.randint(0, 2, 33, seed=4),
    forbid="cross_entropy",
    inputs_unchanged=True,
    mistakes="ch05:loss",
)
grading.check_close(
    nsp_loss_and_accuracy,
    reference_nsp,
    grading.randn(1, 2, seed=5),
    torch.tensor([0]),
    forbid="cross_entropy",
    mistakes="ch05:loss",
)  # a batch of one
confident = torch.tensor([[100.0, -100.0], [-300.0, 300.0], [250.0, -250.0], [-120.0, 120.0]])
grading.check_close(
    nsp_loss_and_accuracy,
    reference_nsp,
    confident,
    torch.tensor([0, 1, 0, 1]),
    forbid="cross_entropy",
    atol=0.0,
    rtol=0.0,
    mistakes="ch05:loss",
)  # loss exactly 0
grading.check_close(
    nsp_loss_and_accuracy,
    reference_nsp,
    confident,
    torch.tensor([1, 1, 0, 0]),
    forbid="cross_entropy",
    mistakes="ch05:loss",
)  # two sure and wrong
for dtype in (torch.float16, torch.bfloat16):
    grading.check_close(
        nsp_loss_and_accuracy,
        reference_nsp,
        grading.randn(16, 2, seed=6, scale=3.0).to(dtype),
        grading.randint(0, 2, 16, seed=7),
        forbid="cross_entropy",
        inputs_unchanged=True,
        mistakes="ch05:loss",
    )
    grading.check_close(
        nsp_loss_and_accuracy,
        reference_nsp,
        confident.to(dtype),
        torch.tensor([0, 1, 1, 0]),
        forbid="cross_entropy",
        mistakes="ch05:loss",
    )
### END HIDDEN TESTS

# %% [markdown] id=sop_text
# ## Part 5: sentence-order prediction pairs (3 points)
#
# ALBERT replaced NSP by *sentence-order prediction* (SOP): the positive is two consecutive
# segments in the document's order, the negative is **the same two segments swapped**, so both
# come from the same document (chapter 5, "Sentence-order prediction falls to chance").
# The labels are ALBERT's (`sentence_order_label` in transformers): 0 = in order, 1 = swapped.
#
# Write `sop_pairs(documents, rng, cls_id=CLS_ID, sep_id=SEP_ID)` that returns, for every
# document (in order) and every pair of consecutive sentences $(d_i, d_{i+1})$ (in order), one
# triple `(input_ids, token_type_ids, label)`:
#
# - with probability 1/2 (`rng.random() < 0.5`) the negative: `[CLS] d_{i+1} [SEP] d_i [SEP]`,
#   `label = 1`;
# - otherwise the positive: `[CLS] d_i [SEP] d_{i+1} [SEP]`, `label = 0`.
#
# The token types are those of Part 1 and belong to the *positions*, not to the sentences:
# 0 for `[CLS]`, the first segment and its `[SEP]`, 1 for the second segment and the final
# `[SEP]`. Draw every random number from `rng` (a `random.Random`): the same seed must give
# the same pairs. Do not modify `documents`. A document of one sentence gives no pair.


# %% [solution] id=sop
def sop_pairs(documents, rng, cls_id=CLS_ID, sep_id=SEP_ID):
    """-> [(input_ids, token_type_ids, label), ...]: consecutive sentences, swapped half the time."""
    ### BEGIN SOLUTION
    examples = []
    for document in documents:
        for a, b in zip(document[:-1], document[1:]):
            label = 0
            if rng.random() < 0.5:
                a, b, label = b, a, 1  # the negative: the same two sentences, swapped
            input_ids = [cls_id, *a, sep_id, *b, sep_id]
            token_type_ids = [0] * (len(a) + 2) + [1] * (len(b) + 1)
            examples.append((input_ids, token_type_ids, label))
    return examples
    ### END SOLUTION


# %% [tests] id=sop_tests points=3
def encode(first, second, cls_id, sep_id):
    return [cls_id, *first, sep_id, *second, sep_id]


def check_sop_pairs(documents, seed, cls_id=CLS_ID, sep_id=SEP_ID):
    before = copy.deepcopy(documents)
    rng = random.Random(seed)
    triples = grading.run(sop_pairs, documents, rng, cls_id, sep_id, forbid="nsp")
    grading.check_value(
        documents,
        before,
        "documents after the call (sop_pairs must not modify them)",
        hint="swap the two segments in the pair you build, not in the document",
    )
    grading.check_true(
        rng.getstate() != random.Random(seed).getstate(),
        "sop_pairs did not draw from the rng it was given",
        hint="draw every random number from rng",
    )
    grading.check_true(
        isinstance(triples, (list, tuple))
        and all(isinstance(t, (list, tuple)) and len(t) == 3 for t in triples),
        "sop_pairs must return a list of (input_ids, token_type_ids, label) triples",
    )
    pairs = [
        (list(document[i]), list(document[i + 1]))
        for document in documents
        for i in range(len(document) - 1)
    ]
    grading.check_true(
        len(triples) == len(pairs),
        f"expected one triple per pair of consecutive sentences ({len(pairs)}), got {len(triples)}",
    )
    ids = [list(t[0]) for t in triples]
    labels = [t[2] for t in triples]
    grading.check_true(
        all(label in (0, 1) for label in labels), "every label must be 0 (in order) or 1 (swapped)"
    )
    in_order = [i == encode(a, b, cls_id, sep_id) for i, (a, b) in zip(ids, pairs)]
    swapped = [i == encode(b, a, cls_id, sep_id) for i, (a, b) in zip(ids, pairs)]
    if all(s if label == 0 else o for o, s, label in zip(in_order, swapped, labels)):
        grading.check_true(False, known("ch05:sop_pairs", "SOP labels inverted (1 = in order)"))
    for k, ((a, b), label) in enumerate(zip(pairs, labels)):
        first, second = (a, b) if label == 0 else (b, a)
        if ids[k] == encode(first, second, cls_id, sep_id):
            continue
        if label == 1 and ids[k][: len(a) + 2] == [cls_id, *a, sep_id]:
            grading.check_true(
                False, known("ch05:sop_pairs", "a random B from another document (NSP, not SOP)")
            )
        if label == 1 and ids[k] == encode(b[::-1], a[::-1], cls_id, sep_id):
            grading.check_true(
                False,
                known("ch05:sop_pairs", "the tokens reversed instead of the segments swapped"),
            )
        what = "in order, [CLS] A [SEP] B [SEP]" if label == 0 else "swapped, [CLS] B [SEP] A [SEP]"
        grading.check_true(
            False,
            f"pair {k}: input_ids are not the two consecutive sentences {what} (label {label})",
            hint="label 0 = A then B, label 1 = B then A; [CLS] and [SEP] as in Part 1",
        )
    for k, ((a, b), label) in enumerate(zip(pairs, labels)):
        first, second = (a, b) if label == 0 else (b, a)
        types = list(triples[k][1])
        if types == [0] * (len(first) + 2) + [1] * (len(second) + 1):
            continue
        if label == 1 and types == [0] + [1] * (len(b) + 1) + [0] * (len(a) + 1):
            grading.check_true(
                False,
                known("ch05:sop_pairs", "token types that follow the sentences, not the positions"),
            )
        grading.check_true(
            False,
            f"pair {k}: wrong token_type_ids (label {label})",
            hint="0 for [CLS], the first segment and its [SEP]; 1 for the second segment and the last [SEP]",
        )
    grading.check_proportion(sum(labels), len(labels), 0.5, "share of swapped pairs (label 1)")
    # one coin per pair, as in Part 3 (its test cell defines the check)
    document_of = [d for d, document in enumerate(documents) for _ in range(len(document) - 1)]
    check_one_coin_per_pair(labels, document_of, "ch05:sop_pairs")
    again = grading.run(sop_pairs, documents, random.Random(seed), cls_id, sep_id, forbid="nsp")
    grading.check_true(
        [list(map(list, t[:2])) + [t[2]] for t in again]
        == [list(map(list, t[:2])) + [t[2]] for t in triples],
        "the same rng seed gave other pairs",
        hint="draw only from rng",
    )
    other = grading.run(
        sop_pairs, documents, random.Random(seed + 1000), cls_id, sep_id, forbid="nsp"
    )
    grading.check_true(
        [t[2] for t in other] != labels,
        "two different rng seeds gave the same pairs",
        hint="draw from the rng you are given, not from a generator of your own",
    )
    return triples


triples = check_sop_pairs(make_documents(40, seed=10), seed=11)
print(f"OK sop_pairs: {len(triples)} pairs")
### BEGIN HIDDEN TESTS
triples = check_sop_pairs(make_documents(60, seed=12), seed=13, cls_id=1, sep_id=2)
triples = check_sop_pairs(
    [[[7]], [[1, 2], [3]], [[4, 5, 6], [8, 9], [10]]] * 30, seed=14
)  # one-sentence documents, one-token sentences
### END HIDDEN TESTS

# %% [markdown] id=outro
# ## Going further (not graded)
#
# - Why is SOP harder to solve from the topic alone than NSP? (The book's baseline is at
#   chance on SOP.)
# - In the original recipe a chunk with a single sentence always gets a random B. What share
#   of NOT_NEXT pairs does `bertcourse.nsp.create_instances` produce on a corpus of short
#   documents?

# %% [scratch]
