"""What identifies a logzbench MLflow run: its deterministic key and the tags it carries.

Every run has a key (tag :data:`KEY_TAG`) built from its settings (:func:`estimate_key`,
:func:`train_key`, :func:`trials_key`), so that re-running a job replaces its run instead of adding
one (:mod:`logzbench.tracking.runs`); an estimate's run is named for people by
:func:`estimate_run_name` (``mnist-rbm20 ais base-rate K=1000 seed=0``) and is the child of its sweep's
parent run (:func:`sweep_key`, :func:`sweep_run_name`: ``mnist-rbm20 ais base-rate``; tag
:data:`PARENT_TAG`), which the MLflow UI shows as a collapsible row over the sweep's K and seeds.  The
tags the MLflow UI groups by (:data:`GROUP_TAG`, :data:`SWEEP_TAG`, :data:`SETTING_TAG`), those the report sets
(:data:`FLAG_TAG`, :data:`FLAG_REASON_TAG`, :data:`FLAGGED_TAG`) and the metrics it adds
(:data:`EXACT_DIFFERENCE_METRICS`) are named here, so the logging, the dashboard's saved views and the
report agree on them.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

#: the MLflow experiment runs go to unless told otherwise
DEFAULT_EXPERIMENT = "logzbench"
KEY_TAG = "logzbench.key"
KIND_TAG = "logzbench.kind"
FLAG_TAG = "logzbench.flag"
FLAGGED_TAG = "logzbench.flagged"
#: the first reason of :data:`FLAG_TAG` in at most :data:`FLAG_REASON_WIDTH` characters (a table column)
FLAG_REASON_TAG = "logzbench.flag_reason"
FLAG_REASON_WIDTH = 80
#: what the MLflow UI groups a run by: its model (estimates and training), ``trials/<experiment>``, ``report``
GROUP_TAG = "logzbench.group"
#: an estimate's sweep family, ``<model> / <estimator> / <init>`` (its K and seeds together, nothing else);
#: a training run: ``<model> / train``; other runs: their :data:`GROUP_TAG`
SWEEP_TAG = "logzbench.sweep"
#: an estimate's key less its seed (the seeds of one setting group together); other runs: their key
SETTING_TAG = "logzbench.setting"
#: ``"true"`` on a sweep's parent run (kind :data:`PARENT_KIND`): a row in the MLflow UI over the estimates of one
#: sweep (their ``mlflow.parentRunId``), no estimate itself; :func:`~logzbench.tracking.runs.find_runs` leaves it
#: out unless asked for it
PARENT_TAG = "logzbench.parent"
#: the :data:`KIND_TAG` of a sweep's parent run
PARENT_KIND = "sweep"
#: MLflow's tag naming a run's parent run (the UI nests the run under it)
MLFLOW_PARENT_TAG = "mlflow.parentRunId"
#: when the run was recorded (ms since the epoch): of a key's runs the last recorded is kept
LOGGED_TAG = "logzbench.logged"
#: the metrics the report sets on an estimate's run whose model has an exact value: metric -> the
#: estimate's own metric it is the difference of (``log_z - exact log Z``, ``mean_test_ll - exact``)
EXACT_DIFFERENCE_METRICS = {"log_z_minus_exact": "log_z", "mean_test_ll_minus_exact": "mean_test_ll"}


# --------------------------------------------------------------------------- run keys
def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def estimate_key(model: str, estimator: str, K: Any = None, init: Any = None, seed: Any = None) -> str:
    """Deterministic key of one estimate: ``estimate/<model>/<estimator>/K<K>/<init>/seed<seed>``.

    Settings an estimator does not use are ``-`` (e.g. ``estimate/m/exact/K-/-/seed-``).
    """
    return f"estimate/{model}/{estimator}/K{_fmt(K)}/{_fmt(init)}/seed{_fmt(seed)}"


def train_key(model: str) -> str:
    """Deterministic key of one training run: ``train/<model>``."""
    return f"train/{model}"


def trials_key(experiment: str, setting: Mapping[str, Any]) -> str:
    """Deterministic key of one repeated-trials setting, e.g. ``trials/grid/reference=trw/sigma_pair=0.5``."""
    return "/".join(["trials", experiment] + [f"{k}={_fmt(v)}" for k, v in setting.items()])


_ESTIMATE_KEY = re.compile(
    r"estimate/(?P<model>.+)/(?P<estimator>[^/]+)/K(?P<K>[^/]*)/(?P<init>[^/]*)/seed(?P<seed>[^/]*)"
)


def _estimate_parts(key: str) -> dict[str, str] | None:
    m = _ESTIMATE_KEY.fullmatch(key)
    return m.groupdict() if m else None


def estimate_run_name(key: str) -> str:
    """The run name of the estimate with ``key`` (:func:`estimate_key`): model, estimator, start
    distribution, K and seed, e.g. ``mnist-rbm20 ais base-rate K=1000 seed=0``; settings the
    estimator does not use are left out (``mnist-rbm20 exact``).  Distinct keys get distinct names; a
    key not of :func:`estimate_key`'s form is its own name less ``estimate/``."""
    p = _estimate_parts(key)
    if p is None:
        return key.removeprefix("estimate/")
    words = [p["model"], p["estimator"]]
    if p["init"] != "-":
        words.append(p["init"])
    words += [f"{k}={p[k]}" for k in ("K", "seed") if p[k] != "-"]
    return " ".join(words)


def estimate_sweep(key: str) -> str:
    """The sweep family (:data:`SWEEP_TAG`) of the estimate with ``key``: ``<model> / <estimator> / <init>``
    (``<model> / <estimator>`` without a start distribution)."""
    p = _estimate_parts(key)
    if p is None:
        return re.sub(r"/K[^/]*/[^/]*/seed[^/]*$", "", key.removeprefix("estimate/")).replace("/", " / ")
    return " / ".join([p["model"], p["estimator"], *([p["init"]] if p["init"] != "-" else [])])


def sweep_key(key: str) -> str:
    """The key of the parent run of the sweep the estimate with ``key`` belongs to:
    ``sweep/<model>/<estimator>/<init>`` (``sweep/<model>/<estimator>`` without a start distribution), one
    per :func:`estimate_sweep`."""
    return "sweep/" + estimate_sweep(key).replace(" / ", "/")


def sweep_run_name(key: str) -> str:
    """The run name of the parent run of the sweep the estimate with ``key`` belongs to: its model, estimator
    and start distribution, e.g. ``mnist-rbm20 ais base-rate`` (the children's names less ``K=`` and
    ``seed=``)."""
    return " ".join(estimate_sweep(key).split(" / "))


def sweep_parent(key: str) -> dict[str, Any] | None:
    """What the parent run of the sweep of the estimate with ``key`` is: ``{"sweep"`` (its
    :data:`SWEEP_TAG`), ``"key"`` (:func:`sweep_key`), ``"name"`` (:func:`sweep_run_name`), ``"params"``
    (model, estimator, init: what every run of the sweep shares)``}``; the argument ``parent`` of
    :func:`logzbench.tracking.runs.log_run`.  ``None`` for an estimate with neither K nor seed (``exact``:
    one run, nothing swept, its own row; a parent would repeat its name)."""
    p = _estimate_parts(key) or {}
    if p and p["K"] == "-" and p["seed"] == "-":
        return None
    params = {k: p.get(k) for k in ("model", "estimator", "init")}
    return {
        "sweep": estimate_sweep(key),
        "key": sweep_key(key),
        "name": sweep_run_name(key),
        "params": {k: v for k, v in params.items() if v not in (None, "-")},
    }
