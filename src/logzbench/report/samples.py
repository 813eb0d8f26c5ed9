"""Figures of samples and learned filters: a grid of image-shaped rows (RAISE Fig. 5: samples of an RBM
and of its annealing model ``p_ann``) and a grid of bases (Sohl-Dickstein & Culpepper Fig. 1).

Both draw one image per row of their input, in a near-square grid, grey colormap, without axes (light
blue lines between images), and write the PNG and a PDF beside it atomically
(:func:`logzbench.plotting.save_figure`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from ..plotting import pyplot, save_figure

__all__ = ["image_shape", "plot_filters", "plot_sample_grid"]

#: colour of the one-pixel lines between images (neither black, white nor grey: no pixel value)
_SEPARATOR = "#9ecae1"


def image_shape(n_features: int) -> tuple[int, int] | None:
    """``(h, w)`` of a square image of ``n_features`` pixels (784 -> (28, 28)); ``None`` when
    ``n_features`` is not a square number (not known to be an image)."""
    n = int(n_features)
    side = math.isqrt(n) if n > 0 else 0
    return (side, side) if side > 0 and side * side == n else None


def _check(x, shape, what: str) -> tuple[np.ndarray, tuple[int, int]]:
    """``x`` as a float64 ``(n, h * w)`` array and ``shape`` as ``(h, w)``; ValueError (one line) otherwise."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[0] == 0:
        raise ValueError(f"{what} must be a non-empty 2-D array (one image per row), got shape {a.shape}")
    if shape is None or len(tuple(shape)) != 2:
        raise ValueError(f"{what}: give an image shape (h, w) for rows of {a.shape[1]} values")
    h, w = (int(s) for s in shape)
    if h < 1 or w < 1 or h * w != a.shape[1]:
        raise ValueError(f"{what} rows have {a.shape[1]} values, not an image of shape ({h}, {w})")
    if not np.isfinite(a).all():
        raise ValueError(f"{what} contains NaN or inf")
    return a, (h, w)


def _grid(images: np.ndarray, shape: tuple[int, int], path, title: str | None, vmin, vmax) -> Path:
    """Tile ``images`` ``(n, h * w)`` into a near-square grid separated by one blank pixel and save it."""
    n = images.shape[0]
    h, w = shape
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    canvas = np.full((rows * (h + 1) - 1, cols * (w + 1) - 1), np.nan)
    for k in range(n):
        r, c = divmod(k, cols)
        canvas[r * (h + 1) : r * (h + 1) + h, c * (w + 1) : c * (w + 1) + w] = images[k].reshape(h, w)
    plt = pyplot()
    scale = 6.0 / max(canvas.shape)
    size = (max(2.0, canvas.shape[1] * scale), max(2.0, canvas.shape[0] * scale + (0.4 if title else 0.0)))
    fig, ax = plt.subplots(figsize=size)
    cmap = plt.get_cmap("gray").with_extremes(bad=_SEPARATOR)
    ax.imshow(np.ma.masked_invalid(canvas), cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest")
    ax.set_axis_off()
    if title:
        ax.set_title(title, fontsize=10)
    fig.subplots_adjust(left=0.02, right=0.98, bottom=0.02, top=0.92 if title else 0.98)
    return save_figure(fig, path, dpi=110)


def plot_sample_grid(
    x, image_shape: tuple[int, int], path: str | os.PathLike, title: str | None = None, n_max: int = 100
) -> Path:
    """Samples as images: the first ``n_max`` rows of ``x`` in a grid (PNG and PDF, written atomically).

    Parameters
    ----------
    x : array-like, shape (n, h * w)
        Samples (binary 0/1, or real: each grid shares one grey scale from the smallest to the largest value).
    image_shape : (int, int)
        ``(h, w)`` of one image (:func:`image_shape` for square ones).
    path : path-like
        The PNG (the PDF is written beside it).
    title : str, optional
    n_max : int
        Most images drawn.
    """
    a, shape = _check(x, image_shape, "samples")
    a = a[: max(1, int(n_max))]
    lo, hi = float(a.min()), float(a.max())
    if lo >= 0.0 and hi <= 1.0:  # binary or probabilities: black 0, white 1
        lo, hi = 0.0, 1.0
    return _grid(a, shape, path, title, lo, hi if hi > lo else lo + 1.0)


def plot_filters(
    weights, image_shape: tuple[int, int], path: str | os.PathLike, title: str | None = None, n_max: int = 100
) -> Path:
    """Learned bases or filters as images: one per row of ``weights`` (an RBM's ``W.T``, a product of
    experts' ``Phi``), each scaled symmetrically around 0 by its own largest absolute value, so grey is 0
    (PNG and PDF, written atomically).

    Parameters
    ----------
    weights : array-like, shape (n_filters, h * w)
    image_shape : (int, int)
    path : path-like
    title : str, optional
    n_max : int
        Most filters drawn (the first ones).
    """
    a, shape = _check(weights, image_shape, "filters")
    a = a[: max(1, int(n_max))]
    peak = np.abs(a).max(axis=1, keepdims=True)
    a = a / np.where(peak > 0, peak, 1.0)
    return _grid(a, shape, path, title, -1.0, 1.0)
