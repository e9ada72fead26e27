# Source of solutions/ch06_adam/adam.ipynb (build: python solutions/_build_notebooks.py)

# %% [markdown] id=intro
# # Exercises 6: Adam and the learning-rate schedule
#
# BERT is trained with Adam, decoupled weight decay and a learning rate that warms up and then
# decays linearly. You will write one Adam step with bias correction, AdamW's decoupled decay,
# and the two schedules: transformers' linear warm-up and decay, and the original release's
# polynomial decay. Chapter 6 of the book ("Adam and the schedule") explains them.
#
# **How to work.** Write your code where a cell says `# YOUR CODE HERE`, replacing the
# `raise NotImplementedError()`, then run the test cell below it (`OK ...` or a message).
# Your optimizer steps are compared, step after step, with `torch.optim.Adam` and
# `torch.optim.AdamW`; hidden tests use other hyper-parameters and dtypes. `torch.optim`'s Adam
# and AdamW, `bertcourse.optim` and transformers' schedules are disabled while your answers are
# checked. Check everything with **Validate** (or `nbgrader validate`).
#
# The steps are *functional*: they take the parameter, its gradient and the two moments, and
# return new ones, instead of updating a model in place.

# %% [code] id=setup
import math  # noqa: F401 (for your answers: math.sqrt)

import torch

import bertcourse.optim
from bertcourse import grading


def gradients(shape, steps, seed, dtype=torch.float32):
    """A fixed sequence of random gradients."""
    return [grading.randn(*shape, seed=1000 * seed + t, dtype=dtype) for t in range(steps)]


# %% [markdown] id=adam_text
# ## Part 1: one Adam step (3 points)
#
# Adam keeps two running averages per parameter: $m$ of the gradient and $v$ of its square. At
# step $t = 1, 2, \dots$, with gradient $g_t$:
#
# $$m_t = \beta_1 m_{t-1} + (1 - \beta_1)\, g_t, \qquad v_t = \beta_2 v_{t-1} + (1 - \beta_2)\, g_t^2,$$
#
# $$\hat m_t = \frac{m_t}{1 - \beta_1^t}, \qquad \hat v_t = \frac{v_t}{1 - \beta_2^t}, \qquad
# \theta_t = \theta_{t-1} - \eta\, \frac{\hat m_t}{\sqrt{\hat v_t} + \epsilon}.$$
#
# $m_0 = v_0 = 0$, so the early averages are biased toward 0; dividing by $1 - \beta^t$
# removes the bias (the original BERT optimizer skipped it).
#
# Write `adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8)` returning
# the new `(param, m, v)`.
#
# *Hint:* $\epsilon$ is added **after** the square root.

# %% [solution] id=adam
def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    """One Adam update at step t (1 for the first) -> (new param, new m, new v)."""
    ### BEGIN SOLUTION
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    m_hat = m / (1 - beta1**t)
    v_hat = v / (1 - beta2**t)
    return param - lr * m_hat / (v_hat.sqrt() + eps), m, v
    ### END SOLUTION

# %% [tests] id=adam_tests points=3
param = grading.randn(3, 4, seed=1)
grading.check_optimizer_steps(adam_step, torch.optim.Adam, param, gradients((3, 4), 10, seed=2), lr=0.01, forbid="optim", mistakes="adam")
### BEGIN HIDDEN TESTS
param = grading.randn(7, seed=3, dtype=torch.float64)
grads = gradients((7,), 30, seed=4, dtype=torch.float64)
grading.check_optimizer_steps(adam_step, torch.optim.Adam, param, grads, lr=0.1, betas=(0.8, 0.99), eps=1e-3, forbid="optim", mistakes="adam")
grading.check_optimizer_steps(adam_step, torch.optim.Adam, param, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, forbid="optim", mistakes="adam")
### END HIDDEN TESTS

# %% [markdown] id=adamw_text
# ## Part 2: AdamW's decoupled weight decay (2 points)
#
# Weight decay pulls every weight toward 0. Adding $\lambda\theta$ to the gradient (L2
# regularisation, what `torch.optim.Adam(weight_decay=...)` does) sends it through $m$ and $v$,
# and Adam's division by $\sqrt{\hat v}$ then decays weights with large gradients less.
# AdamW *decouples* the decay: it shrinks the parameter directly, then takes the Adam step
# with the plain gradient:
#
# $$\theta \leftarrow \theta\,(1 - \eta\lambda), \qquad \text{then the Adam update of part 1.}$$
#
# Write `adamw_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
# weight_decay=1e-2)` returning the new `(param, m, v)`, equal to `torch.optim.AdamW`.
# You may call your `adam_step`.

# %% [solution] id=adamw
def adamw_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
    """Decoupled decay, then the Adam update -> (new param, new m, new v)."""
    ### BEGIN SOLUTION
    decayed = param * (1 - lr * weight_decay)
    return adam_step(decayed, grad, m, v, t, lr=lr, betas=betas, eps=eps)
    ### END SOLUTION

# %% [tests] id=adamw_tests points=2
EARLIER = {"adam_step": grading.functional_step(bertcourse.optim.Adam)}
param = grading.randn(3, 4, seed=1)
grading.check_optimizer_steps(adamw_step, torch.optim.AdamW, param, gradients((3, 4), 10, seed=2), lr=0.01, weight_decay=0.1, forbid="optim", use_reference=EARLIER, mistakes="adamw")
### BEGIN HIDDEN TESTS
param = grading.randn(2, 5, seed=5, dtype=torch.float64)
grads = gradients((2, 5), 20, seed=6, dtype=torch.float64)
grading.check_optimizer_steps(adamw_step, torch.optim.AdamW, param, grads, lr=0.05, weight_decay=0.5, betas=(0.85, 0.995), eps=1e-6, forbid="optim", use_reference=EARLIER, mistakes="adamw")
### END HIDDEN TESTS

# %% [markdown] id=linear_text
# ## Part 3: linear warm-up, then linear decay (2 points)
#
# The learning rate at step $s$ (the number of updates already done, starting at 0) is the
# peak rate times a multiplier. transformers' `get_linear_schedule_with_warmup` rises linearly
# during $w$ warm-up steps, then decays linearly to 0 at the total number of steps $T$:
#
# $$f(s) = \begin{cases} s / w & s < w \\ \max\!\big(0,\ (T - s)/(T - w)\big) & s \ge w \end{cases}$$
#
# Write `warmup_linear_decay(step, *, warmup_steps, total_steps)` returning $f(s)$ as a float.
# `warmup_steps` may be 0 (no warm-up); steps after $T$ give 0.

# %% [solution] id=linear
def warmup_linear_decay(step, *, warmup_steps, total_steps):
    """transformers' linear schedule: the multiplier of the peak learning rate at `step`."""
    ### BEGIN SOLUTION
    if step < warmup_steps:
        return step / warmup_steps
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))
    ### END SOLUTION

# %% [tests] id=linear_tests points=2
for step in range(0, 11):
    grading.check_close(warmup_linear_decay, "bertcourse.optim.warmup_linear_decay", step, warmup_steps=4, total_steps=10, forbid="schedules", quiet=True, mistakes="warmup_linear")
print("OK warmup_linear_decay for steps 0..10 (warm-up 4, total 10)")
### BEGIN HIDDEN TESTS
for warmup, total in ((0, 7), (3, 12), (1, 2), (10_000, 1_000_000)):
    for step in sorted({0, 1, 2, warmup - 1, warmup, warmup + 1, total // 2, total - 1, total, total + 1, total + 5} - {-1}):
        grading.check_close(warmup_linear_decay, "bertcourse.optim.warmup_linear_decay", step, warmup_steps=warmup, total_steps=total, forbid="schedules", quiet=True, mistakes="warmup_linear")
print("OK warmup_linear_decay")
### END HIDDEN TESTS

# %% [markdown] id=poly_text
# ## Part 4: the original release's schedule (1 point)
#
# The original `optimization.py` decays polynomially over **all** $T$ steps from step 0, and
# replaces the rate by the linear warm-up while $s < w$:
#
# $$g(s) = \begin{cases} s / w & s < w \\ \big(1 - \min(s, T)/T\big)^{p} & s \ge w \end{cases}$$
#
# with power $p$ (1 in BERT). Right after warm-up the rate is therefore $1 - w/T$, not 1: a
# small drop that transformers' schedule of part 3 does not have. Write
# `polynomial_decay_with_warmup(step, *, warmup_steps, total_steps, power=1.0)`.

# %% [solution] id=poly
def polynomial_decay_with_warmup(step, *, warmup_steps, total_steps, power=1.0):
    """The original release's schedule: the multiplier of the peak learning rate at `step`."""
    ### BEGIN SOLUTION
    if step < warmup_steps:
        return step / warmup_steps
    return (1.0 - min(step, total_steps) / total_steps) ** power
    ### END SOLUTION

# %% [tests] id=poly_tests points=1
REFERENCE = "bertcourse.optim.polynomial_decay_with_warmup"
for step in range(0, 11):
    grading.check_close(polynomial_decay_with_warmup, REFERENCE, step, warmup_steps=4, total_steps=10, forbid="schedules", quiet=True)
print("OK polynomial_decay_with_warmup for steps 0..10 (warm-up 4, total 10)")
### BEGIN HIDDEN TESTS
for warmup, total, power in ((2, 9, 2.0), (0, 5, 0.5), (10_000, 1_000_000, 1.0)):
    for step in sorted({0, 1, warmup, warmup + 1, total // 2, total - 1, total, total + 3} - {-1}):
        grading.check_close(polynomial_decay_with_warmup, REFERENCE, step, warmup_steps=warmup, total_steps=total, power=power, forbid="schedules", quiet=True)
print("OK polynomial_decay_with_warmup")
### END HIDDEN TESTS

# %% [markdown] id=outro
# ## Going further (not graded)
#
# - Plot both schedules for BERT's recipe (10k warm-up steps of 1M) near the end of warm-up.
# - Run `adam_step` without the bias correction for 5 steps from $m = v = 0$: how large are
#   the first updates compared with `lr`? (The original optimizer used $\epsilon = 10^{-6}$.)

# %% [scratch]
