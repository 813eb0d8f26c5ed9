"""Binarization of grey-level data in [0, 1]."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

METHODS = ("stochastic", "threshold")
_CHUNK_ROWS = 4096


def check_threshold(threshold: Any) -> float:
    """``threshold`` as a float in [0, 1), the cut-offs that can give both bits: grey levels are in
    [0, 1] and a bit is 1 where the level is strictly above the threshold, so 1 and above give all
    zeros, a negative one all ones, NaN all zeros.

    Raises
    ------
    ValueError
        Naming the value and the range.
    """
    try:
        t = float(threshold)
    except (TypeError, ValueError):
        t = math.nan
    if isinstance(threshold, bool) or not 0.0 <= t < 1.0:
        raise ValueError(
            f"threshold {threshold!r} must be a number in [0, 1): grey levels are scaled to [0, 1] and a "
            "bit is 1 where the level exceeds the threshold (1 or more gives all zeros, a negative one "
            "all ones)"
        )
    return t


def binarize(x: Any, method: str = "stochastic", seed: Any = 0, threshold: float = 0.5) -> np.ndarray:
    """Turn intensities in [0, 1] into 0/1 bits.

    Parameters
    ----------
    x : array_like
        Finite values in [0, 1], any shape (rows first).
    method : {"stochastic", "threshold"}
        ``"stochastic"``: each bit is 1 with probability ``x`` (Salakhutdinov & Murray
        2008), drawn as ``u < x`` with ``u = numpy.random.default_rng(seed).random(x.shape)``.
        ``"threshold"``: ``x > threshold`` (strict; ``seed`` is unused).
    seed : int or sequence of int
        Seed of the :class:`numpy.random.Generator` (anything ``default_rng`` accepts).
        The same seed gives the same bits; uniforms are drawn in row-major order, so
        the first ``n`` rows of a larger input get the same bits as those ``n`` rows alone.
    threshold : float, default 0.5
        Cut-off for ``method="threshold"``, in [0, 1) (:func:`check_threshold`).

    Returns
    -------
    numpy.ndarray
        ``uint8`` array of 0/1 with the shape of ``x``.

    Raises
    ------
    ValueError
        For an unknown method, values that are NaN, infinite or outside [0, 1], or a threshold
        outside [0, 1).
    """
    x = np.asarray(x, dtype=np.float64)
    if method not in METHODS:
        raise ValueError(f"unknown binarization method {method!r}; choose from {METHODS}")
    if method == "threshold":
        threshold = check_threshold(threshold)
    if x.size and (not np.isfinite(x).all() or x.min() < 0.0 or x.max() > 1.0):
        raise ValueError("binarize expects finite values in [0, 1]")
    if method == "threshold" or x.size == 0:
        return (x > threshold).astype(np.uint8)
    rng = np.random.default_rng(seed)
    rows = x.reshape(x.shape[0], -1) if x.ndim > 1 else x.reshape(-1, 1)
    out = np.empty(rows.shape, dtype=np.uint8)
    for start in range(0, len(rows), _CHUNK_ROWS):  # bounded memory, same stream as one draw
        block = rows[start : start + _CHUNK_ROWS]
        out[start : start + _CHUNK_ROWS] = rng.random(block.shape) < block
    return out.reshape(x.shape)
