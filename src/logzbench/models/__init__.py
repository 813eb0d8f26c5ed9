"""Model families.  One family per module; :func:`load_model` reads any supported ``.npz``."""

from .base import AnnealingPath
from .dbm import DBM, DBMAnnealingPath
from .dbn import DBN, DBNAnnealingPath
from .energy import EnergyModel
from .grid import GridAnnealingPath, GridMRF
from .grid_trw import TreeMixtureReference, trw_mixture
from .io import load_model, save_model
from .potts import PottsModel
from .potts_rbm import PottsRBM
from .potts_text import read_potts_text, write_potts_text
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
    "PottsModel",
    "PottsRBM",
    "RBMAnnealingPath",
    "RBMState",
    "TreeMixtureReference",
    "load_model",
    "load_source",
    "read_potts_text",
    "save_model",
    "save_torchscript",
    "trw_mixture",
    "write_potts_text",
]
