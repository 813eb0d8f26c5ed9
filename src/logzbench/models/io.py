"""Reading and writing model files (``.npz``).

A binary RBM file holds

=================  =========================  ======================================
array              shape                      meaning
=================  =========================  ======================================
``W``              (n_visible, n_hidden)      weights
``visible_bias``   (n_visible,)               visible biases ``a``
``hidden_bias``    (n_hidden,)                hidden biases ``b``
``data_mean``      (n_visible,), optional     training-data pixel means (base rate)
``model_type``     scalar string, optional    ``"rbm"`` (the default when absent)
=================  =========================  ======================================

so an RBM trained by any toolkit can be evaluated after ``np.savez(path, W=..., ...)``.
Files are loaded with ``allow_pickle=False``; anything malformed is refused with a
:class:`~logzbench.errors.ModelFileError` naming the problem.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

from ..errors import ModelFileError
from ..utils import save_npz_atomic
from .rbm import BinaryRBM, validate_rbm_arrays

#: model_type -> (required arrays, optional arrays)
_FAMILIES = {
    "rbm": (("W", "visible_bias", "hidden_bias"), ("data_mean",)),
}


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    if not path.exists():
        raise ModelFileError(f"model file not found: {path}")
    try:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ModelFileError(f"{path}: not a readable .npz model file ({exc})") from exc


def load_model(path: str | os.PathLike, device=None) -> BinaryRBM:
    """Load a model file; see the module docstring for the format."""
    path = Path(path)
    arrays = _read_npz(path)
    family = str(arrays.pop("model_type", np.array("rbm"))).lower()
    if family not in _FAMILIES:
        raise ModelFileError(f"{path}: unknown model_type {family!r}; supported: {sorted(_FAMILIES)}")
    required, optional = _FAMILIES[family]
    missing = [k for k in required if k not in arrays]
    if missing:
        raise ModelFileError(
            f"{path}: missing array(s) {missing}; a {family} file needs {list(required)} "
            f"(found {sorted(arrays)})"
        )
    unknown = sorted(set(arrays) - set(required) - set(optional))
    if unknown:
        raise ModelFileError(f"{path}: unexpected array(s) {unknown} for a {family} model file")
    for k, a in arrays.items():
        if not np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.complexfloating):
            raise ModelFileError(f"{path}: array '{k}' has non-real dtype {a.dtype}")
    arrays = {k: a.astype(np.float64) for k, a in arrays.items()}
    validate_rbm_arrays(arrays["W"], arrays["visible_bias"], arrays["hidden_bias"], arrays.get("data_mean"),
                        source=str(path))
    return BinaryRBM(arrays["W"], arrays["visible_bias"], arrays["hidden_bias"], device=device,
                     data_mean=arrays.get("data_mean"))


def save_model(model: BinaryRBM, path: str | os.PathLike) -> None:
    """Write ``model`` atomically as ``.npz`` (readable by :func:`load_model`)."""
    arrays = model.to_arrays()
    save_npz_atomic(path, model_type=np.array(model.family), **arrays)
