"""The result record every estimator returns, and the statistics behind it.

All statistics are computed from per-chain log-weights in float64:

* ``log Ẑ = logmeanexp(log w)``;
* its standard error by the delta method, ``sd(w) / (sqrt(M) mean(w))``;
* a percentile bootstrap interval over chains (seeded; its resamples drawn in chunks of bounded
  memory, :func:`bootstrap_bytes`, which the estimators' memory estimate counts);
* the effective sample size ``(sum w)^2 / sum w^2``;
* the Pareto k-hat of the weights' tail (:func:`~logzbench.stats.pareto_khat`; above 0.7 the
  standard error is not to be trusted).

A non-finite log-weight is an error (:class:`~logzbench.errors.EstimatorError`), never
silently dropped.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch

from ..errors import EstimatorError
from ..stats import ess_from_log_weights, log_mean_stderr, pareto_khat

#: bytes the bootstrap holds per resampled weight: its index (int64) and the weight it picks (float64)
_BOOTSTRAP_BYTES_PER_DRAW = 16
#: the bootstrap draws its resamples in chunks of at most this many bytes (one resample at least)
BOOTSTRAP_CHUNK_BYTES = 1 << 26


def bootstrap_chunk(m: int, n_bootstrap: int) -> int:
    """Resamples of ``m`` weights the bootstrap draws at once: as many as fit in :data:`BOOTSTRAP_CHUNK_BYTES`,
    at least one, at most ``n_bootstrap``."""
    return max(1, min(int(n_bootstrap), BOOTSTRAP_CHUNK_BYTES // (_BOOTSTRAP_BYTES_PER_DRAW * max(int(m), 1))))


def bootstrap_bytes(m: int, n_bootstrap: int) -> int:
    """Peak bytes of the bootstrap of ``m`` weights with ``n_bootstrap`` resamples: one chunk of resamples
    (:func:`bootstrap_chunk`) and the resampled statistics; 0 when it draws none."""
    if n_bootstrap <= 0 or m <= 1:
        return 0
    return bootstrap_chunk(m, n_bootstrap) * int(m) * _BOOTSTRAP_BYTES_PER_DRAW + 8 * int(n_bootstrap)


def _bootstrap_log_means(log_w: torch.Tensor, n_bootstrap: int, generator: torch.Generator) -> torch.Tensor:
    """``log mean exp`` of ``n_bootstrap`` resamples (with replacement) of the weights ``log_w`` ``(M,)``, drawn
    in chunks of :func:`bootstrap_chunk` resamples: the draws, in order, are those of one
    ``(n_bootstrap, M)`` draw from ``generator``, without holding it."""
    m = log_w.numel()
    rows = bootstrap_chunk(m, n_bootstrap)
    out = []
    for start in range(0, n_bootstrap, rows):
        idx = torch.randint(0, m, (min(rows, n_bootstrap - start), m), generator=generator)
        out.append(torch.logsumexp(log_w[idx], dim=1))
    return torch.cat(out) - math.log(m)


class WeightSummary(NamedTuple):
    """Summary of one set of per-chain log-weights."""

    log_mean: float  #: log of the mean weight (the estimate of log Z or log p)
    stderr: float  #: delta-method standard error of ``log_mean``
    ci_low: float  #: bootstrap percentile interval (2.5 %)
    ci_high: float  #: bootstrap percentile interval (97.5 %)
    ess: float  #: effective sample size, in chains
    khat: float  #: Pareto k-hat of the weights (NaN with fewer than 25)

    def log_z_fields(self) -> dict:
        """The fields of an :class:`EstimateResult` whose ``log Z`` is this ``log_mean``: the estimate, its
        standard error and interval, ESS and k-hat."""
        return dict(
            log_z=self.log_mean,
            log_z_stderr=self.stderr,
            log_z_ci=(self.ci_low, self.ci_high),
            ess=self.ess,
            khat=self.khat,
        )


def check_finite(log_w: torch.Tensor, what: str = "log-weights") -> None:
    """Raise :class:`EstimatorError` when any log-weight is NaN or +-inf."""
    bad = ~torch.isfinite(log_w)
    if bad.any():
        n_nan = int(torch.isnan(log_w).sum())
        n_inf = int(bad.sum()) - n_nan
        raise EstimatorError(
            f"{what}: {int(bad.sum())} of {log_w.numel()} chains have non-finite weights "
            f"({n_nan} NaN, {n_inf} inf); the model's energies overflow or the input is invalid. "
            "No chain is dropped silently: fix the model or the settings."
        )


def summarize_log_weights(log_w, n_bootstrap: int = 1000, seed: int = 0, what: str = "log-weights") -> WeightSummary:
    """Summarise one vector of per-chain log-weights (shape ``(M,)``)."""
    log_w = torch.as_tensor(log_w, dtype=torch.float64).reshape(-1).cpu()
    check_finite(log_w, what)
    log_mean, se = log_mean_stderr(log_w)
    m = log_w.numel()
    if n_bootstrap > 0 and m > 1:
        boot = _bootstrap_log_means(log_w, int(n_bootstrap), torch.Generator().manual_seed(int(seed)))
        lo, hi = torch.quantile(boot, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    else:
        lo = hi = float("nan")
    return WeightSummary(
        float(log_mean), float(se), float(lo), float(hi), float(ess_from_log_weights(log_w)), pareto_khat(log_w)
    )


@dataclass
class EstimateResult:
    """What every estimator returns.

    Attributes
    ----------
    estimator : str
        ``"exact"``, ``"ais"``, ``"raise"``, ``"csl"``, ...
    log_z, log_z_stderr : float
        Estimate of ``log Z`` and its standard error (NaN where the estimator does not
        estimate ``log Z``, e.g. RAISE and CSL).
    log_z_ci : (float, float)
        Bootstrap 95 % interval of ``log Z`` over chains.
    ess : float
        Effective sample size of the per-chain weights (for per-example estimators, the
        mean over examples).
    khat : float
        Pareto k-hat of the per-chain log-weights (:func:`~logzbench.stats.pareto_khat`); above
        0.7 the standard error is not to be trusted.  For per-example estimators (RAISE, HAIS on a
        generative model, CSL) the median over examples (a typical example's tail; the maximum of
        noisy per-example k-hats exceeds 0.7 by chance), with ``extra["khat_max"]`` and
        ``extra["khat_frac_above_0.7"]``, the fraction of examples above 0.7.  NaN without weights (exact, discriminance
        sampling) or with fewer than 25 weights per estimate.
    n_chains : int
        Chains per estimate (per example for RAISE; samples per example for CSL).
    mean_log_likelihood, mean_log_likelihood_stderr : float
        Mean test log-likelihood and its standard error, when data was given.
    mean_log_likelihood_ci : (float, float)
        Bootstrap 95 % interval of the mean test log-likelihood (over chains; for a RAISE
        subsample, over chains and examples).
    seconds : float
        Wall time of the estimation proper (model set-up and warm-up excluded).
    n_sweeps : int
        Gibbs sweeps (MCMC transitions) applied to each chain.
    total_sweeps : int
        Sweeps summed over all chains (the computational cost).
    settings : dict
        Everything that produced the estimate (K, schedule, init, seed, device, ...).
    log_weights : numpy.ndarray
        Per-chain log-weights: ``(M,)`` for log Z estimators; ``(n_examples, M)`` for RAISE;
        ``(n_examples, N)`` log p(v | h_s) terms are not kept for CSL (too large): there it
        holds the per-example log-likelihood estimates.
    per_example_log_likelihood : numpy.ndarray or None
        ``(n_examples,)`` per-example estimates, where the estimator produces them.
    extra : dict
        Estimator-specific scalars (e.g. control-variate coefficient, exact log Z).
    schedule : numpy.ndarray or None
        The inverse temperatures an annealed estimator used (the adaptive pilot's choice included).
    """

    estimator: str
    log_z: float = float("nan")
    log_z_stderr: float = float("nan")
    log_z_ci: tuple[float, float] = (float("nan"), float("nan"))
    ess: float = float("nan")
    khat: float = float("nan")
    n_chains: int = 0
    mean_log_likelihood: float | None = None
    mean_log_likelihood_stderr: float | None = None
    mean_log_likelihood_ci: tuple[float, float] = (float("nan"), float("nan"))
    seconds: float = 0.0
    n_sweeps: int = 0
    total_sweeps: int = 0
    settings: dict[str, Any] = field(default_factory=dict)
    log_weights: np.ndarray | None = None
    per_example_log_likelihood: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    schedule: np.ndarray | None = None

    @property
    def sweeps_per_second(self) -> float:
        """Chain-sweeps per second (``total_sweeps / seconds``)."""
        return self.total_sweeps / self.seconds if self.seconds > 0 else float("nan")

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (no large arrays); NaN becomes ``None``."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name in ("log_weights", "per_example_log_likelihood", "schedule"):
                continue
            out[f.name] = getattr(self, f.name)
        out["log_z_ci"] = list(self.log_z_ci)
        out["mean_log_likelihood_ci"] = list(self.mean_log_likelihood_ci)
        out["sweeps_per_second"] = self.sweeps_per_second
        # a bracket's ends and their guarantees (sandwich, BDMC) at the top level, as the documentation lists them
        out.update({k: v for k, v in (self.extra.get("bracket") or {}).items() if k not in out})
        n_ex = None if self.per_example_log_likelihood is None else int(len(self.per_example_log_likelihood))
        out["n_examples"] = n_ex
        return _nan_to_none(out)

    def arrays(self) -> dict[str, np.ndarray]:
        """Arrays worth keeping as an artifact."""
        out = {}
        if self.log_weights is not None:
            out["log_weights"] = np.asarray(self.log_weights, dtype=np.float64)
        if self.per_example_log_likelihood is not None:
            out["per_example_log_likelihood"] = np.asarray(self.per_example_log_likelihood, dtype=np.float64)
        if self.schedule is not None:
            out["schedule"] = np.asarray(self.schedule, dtype=np.float64)
        return out


def _nan_to_none(o: Any) -> Any:
    if isinstance(o, dict):
        return {k: _nan_to_none(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_nan_to_none(v) for v in o]
    if isinstance(o, (float, np.floating)):
        return None if not math.isfinite(float(o)) else float(o)
    if isinstance(o, np.integer):
        return int(o)
    return o


def khat_per_example(log_w) -> tuple[float, dict[str, Any]]:
    """``(median k-hat over examples, extra)`` of per-example log-weights ``(n_examples, M)``:
    ``extra`` holds ``khat_frac_above_0.7`` (over the examples with a k-hat), ``khat_median`` and
    ``khat_max``; NaN and ``None`` where no example has one (fewer than 25 weights each).

    The median, not the maximum, is the headline: a typical example's tail.  With few weights per
    example (RAISE's 50 chains: a tail of 10) each k-hat is noisy, and the maximum over 100 examples
    exceeds 0.7 even where every example's weights are light-tailed (an example from RAISE Table 1's
    mnistPCD-20 is on the documentation's Benchmarks page)."""
    summary = khat_summary(pareto_khat(log_w, dim=-1))
    return (summary["khat_median"] if summary["khat_median"] is not None else float("nan")), summary


def khat_summary(khat) -> dict[str, float | None]:
    """``khat_median``, ``khat_max`` and ``khat_frac_above_0.7`` of per-example k-hats (array or tensor;
    NaN ones, too few weights, left out); ``None`` each where no example has one."""
    k = np.atleast_1d(np.asarray(torch.as_tensor(khat, dtype=torch.float64).cpu()))
    k = k[np.isfinite(k)]
    if k.size == 0:
        return {"khat_frac_above_0.7": None, "khat_median": None, "khat_max": None}
    return {
        "khat_frac_above_0.7": float(np.mean(k > 0.7)),
        "khat_median": float(np.median(k)),
        "khat_max": float(k.max()),
    }


def attach_log_likelihood(
    res: EstimateResult, log_f_data: torch.Tensor, log_f_stderr: torch.Tensor | None = None
) -> None:
    """Set per-example and mean test log-likelihood ``log f(v) - log Ẑ`` on a log-Z result.

    With exact ``log f(v)`` the standard error is that of ``log Ẑ`` (the data are fixed, so
    the uncertainty about their mean log-likelihood is the uncertainty about ``log Z``).  With
    estimated ``log f(v)`` (standard errors ``log_f_stderr``, independent across examples) the
    two sources add in quadrature, and the interval is widened by the same amount.
    """
    ll = log_f_data.double().cpu().numpy() - res.log_z
    res.per_example_log_likelihood = ll
    res.mean_log_likelihood = float(np.mean(ll))
    extra_var = 0.0
    if log_f_stderr is not None:
        se = log_f_stderr.double().cpu().numpy()
        extra_var = float(np.sum(se**2)) / len(se) ** 2
    res.mean_log_likelihood_stderr = float(np.sqrt(res.log_z_stderr**2 + extra_var))
    widen = 1.96 * (res.mean_log_likelihood_stderr - res.log_z_stderr)
    res.mean_log_likelihood_ci = (
        res.mean_log_likelihood - (res.log_z_ci[1] - res.log_z) - widen,
        res.mean_log_likelihood + (res.log_z - res.log_z_ci[0]) + widen,
    )


def rows_result(
    estimator: str, *, K: int, chains: int, rows: int, n_sweeps: int, settings: dict, **fields
) -> EstimateResult:
    """The result of a test log-likelihood estimated per row, ``chains`` chains on each of ``rows`` test rows:
    every chain's ``n_sweeps`` counted (``total_sweeps``), and ``K``, ``chains`` and ``n_examples`` leading
    its ``settings``; ``fields`` are the result's others (estimate, interval, weights, ``extra``, ...)."""
    return EstimateResult(
        estimator=estimator,
        n_chains=chains,
        n_sweeps=n_sweeps,
        total_sweeps=n_sweeps * chains * rows,
        settings={"K": K, "chains": chains, "n_examples": rows, **settings},
        **fields,
    )
