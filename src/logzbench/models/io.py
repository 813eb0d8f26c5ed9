"""Reading and writing model files (``.npz``).

Every file may carry ``model_type`` (a scalar string; ``"rbm"`` when absent) and an optional
``data_mean`` (training-data pixel means, for the data-base-rate initial distribution).

**Binary RBM** (``model_type="rbm"``)

=================  =========================  ======================================
array              shape                      meaning
=================  =========================  ======================================
``W``              (n_visible, n_hidden)      weights
``visible_bias``   (n_visible,)               visible biases ``a``
``hidden_bias``    (n_hidden,)                hidden biases ``b``
=================  =========================  ======================================

**Deep Boltzmann machine** (``model_type="dbm"``), ``L >= 1`` hidden layers

=================  =========================  ======================================
``W_1 .. W_L``     (n_{l-1}, n_l)             weights between layers ``l-1`` and ``l``
``bias_0``         (n_visible,)               visible biases
``bias_1 .. L``    (n_l,)                     hidden biases
=================  =========================  ======================================

**Deep belief network** (``model_type="dbn"``), two hidden layers

=====================  =====================  ==========================================
``W_1``                (n_visible, n_1)       generative weights of ``p(v | h_1)``
``bias_0``             (n_visible,)           visible biases of ``p(v | h_1)``
``W_2``                (n_1, n_2)             top RBM weights
``bias_1``, ``bias_2`` (n_1,), (n_2,)         top RBM biases
``recognition_bias``   (n_1,)                 biases of ``q(h_1 | v)``
``recognition_W``      (n_visible, n_1)       optional; default ``W_1`` (tied weights)
=====================  =====================  ==========================================

**Continuous models** (Sohl-Dickstein & Culpepper 2012; float64 parameters, data rows in R^M)

======================  =======================================  ===================================
``model_type``          arrays                                   model
======================  =======================================  ===================================
``poe-laplace``         ``Phi`` (L, M), ``lam`` (L,) optional     product of Laplace experts
``poe-student-t``       ``Phi`` (L, M), ``lam`` (L,)              product of Student's t experts
``mcrbm``               see :class:`~logzbench.models.mcrbm.MCRBM`  mean-and-covariance RBM, Eq. (40)
``linear-gaussian``     ``Phi`` (M, L), ``sigma_n``               linear generative, Gaussian prior
``linear-laplace``      ``Phi`` (M, L), ``sigma_n``               linear generative, Laplace prior
``bilinear``            see :class:`~logzbench.models.bilinear.BilinearGenerative`  bilinear generative
======================  =======================================  ===================================

Each continuous family validates its own arrays (``from_arrays``), with the file named in the error.

so a model trained by any toolkit can be evaluated after ``np.savez(path, ...)``.  Files are
loaded with ``allow_pickle=False``; anything malformed is refused with a
:class:`~logzbench.errors.ModelFileError` naming the problem.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

from ..errors import ModelFileError
from ..utils import save_npz_atomic
from .dbm import DBM
from .dbn import DBN
from .rbm import BinaryRBM

#: model_type -> (required arrays, optional arrays); a DBM's arrays depend on its depth
_FAMILIES = {
    "rbm": (("W", "visible_bias", "hidden_bias"), ("data_mean",)),
    "dbn": (("W_1", "bias_0", "W_2", "bias_1", "bias_2", "recognition_bias"), ("recognition_W", "data_mean")),
    "dbm": None,
}

Model = BinaryRBM | DBM | DBN

#: continuous model_type -> (module, class); imported when a file of that type is read
CONTINUOUS_FAMILIES = {
    "poe-laplace": ("poe", "ProductOfExperts"),
    "poe-student-t": ("poe", "ProductOfExperts"),
    "mcrbm": ("mcrbm", "MCRBM"),
    "linear-gaussian": ("linear_generative", "LinearGenerative"),
    "linear-laplace": ("linear_generative", "LinearGenerative"),
    "bilinear": ("bilinear", "BilinearGenerative"),
}


def continuous_class(family: str):
    """The class implementing a continuous ``model_type``."""
    import importlib

    module, name = CONTINUOUS_FAMILIES[family]
    return getattr(importlib.import_module(f"{__package__}.{module}"), name)


def _dbm_arrays(path: Path, arrays: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
    n_layers = 0
    while f"W_{n_layers + 1}" in arrays:
        n_layers += 1
    if n_layers == 0:
        raise ModelFileError(f"{path}: a dbm file needs weight arrays W_1, ..., W_L and biases bias_0, ..., bias_L "
                             f"(found {sorted(arrays)})")
    required = tuple(f"W_{l}" for l in range(1, n_layers + 1)) + tuple(f"bias_{l}" for l in range(n_layers + 1))
    return required, ("data_mean",)


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    if not path.exists():
        raise ModelFileError(f"model file not found: {path}")
    try:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ModelFileError(f"{path}: not a readable .npz model file ({exc})") from exc


def load_model(path: str | os.PathLike, device=None) -> Model:
    """Load a model file (RBM, DBM, DBN or a continuous model); see the module docstring for the formats."""
    path = Path(path)
    arrays = _read_npz(path)
    family = str(arrays.get("model_type", np.array("rbm"))).lower()
    if family in CONTINUOUS_FAMILIES:
        return continuous_class(family).from_arrays(arrays, source=str(path), device=device)
    arrays.pop("model_type", None)
    if family not in _FAMILIES:
        raise ModelFileError(f"{path}: unknown model_type {family!r}; supported: "
                             f"{sorted(_FAMILIES) + sorted(CONTINUOUS_FAMILIES)}")
    required, optional = _FAMILIES[family] or _dbm_arrays(path, arrays)
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
    try:
        if family == "dbm":
            n_layers = sum(1 for k in arrays if k.startswith("W_"))
            return DBM([arrays[f"W_{l}"] for l in range(1, n_layers + 1)],
                       [arrays[f"bias_{l}"] for l in range(n_layers + 1)], device=device,
                       data_mean=arrays.get("data_mean"))
        if family == "dbn":
            return DBN(arrays["W_1"], arrays["bias_0"], arrays["W_2"], arrays["bias_1"], arrays["bias_2"],
                       arrays["recognition_bias"], arrays.get("recognition_W"), device=device,
                       data_mean=arrays.get("data_mean"))
        return BinaryRBM(arrays["W"], arrays["visible_bias"], arrays["hidden_bias"], device=device,
                         data_mean=arrays.get("data_mean"))
    except ModelFileError as exc:
        msg = str(exc)
        raise ModelFileError(msg if msg.startswith(str(path)) else f"{path}: {msg}") from None


def save_model(model: Model, path: str | os.PathLike) -> None:
    """Write ``model`` atomically as ``.npz`` (readable by :func:`load_model`)."""
    arrays = dict(model.to_arrays())
    arrays["model_type"] = np.array(model.family)
    save_npz_atomic(path, **arrays)
