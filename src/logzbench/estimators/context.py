"""What every estimator's ``estimate(ctx)`` receives: :class:`EstimateContext`.

:func:`logzbench.api.estimate` checks the inputs once (the estimator applies to the model's
family, the rows fit the model, the options are valid) and hands each estimator one context:
the model on its device, the test and training rows, the validated
:class:`~logzbench.options.EstimateOptions`, the run's single :class:`torch.Generator`, and the
settings every result records.  The helpers here build what several estimators share -- the
annealing path from ``init``, the schedule from ``schedule`` and ``K``, the (exact or
importance-sampled) ``log f(v)`` of the test rows -- so each estimator's ``estimate`` stays a few
lines that call its kernel.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..options import EstimateOptions
from ..registry import EstimatorSpec, FamilySpec
from ..schedules import ADAPTIVE, PILOT_SCHEDULES, TUNED, make_schedule, resample, tuned_round_ks
from ..utils.devices import MEMORY_SHARE, memory_shortfall
from .result import EstimateResult, attach_log_likelihood, bootstrap_bytes, khat_summary

__all__ = [
    "EstimateContext",
    "MEMORY_SHARE",
    "attach_log_likelihood",
    "chain_bytes",
    "estimated_bytes",
    "per_example_bytes",
    "planned_K",
    "planned_sweeps",
    "state_units",
    "test_examples",
]

#: bytes per step of a schedule of K steps: the K + 1 inverse temperatures, their differences and the
#: temporaries that build them (:func:`logzbench.schedules.sigmoid`, :func:`~logzbench.schedules.resample`)
_SCHEDULE_BYTES_PER_STEP = 32
#: the refusal of a tuned schedule without K (it has no length of its own: K is its final round's)
_TUNED_NEEDS_K = "{name}: schedule 'tuned' needs a number of steps K (the final round's)"
#: Peak bytes per chain (per chain and example for RAISE and generative HAIS) and per unit of the
#: model's state (:func:`state_units`), by family kind: measured as the growth of the peak resident
#: memory of one-thread CPU runs (784-200 RBM, 784-200-200 DBM / DBN, 64-dimensional continuous
#: models; 5-15, 10-34 and 27-54 bytes) and rounded up.
_BYTES_PER_UNIT = {"binary": 16, "gaussian-binary": 32, "categorical": 16, "analysis": 64, "generative": 64}
#: RAISE on a deep model (the DBN's recognition draws and the DBM's heating chain hold more).
_RAISE_DEEP_BYTES_PER_UNIT = 40


def state_units(model) -> int:
    """Units of a model's state that every chain carries: all layers of an RBM / DBM / DBN, ``q`` per
    site of a categorical model (its one-hot rows) plus its hidden units, the data dimension plus the
    experts, hidden units or latent variables of a continuous model."""
    sizes = getattr(model, "layer_sizes", None)
    if sizes:
        return int(sum(sizes))
    q = getattr(model, "n_states", None)
    if q and hasattr(model, "n_visible"):  # categorical (and binary energy) sites: one-hot width q each
        return int(model.n_visible) * int(q) + int(getattr(model, "n_hidden", 0))
    if hasattr(model, "n_hidden"):
        return int(model.n_visible) + int(model.n_hidden)
    return int(
        sum(
            int(getattr(model, a))
            for a in ("n_dims", "size", "n_factors", "n_latent", "n_coefficients")
            if hasattr(model, a)
        )
    )


def estimated_bytes(ctx: "EstimateContext") -> tuple[int, str]:
    """``(bytes, what drives them)``: the memory an estimate needs at its peak, roughly.  An estimator
    module's own ``peak_bytes(ctx)`` answers where it defines one; otherwise :func:`chain_bytes`, the
    state of all chains (see :data:`_BYTES_PER_UNIT`).  Any other estimator without ``chains`` (``exact``
    enumerates in chunks of bounded size) is not counted (0).  An estimator that reads ``n_bootstrap``
    adds its bootstrap's chunk over ``chains`` weights (:func:`~.result.bootstrap_bytes`)."""
    own = getattr(ctx.spec.module, "peak_bytes", None)
    if own is not None:  # the estimator's own (pt: replicas x temperatures, without ``chains``)
        need, what = own(ctx)
    elif "chains" not in ctx.spec.options:
        return 0, ""
    else:
        need, what = chain_bytes(ctx)
    if {"chains", "n_bootstrap"} <= set(ctx.spec.options):
        need += bootstrap_bytes(ctx.options.chains, ctx.options.n_bootstrap)
    return need, what


def chain_bytes(
    ctx: "EstimateContext",
    rows: int | None = None,
    what: str | None = None,
    per_unit: int | None = None,
    extra: int = 0,
) -> tuple[int, str]:
    """``(bytes, what)`` of ``rows`` chain states (default ``chains``; a generative model with test data:
    one latent chain per chain and test point) of :func:`state_units` units each, at ``per_unit`` bytes
    (default by the family's kind, :data:`_BYTES_PER_UNIT`), plus ``extra`` bytes of the estimator's own."""
    o = ctx.options
    if rows is None:
        n_data = 0 if ctx.data is None else int(ctx.data.shape[0])
        if ctx.family.kind == "generative" and n_data:
            rows, what = o.chains * n_data, f"chains x test examples = {o.chains} x {n_data}"
        else:
            rows, what = o.chains, what or f"chains = {o.chains}"
    per_unit = _BYTES_PER_UNIT.get(ctx.family.kind, 64) if per_unit is None else per_unit
    return rows * state_units(ctx.model) * per_unit + extra, what or ""


def test_examples(ctx: "EstimateContext") -> int:
    """Test examples a per-example estimator runs chains for: every test row, or ``n_examples`` of them."""
    n_data = 0 if ctx.data is None else int(ctx.data.shape[0])
    return n_data if ctx.options.n_examples is None else min(ctx.options.n_examples, n_data)


def per_example_bytes(ctx: "EstimateContext") -> tuple[int, str]:
    """:func:`chain_bytes` of estimators that run ``chains`` chains per test example (RAISE and its
    relatives; a deep model's heating and recognition chains hold more)."""
    o = ctx.options
    n = test_examples(ctx)
    return chain_bytes(
        ctx,
        o.chains * max(n, 1),
        f"chains x test examples = {o.chains} x {n}",
        per_unit=_RAISE_DEEP_BYTES_PER_UNIT if ctx.family.deep else None,
    )


def planned_K(ctx: "EstimateContext") -> int | None:
    """The run's ``K`` as far as it is known before it runs: the schedule's length once built (a fixed
    schedule, ``linear`` / ``sigmoid`` at ``K``), else ``K``, else the estimator module's ``START_K`` (the
    sandwich's first round); ``None`` for the adaptive schedule without ``K`` (its pilot chooses it)."""
    if ctx._betas is not None:
        return len(ctx._betas) - 1
    if ctx.options.K is not None:
        return int(ctx.options.K)
    return getattr(ctx.spec.module, "START_K", None)


def planned_sweeps(ctx: "EstimateContext") -> tuple[list[tuple[int, int]], str]:
    """``(batches, what)``: the sweeps a run will make before it runs, as ``(chains in a batch, sweeps of
    that batch)`` pairs and in words, for :meth:`EstimateContext.check_time`.  An estimator module's own
    ``planned_sweeps(ctx)`` answers where it defines one (RAISE: chains per test example; reverse AIS:
    forward and reverse; the IS family: ``burn_in``; the sandwich: its first round, both ends); otherwise one
    annealing run, ``K x sweeps_per_beta`` sweeps of ``chains`` chains (:func:`planned_K`; an adaptive
    schedule without ``K``: at least one sweep, its pilot's length not being known yet)."""
    own = getattr(ctx.spec.module, "planned_sweeps", None)
    if own is not None:
        return own(ctx)
    return annealing_sweeps(ctx)


def tuned_pilot_sweeps(ctx: "EstimateContext") -> int:
    """Sweeps per chain of the tuned schedule's pilot rounds (:func:`~logzbench.schedules.tuned_round_ks`, at
    ``sweeps_per_beta`` per step), before they run; 0 for another schedule, or without ``K``."""
    o = ctx.options
    if o.schedule != TUNED or o.K is None or "schedule" not in ctx.spec.options:
        return 0
    return sum(k - 1 for k in tuned_round_ks(o.K, o.tune_rounds)) * int(o.sweeps_per_beta)


def annealing_sweeps(ctx: "EstimateContext", rows: int | None = None, passes: int = 1) -> tuple[list, str]:
    """:func:`planned_sweeps` of ``passes`` annealing runs (forward, reverse) over ``K`` of ``rows`` chains
    (default ``chains``) at ``sweeps_per_beta`` sweeps per temperature."""
    o = ctx.options
    rows = o.chains if rows is None else int(rows)
    K = planned_K(ctx)
    sweeps = max(1, passes * (K or 1) * int(o.sweeps_per_beta))
    what = f"{sweeps} sweeps of {rows} chains" if K else f"at least {sweeps} sweeps of {rows} chains (K not chosen yet)"
    return [(rows, sweeps)], what


@dataclass
class EstimateContext:
    """One estimate's inputs (checked) and shared helpers.

    Attributes
    ----------
    spec : EstimatorSpec
        The estimator's registry entry.
    family : FamilySpec
        The model family's registry entry.
    model
        The model, on ``device``.
    data, train_data : torch.Tensor or None
        Test rows ``(n, n_visible)`` and training rows (binary: float32 0/1; continuous: float64).
    options : EstimateOptions
    generator : torch.Generator
        The run's only source of randomness (seeded by ``options.seed``).
    device : torch.device
    """

    spec: EstimatorSpec
    family: FamilySpec
    model: Any
    data: torch.Tensor | None
    train_data: torch.Tensor | None
    options: EstimateOptions
    generator: torch.Generator
    device: torch.device
    #: the estimated seconds of the run (set by :meth:`check`: the exact estimator's enumeration, a user
    #: energy's calls of ``log_f``; ``None`` for the others)
    estimated_seconds: float | None = None
    _betas: np.ndarray | None = field(default=None, repr=False)
    _betas_K: int | None = field(default=None, repr=False)
    #: the pilot run of the adaptive or tuned schedule (:class:`logzbench.estimators.adaptive.PilotResult`,
    #: :class:`logzbench.estimators.tuned.TuneResult`), once run
    pilot: Any = field(default=None, repr=False)
    _log_f: tuple | None = field(default=None, repr=False)
    _log_f_seconds: float | None = field(default=None, repr=False)
    #: the mixture reference's fit (:class:`logzbench.models.mixture.MixtureFit`), once fitted
    _mixture: Any = field(default=None, repr=False)
    #: a discrete user energy's transition, chosen and tuned once
    #: (:class:`logzbench.estimators.transition.TransitionChoice`)
    move: Any = field(default=None, repr=False)

    # ----------------------------------------------------------------- settings
    @property
    def name(self) -> str:
        return self.spec.name

    def settings(self, *keys: str) -> dict[str, Any]:
        """Settings recorded with the result: seed, device and estimator, then the named extras
        (``init``, ``schedule``, ``model_family``, ``model_kind``, ``is_samples``)."""
        out: dict[str, Any] = {"seed": int(self.options.seed), "device": str(self.device), "estimator": self.name}
        label = getattr(self.model, "reference_label", None)
        if label is not None:  # a user's energy: which start its path took (``init`` does not say it all)
            out["reference"] = label(self.options.init)
        for k in keys:
            if k == "model_family":
                out[k] = self.model.family
            elif k == "model_kind":
                out[k] = self.family.kind
            else:
                out[k] = getattr(self.options, k)
        return out

    def annealed_settings(self) -> dict[str, Any]:
        """Settings of an estimate on a binary model's annealing path (or its endpoints); on the mixture
        reference also what :meth:`reference_settings` says."""
        out = {**self.settings("init", "schedule", "model_family"), **self.schedule_settings()}
        out.update(self.reference_settings())
        if self.family.deep:  # deep models: importance samples per example for log f(v)
            out["is_samples"] = int(self.options.is_samples)
        return out

    def continuous_settings(self) -> dict[str, Any]:
        """Settings of an estimate on a continuous model (HAIS, RAISE-HMC, reverse HAIS, BDMC and the sandwich
        plans on them): its family, kind and schedule, and the schedule's settings."""
        return {**self.settings("model_family", "model_kind", "schedule"), **self.schedule_settings()}

    def reference_settings(self) -> dict[str, Any]:
        """On the mixture reference (``init="mixture"``, an estimator that reads ``init``): ``reference``
        ``"mixture"``, ``mixture_components`` (as given; ``None``: chosen), and the fit's
        ``reference_components``, ``reference_components_chosen`` (``held-out`` or ``given``),
        ``reference_heldout_log_lik`` / ``reference_train_log_lik`` (nats per row) and
        ``reference_em_passes`` (EM's component passes over the training rows; :mod:`logzbench.models.mixture`);
        empty otherwise."""
        if not self.uses_mixture:
            return {}
        return {"mixture_components": self.options.mixture_components, **self.reference().settings()}

    @property
    def uses_mixture(self) -> bool:
        """The estimate runs from the mixture reference."""
        return self.options.init == "mixture" and "init" in self.spec.options

    def reference(self):
        """The mixture reference's fit (:func:`logzbench.models.mixture.fit_mixture` on the training rows,
        with ``mixture_components`` and the run's ``seed``), fitted once per estimate on the CPU and kept."""
        if self._mixture is None:
            from ..models.mixture import fit_mixture

            rows = self._reference_rows()
            categorical = self.family.data_kind == "categorical"
            self._mixture = fit_mixture(
                rows.cpu(),
                self.options.mixture_components,
                seed=int(self.options.seed),
                q=int(self.model.n_states) if categorical else None,
                binary=not categorical,
            )
        return self._mixture

    def _reference_rows(self) -> torch.Tensor | None:
        """The rows the mixture is fitted to: the training rows, else a user energy's own (``model.data``)."""
        if self.train_data is None and getattr(self.model, "data", None) is not None:
            return self.model.data
        return self.train_data

    def add_reference_cost(self, res: EstimateResult) -> EstimateResult:
        """On the mixture reference, put the fit's figures in ``res.extra`` (``reference_*``: the EM passes
        counted in component passes over the training rows, not in ``total_sweeps``, whose unit is a chain's
        sweep)."""
        if self.uses_mixture and self._mixture is not None:
            fit = self._mixture
            res.extra.update(fit.settings())
            res.extra["reference_heldout_by_components"] = {str(k): v for k, v in fit.heldout_by_components.items()}
        return res

    # ----------------------------------------------------------------- checks
    def check_reference(self) -> None:
        """Refuse ``init="mixture"`` where it cannot run: a family without the mixture path (``--init
        mixture is not available for a dbm``), no training rows, more components than rows."""
        if not self.uses_mixture:
            return
        if "mixture" not in self.family.inits:
            raise ValueError(f"--init mixture is not available for a {self.family.name}")
        rows = self._reference_rows()
        if rows is None or int(rows.shape[0]) == 0:
            raise ValueError(
                "--init mixture needs training rows to fit the mixture to: pass training data (CLI: --train-data X.npy)"
            )
        C = self.options.mixture_components
        if C is not None and int(C) > int(rows.shape[0]):
            raise ValueError(
                f"--mixture-components {int(C)} is more than the {int(rows.shape[0])} training rows; give at most "
                f"{int(rows.shape[0])}"
            )

    def check(self) -> None:
        """Refuse, before any work, what the options allow but this run cannot do: no test data for an
        estimator that needs it (``spec.needs_data``), a schedule the
        estimator needs that cannot be built (``linear`` / ``sigmoid`` / ``tuned`` without ``K``), more memory
        than :data:`MEMORY_SHARE` of what the device has available (:func:`estimated_bytes`), what
        the estimator's module refuses in its own ``check(ctx)`` where it defines one (it then checks its
        schedule itself: the sandwich's doubling; ``exact``'s time budget,
        :func:`logzbench.estimators.exact.check_budget`), and a user energy's run estimated to take longer
        than ``max_seconds`` (:meth:`check_time`).  :func:`logzbench.api.estimate` calls it."""
        from .transition import check_options

        if self.spec.needs_data:
            self.require_data()
        if "transition" in self.spec.options:
            check_options(self.options.transition, self.model)
        self.check_reference()
        self.check_schedule_memory()
        own = getattr(self.spec.module, "check", None)
        if own is not None:  # the estimator's own (the sandwich's doubling, exact's time budget)
            own(self)
        elif "schedule" in self.spec.options and self.options.schedule not in PILOT_SCHEDULES:
            self.betas()
        elif "schedule" in self.spec.options and self.options.schedule == TUNED and self.options.K is None:
            raise ValueError(_TUNED_NEEDS_K.format(name=self.name))
        self.check_memory()
        self.check_time()

    def check_time(self) -> None:
        """Refuse a run on a user's energy (a model with ``sweep_seconds``: :class:`~logzbench.models.EnergyModel`)
        whose calls of ``log_f`` are estimated to take longer than ``options.max_seconds``: the time of one
        sweep of each batch of chains, measured on the model's device before anything runs
        (:meth:`~logzbench.models.EnergyModel.sweep_seconds`: a few calls on states of its own generator),
        times the :func:`planned_sweeps`.  A sweep of a discrete energy calls ``log_f`` once per site on
        all chains, so a wide energy with few chains passes the memory check and would run for years.
        The families' own samplers are not timed here (they are fast, and their runs stay as they were);
        neither are estimators that do not read ``max_seconds`` (``exact`` has its own budget).  Sets
        :attr:`estimated_seconds`."""
        sweep_seconds = getattr(self.model, "sweep_seconds", None)
        if sweep_seconds is None or "max_seconds" not in self.spec.options:
            return
        from ..options import declared
        from .exact import duration

        budget = self.options.max_seconds
        budget = declared()["max_seconds"].default if budget is None else budget
        if math.isinf(budget):  # no limit: nothing to time
            return
        batches, what = planned_sweeps(self)
        pilot = tuned_pilot_sweeps(self)
        if pilot:  # the tuned schedule's pilot rounds run before the estimator's own (pilot_chains chains each)
            batches = [*batches, (int(self.options.pilot_chains), pilot)]
            what += f", and the tuned schedule's pilot rounds: {pilot} sweeps of {self.options.pilot_chains} chains"
        seconds, per_sweep = 0.0, []
        kw = {"transition": self.options.transition} if "transition" in self.spec.options else {}
        for rows, sweeps in batches:
            s, how = sweep_seconds(rows, **kw)
            seconds += sweeps * s
            per_sweep.append(how)
        self.estimated_seconds = seconds
        if seconds > budget:
            allow = f"{math.ceil(seconds * 2):.3g}" if seconds * 2 >= 1e6 else str(math.ceil(seconds * 2))
            units = "sites" if getattr(self.model, "discrete", True) else "dimensions"
            raise ValueError(
                f"{self.name} on this {self.model.family} ({self.model.n_visible} {units}) would take about "
                f"{duration(seconds)} (estimated: {what}; {'; '.join(per_sweep)}), over the budget of {budget:g} s; "
                f"allow it with max_seconds={allow} (--max-seconds {allow}; inf: no limit), or use fewer chains "
                "or sweeps"
            )

    def check_memory(self, available: int | None = None) -> None:
        """Refuse an estimate whose :func:`estimated_bytes` exceed :data:`MEMORY_SHARE` of the memory
        available on the device (``available``: bytes, default :func:`logzbench.utils.available_memory`)."""
        need, what = estimated_bytes(self)
        short = memory_shortfall(need, self.device, available) if need else None
        if short is None:
            return
        raise ValueError(
            f"{what}: {self.name} on this {self.model.family} ({state_units(self.model)} units) needs "
            f"{short}; use fewer chains" + (" or test examples (n_examples)" if "x test examples" in what else "")
        )

    def check_schedule_memory(self, available: int | None = None) -> None:
        """Refuse a number of steps ``K`` whose schedule (``K + 1`` float64 inverse temperatures and the
        arrays that build it) would not fit in memory, before it is built (ValueError naming ``K``)."""
        K = self.options.K
        if K is None or "schedule" not in self.spec.options:
            return
        short = memory_shortfall(_SCHEDULE_BYTES_PER_STEP * (int(K) + 1), "cpu", available)
        if short is not None:
            raise ValueError(
                f"K (--steps) = {int(K)}: the schedule of {int(K) + 1} inverse temperatures needs {short}; "
                "use a smaller K"
            )

    # ----------------------------------------------------------------- shared pieces
    def path(self):
        """The model's annealing path from ``options.init`` (base rate from the training rows when
        the model file has no ``data_mean``; the mixture reference fitted once, :meth:`reference`).  A
        discrete user energy's path takes ``options.transition``, chosen and tuned once
        (:func:`logzbench.estimators.transition.choose`; ``auto`` picked by its pilot) and frozen on every
        path built afterwards; an estimator that runs it backwards refuses a non-reversible one."""
        from . import transition as tr

        o = self.options
        requested = o.transition if "transition" in self.spec.options else "gibbs"
        path, self.move = tr.transition_path(
            requested, self.model, self._build_path, int(o.pilot_chains), o.seed, self.device, self.move
        )
        tr.check_reversible(self, path)
        return path

    def _build_path(self, transition: str | None = None):
        kw = {} if transition is None else {"transition": transition}
        if self.options.init == "mixture":
            return self.model.annealing_path("mixture", data=self.train_data, reference=self.reference().mixture, **kw)
        return self.model.annealing_path(self.options.init, data=self.train_data, **kw)

    def record_transition(self, res: EstimateResult) -> EstimateResult:
        """A discrete user energy's transition with the result (:meth:`TransitionChoice.record
        <logzbench.estimators.transition.TransitionChoice.record>`: the pilots' sweeps in ``total_sweeps``,
        what ran in ``settings``); the result as it is otherwise."""
        return res if self.move is None else self.move.record(res)

    def betas(self, path=None, groups: int = 1, K: int | None = None) -> np.ndarray:
        """The schedule ``0 = beta_0 < ... < beta_K = 1`` from ``options.schedule`` and ``K`` (default
        ``options.K``).

        ``schedule="adaptive"`` runs the pilot (:func:`logzbench.estimators.adaptive.pilot_schedule`)
        once, on ``path`` (the estimator's own; ``groups`` populations for batched per-point paths),
        from its own generator, and reads its shape at ``K`` steps (its own length without ``K``);
        ``schedule="tuned"`` runs the pilot rounds of doubling K (:func:`logzbench.estimators.tuned.tune_rounds`)
        once, likewise, for a final schedule of ``K`` steps (another ``K`` later is refused: the schedule was
        tuned for one).  :meth:`record_schedule` adds the pilot's sweeps and keeps the last schedule returned."""
        o = self.options
        K = o.K if K is None else int(K)
        if o.schedule in PILOT_SCHEDULES and self.pilot is None:
            if path is None:
                raise ValueError(f"{self.name}: the {o.schedule} schedule needs the annealing path for its pilot run")
            self.pilot = self._run_pilot(path, groups, K)
        if o.schedule == ADAPTIVE:
            self._betas = self.pilot.betas.copy() if K is None else resample(self.pilot.betas, K)
        elif o.schedule == TUNED:
            own = len(self.pilot.betas) - 1
            if K is not None and K != own:
                raise ValueError(f"{self.name}: the tuned schedule was tuned for K = {own} steps, not K = {K}")
            self._betas = self.pilot.betas.copy()
        elif self._betas is None or K != self._betas_K:  # a schedule file is read once per K
            self._betas, self._betas_K = make_schedule(o.schedule, K), K
        return self._betas.copy()

    def _run_pilot(self, path, groups: int, K: int | None):
        """The adaptive or tuned schedule's pilot on ``path``, from its own generator (never the run's)."""
        o = self.options
        if o.schedule == TUNED:
            from .tuned import tune_rounds, tuned_generator

            if K is None:
                raise ValueError(_TUNED_NEEDS_K.format(name=self.name))
            return tune_rounds(
                path,
                K,
                o.pilot_chains,
                tuned_generator(o.seed, self.device),
                rounds=o.tune_rounds,
                start=o.tuned_start,
                sweeps_per_beta=o.sweeps_per_beta,
                groups=groups,
            )
        from .adaptive import pilot_generator, pilot_schedule

        return pilot_schedule(
            path,
            o.pilot_chains,
            pilot_generator(o.seed, self.device),
            target_ess=o.target_ess,
            sweeps_per_beta=o.sweeps_per_beta,
            groups=groups,
        )

    def schedule_settings(self) -> dict[str, Any]:
        """What the result records about its schedule: sweeps per temperature and, for the adaptive
        schedule, the pilot's chains and target CESS; for the tuned one, the pilot's chains, rounds (as
        asked: ``None`` is as many as K allows) and first schedule."""
        o = self.options
        out: dict[str, Any] = {"sweeps_per_beta": int(o.sweeps_per_beta)}
        if o.schedule == ADAPTIVE:
            out.update(pilot_chains=int(o.pilot_chains), target_ess=float(o.target_ess))
        elif o.schedule == TUNED:
            out.update(pilot_chains=int(o.pilot_chains), tune_rounds=o.tune_rounds, tuned_start=o.tuned_start)
        return out

    def require_data(self) -> torch.Tensor:
        if self.data is None:
            raise ValueError(f"{self.name.upper()} estimates test log-likelihoods: give test data")
        return self.data

    def log_f(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """``(log f(v), its standard error)`` of the test rows: exact for an RBM or GRBM (standard error
        ``None``), importance-sampled for a DBM or DBN (RAISE Sec. 5.2-5.3; this draws from the
        generator, so estimators call it before their kernel); ``(None, None)`` without data."""
        if self._log_f is None:
            t0 = time.perf_counter()
            est = mean_field = None
            if self.data is None:
                log_f = se = None
            elif not self.family.deep:  # one hidden layer (RBM, GRBM): summed out exactly
                log_f, se = self.model.log_unnormalized_marginal(self.data), None
            else:
                n = self.options.is_samples
                if self.family.name == "dbm":  # one mean-field solve: the proposal and the bound
                    mu = self.model.mean_field(self.data)
                    est = self.model.importance_log_f(self.data, n, self.generator, mu=mu)
                    mean_field = float(self.model.mean_field_bound(self.data, mu=mu).mean())
                else:
                    est = self.model.importance_log_f(self.data, n, self.generator)
                log_f, se = est.log_f, est.stderr
            self._log_f = (log_f, se, est, mean_field)
            if self.data is not None:
                self._log_f_seconds = time.perf_counter() - t0
        return self._log_f[0], self._log_f[1]

    def finish(self, res: EstimateResult, attach: bool = True) -> EstimateResult:
        """Attach the test log-likelihood implied by ``res.log_z`` (when ``attach`` and there is
        data) and the summary of an importance-sampled ``log f(v)`` (deep models)."""
        log_f, se = self.log_f()
        if attach and log_f is not None:
            attach_log_likelihood(res, log_f, se)
        est, mean_field = (self._log_f[2], self._log_f[3]) if self._log_f else (None, None)
        if est is not None:
            res.extra.update(_deep_extras(est, mean_field, self.options.is_samples))
        self.record_schedule(res)
        if self._log_f_seconds is not None:
            # computing log f(v) of the test rows is not part of `seconds` (the estimator's own run)
            res.extra["log_f_seconds"] = self._log_f_seconds
        return res

    def run_annealed(self, run) -> EstimateResult:
        """The registry entry of an estimator of ``log Z`` on one annealing run: ``run(path, betas, chains,
        generator, n_bootstrap=, progress=, settings=, sweeps_per_beta=)`` on the model's path and schedule,
        after ``log f(v)`` of the test rows is drawn (it draws from the generator first), then :meth:`finish`."""
        path = self.path()
        betas = self.betas(path)
        self.log_f()  # drawn before the kernel (importance-sampled log f(v) of deep models)
        o = self.options
        res = run(
            path,
            betas,
            o.chains,
            self.generator,
            n_bootstrap=o.n_bootstrap,
            progress=o.progress,
            settings=self.annealed_settings(),
            sweeps_per_beta=o.sweeps_per_beta,
        )
        return self.finish(res)

    def record_schedule(self, res: EstimateResult) -> EstimateResult:
        """Keep the schedule the run used with its result (``res.schedule``: the per-chain ``.npz`` and
        the MLflow artifact) and, for the adaptive and tuned schedules, add the pilot's sweeps to
        ``total_sweeps`` (``extra``: the pilot's :meth:`~logzbench.estimators.adaptive.PilotResult.extras`:
        ``pilot_sweeps``, ``pilot_K``, ``pilot_seconds`` and the schedule's own diagnostics). On the mixture
        reference, its fit's figures (:meth:`add_reference_cost`)."""
        self.add_reference_cost(res)
        if self._betas is not None and res.schedule is None:
            res.schedule = self._betas.copy()
        if self.pilot is not None and "pilot_sweeps" not in res.extra:
            res.total_sweeps = int(res.total_sweeps) + int(self.pilot.sweeps)
            res.extra.update(self.pilot.extras())
        return res


def _deep_extras(est, mean_field: float | None, n_samples: int) -> dict:
    """Summary of the ``log f(v)`` estimates of a deep model (and the DBM mean-field bound)."""
    out = {
        "is_samples": int(n_samples),
        "mean_log_f_is": float(est.log_f.mean()),
        "mean_log_f_is_stderr": float(torch.sqrt((est.stderr**2).sum()) / len(est.log_f)),
        # log f-hat is a stochastic lower bound; to second order it errs low by Var/2 = se^2/2
        # (an underestimate when the weights are heavy-tailed: watch the ESS)
        "mean_log_f_is_jensen_gap": float((est.stderr**2).mean() / 2),
        "is_ess_mean": float(est.ess.mean()),
        "is_ess_min": float(est.ess.min()),
        # the tail of each test row's weights (PSIS; :func:`.result.khat_summary`): is_khat_median above
        # 0.7 and log f-hat and its standard error mislead (the maximum of noisy k-hats exceeds 0.7 by chance)
        **{f"is_{k}": v for k, v in khat_summary(est.khat).items() if v is not None},
    }
    if mean_field is not None:
        out["mean_log_f_mean_field"] = mean_field
    return out
