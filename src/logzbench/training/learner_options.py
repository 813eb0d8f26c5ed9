"""What the black-box learners' hyperparameters may be: one rule per key, declared once (no torch).

A learner's hyperparameters -- names, defaults and bounds -- are declared in
:mod:`logzbench.training.hyperparams` (for each :data:`logzbench.registry.LEARNERS` ``entry``:
:func:`~logzbench.training.avil.train_avil`, :func:`~logzbench.training.nvil.train_nvil`,
:func:`~logzbench.training.vcd.train_vcd`, whose signatures are made from there); what each value may be
is :data:`RULES`, their bounds.  The same checks run

* in every learner (:func:`logzbench.training.variational.setup` calls :func:`check_values`),
* in :func:`logzbench.training.train_with_learner` and ``logzbench train --learner`` before any data
  is read (:func:`check_hyperparams`: an unknown key is refused with the closest name),
* when the workflow's config is loaded (:func:`logzbench.pipeline.config.check_config`), so that a value a
  training job would refuse after the data are prepared is refused before anything runs.

Limits that are not the algorithm's but keep a run from hanging: :data:`MAX_EXACT_UNITS` (the exact
monitor enumerates ``2^units`` states at every logged iteration), :data:`MAX_BATCH_SIZE` (decoder
draws per update, held in memory at once) and :data:`MAX_MONITOR_SAMPLES`.  A ``batch_size`` above
the number of training rows is allowed (the paper's 500 on NIPS-0-12's 400 rows): the training
minibatch is then every row, and the decoder still draws ``batch_size`` samples per update.
"""

from __future__ import annotations

import difflib
from typing import Any, Mapping

from .. import registry
from .hyperparams import (
    ABLATION_ALIASES,
    ABLATIONS,
    MAX_BATCH_SIZE,
    MAX_EXACT_UNITS,
    MAX_MONITOR_SAMPLES,
    NVIL_VARIANTS,
    SELECTIONS,
    Z_KINDS,
    AVILParams,
    NVILParams,
    Rule,
    VCDParams,
    check,
    declared_names,
    declared_parameters,
    rules,
)

__all__ = [
    "ABLATIONS",
    "ABLATION_ALIASES",
    "FIGURE_KEYS",
    "MAX_BATCH_SIZE",
    "MAX_EXACT_UNITS",
    "MAX_MONITOR_SAMPLES",
    "NVIL_VARIANTS",
    "RULES",
    "Rule",
    "SELECTIONS",
    "Z_KINDS",
    "check_hyperparams",
    "check_value",
    "check_values",
    "learner_defaults",
    "learner_keywords",
]

#: keys of the workflow's training job besides the learner's: the samples drawn for the report's figures
#: (:func:`logzbench.pipeline.jobs.train_job`; ``logzbench train`` draws none)
FIGURE_KEYS = ("figure_samples", "figure_sweeps")
#: a learner's parameters that are not hyperparameters (the data, what it returns), and those checked
#: elsewhere: ``family`` (:func:`logzbench.registry.learner`), ``hidden_sizes`` (the family's layers),
#: ``device`` (:func:`logzbench.utils.resolve_device`)
NOT_RULED = frozenset({"train", "valid", "return_state", "family", "hidden_sizes", "device"})


#: every learner hyperparameter's rule, their declared bounds (:data:`~logzbench.training.hyperparams.ABOUT`),
#: and the figure keys' (tests/test_learner_errors.py checks that each keyword of each learner has one, less
#: :data:`NOT_RULED`)
RULES: dict[str, Rule] = {
    **rules(AVILParams, NVILParams, VCDParams),
    "figure_samples": Rule("int", 1),
    "figure_sweeps": Rule("int", 0),
}


def check_value(name: str, value: Any) -> None:
    """Raise ValueError naming ``name``, the value and what it may be, unless :data:`RULES` allows it."""
    check(name, value, RULES[name])


def check_values(values: Mapping[str, Any]) -> None:
    """Check every value of ``values`` that has a rule (:func:`check_value`), and those that depend on
    each other: ``ais_every`` a multiple of ``log_every`` (AIS runs on logged iterations)."""
    for name, value in values.items():
        if name in RULES:
            check_value(name, value)
    every, log_every = values.get("ais_every"), values.get("log_every")
    if every and log_every and every % log_every:
        raise ValueError(
            f"ais_every={every} must be a multiple of log_every={log_every} (AIS runs on logged iterations)"
        )


def learner_keywords(learner: str) -> frozenset[str]:
    """The keyword names of learner ``learner``'s function (:data:`logzbench.registry.LEARNERS`)."""
    return declared_names(registry.learner(learner).entry)


def learner_defaults(learner: str) -> dict[str, Any]:
    """The learner's hyperparameters with a rule (:data:`RULES`) and their defaults."""
    return {n: d for n, d in declared_parameters(registry.learner(learner).entry) if n in RULES and d is not ...}


def check_hyperparams(
    learner: str, family: str, hyperparams: Mapping[str, Any], *, also: frozenset[str] | set[str] = frozenset()
) -> None:
    """Refuse, before any data is read, hyperparameters learner ``learner`` could not train a ``family``
    model with: an unknown key (naming the closest), a value :data:`RULES` does not allow, values that
    disagree (:func:`check_values`, the unset ones at the learner's defaults).  ``n_hidden``, ``family``
    and ``learner`` are accepted, and the keys ``also`` (the workflow's :data:`FIGURE_KEYS`).  Raises
    ValueError."""
    spec = registry.learner(learner, family)
    allowed = (learner_keywords(spec.name) - {"train", "valid", "return_state"}) | {"n_hidden", "family", "learner"}
    allowed |= set(also)
    for key in hyperparams:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
            raise ValueError(
                f"unknown hyperparameter {key!r} of the {spec.name} learner"
                + (f"; did you mean {close[0]!r}?" if close else "")
                + f" (it takes {', '.join(sorted(allowed - {'family', 'learner'}))})"
            )
    values = {**learner_defaults(spec.name), **{k: v for k, v in hyperparams.items() if k in RULES}}
    check_values(values)
