"""The registry: every estimator and every model family, in one place, importable without torch.

Everything that needs to know which estimators or families exist derives it from here: the
API's dispatch (:func:`logzbench.api.estimate`), the command line's ``--estimator`` choices,
the config check (an estimator entry's ``method`` and a model's ``family`` are names of the tables
here, checked when the config is loaded: the schema lists none of them), the workflow's sweep
tables, estimate rule and script, and the report's method lists and flag rules.  How an estimator
is drawn is not here but in :data:`logzbench.plotting.ESTIMATOR_STYLES` (an entry without one is
drawn in an automatic style).

Adding an estimator
    Write its module under ``estimators/`` with an ``estimate(ctx)`` function (see
    :class:`logzbench.estimators.context.EstimateContext`) and, where the defaults do not fit, a
    ``check(ctx)`` (what it refuses before any work) and a ``peak_bytes(ctx)`` (its memory); add one
    :class:`EstimatorSpec` to :data:`ESTIMATORS` below (or pass it to :func:`register`).  An option
    of its own is an :class:`~logzbench.options.Option` in the entry's ``declares``: the API keyword,
    the ``logzbench estimate`` flag, the config key and the recorded setting follow from it.

Adding a model family
    Write its module under ``models/`` (a class with ``from_arrays`` / ``to_arrays``), a trainer
    under ``training/``, and add one :class:`FamilySpec` to :data:`FAMILIES` below (or pass it to
    :func:`register`).

Entries name their code by dotted path (``"package.module:attribute"``) and :func:`load`
imports it on first use, so this module stays cheap to import (the command line's ``--help``,
Snakemake's DAG construction).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from . import options as _options
from .options import INITS, Option

__all__ = [
    "AXES",
    "BOUNDS",
    "ESTIMATORS",
    "FAMILIES",
    "GIBBS_KINDS",
    "INITS",
    "KINDS",
    "LEARNERS",
    "EstimatorSpec",
    "FamilySpec",
    "LearnerSpec",
    "Option",
    "estimator",
    "estimator_names",
    "estimators_for",
    "family",
    "family_names",
    "learner",
    "load",
    "register",
    "setting_stem",
    "parse_setting_stem",
    "methods_where",
]

#: model kinds: binary (RBM, DBM, DBN, a binary energy); gaussian-binary (real visible rows, binary
#: hidden units, a Gibbs annealing path with the hidden layer summed out: the Gaussian-Bernoulli RBM);
#: categorical (rows of states 0..q-1: Potts models, the Potts RBM, a categorical energy); and the
#: continuous analysis (energy E(x)) and generative (p(x) = integral p(x | s) p(s) ds) models of
#: Sohl-Dickstein & Culpepper (2012)
KINDS = ("binary", "gaussian-binary", "categorical", "analysis", "generative")
#: kinds whose models have a Gibbs (or Metropolis-within-Gibbs) annealing path (``annealing_path``):
#: AIS, RAISE, ADS, reverse AIS and the IS family run on them
GIBBS_KINDS = ("binary", "gaussian-binary", "categorical")
#: how an estimate relates to the quantity it yields, in expectation over its randomness:
#: ``exact``; ``unbiased-in-z`` (Z-hat unbiased, so log Z-hat is a stochastic lower bound of log Z
#: and the log-likelihood it implies errs high); ``lower`` / ``upper`` (a stochastic lower / upper
#: bound of what it yields); ``bracket`` (a lower and an upper end, each labelled with its own
#: guarantee: the sandwich, bidirectional Monte Carlo); ``none`` (no direction)
BOUNDS = ("exact", "unbiased-in-z", "lower", "upper", "bracket", "none")
#: sweep axes an estimator can have in the workflow; each is one component of its result file name
AXES = ("K", "init", "seed")
#: workflow config key holding each axis' values (an estimator's own, else `evaluation`'s)
AXIS_CONFIG_KEYS = {"K": "K", "init": "inits", "seed": "seeds"}


def load(dotted: str) -> Any:
    """The object named by ``"package.module:attribute"`` (imported on first use)."""
    module, _, attr = dotted.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    return obj


# --------------------------------------------------------------------------- estimators
@dataclass(frozen=True)
class EstimatorSpec:
    """One estimator.

    Attributes
    ----------
    name : str
        What users type (``--estimator``, config ``method``).
    entry : str
        ``"module:function"`` of its ``estimate(ctx) -> EstimateResult``.
    kinds : tuple of str
        Model kinds it applies to (:data:`KINDS`).
    families : tuple of str or None
        Further restriction to these families (CSL: RBMs only); ``None`` = every family of ``kinds``.
    axes : tuple of str
        What the workflow sweeps, in result-file order (:data:`AXES`): ``()`` runs once per model.
    yields : {"log_z", "log_likelihood"}
        Its headline: ``log Z`` (the mean test log-likelihood follows from ``log f(v)``) or the
        mean test log-likelihood directly (RAISE, CSL).
    bound : str
        Direction of its error on what it yields (:data:`BOUNDS`).
    options : tuple of str
        Options it reads (besides ``seed``, ``device``, ``progress``): the config keys the workflow
        passes on and records.  Each is declared once, in :data:`logzbench.options.OPTIONS` or in
        some estimator's ``declares``.
    declares : tuple of Option
        Options of its own (:class:`logzbench.options.Option`): each becomes an API keyword, a
        ``logzbench estimate`` flag, a config key and a recorded setting; list them in ``options`` too.
    needs_data : bool
        Refuses to run without test data.
    defaults : tuple of (str, value)
        Its own defaults of options (the sandwich's adaptive schedule), applied where the caller gives
        none; every other option's default is :class:`~logzbench.options.EstimateOptions`'.
    summary : str
        One line for ``logzbench estimate --help``.

    Constructing a spec only checks it (a :class:`ValueError` names what is wrong); its ``declares``
    become known options when it is registered (:func:`register`).  How its lines look in figures is
    the report's business (:data:`logzbench.plotting.ESTIMATOR_STYLES`, automatic for an estimator
    without an entry there).
    """

    name: str
    entry: str
    kinds: tuple[str, ...]
    axes: tuple[str, ...]
    yields: str
    bound: str
    options: tuple[str, ...]
    summary: str
    families: tuple[str, ...] | None = None
    needs_data: bool = False
    defaults: tuple[tuple[str, Any], ...] = ()
    declares: tuple[Option, ...] = ()

    def __post_init__(self) -> None:
        known = {*_options.option_names(), *(o.name for o in self.declares)}
        for what, have, allowed in (
            ("options", self.options, known),
            ("kinds", self.kinds, KINDS),
            ("axes", self.axes, AXES),
            ("yields", (self.yields,), ("log_z", "log_likelihood")),
            ("bound", (self.bound,), BOUNDS),
        ):
            bad = [v for v in have if v not in allowed]
            if bad:
                choices = f"; choose from {list(allowed)}" if what != "options" else " (declare it in `declares`)"
                raise ValueError(f"estimator {self.name!r}: unknown {what} {bad}{choices}")

    def applies_to(self, family_name: str) -> bool:
        """Whether this estimator runs on a model of ``family_name``."""
        fam = family(family_name)
        return fam.kind in self.kinds and (self.families is None or fam.name in self.families)

    @property
    def function(self) -> Callable:
        """Its ``estimate(ctx)`` function (imports the module)."""
        return load(self.entry)

    def reads_unswept(self, axis: str) -> bool:
        """Whether it reads option ``axis`` (``K``, ``init``) without sweeping it: one value, its own start
        (the sandwich's K, which it doubles itself; its one initial distribution)."""
        return axis in self.options and axis not in self.axes

    @property
    def module(self) -> Any:
        """Its module (imported), where the context looks for its optional hooks ``check(ctx)`` and
        ``peak_bytes(ctx)`` (:class:`logzbench.estimators.context.EstimateContext`)."""
        return importlib.import_module(self.entry.partition(":")[0])


#: options of every annealed estimator's schedule: its length and shape, sweeps per temperature, the
#: adaptive and tuned schedules' pilots (chains; target CESS; rounds and first schedule)
_SCHEDULE = ("K", "schedule", "sweeps_per_beta", "pilot_chains", "target_ess", "tune_rounds", "tuned_start")
#: what every estimator on a discrete model's annealing path reads about the path: its start and transition
_PATH = ("init", "mixture_components", "transition")
_ANNEALED = _SCHEDULE + ("chains", *_PATH, "is_samples", "n_bootstrap", "max_seconds")
_IS_FAMILY = ("chains", "burn_in", *_PATH, "is_samples", "n_bootstrap", "max_seconds")
_CONTINUOUS = _SCHEDULE + ("chains", "step_size", "gamma", "mh_sigma", "proposal_scale", "n_bootstrap", "max_seconds")


#: smc's resampling trigger (:mod:`logzbench.estimators.smc`)
_ESS_THRESHOLD = Option(
    "ess_threshold",
    0.5,
    "smc: resample a population (systematically) when the effective sample size of its "
    "weights falls below this fraction of its chains",
    "fraction",
)


def _e(name, module, **kw) -> EstimatorSpec:
    return EstimatorSpec(name=name, entry=f"logzbench.estimators.{module}:estimate", **kw)


def _is_family(name: str, bound: str, summary: str) -> EstimatorSpec:
    """An estimator of the importance-sampling family (:mod:`logzbench.estimators.is_family`): log Z from
    exact draws of the path's start and model samples, swept over init and seed."""
    return _e(
        name,
        "is_family",
        kinds=GIBBS_KINDS,
        axes=("init", "seed"),
        yields="log_z",
        bound=bound,
        options=_IS_FAMILY,
        summary=summary,
    )


#: Every estimator, by name, in the order the command line lists them.
# fmt: off
ESTIMATORS: dict[str, EstimatorSpec] = {s.name: s for s in (
    _e("exact", "exact", kinds=KINDS, axes=(), yields="log_z", bound="exact",
       options=("exact_precision", "exact_max_seconds"),
       summary="enumeration (binary models: smaller side <= ~30 units) or a closed form (continuous)"),
    _e("ais", "ais", kinds=GIBBS_KINDS, axes=("K", "init", "seed"), yields="log_z", bound="unbiased-in-z",
       options=_ANNEALED,
       summary="annealed importance sampling (log Z errs low, the log-likelihood high)"),
    _e("raise", "raise_", kinds=GIBBS_KINDS, axes=("K", "init", "seed"), yields="log_likelihood", bound="lower",
       options=_ANNEALED + ("n_examples", "control_variate"), needs_data=True,
       summary="reverse AIS estimator of the test log-likelihood (a stochastic lower bound)"),
    _e("csl", "csl", kinds=("binary",), families=("rbm",), axes=("K", "seed"), yields="log_likelihood",
       bound="lower", options=("chains", "csl_mode", "csl_protocol", "burn_in", "thin", "samples_per_chain",
                               "n_examples"),
       needs_data=True,
       summary="conservative sampling-based likelihood (RBMs; a stochastic lower bound)"),
    _e("ads", "ads", kinds=GIBBS_KINDS, axes=("K", "init", "seed"), yields="log_z", bound="none",
       options=_ANNEALED,
       summary="annealed discriminance sampling, sequential binary (Liu et al. Alg. 1) on one AIS run"),
    _e("ads-multinomial", "ads", kinds=GIBBS_KINDS, axes=("K", "init", "seed"), yields="log_z", bound="none",
       options=_ANNEALED,
       summary="annealed discriminance sampling, multinomial (Liu et al. Alg. 2)"),
    _e("reverse-ais", "reverse_ais", kinds=GIBBS_KINDS, axes=("K", "init", "seed"), yields="log_z", bound="upper",
       options=_ANNEALED,
       summary="log Z from a forward then reverse chain, harmonic aggregation (log Z errs high)"),
    _e("sandwich", "sandwich", kinds=KINDS, axes=("seed",), yields="log_z", bound="bracket",
       options=_ANNEALED + ("n_examples", "target_width", "max_sweeps", "confidence", "time_budget", "step_size",
                            "gamma", "mh_sigma", "proposal_scale"),
       defaults=(("schedule", "adaptive"),),
       summary="a bracket [lower, upper] on log Z (with --data: on the test log-likelihood) from AIS and reverse "
               "AIS / RAISE, K doubled until target_width, max_sweeps or time_budget; each end labelled with its "
               "guarantee"),
    _e("smc", "smc", kinds=(*GIBBS_KINDS, "analysis"), axes=("seed",), yields="log_z", bound="none",
       options=("K", "schedule", "sweeps_per_beta", "target_ess", "pilot_chains", "tune_rounds", "tuned_start",
                "chains", "replicas", "ess_threshold", "init", "transition", "is_samples", "n_bootstrap",
                "max_seconds", "step_size", "gamma", "mh_sigma", "proposal_scale"),
       defaults=(("schedule", "adaptive"),), declares=(_ESS_THRESHOLD,),
       summary="tempered SMC: systematic resampling when the ESS falls below ess_threshold, replicas for the s.e.; "
               "temperatures by the conditional ESS (default; consistent, slightly biased) or a fixed schedule "
               "(Z-hat unbiased)"),
    _is_family("is", "unbiased-in-z", "importance sampling from p_0 (init)"),
    _is_family("ris", "upper", "reverse importance sampling from model samples"),
    _is_family("is-avg", "none", "naive average of IS and reverse IS"),
    _is_family("is-weighted", "none", "inverse-variance weighted IS / reverse IS"),
    _is_family("is-select", "none", "IS or reverse IS, whichever has less variance"),
    _is_family("ds", "none", "discriminance sampling between p_0 and the model"),
    _e("hais", "hais", kinds=("analysis", "generative"), axes=("K", "seed"), yields="log_z", bound="unbiased-in-z",
       options=_CONTINUOUS,
       summary="Hamiltonian AIS (continuous models; Sohl-Dickstein & Culpepper 2012)"),
    _e("ais-hmc", "hais", kinds=("analysis", "generative"), axes=("K", "seed"), yields="log_z",
       bound="unbiased-in-z", options=_CONTINUOUS,
       summary="AIS with HMC transitions, momentum resampled every step"),
    _e("ais-mh", "hais", kinds=("analysis", "generative"), axes=("K", "seed"), yields="log_z",
       bound="unbiased-in-z", options=_CONTINUOUS,
       summary="AIS with random-walk Metropolis transitions"),
    _e("raise-hmc", "raise_hmc", kinds=("analysis",), axes=("K", "seed"), yields="log_likelihood", bound="lower",
       options=_CONTINUOUS, needs_data=True,
       summary="RAISE with HAIS transitions on analysis models (a stochastic lower bound of log p_ann)"),
    _e("reverse-hais", "raise_hmc", kinds=("generative",), axes=("K", "seed"), yields="log_likelihood",
       bound="upper", options=_CONTINUOUS, needs_data=True,
       summary="forward then reverse HAIS over the latent, per test point (an approximate upper bound)"),
    _e("bdmc", "bdmc", kinds=("generative",), axes=("K", "seed"), yields="log_likelihood", bound="bracket",
       options=_CONTINUOUS + ("n_examples", "confidence"),
       summary="bidirectional Monte Carlo on simulated data: stochastic lower and upper bounds of log p(x)"),
    _e("pt", "pt", kinds=GIBBS_KINDS + ("analysis",), axes=("K", "seed"), yields="log_z", bound="none",
       options=("K", "temperatures", "rounds", "replicas", "sweeps_per_beta", "init", "transition", "is_samples",
                "step_size", "gamma", "proposal_scale", "max_seconds"),
       declares=(
           Option("temperatures", 16, "pt: chains on the ladder, at inverse temperatures from 0 to 1 (at least 2; "
                  "about 2 Lambda + 1 keeps the swaps accepted)", "int", minimum=2),
           Option("rounds", 10, "pt: ladder-tuning rounds before the final round of K scans (round j runs "
                  "2^(j-1) scans, then re-spaces the ladder to equal swap rejection)", "int", minimum=0),
       ),
       summary="non-reversible parallel tempering on a ladder tuned to equal swap rejection; log Z by stepping "
               "stone over the final K scans (approximate: consistent, no bound), s.e. from replicas"),
)}
# fmt: on
_options.declare(*(o for s in ESTIMATORS.values() for o in s.declares))


def register(spec: "EstimatorSpec | FamilySpec") -> None:
    """Add an estimator or a model family at run time (a plugin's one entry); its name must be new.

    Everything that lists estimators or families reads these tables when it runs, so the entry
    reaches the API, the command line (built after this call), the config check and the workflow's
    sweep; an estimator's declared options (``declares``) are declared here
    (:func:`logzbench.options.declare`) and become keywords, flags and config keys.
    """
    table: dict = ESTIMATORS if isinstance(spec, EstimatorSpec) else FAMILIES
    if spec.name in table:
        raise ValueError(f"{spec.name!r} is already registered")
    if isinstance(spec, EstimatorSpec):
        _options.declare(*spec.declares)
    table[spec.name] = spec


def estimator(name: str) -> EstimatorSpec:
    """The spec of estimator ``name``; a clear error naming the choices otherwise."""
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise ValueError(f"unknown estimator {name!r}; choose one of {estimator_names()}") from None


def estimator_names() -> tuple[str, ...]:
    return tuple(ESTIMATORS)


def methods_where(**conditions: Any) -> tuple[str, ...]:
    """Names of the estimators whose attributes equal ``conditions`` (a tuple value: any of them),
    e.g. ``methods_where(yields="log_likelihood", bound="lower")`` -> ``("raise", "csl")``."""
    out = []
    for s in ESTIMATORS.values():
        ok = True
        for attr, want in conditions.items():
            have = getattr(s, attr)
            if isinstance(want, (tuple, list, set, frozenset)):
                ok &= (have in want) if not isinstance(have, tuple) else bool(set(have) & set(want))
            else:
                ok &= (want in have) if isinstance(have, tuple) else have == want
        if ok:
            out.append(s.name)
    return tuple(out)


def estimators_for(family_name: str) -> tuple[str, ...]:
    """Estimators that run on a model of ``family_name``."""
    return tuple(n for n, s in ESTIMATORS.items() if s.applies_to(family_name))


# --------------------------------------------------------------------------- result file names
def setting_stem(axes: Sequence[str], values: Mapping[str, Any]) -> str:
    """File stem of one estimate: ``K<K>`` / ``<init>`` / ``seed<seed>`` for each axis, joined by
    ``_`` (``K100_base-rate_seed0``, ``K100_seed0``, ``uniform_seed0``); ``exact`` without axes."""
    parts = []
    for a in axes:
        v = values[a]
        parts.append(f"K{int(v)}" if a == "K" else f"seed{int(v)}" if a == "seed" else str(v))
    return "_".join(parts) or "exact"


def parse_setting_stem(axes: Sequence[str], stem: str) -> dict[str, Any]:
    """Inverse of :func:`setting_stem`: ``{"K": int | None, "init": str | None, "seed": int | None}``."""
    out: dict[str, Any] = {a: None for a in AXES}
    if not axes:
        if stem != "exact":
            raise ValueError(f"an estimator without sweep axes has the file stem 'exact', not {stem!r}")
        return out
    parts = stem.split("_")
    if len(parts) != len(axes):
        raise ValueError(f"file stem {stem!r} does not match the axes {list(axes)}")
    for a, p in zip(axes, parts):
        if a == "K":
            if not (p.startswith("K") and p[1:].isdigit()):
                raise ValueError(f"file stem {stem!r}: {p!r} is not K<integer>")
            out["K"] = int(p[1:])
        elif a == "seed":
            if not (p.startswith("seed") and p[4:].isdigit()):
                raise ValueError(f"file stem {stem!r}: {p!r} is not seed<integer>")
            out["seed"] = int(p[4:])
        else:
            if p not in INITS:
                raise ValueError(f"file stem {stem!r}: unknown initial distribution {p!r}")
            out["init"] = p
    return out


def stem_pattern(axes: Sequence[str]) -> str:
    """Regular expression of the file stems of estimators with these axes (a wildcard constraint)."""
    if not axes:
        return "exact"
    pieces = {"K": r"K[0-9]+", "seed": r"seed[0-9]+", "init": "(?:" + "|".join(INITS) + ")"}
    return "_".join(pieces[a] for a in axes)


# --------------------------------------------------------------------------- model families
def _rbm_cost(n_visible: int, hidden: Sequence[int]) -> tuple[int, int]:
    # Z: the smaller layer; f(v): the hidden layer is summed out analytically
    return min(n_visible, hidden[0]), 0


def _dbm_cost(n_visible: int, hidden: Sequence[int]) -> tuple[int, int]:
    # Z: the smaller side of the even/odd bipartite view; f(v): the even hidden layers h_2, h_4, ...
    sizes = [n_visible, *hidden]
    return min(sum(sizes[0::2]), sum(sizes[1::2])), sum(hidden[1::2])


def _dbn_cost(n_visible: int, hidden: Sequence[int]) -> tuple[int, int]:
    # Z: the top RBM's smaller layer; f(v): h_1 (2^n_1 states per test row)
    return min(hidden[0], hidden[1]), hidden[0]


def _grbm_cost(n_visible: int, hidden: Sequence[int]) -> tuple[int, int]:
    # Z: the 2^H hidden states (v is integrated out analytically); f(v): h is summed out analytically
    return hidden[0], 0


def _visible_cost(n_visible: int, hidden: Sequence[int]) -> tuple[int, int]:
    # a binary energy: 2^n_visible states for Z, log f(v) is the user's function
    return n_visible, 0


def _grid_cost(n_visible: int, hidden: Sequence[int]) -> tuple[int, int]:
    # a grid MRF (hidden = [height]): the transfer matrix carries 2^min(H, W) states per column; f(v) is a
    # closed form
    height = max(1, int(hidden[0]))
    return min(height, max(1, int(n_visible) // height)), 0


def _closed_form_always(n_visible: int, hidden: Sequence[int]) -> tuple[int, int]:
    return 0, 0


def _closed_form_if_complete(n_visible: int, hidden: Sequence[int]) -> tuple[int, int] | None:
    return (0, 0) if hidden[0] == n_visible else None


@dataclass(frozen=True)
class FamilySpec:
    """One model family.

    Attributes
    ----------
    name : str
        The model file's ``model_type`` and the config's ``hyperparams.family``.
    model : str
        ``"module:Class"``; the class has ``from_arrays(arrays, source=, device=)`` and ``to_arrays()``.
    trainer : str
        ``"module:function"`` with ``(train, test=None, **hyperparams) -> (model, history)``.
    kind : str
        ``binary``, ``gaussian-binary``, ``categorical``, ``analysis`` or ``generative`` (:data:`KINDS`).
    inits : tuple of str
        Initial distributions of its annealing path (:data:`INITS`; none for continuous models).
    size_key : str
        Hyperparameter holding its size: ``n_hidden`` (RBM), ``hidden_sizes`` (DBM, DBN) or
        ``size`` (continuous: experts, units or latent variables).
    layers : (int, int or None)
        Allowed number of hidden layers (DBN: exactly two).
    exact_cost : callable
        ``(n_visible, hidden_sizes) -> (units enumerated for log Z, units enumerated per test row
        for log f(v))``, ``(0, 0)`` for a closed form, ``None`` when there is no exact value.
    hyperparams : tuple of str
        ``"module:object"`` of each trainer whose keyword parameters are the family's training
        hyperparameters (the config's ``hyperparams``, ``logzbench train --set``): declared without
        torch in :mod:`logzbench.training.hyperparams` for the shipped trainers, read from the object's
        signature otherwise.
    exact_time : str, optional
        ``"module:function"`` of ``(model, n_rows, precision, device) -> (one-thread seconds, what)``,
        the exact estimator's time estimate; default
        :func:`logzbench.estimators.exact.rbm_seconds` (the model is an RBM or has its ``log Z`` path).
    hidden : bool
        Whether ``size_key`` counts hidden units (or experts, latent variables), recorded as the model's
        ``hidden_sizes``; ``False`` where it is a size of the visible layer only (a grid MRF's ``height``,
        which only ``exact_cost`` reads).
    """

    name: str
    model: str
    trainer: str
    kind: str
    inits: tuple[str, ...]
    size_key: str
    exact_cost: Callable[[int, Sequence[int]], tuple[int, int] | None] = field(repr=False)
    layers: tuple[int, int | None] = (1, 1)
    hyperparams: tuple[str, ...] = ()
    exact_time: str | None = None
    hidden: bool = True

    @property
    def data_kind(self) -> str:
        """``binary`` rows (0/1), ``categorical`` rows (integer states 0..q-1) or ``real`` rows."""
        return self.kind if self.kind in ("binary", "categorical") else "real"

    @property
    def deep(self) -> bool:
        """Several hidden layers (DBM, DBN: RAISE Table 2, importance-sampled ``log f(v)``)."""
        return self.size_key == "hidden_sizes"

    @property
    def model_class(self):
        return load(self.model)

    def hidden_sizes(self, hyperparams: Mapping[str, Any]) -> list[int]:
        """Hidden sizes from training hyperparameters (``[n_hidden]``, ``hidden_sizes`` or ``[size]``)."""
        v = hyperparams.get(self.size_key)
        return [int(n) for n in v] if isinstance(v, (list, tuple)) else [int(v)]

    def check_hyperparams(self, hyperparams: Mapping[str, Any]) -> str | None:
        """Why these training hyperparameters cannot describe a model of this family (``None``: fine)."""
        v = hyperparams.get(self.size_key)
        if self.size_key == "hidden_sizes":
            if (
                not isinstance(v, (list, tuple))
                or not v
                or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in v)
            ):
                return (
                    f"a {self.name.upper()} needs `hyperparams.hidden_sizes` (a list of positive layer sizes, "
                    f"e.g. [500, 1000]) or a `preset`; got {v!r}"
                )
            lo, hi = self.layers
            if len(v) < lo or (hi is not None and len(v) > hi):
                n = f"exactly {_WORDS.get(lo, lo)}" if lo == hi else f"at least {_WORDS.get(lo, lo)}"
                return f"a {self.name.upper()} has {n} hidden layers; hidden_sizes = {list(v)}"
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            if self.size_key == "n_hidden":
                return "give `hyperparams.n_hidden` or a `preset`"
            if self.size_key == "height":
                return f"a {self.name} model needs `hyperparams.height` and `width` (the grid's sides); height is {v!r}"
            return (
                f"a {self.name} model needs `hyperparams.{self.size_key}` (experts, latent variables or hidden "
                f"units), got {v!r}"
            )
        return None

    def exact_units(self, n_visible: int, hidden: Sequence[int]) -> tuple[int, int] | None:
        """Units enumerated by exact evaluation (see ``exact_cost``)."""
        return self.exact_cost(int(n_visible), [int(n) for n in hidden])


_WORDS = {1: "one", 2: "two", 3: "three"}
_CONT = "logzbench.training.continuous:train_continuous"
_TRAINING = "logzbench.training."
#: the continuous families' hyperparameters: the model's size and iterations, and its fit's (MPF for the
#: analysis models, EM for the generative ones)
_MPF = (_CONT, _TRAINING + "mpf:train_mpf")
_EM = (_CONT, _TRAINING + "em:train_em")
_EXACT = "logzbench.estimators.exact:"
_ENERGY = "logzbench.models.energy:"
#: Every model family, by ``model_type``.
# fmt: off
FAMILIES: dict[str, FamilySpec] = {s.name: s for s in (
    FamilySpec("rbm", "logzbench.models.rbm:BinaryRBM", "logzbench.training:train_rbm", "binary", INITS,
               "n_hidden", _rbm_cost, hyperparams=(_TRAINING + "trainer:RBMTrainer",)),
    FamilySpec("dbm", "logzbench.models.dbm:DBM", "logzbench.training.dbm:train_dbm", "binary", INITS,
               "hidden_sizes", _dbm_cost, layers=(1, None), hyperparams=(_TRAINING + "dbm:DBMTrainer",),
               exact_time=_EXACT + "dbm_seconds"),
    FamilySpec("dbn", "logzbench.models.dbn:DBN", "logzbench.training.dbn:train_dbn", "binary", ("uniform",),
               "hidden_sizes", _dbn_cost, layers=(2, 2), hyperparams=(_TRAINING + "dbn:DBNTrainer",),
               exact_time=_EXACT + "dbn_seconds"),
    FamilySpec("grbm", "logzbench.models.grbm:GaussianBernoulliRBM", "logzbench.training.grbm:train_grbm",
               "gaussian-binary", ("uniform",), "n_hidden", _grbm_cost,
               hyperparams=(_TRAINING + "grbm:GRBMHyperparams",),
               exact_time=_EXACT + "grbm_seconds"),
    FamilySpec("poe-laplace", "logzbench.models.poe:ProductOfExperts", _CONT, "analysis", (), "size",
               _closed_form_if_complete, hyperparams=_MPF),
    FamilySpec("poe-student-t", "logzbench.models.poe:ProductOfExperts", _CONT, "analysis", (), "size",
               _closed_form_if_complete, hyperparams=_MPF),
    FamilySpec("mcrbm", "logzbench.models.mcrbm:MCRBM", _CONT, "analysis", (), "size", lambda nv, h: None,
               hyperparams=_MPF),
    FamilySpec("linear-gaussian", "logzbench.models.linear_generative:LinearGenerative", _CONT, "generative", (),
               "size", _closed_form_always, hyperparams=_EM),
    FamilySpec("linear-laplace", "logzbench.models.linear_generative:LinearGenerative", _CONT, "generative", (),
               "size", lambda nv, h: None, hyperparams=_EM),
    FamilySpec("bilinear", "logzbench.models.bilinear:BilinearGenerative", _CONT, "generative", (), "size",
               lambda nv, h: None, hyperparams=_EM),
    FamilySpec("potts-rbm", "logzbench.models.potts_rbm:PottsRBM", _TRAINING + "potts:train_potts_rbm", "categorical",
               INITS, "n_hidden", _grbm_cost, hyperparams=(_TRAINING + "potts:train_potts_rbm",),
               exact_time="logzbench.models.potts_rbm:exact_seconds"),
    FamilySpec("potts", "logzbench.models.potts:PottsModel", _TRAINING + "potts:train_potts", "categorical", INITS,
               "n_states", lambda nv, h: None, hyperparams=(_TRAINING + "potts:train_potts",),
               exact_time="logzbench.models.potts:exact_seconds"),
    # a binary pairwise MRF on an H x W grid (tables from a file or GridMRF.spin_glass): generated, not trained
    FamilySpec("grid-mrf", "logzbench.models.grid:GridMRF", _TRAINING + "grid:generate_grid_mrf", "binary",
               ("uniform", "base-rate"), "height", _grid_cost, hyperparams=(_TRAINING + "grid:generate_grid_mrf",),
               exact_time="logzbench.models.grid:exact_seconds", hidden=False),
    # a user's energy (``EnergyModel``, from ``source: FILE.py:NAME`` or a TorchScript file): not trained here
    FamilySpec("energy-binary", _ENERGY + "EnergyModel", _ENERGY + "not_trained", "binary", INITS, "dim",
               _visible_cost, exact_time=_ENERGY + "exact_seconds"),
    FamilySpec("energy-categorical", _ENERGY + "EnergyModel", _ENERGY + "not_trained", "categorical", INITS, "dim",
               lambda nv, h: None, exact_time=_ENERGY + "exact_seconds"),
    FamilySpec("energy-continuous", _ENERGY + "EnergyModel", _ENERGY + "not_trained", "analysis", (), "dim",
               lambda nv, h: None),
)}
# fmt: on


# --------------------------------------------------------------------------- learners
@dataclass(frozen=True)
class LearnerSpec:
    """A black-box learner that trains a model of some families from its energy alone (config
    ``hyperparams.learner``; the family's own trainer when absent).

    Attributes
    ----------
    name : str
        What users write (``learner: avil``).
    entry : str
        ``"module:function"`` of ``(train, valid=None, *, family, hidden_sizes, return_state=False,
        **hyperparams) -> (model, history)`` (and the trained networks with ``return_state=True``), with
        ``history`` a dict of equal-length lists, one entry per logged iteration.
    families : tuple of str
        The families it trains.
    bound : str
        What its running ``log Z`` estimate is (``lower``: AVIL's decoder; ``upper``: NVIL's chi-square
        bound; ``none``: VCD has none).
    """

    name: str
    entry: str
    families: tuple[str, ...]
    bound: str


#: Every learner, by name (Li et al. "Adversarial Variational Inference and Learning in MRFs").
# fmt: off
LEARNERS: dict[str, LearnerSpec] = {s.name: s for s in (
    LearnerSpec("avil", "logzbench.training.avil:train_avil", ("rbm", "dbm", "grbm"), "lower"),
    LearnerSpec("nvil", "logzbench.training.nvil:train_nvil", ("rbm", "grbm"), "upper"),
    LearnerSpec("vcd", "logzbench.training.vcd:train_vcd", ("dbm",), "none"),
)}
# fmt: on


def learner(name: str, family_name: str | None = None) -> LearnerSpec:
    """The spec of learner ``name`` (checked to train ``family_name`` when given); a clear error otherwise."""
    spec = LEARNERS.get(str(name).lower())
    if spec is None:
        raise ValueError(f"unknown learner {name!r}; choose one of {list(LEARNERS)} (or none: the family's trainer)")
    if family_name is not None and str(family_name).lower() not in spec.families:
        raise ValueError(f"learner {spec.name} trains {', '.join(spec.families)} models, not a {family_name}")
    return spec


def family(name: str) -> FamilySpec:
    """The spec of family ``name``; a clear error naming the choices otherwise."""
    try:
        return FAMILIES[str(name).lower()]
    except KeyError:
        raise ValueError(f"unknown model family {name!r}; choose one of {family_names()}") from None


def family_names(kind: str | Sequence[str] | None = None) -> tuple[str, ...]:
    """Family names, optionally only those of one or several kinds."""
    kinds = (kind,) if isinstance(kind, str) else kind
    return tuple(n for n, s in FAMILIES.items() if kinds is None or s.kind in kinds)
