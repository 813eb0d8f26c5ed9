"""Retries of MLflow store operations, and the error of a store that cannot be reached.

Many parallel writers make SQLite answer "database is locked" and PostgreSQL report deadlocks,
serialisation failures or its connection limit; :func:`_retry` retries such transient errors with
jittered exponential backoff.  A tracking server (``http(s)://``, :mod:`logzbench.tracking.server`)
that cannot be reached fails the call after MLflow's own HTTP retries, bounded by
:data:`HTTP_DEFAULTS`, with a :class:`~logzbench.errors.TrackingError` naming the URI (its password
redacted) and what to do, instead of a job hanging for minutes.
"""

from __future__ import annotations

import os
import random
import re
import time
from typing import Any, Callable, Mapping, TypeVar
from urllib.parse import urlparse

from .uris import is_http_uri

T = TypeVar("T")

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

# --------------------------------------------------------------------------- transient and unreachable stores
# Transient errors of a database store: SQLite's lock, PostgreSQL's deadlock / serialisation
# failure / connection limit (and a concurrent insert of the same row: _is_locked_error).  Retried
# by _retry.
_LOCKED = (
    "database is locked",
    "database table is locked",
    "database is busy",
    "sqlite_busy",
    "unable to open database file",
    "deadlock detected",
    "could not serialize access",
    "too many clients already",
    "remaining connection slots are reserved",
    "the database system is starting up",
)
# A store that cannot be reached: the HTTP client's connection errors (after MLflow's own retries:
# "API request to ... failed with exception ... Max retries exceeded") or a database's.
_UNREACHABLE = (
    "max retries exceeded",
    "failed to establish a new connection",
    "connection refused",
    "connection aborted",
    "connection reset",
    "remotedisconnected",
    "remote end closed connection",
    "read timed out",
    "connect timeout",
    "failed with timeout exception",
    "timed out",
    "name or service not known",
    "temporary failure in name resolution",
    "no route to host",
    "network is unreachable",
    "could not connect to server",
    "server closed the connection unexpectedly",
)


def _is_locked_error(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}".lower()
    if any(s in text for s in _LOCKED):
        return True
    # two writers inserting the same row at once (e.g. concurrent set_experiment_tag on PostgreSQL,
    # where MLflow's upsert is a SELECT then an INSERT): the retry updates the row the other wrote.
    # A name that really exists (create_experiment: RESOURCE_ALREADY_EXISTS, "Experiment(name=...) already
    # exists") is no transient error.
    return (
        ("duplicate key value violates unique constraint" in text or "unique constraint failed" in text)
        and "resource_already_exists" not in text
        and not re.search(r"\(name=[^)]*\) already exists", text)
    )


def _is_unreachable_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the tracking store (server or database) could not be reached."""
    from ..errors import TrackingError

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
    from ..errors import TrackingError

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
        f"{what} {uri} is unreachable ({reason}); {tried}. Start the server (documentation: Tracking, "
        f"'A tracking server on PostgreSQL', "
        f"python -m logzbench.tracking.server) or point tracking.uri / MLFLOW_TRACKING_URI at a running one; "
        f"a rerun then picks up where this job stopped."
    )


def _retry(
    fn: Callable[..., T],
    *args: Any,
    attempts: int = 12,
    base_delay: float = 0.05,
    max_delay: float = 5.0,
    **kwargs: Any,
) -> T:
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
        except Exception as exc:
            unreachable = _is_unreachable_error(exc)
            if unreachable and (i == attempts - 1 or "API request to" in str(exc)):
                raise _unreachable_error(exc, _failing_uri(fn, kwargs, exc), time.monotonic() - t0, i + 1) from exc
            if i == attempts - 1 or not (unreachable or _is_locked_error(exc)):
                raise
            delay = min(max_delay, base_delay * (2**i))
            time.sleep(delay * (0.5 + random.random()))
    raise AssertionError("unreachable")  # pragma: no cover
