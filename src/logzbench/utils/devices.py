"""Devices, memory and random numbers: resolving a device name, the memory a new allocation can use
(and the refusal of one that would not fit), explicit seeded generators, and a stable log-mean-exp."""

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


#: Share of the available memory (:func:`available_memory`) that one planned allocation may need; above it
#: the work is refused before anything is allocated (an estimate's chains, a schedule of K steps, a
#: dense Potts model, the contents of a model archive).
MEMORY_SHARE = 0.8


def format_bytes(n: float) -> str:
    """``n`` bytes in KiB, MiB, GiB or TiB, e.g. ``"7.3 TiB"`` (under 1 KiB: ``"12 bytes"``)."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} bytes"


def memory_shortfall(need: int, device: torch.device | str = "cpu", available: int | None = None) -> str | None:
    """``None`` when ``need`` bytes fit in :data:`MEMORY_SHARE` of the memory available on ``device``
    (``available``: bytes, default :func:`available_memory`; unknown: ``None`` too); otherwise the words
    of a refusal naming the size, the limit and how to raise it, e.g. ``"about 7.3 TiB of memory, more
    than 80% of the 20.5 GiB available on cpu (MemAvailable or the cgroup memory limit: free memory or
    give the job more)"``.  One place for every check of a size against memory."""
    device = torch.device(device)
    avail = available_memory(device) if available is None else int(available)
    if avail is None or need <= MEMORY_SHARE * avail:
        return None
    where = (
        "free memory of the GPU: free it or use a larger one"
        if device.type == "cuda"
        else "MemAvailable or the cgroup memory limit: free memory or give the job more"
    )
    return (
        f"about {format_bytes(need)} of memory, more than {MEMORY_SHARE:.0%} of the {format_bytes(avail)} "
        f"available on {device} ({where})"
    )


def make_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """An explicit, seeded :class:`torch.Generator` on ``device`` (one per run)."""
    gen = torch.Generator(device=torch.device(device))
    gen.manual_seed(int(seed))
    return gen


def stream_generator(seed: int, stream: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A :class:`torch.Generator` on ``device`` seeded from ``seed`` through the separate stream ``stream``
    (``numpy.random.SeedSequence([seed, stream])``): a pilot's draws, independent of the main run's generator
    (:func:`make_generator`, seeded by ``seed`` itself) and of the other streams'."""
    s = int(np.random.SeedSequence([int(seed), int(stream)]).generate_state(1, np.uint64)[0] >> 1)
    return torch.Generator(device=device).manual_seed(s)


def logmeanexp(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``log(mean(exp(x)))`` along ``dim``, computed stably (in the dtype of ``x``)."""
    n = x.shape[dim]
    return torch.logsumexp(x, dim=dim) - np.log(n)
