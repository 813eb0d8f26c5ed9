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
  logzbench.pipeline.warm serve``, in its own session, output in ``<dir>/<key>.log``) under a file
  lock and waits for it; concurrent jobs wait for the same server.
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

* **Private.**  The socket lives in a directory that must be the user's own, mode ``0700`` and
  not a symbolic link (:func:`logzbench.pipeline.trusted.private_dir`; the default
  ``$TMPDIR/logzbench-<uid>`` could be created first by anybody); otherwise the job runs in its own
  process with a one-line warning.  A client sends its request (which carries its environment)
  only to a server of its own uid, and the server accepts connections only from its own uid
  (``SO_PEERCRED``) and runs only the package's registered jobs (:data:`JOBS`).
* **The caller's process attributes.**  A forked job inherits the server's umask, CPU affinity,
  nice value, resource limits and the environment the interpreter read at start, so these are part
  of the server's key (:func:`fingerprint`): a job whose caller differs in any of them gets a
  server started by a caller like it.  Its exit status, ``os._exit`` and signals included, is the
  one the server's ``waitpid`` sees.

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
import resource
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Iterator, Mapping

from .trusted import private_dir
from .usage import measure, this_process, write_usage

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
    "numpy",
    "torch",
    "pandas",
    "scipy.special",
    "yaml",
    "mlflow",
    "mlflow.tracking",
    "mlflow.entities",
    "mlflow.store.tracking.sqlalchemy_store",
    "logzbench.pipeline.jobs",
    "logzbench.api",
    "logzbench.training",
    "logzbench.trials",
    "logzbench.report",
    "logzbench.tracking",
    "logzbench.data",
    "logzbench.plotting",
    "matplotlib.pyplot",
)
_FALSE = {"0", "false", "off", "no"}
#: The functions a warm server runs (``module:function``): the workflow's jobs.  Any other target
#: runs in the caller's own process.
JOBS = frozenset(
    {
        *(
            f"logzbench.pipeline.jobs:{name}"
            for name in ("prepare_job", "train_job", "run_estimate_sweep", "trials_job", "init_tracking_job")
        ),
        "logzbench.report:report_job",
        "logzbench.trials:report_trials",
    }
)
#: Environment variable: more targets (comma-separated) a server started with it also runs, for
#: tests and extensions.  Read by the server at start, from its starter's (the same user's)
#: environment, and part of its key; never taken from a request.
ENV_EXTRA_JOBS = "LOGZBENCH_WARM_EXTRA_JOBS"
#: Environment variables read when the interpreter and its libraries start (a forked job cannot
#: change them afterwards): part of the server's key.
_STARTUP_ENV = (
    "LD_",
    "PYTHON",
    "MALLOC_",
    "GLIBC_TUNABLES",
    "KMP_",
    "GOMP_",
    "MKL_",
    "OPENBLAS_",
    "TORCH_",
    "PYTORCH_",
    "CUDA_",
    ENV_EXTRA_JOBS,
)


# --------------------------------------------------------------------------- where
def enabled(warm: bool | None = None) -> bool:
    """Whether jobs go to a warm server: ``warm`` when given, else ``$LOGZBENCH_WARM`` (default on);
    never where the platform cannot tell who is at the other end of a socket (no ``SO_PEERCRED``)."""
    if os.environ.get(ENV_ENABLE, "").strip().lower() in _FALSE or not hasattr(socket, "SO_PEERCRED"):
        return False
    return True if warm is None else bool(warm)


def _code_key() -> str:
    """Hash of what a server's imports depend on: the interpreter, ``$PYTHONPATH``, the package's
    directory and every module file of the package (path, size, modification time).  (Not
    ``sys.path``, which differs between Snakemake's own process, which stops the server, and
    its jobs' scripts.)"""
    root = Path(__file__).resolve().parents[1]  # the package, not only this subpackage
    h = hashlib.sha256()
    h.update(f"{sys.executable}\0{sys.version}\0{os.environ.get('PYTHONPATH', '')}\0{root}".encode())
    for p in sorted(root.rglob("*.py")):
        st = p.stat()
        h.update(f"\0{p.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def process_attributes() -> dict:
    """What a forked job inherits from the server and must match its caller: umask, CPU affinity,
    nice value, resource limits and the start-up environment (:data:`_STARTUP_ENV`)."""
    mask = os.umask(0)
    os.umask(mask)
    limits = {
        name: resource.getrlimit(getattr(resource, name))
        for name in sorted(dir(resource))
        if name.startswith("RLIMIT_")
    }
    return {
        "umask": mask,
        "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "rlimits": limits,
        "env": sorted((k, v) for k, v in os.environ.items() if k.startswith(_STARTUP_ENV)),
    }


def fingerprint() -> str:
    """The server's key: the code (:func:`_code_key`) and the caller's process attributes
    (:func:`process_attributes`), so that a job never runs stale code nor under another caller's
    umask, affinity, nice value or limits."""
    attrs = hashlib.sha256(json.dumps(process_attributes(), sort_keys=True).encode()).hexdigest()[:8]
    return f"{_code_key()}-{attrs}"


def _base_dir() -> Path:
    """The private directory of the sockets, locks and server logs (raises :class:`_Unavailable`
    naming why it cannot be used: not the user's, not mode 0700, a link, not creatable)."""
    d = Path(os.environ.get(ENV_DIR) or Path(tempfile.gettempdir()) / f"logzbench-{os.getuid()}")
    try:
        return private_dir(d, private=True)
    except OSError as exc:
        raise _Unavailable(f"warm directory not usable: {exc}") from None


def server_address(key: str | None = None) -> Path:
    """The socket of the server for this code and these process attributes (:func:`fingerprint`)."""
    return _base_dir() / f"{key or fingerprint()}.sock"


def _open_nofollow(path: Path, flags: int) -> int:
    return os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)


def _peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (``SO_PEERCRED``; None where the
    platform lacks it)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = _open_nofollow(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


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


def _allowed_jobs() -> frozenset:
    extra = os.environ.get(ENV_EXTRA_JOBS, "")
    return JOBS | {t.strip() for t in extra.split(",") if t.strip()}


# --------------------------------------------------------------------------- client
class _Unavailable(RuntimeError):
    """No warm server could be safely reached or started."""


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
    fd = _open_nofollow(address.with_suffix(".log"), os.O_WRONLY | os.O_APPEND)
    try:
        return subprocess.Popen(
            [
                sys.executable,
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
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)


def _server(address: Path, *, start: bool = True, idle: float = DEFAULT_IDLE) -> socket.socket:
    """A connection to the server at ``address``; start it first (once, under a lock) if needed."""
    try:
        return _server_or_oserror(address, start=start, idle=idle)
    except OSError as exc:  # a read-only or full warm directory, a failed start: run the job here
        raise _Unavailable(f"warm server not usable: {exc}") from None


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
        with contextlib.suppress(FileNotFoundError):
            address.unlink()  # a dead server's socket
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


def _submit(
    target: str, kwargs: Mapping[str, Any], log: str | os.PathLike | None, threads: int | None
) -> tuple[int, dict | None]:
    """Run the job on the warm server; return its exit status (0: success) and the usage of its
    process (:func:`logzbench.pipeline.usage.measure`; ``None`` where the server could not tell)."""
    request = {
        "op": "run",
        "target": target,
        "kwargs": dict(kwargs),
        "threads": threads,
        "log": None if log is None else os.path.abspath(log),
        "cwd": os.getcwd(),
        "env": dict(os.environ),
    }
    try:
        payload = json.dumps(request)
    except (TypeError, ValueError) as exc:
        raise _Unavailable(f"the job's arguments are not JSON values ({exc})") from None
    conn = _server(server_address())  # a private directory and a server of this uid, or _Unavailable
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
            if "refused" in msg:
                raise _Unavailable(f"the warm server refused the job: {msg['refused']}")
            if "pid" in msg:
                child = int(msg["pid"])
            elif "status" in msg:
                return int(msg["status"]), msg.get("usage")
        raise (
            _Unavailable("the warm server closed the connection before the job ended")
            if child is None
            else RuntimeError(f"the job's process {child} ended without a status (killed?); see {log}")
        )
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        conn.close()


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


# --------------------------------------------------------------------------- server
def _child(conn: socket.socket, request: Mapping[str, Any]) -> int:
    """In the forked child: become the job's process and run it; return its exit status."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)

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
    except BaseException:
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
    except Exception as exc:
        print(f"matplotlib warm-up: {type(exc).__name__}: {exc}", flush=True)


def serve(address: str | os.PathLike, idle: float = DEFAULT_IDLE, preload=PRELOAD) -> None:
    """Import ``preload``, then run jobs sent to ``address`` until idle for ``idle`` seconds or stopped."""
    address = Path(os.path.abspath(address))
    os.chdir("/")  # hold no job's directory (each job takes its own)
    t0 = time.perf_counter()
    os.environ.setdefault("MPLBACKEND", "Agg")
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception as exc:
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
    # a job that ends wakes the loop (its status goes back at once): SIGCHLD writes to this pipe
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    allowed = _allowed_jobs()
    children: dict[int, tuple[socket.socket, float]] = {}  # pid -> the client's connection, the fork's time
    last, stopping = time.monotonic(), False
    try:
        while True:
            for pid in list(children):
                try:  # the job's own rusage: what the client's benchmark cannot see
                    done, wstatus, ru = os.wait4(pid, os.WNOHANG)
                except ChildProcessError:
                    done, wstatus, ru = pid, 1 << 8, None
                if done:
                    conn, started = children.pop(pid)
                    row = None if ru is None else measure(ru, time.monotonic() - started, pid, warm=True)
                    with contextlib.suppress(OSError):  # os._exit and signals included
                        code = os.waitstatus_to_exitcode(wstatus)
                        _send(conn, {"status": code if code >= 0 else 128 - code, "usage": row})
                    conn.close()
                    last = time.monotonic()
            if not children and (stopping or time.monotonic() - last > idle or not ours()):
                break
            if stopping:
                time.sleep(0.1)
                continue
            try:
                ready, _, _ = select.select([sock, wake_r], [], [], 0.5)
            except InterruptedError:
                continue
            if wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
            if sock not in ready:
                continue
            conn, _ = sock.accept()
            last = time.monotonic()
            peer = _peer_uid(conn)
            if peer != os.getuid():  # only this user's own processes may run jobs here
                print(f"refused a connection from uid {peer}", flush=True)
                conn.close()
                continue
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
            target = request.get("target")
            if request.get("op") != "run" or target not in allowed:
                print(f"refused target {target!r}: not a registered job", flush=True)
                with contextlib.suppress(OSError):
                    _send(conn, {"refused": f"{target!r} is not a registered job"})
                conn.close()
                continue
            started = time.monotonic()
            pid = os.fork()
            if pid == 0:  # the job's process
                sock.close()
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(wake_r)
                os.close(wake_w)
                status = 1
                try:
                    status = _child(conn, request)
                finally:
                    os._exit(status if isinstance(status, int) and 0 <= status < 256 else 1)
            children[pid] = (conn, started)  # the job's status goes back on it when the server reaps the child
            with contextlib.suppress(OSError):
                _send(conn, {"pid": pid})
            print(f"job {pid}: {target} (log {request.get('log')})", flush=True)
    finally:
        sock.close()
        if ours():
            with contextlib.suppress(OSError):
                address.unlink()
        print(f"pid {os.getpid()} stopped", flush=True)


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
