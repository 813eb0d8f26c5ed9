"""One workflow job, end to end: :func:`run_estimate` (the workflow's rule ``estimate``).

From a job's settings (:func:`logzbench.sweep.job_settings`): load the test rows (and, for
binary models, the training rows) of the model family's data kind, run
:func:`logzbench.api.estimate` with the estimator's registry ``options`` taken from the settings,
write the per-chain arrays (``.npz``), log one MLflow run keyed by the settings, then write the
JSON record (``key``, the settings, ``code_version``, ``arrays``, ``result`` =
:meth:`EstimateResult.to_dict`, ``mlflow_run_id`` when tracked).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

import numpy as np

from . import registry
from .api import estimate
from .data import load_rows
from .tracking import estimate_key
from .utils import code_version, save_npz_atomic, write_json_atomic

__all__ = ["estimate_options", "run_estimate"]


def estimate_options(settings: Mapping[str, Any], *, progress: bool = False) -> dict[str, Any]:
    """Keyword arguments of :func:`logzbench.api.estimate` for a job: the estimator's registry
    ``options`` present in ``settings`` (``K``, ``init`` from the sweep, ``chains``, ``schedule``,
    ...), its ``seed`` (0 without a seed axis), ``device`` and ``progress``."""
    spec = registry.estimator(settings["method"])
    opts = {k: settings[k] for k in spec.options if k in settings}
    opts.update(seed=settings.get("seed") or 0, device=settings.get("device", "cpu"), progress=bool(progress))
    return opts


def run_estimate(settings: Mapping[str, Any], *, model: str | os.PathLike, data: str | os.PathLike,
                 arrays: str | os.PathLike, record_path: str | os.PathLike,
                 tracking: Mapping[str, Any] | None = None, ess_fraction: float = 0.1, progress: bool = False,
                 log: Callable[[str], Any] = print) -> dict[str, Any]:
    """Run one estimate job and write its outputs; return the JSON record.

    Parameters
    ----------
    settings : mapping
        :func:`logzbench.sweep.job_settings` (``method`` and ``family`` are registry names).
    model, data : path
        The model file and the prepared dataset (its ``test`` split; binary models: also ``train``).
    arrays, record_path : path
        Outputs: the arrays ``.npz`` and the JSON record.
    tracking : mapping, optional
        ``{"enabled", "uri", "experiment"}``: log one MLflow run (its id goes into the record).
    ess_fraction : float
        ESS flag threshold of the MLflow run's tags.
    """
    s = dict(settings)
    method = s["method"]
    fam = registry.family(s["family"])
    test = load_rows(data, fam.data_kind, "test")
    # training rows: the data base rate (init="base-rate") and biased CSL's chain starts (binary models)
    train = load_rows(data, fam.data_kind, "train") if fam.data_kind == "binary" else None
    opts = estimate_options(s, progress=progress)
    log(f"{method} on {s['model']} ({fam.name} {s.get('hidden_sizes')}): {opts}")

    res = estimate(model, method, data=test, train_data=train, **opts)

    key = estimate_key(s["model"], s["estimator"], s.get("K"), s.get("init"), s.get("seed"))
    record = {"key": key, **s, "code_version": code_version(), "arrays": str(arrays), "result": res.to_dict()}
    save_npz_atomic(arrays, **(res.arrays() or {"log_weights": np.zeros(0)}))
    if tracking and tracking.get("enabled"):
        from .tracking import log_estimate

        record["mlflow_run_id"] = log_estimate(
            record, uri=tracking.get("uri"), experiment_name=tracking["experiment"], artifacts=[arrays],
            ess_fraction=ess_fraction,
            extra_tags={"logzbench.family": s.get("family", "rbm"), "logzbench.hidden_sizes": s.get("hidden_sizes")})
    write_json_atomic(record_path, record)

    r = record["result"]
    log(f"log Z = {r['log_z']}, mean test LL = {r['mean_log_likelihood']} +- {r['mean_log_likelihood_stderr']}, "
        f"ESS = {r['ess']}, {r['seconds']} s")
    x = r.get("extra") or {}
    if x.get("mean_log_f_is") is not None:
        log(f"log f(v) by importance sampling ({x.get('is_samples')} samples): mean {x['mean_log_f_is']} +- "
            f"{x.get('mean_log_f_is_stderr')} (Jensen gap ~ {x.get('mean_log_f_is_jensen_gap')}); "
            f"mean-field bound {x.get('mean_log_f_mean_field')}")
    return record
