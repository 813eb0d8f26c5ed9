"""Repeated-trial experiments of Liu, Peng, Ihler & Fisher (2015), Sec. 6, Figs. 1 and 2.

* Fig. 1 (:func:`gaussian_trials`, :func:`sweep`): the 1-D Gaussian toy of
  :mod:`logzbench.models.gaussian_toy`, ``p = N(0, sigma^2)``, reference
  ``p_0 = N(0, sigma0^2)``, bias and MSE of ``log Ẑ`` against ``sigma0`` (1000 trials in the
  paper).
* Fig. 2 (:func:`grid_trials`): binary pairwise MRFs on an ``H x W`` grid
  (:class:`~logzbench.models.grid.GridMRF`, 10 x 10 in the paper) with
  ``theta_i(k) ~ N(0, sigma_unary^2)`` and ``theta_ij(k, l) ~ N(0, sigma_pair^2)``, bias and MSE
  against ``sigma_pair`` (500 trials), one column per reference ``p_0`` (uniform, mean field,
  TRW mixture of trees).  Reference samples are exact; target samples come from checkerboard
  Gibbs chains started at reference samples and run for ``burn_in`` sweeps (500 in the
  paper); the truth is the transfer-matrix ``log Z``.

Every estimator of :data:`METHODS` is applied through :func:`estimate_all`: with ``n``
samples from each of ``p_0`` and ``p``, IS, reverse IS and the three averaging methods use all
of them, discriminance sampling (``"ds"``) only the first ``n // 2`` of each, as in the paper.

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
    :func:`gaussian_trials` and :func:`grid_trials`).
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

:func:`summarize_trials` reduces the table to bias / MSE per setting and method (the
quantities plotted in the paper) and :func:`plot_trials` draws them.
"""

from __future__ import annotations

import math
import operator
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from . import registry
from .estimators.importance import importance_sampling
from .estimators.is_combinations import discriminance_sampling, naive_average, weighted_average, weighted_selection
from .estimators.result import EstimateResult
from .estimators.reverse_importance import reverse_importance_sampling
from .models import gaussian_toy
from .models.grid import GridMRF
from .plotting import pyplot, save_figure
from .utils import write_csv_atomic

#: Methods of :func:`estimate_all`, in the order of the paper's comparison.
METHODS = ("is", "ris", "is-avg", "is-weighted", "is-select", "ds")

#: Setting columns of each experiment (the others are missing in its rows).
SETTING_COLUMNS = {
    "gaussian": ("sigma0", "sigma"),
    "grid": ("height", "width", "sigma_pair", "sigma_unary", "reference", "burn_in"),
}

#: Columns of the long per-trial table, in order (see the module docstring).
TRIAL_COLUMNS = ("experiment", *SETTING_COLUMNS["gaussian"], *SETTING_COLUMNS["grid"], "trial", "seed", "method",
                 "log_z", "log_z_stderr", "truth", "error", "n", "seconds")

#: Columns of :func:`summarize_trials`'s statistics (after the grouping columns).
SUMMARY_COLUMNS = ("bias", "mse", "sd", "bias_se", "mse_se", "mean_stderr", "coverage", "n_trials")

#: Reference distributions of :func:`grid_reference`, in the paper's column order (Fig. 2 a-c).
GRID_REFERENCES = ("uniform", "mean-field", "trw")

#: Method name of the variational bound of each reference that has one.
BOUND_METHODS = {"mean-field": "mf-bound", "trw": "trw-bound"}

_INT_COLUMNS = ("height", "width", "burn_in")
_FLOAT_COLUMNS = ("sigma0", "sigma", "sigma_pair", "sigma_unary", "log_z", "log_z_stderr", "truth", "error",
                  "seconds")

#: How an emphasised estimator (:attr:`~logzbench.registry.EstimatorSpec.emphasis`) is drawn.
EMPHASIS_STYLE = registry.EMPHASIS_STYLE


def estimator_style(name: str, label: str | None = None) -> dict:
    """Plot style of registry estimator ``name`` (:attr:`~logzbench.registry.EstimatorSpec.style`)
    with its label (or ``label``)."""
    spec = registry.estimator(name)
    return {**spec.style, "label": spec.label if label is None else label}


#: Labels of the trials figures that differ from the registry's (DS uses half of each side's samples).
TRIAL_LABELS = {"ds": "DS (n/2 per side)"}

#: Plot style per method, in legend order (same colours and markers in every figure; DS and ADS
#: drawn prominently): the registry's style for an estimator, fixed styles for the rest.
METHOD_STYLES = {
    **{m: estimator_style(m, TRIAL_LABELS.get(m)) for m in METHODS},
    # annealed estimators (Figs 3-4; the report's annealed_trials table)
    "ais": estimator_style("ais"),
    "reverse-ais": estimator_style("reverse-ais"),
    "avg-ais-reverse-ais": {"color": "tab:green", "marker": "^", "label": "avg(AIS, reverse AIS)"},
    "ads-multinomial": estimator_style("ads-multinomial"),
    "ads": estimator_style("ads"),
    "mf-bound": {"color": "tab:gray", "marker": None, "label": "mean-field bound", "linestyle": "--"},
    "trw-bound": {"color": "black", "marker": None, "label": "TRW bound", "linestyle": "--"},
}
_FALLBACK_COLORS = ("tab:pink", "tab:olive", "tab:cyan", "navy", "gold")


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
    return (_check_int(n, "n (samples per distribution)", 2), _check_int(n_trials, "n_trials", 1),
            _check_int(seed, "seed", 0))


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
        row.update(trial=trial, seed=seed, method=method, log_z=float(r.log_z), log_z_stderr=float(r.log_z_stderr),
                   truth=float(truth), error=float(r.log_z) - float(truth), n=n, seconds=float(r.seconds))
        out.append(row)
    return out


# --------------------------------------------------------------------------- the IS family on one draw
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

    The draw is ``gaussian_toy.draw(sigma0, n, numpy.random.default_rng(seed), sigma)``; returns
    ``{method: error}`` for the methods of :data:`METHODS`.
    """
    l0, l1 = gaussian_toy.draw(sigma0, n, np.random.default_rng(seed), sigma)
    truth = gaussian_toy.log_z(sigma)
    return {m: r.log_z - truth for m, r in estimate_all(l0, l1).items()}


def trial_errors(sigma0: float, n: int, n_trials: int, seed: int, sigma: float = 1.0,
                 with_stderr: bool = False) -> pd.DataFrame:
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
            out.append({"sigma0": float(s0), "method": m, "bias": float(np.mean(e)), "mse": float(np.mean(e**2)),
                        "sd": sd, "bias_se": sd / math.sqrt(e.size), "n": n, "n_trials": n_trials})
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


# --------------------------------------------------------------------------- Fig. 2
def grid_reference(mrf: GridMRF, name: str, *, trw_trees: int = 10, seed: int = 0):
    """The reference distribution ``p_0`` called ``name`` for ``mrf``.

    Parameters
    ----------
    mrf : GridMRF
    name : {"uniform", "mean-field", "trw"}
        Uniform over ``{0, 1}^(H W)``; naive mean field
        (:func:`~logzbench.models.grid.mean_field`, ``log_z_bound`` a lower bound); or the
        mixture of spanning trees from tree-reweighted BP
        (:func:`logzbench.models.grid_trw.trw_mixture`, imported only when asked for;
        ``log_z_bound`` an upper bound).
    trw_trees : int
        Random spanning trees of the TRW mixture.
    seed : int
        Seed of the TRW tree selection (unused by the other references).

    Returns
    -------
    object
        With ``.sample(n, generator)`` (exact samples, float64 ``(n, H, W)``), ``.log_prob(x)``
        (normalised), ``.name`` and ``.log_z_bound`` (``None`` for the uniform reference).

    Raises
    ------
    ValueError
        Unknown ``name``.
    ImportError
        ``"trw"`` while :mod:`logzbench.models.grid_trw` is unavailable.
    """
    _check_reference(name)
    if name == "uniform":
        return mrf.uniform_reference()
    if name == "mean-field":
        return mrf.mean_field()
    try:
        from .models.grid_trw import trw_mixture
    except ImportError as e:
        raise ImportError(f"the 'trw' reference needs logzbench.models.grid_trw ({e})") from e
    return trw_mixture(mrf, n_trees=_check_int(trw_trees, "trw_trees", 1), seed=int(seed))


def trial_seeds(seed: int, trial: int) -> tuple[int, int, int]:
    """``(mrf_seed, sample_seed, trw_seed)`` of grid trial ``trial``: the three 32-bit words of
    ``numpy.random.SeedSequence((seed, trial)).generate_state(3)``.

    They depend on nothing else, so a given ``(seed, trial)`` has the same MRF parameters
    (standard-normal draws, scaled by ``sigma_pair`` / ``sigma_unary``), the same sampling
    stream and the same TRW trees for every reference and every ``sigma_pair``.
    """
    s = np.random.SeedSequence((_check_int(seed, "seed", 0), _check_int(trial, "trial", 0))).generate_state(3)
    return int(s[0]), int(s[1]), int(s[2])


def _bound_method(ref) -> str:
    name = getattr(ref, "name", "reference")
    return BOUND_METHODS.get(name, f"{name}-bound")


def grid_trials(height: int, width: int, sigma_pair: float, reference: str, *, n: int, n_trials: int, seed: int,
                sigma_unary: float = 0.1, burn_in: int = 500, trw_trees: int = 10, device=None) -> pd.DataFrame:
    """Repeated trials of the grid-MRF experiment (Fig. 2) at one ``sigma_pair`` and reference.

    Trial ``t``, with ``(mrf_seed, sample_seed, trw_seed) = trial_seeds(seed, t)``:

    1. ``mrf = GridMRF.random(height, width, sigma_pair, sigma_unary, seed=mrf_seed)`` (drawn on
       the CPU, then moved to ``device``) and ``truth = mrf.exact_log_z()`` (transfer matrix);
    2. the reference ``p_0 = grid_reference(mrf, reference, trw_trees=trw_trees, seed=trw_seed)``;
    3. with ``g = torch.Generator(device).manual_seed(sample_seed)``: ``n`` exact samples
       ``x0 ~ p_0``, then ``n`` more reference samples run through ``burn_in`` checkerboard Gibbs
       sweeps of the MRF as ``x1 ~ p``;
    4. ``l = log f(x) - log p_0(x)`` (float64) at both sets, and every method of
       :func:`estimate_all` (DS on the first halves).

    Since the seeds depend only on ``(seed, t)``, the columns of Fig. 2 (references) and the
    points along ``sigma_pair`` use common random numbers: the same trial index has the same
    standard-normal parameter draws, hence the same truth across references.

    Parameters
    ----------
    height, width : int
        Grid size (the transfer matrix needs ``min(height, width) <= 20``).
    sigma_pair : float >= 0
        Standard deviation of the pairwise tables ``theta_ij(k, l)``.
    reference : {"uniform", "mean-field", "trw"}
    n : int >= 2
        Samples from each of ``p_0`` and ``p``.
    n_trials : int >= 1
    seed : int >= 0
    sigma_unary : float >= 0
        Standard deviation of the unary tables (0.1 in the paper).
    burn_in : int >= 0
        Gibbs sweeps applied to the target chains (500 in the paper).
    trw_trees : int >= 1
        Spanning trees of the TRW mixture (``reference="trw"`` only).
    device : str or torch.device, optional
        Where sampling runs (default CPU).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`TRIAL_COLUMNS`, ``experiment == "grid"``; per trial one row per method
        of :data:`METHODS` and, when the reference has a
        ``log_z_bound``, one ``"mf-bound"`` / ``"trw-bound"`` row (``log_z`` = the bound,
        ``log_z_stderr = 0``, ``seconds`` = time to build the reference).

    Raises
    ------
    ValueError
        Unknown reference, ``n < 2``, ``n_trials < 1``, negative ``burn_in``/``seed``,
        negative or non-finite ``sigma_pair``/``sigma_unary``, bad grid size.
    """
    _check_reference(reference)
    n, n_trials, seed = _check_common(n, n_trials, seed)
    height = _check_int(height, "height", 1)
    width = _check_int(width, "width", 1)
    burn_in = _check_int(burn_in, "burn_in", 0)
    trw_trees = _check_int(trw_trees, "trw_trees", 1)
    sigma_pair = _check_positive(sigma_pair, "sigma_pair", allow_zero=True)
    sigma_unary = _check_positive(sigma_unary, "sigma_unary", allow_zero=True)
    dev = torch.device(device) if device is not None else torch.device("cpu")
    settings = {"experiment": "grid", "height": height, "width": width, "sigma_pair": sigma_pair,
                "sigma_unary": sigma_unary, "reference": reference, "burn_in": burn_in}
    rows: list[dict] = []
    for t in range(n_trials):
        mrf_seed, sample_seed, trw_seed = trial_seeds(seed, t)
        mrf = GridMRF.random(height, width, sigma_pair, sigma_unary, seed=mrf_seed, device=dev)
        truth = mrf.exact_log_z()
        t0 = time.perf_counter()
        ref = grid_reference(mrf, reference, trw_trees=trw_trees, seed=trw_seed)
        ref_seconds = time.perf_counter() - t0
        g = torch.Generator(device=dev).manual_seed(sample_seed)
        x0 = ref.sample(n, g)
        x1 = mrf.gibbs(ref.sample(n, g), g, n_sweeps=burn_in)
        l0 = (mrf.log_f(x0) - ref.log_prob(x0)).detach().cpu().numpy().astype(np.float64)
        l1 = (mrf.log_f(x1) - ref.log_prob(x1)).detach().cpu().numpy().astype(np.float64)
        rows += _rows(settings, t, seed, n, truth, estimate_all(l0, l1))
        bound = getattr(ref, "log_z_bound", None)
        if bound is not None:
            b = float(bound)
            row = {c: None for c in TRIAL_COLUMNS}
            row.update(settings)
            row.update(trial=t, seed=seed, method=_bound_method(ref), log_z=b, log_z_stderr=0.0, truth=truth,
                       error=b - truth, n=n, seconds=ref_seconds)
            rows.append(row)
    return _frame(rows)


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
        rec.update(bias=float(np.mean(e)), mse=float(np.mean(e**2)), sd=sd, bias_se=sd / math.sqrt(m),
                   mse_se=sq_sd / math.sqrt(m), mean_stderr=float(np.mean(se)), coverage=coverage, n_trials=int(m))
        out.append(rec)
    res = pd.DataFrame(out, columns=[*keys, *SUMMARY_COLUMNS])
    for c in _INT_COLUMNS:
        if c in res.columns:
            res[c] = pd.array(res[c], dtype="Int64")
    return res


# --------------------------------------------------------------------------- plots
def _style(method: str, i: int) -> dict:
    st = dict(METHOD_STYLES.get(method, {"color": _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)], "marker": "x",
                                         "label": method}))
    st.setdefault("linestyle", "-")
    st.setdefault("linewidth", 1.4)
    st.setdefault("markersize", 5)
    return st


def _method_order(methods) -> list[str]:
    known = [m for m in METHOD_STYLES if m in methods]
    return known + sorted(m for m in methods if m not in METHOD_STYLES)


def _panel_order(values) -> list:
    vals = list(pd.unique(values))
    if all(v in GRID_REFERENCES for v in vals):
        return [r for r in GRID_REFERENCES if r in vals]
    try:
        return sorted(vals)
    except TypeError:
        return vals


def plot_trials(summary: pd.DataFrame, path: str | os.PathLike, *, x: str, panel: str | None = None,
                title: str | None = None, methods=None, log_x: bool | None = None) -> Path:
    """Bias and MSE of ``log Ẑ`` against ``x``, in the layout of the paper's Figs. 1-2 (PNG).

    Top row: bias with ``+-2 bias_se`` error bars and a zero line; bottom row: MSE on a log
    axis.  One line per method with fixed colours/markers (:data:`METHOD_STYLES`; DS drawn
    thicker and on top).  Deterministic bounds (``"mf-bound"``, ``"trw-bound"``) appear as
    dashed lines in the bias row only.  ``x`` is on a log axis when it is ``"sigma0"``.

    Parameters
    ----------
    summary : pandas.DataFrame
        From :func:`summarize_trials`, holding one row per (panel value, method, ``x``): filter
        other varying settings out first.
    path : path-like
        PNG to write (parent directories are created; written to a temporary file in the same
        directory, then renamed onto ``path``).
    x : str
        Column on the horizontal axis (``"sigma0"`` for Fig. 1, ``"sigma_pair"`` for Fig. 2).
    panel : str, optional
        Column with one figure column per value (``"reference"`` for Fig. 2: uniform |
        mean-field | trw); y-axes are not shared, as in the paper.
    title : str, optional
        Figure title.
    methods : sequence of str, optional
        Methods to draw (default all in ``summary``).
    log_x : bool, optional
        Logarithmic ``x`` axis (default: when ``x`` is ``"sigma0"``); labelled at the data points.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    ValueError
        Empty summary, missing columns, no rows for ``methods``, or several rows for one
        (panel value, method, ``x``).
    """
    if len(summary) == 0:
        raise ValueError("summary is empty: nothing to plot")
    need = {x, "method", "bias", "bias_se", "mse"} | ({panel} if panel is not None else set())
    missing = sorted(need - set(summary.columns))
    if missing:
        raise ValueError(f"summary lacks column(s) {missing}")
    s = summary
    if methods is not None:
        methods = list(methods)
        s = s[s["method"].isin(methods)]
        if len(s) == 0:
            raise ValueError(f"summary has no rows for methods {methods}")
    keys = [panel, "method", x] if panel is not None else ["method", x]
    dup = s.duplicated(keys, keep=False)
    if dup.any():
        varying = [c for c in s.columns if c not in keys and c not in SUMMARY_COLUMNS
                   and s.loc[dup, c].nunique(dropna=False) > 1]
        raise ValueError(f"summary has several rows per ({', '.join(keys)}); filter it to one setting first "
                         f"(varying: {varying or 'unknown'})")
    panels = _panel_order(s[panel]) if panel is not None else [None]
    order = _method_order(methods if methods is not None else pd.unique(s["method"]))
    bounds = set(BOUND_METHODS.values())

    plt = pyplot()
    from matplotlib import ticker

    ncol = len(panels)
    fig, axes = plt.subplots(2, ncol, figsize=(4.6 * ncol + 0.6, 7.2), squeeze=False, sharex="col")
    for j, pv in enumerate(panels):
        sp = s if panel is None else s[s[panel] == pv]
        ax_b, ax_m = axes[0, j], axes[1, j]
        for i, method in enumerate(order):
            g = sp[sp["method"] == method].sort_values(x)
            if g.empty:
                continue
            st = _style(method, i)
            xs = g[x].to_numpy(dtype=float)
            bias = g["bias"].to_numpy(dtype=float)
            err = 2.0 * g["bias_se"].to_numpy(dtype=float)
            err = np.where(np.isfinite(err), err, 0.0)
            kw = {"color": st["color"], "marker": st["marker"], "linestyle": st["linestyle"],
                  "linewidth": st["linewidth"], "markersize": st["markersize"], "zorder": st.get("zorder", 2)}
            ax_b.errorbar(xs, bias, yerr=err, capsize=2.5, label=st["label"], **kw)
            if method in bounds or str(method).endswith("-bound"):
                continue
            mse = g["mse"].to_numpy(dtype=float)
            ok = np.isfinite(mse) & (mse > 0)
            if ok.any():
                ax_m.plot(xs[ok], mse[ok], label=st["label"], **kw)
        ax_b.axhline(0.0, color="black", linewidth=0.8, zorder=1)
        ax_m.set_yscale("log")
        xvals = np.unique(sp[x].to_numpy(dtype=float))
        for ax in (ax_b, ax_m):
            if (x == "sigma0") if log_x is None else log_x:
                ax.set_xscale("log", base=2 if x == "K" else 10)
                if 1 < xvals.size <= 12:  # plain labels at the data points instead of crowded 10^k ones
                    ax.set_xticks(xvals)
                    ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
                    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
            ax.grid(True, alpha=0.3, which="both" if ax is ax_m else "major")
        ax_m.set_xlabel(x)
        if panel is not None:
            ax_b.set_title(f"p0 = {pv}" if panel == "reference" else f"{panel} = {pv}")
        if j == 0:
            ax_b.set_ylabel("bias of log Ẑ (nats)")
            ax_m.set_ylabel("MSE of log Ẑ")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    seen = set(labels)
    for ax in axes[0, 1:]:  # methods absent from the first panel
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in seen:
                handles.append(h)
                labels.append(lab)
                seen.add(lab)
    leg_cols = max(1, min(len(labels), 4 if ncol > 1 else 2))
    fig.legend(handles, labels, loc="lower center", ncol=leg_cols, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=9 if ncol == 1 else 11, wrap=True)
    n_rows_legend = math.ceil(len(labels) / leg_cols) if labels else 0
    fig.tight_layout(rect=(0, 0.03 * n_rows_legend + 0.01, 1, 0.96 if title else 1))
    return save_figure(fig, path, dpi=110)


# --------------------------------------------------------------------------- workflow report
#: figure layout per experiment: (x, panel, title)
FIGURES = {
    "gaussian": ("sigma0", None, "Gaussian toy (Liu et al. Fig. 1): p = N(0, 1), p0 = N(0, sigma0^2)"),
    "grid": ("sigma_pair", "reference", "Grid MRFs (Liu et al. Fig. 2)"),
}


def report_trials(files: dict, out_dir: str | os.PathLike) -> dict[str, Path]:
    """Summaries and figures of the workflow's per-trial tables.

    Parameters
    ----------
    files : dict
        ``{"gaussian": [csv, ...], "grid": [csv, ...]}``: per-trial tables written by the
        workflow (one per setting); an experiment with no files is skipped.
    out_dir : path-like
        Receives ``<experiment>.csv`` (:func:`summarize_trials`) and ``<experiment>.png``
        (:func:`plot_trials` in the layout of :data:`FIGURES`), both written atomically.

    Returns
    -------
    dict
        ``{"<experiment>_csv": path, "<experiment>_png": path}`` for every experiment written.
    """
    out: dict[str, Path] = {}
    for experiment, paths in files.items():
        if experiment not in FIGURES:
            raise ValueError(f"unknown trials experiment {experiment!r}; known: {sorted(FIGURES)}")
        paths = list(paths)
        if not paths:
            continue
        df = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
        summary = summarize_trials(df)
        out[f"{experiment}_csv"] = write_csv_atomic(Path(out_dir) / f"{experiment}.csv", summary)
        x, panel, title = FIGURES[experiment]
        out[f"{experiment}_png"] = plot_trials(summary, Path(out_dir) / f"{experiment}.png", x=x, panel=panel,
                                               title=f"{title}: {int(summary['n_trials'].max())} trials")
    return out
