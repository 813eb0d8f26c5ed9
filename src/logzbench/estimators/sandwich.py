"""The sandwich: a bracket on log Z, or on the mean test log-likelihood, from two estimators that err
in opposite directions, with K doubled until the bracket is as narrow as asked.

Pairs (lower end, upper end), by model kind and whether test rows are given:

==========================  =====================================  ==========================================
model kind                   lower end                             upper end
==========================  =====================================  ==========================================
binary, Gaussian-binary      AIS: log Z                            reverse AIS: log Z (approximate)
  with ``data``              RAISE: mean LL (of p_ann)             AIS: mean LL = mean log f(v) - log Z-hat
analysis (PoE, mcRBM)        HAIS: log Z                           reverse HAIS: log Z (approximate)
  with ``data``              RAISE-HMC: mean LL (of p_ann)         HAIS: mean LL = mean(-E(x)) - log Z-hat
generative (``data``)        HAIS over the latent: mean LL (of p)  reverse HAIS from the forward chains'
                                                                   end states: mean LL (approximate)
==========================  =====================================  ==========================================

With data the log Z bracket is reported too: AIS's log Z-hat below, the log Z that the RAISE mean
implies above (approximate: an upper bound only where the test rows are model samples).

What each end guarantees (:mod:`logzbench.estimators.bracket`): AIS's ``log Z-hat`` is a stochastic
lower bound of ``log Z`` (``Z-hat`` is unbiased), hence the log-likelihood it implies a stochastic upper
bound -- where ``log f(v)`` is exact (not for DBMs and DBNs, whose ``log f(v)`` is importance-sampled);
RAISE's per-example estimates are stochastic lower bounds of ``log p_ann(v)``, the *annealing model*,
and their mean over ``N`` rows has the Markov slack ``log(1 / (1 - confidence)) / N`` (none where a
subsample of the rows is corrected by control variates: that mean is approximate).  Reverse AIS would
be a stochastic upper bound from exact model samples; it starts from a forward chain's states, so it is
approximate, and it can miss the same modes as AIS.

The reported ends are the estimates widened by their noise, ``z`` standard errors each, with ``z``
set so that both ends together miss with probability about ``1 - confidence`` over every round the
budget allows (:func:`~logzbench.estimators.bracket.noise_z`): a rule that stops at the first narrow
bracket selects rounds whose ends happen to be close, and the allowance covers that.

Stopping rule: the run starts at ``K`` (default :data:`START_K`) and doubles it until the widened ends
are within ``target_width`` nats and do not cross, each end's ``GROUPS`` groups of chains agree
within their standard errors (Cochran's Q, :func:`spread_p_value`: the between-seed spread test, run
inside one run; it catches a mode that some groups miss), and each approximate end agrees with its
value at half the K (its bias no longer shrinking visibly) -- or until the next round would spend more
than ``max_sweeps`` (Gibbs sweeps times chains, as ``total_sweeps`` counts them, the adaptive pilot's
included).  When the width is not reached the result says so, why, and the K that the widths seen
extrapolate to (``K_needed``).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, NamedTuple

import numpy as np
import torch

from .. import registry
from ..schedules import ADAPTIVE
from ..stats import log_mean_stderr
from . import ais as ais_kernel
from . import raise_ as raise_kernel
from . import reverse_ais as reverse_kernel
from .bracket import End, make_bracket, noise_z, widened
from .context import chain_bytes, per_example_bytes
from .result import EstimateResult

__all__ = ["GROUPS", "START_K", "SPREAD_ALPHA", "Round", "plan", "spread_p_value", "estimate"]

#: K of the first round when ``K`` is not given
START_K = 100
#: groups of chains whose estimates the spread test compares
GROUPS = 4
#: the spread test's level: groups disagreeing at a smaller p-value keep the width from counting as reached
SPREAD_ALPHA = 0.01
#: schedules whose length the sandwich can double
DOUBLING_SCHEDULES = ("linear", "sigmoid", ADAPTIVE)


class Round(NamedTuple):
    """One value of K: the two ends per quantity, the spread p-values, the sweeps and seconds spent."""

    K: int
    ends: dict  # quantity -> (lower End, upper End)
    spread: dict  # end label -> p-value (None: too few chains)
    sweeps: int
    seconds: float
    schedule: np.ndarray
    lower_result: EstimateResult
    upper_result: EstimateResult


class Plan(NamedTuple):
    """What the sandwich runs on this model: ``quantity`` the stopping rule watches, ``run(K)`` one round,
    and ``cost(K)`` the sweeps times chains of a round (before it runs, for the budget)."""

    quantity: str
    lower_name: str
    upper_name: str
    run: Callable[[int], Round]
    cost: Callable[[int], int]


# --------------------------------------------------------------------------- the spread test
def spread_p_value(log_w, groups: int = GROUPS) -> float | None:
    """p-value of Cochran's Q across ``groups`` groups of chains: each group's ``log mean(w)`` (per
    example, then averaged over examples for ``(n, M)`` weights) against its delta-method standard error.

    A small value says the groups disagree beyond their standard errors: a mode some groups found and
    others missed, or weights too heavy-tailed for the errors to mean much.  ``None`` with fewer than two
    chains per group or a group without a finite, positive standard error."""
    from scipy.stats import chi2

    lw = torch.as_tensor(np.asarray(log_w, dtype=np.float64))
    if lw.ndim == 1:
        lw = lw[None, :]
    m = lw.shape[-1]
    if m < 2 * groups:
        return None
    xs, ses = [], []
    for idx in np.array_split(np.arange(m), groups):
        lm, se = log_mean_stderr(lw[:, torch.as_tensor(idx)], dim=-1)
        xs.append(float(lm.mean()))
        ses.append(float(torch.sqrt((se**2).sum())) / lw.shape[0])
    x, se = np.asarray(xs), np.asarray(ses)
    if not (np.isfinite(se).all() and (se > 0).all()):
        return None
    w = 1.0 / se**2
    q = float(np.sum(w * (x - np.sum(w * x) / np.sum(w)) ** 2))
    return float(chi2.sf(q, groups - 1))


# --------------------------------------------------------------------------- ends
def _ais_log_z_end(res: EstimateResult, name: str = "ais") -> End:
    return End(
        name,
        res.log_z,
        res.log_z_stderr,
        True,
        "p",
        "guaranteed: stochastic lower bound of log Z (Z-hat is unbiased; Markov's inequality)",
    )


def _implied_ll_end(res: EstimateResult, exact_log_f: bool, name: str = "ais") -> End:
    if exact_log_f:
        return End(
            name,
            res.mean_log_likelihood,
            res.mean_log_likelihood_stderr,
            True,
            "p",
            "guaranteed: stochastic upper bound of the mean test log-likelihood of p (log f(v) exact, "
            "log Z-hat a stochastic lower bound)",
        )
    return End(
        name,
        res.mean_log_likelihood,
        res.mean_log_likelihood_stderr,
        False,
        None,
        "approximate: log f(v) is importance-sampled (itself a stochastic lower bound), so the "
        "log-likelihood AIS implies is no bound",
    )


def _raise_ll_end(res: EstimateResult, name: str = "raise") -> End:
    n, n_all = int(res.settings.get("n_examples", 0)), int(res.settings.get("n_test", 0))
    if n_all and n < n_all:
        return End(
            name,
            res.mean_log_likelihood,
            res.mean_log_likelihood_stderr,
            False,
            None,
            f"approximate: a control-variate mean over {n} of {n_all} test rows (lower bounds p_ann "
            "per row, but the subsample mean is no bound)",
        )
    return End(
        name,
        res.mean_log_likelihood,
        res.mean_log_likelihood_stderr,
        True,
        "p_ann",
        f"guaranteed of p_ann, not p: stochastic lower bound of the mean test log-likelihood under the "
        f"annealing model p_ann (RAISE; p_ann approaches p as K grows), a mean over {n} rows",
        n_independent=max(n, 1),
    )


def _implied_log_z_end(res: EstimateResult, name: str = "raise") -> End:
    lz = res.extra.get("implied_log_z")
    return End(
        name,
        float(lz) if lz is not None else float("nan"),
        float(res.mean_log_likelihood_stderr or 0.0),
        False,
        None,
        "approximate: the log Z the lower end's mean implies (an upper bound of log Z only "
        "where the test rows are samples of the model)",
    )


def _reverse_end(res: EstimateResult, quantity: str, name: str, from_rows: bool = False) -> End:
    value = res.log_z if quantity == "log_z" else res.mean_log_likelihood
    se = res.log_z_stderr if quantity == "log_z" else res.mean_log_likelihood_stderr
    if from_rows:
        return End(
            name,
            value,
            se,
            False,
            None,
            "approximate: reverse AIS from training rows (an upper bound of "
            "log Z only where they are samples of the model)",
        )
    what = "log Z" if quantity == "log_z" else "the mean test log-likelihood"
    return End(
        name,
        value,
        se,
        False,
        None,
        f"approximate: upper estimate of {what} from a reverse chain started at a forward chain's states, "
        "not exact samples (an upper bound only from exact samples; it can miss what the forward chain "
        "missed)",
    )


# --------------------------------------------------------------------------- plans per model kind
def _gibbs_plan(ctx) -> Plan:
    o, data = ctx.options, ctx.data
    path = ctx.path()
    log_f, log_f_se = ctx.log_f()
    exact_log_f = not ctx.family.deep
    chains, g = o.chains, ctx.generator
    settings = ctx.annealed_settings()

    if data is None:
        rows = ctx.train_data

        def run(K: int) -> Round:
            betas = ctx.betas(path, K=K)
            t0 = time.perf_counter()
            lo = ais_kernel.ais(
                path, betas, chains, g, n_bootstrap=0, settings=settings, sweeps_per_beta=o.sweeps_per_beta
            )
            start = None
            if rows is not None:  # reverse chains from training rows: they cover the modes the data cover
                pick = torch.randint(0, rows.shape[0], (chains,), generator=g, device=g.device)
                start = path.state_from_data(rows[pick])
            hi = reverse_kernel.reverse_ais(
                path, betas, chains, g, n_bootstrap=0, settings=settings, sweeps_per_beta=o.sweeps_per_beta, start=start
            )
            ends = {"log_z": (_ais_log_z_end(lo), _reverse_end(hi, "log_z", "reverse-ais", from_rows=rows is not None))}
            spread = {"ais": spread_p_value(lo.log_weights), "reverse-ais": spread_p_value(hi.log_weights)}
            return Round(K, ends, spread, lo.total_sweeps + hi.total_sweeps, time.perf_counter() - t0, betas, lo, hi)

        def cost(K: int) -> int:
            return (K - 1 + (K if rows is not None else 2 * K)) * o.sweeps_per_beta * chains

        return Plan("log_z", "ais", "reverse-ais", run, cost)

    n_rows = data.shape[0] if o.n_examples is None else min(o.n_examples, data.shape[0])
    heat = 2 if ctx.family.name == "dbm" else 1

    def run(K: int) -> Round:
        betas = ctx.betas(path, K=K)
        t0 = time.perf_counter()
        hi = ais_kernel.ais(
            path,
            betas,
            chains,
            g,
            log_f_data=log_f,
            log_f_stderr=log_f_se,
            n_bootstrap=0,
            settings=settings,
            sweeps_per_beta=o.sweeps_per_beta,
        )
        lo = raise_kernel.raise_estimate(
            path,
            data,
            betas,
            chains,
            g,
            log_f_all=log_f,
            n_examples=o.n_examples,
            subsample_seed=o.seed,
            settings=settings,
            sweeps_per_beta=o.sweeps_per_beta,
        )
        ends = {
            "mean_log_likelihood": (_raise_ll_end(lo), _implied_ll_end(hi, exact_log_f)),
            "log_z": (_ais_log_z_end(hi), _implied_log_z_end(lo)),
        }
        spread = {"raise": spread_p_value(lo.log_weights), "ais": spread_p_value(hi.log_weights)}
        return Round(K, ends, spread, lo.total_sweeps + hi.total_sweeps, time.perf_counter() - t0, betas, lo, hi)

    def cost(K: int) -> int:
        return (K - 1 + heat * K * n_rows) * o.sweeps_per_beta * chains

    return Plan("mean_log_likelihood", "raise", "ais", run, cost)


def _analysis_plan(ctx) -> Plan:
    from . import hais as hais_mod

    o, data, g = ctx.options, ctx.data, ctx.generator
    kernel = "hais"
    kw = dict(kernel=kernel, step_size=o.step_size, gamma=o.gamma, mh_sigma=o.mh_sigma)
    settings = {**ctx.settings("model_family", "model_kind", "schedule"), **ctx.schedule_settings()}

    def betas_at(K):
        return hais_mod.schedule(ctx, kernel=kernel, K=K)

    def forward(K, betas):
        path = hais_mod.analysis_path(ctx.model, proposal_scale=o.proposal_scale, **kw)
        res = ais_kernel.ais(
            path,
            betas,
            o.chains,
            g,
            n_bootstrap=0,
            settings={**settings, **path.settings()},
            sweeps_per_beta=o.sweeps_per_beta,
        )
        res.estimator = "hais"
        return res

    if data is None:

        def run(K: int) -> Round:
            betas = betas_at(K)
            t0 = time.perf_counter()
            lo = forward(K, betas)
            path = hais_mod.analysis_path(ctx.model, proposal_scale=o.proposal_scale, **kw)
            hi = reverse_kernel.reverse_ais(
                path, betas, o.chains, g, n_bootstrap=0, settings=settings, sweeps_per_beta=o.sweeps_per_beta
            )
            ends = {"log_z": (_ais_log_z_end(lo, "hais"), _reverse_end(hi, "log_z", "reverse-hais"))}
            spread = {"hais": spread_p_value(lo.log_weights), "reverse-hais": spread_p_value(hi.log_weights)}
            return Round(K, ends, spread, lo.total_sweeps + hi.total_sweeps, time.perf_counter() - t0, betas, lo, hi)

        return Plan("log_z", "hais", "reverse-hais", run, lambda K: (3 * K - 1) * o.sweeps_per_beta * o.chains)

    from . import raise_hmc

    neg_e = -ctx.model.energy(data).double()
    n = data.shape[0]

    def run(K: int) -> Round:
        betas = betas_at(K)
        t0 = time.perf_counter()
        hi = forward(K, betas)
        ais_kernel.attach_log_likelihood(hi, neg_e)
        lo = raise_hmc.raise_hmc(
            ctx.model,
            betas,
            o.chains,
            g,
            data=data,
            kernel=kernel,
            step_size=o.step_size,
            gamma=o.gamma,
            mh_sigma=o.mh_sigma,
            proposal_scale=o.proposal_scale,
            sweeps_per_beta=o.sweeps_per_beta,
            settings=settings,
            n_bootstrap=0,
        )
        ends = {
            "mean_log_likelihood": (_raise_ll_end(lo, "raise-hmc"), _implied_ll_end(hi, True, "hais")),
            "log_z": (_ais_log_z_end(hi, "hais"), _implied_log_z_end(lo, "raise-hmc")),
        }
        spread = {"raise-hmc": spread_p_value(lo.log_weights), "hais": spread_p_value(hi.log_weights)}
        return Round(K, ends, spread, lo.total_sweeps + hi.total_sweeps, time.perf_counter() - t0, betas, lo, hi)

    return Plan(
        "mean_log_likelihood", "raise-hmc", "hais", run, lambda K: (K - 1 + K * n) * o.sweeps_per_beta * o.chains
    )


def _generative_plan(ctx) -> Plan:
    from . import hais as hais_mod
    from . import raise_hmc

    o, g = ctx.options, ctx.generator
    data = ctx.require_data()
    n = data.shape[0]
    settings = {**ctx.settings("model_family", "model_kind", "schedule"), **ctx.schedule_settings()}
    kernel = "hais"

    def run(K: int) -> Round:
        betas = hais_mod.schedule(ctx, kernel=kernel, K=K)
        t0 = time.perf_counter()
        hi = raise_hmc.reverse_hais(
            ctx.model,
            betas,
            o.chains,
            g,
            data=data,
            kernel=kernel,
            step_size=o.step_size,
            gamma=o.gamma,
            mh_sigma=o.mh_sigma,
            sweeps_per_beta=o.sweeps_per_beta,
            settings=settings,
            n_bootstrap=0,
        )
        fwd = hi.extra["forward_mean_log_likelihood"], hi.extra["forward_mean_log_likelihood_stderr"]
        lower = End(
            "hais",
            float(fwd[0]),
            float(fwd[1]),
            True,
            "p",
            f"guaranteed: stochastic lower bound of the mean log p(x) (HAIS over the latent from the prior; "
            f"a mean over {n} points)",
            n_independent=n,
        )
        ends = {"mean_log_likelihood": (lower, _reverse_end(hi, "mean_log_likelihood", "reverse-hais"))}
        spread = {"reverse-hais": spread_p_value(hi.log_weights)}
        return Round(K, ends, spread, hi.total_sweeps, time.perf_counter() - t0, betas, hi, hi)

    return Plan("mean_log_likelihood", "hais", "reverse-hais", run, lambda K: 2 * K * o.sweeps_per_beta * o.chains * n)


def plan(ctx) -> Plan:
    """The pair of estimators and the stopping rule's quantity for this model and data; a one-line
    error for a model kind without an upper-bound estimator."""
    kind = ctx.family.kind
    if kind in registry.GIBBS_KINDS:
        return _gibbs_plan(ctx)
    if kind == "analysis":
        return _analysis_plan(ctx)
    if kind == "generative":
        if ctx.data is None:
            raise ValueError(
                "sandwich on a generative model brackets the mean test log-likelihood: give test data "
                "(--data); its log Z is 0 (the model is normalised)"
            )
        return _generative_plan(ctx)
    raise ValueError(f"sandwich has no upper-bound estimator for a {kind} model ({ctx.family.name})")


# --------------------------------------------------------------------------- the loop
def peak_bytes(ctx) -> tuple[int, str]:
    """The context's memory hook: with test data of a Gibbs or analysis model, RAISE's chains per test
    example; else the chains of AIS (a generative model's: per test point)."""
    if ctx.data is not None and int(ctx.data.shape[0]) and ctx.family.kind != "generative":
        return per_example_bytes(ctx)
    return chain_bytes(ctx)


def check(ctx) -> None:
    """Refuse, before any work, what the sandwich cannot do: a schedule of fixed length (it doubles K),
    a generative model without data, a model kind without an upper-bound estimator."""
    o = ctx.options
    if o.schedule not in DOUBLING_SCHEDULES:
        raise ValueError(
            f"sandwich doubles K, which a fixed schedule ({o.schedule}) cannot do; use one of {DOUBLING_SCHEDULES}"
        )
    kind = ctx.family.kind
    if kind == "generative" and ctx.data is None:
        raise ValueError(
            "sandwich on a generative model brackets the mean test log-likelihood: give test data "
            "(--data); its log Z is 0 (the model is normalised)"
        )
    if kind not in registry.GIBBS_KINDS + ("analysis", "generative"):
        raise ValueError(f"sandwich has no upper-bound estimator for a {kind} model ({ctx.family.name})")
    if o.chains < 2:
        raise ValueError(f"sandwich needs chains >= 2 (standard errors of both ends), got {o.chains}")


def _k_needed(history: list[dict], target: float) -> int | None:
    """The K at which the widths seen (log-log linear in K over the last three rounds) reach ``target``;
    ``None`` when fewer than two positive widths or they do not shrink."""
    pts = [(h["K"], h["width"]) for h in history[-3:] if h["width"] is not None and h["width"] > 0]
    if len(pts) < 2:
        return None
    k, w = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    slope = float(np.polyfit(k, w, 1)[0])
    if not slope < -0.05:
        return None
    k_last, w_last = pts[-1]
    return int(math.ceil(k_last * (target / w_last) ** (1.0 / slope)))


def _noise_width(r: Round, quantity: str, z: float) -> tuple[float, float, float]:
    """``(width, lower, upper)`` of the ends widened by ``z`` standard errors each."""
    lo, hi = r.ends[quantity]
    a, b = widened(lo, -1.0, z), widened(hi, +1.0, z)
    return b - a, a, b


def _unstable(r: Round, prev: Round | None, quantity: str, z: float) -> str | None:
    """Why the approximate ends of ``r`` cannot be trusted yet: none seen at half the K (the first round),
    or one moved from there by more than ``z`` combined standard errors (a bias still shrinking with K).
    Guaranteed ends may move (towards the truth) without harm."""
    approx = [i for i, e in enumerate(r.ends[quantity]) if not e.guaranteed]
    if not approx:
        return None
    if prev is None:
        return "an approximate end is only trusted once it agrees with its value at half the K"
    for i in approx:
        e, f = r.ends[quantity][i], prev.ends[quantity][i]
        se = math.hypot(e.stderr, f.stderr)
        if not abs(e.value - f.value) <= z * se:
            return (
                f"the approximate {('lower', 'upper')[i]} end ({e.estimator}) moved by {e.value - f.value:.3g} nats "
                f"from K = {prev.K} (more than {z:.2f} combined standard errors, {z * se:.2g}): its bias is still "
                "shrinking"
            )
    return None


def _verdict(r: Round, quantity: str, target: float, z: float, prev: Round | None = None) -> tuple[bool, str]:
    width, a, b = _noise_width(r, quantity, z)
    bad = {k: p for k, p in r.spread.items() if p is not None and p < SPREAD_ALPHA}
    if not math.isfinite(width):
        return False, "an end or its standard error is not finite"
    if width < 0:
        return False, (
            f"the ends cross even widened by their noise ({a:.4g} > {b:.4g}): an approximate end is wrong, "
            "or the chains have not mixed"
        )
    if bad:
        return False, (
            "groups of chains disagree beyond their standard errors ("
            + ", ".join(f"{k}: p = {p:.2g}" for k, p in bad.items())
            + "): a mode some chains miss, or heavy-tailed weights"
        )
    if width > target:
        return False, f"width {width:.3g} nats (with the ends' noise) > target {target:g}"
    why = _unstable(r, prev, quantity, z)
    if why:
        return False, f"width {width:.3g} nats (with the ends' noise) <= target {target:g}, but {why}"
    return True, f"width {width:.3g} nats (with the ends' noise) <= target {target:g}"


def looks(p: Plan, K: int, max_sweeps: int) -> int:
    """How many rounds (doublings of K from ``K``) fit in ``max_sweeps``: the looks the stopping rule
    may take, over which the noise allowance is spread (:func:`~logzbench.estimators.bracket.noise_z`)."""
    n, spent = 0, 0
    while spent + p.cost(K) <= max_sweeps and n < 64:
        spent += p.cost(K)
        n, K = n + 1, 2 * K
    return max(n, 1)


def estimate(ctx) -> EstimateResult:
    """Registry entry ``sandwich``: double K until the bracket is ``target_width`` wide (see the module
    docstring), within ``max_sweeps``."""
    check(ctx)
    o = ctx.options
    p = plan(ctx)
    K = int(o.K) if o.K is not None else START_K
    first = p.cost(K)
    if first > o.max_sweeps:
        raise ValueError(
            f"max_sweeps = {o.max_sweeps} is less than the first round of the sandwich at K = {K} "
            f"({first} sweeps x chains with {o.chains} chains): raise max_sweeps or lower K or chains"
        )
    n_looks = looks(p, K, o.max_sweeps)
    z = noise_z(o.confidence, n_looks)
    history: list[dict] = []
    rounds: list[Round] = []
    spent = 0
    t0 = time.perf_counter()
    reached, reason = False, ""
    while True:
        r = p.run(K)
        if not rounds and ctx.pilot is not None:
            spent += int(ctx.pilot.sweeps)
        rounds.append(r)
        spent += int(r.sweeps)
        lo, hi = r.ends[p.quantity]
        entry: dict[str, Any] = {
            "K": K,
            "total_sweeps": spent,
            "seconds": r.seconds,
            "width": _noise_width(r, p.quantity, z)[0],
        }
        for q in ("log_z", "mean_log_likelihood"):
            if q in r.ends:
                _, a, b = _noise_width(r, q, z)
                entry.update(
                    {
                        f"{q}_lower": a,
                        f"{q}_upper": b,
                        f"{q}_lower_estimate": r.ends[q][0].value,
                        f"{q}_upper_estimate": r.ends[q][1].value,
                    }
                )
            else:
                entry.update({f"{q}_lower": None, f"{q}_upper": None})
        entry["spread_p_values"] = dict(r.spread)
        history.append(entry)
        reached, reason = _verdict(r, p.quantity, o.target_width, z, rounds[-2] if len(rounds) > 1 else None)
        if reached:
            break
        nxt = spent + p.cost(2 * K)
        if nxt > o.max_sweeps:
            reason += (
                f"; stopped: the next round (K = {2 * K}, about {p.cost(2 * K)} sweeps x chains) would bring the "
                f"total to {nxt} > max_sweeps = {o.max_sweeps}"
            )
            break
        K *= 2
    last = rounds[-1]
    k_needed = None if reached else _k_needed(history, o.target_width)
    if not reached:
        reason = (
            "width not reached: "
            + reason
            + (
                f"; the widths seen extrapolate to K of about {k_needed}"
                if k_needed
                else "; the widths seen give no extrapolation"
            )
        )
    bracket: dict[str, Any] = {}
    for q, (lower, upper) in last.ends.items():
        bracket.update(make_bracket(q, lower, upper, o.confidence, looks=n_looks))
    bracket.update(
        quantity=p.quantity,
        target_width=float(o.target_width),
        width=float(history[-1]["width"]),
        width_reached=bool(reached),
        K=int(K),
        total_sweeps=int(spent),
        K_needed=k_needed,
        reason=reason,
        max_sweeps=int(o.max_sweeps),
        looks=int(n_looks),
        history=history,
    )
    return _result(ctx, p, last, bracket, spent, time.perf_counter() - t0)


def _result(ctx, p: Plan, last: Round, bracket: dict, spent: int, seconds: float) -> EstimateResult:
    o = ctx.options
    mid = {}
    for q in ("log_z", "mean_log_likelihood"):
        if f"{q}_lower" in bracket:
            lo, hi = bracket[f"{q}_lower"], bracket[f"{q}_upper"]
            se_lo, se_hi = bracket[f"{q}_lower_stderr"], bracket[f"{q}_upper_stderr"]
            mid[q] = (0.5 * (lo + hi), 0.5 * math.hypot(se_lo, se_hi), (lo, hi))  # midpoint: approximate
    low_res, up_res = last.lower_result, last.upper_result
    res = EstimateResult(
        estimator="sandwich",
        n_chains=o.chains,
        seconds=seconds,
        n_sweeps=int(low_res.n_sweeps),
        total_sweeps=spent,
        ess=float(low_res.ess),
        khat=float(low_res.khat),
        settings={
            **ctx.settings("init", "schedule"),
            **ctx.schedule_settings(),
            "K": int(last.K),
            "chains": o.chains,
            "target_width": float(o.target_width),
            "max_sweeps": int(o.max_sweeps),
            "confidence": float(o.confidence),
            "lower_estimator": p.lower_name,
            "upper_estimator": p.upper_name,
            "model_family": ctx.model.family,
        },
        log_weights=np.asarray(low_res.log_weights) if low_res.log_weights is not None else None,
        extra={"bracket": bracket, "upper_ess": float(up_res.ess), "upper_khat": float(up_res.khat)},
    )
    if "log_z" in mid:
        res.log_z, res.log_z_stderr, res.log_z_ci = mid["log_z"]
    if "mean_log_likelihood" in mid:
        res.mean_log_likelihood, res.mean_log_likelihood_stderr, res.mean_log_likelihood_ci = mid["mean_log_likelihood"]
    if p.quantity == "mean_log_likelihood" and low_res.per_example_log_likelihood is not None:
        res.per_example_log_likelihood = np.asarray(low_res.per_example_log_likelihood)
    if ctx.options.n_examples is not None and ctx.data is not None:
        res.settings["n_examples"] = int(min(ctx.options.n_examples, ctx.data.shape[0]))
    if ctx.family.kind in registry.GIBBS_KINDS:
        ctx.finish(res, attach=False)
    else:
        ctx.record_schedule(res)
    res.total_sweeps = spent  # the pilot is already counted (finish adds it to a single run's total)
    return res
