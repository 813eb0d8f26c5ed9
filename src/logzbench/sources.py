"""What a model argument names, torch-free: ``FILE.py:NAME``, a TorchScript file, an ``.npz`` model file or
a Potts text file (:func:`parse_source`).  One reading for :func:`logzbench.models.io.load_model`, the
command line's checks before anything is imported, and the workflow's DAG (which must not import torch).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DISCRETE_ENERGY_FAMILIES",
    "ENERGY_FAMILIES",
    "META_FILE",
    "ModelSource",
    "SOURCE_KINDS",
    "TORCHSCRIPT_SUFFIXES",
    "parse_source",
]

#: how :func:`logzbench.models.io.load_model` reads a source, by its form: ``FILE.py:NAME`` (imports FILE.py
#: and calls NAME()), a TorchScript file, an ``.npz`` model file, anything else a Potts text file
SOURCE_KINDS = ("python", "torchscript", "npz", "potts-text")
#: suffixes of a TorchScript file
TORCHSCRIPT_SUFFIXES = (".pt",)


@dataclass(frozen=True)
class ModelSource:
    """A model entry's ``source``: ``spec`` as given, the ``path`` of its file (FILE.py of ``FILE.py:NAME``),
    ``name`` (NAME; ``None`` otherwise) and ``kind`` (:data:`SOURCE_KINDS`)."""

    spec: str
    path: str
    name: str | None
    kind: str


def parse_source(spec: str) -> ModelSource:
    """The parts of a model ``source`` (ValueError, one line, for ``FILE.py`` without ``:NAME``, an empty
    NAME or one that is not a Python identifier).  The file's existence is not checked here."""
    spec = str(spec).strip()
    if not spec:
        raise ValueError("an empty source; give FILE.py:NAME, a TorchScript .pt, a Potts text file or a model .npz")
    head, sep, tail = spec.rpartition(":")
    if sep and head.endswith(".py") and tail:
        if not tail.isidentifier():
            raise ValueError(
                f"source {spec!r}: {tail!r} is not a Python name; give FILE.py:NAME, NAME the function in "
                "FILE.py that returns the model"
            )
        return ModelSource(spec, head, tail, "python")
    if spec.endswith(".py") or (sep and head.endswith(".py") and not tail):
        file = head if sep and head.endswith(".py") else spec
        raise ValueError(
            f"source {spec!r} names no function: give FILE.py:NAME ({file}:NAME), NAME the function that "
            "returns the model (an EnergyModel); importing the file runs its code"
        )
    if spec.endswith(TORCHSCRIPT_SUFFIXES):
        return ModelSource(spec, spec, None, "torchscript")
    if spec.endswith(".npz"):
        return ModelSource(spec, spec, None, "npz")
    return ModelSource(spec, spec, None, "potts-text")


#: the extra file of a TorchScript model holding its ``dim``, ``domain``, ``dtype`` and reference rows
#: (:func:`logzbench.models.source.save_torchscript`)
META_FILE = "logzbench.json"
#: the registry family of a user's energy (:class:`logzbench.models.energy.EnergyModel`) on each domain
ENERGY_FAMILIES = {"binary": "energy-binary", "categorical": "energy-categorical", "continuous": "energy-continuous"}
#: the user-energy families on a discrete domain: they take a ``transition`` (:data:`logzbench.options.TRANSITIONS`)
DISCRETE_ENERGY_FAMILIES = (ENERGY_FAMILIES["binary"], ENERGY_FAMILIES["categorical"])
