"""Random draws for the samplers' hot loops.

On CPU, PyTorch fills a uniform tensor from one Mersenne-Twister stream on one thread,
which costs about as much as a Gibbs sweep's matrix products on a 2-core machine.
:func:`uniform` therefore splits large draws into ``N_STREAMS`` fixed blocks, each from its own
generator seeded (once) from the run's generator, filled in parallel threads (PyTorch releases
the GIL).  The block layout does not depend on the thread count, so the same seed gives
the same numbers on every machine.  On CUDA the run's generator is used directly.
"""

from __future__ import annotations

import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import torch

#: Blocks (and sub-generators) per large draw; fixed so results do not depend on threads.
N_STREAMS = 4
#: Draws smaller than this use the run's generator directly.
MIN_PARALLEL = 1 << 15

_streams: "weakref.WeakKeyDictionary[torch.Generator, list[torch.Generator]]" = weakref.WeakKeyDictionary()
_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _sub_generators(generator: torch.Generator) -> list[torch.Generator]:
    subs = _streams.get(generator)
    if subs is None:
        seeds = torch.randint(0, 2**62, (N_STREAMS,), generator=generator, device=generator.device).tolist()
        subs = [torch.Generator().manual_seed(int(s)) for s in seeds]
        _streams[generator] = subs
    return subs


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=N_STREAMS - 1, thread_name_prefix="logzbench-rng")
        return _pool


def uniform(shape, generator: torch.Generator, device: torch.device, dtype=torch.float32) -> torch.Tensor:
    """``U[0, 1)`` draws of ``shape`` from ``generator`` (see the module docstring)."""
    out = torch.empty(shape, device=device, dtype=dtype)
    n = out.numel()
    if out.device.type != "cpu" or n < MIN_PARALLEL:
        return out.uniform_(generator=generator)
    subs = _sub_generators(generator)
    flat = out.view(-1)
    step = -(-n // N_STREAMS)
    blocks = [flat[i * step:(i + 1) * step] for i in range(N_STREAMS)]
    if torch.get_num_threads() < 2:
        for blk, g in zip(blocks, subs):
            blk.uniform_(generator=g)
        return out
    futures = [_executor().submit(blk.uniform_, generator=g) for blk, g in zip(blocks[1:], subs[1:])]
    blocks[0].uniform_(generator=subs[0])
    for f in futures:
        f.result()
    return out


def bernoulli(p: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Bernoulli(``p``) samples (0./1. in ``p``'s dtype): ``ceil(p - u)`` with ``u ~ U[0, 1)``."""
    u = uniform(p.shape, generator, p.device, p.dtype)
    return torch.sub(p, u, out=u).ceil_()
