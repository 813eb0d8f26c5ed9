"""Annealing schedules ``0 = beta_0 < beta_1 < ... < beta_K = 1``.

The schedule lives outside every kernel: estimators take a 1-D float64 array.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

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
#: the schedule tuned in rounds of doubling K on independent pilot runs
#: (:func:`logzbench.estimators.tuned.tune_rounds`); this module only re-spaces (:func:`respace`)
TUNED = "tuned"
#: the fewest steps of the tuned schedule's first round (its variance profile has one value per step)
TUNED_MIN_START_K = 8
#: K of a schedule without a length of its own (linear, sigmoid, adaptive, tuned) where none is given, for an
#: estimator that sweeps K (:func:`logzbench.options.default_K`; the sandwich and SMC start from their own)
DEFAULT_K = 1000


@dataclass(frozen=True)
class ScheduleKind:
    """What the estimators, the option checks and the workflow need to know of a schedule besides its
    inverse temperatures, declared once per named schedule (:data:`KINDS`) and once for a schedule file
    (:data:`FILE`); :func:`kind_of` finds a name's.

    Attributes
    ----------
    name : str
        Its name (a schedule file's kind: ``"file"``, the file's own path being the schedule's name).
    aliases : tuple of str
        Other names accepted for it.
    fixed : bool
        It has a length of its own (``sm14500``, a file): an explicit other ``K`` is refused, and ``K``
        cannot double.
    steps : int, optional
        That length where the name alone gives it (``sm14500``: 14500); a file's is read from the file
        (:func:`own_steps`).
    doubles : bool
        It can be read at any ``K``, so ``K`` can double (linear, sigmoid, adaptive; not the tuned
        schedule, tuned for one ``K``).
    chosen_by : str, optional
        What chooses it on the model's own path, for a schedule a pilot run chooses (adaptive, tuned):
        it is not built from its name and ``K`` alone.
    build : callable, optional
        Its inverse temperatures: ``build(K)``, or ``build()`` for a fixed schedule named by its name.
    """

    name: str
    aliases: tuple[str, ...] = ()
    fixed: bool = False
    steps: int | None = None
    doubles: bool = False
    chosen_by: str | None = None
    build: Callable[..., np.ndarray] | None = field(default=None, repr=False)

    @property
    def names(self) -> tuple[str, ...]:
        """Its name and its aliases."""
        return (self.name, *self.aliases)

    @property
    def pilot(self) -> bool:
        """Whether a pilot run on the model's own path chooses it (adaptive, tuned)."""
        return self.chosen_by is not None

    @property
    def starts_tuned(self) -> bool:
        """Whether the tuned schedule's first round may take it: a shape that doubles, chosen by no pilot."""
        return self.doubles and not self.pilot


LINEAR = ScheduleKind("linear", doubles=True, build=linear)
SIGMOID = ScheduleKind("sigmoid", doubles=True, build=sigmoid)
#: the fixed Salakhutdinov–Murray schedule
SM14500 = ScheduleKind(
    "sm14500",
    aliases=("salakhutdinov-murray", "salakhutdinov_murray"),
    fixed=True,
    steps=14500,
    build=salakhutdinov_murray,
)
ADAPTIVE_KIND = ScheduleKind(
    ADAPTIVE,
    doubles=True,
    chosen_by="a pilot run on the model's annealing path (logzbench.estimators.adaptive.pilot_schedule)",
)
TUNED_KIND = ScheduleKind(
    TUNED, chosen_by="pilot rounds on the model's annealing path (logzbench.estimators.tuned.tune_rounds)"
)
#: every named schedule, in the order they are listed to the user
KINDS = (LINEAR, SIGMOID, SM14500, ADAPTIVE_KIND, TUNED_KIND)
#: a file of inverse temperatures (:func:`from_file`): its length is its own
FILE = ScheduleKind("file", fixed=True)
_BY_NAME = {n: k for k in KINDS for n in k.names}

SCHEDULES = tuple(k.name for k in KINDS)
#: the schedules chosen by a pilot run on the model's own path, not by name and K alone
PILOT_SCHEDULES = tuple(k.name for k in KINDS if k.pilot)
#: the schedules whose K can double (the sandwich's)
DOUBLING_SCHEDULES = tuple(k.name for k in KINDS if k.doubles)
#: the schedules the tuned schedule's first round may use: they have no length of their own, so K can double
TUNED_STARTS = tuple(k.name for k in KINDS if k.starts_tuned)
#: Names of the fixed Salakhutdinov–Murray schedule.
SM14500_NAMES = SM14500.names


def kind_of(name) -> ScheduleKind:
    """The kind of schedule ``name``: a named schedule's (by its name or an alias), else :data:`FILE`
    (whether or not such a file exists: :func:`make_schedule` says)."""
    return _BY_NAME.get(name, FILE) if isinstance(name, str) else FILE


def own_steps(name: str) -> int | None:
    """The length of schedule ``name`` where it has its own (``sm14500``: 14500; a file: its number of steps,
    read from it: ValueError for a file that is missing or not a schedule); ``None`` for the others."""
    kind = kind_of(name)
    if not kind.fixed:
        return None
    return kind.steps if kind.steps is not None else len(from_file(name)) - 1


def default_K(schedule, *, own_start: bool = False) -> int | None:
    """``K`` where none is given, for the API and the command line alike
    (:meth:`logzbench.options.EstimateOptions.from_kwargs`): :data:`DEFAULT_K` for a schedule without a length
    of its own (linear, sigmoid, tuned; adaptive too: the pilot's own length is too coarse for an accurate
    estimate); ``None`` for ``sm14500`` and a schedule file (their own length), and for an estimator that reads
    K without sweeping it (``own_start``: the sandwich starts from its own, SMC's adaptive schedule needs none)."""
    return None if own_start or kind_of(schedule).fixed else DEFAULT_K


def check_tuned_start(start) -> None:
    """Refuse a first round of the tuned schedule that cannot double (ValueError saying why): it is one of
    :data:`TUNED_STARTS`."""
    kind = kind_of(start)
    if kind.starts_tuned:
        return
    if kind.pilot:
        why = "an adaptive or tuned schedule is not a starting shape"
    elif kind.steps is not None or (isinstance(start, str) and os.path.exists(start)):
        why = "a schedule with a length of its own (sm14500, a schedule file) cannot double"
    else:
        why = "that is not a schedule"
    raise ValueError(
        f"tuned_start (--tuned-start) {start!r}: the tuned schedule's first round is one of {TUNED_STARTS}; {why}"
    )


def make_schedule(name: str, n_steps: int | None = None) -> np.ndarray:
    """Schedule by name: ``linear``, ``sigmoid``, ``sm14500`` (the 14,500-step
    Salakhutdinov–Murray schedule) or a path to a file.

    A fixed schedule (``sm14500``, a file) has its own number of steps: ``n_steps`` may be
    ``None`` (not given) or equal to it; any other value is refused, naming both numbers.
    """
    kind = kind_of(name)
    if kind.pilot:
        raise ValueError(f"the {kind.name} schedule is chosen by {kind.chosen_by}, not by name alone")
    if kind is not FILE:
        if kind.fixed:
            return _fixed(kind.build(), n_steps, f"schedule {name!r}")
        return kind.build(_need(n_steps, name))
    if Path(name).exists():
        return _fixed(from_file(name), n_steps, f"schedule file {name}")
    if os.sep in name or Path(name).suffix in (".npy", ".txt", ".csv", ".dat"):
        raise ValueError(f"schedule file not found: {name}")
    raise ValueError(f"unknown schedule {name!r}; choose one of {SCHEDULES} or give a file of betas")


def tuned_round_ks(K: int, rounds: int | None = None) -> list[int]:
    """The steps of the tuned schedule's pilot rounds for a final round of ``K`` steps: ``ceil(K / 2^r)`` for
    ``r = rounds, ..., 1`` (each round about doubles the one before; the final round, not listed, has ``K``).

    ``rounds=None`` takes as many as keep the first round at :data:`TUNED_MIN_START_K` steps or more.  A ``K``
    too small for one round of that many steps before it (``K < 2 * TUNED_MIN_START_K``), or for the
    ``rounds`` asked, is refused (ValueError naming both numbers)."""
    K = int(K)
    lo = TUNED_MIN_START_K
    if rounds is None:
        if K < 2 * lo:
            raise ValueError(
                f"the tuned schedule doubles K from a first round of at least {lo} steps: K (--steps) = {K} "
                f"is too small to double from; give K >= {2 * lo}"
            )
        rounds = int(math.floor(math.log2(K / lo)))
    rounds = int(rounds)
    first = math.ceil(K / 2**rounds)
    if rounds < 1 or first < lo:
        raise ValueError(
            f"the tuned schedule's {rounds} round(s) of doubling before K (--steps) = {K} start at {first} steps, "
            f"fewer than {lo}: give K >= {lo * 2**rounds} or fewer tune_rounds (--tune-rounds)"
        )
    return [math.ceil(K / 2**r) for r in range(rounds, 0, -1)]


def respace(betas, masses, n_steps: int, floor: float = 0.05) -> np.ndarray:
    """``n_steps`` steps that share the barrier of schedule ``betas`` equally.

    ``masses[k] >= 0`` is the barrier carried by step ``k`` (``betas[k] .. betas[k + 1]``), e.g. the standard
    deviation of its log-weight increment; the barrier's density is taken constant within each step.  Every
    step's density is raised to at least ``floor`` times the mean density (so a region with no measured
    barrier still gets steps: ``floor * n_steps`` of them per unit of beta at least), the cumulative barrier
    ``C(beta)`` is built, and the new ``beta_j`` solve ``C(beta_j) = j / n_steps * C(1)`` (piecewise linear
    inversion, :func:`numpy.interp` on the strictly increasing ``C``).  All-zero masses give a linear schedule.
    """
    b = from_array(betas)
    _check_k(n_steps)
    m = np.asarray(masses, dtype=np.float64)
    d = np.diff(b)
    if m.shape != d.shape or not np.isfinite(m).all() or (m < 0).any():
        raise ValueError(f"respace needs one finite mass >= 0 per step ({d.size}), got shape {m.shape}")
    keep = d > 0  # zero-length steps carry nothing
    b = np.concatenate([[0.0], b[1:][keep]])
    d, m = d[keep], m[keep]
    total = m.sum()
    m = d.copy() if not total > 0 else np.maximum(m, float(floor) * total * d)
    c = np.concatenate([[0.0], np.cumsum(m)])
    out = np.interp(np.linspace(0.0, c[-1], int(n_steps) + 1), c, b)
    out[0], out[-1] = 0.0, 1.0
    return np.maximum.accumulate(out)


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
