"""Natural-image patches: cutting them out of an image, and the log / mean subtraction / PCA / whitening
transform fitted on training patches and applied unchanged to any patches (the van Hateren data set of
:mod:`logzbench.data.vanhateren`; Sohl-Dickstein & Culpepper 2012)."""

from __future__ import annotations

import numpy as np

from ..errors import DatasetError


def extract_patches(image: np.ndarray, rows, cols, patch_size: int) -> np.ndarray:
    """Cut ``patch_size`` x ``patch_size`` patches with top-left corners ``(rows[i], cols[i])``.

    Parameters
    ----------
    image : numpy.ndarray
        (H, W) image.
    rows, cols : array-like of int
        (n,) top-left corners; a patch must lie inside the image.
    patch_size : int
        Side ``P``.

    Returns
    -------
    numpy.ndarray
        (n, P, P) patches, dtype of ``image``.

    Raises
    ------
    ValueError
        If a patch does not fit inside the image.
    """
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    h, w = image.shape
    if rows.size and (rows.min() < 0 or cols.min() < 0 or rows.max() + patch_size > h or cols.max() + patch_size > w):
        raise ValueError(f"a {patch_size}x{patch_size} patch does not fit inside the {h}x{w} image")
    offset = np.arange(patch_size)
    return image[rows[:, None, None] + offset[None, :, None], cols[:, None, None] + offset[None, None, :]]


def transform_patches(raw_patches, whitening: dict) -> np.ndarray:
    """Apply the log / mean subtraction / PCA / whitening pipeline to raw patches.

    Parameters
    ----------
    raw_patches : array-like
        (n, P, P) raw (linear, positive) pixel values, or the same flattened row-major to
        (n, P*P).
    whitening : dict
        ``pca_components`` (M, P*P), ``pca_mean`` (P*P,), ``whitening_scale`` (M,) and
        optionally ``remove_dc`` (bool, default False), as returned by
        :func:`~logzbench.data.vanhateren.prepare_vanhateren` or
        :func:`~logzbench.data.vanhateren.load_whitening`.

    Returns
    -------
    numpy.ndarray
        ``float64`` (n, M): ``((log x [- its own mean]) - pca_mean) @ pca_components.T / whitening_scale``.

    Raises
    ------
    ValueError
        If the shapes do not match the whitening arrays.
    DatasetError
        If a patch holds a non-positive or non-finite value (log undefined).
    """
    components, mean, scale = (
        np.asarray(whitening[k], dtype=np.float64) for k in ("pca_components", "pca_mean", "whitening_scale")
    )
    logged = _log_patches(raw_patches, components.shape[1], bool(whitening.get("remove_dc", False)))
    if mean.shape != (components.shape[1],) or scale.shape != (components.shape[0],):
        raise ValueError(
            f"inconsistent whitening: pca_components {components.shape}, pca_mean {mean.shape}, "
            f"whitening_scale {scale.shape}"
        )
    return ((logged - mean) @ components.T) / scale


def fit_whitening(raw_patches, n_components: int, remove_dc: bool = False) -> dict:
    """Fit the PCA whitening on raw training patches.

    Parameters
    ----------
    raw_patches : array-like
        (n, P, P) or (n, P*P) raw positive pixel values.
    n_components : int
        ``M``, at most ``P*P`` (``P*P - 1`` with ``remove_dc``) and below ``n``.
    remove_dc : bool, default False
        Also remove each patch's own mean after the log (see :mod:`logzbench.data.vanhateren`).

    Returns
    -------
    dict
        ``pca_components`` (M, P*P), ``pca_mean`` (P*P,), ``whitening_scale`` (M,),
        ``explained_variance`` (M,) (all ``float64``), ``remove_dc`` (bool).

    Raises
    ------
    ValueError
        If the training patches span fewer than ``M`` dimensions.
    DatasetError
        If a patch holds a non-positive or non-finite value.
    """
    from sklearn.decomposition import PCA
    from threadpoolctl import threadpool_limits

    raw = np.asarray(raw_patches)
    n_pixels = int(np.prod(raw.shape[1:])) if raw.ndim >= 2 else 0
    logged = _log_patches(raw, n_pixels, remove_dc)
    # one BLAS thread: the same result whatever the thread count, and no slowdown from
    # oversubscribed BLAS threads on a busy machine (a 10,000 x 256 SVD takes well under a second)
    with threadpool_limits(limits=1, user_api="blas"):
        pca = PCA(n_components=int(n_components), svd_solver="full").fit(logged)
    variance = np.asarray(pca.explained_variance_, dtype=np.float64)
    # components with (numerically) zero variance cannot be whitened
    if not (np.isfinite(variance).all() and variance.min() > 1e-12 * max(variance.max(), 1e-300)):
        raise ValueError(
            f"the {len(logged)} training patches span fewer than n_components={n_components} "
            f"dimensions (smallest component variance {variance.min():.3g}); lower n_components"
        )
    return {
        "pca_components": np.asarray(pca.components_, dtype=np.float64),
        "pca_mean": np.asarray(pca.mean_, dtype=np.float64),
        "whitening_scale": np.sqrt(variance),
        "explained_variance": variance,
        "remove_dc": bool(remove_dc),
    }


def _log_patches(raw_patches, n_pixels: int, remove_dc: bool) -> np.ndarray:
    """(n, P, P) or (n, P*P) raw patches -> (n, P*P) float64 logs (minus each row's mean with ``remove_dc``)."""
    raw = np.asarray(raw_patches)
    if raw.ndim < 2 or raw.shape[0] == 0 or int(np.prod(raw.shape[1:])) != n_pixels or n_pixels == 0:
        raise ValueError(
            f"raw patches have shape {raw.shape}; expected a non-empty (n, P, P) or (n, P*P) "
            f"array with P*P = {n_pixels}"
        )
    if raw.dtype.kind not in "biuf":
        raise ValueError(f"raw patches have dtype {raw.dtype}; expected numbers")
    flat = raw.reshape(len(raw), n_pixels).astype(np.float64)
    bad = ~(np.isfinite(flat) & (flat > 0))
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise DatasetError(
            f"raw patch {i} has the value {flat[i, j]!r} at pixel {j}; the log of a non-positive "
            "or non-finite luminance is undefined"
        )
    logged = np.log(flat)
    if remove_dc:
        logged -= logged.mean(axis=1, keepdims=True)
    return logged
