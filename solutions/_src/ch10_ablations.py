# Source of solutions/ch10_ablations/ablations.ipynb (build: python solutions/_build_notebooks.py)

# %% [markdown] id=intro
# # Exercises 10: Were BERT's choices right?
#
# The BERT paper tested its own choices: its Table 8 pretrains with six ways of corrupting the
# chosen tokens (MASK/SAME/RND = 80/10/10, 100/0/0, 80/0/20, 80/20/0, 0/20/80, 0/0/100), and
# RoBERTa compared the original's *static* masks with *dynamic* ones. You will write the three
# tools such an ablation needs: the corruption for any MASK/SAME/RND split, the original's
# static masking with its duplicate factor, and the paired comparison over seeds that decides
# whether a difference between two rows is real. Chapter 10 of the book re-runs the
# ablations with them; chapters 3 ("Masked-language-model sampling") and 8 ("Fine-tuning",
# its section on seeds) explain the parts they build on.
#
# **How to work.** Write your code where a cell says `# YOUR CODE HERE`, replacing the
# `raise NotImplementedError()`, then run the test cell below it (`OK ...` or a message).
# Random parts are graded *statistically*: on tens of thousands of tokens with fixed seeds,
# every share must be within 5 binomial standard errors of its target. Draw every random
# number from the `generator` (part 1) or `rng` (part 2) argument, so that the same seed gives
# the same result. What a part asks you to write is disabled while it is checked
# (`bertcourse.mlm`'s masking, its `MaskSplit` checks, `bertcourse.stats`). Check everything
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
import math
import random

import torch

from bertcourse import grading
from bertcourse.config import CLS_ID, IGNORE_INDEX, MASK_ID, PAD_ID, SEP_ID, SPECIAL_IDS
from bertcourse.grading.mistakes import message, resolve
from bertcourse.mlm import create_masked_lm_predictions

VOCAB_SIZE = 30522  # bert-base-uncased
# the MASK/SAME/RND rows of the BERT paper's Table 8
TABLE_8 = ((0.8, 0.1, 0.1), (1.0, 0.0, 0.0), (0.8, 0.0, 0.2), (0.8, 0.2, 0.0), (0.0, 0.2, 0.8), (0.0, 0.0, 1.0))
# what each part asks you to write, disabled while it is checked
FORBID_SPLIT = ("mlm", "bertcourse.mlm.MaskSplit.__post_init__", "bertcourse.mlm.MaskSplit.parse")
FORBID_STATIC = ()  # (neither bertcourse nor transformers has it as one function)
FORBID_PAIRED = ("bertcourse.stats.paired_comparison",)


def make_batch(batch_size, length, seed, padded_rows=0, vocab_size=VOCAB_SIZE):
    """Random word ids laid out as [CLS] A [SEP] B [SEP] [PAD]...; `padded_rows` rows end in padding."""
    ids = grading.randint(999, vocab_size, batch_size, length, seed=seed)  # ordinary word ids
    ids[:, 0] = CLS_ID
    ids[:, length // 2] = SEP_ID
    ids[:, -1] = SEP_ID
    ids[:padded_rows, -(length // 4) :] = PAD_ID
    return ids


def known(name, part="corrupt"):
    """The feedback of a known mistake, which the tests recognise by a property of the output
    (bertcourse.grading.catalogues.ch10)."""
    return message(next(m for m in resolve(f"ch10:{part}") if m.name.startswith(name)))


def raised(error, kind):
    """Did the learner's function raise `kind` (in this kernel, or under the grader, which
    reports it as a GradingError that names the kind)?"""
    if isinstance(error, kind):
        return True
    return isinstance(error, grading.GradingError) and f" raised {kind.__name__}: " in str(error).split("\n", 1)[0]


# %% [markdown] id=corrupt_text
# ## Part 1: any MASK/SAME/RND split (3 points)
#
# Chapter 3 chose each ordinary token with probability $p$ = `mlm_probability` and showed the
# model `[MASK]` at 80% of the chosen positions, a random id at 10% and the original token at
# 10%. The paper's Table 8 varies that split. Write it for any split:
#
# - each token that is not special (`special_token_ids`, a list, tuple or set of ids) is chosen
#   **independently** with probability $p$; special tokens are never chosen;
# - each chosen position shows, independently of the others, `[MASK]` (`mask_token_id`) with
#   probability `mask`, its own token with probability `same`, and a random id, uniform over
#   the whole vocabulary $\{0, \dots, V-1\}$, with probability `random`, where
#   `split = (mask, same, random)`;
# - the labels are the original id at the chosen positions and `-100` elsewhere (`torch.long`);
#   nothing else changes, and `input_ids` itself is not modified.
#
# A split is three shares of the chosen positions: refuse anything else with a `ValueError`
# that says what is wrong (a share below 0, or shares that do not sum to 1). Floats do not add
# exactly: `0.7 + 0.2 + 0.1` is `0.9999999999999999` in Python, so accept a sum within `1e-9`
# of 1.
#
# Write `corrupt(input_ids, special_token_ids, split, *, vocab_size, mask_token_id,
# mlm_probability=0.15, generator=None)` for a `(B, L)` `torch.long` tensor `input_ids`,
# returning `(corrupted_input_ids, labels)`, both `(B, L)`. The hidden tests run every row of Table 8 at masking rates 0.15 and 0.4, and
# other splits on other vocabularies.
#
# *Hint:* one uniform number $u$ per position splits it three ways: $u <$ `mask` gives
# `[MASK]`, `mask` $\le u <$ `mask + same` keeps the token, the rest gets a random id. (If you
# use chapter 3's two Bernoulli draws instead, the second one's probability is
# `random / (1 - mask)`: mind `mask = 1`.)

# %% [solution] id=corrupt
def corrupt(input_ids, special_token_ids, split, *, vocab_size, mask_token_id, mlm_probability=0.15, generator=None):
    """(B, L) ids -> (corrupted ids, labels): chosen with mlm_probability, then MASK/SAME/RND by `split`."""
    ### BEGIN SOLUTION
    mask, same, rnd = split
    if min(mask, same, rnd) < 0:
        raise ValueError(f"the shares of a split must not be negative, got {split}")
    if abs(mask + same + rnd - 1.0) > 1e-9:
        raise ValueError(f"the shares of a split must sum to 1, got {split}")
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    chosen = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special
    labels = input_ids.long().masked_fill(~chosen, IGNORE_INDEX)
    u = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator)
    corrupted = input_ids.clone()
    corrupted[chosen & (u < mask)] = mask_token_id
    to_random = chosen & (u >= mask + same)
    corrupted[to_random] = random_ids[to_random]
    return corrupted, labels
    ### END SOLUTION

# %% [tests] id=corrupt_tests points=3
def name_corrupt_mistakes(split, rate, ordinary, chosen, shows_mask, shows_same, shows_random):
    """Fail with the mistake's name when the shares have its signature: each observed share
    within 5 binomial standard errors of what the mistake gives and more than 5 away from the
    right share."""

    def near(count, total, p):
        return total > 0 and abs(int(count) / total - p) <= 5 * math.sqrt(max(p * (1 - p), 1e-12) / total)

    mask, same, rnd = split
    n = int(chosen.sum())
    if rate != 0.15 and near(n, ordinary, 0.15) and not near(n, ordinary, rate):
        grading.check_true(False, known("0.15 hard-coded"))
    if 0 < mask < 1 and n > 0 and int(shows_mask.sum()) == n and not near(n, ordinary, rate):
        grading.check_true(False, known("labels only where [MASK] is shown"))
    if 0 < mask < 1 and rnd > 0:
        wrong = rnd * (1 - mask)
        if near(shows_random.sum(), n, wrong) and not near(shows_random.sum(), n, rnd):
            grading.check_true(False, known("the second draw not conditioned"))
    if same != rnd and near(shows_same.sum(), n, rnd) and near(shows_random.sum(), n, same):
        if not near(shows_random.sum(), n, rnd):
            grading.check_true(False, known("SAME and RND swapped"))


def check_corruption(split, rate, seed, vocab_size=VOCAB_SIZE, mask_token_id=MASK_ID, rows=128, special_ids=SPECIAL_IDS):
    """Every property of corrupt on one batch of `rows` x 128 tokens; returns the random ids shown.

    A random id equals the original token, or [MASK], with probability 1/V each, so the
    expected shares of the chosen positions are exactly: [MASK] mask + random/V, the original
    same + random/V, another id random (1 - 2/V). Each share is checked within 5 binomial
    standard errors: a correct answer fails one of them with probability below 1e-6 each."""
    ids = make_batch(rows, 128, seed=seed, padded_rows=rows // 8, vocab_size=vocab_size)
    before = ids.clone()
    try:
        out = grading.run(
            corrupt, ids, special_ids, split, vocab_size=vocab_size, mask_token_id=mask_token_id,
            mlm_probability=rate, generator=torch.Generator().manual_seed(seed), forbid=FORBID_SPLIT,
        )
    except Exception as error:
        if raised(error, ZeroDivisionError):
            grading.check_true(False, known("no guard for a MASK share of 1"))
        if raised(error, ValueError) and sum(split) != 1.0:
            grading.check_true(False, known("the sum of the shares compared with 1 exactly"))
        raise
    grading.check_true(isinstance(out, (tuple, list)) and len(out) == 2, "corrupt must return (corrupted_input_ids, labels)")
    corrupted, labels = out
    grading.check_true(torch.equal(ids, before), known("the caller's input_ids modified"))
    grading.check_tensor(labels, shape=ids.shape, dtype=torch.long, what="labels")
    grading.check_tensor(corrupted, shape=ids.shape, what="corrupted_input_ids")
    special = torch.isin(ids, torch.tensor(list(special_ids)))
    chosen = labels != IGNORE_INDEX
    grading.check_true(not (chosen & special).any(), known("special tokens chosen"))
    grading.check_value(labels[chosen], ids[chosen], "labels at the chosen positions (the original ids)")
    n, ordinary = int(chosen.sum()), int((~special).sum())
    shows_mask = chosen & (corrupted == mask_token_id)
    shows_same = chosen & (corrupted == ids)
    shows_random = chosen & ~shows_mask & ~shows_same
    name_corrupt_mistakes(split, rate, ordinary, chosen, shows_mask, shows_same, shows_random)
    grading.check_true(torch.equal(corrupted[~chosen], ids[~chosen]), "a position without a label (-100) was changed: only the chosen positions change")
    mask, same, rnd = split
    grading.check_proportion(n, ordinary, rate, f"share of the ordinary tokens chosen (mlm_probability={rate})")
    where = f" (split {split})"
    grading.check_proportion(shows_mask.sum(), n, mask + rnd / vocab_size, "share of chosen positions showing [MASK]" + where)
    grading.check_proportion(shows_same.sum(), n, same + rnd / vocab_size, "share of chosen positions showing their own token" + where)
    grading.check_proportion(shows_random.sum(), n, rnd * (1 - 2 / vocab_size), "share of chosen positions showing another id" + where)
    return corrupted[shows_random]


check_corruption((0.8, 0.1, 0.1), 0.15, seed=0)
check_corruption((0.0, 0.2, 0.8), 0.15, seed=1)
print("OK corrupt")
### BEGIN HIDDEN TESTS
# purity on a fresh batch, and the generator is used: the same seed gives the same batch
ids = make_batch(32, 64, seed=2)
def seeded(seed, split=(0.5, 0.2, 0.3)):
    return grading.run(corrupt, ids, SPECIAL_IDS, split, vocab_size=VOCAB_SIZE, mask_token_id=MASK_ID, mlm_probability=0.5, generator=torch.Generator().manual_seed(seed), forbid=FORBID_SPLIT)[0]
first, again, other = seeded(3), seeded(3), seeded(4)
grading.check_true(torch.equal(first, again), known("random numbers not drawn from the generator"))
grading.check_true(not torch.equal(first, other), "two generator seeds gave the same ids", hint="draw every random number with generator=generator")
# every row of Table 8 at BERT's rate and at 40% (Wettig et al. 2023)
for number, split in enumerate(TABLE_8):
    for rate in (0.15, 0.4):
        randoms = check_corruption(split, rate, seed=10 + number + (100 if rate == 0.4 else 0))
# splits whose float sum is not exactly 1 (one 5e-10 away; the special ids as a set), another
# [MASK] id and a small vocabulary
check_corruption((0.7, 0.2, 0.1), 0.3, seed=30)
check_corruption((0.8, 0.1, 0.1 + 5e-10), 0.3, seed=33, rows=32, special_ids=set(SPECIAL_IDS))
check_corruption((0.1, 0.6, 0.3), 0.25, seed=31, vocab_size=2000, mask_token_id=7)
# random ids uniform over 0..V-1: all of them with the all-RND row, mean (V-1)/2 and standard
# deviation V/sqrt(12) per draw; 5 standard errors
randoms = check_corruption((0.0, 0.0, 1.0), 0.5, seed=32, vocab_size=2000, mask_token_id=7)
grading.check_true(((randoms >= 0) & (randoms < 2000)).all(), "a random id is outside the vocabulary 0..V-1")
mean_error = abs(randoms.double().mean().item() - 1999 / 2)
grading.check_true(mean_error < 5 * 2000 / (12 * len(randoms)) ** 0.5, "the random ids are not uniform over the whole vocabulary 0..V-1")
# refused splits: a sum other than 1 (1.5e-9 away is more than 1e-9), a negative share (even when
# the sum is 1)
for bad in ((0.8, 0.1, 0.2), (0.5, 0.2, 0.2), (0.8, 0.1, 0.1 + 1.5e-9), (1.2, -0.1, -0.1), (0.9, 0.2, -0.1)):
    try:
        grading.run(corrupt, ids, SPECIAL_IDS, bad, vocab_size=VOCAB_SIZE, mask_token_id=MASK_ID, generator=torch.Generator().manual_seed(5), forbid=FORBID_SPLIT)
    except Exception as error:
        if not raised(error, ValueError):
            raise
    else:
        grading.check_true(False, known("an invalid split accepted") + f"\n  corrupt accepted the split {bad}")
### END HIDDEN TESTS

# %% [markdown] id=static_text
# ## Part 2: static masking with a duplicate factor (2 points)
#
# The original release masks its data once, when it writes the training files
# (`create_pretraining_data.py`). So that the model sees more than one mask of each sentence,
# it writes `dupe_factor` copies of the corpus (10 by default), each masked with new draws, and
# training reads these fixed copies again and again. RoBERTa's *dynamic* masking draws a new
# mask every time a batch is built instead; chapter 3 measures how many positions each recipe
# ever asks the model to predict.
#
# Write `static_masked_copies(sequences, dupe_factor, rng, **masking)` the way the original
# does it:
#
# 1. copy by copy: for each copy $c = 0, \dots, $ `dupe_factor` $- 1$, for each sequence in
#    order, mask it with `create_masked_lm_predictions(tokens, rng=rng, **masking)` (chapter
#    3's original rule, imported for you), with the same `rng` all along, so that every copy
#    gets new draws;
# 2. then shuffle the list of all `dupe_factor * len(sequences)` masked instances once, with
#    `rng.shuffle`, and return it.
#
# Refuse a `dupe_factor` that is not an integer of at least 1 with a `ValueError`, and do not
# modify `sequences` (a list of lists of ids). These are the original's mask draws in the
# original's order, so the same `random.Random` state gives the same masks, instance for
# instance. (The original also shuffles its documents first and cuts them into sentence pairs
# in the same loop, chapter 5; here the pairs are given, so only the masks are drawn.)

# %% [solution] id=static
def static_masked_copies(sequences, dupe_factor, rng, **masking):
    """The original's static data: every sequence masked dupe_factor times, copy by copy, shuffled."""
    ### BEGIN SOLUTION
    if isinstance(dupe_factor, bool) or not isinstance(dupe_factor, int) or dupe_factor < 1:
        raise ValueError(f"dupe_factor must be an integer >= 1, got {dupe_factor!r}")
    instances = []
    for _ in range(dupe_factor):
        for tokens in sequences:
            instances.append(create_masked_lm_predictions(tokens, rng=rng, **masking))
    rng.shuffle(instances)
    return instances
    ### END SOLUTION

# %% [tests] id=static_tests points=2
MASKING = dict(special_token_ids=(CLS_ID, SEP_ID), vocab_size=VOCAB_SIZE, mask_token_id=MASK_ID)


def pairs(count, seed):
    """`count` sequences [CLS] A [SEP] B [SEP] of 12 to 60 random word ids."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        a, b = rng.randint(5, 30), rng.randint(5, 30)
        words = [rng.randrange(999, VOCAB_SIZE) for _ in range(a + b)]
        out.append([CLS_ID, *words[:a], SEP_ID, *words[a:], SEP_ID])
    return out


def restored(instance):
    """The sequence an instance was masked from: its labels put back at their positions."""
    tokens, positions, labels = instance
    tokens = list(tokens)
    for position, label in zip(positions, labels):
        tokens[position] = label
    return tuple(tokens)


def check_copies(sequences, dupe_factor, seed, **masking):
    """Every sequence comes back dupe_factor times, each copy with its own mask."""
    before = [list(s) for s in sequences]
    out = grading.run(static_masked_copies, sequences, dupe_factor, random.Random(seed), forbid=FORBID_STATIC, **MASKING, **masking)
    grading.check_true(sequences == before, "static_masked_copies modified the caller's sequences")
    grading.check_true(not (isinstance(out, list) and len(out) == (dupe_factor - 1) * len(sequences)), known("dupe_factor - 1 copies", "static"))
    grading.check_true(isinstance(out, list) and len(out) == dupe_factor * len(sequences), f"static_masked_copies must return a list of dupe_factor x len(sequences) = {dupe_factor * len(sequences)} instances")
    masks = {}
    for instance in out:
        grading.check_true(isinstance(instance, (tuple, list)) and len(instance) == 3, "each instance is what create_masked_lm_predictions returns: (output_tokens, positions, labels)")
        masks.setdefault(restored(instance), []).append(tuple(instance[1]))
    grading.check_true(sorted(masks) == sorted(set(map(tuple, sequences))) and all(len(m) == dupe_factor for m in masks.values()), f"every sequence must come back exactly dupe_factor = {dupe_factor} times")
    grading.check_true(all(len(set(m)) == dupe_factor for m in masks.values()), known("the same mask in every copy", "static"))
    return out


check_copies(pairs(20, seed=0), 3, seed=1)
print("OK static_masked_copies")
### BEGIN HIDDEN TESTS
def reference_static(sequences, dupe_factor, rng, **masking):
    instances = [create_masked_lm_predictions(tokens, rng=rng, **masking) for _ in range(dupe_factor) for tokens in sequences]
    rng.shuffle(instances)
    return instances


STATIC = dict(forbid=FORBID_STATIC, mistakes="ch10:static", **MASKING)
for count, dupe_factor, seed, extra in ((20, 3, 2, {}), (7, 10, 3, {}), (12, 1, 4, {}), (9, 4, 5, dict(masked_lm_prob=0.4, max_predictions_per_seq=8))):
    sequences = pairs(count, seed)
    check_copies(sequences, dupe_factor, seed + 100, **extra)
    grading.check_equal(static_masked_copies, reference_static, sequences, dupe_factor, random.Random(seed + 200), quiet=True, **STATIC, **extra)
for bad in (0, -1, 2.5):
    try:
        grading.run(static_masked_copies, pairs(3, 6), bad, random.Random(7), forbid=FORBID_STATIC, **MASKING)
    except Exception as error:
        if not raised(error, ValueError):
            raise
    else:
        grading.check_true(False, f"static_masked_copies accepted dupe_factor={bad!r}: it must raise a ValueError")
### END HIDDEN TESTS

# %% [markdown] id=paired_text
# ## Part 3: a paired comparison over seeds (2 points)
#
# Two rows of an ablation (say, 80/10/10 and 100/0/0) are each pretrained and fine-tuned with
# the same seeds $1, \dots, n$, which gives scores $a_1, \dots, a_n$ and $b_1, \dots, b_n$. Seed
# $i$ fixes the data order and the initial weights of *both* runs, so compare them seed by
# seed: the differences $d_i = a_i - b_i$ have the mean
#
# $$\bar d = \frac{1}{n}\sum_i d_i, \qquad \text{standard error } \mathrm{SE} = \frac{s_d}{\sqrt n},
# \qquad s_d = \sqrt{\frac{1}{n-1}\sum_i (d_i - \bar d)^2}$$
#
# ($s_d$: the sample standard deviation, $n - 1$ in its denominator). The course claims a
# difference only when it exceeds two standard errors: the verdict is `"differs"` when
# $|\bar d| > 2\,\mathrm{SE}$ (the sign of $\bar d$ says which row is better) and
# `"cannot tell"` otherwise, so two identical rows ($\bar d = \mathrm{SE} = 0$) cannot be told
# apart.
#
# Write `paired_comparison(a, b)` for two lists of floats, returning `(mean_difference,
# standard_error, verdict)` as two floats and a string. Refuse with a `ValueError` two lists of
# different lengths (the seeds would not pair up) and fewer than 2 seeds (no standard error).
#
# *Hint:* `statistics.mean` and `statistics.stdev` (which divides by $n - 1$), or `math.fsum`
# and `math.sqrt`.

# %% [solution] id=paired
def paired_comparison(a, b):
    """Scores per seed of two rows -> (mean difference a - b, its standard error, verdict)."""
    ### BEGIN SOLUTION
    if len(a) != len(b):
        raise ValueError("a and b must hold one score per seed each: their lengths differ")
    if len(a) < 2:
        raise ValueError("a standard error needs at least 2 seeds")
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    mean = math.fsum(d) / n
    se = math.sqrt(math.fsum((x - mean) ** 2 for x in d) / (n - 1) / n)
    return mean, se, "differs" if abs(mean) > 2 * se else "cannot tell"
    ### END SOLUTION

# %% [tests] id=paired_tests points=2
def reference_paired(a, b):
    """bertcourse.stats.paired_comparison's result as (mean_difference, standard_error, verdict)."""
    from bertcourse import stats

    result = stats.paired_comparison(a, b)
    return result.mean_difference, result.standard_error, result.verdict


PAIRED = dict(forbid=FORBID_PAIRED, mistakes="ch10:paired", rtol=1e-9, atol=1e-12)
# three seeds of two rows: a is better by 0.01 on every seed, a spread of 0.004
grading.check_close(paired_comparison, reference_paired, [0.81, 0.84, 0.80], [0.80, 0.82, 0.80], **PAIRED)
grading.check_close(paired_comparison, reference_paired, [0.5, 0.7, 0.6], [0.6, 0.5, 0.6], **PAIRED)
### BEGIN HIDDEN TESTS
def scores(n, seed, shift, spread):
    g = torch.Generator().manual_seed(seed)
    base = (0.6 + 0.1 * torch.rand(n, generator=g, dtype=torch.float64)).tolist()
    noise = (spread * torch.randn(n, generator=g, dtype=torch.float64)).tolist()
    return base, [x - shift + e for x, e in zip(base, noise)]


for seed in range(40):
    a, b = scores(2 + seed % 9, seed, shift=(seed % 5 - 2) * 0.01, spread=0.01 * (1 + seed % 3))
    grading.check_close(paired_comparison, reference_paired, a, b, quiet=True, **PAIRED)
# the edges of the verdict: identical rows (no difference, no spread), a difference without spread
for a, b in (([0.7, 0.8], [0.7, 0.8]), ([0.7, 0.8, 0.9], [0.6, 0.7, 0.8]), ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])):
    grading.check_close(paired_comparison, reference_paired, a, b, **PAIRED)
for bad in (([0.7, 0.8, 0.9], [0.7, 0.8]), ([0.7], [0.6])):
    try:
        grading.run(paired_comparison, *bad, forbid=FORBID_PAIRED)
    except Exception as error:
        if not raised(error, ValueError):
            raise
    else:
        grading.check_true(False, f"paired_comparison{bad} must raise a ValueError")
print("OK paired_comparison")
### END HIDDEN TESTS

# %% [markdown] id=outro
# ## Going further (not graded)
#
# - With `check_corruption`'s batch, how many chosen positions does the 0/0/100 row leave
#   showing their own token? Why is it not exactly 0?
# - Three seeds give a standard error from two degrees of freedom. How much larger must a
#   difference be, in standard deviations of $d$, to be claimed with 3 seeds than with 10?

# %% [scratch]
