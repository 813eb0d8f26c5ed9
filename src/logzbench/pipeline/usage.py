"""Where a workflow job's log and benchmarks lie, and what its own process used.

Every rule declares a ``log:`` and a ``benchmark:`` named alike (:func:`log_file`,
:func:`benchmark_file`: ``results/logs/<name>.log``, ``results/benchmarks/<name>.tsv``).
Snakemake's benchmark file measures the process Snakemake started: the rule's script.  Where the
job runs in a process forked from the warm server (:mod:`logzbench.pipeline.warm`), that script
is a thin client that only waits, so its memory and CPU columns are not the job's.  The job's own
process is therefore measured too (:func:`measure`, from the ``rusage`` of its process as its
parent reaps it, or of this process when the job runs here) and written beside the rule's
benchmark (:func:`job_usage_file`: ``results/benchmarks/<name>.job.tsv``) by :func:`write_usage`.

Only the standard library is imported here.
"""

from __future__ import annotations

import os
import resource
from pathlib import PurePath
from typing import Any, Mapping

__all__ = [
    "BENCHMARKS",
    "LOGS",
    "USAGE_COLUMNS",
    "benchmark_file",
    "job_usage_file",
    "log_file",
    "measure",
    "read_usage",
    "this_process",
    "write_usage",
]

#: the folders of the logs and of the benchmarks under the results directory
LOGS = "logs"
BENCHMARKS = "benchmarks"
#: columns of a job's usage file: wall-clock seconds (and as h:m:s), the peak resident set size in MiB
#: (``max_rss``, as in Snakemake's benchmark files), CPU seconds (user + system, and each), the job's
#: process id and whether it ran in a process forked from the warm server
USAGE_COLUMNS = ("s", "h:m:s", "max_rss", "cpu_time", "user_s", "system_s", "pid", "warm")


def log_file(results: str, name: str) -> str:
    """The log of the job ``name`` (e.g. ``estimate/{model}/{estimator}``)."""
    return f"{results}/{LOGS}/{name}.log"


def benchmark_file(results: str, name: str) -> str:
    """Snakemake's benchmark of the job ``name``: the measures of the rule's own process."""
    return f"{results}/{BENCHMARKS}/{name}.tsv"


def job_usage_file(log: str | os.PathLike) -> str | None:
    """The usage file of the job whose log is ``log`` (:func:`log_file`): beside its benchmark
    (:func:`benchmark_file`), ``<benchmark stem>.job.tsv``; ``None`` for a log not under a ``logs`` folder."""
    parts = list(PurePath(log).parts)
    if LOGS not in parts[:-1] or not parts[-1].endswith(".log"):
        return None
    i = len(parts) - 2 - parts[-2::-1].index(LOGS)  # the last `logs` folder
    parts[i] = BENCHMARKS
    parts[-1] = parts[-1][: -len(".log")] + ".job.tsv"
    return str(PurePath(*parts))


def measure(ru: resource.struct_rusage, wall: float, pid: int, warm: bool) -> dict[str, Any]:
    """One usage row from a process's ``rusage`` (Linux: ``ru_maxrss`` in KiB) and its wall-clock seconds."""
    seconds = max(0.0, float(wall))
    whole = int(seconds)
    return {
        "s": round(seconds, 4),
        "h:m:s": f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}",
        "max_rss": round(ru.ru_maxrss / 1024, 2),
        "cpu_time": round(ru.ru_utime + ru.ru_stime, 4),
        "user_s": round(ru.ru_utime, 4),
        "system_s": round(ru.ru_stime, 4),
        "pid": int(pid),
        "warm": bool(warm),
    }


def this_process(wall: float) -> dict[str, Any]:
    """The usage of this process (a job run in the rule's own process) and of the children it waited for."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    row = measure(me, wall, os.getpid(), warm=False)
    row["max_rss"] = round(max(me.ru_maxrss, kids.ru_maxrss) / 1024, 2)
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    row.update(
        cpu_time=round(cpu, 4),
        user_s=round(me.ru_utime + kids.ru_utime, 4),
        system_s=round(me.ru_stime + kids.ru_stime, 4),
    )
    return row


def write_usage(path: str | os.PathLike, row: Mapping[str, Any]) -> None:
    """Write one usage row (:data:`USAGE_COLUMNS`) as a tab-separated file with a header, as Snakemake
    writes its benchmarks (its folder is made; the file is replaced whole)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write("\t".join(USAGE_COLUMNS) + "\n")
        fh.write("\t".join(str(row[c]) for c in USAGE_COLUMNS) + "\n")
    os.replace(tmp, path)


def read_usage(path: str | os.PathLike) -> dict[str, str]:
    """The row of a usage file (:func:`write_usage`), values as text."""
    with open(path) as fh:
        header, values = fh.read().splitlines()[:2]
    return dict(zip(header.split("\t"), values.split("\t")))
