# ruff: noqa
# Wrong and alternative answers for the cells of solutions/ch05_nsp (tests/test_exercises.py).
# "# %% wrong <grade id>: <what>" replaces that solution cell and must lose exactly its points;
# "# %% alternative <grade id>: <what>" is correct but written differently: full marks.
# Every block is graded in process; the first two wrong answers of a part also go through nbgrader.
# "# split: dev|eval" (tests/answer_split.py): entries of the mistake catalogues are written
# from the dev half; named/right/wrong is measured on the eval half (scripts/named_mistakes.py).


# %% wrong pair: segment B's type starts at the [SEP] after A
# split: eval
# names: segment B's token type starting at the [SEP]
def make_pair(tokens_a, tokens_b, cls_id=CLS_ID, sep_id=SEP_ID):
    input_ids = [cls_id, *tokens_a, sep_id, *tokens_b, sep_id]
    return input_ids, [0] * (len(tokens_a) + 1) + [1] * (len(tokens_b) + 2)


# %% wrong pair: the final [SEP] gets type 0
# split: eval
# names: the final [SEP] typed 0
def make_pair(tokens_a, tokens_b, cls_id=CLS_ID, sep_id=SEP_ID):
    input_ids = [cls_id, *tokens_a, sep_id, *tokens_b, sep_id]
    return input_ids, [0] * (len(tokens_a) + 2) + [1] * len(tokens_b) + [0]


# %% wrong pair: no final [SEP]
# split: dev
# names: no [SEP] after segment B
def make_pair(tokens_a, tokens_b, cls_id=CLS_ID, sep_id=SEP_ID):
    return [cls_id, *tokens_a, sep_id, *tokens_b], [0] * (len(tokens_a) + 2) + [1] * len(tokens_b)


# %% wrong truncate: always cuts A
# split: eval
def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    a, b = list(tokens_a), list(tokens_b)
    while len(a) + len(b) > max_num_tokens and a:
        if rng.random() < 0.5:
            del a[0]
        else:
            a.pop()
    return a, b


# %% wrong truncate: cuts the shorter segment
# split: eval
def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    a, b = list(tokens_a), list(tokens_b)
    while len(a) + len(b) > max_num_tokens:
        shorter = a if len(a) < len(b) else b
        if not shorter:
            shorter = a if a else b
        if rng.random() < 0.5:
            del shorter[0]
        else:
            shorter.pop()
    return a, b


# %% wrong truncate: always from the back (no random draw)
# split: eval
def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    a, b = list(tokens_a), list(tokens_b)
    while len(a) + len(b) > max_num_tokens:
        (a if len(a) > len(b) else b).pop()
    return a, b


# %% wrong pairs: inverted labels (1 = B follows A)
# split: eval
# names: NSP labels inverted
def nsp_pairs(documents, rng):
    pairs = []
    for d, document in enumerate(documents):
        for i in range(len(document) - 1):
            if rng.random() < 0.5:
                other = rng.choice([j for j in range(len(documents)) if j != d])
                pairs.append((document[i], rng.choice(documents[other]), 0))
            else:
                pairs.append((document[i], document[i + 1], 1))
    return pairs


# %% wrong pairs: the random B may come from A's own document
# split: dev
# names: a random B from A's own document
def nsp_pairs(documents, rng):
    pairs = []
    for d, document in enumerate(documents):
        for i in range(len(document) - 1):
            if rng.random() < 0.5:
                other = rng.randrange(len(documents))
                pairs.append((document[i], rng.choice(documents[other]), NOT_NEXT))
            else:
                pairs.append((document[i], document[i + 1], IS_NEXT))
    return pairs


# %% wrong pairs: random B with probability 0.1 instead of 0.5
# split: eval
def nsp_pairs(documents, rng):
    pairs = []
    for d, document in enumerate(documents):
        for i in range(len(document) - 1):
            if rng.random() < 0.1:
                other = rng.choice([j for j in range(len(documents)) if j != d])
                pairs.append((document[i], rng.choice(documents[other]), NOT_NEXT))
            else:
                pairs.append((document[i], document[i + 1], IS_NEXT))
    return pairs


# %% wrong pairs: one coin per document (every pair of a document IS_NEXT, or every one NOT_NEXT)
# split: dev
# names: one coin per document, not one per pair
def nsp_pairs(documents, rng):
    pairs = []
    for d, document in enumerate(documents):
        random_b = rng.random() < 0.5
        for i in range(len(document) - 1):
            if random_b:
                other = rng.choice([e for e in range(len(documents)) if e != d])
                pairs.append((document[i], rng.choice(documents[other]), NOT_NEXT))
            else:
                pairs.append((document[i], document[i + 1], IS_NEXT))
    return pairs


# %% wrong loss: accuracy with the argmax over the batch (dim 0)
# split: eval
# names: the accuracy's argmax over the batch
def nsp_loss_and_accuracy(logits, labels):
    loss = -torch.log_softmax(logits, dim=-1).gather(1, labels[:, None]).mean()
    return loss, (logits.argmax(dim=0)[labels] == labels).float().mean()


# %% wrong loss: calls F.cross_entropy (forbidden)
# split: dev
def nsp_loss_and_accuracy(logits, labels):
    return F.cross_entropy(logits, labels), (logits.argmax(dim=-1) == labels).float().mean()


# %% wrong loss: a sigmoid on column 1 (binary cross-entropy), not the 2-way softmax
# split: eval
# names: a sigmoid on column 1
def nsp_loss_and_accuracy(logits, labels):
    loss = F.binary_cross_entropy_with_logits(logits[:, 1], labels.float())
    return loss, (logits.argmax(dim=-1) == labels).float().mean()


# %% wrong truncate: cuts the caller's lists in place (no copy)
# split: eval
def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    a, b = tokens_a, tokens_b
    while len(a) + len(b) > max_num_tokens:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()
    return a, b


# %% wrong truncate: removes from the front when the draw is >= 0.5 (ends exchanged)
# split: eval
def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    a, b = list(tokens_a), list(tokens_b)
    while len(a) + len(b) > max_num_tokens:
        longer = a if len(a) > len(b) else b
        if rng.random() >= 0.5:
            del longer[0]
        else:
            longer.pop()
    return a, b


# %% wrong pairs: the module's random instead of the rng given
# split: eval
def nsp_pairs(documents, rng):
    pairs = []
    for d, document in enumerate(documents):
        for i in range(len(document) - 1):
            if random.random() < 0.5:
                other = random.choice([j for j in range(len(documents)) if j != d])
                pairs.append((document[i], random.choice(documents[other]), NOT_NEXT))
            else:
                pairs.append((document[i], document[i + 1], IS_NEXT))
    return pairs


# %% wrong pairs: a generator of its own, seeded once (the same pairs for every rng)
# split: dev
def nsp_pairs(documents, rng):
    rng = random.Random(0)
    pairs = []
    for d, document in enumerate(documents):
        for i in range(len(document) - 1):
            if rng.random() < 0.5:
                other = rng.choice([j for j in range(len(documents)) if j != d])
                pairs.append((document[i], rng.choice(documents[other]), NOT_NEXT))
            else:
                pairs.append((document[i], document[i + 1], IS_NEXT))
    return pairs


# %% wrong loss: labels inverted (1 - labels)
# split: dev
# names: NSP labels inverted
def nsp_loss_and_accuracy(logits, labels):
    targets = 1 - labels
    loss = -torch.log_softmax(logits, dim=-1).gather(1, targets[:, None]).mean()
    return loss, (logits.argmax(dim=-1) == targets).float().mean()


# %% wrong loss: log of the softmax (inf for confident logits)
# split: eval
# names: log(softmax) in two steps
def nsp_loss_and_accuracy(logits, labels):
    loss = -torch.log(torch.softmax(logits, dim=-1)).gather(1, labels[:, None]).mean()
    return loss, (logits.argmax(dim=-1) == labels).float().mean()


# %% wrong loss: computed in float32 and returned in float32 for half-precision logits
# split: eval
# names: the loss in float32, not the logits' dtype
def nsp_loss_and_accuracy(logits, labels):
    loss = -torch.log_softmax(logits.float(), dim=-1).gather(1, labels[:, None]).mean()
    return loss, (logits.argmax(dim=-1) == labels).float().mean()


# %% wrong loss: squeeze() of the picked log-probabilities, then mean over the wrong axis
# split: eval
# names: the loss divided by the 2 classes
def nsp_loss_and_accuracy(logits, labels):
    picked = torch.log_softmax(logits, dim=-1).gather(1, labels[:, None]).squeeze()
    loss = -picked.sum() / logits.shape[1]
    return loss, (logits.argmax(dim=-1) == labels).float().mean()


# %% wrong sop: labels inverted (1 = in order)
# split: eval
# names: SOP labels inverted
def sop_pairs(documents, rng, cls_id=CLS_ID, sep_id=SEP_ID):
    out = []
    for document in documents:
        for a, b in zip(document[:-1], document[1:]):
            if rng.random() < 0.5:
                out.append(
                    ([cls_id, *b, sep_id, *a, sep_id], [0] * (len(b) + 2) + [1] * (len(a) + 1), 0)
                )
            else:
                out.append(
                    ([cls_id, *a, sep_id, *b, sep_id], [0] * (len(a) + 2) + [1] * (len(b) + 1), 1)
                )
    return out


# %% wrong sop: the negative's B drawn from another document (NSP, not SOP)
# split: eval
# names: a random B from another document
def sop_pairs(documents, rng, cls_id=CLS_ID, sep_id=SEP_ID):
    out = []
    for d, document in enumerate(documents):
        for a, b in zip(document[:-1], document[1:]):
            label = 0
            if rng.random() < 0.5:
                other = rng.choice([j for j in range(len(documents)) if j != d] or [d])
                b, label = rng.choice(documents[other]), 1
            out.append(
                ([cls_id, *a, sep_id, *b, sep_id], [0] * (len(a) + 2) + [1] * (len(b) + 1), label)
            )
    return out


# %% wrong sop: the negative reverses the tokens instead of swapping the sentences
# split: dev
# names: the tokens reversed instead of the segments swapped
def sop_pairs(documents, rng, cls_id=CLS_ID, sep_id=SEP_ID):
    out = []
    for document in documents:
        for a, b in zip(document[:-1], document[1:]):
            label = 0
            if rng.random() < 0.5:
                a, b, label = b[::-1], a[::-1], 1
            out.append(
                ([cls_id, *a, sep_id, *b, sep_id], [0] * (len(a) + 2) + [1] * (len(b) + 1), label)
            )
    return out


# %% wrong sop: the token types travel with the sentences when they are swapped
# split: eval
# names: token types that follow the sentences
def sop_pairs(documents, rng, cls_id=CLS_ID, sep_id=SEP_ID):
    out = []
    for document in documents:
        for a, b in zip(document[:-1], document[1:]):
            ids_a, types_a = [cls_id, *a, sep_id], [0] * (len(a) + 2)
            ids_b, types_b = [*b, sep_id], [1] * (len(b) + 1)
            if rng.random() < 0.5:
                out.append(
                    ([cls_id, *b, sep_id, *a, sep_id], [0] + types_b + [0] * (len(a) + 1), 1)
                )
            else:
                out.append((ids_a + ids_b, types_a + types_b, 0))
    return out


# %% wrong sop: swaps the two sentences inside the document (modifies the input, and the next pair)
# split: dev
def sop_pairs(documents, rng, cls_id=CLS_ID, sep_id=SEP_ID):
    out = []
    for document in documents:
        for i in range(len(document) - 1):
            label = 0
            if rng.random() < 0.5:
                document[i], document[i + 1] = document[i + 1], document[i]
                label = 1
            a, b = document[i], document[i + 1]
            out.append(
                ([cls_id, *a, sep_id, *b, sep_id], [0] * (len(a) + 2) + [1] * (len(b) + 1), label)
            )
    return out


# %% wrong sop: a generator of its own (the same pairs for every rng)
# split: dev
def sop_pairs(documents, rng, cls_id=CLS_ID, sep_id=SEP_ID):
    own = random.Random(1234)
    out = []
    for document in documents:
        for a, b in zip(document[:-1], document[1:]):
            label = int(own.random() < 0.5)
            first, second = (b, a) if label else (a, b)
            out.append(
                (
                    [cls_id, *first, sep_id, *second, sep_id],
                    [0] * (len(first) + 2) + [1] * (len(second) + 1),
                    label,
                )
            )
    return out


# %% wrong sop: swaps a quarter of the pairs (rng.random() < 0.25)
# split: dev
def sop_pairs(documents, rng, cls_id=CLS_ID, sep_id=SEP_ID):
    out = []
    for document in documents:
        for a, b in zip(document[:-1], document[1:]):
            label = int(rng.random() < 0.25)
            first, second = (b, a) if label else (a, b)
            out.append(
                (
                    [cls_id, *first, sep_id, *second, sep_id],
                    [0] * (len(first) + 2) + [1] * (len(second) + 1),
                    label,
                )
            )
    return out


# %% wrong sop: the default [CLS]/[SEP] ids used whatever ids are given
# split: dev
def sop_pairs(documents, rng, cls_id=CLS_ID, sep_id=SEP_ID):
    out = []
    for document in documents:
        for a, b in zip(document[:-1], document[1:]):
            label = int(rng.random() < 0.5)
            first, second = (b, a) if label else (a, b)
            out.append(
                (
                    [CLS_ID, *first, SEP_ID, *second, SEP_ID],
                    [0] * (len(first) + 2) + [1] * (len(second) + 1),
                    label,
                )
            )
    return out


# %% alternative pair: built in a loop, typed by a flag
def make_pair(tokens_a, tokens_b, cls_id=CLS_ID, sep_id=SEP_ID):
    ids, types = [cls_id], [0]
    for segment, token_type in ((tokens_a, 0), (tokens_b, 1)):
        for token in list(segment) + [sep_id]:
            ids.append(token)
            types.append(token_type)
    return ids, types


# %% alternative truncate: slices instead of del/pop
def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    a, b = tokens_a[:], tokens_b[:]
    while len(a) + len(b) > max_num_tokens:
        front = rng.random() < 0.5
        if len(a) > len(b):
            a = a[1:] if front else a[:-1]
        else:
            b = b[1:] if front else b[:-1]
    return a, b


# %% alternative pairs: rejection sampling of the other document, list comprehension of A
def nsp_pairs(documents, rng):
    out = []
    for d, doc in enumerate(documents):
        for a, following in zip(doc[:-1], doc[1:]):
            if rng.random() >= 0.5:
                out.append((a, following, IS_NEXT))
                continue
            other = d
            while other == d:
                other = rng.randint(0, len(documents) - 1)
            out.append((a, documents[other][rng.randint(0, len(documents[other]) - 1)], NOT_NEXT))
    return out


# %% alternative loss: logsumexp minus the label's logit, accuracy as a Python float
def nsp_loss_and_accuracy(logits, labels):
    picked = logits[torch.arange(len(labels)), labels]
    loss = (torch.logsumexp(logits, dim=-1) - picked).mean()
    accuracy = sum(int(p == y) for p, y in zip(logits.argmax(-1).tolist(), labels.tolist())) / len(
        labels
    )
    return loss, accuracy


# %% alternative sop: one coin per pair with getrandbits, tuples, make_pair-like helper
def sop_pairs(documents, rng, cls_id=CLS_ID, sep_id=SEP_ID):
    def encode(first, second):
        return [cls_id] + list(first) + [sep_id] + list(second) + [sep_id], [0] * (
            len(first) + 2
        ) + [1] * (len(second) + 1)

    result = []
    for document in documents:
        for i in range(1, len(document)):
            swap = rng.getrandbits(1)
            pair = (document[i], document[i - 1]) if swap else (document[i - 1], document[i])
            result.append((*encode(*pair), int(swap)))
    return result


# %% alternative loss: float64 internally, cast back to the logits' dtype
def nsp_loss_and_accuracy(logits, labels):
    log_probs = torch.log_softmax(logits.double(), dim=-1)
    loss = -log_probs[torch.arange(labels.shape[0]), labels].mean()
    return loss.to(logits.dtype), float((logits.argmax(-1) == labels).sum()) / labels.numel()


# %% alternative sop: reuses Part 1's make_pair, coin drawn as rng.random() >= 0.5 for the positive
def sop_pairs(documents, rng, cls_id=CLS_ID, sep_id=SEP_ID):
    out = []
    for document in documents:
        for i in range(len(document) - 1):
            if rng.random() >= 0.5:
                out.append((*make_pair(document[i], document[i + 1], cls_id, sep_id), IS_NEXT))
            else:
                out.append((*make_pair(document[i + 1], document[i], cls_id, sep_id), NOT_NEXT))
    return out


# %% wrong sop: one coin per document (every pair of a document swapped, or every one kept)
# split: eval
# names: one coin per document, not one per pair
def sop_pairs(documents, rng, cls_id=CLS_ID, sep_id=SEP_ID):
    out = []
    for document in documents:
        swap = rng.random() < 0.5
        for a, b in zip(document[:-1], document[1:]):
            first, second = (b, a) if swap else (a, b)
            types = [0] * (len(first) + 2) + [1] * (len(second) + 1)
            out.append(([cls_id, *first, sep_id, *second, sep_id], types, int(swap)))
    return out
