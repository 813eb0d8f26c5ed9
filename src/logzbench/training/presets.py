"""Named training recipes for the seed papers' RBMs (keyword arguments of :class:`RBMTrainer`).

RAISE (Burda, Grosse & Salakhutdinov 2015, Table 1) evaluates five MNIST RBMs -- the
ones of Grosse et al. (2013) -- named "mnist<algorithm>-<n_hidden>", and an Omniglot RBM
with 1,000 hidden units trained by PCD ("omniPCD-1000"), but lists none of their training
hyperparameters.  For those we chose a common recipe from Hinton's
practical guide: learning rate 0.05, batch 100, momentum 0.5 -> 0.9 after epoch 5,
weight decay 2e-4, N(0, 0.01^2) initial weights, base-rate visible biases, 100 epochs.
The PCD models (the Omniglot one included) follow Tieleman (2008): 100 persistent chains (one per minibatch row)
and a learning rate decaying linearly to zero, which persistent chains need to converge.

Upadhya & Sastry (Section 4) state their recipe: CD-20, learning rate 0.1, batch 100,
weight decay 0.001, momentum 0.5 -> 0.9 at epoch 5, weights U[-1/sqrt(L), 1/sqrt(L)] with
L = min(n_visible, n_hidden).  They give no epoch count; we use 50.

Override any entry, e.g. ``RBMTrainer(**{**TRAIN_PRESETS["mnistCD1-20"], "n_epochs": 5})``.

**Deep models** (:data:`DEEP_TRAIN_PRESETS`; keyword arguments of ``train_model``, each with its
``family``).  RAISE (Sections 5.2, 5.3) evaluates an MNIST DBM 784-500-1000, an Omniglot DBM
784-1000-1000, an MNIST DBN 784-500-2000 and an Omniglot DBN 784-1000-1000, and again gives
no training hyperparameters.  Our recipes:

* DBMs (:class:`DBMTrainer`), after Salakhutdinov & Hinton (2009), "Deep Boltzmann Machines"
  (Sec. 4: minibatches of 100, 100 persistent chains, 5 Gibbs sweeps per update, learning rate
  decreasing to zero): pretraining 100 epochs per layer of CD-1 (learning rate 0.05, weight
  decay 1e-3, mean-field activities as the next layer's data), then 300 epochs of joint
  training, learning rate 0.005 decaying linearly to 0, 10 mean-field sweeps in the positive
  phase, weight decay 2e-4; momentum 0.5 -> 0.9 after epoch 5 in both phases (Hinton's guide).
  The epoch counts, learning rates and decays are our choices (the paper's are not all stated);
  the Omniglot DBM uses the same recipe.
* DBNs (:class:`DBNTrainer`), greedy as in Hinton, Osindero & Teh (2006): the first RBM by
  CD-1 with the RBM recipe above (learning rate 0.05, momentum 0.5 -> 0.9, weight decay 2e-4,
  100 epochs), the top RBM by PCD-1 with 100 persistent chains and a learning rate 0.05
  decaying linearly to 0 over 100 epochs (Tieleman 2008), on one fixed sample
  ``h_1 ~ q(h_1 | v)`` per training row.  Also our choices.

Exact evaluation is impossible at these sizes, so the deep presets set ``exact_ll_max_units=0``
and evaluate every 10 epochs.

:data:`MODEL_PRESETS` holds every preset of every family with its ``family`` key (the RBM
presets get ``"family": "rbm"``), for ``train_model(train, test, **MODEL_PRESETS[name])``;
:data:`TRAIN_PRESETS` keeps the RBM presets as plain :class:`RBMTrainer` arguments.
"""

from __future__ import annotations

__all__ = ["DEEP_TRAIN_PRESETS", "MODEL_PRESETS", "TRAIN_PRESETS", "get_preset"]

#: Hinton's guide: momentum 0.5, then 0.9 after epoch 5 (every preset)
_MOMENTUM = dict(initial_momentum=0.5, final_momentum=0.9, momentum_switch_epoch=5)
_RAISE_COMMON = dict(
    learning_rate=0.05,
    lr_schedule="constant",
    batch_size=100,
    n_epochs=100,
    **_MOMENTUM,
    weight_decay=2e-4,
    init="normal",
    init_scale=0.01,
    visible_bias_init="base_rate",
)
_PCD = dict(method="pcd", k=1, lr_schedule="linear", n_persistent_chains=100)

_UPADHYA_SASTRY = dict(
    method="cd",
    k=20,
    learning_rate=0.1,
    lr_schedule="constant",
    batch_size=100,
    n_epochs=50,
    **_MOMENTUM,
    weight_decay=1e-3,
    init="uniform_sqrt",
    visible_bias_init="base_rate",
)

#: name -> RBMTrainer keyword arguments (see the module docstring for the sources).
TRAIN_PRESETS: dict[str, dict] = {
    "mnistCD1-20": {**_RAISE_COMMON, "n_hidden": 20, "method": "cd", "k": 1},
    "mnistPCD-20": {**_RAISE_COMMON, **_PCD, "n_hidden": 20},
    "mnistCD1-500": {**_RAISE_COMMON, "n_hidden": 500, "method": "cd", "k": 1},
    "mnistPCD-500": {**_RAISE_COMMON, **_PCD, "n_hidden": 500},
    "mnistCD25-500": {**_RAISE_COMMON, "n_hidden": 500, "method": "cd", "k": 25},
    "omniPCD-1000": {**_RAISE_COMMON, **_PCD, "n_hidden": 1000},
    "us-rbm20": {**_UPADHYA_SASTRY, "n_hidden": 20},
    "us-rbm200": {**_UPADHYA_SASTRY, "n_hidden": 200},
    "us-rbm500": {**_UPADHYA_SASTRY, "n_hidden": 500},
}

#: the deep models are not enumerable: no exact evaluation, metrics every 10 epochs on 1,000 rows
_DEEP_EVAL = dict(eval_subsample=1000, exact_ll_max_units=0, eval_every=10)
_DBM = dict(
    family="dbm",
    pretrain_epochs=100,
    pretrain_k=1,
    pretrain_learning_rate=0.05,
    pretrain_weight_decay=1e-3,
    pretrain_activities="mean",
    n_epochs=300,
    learning_rate=0.005,
    lr_schedule="linear",
    batch_size=100,
    k=5,
    n_persistent_chains=100,
    n_mean_field_iter=10,
    **_MOMENTUM,
    weight_decay=2e-4,
    init_scale=0.01,
    visible_bias_init="base_rate",
    **_DEEP_EVAL,
)
#: the first RBM by the RAISE recipe, the top one by PCD-1 (Tieleman 2008)
_DBN = dict(
    family="dbn",
    method="cd",
    k=1,
    **_RAISE_COMMON,
    n_persistent_chains=100,
    top_method="pcd",
    top_k=1,
    top_learning_rate=0.05,
    top_lr_schedule="linear",
    top_n_epochs=100,
    top_samples_per_row=1,
    **_DEEP_EVAL,
)

#: name -> ``train_model`` keyword arguments of the deep models (see the module docstring).
DEEP_TRAIN_PRESETS: dict[str, dict] = {
    "mnist-dbm-500-1000": {**_DBM, "hidden_sizes": [500, 1000]},
    "omniglot-dbm-1000-1000": {**_DBM, "hidden_sizes": [1000, 1000]},
    "mnist-dbn-500-2000": {**_DBN, "hidden_sizes": [500, 2000]},
    "omniglot-dbn-1000-1000": {**_DBN, "hidden_sizes": [1000, 1000]},
}

#: name -> ``train_model`` keyword arguments (with ``family``) of every preset, RBMs included.
MODEL_PRESETS: dict[str, dict] = {
    **{name: {"family": "rbm", **params} for name, params in TRAIN_PRESETS.items()},
    **DEEP_TRAIN_PRESETS,
}


def get_preset(name: str) -> dict:
    """A copy of ``MODEL_PRESETS[name]``; a clear ``ValueError`` for an unknown name."""
    if name not in MODEL_PRESETS:
        raise ValueError(f"unknown preset {name!r}; known: {sorted(MODEL_PRESETS)}")
    return {key: list(value) if isinstance(value, list) else value for key, value in MODEL_PRESETS[name].items()}
