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
implies above (approximate: an upper bound only where the test rows are model samples; its standard error
is the spread of the per-row values over the rows, :func:`~logzbench.estimators.raise_.implied_log_z_stderr`).

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
bracket selects rounds whose ends happen to be close, and the allowance covers that.  Where the raw
estimates cross (the lower end's above the upper end's), an end is wrong and nothing says which: the
reported bracket is the span of both ends' intervals, ``<q>_crossed`` says so and ``<q>_crossed_by`` by
how much (:func:`~logzbench.estimators.bracket.span`).

Stopping rule: the run starts at ``K`` (default :data:`START_K`) and doubles it until the raw estimates
do not cross (by any amount), the widened ends are within ``target_width`` nats, each end's ``GROUPS``
groups of chains agree within their standard errors (Cochran's Q, :func:`spread_p_value`: the
between-seed spread test, run inside one run; it catches a mode that some groups miss), and each
approximate end agrees with its value at half the K (its bias no longer shrinking visibly) -- or until
the next round would spend more than ``max_sweeps`` (Gibbs sweeps times chains, as ``total_sweeps``
counts them, the adaptive pilot's included), or would end past ``time_budget`` seconds of the run
(default 600: its time estimated as the last round's times the ratio of their costs, about 2; the first
round always runs, so a run ends within the budget unless its first round alone exceeds it).  When the
width is not reached the result says so, why, what stopped it (``stopped_by``: ``max_sweeps`` or
``time_budget``), how far it got (the K, sweeps and seconds), and the K that the widths seen
extrapolate to (``K_needed``).  A time budget makes the result depend on the machine's speed where it
binds (the same seed gives the same bracket only where ``stopped_by`` is not ``time_budget``).

Progress: once the run has taken more than :data:`PROGRESS_AFTER` seconds (or with ``progress``), each
round writes one line to standard error -- K, the bracket so far and its width, the seconds and sweeps
spent -- never to standard output, where the command line writes its JSON.

This module is the loop and the stopping rule; the pairs per model kind, their ends and the spread
test are in :mod:`logzbench.estimators.sandwich_plans`.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from typing import Any

import numpy as np

from .. import registry
from ..options import declared
from ..schedules import DOUBLING_SCHEDULES, TUNED, kind_of
from .bracket import Span, make_bracket, noise_z, span
from .context import annealing_sweeps, chain_bytes, per_example_bytes, test_examples
from .result import EstimateResult
from .sandwich_plans import GROUPS, Plan, Round, plan, spread_p_value

__all__ = ["GROUPS", "START_K", "SPREAD_ALPHA", "Round", "plan", "spread_p_value", "estimate"]

#: its reverse chain runs the path's transitions backwards: a non-reversible one is refused
#: (:func:`logzbench.estimators.transition.check_reversible`)
NEEDS_REVERSIBLE = True

#: K of the first round when ``K`` is not given
START_K = 100
#: the spread test's level: groups disagreeing at a smaller p-value keep the width from counting as reached
SPREAD_ALPHA = 0.01
#: seconds after which each round writes a progress line to standard error (always with ``progress``)
PROGRESS_AFTER = 5.0


# --------------------------------------------------------------------------- the loop
def peak_bytes(ctx) -> tuple[int, str]:
    """The context's memory hook: with test data of a Gibbs or analysis model, RAISE's chains per test
    example; else the chains of AIS (a generative model's: per test point)."""
    if ctx.data is not None and int(ctx.data.shape[0]) and ctx.family.kind != "generative":
        return per_example_bytes(ctx)
    return chain_bytes(ctx)


def planned_sweeps(ctx) -> tuple[list, str]:
    """The context's time hook (:func:`~logzbench.estimators.context.planned_sweeps`): the first round at
    ``K`` (default :data:`START_K`), both ends -- the least the run costs (later rounds double K within
    ``max_sweeps``).  Without data: a forward run and a reverse one (from training rows: one pass; from the
    forward chains' states: two); with data: the forward run and one batch of ``chains`` chains per test row
    (RAISE's count, its heating phase included), a generative model's forward and reverse HAIS per point."""
    from . import raise_

    kind, o = ctx.family.kind, ctx.options
    if ctx.data is None:
        from_rows = kind in registry.GIBBS_KINDS and ctx.train_data is not None
        batches, what = annealing_sweeps(ctx, passes=2 if from_rows else 3)
    elif kind == "generative":
        n = max(1, test_examples(ctx))
        batches, what = annealing_sweeps(ctx, o.chains * n, 2)
        what += f" (chains x test points = {o.chains} x {n})"
    else:
        forward, w_forward = annealing_sweeps(ctx)
        if kind in registry.GIBBS_KINDS:
            rows, w_rows = raise_.planned_sweeps(ctx)
        else:
            n = max(1, test_examples(ctx))
            rows, w_rows = annealing_sweeps(ctx, o.chains * n)
            w_rows += f" (chains x test examples = {o.chains} x {n})"
        batches, what = forward + rows, f"{w_forward} and {w_rows}"
    return batches, f"its first round: {what}"


def check(ctx) -> None:
    """Refuse, before any work, what the sandwich cannot do: a schedule of fixed length (it doubles K), the
    tuned schedule (tuned for one K; its pilot rounds would not be counted in the sandwich's budget),
    a generative model without data, a model kind without an upper-bound estimator."""
    o = ctx.options
    if o.schedule == TUNED:
        raise ValueError(
            "sandwich doubles K itself, and the tuned schedule's pilot rounds are tuned for one K: use "
            f"--schedule {' / '.join(DOUBLING_SCHEDULES)} with the sandwich"
        )
    if not kind_of(o.schedule).doubles:
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


def _span(r: Round, quantity: str, z: float) -> Span:
    """The round's reported ends of ``quantity``: widened by ``z`` standard errors each, the span of both
    where the raw estimates cross (:func:`~logzbench.estimators.bracket.span`)."""
    return span(*r.ends[quantity], z)


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
    """``(reached, why)`` of one round: reached only where both ends are finite, their raw estimates do
    not cross, the groups of chains agree, the width is at most ``target`` and the approximate ends are
    stable (:func:`_unstable`).  Crossed raw ends are never reached, however little they cross: the
    crossing says an end is wrong, and a narrow bracket between widened crossed ends would hold the
    truth by luck."""
    s = _span(r, quantity, z)
    width = s.width
    bad = {k: p for k, p in r.spread.items() if p is not None and p < SPREAD_ALPHA}
    if not (math.isfinite(width) and math.isfinite(s.crossed_by)):
        return False, "an end or its standard error is not finite"
    if s.crossed:
        lo, hi = r.ends[quantity]
        se = math.hypot(lo.stderr, hi.stderr)
        ses = f", {s.crossed_by / se:.2g} combined standard errors" if se > 0 else ""
        return False, (
            f"the raw ends cross by {s.crossed_by:.3g} nats (lower {lo.estimator} {lo.value:.4g} > upper "
            f"{hi.estimator} {hi.value:.4g}{ses}): an end is wrong (an approximate one, or chains that have "
            "not mixed); the bracket is the span of both ends"
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


def time_budget(o) -> float:
    """The run's time budget in seconds (``time_budget``; ``None``: the declared default)."""
    return float(o.time_budget) if o.time_budget is not None else float(declared()["time_budget"].default)


def progress_line(entry: dict, quantity: str, target: float, elapsed: float, max_sweeps: int) -> str:
    """One round in words for standard error: K, the bracket on ``quantity`` and its width against the target,
    the seconds and the sweeps x chains spent (of ``max_sweeps``)."""
    what = "log Z" if quantity == "log_z" else "mean log-likelihood"
    lo, hi, w = entry.get(f"{quantity}_lower"), entry.get(f"{quantity}_upper"), entry["width"]
    crossed = " (raw ends cross)" if entry.get(f"{quantity}_crossed") else ""
    return (
        f"sandwich: K = {entry['K']}: {what} in [{lo:.6g}, {hi:.6g}], width {w:.3g} nats{crossed} (target "
        f"{target:g}); {elapsed:.1f} s, {entry['total_sweeps']:.3g} of {max_sweeps:.3g} sweeps x chains"
    )


class Progress:
    """The run's progress lines on standard error: each round's start (at once where the run has taken more
    than :data:`PROGRESS_AFTER` seconds, else from a timer that fires then if the round is still running)
    and its end; with ``forced`` (the ``progress`` option) every line.  Never standard output."""

    def __init__(self, forced: bool, t0: float):
        self.on, self.t0, self._timer = bool(forced), t0, None

    def _print(self, text: str) -> None:
        self.on = True
        print(text, file=sys.stderr, flush=True)

    def _due(self) -> bool:
        return self.on or time.perf_counter() - self.t0 > PROGRESS_AFTER

    def start(self, K: int, cost: int, guess: float | None) -> None:
        """A round at ``K`` of ``cost`` sweeps x chains (about ``guess`` seconds) begins."""
        text = f"sandwich: K = {K}: running a round of {cost:.3g} sweeps x chains" + (
            f" (about {guess:.3g} s)" if guess is not None else ""
        )
        if self._due():
            self._print(text)
            return
        wait = PROGRESS_AFTER - (time.perf_counter() - self.t0)
        self._timer = threading.Timer(max(wait, 0.0), lambda: self._print(f"{text}; {PROGRESS_AFTER:g} s so far"))
        self._timer.daemon = True
        self._timer.start()

    def end(self, text: str) -> None:
        """A round ended (``text``: :func:`progress_line`), or the run (its verdict)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._due():
            self._print(text)


def _check_first_round(p: Plan, K: int, o) -> None:
    """Refuse a run whose first round at ``K`` alone would pass ``max_sweeps``."""
    first = p.cost(K)
    if first > o.max_sweeps:
        raise ValueError(
            f"max_sweeps = {o.max_sweeps} is less than the first round of the sandwich at K = {K} "
            f"({first} sweeps x chains with {o.chains} chains): raise max_sweeps or lower K or chains"
        )


def _history_entry(r: Round, quantity: str, z: float, K: int, spent: int) -> dict[str, Any]:
    """One round's row of the history: its K, the sweeps so far, and each quantity's bracket ends (``None``
    for a quantity the plan does not bracket)."""
    entry: dict[str, Any] = {
        "K": K,
        "total_sweeps": spent,
        "seconds": r.seconds,
        "width": _span(r, quantity, z).width,
    }
    for q in ("log_z", "mean_log_likelihood"):
        if q in r.ends:
            s = _span(r, q, z)
            entry.update(
                {
                    f"{q}_lower": s.lower,
                    f"{q}_upper": s.upper,
                    f"{q}_lower_estimate": r.ends[q][0].value,
                    f"{q}_upper_estimate": r.ends[q][1].value,
                    f"{q}_crossed": s.crossed,
                }
            )
        else:
            entry.update({f"{q}_lower": None, f"{q}_upper": None})
    entry["spread_p_values"] = dict(r.spread)
    return entry


def _next_round_refused(
    p: Plan, r: Round, K: int, spent: int, elapsed: float, o, budget: float
) -> tuple[str, str | None, float | None]:
    """Whether the round at ``2 K`` may run: ``(reason, stopped_by, guess)``, with ``stopped_by``
    ``"max_sweeps"`` or ``"time_budget"`` and ``reason`` saying why when it may not (else ``None`` and
    ``""``); ``guess`` is the next round's time, from this one's."""
    nxt = spent + p.cost(2 * K)
    if nxt > o.max_sweeps:
        reason = (
            f"; stopped: the next round (K = {2 * K}, about {p.cost(2 * K)} sweeps x chains) would bring the "
            f"total to {nxt} > max_sweeps = {o.max_sweeps}"
        )
        return reason, "max_sweeps", None
    guess = r.seconds * p.cost(2 * K) / p.cost(K)
    if elapsed + guess > budget:
        reason = (
            f"; stopped at the time budget after {elapsed:.3g} s at K = {K} ({spent} sweeps x chains): the next "
            f"round (K = {2 * K}) would take about {guess:.3g} s more, past time_budget = {budget:g} s"
        )
        return reason, "time_budget", guess
    return "", None, guess


def _not_reached_reason(reason: str, k_needed: int | None) -> str:
    """The reason of a run that stopped short of the width, with where the widths seen extrapolate to."""
    return (
        "width not reached: "
        + reason
        + (
            f"; the widths seen extrapolate to K of about {k_needed}"
            if k_needed
            else "; the widths seen give no extrapolation"
        )
    )


def estimate(ctx) -> EstimateResult:
    """Registry entry ``sandwich``: double K until the bracket is ``target_width`` wide (see the module
    docstring), within ``max_sweeps`` and ``time_budget``; progress on standard error after
    :data:`PROGRESS_AFTER` seconds."""
    check(ctx)
    o = ctx.options
    p = plan(ctx)
    K = int(o.K) if o.K is not None else START_K
    _check_first_round(p, K, o)
    n_looks = looks(p, K, o.max_sweeps)
    z = noise_z(o.confidence, n_looks)
    history: list[dict] = []
    rounds: list[Round] = []
    spent = 0
    budget = time_budget(o)
    t0 = time.perf_counter()
    reached, reason, stopped_by = False, "", None
    progress, guess = Progress(o.progress, t0), None
    while True:
        progress.start(K, p.cost(K), guess)
        r = p.run(K)
        if not rounds and ctx.pilot is not None:
            spent += int(ctx.pilot.sweeps)
        rounds.append(r)
        spent += int(r.sweeps)
        entry = _history_entry(r, p.quantity, z, K, spent)
        elapsed = time.perf_counter() - t0
        entry["elapsed_seconds"] = elapsed
        history.append(entry)
        progress.end(progress_line(entry, p.quantity, o.target_width, elapsed, o.max_sweeps))
        reached, reason = _verdict(r, p.quantity, o.target_width, z, rounds[-2] if len(rounds) > 1 else None)
        if reached:
            break
        refusal, stopped_by, guess = _next_round_refused(p, r, K, spent, elapsed, o, budget)
        if stopped_by is not None:
            reason += refusal
            break
        K *= 2
    progress.end(f"sandwich: {'reached' if reached else 'not reached'} at K = {K}: {reason}")
    last = rounds[-1]
    k_needed = None if reached else _k_needed(history, o.target_width)
    if not reached:
        reason = _not_reached_reason(reason, k_needed)
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
        stopped_by=stopped_by,
        seconds=float(time.perf_counter() - t0),
        time_budget=budget if math.isfinite(budget) else None,
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
            **ctx.reference_settings(),
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
