"""The tuned schedule: rounds of doubling K, each re-spaced from the previous round's log-weight increments.

Pilot rounds of AIS run along the estimator's own path with ``K_1 < K_2 < ... < K_R`` steps, each about
twice the one before and the last about ``K / 2`` (:func:`logzbench.schedules.tuned_round_ks`).  The first
round uses a ``linear`` (or ``sigmoid``) schedule; each round measures, at every step ``k``, the variance of
the log-weight increment over its chains,

    sigma_k^2 = Var_chains(log f_{beta_{k+1}}(x_k) - log f_{beta_k}(x_k)),

so that ``sigma(beta) ~ sqrt(sigma_k^2) / (beta_{k+1} - beta_k)`` is the local rate of the path's
*barrier* ``Lambda = integral of sigma d beta`` (the thermodynamic length of Syed et al. 2024, "Optimised
annealed sequential Monte Carlo samplers"; for AIS with independent increments ``Var(log w)`` is about
``sum_k sigma_k^2``, which a schedule of ``K`` steps minimises at ``Lambda^2 / K`` by giving each step an
equal share of ``Lambda``).  The next round's schedule, and after the last pilot round the final one, gives
each step an equal share of the measured barrier (:func:`logzbench.schedules.respace`: the cumulative
barrier inverted by monotone interpolation, with a floor so that a region with no measured barrier still
gets steps).

**The chains' lag.**  AIS chains make one transition (``sweeps_per_beta``) per step, so the increments of
one chain at consecutive steps are correlated, and ``Var(log w) = sum_k sigma_k^2 tau_k`` where ``tau_k``
is the integrated autocorrelation of the increments along the chain.  Where the kernel mixes slowly
(near a phase transition) ``tau_k`` is large and the steps there must be denser than ``sigma`` alone says.
Each round estimates the lag-1 correlation ``rho_k`` of consecutive increments of the same chain, smooths
it over neighbouring steps, clips it to ``[0, RHO_MAX]`` and takes the AR(1) integrated autocorrelation
``tau_k = (1 + rho_k) / (1 - rho_k)``; the steps are spaced by ``sigma_k sqrt(tau_k)`` (minimising
``sum_k delta_k^2 s_k^2 tau_k`` with ``sum delta_k = 1`` gives ``delta_k ~ 1 / (s_k sqrt(tau_k))``).  The
correlation is per transition of the kernel, which does not depend on the spacing, so it carries from one
round to the next.  The variances are the chains' own (unweighted): they are what the AIS estimate's
variance is made of, lagged distributions included; importance-weighting them to ``p_beta`` would be
noisy exactly where the chains lag.

**Unbiasedness.**  The pilot rounds draw from :func:`tuned_generator`, a stream derived from the seed and
independent of the run's own generator; the final schedule is a function of the pilot's draws only and is
fixed before the estimator's own run starts, which then uses it as a fixed schedule.  So the reported
round's ``Z-hat`` stays unbiased and its ``log Z-hat`` a stochastic lower bound.  The pilot rounds' sweeps
count in ``total_sweeps`` (:meth:`TuneResult.extras`, through
:meth:`~logzbench.estimators.context.EstimateContext.record_schedule`).

**Diagnostics** (:meth:`TuneResult.extras`, from the last pilot round): the barrier ``Lambda`` and
``G = (integral of sigma^2) / Lambda^2 >= 1`` (Cauchy-Schwarz; the factor of ``K`` that the equal-barrier
schedule saves over a linear one when increments are independent), both with and without the lag factor,
the observed inflation of ``Var(log w)`` over ``sum_k sigma_k^2``, and the share of the final schedule's
steps in each tenth of ``[0, 1]``.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np
import torch

from ..models.base import AnnealingPath
from ..schedules import TUNED_STARTS, from_array, linear, respace, sigmoid, tuned_round_ks
from ..utils import stream_generator
from . import ais as ais_kernel

__all__ = [
    "Profile",
    "TuneResult",
    "barrier",
    "decile_shares",
    "increment_profile",
    "lag_factor",
    "tune_rounds",
    "tuned_generator",
]

#: a fixed word mixed into the seed of the pilot rounds' stream (any other stream of the run differs)
_TUNED_STREAM = 0x7E4D_0B21
#: the largest lag-1 correlation of increments taken (tau at most 39): beyond it one pilot cannot tell
RHO_MAX = 0.95
#: every step's barrier density is at least this fraction of the mean (:func:`logzbench.schedules.respace`)
FLOOR = 0.05


def tuned_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The pilot rounds' generator: seeded from ``seed`` through a separate stream, so its draws are
    independent of the main run's generator (seeded by ``seed`` itself) and of the adaptive pilot's."""
    return stream_generator(seed, _TUNED_STREAM, device)


class Profile(NamedTuple):
    """One round's increments along its schedule ``betas`` (``K + 1``): ``var`` (``K``) the variance of each
    step's log-weight increment over the chains; ``rho`` (``K``) the smoothed, clipped lag-1 correlation of
    consecutive increments of a chain (:func:`lag_factor` makes ``tau`` of it); ``log_w_var`` the variance of
    the chains' summed increments (their log-weights less ``log Z_0``); ``sweeps`` transitions times chains."""

    betas: np.ndarray
    var: np.ndarray
    rho: np.ndarray
    log_w_var: float
    sweeps: int

    @property
    def tau(self) -> np.ndarray:
        return lag_factor(self.rho)

    def masses(self) -> np.ndarray:
        """Each step's share of the barrier, the lag included: ``sqrt(var_k tau_k)``."""
        return np.sqrt(self.var * self.tau)


def lag_factor(rho) -> np.ndarray:
    """``tau = (1 + rho) / (1 - rho)``: the integrated autocorrelation of an AR(1) sequence with lag-1
    correlation ``rho`` (clipped to ``[0, RHO_MAX]``; a negative correlation is taken as none)."""
    r = np.clip(np.asarray(rho, dtype=np.float64), 0.0, RHO_MAX)
    return (1.0 + r) / (1.0 - r)


def _smooth(x: np.ndarray, half: int) -> np.ndarray:
    """Moving average over ``2 half + 1`` neighbours (fewer at the ends)."""
    if half < 1 or x.size < 2:
        return x
    c = np.concatenate([[0.0], np.cumsum(x)])
    i = np.arange(x.size)
    lo, hi = np.maximum(i - half, 0), np.minimum(i + half + 1, x.size)
    return (c[hi] - c[lo]) / (hi - lo)


def increment_profile(
    path: AnnealingPath,
    betas,
    n_chains: int,
    generator: torch.Generator,
    *,
    groups: int = 1,
    sweeps_per_beta: int = 1,
) -> Profile:
    """Run AIS over ``betas`` (``groups`` populations of ``n_chains`` chains; the path's state holds
    ``groups * n_chains``, group-major) and measure its increments: per step the variance over each group's
    chains and the covariance with the next step's increment of the same chain (both averaged over groups).
    Uses :func:`logzbench.estimators.ais.step` (its fused reweight-and-move where the path has one), with
    the log-weights reset at each step so that the step's increment is read exactly."""
    b = from_array(betas)
    K, g, n = len(b) - 1, int(groups), int(n_chains)
    if n < 2:
        raise ValueError(f"the tuned schedule's pilot needs at least 2 chains (a variance), got {n}")
    x = path.sample_initial(g * n, generator)
    zero = torch.zeros(g * n, dtype=torch.float64, device=generator.device)
    var_t, cov_t = [], []  # on the device: read back once, after the loop
    total = torch.zeros((g, n), dtype=torch.float64, device=generator.device)
    prev = None
    for k in range(K):
        st = ais_kernel.step(
            path, ais_kernel.AISState(x, zero), float(b[k]), float(b[k + 1]), generator, k + 1 < K, sweeps_per_beta
        )
        x, inc = st.x, st.log_w.reshape(g, n)
        c = inc - inc.mean(-1, keepdim=True)
        var_t.append(((c * c).sum(-1) / (n - 1)).mean())
        if prev is not None:
            cov_t.append(((prev * c).sum(-1) / (n - 1)).mean())
        prev, total = c, total + inc
    ais_kernel.check_finite(total.reshape(-1), "tuned pilot log-weights")
    var = torch.stack(var_t).cpu().numpy()
    cov = torch.stack(cov_t).cpu().numpy() if cov_t else np.zeros(0)
    sd = np.sqrt(var)
    with np.errstate(divide="ignore", invalid="ignore"):
        pair = np.where(sd[:-1] * sd[1:] > 0, cov / (sd[:-1] * sd[1:]), 0.0)
    # step k's correlation: the mean of its pairs with the steps before and after, smoothed over neighbours
    rho = np.zeros(K)
    if K > 1:
        s = np.zeros(K)
        w = np.zeros(K)
        s[:-1] += pair
        s[1:] += pair
        w[:-1] += 1
        w[1:] += 1
        rho = _smooth(s / w, max(1, K // 32))
    log_w_var = float(((total - total.mean(-1, keepdim=True)) ** 2).sum(-1).div(n - 1).mean())
    sweeps = max(K - 1, 0) * int(sweeps_per_beta) * n * g
    return Profile(b, var, np.clip(rho, -1.0, 1.0), log_w_var, sweeps)


def barrier(betas, var, tau=None) -> tuple[float, float]:
    """``(Lambda, G)`` of a schedule's step variances: ``Lambda = sum_k sqrt(var_k tau_k)`` (the integral of
    ``sigma`` with ``sigma = sqrt(var_k tau_k) / delta_k`` on step ``k``) and
    ``G = (sum_k var_k tau_k / delta_k) / Lambda^2`` (the integral of ``sigma^2`` over ``Lambda^2``), at least 1
    by Cauchy-Schwarz since the steps ``delta_k`` sum to 1; ``tau`` defaults to 1 (no lag).  Steps of zero
    length are left out; ``G`` is ``nan`` where ``Lambda`` is 0."""
    b = from_array(betas)
    d = np.diff(b)
    v = np.asarray(var, dtype=np.float64) * (1.0 if tau is None else np.asarray(tau, dtype=np.float64))
    keep = d > 0
    lam = float(np.sqrt(v[keep]).sum())
    if not lam > 0:
        return lam, float("nan")
    return lam, float((v[keep] / d[keep]).sum() / lam**2)


def decile_shares(betas) -> list[float]:
    """The share of a schedule's steps whose midpoint lies in each tenth of ``[0, 1]`` (10 numbers, sum 1)."""
    b = from_array(betas)
    mid = 0.5 * (b[1:] + b[:-1])
    counts = np.histogram(mid, bins=np.linspace(0.0, 1.0, 11))[0]
    return (counts / max(mid.size, 1)).tolist()


class TuneResult(NamedTuple):
    """The tuned schedule and how it was found.

    ``betas``: the final round's schedule (``K + 1``); ``profiles``: each pilot round's :class:`Profile`;
    ``sweeps``: the pilot rounds' transitions times chains (counted in the main result's ``total_sweeps``);
    ``n_chains``: chains per pilot round; ``start``: the first round's schedule; ``seconds``: the pilot's time."""

    betas: np.ndarray
    profiles: tuple
    sweeps: int
    n_chains: int
    start: str
    seconds: float

    def extras(self) -> dict[str, Any]:
        """What a result records (``extra``): the pilot's sweeps (``pilot_sweeps``, also added to
        ``total_sweeps``), its rounds' K (``tuned_round_K``: the pilot rounds', then the final K) and sweeps
        (``tuned_round_sweeps``, the pilot rounds'), the barrier ``tuned_barrier`` and ``tuned_G`` without
        the lag factor and ``tuned_barrier_lagged``, ``tuned_G_lagged`` with it, ``tuned_lag_inflation``
        (the last pilot round's observed ``Var(log w) / sum_k sigma_k^2``; 1 where increments are
        independent) beside ``tuned_lag_inflation_ar1`` (``sum_k sigma_k^2 tau_k / sum_k sigma_k^2``, what the
        lag-1 factor accounts for: an observed inflation far above it, growing with K, is a lag of longer
        range -- chains held in modes -- that no spacing of the steps removes), each pilot round's barrier
        (``tuned_round_barrier``) and the final schedule's share of steps per tenth of beta
        (``tuned_beta_deciles``)."""
        last = self.profiles[-1]
        lam, g = barrier(last.betas, last.var)
        lam_lag, g_lag = barrier(last.betas, last.var, last.tau)
        s = float(last.var.sum())
        return {
            "pilot_sweeps": int(self.sweeps),
            "pilot_K": len(last.betas) - 1,
            "pilot_seconds": float(self.seconds),
            "tuned_rounds": len(self.profiles) + 1,
            "tuned_round_K": [len(p.betas) - 1 for p in self.profiles] + [len(self.betas) - 1],
            "tuned_round_sweeps": [int(p.sweeps) for p in self.profiles],
            "tuned_round_barrier": [barrier(p.betas, p.var)[0] for p in self.profiles],
            "tuned_start": self.start,
            "tuned_barrier": lam,
            "tuned_G": g,
            "tuned_barrier_lagged": lam_lag,
            "tuned_G_lagged": g_lag,
            "tuned_lag_inflation": float(last.log_w_var / s) if s > 0 else float("nan"),
            "tuned_lag_inflation_ar1": float((last.var * last.tau).sum() / s) if s > 0 else float("nan"),
            "tuned_beta_deciles": decile_shares(self.betas),
        }


def tune_rounds(
    path: AnnealingPath,
    K: int,
    n_chains: int,
    generator: torch.Generator,
    *,
    rounds: int | None = None,
    start: str = "linear",
    sweeps_per_beta: int = 1,
    groups: int = 1,
) -> TuneResult:
    """Run the pilot rounds along ``path`` and return the final round's schedule of ``K`` steps.

    Parameters
    ----------
    path : AnnealingPath
        The estimator's own path (the same initial distribution and kernel as the main run).
    K : int
        Steps of the final round (the estimator's own run); the pilot rounds have
        :func:`~logzbench.schedules.tuned_round_ks` steps (``rounds`` of them; default as many as keep the
        first at 8 steps or more).
    n_chains : int
        Chains per pilot round (per group), at least 2.
    generator : torch.Generator
        The pilot's own stream (:func:`tuned_generator`), never the main run's.
    start : {"linear", "sigmoid"}
        The first round's schedule.
    sweeps_per_beta, groups : int
        Transitions per temperature (as the main run); independent populations sharing one schedule (their
        variances averaged).
    """
    if start not in TUNED_STARTS:
        raise ValueError(f"the tuned schedule starts from one of {TUNED_STARTS}, not {start!r}")
    t0 = time.perf_counter()
    ks = tuned_round_ks(K, rounds)
    make = linear if start == "linear" else sigmoid
    betas = make(ks[0])
    profiles = []
    for i, k in enumerate(ks):
        if i:
            betas = respace(profiles[-1].betas, profiles[-1].masses(), k, FLOOR)
        profiles.append(
            increment_profile(path, betas, n_chains, generator, groups=groups, sweeps_per_beta=sweeps_per_beta)
        )
    final = respace(profiles[-1].betas, profiles[-1].masses(), int(K), FLOOR)
    return TuneResult(
        final,
        tuple(profiles),
        int(sum(p.sweeps for p in profiles)),
        int(n_chains) * int(groups),
        start,
        time.perf_counter() - t0,
    )
