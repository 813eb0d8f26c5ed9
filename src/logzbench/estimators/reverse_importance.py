"""Reverse importance sampling (RIS), the weighted harmonic mean of Gelfand & Dey (1994).

With ``l(x) = log f(x) - log p_0(x)`` evaluated at samples of the *target* ``x_i ~ p``,

    1 / Ẑ_ris = (1/n) sum_i exp(-l(x_i)),     log Ẑ_ris = -logmeanexp(-l).

``1 / Ẑ_ris`` is an ordinary IS estimate of ``1 / Z`` (unbiased), with relative MSE
``chi^2(p_0 || p) / n``, infinite when ``p`` is much more peaked than ``p_0``; ``log Ẑ_ris``
then typically *over*-estimates ``log Z`` (a stochastic upper bound; Liu et al. 2015, Sec. 3).

The standard error is the delta-method one for ``1 / Ẑ`` (``sd(1/w) / (sqrt(n) mean(1/w))``,
the same for ``log Ẑ``), the interval is the negated bootstrap interval of ``log(1/Ẑ)``, and
the ESS is that of the weights ``exp(-l)``.  All in float64 log space.
"""

from __future__ import annotations

import time

from .importance import as_log_ratios, relative_variance
from .result import EstimateResult, summarize_log_weights


def reverse_importance_sampling(
    l1, *, n_bootstrap: int = 1000, seed: int = 0, settings: dict | None = None
) -> EstimateResult:
    """RIS (harmonic mean) estimate of ``log Z`` from log-ratios at samples of the target.

    Parameters
    ----------
    l1 : array-like, shape (n1,)
        ``log f(x) - log p_0(x)`` at ``x ~ p = f / Z`` (exact samples or MCMC output).
    n_bootstrap : int
        Bootstrap replicates for the percentile interval (0: no interval, NaN).
    seed : int
        Seed of the bootstrap.
    settings : dict, optional
        Merged into ``result.settings`` (which always holds ``n0 = 0`` and ``n1``).

    Returns
    -------
    EstimateResult
        ``estimator = "ris"``; ``log_z = -logmeanexp(-l1)``; ``log_weights = -l1`` (the
        log-weights of the estimate of ``1 / Z``); ``extra["v_ris"]`` is the paper's variance
        estimate ``var̂(1/w) Ẑ^2``.
    """
    t0 = time.perf_counter()
    l1 = as_log_ratios(l1, "reverse importance sampling: l1")
    s = summarize_log_weights(-l1, n_bootstrap=n_bootstrap, seed=seed, what="reverse importance sampling: -l1")
    v_ris = float(relative_variance(-l1))
    seconds = time.perf_counter() - t0
    return EstimateResult(
        estimator="ris",
        log_z=-s.log_mean,
        log_z_stderr=s.stderr,
        log_z_ci=(-s.ci_high, -s.ci_low),
        ess=s.ess,
        khat=s.khat,
        n_chains=int(l1.size),
        seconds=seconds,
        settings={"n0": 0, "n1": int(l1.size), "n_bootstrap": n_bootstrap, "seed": seed, **(settings or {})},
        log_weights=-l1,
        extra={"v_ris": v_ris},
    )
