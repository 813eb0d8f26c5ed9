"""Expectation maximisation with a Hamiltonian Monte Carlo E-step for the generative image models
(Sohl-Dickstein & Culpepper 2012, Sec. 4: "Expectation Maximization over the full training set,
with a Hamiltonian Monte Carlo algorithm used during the expectation step to maintain samples
from the posterior distribution", following Culpepper et al. 2011).

Algorithm (:func:`train_em`), a persistent Monte Carlo EM:

1. **Persistent posterior samples.**  Every training row ``x_i`` keeps one latent sample ``z_i``
   (``a`` for the linear models, ``z = (c, d)`` for the bilinear one) and its momentum.  They
   start as exact prior draws, are moved close to the posterior modes by ``n_map`` Adam steps on
   ``-log p(x_i, z)`` (HMC with one step size is very slow to leave the far tails of a posterior
   that is ``sigma_n``-narrow: the leapfrog error grows with the energy excess), and are then
   equilibrated by ``n_burnin`` E-steps before the first M-step.
2. **E-step.**  ``n_transitions`` transitions of a :class:`~logzbench.models.hamiltonian.HamiltonianPath`
   at ``beta = 1`` whose target is the posterior ``p(z | x_i) ∝ exp(-E_prior(z) - E_lik(x_i, z))``
   (all rows batched; the constraint ``d >= 0`` of the bilinear model handled by reflection).
   Kernel ``"hmc"`` (default; ``n_leapfrog`` leapfrog steps, momentum resampled every
   transition) or ``"hais"`` (partial momentum refresh, momentum kept across transitions and EM
   iterations).  The leapfrog step size is adapted after every transition towards the acceptance
   rate ``target_accept`` (``log eps += adapt_rate (acceptance - target_accept)``, acceptance
   averaged over all rows): the posteriors sharpen as the model learns.  Each transition leaves
   the current posterior invariant; the adaptation only uses past transitions.
3. **M-step** (``sigma_n`` stays fixed, as in the paper).
   *Linear models* (:class:`~logzbench.models.linear_generative.LinearGenerative`): the exact
   maximiser over ``Phi`` of the Monte Carlo EM objective ``sum_i E_q[log p(x_i | a)]``:
   least squares ``Phi = S_xa (S_aa + ridge I)^-1``, ``S_xa = mean x a^T``, ``S_aa = mean a a^T``
   averaged over the rows and over every transition of the E-step.
   *Bilinear model* (:class:`~logzbench.models.bilinear.BilinearGenerative`): ``n_mstep`` Adam
   steps (learning rate ``lr``) on ``mean_i |x_i - Phi a(z_i)|^2 / 2`` (the expected negative
   log-likelihood times ``sigma_n^2``) w.r.t. ``Phi``, ``Theta``, ``Psi`` at the E-step's final
   samples.  After every step the gauge is fixed by
   :meth:`~logzbench.models.bilinear.BilinearGenerative.normalized` (``||Phi[:, l]|| = 1``,
   ``||Psi[l, :]|| = 1``, the scales moved into ``Theta``), which removes the scale ambiguity
   without changing the distribution.
4. **Parameter expansion** (``parameter_expansion=True``; PX-EM, Liu, Rubin & Wu 1998).  With a
   small, fixed ``sigma_n`` plain EM is extremely slow along the directions that only the prior
   determines (e.g. the scale and rotation of ``Phi`` within its column space: the rate is about
   ``1 - sigma_n^2 / lambda``).  PX-EM also fits the prior's scale during the M-step and folds it
   back into the weights, which leaves the EM fixed points (the maximum-likelihood solutions)
   unchanged and is still monotone with an exact E-step:

   * Gaussian prior: fit ``a ~ N(0, S_aa)``; with ``S_aa = T T^T`` (Cholesky),
     ``Phi <- Phi T`` and every persistent sample ``a <- T^-1 a``;
   * Laplace prior: fit per-coordinate scales ``s_l = mean |a_l|`` (the Laplace ML scale);
     ``Phi[:, l] <- s_l Phi[:, l]``, ``a_l <- a_l / s_l``;
   * bilinear: ``s = mean |c_k|`` (Laplace) and ``mean d_k`` (exponential) per latent
     coordinate; ``Theta[:, k]`` / ``Psi[:, k]`` are multiplied by them and ``c_k`` / ``d_k``
     divided, then the gauge is re-fixed.

   The samples are transformed with the weights, so ``Phi a`` and hence each chain's fit to its
   row are unchanged.

History: one record per EM iteration with ``objective`` = the mean joint energy
``-log p(x_i, z_i)`` of the persistent samples under the updated model (a Monte Carlo estimate
of ``-Q``, the quantity the M-step decreases), ``recon`` = mean ``|x_i - Phi a_i|^2``,
``acceptance``, ``step_size``, ``seconds`` (cumulative wall time), and ``exact_log_likelihood``
(mean ``log p(x_i)``) where the model has a closed form (Gaussian prior, or ``Phi = 0``).

Everything random comes from one :class:`torch.Generator` seeded with ``seed``: the same call
gives the same model and history (up to ``seconds``).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from ..models.bilinear import BilinearGenerative
from ..models.hamiltonian import HamiltonianPath
from ..models.linear_generative import LinearGenerative
from .hyperparams import REQUIRED, EMParams, rules, takes

GenerativeModel = LinearGenerative | BilinearGenerative

#: E-step kernels accepted by :func:`train_em`
EM_KERNELS = rules(EMParams)["kernel"].choices


def _check_data(X, model) -> torch.Tensor:
    X = torch.as_tensor(np.asarray(X, dtype=np.float64) if not torch.is_tensor(X) else X, dtype=torch.float64)
    if X.ndim != 2:
        raise ValueError(f"X_train must be 2-D (n_rows x {model.n_dims}), got shape {tuple(X.shape)}")
    if X.shape[1] != model.n_dims:
        raise ValueError(f"X_train has {X.shape[1]} columns but the model has n_dims = {model.n_dims}")
    if X.shape[0] == 0:
        raise ValueError("X_train has no rows")
    bad = ~torch.isfinite(X)
    if bool(bad.any()):
        kinds = [k for k, m in (("NaN", torch.isnan(X)), ("inf", torch.isinf(X))) if bool(m.any())]
        rows = torch.nonzero(bad.any(dim=1)).flatten()
        raise ValueError(
            f"X_train contains {' and '.join(kinds)} ({int(bad.sum())} entries in {rows.numel()} rows, "
            f"first row {int(rows[0])}); remove or impute them before training"
        )
    return X.to(model.device)


def posterior_path(
    model: GenerativeModel,
    X: torch.Tensor,
    *,
    kernel: str = "hais",
    step_size: float = 0.2,
    n_leapfrog: int = 1,
    gamma: float | None = None,
) -> HamiltonianPath:
    """The path from the prior to the posteriors ``p(z | x_i)`` of the rows of ``X`` (batched:
    chain ``i`` belongs to row ``i``), with the model's analytic gradients.

    ``energy0 = prior_energy`` (``log Z_0 = prior_log_z()``), ``energy1 = prior_energy +
    prior_log_z() + likelihood_energy(X, .) = -log p(x_i, z)``; at ``beta = 1`` its transitions
    sample the posteriors, and the normaliser of ``exp(-energy1)`` for one row is ``p(x_i)``
    (Eq. 29), so AIS on this path estimates ``log p(x_i)`` directly.

    Parameters
    ----------
    model : LinearGenerative or BilinearGenerative
    X : torch.Tensor, shape (n, M)
        One row per chain (repeat rows for several chains per data point).
    kernel, step_size, n_leapfrog, gamma
        See :class:`~logzbench.models.hamiltonian.HamiltonianPath`.
    """
    log_z_prior = model.prior_log_z()

    def energy1(z):
        return model.prior_energy(z) + log_z_prior + model.likelihood_energy(X, z)

    def grad1(z):
        return model.prior_energy_grad(z) + model.likelihood_energy_grad(X, z)

    return HamiltonianPath(
        model.prior_energy,
        model.sample_prior,
        log_z_prior,
        energy1,
        kernel=kernel,
        step_size=step_size,
        gamma=gamma,
        n_leapfrog=n_leapfrog,
        lower=model.latent_lower(),
        grad0=model.prior_energy_grad,
        grad1=grad1,
    )


# ---------------------------------------------------------------------- M-steps
def _linear_mstep(
    model: LinearGenerative, stats: dict, Z: torch.Tensor, ridge: float, expand: bool
) -> tuple[LinearGenerative, torch.Tensor]:
    """Least-squares ``Phi`` (and the PX-EM prior rescaling); returns the model and the
    transformed persistent samples."""
    S_xa, S_aa = stats["xa"], stats["aa"]
    L = S_aa.shape[0]
    eye = torch.eye(L, dtype=torch.float64, device=S_aa.device)
    Phi = torch.linalg.solve(S_aa + ridge * eye, S_xa.T).T  # S_xa (S_aa + ridge I)^-1, S_aa symmetric
    if expand:
        if model.prior == "gaussian":
            T = torch.linalg.cholesky(S_aa + ridge * eye)  # a ~ N(0, T T^T) = T N(0, I)
            Phi = Phi @ T
            Z = torch.linalg.solve_triangular(T, Z.T, upper=False).T  # a <- T^-1 a
        else:
            s = stats["abs"].clamp_min(1e-12)  # Laplace ML scale per coordinate
            Phi = Phi * s
            Z = Z / s
    return LinearGenerative(Phi, sigma_n=model.sigma_n, prior=model.prior, device=model.device), Z


class _BilinearMStep:
    """Adam on (Phi, Theta, Psi) with the gauge re-fixed after every step."""

    def __init__(self, model: BilinearGenerative, lr: float):
        m = model.normalized()
        self.params = [
            m.Phi.clone().requires_grad_(True),
            m.Theta.clone().requires_grad_(True),
            m.Psi.clone().requires_grad_(True),
        ]
        self.sigma_n = model.sigma_n
        self.opt = torch.optim.Adam(self.params, lr=lr)

    def model(self) -> BilinearGenerative:
        Phi, Theta, Psi = (p.detach().clone() for p in self.params)
        return BilinearGenerative(Phi, Theta, Psi, sigma_n=self.sigma_n, device=Phi.device)

    def _set(self, m: BilinearGenerative) -> None:
        with torch.no_grad():
            for p, v in zip(self.params, (m.Phi, m.Theta, m.Psi)):
                p.copy_(v)

    def step(self, X: torch.Tensor, Z: torch.Tensor, n_steps: int) -> None:
        Phi, Theta, Psi = self.params
        Kc = Theta.shape[1]
        c, d = Z[:, :Kc], Z[:, Kc:]
        for _ in range(n_steps):
            self.opt.zero_grad()
            with torch.enable_grad():
                a = (c @ Theta.T) * (d @ Psi.T)
                loss = 0.5 * ((X - a @ Phi.T) ** 2).sum(dim=1).mean()
                loss.backward()
            self.opt.step()
            self._set(self.model().normalized())

    def expand(self, Z: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """Fold the fitted prior scales ``scale`` (per latent coordinate) into ``Theta`` / ``Psi``;
        returns the rescaled samples."""
        Phi, Theta, Psi = self.params
        Kc = Theta.shape[1]
        s = scale.clamp_min(1e-12)
        m = BilinearGenerative(
            Phi.detach(), Theta.detach() * s[:Kc], Psi.detach() * s[Kc:], sigma_n=self.sigma_n, device=Phi.device
        )
        self._set(m.normalized())
        return Z / s


def _descend(model, X: torch.Tensor, Z: torch.Tensor, n_steps: int, lr: float) -> torch.Tensor:
    """``n_steps`` Adam steps on ``sum_i -log p(x_i, z_i)`` (rows independent), projected onto the
    support; moves prior draws close to the posterior modes before sampling starts."""
    lower = model.latent_lower()
    Z = Z.detach().clone()
    opt = torch.optim.Adam([Z], lr=lr)
    for _ in range(n_steps):
        Z.grad = model.prior_energy_grad(Z) + model.likelihood_energy_grad(X, Z)
        opt.step()
        if lower is not None:
            Z = torch.maximum(Z, lower, out=Z)
    return Z.detach()


# ---------------------------------------------------------------------- driver
@takes(EMParams, ("model", REQUIRED), ("X_train", REQUIRED))
def train_em(model: GenerativeModel, X_train, hp: EMParams) -> tuple[GenerativeModel, list[dict]]:
    """Fit a generative model by Monte Carlo EM with an HMC E-step (see the module docstring).

    Parameters
    ----------
    model : LinearGenerative or BilinearGenerative
        Initial model (not modified; ``sigma_n`` is kept fixed).
    X_train : array-like, shape (n_rows, M)
        Training data (finite; NaN / inf are refused).
    n_iter : int
        EM iterations (each: one E-step, one M-step).
    seed : int
        Seeds the single :class:`torch.Generator` used for everything random.
    kernel : {"hmc", "hais"}
        Hamiltonian kernel of the E-step.
    n_transitions : int
        Kernel transitions per E-step.
    n_leapfrog : int
        Leapfrog steps per transition.
    n_burnin : int
        E-steps before the first M-step.
    n_map : int
        Adam steps towards the posterior modes before the burn-in (0: start from prior draws).
    map_lr : float
        Their learning rate.
    step_size : float, optional
        Initial leapfrog step size (default ``sigma_n``, the posterior's scale for unit-norm
        basis functions); adapted afterwards.
    target_accept : float
        Acceptance rate the step size is adapted towards.
    adapt_rate : float
        Gain of the adaptation ``log eps += adapt_rate (acceptance - target_accept)``.
    parameter_expansion : bool
        PX-EM prior rescaling after each M-step (module docstring, item 4).
    ridge : float
        Tikhonov term of the linear least-squares M-step.
    lr : float
        Adam learning rate of the bilinear M-step.
    n_mstep : int
        Adam steps per bilinear M-step.
    monitor_exact : bool
        Record ``exact_log_likelihood`` (mean over the rows) when the model has a closed form.
    callback : callable, optional
        ``callback(iteration, model, record)`` after each iteration.

    Returns
    -------
    model : same type as ``model``
        The trained model (bilinear: in the normalised gauge).
    history : list of dict
        Per iteration: ``iteration``, ``objective`` (mean ``-log p(x_i, z_i)`` at the persistent
        samples), ``recon`` (mean ``|x_i - Phi a_i|^2``), ``acceptance``, ``step_size``,
        ``seconds`` (cumulative), and ``exact_log_likelihood`` where available.

    Raises
    ------
    ValueError
        On bad data (NaN / inf, wrong shape), an unknown model or kernel, or bad settings.
    FloatingPointError
        If the joint energy becomes non-finite (divergence).
    """
    _check_hyperparams(model, hp)
    X = _check_data(X_train, model)
    n = X.shape[0]
    eps = float(model.sigma_n if hp.step_size is None else hp.step_size)
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"step_size must be > 0, got {hp.step_size!r}")
    gen = torch.Generator(device=model.device).manual_seed(int(hp.seed))
    bilinear = isinstance(model, BilinearGenerative)
    model = model.normalized() if bilinear else model.copy()
    mstep = _BilinearMStep(model, hp.lr) if bilinear else None

    Z = model.sample_prior(n, gen)
    V = torch.randn(Z.shape, generator=gen, dtype=torch.float64, device=Z.device)
    t0 = time.perf_counter()
    if hp.n_map:
        Z = _descend(model, X, Z, int(hp.n_map), hp.map_lr)
    for _ in range(int(hp.n_burnin)):
        Z, V, _acc, eps, _ = _e_step(model, X, Z, V, eps, hp, gen)

    history: list[dict] = []
    for it in range(int(hp.n_iter)):
        eps_used = eps
        Z, V, acc, eps, stats = _e_step(model, X, Z, V, eps, hp, gen)
        if bilinear:
            mstep.step(X, Z, int(hp.n_mstep))
            if hp.parameter_expansion:
                Z = mstep.expand(Z, stats["abs"])
            model = mstep.model()
        else:
            model, Z = _linear_mstep(model, stats, Z, hp.ridge, hp.parameter_expansion)
        rec = _row(model, X, Z, it, {"acceptance": float(acc), "step_size": eps_used}, hp.monitor_exact)
        rec["seconds"] = time.perf_counter() - t0
        history.append(rec)
        if hp.callback is not None:
            hp.callback(it, model, rec)
    return model, history


def _check_hyperparams(model, hp: EMParams) -> None:
    """ValueError naming the model's type or the first hyperparameter EM cannot train it with."""
    if not isinstance(model, (LinearGenerative, BilinearGenerative)):
        raise ValueError(f"train_em needs a LinearGenerative or BilinearGenerative model, got {type(model).__name__}")
    if hp.kernel not in EM_KERNELS:
        raise ValueError(f"kernel must be one of {EM_KERNELS}, got {hp.kernel!r}")
    for name, least in (
        ("n_iter", 0),
        ("n_transitions", 1),
        ("n_leapfrog", 1),
        ("n_burnin", 0),
        ("n_map", 0),
        ("n_mstep", 1),
    ):
        value = getattr(hp, name)
        if isinstance(value, bool) or int(value) != value or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    if not (0.0 < hp.target_accept < 1.0):
        raise ValueError(f"target_accept must be in (0, 1), got {hp.target_accept!r}")


def _e_step(model, X: torch.Tensor, Z: torch.Tensor, V: torch.Tensor, eps: float, hp: EMParams, gen):
    """``n_transitions`` transitions at beta = 1 from ``(Z, V)``; returns samples, momenta, acceptance, the
    adapted step size and sufficient statistics averaged over rows and transitions."""
    bilinear = isinstance(model, BilinearGenerative)
    path = posterior_path(model, X, kernel=hp.kernel, step_size=eps, n_leapfrog=hp.n_leapfrog)
    state = path.state_from_data(Z)._replace(v=V)
    D = model.n_latent
    stats = {
        "xa": torch.zeros(model.n_dims, D, dtype=torch.float64, device=X.device),
        "aa": torch.zeros(D, D, dtype=torch.float64, device=X.device),
        "abs": torch.zeros(D, dtype=torch.float64, device=X.device),
    }
    for _ in range(int(hp.n_transitions)):
        n_prop, n_acc = path.n_proposed, path.n_accepted
        state = path.transition(state, 1.0, gen)
        acc_t = (path.n_accepted - n_acc) / max(path.n_proposed - n_prop, 1)
        eps = eps * math.exp(hp.adapt_rate * (acc_t - hp.target_accept))
        path.step_size = eps
        if not bilinear:
            stats["xa"] += X.T @ state.x
            stats["aa"] += state.x.T @ state.x
        stats["abs"] += state.x.abs().sum(dim=0)
    for v in stats.values():
        v /= X.shape[0] * hp.n_transitions
    return state.x, state.v, path.acceptance_rate, eps, stats


def _row(model, X: torch.Tensor, Z: torch.Tensor, it: int, sampler: dict, monitor_exact: bool) -> dict:
    """Iteration ``it``'s row: the mean joint energy and reconstruction error (FloatingPointError where the
    joint energy is not finite: the model diverged), the E-step's ``sampler`` values, and the exact
    log-likelihood when asked and tractable."""
    with torch.no_grad():
        joint = model.prior_energy(Z) + model.prior_log_z() + model.likelihood_energy(X, Z)
        recon = ((X - model.mean(Z)) ** 2).sum(dim=1)
    if not bool(torch.isfinite(joint).all()):
        raise FloatingPointError(f"EM iteration {it}: non-finite joint energy (the model diverged)")
    row = {"iteration": it, "objective": float(joint.mean()), "recon": float(recon.mean()), **sampler}
    if monitor_exact:
        ll = model.exact_log_likelihood(X)
        if ll is not None:
            row["exact_log_likelihood"] = float(ll.mean())
    return row
