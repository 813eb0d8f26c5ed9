"""Frey faces: 1,965 grey-level 28x20 images of Brendan Frey's face, standardized per pixel.

Source
    ``frey_rawface.mat`` from Sam Roweis' data page (https://cs.nyu.edu/~roweis/data.html), the
    file the AVIL paper cites; a MATLAB 5 file whose array ``ff`` is ``uint8`` (560, 1965): one
    column per image, 28 rows x 20 columns flattened row-major (``ff.T.reshape(-1, 28, 20)``),
    consecutive frames of a video.  Verified against its sha256 by
    :func:`logzbench.data.download.fetch` (mirror ``<mirror>/frey_faces/``, cache or download; the
    fallback is the unchanged copy in ``vilhess/projet_meth_ia`` at a pinned commit) and read with
    :func:`scipy.io.loadmat`.

Split
    The paper's Table 1 lists 1,965 training faces and no validation or test split, so by default
    (``n_test=0``) every face is a training row and the file has no ``test`` split.  ``n_test=k``
    holds out the **last** ``k`` frames as ``test`` (a contiguous block: neighbouring video frames
    are near-copies of each other, so a random split would put near-duplicates on both sides);
    ``n_train`` keeps only the first ``n_train`` of the remaining frames (quick runs).  ``seed`` is
    accepted (every workflow dataset has one) and recorded, but nothing here is random.
    Training and the workflow's estimates read a ``test`` split: prepare with ``n_test >= 1`` there.

Standardization (AVIL Sec. 5.5: "We standardize the data by subtracting the mean and dividing by
the standard deviation", so that the GRBM's sigma is 1)
    Per pixel, over the training rows: ``x = (face - mean) / sd`` with ``sd`` the population
    standard deviation (``ddof=0``), so every training column has mean 0 and standard deviation 1.
    Test rows use the training ``mean`` and ``sd``.  Both are stored, so samples map back to
    images with :func:`to_images` (``round(x * sd + mean)``, exact for the data's own rows).

File format (:func:`save_prepared_faces`, ``np.savez_compressed``, no pickles)
    ``train`` (N_train, 560) and ``test`` (N_test, 560, only when ``n_test > 0``) ``float64``;
    ``mean``, ``sd`` (560,) ``float64``; ``image_shape`` ``int64`` ``[28, 20]``;
    ``train_frames`` / ``test_frames`` ``int64`` (N,) = column of ``ff``; ``meta``: 0-d string
    holding JSON (``dataset = "frey"``, settings, sizes, sources with sha256 and URL).  Read with
    :func:`load_faces` or ``logzbench.data.load_rows(path, "real", split)``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from .. import __version__
from ..errors import DatasetError
from ..utils import save_npz_atomic
from .download import RemoteFile, fetch, register, remote_file
from .rows import READ_ERRORS, _member, _open_npz, is_prepared
from .sizes import FREY_FACES, FREY_IMAGE_SHAPE

DATASET = "frey"
#: Mirror / cache folder and file name of the source.
FOLDER = "frey_faces"
FILENAME = "frey_rawface.mat"
MAT_KEY = "ff"
IMAGE_SHAPE = FREY_IMAGE_SHAPE
N_PIXELS = IMAGE_SHAPE[0] * IMAGE_SHAPE[1]  # 560
N_FACES = FREY_FACES
FORMAT_VERSION = 1
#: Settings of :func:`prepare_frey`, stored in its result and the file's ``meta``.
SETTINGS = ("n_test", "n_train", "seed")
FACE_SPLITS = ("train", "test")
STANDARDIZATION_KEYS = ("mean", "sd")
VILHESS_COMMIT = "417f18d3bba5d716291a891c22e8f57da426a819"

register(
    RemoteFile(
        FOLDER,
        FILENAME,
        "265a83a23adb081755cd3de375509828e690324d1d60f076b8ecebc840d59c64",
        (
            "https://cs.nyu.edu/~roweis/data/frey_rawface.mat",  # canonical (md5 5aeb024d42b8a6091f30e5eb18c8a48d)
            f"https://github.com/vilhess/projet_meth_ia/raw/{VILHESS_COMMIT}/dataset/frey_rawface.mat",
            f"https://raw.githubusercontent.com/vilhess/projet_meth_ia/{VILHESS_COMMIT}/dataset/frey_rawface.mat",
        ),
    )
)


def read_frey(path: str | os.PathLike) -> np.ndarray:
    """Read ``frey_rawface.mat``.

    Parameters
    ----------
    path : path-like
        The MATLAB file.

    Returns
    -------
    numpy.ndarray
        ``uint8`` (1965, 560): one face per row, 28x20 row-major (``ff.T``).

    Raises
    ------
    DatasetError
        If the file cannot be read as a MATLAB file or its ``ff`` is not ``uint8`` (560, 1965).
    """
    from scipy.io import loadmat
    from scipy.io.matlab import MatReadError

    try:
        mat = loadmat(str(path))
    except (OSError, ValueError, TypeError, NotImplementedError, MatReadError) as exc:
        raise DatasetError(f"cannot read Frey faces file {path} as a MATLAB file: {type(exc).__name__}: {exc}") from exc
    ff = mat.get(MAT_KEY)
    if not isinstance(ff, np.ndarray) or ff.dtype != np.uint8 or ff.shape != (N_PIXELS, N_FACES):
        what = f"{ff.dtype} {ff.shape}" if isinstance(ff, np.ndarray) else f"no such array (keys {sorted(mat)})"
        raise DatasetError(f"Frey faces file {path}: {MAT_KEY!r} is {what}; expected uint8 ({N_PIXELS}, {N_FACES})")
    return np.ascontiguousarray(ff.T)


def load_frey_faces(mirror: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None) -> np.ndarray:
    """The 1,965 faces, ``uint8`` (1965, 560), from a verified copy (see :func:`~logzbench.data.download.fetch`)."""
    return read_frey(fetch(FOLDER, FILENAME, mirror=mirror, cache_dir=cache_dir))


def frey_sources() -> dict:
    """``{file name: {"sha256": ..., "url": canonical URL}}`` for the metadata."""
    entry = remote_file(FOLDER, FILENAME)
    return {entry.filename: {"sha256": entry.sha256, "url": entry.urls[0]}}


def prepare_frey(
    *,
    n_test: int | None = 0,
    n_train: int | None = None,
    seed: int = 0,
    mirror: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> dict:
    """Split and standardize the Frey faces (see the module docstring).

    Parameters
    ----------
    n_test : int or None, default 0
        Frames held out at the end as ``test``; 0 or ``None``: none (Table 1: all 1,965 train).
    n_train : int or None
        Keep the first ``n_train`` of the remaining frames; ``None``: all of them.
    seed : int, default 0
        Recorded only (the split is not random).
    mirror, cache_dir : path-like, optional
        Offline mirror root (``<mirror>/frey_faces/frey_rawface.mat``) and download cache.

    Returns
    -------
    dict
        ``train`` (and ``test`` when ``n_test > 0``): ``float64`` (N, 560) standardized rows;
        ``train_frames`` (and ``test_frames``): ``int64`` (N,) frame indices; ``mean``, ``sd``:
        ``float64`` (560,) of the training rows; ``settings``; ``sources``.

    Raises
    ------
    DatasetError
        For impossible sizes, a missing or corrupt source, or a constant training pixel.
    """
    n_test = 0 if n_test is None else int(n_test)
    if not 0 <= n_test < N_FACES - 1:
        raise DatasetError(
            f"Frey faces n_test={n_test} must be in [0, {N_FACES - 2}] (the training rows need "
            "two faces for a standard deviation)"
        )
    n_rest = N_FACES - n_test
    n_train = n_rest if n_train is None else int(n_train)
    if not 2 <= n_train <= n_rest:
        raise DatasetError(f"Frey faces n_train={n_train} must be in [2, {n_rest}] with n_test={n_test}")
    faces = load_frey_faces(mirror=mirror, cache_dir=cache_dir).astype(np.float64)
    frames = {"train": np.arange(n_train), "test": np.arange(n_rest, N_FACES)}
    mean = faces[frames["train"]].mean(axis=0)
    sd = faces[frames["train"]].std(axis=0)
    if not (sd > 0).all():
        raise DatasetError(
            f"Frey faces: pixel(s) {np.flatnonzero(sd == 0).tolist()} are constant over the "
            f"{n_train} training faces; they cannot be standardized"
        )
    out = {
        "mean": mean,
        "sd": sd,
        "settings": {"n_test": n_test, "n_train": n_train, "seed": int(seed)},
        "sources": frey_sources(),
    }
    for split in FACE_SPLITS[: 1 + (n_test > 0)]:
        out[split] = (faces[frames[split]] - mean) / sd
        out[f"{split}_frames"] = frames[split].astype(np.int64)
    return out


def save_prepared_faces(path: str | os.PathLike, prepared: dict) -> Path:
    """Write :func:`prepare_frey`'s result atomically (format: module docstring); return the path."""
    splits = [s for s in FACE_SPLITS if s in prepared]
    arrays = {k: np.asarray(prepared[k], dtype=np.float64) for k in (*splits, *STANDARDIZATION_KEYS)}
    arrays.update({f"{s}_frames": np.asarray(prepared[f"{s}_frames"], dtype=np.int64) for s in splits})
    meta = {
        "format_version": FORMAT_VERSION,
        "dataset": DATASET,
        "settings": prepared["settings"],
        "sizes": {s: int(len(arrays[s])) for s in splits},
        "n_features": N_PIXELS,
        "image_shape": list(IMAGE_SHAPE),
        "split": (
            "frames 0..N_train-1 are train; the last n_test frames (contiguous: neighbouring video frames "
            "are near-copies) are test; the paper (AVIL Table 1) has no test split"
        ),
        "standardization": (
            "per pixel over the training rows: (face - mean) / sd, sd with ddof=0; images = "
            "round(x * sd + mean) (logzbench.data.frey.to_images)"
        ),
        "sources": prepared.get("sources") or frey_sources(),
        "logzbench_version": __version__,
    }
    path = Path(path)
    save_npz_atomic(
        path, **arrays, image_shape=np.asarray(IMAGE_SHAPE, dtype=np.int64), meta=np.asarray(json.dumps(meta))
    )
    return path


def load_faces(path: str | os.PathLike, split: str = "train") -> np.ndarray:
    """Load one split of a file written by :func:`save_prepared_faces`.

    Parameters
    ----------
    path : path-like
        Prepared ``.npz``.
    split : {"train", "test"}
        Which rows (``test`` exists only when prepared with ``n_test > 0``).

    Returns
    -------
    numpy.ndarray
        ``float64`` (N, 560) standardized faces.

    Raises
    ------
    DatasetError
        If the file is missing, unreadable or not a prepared Frey file, lacks ``split``, or the
        rows are not a non-empty (N, 560) array of finite floats; the message names the file.
    """
    path = Path(path)
    with _open_faces(path) as npz:
        if split not in npz.files:
            have = [s for s in FACE_SPLITS if s in npz.files]
            raise DatasetError(
                f"prepared Frey faces file {path} has no split {split!r} (it has {have}); the paper "
                "has no Frey test split: prepare with n_test=k to hold out the last k frames"
            )
        rows = _member(npz, split, path)
    if rows.dtype.kind != "f" or rows.ndim != 2 or rows.shape[1:] != (N_PIXELS,) or len(rows) == 0:
        raise DatasetError(f"data {path} [{split}] is {rows.dtype} {rows.shape}; expected float rows (N, {N_PIXELS})")
    if not np.isfinite(rows).all():
        raise DatasetError(f"data {path} [{split}] contains NaN or infinite values")
    return rows.astype(np.float64)


def load_standardization(path: str | os.PathLike) -> dict:
    """``mean`` and ``sd`` (560,) ``float64`` and ``image_shape`` (28, 20) of a prepared Frey file.

    Raises
    ------
    DatasetError
        If an array is missing, not (560,) finite floats, or an ``sd`` is not positive.
    """
    path = Path(path)
    with _open_faces(path) as npz:
        missing = [k for k in STANDARDIZATION_KEYS if k not in npz.files]
        if missing:
            raise DatasetError(f"prepared Frey faces file {path} lacks {missing}")
        out = {k: _member(npz, k, path) for k in STANDARDIZATION_KEYS}
    for key, arr in out.items():
        if arr.dtype.kind != "f" or arr.shape != (N_PIXELS,) or not np.isfinite(arr).all():
            raise DatasetError(f"{key!r} of {path} is {arr.dtype} {arr.shape}; expected finite floats ({N_PIXELS},)")
    if not (out["sd"] > 0).all():
        raise DatasetError(f"'sd' of {path} has non-positive entries")
    return {"mean": out["mean"].astype(np.float64), "sd": out["sd"].astype(np.float64), "image_shape": IMAGE_SHAPE}


def to_images(rows, standardization: dict) -> np.ndarray:
    """Map standardized rows (data or model samples) back to 8-bit images.

    Parameters
    ----------
    rows : array-like
        (N, 560) standardized rows.
    standardization : dict
        ``mean`` and ``sd`` (560,), from :func:`prepare_frey` or :func:`load_standardization`.

    Returns
    -------
    numpy.ndarray
        ``uint8`` (N, 28, 20): ``round(rows * sd + mean)`` clipped to 0..255 (exact for the
        data's own rows).
    """
    rows = np.asarray(rows, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[1] != N_PIXELS:
        raise ValueError(f"rows have shape {rows.shape}; expected (N, {N_PIXELS})")
    grey = np.rint(rows * standardization["sd"] + standardization["mean"])
    return np.clip(grey, 0, 255).astype(np.uint8).reshape(len(rows), *IMAGE_SHAPE)


class _open_faces(_open_npz):
    """:class:`logzbench.data.rows._open_npz` of a prepared Frey file (``meta`` with ``dataset == "frey"``)."""

    def __init__(self, path: Path):
        super().__init__(path)
        if not is_frey_file(self.obj):
            self.__exit__()
            raise DatasetError(
                f"{path} is not a prepared Frey faces file (.npz with a 'meta' of dataset "
                "'frey'); create it with prepare_patches('frey', ...)"
            )


def is_frey_file(npz) -> bool:
    """Whether an open ``.npz`` is a prepared Frey faces file (its ``meta`` names ``frey``)."""
    if not is_prepared(npz):
        return False
    try:
        meta = json.loads(str(npz["meta"]))
    except READ_ERRORS:  # a damaged file: its reader (van Hateren's, for real rows) names the problem
        return False
    return isinstance(meta, dict) and meta.get("dataset") == DATASET
