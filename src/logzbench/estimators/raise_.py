"""Reverse AIS Estimator (RAISE): RAISE paper Alg. 2 (tractable posterior), Alg. 3 (DBMs), Sec. 3.3 (DBNs).

For each test example ``v`` and each of ``M`` chains, a reverse chain starts at
``x_K = v`` (with ``h_K ~ p(h | v)`` drawn by the first Gibbs sweep), "melts" the model by
applying the transitions in reverse order, and accumulates

    log w = log f_K(v) - log Z_0 + sum_{k=K-1}^{0} [log f_k(x_k) - log f_{k+1}(x_k)].

``mean(w)`` is an unbiased estimate of ``p_ann(v)``, the probability of ``v`` under the
annealing model, so ``log mean(w)`` is a stochastic *lower* bound: RAISE errs low, AIS high.

The reverse kernel is the same Gibbs sweep AIS uses (it is reversible), and all examples
x chains are batched into one set of chains on the device.

When ``h`` given ``v`` is intractable (DBMs), the reverse chain cannot start from an exact
posterior sample: :func:`heat` first anneals ``h`` with ``v`` fixed from ``p_0(h | v)`` up to the
model (Alg. 3).  For a DBN the path's ``encode`` draws ``h_1 ~ q(h_1 | v)`` and RAISE runs on
the top RBM with ``h_1`` as data (the unrolled net of Fig. 2).

Averages over a random subsample of the test set are corrected with the control variate
of Sec. 4: ``X = log f(v)``, known for every test example, its coefficient fitted by regression
(``control_variate="fitted"``, the default) or fixed at the paper's ``alpha = 1`` (``"fixed"``).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..models.base import AnnealingPath
from ..options import CONTROL_VARIATES
from ..schedules import from_array
from ._common import progress_range, timer
from .context import annealing_sweeps, per_example_bytes, test_examples
from .result import EstimateResult, check_finite, ess_from_log_weights, khat_per_example, log_mean_stderr, rows_result

#: its reverse chain runs the path's transitions backwards: a non-reversible one is refused
#: (:func:`logzbench.estimators.transition.check_reversible`)
NEEDS_REVERSIBLE = True


def init(path: AnnealingPath, data: torch.Tensor, n_chains: int):
    """Chains at the data (each example repeated ``n_chains`` times), ``log w = log f_1(v) - log Z_0``."""
    state = path.state_from_data(data.repeat_interleave(n_chains, dim=0))
    log_w = path.log_f(state, 1.0) - path.log_z0()
    return state, log_w


def heat(path, v: torch.Tensor, betas, generator: torch.Generator, progress: bool = False, sweeps_per_beta: int = 1):
    """Heating phase of RAISE with an intractable posterior (Alg. 3): AIS over ``h`` with ``v`` fixed.

    Starts at ``h'_0 ~ p_0(h | v)`` with ``log w = log p_0(v)`` and, for ``k = 1..K``, adds
    ``log f_k(v, h'_{k-1}) - log f_{k-1}(v, h'_{k-1})`` and then moves ``h'_k ~ T_k^(v)(. | h'_{k-1})``,
    an operator that leaves ``p_k(h | v)`` invariant and does not change ``v``.  This is
    Eq. (13)'s first product with the reweighting placed before each move (the paper's
    Alg. 3 lists the move first; reweighting the state that the kernel of the *same* step
    produced would need the reverse kernel ``T~_{k-1}``), which keeps ``mean(w)`` unbiased
    for ``p_ann(v)``.  The final state ``(v, h'_K)`` starts the reverse chain.

    ``path`` must provide ``log_p0_visible``, ``sample_initial_given_visible`` and
    ``transition_given_visible`` (see :class:`~logzbench.models.dbm.DBMAnnealingPath`).
    """
    betas = from_array(betas)
    state = path.sample_initial_given_visible(v, generator)
    log_w = path.log_p0_visible(v)
    K = len(betas) - 1
    for k in progress_range(K, progress, "RAISE heating"):
        log_w = log_w + path.log_f_ratio(state, float(betas[k]), float(betas[k + 1]))
        for _ in range(int(sweeps_per_beta)):
            state = path.transition_given_visible(state, float(betas[k + 1]), generator)
    return state, log_w


def intractable_posterior(path) -> bool:
    """Whether RAISE needs the heating phase (Alg. 3) on ``path``."""
    return hasattr(path, "transition_given_visible")


def step(
    path: AnnealingPath,
    x,
    log_w: torch.Tensor,
    beta_high: float,
    beta_low: float,
    generator: torch.Generator,
    n_moves: int = 1,
):
    """Move with the kernel at ``beta_high`` (``n_moves`` transitions), then reweight down to ``beta_low``."""
    for _ in range(int(n_moves)):
        x = path.transition(x, beta_high, generator)
    return x, log_w + path.log_f_ratio(x, beta_high, beta_low)


def reverse(
    path: AnnealingPath,
    x,
    log_w: torch.Tensor,
    betas,
    generator: torch.Generator,
    *,
    sweeps_per_beta: int = 1,
    progress: bool = False,
    desc: str = "RAISE",
):
    """The reverse chain: for ``k = K-1 .. 0``, :func:`step` from ``beta_{k+1}`` down to ``beta_k``
    (``sweeps_per_beta`` transitions, then the reweighting).  The caller gives the start ``x`` and the
    starting ``log_w``; returns the final ``(x, log_w)``.  RAISE, reverse AIS, RAISE with Hamiltonian
    transitions and BDMC's reverse run all run this loop."""
    betas = from_array(betas)
    K = len(betas) - 1
    for i in progress_range(K, progress, desc):
        k = K - 1 - i
        x, log_w = step(path, x, log_w, float(betas[k + 1]), float(betas[k]), generator, n_moves=sweeps_per_beta)
    return x, log_w


def raise_log_weights(
    path: AnnealingPath,
    data: torch.Tensor,
    betas,
    n_chains: int,
    generator: torch.Generator,
    progress: bool = False,
    sweeps_per_beta: int = 1,
) -> tuple[torch.Tensor, int]:
    """Per-example, per-chain RAISE log-weights, shape ``(n_examples, n_chains)``, float64.

    Returns the weights and the number of sweeps per chain: ``K`` for a tractable posterior
    (Alg. 2), ``2 K`` with the heating phase (Alg. 3), times ``sweeps_per_beta`` (transitions at
    each intermediate distribution).  A path with an ``encode`` method (a DBN
    unrolled into a deep belief net, Sec. 3.3) first draws the top model's data from its
    recognition distribution and adds ``log p(v | h_1) - log q(h_1 | v)``.
    """
    betas = from_array(betas)
    K = len(betas) - 1
    v = data.repeat_interleave(n_chains, dim=0)
    offset = 0.0
    if hasattr(path, "encode"):
        v, offset = path.encode(v, generator)
    if intractable_posterior(path):
        x, log_w = heat(path, v, betas, generator, progress=progress, sweeps_per_beta=sweeps_per_beta)
        sweeps = 2 * K * int(sweeps_per_beta)
    else:
        x = path.state_from_data(v)
        log_w = path.log_f(x, 1.0) - path.log_z0()
        sweeps = K * int(sweeps_per_beta)
    log_w = log_w + offset
    x, log_w = reverse(path, x, log_w, betas, generator, sweeps_per_beta=sweeps_per_beta, progress=progress)
    check_finite(log_w, "RAISE log-weights")
    return log_w.reshape(data.shape[0], n_chains), sweeps


#: the paper's coefficient of the ``log f(v)`` control variate (Sec. 4: the annealing model approximates the MRF)
FIXED_ALPHA = 1.0


def control_variate_mean(
    y: np.ndarray, x_sub: np.ndarray, x_all: np.ndarray, alpha: float | None = None
) -> tuple[float, float, float]:
    """Control-variate estimate of the mean of ``Y`` over a set of ``N`` rows from a random subsample of
    ``n`` (RAISE Eq. 14): ``mean_sub(Y - alpha X) + alpha mean_all(X)``.

    ``alpha=None`` fits ``alpha = Cov(Y, X) / Var(X)`` on the subsample (regression; the estimate is then
    unbiased up to ``O(1/n)``); a number fixes it (the paper's ``alpha = 1``, :data:`FIXED_ALPHA`: unbiased
    for every ``n``).

    The standard error is that of the mean over *this* set, the quantity every estimate of the report
    is compared on (AIS, exact, RAISE on every row).  With ``D = Y - alpha X``, the rows drawn without
    replacement and ``X`` known on every row,

        Var = (1 - n/N) S^2 / n + sigma^2 / n,

    ``S^2`` the spread of ``E[D_i]`` over the ``N`` rows, ``sigma^2`` the mean RAISE variance of one row.
    The subsample's ``s_D^2`` estimates ``S^2 + sigma^2``, so ``s_D / sqrt(n)`` (returned) overstates the
    standard error by at most the finite-population correction (a factor ``<= 1 / sqrt(1 - n/N)``).  There is
    no ``alpha^2 Var(X) / N`` term: ``mean_all(X)`` is computed on the set, not sampled.  That term belongs
    to the mean over the data distribution, the test set being a sample of it
    (:func:`control_variate_population_stderr`).

    Parameters
    ----------
    y : shape (n,)
        Per-example estimates on the subsample.
    x_sub : shape (n,)
        Control variate on the subsample.
    x_all : shape (N,)
        Control variate on the full set.
    alpha : float, optional
        The coefficient; ``None`` fits it.

    Returns
    -------
    (estimate, standard error, alpha)
        A fitted ``alpha`` falls back to the plain mean of ``y`` (``alpha = 0``) with fewer than 3 rows or a
        constant ``x_sub``.
    """
    n = len(y)
    if alpha is None:
        if n < 3 or np.var(x_sub) == 0:
            return float(np.mean(y)), float(np.std(y, ddof=1) / math.sqrt(n)) if n > 1 else float("nan"), 0.0
        c = np.cov(y, x_sub, ddof=1)
        alpha = float(c[0, 1] / c[1, 1])
    resid = y - alpha * x_sub
    se = float(resid.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
    return float(resid.mean() + alpha * x_all.mean()), se, float(alpha)


def control_variate_population_stderr(y: np.ndarray, x_sub: np.ndarray, n_all: int, alpha: float) -> float:
    """Standard error of :func:`control_variate_mean` as an estimate of the mean over the data distribution,
    the ``N`` test rows being a random sample of it and the ``n`` rows a random subsample of those.

    With ``D = Y - alpha X`` (``Y`` with its RAISE noise), the ``n`` rows among the ``N``,

        Var = Var(D) / n + alpha^2 Var(X) / N + 2 alpha Cov(D, X) / N = Var(D) (1/n - 1/N) + Var(Y) / N,

    estimated by the subsample's ``s_D^2`` and ``s_Y^2``.  RAISE Sec. 4 states the first form with the
    covariance term over ``n``; over ``N`` is right when the subsample is part of the ``N`` rows (for the
    fitted ``alpha`` the covariance is zero and the two agree).  Beside the standard error over this set
    (:func:`control_variate_mean`) it adds about ``Var(E[Y | v]) / N``, the test set's own sampling error,
    which AIS's and the exact value's errors do not include either.  Without subsampling (``n = N``) it is
    ``s_Y / sqrt(N)``.

    Parameters
    ----------
    y, x_sub : shape (n,)
        As in :func:`control_variate_mean`.
    n_all : int
        ``N``, the rows of the full set.
    alpha : float
        The coefficient used (fitted or fixed).
    """
    n = len(y)
    if n < 2:
        return float("nan")
    var_d = float(np.var(y - alpha * x_sub, ddof=1))
    var_y = float(np.var(y, ddof=1))
    return math.sqrt(max(var_d * (1.0 / n - 1.0 / n_all), 0.0) + var_y / n_all)


def implied_log_z_stderr(log_f_rows, per_example) -> float:
    """Standard error of the log Z that a mean test log-likelihood implies, ``mean_i (log f(v_i) -
    log p_hat(v_i))`` over the rows evaluated: the across-row standard deviation of the per-row values
    over ``sqrt(n)`` (NaN with fewer than two rows).

    Each row's value is ``log Z`` plus that row's error ``log p(v_i) - log p_hat(v_i)``: its Monte Carlo
    noise, the error of an importance-sampled ``log f(v_i)``, and the gap between ``p`` and RAISE's
    annealing model ``p_ann`` at ``v_i``, which differs from row to row.  The estimator's own standard
    error (Monte Carlo noise only, the rows held fixed) leaves out the last: with few test rows their
    spread is most of the implied log Z's error."""
    d = np.asarray(log_f_rows, dtype=np.float64) - np.asarray(per_example, dtype=np.float64)
    n = d.size
    return float(np.std(d, ddof=1) / math.sqrt(n)) if n > 1 else float("nan")


def _bootstrap_ci(
    log_w: torch.Tensor,
    x_sub: np.ndarray,
    x_all: np.ndarray,
    subsampled: bool,
    seed: int,
    n_bootstrap: int = 500,
    alpha: float | None = None,
) -> tuple[float, float]:
    """Percentile 95 % interval of the mean: chains resampled within every example and,
    for a subsample, the examples too (with a fitted control variate refitted each time; ``alpha``
    fixes it)."""
    n, m = log_w.shape
    if m < 2:
        return float("nan"), float("nan")
    g = torch.Generator().manual_seed(int(seed) + 1)
    rows = torch.arange(n).unsqueeze(1)
    stats = []
    for _ in range(n_bootstrap):
        cols = torch.randint(0, m, (n, m), generator=g)
        y = (torch.logsumexp(log_w[rows, cols], dim=1) - math.log(m)).numpy()
        if subsampled:
            ex = torch.randint(0, n, (n,), generator=g).numpy()
            stats.append(control_variate_mean(y[ex], x_sub[ex], x_all, alpha)[0])
        else:
            stats.append(float(y.mean()))
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return float(lo), float(hi)


def raise_estimate(
    path: AnnealingPath,
    data: torch.Tensor,
    betas,
    n_chains: int,
    generator: torch.Generator,
    *,
    log_f_all: torch.Tensor,
    n_examples: int | None = None,
    subsample_seed: int = 0,
    progress: bool = False,
    settings: dict | None = None,
    sweeps_per_beta: int = 1,
    control_variate: str = "fitted",
) -> EstimateResult:
    """RAISE per-example log-probabilities and the control-variate mean test log-likelihood.

    Parameters
    ----------
    path : AnnealingPath
    data : torch.Tensor, shape (N, n_visible)
        The test set.
    betas : array-like, shape (K + 1,)
    n_chains : int
        Reverse chains per example ``M``.
    generator : torch.Generator
    log_f_all : torch.Tensor, shape (N,)
        ``log f(v)`` for every test example: the control variate.
    n_examples : int, optional
        Size of the random subsample evaluated by RAISE (default: all ``N``).
    subsample_seed : int
        Seed of the subsample choice.
    control_variate : {"fitted", "fixed"}
        On a subsample, ``alpha`` fitted by regression or fixed at 1 (the paper's choice, Sec. 4; see
        :func:`control_variate_mean`).  The result records it (``settings["control_variate"]``), with
        ``alpha`` (``extra["control_variate_alpha"]``, 0 without subsampling) and the standard error
        over the data distribution (``extra["mean_log_likelihood_stderr_population"]``,
        :func:`control_variate_population_stderr`) beside the one over the test set
        (``extra["mean_log_likelihood_stderr_test_set"]``).  The reported standard error is the one over
        the test set for ``fitted`` and the full one, over the data distribution (with the paper's
        ``alpha^2 Var(X) / N`` term), for ``fixed``: that is the paper's protocol, and the two differ by the
        test set's own sampling error, about ``sd(log p(v)) / sqrt(N)``.
    """
    if control_variate not in CONTROL_VARIATES:
        raise ValueError(f"unknown control_variate {control_variate!r}; choose one of {CONTROL_VARIATES}")
    betas = from_array(betas)
    N = data.shape[0]
    n = N if n_examples is None or n_examples >= N else int(n_examples)
    idx = np.sort(np.random.default_rng(subsample_seed).choice(N, size=n, replace=False)) if n < N else np.arange(N)
    sub = data[torch.as_tensor(idx, device=data.device)]
    K = len(betas) - 1
    with timer(generator.device) as t:
        log_w, sweeps = raise_log_weights(
            path, sub, betas, n_chains, generator, progress=progress, sweeps_per_beta=sweeps_per_beta
        )
    per_ex, per_ex_se = log_mean_stderr(log_w, dim=1)
    per_ex, per_ex_se = per_ex.cpu().numpy(), per_ex_se.cpu().numpy()
    x_all = log_f_all.double().cpu().numpy()
    fixed = FIXED_ALPHA if control_variate == "fixed" else None
    if n < N:
        est, se, alpha = control_variate_mean(per_ex, x_all[idx], x_all, fixed)
    else:  # no subsampling: the only uncertainty is the estimator's own
        est = float(per_ex.mean())
        se = float(math.sqrt(np.sum(per_ex_se**2)) / n) if n_chains > 1 else float("nan")
        alpha = 0.0
    se_test_set = se
    se_population = control_variate_population_stderr(per_ex, x_all[idx], N, alpha)
    if control_variate == "fixed" and n < N:  # the paper's protocol, with its full standard error
        se = se_population
    ess = ess_from_log_weights(log_w, dim=1).cpu().numpy()
    ci = _bootstrap_ci(log_w.cpu(), x_all[idx], x_all, subsampled=n < N, seed=subsample_seed, alpha=fixed)
    khat, khat_extra = khat_per_example(log_w)  # median over examples (NaN with fewer than 25 chains)
    return rows_result(
        "raise",
        K=K,
        chains=n_chains,
        rows=n,
        n_sweeps=sweeps,
        ess=float(ess.mean()),
        khat=khat,
        mean_log_likelihood=est,
        mean_log_likelihood_stderr=se,
        mean_log_likelihood_ci=ci,
        seconds=t[0],
        settings={
            "n_test": N,
            "control_variate": control_variate,
            **(settings or {}),
        },
        log_weights=log_w.cpu().numpy(),
        per_example_log_likelihood=per_ex,
        extra={
            "control_variate_alpha": alpha,
            "mean_log_likelihood_stderr_population": se_population,
            "mean_log_likelihood_stderr_test_set": se_test_set,
            "subsample_mean_log_likelihood": float(per_ex.mean()),
            "per_example_stderr_mean": float(np.nanmean(per_ex_se)) if n_chains > 1 else None,
            "min_ess": float(ess.min()),
            # log Z implied by the RAISE mean: comparable with AIS/exact log Z (an upper estimate)
            "implied_log_z": float(x_all.mean() - est),
            "implied_log_z_stderr": implied_log_z_stderr(x_all[idx], per_ex),
            "subsample_indices": idx.tolist() if n < N else None,
            **khat_extra,
        },
    )


def peak_bytes(ctx) -> tuple[int, str]:
    """The context's memory hook: ``chains`` chains per test example."""
    return per_example_bytes(ctx)


def planned_sweeps(ctx) -> tuple[list, str]:
    """The context's time hook (:func:`~logzbench.estimators.context.planned_sweeps`): one batch of
    ``chains`` chains per test example, ``K`` sweeps (``2 K`` with the heating phase) per temperature step."""
    n = max(1, test_examples(ctx))
    passes = 2 if intractable_posterior(ctx.path()) else 1
    batches, what = annealing_sweeps(ctx, ctx.options.chains * n, passes)
    return batches, f"{what} (chains x test examples = {ctx.options.chains} x {n})"


def estimate(ctx) -> EstimateResult:
    """Registry entry ``raise``: RAISE on the test rows (a random subsample of ``n_examples`` with
    the ``log f(v)`` control variate)."""
    X = ctx.require_data()
    path = ctx.path()
    betas = ctx.betas(path)
    log_f, _ = ctx.log_f()
    o = ctx.options
    res = raise_estimate(
        path,
        X,
        betas,
        o.chains,
        ctx.generator,
        log_f_all=log_f,
        n_examples=o.n_examples,
        subsample_seed=o.seed,
        progress=o.progress,
        settings=ctx.annealed_settings(),
        sweeps_per_beta=o.sweeps_per_beta,
        control_variate=o.control_variate,
    )
    return ctx.finish(res, attach=False)
