"""Exact categorical draws by inverse CDF (the categorical families' samplers and the mixture reference's).

Moved from :mod:`logzbench.models.potts` (which re-exports it) so that the models that draw categorical
states share it without importing one another.
"""

from __future__ import annotations

import torch


def categorical_from_logits(logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One draw per row of ``logits`` from ``softmax(logits)`` over the last axis, by inverse CDF.

    The probabilities are formed in float64 and compared with one float64 uniform per row from
    ``generator`` (``torch.rand``), so the draw is exact to float64 precision and reproducible.

    Parameters
    ----------
    logits : torch.Tensor, shape (..., q)
    generator : torch.Generator
        On ``logits``' device.

    Returns
    -------
    torch.Tensor, shape (...,), int64
        States in ``0..q-1``.
    """
    p = torch.softmax(logits.double(), dim=-1)
    cdf = torch.cumsum(p, dim=-1)
    u = torch.rand(p.shape[:-1] + (1,), generator=generator, dtype=torch.float64, device=p.device)
    # the number of cumulative probabilities (but the last) not above u: 0..q-1
    return (cdf[..., :-1] <= u).sum(dim=-1)
