"""Omniglot (Lake, Salakhutdinov & Tenenbaum 2015) as 28x28 grey levels, with a fixed random split.

Source
    ``images_background.npz`` (964 characters, 30 alphabets) and ``images_evaluation.npz``
    (659 characters, 20 alphabets) from ``bitsandscraps/omniglot`` at commit
    ``b0481240b7eb42393285a93ce7d2f266ff10c62b``: lossless NumPy copies of the official
    ``brendenlake/omniglot`` PNGs, ``images`` ``bool`` (n_char, 20, 105, 105) with
    True = white background, ``labels`` (n_char, 20) = within-file character index.  Both
    are verified against their sha256 by :func:`logzbench.data.download.fetch` (mirror,
    cache or download) and read with ``allow_pickle=False``.

Processing (deterministic, no randomness except the split)
    1. Invert, so ink = 1 and background = 0.
    2. Downsample 105x105 -> 28x28 by an *exact* area average (box filter): output pixel
       ``(i, j)`` is the mean of the input over the square ``[3.75 i, 3.75 (i+1)) x
       [3.75 j, 3.75 (j+1))``, input pixels partly inside counting with their covered
       fraction.  Equivalently: upsample 4x by pixel replication (420x420) and average
       15x15 blocks.  Computed as ``B @ X @ B.T / 225`` with an integer weight matrix ``B``
       (28x105, rows summing to 15), so every value is exactly ``k / 225`` with ``k`` in
       0..225, independent of the BLAS library or thread count.  (``torch``'s
       ``interpolate(mode="area")`` is not used: for a non-integer factor it averages
       overlapping integer windows with equal weights, which is not the area average.)
    3. The grey levels in [0, 1] are binarized later by
       :func:`logzbench.data.prepare_dataset` (stochastically by default, as for MNIST).

Labels
    A global character index: background characters 0..963 (file order), evaluation
    characters 964..1622 (964 + index in the evaluation file).  Each character has 20
    drawings (drawers 0..19).

Split
    The 1623 x 20 = 32,460 images are pooled in the order (background characters,
    then evaluation characters; within a character, drawers 0..19), i.e. pool index
    ``20 * label + drawer``.  ``perm = numpy.random.default_rng(split_seed).permutation(32460)``;
    ``perm[:n_train]`` is the training set and ``perm[n_train:n_train + n_test]`` the test set,
    both in permutation order.  With the defaults (24,345 / 8,070, the sizes of Burda et
    al.'s 28x28 Omniglot used by IWAE and RAISE, ``split_seed=0``) the last 45 images of the
    permutation are not used.  The split mixes characters and alphabets between train and
    test (every drawing is in at most one split); it is not Burda et al.'s own split, whose
    file (``chardata.mat``) cannot be regenerated from these sources.  A validation set, when
    asked for (``prepare_dataset(..., n_valid=k)``), is the last ``k`` training rows.
"""

from __future__ import annotations

import os
import zipfile

import numpy as np

from ..errors import DatasetError
from .download import fetch, remote_file
from .sizes import OMNIGLOT_ROWS

IMAGE_SHAPE = (28, 28)
SOURCE_SHAPE = (105, 105)
N_DRAWERS = 20
#: Registry file names in pool order, with their number of characters.
OMNIGLOT_FILES = {"images_background.npz": 964, "images_evaluation.npz": 659}
N_CHARACTERS = sum(OMNIGLOT_FILES.values())  # 1623
N_IMAGES = N_CHARACTERS * N_DRAWERS  # 32460
DEFAULT_N_TRAIN = OMNIGLOT_ROWS["train"]
DEFAULT_N_TEST = OMNIGLOT_ROWS["test"]
DEFAULT_SPLIT_SEED = 0
_SUB = 4  # subpixels per source pixel and axis: 105 * 4 = 420 = 28 * 15
_BLOCK = SOURCE_SHAPE[0] * _SUB // IMAGE_SHAPE[0]  # 15 subpixels per output pixel and axis
_CHUNK = 1024  # images per matrix product (bounded memory)


def area_weights() -> np.ndarray:
    """Integer box-filter weights ``B`` (28, 105) of the area average.

    ``B[i, j]`` is the number of quarter-pixels of source pixel ``j`` inside output pixel ``i``
    (source pixel ``j`` covers subpixels ``4j..4j+3`` of 420, output pixel ``i`` subpixels
    ``15i..15i+14``).  Rows sum to 15 (an output pixel spans 3.75 source pixels), columns to 4.
    """
    sub = np.arange(SOURCE_SHAPE[0] * _SUB)
    weights = np.zeros((IMAGE_SHAPE[0], SOURCE_SHAPE[0]), dtype=np.int64)
    np.add.at(weights, (sub // _BLOCK, sub // _SUB), 1)
    return weights


def downsample(ink: np.ndarray) -> np.ndarray:
    """Exact area-average downsampling of 105x105 binary images to 28x28.

    Parameters
    ----------
    ink : numpy.ndarray
        ``bool`` or 0/1 array (N, 105, 105), 1 = ink.

    Returns
    -------
    numpy.ndarray
        ``float64`` (N, 784), row-major 28x28, values ``k / 225`` in [0, 1].
    """
    ink = np.asarray(ink)
    if ink.ndim != 3 or ink.shape[1:] != SOURCE_SHAPE:
        raise ValueError(f"expected images of shape (N, 105, 105), got {ink.shape}")
    b = area_weights().astype(np.float32)  # integer sums <= 225 are exact in float32
    out = np.empty((len(ink), IMAGE_SHAPE[0] * IMAGE_SHAPE[1]), dtype=np.float64)
    src, dst = SOURCE_SHAPE[0], IMAGE_SHAPE[0]
    for start in range(0, len(ink), _CHUNK):
        x = ink[start : start + _CHUNK].astype(np.float32)
        n = len(x)
        # two plain 2-D products (one BLAS call each): columns first, then rows
        y = (x.reshape(n * src, src) @ b.T).reshape(n, src, dst)  # (image, source row, output col)
        z = (y.transpose(0, 2, 1).reshape(n * dst, src) @ b.T).reshape(n, dst, dst)  # (image, col, row)
        out[start : start + n] = z.transpose(0, 2, 1).reshape(n, -1)  # integers 0..225
    out /= float(_BLOCK * _BLOCK)
    return out


def load_omniglot(
    mirror: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    n_train: int = DEFAULT_N_TRAIN,
    n_test: int = DEFAULT_N_TEST,
    split_seed: int = DEFAULT_SPLIT_SEED,
) -> dict:
    """Load Omniglot as 28x28 grey levels with a fixed random train/test split (see module docstring).

    Parameters
    ----------
    mirror : path-like, optional
        Offline mirror root holding ``omniglot/images_*.npz``; default ``$LOGZBENCH_DATA_MIRROR``.
    cache_dir : path-like, optional
        Download cache root (see :func:`logzbench.data.download.fetch`).
    n_train, n_test : int, default 24345, 8070
        Split sizes; ``n_train >= 1``, ``n_test >= 1``, ``n_train + n_test <= 32460``.
    split_seed : int, default 0
        Seed of the permutation of the 32,460 pooled images.

    Returns
    -------
    dict
        ``train_images``/``test_images``: ``float64`` (N, 784) ink intensities in [0, 1]
        (row-major 28x28); ``train_labels``/``test_labels``: ``int64`` (N,) global character
        index 0..1622; ``train_index``/``test_index``: ``int64`` (N,) pool index
        ``20 * label + drawer`` identifying the drawing.

    Raises
    ------
    DatasetError
        For impossible split sizes, or a source file that is missing (and cannot be
        downloaded), corrupt, or has unexpected contents; the message names the file.
    """
    n_train, n_test = int(n_train), int(n_test)
    if n_train < 1 or n_test < 1 or n_train + n_test > N_IMAGES:
        raise DatasetError(
            f"Omniglot split sizes n_train={n_train}, n_test={n_test} are impossible: both must be "
            f">= 1 and n_train + n_test <= {N_IMAGES} (1623 characters x 20 drawers)"
        )
    paths = [fetch("omniglot", f, mirror=mirror, cache_dir=cache_dir) for f in OMNIGLOT_FILES]
    perm = np.random.default_rng(split_seed).permutation(N_IMAGES)
    chosen = perm[: n_train + n_test]
    # gather the chosen drawings (pool index = 20 * global character + drawer), then ink = ~background
    ink = np.empty((len(chosen), *SOURCE_SHAPE), dtype=bool)
    first = 0
    for path, n_char in zip(paths, OMNIGLOT_FILES.values()):
        flat = _read_npz(path, n_char).reshape(n_char * N_DRAWERS, *SOURCE_SHAPE)
        here = (chosen >= first) & (chosen < first + len(flat))
        ink[here] = flat[chosen[here] - first]
        first += len(flat)
        del flat
    np.logical_not(ink, out=ink)
    grey = downsample(ink)
    labels = chosen // N_DRAWERS
    return {
        "train_images": grey[:n_train],
        "train_labels": labels[:n_train].astype(np.int64),
        "test_images": grey[n_train:],
        "test_labels": labels[n_train:].astype(np.int64),
        "train_index": chosen[:n_train].astype(np.int64),
        "test_index": chosen[n_train:].astype(np.int64),
    }


def _read_npz(path, n_char: int) -> np.ndarray:
    """Return the ``images`` array of one source file after checking keys, shape and labels."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = {"images", "labels"} - set(npz.files)
            if missing:
                raise DatasetError(f"Omniglot file {path} lacks arrays {sorted(missing)} (has {npz.files})")
            images, labels = npz["images"], npz["labels"]
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise DatasetError(f"cannot read Omniglot file {path}: {type(exc).__name__}: {exc}") from exc
    expected = (n_char, N_DRAWERS, *SOURCE_SHAPE)
    if images.dtype != np.bool_ or images.shape != expected:
        raise DatasetError(f"Omniglot file {path} has images {images.dtype} {images.shape}, expected bool {expected}")
    if labels.shape != (n_char, N_DRAWERS) or not (labels == np.arange(n_char)[:, None]).all():
        raise DatasetError(f"Omniglot file {path} has labels that are not the character index 0..{n_char - 1}")
    return images


def omniglot_sources() -> dict:
    """``{file name: {"sha256": ..., "url": canonical URL}}`` for the metadata."""
    entries = (remote_file("omniglot", f) for f in OMNIGLOT_FILES)
    return {e.filename: {"sha256": e.sha256, "url": e.urls[0]} for e in entries}
