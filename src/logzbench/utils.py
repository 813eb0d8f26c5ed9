"""Small shared helpers: devices, generators, atomic writes, log-space reductions."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterator

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


def make_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """An explicit, seeded :class:`torch.Generator` on ``device`` (one per run)."""
    gen = torch.Generator(device=torch.device(device))
    gen.manual_seed(int(seed))
    return gen


def logmeanexp(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``log(mean(exp(x)))`` along ``dim``, computed stably (in the dtype of ``x``)."""
    n = x.shape[dim]
    return torch.logsumexp(x, dim=dim) - np.log(n)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the destination directory; rename it onto ``path`` on success.

    Nothing half-written is left behind: on any exception the temporary file is removed
    and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp" + path.suffix, dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
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


def code_version() -> str:
    """Package version plus the git commit of the source tree when available."""
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
