"""The ``exact`` estimator: enumeration for binary models, closed forms for continuous ones.

A binary model enumerates with :mod:`logzbench.models.enumeration` (an RBM's smaller layer;
see :func:`exact`), in float64 by default or in mixed precision (``precision="mixed"``: float32
softplus, float64 sums) with an a-priori error bound recorded as ``extra["log_z_error_bound"]``;
:func:`~logzbench.models.enumeration.exact_log_z` and
:data:`~logzbench.models.enumeration.MAX_ENUMERATION_BITS` are importable from here too.
The registry entry takes the precision from ``options.exact_precision`` (config key
``exact_precision`` of an exact estimator entry, ``logzbench estimate --exact-precision``).
"""

from __future__ import annotations

import time

from ..models.enumeration import MAX_ENUMERATION_BITS, exact_log_z
from .result import EstimateResult

__all__ = ["MAX_ENUMERATION_BITS", "estimate", "exact", "exact_log_z"]


def exact(model, data=None, *, chunk_size: int | None = None, precision: str = "float64",
          progress: bool = False) -> EstimateResult:
    """Exact ``log Z`` (and mean log-likelihood of ``data`` when given) as a result record.

    ``model`` is any family with ``exact_log_z`` and ``exact_log_f`` (RBM, DBM, DBN, GRBM): a DBM
    enumerates the smaller side of its even/odd view for ``Z`` and its even hidden layers for
    ``f(v)``; a DBN enumerates its top RBM for ``Z`` and ``h_1`` for ``f(v)``; a GRBM its ``2^H``
    hidden states for ``Z`` (float64 only), with ``f(v)`` in closed form.

    Parameters
    ----------
    model : BinaryRBM, DBM or DBN
    data : array-like, shape (n_examples, n_visible), optional
        Test rows; ``log f(v)`` is always enumerated in float64.
    chunk_size : int, optional
        States per enumeration step (default: automatic, from the free memory on CUDA).
    precision : {"float64", "mixed"}
        Arithmetic of the ``log Z`` enumeration (:func:`~logzbench.models.enumeration.exact_log_z`).
    progress : bool
        Progress bar.

    Returns
    -------
    EstimateResult
        ``settings["precision"]`` and ``extra["log_z_error_bound"]`` (nats; a bound on the
        floating-point error of ``log_z``) are recorded.
    """
    t0 = time.perf_counter()
    log_z, bound = model.exact_log_z(chunk_size=chunk_size, precision=precision, progress=progress,
                                     return_bound=True)
    ll = None if data is None else (model.exact_log_f(data) - log_z).cpu().numpy()
    seconds = time.perf_counter() - t0
    res = EstimateResult(
        estimator="exact", log_z=log_z, log_z_stderr=0.0, log_z_ci=(log_z, log_z), ess=float("nan"),
        n_chains=0, seconds=seconds, n_sweeps=0, total_sweeps=0,
        settings={"chunk_size": chunk_size, "precision": precision, "model_family": model.family},
        extra={"log_z_error_bound": bound},
    )
    if ll is not None:
        res.per_example_log_likelihood = ll
        res.mean_log_likelihood = float(ll.mean())
        res.mean_log_likelihood_stderr = 0.0
        res.mean_log_likelihood_ci = (res.mean_log_likelihood, res.mean_log_likelihood)
    return res


def estimate(ctx) -> EstimateResult:
    """Registry entry ``exact``: enumeration for a binary model or a GRBM, the closed form of a continuous one."""
    if ctx.family.kind in ("binary", "gaussian-binary"):
        res = exact(ctx.model, ctx.data, precision=ctx.options.exact_precision, progress=ctx.options.progress)
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
