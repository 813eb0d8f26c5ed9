"""Training Gaussian-Bernoulli RBMs by CD-k or PCD-k with Adam or SGD.

The model (:class:`~logzbench.models.grbm.GaussianBernoulliRBM`) has the energy
``E(v, h) = ||v - b||^2 / (2 sigma^2) - c.h - v^T W h / sigma`` with ``sigma`` fixed (1 on
standardised data, as in the AVIL paper, Sec. 5.6).  The log-likelihood gradient is the data
expectation minus the model expectation of ``-dE/dtheta``:

    d/dW = <v p^T>_+ / sigma - <v p^T>_- / sigma,   d/db = (<v>_+ - <v>_-) / sigma^2,   d/dc = <p>_+ - <p>_-,

with ``p = p(h = 1 | v) = sigmoid(c + W^T v / sigma)`` (hidden probabilities in the statistics, a
Rao-Blackwellisation, as in :mod:`logzbench.training.trainer`).  The negative phase runs ``k``
block-Gibbs sweeps ``h ~ p(h | v)``, ``v ~ N(b + sigma W h, sigma^2 I)``: from the minibatch (CD) or
from persistent chains carried across updates (PCD).  The gradient ascent step is Adam (Kingma & Ba
2014) or SGD with momentum, with L2 weight decay on ``W``.

Every random draw (initial weights, epoch shuffles, persistent chains, Gibbs sampling) comes from
one :class:`torch.Generator` seeded by ``seed``: the same seed and data give the same model.  When
``n_hidden <= exact_ll_max_units`` each epoch records the exact ``log Z`` (``2^H`` states) and the
exact mean log-likelihoods, so training can be watched against the truth.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch

from ..models.grbm import GaussianBernoulliRBM
from ..utils import make_generator, resolve_device
from .hyperparams import GRBMParams, rules
from .trainer import TrainingDivergedError, _check_declared, _check_real, _elapsed, _subsamples, _train_test_rows

__all__ = ["GRBMHyperparams", "train_grbm"]

#: the declared choices (tuples, as the messages show them)
_METHODS, _OPTIMIZERS = (rules(GRBMParams)[name].choices for name in ("method", "optimizer"))


class GRBMHyperparams(GRBMParams):
    """The hyperparameters of :func:`train_grbm` (its keyword arguments), with their defaults.

    Parameters
    ----------
    n_hidden : int
        Hidden units ``H``.
    sigma : float
        The visible units' fixed standard deviation (``> 0``; 1 on standardised data).
    method : {"cd", "pcd"}
        Contrastive divergence (chains restarted at the minibatch) or persistent CD.
    k : int
        Gibbs sweeps per update.
    optimizer : {"adam", "sgd"}
        Adam with ``adam_betas``, or SGD with ``momentum``.
    learning_rate : float
        Step size.
    adam_betas : (float, float)
        Adam's moving-average ratios (the AVIL paper uses ``(0.5, 0.999)``).
    momentum : float
        SGD momentum in ``[0, 1)``.
    batch_size : int
        Rows per minibatch (the last of an epoch may be smaller).
    n_epochs : int
        Passes over the training data (0 returns the initial model).
    weight_decay : float
        L2 penalty on ``W`` (``-weight_decay * W`` added to its gradient).
    init_scale : float
        Initial weights ``N(0, init_scale^2)``; ``b`` starts at the training mean, ``c`` at 0.
    n_persistent_chains : int, optional
        PCD chains (default ``batch_size``), started at random training rows.
    exact_ll_max_units : int
        Record the exact ``log Z`` and log-likelihoods each epoch when ``n_hidden`` is at most this.
    eval_subsample : int
        Evaluate the per-epoch metrics on at most this many rows of each data set.
    seed : int
        Seed of the training generator.
    device : str or torch.device
        ``"cpu"``, ``"cuda"`` or ``"auto"``.
    progress : bool
        Progress bar over epochs.
    """

    def check(self) -> None:
        """Raise ``ValueError`` naming the first invalid hyperparameter (their declared bounds)."""
        _check_declared(
            self, "n_hidden k batch_size n_epochs exact_ll_max_units eval_subsample seed n_persistent_chains"
        )
        if self.method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {self.method!r}")
        if self.optimizer not in _OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {_OPTIMIZERS}, got {self.optimizer!r}")
        _check_declared(self, "sigma learning_rate momentum weight_decay init_scale")
        betas = tuple(self.adam_betas) if isinstance(self.adam_betas, (tuple, list)) else ()
        if len(betas) != 2:
            raise ValueError(f"adam_betas must be two numbers in [0, 1), got {self.adam_betas!r}")
        for beta in betas:
            _check_real("adam_betas", beta, 0.0, 1.0, high_open=True)


def train_grbm(train, test=None, *, family: str = "grbm", **hyperparams) -> tuple[GaussianBernoulliRBM, list[dict]]:
    """Train a GRBM; returns ``(model, history)``.

    Parameters
    ----------
    train : array-like, shape (n_train, D)
        Real training rows (standardise them for ``sigma = 1``).
    test : array-like, shape (n_test, D), optional
        Held-out rows, only evaluated.
    family : {"grbm"}
        Passed on by :func:`logzbench.training.train_model`; anything else is refused.
    **hyperparams
        Fields of :class:`GRBMHyperparams` (``n_hidden``, ``sigma``, ``method``, ``k``, ``optimizer``,
        ``learning_rate``, ``batch_size``, ``n_epochs``, ...).

    Returns
    -------
    model : GaussianBernoulliRBM
    history : list of dict
        One record per epoch (epoch 0: the initial model): ``epoch``, ``learning_rate``, ``seconds``
        (training time of the epoch), ``eval_seconds``, ``train_reconstruction_error`` (mean squared
        error of ``E[v | h = p(h | v)]`` per row) and, with a test set, ``test_reconstruction_error``;
        when ``n_hidden <= exact_ll_max_units`` also ``log_z``, ``train_log_likelihood`` and
        ``test_log_likelihood`` (exact, mean per row).

    Raises
    ------
    ValueError
        An unknown or invalid hyperparameter, or training / test rows that are not finite real
        rows of one width.
    TrainingDivergedError
        When the parameters become NaN or infinite.
    """
    if str(family).lower() != "grbm":
        raise ValueError(f"train_grbm trains the 'grbm' family, not {family!r}")
    valid = [f.name for f in dataclasses.fields(GRBMHyperparams)]
    unknown = sorted(set(hyperparams) - set(valid))
    if unknown:
        raise ValueError(f"unknown hyperparameter(s) {unknown} for family 'grbm'; valid: {sorted(valid)}")
    hp = GRBMHyperparams(**hyperparams)
    hp.check()
    device = resolve_device(hp.device)
    x_train, x_test = _train_test_rows(train, test, device, _real_rows)
    n_train, D = x_train.shape

    gen = make_generator(hp.seed, device)
    W0 = torch.randn(D, hp.n_hidden, generator=gen, device=device) * hp.init_scale
    model = GaussianBernoulliRBM(
        W0, x_train.mean(dim=0), torch.zeros(hp.n_hidden, device=device), hp.sigma, device=device
    )
    params = (model.W, model.b, model.c)
    opt = _Ascent(params, hp)
    chains = None
    if hp.method == "pcd":
        n_chains = hp.batch_size if hp.n_persistent_chains is None else hp.n_persistent_chains
        chains = x_train[torch.randint(n_train, (n_chains,), generator=gen, device=device)].clone()
    # evaluation subsamples come from a generator spawned from the training one: the monitoring
    # settings never change the trained model
    eval_gen = make_generator(int(torch.randint(2**62, (1,), generator=gen, device=device).item()), device)
    sets = _subsamples(x_train, x_test, hp.eval_subsample, eval_gen)
    exact = hp.n_hidden <= hp.exact_ll_max_units

    history = [{"epoch": 0, "learning_rate": 0.0, "seconds": 0.0, **_evaluate(model, sets, exact)}]
    epochs = range(1, hp.n_epochs + 1)
    if hp.progress:
        from tqdm.auto import tqdm

        epochs = tqdm(epochs, desc=f"train GRBM {D}x{hp.n_hidden} {hp.method.upper()}-{hp.k}", unit="epoch")
    for epoch in epochs:
        t0 = time.perf_counter()
        order = torch.randperm(n_train, generator=gen, device=device)
        for start in range(0, n_train, hp.batch_size):
            chains = _update(model, opt, x_train[order[start : start + hp.batch_size]], chains, hp, gen)
        for name, p in zip(("W", "b", "c"), params):
            if not torch.isfinite(p).all():
                raise TrainingDivergedError(
                    f"GRBM training diverged in epoch {epoch}: '{name}' became NaN/inf; "
                    "lower learning_rate or raise weight_decay"
                )
        seconds = _elapsed(t0, device)
        history.append(
            {
                "epoch": epoch,
                "learning_rate": float(hp.learning_rate),
                "seconds": seconds,
                **_evaluate(model, sets, exact),
            }
        )
    # a fresh model object validates the trained parameters (finite, within range)
    trained = GaussianBernoulliRBM(model.W, model.b, model.c, model.sigma, device=device)
    return trained, history


class _Ascent:
    """Adam (Kingma & Ba 2014, with bias correction, ``eps = 1e-8``) or SGD with momentum
    (``u <- momentum u + learning_rate g``, ``theta <- theta + u``), ascending, in place."""

    def __init__(self, params, hp: GRBMHyperparams):
        self.params, self.hp, self.t = params, hp, 0
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params] if hp.optimizer == "adam" else None

    def step(self, grads) -> None:
        hp, lr = self.hp, float(self.hp.learning_rate)
        self.t += 1
        if self.v is None:
            for p, m, g in zip(self.params, self.m, grads):
                m.mul_(hp.momentum).add_(g, alpha=lr)
                p.add_(m)
            return
        b1, b2 = (float(x) for x in hp.adam_betas)
        c1, c2 = 1.0 - b1**self.t, 1.0 - b2**self.t
        for p, m, v, g in zip(self.params, self.m, self.v, grads):
            m.mul_(b1).add_(g, alpha=1.0 - b1)
            v.mul_(b2).addcmul_(g, g, value=1.0 - b2)
            p.addcdiv_(m, (v / c2).sqrt_().add_(1e-8), value=lr / c1)


def _update(
    model: GaussianBernoulliRBM,
    opt: _Ascent,
    v0: torch.Tensor,
    chains: torch.Tensor | None,
    hp: GRBMHyperparams,
    gen: torch.Generator,
) -> torch.Tensor | None:
    """One CD-k / PCD-k step on the minibatch ``v0``; returns the new persistent chains (PCD)."""
    s = model.sigma
    p0 = model.prob_h_given_v(v0)
    vk = v0 if chains is None else chains
    for _ in range(hp.k):
        vk = model.sample_v_given_h(model.sample_h_given_v(vk, gen), gen)
    pk = model.prob_h_given_v(vk)
    grad_W = (v0.T @ p0 / v0.shape[0] - vk.T @ pk / vk.shape[0]) / s - hp.weight_decay * model.W
    grad_b = (v0.mean(0) - vk.mean(0)) / s**2
    grad_c = p0.mean(0) - pk.mean(0)
    opt.step((grad_W, grad_b, grad_c))
    return None if chains is None else vk


def _evaluate(model: GaussianBernoulliRBM, sets: dict, exact: bool) -> dict:
    """Reconstruction errors and, when ``exact``, ``log Z`` and the exact mean log-likelihoods."""
    t0 = time.perf_counter()
    out = {}
    for name, x in sets.items():
        recon = model.mean_v_given_h(model.prob_h_given_v(x))
        out[f"{name}_reconstruction_error"] = float(((x - recon) ** 2).sum(dim=1).mean())
    if exact:
        out["log_z"] = log_z = model.exact_log_z()
        for name, x in sets.items():
            out[f"{name}_log_likelihood"] = float(model.log_unnormalized_marginal(x).mean()) - log_z
    out["eval_seconds"] = _elapsed(t0, model.device)
    return out


def _real_rows(data, what: str, device: torch.device, n_dims: int | None = None) -> torch.Tensor:
    """Finite real rows ``(n, D)`` (``D = n_dims`` when given) as float32 on ``device``."""
    arr = data.detach().cpu().numpy() if isinstance(data, torch.Tensor) else np.asarray(data, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{what} data must be real rows (n, D), got shape {arr.shape}")
    if n_dims is not None and arr.shape[1] != n_dims:
        raise ValueError(f"{what} data has {arr.shape[1]} columns; the training data has {n_dims}")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"{what} data contains NaN or inf ({int(bad.sum())} entries)")
    return torch.as_tensor(arr, device=device).to(torch.float32)
