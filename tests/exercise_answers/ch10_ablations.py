# ruff: noqa
# Wrong and alternative answers for the cells of solutions/ch10_ablations (tests/test_exercises.py).
# "# %% wrong <grade id>: <what>" replaces that solution cell and must lose exactly its points;
# "# %% alternative <grade id>: <what>" is correct but written differently: full marks.
# Every block is graded in process; the first two wrong answers of a part also go through nbgrader.
# "# split: dev|eval" (tests/answer_split.py): entries of the mistake catalogues are written
# from the dev half; named/right/wrong is measured on the eval half (scripts/named_mistakes.py).


# %% wrong corrupt: chapter 3's second draw with the unconditional share (random, not random / (1 - mask))
# names: the second draw not conditioned on the first
# split: dev
def corrupt(
    input_ids,
    special_token_ids,
    split,
    *,
    vocab_size,
    mask_token_id,
    mlm_probability=0.15,
    generator=None,
):
    mask, same, rnd = split
    if min(split) < 0 or abs(sum(split) - 1) > 1e-9:
        raise ValueError(f"not a split: {split}")
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    chosen = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special
    labels = torch.where(chosen, input_ids, IGNORE_INDEX).long()
    out = input_ids.clone()
    to_mask = (torch.rand(input_ids.shape, generator=generator) < mask) & chosen
    out[to_mask] = mask_token_id
    to_random = (torch.rand(input_ids.shape, generator=generator) < rnd) & chosen & ~to_mask
    out[to_random] = torch.randint(vocab_size, input_ids.shape, generator=generator)[to_random]
    return out, labels


# %% wrong corrupt: the two draws of transformers without the edge mask = 1 (divides by zero)
# names: no guard for a MASK share of 1
# split: dev
def corrupt(
    input_ids,
    special_token_ids,
    split,
    *,
    vocab_size,
    mask_token_id,
    mlm_probability=0.15,
    generator=None,
):
    mask, same, rnd = split
    if min(split) < 0 or abs(sum(split) - 1) > 1e-9:
        raise ValueError(f"not a split: {split}")
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    chosen = (
        torch.bernoulli(torch.full(input_ids.shape, mlm_probability), generator=generator).bool()
        & ~special
    )
    labels = input_ids.long().masked_fill(~chosen, IGNORE_INDEX)
    out = input_ids.clone()
    to_mask = (
        torch.bernoulli(torch.full(input_ids.shape, mask), generator=generator).bool() & chosen
    )
    out[to_mask] = mask_token_id
    p_random = rnd / (1 - mask)
    to_random = (
        torch.bernoulli(torch.full(input_ids.shape, p_random), generator=generator).bool()
        & chosen
        & ~to_mask
    )
    out[to_random] = torch.randint(vocab_size, input_ids.shape, generator=generator)[to_random]
    return out, labels


# %% wrong corrupt: unpacks the split as (mask, random, same), transformers' order of arguments
# names: SAME and RND swapped
# split: eval
def corrupt(
    input_ids,
    special_token_ids,
    split,
    *,
    vocab_size,
    mask_token_id,
    mlm_probability=0.15,
    generator=None,
):
    mask, rnd, same = split
    if min(split) < 0 or abs(mask + rnd + same - 1) > 1e-9:
        raise ValueError(f"not a split: {split}")
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    chosen = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special
    labels = input_ids.long().masked_fill(~chosen, IGNORE_INDEX)
    u = torch.rand(input_ids.shape, generator=generator)
    out = input_ids.clone()
    out[chosen & (u < mask)] = mask_token_id
    to_random = chosen & (u >= mask) & (u < mask + rnd)
    out[to_random] = torch.randint(vocab_size, input_ids.shape, generator=generator)[to_random]
    return out, labels


# %% wrong corrupt: labels set where [MASK] is written (the SAME and RND positions are not predicted)
# names: labels only where [MASK] is shown
# split: eval
def corrupt(
    input_ids,
    special_token_ids,
    split,
    *,
    vocab_size,
    mask_token_id,
    mlm_probability=0.15,
    generator=None,
):
    mask, same, rnd = split
    if min(split) < 0 or abs(sum(split) - 1) > 1e-9:
        raise ValueError(f"not a split: {split}")
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    chosen = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special
    u = torch.rand(input_ids.shape, generator=generator)
    out = input_ids.clone()
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    to_mask = chosen & (u < mask)
    out[to_mask] = mask_token_id
    labels[to_mask] = input_ids[to_mask]
    to_random = chosen & (u >= mask + same)
    out[to_random] = torch.randint(vocab_size, input_ids.shape, generator=generator)[to_random]
    return out, labels


# %% wrong corrupt: rejects a split whose float sum is not exactly 1 (0.7 + 0.2 + 0.1)
# names: the sum of the shares compared with 1 exactly
# split: eval
def corrupt(
    input_ids,
    special_token_ids,
    split,
    *,
    vocab_size,
    mask_token_id,
    mlm_probability=0.15,
    generator=None,
):
    mask, same, rnd = split
    if mask < 0 or same < 0 or rnd < 0 or mask + same + rnd != 1:
        raise ValueError(f"not a split: {split}")
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    chosen = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special
    labels = input_ids.long().masked_fill(~chosen, IGNORE_INDEX)
    u = torch.rand(input_ids.shape, generator=generator)
    out = input_ids.clone()
    out[chosen & (u < mask)] = mask_token_id
    to_random = chosen & (u >= mask + same)
    out[to_random] = torch.randint(vocab_size, input_ids.shape, generator=generator)[to_random]
    return out, labels


# %% wrong corrupt: checks the sum but not the signs ((1.2, -0.1, -0.1) sums to 1)
# names: an invalid split accepted
# split: dev
def corrupt(
    input_ids,
    special_token_ids,
    split,
    *,
    vocab_size,
    mask_token_id,
    mlm_probability=0.15,
    generator=None,
):
    mask, same, rnd = split
    if abs(mask + same + rnd - 1) > 1e-9:
        raise ValueError(f"the shares must sum to 1, got {split}")
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    chosen = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special
    labels = input_ids.long().masked_fill(~chosen, IGNORE_INDEX)
    u = torch.rand(input_ids.shape, generator=generator)
    out = input_ids.clone()
    out[chosen & (u < mask)] = mask_token_id
    to_random = chosen & (u >= mask + same)
    out[to_random] = torch.randint(vocab_size, input_ids.shape, generator=generator)[to_random]
    return out, labels


# %% wrong corrupt: 0.15 hard-coded
# names: 0.15 hard-coded instead of mlm_probability
# split: dev
def corrupt(
    input_ids,
    special_token_ids,
    split,
    *,
    vocab_size,
    mask_token_id,
    mlm_probability=0.15,
    generator=None,
):
    mask, same, rnd = split
    if min(split) < 0 or abs(sum(split) - 1) > 1e-9:
        raise ValueError(f"not a split: {split}")
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    chosen = (torch.rand(input_ids.shape, generator=generator) < 0.15) & ~special
    labels = input_ids.long().masked_fill(~chosen, IGNORE_INDEX)
    u = torch.rand(input_ids.shape, generator=generator)
    out = input_ids.clone()
    out[chosen & (u < mask)] = mask_token_id
    to_random = chosen & (u >= mask + same)
    out[to_random] = torch.randint(vocab_size, input_ids.shape, generator=generator)[to_random]
    return out, labels


# %% wrong corrupt: random ids drawn from the ordinary word ids only (999 and up), not the whole vocabulary
# split: dev
def corrupt(
    input_ids,
    special_token_ids,
    split,
    *,
    vocab_size,
    mask_token_id,
    mlm_probability=0.15,
    generator=None,
):
    mask, same, rnd = split
    if min(split) < 0 or abs(sum(split) - 1) > 1e-9:
        raise ValueError(f"not a split: {split}")
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    chosen = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special
    labels = input_ids.long().masked_fill(~chosen, IGNORE_INDEX)
    u = torch.rand(input_ids.shape, generator=generator)
    out = input_ids.clone()
    out[chosen & (u < mask)] = mask_token_id
    to_random = chosen & (u >= mask + same)
    out[to_random] = torch.randint(999, vocab_size, input_ids.shape, generator=generator)[to_random]
    return out, labels


# %% wrong corrupt: writes the corruption into the caller's input_ids
# names: the caller's input_ids modified in place
# split: dev
def corrupt(
    input_ids,
    special_token_ids,
    split,
    *,
    vocab_size,
    mask_token_id,
    mlm_probability=0.15,
    generator=None,
):
    mask, same, rnd = split
    if min(split) < 0 or abs(sum(split) - 1) > 1e-9:
        raise ValueError(f"not a split: {split}")
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    chosen = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special
    labels = input_ids.long().masked_fill(~chosen, IGNORE_INDEX)
    u = torch.rand(input_ids.shape, generator=generator)
    input_ids[chosen & (u < mask)] = mask_token_id
    to_random = chosen & (u >= mask + same)
    input_ids[to_random] = torch.randint(vocab_size, input_ids.shape, generator=generator)[
        to_random
    ]
    return input_ids, labels


# %% wrong corrupt: PyTorch's global generator (a seed does not fix the batch)
# names: random numbers not drawn from the generator argument
# split: dev
def corrupt(
    input_ids,
    special_token_ids,
    split,
    *,
    vocab_size,
    mask_token_id,
    mlm_probability=0.15,
    generator=None,
):
    mask, same, rnd = split
    if min(split) < 0 or abs(sum(split) - 1) > 1e-9:
        raise ValueError(f"not a split: {split}")
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    chosen = (torch.rand(input_ids.shape) < mlm_probability) & ~special
    labels = input_ids.long().masked_fill(~chosen, IGNORE_INDEX)
    u = torch.rand(input_ids.shape)
    out = input_ids.clone()
    out[chosen & (u < mask)] = mask_token_id
    to_random = chosen & (u >= mask + same)
    out[to_random] = torch.randint(vocab_size, input_ids.shape)[to_random]
    return out, labels


# %% wrong corrupt: special tokens can be chosen
# names: special tokens chosen too
# split: eval
def corrupt(
    input_ids,
    special_token_ids,
    split,
    *,
    vocab_size,
    mask_token_id,
    mlm_probability=0.15,
    generator=None,
):
    mask, same, rnd = split
    if min(split) < 0 or abs(sum(split) - 1) > 1e-9:
        raise ValueError(f"not a split: {split}")
    chosen = torch.rand(input_ids.shape, generator=generator) < mlm_probability
    labels = input_ids.long().masked_fill(~chosen, IGNORE_INDEX)
    u = torch.rand(input_ids.shape, generator=generator)
    out = input_ids.clone()
    out[chosen & (u < mask)] = mask_token_id
    to_random = chosen & (u >= mask + same)
    out[to_random] = torch.randint(vocab_size, input_ids.shape, generator=generator)[to_random]
    return out, labels


# %% alternative corrupt: transformers' two Bernoulli draws, the second one guarded
def corrupt(
    input_ids,
    special_token_ids,
    split,
    *,
    vocab_size,
    mask_token_id,
    mlm_probability=0.15,
    generator=None,
):
    mask, same, rnd = (float(s) for s in split)
    if any(s < 0 for s in (mask, same, rnd)):
        raise ValueError(f"negative share in {split}")
    if not math.isclose(mask + same + rnd, 1.0, rel_tol=0, abs_tol=1e-9):
        raise ValueError(f"shares sum to {mask + same + rnd}, not 1")
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    p = torch.full(input_ids.shape, mlm_probability).masked_fill(special, 0.0)
    chosen = torch.bernoulli(p, generator=generator).bool()
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE_INDEX)).long()
    out = input_ids.clone()
    to_mask = (
        torch.bernoulli(torch.full(input_ids.shape, mask), generator=generator).bool() & chosen
    )
    out[to_mask] = mask_token_id
    if mask < 1:
        p_random = min(1.0, rnd / (1 - mask))
        to_random = (
            torch.bernoulli(torch.full(input_ids.shape, p_random), generator=generator).bool()
            & chosen
            & ~to_mask
        )
        out = torch.where(
            to_random, torch.randint(0, vocab_size, input_ids.shape, generator=generator), out
        )
    return out, labels


# %% alternative corrupt: one categorical draw per chosen position (torch.multinomial)
def corrupt(
    input_ids,
    special_token_ids,
    split,
    *,
    vocab_size,
    mask_token_id,
    mlm_probability=0.15,
    generator=None,
):
    if len(split) != 3 or min(split) < 0 or abs(sum(split) - 1) > 1e-9:
        raise ValueError(f"a split is three non-negative shares summing to 1, got {split}")
    special = torch.isin(input_ids, torch.tensor(list(special_token_ids)))
    chosen = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special
    labels = input_ids.long().masked_fill(~chosen, IGNORE_INDEX)
    n = int(chosen.sum())
    out = input_ids.clone()
    if n:
        kind = torch.multinomial(
            torch.tensor(split, dtype=torch.float64), n, replacement=True, generator=generator
        )
        random_ids = torch.randint(vocab_size, (n,), generator=generator)
        values = out[chosen]
        values = torch.where(kind == 0, mask_token_id, torch.where(kind == 2, random_ids, values))
        out[chosen] = values
    return out, labels


# %% wrong paired: the standard error of two independent samples (the seeds' pairing ignored)
# names: an unpaired standard error
# split: eval
def paired_comparison(a, b):
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("one score per seed in each, at least 2 seeds")
    n = len(a)
    mean = sum(a) / n - sum(b) / n
    var_a = sum((x - sum(a) / n) ** 2 for x in a) / (n - 1)
    var_b = sum((y - sum(b) / n) ** 2 for y in b) / (n - 1)
    se = math.sqrt(var_a / n + var_b / n)
    verdict = "differs" if abs(mean) > 2 * se else "cannot tell"
    return mean, se, verdict


# %% wrong paired: statistics.pstdev (divides by n)
# names: the population standard deviation
# split: eval
def paired_comparison(a, b):
    import statistics

    if len(a) != len(b) or len(a) < 2:
        raise ValueError("one score per seed in each, at least 2 seeds")
    d = [x - y for x, y in zip(a, b)]
    mean = statistics.mean(d)
    se = statistics.pstdev(d) / math.sqrt(len(d))
    verdict = "differs" if abs(mean) > 2 * se else "cannot tell"
    return mean, se, verdict


# %% wrong paired: the differences' standard deviation as the standard error
# names: the standard deviation instead of the standard error
# split: eval
def paired_comparison(a, b):
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("one score per seed in each, at least 2 seeds")
    d = [x - y for x, y in zip(a, b)]
    mean = sum(d) / len(d)
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1))
    verdict = "differs" if abs(mean) > 2 * sd else "cannot tell"
    return mean, sd, verdict


# %% wrong paired: >= 2 SE claims a difference between two identical rows
# names: a difference claimed at exactly 2 SE
# split: eval
def paired_comparison(a, b):
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("one score per seed in each, at least 2 seeds")
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    mean = sum(d) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n)
    return mean, se, "differs" if abs(mean) >= 2 * se else "cannot tell"


# %% wrong paired: claims only a positive difference (mean > 2 SE, not |mean| > 2 SE)
# names: a difference of b over a never claimed
# split: eval
def paired_comparison(a, b):
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("one score per seed in each, at least 2 seeds")
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    mean = sum(d) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n)
    return mean, se, "differs" if mean > 2 * se else "cannot tell"


# %% wrong paired: zip pairs up what it can (no error for rows of different lengths)
# split: eval
def paired_comparison(a, b):
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    if n < 2:
        raise ValueError("at least 2 seeds")
    mean = sum(d) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n)
    verdict = "differs" if abs(mean) > 2 * se else "cannot tell"
    return mean, se, verdict


# %% alternative paired: the statistics module
def paired_comparison(a, b):
    import statistics

    if len(a) != len(b):
        raise ValueError("a and b must have one score per seed each")
    if len(a) < 2:
        raise ValueError("need at least 2 seeds")
    d = [x - y for x, y in zip(a, b)]
    mean = statistics.mean(d)
    se = statistics.stdev(d) / math.sqrt(len(d))
    if abs(mean) > 2 * se:
        return mean, se, "differs"
    return mean, se, "cannot tell"


# %% alternative paired: float64 tensors (torch.std divides by n - 1)
def paired_comparison(a, b):
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("need two rows of the same length, at least 2 seeds")
    d = torch.tensor(a, dtype=torch.float64) - torch.tensor(b, dtype=torch.float64)
    mean = d.mean().item()
    se = (d.std() / len(d) ** 0.5).item()
    return mean, se, ("differs" if abs(mean) > 2 * se else "cannot tell")


# %% wrong static: masks every sequence once and repeats the list dupe_factor times
# names: the same mask in every copy
# split: eval
def static_masked_copies(sequences, dupe_factor, rng, **masking):
    if not isinstance(dupe_factor, int) or dupe_factor < 1:
        raise ValueError("dupe_factor must be a positive integer")
    masked = [create_masked_lm_predictions(tokens, rng=rng, **masking) for tokens in sequences]
    instances = masked * dupe_factor
    rng.shuffle(instances)
    return instances


# %% wrong static: the copies of each sequence drawn one after the other
# names: the copies drawn sequence by sequence
# split: dev
def static_masked_copies(sequences, dupe_factor, rng, **masking):
    if not isinstance(dupe_factor, int) or dupe_factor < 1:
        raise ValueError("dupe_factor must be a positive integer")
    instances = []
    for tokens in sequences:
        for _ in range(dupe_factor):
            instances.append(create_masked_lm_predictions(tokens, rng=rng, **masking))
    rng.shuffle(instances)
    return instances


# %% wrong static: no shuffle (training reads copy 1 of everything, then copy 2, ...)
# names: the instances not shuffled
# split: eval
def static_masked_copies(sequences, dupe_factor, rng, **masking):
    if not isinstance(dupe_factor, int) or dupe_factor < 1:
        raise ValueError("dupe_factor must be a positive integer")
    return [
        create_masked_lm_predictions(tokens, rng=rng, **masking)
        for _ in range(dupe_factor)
        for tokens in sequences
    ]


# %% wrong static: shuffles inside the copy loop
# names: each copy shuffled on its own
# split: eval
def static_masked_copies(sequences, dupe_factor, rng, **masking):
    if not isinstance(dupe_factor, int) or dupe_factor < 1:
        raise ValueError("dupe_factor must be a positive integer")
    instances = []
    for _ in range(dupe_factor):
        copy = [create_masked_lm_predictions(tokens, rng=rng, **masking) for tokens in sequences]
        rng.shuffle(copy)
        instances.extend(copy)
    return instances


# %% wrong static: range(1, dupe_factor), one copy short
# names: dupe_factor - 1 copies
# split: eval
def static_masked_copies(sequences, dupe_factor, rng, **masking):
    if not isinstance(dupe_factor, int) or dupe_factor < 1:
        raise ValueError("dupe_factor must be a positive integer")
    instances = []
    for _ in range(1, dupe_factor):
        for tokens in sequences:
            instances.append(create_masked_lm_predictions(tokens, rng=rng, **masking))
    rng.shuffle(instances)
    return instances


# %% wrong static: shuffles the caller's list of sequences first
# split: eval
def static_masked_copies(sequences, dupe_factor, rng, **masking):
    if not isinstance(dupe_factor, int) or dupe_factor < 1:
        raise ValueError("dupe_factor must be a positive integer")
    rng.shuffle(sequences)
    instances = [
        create_masked_lm_predictions(tokens, rng=rng, **masking)
        for _ in range(dupe_factor)
        for tokens in sequences
    ]
    rng.shuffle(instances)
    return instances


# %% wrong static: no check of dupe_factor (0 gives an empty data file)
# split: eval
def static_masked_copies(sequences, dupe_factor, rng, **masking):
    instances = []
    for _ in range(dupe_factor):
        for tokens in sequences:
            instances.append(create_masked_lm_predictions(tokens, rng=rng, **masking))
    rng.shuffle(instances)
    return instances


# %% alternative static: one comprehension, the check by operator.index
def static_masked_copies(sequences, dupe_factor, rng, **masking):
    if type(dupe_factor) is not int or dupe_factor <= 0:
        raise ValueError(f"need a whole number of copies >= 1, not {dupe_factor!r}")
    instances = [
        create_masked_lm_predictions(list(tokens), rng=rng, **masking)
        for copy in range(dupe_factor)
        for tokens in sequences
    ]
    rng.shuffle(instances)
    return instances
