"""Devices, memory and random numbers: resolving a device name, the memory a new allocation can use,
explicit seeded generators, and a stable log-mean-exp."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch


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
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
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
