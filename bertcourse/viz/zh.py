"""Plots for chapter 9 (Chinese BERT): a character vocabulary's [UNK] rate, whole-word masking.

Each function draws numbers that the caller computed with bertcourse and returns the
`matplotlib.figure.Figure`. Labels go through `lang.label`, so the Chinese edition can draw
them in Chinese; Chinese characters inside a figure need the CJK font, which
`lang.use_cjk_font` registers (every function here calls it, since its labels may hold them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from bertcourse.viz import lang
from bertcourse.viz.style import CYCLE

__all__ = ["plot_vocabulary_unk", "plot_word_coverage"]


def plot_vocabulary_unk(
    sizes: Sequence[int],
    unk_rates: Mapping[str, Sequence[float]],
    min_counts: Sequence[int],
) -> Figure:
    """Held-out [UNK] rate against vocabulary size, one line per way of building the vocabulary.

    Args:
        sizes: (K,) vocabulary sizes, one per `min_counts` entry.
        unk_rates: `{variant: (K,) share of held-out tokens that are [UNK]}`.
        min_counts: (K,) the minimum training count of a character kept, written at each point.
    """
    lang.use_cjk_font()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for (name, rates), color in zip(unk_rates.items(), CYCLE):
        ax.plot(sizes, 100 * np.asarray(rates), "o-", color=color, label=lang.label(name))
    first = next(iter(unk_rates.values()))
    for size, rate, k in zip(sizes, first, min_counts):
        ax.annotate(f"≥{k}", (size, 100 * rate), textcoords="offset points", xytext=(4, 4))
    ax.set_yscale("log")
    ax.margins(x=0.08)  # room for the last annotation
    ax.set_xlabel(lang.label("vocabulary size (characters seen at least k times, + 5 special)"))
    ax.set_ylabel(lang.label("held-out tokens that are [UNK] (%)"))
    ax.legend(frameon=False, fontsize=9)
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_word_coverage(
    lengths: Sequence[str],
    partial: Mapping[str, Sequence[float]],
    whole_share: Mapping[str, float],
) -> Figure:
    """Two panels comparing masking schemes against the gold words.

    Args:
        lengths: (K,) names of the word-length groups ("2", "3", "4+").
        partial: `{scheme: (K,) share of the touched gold words of each length that were
            chosen only in part}`.
        whole_share: `{scheme: share of the targets whose whole gold word is chosen}`.
    """
    lang.use_cjk_font()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.6), width_ratios=(3, 2))
    width = 0.8 / len(partial)
    x = np.arange(len(lengths))
    for i, ((name, shares), color) in enumerate(zip(partial.items(), CYCLE)):
        offset = (i - (len(partial) - 1) / 2) * width
        bars = left.bar(
            x + offset, 100 * np.asarray(shares), width, color=color, label=lang.label(name)
        )
        left.bar_label(bars, fmt="%.0f", fontsize=7)  # a zero bar is invisible: say 0
    left.set_xticks(x, lengths)
    left.set_xlabel(lang.label("gold word length (characters)"))
    left.set_ylabel(lang.label("touched words chosen only in part (%)"))
    left.set_ylim(0, 125)
    left.legend(frameon=False, fontsize=8, loc="upper center", ncols=len(partial))
    names = list(whole_share)
    bars = right.barh(
        np.arange(len(names)),
        [100 * whole_share[n] for n in names],
        color=CYCLE[: len(names)],
    )
    right.bar_label(bars, fmt="%.0f%%", fontsize=8, padding=2)
    right.set_yticks(np.arange(len(names)), [lang.label(n) for n in names])
    right.invert_yaxis()
    right.set_xlim(0, 115)
    right.set_xlabel(lang.label("targets whose whole gold word is chosen (%)"))
    fig.tight_layout()
    return lang.translate_figure(fig)
