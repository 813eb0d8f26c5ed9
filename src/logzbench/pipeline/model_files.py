"""What the workflow reads from a source model's files without loading the model (importable without torch).

A model the workflow does not train comes from the user's file (config ``source``:
:func:`logzbench.sources.parse_source`).  Building the DAG needs a few facts of it before any job runs: an
``.npz`` model's ``model_type``, hidden sizes and whether it holds ``data_mean`` (:func:`npz_model`, the one
place that opens a model's ``.npz``), a TorchScript file's family (:func:`torchscript_family`), and the
shape of a row file (:func:`rows_shape`).  Each is read from the file's zip archive or ``.npy`` header with
NumPy only; the data are not read.
"""

from __future__ import annotations

import functools
import json
import os
import zipfile
from dataclasses import dataclass

from .. import registry
from ..sources import ENERGY_FAMILIES, META_FILE

__all__ = ["NpzModel", "SOURCE_WHAT", "npz_model", "rows_shape", "source_families", "torchscript_family"]

#: how a message names a source of each kind (:attr:`logzbench.sources.ModelSource.kind`)
SOURCE_WHAT = {"python": "FILE.py:NAME", "torchscript": "TorchScript", "npz": ".npz", "potts-text": "Potts text"}


def source_families(kind: str) -> tuple[str, ...]:
    """The families a source of ``kind`` may hold: a TorchScript file, the user's energies (the families
    whose model class is :class:`logzbench.models.energy.EnergyModel`); a Potts text file, ``potts``;
    ``FILE.py:NAME`` (an EnergyModel or a model object of a registered family) and an ``.npz``, every family."""
    if kind == "torchscript":
        return tuple(n for n, f in registry.FAMILIES.items() if f.model.endswith(":EnergyModel"))
    if kind == "potts-text":
        return tuple(n for n in ("potts",) if n in registry.FAMILIES)
    return tuple(registry.FAMILIES)


def torchscript_family(path: str) -> str | None:
    """The energy family a TorchScript file's ``logzbench.json`` extra file says (its ``domain``), read from
    the zip archive without torch; ``None`` where the file has none or it cannot be read."""
    try:
        with zipfile.ZipFile(path) as z:
            meta = [n for n in z.namelist() if n.endswith(f"/extra/{META_FILE}")]
            if len(meta) != 1:
                return None
            domain = json.loads(z.read(meta[0]).decode()).get("domain")
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, AttributeError):
        return None
    name = domain[0] if isinstance(domain, list) and domain else domain
    return ENERGY_FAMILIES.get(name) if isinstance(name, str) else None


def _npy_shape(fh) -> tuple[int, ...]:
    """The shape in the header of the ``.npy`` data open in ``fh`` (its data not read)."""
    from numpy.lib import format as npy

    major, _ = npy.read_magic(fh)
    read = npy.read_array_header_1_0 if major == 1 else npy.read_array_header_2_0
    return tuple(int(n) for n in read(fh)[0])


@dataclass(frozen=True)
class NpzModel:
    """What the workflow knows of an ``.npz`` model file before loading it.

    ``model_type``: its ``model_type`` array (``rbm`` when absent), lower-cased; ``hidden_sizes``: the columns
    of its weight matrices (``W``: an RBM's; ``W_1``, ``W_2``, ...: a deep model's; empty where there are none
    or they cannot be read); ``has_data_mean``: whether it holds the training rows' ``data_mean``."""

    model_type: str
    hidden_sizes: tuple[int, ...]
    has_data_mean: bool


def _weight_sizes(z: zipfile.ZipFile, names: set[str]) -> tuple[int, ...]:
    keys = ["W"] if "W.npy" in names else []
    i = 1
    while f"W_{i}.npy" in names:
        keys.append(f"W_{i}")
        i += 1
    sizes = []
    try:
        for k in keys:
            with z.open(f"{k}.npy") as fh:
                sizes.append(int(_npy_shape(fh)[-1]))
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return ()
    return tuple(sizes)


def npz_model(path: str) -> NpzModel:
    """The facts of the ``.npz`` model file at ``path`` (:class:`NpzModel`), read from its zip archive with NumPy
    only; ValueError for a file that is not a readable ``.npz``.  Read once per version of the file (its
    modification time and size) and process."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ValueError(f"not a readable .npz model file ({type(exc).__name__}: {exc})") from None
    return _read_npz_model(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=None)
def _read_npz_model(path: str, mtime_ns: int, size: int) -> NpzModel:
    from numpy.lib import format as npy

    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            model_type = "rbm"
            if "model_type.npy" in names:
                with z.open("model_type.npy") as fh:
                    model_type = str(npy.read_array(fh, allow_pickle=False)).lower()
            return NpzModel(model_type, _weight_sizes(z, names), "data_mean.npy" in names)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(f"not a readable .npz model file ({type(exc).__name__}: {exc})") from None


def rows_shape(path: str, split: str) -> tuple[int, ...]:
    """The shape of the rows in ``path`` without reading them: an ``.npy`` file's, or an ``.npz``'s array
    ``split`` (else its only array); ValueError naming what is wrong."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                names = [n for n in z.namelist() if n.endswith(".npy")]
                member = f"{split}.npy" if f"{split}.npy" in names else (names[0] if len(names) == 1 else None)
                if member is None:
                    raise ValueError(f"holds no {split!r} array (arrays: {[n[:-4] for n in names]})")
                with z.open(member) as fh:
                    return _npy_shape(fh)
        with open(path, "rb") as fh:
            return _npy_shape(fh)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"not a readable .npy / .npz file of rows ({exc})") from None
