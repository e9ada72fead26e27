# ruff: noqa
# Wrong and alternative answers for the cells of solutions/ch04_loss (tests/test_exercises.py).
# "# %% wrong <grade id>: <what>" replaces that solution cell and must lose exactly its points;
# "# %% alternative <grade id>: <what>" is correct but written differently: full marks.
# Every block is graded in process; the first two wrong answers of a part also go through nbgrader.
# "# split: dev|eval" (tests/answer_split.py): entries of the mistake catalogues are written
# from the dev half; named/right/wrong is measured on the eval half (scripts/named_mistakes.py).


# %% wrong log_softmax: no max subtraction (exp overflows for large logits)
# split: dev
# names: no max subtracted
def log_softmax(logits):
    return logits - torch.log(torch.exp(logits).sum(dim=-1, keepdim=True))


# %% wrong log_softmax: the log of the softmax (underflows to log(0) = -inf)
# split: dev
# names: log(softmax(z)) in two steps
def log_softmax(logits):
    return torch.log(torch.softmax(logits, dim=-1))


# %% wrong log_softmax: subtracts the max of the whole tensor, not of each row
# split: eval
# names: the max of the whole tensor
def log_softmax(logits):
    shifted = logits - logits.max()
    return shifted - torch.log(torch.exp(shifted).sum(dim=-1, keepdim=True))


# %% wrong log_softmax: computes in float32 and returns float32 for float16 and bfloat16 logits
# split: eval
# names: a float32 result, not the logits' dtype
def log_softmax(logits):
    x = logits.float()
    shifted = x - x.amax(dim=-1, keepdim=True)
    return shifted - torch.log(torch.exp(shifted).sum(dim=-1, keepdim=True))


# %% wrong log_softmax: calls torch.log_softmax (forbidden)
# split: eval
def log_softmax(logits):
    return logits.log_softmax(dim=-1)


# %% wrong ce: averaged over all positions, ignored ones counted as 0
# split: dev
def cross_entropy(logits, targets, ignore_index=IGNORE_INDEX):
    log_probs = torch.log_softmax(logits, dim=-1)
    keep = targets != ignore_index
    picked = log_probs.gather(-1, targets.masked_fill(~keep, 0).unsqueeze(-1)).squeeze(-1)
    return -(picked * keep).sum() / targets.numel()


# %% wrong ce: ignored targets clamped to class 0 and counted
# split: dev
# names: the ignored items counted as class 0
def cross_entropy(logits, targets, ignore_index=IGNORE_INDEX):
    log_probs = torch.log_softmax(logits, dim=-1)
    picked = log_probs.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -picked.mean()


# %% wrong ce: the sum instead of the mean
# split: eval
def cross_entropy(logits, targets, ignore_index=IGNORE_INDEX):
    log_probs = torch.log_softmax(logits, dim=-1)
    keep = targets != ignore_index
    picked = log_probs.gather(-1, targets.masked_fill(~keep, 0).unsqueeze(-1)).squeeze(-1)
    return -picked[keep].sum()


# %% wrong ce: calls F.cross_entropy (forbidden)
# split: dev
def cross_entropy(logits, targets, ignore_index=IGNORE_INDEX):
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=ignore_index
    )


# %% wrong ce: seed 000's mean of the non-zero losses, loss[loss != 0]
# split: dev
# names: the mean of the non-zero losses
def cross_entropy(logits, targets, ignore_index=IGNORE_INDEX):
    log_probs = torch.log_softmax(logits, dim=-1)
    keep = targets != ignore_index
    picked = log_probs.gather(-1, targets.masked_fill(~keep, 0).unsqueeze(-1)).squeeze(-1)
    loss = -picked * keep
    return loss[loss != 0].mean()


# %% wrong ce: squeeze() instead of squeeze(-1) (a batch of one item breaks)
# split: dev
def cross_entropy(logits, targets, ignore_index=IGNORE_INDEX):
    log_probs = torch.log_softmax(logits, dim=-1)
    keep = targets != ignore_index
    picked = log_probs.gather(-1, targets.masked_fill(~keep, 0).unsqueeze(-1)).squeeze()
    return -picked[keep].sum() / keep.sum()


# %% wrong ce: stabilises the logits in place (the caller's tensor changes)
# split: dev
def cross_entropy(logits, targets, ignore_index=IGNORE_INDEX):
    logits -= logits.max(dim=-1, keepdim=True).values
    log_probs = logits - logits.exp().sum(-1, keepdim=True).log()
    keep = targets != ignore_index
    picked = log_probs.gather(-1, targets.masked_fill(~keep, 0).unsqueeze(-1)).squeeze(-1)
    return -picked[keep].sum() / keep.sum()


# %% wrong ce: upcast to float32 for stability, the loss not cast back (float32 for half logits)
# split: dev
# names: the loss in float32, not the logits' dtype
def cross_entropy(logits, targets, ignore_index=IGNORE_INDEX):
    log_probs = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), -1)
    keep = targets != ignore_index
    picked = log_probs.gather(-1, targets.masked_fill(~keep, 0).unsqueeze(-1)).squeeze(-1)
    return -picked[keep].sum() / keep.sum()


# %% wrong grad: the probabilities computed in place in the logits tensor
# split: eval
def cross_entropy_grad(logits, targets, ignore_index=IGNORE_INDEX):
    keep = targets != ignore_index
    probs = logits.sub_(logits.max(-1, keepdim=True).values).exp_()
    probs /= probs.sum(-1, keepdim=True)
    one_hot = F.one_hot(targets.masked_fill(~keep, 0), logits.shape[-1]).to(logits.dtype)
    return (probs - one_hot) * keep[..., None] / keep.sum().clamp(min=1)


# %% wrong grad: divided by max(N, 2) (right for every N but 1)
# split: eval
def cross_entropy_grad(logits, targets, ignore_index=IGNORE_INDEX):
    keep = targets != ignore_index
    one_hot = F.one_hot(targets.masked_fill(~keep, 0), logits.shape[-1]).to(logits.dtype)
    grad = (torch.softmax(logits, dim=-1) - one_hot) * keep[..., None]
    return grad / keep.sum().clamp(min=2)


# %% wrong grad: divided by N even when N is 0 (0/0: NaN when every target is ignored)
# split: eval
# names: 0/0 when every target is ignored
def cross_entropy_grad(logits, targets, ignore_index=IGNORE_INDEX):
    keep = targets != ignore_index
    one_hot = F.one_hot(targets.masked_fill(~keep, 0), logits.shape[-1]).to(logits.dtype)
    grad = (torch.softmax(logits, dim=-1) - one_hot) * keep[..., None]
    return grad / keep.sum()


# %% wrong grad: forgets to divide by the number of labelled items
# split: eval
def cross_entropy_grad(logits, targets, ignore_index=IGNORE_INDEX):
    keep = targets != ignore_index
    one_hot = F.one_hot(targets.masked_fill(~keep, 0), logits.shape[-1]).to(logits.dtype)
    return (torch.softmax(logits, dim=-1) - one_hot) * keep[..., None]


# %% wrong grad: autograd through F.cross_entropy (forbidden)
# split: eval
def cross_entropy_grad(logits, targets, ignore_index=IGNORE_INDEX):
    z = logits.detach().clone().requires_grad_()
    F.cross_entropy(
        z.reshape(-1, z.shape[-1]), targets.reshape(-1), ignore_index=ignore_index
    ).backward()
    return z.grad


# %% wrong grad: divides by all items, ignored ones included
# split: dev
def cross_entropy_grad(logits, targets, ignore_index=IGNORE_INDEX):
    keep = targets != ignore_index
    one_hot = F.one_hot(targets.masked_fill(~keep, 0), logits.shape[-1]).to(logits.dtype)
    return (torch.softmax(logits, dim=-1) - one_hot) * keep[..., None] / targets.numel()


# %% wrong grad: one_hot - softmax (the sign of the descent direction)
# split: eval
def cross_entropy_grad(logits, targets, ignore_index=IGNORE_INDEX):
    keep = targets != ignore_index
    one_hot = F.one_hot(targets.masked_fill(~keep, 0), logits.shape[-1]).to(logits.dtype)
    return (one_hot - torch.softmax(logits, dim=-1)) * keep[..., None] / keep.sum().clamp(min=1)


# %% wrong mlm: the loss averaged over all B*L positions
# split: dev
# names: divided by B x L
def mlm_loss_gathered(hidden_states, labels, decoder_weight, decoder_bias):
    keep = labels != IGNORE_INDEX
    logits = hidden_states[keep] @ decoder_weight.T + decoder_bias
    losses = -torch.log_softmax(logits, dim=-1).gather(-1, labels[keep][:, None]).squeeze(-1)
    return losses.sum() / labels.numel(), logits


# %% wrong mlm: seed 000's mean of the non-zero losses
# split: dev
# names: the mean of the non-zero losses
def mlm_loss_gathered(hidden_states, labels, decoder_weight, decoder_bias):
    keep = labels != IGNORE_INDEX
    logits = hidden_states[keep] @ decoder_weight.T + decoder_bias
    losses = -torch.log_softmax(logits, dim=-1).gather(-1, labels[keep][:, None]).squeeze(-1)
    return losses[losses != 0].mean(), logits


# %% wrong mlm: forgets the decoder bias
# split: dev
# names: the decoder bias left out
def mlm_loss_gathered(hidden_states, labels, decoder_weight, decoder_bias):
    keep = labels != IGNORE_INDEX
    logits = hidden_states[keep] @ decoder_weight.T
    return cross_entropy(logits, labels[keep]), logits


# %% alternative log_softmax: logsumexp written out with the row max
def log_softmax(logits):
    m = logits.max(dim=-1, keepdim=True).values
    return logits - (m + (logits - m).exp().sum(-1, keepdim=True).log())


# %% alternative log_softmax: half precision computed in float32, then cast back to its dtype
def log_softmax(logits):
    x = logits.to(torch.promote_types(logits.dtype, torch.float32))
    m = x.amax(dim=-1, keepdim=True)
    return (x - m - (x - m).exp().sum(dim=-1, keepdim=True).log()).to(logits.dtype)


# %% alternative ce: log-sum-exp minus the target logit, with torch.where and a Python count
def cross_entropy(logits, targets, ignore_index=IGNORE_INDEX):
    m = logits.amax(dim=-1)
    lse = m + torch.log(torch.exp(logits - m[..., None]).sum(-1))
    keep = targets != ignore_index
    target_logit = torch.take_along_dim(logits, torch.where(keep, targets, 0)[..., None], dim=-1)[
        ..., 0
    ]
    losses = torch.where(keep, lse - target_logit, torch.zeros_like(lse))
    n = int(keep.sum())
    return losses.sum() / n if n else losses.sum() * float("nan")


# %% alternative grad: scatter_ and a loop-free normalisation
def cross_entropy_grad(logits, targets, ignore_index=IGNORE_INDEX):
    keep = (targets != ignore_index).to(logits.dtype)
    probs = torch.softmax(logits, dim=-1)
    grad = probs.scatter_add(-1, targets.clamp(min=0)[..., None], -torch.ones_like(probs[..., :1]))
    return grad * keep[..., None] / max(float(keep.sum()), 1.0)


# %% alternative mlm: nonzero positions and index_select, loss written out
def mlm_loss_gathered(hidden_states, labels, decoder_weight, decoder_bias):
    B, L, H = hidden_states.shape
    flat_labels = labels.reshape(-1)
    index = (flat_labels != IGNORE_INDEX).nonzero().squeeze(-1)
    hidden = hidden_states.reshape(B * L, H).index_select(0, index)
    logits = torch.addmm(decoder_bias, hidden, decoder_weight.t())
    targets = flat_labels[index]
    loss = (torch.logsumexp(logits, -1) - logits[torch.arange(len(index)), targets]).mean()
    return loss, logits
