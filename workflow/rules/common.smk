# Shared definitions: config validation, derived tables, wildcard constraints, input functions.

import os
import re
import sys
from pathlib import Path

from snakemake.utils import validate


_STRING_KEYS = {"description", "experiment", "uri", "data_mirror", "artifact_dir", "preset", "dataset", "source",
                "schedule", "device", "method", "csl_mode", "binarize"}


def _coerce_cli_values(obj, key=None):
    """`--config key={...}` parses nested values as strings: turn numbers/booleans/null back."""
    import yaml

    if isinstance(obj, dict):
        return {k: _coerce_cli_values(v, k) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_coerce_cli_values(v, key) for v in obj]
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


config.update(_coerce_cli_values(dict(config)))
validate(config, schema="../schemas/config.schema.yaml")

# Everything outside the working directory is resolved against the repository root.
REPO_ROOT = Path(workflow.basedir).resolve()
SCRIPTS = REPO_ROOT / "workflow" / "scripts"

KNOWN_N_VISIBLE = {"mnist": 784, "digits": 64, "omniglot": 784}
#: continuous data sets (real-valued rows: whitened PCA coefficients of image patches)
CONTINUOUS_SOURCES = ("vanhateren",)
#: methods swept over K x init x seed (log Z from one annealing run: ais, ads, ads-multinomial,
#: reverse-ais; test log-likelihood: raise)
METHODS_ANNEALED = ("ais", "raise", "ads", "ads-multinomial", "reverse-ais")
BINARY_FAMILIES = ("rbm", "dbm", "dbn")
#: continuous models (Sohl-Dickstein & Culpepper 2012): analysis (PoE, mcRBM) and generative ones
CONTINUOUS_FAMILIES = ("poe-laplace", "poe-student-t", "mcrbm", "linear-gaussian", "linear-laplace", "bilinear")
FAMILIES = BINARY_FAMILIES + CONTINUOUS_FAMILIES
#: estimators of continuous models, swept over K x seed (no initial distribution)
METHODS_CONTINUOUS = ("hais", "ais-hmc", "ais-mh")
DEEP_FAMILIES = ("dbm", "dbn")
#: initial distributions each family supports (the data-base-rate one is not defined for DBNs)
FAMILY_INITS = {"rbm": ("uniform", "base-rate"), "dbm": ("uniform", "base-rate"), "dbn": ("uniform",),
                **{f: () for f in CONTINUOUS_FAMILIES}}
#: estimator methods each family supports (CSL is implemented for RBMs only)
FAMILY_METHODS = {"rbm": ("exact", "csl") + METHODS_ANNEALED, "dbm": ("exact",) + METHODS_ANNEALED,
                  "dbn": ("exact",) + METHODS_ANNEALED, **{f: ("exact",) + METHODS_CONTINUOUS for f in CONTINUOUS_FAMILIES}}

RESULTS = "results"
LOGS = f"{RESULTS}/logs"
BENCH = f"{RESULTS}/benchmarks"
TRACKING_SENTINEL = f"{RESULTS}/tracking/store.json"


# --------------------------------------------------------------------------- settings
def data_mirror():
    """Mirror directory: $LOGZBENCH_DATA_MIRROR, else config `data_mirror` (relative to the repo root)."""
    env = os.environ.get("LOGZBENCH_DATA_MIRROR")
    value = env or config.get("data_mirror")
    if not value:
        return None
    p = Path(value)
    return str(p if p.is_absolute() else (REPO_ROOT / p).resolve())


def tracking_settings():
    t = config["tracking"]
    uri = None
    if t["enabled"]:
        from logzbench.tracking import resolve_tracking_uri

        uri = resolve_tracking_uri(t["uri"])  # config key -> $MLFLOW_TRACKING_URI -> ./mlflow.db
    return {"enabled": bool(t["enabled"]), "uri": uri, "experiment": t["experiment"],
            "artifact_dir": t["artifact_dir"]}


TRACKING = tracking_settings()


def _presets():
    """Training presets of every family (`MODEL_PRESETS`, each with its `family`); falls back to the
    RBM-only `TRAIN_PRESETS` of an older logzbench."""
    try:
        from logzbench.training import MODEL_PRESETS as presets
    except ImportError:
        try:
            from logzbench.training import TRAIN_PRESETS as presets
        except ImportError as exc:  # pragma: no cover - a broken install
            raise WorkflowError(f"cannot import logzbench.training presets: {exc}")
    return presets


def model_hyperparams(model):
    """Training keyword arguments of a model: the preset, overridden by `hyperparams`.

    `family` (rbm | dbm | dbn, default rbm) comes from the preset or `hyperparams.family`; an RBM
    needs `n_hidden`, a DBM or DBN `hidden_sizes` (a DBN exactly two layers)."""
    m = config["models"][model]
    hp = {}
    if m.get("preset"):
        presets = _presets()
        if m["preset"] not in presets:
            raise WorkflowError(f"model {model}: unknown preset {m['preset']!r}; known: {sorted(presets)}")
        hp.update(presets[m["preset"]])
    hp.update(m.get("hyperparams") or {})
    family = hp["family"] = str(hp.get("family", "rbm")).lower()
    if family not in FAMILIES:
        raise WorkflowError(f"model {model}: unknown family {family!r}; choose one of {list(FAMILIES)}")
    ds = config["datasets"].get(m["dataset"])  # an unknown dataset is reported by the config check
    continuous_data = ds is not None and ds["source"] in CONTINUOUS_SOURCES
    if ds is not None and (family in CONTINUOUS_FAMILIES) != continuous_data:
        raise WorkflowError(f"model {model}: a {family} model needs a "
                            f"{'continuous (vanhateren)' if family in CONTINUOUS_FAMILIES else 'binary'} dataset; "
                            f"{m['dataset']} is {'continuous' if continuous_data else 'binary'}")
    if family in CONTINUOUS_FAMILIES:
        if not isinstance(hp.get("size"), int) or hp["size"] < 1:
            raise WorkflowError(f"model {model}: a {family} model needs `hyperparams.size` (experts, latent "
                                f"variables or hidden units), got {hp.get('size')!r}")
    elif family == "rbm":
        if "n_hidden" not in hp:
            raise WorkflowError(f"model {model}: give `hyperparams.n_hidden` or a `preset`")
    else:
        sizes = hp.get("hidden_sizes")
        if not isinstance(sizes, (list, tuple)) or not sizes or not all(
                isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in sizes):
            raise WorkflowError(f"model {model}: a {family.upper()} needs `hyperparams.hidden_sizes` "
                                f"(a list of positive layer sizes, e.g. [500, 1000]) or a `preset`; got {sizes!r}")
        if family == "dbn" and len(sizes) != 2:
            raise WorkflowError(f"model {model}: a DBN has exactly two hidden layers; hidden_sizes = {list(sizes)}")
    return hp


def model_family(model):
    """rbm, dbm or dbn (`family` of the preset or of `hyperparams`; default rbm)."""
    return str(model_hyperparams(model).get("family", "rbm")).lower()


def hidden_sizes(model):
    """Hidden layer sizes: [n_hidden] for an RBM, `hidden_sizes` for a DBM or DBN."""
    hp = model_hyperparams(model)
    if model_family(model) in CONTINUOUS_FAMILIES:
        return [int(hp["size"])]
    if model_family(model) == "rbm":
        return [int(hp["n_hidden"])]
    return [int(n) for n in hp["hidden_sizes"]]


def n_visible(dataset):
    """Data dimension: visible units of a binary set, PCA components M of a continuous one."""
    d = config["datasets"][dataset]
    if d["source"] in CONTINUOUS_SOURCES:
        return int(d.get("n_components", 36))
    return d.get("n_visible") or KNOWN_N_VISIBLE[d["source"]]


def model_dataset(model):
    return config["models"][model]["dataset"]


def estimator_method(name):
    return config["estimators"][name].get("method") or name


def estimators_of(model):
    """The model's `estimators` list, else every estimator whose `models` (if given) includes it."""
    names = config["models"][model].get("estimators")
    if names is not None:
        return list(names)
    return [n for n, e in config["estimators"].items() if model in (e.get("models") or [model])]


def exact_units(model):
    """(units enumerated for log Z, units enumerated per test row for log f(v)) of exact enumeration.

    RBM: min(n_visible, n_hidden) for Z; f(v) is analytic (0).
    DBM: Z enumerates the smaller side of the even/odd bipartite view, min(n_visible + n_2 + n_4 + ...,
         n_1 + n_3 + ...); f(v) enumerates the even hidden layers n_2 + n_4 + ... (odd ones summed out).
    DBN: Z is the top RBM's, min(n_1, n_2); f(v) enumerates h_1 (2^n_1 states x test rows x n_visible).
    """
    nv, hs = n_visible(model_dataset(model)), hidden_sizes(model)
    family = model_family(model)
    if family == "rbm":
        return min(nv, hs[0]), 0
    if family == "dbm":
        sizes = [nv] + hs
        return min(sum(sizes[0::2]), sum(sizes[1::2])), sum(hs[1::2])
    return min(hs[0], hs[1]), hs[0]


def exact_applies(model, est_name):
    """Exact enumeration when the log Z enumeration has at most `max_units` units and the per-row
    log f(v) enumeration (deep models) at most `max_log_f_units` (or forced per model)."""
    setting = config["models"][model].get("exact", "auto")
    if setting is False:
        return False
    if setting is True:
        return True
    family = model_family(model)
    if family in CONTINUOUS_FAMILIES:  # closed forms: complete PoE (L = M), linear model with Gaussian prior
        return family == "linear-gaussian" or (family.startswith("poe-") and
                                               hidden_sizes(model)[0] == n_visible(model_dataset(model)))
    e = config["estimators"][est_name]
    limit = e.get("max_units", config["evaluation"]["exact_max_units"])
    limit_f = e.get("max_log_f_units", config["evaluation"]["exact_max_log_f_units"])
    units_z, units_f = exact_units(model)
    return units_z <= limit and units_f <= limit_f


def _sweep(est_name, key):
    return list(config["estimators"][est_name].get(key) or config["evaluation"][key])


def estimator_K(est_name):
    e = config["estimators"][est_name]
    if e.get("schedule") == "sm14500" and not e.get("K"):
        return [14500]
    return _sweep(est_name, "K")


def inits_of(model, est_name):
    """The estimator's initial distributions that the model's family supports (a DBN: uniform only)."""
    allowed = FAMILY_INITS[model_family(model)]
    return [i for i in _sweep(est_name, "inits") if i in allowed]


def estimators_run(model):
    """Estimator names run on a model: its list (default all), less the methods its family lacks
    (CSL for a DBM or DBN; listing it explicitly for such a model is refused by the config check)."""
    allowed = FAMILY_METHODS[model_family(model)]
    return [n for n in estimators_of(model) if estimator_method(n) in allowed]


def estimate_files(model, ext="json"):
    """Every estimate output of one model: the sweep declared in the config.

    exact: once per model (only where enumeration is affordable); csl: K x seed (no init; RBMs
    only); ais, raise, ads, ads-multinomial, reverse-ais: K x init x seed (DBNs: uniform init only).
    """
    out = []
    for name in estimators_run(model):
        method = estimator_method(name)
        base = f"{RESULTS}/estimates/{model}/{name}"
        if method == "exact":
            if exact_applies(model, name):
                out.append(f"{base}/exact.{ext}")
        elif method == "csl" or method in METHODS_CONTINUOUS:
            out += expand(f"{base}/K{{K}}_seed{{seed}}.{ext}", K=estimator_K(name), seed=_sweep(name, "seeds"))
        else:
            out += expand(f"{base}/K{{K}}_{{init}}_seed{{seed}}.{ext}", K=estimator_K(name),
                          init=inits_of(model, name), seed=_sweep(name, "seeds"))
    return out


def all_estimate_files(ext="json"):
    return [f for model in config["models"] for f in estimate_files(model, ext)]


def _check_config():
    if not config["models"] and not (config.get("trials") or {}):
        raise WorkflowError("the config defines no models and no trials: nothing to run")
    for d, spec in config["datasets"].items():
        if spec["source"] not in KNOWN_N_VISIBLE and spec["source"] not in CONTINUOUS_SOURCES and "n_visible" not in spec:
            raise WorkflowError(f"dataset {d}: give n_visible")
    for model, m in config["models"].items():
        if m["dataset"] not in config["datasets"]:
            raise WorkflowError(f"model {model}: unknown dataset {m['dataset']!r}; "
                                f"defined: {sorted(config['datasets'])}")
        for name in estimators_of(model):
            if name not in config["estimators"]:
                raise WorkflowError(f"model {model}: unknown estimator {name!r}; "
                                    f"defined: {sorted(config['estimators'])}")
        family = model_family(model)
        listed = m.get("estimators")
        for name in listed or []:
            if estimator_method(name) not in FAMILY_METHODS[family]:
                raise WorkflowError(
                    f"model {model}: estimator {name!r} ({estimator_method(name)}) is not available for a "
                    f"{family.upper()} (CSL is implemented for RBMs only; hais, ais-hmc and ais-mh for continuous "
                    f"models only, the binary estimators for binary ones); remove it from models.{model}.estimators "
                    f"(without an explicit list, estimators a family lacks are skipped automatically)")
        if not estimate_files(model):
            print(f"logzbench: warning: model {model} ({family}) has no estimate to run (a DBN supports the uniform "
                  f"initial distribution only; check the estimators' inits and the exact limits)", file=sys.stderr)
    for name, e in config["estimators"].items():
        method = estimator_method(name)
        unknown = sorted(set(e.get("models") or []) - set(config["models"]))
        if unknown:
            raise WorkflowError(f"estimator {name}: unknown models {unknown}; defined: {sorted(config['models'])}")
        if e.get("schedule") == "sm14500" and estimator_K(name) != [14500]:
            raise WorkflowError(f"estimator {name}: the sm14500 schedule has K = 14500; set K: [14500] or omit K")
        if method == "csl":
            bad = [k for k in estimator_K(name) if k // e.get("thin", 1) < 1]
            if bad:
                raise WorkflowError(f"estimator {name}: K {bad} < thin: no CSL sample would be kept")


_check_config()


def _alternatives(names):
    return "|".join(re.escape(n) for n in names) if names else "(?!x)x"


ESTIMATOR_NAMES = {m: [n for n in config["estimators"] if estimator_method(n) == m]
                   for m in ("exact", "csl") + METHODS_ANNEALED + METHODS_CONTINUOUS}


wildcard_constraints:
    dataset=_alternatives(config["datasets"]),
    model=_alternatives(config["models"]),
    K=r"[0-9]+",
    seed=r"[0-9]+",
    init="uniform|base-rate",


# --------------------------------------------------------------------------- input functions
def dataset_file(wildcards):
    return f"{RESULTS}/data/{model_dataset(wildcards.model)}.npz"


def estimator_params(wildcards):
    """Everything the estimate script needs besides the files (the params of the estimate rules, so changing any
    of these re-runs the job under Snakemake's default `params` rerun trigger)."""
    e = config["estimators"][wildcards.estimator]
    method = estimator_method(wildcards.estimator)
    model = wildcards.model
    family, sizes = model_family(model), hidden_sizes(model)
    K = int(wildcards.K) if "K" in wildcards.keys() else None
    p = {
        "model": model,
        "dataset": model_dataset(model),
        "estimator": wildcards.estimator,
        "method": method,
        "K": K,
        "init": wildcards.get("init") if method in METHODS_ANNEALED else None,
        "seed": int(wildcards.seed) if "seed" in wildcards.keys() else None,
        "device": config["device"],
        "n_visible": n_visible(model_dataset(model)),
        "family": family,
        "hidden_sizes": sizes,
        "n_hidden": sizes[0] if family == "rbm" else None,  # deep models: see hidden_sizes
    }
    if method in METHODS_ANNEALED:
        p.update(schedule=e["schedule"], chains=e["chains"], n_examples=e["n_examples"] if method == "raise" else None)
        if family in DEEP_FAMILIES:  # importance samples per example for log f(v)
            p.update(is_samples=e["is_samples"])
    elif method in METHODS_CONTINUOUS:
        p.update(schedule=e["schedule"], chains=e["chains"], step_size=e["step_size"], gamma=e["gamma"],
                 mh_sigma=e["mh_sigma"], proposal_scale=e["proposal_scale"])
    elif method == "csl":
        p.update(chains=e["chains"], csl_mode=e["csl_mode"], burn_in=e["burn_in"], thin=e["thin"],
                 samples_per_chain=max(1, K // e["thin"]), n_examples=e["n_examples"])
    return p


def resources_for(step):
    return dict(config["resources"].get(step) or {})
