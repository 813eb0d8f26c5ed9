"""From a workflow config to the jobs of its estimator sweep (importable without torch).

The Snakemake workflow validates its config against ``workflow/schemas/config.schema.yaml``
(which fills in the defaults), checks it (:func:`logzbench.pipeline.config.check_config`), then asks
this module what it means (``workflow/rules/common.smk``):

* a model's dataset, training hyperparameters (preset overridden by ``hyperparams``), family,
  hidden sizes and data dimension (:func:`model_hyperparams`, :func:`model_family`,
  :func:`hidden_sizes`, :func:`n_visible`; the data sets' sizes are :mod:`logzbench.data.sizes`');
* the estimators run on it (:func:`estimators_run`: its list, or every estimator that names it or
  no model, less those its family lacks), whether ``exact`` applies (:func:`exact_applies`: an
  affordable enumeration or a closed form), and the jobs of its sweep (:func:`model_jobs`: one per
  estimator and combination of the estimator's sweep axes, :data:`logzbench.registry.AXES`);
* the settings of one job (:func:`job_settings`): what the estimate records in its JSON file and
  MLflow run and what :func:`logzbench.pipeline.jobs.run_estimate` passes to :func:`logzbench.api.estimate`.

Which estimators exist, the models they apply to, their sweep axes and the options they read are
the registry's (:mod:`logzbench.registry`): an estimator added there is swept by the workflow
with no change here.  Every function takes the config (a mapping) first; ``presets`` is the
training presets mapping (``logzbench.training.MODEL_PRESETS``, plain data, imported on first use).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from .. import registry
from ..data.sizes import DEFAULT_N_COMPONENTS, N_FEATURES, SOURCE_DATA_KINDS
from ..errors import ConfigError
from ..options import SKIP, SettingQuery, declared, recorded_options
from ..schedules import SCHEDULES, from_file

__all__ = [
    "ConfigError",
    "Job",
    "all_jobs",
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
    "model_dataset",
    "model_family",
    "model_hyperparams",
    "model_jobs",
    "n_visible",
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


def model_dataset(config: Mapping, model: str) -> str:
    return config["models"][model]["dataset"]


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


def family_spec(config: Mapping, model: str, presets: Mapping | None = None) -> registry.FamilySpec:
    """The registry entry of the model's family."""
    return registry.family(model_hyperparams(config, model, presets)["family"])


def model_family(config: Mapping, model: str, presets: Mapping | None = None) -> str:
    """The model's family name (``rbm``, ``dbm``, ``dbn``, ``poe-laplace``, ...)."""
    return family_spec(config, model, presets).name


def hidden_sizes(config: Mapping, model: str, presets: Mapping | None = None) -> list[int]:
    """Hidden sizes: ``[n_hidden]`` (RBM), ``hidden_sizes`` (DBM, DBN) or ``[size]`` (continuous)."""
    hp = model_hyperparams(config, model, presets)
    return registry.family(hp["family"]).hidden_sizes(hp)


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
    """Estimator names run on a model: :func:`estimators_of`, less those whose method does not apply
    to its family (CSL on a DBM; listing such an estimator explicitly is refused by :func:`check_config`)."""
    fam = model_family(config, model, presets)
    return [n for n in estimators_of(config, model) if estimator_spec(config, n).applies_to(fam)]


def exact_limits(config: Mapping, name: str) -> tuple[int, int]:
    """``(max units enumerated for log Z, max units enumerated per test row for log f(v))`` of an exact
    estimator entry: its ``max_units`` / ``max_log_f_units``, else ``evaluation``'s."""
    e, ev = config["estimators"][name], config.get("evaluation") or {}
    return (
        int(e.get("max_units", ev.get("exact_max_units", 20))),
        int(e.get("max_log_f_units", ev.get("exact_max_log_f_units", 16))),
    )


def exact_applies(config: Mapping, model: str, name: str, presets: Mapping | None = None) -> bool:
    """Whether the exact estimator entry ``name`` runs on ``model``: ``models.<model>.exact`` true /
    false forces it; ``auto`` (default) runs it where the family has an exact value (a closed form, or
    an enumeration: :meth:`~logzbench.registry.FamilySpec.exact_units`) whose log Z enumeration has at
    most ``max_units`` units and whose per-row log f(v) enumeration at most ``max_log_f_units``."""
    setting = config["models"][model].get("exact", "auto")
    if setting is False:
        return False
    if setting is True:
        return True
    fam = family_spec(config, model, presets)
    units = fam.exact_units(n_visible(config, model_dataset(config, model)), hidden_sizes(config, model, presets))
    if units is None:
        return False
    limit_z, limit_f = exact_limits(config, name)
    return units[0] <= limit_z and units[1] <= limit_f


@functools.lru_cache(maxsize=None)
def _schedule_file_steps(path: str) -> int:
    return len(from_file(path)) - 1


def fixed_schedule_K(e: Mapping[str, Any]) -> int | None:
    """K of an estimator entry's fixed schedule: 14500 for ``sm14500``, a schedule file's own number of steps
    (``None`` for ``linear``, ``sigmoid``, and a file that cannot be read: :func:`check_config` refuses it)."""
    schedule = e.get("schedule")
    if schedule == "sm14500":
        return 14500
    if schedule and schedule not in SCHEDULES and Path(str(schedule)).is_file():
        try:
            return _schedule_file_steps(str(schedule))
        except (ValueError, OSError):
            return None
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
    """Values of each sweep axis of estimator entry ``name`` on ``model`` (its own ``K`` / ``inits`` /
    ``seeds``, else ``evaluation``'s): ``K`` (without K, a fixed schedule's own: ``[14500]`` for ``sm14500``,
    the number of steps of a schedule file),
    ``init`` (only those the model's family supports: a DBN has no base-rate init), ``seed``."""
    spec = estimator_spec(config, name)
    out: dict[str, list] = {}
    for axis in spec.axes:
        key = registry.AXIS_CONFIG_KEYS[axis]
        if axis == "K":
            e = config["estimators"][name]
            fixed = fixed_schedule_K(e)
            out[axis] = [fixed] if fixed is not None and not e.get("K") else listed_values(config, name, key)
        elif axis == "init":
            allowed = family_spec(config, model, presets).inits
            out[axis] = [i for i in listed_values(config, name, key) if i in allowed]
        else:
            out[axis] = listed_values(config, name, key)
    return out


# --------------------------------------------------------------------------- jobs
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


def job(config: Mapping, model: str, estimator: str, stem: str) -> Job:
    """The job of an output file's wildcards (the stem parsed by the estimator's axes)."""
    spec = estimator_spec(config, estimator)
    v = registry.parse_setting_stem(spec.axes, stem)
    return Job(model, estimator, spec.name, v["K"], v["init"], v["seed"])


def model_jobs(config: Mapping, model: str, presets: Mapping | None = None) -> list[Job]:
    """Every estimate of one model, in config order: exact once (where :func:`exact_applies`),
    every other estimator over the product of its axes' values (K, then init, then seed)."""
    out = []
    for name in estimators_run(config, model, presets):
        spec = estimator_spec(config, name)
        if not spec.axes:
            if spec.name != "exact" or exact_applies(config, model, name, presets):
                out.append(Job(model, name, spec.name, None, None, None))
            continue
        values = sweep_values(config, model, name, presets)
        for combo in itertools.product(*(values[a] for a in spec.axes)):
            v = {"K": None, "init": None, "seed": None, **dict(zip(spec.axes, combo))}
            out.append(
                Job(
                    model,
                    name,
                    spec.name,
                    None if v["K"] is None else int(v["K"]),
                    v["init"],
                    None if v["seed"] is None else int(v["seed"]),
                )
            )
    return out


def all_jobs(config: Mapping, presets: Mapping | None = None) -> list[Job]:
    """Every estimate of every model."""
    return [j for model in config["models"] for j in model_jobs(config, model, presets)]


def sweep_pairs(config: Mapping, presets: Mapping | None = None) -> list[tuple[str, str]]:
    """The ``(model, estimator)`` pairs with at least one estimate, in config order: one workflow job
    each (:func:`logzbench.pipeline.jobs.run_estimate_sweep` runs the pair's whole sweep in one process)."""
    return list(dict.fromkeys((j.model, j.entry) for j in all_jobs(config, presets)))


def sweep_settings(config: Mapping, model: str, estimator: str, presets: Mapping | None = None) -> list[dict[str, Any]]:
    """The settings (:func:`job_settings`) of every estimate of one model x estimator sweep, in
    :func:`model_jobs` order."""
    return [
        job_settings(config, model, estimator, j.stem, presets)
        for j in model_jobs(config, model, presets)
        if j.entry == estimator
    ]


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
    ``n_visible``, ``family``, ``hidden_sizes``, ``n_hidden`` (RBMs; ``None`` otherwise), then the
    options it records (:func:`setting_keys`), then ``test_subset``
    (``{"per_class", "seed"}``) where the entry restricts the test rows (absent otherwise)."""
    j = job(config, model, estimator, stem)
    spec = registry.estimator(j.method)
    e = config["estimators"][estimator]
    hp = model_hyperparams(config, model, presets)
    fam = registry.family(hp["family"])
    sizes = fam.hidden_sizes(hp)
    dataset = model_dataset(config, model)
    s: dict[str, Any] = {
        "model": model,
        "dataset": dataset,
        "estimator": estimator,
        "method": spec.name,
        "K": j.K,
        "init": j.init,
        "seed": j.seed,
        "device": config.get("device", "cpu"),
        "n_visible": n_visible(config, dataset),
        "family": fam.name,
        "hidden_sizes": sizes,
        "n_hidden": sizes[0] if fam.size_key == "n_hidden" else None,  # deep models: see hidden_sizes
    }
    s.update(unswept_options(spec, e, fam))
    for opt in recorded_options():
        q = SettingQuery(
            reads=opt.name in spec.options,
            entry=e,
            settings=s,
            family_kind=fam.kind,
            deep=fam.deep,
            swept=bool(spec.axes),
            default=functools.partial(option_default, spec),
        )
        value = opt.setting(q)
        if value is not SKIP:
            s[opt.name] = value
    subset = e.get("test_subset")
    if subset:  # per_class test rows of each label (logzbench.data.class_subset), before the estimator
        s["test_subset"] = {"per_class": int(subset["per_class"]), "seed": int(subset.get("seed", 0))}
    return s
