"""Repeated-trial experiments of Liu, Peng, Ihler & Fisher (2015), Sec. 6, Figs. 1 and 2.

* Fig. 1 (:func:`gaussian_trials`, :func:`sweep`): the 1-D Gaussian toy of
  :mod:`logzbench.models.gaussian_toy`, ``p = N(0, sigma^2)``, reference
  ``p_0 = N(0, sigma0^2)``, bias and MSE of ``log Ẑ`` against ``sigma0`` (1000 trials in the
  paper).
* Fig. 2 (:func:`grid_trials`): binary pairwise MRFs on an ``H x W`` grid
  (:class:`~logzbench.models.grid.GridMRF`, 10 x 10 in the paper) with
  ``theta_i(k) ~ N(0, sigma_unary^2)`` and ``theta_ij(k, l) ~ N(0, sigma_pair^2)``, bias and MSE
  against ``sigma_pair`` (500 trials), one column per reference ``p_0`` (uniform, mean field,
  TRW mixture of trees).  Reference samples are exact; target samples come from checkerboard
  Gibbs chains started at reference samples and run for ``burn_in`` sweeps (500 in the
  paper); the truth is the transfer-matrix ``log Z``.

Every estimator of :data:`METHODS` is applied through :func:`estimate_all`: with ``n``
samples from each of ``p_0`` and ``p``, IS, reverse IS and the three averaging methods use all
of them, discriminance sampling (``"ds"``) only the first ``n // 2`` of each, as in the paper.

:func:`summarize_trials` reduces the table to bias / MSE per setting and method (the
quantities plotted in the paper) and :func:`plot_trials` draws them.

Modules: :mod:`.table` (the per-trial table, :func:`estimate_all`, :func:`summarize_trials`),
:mod:`.gaussian` (Fig. 1), :mod:`.grid` (Fig. 2), :mod:`.plots` (figures, :func:`report_trials`).
"""

from ..plotting import EMPHASIS_STYLE
from .gaussian import gaussian_trials, run_trial, sweep, trial_errors
from .grid import grid_reference, grid_trials, trial_seeds
from .plots import FIGURES, METHOD_STYLES, TRIAL_LABELS, estimator_style, plot_trials, report_trials
from .table import (
    BOUND_METHODS,
    GRID_REFERENCES,
    METHODS,
    SETTING_COLUMNS,
    SUMMARY_COLUMNS,
    TRIAL_COLUMNS,
    estimate_all,
    summarize_trials,
)

__all__ = [
    "BOUND_METHODS",
    "EMPHASIS_STYLE",
    "FIGURES",
    "GRID_REFERENCES",
    "METHODS",
    "METHOD_STYLES",
    "SETTING_COLUMNS",
    "SUMMARY_COLUMNS",
    "TRIAL_COLUMNS",
    "TRIAL_LABELS",
    "estimate_all",
    "estimator_style",
    "gaussian_trials",
    "grid_reference",
    "grid_trials",
    "plot_trials",
    "report_trials",
    "run_trial",
    "summarize_trials",
    "sweep",
    "trial_errors",
    "trial_seeds",
]
