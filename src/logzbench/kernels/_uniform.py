"""``U[0, 1)`` draws for the samplers that need uniforms rather than Bernoulli draws.

:func:`uniform` fills a large draw in :data:`N_STREAMS` fixed blocks, each from its own NumPy
``PCG64`` generator seeded once from the run's :class:`torch.Generator`, in parallel threads; the
layout does not depend on the number of threads, so the same seed gives the same numbers at every
thread count.  Small draws, other dtypes and other devices use the run's generator directly.
"""

from __future__ import annotations

import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from ._constants import _NUMPY_DTYPES

#: Blocks (and sub-generators) per large :func:`uniform` draw; fixed so results do not depend on threads.
N_STREAMS = 4
#: :func:`uniform` draws smaller than this use the run's generator directly.
MIN_PARALLEL = 1 << 15

_streams: weakref.WeakKeyDictionary[torch.Generator, list[np.random.Generator]] = weakref.WeakKeyDictionary()
_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _sub_generators(generator: torch.Generator) -> list[np.random.Generator]:
    subs = _streams.get(generator)
    if subs is None:
        seeds = torch.randint(0, 2**62, (N_STREAMS,), generator=generator, device=generator.device).tolist()
        subs = [np.random.Generator(np.random.PCG64(int(s))) for s in seeds]
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
    if out.device.type != "cpu" or n < MIN_PARALLEL or dtype not in _NUMPY_DTYPES:
        return out.uniform_(generator=generator)
    subs = _sub_generators(generator)
    flat = out.view(-1).numpy()
    step = -(-n // N_STREAMS)
    np_dtype = _NUMPY_DTYPES[dtype]
    blocks = [flat[i * step : (i + 1) * step] for i in range(N_STREAMS)]
    if torch.get_num_threads() < 2:
        for blk, rng in zip(blocks, subs):
            rng.random(out=blk, dtype=np_dtype)
        return out
    futures = [_executor().submit(rng.random, out=blk, dtype=np_dtype) for blk, rng in zip(blocks[1:], subs[1:])]
    subs[0].random(out=blocks[0], dtype=np_dtype)
    for f in futures:
        f.result()
    return out
