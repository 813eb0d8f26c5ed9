"""MLflow tracking for training and estimation runs.

The package's modules, each on one concern:

* :mod:`.keys`: a run's deterministic key (tag ``logzbench.key``), an estimate's run name, its sweep's parent
  run and the tags the runs carry;
* :mod:`.uris`: which store a tracking URI names, refused early when MLflow cannot use it;
* :mod:`.retries`: store operations retried on transient errors; an unreachable store fails with the URI;
* :mod:`.store`: the store and the experiment, created once under a file lock; the client;
* :mod:`.dashboard`: the experiment as the MLflow UI shows it (description, saved views, the page to open);
* :mod:`.runs`: one live run per key (:func:`log_run`, :class:`TrackingSession`), a sweep's parent run
  over its estimates, :func:`find_runs` (without the parents), :func:`set_flags`;
* :mod:`.records`: what an estimate, a training run and a repeated-trials setting log;
* :mod:`.server`: an ``mlflow server`` on a PostgreSQL backend store (``python -m logzbench.tracking.server``;
  not imported here).

The names callers use are re-exported here (``from logzbench import tracking; tracking.log_estimate``).
Importing the package imports no MLflow: that happens in the first call that talks to a store.
"""

from .dashboard import (
    DASHBOARD_DESCRIPTION,
    DASHBOARD_VIEW,
    DASHBOARD_VIEWS,
    EXPERIMENT_KIND,
    EXPERIMENT_KIND_TAG,
    NOTE_TAG,
    dashboard_hint,
    dashboard_url,
    setup_dashboard,
)
from .keys import (
    DEFAULT_EXPERIMENT,
    EXACT_DIFFERENCE_METRICS,
    FLAG_REASON_TAG,
    FLAG_TAG,
    FLAGGED_TAG,
    GROUP_TAG,
    KEY_TAG,
    KIND_TAG,
    LOGGED_TAG,
    PARENT_KIND,
    PARENT_TAG,
    SETTING_TAG,
    SWEEP_TAG,
    estimate_key,
    estimate_run_name,
    estimate_sweep,
    sweep_key,
    sweep_parent,
    sweep_run_name,
    train_key,
    trials_key,
)
from .records import (
    BRACKET_HISTORY_ARTIFACT,
    SCHEDULE_ARTIFACT,
    bracket_metrics,
    bracket_tags,
    estimate_bracket,
    estimate_flags,
    estimate_metrics,
    estimate_params,
    log_estimate,
    log_training,
    log_trials,
    training_metrics,
)
from .retries import HTTP_DEFAULTS
from .runs import TrackingSession, find_runs, flag_reason, log_run, set_flags
from .store import get_client, init_store
from .uris import TRACKING_URI_FORMS, default_artifact_location, is_http_uri, resolve_tracking_uri, sqlite_path

__all__ = [
    "DEFAULT_EXPERIMENT",
    "KEY_TAG",
    "FLAG_TAG",
    "resolve_tracking_uri",
    "TRACKING_URI_FORMS",
    "is_http_uri",
    "HTTP_DEFAULTS",
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
    "estimate_bracket",
    "bracket_metrics",
    "bracket_tags",
    "SCHEDULE_ARTIFACT",
    "BRACKET_HISTORY_ARTIFACT",
    "training_metrics",
    "GROUP_TAG",
    "SETTING_TAG",
    "DASHBOARD_DESCRIPTION",
    "dashboard_url",
    "dashboard_hint",
    "setup_dashboard",
    "KIND_TAG",
    "FLAGGED_TAG",
    "LOGGED_TAG",
    "trials_key",
    "log_trials",
    "EXPERIMENT_KIND_TAG",
    "EXPERIMENT_KIND",
    "NOTE_TAG",
    "DASHBOARD_VIEW",
    "DASHBOARD_VIEWS",
    "FLAG_REASON_TAG",
    "SWEEP_TAG",
    "EXACT_DIFFERENCE_METRICS",
    "estimate_run_name",
    "estimate_sweep",
    "flag_reason",
    "PARENT_TAG",
    "PARENT_KIND",
    "sweep_key",
    "sweep_run_name",
    "sweep_parent",
]
