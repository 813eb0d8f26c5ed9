"""Annealed discriminance sampling, sequential binary version (Liu et al. 2015, Alg. 1).

It recycles one AIS run: after the AIS update at temperature ``k`` the population
``(x_k, W_k)`` is an importance-weighted sample of ``p_k``.  For each neighbouring pair
``(p_k, p_{k+1})`` the ratio ``r_{k+1} = Z_{k+1} / Z_k`` is estimated by weighted discriminance
sampling (:func:`logzbench.estimators.discriminance.discriminance`, the paper's Eq. (9)) from

* ``l0 = log f_{k+1}(x_k) - log f_k(x_k)`` at the ``p_k`` population (AIS's own increment), and
* ``l1 = log f_{k+1}(x_{k+1}) - log f_k(x_{k+1})`` at the ``p_{k+1}`` population (one extra
  log-density ratio per step, no extra sampling),

and ``log Ẑ = log Z_0 + sum_k log r̂_k`` (Eq. (7)).  Each ratio is solved as soon as both
populations exist; the cost over AIS is one ratio evaluation and one one-dimensional root per
temperature.  The AIS estimate from the same run is reported beside it in ``extra``.

Standard error: the ratios share chains, so their errors are correlated and adding the
per-ratio variances understates the error (by about half at K = 64 on a small RBM).  When the
per-step values fit in memory (``K * n_chains <= JACKKNIFE_MAX``) the error is a delete-one-group
jackknife over ``N_GROUPS`` groups of chains, which re-solves every ratio without each group;
otherwise the independent-ratio figure is reported and ``extra["stderr_method"]`` says so.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..models.base import AnnealingPath
from ..schedules import from_array
from . import ais as ais_kernel
from ._common import progress_range, timer
from .discriminance import discriminance
from .result import EstimateResult, check_finite, summarize_log_weights

#: Largest ``K * n_chains`` for which the per-step values are kept for the jackknife.
JACKKNIFE_MAX = 1 << 22
#: Groups of chains in the jackknife.
N_GROUPS = 10


def _jackknife_se(steps: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], n_chains: int) -> float:
    """Delete-one-group jackknife standard error of ``sum_k log r̂_k`` over groups of chains."""
    groups = np.array_split(np.arange(n_chains), min(N_GROUPS, n_chains))
    estimates = []
    for g in groups:
        keep = np.ones(n_chains, dtype=bool)
        keep[g] = False
        estimates.append(sum(discriminance(l0[keep], l1[keep], w0[keep], w1[keep]).log_z
                             for l0, l1, w0, w1 in steps))
    est = np.asarray(estimates)
    G = len(est)
    return float(math.sqrt((G - 1) / G * np.sum((est - est.mean()) ** 2)))


def ads(path: AnnealingPath, betas, n_chains: int, generator: torch.Generator, *, n_bootstrap: int = 1000,
        progress: bool = False, settings: dict | None = None) -> EstimateResult:
    """Sequential binary annealed discriminance sampling of ``log Z`` on one AIS run.

    Parameters
    ----------
    path : AnnealingPath
    betas : array-like, shape (K + 1,)
    n_chains : int
        AIS chains ``n`` (the population at every temperature).
    generator : torch.Generator

    Returns
    -------
    EstimateResult
        ``estimator="ads"``; ``extra`` holds the AIS estimate of the same run, the smallest
        per-temperature overlap ``gamma`` and effective population size.
    """
    betas = from_array(betas)
    K = len(betas) - 1
    log_z, var = path.log_z0(), 0.0
    gammas, n_effs = [], []
    keep = K * n_chains <= JACKKNIFE_MAX and n_chains >= 2 * N_GROUPS
    steps = []
    with timer(generator.device) as t:
        state = ais_kernel.init(path, n_chains, generator)
        for k in progress_range(K, progress, "ADS"):
            b0, b1 = float(betas[k]), float(betas[k + 1])
            log_w0 = state.log_w
            l0 = path.log_f_ratio(state.x, b0, b1)  # at the p_k population
            log_w1 = log_w0 + l0
            x1 = path.transition(state.x, b1, generator)  # the p_{k+1} population (AIS's next state)
            l1 = path.log_f_ratio(x1, b0, b1)
            step = (l0.cpu().numpy(), l1.cpu().numpy(), log_w0.cpu().numpy(), log_w1.cpu().numpy())
            fit = discriminance(*step)
            if keep:
                steps.append(step)
            log_z += fit.log_z
            var += fit.stderr**2
            gammas.append(fit.gamma)
            n_effs.append(fit.n_eff)
            state = ais_kernel.AISState(x1, log_w1)
        se = _jackknife_se(steps, n_chains) if keep else math.sqrt(var)
    check_finite(state.log_w, "ADS (AIS) log-weights")
    s = summarize_log_weights(state.log_w, n_bootstrap=n_bootstrap, seed=generator.initial_seed(),
                              what="AIS log-weights")
    return EstimateResult(
        estimator="ads", log_z=float(log_z), log_z_stderr=se, log_z_ci=(log_z - 1.96 * se, log_z + 1.96 * se),
        ess=float(np.min(n_effs)), n_chains=n_chains, seconds=t[0], n_sweeps=K, total_sweeps=K * n_chains,
        settings={"K": K, "chains": n_chains, "version": "sequential-binary", **(settings or {})},
        log_weights=state.log_w.cpu().numpy(),
        extra={"ais_log_z": s.log_mean, "ais_log_z_stderr": s.stderr, "min_gamma": float(np.min(gammas)),
               "min_population_ess": float(np.min(n_effs)),
               "stderr_method": f"jackknife over {N_GROUPS} groups of chains" if keep
               else "independent ratios (understates the error)",
               "stderr_independent_ratios": math.sqrt(var)},
    )
