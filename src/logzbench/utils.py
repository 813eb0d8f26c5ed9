"""Small shared helpers: devices, thread counts, generators, atomic writes, log-space reductions."""

from __future__ import annotations

import contextlib
import contextvars
import errno
import functools
import json
import math
import numbers
import os
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch

from .errors import OutputError


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """Return a :class:`torch.device`; ``None`` or ``"auto"`` picks CUDA when available.

    Asking for ``"cuda"`` on a machine without CUDA raises a clear error instead of
    silently falling back.
    """
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested but no CUDA device is available; use --device cpu")
    return dev


#: environment variable that sets the torch thread count (see :func:`choose_threads`)
THREADS_ENV = "LOGZBENCH_THREADS"
#: seconds over which :func:`choose_threads` measures the CPUs other processes keep busy
BUSY_INTERVAL = 0.05


def choose_threads(requested: int | None = None, *, limit: int | None = None,
                   interval: float = BUSY_INTERVAL) -> int:
    """The torch intra-op thread count to use: one that does not oversubscribe the CPUs.

    Oversubscribed threads (more busy threads than free CPUs) do not share the CPUs gracefully:
    a Gibbs sweep's threads wait for each other at every step, and a run at 2 threads beside one
    other busy process was measured ten times slower than at 1 thread.

    Parameters
    ----------
    requested : int, optional
        An explicit count (an integer >= 1), used as is.
    limit : int, optional
        Upper bound of the automatic choice (not of an explicit or environment value); callers
        pass torch's current count, so that a count set earlier (``torch.set_num_threads``,
        ``OMP_NUM_THREADS``, a workflow rule's ``threads``) is never raised.
    interval : float
        Seconds over which the busy CPUs are measured (automatic choice only).

    Returns
    -------
    int
        In order: ``requested``; else the environment variable ``LOGZBENCH_THREADS`` (an integer
        >= 1; unset or empty: ignored); else the automatic choice: the CPUs this process may use
        (:func:`usable_cpus`) minus the CPUs other processes keep busy right now, at most
        ``limit``, at least 1.

    Raises
    ------
    ValueError
        When ``requested`` or ``LOGZBENCH_THREADS`` is not an integer >= 1.

    Notes
    -----
    "Busy right now" is measured directly, not read from the load average (a one-minute mean
    that lags by minutes): the idle time of each usable CPU in ``/proc/stat`` is read twice,
    ``interval`` seconds apart (0.05 s: five 10 ms ticks per CPU), and the busy fraction summed
    over those CPUs, less this process's own CPU time in the interval, is rounded to whole CPUs.
    Limits: it is one short look, taken once -- a process that pauses for that moment is missed,
    and one that starts later is not seen; it counts every kind of work on those CPUs (other
    users, other containers sharing the host's CPUs, the kernel); other processes sharing this
    process's cgroup CPU quota are not subtracted from the quota.  Without ``/proc/stat`` (not
    Linux) or on any error reading it, nothing counts as busy: the choice is the usable CPU count.
    """
    if requested is not None:
        return _positive_count(requested, "threads")
    env = os.environ.get(THREADS_ENV, "").strip()
    if env:
        try:
            value = int(env)
        except ValueError:
            raise ValueError(f"{THREADS_ENV} must be an integer >= 1 (a torch thread count), got {env!r}") from None
        return _positive_count(value, THREADS_ENV)
    usable = usable_cpus()
    free = usable - _busy_cpus(interval)
    if limit is not None:
        free = min(free, int(limit))
    return max(1, min(free, usable))


def set_threads(n: int | None = None) -> int:
    """Set torch's intra-op thread count to :func:`choose_threads` ``(n)`` and return it.

    The automatic choice (``n`` None, ``LOGZBENCH_THREADS`` unset) is at most torch's current
    count.  The setting stays; :func:`using_threads` restores the previous count afterwards.
    """
    import torch

    count = choose_threads(n, limit=torch.get_num_threads())
    torch.set_num_threads(count)
    return count


@contextlib.contextmanager
def using_threads(n: int | None = None) -> Iterator[int]:
    """Run the block with torch's thread count set to :func:`choose_threads` ``(n)`` (the automatic
    choice at most torch's current count); yield the count and restore the previous one after."""
    import torch

    previous = torch.get_num_threads()
    count = choose_threads(n, limit=previous)
    if count != previous:
        torch.set_num_threads(count)
    try:
        yield count
    finally:
        if torch.get_num_threads() != previous:
            torch.set_num_threads(previous)


def usable_cpus() -> int:
    """The CPUs this process may use: its CPU affinity set (else ``os.cpu_count()``), at most the
    cgroup CPU quota rounded up (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``) where one is set."""
    try:
        n = len(_affinity())
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    if quota is not None:
        n = min(n, quota)
    return max(1, n)


def _positive_count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= 1 (a torch thread count), got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1 (a torch thread count), got {int(value)}")
    return int(value)


def _affinity() -> set[int]:
    """The CPU ids this process may run on (raises AttributeError where the OS does not say)."""
    return os.sched_getaffinity(0)


def _cgroup_cpu_quota() -> int | None:
    """CPUs allowed by the tightest cgroup CPU quota above this process (rounded up), or None."""
    try:
        limits = []
        for path in _cgroup_quota_files():
            with contextlib.suppress(OSError, ValueError):
                text = Path(path).read_text().split()
                if path.endswith("cpu.max") and text and text[0] != "max":
                    limits.append(math.ceil(int(text[0]) / int(text[1])))
                elif path.endswith("cpu.cfs_quota_us") and text and int(text[0]) > 0:
                    period = int(Path(path).with_name("cpu.cfs_period_us").read_text())
                    limits.append(math.ceil(int(text[0]) / period))
        limits = [q for q in limits if q >= 1]
        return min(limits) if limits else None
    except Exception:  # never fail: no quota
        return None


def _cgroup_quota_files() -> list[str]:
    """Candidate quota files: this process's cgroup (v2) and its ancestors, the mounted root."""
    root = Path("/sys/fs/cgroup")
    files = [root / "cpu.max", root / "cpu" / "cpu.cfs_quota_us", root / "cpu.cfs_quota_us"]
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            hier, _, rel = line.split(":", 2)
            if hier == "0" and rel.startswith("/"):
                d = root / rel.lstrip("/")
                while d != root and root in d.parents:
                    files.append(d / "cpu.max")
                    d = d.parent
    return [str(f) for f in dict.fromkeys(files)]


def _read_proc_stat() -> str:
    """The text of ``/proc/stat`` (a function of its own, for tests to replace)."""
    return Path("/proc/stat").read_text()


def _cpu_ticks(text: str, cpus: set[int] | None) -> dict[int, tuple[int, int]]:
    """``{cpu id: (idle ticks, total ticks)}`` of the ``cpuN`` lines of ``/proc/stat`` in ``cpus``
    (all with ``None``); idle includes iowait, total is user..steal (guest time is in user)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            fields = line.split()
            cpu = int(fields[0][3:])
            if cpus is None or cpu in cpus:
                ticks = [int(x) for x in fields[1:9]]
                out[cpu] = (ticks[3] + (ticks[4] if len(ticks) > 4 else 0), sum(ticks))
    return out


def _busy_cpus(interval: float = BUSY_INTERVAL) -> int:
    """Whole CPUs of this process's affinity set that other processes keep busy, measured over
    ``interval`` seconds from ``/proc/stat`` (see :func:`choose_threads`); 0 on any error."""
    try:
        try:
            cpus: set[int] | None = set(_affinity())
        except (AttributeError, OSError):
            cpus = None
        wall0, own0 = time.perf_counter(), time.process_time()
        before = _cpu_ticks(_read_proc_stat(), cpus)
        time.sleep(interval)
        after = _cpu_ticks(_read_proc_stat(), cpus)
        wall, own = time.perf_counter() - wall0, time.process_time() - own0
        busy = 0.0
        for cpu, (idle1, total1) in after.items():
            if cpu in before:
                d_idle, d_total = idle1 - before[cpu][0], total1 - before[cpu][1]
                if d_total > 0:
                    busy += min(1.0, max(0.0, 1.0 - d_idle / d_total))
        # this process's own share (at most one CPU per thread measured; over a look shorter than
        # 10 ms the process clock's granularity makes the ratio noise, so it is not subtracted)
        others = busy - (min(own / wall, float(len(after))) if wall >= 0.01 else 0.0)
        return min(len(after), max(0, math.floor(others + 0.5)))
    except Exception:  # never fail: nothing counts as busy
        return 0


def available_memory(device: torch.device | str = "cpu") -> int | None:
    """Bytes a new allocation on ``device`` can use now, or ``None`` where that is not known.

    CUDA: the device's free memory (:func:`torch.cuda.mem_get_info`) plus what torch's caching
    allocator holds unused.  CPU: ``MemAvailable`` of ``/proc/meminfo``, lowered to the room left
    under a cgroup memory limit (v2 ``memory.max`` / ``memory.current``, v1
    ``memory.limit_in_bytes`` / ``memory.usage_in_bytes``) where one is set.
    """
    device = torch.device(device)
    if device.type == "cuda":
        try:
            free, _ = torch.cuda.mem_get_info(device)
            return int(free) + max(0, torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
        except (RuntimeError, AssertionError):
            return None
    if device.type != "cpu":
        return None
    found: list[int] = []
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            limit = Path(limit_file).read_text().strip()
            if limit == "max" or int(limit) >= 1 << 60:  # no limit (v1 reports a huge number)
                continue
            found.append(max(0, int(limit) - int(Path(usage_file).read_text().strip())))
        except (OSError, ValueError):
            continue
    return min(found) if found else None


def make_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """An explicit, seeded :class:`torch.Generator` on ``device`` (one per run)."""
    gen = torch.Generator(device=torch.device(device))
    gen.manual_seed(int(seed))
    return gen


def logmeanexp(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``log(mean(exp(x)))`` along ``dim``, computed stably (in the dtype of ``x``)."""
    n = x.shape[dim]
    return torch.logsumexp(x, dim=dim) - np.log(n)


_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's file-creation mask, read without changing it where possible.

    From ``Umask:`` in ``/proc/self/status`` (Linux >= 4.7); elsewhere by setting and restoring
    :func:`os.umask` under a lock (``os.umask`` is process-wide: threads of this package that read
    it go through the lock, so none sees the temporary value).
    """
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def default_file_mode() -> int:
    """The permissions ``open(path, "w")`` gives a new file: ``0o666 & ~umask``."""
    return 0o666 & ~current_umask()


#: errno values of an OSError raised while writing an output that mean "this output cannot be written"
#: (inside :func:`atomic_path`'s block other OSErrors -- a failed download, say -- pass unchanged)
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})


def _file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words (for error messages)."""
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO or pipe"),
                        (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "not a regular file"


def _cannot_write(path: str | os.PathLike, exc: BaseException | str) -> OutputError:
    """``OutputError("cannot write PATH: reason")``, with the errno of ``exc`` when it has one."""
    reason = exc if isinstance(exc, str) else (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__)
    err = OutputError(f"cannot write {path}: {reason}")
    err.errno = getattr(exc, "errno", None)
    err.reason = reason
    return err


def output_target(path: str | os.PathLike) -> Path:
    """The file a write to ``path`` replaces: ``path`` itself, or where ``path`` is a symlink the file
    it resolves to (the link is kept and written through, as ``open(path, "w")`` would).

    A dangling symlink's target is created (its directory must exist, as for ``open``).  Raises
    :class:`~logzbench.errors.OutputError` for a special file (a device, FIFO or socket, also behind
    a symlink such as ``/dev/stdout`` -> ``/proc/self/fd/1`` -> a pipe or terminal), a directory, a
    symlink loop, or a link whose target has no name of its own (``/proc/self/fd/N`` of a deleted file).
    """
    path = Path(path)
    try:
        st = os.stat(path)  # follows links, the kernel's way (also /proc/self/fd magic links)
    except FileNotFoundError:
        st = None
    except OSError as exc:  # ELOOP, ENOTDIR, EACCES, ...
        raise _cannot_write(path, exc) from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise _cannot_write(path, f"{_file_kind(st.st_mode)}, not a regular file")
    if not os.path.islink(path):
        return path
    target = Path(os.path.realpath(path))
    if st is None:  # dangling: create the target, in a directory that exists
        if not target.parent.is_dir():
            raise _cannot_write(path, f"dangling symlink to {target}, whose directory does not exist")
        return target
    try:
        same = os.path.samestat(os.stat(target), st)
    except OSError:
        same = False
    if not same:
        raise _cannot_write(path, f"symlink does not resolve to a file name (it resolves to {target})")
    return target


def _make_parents(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; return those created, outermost first."""
    missing = []
    d = Path(os.path.abspath(directory))
    while not os.path.lexists(d) and d != d.parent:
        missing.append(d)
        d = d.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except BaseException:
        _remove_dirs(missing[::-1])
        raise
    return missing[::-1]


def _remove_dirs(created: list[Path]) -> None:
    """Remove the directories of :func:`_make_parents` that are still empty, innermost first."""
    for d in reversed(created):
        with contextlib.suppress(OSError):
            os.rmdir(d)


def _replace(src: Path, dst: Path) -> None:
    """``os.replace`` (a function of its own, for tests to make fail)."""
    os.replace(src, dst)


class OutputTransaction:
    """Outputs written together: all of them, or none (see :func:`output_transaction`)."""

    def __init__(self) -> None:
        self._staged: dict[str, tuple[Path, Path, str]] = {}  # target -> (temporary, target, path as given)
        self._published: list[tuple[Path, Path | None]] = []  # (target, backup of the file it replaced)
        self._dirs: list[Path] = []  # directories created, outermost first

    def watch_dir(self, path: str | os.PathLike) -> None:
        """Remove ``path`` (and its parents that do not exist now) on rollback, if then empty: for a
        directory the block creates itself (``mkdir``) rather than through :func:`atomic_path`."""
        d = Path(os.path.abspath(path))
        missing = []
        while not os.path.lexists(d) and d != d.parent:
            missing.append(d)
            d = d.parent
        self._dirs.extend(missing[::-1])

    def _stage(self, tmp: Path, target: Path, shown: str, created: list[Path]) -> None:
        self._dirs.extend(created)
        old = self._staged.pop(str(target), None)
        if old is not None:  # written twice in one transaction: the last one counts
            with contextlib.suppress(OSError):
                old[0].unlink()
        self._staged[str(target)] = (tmp, target, shown)

    def publish(self) -> None:
        """Rename the outputs written so far into place (e.g. before another tool reads them); the
        files they replace are kept aside until the transaction ends, and restored on rollback."""
        staged = list(self._staged.values())
        self._staged.clear()
        for i, (tmp, target, shown) in enumerate(staged):
            try:
                backup = self._backup(target)
                self._published.append((target, backup))
                _replace(tmp, target)
            except OSError as exc:
                self._staged = {str(t[1]): t for t in staged[i:]}  # their temporaries go on rollback
                raise _cannot_write(shown, exc) from exc

    @staticmethod
    def _backup(target: Path) -> Path | None:
        """A second name of ``target``'s current file (a hard link; else ``target`` renamed), or None."""
        if not os.path.lexists(target):
            return None
        for _ in range(100):
            backup = target.with_name(f".{target.name}.{os.urandom(4).hex()}.bak")
            try:
                os.link(target, backup, follow_symlinks=False)
                return backup
            except FileExistsError:
                continue
            except OSError:  # no hard links here: move the old file aside
                if not os.path.lexists(backup):
                    os.rename(target, backup)
                    return backup
        raise FileExistsError(errno.EEXIST, "no free backup name", str(target))

    def commit(self) -> None:
        """Publish what is left and drop the backups."""
        self.publish()
        for _, backup in self._published:
            if backup is not None:
                with contextlib.suppress(OSError):
                    backup.unlink()
        self._published.clear()
        self._dirs.clear()

    def rollback(self) -> None:
        """Remove every temporary, put back the files replaced, remove the directories created."""
        for tmp, _, _ in self._staged.values():
            with contextlib.suppress(OSError):
                tmp.unlink()
        self._staged.clear()
        for target, backup in reversed(self._published):
            with contextlib.suppress(OSError):
                if backup is None:
                    target.unlink()
                else:
                    os.replace(backup, target)
            if backup is not None:  # (rename does nothing where both names are links of one file)
                with contextlib.suppress(OSError):
                    if os.path.samefile(backup, target):
                        backup.unlink()
        self._published.clear()
        _remove_dirs(self._dirs)
        self._dirs.clear()


_TRANSACTION: contextvars.ContextVar[OutputTransaction | None] = contextvars.ContextVar(
    "logzbench_output_transaction", default=None)


@contextlib.contextmanager
def output_transaction() -> Iterator[OutputTransaction]:
    """Every :func:`atomic_path` write in the block (and :func:`save_npz_atomic`,
    :func:`write_json_atomic`, :func:`write_csv_atomic`, the figures) goes to a temporary file; they
    are renamed into place together when the block ends without an exception.  On an exception
    nothing is written or changed: the temporaries are removed, any file already published
    (:meth:`OutputTransaction.publish`, for a tool that must read an output before the block ends) is
    put back as it was, and the directories the block created are removed.

    A transaction inside another joins it (the outer one commits).  Writes from other threads are not
    part of it (the transaction is a context variable).
    """
    outer = _TRANSACTION.get()
    if outer is not None:
        yield outer
        return
    tx = OutputTransaction()
    token = _TRANSACTION.set(tx)
    try:
        yield tx
        tx.commit()
    except BaseException:
        tx.rollback()
        raise
    finally:
        _TRANSACTION.reset(token)


def publish_outputs() -> None:
    """Rename the outputs of the current :func:`output_transaction` written so far into place (no-op
    outside one); they are still undone if the transaction fails later."""
    tx = _TRANSACTION.get()
    if tx is not None:
        tx.publish()


def transactional(func):
    """Decorator: run ``func`` inside an :func:`output_transaction` (all its outputs, or none)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with output_transaction():
            return func(*args, **kwargs)
    return wrapper


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the destination directory; rename it onto ``path`` on success.

    Nothing half-written is left behind: on any exception the temporary file is removed, the
    directories created for it are removed, and ``path`` is untouched.  The file gets the
    permissions a plain ``open(path, "w")`` of a new file would (``0o666 & ~umask``,
    :func:`default_file_mode`), also when ``path`` already exists: an existing file's own mode is not
    kept (it is replaced by a new file).  A symlink ``path`` is written through: the file it resolves
    to is replaced and the link kept (:func:`output_target`, which also refuses special files).
    Inside an :func:`output_transaction` the rename waits for the end of the transaction.

    Raises :class:`~logzbench.errors.OutputError` ("cannot write PATH: reason") when the output
    cannot be created or written: a full disk or quota, a read-only file system, a special file; an
    OSError of another kind raised by the block itself passes unchanged.
    """
    shown = str(path)
    target = output_target(path)
    tx = _TRANSACTION.get()
    try:
        created = _make_parents(target.parent)
    except OSError as exc:
        raise _cannot_write(shown, exc) from exc
    tmp_path = None
    try:
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp" + target.suffix, dir=target.parent)
            os.close(fd)
        except OSError as exc:
            raise _cannot_write(shown, exc) from exc
        tmp_path = Path(tmp)
        try:
            yield tmp_path
        except OSError as exc:
            if exc.errno in _WRITE_ERRNOS and not isinstance(exc, OutputError):
                raise _cannot_write(shown, exc) from exc
            raise
        try:
            os.chmod(tmp_path, default_file_mode())  # mkstemp creates 0600 whatever the umask
            if tx is None:
                _replace(tmp_path, target)
        except OSError as exc:
            raise _cannot_write(shown, exc) from exc
        if tx is not None:
            tx._stage(tmp_path, target, shown, created)
    except BaseException:
        if tmp_path is not None:
            with contextlib.suppress(OSError):
                tmp_path.unlink()
        _remove_dirs(created)
        raise


def save_npz_atomic(path: str | os.PathLike, **arrays: Any) -> None:
    """``np.savez_compressed`` written atomically (the file name is kept exactly)."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **arrays)


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def write_csv_atomic(path: str | os.PathLike, df: Any, **to_csv_kwargs: Any) -> Path:
    """``df.to_csv(path, index=False, **to_csv_kwargs)`` written atomically; returns ``Path(path)``."""
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, **to_csv_kwargs)
    return Path(path)


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def utc_now() -> str:
    """Now, as an ISO 8601 UTC timestamp with milliseconds (records' ``started_at``/``finished_at``; the
    MLflow runs' start and end times)."""
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """Package version plus the git commit of the source tree when available (asked of git once per
    process: a workflow job records it for every estimate of its sweep)."""
    from . import __version__

    try:
        here = Path(__file__).resolve().parent
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        sha, dirty = "", ""
    if sha:
        return f"{__version__}+g{sha}{'.dirty' if dirty else ''}"
    return __version__
