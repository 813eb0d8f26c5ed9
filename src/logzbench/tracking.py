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
  answers "database is locked" (many parallel writers) or PostgreSQL reports a transient
  conflict.  A tracking server (``http(s)://``, :mod:`logzbench.tracking_server`) that cannot
  be reached fails the call after MLflow's HTTP retries, bounded by :data:`HTTP_DEFAULTS`
  (about 15-20 s), with a :class:`~logzbench.errors.TrackingError` naming the URI.
* **The MLflow UI.**  A run starts and ends when its job did (``start_time`` / ``end_time``;
  the records' ``started_at`` / ``finished_at``); of a key's runs the last *recorded* is kept
  (tag ``logzbench.logged``).  Runs carry the tags the runs table groups by (:data:`GROUP_TAG`:
  the model; :data:`SETTING_TAG`: the setting less its seed).  The experiment is a model-training
  experiment with a description of what to compare and saved views grouped by model
  (:func:`setup_dashboard`); :func:`dashboard_url` is the page to open.

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
import re
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
]

DEFAULT_EXPERIMENT = "logzbench"
KEY_TAG = "logzbench.key"
KIND_TAG = "logzbench.kind"
FLAG_TAG = "logzbench.flag"
FLAGGED_TAG = "logzbench.flagged"
#: what the MLflow UI groups a run by: its model (estimates and training), ``trials/<experiment>``, ``report``
GROUP_TAG = "logzbench.group"
#: an estimate's key less its seed (the seeds of one setting group together); other runs: their key
SETTING_TAG = "logzbench.setting"
#: when the run was recorded (ms since the epoch): of a key's runs the last recorded is kept
LOGGED_TAG = "logzbench.logged"

T = TypeVar("T")

# MLflow's per-request limits for log_batch.
_MAX_METRICS_PER_BATCH = 1000
_MAX_PARAMS_PER_BATCH = 100
_MAX_TAGS_PER_BATCH = 100


# --------------------------------------------------------------------------- URIs
#: the forms of a tracking URI logzbench accepts (:func:`resolve_tracking_uri`), for messages
TRACKING_URI_FORMS = ("sqlite:///PATH.db (or a path ending in .db, .sqlite or .sqlite3), http(s)://HOST:PORT "
                      "(a tracking server), or a database URI such as postgresql://USER@HOST:5432/DB")
#: database engines of MLflow's SQL store (``<engine>://`` or ``<engine>+<driver>://``)
_DB_ENGINES = ("sqlite", "postgresql", "mysql", "mssql")
_DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def _file_store_allowed() -> bool:
    """Whether MLflow's file store is enabled (``MLFLOW_ALLOW_FILE_STORE=true``; MLflow 3 refuses it otherwise)."""
    return os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() in ("true", "1")


def _bad_uri(source: str, uri: str, why: str = ""):
    from .errors import TrackingError

    return TrackingError(f"{source} {uri!r} is not a tracking URI logzbench can use{why}; give "
                         f"{TRACKING_URI_FORMS}")


def resolve_tracking_uri(uri: str | None = None, workdir: str | os.PathLike | None = None, *,
                         key: str | None = None) -> str:
    """The tracking URI: ``uri``, else ``$MLFLOW_TRACKING_URI``, else a SQLite file in ``workdir``.

    A relative SQLite path (``sqlite:///mlflow.db``) is made absolute against ``workdir``
    (default: the current directory) so that every process of a workflow, whatever its
    working directory, writes the same file; so is a bare path ending in ``.db``, ``.sqlite`` or
    ``.sqlite3``.  A tracking server's ``http(s)://host:port`` is kept as it is (less a trailing
    ``/``), and so is a database URI (``postgresql://``, ``mysql://``, ``mssql://``, with or without
    ``+driver``; ``databricks``).  Anything else is refused (:class:`~logzbench.errors.TrackingError`
    naming ``key``, e.g. ``tracking.uri``, or ``$MLFLOW_TRACKING_URI``, and the accepted forms
    :data:`TRACKING_URI_FORMS`), before any job: a bare ``host:port`` (it would be a file path), an
    unknown scheme, and a directory or ``file://`` URI, MLflow's file store, which MLflow 3 refuses in
    the job unless ``MLFLOW_ALLOW_FILE_STORE=true`` (then it is accepted).
    """
    source = key or "tracking URI"
    if not uri:
        uri, source = os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db", "$MLFLOW_TRACKING_URI"
    if not isinstance(uri, str) or not uri.strip():
        raise _bad_uri(source, str(uri))
    if is_http_uri(uri):
        host = urlparse(uri).netloc
        if not host or any(c.isspace() for c in host):
            raise _bad_uri(source, uri, " (no host)" if not host else " (a space in the host)")
        return uri.rstrip("/")
    if re.fullmatch(r"[A-Za-z0-9.-]+:\d+/?", uri):
        from .errors import TrackingError

        raise TrackingError(f"{source} {uri!r} has no scheme: a tracking server's URI is "
                            f"http://{uri.rstrip('/')} (or https://...)")
    base = Path(workdir) if workdir is not None else Path.cwd()
    if uri.startswith("sqlite:///"):
        rest = uri[len("sqlite:///"):]
        if not rest.startswith("/"):  # relative: sqlite:///mlflow.db
            return "sqlite:///" + str((base / rest).resolve())
        return uri
    if "://" not in uri:  # a plain path: a .db file, or (where allowed) a file store directory
        p = (base / uri).resolve()
        if p.suffix in _DB_SUFFIXES:
            return "sqlite:///" + str(p)
        if not _file_store_allowed():
            raise _bad_uri(source, uri, " (a path without .db is MLflow's file store, which MLflow refuses unless "
                                        "MLFLOW_ALLOW_FILE_STORE=true)")
        return p.as_uri()
    scheme = urlparse(uri).scheme.lower()
    if scheme == "file" and not _file_store_allowed():
        raise _bad_uri(source, uri, " (file:// is MLflow's file store, which MLflow refuses unless "
                                    "MLFLOW_ALLOW_FILE_STORE=true)")
    if scheme != "file" and scheme.split("+", 1)[0] not in _DB_ENGINES and not scheme.startswith("databricks"):
        raise _bad_uri(source, uri, f" (unknown scheme {scheme + '://' if scheme else 'none'})")
    return uri


def is_http_uri(uri: str | None) -> bool:
    """Whether ``uri`` is a tracking server's (``http://`` or ``https://``)."""
    return isinstance(uri, str) and uri.lower().startswith(("http://", "https://"))


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
#: MLflow's HTTP client settings for a tracking server (an ``http(s)://`` URI), each set by
#: :func:`get_client` only where the environment leaves it unset (the user's value wins).  MLflow's
#: own defaults (7 retries, backoff factor 2, 120 s timeout) keep a job waiting about 4 minutes
#: for a server that is down; these give up after 4 retries 0, 2, 4 and 8 s apart (plus up to 1 s
#: of jitter each): a call to a server that refuses connections fails after about 15-20 s, one
#: that accepts but never answers after at most 5 x 30 s.  The error names the URI
#: (:class:`~logzbench.errors.TrackingError`).
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "4",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}

# Transient errors of a database store: SQLite's lock, PostgreSQL's deadlock / serialisation
# failure / connection limit (and a concurrent insert of the same row: _is_locked_error).  Retried
# by _retry.
_LOCKED = ("database is locked", "database table is locked", "database is busy", "sqlite_busy",
           "unable to open database file", "deadlock detected", "could not serialize access",
           "too many clients already", "remaining connection slots are reserved",
           "the database system is starting up")
# A store that cannot be reached: the HTTP client's connection errors (after MLflow's own retries:
# "API request to ... failed with exception ... Max retries exceeded") or a database's.
_UNREACHABLE = ("max retries exceeded", "failed to establish a new connection", "connection refused",
                "connection aborted", "connection reset", "remotedisconnected", "remote end closed connection",
                "read timed out", "connect timeout", "failed with timeout exception", "timed out",
                "name or service not known", "temporary failure in name resolution", "no route to host",
                "network is unreachable", "could not connect to server", "server closed the connection unexpectedly")


def _is_locked_error(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}".lower()
    if any(s in text for s in _LOCKED):
        return True
    # two writers inserting the same row at once (e.g. concurrent set_experiment_tag on PostgreSQL,
    # where MLflow's upsert is a SELECT then an INSERT): the retry updates the row the other wrote.
    # A name that really exists (create_experiment: RESOURCE_ALREADY_EXISTS, "Experiment(name=...) already
    # exists") is no transient error.
    return (("duplicate key value violates unique constraint" in text or "unique constraint failed" in text)
            and "resource_already_exists" not in text and not re.search(r"\(name=[^)]*\) already exists", text))


def _is_unreachable_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the tracking store (server or database) could not be reached."""
    from .errors import TrackingError

    if isinstance(exc, TrackingError):
        return False
    text = f"{type(exc).__name__}: {exc}".lower()
    return any(s in text for s in _UNREACHABLE) or ("connection to server at" in text and "failed" in text)


def _apply_http_defaults() -> None:
    """Bound MLflow's HTTP retries (:data:`HTTP_DEFAULTS`) where the environment does not set them."""
    for name, value in HTTP_DEFAULTS.items():
        os.environ.setdefault(name, value)


def _redact(uri: str) -> str:
    """``uri`` without its password (``scheme://user:***@host``)."""
    parts = urlparse(uri)
    if parts.password:
        netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return parts._replace(netloc=netloc).geturl()
    return uri


def _failing_uri(fn: Callable, kwargs: Mapping[str, Any], exc: BaseException) -> str:
    """The tracking URI a failed call went to: the client's, else the one in MLflow's message."""
    uri = kwargs.get("tracking_uri") or getattr(getattr(fn, "__self__", None), "tracking_uri", None)
    if not isinstance(uri, str):
        m = re.search(r"API request to (\S+?)/(?:api|ajax-api)/", str(exc))
        uri = m.group(1) if m else None
    return _redact(uri) if uri else "(unknown URI)"


def _unreachable_error(exc: BaseException, uri: str, seconds: float, attempts: int):
    """The :class:`~logzbench.errors.TrackingError` of a store that could not be reached."""
    from .errors import TrackingError

    text = str(exc)
    low = text.lower()
    status = re.search(r"too many (\d{3}) error responses", low)
    if status:
        reason = f"HTTP {status.group(1)} on every attempt: see the server's log"
    elif "connection refused" in low:
        reason = "connection refused: nothing listens there"
    elif "name or service not known" in low or "name resolution" in low:
        reason = "unknown host name"
    elif "timed out" in low or "timeout" in low:
        reason = "no answer in time (MLFLOW_HTTP_REQUEST_TIMEOUT)"
    else:
        reason = text if len(text) <= 300 else text[:300] + "..."
    if is_http_uri(uri) or "API request to" in text:
        settings = ", ".join(f"{k}={os.environ.get(k, 'MLflow default')}" for k in HTTP_DEFAULTS)
        what, tried = "MLflow tracking server", f"gave up after {seconds:.0f} s of retries ({settings})"
    else:
        what, tried = "MLflow tracking store", f"gave up after {attempts} attempts in {seconds:.0f} s"
    return TrackingError(
        f"{what} {uri} is unreachable ({reason}); {tried}. Start the server (README: 'A tracking server on PostgreSQL', "
        f"python -m logzbench.tracking_server) or point tracking.uri / MLFLOW_TRACKING_URI at a running one; "
        f"a rerun then picks up where this job stopped.")


def _retry(fn: Callable[..., T], *args: Any, attempts: int = 12, base_delay: float = 0.05,
           max_delay: float = 5.0, **kwargs: Any) -> T:
    """Call ``fn`` and retry with jittered exponential backoff on transient store errors (SQLite
    "database is locked", PostgreSQL deadlocks and connection limits).

    A store that cannot be reached raises :class:`~logzbench.errors.TrackingError` naming its URI:
    a tracking server's at once (MLflow's HTTP client has retried already, bounded by
    :data:`HTTP_DEFAULTS`), a database's after these ``attempts``.
    """
    t0 = time.monotonic()
    for i in range(attempts):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - filtered just below
            unreachable = _is_unreachable_error(exc)
            if unreachable and (i == attempts - 1 or "API request to" in str(exc)):
                raise _unreachable_error(exc, _failing_uri(fn, kwargs, exc), time.monotonic() - t0, i + 1) from exc
            if i == attempts - 1 or not (unreachable or _is_locked_error(exc)):
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
    """An :class:`mlflow.MlflowClient` on the resolved URI (created with retries).

    For a tracking server (``http(s)://``) MLflow's HTTP retries are bounded first
    (:data:`HTTP_DEFAULTS`, where the environment does not set them).
    """
    from mlflow import MlflowClient

    uri = resolve_tracking_uri(uri)
    if is_http_uri(uri):
        _apply_http_defaults()
    return _retry(MlflowClient, tracking_uri=uri)


def init_store(uri: str | None = None, experiment_name: str = DEFAULT_EXPERIMENT,
               artifact_location: str | os.PathLike | None = None, *,
               description: str | None = None) -> dict[str, str]:
    """Create the tracking store and the experiment, once.

    Safe to call from several processes at once (an exclusive file lock serialises the
    creation of a SQLite store) and idempotent (an existing store and experiment are
    reused).  Returns ``{"uri", "experiment_name", "experiment_id", "artifact_location"}``.

    The experiment is set up for reviewing in the MLflow UI (:func:`setup_dashboard`): its kind
    (a model-training experiment, whose page is the runs table), its description (``description``,
    default :data:`DASHBOARD_DESCRIPTION`) and saved views of the runs table grouped by model.
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
        except Exception as exc:  # noqa: BLE001 - a convenience (e.g. no permission to edit the experiment)
            import warnings

            warnings.warn(f"MLflow UI set-up of experiment {experiment_name!r} skipped: {exc}", stacklevel=2)
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


# --------------------------------------------------------------------------- the MLflow UI
#: The description the first version wrote (kept to recognise and replace it in an older store).
_DESCRIPTION_V1 = """\
**Compare one model's estimators side by side**: the view *By model* groups the runs by model \
(*Group by* `logzbench.group`); *Seeds pooled* groups the seeds of each setting (`logzbench.setting`) \
and shows their average.

- `mean_test_ll` ± `mean_test_ll_stderr` (nats): the `exact` run, where there is one, is the truth. \
AIS estimates Z without bias, so its log-likelihood errs high when chains are too few or too short; \
RAISE and CSL are stochastic lower bounds. RAISE below and AIS above bracket the truth: a wide gap \
means neither has converged (grow K).
- `log_z` ± `log_z_stderr` against the exact run's; a small `ess_fraction` (effective / all chains; the \
report flags < 0.1 by default) makes an estimate unreliable.
- `seconds`: the estimator's own time; *Duration*: the job's wall time for that setting.
- `logzbench.flagged`, `logzbench.flag`: the report's reasons to distrust a setting (AIS-RAISE gap, \
low ESS, a bound on the wrong side of the exact value).

**logzbench** (log-likelihood estimates of energy-based models): one run per estimate \
(`<model>/<estimator>/K<K>/<init>/seed<seed>`), per trained model (`train/<model>`), per \
repeated-trials setting (`<experiment>/...`) and the report (`report`).
"""
#: The experiment's description in the MLflow UI (``mlflow.note.content``, Markdown): what to compare
#: (the first version's, with the Pareto k-hat and the flags added since).
DASHBOARD_DESCRIPTION = _DESCRIPTION_V1.replace(
    "- `seconds`:",
    "- `khat`: the Pareto k-hat of the run's log-weights (PSIS); above 0.7 their tail is so heavy that the "
    "standard error understates the uncertainty (flagged).\n- `seconds`:").replace(
    "low ESS, a bound on the wrong side of the exact value).",
    "low ESS, heavy-tailed weights, standard errors below the spread between seeds, a bound on the wrong side "
    "of the exact value).")
# descriptions an earlier version wrote (replaced by the current one; a person's own text is kept)
_PREVIOUS_DESCRIPTIONS: tuple[str, ...] = (_DESCRIPTION_V1,)

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
#: MLflow 3's experiment kind of a model-training experiment: its page is the runs table, not the
#: GenAI overview.  (MLflow 3.17's UI decides by its sidebar's "GenAI / Model training" switch, set
#: by ``workflowType=machine_learning`` in :func:`dashboard_url`; earlier 3.x releases read the tag.)
EXPERIMENT_KIND = "custom_model_development"
_REPLACEABLE_KINDS = ("", "no_inferred_type", "genai_development_inferred", "custom_model_development_inferred")
NOTE_TAG = "mlflow.note.content"
_VIEW_TAG_PREFIX = "mlflow.sharedViewState."  # the runs table's saved views ("Views" menu; ?viewStateShareKey=)
#: the saved view :func:`dashboard_url` opens
DASHBOARD_VIEW = "logzbench-by-model"
#: saved views of the runs table: id -> (name, tag grouped by)
DASHBOARD_VIEWS = {"logzbench-by-model": ("By model", GROUP_TAG),
                   "logzbench-seeds-pooled": ("Seeds pooled", SETTING_TAG)}
_VIEW_COLUMNS = (*(f"metrics.`{m}`" for m in ("mean_test_ll", "mean_test_ll_stderr", "log_z", "log_z_stderr",
                                              "ess_fraction", "khat", "seconds")),
                 *(f"params.`{p}`" for p in ("estimator", "K", "init", "seed", "chains")),
                 f"tags.`{FLAGGED_TAG}`")


def _view_state(group_tag: str) -> str:
    """A saved view's state (the runs table's search facets and UI state, as MLflow's UI stores them):
    sorted by run name, grouped by the tag ``group_tag`` (average over each group), the main metric
    and parameter columns."""
    return json.dumps({
        "orderByKey": "tags.`mlflow.runName`", "orderByAsc": True,
        "groupBy": {"aggregateFunction": "average", "groupByKeys": [{"mode": "tag", "groupByData": group_tag}]},
        "groupsExpanded": {}, "selectedColumns": list(_VIEW_COLUMNS),
        # the grid's column ids: run name, Created, Duration, then ours (its widths apply to these only)
        "columnOrder": ["attributes.`Run Name`", "runDateAndNestInfo", "duration", *_VIEW_COLUMNS],
        "columnWidths": {"attributes.`Run Name`": 330},  # run names are long: <model>/<estimator>/K/init/seed
    }, sort_keys=True)


def _own_view(value: str | None, name: str, state: str) -> bool | None:
    """Whether a saved view's tag ``value`` is this one (``True``), one of ours to update (``False``:
    absent, or an uncompressed state, which MLflow's UI never writes), or a person's (``None``)."""
    if value is None:
        return False
    try:
        env = json.loads(value)
        json.loads(env["state"])
    except (ValueError, TypeError, KeyError):
        return None  # compressed by the UI ("Override saved view"): keep it
    return env.get("name") == name and env.get("state") == state


def setup_dashboard(client, experiment_id: str, description: str | None = None) -> dict[str, str]:
    """Set the experiment up for reviewing in the MLflow UI; return the tags it set.

    * ``mlflow.experimentKind`` = :data:`EXPERIMENT_KIND` unless a definite kind is set;
    * the description ``mlflow.note.content`` (``description``, default :data:`DASHBOARD_DESCRIPTION`)
      unless a person wrote another;
    * the saved views :data:`DASHBOARD_VIEWS` of the runs table (grouped by model; by setting, seeds
      pooled) unless a person overrode them.

    Idempotent: a second call sets nothing.
    """
    exp = _retry(client.get_experiment, experiment_id)
    tags = dict(getattr(exp, "tags", None) or {})
    want: dict[str, str] = {}
    if tags.get(EXPERIMENT_KIND_TAG, "") in _REPLACEABLE_KINDS:
        want[EXPERIMENT_KIND_TAG] = EXPERIMENT_KIND
    text = description or DASHBOARD_DESCRIPTION
    note = tags.get(NOTE_TAG)
    if note != text and (note in (None, "", DASHBOARD_DESCRIPTION) or note in _PREVIOUS_DESCRIPTIONS):
        want[NOTE_TAG] = text
    now = int(time.time() * 1000)
    for view_id, (name, group_tag) in DASHBOARD_VIEWS.items():
        state, current = _view_state(group_tag), tags.get(_VIEW_TAG_PREFIX + view_id)
        if _own_view(current, name, state) is False:
            created = now
            with contextlib.suppress(ValueError, TypeError, KeyError):
                created = int(json.loads(current)["createdAt"])
            want[_VIEW_TAG_PREFIX + view_id] = json.dumps({"name": name, "createdAt": created, "updatedAt": now,
                                                           "state": state})
    for key, value in want.items():
        _retry(client.set_experiment_tag, experiment_id, key, value)
    return want


def dashboard_url(experiment_id: str, base_url: str = "http://127.0.0.1:5000", view: str | None = DASHBOARD_VIEW) -> str:
    """The experiment's runs table in the MLflow UI at ``base_url``, as the saved ``view`` (default
    grouped by model; ``None``: the plain runs table).  ``workflowType=machine_learning`` switches
    MLflow 3's sidebar to "Model training" (its default, GenAI, opens experiments on the traces overview)."""
    url = f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
    return url + (f"&viewStateShareKey={view}" if view else "")


def dashboard_hint(uri: str | None, experiment_id: str, port: int = 5000) -> str:
    """How to review the experiment in the MLflow UI: the command that serves the store (a SQLite or
    file store; a tracking server is its own UI) and the page to open (:func:`dashboard_url`)."""
    uri = resolve_tracking_uri(uri)
    if uri.lower().startswith(("http://", "https://")):
        return f"MLflow UI: open {dashboard_url(experiment_id, uri)}"
    return (f"MLflow UI: mlflow ui --backend-store-uri {uri} --port {port}, then open "
            f"{dashboard_url(experiment_id, f'http://127.0.0.1:{port}')}")


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


def _logged_ms(run) -> int:
    """When ``run`` was recorded: its :data:`LOGGED_TAG` (a run's start time is its job's, which a
    re-logged record repeats), else its start time (runs recorded before the tag existed)."""
    with contextlib.suppress(TypeError, ValueError):
        return int(run.data.tags[LOGGED_TAG])
    return int(run.info.start_time or 0)


def _newest_first(runs: Sequence) -> list:
    return sorted(runs, key=lambda r: (_logged_ms(r), r.info.start_time or 0, r.info.run_id), reverse=True)


def _epoch_ms(t: Any) -> int | None:
    """Milliseconds since the epoch of ``t``: a :class:`datetime.datetime` (naive = UTC), an ISO 8601
    string (as the job records write) or seconds since the epoch; ``None`` stays ``None``."""
    import datetime as _dt

    if t is None or t == "":
        return None
    if isinstance(t, str):
        t = _dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
    if isinstance(t, _dt.datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=_dt.timezone.utc)
        return int(round(t.timestamp() * 1000))
    return int(round(float(t) * 1000))


def log_run(key: str, *, uri: str | None = None, experiment_name: str = DEFAULT_EXPERIMENT,
            run_name: str | None = None, kind: str = "estimate",
            params: Mapping[str, Any] | None = None, metrics: Mapping[str, Any] | None = None,
            step_metrics: Iterable[Mapping[str, Any]] | None = None, step_key: str = "epoch",
            tags: Mapping[str, Any] | None = None,
            artifacts: Iterable[str | os.PathLike] | Mapping[str, str | os.PathLike] | None = None,
            session: "TrackingSession | None" = None, start_time: Any = None, end_time: Any = None) -> str:
    """Record one run under the deterministic ``key`` and return its run id.

    ``params`` and ``metrics`` are flat mappings (non-finite or ``None`` metrics are
    skipped).  ``step_metrics`` is a sequence of dicts (e.g. a training history), each
    logged at ``step = d[step_key]``.  ``artifacts`` are files (a mapping gives each its
    artifact sub-directory).  Any live run with the same key is replaced: exactly one live
    run per key remains, even under concurrent writers.  Within a :class:`TrackingSession`
    (``session``) the replacing waits for :meth:`TrackingSession.close`, which does it for every
    key of the session with one search.

    ``start_time`` and ``end_time`` (a :class:`datetime.datetime`, an ISO 8601 string or seconds
    since the epoch) are the run's start and end in the MLflow UI (its *Created* and *Duration*):
    the job's own, where the run is logged after the job; either defaults to now.  Every run is
    tagged with its group (:data:`GROUP_TAG`, default ``kind``) and setting (:data:`SETTING_TAG`,
    default ``key``), which the UI's runs table groups by.
    """
    if session is not None:
        return session.log_run(key, run_name=run_name, kind=kind, params=params, metrics=metrics,
                               step_metrics=step_metrics, step_key=step_key, tags=tags, artifacts=artifacts,
                               start_time=start_time, end_time=end_time)
    with TrackingSession(uri, experiment_name) as own:
        return own.log_run(key, run_name=run_name, kind=kind, params=params, metrics=metrics,
                           step_metrics=step_metrics, step_key=step_key, tags=tags, artifacts=artifacts,
                           start_time=start_time, end_time=end_time)


def _superseded(client, run_id: str) -> bool:
    """Whether run ``run_id`` was deleted (by a concurrent writer's :meth:`TrackingSession.close` that kept
    a newer run of the same key)."""
    try:
        return client.get_run(run_id).info.lifecycle_stage == "deleted"
    except Exception:  # noqa: BLE001 - the store cannot say: not superseded, the original error stands
        return False


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
        from .errors import TrackingError

        if exc_type is not None and issubclass(exc_type, TrackingError):
            return  # the store is unreachable: closing would wait out the retries again; a rerun tidies up
        self.close()

    def log_run(self, key: str, *, run_name: str | None = None, kind: str = "estimate",
                params: Mapping[str, Any] | None = None, metrics: Mapping[str, Any] | None = None,
                step_metrics: Iterable[Mapping[str, Any]] | None = None, step_key: str = "epoch",
                tags: Mapping[str, Any] | None = None,
                artifacts: Iterable[str | os.PathLike] | Mapping[str, str | os.PathLike] | None = None,
                start_time: Any = None, end_time: Any = None) -> str:
        """Log one run (see :func:`log_run`); return its id."""
        from mlflow.entities import Metric, Param

        client = self.client
        logged = int(time.time() * 1000)
        start, end = _epoch_ms(start_time), _epoch_ms(end_time)
        start = start if start is not None else (min(end, logged) if end is not None else logged)
        end = max(end if end is not None else logged, start)
        all_tags = {KEY_TAG: key, KIND_TAG: kind, GROUP_TAG: kind, SETTING_TAG: key}
        all_tags.update({str(k): _param_value(v) for k, v in (tags or {}).items() if v is not None})
        all_tags[LOGGED_TAG] = str(logged)
        run = _retry(client.create_run, self.experiment_id, start_time=start, tags=all_tags, run_name=run_name or key)
        run_id = run.info.run_id
        try:
            now = end  # the metrics' time: when the job had them
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
            _retry(client.set_terminated, run_id, "FINISHED", end_time=end)
        except BaseException as exc:
            if isinstance(exc, Exception) and _superseded(client, run_id):
                # a concurrent writer of the same key logged a newer run and removed this one while it
                # was being written (TrackingSession.close): the key has its one live run
                return run_id
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
            "is_samples", "step_size", "gamma", "mh_sigma", "proposal_scale", "code_version",
            # the schedule's and the sandwich's settings (recorded where they are used: logzbench.sweep.SETTING_KEYS)
            "sweeps_per_beta", "pilot_chains", "target_ess", "target_width", "max_sweeps", "confidence")
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
    for k in ("mean_log_f_is", "mean_log_f_is_stderr", "mean_log_f_is_jensen_gap", "mean_log_f_mean_field",
              "is_ess_mean", "is_ess_min", "is_khat_median", "log_f_seconds"):  # deep models: the importance-sampled log f(v)
        m[k] = extra.get(k)
    for k in ("pilot_sweeps", "pilot_K", "pilot_seconds", "pilot_resampled"):  # the adaptive schedule's pilot run
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
        keys += [k for k in ("confidence", "noise_z", "target_width", "width_reached", "quantity", "K",
                             "total_sweeps", "K_needed", "reason", "history") if k in res]
        return {k: res[k] for k in keys}
    return {}


def bracket_metrics(bracket: Mapping[str, Any]) -> dict[str, float]:
    """MLflow metrics of a bracket: its numbers under their JSON names (``log_z_lower``, ``log_z_upper``,
    their ``_estimate``, ``_stderr`` and ``_slack``, ``log_z_width``, the same of ``mean_log_likelihood``,
    ``confidence``, ``noise_z``, ``target_width``, ``K``, ``total_sweeps``, ``K_needed``); booleans and unknown
    values are left out."""
    return {str(k): float(v) for k, v in bracket.items()
            if k != "history" and not isinstance(v, (bool, str)) and _finite(v)}


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
            except Exception:  # noqa: BLE001 - a damaged file is logged as it is; the schedule is a convenience
                return None
    return None


def estimate_flags(record: Mapping[str, Any], *, ess_fraction: float = 0.1, khat: float = 0.7) -> list[str]:
    """Flags decidable from one estimate alone (low ESS; heavy-tailed log-weights: Pareto k-hat
    above ``khat``)."""
    res = _res(record)
    flags = []
    ess, chains = res.get("ess"), res.get("n_chains")
    if _finite(ess) and _finite(chains) and float(chains) > 0 and float(ess) < ess_fraction * float(chains):
        unit = "samples" if (record.get("method") or res.get("estimator")) == "csl" else "chains"
        flags.append(f"low ESS: {float(ess):.3g} of {int(chains)} {unit} ({100 * float(ess) / float(chains):.2g}% "
                     f"< {100 * ess_fraction:g}%)")
    k = res.get("khat")
    if _finite(k) and float(k) > khat:
        flags.append(f"heavy-tailed log-weights: Pareto k-hat {float(k):.2f} > {khat:g}, "
                     "the standard error understates the uncertainty")
    return flags


def log_estimate(record: Mapping[str, Any], *, uri: str | None = None, experiment_name: str = DEFAULT_EXPERIMENT,
                 artifacts: Iterable | Mapping | None = None, ess_fraction: float = 0.1,
                 extra_tags: Mapping[str, Any] | None = None, session: TrackingSession | None = None,
                 start_time: Any = None, end_time: Any = None, schedule: Any = None) -> str:
    """Log one estimate record (``{"model", "estimator", "K", ..., "result": EstimateResult.to_dict()}``
    or a flat ``to_dict()`` with those keys) as an MLflow run; returns the run id.

    The run starts and ends when the estimate did: ``start_time`` / ``end_time``, else the record's
    ``started_at`` / ``finished_at`` (:func:`logzbench.jobs.run_estimate`), else now.  It is grouped
    by its model (:data:`GROUP_TAG`) and by its setting less the seed (:data:`SETTING_TAG`).

    An annealed estimate's inverse temperatures (``schedule``, else the ``schedule`` array of the per-chain
    arrays ``.npz`` among ``artifacts``) are logged as the artifact :data:`SCHEDULE_ARTIFACT`, one per line.
    A bracket (sandwich, BDMC: :func:`estimate_bracket`) logs its numbers as metrics
    (:func:`bracket_metrics`), its words and booleans as tags (:func:`bracket_tags`), all under their JSON
    names, and its ``history`` as the artifact :data:`BRACKET_HISTORY_ARTIFACT`."""
    import tempfile

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
        GROUP_TAG: params.get("model"),
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
        return log_run(key, uri=uri, experiment_name=experiment_name, kind="estimate", params=params,
                       metrics=estimate_metrics(record), tags=tags, artifacts=items or None,
                       run_name=key.removeprefix("estimate/"), session=session,
                       start_time=start_time if start_time is not None else record.get("started_at"),
                       end_time=end_time if end_time is not None else record.get("finished_at"))


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


def log_training(model: str, *, hyperparams: Mapping[str, Any], history: Sequence[Mapping[str, Any]],
                 summary: Mapping[str, Any] | None = None, uri: str | None = None,
                 experiment_name: str = DEFAULT_EXPERIMENT, dataset: str | None = None,
                 artifacts: Iterable | Mapping | None = None, extra_params: Mapping[str, Any] | None = None,
                 start_time: Any = None, end_time: Any = None, step_key: str = "epoch") -> str:
    """Log one training run: hyperparameters as params, the history as per-epoch metrics
    (``step = epoch``; a black-box learner's ``step_key="iteration"``), the final values of ``summary``
    as metrics.  The run starts and ends when the training did (``start_time``, ``end_time``; default
    now) and is grouped with its model's estimates (:data:`GROUP_TAG`)."""
    from .utils import code_version

    params = {"model": model, "dataset": dataset, "code_version": code_version(), **dict(hyperparams),
              **dict(extra_params or {})}
    params = {k: v for k, v in params.items() if v is not None}
    return log_run(train_key(model), uri=uri, experiment_name=experiment_name, kind="train",
                   params=params, metrics=dict(summary or {}), step_metrics=training_metrics(history, step_key),
                   step_key=step_key,
                   tags={"logzbench.model": model, "logzbench.dataset": dataset, GROUP_TAG: model},
                   artifacts=artifacts, run_name=train_key(model), start_time=start_time, end_time=end_time)


# --------------------------------------------------------------------------- repeated trials
def trials_key(experiment: str, setting: Mapping[str, Any]) -> str:
    """Deterministic key of one repeated-trials setting, e.g. ``trials/grid/reference=trw/sigma_pair=0.5``."""
    return "/".join(["trials", experiment] + [f"{k}={_fmt(v)}" for k, v in setting.items()])


def log_trials(experiment: str, setting: Mapping[str, Any], trials, summary, *, uri: str | None = None,
               experiment_name: str = DEFAULT_EXPERIMENT, params: Mapping[str, Any] | None = None,
               artifacts: Iterable | Mapping | None = None, start_time: Any = None, end_time: Any = None) -> str:
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
                   tags={"logzbench.experiment": experiment, GROUP_TAG: f"trials/{experiment}"}, artifacts=artifacts,
                   run_name=key.removeprefix("trials/"), start_time=start_time, end_time=end_time)


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
