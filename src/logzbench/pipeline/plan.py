"""The workflow's plan: its config read once into frozen, typed entries (importable without torch).

:func:`load` takes a config loaded and completed against its schema
(:func:`logzbench.pipeline.config_schema.load_config`: defaults filled in), checks it
(:func:`logzbench.pipeline.config.checked_models`, which works out each model's
:class:`~logzbench.pipeline.entries.ModelEntry` as it checks it) and returns a :class:`Plan`: one entry per model
and per estimator entry, the warnings of the check, and the resolved tracking settings.  The Snakefile and its
rules, the report's inputs and the tests read the plan; nothing recomputes what it holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, MutableMapping

from .config import checked_models
from .config_schema import load_config
from .entries import EstimatorEntry, Job, ModelEntry
from .sweep import estimator_spec, pairs_of, settings_of

__all__ = ["EstimatorEntry", "Job", "ModelEntry", "Plan", "from_workflow_config", "load", "tracking_settings"]


@dataclass(frozen=True)
class Plan:
    """A checked workflow config (:func:`load`): ``models`` and ``estimators`` by name, in config order,
    the check's ``warnings``, the ``tracking`` settings (:func:`tracking_settings`) and the ``config`` itself
    (read-only: the sections a plan does not type, such as ``resources``, ``trials`` and ``report``)."""

    config: Mapping[str, Any]
    models: Mapping[str, ModelEntry]
    estimators: Mapping[str, EstimatorEntry]
    warnings: tuple[str, ...] = ()
    tracking: Mapping[str, Any] = field(default_factory=dict)

    @property
    def jobs(self) -> tuple[Job, ...]:
        """Every estimate of every model, in config order."""
        return tuple(j for m in self.models.values() for j in m.jobs)

    @property
    def sweep_pairs(self) -> tuple[tuple[str, str], ...]:
        """The ``(model, estimator)`` pairs with at least one estimate, in config order: one estimate job each
        (:func:`logzbench.pipeline.sweep.pairs_of`)."""
        return tuple(p for m in self.models.values() for p in pairs_of(m))

    @property
    def trained_models(self) -> tuple[str, ...]:
        """The models the workflow trains, in config order: all but the source models."""
        return tuple(name for name, m in self.models.items() if not m.is_source)

    @property
    def learner_models(self) -> dict[str, Mapping[str, Any]]:
        """``{model: its training hyperparams}`` of the models a black-box learner (``hyperparams.learner``) trains."""
        return {name: m.hyperparams for name, m in self.models.items() if m.learner}

    @property
    def bracket_models(self) -> tuple[str, ...]:
        """The models with a bracket estimate (an estimator whose registry bound is ``bracket``: sandwich, bdmc),
        in config order."""
        bracketed = {m for m, e in self.sweep_pairs if self.estimators[e].bound == "bracket"}
        return tuple(m for m in self.models if m in bracketed)

    @property
    def paper_rows(self) -> dict[str, dict[str, str]]:
        """``{model: {paper: row}}`` of the models with published rows (their ``paper`` entry)."""
        return {name: dict(m.paper) for name, m in self.models.items() if m.paper}

    def estimate_files(self, ext: str = "json", results: str = "results") -> list[str]:
        """Every estimate's output file, in config order."""
        return [j.path(ext, results) for j in self.jobs]

    def settings(self, model: str, estimator: str) -> list[dict[str, Any]]:
        """The settings of every estimate of one model x estimator sweep
        (:func:`logzbench.pipeline.sweep.settings_of`): the params of the rule estimate."""
        return settings_of(self.config, self.models[model], estimator)

    def is_exact(self, estimator: str) -> bool:
        """Whether the estimator entry runs the exact method (the only estimator without sweep axes)."""
        return not self.estimators[estimator].spec.axes


def tracking_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The MLflow settings the jobs log with: ``enabled``, ``uri`` (config ``tracking.uri`` ->
    ``$MLFLOW_TRACKING_URI`` -> ``./mlflow.db``, :func:`logzbench.tracking.resolve_tracking_uri`; ``None`` when
    tracking is off), ``experiment`` and ``artifact_dir``.  A URI MLflow cannot use is refused here
    (:class:`~logzbench.errors.TrackingError`), not in a job."""
    t = config["tracking"]
    uri = None
    if t["enabled"]:
        from ..tracking import resolve_tracking_uri

        uri = resolve_tracking_uri(t["uri"], key="tracking.uri")
    return {"enabled": bool(t["enabled"]), "uri": uri, "experiment": t["experiment"], "artifact_dir": t["artifact_dir"]}


def load(config: Mapping[str, Any], presets: Mapping | None = None, *, tracking: bool = True) -> Plan:
    """The plan of a config loaded against its schema: checked (:func:`logzbench.pipeline.config.checked_models`;
    :class:`~logzbench.errors.ConfigError` naming the entry and what to change), each model and estimator entry
    worked out once.  ``presets``: the training presets (default: :data:`logzbench.training.MODEL_PRESETS`);
    ``tracking``: resolve the tracking settings (:func:`tracking_settings`; off for a config without a
    ``tracking`` section)."""
    models, warnings = checked_models(config, presets)
    estimators = {
        name: EstimatorEntry(name, estimator_spec(config, name), MappingProxyType(dict(e)))
        for name, e in (config.get("estimators") or {}).items()
    }
    return Plan(
        config=MappingProxyType(config),
        models=MappingProxyType(models),
        estimators=MappingProxyType(estimators),
        warnings=tuple(warnings),
        tracking=MappingProxyType(tracking_settings(config) if tracking else {}),
    )


def from_workflow_config(
    config: MutableMapping[str, Any], schema: Mapping[str, Any], cli_values: Mapping | None = None
) -> Plan:
    """What the workflow does with the config Snakemake loaded (``workflow/rules/common.smk``): check and
    complete it in place against ``schema`` (:func:`logzbench.pipeline.config_schema.load_config`, with the
    ``--config`` values ``cli_values``), then :func:`load` its plan.  :class:`~logzbench.errors.ConfigError`
    (or :class:`~logzbench.errors.TrackingError`) on the first problem, one line naming it."""
    load_config(config, schema, cli_values)
    return load(config)
