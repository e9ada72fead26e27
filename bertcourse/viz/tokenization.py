"""Plots for chapter 0 (from text to ids): what the vocabulary size buys and costs.

Each function draws numbers that the caller computed with bertcourse and `tokenizers`, and
returns the `matplotlib.figure.Figure` (made with `plt.subplots`, so a notebook cell
`fig = plot_...(...)` shows it once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from bertcourse.viz import lang
from bertcourse.viz.style import BLUE, CYCLE, GREY, ORANGE, as_array

__all__ = ["plot_vocab_size", "plot_parameter_share"]


def _check_lengths(sizes: Sequence[int], **curves: Sequence[float]) -> None:
    for name, values in curves.items():
        if len(values) != len(sizes):
            raise ValueError(f"{name} has {len(values)} values for {len(sizes)} vocabulary sizes")


def plot_vocab_size(
    word_sizes: Sequence[int],
    word_unk_rate: Sequence[float],
    piece_sizes: Sequence[int],
    piece_unk_rate: Sequence[float],
    pieces_per_word: Sequence[float],
) -> Figure:
    """Held-out `[UNK]` rate and sequence length against the vocabulary size V (log axis).

    Args:
        word_sizes, word_unk_rate: a vocabulary of the V most frequent whole words, and the
            share of held-out words it does not contain.
        piece_sizes, piece_unk_rate: a WordPiece vocabulary of V pieces, and the share of
            held-out words it turns into `[UNK]`.
        pieces_per_word: the WordPiece vocabulary's mean number of pieces per held-out word.
    """
    _check_lengths(word_sizes, word_unk_rate=word_unk_rate)
    _check_lengths(piece_sizes, piece_unk_rate=piece_unk_rate, pieces_per_word=pieces_per_word)
    fig, (ax_unk, ax_len) = plt.subplots(1, 2, figsize=(9, 3.4))
    ax_unk.plot(
        word_sizes,
        100 * as_array(word_unk_rate),
        "o-",
        color=ORANGE,
        label=lang.label("whole words"),
    )
    ax_unk.plot(
        piece_sizes, 100 * as_array(piece_unk_rate), "s-", color=BLUE, label=lang.label("WordPiece")
    )
    ax_unk.set_ylabel(lang.label("held-out words that become [UNK] (%)"))
    ax_unk.set_ylim(bottom=0)
    ax_unk.legend(frameon=False, fontsize=8)
    ax_len.plot(piece_sizes, pieces_per_word, "s-", color=BLUE)
    ax_len.axhline(1.0, color=GREY, lw=0.8, ls="--")
    ax_len.text(
        piece_sizes[0], 1.0, lang.label(" one piece per word"), va="bottom", fontsize=8, color=GREY
    )
    ax_len.set_ylabel(lang.label("WordPiece pieces per held-out word"))
    for ax in (ax_unk, ax_len):
        ax.set_xscale("log")
        ax.set_xlabel(lang.label("vocabulary size V"))
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_parameter_share(
    sizes: Sequence[int], shares: Mapping[str, Sequence[float]], *, marks: Sequence[int] = ()
) -> Figure:
    """The share of a model's parameters that sit in the V x H embedding table, against V.

    Args:
        sizes: the vocabulary sizes (x axis, log scale).
        shares: `{model name: share at each size}`, each a number in [0, 1].
        marks: vocabulary sizes to mark with a vertical line (e.g. 8,192 and 30,522).
    """
    _check_lengths(sizes, **{str(k): v for k, v in shares.items()})
    fig, ax = plt.subplots(figsize=(6, 3.4))
    for color, (name, share) in zip(CYCLE, shares.items()):
        ax.plot(sizes, 100 * as_array(share), color=color, label=name)
    for V in marks:
        ax.axvline(V, color=GREY, lw=0.8, ls="--")
        ax.text(V, 2, f" V={V:,}", rotation=90, va="bottom", fontsize=8, color=GREY)
    ax.set_xscale("log")
    ax.set_ylim(0, 100)
    ax.set_xlabel(lang.label("vocabulary size V"))
    ax.set_ylabel(lang.label("parameters in the embedding table (%)"))
    ax.legend(frameon=False, fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return lang.translate_figure(fig)
