"""The importance-sampling family on a model's annealing path endpoints (Liu et al. 2015, Sec. 3-4).

The reference ``p_0`` is the path's initial distribution (``beta = 0``: uniform or data base
rate for an RBM / DBM, exact samples, known ``Z_0``) and the target is the model (``beta = 1``).
One run draws

* ``n`` exact samples ``x ~ p_0`` and evaluates ``l0 = log f(x) - log p_0(x)``;
* ``n`` samples ``x ~ p`` by ``burn_in`` sweeps of the model's own kernel (the path's
  transition at ``beta = 1``: Gibbs for RBMs and DBMs) from independent ``p_0`` starts, and
  evaluates ``l1`` there,

in float64, and hands them to one of the log-ratio estimators: IS, reverse IS, the three
combinations of Sec. 6 and discriminance sampling (:data:`ESTIMATORS`).  Only the side an
estimator needs is sampled (IS: ``p_0`` only; reverse IS: ``p`` only).  Unlike AIS there is no
annealing, so on models far from ``p_0`` IS degrades (low ESS) and reverse IS depends on how
well ``burn_in`` sweeps mix; discriminance sampling uses both.

``l = log f_1(x) - log f_0(x) + log Z_0`` is computed with the path's ``log_f_ratio`` (one
difference, not two large numbers).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np
import torch

from ..models.base import AnnealingPath
from .importance import importance_sampling
from .is_combinations import discriminance_sampling, naive_average, weighted_average, weighted_selection
from .result import EstimateResult
from .reverse_importance import reverse_importance_sampling

#: estimator name -> (function, needs p_0 samples, needs target samples)
_TABLE: dict[str, tuple[Callable[..., EstimateResult], bool, bool]] = {
    "is": (importance_sampling, True, False),
    "ris": (reverse_importance_sampling, False, True),
    "is-avg": (naive_average, True, True),
    "is-weighted": (weighted_average, True, True),
    "is-select": (weighted_selection, True, True),
    "ds": (discriminance_sampling, True, True),
}
#: Names of the IS-family estimators.
ESTIMATORS = tuple(_TABLE)


def uses_samples(estimator: str) -> tuple[bool, bool]:
    """``(uses p_0 samples, uses target samples)`` of IS-family estimator ``estimator``.

    Raises ``ValueError`` for a name not in :data:`ESTIMATORS`.
    """
    if estimator not in _TABLE:
        raise ValueError(f"unknown IS-family estimator {estimator!r}; choose one of {ESTIMATORS}")
    _, uses_p0, uses_p = _TABLE[estimator]
    return uses_p0, uses_p


def from_log_ratios(
    estimator: str, l0=None, l1=None, *, n_bootstrap: int = 1000, seed: int = 0, settings: dict[str, Any] | None = None
) -> EstimateResult:
    """IS-family estimator ``estimator`` on log-ratios already drawn: the one dispatch of the family.

    ``l0`` are the log-ratios at ``p_0`` samples, ``l1`` at target samples; only the sides the
    estimator uses (:func:`uses_samples`) are read, the others may be ``None``.  ``n_bootstrap`` and
    ``seed`` drive the bootstrap interval of every estimator but discriminance sampling (which has
    none); ``settings`` is merged into ``result.settings``.
    """
    uses_p0, uses_p = uses_samples(estimator)
    fn = _TABLE[estimator][0]
    args = [side for side, used in ((l0, uses_p0), (l1, uses_p)) if used]
    kw: dict[str, Any] = {"settings": settings}
    if estimator != "ds":
        kw.update(n_bootstrap=n_bootstrap, seed=seed)
    return fn(*args, **kw)


def reference_log_ratios(path: AnnealingPath, n: int, generator: torch.Generator) -> np.ndarray:
    """``l0 = log f(x) - log p_0(x)`` at ``n`` exact samples of ``p_0``, float64 ``(n,)``."""
    x = path.sample_initial(int(n), generator)
    return (path.log_f_ratio(x, 0.0, 1.0) + path.log_z0()).double().cpu().numpy()


def target_log_ratios(path: AnnealingPath, n: int, burn_in: int, generator: torch.Generator) -> np.ndarray:
    """``l1 = log f(x) - log p_0(x)`` at ``n`` approximate model samples, float64 ``(n,)``.

    Each of the ``n`` independent chains starts at an exact ``p_0`` sample and runs ``burn_in``
    transitions at ``beta = 1``; the last state is kept.
    """
    x = path.sample_initial(int(n), generator)
    for _ in range(int(burn_in)):
        x = path.transition(x, 1.0, generator)
    return (path.log_f_ratio(x, 0.0, 1.0) + path.log_z0()).double().cpu().numpy()


def is_family(
    path: AnnealingPath,
    estimator: str,
    n: int,
    generator: torch.Generator,
    *,
    burn_in: int = 100,
    n_bootstrap: int = 1000,
    settings: dict[str, Any] | None = None,
) -> EstimateResult:
    """One IS-family estimate of ``log Z`` on the endpoints of ``path``.

    Parameters
    ----------
    path : AnnealingPath
        ``p_0`` is its ``beta = 0`` distribution, the target its ``beta = 1`` model.
    estimator : {"is", "ris", "is-avg", "is-weighted", "is-select", "ds"}
    n : int
        Samples from each side the estimator uses.
    generator : torch.Generator
        The run's only source of randomness (on the path's device).
    burn_in : int
        Transitions per target chain (``>= 1`` when the estimator uses target samples).
    n_bootstrap : int
        Bootstrap replicates of the interval (IS, reverse IS, combinations).
    settings : dict, optional
        Recorded in ``result.settings`` with ``n`` and ``burn_in``.

    Returns
    -------
    EstimateResult
        The estimator's record; ``seconds`` includes the sampling, ``n_sweeps = burn_in`` for
        estimators that use target samples (else 0), ``total_sweeps = n * n_sweeps``.
    """
    uses_p0, uses_p = uses_samples(estimator)
    if int(n) != n or n < 2:
        raise ValueError(f"the IS family needs at least 2 samples per side, got {n!r}")
    if uses_p and (int(burn_in) != burn_in or burn_in < 1):
        raise ValueError(f"{estimator}: target samples need burn_in >= 1 Gibbs sweeps, got {burn_in!r}")
    n, burn_in = int(n), int(burn_in)
    t0 = time.perf_counter()
    l0 = reference_log_ratios(path, n, generator) if uses_p0 else None
    l1 = target_log_ratios(path, n, burn_in, generator) if uses_p else None
    if generator.device.type == "cuda":
        torch.cuda.synchronize(generator.device)
    sampling_seconds = time.perf_counter() - t0
    res = from_log_ratios(
        estimator,
        l0,
        l1,
        n_bootstrap=n_bootstrap,
        seed=int(generator.initial_seed()),
        settings={"n": n, "burn_in": burn_in if uses_p else 0, **(settings or {})},
    )
    res.seconds += sampling_seconds
    res.n_sweeps = burn_in if uses_p else 0
    res.total_sweeps = n * res.n_sweeps
    res.extra["log_z0"] = float(path.log_z0())
    return res


def planned_sweeps(ctx) -> tuple[list, str]:
    """The context's time hook (:func:`~logzbench.estimators.context.planned_sweeps`): ``burn_in`` sweeps
    of ``chains`` chains for an estimator that uses model samples; none for IS (``log f`` of its
    ``p_0`` samples only)."""
    o = ctx.options
    if not uses_samples(ctx.name)[1]:
        return [], "no sweeps"
    return [(o.chains, o.burn_in)], f"burn_in = {o.burn_in} sweeps of {o.chains} chains"


def estimate(ctx) -> EstimateResult:
    """Registry entries ``is``, ``ris``, ``is-avg``, ``is-weighted``, ``is-select``, ``ds``: the
    path's endpoints only (``chains`` samples of ``p_0`` and ``chains`` model samples)."""
    path = ctx.path()
    ctx.log_f()
    o = ctx.options
    res = is_family(
        path,
        ctx.name,
        o.chains,
        ctx.generator,
        burn_in=o.burn_in,
        n_bootstrap=o.n_bootstrap,
        settings=ctx.annealed_settings(),
    )
    return ctx.finish(res)
