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

import importlib
import inspect
from typing import TYPE_CHECKING

from .. import registry
from .presets import DEEP_TRAIN_PRESETS, MODEL_PRESETS, TRAIN_PRESETS, get_preset

if TYPE_CHECKING:
    from ..models.rbm import BinaryRBM

__all__ = [
    "CONTINUOUS_FAMILIES", "DBMTrainer", "DBNTrainer", "DEEP_TRAIN_PRESETS", "FAMILIES", "MODEL_PRESETS", "RBMTrainer", "TRAIN_PRESETS",
    "TrainingDivergedError", "exact_log_likelihood", "get_preset", "history_to_csv", "pseudo_log_likelihood",
    "reconstruction_error", "train_avil", "train_continuous", "train_dbm", "train_dbn", "train_model",
    "train_nvil", "train_rbm", "train_vcd", "train_with_learner",
]

#: binary family -> trainer class, whose constructor arguments are the hyperparameters
#: :func:`train_model` accepts for it (the registry names the function that trains it)
#: The trainers are imported on first use (PEP 562), so that the presets (plain data) can be read
#: without torch -- the workflow's DAG building reads them.
_LAZY = {
    "CONTINUOUS_FAMILIES": ".continuous", "train_continuous": ".continuous",
    "DBMTrainer": ".dbm", "train_dbm": ".dbm", "DBNTrainer": ".dbn", "train_dbn": ".dbn",
    "exact_log_likelihood": ".metrics", "pseudo_log_likelihood": ".metrics", "reconstruction_error": ".metrics",
    "RBMTrainer": ".trainer", "TrainingDivergedError": ".trainer", "history_to_csv": ".trainer",
    # black-box variational learners (Li et al. 2019): AVIL, NVIL, VCD; their pieces in .variational
    "train_avil": ".avil", "train_nvil": ".nvil", "train_vcd": ".vcd",
}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    elif name == "FAMILIES":
        value = _families()
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def _families() -> dict:
    """The binary families' trainer classes: ``{"rbm": RBMTrainer, "dbm": DBMTrainer, "dbn": DBNTrainer}``."""
    from .dbm import DBMTrainer
    from .dbn import DBNTrainer
    from .trainer import RBMTrainer

    return {"rbm": RBMTrainer, "dbm": DBMTrainer, "dbn": DBNTrainer}


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
    from .trainer import RBMTrainer

    trainer = RBMTrainer(**hyperparams).fit(train, test)
    return trainer.model_, trainer.history_


def train_model(train, test=None, *, family: str = "rbm", learner: str | None = None, valid=None, **hyperparams):
    """Train a model of any family; returns ``(model, history)``.

    Parameters
    ----------
    train : array-like, shape (n_train, n_visible)
        Binary training data.
    test : array-like, shape (n_test, n_visible), optional
        Held-out binary data to monitor.
    family : {"rbm", "dbm", "dbn", "poe-laplace", "poe-student-t", "mcrbm", "linear-gaussian", \
"linear-laplace", "bilinear"}
        Model family: :func:`train_rbm` (:class:`RBMTrainer`), :class:`DBMTrainer`,
        :class:`DBNTrainer`, or a continuous model (:func:`~logzbench.training.continuous.train_continuous`:
        ``size``, ``n_iter``, ``seed`` and the MPF / EM trainer's keywords).
    learner : {"avil", "nvil", "vcd"}, optional
        Train with a black-box variational learner (:data:`logzbench.registry.LEARNERS`:
        :func:`train_avil`, :func:`train_nvil`, :func:`train_vcd`) instead of the family's trainer;
        ``n_hidden=n`` stands for ``hidden_sizes=(n,)``, and the history is one row per logged
        iteration (key ``iteration``).
    valid : array-like, optional
        Validation rows a learner monitors (default ``test``).
    **hyperparams
        The trainer's constructor arguments, e.g. ``**MODEL_PRESETS[name]`` (which includes
        ``family``) plus overrides.  For ``family="rbm"``, ``hidden_sizes=[n]`` is accepted as
        ``n_hidden=n``.

    Returns
    -------
    model : BinaryRBM, DBM or DBN
        With ``data_mean`` set to the training pixel means; save it with
        :func:`logzbench.models.save_model`.
    history : list of dict
        Per-epoch records of the trainer's ``fit``.

    Raises
    ------
    ValueError
        On an unknown family, an unknown or invalid hyperparameter, or invalid data.
    TrainingDivergedError
        When the parameters become NaN or infinite.
    """
    from .continuous import CONTINUOUS_FAMILIES

    name = str(family).lower()
    if name not in registry.FAMILIES:
        raise ValueError(f"unknown model family {family!r}; choose one of "
                         f"{sorted(registry.family_names('binary')) + sorted(CONTINUOUS_FAMILIES)}")
    spec = registry.family(name)
    if learner is not None:
        model, history, _ = train_with_learner(train, valid if valid is not None else test, family=name,
                                               learner=learner, **hyperparams)
        return model, history
    trainer = registry.load(spec.trainer)
    if spec.kind != "binary":  # Sohl-Dickstein & Culpepper 2012: MPF or EM with HMC
        return trainer(train, test, family=name, **hyperparams)
    return trainer(train, test, **_binary_hyperparams(name, hyperparams))


def train_with_learner(train, valid=None, *, family: str, learner: str, **hyperparams):
    """Train with a black-box learner (:data:`logzbench.registry.LEARNERS`); return ``(model, history,
    state)``: the model, its history as one row (dict) per logged iteration (key ``iteration``), and the
    trained networks (``encoder``, ``decoder``, ...; for :func:`~.variational.figure_samples`).
    ``n_hidden=n`` stands for ``hidden_sizes=(n,)``; the other keywords are the learner's, checked first
    (:func:`~.learner_options.check_hyperparams`: ValueError naming an unknown key's closest name or
    a value's problem)."""
    from .learner_options import check_hyperparams

    spec = registry.learner(learner, family)
    check_hyperparams(spec.name, family, hyperparams)  # unknown keys (the closest named), values, before any work
    hp = dict(hyperparams)
    if "n_hidden" in hp:
        n = hp.pop("n_hidden")
        if "hidden_sizes" in hp and list(hp["hidden_sizes"]) != [n]:
            raise ValueError(f"conflicting n_hidden={n!r} and hidden_sizes={hp['hidden_sizes']!r}")
        hp["hidden_sizes"] = (n,)
    if "hidden_sizes" in hp:
        hp["hidden_sizes"] = tuple(int(n) for n in hp["hidden_sizes"])
    model, history, state = registry.load(spec.entry)(train, valid, family=family, return_state=True, **hp)
    columns = list(history)
    rows = [dict(zip(columns, values)) for values in zip(*(history[c] for c in columns))]
    return model, rows, state


def _binary_hyperparams(name: str, hyperparams: dict) -> dict:
    """The hyperparameters of binary family ``name``, checked against its trainer class's arguments.

    Parameters
    ----------
    name : str
        A binary family (a key of :data:`FAMILIES`).
    hyperparams : dict
        :func:`train_model`'s keywords; for an RBM ``hidden_sizes=[n]`` stands for ``n_hidden=n``.

    Returns
    -------
    dict
        The trainer's keyword arguments.

    Raises
    ------
    ValueError
        On an argument the trainer does not have, or a ``hidden_sizes`` an RBM cannot have.
    """
    cls = _families()[name]
    hp = dict(hyperparams)
    if name == "rbm" and "hidden_sizes" in hp:
        sizes = hp.pop("hidden_sizes")
        if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__len__") or len(sizes) != 1:
            raise ValueError(f"an RBM has one hidden layer: hidden_sizes must have one entry, got {sizes!r}")
        if "n_hidden" in hp and hp["n_hidden"] != sizes[0]:
            raise ValueError(f"conflicting n_hidden={hp['n_hidden']!r} and hidden_sizes={sizes!r}")
        hp["n_hidden"] = sizes[0]
    valid = list(inspect.signature(cls).parameters)
    unknown = sorted(set(hp) - set(valid))
    if unknown:
        raise ValueError(f"unknown hyperparameter(s) {unknown} for family {name!r} ({cls.__name__}); "
                         f"valid: {sorted(valid)}")
    return hp
