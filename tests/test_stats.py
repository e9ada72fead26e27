"""bertcourse.stats: the paired-by-seed comparison of two recipes (chapter 10)."""

from __future__ import annotations

import random

import pytest

from bertcourse.stats import CANNOT_TELL, DIFFERS, SE_MULTIPLE, paired_comparison


def test_mean_and_standard_error_agree_with_scipys_paired_t():
    """mean / SE is the paired t statistic: scipy.stats.ttest_rel computes it independently."""
    from scipy.stats import ttest_rel

    rng = random.Random(0)
    for n in (2, 3, 5, 10):
        a = [rng.gauss(0.5, 0.05) for _ in range(n)]
        b = [x - rng.gauss(0.01, 0.02) for x in a]
        c = paired_comparison(a, b)
        assert c.n == n
        assert c.mean_difference == pytest.approx(sum(a) / n - sum(b) / n, rel=1e-12)
        assert c.mean_difference / c.standard_error == pytest.approx(ttest_rel(a, b).statistic, rel=1e-9)  # fmt: skip
        assert c.verdict == (DIFFERS if abs(c.mean_difference) > SE_MULTIPLE * c.standard_error else CANNOT_TELL)  # fmt: skip


def test_by_hand():
    # d = 0.1, 0.2, 0.1: mean 2/15, sd sqrt(1/300), SE sqrt(1/900) = 1/30; 2/15 > 2/30: differs
    c = paired_comparison([0.5, 0.6, 0.7], [0.4, 0.4, 0.6])
    assert c.mean_difference == pytest.approx(2 / 15) and c.standard_error == pytest.approx(1 / 30)
    assert c.verdict == DIFFERS
    # d = 0.1, -0.1, 0.05: mean 1/60, SE 0.0601: cannot tell
    assert paired_comparison([0.5, 0.5, 0.55], [0.4, 0.6, 0.5]).verdict == CANNOT_TELL
    # d = 0.1, 0, 0.05: mean 0.05, SE 0.05 / sqrt(3) = 0.0289: 1.7 SE, under the 2 SE line
    c = paired_comparison([0.6, 0.5, 0.55], [0.5, 0.5, 0.5])
    assert c.mean_difference / c.standard_error == pytest.approx(3**0.5)
    assert c.verdict == CANNOT_TELL
    # no difference at all, no spread: nothing to claim
    assert paired_comparison([0.3, 0.4], [0.3, 0.4]).verdict == CANNOT_TELL


def test_pairing_removes_the_seeds_shared_noise():
    """A small, steady gain under large seed-to-seed noise: the pairs see it (each seed moves
    both recipes together), and swapping the sides only flips the sign."""
    seeds = [0.1, 0.5, 0.3]  # each seed's luck, shared by both recipes
    a = [0.40 + s + 0.01 for s in seeds]
    b = [0.40 + s + gain for s, gain in zip(seeds, (0.0, 0.001, -0.001))]
    ab, ba = paired_comparison(a, b), paired_comparison(b, a)
    assert ab.verdict == DIFFERS and ab.mean_difference == pytest.approx(0.01)
    assert ba.mean_difference == pytest.approx(-ab.mean_difference)
    assert (ba.standard_error, ba.verdict) == pytest.approx((ab.standard_error, ab.verdict))  # fmt: skip


@pytest.mark.parametrize(
    "a, b, message",
    [
        ([0.5], [0.4], "at least 2 seeds"),
        ([0.5, 0.6], [0.4], "one value per seed"),
        ([0.5, float("nan")], [0.4, 0.4], r"a\[1\] = nan is not a finite number"),
        ([0.5, 0.6], [0.4, "0.4"], r"b\[1\] = '0.4' is not a finite number"),
    ],
)
def test_bad_input_is_refused(a, b, message):
    with pytest.raises(ValueError, match=message):
        paired_comparison(a, b)
