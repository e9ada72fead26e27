# ruff: noqa
# Wrong and alternative answers for the cells of solutions/ch05_nsp (tests/test_exercises.py).
# "# %% wrong <grade id>: <what>" replaces that solution cell and must lose exactly its points;
# "# %% alternative <grade id>: <what>" is correct but written differently: full marks.
# Every block is graded in process; the first two wrong answers of a part also go through nbgrader.


# %% wrong pair: segment B's type starts at the [SEP] after A
def make_pair(tokens_a, tokens_b, cls_id=CLS_ID, sep_id=SEP_ID):
    input_ids = [cls_id, *tokens_a, sep_id, *tokens_b, sep_id]
    return input_ids, [0] * (len(tokens_a) + 1) + [1] * (len(tokens_b) + 2)


# %% wrong pair: the final [SEP] gets type 0
def make_pair(tokens_a, tokens_b, cls_id=CLS_ID, sep_id=SEP_ID):
    input_ids = [cls_id, *tokens_a, sep_id, *tokens_b, sep_id]
    return input_ids, [0] * (len(tokens_a) + 2) + [1] * len(tokens_b) + [0]


# %% wrong pair: no final [SEP]
def make_pair(tokens_a, tokens_b, cls_id=CLS_ID, sep_id=SEP_ID):
    return [cls_id, *tokens_a, sep_id, *tokens_b], [0] * (len(tokens_a) + 2) + [1] * len(tokens_b)


# %% wrong truncate: always cuts A
def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    a, b = list(tokens_a), list(tokens_b)
    while len(a) + len(b) > max_num_tokens and a:
        if rng.random() < 0.5:
            del a[0]
        else:
            a.pop()
    return a, b


# %% wrong truncate: cuts the shorter segment
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
def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    a, b = list(tokens_a), list(tokens_b)
    while len(a) + len(b) > max_num_tokens:
        (a if len(a) > len(b) else b).pop()
    return a, b


# %% wrong pairs: inverted labels (1 = B follows A)
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


# %% wrong loss: accuracy with the argmax over the batch (dim 0)
def nsp_loss_and_accuracy(logits, labels):
    loss = -torch.log_softmax(logits, dim=-1).gather(1, labels[:, None]).mean()
    return loss, (logits.argmax(dim=0)[labels] == labels).float().mean()


# %% wrong loss: calls F.cross_entropy (forbidden)
def nsp_loss_and_accuracy(logits, labels):
    return F.cross_entropy(logits, labels), (logits.argmax(dim=-1) == labels).float().mean()


# %% wrong loss: a sigmoid on column 1 (binary cross-entropy), not the 2-way softmax
def nsp_loss_and_accuracy(logits, labels):
    loss = F.binary_cross_entropy_with_logits(logits[:, 1], labels.float())
    return loss, (logits.argmax(dim=-1) == labels).float().mean()


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
