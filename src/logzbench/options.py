"""Estimator options: each declared once, validated once at the boundary.

An :class:`Option` states an option's name, default, check, help text, command-line flag, config
schema and whether the workflow records it; everything else is generated from it: the
``logzbench estimate`` flags (:func:`add_cli_flags`), the config schema's estimator properties
(:func:`config_properties`), the workflow's recorded settings (:meth:`Option.setting`) and the
checks of :class:`EstimateOptions`, which :func:`logzbench.api.estimate` builds from its keywords,
the command line from its flags and the workflow from an estimator's config entry.  Its checks run
in the constructor, so every estimator downstream receives valid settings and checks nothing again.

The shipped options are :data:`OPTIONS`; an estimator that needs one of its own declares it in
its registry entry (:attr:`logzbench.registry.EstimatorSpec.declares`), which passes it to
:func:`declare`.

Names
-----
``K``
    Intermediate distributions of an annealing schedule; for CSL, Gibbs sweeps per chain in the
    workflow (``samples_per_chain = K // thin``).  The API also accepts ``steps`` (the command
    line's ``--steps`` / ``-K``) for it.
``chains``
    Independent chains, each contributing one weight (or, for CSL, ``samples_per_chain`` samples):
    AIS / ADS / reverse-AIS / HAIS chains, RAISE chains per test example, CSL's parallel Gibbs
    chains, and the IS family's chains, each started at an exact sample of ``p_0`` (the IS side)
    whose state after ``burn_in`` sweeps is a model sample (the reverse side).  The result's
    ``n_chains`` is the number of weights its ESS is measured against (CSL: chains x samples per chain).
``burn_in``
    Gibbs sweeps a chain runs before its first kept sample: CSL's burn-in, and the IS family's sweeps
    from ``p_0`` to its one model sample.
``init``
    The initial distribution of a binary model's annealing path (and the IS family's ``p_0``).
``mixture_components``
    ``init="mixture"``: the number of components of the mixture fitted to the training rows
    (``None``: chosen by held-out log-likelihood).
entry and method
    A workflow config's ``estimators.<entry>`` is a named entry whose ``method`` is a registry
    estimator; a workflow record's ``estimator`` is the entry, its ``method`` the registry name.  The
    API's ``estimator`` argument (``logzbench estimate --estimator``) is a registry name.
"""

from __future__ import annotations

import argparse
import difflib
import math
import numbers
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .schedules import (
    ADAPTIVE,
    PILOT_SCHEDULES,
    TUNED,
    check_tuned_start,
    default_K,
    kind_of,
    make_schedule,
    tuned_round_ks,
)

__all__ = [
    "CONTROL_VARIATES",
    "CSL_MODES",
    "CSL_PROTOCOLS",
    "EXACT_MAX_SECONDS",
    "EXACT_PRECISIONS",
    "INITS",
    "TRANSITIONS",
    "OPTIONS",
    "EstimateOptions",
    "Option",
    "SettingQuery",
    "add_cli_flags",
    "config_properties",
    "declare",
    "declared",
    "option_names",
    "recorded_options",
]

#: initial distributions of the annealing path of a binary or categorical model: uniform, the data base
#: rate, a mixture of product distributions fitted to the training rows (:mod:`logzbench.models.mixture`)
INITS = ("uniform", "base-rate", "mixture")
#: transitions of a discrete user energy's annealing path (:class:`~logzbench.models.energy_path.DiscreteEnergyPath`):
#: Metropolis-within-Gibbs (block Gibbs with the model's exact conditional), Gibbs-with-Gradients, discrete
#: Langevin; :data:`AUTO_TRANSITION` picks one of them by a pilot
TRANSITIONS = ("gibbs", "gwg", "dmala")
AUTO_TRANSITION = "auto"
CSL_MODES = ("unbiased", "biased")
#: RAISE's control-variate coefficient on a subsample: fitted by regression, or the paper's alpha = 1
CONTROL_VARIATES = ("fitted", "fixed")
#: how CSL draws its hidden samples: fresh chains with a fixed burn-in, or Upadhya & Sastry's pool
#: (Sec. 4.2: chains chosen from a pool of long runs, samples after a random burn-in)
CSL_PROTOCOLS = ("fresh", "pooled")
#: the exact estimator's enumeration precisions (:data:`logzbench.models.enumeration.PRECISIONS`)
EXACT_PRECISIONS = ("float64", "mixed")
#: the exact estimator's default time budget (seconds; ``exact_max_seconds=None``): a longer
#: estimated enumeration is refused before it starts
EXACT_MAX_SECONDS = 600.0
#: the sandwich's default time budget (seconds; ``time_budget``): it stops doubling K before a round
#: that would end past it, and reports how far it got
SANDWICH_TIME_BUDGET = 600.0
#: the most chains a workflow config entry may ask for: far above the papers' 5,000, below what
#: exhausts memory at once
MAX_CHAINS = 10_000_000
#: :meth:`Option.setting`'s answer for a setting that is not recorded
SKIP = object()


# --------------------------------------------------------------------------- checks
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


def _float(name: str, v: Any, what: str) -> float:
    """``float(v)``, or a ValueError saying that ``name`` must be ``what``."""
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {what}, got {v!r}") from None


def _budget(name: str, v: Any) -> float | None:
    """A time budget in seconds: ``None`` (the default budget), or a number > 0 (``inf``: no limit)."""
    if v is None:
        return None
    x = _float(name, v, "a number of seconds")
    if isinstance(v, bool) or not x > 0:  # NaN fails too
        raise ValueError(f"{name} must be > 0 seconds (inf: no limit), got {v!r}")
    return x


def _positive(name: str, v: Any, allow_none: bool = False, upper: float | None = None) -> float | None:
    if v is None and allow_none:
        return None
    x = _float(name, v, "a number")
    if not (math.isfinite(x) and x > 0) or (upper is not None and x > upper):
        rng = f"in (0, {upper:g}]" if upper is not None else "positive and finite"
        raise ValueError(f"{name} must be {rng}, got {v!r}")
    return x


def _fraction(name: str, v: Any) -> float:
    """A number strictly between 0 and 1."""
    x = _float(name, v, "a number in (0, 1)")
    if isinstance(v, bool) or not 0.0 < x < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {v!r}")
    return x


# --------------------------------------------------------------------------- the workflow's records
@dataclass(frozen=True)
class SettingQuery:
    """What decides whether, and as what, a workflow job records an option (:meth:`Option.setting`).

    Attributes
    ----------
    reads : bool
        The estimator reads the option (it is in its registry entry's ``options``).
    entry : Mapping
        The estimator's config entry.
    settings : Mapping
        The job's settings so far (``schedule``, ``K``, ...).
    family_kind : str
        The model family's kind.
    deep : bool
        The model family has several hidden layers.
    swept : bool
        The estimator has sweep axes (it is not run once per model).
    default : Callable[[str], Any]
        An option's default for this estimator (its registry default, else the option's).
    """

    reads: bool
    entry: Mapping[str, Any]
    settings: Mapping[str, Any]
    family_kind: str
    deep: bool
    swept: bool
    default: Callable[[str], Any]

    def value(self, name: str) -> Any:
        """The entry's value of option ``name``, else its default."""
        return self.entry.get(name, self.default(name))


def _when_read(opt: "Option", q: SettingQuery) -> Any:
    return q.value(opt.name) if q.reads else SKIP


def _when_not_default(opt: "Option", q: SettingQuery) -> Any:
    """Recorded where it differs from the default: the settings (so the MLflow runs and the rerun
    triggers) of the estimates that leave it alone stay as they were before the option existed."""
    return q.value(opt.name) if q.reads and q.value(opt.name) != opt.default else SKIP


def _when_setting(key: str, *values: str) -> Callable[["Option", SettingQuery], Any]:
    """Recorded on the estimates whose setting ``key`` is one of ``values`` only: the adaptive schedule's, the
    pilot schedules', the tuned schedule's and the mixture reference's (``init: mixture``) options."""

    def record(opt: "Option", q: SettingQuery) -> Any:
        return q.value(opt.name) if q.reads and q.settings.get(key) in values else SKIP

    return record


def _when_deep(opt: "Option", q: SettingQuery) -> Any:
    return q.value(opt.name) if q.reads and q.deep else SKIP


def _csl_samples(opt: "Option", q: SettingQuery) -> Any:
    """CSL's samples per chain follow from its sweeps: ``K // thin``."""
    return max(1, int(q.settings["K"]) // int(q.value("thin"))) if q.reads else SKIP


def _examples(opt: "Option", q: SettingQuery) -> Any:
    """The subsample of the estimators that read it; every test row (``None``) for the other swept
    estimators of a binary model."""
    if q.reads:
        return q.value(opt.name)
    return None if q.family_kind == "binary" and q.swept else SKIP


# --------------------------------------------------------------------------- declarations
@dataclass(frozen=True)
class Option:
    """One estimator option, declared once.

    Attributes
    ----------
    name : str
        The API keyword, the config key and the recorded setting.
    default : Any
        Its value where nobody gives one.
    help : str
        One line for ``--help``, the config schema and the documentation.
    kind : {"int", "float", "fraction", "seconds", "choice", "str", "flag"}
        Its values: an integer of at least ``minimum``, a positive finite number (at most
        ``maximum``), a number in (0, 1), a time budget in seconds (``inf``: none), one of
        ``choices``, a string, or a switch.
    minimum, maximum : float, optional
        Bounds of ``int`` / ``float`` values.
    nullable : bool
        ``None`` is a value (an unset option with a meaning of its own).
    choices : tuple, optional
        The values of a ``choice``.
    flags : tuple of str
        Its ``logzbench estimate`` flags (default ``--<name with dashes>``); ``()`` with
        ``cli=False``.
    metavar, group : str, optional
        Its flag's metavar and ``--help`` group.
    cli, config : bool
        Whether it is a command-line flag / a key of a workflow estimator entry.
    config_maximum : int, optional
        A tighter upper bound for config entries than the API's (the number of chains).
    schema_default : bool
        The config schema fills in its default (``False``: an entry without it takes the estimator's
        own default, the sandwich's adaptive schedule).
    record : callable, optional
        ``(option, SettingQuery) -> value or SKIP``: whether a workflow job records it, and as what;
        ``None`` for options that are not settings of an estimate (they are sweep axes, or choose how
        it runs rather than what it computes).
    aliases : tuple of str
        Former names, still accepted with a :class:`DeprecationWarning` naming the current one.
    old_flags : tuple of str
        Former command-line flags, still accepted with a one-line deprecation message.
    """

    name: str
    default: Any
    help: str
    kind: str
    minimum: float | None = None
    maximum: float | None = None
    nullable: bool = False
    choices: tuple | None = None
    flags: tuple[str, ...] | None = None
    metavar: str | None = None
    group: str | None = None
    cli: bool = True
    config: bool = True
    config_maximum: int | None = None
    schema_default: bool = True
    record: Callable[["Option", SettingQuery], Any] | None = field(default=_when_read, repr=False)
    aliases: tuple[str, ...] = ()
    old_flags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        assert self.kind in ("int", "float", "fraction", "seconds", "choice", "str", "flag"), self
        assert self.kind != "choice" or self.choices, self

    # ----------------------------------------------------------------- values
    def check(self, value: Any) -> Any:
        """``value`` made canonical, or a ``ValueError`` naming the option."""
        n = self.name
        if self.kind == "int":
            return _int(n, value, int(self.minimum or 0), allow_none=self.nullable)
        if self.kind == "float":
            return _positive(n, value, allow_none=self.nullable, upper=self.maximum)
        if self.kind == "fraction":
            return _fraction(n, value)
        if self.kind == "seconds":
            return _budget(n, value)
        if self.kind == "flag":
            return bool(value)
        if value is None and self.nullable:
            return None
        if self.kind == "choice" and value not in self.choices:
            raise ValueError(f"unknown {self.help_name} {value!r}; choose one of {self.choices}")
        return value

    @property
    def help_name(self) -> str:
        return {"init": "initial distribution", "csl_mode": "CSL mode", "exact_precision": "exact precision"}.get(
            self.name, self.name
        )

    def setting(self, q: SettingQuery) -> Any:
        """What a workflow job records for this option (:data:`SKIP`: nothing)."""
        return SKIP if self.record is None else self.record(self, q)

    # ----------------------------------------------------------------- generated surfaces
    @property
    def cli_flags(self) -> tuple[str, ...]:
        return self.flags if self.flags is not None else ("--" + self.name.replace("_", "-"),)

    def add_to(self, parser) -> None:
        """Add its flag to an :mod:`argparse` parser (or group); unset flags are absent from the namespace,
        so :class:`EstimateOptions` supplies the default."""
        kw: dict[str, Any] = {"dest": self.name, "default": argparse.SUPPRESS, "help": self._cli_help()}
        if self.kind == "flag":
            kw["action"] = "store_true"
        else:
            kw["type"] = {"int": int, "float": float, "fraction": float, "seconds": float}.get(self.kind, str)
            if self.kind == "choice":
                kw["choices"] = list(self.choices)
            if self.metavar:
                kw["metavar"] = self.metavar
        parser.add_argument(*self.cli_flags, **kw)
        if self.old_flags:
            old = dict(kw, help=argparse.SUPPRESS, action=_deprecated_flag(self.cli_flags[0], kw.get("action")))
            parser.add_argument(*self.old_flags, **old)

    def _cli_help(self) -> str:
        if self.kind == "flag" or self.default is None or "default" in self.help:
            return self.help
        return (
            f"{self.help} (default {self.default:g})"
            if isinstance(self.default, float)
            else f"{self.help} (default {self.default})"
        )

    def json_schema(self) -> dict[str, Any]:
        """Its property in the config schema's estimator entries."""
        s: dict[str, Any] = {}
        if self.kind == "choice":
            s["enum"] = list(self.choices)
        elif self.kind == "int":
            s["type"] = ["integer", "null"] if self.nullable else "integer"
            s["minimum"] = int(self.minimum or 0)
            if self.config_maximum is not None:
                s["maximum"] = self.config_maximum
        elif self.kind in ("float", "fraction", "seconds"):
            s["type"] = ["number", "null"] if self.nullable or self.kind == "seconds" else "number"
            s["exclusiveMinimum"] = 0
            if self.kind == "fraction":
                s["exclusiveMaximum"] = 1
            elif self.maximum is not None:
                s["maximum"] = self.maximum
        elif self.kind == "flag":
            s["type"] = "boolean"
        else:
            s["type"] = "string"
        if self.schema_default and (self.default is not None or self.nullable):
            s["default"] = self.default
        s["description"] = self.help
        return s


def _deprecated_flag(new: str, action: str | None) -> type[argparse.Action]:
    """An :mod:`argparse` action for a former flag: a one-line note naming ``new``, then ``action``."""

    class Deprecated(argparse.Action):
        def __init__(self, option_strings, dest, **kwargs):
            if action == "store_true":
                kwargs.update(nargs=0, const=True)
            super().__init__(option_strings, dest, **kwargs)

        def __call__(self, parser, namespace, values, option_string=None):
            print(f"logzbench: {option_string} is deprecated; use {new}", file=sys.stderr)
            setattr(namespace, self.dest, True if action == "store_true" else values)

    return Deprecated


_CONTINUOUS = "continuous models (hais, ais-hmc, ais-mh, raise-hmc, reverse-hais, bdmc)"
_SANDWICH = "sandwich (a bracket on log Z / the test log-likelihood)"

#: The shipped options.  Their order is the order of the workflow's recorded settings.
# fmt: off
OPTIONS: tuple[Option, ...] = (
    Option("K", None, "intermediate distributions K (AIS, RAISE; default 1000 for the linear, sigmoid and adaptive "
           "schedules; sm14500 and a schedule file have their own, and a different --steps is refused; the "
           "sandwich's first K, default 100)", "int", minimum=1, nullable=True, flags=("--steps", "-K"),
           config=False, record=None),
    Option("schedule", "linear", "linear | sigmoid | sm14500 | adaptive (chosen by an independent pilot run) | "
           "tuned (re-spaced in pilot rounds of doubling K from their log-weight increments; K is the final "
           "round's) | a file of inverse temperatures (1-D, non-decreasing from 0 to 1) (default: linear; the "
           "sandwich's: adaptive)", "str", schema_default=False),
    Option("sweeps_per_beta", 1, "annealed estimators: MCMC transitions at each intermediate distribution (1: the "
           "papers' one sweep per temperature)", "int", minimum=1, record=_when_not_default),
    Option("pilot_chains", 100, "adaptive and tuned schedules: chains of the independent pilot run (each tuning "
           "round) that chooses it (at least 2: the conditional ESS compares weights, the tuning measures "
           "variances)", "int", minimum=1, record=_when_setting("schedule", *PILOT_SCHEDULES)),
    Option("tune_rounds", None, "tuned schedule: pilot rounds before the final one, each about doubling K, the "
           "first with at least 8 steps (default: as many as K allows; K below 16, or below 8 x 2^rounds, is "
           "refused)", "int", minimum=1, nullable=True, record=_when_setting("schedule", TUNED)),
    Option("tuned_start", "linear", "tuned schedule: the first round's schedule, linear or sigmoid (sm14500 and "
           "schedule files have their own length, which cannot double, and are refused)", "str",
           record=_when_setting("schedule", TUNED)),
    Option("target_ess", 0.95, "adaptive schedule: the conditional effective sample size, a fraction in (0, 1), "
           "kept between successive inverse temperatures (Zhou, Johansen & Aston 2016)", "fraction",
           record=_when_setting("schedule", ADAPTIVE)),
    Option("chains", 100, "independent chains: AIS / ADS / reverse-AIS / HAIS chains, RAISE chains per test "
           "example, CSL chains, IS-family chains (each an exact p_0 sample and, after burn_in sweeps, a model "
           "sample)", "int", minimum=1, config_maximum=MAX_CHAINS),
    Option("replicas", 8, "smc, pt: independent replicas of the run (each with its own chains and generator); the "
           "standard error of log Z comes from their spread", "int", minimum=2),
    Option("step_size", 0.2, "leapfrog step size", "float", group=_CONTINUOUS),
    Option("gamma", None, "momentum refresh fraction in (0, 1] (default: half the momentum power per unit time)",
           "float", maximum=1.0, nullable=True, group=_CONTINUOUS),
    Option("mh_sigma", 0.1, "random-walk proposal scale of ais-mh", "float", group=_CONTINUOUS),
    Option("proposal_scale", 1.0, "analysis models: standard deviation of the Gaussian initial distribution",
           "float", group=_CONTINUOUS),
    Option("csl_mode", "unbiased", "CSL: chains started from the model (unbiased) or from training rows "
           "(biased)", "choice", choices=CSL_MODES),
    Option("csl_protocol", "fresh", "CSL: fresh chains after burn_in sweeps, or Upadhya & Sastry's pooled chains "
           "(Sec. 4.2: a burn-in drawn uniformly from 0..burn_in, then every thin-th sweep)", "choice",
           choices=CSL_PROTOCOLS, record=_when_not_default),
    Option("control_variate", "fitted", "RAISE on a subsample: control-variate coefficient alpha fitted by "
           "regression, or fixed at 1 (Burda et al. Sec. 4)", "choice", choices=CONTROL_VARIATES,
           record=_when_not_default),
    Option("exact_precision", "float64", "exact: float64 enumeration, or float32 pre-activations with float64 "
           "sums (its a-priori error bound is reported as extra.log_z_error_bound)", "choice",
           choices=EXACT_PRECISIONS),
    Option("burn_in", 100, "Gibbs sweeps a chain runs before its first kept sample (CSL; the IS family's "
           "model samples)", "int", minimum=0),
    Option("thin", 1, "CSL sweeps between kept samples", "int", minimum=1),
    Option("samples_per_chain", 10, "CSL samples kept per chain (the workflow derives it: K // thin)", "int",
           minimum=1, config=False, record=_csl_samples),
    Option("n_examples", None, "RAISE, CSL: a random subsample of this many test examples (RAISE's control "
           "variates correct the mean; default every row)", "int", minimum=1, nullable=True, record=_examples),
    Option("is_samples", 500, "DBM / DBN: importance samples per test example for log f(v)", "int", minimum=1,
           record=_when_deep),
    Option("target_width", 1.0, "stop doubling K once upper - lower is at most this many nats", "float",
           group=_SANDWICH),
    Option("max_sweeps", 100_000_000, "budget of Gibbs sweeps x chains, the pilot's included", "int", minimum=1,
           group=_SANDWICH),
    Option("confidence", 0.95, "confidence in (0, 1) of the Markov slack stated for each guaranteed end "
           "(sandwich, bdmc)", "fraction", group=_SANDWICH),
    Option("time_budget", SANDWICH_TIME_BUDGET, "sandwich: seconds the run may take; it stops before a doubling "
           "of K that would end past them (that round's time estimated from the last round's) and returns the "
           "bracket so far, not reached (inf: no limit; the first round always runs)", "seconds",
           metavar="SECONDS", group=_SANDWICH, record=_when_not_default),
    Option("init", "uniform", "initial distribution of a binary model's annealing path (and the IS family's p_0); "
           "mixture: a mixture of product distributions fitted to the training rows by EM (needs --train-data)",
           "choice", choices=INITS, config=False, record=None),
    Option("transition", "gibbs", "a user's discrete energy (FILE.py:NAME): gibbs (Metropolis-within-Gibbs; block "
           "Gibbs with the model's exact conditional) | gwg (Gibbs-with-Gradients) | dmala (discrete Langevin) | auto "
           "(the one with the most effective samples per second in a short pilot at beta = 1); gwg's flips per move "
           "and dmala's step size are tuned by a pilot at beta = 1 (its sweeps count in total_sweeps); the families "
           "have their own samplers", "choice", choices=(*TRANSITIONS, AUTO_TRANSITION), record=_when_not_default),
    Option("mixture_components", None, "init mixture: components of the mixture fitted to the training rows (at "
           "most their number; default: chosen by held-out log-likelihood among 1, 2, 4, ..., 32)", "int",
           minimum=1, nullable=True, metavar="N", record=_when_setting("init", "mixture")),
    Option("seed", 0, "seeds the run's single torch.Generator", "int", minimum=0, config=False, record=None),
    Option("device", "cpu", "cpu | cuda[:n] | auto", "str", nullable=True, config=False, record=None),
    Option("exact_max_seconds", None, "exact: refuse an enumeration estimated to take longer than this many "
           "seconds (default 600; inf: no limit)", "seconds", metavar="SECONDS", old_flags=("--exact-budget",),
           config=False, record=None),
    Option("max_seconds", 86400.0, "a user's energy (FILE.py:NAME, a TorchScript .pt): refuse a sampling run "
           "whose calls of log_f, timed on its chains before it starts, are estimated to take longer than this "
           "many seconds (inf: no limit)", "seconds", metavar="SECONDS", config=False, record=None),
    Option("n_bootstrap", 1000, "bootstrap resamples of the confidence intervals (0: none)", "int", minimum=0,
           cli=False, config=False, record=None),
    Option("progress", False, "show a progress bar", "flag", config=False, record=None),
)
# fmt: on

_TABLE: dict[str, Option] = {o.name: o for o in OPTIONS}
_ALIASES: dict[str, str] = {a: o.name for o in OPTIONS for a in o.aliases}


def declare(*options: Option) -> None:
    """Add options of an estimator's own (its registry entry's ``declares``); a name is declared once."""
    for o in options:
        if o.name in _TABLE and _TABLE[o.name] is not o:
            raise ValueError(f"estimator option {o.name!r} is already declared")
        _TABLE[o.name] = o
        for a in o.aliases:
            _ALIASES[a] = o.name


def declared() -> dict[str, Option]:
    """Every declared option, by name, in declaration order."""
    return dict(_TABLE)


def option_names() -> tuple[str, ...]:
    """Every declared option's name."""
    return tuple(_TABLE)


def recorded_options() -> tuple[Option, ...]:
    """The options a workflow job may record as settings, in the order it records them."""
    return tuple(o for o in _TABLE.values() if o.record is not None)


def canonical_name(name: str, *, warn: bool = True) -> str:
    """An option's current name for ``name``; a former name (:attr:`Option.aliases`) warns with a
    :class:`DeprecationWarning` naming both, attributed to the first caller outside logzbench (shown by
    Python's default filters when that is ``__main__``)."""
    new = _ALIASES.get(name)
    if new is None:
        return name
    if warn:
        warnings.warn(f"option {name!r} is deprecated; use {new!r}", DeprecationWarning, stacklevel=_caller_level())
    return new


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside logzbench, seen from :func:`warnings.warn`'s caller."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_globals.get("__name__", "").startswith("logzbench."):
        frame, level = frame.f_back, level + 1
    return level


# --------------------------------------------------------------------------- the estimate's options
class EstimateOptions:
    """The checked settings of one estimate: one attribute per declared option (:func:`declared`).

    Unknown names are refused with the closest valid one; each value is checked by its
    :class:`Option`; then the checks that join options (a fixed schedule with another ``K``, the
    adaptive schedule's two pilot chains).  Immutable.
    """

    __slots__ = ("_values",)

    def __init__(self, **kwargs: Any) -> None:
        kwargs = {canonical_name(k): v for k, v in kwargs.items()}
        unknown = [k for k in kwargs if k not in _TABLE]
        if unknown:
            names = option_names()
            hints = []
            for k in unknown:
                close = difflib.get_close_matches(k, names, n=1)
                hints.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise ValueError(f"unknown estimator option(s) {', '.join(hints)}; valid: {sorted(names)}")
        values = {name: o.check(kwargs.get(name, o.default)) for name, o in _TABLE.items()}
        object.__setattr__(self, "_values", values)
        self._check_joint()

    def _check_joint(self) -> None:
        if self.schedule == ADAPTIVE and self.pilot_chains < 2:
            raise ValueError(
                f"the adaptive schedule needs pilot_chains >= 2 (the conditional ESS compares "
                f"weights), got {self.pilot_chains}"
            )
        if self.schedule == TUNED:
            self._check_tuned()
        if not isinstance(self.schedule, str) or not self.schedule:
            raise ValueError(f"schedule must be a name or a file, got {self.schedule!r}")
        if self.mixture_components is not None and self.init != "mixture":
            raise ValueError(
                f"mixture_components (--mixture-components) = {self.mixture_components} applies to init mixture "
                f"only, not init {self.init}; drop it or use --init mixture"
            )
        if kind_of(self.schedule).fixed:
            # sm14500 or a file: its K is fixed; refuse an unknown name, a bad file, another explicit K
            make_schedule(self.schedule, self.K)

    def _check_tuned(self) -> None:
        """The tuned schedule: two pilot chains, a first round of a schedule that can double (linear,
        sigmoid), and a K that leaves room for the rounds of doubling (:func:`~logzbench.schedules.tuned_round_ks`;
        a missing K is refused where the schedule is built, as for linear)."""
        if self.pilot_chains < 2:
            raise ValueError(
                f"the tuned schedule needs pilot_chains >= 2 (each round measures variances over its chains), "
                f"got {self.pilot_chains}"
            )
        check_tuned_start(self.tuned_start)
        if self.K is not None:
            tuned_round_ks(self.K, self.tune_rounds)

    @classmethod
    def from_kwargs(cls, *, own_start_K: bool = False, **kwargs: Any) -> "EstimateOptions":
        """Build from keywords, accepting ``steps`` for ``K``; without either, ``K`` is :func:`default_K`'s
        (``own_start_K``: the estimator reads K as its own start, without sweeping it)."""
        if "steps" in kwargs:
            steps = kwargs.pop("steps")
            if kwargs.get("K") is not None and steps is not None and int(kwargs["K"]) != int(steps):
                raise ValueError(f"give K or steps, not both (K={kwargs['K']}, steps={steps})")
            if kwargs.get("K") is None:
                kwargs["K"] = steps
        if kwargs.get("K") is None:
            kwargs["K"] = default_K(kwargs.get("schedule", _TABLE["schedule"].default), own_start=own_start_K)
        return cls(**kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return object.__getattribute__(self, "_values")[name]
        except KeyError:
            raise AttributeError(f"EstimateOptions has no option {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("EstimateOptions is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EstimateOptions) and self._values == other._values

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "EstimateOptions(" + ", ".join(f"{k}={v!r}" for k, v in self._values.items()) + ")"

    def __reduce__(self):
        return _rebuild, (self._values,)

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)


# --------------------------------------------------------------------------- generated surfaces
def add_cli_flags(parser) -> None:
    """Add every command-line option's flag to ``parser`` (``logzbench estimate``), in groups."""
    groups: dict[str, Any] = {}
    for o in _TABLE.values():
        if not o.cli:
            continue
        target = parser
        if o.group:
            if o.group not in groups:
                groups[o.group] = parser.add_argument_group(o.group)
            target = groups[o.group]
        o.add_to(target)


def config_properties() -> dict[str, dict[str, Any]]:
    """The config schema's estimator-entry properties of the options that are config keys."""
    return {o.name: o.json_schema() for o in _TABLE.values() if o.config}


def config_schema(base: Mapping[str, Any]) -> dict[str, Any]:
    """An estimator entry's JSON schema: ``base`` (the schema file's entry: its non-option keys) with
    every option's property added, unknown keys refused, and the adaptive schedule's two pilot chains."""
    schema = dict(base)
    schema["properties"] = {**dict(base.get("properties") or {}), **config_properties()}
    schema["additionalProperties"] = False
    schema["if"] = {"required": ["schedule"], "properties": {"schedule": {"enum": list(PILOT_SCHEDULES)}}}
    schema["then"] = {
        "properties": {
            "pilot_chains": {
                "type": "integer",
                "minimum": 2,
                "description": "schedule adaptive or tuned: the pilot run needs at least 2 chains (its "
                "conditional ESS compares weights; the tuning measures variances)",
            }
        }
    }
    return schema


def rename_deprecated(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A config entry with former option names replaced by the current ones (a DeprecationWarning each)."""
    return {canonical_name(k): v for k, v in entry.items()}


def _rebuild(values: dict[str, Any]) -> EstimateOptions:
    opts = object.__new__(EstimateOptions)
    object.__setattr__(opts, "_values", dict(values))
    return opts
