"""Hamiltonian annealed importance sampling and its two baselines on continuous models
(Sohl-Dickstein & Culpepper 2012).

Estimators (:data:`ESTIMATORS`, name -> kernel of :class:`~logzbench.models.hamiltonian.HamiltonianPath`):

``"hais"``
    One leapfrog step per intermediate distribution, Metropolis accept / reject, partial
    momentum refresh, momentum kept across distributions (Sec. 2.3).
``"ais-hmc"``
    The same leapfrog step with the momentum resampled every step (the paper's "HAIS, gamma = 1").
``"ais-mh"``
    Gaussian random-walk Metropolis-Hastings (sigma = 0.1 in the paper).

Two kinds of model (the interfaces are documented in :mod:`logzbench.models.continuous`):

* *analysis* models (product of experts, mcRBM) have an easy energy ``E_p(x)``: one AIS run from
  ``q = N(0, s^2 I)`` gives ``log Z`` for the whole test set, and the mean test log-likelihood is
  ``mean(-E_p(x)) - log Z`` (Eq. 26);
* *generative* models ``p(x, a) = p(x | a) p(a)`` need one run per test point over the latent
  ``a``, from the prior to the posterior: ``Z_{a|x} = p(x)`` (Eqs. 28-29).  All points and their
  chains are batched into one run; each point's ``log p(x)`` is the log-mean of its own chains'
  weights, with a delta-method standard error, and the mean's standard error combines them.

The result record is the spine's :class:`~logzbench.estimators.result.EstimateResult`;
``extra`` adds the kernel's acceptance rate and settings.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ..models.hamiltonian import HamiltonianPath, gaussian_proposal
from ..schedules import PILOT_SCHEDULES, from_array
from . import ais as ais_kernel
from ._common import timer
from .result import EstimateResult, check_finite, ess_from_log_weights, khat_per_example, log_mean_stderr

#: estimator name -> kernel
ESTIMATORS = {"hais": "hais", "ais-hmc": "hmc", "ais-mh": "mh"}


def per_example_sd(ll) -> float:
    """Spread of the per-test-point log-likelihoods (sd, ddof 1; NaN for one point): with
    ``sqrt(n)`` it gives the paper's "±" over test patches."""
    ll = np.asarray(ll, dtype=np.float64)
    return float(np.std(ll, ddof=1)) if ll.size > 1 else float("nan")


def _kernel_of(estimator: str) -> str:
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown continuous estimator {estimator!r}; choose one of {tuple(ESTIMATORS)}")
    return ESTIMATORS[estimator]


def kernel_options(options) -> dict[str, Any]:
    """The kernels' step options of a run's :class:`~logzbench.options.EstimateOptions`: leapfrog ``step_size``,
    momentum refresh ``gamma`` and random-walk ``mh_sigma`` (the keywords of :func:`analysis_path`,
    :func:`latent_path` and the estimators on them)."""
    return {"step_size": options.step_size, "gamma": options.gamma, "mh_sigma": options.mh_sigma}


def analysis_path(
    model,
    *,
    kernel: str = "hais",
    step_size: float = 0.2,
    gamma: float | None = None,
    mh_sigma: float = 0.1,
    proposal_scale: float = 1.0,
) -> HamiltonianPath:
    """The path from ``q = N(0, proposal_scale^2 I_M)`` (or the model's own start, where it has a
    ``proposal(scale)``: a user's energy) to ``exp(-model.energy(x))``."""
    own = getattr(model, "proposal", None)
    if own is not None:
        e0, s0, lz0, g0 = own(proposal_scale)
    else:
        e0, s0, lz0, g0 = gaussian_proposal(model.n_dims, proposal_scale, device=model.device)
    return HamiltonianPath(
        e0,
        s0,
        lz0,
        model.energy,
        kernel=kernel,
        step_size=step_size,
        gamma=gamma,
        mh_sigma=mh_sigma,
        grad0=g0,
        grad1=getattr(model, "energy_grad", None),
    )


def latent_path(
    model,
    X: torch.Tensor,
    n_chains: int,
    *,
    kernel: str = "hais",
    step_size: float = 0.2,
    gamma: float | None = None,
    mh_sigma: float = 0.1,
) -> HamiltonianPath:
    """The batched per-point paths over the latent of a generative model (Eq. 29).

    ``X`` has shape ``(P, M)``; chain ``c`` of point ``p`` is row ``p * n_chains + c`` of the state,
    so ``sample_initial`` must be called with ``P * n_chains`` chains.  ``E_q(a)`` is the prior
    energy (``q`` the prior, ``log Z_q`` its normaliser) and ``E_p(a) = E_prior(a) - log p(x | a)``,
    whose normaliser is ``Z_q p(x)``.
    """
    Xr = X.repeat_interleave(int(n_chains), dim=0)
    prior_grad = getattr(model, "prior_energy_grad", None)
    lik_grad = getattr(model, "likelihood_energy_grad", None)

    def energy1(a):
        return model.prior_energy(a) + model.likelihood_energy(Xr, a)

    grad1 = None
    if prior_grad is not None and lik_grad is not None:

        def grad1(a):
            return prior_grad(a) + lik_grad(Xr, a)

    lower = model.latent_lower()
    return HamiltonianPath(
        model.prior_energy,
        model.sample_prior,
        model.prior_log_z(),
        energy1,
        kernel=kernel,
        step_size=step_size,
        gamma=gamma,
        mh_sigma=mh_sigma,
        grad0=prior_grad,
        grad1=grad1,
        lower=None if lower is None else lower.to(dtype=torch.float64, device=X.device),
    )


def hais(
    model,
    estimator: str,
    betas,
    n_chains: int,
    generator: torch.Generator,
    *,
    data: torch.Tensor | None = None,
    step_size: float = 0.2,
    gamma: float | None = None,
    mh_sigma: float = 0.1,
    proposal_scale: float = 1.0,
    n_bootstrap: int = 1000,
    progress: bool = False,
    settings: dict | None = None,
    sweeps_per_beta: int = 1,
) -> EstimateResult:
    """HAIS (or a baseline) estimate for a continuous model.

    Parameters
    ----------
    model : analysis or generative model (``model.kind``)
    estimator : {"hais", "ais-hmc", "ais-mh"}
    betas : array-like, shape (N + 1,)
        Schedule over ``N`` intermediate distributions (linear in the paper).
    n_chains : int
        Chains (the paper's 200 particles); per test point for generative models.
    generator : torch.Generator
        The run's only source of randomness.
    data : torch.Tensor, shape (P, M), optional
        Test rows: the mean test log-likelihood of an analysis model; required for a generative
        model (one run per row).
    step_size, gamma, mh_sigma : float
        Kernel settings (leapfrog step 0.2, gamma half the momentum power per unit time, random
        walk 0.1 in the paper).
    proposal_scale : float
        Analysis models: standard deviation of the Gaussian ``q``.
    sweeps_per_beta : int
        Transitions at each intermediate distribution.
    """
    kernel = _kernel_of(estimator)
    betas = from_array(betas)
    K = len(betas) - 1
    common = {"K": K, "chains": int(n_chains), "proposal_scale": float(proposal_scale), **(settings or {})}
    if model.kind == "analysis":
        path = analysis_path(
            model, kernel=kernel, step_size=step_size, gamma=gamma, mh_sigma=mh_sigma, proposal_scale=proposal_scale
        )
        res = ais_kernel.ais(
            path,
            betas,
            n_chains,
            generator,
            n_bootstrap=n_bootstrap,
            progress=progress,
            settings={**common, **path.settings()},
            sweeps_per_beta=sweeps_per_beta,
        )
        res.estimator = estimator
        res.extra["acceptance_rate"] = path.acceptance_rate
        if data is not None:
            ais_kernel.attach_log_likelihood(res, -model.energy(data).double())
            res.extra["per_example_ll_sd"] = per_example_sd(res.per_example_log_likelihood)
        return res
    if model.kind != "generative":
        raise ValueError(f"model kind {model.kind!r} is neither 'analysis' nor 'generative'")
    if data is None:
        raise ValueError(f"{estimator} on a generative model estimates log p(x) of test points: give test data")
    X = data.double()
    P = X.shape[0]
    path = latent_path(model, X, n_chains, kernel=kernel, step_size=step_size, gamma=gamma, mh_sigma=mh_sigma)
    with timer(generator.device) as t:
        state, n_sweeps = ais_kernel.run(
            path, betas, P * int(n_chains), generator, progress=progress, sweeps_per_beta=sweeps_per_beta
        )
    # the weights estimate Z_1 = int exp(-E_prior(a)) p(x | a) da = Z_prior p(x)
    log_w = state.log_w.reshape(P, int(n_chains)) - model.prior_log_z()
    check_finite(log_w, f"{estimator} log-weights")
    ll, se = log_mean_stderr(log_w, dim=1)
    ll_np, se_np = ll.cpu().numpy(), se.cpu().numpy()
    mean_se = float(math.sqrt(float(np.sum(se_np**2)))) / P
    mean_ll = float(np.mean(ll_np))
    khat, khat_extra = khat_per_example(log_w)  # median over test points
    return EstimateResult(
        estimator=estimator,
        ess=float(ess_from_log_weights(log_w, dim=1).mean()),
        khat=khat,
        n_chains=int(n_chains),
        mean_log_likelihood=mean_ll,
        mean_log_likelihood_stderr=mean_se,
        mean_log_likelihood_ci=(mean_ll - 1.96 * mean_se, mean_ll + 1.96 * mean_se),
        seconds=t[0],
        n_sweeps=n_sweeps,
        total_sweeps=n_sweeps * P * int(n_chains),
        settings={**common, **path.settings(), "n_examples": P},
        log_weights=log_w.cpu().numpy(),
        per_example_log_likelihood=ll_np,
        extra={
            "acceptance_rate": path.acceptance_rate,
            "per_example_stderr_mean": float(np.mean(se_np)),
            "per_example_ll_sd": per_example_sd(ll_np),
            **khat_extra,
        },
    )


#: test points the adaptive schedule's pilot anneals on a generative model (their smallest CESS decides)
PILOT_POINTS = 8


def pilot_path(ctx, kernel: str | None = None, points: torch.Tensor | None = None) -> tuple[HamiltonianPath, int]:
    """``(path, groups)`` the adaptive schedule's pilot anneals on a continuous model: its own copy of an
    analysis model's path, or the latent paths of up to :data:`PILOT_POINTS` of a generative model's
    ``points`` (default: the test rows; BDMC's simulated points), ``pilot_chains`` chains each (their
    smallest CESS decides)."""
    o = ctx.options
    kw = dict(kernel=kernel or _kernel_of(ctx.name), **kernel_options(o))
    if ctx.model.kind == "analysis":
        return analysis_path(ctx.model, proposal_scale=o.proposal_scale, **kw), 1
    if points is None and ctx.data is None:
        raise ValueError(f"{ctx.name} on a generative model estimates log p(x) of test points: give test data")
    X = (ctx.data if points is None else points).double()[:PILOT_POINTS]
    return latent_path(ctx.model, X, o.pilot_chains, **kw), int(X.shape[0])


def schedule(ctx, kernel: str | None = None, K: int | None = None, points: torch.Tensor | None = None) -> np.ndarray:
    """The run's schedule on a continuous model at ``K`` steps (default ``options.K``): the pilot of
    :func:`pilot_path` (on ``points``, for a generative model) chooses it for ``schedule="adaptive"`` and
    ``"tuned"``."""
    if ctx.options.schedule not in PILOT_SCHEDULES or ctx.pilot is not None:
        return ctx.betas(K=K)
    path, groups = pilot_path(ctx, kernel, points)
    return ctx.betas(path, groups=groups, K=K)


def estimate(ctx) -> EstimateResult:
    """Registry entries ``hais``, ``ais-hmc``, ``ais-mh`` on a continuous model."""
    o = ctx.options
    res = hais(
        ctx.model,
        ctx.name,
        schedule(ctx),
        o.chains,
        ctx.generator,
        data=ctx.data,
        proposal_scale=o.proposal_scale,
        n_bootstrap=o.n_bootstrap,
        progress=o.progress,
        settings=ctx.continuous_settings(),
        sweeps_per_beta=o.sweeps_per_beta,
        **kernel_options(o),
    )
    return ctx.record_schedule(res)
