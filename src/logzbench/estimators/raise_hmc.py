"""Reverse annealing on continuous models: RAISE with Hamiltonian transitions (``raise-hmc``) and
reverse HAIS over the latent of a generative model (``reverse-hais``).

``raise-hmc`` (analysis models: products of experts, mcRBM)
    RAISE (Burda et al. 2015, Alg. 2) along :func:`~logzbench.estimators.hais.analysis_path`, from
    ``q = N(0, s^2 I)`` to ``exp(-E(x))``.  For each test row ``x`` and each of ``chains`` chains the
    reverse chain starts at ``x_K = x`` with a *fresh* momentum ``v ~ N(0, I)`` and, for
    ``k = K-1 .. 0``, moves with the kernel at ``beta_{k+1}`` (``sweeps_per_beta`` times) and
    reweights down to ``beta_k``:

        log w = log f_1(x) - log Z_0 + sum_{k=K-1}^{0} [log f_k(x_k) - log f_{k+1}(x_k)],

    ``log f_1(x) = -E(x)``.  ``mean(w)`` is unbiased for ``p_ann(x)``, the density of ``x`` under the
    *annealing model* (the law of the final position of a forward HAIS chain from ``q`` with the same
    kernels at ``beta_1 .. beta_K``, the last at ``beta_K = 1``), so ``log mean(w)`` is a stochastic
    *lower* bound on ``log p_ann(x)`` -- not on ``log p(x)``: ``p_ann`` approaches ``p`` as ``K``
    grows, and RAISE errs low in practice.
    ``extra["implied_log_z"] = mean(-E(x)) - mean_ll`` is the log Z this mean implies (an
    upper-side estimate), ``extra["implied_log_z_stderr"]`` its standard error over the rows
    (:func:`~logzbench.estimators.raise_.implied_log_z_stderr`).

``reverse-hais`` (generative models: linear-Gaussian, linear-Laplace, bilinear)
    Per test point, forward HAIS over the latent ``a`` along
    :func:`~logzbench.estimators.hais.latent_path` (prior -> posterior ``p(a | x)``), with the
    kernel applied at every ``beta_1 .. beta_K`` (the last at ``beta_K = 1``), gives approximate
    posterior samples; from those the reverse run (fresh momentum, the same steps as above)
    accumulates

        log v = sum_{k=K-1}^{0} [log f_k(a_k) - log f_{k+1}(a_k)].

    From an *exact* posterior start ``E[v] = Z_0 / Z_1 = 1 / p(x)`` (``Z_0`` the prior's
    normaliser, ``Z_1 = Z_0 p(x)``), so ``log p_hat(x) = -log mean(v)`` would be a stochastic
    *upper* bound on ``log p(x)``; here the start is the forward chain's final state, so the
    bound is *approximate* (it holds in the limit where the forward chain reaches the
    posterior; where it has not -- small K, a multimodal posterior such as the bilinear model's --
    the reverse weights are heavy-tailed and the estimate may fall far *below* ``log p(x)``).
    The forward run's weights are the usual HAIS lower-side estimates (``E[w] = p(x)``), reported
    beside it (``extra["forward_mean_log_likelihood"]``).  Cost: ``2 K sweeps_per_beta``
    transitions per chain.  Bidirectional Monte Carlo (:mod:`.bdmc`) starts the reverse run from
    the exact latent of simulated data instead, where the upper bound holds.

Why the HAIS kernel may run in the reverse chain
    RAISE needs, at each ``beta``, the *reversal* ``T~`` of the forward kernel ``T`` with
    respect to ``pi_beta(x) N(v; 0, I)``.  The HAIS kernel is ``T = R M_beta``: first ``M_beta``
    (one leapfrog step proposing ``(x', -v')`` -- a volume-preserving involution -- accepted by
    Metropolis), then ``R``, the partial momentum refresh ``v <- -sqrt(1 - gamma) v + sqrt(gamma) r``.
    Each piece is reversible on its own: ``M_beta`` is Metropolis with a deterministic involutive
    proposal, and ``R(v' | v) = N(v'; -sqrt(1 - gamma) v, gamma I)`` has a symmetric joint
    ``N(v) R(v' | v)`` (covariance ``[[1, -rho], [-rho, 1]]``).  So the reversal of ``R M_beta`` is
    ``M_beta R``: refresh first, then leapfrog.  The reverse run needs ``R M_K R M_{K-1} .. R M_1``
    (read left to right, each ``M`` followed by its reweighting); this module applies the forward
    kernel, ``M_K R M_{K-1} R .. M_1 R``.  ``R`` changes neither the position nor the weights (which
    read positions only) and does not depend on ``beta``, so the two sequences differ only by a
    leading ``R`` (applied to the *fresh* starting momentum: ``R`` maps an ``N(0, I)`` momentum
    independent of ``x`` to another one, so it changes nothing in distribution) and a trailing
    ``R`` (after the last reweighting: irrelevant).  Hence the weights have exactly the
    distribution RAISE prescribes; with ``sweeps_per_beta = s`` the same argument applies to
    ``(R M)^s``.  The fresh momentum also makes the estimate one of the *position* marginal: with
    ``v_K ~ N(0, I)``, ``E[w | x] = int N(v) p_ann(x, v) / N(v) dv = p_ann(x)``.  (A zero start
    momentum, :meth:`HamiltonianPath.state_from_data`'s, is not a sample of the extended target:
    ``tests/test_continuous_bounds.py`` checks that the weights integrate to one over ``x`` with the
    fresh momentum and miss one by many standard errors with ``v = 0``.)
    The ``"hmc"`` kernel (``gamma = 1``) is the special case ``R`` = full refresh, and ``"mh"``
    (random walk, momentum untouched) is reversible itself.

All test rows x chains are batched into one set of chains, row ``p * chains + c`` being chain
``c`` of row ``p`` (as :func:`~logzbench.estimators.hais.latent_path`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ..models.hamiltonian import HamiltonianPath, HMCState
from ..schedules import from_array
from . import ais as ais_kernel
from . import hais as hais_mod
from . import raise_ as raise_kernel
from ._common import timer
from .context import annealing_sweeps, chain_bytes, per_example_bytes, test_examples
from .result import EstimateResult, check_finite, ess_from_log_weights, khat_per_example, log_mean_stderr, rows_result

__all__ = [
    "ESTIMATORS",
    "estimate",
    "forward",
    "per_example_summary",
    "raise_hmc",
    "reverse_hais",
    "with_fresh_momentum",
]

#: registry names of this module
ESTIMATORS = ("raise-hmc", "reverse-hais")

GUARANTEE_RAISE = (
    "stochastic lower bound on log p_ann(x), the annealing model's log-density of each test "
    "row (E[w] = p_ann(x)); not a bound on log p(x), which p_ann approaches as K grows"
)
GUARANTEE_REVERSE = (
    "APPROXIMATE upper bound on log p(x): -log mean(v) is a stochastic upper bound only "
    "when the reverse chain starts from an exact posterior sample; here it starts from "
    "the forward HAIS chain's final state (an approximate posterior sample), so it may "
    "err either way, far below log p(x) where the forward chain has not reached the "
    "posterior (bidirectional Monte Carlo, 'bdmc', has the exact start "
    "on simulated data)"
)


# ----------------------------------------------------------------------------- kernel pieces
def with_fresh_momentum(state: HMCState, generator: torch.Generator) -> HMCState:
    """``state`` with its momentum replaced by a fresh ``N(0, I)`` draw (from ``generator``)."""
    v = torch.randn(state.x.shape, generator=generator, dtype=torch.float64, device=state.x.device)
    return state._replace(v=v)


def forward(
    path: HamiltonianPath,
    betas,
    n_chains: int,
    generator: torch.Generator,
    *,
    sweeps_per_beta: int = 1,
    final_move: bool = False,
    progress: bool = False,
    desc: str = "forward",
) -> tuple[HMCState, torch.Tensor, int]:
    """Forward AIS (:func:`logzbench.estimators.ais.run`) from exact draws of ``p_0``; with ``final_move``
    the final state has also moved at ``beta_K = 1`` (it then starts a reverse run).  Returns ``(state,
    log w, transitions per chain)`` with ``log w`` estimating ``log Z_1 - log Z_0``."""
    st, n = ais_kernel.run(
        path,
        betas,
        int(n_chains),
        generator,
        progress=progress,
        sweeps_per_beta=sweeps_per_beta,
        final_move=final_move,
        desc=desc,
    )
    return st.x, st.log_w - path.log_z0(), n


# ----------------------------------------------------------------------------- summaries
def _chain_bootstrap(log_w: torch.Tensor, n_bootstrap: int, seed: int, sign: float = 1.0) -> tuple[float, float]:
    """Percentile 95 % interval of ``mean_p sign * logmeanexp_c(log_w[p, c])`` with the chains resampled
    within every example (NaN with fewer than 2 chains or no resamples)."""
    n, m = log_w.shape
    if m < 2 or n_bootstrap <= 0:
        return float("nan"), float("nan")
    g = torch.Generator().manual_seed(int(seed) + 1)
    lw = log_w.detach().double().cpu()
    rows = torch.arange(n)[:, None]
    stats = np.empty(int(n_bootstrap))
    for b in range(int(n_bootstrap)):
        cols = torch.randint(0, m, (n, m), generator=g)
        stats[b] = sign * float((torch.logsumexp(lw[rows, cols], dim=1) - math.log(m)).mean())
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return float(lo), float(hi)


def per_example_summary(log_w: torch.Tensor, *, sign: float = 1.0) -> dict[str, Any]:
    """Per-example ``sign * logmeanexp`` over chains of ``log_w`` ``(P, M)``, its delta-method standard
    errors, the mean and its standard error (the examples' errors combined), ESS and k-hat of the
    weights ``exp(log_w)``."""
    ll, se = log_mean_stderr(log_w, dim=1)
    ll_np, se_np = sign * ll.cpu().numpy(), se.cpu().numpy()
    P, M = log_w.shape
    mean_se = float(math.sqrt(float(np.sum(se_np**2)))) / P if M > 1 else float("nan")
    khat, khat_extra = khat_per_example(log_w)
    ess = ess_from_log_weights(log_w, dim=1).cpu().numpy()
    return {
        "per_example": ll_np,
        "per_example_stderr": se_np,
        "mean": float(np.mean(ll_np)),
        "stderr": mean_se,
        "ess": float(ess.mean()),
        "min_ess": float(ess.min()),
        "khat": khat,
        "khat_extra": khat_extra,
    }


def _row_interval(
    log_w: torch.Tensor, summary: dict[str, Any], n_bootstrap: int, generator: torch.Generator, *, sign: float = 1.0
) -> tuple[float, float]:
    """The 95 % interval of a per-row mean: the chain bootstrap's (:func:`_chain_bootstrap`), or the normal
    one from the summary's standard error where the bootstrap gives none."""
    ci = _chain_bootstrap(log_w, n_bootstrap, generator.initial_seed(), sign=sign)
    mean_ll, se = summary["mean"], summary["stderr"]
    if not all(map(math.isfinite, ci)) and math.isfinite(se):
        ci = (mean_ll - 1.96 * se, mean_ll + 1.96 * se)
    return ci


def _row_spread(summary: dict[str, Any], chains: int) -> dict[str, Any]:
    """The ``extra`` of a per-row estimate on how its rows spread: the mean per-row standard error (with more
    than one chain), the rows' standard deviation and their smallest ESS."""
    return {
        "per_example_stderr_mean": float(np.mean(summary["per_example_stderr"])) if chains > 1 else None,
        "per_example_ll_sd": hais_mod.per_example_sd(summary["per_example"]),
        "min_ess": summary["min_ess"],
    }


def _row_result(
    estimator: str,
    log_w: torch.Tensor,
    summary: dict[str, Any],
    ci: tuple[float, float],
    *,
    K: int,
    n_sweeps: int,
    seconds: float,
    settings: dict,
    schedule: np.ndarray,
    extra: dict,
) -> EstimateResult:
    """The result of a per-row estimate from its weights ``(P, M)`` and their :func:`per_example_summary`."""
    P, M = log_w.shape
    return rows_result(
        estimator,
        K=K,
        chains=M,
        rows=P,
        n_sweeps=n_sweeps,
        settings=settings,
        ess=summary["ess"],
        khat=summary["khat"],
        mean_log_likelihood=summary["mean"],
        mean_log_likelihood_stderr=summary["stderr"],
        mean_log_likelihood_ci=ci,
        seconds=seconds,
        log_weights=log_w.cpu().numpy(),
        per_example_log_likelihood=summary["per_example"],
        schedule=schedule,
        extra=extra,
    )


def _kernel_settings(path: HamiltonianPath, sweeps_per_beta: int) -> dict[str, Any]:
    return {**path.settings(), "sweeps_per_beta": int(sweeps_per_beta)}


def _check_kind(model, want: str, estimator: str, other: str) -> None:
    kind = getattr(model, "kind", None)
    if kind != want:
        raise ValueError(
            f"{estimator} is for {want} models; this is a {kind!r} model ({getattr(model, 'family', '?')}): use {other}"
        )


def _check_data(data, estimator: str, what: str) -> torch.Tensor:
    if data is None:
        raise ValueError(f"{estimator} estimates {what} of given test rows: give test data")
    X = torch.as_tensor(data)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"{estimator}: test data must be a non-empty (n, n_dims) array, got shape {tuple(X.shape)}")
    return X.double()


# ----------------------------------------------------------------------------- raise-hmc
def raise_hmc(
    model,
    betas,
    n_chains: int,
    generator: torch.Generator,
    *,
    data: torch.Tensor | None,
    kernel: str = "hais",
    step_size: float = 0.2,
    gamma: float | None = None,
    mh_sigma: float = 0.1,
    proposal_scale: float = 1.0,
    sweeps_per_beta: int = 1,
    n_bootstrap: int = 1000,
    progress: bool = False,
    settings: dict | None = None,
) -> EstimateResult:
    """RAISE with Hamiltonian (or random-walk) transitions on an analysis model (module docstring).

    Parameters
    ----------
    model : analysis model (``energy``, ``n_dims``; ``energy_grad`` optional)
    betas : array-like, shape (K + 1,)
    n_chains : int
        Reverse chains per test row.
    generator : torch.Generator
        The run's only source of randomness.
    data : torch.Tensor, shape (P, M)
        Test rows (required).
    kernel : {"hais", "hmc", "mh"}
    step_size, gamma, mh_sigma, proposal_scale : float
        As :func:`~logzbench.estimators.hais.hais`.
    sweeps_per_beta : int
        Transitions per intermediate distribution.
    n_bootstrap : int
        Resamples of the percentile interval (chains within each row); 0: a normal interval.

    Returns
    -------
    EstimateResult
        ``estimator="raise-hmc"``; ``log_weights`` ``(P, chains)``; ``extra["implied_log_z"]``.
    """
    _check_kind(model, "analysis", "raise-hmc", "reverse-hais (or bdmc on simulated data)")
    X = _check_data(data, "raise-hmc", "the log-likelihood").to(model.device)
    betas = from_array(betas)
    K, M, P, s = len(betas) - 1, int(n_chains), int(X.shape[0]), int(sweeps_per_beta)
    path = hais_mod.analysis_path(
        model, kernel=kernel, step_size=step_size, gamma=gamma, mh_sigma=mh_sigma, proposal_scale=proposal_scale
    )
    neg_e = -model.energy(X).double()
    check_finite(neg_e, "raise-hmc: -E(x) of the test rows")
    with timer(generator.device) as t:
        state = with_fresh_momentum(path.state_from_data(X.repeat_interleave(M, dim=0)), generator)
        log_w = path.log_f(state, 1.0) - path.log_z0()
        state, log_w = raise_kernel.reverse(
            path, state, log_w, betas, generator, sweeps_per_beta=s, progress=progress, desc="RAISE (HMC)"
        )
    log_w = log_w.reshape(P, M)
    check_finite(log_w, "raise-hmc log-weights")
    sm = per_example_summary(log_w)
    return _row_result(
        "raise-hmc",
        log_w,
        sm,
        _row_interval(log_w, sm, n_bootstrap, generator),
        K=K,
        n_sweeps=K * s,
        seconds=t[0],
        settings={"proposal_scale": float(proposal_scale), **_kernel_settings(path, s), **(settings or {})},
        schedule=betas.copy(),
        extra={
            "acceptance_rate": path.acceptance_rate,
            "implied_log_z": float(neg_e.mean()) - sm["mean"],
            "implied_log_z_stderr": raise_kernel.implied_log_z_stderr(neg_e.cpu().numpy(), sm["per_example"]),
            **_row_spread(sm, M),
            "bound": "lower",
            "of": "p_ann",
            "guarantee": GUARANTEE_RAISE,
            **sm["khat_extra"],
        },
    )


# ----------------------------------------------------------------------------- reverse-hais
def reverse_hais(
    model,
    betas,
    n_chains: int,
    generator: torch.Generator,
    *,
    data: torch.Tensor | None,
    kernel: str = "hais",
    step_size: float = 0.2,
    gamma: float | None = None,
    mh_sigma: float = 0.1,
    sweeps_per_beta: int = 1,
    n_bootstrap: int = 1000,
    progress: bool = False,
    settings: dict | None = None,
) -> EstimateResult:
    """Forward HAIS then reverse HAIS over the latent of a generative model, per test row (module
    docstring): the harmonic (reverse) estimate ``-log mean(v)`` is the headline, an APPROXIMATE
    upper bound on ``log p(x)``; the forward run's lower-side estimate comes with it.

    Parameters
    ----------
    model : generative model (``prior_energy``, ``sample_prior``, ``likelihood_energy``, ...)
    betas : array-like, shape (K + 1,)
    n_chains : int
        Chains per test row (each runs forward then reverse).
    generator : torch.Generator
    data : torch.Tensor, shape (P, M)
        Test rows (required).
    kernel, step_size, gamma, mh_sigma, sweeps_per_beta, n_bootstrap
        As :func:`raise_hmc`.

    Returns
    -------
    EstimateResult
        ``estimator="reverse-hais"``; ``log_weights`` the reverse ``log v``, ``(P, chains)``;
        ``extra["forward_mean_log_likelihood"]`` / ``["forward_mean_log_likelihood_stderr"]``.
    """
    _check_kind(model, "generative", "reverse-hais", "raise-hmc")
    X = _check_data(data, "reverse-hais", "log p(x)").to(model.device)
    betas = from_array(betas)
    K, M, P, s = len(betas) - 1, int(n_chains), int(X.shape[0]), int(sweeps_per_beta)
    path = hais_mod.latent_path(model, X, M, kernel=kernel, step_size=step_size, gamma=gamma, mh_sigma=mh_sigma)
    with timer(generator.device) as t:
        state, log_w, n_fwd = forward(
            path,
            betas,
            P * M,
            generator,
            sweeps_per_beta=s,
            final_move=True,
            progress=progress,
            desc="reverse HAIS (forward)",
        )
        acc_fwd = path.acceptance_rate
        n0, a0 = path.n_proposed, path.n_accepted
        state = with_fresh_momentum(state, generator)
        log_v = torch.zeros_like(log_w)
        state, log_v = raise_kernel.reverse(
            path, state, log_v, betas, generator, sweeps_per_beta=s, progress=progress, desc="reverse HAIS (reverse)"
        )
    log_w, log_v = log_w.reshape(P, M), log_v.reshape(P, M)
    check_finite(log_w, "reverse-hais forward log-weights")
    check_finite(log_v, "reverse-hais reverse log-weights")
    fwd = per_example_summary(log_w)
    rev = per_example_summary(log_v, sign=-1.0)
    ci = _row_interval(log_v, rev, n_bootstrap, generator, sign=-1.0)
    acc_rev = (path.n_accepted - a0) / (path.n_proposed - n0) if path.n_proposed > n0 else float("nan")
    return _row_result(
        "reverse-hais",
        log_v,
        rev,
        ci,
        K=K,
        n_sweeps=n_fwd + K * s,  # 2 K sweeps_per_beta
        seconds=t[0],
        settings={**_kernel_settings(path, s), **(settings or {})},
        schedule=betas.copy(),
        extra={
            "aggregation": "harmonic",
            "bound": "upper (approximate)",
            "of": "p",
            "guarantee": GUARANTEE_REVERSE,
            "forward_mean_log_likelihood": fwd["mean"],
            "forward_mean_log_likelihood_stderr": fwd["stderr"],
            "forward_ess": fwd["ess"],
            "forward_khat": fwd["khat"],
            "reverse_minus_forward": rev["mean"] - fwd["mean"],
            "acceptance_rate": path.acceptance_rate,
            "forward_acceptance_rate": acc_fwd,
            "reverse_acceptance_rate": acc_rev,
            **_row_spread(rev, M),
            **rev["khat_extra"],
        },
    )


# ----------------------------------------------------------------------------- registry entries
def peak_bytes(ctx) -> tuple[int, str]:
    """The context's memory hook: raise-hmc runs ``chains`` chains per test example; reverse-hais one
    latent chain per chain and test point."""
    return per_example_bytes(ctx) if ctx.name == "raise-hmc" else chain_bytes(ctx)


def planned_sweeps(ctx) -> tuple[list, str]:
    """The context's time hook (:func:`~logzbench.estimators.context.planned_sweeps`): one batch of
    ``chains`` chains per test point; raise-hmc anneals it once (from the data), reverse-hais twice."""
    n = max(1, test_examples(ctx))
    batches, what = annealing_sweeps(ctx, ctx.options.chains * n, 1 if ctx.name == "raise-hmc" else 2)
    return batches, f"{what} (chains x test examples = {ctx.options.chains} x {n})"


def estimate(ctx) -> EstimateResult:
    """Registry entries ``raise-hmc`` (analysis models) and ``reverse-hais`` (generative models).  The
    schedule comes from :func:`logzbench.estimators.hais.schedule` (for ``schedule="adaptive"`` its pilot
    anneals forward along the same path with the HAIS kernel)."""
    o = ctx.options
    if ctx.name not in ESTIMATORS:
        raise ValueError(f"raise_hmc.estimate serves {ESTIMATORS}, not {ctx.name!r}")
    X = ctx.require_data()
    if ctx.name == "raise-hmc":
        _check_kind(ctx.model, "analysis", "raise-hmc", "reverse-hais (or bdmc on simulated data)")
    else:
        _check_kind(ctx.model, "generative", "reverse-hais", "raise-hmc")
    betas = hais_mod.schedule(ctx, kernel="hais")
    common = dict(
        data=X,
        sweeps_per_beta=o.sweeps_per_beta,
        n_bootstrap=o.n_bootstrap,
        progress=o.progress,
        settings=ctx.continuous_settings(),
        **hais_mod.kernel_options(o),
    )
    if ctx.name == "raise-hmc":
        res = raise_hmc(ctx.model, betas, o.chains, ctx.generator, proposal_scale=o.proposal_scale, **common)
    else:
        res = reverse_hais(ctx.model, betas, o.chains, ctx.generator, **common)
    return ctx.record_schedule(res)
