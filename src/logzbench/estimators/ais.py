"""Annealed importance sampling (RAISE paper, Alg. 1; Neal 2001).

The algorithm is a pair of small pure functions over an :class:`AISState`:

* :func:`init` draws exact samples from ``p_0`` and sets ``log w = log Z_0``;
* :func:`step` adds ``log f_{beta'}(x) - log f_beta(x)`` to each log-weight and then moves
  ``x`` with a transition that leaves ``p_{beta'}`` invariant.

The schedule lives outside the kernel (:mod:`logzbench.schedules`); :func:`run` loops over
it, and :func:`ais` wraps everything into an :class:`EstimateResult`.  ``Ẑ = mean(w)`` is
unbiased for ``Z``; ``log Ẑ`` is a stochastic lower bound on ``log Z``, so AIS tends to
*over*-estimate test log-likelihoods.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from ..models.base import AnnealingPath
from ..schedules import from_array
from ._common import progress_range, timer
from .result import EstimateResult, attach_log_likelihood, check_finite, summarize_log_weights


class AISState(NamedTuple):
    """``x``: the path's batched chain state; ``log_w``: float64 log-weights, shape ``(M,)``."""

    x: Any
    log_w: torch.Tensor


def init(path: AnnealingPath, n_chains: int, generator: torch.Generator) -> AISState:
    """Exact samples from ``p_0``; every log-weight starts at ``log Z_0``."""
    x = path.sample_initial(n_chains, generator)
    log_w = torch.full((n_chains,), path.log_z0(), dtype=torch.float64, device=generator.device)
    return AISState(x, log_w)


def _fused_step(path: AnnealingPath):
    """The path's ``reweight_and_move``, if it goes with the ``log_f_ratio`` and ``transition`` the
    path uses (not when a subclass, a wrapper or the instance replaces either of them)."""
    cls = type(path)
    if getattr(cls, "reweight_and_move", None) is None or "log_f_ratio" in vars(path) or "transition" in vars(path):
        return None
    owner = next(c for c in cls.__mro__ if "reweight_and_move" in vars(c))
    if cls.log_f_ratio is not owner.log_f_ratio or cls.transition is not owner.transition:
        return None
    return path.reweight_and_move


def step(
    path: AnnealingPath,
    state: AISState,
    beta: float,
    beta_next: float,
    generator: torch.Generator,
    move: bool = True,
    n_moves: int = 1,
) -> AISState:
    """Reweight from ``beta`` to ``beta_next``, then (if ``move``) apply ``n_moves`` transitions at
    ``beta_next`` (``sweeps_per_beta``).

    A path with a ``reweight_and_move(x, beta, beta_next, generator)`` method (the RBM paths:
    the same numbers as the two calls, in fewer passes over the state) does the first at once."""
    fused = _fused_step(path) if move else None
    if fused is not None:
        inc, x = fused(state.x, beta, beta_next, generator)
        log_w = state.log_w + inc
    else:
        log_w = state.log_w + path.log_f_ratio(state.x, beta, beta_next)
        x = path.transition(state.x, beta_next, generator) if move else state.x
    for _ in range(int(n_moves) - 1 if move else 0):
        x = path.transition(x, beta_next, generator)
    return AISState(x, log_w)


def run(
    path: AnnealingPath,
    betas,
    n_chains: int,
    generator: torch.Generator,
    progress: bool = False,
    sweeps_per_beta: int = 1,
    final_move: bool = False,
    desc: str = "AIS",
) -> tuple[AISState, int]:
    """Run AIS over ``betas``; returns the final state and the number of transitions per chain.

    ``sweeps_per_beta`` transitions are applied at each intermediate distribution; none after the
    last reweighting (it would not change the weights) unless ``final_move``: then the final state
    has also moved at ``beta_K = 1`` and can start a reverse run (reverse HAIS).
    """
    betas = from_array(betas)
    state = init(path, n_chains, generator)
    k_total = len(betas) - 1
    for k in progress_range(k_total, progress, desc):
        state = step(
            path,
            state,
            float(betas[k]),
            float(betas[k + 1]),
            generator,
            move=final_move or k + 1 < k_total,
            n_moves=sweeps_per_beta,
        )
    check_finite(state.log_w, "AIS log-weights")
    return state, transitions_per_chain(k_total, sweeps_per_beta, final_move)


def transitions_per_chain(K: int, sweeps_per_beta: int, final_move: bool = False) -> int:
    """The transitions each chain of an AIS run over ``K + 1`` temperatures makes: ``sweeps_per_beta`` at
    every intermediate one, and at ``beta_K = 1`` too with ``final_move``."""
    return (K - (0 if final_move else 1)) * int(sweeps_per_beta)


def ais(
    path: AnnealingPath,
    betas,
    n_chains: int,
    generator: torch.Generator,
    *,
    log_f_data: torch.Tensor | None = None,
    log_f_stderr: torch.Tensor | None = None,
    n_bootstrap: int = 1000,
    progress: bool = False,
    settings: dict | None = None,
    sweeps_per_beta: int = 1,
) -> EstimateResult:
    """AIS estimate of ``log Z`` as a result record.

    Parameters
    ----------
    path : AnnealingPath
        From a tractable ``p_0`` to the model.
    betas : array-like, shape (K + 1,)
        Schedule, ``0 = beta_0 <= ... <= beta_K = 1``.
    n_chains : int
        Independent AIS runs ``M``.
    generator : torch.Generator
        Source of all randomness (on the path's device).
    log_f_data : torch.Tensor, shape (n_examples,), optional
        ``log f(v)`` of test examples under the model; gives ``mean_log_likelihood``.
    log_f_stderr : torch.Tensor, shape (n_examples,), optional
        Standard errors of ``log_f_data`` when it is itself estimated (DBM, DBN).
    sweeps_per_beta : int
        Transitions at each intermediate distribution.
    """
    betas = from_array(betas)
    device = generator.device
    with timer(device) as t:
        state, n_sweeps = run(path, betas, n_chains, generator, progress=progress, sweeps_per_beta=sweeps_per_beta)
    return result(
        state.log_w,
        generator,
        K=len(betas) - 1,
        n_sweeps=n_sweeps,
        seconds=t[0],
        n_bootstrap=n_bootstrap,
        settings=settings,
        log_f_data=log_f_data,
        log_f_stderr=log_f_stderr,
    )


def result(
    log_w: torch.Tensor,
    generator: torch.Generator,
    *,
    K: int,
    n_sweeps: int,
    seconds: float,
    n_bootstrap: int = 1000,
    settings: dict | None = None,
    log_f_data: torch.Tensor | None = None,
    log_f_stderr: torch.Tensor | None = None,
) -> EstimateResult:
    """The result record of an AIS run's final log-weights ``(M,)``: ``log Z`` with its standard error,
    bootstrap interval, ESS and k-hat, and the test log-likelihood where ``log_f_data`` is given."""
    n_chains = int(log_w.shape[0])
    s = summarize_log_weights(log_w, n_bootstrap=n_bootstrap, seed=generator.initial_seed(), what="AIS log-weights")
    res = EstimateResult(
        estimator="ais",
        **s.log_z_fields(),
        n_chains=n_chains,
        seconds=seconds,
        n_sweeps=n_sweeps,
        total_sweeps=n_sweeps * n_chains,
        settings={"K": int(K), "chains": n_chains, **(settings or {})},
        log_weights=log_w.cpu().numpy(),
    )
    if log_f_data is not None:
        attach_log_likelihood(res, log_f_data, log_f_stderr)
    return res


def estimate(ctx) -> EstimateResult:
    """Registry entry ``ais``: AIS on the model's path from ``init``, with the test log-likelihood
    from the (exact or importance-sampled) ``log f(v)`` (attached by
    :meth:`~logzbench.estimators.context.EstimateContext.run_annealed`)."""
    return ctx.run_annealed(ais)
