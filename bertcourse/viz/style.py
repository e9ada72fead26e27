"""Shared look of the book's figures: a colour-blind-safe palette and array conversion."""

from __future__ import annotations

import numpy as np

# Okabe-Ito colours: distinct in grey scale and for the common colour-vision deficiencies.
BLUE, ORANGE, GREEN, PINK, SKY, RED, BLACK = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#56B4E9",
    "#D55E00",
    "#000000",
)
GREY = "#7f7f7f"
CYCLE = [BLUE, ORANGE, GREEN, PINK, SKY, RED, BLACK]
HEATMAP = "viridis"


def as_array(x) -> np.ndarray:
    """Tensors (also ones that require grad), lists and arrays -> a float numpy array."""
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    return np.asarray(x, dtype=float)
