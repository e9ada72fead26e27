# ruff: noqa
# Wrong and alternative answers for the cells of solutions/ch06_adam (tests/test_exercises.py).
# "# %% wrong <grade id>: <what>" replaces that solution cell and must lose exactly its points;
# "# %% alternative <grade id>: <what>" is correct but written differently: full marks.
# Every block is graded in process; the first two wrong answers of a part also go through nbgrader.


# %% wrong adam: no bias correction (the original BERT optimizer)
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad**2
    return param - lr * m / (v.sqrt() + eps), m, v


# %% wrong adam: v averages the gradient, not its square
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad.abs()
    m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
    return param - lr * m_hat / (v_hat.sqrt() + eps), m, v


# %% wrong adam: eps inside the square root
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad**2
    m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
    return param - lr * m_hat / torch.sqrt(v_hat + eps), m, v


# %% wrong adam: bias correction one step late (beta ** (t + 1))
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad**2
    m_hat, v_hat = m / (1 - beta1 ** (t + 1)), v / (1 - beta2 ** (t + 1))
    return param - lr * m_hat / (v_hat.sqrt() + eps), m, v


# %% wrong adam: uses torch.optim.Adam (forbidden)
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
def adamw_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
    return adam_step(param, grad + weight_decay * param, m, v, t, lr=lr, betas=betas, eps=eps)


# %% wrong adamw: decay not scaled by the learning rate
def adamw_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
    return adam_step(param * (1 - weight_decay), grad, m, v, t, lr=lr, betas=betas, eps=eps)


# %% wrong linear: warm-up one step ahead, (s + 1) / w
def warmup_linear_decay(step, *, warmup_steps, total_steps):
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


# %% wrong linear: decays over all T steps (the original's formula)
def warmup_linear_decay(step, *, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    return max(0.0, (total_steps - step) / total_steps)


# %% wrong linear: not clamped at 0 after the last step
def warmup_linear_decay(step, *, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    return (total_steps - step) / max(1, total_steps - warmup_steps)


# %% wrong poly: decays from the peak over T - w steps (transformers' formula)
def polynomial_decay_with_warmup(step, *, warmup_steps, total_steps, power=1.0):
    if step < warmup_steps:
        return step / warmup_steps
    return max(0.0, (total_steps - step) / (total_steps - warmup_steps)) ** power


# %% wrong poly: forgets the power
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


# %% alternative linear: min of the two lines
def warmup_linear_decay(step, *, warmup_steps, total_steps):
    if warmup_steps == 0:
        return max(0.0, 1 - step / total_steps)
    up = step / warmup_steps
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
