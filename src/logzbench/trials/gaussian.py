"""Liu et al. (2015) Fig. 1: repeated trials of the IS family on the 1-D Gaussian toy.

``p = N(0, sigma^2)`` against the reference ``p_0 = N(0, sigma0^2)``
(:mod:`logzbench.models.gaussian_toy`); trial ``t`` draws from ``numpy.random.default_rng((seed, t))``,
so every ``sigma0`` scales the same standard-normal draws (common random numbers).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..models import gaussian_toy
from .table import METHODS, _check_common, _check_positive, _frame, _rows, estimate_all


def run_trial(sigma0: float, n: int, seed: int, sigma: float = 1.0) -> dict[str, float]:
    """Errors ``log Ẑ - log Z`` of every method on one draw of ``n`` samples from each of ``p_0`` and ``p``.

    The draw is ``gaussian_toy.draw(sigma0, n, numpy.random.default_rng(seed), sigma)``; returns
    ``{method: error}`` for the methods of :data:`METHODS`.
    """
    l0, l1 = gaussian_toy.draw(sigma0, n, np.random.default_rng(seed), sigma)
    truth = gaussian_toy.log_z(sigma)
    return {m: r.log_z - truth for m, r in estimate_all(l0, l1).items()}


def trial_errors(
    sigma0: float, n: int, n_trials: int, seed: int, sigma: float = 1.0, with_stderr: bool = False
) -> pd.DataFrame:
    """One row per trial (``trial``, one error column per method; ``<method>_se`` columns with ``with_stderr``).

    Trial ``t`` uses ``numpy.random.default_rng((seed, t))``.
    """
    truth = gaussian_toy.log_z(sigma)
    rows = []
    for t in range(n_trials):
        l0, l1 = gaussian_toy.draw(sigma0, n, np.random.default_rng((seed, t)), sigma)
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
            out.append(
                {
                    "sigma0": float(s0),
                    "method": m,
                    "bias": float(np.mean(e)),
                    "mse": float(np.mean(e**2)),
                    "sd": sd,
                    "bias_se": sd / math.sqrt(e.size),
                    "n": n,
                    "n_trials": n_trials,
                }
            )
    return pd.DataFrame(out)


# --------------------------------------------------------------------------- Fig. 1
def gaussian_trials(sigma0: float, n: int, n_trials: int, seed: int, sigma: float = 1.0) -> pd.DataFrame:
    """Repeated trials of the Gaussian toy (Fig. 1) at one ``sigma0``, as a long trials table.

    Parameters
    ----------
    sigma0 : float > 0
        Standard deviation of the reference ``p_0 = N(0, sigma0^2)``.
    n : int >= 2
        Samples from each of ``p_0`` and ``p`` per trial (DS uses the first ``n // 2`` of each).
    n_trials : int >= 1
        Number of independent trials.
    seed : int >= 0
        Base seed: trial ``t`` draws from ``numpy.random.default_rng((seed, t))`` via
        :func:`gaussian_toy.draw <logzbench.models.gaussian_toy.draw>`, exactly as
        :func:`trial_errors` does, so the errors match it (and
        every ``sigma0`` scales the same standard-normal draws: common random numbers).
    sigma : float > 0
        Standard deviation of the target ``p = N(0, sigma^2)``.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`TRIAL_COLUMNS`, ``experiment == "gaussian"``, one row per (trial,
        method of :data:`METHODS`); ``truth = log(sigma sqrt(2 pi))``.

    Raises
    ------
    ValueError
        ``sigma0 <= 0``, ``sigma <= 0``, ``n < 2``, ``n_trials < 1`` or a negative seed.
    """
    sigma0 = _check_positive(sigma0, "sigma0")
    sigma = _check_positive(sigma, "sigma")
    n, n_trials, seed = _check_common(n, n_trials, seed)
    truth = gaussian_toy.log_z(sigma)
    settings = {"experiment": "gaussian", "sigma0": sigma0, "sigma": sigma}
    rows: list[dict] = []
    for t in range(n_trials):
        l0, l1 = gaussian_toy.draw(sigma0, n, np.random.default_rng((seed, t)), sigma)
        rows += _rows(settings, t, seed, n, truth, estimate_all(l0, l1))
    return _frame(rows)
