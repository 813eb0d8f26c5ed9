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


class ParameterFile:
    """A family's model file and device copy, from the parameter arrays it declares in ``PARAMETERS``: the
    constructor takes them positionally in that order (each stored as the attribute of its name), then
    ``device`` and ``data_mean``; the file holds them under those names, ``data_mean`` when the model
    has one, and optionally ``model_type`` (the class's ``family``)."""

    PARAMETERS: tuple[str, ...] = ()

    def _parameters(self) -> list[torch.Tensor]:
        return [getattr(self, name) for name in self.PARAMETERS]

    def to(self, device):
        """A copy on ``device``."""
        return type(self)(*self._parameters(), device=device, data_mean=self.data_mean)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The model-file arrays: the parameters in ``PARAMETERS`` order, then ``data_mean`` when set
        (see "Model files" in the documentation)."""
        return file_arrays(dict(zip(self.PARAMETERS, self._parameters())), self.data_mean)

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], source: str = "model", device=None):
        """A model from :meth:`to_arrays` output (e.g. an ``.npz`` file's contents).

        Parameters
        ----------
        arrays : mapping
            The ``PARAMETERS`` arrays; optional ``data_mean`` and ``model_type`` (the class's ``family``).
        source : str
            Named in error messages (e.g. the file path).
        device : str or torch.device, optional

        Raises
        ------
        ModelFileError
            Naming ``source`` and the problem: missing, unexpected or non-real arrays, or what the family's
            constructor refuses (wrong shapes, NaN / inf, overflowing parameters, ...).
        """
        a = checked_arrays(arrays, cls.family, cls.PARAMETERS, ("data_mean",), source)
        with errors_named(source):
            return cls(*(a[name] for name in cls.PARAMETERS), device=device, data_mean=a.get("data_mean"))
