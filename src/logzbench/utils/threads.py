"""Torch thread counts that do not oversubscribe the CPUs.

:func:`choose_threads` picks a count from an explicit value, the ``LOGZBENCH_THREADS`` environment
variable, or the CPUs this process may use (affinity set, cgroup quota) less those other processes
keep busy now (read from ``/proc/stat``); :func:`set_threads` and :func:`using_threads` apply it.
The readers of the operating system (``_affinity``, ``_cgroup_cpu_quota``, ``_read_proc_stat``, ...)
are functions of their own so that tests can replace them here.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import time
from pathlib import Path
from typing import Any, Iterator

#: environment variable that sets the torch thread count (see :func:`choose_threads`)
THREADS_ENV = "LOGZBENCH_THREADS"
#: seconds over which :func:`choose_threads` measures the CPUs other processes keep busy
BUSY_INTERVAL = 0.05


def choose_threads(requested: int | None = None, *, limit: int | None = None, interval: float = BUSY_INTERVAL) -> int:
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
