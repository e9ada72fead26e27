"""Chapter 9's plots (bertcourse.viz.zh) draw the numbers they are given, with a CJK font.

The chapter's numbers themselves are asserted in its cells (book/ch09_chinese.md), which the
book build executes.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from bertcourse.viz import lang  # noqa: E402
from bertcourse.viz import zh as viz  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_vocabulary_plot_draws_the_rates_in_percent():
    rates = {"characters only": [0.05, 0.0095], "characters + ## pieces": [0.04, 0.0006]}
    fig = viz.plot_vocabulary_unk([1438, 4623], rates, [100, 1])
    (ax,) = fig.axes
    assert [list(line.get_ydata()) for line in ax.get_lines()] == [
        pytest.approx([5.0, 0.95]),
        pytest.approx([4.0, 0.06]),
    ]
    assert [t.get_text() for t in ax.texts] == ["≥100", "≥1"]
    assert ax.get_yscale() == "log"
    assert mpl_family_first() == lang.CJK_FAMILY


def test_word_coverage_plot_draws_every_bar_and_labels_zero_bars():
    partial = {"characters": [0.92, 0.99], "whole words (gold)": [0.0, 0.0]}
    fig = viz.plot_word_coverage(["2", "3"], partial, {"characters": 0.34, "gold": 1.0})
    left, right = fig.axes
    heights = sorted(round(p.get_height(), 6) for p in left.patches)
    assert heights == [0.0, 0.0, 92.0, 99.0]
    labels = [t.get_text() for t in left.texts]
    assert labels.count("0") == 2  # an invisible bar still says its value
    assert sorted(round(p.get_width(), 6) for p in right.patches) == [34.0, 100.0]
    assert [t.get_text() for t in right.get_yticklabels()] == ["characters", "gold"]


def mpl_family_first() -> str:
    return matplotlib.rcParams["font.family"][0]
