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
temperature.  The AIS estimate from the same run is reported beside it in ``extra``, with the
Pareto k-hat of its log-weights (``extra["ais_khat"]``); the result's own ``khat`` is NaN (the
estimate is a sum of discriminance fits, not a weighted mean).

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
from ..schedules import ADAPTIVE, TUNED, from_array
from . import ais as ais_kernel
from ._common import progress_range, timer
from .context import chain_bytes
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
        estimates.append(sum(discriminance(l0[keep], l1[keep], w0[keep], w1[keep]).log_z for l0, l1, w0, w1 in steps))
    return _delete_one_se(estimates)


def _delete_one_se(estimates) -> float:
    """The jackknife standard error from the delete-one-group estimates (NaN from fewer than two)."""
    est = np.asarray(estimates)
    G = len(est)
    return float(math.sqrt((G - 1) / G * np.sum((est - est.mean()) ** 2))) if G > 1 else float("nan")


#: The ``version`` setting of each ADS.
_VERSION = {"ads": "sequential-binary", "ads-multinomial": "multinomial"}


def _result(
    estimator: str,
    log_z: float,
    se: float,
    ess: float | None,
    state,
    generator: torch.Generator,
    n_bootstrap: int,
    K: int,
    sweeps_per_beta: int,
    seconds: float,
    settings: dict | None,
    extra: dict,
) -> EstimateResult:
    """Either ADS's result: its ``log Z`` and standard error, with the AIS estimate of the same run
    (``ais_*`` in ``extra``; its effective sample size where ``ess`` is ``None``)."""
    n_chains = int(state.log_w.shape[0])
    s = summarize_log_weights(
        state.log_w, n_bootstrap=n_bootstrap, seed=generator.initial_seed(), what="AIS log-weights"
    )
    return EstimateResult(
        estimator=estimator,
        log_z=log_z,
        log_z_stderr=se,
        log_z_ci=(log_z - 1.96 * se, log_z + 1.96 * se),
        ess=s.ess if ess is None else ess,
        n_chains=n_chains,
        seconds=seconds,
        n_sweeps=K * int(sweeps_per_beta),
        total_sweeps=K * int(sweeps_per_beta) * n_chains,
        settings={"K": K, "chains": n_chains, "version": _VERSION[estimator], **(settings or {})},
        log_weights=state.log_w.cpu().numpy(),
        extra={"ais_log_z": s.log_mean, "ais_log_z_stderr": s.stderr, "ais_khat": s.khat, **extra},
    )


def ads(
    path: AnnealingPath,
    betas,
    n_chains: int,
    generator: torch.Generator,
    *,
    n_bootstrap: int = 1000,
    progress: bool = False,
    settings: dict | None = None,
    sweeps_per_beta: int = 1,
) -> EstimateResult:
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
            x1 = state.x
            for _ in range(int(sweeps_per_beta)):  # the p_{k+1} population (AIS's next state)
                x1 = path.transition(x1, b1, generator)
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
    extra = {
        "min_gamma": float(np.min(gammas)),
        "min_population_ess": float(np.min(n_effs)),
        "stderr_method": f"jackknife over {N_GROUPS} groups of chains"
        if keep
        else "independent ratios (understates the error)",
        "stderr_independent_ratios": math.sqrt(var),
    }
    n_eff = float(np.min(n_effs))
    return _result(
        "ads", float(log_z), se, n_eff, state, generator, n_bootstrap, K, sweeps_per_beta, t[0], settings, extra
    )


#: Default memory budget of the multinomial version's ``(K + 1)^2 * n_chains`` float64
#: log-densities on the CPU (on CUDA: 60 % of the free device memory).
MULTINOMIAL_CPU_BYTES = 4 << 30
#: Temporary memory per chunk of the multinomial objective.
_CHUNK_BYTES = 64 << 20


def _multinomial_budget(device: torch.device) -> int:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(0.6 * free)
    return MULTINOMIAL_CPU_BYTES


def _multinomial_fit(A: torch.Tensor, log_w: torch.Tensor, log_z0: float, x0: np.ndarray | None = None) -> np.ndarray:
    """Maximise the weighted multinomial conditional likelihood (Alg. 2) over ``log c_1..log c_K``.

    ``A[k, i, l] = log f_l(x_k^i)`` (float64, on the run's device), ``log_w[k, i]`` the AIS
    log-weights (``-inf`` drops a chain); ``log c_0 = log Z_0`` is fixed.  The objective is convex
    in ``log c``; it is minimised with L-BFGS and its exact gradient, evaluated on the device in
    chunks of temperatures so the temporaries stay within ``_CHUNK_BYTES``.
    """
    from scipy.optimize import minimize

    K1, n = A.shape[0], A.shape[1]
    wt = torch.softmax(log_w, dim=1)  # normalised weights per temperature
    rows = max(1, _CHUNK_BYTES // (8 * n * K1))
    idx = torch.arange(K1, device=A.device)

    def neg_ll(c_free):
        c = torch.as_tensor(np.concatenate([[log_z0], c_free]), dtype=torch.float64, device=A.device)
        val = torch.zeros((), dtype=torch.float64, device=A.device)
        grad = wt.sum(dim=1)  # d(-LL)/dc_l = sum_i W_l^i - sum_k sum_i W_k^i p(y = l | x_k^i)
        for k0 in range(0, K1, rows):
            k1 = min(K1, k0 + rows)
            z = A[k0:k1] - c  # (r, n, K+1)
            lse = torch.logsumexp(z, dim=2)
            own = z[idx[: k1 - k0], :, idx[k0:k1]]  # (r, n): log f_k(x_k) - c_k
            w = wt[k0:k1]
            val = val - (w * (own - lse)).sum()
            grad = grad - torch.einsum("ki,kil->l", w, torch.exp(z - lse[..., None]))
        return float(val), grad[1:].cpu().numpy()

    start = x0 if x0 is not None else np.full(K1 - 1, log_z0)
    res = minimize(neg_ll, start, jac=True, method="L-BFGS-B", options={"maxiter": 5000, "gtol": 1e-10})
    return np.concatenate([[log_z0], res.x])


def ads_multinomial(
    path: AnnealingPath,
    betas,
    n_chains: int,
    generator: torch.Generator,
    *,
    n_bootstrap: int = 1000,
    progress: bool = False,
    settings: dict | None = None,
    max_bytes: int | None = None,
    sweeps_per_beta: int = 1,
) -> EstimateResult:
    """Multinomial annealed discriminance sampling (Alg. 2) on one AIS run.

    Every population ``(x_k, W_k)`` is classified against all temperatures at once, which
    needs ``log f_l(x_k)`` for every pair ``(k, l)``: ``(K + 1)^2 * n_chains`` float64
    log-densities, held on the run's device (8.4 GB for the paper's 2^10 temperatures and 1,000
    chains: a GPU).  ``max_bytes`` bounds them (default :data:`MULTINOMIAL_CPU_BYTES` on the CPU,
    60 % of the free memory on CUDA); beyond it the run is refused before sampling (use the
    sequential binary :func:`ads`; the paper found the two almost identical).  Standard error:
    a delete-one-group jackknife over ``N_GROUPS`` groups of chains (the group's weights are set
    to zero, so nothing is copied).
    """
    betas = from_array(betas)
    K = len(betas) - 1
    dev = generator.device
    need = 8 * (K + 1) ** 2 * n_chains
    budget = _multinomial_budget(dev) if max_bytes is None else int(max_bytes)
    if need > budget:
        raise ValueError(
            f"multinomial ADS with K = {K} and {n_chains} chains needs {need / 2**30:.2f} GiB for "
            f"(K+1)^2 x chains log-densities on {dev} (budget {budget / 2**30:.2f} GiB); use the "
            f"sequential binary 'ads', fewer temperatures or chains, or a GPU"
        )
    A = torch.empty((K + 1, n_chains, K + 1), dtype=torch.float64, device=dev)
    log_w = torch.empty((K + 1, n_chains), dtype=torch.float64, device=dev)
    with timer(dev) as t:
        state = ais_kernel.init(path, n_chains, generator)
        for k in progress_range(K + 1, progress, "ADS (multinomial)"):
            for j, b in enumerate(betas):
                A[k, :, j] = path.log_f(state.x, float(b))
            log_w[k] = state.log_w - path.log_z0()
            if k < K:
                state = ais_kernel.step(
                    path, state, float(betas[k]), float(betas[k + 1]), generator, n_moves=sweeps_per_beta
                )
        check_finite(A, "multinomial ADS log-densities")
        log_z0 = path.log_z0()
        c = _multinomial_fit(A, log_w, log_z0)
        groups = np.array_split(np.arange(n_chains), min(N_GROUPS, n_chains))
        jk = []
        for g in groups:
            lw = log_w.clone()
            lw[:, torch.as_tensor(g, device=dev)] = -math.inf
            jk.append(_multinomial_fit(A, lw, log_z0, x0=c[1:])[-1])
        se = _delete_one_se(jk)
    extra = {"log_z_path": c.tolist(), "stderr_method": f"jackknife over {N_GROUPS} groups of chains"}
    log_z = float(c[-1])
    return _result(
        "ads-multinomial", log_z, se, None, state, generator, n_bootstrap, K, sweeps_per_beta, t[0], settings, extra
    )


def peak_bytes(ctx) -> tuple[int, str]:
    """The context's memory hook: the multinomial variant keeps ``(K+1)^2 x chains`` log-densities (its
    K is known before the run unless the schedule is adaptive; a tuned schedule's is ``K``)."""
    o = ctx.options
    if ctx.name != "ads-multinomial" or o.schedule == ADAPTIVE:
        return chain_bytes(ctx)
    K = int(o.K) if o.schedule == TUNED and o.K is not None else len(ctx.betas()) - 1
    return chain_bytes(ctx, o.chains, f"chains = {o.chains}, K = {K}", extra=8 * (K + 1) ** 2 * o.chains)


def estimate(ctx) -> EstimateResult:
    """Registry entries ``ads`` (Alg. 1) and ``ads-multinomial`` (Alg. 2) on one AIS run."""
    return ctx.run_annealed(ads_multinomial if ctx.name == "ads-multinomial" else ads)
