"""The tracking store and the experiment, created once; the client every operation uses.

MLflow's embedded SQLite store loses runs when several processes create a fresh ``mlflow.db``
at the same time (each runs the schema migrations and all but one die with "duplicate column
name").  :func:`init_store` therefore creates the store and the experiment exactly once -- the
Snakemake workflow calls it from a dedicated rule every other job depends on -- and holds an
exclusive file lock (:func:`_store_lock`) while doing so, so even two concurrent calls are safe.
It also sets the experiment up for the MLflow UI (:func:`logzbench.tracking.dashboard.setup_dashboard`).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator
from urllib.parse import unquote, urlparse

from .dashboard import setup_dashboard
from .keys import DEFAULT_EXPERIMENT
from .retries import _apply_http_defaults, _retry
from .uris import default_artifact_location, is_http_uri, resolve_tracking_uri, sqlite_path


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


def get_client(uri: str | None = None):
    """An :class:`mlflow.MlflowClient` on the resolved URI (created with retries).

    For a tracking server (``http(s)://``) MLflow's HTTP retries are bounded first
    (:data:`HTTP_DEFAULTS`, where the environment does not set them).
    """
    from mlflow import MlflowClient

    uri = resolve_tracking_uri(uri)
    if is_http_uri(uri):
        _apply_http_defaults()
    return _retry(MlflowClient, tracking_uri=uri)


def init_store(
    uri: str | None = None,
    experiment_name: str = DEFAULT_EXPERIMENT,
    artifact_location: str | os.PathLike | None = None,
    *,
    description: str | None = None,
) -> dict[str, str]:
    """Create the tracking store and the experiment, once.

    Safe to call from several processes at once (an exclusive file lock serialises the
    creation of a SQLite store) and idempotent (an existing store and experiment are
    reused).  Returns ``{"uri", "experiment_name", "experiment_id", "artifact_location"}``.

    The experiment is set up for reviewing in the MLflow UI (:func:`setup_dashboard`): its kind
    (a model-training experiment, whose page is the runs table), its description (``description``,
    default :data:`DASHBOARD_DESCRIPTION`) and saved views of the runs table (by sweep: each sweep's runs
    nested under its parent run; by model; seeds pooled).
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
        try:
            setup_dashboard(client, str(exp_id), description)
        except Exception as exc:
            import warnings

            warnings.warn(f"MLflow UI set-up of experiment {experiment_name!r} skipped: {exc}", stacklevel=2)
    return {
        "uri": uri,
        "experiment_name": experiment_name,
        "experiment_id": str(exp_id),
        "artifact_location": str(art) if art is not None else "",
    }


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
