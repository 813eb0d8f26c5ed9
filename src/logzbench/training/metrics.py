"""Cheap and exact quality measures of a binary RBM on a data set.

* :func:`reconstruction_error` -- squared error of one mean-field reconstruction; cheap,
  but not a likelihood (a model can reconstruct well and still be a poor density).
* :func:`pseudo_log_likelihood` -- the usual one-bit stochastic estimate of
  ``sum_i log p(v_i | v_-i)``; needs no partition function.
* :func:`exact_log_likelihood` -- ``mean log f(v) - log Z`` with ``log Z`` from
  :func:`~logzbench.models.enumeration.exact_log_z` (only for models whose smaller layer
  can be enumerated).

All three return a Python float averaged over the rows of ``data``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..models.enumeration import exact_log_z
from ..models.rbm import BinaryRBM

__all__ = ["exact_log_likelihood", "pseudo_log_likelihood", "reconstruction_error"]


def reconstruction_error(rbm: BinaryRBM, data) -> float:
    """Mean squared error of one mean-field reconstruction.

    Each row is mapped ``v -> p(h | v) -> p(v | h = p(h | v))`` (probabilities, no
    sampling), and the squared difference to ``v`` is averaged over visible units and
    then over rows.

    Parameters
    ----------
    rbm : BinaryRBM
    data : array-like, shape (n_samples, n_visible)
        Binary data.

    Returns
    -------
    float
        In ``[0, 1]``.
    """
    v = rbm._as_input(data)
    recon = rbm.prob_v_given_h(rbm.prob_h_given_v(v))
    return float(((recon - v) ** 2).mean())


def pseudo_log_likelihood(rbm: BinaryRBM, data, generator: torch.Generator) -> float:
    """Stochastic pseudo-log-likelihood, averaged over rows.

    The pseudo-log-likelihood of a row is ``PL(v) = sum_i log p(v_i | v_-i)``.  For an
    RBM, with ``v'`` equal to ``v`` with bit ``i`` flipped,

        log p(v_i | v_-i) = log f(v) - logaddexp(log f(v), log f(v'))
                          = log sigmoid(log f(v) - log f(v')),

    (``log f = -F``, the negative free energy).  The standard estimator draws one bit
    ``i`` uniformly per row and returns ``n_visible * log sigmoid(log f(v) - log f(v'))``,
    an unbiased estimate of ``PL(v)`` at the cost of two free-energy evaluations.

    Parameters
    ----------
    rbm : BinaryRBM
    data : array-like, shape (n_samples, n_visible)
        Binary data.
    generator : torch.Generator
        Draws the flipped bit of each row (on the model's device).

    Returns
    -------
    float
    """
    v = rbm._as_input(data)
    flip = torch.randint(rbm.n_visible, (v.shape[0],), generator=generator, device=rbm.device)
    return float(_pseudo_log_likelihood_at(rbm, v, flip).mean())


def _pseudo_log_likelihood_at(rbm: BinaryRBM, v: torch.Tensor, flip: torch.Tensor) -> torch.Tensor:
    """One-bit PL estimates with given flipped bits: ``(n,) float64`` from ``v (n, n_visible)``, ``flip (n,)``."""
    rows = torch.arange(v.shape[0], device=v.device)
    v_flipped = v.clone()
    v_flipped[rows, flip] = 1.0 - v_flipped[rows, flip]
    gap = rbm.log_unnormalized_marginal(v) - rbm.log_unnormalized_marginal(v_flipped)
    return rbm.n_visible * F.logsigmoid(gap)


def exact_log_likelihood(rbm: BinaryRBM, data, log_z: float | None = None) -> float:
    """Exact mean log-likelihood ``mean_n log f(v_n) - log Z`` (float64 arithmetic).

    Parameters
    ----------
    rbm : BinaryRBM
    data : array-like, shape (n_samples, n_visible)
        Binary data.
    log_z : float, optional
        ``log Z`` of ``rbm`` when already known; otherwise computed by
        :func:`~logzbench.models.enumeration.exact_log_z`, which enumerates
        ``2^min(n_visible, n_hidden)`` states (seconds for 20 units, refused above 32).

    Returns
    -------
    float
    """
    if log_z is None:
        log_z = exact_log_z(rbm)
    return float(rbm.log_unnormalized_marginal(data).mean()) - float(log_z)
