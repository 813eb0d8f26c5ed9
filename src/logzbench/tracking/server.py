"""Start an MLflow tracking server for the workflow: a PostgreSQL backend store and an artifact root.

Cluster runs (many jobs on many machines) should not write one SQLite file over a network file
system; they log to a tracking server instead.  This module starts ``mlflow server`` with

* a **backend store** (runs, params, metrics, tags): a SQLAlchemy URI, normally PostgreSQL
  (``postgresql://user:password@host:5432/mlflow``; needs the ``psycopg2`` driver, the
  ``psycopg2-binary`` package) -- MLflow creates its tables on the first start;
* an **artifact root** (the jobs' files): ``--artifacts-destination``, a directory (or an object
  store URI) the server writes to; jobs upload their artifacts *through* the server
  (``mlflow-artifacts:/``), so they need no shared file system;

and waits until the server answers on ``/health``.  Point the workflow at it with the config key
``tracking.uri`` (in a config file, or ``--config "tracking={'uri': 'http://HOST:PORT'}"``: Snakemake 9
refuses a dotted key) or ``MLFLOW_TRACKING_URI``.

From the shell (the server stays in the foreground until interrupted)::

    python -m logzbench.tracking.server --backend-store-uri postgresql://mlflow@127.0.0.1:5432/mlflow \\
        --artifacts-destination /shared/mlartifacts --host 0.0.0.0 --port 5000

From Python (tests, scripts)::

    with TrackingServer("postgresql://...", "/data/mlartifacts") as server:
        run_workflow(tracking_uri=server.uri)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Sequence
from urllib.parse import urlparse

from ..errors import TrackingError

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_WORKERS",
    "TrackingServer",
    "check_backend_store_uri",
    "free_port",
    "main",
    "server_command",
    "wait_until_up",
]

DEFAULT_PORT = 5000
DEFAULT_WORKERS = 4  # MLflow's default
#: Seconds to wait for a starting server (its first start creates MLflow's tables).
START_TIMEOUT = 300.0

#: SQLAlchemy dialects -> the driver module they need and the package that provides it
_DRIVERS = {
    "postgresql": ("psycopg2", "psycopg2-binary"),
    "postgresql+psycopg2": ("psycopg2", "psycopg2-binary"),
    "postgresql+psycopg": ("psycopg", "psycopg[binary]"),
    "postgresql+pg8000": ("pg8000", "pg8000"),
    "mysql": ("MySQLdb", "mysqlclient"),
    "mysql+pymysql": ("pymysql", "PyMySQL"),
}


def check_backend_store_uri(uri: str) -> str:
    """``uri`` if MLflow can use it as a backend store here, else :class:`TrackingError` saying why
    (no scheme, or the database driver is not installed)."""
    scheme = urlparse(uri).scheme.lower()
    if not scheme or "://" not in uri:
        raise TrackingError(
            f"backend store URI {uri!r} is not a database URI (e.g. postgresql://user:password@host:5432/mlflow)"
        )
    if scheme in _DRIVERS:
        module, package = _DRIVERS[scheme]
        if importlib.util.find_spec(module) is None:
            raise TrackingError(f"backend store {scheme}:// needs the Python driver {module!r}: pip install {package}")
    return uri


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _artifact_root(dest: str | os.PathLike) -> str:
    """An artifact destination as MLflow wants it: a URI as it is, a local path absolute."""
    dest = os.fspath(dest)
    if "://" in dest:
        return dest
    path = Path(dest).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


def server_command(
    backend_store_uri: str,
    artifacts_destination: str | os.PathLike,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    workers: int = DEFAULT_WORKERS,
    allowed_hosts: str | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The ``mlflow server`` command line: the backend store, artifacts served through the server
    from ``artifacts_destination`` (``--serve-artifacts``), the address and the worker count.

    Bound to a non-loopback address without ``allowed_hosts``, the server also accepts requests
    addressed to this machine's host name (MLflow's default accepts only localhost and private IP
    addresses in the ``Host`` header).
    """
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        backend_store_uri,
        "--serve-artifacts",
        "--artifacts-destination",
        _artifact_root(artifacts_destination),
        "--host",
        host,
        "--port",
        str(int(port)),
        "--workers",
        str(int(workers)),
    ]
    if allowed_hosts is None and host not in ("127.0.0.1", "localhost", "::1"):
        names = {socket.gethostname(), socket.getfqdn()} - {""}
        from mlflow.server.security_utils import get_default_allowed_hosts

        allowed_hosts = ",".join(get_default_allowed_hosts() + sorted(names) + sorted(f"{n}:*" for n in names))
    if allowed_hosts:
        cmd += ["--allowed-hosts", allowed_hosts]
    return cmd + list(extra_args)


def _answers(uri: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_until_up(
    uri: str, timeout: float = START_TIMEOUT, proc: subprocess.Popen | None = None, log: str | os.PathLike | None = None
) -> None:
    """Wait until the server at ``uri`` answers ``GET /health``; :class:`TrackingError` when ``proc``
    (the server's process) exits first or after ``timeout`` seconds (with the end of ``log``)."""
    t0 = time.monotonic()
    while not _answers(uri):
        why = None
        if proc is not None and proc.poll() is not None:
            why = f"the server exited with status {proc.returncode}"
        elif time.monotonic() - t0 > timeout:
            why = f"no answer on {uri}/health within {timeout:.0f} s"
        if why:
            tail = ""
            if log is not None and Path(log).is_file():
                tail = (
                    "\n--- end of the server's log "
                    + str(log)
                    + " ---\n"
                    + Path(log).read_text(errors="replace")[-3000:]
                )
            raise TrackingError(f"MLflow tracking server {uri} did not start: {why}{tail}")
        time.sleep(0.25)


def default_log(port: int) -> Path:
    """Where a server's output goes unless told: ``$XDG_STATE_HOME/logzbench/mlflow-server-<port>.log``
    (``~/.local/state/...`` without it) -- not the working directory, which is often a checkout."""
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(state) / "logzbench" / f"mlflow-server-{port}.log"


class TrackingServer:
    """An ``mlflow server`` process (in its own process group) on ``backend_store_uri`` with
    artifacts under ``artifacts_destination``; :meth:`start` returns once it answers, :meth:`stop`
    ends it.  A context manager.

    Parameters
    ----------
    backend_store_uri : str
        SQLAlchemy URI of the store, e.g. ``postgresql://mlflow@127.0.0.1:5432/mlflow``.
    artifacts_destination : path or URI
        The artifact root the server writes to (created when a local directory).
    host, port : str, int
        The address (``port=None``: a free one; ``host="0.0.0.0"`` for other machines).
    workers : int
        Server worker processes.
    log : path, optional
        The server's output (default: :func:`default_log`, ``mlflow-server-<port>.log`` in the user's
        state directory, outside any working tree).
    """

    def __init__(
        self,
        backend_store_uri: str,
        artifacts_destination: str | os.PathLike,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        workers: int = DEFAULT_WORKERS,
        log: str | os.PathLike | None = None,
        allowed_hosts: str | None = None,
        extra_args: Sequence[str] = (),
    ):
        self.backend_store_uri = check_backend_store_uri(backend_store_uri)
        self.artifacts_destination = _artifact_root(artifacts_destination)
        self.host = host
        self.port = int(port) if port else free_port("127.0.0.1" if host in ("0.0.0.0", "::") else host)
        self.workers = int(workers)
        self.log = Path(log) if log is not None else default_log(self.port)
        self.allowed_hosts = allowed_hosts
        self.extra_args = list(extra_args)
        self.proc: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        """The tracking URI clients use: ``http://<host>:<port>`` (loopback for a wildcard bind)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{host}:{self.port}"

    def command(self) -> list[str]:
        return server_command(
            self.backend_store_uri,
            self.artifacts_destination,
            host=self.host,
            port=self.port,
            workers=self.workers,
            allowed_hosts=self.allowed_hosts,
            extra_args=self.extra_args,
        )

    def start(self, timeout: float = START_TIMEOUT, wait: bool = True) -> "TrackingServer":
        """Start the server and (``wait``) wait until it answers (:meth:`wait`)."""
        if self.proc is not None and self.proc.poll() is None:
            return self.wait(timeout) if wait else self
        if _answers(self.uri, timeout=1.0):
            raise TrackingError(f"something already answers on {self.uri}: choose another port")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:  # (the child keeps its own descriptor)
            self.proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self.wait(timeout) if wait else self

    def wait(self, timeout: float = START_TIMEOUT) -> "TrackingServer":
        """Wait until the started server answers (:func:`wait_until_up`); stop it if it does not."""
        try:
            wait_until_up(self.uri, timeout, proc=self.proc, log=self.log)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """End the server's process group: SIGTERM, then SIGKILL after ``timeout`` seconds."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # the server's workers are in the same group; none may keep the port
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    def __enter__(self) -> "TrackingServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m logzbench.tracking.server``: start the server, print its URI once it answers, and
    keep it running until interrupted (Ctrl-C, SIGTERM)."""
    p = argparse.ArgumentParser(
        prog="python -m logzbench.tracking.server",
        description="Start an MLflow tracking server (PostgreSQL backend store, "
        "artifact root) for the logzbench workflow, and wait until it answers.",
    )
    p.add_argument(
        "--backend-store-uri",
        required=True,
        help="SQLAlchemy URI of the store, e.g. postgresql://mlflow:PASSWORD@dbhost:5432/mlflow",
    )
    p.add_argument(
        "--artifacts-destination",
        required=True,
        help="artifact root the server writes to: a directory (created) or an object store URI",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0: reachable from other machines)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--workers", type=int, default=DEFAULT_WORKERS, help="server worker processes")
    p.add_argument(
        "--allowed-hosts",
        help="Host headers the server accepts (MLflow's --allowed-hosts); default "
        "with a non-loopback --host: localhost, private IPs and this host's names",
    )
    p.add_argument("--log", help="server output file (default: $XDG_STATE_HOME/logzbench/mlflow-server-PORT.log)")
    p.add_argument("--timeout", type=float, default=START_TIMEOUT, help="seconds to wait for the server to answer")
    p.add_argument("mlflow_args", nargs="*", metavar="-- MLFLOW_ARG", help="more `mlflow server` options, after --")
    args = p.parse_args(argv)
    try:
        server = TrackingServer(
            args.backend_store_uri,
            args.artifacts_destination,
            host=args.host,
            port=args.port,
            workers=args.workers,
            log=args.log,
            allowed_hosts=args.allowed_hosts,
            extra_args=args.mlflow_args,
        )
        server.start(timeout=args.timeout)
    except TrackingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    shown = f"http://{socket.getfqdn()}:{server.port}" if args.host in ("0.0.0.0", "::") else server.uri
    print(
        f"MLflow tracking server ready: {shown} (pid {server.proc.pid}; log {server.log})\n"
        f"  point the workflow at it:  snakemake ... --config \"tracking={{'uri': '{shown}'}}\"\n"
        f"  or:                        export MLFLOW_TRACKING_URI={shown}",
        flush=True,
    )

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        while server.proc is not None and server.proc.poll() is None:
            time.sleep(1.0)
        status = server.proc.returncode if server.proc is not None else 0
        print(f"MLflow tracking server exited (status {status}); see {server.log}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
