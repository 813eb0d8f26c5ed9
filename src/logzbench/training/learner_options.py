"""What the black-box learners' hyperparameters may be: one rule per key, declared once (no torch).

The names and defaults of a learner's hyperparameters are declared in :mod:`logzbench.training.hyperparams`
(for each :data:`logzbench.registry.LEARNERS` ``entry``: :func:`~logzbench.training.avil.train_avil`,
:func:`~logzbench.training.nvil.train_nvil`, :func:`~logzbench.training.vcd.train_vcd`, whose signatures
take their defaults from there); what each value may be is :data:`RULES`.  The same checks run

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
import math
import numbers
from dataclasses import dataclass
from typing import Any, Mapping

from .. import registry
from .hyperparams import declared_names, declared_parameters

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

#: ``z`` priors of the decoder
Z_KINDS = ("continuous", "discrete")
#: NVIL's proposals (Kuleshov & Ermon 2017): the neural q with auxiliaries, or a mixture of Bernoullis
NVIL_VARIANTS = ("auxiliary", "mixture")
#: the model a learner returns: the last, or the logged one of the best validation log-likelihood
SELECTIONS = ("last", "best-valid")
#: AVIL's ablations (Fig. 4) and the other names accepted for them
ABLATIONS = ("no_encoder_entropy", "no_decoder_entropy")
ABLATION_ALIASES = {
    "no_hq_encoder": "no_encoder_entropy",
    "no_H(Q)": "no_encoder_entropy",
    "no_H(q)": "no_decoder_entropy",
}
#: most units the exact monitor may enumerate: ``2^24`` states at every logged iteration (its cost on
#: one CPU core is on the documentation's Benchmarks page; 2^30 would take minutes per iteration)
MAX_EXACT_UNITS = 24
#: most decoder draws (and training rows) per update: ``batch_size`` draws are held in memory at once
MAX_BATCH_SIZE = 100_000
#: most decoder draws of the monitored bounds at each logged iteration (drawn in chunks)
MAX_MONITOR_SAMPLES = 1_000_000
#: keys of the workflow's training job besides the learner's: the samples drawn for the report's figures
#: (:func:`logzbench.pipeline.jobs.train_job`; ``logzbench train`` draws none)
FIGURE_KEYS = ("figure_samples", "figure_sweeps")
#: a learner's parameters that are not hyperparameters (the data, what it returns), and those checked
#: elsewhere: ``family`` (:func:`logzbench.registry.learner`), ``hidden_sizes`` (the family's layers),
#: ``device`` (:func:`logzbench.utils.resolve_device`)
NOT_RULED = frozenset({"train", "valid", "return_state", "family", "hidden_sizes", "device"})


@dataclass(frozen=True)
class Rule:
    """What one hyperparameter may be.

    ``kind``: ``int`` (an integer in ``[low, high]``), ``real`` (a finite number between ``low`` and
    ``high``, each end open when ``low_open`` / ``high_open``), ``pair`` (two such numbers),
    ``choice`` (one of ``choices``) or ``bool``; ``none``: ``None`` is allowed too (the default);
    ``why``: said when the value is above ``high``."""

    kind: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple = ()
    none: bool = False
    why: str = ""


_INF = math.inf
#: every learner hyperparameter's rule (tests/test_learner_errors.py checks that each keyword of each
#: learner has one, less :data:`NOT_RULED`)
RULES: dict[str, Rule] = {
    "iterations": Rule("int", 1),
    "K1": Rule("int", 1),
    "K2": Rule("int", 1),
    "cd_k": Rule("int", 1),
    "aux_size": Rule("int", 1),
    "batch_size": Rule("int", 1, MAX_BATCH_SIZE, why="decoder draws held in memory at once per update"),
    "monitor_samples": Rule("int", 1, MAX_MONITOR_SAMPLES, none=True, why="decoder draws at every logged iteration"),
    "seed": Rule("int", 0),
    "log_every": Rule("int", 1),
    "exact_max_units": Rule(
        "int", 0, MAX_EXACT_UNITS, why="the exact monitor enumerates 2^units states at every logged iteration"
    ),
    "ais_every": Rule("int", 0),
    "ais_K": Rule("int", 1),
    "ais_chains": Rule("int", 1),
    "ais_is_samples": Rule("int", 1),
    "mlp_hidden": Rule("int", 0, none=True),
    "lr": Rule("real", 0.0, _INF, low_open=True, high_open=True),
    "betas": Rule("pair", 0.0, 1.0, high_open=True),
    "temperature": Rule("real", 0.0, _INF, low_open=True, high_open=True),
    "init_scale": Rule("real", 0.0, _INF, high_open=True),
    "sigma": Rule("real", 0.0, _INF, low_open=True, high_open=True),
    "visible_std": Rule("real", 0.0, _INF, low_open=True, high_open=True, none=True),
    "straight_through": Rule("bool"),
    "z": Rule("choice", choices=Z_KINDS),
    "select": Rule("choice", choices=SELECTIONS),
    "ablation": Rule("choice", choices=ABLATIONS + tuple(ABLATION_ALIASES), none=True),
    "ais_init": Rule("choice", choices=registry.INITS, none=True),
    "nvil_variant": Rule("choice", choices=NVIL_VARIANTS),
    "mixture_components": Rule("int", 1),
    "figure_samples": Rule("int", 1),
    "figure_sweeps": Rule("int", 0),
}


def _interval(r: Rule) -> str:
    hi = "inf" if r.high == _INF else f"{r.high}"
    return f"{'(' if r.low_open else '['}{r.low}, {hi}{')' if r.high_open else ']'}"


def _real_ok(r: Rule, x: Any) -> bool:
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x):
        return False
    return (x > r.low if r.low_open else x >= r.low) and (x < r.high if r.high_open else x <= r.high)


def check_value(name: str, value: Any) -> None:
    """Raise ValueError naming ``name``, the value and what it may be, unless :data:`RULES` allows it."""
    r = RULES[name]
    if value is None and r.none:
        return
    if r.kind == "int":
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        if r.low is not None and value < r.low:
            raise ValueError(f"{name} must be >= {r.low}, got {value}")
        if r.high is not None and value > r.high:
            raise ValueError(f"{name} must be <= {r.high}, got {value}" + (f" ({r.why})" if r.why else ""))
    elif r.kind == "real":
        if not _real_ok(r, value):
            raise ValueError(f"{name} must be a finite number in {_interval(r)}, got {value!r}")
    elif r.kind == "pair":
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
            raise ValueError(f"{name} must be a pair ({name}[0], {name}[1]), got {value!r}")
        for i, x in enumerate(value):
            if not _real_ok(r, x):
                raise ValueError(f"{name}[{i}] must be a finite number in {_interval(r)}, got {x!r}")
    elif r.kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}")
    elif r.kind == "choice":
        if not isinstance(value, str) or value not in r.choices:
            raise ValueError(
                f"unknown {name} {value!r}; choose one of {list(r.choices)}" + (" (or none)" if r.none else "")
            )
    else:  # pragma: no cover - a rule of an unknown kind
        raise AssertionError(f"rule of unknown kind {r.kind!r}")


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
