"""The long per-trial table of the repeated-trial experiments, the estimators that fill it, and its summary.

Every estimator of :data:`METHODS` (the IS family of :mod:`logzbench.estimators.is_family`) is applied
to one draw through :func:`estimate_all`: with ``n`` samples from each of ``p_0`` and ``p``, IS,
reverse IS and the three averaging methods use all of them, discriminance sampling (``"ds"``) only
the first ``n // 2`` of each, as in Liu et al. (2015).

The "trials" table
------------------
Both experiments return the same *long* table, one row per (trial, method), with exactly the
columns of :data:`TRIAL_COLUMNS`, so frames of either experiment can be concatenated:

``experiment``
    ``"gaussian"`` or ``"grid"``.
``sigma0``, ``sigma``
    Gaussian settings (reference and target standard deviations); NaN for grid rows.
``height``, ``width``, ``sigma_pair``, ``sigma_unary``, ``reference``, ``burn_in``
    Grid settings (``reference`` is ``"uniform"``, ``"mean-field"`` or ``"trw"``); missing
    (``<NA>`` / NaN / ``None``) for Gaussian rows.
``trial``
    Trial index ``t = 0, ..., n_trials - 1``.
``seed``
    The base seed of the run; trial ``t``'s randomness is derived from ``(seed, t)`` (see
    :func:`~logzbench.trials.gaussian.gaussian_trials` and :func:`~logzbench.trials.grid.grid_trials`).
``method``
    One of :data:`METHODS`, or for grid references with a
    variational bound ``"mf-bound"`` (mean-field lower bound) / ``"trw-bound"`` (TRW upper
    bound); see :data:`BOUND_METHODS`.
``log_z``, ``log_z_stderr``
    The estimate and its reported standard error (0 for the deterministic bounds).
``truth``
    Exact ``log Z``.
``error``
    ``log_z - truth``.
``n``
    Samples drawn from *each* of ``p_0`` and ``p``.
``seconds``
    Wall time of the estimator (for a bound row: of building the reference).
"""

from __future__ import annotations

import math
import operator

import numpy as np
import pandas as pd

from ..estimators.is_family import ESTIMATORS, from_log_ratios
from ..estimators.result import EstimateResult

#: Methods of :func:`estimate_all`, in the order of the paper's comparison.
METHODS = ESTIMATORS

#: Setting columns of each experiment (the others are missing in its rows).
SETTING_COLUMNS = {
    "gaussian": ("sigma0", "sigma"),
    "grid": ("height", "width", "sigma_pair", "sigma_unary", "reference", "burn_in"),
}

#: Columns of the long per-trial table, in order (see the module docstring).
TRIAL_COLUMNS = (
    "experiment",
    *SETTING_COLUMNS["gaussian"],
    *SETTING_COLUMNS["grid"],
    "trial",
    "seed",
    "method",
    "log_z",
    "log_z_stderr",
    "truth",
    "error",
    "n",
    "seconds",
)

#: Columns of :func:`summarize_trials`'s statistics (after the grouping columns).
SUMMARY_COLUMNS = ("bias", "mse", "sd", "bias_se", "mse_se", "mean_stderr", "coverage", "n_trials")

#: Reference distributions of :func:`~logzbench.trials.grid.grid_reference`, in the paper's column order (Fig. 2 a-c).
GRID_REFERENCES = ("uniform", "mean-field", "trw")

#: Method name of the variational bound of each reference that has one.
BOUND_METHODS = {"mean-field": "mf-bound", "trw": "trw-bound"}

_INT_COLUMNS = ("height", "width", "burn_in")
_FLOAT_COLUMNS = ("sigma0", "sigma", "sigma_pair", "sigma_unary", "log_z", "log_z_stderr", "truth", "error", "seconds")


# --------------------------------------------------------------------------- validation
def _check_int(value, name: str, minimum: int) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {v}")
    return int(v)


def _check_common(n, n_trials, seed) -> tuple[int, int, int]:
    return (
        _check_int(n, "n (samples per distribution)", 2),
        _check_int(n_trials, "n_trials", 1),
        _check_int(seed, "seed", 0),
    )


def _check_positive(value, name: str, allow_zero: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    ok = math.isfinite(v) and (v >= 0.0 if allow_zero else v > 0.0)
    if not ok:
        raise ValueError(f"{name} must be finite and {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return v


def _check_reference(name) -> str:
    if name not in GRID_REFERENCES:
        raise ValueError(f"unknown reference {name!r}; choose one of {', '.join(map(repr, GRID_REFERENCES))}")
    return name


# --------------------------------------------------------------------------- table
def _frame(rows: list[dict]) -> pd.DataFrame:
    """Rows -> a frame with exactly :data:`TRIAL_COLUMNS` and stable dtypes."""
    df = pd.DataFrame(rows, columns=list(TRIAL_COLUMNS))
    for c in _INT_COLUMNS:
        df[c] = pd.array(df[c], dtype="Int64")
    for c in _FLOAT_COLUMNS:
        df[c] = df[c].astype(np.float64)
    for c in ("trial", "seed", "n"):
        df[c] = df[c].astype(np.int64)
    df["reference"] = df["reference"].astype(object)
    return df


def _rows(settings: dict, trial: int, seed: int, n: int, truth: float, results: dict) -> list[dict]:
    base = {c: None for c in TRIAL_COLUMNS}
    base.update(settings)
    out = []
    for method, r in results.items():
        row = dict(base)
        row.update(
            trial=trial,
            seed=seed,
            method=method,
            log_z=float(r.log_z),
            log_z_stderr=float(r.log_z_stderr),
            truth=float(truth),
            error=float(r.log_z) - float(truth),
            n=n,
            seconds=float(r.seconds),
        )
        out.append(row)
    return out


# --------------------------------------------------------------------------- the IS family on one draw
def estimate_all(l0, l1, *, n_bootstrap: int = 0, seed: int = 0) -> dict[str, EstimateResult]:
    """Every estimator of :data:`METHODS` on one draw, as in the paper's comparison.

    IS uses all of ``l0``, reverse IS all of ``l1``, the three combinations both in full;
    discriminance sampling only the first half of each (``n0 // 2``, ``n1 // 2`` samples).  Each goes
    through the IS family's own dispatch (:func:`logzbench.estimators.is_family.from_log_ratios`).
    """
    l0, l1 = np.asarray(l0, dtype=np.float64), np.asarray(l1, dtype=np.float64)
    halves = (l0[: l0.size // 2], l1[: l1.size // 2])
    return {
        m: from_log_ratios(m, *(halves if m == "ds" else (l0, l1)), n_bootstrap=n_bootstrap, seed=seed) for m in METHODS
    }


# --------------------------------------------------------------------------- summary
def _group_columns(df: pd.DataFrame) -> list[str]:
    """``experiment``, the setting columns that are present and not entirely missing, ``n``, ``method``."""
    settings = [c for exp in SETTING_COLUMNS.values() for c in exp]
    keep = [c for c in settings if c in df.columns and df[c].notna().any()]
    return ["experiment", *keep, *(["n"] if "n" in df.columns else []), "method"]


def summarize_trials(df: pd.DataFrame) -> pd.DataFrame:
    """Bias and MSE of ``log Ẑ`` per experiment, setting and method (what Figs. 1-2 plot).

    Parameters
    ----------
    df : pandas.DataFrame
        A trials table (:data:`TRIAL_COLUMNS`; several experiments/settings may be concatenated).

    Returns
    -------
    pandas.DataFrame
        One row per group of ``experiment``, the setting columns used by any row, ``n`` and
        ``method`` (missing settings kept as a group of their own), with

        * ``bias``: mean error; ``mse``: mean squared error;
        * ``sd``: standard deviation of the errors (``ddof=1``; NaN for one trial);
        * ``bias_se = sd / sqrt(n_trials)``; ``mse_se``: the same for the squared errors;
        * ``mean_stderr``: mean reported standard error;
        * ``coverage``: fraction of trials with ``|error| <= 2 log_z_stderr``, over the trials
          whose reported standard error is not NaN (NaN when there are none, and for the
          deterministic bounds of :data:`BOUND_METHODS`);
        * ``n_trials``: number of rows in the group.

    Raises
    ------
    ValueError
        Missing required columns or an empty table.
    """
    need = {"experiment", "method", "error", "log_z_stderr"}
    missing = sorted(need - set(df.columns))
    if missing:
        raise ValueError(f"trials table lacks column(s) {missing}")
    if len(df) == 0:
        raise ValueError("trials table is empty")
    keys = _group_columns(df)
    bounds = set(BOUND_METHODS.values())
    out = []
    for key, g in df.groupby(keys, dropna=False, sort=True):
        e = g["error"].to_numpy(dtype=np.float64)
        se = g["log_z_stderr"].to_numpy(dtype=np.float64)
        m = e.size
        sd = float(np.std(e, ddof=1)) if m > 1 else float("nan")
        sq_sd = float(np.std(e**2, ddof=1)) if m > 1 else float("nan")
        method = key[-1]
        has_se = ~np.isnan(se)
        if method in bounds or str(method).endswith("-bound") or not has_se.any():
            coverage = float("nan")
        else:
            coverage = float(np.mean(np.abs(e[has_se]) <= 2.0 * se[has_se]))
        rec = dict(zip(keys, key))
        rec.update(
            bias=float(np.mean(e)),
            mse=float(np.mean(e**2)),
            sd=sd,
            bias_se=sd / math.sqrt(m),
            mse_se=sq_sd / math.sqrt(m),
            mean_stderr=float(np.mean(se)),
            coverage=coverage,
            n_trials=int(m),
        )
        out.append(rec)
    res = pd.DataFrame(out, columns=[*keys, *SUMMARY_COLUMNS])
    for c in _INT_COLUMNS:
        if c in res.columns:
            res[c] = pd.array(res[c], dtype="Int64")
    return res
