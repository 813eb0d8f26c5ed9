"""The typed entries of a workflow plan (importable without torch): :class:`Job`, :class:`EstimatorEntry` and
:class:`ModelEntry`, each frozen.

A model's entry holds what the workflow needs of it, worked out once from the config
(:func:`logzbench.pipeline.sweep.model_entry`): its family and training hyperparameters, its rows, sizes and
initial distributions, the estimators run on it and every job of their sweeps.  :class:`logzbench.pipeline.plan.Plan`
holds one per model and per estimator entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .. import registry
from ..sources import ModelSource

__all__ = ["EstimatorEntry", "Job", "ModelEntry"]


@dataclass(frozen=True)
class Job:
    """One estimate: ``results/estimates/<model>/<entry>/<stem>.{json,npz}``.

    ``entry`` is the name of the config's estimator entry (the rules' ``{estimator}`` wildcard, the
    record's ``estimator``), ``method`` the registry's estimator it runs.  ``K``, ``init`` and ``seed``
    are ``None`` where the estimator has no such sweep axis."""

    model: str
    entry: str
    method: str
    K: int | None
    init: str | None
    seed: int | None

    @property
    def axes(self) -> tuple[str, ...]:
        return registry.estimator(self.method).axes

    @property
    def stem(self) -> str:
        """The file stem (:func:`logzbench.registry.setting_stem`): ``exact``, ``K10_seed0``, ..."""
        return registry.setting_stem(self.axes, {"K": self.K, "init": self.init, "seed": self.seed})

    def path(self, ext: str = "json", results: str = "results") -> str:
        return f"{results}/estimates/{self.model}/{self.entry}/{self.stem}.{ext}"


@dataclass(frozen=True)
class EstimatorEntry:
    """An estimator entry of the config: its ``name`` (the ``{estimator}`` wildcard), the registry's ``spec``
    of its method, and ``options``, the entry as configured (read-only; defaults filled in by the schema)."""

    name: str
    spec: registry.EstimatorSpec
    options: Mapping[str, Any]

    @property
    def method(self) -> str:
        return self.spec.name

    @property
    def bound(self) -> str:
        """The registry's kind of bound of its method (``bracket`` for the sandwich and BDMC)."""
        return self.spec.bound


@dataclass(frozen=True)
class ModelEntry:
    """A model entry of the config, with what the workflow derives from it.

    ``hyperparams``: its training keyword arguments (preset overridden by ``hyperparams``, with ``family``;
    a source model's: its family only); ``family``: the registry's family; ``source``: the parsed ``source``
    of a model read from the user's file (``None`` for a trained model) and ``data_files`` its row files;
    ``n_visible``: the data dimension; ``hidden_sizes``: its hidden layer sizes (empty where unknown before
    loading); ``lacks_training_rows``: a source model without training rows for the data base rate (as far as
    the workflow can tell); ``inits``: the initial distributions its sweeps run from (without ``base-rate`` and
    ``mixture`` where it lacks training rows); ``estimators``: the estimator entries
    run on it, in config order; ``jobs``: every estimate of their sweeps; ``paper``: its published rows."""

    name: str
    dataset: str | None
    hyperparams: Mapping[str, Any]
    family: registry.FamilySpec
    source: ModelSource | None
    data_files: Mapping[str, str] | None
    n_visible: int
    hidden_sizes: tuple[int, ...]
    inits: tuple[str, ...]
    lacks_training_rows: bool = False
    estimators: tuple[str, ...] = ()
    jobs: tuple[Job, ...] = ()
    paper: Mapping[str, str] | None = None

    @property
    def is_source(self) -> bool:
        """Whether the model is read from its ``source`` (not trained by the workflow)."""
        return self.source is not None

    @property
    def learner(self) -> str | None:
        """The black-box learner that trains it (``hyperparams.learner``), if any."""
        return self.hyperparams.get("learner")

    def jobs_of(self, estimator: str) -> tuple[Job, ...]:
        """The jobs of one estimator entry's sweep on this model, in :attr:`jobs` order."""
        return tuple(j for j in self.jobs if j.entry == estimator)
