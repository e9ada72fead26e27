"""Chapter 10's plots (bertcourse.viz.ablations): what each figure must show, whatever the rows."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from bertcourse.stats import SE_MULTIPLE  # noqa: E402
from bertcourse.viz.ablations import Difference, plot_differences  # noqa: E402

DIFFERENCES = [
    Difference("split-100-0-0", "seg_f1", -0.010, 0.001, True),
    Difference("split-100-0-0", "reviews_acc", 0.0004, 0.0030, False),
    Difference("sop", "seg_f1", 0.004, 0.003, False),
    Difference("sop", "reviews_acc", -0.012, 0.004, True),
]


def _points(ax):
    """(x, y, filled) of each row's dot, and its error bar's ends."""
    found = []
    for line in ax.lines:
        x, y = line.get_xdata(), line.get_ydata()
        if len(x) == 1 and line.get_marker() == "o":
            found.append((float(x[0]), float(y[0]), line.get_markerfacecolor()))
    return found


def test_each_panel_shows_every_row_with_zero_in_the_middle_and_every_bar_inside():
    fig = plot_differences(DIFFERENCES, ["seg_f1", "reviews_acc"], titles=["F1", "accuracy"])
    try:
        for ax, metric in zip(fig.axes, ["seg_f1", "reviews_acc"]):
            left, right = ax.get_xlim()
            assert left == pytest.approx(-right)  # the sign of a difference is read off the middle
            mine = [d for d in DIFFERENCES if d.metric == metric]
            points = _points(ax)
            assert sorted(x for x, _, _ in points) == pytest.approx(
                sorted(d.mean_difference for d in mine)
            )
            for d in mine:
                bar = SE_MULTIPLE * d.standard_error
                assert left < d.mean_difference - bar and d.mean_difference + bar < right
            filled = {round(x, 6): face for x, _, face in points}
            for (
                d
            ) in mine:  # filled where the verdict is "differs", open where the budget cannot tell
                face = matplotlib.colors.to_rgba(filled[round(d.mean_difference, 6)])
                assert (face == matplotlib.colors.to_rgba("white")) == (not d.differs)
        labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
        assert labels == [
            "split-100-0-0",
            "sop",
        ]  # rows in the order given, named once, on the left
        assert all(t.get_text() == "" for t in fig.axes[1].get_yticklabels())
    finally:
        plt.close(fig)


def test_no_rows_or_titles_that_do_not_match_are_refused_by_name():
    with pytest.raises(ValueError, match="no row has been compared"):
        plot_differences([], ["seg_f1"])
    with pytest.raises(ValueError, match="1 titles for 2 metrics"):
        plot_differences(DIFFERENCES, ["seg_f1", "reviews_acc"], titles=["F1"])
