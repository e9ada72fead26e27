"""Plots for chapter 2 (attention-mask semantics).

Each function draws numbers that the caller computed with bertcourse and returns the
`matplotlib.figure.Figure` (made with `plt.subplots`, so a notebook cell `fig = plot_...(...)`
shows it once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from bertcourse.viz import lang
from bertcourse.viz.style import BLUE, CYCLE, GREY, as_array

__all__ = ["plot_mask_matrices", "plot_padding_invariance", "plot_attention_received"]


def plot_mask_matrices(
    matrices: Mapping[str, object], tokens: Sequence[str], *, note: str | None = None
) -> Figure:
    """Side-by-side (query x key) masks: filled = may attend, white = masked.

    Args:
        matrices: `{title: (L, L) array of 0/1}`; broadcast a (1, L) key mask to (L, L) first.
        tokens: the L token strings, for both axes.
        note: a line of text under the panels.
    """
    mats = {title: as_array(m) for title, m in matrices.items()}
    L = len(tokens)
    for title, m in mats.items():
        if m.shape != (L, L):
            raise ValueError(f"{title!r} must be ({L}, {L}) for {L} tokens, got {m.shape}")
    n = len(mats)
    fig, axes = plt.subplots(1, n, figsize=(3.3 * n, 3.5), squeeze=False)
    cmap = ListedColormap(["white", BLUE])
    for ax, (title, m) in zip(axes[0], mats.items()):
        ax.imshow(m, cmap=cmap, vmin=0, vmax=1)
        ax.set_xticks(range(L), tokens, rotation=90, fontsize=8)
        ax.set_yticks(range(L), tokens, fontsize=8)
        ax.set_xticks(np.arange(-0.5, L), minor=True)
        ax.set_yticks(np.arange(-0.5, L), minor=True)
        ax.grid(which="minor", color=GREY, lw=0.4)
        ax.tick_params(which="minor", length=0)
        ax.set_xlabel(lang.label("key (attended to)"), fontsize=8)
        ax.set_ylabel(lang.label("query (attending)"), fontsize=8)
        ax.set_title(title, fontsize=9)
    if note:
        fig.text(0.5, 0.01, note, ha="center", fontsize=8, color=GREY)
    fig.tight_layout(rect=(0, 0.05 if note else 0, 1, 1))
    return lang.translate_figure(fig)


def plot_padding_invariance(
    num_pad: Sequence[int], max_diff: Mapping[str, Sequence[float]], *, floor: float = 1e-9
) -> Figure:
    """Largest change of the real tokens' outputs when padding is appended (log scale).

    Args:
        num_pad: the numbers of [PAD] tokens appended.
        max_diff: `{label: max |output(padded) - output(alone)| over the real tokens}`.
        floor: values below it (e.g. exact zeros) are drawn at `floor`.
    """
    x = as_array(num_pad)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for (label, v), color in zip(max_diff.items(), CYCLE):
        v = as_array(v)
        if v.shape != x.shape:
            raise ValueError(f"{label!r}: {v.shape[0]} values for {x.shape[0]} paddings")
        ax.plot(x, np.maximum(v, floor), "o-", color=color, label=label)
    ax.set_yscale("log")
    ax.set_xlabel(lang.label("number of [PAD] tokens appended"))
    ax.set_ylabel(lang.label("max |change| of real-token outputs"))
    ax.axhline(1e-5, color=GREY, ls=":", lw=1)
    ax.annotate(
        lang.label("float32 rounding level"),
        (x[0], 1e-5),
        xytext=(2, 4),
        textcoords="offset points",
        color=GREY,
        fontsize=8,
    )
    ax.set_title(lang.label("Padding invariance"), fontsize=10)
    ax.legend(frameon=False, fontsize=9)
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_attention_received(
    shares: Mapping[str, Sequence[float]], *, uniform: float | None = None, title: str
) -> Figure:
    """Grouped bars per layer: the share of all attention that some key positions receive.

    Args:
        shares: `{label: (num_layers,) mean attention probability given to that key}`.
        uniform: the share every key would get under uniform attention (dotted line), 1/L.
        title: figure title.
    """
    series = {k: as_array(v) for k, v in shares.items()}
    n_layers = len(next(iter(series.values())))
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    x = np.arange(n_layers)
    for i, ((label, v), color) in enumerate(zip(series.items(), CYCLE)):
        if len(v) != n_layers:
            raise ValueError(f"{label!r}: {len(v)} layers, expected {n_layers}")
        ax.bar(x + (i - (len(series) - 1) / 2) * width, v, width, color=color, label=label)
    if uniform is not None:
        ax.axhline(uniform, color=GREY, ls=":", lw=1)
        ax.annotate(
            lang.label("uniform 1/L"),
            (n_layers - 0.5, uniform),
            xytext=(-40, 3),
            textcoords="offset points",
            color=GREY,
            fontsize=8,
        )
    ax.set_xticks(x, [str(i) for i in x])
    ax.set_xlabel(lang.label("layer"))
    ax.set_ylabel(lang.label("mean attention received"))
    ax.set_title(title, fontsize=10)
    ax.legend(frameon=False, fontsize=9)
    fig.tight_layout()
    return lang.translate_figure(fig)
