"""Statistics of importance weights, shared by the models and the estimators.

Both functions take log-weights ``log w`` (any float tensor; computed in float64) and reduce
along one dimension:

* :func:`log_mean_stderr`: ``log mean(w)`` and its delta-method standard error
  ``sd(w) / (sqrt(M) mean(w))``;
* :func:`ess_from_log_weights`: the effective sample size ``(sum w)^2 / sum w^2``.
"""

from __future__ import annotations

import math

import torch

__all__ = ["ess_from_log_weights", "log_mean_stderr"]


def ess_from_log_weights(log_w: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Effective sample size ``(sum w)^2 / sum w^2`` along ``dim``."""
    log_w = log_w.double()
    return torch.exp(2 * torch.logsumexp(log_w, dim=dim) - torch.logsumexp(2 * log_w, dim=dim))


def log_mean_stderr(log_w: torch.Tensor, dim: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    """``(logmeanexp(log w), delta-method standard error of it)`` along ``dim``."""
    log_w = log_w.double()
    m = log_w.shape[dim]
    log_mean = torch.logsumexp(log_w, dim=dim) - math.log(m)
    if m < 2:
        return log_mean, torch.full_like(log_mean, float("nan"))
    w = torch.exp(log_w - log_w.amax(dim=dim, keepdim=True))
    rel = w.std(dim=dim, unbiased=True) / w.mean(dim=dim)
    return log_mean, rel / math.sqrt(m)
