"""Per-class subsets of a dataset's rows: the ``test_subset`` of an estimator config entry
(``{per_class: 50, seed: 0}``: 50 test rows of each label, as Upadhya & Sastry's RAISE subset).

:func:`class_subset` chooses the row indices from a label array; :func:`load_labels` reads a data
file's ``<split>_labels`` (prepared datasets of labelled sources: mnist, digits, omniglot,
digits-avil; not the UCI sets, nor the continuous sets).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import DatasetError
from .rows import _member, _open_npz

__all__ = ["class_subset", "load_labels"]


def load_labels(path: str | os.PathLike, split: str = "test") -> np.ndarray | None:
    """The ``<split>_labels`` array of a data file (a prepared ``.npz``), or ``None`` when the file has
    none (a ``.npy``, an ``.npz`` without labels: a source without labels)."""
    path = Path(path)
    with _open_npz(path) as obj:
        if not isinstance(obj, np.lib.npyio.NpzFile) or f"{split}_labels" not in obj.files:
            return None
        return np.asarray(_member(obj, f"{split}_labels", path))


def class_subset(
    labels: np.ndarray | None,
    per_class: int,
    seed: int = 0,
    *,
    source: str | os.PathLike | None = None,
    split: str = "test",
) -> np.ndarray:
    """Indices of ``per_class`` rows of each label, chosen at random, in increasing (original) order.

    Parameters
    ----------
    labels : array of shape (N,), or None
        The rows' labels (:func:`load_labels`); ``None``: the dataset has none (an error).
    per_class : int
        Rows kept of each label present (>= 1).
    seed : int
        Seed of the choice (``numpy.random.default_rng(seed)``; the labels in increasing order, each
        ``rng.choice`` of its rows without replacement): the same labels and seed give the same rows.
    source, split : optional
        Name the dataset file and split in error messages.

    Returns
    -------
    numpy.ndarray of int64, shape (per_class * n_labels,)
        Sorted row indices.

    Raises
    ------
    ValueError
        ``per_class`` < 1 (or not an integer).
    DatasetError
        No labels; labels that are not one label per row (1-D); a label with fewer than ``per_class`` rows.
    """
    where = str(source) if source is not None else "the dataset"
    if isinstance(per_class, bool) or int(per_class) != per_class or int(per_class) < 1:
        raise ValueError(f"test_subset per_class must be an integer >= 1, got {per_class!r}")
    per_class = int(per_class)
    if labels is None:
        raise DatasetError(
            f"{where} has no {split}_labels: test_subset (per_class rows of each label) needs a "
            f"dataset with labels (mnist, digits, omniglot, digits-avil); remove test_subset or use "
            f"n_examples for a random subset"
        )
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise DatasetError(f"{where} [{split}_labels] has shape {labels.shape}; expected one label per row")
    rng = np.random.default_rng(int(seed))
    chosen = []
    for c in np.unique(labels):
        rows = np.flatnonzero(labels == c)
        if rows.size < per_class:
            raise DatasetError(
                f"{where}: class {c.item()!r} has {rows.size} {split} rows, fewer than "
                f"test_subset per_class = {per_class}"
            )
        chosen.append(rng.choice(rows, size=per_class, replace=False))
    return np.sort(np.concatenate(chosen)).astype(np.int64)
