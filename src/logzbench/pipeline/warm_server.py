"""The warm server: import torch, MLflow and logzbench once, then fork one process per job.

:func:`serve` listens on a Unix socket (only its own uid's connections, only registered jobs),
forks a child per job that becomes the job's process (:func:`_child`: its directory, environment,
log and thread count), reaps it and sends its exit status and resource usage back to the client.
Started as ``python -m logzbench.pipeline.warm serve`` by the client (:mod:`logzbench.pipeline.warm`),
whose module docstring describes the whole scheme.  Only the standard library is imported at
module level; :func:`serve` imports what :data:`PRELOAD` names before it accepts jobs.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Mapping

from .usage import measure
from .warm_common import DEFAULT_IDLE, SIGNALS, _allowed_jobs, _execute, _peer_uid, _redirect, _send

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


def _say(message: str) -> None:
    """One line in the server's log; a log that cannot be written (a full warm directory) loses the
    line, never the server (the jobs write their own logs)."""
    with contextlib.suppress(OSError):
        os.write(1, message.encode(errors="replace") + b"\n")


def _child(conn: socket.socket, request: Mapping[str, Any]) -> int:
    """In the forked child: become the job's process and run it; return its exit status."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    for signum in request.get("ignore") or ():  # ignored by the caller (nohup, a background job): here too
        if signum in SIGNALS:
            signal.signal(signum, signal.SIG_IGN)

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
        _say(f"matplotlib warm-up: {type(exc).__name__}: {exc}")


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
            _say(f"preload {name}: {type(exc).__name__}: {exc}")
    _warm_matplotlib()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # a temporary name no longer than the address (a Unix socket path has at most 107 bytes, and the
    # client checks nothing but its own connect), unique to this process
    tmp = address.with_name(f".{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        sock.bind(os.fspath(tmp))
        sock.listen(64)
        inode = os.stat(tmp).st_ino
        os.replace(tmp, address)  # clients see the socket only once it accepts jobs
    except BaseException:
        sock.close()
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise

    def ours() -> bool:
        try:
            return address.stat().st_ino == inode
        except FileNotFoundError:
            return False

    try:  # from here on, whatever ends the server removes its socket: none is left without a server
        _serve(sock, address, ours, idle, t0)
    finally:
        sock.close()
        if ours():
            with contextlib.suppress(OSError):
                address.unlink()
        _say(f"pid {os.getpid()} stopped")


def _serve(sock: socket.socket, address: Path, ours, idle: float, t0: float) -> None:
    """The server's loop: accept, fork, reap, until idle, stopped or its socket replaced (``ours``)."""
    _say(f"pid {os.getpid()} serving {address} after {time.perf_counter() - t0:.1f} s of imports")
    wake = _install_signals()
    allowed = _allowed_jobs()
    children: dict[int, tuple[socket.socket, float]] = {}  # pid -> the client's connection, the fork's time
    last, stopping = time.monotonic(), False
    while True:
        if _reap(children):
            last = time.monotonic()
        if not children and (stopping or time.monotonic() - last > idle or not ours()):
            break
        if stopping:
            time.sleep(0.1)
            continue
        try:
            ready, _, _ = select.select([sock, wake[0]], [], [], 0.5)
        except InterruptedError:
            continue
        if wake[0] in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake[0], 4096)
        if sock not in ready:
            continue
        conn, _ = sock.accept()
        last = time.monotonic()
        request = _read_request(conn)
        if request is None:
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
            _say(f"refused target {target!r}: not a registered job")
            with contextlib.suppress(OSError):
                _send(conn, {"refused": f"{target!r} is not a registered job"})
            conn.close()
            continue
        started = time.monotonic()
        pid = _fork_job(sock, conn, request, wake)
        children[pid] = (conn, started)  # the job's status goes back on it when the server reaps the child
        with contextlib.suppress(OSError):
            _send(conn, {"pid": pid})
        _say(f"job {pid}: {target} (log {request.get('log')})")


def _install_signals() -> tuple[int, int]:
    """SIGTERM ends the server; a job that ends wakes the loop (its status goes back at once): SIGCHLD
    writes to the pipe returned, ``(read end, write end)``."""

    def terminate(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, terminate)
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    return wake_r, wake_w


def _reap(children: dict[int, tuple[socket.socket, float]]) -> bool:
    """Send each ended job's exit status and usage to its client and close its connection; whether any
    ended."""
    reaped = False
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
            reaped = True
    return reaped


def _read_request(conn: socket.socket) -> dict | None:
    """The connection's one JSON request line; ``None`` (the connection closed) when another user's process
    sent it or it is no JSON."""
    peer = _peer_uid(conn)
    if peer != os.getuid():  # only this user's own processes may run jobs here
        _say(f"refused a connection from uid {peer}")
        conn.close()
        return None
    try:
        line = b""
        while not line.endswith(b"\n"):
            chunk = conn.recv(1 << 20)
            if not chunk:
                break
            line += chunk
        return json.loads(line) if line.strip() else {}
    except (OSError, ValueError) as exc:
        _say(f"bad request: {exc}")
        conn.close()
        return None


def _fork_job(sock: socket.socket, conn: socket.socket, request: Mapping[str, Any], wake: tuple[int, int]) -> int:
    """Fork the job's process, which drops the server's socket, signals and pipe, runs the request and exits
    with its status; the child's pid."""
    pid = os.fork()
    if pid == 0:  # the job's process
        sock.close()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(wake[0])
        os.close(wake[1])
        status = 1
        try:
            status = _child(conn, request)
        finally:
            os._exit(status if isinstance(status, int) and 0 <= status < 256 else 1)
    return pid
