"""Monte Carlo estimates of the two variational bounds: the encoder's free-energy upper bound
(Eq. 8) and the decoder's ``log Z`` lower bound (Eqs. 9 and 13), from exact draws in float64."""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch

from .nets import Decoder, Encoder


# ---------------------------------------------------------------------------- bound estimates
class MCEstimate(NamedTuple):
    """A Monte Carlo mean and its standard error (float64 tensors of the same shape)."""

    value: torch.Tensor
    stderr: torch.Tensor


def mean_stderr(x: torch.Tensor) -> MCEstimate:
    """Mean over axis 0 and its standard error (float64)."""
    x = x.double()
    n = x.shape[0]
    se = x.std(0, unbiased=True) / math.sqrt(n) if n > 1 else torch.full_like(x[0], math.nan)
    return MCEstimate(x.mean(0), se)


@torch.no_grad()
def free_energy_bound(
    energy: Callable,
    encoder: Encoder,
    v: torch.Tensor,
    generator: torch.Generator,
    n_samples: int = 1,
    entropy: bool = True,
) -> MCEstimate:
    """Monte Carlo estimate of the encoder bound (Eq. 8), ``G(v) = E_Q[E(v, h) + log Q(h | v)] >= F(v)``.

    Parameters
    ----------
    energy : callable
        ``energy(v, hs) -> (n,)`` (an :class:`EnergyModel`, or any black-box energy).
    encoder : Encoder
    v : torch.Tensor, shape (n, n_visible)
    generator : torch.Generator
    n_samples : int
        Exact draws ``h ~ Q(h | v)`` per row.
    entropy : bool
        ``False`` drops ``H(Q)`` (the estimate of ``E_Q[E]`` alone, for the ablation).

    Returns
    -------
    MCEstimate
        ``value`` and ``stderr`` of shape ``(n,)`` (float64): per-row means of
        ``E(v, h) - sum_l H(Q(h_l | h_{l-1}))`` over the draws.
    """
    vals = []
    for _ in range(int(n_samples)):
        s = encoder.sample(v, generator)
        e = energy(v.double(), [h.double() for h in s.hs])
        vals.append(e - s.entropy.double() if entropy else e)
    return mean_stderr(torch.stack(vals))


class DecoderBounds(NamedTuple):
    """Monte Carlo estimates from one batch of decoder draws (Eqs. 9 and 13).

    Attributes
    ----------
    log_z : MCEstimate
        ``E_q[-E(v, h)] + (entropy bound)``, a lower bound on ``log Z``.
    entropy : MCEstimate
        The Eq. 13 lower bound on ``H(q(v, h))``.
    energy : MCEstimate
        ``E_q[E(v, h)]`` (the negative phase's energy).
    """

    log_z: MCEstimate
    entropy: MCEstimate
    energy: MCEstimate


@torch.no_grad()
def decoder_bounds(
    energy: Callable, decoder: Decoder, n_samples: int, generator: torch.Generator, chunk: int = 1 << 14
) -> DecoderBounds:
    """Monte Carlo estimates of the decoder's ``log Z`` lower bound (Eq. 9 with Eq. 13).

    Parameters
    ----------
    energy : callable
        ``energy(v, hs) -> (n,)``.
    decoder : Decoder
    n_samples : int
        Exact ancestral draws ``(z, h, v) ~ q``.
    generator : torch.Generator
    chunk : int
        Draws per batch.

    Returns
    -------
    DecoderBounds
        Scalar float64 estimates with standard errors; ``log_z = entropy - energy`` per draw.
    """
    ent, en = [], []
    for start in range(0, int(n_samples), chunk):
        s = decoder.sample(min(chunk, int(n_samples) - start), generator)
        en.append(energy(s.v.double(), [h.double() for h in s.hs]))
        ent.append(s.entropy_bound().double())
    ent, en = torch.cat(ent), torch.cat(en)
    return DecoderBounds(mean_stderr(ent - en), mean_stderr(ent), mean_stderr(en))
