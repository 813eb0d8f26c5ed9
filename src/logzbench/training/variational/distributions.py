"""Factorial Bernoulli and diagonal Gaussian densities and entropies, and the binary-concrete relaxation.

The variational learners draw exact Bernoulli samples for their Monte Carlo bounds and relaxed ones
(binary concrete at temperature ``tau``, optionally straight-through) for gradients; both come from
the same logistic noise, so the relaxed draw at ``tau -> 0`` is the exact one.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

_LOG_2PI = math.log(2.0 * math.pi)


# ---------------------------------------------------------------------------- relaxation
class Relaxation(NamedTuple):
    """How a Bernoulli draw is relaxed for gradients: binary concrete at ``temperature``,
    optionally straight-through (hard forward value, relaxed gradient)."""

    temperature: float = 0.1
    straight_through: bool = False


def logistic_noise(shape, generator: torch.Generator, device, dtype=torch.float32) -> torch.Tensor:
    """``L = log U - log(1 - U)``, ``U ~ Uniform(0, 1)``: standard logistic noise of ``shape``."""
    u = torch.rand(shape, generator=generator, device=device, dtype=dtype)
    tiny = torch.finfo(dtype).tiny
    u = u.clamp(tiny, 1.0 - torch.finfo(dtype).eps)
    return torch.log(u) - torch.log1p(-u)


def binary_concrete(
    logits: torch.Tensor, noise: torch.Tensor, temperature: float, straight_through: bool = False
) -> torch.Tensor:
    """Binary-concrete (Gumbel-softmax for two classes) sample from given logistic ``noise``.

    Parameters
    ----------
    logits : torch.Tensor, shape (n, d)
        Bernoulli logits.
    noise : torch.Tensor, shape (n, d)
        Logistic noise (:func:`logistic_noise`); fixing it makes the sample a smooth function
        of ``logits``.
    temperature : float
        ``tau > 0``; as ``tau -> 0`` the sample tends to the hard draw ``1[logits + noise > 0]``,
        which is exactly ``Bernoulli(sigmoid(logits))``.
    straight_through : bool
        Forward the hard draw, backpropagate the relaxed one's gradient.

    Returns
    -------
    torch.Tensor, shape (n, d)
    """
    soft = torch.sigmoid((logits + noise) / temperature)
    if not straight_through:
        return soft
    hard = (logits + noise > 0).to(soft.dtype)
    return hard + soft - soft.detach()


def sample_bernoulli(logits: torch.Tensor, generator: torch.Generator, relax: Relaxation | None = None) -> torch.Tensor:
    """A Bernoulli(sigmoid(logits)) draw: exact (no gradient) when ``relax`` is None, else relaxed."""
    noise = logistic_noise(logits.shape, generator, logits.device, logits.dtype)
    if relax is None:
        return (logits.detach() + noise > 0).to(logits.dtype)
    return binary_concrete(logits, noise, relax.temperature, relax.straight_through)


def bernoulli_log_prob(x: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """``sum_i x_i l_i - softplus(l_i)``: ``log Bernoulli(x; sigmoid(l))`` over the last axis, shape ``(...)``."""
    return (x * logits - F.softplus(logits)).sum(-1)


def bernoulli_log_prob_table(x: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """``log Bernoulli(x_i; sigmoid(logits_j))`` for every pair of rows, shape ``(len(x), len(logits))``
    (exact enumeration: every state against every parent's logits)."""
    return x @ logits.T - F.softplus(logits).sum(-1)


def bernoulli_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of factorial Bernoulli(sigmoid(l)): ``sum_i softplus(l_i) - sigmoid(l_i) l_i``, shape ``(...)``."""
    return (F.softplus(logits) - torch.sigmoid(logits) * logits).sum(-1)


def gaussian_log_prob(x: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """``log N(x; mean, diag(exp(log_std)^2))`` over the last axis, shape ``(...)``."""
    return (-0.5 * ((x - mean) * torch.exp(-log_std)) ** 2 - log_std).sum(-1) - 0.5 * x.shape[-1] * _LOG_2PI


def gaussian_entropy(log_std: torch.Tensor) -> torch.Tensor:
    """Entropy of ``N(., diag(exp(log_std)^2))``: ``sum_i log_std_i + (1 + log 2 pi) / 2`` over the last axis."""
    return (log_std + 0.5 * (1.0 + _LOG_2PI)).sum(-1)
