"""bertcourse.losses against torch.nn.functional.cross_entropy and the closed-form gradient."""

from __future__ import annotations

import zlib

import pytest
import torch
import torch.nn.functional as F

from bertcourse.config import IGNORE_INDEX
from bertcourse.losses import (
    ORIGINAL_LOSS_EPS,
    cross_entropy,
    cross_entropy_grad,
    gather_labelled,
    mlm_loss,
    nsp_loss,
    original_mlm_loss,
)


def _random_case(shape, num_classes, ignore, *, ignore_index=IGNORE_INDEX, seed=0, scale=5.0):
    """Logits (*shape, V) with a large spread (so log-sum-exp stability matters) and targets."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(*shape, num_classes, generator=g, dtype=torch.float64) * scale
    targets = torch.randint(num_classes, shape, generator=g)
    if ignore == "some":
        drop = torch.rand(shape, generator=g) < 0.4
        drop.view(-1)[0] = True  # at least one ignored
        drop.view(-1)[-1] = False  # at least one labelled
        targets[drop] = ignore_index
    elif ignore == "all":
        targets[:] = ignore_index
    return logits, targets


def _torch_reference(logits, targets, ignore_index, reduction):
    """F.cross_entropy wants the classes in dim 1: flatten (..., V) to (M, V)."""
    num_classes = logits.shape[-1]
    out = F.cross_entropy(
        logits.reshape(-1, num_classes),
        targets.reshape(-1),
        ignore_index=ignore_index,
        reduction=reduction,
    )
    return out.reshape(targets.shape) if reduction == "none" else out


SHAPES = [(1,), (7,), (64,), (3, 5), (2, 3, 4)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("num_classes", [1, 2, 11, 300])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore", ["none", "some", "all"])
def test_cross_entropy_equals_torch(shape, num_classes, reduction, ignore):
    seed = zlib.crc32(repr((shape, num_classes, reduction, ignore)).encode())  # fixed per case
    logits, targets = _random_case(shape, num_classes, ignore, seed=seed)
    ours = cross_entropy(logits, targets, reduction=reduction)
    ref = _torch_reference(logits, targets, IGNORE_INDEX, reduction)
    assert ours.shape == ref.shape
    # float64: only summation order differs
    torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("ignore_index", [0, -1, 3])
def test_custom_ignore_index(ignore_index):
    logits, targets = _random_case((4, 6), 5, "some", ignore_index=ignore_index, seed=3)
    for reduction in ("mean", "sum", "none"):
        ours = cross_entropy(logits, targets, ignore_index=ignore_index, reduction=reduction)
        ref = _torch_reference(logits, targets, ignore_index, reduction)
        torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)


def test_float32_and_extreme_logits():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(50, 30522, generator=g) * 30  # float32, a BERT-sized vocabulary
    logits[0, :] = 1e4  # all equal and huge: exp overflows without the max shift
    logits[1, 5:] = -float("inf")  # impossible classes (target 2 is still possible)
    targets = torch.randint(30522, (50,), generator=g)
    targets[1] = 2
    targets[::7] = IGNORE_INDEX
    for reduction in ("mean", "sum", "none"):
        ours = cross_entropy(logits, targets, reduction=reduction)
        ref = _torch_reference(logits, targets, IGNORE_INDEX, reduction)
        assert torch.isfinite(ours).all()
        # float32: a few ulps of the (up to ~1e3) per-token losses
        torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-4)


def test_all_ignored_mean_is_nan_like_torch():
    logits, targets = _random_case((4, 3), 7, "all")
    ref = _torch_reference(logits, targets, IGNORE_INDEX, "mean")
    ours = cross_entropy(logits, targets)
    assert torch.isnan(ref), "PyTorch's behaviour changed: update the docstring of cross_entropy"
    assert torch.isnan(ours)
    assert cross_entropy(logits, targets, reduction="sum").item() == 0.0
    assert mlm_loss(logits, targets).isnan()

    safe = cross_entropy(logits, targets, zero_when_all_ignored=True)
    assert safe.item() == 0.0
    # ...and when something is labelled the safe variant is the ordinary mean
    logits2, targets2 = _random_case((4, 3), 7, "some", seed=9)
    torch.testing.assert_close(
        cross_entropy(logits2, targets2, zero_when_all_ignored=True),
        _torch_reference(logits2, targets2, IGNORE_INDEX, "mean"),
        rtol=1e-12,
        atol=1e-12,
    )


def _closed_form_grad(logits, targets, ignore_index, reduction):
    """softmax - one_hot per labelled row, 0 for ignored rows, / count for the mean (row by row)."""
    flat_logits = logits.reshape(-1, logits.shape[-1])
    flat_targets = targets.reshape(-1)
    grad = torch.zeros_like(flat_logits)
    count = 0
    for row, target in enumerate(flat_targets.tolist()):
        if target == ignore_index:
            continue
        count += 1
        p = torch.exp(flat_logits[row] - torch.logsumexp(flat_logits[row], dim=0))
        p[target] -= 1.0
        grad[row] = p
    if reduction == "mean" and count > 0:
        grad /= count
    return grad.reshape(logits.shape)


@pytest.mark.parametrize("shape", [(9,), (3, 4)])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("ignore", ["none", "some", "all"])
def test_gradient_is_softmax_minus_one_hot(shape, reduction, ignore):
    logits, targets = _random_case(shape, 13, ignore, seed=len(shape) * 7 + len(reduction))

    ours_in = logits.clone().requires_grad_()
    cross_entropy(ours_in, targets, reduction=reduction).backward()
    torch_in = logits.clone().requires_grad_()
    _torch_reference(torch_in, targets, IGNORE_INDEX, reduction).backward()
    closed = _closed_form_grad(logits, targets, IGNORE_INDEX, reduction)
    analytic = cross_entropy_grad(logits, targets, reduction=reduction)

    torch.testing.assert_close(torch_in.grad, closed, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(ours_in.grad, closed, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(analytic, closed, rtol=1e-10, atol=1e-12)
    # each labelled row of softmax - one_hot sums to zero
    torch.testing.assert_close(analytic.sum(-1), torch.zeros(shape, dtype=torch.float64))


def test_gradient_of_zero_when_all_ignored_is_zero():
    logits, targets = _random_case((5,), 4, "all")
    x = logits.clone().requires_grad_()
    cross_entropy(x, targets, zero_when_all_ignored=True).backward()
    assert torch.equal(x.grad, torch.zeros_like(logits))


@pytest.mark.parametrize(
    ("logits_shape", "targets", "message"),
    [
        ((4, 5), torch.zeros(3, dtype=torch.long), "does not fit targets shape"),
        ((2, 3, 5), torch.zeros(2, 4, dtype=torch.long), "does not fit targets shape"),
        ((2, 5, 3), torch.zeros(2, 3, dtype=torch.long), "LAST dimension"),  # classes in dim 1
        ((4, 5), torch.tensor([0, 1, 5, 2]), "target id 5 is out of range for 5 classes"),
        ((4, 5), torch.tensor([0, -1, 2, 2]), "target id -1 is out of range"),
        ((4, 5), torch.zeros(4), "integer class ids"),
    ],
)
def test_cross_entropy_errors(logits_shape, targets, message):
    logits = torch.randn(*logits_shape)
    with pytest.raises((ValueError, TypeError), match=message):
        cross_entropy(logits, targets)
    with pytest.raises((ValueError, TypeError), match=message):
        cross_entropy_grad(logits, targets)


def test_bad_reduction_and_integer_logits():
    with pytest.raises(ValueError, match="reduction must be one of"):
        cross_entropy(torch.randn(2, 3), torch.tensor([0, 1]), reduction="avg")
    with pytest.raises(TypeError, match="floating-point"):
        cross_entropy(torch.ones(2, 3, dtype=torch.long), torch.tensor([0, 1]))


def test_int32_targets_accepted():
    logits, targets = _random_case((6,), 4, "some", seed=5)
    torch.testing.assert_close(
        cross_entropy(logits, targets.int()), cross_entropy(logits, targets), rtol=0, atol=0
    )


# --- gather_labelled and the MLM loss ------------------------------------------------------


def _labels(batch, length, vocab, seed, rate=0.3):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(vocab, (batch, length), generator=g)
    labels[torch.rand(batch, length, generator=g) > rate] = IGNORE_INDEX
    return labels


def test_gather_labelled_order_and_gradient():
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(3, 7, 4, generator=g, requires_grad=True)
    labels = _labels(3, 7, 50, seed=1)
    gathered, targets = gather_labelled(hidden, labels)
    expected_rows = [(b, i) for b in range(3) for i in range(7) if labels[b, i] != IGNORE_INDEX]
    assert gathered.shape == (len(expected_rows), 4)
    assert targets.tolist() == [labels[b, i].item() for b, i in expected_rows]
    for row, (b, i) in enumerate(expected_rows):
        assert torch.equal(gathered[row], hidden[b, i])
    gathered.sum().backward()
    assert torch.equal(hidden.grad[..., 0], (labels != IGNORE_INDEX).float())


def test_gather_labelled_custom_ignore_index():
    hidden = torch.arange(2 * 3 * 2, dtype=torch.float32).reshape(2, 3, 2)
    labels = torch.tensor([[0, 7, -100], [3, 0, 0]])  # here 0 means "not predicted"
    gathered, targets = gather_labelled(hidden, labels, ignore_index=0)
    assert targets.tolist() == [7, -100, 3]
    assert torch.equal(gathered, torch.stack([hidden[0, 1], hidden[0, 2], hidden[1, 0]]))


def test_gather_labelled_shape_errors():
    with pytest.raises(ValueError, match=r"labels shape \(3, 6\) does not match"):
        gather_labelled(torch.randn(3, 7, 4), torch.zeros(3, 6, dtype=torch.long))
    with pytest.raises(ValueError, match="at least 2 dims"):
        gather_labelled(torch.randn(4), torch.zeros(4, dtype=torch.long))


def test_gather_before_projection_gives_the_same_loss():
    """The model's shortcut: project only labelled positions; loss equal to full logits + -100."""
    g = torch.Generator().manual_seed(2)
    batch, length, hidden_size, vocab = 4, 16, 8, 97
    hidden = torch.randn(batch, length, hidden_size, generator=g, dtype=torch.float64)
    decoder = torch.randn(hidden_size, vocab, generator=g, dtype=torch.float64)
    labels = _labels(batch, length, vocab, seed=3, rate=0.15)

    full_logits = hidden @ decoder  # (B, L, V)
    reference = F.cross_entropy(full_logits.reshape(-1, vocab), labels.reshape(-1))
    gathered_hidden, targets = gather_labelled(hidden, labels)
    gathered_logits = gathered_hidden @ decoder  # (N, V)

    for loss in (
        mlm_loss(full_logits, labels),
        mlm_loss(gathered_logits, targets),
        mlm_loss(gathered_logits, labels),
    ):
        torch.testing.assert_close(loss, reference, rtol=1e-12, atol=1e-12)


def test_mlm_loss_row_count_mismatch():
    labels = _labels(2, 10, 30, seed=4)
    n = int((labels != IGNORE_INDEX).sum())
    with pytest.raises(ValueError, match=f"has {n + 1} rows but labels"):
        mlm_loss(torch.randn(n + 1, 30), labels)


def test_nsp_loss_equals_torch_and_checks_shape():
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(16, 2, generator=g, dtype=torch.float64)
    labels = torch.randint(2, (16,), generator=g)
    torch.testing.assert_close(nsp_loss(logits, labels), F.cross_entropy(logits, labels))
    with pytest.raises(ValueError, match=r"shape \(B, 2\)"):
        nsp_loss(torch.randn(16, 3), labels)
    with pytest.raises(ValueError, match=r"shape \(B,\)"):
        nsp_loss(logits, labels[:, None])


def test_original_mlm_loss_formula():
    g = torch.Generator().manual_seed(6)
    batch, slots, vocab = 3, 5, 40
    logits = torch.randn(batch * slots, vocab, generator=g, dtype=torch.float64)
    label_ids = torch.randint(vocab, (batch * slots,), generator=g)
    weights = torch.tensor([1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0], dtype=torch.float64)
    label_ids[weights == 0] = 0  # the original pads unused slots with id 0, weight 0

    per_slot = F.cross_entropy(logits, label_ids, reduction="none")
    expected = (per_slot * weights).sum() / (weights.sum() + 1e-5)
    torch.testing.assert_close(original_mlm_loss(logits, label_ids, weights), expected)
    assert ORIGINAL_LOSS_EPS == 1e-5

    # vs the exact mean over real slots: smaller by the factor N / (N + 1e-5)
    exact = F.cross_entropy(logits[weights == 1], label_ids[weights == 1])
    n = weights.sum()
    torch.testing.assert_close(
        original_mlm_loss(logits, label_ids, weights), exact * n / (n + 1e-5)
    )
    # no real slot at all: 0, not NaN
    assert original_mlm_loss(logits, label_ids, torch.zeros_like(weights)).item() == 0.0
    with pytest.raises(ValueError, match="label_weights shape"):
        original_mlm_loss(logits, label_ids, weights[:-1])
