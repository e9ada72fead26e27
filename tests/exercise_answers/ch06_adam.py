# ruff: noqa
# Wrong and alternative answers for the cells of solutions/ch06_adam (tests/test_exercises.py).
# "# %% wrong <grade id>: <what>" replaces that solution cell and must lose exactly its points;
# "# %% alternative <grade id>: <what>" is correct but written differently: full marks.
# Every block is graded in process; the first two wrong answers of a part also go through nbgrader.
# "# split: dev|eval" (tests/answer_split.py): entries of the mistake catalogues are written
# from the dev half; named/right/wrong is measured on the eval half (scripts/named_mistakes.py).


# %% wrong adam: no bias correction (the original BERT optimizer)
# split: dev
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad**2
    return param - lr * m / (v.sqrt() + eps), m, v


# %% wrong adam: v averages the gradient, not its square
# split: eval
# names: v averages |g|
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad.abs()
    m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
    return param - lr * m_hat / (v_hat.sqrt() + eps), m, v


# %% wrong adam: eps inside the square root
# split: eval
# names: eps inside the square root
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad**2
    m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
    return param - lr * m_hat / torch.sqrt(v_hat + eps), m, v


# %% wrong adam: bias correction one step late (beta ** (t + 1))
# split: dev
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad**2
    m_hat, v_hat = m / (1 - beta1 ** (t + 1)), v / (1 - beta2 ** (t + 1))
    return param - lr * m_hat / (v_hat.sqrt() + eps), m, v


# %% wrong adam: uses torch.optim.Adam (forbidden)
# split: eval
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    p = torch.nn.Parameter(param.clone())
    p.grad = grad.clone()
    optimizer = torch.optim.Adam([p], lr=lr, betas=betas, eps=eps)
    optimizer.state[p] = {
        "step": torch.tensor(float(t - 1)),
        "exp_avg": m.clone(),
        "exp_avg_sq": v.clone(),
    }
    optimizer.step()
    return p.detach(), optimizer.state[p]["exp_avg"], optimizer.state[p]["exp_avg_sq"]


# %% wrong adamw: L2 in the gradient (Adam with weight_decay), not decoupled
# split: eval
def adamw_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
    return adam_step(param, grad + weight_decay * param, m, v, t, lr=lr, betas=betas, eps=eps)


# %% wrong adamw: decay not scaled by the learning rate
# split: dev
# names: the decay not multiplied by the learning rate
def adamw_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
    return adam_step(param * (1 - weight_decay), grad, m, v, t, lr=lr, betas=betas, eps=eps)


# %% wrong linear: warm-up one step ahead, (s + 1) / w
# split: eval
def warmup_linear_decay(step, *, warmup_steps, total_steps):
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


# %% wrong linear: decays over all T steps (the original's formula)
# split: dev
def warmup_linear_decay(step, *, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    return max(0.0, (total_steps - step) / total_steps)


# %% wrong linear: not clamped at 0 after the last step
# split: dev
# names: no clamp at 0 after the last step
def warmup_linear_decay(step, *, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    return (total_steps - step) / max(1, total_steps - warmup_steps)


# %% wrong poly: decays from the peak over T - w steps (transformers' formula)
# split: eval
def polynomial_decay_with_warmup(step, *, warmup_steps, total_steps, power=1.0):
    if step < warmup_steps:
        return step / warmup_steps
    return max(0.0, (total_steps - step) / (total_steps - warmup_steps)) ** power


# %% wrong poly: forgets the power
# split: dev
def polynomial_decay_with_warmup(step, *, warmup_steps, total_steps, power=1.0):
    if step < warmup_steps:
        return step / warmup_steps
    return 1.0 - min(step, total_steps) / total_steps


# %% alternative adam: in-place updates on copies, bias corrections folded into the step size
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    beta1, beta2 = betas
    m = m.clone().mul_(beta1).add_(grad, alpha=1 - beta1)
    v = v.clone().mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    step_size = lr / (1 - beta1**t)
    denom = v.sqrt() / math.sqrt(1 - beta2**t) + eps
    return param.clone().addcdiv_(m, denom, value=-step_size), m, v


# %% alternative adamw: written out in one function, decay with the old parameter inside the update
def adamw_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
    b1, b2 = betas
    m = b1 * m + (1 - b1) * grad
    v = b2 * v + (1 - b2) * grad**2
    update = (m / (1 - b1**t)) / ((v / (1 - b2**t)).sqrt() + eps) + weight_decay * param
    return param - lr * update, m, v


# %% alternative linear: min of the two lines, the edge total == warm-up handled first
def warmup_linear_decay(step, *, warmup_steps, total_steps):
    if warmup_steps == 0:
        return max(0.0, 1 - step / total_steps)
    up = step / warmup_steps
    if total_steps == warmup_steps:
        return up if step < warmup_steps else 0.0
    down = (total_steps - step) / (total_steps - warmup_steps)
    return max(0.0, min(up, down, 1.0))


# %% alternative poly: clamp the step first
def polynomial_decay_with_warmup(step, *, warmup_steps, total_steps, power=1.0):
    s = min(step, total_steps)
    return (
        step / warmup_steps
        if step < warmup_steps
        else math.pow((total_steps - s) / total_steps, power)
    )


# %% wrong bert_adam: bias correction kept (torch's AdamW with the original's eps)
# split: eval
# names: bias correction (that is torch's AdamW
def bert_adam_step(
    param, grad, m, v, t, *, lr=1e-4, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01
):
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    update = (m / (1 - beta1**t)) / ((v / (1 - beta2**t)).sqrt() + eps) + weight_decay * param
    return param - lr * update, m, v


# %% wrong bert_adam: eps defaults to torch's 1e-8
# split: dev
# names: eps = 1e-8
def bert_adam_step(
    param, grad, m, v, t, *, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01
):
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    return param - lr * (m / (v.sqrt() + eps) + weight_decay * param), m, v


# %% wrong bert_adam: the decay added to the gradient (L2)
# split: eval
# names: L2 regularisation
def bert_adam_step(
    param, grad, m, v, t, *, lr=1e-4, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01
):
    beta1, beta2 = betas
    grad = grad + weight_decay * param
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    return param - lr * m / (v.sqrt() + eps), m, v


# %% wrong bert_adam: the decay subtracted without the learning rate
# split: eval
# names: the decay not multiplied by the learning rate
def bert_adam_step(
    param, grad, m, v, t, *, lr=1e-4, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01
):
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    return param - lr * m / (v.sqrt() + eps) - weight_decay * param, m, v


# %% wrong bert_adam: eps inside the square root of v (the original form, eps misplaced)
# split: eval
# names: eps inside the square root
def bert_adam_step(
    param, grad, m, v, t, *, lr=1e-4, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01
):
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    return param - lr * (m / (v + eps).sqrt() + weight_decay * param), m, v


# %% alternative bert_adam: AdamW's form, the decay first, then the update
def bert_adam_step(
    param, grad, m, v, t, *, lr=1e-4, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01
):
    b1, b2 = betas
    m = torch.lerp(grad, m, b1)  # b1 * m + (1 - b1) * grad
    v = torch.addcmul(v * b2, grad, grad, value=1 - b2)
    decayed = param * (1 - lr * weight_decay)
    return decayed - lr * m / (torch.sqrt(v) + eps), m, v


# %% wrong groups: only the trainable parameters (requires_grad): a frozen parameter is dropped
# split: dev
# names: frozen parameters (requires_grad=False) left out
def bert_param_groups(model, weight_decay):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        skip = "bias" in name or "norm" in name
        (no_decay if skip else decay).append((name, p))
    return [
        {
            "params": [p for _, p in decay],
            "param_names": [n for n, _ in decay],
            "weight_decay": weight_decay,
        },
        {
            "params": [p for _, p in no_decay],
            "param_names": [n for n, _ in no_decay],
            "weight_decay": 0.0,
        },
    ]


# %% wrong groups: matches only transformers' name "LayerNorm" (bertcourse names it layer_norm)
# split: dev
# names: only the name 'LayerNorm' excluded
def bert_param_groups(model, weight_decay):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if ("bias" in name or "LayerNorm" in name) else decay).append((name, p))
    return [
        {
            "params": [p for _, p in decay],
            "param_names": [n for n, _ in decay],
            "weight_decay": weight_decay,
        },
        {
            "params": [p for _, p in no_decay],
            "param_names": [n for n, _ in no_decay],
            "weight_decay": 0.0,
        },
    ]


# %% wrong groups: every parameter of the state dict (the tied decoder weight counted twice)
# split: dev
# names: the tied decoder weight listed twice
def bert_param_groups(model, weight_decay):
    params = dict(model.named_parameters(remove_duplicate=False))
    decay = [n for n in params if not ("bias" in n or "norm" in n.lower())]
    no_decay = [n for n in params if n not in decay]
    return [
        {"params": [params[n] for n in decay], "param_names": decay, "weight_decay": weight_decay},
        {"params": [params[n] for n in no_decay], "param_names": no_decay, "weight_decay": 0.0},
    ]


# %% wrong groups: the embeddings left out of the decay too
# split: eval
# names: the embeddings left out of the decay
def bert_param_groups(model, weight_decay):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        skip = "bias" in name or "norm" in name or "embeddings" in name
        (no_decay if skip else decay).append((name, p))
    return [
        {
            "params": [p for _, p in decay],
            "param_names": [n for n, _ in decay],
            "weight_decay": weight_decay,
        },
        {
            "params": [p for _, p in no_decay],
            "param_names": [n for n, _ in no_decay],
            "weight_decay": 0.0,
        },
    ]


# %% wrong groups: excludes only the biases ('bias' in name): the LayerNorm weights are decayed
# split: dev
# names: only the biases excluded
def bert_param_groups(model, weight_decay):
    decay = [(n, p) for n, p in model.named_parameters() if "bias" not in n]
    no_decay = [(n, p) for n, p in model.named_parameters() if "bias" in n]
    return [
        {
            "params": [p for _, p in decay],
            "param_names": [n for n, _ in decay],
            "weight_decay": weight_decay,
        },
        {
            "params": [p for _, p in no_decay],
            "param_names": [n for n, _ in no_decay],
            "weight_decay": 0.0,
        },
    ]


# %% alternative groups: by dimension (on BERT, the 1-D parameters are exactly the norms and biases)
def bert_param_groups(model, weight_decay):
    named = list(model.named_parameters())
    groups = []
    for decayed in (True, False):
        chosen = [(n, p) for n, p in named if (p.ndim >= 2) == decayed]
        groups.append(
            {
                "params": [p for _, p in chosen],
                "param_names": [n for n, _ in chosen],
                "weight_decay": weight_decay if decayed else 0.0,
            }
        )
    return groups


# %% wrong loop: scheduler.step() before optimizer.step() (the schedule one step early)
# split: eval
def train_with_schedule(model, batches, *, lr, warmup_steps, total_steps):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: warmup_linear_decay(s, warmup_steps=warmup_steps, total_steps=total_steps),
    )
    used = []
    for batch in batches:
        model(**batch).loss.backward()
        schedule.step()
        used.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        optimizer.zero_grad()
    return used


# %% wrong loop: the rates reported right, but the scheduler stepped twice per batch
# split: eval
def train_with_schedule(model, batches, *, lr, warmup_steps, total_steps):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    f = lambda s: warmup_linear_decay(s, warmup_steps=warmup_steps, total_steps=total_steps)  # noqa: E731
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, f)
    used = []
    for step, batch in enumerate(batches):
        used.append(lr * f(step))
        model(**batch).loss.backward()
        optimizer.step()
        schedule.step()
        schedule.step()
        optimizer.zero_grad()
    return used


# %% wrong loop: no zero_grad (gradients accumulate over the steps)
# split: eval
def train_with_schedule(model, batches, *, lr, warmup_steps, total_steps):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: warmup_linear_decay(s, warmup_steps=warmup_steps, total_steps=total_steps),
    )
    used = []
    for batch in batches:
        used.append(optimizer.param_groups[0]["lr"])
        model(**batch).loss.backward()
        optimizer.step()
        schedule.step()
    return used


# %% alternative loop: the rate set by hand each step, no LambdaLR
def train_with_schedule(model, batches, *, lr, warmup_steps, total_steps):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    used = []
    for step, batch in enumerate(batches):
        for group in optimizer.param_groups:
            group["lr"] = lr * warmup_linear_decay(
                step, warmup_steps=warmup_steps, total_steps=total_steps
            )
        used.append(optimizer.param_groups[0]["lr"])
        optimizer.zero_grad(set_to_none=True)
        model(**batch).loss.backward()
        optimizer.step()
    return used


# %% wrong adam: only m bias-corrected (v used as it is)
# split: eval
# names: bias correction of m only
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    m_hat = m / (1 - beta1**t)
    return param - lr * m_hat / (v.sqrt() + eps), m, v


# %% wrong adam: bias correction on the second moment only
# split: dev
# names: bias correction of v only
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    b1, b2 = betas
    m = b1 * m + (1 - b1) * grad
    v = b2 * v + (1 - b2) * grad**2
    v_hat = v / (1 - b2**t)
    return param - lr * m / (torch.sqrt(v_hat) + eps), m, v


# %% wrong adam: m corrected, v not: the step size formula with sqrt(1 - b2^t) dropped
# split: eval
# names: bias correction of m only
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    beta1, beta2 = betas
    m = m * beta1 + grad * (1 - beta1)
    v = v * beta2 + grad.pow(2) * (1 - beta2)
    step_size = lr / (1 - beta1**t)
    return param - step_size * m / (v.sqrt() + eps), m, v


# %% wrong adam: the first moment corrected, the second left biased
# split: eval
# names: bias correction of m only
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    update = (m / (1 - beta1**t)) / (torch.sqrt(v) + eps)
    return param - lr * update, m, v


# %% wrong adam: bias correction applied to m, v left uncorrected (sqrt(v) as it is)
# split: eval
# names: bias correction of m only
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    b1, b2 = betas
    m = b1 * m + (1 - b1) * grad
    v = b2 * v + (1 - b2) * grad.square()
    m_hat = m / (1 - b1**t)
    return param - lr * m_hat / (v.sqrt() + eps), m, v


# %% wrong adam: corrects the momentum but forgets the second moment's correction
# split: dev
# names: bias correction of m only
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    beta1, beta2 = betas
    new_m = beta1 * m + (1.0 - beta1) * grad
    new_v = beta2 * v + (1.0 - beta2) * grad * grad
    corrected = new_m / (1.0 - beta1**t)
    new_param = param - lr * corrected / (torch.sqrt(new_v) + eps)
    return new_param, new_m, new_v
