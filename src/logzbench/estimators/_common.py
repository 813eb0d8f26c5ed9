"""Helpers shared by the estimators: timing and progress over an annealing schedule."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

import torch


def progress_range(n: int, enabled: bool, desc: str):
    """``range(n)``, wrapped in a tqdm bar when ``enabled``."""
    if not enabled:
        return range(n)
    from tqdm.auto import tqdm

    return tqdm(range(n), desc=desc, unit="step", mininterval=1.0)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextmanager
def timer(device: torch.device) -> Iterator[list]:
    """Wall-clock timer that synchronises CUDA before reading the clock; yields ``[seconds]``."""
    out = [0.0]
    synchronize(device)
    t0 = time.perf_counter()
    try:
        yield out
    finally:
        synchronize(device)
        out[0] = time.perf_counter() - t0
