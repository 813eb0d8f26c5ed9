"""Discriminance sampling (Liu, Peng, Ihler & Fisher 2015, Sec. 4): ``log Z`` by classifying
samples of the target against samples of a normalised reference ``p_0``.

With ``l(x) = log f(x) - log p_0(x)``, samples ``x_0 ~ p_0`` (label 0) and ``x_1 ~ p`` (label 1),
the conditional likelihood of the labels under ``p(y = 1 | x; c) = n_1 f(x)/c / (n_1 f(x)/c + n_0 p_0(x))``
is maximised where the predicted and observed label proportions match (the paper's Eq. (3),
here with unequal sample sizes and optional importance weights):

    n0 sum_i w0_i sigmoid(l(x0_i) - t + b) = n1 sum_i w1_i sigmoid(t - b - l(x1_i)),   t = log c,  b = log(n1 / n0),

with normalised weights ``w`` on each side and ``n`` the (effective) sample sizes.

The left side increases and the right side decreases in ``t``, so the root is unique; it is
found with a bracketing root finder (:func:`scipy.optimize.brentq`) on values computed in log
space.  The standard error is that of the intercept of a case-control logistic regression
(equivalently, optimal bridge sampling; Meng & Wong 1996),

    var(log Ẑ) = 1 / (N gamma) - 1 / n0 - 1 / n1,   N = n0 + n1,

with ``gamma = E[var(y | x)]`` over the pooled sample, estimated at the root.  (The paper's
Prop. 1 states ``(1/4 - gamma) / (N gamma^2)``, larger by ``1 / (4 gamma)`` for ``n0 = n1``;
in repeated Gaussian-toy trials the formula above matched the observed spread within a few
per cent, the paper's overstated it up to twofold.)  When the two samples do not overlap,
``gamma`` is (numerically) zero and the estimate is arbitrary: that is an
:class:`~logzbench.errors.EstimatorError`, never a silent infinity.

The weighted form (normalised weights within each sample) is the building block of annealed
discriminance sampling (:mod:`logzbench.estimators.ads`), where each sample is an AIS
population with its importance weights.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, log_expit

from ..errors import EstimatorError

#: ``N gamma`` (the expected number of ambiguous labels) below this means the samples are separable.
MIN_OVERLAP = 1e-3


class DiscriminanceFit(NamedTuple):
    """Root of the ratio-matching equation and its uncertainty."""

    log_z: float  #: ``log Ẑ`` (``log Z_1 - log Z_0`` when ``p_0`` is unnormalised)
    stderr: float  #: asymptotic standard error of ``log Ẑ`` (see the module docstring)
    gamma: float  #: estimated ``E[var(y | x)]``, in ``(0, 1/4]``
    n_eff: float  #: effective number of samples per side


def _normalised(log_w: np.ndarray | None, n: int) -> np.ndarray:
    if log_w is None:
        return np.full(n, 1.0 / n)
    log_w = np.asarray(log_w, dtype=np.float64)
    if log_w.shape != (n,):
        raise ValueError(f"weights have shape {log_w.shape}, expected ({n},)")
    if not np.isfinite(log_w).all():
        raise EstimatorError("discriminance sampling: non-finite importance weights")
    w = np.exp(log_w - log_w.max())
    return w / w.sum()


def _ess(w: np.ndarray) -> float:
    return float(1.0 / np.sum(w**2))


def discriminance(l0, l1, log_w0=None, log_w1=None) -> DiscriminanceFit:
    """Solve the (weighted) ratio-matching equation for ``log Z``.

    Parameters
    ----------
    l0 : array-like, shape (n0,)
        ``log f(x) - log p_0(x)`` at the reference samples ``x ~ p_0``.
    l1 : array-like, shape (n1,)
        The same at the target samples ``x ~ p``.
    log_w0, log_w1 : array-like, optional
        Log importance weights of the samples (AIS populations); uniform when omitted.

    Returns
    -------
    DiscriminanceFit

    Raises
    ------
    EstimatorError
        When a value is not finite or the samples do not overlap (``gamma`` ~ 0).
    """
    l0 = np.asarray(l0, dtype=np.float64).ravel()
    l1 = np.asarray(l1, dtype=np.float64).ravel()
    if l0.size == 0 or l1.size == 0:
        raise ValueError("discriminance sampling needs samples from both p_0 and p")
    if not (np.isfinite(l0).all() and np.isfinite(l1).all()):
        raise EstimatorError("discriminance sampling: non-finite log f - log p_0 (NaN or overflow in the model)")
    w0, w1 = _normalised(log_w0, l0.size), _normalised(log_w1, l1.size)
    n0, n1 = _ess(w0), _ess(w1)
    b = math.log(n1 / n0)

    def g(t: float) -> float:  # score of the conditional likelihood in t (decreasing)
        return float(n0 * np.dot(w0, expit(l0 - t + b)) - n1 * np.dot(w1, expit(t - b - l1)))

    lo = float(min(l0.min(), l1.min())) - 50.0
    hi = float(max(l0.max(), l1.max())) + 50.0
    t = brentq(g, lo, hi, xtol=1e-12, rtol=4 * np.finfo(float).eps, maxiter=500)
    # gamma = E[var(y|x)] over the pooled sample (weights scaled to the effective sizes)
    s0 = expit(l0 - t + b)
    s1 = expit(l1 - t + b)
    gamma = float((n0 * np.dot(w0, s0 * (1 - s0)) + n1 * np.dot(w1, s1 * (1 - s1))) / (n0 + n1))
    n_eff = 2.0 / (1.0 / n0 + 1.0 / n1)  # harmonic mean of the two sides
    if gamma * (n0 + n1) < MIN_OVERLAP or not math.isfinite(gamma):
        raise EstimatorError(
            "discriminance sampling: the samples of p and p_0 do not overlap (gamma = "
            f"{gamma:.3g}); log Z is not identified. Use a closer reference distribution or intermediate "
            "distributions (annealed discriminance sampling)."
        )
    var = max(1.0 / ((n0 + n1) * gamma) - 1.0 / n0 - 1.0 / n1, 0.0)
    return DiscriminanceFit(float(t), math.sqrt(var), gamma, n_eff)


def log_likelihood(t: float, l0, l1) -> float:
    """Conditional log-likelihood of the labels at ``log c = t`` (equal-weight case; for tests)."""
    l0, l1 = np.asarray(l0, dtype=np.float64), np.asarray(l1, dtype=np.float64)
    b = math.log(l1.size / l0.size)
    return float(log_expit(t - b - l0).sum() + log_expit(l1 - t + b).sum())
