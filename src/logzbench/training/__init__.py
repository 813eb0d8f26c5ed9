"""Training binary RBMs (CD-k / PCD-k), DBMs and DBNs with per-epoch monitoring.

>>> model, history = train_rbm(x_train, x_test, **TRAIN_PRESETS["mnistCD1-20"])  # doctest: +SKIP
>>> model, history = train_model(x_train, x_test, **MODEL_PRESETS["mnist-dbm-500-1000"])  # doctest: +SKIP
>>> model, history = train_avil(x_train, x_valid, family="rbm", hidden_sizes=(50,))  # doctest: +SKIP

:func:`train_model` is the single entry point for every family: its ``family`` keyword
(``"rbm"``, ``"dbm"`` or ``"dbn"``) picks :class:`RBMTrainer`, :class:`DBMTrainer` or
:class:`DBNTrainer`, and the other keywords are that trainer's hyperparameters.

Black-box variational learners (they need only the energy ``E(v, h)``; Li et al. 2019):
:func:`train_avil` (AVIL, Alg. 1), :func:`train_nvil` (NVIL with a neural auxiliary-variable
``q``, Kuleshov & Ermon 2017) and :func:`train_vcd` (variational CD for DBMs), each
``(train, valid=None, **hyperparams) -> (model, history)`` with ``history`` a dict of
equal-length lists; the bounds and networks are in :mod:`logzbench.training.variational`.
"""

from __future__ import annotations

from .. import _lazy_exports
from .presets import DEEP_TRAIN_PRESETS, MODEL_PRESETS, TRAIN_PRESETS, get_preset

__all__ = [
    "CONTINUOUS_FAMILIES",
    "DBMTrainer",
    "DBNTrainer",
    "DEEP_TRAIN_PRESETS",
    "MODEL_PRESETS",
    "RBMTrainer",
    "TRAIN_PRESETS",
    "TrainingDivergedError",
    "exact_log_likelihood",
    "get_preset",
    "history_to_csv",
    "pseudo_log_likelihood",
    "reconstruction_error",
    "train_avil",
    "train_continuous",
    "train_dbm",
    "train_dbn",
    "train_model",
    "train_nvil",
    "train_rbm",
    "train_vcd",
    "train_with_learner",
]

#: The trainers are imported on first use (PEP 562), so that the presets (plain data) can be read
#: without torch -- the workflow's DAG building reads them.
_LAZY = {
    "CONTINUOUS_FAMILIES": ".continuous",
    "train_continuous": ".continuous",
    "DBMTrainer": ".dbm",
    "train_dbm": ".dbm",
    "DBNTrainer": ".dbn",
    "train_dbn": ".dbn",
    "exact_log_likelihood": ".metrics",
    "pseudo_log_likelihood": ".metrics",
    "reconstruction_error": ".metrics",
    "RBMTrainer": ".trainer",
    "TrainingDivergedError": ".trainer",
    "history_to_csv": ".trainer",
    "train_model": ".dispatch",
    "train_rbm": ".dispatch",
    "train_with_learner": ".dispatch",
    # black-box variational learners (Li et al. 2019): AVIL, NVIL, VCD; their pieces in .variational
    "train_avil": ".avil",
    "train_nvil": ".nvil",
    "train_vcd": ".vcd",
}

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY)
