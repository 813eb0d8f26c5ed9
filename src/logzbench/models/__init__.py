"""Model families.  One family per module; :func:`load_model` reads any supported ``.npz``."""

from .base import AnnealingPath
from .dbm import DBM, DBMAnnealingPath
from .dbn import DBN, DBNAnnealingPath
from .energy import EnergyModel
from .grid import GridAnnealingPath, GridMRF
from .grid_trw import TreeMixtureReference, trw_mixture
from .io import load_model, save_model
from .rbm import BinaryRBM, RBMAnnealingPath, RBMState
from .source import load_source, save_torchscript

__all__ = [
    "AnnealingPath",
    "BinaryRBM",
    "DBM",
    "DBMAnnealingPath",
    "DBN",
    "DBNAnnealingPath",
    "EnergyModel",
    "GridAnnealingPath",
    "GridMRF",
    "RBMAnnealingPath",
    "RBMState",
    "TreeMixtureReference",
    "load_model",
    "load_source",
    "save_model",
    "save_torchscript",
    "trw_mixture",
]
