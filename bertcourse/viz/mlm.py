"""Plots for chapter 3 (masked-language-model sampling).

Each function draws numbers that the caller computed with bertcourse and returns the
`matplotlib.figure.Figure` (made with `plt.subplots`, so a notebook cell `fig = plot_...(...)`
shows it once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from bertcourse.viz import lang
from bertcourse.viz.style import BLUE, CYCLE, GREEN, GREY, ORANGE, as_array

__all__ = [
    "plot_count_histograms",
    "plot_replacement_shares",
    "plot_split_by_count",
    "plot_coverage",
]

_SHARE_COLORS = (BLUE, ORANGE, GREEN)  # [MASK], random, kept
_SHARE_NAMES = ("[MASK]", lang.label("random id"), lang.label("kept"))


def plot_count_histograms(panels: Mapping[str, Mapping[str, Sequence[int]]]) -> Figure:
    """Per panel, the distribution of the number of chosen positions per sequence.

    Args:
        panels: `{panel title: {rule name: (N,) chosen count of each of N sequences}}`.
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(4.8 * len(panels), 3.5), squeeze=False)
    for ax, (title, series) in zip(axes[0], panels.items()):
        arrays = {name: as_array(c).astype(int) for name, c in series.items()}
        top = max(int(c.max()) for c in arrays.values())
        bins = np.arange(top + 2)
        width = 0.8 / len(arrays)
        for i, ((name, counts), color) in enumerate(zip(arrays.items(), CYCLE)):
            share = np.bincount(counts, minlength=top + 1) / len(counts)
            ax.bar(
                bins[:-1] + (i - (len(arrays) - 1) / 2) * width,
                share,
                width,
                color=color,
                label=lang.label(f"{name} (mean {counts.mean():.1f})"),
            )
        ax.set_xlabel(lang.label("positions chosen in a sequence"))
        ax.set_ylabel(lang.label("share of sequences"))
        ax.set_title(title, fontsize=10)
        ax.legend(frameon=False, fontsize=8, loc="upper left")
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_replacement_shares(shares: Mapping[str, Sequence[float]]) -> Figure:
    """Horizontal stacked bars: what the chosen positions show, one bar per rule.

    Args:
        shares: `{rule name: ([MASK] share, random-id share, kept share)}`, each summing to 1.
    """
    names = list(shares)
    values = np.array([as_array(shares[n]) for n in names])
    if values.ndim != 2 or values.shape[1] != 3:
        raise ValueError("each entry of shares must be ([MASK], random, kept) shares")
    fig, ax = plt.subplots(figsize=(7.2, 0.55 * len(names) + 1.3))
    left = np.zeros(len(names))
    y = np.arange(len(names))
    for j, (color, label) in enumerate(zip(_SHARE_COLORS, _SHARE_NAMES)):
        ax.barh(y, values[:, j], left=left, color=color, label=label)
        for yi, (x0, w) in enumerate(zip(left, values[:, j])):
            if w > 0.04:
                ax.text(
                    x0 + w / 2,
                    yi,
                    f"{100 * w:.1f}%",
                    ha="center",
                    va="center",
                    color="white",
                    fontsize=8,
                )
        left += values[:, j]
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel(lang.label("share of the chosen positions"))
    ax.legend(frameon=False, fontsize=8, ncol=3, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_split_by_count(
    counts: Sequence[int], shares, *, reference: Sequence[float] = (0.8, 0.1, 0.1), title: str
) -> Figure:
    """Stacked bars per number n of chosen tokens: the ([MASK], random, kept) split of a rule.

    Args:
        counts: the values of n on the x axis.
        shares: (len(counts), 3) shares of [MASK], random and kept for each n.
        reference: the intended shares, drawn as dotted lines.
        title: figure title.
    """
    n = as_array(counts)
    v = as_array(shares)
    if v.shape != (len(n), 3):
        raise ValueError(f"shares must have shape ({len(n)}, 3), got {v.shape}")
    fig, ax = plt.subplots(figsize=(7.2, 3.4))
    bottom = np.zeros(len(n))
    for j, (color, label) in enumerate(zip(_SHARE_COLORS, _SHARE_NAMES)):
        ax.bar(n, v[:, j], bottom=bottom, color=color, label=label, width=0.8)
        bottom += v[:, j]
    level = 0.0
    for r in reference[:-1]:
        level += r
        ax.axhline(level, color=GREY, ls=":", lw=1)
    ax.set_xticks(n)
    ax.set_xlabel(lang.label("number n of chosen tokens in the sequence"))
    ax.set_ylabel(lang.label("share"))
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=10)
    ax.legend(frameon=False, fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_coverage(epochs: Sequence[int], coverage: Mapping[str, Sequence[float]]) -> Figure:
    """Share of a sequence's positions that have been a prediction target at least once.

    Args:
        epochs: epoch numbers (x axis).
        coverage: `{rule name: (len(epochs),) share of positions predicted so far}`.
    """
    x = as_array(epochs)
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for (name, v), color in zip(coverage.items(), CYCLE):
        v = as_array(v)
        if v.shape != x.shape:
            raise ValueError(f"{name!r}: {v.shape[0]} values for {x.shape[0]} epochs")
        ax.plot(x, v, "-", color=color, label=name, lw=2)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(lang.label("epochs over the same sequences"))
    ax.set_ylabel(lang.label("share of positions predicted so far"))
    ax.set_title(lang.label("How many positions ever become a target"), fontsize=10)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return lang.translate_figure(fig)
