"""Statistics of importance weights, shared by the models and the estimators.

Both functions take log-weights ``log w`` (any float tensor; computed in float64) and reduce
along one dimension:

* :func:`log_mean_stderr`: ``log mean(w)`` and its delta-method standard error
  ``sd(w) / (sqrt(M) mean(w))``;
* :func:`ess_from_log_weights`: the effective sample size ``(sum w)^2 / sum w^2``;
* :func:`pareto_khat`: the Pareto k-hat tail diagnostic of PSIS (Vehtari et al. 2024), from
  ``arviz-stats``: above 0.7 the weights' tail is too heavy for the standard error to be trusted.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch

__all__ = ["ess_from_log_weights", "log_mean_stderr", "pareto_khat"]


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


#: fewest weights with a k-hat: PSIS fits the largest ``M = S / 5`` weights (``3 sqrt(S)`` from
#: ``S > 225``), and ``arviz-stats`` needs a tail of at least 5
KHAT_MIN_WEIGHTS = 25


def pareto_khat(log_w, dim: int = -1):
    """Pareto k-hat (PSIS; Vehtari, Simpson, Gelman, Yao & Gabry 2024) of the weights ``exp(log w)``
    along ``dim``: the shape of a generalized Pareto distribution fitted to their largest values.

    ``k < 0.5``: the weights have a finite variance and the delta-method standard error holds;
    ``0.5 <= k < 0.7``: still usable; ``k >= 0.7``: the tail is so heavy that the standard error
    (and the ESS) understate the uncertainty; ``k >= 1``: not even the mean is finite.

    Computed with ``arviz_stats.base.array_stats.psislw`` (PSIS of the log-weights, relative
    efficiency ``r_eff = 1``, i.e. the weights taken as independent; tail length
    ``min(S / 5, 3 sqrt(S))`` for ``S`` weights; the fit's weak prior pulls k-hat towards 0.5
    by 10 pseudo-observations).  ``psislw`` takes log-*ratios* whose negatives are the
    log-weights (as in PSIS-LOO), hence ``-log_w`` below.

    Parameters
    ----------
    log_w : torch.Tensor or array-like
        Log-weights (any scale: only their differences matter).
    dim : int
        The weights' dimension; the others are batch dimensions.

    Returns
    -------
    float or numpy.ndarray
        A float for 1-D input, else an array of the batch shape.  NaN where there are fewer
        than :data:`KHAT_MIN_WEIGHTS` weights, any is NaN or infinite, or the tail's values are
        all equal.
    """
    from arviz_stats.base import array_stats  # lazy: importing arviz-stats takes about a second

    if isinstance(log_w, torch.Tensor):
        log_w = log_w.detach().double().cpu().numpy()
    a = np.moveaxis(np.asarray(log_w, dtype=np.float64), dim, -1)
    batch = a.shape[:-1]
    rows = a.reshape(int(np.prod(batch)), a.shape[-1])
    out = np.full(rows.shape[0], np.nan)
    if rows.shape[1] >= KHAT_MIN_WEIGHTS:
        for i, row in enumerate(rows):
            if not np.isfinite(row).all():
                continue
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                try:
                    out[i] = float(array_stats.psislw(-row, r_eff=1)[1])
                except ValueError:  # all tail values equal (e.g. constant weights)
                    pass
    return float(out[0]) if not batch else out.reshape(batch)
