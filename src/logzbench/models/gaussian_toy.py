"""The 1-D Gaussian toy of Liu, Peng, Ihler & Fisher (2015), Example 1 and Sec. 6 (Fig. 1).

Target ``f(x) = exp(-x^2 / (2 sigma^2))``, so ``p = N(0, sigma^2)`` and
``log Z = log(sigma sqrt(2 pi))`` is known; reference ``p_0 = N(0, sigma0^2)`` (normalised).
IS has infinite variance for ``sigma0 <= sigma / sqrt(2)``, reverse IS for ``sigma0 >= sqrt(2) sigma``;
discriminance sampling has finite variance for every ``sigma0 > 0``.

Randomness: a :class:`numpy.random.Generator`, passed to :func:`draw`.  The experiment
driving the estimators (:func:`logzbench.trials.sweep`, :func:`logzbench.trials.gaussian_trials`)
seeds it from integers, so the same standard-normal draws are scaled by every ``sigma0``.
"""

from __future__ import annotations

import math

import numpy as np


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
