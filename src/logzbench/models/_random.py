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


def bipartite(
    g: torch.Generator, visible: tuple[int, ...], n_hidden: int, scale: float, bias_scale: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A bipartite family's random parameters (RBM, GRBM, Potts RBM), drawn from ``g`` in this order: the
    weights ``N(0, scale^2)`` of shape ``(*visible, n_hidden)``, the visible biases ``N(0, bias_scale^2)`` of
    shape ``visible`` and the hidden biases of shape ``(n_hidden,)``."""
    W = normal(g, *visible, n_hidden, scale=scale)
    a = normal(g, *visible, scale=bias_scale)
    b = normal(g, n_hidden, scale=bias_scale)
    return W, a, b
