"""Estimators.  One per module: :mod:`.exact`, :mod:`.ais`, :mod:`.raise_` (RAISE), :mod:`.csl`."""

from .ais import ais
from .csl import csl
from .exact import exact, exact_log_z
from .raise_ import raise_estimate
from .result import EstimateResult, summarize_log_weights

__all__ = ["EstimateResult", "ais", "csl", "exact", "exact_log_z", "raise_estimate", "summarize_log_weights"]
