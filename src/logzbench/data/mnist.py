"""MNIST (LeCun, Cortes & Burges): an IDX reader and :func:`load_mnist`."""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

import numpy as np

from ..errors import DatasetError
from .download import fetch, remote_file
from .sizes import MNIST_ROWS

#: Registry file names of the four MNIST IDX files, keyed by the array they hold.
MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}
IMAGE_SHAPE = (28, 28)
_SIZES = MNIST_ROWS
IDX_MAGIC_IMAGES = 2051  # unsigned byte, 3 dimensions
IDX_MAGIC_LABELS = 2049  # unsigned byte, 1 dimension


def read_idx(path: str | os.PathLike, expected_magic: int | None = None) -> np.ndarray:
    """Read an unsigned-byte IDX file (optionally gzip-compressed).

    Parameters
    ----------
    path : path-like
        IDX file; decompressed on the fly when the name ends in ``.gz``.
    expected_magic : int, optional
        Required magic number, e.g. 2051 (images) or 2049 (labels).

    Returns
    -------
    numpy.ndarray
        ``uint8`` array with the shape stored in the header.

    Raises
    ------
    DatasetError
        If the file cannot be read, has the wrong magic number or a size that does not
        match its header (truncated or padded); the message names the file.
    """
    path = Path(path)
    try:
        with (gzip.open if path.name.endswith(".gz") else open)(path, "rb") as fh:
            data = fh.read()
    except (OSError, EOFError, zlib.error) as exc:
        raise DatasetError(f"cannot read IDX file {path}: {type(exc).__name__}: {exc}") from exc
    if len(data) < 4:
        raise DatasetError(f"IDX file {path} is truncated ({len(data)} bytes, no header)")
    magic = int.from_bytes(data[:4], "big")
    ndim = data[3]
    if data[:3] != b"\x00\x00\x08" or ndim == 0 or (expected_magic is not None and magic != expected_magic):
        want = expected_magic if expected_magic is not None else "0x0000080N (unsigned byte)"
        raise DatasetError(f"IDX file {path} has magic number {magic}, expected {want}")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DatasetError(f"IDX file {path} is truncated inside its header")
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    if len(data) - header != int(np.prod(shape)):
        raise DatasetError(
            f"IDX file {path} holds {len(data) - header} data bytes but its header says {shape} "
            f"= {int(np.prod(shape))} (truncated or corrupt)"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape).copy()


def load_mnist(mirror: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None) -> dict:
    """Load MNIST, verified against the sha256 of the official decompressed IDX files.

    Parameters
    ----------
    mirror : path-like, optional
        Offline mirror root holding ``mnist/<file>.gz``; default ``$LOGZBENCH_DATA_MIRROR``.
    cache_dir : path-like, optional
        Download cache root (see :func:`logzbench.data.download.fetch`).

    Returns
    -------
    dict
        ``train_images`` ``uint8`` (60000, 784) with values 0..255, ``train_labels``
        ``uint8`` (60000,), ``test_images`` (10000, 784), ``test_labels`` (10000,);
        rows in the official order; images flattened row-major from 28x28.

    Raises
    ------
    DatasetError
        If a file is missing (and cannot be downloaded), corrupt, or has the wrong shape.
    """
    out = {}
    for key, fname in MNIST_FILES.items():
        split, kind = key.split("_")
        path = fetch("mnist", fname, mirror=mirror, cache_dir=cache_dir)
        images = kind == "images"
        arr = read_idx(path, IDX_MAGIC_IMAGES if images else IDX_MAGIC_LABELS)
        expected = (_SIZES[split], *IMAGE_SHAPE) if images else (_SIZES[split],)
        if arr.shape != expected:
            raise DatasetError(f"MNIST file {path} has shape {arr.shape}, expected {expected}")
        if not images and arr.max() > 9:
            raise DatasetError(f"MNIST file {path} holds labels above 9")
        out[key] = arr.reshape(len(arr), -1) if images else arr
    return out


def mnist_sources() -> dict:
    """``{file name: {"sha256": decompressed sha256, "url": canonical URL}}`` for the metadata."""
    entries = (remote_file("mnist", f) for f in MNIST_FILES.values())
    return {e.filename: {"sha256": e.sha256, "url": e.urls[0]} for e in entries}
