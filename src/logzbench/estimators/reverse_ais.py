"""Reverse AIS for ``log Z`` (RAISE Alg. 3 with the unconditional kernel; Liu et al. 2015, footnote 2).

A forward chain with the *unconditional* kernels ``T_1 .. T_K`` from ``x_0 ~ p_0`` approximates a
sample of the model; a reverse chain from there "melts" it back with the reverse kernels and
accumulates

    log v = sum_{k=K-1}^{0} [log f_k(x_k) - log f_{k+1}(x_k)].

For exact model samples ``E[v] = Z_0 / Z``, so the weights are aggregated harmonically,
``log Ẑ = log Z_0 - log mean(v)`` (a stochastic *upper* bound on ``log Z`` in that case, the
mirror image of AIS).  With the forward chain standing in for exact samples the estimate
is approximate at small ``K``.  Cost: ``2 K`` sweeps per chain.
"""

from __future__ import annotations

import torch

from ..models.base import AnnealingPath
from ..schedules import from_array
from . import ais as ais_kernel
from . import raise_ as raise_kernel
from ._common import progress_range, timer
from .context import annealing_sweeps
from .result import EstimateResult, check_finite, summarize_log_weights

#: its reverse chain runs the path's transitions backwards: a non-reversible one is refused
#: (:func:`logzbench.estimators.transition.check_reversible`)
NEEDS_REVERSIBLE = True


def reverse_ais(
    path: AnnealingPath,
    betas,
    n_chains: int,
    generator: torch.Generator,
    *,
    n_bootstrap: int = 1000,
    progress: bool = False,
    settings: dict | None = None,
    sweeps_per_beta: int = 1,
    start=None,
) -> EstimateResult:
    """Reverse-AIS estimate of ``log Z`` as a result record (``estimator="reverse-ais"``).

    ``log_weights`` holds the per-chain ``log v``; ``log_z_stderr`` is the delta-method error of
    ``log mean(v)``, the interval the bootstrap one mirrored, and ``ess`` and ``khat`` those of ``v``.
    ``sweeps_per_beta`` transitions run at each intermediate distribution, forward and back.
    ``start``, a chain state of ``n_chains`` model samples (exact ones make the estimate a
    stochastic upper bound), replaces the forward chain (cost: ``K`` sweeps per chain).
    """
    betas = from_array(betas)
    K = len(betas) - 1
    with timer(generator.device) as t:
        if start is None:
            x = ais_kernel.init(path, n_chains, generator).x
            for k in progress_range(K, progress, "reverse AIS (forward)"):
                for _ in range(int(sweeps_per_beta)):
                    x = path.transition(x, float(betas[k + 1]), generator)
        else:
            x = start
        log_v = torch.zeros(n_chains, dtype=torch.float64, device=generator.device)
        x, log_v = raise_kernel.reverse(
            path,
            x,
            log_v,
            betas,
            generator,
            sweeps_per_beta=sweeps_per_beta,
            progress=progress,
            desc="reverse AIS (reverse)",
        )
    check_finite(log_v, "reverse AIS log-weights")
    s = summarize_log_weights(
        log_v, n_bootstrap=n_bootstrap, seed=generator.initial_seed(), what="reverse AIS log-weights"
    )
    log_z0 = path.log_z0()
    n_sweeps = (K if start is not None else 2 * K) * int(sweeps_per_beta)
    return EstimateResult(
        estimator="reverse-ais",
        log_z=log_z0 - s.log_mean,
        log_z_stderr=s.stderr,
        log_z_ci=(log_z0 - s.ci_high, log_z0 - s.ci_low),
        ess=s.ess,
        khat=s.khat,
        n_chains=n_chains,
        seconds=t[0],
        n_sweeps=n_sweeps,
        total_sweeps=n_sweeps * n_chains,
        settings={"K": K, "chains": n_chains, **(settings or {})},
        log_weights=log_v.cpu().numpy(),
        extra={"aggregation": "harmonic", "log_mean_reverse_weight": s.log_mean},
    )


def planned_sweeps(ctx) -> tuple[list, str]:
    """The context's time hook (:func:`~logzbench.estimators.context.planned_sweeps`): a forward and a
    reverse run of ``chains`` chains."""
    return annealing_sweeps(ctx, passes=2)


def estimate(ctx) -> EstimateResult:
    """Registry entry ``reverse-ais``: log Z from a forward then reverse chain."""
    return ctx.run_annealed(reverse_ais)
