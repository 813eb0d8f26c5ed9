"""Model families.  One family per module; :func:`load_model` reads any supported ``.npz``."""

from .base import AnnealingPath
from .dbm import DBM, DBMAnnealingPath
from .dbn import DBN, DBNAnnealingPath
from .grid import GridAnnealingPath, GridMRF
from .grid_trw import TreeMixtureReference, trw_mixture
from .io import load_model, save_model
from .rbm import BinaryRBM, RBMAnnealingPath, RBMState

__all__ = [
    "AnnealingPath",
    "BinaryRBM",
    "DBM",
    "DBMAnnealingPath",
    "DBN",
    "DBNAnnealingPath",
    "GridAnnealingPath",
    "GridMRF",
    "RBMAnnealingPath",
    "RBMState",
    "TreeMixtureReference",
    "load_model",
    "save_model",
    "trw_mixture",
]
