"""Tempered sequential Monte Carlo with resampling (``smc``).

A population of ``chains`` particles anneals from ``p_0`` (the path's reference, any ``init``) to
the model along the same path as AIS, with two differences: when the effective sample size of the
normalised weights falls below ``ess_threshold * chains`` the population is *resampled*
(systematically, :func:`systematic_resample`), so a particle that found a heavy mode multiplies and
one stuck in a light one dies out; and the next inverse temperature may be chosen from the
particles themselves (the conditional ESS; Zhou, Johansen & Aston 2016).  The kernel is a pair of
small pure functions over an :class:`SMCState`:

* :func:`init` draws exact samples from ``p_0``, equal weights, ``log Z-hat = log Z_0``;
* :func:`step` reweights to the next ``beta``, adds ``log sum_i W_i w_i`` (the mean incremental weight
  under the current normalised weights ``W``) to ``log Z-hat``, resamples where the ESS fell below the
  threshold, and moves every particle with ``sweeps_per_beta`` transitions at the new ``beta``.

``Z-hat = prod_k sum_i W_i^(k-1) w_i^(k)`` is unbiased for ``Z`` whenever the temperatures are fixed
before the run (``linear``, ``sigmoid``, ``sm14500``, a file, or any schedule ``ctx.betas`` returns):
reweighting, an unbiased resampling (expected copies ``M W_i``, whether or not the ESS triggered it)
and an invariant move each keep the expectation of the unnormalised particle measure (Del Moral,
Doucet & Jasra 2006).  ``log Z-hat`` is then a stochastic lower bound, as AIS's.

The default schedule, ``adaptive``, is *not* that: each next ``beta`` is the root (:func:`scipy.optimize.brentq`)
of ``CESS(beta') = target_ess`` on the current particles, so the temperatures depend on the same
draws that are weighted, and ``Z-hat`` is consistent (as ``chains`` grows) but slightly biased, in no
known direction.  The registry labels ``smc`` ``bound="none"`` for that reason; a result says which
schedule it used (``settings["schedule"]``, ``extra["unbiased"]``).  ``K`` is then a cap on the number
of temperatures (the step that reaches it goes straight to ``beta = 1``; ``extra["capped_replicas"]``
counts the replicas whose forced last step fell below ``target_ess``), and with a fixed schedule the
number of steps as for AIS.

The standard error comes from ``replicas`` independent populations: ``log Z`` is the log of the mean of
their ``Z-hat`` (still unbiased with a fixed schedule), its standard error the delta-method spread of
those ``Z-hat`` (:func:`~logzbench.estimators.result.summarize_log_weights`, as for AIS's chains).  With a
fixed schedule the replicas are one batched tensor of ``replicas * chains`` particles, resampled within
each replica only; with the adaptive schedule each replica chooses its own temperatures and runs on
its own (a schedule shared by all replicas would couple them, and their spread would understate the
error).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import torch

from ..models.base import AnnealingPath
from ..schedules import ADAPTIVE, PILOT_SCHEDULES, from_array
from ._common import progress_range, timer
from .adaptive import MAX_PILOT_STEPS, _take
from .context import annealing_sweeps, chain_bytes, state_units
from .result import EstimateResult, attach_log_likelihood, check_finite, summarize_log_weights

__all__ = [
    "SMCState",
    "init",
    "log_one_minus_cess",
    "next_beta",
    "planned_sweeps",
    "peak_bytes",
    "run",
    "smc",
    "step",
    "systematic_resample",
]

#: the adaptive schedule gives up after this many temperatures without a cap ``K`` (a path whose CESS
#: cannot be kept: a bug, or a target too close to 1)
MAX_STEPS = MAX_PILOT_STEPS
#: smallest step in beta the root finding considers
_MIN_STEP = 1e-12
#: brentq's tolerance on ``log(beta' - beta)``: the step is found to about 1 % of itself
_XTOL = 1e-2
#: a step whose ``log(1 - CESS)`` is within this of the goal's is taken at once (its ``1 - CESS`` is within
#: about 5 % of ``1 - target_ess``)
_ACCEPT = 0.05


class SMCState(NamedTuple):
    """One step's particle population, ``G`` independent groups (replicas) of ``M`` particles each.

    ``x``: the path's batched chain state of ``G * M`` particles, group-major; ``log_w``: the
    normalised log-weights within each group, float64 ``(G, M)``; ``log_z``: each group's running
    ``log Z-hat`` (from ``log Z_0``), float64 ``(G,)``; ``beta``: the current inverse temperature;
    ``ess_min``: the smallest ESS fraction each group's weights reached (before any resampling), ``(G,)``;
    ``n_resampled``: how often each group resampled, int64 ``(G,)``."""

    x: Any
    log_w: torch.Tensor
    log_z: torch.Tensor
    beta: float
    ess_min: torch.Tensor
    n_resampled: torch.Tensor


def _normalise(log_w: torch.Tensor) -> torch.Tensor:
    return log_w - torch.logsumexp(log_w, dim=-1, keepdim=True)


def ess_fraction(log_w: torch.Tensor) -> torch.Tensor:
    """``(sum W)^2 / (M sum W^2)`` of normalised log-weights ``(..., M)``: the ESS as a fraction of ``M``."""
    return torch.exp(-torch.logsumexp(2.0 * log_w, dim=-1)) / log_w.shape[-1]


def init(path: AnnealingPath, n_chains: int, generator: torch.Generator, groups: int = 1) -> SMCState:
    """Exact draws from ``p_0`` for ``groups`` populations of ``n_chains`` particles, equal weights,
    ``log Z-hat = log Z_0``."""
    g, m = int(groups), int(n_chains)
    dev = generator.device
    x = path.sample_initial(g * m, generator)
    f64 = dict(dtype=torch.float64, device=dev)
    return SMCState(
        x,
        torch.full((g, m), -math.log(m), **f64),
        torch.full((g,), float(path.log_z0()), **f64),
        0.0,
        torch.ones(g, **f64),
        torch.zeros(g, dtype=torch.int64, device=dev),
    )


def systematic_resample(log_w: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Systematic resampling of each row of log-weights ``(G, M)`` (normalised or not): indices
    ``(G, M)`` into each row's particles.

    One uniform ``u`` per row; particle ``i`` is copied once for every ``(u + j) / M``, ``j = 0..M-1``,
    in ``[C_{i-1}, C_i)``, ``C`` the float64 cumulative sums of the normalised weights.  Its number of
    copies is ``floor(M W_i)`` or ``ceil(M W_i)`` (the low-variance property) with expectation
    ``M W_i`` (unbiased), and a particle of weight zero is never copied."""
    w = torch.exp(_normalise(log_w.to(torch.float64)))
    g, m = w.shape
    cdf = torch.cumsum(w, dim=-1)
    cdf = cdf / cdf[:, -1:]  # the last sum is 1 up to rounding; make it exactly 1
    u = torch.rand((g, 1), dtype=torch.float64, device=w.device, generator=generator)
    pos = (u + torch.arange(m, dtype=torch.float64, device=w.device)) / m
    return torch.searchsorted(cdf.contiguous(), pos.contiguous(), right=True).clamp_(max=m - 1)


def step(
    path: AnnealingPath,
    state: SMCState,
    beta_next: float,
    generator: torch.Generator,
    *,
    ess_threshold: float = 0.5,
    sweeps_per_beta: int = 1,
    move: bool = True,
) -> SMCState:
    """Reweight from ``state.beta`` to ``beta_next`` and add each group's ``log sum_i W_i w_i`` to its
    ``log Z-hat``; then, if ``move``, resample (systematically, within each group) the groups whose ESS
    fell below ``ess_threshold * M`` and apply ``sweeps_per_beta`` transitions at ``beta_next``.  The
    last step (to ``beta = 1``, ``move=False``) neither resamples nor moves: neither would change ``Z-hat``."""
    g, m = state.log_w.shape
    inc = path.log_f_ratio(state.x, state.beta, beta_next).to(torch.float64).reshape(g, m)
    log_z = state.log_z + torch.logsumexp(state.log_w + inc, dim=-1)
    log_w = _normalise(state.log_w + inc)
    ess = ess_fraction(log_w)
    ess_min = torch.minimum(state.ess_min, ess)
    x, n_resampled = state.x, state.n_resampled
    if move:
        resample = ess < float(ess_threshold)
        if bool(resample.any()):
            keep = torch.arange(m, device=log_w.device).expand(g, m)
            idx = torch.where(resample[:, None], systematic_resample(log_w, generator), keep)
            x = _take(x, (idx + m * torch.arange(g, device=idx.device)[:, None]).reshape(-1))
            log_w = torch.where(resample[:, None], torch.full_like(log_w, -math.log(m)), log_w)
            n_resampled = n_resampled + resample.to(torch.int64)
        for _ in range(int(sweeps_per_beta)):
            x = path.transition(x, beta_next, generator)
    return SMCState(x, log_w, log_z, float(beta_next), ess_min, n_resampled)


def log_one_minus_cess(log_w: torch.Tensor, inc: torch.Tensor) -> torch.Tensor:
    """``log(1 - CESS)`` of increments ``inc`` under normalised log-weights ``log_w`` (both ``(..., M)``), per
    leading index: the same quantity as :func:`~logzbench.estimators.adaptive.conditional_ess`, written as
    ``log(v / (1 + v))`` with ``v = sum_i W_i expm1(inc_i - log sum_j W_j w_j)^2`` (the weights' relative
    variance), so that it stays accurate, and about linear in ``log(beta' - beta)``, for the smallest steps,
    where ``1 - CESS`` rounds to 0."""
    a = torch.logsumexp(log_w + inc, dim=-1, keepdim=True)
    v = (torch.exp(log_w) * torch.expm1(inc - a) ** 2).sum(dim=-1)
    return torch.log(v) - torch.log1p(v)


def next_beta(path: AnnealingPath, state: SMCState, target_ess: float) -> tuple[float, int]:
    """``(beta', evaluations)``: the next inverse temperature, 1 if the step there keeps a conditional ESS of
    ``target_ess`` (the smallest group's), else the root of ``CESS(beta') = target_ess`` in ``s = log(beta' -
    beta)``; and how many times it reweighted the particles to find it.

    ``log(1 - CESS)`` is about a straight line of slope 2 in ``s`` (``1 - CESS`` grows as the square of the
    step), so steps along that line from ``beta' = 1`` bracket the root in an evaluation or two, and
    :func:`scipy.optimize.brentq` (to ``_XTOL`` in ``s``) finishes; a point within ``_ACCEPT`` of the goal ends
    the search at once."""
    from scipy.optimize import brentq

    beta, shape = state.beta, state.log_w.shape
    goal = math.log1p(-float(target_ess))
    seen: dict[float, float] = {}

    def excess(s: float) -> float:
        """``log(1 - CESS) - log(1 - target_ess)`` of the smallest group CESS at ``beta' = beta + e^s``:
        <= 0 where the step keeps the target."""
        if s not in seen:
            b = 1.0 if s >= hi else min(1.0, beta + math.exp(s))
            inc = path.log_f_ratio(state.x, beta, b).to(torch.float64).reshape(shape)
            e = float(log_one_minus_cess(state.log_w, inc).max()) - goal
            seen[s] = min(e, 1e3) if not math.isnan(e) else 1e3
        return seen[s]

    lo, hi = math.log(_MIN_STEP), math.log(1.0 - beta)
    if excess(hi) <= 0.0:
        return 1.0, len(seen)
    if lo >= hi:
        return min(1.0, beta + _MIN_STEP), len(seen)
    s_hi, s = hi, hi - excess(hi) / 2.0
    while True:  # slope-2 steps down from beta' = 1 until one keeps the target
        s = max(s, lo)
        e = excess(s)
        if abs(e) <= _ACCEPT:
            return min(1.0, beta + math.exp(s)), len(seen)
        if e < 0.0:
            break
        if s <= lo:  # even the smallest step loses more: take it
            return min(1.0, beta + _MIN_STEP), len(seen)
        s_hi, s = s, s - e / 2.0
    root = brentq(excess, s, s_hi, xtol=_XTOL, maxiter=200)
    return min(1.0, beta + math.exp(root)), len(seen)


def _beta_bar(enabled: bool, desc: str):
    """A tqdm bar over ``beta`` from 0 to 1 (the adaptive schedule's length is not known in advance)."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=1.0, desc=desc, unit="beta", mininterval=1.0, bar_format="{l_bar}{bar}| beta {n:.3g}")


def run(
    path: AnnealingPath,
    betas,
    n_chains: int,
    generator: torch.Generator,
    *,
    groups: int = 1,
    ess_threshold: float = 0.5,
    sweeps_per_beta: int = 1,
    target_ess: float = 0.95,
    max_steps: int | None = None,
    progress: bool = False,
    desc: str = "SMC",
) -> tuple[SMCState, np.ndarray, dict[str, int]]:
    """Run SMC from ``p_0`` to ``beta = 1``: over ``betas`` (a fixed schedule), or with ``betas=None``
    choosing each next temperature by :func:`next_beta` at ``target_ess`` (at most ``max_steps`` steps,
    the last one to ``beta = 1``; without a cap, an error after :data:`MAX_STEPS`).

    Returns the final state, the schedule used and counts: ``sweeps`` (transitions per particle),
    ``cess_evaluations`` (reweightings of the population while choosing temperatures) and ``capped``
    (1 when the cap forced a last step whose CESS is below ``target_ess``)."""
    counts = {"sweeps": 0, "cess_evaluations": 0, "capped": 0}
    state = init(path, n_chains, generator, groups=groups)
    kw = dict(ess_threshold=ess_threshold, sweeps_per_beta=sweeps_per_beta)
    if betas is not None:
        betas = from_array(betas)
        k_total = len(betas) - 1
        for k in progress_range(k_total, progress, desc):
            state = step(path, state, float(betas[k + 1]), generator, move=k + 1 < k_total, **kw)
        counts["sweeps"] = max(k_total - 1, 0) * int(sweeps_per_beta)
    else:
        out = [0.0]
        cap = int(max_steps) if max_steps is not None else None
        bar = _beta_bar(progress, desc)
        while state.beta < 1.0:
            if cap is not None and len(out) >= cap:  # the last step allowed: to beta = 1, whatever its CESS
                b = 1.0
                inc = path.log_f_ratio(state.x, state.beta, b).to(torch.float64).reshape(state.log_w.shape)
                counts["capped"] = int(float(log_one_minus_cess(state.log_w, inc).max()) > math.log1p(-target_ess))
                counts["cess_evaluations"] += 1
            else:
                if cap is None and len(out) > MAX_STEPS:
                    raise RuntimeError(
                        f"smc needed more than {MAX_STEPS} temperatures to keep a conditional ESS of {target_ess} "
                        f"(reached beta = {state.beta:.3g}); lower target_ess or cap the steps with K"
                    )
                b, n = next_beta(path, state, float(target_ess))
                counts["cess_evaluations"] += n
            if bar is not None:
                bar.update(b - state.beta)
            state = step(path, state, b, generator, move=b < 1.0, **kw)
            out.append(state.beta)
            counts["sweeps"] += int(sweeps_per_beta) if b < 1.0 else 0
        if bar is not None:
            bar.close()
        betas = np.asarray(out, dtype=np.float64)
    check_finite(state.log_z, "SMC log Z-hats")
    return state, betas, counts


def smc(
    path: AnnealingPath,
    n_chains: int,
    replicas: int,
    generator: torch.Generator,
    *,
    betas=None,
    target_ess: float = 0.95,
    max_steps: int | None = None,
    ess_threshold: float = 0.5,
    sweeps_per_beta: int = 1,
    n_bootstrap: int = 1000,
    progress: bool = False,
    settings: dict | None = None,
) -> EstimateResult:
    """SMC estimate of ``log Z`` from ``replicas`` independent populations of ``n_chains`` particles.

    Parameters
    ----------
    path : AnnealingPath
        From a tractable ``p_0`` to the model (its ``transition`` is the move).
    n_chains, replicas : int
        Particles per population, and populations (at least 2: their spread gives the standard error).
    generator : torch.Generator
        Source of all randomness (on the path's device).
    betas : array-like, optional
        A fixed schedule (unbiased ``Z-hat``); ``None``: adaptive by the conditional ESS ``target_ess``,
        per replica, at most ``max_steps`` steps (consistent, slightly biased).
    ess_threshold : float
        Resample a population when its ESS falls below this fraction of ``n_chains``.
    sweeps_per_beta : int
        Transitions at each intermediate temperature.
    """
    R, M = int(replicas), int(n_chains)
    kw = dict(
        ess_threshold=ess_threshold,
        sweeps_per_beta=sweeps_per_beta,
        target_ess=target_ess,
        max_steps=max_steps,
        progress=progress,
    )
    with timer(generator.device) as t:
        if betas is not None:  # one batched run of R groups
            state, schedule, c = run(path, betas, M, generator, groups=R, **kw)
            parts = [(state, schedule, c)]
        else:  # each replica its own temperatures
            parts = [run(path, None, M, generator, desc=f"SMC replica {r + 1}/{R}", **kw) for r in range(R)]
    log_z = torch.cat([p[0].log_z for p in parts]).cpu()
    final_ess = torch.cat([ess_fraction(p[0].log_w) for p in parts]).cpu() * M
    ess_min = torch.cat([p[0].ess_min for p in parts]).cpu()
    n_resampled = torch.cat([p[0].n_resampled for p in parts]).cpu()
    n_temps = [len(p[1]) - 1 for p in parts for _ in range(p[0].log_z.numel())]
    sweeps = [p[2]["sweeps"] for p in parts for _ in range(p[0].log_z.numel())]
    total_sweeps = int(sum(sweeps)) * M
    s = summarize_log_weights(log_z, n_bootstrap=n_bootstrap, seed=generator.initial_seed(), what="SMC log Z-hats")
    adaptive = betas is None
    return EstimateResult(
        estimator="smc",
        log_z=s.log_mean,
        log_z_stderr=s.stderr,
        log_z_ci=(s.ci_low, s.ci_high),
        ess=float(final_ess.sum()),
        khat=s.khat,
        n_chains=R * M,
        seconds=t[0],
        n_sweeps=int(round(sum(sweeps) / R)),
        total_sweeps=total_sweeps,
        settings={
            "K": int(max(n_temps)) if not adaptive else max_steps,
            "chains": M,
            "replicas": R,
            "ess_threshold": float(ess_threshold),
            "sweeps_per_beta": int(sweeps_per_beta),
            **({"target_ess": float(target_ess)} if adaptive else {}),
            **(settings or {}),
        },
        log_weights=log_z.numpy(),
        schedule=np.asarray(parts[0][1], dtype=np.float64),
        extra={
            "unbiased": not adaptive,
            "replica_log_z": log_z.tolist(),
            "replica_ess": float(s.ess),
            "n_temperatures": float(np.mean(n_temps)),
            "n_temperatures_min": int(min(n_temps)),
            "n_temperatures_max": int(max(n_temps)),
            "n_resampled": int(n_resampled.sum()),
            "resampled_per_replica": float(n_resampled.double().mean()),
            "ess_min_fraction": float(ess_min.min()),
            "final_ess_fraction": float(final_ess.sum()) / (R * M),
            "cess_evaluations": int(sum(p[2]["cess_evaluations"] for p in parts)),
            "capped_replicas": int(sum(p[2]["capped"] for p in parts)),
        },
    )


# --------------------------------------------------------------------------- the registry entry
def _adaptive(ctx) -> bool:
    return ctx.options.schedule == ADAPTIVE


def _path(ctx) -> AnnealingPath:
    """The move's path: the model's annealing path from ``init`` (every discrete family, a user's
    energy), or an analysis model's HAIS path from its Gaussian (or its own) start."""
    if ctx.family.kind == "analysis":
        from .hais import analysis_path, kernel_options

        o = ctx.options
        return analysis_path(ctx.model, kernel="hais", proposal_scale=o.proposal_scale, **kernel_options(o))
    return ctx.path()


def check(ctx) -> None:
    """What ``smc`` refuses before any work: a fixed schedule that cannot be built (``linear`` /
    ``sigmoid`` without ``K``, a file of another length), and the adaptive schedule with one particle per
    replica (the conditional ESS compares weights)."""
    if _adaptive(ctx):
        if ctx.options.chains < 2:
            raise ValueError(
                f"smc's adaptive schedule needs chains >= 2 (the conditional ESS compares weights), "
                f"got {ctx.options.chains}"
            )
    elif ctx.options.schedule not in PILOT_SCHEDULES:  # the tuned schedule's pilot rounds run with the estimate
        ctx.betas()
    elif ctx.options.K is None:
        raise ValueError(f"smc: the {ctx.options.schedule} schedule needs K (--steps), the length of its last round")


def _rows(ctx) -> tuple[int, str]:
    """Particles held at once: every replica's (a fixed schedule batches them), or one replica's."""
    o = ctx.options
    if _adaptive(ctx):
        return o.chains, f"chains = {o.chains} (one replica at a time)"
    return o.replicas * o.chains, f"replicas x chains = {o.replicas} x {o.chains}"


def peak_bytes(ctx) -> tuple[int, str]:
    """The particles held at once (:func:`_rows`) and one copy of them (resampling gathers a new state)."""
    rows, what = _rows(ctx)
    return chain_bytes(ctx, rows, what, extra=rows * state_units(ctx.model) * 8)


def planned_sweeps(ctx) -> tuple[list, str]:
    """The sweeps the run makes, for a user energy's time check (as AIS's, :func:`annealing_sweeps`: ``K x
    sweeps_per_beta``, one more than it makes): of all ``replicas x chains`` particles at once with a fixed
    schedule; with the adaptive schedule, per replica, up to the cap ``K`` if given (an upper bound), else at
    least one sweep (its temperatures are not chosen yet: a lower bound)."""
    o = ctx.options
    if not _adaptive(ctx):
        batches, what = annealing_sweeps(ctx, rows=o.replicas * o.chains)
        return batches, what
    if o.K is not None:
        sweeps = max(1, int(o.K) * int(o.sweeps_per_beta))
        return [(o.chains, sweeps)] * int(o.replicas), (
            f"at most {sweeps} sweeps of {o.chains} particles in each of {o.replicas} replicas (K caps the "
            "adaptive temperatures)"
        )
    return [(o.chains, 1)] * int(o.replicas), (
        f"at least 1 sweep of {o.chains} particles in each of {o.replicas} replicas (the adaptive "
        "temperatures are not chosen yet)"
    )


def estimate(ctx) -> EstimateResult:
    """Registry entry ``smc``: tempered SMC on the model's path from ``init``, ``replicas`` populations of
    ``chains`` particles, with the test log-likelihood from the (exact or importance-sampled) ``log f(v)``."""
    o = ctx.options
    path = _path(ctx)
    analysis = ctx.family.kind == "analysis"
    if not analysis:
        ctx.log_f()  # a deep model's importance sampling draws from the generator: before the kernel
    settings = ctx.settings("init", "schedule", "model_family") if not analysis else ctx.settings("schedule")
    if analysis:
        settings.update(
            model_family=ctx.model.family,
            model_kind=ctx.family.kind,
            proposal_scale=float(o.proposal_scale),
            **path.settings(),
        )
    res = smc(
        path,
        o.chains,
        o.replicas,
        ctx.generator,
        betas=None if _adaptive(ctx) else ctx.betas(path),
        target_ess=o.target_ess,
        max_steps=o.K if _adaptive(ctx) else None,
        ess_threshold=o.ess_threshold,
        sweeps_per_beta=o.sweeps_per_beta,
        n_bootstrap=o.n_bootstrap,
        progress=o.progress,
        settings=settings,
    )
    if analysis:
        res.extra["acceptance_rate"] = path.acceptance_rate
        if ctx.data is not None:
            attach_log_likelihood(res, -ctx.model.energy(ctx.data).double())
        return ctx.record_schedule(res)
    return ctx.finish(res)
