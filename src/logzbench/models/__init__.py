"""Model families.  One family per module; :func:`load_model` reads any supported ``.npz``."""

from .base import AnnealingPath
from .dbm import DBM, DBMAnnealingPath
from .dbn import DBN, DBNAnnealingPath
from .io import load_model, save_model
from .rbm import BinaryRBM, RBMAnnealingPath, RBMState

__all__ = ["AnnealingPath", "BinaryRBM", "DBM", "DBMAnnealingPath", "DBN", "DBNAnnealingPath", "RBMAnnealingPath",
           "RBMState", "load_model", "save_model"]
