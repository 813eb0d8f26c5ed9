# Shared definitions: the config checked and read once into its plan (logzbench.pipeline.plan), the settings the
# rules read (logzbench.pipeline.rules), wildcard constraints and the input functions.
#
# What the config means -- each model's family and hyperparameters, the estimators run on it, the jobs of their
# sweeps, each job's settings -- is the plan's (built by logzbench.pipeline.sweep, checked by
# logzbench.pipeline.config_schema and logzbench.pipeline.config; unit-tested in tests/test_sweep.py and
# tests/test_plan.py); which estimators and families exist is logzbench.registry's.  None of these imports torch.

import os
import re
import sys
from pathlib import Path

from logzbench.errors import ConfigError, TrackingError
from logzbench.pipeline import diagnose, outputs, plan, rules
from logzbench.pipeline import usage as job_usage
from logzbench.pipeline.warm_common import ENV_WORKFLOW as WARM_JOBS_ENV
from logzbench.report.compared import learner_report_plots


def _load_plan():
    """The config Snakemake loaded, checked before anything walks it and completed (logzbench.pipeline.config_schema.
    load_config: its size with its YAML aliases expanded, the --config values' numbers, the schema, NaN and inf
    refused, defaults filled in; the estimator entries' options), then read into its plan (logzbench.pipeline.plan.
    load: the checks beyond the schema, every model and estimator entry worked out once); its warnings printed."""
    import yaml

    schema = yaml.safe_load((Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml").read_text())
    try:
        p = plan.from_workflow_config(config, schema, workflow.config_settings.config)
    except (ConfigError, TrackingError) as exc:
        raise WorkflowError(str(exc))
    for w in p.warnings:
        print(f"logzbench: warning: {w}", file=sys.stderr)
    return p


PLAN = _load_plan()

# Everything outside the working directory is resolved against the repository root.
REPO_ROOT = Path(workflow.basedir).resolve()
# The software of every rule (used with --use-conda).  Its pip section installs this repository's package from
# ${LOGZBENCH_REPO}, set here (an output of the workflow, not an input the user must provide): Snakemake copies
# the file into the conda prefix before creating the environment, so a path relative to workflow/envs/ would not
# resolve.
CONDA_ENV = "../envs/logzbench.yaml"
os.environ.update(LOGZBENCH_REPO=str(REPO_ROOT))

RESULTS = "results"
REPORT_DIR = f"{RESULTS}/report"
TRIALS_DIR = f"{RESULTS}/trials"
TRIALS_REPORT_DIR = f"{RESULTS}/report/trials"
TRACKING_SENTINEL = f"{RESULTS}/tracking/store.json"
TRACKING = dict(PLAN.tracking)


def log_file(name):
    """The log of job `name` (e.g. "estimate/{model}/{estimator}"): results/logs/<name>.log."""
    return job_usage.log_file(RESULTS, name)


def benchmark_file(name):
    """Snakemake's benchmark of job `name`: results/benchmarks/<name>.tsv, the rule's own process (a job forked
    from the warm server writes its own process's usage to <name>.job.tsv beside it)."""
    return job_usage.benchmark_file(RESULTS, name)


# The jobs find the mirror in $LOGZBENCH_DATA_MIRROR (the data loaders' default), set here in every Snakemake
# process (a cluster job's too), not in a rule's params: where the mirror lies is not what the data are (every
# file is checked against its sha256), so the same mirror named another way, or moved, reruns nothing.
MIRROR = rules.data_mirror(config, REPO_ROOT)
if MIRROR:  # (set, as LOGZBENCH_REPO above: the envvars directive is for variables a workflow requires)
    os.environ.update(LOGZBENCH_DATA_MIRROR=MIRROR)

# config `cluster_group` (ignored when Snakemake runs the jobs itself): which jobs share one cluster job
# (logzbench.pipeline.rules.job_groups).  A group's jobs run in parallel within its allocation, whose CPUs are
# Snakemake's --cores and whose memory is the sum of its jobs' mem_mb running side by side; the profile's
# group-components put a group's unconnected parts (the datasets, the trials beside the models) in one job.
CLUSTER_GROUP = config.get("cluster_group", "none")
_GROUPS = rules.job_groups(CLUSTER_GROUP)


def job_group(name):
    """The group of the jobs of `name` under the config's `cluster_group`; None = a cluster job each."""
    return _GROUPS.get(name)


# Whether jobs run forked from a warm server (logzbench.pipeline.rules.warm_start); WARM_LOCAL for the local
# rules (init_tracking) and the server the workflow stops when it ends.  The jobs read it from their environment
# ($LOGZBENCH_WARM_JOBS), not from a param: how a job runs must not make Snakemake rerun it.  This process runs
# the local rules when it submits the others, all of a group job's in one.
_EXEC = (config.get("warm_start", "auto"), CLUSTER_GROUP, workflow.local_exec, workflow.remote_exec)
WARM = rules.warm_start(*_EXEC)
WARM_LOCAL = rules.warm_start(*_EXEC, local_rule=True)
os.environ[WARM_JOBS_ENV] = "1" if (WARM if workflow.remote_exec else WARM_LOCAL) else "0"


def _alternatives(names):
    return "|".join(re.escape(n) for n in names) if names else "(?!x)x"


wildcard_constraints:
    dataset=_alternatives(config["datasets"]),
    model=_alternatives(PLAN.models),
    estimator=_alternatives(PLAN.estimators),


# --------------------------------------------------------------------------- input functions
def estimate_dir(model, estimator):
    """The output of one job of the estimate rule, the files of the model x estimator sweep."""
    return f"{RESULTS}/estimates/{model}/{estimator}"


def dataset_file(wildcards):
    return f"{RESULTS}/data/{PLAN.models[wildcards.model].dataset}.npz"


def estimate_inputs(wildcards):
    """Rule estimate's model and rows: `model`, the trained model's file, or a source model's file (FILE.py of
    FILE.py:NAME; editing it reruns the model's estimates; the job reads the source from its settings);
    `data`, the prepared dataset, or a source model's data.test file, and then `train`, its data.train file
    where given."""
    m = PLAN.models[wildcards.model]
    out = {"model": m.source.path if m.is_source else f"{RESULTS}/models/{m.name}.npz"}
    if m.data_files is None:
        out["data"] = dataset_file(wildcards)
    else:
        out.update(data=m.data_files["test"], **({"train": m.data_files["train"]} if "train" in m.data_files else {}))
    return out


def estimate_settings(wildcards):
    """The settings of every estimate of the model x estimator sweep (the params of rule estimate, so changing
    any of these re-runs the job under Snakemake's default `params` rerun trigger)."""
    return PLAN.settings(wildcards.model, wildcards.estimator)


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
    """Rule report's estimate inputs (every model x estimator directory), after checking the files of an earlier
    run that the workflow would trust (logzbench.pipeline.outputs.damaged_outputs: Snakemake sees an estimate's
    directory, not the files in it, keeps an output whose time stamp is up to date however damaged, and does not
    rebuild a deleted one while what depends on it is up to date): a damaged one stops the run before any job,
    one line each naming the file and the --forcerun that rebuilds it; those this invocation forces pass."""
    problems = [(t, m) for t, m in outputs.damaged_outputs(PLAN, RESULTS) if not _forced(t)]
    if problems:
        targets = " ".join(dict.fromkeys(t for t, _ in problems))
        raise WorkflowError("damaged outputs of an earlier run:\n" + "\n".join(m for _, m in problems)
                            + f"\nrebuild them all with: snakemake --forcerun {targets} (and your usual options)")
    return [estimate_dir(m, e) for m, e in PLAN.sweep_pairs]


def diagnose_estimate_dirs(wildcards):
    """Rule diagnose's estimates: the model's exact and AIS estimate directories (their records give the
    per-class table its log Z; logzbench.pipeline.diagnose.log_z_for)."""
    return [estimate_dir(wildcards.model, e) for e in diagnose.diagnose_estimators(PLAN, wildcards.model)]


# --------------------------------------------------------------------------- end of the run
def stop_warm_server():
    """Stop the warm server (logzbench.pipeline.warm) that ran this run's jobs: it stops with the run."""
    if WARM_LOCAL:
        from logzbench.pipeline.warm import stop_server

        stop_server()
