"""Helpers shared by the continuous model families (PoE, mcRBM, linear and bilinear generative)."""

from __future__ import annotations

import torch


def as_rows(x, n_dims: int, device) -> torch.Tensor:
    """``x`` as float64 rows ``(n, n_dims)`` on ``device``; a ValueError naming the expected shape otherwise."""
    x = torch.as_tensor(x, device=device)
    if x.dtype != torch.float64:
        x = x.double()
    if x.ndim != 2 or x.shape[1] != n_dims:
        raise ValueError(f"x must have shape (n, {n_dims}), got {tuple(x.shape)}")
    return x
