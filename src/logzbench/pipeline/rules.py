"""What the workflow's rules read beyond the plan's sweeps (importable without torch): where the data mirror
lies, which jobs share a cluster job, whether jobs run forked from the warm server, each rule's threads and
resources, the repeated trials' files and settings, the report's figures.

``workflow/rules/common.smk`` builds the :class:`~logzbench.pipeline.plan.Plan` once and asks this module the
rest; each function takes the plan (or the one setting it needs) and the file names' roots.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Mapping

from . import diagnose
from .plan import Plan

__all__ = [
    "data_mirror",
    "diagnostic_report_plots",
    "estimate_resources",
    "estimate_threads",
    "figure_pdfs",
    "gaussian_settings",
    "gaussian_trial_files",
    "grid_settings",
    "grid_trial_files",
    "job_groups",
    "print_dashboard_hint",
    "rule_resources",
    "trials_report_outputs",
    "warm_start",
]


def data_mirror(config: Mapping[str, Any], repo_root: Path) -> str | None:
    """Mirror directory: $LOGZBENCH_DATA_MIRROR, else config ``data_mirror`` (relative to the repo root), with
    every symbolic link resolved."""
    value = os.environ.get("LOGZBENCH_DATA_MIRROR") or config.get("data_mirror")
    if not value:
        return None
    p = Path(value)
    return os.path.realpath(p if p.is_absolute() else repo_root / p)


# --------------------------------------------------------------------------- cluster job groups
#: config ``cluster_group`` ``model``: one cluster job per model (its training, estimates and diagnostics), one
#: for every dataset's preparation, one for the report and the repeated trials
_MODEL_GROUPS = {
    "prepare_dataset": "datasets",
    "train_model": "model-{model}",
    "estimate": "model-{model}",
    "diagnose": "model-{model}",
    "report": "report",
    "trials_gaussian": "report",
    "trials_grid": "report",
    "report_trials": "report",
}


def job_groups(cluster_group: str) -> dict[str, str]:
    """``{rule: group}`` under config ``cluster_group``: ``none``, a cluster job per rule instance; ``model``
    (:data:`_MODEL_GROUPS`); ``workflow``, one for everything."""
    return {"none": {}, "model": _MODEL_GROUPS, "workflow": dict.fromkeys(_MODEL_GROUPS, "logzbench")}[cluster_group]


def warm_start(setting: Any, cluster_group: str, local_exec: bool, remote_exec: bool, local_rule: bool = False) -> bool:
    """Whether jobs run in processes forked from a warm server (:mod:`logzbench.pipeline.warm`): config
    ``warm_start``; ``auto`` = where Snakemake itself runs the jobs, and inside the group jobs of a
    ``cluster_group`` (several jobs in one allocation), not in the one-job allocations of ``cluster_group: none``.
    A ``local_rule`` runs in the Snakemake process's machine even on a cluster: a server there would serve it
    alone."""
    if setting == "auto":
        here = bool(local_exec) and not remote_exec
        return here if local_rule else (here or cluster_group != "none")
    return bool(setting)


# --------------------------------------------------------------------------- threads and resources
def _resources_for(config: Mapping[str, Any], step: str) -> dict[str, Any]:
    return dict(config["resources"].get(step) or {})


def _uses_gpu(config: Mapping[str, Any]) -> bool:
    """Whether the config's ``device`` may use a GPU (cuda, cuda:N, auto)."""
    device = str(config.get("device", "cpu"))
    return device == "auto" or device.startswith("cuda")


def _threads_as_cpus(wildcards, threads):
    return threads


def _base_resources(config: Mapping[str, Any], gpu: bool, own_keys) -> dict[str, Any]:
    # grouped, a group job's CPUs are its Snakemake --cores (its threads): a cpus_per_task of each job would be
    # summed over the group instead
    base: dict[str, Any] = {"cpus_per_task": _threads_as_cpus} if config.get("cluster_group", "none") == "none" else {}
    if gpu and _uses_gpu(config) and not set(own_keys) & {"gpu", "gpus"}:  # else the config asks its own way
        base["gres"] = "gpu:1"
    return base


def rule_resources(config: Mapping[str, Any], step: str, gpu: bool = False) -> dict[str, Any]:
    """The resources of the rules of ``step`` (a key of the config's ``resources``): ``cpus_per_task`` = the
    job's threads (without a ``cluster_group``), ``gres: gpu:1`` on a rule that runs torch on a ``device`` that
    may be a GPU, then the config's ``resources`` of the step, which win."""
    own = _resources_for(config, step)
    return {**_base_resources(config, gpu, own), **own}


def estimate_threads(plan: Plan) -> Callable:
    """Rule estimate's threads: threads.exact for the exact method, threads.estimate for every other estimator."""
    threads = plan.config["threads"]
    return lambda wildcards: threads["exact" if plan.is_exact(wildcards.estimator) else "estimate"]


def estimate_resources(plan: Plan) -> dict[str, Any]:
    """Rule estimate's resources: resources.exact for the exact method, resources.estimate for the others.
    One rule has one set of resource names, so a name only one of the two sets takes that value in both
    (a callable cannot leave e.g. mem_mb unset for some jobs); names neither sets keep default-resources.
    On top of cpus_per_task and the GPU request of :func:`rule_resources`."""
    sets = {step: _resources_for(plan.config, step) for step in ("estimate", "exact")}
    keys = dict.fromkeys([*sets["estimate"], *sets["exact"]])

    def value(key):
        def of(wildcards):
            own, other = ("exact", "estimate") if plan.is_exact(wildcards.estimator) else ("estimate", "exact")
            return sets[own].get(key, sets[other].get(key))

        return of

    return {**_base_resources(plan.config, True, keys), **{k: value(k) for k in keys}}


# --------------------------------------------------------------------------- repeated trials
def _num_label(x) -> str:
    """A float as it appears in file names (0.5 -> 0.5, 1.0 -> 1)."""
    return f"{float(x):g}"


def _trials(config: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    return (config.get("trials") or {}).get(name) or None


def gaussian_trial_files(config: Mapping[str, Any], trials_dir: str) -> list[str]:
    g = _trials(config, "gaussian")
    return [f"{trials_dir}/gaussian/sigma0={_num_label(s)}.csv" for s in g["sigma0"]] if g else []


def grid_trial_files(config: Mapping[str, Any], trials_dir: str) -> list[str]:
    g = _trials(config, "grid")
    if not g:
        return []
    return [
        f"{trials_dir}/grid/{ref}/sigma_pair={_num_label(sp)}.csv" for ref in g["references"] for sp in g["sigma_pair"]
    ]


def gaussian_settings(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One setting per :func:`gaussian_trial_files` file, in the same order."""
    g = _trials(config, "gaussian")
    if not g:
        return []
    return [{"sigma0": float(s), "n": g["n"], "n_trials": g["trials"], "seed": g["seed"]} for s in g["sigma0"]]


def grid_settings(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One setting per :func:`grid_trial_files` file, in the same order."""
    g = _trials(config, "grid")
    if not g:
        return []
    return [
        {
            "height": g["height"],
            "width": g["width"],
            "sigma_pair": float(sp),
            "reference": ref,
            "sigma_unary": g["sigma_unary"],
            "n": g["n"],
            "n_trials": g["trials"],
            "seed": g["seed"],
            "burn_in": g["burn_in"],
            "trw_trees": g["trw_trees"],
        }
        for ref in g["references"]
        for sp in g["sigma_pair"]
    ]


def trials_report_outputs(config: Mapping[str, Any], trials_dir: str, report_dir: str) -> list[str]:
    """The tables and figures of rule report_trials: ``<name>.csv`` and ``<name>.png`` of each experiment."""
    out = []
    for name, files in (("gaussian", gaussian_trial_files), ("grid", grid_trial_files)):
        if files(config, trials_dir):
            out += [f"{report_dir}/{name}.csv", f"{report_dir}/{name}.png"]
    return out


# --------------------------------------------------------------------------- the report's figures
def diagnostic_report_plots(plan: Plan, report_dir: str) -> list[str]:
    """The report's diagnostics figures (:func:`logzbench.pipeline.diagnose.diagnostic_figures`):
    plots/<model>_samples.png and _annealed_samples.png of each RBM, plots/<model>_filters.png of each continuous
    model with filters (not of a learner-trained model, whose own figures have those names)."""
    return [f"{report_dir}/plots/{stem}.png" for stem in diagnose.diagnostic_figures(plan)]


def figure_pdfs(outputs) -> list[str]:
    """The PDF that :func:`logzbench.plotting.save_figure` writes beside each PNG of ``outputs`` (every figure is
    saved as both; :func:`logzbench.plotting.figure_paths` says the same, but importing plotting here would load
    torch and pandas into every Snakemake process that parses the workflow)."""
    return [p[: -len(".png")] + ".pdf" for p in outputs if p.endswith(".png")]


def print_dashboard_hint(sentinel: str) -> None:
    """Where to review the runs: the MLflow UI command and page rule init_tracking wrote into its sentinel."""
    try:
        with open(sentinel) as f:
            hint = json.load(f).get("mlflow_ui")
    except (OSError, ValueError):
        return
    if hint:
        print(hint)
