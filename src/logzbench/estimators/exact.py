"""Exact ``log Z`` of a binary RBM by enumerating its smaller layer.

Summing the larger layer out analytically, ``Z = sum_h exp(b.h) prod_i (1 + exp(a_i + (W h)_i))``
(or the same with the layers swapped), so a model with ``min(n_visible, n_hidden) = n``
needs ``2^n`` terms.  The states are enumerated in chunks on the device and reduced with
a running log-sum-exp in float64.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from ..models.rbm import BinaryRBM
from .result import EstimateResult

#: Refuse to enumerate more than 2^MAX_ENUMERATION_BITS states (it would take hours).
MAX_ENUMERATION_BITS = 32


def _bits(start: int, stop: int, n: int, device, dtype) -> torch.Tensor:
    idx = torch.arange(start, stop, device=device, dtype=torch.int64)
    shifts = torch.arange(n, device=device, dtype=torch.int64)
    return ((idx.unsqueeze(1) >> shifts) & 1).to(dtype)


def exact_log_z(rbm: BinaryRBM, chunk_size: int = 1 << 14, dtype=torch.float64, progress: bool = False) -> float:
    """``log Z`` of ``rbm`` by enumeration of the smaller layer.

    Parameters
    ----------
    rbm : BinaryRBM
    chunk_size : int
        States per chunk (memory ~ ``chunk_size * max(n_visible, n_hidden)`` values).
    dtype : torch.dtype
        Arithmetic precision (float64 by default).
    progress : bool
        Show a progress bar.

    Returns
    -------
    float
    """
    W = rbm.W.to(dtype)
    if rbm.n_hidden <= rbm.n_visible:
        n, M, own_bias, other_bias = rbm.n_hidden, W.T, rbm.hidden_bias.to(dtype), rbm.visible_bias.to(dtype)
    else:
        n, M, own_bias, other_bias = rbm.n_visible, W, rbm.visible_bias.to(dtype), rbm.hidden_bias.to(dtype)
    if n > MAX_ENUMERATION_BITS:
        raise ValueError(
            f"exact enumeration needs 2^{n} states (smaller layer has {n} units); "
            f"refusing above 2^{MAX_ENUMERATION_BITS}. Use an estimator (ais, raise, csl) instead."
        )
    total = 1 << n
    parts = []
    it = range(0, total, chunk_size)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, total=(total + chunk_size - 1) // chunk_size, desc="exact log Z", unit="chunk")
    for start in it:
        s = _bits(start, min(start + chunk_size, total), n, rbm.device, dtype)
        pre = torch.addmm(other_bias, s, M)
        parts.append(torch.logsumexp(s @ own_bias + F.softplus(pre).sum(dim=1), dim=0))
    return float(torch.logsumexp(torch.stack(parts), dim=0))


def exact(model, data=None, *, chunk_size: int = 1 << 14, progress: bool = False) -> EstimateResult:
    """Exact ``log Z`` (and mean log-likelihood of ``data`` when given) as a result record.

    ``model`` is any family with ``exact_log_z`` and ``exact_log_f`` (RBM, DBM, DBN): a DBM
    enumerates the smaller side of its even/odd view for ``Z`` and its even hidden layers for
    ``f(v)``; a DBN enumerates its top RBM for ``Z`` and ``h_1`` for ``f(v)``.
    """
    t0 = time.perf_counter()
    log_z = model.exact_log_z(chunk_size=chunk_size, progress=progress)
    ll = None if data is None else (model.exact_log_f(data) - log_z).cpu().numpy()
    seconds = time.perf_counter() - t0
    res = EstimateResult(
        estimator="exact", log_z=log_z, log_z_stderr=0.0, log_z_ci=(log_z, log_z), ess=float("nan"),
        n_chains=0, seconds=seconds, n_sweeps=0, total_sweeps=0,
        settings={"chunk_size": chunk_size, "model_family": model.family},
    )
    if ll is not None:
        res.per_example_log_likelihood = ll
        res.mean_log_likelihood = float(ll.mean())
        res.mean_log_likelihood_stderr = 0.0
        res.mean_log_likelihood_ci = (res.mean_log_likelihood, res.mean_log_likelihood)
    return res


def estimate(ctx) -> EstimateResult:
    """Registry entry ``exact``: enumeration for a binary model, the closed form of a continuous one."""
    if ctx.family.kind == "binary":
        res = exact(ctx.model, ctx.data, progress=ctx.options.progress)
        res.settings.update(ctx.settings())
        return res
    return _closed_form(ctx)


def _closed_form(ctx) -> EstimateResult:
    """Closed forms: log Z of a complete PoE (analysis), log p(x) of a Gaussian-prior linear model."""
    from .hais import per_example_sd
    from .result import attach_log_likelihood

    model, X = ctx.model, ctx.data
    settings = ctx.settings("model_family", "model_kind")
    t0 = time.perf_counter()
    if ctx.family.kind == "analysis":
        log_z = model.exact_log_z()
        if log_z is None:
            raise ValueError(f"a {model.family} model of this size has no closed-form log Z "
                             f"(closed forms: complete PoE, L = M); use hais")
        res = EstimateResult(estimator="exact", log_z=float(log_z), log_z_stderr=0.0,
                             log_z_ci=(float(log_z), float(log_z)), settings=settings)
        if X is not None:
            attach_log_likelihood(res, -model.energy(X).double())
            res.extra["per_example_ll_sd"] = per_example_sd(res.per_example_log_likelihood)
    else:
        if X is None:
            raise ValueError("the exact log-likelihood of a generative model needs test data")
        ll = model.exact_log_likelihood(X)
        if ll is None:
            raise ValueError(f"a {model.family} model has no closed-form likelihood "
                             f"(closed forms: Gaussian prior, or Phi = 0); use hais")
        ll = ll.double().cpu().numpy()
        mean = float(ll.mean())
        res = EstimateResult(estimator="exact", mean_log_likelihood=mean, mean_log_likelihood_stderr=0.0,
                             mean_log_likelihood_ci=(mean, mean), per_example_log_likelihood=ll, settings=settings,
                             extra={"per_example_ll_sd": per_example_sd(ll)})
    res.seconds = time.perf_counter() - t0
    return res
