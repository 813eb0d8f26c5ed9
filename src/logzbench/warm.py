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

* **Started on demand.**  The first job that finds no server starts one (``python -m
  logzbench.warm serve``, in its own session, output in ``<dir>/<key>.log``) under a file lock and
  waits for it; concurrent jobs wait for the same server.
* **Keyed by the code.**  The socket's name is a hash of the interpreter, ``sys.path`` and the
  size and modification time of every module of the package (:func:`fingerprint`), so an edited
  package, another virtual environment or another checkout gets its own server: a job never runs
  stale code.
* **Short-lived.**  A server exits after ``idle`` seconds without a job (default
  :data:`DEFAULT_IDLE`), and the workflow stops it when it ends (:func:`stop_server`: the socket
  is removed at once, running jobs finish).
* **Optional.**  ``LOGZBENCH_WARM=0`` (or ``run_job(..., warm=False)``; the workflow's config key
  ``warm_start``) runs the job in the calling process instead, as does any failure to reach or
  start a server; the workflow turns it off for jobs that a cluster executor runs on other
  machines.  The function, its arguments and its outputs are the same either way.

The parent never computes: it only imports, so no OpenMP, BLAS or CUDA state is forked.  Only
the standard library is imported here (the client costs a few milliseconds).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import io
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Iterator, Mapping

__all__ = ["DEFAULT_IDLE", "ENV_DIR", "ENV_ENABLE", "PRELOAD", "enabled", "fingerprint", "run_job",
           "server_address", "stop_server"]

#: Environment variable: ``0``/``false``/``off``/``no`` runs every job in its own process.
ENV_ENABLE = "LOGZBENCH_WARM"
#: Environment variable: directory of the sockets, locks and server logs (default: the temporary
#: directory's ``logzbench-<uid>``).
ENV_DIR = "LOGZBENCH_WARM_DIR"
#: Seconds a server waits for the next job before it exits.
DEFAULT_IDLE = 60.0
#: Seconds a job waits for a starting server before it runs in its own process.
START_TIMEOUT = 180.0
#: Modules the server imports before it accepts jobs (missing ones are skipped).
PRELOAD = (
    "numpy", "torch", "pandas", "scipy.special", "yaml",
    "mlflow", "mlflow.tracking", "mlflow.entities", "mlflow.store.tracking.sqlalchemy_store",
    "logzbench.jobs", "logzbench.api", "logzbench.training", "logzbench.trials", "logzbench.report",
    "logzbench.tracking", "logzbench.data", "logzbench.plotting", "matplotlib.pyplot",
)
_FALSE = {"0", "false", "off", "no"}


# --------------------------------------------------------------------------- where
def enabled(warm: bool | None = None) -> bool:
    """Whether jobs go to a warm server: ``warm`` when given, else ``$LOGZBENCH_WARM`` (default on)."""
    if os.environ.get(ENV_ENABLE, "").strip().lower() in _FALSE:
        return False
    return True if warm is None else bool(warm)


def fingerprint() -> str:
    """Hash of what a server's imports depend on: the interpreter, ``$PYTHONPATH``, the package's
    directory and every module file of the package (path, size, modification time).  (Not
    ``sys.path``, which differs between Snakemake's own process, which stops the server, and
    its jobs' scripts.)"""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    h.update(f"{sys.executable}\0{sys.version}\0{os.environ.get('PYTHONPATH', '')}\0{root}".encode())
    for p in sorted(root.rglob("*.py")):
        st = p.stat()
        h.update(f"\0{p.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()[:20]


def _base_dir() -> Path:
    d = Path(os.environ.get(ENV_DIR) or Path(tempfile.gettempdir()) / f"logzbench-{os.getuid()}")
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    return d


def server_address(key: str | None = None) -> Path:
    """The socket of the server for this code (:func:`fingerprint`)."""
    return _base_dir() / f"{key or fingerprint()}.sock"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- running a job
def _redirect(log: str | os.PathLike | None) -> None:
    """Send this process's output (file descriptors 1 and 2, and Python's streams) to ``log``."""
    if log is None:
        return
    fd = os.open(os.fspath(log), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    stream = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
    sys.stdout = sys.stderr = stream


def _execute(target: str, kwargs: Mapping[str, Any], threads: int | None) -> None:
    """Import ``module:function`` and call it with ``kwargs`` after setting the torch thread count."""
    module, _, name = target.partition(":")
    if not module or not name:
        raise ValueError(f"job target {target!r} is not 'module:function'")
    if threads:
        import torch

        torch.set_num_threads(int(threads))
    getattr(importlib.import_module(module), name)(**dict(kwargs))


def run_job(target: str, *, log: str | os.PathLike | None = None, threads: int | None = None,
            warm: bool | None = None, **kwargs: Any) -> None:
    """Run ``target`` (``"module:function"``) with ``kwargs``, its output in ``log``.

    On a warm server when :func:`enabled`, else (or when no server can be reached or started) in
    this process.  A failed job raises :class:`SystemExit` with status 1 (its traceback is in the
    log); the keyword arguments must be JSON values.
    """
    if enabled(warm):
        try:
            status = _submit(target, kwargs, log, threads)
        except _Unavailable as exc:
            print(f"logzbench.warm: {exc}; running the job in this process", file=sys.stderr)
        else:
            if status:
                print(f"logzbench: job {target} failed (exit status {status}); see {log}", file=sys.stderr)
                raise SystemExit(status)
            return
    _redirect(log)
    _execute(target, kwargs, threads)


# --------------------------------------------------------------------------- client
class _Unavailable(RuntimeError):
    """No warm server could be reached or started."""


def _connect(address: Path) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(os.fspath(address))
    except OSError:
        s.close()
        return None
    return s


def _start_server(address: Path, idle: float) -> subprocess.Popen:
    log = open(address.with_suffix(".log"), "ab")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "logzbench.warm", "serve", "--socket", os.fspath(address), "--idle", str(idle)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
    finally:
        log.close()


def _server(address: Path, *, start: bool = True, idle: float = DEFAULT_IDLE) -> socket.socket:
    """A connection to the server at ``address``; start it first (once, under a lock) if needed."""
    conn = _connect(address)
    if conn is not None or not start:
        if conn is None:
            raise _Unavailable(f"no warm server at {address}")
        return conn
    with _locked(address.with_suffix(".lock")):
        conn = _connect(address)  # another job started it while we waited for the lock
        if conn is not None:
            return conn
        with contextlib.suppress(FileNotFoundError):
            address.unlink()  # a dead server's socket
        proc = _start_server(address, idle)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            conn = _connect(address)
            if conn is not None:
                return conn
            if proc.poll() is not None:
                raise _Unavailable(f"the warm server exited with status {proc.returncode} "
                                   f"(see {address.with_suffix('.log')})")
            time.sleep(0.05)
        proc.terminate()
        raise _Unavailable(f"the warm server did not start within {START_TIMEOUT:g} s")


def _send(conn: socket.socket, message: Mapping[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _messages(conn: socket.socket) -> Iterator[dict]:
    buf = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield json.loads(line)


def _submit(target: str, kwargs: Mapping[str, Any], log: str | os.PathLike | None, threads: int | None) -> int:
    """Run the job on the warm server; return its exit status (0: success)."""
    request = {"op": "run", "target": target, "kwargs": dict(kwargs), "threads": threads,
               "log": None if log is None else os.path.abspath(log), "cwd": os.getcwd(), "env": dict(os.environ)}
    try:
        payload = json.dumps(request)
    except (TypeError, ValueError) as exc:
        raise _Unavailable(f"the job's arguments are not JSON values ({exc})") from None
    conn = _server(server_address())
    child = None

    def forward(signum, frame):  # a cancelled Snakemake job stops its computation
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signum)
        raise SystemExit(128 + signum)

    old = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        conn.sendall(payload.encode() + b"\n")
        for msg in _messages(conn):
            if "pid" in msg:
                child = int(msg["pid"])
            elif "status" in msg:
                return int(msg["status"])
        raise _Unavailable("the warm server closed the connection before the job ended") if child is None \
            else RuntimeError(f"the job's process {child} ended without a status (killed?); see {log}")
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        conn.close()


def stop_server(key: str | None = None) -> bool:
    """Ask the server for this code to stop: its socket goes at once (a new job starts a new
    server), running jobs finish.  Returns whether a server was running."""
    try:
        conn = _server(server_address(key), start=False)
    except _Unavailable:
        return False
    with conn:
        _send(conn, {"op": "stop"})
        with contextlib.suppress(OSError):
            conn.recv(16)
    return True


# --------------------------------------------------------------------------- server
def _child(conn: socket.socket, request: Mapping[str, Any]) -> int:
    """In the forked child: become the job's process and run it; return its exit status."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    _send(conn, {"pid": os.getpid()})

    def watch():  # the job's client went away (killed): so does the job
        with contextlib.suppress(OSError):
            while conn.recv(1):
                pass
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    try:
        _redirect(request.get("log"))
        _execute(request["target"], request.get("kwargs") or {}, request.get("threads"))
        status = 0
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - the job's failure, reported in its log
        traceback.print_exc()
        status = 1
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    return status


def _warm_matplotlib() -> None:
    """Draw one small figure, so that the children inherit matplotlib's loaded fonts and caches
    (Agg only: no threads, nothing that must not cross a fork)."""
    if "matplotlib.pyplot" not in sys.modules:
        return
    try:
        plt = sys.modules["matplotlib.pyplot"]
        fig, ax = plt.subplots(figsize=(2, 2))
        ax.plot([0, 1], [0, 1], marker="o", label="x")
        ax.set_title("warm-up", fontsize=9)
        ax.legend()
        fig.savefig(io.BytesIO(), format="png", dpi=50)
        plt.close(fig)
    except Exception as exc:  # noqa: BLE001 - an optimisation only
        print(f"matplotlib warm-up: {type(exc).__name__}: {exc}", flush=True)


def serve(address: str | os.PathLike, idle: float = DEFAULT_IDLE, preload=PRELOAD) -> None:
    """Import ``preload``, then run jobs sent to ``address`` until idle for ``idle`` seconds or stopped."""
    address = Path(address)
    t0 = time.perf_counter()
    os.environ.setdefault("MPLBACKEND", "Agg")
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a missing optional module
            print(f"preload {name}: {type(exc).__name__}: {exc}", flush=True)
    _warm_matplotlib()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = address.with_name(f".{address.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    sock.bind(os.fspath(tmp))
    sock.listen(64)
    os.replace(tmp, address)  # clients see the socket only once it accepts jobs
    inode = address.stat().st_ino
    print(f"pid {os.getpid()} serving {address} after {time.perf_counter() - t0:.1f} s of imports", flush=True)

    def ours() -> bool:
        try:
            return address.stat().st_ino == inode
        except FileNotFoundError:
            return False

    def terminate(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, terminate)
    children: set[int] = set()
    last, stopping = time.monotonic(), False
    try:
        while True:
            for pid in list(children):
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(pid, os.WNOHANG)[0]:
                        children.discard(pid)
                        last = time.monotonic()
            if not children and (stopping or time.monotonic() - last > idle or not ours()):
                break
            if stopping:
                time.sleep(0.1)
                continue
            try:
                ready, _, _ = select.select([sock], [], [], 0.5)
            except InterruptedError:
                continue
            if not ready:
                continue
            conn, _ = sock.accept()
            last = time.monotonic()
            try:
                line = b""
                while not line.endswith(b"\n"):
                    chunk = conn.recv(1 << 20)
                    if not chunk:
                        break
                    line += chunk
                request = json.loads(line) if line.strip() else {}
            except (OSError, ValueError) as exc:
                print(f"bad request: {exc}", flush=True)
                conn.close()
                continue
            if request.get("op") == "stop":
                if ours():
                    address.unlink()
                stopping = True
                with contextlib.suppress(OSError):
                    conn.sendall(b"ok\n")
                conn.close()
                continue
            pid = os.fork()
            if pid == 0:  # the job's process
                sock.close()
                status = 1
                try:
                    status = _child(conn, request)
                    _send(conn, {"status": status})
                finally:
                    os._exit(status if isinstance(status, int) and 0 <= status < 256 else 1)
            conn.close()
            children.add(pid)
            print(f"job {pid}: {request.get('target')} (log {request.get('log')})", flush=True)
    finally:
        sock.close()
        if ours():
            with contextlib.suppress(OSError):
                address.unlink()
        print(f"pid {os.getpid()} stopped", flush=True)


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m logzbench.warm", description=__doc__.splitlines()[0])
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
