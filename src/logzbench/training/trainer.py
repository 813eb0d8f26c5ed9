"""Training binary RBMs by contrastive divergence (CD-k) and persistent CD (PCD-k).

Update rule (Hinton 2010, "A practical guide to training RBMs"; Tieleman 2008).  For a
minibatch ``v0`` of ``B`` rows,

* positive phase: ``p0 = p(h | v0)``; statistics ``<v h>_+ = v0^T p0 / B``;
* negative phase: a block-Gibbs chain ``h -> v -> h`` run for ``k`` sweeps.  CD starts
  it from a *sample* ``h ~ p(h | v0)``; PCD continues ``n_persistent_chains`` visible
  states from the previous update.  With ``vk`` the (sampled, binary) final visible
  states and ``pk = p(h | vk)`` their hidden *probabilities*, ``<v h>_- = vk^T pk / N``.

Sampled hidden states drive the chain (using probabilities there would make the
reconstruction a mean-field fixed point, not a Markov chain), while the statistics use
hidden probabilities: this is the Hinton-guide practice, and replacing ``h`` by
``E[h | v]`` in the statistics is a Rao-Blackwellisation that lowers the variance without
changing the expectation.  The gradient step with momentum and L2 weight decay is

    g_W = <v h>_+ - <v h>_- - weight_decay * W,   g_a = <v>_+ - <v>_-,   g_b = <h>_+ - <h>_-,
    u <- momentum * u + learning_rate * g,        theta <- theta + u,

for each parameter ``theta`` with its velocity ``u`` (weight decay acts on ``W`` only).
Updates are vectorised over the minibatch in float32 on the chosen device; every random
draw (initial weights, persistent chains, epoch shuffles, Gibbs sampling) comes from one
``torch.Generator`` seeded by ``seed``, so the same seed and data give the same model.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import Callable

import numpy as np
import torch

from ..errors import LogzbenchError
from ..kernels import bernoulli, bernoulli_from_logits_
from ..models.enumeration import MAX_ENUMERATION_BITS, exact_log_z
from ..models.rbm import BinaryRBM
from ..utils import atomic_path, make_generator, resolve_device
from .hyperparams import Hyperparameters, RBMTrainerParams
from .metrics import _pseudo_log_likelihood_at, reconstruction_error

__all__ = ["RBMTrainer", "TrainingDivergedError", "history_to_csv"]

#: Base rates are clipped to [c, 1 - c] before the logit, so always-off pixels get a
#: finite visible bias (logit(1e-3) = -6.9).
_BASE_RATE_CLIP = 1e-3


class TrainingDivergedError(LogzbenchError, RuntimeError):
    """The parameters became NaN or infinite during training (learning rate too high)."""


class RBMTrainer(Hyperparameters, declaration=RBMTrainerParams):
    """Train a :class:`~logzbench.models.rbm.BinaryRBM` by CD-k or PCD-k.

    Every hyperparameter is a constructor argument, stored unchanged (scikit-learn
    conventions: :meth:`get_params`, :meth:`set_params`, ``sklearn.base.clone`` works);
    :meth:`fit` validates them and sets the learned attributes ``model_`` and ``history_``.

    Parameters
    ----------
    n_hidden : int
        Number of hidden units.
    method : {"cd", "pcd"}
        Contrastive divergence (chain restarted at the data each update) or persistent
        CD (chains carried across updates).
    k : int
        Gibbs sweeps per update (the ``k`` of CD-k / PCD-k).
    learning_rate : float
        Initial learning rate.
    lr_schedule : {"constant", "linear", "exponential"}
        Learning rate of epoch ``e = 1..n_epochs``: ``learning_rate``;
        ``learning_rate * (1 - (e - 1) / n_epochs)`` (linear decay towards 0 at the end
        of training); ``learning_rate * lr_decay ** (e - 1)``.
    lr_decay : float
        Per-epoch factor of the exponential schedule, in ``(0, 1]``.
    batch_size : int
        Rows per minibatch (the last minibatch of an epoch may be smaller).
    n_epochs : int
        Passes over the training data (0 returns the initial model).
    initial_momentum, final_momentum : float
        Momentum in ``[0, 1)`` for epochs ``1..momentum_switch_epoch`` and for the
        epochs after it.
    momentum_switch_epoch : int
        Last epoch that uses ``initial_momentum``.
    weight_decay : float
        L2 penalty coefficient on ``W`` (added as ``-weight_decay * W`` to its gradient).
    init : {"uniform_sqrt", "normal"}
        Initial weights ``U[-1/sqrt(L), 1/sqrt(L)]`` with ``L = min(n_visible, n_hidden)``
        (Upadhya & Sastry), or ``N(0, init_scale^2)`` (Hinton guide, ``init_scale=0.01``).
    init_scale : float
        Standard deviation of the ``"normal"`` initialisation.
    visible_bias_init : {"base_rate", "zero"}
        Initial visible biases ``log(p / (1 - p))`` of the training pixel means ``p``
        (clipped to ``[1e-3, 1 - 1e-3]``), or zeros.  Hidden biases start at zero.
    n_persistent_chains : int, optional
        PCD chains, initialised by sampling ``Bernoulli(sigmoid(visible_bias))``; default
        ``batch_size``.  Ignored by CD.
    eval_subsample : int
        Evaluate the per-epoch metrics on at most this many rows of each data set (the
        same rows every epoch, drawn once).
    exact_ll_max_units : int
        Record the exact log-likelihood (and ``log Z``) each evaluation when
        ``min(n_visible, n_hidden) <= exact_ll_max_units``.  Enumeration costs
        ``2^min(n_visible, n_hidden)`` free energies (2^20 for a 784 x 20 RBM).
        0 disables it.
    eval_every : int
        Evaluate after every ``eval_every``-th epoch (and always after epoch 0 and the
        last epoch); other epochs record NaN metrics.
    seed : int
        Seed of the training generator.
    device : str or torch.device
        ``"cpu"``, ``"cuda"`` (refused when unavailable) or ``"auto"``.
    progress : bool
        Show a progress bar over epochs.

    Attributes
    ----------
    model_ : BinaryRBM
        The trained model, with ``data_mean`` set to the training pixel means.
    history_ : list of dict
        One record per epoch, epoch 0 being the initial model; see :meth:`fit`.
    n_features_in_ : int
        Number of visible units seen by ``fit``.
    """

    # ------------------------------------------------------------------ public
    def fit(self, train, test=None, callback: Callable[[dict, BinaryRBM], None] | None = None) -> "RBMTrainer":
        """Train on ``train``, monitoring ``test`` when given.

        Parameters
        ----------
        train : array-like, shape (n_train, n_visible)
            Binary training data (values in {0, 1}; numpy, torch or nested lists).
        test : array-like, shape (n_test, n_visible), optional
            Held-out binary data, only evaluated (it never changes the trained model).
        callback : callable, optional
            ``callback(record, model)`` after each history record is appended (epoch 0
            included); ``model`` is the live model being trained: read it, don't modify it.

        Returns
        -------
        RBMTrainer
            ``self``, with ``model_``, ``history_`` and ``n_features_in_`` set.

        Notes
        -----
        Each history record holds ``epoch`` (0 = initial model), ``learning_rate`` and
        ``momentum`` used in that epoch (0 for epoch 0), ``seconds`` (training wall time of
        the epoch, evaluation excluded), ``eval_seconds``, and the metrics
        ``train_reconstruction_error``, ``train_pseudo_log_likelihood`` plus, with a
        test set, ``test_reconstruction_error`` and ``test_pseudo_log_likelihood``, plus,
        when the smaller layer has at most ``exact_ll_max_units`` units, ``log_z``,
        ``train_log_likelihood`` and (with a test set) ``test_log_likelihood``.  Metrics
        are NaN in epochs skipped by ``eval_every``.

        Raises
        ------
        ValueError
            On an invalid hyperparameter or invalid data.
        TrainingDivergedError
            When the parameters become NaN or infinite.
        """
        self._check_params()
        device = resolve_device(self.device)
        x_train, x_test = _train_test_rows(train, test, device)
        n_train, n_visible = x_train.shape

        gen = make_generator(self.seed, device)
        data_mean = x_train.mean(dim=0)
        rbm = BinaryRBM(
            self._initial_weights(n_visible, gen),
            self._initial_visible_bias(data_mean),
            torch.zeros(self.n_hidden, device=device),
            device=device,
            data_mean=data_mean,
        )
        chains = None
        if self.method == "pcd":
            n_chains = self.batch_size if self.n_persistent_chains is None else self.n_persistent_chains
            chains = bernoulli(torch.sigmoid(rbm.visible_bias).expand(n_chains, -1).contiguous(), gen)
        # Evaluation draws come from a generator spawned from the training one, so the
        # monitoring settings (test set, eval_every, eval_subsample) never alter training.
        evaluate = _Evaluator(
            rbm, x_train, x_test, self.eval_subsample, self.exact_ll_max_units, make_generator(_spawn_seed(gen), device)
        )
        velocity = [torch.zeros_like(p) for p in (rbm.W, rbm.visible_bias, rbm.hidden_bias)]

        history: list[dict] = []
        self._record(
            history, {"epoch": 0, "learning_rate": 0.0, "momentum": 0.0, "seconds": 0.0}, evaluate(rbm), rbm, callback
        )
        epochs = range(1, self.n_epochs + 1)
        if self.progress:
            from tqdm.auto import tqdm

            epochs = tqdm(
                epochs, desc=f"train RBM {n_visible}x{self.n_hidden} {self.method.upper()}-{self.k}", unit="epoch"
            )
        for epoch in epochs:
            lr, momentum = self._learning_rate(epoch), self._momentum(epoch)
            t0 = time.perf_counter()
            order = torch.randperm(n_train, generator=gen, device=device)
            for start in range(0, n_train, self.batch_size):
                chains = self._update(
                    rbm, velocity, x_train[order[start : start + self.batch_size]], chains, lr, momentum, gen
                )
            _check_finite(rbm, epoch)
            seconds = _elapsed(t0, device)
            due = epoch % self.eval_every == 0 or epoch == self.n_epochs
            self._record(
                history,
                {"epoch": epoch, "learning_rate": lr, "momentum": momentum, "seconds": seconds},
                evaluate(rbm) if due else evaluate.skipped(),
                rbm,
                callback,
            )
            if self.progress and due:
                epochs.set_postfix(recon=f"{history[-1]['train_reconstruction_error']:.4f}")

        self.model_ = rbm
        self.history_ = history
        self.n_features_in_ = n_visible
        return self

    # ------------------------------------------------------------------ schedules and initialisation
    def _learning_rate(self, epoch: int) -> float:
        if self.lr_schedule == "linear":
            return self.learning_rate * (1.0 - (epoch - 1) / self.n_epochs)
        if self.lr_schedule == "exponential":
            return self.learning_rate * self.lr_decay ** (epoch - 1)
        return float(self.learning_rate)

    def _momentum(self, epoch: int) -> float:
        return float(self.initial_momentum if epoch <= self.momentum_switch_epoch else self.final_momentum)

    def _initial_weights(self, n_visible: int, gen: torch.Generator) -> torch.Tensor:
        """``(n_visible, n_hidden)`` float32 initial weights on the generator's device."""
        shape = (n_visible, self.n_hidden)
        if self.init == "uniform_sqrt":
            bound = 1.0 / math.sqrt(min(shape))
            return (2.0 * torch.rand(shape, generator=gen, device=gen.device) - 1.0) * bound
        return torch.randn(shape, generator=gen, device=gen.device) * self.init_scale

    def _initial_visible_bias(self, data_mean: torch.Tensor) -> torch.Tensor:
        if self.visible_bias_init == "zero":
            return torch.zeros_like(data_mean)
        p = data_mean.clamp(_BASE_RATE_CLIP, 1.0 - _BASE_RATE_CLIP)
        return torch.log(p) - torch.log1p(-p)

    # ------------------------------------------------------------------ one update
    def _update(
        self,
        rbm: BinaryRBM,
        velocity: list[torch.Tensor],
        v0: torch.Tensor,
        chains: torch.Tensor | None,
        lr: float,
        momentum: float,
        gen: torch.Generator,
    ) -> torch.Tensor | None:
        """One CD/PCD step on minibatch ``v0 (B, n_visible)``; returns the new persistent chains (PCD)."""
        W, a, b = rbm.W, rbm.visible_bias, rbm.hidden_bias
        p0 = torch.sigmoid(torch.addmm(b, v0, W))
        start = p0 if chains is None else torch.sigmoid(torch.addmm(b, chains, W))
        vk, pk = _gibbs(W, a, b, bernoulli(start, gen), self.k, gen)
        grad_W = torch.addmm(W, v0.T, p0, beta=-self.weight_decay, alpha=1.0 / v0.shape[0])
        grad_W.addmm_(vk.T, pk, alpha=-1.0 / vk.shape[0])
        grads = (grad_W, v0.mean(0) - vk.mean(0), p0.mean(0) - pk.mean(0))
        for param, vel, grad in zip((W, a, b), velocity, grads):
            vel.mul_(momentum).add_(grad, alpha=lr)
            param.add_(vel)
        return None if chains is None else vk

    # ------------------------------------------------------------------ validation and bookkeeping
    def _check_params(self) -> None:
        """Raise ``ValueError`` naming the first invalid hyperparameter (their declared bounds)."""
        _check_declared(self, "n_hidden k batch_size n_epochs momentum_switch_epoch eval_subsample eval_every seed")
        _check_declared(self, "n_persistent_chains exact_ll_max_units")
        _check_exact_units(self.exact_ll_max_units, MAX_ENUMERATION_BITS)
        _check_declared(self, "method lr_schedule init visible_bias_init")
        _check_declared(self, "learning_rate lr_decay initial_momentum final_momentum weight_decay init_scale")

    @staticmethod
    def _record(history: list[dict], row: dict, metrics: dict, rbm: BinaryRBM, callback) -> None:
        row.update(metrics)
        history.append(row)
        if callback is not None:
            callback(row, rbm)


class _Evaluator:
    """Per-epoch metrics on fixed subsamples, with fixed PLL flip bits (smooth curves)."""

    def __init__(
        self,
        rbm: BinaryRBM,
        x_train: torch.Tensor,
        x_test: torch.Tensor | None,
        max_rows: int,
        exact_ll_max_units: int,
        gen: torch.Generator,
    ):
        self.exact = min(rbm.n_visible, rbm.n_hidden) <= exact_ll_max_units
        self.sets = {}
        for name, x in (("train", x_train), ("test", x_test)):
            if x is not None:
                rows = torch.randperm(x.shape[0], generator=gen, device=x.device)[:max_rows]
                flip = torch.randint(rbm.n_visible, (len(rows),), generator=gen, device=x.device)
                self.sets[name] = (x[rows], flip)

    def keys(self) -> list[str]:
        names = []
        for name in self.sets:
            names += [f"{name}_reconstruction_error", f"{name}_pseudo_log_likelihood"]
        if self.exact:
            names += ["log_z"] + [f"{name}_log_likelihood" for name in self.sets]
        return names

    def skipped(self) -> dict:
        return {**dict.fromkeys(self.keys(), math.nan), "eval_seconds": 0.0}

    def __call__(self, rbm: BinaryRBM) -> dict:
        t0 = time.perf_counter()
        out = {}
        for name, (x, flip) in self.sets.items():
            out[f"{name}_reconstruction_error"] = reconstruction_error(rbm, x)
            out[f"{name}_pseudo_log_likelihood"] = float(_pseudo_log_likelihood_at(rbm, x, flip).mean())
        if self.exact:
            out["log_z"] = log_z = exact_log_z(rbm)
            for name, (x, _) in self.sets.items():
                out[f"{name}_log_likelihood"] = float(rbm.log_unnormalized_marginal(x).mean()) - log_z
        out["eval_seconds"] = _elapsed(t0, rbm.device)
        return {key: out[key] for key in (*self.keys(), "eval_seconds")}


def _gibbs(
    W: torch.Tensor, a: torch.Tensor, b: torch.Tensor, h: torch.Tensor, k: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``k`` sweeps ``h -> v -> h`` from hidden states ``h (N, n_hidden)``.

    Returns the sampled visible states ``(N, n_visible)`` and their hidden probabilities
    ``p(h | v)`` ``(N, n_hidden)`` after the last sweep.
    """
    v = bernoulli_from_logits_(torch.addmm(a, h, W.T), gen)
    p_h = torch.sigmoid(torch.addmm(b, v, W))
    for _ in range(k - 1):
        v = bernoulli_from_logits_(torch.addmm(a, bernoulli(p_h, gen), W.T), gen)
        p_h = torch.sigmoid(torch.addmm(b, v, W))
    return v, p_h


def _as_binary_data(data, what: str, device: torch.device, n_visible: int | None = None) -> torch.Tensor:
    """Validate binary data (:func:`logzbench.data.check_binary_rows`) and return it as float32
    ``(n, n_visible)`` on ``device``."""
    from ..data import check_binary_rows

    arr = check_binary_rows(data, f"{what} data", n_visible)
    return torch.as_tensor(arr, device=device).to(torch.float32)


def _train_test_rows(
    train, test, device: torch.device, rows=_as_binary_data
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The training rows and the test rows (``None`` without ``test``) on ``device``, each checked by
    ``rows(data, what, device, n_columns)`` (binary rows by default), the test rows against the training
    rows' width."""
    x_train = rows(train, "training", device)
    x_test = None if test is None else rows(test, "test", device, x_train.shape[1])
    return x_train, x_test


def _check_declared(obj, names: str) -> None:
    """Check ``obj``'s hyperparameters ``names`` (space-separated), in order, by their declared bounds
    (:mod:`logzbench.training.hyperparams`): ValueError naming the first out of bounds."""
    declaration = getattr(obj, "_declaration", type(obj))
    rules = {f.name: f.metadata["rule"] for f in dataclasses.fields(declaration)}
    for name in names.split():
        value, r = getattr(obj, name), rules[name]
        if value is None and r.none:
            continue
        if r.kind == "int":
            _check_int(name, value, r.low)
        elif r.kind == "real":
            _check_real(name, value, r.low, r.high, r.low_open, r.high_open)
        elif value not in r.choices:
            raise ValueError(f"unknown {name} {value!r}; choose one of {list(r.choices)}")


def _check_exact_units(value: int, limit: int, what: str = "exact log Z", of: str = "") -> None:
    """ValueError unless ``exact_ll_max_units`` (``value``) is at most the ``limit`` on the bits ``what``
    enumerates (the states ``of`` a layer, when said)."""
    if value > limit:
        raise ValueError(
            f"exact_ll_max_units={value}: {what} enumerates at most 2^{limit} states{of}; use a value <= {limit}"
        )


def _subsamples(x_train: torch.Tensor, x_test: torch.Tensor | None, max_rows: int, gen: torch.Generator) -> dict:
    """``{"train": rows, "test": rows}``: at most ``max_rows`` rows of each data set given, drawn once from
    ``gen`` (the fixed rows an evaluation reads every epoch)."""
    return {
        name: x[torch.randperm(x.shape[0], generator=gen, device=x.device)[:max_rows]]
        for name, x in (("train", x_train), ("test", x_test))
        if x is not None
    }


def _check_int(name: str, value, minimum: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


def _check_real(name: str, value, low: float, high: float, low_open: bool = False, high_open: bool = False) -> None:
    ok = (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, bool)
        and math.isfinite(value)
    )
    if ok:
        ok = (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if not ok:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be a finite number in {interval}, got {value!r}")


def _spawn_seed(gen: torch.Generator) -> int:
    """A child seed drawn from ``gen`` (one draw)."""
    return int(torch.randint(2**62, (1,), generator=gen, device=gen.device).item())


def _elapsed(t0: float, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0


def _check_finite(rbm: BinaryRBM, epoch: int) -> None:
    for name, p in (("W", rbm.W), ("visible_bias", rbm.visible_bias), ("hidden_bias", rbm.hidden_bias)):
        if not torch.isfinite(p).all():
            raise TrainingDivergedError(
                f"training diverged in epoch {epoch}: '{name}' became NaN/inf; "
                "lower learning_rate or raise weight_decay"
            )


def history_to_csv(history: list[dict], path: str | os.PathLike) -> None:
    """Write a training history (one row per epoch) to ``path`` as CSV, atomically."""
    import pandas as pd

    with atomic_path(path) as tmp:
        pd.DataFrame(history).to_csv(tmp, index=False)
