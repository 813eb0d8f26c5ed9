"""Annealing schedules ``0 = beta_0 < beta_1 < ... < beta_K = 1``.

The schedule lives outside every kernel: estimators take a 1-D float64 array.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


def linear(n_steps: int) -> np.ndarray:
    """``K + 1`` evenly spaced inverse temperatures (RAISE paper, Sec. 5)."""
    _check_k(n_steps)
    return np.linspace(0.0, 1.0, n_steps + 1)


def sigmoid(n_steps: int, delta: float = 4.0) -> np.ndarray:
    """Sigmoidal schedule of Grosse et al. (2013): ``sigma(delta (2k/K - 1))`` rescaled to [0, 1].

    Denser near both ends, where the path changes fastest for typical models.
    """
    _check_k(n_steps)
    s = 1.0 / (1.0 + np.exp(-delta * (2.0 * np.arange(n_steps + 1) / n_steps - 1.0)))
    return (s - s[0]) / (s[-1] - s[0])


def salakhutdinov_murray() -> np.ndarray:
    """The hand-crafted 14,500-step schedule of Salakhutdinov & Murray (2008):
    ``[0:1/1000:0.5, 0.5:1/10000:0.9, 0.9:1/100000:1]`` (Upadhya & Sastry, Sec. 4.1)."""
    return np.concatenate(
        [
            np.linspace(0.0, 0.5, 501),
            np.linspace(0.5, 0.9, 4001)[1:],
            np.linspace(0.9, 1.0, 10001)[1:],
        ]
    )


def resample(betas, n_steps: int) -> np.ndarray:
    """The shape of schedule ``betas`` at ``n_steps`` steps: ``beta(u)``, piecewise linear in the
    step fraction ``u = k / K`` of ``betas``, read at ``u = j / n_steps``.

    A schedule whose steps keep a constant conditional ESS spaces the inverse temperatures evenly in
    thermodynamic length; reading it at another number of steps keeps that spacing.
    """
    b = from_array(betas)
    _check_k(n_steps)
    u = np.linspace(0.0, 1.0, len(b))
    out = np.interp(np.linspace(0.0, 1.0, int(n_steps) + 1), u, b)
    out[0], out[-1] = 0.0, 1.0
    return np.maximum.accumulate(out)


def from_array(betas) -> np.ndarray:
    """Validate a user-given schedule: 1-D, finite, starts at 0, ends at 1, non-decreasing."""
    try:
        b = np.asarray(betas, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"a schedule must be numbers (inverse temperatures), got {type(betas).__name__}") from None
    if b.ndim != 1:
        raise ValueError(f"a schedule must be a 1-D array of inverse temperatures, got shape {b.shape}")
    if b.size < 2:
        raise ValueError("a schedule needs at least two inverse temperatures (0 and 1)")
    if not np.isfinite(b).all():
        raise ValueError("schedule contains NaN or inf")
    if b[0] != 0.0 or b[-1] != 1.0:
        raise ValueError(f"schedule must start at 0 and end at 1 (got {b[0]} ... {b[-1]})")
    if np.any(np.diff(b) < 0):
        raise ValueError("schedule must be non-decreasing")
    return b


def from_file(path: str | os.PathLike) -> np.ndarray:
    """Read a schedule from ``.npy`` or a text file with one value per line.

    The file must hold one 1-D, finite, non-decreasing array from 0 to 1 (:func:`from_array`);
    anything else (a 2-D array, several columns, text that is not numbers) is refused with a
    message naming the file and what it holds.
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"schedule file not found: {path}")
    if not path.is_file():
        raise ValueError(f"schedule file {path} is not a file")
    try:
        if path.suffix == ".npy":
            arr = np.load(path, allow_pickle=False)
        else:
            arr = np.loadtxt(path, ndmin=1)
    except (OSError, ValueError, EOFError) as exc:
        what = "an .npy array" if path.suffix == ".npy" else "one number per line"
        raise ValueError(
            f"schedule file {path}: cannot be read as {what} "
            f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
        ) from None
    if getattr(arr, "ndim", 0) != 1:
        raise ValueError(
            f"schedule file {path} holds an array of shape {np.shape(arr)}; a schedule is 1-D "
            "(one inverse temperature per line or a 1-D .npy)"
        )
    try:
        return from_array(arr)
    except ValueError as exc:
        raise ValueError(f"schedule file {path} (shape {arr.shape}): {exc}") from None


#: the schedule an independent pilot run chooses on the model's own path
#: (:func:`logzbench.estimators.adaptive.pilot_schedule`); this module only reshapes it (:func:`resample`)
ADAPTIVE = "adaptive"
SCHEDULES = ("linear", "sigmoid", "sm14500", ADAPTIVE)
#: K of the ``linear`` and ``sigmoid`` schedules on the command line when ``--steps`` is not given
#: (the Python API has no default: ``K`` is required by these schedules).
DEFAULT_K = 1000


#: Names of the fixed Salakhutdinov–Murray schedule.
SM14500_NAMES = ("sm14500", "salakhutdinov-murray", "salakhutdinov_murray")


def make_schedule(name: str, n_steps: int | None = None) -> np.ndarray:
    """Schedule by name: ``linear``, ``sigmoid``, ``sm14500`` (the 14,500-step
    Salakhutdinov–Murray schedule) or a path to a file.

    A fixed schedule (``sm14500``, a file) has its own number of steps: ``n_steps`` may be
    ``None`` (not given) or equal to it; any other value is refused, naming both numbers.
    """
    if name == "linear":
        return linear(_need(n_steps, name))
    if name == "sigmoid":
        return sigmoid(_need(n_steps, name))
    if name == ADAPTIVE:
        raise ValueError(
            "the adaptive schedule is chosen by a pilot run on the model's annealing path "
            "(logzbench.estimators.adaptive.pilot_schedule), not by name alone"
        )
    if name in SM14500_NAMES:
        return _fixed(salakhutdinov_murray(), n_steps, f"schedule {name!r}")
    if Path(name).exists():
        return _fixed(from_file(name), n_steps, f"schedule file {name}")
    if os.sep in name or Path(name).suffix in (".npy", ".txt", ".csv", ".dat"):
        raise ValueError(f"schedule file not found: {name}")
    raise ValueError(f"unknown schedule {name!r}; choose one of {SCHEDULES} or give a file of betas")


def _fixed(betas: np.ndarray, n_steps: int | None, what: str) -> np.ndarray:
    """A fixed schedule, refused when an explicit ``n_steps`` differs from its own ``K``."""
    own = len(betas) - 1
    if n_steps is not None and int(n_steps) != own:
        raise ValueError(
            f"{what} has K = {own} steps, but K (--steps) = {int(n_steps)} was given; omit K or give K = {own}"
        )
    return betas


def _need(n_steps, name):
    if n_steps is None:
        raise ValueError(f"schedule {name!r} needs a number of steps K")
    return int(n_steps)


def _check_k(n_steps: int) -> None:
    if int(n_steps) < 1:
        raise ValueError(f"number of intermediate distributions K must be >= 1, got {n_steps}")
