"""What the binary families' ``from_arrays`` share: the arrays a model file must and may hold.

A model file (see :mod:`logzbench.models.io`) is a mapping of array names to arrays plus an
optional ``model_type``; each family's ``from_arrays`` names its required and optional arrays,
:func:`checked_arrays` refuses anything else, and :func:`errors_named` puts the file's name in
front of whatever the family's constructor then refuses; :func:`as_float64` is the float64 copy the
constructors validate before their own cast.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Mapping, Sequence

import numpy as np
import torch

from ..errors import ModelFileError


def checked_arrays(
    arrays: Mapping, family: str, required: Sequence[str], optional: Sequence[str], source: str
) -> dict[str, np.ndarray]:
    """The arrays of a ``family`` model file as float64, without ``model_type``.

    Parameters
    ----------
    arrays : mapping
        Array name -> array (e.g. an ``.npz`` file's contents), optionally with ``model_type``.
    family : str
        The family reading them (its ``model_type``).
    required, optional : sequence of str
        Arrays the family needs, and those it also accepts.
    source : str
        Named in error messages (e.g. the file path).

    Returns
    -------
    dict of str to numpy.ndarray

    Raises
    ------
    ModelFileError
        A ``model_type`` of another family, missing or unexpected arrays, or an array of a
        non-real dtype.
    """
    model_type = arrays.get("model_type")
    if model_type is not None and str(np.asarray(model_type)).lower() != family:
        raise ModelFileError(f"{source}: array 'model_type' is {str(np.asarray(model_type))!r}, not {family!r}")
    arrays = {k: np.asarray(a) for k, a in arrays.items() if k != "model_type"}
    missing = [k for k in required if k not in arrays]
    if missing:
        raise ModelFileError(
            f"{source}: missing array(s) {missing}; a {family} file needs {list(required)} (found {sorted(arrays)})"
        )
    unknown = sorted(set(arrays) - set(required) - set(optional))
    if unknown:
        raise ModelFileError(f"{source}: unexpected array(s) {unknown} for a {family} model file")
    for k, a in arrays.items():
        if not np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.complexfloating):
            raise ModelFileError(f"{source}: array '{k}' has non-real dtype {a.dtype}")
    return {k: a.astype(np.float64) for k, a in arrays.items()}


@contextlib.contextmanager
def errors_named(source: str) -> Iterator[None]:
    """Re-raise a :class:`ModelFileError` of the block with ``source`` in front of its message
    (unless the message starts with it already)."""
    try:
        yield
    except ModelFileError as exc:
        msg = str(exc)
        raise ModelFileError(msg if msg.startswith(source) else f"{source}: {msg}") from None


def as_float64(x) -> np.ndarray | None:
    """A float64 NumPy copy of an array or tensor (``None`` stays ``None``), for validation
    *before* the float32 cast, so that overflowing values are reported as such, not as inf."""
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def file_arrays(params: Mapping[str, torch.Tensor], data_mean: torch.Tensor | None = None) -> dict[str, np.ndarray]:
    """A model file's arrays (a family's ``to_arrays``): each parameter tensor as NumPy, in order, then
    ``data_mean`` when the model has one."""
    out = dict(params)
    if data_mean is not None:
        out["data_mean"] = data_mean
    return {k: v.detach().cpu().numpy() for k, v in out.items()}
