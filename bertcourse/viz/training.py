"""Plots for chapters 4-7 of the book: the loss, NSP, Adam and its schedule, the whole model,
and the figures that ``python -m bertcourse.pretrain`` saves with its report.

Every function takes numbers that the book computed with bertcourse (it never computes them
itself) and returns a `matplotlib.figure.Figure` made with `plt.subplots`, so a notebook cell
`fig = plot_...(...)` shows it once. Nothing here imports torch: arrays, lists and tensors
all work, as long as `numpy.asarray` accepts them.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from bertcourse.viz import lang
from bertcourse.viz.style import BLUE, CYCLE, GREEN, GREY, HEATMAP, ORANGE, as_array

__all__ = [
    "plot_surprisal",
    "plot_logit_gradient",
    "plot_gather_costs",
    "plot_token_types",
    "plot_pair_scores",
    "plot_baseline_accuracy",
    "plot_bias_correction",
    "plot_schedules",
    "plot_curves",
    "plot_parameter_breakdown",
    "plot_similarity_matrix",
    "plot_fill_mask",
    "plot_pretraining_curves",
    "plot_lr_schedule",
    "plot_speed_ladder",
]


def _check_same_length(**arrays: np.ndarray) -> None:
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"these inputs must have the same length, got {lengths}")


# --- Chapter 4: the loss --------------------------------------------------------------------


def plot_surprisal(
    series: Mapping[str, Sequence[float]],
    labels: Sequence[str] | None = None,
    *,
    annotate: str | None = None,
    title: str = lang.label("Surprisal of each target token"),
) -> Figure:
    """The curve -ln p over p in (0, 1], with the probabilities that models gave real targets.

    Args:
        series: `{model name: (N,) probabilities of the N target tokens}`.
        labels: N names for the points (e.g. the target words), or None.
        annotate: which series gets the labels written next to its points (default: the last).
    """
    arrays = {name: as_array(p) for name, p in series.items()}
    for name, p in arrays.items():
        if p.ndim != 1 or np.any((p <= 0) | (p > 1)):
            raise ValueError(f"series {name!r} must be a 1-D sequence of probabilities in (0, 1]")
        if labels is not None and len(labels) != len(p):
            raise ValueError(f"got {len(labels)} labels for {len(p)} probabilities in {name!r}")
    if annotate is None and arrays:
        annotate = list(arrays)[-1]
    lowest = min(float(p.min()) for p in arrays.values())
    fig, ax = plt.subplots(figsize=(7.0, 3.8))
    grid = np.logspace(np.log10(min(lowest, 1e-3) / 2), 0, 400)
    ax.plot(grid, -np.log(grid), color=GREY, lw=1.5, label=r"$-\ln p$")
    for (name, p), color in zip(arrays.items(), CYCLE):
        ax.scatter(p, -np.log(p), color=color, zorder=3, s=22, label=name)
        ax.axhline(-np.log(p).mean(), color=color, ls="--", lw=1)
        if labels is not None and name == annotate:
            for x, text in zip(p, labels):
                ax.annotate(
                    text, (x, -np.log(x)), textcoords="offset points", xytext=(4, 3), fontsize=7
                )
    ax.set_xscale("log")
    ax.set_xlabel(lang.label("probability of the target, $p_t$ (log scale)"))
    ax.set_ylabel(lang.label("surprisal $-\\ln p_t$ (nats)"))
    ax.set_title(lang.label(f"{title} (dashed: the mean, i.e. the loss)"), fontsize=10)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_logit_gradient(
    closed_form: Sequence[float],
    autograd: Sequence[float],
    class_names: Sequence[str],
    *,
    title: str = lang.label(r"$\partial \ell / \partial z = p - y$ at the largest entries"),
) -> Figure:
    """Bars of the closed-form gradient p - y, with autograd's values as markers on top.

    Args:
        closed_form: (K,) p - y at K chosen classes (e.g. the target and the most probable ones).
        autograd: (K,) the gradient autograd computed at the same classes.
        class_names: K names (tokens) for the x axis.
    """
    g, a = as_array(closed_form), as_array(autograd)
    _check_same_length(closed_form=g, autograd=a, class_names=np.arange(len(class_names)))
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    x = np.arange(len(g))
    colors = [ORANGE if v < 0 else BLUE for v in g]
    ax.bar(x, g, color=colors, label=lang.label("closed form $p - y$"))
    ax.scatter(x, a, color="black", marker="_", s=200, zorder=3, label=lang.label("autograd"))
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xticks(x, list(class_names), rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(lang.label("gradient w.r.t. the logit"))
    ax.set_title(title)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_gather_costs(
    lengths: Sequence[int],
    costs: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    title: str = lang.label("Project then ignore vs gather then project"),
) -> Figure:
    """Two panels, time and memory, for each strategy across sequence lengths.

    Args:
        lengths: (S,) the sequence lengths measured.
        costs: `{strategy: {"time_ms": (S,), "memory_mb": (S,)}}`.
    """
    x = as_array(lengths)
    fig, axes = plt.subplots(1, 2, figsize=(8.8, 3.4))
    for (name, c), color in zip(costs.items(), CYCLE):
        for ax, key in zip(axes, ("time_ms", "memory_mb")):
            y = as_array(c[key])
            _check_same_length(lengths=x, **{key: y})
            ax.plot(x, y, marker="o", color=color, label=name)
    axes[0].set_ylabel(lang.label("forward + backward (ms, fastest of 3)"))
    axes[1].set_ylabel(lang.label("tensors saved for backward (MiB)"))
    for ax in axes:
        ax.set_xlabel(lang.label("sequence length L"))
        ax.set_ylim(bottom=0)
        ax.set_xticks(x)
    axes[0].legend(frameon=False, fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return lang.translate_figure(fig)


# --- Chapter 5: next-sentence prediction ----------------------------------------------------


def plot_token_types(
    tokens: Sequence[str],
    token_type_ids: Sequence[int],
    *,
    max_tokens: int = 48,
    title: str = lang.label("Token types of one pair"),
) -> Figure:
    """The tokens of a pair in reading order, coloured by their token type (segment) id.

    Args:
        tokens: (L,) the WordPiece tokens, [CLS] ... [SEP] ... [SEP].
        token_type_ids: (L,) 0 for segment A (with [CLS] and its [SEP]), 1 for segment B.
        max_tokens: longer pairs are cut in the middle and the cut is marked.
    """
    types = [int(t) for t in as_array(token_type_ids)]
    if len(types) != len(tokens):
        raise ValueError(f"got {len(tokens)} tokens but {len(types)} token type ids")
    items = list(zip(tokens, types))
    if len(items) > max_tokens:
        half = max_tokens // 2
        items = items[:half] + [("...", -1)] + items[-half:]
    per_row = 12
    rows = (len(items) + per_row - 1) // per_row
    fig, ax = plt.subplots(figsize=(9, 0.45 * rows + 0.9))
    colors = {0: BLUE, 1: ORANGE, -1: "white"}
    for i, (tok, t) in enumerate(items):
        r, c = divmod(i, per_row)
        ax.add_patch(
            plt.Rectangle((c, -r), 0.95, 0.8, facecolor=colors[t], alpha=0.35 if t >= 0 else 1)
        )
        ax.text(c + 0.475, -r + 0.4, tok, ha="center", va="center", fontsize=7)
    ax.set_xlim(0, per_row)
    ax.set_ylim(-rows + 0.8, 0.9)
    ax.axis("off")
    handles = [
        plt.Rectangle(
            (0, 0), 1, 1, facecolor=BLUE, alpha=0.35, label=lang.label("token type 0 (segment A)")
        ),
        plt.Rectangle(
            (0, 0), 1, 1, facecolor=ORANGE, alpha=0.35, label=lang.label("token type 1 (segment B)")
        ),
    ]
    ax.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=2,
        frameon=False,
        fontsize=8,
    )
    ax.set_title(title, pad=22)
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_pair_scores(
    scores: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    xlabel: str = lang.label("bag-of-words cosine similarity of A and B"),
    names: tuple[str, str] = (lang.label("positive (B follows A)"), lang.label("negative")),
) -> Figure:
    """One histogram panel per task: the baseline's score for positive and negative pairs.

    Args:
        scores: `{task name: (positive scores (N1,), negative scores (N2,))}`.
    """
    fig, axes = plt.subplots(1, len(scores), figsize=(4.4 * len(scores), 3.2), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, (task, (pos, neg)) in zip(axes, scores.items()):
        pos, neg = as_array(pos), as_array(neg)
        both = np.concatenate([pos, neg])
        bins = np.linspace(both.min(), both.max() + 1e-9, 30)
        ax.hist(pos, bins=bins, alpha=0.45, color=BLUE, label=names[0])
        ax.hist(neg, bins=bins, histtype="step", lw=1.8, color=ORANGE, label=names[1])
        ax.set_yscale("log")
        ax.set_title(task)
        ax.set_xlabel(xlabel)
    axes[0].set_ylabel(lang.label("pairs (log scale)"))
    axes[0].legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_baseline_accuracy(
    accuracy: Mapping[str, float],
    *,
    errors: Mapping[str, float] | None = None,
    chance: float = 0.5,
    title: str = lang.label("Held-out accuracy of a classifier that never reads word order"),
) -> Figure:
    """Horizontal bars of accuracies with a line at chance level.

    Args:
        accuracy: `{setting: accuracy in [0, 1]}`.
        errors: optional `{setting: standard error}` drawn as error bars.
    """
    names = list(accuracy)
    acc = as_array([accuracy[n] for n in names])
    err = None if errors is None else as_array([errors.get(n, 0.0) for n in names])
    fig, ax = plt.subplots(figsize=(6.4, 0.55 * len(names) + 1.2))
    y = np.arange(len(names))
    ax.barh(y, acc, xerr=err, color=[CYCLE[i % len(CYCLE)] for i in range(len(names))], alpha=0.8)
    for i, (yi, a) in enumerate(zip(y, acc)):
        right = a + (0.0 if err is None else err[i])
        ax.text(right + 0.015, yi, f"{a:.1%}", va="center", fontsize=8)
    ax.axvline(chance, color="black", ls="--", lw=1, label=lang.label(f"chance ({chance:.0%})"))
    ax.set_yticks(y, names, fontsize=8)
    ax.set_xlim(0, 1.0)
    ax.set_xlabel(lang.label("accuracy"))
    ax.set_title(title, fontsize=9)
    ax.legend(frameon=False, fontsize=8, loc="upper right", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return lang.translate_figure(fig)


# --- Chapter 6: Adam and the schedule -------------------------------------------------------


def plot_bias_correction(
    steps: Sequence[int],
    curves: Mapping[str, Sequence[float]],
    *,
    ylabel: str = lang.label("update size / learning rate"),
    title: str = lang.label("Adam's first steps with and without bias correction"),
    logx: bool = True,
    predicted: Sequence[str] = (),
) -> Figure:
    """Lines of a per-step quantity (e.g. the update size in units of lr) for several variants.

    Args:
        steps: (T,) step numbers, starting at 1.
        curves: `{variant: (T,) values}`.
        predicted: names of curves that are formulas rather than measurements: drawn as thin
            dotted black lines on top, so that a measured curve under them stays visible.
    """
    t = as_array(steps)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    measured = [(n, y) for n, y in curves.items() if n not in predicted]
    formulas = [(n, y) for n, y in curves.items() if n in predicted]
    for (name, y), color in zip(measured, CYCLE):
        y = as_array(y)
        _check_same_length(steps=t, **{name: y})
        ax.plot(t, y, color=color, lw=2.2, label=name)
    for name, y in formulas:
        y = as_array(y)
        _check_same_length(steps=t, **{name: y})
        ax.plot(t, y, color="black", lw=1.0, ls=":", label=name)
    ax.axhline(1.0, color="black", lw=0.6, ls=":")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(lang.label("step $t$ (log scale)") if logx else lang.label("step $t$"))
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_schedules(
    steps: Sequence[int],
    schedules: Mapping[str, Sequence[float]],
    *,
    warmup_steps: int | None = None,
    title: str = lang.label("Learning-rate multiplier"),
) -> Figure:
    """Left: each schedule's multiplier. Right: the first minus each other one (if >= 2).

    Args:
        steps: (T,) step numbers.
        schedules: `{name: (T,) multipliers of the peak learning rate}`.
        warmup_steps: draws a vertical line at the end of warmup.
    """
    t = as_array(steps)
    names = list(schedules)
    ncols = 2 if len(names) >= 2 else 1
    fig, axes = plt.subplots(1, ncols, figsize=(4.6 * ncols, 3.4))
    axes = np.atleast_1d(axes)
    for name, color in zip(names, CYCLE):
        y = as_array(schedules[name])
        _check_same_length(steps=t, **{name: y})
        axes[0].plot(t, y, color=color, lw=1.6, label=name)
    axes[0].set_ylabel(lang.label("multiplier of the peak rate"))
    axes[0].set_title(title, fontsize=10)
    axes[0].legend(frameon=False, fontsize=8)
    if ncols == 2:
        first = as_array(schedules[names[0]])
        for name, color in zip(names[1:], CYCLE[1:]):
            axes[1].plot(t, first - as_array(schedules[name]), color=color, lw=1.6)
        axes[1].axhline(0, color="black", lw=0.6)
        diff_title = lang.label(f"{names[0]} minus {' / '.join(names[1:])}")
        axes[1].set_title(textwrap.fill(diff_title, 48), fontsize=9)
        axes[1].set_ylabel(lang.label("difference"))
    for ax in axes:
        ax.set_xlabel(lang.label("step"))
        if warmup_steps is not None:
            ax.axvline(warmup_steps, color=GREY, ls=":", lw=1)
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_curves(
    curves: Mapping[str, Sequence[float] | tuple[Sequence[float], Sequence[float]]],
    *,
    xlabel: str = lang.label("step"),
    ylabel: str = lang.label("loss"),
    title: str = "",
    hline: tuple[float, str] | None = None,
    logy: bool = False,
    ylim: tuple[float | None, float | None] | None = None,
    smooth: int = 1,
    ax_titles: Sequence[str] | None = None,
    panels: Sequence[Mapping[str, Sequence[float] | tuple[Sequence[float], Sequence[float]]]]
    | None = None,
    panel_ylabels: Sequence[str] | None = None,
    panel_hlines: Sequence[tuple[float, str] | None] | None = None,
    sharey: bool = False,
) -> Figure:
    """Training curves: one line per run, optionally smoothed, optionally several panels.

    Args:
        curves: `{run name: y (T,)}` or `{run name: (x (T,), y (T,))}`; the first panel.
        hline: `(value, label)` for a reference level (e.g. ln V, the loss of a uniform guess),
            drawn in every panel.
        smooth: width of a trailing moving average (1 = raw values); the raw curve is drawn
            faintly behind the smoothed one.
        panels: more `curves`-like mappings, one per extra panel, sharing the x axis label.
        panel_ylabels / ax_titles: labels and titles for the extra panels (and the first one).
        panel_hlines: one `(value, label)` or None per panel, instead of `hline` for all.
        sharey: one y scale for all panels.
    """
    all_panels = [curves, *(panels or [])]
    ylabels = [ylabel, *(panel_ylabels or [ylabel] * (len(all_panels) - 1))]
    fig, axes = plt.subplots(
        1, len(all_panels), figsize=(4.8 * len(all_panels) + 0.8, 3.5), sharey=sharey
    )
    axes = np.atleast_1d(axes)
    for i, (ax, panel) in enumerate(zip(axes, all_panels)):
        for (name, data), color in zip(panel.items(), CYCLE):
            if isinstance(data, tuple) and len(data) == 2:
                x, y = as_array(data[0]), as_array(data[1])
            else:
                y = as_array(data)
                x = np.arange(1, len(y) + 1)
            _check_same_length(x=x, y=y)
            if smooth > 1 and len(y) >= smooth:
                csum = np.cumsum(np.insert(y, 0, 0.0))
                ys = (csum[smooth:] - csum[:-smooth]) / smooth
                ax.plot(x, y, color=color, alpha=0.2, lw=0.8)
                ax.plot(x[smooth - 1 :], ys, color=color, lw=1.6, label=name)
            else:
                ax.plot(x, y, color=color, lw=1.6, label=name, marker="o" if len(y) < 30 else None)
        level = hline if panel_hlines is None else panel_hlines[i]
        if level is not None:
            ax.axhline(level[0], color="black", ls="--", lw=1, label=level[1])
        if logy:
            ax.set_yscale("log")
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.set_xlabel(xlabel)
        if i == 0 or not sharey:
            ax.set_ylabel(ylabels[i])
        if ax_titles is not None and i < len(ax_titles):
            ax.set_title(ax_titles[i], fontsize=10)
        ax.legend(frameon=False, fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return lang.translate_figure(fig)


# --- Chapter 7: the assembled model ---------------------------------------------------------


def plot_parameter_breakdown(
    counts: Mapping[str, Mapping[str, float]],
    *,
    title: str = lang.label("Where the parameters are"),
) -> Figure:
    """Stacked horizontal bars: each model's parameters split by component, in millions (left)
    and as shares of the total (right).

    Args:
        counts: `{model name: {component: number of parameters}}`; components may differ
            between models (a missing one counts as 0).
    """
    models = list(counts)
    components: list[str] = []
    for c in counts.values():
        components += [k for k in c if k not in components]
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 0.55 * len(models) + 2.4), sharey=True)
    y = np.arange(len(models))
    totals = as_array([sum(counts[m].values()) for m in models])
    for ax, relative in zip(axes, (False, True)):
        left = np.zeros(len(models))
        for comp, color in zip(components, CYCLE):
            vals = as_array([counts[m].get(comp, 0) for m in models])
            vals = vals / totals if relative else vals / 1e6
            ax.barh(y, vals, left=left, color=color, label=comp)
            left += vals
        ax.set_xlabel(
            lang.label("share of the parameters")
            if relative
            else lang.label("parameters (millions)")
        )
    for yi, tot in zip(y, totals):
        axes[0].text(tot / 1e6, yi, f" {tot / 1e6:.1f}M", va="center", fontsize=8)
    axes[0].set_xlim(0, totals.max() / 1e6 * 1.3)
    axes[1].set_xlim(0, 1)
    axes[0].set_yticks(y, models, fontsize=8)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False, fontsize=8)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    return lang.translate_figure(fig)


def plot_similarity_matrix(
    matrix: Sequence[Sequence[float]],
    labels: Sequence[str],
    *,
    title: str = lang.label("Cosine similarity of sentence embeddings"),
) -> Figure:
    """A heatmap of an (N, N) matrix with the values written in the cells.

    Args:
        matrix: (N, N), e.g. cosine similarities of N sentence embeddings.
        labels: N short names for the rows and columns.
    """
    m = as_array(matrix)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] != len(labels):
        raise ValueError(f"matrix must be (N, N) with N = {len(labels)} labels, got {m.shape}")
    n = len(labels)
    fig, ax = plt.subplots(figsize=(1.0 * n + 2.6, 0.8 * n + 1.4))
    im = ax.imshow(m, cmap=HEATMAP, vmin=min(0.0, m.min()), vmax=1.0)
    for i in range(n):
        for j in range(n):
            ax.text(
                j,
                i,
                f"{m[i, j]:.2f}",
                ha="center",
                va="center",
                fontsize=7,
                color="white" if m[i, j] < 0.6 else "black",
            )
    ax.set_xticks(range(n), labels, rotation=40, ha="right", fontsize=8)
    ax.set_yticks(range(n), labels, fontsize=8)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_fill_mask(
    predictions: Mapping[str, Sequence[tuple[str, float]]],
    *,
    title: str = lang.label("Top predictions at [MASK]"),
) -> Figure:
    """One panel per sentence: the top-k tokens and their probabilities as horizontal bars.

    Args:
        predictions: `{sentence: [(token, probability), ...]}`, most probable first (the
            `Prediction`s of `bertcourse.fillmask.fill_mask` work as they are).
    """
    n = len(predictions)
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n, 3.0), squeeze=False)
    for ax, (sentence, preds) in zip(axes[0], predictions.items()):
        toks = [p[0] for p in preds][::-1]  # (token, probability) pairs or Predictions
        probs = as_array([p[1] for p in preds])[::-1]
        ax.barh(np.arange(len(toks)), probs, color=BLUE)
        ax.set_yticks(np.arange(len(toks)), toks, fontsize=8)
        ax.set_xlim(0, max(1e-9, probs.max()) * 1.15)
        ax.set_xlabel(lang.label("probability"))
        ax.set_title(textwrap.fill(sentence, 40), fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return lang.translate_figure(fig)


# --- The pretraining command's report -------------------------------------------------------


def plot_pretraining_curves(report: Mapping) -> Figure:
    """Losses, MLM accuracy and NSP accuracy of a pretraining run, training and held-out.

    Args:
        report: the ``report.json`` of ``python -m bertcourse.pretrain`` (as a dict): its
            ``history`` (``train`` and ``eval`` rows) and ``unigram_baseline``.
    """
    train, ev = report["history"]["train"], report["history"]["eval"]
    base = report["unigram_baseline"]
    s, es = [r["step"] for r in train], [r["step"] for r in ev]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    ax = axes[0]
    ax.plot(s, [r["mlm_loss"] for r in train], label=lang.label("MLM train"), color=BLUE, alpha=0.7)
    ax.plot(es, [r["mlm_loss"] for r in ev], "o-", label=lang.label("MLM held-out"), color=BLUE)
    ax.plot(
        s, [r["nsp_loss"] for r in train], label=lang.label("NSP train"), color=ORANGE, alpha=0.7
    )
    ax.plot(es, [r["nsp_loss"] for r in ev], "o-", label=lang.label("NSP held-out"), color=ORANGE)
    ax.axhline(base["mlm_loss"], ls="--", color=GREY, label=lang.label("unigram MLM loss"))
    ax.set(
        xlabel=lang.label("step"),
        ylabel=lang.label("cross-entropy (nats)"),
        title=lang.label("Losses"),
    )
    ax = axes[1]
    ax.plot(s, [r["mlm_acc"] for r in train], label=lang.label("train"), color=BLUE, alpha=0.7)
    ax.plot(es, [r["mlm_acc"] for r in ev], "o-", label=lang.label("held-out"), color=BLUE)
    ax.plot(es, [r["mlm_acc_at_mask"] for r in ev], "s:", label=lang.label("held-out, [MASK] only"), color=GREEN)  # fmt: skip
    ax.axhline(base["mlm_acc"], ls="--", color=GREY, label=lang.label("unigram baseline"))
    ax.set(
        xlabel=lang.label("step"),
        ylabel=lang.label("accuracy"),
        title=lang.label("MLM accuracy"),
        ylim=(0, None),
    )
    ax = axes[2]
    ax.plot(s, [r["nsp_acc"] for r in train], label=lang.label("train"), color=ORANGE, alpha=0.7)
    ax.plot(es, [r["nsp_acc"] for r in ev], "o-", label=lang.label("held-out"), color=ORANGE)
    ax.axhline(0.5, ls="--", color=GREY, label=lang.label("chance"))
    ax.set(
        xlabel=lang.label("step"),
        ylabel=lang.label("accuracy"),
        title=lang.label("NSP accuracy"),
        ylim=(0, 1),
    )
    for ax in axes:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return lang.translate_figure(fig)


def plot_lr_schedule(report: Mapping) -> Figure:
    """The learning rate of every logged step of a pretraining run (its ``report.json``)."""
    train = report["history"]["train"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r["step"] for r in train], [r["lr"] for r in train], color=BLUE)
    ax.set(
        xlabel=lang.label("step"),
        ylabel=lang.label("learning rate"),
        title=lang.label(f"Schedule: {report['config']['schedule']}"),
    )
    fig.tight_layout()
    return lang.translate_figure(fig)


# --- Appendix: making BERT fast on a CPU ------------------------------------------------------


def plot_speed_ladder(
    names: Sequence[str],
    tokens_per_s: Sequence[float],
    mfu: Sequence[float],
    *,
    title: str = lang.label("The speed ladder"),
) -> Figure:
    """Two panels of horizontal bars, one bar per rung (top = first): training tokens per
    second, and model FLOPs utilisation (share of the measured matmul peak).

    Args:
        names: (R,) what each rung adds.
        tokens_per_s: (R,) real (unpadded) tokens per second.
        mfu: (R,) model FLOPs per second / peak, in [0, 1].
    """
    t, u = as_array(tokens_per_s), as_array(mfu)
    _check_same_length(names=np.arange(len(names)), tokens_per_s=t, mfu=u)
    y = np.arange(len(names))[::-1]
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 0.45 * len(names) + 1.4), sharey=True)
    axes[0].barh(y, t, color=BLUE)
    axes[0].set_xlabel(lang.label("training tokens per second"))
    axes[1].barh(y, 100 * u, color=ORANGE)
    axes[1].set_xlabel(lang.label("MFU (% of the measured fp32 matmul peak)"))
    for ax, values, fmt in ((axes[0], t, "{:,.0f}"), (axes[1], 100 * u, "{:.1f}%")):
        for yi, v in zip(y, values):
            ax.text(v, yi, " " + fmt.format(v), va="center", fontsize=8)
        ax.set_xlim(0, 1.25 * max(values.max(), 1e-9))
    axes[0].set_yticks(y, list(names))
    fig.suptitle(title)
    fig.tight_layout()
    return lang.translate_figure(fig)
