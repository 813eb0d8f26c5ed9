"""The adaptive schedule: an independent pilot run chooses the inverse temperatures.

A pilot population of ``pilot_chains`` chains anneals along the estimator's own path.  At each
inverse temperature ``beta`` it chooses the next one, ``beta'``, with a root finder
(:func:`scipy.optimize.brentq` unless another is given) so that the incremental weights
``w_i = f_{beta'}(x_i) / f_beta(x_i)`` keep a target *conditional* effective sample size (Zhou,
Johansen & Aston 2016, the criterion of blackjax's adaptive tempered SMC):

    CESS(beta') = (sum_i W_i w_i)^2 / sum_i W_i w_i^2  in (0, 1],

with ``W`` the pilot's normalised weights.  To second order ``1 - CESS`` is ``(beta' - beta)^2``
times the variance of ``d log f / d beta``, so a constant CESS spaces the temperatures evenly in
thermodynamic length -- dense where the distribution changes fast.  The pilot resamples when
its own ESS falls below half (it is a sequential Monte Carlo run; only its schedule is kept).

The schedule is then *frozen*: the main run uses it as a fixed schedule, drawn from its own
generator, so every estimator keeps its unbiasedness and the direction of its bound (an
adaptive schedule chosen on the main chains themselves would not).  The pilot draws from
:func:`pilot_generator`, a stream derived from the run's seed and independent of the main run's;
the same seed gives the same schedule.  With ``K`` given the pilot's shape is read at ``K`` steps
(:func:`logzbench.schedules.resample`); without it the pilot's own length is used.

Like the other estimators this is a pair of small functions over a state (:func:`init`,
:func:`step`), with :func:`pilot_schedule` looping over them.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, NamedTuple

import numpy as np
import torch
from scipy.optimize import brentq

from ..models.base import AnnealingPath
from ..utils import stream_generator
from . import ais as ais_kernel

__all__ = [
    "PilotResult",
    "PilotState",
    "RootFinder",
    "brentq_root",
    "conditional_ess",
    "init",
    "next_beta",
    "pilot_generator",
    "pilot_schedule",
    "step",
]

#: a fixed word mixed into the seed of the pilot's stream (any other stream of the run differs)
_PILOT_STREAM = 0x9170_7A5C
#: the pilot gives up after this many temperatures (a path whose CESS cannot be kept: a bug)
MAX_PILOT_STEPS = 200_000
#: the next temperature's CESS lies above the target by at most this fraction of ``1 - target_ess``
_TOLERANCE = 0.05
#: smallest step in beta the search considers
_MIN_STEP = 1e-12
#: how closely the root finder locates ``log(beta' - beta)``: far finer than the CESS band of :data:`_TOLERANCE`
_XTOL = 1e-6

#: a root finder ``(f, a, b) -> x`` with ``f(x) = 0`` in ``[a, b]``, where ``f(a) > 0 > f(b)``
RootFinder = Callable[[Callable[[float], float], float, float], float]


def brentq_root(f: Callable[[float], float], a: float, b: float) -> float:
    """The schedule search's default root finder: :func:`scipy.optimize.brentq` to within :data:`_XTOL`."""
    return brentq(f, a, b, xtol=_XTOL)


def pilot_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The pilot's own generator: seeded from ``seed`` through a separate stream, so its draws are
    independent of the main run's generator (seeded by ``seed`` itself)."""
    return stream_generator(seed, _PILOT_STREAM, device)


class PilotState(NamedTuple):
    """``x``: the path's chain state; ``log_w``: the pilot's normalised log-weights, float64,
    shape ``(groups, chains_per_group)``; ``beta``: the current inverse temperature."""

    x: Any
    log_w: torch.Tensor
    beta: float


class PilotResult(NamedTuple):
    """The pilot's schedule and cost.

    ``betas``: its own schedule ``0 = beta_0 < ... = 1``; ``sweeps``: transitions times chains
    (counted in the main result's ``total_sweeps``); ``n_resampled``: how often it resampled."""

    betas: np.ndarray
    n_chains: int
    sweeps: int
    target_ess: float
    seconds: float
    n_resampled: int

    def extras(self) -> dict[str, Any]:
        """What a result records (``extra``): ``pilot_sweeps`` (also added to ``total_sweeps``), ``pilot_K``,
        ``pilot_seconds``, ``pilot_resampled``."""
        return {
            "pilot_sweeps": int(self.sweeps),
            "pilot_K": len(self.betas) - 1,
            "pilot_seconds": float(self.seconds),
            "pilot_resampled": int(self.n_resampled),
        }


def conditional_ess(log_w: torch.Tensor, inc: torch.Tensor) -> torch.Tensor:
    """CESS of the increments ``inc`` under normalised log-weights ``log_w`` (both ``(..., M)``),
    as a fraction in (0, 1] per leading index."""
    a = torch.logsumexp(log_w + inc, dim=-1)
    b = torch.logsumexp(log_w + 2.0 * inc, dim=-1)
    return torch.exp(2.0 * a - b).clamp(max=1.0)


def _normalise(log_w: torch.Tensor) -> torch.Tensor:
    return log_w - torch.logsumexp(log_w, dim=-1, keepdim=True)


def init(path: AnnealingPath, n_chains: int, generator: torch.Generator, groups: int = 1) -> PilotState:
    """Exact draws from ``p_0``, equal weights.  ``groups`` independent populations of ``n_chains``
    each (one per test point of a generative model's batched latent paths; the state then holds
    ``groups * n_chains`` chains, group-major)."""
    x = path.sample_initial(int(groups) * int(n_chains), generator)
    log_w = torch.full((int(groups), int(n_chains)), -math.log(n_chains), dtype=torch.float64, device=generator.device)
    return PilotState(x, log_w, 0.0)


def _cess_at(path: AnnealingPath, state: PilotState, beta_next: float) -> float:
    inc = path.log_f_ratio(state.x, state.beta, beta_next).reshape(state.log_w.shape)
    return float(conditional_ess(state.log_w, inc).min())


def next_beta(
    path: AnnealingPath, state: PilotState, target_ess: float, root_finder: RootFinder = brentq_root
) -> float:
    """The next inverse temperature: 1 if the step there keeps ``target_ess``, else the one whose CESS
    (the smallest group's, with several groups) lies in the band from ``target_ess`` up by
    :data:`_TOLERANCE` of ``1 - target_ess``: ``root_finder`` aims at the band's middle, searching
    ``log(beta' - beta)``."""
    beta = state.beta
    if _cess_at(path, state, 1.0) >= target_ess:
        return 1.0
    aim = target_ess + 0.5 * _TOLERANCE * (1.0 - target_ess)

    def gap(log_step: float) -> float:
        return _cess_at(path, state, min(1.0, beta + math.exp(log_step))) - aim

    lo, hi = math.log(_MIN_STEP), math.log(1.0 - beta)  # log step sizes: CESS(lo) >= target > CESS(hi)
    if gap(lo) <= 0.0:  # the smallest step keeps no more than the band's middle
        return min(1.0, beta + _MIN_STEP)
    return min(1.0, beta + math.exp(root_finder(gap, lo, hi)))


def _take(x: Any, idx: torch.Tensor) -> Any:
    """Chains ``idx`` of a batched state (a tensor or a NamedTuple / tuple of tensors)."""
    if isinstance(x, torch.Tensor):
        return x[idx]
    if isinstance(x, tuple):
        items = [_take(t, idx) if isinstance(t, (torch.Tensor, tuple)) else t for t in x]
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
    raise TypeError(f"cannot resample a chain state of type {type(x).__name__}")


def step(
    path: AnnealingPath,
    state: PilotState,
    target_ess: float,
    generator: torch.Generator,
    sweeps_per_beta: int = 1,
    root_finder: RootFinder = brentq_root,
) -> tuple[PilotState, bool]:
    """Choose the next temperature (:func:`next_beta`, with ``root_finder``), reweight, resample
    (multinomially, within each group) when the pilot's ESS is below half, and move with
    ``sweeps_per_beta`` transitions (none at beta = 1).  Returns the new state and whether it resampled."""
    b = next_beta(path, state, target_ess, root_finder)
    inc = path.log_f_ratio(state.x, state.beta, b).reshape(state.log_w.shape)
    log_w = _normalise(state.log_w + inc)
    x = state.x
    g, m = log_w.shape
    resampled = False
    ess = torch.exp(-torch.logsumexp(2.0 * log_w, dim=-1)) / m
    if b < 1.0 and bool((ess < 0.5).any()):
        idx = torch.multinomial(torch.exp(log_w), m, replacement=True, generator=generator)
        idx = (idx + m * torch.arange(g, device=idx.device)[:, None]).reshape(-1)
        x = _take(x, idx)
        log_w = torch.full_like(log_w, -math.log(m))
        resampled = True
    if b < 1.0:
        for _ in range(int(sweeps_per_beta)):
            x = path.transition(x, b, generator)
    return PilotState(x, log_w, b), resampled


def pilot_schedule(
    path: AnnealingPath,
    n_chains: int,
    generator: torch.Generator,
    *,
    target_ess: float = 0.95,
    sweeps_per_beta: int = 1,
    groups: int = 1,
    max_steps: int = MAX_PILOT_STEPS,
    root_finder: RootFinder = brentq_root,
) -> PilotResult:
    """Run the pilot along ``path`` and return its schedule.

    Parameters
    ----------
    path : AnnealingPath
        The estimator's own path (the same initial distribution and kernel as the main run).
    n_chains : int
        Pilot chains (per group), at least 2.
    generator : torch.Generator
        The pilot's own stream (:func:`pilot_generator`), never the main run's.
    target_ess : float
        Conditional ESS kept between successive temperatures, in (0, 1).
    sweeps_per_beta : int
        Transitions at each temperature (as the main run).
    groups : int
        Independent populations sharing one schedule (the smallest group CESS decides).
    root_finder : callable
        ``(f, a, b) -> x`` with ``f(x) = 0``, where ``f(a) > 0 > f(b)``: how each next temperature is
        searched (:func:`brentq_root` by default).
    """
    if int(n_chains) < 2:
        raise ValueError(f"the adaptive schedule needs pilot_chains >= 2, got {n_chains}")
    if not 0.0 < float(target_ess) < 1.0:
        raise ValueError(f"target_ess must be in (0, 1), got {target_ess!r}")
    t0 = time.perf_counter()
    state = init(path, n_chains, generator, groups=groups)
    betas, n_resampled = [0.0], 0
    while state.beta < 1.0:
        if len(betas) > max_steps:
            raise RuntimeError(
                f"the adaptive pilot needed more than {max_steps} temperatures to keep a conditional "
                f"ESS of {target_ess} (reached beta = {state.beta:.3g}); lower target_ess"
            )
        state, r = step(path, state, float(target_ess), generator, sweeps_per_beta, root_finder)
        betas.append(state.beta)
        n_resampled += int(r)
    ais_kernel.check_finite(state.log_w, "adaptive pilot log-weights")
    k = len(betas) - 1
    sweeps = max(k - 1, 0) * int(sweeps_per_beta) * int(n_chains) * int(groups)
    return PilotResult(
        np.asarray(betas, dtype=np.float64),
        int(n_chains) * int(groups),
        sweeps,
        float(target_ess),
        time.perf_counter() - t0,
        n_resampled,
    )
