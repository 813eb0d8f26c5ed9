"""Training the continuous models of Sohl-Dickstein & Culpepper (2012), Sec. 4.

Analysis models (products of experts, mcRBM) are fitted by minimum probability flow with
L-BFGS (:func:`logzbench.training.mpf.train_mpf`); generative models (linear with Gaussian or
Laplace prior, bilinear) by Monte Carlo EM with an HMC E-step
(:func:`logzbench.training.em.train_em`).  :func:`train_continuous` builds a seeded random
initial model of the requested family and size and calls the right trainer.

The mcRBM's visible scale ``sigma`` is held at 1 unless ``learn_sigma`` is set: the HAIS paper takes
the mcRBM's energy from Ranzato's released code, whose quadratic term is ``x^T x / 2`` on whitened
data, and MPF, whose objective only looks at the data's HMC neighbourhood, lets a learned ``sigma``
grow without bound (to about 2,600 on ``mcrbm-432``), which spreads the density's mass far from the
data where the objective never looks: HAIS's ``log Z`` then grows with the number of steps.
"""

from __future__ import annotations

import inspect
import time

import numpy as np
import torch

from .. import registry
from .hyperparams import FAMILY_ONLY, REQUIRED, ContinuousParams, takes

#: continuous family -> its kind (``analysis`` or ``generative``), from the registry
CONTINUOUS_FAMILIES = {name: registry.family(name).kind for name in registry.family_names(("analysis", "generative"))}


def initial_model(family: str, n_dims: int, size: int, *, seed: int = 0, device=None):
    """A seeded random model of ``family`` with ``size`` experts / units / latent variables."""
    from ..models.bilinear import BilinearGenerative
    from ..models.linear_generative import LinearGenerative
    from ..models.mcrbm import MCRBM
    from ..models.poe import ProductOfExperts

    g = torch.Generator().manual_seed(int(seed))
    if family in ("poe-laplace", "poe-student-t"):
        # filters with orthonormal columns (Phi^T Phi = I): no direction starts flat.  A Gaussian
        # random square Phi has a near-zero singular value about once in M draws, and MPF does not
        # recover from the resulting almost flat direction in a reasonable number of iterations.
        if size < n_dims:
            raise ValueError(
                f"a product of experts needs at least as many experts as dimensions ({n_dims}), "
                f"got size {size} (Z would be infinite)"
            )
        G = torch.randn(size, n_dims, generator=g, dtype=torch.float64)
        Q, _ = torch.linalg.qr(G)
        lam = None if family == "poe-laplace" else torch.full((size,), 2.0, dtype=torch.float64)
        return ProductOfExperts(Q, lam, expert=family.removeprefix("poe-"), device=device)
    if family == "mcrbm":
        return MCRBM.random(n_dims, size, generator=g, device=device)
    if family in ("linear-gaussian", "linear-laplace"):
        return LinearGenerative.random(n_dims, size, prior=family.removeprefix("linear-"), generator=g, device=device)
    if family == "bilinear":
        n_c = max(1, size // 2)
        return BilinearGenerative.random(n_dims, n_dims, n_c, max(1, size - n_c), generator=g, device=device)
    raise ValueError(f"unknown continuous family {family!r}; choose one of {sorted(CONTINUOUS_FAMILIES)}")


@takes(ContinuousParams, ("train", REQUIRED), ("test", None), more="trainer_kwargs")
def train_continuous(train, test, hp: ContinuousParams, **trainer_kwargs):
    """Train a continuous model; returns ``(model, history)``.

    Parameters
    ----------
    train : array-like, shape (n, M)
        Training rows (whitened PCA coefficients), float64.
    test : array-like, shape (n_test, M), optional
        Held-out rows; when the model has a closed-form log-likelihood, the final history row
        records its mean test log-likelihood.
    family : str
        One of :data:`CONTINUOUS_FAMILIES`.
    size : int
        Experts (PoE), mean + covariance units (mcRBM), latent dimension (linear), latent
        variables ``Kc + Kd`` (bilinear).
    seed : int
        Seeds the initial model and the trainer.
    n_iter : int
        L-BFGS iterations (MPF) or EM iterations.
    learn_sigma : bool
        mcRBM only: fit the visible scale ``sigma`` too (default: held at 1; module docstring).
    **trainer_kwargs
        Further keyword arguments of :func:`~logzbench.training.mpf.train_mpf` or
        :func:`~logzbench.training.em.train_em`.
    """
    if hp.family not in CONTINUOUS_FAMILIES:
        raise ValueError(f"unknown continuous family {hp.family!r}; choose one of {sorted(CONTINUOUS_FAMILIES)}")
    X = np.asarray(train, dtype=np.float64)
    if X.ndim != 2:  # the trainers check the values (NaN / inf, naming the row)
        raise ValueError(f"training data must be real rows (n, M), got shape {X.shape}")
    if CONTINUOUS_FAMILIES[hp.family] == "analysis":
        from .mpf import train_mpf as fit
    else:
        from .em import train_em as fit
    valid = set(inspect.signature(fit).parameters) - {"model", "X_train", "n_iter", "seed"}
    unknown = sorted(set(trainer_kwargs) - valid)
    if unknown:
        raise ValueError(
            f"unknown hyperparameter(s) {unknown} for {hp.family} ({fit.__name__}); valid: {sorted(valid)}"
        )
    if hp.learn_sigma not in (True, False):
        raise ValueError(f"learn_sigma must be true or false, got {hp.learn_sigma!r}")
    if hp.family not in FAMILY_ONLY["learn_sigma"]:
        if hp.learn_sigma:
            raise ValueError(
                f"learn_sigma applies to the {'/'.join(FAMILY_ONLY['learn_sigma'])} family only, not {hp.family!r}"
            )
    elif not hp.learn_sigma:
        trainer_kwargs["fixed"] = (*tuple(trainer_kwargs.get("fixed", ())), "log_sigma")
    model0 = initial_model(hp.family, X.shape[1], int(hp.size), seed=hp.seed, device=hp.device)
    t0 = time.perf_counter()
    model, history = fit(model0, X, n_iter=int(hp.n_iter), seed=int(hp.seed), **trainer_kwargs)
    history = [dict(r) for r in history]
    if test is not None and history:
        Xt = torch.as_tensor(np.asarray(test, dtype=np.float64), device=model.device)
        exact = None
        if model.kind == "analysis":
            try:
                log_z = model.exact_log_z()
            except ValueError as exc:  # e.g. a complete Student's t PoE with some lambda <= 1/2: Z is infinite
                history[-1]["note"] = str(exc)
                log_z = None
            if log_z is not None:
                exact = float((-model.energy(Xt)).mean()) - float(log_z)
        else:
            ll = model.exact_log_likelihood(Xt)
            if ll is not None:
                exact = float(ll.mean())
        if exact is not None:
            history[-1]["test_exact_log_likelihood"] = exact
    if history:
        history[-1].setdefault("train_seconds", time.perf_counter() - t0)
    return model, history
