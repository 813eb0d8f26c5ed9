"""Reading prepared data files: one split's rows (binary or real), their labels and the file's ``meta``,
each checked (a :class:`~logzbench.errors.DatasetError` names the file and what is wrong with it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..errors import DatasetError
from .rows import _array_key, _member, _open_npz, check_binary_rows, is_prepared
from .sizes import CONTINUOUS_DATASETS, DATASETS

__all__ = ["SPLITS", "load_binary_rows", "load_meta", "load_prepared", "load_rows", "load_split_if_present"]

SPLITS = ("train", "valid", "test")


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
        if not is_prepared(npz):
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
        key = _array_key(obj, split)
        if key is not None:
            return _check_binary(_member(obj, key, path), f"{path} [{key}]", n_features)
        raise DatasetError(
            f"{path} holds arrays {obj.files} but no {split!r}; give a prepared dataset or a single array"
        )


def load_rows(
    path: str | os.PathLike, data_kind: str, split: str = "test", *, prepared: bool = False, family: str | None = None
) -> np.ndarray:
    """Data rows of either kind a model family takes (``registry.family(name).data_kind``).

    Parameters
    ----------
    path : path-like
        A data file.
    data_kind : {"binary", "real"}
        ``binary`` 0/1 rows, ``real`` rows (whitened image patches, standardized Frey faces).
    split : str
        The split to take from a prepared dataset.
    prepared : bool
        Only a prepared dataset is accepted, and it must hold ``split`` (:func:`load_prepared`,
        :func:`logzbench.data.vanhateren.load_patches`, :func:`logzbench.data.frey.load_faces`: what
        training reads).  Otherwise binary rows come from :func:`load_binary_rows` (also a ``.npy``
        or a single-array ``.npz``) and real rows from a prepared file as above or a ``.npy``
        (:func:`logzbench.data.vanhateren.load_real_rows`).
    family : str, optional
        The model family the rows are for, named in the error when a prepared binary dataset is
        given for real rows (e.g. a GRBM given ``digits.npz``).

    Returns
    -------
    numpy.ndarray, shape (n, n_features)
    """
    if data_kind == "real":
        from .vanhateren import load_patches, load_real_rows

        if not prepared and str(path).endswith(".npy"):
            return load_real_rows(path, split)
        if _is_frey(Path(path)):
            from .frey import load_faces

            return load_faces(path, split)
        try:
            return load_patches(path, split)
        except DatasetError:  # say what the file is where it is binary data (read only on this path)
            binary = _binary_dataset(Path(path), split)
            if binary is None:
                raise
        who = f"a {family} model" if family else "a model of real-valued rows"
        raise DatasetError(
            f"{path} holds binary 0/1 rows (the prepared dataset {binary}), not real-valued rows; "
            f"{who} needs real-valued rows: prepared van Hateren patches or Frey faces (logzbench "
            "prepare vanhateren | frey), or a .npy of real rows"
        )
    if data_kind == "categorical":
        return load_categorical_rows(path, split)
    if data_kind != "binary":
        raise ValueError(f"unknown data kind {data_kind!r}; expected 'binary', 'categorical' or 'real'")
    return (load_prepared if prepared else load_binary_rows)(path, split)


def load_categorical_rows(path: str | os.PathLike, split: str = "test") -> np.ndarray:
    """Rows of categorical states (``int64`` (N, L), values >= 0) from a ``.npy``, a ``.npz`` holding
    one array, or a ``.npz`` with a ``split`` array; a :class:`DatasetError` naming the file otherwise
    (the model checks the states against its ``q``: :func:`logzbench.api.as_rows`)."""
    from .rows import check_categorical_rows

    path = Path(path)
    with _open_npz(path) as obj:
        if not isinstance(obj, np.lib.npyio.NpzFile):
            return check_categorical_rows(obj, str(path), error=DatasetError)
        key = _array_key(obj, split)
        if key is None:
            raise DatasetError(f"{path} has no array {split!r} (arrays: {', '.join(obj.files)})")
        return check_categorical_rows(_member(obj, key, path), f"{path} [{key}]", error=DatasetError)


def load_split_if_present(path: str | os.PathLike, data_kind: str, split: str) -> np.ndarray | None:
    """:func:`load_rows` of a prepared dataset's ``split`` (e.g. ``valid``), or ``None`` when the file
    has no such array (a corrupt file or bad rows still raise)."""
    with _open_npz(Path(path)) as npz:
        present = isinstance(npz, np.lib.npyio.NpzFile) and split in npz.files
    return load_rows(path, data_kind, split, prepared=True) if present else None


def load_meta(path: str | os.PathLike) -> dict:
    """Return the ``meta`` dictionary of a prepared dataset (see :func:`prepare_dataset`)."""
    path = Path(path)
    with _open_npz(path) as npz:
        if not is_prepared(npz):
            raise DatasetError(f"{path} is not a prepared dataset (.npz with 'meta')")
        return json.loads(str(_member(npz, "meta", path)))


def _binary_dataset(path: Path, split: str) -> str | None:
    """What a prepared binary dataset ``path`` is (its ``meta`` dataset name, quoted), else ``None``: a
    ``meta`` naming a binary source, or one naming no continuous set over integer 0/1 rows.  A file that
    cannot be read is ``None`` here (its reader names the problem)."""
    try:
        with _open_npz(path) as npz:
            if not is_prepared(npz):
                return None
            meta = json.loads(str(npz["meta"]))
            name = meta.get("dataset") if isinstance(meta, dict) else None
            if name in CONTINUOUS_DATASETS:
                return None
            if name in DATASETS:
                return repr(name)
            key = split if split in npz.files else "train" if "train" in npz.files else None
            if key is not None and npz[key].dtype.kind in "biu":
                rows = npz[key]
                if rows.size and ((rows == 0) | (rows == 1)).all():
                    return repr(name) if name is not None else "without a name"
    except Exception:
        return None
    return None


def _is_frey(path: Path) -> bool:
    """Whether ``path`` is a prepared Frey faces file (else real rows are read as van Hateren patches,
    whose reader reports what is wrong with the file)."""
    try:
        with _open_npz(path) as obj:
            from .frey import is_frey_file

            return is_frey_file(obj)
    except DatasetError:
        return False


def _check_binary(arr: np.ndarray, where: str, n_features: int | None = None) -> np.ndarray:
    """A prepared dataset file's rows (:func:`check_binary_rows` raising :class:`DatasetError`)."""
    return check_binary_rows(arr, f"data {where}", n_features, error=DatasetError)
