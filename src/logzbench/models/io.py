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

Each family validates its own arrays: :func:`load_model` looks the file's ``model_type`` up in
the registry (:data:`logzbench.registry.FAMILIES`) and calls its class's ``from_arrays`` with
the file named in every error.

A model trained by any toolkit can thus be evaluated after ``np.savez(path, ...)``.  Files are
loaded with ``allow_pickle=False``; anything malformed is refused with a
:class:`~logzbench.errors.ModelFileError` naming the problem.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .. import registry
from ..data.rows import READ_ERRORS, numpy_file_kind, why_unreadable
from ..errors import ModelFileError
from ..utils import save_npz_atomic
from ..utils.io import archive_refusal
from .dbm import DBM
from .dbn import DBN
from .rbm import BinaryRBM

Model = BinaryRBM | DBM | DBN

#: model_type of every continuous family (real-valued data rows), from the registry
CONTINUOUS_FAMILIES = registry.family_names(("analysis", "generative"))


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    if not path.exists():
        raise ModelFileError(f"model file not found: {path}")
    if path.is_dir():
        raise ModelFileError(f"{path}: a directory, not an .npz model file")
    try:
        kind, head = numpy_file_kind(path)
    except OSError as exc:
        raise ModelFileError(f"{path}: not a readable .npz model file ({exc})") from exc
    if kind == "npy":
        raise ModelFileError(
            f"{path}: not a readable .npz model file (it is a single .npy array; a model file is "
            "an .npz of named arrays, see the documentation, Models and file formats)"
        )
    if kind is None:
        raise ModelFileError(f"{path}: not a readable .npz model file (not an .npz file: it {head})")
    try:
        too_big = archive_refusal(path) if kind == "npz" else None
    except READ_ERRORS as exc:
        raise ModelFileError(f"{path}: not a readable .npz model file ({why_unreadable(exc)})") from exc
    if too_big is not None:
        raise ModelFileError(f"{path}: not loaded: {too_big}")
    try:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except READ_ERRORS as exc:
        raise ModelFileError(f"{path}: not a readable .npz model file ({why_unreadable(exc)})") from exc


def _is_text(path: Path) -> bool:
    """Whether a model file not named ``.npz`` is read as a Potts text file: by its content, anything
    that does not begin as a NumPy file (``.npy``) or a zip archive (an ``.npz`` under another name)
    does, so that a text file's own errors (a line, a byte that is not UTF-8, no parameters at all) are
    reported as such (:func:`logzbench.models.potts_text.read_potts_text`)."""
    try:
        kind, _ = numpy_file_kind(path)
    except OSError:
        return False  # _read_npz names the error
    return kind is None


def load_model(path: str | os.PathLike, device=None) -> Model:
    """Load a model of any registered family; see the module docstring for the formats.

    Parameters
    ----------
    path : path-like
        An ``.npz`` file, whose ``model_type`` (default ``"rbm"``) names the family; a pairwise Potts
        model as plain text (:mod:`logzbench.models.potts_text`); or a model in code, ``"FILE.py:NAME"`` or a
        TorchScript ``.pt`` (:mod:`logzbench.models.source`: importing FILE.py runs its code).
    device : str or torch.device, optional
        Where the model's parameters live (default CPU).

    Raises
    ------
    ModelFileError
        A missing or unreadable file, an unknown ``model_type``, arrays the family refuses, or a model in
        code that cannot be imported or called or whose ``log_f`` misbehaves (naming ``path`` and the
        problem).
    """
    from .source import is_source, load_source

    if is_source(path):  # FILE.py:NAME, a TorchScript .pt
        return load_source(path, device=device)
    path = Path(path)
    if path.is_file() and path.suffix != ".npz" and _is_text(path):
        from .potts_text import read_potts_text

        return read_potts_text(path, device=device)
    arrays = _read_npz(path)
    family = str(arrays.get("model_type", np.array("rbm"))).lower()
    if family not in registry.FAMILIES:
        raise ModelFileError(f"{path}: unknown model_type {family!r}; supported: {sorted(registry.FAMILIES)}")
    return registry.family(family).model_class.from_arrays(arrays, source=str(path), device=device)


def save_model(model: Model, path: str | os.PathLike) -> None:
    """Write ``model`` atomically as ``.npz`` (readable by :func:`load_model`)."""
    arrays = dict(model.to_arrays())
    arrays["model_type"] = np.array(model.family)
    save_npz_atomic(path, **arrays)
