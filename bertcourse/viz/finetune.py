"""Plots for chapter 8 (fine-tuning): accuracy against the learning rate, one line per way of
starting (pretrained or random weights), every seed a dot; and what a rate does to the encoder.

Like the other modules here, the functions take numbers computed elsewhere (the chapter reads
them from `benchmarks/figures/finetune.json`) and return a `matplotlib.figure.Figure`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from bertcourse.viz import lang
from bertcourse.viz.style import BLACK, CYCLE, GREY

__all__ = ["plot_rate_grid", "plot_encoder_change"]


def plot_rate_grid(
    accuracy: Mapping[str, Mapping[float, Sequence[float]]],
    *,
    levels: Sequence[tuple[float, str]] = (),
    chosen: Mapping[str, float] | None = None,
    ylabel: str = lang.label("validation accuracy"),
    title: str = "",
) -> Figure:
    """Accuracy against the peak learning rate (log scale).

    Args:
        accuracy: `{starting point: {rate: accuracies, one per seed}}`; the line joins the
            means, each seed is a dot.
        levels: `(value, label)` reference lines (the majority class, a frozen encoder).
        chosen: `{starting point: rate}` to ring (the rate chosen on validation).
    """
    if not accuracy:
        raise ValueError("accuracy is empty: give at least one starting point")
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for (name, by_rate), color in zip(accuracy.items(), CYCLE):
        rates = sorted(by_rate)
        if any(len(by_rate[r]) == 0 for r in rates):
            raise ValueError(f"{name}: every rate needs at least one accuracy")
        means = [float(np.mean(by_rate[r])) for r in rates]
        ax.plot(
            rates,
            means,
            color=color,
            lw=1.8,
            marker="o",
            label=lang.label(f"{name} (mean of seeds)"),
        )
        for r in rates:
            ax.scatter([r] * len(by_rate[r]), by_rate[r], color=color, s=14, alpha=0.5)
        if chosen and name in chosen:
            r = chosen[name]
            ax.scatter([r], [float(np.mean(by_rate[r]))], s=160, facecolors="none",
                       edgecolors=color, lw=1.5)  # fmt: skip
    for (value, label), style in zip(levels, ("--", ":", "-.")):
        ax.axhline(value, color=GREY if style == "--" else BLACK, ls=style, lw=1, label=label)
    ax.set_xscale("log")
    ax.set_xlabel(lang.label("peak learning rate"))
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(frameon=False, fontsize=8, loc="best")
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_encoder_change(
    rates: Sequence[float], drift: Sequence[float], relative_change: Sequence[float]
) -> Figure:
    """Two panels against the rate: the cosine between the pretrained and the fine-tuned
    sentence vectors, and the size of the weight change relative to the weights."""
    if not len(rates) == len(drift) == len(relative_change):
        raise ValueError(
            f"rates, drift and relative_change need one value per rate, got "
            f"{len(rates)}, {len(drift)}, {len(relative_change)}"
        )
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.4))
    left.plot(rates, drift, color=CYCLE[0], marker="o", lw=1.8)
    left.axhline(1.0, color=GREY, ls="--", lw=1, label=lang.label("unchanged"))
    left.set_ylabel(lang.label("cosine(pretrained, fine-tuned)\nmean vectors"))
    left.legend(frameon=False, fontsize=8)
    right.plot(rates, relative_change, color=CYCLE[1], marker="o", lw=1.8)
    right.set_yscale("log")
    right.set_ylabel("|w - w0| / |w0|")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_xlabel(lang.label("peak learning rate"))
    fig.tight_layout()
    return lang.translate_figure(fig)
