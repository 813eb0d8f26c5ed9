"""Named training recipes for the seed papers' RBMs (keyword arguments of :class:`RBMTrainer`).

RAISE (Burda, Grosse & Salakhutdinov 2015, Table 1) evaluates five MNIST RBMs -- the
ones of Grosse et al. (2013) -- named "mnist<algorithm>-<n_hidden>", but lists none of
their training hyperparameters.  For those we chose a common recipe from Hinton's
practical guide: learning rate 0.05, batch 100, momentum 0.5 -> 0.9 after epoch 5,
weight decay 2e-4, N(0, 0.01^2) initial weights, base-rate visible biases, 100 epochs.
The PCD models follow Tieleman (2008): 100 persistent chains (one per minibatch row)
and a learning rate decaying linearly to zero, which persistent chains need to converge.

Upadhya & Sastry (Section 4) state their recipe: CD-20, learning rate 0.1, batch 100,
weight decay 0.001, momentum 0.5 -> 0.9 at epoch 5, weights U[-1/sqrt(L), 1/sqrt(L)] with
L = min(n_visible, n_hidden).  They give no epoch count; we use 50.

Override any entry, e.g. ``RBMTrainer(**{**TRAIN_PRESETS["mnistCD1-20"], "n_epochs": 5})``.
"""

from __future__ import annotations

__all__ = ["TRAIN_PRESETS"]

_RAISE_COMMON = dict(
    learning_rate=0.05, lr_schedule="constant", batch_size=100, n_epochs=100,
    initial_momentum=0.5, final_momentum=0.9, momentum_switch_epoch=5, weight_decay=2e-4,
    init="normal", init_scale=0.01, visible_bias_init="base_rate",
)
_PCD = dict(method="pcd", k=1, lr_schedule="linear", n_persistent_chains=100)

_UPADHYA_SASTRY = dict(
    method="cd", k=20, learning_rate=0.1, lr_schedule="constant", batch_size=100, n_epochs=50,
    initial_momentum=0.5, final_momentum=0.9, momentum_switch_epoch=5, weight_decay=1e-3,
    init="uniform_sqrt", visible_bias_init="base_rate",
)

#: name -> RBMTrainer keyword arguments (see the module docstring for the sources).
TRAIN_PRESETS: dict[str, dict] = {
    "mnistCD1-20": {**_RAISE_COMMON, "n_hidden": 20, "method": "cd", "k": 1},
    "mnistPCD-20": {**_RAISE_COMMON, **_PCD, "n_hidden": 20},
    "mnistCD1-500": {**_RAISE_COMMON, "n_hidden": 500, "method": "cd", "k": 1},
    "mnistPCD-500": {**_RAISE_COMMON, **_PCD, "n_hidden": 500},
    "mnistCD25-500": {**_RAISE_COMMON, "n_hidden": 500, "method": "cd", "k": 25},
    "us-rbm20": {**_UPADHYA_SASTRY, "n_hidden": 20},
    "us-rbm200": {**_UPADHYA_SASTRY, "n_hidden": 200},
    "us-rbm500": {**_UPADHYA_SASTRY, "n_hidden": 500},
}
