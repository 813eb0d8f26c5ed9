"""MLflow tracking for training and estimation runs.

Design (see ``docs``/the workflow README):

* **One store, created once.**  MLflow's embedded SQLite store loses runs when several
  processes create a fresh ``mlflow.db`` at the same time (each runs the schema
  migrations and all but one die with "duplicate column name").  :func:`init_store`
  therefore creates the store and the experiment exactly once -- the Snakemake workflow
  calls it from a dedicated rule every other job depends on -- and it holds an exclusive
  file lock while doing so, so even two concurrent calls are safe.
* **One live run per key.**  Every run carries a deterministic key (tag
  ``logzbench.key``) built from its settings (:func:`estimate_key`, :func:`train_key`).
  :func:`log_run` creates a fresh run, logs everything, and then deletes every *other*
  live run with the same key, always keeping the newest, so re-running a job replaces its
  run and concurrent writers of the same key converge to exactly one run.
* **Retries.**  Every store operation is retried with exponential backoff when SQLite
  answers "database is locked" (many parallel writers).

The tracking URI is taken from, in order: the ``uri`` argument (e.g. the workflow's
``tracking.uri`` config key), the ``MLFLOW_TRACKING_URI`` environment variable, and the
default ``sqlite:///<absolute working directory>/mlflow.db``.  Artifacts of a new
experiment go to ``mlartifacts/`` next to the SQLite file (or the given directory).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar
from urllib.parse import unquote, urlparse

__all__ = [
    "DEFAULT_EXPERIMENT",
    "KEY_TAG",
    "FLAG_TAG",
    "resolve_tracking_uri",
    "sqlite_path",
    "default_artifact_location",
    "init_store",
    "get_client",
    "estimate_key",
    "train_key",
    "log_run",
    "TrackingSession",
    "log_estimate",
    "log_training",
    "find_runs",
    "set_flags",
    "estimate_flags",
    "estimate_params",
    "estimate_metrics",
    "training_metrics",
]

DEFAULT_EXPERIMENT = "logzbench"
KEY_TAG = "logzbench.key"
KIND_TAG = "logzbench.kind"
FLAG_TAG = "logzbench.flag"
FLAGGED_TAG = "logzbench.flagged"

T = TypeVar("T")

# MLflow's per-request limits for log_batch.
_MAX_METRICS_PER_BATCH = 1000
_MAX_PARAMS_PER_BATCH = 100
_MAX_TAGS_PER_BATCH = 100


# --------------------------------------------------------------------------- URIs
def resolve_tracking_uri(uri: str | None = None, workdir: str | os.PathLike | None = None) -> str:
    """The tracking URI: ``uri``, else ``$MLFLOW_TRACKING_URI``, else a SQLite file in ``workdir``.

    A relative SQLite path (``sqlite:///mlflow.db``) is made absolute against ``workdir``
    (default: the current directory) so that every process of a workflow, whatever its
    working directory, writes the same file.  A bare filesystem path is accepted too.
    """
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"
    base = Path(workdir) if workdir is not None else Path.cwd()
    if uri.startswith("sqlite:///"):
        rest = uri[len("sqlite:///"):]
        if not rest.startswith("/"):  # relative: sqlite:///mlflow.db
            return "sqlite:///" + str((base / rest).resolve())
        return uri
    if "://" not in uri:  # a plain path: file store directory, or a .db file
        p = (base / uri).resolve()
        return "sqlite:///" + str(p) if p.suffix in (".db", ".sqlite", ".sqlite3") else p.as_uri()
    return uri


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else ``None``."""
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///"):].split("?", 1)[0])
    return None


def default_artifact_location(uri: str, artifact_dir: str | os.PathLike | None = None) -> str | None:
    """``file://`` URI of the artifact directory: ``artifact_dir`` (absolute, or relative to
    the SQLite file's directory), default ``mlartifacts/`` next to the SQLite file.  ``None``
    (let MLflow decide) for non-SQLite stores without an explicit directory."""
    db = sqlite_path(uri)
    if artifact_dir is not None:
        p = Path(artifact_dir)
        if not p.is_absolute():
            p = (db.parent if db is not None else Path.cwd()) / p
        return p.resolve().as_uri()
    if db is not None:
        return (db.parent / "mlartifacts").resolve().as_uri()
    return None


# --------------------------------------------------------------------------- retries
def _is_locked_error(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}".lower()
    return any(s in text for s in ("database is locked", "database table is locked", "database is busy",
                                   "sqlite_busy", "unable to open database file"))


def _retry(fn: Callable[..., T], *args: Any, attempts: int = 12, base_delay: float = 0.05,
           max_delay: float = 5.0, **kwargs: Any) -> T:
    """Call ``fn`` and retry with jittered exponential backoff on SQLite lock errors."""
    for i in range(attempts):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - filtered just below
            if i == attempts - 1 or not _is_locked_error(exc):
                raise
            delay = min(max_delay, base_delay * (2 ** i))
            time.sleep(delay * (0.5 + random.random()))
    raise AssertionError("unreachable")  # pragma: no cover


@contextlib.contextmanager
def _store_lock(uri: str) -> Iterator[None]:
    """Exclusive inter-process lock for creating a SQLite store (no-op for other stores)."""
    db = sqlite_path(uri)
    if db is None:
        yield
        return
    import fcntl

    db.parent.mkdir(parents=True, exist_ok=True)
    lock = db.with_name(db.name + ".lock")
    with open(lock, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- store
def get_client(uri: str | None = None):
    """An :class:`mlflow.MlflowClient` on the resolved URI (created with retries)."""
    from mlflow import MlflowClient

    uri = resolve_tracking_uri(uri)
    return _retry(MlflowClient, tracking_uri=uri)


def init_store(uri: str | None = None, experiment_name: str = DEFAULT_EXPERIMENT,
               artifact_location: str | os.PathLike | None = None) -> dict[str, str]:
    """Create the tracking store and the experiment, once.

    Safe to call from several processes at once (an exclusive file lock serialises the
    creation of a SQLite store) and idempotent (an existing store and experiment are
    reused).  Returns ``{"uri", "experiment_name", "experiment_id", "artifact_location"}``.
    """
    uri = resolve_tracking_uri(uri)
    art = default_artifact_location(uri, artifact_location)
    with _store_lock(uri):
        client = get_client(uri)
        exp = _retry(client.get_experiment_by_name, experiment_name)
        if exp is None:
            if art is not None and art.startswith("file://"):
                Path(unquote(urlparse(art).path)).mkdir(parents=True, exist_ok=True)
            try:
                exp_id = _retry(client.create_experiment, experiment_name, artifact_location=art)
            except Exception:  # a concurrent creator won (non-SQLite stores)
                exp = _retry(client.get_experiment_by_name, experiment_name)
                if exp is None:
                    raise
                exp_id = exp.experiment_id
        else:
            if exp.lifecycle_stage == "deleted":
                _retry(client.restore_experiment, exp.experiment_id)
            exp_id = exp.experiment_id
            art = exp.artifact_location
    return {"uri": uri, "experiment_name": experiment_name, "experiment_id": str(exp_id),
            "artifact_location": str(art) if art is not None else ""}


def _experiment_id(client, uri: str, experiment_name: str) -> str:
    exp = _retry(client.get_experiment_by_name, experiment_name)
    if exp is None or exp.lifecycle_stage == "deleted":
        # Store or experiment missing (e.g. mlflow.db deleted by hand): create it under the lock.
        return init_store(uri, experiment_name)["experiment_id"]
    return exp.experiment_id


def _ensure_store(uri: str, experiment_name: str) -> None:
    """Create a missing SQLite store under the lock before any client touches it."""
    db = sqlite_path(uri)
    if db is not None and not db.exists():
        init_store(uri, experiment_name)


# --------------------------------------------------------------------------- keys
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


# --------------------------------------------------------------------------- logging
def _finite(x: Any) -> bool:
    try:
        return x is not None and not isinstance(x, bool) and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _param_value(v: Any) -> str:
    if isinstance(v, (dict, list, tuple)):
        s = json.dumps(v, sort_keys=True, default=str)
    else:
        s = _fmt(v) if v is not None else "None"
    return s[:6000]


def find_runs(key: str | None = None, *, uri: str | None = None, experiment_name: str = DEFAULT_EXPERIMENT,
              kind: str | None = None, client=None, key_prefix: str | None = None) -> list:
    """Live (not deleted) runs of the experiment, optionally only those with ``key`` / ``kind`` / a key
    starting with ``key_prefix`` (``LIKE``: ``_`` and ``%`` in the prefix match more; filter the keys).

    Ordered newest first.  Returns ``[]`` when the experiment does not exist.
    """
    uri = resolve_tracking_uri(uri)
    client = client or get_client(uri)
    exp = _retry(client.get_experiment_by_name, experiment_name)
    if exp is None:
        return []
    filters = []
    if key is not None:
        filters.append(f"tags.`{KEY_TAG}` = '{_quote(key)}'")
    if kind is not None:
        filters.append(f"tags.`{KIND_TAG}` = '{_quote(kind)}'")
    if key_prefix:
        filters.append(f"tags.`{KEY_TAG}` LIKE '{_quote(key_prefix)}%'")
    out, token = [], None
    while True:
        page = _retry(client.search_runs, [exp.experiment_id], filter_string=" and ".join(filters),
                      max_results=1000, order_by=["attributes.start_time DESC"], page_token=token)
        out.extend(page)
        token = getattr(page, "token", None)
        if not token:
            break
    return out


def _quote(s: str) -> str:
    return s.replace("\\", "\\\\").replace("'", "\\'")


def _delete_run(client, run) -> None:
    _retry(client.delete_run, run.info.run_id)
    art = run.info.artifact_uri or ""
    if art.startswith("file://"):
        p = Path(unquote(urlparse(art).path))
        # artifact_uri is <location>/<run_id>/artifacts: remove the run's folder
        target = p.parent if p.name == "artifacts" and p.parent.name == run.info.run_id else p
        shutil.rmtree(target, ignore_errors=True)


def _newest_first(runs: Sequence) -> list:
    return sorted(runs, key=lambda r: (r.info.start_time or 0, r.info.run_id), reverse=True)


def log_run(key: str, *, uri: str | None = None, experiment_name: str = DEFAULT_EXPERIMENT,
            run_name: str | None = None, kind: str = "estimate",
            params: Mapping[str, Any] | None = None, metrics: Mapping[str, Any] | None = None,
            step_metrics: Iterable[Mapping[str, Any]] | None = None, step_key: str = "epoch",
            tags: Mapping[str, Any] | None = None,
            artifacts: Iterable[str | os.PathLike] | Mapping[str, str | os.PathLike] | None = None,
            session: "TrackingSession | None" = None) -> str:
    """Record one run under the deterministic ``key`` and return its run id.

    ``params`` and ``metrics`` are flat mappings (non-finite or ``None`` metrics are
    skipped).  ``step_metrics`` is a sequence of dicts (e.g. a training history), each
    logged at ``step = d[step_key]``.  ``artifacts`` are files (a mapping gives each its
    artifact sub-directory).  Any live run with the same key is replaced: exactly one live
    run per key remains, even under concurrent writers.  Within a :class:`TrackingSession`
    (``session``) the replacing waits for :meth:`TrackingSession.close`, which does it for every
    key of the session with one search.
    """
    if session is not None:
        return session.log_run(key, run_name=run_name, kind=kind, params=params, metrics=metrics,
                               step_metrics=step_metrics, step_key=step_key, tags=tags, artifacts=artifacts)
    with TrackingSession(uri, experiment_name) as own:
        return own.log_run(key, run_name=run_name, kind=kind, params=params, metrics=metrics,
                           step_metrics=step_metrics, step_key=step_key, tags=tags, artifacts=artifacts)


class TrackingSession:
    """Several runs logged with one client (one store connection, one experiment lookup); on
    :meth:`close` (or leaving the ``with`` block) every key logged keeps exactly one live run, the
    newest, found with one search of the session's key prefix.

    A workflow job that runs a whole sweep logs each setting's run as it finishes through one
    session; :func:`log_run` without a session is a session of one run.
    """

    def __init__(self, uri: str | None = None, experiment_name: str = DEFAULT_EXPERIMENT):
        self.uri = resolve_tracking_uri(uri)
        self.experiment_name = experiment_name
        _ensure_store(self.uri, experiment_name)
        self.client = get_client(self.uri)
        self.experiment_id = _experiment_id(self.client, self.uri, experiment_name)
        self.keys: list[str] = []

    def __enter__(self) -> "TrackingSession":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def log_run(self, key: str, *, run_name: str | None = None, kind: str = "estimate",
                params: Mapping[str, Any] | None = None, metrics: Mapping[str, Any] | None = None,
                step_metrics: Iterable[Mapping[str, Any]] | None = None, step_key: str = "epoch",
                tags: Mapping[str, Any] | None = None,
                artifacts: Iterable[str | os.PathLike] | Mapping[str, str | os.PathLike] | None = None) -> str:
        """Log one run (see :func:`log_run`); return its id."""
        from mlflow.entities import Metric, Param

        client = self.client
        all_tags = {KEY_TAG: key, KIND_TAG: kind}
        all_tags.update({str(k): _param_value(v) for k, v in (tags or {}).items() if v is not None})
        run = _retry(client.create_run, self.experiment_id, tags=all_tags, run_name=run_name or key)
        run_id = run.info.run_id
        try:
            now = int(time.time() * 1000)
            plist = [Param(str(k), _param_value(v)) for k, v in (params or {}).items()]
            mlist = [Metric(str(k), float(v), now, 0) for k, v in (metrics or {}).items() if _finite(v)]
            for row in step_metrics or []:
                step = int(row.get(step_key, 0) or 0)
                for k, v in row.items():
                    if k != step_key and _finite(v):
                        mlist.append(Metric(str(k), float(v), now, step))
            # one request for the params and the first metrics where MLflow's limits allow
            first = min(len(mlist), _MAX_METRICS_PER_BATCH) if len(plist) <= _MAX_PARAMS_PER_BATCH else 0
            if plist or first:
                _retry(client.log_batch, run_id, params=plist[:_MAX_PARAMS_PER_BATCH], metrics=mlist[:first])
            for i in range(_MAX_PARAMS_PER_BATCH, len(plist), _MAX_PARAMS_PER_BATCH):
                _retry(client.log_batch, run_id, params=plist[i:i + _MAX_PARAMS_PER_BATCH])
            for i in range(first, len(mlist), _MAX_METRICS_PER_BATCH):
                _retry(client.log_batch, run_id, metrics=mlist[i:i + _MAX_METRICS_PER_BATCH])
            if artifacts:
                items = artifacts.items() if isinstance(artifacts, Mapping) else ((a, None) for a in artifacts)
                for path, sub in items:
                    if path is not None and Path(path).exists():
                        _retry(client.log_artifact, run_id, str(path), sub)
            _retry(client.set_terminated, run_id, "FINISHED")
        except BaseException:
            with contextlib.suppress(Exception):
                _retry(client.delete_run, run_id)
            raise
        self.keys.append(key)
        return run_id

    def close(self) -> None:
        """Keep exactly one live run per logged key: the newest (ours, unless a concurrent writer's is newer)."""
        keys, self.keys = set(self.keys), []
        if not keys:
            return
        prefix = os.path.commonprefix(sorted(keys))
        if len(keys) == 1:
            runs = find_runs(next(iter(keys)), uri=self.uri, experiment_name=self.experiment_name, client=self.client)
        else:
            runs = find_runs(None, uri=self.uri, experiment_name=self.experiment_name, client=self.client,
                             key_prefix=prefix)
        by_key: dict[str, list] = {}
        for run in runs:
            k = run.data.tags.get(KEY_TAG)
            if k in keys:
                by_key.setdefault(k, []).append(run)
        for same in by_key.values():
            for old in _newest_first(same)[1:]:
                with contextlib.suppress(Exception):
                    _delete_run(self.client, old)


# --------------------------------------------------------------------------- estimates
def _res(record: Mapping[str, Any]) -> Mapping[str, Any]:
    return record.get("result", record)


def estimate_params(record: Mapping[str, Any]) -> dict[str, Any]:
    """MLflow params of an estimate record (see ``workflow/scripts/estimate.py``)."""
    res = _res(record)
    settings = res.get("settings") or {}
    keys = ("model", "dataset", "estimator", "method", "K", "chains", "init", "seed", "schedule", "device",
            "n_examples", "csl_mode", "burn_in", "thin", "n_visible", "n_hidden", "family", "hidden_sizes",
            "is_samples", "step_size", "gamma", "mh_sigma", "proposal_scale", "code_version")
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
        "mean_test_ll": res.get("mean_log_likelihood"),
        "mean_test_ll_stderr": res.get("mean_log_likelihood_stderr"),
        "seconds": res.get("seconds"),
        "sweeps_per_second": res.get("sweeps_per_second"),
        "n_sweeps": res.get("n_sweeps"),
        "total_sweeps": res.get("total_sweeps"),
        "n_examples": res.get("n_examples"),
    }
    extra = res.get("extra") or {}
    for k in ("mean_log_f_is", "mean_log_f_is_stderr", "mean_log_f_is_jensen_gap", "mean_log_f_mean_field",
              "is_ess_mean", "is_ess_min", "log_f_seconds"):  # deep models: the importance-sampled log f(v)
        m[k] = extra.get(k)
    chains = res.get("n_chains")
    if _finite(m["ess"]) and _finite(chains) and float(chains) > 0:
        m["ess_fraction"] = float(m["ess"]) / float(chains)
    ci = res.get("log_z_ci")
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        m["log_z_ci_low"], m["log_z_ci_high"] = ci
    return {k: float(v) for k, v in m.items() if _finite(v)}


def estimate_flags(record: Mapping[str, Any], *, ess_fraction: float = 0.1) -> list[str]:
    """Flags decidable from one estimate alone (low ESS)."""
    res = _res(record)
    ess, chains = res.get("ess"), res.get("n_chains")
    if _finite(ess) and _finite(chains) and float(chains) > 0 and float(ess) < ess_fraction * float(chains):
        unit = "samples" if (record.get("method") or res.get("estimator")) == "csl" else "chains"
        return [f"low ESS: {float(ess):.3g} of {int(chains)} {unit} ({100 * float(ess) / float(chains):.2g}% "
                f"< {100 * ess_fraction:g}%)"]
    return []


def log_estimate(record: Mapping[str, Any], *, uri: str | None = None, experiment_name: str = DEFAULT_EXPERIMENT,
                 artifacts: Iterable | Mapping | None = None, ess_fraction: float = 0.1,
                 extra_tags: Mapping[str, Any] | None = None, session: TrackingSession | None = None) -> str:
    """Log one estimate record (``{"model", "estimator", "K", ..., "result": EstimateResult.to_dict()}``
    or a flat ``to_dict()`` with those keys) as an MLflow run; returns the run id."""
    res = _res(record)
    params = estimate_params(record)
    key = record.get("key") or estimate_key(params.get("model", "?"), params.get("estimator", params.get("method", "?")),
                                            params.get("K"), params.get("init"), params.get("seed"))
    flags = estimate_flags(record, ess_fraction=ess_fraction)
    tags = {
        "logzbench.model": params.get("model"),
        "logzbench.dataset": params.get("dataset"),
        "logzbench.estimator": params.get("estimator"),
        "logzbench.method": params.get("method") or res.get("estimator"),
        FLAGGED_TAG: "true" if flags else "false",
        FLAG_TAG: "; ".join(flags) if flags else None,
    }
    tags.update(extra_tags or {})
    return log_run(key, uri=uri, experiment_name=experiment_name, kind="estimate", params=params,
                   metrics=estimate_metrics(record), tags=tags, artifacts=artifacts,
                   run_name=key.removeprefix("estimate/"), session=session)


# --------------------------------------------------------------------------- training
def training_metrics(history: Sequence[Mapping[str, Any]], step_key: str = "epoch") -> list[dict[str, float]]:
    """Per-epoch metrics of a training history (numeric entries only), keyed by ``step_key``."""
    out = []
    for i, row in enumerate(history):
        d = {k: float(v) for k, v in row.items() if k != step_key and _finite(v)}
        d[step_key] = int(row.get(step_key, i + 1))
        out.append(d)
    return out


def log_training(model: str, *, hyperparams: Mapping[str, Any], history: Sequence[Mapping[str, Any]],
                 summary: Mapping[str, Any] | None = None, uri: str | None = None,
                 experiment_name: str = DEFAULT_EXPERIMENT, dataset: str | None = None,
                 artifacts: Iterable | Mapping | None = None, extra_params: Mapping[str, Any] | None = None) -> str:
    """Log one training run: hyperparameters as params, the history as per-epoch metrics
    (``step = epoch``), the final values of ``summary`` as metrics."""
    from .utils import code_version

    params = {"model": model, "dataset": dataset, "code_version": code_version(), **dict(hyperparams),
              **dict(extra_params or {})}
    params = {k: v for k, v in params.items() if v is not None}
    return log_run(train_key(model), uri=uri, experiment_name=experiment_name, kind="train",
                   params=params, metrics=dict(summary or {}), step_metrics=training_metrics(history),
                   tags={"logzbench.model": model, "logzbench.dataset": dataset}, artifacts=artifacts,
                   run_name=train_key(model))


# --------------------------------------------------------------------------- repeated trials
def trials_key(experiment: str, setting: Mapping[str, Any]) -> str:
    """Deterministic key of one repeated-trials setting, e.g. ``trials/grid/reference=trw/sigma_pair=0.5``."""
    return "/".join(["trials", experiment] + [f"{k}={_fmt(v)}" for k, v in setting.items()])


def log_trials(experiment: str, setting: Mapping[str, Any], trials, summary, *, uri: str | None = None,
               experiment_name: str = DEFAULT_EXPERIMENT, params: Mapping[str, Any] | None = None,
               artifacts: Iterable | Mapping | None = None) -> str:
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
    """
    from .utils import code_version

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
    all_params = {"experiment": experiment, **dict(setting), "n_trials": len(steps),
                  "code_version": code_version(), **dict(params or {})}
    key = trials_key(experiment, setting)
    return log_run(key, uri=uri, experiment_name=experiment_name, kind="trials",
                   params={k: v for k, v in all_params.items() if v is not None}, metrics=metrics,
                   step_metrics=list(steps.values()), step_key="trial",
                   tags={"logzbench.experiment": experiment}, artifacts=artifacts,
                   run_name=key.removeprefix("trials/"))


# --------------------------------------------------------------------------- flags
def set_flags(flags: Mapping[str, Sequence[str]], *, uri: str | None = None,
              experiment_name: str = DEFAULT_EXPERIMENT) -> int:
    """Tag the live runs whose key is in ``flags``: ``logzbench.flag`` = the reasons joined
    by ``"; "`` and ``logzbench.flagged`` = ``true``; a key mapped to no reasons gets
    ``logzbench.flagged = false`` and loses a stale ``logzbench.flag``.  Runs with other
    keys are left alone.  Returns the number of runs tagged as flagged.
    """
    uri = resolve_tracking_uri(uri)
    client = get_client(uri)
    runs = find_runs(None, uri=uri, experiment_name=experiment_name, client=client)
    n = 0
    for run in runs:
        key = run.data.tags.get(KEY_TAG)
        if key is None or key not in flags:
            continue
        reasons = [r for r in flags[key] if r]
        if reasons:
            text = "; ".join(dict.fromkeys(reasons))[:5000]
            _retry(client.set_tag, run.info.run_id, FLAG_TAG, text)
            _retry(client.set_tag, run.info.run_id, FLAGGED_TAG, "true")
            n += 1
        else:
            if FLAG_TAG in run.data.tags:
                with contextlib.suppress(Exception):
                    _retry(client.delete_tag, run.info.run_id, FLAG_TAG)
            if run.data.tags.get(FLAGGED_TAG) != "false":
                _retry(client.set_tag, run.info.run_id, FLAGGED_TAG, "false")
    return n
