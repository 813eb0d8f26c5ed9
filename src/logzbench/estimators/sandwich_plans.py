"""What the sandwich (:mod:`logzbench.estimators.sandwich`) runs at one K, per model kind: the pair of
estimators, the ends they give (value, standard error, and what each guarantees), and the spread test
across groups of chains.

:func:`plan` picks the pair for a model and its data (the table in the sandwich's module docstring)
and returns a :class:`Plan`, whose ``run(K)`` gives one :class:`Round`; the sandwich's loop doubles K
and decides when to stop, knowing nothing of which estimators ran.
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple

import numpy as np
import torch

from .. import registry
from ..stats import log_mean_stderr
from . import ais as ais_kernel
from . import raise_ as raise_kernel
from . import reverse_ais as reverse_kernel
from .bracket import End
from .result import EstimateResult

__all__ = ["GROUPS", "Plan", "Round", "plan", "spread_p_value"]

#: groups of chains whose estimates the spread test compares
GROUPS = 4


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


def _ll_end(res: EstimateResult, name: str, guaranteed: bool, of, words: str, **kw) -> End:
    """The end of a bracket of the mean test log-likelihood at ``res``'s estimate and standard error."""
    return End(name, res.mean_log_likelihood, res.mean_log_likelihood_stderr, guaranteed, of, words, **kw)


def _implied_ll_end(res: EstimateResult, exact_log_f: bool, name: str = "ais") -> End:
    if exact_log_f:
        return _ll_end(
            res,
            name,
            True,
            "p",
            "guaranteed: stochastic upper bound of the mean test log-likelihood of p (log f(v) exact, "
            "log Z-hat a stochastic lower bound)",
        )
    return _ll_end(
        res,
        name,
        False,
        None,
        "approximate: log f(v) is importance-sampled (itself a stochastic lower bound), so the "
        "log-likelihood AIS implies is no bound",
    )


def _raise_ll_end(res: EstimateResult, name: str = "raise") -> End:
    n, n_all = int(res.settings.get("n_examples", 0)), int(res.settings.get("n_test", 0))
    if n_all and n < n_all:
        return _ll_end(
            res,
            name,
            False,
            None,
            f"approximate: a control-variate mean over {n} of {n_all} test rows (lower bounds p_ann "
            "per row, but the subsample mean is no bound)",
        )
    return _ll_end(
        res,
        name,
        True,
        "p_ann",
        f"guaranteed of p_ann, not p: stochastic lower bound of the mean test log-likelihood under the "
        f"annealing model p_ann (RAISE; p_ann approaches p as K grows), a mean over {n} rows",
        n_independent=max(n, 1),
    )


def _implied_log_z_end(res: EstimateResult, name: str = "raise") -> End:
    """The log Z that RAISE's mean implies; its standard error is the spread of the per-row values over the
    rows (:func:`~logzbench.estimators.raise_.implied_log_z_stderr`), not RAISE's Monte Carlo error alone:
    the annealing model's error differs from row to row, and a few rows sample it."""
    lz, se = res.extra.get("implied_log_z"), res.extra.get("implied_log_z_stderr")
    return End(
        name,
        float(lz) if lz is not None else float("nan"),
        float(se) if se is not None else float("nan"),
        False,
        None,
        "approximate: the log Z the lower end's mean implies (an upper bound of log Z only "
        "where the test rows are samples of the model)",
    )


def _reverse_end(res: EstimateResult, quantity: str, name: str, from_rows: bool = False) -> End:
    value = res.log_z if quantity == "log_z" else res.mean_log_likelihood
    se = res.log_z_stderr if quantity == "log_z" else res.mean_log_likelihood_stderr
    if from_rows:
        words = (
            "approximate: reverse AIS from training rows (an upper bound of log Z only where they are samples of "
            "the model)"
        )
    else:
        what = "log Z" if quantity == "log_z" else "the mean test log-likelihood"
        words = (
            f"approximate: upper estimate of {what} from a reverse chain started at a forward chain's states, "
            "not exact samples (an upper bound only from exact samples; it can miss what the forward chain "
            "missed)"
        )
    return End(name, value, se, False, None, words)


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


def _hmc_options(ctx) -> tuple[dict, dict]:
    """What the plans of a continuous model pass every run: the HAIS kernel and its step options, and the
    settings they record."""
    from .hais import kernel_options

    kw = dict(kernel="hais", **kernel_options(ctx.options))
    return kw, ctx.continuous_settings()


def _per_row(ctx, kw: dict, settings: dict) -> dict:
    """The keywords of a round's raise-hmc or reverse-hais run: the test rows, the kernel's options, the
    settings, and no bootstrap (the bracket has its own interval)."""
    o = ctx.options
    return dict(data=ctx.data, sweeps_per_beta=o.sweeps_per_beta, settings=settings, n_bootstrap=0, **kw)


def _analysis_plan(ctx) -> Plan:
    from . import hais as hais_mod

    o, data, g = ctx.options, ctx.data, ctx.generator
    kw, settings = _hmc_options(ctx)

    def betas_at(K):
        return hais_mod.schedule(ctx, kernel=kw["kernel"], K=K)

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
            ctx.model, betas, o.chains, g, proposal_scale=o.proposal_scale, **_per_row(ctx, kw, settings)
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
    kw, settings = _hmc_options(ctx)

    def run(K: int) -> Round:
        betas = hais_mod.schedule(ctx, kernel=kw["kernel"], K=K)
        t0 = time.perf_counter()
        hi = raise_hmc.reverse_hais(ctx.model, betas, o.chains, g, **_per_row(ctx, kw, settings))
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
