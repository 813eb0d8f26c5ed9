"""Conservative sampling-based log-likelihood (CSL; Bengio, Yao & Cho 2013).

Hidden states ``h_1 ... h_S`` are collected from Gibbs chains run on the model, and

    log p̂(v) = log (1/S) sum_s p(v | h_s),

which, by Jensen's inequality, under-estimates ``log p(v)`` in expectation (and by tens of
nats when the chains mix poorly).  Two variants (Upadhya & Sastry, Sec. 3.2):

* ``unbiased``: chains start from uniformly random visible states;
* ``biased``: chains start from training examples.

Two protocols draw the ``S`` samples:

* ``fresh`` (the default): the chains run ``burn_in`` sweeps, then a hidden sample is kept every
  ``thin`` sweeps until each chain has contributed ``samples_per_chain`` samples;
* ``pooled``: Upadhya & Sastry's (Sec. 4.2): "simulate S_M parallel Gibbs chains with S_T steps ...
  for each experiment we select a random burn-in value and select chains randomly", then keep every
  ``thin``-th sample.  Here the pool's chains are ``S_T = burn_in + thin * samples_per_chain`` sweeps long,
  one burn-in ``B`` is drawn uniformly from ``0..burn_in`` per estimate (so the kept samples fit in the
  pool, as in the paper, where ``B <= S_T - N T / M``; a small or large ``burn_in`` is the paper's small
  or large burn-in setup), and the ``chains`` selected chains run ``B + thin * samples_per_chain`` sweeps.
  The pool's other chains would not enter the estimate, so they are not simulated: one estimate has the
  distribution of one of the paper's experiments.  (The paper's 100 experiments reuse one pool; ours, one
  per seed, are independent.)  The chains are independent but the samples within one are not, so the
  standard error and the ESS treat each chain's mean as one batch (below).

``p(v | h_s)`` is accumulated for all test examples with a running log-sum-exp in float64, so no
``(N, S)`` matrix is stored (``pooled`` also keeps one sum per chain, ``(N, chains)``).  Only for
the Pareto k-hat of the weights ``p(v | h_s)`` (``khat``: the median over examples, with
``extra["khat_max"]`` and ``extra["khat_frac_above_0.7"]``) are the ``S`` terms kept, for at most :data:`KHAT_EXAMPLES`
evenly spaced test examples (fewer when ``S`` is large; NaN when ``S < 25``).  The ``S``
samples are taken as independent (``r_eff = 1``), which they are not within a chain.

Uncertainty.  ``fresh``: per example, the delta-method standard error of ``log p̂(v)`` taking the ``S``
samples as independent (optimistic within a chain), and the ESS ``(sum w)^2 / sum w^2``; the mean's
standard error is the mean of the per-example ones (the same samples serve every example).
``pooled``: batch means with one batch per chain, which needs no independence within a chain: per
example the delta-method standard error of the mean over chains of each chain's mean ``p(v | h)``
(:func:`logzbench.stats.log_mean_stderr` of the chain means), the ESS the number of independent samples
with the same relative variance, ``1 / (se^2 + 1/S)`` (``extra["ess_independent"]`` keeps
``(sum w)^2 / sum w^2``), and the mean's standard error the delta-method
one over chains of ``u_c = mean_v (chain c's mean p(v | h) / p̂(v))``, which counts the correlation of the
examples' errors instead of bounding it (``extra["per_example_stderr_mean"]`` keeps the bound).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from ..models.rbm import BinaryRBM
from ..options import CSL_PROTOCOLS
from ..stats import KHAT_MIN_WEIGHTS, log_mean_stderr
from ._common import progress_range, timer
from .context import chain_bytes
from .result import EstimateResult, check_finite, khat_per_example

CSL_MODES = ("unbiased", "biased")
#: test examples whose ``S`` terms ``log p(v | h_s)`` are kept for the k-hat (at most 2e6 terms in all)
KHAT_EXAMPLES = 100


def _check_arguments(mode: str, protocol: str, n_chains: int, samples_per_chain: int, burn_in: int, thin: int):
    """Refuse an unknown mode or protocol, and counts below their least."""
    if mode not in CSL_MODES:
        raise ValueError(f"unknown CSL mode {mode!r}; choose one of {CSL_MODES}")
    if protocol not in CSL_PROTOCOLS:
        raise ValueError(f"unknown csl_protocol {protocol!r}; choose one of {CSL_PROTOCOLS}")
    for name, val, lo in (
        ("n_chains", n_chains, 1),
        ("samples_per_chain", samples_per_chain, 1),
        ("burn_in", burn_in, 0),
        ("thin", thin, 1),
    ):
        if int(val) < lo:
            raise ValueError(f"CSL {name} must be >= {lo}, got {val}")
    if protocol == "pooled" and n_chains < 2:
        raise ValueError(f"pooled CSL needs chains >= 2 (its standard error compares chains), got {n_chains}")


def _start_chains(rbm: BinaryRBM, n_chains: int, mode: str, train_data, generator: torch.Generator):
    """The chains' first visible states: uniform random (``unbiased``) or random training rows (``biased``)."""
    if mode == "biased":
        if train_data is None:
            raise ValueError("biased CSL starts its chains at training examples: pass train_data")
        train_data = rbm._as_input(train_data)
        pick = torch.randint(0, train_data.shape[0], (n_chains,), generator=generator, device=generator.device)
        return train_data[pick]
    return torch.bernoulli(torch.full((n_chains, rbm.n_visible), 0.5, device=rbm.device), generator=generator)


class _Sums(NamedTuple):
    """What the chains leave: per test row, ``log sum_s p(v | h_s)`` and ``log sum_s p(v | h_s)^2``; with
    ``pooled``, each chain's own ``log sum p(v | h_s)`` ``(N, M)``; the kept rows' ``log p(v | h_s)``."""

    lse: torch.Tensor
    lse2: torch.Tensor
    chain_lse: torch.Tensor | None
    kept: list


def _run_chains(rbm, data, v, generator, n_sweeps: int, start: int, thin: int, pooled: bool, keep, progress) -> _Sums:
    """Run the Gibbs chains ``n_sweeps`` sweeps from ``v``, summing ``p(v | h)`` of every test row over the
    hidden samples kept (every ``thin``-th sweep after ``start``)."""
    N, n_chains = data.shape[0], v.shape[0]
    lse = torch.full((N,), -math.inf, dtype=torch.float64, device=rbm.device)
    lse2 = torch.full((N,), -math.inf, dtype=torch.float64, device=rbm.device)
    # pooled: each chain's own sum of p(v | h_s), the batch of its batch means
    chain_lse = torch.full((N, n_chains), -math.inf, dtype=torch.float64, device=rbm.device) if pooled else None
    kept = []  # (n_keep, M) log p(v | h_s) per kept sweep, for the k-hat
    for sweep in progress_range(n_sweeps, progress, "CSL"):
        h = rbm.sample_h_given_v(v, generator)
        v = rbm.sample_v_given_h(h, generator)
        if sweep >= start and (sweep - start + 1) % thin == 0:
            lp = rbm.log_prob_v_given_h(data, h)  # (N, M)
            lse = torch.logaddexp(lse, torch.logsumexp(lp, dim=1))
            lse2 = torch.logaddexp(lse2, torch.logsumexp(2 * lp, dim=1))
            if chain_lse is not None:
                torch.logaddexp(chain_lse, lp, out=chain_lse)
            if keep is not None:
                kept.append(lp[keep])
    return _Sums(lse, lse2, chain_lse, kept)


def _standard_errors(sums: _Sums, per_ex: torch.Tensor, S: int, samples_per_chain: int, n_chains: int):
    """``(ess, mean_se, pooled_extra)``: the effective sample size per test row and the standard error of the
    mean log-likelihood -- by the delta method, or with ``pooled`` from batch means, one batch per chain
    (module docstring), keeping the delta method's figures in ``pooled_extra``."""
    lse, lse2 = sums.lse, sums.lse2
    ess = torch.exp(2 * lse - lse2)  # per example, in samples
    # delta-method standard error per example, treating the S samples as independent
    # (they are not within a chain, so this is optimistic; more chains help)
    rel_var = torch.clamp(torch.exp(lse2 - 2 * lse) * S - 1.0, min=0.0) / max(S - 1, 1)
    per_ex_se = torch.sqrt(rel_var)
    # the same samples serve every example, so their errors are correlated: the mean of
    # the per-example errors bounds the error of the mean
    mean_se = float(per_ex_se.mean())
    pooled_extra: dict = {}
    if sums.chain_lse is not None:  # batch means, one batch per chain (module docstring)
        chain_mean = sums.chain_lse - math.log(samples_per_chain)  # (N, M): log of each chain's mean p(v | h)
        _, per_ex_se = log_mean_stderr(chain_mean, dim=1)
        pooled_extra = {"ess_independent": float(ess.mean()), "per_example_stderr_mean": float(per_ex_se.mean())}
        ess = 1.0 / (per_ex_se**2 + 1.0 / S)
        u = torch.exp(chain_mean - per_ex[:, None]).mean(dim=0)  # (M,): each chain's share, mean 1
        mean_se = float(u.std() / math.sqrt(n_chains))
    return ess, mean_se, pooled_extra


def csl(
    rbm: BinaryRBM,
    data: torch.Tensor,
    generator: torch.Generator,
    *,
    n_chains: int = 100,
    samples_per_chain: int = 10,
    burn_in: int = 100,
    thin: int = 1,
    mode: str = "unbiased",
    train_data: torch.Tensor | None = None,
    progress: bool = False,
    settings: dict | None = None,
    protocol: str = "fresh",
) -> EstimateResult:
    """CSL estimate of the test log-likelihood of every row of ``data``.

    Parameters
    ----------
    rbm : BinaryRBM
    data : torch.Tensor, shape (N, n_visible)
        Test examples.
    generator : torch.Generator
    n_chains : int
        Parallel Gibbs chains ``M``.
    samples_per_chain : int
        Hidden samples kept per chain; ``S = M * samples_per_chain``.
    burn_in : int
        Sweeps discarded at the start of each chain (``pooled``: the largest burn-in, ``B`` drawn from
        ``0..burn_in``).
    thin : int
        Sweeps between kept samples.
    mode : {"unbiased", "biased"}
        Chain initialisation: uniform random, or random training examples.
    train_data : torch.Tensor, shape (N_train, n_visible)
        Required for ``mode="biased"``.
    protocol : {"fresh", "pooled"}
        Fresh chains after a fixed burn-in, or Upadhya & Sastry's pooled chains after a random one (see the
        module docstring).  ``pooled`` records ``settings["burn_in_drawn"]`` (``B``) and
        ``settings["pool_sweeps"]`` (``S_T``); ``n_sweeps`` is the sweeps each chain ran.
    """
    _check_arguments(mode, protocol, n_chains, samples_per_chain, burn_in, thin)
    data = rbm._as_input(data)
    v = _start_chains(rbm, n_chains, mode, train_data, generator)
    pooled = protocol == "pooled"
    protocol_settings: dict = {"csl_protocol": protocol}
    start = burn_in  # sweeps before the first kept sample's thinning interval
    if pooled:  # one random burn-in per estimate (Sec. 4.2), within the pool's S_T sweeps
        start = int(torch.randint(0, burn_in + 1, (1,), generator=generator, device=generator.device).item())
        protocol_settings.update(burn_in_drawn=start, pool_sweeps=burn_in + thin * samples_per_chain)

    N = data.shape[0]
    S = n_chains * samples_per_chain
    n_sweeps = start + thin * samples_per_chain
    n_keep = min(N, KHAT_EXAMPLES, 2_000_000 // S) if S >= KHAT_MIN_WEIGHTS else 0
    keep = torch.linspace(0, N - 1, n_keep, device=rbm.device).round().long() if n_keep else None
    with timer(generator.device) as t:
        sums = _run_chains(rbm, data, v, generator, n_sweeps, start, thin, pooled, keep, progress)
    per_ex = sums.lse - math.log(S)
    check_finite(per_ex, "CSL log-likelihoods")
    ess, mean_se, pooled_extra = _standard_errors(sums, per_ex, S, samples_per_chain, n_chains)
    per_ex_np = per_ex.cpu().numpy()
    khat, khat_extra = khat_per_example(torch.cat(sums.kept, dim=1) if sums.kept else torch.empty(0, 0))
    return EstimateResult(
        estimator="csl",
        ess=float(ess.mean()),
        khat=khat,
        n_chains=S,
        mean_log_likelihood=float(per_ex_np.mean()),
        mean_log_likelihood_stderr=mean_se,
        seconds=t[0],
        n_sweeps=n_sweeps,
        total_sweeps=n_sweeps * n_chains,
        settings={
            "mode": mode,
            "chains": n_chains,
            "samples_per_chain": samples_per_chain,
            "burn_in": burn_in,
            "thin": thin,
            "n_samples": S,
            **protocol_settings,
            **(settings or {}),
        },
        log_weights=per_ex_np,
        per_example_log_likelihood=per_ex_np,
        extra={
            "min_ess": float(ess.min()),
            "ess_fraction": float(ess.mean() / S),
            **khat_extra,
            "khat_examples": n_keep,
            **pooled_extra,
        },
    )


#: bytes of the per-sweep ``log p(v | h)`` of every test row and chain (float64, with two temporaries)
_BYTES_PER_PAIR = 24
#: ``pooled``: each chain's running sum of ``p(v | h)`` for every test row, and its update's temporary
_POOLED_BYTES_PER_PAIR = 16


def peak_bytes(ctx) -> tuple[int, str]:
    """The context's memory hook: the chains, and ``log p(v | h)`` of every test row and chain (``pooled``:
    and each chain's running sum)."""
    o = ctx.options
    n_data = 0 if ctx.data is None else int(ctx.data.shape[0])
    per_pair = _BYTES_PER_PAIR + (_POOLED_BYTES_PER_PAIR if o.csl_protocol == "pooled" else 0)
    return chain_bytes(
        ctx, o.chains, f"chains = {o.chains} (with {n_data} test examples)", extra=per_pair * o.chains * n_data
    )


def estimate(ctx) -> EstimateResult:
    """Registry entry ``csl``: CSL of the test rows from ``chains`` parallel Gibbs chains."""
    X = ctx.require_data()
    o = ctx.options
    return csl(
        ctx.model,
        X,
        ctx.generator,
        n_chains=o.chains,
        samples_per_chain=o.samples_per_chain,
        burn_in=o.burn_in,
        thin=o.thin,
        mode=o.csl_mode,
        train_data=ctx.train_data,
        progress=o.progress,
        settings=ctx.settings(),
        protocol=o.csl_protocol,
    )
