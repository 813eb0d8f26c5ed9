"""What the warm start's client (:mod:`logzbench.pipeline.warm`) and server
(:mod:`logzbench.pipeline.warm_server`) share: the server's key and socket, the registered jobs, the
way a job runs in a process, and the messages on the socket.

Both sides must agree on these (a client computes the socket it connects to, a server the jobs it
accepts), and the server must not import the client's module: ``python -m logzbench.pipeline.warm``
runs that module as ``__main__``, so importing it by name again would load a second copy.  Only the
standard library is imported here.
"""

from __future__ import annotations

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
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from .trusted import private_dir

#: Environment variable: ``0``/``false``/``off``/``no`` runs every job in its own process.
ENV_ENABLE = "LOGZBENCH_WARM"
#: set by the workflow (workflow/rules/common.smk, config ``warm_start``) for the jobs its Snakemake process runs:
#: "1" or "0".  An environment variable, not a rule's param: how a job is run must not make Snakemake rerun it.
ENV_WORKFLOW = "LOGZBENCH_WARM_JOBS"
#: Environment variable: directory of the sockets, locks and server logs (default: the temporary
#: directory's ``logzbench-<uid>``).
ENV_DIR = "LOGZBENCH_WARM_DIR"
#: Seconds a server waits for the next job before it exits.
DEFAULT_IDLE = 60.0
#: the longest path a Unix socket may be bound to or reached at (bytes; ``sun_path`` less its NUL)
MAX_SOCKET_PATH = 107
_FALSE = {"0", "false", "off", "no"}
#: The signals the client forwards to its job's process (a cancelled job stops), and whose
#: disposition that process takes from the client where the client ignores them (request
#: ``"ignore"``: a caller under ``nohup`` or in a background job runs its job as it would itself).
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: The functions a warm server runs (``module:function``): the workflow's jobs.  Any other target
#: runs in the caller's own process.
JOBS = frozenset(
    {
        *(
            f"logzbench.pipeline.jobs:{name}"
            for name in ("prepare_job", "train_job", "run_estimate_sweep", "trials_job", "init_tracking_job")
        ),
        "logzbench.pipeline.diagnose:diagnose_job",
        "logzbench.report:report_job",
        "logzbench.trials:report_trials",
    }
)
#: Environment variable: more targets (comma-separated) a server started with it also runs, for
#: tests and extensions.  Read by the server at start, from its starter's (the same user's)
#: environment, and part of its key; never taken from a request.
ENV_EXTRA_JOBS = "LOGZBENCH_WARM_EXTRA_JOBS"
#: Environment variables read when the interpreter and its libraries start (a forked job cannot
#: change them afterwards): part of the server's key.  The locale (``LC_*``, ``LANG``,
#: ``LANGUAGE``) and ``TZ`` among them: Python sets its ``LC_CTYPE`` locale, the UTF-8 mode and the
#: encoding of its streams from them at start, and the ``time`` module reads the time zone when
#: imported, so a job forked from a server started under another locale would not run as it
#: does in its own process.
_STARTUP_ENV = (
    "LC_",
    "LANG",
    "TZ",
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


class _Unavailable(RuntimeError):
    """No warm server could be safely reached or started."""


# --------------------------------------------------------------------------- where
def enabled(warm: bool | None = None) -> bool:
    """Whether jobs go to a warm server: never when ``$LOGZBENCH_WARM`` is off or the platform cannot tell
    who is at the other end of a socket (no ``SO_PEERCRED``); else ``warm`` when given, else the workflow's
    ``$LOGZBENCH_WARM_JOBS`` when set, else on."""
    if os.environ.get(ENV_ENABLE, "").strip().lower() in _FALSE or not hasattr(socket, "SO_PEERCRED"):
        return False
    if warm is not None:
        return bool(warm)
    return os.environ.get(ENV_WORKFLOW, "").strip().lower() not in _FALSE


def server_pythonpath() -> str:
    """The ``$PYTHONPATH`` a server is started with: the caller's entries, each made absolute against
    the caller's working directory (as the job in its own process would resolve them), without the
    empty ones.  An empty entry means "the current directory", and the server must never import
    from a job's directory (anybody may have written ``yaml.py`` into a shared one); the server
    runs in its own directory (``python -P``), which would resolve a relative entry elsewhere."""
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    return os.pathsep.join(os.path.abspath(e) for e in entries if e)


def _code_key() -> str:
    """Hash of what a server's imports depend on: the interpreter, its ``$PYTHONPATH``
    (:func:`server_pythonpath`), the package's directory and every module file of the package
    (path, size, modification time).  (Not ``sys.path``, which differs between Snakemake's own
    process, which stops the server, and its jobs' scripts.)"""
    root = Path(__file__).resolve().parents[1]  # the package, not only this subpackage
    h = hashlib.sha256()
    h.update(f"{sys.executable}\0{sys.version}\0{server_pythonpath()}\0{root}".encode())
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


def _peer(conn: socket.socket) -> tuple[int, int] | None:
    """The pid and uid of the process at the other end of a Unix socket (``SO_PEERCRED``: for a
    client's connection, the server that listens; None where the platform lacks it)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid, uid


def _peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (None where the platform cannot tell)."""
    peer = _peer(conn)
    return None if peer is None else peer[1]


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


def _allowed_jobs() -> frozenset:
    extra = os.environ.get(ENV_EXTRA_JOBS, "")
    return JOBS | {t.strip() for t in extra.split(",") if t.strip()}


# --------------------------------------------------------------------------- messages
def _send(conn: socket.socket, message: Mapping[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _messages(conn: socket.socket, idle: Callable[[], None] | None = None) -> Iterator[dict]:
    """The messages on ``conn`` until the other end closes it; ``idle`` (if given) is called
    every second without one (it may raise to give up waiting)."""
    buf = b""
    while True:
        while idle is not None and not select.select([conn], [], [], 1.0)[0]:
            idle()
        chunk = conn.recv(65536)
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield json.loads(line)
