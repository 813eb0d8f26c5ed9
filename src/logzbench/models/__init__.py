"""Model families.  One family per module; :func:`load_model` reads any supported ``.npz``."""

from .base import AnnealingPath
from .io import load_model, save_model
from .rbm import BinaryRBM, RBMAnnealingPath, RBMState

__all__ = ["AnnealingPath", "BinaryRBM", "RBMAnnealingPath", "RBMState", "load_model", "save_model"]
