"""The 1-D Gaussian toy of Liu, Peng, Ihler & Fisher (2015), Example 1 and Sec. 6 (Fig. 1).

Target ``f(x) = exp(-x^2 / (2 sigma^2))``, so ``p = N(0, sigma^2)`` and
``log Z = log(sigma sqrt(2 pi))`` is known; reference ``p_0 = N(0, sigma0^2)`` (normalised).
IS has infinite variance for ``sigma0 <= sigma / sqrt(2)``, reverse IS for ``sigma0 >= sqrt(2) sigma``;
discriminance sampling has finite variance for every ``sigma0 > 0``.

Randomness: a :class:`numpy.random.Generator`; :func:`run_trial` and :func:`sweep` seed it from
integers (``numpy.random.default_rng((seed, trial))``), so runs are reproducible, and the same
standard-normal draws are scaled by every ``sigma0`` of a sweep (common random numbers).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..estimators.importance import importance_sampling
from ..estimators.is_combinations import discriminance_sampling, naive_average, weighted_average, weighted_selection
from ..estimators.result import EstimateResult
from ..estimators.reverse_importance import reverse_importance_sampling

#: Methods of :func:`estimate_all`, in the order of the paper's comparison.
METHODS = ("is", "ris", "is-avg", "is-weighted", "is-select", "ds")


def log_z(sigma: float = 1.0) -> float:
    """Exact ``log Z = log(sigma sqrt(2 pi))`` of ``f(x) = exp(-x^2 / (2 sigma^2))``."""
    return math.log(sigma) + 0.5 * math.log(2.0 * math.pi)


def log_ratio(x: np.ndarray, sigma0: float, sigma: float = 1.0) -> np.ndarray:
    """``l(x) = log f(x) - log p_0(x)`` with ``p_0 = N(0, sigma0^2)``, in float64."""
    x = np.asarray(x, dtype=np.float64)
    log_p0 = -0.5 * (x / sigma0) ** 2 - math.log(sigma0) - 0.5 * math.log(2.0 * math.pi)
    return -0.5 * (x / sigma) ** 2 - log_p0


def sample_reference(n: int, rng: np.random.Generator, sigma0: float) -> np.ndarray:
    """``n`` draws from ``p_0 = N(0, sigma0^2)``."""
    return sigma0 * rng.standard_normal(n)


def sample_target(n: int, rng: np.random.Generator, sigma: float = 1.0) -> np.ndarray:
    """``n`` exact draws from ``p = N(0, sigma^2)``."""
    return sigma * rng.standard_normal(n)


def draw(sigma0: float, n: int, rng: np.random.Generator, sigma: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """``(l0, l1)``: log-ratios at ``n`` samples of ``p_0`` and then ``n`` samples of ``p``."""
    if not (sigma0 > 0 and sigma > 0):
        raise ValueError(f"sigma0 and sigma must be positive (got {sigma0}, {sigma})")
    x0 = sample_reference(n, rng, sigma0)
    x1 = sample_target(n, rng, sigma)
    return log_ratio(x0, sigma0, sigma), log_ratio(x1, sigma0, sigma)


def estimate_all(l0, l1, *, n_bootstrap: int = 0, seed: int = 0) -> dict[str, EstimateResult]:
    """Every estimator of :data:`METHODS` on one draw, as in the paper's comparison.

    IS uses all of ``l0``, reverse IS all of ``l1``, the three combinations both in full;
    discriminance sampling only the first half of each (``n0 // 2``, ``n1 // 2`` samples).
    """
    l0, l1 = np.asarray(l0, dtype=np.float64), np.asarray(l1, dtype=np.float64)
    kw = {"n_bootstrap": n_bootstrap, "seed": seed}
    return {
        "is": importance_sampling(l0, **kw),
        "ris": reverse_importance_sampling(l1, **kw),
        "is-avg": naive_average(l0, l1, **kw),
        "is-weighted": weighted_average(l0, l1, **kw),
        "is-select": weighted_selection(l0, l1, **kw),
        "ds": discriminance_sampling(l0[: l0.size // 2], l1[: l1.size // 2]),
    }


def run_trial(sigma0: float, n: int, seed: int, sigma: float = 1.0) -> dict[str, float]:
    """Errors ``log Ẑ - log Z`` of every method on one draw of ``n`` samples from each of ``p_0`` and ``p``.

    The draw is ``draw(sigma0, n, numpy.random.default_rng(seed), sigma)``; returns
    ``{method: error}`` for the methods of :data:`METHODS`.
    """
    l0, l1 = draw(sigma0, n, np.random.default_rng(seed), sigma)
    truth = log_z(sigma)
    return {m: r.log_z - truth for m, r in estimate_all(l0, l1).items()}


def trial_errors(sigma0: float, n: int, n_trials: int, seed: int, sigma: float = 1.0,
                 with_stderr: bool = False) -> pd.DataFrame:
    """One row per trial (``trial``, one error column per method; ``<method>_se`` columns with ``with_stderr``).

    Trial ``t`` uses ``numpy.random.default_rng((seed, t))``.
    """
    truth = log_z(sigma)
    rows = []
    for t in range(n_trials):
        l0, l1 = draw(sigma0, n, np.random.default_rng((seed, t)), sigma)
        res = estimate_all(l0, l1)
        row: dict = {"trial": t, **{m: r.log_z - truth for m, r in res.items()}}
        if with_stderr:
            row.update({f"{m}_se": r.log_z_stderr for m, r in res.items()})
            row["selected"] = res["is-select"].extra["selected"]
        rows.append(row)
    return pd.DataFrame(rows)


def sweep(sigma0s, n: int, n_trials: int, seed: int, sigma: float = 1.0) -> pd.DataFrame:
    """Bias and MSE of ``log Ẑ`` per method and ``sigma0`` over ``n_trials`` draws (the paper's Fig. 1).

    Returns
    -------
    pandas.DataFrame
        Long format, one row per (``sigma0``, ``method``): ``bias`` (mean error), ``mse``
        (mean squared error), ``sd`` (spread of the errors), ``bias_se = sd / sqrt(n_trials)``,
        ``n``, ``n_trials``.  The same ``(seed, trial)`` streams are used for every ``sigma0``.
    """
    out = []
    for s0 in sigma0s:
        err = trial_errors(float(s0), n, n_trials, seed, sigma)
        for m in METHODS:
            e = err[m].to_numpy()
            sd = float(np.std(e, ddof=1)) if e.size > 1 else float("nan")
            out.append({"sigma0": float(s0), "method": m, "bias": float(np.mean(e)), "mse": float(np.mean(e**2)),
                        "sd": sd, "bias_se": sd / math.sqrt(e.size), "n": n, "n_trials": n_trials})
    return pd.DataFrame(out)
