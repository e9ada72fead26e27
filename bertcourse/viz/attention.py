"""Plots for chapter 1 (attention math).

Each function draws numbers that the caller computed with bertcourse and returns the
`matplotlib.figure.Figure` (made with `plt.subplots`, so a notebook cell `fig = plot_...(...)`
shows it once). Nothing here computes attention.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from bertcourse.viz import lang
from bertcourse.viz.style import CYCLE, GREY, HEATMAP, as_array

__all__ = [
    "plot_score_variance",
    "plot_softmax_saturation",
    "plot_attention_heads",
    "plot_head_grid",
]


def plot_score_variance(d_k: Sequence[int], variances: Mapping[str, Sequence[float]]) -> Figure:
    """Measured variance of attention scores against the head size d_k (log-log).

    Args:
        d_k: the head sizes measured.
        variances: `{label: variance measured at each d_k}`, e.g. for q.k, q.k/sqrt(d_k), q.k/d_k.
    Grey dotted lines mark the closed forms d_k, 1 and 1/d_k.
    """
    d = as_array(d_k)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for ref, name in ((d, "$d_k$"), (np.ones_like(d), "$1$"), (1 / d, "$1/d_k$")):
        ax.plot(d, ref, color=GREY, ls=":", lw=1)
        ax.annotate(
            name,
            (d[-1], ref[-1]),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            color=GREY,
            fontsize=9,
        )
    for (label, v), color in zip(variances.items(), CYCLE):
        v = as_array(v)
        if v.shape != d.shape:
            raise ValueError(f"{label!r}: {v.shape[0]} variances for {d.shape[0]} values of d_k")
        ax.plot(d, v, "o-", color=color, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(lang.label("head size $d_k$"))
    ax.set_ylabel(lang.label("variance of the score (measured)"))
    ax.set_title(lang.label("Scores of random unit-variance $q, k$"), fontsize=10)
    ax.legend(frameon=False, fontsize=9, loc="upper left")
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_softmax_saturation(
    d_k: Sequence[int],
    max_prob: Mapping[str, Sequence[float]],
    jacobian_norm: Mapping[str, Sequence[float]],
    num_keys: int,
) -> Figure:
    """Two panels against d_k: the mean largest softmax probability, and the mean norm of the
    softmax Jacobian (how much gradient flows back to the scores).

    Args:
        d_k: the head sizes measured.
        max_prob: `{label: mean of max_j p_j at each d_k}`.
        jacobian_norm: `{label: mean Frobenius norm of dp/ds at each d_k}`.
        num_keys: number of keys per row (the uniform distribution has max_prob 1/num_keys).
    """
    d = as_array(d_k)
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.6))
    for ax, series, ylabel in (
        (axes[0], max_prob, lang.label("mean largest probability $\\max_j p_j$")),
        (axes[1], jacobian_norm, lang.label("mean $\\|\\partial p / \\partial s\\|_F$")),
    ):
        for (label, v), color in zip(series.items(), CYCLE):
            v = as_array(v)
            if v.shape != d.shape:
                raise ValueError(f"{label!r}: {v.shape[0]} values for {d.shape[0]} values of d_k")
            ax.plot(d, v, "o-", color=color, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(lang.label("head size $d_k$"))
        ax.set_ylabel(ylabel)
    axes[0].axhline(1.0, color=GREY, ls=":", lw=1)
    axes[0].axhline(1.0 / num_keys, color=GREY, ls=":", lw=1)
    axes[0].set_ylim(0, 1.05)
    axes[0].set_title(lang.label(f"Peakedness ({num_keys} keys; 1 = one-hot)"), fontsize=10)
    axes[1].set_title(lang.label("Gradient through the softmax"), fontsize=10)
    axes[1].set_ylim(bottom=0)
    axes[0].legend(frameon=False, fontsize=9)
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_attention_heads(
    probs: Sequence,
    tokens: Sequence[str],
    titles: Sequence[str],
    *,
    ncols: int = 2,
    highlight_row: int | None = None,
) -> Figure:
    """A grid of attention-probability heatmaps: rows = queries, columns = keys.

    Args:
        probs: N matrices of shape (L, L), each row a probability distribution over keys.
        tokens: the L token strings (tick labels).
        titles: N panel titles (e.g. "layer 3, head 7").
        ncols: panels per row.
        highlight_row: a query row to outline in every panel (e.g. the position of "it").
    """
    mats = [as_array(p) for p in probs]
    if len(mats) != len(titles):
        raise ValueError(f"got {len(mats)} matrices but {len(titles)} titles")
    L = len(tokens)
    for m in mats:
        if m.shape != (L, L):
            raise ValueError(f"each matrix must be ({L}, {L}) for {L} tokens, got {m.shape}")
    nrows = (len(mats) + ncols - 1) // ncols
    size = 1.0 + 0.16 * L
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(size * ncols + 1.2, size * nrows),
        squeeze=False,
        layout="constrained",
    )
    for ax in axes.flat[len(mats) :]:
        ax.set_visible(False)
    for ax, m, title in zip(axes.flat, mats, titles):
        im = ax.imshow(m, cmap=HEATMAP, vmin=0.0, vmax=1.0)
        ax.set_xticks(range(L), tokens, rotation=90, fontsize=7)
        ax.set_yticks(range(L), tokens, fontsize=7)
        ax.set_title(title, fontsize=9)
        if highlight_row is not None:
            ax.add_patch(
                plt.Rectangle((-0.5, highlight_row - 0.5), L, 1, fill=False, ec="red", lw=1.2)
            )
    fig.colorbar(
        im, ax=axes.ravel().tolist(), shrink=0.6, label=lang.label("attention probability")
    )
    return lang.translate_figure(fig)


def plot_head_grid(
    values,
    *,
    title: str,
    colorbar_label: str,
    fmt: str = "{:.1f}",
) -> Figure:
    """A (layers, heads) table of one number per attention head, as an annotated heatmap.

    Args:
        values: (num_layers, num_heads) array, e.g. the mean entropy of each head's rows.
        title: figure title.
        colorbar_label: what the numbers are.
        fmt: format of the numbers written in the cells.
    """
    v = as_array(values)
    if v.ndim != 2:
        raise ValueError(f"values must be (num_layers, num_heads), got shape {v.shape}")
    n_layers, n_heads = v.shape
    fig, ax = plt.subplots(figsize=(0.55 * n_heads + 2.0, 0.5 * n_layers + 1.4))
    im = ax.imshow(v, cmap=HEATMAP, aspect="auto")
    for i in range(n_layers):
        for j in range(n_heads):
            bright = im.norm(v[i, j]) > 0.6
            ax.text(
                j,
                i,
                fmt.format(v[i, j]),
                ha="center",
                va="center",
                fontsize=7,
                color="black" if bright else "white",
            )
    ax.set_xticks(range(n_heads), [str(j) for j in range(n_heads)])
    ax.set_yticks(range(n_layers), [str(i) for i in range(n_layers)])
    ax.set_xlabel(lang.label("head"))
    ax.set_ylabel(lang.label("layer"))
    ax.set_title(title, fontsize=10)
    fig.colorbar(im, ax=ax, label=colorbar_label)
    fig.tight_layout()
    return lang.translate_figure(fig)
