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

# %% [markdown] id=bert_adam_text
# ## Part 3: the original BERT optimizer (2 points)
#
# The original release trained BERT with `AdamWeightDecayOptimizer` (`optimization.py`), which
# differs from part 2 in three ways: **no bias correction** (it uses $m$ and $v$ as they are),
# $\epsilon = 10^{-6}$ by default, and the decay term is added to the update *before* the
# learning rate multiplies it:
#
# $$u = \frac{m_t}{\sqrt{v_t} + \epsilon} + \lambda\,\theta, \qquad \theta \leftarrow \theta - \eta\, u.$$
#
# ($\eta(u_{\text{Adam}} + \lambda\theta)$ is exactly AdamW's $\theta(1 - \eta\lambda) -
# \eta\,u_{\text{Adam}}$: the decay is decoupled from $m$ and $v$ in both.)
#
# Write `bert_adam_step(param, grad, m, v, t, *, lr=1e-4, betas=(0.9, 0.999), eps=1e-6,
# weight_decay=0.01)` returning the new `(param, m, v)`. `t` is not used by this optimizer; it
# is there so that every step function of this notebook has the same signature. The tests leave
# `eps` at its default and use gradients as small as $10^{-7}$, where $\epsilon$ matters.

# %% [solution] id=bert_adam
def bert_adam_step(param, grad, m, v, t, *, lr=1e-4, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01):
    """The original AdamWeightDecayOptimizer: no bias correction -> (new param, new m, new v)."""
    ### BEGIN SOLUTION
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    update = m / (v.sqrt() + eps) + weight_decay * param
    return param - lr * update, m, v
    ### END SOLUTION

# %% [tests] id=bert_adam_tests points=2
# the reference: bertcourse.optim.bert_adam, i.e. AdamW(bias_correction=False, eps=1e-6)
ORIGINAL = {"bias_correction": False, "eps": 1e-6}
param = grading.randn(3, 4, seed=11)
grading.check_optimizer_steps(bert_adam_step, bertcourse.optim.AdamW, param, gradients((3, 4), 10, seed=12), lr=0.01, weight_decay=0.1, reference_hyper=ORIGINAL, forbid="optim", mistakes="ch06:bert_adam")
### BEGIN HIDDEN TESTS
param = grading.randn(6, seed=13, dtype=torch.float64)
tiny = [g * 1e-7 for g in gradients((6,), 8, seed=14, dtype=torch.float64)]  # sqrt(v) ~ eps: eps matters
grading.check_optimizer_steps(bert_adam_step, bertcourse.optim.AdamW, param, tiny, lr=1e-3, weight_decay=0.01, reference_hyper=ORIGINAL, forbid="optim", mistakes="ch06:bert_adam")
grading.check_optimizer_steps(bert_adam_step, bertcourse.optim.AdamW, param, gradients((6,), 15, seed=15, dtype=torch.float64), lr=0.05, betas=(0.8, 0.99), weight_decay=0.3, reference_hyper=ORIGINAL, forbid="optim", mistakes="ch06:bert_adam")
big = [g * 1e4 for g in gradients((6,), 5, seed=16, dtype=torch.float64)]
grading.check_optimizer_steps(bert_adam_step, bertcourse.optim.AdamW, param, big, lr=1e-4, weight_decay=0.0, reference_hyper=ORIGINAL, forbid="optim", mistakes="ch06:bert_adam")
### END HIDDEN TESTS

# %% [markdown] id=groups_text
# ## Part 4: which parameters are decayed (2 points)
#
# The original excludes LayerNorm parameters and every bias from the weight decay
# (`exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"]`, matched anywhere in the
# name); everything else, the embeddings included, is decayed. transformers' `Trainer` does the
# same, by module type for the norms. In `bertcourse` the norms are `nn.LayerNorm` modules
# named `layer_norm`.
#
# Write `bert_param_groups(model, weight_decay)` returning two optimizer parameter groups:
# `[{"params": [...], "param_names": [...], "weight_decay": weight_decay},
#   {"params": [...], "param_names": [...], "weight_decay": 0.0}]`, the decayed parameters
# first, each list in the order of `model.named_parameters()`. Every parameter appears exactly
# **once**: the MLM decoder's weight *is* the word-embedding matrix (tied), and must not be
# counted (or decayed) twice; a frozen parameter (`requires_grad=False`) is in its group too
# (it gets no gradient, so `torch.optim` leaves it alone, and unfreezing it later needs no new
# groups). transformers' `Trainer` leaves frozen parameters out of its groups instead.

# %% [solution] id=groups
def bert_param_groups(model, weight_decay):
    """[decayed group, not-decayed group] of `model`'s parameters, each parameter once."""
    ### BEGIN SOLUTION
    norms = {id(p) for module in model.modules() if isinstance(module, torch.nn.LayerNorm) for p in module.parameters()}
    decay, no_decay = [], []
    for name, p in model.named_parameters():  # a tied parameter comes once
        skip = id(p) in norms or "bias" in name or "LayerNorm" in name or "layer_norm" in name
        (no_decay if skip else decay).append((name, p))
    return [
        {"params": [p for _, p in decay], "param_names": [n for n, _ in decay], "weight_decay": weight_decay},
        {"params": [p for _, p in no_decay], "param_names": [n for n, _ in no_decay], "weight_decay": 0.0},
    ]
    ### END SOLUTION

# %% [tests] id=groups_tests points=2
from bertcourse import BertConfig, BertForPreTraining, BertModel  # noqa: E402
from bertcourse.grading.catalogues.ch06 import group_names  # noqa: E402
from bertcourse.grading.mistakes import diagnose, message  # noqa: E402

FORBID_GROUPS = ("bertcourse.optim.bert_param_groups",)


def check_groups(model, weight_decay):
    reference = bertcourse.optim.bert_param_groups(model, weight_decay)
    groups = grading.run(bert_param_groups, model, weight_decay, forbid=FORBID_GROUPS)
    grading.check_true(isinstance(groups, (list, tuple)) and len(groups) == 2, "bert_param_groups must return two groups")
    for which, group in zip(("decayed", "not-decayed"), groups):
        grading.check_true(isinstance(group, dict) and {"params", "param_names", "weight_decay"} <= set(group), f"the {which} group needs the keys params, param_names, weight_decay")
    if group_names(groups) != group_names(reference):  # a known mistake? (its names on every probe)
        learner = lambda m, wd: group_names(grading.run(bert_param_groups, m, wd, forbid=FORBID_GROUPS))  # noqa: E731
        known = diagnose(group_names(groups), "ch06:groups", (model, weight_decay), {}, lambda g, w: [] if g == w else ["differ"], call=learner)
        if known:
            grading.check_true(False, message(known))
    params = dict(model.named_parameters())
    for which, group, ref in zip(("decayed", "not-decayed"), groups, reference):
        grading.check_value(group["weight_decay"], ref["weight_decay"], f"weight_decay of the {which} group")
        names = list(group["param_names"])
        grading.check_true(len(names) == len(set(names)), f"a parameter appears twice in the {which} group (a tied weight?)")
        frozen = [n for n in ref["param_names"] if n not in names and not params[n].requires_grad]
        grading.check_true(not frozen, f"the {which} group leaves out {len(frozen)} frozen parameter(s), e.g. {frozen[0] if frozen else ''}", hint="every parameter appears once, requires_grad=False included")
        grading.check_true(names == ref["param_names"], f"the {which} group holds {sorted(set(names) ^ set(ref['param_names']))[:4]} wrongly (in or out)", hint="LayerNorm weights and every bias skip the decay; each parameter once")
        grading.check_true(len(group["params"]) == len(names) and all(torch.equal(t, params[n].detach()) for t, n in zip(group["params"], names)), f"the {which} group's params do not match its param_names")


config = BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16, max_position_embeddings=16)
check_groups(BertForPreTraining(config), 0.01)
print("OK bert_param_groups")
### BEGIN HIDDEN TESTS
config = BertConfig(vocab_size=30, hidden_size=12, num_hidden_layers=2, num_attention_heads=3, intermediate_size=20, max_position_embeddings=10, type_vocab_size=3)
check_groups(BertForPreTraining(config), 0.1)
check_groups(BertModel(config), 0.0)
# frozen parameters (embeddings not trained) still appear, each once: the statement says every parameter
frozen = BertForPreTraining(config)
frozen.bert.embeddings.requires_grad_(False)
check_groups(frozen, 0.1)
### END HIDDEN TESTS

# %% [markdown] id=linear_text
# ## Part 5: linear warm-up, then linear decay (2 points)
#
# The learning rate at step $s$ (the number of updates already done, starting at 0) is the
# peak rate times a multiplier. transformers' `get_linear_schedule_with_warmup` rises linearly
# during $w$ warm-up steps, then decays linearly to 0 at the total number of steps $T$:
#
# $$f(s) = \begin{cases} s / w & s < w \\ \max\!\big(0,\ (T - s)/(T - w)\big) & s \ge w \end{cases}$$
#
# Write `warmup_linear_decay(step, *, warmup_steps, total_steps)` returning $f(s)$ as a float.
# `warmup_steps` may be 0 (no warm-up) or equal to `total_steps` (then every step from
# `warmup_steps` on gives 0); steps after $T$ give 0.

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
# every number below comes from the keyed generator (other inputs at grading time), the edge cases stay
w, t = sorted(int(v) for v in grading.randint(2, 40, 2, seed=21))
big = int(grading.randint(1_000, 20_000, seed=22))
for warmup, total in ((0, t + 1), (w, t + w + 1), (1, 2), (w, w), (big, big * 100)):
    for step in sorted({0, 1, 2, warmup - 1, warmup, warmup + 1, total // 2, total - 1, total, total + 1, total + 5} - {-1}):
        grading.check_close(warmup_linear_decay, "bertcourse.optim.warmup_linear_decay", step, warmup_steps=warmup, total_steps=total, forbid="schedules", quiet=True, mistakes="warmup_linear")
print("OK warmup_linear_decay")
### END HIDDEN TESTS

# %% [markdown] id=poly_text
# ## Part 6: the original release's schedule (1 point)
#
# The original `optimization.py` decays polynomially over **all** $T$ steps from step 0, and
# replaces the rate by the linear warm-up while $s < w$:
#
# $$g(s) = \begin{cases} s / w & s < w \\ \big(1 - \min(s, T)/T\big)^{p} & s \ge w \end{cases}$$
#
# with power $p$ (1 in BERT). Right after warm-up the rate is therefore $1 - w/T$, not 1: a
# small drop that transformers' schedule of part 5 does not have. Write
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
w, t = (int(v) for v in grading.randint(1, 30, 2, seed=23))
drawn_power = int(grading.randint(1, 6, seed=24)) / 2
big = int(grading.randint(1_000, 20_000, seed=25))
for warmup, total, power in ((w, w + t + 1, drawn_power), (0, t + 1, 0.5), (big, big * 100, 1.0)):
    for step in sorted({0, 1, warmup, warmup + 1, total // 2, total - 1, total, total + 3} - {-1}):
        grading.check_close(polynomial_decay_with_warmup, REFERENCE, step, warmup_steps=warmup, total_steps=total, power=power, forbid="schedules", quiet=True)
print("OK polynomial_decay_with_warmup")
### END HIDDEN TESTS

# %% [markdown] id=loop_text
# ## Part 7: the schedule in a training loop (2 points)
#
# A schedule only matters through the learning rate the optimizer actually uses. With PyTorch's
# `torch.optim.lr_scheduler.LambdaLR(optimizer, f)`, the optimizer starts at `lr * f(0)`, and
# each `scheduler.step()` moves it to the next step's rate. The order in the loop is therefore
# `optimizer.step()` **then** `scheduler.step()`: the other order skips $f(0)$ and runs the whole
# schedule one step early (PyTorch warns about it).
#
# Write `train_with_schedule(model, batches, *, lr, warmup_steps, total_steps)`: an
# `torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)` optimizer, a `LambdaLR` with
# your `warmup_linear_decay` of part 5, and one optimizer step per batch (each batch is a dict
# of keyword arguments for `model`, whose output has a `.loss`). Return the list of the learning
# rates the optimizer used, one per step. The tests check your returned rates *and* the
# trained weights against the same loop run outside your notebook.
#
# *Hint:* `functools.partial(warmup_linear_decay, warmup_steps=..., total_steps=...)` or a
# lambda gives `LambdaLR` its one-argument function; `optimizer.param_groups[0]["lr"]` is the
# rate the next `optimizer.step()` will use.

# %% [solution] id=loop
def train_with_schedule(model, batches, *, lr, warmup_steps, total_steps):
    """One AdamW step per batch under the linear schedule -> the learning rate of each step."""
    ### BEGIN SOLUTION
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: warmup_linear_decay(step, warmup_steps=warmup_steps, total_steps=total_steps)
    )
    used = []
    for batch in batches:
        used.append(optimizer.param_groups[0]["lr"])
        model(**batch).loss.backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    return used
    ### END SOLUTION

# %% [tests] id=loop_tests points=2
import copy  # noqa: E402

from bertcourse import BertConfig, BertForPreTraining  # noqa: E402


def reference_training(model, batches, *, lr, warmup_steps, total_steps):
    """The loop as the statement describes it, run here -> (the rates, the trained weights)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    multiplier = lambda s: bertcourse.optim.warmup_linear_decay(s, warmup_steps=warmup_steps, total_steps=total_steps)  # noqa: E731
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)
    for batch in batches:
        model(**batch).loss.backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    return [lr * multiplier(s) for s in range(len(batches))], [p.detach() for p in model.parameters()]


def pretraining_batches(config, n, seed):
    ids = [grading.randint(5, config.vocab_size, 2, 6, seed=seed + i) for i in range(n)]
    return [{"input_ids": x, "labels": x.clone(), "next_sentence_label": torch.tensor([0, 1])} for x in ids]


def check_training(config, n_batches, seed, **schedule):
    torch.manual_seed(seed)
    # float64: Adam divides by sqrt(v), so rounding differences (another thread count, another
    # machine) can grow to 1e-4 in float32 after a few steps at a high rate; in float64 they cannot
    model = BertForPreTraining(config).double()
    batches = pretraining_batches(config, n_batches, seed)
    # the same inputs for every student: a grader computes this reference run once
    expected, trained = grading.once(reference_training, copy.deepcopy(model), batches, **schedule)
    used = grading.run(train_with_schedule, model, batches, forbid="schedules", use_reference={"warmup_linear_decay": "bertcourse.optim.warmup_linear_decay"}, **schedule)
    grading.check_value([float(x) for x in used], expected, f"the learning rates used with {schedule}", atol=1e-12, rtol=1e-9)
    for (name, got), want in zip(model.named_parameters(), trained, strict=True):
        grading.check_value(got.detach(), want, f"{name} after training", atol=1e-9, rtol=1e-7)


CONFIG = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16, max_position_embeddings=8, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
check_training(CONFIG, 6, seed=21, lr=0.01, warmup_steps=2, total_steps=6)
print("OK train_with_schedule")
### BEGIN HIDDEN TESTS
check_training(CONFIG, 5, seed=22, lr=0.02, warmup_steps=0, total_steps=8)
check_training(CONFIG, 7, seed=23, lr=0.003, warmup_steps=3, total_steps=5)  # steps after the end: rate 0
### END HIDDEN TESTS

# %% [markdown] id=outro
# ## Going further (not graded)
#
# - Plot both schedules for BERT's recipe (10k warm-up steps of 1M) near the end of warm-up.
# - Run `adam_step` without the bias correction for 5 steps from $m = v = 0$: how large are
#   the first updates compared with `lr`? (The original optimizer used $\epsilon = 10^{-6}$.)

# %% [scratch]
