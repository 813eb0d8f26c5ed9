"""Tracking URIs: which store a run goes to, refused before any job when MLflow cannot use it.

The tracking URI is taken from, in order: the ``uri`` argument (e.g. the workflow's
``tracking.uri`` config key), the ``MLFLOW_TRACKING_URI`` environment variable, and the
default ``sqlite:///<absolute working directory>/mlflow.db``.  A relative SQLite path is made
absolute so that every process of a workflow writes the same file.  Artifacts of a new
experiment go to ``mlartifacts/`` next to the SQLite file (or the given directory).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlparse

#: the forms of a tracking URI logzbench accepts (:func:`resolve_tracking_uri`), for messages
TRACKING_URI_FORMS = (
    "sqlite:///PATH.db (or a path ending in .db, .sqlite or .sqlite3), http(s)://HOST:PORT "
    "(a tracking server), or a database URI such as postgresql://USER@HOST:5432/DB"
)
#: database engines of MLflow's SQL store (``<engine>://`` or ``<engine>+<driver>://``)
_DB_ENGINES = ("sqlite", "postgresql", "mysql", "mssql")
_DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def _file_store_allowed() -> bool:
    """Whether MLflow's file store is enabled (``MLFLOW_ALLOW_FILE_STORE=true``; MLflow 3 refuses it otherwise)."""
    return os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() in ("true", "1")


def _bad_uri(source: str, uri: str, why: str = ""):
    from ..errors import TrackingError

    return TrackingError(f"{source} {uri!r} is not a tracking URI logzbench can use{why}; give {TRACKING_URI_FORMS}")


def resolve_tracking_uri(
    uri: str | None = None, workdir: str | os.PathLike | None = None, *, key: str | None = None
) -> str:
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
        from ..errors import TrackingError

        raise TrackingError(
            f"{source} {uri!r} has no scheme: a tracking server's URI is http://{uri.rstrip('/')} (or https://...)"
        )
    base = Path(workdir) if workdir is not None else Path.cwd()
    if uri.startswith("sqlite:///"):
        rest = uri[len("sqlite:///") :]
        if not rest.startswith("/"):  # relative: sqlite:///mlflow.db
            return "sqlite:///" + str((base / rest).resolve())
        return uri
    if "://" not in uri:  # a plain path: a .db file, or (where allowed) a file store directory
        p = (base / uri).resolve()
        if p.suffix in _DB_SUFFIXES:
            return "sqlite:///" + str(p)
        if not _file_store_allowed():
            raise _bad_uri(
                source,
                uri,
                " (a path without .db is MLflow's file store, which MLflow refuses unless "
                "MLFLOW_ALLOW_FILE_STORE=true)",
            )
        return p.as_uri()
    scheme = urlparse(uri).scheme.lower()
    if scheme == "file" and not _file_store_allowed():
        raise _bad_uri(
            source, uri, " (file:// is MLflow's file store, which MLflow refuses unless MLFLOW_ALLOW_FILE_STORE=true)"
        )
    if scheme != "file" and scheme.split("+", 1)[0] not in _DB_ENGINES and not scheme.startswith("databricks"):
        raise _bad_uri(source, uri, f" (unknown scheme {scheme + '://' if scheme else 'none'})")
    return uri


def is_http_uri(uri: str | None) -> bool:
    """Whether ``uri`` is a tracking server's (``http://`` or ``https://``)."""
    return isinstance(uri, str) and uri.lower().startswith(("http://", "https://"))


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else ``None``."""
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///") :].split("?", 1)[0])
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
