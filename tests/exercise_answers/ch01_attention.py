# ruff: noqa
# Wrong and alternative answers for the cells of solutions/ch01_attention (tests/test_exercises.py).
# "# %% wrong <grade id>: <what>" replaces that solution cell and must lose exactly its points;
# "# %% alternative <grade id>: <what>" is correct but written differently: full marks.
# Every block is graded in process; the first two wrong answers of a part also go through nbgrader.
# "# split: dev|eval" (tests/answer_split.py): entries of the mistake catalogues are written
# from the dev half; named/right/wrong is measured on the eval half (scripts/named_mistakes.py).

# %% wrong sdpa: no 1/sqrt(d_k) scaling
# split: eval
def scaled_dot_product_attention(q, k, v, bias=None):
    scores = q @ k.transpose(-2, -1)
    if bias is not None:
        scores = scores + bias
    probs = torch.softmax(scores, dim=-1)
    return probs @ v, probs


# %% wrong sdpa: softmax over the queries (dim=-2)
# split: dev
def scaled_dot_product_attention(q, k, v, bias=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias
    probs = torch.softmax(scores, dim=-2)
    return probs @ v, probs


# %% wrong sdpa: divides by d_k instead of sqrt(d_k)
# split: eval
def scaled_dot_product_attention(q, k, v, bias=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1]
    if bias is not None:
        scores = scores + bias
    probs = torch.softmax(scores, dim=-1)
    return probs @ v, probs


# %% wrong sdpa: calls PyTorch's fused attention (forbidden)
# split: dev
import torch.nn.functional as F


def scaled_dot_product_attention(q, k, v, bias=None):
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias
    return context, torch.softmax(scores, dim=-1)


# %% wrong split_heads: one view, no transpose (heads cut across tokens)
# split: dev
# names: a single view or reshape to (B, A, L, D), no transpose
def split_heads(x, num_heads):
    B, L, H = x.shape
    return x.view(B, num_heads, L, H // num_heads)


# %% wrong split_heads: heads interleaved (dimension a, a+A, a+2A, ... in head a)
# split: dev
# names: the heads interleaved: view(B, L, D, A)
def split_heads(x, num_heads):
    B, L, H = x.shape
    return x.view(B, L, H // num_heads, num_heads).permute(0, 3, 1, 2)


# %% wrong merge_heads: reshape without moving the heads back
# split: dev
# names: a reshape without moving the heads back
def merge_heads(x):
    B, A, L, D = x.shape
    return x.reshape(B, L, A * D)


# %% wrong merge_heads: concatenates D-major (x[..., d, a] order)
# split: dev
# names: the heads interleaved: (B, L, D, A) flattened
def merge_heads(x):
    B, A, L, D = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, L, A * D)


# %% wrong self_attention: scales by sqrt(H), the hidden size, instead of the head size
# split: eval
# names: scores scaled by sqrt(H)
def self_attention(module, hidden_states, bias=None):
    A = module.num_heads
    q = split_heads(module.query(hidden_states), A)
    k = split_heads(module.key(hidden_states), A)
    v = split_heads(module.value(hidden_states), A)
    scores = q @ k.transpose(-2, -1) / math.sqrt(hidden_states.shape[-1])
    if bias is not None:
        scores = scores + bias
    return merge_heads(torch.softmax(scores, dim=-1) @ v)


# %% wrong self_attention: calls the module itself (forbidden)
# split: eval
def self_attention(module, hidden_states, bias=None):
    return module(hidden_states, bias)[0]


# %% wrong self_attention: the values come from the key projection
# split: dev
# names: the values from the key projection
def self_attention(module, hidden_states, bias=None):
    A = module.num_heads
    q = split_heads(module.query(hidden_states), A)
    k = split_heads(module.key(hidden_states), A)
    v = split_heads(module.key(hidden_states), A)
    return merge_heads(scaled_dot_product_attention(q, k, v, bias)[0])


# %% wrong self_attention: one head over the whole hidden vector
# split: eval
# names: one head over the whole hidden vector
def self_attention(module, hidden_states, bias=None):
    q, k, v = module.query(hidden_states), module.key(hidden_states), module.value(hidden_states)
    if bias is not None:
        bias = bias[:, 0]  # (B, 1, L)
    return scaled_dot_product_attention(q, k, v, bias)[0]


# %% wrong sdpa: softmax by hand without subtracting the row maximum (exp overflows)
# split: dev
# names: a softmax by hand without subtracting the row maximum
def scaled_dot_product_attention(q, k, v, bias=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias
    e = scores.exp()
    probs = e / e.sum(dim=-1, keepdim=True)
    return probs @ v, probs


# %% wrong sdpa: scales q in place (the caller's queries change)
# split: eval
def scaled_dot_product_attention(q, k, v, bias=None):
    q /= math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-2, -1)
    if bias is not None:
        scores = scores + bias
    probs = torch.softmax(scores, dim=-1)
    return probs @ v, probs


# %% wrong sdpa: computes in float32 for stability and forgets to cast back
# split: eval
# names: a float32 result for half-precision inputs
def scaled_dot_product_attention(q, k, v, bias=None):
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias.float()
    probs = torch.softmax(scores, dim=-1)
    return probs @ v.float(), probs


# %% alternative sdpa: einsum, and masked scores added in place
def scaled_dot_product_attention(q, k, v, bias=None):
    scores = torch.einsum("...id,...jd->...ij", q, k) * q.shape[-1] ** -0.5
    if bias is not None:
        scores += bias
    probs = scores.softmax(-1)
    return torch.einsum("...ij,...jd->...id", probs, v), probs


# %% alternative split_heads: reshape + permute
def split_heads(x, num_heads):
    B, L, H = x.shape
    return x.reshape(B, L, num_heads, -1).permute(0, 2, 1, 3)


# %% alternative merge_heads: concatenate the heads with torch.cat
def merge_heads(x):
    return torch.cat([x[:, a] for a in range(x.shape[1])], dim=-1)


# %% alternative self_attention: a Python loop over the heads, explicit weights
def self_attention(module, hidden_states, bias=None):
    H = hidden_states.shape[-1]
    D = H // module.num_heads
    q = hidden_states @ module.query.weight.T + module.query.bias
    k = hidden_states @ module.key.weight.T + module.key.bias
    v = hidden_states @ module.value.weight.T + module.value.bias
    heads = []
    for a in range(module.num_heads):
        s = slice(a * D, (a + 1) * D)
        scores = q[..., s] @ k[..., s].transpose(1, 2) / D**0.5  # (B, L, L)
        if bias is not None:
            scores = scores + bias[:, 0]
        heads.append(torch.softmax(scores, dim=-1) @ v[..., s])
    return torch.cat(heads, dim=-1)


# %% wrong sdpa: the mask zeroes the probabilities after the softmax (rows not renormalised)
# split: eval
# names: the mask applied after the softmax
def scaled_dot_product_attention(q, k, v, bias=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    probs = torch.softmax(scores, dim=-1)
    if bias is not None:
        probs = probs.masked_fill(bias < 0, 0.0)
    return probs @ v, probs


# %% wrong sdpa: softmax first, then the padded keys multiplied by 0 (bias == 0 as a keep mask)
# split: eval
# names: the mask applied after the softmax
def scaled_dot_product_attention(q, k, v, bias=None):
    d = q.size(-1)
    weights = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / d**0.5, dim=-1)
    if bias is not None:
        weights = weights * (bias == 0).to(weights.dtype)
    return torch.matmul(weights, v), weights


# %% wrong sdpa: torch.where on the probabilities after the softmax to drop the padding
# split: eval
# names: the mask applied after the softmax
def scaled_dot_product_attention(q, k, v, bias=None):
    probs = (q @ k.mT * q.shape[-1] ** -0.5).softmax(-1)
    if bias is not None:
        probs = torch.where(bias == 0, probs, torch.zeros_like(probs))
    return probs @ v, probs


# %% wrong sdpa: the padding's weights set to 0 after softmax with an in-place masked_fill_
# split: dev
# names: the mask applied after the softmax
def scaled_dot_product_attention(q, k, v, bias=None):
    attn = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1]), dim=-1)
    if bias is not None:
        attn.masked_fill_(bias != 0, 0)
    return attn @ v, attn


# %% wrong sdpa: softmax, then the probabilities multiplied by a 0/1 keep mask made from the bias
# split: dev
# names: the mask applied after the softmax
def scaled_dot_product_attention(q, k, v, bias=None):
    scale = 1 / math.sqrt(q.shape[-1])
    p = torch.softmax(torch.einsum("bhqd,bhkd->bhqk", q, k) * scale, dim=-1)
    if bias is not None:
        keep = torch.where(bias == 0, 1.0, 0.0).to(p.dtype)
        p = p * keep
    return p @ v, p
