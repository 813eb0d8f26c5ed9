"""Warm start for workflow jobs: run a job function in a process forked from a warm server.

Every Snakemake job is a fresh Python process, and ``import torch`` plus ``import mlflow`` cost
about 3.5 s here -- more than most estimates compute.  :func:`run_job` instead sends the job
(a ``"module:function"`` target, its keyword arguments, the log file, the working directory, the
environment and the thread count) to a server on a Unix socket that has imported torch, MLflow
and logzbench once.  The server forks one child per job: the child takes the job's working
directory and environment, sends its output (``stdout`` and ``stderr``, Python's and C's) to
the job's log, sets the torch thread count, calls the function and exits; the job's exit status
comes back to the Snakemake job, which keeps waiting for it exactly as for a local computation.
Each job is thus still its own process (its own log, threads, crash and exit status), only its
imports are paid once.

* **Started on demand.**  The first job that finds no server starts one (``python -P -m
  logzbench.pipeline.warm serve``, in its own session, output in ``<dir>/<key>.log``) under a file
  lock and waits for it; concurrent jobs wait for the same server.  The server runs in the warm
  directory, never the job's, and imports nothing from there (:func:`_start_server`); each job
  takes its own directory in its forked process.
* **Keyed by the code.**  The socket's name is a hash of the interpreter, ``sys.path`` and the
  size and modification time of every module of the package (:func:`fingerprint`), so an edited
  package, another virtual environment or another checkout gets its own server: a job never runs
  stale code.
* **Short-lived.**  A server exits after ``idle`` seconds without a job (default
  :data:`DEFAULT_IDLE`), and the workflow stops it when it ends (:func:`stop_server`: the socket
  is removed at once, running jobs finish).
* **Optional.**  ``LOGZBENCH_WARM=0`` (or ``run_job(..., warm=False)``; the workflow's config key
  ``warm_start``) runs the job in the calling process instead, as does any failure to reach,
  start or keep a server (a full warm directory, a reset connection, a server that dies during
  the job: :func:`_submit`; one line on stderr, no traceback); the workflow turns it off for jobs
  that a cluster executor runs on other machines.  The function, its arguments and its outputs
  are the same either way.  A dead server's socket is replaced by the next server
  (:func:`_remove_stale`: only a socket of the user's own).

* **Private.**  The socket lives in a directory that must be the user's own, mode ``0700`` and
  not a symbolic link (:func:`logzbench.pipeline.trusted.private_dir`; the default
  ``$TMPDIR/logzbench-<uid>`` could be created first by anybody); otherwise the job runs in its own
  process with a one-line warning.  A client sends its request (which carries its environment)
  only to a server of its own uid, and the server accepts connections only from its own uid
  (``SO_PEERCRED``) and runs only the package's registered jobs (:data:`JOBS`).
* **The caller's process attributes.**  A forked job inherits the server's umask, CPU affinity,
  nice value, resource limits and the environment the interpreter read at start (the locale
  among it), so these are part of the server's key (:func:`fingerprint`): a job whose caller
  differs in any of them gets a server started by a caller like it.  Its exit status, ``os._exit``
  and signals included, is the one the server's ``waitpid`` sees.  SIGTERM, SIGINT and SIGHUP to
  the caller are forwarded to the job's process, except those the caller ignores (``nohup``, a
  background job), which stay ignored there too.

The parent never computes: it only imports, so no OpenMP, BLAS or CUDA state is forked.  Only
the standard library is imported here (the client costs a few milliseconds).

This module is the client (and ``python -m logzbench.pipeline.warm``); the server is
:mod:`logzbench.pipeline.warm_server`, and what both sides share (the key, the registered jobs,
running a job, the messages) is :mod:`logzbench.pipeline.warm_common`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Mapping

from .usage import this_process, write_usage
from .warm_common import (
    DEFAULT_IDLE,
    ENV_DIR,
    ENV_ENABLE,
    ENV_EXTRA_JOBS,
    JOBS,
    MAX_SOCKET_PATH,
    SIGNALS,
    _allowed_jobs,
    _base_dir,
    _code_key,
    _execute,
    _messages,
    _peer,
    _peer_uid,
    _redirect,
    _send,
    _Unavailable,
    enabled,
    fingerprint,
    server_address,
    server_pythonpath,
)
from .warm_server import PRELOAD, serve

__all__ = [
    "DEFAULT_IDLE",
    "ENV_DIR",
    "ENV_ENABLE",
    "ENV_EXTRA_JOBS",
    "JOBS",
    "PRELOAD",
    "enabled",
    "fingerprint",
    "run_job",
    "server_address",
    "stop_server",
]

#: Seconds a job waits for a starting server before it runs in its own process.
START_TIMEOUT = 180.0


def _open_nofollow(path: Path, flags: int) -> int:
    return os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = _open_nofollow(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- running a job
def run_job(
    target: str,
    *,
    log: str | os.PathLike | None = None,
    threads: int | None = None,
    warm: bool | None = None,
    usage: str | os.PathLike | None = None,
    **kwargs: Any,
) -> None:
    """Run ``target`` (``"module:function"``) with ``kwargs``, its output in ``log``.

    On a warm server when :func:`enabled` and ``target`` is a registered job (:data:`JOBS`), else
    (or when no server can be safely reached or started, with a one-line warning) in this process.
    A failed job raises :class:`SystemExit` with its exit status (1 for an exception; its traceback
    is in the log); the keyword arguments must be JSON values.  ``usage``: a file to write the job's
    own process's wall-clock time, peak memory and CPU time into (:mod:`logzbench.pipeline.usage`),
    whether it ran in a forked process or in this one.
    """
    if enabled(warm) and target in _allowed_jobs():
        try:
            status, row = _submit(target, kwargs, log, threads)
        except _Unavailable as exc:
            print(f"logzbench.pipeline.warm: {exc}; running the job in this process", file=sys.stderr)
        else:
            if usage is not None and row is not None:
                _write_usage(usage, row)
            if status:
                print(f"logzbench: job {target} failed (exit status {status}); see {log}", file=sys.stderr)
                raise SystemExit(status)
            return
    _redirect(log)
    t0 = time.monotonic()
    try:
        _execute(target, kwargs, threads)
    finally:
        if usage is not None:
            _write_usage(usage, this_process(time.monotonic() - t0))


def _write_usage(path: str | os.PathLike, row: Mapping[str, Any]) -> None:
    try:
        write_usage(path, row)
    except OSError as exc:  # a measurement only: the job's outputs stand
        print(f"logzbench: could not write the job's usage to {path}: {exc}", file=sys.stderr)


# --------------------------------------------------------------------------- client
def _connect(address: Path) -> socket.socket | None:
    """A connection to the server at ``address``, or None where none listens; raises
    :class:`_Unavailable` when the listener is not this user's (nothing is sent to it)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(os.fspath(address))
    except OSError:
        s.close()
        return None
    uid = _peer_uid(s)
    if uid != os.getuid():
        s.close()
        raise _Unavailable(
            f"the listener at {address} is "
            + ("of unknown owner (no SO_PEERCRED here)" if uid is None else f"uid {uid}'s, not yours")
        )
    return s


def _start_server(address: Path, idle: float) -> subprocess.Popen:
    """Start a server for ``address``, in the warm directory, never in the job's: ``python -P``
    (3.11+) and a working directory of the server's own keep the job's directory off its
    ``sys.path``, and its ``$PYTHONPATH`` is :func:`server_pythonpath` (no empty entry, which
    would name the working directory).  Each job still runs in its own directory (the request's
    ``cwd``)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if server_pythonpath():
        env["PYTHONPATH"] = server_pythonpath()
    fd = _open_nofollow(address.with_suffix(".log"), os.O_WRONLY | os.O_APPEND)
    try:
        return subprocess.Popen(
            [
                sys.executable,
                *(["-P"] if sys.version_info >= (3, 11) else []),
                "-m",
                "logzbench.pipeline.warm",
                "serve",
                "--socket",
                os.fspath(address),
                "--idle",
                str(idle),
            ],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            cwd=address.parent,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)


def _server(address: Path, *, start: bool = True, idle: float = DEFAULT_IDLE) -> socket.socket:
    """A connection to the server at ``address``; start it first (once, under a lock) if needed.  An
    address longer than a Unix socket allows could be bound (under a shorter name, then renamed) but
    never reached: refused here, before a server is started for nobody."""
    size = len(os.fsencode(address))
    if size > MAX_SOCKET_PATH:
        raise _Unavailable(
            f"the warm server's socket {address} is {size} bytes, more than the {MAX_SOCKET_PATH} a Unix "
            f"socket allows; set {ENV_DIR} to a shorter directory"
        )
    try:
        return _server_or_oserror(address, start=start, idle=idle)
    except OSError as exc:  # a read-only or full warm directory, a failed start: run the job here
        raise _Unavailable(f"warm server not usable: {exc}") from None


def _remove_stale(address: Path) -> None:
    """Remove a dead server's socket at ``address`` (nothing listens there): only a socket of this
    user's, never a link or another kind of file (:class:`_Unavailable` names it)."""
    try:
        st = os.lstat(address)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
        kind = (
            "a symbolic link"
            if stat.S_ISLNK(st.st_mode)
            else f"uid {st.st_uid}'s"
            if stat.S_ISSOCK(st.st_mode)
            else "a file"
        )
        raise _Unavailable(f"{address} is {kind}, not a socket of yours; remove it")
    with contextlib.suppress(FileNotFoundError):
        address.unlink()


def _server_or_oserror(address: Path, *, start: bool, idle: float) -> socket.socket:
    conn = _connect(address)
    if conn is not None or not start:
        if conn is None:
            raise _Unavailable(f"no warm server at {address}")
        return conn
    with _locked(address.with_suffix(".lock")):
        conn = _connect(address)  # another job started it while we waited for the lock
        if conn is not None:
            return conn
        _remove_stale(address)  # a dead server's socket
        proc = _start_server(address, idle)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            conn = _connect(address)
            if conn is not None:
                return conn
            if proc.poll() is not None:
                raise _Unavailable(
                    f"the warm server exited with status {proc.returncode} (see {address.with_suffix('.log')})"
                )
            time.sleep(0.05)
        proc.terminate()
        raise _Unavailable(f"the warm server did not start within {START_TIMEOUT:g} s")


def _submit(
    target: str, kwargs: Mapping[str, Any], log: str | os.PathLike | None, threads: int | None
) -> tuple[int, dict | None]:
    """Run the job on the warm server; return its exit status (0: success) and the usage of its
    process (:func:`logzbench.pipeline.usage.measure`; ``None`` where the server could not tell).

    Raises :class:`_Unavailable` (the caller runs the job in its own process) when the server fails:
    it refuses the job, resets or closes the connection before the job's status, or dies while the
    job runs (its process is then stopped first, so that the job never runs twice at once)."""
    ignored = [s for s in SIGNALS if signal.getsignal(s) == signal.SIG_IGN]
    request = {
        "op": "run",
        "target": target,
        "kwargs": dict(kwargs),
        "threads": threads,
        "log": None if log is None else os.path.abspath(log),
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "ignore": [int(s) for s in ignored],
    }
    try:
        payload = json.dumps(request)
    except (TypeError, ValueError) as exc:
        raise _Unavailable(f"the job's arguments are not JSON values ({exc})") from None
    conn = _server(server_address())  # a private directory and a server of this uid, or _Unavailable
    server = (_peer(conn) or (0, 0))[0]
    child = None

    def forward(signum, frame):  # a cancelled Snakemake job stops its computation
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signum)
        raise SystemExit(128 + signum)

    def watch_server():  # a server that dies mid-job leaves its job's process with nobody to report it
        if server and _gone(server):
            raise _Unavailable(f"the warm server (pid {server}) died during the job")

    # a signal the caller ignores (nohup, a background job) stays ignored, here and in the job's process
    old = {s: signal.signal(s, forward) for s in SIGNALS if s not in ignored}
    try:
        try:
            conn.sendall(payload.encode() + b"\n")
            for msg in _messages(conn, idle=watch_server):
                if "refused" in msg:
                    raise _Unavailable(f"the warm server refused the job: {msg['refused']}")
                if "pid" in msg:
                    child = int(msg["pid"])
                elif "status" in msg:
                    return int(msg["status"]), msg.get("usage")
            raise _Unavailable(
                "the warm server closed the connection before the job ended"
                if child is None
                else f"the warm server ended the connection without the status of the job's process {child}"
            )
        except (OSError, ValueError) as exc:  # a reset connection, a broken pipe, a garbled message
            raise _Unavailable(f"the warm server failed ({type(exc).__name__}: {exc})") from None
    except _Unavailable:
        if child:
            _stop_child(child, conn)
        raise
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        conn.close()


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # the pid is another user's now: ours has ended
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _stop_child(pid: int, conn: socket.socket, timeout: float = 10.0) -> None:
    """Stop the job's process ``pid`` whose server failed (it would go on with nobody to report
    its status) and wait for it to end, before the job runs again in the caller's process."""
    conn.close()  # the job's process kills itself when its client goes away ...
    if _gone(pid):  # (it has ended already: its pid may be another process's soon)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)  # ... and this kills it even while it holds the GIL
    deadline = time.monotonic() + timeout
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def stop_server(key: str | None = None) -> bool:
    """Ask the servers for this code (whatever process attributes they were started with; or the
    one of ``key``) to stop: their sockets go at once (a new job starts a new server), running
    jobs finish.  Returns whether a server was running."""
    try:
        base = _base_dir()
    except _Unavailable:
        return False
    addresses = [base / f"{key}.sock"] if key else sorted(base.glob(f"{_code_key()}-*.sock"))
    stopped = False
    for address in addresses:
        try:
            conn = _server(address, start=False)
        except _Unavailable:
            continue
        with conn:
            _send(conn, {"op": "stop"})
            with contextlib.suppress(OSError):
                conn.recv(16)
        stopped = True
    return stopped


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m logzbench.pipeline.warm", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run a server (normally started by the first job)")
    s.add_argument("--socket", default=None, help="socket path (default: the one for this code)")
    s.add_argument("--idle", type=float, default=DEFAULT_IDLE, help="exit after this many seconds without a job")
    sub.add_parser("stop", help="stop the server for this code")
    sub.add_parser("address", help="print the socket path for this code")
    args = p.parse_args(argv)
    if args.command == "serve":
        serve(args.socket or server_address(), idle=args.idle)
    elif args.command == "stop":
        print("stopped" if stop_server() else "no server running")
    else:
        print(server_address())
    return 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
