"""Checks of a workflow config beyond its schema (importable without torch): :func:`check_config`.

The config is loaded first (:func:`logzbench.pipeline.config_schema.load_config`: its size, the ``--config``
values, the schema, the estimator entries' options); then :func:`check_config` checks what the schema cannot.

Each check raises :class:`~logzbench.errors.ConfigError` with a message naming the config entry and
what to change, so that a config that cannot run is refused when the workflow's DAG is built rather
than in a job's log: unknown names (datasets, presets, families, estimators, hyperparameters), sizes a
data set does not have (:mod:`logzbench.data.sizes`), hyperparameters a trainer does not take
(:mod:`logzbench.training.hyperparams`), schedules, published rows (:func:`check_paper_rows`).
"""

from __future__ import annotations

import csv
import difflib
import functools
from pathlib import Path
from typing import Any, Mapping

from .. import registry
from ..data.sizes import (
    LABELLED_SOURCES,
    N_FEATURES,
)
from ..errors import ConfigError
from ..options import AUTO_TRANSITION, MAX_CHAINS, EstimateOptions, declared
from ..schedules import FILE, SCHEDULES, TUNED, from_file, kind_of
from ..sources import DISCRETE_ENERGY_FAMILIES
from ..training.hyperparams import FAMILY_ONLY, declared_names
from .dataset_checks import check_dataset_sizes, check_per_class
from .entries import ModelEntry
from .sweep import (
    dataset_kind,
    estimator_spec,
    estimators_of,
    fixed_schedule_K,
    listed_values,
    model_data_files,
    model_entry,
    model_hyperparams,
    model_n_visible,
    model_source,
    option_default,
)

__all__ = [
    "LEARNER_PAPERS",
    "MAX_CHAINS",
    "PUBLISHED_CSV",
    "check_config",
    "checked_models",
    "check_paper_rows",
    "check_source_model",
    "hyperparam_names",
]

# --------------------------------------------------------------------------- hyperparameters
#: keys any model's hyperparams may hold: ``family`` and ``learner`` pick the trainer, ``device`` (the
#: config's by default), ``figure_samples`` / ``figure_sweeps`` (:func:`logzbench.pipeline.jobs.train_job`'s figures)
_COMMON_HYPERPARAMS = frozenset({"family", "learner", "device", "figure_samples", "figure_sweeps"})


def hyperparam_names(family: str, learner: str | None = None) -> frozenset[str]:
    """The keys ``models.<name>.hyperparams`` (with its preset) may hold for a model of ``family``: the
    keyword arguments of its trainer (:attr:`logzbench.registry.FamilySpec.hyperparams`; an RBM also
    takes ``hidden_sizes``), or of ``learner``'s function (``n_hidden`` standing for ``hidden_sizes``), and
    ``family``, ``learner``, ``device``, ``figure_samples``, ``figure_sweeps``."""
    fam = registry.family(family)
    if learner:
        names = declared_names(registry.learner(learner, fam.name).entry) | {"n_hidden"}
    else:
        names = declared_names(*fam.hyperparams) - {k for k, fams in FAMILY_ONLY.items() if fam.name not in fams}
        if fam.name == "rbm":
            names |= {"hidden_sizes"}
    return names | _COMMON_HYPERPARAMS


def _check_hyperparam_names(config: Mapping, model: str, hp: Mapping[str, Any]) -> None:
    """Refuse a hyperparameter the model's trainer does not take (e.g. ``learnin_rate``), naming the closest."""
    allowed = hyperparam_names(hp["family"], hp.get("learner"))
    unknown = sorted(set(hp) - allowed)
    if not unknown:
        return
    key = unknown[0]
    close = difflib.get_close_matches(key, sorted(allowed), n=1)
    own = config["models"][model].get("hyperparams") or {}
    where = (
        f"models.{model}.hyperparams.{key}" if key in own else f"from preset {config['models'][model].get('preset')!r}"
    )
    trainer = f"the {hp['learner']} learner" if hp.get("learner") else f"the {hp['family']} trainer"
    raise ConfigError(
        f"model {model}: unknown hyperparameter {key!r} ({where})"
        + (f"; did you mean {close[0]!r}?" if close else "")
        + f" ({trainer} takes {', '.join(sorted(allowed))})"
    )


def _check_learner_values(config: Mapping, model: str, hp: Mapping[str, Any]) -> None:
    """Refuse a learner hyperparameter's value that the training job would refuse (its type or range, or
    ``ais_every`` not a multiple of ``log_every``): :func:`logzbench.training.learner_options.check_values`,
    the learners' own check (imported without torch), on the learner's defaults overridden by ``hp``."""
    from ..training.learner_options import RULES, check_values, learner_defaults

    try:
        check_values({**learner_defaults(hp["learner"]), **{k: v for k, v in hp.items() if k in RULES}})
    except ValueError as exc:
        raise ConfigError(f"model {model}: {exc} (models.{model}.hyperparams, {hp['learner']} learner)") from None


# --------------------------------------------------------------------------- checks
def _not_available(spec: registry.EstimatorSpec) -> str:
    if spec.families:
        return f"{spec.name} runs on {', '.join(f.upper() + 's' for f in spec.families)} only"
    kinds = " and ".join(spec.kinds) if len(spec.kinds) < 3 else f"{', '.join(spec.kinds[:-1])} and {spec.kinds[-1]}"
    if "binary" not in spec.kinds:
        kinds = f"continuous ({kinds})"
    return f"{spec.name} runs on {kinds} models only"


def _check_schedule(name: str, e: Mapping[str, Any], spec: registry.EstimatorSpec | None = None) -> None:
    """A schedule name (:data:`logzbench.schedules.SCHEDULES`, or an alias of one) or a readable file of betas
    (a relative path is taken from the working directory, as the estimate jobs take it)."""
    schedule = e.get(
        "schedule", option_default(spec, "schedule") if spec is not None else declared()["schedule"].default
    )
    if kind_of(schedule) is not FILE:
        return
    path = Path(str(schedule))
    if not path.is_file():
        raise ConfigError(
            f"estimator {name}: schedule {schedule!r} is neither a schedule name "
            f"({', '.join(SCHEDULES)}) nor a file of betas (no file {path.absolute()}); fix "
            f"estimators.{name}.schedule"
        )
    try:
        from_file(path)
    except (ValueError, OSError) as exc:
        raise ConfigError(f"estimator {name}: schedule file {schedule}: {exc}") from None


def _check_tuned(name: str, e: Mapping[str, Any], ks) -> None:
    """The tuned schedule's settings at each K of the sweep, as the estimate jobs will check them
    (:class:`logzbench.options.EstimateOptions`: a K it can double to, a start that can double)."""
    keys = ("tune_rounds", "tuned_start", "pilot_chains")
    for k in ks:
        try:
            EstimateOptions(schedule=TUNED, K=int(k), **{o: e[o] for o in keys if o in e})
        except ValueError as exc:
            raise ConfigError(f"estimator {name}: {exc}; fix estimators.{name}") from None


#: the reproduced papers' published values (:mod:`logzbench.report.published`, which reads them with
#: their checks); the rows they have are read here without importing the report (pandas, torch)
PUBLISHED_CSV = Path(__file__).parents[1] / "report" / "published.csv"
#: papers whose values the learner tables compare by learner and dataset (not a model's ``paper`` entry)
LEARNER_PAPERS = ("li_avil",)


@functools.lru_cache(maxsize=None)
def _published_rows(path: str) -> dict[str, frozenset[str]]:
    with open(path, newline="") as fh:
        rows: dict[str, set[str]] = {}
        for line in csv.DictReader(fh, skipinitialspace=True):
            rows.setdefault(line["paper"].strip(), set()).add(line["row"].strip())
    return {p: frozenset(r) for p, r in rows.items()}


def check_paper_rows(
    paper_rows: Mapping[str, Mapping[str, str]], known: Mapping[str, Any] | None = None
) -> dict[str, dict[str, str]]:
    """``paper_rows`` (``{model: {paper key: row name}}``) as a dict when every ``(paper, row)`` has
    published values; else :class:`ConfigError` naming the model, the paper and the rows it has.

    ``known``: ``{paper: rows}`` (default: those of :data:`PUBLISHED_CSV`).  A row of a learner paper
    (:data:`LEARNER_PAPERS`) is refused too: its values are matched by learner and dataset."""
    known = _published_rows(str(PUBLISHED_CSV)) if known is None else known
    for model, rows in paper_rows.items():
        for paper, row in rows.items():
            if paper in LEARNER_PAPERS:
                raise ConfigError(
                    f"model {model!r}: {paper!r}'s values are compared in table_learners.csv by "
                    "learner and dataset; a model trained by a learner needs no paper entry"
                )
            if row not in known.get(paper, ()):
                have = sorted(known.get(paper, ()))
                raise ConfigError(
                    f"model {model!r}: paper {paper!r} has no published row {row!r}"
                    + (
                        f" (its rows: {', '.join(have)})"
                        if have
                        else f" (unknown paper key; known: {', '.join(sorted(known))})"
                    )
                )
    return {m: dict(r) for m, r in paper_rows.items()}


#: keys of a model entry that describe its training (a source model is not trained)
_TRAINING_KEYS = ("preset", "hyperparams")
#: keys of a model entry that only a source model takes
_SOURCE_KEYS = ("family", "data")


def _where(path: str) -> str:
    """``path`` as the jobs will open it: a relative path is taken from the working directory."""
    p = Path(path)
    return str(p) if p.is_absolute() else f"{p} (relative to the working directory {Path.cwd()})"


def check_source_model(config: Mapping, model: str) -> None:
    """Refuse a source model entry (``models.<model>.source``: a model the workflow reads instead of
    training it) that cannot run, before any job: training keys beside ``source`` (``preset``, a non-empty
    ``hyperparams``), a malformed source (``FILE.py`` without ``:NAME``), a missing source file, a family
    the source cannot hold or that is unknown (:func:`logzbench.pipeline.sweep.source_family`), rows given
    both or neither ways (``dataset`` or ``data: {test, train}``), missing or unreadable ``data`` files.
    The source is not imported here (that runs the user's code): its family is the entry's or read from
    an ``.npz`` with NumPy; a model of another family is refused by the estimate job that loads it."""
    m = config["models"][model]
    for key in _TRAINING_KEYS:
        if m.get(key):
            raise ConfigError(
                f"model {model}: give either `source` (a model read from a file, not trained) or `{key}` "
                f"(a model the workflow trains), not both; remove models.{model}.{key} or models.{model}.source"
            )
    src = model_source(config, model)
    if not Path(src.path).is_file():
        what = "not a file" if Path(src.path).exists() else "not found"
        raise ConfigError(f"model {model}: source file {_where(src.path)} {what} (models.{model}.source)")
    files = model_data_files(config, model)
    if (m.get("dataset") is None) == (files is None):
        raise ConfigError(
            f"model {model}: give its rows either as `dataset` (a configured dataset) or as "
            f"`data: {{test: ROWS.npy, train: ROWS.npy}}` (train optional), "
            + ("not both" if files is not None else "neither is given")
        )
    if files is not None:
        for split, path in files.items():
            if not Path(path).is_file():
                raise ConfigError(f"model {model}: data.{split} file {_where(path)} not found (models.{model}.data)")
    elif m["dataset"] not in config["datasets"]:
        raise ConfigError(f"model {model}: unknown dataset {m['dataset']!r}; defined: {sorted(config['datasets'])}")
    model_hyperparams(config, model)  # the family: stated, or read from an .npz; checked against the rows
    model_n_visible(config, model)  # data.test's columns (a file that holds no rows is refused)


def _check_tracking_uri(config: Mapping) -> None:
    """Refuse a ``tracking.uri`` MLflow cannot use (:func:`logzbench.tracking.resolve_tracking_uri`: the key
    and the accepted forms), which a job would otherwise meet only as MLflow's error in its log."""
    t = config.get("tracking") or {}
    if t.get("enabled", True) and t.get("uri") is not None:
        from ..errors import TrackingError
        from ..tracking import resolve_tracking_uri

        try:
            resolve_tracking_uri(t["uri"], key="tracking.uri")
        except TrackingError as exc:
            raise ConfigError(str(exc)) from None


def _check_case_collisions(config: Mapping) -> None:
    """Refuse model or dataset names that differ only by case (``rbm-no-hQ`` / ``rbm-no-hq``): each names
    files (``models/<model>.npz``, ``plots/<model>.png``, ``data/<dataset>.npz``) that would overwrite
    each other on a case-insensitive file system, and the report's pages would be told apart by case only."""
    for section in ("models", "datasets"):
        seen: dict[str, str] = {}
        for name in config.get(section) or {}:
            other = seen.setdefault(str(name).casefold(), str(name))
            if other != str(name):
                raise ConfigError(
                    f"{section} {other!r} and {name!r} differ only by case: their files would collide on a "
                    f"case-insensitive file system; rename one ({section}.{name})"
                )


def check_config(config: Mapping, presets: Mapping | None = None) -> list[str]:
    """Check a (schema-validated) config beyond what its schema says; return warnings.

    Raises :class:`ConfigError` naming the entry and what to change: no models and no trials, two model
    or dataset names that differ only by case (:func:`_check_case_collisions`), a
    dataset of unknown dimension, a model's unknown dataset, preset, family or estimator, an
    estimator listed for a model whose family it does not apply to, an estimator's unknown method or
    models, a fixed schedule (``sm14500``, a file) with another K, a CSL K below ``thin``, a ``test_subset`` on a model
    whose dataset has no labels or a ``per_class`` its test rows cannot give, a hyperparameter the model's trainer
    does not take, a learner's hyperparameter of a type or value the learner refuses
    (:mod:`logzbench.training.learner_options`), a dataset size the
    data set does not have (``n_train``, ``n_test``, ``n_valid``; van Hateren ``n_test_images`` of
    ``n_images``, ``n_components`` of the patch's pixels), an unknown schedule or a schedule file that
    does not exist or holds no schedule, a published row (``paper``) the papers do not have, a source model
    entry that cannot run (:func:`check_source_model`), a trained model's entry without ``dataset`` or with a
    source model's keys (``family``, ``data``).  Warns of a model left
    with no estimate (e.g. a DBN with only base-rate inits) and of sweep keys an estimator has no axis
    for."""
    return checked_models(config, presets)[1]


def checked_models(config: Mapping, presets: Mapping | None = None) -> tuple[dict[str, ModelEntry], list[str]]:
    """:func:`check_config`, and the entry of each model it checked (:func:`logzbench.pipeline.sweep.model_entry`,
    built once, in config order): what :func:`logzbench.pipeline.plan.load` makes its plan of."""
    warnings: list[str] = []
    _check_sections(config)
    models = {model: _checked_model(config, model, presets, warnings) for model in config.get("models") or {}}
    for name, e in (config.get("estimators") or {}).items():
        _check_estimator(config, name, e, models, warnings)
    return models, warnings


def _check_sections(config: Mapping) -> None:
    """What is checked before the models: something to run, the tracking URI, names told apart by case only,
    the datasets' dimensions and sizes, the estimators' methods."""
    if not config.get("models") and not (config.get("trials") or {}):
        raise ConfigError("the config defines no models and no trials: nothing to run")
    _check_tracking_uri(config)
    _check_case_collisions(config)
    for d, spec in (config.get("datasets") or {}).items():
        if dataset_kind(config, d) == "binary" and spec["source"] not in N_FEATURES and "n_visible" not in spec:
            raise ConfigError(f"dataset {d}: give n_visible")
        check_dataset_sizes(d, spec)
    for name in config.get("estimators") or {}:
        estimator_spec(config, name)  # a known method


def _check_trained_model(config: Mapping, model: str, m: Mapping[str, Any]) -> None:
    """A trained model's entry: no source model's keys, a known ``dataset``."""
    given = [k for k in _SOURCE_KEYS if m.get(k) is not None]
    if given:
        raise ConfigError(
            f"model {model}: models.{model}.{given[0]} applies to a model read from a `source` file only; "
            "a trained model's family is hyperparams.family (or its preset's) and its rows its `dataset`"
        )
    if m.get("dataset") is None:
        raise ConfigError(
            f"model {model}: give its `dataset` (or a `source` file for a model the workflow does not train)"
        )
    if m["dataset"] not in config["datasets"]:
        raise ConfigError(f"model {model}: unknown dataset {m['dataset']!r}; defined: {sorted(config['datasets'])}")


def _check_hyperparams(config: Mapping, entry: ModelEntry, m: Mapping[str, Any]) -> None:
    """The model's training hyperparameters: names its trainer takes, a learner's values, a DBM's per-layer
    pretraining epochs, a grid MRF's sides against its data."""
    model, hp = entry.name, dict(entry.hyperparams)
    fam = hp["family"]
    if m.get("source") is None:
        _check_hyperparam_names(config, model, hp)
    if hp.get("learner") is not None:
        _check_learner_values(config, model, hp)
    if fam == "dbm" and hp.get("pretrain_epochs") is not None and hp.get("hidden_sizes") is not None:
        from ..training.hyperparams import per_layer_epochs

        try:
            per_layer_epochs(hp["pretrain_epochs"], len(hp["hidden_sizes"]))
        except ValueError as exc:
            raise ConfigError(f"model {model}: hyperparams.{exc}") from None
    if fam == "grid-mrf" and m.get("source") is None:
        from ..training.grid import check_grid_hyperparams

        why = check_grid_hyperparams(hp, entry.n_visible)
        if why is not None:
            raise ConfigError(f"model {model}: {why}")


def _check_model_estimators(config: Mapping, entry: ModelEntry, m: Mapping[str, Any]) -> None:
    """The estimators of a model: each it lists applies to its family; a ``transition`` of a user's discrete
    energy only on such a model."""
    model, fam = entry.name, entry.family.name
    for name in m.get("estimators") or []:
        spec = estimator_spec(config, name)
        if not spec.applies_to(fam):
            raise ConfigError(
                f"model {model}: estimator {name!r} ({spec.name}) is not available for a {fam.upper()} "
                f"({_not_available(spec)}; for a {fam.upper()} use one of {list(registry.estimators_for(fam))}); "
                f"remove it from models.{model}.estimators (without an explicit list, estimators a family "
                f"lacks are skipped automatically)"
            )
    for name in entry.estimators:
        t = (config["estimators"].get(name) or {}).get("transition")
        if t not in (None, "gibbs", AUTO_TRANSITION) and fam not in DISCRETE_ENERGY_FAMILIES:
            raise ConfigError(
                f"model {model}: estimator {name} has transition {t}, which is for a user's discrete energy "
                f"(energy-binary, energy-categorical); a {fam} model anneals with its own sampler: give {model} "
                f"an estimator entry without transition, or list {name} on energy models only (its `models`)"
            )


def _model_warnings(config: Mapping, entry: ModelEntry) -> list[str]:
    """Warnings of a model: the base-rate and mixture estimates a source model without training rows skips,
    no estimate to run at all."""
    model, out = entry.name, []
    if entry.lacks_training_rows:
        skipped = [
            n
            for n in entry.estimators
            if "init" in estimator_spec(config, n).axes
            and {"base-rate", "mixture"} & set(listed_values(config, n, "inits"))
        ]
        if skipped:
            listed = {i for n in skipped for i in listed_values(config, n, "inits")}
            starts = " and ".join(i for i in ("base-rate", "mixture") if i in listed)
            out.append(
                f"model {model} has no training rows (models.{model}.data.train), so its {starts} estimates "
                f"({', '.join(skipped)}) are skipped"
            )
    if not entry.jobs:
        out.append(
            f"model {model} ({entry.family.name}) has no estimate to run (a DBN supports the uniform initial "
            f"distribution only; check the estimators' inits and the exact limits)"
        )
    return out


def _checked_model(config: Mapping, model: str, presets: Mapping | None, warnings: list[str]) -> ModelEntry:
    """Check one model's entry (appending its warnings) and return it (:func:`.sweep.model_entry`)."""
    m = config["models"][model]
    if m.get("source") is not None:
        check_source_model(config, model)
    else:
        _check_trained_model(config, model, m)
    for name in estimators_of(config, model):
        if name not in config["estimators"]:
            raise ConfigError(f"model {model}: unknown estimator {name!r}; defined: {sorted(config['estimators'])}")
    entry = model_entry(config, model, presets)
    _check_hyperparams(config, entry, m)
    if m.get("paper"):
        check_paper_rows({model: m["paper"]})
    _check_model_estimators(config, entry, m)
    warnings += _model_warnings(config, entry)
    return entry


def _check_estimator_models(config: Mapping, name: str, e: Mapping[str, Any], models: Mapping[str, ModelEntry]) -> None:
    """An estimator entry against the models: ``mixture_components`` only with the mixture init, known
    ``models``, a ``test_subset`` only on models with test labels and a ``per_class`` they can give."""
    if e.get("mixture_components") is not None and "mixture" not in listed_values(config, name, "inits"):
        raise ConfigError(
            f"estimator {name}: mixture_components applies to init mixture only, and its inits "
            f"({', '.join(map(str, listed_values(config, name, 'inits'))) or 'none'}) do not list it; add "
            "mixture to its inits or drop mixture_components"
        )
    unknown = sorted(set(e.get("models") or []) - set(config.get("models") or {}))
    if unknown:
        raise ConfigError(f"estimator {name}: unknown models {unknown}; defined: {sorted(config['models'])}")
    if not e.get("test_subset"):
        return
    for model, entry in models.items():
        dataset = entry.dataset
        source = config["datasets"][dataset]["source"] if dataset is not None else "rows from data files"
        if source not in LABELLED_SOURCES and name in entry.estimators:
            raise ConfigError(
                f"estimator {name}: test_subset needs test labels, and model {model}'s dataset "
                f"({source}) has none (labelled: {', '.join(LABELLED_SOURCES)}); remove "
                f"test_subset or run {name} on other models (its `models`)"
            )
        if name in entry.estimators:
            check_per_class(config, name, model, dataset, int(e["test_subset"]["per_class"]))


def _check_axes(
    name: str, e: Mapping[str, Any], spec: registry.EstimatorSpec, models: Mapping[str, ModelEntry], warnings: list[str]
) -> None:
    """An estimator entry's sweep keys: one value of an option it reads without sweeping it (the sandwich's K
    and init; an init each model it runs on has), a warning for keys of axes it has not."""
    for axis, key in registry.AXIS_CONFIG_KEYS.items():
        if axis in ("K", "init") and spec.reads_unswept(axis):  # unswept_options
            if len(e.get(key) or []) > 1:
                what = (
                    "it reads one K (the sandwich: its starting K, doubled by itself; smc: its fixed "
                    "schedule's steps, or the cap of its adaptive temperatures)"
                    if axis == "K"
                    else "it runs from one initial distribution"
                )
                raise ConfigError(
                    f"estimator {name}: {spec.name} is not swept over {key}; {what}: give one "
                    f"value, e.g. {key}: [{e[key][0]}]"
                )
            if axis == "init" and e.get(key):
                for model, entry in models.items():
                    fam = entry.family
                    if name in entry.estimators and fam.inits and e[key][0] not in fam.inits:
                        raise ConfigError(
                            f"estimator {name}: model {model} ({fam.name}) has no initial "
                            f"distribution {e[key][0]!r} (its: {', '.join(fam.inits)}); run "
                            f"{name} on other models (its `models`) or change its inits"
                        )
            continue
        if e.get(key) and axis not in spec.axes:
            warnings.append(f"estimator {name} ({spec.name}) is not swept over {key}: its `{key}` is ignored")


def _check_K(config: Mapping, name: str, e: Mapping[str, Any], spec: registry.EstimatorSpec) -> None:
    """An estimator entry's K: a fixed schedule's own, CSL's at least ``thin``, the tuned schedule's settings
    at each K (or the one K it needs where K is not swept)."""
    if "K" in spec.axes:
        fixed = fixed_schedule_K(e)
        ks = [fixed] if fixed is not None and not e.get("K") else listed_values(config, name, "K")
        if fixed is not None and ks != [fixed]:
            named = kind_of(e.get("schedule")) is not FILE
            what = "the sm14500 schedule" if named else f"the schedule file {e['schedule']}"
            raise ConfigError(f"estimator {name}: {what} has K = {fixed}; set K: [{fixed}] or omit K")
        if "samples_per_chain" in spec.options:  # CSL: K sweeps per chain, one sample kept every `thin`
            bad = [k for k in ks if k // e.get("thin", 1) < 1]
            if bad:
                raise ConfigError(f"estimator {name}: K {bad} < thin: no CSL sample would be kept")
        if "schedule" in spec.options and e.get("schedule", option_default(spec, "schedule")) == TUNED:
            _check_tuned(name, e, ks)
    elif "schedule" in spec.options and e.get("schedule") == TUNED and spec.reads_unswept("K"):
        if spec.name == "sandwich":  # the one estimator that doubles K itself
            raise ConfigError(
                f"estimator {name}: {spec.name} doubles K itself, and the tuned schedule is tuned for one K; "
                f"fix estimators.{name}.schedule (adaptive, linear or sigmoid)"
            )
        if not e.get("K"):
            raise ConfigError(
                f"estimator {name}: the tuned schedule needs K, the length of its last round; add estimators.{name}.K"
            )
        _check_tuned(name, e, e["K"])  # smc: its one K, the tuned schedule's last round


def _check_estimator(
    config: Mapping, name: str, e: Mapping[str, Any], models: Mapping[str, ModelEntry], warnings: list[str]
) -> None:
    """Check one estimator entry (appending its warnings) against the models' entries."""
    spec = estimator_spec(config, name)
    _check_estimator_models(config, name, e, models)
    if "schedule" in spec.options:
        _check_schedule(name, e, spec)
    _check_axes(name, e, spec, models, warnings)
    _check_K(config, name, e, spec)
