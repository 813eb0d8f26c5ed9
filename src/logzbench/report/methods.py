"""The report's method and family lists and sweep axes, all derived from the registry (plot styles:
:mod:`logzbench.plotting`).

Records name their estimator's method (``ais``, ``raise``, ...); methods that are not in the
registry (records of older or foreign estimators) still load: their sweep axes are the ones the
record gives, they get no bound-based flags, and plots draw them in Matplotlib's default style.
"""

from __future__ import annotations

from typing import Any

from ..plotting import method_label, method_style
from ..registry import ESTIMATORS, FAMILIES, INITS, EstimatorSpec, family_names, methods_where

#: stochastic lower bounds of the test log-likelihood (RAISE, CSL)
LOWER_BOUND_METHODS = methods_where(yields="log_likelihood", bound="lower")
#: methods with an annealing schedule, swept over K and the initial distribution
ANNEALED_METHODS = tuple(n for n, s in ESTIMATORS.items() if {"K", "init"} <= set(s.axes))
#: estimators whose estimate is a bracket [lower, upper] (sandwich, BDMC): their own table and figures
#: (:mod:`.bracket`), and the bracket columns of table_continuous.csv
BRACKET_METHODS = methods_where(bound="bracket")
#: estimators of continuous models (Sohl-Dickstein & Culpepper 2012), swept over K (no init); not the
#: bracket estimators (BDMC's bracket is on simulated data, not the test rows)
CONTINUOUS_METHODS = tuple(
    n for n in methods_where(kinds=("analysis", "generative")) if ESTIMATORS[n].bound not in ("exact", "bracket")
)
#: methods that estimate log Z from one annealing run (Liu et al. Figs 3-4 compare them over K)
LOG_Z_METHODS = tuple(n for n in ANNEALED_METHODS if ESTIMATORS[n].yields == "log_z")
#: methods swept over K (the x axis of the per-model plots); a bracket's midpoint is drawn in its own
#: figure (plots/<model>_bracket.png), not there
K_METHODS = tuple(n for n in methods_where(axes="K") if n not in BRACKET_METHODS)
#: continuous families: analysis models (HAIS errs high on their log-likelihood, as AIS does) and
#: generative ones (one run per test point: log p-hat(x) errs low)
ANALYSIS_FAMILIES = family_names("analysis")
GENERATIVE_FAMILIES = family_names("generative")
CONTINUOUS_FAMILIES = ANALYSIS_FAMILIES + GENERATIVE_FAMILIES
#: families with several hidden layers (RAISE Table 2; importance-sampled log f(v))
DEEP_FAMILIES = tuple(n for n, s in FAMILIES.items() if s.deep)
#: initial distributions of the annealing path, in table column order
INIT_ORDER = INITS


def spec(method: str) -> EstimatorSpec | None:
    """The registry entry of ``method``; ``None`` for a method the registry does not know."""
    return ESTIMATORS.get(str(method))


def uses_axis(method: str, axis: str, given: Any = None) -> bool:
    """Whether a record of ``method`` has a value on sweep axis ``axis`` (``K``, ``init``, ``seed``).

    Registered methods: the axis is one of the estimator's sweep axes.  Other methods: the
    record gives a value (``given`` is not ``None``), except that every method but ``exact`` has a seed.
    """
    s = spec(method)
    if s is not None:
        return axis in s.axes
    return given is not None or (axis == "seed" and method != "exact")


def uses_schedule(method: str, given: Any = None) -> bool:
    """Whether a record of ``method`` has an annealing schedule (the estimator reads the ``schedule``
    option; a method the registry does not know: the record gives one)."""
    s = spec(method)
    return "schedule" in s.options if s is not None else given is not None


def weight_unit(method: str) -> str:
    """What the ESS of ``method`` counts: ``chains`` of an annealing run (and of methods the registry
    does not know), else ``samples`` (CSL, the importance-sampling family)."""
    s = spec(method)
    return "chains" if s is None or "schedule" in s.options else "samples"


def family_kind(family: str, method: str = "") -> str | None:
    """Kind (:data:`logzbench.registry.KINDS`: ``binary``, ``gaussian-binary``, ``categorical``, ``analysis``,
    ``generative``) of ``family``; a family the registry does not
    know takes the kind of ``method`` when that applies to one kind only, else ``None``."""
    f = FAMILIES.get(str(family))
    if f is not None:
        return f.kind
    s = spec(method)
    return s.kinds[0] if s is not None and len(s.kinds) == 1 else None


#: ``method``'s line style and legend name: defined once, with every figure's styles, in
#: :mod:`logzbench.plotting` (:func:`~logzbench.plotting.method_style`, :func:`~logzbench.plotting.method_label`)
line_style = method_style
label = method_label
