"""What the deep and variational learners share: hidden-layer sizes, the data base rate as logits, and
the check that training has not diverged."""

from __future__ import annotations

import math

import numpy as np
import torch

from .trainer import _BASE_RATE_CLIP, TrainingDivergedError

#: Parameters larger than this in absolute value count as diverged (the model files refuse
#: weights above 1e15; a trained model stays far below).
_DIVERGED_ABS = 1e12


def _check_hidden_sizes(hidden_sizes, n_layers: int | None = None) -> list[int]:
    """Validate a list of hidden-layer sizes; ``n_layers`` demands an exact depth."""
    if isinstance(hidden_sizes, (str, bytes)) or not hasattr(hidden_sizes, "__len__"):
        raise ValueError(f"hidden_sizes must be a non-empty list of positive integers, got {hidden_sizes!r}")
    sizes = list(hidden_sizes)
    if not sizes:
        raise ValueError("hidden_sizes must be a non-empty list of positive integers, got an empty list")
    for i, n in enumerate(sizes):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(
                f"hidden_sizes must be a non-empty list of positive integers; entry {i} is {n!r} (in {hidden_sizes!r})"
            )
    if n_layers is not None and len(sizes) != n_layers:
        raise ValueError(f"hidden_sizes must have exactly {n_layers} entries, got {len(sizes)} ({hidden_sizes!r})")
    return [int(n) for n in sizes]


def _base_rate_logit(mean: torch.Tensor) -> torch.Tensor:
    p = mean.clamp(_BASE_RATE_CLIP, 1.0 - _BASE_RATE_CLIP)
    return torch.log(p) - torch.log1p(-p)


def _check_params_finite(
    params: dict[str, torch.Tensor],
    where: str,
    *,
    limit: float = _DIVERGED_ABS,
    remedy: str = "lower the learning rate or raise the weight decay",
) -> None:
    """:class:`TrainingDivergedError` naming ``where`` and a parameter that is NaN, infinite or above
    ``limit`` in magnitude, and the ``remedy``."""
    for name, p in params.items():
        top = float(p.abs().max())  # NaN where p holds one
        if not math.isfinite(top) or top > limit:
            what = (
                f"exploded to |{name}| = {top:.3g} (above {limit:g})"
                if math.isfinite(top)
                else "became NaN or infinite"
            )
            raise TrainingDivergedError(f"training diverged in {where}: '{name}' {what}; {remedy}")
