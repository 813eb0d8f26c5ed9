"""Estimators, one per module: :mod:`.exact`, :mod:`.ais`, :mod:`.raise_` (RAISE), :mod:`.csl`.

Each module exposes small pure functions (``init``/``step``/``run`` where the algorithm
anneals) and one function returning an :class:`EstimateResult`; :func:`logzbench.api.estimate`
dispatches to them by name.
"""

from .result import EstimateResult, summarize_log_weights

__all__ = ["EstimateResult", "summarize_log_weights"]
