"""Plots for chapter 10 (BERT's ablations re-run): two runs compared seed by seed, and every
ablation row's paired difference from the reference with its error bar.

The functions take numbers computed elsewhere (the chapter reads them from the benchmarks'
committed JSON files) and return a `matplotlib.figure.Figure`. The error bars are the verdict's
own: the mean paired difference ± 2 standard errors (`bertcourse.stats.SE_MULTIPLE`), so a bar
that crosses zero is a comparison the budget cannot tell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from bertcourse.stats import SE_MULTIPLE, paired_comparison
from bertcourse.viz import lang
from bertcourse.viz.style import BLACK, CYCLE, GREY

__all__ = ["Pair", "Difference", "plot_pairs", "plot_differences", "plot_score_by_rate"]


@dataclass(frozen=True)
class Pair:
    """Two conditions scored with the same seeds: `a[i]` and `b[i]` share seed `seeds[i]`."""

    title: str
    a_name: str
    b_name: str
    a: Sequence[float]
    b: Sequence[float]
    seeds: Sequence[int]

    def __post_init__(self) -> None:
        if not len(self.a) == len(self.b) == len(self.seeds):
            raise ValueError(
                f"{self.title}: one score per seed on both sides, got {len(self.a)}, "
                f"{len(self.b)} scores for {len(self.seeds)} seeds"
            )


@dataclass(frozen=True)
class Difference:
    """One row's paired comparison with its reference on one metric."""

    row: str
    metric: str
    mean_difference: float
    standard_error: float
    differs: bool


def plot_pairs(pairs: Sequence[Pair], *, ylabel: str = "") -> Figure:
    """One panel per pair: each seed a line from its score under `a` to its score under `b`,
    and the verdict of the paired comparison (mean difference ± 2 SE) under the panel."""
    if not pairs:
        raise ValueError("pairs is empty: give at least one comparison")
    fig, axes = plt.subplots(1, len(pairs), figsize=(3.2 * len(pairs), 3.4), squeeze=False)
    for ax, pair in zip(axes[0], pairs):
        for seed, x, y, color in zip(pair.seeds, pair.a, pair.b, CYCLE):
            ax.plot([0, 1], [x, y], color=color, marker="o", lw=1.5,
                    label=lang.label(f"seed {seed}"))  # fmt: skip
        c = paired_comparison(pair.b, pair.a)
        ax.set_xticks([0, 1], [pair.a_name, pair.b_name])
        ax.set_xlim(-0.3, 1.3)
        ax.set_title(pair.title, fontsize=10)
        mean, bar = c.mean_difference, SE_MULTIPLE * c.standard_error
        ax.set_xlabel(lang.label(f"difference {mean:+.3f} ± {bar:.3f} (2 SE)"), fontsize=9)
        ax.grid(axis="y", color=GREY, lw=0.5, alpha=0.5)
    axes[0][0].set_ylabel(ylabel)
    axes[0][-1].legend(fontsize=8, loc="best")
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_differences(
    differences: Sequence[Difference], metrics: Sequence[str], *, titles: Sequence[str] = ()
) -> Figure:
    """One panel per metric: each row's mean paired difference from its reference, with a bar
    of ± 2 SE; a filled dot where the verdict is "differs", an open one where the budget
    cannot tell. `metrics` orders the panels; `titles` (one per metric) names them."""
    if not differences:
        raise ValueError("differences is empty: no row has been compared yet")
    titles = list(titles) or list(metrics)
    if len(titles) != len(metrics):
        raise ValueError(f"{len(titles)} titles for {len(metrics)} metrics")
    rows = list(dict.fromkeys(d.row for d in differences))
    fig, axes = plt.subplots(
        1, len(metrics), figsize=(3.3 * len(metrics), 1.3 + 0.32 * len(rows)), squeeze=False
    )
    for ax, metric, title in zip(axes[0], metrics, titles):
        for y, row in enumerate(rows):
            for d in (d for d in differences if d.row == row and d.metric == metric):
                bar = SE_MULTIPLE * d.standard_error
                ax.errorbar(d.mean_difference, y, xerr=bar, color=BLACK, capsize=3, lw=1.2,
                            marker="o", markersize=5, mfc=BLACK if d.differs else "white")  # fmt: skip
        ax.axvline(0, color=GREY, lw=1)
        reach = [abs(d.mean_difference) + SE_MULTIPLE * d.standard_error
                 for d in differences if d.metric == metric]  # fmt: skip
        if reach and max(reach) > 0:  # zero in the middle, the sign readable at a glance
            ax.set_xlim(-1.15 * max(reach), 1.15 * max(reach))
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4, symmetric=True))  # labels that fit
        ax.set_yticks(range(len(rows)), rows if ax is axes[0][0] else [""] * len(rows))
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(lang.label("difference from base (± 2 SE)"), fontsize=9)
        ax.grid(axis="x", color=GREY, lw=0.5, alpha=0.5)
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_score_by_rate(scores: dict[float, float], *, trained_at: float, ylabel: str) -> Figure:
    """One model's score on questions that hide more and more of the input: `scores` maps the
    share of tokens chosen in the questions to the score; `trained_at` marks the model's own
    training rate."""
    if not scores:
        raise ValueError("scores is empty: give at least one rate")
    rates = sorted(scores)
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    ax.plot(rates, [scores[r] for r in rates], color=CYCLE[0], marker="o", lw=1.8)
    ax.axvline(trained_at, color=GREY, ls="--", lw=1,
               label=lang.label(f"the model's training rate ({trained_at:.0%})"))  # fmt: skip
    ax.set_xticks(rates, [f"{r:.0%}" for r in rates])
    ax.set_xlabel(lang.label("share of tokens chosen in the questions"))
    ax.set_ylabel(ylabel)
    ax.grid(color=GREY, lw=0.5, alpha=0.5)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return lang.translate_figure(fig)
