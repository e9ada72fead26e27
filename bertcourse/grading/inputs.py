"""Test inputs from their own generators (the global RNG is left alone)."""

from __future__ import annotations

import torch
from torch import Tensor

# --- inputs ---------------------------------------------------------------------------------


def randn(
    *shape: int, seed: int = 0, dtype: torch.dtype = torch.float32, scale: float = 1.0
) -> Tensor:
    """Standard normal values from their own generator (the global RNG is left alone)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def randint(low: int, high: int, *shape: int, seed: int = 0) -> Tensor:
    """Uniform int64 values in [low, high) from their own generator."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=g)
