"""The machine a benchmark ran on, for its printed header and JSON (shared by the benchmarks)."""

from __future__ import annotations

import os
import platform


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (else what ``platform`` knows)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(sep: str = ", ") -> str:
    """``host: CPU model, N CPUs`` (``sep`` between the CPU model and the count)."""
    return f"{platform.node()}: {cpu_model()}{sep}{os.cpu_count()} CPUs"
