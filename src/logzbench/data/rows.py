"""Reading and checking data arrays: the binary-row check and a pickle-free ``np.load``.

Kept apart from :mod:`logzbench.data` (which re-exports :func:`check_binary_rows`) so that the data
modules (:mod:`~logzbench.data.uci`, :mod:`~logzbench.data.frey`) can use them without importing
the package that dispatches to them.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import numpy as np

from ..errors import DatasetError
from ..utils.io import archive_refusal

#: what reading a damaged ``.npy`` / ``.npz`` raises (a truncated or corrupt zip archive, a short
#: ``.npy``, bad compressed data, an object array that would need pickles)
READ_ERRORS = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error)
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a zip archive (an empty one)
_NPY_MAGIC = b"\x93NUMPY"


def why_unreadable(exc: BaseException) -> str:
    """What a :data:`READ_ERRORS` exception says about the file, in a few words."""
    if "pickle" in str(exc):  # "pickled (object) data", "Object arrays cannot be loaded"
        return "it holds Python objects (pickled), not numeric arrays"
    return f"{type(exc).__name__}: {exc}"


def numpy_file_kind(path: Path) -> tuple[str | None, str]:
    """``("npy" | "npz" | None, what the file begins with)`` from its first bytes (``OSError`` when it
    cannot be read): a NumPy array file, a zip archive (an ``.npz``), or neither."""
    with open(path, "rb") as fh:
        head = fh.read(8)
    kind = "npy" if head.startswith(_NPY_MAGIC) else "npz" if head[:4] in _ZIP_MAGIC else None
    return kind, "is empty" if not head else f"begins with {head!r}"


def load_npy_npz(path: Path):
    """``np.load(path, allow_pickle=False)`` of an ``.npy`` or ``.npz`` file (an array or an open
    ``NpzFile``); a missing file, a file of another kind, a damaged one and an ``.npz`` whose arrays
    unpack to more than the memory available (:func:`logzbench.utils.io.archive_refusal`) are refused
    with a :class:`DatasetError` naming ``path``."""
    if path.is_dir():
        raise DatasetError(f"data file {path} is a directory, not an .npz/.npy file")
    if not path.is_file():
        raise DatasetError(f"data file {path} does not exist")
    try:
        kind, head = numpy_file_kind(path)
    except OSError as exc:
        raise DatasetError(f"{path}: cannot be read ({exc})") from exc
    if kind is None:
        raise DatasetError(f"{path}: not an .npz/.npy file (it {head}; expected a NumPy array file)")
    try:
        too_big = archive_refusal(path) if kind == "npz" else None  # its directory only: the sizes
        if too_big is not None:
            raise DatasetError(f"{path}: not loaded: {too_big}")
        return np.load(path, allow_pickle=False)
    except READ_ERRORS as exc:
        raise DatasetError(f"{path}: not a readable .npz/.npy file ({why_unreadable(exc)})") from exc


class _open_npz:
    """``np.load`` without pickles as a context manager; errors become DatasetError."""

    def __init__(self, path: Path):
        self.obj = load_npy_npz(path)

    def __enter__(self):
        return self.obj

    def __exit__(self, *exc):
        if isinstance(self.obj, np.lib.npyio.NpzFile):
            self.obj.close()


def _member(npz, key: str, path: Path) -> np.ndarray:
    """``npz[key]``; unreadable members (e.g. pickled objects) become DatasetError."""
    try:
        return npz[key]
    except READ_ERRORS as exc:
        raise DatasetError(f"{path}: not a readable .npz/.npy file (array {key!r}: {why_unreadable(exc)})") from exc


def is_prepared(obj) -> bool:
    """Whether an opened numpy file is a prepared data set: an ``.npz`` holding a ``meta``."""
    return isinstance(obj, np.lib.npyio.NpzFile) and "meta" in obj.files


def _array_key(npz, split: str) -> str | None:
    """The array of a ``.npz`` that stands for ``split``: ``split`` itself, else the file's only array
    (``None`` when it has neither)."""
    return split if split in npz.files else npz.files[0] if len(npz.files) == 1 else None


def _numeric_rows(x, what: str, n_features: int | None, values: str, units: str, error: type[Exception]) -> np.ndarray:
    """``x`` as a non-empty 2-D numeric array of ``n_features`` columns (when given); ``error`` naming
    ``what`` otherwise (``values``: what the entries should be; ``units``: what a column holds)."""
    if hasattr(x, "detach"):  # torch.Tensor
        x = x.detach().cpu().numpy()
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise error(f"{what} is not a numeric array ({exc})") from exc
    if arr.dtype.kind not in "biuf":
        raise error(f"{what} has dtype {arr.dtype}; expected {values}")
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise error(f"{what} has shape {arr.shape}; expected a non-empty 2-D array (rows, features)")
    if n_features is not None and arr.shape[1] != n_features:
        raise error(f"{what} has {arr.shape[1]} columns; expected rows of {n_features} {units}")
    return arr


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
    arr = _numeric_rows(x, what, n_features, "0/1 numbers", "binary values", error)
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise error(f"{what} contains NaN or infinite values ({int((~np.isfinite(arr)).sum())}); expected binary 0/1")
    bad = (arr != 0) & (arr != 1)
    if bad.any():
        raise error(
            f"{what} is not binary: {int(bad.sum())} value(s) are neither 0 nor 1, e.g. "
            f"{arr[bad].flat[0].item()!r}; binarise it first"
        )
    return arr.astype(np.uint8)


def check_categorical_rows(
    x, what: str, n_features: int | None = None, n_states: int | None = None, error: type[Exception] = ValueError
) -> np.ndarray:
    """Validate rows of categorical states (integers ``0 .. n_states - 1``) and return them as ``int64``
    ``(n, n_features)``: the one categorical-data check (Potts models, a categorical energy).

    Parameters
    ----------
    x : array-like or torch.Tensor
        Candidate rows (integers, or floats holding integers).
    what : str
        Names the data in messages.
    n_features, n_states : int, optional
        Required number of columns (sites) and of states per site.
    error : exception class
        Raised with a message naming ``what`` and the problem: a non-numeric dtype, not a non-empty
        2-D array, the wrong width, NaN / inf, a non-integer value, or a state outside ``0 .. n_states - 1``.
    """
    arr = _numeric_rows(x, what, n_features, "integer states", "categorical states", error)
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all():
            raise error(f"{what} contains NaN or infinite values ({int((~np.isfinite(arr)).sum())}); expected states")
        frac = arr != np.round(arr)
        if frac.any():
            raise error(f"{what} has {int(frac.sum())} non-integer value(s), e.g. {arr[frac].flat[0].item()!r}")
    top = None if n_states is None else int(n_states) - 1
    bad = (arr < 0) if top is None else (arr < 0) | (arr > top)
    if bad.any():
        where = "negative" if top is None else f"outside 0..{top}"
        raise error(
            f"{what}: {int(bad.sum())} state(s) {where}, e.g. {arr[bad].flat[0].item()!r}"
            + ("" if top is None else f" (the model has {top + 1} states per site)")
        )
    return arr.astype(np.int64)


def check_real_rows(x, what: str, n_features: int, error: type[Exception] = ValueError) -> np.ndarray:
    """Validate non-empty rows of ``n_features`` finite real values; return them as float64 ``(n, n_features)``
    (the continuous models' data, and a continuous energy's reference rows)."""
    arr = x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != n_features or arr.shape[0] == 0:
        raise error(f"{what} has shape {arr.shape}; expected rows of {n_features} real values")
    if not np.isfinite(arr).all():
        raise error(f"{what} contains NaN or inf ({int((~np.isfinite(arr)).sum())} entries)")
    return arr.astype(np.float64, copy=False)
