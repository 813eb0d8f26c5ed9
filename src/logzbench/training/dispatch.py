"""Training any family: :func:`train_model` (the registry's trainer of the family, or a black-box
learner), :func:`train_rbm`, :func:`train_with_learner`.

The hyperparameters a family's trainer takes are the registry's (:attr:`logzbench.registry.FamilySpec.hyperparams`,
declared in :mod:`logzbench.training.hyperparams`); an unknown one is refused before any work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from .. import registry
from .hyperparams import declared_names

if TYPE_CHECKING:
    from ..models.rbm import BinaryRBM

__all__ = ["check_family_hyperparams", "train_model", "train_rbm", "train_with_learner"]


def train_rbm(train, test=None, **hyperparams) -> tuple[BinaryRBM, list[dict]]:
    """Train an RBM: ``RBMTrainer(**hyperparams).fit(train, test)``.

    Parameters
    ----------
    train, test
        As :func:`train_model`.
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
        raise ValueError(
            f"unknown model family {family!r}; choose one of "
            f"{sorted(registry.family_names('binary')) + sorted(CONTINUOUS_FAMILIES)}"
        )
    spec = registry.family(name)
    if learner is not None:
        model, history, _ = train_with_learner(
            train, valid if valid is not None else test, family=name, learner=learner, **hyperparams
        )
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


def check_family_hyperparams(family: str, hyperparams: Mapping[str, Any]) -> None:
    """Refuse, before any data is read, a hyperparameter a binary family's trainer does not take (the
    names its declaration gives; :func:`train_model`'s own check and message).  ``family`` and ``learner``
    keys are :func:`train_model`'s; other families' trainers check their names themselves."""
    spec = registry.family(family)
    if spec.kind == "binary":
        _binary_hyperparams(spec.name, {k: v for k, v in hyperparams.items() if k not in ("family", "learner")})


def _binary_hyperparams(name: str, hyperparams: dict) -> dict:
    """The hyperparameters of binary family ``name``, checked against its trainer class's arguments.

    Parameters
    ----------
    name : str
        A binary family (:data:`logzbench.registry.FAMILIES`).
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
    spec = registry.family(name)
    hp = dict(hyperparams)
    if name == "rbm" and "hidden_sizes" in hp:
        sizes = hp.pop("hidden_sizes")
        if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__len__") or len(sizes) != 1:
            raise ValueError(f"an RBM has one hidden layer: hidden_sizes must have one entry, got {sizes!r}")
        if "n_hidden" in hp and hp["n_hidden"] != sizes[0]:
            raise ValueError(f"conflicting n_hidden={hp['n_hidden']!r} and hidden_sizes={sizes!r}")
        hp["n_hidden"] = sizes[0]
    valid = declared_names(*spec.hyperparams)
    unknown = sorted(set(hp) - valid)
    if unknown:
        trainer = ", ".join(t.rpartition(":")[2] for t in spec.hyperparams)
        raise ValueError(f"unknown hyperparameter(s) {unknown} for family {name!r} ({trainer}); valid: {sorted(valid)}")
    return hp
