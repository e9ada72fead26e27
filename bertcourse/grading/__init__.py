"""Checks for the test cells of the exercises (`exercises/`, `solutions/`), in three places.

The same test cell, written once in `solutions/_src`, runs

1. in the learner's JupyterLab (the visible checks, in the learner's own process: friendly
   messages, nothing to enforce);
2. under plain `nbgrader autograde`, which restores the hidden tests and runs them in the
   student's kernel: it trusts the student, who can forge any result there;
3. under the referee of `python -m bertcourse.grade`, outside the student's process: there
   the learner's functions are `remote.RemoteFunction`s, so every call sends plain data to
   the jailed kernel and gets plain data back (`bertcourse.grade.boundary`), while the reference, the expected
   values, the tolerances and the hidden inputs stay with the referee. Forbidden calls are
   found by static analysis of the answer cells (`rules`).

Modules: `values` (describe, compare), `forbid` (the rule and `run`), `checks`, `optim`,
`inputs`, `rules` (the static rules), `allow` (what a part permits), `probe`, `mistakes`
(named mistakes and their catalogues), `i18n`. The trust boundary the referee calls through
(`codec`, `remote`) is `bertcourse.grade.boundary`.

A test cell calls one helper per check, and the helper raises `GradingError` (an
`AssertionError`) with a message a learner can act on: the call with the shapes of its
inputs, expected against got, the largest error and where it is, and a hint. nbgrader gives a
test cell its points when it runs without an error; the helpers return None, so a cell never
ends on a number that nbgrader would read as partial credit.

    check_close(fn, reference, *args, **kwargs)   the learner's fn against a reference, same inputs
    check_equal(...)                               the same with exact equality
    check_value(got, expected, what=...)           compare values a cell already has
    check_true(condition, message)                 a property (e.g. "rows sum to 1")
    check_tensor(x, shape=..., dtype=...)          a tensor of the expected shape and dtype
    check_proportion(count, total, p, what=...)    a rate within a few binomial standard errors
    check_optimizer_steps(step_fn, torch.optim.Adam, param, grads, lr=...)
                                                   a functional optimizer step, step by step
    run(fn, *args, **kwargs)                       call the learner's fn under the same rules
    once(fn, *args, **kwargs)                      a test's own reference computation, done once
                                                   per grading process for equal inputs (`memo`)

The rules, common to all of them:

- **Forbidden references.** `forbid=` names functions the part asks the learner to write (the
  PyTorch built-in, bertcourse's own version): while the learner's code runs, each is replaced
  by a stub that raises `ForbiddenCallError` and records the call, so an answer that merely
  calls the reference earns nothing, even if it catches the error. Names are dotted paths
  ("torch.nn.functional.scaled_dot_product_attention", "torch.optim.Adam.step") or keys of
  `FORBIDDEN`. Aliases in the notebook (`from torch.nn.functional import
  scaled_dot_product_attention as sdpa`) are replaced too. Modules that are not imported yet
  (transformers) are left alone: code that uses them must import them first, which patches
  nothing but is visible in the notebook.
- **Earlier parts.** `use_reference={"split_heads": "bertcourse.attention.split_heads"}` lets a
  part be graded on its own: while the learner's function runs, the notebook's `split_heads`
  is bertcourse's, so a mistake in part 2 does not cost the points of part 3 again.
- **Copies.** The reference and the learner's function each get their own deep copy of the
  inputs (tensors, modules, generators), so in-place changes cannot leak between them.
- **Warnings** raised while the checked code runs are silenced: they go to stderr, which
  nbgrader (and `nbgrader validate`) would count as a failure of correct code.
- **Language.** `set_language("zh_CN")` (the last line of a Chinese release's set-up cell)
  makes every failure's text Chinese: the checks' words, the test cell's messages and hints, the
  named mistakes (`i18n`, catalogue `locales/zh_CN/LC_MESSAGES/feedback.po`); what has no
  translation stays English. The referee sets it from the notebook's metadata.
- **Tolerances** default by dtype (float32: atol 1e-5, rtol 1e-4; float64: 1e-10, 1e-8), loose
  enough for a correct answer written differently (einsum, loops, another equivalent formula).
"""

from bertcourse.grading.checks import (
    check_close,
    check_equal,
    check_proportion,
    check_tensor,
    check_true,
    check_value,
)
from bertcourse.grading.forbid import FORBIDDEN, forbidden, run
from bertcourse.grading.i18n import get_language, set_language
from bertcourse.grading.inputs import randint, randn
from bertcourse.grading.memo import once
from bertcourse.grading.optim import check_optimizer_steps, functional_step
from bertcourse.grading.values import ForbiddenCallError, GradingError, describe

__all__ = [
    "FORBIDDEN",
    "ForbiddenCallError",
    "GradingError",
    "check_close",
    "check_equal",
    "check_optimizer_steps",
    "check_proportion",
    "check_tensor",
    "check_true",
    "check_value",
    "describe",
    "forbidden",
    "functional_step",
    "get_language",
    "once",
    "randint",
    "randn",
    "run",
    "set_language",
]
