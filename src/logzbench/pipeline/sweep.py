"""From a workflow config to the jobs of its estimator sweep (importable without torch).

The Snakemake workflow validates its config against ``workflow/schemas/config.schema.yaml``
(which fills in the defaults) and reads it once into its plan (:func:`logzbench.pipeline.plan.load`), whose check
(:func:`logzbench.pipeline.config.checked_models`) works out each model's entry here (:func:`model_entry`:
every fact below of one model, once):

* a model's dataset, training hyperparameters (preset overridden by ``hyperparams``), family,
  hidden sizes and data dimension (:func:`model_hyperparams`, :func:`model_family`,
  :func:`hidden_sizes`, :func:`n_visible`; the data sets' sizes are :mod:`logzbench.data.sizes`');
  a model the workflow does not train but reads from its ``source`` (``FILE.py:NAME``, a TorchScript
  ``.pt``, a Potts text file or an ``.npz`` model file: :func:`model_source`), its family stated or read
  from the file without importing it (:func:`source_family`) and its rows (:func:`model_data_files`,
  :func:`model_n_visible`);
* the estimators run on it (:func:`estimators_run`: its list, or every estimator that names it or
  no model, less those its family lacks), whether ``exact`` applies (:func:`exact_applies`: an
  affordable enumeration or a closed form), and the jobs of its sweep (:func:`model_jobs`: one per
  estimator and combination of the estimator's sweep axes, :data:`logzbench.registry.AXES`);
* the settings of one job (:func:`job_settings`): what the estimate records in its JSON file and
  MLflow run and what :func:`logzbench.pipeline.jobs.run_estimate` passes to :func:`logzbench.api.estimate`.

Which estimators exist, the models they apply to, their sweep axes and the options they read are
the registry's (:mod:`logzbench.registry`): an estimator added there is swept by the workflow
with no change here.  Every function takes the config (a mapping) first; ``presets`` is the
training presets mapping (``logzbench.training.MODEL_PRESETS``, plain data, imported on first use).  A function of
one model (:func:`model_jobs`, :func:`job_settings`, ...) builds its entry and reads it; the workflow reads the
plan's entries instead.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import replace
from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping, Sequence

from .. import registry
from ..data.sizes import DEFAULT_N_COMPONENTS, N_FEATURES, SOURCE_DATA_KINDS
from ..errors import ConfigError
from ..options import SKIP, SettingQuery, declared, recorded_options
from ..schedules import own_steps
from ..sources import ModelSource, parse_source
from .entries import Job, ModelEntry
from .model_files import SOURCE_WHAT, npz_model, rows_shape, source_families, torchscript_family

__all__ = [
    "ConfigError",
    "Job",
    "all_jobs",
    "axis_values",
    "dataset_kind",
    "estimator_method",
    "estimator_spec",
    "estimators_of",
    "estimators_run",
    "exact_applies",
    "exact_limits",
    "family_spec",
    "fixed_schedule_K",
    "hidden_sizes",
    "job",
    "job_settings",
    "listed_values",
    "model_entry",
    "pairs_of",
    "settings_of",
    "is_source",
    "lacks_training_rows",
    "model_data_files",
    "model_dataset",
    "model_family",
    "model_hyperparams",
    "model_inits",
    "model_jobs",
    "model_n_visible",
    "model_source",
    "n_visible",
    "source_family",
    "option_default",
    "setting_keys",
    "setting_pattern",
    "sweep_pairs",
    "sweep_settings",
    "sweep_values",
    "unswept_options",
]


#: Estimator options recorded in a job's settings, in this order, each where its declaration says
#: (:meth:`logzbench.options.Option.setting`: the options the estimator reads, some only where they
#: matter -- ``sweeps_per_beta`` where it is not 1, ``pilot_chains`` / ``target_ess`` with the adaptive
#: schedule, ``is_samples`` for deep models; CSL's ``samples_per_chain`` derived as ``K // thin``);
#: ``K`` and ``init`` come from the file stem instead (sweep axes), except for an estimator that reads
#: them without sweeping them (the sandwich: its starting K and its one initial distribution;
#: :func:`unswept_options`).  Computed when asked, so that an estimator registered at run time with
#: options of its own is swept like a shipped one.
def setting_keys() -> tuple[str, ...]:
    """The names of the options a job may record (see above)."""
    return tuple(o.name for o in recorded_options())


def option_default(spec: registry.EstimatorSpec, key: str) -> Any:
    """The value of estimator option ``key`` where an entry gives none: the estimator's own default
    (:attr:`~logzbench.registry.EstimatorSpec.defaults`: the sandwich's adaptive schedule), else
    :class:`~logzbench.options.EstimateOptions`' (the schema's; the schema leaves ``schedule`` unset for this)."""
    return dict(spec.defaults).get(key, declared()[key].default)


# --------------------------------------------------------------------------- datasets and models
def dataset_kind(config: Mapping, dataset: str) -> str:
    """``binary`` or ``real`` rows (:data:`SOURCE_DATA_KINDS`)."""
    return SOURCE_DATA_KINDS.get(config["datasets"][dataset]["source"], "binary")


def n_visible(config: Mapping, dataset: str) -> int:
    """Data dimension: visible units of a binary set, PCA components ``M`` of van Hateren patches, pixels
    of Frey faces."""
    d = config["datasets"][dataset]
    if d["source"] == "vanhateren":
        return int(d.get("n_components", DEFAULT_N_COMPONENTS))
    if d.get("n_visible"):
        return int(d["n_visible"])
    if d["source"] not in N_FEATURES:
        raise ConfigError(f"dataset {dataset}: give n_visible")
    return N_FEATURES[d["source"]]


def model_dataset(config: Mapping, model: str) -> str | None:
    """The model's configured dataset (``None`` for a source model whose rows are ``data:`` files)."""
    return config["models"][model].get("dataset")


# --------------------------------------------------------------------------- source models (not trained)
def is_source(config: Mapping, model: str) -> bool:
    """Whether the model is read from its ``source`` (not trained by the workflow)."""
    return config["models"][model].get("source") is not None


def model_source(config: Mapping, model: str) -> ModelSource | None:
    """The parsed ``source`` of a model entry (``None`` for a trained model); :class:`ConfigError` naming the
    model for a malformed one (:func:`parse_source`)."""
    m = config["models"][model]
    if m.get("source") is None:
        return None
    try:
        return parse_source(m["source"])
    except ValueError as exc:
        raise ConfigError(f"model {model}: {exc} (models.{model}.source)") from None


def source_family(config: Mapping, model: str) -> str:
    """A source model's family, known without importing it: ``family`` as the entry states it (required for
    ``FILE.py:NAME``: ``energy-binary``, ``energy-categorical``, ``energy-continuous``, or the registered
    family of the model object NAME returns), else an ``.npz``'s ``model_type`` (read with NumPy), a
    TorchScript file's domain (its ``logzbench.json``, read from the archive), ``potts`` for a Potts text file.
    :class:`ConfigError` for a family the source cannot hold or one that differs from the file's.  The
    estimate job refuses a model that turns out to be of another family when it is loaded."""
    m = config["models"][model]
    src = model_source(config, model)
    stated = str(m["family"]).lower() if m.get("family") is not None else None
    allowed = source_families(src.kind)
    if stated is not None and stated not in registry.FAMILIES:
        raise ConfigError(
            f"model {model}: unknown family {stated!r} (models.{model}.family); a {SOURCE_WHAT[src.kind]} "
            f"source holds one of {list(allowed)}"
        )
    if src.kind == "npz":
        try:
            found = npz_model(src.path).model_type
        except ValueError as exc:
            raise ConfigError(f"model {model}: source {src.path}: {exc} (models.{model}.source)") from None
        if stated is not None and stated != found:
            raise ConfigError(
                f"model {model}: models.{model}.family is {stated!r} but {src.path} holds a {found!r} model "
                f"(its model_type); remove family or fix it"
            )
        stated = found
    elif src.kind == "torchscript" and (found := torchscript_family(src.path)) is not None:
        if stated is not None and stated != found:
            raise ConfigError(
                f"model {model}: models.{model}.family is {stated!r} but {src.path} holds a {found!r} model "
                f"(its logzbench.json domain); remove family or fix it"
            )
        stated = found
    elif stated is None:
        if src.kind == "potts-text":
            stated = "potts"
        else:
            raise ConfigError(
                f"model {model}: a {SOURCE_WHAT[src.kind]} source needs `family` (one of {list(allowed)}): it is "
                f"only known once the model is loaded, which the workflow does not do before its jobs run"
            )
    if stated not in allowed:
        raise ConfigError(
            f"model {model}: a {SOURCE_WHAT[src.kind]} source cannot hold a {stated!r} model; "
            f"models.{model}.family must be one of {list(allowed)}"
        )
    if stated not in registry.FAMILIES:  # an .npz of an unknown model_type
        raise ConfigError(
            f"model {model}: {src.path} holds an unknown model_type {stated!r}; known: {list(registry.family_names())}"
        )
    return stated


def model_data_files(config: Mapping, model: str) -> dict[str, str] | None:
    """A source model's row files ``{"test": path, "train": path}`` (``train`` only where given) of its
    ``data`` entry; ``None`` where its rows are a configured ``dataset``'s."""
    data = config["models"][model].get("data")
    if not data:
        return None
    return {k: str(data[k]) for k in ("test", "train") if data.get(k) is not None}


def lacks_training_rows(config: Mapping, model: str) -> bool:
    """Whether a source model has, as far as the workflow can tell, no training rows for the data base rate:
    its rows are files without ``train``, and its source is not an ``.npz`` holding ``data_mean``."""
    files = model_data_files(config, model)
    if files is None or "train" in files:
        return False
    src = model_source(config, model)
    if src is not None and src.kind == "npz":
        try:
            return not npz_model(src.path).has_data_mean
        except ValueError:
            return True
    return True


def model_inits(config: Mapping, model: str, presets: Mapping | None = None) -> tuple[str, ...]:
    """:attr:`ModelEntry.inits <logzbench.pipeline.entries.ModelEntry.inits>` of one model."""
    return model_entry(config, model, presets).inits


def model_n_visible(config: Mapping, model: str) -> int:
    """The model's data dimension: its dataset's (:func:`n_visible`), or the columns of a source model's
    ``data.test`` rows (read from the file's header)."""
    files = model_data_files(config, model)
    if files is None:
        return n_visible(config, model_dataset(config, model))
    try:
        shape = rows_shape(files["test"], "test")
    except ValueError as exc:
        raise ConfigError(f"model {model}: data.test {files['test']}: {exc}") from None
    if len(shape) != 2 or not shape[0] or not shape[1]:
        raise ConfigError(f"model {model}: data.test {files['test']} holds an array of shape {shape}; expected rows")
    return int(shape[1])


def _source_hidden_sizes(src: ModelSource) -> tuple[int, ...]:
    """Hidden layer sizes of a source model where they can be read without loading it: an ``.npz``'s weight
    matrices (``W``: an RBM's; ``W_1``, ``W_2``, ...: a deep model's); ``()`` otherwise (an energy, a Potts
    model: no hidden units, or sizes unknown until the model is loaded)."""
    if src.kind != "npz":
        return ()
    try:
        return npz_model(src.path).hidden_sizes
    except ValueError:
        return ()


def _load_presets() -> Mapping[str, Mapping]:
    """Training presets of every family, each with its ``family`` (imports the trainers: torch)."""
    from ..training import MODEL_PRESETS

    return MODEL_PRESETS


def model_hyperparams(config: Mapping, model: str, presets: Mapping[str, Mapping] | None = None) -> dict[str, Any]:
    """Training keyword arguments of a model: its preset, overridden by ``hyperparams``, with
    ``family`` (the preset's or ``hyperparams.family``; default ``rbm``) lower-cased.

    Raises :class:`ConfigError` for an unknown preset or family, a family whose data kind differs
    from the dataset's, and hyperparameters that do not describe a model of the family
    (:meth:`logzbench.registry.FamilySpec.check_hyperparams`); the names of the hyperparameters are
    checked by :func:`logzbench.pipeline.config.check_config`."""
    m = config["models"][model]
    if m.get("source") is not None:  # not trained: its family only (source_family)
        return _source_hyperparams(config, model)
    hp: dict[str, Any] = {}
    if m.get("preset"):
        presets = _load_presets() if presets is None else presets
        if m["preset"] not in presets:
            raise ConfigError(f"model {model}: unknown preset {m['preset']!r}; known: {sorted(presets)}")
        hp.update(presets[m["preset"]])
    hp.update(m.get("hyperparams") or {})
    name = hp["family"] = str(hp.get("family", "rbm")).lower()
    if name not in registry.FAMILIES:
        raise ConfigError(f"model {model}: unknown family {name!r}; choose one of {list(registry.family_names())}")
    fam = registry.family(name)
    if m["dataset"] in config["datasets"]:  # an unknown dataset is reported by check_config
        kind = dataset_kind(config, m["dataset"])
        if kind != fam.data_kind:
            want = "continuous (vanhateren, frey)" if fam.data_kind == "real" else "binary"
            have = "continuous" if kind == "real" else "binary"
            raise ConfigError(f"model {model}: a {name} model needs a {want} dataset; {m['dataset']} is {have}")
    if hp.get("learner") is not None:
        try:
            registry.learner(hp["learner"], name)
        except ValueError as exc:
            raise ConfigError(f"model {model}: {exc}") from None
    why = fam.check_hyperparams(hp)
    if why:
        raise ConfigError(f"model {model}: {why}")
    return hp


def _source_hyperparams(config: Mapping, model: str) -> dict[str, Any]:
    """``{"family": ...}`` of a source model (:func:`source_family`), its rows checked against the family:
    a configured ``dataset`` of the family's data kind (categorical rows come as ``data`` files)."""
    name = source_family(config, model)
    fam = registry.family(name)
    dataset = model_dataset(config, model)
    if dataset is not None and dataset in config.get("datasets", {}):
        kind = dataset_kind(config, dataset)
        if kind != fam.data_kind:
            if fam.data_kind == "categorical":
                want = "categorical rows, which no configured dataset holds: give data: {test: ROWS.npy}"
            else:
                want = "a continuous (vanhateren, frey) dataset" if fam.data_kind == "real" else "a binary dataset"
            have = "continuous" if kind == "real" else "binary"
            raise ConfigError(f"model {model}: a {name} model needs {want}; {dataset} is {have}")
    return {"family": name}


def family_spec(config: Mapping, model: str, presets: Mapping | None = None) -> registry.FamilySpec:
    """The registry entry of the model's family."""
    return registry.family(model_hyperparams(config, model, presets)["family"])


def model_family(config: Mapping, model: str, presets: Mapping | None = None) -> str:
    """The model's family name (``rbm``, ``dbm``, ``dbn``, ``poe-laplace``, ...)."""
    return family_spec(config, model, presets).name


def hidden_sizes(config: Mapping, model: str, presets: Mapping | None = None) -> list[int]:
    """:attr:`ModelEntry.hidden_sizes <logzbench.pipeline.entries.ModelEntry.hidden_sizes>` of one model."""
    return list(model_entry(config, model, presets).hidden_sizes)


def model_entry(
    config: Mapping, model: str, presets: Mapping | None = None, hyperparams: Mapping[str, Any] | None = None
) -> ModelEntry:
    """Everything the workflow needs of one model, worked out once (:class:`~logzbench.pipeline.entries.ModelEntry`):
    its hyperparameters (:func:`model_hyperparams`, or ``hyperparams`` where the caller has them), family,
    source and rows, data dimension (:func:`model_n_visible`), hidden sizes (``[n_hidden]`` of an RBM,
    ``hidden_sizes`` of a DBM or DBN, ``[size]`` of a continuous model; a source model's where its file says them
    without loading it: :func:`_source_hidden_sizes`), initial distributions, the estimators run on it
    (:func:`estimators_of`, less those whose method does not apply to its family: CSL on a DBM; listing such an
    estimator explicitly is refused by :func:`~logzbench.pipeline.config.check_config`) and every job of their
    sweeps, in config order (exact once where :func:`exact_applies`; every other estimator over the product of
    its axes' values: K, then init, then seed)."""
    hp = dict(model_hyperparams(config, model, presets) if hyperparams is None else hyperparams)
    fam = registry.family(hp["family"])
    src = model_source(config, model)
    files = model_data_files(config, model)
    lacks_rows = src is not None and lacks_training_rows(config, model)
    entry = ModelEntry(
        name=model,
        dataset=model_dataset(config, model),
        hyperparams=MappingProxyType(hp),
        family=fam,
        source=src,
        data_files=None if files is None else MappingProxyType(files),
        n_visible=model_n_visible(config, model),
        hidden_sizes=_source_hidden_sizes(src) if src is not None else tuple(fam.hidden_sizes(hp)),
        # its family's (a DBN: uniform only), less those the estimate would refuse without training rows
        inits=tuple(i for i in fam.inits if not (lacks_rows and i in ("base-rate", "mixture"))),
        lacks_training_rows=lacks_rows,
        paper=MappingProxyType(dict(config["models"][model].get("paper") or {})),
    )
    run = tuple(n for n in estimators_of(config, model) if estimator_spec(config, n).applies_to(fam.name))
    jobs = tuple(j for name in run for j in _jobs(config, entry, name))
    return replace(entry, estimators=run, jobs=jobs)


# --------------------------------------------------------------------------- estimators
def estimator_method(config: Mapping, name: str) -> str:
    """The estimator entry's ``method`` (default: its name)."""
    return config["estimators"][name].get("method") or name


def estimator_spec(config: Mapping, name: str) -> registry.EstimatorSpec:
    """The registry entry of the estimator entry's method."""
    method = estimator_method(config, name)
    if method not in registry.ESTIMATORS:
        raise ConfigError(
            f"estimator {name}: unknown method {method!r}; set `method` to one of {list(registry.estimator_names())}"
        )
    return registry.estimator(method)


def estimators_of(config: Mapping, model: str) -> list[str]:
    """The model's ``estimators`` list, else every estimator whose ``models`` (if given) includes it."""
    names = config["models"][model].get("estimators")
    if names is not None:
        return list(names)
    return [n for n, e in config["estimators"].items() if model in (e.get("models") or [model])]


def estimators_run(config: Mapping, model: str, presets: Mapping | None = None) -> list[str]:
    """:attr:`ModelEntry.estimators <logzbench.pipeline.entries.ModelEntry.estimators>` of one model."""
    return list(model_entry(config, model, presets).estimators)


def exact_limits(config: Mapping, name: str) -> tuple[int, int]:
    """``(max units enumerated for log Z, max units enumerated per test row for log f(v))`` of an exact
    estimator entry: its ``max_units`` / ``max_log_f_units``, else ``evaluation``'s."""
    e, ev = config["estimators"][name], config.get("evaluation") or {}
    return (
        int(e.get("max_units", ev.get("exact_max_units", 20))),
        int(e.get("max_log_f_units", ev.get("exact_max_log_f_units", 16))),
    )


def exact_applies(config: Mapping, model: str, name: str, presets: Mapping | None = None) -> bool:
    """Whether the exact estimator entry ``name`` runs on ``model`` (:func:`_exact_applies`)."""
    return _exact_applies(config, model_entry(config, model, presets), name)


def _exact_applies(config: Mapping, m: ModelEntry, name: str) -> bool:
    """Whether the exact estimator entry ``name`` runs on model ``m``: ``models.<model>.exact`` true /
    false forces it; ``auto`` (default) runs it where the family has an exact value (a closed form, or
    an enumeration: :meth:`~logzbench.registry.FamilySpec.exact_units`) whose log Z enumeration has at
    most ``max_units`` units and whose per-row log f(v) enumeration at most ``max_log_f_units``."""
    setting = config["models"][m.name].get("exact", "auto")
    if setting is False:
        return False
    if setting is True:
        return True
    try:
        units = m.family.exact_units(m.n_visible, m.hidden_sizes)
    except IndexError:  # a source model whose hidden sizes are unknown until it is loaded
        units = None
    if units is None:
        return False
    limit_z, limit_f = exact_limits(config, name)
    return units[0] <= limit_z and units[1] <= limit_f


@functools.lru_cache(maxsize=None)
def _own_steps(schedule: str) -> int | None:
    return own_steps(schedule)


def fixed_schedule_K(e: Mapping[str, Any]) -> int | None:
    """K of an estimator entry's fixed schedule (:func:`logzbench.schedules.own_steps`): 14500 for ``sm14500``
    and its aliases, a schedule file's own number of steps (``None`` for ``linear``, ``sigmoid``, the pilot
    schedules, and a file that cannot be read: :func:`check_config` refuses it)."""
    schedule = e.get("schedule")
    if not schedule:
        return None
    try:
        return _own_steps(str(schedule))
    except (ValueError, OSError):
        return None


def unswept_options(spec: registry.EstimatorSpec, e: Mapping[str, Any], fam: registry.FamilySpec) -> dict[str, Any]:
    """The ``K`` and ``init`` of an estimator that reads them without sweeping them (the sandwich: K is its
    starting K, which it doubles itself; one initial distribution): the entry's one ``K`` (``None``: the
    estimator's default; ``evaluation.K`` is a sweep's values, not a starting value) and its one ``inits``
    value, else the family's first initial distribution (binary models; continuous ones have none).
    :func:`check_config` refuses more than one value."""
    out: dict[str, Any] = {}
    if spec.reads_unswept("K"):
        ks = list(e.get("K") or [])
        out["K"] = int(ks[0]) if ks else None
    if spec.reads_unswept("init") and fam.inits:
        inits = list(e.get("inits") or [])
        out["init"] = str(inits[0]) if inits else fam.inits[0]
    return out


def listed_values(config: Mapping, name: str, key: str) -> list:
    """The values estimator entry ``name`` lists under ``key`` (``K``, ``inits``, ``seeds``), else ``evaluation``'s."""
    e, ev = config["estimators"][name], config.get("evaluation") or {}
    return list(e.get(key) or ev.get(key) or [])


def sweep_values(config: Mapping, model: str, name: str, presets: Mapping | None = None) -> dict[str, list]:
    """:func:`axis_values` of estimator entry ``name`` on ``model``."""
    return axis_values(config, name, model_entry(config, model, presets).inits)


def axis_values(config: Mapping, name: str, allowed: Sequence[str]) -> dict[str, list]:
    """Values of each sweep axis of estimator entry ``name`` (its own ``K`` / ``inits`` / ``seeds``, else
    ``evaluation``'s) on a model whose initial distributions are ``allowed``: ``K`` (without K, a fixed
    schedule's own: ``[14500]`` for ``sm14500``, the number of steps of a schedule file), ``init`` (only those
    the model supports, :attr:`ModelEntry.inits <logzbench.pipeline.entries.ModelEntry.inits>`: a DBN has no
    base-rate init), ``seed``."""
    spec = estimator_spec(config, name)
    out: dict[str, list] = {}
    for axis in spec.axes:
        key = registry.AXIS_CONFIG_KEYS[axis]
        if axis == "K":
            e = config["estimators"][name]
            fixed = fixed_schedule_K(e)
            out[axis] = [fixed] if fixed is not None and not e.get("K") else listed_values(config, name, key)
        elif axis == "init":
            out[axis] = [i for i in listed_values(config, name, key) if i in allowed]
        else:
            out[axis] = listed_values(config, name, key)
    return out


# --------------------------------------------------------------------------- jobs
def job(config: Mapping, model: str, estimator: str, stem: str) -> Job:
    """The job of an output file's wildcards (the stem parsed by the estimator's axes)."""
    spec = estimator_spec(config, estimator)
    v = registry.parse_setting_stem(spec.axes, stem)
    return Job(model, estimator, spec.name, v["K"], v["init"], v["seed"])


def model_jobs(config: Mapping, model: str, presets: Mapping | None = None) -> list[Job]:
    """:attr:`ModelEntry.jobs <logzbench.pipeline.entries.ModelEntry.jobs>` of one model (:func:`model_entry`)."""
    return list(model_entry(config, model, presets).jobs)


def _jobs(config: Mapping, m: ModelEntry, name: str) -> Iterator[Job]:
    """The estimates of estimator entry ``name`` on model ``m``, in :attr:`ModelEntry.jobs` order."""
    spec = estimator_spec(config, name)
    if not spec.axes:
        if spec.name != "exact" or _exact_applies(config, m, name):
            yield Job(m.name, name, spec.name, None, None, None)
        return
    values = axis_values(config, name, m.inits)
    for combo in itertools.product(*(values[a] for a in spec.axes)):
        v = {"K": None, "init": None, "seed": None, **dict(zip(spec.axes, combo))}
        yield Job(
            m.name,
            name,
            spec.name,
            None if v["K"] is None else int(v["K"]),
            v["init"],
            None if v["seed"] is None else int(v["seed"]),
        )


def all_jobs(config: Mapping, presets: Mapping | None = None) -> list[Job]:
    """Every estimate of every model."""
    return [j for model in config["models"] for j in model_jobs(config, model, presets)]


def pairs_of(m: ModelEntry) -> list[tuple[str, str]]:
    """The ``(model, estimator)`` pairs of model ``m`` with at least one estimate, in config order: one workflow
    job each (:func:`logzbench.pipeline.jobs.run_estimate_sweep` runs the pair's whole sweep in one process)."""
    swept = {j.entry for j in m.jobs}
    return [(m.name, name) for name in m.estimators if name in swept]


def sweep_pairs(config: Mapping, presets: Mapping | None = None) -> list[tuple[str, str]]:
    """:func:`pairs_of` every model, in config order."""
    return [p for model in config["models"] for p in pairs_of(model_entry(config, model, presets))]


def sweep_settings(config: Mapping, model: str, estimator: str, presets: Mapping | None = None) -> list[dict[str, Any]]:
    """:func:`settings_of` one model x estimator sweep."""
    return settings_of(config, model_entry(config, model, presets), estimator)


def settings_of(config: Mapping, m: ModelEntry, estimator: str) -> list[dict[str, Any]]:
    """The settings (:func:`job_settings`) of every estimate of model ``m`` x ``estimator``, in
    :attr:`ModelEntry.jobs` order; what the sweep's estimates share is worked out once, and only its own
    estimates are listed (a sweep of many seeds is many settings)."""
    if estimator not in m.estimators:
        return []
    settings = _settings_of(config, m, estimator)
    return [settings(j) for j in m.jobs_of(estimator)]


def setting_pattern(axes_list: Sequence[Sequence[str]] | None = None) -> str:
    """Regular expression of every file stem (the ``setting`` wildcard constraint): the union of
    :func:`logzbench.registry.stem_pattern` over the registry estimators' axes."""
    if axes_list is None:
        axes_list = [s.axes for s in registry.ESTIMATORS.values()]
    patterns = list(dict.fromkeys(registry.stem_pattern(a) for a in axes_list))
    return "|".join(f"(?:{p})" for p in patterns)


def job_settings(
    config: Mapping, model: str, estimator: str, stem: str, presets: Mapping | None = None
) -> dict[str, Any]:
    """The settings of one job: recorded in its JSON file and MLflow run, and the source of the
    options :func:`logzbench.pipeline.jobs.run_estimate` passes to :func:`logzbench.api.estimate`.

    Keys: ``model``, ``dataset``, ``estimator`` (the config entry), ``method`` (the registry
    estimator), ``K``, ``init``, ``seed`` (``None`` off the estimator's axes), ``device``,
    ``n_visible``, ``family``, ``hidden_sizes``, ``n_hidden`` (RBMs; ``None`` otherwise), a source model's
    ``source`` (as configured) and, where its rows are files, ``data_files`` (``{"test", "train"}``), then the
    options it records (:func:`setting_keys`), then ``test_subset``
    (``{"per_class", "seed"}``) where the entry restricts the test rows (absent otherwise)."""
    settings = _settings_of(config, model_entry(config, model, presets), estimator)
    return settings(job(config, model, estimator, stem))


def _settings_of(config: Mapping, m: ModelEntry, estimator: str) -> Callable[[Job], dict[str, Any]]:
    """:func:`job_settings` of the jobs of model ``m`` x ``estimator``: what they share, worked out once."""
    spec = estimator_spec(config, estimator)
    e = config["estimators"][estimator]
    fam = m.family
    sizes = list(m.hidden_sizes) if fam.hidden else []  # a grid MRF's height is not hidden units
    model, dataset = m.name, m.dataset
    shared = {
        "device": config.get("device", "cpu"),
        "n_visible": m.n_visible,
        "family": fam.name,
        "hidden_sizes": sizes,
        "n_hidden": sizes[0] if fam.size_key == "n_hidden" and sizes else None,  # deep models: see hidden_sizes
    }
    if m.source is not None:  # where the job reads the model (and, without a dataset, its rows) from
        shared["source"] = m.source.spec
        if m.data_files is not None:
            shared["data_files"] = dict(m.data_files)
    unswept = unswept_options(spec, e, fam)
    recorded = recorded_options()
    default = functools.lru_cache(maxsize=None)(functools.partial(option_default, spec))
    subset = e.get("test_subset")

    def settings(j: Job) -> dict[str, Any]:
        s: dict[str, Any] = {
            "model": model,
            "dataset": dataset,
            "estimator": estimator,
            "method": spec.name,
            "K": j.K,
            "init": j.init,
            "seed": j.seed,
            **shared,
        }
        for key in ("hidden_sizes", "data_files"):  # each setting its own (a list, a dict)
            if s.get(key) is not None:
                s[key] = type(s[key])(s[key])
        s.update(unswept)
        query = {
            reads: SettingQuery(
                reads=reads,
                entry=e,
                settings=s,
                family_kind=fam.kind,
                deep=fam.deep,
                swept=bool(spec.axes),
                default=default,
            )
            for reads in (True, False)
        }
        for opt in recorded:
            value = opt.setting(query[opt.name in spec.options])
            if value is not SKIP:
                s[opt.name] = value
        if subset:  # per_class test rows of each label (logzbench.data.class_subset), before the estimator
            s["test_subset"] = {"per_class": int(subset["per_class"]), "seed": int(subset.get("seed", 0))}
        return s

    return settings
