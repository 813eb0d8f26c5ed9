"""Every trainer's and learner's hyperparameters: their names and defaults, declared once.

The trainers and learners import torch; checking a workflow config (building its DAG) or a
``logzbench train`` command line before any data is read must not.  So each one's keyword
parameters (all but the data it is given and ``return_state``) are declared here, as plain data,
and the trainers take their defaults from here: :class:`~logzbench.training.trainer.RBMTrainer`'s
signature reads ``n_hidden: int = RBM_TRAINER["n_hidden"]``, and so on.  A parameter without a
default is :data:`REQUIRED`.  A test (tests/test_sweep.py) checks that each signature has
exactly the declared names with these defaults.

Targets are named ``"module:object"``, as :mod:`logzbench.registry` names them: each family's
``hyperparams`` and each learner's ``entry``.
"""

from __future__ import annotations

import numbers
from typing import Any

__all__ = [
    "AVIL",
    "CONTINUOUS",
    "JOB_ARGUMENTS",
    "DBM_TRAINER",
    "DBN_TRAINER",
    "DECLARED",
    "EM",
    "FAMILY_ONLY",
    "GRBM",
    "GRID_MRF",
    "MPF",
    "NVIL",
    "POTTS",
    "POTTS_RBM",
    "RBM_TRAINER",
    "REQUIRED",
    "VCD",
    "declared_parameters",
    "per_layer_epochs",
]

#: the default of a parameter that has none
REQUIRED = ...

#: :class:`~logzbench.training.trainer.RBMTrainer`
RBM_TRAINER = dict(
    n_hidden=500,
    method="cd",
    k=1,
    learning_rate=0.1,
    lr_schedule="constant",
    lr_decay=0.98,
    batch_size=100,
    n_epochs=10,
    initial_momentum=0.5,
    final_momentum=0.9,
    momentum_switch_epoch=5,
    weight_decay=2e-4,
    init="uniform_sqrt",
    init_scale=0.01,
    visible_bias_init="base_rate",
    n_persistent_chains=None,
    eval_subsample=10000,
    exact_ll_max_units=25,
    eval_every=1,
    seed=0,
    device="cpu",
    progress=False,
)
#: :class:`~logzbench.training.dbm.DBMTrainer` (``pretrain_epochs``: one integer for every layer, or a list with
#: one per layer, checked by :func:`per_layer_epochs`)
DBM_TRAINER = dict(
    hidden_sizes=(500, 1000),
    pretrain_epochs=100,
    pretrain_k=1,
    pretrain_learning_rate=0.05,
    pretrain_weight_decay=1e-3,
    pretrain_activities="mean",
    n_epochs=300,
    learning_rate=0.005,
    lr_schedule="linear",
    lr_decay=0.98,
    batch_size=100,
    k=5,
    n_persistent_chains=100,
    n_mean_field_iter=10,
    initial_momentum=0.5,
    final_momentum=0.9,
    momentum_switch_epoch=5,
    weight_decay=2e-4,
    init_scale=0.01,
    visible_bias_init="base_rate",
    eval_subsample=1000,
    exact_ll_max_units=20,
    eval_every=1,
    seed=0,
    device="cpu",
    progress=False,
)
#: :class:`~logzbench.training.dbn.DBNTrainer` (``top_*`` ``None``: the lower layers' value)
DBN_TRAINER = dict(
    hidden_sizes=(500, 2000),
    method="cd",
    k=1,
    learning_rate=0.05,
    lr_schedule="constant",
    lr_decay=0.98,
    batch_size=100,
    n_epochs=100,
    initial_momentum=0.5,
    final_momentum=0.9,
    momentum_switch_epoch=5,
    weight_decay=2e-4,
    init="normal",
    init_scale=0.01,
    visible_bias_init="base_rate",
    n_persistent_chains=None,
    top_method="pcd",
    top_k=None,
    top_learning_rate=None,
    top_lr_schedule=None,
    top_n_epochs=None,
    top_samples_per_row=1,
    eval_subsample=10000,
    exact_ll_max_units=20,
    eval_every=1,
    seed=0,
    device="cpu",
    progress=False,
)
#: :class:`~logzbench.training.grbm.GRBMHyperparams` (the Gaussian-Bernoulli RBM's trainer)
GRBM = dict(
    n_hidden=100,
    sigma=1.0,
    method="pcd",
    k=1,
    optimizer="adam",
    learning_rate=1e-3,
    adam_betas=(0.9, 0.999),
    momentum=0.5,
    batch_size=100,
    n_epochs=10,
    weight_decay=0.0,
    init_scale=0.01,
    n_persistent_chains=None,
    exact_ll_max_units=20,
    eval_subsample=10000,
    seed=0,
    device="cpu",
    progress=False,
)
#: :func:`~logzbench.training.potts.train_potts_rbm` (the Potts RBM: CD / PCD with Adam)
POTTS_RBM = dict(
    family="potts-rbm",
    n_hidden=20,
    n_states=None,
    method="pcd",
    k=1,
    learning_rate=0.01,
    batch_size=100,
    n_epochs=10,
    weight_decay=0.0,
    init_scale=0.01,
    n_persistent_chains=None,
    exact_ll_max_units=20,
    eval_subsample=1000,
    seed=0,
    device="cpu",
    progress=False,
)
#: :func:`~logzbench.training.potts.train_potts` (pairwise Potts: pseudo-likelihood, L-BFGS, L2 penalty)
POTTS = dict(
    family="potts",
    n_states=None,
    l2=0.01,
    l2_fields=0.01,
    n_iter=50,
    exact_ll_max_bits=16,
    seed=0,
    device="cpu",
    progress=False,
)
#: :func:`~logzbench.training.grid.generate_grid_mrf` (a grid MRF is generated, not trained: the spin glass
#: of :meth:`~logzbench.models.grid.GridMRF.spin_glass`)
GRID_MRF = dict(
    height=REQUIRED,
    width=REQUIRED,
    couplings="gaussian",
    beta=1.0,
    field=0.0,
    seed=0,
    device="cpu",
    progress=False,
)
#: :func:`~logzbench.training.continuous.train_continuous`: a continuous model of ``size`` and its fit's
#: keywords (:data:`MPF` for the analysis families, :data:`EM` for the generative ones)
CONTINUOUS = dict(family=REQUIRED, size=REQUIRED, seed=0, n_iter=100, learn_sigma=False, device=None, progress=False)
#: keywords of a shared trainer that only some families take: {keyword: families}
FAMILY_ONLY = {"learn_sigma": ("mcrbm",)}
#: :func:`~logzbench.training.mpf.train_mpf` (minimum probability flow, Sohl-Dickstein et al.)
MPF = dict(
    n_iter=200,
    seed=0,
    n_rounds=5,
    step_size="auto",
    n_leapfrog=1,
    antithetic=True,
    min_acceptance=0.5,
    gtol=1e-10,
    fixed=(),
    weight_decay=0.0,
    callback=None,
    verbose=False,
)
#: :func:`~logzbench.training.em.train_em` (EM with HMC or Gibbs posterior samples)
EM = dict(
    n_iter=REQUIRED,
    seed=0,
    kernel="hmc",
    n_transitions=5,
    n_leapfrog=10,
    n_burnin=5,
    n_map=200,
    map_lr=0.05,
    step_size=None,
    target_accept=0.8,
    adapt_rate=1.0,
    parameter_expansion=True,
    ridge=1e-8,
    lr=0.01,
    n_mstep=10,
    monitor_exact=True,
    callback=None,
)
#: what the black-box learners (Li et al. 2019: AVIL, NVIL, VCD) share: the optimiser and its log, the
#: networks, the exact and AIS monitors (``ais_every`` 0: no AIS) and which logged model is kept (``select``)
_LEARNER = dict(
    iterations=10_000,
    lr=3e-4,
    betas=(0.5, 0.999),
    batch_size=500,
    seed=0,
    device="cpu",
    log_every=100,
    mlp_hidden=None,
    init_scale=0.01,
    exact_max_units=20,
    ais_every=0,
    ais_K=1000,
    ais_chains=100,
    ais_init=None,
    ais_is_samples=100,
    select="last",
)
#: :func:`~logzbench.training.avil.train_avil`
AVIL = dict(
    family="rbm",
    hidden_sizes=(50,),
    aux_size=15,
    z="continuous",
    K1=100,
    K2=1,
    ablation=None,
    temperature=0.1,
    straight_through=False,
    sigma=1.0,
    visible_std=None,
    monitor_samples=None,
    **_LEARNER,
)
#: :func:`~logzbench.training.nvil.train_nvil` (``nvil_variant``: Kuleshov & Ermon's neural auxiliary-variable q or
#: their mixture of Bernoullis, of ``mixture_components`` components -- 10: neither paper states theirs)
NVIL = dict(
    family="rbm",
    hidden_sizes=(50,),
    aux_size=15,
    z="continuous",
    K1=100,
    sigma=1.0,
    visible_std=None,
    monitor_samples=None,
    nvil_variant="auxiliary",
    mixture_components=10,
    **_LEARNER,
)
#: :func:`~logzbench.training.vcd.train_vcd`
VCD = dict(family="dbm", hidden_sizes=(50, 50), K2=1, cd_k=1, temperature=0.1, straight_through=False, **_LEARNER)

#: ``"module:object"`` -> its declared keyword parameters, name -> default
DECLARED: dict[str, dict[str, Any]] = {
    "logzbench.training.trainer:RBMTrainer": RBM_TRAINER,
    "logzbench.training.dbm:DBMTrainer": DBM_TRAINER,
    "logzbench.training.dbn:DBNTrainer": DBN_TRAINER,
    "logzbench.training.grbm:GRBMHyperparams": GRBM,
    "logzbench.training.potts:train_potts_rbm": POTTS_RBM,
    "logzbench.training.potts:train_potts": POTTS,
    "logzbench.training.grid:generate_grid_mrf": GRID_MRF,
    "logzbench.training.continuous:train_continuous": CONTINUOUS,
    "logzbench.training.mpf:train_mpf": MPF,
    "logzbench.training.em:train_em": EM,
    "logzbench.training.avil:train_avil": AVIL,
    "logzbench.training.nvil:train_nvil": NVIL,
    "logzbench.training.vcd:train_vcd": VCD,
}


def declared_parameters(target: str) -> tuple[tuple[str, Any], ...]:
    """``(name, default)`` of each keyword parameter of ``"module:object"``: declared here
    (:data:`DECLARED`, without importing the trainer), else read from the object's signature (a family
    registered at run time; its module is imported); :data:`REQUIRED` where there is no default.
    The data and ``return_state`` a training job fills in itself are left out."""
    if target in DECLARED:
        return tuple(DECLARED[target].items())
    import inspect

    from ..registry import load

    try:
        params = inspect.signature(load(target)).parameters.values()
    except (ImportError, AttributeError, ValueError, TypeError) as exc:
        raise LookupError(f"{target}: cannot read its hyperparameters ({exc})") from None
    return tuple(
        (p.name, REQUIRED if p.default is inspect.Parameter.empty else p.default)
        for p in params
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in JOB_ARGUMENTS
    )


def per_layer_epochs(value: Any, n_layers: int, name: str = "pretrain_epochs") -> list[int]:
    """One epoch count per layer from ``value``: an integer (every layer) or a list of ``n_layers`` integers.

    Used by :class:`~logzbench.training.dbm.DBMTrainer` for ``pretrain_epochs`` (Liu et al. 2015 pretrain
    their DBM's first layer 100 epochs and the second 200), here so that a config can be checked without
    torch.

    Parameters
    ----------
    value : int or sequence of int
        Epochs of every layer, or of layers ``1..n_layers`` in order; each ``>= 0``.
    n_layers : int
        Number of layers the list must cover.
    name : str
        The hyperparameter's name, for the error message.

    Returns
    -------
    list of int, length n_layers

    Raises
    ------
    ValueError
        One line naming the problem: not an integer or a list, a negative or non-integer entry, or a
        list whose length is not ``n_layers``.
    """

    def one(x: Any, where: str) -> int:
        if isinstance(x, bool) or not isinstance(x, numbers.Integral):
            raise ValueError(f"{where} must be an integer, got {x!r}")
        if x < 0:
            raise ValueError(f"{where} must be >= 0, got {x}")
        return int(x)

    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise ValueError(
                f"{name} must be an integer or a list of one integer per layer such as [100, 200], got {value!r}"
            )
        return [one(value, name)] * n_layers
    if len(value) != n_layers:
        raise ValueError(
            f"{name} has {len(value)} entries but the model has {n_layers} hidden layers; "
            f"give one per layer or a single integer, got {list(value)!r}"
        )
    return [one(x, f"{name}[{i}]") for i, x in enumerate(value)]


def declared_names(*targets: str) -> frozenset[str]:
    """The keyword names of these ``"module:object"`` targets together (:func:`declared_parameters`)."""
    return frozenset(name for target in targets for name, _ in declared_parameters(target))


#: parameters a training job fills in itself (the data, the initial model), never hyperparameters
JOB_ARGUMENTS = frozenset({"train", "test", "valid", "model", "X_train", "return_state", "self"})
