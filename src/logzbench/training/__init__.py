"""Training binary RBMs (CD-k / PCD-k) with per-epoch monitoring.

>>> model, history = train_rbm(x_train, x_test, **TRAIN_PRESETS["mnistCD1-20"])  # doctest: +SKIP
"""

from __future__ import annotations

from ..models.rbm import BinaryRBM
from .metrics import exact_log_likelihood, pseudo_log_likelihood, reconstruction_error
from .presets import TRAIN_PRESETS
from .trainer import RBMTrainer, TrainingDivergedError, history_to_csv

__all__ = [
    "RBMTrainer", "TRAIN_PRESETS", "TrainingDivergedError", "exact_log_likelihood", "history_to_csv",
    "pseudo_log_likelihood", "reconstruction_error", "train_rbm",
]


def train_rbm(train, test=None, **hyperparams) -> tuple[BinaryRBM, list[dict]]:
    """Train an RBM: ``RBMTrainer(**hyperparams).fit(train, test)``.

    Parameters
    ----------
    train : array-like, shape (n_train, n_visible)
        Binary training data.
    test : array-like, shape (n_test, n_visible), optional
        Held-out binary data to monitor.
    **hyperparams
        :class:`RBMTrainer` arguments (e.g. ``**TRAIN_PRESETS[name]``).

    Returns
    -------
    model : BinaryRBM
    history : list of dict
        Per-epoch records (see :meth:`RBMTrainer.fit`).
    """
    trainer = RBMTrainer(**hyperparams).fit(train, test)
    return trainer.model_, trainer.history_
