"""Minimum probability flow (MPF) training of continuous analysis models with L-BFGS.

Reference: J. Sohl-Dickstein, P. Battaglino, M. R. DeWeese, "Minimum probability flow learning",
ICML 2011, and "New method for parameter estimation in probabilistic models: minimum
probability flow", Phys. Rev. Lett. 107, 220601 (2011).  The HAIS paper (Sohl-Dickstein &
Culpepper 2012, Sec. 4) trains its analysis models "using LBFGS on the minimum probability
flow learning objective function for the full training set, with a transition function
Gamma based on Hamiltonian dynamics".

What is implemented
-------------------
MPF minimises the probability flow out of the data states,

    K(theta) = 1/|D| sum_{x in D} sum_{x'} g(x', x) exp( (E_theta(x) - E_theta(x')) / 2 ),

for a connectivity ``g`` that is symmetric, ``g(x', x) = g(x, x')``, and independent of
``theta`` (this is what makes the estimator consistent: at the true parameters the expected
gradient is zero by the antisymmetry of ``E(x) - E(x')``).  We build ``g`` from a transition
kernel ``Gamma`` that satisfies detailed balance for the model at reference parameters
``theta'`` (the MPF paper's sampled connectivity),

    g(x', x) = Gamma(x' | x) exp( (E_theta'(x') - E_theta'(x)) / 2 ),

which is symmetric by detailed balance.  ``Gamma`` is one Hamiltonian Monte Carlo step of
the model at ``theta'``: a fixed momentum ``v ~ N(0, I)``, ``n_leapfrog`` leapfrog steps of
size ``step_size``, Metropolis accept / reject with a fixed uniform.  Drawing one ``x'`` per
data point from ``Gamma(. | x)`` (once, from the seeded generator) gives the Monte Carlo
objective

    K(theta) = 1/|D| sum_i exp( ( [E_theta(x_i) - E_theta(x'_i)] - [E_theta'(x_i) - E_theta'(x'_i)] ) / 2 ),

a deterministic function of ``theta`` (the ``x'_i`` do not move with ``theta``) that L-BFGS
minimises; ``K(theta') = 1``.  A rejected proposal gives ``x'_i = x_i``, a constant term 1
that does not move the minimiser.  With ``antithetic=True`` (default) every data point is
used twice, with momenta ``v`` and ``-v``: this cancels the first-order (in ``step_size``)
noise of the gradient, which otherwise dominates the second-order signal.

Because ``Gamma`` at a poor ``theta'`` proposes uninformative ``x'``, training runs
``n_rounds`` rounds: each round sets ``theta' <-`` the current parameters, draws fresh
momenta and uniforms, recomputes the ``x'_i`` and runs L-BFGS for ``n_iter / n_rounds``
iterations.  ``step_size="auto"`` starts at 0.5 (whitened data), halves it while the HMC
acceptance is below ``min_acceptance`` and grows it by 1.5 after a round accepting > 95 %.
L-BFGS minimises ``log K`` (same minimiser, numerically stable via log-sum-exp); gradients
come from torch autograd, the optimiser is ``scipy.optimize.minimize(method="L-BFGS-B")``.
Positivity constraints are handled by log-parametrisation (``lambda``, ``sigma``; see the
models' ``train_parameters``).  The paper gives no further detail of its Hamiltonian
``Gamma``; this construction is our reading of it.

The model protocol used here: ``model.train_parameters() -> dict[str, Tensor]``,
``model.energy_from_parameters(theta, x) -> (n,)``, ``model.with_parameters(theta) -> model``,
``model.energy(x)`` and optionally ``model.energy_grad(x)``
(:class:`~logzbench.models.poe.ProductOfExperts`, :class:`~logzbench.models.mcrbm.MCRBM`).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import scipy.optimize
import torch

from .hyperparams import REQUIRED, MPFParams, takes
from .trainer import TrainingDivergedError

_SEED_TAG = 0x4D5046  # "MPF"


def _grad_fn(model):
    if hasattr(model, "energy_grad"):
        return model.energy_grad

    def grad(x):
        with torch.enable_grad():
            xg = x.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(model.energy(xg).sum(), xg)
        return g

    return grad


def hmc_connectivity(
    model,
    x: torch.Tensor,
    generator: torch.Generator,
    *,
    step_size: float,
    n_leapfrog: int = 1,
    antithetic: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """One HMC step of ``model`` from every row of ``x``: ``(x', E(x) - E(x'), acceptance rate)``.

    Parameters
    ----------
    model
        Has ``energy`` (and optionally ``energy_grad``).
    x : torch.Tensor, shape (n, M), float64
    generator : torch.Generator
        Draws the momenta ``v ~ N(0, I)`` and the accept uniforms.
    step_size : float
    n_leapfrog : int

    Returns
    -------
    x_new : torch.Tensor, shape (n, M)
        The proposal where accepted, else ``x``.
    delta : torch.Tensor, shape (n,)
        ``E(x) - E(x_new)`` under ``model`` (0 where rejected).
    acceptance : float
    """
    grad = _grad_fn(model)
    with torch.no_grad():
        if antithetic:
            if x.shape[0] % 2:
                raise ValueError("antithetic momenta need an even number of rows (each point twice)")
            v = torch.randn(
                (x.shape[0] // 2, x.shape[1]), generator=generator, dtype=torch.float64, device=generator.device
            ).to(x.device)
            v = torch.cat([v, -v])
        else:
            v = torch.randn(x.shape, generator=generator, dtype=torch.float64, device=generator.device).to(x.device)
        u = torch.rand(x.shape[0], generator=generator, dtype=torch.float64, device=generator.device).to(x.device)
        e0 = model.energy(x)
        xp, vp = x, v
        vp = vp - 0.5 * step_size * grad(xp)
        for i in range(n_leapfrog):
            xp = xp + step_size * vp
            vp = vp - (step_size if i + 1 < n_leapfrog else 0.5 * step_size) * grad(xp)
        e1 = model.energy(xp)
        log_accept = (e0 + 0.5 * (v * v).sum(dim=1)) - (e1 + 0.5 * (vp * vp).sum(dim=1))
        ok = torch.isfinite(log_accept) & (torch.log(u) < log_accept)
        x_new = torch.where(ok[:, None], xp, x)
        delta = torch.where(ok, e0 - e1, torch.zeros_like(e0))
    return x_new, delta, float(ok.double().mean())


class _Flat:
    """Flatten the free tensors of a dict to a float64 NumPy vector and back; the ``fixed`` ones are
    kept as they are and returned by :meth:`unpack` unchanged (no gradient)."""

    def __init__(self, theta: dict[str, torch.Tensor], fixed: tuple[str, ...] = ()):
        self.keys = [k for k in theta if k not in fixed]
        self.fixed = {k: theta[k].detach().clone() for k in theta if k in fixed}
        self.shapes = [theta[k].shape for k in self.keys]
        self.sizes = [int(theta[k].numel()) for k in self.keys]
        self.device = next(iter(theta.values())).device

    def pack(self, theta: dict[str, torch.Tensor]) -> np.ndarray:
        return np.concatenate([theta[k].detach().cpu().reshape(-1).numpy() for k in self.keys]).astype(np.float64)

    def unpack(self, vec: np.ndarray, requires_grad: bool = False) -> dict[str, torch.Tensor]:
        out, i = {}, 0
        for k, shape, size in zip(self.keys, self.shapes, self.sizes):
            t = torch.as_tensor(vec[i : i + size], dtype=torch.float64).reshape(shape).to(self.device)
            out[k] = t.requires_grad_(requires_grad)
            i += size
        out.update(self.fixed)
        return out


def mpf_log_objective(
    model, theta: dict[str, torch.Tensor], x: torch.Tensor, x_new: torch.Tensor, delta_ref: torch.Tensor
) -> torch.Tensor:
    """``log K(theta)`` for fixed pairs ``(x, x_new)`` and ``delta_ref = E_theta'(x) - E_theta'(x_new)``."""
    e = model.energy_from_parameters(theta, torch.cat([x, x_new]))
    n = x.shape[0]
    a = 0.5 * ((e[:n] - e[n:]) - delta_ref)
    return torch.logsumexp(a, dim=0) - math.log(n)


@takes(MPFParams, ("model", REQUIRED), ("X_train", REQUIRED))
def train_mpf(model, X_train, hp: MPFParams) -> tuple[Any, list[dict]]:
    """Fit ``model`` to ``X_train`` by minimum probability flow with L-BFGS (module docstring).

    Parameters
    ----------
    model : ProductOfExperts or MCRBM
        The initial model (e.g. ``ProductOfExperts.random(M, L, seed=...)``); not modified.
    X_train : array-like or torch.Tensor, shape (n, M)
        Training data (float64; NaN / inf refused).
    n_iter : int
        Total L-BFGS iterations, split evenly over the rounds.
    seed : int
        Seeds the momenta and accept uniforms of the HMC connectivity (mixed with a fixed
        tag, so the stream differs from ``torch.Generator().manual_seed(seed)``'s): training
        is deterministic for a seed.
    n_rounds : int
        Connectivity refreshes (``theta' <-`` current parameters, new ``x'``).
    step_size : float or "auto"
        Leapfrog step size of the connectivity kernel.  ``"auto"`` starts at 0.5 (whitened,
        unit-variance data), halves it (redrawing the proposals) while the acceptance rate is
        below ``min_acceptance``, and multiplies it by 1.5 for the next round when the
        acceptance exceeds 0.95.  A float is used as is in every round.
    n_leapfrog : int
        Leapfrog steps per HMC proposal.
    antithetic : bool
        Pair every data point with two proposals, from momenta ``v`` and ``-v`` (cancels the
        first-order noise of the objective's gradient; twice the cost per evaluation).
    min_acceptance : float
        Acceptance target of ``step_size="auto"``.
    gtol : float
        L-BFGS projected-gradient tolerance (a round may stop early on convergence).
    fixed : sequence of str
        Names of ``model.train_parameters()`` held at their initial values (the mcRBM's
        ``log_sigma``: :func:`~logzbench.training.continuous.train_continuous`'s ``learn_sigma``).
    weight_decay : float
        Adds ``weight_decay / 2`` times the squared norm of every weight matrix (the 2-D parameters: a
        PoE's filters, an mcRBM's ``P``, ``C``, ``W``; not biases or scales) to the minimised ``log K``.
        MPF's objective looks only at the data's HMC neighbourhood, so it is blind to mass far from the
        data: an mcRBM's mean units can line up their ``W`` rows into a mode at ``sum_j W_j`` hundreds of
        units away while the objective keeps falling.  The decay pins those unseen directions.  (The
        history's ``objective`` then includes the penalty.)
    callback : callable, optional
        ``callback(record)`` after each history record.
    verbose : bool
        Print one line per round.

    Returns
    -------
    model
        The trained model (a new object of the same class).
    history : list of dict
        One record at the start of each round (``objective = 1``) and one per L-BFGS
        iteration, with ``round``, ``iteration`` (global count of L-BFGS iterations),
        ``objective`` (the round's ``K(theta)``), ``log_objective``, ``step_size`` and
        ``acceptance`` (the round's HMC connectivity) and ``seconds`` (cumulative wall clock).

    Raises
    ------
    ValueError
        For NaN / inf / wrongly shaped data or bad settings.
    TrainingDivergedError
        When the objective or the parameters become non-finite.
    """
    eps, auto = _checked_step_size(hp)
    _check_hyperparams(hp, model)
    x = _training_rows(X_train, model)
    # Mix the seed with a tag so that the connectivity's random stream is not the very stream
    # another component seeded with the same integer used (e.g. to sample the training data).
    seed = int(np.random.SeedSequence([int(hp.seed), _SEED_TAG]).generate_state(1)[0])
    generator = torch.Generator().manual_seed(seed)
    x_pair = torch.cat([x, x]) if hp.antithetic else x
    log = _Log(hp.callback)
    n_iter, n_rounds = hp.n_iter, hp.n_rounds
    per_round = [n_iter // n_rounds + (1 if r < n_iter % n_rounds else 0) for r in range(n_rounds)]
    for r, iters in enumerate(per_round):
        if iters == 0:
            continue
        for _ in range(12):  # the connectivity, halving an adapted step until enough is accepted
            x_new, delta_ref, acc = hmc_connectivity(
                model, x_pair, generator, step_size=eps, n_leapfrog=hp.n_leapfrog, antithetic=hp.antithetic
            )
            if not auto or acc >= hp.min_acceptance:
                break
            eps *= 0.5
        info = {"step_size": eps, "acceptance": acc}
        model, res = _fit_round(model, hp, r, iters, (x_pair, x_new, delta_ref), log, info)
        if hp.verbose:
            print(
                f"MPF round {r + 1}/{n_rounds}: step {eps:.3g}, acceptance {acc:.3f}, K {math.exp(res.fun):.6f} "
                f"after {res.nit} iterations ({time.perf_counter() - log.t0:.1f} s)"
            )
        if auto and acc > 0.95:
            eps *= 1.5
    return model, log.history


def _checked_step_size(hp: MPFParams) -> tuple[float, bool]:
    """The first round's leapfrog step and whether it is adapted (``step_size="auto"``: from 0.5)."""
    for name in ("n_iter", "n_rounds"):
        value = getattr(hp, name)
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    auto = isinstance(hp.step_size, str)
    if auto and hp.step_size != "auto":
        raise ValueError(f"step_size must be a positive float or 'auto', got {hp.step_size!r}")
    eps = 0.5 if auto else float(hp.step_size)
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"step_size must be > 0, got {hp.step_size!r}")
    return eps, auto


def _check_hyperparams(hp: MPFParams, model) -> None:
    """ValueError naming the first of MPF's other hyperparameters that cannot train ``model``."""
    if int(hp.n_leapfrog) != hp.n_leapfrog or hp.n_leapfrog < 1:
        raise ValueError(f"n_leapfrog must be a positive integer, got {hp.n_leapfrog!r}")
    if not 0.0 <= hp.min_acceptance < 1.0:
        raise ValueError(f"min_acceptance must be in [0, 1), got {hp.min_acceptance!r}")
    wd = hp.weight_decay
    if not (isinstance(wd, (int, float)) and math.isfinite(wd) and wd >= 0):
        raise ValueError(f"weight_decay must be a finite number >= 0, got {wd!r}")
    names, kind = list(model.train_parameters()), type(model).__name__
    unknown = sorted(set(hp.fixed) - set(names))
    if unknown:
        raise ValueError(f"fixed names {unknown} are not parameters of {kind}; its parameters are {names}")
    if not set(names) - set(hp.fixed):
        raise ValueError(f"fixed holds every parameter of {kind} ({names}): nothing to train")


def _training_rows(X_train, model) -> torch.Tensor:
    """``X_train`` as float64 rows of the model's dimension on its device (ValueError: wrong shape, NaN, inf)."""
    x = X_train if isinstance(X_train, torch.Tensor) else torch.as_tensor(np.asarray(X_train, dtype=np.float64))
    x = x.detach().to(device=model.device, dtype=torch.float64)
    if x.ndim != 2 or x.shape[1] != model.n_dims or x.shape[0] < 1:
        raise ValueError(f"X_train must have shape (n, {model.n_dims}) with n >= 1, got {tuple(x.shape)}")
    bad = ~torch.isfinite(x)
    if bool(bad.any()):
        rows = int(bad.any(dim=1).sum())
        raise ValueError(
            f"X_train contains {int(torch.isnan(x).sum())} NaN and {int(torch.isinf(x).sum())} inf "
            f"entries (in {rows} of {x.shape[0]} rows); clean the data before training"
        )
    return x


class _Log:
    """MPF's history: one row per L-BFGS iteration (numbered across rounds), each passed to ``callback``."""

    def __init__(self, callback):
        self.history: list[dict] = []
        self.callback = callback
        self.t0 = time.perf_counter()
        self.iteration = 0

    def record(self, r: int, objective: float, log_objective: float, info: dict) -> None:
        row = {
            "round": r,
            "iteration": self.iteration,
            "objective": objective,
            "log_objective": log_objective,
            **info,
            "seconds": time.perf_counter() - self.t0,
        }
        self.history.append(row)
        if self.callback is not None:
            self.callback(row)


def _fit_round(model, hp: MPFParams, r: int, iters: int, connectivity: tuple, log: _Log, info: dict):
    """Round ``r``: ``iters`` L-BFGS iterations on MPF's log objective of the fixed ``connectivity``
    ``(x_pair, x_new, delta_ref)``, logged (with ``info``) before the first and after each.  Returns
    ``(model, scipy result)``; TrainingDivergedError when the parameters or the objective are not finite."""
    theta0 = model.train_parameters()
    flat = _Flat(theta0, tuple(hp.fixed))
    cache: dict[bytes, float] = {}
    x_pair, x_new, delta_ref = connectivity

    def fun(vec):
        theta = flat.unpack(vec, requires_grad=True)
        with torch.enable_grad():
            f = mpf_log_objective(model, theta, x_pair, x_new, delta_ref)
            if hp.weight_decay:
                f = f + 0.5 * hp.weight_decay * sum((theta[k] ** 2).sum() for k in flat.keys if theta[k].ndim == 2)
            grads = torch.autograd.grad(f, [theta[k] for k in flat.keys])
        fv = float(f.detach())
        g = np.concatenate([gi.detach().cpu().reshape(-1).numpy() for gi in grads])
        if not (math.isfinite(fv) and np.isfinite(g).all()):
            return math.inf, np.zeros_like(vec)  # the line search backs off
        cache[vec.tobytes()] = fv
        return fv, g

    log.record(r, 1.0, 0.0, info)

    def on_iter(xk):
        log.iteration += 1
        fv = cache.get(np.asarray(xk).tobytes())
        if fv is None:
            fv = fun(np.asarray(xk, dtype=np.float64))[0]
        log.record(r, math.exp(fv), fv, info)

    res = scipy.optimize.minimize(
        fun,
        flat.pack(theta0),
        jac=True,
        method="L-BFGS-B",
        callback=on_iter,
        options={"maxiter": int(iters), "gtol": hp.gtol, "ftol": 0.0},
    )
    if not (np.isfinite(res.x).all() and math.isfinite(res.fun)):
        raise TrainingDivergedError(f"MPF round {r}: the parameters or the objective became non-finite")
    return model.with_parameters(flat.unpack(np.asarray(res.x, dtype=np.float64))), res
