"""Greedy training of two-hidden-layer deep belief networks (Hinton, Osindero & Teh 2006).

1. An RBM on ``v`` with ``n_1`` hidden units is trained by :class:`RBMTrainer` (CD-k or PCD-k,
   ``method`` / ``k``).  Its weights become the generative weights ``W_1`` of ``p(v | h_1)``, its
   visible bias ``bias_0``, and its hidden bias the recognition bias ``c`` of
   ``q(h_1 | v) = sigmoid(v W_1 + c)``; the recognition weights are tied, ``recognition_W = W_1``.
2. The top RBM on ``(h_1, h_2)`` is trained by :class:`RBMTrainer` (``top_method`` / ``top_k``,
   PCD by default) on binary samples ``h_1 ~ q(h_1 | v)`` of the training rows: **one fixed
   sample set drawn once** after layer 1 (``top_samples_per_row`` samples per training row,
   stacked), not fresh samples each epoch, so the top layer is an ordinary RBMTrainer run.
   It gives ``W_2``, ``bias_1`` (its visible bias) and ``bias_2`` (its hidden bias).

Replacing the first RBM's implicit prior over ``h_1`` by the top RBM is the greedy step of
Hinton et al. (2006): it cannot lower the variational bound
``E_q[log p(v | h_1) + log p_2(h_1) - log q(h_1 | v)]`` on ``log p(v)`` if the top RBM models the
aggregated posterior better than the first RBM's own marginal over ``h_1`` (which makes the
bound tight at the start).

All randomness comes from one generator seeded by ``seed``: the two RBMTrainer seeds, the
``h_1`` samples of the training rows, and separate spawned generators for the test rows'
``h_1`` samples and for monitoring (so monitoring never changes the trained model).
"""

from __future__ import annotations

import math
import time

import torch

from ..kernels import bernoulli
from ..models.dbn import DBN
from ..models.dbn import MAX_EXACT_BITS as DBN_MAX_EXACT_BITS
from ..utils import make_generator, resolve_device
from .common import _check_hidden_sizes
from .hyperparams import RBM_TRAINER, DBNTrainerParams, Hyperparameters
from .trainer import (
    RBMTrainer,
    TrainingDivergedError,
    _check_exact_units,
    _check_int,
    _elapsed,
    _spawn_seed,
    _subsamples,
    _train_test_rows,
)

__all__ = ["DBNTrainer", "train_dbn"]

#: Recognition samples per row of the Monte-Carlo variational bound in the history.
_BOUND_SAMPLES = 10
_STEP_KEYS = ("epoch", "learning_rate", "momentum", "seconds", "eval_seconds")


class DBNTrainer(Hyperparameters, declaration=DBNTrainerParams):
    """Train a :class:`~logzbench.models.dbn.DBN` greedily, one :class:`RBMTrainer` per layer.

    Parameters
    ----------
    hidden_sizes : sequence of two int
        ``(n_1, n_2)``: sizes of ``h_1`` and of the top layer ``h_2``.
    method : {"cd", "pcd"}
        Training method of the first RBM.
    k : int
        Gibbs sweeps per update of the first RBM (and of the top RBM unless ``top_k``).
    learning_rate, lr_schedule, lr_decay, batch_size, n_epochs, initial_momentum, final_momentum,
    momentum_switch_epoch, weight_decay, init, init_scale, visible_bias_init, n_persistent_chains
        :class:`RBMTrainer` arguments, used for both RBMs (the ``top_*`` arguments override
        some of them for the top RBM).
    top_method : {"cd", "pcd"}
        Training method of the top RBM.
    top_k, top_learning_rate, top_lr_schedule, top_n_epochs : optional
        The top RBM's values; ``None`` takes ``k``, ``learning_rate``, ``lr_schedule``, ``n_epochs``.
    top_samples_per_row : int
        ``h_1`` samples drawn once per training row as the top RBM's training data.
    eval_subsample : int
        Monitor at most this many rows of each data set.
    exact_ll_max_units : int
        Record exact log-likelihoods when enumeration needs at most ``2^exact_ll_max_units``
        states: each RBM's (smaller layer, see :class:`RBMTrainer`) and the DBN's (``log Z``
        enumerates the top RBM's smaller layer, ``log f(v)`` enumerates ``h_1``).  At most 26.
    eval_every : int
        Evaluate every ``eval_every``-th epoch of each layer (and epoch 0 and the last).
    seed : int
    device : str or torch.device
    progress : bool

    Attributes
    ----------
    model_ : DBN
        The trained DBN, ``recognition_W`` tied to ``W_1``, ``data_mean`` the training pixel means.
    rbms_ : list of BinaryRBM
        The two trained RBMs (on ``v`` and on the ``h_1`` samples).
    history_ : list of dict
        One record per epoch of each layer; see :meth:`fit`.
    n_features_in_ : int
    """

    # ------------------------------------------------------------------ public
    def layer_trainers(self, seeds=(0, 0)) -> tuple[RBMTrainer, RBMTrainer]:
        """The two :class:`RBMTrainer` objects (unfitted) this trainer runs, with the given seeds."""
        n1, n2 = _check_hidden_sizes(self.hidden_sizes, n_layers=2)
        # the first RBM takes the DBN's values of the RBM trainer's hyperparameters; the top one the
        # top_* values where set
        first_params = {n: v for n, v in self.get_params().items() if n in RBM_TRAINER}
        first = RBMTrainer(**{**first_params, "n_hidden": n1, "seed": seeds[0]})
        top_params = {name: getattr(self, f"top_{name}") for name in ("k", "learning_rate", "lr_schedule", "n_epochs")}
        top_params = {n: v for n, v in top_params.items() if v is not None}
        top = RBMTrainer(**{**first_params, **top_params, "method": self.top_method, "n_hidden": n2, "seed": seeds[1]})
        return first, top

    def fit(self, train, test=None) -> "DBNTrainer":
        """Train both layers on ``train``, monitoring ``test`` when given.

        Parameters
        ----------
        train, test : array-like, shape (n, n_visible)
            Binary rows, as :meth:`RBMTrainer.fit` takes them (``test`` optional, only evaluated).

        Returns
        -------
        DBNTrainer
            ``self``, with ``model_``, ``rbms_``, ``history_`` and ``n_features_in_`` set.

        Notes
        -----
        Every record has the same keys: ``phase`` (``"layer1"`` / ``"layer2"``), ``layer``
        (1 / 2), ``epoch`` (within the layer; 0 = initial RBM), ``learning_rate``, ``momentum``,
        ``seconds``, ``eval_seconds``; the layer RBM's own :class:`RBMTrainer` metrics prefixed
        ``rbm_`` (for layer 2 they describe the top RBM on the ``h_1`` samples); and the DBN's
        metrics, recorded while the top layer trains (NaN in layer 1 and in skipped epochs),
        when the DBN is small enough (``exact_ll_max_units``): ``log_z``,
        ``{train,test}_log_likelihood`` (exact) and ``{train,test}_variational_bound``
        (``E_q[log p(v | h_1) + log f_2(h_1) - log q(h_1 | v)] - log Z``, Monte Carlo with
        10 recognition samples per row, the same draws every epoch).  At layer-2 epoch 0 the
        DBN has the untrained (random) top RBM.

        Raises
        ------
        ValueError
            On an invalid hyperparameter or invalid data.
        TrainingDivergedError
            When a layer's parameters become NaN or infinite.
        """
        self._check_params()
        device = resolve_device(self.device)
        x_train, x_test = _train_test_rows(train, test, device)
        n_visible = x_train.shape[1]

        gen = make_generator(self.seed, device)
        seeds = (_spawn_seed(gen), _spawn_seed(gen))
        test_gen = make_generator(_spawn_seed(gen), device)
        eval_seed = _spawn_seed(gen)
        first, top = self.layer_trainers(seeds)

        first = self._fit_layer(1, first, x_train, x_test)
        rbm1 = first.model_
        W_1, bias_0, rec_bias = rbm1.W, rbm1.visible_bias, rbm1.hidden_bias
        reps = self.top_samples_per_row
        h_train = torch.cat([bernoulli(torch.sigmoid(torch.addmm(rec_bias, x_train, W_1)), gen) for _ in range(reps)])
        h_test = None if x_test is None else bernoulli(torch.sigmoid(torch.addmm(rec_bias, x_test, W_1)), test_gen)

        data_mean = x_train.mean(0)
        evaluate = _DBNEvaluator(
            x_train, x_test, self.eval_subsample, self.exact_ll_max_units, make_generator(eval_seed, device), eval_seed
        )
        dbn_metrics: dict[int, dict] = {}
        n_top_epochs = top.n_epochs

        def callback(record, rbm):
            epoch = record["epoch"]
            due = epoch == 0 or epoch % self.eval_every == 0 or epoch == n_top_epochs
            if due and evaluate.enabled(rbm1.n_hidden, rbm.n_hidden):
                dbn = DBN(
                    W_1, bias_0, rbm.W, rbm.visible_bias, rbm.hidden_bias, rec_bias, device=device, data_mean=data_mean
                )
                dbn_metrics[epoch] = evaluate(dbn)

        top = self._fit_layer(2, top, h_train, h_test, callback)
        rbm2 = top.model_
        self.model_ = DBN(
            W_1, bias_0, rbm2.W, rbm2.visible_bias, rbm2.hidden_bias, rec_bias, device=device, data_mean=data_mean
        )
        self.rbms_ = [rbm1, rbm2]
        self.history_ = _merge_history(
            first.history_,
            top.history_,
            dbn_metrics,
            evaluate.keys() if evaluate.enabled(rbm1.n_hidden, rbm2.n_hidden) else [],
        )
        self.n_features_in_ = n_visible
        return self

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _fit_layer(layer: int, trainer: RBMTrainer, x, x_test, callback=None) -> RBMTrainer:
        try:
            return trainer.fit(x, x_test, callback=callback)
        except TrainingDivergedError as exc:
            raise TrainingDivergedError(f"DBN layer {layer} ({'v' if layer == 1 else 'top'} RBM): {exc}") from exc

    def _check_params(self) -> None:
        _check_hidden_sizes(self.hidden_sizes, n_layers=2)
        _check_int("top_samples_per_row", self.top_samples_per_row, 1)
        _check_int("exact_ll_max_units", self.exact_ll_max_units, 0)
        _check_exact_units(self.exact_ll_max_units, DBN_MAX_EXACT_BITS, "exact DBN evaluation", " of h_1")
        first, top = self.layer_trainers()
        first._check_params()
        try:
            top._check_params()
        except ValueError as exc:
            raise ValueError(f"top RBM (top_* settings or their defaults): {exc}") from exc


class _DBNEvaluator:
    """Exact log-likelihood and Monte-Carlo variational bound of a DBN on fixed subsamples."""

    def __init__(self, x_train, x_test, max_rows: int, exact_ll_max_units: int, gen: torch.Generator, bound_seed: int):
        self.max_units = exact_ll_max_units
        self.bound_seed = bound_seed
        self.sets = _subsamples(x_train, x_test, max_rows, gen)

    def enabled(self, n1: int, n2: int) -> bool:
        return 0 < self.max_units and n1 <= self.max_units and min(n1, n2) <= self.max_units

    def keys(self) -> list[str]:
        return ["log_z"] + [f"{name}_{what}" for what in ("log_likelihood", "variational_bound") for name in self.sets]

    def __call__(self, dbn: DBN) -> dict:
        t0 = time.perf_counter()
        out = {"log_z": dbn.exact_log_z()}
        for name, x in self.sets.items():
            out[f"{name}_log_likelihood"] = float(dbn.exact_log_f(x).mean()) - out["log_z"]
            out[f"{name}_variational_bound"] = float(self._bound(dbn, x).mean()) - out["log_z"]
        out["eval_seconds"] = _elapsed(t0, dbn.device)
        return out

    def _bound(self, dbn: DBN, x: torch.Tensor, chunk: int = 1 << 14) -> torch.Tensor:
        """Per-row Monte-Carlo ``E_q[log p(v | h_1) + log f_2(h_1) - log q(h_1 | v)]`` (common random numbers)."""
        gen = make_generator(self.bound_seed, x.device)
        S = _BOUND_SAMPLES
        per = max(1, chunk // S)
        parts = []
        for i in range(0, x.shape[0], per):
            v = x[i : i + per].repeat_interleave(S, 0)
            h1, lq = dbn.sample_recognition(v, gen, clip=0.0)  # the recognition q itself
            lw = dbn.log_p_v_given_h1(v, h1) + dbn.top.log_unnormalized_marginal(h1) - lq
            parts.append(lw.reshape(-1, S).mean(1))
        return torch.cat(parts)


def _merge_history(first: list[dict], top: list[dict], dbn_metrics: dict[int, dict], dbn_keys: list[str]) -> list[dict]:
    """One list of records with identical keys (see :meth:`DBNTrainer.fit`)."""
    rbm_keys: list[str] = []
    for rec in (*first, *top):
        for key in rec:
            if key not in _STEP_KEYS and f"rbm_{key}" not in rbm_keys:
                rbm_keys.append(f"rbm_{key}")
    out = []
    for layer, records in ((1, first), (2, top)):
        for rec in records:
            row = {"phase": f"layer{layer}", "layer": layer, **{key: rec[key] for key in _STEP_KEYS}}
            row.update({key: rec.get(key[4:], math.nan) for key in rbm_keys})
            extra = dbn_metrics.get(rec["epoch"], {}) if layer == 2 else {}
            row["eval_seconds"] += extra.get("eval_seconds", 0.0)
            row.update({key: extra.get(key, math.nan) for key in dbn_keys})
            out.append(row)
    return out


def train_dbn(train, test=None, **hyperparams) -> tuple[DBN, list[dict]]:
    """Train a DBN: ``DBNTrainer(**hyperparams).fit(train, test)``; returns ``(model_, history_)``."""
    trainer = DBNTrainer(**hyperparams).fit(train, test)
    return trainer.model_, trainer.history_
