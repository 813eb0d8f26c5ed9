"""From a workflow config to the jobs of its estimator sweep (importable without torch).

The Snakemake workflow validates its config against ``workflow/schemas/config.schema.yaml``
(which fills in the defaults), then asks this module everything else about it
(``workflow/rules/common.smk``):

* a model's dataset, training hyperparameters (preset overridden by ``hyperparams``), family,
  hidden sizes and data dimension (:func:`model_hyperparams`, :func:`model_family`,
  :func:`hidden_sizes`, :func:`n_visible`);
* the estimators run on it (:func:`estimators_run`: its list, or every estimator that names it or
  no model, less those its family lacks), whether ``exact`` applies (:func:`exact_applies`: an
  affordable enumeration or a closed form), and the jobs of its sweep (:func:`model_jobs`: one per
  estimator and combination of the estimator's sweep axes, :data:`logzbench.registry.AXES`);
* the settings of one job (:func:`job_settings`): what the estimate records in its JSON file and
  MLflow run and what :func:`logzbench.jobs.run_estimate` passes to :func:`logzbench.api.estimate`;
* the config checks (:func:`check_config`), which raise :class:`~logzbench.errors.ConfigError`
  with a message naming the entry and what to change, and return warnings.

Which estimators exist, the models they apply to, their sweep axes and the options they read are
the registry's (:mod:`logzbench.registry`): an estimator added there is swept by the workflow
with no change here.  Every function takes the config (a mapping) first; ``presets`` is the
training presets mapping (``logzbench.training.MODEL_PRESETS``, imported on first use).
"""

from __future__ import annotations

import csv
import difflib
import functools
import itertools
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from . import registry
from .errors import ConfigError
from .options import EstimateOptions, option_names
from .schedules import ADAPTIVE, SCHEDULES, from_file

__all__ = [
    "ConfigError", "Job", "KNOWN_N_VISIBLE", "LABELLED_SOURCES", "MAX_CHAINS", "SCHEDULE_KEYS", "SETTING_KEYS",
    "SOURCE_DATA_KINDS", "unswept_options",
    "SOURCE_ROWS", "all_jobs", "check_config", "check_estimate_record", "check_npz", "damaged_outputs",
    "hyperparam_names", "rebuild_hint",
    "dataset_kind", "estimator_method", "estimator_spec", "estimators_of", "estimators_run", "exact_applies",
    "exact_limits", "family_spec", "fixed_schedule_K", "hidden_sizes", "job", "job_settings", "model_dataset",
    "model_family",
    "model_hyperparams", "model_jobs", "n_visible", "setting_pattern", "sweep_pairs", "sweep_settings", "sweep_values",
]

#: binarized UCI sets of Larochelle & Murray (logzbench.data.uci) and their widths
_UCI_WIDTHS = {"adult": 123, "connect4": 126, "dna": 180, "mushrooms": 112, "nips-0-12": 500, "ocr_letters": 128,
               "rcv1": 150, "web": 300}
#: rows of each binary source's fixed splits before ``n_valid`` / ``n_train`` / ``n_test`` (``logzbench.data``,
#: which imports torch: tests/test_sweep.py checks the two agree); ``valid`` only where the source has its own
#: (the UCI sets; ``digits-avil`` by ``shift_augment``: :data:`DIGITS_AVIL_ROWS`)
SOURCE_ROWS = {
    "mnist": {"train": 60000, "test": 10000}, "omniglot": {"train": 24345, "test": 8070},
    "digits": {"train": 1437, "test": 360},
    "adult": {"train": 5000, "valid": 1414, "test": 26147}, "connect4": {"train": 16000, "valid": 4000, "test": 47557},
    "dna": {"train": 1400, "valid": 600, "test": 1186}, "mushrooms": {"train": 2000, "valid": 500, "test": 5624},
    "nips-0-12": {"train": 400, "valid": 100, "test": 1240},
    "ocr_letters": {"train": 32152, "valid": 10000, "test": 10000},
    "rcv1": {"train": 40000, "valid": 10000, "test": 150000}, "web": {"train": 14000, "valid": 3188, "test": 32561},
}
#: ``digits-avil``'s training and validation (= test) rows by ``shift_augment`` (default ``train``)
DIGITS_AVIL_ROWS = {"train": {"train": 7190, "valid": 359}, "all": {"train": 7188, "valid": 1797},
                    "none": {"train": 1438, "valid": 359}}
#: Frey faces: frames (``logzbench.data.frey.N_FACES``)
FREY_FACES = 1965
#: ``vanhateren``: registered images, image side (the patch side's bound) and the defaults of
#: :func:`logzbench.data.vanhateren.prepare_vanhateren` for the keys a config leaves out
VANHATEREN_N_IMAGES, VANHATEREN_IMAGE_SIDE = 20, 1024
VANHATEREN_DEFAULTS = {"n_images": 20, "n_test_images": 4, "patch_size": 16, "n_train": 10_000, "n_test": 100,
                       "n_components": 36, "remove_dc": False}
#: the most chains (samples, particles) an estimator entry may ask for (the schema's maximum of
#: ``estimators.<name>.chains``): far above any paper's (5,000) and below what exhausts memory at once
MAX_CHAINS = 10_000_000
#: row width of the data sources whose width does not depend on settings (``logzbench.data.N_FEATURES``,
#: which imports torch: a test checks the two agree); any other source needs ``datasets.<name>.n_visible``
#: (binary) or is ``vanhateren`` (its ``n_components``)
KNOWN_N_VISIBLE = {"mnist": 784, "digits": 64, "omniglot": 784, "digits-avil": 64, "frey": 560, **_UCI_WIDTHS}
#: rows of each data source: ``binary`` (0/1) or ``real`` (whitened PCA coefficients of image patches,
#: standardized Frey faces)
SOURCE_DATA_KINDS = {"mnist": "binary", "digits": "binary", "omniglot": "binary", "digits-avil": "binary",
                     **dict.fromkeys(_UCI_WIDTHS, "binary"), "vanhateren": "real", "frey": "real"}
#: PCA components of a ``vanhateren`` dataset without ``n_components``
DEFAULT_N_COMPONENTS = 36
#: data sources whose prepared files hold ``test_labels`` (what an estimator's ``test_subset`` needs)
LABELLED_SOURCES = ("mnist", "digits", "omniglot", "digits-avil")
#: Estimator config keys recorded in a job's settings, in this order, when the estimator reads them
#: (its registry ``options``); ``K`` and ``init`` come from the file stem instead (sweep axes), except
#: an estimator that reads them without sweeping them (the sandwich: its starting K and its one initial
#: distribution; :func:`unswept_options`).
#: ``samples_per_chain`` (CSL) is derived, ``K // thin``; ``is_samples`` is recorded for deep models
#: only; ``n_examples`` is recorded (``None``: every test row) by every binary-model estimator with
#: a sweep, its config value by those that subsample (RAISE, CSL).  Of the schedule's keys
#: (:data:`SCHEDULE_KEYS`), ``sweeps_per_beta`` is recorded where it is not 1 and ``pilot_chains`` /
#: ``target_ess`` where the schedule is ``adaptive``: the settings (and so the MLflow runs and the
#: rerun triggers) of the estimates that do not use them stay as they were.
SETTING_KEYS = ("schedule", "sweeps_per_beta", "pilot_chains", "target_ess", "chains", "step_size", "gamma", "mh_sigma",
                "proposal_scale", "csl_mode", "exact_precision", "burn_in", "thin", "samples_per_chain", "n_examples",
                "is_samples", "target_width", "max_sweeps", "confidence")
#: the keys of an annealing schedule recorded only where they matter (see :data:`SETTING_KEYS`): a key ->
#: whether an entry's settings need it
SCHEDULE_KEYS = {
    "sweeps_per_beta": lambda e, schedule: int(e.get("sweeps_per_beta", 1)) != 1,
    "pilot_chains": lambda e, schedule: schedule == ADAPTIVE,
    "target_ess": lambda e, schedule: schedule == ADAPTIVE,
}
#: schema defaults of the estimator keys (equal to :class:`~logzbench.options.EstimateOptions`'),
#: for a config that was not validated
_OPTION_DEFAULTS = EstimateOptions().as_dict()


def option_default(spec: registry.EstimatorSpec, key: str) -> Any:
    """The value of estimator option ``key`` where an entry gives none: the estimator's own default
    (:attr:`~logzbench.registry.EstimatorSpec.defaults`: the sandwich's adaptive schedule), else
    :class:`~logzbench.options.EstimateOptions`' (the schema's; the schema leaves ``schedule`` unset for this)."""
    return dict(spec.defaults).get(key, _OPTION_DEFAULTS[key])

assert set(SETTING_KEYS) <= set(option_names())


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
    if d["source"] not in KNOWN_N_VISIBLE:
        raise ConfigError(f"dataset {dataset}: give n_visible")
    return KNOWN_N_VISIBLE[d["source"]]


def model_dataset(config: Mapping, model: str) -> str:
    return config["models"][model]["dataset"]


def _load_presets() -> Mapping[str, Mapping]:
    """Training presets of every family, each with its ``family`` (imports the trainers: torch)."""
    from .training import MODEL_PRESETS

    return MODEL_PRESETS


def model_hyperparams(config: Mapping, model: str, presets: Mapping[str, Mapping] | None = None) -> dict[str, Any]:
    """Training keyword arguments of a model: its preset, overridden by ``hyperparams``, with
    ``family`` (the preset's or ``hyperparams.family``; default ``rbm``) lower-cased.

    Raises :class:`ConfigError` for an unknown preset or family, a family whose data kind differs
    from the dataset's, and hyperparameters that do not describe a model of the family
    (:meth:`logzbench.registry.FamilySpec.check_hyperparams`)."""
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


#: Where each family's training keywords are declared, ``"module:object"``: the keyword parameters of a
#: function, of a class's ``__init__`` or a dataclass's fields, as :func:`logzbench.training.train_model`
#: checks them (the binary families' trainer classes, the GRBM's hyperparameters; a continuous family, by
#: kind: ``train_continuous`` and its MPF or EM fit).  Read from the source, not imported: the trainers
#: import torch, which building the workflow's DAG does not (tests/test_sweep.py checks these names
#: against the trainers' own).  A learner's keywords are its ``entry``'s (:data:`logzbench.registry.LEARNERS`).
_TRAINER_KEYWORDS = {
    "rbm": ("logzbench.training.trainer:RBMTrainer",),
    "dbm": ("logzbench.training.dbm:DBMTrainer",),
    "dbn": ("logzbench.training.dbn:DBNTrainer",),
    "grbm": ("logzbench.training.grbm:GRBMHyperparams",),
    "analysis": ("logzbench.training.continuous:train_continuous", "logzbench.training.mpf:train_mpf"),
    "generative": ("logzbench.training.continuous:train_continuous", "logzbench.training.em:train_em"),
}
#: parameters of those functions that the training job fills in itself (data, the initial model)
_JOB_ARGUMENTS = frozenset({"train", "test", "valid", "model", "X_train", "return_state"})
#: keys any model's hyperparams may hold: ``family`` and ``learner`` pick the trainer, ``device`` (the
#: config's by default), ``figure_samples`` / ``figure_sweeps`` (:func:`logzbench.jobs.train_job`'s figures)
_COMMON_HYPERPARAMS = frozenset({"family", "learner", "device", "figure_samples", "figure_sweeps"})


def _declared_keywords(target: str) -> frozenset[str]:
    """Keyword names of ``"module:object"``, read from the module's source without importing it
    (:func:`logzbench.training.declared.declared_parameters`)."""
    from .training.declared import declared_parameters

    return frozenset(name for name, _ in declared_parameters(target))


def hyperparam_names(family: str, learner: str | None = None) -> frozenset[str]:
    """The keys ``models.<name>.hyperparams`` (with its preset) may hold for a model of ``family``: the
    keyword arguments of its trainer (:data:`_TRAINER_KEYWORDS`; an RBM also takes ``hidden_sizes``), or
    of ``learner``'s function (``n_hidden`` standing for ``hidden_sizes``), and ``family``, ``learner``,
    ``device``, ``figure_samples``, ``figure_sweeps``."""
    fam = registry.family(family)
    if learner:
        names = _declared_keywords(registry.learner(learner, fam.name).entry) | {"n_hidden"}
    else:
        sources = _TRAINER_KEYWORDS.get(fam.name) or _TRAINER_KEYWORDS[fam.kind]
        names = frozenset().union(*map(_declared_keywords, sources))
        if fam.name == "rbm":
            names |= {"hidden_sizes"}
    return (names - _JOB_ARGUMENTS) | _COMMON_HYPERPARAMS


def _check_hyperparam_names(config: Mapping, model: str, hp: Mapping[str, Any]) -> None:
    """Refuse a hyperparameter the model's trainer does not take (e.g. ``learnin_rate``), naming the closest."""
    allowed = hyperparam_names(hp["family"], hp.get("learner"))
    unknown = sorted(set(hp) - allowed)
    if not unknown:
        return
    key = unknown[0]
    close = difflib.get_close_matches(key, sorted(allowed), n=1)
    own = config["models"][model].get("hyperparams") or {}
    where = (f"models.{model}.hyperparams.{key}" if key in own
             else f"from preset {config['models'][model].get('preset')!r}")
    trainer = f"the {hp['learner']} learner" if hp.get("learner") else f"the {hp['family']} trainer"
    raise ConfigError(f"model {model}: unknown hyperparameter {key!r} ({where})"
                      + (f"; did you mean {close[0]!r}?" if close else "")
                      + f" ({trainer} takes {', '.join(sorted(allowed))})")


def _check_learner_values(config: Mapping, model: str, hp: Mapping[str, Any]) -> None:
    """Refuse a learner hyperparameter's value that the training job would refuse (its type or range, or
    ``ais_every`` not a multiple of ``log_every``): :func:`logzbench.training.learner_options.check_values`,
    the learners' own check (imported without torch), on the learner's defaults overridden by ``hp``."""
    from .training.learner_options import RULES, check_values, learner_defaults

    try:
        check_values({**learner_defaults(hp["learner"]), **{k: v for k, v in hp.items() if k in RULES}})
    except ValueError as exc:
        raise ConfigError(f"model {model}: {exc} (models.{model}.hyperparams, {hp['learner']} learner)") from None


# --------------------------------------------------------------------------- estimators
def estimator_method(config: Mapping, name: str) -> str:
    """The estimator entry's ``method`` (default: its name)."""
    return config["estimators"][name].get("method") or name


def estimator_spec(config: Mapping, name: str) -> registry.EstimatorSpec:
    """The registry entry of the estimator entry's method."""
    method = estimator_method(config, name)
    if method not in registry.ESTIMATORS:
        raise ConfigError(f"estimator {name}: unknown method {method!r}; set `method` to one of "
                          f"{list(registry.estimator_names())}")
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
    return (int(e.get("max_units", ev.get("exact_max_units", 20))),
            int(e.get("max_log_f_units", ev.get("exact_max_log_f_units", 16))))


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
    if "K" in spec.options and "K" not in spec.axes:
        ks = list(e.get("K") or [])
        out["K"] = int(ks[0]) if ks else None
    if "init" in spec.options and "init" not in spec.axes and fam.inits:
        inits = list(e.get("inits") or [])
        out["init"] = str(inits[0]) if inits else fam.inits[0]
    return out


def _listed(config: Mapping, name: str, key: str) -> list:
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
            out[axis] = [fixed] if fixed is not None and not e.get("K") else _listed(config, name, key)
        elif axis == "init":
            allowed = family_spec(config, model, presets).inits
            out[axis] = [i for i in _listed(config, name, key) if i in allowed]
        else:
            out[axis] = _listed(config, name, key)
    return out


# --------------------------------------------------------------------------- jobs
@dataclass(frozen=True)
class Job:
    """One estimate: ``results/estimates/<model>/<estimator>/<stem>.{json,npz}``.

    ``K``, ``init`` and ``seed`` are ``None`` where the estimator has no such sweep axis."""

    model: str
    estimator: str
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
        return f"{results}/estimates/{self.model}/{self.estimator}/{self.stem}.{ext}"


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
            out.append(Job(model, name, spec.name, None if v["K"] is None else int(v["K"]), v["init"],
                           None if v["seed"] is None else int(v["seed"])))
    return out


def all_jobs(config: Mapping, presets: Mapping | None = None) -> list[Job]:
    """Every estimate of every model."""
    return [j for model in config["models"] for j in model_jobs(config, model, presets)]


def sweep_pairs(config: Mapping, presets: Mapping | None = None) -> list[tuple[str, str]]:
    """The ``(model, estimator)`` pairs with at least one estimate, in config order: one workflow job
    each (:func:`logzbench.jobs.run_estimate_sweep` runs the pair's whole sweep in one process)."""
    return list(dict.fromkeys((j.model, j.estimator) for j in all_jobs(config, presets)))


def sweep_settings(config: Mapping, model: str, estimator: str, presets: Mapping | None = None) -> list[dict[str, Any]]:
    """The settings (:func:`job_settings`) of every estimate of one model x estimator sweep, in
    :func:`model_jobs` order."""
    return [job_settings(config, model, estimator, j.stem, presets)
            for j in model_jobs(config, model, presets) if j.estimator == estimator]


def setting_pattern(axes_list: Sequence[Sequence[str]] | None = None) -> str:
    """Regular expression of every file stem (the ``setting`` wildcard constraint): the union of
    :func:`logzbench.registry.stem_pattern` over the registry estimators' axes."""
    if axes_list is None:
        axes_list = [s.axes for s in registry.ESTIMATORS.values()]
    patterns = list(dict.fromkeys(registry.stem_pattern(a) for a in axes_list))
    return "|".join(f"(?:{p})" for p in patterns)


def job_settings(config: Mapping, model: str, estimator: str, stem: str,
                 presets: Mapping | None = None) -> dict[str, Any]:
    """The settings of one job: recorded in its JSON file and MLflow run, and the source of the
    options :func:`logzbench.jobs.run_estimate` passes to :func:`logzbench.api.estimate`.

    Keys: ``model``, ``dataset``, ``estimator`` (the config entry), ``method`` (the registry
    estimator), ``K``, ``init``, ``seed`` (``None`` off the estimator's axes), ``device``,
    ``n_visible``, ``family``, ``hidden_sizes``, ``n_hidden`` (RBMs; ``None`` otherwise), then the
    estimator's config keys of :data:`SETTING_KEYS` that it reads, then ``test_subset``
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
    for key in SETTING_KEYS:
        reads = key in spec.options
        if key in SCHEDULE_KEYS:
            if reads and SCHEDULE_KEYS[key](e, s.get("schedule")):
                s[key] = e.get(key, option_default(spec, key))
        elif key == "samples_per_chain":
            if reads:
                s[key] = max(1, int(j.K) // int(e.get("thin", _OPTION_DEFAULTS["thin"])))
        elif key == "n_examples":
            if reads:
                s[key] = e.get(key, option_default(spec, key))
            elif fam.kind == "binary" and spec.axes:
                s[key] = None
        elif key == "is_samples":
            if reads and fam.deep:  # importance samples per test example for log f(v)
                s[key] = e.get(key, option_default(spec, key))
        elif reads:
            s[key] = e.get(key, option_default(spec, key))
    subset = e.get("test_subset")
    if subset:  # per_class test rows of each label (logzbench.jobs: logzbench.data.class_subset), before the estimator
        s["test_subset"] = {"per_class": int(subset["per_class"]), "seed": int(subset.get("seed", 0))}
    return s


# --------------------------------------------------------------------------- checks
def _not_available(spec: registry.EstimatorSpec) -> str:
    if spec.families:
        return f"{spec.name} runs on {', '.join(f.upper() + 's' for f in spec.families)} only"
    kinds = " and ".join(spec.kinds)
    if "binary" not in spec.kinds:
        kinds = f"continuous ({kinds})"
    return f"{spec.name} runs on {kinds} models only"


def _too_many(dataset: str, key: str, value: int, most: int, what: str) -> ConfigError:
    return ConfigError(f"dataset {dataset}: {key}={value} is more than {what}; set datasets.{dataset}.{key} to at "
                       f"most {most} (or leave it out)")


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
            raise _too_many(name, "n_images", v["n_images"], VANHATEREN_N_IMAGES,
                            f"the {VANHATEREN_N_IMAGES} registered van Hateren images")
        if v["n_test_images"] >= v["n_images"]:
            raise ConfigError(f"dataset {name}: n_test_images={v['n_test_images']} leaves no training image of "
                              f"n_images={v['n_images']}; set datasets.{name}.n_test_images to at most "
                              f"{v['n_images'] - 1}")
        if v["patch_size"] > VANHATEREN_IMAGE_SIDE:
            raise _too_many(name, "patch_size", v["patch_size"], VANHATEREN_IMAGE_SIDE,
                            f"the images' side ({VANHATEREN_IMAGE_SIDE} pixels)")
        pixels = v["patch_size"] ** 2 - int(bool(v["remove_dc"]))
        if v["n_components"] > pixels:
            raise _too_many(name, "n_components", v["n_components"], pixels,
                            f"the {pixels} pixels of a {v['patch_size']}x{v['patch_size']} patch"
                            + (" less its mean (remove_dc)" if v["remove_dc"] else ""))
        if v["n_train"] <= v["n_components"]:
            raise ConfigError(f"dataset {name}: n_train={v['n_train']} training patches cannot fit "
                              f"n_components={v['n_components']} PCA components; set datasets.{name}.n_train above "
                              f"{v['n_components']}")
        return
    if source == "frey":
        n_test = 0 if n_test is None else int(n_test)
        if n_test > FREY_FACES - 2:
            raise _too_many(name, "n_test", n_test, FREY_FACES - 2, f"the {FREY_FACES} Frey faces less two to train on")
        if n_train is not None and int(n_train) > FREY_FACES - n_test:
            raise _too_many(name, "n_train", n_train, FREY_FACES - n_test,
                            f"the {FREY_FACES - n_test} Frey faces left after n_test={n_test}")
        return
    if source == "digits-avil":
        if n_test is not None:
            raise ConfigError(f"dataset {name}: digits-avil has no n_test (its test split is its validation split); "
                              f"remove datasets.{name}.n_test")
        rows = DIGITS_AVIL_ROWS[d.get("shift_augment") or "train"]
    elif source in SOURCE_ROWS:
        rows = SOURCE_ROWS[source]
    else:
        return
    if "valid" in rows and n_valid:
        raise ConfigError(f"dataset {name}: {source} has a fixed validation split ({rows['valid']} rows); "
                          f"n_valid must be 0, got {n_valid}")
    if n_valid >= rows["train"]:
        raise _too_many(name, "n_valid", n_valid, rows["train"] - 1, f"the {rows['train']} training rows of {source} "
                        f"less one")
    if n_train is not None and int(n_train) > rows["train"] - n_valid:
        less = f" less n_valid={n_valid}" if n_valid else ""
        raise _too_many(name, "n_train", n_train, rows["train"] - n_valid,
                        f"the {rows['train']} training rows of {source}{less}")
    if n_test is not None and "test" in rows and int(n_test) > rows["test"]:
        raise _too_many(name, "n_test", n_test, rows["test"], f"the {rows['test']} test rows of {source}")


#: labels of the labelled sources whose number is fixed (digits: 0-9); omniglot's characters are not counted
_N_LABELS = {"mnist": 10, "digits": 10, "digits-avil": 10}


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
    labels = _N_LABELS.get(d["source"], 1)
    most = rows // labels
    if per_class > most:
        held = f"{rows} test rows of {labels} labels" if labels > 1 else f"{rows} test rows"
        raise ConfigError(f"estimator {name}: test_subset per_class={per_class} is more than model {model}'s dataset "
                          f"{dataset} ({d['source']}) can give: its {held} leave at most {most} rows to its smallest "
                          f"label; set estimators.{name}.test_subset.per_class to at most {most}")


def _check_schedule(name: str, e: Mapping[str, Any], spec: registry.EstimatorSpec | None = None) -> None:
    """A schedule name (:data:`logzbench.schedules.SCHEDULES`) or a readable file of betas (a relative path is
    taken from the working directory, as the estimate jobs take it)."""
    schedule = e.get("schedule", option_default(spec, "schedule") if spec is not None else _OPTION_DEFAULTS["schedule"])
    if schedule in SCHEDULES:
        return
    path = Path(str(schedule))
    if not path.is_file():
        raise ConfigError(f"estimator {name}: schedule {schedule!r} is neither a schedule name "
                          f"({', '.join(SCHEDULES)}) nor a file of betas (no file {path.absolute()}); fix "
                          f"estimators.{name}.schedule")
    try:
        from_file(path)
    except (ValueError, OSError) as exc:
        raise ConfigError(f"estimator {name}: schedule file {schedule}: {exc}") from None


#: the reproduced papers' published values (:mod:`logzbench.report.published`, which reads them with
#: their checks); the rows they have are read here without importing the report (pandas, torch)
PUBLISHED_CSV = Path(__file__).parent / "report" / "published.csv"
#: papers whose values the learner tables compare by learner and dataset (not a model's ``paper`` entry)
LEARNER_PAPERS = ("li_avil",)


@functools.lru_cache(maxsize=None)
def _published_rows(path: str) -> dict[str, frozenset[str]]:
    with open(path, newline="") as fh:
        rows: dict[str, set[str]] = {}
        for line in csv.DictReader(fh, skipinitialspace=True):
            rows.setdefault(line["paper"].strip(), set()).add(line["row"].strip())
    return {p: frozenset(r) for p, r in rows.items()}


def check_paper_rows(paper_rows: Mapping[str, Mapping[str, str]],
                     known: Mapping[str, Any] | None = None) -> dict[str, dict[str, str]]:
    """``paper_rows`` (``{model: {paper key: row name}}``) as a dict when every ``(paper, row)`` has
    published values; else :class:`ConfigError` naming the model, the paper and the rows it has.

    ``known``: ``{paper: rows}`` (default: those of :data:`PUBLISHED_CSV`).  A row of a learner paper
    (:data:`LEARNER_PAPERS`) is refused too: its values are matched by learner and dataset."""
    known = _published_rows(str(PUBLISHED_CSV)) if known is None else known
    for model, rows in paper_rows.items():
        for paper, row in rows.items():
            if paper in LEARNER_PAPERS:
                raise ConfigError(f"model {model!r}: {paper!r}'s values are compared in table_learners.csv by "
                                  "learner and dataset; a model trained by a learner needs no paper entry")
            if row not in known.get(paper, ()):
                have = sorted(known.get(paper, ()))
                raise ConfigError(f"model {model!r}: paper {paper!r} has no published row {row!r}"
                                  + (f" (its rows: {', '.join(have)})" if have else
                                     f" (unknown paper key; known: {', '.join(sorted(known))})"))
    return {m: dict(r) for m, r in paper_rows.items()}


def _check_tracking_uri(config: Mapping) -> None:
    """Refuse a ``tracking.uri`` MLflow cannot use (:func:`logzbench.tracking.resolve_tracking_uri`: the key
    and the accepted forms), which a job would otherwise meet only as MLflow's error in its log."""
    t = config.get("tracking") or {}
    if t.get("enabled", True) and t.get("uri") is not None:
        from .errors import TrackingError
        from .tracking import resolve_tracking_uri

        try:
            resolve_tracking_uri(t["uri"], key="tracking.uri")
        except TrackingError as exc:
            raise ConfigError(str(exc)) from None


def check_config(config: Mapping, presets: Mapping | None = None) -> list[str]:
    """Check a (schema-validated) config beyond what its schema says; return warnings.

    Raises :class:`ConfigError` naming the entry and what to change: no models and no trials, a
    dataset of unknown dimension, a model's unknown dataset, preset, family or estimator, an
    estimator listed for a model whose family it does not apply to, an estimator's unknown method or
    models, a fixed schedule (``sm14500``, a file) with another K, a CSL K below ``thin``, a ``test_subset`` on a model
    whose dataset has no labels or a ``per_class`` its test rows cannot give, a hyperparameter the model's trainer
    does not take, a learner's hyperparameter of a type or value the learner refuses
    (:mod:`logzbench.training.learner_options`), a dataset size the
    data set does not have (``n_train``, ``n_test``, ``n_valid``; van Hateren ``n_test_images`` of
    ``n_images``, ``n_components`` of the patch's pixels), an unknown schedule or a schedule file that
    does not exist or holds no schedule, a published row (``paper``) the papers do not have.  Warns of a model left
    with no estimate (e.g. a DBN with only base-rate inits) and of sweep keys an estimator has no axis
    for."""
    warnings: list[str] = []
    if not config.get("models") and not (config.get("trials") or {}):
        raise ConfigError("the config defines no models and no trials: nothing to run")
    _check_tracking_uri(config)
    for d, spec in (config.get("datasets") or {}).items():
        if dataset_kind(config, d) == "binary" and spec["source"] not in KNOWN_N_VISIBLE and "n_visible" not in spec:
            raise ConfigError(f"dataset {d}: give n_visible")
        _check_dataset_sizes(d, spec)
    for name in config.get("estimators") or {}:
        estimator_spec(config, name)  # a known method
    for model, m in (config.get("models") or {}).items():
        if m["dataset"] not in config["datasets"]:
            raise ConfigError(f"model {model}: unknown dataset {m['dataset']!r}; "
                              f"defined: {sorted(config['datasets'])}")
        for name in estimators_of(config, model):
            if name not in config["estimators"]:
                raise ConfigError(f"model {model}: unknown estimator {name!r}; "
                                  f"defined: {sorted(config['estimators'])}")
        hp = model_hyperparams(config, model, presets)
        fam = hp["family"]
        _check_hyperparam_names(config, model, hp)
        if hp.get("learner") is not None:
            _check_learner_values(config, model, hp)
        if m.get("paper"):
            check_paper_rows({model: m["paper"]})
        for name in m.get("estimators") or []:
            spec = estimator_spec(config, name)
            if not spec.applies_to(fam):
                raise ConfigError(
                    f"model {model}: estimator {name!r} ({spec.name}) is not available for a {fam.upper()} "
                    f"({_not_available(spec)}; for a {fam.upper()} use one of {list(registry.estimators_for(fam))}); "
                    f"remove it from models.{model}.estimators (without an explicit list, estimators a family "
                    f"lacks are skipped automatically)")
        if not model_jobs(config, model, presets):
            warnings.append(f"model {model} ({fam}) has no estimate to run (a DBN supports the uniform initial "
                            f"distribution only; check the estimators' inits and the exact limits)")
    for name, e in (config.get("estimators") or {}).items():
        spec = estimator_spec(config, name)
        unknown = sorted(set(e.get("models") or []) - set(config.get("models") or {}))
        if unknown:
            raise ConfigError(f"estimator {name}: unknown models {unknown}; defined: {sorted(config['models'])}")
        if e.get("test_subset"):
            for model in config.get("models") or {}:
                source = config["datasets"][model_dataset(config, model)]["source"]
                if source not in LABELLED_SOURCES and name in estimators_run(config, model, presets):
                    raise ConfigError(f"estimator {name}: test_subset needs test labels, and model {model}'s dataset "
                                      f"({source}) has none (labelled: {', '.join(LABELLED_SOURCES)}); remove "
                                      f"test_subset or run {name} on other models (its `models`)")
                if name in estimators_run(config, model, presets):
                    _check_per_class(config, name, model, int(e["test_subset"]["per_class"]))
        if "schedule" in spec.options:
            _check_schedule(name, e, spec)
        for axis, key in registry.AXIS_CONFIG_KEYS.items():
            if axis in ("K", "init") and axis not in spec.axes and axis in spec.options:  # unswept_options
                if len(e.get(key) or []) > 1:
                    what = "its K is the starting K (doubled by the estimator itself)" if axis == "K" else \
                        "it runs from one initial distribution"
                    raise ConfigError(f"estimator {name}: {spec.name} is not swept over {key}; {what}: give one "
                                      f"value, e.g. {key}: [{e[key][0]}]")
                if axis == "init" and e.get(key):
                    for model in config.get("models") or {}:
                        fam = family_spec(config, model, presets)
                        if name in estimators_run(config, model, presets) and fam.inits and \
                                e[key][0] not in fam.inits:
                            raise ConfigError(f"estimator {name}: model {model} ({fam.name}) has no initial "
                                              f"distribution {e[key][0]!r} (its: {', '.join(fam.inits)}); run "
                                              f"{name} on other models (its `models`) or change its inits")
                continue
            if e.get(key) and axis not in spec.axes:
                warnings.append(f"estimator {name} ({spec.name}) is not swept over {key}: its `{key}` is ignored")
        if "K" in spec.axes:
            fixed = fixed_schedule_K(e)
            ks = [fixed] if fixed is not None and not e.get("K") else _listed(config, name, "K")
            if fixed is not None and ks != [fixed]:
                what = ("the sm14500 schedule" if e.get("schedule") == "sm14500"
                        else f"the schedule file {e['schedule']}")
                raise ConfigError(f"estimator {name}: {what} has K = {fixed}; set K: [{fixed}] or omit K")
            if "samples_per_chain" in spec.options:  # CSL: K sweeps per chain, one sample kept every `thin`
                bad = [k for k in ks if k // e.get("thin", 1) < 1]
                if bad:
                    raise ConfigError(f"estimator {name}: K {bad} < thin: no CSL sample would be kept")
    return warnings


# --------------------------------------------------------------------------- the workflow's files
#: the arrays each kind of workflow file must hold to be used (per-chain arrays: one of the two)
_EXPECTED_ARRAYS = {"model": ("model_type",), "data": ("train", "test"),
                    "estimate": ("log_weights", "per_example_log_likelihood")}


def rebuild_hint(target: str | Path) -> str:
    """How to rebuild a workflow output and what depends on it.  Snakemake does not rebuild a missing or
    damaged file of an earlier run while what depends on it is up to date (deleting it is not enough):
    ``--forcerun`` reruns the job that writes it and every job downstream."""
    return f"rebuild it and what depends on it with: snakemake --forcerun {target} (and your usual options)"


def check_npz(path: str | Path, kind: str, *, quick: bool = False, rebuild: str | Path | None = None) -> None:
    """Raise :class:`ConfigError` (one line: the file, what is wrong, how to rebuild it) unless ``path`` is a
    complete ``.npz`` holding the arrays of ``kind`` (``model``, ``data``: all of them; ``estimate``: one of
    ``log_weights``, ``per_example_log_likelihood``).  ``quick``: only the zip archive's directory (a
    truncated file has none; milliseconds for thousands of files), else every array is read and its
    checksum verified.  ``rebuild``: the output to rebuild (:func:`rebuild_hint`; default ``path``)."""
    import numpy as np

    path = Path(path)
    hint = rebuild_hint(rebuild if rebuild is not None else path)
    if not path.is_file():
        raise ConfigError(f"{path} is missing; {hint}")
    try:
        if quick:
            if not zipfile.is_zipfile(path):
                raise ValueError("not a complete .npz archive; truncated?")
            return
        with np.load(path, allow_pickle=False) as z:
            names = list(z.files)
            need = _EXPECTED_ARRAYS[kind]
            if kind == "estimate" and not set(need) & set(names):
                raise ValueError(f"holds neither {' nor '.join(need)} (arrays: {names})")
            missing = [k for k in need if k not in names] if kind != "estimate" else []
            if missing:
                raise ValueError(f"holds no {', '.join(missing)} (arrays: {names})")
            for k in names:
                z[k]  # noqa: B018 - reads the array, verifying its CRC
    except Exception as exc:  # noqa: BLE001 - zipfile.BadZipFile, zlib.error, EOFError, ValueError, OSError ...
        why = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        raise ConfigError(f"{path} is damaged ({why}); {hint}") from None


def check_estimate_record(path: str | Path, *, quick: bool = False) -> None:
    """Raise :class:`ConfigError` unless the estimate record ``path`` (``<setting>.json``) parses as a record and
    the per-chain arrays beside it (``<setting>.npz``) are complete (:func:`check_npz`, ``kind="estimate"``);
    the message names the file and how to rebuild the estimate's directory (the rule's output)."""
    path = Path(path)
    hint = rebuild_hint(path.parent)
    if not path.is_file():
        raise ConfigError(f"{path} is missing; {hint}")
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path} is damaged (not JSON: {exc}); {hint}") from None
    if not isinstance(record, dict) or "result" not in record:
        raise ConfigError(f"{path} is damaged (not an estimate record); {hint}")
    check_npz(path.with_suffix(".npz"), "estimate", quick=quick, rebuild=path.parent)


def damaged_outputs(config: Mapping, results: str = "results",
                    presets: Mapping | None = None) -> list[tuple[str, str]]:
    """What a run of the workflow would trust but cannot use: ``(the output to rebuild, one-line message)``
    pairs (:func:`check_npz`, :func:`check_estimate_record`, ``quick``) for the prepared datasets and models
    that exist but are not complete ``.npz`` files, and each estimate record of the config's sweeps that
    exists but does not parse or whose per-chain arrays are missing or truncated (Snakemake sees only the
    estimate's directory, and keeps an output of an earlier run that is up to date by its time stamp), and
    each setting of a finished sweep whose record is missing (deleted): a record of the same directory lists
    it among its sweep's settings (``sweep_stems``, :func:`logzbench.jobs.run_estimate_sweep`), or the
    directory holds no record at all.  Other estimates whose record is absent are not reported (their sweep
    is new or changed, and reruns)."""
    problems = []
    models = list(config.get("models") or {})
    datasets = {model_dataset(config, m) for m in models}
    candidates = [(Path(results) / "data" / f"{d}.npz", "data") for d in sorted(datasets)]
    candidates += [(Path(results) / "models" / f"{m}.npz", "model") for m in models]
    for path, kind in candidates:
        if path.exists():
            try:
                check_npz(path, kind, quick=True)
            except ConfigError as exc:
                problems.append((str(path), str(exc)))
    finished: dict[Path, set[str]] = {}  # estimate directory -> the settings its records list
    for j in all_jobs(config, presets):
        record = Path(j.path("json", results))
        if record.exists():
            try:
                check_estimate_record(record, quick=True)
            except ConfigError as exc:
                problems.append((str(record.parent), str(exc)))
        elif record.parent.is_dir():
            if record.parent not in finished:
                finished[record.parent] = _sweep_stems(record.parent)
            listed = finished[record.parent]
            if listed is None or record.stem in listed:
                why = "its sweep's directory holds no record" if listed is None else "a setting of the finished sweep"
                problems.append((str(record.parent), f"{record} is missing ({why} in {record.parent}); "
                                                     f"{rebuild_hint(record.parent)}"))
    return problems


def _sweep_stems(directory: Path) -> set[str] | None:
    """The settings (file stems) of the sweep whose records lie in ``directory``: the union of their
    ``sweep_stems`` (records written before those were recorded, and files that do not parse: none);
    ``None`` when the directory holds no record at all (every file of a finished sweep deleted: Snakemake
    sees its output directory and reruns nothing)."""
    files = list(directory.glob("*.json"))
    if not files:
        return None
    stems: set[str] = set()
    for f in files:
        try:
            listed = json.loads(f.read_text()).get("sweep_stems")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            continue
        if isinstance(listed, list):
            stems.update(str(x) for x in listed)
    return stems
