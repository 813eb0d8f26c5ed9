"""Binary data sets: preparation into one ``.npz`` and validated loading.

Prepared file format (written by :func:`prepare_dataset`, ``np.savez_compressed``, no pickles):

=================  ==========================================================================
``train``          ``uint8`` (N_train, D), values 0/1
``test``           ``uint8`` (N_test, D), values 0/1
``valid``          ``uint8`` (N_valid, D), only when ``n_valid > 0``
``train_labels``   ``int64`` (N_train,) (and ``test_labels``, ``valid_labels`` likewise)
``image_shape``    ``int64`` (2,), e.g. ``[28, 28]``; ``D == prod(image_shape)``
``meta``           0-d unicode string holding JSON (see :func:`load_meta`)
=================  ==========================================================================
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from .. import __version__
from ..errors import DatasetError
from ..utils import save_npz_atomic
from .binarize import METHODS as BINARIZE_METHODS
from .binarize import binarize as _binarize

DATASETS = ("mnist", "digits", "omniglot")
#: Continuous data sets (real-valued rows; :func:`prepare_patches`).
CONTINUOUS_DATASETS = ("vanhateren",)
SPLITS = ("train", "valid", "test")
FORMAT_VERSION = 1
#: Stream index per split: split ``s`` is binarized with ``default_rng([seed, _STREAM[s]])``.
_STREAM = {"train": 0, "test": 1, "valid": 2}

__all__ = ["DATASETS", "CONTINUOUS_DATASETS", "check_binary_rows", "prepare_dataset", "prepare_patches",
           "load_prepared", "load_binary_rows", "load_meta", "load_rows"]


def prepare_dataset(
    name: str,
    output: str | os.PathLike,
    *,
    mirror: str | os.PathLike | None = None,
    binarize: str = "stochastic",
    threshold: float = 0.5,
    seed: int = 0,
    n_train: int | None = None,
    n_test: int | None = None,
    n_valid: int = 0,
    cache_dir: str | os.PathLike | None = None,
) -> Path:
    """Load a data set, binarize it and write one ``.npz`` atomically.

    Parameters
    ----------
    name : {"mnist", "digits", "omniglot"}
        Data set.  MNIST comes from :func:`~logzbench.data.mnist.load_mnist` (mirror,
        cache or download, checksum-verified); digits from scikit-learn (stratified
        80/20 split with seed 0, see :mod:`logzbench.data.digits`); Omniglot from
        :func:`~logzbench.data.omniglot.load_omniglot` (mirror, cache or download,
        checksum-verified; 105x105 drawings area-averaged to 28x28 grey levels, fixed
        random 24,345/8,070 split of the 32,460 images with split seed 0, labels = global
        character index 0..1622; see :mod:`logzbench.data.omniglot`).
    output : path-like
        Destination file; written via a temporary file and renamed, so it is either
        complete or absent.
    mirror : path-like, optional
        Offline mirror root (default ``$LOGZBENCH_DATA_MIRROR``); unused for digits.
        MNIST is read from ``<mirror>/mnist/``, Omniglot from ``<mirror>/omniglot/``.
    binarize : {"stochastic", "threshold"}
        See :func:`logzbench.data.binarize.binarize`.
    threshold : float, default 0.5
        Cut-off for ``binarize="threshold"``.
    seed : int, default 0
        Binarization seed.  Each split uses its own stream ``default_rng([seed, k])``
        (train k=0, test k=1, valid k=2), so a row's bits do not depend on ``n_train``,
        ``n_test`` or the other splits.
    n_train, n_test : int, optional
        Keep only the first ``n`` rows (after removing the validation rows).
    n_valid : int, default 0
        Move the last ``n_valid`` rows of the full training set into ``valid``.
    cache_dir : path-like, optional
        Download cache root (default ``$LOGZBENCH_DATA_CACHE`` or ``~/.cache/logzbench``).

    Returns
    -------
    Path
        ``output``.

    Raises
    ------
    DatasetError
        For an unknown data set or method, impossible sizes, or missing/corrupt sources.
    """
    if name in CONTINUOUS_DATASETS:
        raise DatasetError(f"{name} is a continuous data set: use logzbench.data.prepare_patches")
    if name not in DATASETS:
        raise DatasetError(f"unknown dataset {name!r}; choose from {DATASETS + CONTINUOUS_DATASETS}")
    if binarize not in BINARIZE_METHODS:
        raise DatasetError(f"unknown binarization {binarize!r}; choose from {BINARIZE_METHODS}")
    raw, image_shape, scale, sources, split_note = _load_raw(name, mirror, cache_dir)

    x, y = raw["train_images"], raw["train_labels"]
    n_full = len(x)
    if not 0 <= int(n_valid) < n_full:
        raise DatasetError(f"n_valid={n_valid} must be in [0, {n_full}) for {name}")
    n_valid = int(n_valid)
    parts = {"train": (x[: n_full - n_valid], y[: n_full - n_valid]), "test": (raw["test_images"], raw["test_labels"])}
    if n_valid:
        parts["valid"] = (x[n_full - n_valid:], y[n_full - n_valid:])
    for split, limit in (("train", n_train), ("test", n_test)):
        xs, ys = parts[split]
        if limit is not None:
            if not 1 <= int(limit) <= len(xs):
                raise DatasetError(f"n_{split}={limit} must be in [1, {len(xs)}] for {name} (n_valid={n_valid})")
            parts[split] = (xs[: int(limit)], ys[: int(limit)])

    arrays = {}
    for split, (xs, ys) in parts.items():
        arrays[split] = _binarize(xs / scale, binarize, seed=[int(seed), _STREAM[split]], threshold=threshold)
        arrays[f"{split}_labels"] = np.asarray(ys, dtype=np.int64)
    meta = {
        "format_version": FORMAT_VERSION,
        "dataset": name,
        "binarize": binarize,
        "threshold": float(threshold) if binarize == "threshold" else None,
        "seed": int(seed),
        "split_seeds": {s: [int(seed), _STREAM[s]] for s in parts},
        "sizes": {s: int(len(arrays[s])) for s in parts},
        "n_features": int(np.prod(image_shape)),
        "image_shape": list(image_shape),
        "split": split_note,
        "sources": sources,
        "logzbench_version": __version__,
    }
    output = Path(output)
    save_npz_atomic(output, **arrays, image_shape=np.asarray(image_shape, dtype=np.int64), meta=np.asarray(json.dumps(meta)))
    return output


def prepare_patches(name: str, output: str | os.PathLike, *, mirror: str | os.PathLike | None = None,
                    cache_dir: str | os.PathLike | None = None, **settings) -> Path:
    """Prepare a continuous data set (``"vanhateren"``: whitened PCA coefficients of log image
    patches; ``settings`` are those of :func:`logzbench.data.vanhateren.prepare_vanhateren`) and
    write it atomically; read it back with :func:`logzbench.data.vanhateren.load_patches`."""
    if name not in CONTINUOUS_DATASETS:
        raise DatasetError(f"unknown continuous dataset {name!r}; choose from {CONTINUOUS_DATASETS}")
    from . import vanhateren

    unknown = sorted(set(settings) - set(vanhateren.SETTINGS))
    if unknown:
        raise DatasetError(f"{name}: unknown settings {unknown}; known: {list(vanhateren.SETTINGS)}")
    prepared = vanhateren.prepare_vanhateren(mirror=mirror, cache_dir=cache_dir, **settings)
    return vanhateren.save_prepared_patches(output, prepared)


def _load_raw(name, mirror, cache_dir):
    """Return ``(arrays, image_shape, scale to [0, 1], sources, split description)``."""
    if name == "mnist":
        from .mnist import IMAGE_SHAPE, load_mnist, mnist_sources

        note = "official 60000/10000; valid = last n_valid training rows"
        return load_mnist(mirror=mirror, cache_dir=cache_dir), IMAGE_SHAPE, 255.0, mnist_sources(), note
    if name == "omniglot":
        from . import omniglot as om

        note = (f"pooled {om.N_IMAGES} images (1623 characters x 20 drawers, background then evaluation); "
                f"numpy.random.default_rng({om.DEFAULT_SPLIT_SEED}).permutation: first {om.DEFAULT_N_TRAIN} "
                f"train, next {om.DEFAULT_N_TEST} test, last {om.N_IMAGES - om.DEFAULT_N_TRAIN - om.DEFAULT_N_TEST} "
                "unused; 105x105 -> 28x28 exact area average; labels = global character index "
                "(background 0..963, evaluation 964..1622); valid = last n_valid training rows")
        return (om.load_omniglot(mirror=mirror, cache_dir=cache_dir), om.IMAGE_SHAPE, 1.0,
                om.omniglot_sources(), note)
    from .digits import DEFAULT_SPLIT_SEED, DEFAULT_TEST_FRACTION, IMAGE_SHAPE, load_digits_dataset

    note = (f"sklearn train_test_split(test_size={DEFAULT_TEST_FRACTION}, stratify=labels, "
            f"random_state={DEFAULT_SPLIT_SEED}); valid = last n_valid training rows")
    import sklearn

    sources = {"sklearn.datasets.load_digits": {"version": sklearn.__version__}}
    return load_digits_dataset(), IMAGE_SHAPE, 1.0, sources, note


def load_prepared(path: str | os.PathLike, split: str = "test") -> np.ndarray:
    """Load one split of a file written by :func:`prepare_dataset`.

    Parameters
    ----------
    path : path-like
        Prepared ``.npz``.
    split : {"train", "valid", "test"}
        Which rows.

    Returns
    -------
    numpy.ndarray
        ``uint8`` (N, D) array of 0/1.

    Raises
    ------
    DatasetError
        If the file is missing, unreadable, lacks ``split``, or holds non-binary values.
    """
    path = Path(path)
    with _open_npz(path) as npz:
        if not isinstance(npz, np.lib.npyio.NpzFile) or "meta" not in npz.files:
            raise DatasetError(f"{path} is not a prepared dataset (.npz with 'meta'); create it with prepare_dataset")
        if split not in npz.files:
            have = [s for s in SPLITS if s in npz.files]
            raise DatasetError(f"{path} has no split {split!r} (it has {have})")
        return _check_binary(_member(npz, split, path), f"{path} [{split}]")


def load_binary_rows(path: str | os.PathLike, split: str = "test", n_features: int | None = None) -> np.ndarray:
    """Load binary data rows for the command line ``--data`` option.

    Parameters
    ----------
    path : path-like
        A prepared ``.npz`` (``split`` is taken), a ``.npz`` holding exactly one array,
        or a ``.npy`` array.
    split : str, default "test"
        Array to take from a ``.npz`` holding several.
    n_features : int, optional
        Required number of columns (e.g. the model's visible units).

    Returns
    -------
    numpy.ndarray
        ``uint8`` (N, D) array of 0/1.

    Raises
    ------
    DatasetError
        If the file is missing or unreadable, or the data are not a non-empty 2-D array
        of 0/1 (NaN, other values, wrong number of dimensions or columns); the message
        names the file.
    """
    path = Path(path)
    with _open_npz(path) as obj:
        if not isinstance(obj, np.lib.npyio.NpzFile):
            return _check_binary(obj, str(path), n_features)
        key = split if split in obj.files else obj.files[0] if len(obj.files) == 1 else None
        if key is not None:
            return _check_binary(_member(obj, key, path), f"{path} [{key}]", n_features)
        raise DatasetError(f"{path} holds arrays {obj.files} but no {split!r}; give a prepared dataset or a single array")


def load_rows(path: str | os.PathLike, data_kind: str, split: str = "test", *, prepared: bool = False) -> np.ndarray:
    """Data rows of either kind a model family takes (``registry.family(name).data_kind``).

    Parameters
    ----------
    path : path-like
        A data file.
    data_kind : {"binary", "real"}
        ``binary`` 0/1 rows, ``real`` rows (whitened image patches).
    split : str
        The split to take from a prepared dataset.
    prepared : bool
        Only a prepared dataset is accepted, and it must hold ``split`` (:func:`load_prepared`,
        :func:`logzbench.data.vanhateren.load_patches`: what training reads).  Otherwise binary rows
        come from :func:`load_binary_rows` (also a ``.npy`` or a single-array ``.npz``) and real rows
        from :func:`logzbench.data.vanhateren.load_real_rows` (also a ``.npy``).

    Returns
    -------
    numpy.ndarray, shape (n, n_features)
    """
    if data_kind == "real":
        from .vanhateren import load_patches, load_real_rows

        return (load_patches if prepared else load_real_rows)(path, split)
    if data_kind != "binary":
        raise ValueError(f"unknown data kind {data_kind!r}; expected 'binary' or 'real'")
    return (load_prepared if prepared else load_binary_rows)(path, split)


def load_meta(path: str | os.PathLike) -> dict:
    """Return the ``meta`` dictionary of a prepared dataset (see :func:`prepare_dataset`)."""
    path = Path(path)
    with _open_npz(path) as npz:
        if not isinstance(npz, np.lib.npyio.NpzFile) or "meta" not in npz.files:
            raise DatasetError(f"{path} is not a prepared dataset (.npz with 'meta')")
        return json.loads(str(_member(npz, "meta", path)))


class _open_npz:
    """``np.load`` without pickles as a context manager; errors become DatasetError."""

    def __init__(self, path: Path):
        if not path.is_file():
            raise DatasetError(f"data file {path} does not exist")
        try:
            self.obj = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise DatasetError(f"cannot read {path} as .npy/.npz: {exc}") from exc

    def __enter__(self):
        return self.obj

    def __exit__(self, *exc):
        if isinstance(self.obj, np.lib.npyio.NpzFile):
            self.obj.close()


def _member(npz, key: str, path: Path) -> np.ndarray:
    """``npz[key]``; unreadable members (e.g. pickled objects) become DatasetError."""
    try:
        return npz[key]
    except (OSError, ValueError, EOFError) as exc:
        raise DatasetError(f"cannot read array {key!r} of {path}: {exc}") from exc


def check_binary_rows(x, what: str, n_features: int | None = None, error: type[Exception] = ValueError) -> np.ndarray:
    """Validate rows of 0/1 values and return them as a ``uint8`` array ``(n, n_features)``.

    The one binary-data check of logzbench: prepared dataset files (``error=DatasetError``),
    the data given to :func:`logzbench.api.estimate` and to the trainers (``ValueError``).

    Parameters
    ----------
    x : array-like or torch.Tensor
        Candidate rows.
    what : str
        Names the data in messages (e.g. ``"test data"``, ``"data mnist.npz [test]"``).
    n_features : int, optional
        Required number of columns.
    error : exception class
        Raised with a message naming ``what`` and the problem: a non-numeric dtype, not a
        non-empty 2-D array, the wrong width, NaN / inf, or a value other than 0 and 1.
    """
    if hasattr(x, "detach"):  # torch.Tensor
        x = x.detach().cpu().numpy()
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise error(f"{what} is not a numeric array ({exc})") from exc
    if arr.dtype.kind not in "biuf":
        raise error(f"{what} has dtype {arr.dtype}; expected 0/1 numbers")
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise error(f"{what} has shape {arr.shape}; expected a non-empty 2-D array (rows, features)")
    if n_features is not None and arr.shape[1] != n_features:
        raise error(f"{what} has {arr.shape[1]} columns; expected rows of {n_features} binary values")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise error(f"{what} contains NaN or infinite values ({int((~np.isfinite(arr)).sum())}); expected binary 0/1")
    bad = (arr != 0) & (arr != 1)
    if bad.any():
        raise error(f"{what} is not binary: {int(bad.sum())} value(s) are neither 0 nor 1, e.g. "
                    f"{arr[bad].flat[0].item()!r}; binarise it first")
    return arr.astype(np.uint8)


def _check_binary(arr: np.ndarray, where: str, n_features: int | None = None) -> np.ndarray:
    """A prepared dataset file's rows (:func:`check_binary_rows` raising :class:`DatasetError`)."""
    return check_binary_rows(arr, f"data {where}", n_features, error=DatasetError)
