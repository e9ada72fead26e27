"""Unit tests of bertcourse.grading, the helpers the exercise test cells call.

The pipeline tests (test_exercises.py) show that the notebooks grade right; these pin down the
helpers' own contract: messages a learner can act on, forbidden functions really disabled and
really restored, tolerances, and no value returned that nbgrader could read as partial credit.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import bertcourse.attention
import bertcourse.optim
from bertcourse import grading

SDPA = "bertcourse.attention.scaled_dot_product_attention"


def good_sdpa(q, k, v, bias=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias
    probs = torch.softmax(scores, dim=-1)
    return probs @ v, probs


def unscaled_sdpa(q, k, v, bias=None):
    probs = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return probs @ v, probs


def qkv(seed=0, dtype=torch.float32):
    return tuple(grading.randn(2, 3, 5, 8, seed=seed + i, dtype=dtype) for i in range(3))


def test_check_close_passes_and_returns_none(capsys):
    assert grading.check_close(good_sdpa, SDPA, *qkv(), forbid="sdpa") is None
    assert "OK good_sdpa(q=Tensor(2, 3, 5, 8) float32" in capsys.readouterr().out


def test_check_close_message_names_call_shapes_and_error():
    with pytest.raises(grading.GradingError) as info:
        grading.check_close(unscaled_sdpa, SDPA, *qkv(), hint="divide by sqrt(d_k)")
    message = str(info.value)
    assert "unscaled_sdpa(q=Tensor(2, 3, 5, 8) float32, k=Tensor(2, 3, 5, 8) float32" in message
    assert "output[0]" in message and "max abs error" in message and "at index (" in message
    assert message.endswith("Hint: divide by sqrt(d_k)")


def test_shape_dtype_and_nan_mismatches_are_reported():
    with pytest.raises(grading.GradingError, match=r"expected shape \(2, 3\), got \(3, 2\)"):
        grading.check_value(torch.zeros(3, 2), torch.zeros(2, 3))
    with pytest.raises(grading.GradingError, match="expected dtype torch.int64, got torch.bool"):
        grading.check_value(torch.ones(2, dtype=torch.bool), torch.ones(2, dtype=torch.long))
    with pytest.raises(grading.GradingError, match="got NaN at 1 position"):
        grading.check_value(torch.tensor([0.5, float("nan")]), torch.tensor([0.5, 0.5]))
    grading.check_value(torch.tensor([float("nan")]), torch.tensor([float("nan")]))  # NaN expected
    with pytest.raises(grading.GradingError, match="expected a torch.Tensor"):
        grading.check_value([1.0, 2.0], torch.tensor([1.0, 2.0]))


def test_tolerances_follow_the_dtype():
    x = torch.tensor([1.0, 2.0])
    grading.check_value(x + 1e-6, x)  # float32: rounding of another formula passes
    with pytest.raises(grading.GradingError):
        grading.check_value(x + 1e-3, x)
    y = x.double()
    grading.check_value(y + 1e-12, y)
    with pytest.raises(grading.GradingError):
        grading.check_value(y + 1e-6, y)  # float64 is held to float64 precision


def test_forbidden_call_fails_and_is_restored():
    original = F.scaled_dot_product_attention

    def cheat(q, k, v, bias=None):
        return F.scaled_dot_product_attention(q, k, v), None

    with pytest.raises(
        grading.GradingError, match="called torch.nn.functional.scaled_dot_product_attention"
    ):
        grading.check_close(cheat, SDPA, *qkv(), forbid="sdpa")
    assert F.scaled_dot_product_attention is original
    assert torch._C._nn.scaled_dot_product_attention is original


def test_a_caught_forbidden_call_still_fails():
    def sneaky(q, k, v, bias=None):
        try:
            bertcourse.attention.scaled_dot_product_attention(q, k, v)
        except Exception:
            pass
        return good_sdpa(q, k, v, bias)

    with pytest.raises(grading.GradingError, match="handled the error"):
        grading.check_close(sneaky, SDPA, *qkv(), forbid="sdpa")


def test_aliases_in_the_notebook_namespace_are_replaced():
    namespace: dict = {}
    exec(
        "from torch.nn.functional import scaled_dot_product_attention as fused\n"
        "def answer(q, k, v, bias=None):\n"
        "    return fused(q, k, v), None\n",
        namespace,
    )
    with pytest.raises(grading.GradingError, match="scaled_dot_product_attention"):
        grading.run(namespace["answer"], *qkv(), forbid="sdpa")
    assert namespace["fused"] is F.scaled_dot_product_attention  # restored


def test_the_reference_itself_is_refused():
    with pytest.raises(grading.GradingError, match="itself"):
        grading.check_close(
            bertcourse.attention.scaled_dot_product_attention, SDPA, *qkv(), forbid="sdpa"
        )


def test_inherited_methods_are_patched_and_removed_again():
    assert "log_softmax" not in vars(torch.Tensor)

    def answer(x):
        return x.log_softmax(-1)

    with pytest.raises(grading.GradingError, match="torch.Tensor.log_softmax"):
        grading.run(answer, torch.randn(3), forbid="log_softmax")
    assert "log_softmax" not in vars(torch.Tensor)
    torch.randn(3).log_softmax(-1)  # works again


def test_use_reference_replaces_an_earlier_part_only_while_checked():
    namespace: dict = {"torch": torch}
    exec(
        "def split_heads(x, num_heads):\n"
        "    return x.view(x.shape[0], num_heads, x.shape[1], -1)  # wrong\n"
        "def heads_sum(x, num_heads):\n"
        "    return split_heads(x, num_heads).sum(-1)\n",
        namespace,
    )
    wrong_split = namespace["split_heads"]

    def reference(x, num_heads):
        return bertcourse.attention.split_heads(x, num_heads).sum(-1)

    x = grading.randn(2, 3, 8, seed=1)
    with pytest.raises(grading.GradingError):
        grading.check_close(namespace["heads_sum"], reference, x, 2)
    earlier = {"split_heads": "bertcourse.attention.split_heads"}
    grading.check_close(
        namespace["heads_sum"], reference, x, 2, forbid="heads", use_reference=earlier
    )
    assert namespace["split_heads"] is wrong_split


def test_inputs_are_copied_and_in_place_changes_can_be_caught():
    def in_place(x):
        x.add_(1)
        return x

    x = torch.zeros(3)
    grading.check_close(in_place, lambda x: x + 1, x)
    assert torch.equal(x, torch.zeros(3))  # the caller's tensor is untouched
    with pytest.raises(grading.GradingError, match="modified its input in place"):
        grading.check_close(in_place, lambda x: x + 1, x, inputs_unchanged=True)


def test_warnings_are_silenced_while_checked(recwarn):
    def noisy(x):
        import warnings

        warnings.warn("a library warning", UserWarning, stacklevel=1)
        return x

    grading.check_close(noisy, lambda x: x, torch.ones(2))
    assert not [w for w in recwarn if "library warning" in str(w.message)]


def test_check_proportion_uses_binomial_standard_errors():
    # p = 0.15, n = 10_000: one standard error is 0.00357
    grading.check_proportion(1500 + 17, 10_000, 0.15, "rate")  # 0.5 SE off
    grading.check_proportion(1500 + 170, 10_000, 0.15, "rate")  # 4.8 SE off
    with pytest.raises(
        grading.GradingError, match=r"observed 0\.1700 \(1700 of 10000\), expected 0\.1500"
    ):
        grading.check_proportion(1700, 10_000, 0.15, "rate")  # 5.6 SE off
    with pytest.raises(grading.GradingError):
        grading.check_proportion(1, 10_000, 0.0, "rate")  # p = 0 means exactly 0


def test_optimizer_steps_against_torch_and_the_first_wrong_step():
    def adam_step(param, grad, m, v, t, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        b1, b2 = betas
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad**2
        return param - lr * (m / (1 - b1**t)) / ((v / (1 - b2**t)).sqrt() + eps), m, v

    def late_correction(param, grad, m, v, t, **hyper):
        return adam_step(param, grad, m, v, t + 1, **hyper)

    param = grading.randn(4, seed=0)
    grads = [grading.randn(4, seed=s) for s in range(1, 6)]
    grading.check_optimizer_steps(adam_step, torch.optim.Adam, param, grads, lr=0.1, forbid="optim")
    with pytest.raises(grading.GradingError, match="step t=1 of 5"):
        grading.check_optimizer_steps(late_correction, torch.optim.Adam, param, grads, lr=0.1)


def test_functional_step_equals_the_optimizer_and_survives_the_stubs():
    reference = grading.functional_step(bertcourse.optim.Adam)
    param, grad = grading.randn(5, seed=1), grading.randn(5, seed=2)
    m, v = grading.randn(5, seed=3) * 0.1, grading.randn(5, seed=4).abs() * 0.1
    p = torch.nn.Parameter(param.clone())
    p.grad = grad.clone()
    opt = torch.optim.Adam([p], lr=0.01)
    opt.state[p] = {"step": torch.tensor(2.0), "exp_avg": m.clone(), "exp_avg_sq": v.clone()}
    opt.step()
    with grading.forbidden("optim"):
        new_param, new_m, new_v = reference(param, grad, m, v, 3, lr=0.01)
    torch.testing.assert_close(new_param, p.detach())
    torch.testing.assert_close(new_m, opt.state[p]["exp_avg"])
    torch.testing.assert_close(new_v, opt.state[p]["exp_avg_sq"])


def test_every_forbidden_name_exists():
    import bertcourse.embeddings  # noqa: F401
    import bertcourse.encoder  # noqa: F401
    import bertcourse.losses  # noqa: F401
    import bertcourse.masks  # noqa: F401
    import bertcourse.mlm  # noqa: F401
    import bertcourse.nsp  # noqa: F401

    for group, names in grading.FORBIDDEN.items():
        for name in names:
            if name.startswith("transformers."):
                continue  # only patched once a notebook imports transformers
            assert grading.forbid._resolve(name) is not None, (group, name)
