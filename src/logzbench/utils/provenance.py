"""What a record says about when and by which code it was made: UTC timestamps and the code version."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path


def utc_now() -> str:
    """Now, as an ISO 8601 UTC timestamp with milliseconds (records' ``started_at``/``finished_at``; the
    MLflow runs' start and end times)."""
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """Package version plus the git commit of the source tree when available (asked of git once per
    process: a workflow job records it for every estimate of its sweep)."""
    from .. import __version__

    try:
        here = Path(__file__).resolve().parent
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        sha, dirty = "", ""
    if sha:
        return f"{__version__}+g{sha}{'.dirty' if dirty else ''}"
    return __version__
