"""Bidirectional Monte Carlo (Grosse, Ghahramani & Adams 2015) on data simulated from a directed
generative model (linear-Gaussian, linear-Laplace, bilinear).

``n_examples`` pairs ``(a_i, x_i)`` are drawn by ancestral sampling (``a ~ p(a)``, ``x ~ p(x | a)``)
with the run's generator.  For each ``x_i``, with ``chains`` chains each:

* *forward*: HAIS over the latent from the prior to the posterior
  (:func:`~logzbench.estimators.hais.latent_path`) gives weights with ``E[w] = p(x_i)``, so
  ``log mean(w)`` is a stochastic **lower** bound on ``log p(x_i)``;
* *reverse*: from the **exact** latent ``a_i`` that generated ``x_i`` -- an exact sample of the
  posterior ``p(a | x_i)``, since ``(a_i, x_i)`` is a draw of the joint -- with a fresh momentum
  (see :mod:`.raise_hmc` for why the HAIS kernel runs in reverse order), the reverse chain
  accumulates ``log v = sum_{k=K-1}^{0} [log f_k(a_k) - log f_{k+1}(a_k)]`` with
  ``E[v] = Z_0 / Z_1 = 1 / p(x_i)``, so ``-log mean(v)`` is a stochastic **upper** bound.

Both ends are true stochastic bounds of the mean ``log p(x)`` over the simulated points.  The points
are independent, so for a mean of ``N`` per-point bounds Markov's inequality gives
``P(mean lower - mean log p > t) <= exp(-N t)`` (``E[prod_i p_hat_i / p_i] = 1``) and likewise
``P(mean log p - mean upper > t) <= exp(-N t)``: the slack at confidence ``c`` is
``log(1 / (1 - c)) / N`` (:func:`logzbench.estimators.bracket.markov_slack`).  The chains of one
point's reverse run share its one exact latent: ``mean(v)`` stays unbiased for ``1 / p(x_i)``, but
the chains' standard error does not see the variation between latents (it is reported as is).

The result's ``mean_log_likelihood`` is the bracket's midpoint, ``mean_log_likelihood_ci`` the
bracket ``(lower, upper)``, ``extra["bracket"]`` the record of
:func:`~logzbench.estimators.bracket.make_bracket`, and, where the model has a closed form
(linear-Gaussian), ``extra["exact_mean_log_likelihood"]`` the exact mean over the simulated points.
``log_weights`` holds the forward log-weights ``(n_examples, chains)``; ``per_example_log_likelihood``
the per-point midpoints.  Cost: ``(2 K - 1) sweeps_per_beta`` transitions per chain (forward: moves
after the first ``K - 1`` reweightings, none after the last; reverse: ``K``).
"""

from __future__ import annotations

import math

import torch

from ..schedules import from_array
from . import hais as hais_mod
from . import raise_ as raise_kernel
from ._common import timer
from .context import chain_bytes
from .raise_hmc import forward, per_example_summary, with_fresh_momentum
from .result import EstimateResult, check_finite, rows_result

__all__ = ["DEFAULT_N_EXAMPLES", "bdmc", "estimate", "simulate"]

#: simulated points when ``n_examples`` is not given
DEFAULT_N_EXAMPLES = 100
#: confidence of the bracket's stated Markov slack when the options give none
DEFAULT_CONFIDENCE = 0.95

LOWER_WORDS = (
    "stochastic lower bound on the mean log p(x) of the simulated points: forward HAIS over the "
    "latent, E[w] = p(x) for every point"
)
UPPER_WORDS = (
    "stochastic upper bound on the mean log p(x) of the simulated points: reverse HAIS from the "
    "exact latent that generated each point (an exact posterior sample), E[v] = 1 / p(x)"
)


def simulate(model, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` ancestral draws ``(latent, x)`` of a generative model, float64, from ``generator``."""
    sample = getattr(model, "sample", None)
    if sample is None:
        raise ValueError(
            f"bdmc needs a generative model that can be sampled (a `sample` method); {type(model).__name__} has none"
        )
    x, a = sample(int(n), generator, return_latent=True)
    return a.double(), x.double()


def _check_generative(model) -> None:
    """Refuse a model that is not a directed generative one (BDMC simulates its data)."""
    if getattr(model, "kind", None) != "generative":
        raise ValueError(
            f"bdmc simulates data from a directed generative model (linear-gaussian, linear-laplace, "
            f"bilinear); this is a {getattr(model, 'kind', None)!r} model"
        )


def _forward_and_reverse(model, A, X, betas, M: int, s: int, generator, kernel_opts: dict, progress: bool):
    """Forward HAIS from the prior and reverse HAIS from the exact latents ``A`` of the simulated rows ``X``,
    ``M`` chains each: ``(forward path, reverse path, log_w, log_v, forward sweeps)``, weights flat."""
    P = int(X.shape[0])
    fpath = hais_mod.latent_path(model, X, M, **kernel_opts)
    rpath = hais_mod.latent_path(model, X, M, **kernel_opts)
    _, log_w, n_fwd = forward(
        fpath, betas, P * M, generator, sweeps_per_beta=s, progress=progress, desc="BDMC (forward)"
    )
    state = with_fresh_momentum(rpath.state_from_data(A.repeat_interleave(M, dim=0)), generator)
    log_v = torch.zeros(P * M, dtype=torch.float64, device=state.x.device)
    state, log_v = raise_kernel.reverse(
        rpath, state, log_v, betas, generator, sweeps_per_beta=s, progress=progress, desc="BDMC (reverse)"
    )
    return fpath, rpath, log_w, log_v, n_fwd


def _extra(model, X, bracket: dict, lo: dict, hi: dict, fpath, rpath) -> dict:
    """The result's ``extra``: the bracket, each side's estimate and diagnostics, and the exact mean
    log-likelihood of the simulated rows where the model has one."""
    extra = {
        "bracket": bracket,
        "data": "simulated",
        "n_simulated": int(X.shape[0]),
        "lower": lo["mean"],
        "lower_stderr": lo["stderr"],
        "upper": hi["mean"],
        "upper_stderr": hi["stderr"],
        "width": hi["mean"] - lo["mean"],
        "forward_ess": lo["ess"],
        "forward_khat": lo["khat"],
        "reverse_ess": hi["ess"],
        "reverse_khat": hi["khat"],
        "forward_acceptance_rate": fpath.acceptance_rate,
        "reverse_acceptance_rate": rpath.acceptance_rate,
        **lo["khat_extra"],
    }
    exact = model.exact_log_likelihood(X) if hasattr(model, "exact_log_likelihood") else None
    if exact is not None:
        extra["exact_mean_log_likelihood"] = float(torch.as_tensor(exact).double().mean())
    return extra


def bdmc(
    model,
    betas,
    n_chains: int,
    generator: torch.Generator,
    *,
    n_examples: int | None = None,
    kernel: str = "hais",
    step_size: float = 0.2,
    gamma: float | None = None,
    mh_sigma: float = 0.1,
    sweeps_per_beta: int = 1,
    confidence: float = DEFAULT_CONFIDENCE,
    progress: bool = False,
    settings: dict | None = None,
    simulated: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> EstimateResult:
    """Bidirectional Monte Carlo bracket of the mean ``log p(x)`` of simulated data (module docstring).

    Parameters
    ----------
    model : generative model with ``sample(n, generator, return_latent=True)``
    betas : array-like, shape (K + 1,)
    n_chains : int
        Forward chains and reverse chains per simulated point.
    generator : torch.Generator
        The run's only source of randomness (the simulation included).
    n_examples : int, optional
        Simulated points (default :data:`DEFAULT_N_EXAMPLES`).
    kernel, step_size, gamma, mh_sigma, sweeps_per_beta
        As :func:`~logzbench.estimators.raise_hmc.raise_hmc`.
    confidence : float
        Confidence of the bracket's stated Markov slack.
    simulated : (latent, x), optional
        Points already drawn with :func:`simulate` (:func:`estimate` draws them before choosing the
        schedule); default: drawn here.
    """
    from .bracket import End, make_bracket

    _check_generative(model)
    n = DEFAULT_N_EXAMPLES if n_examples is None else int(n_examples)
    if n < 1:
        raise ValueError(f"bdmc needs n_examples >= 1, got {n_examples}")
    betas = from_array(betas)
    K, M, s = len(betas) - 1, int(n_chains), int(sweeps_per_beta)
    kernel_opts = dict(kernel=kernel, step_size=step_size, gamma=gamma, mh_sigma=mh_sigma)
    with timer(generator.device) as t:
        A, X = simulate(model, n, generator) if simulated is None else simulated
        P = int(X.shape[0])
        fpath, rpath, log_w, log_v, n_fwd = _forward_and_reverse(
            model, A, X, betas, M, s, generator, kernel_opts, progress
        )
    log_w, log_v = log_w.reshape(P, M), log_v.reshape(P, M)
    check_finite(log_w, "bdmc forward log-weights")
    check_finite(log_v, "bdmc reverse log-weights")
    lo, hi = per_example_summary(log_w), per_example_summary(log_v, sign=-1.0)
    lower, upper = lo["mean"], hi["mean"]
    mid = 0.5 * (lower + upper)
    mid_se = 0.5 * math.hypot(lo["stderr"], hi["stderr"]) if M > 1 else float("nan")
    bracket = make_bracket(
        "mean_log_likelihood",
        End("bdmc-forward", lower, lo["stderr"], True, "p", LOWER_WORDS, P),
        End("bdmc-reverse", upper, hi["stderr"], True, "p", UPPER_WORDS, P),
        confidence,
    )
    # the reported interval: the bracket's ends widened by their noise (as the sandwich's); its midpoint
    ci = (bracket["mean_log_likelihood_lower"], bracket["mean_log_likelihood_upper"])
    mid = 0.5 * (ci[0] + ci[1])
    extra = _extra(model, X, bracket, lo, hi, fpath, rpath)
    n_sweeps = n_fwd + K * s
    return rows_result(
        "bdmc",
        K=K,
        chains=M,
        rows=P,
        n_sweeps=n_sweeps,
        ess=lo["ess"],
        khat=lo["khat"],
        mean_log_likelihood=mid,
        mean_log_likelihood_stderr=mid_se,
        mean_log_likelihood_ci=ci,
        seconds=t[0],
        settings={
            **fpath.settings(),
            "sweeps_per_beta": s,
            "confidence": float(confidence),
            **(settings or {}),
        },
        log_weights=log_w.cpu().numpy(),
        per_example_log_likelihood=0.5 * (lo["per_example"] + hi["per_example"]),
        schedule=betas.copy(),
        extra=extra,
    )


def peak_bytes(ctx) -> tuple[int, str]:
    """The context's memory hook: one latent chain per chain and simulated point."""
    o = ctx.options
    n = o.n_examples or DEFAULT_N_EXAMPLES
    return chain_bytes(ctx, o.chains * n, f"chains x simulated points = {o.chains} x {n}")


def estimate(ctx) -> EstimateResult:
    """Registry entry ``bdmc``: the bracket on ``n_examples`` points simulated from the model (test data,
    if given, is not used).  The points are drawn first, then the schedule is chosen."""
    o = ctx.options
    model = ctx.model
    if getattr(model, "kind", None) != "generative":
        raise ValueError(f"bdmc simulates data from a directed generative model; a {ctx.family.name} is not one")
    n = DEFAULT_N_EXAMPLES if o.n_examples is None else int(o.n_examples)
    simulated = simulate(model, n, ctx.generator)
    betas = hais_mod.schedule(ctx, kernel="hais", points=simulated[1])
    res = bdmc(
        model,
        betas,
        o.chains,
        ctx.generator,
        n_examples=n,
        sweeps_per_beta=o.sweeps_per_beta,
        confidence=float(getattr(o, "confidence", DEFAULT_CONFIDENCE)),
        progress=o.progress,
        settings=ctx.continuous_settings(),
        simulated=simulated,
        **hais_mod.kernel_options(o),
    )
    if ctx.data is not None:
        res.extra["test_data_ignored"] = True
    return ctx.record_schedule(res)
