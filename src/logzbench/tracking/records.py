"""What each kind of run logs: an estimate, a training run, a setting of repeated trials.

Each kind turns its record into MLflow params, metrics, tags and artifacts and logs them as one
run under its key (:func:`logzbench.tracking.runs.log_run`): an estimate (:func:`log_estimate`: its
settings, log Z and the test log-likelihood with their standard errors, ESS, the flags decidable
from it alone, an annealing schedule, a sandwich / BDMC bracket), a trained model
(:func:`log_training`: hyperparameters and the per-epoch history) and one setting of a
repeated-trials experiment (:func:`log_trials`: every trial as a metric step).  Runs are grouped in
the MLflow UI by model (:data:`~logzbench.tracking.keys.GROUP_TAG`), by sweep family (model, estimator,
start: :data:`~logzbench.tracking.keys.SWEEP_TAG`) and by setting less the seed
(:data:`~logzbench.tracking.keys.SETTING_TAG`); an estimate's run is named by its settings
(:func:`~logzbench.tracking.keys.estimate_run_name`) and nested under its sweep's parent run
(:func:`~logzbench.tracking.keys.sweep_parent`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .keys import (
    DEFAULT_EXPERIMENT,
    FLAG_REASON_TAG,
    FLAG_TAG,
    FLAGGED_TAG,
    GROUP_TAG,
    SETTING_TAG,
    SWEEP_TAG,
    estimate_key,
    estimate_run_name,
    estimate_sweep,
    sweep_parent,
    train_key,
    trials_key,
)
from .runs import TrackingSession, _finite, flag_reason, log_run


# --------------------------------------------------------------------------- estimates
def _res(record: Mapping[str, Any]) -> Mapping[str, Any]:
    return record.get("result", record)


def estimate_params(record: Mapping[str, Any]) -> dict[str, Any]:
    """MLflow params of an estimate record (see ``workflow/scripts/estimate.py``)."""
    res = _res(record)
    settings = res.get("settings") or {}
    keys = (
        "model",
        "dataset",
        "estimator",
        "method",
        "K",
        "chains",
        "init",
        "seed",
        "schedule",
        "device",
        "n_examples",
        "csl_mode",
        "burn_in",
        "thin",
        "n_visible",
        "n_hidden",
        "family",
        "hidden_sizes",
        "is_samples",
        "step_size",
        "gamma",
        "mh_sigma",
        "proposal_scale",
        "code_version",
        # the schedule's and the sandwich's settings (recorded where they are used:
        # logzbench.pipeline.sweep.setting_keys())
        "sweeps_per_beta",
        "pilot_chains",
        "target_ess",
        "target_width",
        "max_sweeps",
        "confidence",
        "time_budget",
        # the papers' protocol switches (RAISE's control variate, Upadhya & Sastry's pooled CSL chains)
        "control_variate",
        "csl_protocol",
        # the mixture reference (init mixture): components as given, and as fitted and how chosen
        "mixture_components",
        "reference_components",
        "reference_components_chosen",
    )
    out = {k: record.get(k, settings.get(k)) for k in keys}
    out["method"] = out["method"] or res.get("estimator")
    out["chains"] = out["chains"] if out["chains"] is not None else res.get("n_chains")
    return {k: v for k, v in out.items() if v is not None}


def estimate_metrics(record: Mapping[str, Any]) -> dict[str, float]:
    """MLflow metrics of an estimate record: log Z, its s.e., ESS, mean test LL, timings."""
    res = _res(record)
    m = {
        "log_z": res.get("log_z"),
        "log_z_stderr": res.get("log_z_stderr"),
        "ess": res.get("ess"),
        "khat": res.get("khat"),  # Pareto k-hat of the log-weights (> 0.7: heavy tails)
        "mean_test_ll": res.get("mean_log_likelihood"),
        "mean_test_ll_stderr": res.get("mean_log_likelihood_stderr"),
        "seconds": res.get("seconds"),
        "sweeps_per_second": res.get("sweeps_per_second"),
        "n_sweeps": res.get("n_sweeps"),
        "total_sweeps": res.get("total_sweeps"),
        "n_examples": res.get("n_examples"),
    }
    extra = res.get("extra") or {}
    for k in (
        "mean_log_f_is",
        "mean_log_f_is_stderr",
        "mean_log_f_is_jensen_gap",
        "mean_log_f_mean_field",
        "is_ess_mean",
        "is_ess_min",
        "is_khat_median",
        "log_f_seconds",
    ):  # deep models: the importance-sampled log f(v)
        m[k] = extra.get(k)
    for k in ("pilot_sweeps", "pilot_K", "pilot_seconds", "pilot_resampled"):  # the adaptive schedule's pilot run
        m[k] = extra.get(k)
    for k in ("Lambda", "round_trips", "log_z_forward", "log_z_backward"):  # parallel tempering (pt): its mixing
        m[k] = extra.get(k)
    # the tuned schedule's rounds and the barrier they measured (logzbench.estimators.tuned.TuneResult.extras)
    for k in (
        "tuned_rounds",
        "tuned_barrier",
        "tuned_G",
        "tuned_barrier_lagged",
        "tuned_G_lagged",
        "tuned_lag_inflation",
        "tuned_lag_inflation_ar1",
    ):
        m[k] = extra.get(k)
    for i, share in enumerate(extra.get("tuned_beta_deciles") or []):  # share of the steps in each tenth of beta
        m[f"tuned_beta_decile_{i}"] = share
    for k in ("reference_em_passes", "reference_heldout_log_lik", "reference_train_log_lik"):  # the mixture's fit
        m[k] = extra.get(k)
    chains = res.get("n_chains")
    if _finite(m["ess"]) and _finite(chains) and float(chains) > 0:
        m["ess_fraction"] = float(m["ess"]) / float(chains)
    ci = res.get("log_z_ci")
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        m["log_z_ci_low"], m["log_z_ci_high"] = ci
    out = {k: float(v) for k, v in m.items() if _finite(v)}
    # a bracket's numbers (sandwich, BDMC) under their JSON names; those above keep theirs
    out.update({k: v for k, v in bracket_metrics(estimate_bracket(record)).items() if k not in out})
    return out


#: the artifact holding an annealed estimate's inverse temperatures, one per line (a schedule file:
#: ``--schedule FILE`` / config ``schedule`` reruns it)
SCHEDULE_ARTIFACT = "schedule.txt"
#: the artifact holding a bracket's rounds of K doubling (``history``), as JSON
BRACKET_HISTORY_ARTIFACT = "bracket_history.json"


def estimate_bracket(record: Mapping[str, Any]) -> dict[str, Any]:
    """The bracket of a sandwich / BDMC estimate record (``result.extra.bracket``, else the bracket's keys the
    result holds at its top level: :meth:`EstimateResult.to_dict` copies them there); ``{}`` for other
    estimates."""
    res = _res(record)
    bracket = (res.get("extra") or {}).get("bracket")
    if isinstance(bracket, Mapping):
        return dict(bracket)
    if any(f"{q}_lower" in res for q in ("log_z", "mean_log_likelihood")):
        keys = [k for k in res if re.match(r"(log_z|mean_log_likelihood)_(lower|upper|width|crossed)", k)]
        keys += [
            k
            for k in (
                "confidence",
                "noise_z",
                "target_width",
                "width_reached",
                "quantity",
                "K",
                "total_sweeps",
                "K_needed",
                "reason",
                "stopped_by",
                "time_budget",
                "history",
            )
            if k in res
        ]
        return {k: res[k] for k in keys}
    return {}


def bracket_metrics(bracket: Mapping[str, Any]) -> dict[str, float]:
    """MLflow metrics of a bracket: its numbers under their JSON names (``log_z_lower``, ``log_z_upper``,
    their ``_estimate``, ``_stderr`` and ``_slack``, ``log_z_width``, the same of ``mean_log_likelihood``,
    ``confidence``, ``noise_z``, ``target_width``, ``K``, ``total_sweeps``, ``K_needed``); booleans and unknown
    values are left out."""
    return {
        str(k): float(v) for k, v in bracket.items() if k != "history" and not isinstance(v, (bool, str)) and _finite(v)
    }


def bracket_tags(bracket: Mapping[str, Any]) -> dict[str, str]:
    """MLflow tags of a bracket: its words and booleans under their JSON names (``log_z_lower_estimator``,
    ``log_z_lower_guaranteed`` = ``true`` / ``false``, ``log_z_lower_of``, ``log_z_lower_guarantee``, ...,
    ``log_z_crossed``, ``width_reached``, ``quantity``, ``reason``); unknown values are left out."""
    out = {}
    for k, v in bracket.items():
        if k == "history" or v is None:
            continue
        if isinstance(v, bool):
            out[str(k)] = "true" if v else "false"
        elif isinstance(v, str):
            out[str(k)] = v[:5000]
    return out


def _artifact_items(artifacts: Iterable | Mapping | None) -> dict[str, str | None]:
    """``artifacts`` (files, or a mapping file -> artifact sub-directory) as a mapping."""
    if artifacts is None:
        return {}
    if isinstance(artifacts, Mapping):
        return {str(k): v for k, v in artifacts.items()}
    return {str(a): None for a in artifacts}


def _schedule_of(items: Mapping[str, str | None]) -> Any:
    """The ``schedule`` array of the first per-chain arrays file (``.npz``) among the artifacts, else ``None``."""
    import numpy as np

    for path in items:
        if path.endswith(".npz") and Path(path).is_file():
            try:
                with np.load(path, allow_pickle=False) as z:
                    if "schedule" in z.files:
                        return np.asarray(z["schedule"], dtype=np.float64)
            except Exception:
                return None
    return None


def one_reason(text: Any) -> str:
    """``text`` as one flag reason: one line, and no ``"; "``, which joins a row's reasons."""
    return " ".join(str(text).split()).replace("; ", ", ")


def refused_reason(refusal: Any) -> str | None:
    """The flag of a setting its estimator refused (a record's ``refused``: the reason), else ``None``."""
    if not refusal:  # a record without one; per_run.csv's column is "" there
        return None
    return f"refused: {one_reason(refusal)}"


def estimate_flags(record: Mapping[str, Any], *, ess_fraction: float = 0.1, khat: float = 0.7) -> list[str]:
    """Flags decidable from one estimate alone (refused by its estimator; low ESS; heavy-tailed
    log-weights: Pareto k-hat above ``khat``)."""
    res = _res(record)
    flags = [f for f in (refused_reason(record.get("refused")),) if f]
    ess, chains = res.get("ess"), res.get("n_chains")
    if _finite(ess) and _finite(chains) and float(chains) > 0 and float(ess) < ess_fraction * float(chains):
        unit = "samples" if (record.get("method") or res.get("estimator")) == "csl" else "chains"
        flags.append(
            f"low ESS: {float(ess):.3g} of {int(chains)} {unit} ({100 * float(ess) / float(chains):.2g}% "
            f"< {100 * ess_fraction:g}%)"
        )
    k = res.get("khat")
    if _finite(k) and float(k) > khat:
        flags.append(
            f"heavy-tailed log-weights: Pareto k-hat {float(k):.2f} > {khat:g}, "
            "the standard error understates the uncertainty"
        )
    return flags


def log_estimate(
    record: Mapping[str, Any],
    *,
    uri: str | None = None,
    experiment_name: str = DEFAULT_EXPERIMENT,
    artifacts: Iterable | Mapping | None = None,
    ess_fraction: float = 0.1,
    extra_tags: Mapping[str, Any] | None = None,
    session: TrackingSession | None = None,
    start_time: Any = None,
    end_time: Any = None,
    schedule: Any = None,
) -> str:
    """Log one estimate record (``{"model", "estimator", "K", ..., "result": EstimateResult.to_dict()}``
    or a flat ``to_dict()`` with those keys) as an MLflow run; returns the run id.

    The run starts and ends when the estimate did: ``start_time`` / ``end_time``, else the record's
    ``started_at`` / ``finished_at`` (:func:`logzbench.pipeline.jobs.run_estimate`), else now.  It is grouped
    by its model (:data:`GROUP_TAG`), its sweep family (:data:`SWEEP_TAG`: model, estimator, start) and its
    setting less the seed (:data:`SETTING_TAG`), and named by its settings (:func:`estimate_run_name`, e.g.
    ``mnist-rbm20 ais base-rate K=1000 seed=0``) and is a child of its sweep's parent run
    (:func:`~logzbench.tracking.keys.sweep_parent`: ``mnist-rbm20 ais base-rate``, found or created); its flags are
    tagged (:data:`FLAG_TAG`, the first in short
    :data:`FLAG_REASON_TAG`, :data:`FLAGGED_TAG`).

    An annealed estimate's inverse temperatures (``schedule``, else the ``schedule`` array of the per-chain
    arrays ``.npz`` among ``artifacts``) are logged as the artifact :data:`SCHEDULE_ARTIFACT`, one per line.
    A bracket (sandwich, BDMC: :func:`estimate_bracket`) logs its numbers as metrics
    (:func:`bracket_metrics`), its words and booleans as tags (:func:`bracket_tags`), all under their JSON
    names, and its ``history`` as the artifact :data:`BRACKET_HISTORY_ARTIFACT`."""
    import tempfile

    res = _res(record)
    params = estimate_params(record)
    key = record.get("key") or estimate_key(
        params.get("model", "?"),
        params.get("estimator", params.get("method", "?")),
        params.get("K"),
        params.get("init"),
        params.get("seed"),
    )
    flags = estimate_flags(record, ess_fraction=ess_fraction)
    tags = {
        "logzbench.model": params.get("model"),
        "logzbench.dataset": params.get("dataset"),
        "logzbench.estimator": params.get("estimator"),
        "logzbench.method": params.get("method") or res.get("estimator"),
        FLAGGED_TAG: "true" if flags else "false",
        FLAG_TAG: "; ".join(flags) if flags else None,
        FLAG_REASON_TAG: flag_reason(flags),
        GROUP_TAG: params.get("model"),
        SWEEP_TAG: estimate_sweep(key),
        SETTING_TAG: re.sub(r"/seed[^/]*$", "", key.removeprefix("estimate/")),
    }
    bracket = estimate_bracket(record)
    tags.update({k: v for k, v in bracket_tags(bracket).items() if k not in tags})
    tags.update(extra_tags or {})
    items = _artifact_items(artifacts)
    if schedule is None:
        schedule = _schedule_of(items)
    with tempfile.TemporaryDirectory(prefix="logzbench-artifacts-") as tmp:
        if schedule is not None:
            import numpy as np

            path = Path(tmp) / SCHEDULE_ARTIFACT
            np.savetxt(path, np.asarray(schedule, dtype=np.float64).ravel(), fmt="%.17g")
            items[str(path)] = None
        if isinstance(bracket.get("history"), list):
            path = Path(tmp) / BRACKET_HISTORY_ARTIFACT
            path.write_text(json.dumps(bracket["history"], indent=1, default=_json_default))
            items[str(path)] = None
        return log_run(
            key,
            uri=uri,
            experiment_name=experiment_name,
            kind="estimate",
            params=params,
            metrics=estimate_metrics(record),
            tags=tags,
            artifacts=items or None,
            run_name=estimate_run_name(key),
            session=session,
            start_time=start_time if start_time is not None else record.get("started_at"),
            end_time=end_time if end_time is not None else record.get("finished_at"),
            parent=sweep_parent(key),
        )


def _json_default(v: Any) -> Any:
    """JSON of numpy scalars and arrays (a history built in memory, not read back from a record)."""
    if hasattr(v, "tolist"):
        return v.tolist()
    return str(v)


# --------------------------------------------------------------------------- training
def training_metrics(history: Sequence[Mapping[str, Any]], step_key: str = "epoch") -> list[dict[str, float]]:
    """Per-epoch metrics of a training history (numeric entries only), keyed by ``step_key`` (a black-box
    learner's history: ``iteration``)."""
    out = []
    for i, row in enumerate(history):
        d = {k: float(v) for k, v in row.items() if k != step_key and _finite(v)}
        d[step_key] = int(row.get(step_key, i + 1))
        out.append(d)
    return out


def log_training(
    model: str,
    *,
    hyperparams: Mapping[str, Any],
    history: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Any] | None = None,
    uri: str | None = None,
    experiment_name: str = DEFAULT_EXPERIMENT,
    dataset: str | None = None,
    artifacts: Iterable | Mapping | None = None,
    extra_params: Mapping[str, Any] | None = None,
    start_time: Any = None,
    end_time: Any = None,
    step_key: str = "epoch",
) -> str:
    """Log one training run: hyperparameters as params, the history as per-epoch metrics
    (``step = epoch``; a black-box learner's ``step_key="iteration"``), the final values of ``summary``
    as metrics.  The run starts and ends when the training did (``start_time``, ``end_time``; default
    now) and is grouped with its model's estimates (:data:`GROUP_TAG`)."""
    from ..utils import code_version

    params = {
        "model": model,
        "dataset": dataset,
        "code_version": code_version(),
        **dict(hyperparams),
        **dict(extra_params or {}),
    }
    params = {k: v for k, v in params.items() if v is not None}
    return log_run(
        train_key(model),
        uri=uri,
        experiment_name=experiment_name,
        kind="train",
        params=params,
        metrics=dict(summary or {}),
        step_metrics=training_metrics(history, step_key),
        step_key=step_key,
        tags={"logzbench.model": model, "logzbench.dataset": dataset, GROUP_TAG: model, SWEEP_TAG: f"{model} / train"},
        artifacts=artifacts,
        run_name=train_key(model),
        start_time=start_time,
        end_time=end_time,
    )


# --------------------------------------------------------------------------- repeated trials
def log_trials(
    experiment: str,
    setting: Mapping[str, Any],
    trials,
    summary,
    *,
    uri: str | None = None,
    experiment_name: str = DEFAULT_EXPERIMENT,
    params: Mapping[str, Any] | None = None,
    artifacts: Iterable | Mapping | None = None,
    start_time: Any = None,
    end_time: Any = None,
) -> str:
    """Log one setting of a repeated-trials experiment (Liu et al. Figs 1-2) as one MLflow run.

    Every trial is recorded: per method ``log_z/<method>``, ``error/<method>`` and
    ``stderr/<method>`` at ``step = trial`` (the metric history in the MLflow UI), plus the
    trial's ``truth``.  The summary over trials gives ``bias/<method>``, ``mse/<method>``,
    ``sd/<method>`` and ``coverage/<method>`` as metrics.

    Parameters
    ----------
    experiment : str
        ``"gaussian"`` or ``"grid"`` (see :mod:`logzbench.trials`).
    setting : mapping
        The setting's values (e.g. ``{"sigma0": 0.5}``); params and part of the key.
    trials : pandas.DataFrame
        Long per-trial table with ``trial``, ``method``, ``log_z``, ``log_z_stderr``, ``error``, ``truth``.
    summary : pandas.DataFrame
        Per-method summary with ``method``, ``bias``, ``mse``, ``sd``, ``coverage``.
    start_time, end_time : optional
        When the setting's trials ran (see :func:`log_run`; default now).  The run is grouped as
        ``trials/<experiment>`` (:data:`GROUP_TAG`).
    """
    from ..utils import code_version

    steps: dict[int, dict[str, float]] = {}
    for r in trials.itertuples(index=False):
        d = steps.setdefault(int(r.trial), {"trial": int(r.trial), "truth": float(r.truth)})
        d[f"log_z/{r.method}"] = float(r.log_z)
        d[f"error/{r.method}"] = float(r.error)
        d[f"stderr/{r.method}"] = float(r.log_z_stderr)
    metrics: dict[str, float] = {}
    for r in summary.to_dict("records"):
        for k in ("bias", "mse", "sd", "coverage"):
            if k in r:
                metrics[f"{k}/{r['method']}"] = r[k]
    all_params = {
        "experiment": experiment,
        **dict(setting),
        "n_trials": len(steps),
        "code_version": code_version(),
        **dict(params or {}),
    }
    key = trials_key(experiment, setting)
    return log_run(
        key,
        uri=uri,
        experiment_name=experiment_name,
        kind="trials",
        params={k: v for k, v in all_params.items() if v is not None},
        metrics=metrics,
        step_metrics=list(steps.values()),
        step_key="trial",
        tags={"logzbench.experiment": experiment, GROUP_TAG: f"trials/{experiment}", SWEEP_TAG: f"trials/{experiment}"},
        artifacts=artifacts,
        run_name=key.removeprefix("trials/"),
        start_time=start_time,
        end_time=end_time,
    )
