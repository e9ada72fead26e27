# Source of solutions/ch03_mlm/mlm.ipynb (build: python solutions/_build_notebooks.py)

# %% [markdown] id=intro
# # Exercises 3: Masked-language-model sampling
#
# BERT learns by filling in blanks. You will write the sampling that decides which tokens it
# must predict and what it sees there: the per-token 80/10/10 masking of transformers'
# data collator (in two steps), the count rule of the original release, and the grouping of
# WordPiece tokens into whole words. Chapter 3 of the book ("Masked language modelling")
# explains the recipe.
#
# **How to work.** Write your code where a cell says `# YOUR CODE HERE`, replacing the
# `raise NotImplementedError()`, then run the test cell below it (`OK ...` or a message).
# Random parts are graded *statistically*: on tens of thousands of tokens with fixed seeds, the
# rates must be within 5 standard errors of the target. Draw every random number from the
# `generator` argument (`torch.rand(..., generator=generator)`, `torch.bernoulli(p,
# generator=generator)`, `torch.randint(..., generator=generator)`), so that the same seed gives
# the same result. `bertcourse.mlm` is disabled while your answers are checked. Check everything
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
# Labels follow transformers: the original token id at a position to predict, `-100`
# (`IGNORE_INDEX`) everywhere else.

# %% [code] id=setup
import random

import torch

from bertcourse import grading
from bertcourse.config import CLS_ID, IGNORE_INDEX, MASK_ID, PAD_ID, SEP_ID, SPECIAL_IDS
from bertcourse.grading.mistakes import message, resolve

VOCAB_SIZE = 30522  # bert-base-uncased


def make_batch(batch_size, length, seed, padded_rows=0):
    """Random word ids laid out as [CLS] A [SEP] B [SEP] [PAD]...; `padded_rows` rows end in padding."""
    ids = grading.randint(999, VOCAB_SIZE, batch_size, length, seed=seed)  # ordinary word ids
    ids[:, 0] = CLS_ID
    ids[:, length // 2] = SEP_ID
    ids[:, -1] = SEP_ID
    ids[:padded_rows, -(length // 4) :] = PAD_ID
    return ids


def known(name, part="replace"):
    """The feedback of a known mistake, which the tests recognise by a property of the output
    (bertcourse.grading.catalogues.ch03)."""
    return message(next(m for m in resolve(f"ch03:{part}") if m.name.startswith(name)))


# %% [markdown] id=choose_text
# ## Part 1: choose the positions to predict (2 points)
#
# Each token that is not special is chosen **independently** with probability
# $p$ = `mlm_probability` (0.15 in BERT): $\text{chosen}_{b,i} \sim \text{Bernoulli}(p)$.
# Special tokens (`[CLS]`, `[SEP]`, `[PAD]`, ... given as `special_token_ids`, a list, tuple or
# set of ids) are never chosen. The number chosen per sequence therefore varies from batch to batch (it can be 0).
#
# Write `choose_positions(input_ids, special_token_ids, mlm_probability=0.15, generator=None)`
# returning a `(B, L)` `torch.bool` tensor, True at the chosen positions.
#
# *Hint:* `torch.isin(input_ids, torch.tensor(list(special_token_ids)))` marks the special tokens;
# `torch.bernoulli` of a tensor of probabilities, or `torch.rand(...) < p`.

# %% [solution] id=choose
def choose_positions(input_ids, special_token_ids, mlm_probability=0.15, generator=None):
    """(B, L) ids -> (B, L) bool: each non-special token chosen with probability mlm_probability."""
    ### BEGIN SOLUTION
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    probability = torch.full(input_ids.shape, mlm_probability).masked_fill(special, 0.0)
    return torch.bernoulli(probability, generator=generator).bool()
    ### END SOLUTION

# %% [tests] id=choose_tests points=2
ids = make_batch(64, 128, seed=0, padded_rows=16)
is_special = torch.isin(ids, torch.tensor(SPECIAL_IDS))
chosen = grading.run(choose_positions, ids, SPECIAL_IDS, 0.15, generator=torch.Generator().manual_seed(0), forbid="mlm")
grading.check_tensor(chosen, shape=ids.shape, dtype=torch.bool, what="choose_positions(...)")
grading.check_true(not chosen[is_special].any(), known("special tokens chosen", "choose"))
grading.check_proportion(chosen[~is_special].sum(), (~is_special).sum(), 0.15, "share of the ordinary tokens chosen")
again = grading.run(choose_positions, ids, SPECIAL_IDS, 0.15, generator=torch.Generator().manual_seed(0), forbid="mlm")
grading.check_true(torch.equal(chosen, again), known("random numbers not drawn from the generator"))
print("OK choose_positions")
### BEGIN HIDDEN TESTS
# purity first, on a fresh batch (an answer that writes into input_ids would corrupt the batches
# below), and the generator is used: another seed gives another choice
ids = make_batch(64, 128, seed=5, padded_rows=8)
before = ids.clone()
first = grading.run(choose_positions, ids, SPECIAL_IDS, 0.15, generator=torch.Generator().manual_seed(3), forbid="mlm")
grading.check_true(torch.equal(ids, before), known("the caller's input_ids modified"))
other = grading.run(choose_positions, ids, SPECIAL_IDS, 0.15, generator=torch.Generator().manual_seed(4), forbid="mlm")
grading.check_true(not torch.equal(first, other), known("the same draws whatever the generator's seed", "choose"))
ids = make_batch(64, 128, seed=1)  # every row has the same number n of ordinary tokens
is_special = torch.isin(ids, torch.tensor(SPECIAL_IDS))
chosen = grading.run(choose_positions, ids, SPECIAL_IDS, 0.3, generator=torch.Generator().manual_seed(1), forbid="mlm")
ordinary = int((~is_special).sum())
grading.check_true(abs(int(chosen[~is_special].sum()) / ordinary - 0.15) > 5 * (0.15 * 0.85 / ordinary) ** 0.5, known("0.15 hard-coded", "choose"))
grading.check_proportion(chosen[~is_special].sum(), (~is_special).sum(), 0.3, "share chosen with mlm_probability=0.3")
# independent draws: the count per row varies with variance n p (1 - p); a fixed count per row has none.
# The sample variance of 64 rows has a relative standard error of sqrt(2 / 63) = 0.18: 0.3 is 4 of them below 1.
n = int((~is_special[0]).sum())
variance = chosen.sum(dim=1).double().var().item()
grading.check_true(variance > 0.3 * n * 0.3 * 0.7, known("a fixed number chosen per row", "choose") + f"\n  The count per row has variance {variance:.2f}; independent draws give about {n * 0.21:.1f}.")
chosen = grading.run(choose_positions, ids, {CLS_ID, SEP_ID}, 1.0, generator=torch.Generator().manual_seed(2), forbid="mlm")
grading.check_value(chosen, ~torch.isin(ids, torch.tensor([CLS_ID, SEP_ID])), "choice with mlm_probability=1 and special ids {[CLS], [SEP]} (a set)")
### END HIDDEN TESTS

# %% [markdown] id=replace_text
# ## Part 2: what the model sees at the chosen positions (3 points)
#
# At a chosen position the model sees, independently for each position:
#
# - `[MASK]` with probability `mask_replace_prob` (0.8),
# - a random id, uniform over the whole vocabulary $\{0, \dots, V-1\}$, with probability
#   `random_replace_prob` (0.1),
# - the original token otherwise (0.1).
#
# transformers draws this in two steps: first $\text{Bernoulli}(0.8)$ for `[MASK]`; then, among
# the chosen positions that did not get `[MASK]`, $\text{Bernoulli}(0.1 / (1 - 0.8)) =
# \text{Bernoulli}(0.5)$ for a random id. (A common bug draws $\text{Bernoulli}(0.1)$ in the
# second step: 2% random tokens instead of 10%.) When `mask_replace_prob` is 1 nothing is left for
# the second step and $0.1 / (1 - 1)$ would divide by zero: skip the second step then, as
# transformers does. Each position is drawn on its own: do not split a row's chosen positions
# by counts such as `int(n * 0.8)`, which gives no random token at all to a row with fewer than
# 10 chosen positions. The hidden tests use rows with 1 to 7 chosen positions, the edge
# `mask_replace_prob=1`, and check that the same generator seed gives the same result and another
# seed another one.
#
# Write `replace_chosen(input_ids, chosen, *, vocab_size, mask_token_id, mask_replace_prob=0.8,
# random_replace_prob=0.1, generator=None)` returning `(masked_input_ids, labels)`, both
# `(B, L)`: the ids the model sees, and the labels (the original id where `chosen`, -100
# elsewhere, dtype `torch.long`). Positions not chosen keep their id. Do not modify
# `input_ids`.
#
# *Hint:* start from `input_ids.clone()`; boolean indexing `x[m] = value` writes where `m` is
# True.

# %% [solution] id=replace
def replace_chosen(input_ids, chosen, *, vocab_size, mask_token_id, mask_replace_prob=0.8, random_replace_prob=0.1, generator=None):
    """-> (masked_input_ids (B, L), labels (B, L) long): 80% [MASK], 10% random, 10% unchanged."""
    ### BEGIN SOLUTION
    labels = input_ids.long().masked_fill(~chosen, IGNORE_INDEX)
    masked = input_ids.clone()
    to_mask = torch.bernoulli(torch.full(input_ids.shape, mask_replace_prob), generator=generator).bool() & chosen
    masked[to_mask] = mask_token_id
    p_random = random_replace_prob / (1.0 - mask_replace_prob) if mask_replace_prob < 1 else 0.0
    to_random = torch.bernoulli(torch.full(input_ids.shape, p_random), generator=generator).bool() & chosen & ~to_mask
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator)
    masked[to_random] = random_ids[to_random]
    return masked, labels
    ### END SOLUTION

# %% [tests] id=replace_tests points=3
def few_chosen(ids, seed):
    """Exactly n = 1..7 chosen ordinary tokens in row b (n = b % 7 + 1), at random places."""
    ordinary = ~torch.isin(ids, torch.tensor(SPECIAL_IDS))
    keys = torch.rand(ids.shape, generator=torch.Generator().manual_seed(seed)).masked_fill(~ordinary, 2.0)
    ranks = keys.argsort(dim=1).argsort(dim=1)  # the ordinary tokens first, in random order
    return ranks < torch.arange(ids.shape[0])[:, None] % 7 + 1


def name_known_mistakes(chosen, shows_mask, shows_other, p_mask, p_random):
    """Fail with the mistake's name when the output has its signature: every row with the same
    number n of chosen tokens got the same counts (a per-row split; checked on groups of at least
    50 rows, where independent draws vary), or 2% random ids where 10% were asked."""
    n = int(chosen.sum())
    grading.check_true(not (0 < p_mask < 1 and int(shows_mask.sum()) == n), known("every chosen position [MASK]"))
    n_row = chosen.sum(1)
    groups = [n_row == n for n in n_row.unique() if int((n_row == n).sum()) >= 50]
    if 0 < p_mask < 1 and len(groups) >= 3:
        fixed = all(
            int(shows_mask[g].sum(1).unique().numel()) == 1 and int(shows_other[g].sum(1).unique().numel()) == 1
            for g in groups
        )
        grading.check_true(not fixed, known("a per-row split"))
    observed, unconditional = int(shows_other.sum()) / n, p_random * (1 - p_mask)
    if 0 < p_mask < 1 and p_random > 0:
        se = (unconditional * (1 - unconditional) / n) ** 0.5
        grading.check_true(abs(observed - unconditional) > 5 * se, known("the unconditional"))


def check_replacement(vocab_size, mask_token_id, p_mask, p_random, seed, few=False):
    """Every property of replace_chosen on one batch; `few`: 4,096 rows with 1 to 7 chosen positions.
    Each share is checked within 5 binomial standard errors: a correct answer fails one of the
    three with probability below 2e-6."""
    if few:
        ids = make_batch(4096, 16, seed=seed)
        chosen = few_chosen(ids, seed + 1000)
    else:
        ids = make_batch(128, 128, seed=seed)
        chosen = (torch.rand(ids.shape, generator=torch.Generator().manual_seed(seed + 1000)) < 0.5) & ~torch.isin(ids, torch.tensor(SPECIAL_IDS))
    before = ids.clone()
    out = grading.run(
        replace_chosen, ids, chosen, vocab_size=vocab_size, mask_token_id=mask_token_id,
        mask_replace_prob=p_mask, random_replace_prob=p_random, generator=torch.Generator().manual_seed(seed), forbid="mlm",
    )
    grading.check_true(isinstance(out, (tuple, list)) and len(out) == 2, "replace_chosen must return (masked_input_ids, labels)")
    masked, labels = out
    grading.check_true(torch.equal(ids, before), known("the caller's input_ids modified"))
    grading.check_tensor(labels, shape=ids.shape, dtype=torch.long, what="labels")
    grading.check_true(chosen.all() or not torch.equal(labels, ids), known("labels at every position"))
    grading.check_value(labels, torch.where(chosen, ids, IGNORE_INDEX), "labels (the original id where chosen, -100 elsewhere)")
    grading.check_tensor(masked, shape=ids.shape, what="masked_input_ids")
    grading.check_true(torch.equal(masked[~chosen], ids[~chosen]), "a position that was not chosen was changed")
    n = int(chosen.sum())
    shows_mask = (masked == mask_token_id) & chosen
    shows_other = (masked != ids) & (masked != mask_token_id) & chosen
    name_known_mistakes(chosen, shows_mask, shows_other, p_mask, p_random)
    grading.check_proportion(shows_mask.sum(), n, p_mask, "share of chosen positions showing [MASK]")
    grading.check_proportion(shows_other.sum(), n, p_random, "share of chosen positions showing a random id")
    grading.check_proportion((chosen & (masked == ids)).sum(), n, 1 - p_mask - p_random, "share of chosen positions unchanged")
    return masked[shows_other]


randoms = check_replacement(VOCAB_SIZE, MASK_ID, 0.8, 0.1, seed=3)
print("OK replace_chosen")
### BEGIN HIDDEN TESTS
randoms = check_replacement(VOCAB_SIZE, MASK_ID, 0.6, 0.3, seed=4)
# random ids uniform over 0..V-1: mean (V-1)/2, standard deviation V/sqrt(12) per draw; 5 standard errors
grading.check_true(((randoms >= 0) & (randoms < VOCAB_SIZE)).all(), "a random id is outside the vocabulary")
mean_error = abs(randoms.double().mean().item() - (VOCAB_SIZE - 1) / 2)
grading.check_true(mean_error < 5 * VOCAB_SIZE / (12 * len(randoms)) ** 0.5, "the random ids are not uniform over the vocabulary")
try:  # only [MASK], with another mask id: nothing is left for the second draw
    check_replacement(VOCAB_SIZE, 7, 1.0, 0.0, seed=5)
except ZeroDivisionError:
    grading.check_true(False, known("no guard for mask_replace_prob = 1"))
# rows that choose few positions (where per-row counts such as int(n * 0.8) go wrong), BERT's rates
check_replacement(VOCAB_SIZE, MASK_ID, 0.8, 0.1, seed=6, few=True)
check_replacement(1000, 5, 0.6, 0.3, seed=7, few=True)
# the generator is used: the same seed gives the same ids, another seed other ids
ids = make_batch(32, 64, seed=8)
chosen = ~torch.isin(ids, torch.tensor(SPECIAL_IDS))
def seeded(seed):
    return grading.run(replace_chosen, ids, chosen, vocab_size=VOCAB_SIZE, mask_token_id=MASK_ID, generator=torch.Generator().manual_seed(seed), forbid="mlm")[0]
first, again, other = seeded(9), seeded(9), seeded(10)
grading.check_true(torch.equal(first, again), known("random numbers not drawn from the generator"))
grading.check_true(not torch.equal(first, other), "two generator seeds gave the same ids", hint="draw every random number with generator=generator")
### END HIDDEN TESTS

# %% [markdown] id=count_text
# ## Part 3: the original count rule (1 point)
#
# The original release (`create_pretraining_data.py`) masks a *fixed* number of positions per
# sequence instead, computed from the sequence length $n$ (counting `[CLS]` and `[SEP]`):
#
# $$k = \min\big(\texttt{max\_predictions\_per\_seq},\ \max(1,\ \mathrm{round}(n \cdot p))\big)$$
#
# with Python's `round`, which rounds halves to the *even* integer: `round(1.5) = 2` but
# `round(4.5) = 4`. Write `num_predictions(seq_len, masked_lm_prob=0.15,
# max_predictions_per_seq=20)` returning $k$ as an `int`.

# %% [solution] id=count
def num_predictions(seq_len, masked_lm_prob=0.15, max_predictions_per_seq=20):
    """How many positions the original release masks in a sequence of seq_len tokens."""
    ### BEGIN SOLUTION
    return min(max_predictions_per_seq, max(1, int(round(seq_len * masked_lm_prob))))
    ### END SOLUTION

# %% [tests] id=count_tests points=1
for seq_len in (10, 20, 40, 128):
    grading.check_equal(num_predictions, "bertcourse.mlm.num_predictions", seq_len, forbid="mlm", mistakes="ch03:num_predictions")
### BEGIN HIDDEN TESTS
def lengths_to_check(prob):
    """Where rounding bugs live: every short length, every length whose count is exactly a half
    (round half to even), and a stride through the long ones (the cap)."""
    halves = [n for n in range(1, 600) if abs((n * prob) % 1 - 0.5) < 1e-9][:25]
    return sorted(set(range(1, 41)) | set(halves) | set(range(41, 600, 23)))


checked = 0
for prob, cap in ((0.15, 20), (0.15, 80), (0.1, 20), (0.25, 5)):
    for seq_len in lengths_to_check(prob):
        grading.check_equal(num_predictions, "bertcourse.mlm.num_predictions", seq_len, prob, cap, forbid="mlm", quiet=True, mistakes="ch03:num_predictions")
        checked += 1
print(f"OK num_predictions on {checked} lengths")
### END HIDDEN TESTS

# %% [markdown] id=words_text
# ## Part 4: whole words (2 points)
#
# WordPiece splits rare words into pieces: "embedding" becomes `em ##bed ##ding`. Masking one
# piece and leaving the others visible makes the task too easy, so *whole-word masking* chooses
# whole words. Its first step groups the positions: a token that starts with `##` continues
# the word of the token before it; any other token starts a new word. Special tokens
# (`special_tokens`, by default `[CLS]` and `[SEP]`) belong to no word.
#
# Write `word_groups(tokens, special_tokens=("[CLS]", "[SEP]"))`: for a list of token strings,
# return the list of words, each the list of its positions, in order of position.
#
# Example: `["[CLS]", "the", "em", "##bed", "##ding", "[SEP]"]` gives `[[1], [2, 3, 4]]`.

# %% [solution] id=words
def word_groups(tokens, special_tokens=("[CLS]", "[SEP]")):
    """Positions of the non-special tokens grouped into words ('##' pieces join the word before)."""
    ### BEGIN SOLUTION
    groups = []
    for position, token in enumerate(tokens):
        if token in special_tokens:
            continue
        if token.startswith("##") and groups:
            groups[-1].append(position)
        else:
            groups.append([position])
    return groups
    ### END SOLUTION

# %% [tests] id=words_tests points=2
def expected_groups(tokens, special_tokens=("[CLS]", "[SEP]")):
    """The groups of this example, written out (known mistakes of this part: ch03:words)."""
    return [[1], [2, 3, 4], [5], [6, 7]]


tokens = ["[CLS]", "the", "em", "##bed", "##ding", "is", "learn", "##ed", "[SEP]"]
grading.check_equal(word_groups, expected_groups, tokens, forbid="mlm", mistakes="ch03:words")
### BEGIN HIDDEN TESTS
def reference_word_groups(tokens, special_tokens=("[CLS]", "[SEP]")):
    groups = []
    for i, token in enumerate(tokens):
        if token not in special_tokens:
            if token.startswith("##") and groups:
                groups[-1].append(i)
            else:
                groups.append([i])
    return groups


WORDS = dict(forbid="mlm", mistakes="ch03:words")
grading.check_equal(word_groups, reference_word_groups, ["[CLS]", "un", "##aff", "##able", "[SEP]", "token", "##izer", "##s", "work", "[SEP]"], **WORDS)
grading.check_equal(word_groups, reference_word_groups, ["[CLS]", "a", "##b", "[SEP]", "[PAD]", "[PAD]"], ("[CLS]", "[SEP]", "[PAD]"), **WORDS)
rng = random.Random(0)
pieces = ["the", "cat", "em", "##bed", "##ding", "##s", "run", "##ning", "[SEP]"]
for _ in range(30):
    tokens = ["[CLS]", "word"] + [rng.choice(pieces) for _ in range(rng.randint(0, 15))] + ["[SEP]"]
    grading.check_equal(word_groups, reference_word_groups, tokens, quiet=True, **WORDS)
### END HIDDEN TESTS

# %% [markdown] id=outro
# ## Going further (not graded)
#
# - Compare the number of chosen tokens per sequence of `choose_positions` (length 128) with the
#   original rule: same mean, different spread.
# - `bertcourse.mlm.create_masked_lm_predictions(..., whole_word_mask=True)` uses the groups
#   of part 4. Why may it choose *fewer* than $k$ positions?

# %% [scratch]
