# Shared definitions: config validation and checks, the estimate sweep (from logzbench.pipeline.sweep),
# wildcard constraints, input functions and every helper function of the rules.
#
# What the config means -- each model's family and hyperparameters, the estimators run on it,
# the jobs of their sweeps, each job's settings -- is logzbench.pipeline.sweep's, its checks
# logzbench.pipeline.config_schema's and logzbench.pipeline.config's (unit-tested in tests/test_sweep.py); which estimators and families
# exist is logzbench.registry's.  None of these imports torch.

import os
import re
import sys
from pathlib import Path

from logzbench import registry
from logzbench.errors import ConfigError
from logzbench.pipeline import diagnose as diagnose_plan
from logzbench.pipeline import outputs, sweep
from logzbench.pipeline import usage as job_usage
from logzbench.pipeline.warm_common import ENV_WORKFLOW as WARM_JOBS_ENV
from logzbench.pipeline.config import check_config
from logzbench.pipeline.config_schema import load_config
from logzbench.report.compared import compared_learner_datasets


def _load_config():
    """Check the config Snakemake loaded before anything walks it, and complete it (logzbench.pipeline.config_schema.
    load_config): its size with its YAML aliases expanded, the --config values' numbers, the schema (NaN and
    inf refused, defaults filled in), the estimator entries' options (declared once, in logzbench.options)."""
    import yaml

    schema = yaml.safe_load((Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml").read_text())
    try:
        load_config(config, schema, workflow.config_settings.config)
    except ConfigError as exc:
        raise WorkflowError(str(exc))


_load_config()

# Everything outside the working directory is resolved against the repository root.
REPO_ROOT = Path(workflow.basedir).resolve()
# The software of every rule (used with --use-conda).  Its pip section installs this repository's
# package from ${LOGZBENCH_REPO}, set here (an output of the workflow, not an input the user must
# provide): Snakemake copies the file into the conda prefix before creating the environment, so a
# path relative to workflow/envs/ would not resolve.
CONDA_ENV = "../envs/logzbench.yaml"
os.environ.update(LOGZBENCH_REPO=str(REPO_ROOT))

RESULTS = "results"


def log_file(name):
    """The log of job `name` (e.g. "estimate/{model}/{estimator}"): results/logs/<name>.log."""
    return job_usage.log_file(RESULTS, name)


def benchmark_file(name):
    """Snakemake's benchmark of job `name`: results/benchmarks/<name>.tsv, the rule's own process.  Where the
    job runs forked from the warm server, its own process's usage is <name>.job.tsv beside it, written by
    the rule's script (logzbench.pipeline.usage.job_usage_file of the log)."""
    return job_usage.benchmark_file(RESULTS, name)


TRACKING_SENTINEL = f"{RESULTS}/tracking/store.json"


# --------------------------------------------------------------------------- settings
def data_mirror():
    """Mirror directory: $LOGZBENCH_DATA_MIRROR, else config `data_mirror` (relative to the repo root), with
    every symbolic link resolved."""
    env = os.environ.get("LOGZBENCH_DATA_MIRROR")
    value = env or config.get("data_mirror")
    if not value:
        return None
    p = Path(value)
    return os.path.realpath(p if p.is_absolute() else REPO_ROOT / p)


# The jobs find the mirror in $LOGZBENCH_DATA_MIRROR (the data loaders' default), set here in every Snakemake
# process (a cluster job's too), not in a rule's params: where the mirror lies is not what the data are (every
# file is checked against its sha256), so the same mirror named another way, or moved, reruns nothing.
MIRROR = data_mirror()
if MIRROR:  # (set, as LOGZBENCH_REPO above: the envvars directive is for variables a workflow requires)
    os.environ.update(LOGZBENCH_DATA_MIRROR=MIRROR)


def tracking_settings():
    t = config["tracking"]
    uri = None
    if t["enabled"]:
        from logzbench.errors import TrackingError
        from logzbench.tracking import resolve_tracking_uri

        try:  # config key -> $MLFLOW_TRACKING_URI -> ./mlflow.db; one MLflow cannot use is refused here, not in a job
            uri = resolve_tracking_uri(t["uri"], key="tracking.uri")
        except TrackingError as exc:
            raise WorkflowError(str(exc))
    return {"enabled": bool(t["enabled"]), "uri": uri, "experiment": t["experiment"],
            "artifact_dir": t["artifact_dir"]}


TRACKING = tracking_settings()


# --------------------------------------------------------------------------- cluster job groups
# config `cluster_group` (ignored when Snakemake runs the jobs itself): which jobs share one cluster job.
#   none      one cluster job per rule instance;
#   model     one per model (its training, estimates and diagnostics), one for every dataset's preparation,
#             one for the report and the repeated trials;
#   workflow  one for everything.
# A group's jobs run in parallel within its allocation, whose CPUs are Snakemake's --cores (required on a
# cluster with a grouping) and whose memory is the sum of its jobs' mem_mb running side by side; the profile's
# group-components put a group's unconnected parts (the datasets, the trials beside the models) in one job.
CLUSTER_GROUP = config.get("cluster_group", "none")
_MODEL_GROUPS = {"prepare_dataset": "datasets", "train_model": "model-{model}", "estimate": "model-{model}",
                 "diagnose": "model-{model}", "report": "report", "trials_gaussian": "report", "trials_grid": "report",
                 "report_trials": "report"}
_GROUPS = {"none": {}, "model": _MODEL_GROUPS, "workflow": dict.fromkeys(_MODEL_GROUPS, "logzbench")}[CLUSTER_GROUP]


def job_group(name):
    """The group of the jobs of `name` under the config's `cluster_group`; None = a cluster job each."""
    return _GROUPS.get(name)


def warm_start(local_rule=False):
    """Whether jobs run in processes forked from a warm server (logzbench.pipeline.warm): config `warm_start`;
    `auto` = where Snakemake itself runs the jobs, and inside the group jobs of a `cluster_group` (several jobs
    in one allocation), not in the one-job allocations of `cluster_group: none`.  A `local_rule` runs in the
    Snakemake process's machine even on a cluster: a server there would serve it alone."""
    w = config.get("warm_start", "auto")
    if w == "auto":
        here = bool(workflow.local_exec) and not workflow.remote_exec
        return here if local_rule else (here or CLUSTER_GROUP != "none")
    return bool(w)


WARM = warm_start()
#: the same for the local rules (init_tracking) and the server the workflow stops when it ends
WARM_LOCAL = warm_start(local_rule=True)
# the jobs read it from their environment ($LOGZBENCH_WARM_JOBS, logzbench.pipeline.warm_common.enabled), not from
# a param: how a job runs must not make Snakemake rerun it (a `params` change would, e.g. between a local and a
# cluster run).  This process runs the local rules when it submits the others, all of a group job's in one.
os.environ[WARM_JOBS_ENV] = "1" if (WARM if workflow.remote_exec else WARM_LOCAL) else "0"


# --------------------------------------------------------------------------- models and the estimate sweep
def _config_error(exc):
    return WorkflowError(str(exc))


def model_hyperparams(model):
    """Training keyword arguments of a model: the preset, overridden by `hyperparams`, with its `family`."""
    try:
        return sweep.model_hyperparams(config, model)
    except ConfigError as exc:
        raise _config_error(exc)


def model_dataset(model):
    return sweep.model_dataset(config, model)


def estimate_files(model, ext="json"):
    """Every estimate output of one model: the sweep declared in the config (logzbench.pipeline.sweep.model_jobs:
    exact once where it applies, every other estimator over its registry axes K / init / seed)."""
    return [j.path(ext, RESULTS) for j in sweep.model_jobs(config, model)]


def all_estimate_files(ext="json"):
    return [f for model in config["models"] for f in estimate_files(model, ext)]


def estimate_dir(model, estimator):
    """The output of one job of the estimate rule, the files of the model x estimator sweep."""
    return f"{RESULTS}/estimates/{model}/{estimator}"


def all_estimate_dirs():
    return [estimate_dir(m, e) for m, e in sweep.sweep_pairs(config)]


def _check_config():
    try:
        warnings = check_config(config)
    except ConfigError as exc:
        raise _config_error(exc)
    for w in warnings:
        print(f"logzbench: warning: {w}", file=sys.stderr)


_check_config()


def _alternatives(names):
    return "|".join(re.escape(n) for n in names) if names else "(?!x)x"


wildcard_constraints:
    dataset=_alternatives(config["datasets"]),
    model=_alternatives(config["models"]),
    estimator=_alternatives(config["estimators"]),


# --------------------------------------------------------------------------- input functions
def dataset_file(wildcards):
    return f"{RESULTS}/data/{model_dataset(wildcards.model)}.npz"


def trained_models():
    """The models the workflow trains (each one job of train_model), in config order; all but the source
    models (config `source`, a model read from the user's file; logzbench.pipeline.sweep.model_source)."""
    return [m for m in config["models"] if not sweep.is_source(config, m)]


def estimate_inputs(wildcards):
    """Rule estimate's model and rows: `model`, the trained model's file, or a source model's file (FILE.py of
    FILE.py:NAME; editing it reruns the model's estimates; the job reads the source from its settings);
    `data`, the prepared dataset, or a source model's data.test file, and then `train`, its data.train file
    where given."""
    model = wildcards.model
    source = sweep.model_source(config, model)
    out = {"model": source.path if source is not None else f"{RESULTS}/models/{model}.npz"}
    files = sweep.model_data_files(config, model)
    if files is None:
        out["data"] = dataset_file(wildcards)
    else:
        out["data"] = files["test"]
        if "train" in files:
            out["train"] = files["train"]
    return out


_PRODUCERS = {f"{RESULTS}/data/": "prepare_dataset", f"{RESULTS}/models/": "train_model",
              f"{RESULTS}/estimates/": "estimate"}


def _forced(target):
    """Whether this invocation reruns the job writing `target` anyway (--forceall, --forcerun of it or its rule)."""
    ds = getattr(workflow, "dag_settings", None)
    if ds is None:
        return False
    forced = {os.path.normpath(str(f)) for f in (ds.forcerun or ())}
    producer = next(r for prefix, r in _PRODUCERS.items() if target.startswith(prefix))
    return bool(ds.forceall) or os.path.normpath(target) in forced or producer in forced


def checked_estimate_dirs(wildcards):
    """Rule report's estimate inputs (every model x estimator directory), after checking the files of an
    earlier run that the workflow would trust: Snakemake sees an estimate's directory, not the files in it,
    keeps an output whose time stamp is up to date however damaged, and does not rebuild a deleted one
    while what depends on it is up to date.  A prepared dataset or model that is not a complete .npz, or
    an estimate record (<setting>.json) that does not parse or whose per-chain arrays (<setting>.npz) are
    missing or truncated, or a setting of a finished sweep whose files were deleted, stops the run before any job, one line each naming the file and the --forcerun
    that rebuilds it (logzbench.pipeline.outputs.damaged_outputs); those that this invocation forces are let
    through."""
    problems = [(t, m) for t, m in outputs.damaged_outputs(config, RESULTS) if not _forced(t)]
    if problems:
        targets = " ".join(dict.fromkeys(t for t, _ in problems))
        raise WorkflowError("damaged outputs of an earlier run:\n" + "\n".join(m for _, m in problems)
                            + f"\nrebuild them all with: snakemake --forcerun {targets} (and your usual options)")
    return all_estimate_dirs()


def estimate_settings(wildcards):
    """The settings of every estimate of the model x estimator sweep (logzbench.pipeline.sweep.sweep_settings; the
    params of rule estimate, so changing any of these re-runs the job under Snakemake's default `params`
    rerun trigger)."""
    return sweep.sweep_settings(config, wildcards.model, wildcards.estimator)


def _is_exact(wildcards):
    """Rule estimate: the exact method (the only estimator without sweep axes, file stem `exact`)."""
    return not registry.estimator(sweep.estimator_method(config, wildcards.estimator)).axes


def resources_for(step):
    return dict(config["resources"].get(step) or {})


# --------------------------------------------------------------------------- cluster resources
# What a cluster executor (workflow/profiles/slurm) asks for, per job; Snakemake's local execution
# ignores all of it but `threads`.  Every rule's resources are
#   cpus_per_task  = the job's threads (config `threads`; --set-threads applies), so that a profile's
#                    default-resources cannot give a 4- or 8-thread job one CPU,
#   gres           = gpu:1 on the rules that run torch on the config's `device` (train_model,
#                    estimate, diagnose) when it is cuda, cuda:N or auto; nothing for `device: cpu`,
#   mem_mb, runtime, ... = the config's `resources` of the step (they win over all of the above, so
#                    a config may say e.g. gres: "gpu:a100:1");
# anything not set here comes from the profile's default-resources (runtime, mem_mb) or
# --set-resources (which wins over everything).


def uses_gpu():
    """Whether the config's `device` may use a GPU (cuda, cuda:N, auto)."""
    device = str(config.get("device", "cpu"))
    return device == "auto" or device.startswith("cuda")


def _threads_as_cpus(wildcards, threads):
    return threads


def _base_resources(gpu):
    # grouped, a group job's CPUs are its Snakemake --cores (its threads): a cpus_per_task of each job would be
    # summed over the group instead
    base = {"cpus_per_task": _threads_as_cpus} if CLUSTER_GROUP == "none" else {}
    if gpu and uses_gpu():
        base["gres"] = "gpu:1"
    return base


def rule_resources(step, gpu=False):
    """The resources of the rules of `step` (a key of the config's `resources`), as above."""
    own = resources_for(step)
    base = _base_resources(gpu)
    if "gpu" in own or "gpus" in own:  # the config asks for GPUs its own way
        base.pop("gres", None)
    return {**base, **own}


def estimate_threads(wildcards):
    """threads.exact for the exact method, threads.estimate for every other estimator."""
    return config["threads"]["exact" if _is_exact(wildcards) else "estimate"]


def _estimate_resource(key):
    def value(wildcards):
        own, other = ("exact", "estimate") if _is_exact(wildcards) else ("estimate", "exact")
        return resources_for(own).get(key, resources_for(other).get(key))

    return value


def estimate_resources():
    """Rule estimate's resources: resources.exact for the exact method, resources.estimate for the others.
    One rule has one set of resource names, so a name only one of the two sets takes that value in both
    (a callable cannot leave e.g. mem_mb unset for some jobs); names neither sets keep default-resources.
    On top of cpus_per_task and the GPU request of rule_resources."""
    keys = dict.fromkeys([*resources_for("estimate"), *resources_for("exact")])
    base = _base_resources(gpu=True)
    if keys.keys() & {"gpu", "gpus"}:
        base.pop("gres", None)
    return {**base, **{k: _estimate_resource(k) for k in keys}}


# --------------------------------------------------------------------------- repeated trials
TRIALS = config.get("trials") or {}
TRIALS_DIR = f"{RESULTS}/trials"
TRIALS_REPORT_DIR = f"{RESULTS}/report/trials"


def _num_label(x):
    """A float as it appears in file names (0.5 -> 0.5, 1.0 -> 1)."""
    return f"{float(x):g}"


def gaussian_trial_files():
    g = TRIALS.get("gaussian")
    if not g:
        return []
    return [f"{TRIALS_DIR}/gaussian/sigma0={_num_label(s)}.csv" for s in g["sigma0"]]


def grid_trial_files():
    g = TRIALS.get("grid")
    if not g:
        return []
    return [f"{TRIALS_DIR}/grid/{ref}/sigma_pair={_num_label(sp)}.csv"
            for ref in g["references"] for sp in g["sigma_pair"]]


REPORT_DIR = f"{RESULTS}/report"


def learner_models():
    """{model: its training hyperparams} of the models a black-box learner (hyperparams.learner) trains."""
    hps = {m: model_hyperparams(m) for m in config["models"]}
    return {m: hp for m, hp in hps.items() if hp.get("learner")}


def learner_report_plots():
    """The learner figures logzbench.report.learner_plots always draws: plots/<model>_bounds.png of each
    learner-trained model, plots/<dataset>_bounds_vs_ais.png of each dataset with an NVIL- and an
    AVIL-trained RBM (the sample and filter figures depend on files and image shapes: undeclared)."""
    learned = learner_models()
    paired = compared_learner_datasets(
        (model_dataset(m), hp.get("family", "rbm"), hp["learner"]) for m, hp in learned.items())
    return [f"{REPORT_DIR}/plots/{m}_bounds.png" for m in learned] + [
        f"{REPORT_DIR}/plots/{d}_bounds_vs_ais.png" for d in paired]


def bracket_models():
    """The models with a bracket estimate (an estimator whose registry bound is `bracket`: sandwich, bdmc), in
    config order: each gets the report's plots/<model>_bracket.png."""
    bracketed = {m for m, e in sweep.sweep_pairs(config)
                 if registry.estimator(sweep.estimator_method(config, e)).bound == "bracket"}
    return [m for m in config["models"] if m in bracketed]


# --------------------------------------------------------------------------- per-model diagnostics (rule diagnose)
DIAGNOSED_MODELS = diagnose_plan.diagnosed_models(config)


def diagnose_estimate_dirs(wildcards):
    """Rule diagnose's estimates: the model's exact and AIS estimate directories (their records give the
    per-class table its log Z; logzbench.pipeline.diagnose.log_z_for)."""
    return [estimate_dir(wildcards.model, e) for e in diagnose_plan.diagnose_estimators(config, wildcards.model)]


def diagnostic_report_plots():
    """The report's diagnostics figures (logzbench.pipeline.diagnose.diagnostic_figures): plots/<model>_samples.png
    and _annealed_samples.png of each RBM, plots/<model>_filters.png of each continuous model with filters (not of
    a learner-trained model, whose own figures have those names)."""
    return [f"{REPORT_DIR}/plots/{stem}.png" for stem in diagnose_plan.diagnostic_figures(config)]


def trials_report_outputs():
    out = []
    for name, files in (("gaussian", gaussian_trial_files()), ("grid", grid_trial_files())):
        if files:
            out += [f"{TRIALS_REPORT_DIR}/{name}.csv", f"{TRIALS_REPORT_DIR}/{name}.png"]
    return out


def gaussian_settings():
    """One setting per gaussian_trial_files() file, in the same order."""
    g = TRIALS.get("gaussian")
    if not g:
        return []
    return [{"sigma0": float(s), "n": g["n"], "n_trials": g["trials"], "seed": g["seed"]} for s in g["sigma0"]]


def grid_settings():
    """One setting per grid_trial_files() file, in the same order."""
    g = TRIALS.get("grid")
    if not g:
        return []
    return [{"height": g["height"], "width": g["width"], "sigma_pair": float(sp), "reference": ref,
             "sigma_unary": g["sigma_unary"], "n": g["n"], "n_trials": g["trials"], "seed": g["seed"],
             "burn_in": g["burn_in"], "trw_trees": g["trw_trees"]}
            for ref in g["references"] for sp in g["sigma_pair"]]


# --------------------------------------------------------------------------- end of the run
def stop_warm_server():
    """Stop the warm server (logzbench.pipeline.warm) that ran this run's jobs: it stops with the run."""
    if WARM_LOCAL:
        from logzbench.pipeline.warm import stop_server

        stop_server()


def print_dashboard_hint():
    """Where to review the runs: the MLflow UI command and page init_tracking wrote into its sentinel."""
    import json

    try:
        with open(TRACKING_SENTINEL) as f:
            hint = json.load(f).get("mlflow_ui")
    except (OSError, ValueError):
        return
    if hint:
        print(hint)


def figure_pdfs(outputs):
    """The PDF that logzbench.plotting.save_figure writes beside each PNG of `outputs` (every figure is
    saved as both; plotting.figure_paths says the same, but importing plotting here would load torch and
    pandas into every Snakemake process that parses the workflow)."""
    return [p[: -len(".png")] + ".pdf" for p in outputs if p.endswith(".png")]
