"""Combinations of IS and reverse IS, and discriminance sampling, as result records.

Liu, Peng, Ihler & Fisher (2015), Sec. 6 "Setting", combine ``log Ẑ_is`` (from ``l0`` at
``x ~ p_0``) and ``log Ẑ_ris`` (from ``l1`` at ``x ~ p``), with ``l = log f - log p_0``:

* naive average ``(log Ẑ_is + log Ẑ_ris) / 2`` (:func:`naive_average`, ``"is-avg"``);
* inverse-variance weighted average (:func:`weighted_average`, ``"is-weighted"``);
* selection of the one with the smaller estimated variance (:func:`weighted_selection`,
  ``"is-select"``; ties go to IS).

The paper's variance estimates are ``v̂_is = var̂(w) / Ẑ_is^2`` and ``v̂_ris = var̂(1/w) Ẑ_ris^2``
(``w = f / p_0``), computed here from weights rescaled by their maximum so nothing overflows.
They are per-sample quantities; the variance of ``log Ẑ`` is ``v̂ / n`` (the delta method), and
the weights and selection use ``v̂_is / n0`` against ``v̂_ris / n1`` (the paper's rule when
``n0 = n1``).  The reported standard errors follow from those estimates, assuming the two
samples independent -- they inherit the unreliability the paper points out: where the weights
have infinite variance, ``v̂`` is typically far too small.  Intervals are percentile bootstraps
that resample ``l0`` and ``l1`` independently and recompute the combination.

:func:`discriminance_sampling` wraps :func:`.discriminance.discriminance` in the same record
(``"ds"``, interval ``log Ẑ +- 1.96 se``).
"""

from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np

from ..stats import pareto_khat
from .discriminance import discriminance
from .importance import as_log_ratios, log_mean_exp, relative_variance
from .result import EstimateResult

#: Bootstrap replicates are computed in chunks of about this many array elements.
_CHUNK = 2_000_000


def _components(L0: np.ndarray, L1: np.ndarray) -> dict:
    """IS / RIS estimates and variance estimates along the last axis (vectorised over replicates)."""
    n0, n1 = L0.shape[-1], L1.shape[-1]
    v_is, v_ris = relative_variance(L0), relative_variance(-L1)
    return {
        "log_z_is": log_mean_exp(L0),
        "log_z_ris": -log_mean_exp(-L1),
        "v_is": v_is,
        "v_ris": v_ris,
        "var_log_z_is": v_is / n0,
        "var_log_z_ris": v_ris / n1,
    }


def _naive(c: dict):
    log_z = 0.5 * (c["log_z_is"] + c["log_z_ris"])
    return log_z, 0.25 * (c["var_log_z_is"] + c["var_log_z_ris"]), {}


def _weighted(c: dict):
    a, b = c["var_log_z_is"], c["var_log_z_ris"]
    tot = a + b
    with np.errstate(invalid="ignore", divide="ignore"):
        # lambda = (1/a) / (1/a + 1/b) = b / (a + b); a zero variance takes all the weight
        lam = np.where(tot > 0, b / np.where(tot > 0, tot, 1.0), 0.5)
        var = np.where(tot > 0, a * b / np.where(tot > 0, tot, 1.0), 0.0)
    log_z = lam * c["log_z_is"] + (1.0 - lam) * c["log_z_ris"]
    return log_z, var, {"weight_is": lam}


def _select(c: dict):
    pick_is = c["var_log_z_is"] <= c["var_log_z_ris"]
    log_z = np.where(pick_is, c["log_z_is"], c["log_z_ris"])
    var = np.where(pick_is, c["var_log_z_is"], c["var_log_z_ris"])
    return log_z, var, {"pick_is": pick_is}


def _bootstrap(rule: Callable, l0: np.ndarray, l1: np.ndarray, n_bootstrap: int, seed: int) -> tuple[float, float]:
    if n_bootstrap <= 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    n0, n1 = l0.size, l1.size
    chunk = max(1, _CHUNK // (n0 + n1))
    out = []
    for start in range(0, n_bootstrap, chunk):
        b = min(chunk, n_bootstrap - start)
        L0 = l0[rng.integers(0, n0, size=(b, n0))]
        L1 = l1[rng.integers(0, n1, size=(b, n1))]
        out.append(np.asarray(rule(_components(L0, L1))[0], dtype=np.float64))
    boot = np.concatenate(out)
    boot = boot[np.isfinite(boot)]
    if boot.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return float(lo), float(hi)


def _combination(
    name: str, rule: Callable, l0, l1, n_bootstrap: int, seed: int, settings: dict | None
) -> EstimateResult:
    t0 = time.perf_counter()
    l0 = as_log_ratios(l0, f"{name}: l0")
    l1 = as_log_ratios(l1, f"{name}: l1")
    if rule is not _naive and (l0.size < 2 or l1.size < 2):
        raise ValueError(
            f"{name}: variance estimates need at least 2 samples from each of p_0 and p "
            f"(got n0 = {l0.size}, n1 = {l1.size})"
        )
    c = {k: float(v) for k, v in _components(l0, l1).items()}
    log_z, var, info = rule(c)
    ci = _bootstrap(rule, l0, l1, n_bootstrap, seed)
    ess_is, ess_ris = _ess(l0), _ess(-l1)
    khat_is, khat_ris = pareto_khat(l0), pareto_khat(-l1)
    extra = {**c, "ess_is": ess_is, "ess_ris": ess_ris, "khat_is": khat_is, "khat_ris": khat_ris}
    ess = float("nan")
    # both weight sets enter the averages: the heavier tail decides
    khat = float(np.nanmax([khat_is, khat_ris])) if np.isfinite([khat_is, khat_ris]).any() else float("nan")
    if "weight_is" in info:
        extra["weight_is"] = float(info["weight_is"])
    if "pick_is" in info:
        extra["selected"] = "is" if bool(info["pick_is"]) else "ris"
        ess = ess_is if bool(info["pick_is"]) else ess_ris
        khat = khat_is if bool(info["pick_is"]) else khat_ris
    seconds = time.perf_counter() - t0
    return EstimateResult(
        estimator=name,
        log_z=float(log_z),
        log_z_stderr=math.sqrt(float(var)),
        log_z_ci=ci,
        ess=ess,
        khat=khat,
        n_chains=int(l0.size + l1.size),
        seconds=seconds,
        settings={"n0": int(l0.size), "n1": int(l1.size), "n_bootstrap": n_bootstrap, "seed": seed, **(settings or {})},
        extra=extra,
    )


def _ess(lw: np.ndarray) -> float:
    """``(sum w)^2 / sum w^2`` of ``w = exp(lw)`` (as :func:`.result.ess_from_log_weights`), in numpy."""
    w = np.exp(lw - np.max(lw))
    return float(np.sum(w) ** 2 / np.sum(w**2))


_PARAMS_DOC = """
    Parameters
    ----------
    l0 : array-like, shape (n0,)
        ``log f(x) - log p_0(x)`` at ``x ~ p_0`` (for IS).
    l1 : array-like, shape (n1,)
        The same at ``x ~ p`` (for reverse IS).
    n_bootstrap : int
        Bootstrap replicates of the percentile interval (0: none, NaN).
    seed : int
        Seed of the bootstrap.
    settings : dict, optional
        Merged into ``result.settings`` (which holds ``n0`` and ``n1``).

    Returns
    -------
    EstimateResult
        ``extra`` holds the components ``log_z_is``, ``log_z_ris``, the paper's ``v_is``,
        ``v_ris``, the variances ``var_log_z_is = v_is / n0``, ``var_log_z_ris = v_ris / n1``,
        and the ESS and Pareto k-hat (``khat_is``, ``khat_ris``) of both weight sets; ``khat`` is
        the larger k-hat (the selected one's for ``is-select``).  ``n_chains = n0 + n1``.

    Raises
    ------
    ValueError
        Empty input (or, for the variance-based rules, fewer than 2 samples on a side).
    EstimatorError
        Non-finite input.
"""


def naive_average(l0, l1, *, n_bootstrap: int = 1000, seed: int = 0, settings: dict | None = None) -> EstimateResult:
    """``log Ẑ_avg = (log Ẑ_is + log Ẑ_ris) / 2`` (``"is-avg"``); ``var = (v_is/n0 + v_ris/n1) / 4``."""
    return _combination("is-avg", _naive, l0, l1, n_bootstrap, seed, settings)


def weighted_average(l0, l1, *, n_bootstrap: int = 1000, seed: int = 0, settings: dict | None = None) -> EstimateResult:
    """Inverse-variance weighted average of ``log Ẑ_is`` and ``log Ẑ_ris`` (``"is-weighted"``).

    ``extra["weight_is"]`` is the weight of IS; the standard error is ``(1/var_is + 1/var_ris)^(-1/2)``.
    """
    return _combination("is-weighted", _weighted, l0, l1, n_bootstrap, seed, settings)


def weighted_selection(
    l0, l1, *, n_bootstrap: int = 1000, seed: int = 0, settings: dict | None = None
) -> EstimateResult:
    """The one of IS / reverse IS with the smaller estimated variance of ``log Ẑ`` (``"is-select"``).

    ``extra["selected"]`` is ``"is"`` or ``"ris"``; ``ess`` and the standard error are the selected one's.
    """
    return _combination("is-select", _select, l0, l1, n_bootstrap, seed, settings)


for _f in (naive_average, weighted_average, weighted_selection):
    if _f.__doc__:  # None under python -OO
        _f.__doc__ += _PARAMS_DOC


def discriminance_sampling(l0, l1, *, log_w0=None, log_w1=None, settings: dict | None = None) -> EstimateResult:
    """Discriminance sampling estimate of ``log Z`` (``"ds"``) as a result record.

    Parameters
    ----------
    l0, l1 : array-like, shapes (n0,), (n1,)
        ``log f(x) - log p_0(x)`` at ``x ~ p_0`` and at ``x ~ p``.
    log_w0, log_w1 : array-like, optional
        Log importance weights of the samples (uniform when omitted).
    settings : dict, optional
        Merged into ``result.settings`` (which holds ``n0`` and ``n1``).

    Returns
    -------
    EstimateResult
        ``log_z`` and ``log_z_stderr`` from :func:`.discriminance.discriminance`, interval
        ``log_z +- 1.96 se``, ``ess = n_eff`` (effective samples per side), ``extra["gamma"]``;
        ``khat`` is NaN (the logistic fit's weights are bounded: no importance-weight tail).

    Raises
    ------
    ValueError
        Empty input.
    EstimatorError
        Non-finite input, or samples that do not overlap.
    """
    t0 = time.perf_counter()
    l0 = as_log_ratios(l0, "discriminance sampling: l0")
    l1 = as_log_ratios(l1, "discriminance sampling: l1")
    fit = discriminance(l0, l1, log_w0=log_w0, log_w1=log_w1)
    seconds = time.perf_counter() - t0
    half = 1.96 * fit.stderr
    return EstimateResult(
        estimator="ds",
        log_z=fit.log_z,
        log_z_stderr=fit.stderr,
        log_z_ci=(fit.log_z - half, fit.log_z + half),
        ess=fit.n_eff,
        n_chains=int(l0.size + l1.size),
        seconds=seconds,
        settings={
            "n0": int(l0.size),
            "n1": int(l1.size),
            "weighted": log_w0 is not None or log_w1 is not None,
            **(settings or {}),
        },
        extra={"gamma": fit.gamma},
    )
