"""Annealed discriminance sampling (Liu et al. 2015): sequential binary (Alg. 1) and multinomial (Alg. 2).

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


#: Largest ``(K + 1)^2 * n_chains`` the multinomial version holds in memory (float64).
MULTINOMIAL_MAX = 1 << 24


def _multinomial_fit(A: np.ndarray, log_w: np.ndarray, log_z0: float, x0: np.ndarray | None = None) -> np.ndarray:
    """Maximise the weighted multinomial conditional likelihood (Alg. 2) over ``log c_1..log c_K``.

    ``A[k, i, l] = log f_l(x_k^i)``, ``log_w[k, i]`` the AIS log-weights; ``log c_0 = log Z_0`` is fixed.
    The objective is convex in ``log c``; it is minimised with L-BFGS and its exact gradient.
    """
    from scipy.optimize import minimize
    from scipy.special import logsumexp, softmax

    K1 = A.shape[0]
    wt = softmax(log_w, axis=1)  # normalised weights per temperature

    def neg_ll(c_free):
        c = np.concatenate([[log_z0], c_free])
        z = A - c  # (K+1, n, K+1)
        lse = logsumexp(z, axis=2)
        own = z[np.arange(K1), :, np.arange(K1)]  # (K+1, n): log f_k(x_k) - c_k
        val = -np.sum(wt * (own - lse))
        post = np.exp(z - lse[..., None])  # p(y = l | x_k^i)
        grad = wt.sum(axis=1) - np.einsum("ki,kil->l", wt, post)  # d(-LL)/dc_l
        return val, grad[1:]

    start = x0 if x0 is not None else np.full(K1 - 1, log_z0)
    res = minimize(neg_ll, start, jac=True, method="L-BFGS-B", options={"maxiter": 5000, "gtol": 1e-10})
    return np.concatenate([[log_z0], res.x])


def ads_multinomial(path: AnnealingPath, betas, n_chains: int, generator: torch.Generator, *,
                    n_bootstrap: int = 1000, progress: bool = False, settings: dict | None = None) -> EstimateResult:
    """Multinomial annealed discriminance sampling (Alg. 2) on one AIS run.

    Every population ``(x_k, W_k)`` is classified against all temperatures at once, which
    needs ``log f_l(x_k)`` for every pair ``(k, l)``: ``(K + 1)^2`` log-density evaluations of the
    population, held in memory, so ``(K + 1)^2 * n_chains`` is limited to ``MULTINOMIAL_MAX``
    (use the sequential binary :func:`ads` beyond that; the paper found the two almost
    identical).  Standard error: a jackknife over ``N_GROUPS`` groups of chains.
    """
    betas = from_array(betas)
    K = len(betas) - 1
    if (K + 1) ** 2 * n_chains > MULTINOMIAL_MAX:
        raise ValueError(f"multinomial ADS with K = {K} and {n_chains} chains needs {(K + 1) ** 2 * n_chains:,} "
                         f"log-densities in memory (limit {MULTINOMIAL_MAX:,}); use the sequential binary 'ads'")
    A = np.empty((K + 1, n_chains, K + 1))
    log_w = np.empty((K + 1, n_chains))
    with timer(generator.device) as t:
        state = ais_kernel.init(path, n_chains, generator)
        for k in progress_range(K + 1, progress, "ADS (multinomial)"):
            A[k] = torch.stack([path.log_f(state.x, float(b)) for b in betas], dim=1).cpu().numpy()
            log_w[k] = (state.log_w - path.log_z0()).cpu().numpy()
            if k < K:
                state = ais_kernel.step(path, state, float(betas[k]), float(betas[k + 1]), generator)
        check_finite(torch.as_tensor(A), "multinomial ADS log-densities")
        log_z0 = path.log_z0()
        c = _multinomial_fit(A, log_w, log_z0)
        groups = np.array_split(np.arange(n_chains), min(N_GROUPS, n_chains))
        jk = []
        for g in groups:
            keep = np.ones(n_chains, dtype=bool)
            keep[g] = False
            jk.append(_multinomial_fit(A[:, keep], log_w[:, keep], log_z0, x0=c[1:])[-1])
        jk = np.asarray(jk)
        se = float(math.sqrt((len(jk) - 1) / len(jk) * np.sum((jk - jk.mean()) ** 2))) if len(jk) > 1 else float("nan")
    log_z = float(c[-1])
    s = summarize_log_weights(state.log_w, n_bootstrap=n_bootstrap, seed=generator.initial_seed(),
                              what="AIS log-weights")
    return EstimateResult(
        estimator="ads-multinomial", log_z=log_z, log_z_stderr=se, log_z_ci=(log_z - 1.96 * se, log_z + 1.96 * se),
        ess=s.ess, n_chains=n_chains, seconds=t[0], n_sweeps=K, total_sweeps=K * n_chains,
        settings={"K": K, "chains": n_chains, "version": "multinomial", **(settings or {})},
        log_weights=state.log_w.cpu().numpy(),
        extra={"ais_log_z": s.log_mean, "ais_log_z_stderr": s.stderr, "log_z_path": c.tolist(),
               "stderr_method": f"jackknife over {N_GROUPS} groups of chains"},
    )
