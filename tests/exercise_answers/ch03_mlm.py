# ruff: noqa
# Wrong and alternative answers for the cells of solutions/ch03_mlm (tests/test_exercises.py).
# "# %% wrong <grade id>: <what>" replaces that solution cell and must lose exactly its points;
# "# %% alternative <grade id>: <what>" is correct but written differently: full marks.
# Every block is graded in process; the first two wrong answers of a part also go through nbgrader.
# "# split: dev|eval" (tests/answer_split.py): entries of the mistake catalogues are written
# from the dev half; named/right/wrong is measured on the eval half (scripts/named_mistakes.py).


# %% wrong choose: special tokens can be chosen
# split: dev
# names: special tokens chosen too
def choose_positions(input_ids, special_token_ids, mlm_probability=0.15, generator=None):
    return torch.rand(input_ids.shape, generator=generator) < mlm_probability


# %% wrong choose: a fixed count round(0.15 n) per row (the original's rule, not independent draws)
# split: eval
# names: a fixed number chosen per row
def choose_positions(input_ids, special_token_ids, mlm_probability=0.15, generator=None):
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    chosen = torch.zeros_like(special)
    for b in range(input_ids.shape[0]):
        candidates = (~special[b]).nonzero().flatten()
        k = round(len(candidates) * mlm_probability)
        order = torch.randperm(len(candidates), generator=generator)[:k]
        chosen[b, candidates[order]] = True
    return chosen


# %% wrong choose: ignores the generator (PyTorch's global random numbers: not reproducible)
# split: dev
# names: random numbers not drawn from the generator argument
def choose_positions(input_ids, special_token_ids, mlm_probability=0.15, generator=None):
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    return (torch.rand(input_ids.shape) < mlm_probability) & ~special


# %% wrong choose: 0.15 hard-coded
# split: eval
# names: 0.15 hard-coded instead of mlm_probability
def choose_positions(input_ids, special_token_ids, mlm_probability=0.15, generator=None):
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    return (torch.rand(input_ids.shape, generator=generator) < 0.15) & ~special


# %% wrong choose: marks the chosen positions in input_ids (the caller's batch is corrupted)
# split: dev
# names: the caller's input_ids modified in place
def choose_positions(input_ids, special_token_ids, mlm_probability=0.15, generator=None):
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    draw = torch.rand(input_ids.shape, generator=generator) < mlm_probability
    input_ids[draw & ~special] = -1
    return input_ids == -1


# %% wrong choose: excludes the special tokens by overwriting them in input_ids (idempotent, so only a fresh batch shows it)
# split: dev
# names: the caller's input_ids modified in place
def choose_positions(input_ids, special_token_ids, mlm_probability=0.15, generator=None):
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    input_ids[special] = -1
    return (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & (input_ids != -1)


# %% wrong choose: a generator of its own with a fixed seed (every seed gives the same choice)
# split: dev
# names: the same draws whatever the generator's seed
def choose_positions(input_ids, special_token_ids, mlm_probability=0.15, generator=None):
    generator = torch.Generator().manual_seed(0)
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    return (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special


# %% wrong replace: every chosen token becomes [MASK]
# split: eval
# names: every chosen position [MASK]
def replace_chosen(
    input_ids,
    chosen,
    *,
    vocab_size,
    mask_token_id,
    mask_replace_prob=0.8,
    random_replace_prob=0.1,
    generator=None,
):
    labels = torch.where(chosen, input_ids, IGNORE_INDEX)
    masked = input_ids.clone()
    masked[chosen] = mask_token_id
    return masked, labels


# %% wrong replace: Bernoulli(0.1) in the second draw (2% random tokens instead of 10%)
# split: eval
# names: the unconditional 0.1
def replace_chosen(
    input_ids,
    chosen,
    *,
    vocab_size,
    mask_token_id,
    mask_replace_prob=0.8,
    random_replace_prob=0.1,
    generator=None,
):
    labels = torch.where(chosen, input_ids, IGNORE_INDEX)
    masked = input_ids.clone()
    to_mask = (torch.rand(input_ids.shape, generator=generator) < mask_replace_prob) & chosen
    masked[to_mask] = mask_token_id
    to_random = (
        (torch.rand(input_ids.shape, generator=generator) < random_replace_prob) & chosen & ~to_mask
    )
    masked[to_random] = torch.randint(vocab_size, input_ids.shape, generator=generator)[to_random]
    return masked, labels


# %% wrong replace: seed 002's per-row split, int(n * 0.8) [MASK] and int(n * 0.1) random ids
# split: eval
# names: a per-row split by counts
def replace_chosen(
    input_ids,
    chosen,
    *,
    vocab_size,
    mask_token_id,
    mask_replace_prob=0.8,
    random_replace_prob=0.1,
    generator=None,
):
    labels = input_ids.long().masked_fill(~chosen, IGNORE_INDEX)
    masked = input_ids.clone()
    for b in range(input_ids.shape[0]):
        positions = chosen[b].nonzero().squeeze(-1)
        positions = positions[torch.randperm(len(positions), generator=generator)]
        n = len(positions)
        n_mask, n_random = int(n * mask_replace_prob), int(n * random_replace_prob)
        masked[b, positions[:n_mask]] = mask_token_id
        rand = positions[n_mask : n_mask + n_random]
        masked[b, rand] = torch.randint(vocab_size, (len(rand),), generator=generator)
    return masked, labels


# %% wrong replace: the statement's formula without its edge (divides by zero when mask_replace_prob = 1)
# split: dev
# names: no guard for mask_replace_prob = 1
def replace_chosen(
    input_ids,
    chosen,
    *,
    vocab_size,
    mask_token_id,
    mask_replace_prob=0.8,
    random_replace_prob=0.1,
    generator=None,
):
    labels = input_ids.long().masked_fill(~chosen, IGNORE_INDEX)
    masked = input_ids.clone()
    to_mask = (torch.rand(input_ids.shape, generator=generator) < mask_replace_prob) & chosen
    masked[to_mask] = mask_token_id
    p_random = random_replace_prob / (1.0 - mask_replace_prob)
    to_random = (torch.rand(input_ids.shape, generator=generator) < p_random) & chosen & ~to_mask
    masked[to_random] = torch.randint(vocab_size, input_ids.shape, generator=generator)[to_random]
    return masked, labels


# %% wrong replace: the global torch generator instead of the argument (not reproducible)
# split: eval
# names: random numbers not drawn from the generator argument
def replace_chosen(
    input_ids,
    chosen,
    *,
    vocab_size,
    mask_token_id,
    mask_replace_prob=0.8,
    random_replace_prob=0.1,
    generator=None,
):
    labels = input_ids.long().masked_fill(~chosen, IGNORE_INDEX)
    masked = input_ids.clone()
    u = torch.rand(input_ids.shape)
    masked[(u < mask_replace_prob) & chosen] = mask_token_id
    to_random = (u >= mask_replace_prob) & (u < mask_replace_prob + random_replace_prob) & chosen
    masked[to_random] = torch.randint(vocab_size, input_ids.shape)[to_random]
    return masked, labels


# %% alternative replace: the statement's two steps, with the edge handled by a guard
def replace_chosen(
    input_ids,
    chosen,
    *,
    vocab_size,
    mask_token_id,
    mask_replace_prob=0.8,
    random_replace_prob=0.1,
    generator=None,
):
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE_INDEX)).long()
    masked = input_ids.clone()
    to_mask = (torch.rand(input_ids.shape, generator=generator) < mask_replace_prob) & chosen
    masked[to_mask] = mask_token_id
    if mask_replace_prob < 1.0:
        p_random = random_replace_prob / (1.0 - mask_replace_prob)
        to_random = (
            (torch.rand(input_ids.shape, generator=generator) < p_random) & chosen & ~to_mask
        )
        ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator)
        masked = torch.where(to_random, ids, masked)
    return masked, labels


# %% wrong replace: labels at every position (the loss would count unmasked tokens)
# split: eval
# names: labels at every position
def replace_chosen(
    input_ids,
    chosen,
    *,
    vocab_size,
    mask_token_id,
    mask_replace_prob=0.8,
    random_replace_prob=0.1,
    generator=None,
):
    labels = input_ids.clone()
    masked = input_ids.clone()
    u = torch.rand(input_ids.shape, generator=generator)
    masked[chosen & (u < mask_replace_prob)] = mask_token_id
    to_random = chosen & (u >= mask_replace_prob) & (u < mask_replace_prob + random_replace_prob)
    masked[to_random] = torch.randint(vocab_size, input_ids.shape, generator=generator)[to_random]
    return masked, labels


# %% wrong replace: writes into input_ids (the caller's batch is corrupted)
# split: dev
# names: the caller's input_ids modified in place
def replace_chosen(
    input_ids,
    chosen,
    *,
    vocab_size,
    mask_token_id,
    mask_replace_prob=0.8,
    random_replace_prob=0.1,
    generator=None,
):
    labels = torch.where(chosen, input_ids, IGNORE_INDEX)
    u = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator)
    input_ids[chosen & (u < mask_replace_prob)] = mask_token_id
    to_random = chosen & (u >= mask_replace_prob) & (u < mask_replace_prob + random_replace_prob)
    input_ids[to_random] = random_ids[to_random]
    return input_ids, labels


# %% wrong count: int() truncates instead of rounding
# split: eval
def num_predictions(seq_len, masked_lm_prob=0.15, max_predictions_per_seq=20):
    return min(max_predictions_per_seq, max(1, int(seq_len * masked_lm_prob)))


# %% wrong count: [CLS] and [SEP] left out of the count (round((seq_len - 2) * 0.15))
# split: eval
# names: [CLS] and [SEP] left out of n
def num_predictions(seq_len, masked_lm_prob=0.15, max_predictions_per_seq=20):
    return min(max_predictions_per_seq, max(1, round((seq_len - 2) * masked_lm_prob)))


# %% wrong count: rounds halves up (floor(x + 0.5)), not to even
# split: eval
import math


def num_predictions(seq_len, masked_lm_prob=0.15, max_predictions_per_seq=20):
    return min(max_predictions_per_seq, max(1, math.floor(seq_len * masked_lm_prob + 0.5)))


# %% wrong count: no minimum of 1
# split: dev
# names: no minimum of 1
def num_predictions(seq_len, masked_lm_prob=0.15, max_predictions_per_seq=20):
    return min(max_predictions_per_seq, round(seq_len * masked_lm_prob))


# %% wrong words: special tokens become words
# split: eval
# names: special tokens grouped as words
def word_groups(tokens, special_tokens=("[CLS]", "[SEP]")):
    groups = []
    for position, token in enumerate(tokens):
        if token.startswith("##") and groups:
            groups[-1].append(position)
        else:
            groups.append([position])
    return groups


# %% wrong words: every token is its own word
# split: eval
# names: every piece a word of its own
def word_groups(tokens, special_tokens=("[CLS]", "[SEP]")):
    return [[i] for i, token in enumerate(tokens) if token not in special_tokens]


# %% wrong words: a '##' piece starts a new word and the next token joins it
# split: eval
# names: a '##' piece joined to the word after it
def word_groups(tokens, special_tokens=("[CLS]", "[SEP]")):
    groups = []
    for position, token in enumerate(tokens):
        if token in special_tokens:
            continue
        if groups and tokens[position - 1].startswith("##"):
            groups[-1].append(position)
        else:
            groups.append([position])
    return groups


# %% alternative choose: a Python loop, one draw per token
def choose_positions(input_ids, special_token_ids, mlm_probability=0.15, generator=None):
    specials = set(int(i) for i in special_token_ids)
    chosen = torch.zeros(input_ids.shape, dtype=torch.bool)
    u = torch.rand(input_ids.shape, generator=generator)
    for b in range(input_ids.shape[0]):
        for i in range(input_ids.shape[1]):
            if int(input_ids[b, i]) not in specials and u[b, i] < mlm_probability:
                chosen[b, i] = True
    return chosen


# %% alternative replace: one uniform draw split into [0, 0.8), [0.8, 0.9), [0.9, 1)
def replace_chosen(
    input_ids,
    chosen,
    *,
    vocab_size,
    mask_token_id,
    mask_replace_prob=0.8,
    random_replace_prob=0.1,
    generator=None,
):
    u = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator)
    masked = torch.where(
        chosen & (u < mask_replace_prob), torch.full_like(input_ids, mask_token_id), input_ids
    )
    to_random = chosen & (u >= mask_replace_prob) & (u < mask_replace_prob + random_replace_prob)
    masked = torch.where(to_random, random_ids, masked)
    labels = torch.full_like(input_ids, IGNORE_INDEX, dtype=torch.long)
    labels[chosen] = input_ids[chosen]
    return masked, labels


# %% alternative count: explicit banker's rounding
def num_predictions(seq_len, masked_lm_prob=0.15, max_predictions_per_seq=20):
    x = seq_len * masked_lm_prob
    k = int(x)
    if x - k > 0.5 or (x - k == 0.5 and k % 2 == 1):
        k += 1
    return int(sorted([1, k, max_predictions_per_seq])[1]) if max_predictions_per_seq >= 1 else 0


# %% alternative words: start indices first, then slices
def word_groups(tokens, special_tokens=("[CLS]", "[SEP]")):
    positions = [i for i, t in enumerate(tokens) if t not in special_tokens]
    groups = []
    for i in positions:
        if groups and tokens[i].startswith("##"):
            groups[-1] = groups[-1] + [i]
        else:
            groups.append([i])
    return groups
