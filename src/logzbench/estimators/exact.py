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

import logging
import math
import sys
import time

import torch

from .. import registry
from ..models import enumeration
from ..models.enumeration import MAX_ENUMERATION_BITS, exact_log_z
from .result import EstimateResult

__all__ = [
    "MAX_ENUMERATION_BITS",
    "check",
    "check_budget",
    "duration",
    "estimate",
    "estimated_seconds",
    "exact",
    "exact_log_z",
]

_log = logging.getLogger(__name__)

#: Enumeration rates on one CPU thread (terms per second; a term is one state times one unit of the
#: layer summed out, or one multiply-add), from the documentation's Benchmarks page (784-unit RBM, 2^22
#: states: float64 product kernel 7.0 s, mixed precision 18.2 s) and measurements of the softplus
#: kernel, the DBM's and DBN's ``log f(v)`` and the GRBM's products on the same machine, rounded down.
_CPU_RATES = {"product": 4.7e8, "mixed": 1.8e8, "softplus": 1.2e8, "dbm-log-f": 8e7, "matmul": 5e9}
#: CUDA against one CPU thread (H100: 2^25 states of a 784-unit RBM in 0.26 s, 1.0e11 terms/s).
_CUDA_SPEEDUP = 200.0
#: Estimated seconds from which a warning line announces the enumeration (and a progress bar is
#: shown on a terminal even without ``progress``).
LONG_SECONDS = 60.0


def _rbm_terms(rbm, precision: str, device) -> tuple[float, str, int]:
    """``(terms, kernel, n)`` of enumerating ``rbm``'s ``log Z`` (refuses above 2^MAX_ENUMERATION_BITS)."""
    plan = enumeration._plan(rbm, None, precision, "auto", device)
    kernel = "mixed" if precision == "mixed" else ("product" if plan.G is not None else "softplus")
    return float(2**plan.n) * plan.M.shape[1], kernel, plan.n


def estimated_seconds(
    model, n_rows: int = 0, precision: str = "float64", device=None, threads: int | None = None
) -> tuple[float, str]:
    """``(seconds, what)``: the estimated time of :func:`exact` on ``model`` with ``n_rows`` test rows.

    Terms (states times units) divided by the measured one-thread rates (:data:`_CPU_RATES`), then by
    the torch thread count on the CPU or :data:`_CUDA_SPEEDUP` on CUDA.  The terms are the family's
    (:attr:`logzbench.registry.FamilySpec.exact_time`, default :func:`rbm_seconds`): an RBM enumerates
    ``log Z`` only (``log f(v)`` is a closed form); a DBM also enumerates its even hidden layers per row,
    a DBN its ``h_1`` per row; a GRBM its ``2^H`` hidden states.  ``what`` names the states.  A model
    over the hard caps (``2^MAX_ENUMERATION_BITS`` states for ``Z``, ``2^26`` per row for a deep model's
    ``log f(v)``) is refused here, before any enumeration.
    """
    dev = torch.device(device) if device is not None else model.device
    threads = torch.get_num_threads() if threads is None else int(threads)
    scale = _CUDA_SPEEDUP if dev.type == "cuda" else max(1, threads)
    hook = registry.family(model.family).exact_time
    seconds, what = (registry.load(hook) if hook else rbm_seconds)(model, n_rows, precision, dev)
    return seconds / scale, what


def rbm_seconds(model, n_rows: int, precision: str, device) -> tuple[float, str]:
    """One-thread seconds of enumerating an RBM's (or RBM view's) ``log Z``."""
    terms, kernel, n = _rbm_terms(model, precision, device)
    return terms / _CPU_RATES[kernel], f"2^{n} states"


def grbm_seconds(model, n_rows: int, precision: str, device) -> tuple[float, str]:
    """One-thread seconds of a GRBM's ``2^H`` hidden states."""
    H = model.n_hidden
    if H > MAX_ENUMERATION_BITS:
        raise ValueError(
            f"exact enumeration of a GRBM needs 2^{H} hidden states; refusing above "
            f"2^{MAX_ENUMERATION_BITS}. Use an estimator (ais, raise) instead."
        )
    return float(2**H) * model.n_visible / _CPU_RATES["matmul"], f"2^{H} hidden states"


def dbm_seconds(model, n_rows: int, precision: str, device) -> tuple[float, str]:
    """One-thread seconds of a DBM: ``log Z`` of its bipartite RBM view, and its even hidden layers per row."""
    from ..models.dbm import MAX_EXACT_BITS

    view = model.as_rbm()
    terms, kernel, n = _rbm_terms(view, precision, device)
    seconds = terms / _CPU_RATES[kernel]
    what = f"2^{n} states for log Z"
    n_rest = view.n_visible - model.n_visible
    if n_rows and n_rest:
        if n_rest > MAX_EXACT_BITS:
            raise ValueError(
                f"exact log f(v) of this DBM needs 2^{n_rest} states of the even hidden layers "
                f"per test row; refusing above 2^{MAX_EXACT_BITS}. Use ais or raise instead."
            )
        seconds += float(n_rows) * 2**n_rest * view.n_hidden / _CPU_RATES["dbm-log-f"]
        what += f" and 2^{n_rest} per test row ({n_rows} rows) for log f(v)"
    return seconds, what


def dbn_seconds(model, n_rows: int, precision: str, device) -> tuple[float, str]:
    """One-thread seconds of a DBN: ``log Z`` of its top RBM, and its ``h_1`` states per row."""
    from ..models.dbn import MAX_EXACT_BITS

    terms, kernel, n = _rbm_terms(model.top, precision, device)
    seconds = terms / _CPU_RATES[kernel]
    what = f"2^{n} states for log Z"
    if n_rows:
        n1 = model.top.n_visible
        if n1 > MAX_EXACT_BITS:
            raise ValueError(
                f"exact log f(v) of this DBN needs 2^{n1} states of h_1; refusing above "
                f"2^{MAX_EXACT_BITS}. Use ais or raise instead."
            )
        seconds += 2.0**n1 * (
            float(n_rows) * model.n_visible / _CPU_RATES["matmul"]
            + (model.n_visible + model.top.n_hidden) / _CPU_RATES["softplus"]
        )
        what += f" and 2^{n1} states of h_1 for log f(v) of {n_rows} rows"
    return seconds, what


def duration(seconds: float) -> str:
    """A long time in words: seconds, minutes, hours, days or years (for the budget refusals)."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} hours"
    if seconds < 2 * 365.25 * 86400:
        return f"{seconds / 86400:.0f} days"
    years = seconds / (365.25 * 86400)
    return f"{years:.3g} years" if years < 1000 else f"{years:,.0f} years"


def check_budget(ctx) -> float:
    """Refuse an exact enumeration estimated (:func:`estimated_seconds`) to take longer than
    ``options.exact_max_seconds`` (default :data:`logzbench.options.EXACT_MAX_SECONDS`); returns the
    estimate.  Estimates from :data:`LONG_SECONDS` on are announced with one warning line."""
    from ..options import EXACT_MAX_SECONDS

    o = ctx.options
    budget = EXACT_MAX_SECONDS if o.exact_max_seconds is None else o.exact_max_seconds
    n_rows = 0 if ctx.data is None else int(ctx.data.shape[0])
    threads = torch.get_num_threads()
    seconds, what = estimated_seconds(ctx.model, n_rows, o.exact_precision, ctx.device, threads)
    where = "cuda" if ctx.device.type == "cuda" else f"{threads} CPU thread{'s' if threads > 1 else ''}"
    if seconds > budget:
        allow = math.ceil(seconds * 2)
        raise ValueError(
            f"exact enumeration of {what} of this {ctx.model.family} would take about "
            f"{duration(seconds)} (estimated, {o.exact_precision} on {where}), over the budget of "
            f"{budget:g} s; allow it with exact_max_seconds={allow} (--exact-max-seconds {allow}), or use "
            f"ais or raise"
        )
    if seconds >= LONG_SECONDS:
        _log.warning(
            "exact: enumerating %s of this %s, about %s (estimated, %s on %s)%s",
            what,
            ctx.model.family,
            duration(seconds),
            o.exact_precision,
            where,
            "" if o.progress else "; --progress shows a bar",
        )
    return seconds


def exact(
    model, data=None, *, chunk_size: int | None = None, precision: str = "float64", progress: bool = False
) -> EstimateResult:
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

    Raises
    ------
    ValueError
        ``log Z = -inf``: every state has ``log f = -inf`` (a user's energy), so there is no distribution.
    """
    t0 = time.perf_counter()
    log_z, bound = model.exact_log_z(chunk_size=chunk_size, precision=precision, progress=progress, return_bound=True)
    if log_z == -math.inf:  # Z = 0: no distribution to normalise, no log-likelihood to report
        raise ValueError(
            f"this {model.family} model has no mass: log Z = -inf (every one of its states has log f = -inf)"
        )
    ll = None if data is None else (model.exact_log_f(data) - log_z).cpu().numpy()
    seconds = time.perf_counter() - t0
    res = EstimateResult(
        estimator="exact",
        log_z=log_z,
        log_z_stderr=0.0,
        log_z_ci=(log_z, log_z),
        ess=float("nan"),
        n_chains=0,
        seconds=seconds,
        n_sweeps=0,
        total_sweeps=0,
        settings={"chunk_size": chunk_size, "precision": precision, "model_family": model.family},
        extra={"log_z_error_bound": bound},
    )
    if ll is not None:
        res.per_example_log_likelihood = ll
        res.mean_log_likelihood = float(ll.mean())
        res.mean_log_likelihood_stderr = 0.0
        res.mean_log_likelihood_ci = (res.mean_log_likelihood, res.mean_log_likelihood)
    return res


def check(ctx) -> None:
    """The context's check hook: refuse an enumeration over the time budget (:func:`check_budget`)
    before it starts; the estimated time is kept for the progress display."""
    if ctx.family.kind in registry.GIBBS_KINDS:
        ctx.estimated_seconds = check_budget(ctx)


def estimate(ctx) -> EstimateResult:
    """Registry entry ``exact``: enumeration for a binary model or a GRBM, the closed form of a continuous one."""
    if ctx.family.kind in registry.GIBBS_KINDS:
        long = (ctx.estimated_seconds or 0.0) >= LONG_SECONDS  # a bar on a terminal even without `progress`
        progress = ctx.options.progress or (long and sys.stderr.isatty())
        res = exact(ctx.model, ctx.data, precision=ctx.options.exact_precision, progress=progress)
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
            raise ValueError(
                f"a {model.family} model of this size has no closed-form log Z "
                f"(closed forms: complete PoE, L = M); use hais"
            )
        res = EstimateResult(
            estimator="exact",
            log_z=float(log_z),
            log_z_stderr=0.0,
            log_z_ci=(float(log_z), float(log_z)),
            settings=settings,
        )
        if X is not None:
            attach_log_likelihood(res, -model.energy(X).double())
            res.extra["per_example_ll_sd"] = per_example_sd(res.per_example_log_likelihood)
    else:
        if X is None:
            raise ValueError("the exact log-likelihood of a generative model needs test data")
        ll = model.exact_log_likelihood(X)
        if ll is None:
            raise ValueError(
                f"a {model.family} model has no closed-form likelihood "
                f"(closed forms: Gaussian prior, or Phi = 0); use hais"
            )
        ll = ll.double().cpu().numpy()
        mean = float(ll.mean())
        res = EstimateResult(
            estimator="exact",
            mean_log_likelihood=mean,
            mean_log_likelihood_stderr=0.0,
            mean_log_likelihood_ci=(mean, mean),
            per_example_log_likelihood=ll,
            settings=settings,
            extra={"per_example_ll_sd": per_example_sd(ll)},
        )
    res.seconds = time.perf_counter() - t0
    return res
