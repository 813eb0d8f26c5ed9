"""Checks of a workflow config (importable without torch): :func:`load_config` before and with its schema,
:func:`check_config` beyond it.

:func:`load_config` checks the config as Snakemake has loaded it, before anything else walks it: its size
once its YAML aliases are expanded (:func:`check_size`: an alias bomb is refused in O(distinct values)),
then turns the strings of ``--config`` values into numbers where they stand for them
(:func:`coerce_cli_values`, on those values only: a YAML-quoted ``"2024"`` stays a string), then the
schema (:func:`validate_config`, with :func:`config_validator`: every number, and every number a range is
checked on, is finite; defaults filled in).

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
import math
import reprlib
from pathlib import Path
from typing import Any, Mapping, MutableMapping

from .. import options, registry
from ..data.sizes import (
    DIGITS_AVIL_ROWS,
    FREY_FACES,
    LABELLED_SOURCES,
    N_FEATURES,
    N_LABELS,
    SOURCE_ROWS,
    VANHATEREN_DEFAULTS,
    VANHATEREN_IMAGE_SIDE,
    VANHATEREN_N_IMAGES,
)
from ..errors import ConfigError
from ..options import MAX_CHAINS, declared
from ..schedules import SCHEDULES, from_file
from ..training.hyperparams import FAMILY_ONLY, declared_names
from .sweep import (
    dataset_kind,
    estimator_spec,
    estimators_of,
    estimators_run,
    family_spec,
    fixed_schedule_K,
    lacks_training_rows,
    listed_values,
    model_data_files,
    model_dataset,
    model_hyperparams,
    model_jobs,
    model_n_visible,
    model_source,
    option_default,
)

__all__ = [
    "LEARNER_PAPERS",
    "MAX_CHAINS",
    "MAX_CONFIG_VALUES",
    "PUBLISHED_CSV",
    "check_config",
    "check_estimator_options",
    "check_paper_rows",
    "check_size",
    "check_source_model",
    "coerce_cli_values",
    "config_validator",
    "estimator_entry_schema",
    "hyperparam_names",
    "load_config",
    "short_repr",
    "validate_config",
]

# --------------------------------------------------------------------------- loading: size, --config, schema
#: the most values (mappings, lists and scalars, each counted as often as YAML aliases repeat it) a config may
#: hold: the shipped configs hold a few hundred; a YAML alias bomb (an alias repeated inside what it names)
#: holds billions, which every walk over it (the schema's included) would expand
MAX_CONFIG_VALUES = 1_000_000

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 60
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 5
_repr.maxlevel = 2


def short_repr(value: Any) -> str:
    """``repr(value)`` cut short (:mod:`reprlib`: a few items per level, a few levels), for error messages
    about a config value of any size; it never expands more of a shared (aliased) structure than it shows."""
    return _repr.repr(value)


def _shorten(message: str, instance: Any, most: int = 300) -> str:
    """A validation ``message`` whose ``repr(instance)`` is replaced by :func:`short_repr` where too long."""
    if len(message) <= most:
        return message
    full = repr(instance)
    if full in message:
        message = message.replace(full, short_repr(instance))
    return message if len(message) <= most else message[: most - 40] + " ... " + message[-35:]


def check_size(config: Any, most: int = MAX_CONFIG_VALUES) -> None:
    """Refuse a config of more than ``most`` values once its YAML aliases are expanded.

    YAML loads an alias as the same object as its anchor, so a file of a few lines (``*b`` nine times in
    ``&c``, ``*a`` nine times in ``&b``, ...) holds billions of values by reference; every walk over it
    expands them.  This one counts each distinct mapping or list once (memoised by its ``id``), so it takes
    time in the file's size, and stops at ``most``.  :class:`ConfigError` names the top-level key."""

    sizes: dict[int, int] = {}

    def size(obj: Any) -> int:
        if isinstance(obj, Mapping):
            children = obj.values()
        elif isinstance(obj, (list, tuple)):
            children = obj
        else:
            return 1
        known = sizes.get(id(obj))
        if known is not None:
            return known
        sizes[id(obj)] = most + 1  # a value holding itself (a recursive alias) counts as too many
        n = 1
        for child in children:
            n += size(child)
            if n > most:
                break
        sizes[id(obj)] = n = min(n, most + 1)
        return n

    if not isinstance(config, Mapping):
        return
    total = 1
    for key, value in config.items():
        try:
            total += size(value)
        except RecursionError:
            raise ConfigError(f"config key {key}: nested too deeply (lists or mappings within each other)") from None
        if total > most:
            raise ConfigError(
                f"config key {key}: the config holds more than {most:,} values once its YAML aliases (*name) are "
                "expanded; a YAML alias repeated inside what it names (an alias bomb)? Write the values out"
            )


#: ``--config`` keys whose values are text even where they read as numbers: names (a model ``2024``) and
#: free text
_STRING_KEYS = frozenset(
    {"description", "experiment", "uri", "data_mirror", "artifact_dir", "preset", "dataset", "source", "schedule",
     "device", "method", "csl_mode", "binarize", "models", "estimators", "family", "learner", "test", "train"}
)  # fmt: skip


def coerce_cli_values(obj: Any, key: str | None = None) -> Any:
    """Values given on the command line (``--config key=...``) as the YAML file would give them.

    Snakemake parses a ``--config`` value with int, float, then YAML's base loader, which leaves every nested
    scalar a string (``--config seeds=[0,1]`` gives ``['0', '1']``): each string that YAML reads as a number, a
    boolean or null becomes one, except under the keys of names and text (:data:`_STRING_KEYS`).  Only the
    ``--config`` values are coerced: a config file's values are typed by YAML already (a quoted ``"2024"`` is a
    string there)."""
    import yaml

    if isinstance(obj, Mapping):
        return {k: coerce_cli_values(v, k) for k, v in obj.items()}
    if isinstance(obj, list):
        return [coerce_cli_values(v, key) for v in obj]
    if isinstance(obj, str) and key not in _STRING_KEYS:
        try:
            v = yaml.safe_load(obj)
        except yaml.YAMLError:
            return obj
        if v is None or isinstance(v, (bool, int, float)):
            return v
        try:
            return float(obj)
        except ValueError:
            return obj
    return obj


def _finite_first(keyword: str):
    """The validator of JSON-schema keyword ``keyword`` (a range) with a non-finite number (NaN, inf) refused
    first: JSON has no such numbers, YAML's ``.nan`` and ``.inf`` load as floats, and every comparison with NaN
    is False (so ``minimum: 0`` lets it through)."""
    import jsonschema

    check = jsonschema.Draft202012Validator.VALIDATORS[keyword]

    def validate(validator, value, instance, schema):
        if isinstance(instance, float) and not math.isfinite(instance):
            yield jsonschema.ValidationError(f"{instance!r} is not a finite number")
        else:
            yield from check(validator, value, instance, schema)

    return validate


def _finite_type(validator, types, instance, schema):
    """The ``type`` keyword, where a non-finite float is not a ``number`` (nor an ``integer``)."""
    import jsonschema

    named = {types} if isinstance(types, str) else set(types)
    if isinstance(instance, float) and not math.isfinite(instance) and named & {"number", "integer"}:
        yield jsonschema.ValidationError(f"{instance!r} is not a finite number")
    else:
        yield from jsonschema.Draft202012Validator.VALIDATORS["type"](validator, types, instance, schema)


def _fill_defaults(validator, properties, instance, schema):
    """The ``properties`` keyword that also fills in each property's ``default`` (as snakemake.utils.validate)."""
    import jsonschema

    if validator.is_type(instance, "object"):
        for name, sub in properties.items():
            if "default" in sub:
                instance.setdefault(name, sub["default"])
    yield from jsonschema.Draft202012Validator.VALIDATORS["properties"](validator, properties, instance, schema)


@functools.lru_cache(maxsize=None)
def _validator_class(fill_defaults: bool):
    import jsonschema

    keywords = {k: _finite_first(k) for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")}
    keywords["type"] = _finite_type
    if fill_defaults:
        keywords["properties"] = _fill_defaults
    return jsonschema.validators.extend(jsonschema.Draft202012Validator, keywords)


def config_validator(schema: Mapping[str, Any], fill_defaults: bool = False):
    """A JSON-schema (2020-12) validator of the config's schema whose numbers are finite (:func:`_finite_type`,
    :func:`_finite_first`: every ``type: number`` or ``integer`` and every range refuses NaN and inf, in this one
    place for every key of the schema file and every estimator option of :mod:`logzbench.options`);
    ``fill_defaults``: it fills in the defaults as it validates."""
    return _validator_class(fill_defaults)(schema)


def _schema_error(validator, instance: Any, prefix: str = "config") -> ConfigError | None:
    """The best of the validator's errors on ``instance`` as one short line naming the entry, else ``None``."""
    import jsonschema

    error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
    if error is None:
        return None
    where = "".join(f".{p}" for p in error.absolute_path)
    message = error.message
    if error.validator == "maxItems":  # jsonschema's "[...] is too long" names neither the length nor the limit
        message = f"{len(error.instance):,} values are more than the {error.validator_value:,} allowed"
    return ConfigError(f"{prefix}{where}: {_shorten(message, error.instance)}")


def validate_config(config: MutableMapping, schema: Mapping[str, Any]) -> None:
    """Check ``config`` against the workflow's schema and fill in its defaults; :class:`ConfigError` names the
    entry and the problem in one line (a value's ``repr`` cut short).  Call :func:`check_size` first."""
    error = _schema_error(config_validator(schema, fill_defaults=True), config)
    if error is not None:
        raise error


def load_config(config: MutableMapping, schema: Mapping[str, Any], cli_values: Mapping | None = None) -> None:
    """Check and complete the config Snakemake loaded, in place, before the workflow walks it: its size
    (:func:`check_size`), the ``--config`` values ``cli_values`` coerced (:func:`coerce_cli_values`) over
    those Snakemake merged in, the schema (:func:`validate_config`), the estimator entries
    (:func:`check_estimator_options`).  :class:`ConfigError` on the first problem."""
    check_size(config)
    if cli_values:
        from snakemake.utils import update_config  # (how Snakemake merged them in)

        update_config(config, coerce_cli_values(dict(cli_values)))
    validate_config(config, schema)
    check_estimator_options(config, schema)


def estimator_entry_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON schema of one ``estimators.<name>`` entry: the config schema's (its non-option keys:
    ``method``, ``models``, the sweep axes, ...) with every declared estimator option's property
    (:func:`logzbench.options.config_schema`) and the schema's ``$defs``."""
    entry = dict(schema["properties"]["estimators"]["additionalProperties"])
    return {**options.config_schema(entry), "$defs": schema.get("$defs", {})}


def check_estimator_options(config: MutableMapping, schema: Mapping[str, Any]) -> None:
    """Check every estimator entry's option keys and values against :func:`estimator_entry_schema` and fill
    in the options' defaults, as the schema does for the rest of the config; a former option name is
    renamed with a one-line note.  :class:`ConfigError` names the entry and the problem."""
    entry_schema = estimator_entry_schema(schema)
    validator = config_validator(entry_schema)
    defaults = {k: p["default"] for k, p in entry_schema["properties"].items() if "default" in p}
    for name, entry in (config.get("estimators") or {}).items():
        if not isinstance(entry, MutableMapping):
            continue  # the schema refused it already
        renamed = options.rename_deprecated(entry)
        if renamed != entry:
            entry.clear()
            entry.update(renamed)
        error = _schema_error(validator, entry, prefix=f"estimator {name}")
        if error is not None:
            raise error
        for key, value in defaults.items():
            entry.setdefault(key, value)


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


def _too_many(dataset: str, key: str, value: int, most: int, what: str) -> ConfigError:
    return ConfigError(
        f"dataset {dataset}: {key}={value} is more than {what}; set datasets.{dataset}.{key} to at "
        f"most {most} (or leave it out)"
    )


def _check_dataset_sizes(name: str, d: Mapping[str, Any]) -> None:
    """Refuse sizes the data set does not have (:data:`SOURCE_ROWS`, :data:`DIGITS_AVIL_ROWS`,
    :data:`FREY_FACES`, the van Hateren settings), which :mod:`logzbench.data` would refuse only when it
    prepares the data set."""
    source = d["source"]
    n_train, n_test, n_valid = d.get("n_train"), d.get("n_test"), int(d.get("n_valid") or 0)
    if d.get("shift_augment") is not None and source != "digits-avil":
        raise ConfigError(f"dataset {name}: shift_augment applies to digits-avil only, not to {source}; remove it")
    if source == "vanhateren":
        v = {**VANHATEREN_DEFAULTS, **{k: d[k] for k in VANHATEREN_DEFAULTS if d.get(k) is not None}}
        if v["n_images"] > VANHATEREN_N_IMAGES:
            raise _too_many(
                name,
                "n_images",
                v["n_images"],
                VANHATEREN_N_IMAGES,
                f"the {VANHATEREN_N_IMAGES} registered van Hateren images",
            )
        if v["n_test_images"] >= v["n_images"]:
            raise ConfigError(
                f"dataset {name}: n_test_images={v['n_test_images']} leaves no training image of "
                f"n_images={v['n_images']}; set datasets.{name}.n_test_images to at most "
                f"{v['n_images'] - 1}"
            )
        if v["patch_size"] > VANHATEREN_IMAGE_SIDE:
            raise _too_many(
                name,
                "patch_size",
                v["patch_size"],
                VANHATEREN_IMAGE_SIDE,
                f"the images' side ({VANHATEREN_IMAGE_SIDE} pixels)",
            )
        pixels = v["patch_size"] ** 2 - int(bool(v["remove_dc"]))
        if v["n_components"] > pixels:
            raise _too_many(
                name,
                "n_components",
                v["n_components"],
                pixels,
                f"the {pixels} pixels of a {v['patch_size']}x{v['patch_size']} patch"
                + (" less its mean (remove_dc)" if v["remove_dc"] else ""),
            )
        if v["n_train"] <= v["n_components"]:
            raise ConfigError(
                f"dataset {name}: n_train={v['n_train']} training patches cannot fit "
                f"n_components={v['n_components']} PCA components; set datasets.{name}.n_train above "
                f"{v['n_components']}"
            )
        return
    if source == "frey":
        n_test = 0 if n_test is None else int(n_test)
        if n_test > FREY_FACES - 2:
            raise _too_many(name, "n_test", n_test, FREY_FACES - 2, f"the {FREY_FACES} Frey faces less two to train on")
        if n_train is not None and int(n_train) > FREY_FACES - n_test:
            raise _too_many(
                name,
                "n_train",
                n_train,
                FREY_FACES - n_test,
                f"the {FREY_FACES - n_test} Frey faces left after n_test={n_test}",
            )
        return
    if source == "digits-avil":
        if n_test is not None:
            raise ConfigError(
                f"dataset {name}: digits-avil has no n_test (its test split is its validation split); "
                f"remove datasets.{name}.n_test"
            )
        rows = DIGITS_AVIL_ROWS[d.get("shift_augment") or "train"]
    elif source in SOURCE_ROWS:
        rows = SOURCE_ROWS[source]
    else:
        return
    if "valid" in rows and n_valid:
        raise ConfigError(
            f"dataset {name}: {source} has a fixed validation split ({rows['valid']} rows); "
            f"n_valid must be 0, got {n_valid}"
        )
    if n_valid >= rows["train"]:
        raise _too_many(
            name, "n_valid", n_valid, rows["train"] - 1, f"the {rows['train']} training rows of {source} less one"
        )
    if n_train is not None and int(n_train) > rows["train"] - n_valid:
        less = f" less n_valid={n_valid}" if n_valid else ""
        raise _too_many(
            name, "n_train", n_train, rows["train"] - n_valid, f"the {rows['train']} training rows of {source}{less}"
        )
    if n_test is not None and "test" in rows and int(n_test) > rows["test"]:
        raise _too_many(name, "n_test", n_test, rows["test"], f"the {rows['test']} test rows of {source}")


def _test_rows(d: Mapping[str, Any]) -> int | None:
    """Test rows of a prepared binary dataset (``n_test``, else the source's; digits-avil: its validation
    split), ``None`` where unknown."""
    if d["source"] == "digits-avil":
        return DIGITS_AVIL_ROWS[d.get("shift_augment") or "train"]["valid"]
    if d.get("n_test") is not None:
        return int(d["n_test"])
    return SOURCE_ROWS.get(d["source"], {}).get("test")


def _check_per_class(config: Mapping, name: str, model: str, per_class: int) -> None:
    """Refuse a ``test_subset`` ``per_class`` that no label of the model's test rows can have (the job's
    :func:`logzbench.data.class_subset` would refuse it after the data are prepared): more than the test
    rows divided by the number of labels (the smallest label has at most that many)."""
    dataset = model_dataset(config, model)
    d = config["datasets"][dataset]
    rows = _test_rows(d)
    if rows is None:
        return
    labels = N_LABELS.get(d["source"], 1)
    most = rows // labels
    if per_class > most:
        held = f"{rows} test rows of {labels} labels" if labels > 1 else f"{rows} test rows"
        raise ConfigError(
            f"estimator {name}: test_subset per_class={per_class} is more than model {model}'s dataset "
            f"{dataset} ({d['source']}) can give: its {held} leave at most {most} rows to its smallest "
            f"label; set estimators.{name}.test_subset.per_class to at most {most}"
        )


def _check_schedule(name: str, e: Mapping[str, Any], spec: registry.EstimatorSpec | None = None) -> None:
    """A schedule name (:data:`logzbench.schedules.SCHEDULES`) or a readable file of betas (a relative path is
    taken from the working directory, as the estimate jobs take it)."""
    schedule = e.get(
        "schedule", option_default(spec, "schedule") if spec is not None else declared()["schedule"].default
    )
    if schedule in SCHEDULES:
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
    warnings: list[str] = []
    if not config.get("models") and not (config.get("trials") or {}):
        raise ConfigError("the config defines no models and no trials: nothing to run")
    _check_tracking_uri(config)
    _check_case_collisions(config)
    for d, spec in (config.get("datasets") or {}).items():
        if dataset_kind(config, d) == "binary" and spec["source"] not in N_FEATURES and "n_visible" not in spec:
            raise ConfigError(f"dataset {d}: give n_visible")
        _check_dataset_sizes(d, spec)
    for name in config.get("estimators") or {}:
        estimator_spec(config, name)  # a known method
    for model, m in (config.get("models") or {}).items():
        if m.get("source") is not None:
            check_source_model(config, model)
        else:
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
                raise ConfigError(
                    f"model {model}: unknown dataset {m['dataset']!r}; defined: {sorted(config['datasets'])}"
                )
        for name in estimators_of(config, model):
            if name not in config["estimators"]:
                raise ConfigError(f"model {model}: unknown estimator {name!r}; defined: {sorted(config['estimators'])}")
        hp = model_hyperparams(config, model, presets)
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
        if m.get("paper"):
            check_paper_rows({model: m["paper"]})
        for name in m.get("estimators") or []:
            spec = estimator_spec(config, name)
            if not spec.applies_to(fam):
                raise ConfigError(
                    f"model {model}: estimator {name!r} ({spec.name}) is not available for a {fam.upper()} "
                    f"({_not_available(spec)}; for a {fam.upper()} use one of {list(registry.estimators_for(fam))}); "
                    f"remove it from models.{model}.estimators (without an explicit list, estimators a family "
                    f"lacks are skipped automatically)"
                )
        if m.get("source") is not None and lacks_training_rows(config, model):
            skipped = [
                n
                for n in estimators_run(config, model, presets)
                if "init" in estimator_spec(config, n).axes and "base-rate" in listed_values(config, n, "inits")
            ]
            if skipped:
                warnings.append(
                    f"model {model} has no training rows (models.{model}.data.train), so its base-rate estimates "
                    f"({', '.join(skipped)}) are skipped"
                )
        if not model_jobs(config, model, presets):
            warnings.append(
                f"model {model} ({fam}) has no estimate to run (a DBN supports the uniform initial "
                f"distribution only; check the estimators' inits and the exact limits)"
            )
    for name, e in (config.get("estimators") or {}).items():
        spec = estimator_spec(config, name)
        unknown = sorted(set(e.get("models") or []) - set(config.get("models") or {}))
        if unknown:
            raise ConfigError(f"estimator {name}: unknown models {unknown}; defined: {sorted(config['models'])}")
        if e.get("test_subset"):
            for model in config.get("models") or {}:
                dataset = model_dataset(config, model)
                source = config["datasets"][dataset]["source"] if dataset is not None else "rows from data files"
                if source not in LABELLED_SOURCES and name in estimators_run(config, model, presets):
                    raise ConfigError(
                        f"estimator {name}: test_subset needs test labels, and model {model}'s dataset "
                        f"({source}) has none (labelled: {', '.join(LABELLED_SOURCES)}); remove "
                        f"test_subset or run {name} on other models (its `models`)"
                    )
                if name in estimators_run(config, model, presets):
                    _check_per_class(config, name, model, int(e["test_subset"]["per_class"]))
        if "schedule" in spec.options:
            _check_schedule(name, e, spec)
        for axis, key in registry.AXIS_CONFIG_KEYS.items():
            if axis in ("K", "init") and spec.reads_unswept(axis):  # unswept_options
                if len(e.get(key) or []) > 1:
                    what = (
                        "its K is the starting K (doubled by the estimator itself)"
                        if axis == "K"
                        else "it runs from one initial distribution"
                    )
                    raise ConfigError(
                        f"estimator {name}: {spec.name} is not swept over {key}; {what}: give one "
                        f"value, e.g. {key}: [{e[key][0]}]"
                    )
                if axis == "init" and e.get(key):
                    for model in config.get("models") or {}:
                        fam = family_spec(config, model, presets)
                        if name in estimators_run(config, model, presets) and fam.inits and e[key][0] not in fam.inits:
                            raise ConfigError(
                                f"estimator {name}: model {model} ({fam.name}) has no initial "
                                f"distribution {e[key][0]!r} (its: {', '.join(fam.inits)}); run "
                                f"{name} on other models (its `models`) or change its inits"
                            )
                continue
            if e.get(key) and axis not in spec.axes:
                warnings.append(f"estimator {name} ({spec.name}) is not swept over {key}: its `{key}` is ignored")
        if "K" in spec.axes:
            fixed = fixed_schedule_K(e)
            ks = [fixed] if fixed is not None and not e.get("K") else listed_values(config, name, "K")
            if fixed is not None and ks != [fixed]:
                what = (
                    "the sm14500 schedule" if e.get("schedule") == "sm14500" else f"the schedule file {e['schedule']}"
                )
                raise ConfigError(f"estimator {name}: {what} has K = {fixed}; set K: [{fixed}] or omit K")
            if "samples_per_chain" in spec.options:  # CSL: K sweeps per chain, one sample kept every `thin`
                bad = [k for k in ks if k // e.get("thin", 1) < 1]
                if bad:
                    raise ConfigError(f"estimator {name}: K {bad} < thin: no CSL sample would be kept")
    return warnings
