"""Random parameters for the families' ``random`` constructors (tests, initialisation)."""

from __future__ import annotations

import torch


def resolve_generator(generator: torch.Generator | None, seed: int | None = None) -> torch.Generator:
    """``generator``, or else a new one seeded with ``seed`` (default 0)."""
    if generator is not None:
        return generator
    return torch.Generator().manual_seed(0 if seed is None else int(seed))


def normal(g: torch.Generator, *shape: int, scale: float) -> torch.Tensor:
    """``N(0, scale^2)`` float64 draws of ``shape`` from ``g``."""
    return torch.randn(*shape, generator=g, dtype=torch.float64) * scale
