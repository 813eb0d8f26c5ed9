"""Non-reversible parallel tempering with a tuned ladder, and log Z by stepping stone (Syed, Bouchard-Côté,
Deligiannidis & Doucet 2021, "Non-reversible parallel tempering: a scalable highly parallel MCMC scheme";
Pigeons.jl).

``N`` chains run at once on the model's annealing path, one at each inverse temperature of a ladder
``0 = beta_0 < beta_1 < ... < beta_{N-1} = 1``.  One *scan* is

* local exploration: ``sweeps_per_beta`` transitions of the path at each ``beta_i`` (at ``beta_0 = 0`` a
  fresh exact draw of ``p_0`` instead, which leaves it invariant too);
* communication by deterministic even/odd swaps (DEO): at even scans the pairs ``(0, 1), (2, 3), ...``
  propose to exchange their states, at odd scans ``(1, 2), (3, 4), ...``; a swap of ``x_i`` and
  ``x_{i+1}`` is accepted with probability ``min(1, exp(a_i))``,
  ``a_i = [log f_{i+1}(x_i) - log f_i(x_i)] + [log f_i(x_{i+1}) - log f_{i+1}(x_{i+1})]``
  (two calls of the path's ``log_f_ratio``, float64).

Each move leaves the product ``p_{beta_0} x ... x p_{beta_{N-1}}`` invariant, so the chain at ``beta = 1``
samples the model.  The alternation makes a state's walk along the ladder persistent rather than
diffusive: its round trips ``0 -> N-1 -> 0`` take ``O(N)`` scans rather than ``O(N^2)``.

The ladder is tuned in rounds (Syed et al. 2021, Alg. 3 / 4): round ``j`` of ``rounds`` runs ``2^(j - 1)``
scans, estimates each pair's rejection rate ``r_i`` (the mean of ``1 - min(1, exp(a_i))`` over the round's
scans and chains: every pair, at every scan), and re-spaces the ladder so that every pair rejects equally:
the cumulative barrier ``Lambda(beta)`` is interpolated piecewise-linearly through
``(beta_i, r_0 + ... + r_{i-1})`` and the new ``beta_k`` is ``Lambda^{-1}(k Lambda / (N - 1))``, where
``Lambda = Lambda(1) = sum r_i`` is the *global communication barrier*.  The chains keep their states
across rounds.  A last round of ``K`` scans then runs on the ladder the tuning left, fixed before it starts;
everything reported comes from it.

``log Z`` by stepping stone over that round's states, in both directions:

* forward, ``log Z_{i+1} / Z_i`` as ``log mean_j exp(log f_{i+1}(x_j) - log f_i(x_j))`` over the states
  ``x_j`` at ``beta_i`` (an estimate of ``Z_{i+1} / Z_i``: its product estimates ``Z``);
* backward, as ``-log mean_j exp(log f_i(x_j) - log f_{i+1}(x_j))`` over the states at ``beta_{i+1}`` (the
  mean estimates ``Z_i / Z_{i+1}``: its product estimates ``1 / Z``).

Summed over the pairs (plus ``log Z_0``), the forward sum errs low and the backward one high in the limit
of exact independent draws (Jensen); with MCMC draws neither is a bound, both are consistent as ``K``
grows.  The headline ``log Z`` is their average.  ``replicas`` independent runs (batched: each column of
the state is one run, on the shared ladder) give the standard error: the spread of the replicas'
estimates, ``sd / sqrt(replicas)``, and a t interval.  The estimate is approximate (consistent, not
unbiased, no bound: the registry's ``bound="none"``); a barrier ``Lambda`` large next to ``N - 1`` or no
round trips says the chains did not mix across the ladder and the estimate is not to be trusted.

The state (:class:`PTState`) holds one batched path state per temperature, each with ``replicas`` rows; a
path's transition takes one scalar ``beta``, so a scan makes one call per temperature.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import torch

from ..models.base import AnnealingPath
from ._common import progress_range, timer
from .result import EstimateResult, attach_log_likelihood, check_finite

#: tuning rounds before the final one (round j runs 2^(j-1) scans; Pigeons' default n_rounds is 10)
DEFAULT_ROUNDS = 10
#: chains on the ladder (the ladder's length; Syed et al. suggest about 2 Lambda + 1)
DEFAULT_TEMPERATURES = 16
#: smallest rejection rate a pair counts with when the ladder is re-spaced (keeps Lambda(beta) strictly
#: increasing, so that its inverse is a function)
_MIN_REJECTION = 1e-6


class PTState(NamedTuple):
    """The chains of every temperature.

    ``x``: one batched path state per temperature (``N`` of them, each with ``M`` rows: column ``m`` of
    every temperature is one parallel-tempering run); ``label``: int64 ``(N, M)``, which of the column's
    ``N`` travelling states sits at each temperature (state ``i`` starts at temperature ``i``);
    ``leg``: int64 ``(N, M)`` per travelling state, the end it reached last (``0``: the reference, ``1``:
    the model after the reference, ``-1``: not the reference yet); ``round_trips``: int64 ``(M,)``, the
    column's completed trips ``0 -> N-1 -> 0``; ``scans``: scans run (its parity chooses the pairs of the
    next swap)."""

    x: tuple
    label: torch.Tensor
    leg: torch.Tensor
    round_trips: torch.Tensor
    scans: int


class ScanStats(NamedTuple):
    """What one scan measured, per pair ``i = 0 .. N-2`` and column: ``fwd`` = ``log f_{i+1}(x_i) -
    log f_i(x_i)`` and ``bwd`` = ``log f_i(x_{i+1}) - log f_{i+1}(x_{i+1})`` (float64 ``(N-1, M)``, on the
    states after the local moves, before the swap), and ``swapped``: bool ``(N-1, M)``, the accepted swaps
    (pairs not proposed this scan: ``False``)."""

    fwd: torch.Tensor
    bwd: torch.Tensor
    swapped: torch.Tensor


# --------------------------------------------------------------------------- batched states
def select(mask: torch.Tensor, a: Any, b: Any) -> Any:
    """Row-wise ``mask ? a : b`` of two batched path states (tensors, NamedTuples of tensors, ``None``)."""
    if a is None:
        return None
    if isinstance(a, torch.Tensor):
        return torch.where(mask.to(a.device).view(-1, *([1] * (a.dim() - 1))), a, b)
    if isinstance(a, tuple):
        parts = [select(mask, p, q) for p, q in zip(a, b)]
        return type(a)._make(parts) if hasattr(a, "_fields") else type(a)(parts)
    raise TypeError(f"parallel tempering cannot swap a path state part of type {type(a).__name__}")


def _cat(states: list) -> Any:
    """The rows of several batched path states, one after another."""
    a = states[0]
    if isinstance(a, torch.Tensor):
        return torch.cat(states)
    parts = [None if p is None else _cat([s[k] for s in states]) for k, p in enumerate(a)]
    return type(a)._make(parts) if hasattr(a, "_fields") else type(a)(parts)


def _split(state: Any, n: int) -> list:
    """:func:`_cat`'s inverse: consecutive blocks of ``n`` rows."""
    if isinstance(state, torch.Tensor):
        return list(torch.split(state, n))
    parts = [None if p is None else _split(p, n) for p in state]
    k = next(len(p) for p in parts if p is not None)
    make = type(state)._make if hasattr(state, "_fields") else type(state)
    return [make([None if p is None else p[i] for p in parts]) for i in range(k)]


def rows_transition(path: AnnealingPath):
    """The path's ``transition_rows(state, beta_per_row, generator)`` (the RBM paths: one batched sweep of
    every temperature), if it goes with the ``transition`` the path uses (not when a subclass, a wrapper or
    the instance replaces it); else ``None`` (one ``transition`` call per temperature)."""
    cls = type(path)
    owner = next((c for c in cls.__mro__ if "transition_rows" in vars(c)), None)
    if owner is None or "transition" in vars(path) or "transition_rows" in vars(path):
        return None
    if getattr(cls, "transition", None) is not getattr(owner, "transition", None):
        return None
    return path.transition_rows


def linear_ladder(n_temps: int) -> np.ndarray:
    """``n_temps`` equally spaced inverse temperatures from 0 to 1 (the first round's ladder)."""
    if int(n_temps) < 2:
        raise ValueError(f"a parallel-tempering ladder needs at least 2 temperatures (0 and 1), got {n_temps}")
    return np.linspace(0.0, 1.0, int(n_temps))


# --------------------------------------------------------------------------- the kernel
def init(path: AnnealingPath, betas, n_columns: int, generator: torch.Generator) -> PTState:
    """``n_columns`` runs, every temperature started at an exact draw of ``p_0``."""
    n = len(betas)
    dev = generator.device
    x = tuple(path.sample_initial(int(n_columns), generator) for _ in range(n))
    label = torch.arange(n, device=dev).unsqueeze(1).expand(n, int(n_columns)).clone()
    leg = torch.full((n, int(n_columns)), -1, dtype=torch.int64, device=dev)
    leg[0] = 0
    return PTState(x, label, leg, torch.zeros(int(n_columns), dtype=torch.int64, device=dev), 0)


def explore(
    path: AnnealingPath, state: PTState, betas, generator: torch.Generator, n_moves: int = 1, refresh: bool = True
) -> PTState:
    """Local exploration: ``n_moves`` transitions at each ``beta_i``; at ``beta_0 = 0`` (with ``refresh``)
    one exact draw of ``p_0`` instead.  A path with :func:`rows_transition` moves every temperature in one
    batched call; the others take one call per temperature."""
    n_cols = int(state.label.shape[1])
    batched = rows_transition(path)
    if batched is not None:
        first = 1 if refresh and float(betas[0]) == 0.0 else 0
        x = _cat(list(state.x[first:]))
        b = torch.as_tensor(np.asarray(betas[first:], dtype=np.float64), device=state.label.device)
        b = b.repeat_interleave(n_cols)
        for _ in range(int(n_moves)):
            x = batched(x, b, generator)
        moved = _split(x, n_cols)
        return state._replace(x=tuple(([path.sample_initial(n_cols, generator)] if first else []) + moved))
    xs = []
    for i, (b, x) in enumerate(zip(betas, state.x)):
        b = float(b)
        if i == 0 and b == 0.0 and refresh:
            xs.append(path.sample_initial(n_cols, generator))
            continue
        for _ in range(int(n_moves)):
            x = path.transition(x, b, generator)
        xs.append(x)
    return state._replace(x=tuple(xs))


def log_ratios(path: AnnealingPath, state: PTState, betas) -> tuple[torch.Tensor, torch.Tensor]:
    """``(fwd, bwd)`` of :class:`ScanStats` at the state (float64 ``(N-1, M)``)."""
    b = [float(v) for v in betas]
    fwd = [path.log_f_ratio(state.x[i], b[i], b[i + 1]).double() for i in range(len(b) - 1)]
    bwd = [path.log_f_ratio(state.x[i + 1], b[i + 1], b[i]).double() for i in range(len(b) - 1)]
    return torch.stack(fwd), torch.stack(bwd)


def swap(path: AnnealingPath, state: PTState, betas, generator: torch.Generator) -> tuple[PTState, ScanStats]:
    """The deterministic even/odd swap of scan ``state.scans`` (even: pairs ``(0, 1), (2, 3), ...``; odd:
    ``(1, 2), (3, 4), ...``), each accepted with ``min(1, exp(fwd_i + bwd_i))``; updates the labels, legs and
    round trips, and counts the scan."""
    fwd, bwd = log_ratios(path, state, betas)
    n, m = int(state.label.shape[0]), int(state.label.shape[1])
    u = torch.rand((n - 1, m), generator=generator, dtype=torch.float64, device=generator.device).to(fwd.device)
    log_a = fwd + bwd
    proposed = torch.zeros(n - 1, dtype=torch.bool, device=fwd.device)
    proposed[state.scans % 2 :: 2] = True
    swapped = proposed[:, None] & (torch.log(u) < log_a)  # NaN (both -inf): rejected
    xs = list(state.x)
    label = state.label.clone()
    for i in range(state.scans % 2, n - 1, 2):
        s = swapped[i]
        if not bool(s.any()):
            continue
        lo, hi = xs[i], xs[i + 1]
        xs[i], xs[i + 1] = select(s, hi, lo), select(s, lo, hi)
        s = s.to(label.device)
        label[i], label[i + 1] = (
            torch.where(s, state.label[i + 1], state.label[i]),
            torch.where(s, state.label[i], state.label[i + 1]),
        )
    # round trips of the travelling states: arriving at the reference after reaching the model from it (a state
    # that reaches the model before it has been at the reference does not start a trip)
    leg = state.leg.clone()
    bottom, top = label[0][None], label[n - 1][None]
    trips = state.round_trips + (leg.gather(0, bottom)[0] == 1).to(torch.int64)
    leg.scatter_(0, bottom, torch.zeros_like(bottom))
    at_top = leg.gather(0, top)
    leg.scatter_(0, top, torch.where(at_top == 0, torch.ones_like(at_top), at_top))
    new = PTState(tuple(xs), label, leg, trips, state.scans + 1)
    return new, ScanStats(fwd, bwd, swapped)


def step(
    path: AnnealingPath, state: PTState, betas, generator: torch.Generator, n_moves: int = 1
) -> tuple[PTState, ScanStats]:
    """One scan: :func:`explore`, then :func:`swap`."""
    return swap(path, explore(path, state, betas, generator, n_moves), betas, generator)


# --------------------------------------------------------------------------- the ladder
def rejection(stats: ScanStats) -> torch.Tensor:
    """Expected rejection ``1 - min(1, exp(fwd + bwd))`` per pair and column (float64 ``(N-1, M)``): a
    lower-variance estimate of the rejection rate than the accepted swaps (Syed et al. 2021, Sec. 5.1)."""
    a = (stats.fwd + stats.bwd).clamp(max=0.0)
    return -torch.expm1(torch.nan_to_num(a, nan=-math.inf))


def respace(betas, rates) -> np.ndarray:
    """The ladder of the same length on which every pair rejects equally, by the piecewise-linear inverse of
    the cumulative barrier ``Lambda(beta)`` through ``(beta_i, r_0 + ... + r_{i-1})`` (Syed et al. 2021,
    Alg. 4).  The ends stay at 0 and 1."""
    betas = np.asarray(betas, dtype=np.float64)
    r = np.maximum(np.asarray(rates, dtype=np.float64), _MIN_REJECTION)
    cum = np.concatenate([[0.0], np.cumsum(r)])
    new = np.interp(np.linspace(0.0, cum[-1], len(betas)), cum, betas)
    new[0], new[-1] = betas[0], betas[-1]
    return np.maximum.accumulate(new)


class RoundStats:
    """Running sums of one round, per pair and column, in float64: rejection, accepted and proposed swaps,
    and the stepping-stone terms (log-sum-exp of ``fwd`` / ``bwd`` and of twice them, for their ESS)."""

    def __init__(self, n_pairs: int, n_columns: int, device):
        z = dict(dtype=torch.float64, device=device)
        self.scans = 0
        self.trips_at_start = 0  # the columns' round trips before the round (run() sets it)
        self.rejection = torch.zeros(n_pairs, n_columns, **z)
        self.accepted = torch.zeros(n_pairs, **z)
        self.proposed = torch.zeros(n_pairs, **z)
        self.lse = {k: torch.full((n_pairs, n_columns), -math.inf, **z) for k in ("fwd", "bwd", "fwd2", "bwd2")}

    def add(self, stats: ScanStats, parity: int) -> None:
        self.scans += 1
        self.rejection += rejection(stats)
        self.accepted += stats.swapped.sum(dim=1).double()
        self.proposed[parity::2] += stats.swapped.shape[1]
        for k, t in (("fwd", stats.fwd), ("bwd", stats.bwd), ("fwd2", 2 * stats.fwd), ("bwd2", 2 * stats.bwd)):
            self.lse[k] = torch.logaddexp(self.lse[k], t)

    def rates(self) -> np.ndarray:
        """Mean rejection per pair over the round's scans and columns."""
        return (self.rejection.sum(dim=1) / max(1, self.scans * self.rejection.shape[1])).cpu().numpy()


def run(
    path: AnnealingPath,
    n_temps: int,
    n_columns: int,
    generator: torch.Generator,
    *,
    rounds: int = DEFAULT_ROUNDS,
    final_scans: int | None = None,
    sweeps_per_beta: int = 1,
    progress: bool = False,
    state: PTState | None = None,
    betas=None,
) -> tuple[PTState, np.ndarray, RoundStats | None, list[dict]]:
    """Tune the ladder in ``rounds`` rounds (round ``j`` runs ``2^(j-1)`` scans and re-spaces the ladder
    from its rejection rates), then run ``final_scans`` scans on the ladder it left (none: tuning only).

    Returns ``(state, ladder, final round's statistics or None, history)``; ``history`` holds one dict per
    tuning round (``scans``, ``Lambda`` and ``ladder`` before re-spacing)."""
    betas = linear_ladder(n_temps) if betas is None else np.asarray(betas, dtype=np.float64)
    state = init(path, betas, n_columns, generator) if state is None else state
    history = []
    for j in range(1, int(rounds) + 1):
        stats = RoundStats(len(betas) - 1, n_columns, generator.device)
        for _ in progress_range(2 ** (j - 1), progress, f"PT tuning round {j}/{rounds}"):
            parity = state.scans % 2
            state, s = step(path, state, betas, generator, sweeps_per_beta)
            stats.add(s, parity)
        rates = stats.rates()
        history.append({"scans": 2 ** (j - 1), "Lambda": float(rates.sum()), "ladder": betas.tolist()})
        betas = respace(betas, rates)
    final = None
    if final_scans:
        final = RoundStats(len(betas) - 1, n_columns, generator.device)
        final.trips_at_start = int(state.round_trips.sum())
        for _ in progress_range(int(final_scans), progress, "PT final round"):
            parity = state.scans % 2
            state, s = step(path, state, betas, generator, sweeps_per_beta)
            final.add(s, parity)
    return state, betas, final, history


# --------------------------------------------------------------------------- the estimate
def stepping_stone(path: AnnealingPath, stats: RoundStats) -> tuple[np.ndarray, np.ndarray]:
    """``(forward, backward)`` estimates of ``log Z`` per column (float64 ``(M,)``) from a round's sums."""
    log_n = math.log(stats.scans)
    fwd = (stats.lse["fwd"] - log_n).sum(dim=0)
    bwd = -(stats.lse["bwd"] - log_n).sum(dim=0)
    check_finite(fwd, "PT stepping-stone (forward) terms")
    check_finite(bwd, "PT stepping-stone (backward) terms")
    lz0 = float(path.log_z0())
    return lz0 + fwd.cpu().numpy(), lz0 + bwd.cpu().numpy()


def _ess(lse: torch.Tensor, lse2: torch.Tensor) -> torch.Tensor:
    """Per-pair ESS ``(sum w)^2 / sum w^2`` of the weights pooled over the columns."""
    return torch.exp(2 * torch.logsumexp(lse, dim=1) - torch.logsumexp(lse2, dim=1))


def _mean_se_ci(values: np.ndarray) -> tuple[float, float, tuple[float, float]]:
    from scipy.stats import t

    v = np.asarray(values, dtype=np.float64)
    mean = float(v.mean())
    se = float(v.std(ddof=1) / math.sqrt(v.size))
    half = float(t.ppf(0.975, v.size - 1)) * se
    return mean, se, (mean - half, mean + half)


def pt(
    path: AnnealingPath,
    n_temps: int,
    replicas: int,
    generator: torch.Generator,
    *,
    K: int,
    rounds: int = DEFAULT_ROUNDS,
    sweeps_per_beta: int = 1,
    progress: bool = False,
    settings: dict | None = None,
) -> EstimateResult:
    """Parallel-tempering estimate of ``log Z`` as a result record (module docstring): ``replicas``
    independent runs of ``n_temps`` chains, ``rounds`` tuning rounds, then ``K`` scans whose stepping stone
    gives ``log Z``.

    ``ess`` is the smallest over the pairs of the forward stepping-stone weights' ESS, out of ``n_chains`` =
    ``K x replicas`` terms per pair.  ``extra`` holds ``log_z_forward`` / ``log_z_backward`` (with their
    standard errors over the replicas), ``Lambda`` (the global barrier on the final ladder), ``round_trips``
    (completed ``0 -> N-1 -> 0`` trips, all replicas, final round) and ``round_trips_total``,
    ``swap_acceptance`` (per pair, final round), ``rejection`` (the expected rejection per pair),
    ``ladder``, ``tuning`` (each round's scans and Lambda), ``ess_pairs`` (each pair's forward
    stepping-stone ESS) and the sweeps of tuning and final round.
    """
    with timer(generator.device) as t:
        state, betas, final, history = run(
            path,
            n_temps,
            replicas,
            generator,
            rounds=rounds,
            final_scans=K,
            sweeps_per_beta=sweeps_per_beta,
            progress=progress,
        )
    fwd, bwd = stepping_stone(path, final)
    both = 0.5 * (fwd + bwd)
    log_z, se, ci = _mean_se_ci(both)
    f_mean, f_se, _ = _mean_se_ci(fwd)
    b_mean, b_se, _ = _mean_se_ci(bwd)
    rates = final.rates()
    ess_pairs = _ess(final.lse["fwd"], final.lse["fwd2"]).cpu().numpy()
    tuning_scans = 2 ** int(rounds) - 1
    n_sweeps = (tuning_scans + int(K)) * int(sweeps_per_beta)
    res = EstimateResult(
        estimator="pt",
        log_z=log_z,
        log_z_stderr=se,
        log_z_ci=ci,
        ess=float(ess_pairs.min()),
        n_chains=int(K) * int(replicas),  # the stepping-stone terms of each pair, which its ESS is measured against
        seconds=t[0],
        n_sweeps=n_sweeps,
        total_sweeps=n_sweeps * int(n_temps) * int(replicas),
        settings={
            "K": int(K),
            "temperatures": int(n_temps),
            "rounds": int(rounds),
            "replicas": int(replicas),
            "sweeps_per_beta": int(sweeps_per_beta),
            **(settings or {}),
        },
        log_weights=both,
        schedule=np.asarray(betas, dtype=np.float64),
    )
    res.extra.update(
        log_z_forward=f_mean,
        log_z_forward_stderr=f_se,
        log_z_backward=b_mean,
        log_z_backward_stderr=b_se,
        Lambda=float(rates.sum()),
        round_trips=int(state.round_trips.sum()) - int(final.trips_at_start),
        round_trips_total=int(state.round_trips.sum()),
        swap_acceptance=(final.accepted / final.proposed.clamp(min=1)).cpu().numpy().tolist(),
        rejection=rates.tolist(),
        ladder=np.asarray(betas).tolist(),
        tuning=[{"scans": h["scans"], "Lambda": h["Lambda"]} for h in history],
        ess_pairs=ess_pairs.tolist(),
        tuning_sweeps=tuning_scans * int(sweeps_per_beta) * int(n_temps) * int(replicas),
        final_sweeps=int(K) * int(sweeps_per_beta) * int(n_temps) * int(replicas),
    )
    return res


# --------------------------------------------------------------------------- the registry entry
def scans(ctx) -> int:
    """The final round's scans: ``K`` (default :data:`logzbench.schedules.DEFAULT_K`)."""
    from ..schedules import DEFAULT_K

    return int(ctx.options.K) if ctx.options.K is not None else int(DEFAULT_K)


def _rows(ctx) -> int:
    return int(ctx.options.replicas) * int(ctx.options.temperatures)


def peak_bytes(ctx) -> tuple[int, str]:
    """The states of every temperature of every replica."""
    from .context import chain_bytes

    o = ctx.options
    return chain_bytes(ctx, _rows(ctx), f"replicas x temperatures = {o.replicas} x {o.temperatures}")


def planned_sweeps(ctx) -> tuple[list, str]:
    """``(2^rounds - 1 + K) x sweeps_per_beta`` sweeps of ``replicas x temperatures`` chains."""
    o = ctx.options
    sweeps = (2 ** int(o.rounds) - 1 + scans(ctx)) * int(o.sweeps_per_beta)
    rows = _rows(ctx)
    return [(rows, sweeps)], f"{sweeps} sweeps of {rows} chains (replicas x temperatures)"


def path_of(ctx) -> AnnealingPath:
    """The model's annealing path from ``init`` (a discrete or Gaussian-binary model), or HAIS's Hamiltonian
    path from its Gaussian proposal (a continuous analysis model: leapfrog steps of ``step_size``, partial
    momentum refresh ``gamma``; a swap moves position and momentum together, the momentum being N(0, I) at
    every temperature)."""
    if ctx.family.kind == "analysis":
        from .hais import analysis_path

        o = ctx.options
        return analysis_path(
            ctx.model, kernel="hais", step_size=o.step_size, gamma=o.gamma, proposal_scale=o.proposal_scale
        )
    return ctx.path()


def estimate(ctx) -> EstimateResult:
    """Registry entry ``pt``: non-reversible parallel tempering on the model's path from ``init``, log Z by
    stepping stone, the test log-likelihood from the (exact or importance-sampled) ``log f(v)``."""
    analysis = ctx.family.kind == "analysis"
    if not analysis:
        ctx.log_f()  # a deep model's importance-sampled log f(v) draws from the generator: before the kernel
    o = ctx.options
    path = path_of(ctx)
    settings = ctx.settings("model_family") if analysis else ctx.settings("init", "model_family")
    kernel = getattr(path, "settings", None)
    if callable(kernel):
        settings.update(kernel())
    res = pt(
        path,
        o.temperatures,
        o.replicas,
        ctx.generator,
        K=scans(ctx),
        rounds=o.rounds,
        sweeps_per_beta=o.sweeps_per_beta,
        progress=o.progress,
        settings=settings,
    )
    rate = getattr(path, "acceptance_rate", None)
    if isinstance(rate, float) and math.isfinite(rate):
        res.extra["acceptance_rate"] = rate
    if analysis:  # log f(x) = -E(x) of the test rows, exactly (as HAIS)
        if ctx.data is not None:
            attach_log_likelihood(res, -ctx.model.energy(ctx.data).double())
        return ctx.record_schedule(res)
    return ctx.finish(res)
