"""Every trainer's and learner's hyperparameters -- name, type, default, bound and one-line doc -- declared once.

The trainers and learners import torch; checking a workflow config (building its DAG) or a
``logzbench train`` command line before any data is read must not.  So each one's keyword
parameters (all but the data it is given and ``return_state``) are declared here, torch-free, as a
frozen keyword-only dataclass (:class:`RBMTrainerParams`, ..., :class:`VCDParams`; the machinery is
:mod:`logzbench.training.declare`): its fields' names, annotations and defaults, and in each field's
metadata its bound (``rule``, a :class:`~logzbench.training.declare.Rule`) and ``doc``, taken from
:data:`ABOUT` (one entry per name, whichever trainer declares it) unless the field says otherwise.
A parameter without a default is :data:`REQUIRED`.

From a declaration come the trainer's signature (the functions are wrapped by
:func:`~logzbench.training.declare.takes`, the classes' constructors made by
:class:`~logzbench.training.declare.Hyperparameters`), the learners' value checks
(:data:`logzbench.training.learner_options.RULES`), the names a config or ``logzbench train --set`` may
give (:func:`declared_names`), and the documentation's table (tests/test_hyperparams_declared.py checks
the config schema and docs against it).

Targets are named ``"module:object"``, as :mod:`logzbench.registry` names them: each family's
``hyperparams`` and each learner's ``entry``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from ..options import INITS
from .declare import REQUIRED, Hyperparameters, Rule, check, declare, defaults, hp, rules, signature_of, takes
from .declare import markdown as declare_markdown

__all__ = [
    "ABOUT",
    "AVIL",
    "AVILParams",
    "CONTINUOUS",
    "ContinuousParams",
    "DBMTrainerParams",
    "DBM_TRAINER",
    "DBNTrainerParams",
    "DBN_TRAINER",
    "DECLARATIONS",
    "DECLARED",
    "EM",
    "EMParams",
    "FAMILY_ONLY",
    "GRBM",
    "GRBMParams",
    "GRID_MRF",
    "GridMRFParams",
    "Hyperparameters",
    "JOB_ARGUMENTS",
    "LearnerParams",
    "MPF",
    "MPFParams",
    "NVIL",
    "NVILParams",
    "POTTS",
    "POTTS_RBM",
    "PottsParams",
    "PottsRBMParams",
    "RBMTrainerParams",
    "RBM_TRAINER",
    "REQUIRED",
    "Rule",
    "VCD",
    "VCDParams",
    "declared_names",
    "declared_parameters",
    "defaults",
    "hp",
    "markdown",
    "per_layer_epochs",
    "rules",
    "signature_of",
    "takes",
]

_INF = math.inf
#: most units the learners' exact monitor may enumerate: ``2^24`` states at every logged iteration (its cost
#: on one CPU core is on the documentation's Benchmarks page; 2^30 would take minutes per iteration)
MAX_EXACT_UNITS = 24
#: most decoder draws (and training rows) per learner update: ``batch_size`` draws are held in memory at once
MAX_BATCH_SIZE = 100_000
#: most decoder draws of the learners' monitored bounds at each logged iteration (drawn in chunks)
MAX_MONITOR_SAMPLES = 1_000_000
#: ``z`` priors of the learners' decoder
Z_KINDS = ("continuous", "discrete")
#: NVIL's proposals (Kuleshov & Ermon 2017): the neural q with auxiliaries, or a mixture of Bernoullis
NVIL_VARIANTS = ("auxiliary", "mixture")
#: the model a learner returns: the last, or the logged one of the best validation log-likelihood
SELECTIONS = ("last", "best-valid")
#: AVIL's ablations (Fig. 4) and the other names accepted for them
ABLATIONS = ("no_encoder_entropy", "no_decoder_entropy")
ABLATION_ALIASES = {
    "no_hq_encoder": "no_encoder_entropy",
    "no_H(Q)": "no_encoder_entropy",
    "no_H(q)": "no_decoder_entropy",
}


def _positive(kind: str = "int") -> Rule:
    return Rule(kind, 1) if kind == "int" else Rule(kind, 0.0, _INF, low_open=True, high_open=True)


def _at_least_0(kind: str = "int") -> Rule:
    return Rule(kind, 0) if kind == "int" else Rule(kind, 0.0, _INF, high_open=True)


#: the SGD trainers' bounds of a rate or scale: above 0 (``(0.0, inf]``), and of a penalty: ``[0.0, inf]``
_ABOVE_0 = Rule("real", 0.0, _INF, low_open=True)
_PENALTY = Rule("real", 0.0, _INF)
#: the RBM and DBM trainers take any integer seed
_ANY_SEED = Rule("int")


#: what each hyperparameter name means wherever it is declared: ``name -> (bound, one-line doc)``; a
#: declaration says otherwise with :func:`hp`.  The learners check their values by these bounds
#: (:mod:`logzbench.training.learner_options`); a trainer's own check names the same bounds.
ABOUT: dict[str, tuple[Rule | None, str]] = {
    # the model and its data
    "family": (None, "the model family (logzbench.registry.FAMILIES)"),
    "n_hidden": (_positive(), "hidden units"),
    "hidden_sizes": (None, "hidden layer sizes, first to top"),
    "n_states": (Rule("int", 2, none=True), "states per site (None: read from the data)"),
    "size": (_positive(), "experts, latent dimension or units of a continuous model"),
    "sigma": (_positive("real"), "the Gaussian visible units' standard deviation"),
    # stochastic-gradient training of the RBM-like families
    "method": (Rule("choice", choices=("cd", "pcd")), "contrastive divergence or persistent CD"),
    "k": (_positive(), "Gibbs sweeps per update"),
    "learning_rate": (_ABOVE_0, "step size of the gradient updates"),
    "lr_schedule": (Rule("choice", choices=("constant", "linear", "exponential")), "learning-rate schedule"),
    "lr_decay": (Rule("real", 0.0, 1.0, low_open=True), "per-epoch factor of the exponential schedule"),
    "batch_size": (_positive(), "rows per minibatch"),
    "n_epochs": (_at_least_0(), "passes over the training data"),
    "initial_momentum": (Rule("real", 0.0, 1.0, high_open=True), "momentum up to momentum_switch_epoch"),
    "final_momentum": (Rule("real", 0.0, 1.0, high_open=True), "momentum after momentum_switch_epoch"),
    "momentum_switch_epoch": (_at_least_0(), "last epoch of initial_momentum"),
    "momentum": (Rule("real", 0.0, 1.0, high_open=True), "SGD momentum"),
    "weight_decay": (_PENALTY, "L2 penalty on the weights"),
    "init": (Rule("choice", choices=("uniform_sqrt", "normal")), "initial weights"),
    "init_scale": (_at_least_0("real"), "standard deviation of the initial weights"),
    "visible_bias_init": (Rule("choice", choices=("base_rate", "zero")), "initial visible biases"),
    "n_persistent_chains": (Rule("int", 1, none=True), "PCD chains (None: batch_size)"),
    "optimizer": (Rule("choice", choices=("adam", "sgd")), "the optimiser"),
    "adam_betas": (Rule("pair", 0.0, 1.0, high_open=True), "Adam's moving-average ratios"),
    # a DBM's pretraining and mean field, a DBN's top RBM
    "pretrain_epochs": (None, "greedy pretraining epochs: one for every layer, or one per layer"),
    "pretrain_k": (_positive(), "Gibbs sweeps per pretraining update"),
    "pretrain_learning_rate": (_ABOVE_0, "pretraining learning rate"),
    "pretrain_weight_decay": (_PENALTY, "pretraining weight decay"),
    "pretrain_activities": (Rule("choice", choices=("mean", "sample")), "what a layer passes up as data"),
    "n_mean_field_iter": (_at_least_0(), "mean-field sweeps of the positive phase"),
    "top_method": (Rule("choice", choices=("cd", "pcd")), "the top RBM's training method"),
    "top_k": (Rule("int", 1, none=True), "the top RBM's k (None: k)"),
    "top_learning_rate": (Rule("real", 0.0, _INF, low_open=True, none=True), "the top RBM's learning rate"),
    "top_lr_schedule": (
        Rule("choice", choices=("constant", "linear", "exponential"), none=True),
        "the top RBM's learning-rate schedule (None: lr_schedule)",
    ),
    "top_n_epochs": (Rule("int", 0, none=True), "the top RBM's epochs (None: n_epochs)"),
    "top_samples_per_row": (_positive(), "h_1 samples per training row as the top RBM's data"),
    # monitoring
    "eval_subsample": (_positive(), "rows of each data set the per-epoch metrics read"),
    "exact_ll_max_units": (_at_least_0(), "exact log-likelihood when log Z enumerates at most this many units"),
    "exact_ll_max_bits": (_at_least_0(), "exact log-likelihood when log Z enumerates at most 2^this states"),
    "eval_every": (_positive(), "epochs between evaluations"),
    "monitor_exact": (Rule("bool"), "record the exact log-likelihood where it is tractable"),
    # the run
    "seed": (_at_least_0(), "seed of the training generator"),
    "device": (None, "cpu, cuda or auto"),
    "progress": (Rule("bool"), "show a progress bar"),
    "callback": (None, "called after each iteration with what was recorded"),
    "verbose": (Rule("bool"), "print the optimiser's progress"),
    # pairwise Potts and the grid MRF
    "l2": (_at_least_0("real"), "L2 penalty on the couplings"),
    "l2_fields": (_at_least_0("real"), "L2 penalty on the fields"),
    "n_iter": (_positive(), "iterations of the fit"),
    "height": (_positive(), "grid rows"),
    "width": (_positive(), "grid columns"),
    "couplings": (Rule("choice", choices=("gaussian", "pm1")), "couplings drawn N(0, 1) or +-1"),
    "beta": (_at_least_0("real"), "inverse temperature"),
    "field": (_at_least_0("real"), "scale of the fields"),
    "learn_sigma": (Rule("bool"), "learn the mcRBM's sigma (mcrbm only)"),
    # minimum probability flow
    "n_rounds": (_positive(), "rounds of sampling and refitting"),
    "step_size": (None, "the sampler's leapfrog step size (auto: adapted)"),
    "n_leapfrog": (_positive(), "leapfrog steps per transition"),
    "antithetic": (Rule("bool"), "antithetic momenta"),
    "min_acceptance": (Rule("real", 0.0, 1.0, high_open=True), "acceptance below which the step size shrinks"),
    "gtol": (_positive("real"), "L-BFGS gradient tolerance"),
    "fixed": (None, "parameters held at their initial values"),
    # Monte Carlo EM
    "kernel": (Rule("choice", choices=("hmc", "hais")), "the E-step's posterior transitions"),
    "n_transitions": (_positive(), "posterior transitions per E-step"),
    "n_burnin": (_at_least_0(), "E-step transitions discarded first"),
    "n_map": (_at_least_0(), "MAP steps that start the chains"),
    "map_lr": (_positive("real"), "learning rate of the MAP steps"),
    "target_accept": (Rule("real", 0.0, 1.0, low_open=True, high_open=True), "HMC acceptance the step targets"),
    "adapt_rate": (_at_least_0("real"), "rate of the step-size adaptation"),
    "parameter_expansion": (Rule("bool"), "parameter-expanded M-step"),
    "ridge": (_at_least_0("real"), "ridge of the M-step's least squares"),
    "n_mstep": (_positive(), "gradient steps per M-step"),
    # the black-box learners (Li et al. 2019: AVIL, NVIL, VCD)
    "iterations": (Rule("int", 1), "updates of the model"),
    "K1": (Rule("int", 1), "decoder updates per model update"),
    "K2": (Rule("int", 1), "encoder updates per model update"),
    "cd_k": (Rule("int", 1), "VCD steps from the data to the negative samples"),
    "aux_size": (Rule("int", 1), "dimension of the decoder's auxiliary z"),
    "z": (Rule("choice", choices=Z_KINDS), "the decoder's z prior"),
    "lr": (Rule("real", 0.0, _INF, low_open=True, high_open=True), "Adam's learning rate"),
    "betas": (Rule("pair", 0.0, 1.0, high_open=True), "Adam's moving-average ratios"),
    "log_every": (Rule("int", 1), "iterations between history rows"),
    "mlp_hidden": (Rule("int", 0, none=True), "the networks' hidden width (None: half the first hidden size)"),
    "exact_max_units": (
        Rule("int", 0, MAX_EXACT_UNITS, why="the exact monitor enumerates 2^units states at every logged iteration"),
        "exact monitoring up to this many units per layer",
    ),
    "monitor_samples": (
        Rule("int", 1, MAX_MONITOR_SAMPLES, none=True, why="decoder draws at every logged iteration"),
        "decoder draws of the monitored bounds (None: batch_size)",
    ),
    "ais_every": (Rule("int", 0), "iterations between AIS monitors (0: never)"),
    "ais_K": (Rule("int", 1), "the AIS monitor's distributions"),
    "ais_chains": (Rule("int", 1), "the AIS monitor's chains"),
    "ais_init": (Rule("choice", choices=INITS, none=True), "the AIS monitor's initial distribution"),
    "ais_is_samples": (Rule("int", 1), "importance samples of a DBM's log f(v) in the AIS monitor"),
    "select": (Rule("choice", choices=SELECTIONS), "the model returned: the last or the best on validation"),
    "ablation": (Rule("choice", choices=ABLATIONS + tuple(ABLATION_ALIASES), none=True), "AVIL's ablation"),
    "temperature": (Rule("real", 0.0, _INF, low_open=True, high_open=True), "binary-concrete temperature"),
    "straight_through": (Rule("bool"), "straight-through relaxed draws"),
    "visible_std": (
        Rule("real", 0.0, _INF, low_open=True, high_open=True, none=True),
        "GRBM decoder's std of q(v | h) (None: learned)",
    ),
    "nvil_variant": (Rule("choice", choices=NVIL_VARIANTS), "NVIL's proposal"),
    "mixture_components": (Rule("int", 1), "components of NVIL's mixture proposal"),
}


def _declare(cls: type) -> type:
    return declare(cls, ABOUT)


def _bounds(names: str):
    """Declare a trainer that checks the bounds of these fields only (its others are its own, or none)."""
    return lambda cls: declare(cls, ABOUT, names)


@_declare
class RBMTrainerParams:
    """:class:`~logzbench.training.trainer.RBMTrainer`"""

    n_hidden: int = 500
    method: str = "cd"
    k: int = 1
    learning_rate: float = 0.1
    lr_schedule: str = "constant"
    lr_decay: float = 0.98
    batch_size: int = 100
    n_epochs: int = 10
    initial_momentum: float = 0.5
    final_momentum: float = 0.9
    momentum_switch_epoch: int = 5
    weight_decay: float = 2e-4
    init: str = "uniform_sqrt"
    init_scale: float = hp(0.01, rule=_ABOVE_0)
    visible_bias_init: str = "base_rate"
    n_persistent_chains: int | None = None
    eval_subsample: int = 10000
    exact_ll_max_units: int = 25
    eval_every: int = 1
    seed: int = hp(0, rule=Rule("int"))
    device: str = "cpu"
    progress: bool = False


@_declare
class DBMTrainerParams:
    """:class:`~logzbench.training.dbm.DBMTrainer` (``pretrain_epochs``: one integer for every layer, or a
    list with one per layer, checked by :func:`per_layer_epochs`)"""

    hidden_sizes: tuple = (500, 1000)
    pretrain_epochs: int | list = 100
    pretrain_k: int = 1
    pretrain_learning_rate: float = 0.05
    pretrain_weight_decay: float = 1e-3
    pretrain_activities: str = "mean"
    n_epochs: int = 300
    learning_rate: float = 0.005
    lr_schedule: str = "linear"
    lr_decay: float = 0.98
    batch_size: int = 100
    k: int = 5
    n_persistent_chains: int = hp(100, rule=_positive())
    n_mean_field_iter: int = 10
    initial_momentum: float = 0.5
    final_momentum: float = 0.9
    momentum_switch_epoch: int = 5
    weight_decay: float = 2e-4
    init_scale: float = hp(0.01, rule=_ABOVE_0)
    visible_bias_init: str = "base_rate"
    eval_subsample: int = 1000
    exact_ll_max_units: int = 20
    eval_every: int = 1
    seed: int = hp(0, rule=_ANY_SEED)
    device: str = "cpu"
    progress: bool = False


@_declare
class DBNTrainerParams:
    """:class:`~logzbench.training.dbn.DBNTrainer` (``top_*`` ``None``: the lower layers' value)"""

    hidden_sizes: tuple = (500, 2000)
    method: str = "cd"
    k: int = 1
    learning_rate: float = 0.05
    lr_schedule: str = "constant"
    lr_decay: float = 0.98
    batch_size: int = 100
    n_epochs: int = 100
    initial_momentum: float = 0.5
    final_momentum: float = 0.9
    momentum_switch_epoch: int = 5
    weight_decay: float = 2e-4
    init: str = "normal"
    init_scale: float = hp(0.01, rule=_ABOVE_0)
    visible_bias_init: str = "base_rate"
    n_persistent_chains: int | None = None
    top_method: str = "pcd"
    top_k: int | None = None
    top_learning_rate: float | None = None
    top_lr_schedule: str | None = None
    top_n_epochs: int | None = None
    top_samples_per_row: int = 1
    eval_subsample: int = 10000
    exact_ll_max_units: int = 20
    eval_every: int = 1
    seed: int = hp(0, rule=_ANY_SEED)
    device: str = "cpu"
    progress: bool = False


@_declare
class GRBMParams:
    """:class:`~logzbench.training.grbm.GRBMHyperparams` (the Gaussian-Bernoulli RBM's trainer)"""

    n_hidden: int = 100
    sigma: float = 1.0
    method: str = "pcd"
    k: int = 1
    optimizer: str = "adam"
    learning_rate: float = hp(1e-3, rule=_positive("real"))
    adam_betas: tuple = (0.9, 0.999)
    momentum: float = 0.5
    batch_size: int = 100
    n_epochs: int = 10
    weight_decay: float = hp(0.0, rule=_at_least_0("real"))
    init_scale: float = 0.01
    n_persistent_chains: int | None = None
    exact_ll_max_units: int = 20
    eval_subsample: int = 10000
    seed: int = 0
    device: str = "cpu"
    progress: bool = False


@_bounds("n_hidden method k learning_rate batch_size n_epochs n_persistent_chains")
class PottsRBMParams:
    """:func:`~logzbench.training.potts.train_potts_rbm` (the Potts RBM: CD / PCD with Adam)"""

    family: str = "potts-rbm"
    n_hidden: int = 20
    n_states: int | None = None
    method: str = "pcd"
    k: int = 1
    learning_rate: float = 0.01
    batch_size: int = 100
    n_epochs: int = 10
    weight_decay: float = 0.0
    init_scale: float = 0.01
    n_persistent_chains: int | None = None
    exact_ll_max_units: int = 20
    eval_subsample: int = 1000
    seed: int = 0
    device: str = "cpu"
    progress: bool = False


@_bounds("n_states l2 l2_fields n_iter")
class PottsParams:
    """:func:`~logzbench.training.potts.train_potts` (pairwise Potts: pseudo-likelihood, L-BFGS, L2 penalty)"""

    family: str = "potts"
    n_states: int | None = None
    l2: float = 0.01
    l2_fields: float = 0.01
    n_iter: int = hp(50, rule=_at_least_0())
    exact_ll_max_bits: int = 16
    seed: int = 0
    device: str = "cpu"
    progress: bool = False


@_bounds("height width couplings beta field")
class GridMRFParams:
    """:func:`~logzbench.training.grid.generate_grid_mrf` (a grid MRF is generated, not trained: the spin
    glass of :meth:`~logzbench.models.grid.GridMRF.spin_glass`)"""

    height: int
    width: int
    couplings: str = "gaussian"
    beta: float = 1.0
    field: float = 0.0
    seed: int = 0
    device: str = "cpu"
    progress: bool = False


@_bounds("learn_sigma")
class ContinuousParams:
    """:func:`~logzbench.training.continuous.train_continuous`: a continuous model of ``size`` and its fit's
    keywords (:data:`MPF` for the analysis families, :data:`EM` for the generative ones)"""

    family: str
    size: int
    seed: int = 0
    n_iter: int = 100
    learn_sigma: bool = False
    device: str | None = None
    progress: bool = False


#: keywords of a shared trainer that only some families take: {keyword: families}
FAMILY_ONLY = {"learn_sigma": ("mcrbm",)}


@_bounds("n_iter n_rounds n_leapfrog min_acceptance weight_decay")
class MPFParams:
    """:func:`~logzbench.training.mpf.train_mpf` (minimum probability flow, Sohl-Dickstein et al.)"""

    n_iter: int = 200
    seed: int = 0
    n_rounds: int = 5
    step_size: float | str = "auto"
    n_leapfrog: int = 1
    antithetic: bool = True
    min_acceptance: float = 0.5
    gtol: float = 1e-10
    fixed: tuple = ()
    weight_decay: float = hp(0.0, rule=_at_least_0("real"))
    callback: Any = None
    verbose: bool = False


@_bounds("kernel n_iter n_transitions n_leapfrog n_burnin n_map n_mstep target_accept")
class EMParams:
    """:func:`~logzbench.training.em.train_em` (EM with HMC or Gibbs posterior samples)"""

    n_iter: int = hp(rule=_at_least_0())
    seed: int = 0
    kernel: str = "hmc"
    n_transitions: int = 5
    n_leapfrog: int = 10
    n_burnin: int = 5
    n_map: int = 200
    map_lr: float = 0.05
    step_size: float | None = None
    target_accept: float = 0.8
    adapt_rate: float = 1.0
    parameter_expansion: bool = True
    ridge: float = 1e-8
    lr: float = 0.01
    n_mstep: int = 10
    monitor_exact: bool = True
    callback: Any = None


@_declare
class LearnerParams:
    """What the black-box learners (Li et al. 2019: AVIL, NVIL, VCD) share: the model, the optimiser and its
    log, the networks, the exact and AIS monitors (``ais_every`` 0: no AIS) and which logged model is kept
    (``select``)"""

    family: str = "rbm"
    hidden_sizes: tuple = (50,)
    iterations: int = 10_000
    lr: float = 3e-4
    betas: tuple = (0.5, 0.999)
    batch_size: int = hp(
        500, rule=Rule("int", 1, MAX_BATCH_SIZE, why="decoder draws held in memory at once per update")
    )
    seed: int = 0
    device: str = "cpu"
    log_every: int = 100
    mlp_hidden: int | None = None
    init_scale: float = 0.01
    exact_max_units: int = 20
    ais_every: int = 0
    ais_K: int = 1000
    ais_chains: int = 100
    ais_init: str | None = None
    ais_is_samples: int = 100
    select: str = "last"


@_declare
class _AuxiliaryDecoderParams(LearnerParams):
    """AVIL's and NVIL's decoder ``q(v, h)`` with an auxiliary ``z``, and the GRBM's ``sigma``"""

    aux_size: int = 15
    z: str = "continuous"
    K1: int = 100
    sigma: float = 1.0
    visible_std: float | None = None
    monitor_samples: int | None = None


@_declare
class AVILParams(_AuxiliaryDecoderParams):
    """:func:`~logzbench.training.avil.train_avil`"""

    K2: int = 1
    ablation: str | None = None
    temperature: float = 0.1
    straight_through: bool = False


@_declare
class NVILParams(_AuxiliaryDecoderParams):
    """:func:`~logzbench.training.nvil.train_nvil` (``nvil_variant``: Kuleshov & Ermon's neural
    auxiliary-variable q or their mixture of Bernoullis, of ``mixture_components`` components -- 10: neither
    paper states theirs)"""

    nvil_variant: str = "auxiliary"
    mixture_components: int = 10


@_declare
class VCDParams(LearnerParams):
    """:func:`~logzbench.training.vcd.train_vcd`"""

    family: str = "dbm"
    hidden_sizes: tuple = (50, 50)
    K2: int = 1
    cd_k: int = 1
    temperature: float = 0.1
    straight_through: bool = False


#: ``"module:object"`` -> the declaration of its keyword parameters
DECLARATIONS: dict[str, type] = {
    "logzbench.training.trainer:RBMTrainer": RBMTrainerParams,
    "logzbench.training.dbm:DBMTrainer": DBMTrainerParams,
    "logzbench.training.dbn:DBNTrainer": DBNTrainerParams,
    "logzbench.training.grbm:GRBMHyperparams": GRBMParams,
    "logzbench.training.potts:train_potts_rbm": PottsRBMParams,
    "logzbench.training.potts:train_potts": PottsParams,
    "logzbench.training.grid:generate_grid_mrf": GridMRFParams,
    "logzbench.training.continuous:train_continuous": ContinuousParams,
    "logzbench.training.mpf:train_mpf": MPFParams,
    "logzbench.training.em:train_em": EMParams,
    "logzbench.training.avil:train_avil": AVILParams,
    "logzbench.training.nvil:train_nvil": NVILParams,
    "logzbench.training.vcd:train_vcd": VCDParams,
}


#: ``"module:object"`` -> its declared keyword parameters, name -> default
DECLARED: dict[str, dict[str, Any]] = {target: defaults(d) for target, d in DECLARATIONS.items()}
RBM_TRAINER, DBM_TRAINER, DBN_TRAINER, GRBM, POTTS_RBM, POTTS, GRID_MRF, CONTINUOUS, MPF, EM, AVIL, NVIL, VCD = (
    DECLARED.values()
)


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


#: a layer's epoch count
_EPOCHS = Rule("int", 0)


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
        check(where, x, _EPOCHS)
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


#: the documentation page's opening (docs/hyperparameters.md, the rest generated by :func:`markdown`)
_PAGE_INTRO = """
# Trainer hyperparameters

Every trainer's and black-box learner's hyperparameters, as declared once in
`logzbench.training.hyperparams`: the keys of a workflow model's `hyperparams`, of
`logzbench train --set KEY=VALUE` and of `train_model(...)`.  A learner checks each value against its
bound before any data is read; the trainers check theirs when they start.  This page is generated
(`python -m logzbench.training.hyperparams > docs/hyperparameters.md`), and a test checks that it is
current.
"""


def markdown() -> str:
    """The documentation's page of every declaration (docs/hyperparameters.md)."""
    return declare_markdown(DECLARATIONS, _PAGE_INTRO)


if __name__ == "__main__":
    print(markdown(), end="")
