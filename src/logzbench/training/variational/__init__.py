"""Shared pieces of the black-box variational learners (AVIL, NVIL, VCD) for energy-based models.

Li et al. (2019), "Adversarial Variational Inference and Learning in Markov Random Fields"
(AVIL); Kuleshov & Ermon (2017), "Neural Variational Inference and Learning in Undirected
Graphical Models" (NVIL).  An MRF ``P(v, h) = exp(-E(v, h)) / Z`` is learned knowing only its
energy ``E(v, h)``; two directed networks stand in for the two intractable quantities:

* the **encoder** ``Q(h | v)`` (``v -> h_1 -> h_2 -> ...``, Bernoulli units) bounds the free
  energy ``F(v) = -log sum_h exp(-E(v, h))`` from above (Eq. 8)::

      G(v) = E_Q[E(v, h) + log Q(h | v)] >= F(v)                       (equality iff Q = P(h|v));

* the **decoder** ``q(v, h) = int_z q(z) q(h_L | z) ... q(h_1 | h_2) q(v | h_1) dz`` with an
  auxiliary ``z`` (``N(0, I)``, or uniform Bernoulli for ``z="discrete"``) bounds ``log Z``
  from below (Eq. 9)::

      log Z >= E_q[-E(v, h)] + H(q(v, h)),

  and, ``H(q(v, h))`` being intractable, by the auxiliary posterior ``r(z | h_L)`` (Eq. 13)::

      H(q(v, h)) >= -E_q log q(v, h_{<L} | h_L) - E_q(h_L, z) log[q(h_L, z) / r(z | h_L)]
                  = E[H(q(v | h_1))] + sum_{l<L} E[H(q(h_l | h_{l+1}))] + H(q(z))
                    + E[H(q(h_L | z))] + E_q[log r(z | h_L)]

  (for one hidden layer exactly Eq. 13, ``-E_q log q(v | h) - E_q(h, z) log[q(h, z) / r(z | h)]``)

  (equality iff ``r(z | h_L) = q(z | h_L)``).  The conditional entropies are computed in closed
  form given the sampled parents (Bernoulli: ``softplus(l) - sigmoid(l) l`` per unit; Gaussian
  ``q(v | h)``: ``log(sigma) + log(2 pi e) / 2`` per unit), which has the same expectation as
  ``-log q`` at the sample and a smaller variance.  The same holds for ``H(Q(h | v))``.

Monte Carlo estimates of both bounds (:func:`free_energy_bound`, :func:`decoder_bounds`) use
exact Bernoulli samples, so they are unbiased for the bounds (their means are the bounds,
float64 accumulation).  Gradients of the variational objectives with respect to the networks
use the binary-concrete (Gumbel-softmax) relaxation (:func:`binary_concrete`; Jang et al. 2016,
Maddison et al. 2016) at temperature ``tau``: ``y = sigmoid((logit + L) / tau)`` with logistic
noise ``L = log U - log(1 - U)``; ``straight_through=True`` returns the hard sample
``1[logit + L > 0]`` in the forward pass and the relaxed sample's gradient.  The same noise at
``tau -> 0`` is the exact Bernoulli draw.

Modules: :mod:`.distributions` (Bernoulli / Gaussian densities, entropies, the binary-concrete
relaxation), :mod:`.nets` (the encoder and decoder networks), :mod:`.energies` (the energy families,
:data:`ENERGIES`, and :class:`EnergyModel`), :mod:`.bounds` (Monte Carlo estimates of both bounds),
:mod:`.monitors` (exact and AIS monitoring, model selection, the history), :mod:`.loop` (a learner's
set-up, minibatches and optimiser steps), :mod:`.figures` (samples for figures).
"""

from .bounds import DecoderBounds, MCEstimate, decoder_bounds, free_energy_bound, mean_stderr
from .distributions import (
    Relaxation,
    bernoulli_entropy,
    bernoulli_log_prob,
    bernoulli_log_prob_table,
    binary_concrete,
    gaussian_entropy,
    gaussian_log_prob,
    logistic_noise,
    sample_bernoulli,
)
from .energies import (
    DIVERGED_ABS,
    ENERGIES,
    MAX_LOG_F_UNITS,
    EnergyFamily,
    EnergyModel,
    get_family,
    grbm_energy,
    grbm_free_energy,
    layered_energy,
    layered_free_energy,
)
from .figures import figure_samples
from .loop import Batches, Setup, adam, check_ablation, setup, step
from .monitors import AISMonitor, BestSnapshot, ExactMonitor, History, check_select, logged
from .nets import (
    MAX_EXACT_BITS,
    MLP,
    Decoder,
    DecoderSample,
    Encoder,
    EncoderSample,
    exact_decoder_entropy,
    float64_copy,
)

__all__ = [
    "AISMonitor",
    "Batches",
    "BestSnapshot",
    "DIVERGED_ABS",
    "Decoder",
    "DecoderBounds",
    "DecoderSample",
    "ENERGIES",
    "Encoder",
    "EncoderSample",
    "EnergyFamily",
    "EnergyModel",
    "ExactMonitor",
    "History",
    "MAX_EXACT_BITS",
    "MAX_LOG_F_UNITS",
    "MCEstimate",
    "MLP",
    "Relaxation",
    "Setup",
    "adam",
    "bernoulli_entropy",
    "bernoulli_log_prob",
    "bernoulli_log_prob_table",
    "binary_concrete",
    "check_ablation",
    "check_select",
    "decoder_bounds",
    "exact_decoder_entropy",
    "figure_samples",
    "float64_copy",
    "free_energy_bound",
    "gaussian_entropy",
    "gaussian_log_prob",
    "get_family",
    "grbm_energy",
    "grbm_free_energy",
    "layered_energy",
    "layered_free_energy",
    "logged",
    "logistic_noise",
    "mean_stderr",
    "sample_bernoulli",
    "setup",
    "step",
]
