"""Loading a workflow config (importable without torch): :func:`load_config`, the checks before and with
its schema, which come before :func:`logzbench.pipeline.config.check_config`'s checks beyond it.

:func:`load_config` checks the config as Snakemake has loaded it, before anything else walks it: its size
once its YAML aliases are expanded (:func:`check_size`: an alias bomb is refused in O(distinct values)),
then turns the strings of ``--config`` values into numbers where they stand for them
(:func:`coerce_cli_values`, on those values only: a YAML-quoted ``"2024"`` stays a string), then the
schema (:func:`validate_config`, with :func:`config_validator`: every number, and every number a range is
checked on, is finite; defaults filled in), then each estimator entry's options
(:func:`check_estimator_options`, against :func:`estimator_entry_schema`: the schema file's entry with the
options declared in :mod:`logzbench.options`).

Each check raises :class:`~logzbench.errors.ConfigError` with one line naming the config entry and the
problem (a value's ``repr`` cut short, :func:`short_repr`).
"""

from __future__ import annotations

import functools
import math
import reprlib
from typing import Any, Mapping, MutableMapping

from .. import options
from ..errors import ConfigError

__all__ = [
    "MAX_CONFIG_VALUES",
    "check_estimator_options",
    "check_size",
    "coerce_cli_values",
    "config_validator",
    "estimator_entry_schema",
    "load_config",
    "short_repr",
    "validate_config",
]

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
