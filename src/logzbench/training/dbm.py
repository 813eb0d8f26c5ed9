"""Training binary deep Boltzmann machines (Salakhutdinov & Hinton 2009, "Deep Boltzmann Machines").

Two phases, both driven by one ``torch.Generator`` seeded by ``seed`` (same seed and data give
the same model; the monitoring draws come from a generator spawned from it, so the monitoring
settings never change the trained model).

**1. Greedy layer-wise pretraining** (S&H 2009, Sec. 3.1; ``pretrain_epochs`` per layer -- one
number for all, or one per layer, as Liu et al. 2015's 100 then 200 -- all 0 skips it): one RBM per
layer, trained by CD-``pretrain_k`` with doubled weights where the DBM layer will have two
neighbours, then composed into the DBM's initial weights and biases
(:mod:`logzbench.training.dbm_pretrain`, which describes the doubling and the combined biases).

**2. Joint training** (S&H 2009, Sec. 2.2 and Alg. 1: stochastic approximation, i.e. PCD).  For
a minibatch ``v`` of ``B`` rows:

* positive phase: the mean-field posterior ``mu_1..mu_L`` by ``n_mean_field_iter`` fixed-point
  sweeps (all odd layers, then all even hidden layers), initialised by one bottom-up pass with
  doubled weights (``mu_l = sigmoid(2 mu_{l-1} W_l + b_l)`` for ``l < L``, single weights for
  the top layer), statistics ``<h_{l-1} h_l>_+ = mu_{l-1}^T mu_l / B``;
* negative phase: ``n_persistent_chains`` persistent Gibbs chains over all layers, advanced by
  ``k`` sweeps (sample the odd layers given the even ones, then the even layers -- ``v``
  included -- given the odd ones), initialised from random training rows with a sampled
  bottom-up pass.  The statistics use the sampled even layers and the *probabilities* of the
  odd layers given them (Rao-Blackwellised, as :class:`RBMTrainer` does);
* update: ``u <- momentum * u + lr * (<.>_+ - <.>_- - weight_decay * W)`` (no decay on biases),
  ``theta <- theta + u``, with the learning rate decaying over the epochs (``lr_schedule``).

The result is a :class:`~logzbench.models.dbm.DBM` with ``data_mean`` set to the training
pixel means (for the data-base-rate initial distribution of AIS / RAISE).
"""

from __future__ import annotations

import math
import time
from typing import Callable

import torch

from ..kernels import bernoulli_from_logits_
from ..models.dbm import DBM
from ..models.dbm import MAX_EXACT_BITS as DBM_MAX_EXACT_BITS
from ..models.enumeration import MAX_ENUMERATION_BITS
from ..utils import make_generator, resolve_device
from .common import _base_rate_logit, _check_hidden_sizes, _check_params_finite
from .dbm_pretrain import _DBMPretraining
from .hyperparams import DBMTrainerParams, Hyperparameters, per_layer_epochs
from .trainer import _check_declared, _check_exact_units, _elapsed, _spawn_seed, _subsamples, _train_test_rows

__all__ = ["DBMTrainer", "train_dbm"]


def _schedule(lr: float, schedule: str, decay: float, epoch: int, n_epochs: int) -> float:
    if schedule == "linear":
        return lr * (1.0 - (epoch - 1) / n_epochs)
    if schedule == "exponential":
        return lr * decay ** (epoch - 1)
    return float(lr)


class DBMTrainer(_DBMPretraining, Hyperparameters, declaration=DBMTrainerParams):
    """Train a binary :class:`~logzbench.models.dbm.DBM`: layer-wise pretraining, then joint PCD.

    See the module docstring (and :mod:`.dbm_pretrain`'s) for the algorithm.  Every hyperparameter is a constructor
    argument stored unchanged (:meth:`get_params`, :meth:`set_params`); :meth:`fit` validates
    them and sets ``model_``, ``history_`` and ``n_features_in_``.

    Parameters
    ----------
    hidden_sizes : sequence of int
        Sizes ``n_1, ..., n_L`` of the hidden layers (``L >= 1``).
    pretrain_epochs : int or sequence of int
        Epochs of CD pretraining of each layer: one integer for every layer, or a list with one
        entry per hidden layer (layer 1 first; e.g. ``[100, 200]``, Liu et al. 2015's DBM), each
        ``>= 0``.  All 0 skips pretraining (then ``W_l ~ N(0, init_scale^2)``, hidden biases 0); a
        single 0 among pretrained layers leaves that layer's RBM at its initial parameters (random
        weights, base-rate or zero visible bias, zero hidden bias) before the composition.  An
        integer ``n`` and the list ``[n] * L`` train the same model.
    pretrain_k : int
        Gibbs sweeps of the pretraining CD-k.
    pretrain_learning_rate : float
        Constant learning rate of pretraining.
    pretrain_weight_decay : float
        L2 penalty on the weights during pretraining.
    pretrain_activities : {"mean", "sample"}
        Input of the RBM of layer ``l > 1``: bottom-up probabilities of layer ``l-1`` (fixed),
        or a fresh binary sample of them each epoch.
    n_epochs : int
        Epochs of joint training (0 returns the pretrained DBM).
    learning_rate : float
        Initial learning rate of joint training.
    lr_schedule : {"constant", "linear", "exponential"}
        Learning rate of joint epoch ``e = 1..n_epochs``: constant; ``learning_rate * (1 - (e - 1) / n_epochs)``
        (decay towards 0, as S&H 2009); ``learning_rate * lr_decay ** (e - 1)``.
    lr_decay : float
        Per-epoch factor of the exponential schedule, in ``(0, 1]``.
    batch_size : int
        Rows per minibatch (both phases).
    k : int
        Gibbs sweeps of the persistent chains per joint update.
    n_persistent_chains : int
        Persistent chains (fantasy particles) of joint training.
    n_mean_field_iter : int
        Fixed-point sweeps of the mean-field positive phase (after the bottom-up initialisation).
    initial_momentum, final_momentum : float
        Momentum in ``[0, 1)`` for epochs ``1..momentum_switch_epoch`` and after (both phases;
        pretraining counts the epochs of each layer from 1).  Set both to 0 for plain SGD.
    momentum_switch_epoch : int
        Last epoch that uses ``initial_momentum``.
    weight_decay : float
        L2 penalty on the weights during joint training.
    init_scale : float
        Standard deviation of the initial weights ``N(0, init_scale^2)``.
    visible_bias_init : {"base_rate", "zero"}
        Initial visible bias of each pretraining RBM: the logit of the mean of its input
        (clipped to ``[1e-3, 1 - 1e-3]``), or zero.
    eval_subsample : int
        Monitor at most this many rows of each data set (the same rows every epoch).
    exact_ll_max_units : int
        Record the exact log-likelihood when ``log Z`` (enumerating the smaller side of the
        even/odd view) and ``log f(v)`` (enumerating the even hidden layers) each need at most
        ``2^exact_ll_max_units`` states; 0 disables it.  At most 26.
    eval_every : int
        Evaluate after every ``eval_every``-th joint epoch (and always after epoch 0 and the
        last); other epochs record NaN metrics.
    seed : int
        Seed of the training generator.
    device : str or torch.device
        ``"cpu"``, ``"cuda"`` or ``"auto"``.
    progress : bool
        Show progress bars (tqdm) over the epochs.

    Attributes
    ----------
    model_ : DBM
        The trained model, ``data_mean`` set to the training pixel means.
    history_ : list of dict
        One record per epoch of both phases; see :meth:`fit`.
    pretrained_model_ : DBM
        The DBM composed from the pretrained RBMs (before joint training).
    n_features_in_ : int
    """

    # ------------------------------------------------------------------ public
    def fit(self, train, test=None, callback: Callable[[dict, DBM], None] | None = None) -> "DBMTrainer":
        """Pretrain and jointly train on ``train``, monitoring ``test`` when given.

        Parameters
        ----------
        train : array-like, shape (n_train, n_visible)
            Binary training data.
        test : array-like, shape (n_test, n_visible), optional
            Held-out binary data, only evaluated.
        callback : callable, optional
            ``callback(record, model)`` after each joint-training record (epoch 0 included);
            ``model`` is a :class:`DBM` sharing the live parameters: read it, don't modify it.

        Returns
        -------
        DBMTrainer
            ``self``, with ``model_``, ``pretrained_model_``, ``history_`` and ``n_features_in_`` set.

        Notes
        -----
        Every history record has the same keys: ``phase`` (``"pretrain"`` or ``"joint"``),
        ``layer`` (the pretrained RBM ``1..L``; 0 in the joint phase), ``epoch`` (counted
        within the layer / phase; joint epoch 0 is the pretrained DBM), ``learning_rate``,
        ``momentum``, ``seconds`` (training time of the epoch), ``eval_seconds``,
        ``layer_reconstruction_error`` (pretraining: squared error of one mean-field
        reconstruction of the layer's input by its RBM, on at most ``eval_subsample`` rows;
        NaN when joint), and the DBM metrics (NaN during pretraining and in epochs skipped by
        ``eval_every``): ``{train,test}_reconstruction_error`` (``v -> mean field mu -> p(v | mu_1)``),
        ``{train,test}_mean_field_bound`` (the mean-field lower bound on ``log f(v)``, which is
        unnormalised: it does not include ``-log Z``) and, when the model is small enough
        (``exact_ll_max_units``), ``log_z`` and ``{train,test}_log_likelihood`` (exact).

        Raises
        ------
        ValueError, TrainingDivergedError
            As :meth:`RBMTrainer.fit`: an invalid hyperparameter or invalid data; NaN or infinite parameters.
        """
        sizes_h = self._check_params()
        device = resolve_device(self.device)
        x_train, x_test = _train_test_rows(train, test, device)
        n_visible = x_train.shape[1]
        sizes = [n_visible, *sizes_h]
        L = len(sizes_h)

        gen = make_generator(self.seed, device)
        eval_gen = make_generator(_spawn_seed(gen), device)
        data_mean = x_train.mean(dim=0)
        history: list[dict] = []

        pretrain_epochs = per_layer_epochs(self.pretrain_epochs, L)
        if any(pretrain_epochs):
            weights, biases = self._pretrain(x_train, sizes, pretrain_epochs, gen, eval_gen, history)
        else:
            weights = [
                torch.randn(sizes[l - 1], sizes[l], generator=gen, device=device) * self.init_scale
                for l in range(1, L + 1)
            ]
            biases = [torch.zeros(n, device=device) for n in sizes]
            if self.visible_bias_init == "base_rate":
                biases[0] = _base_rate_logit(data_mean)
        self.pretrained_model_ = DBM(
            [W.clone() for W in weights], [b.clone() for b in biases], device=device, data_mean=data_mean
        )
        self._joint(x_train, x_test, weights, biases, data_mean, gen, eval_gen, history, callback)

        self.model_ = DBM(weights, biases, device=device, data_mean=data_mean)
        keys = list(dict.fromkeys(key for row in history for key in row))  # same keys, same order, in every record
        self.history_ = [{key: row.get(key, math.nan) for key in keys} for row in history]
        self.n_features_in_ = n_visible
        return self

    # ------------------------------------------------------------------ joint training
    def _joint(self, x_train, x_test, weights, biases, data_mean, gen, eval_gen, history, callback) -> None:
        device = x_train.device
        n_train = x_train.shape[0]
        start_rows = torch.randint(n_train, (self.n_persistent_chains,), generator=gen, device=device)
        chains = self._initial_chains(x_train[start_rows], weights, biases, gen)
        velocity = [torch.zeros_like(p) for p in (*weights, *biases)]
        evaluate = _DBMEvaluator(x_train, x_test, self.eval_subsample, self.exact_ll_max_units, eval_gen)

        def record(epoch, lr, momentum, seconds, due):
            model = DBM(weights, biases, device=device, data_mean=data_mean)
            metrics = evaluate(model) if due else evaluate.skipped()
            row = self._row("joint", 0, epoch, lr, momentum, seconds, metrics.pop("eval_seconds"), math.nan)
            row.update(metrics)
            history.append(row)
            if callback is not None:
                callback(row, model)
            return row

        record(0, 0.0, 0.0, 0.0, True)
        epochs = range(1, self.n_epochs + 1)
        if self.progress:
            from tqdm.auto import tqdm

            epochs = tqdm(
                epochs,
                desc=f"train DBM {'-'.join(str(int(w.shape[0])) for w in weights)}-"
                f"{int(weights[-1].shape[1])} (PCD-{self.k})",
                unit="epoch",
            )
        for epoch in epochs:
            lr = _schedule(self.learning_rate, self.lr_schedule, self.lr_decay, epoch, self.n_epochs)
            momentum = self._momentum(epoch)
            t0 = time.perf_counter()
            order = torch.randperm(n_train, generator=gen, device=device)
            for start in range(0, n_train, self.batch_size):
                chains = self._joint_update(
                    weights,
                    biases,
                    velocity,
                    x_train[order[start : start + self.batch_size]],
                    chains,
                    lr,
                    momentum,
                    gen,
                )
            named = {f"W_{l}": W for l, W in enumerate(weights, start=1)}
            named.update({f"bias_{l}": b for l, b in enumerate(biases)})
            _check_params_finite(named, f"joint training, epoch {epoch}")
            seconds = _elapsed(t0, device)
            due = epoch % self.eval_every == 0 or epoch == self.n_epochs
            row = record(epoch, lr, momentum, seconds, due)
            if self.progress and due:
                post = {"recon": f"{row['train_reconstruction_error']:.4f}"}
                if "test_log_likelihood" in row:
                    post["test_ll"] = f"{row['test_log_likelihood']:.2f}"
                epochs.set_postfix(**post)

    @staticmethod
    def _initial_chains(v: torch.Tensor, weights, biases, gen: torch.Generator) -> list[torch.Tensor]:
        """Chain states ``[v, h_1, ..., h_L]``: data rows with a sampled doubled bottom-up pass."""
        L = len(weights)
        states = [v]
        for l in range(1, L + 1):
            states.append(
                bernoulli_from_logits_(
                    torch.addmm(biases[l], states[-1], weights[l - 1], alpha=2.0 if l < L else 1.0), gen
                )
            )
        return states

    @staticmethod
    def _logits(l: int, states: list[torch.Tensor], weights, biases) -> torch.Tensor:
        """Pre-activation of layer ``l`` given its neighbours in ``states``."""
        out = biases[l].expand(states[0].shape[0], -1)
        if l >= 1:
            out = torch.addmm(out, states[l - 1], weights[l - 1])
        if l < len(weights):
            out = torch.addmm(out, states[l + 1], weights[l].T)
        return out

    def _mean_field(self, v: torch.Tensor, weights, biases) -> list[torch.Tensor]:
        """Positive phase: ``[v, mu_1, ..., mu_L]`` after the bottom-up init and ``n_mean_field_iter`` sweeps."""
        L = len(weights)
        mu = [v]
        for l in range(1, L + 1):
            mu.append(torch.sigmoid(torch.addmm(biases[l], mu[-1], weights[l - 1], alpha=2.0 if l < L else 1.0)))
        if L == 1:  # the posterior factorises: exact in one step
            return mu
        for _ in range(self.n_mean_field_iter):
            for parity in (1, 0):
                for l in range(2 if parity == 0 else 1, L + 1, 2):
                    mu[l] = torch.sigmoid(self._logits(l, mu, weights, biases))
        return mu

    def _joint_update(self, weights, biases, velocity, v0, chains, lr, momentum, gen) -> list[torch.Tensor]:
        """One stochastic-approximation step; returns the advanced chains (even layers sampled)."""
        L = len(weights)
        mu = self._mean_field(v0, weights, biases)
        states = list(chains)
        for _ in range(self.k):
            for l in range(1, L + 1, 2):
                states[l] = bernoulli_from_logits_(self._logits(l, states, weights, biases), gen)
            for l in range(0, L + 1, 2):
                states[l] = bernoulli_from_logits_(self._logits(l, states, weights, biases), gen)
        neg = list(states)
        for l in range(1, L + 1, 2):  # Rao-Blackwellised odd layers
            neg[l] = torch.sigmoid(self._logits(l, states, weights, biases))
        B, N = v0.shape[0], states[0].shape[0]
        grads = []
        for l in range(1, L + 1):
            g = torch.addmm(weights[l - 1], mu[l - 1].T, mu[l], beta=-self.weight_decay, alpha=1.0 / B)
            grads.append(g.addmm_(neg[l - 1].T, neg[l], alpha=-1.0 / N))
        grads += [mu[l].mean(0) - neg[l].mean(0) for l in range(L + 1)]
        for param, vel, grad in zip((*weights, *biases), velocity, grads):
            vel.mul_(momentum).add_(grad, alpha=lr)
            param.add_(vel)
        return states

    # ------------------------------------------------------------------ helpers
    def _momentum(self, epoch: int) -> float:
        return float(self.initial_momentum if epoch <= self.momentum_switch_epoch else self.final_momentum)

    @staticmethod
    def _row(phase, layer, epoch, lr, momentum, seconds, eval_seconds, layer_err) -> dict:
        return {
            "phase": phase,
            "layer": layer,
            "epoch": epoch,
            "learning_rate": float(lr),
            "momentum": float(momentum),
            "seconds": float(seconds),
            "eval_seconds": float(eval_seconds),
            "layer_reconstruction_error": float(layer_err),
        }

    def _check_params(self) -> list[int]:
        """Raise ``ValueError`` naming the first invalid hyperparameter; returns the hidden sizes."""
        sizes = _check_hidden_sizes(self.hidden_sizes)
        per_layer_epochs(self.pretrain_epochs, len(sizes))
        _check_declared(self, "pretrain_k n_epochs batch_size k n_persistent_chains n_mean_field_iter")
        _check_declared(self, "momentum_switch_epoch eval_subsample exact_ll_max_units eval_every seed")
        _check_exact_units(self.exact_ll_max_units, min(MAX_ENUMERATION_BITS, DBM_MAX_EXACT_BITS), "exact evaluation")
        _check_declared(self, "lr_schedule pretrain_activities visible_bias_init learning_rate pretrain_learning_rate")
        _check_declared(self, "lr_decay initial_momentum final_momentum weight_decay pretrain_weight_decay init_scale")
        return sizes


class _DBMEvaluator:
    """DBM metrics on fixed subsamples of the training and test data."""

    def __init__(
        self,
        x_train: torch.Tensor,
        x_test: torch.Tensor | None,
        max_rows: int,
        exact_ll_max_units: int,
        gen: torch.Generator,
    ):
        self.max_units = exact_ll_max_units
        self.sets = _subsamples(x_train, x_test, max_rows, gen)
        self._keys: list[str] | None = None

    def exact_ok(self, model: DBM) -> bool:
        view = model.as_rbm()
        n_even_hidden = view.n_visible - model.n_visible
        return (
            0 < self.max_units
            and min(view.n_visible, view.n_hidden) <= self.max_units
            and n_even_hidden <= self.max_units
        )

    def keys(self, model: DBM) -> list[str]:
        if self._keys is None:
            names = []
            for name in self.sets:
                names += [f"{name}_reconstruction_error", f"{name}_mean_field_bound"]
            if self.exact_ok(model):
                names += ["log_z"] + [f"{name}_log_likelihood" for name in self.sets]
            self._keys = names
        return self._keys

    def skipped(self) -> dict:
        return {**dict.fromkeys(self._keys or [], math.nan), "eval_seconds": 0.0}

    def __call__(self, model: DBM) -> dict:
        t0 = time.perf_counter()
        keys = self.keys(model)
        out = {}
        for name, x in self.sets.items():
            mu = model.mean_field(x)
            recon = torch.sigmoid(mu[0] @ model.weights[0].double().T + model.biases[0].double())
            out[f"{name}_reconstruction_error"] = float(((recon - x.double()) ** 2).mean())
            out[f"{name}_mean_field_bound"] = float(model.mean_field_bound(x, mu).mean())
        if "log_z" in keys:
            out["log_z"] = log_z = model.exact_log_z()
            for name, x in self.sets.items():
                out[f"{name}_log_likelihood"] = float(model.exact_log_f(x).mean()) - log_z
        out = {key: out[key] for key in keys}
        out["eval_seconds"] = _elapsed(t0, model.device)
        return out


def train_dbm(train, test=None, **hyperparams) -> tuple[DBM, list[dict]]:
    """Train a DBM: ``DBMTrainer(**hyperparams).fit(train, test)``; returns ``(model_, history_)``."""
    trainer = DBMTrainer(**hyperparams).fit(train, test)
    return trainer.model_, trainer.history_
