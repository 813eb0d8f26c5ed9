"""A bracket ``[lower, upper]`` on log Z or on the mean test log-likelihood, each end labelled with
what the theory gives it.

An end is *guaranteed* only where it is a true stochastic bound (RAISE paper, Eq. 6): an estimate
``X_hat`` with ``E[exp(X_hat)] = exp(X)`` (AIS's ``Z_hat``, RAISE's ``p_ann_hat(v)``) overshoots by more
than ``t`` with probability at most ``exp(-t)`` (Markov's inequality), and a mean of ``N`` independent
such estimates (one per test example) overshoots by more than ``t`` with probability at most
``exp(-N t)``.  At confidence ``c`` the *slack* is therefore ``t = log(1 / (1 - c)) / N``: with
probability at least ``c``, ``quantity >= lower - t`` (a lower end), or ``quantity <= upper + t``
(an upper end).  A guaranteed end also says *of what*: ``p`` (the model) or ``p_ann`` (RAISE's
annealing model, which approaches ``p`` as K grows but is not ``p``).  Every other end is
*approximate*: its slack is not reported (``None``) and its words say why.

The Markov slack is distribution-free and loose (3 nats at 95 % for a single log Z-hat).  The
bracket's reported ends are therefore the estimates widened by their *noise*, ``z`` standard errors
with ``z`` chosen so that both ends together miss with probability about ``1 - confidence``, over every
bracket a stopping rule looked at (:func:`noise_z`): a stopping rule that keeps the first narrow
bracket selects ends that happen to be close, and the allowance must cover that.

Where the raw estimates cross (the lower end's estimate above the upper end's), at least one end is
wrong beyond what its labelled direction allows, and nothing says which: the reported bracket is then
the *span* of both ends' noise intervals (:func:`span`), and it says that the ends cross and by how
much (``<q>_crossed``, ``<q>_crossed_by``).  A crossed bracket is never a reached one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = ["End", "QUANTITIES", "Span", "make_bracket", "markov_slack", "noise_z", "span", "widened"]

#: what a bracket bounds: log Z, or the mean test log-likelihood
QUANTITIES = ("log_z", "mean_log_likelihood")


@dataclass(frozen=True)
class End:
    """One end of a bracket.

    Attributes
    ----------
    estimator : str
        Which estimator produced it (``ais``, ``raise``, ``reverse-ais``, ...).
    value : float
        The estimate.
    stderr : float
        Its standard error (NaN where unknown).
    guaranteed : bool
        Whether it is a true stochastic bound in the direction of its side.
    of : {"p", "p_ann"} or None
        The distribution a guaranteed end bounds (``None`` for an approximate end).
    words : str
        The guarantee, or why there is none, in one sentence.
    n_independent : int
        Independent estimates averaged in log space (1 for log Z; the test examples for a mean of
        per-example bounds): the Markov slack shrinks as ``1 / n_independent``.
    """

    estimator: str
    value: float
    stderr: float
    guaranteed: bool
    of: str | None
    words: str
    n_independent: int = 1

    def __post_init__(self) -> None:
        if self.guaranteed and self.of not in ("p", "p_ann"):
            raise ValueError(f"a guaranteed end says what it bounds ('p' or 'p_ann'), got {self.of!r}")
        if int(self.n_independent) < 1:
            raise ValueError(f"n_independent must be >= 1, got {self.n_independent}")


def markov_slack(confidence: float, n_independent: int = 1) -> float:
    """``t`` with ``P(overshoot > t) <= 1 - confidence`` for a mean of ``n_independent`` log-estimates of
    unbiased estimators (Markov's inequality on ``exp(N (mean - truth))``)."""
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return math.log(1.0 / (1.0 - float(confidence))) / int(n_independent)


def noise_z(confidence: float, looks: int = 1) -> float:
    """Standard-normal quantile that puts each end's noise allowance at ``(1 - confidence) / (2 looks)``:
    the two ends of a bracket together miss at most ``1 - confidence`` (union bound), also when a
    stopping rule looked at ``looks`` brackets and kept one (Bonferroni)."""
    from scipy.stats import norm

    return float(norm.ppf(1.0 - (1.0 - float(confidence)) / (2.0 * max(int(looks), 1))))


def widened(e: End, sign: float, z: float) -> float:
    """The end's estimate moved outwards (``sign`` -1 for a lower end, +1 for an upper one) by ``z``
    standard errors; without a finite standard error its noise is unknown, and the end is infinite."""
    se = float(e.stderr)
    return float(e.value) + sign * z * (se if math.isfinite(se) else math.inf)


class Span(NamedTuple):
    """The reported ends of a bracket and how far its raw estimates cross.

    ``crossed_by`` is the lower end's estimate minus the upper end's where that is positive (the raw
    ends cross), 0 where they do not, NaN where an estimate is not finite."""

    lower: float
    upper: float
    crossed_by: float

    @property
    def width(self) -> float:
        return self.upper - self.lower

    @property
    def crossed(self) -> bool:
        return bool(self.crossed_by > 0)


def span(lower: End, upper: End, z: float) -> Span:
    """The bracket's reported ends: each estimate widened outwards by ``z`` standard errors
    (:func:`widened`); where the raw estimates cross, one of the two ends is wrong and nothing says which,
    so the bracket is the span of both ends' intervals ``estimate +- z stderr``: from the smaller of their
    lower sides to the larger of their upper sides (it holds the quantity wherever either end's interval
    does)."""
    a, b = widened(lower, -1.0, z), widened(upper, +1.0, z)
    gap = float(lower.value) - float(upper.value)
    if gap > 0:
        a, b = min(a, widened(upper, -1.0, z)), max(b, widened(lower, +1.0, z))
    return Span(a, b, gap if gap > 0 else (0.0 if gap <= 0 else math.nan))


def _end_dict(prefix: str, e: End, reported: float, confidence: float) -> dict[str, Any]:
    slack = markov_slack(confidence, e.n_independent) if e.guaranteed else None
    return {
        prefix: reported,
        f"{prefix}_estimate": float(e.value),
        f"{prefix}_stderr": float(e.stderr),
        f"{prefix}_estimator": e.estimator,
        f"{prefix}_guaranteed": bool(e.guaranteed),
        f"{prefix}_of": e.of,
        f"{prefix}_slack": slack,
        f"{prefix}_guarantee": e.words
        + (
            f"; distribution-free: beyond the estimate by at most {slack:.3g} nats with "
            f"probability >= {confidence:g} (Markov)"
            if slack is not None
            else ""
        ),
    }


def make_bracket(quantity: str, lower: End, upper: End, confidence: float, looks: int = 1) -> dict[str, Any]:
    """The bracket's record.

    ``<quantity>_lower`` / ``_upper`` are the estimates widened by their noise, ``z`` standard errors
    (:func:`noise_z`: the bracket holds the quantity with probability about ``confidence``, to the normal
    approximation of each estimate's error, where each end errs in its labelled direction), or, where the
    raw estimates cross, the span of both ends (:func:`span`); the raw estimates are ``_lower_estimate`` /
    ``_upper_estimate``.  Each end also carries its standard error, estimator and guarantee
    (``_guaranteed``, ``_of``, ``_slack``: the distribution-free Markov slack of a guaranteed end's
    estimate, and ``_guarantee`` in words).  ``<quantity>_width`` is ``upper - lower``;
    ``<quantity>_crossed``: the raw estimates cross (one end is wrong: an approximate end, or a guaranteed
    one beyond its noise), by ``<quantity>_crossed_by`` nats (lower estimate minus upper estimate; 0 where
    they do not cross)."""
    if quantity not in QUANTITIES:
        raise ValueError(f"unknown bracket quantity {quantity!r}; choose one of {QUANTITIES}")
    z = noise_z(confidence, looks)
    s = span(lower, upper, z)
    out = {
        **_end_dict(f"{quantity}_lower", lower, s.lower, confidence),
        **_end_dict(f"{quantity}_upper", upper, s.upper, confidence),
    }
    out[f"{quantity}_width"] = s.width
    out[f"{quantity}_crossed"] = s.crossed
    out[f"{quantity}_crossed_by"] = s.crossed_by
    out["confidence"] = float(confidence)
    out["noise_z"] = z
    return out
