"""Test inputs from their own generators (the global RNG is left alone).

Under the referee, the seeds written in a hidden test region are mapped through a secret
(`mapped_seeds`), so the hidden inputs are not the ones a reader of `solutions/` can compute.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

import torch
from torch import Tensor

_SEED_MAP: contextvars.ContextVar[Callable[[int], int] | None] = contextvars.ContextVar(
    "bertcourse_seed_map", default=None
)


@contextlib.contextmanager
def mapped_seeds(mapper: Callable[[int], int] | None) -> Iterator[None]:
    """Within the block, `randn` and `randint` draw from `mapper(seed)` instead of `seed`."""
    token = _SEED_MAP.set(mapper)
    try:
        yield
    finally:
        _SEED_MAP.reset(token)


def _generator(seed: int) -> torch.Generator:
    mapper = _SEED_MAP.get()
    return torch.Generator().manual_seed(mapper(seed) if mapper else seed)


def randn(
    *shape: int, seed: int = 0, dtype: torch.dtype = torch.float32, scale: float = 1.0
) -> Tensor:
    """Standard normal values from their own generator (the global RNG is left alone)."""
    g = _generator(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def randint(low: int, high: int, *shape: int, seed: int = 0) -> Tensor:
    """Uniform int64 values in [low, high) from their own generator."""
    return torch.randint(low, high, shape, generator=_generator(seed))
