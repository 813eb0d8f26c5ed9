"""Simple importance sampling (IS) of ``Z`` from a normalised reference ``p_0`` (Liu et al. 2015, Sec. 3).

With ``l(x) = log f(x) - log p_0(x)`` evaluated at ``x_i ~ p_0``,

    Ẑ_is = (1/n) sum_i exp(l(x_i)),     log Ẑ_is = logmeanexp(l).

``Ẑ_is`` is unbiased for ``Z``, with relative MSE ``chi^2(p || p_0) / n``, which is infinite when
``p_0`` is much more peaked than ``p``; because the weights are then heavy tailed, ``log Ẑ_is``
typically *under*-estimates ``log Z`` (a stochastic lower bound).

Everything is computed in float64 log space.  The inputs are validated by :func:`as_log_ratios`,
which the other IS-family estimators (:mod:`.reverse_importance`, :mod:`.is_combinations`) share.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from scipy.special import logsumexp

from ..errors import EstimatorError
from .result import EstimateResult, summarize_log_weights


def as_log_ratios(values, what: str) -> np.ndarray:
    """Validate ``l = log f - log p_0`` values as a 1-D float64 array.

    Parameters
    ----------
    values : array-like or torch.Tensor
        Log-ratios (any shape; flattened).
    what : str
        Name used in error messages, e.g. ``"importance sampling: l0"``.

    Raises
    ------
    ValueError
        When ``values`` is empty.
    EstimatorError
        When any value is NaN or +-inf.
    """
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().double().numpy()
    arr = np.asarray(values, dtype=np.float64).ravel()
    if arr.size == 0:
        raise ValueError(f"{what}: no samples (empty input)")
    bad = ~np.isfinite(arr)
    if bad.any():
        n_nan = int(np.isnan(arr).sum())
        raise EstimatorError(
            f"{what}: {int(bad.sum())} of {arr.size} values of log f - log p_0 are not finite "
            f"({n_nan} NaN, {int(bad.sum()) - n_nan} inf); the model overflows or the input is invalid."
        )
    return arr


def log_mean_exp(lw: np.ndarray, axis: int = -1):
    """``log(mean(exp(lw)))`` along ``axis``, without overflow."""
    return logsumexp(lw, axis=axis) - np.log(np.shape(lw)[axis])


def relative_variance(lw: np.ndarray, axis: int = -1):
    """``var̂(w) / mean(w)^2`` of the weights ``w = exp(lw)`` along ``axis`` (unbiased ``var̂``).

    The weights are rescaled by their maximum first, so nothing overflows; NaN for a single
    sample.  This is the paper's ``v̂_is`` (Sec. 6, "Setting") when ``lw`` are IS log-weights
    (and ``v̂_ris`` for ``lw = -l1``); ``v̂ / n`` is the delta-method variance of ``log Ẑ``.
    """
    if lw.shape[axis] < 2:
        return np.full(np.delete(lw.shape, axis), np.nan)[()]
    w = np.exp(lw - np.max(lw, axis=axis, keepdims=True))
    return np.var(w, axis=axis, ddof=1) / np.mean(w, axis=axis) ** 2


def importance_sampling(l0, *, n_bootstrap: int = 1000, seed: int = 0, settings: dict | None = None) -> EstimateResult:
    """IS estimate of ``log Z`` from log-ratios at samples of the reference.

    Parameters
    ----------
    l0 : array-like, shape (n0,)
        ``log f(x) - log p_0(x)`` at ``x ~ p_0`` (``p_0`` normalised).
    n_bootstrap : int
        Bootstrap replicates for the percentile interval (0: no interval, NaN).
    seed : int
        Seed of the bootstrap.
    settings : dict, optional
        Merged into ``result.settings`` (which always holds ``n0`` and ``n1 = 0``).

    Returns
    -------
    EstimateResult
        ``estimator = "is"``; ``log_z = logmeanexp(l0)``, delta-method ``log_z_stderr``,
        bootstrap ``log_z_ci``, ``ess`` and ``khat`` of the weights ``exp(l0)``; ``log_weights = l0``;
        ``extra["v_is"]`` is the paper's variance estimate ``var̂(w) / Ẑ^2``.
    """
    t0 = time.perf_counter()
    l0 = as_log_ratios(l0, "importance sampling: l0")
    s = summarize_log_weights(l0, n_bootstrap=n_bootstrap, seed=seed, what="importance sampling: l0")
    v_is = float(relative_variance(l0))
    seconds = time.perf_counter() - t0
    return EstimateResult(
        estimator="is",
        **s.log_z_fields(),
        n_chains=int(l0.size),
        seconds=seconds,
        settings={"n0": int(l0.size), "n1": 0, "n_bootstrap": n_bootstrap, "seed": seed, **(settings or {})},
        log_weights=l0,
        extra={"v_is": v_is},
    )
