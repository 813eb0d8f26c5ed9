"""Estimator options: one name per concept, validated once at the boundary.

:class:`EstimateOptions` is what :func:`logzbench.api.estimate` builds from its keywords, what
the command line builds from its flags and the workflow from an estimator's config entry (the
config keys are these field names).  Its checks run in the constructor, so every estimator
downstream receives valid settings and checks nothing again.

Names
-----
``K``
    Intermediate distributions of an annealing schedule; for CSL, Gibbs sweeps per chain in the
    workflow (``samples_per_chain = K // thin``).  The API also accepts ``steps`` (the command
    line's ``--steps`` / ``-K``) for it.
``chains``
    The number of independent samples an estimator averages: AIS / ADS / reverse-AIS / HAIS
    chains (``chains`` log-weights), RAISE chains per test example, CSL parallel Gibbs chains,
    IS family samples on each side.  The result's ``n_chains`` is the number of weights its ESS is
    measured against (CSL: chains x samples per chain).
"""

from __future__ import annotations

import difflib
import math
import numbers
from dataclasses import asdict, dataclass, fields
from typing import Any

from .registry import INITS
from .schedules import ADAPTIVE, make_schedule

__all__ = ["EstimateOptions", "CSL_MODES", "EXACT_MAX_SECONDS", "EXACT_PRECISIONS", "option_names"]

CSL_MODES = ("unbiased", "biased")
#: the exact estimator's enumeration precisions (:data:`logzbench.models.enumeration.PRECISIONS`)
EXACT_PRECISIONS = ("float64", "mixed")
#: the exact estimator's default time budget (seconds; ``exact_max_seconds=None``): a longer
#: estimated enumeration is refused before it starts
EXACT_MAX_SECONDS = 600.0


def _int(name: str, v: Any, lo: int, allow_none: bool = False) -> int | None:
    if v is None and allow_none:
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {v!r}")
    if int(v) < lo:
        what = {"chains": "number of chains", "K": "number of intermediate distributions K"}.get(name, name)
        raise ValueError(f"{what} must be >= {lo}, got {v}")
    return int(v)


def _budget(name: str, v: Any) -> float | None:
    """A time budget in seconds: ``None`` (the default budget), or a number > 0 (``inf``: no limit)."""
    if v is None:
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number of seconds, got {v!r}") from None
    if isinstance(v, bool) or not x > 0:  # NaN fails too
        raise ValueError(f"{name} must be > 0 seconds (inf: no limit), got {v!r}")
    return x


def _positive(name: str, v: Any, allow_none: bool = False, upper: float | None = None) -> float | None:
    if v is None and allow_none:
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {v!r}") from None
    if not (math.isfinite(x) and x > 0) or (upper is not None and x > upper):
        rng = f"in (0, {upper:g}]" if upper is not None else "positive and finite"
        raise ValueError(f"{name} must be {rng}, got {v!r}")
    return x


def _fraction(name: str, v: Any) -> float:
    """A number strictly between 0 and 1."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {v!r}") from None
    if isinstance(v, bool) or not 0.0 < x < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {v!r}")
    return x


@dataclass(frozen=True)
class EstimateOptions:
    """Settings of one estimate (see the module docstring for the shared names).

    Parameters
    ----------
    K : int, optional
        Intermediate distributions (annealed estimators; required by the ``linear`` and ``sigmoid``
        schedules; ``sm14500`` and schedule files have their own, and a different explicit ``K`` is
        refused).
    schedule : str
        ``linear``, ``sigmoid``, ``sm14500``, ``adaptive`` (chosen by an independent pilot run:
        :mod:`logzbench.estimators.adaptive`; with ``K`` its shape is resampled to ``K`` steps,
        without it the pilot's own length is used) or a file of inverse temperatures (read and
        checked here: 1-D, finite, non-decreasing from 0 to 1).
    chains : int
        See the module docstring.
    init : {"uniform", "base-rate"}
        Initial distribution of a binary model's annealing path (and the IS family's ``p_0``).
    seed : int
        Seeds the run's single :class:`torch.Generator`.
    device : str
        ``cpu``, ``cuda[:n]`` or ``auto``.
    n_examples : int, optional
        RAISE: random subsample of the test set (control variates correct the mean).
    csl_mode : {"unbiased", "biased"}
    exact_precision : {"float64", "mixed"}
        The exact estimator's enumeration: float64 throughout, or float32 pre-activations and
        softplus with float64 sums (its a-priori error bound is reported, ``extra.log_z_error_bound``).
    exact_max_seconds : float, optional
        The exact estimator refuses an enumeration whose estimated time exceeds this many seconds
        (before starting it); ``None``: :data:`EXACT_MAX_SECONDS` (10 minutes), ``inf``: no limit.
    burn_in : int
        CSL burn-in sweeps; IS family: Gibbs sweeps per model sample.
    thin : int
        CSL sweeps between kept samples.
    samples_per_chain : int
        CSL samples kept per chain.
    is_samples : int
        DBM / DBN: importance samples per test example for ``log f(v)``.
    n_bootstrap : int
        Bootstrap resamples of the confidence intervals (0: none).
    step_size, gamma, mh_sigma, proposal_scale : float
        Continuous models: leapfrog step, momentum refresh fraction (``None``: half the momentum
        power per unit time), random-walk scale, standard deviation of the Gaussian proposal.
    sweeps_per_beta : int
        Annealed estimators: MCMC transitions applied at each intermediate distribution (1: the
        papers' one sweep per temperature).
    pilot_chains : int
        ``schedule="adaptive"``: chains of the independent pilot run that chooses the schedule
        (at least 2: the conditional ESS needs two weights).
    target_ess : float
        ``schedule="adaptive"``: the conditional effective sample size, as a fraction in (0, 1), the
        pilot keeps between successive inverse temperatures (Zhou, Johansen & Aston 2016).
    target_width : float
        ``sandwich``: stop doubling K once upper - lower is at most this many nats.
    max_sweeps : int
        ``sandwich``: budget of Gibbs sweeps times chains (as ``total_sweeps`` counts them, the
        pilot's included).
    confidence : float
        ``sandwich``: confidence in (0, 1) of the stated Markov slack of each guaranteed end.
    progress : bool
        Progress bars.
    """

    K: int | None = None
    schedule: str = "linear"
    chains: int = 100
    init: str = "uniform"
    seed: int = 0
    device: str | None = "cpu"
    n_examples: int | None = None
    csl_mode: str = "unbiased"
    exact_precision: str = "float64"
    exact_max_seconds: float | None = None
    burn_in: int = 100
    thin: int = 1
    samples_per_chain: int = 10
    is_samples: int = 500
    n_bootstrap: int = 1000
    step_size: float = 0.2
    gamma: float | None = None
    mh_sigma: float = 0.1
    proposal_scale: float = 1.0
    sweeps_per_beta: int = 1
    pilot_chains: int = 100
    target_ess: float = 0.95
    target_width: float = 1.0
    max_sweeps: int = 100_000_000
    confidence: float = 0.95
    progress: bool = False

    def __post_init__(self) -> None:
        s = object.__setattr__
        s(self, "K", _int("K", self.K, 1, allow_none=True))
        s(self, "chains", _int("chains", self.chains, 1))
        s(self, "seed", _int("seed", self.seed, 0))
        s(self, "n_examples", _int("n_examples", self.n_examples, 1, allow_none=True))
        s(self, "burn_in", _int("burn_in", self.burn_in, 0))
        s(self, "thin", _int("thin", self.thin, 1))
        s(self, "samples_per_chain", _int("samples_per_chain", self.samples_per_chain, 1))
        s(self, "is_samples", _int("is_samples", self.is_samples, 1))
        s(self, "n_bootstrap", _int("n_bootstrap", self.n_bootstrap, 0))
        s(self, "step_size", _positive("step_size", self.step_size))
        s(self, "gamma", _positive("gamma", self.gamma, allow_none=True, upper=1.0))
        s(self, "mh_sigma", _positive("mh_sigma", self.mh_sigma))
        s(self, "proposal_scale", _positive("proposal_scale", self.proposal_scale))
        s(self, "exact_max_seconds", _budget("exact_max_seconds", self.exact_max_seconds))
        s(self, "sweeps_per_beta", _int("sweeps_per_beta", self.sweeps_per_beta, 1))
        s(self, "pilot_chains", _int("pilot_chains", self.pilot_chains, 1))
        s(self, "target_ess", _fraction("target_ess", self.target_ess))
        s(self, "target_width", _positive("target_width", self.target_width))
        s(self, "max_sweeps", _int("max_sweeps", self.max_sweeps, 1))
        s(self, "confidence", _fraction("confidence", self.confidence))
        if self.schedule == ADAPTIVE and self.pilot_chains < 2:
            raise ValueError(f"the adaptive schedule needs pilot_chains >= 2 (the conditional ESS compares "
                             f"weights), got {self.pilot_chains}")
        if self.init not in INITS:
            raise ValueError(f"unknown initial distribution {self.init!r}; choose one of {INITS}")
        if self.csl_mode not in CSL_MODES:
            raise ValueError(f"unknown CSL mode {self.csl_mode!r}; choose one of {CSL_MODES}")
        if self.exact_precision not in EXACT_PRECISIONS:
            raise ValueError(f"unknown exact precision {self.exact_precision!r}; choose one of {EXACT_PRECISIONS}")
        if not isinstance(self.schedule, str) or not self.schedule:
            raise ValueError(f"schedule must be a name or a file, got {self.schedule!r}")
        if self.schedule not in ("linear", "sigmoid", ADAPTIVE):
            # sm14500 or a file: its K is fixed; refuse an unknown name, a bad file, another explicit K
            make_schedule(self.schedule, self.K)
        s(self, "progress", bool(self.progress))

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> "EstimateOptions":
        """Build from keywords, accepting ``steps`` for ``K``; an unknown name is refused with
        the closest valid one."""
        if "steps" in kwargs:
            steps = kwargs.pop("steps")
            if kwargs.get("K") is not None and steps is not None and int(kwargs["K"]) != int(steps):
                raise ValueError(f"give K or steps, not both (K={kwargs['K']}, steps={steps})")
            if kwargs.get("K") is None:
                kwargs["K"] = steps
        names = option_names()
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            hints = []
            for k in unknown:
                close = difflib.get_close_matches(k, names, n=1)
                hints.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise ValueError(f"unknown estimator option(s) {', '.join(hints)}; valid: {sorted(names)}")
        return cls(**kwargs)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def option_names() -> tuple[str, ...]:
    """Every :class:`EstimateOptions` field name."""
    return tuple(f.name for f in fields(EstimateOptions))
