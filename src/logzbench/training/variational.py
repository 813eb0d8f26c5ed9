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

**The energy interface.**  A learner needs only a differentiable ``E(v, hs)`` (``hs`` the list of
hidden layers): an :class:`EnergyFamily` is that function plus how to initialise its parameters
and (optionally) how to turn them into the project's model object, its free energy (NVIL) and
exact values for monitoring.  :data:`FAMILIES` holds

* ``"rbm"``: ``E = -b'v - v'W h - c'h`` (a one-layer case of the layered energy);
* ``"dbm"``: ``E = -sum_l b_l'h_l - sum_l h_{l-1}' W_l h_l`` (``h_0 = v``; any depth, 2 in the paper);
* ``"grbm"``: ``E = ||v - b||^2 / (2 sigma^2) - c'h - v'W h / sigma`` (real ``v``, fixed ``sigma``).

Adding a family is one energy function and one :class:`EnergyFamily` entry.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..models.dbm import DBM
from ..models.enumeration import state_bits
from ..models.rbm import BinaryRBM
from ..utils import make_generator, resolve_device
from .dbm import _base_rate_logit, _check_hidden_sizes, _check_params_finite
from .learner_options import ABLATION_ALIASES, ABLATIONS, SELECTIONS, Z_KINDS, check_values
from .trainer import TrainingDivergedError, _as_binary_data, _check_real, _spawn_seed

__all__ = [
    "FAMILIES", "Decoder", "DecoderBounds", "DecoderSample", "Encoder", "EncoderSample", "EnergyFamily", "EnergyModel",
    "MCEstimate", "MLP", "Relaxation", "bernoulli_entropy", "bernoulli_log_prob", "bernoulli_log_prob_table",
    "binary_concrete", "decoder_bounds",
    "exact_decoder_entropy", "figure_samples", "free_energy_bound", "gaussian_entropy", "gaussian_log_prob", "get_family",
    "grbm_energy", "grbm_free_energy", "layered_energy",
    "layered_free_energy", "logistic_noise", "mean_stderr", "sample_bernoulli",
]

#: Largest number of states (log2) that exact monitoring enumerates.
MAX_EXACT_BITS = 26
#: A learner's parameter beyond this in magnitude has diverged (:meth:`EnergyModel.check_finite`, every
#: iteration): Adam moves a parameter by about ``lr`` per step (3e-4 in the paper, at most a few units over a
#: whole run), and float32 energies of such weights keep no digit below 0.1 (``lr=1e10`` gave |W| = 3e10)
DIVERGED_ABS = 1e6
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


def binary_concrete(logits: torch.Tensor, noise: torch.Tensor, temperature: float,
                    straight_through: bool = False) -> torch.Tensor:
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


def sample_bernoulli(logits: torch.Tensor, generator: torch.Generator,
                     relax: Relaxation | None = None) -> torch.Tensor:
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


# ---------------------------------------------------------------------------- networks
class MLP(nn.Module):
    """``n_in -> n_hidden (sigmoid) -> n_out`` (linear output); ``n_hidden = 0``: one linear map.

    Weights are Glorot-uniform (gain 4 before a sigmoid, 1 on the output layer) drawn from
    ``generator``; biases 0.
    """

    def __init__(self, n_in: int, n_out: int, n_hidden: int, generator: torch.Generator):
        super().__init__()
        if n_hidden:
            self.net = nn.Sequential(nn.Linear(n_in, n_hidden), nn.Sigmoid(), nn.Linear(n_hidden, n_out))
            gains = (4.0, 1.0)
        else:
            self.net = nn.Sequential(nn.Linear(n_in, n_out))
            gains = (1.0,)
        linears = [m for m in self.net if isinstance(m, nn.Linear)]
        with torch.no_grad():
            for lin, gain in zip(linears, gains):
                a = gain * math.sqrt(6.0 / (lin.in_features + lin.out_features))
                lin.weight.copy_((torch.rand(lin.weight.shape, generator=generator, dtype=torch.float64) * 2 - 1) * a)
                lin.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class EncoderSample(NamedTuple):
    """A draw ``h ~ Q(h | v)``.

    Attributes
    ----------
    hs : list of torch.Tensor
        ``[h_1, ..., h_L]``, shapes ``(n, n_l)``.
    entropy : torch.Tensor, shape (n,)
        ``sum_l H(Q(h_l | h_{l-1}))`` given the sampled parents (unbiased for ``H(Q(h | v))``).
    log_prob : torch.Tensor, shape (n,)
        ``log Q(h | v)`` at the sample.
    """

    hs: list
    entropy: torch.Tensor
    log_prob: torch.Tensor


class Encoder(nn.Module):
    """``Q(h | v) = prod_l Q(h_l | h_{l-1})``, ``h_0 = v``, each factorial Bernoulli with logits
    ``MLP_l(h_{l-1})`` (a DBM's ``Q(h_1, h_2 | v)`` is ``v -> h_1 -> h_2``).

    Parameters
    ----------
    n_visible : int
    hidden_sizes : sequence of int
        ``(n_1, ..., n_L)``.
    mlp_hidden : int
        Width of each MLP's hidden layer (0: logistic regression).
    generator : torch.Generator
        CPU generator for the initial weights.
    """

    def __init__(self, n_visible: int, hidden_sizes: Sequence[int], mlp_hidden: int, generator: torch.Generator):
        super().__init__()
        sizes = [int(n_visible), *map(int, hidden_sizes)]
        self.sizes = tuple(sizes)
        self.nets = nn.ModuleList(MLP(sizes[l], sizes[l + 1], mlp_hidden, generator) for l in range(len(sizes) - 1))

    def sample(self, v: torch.Tensor, generator: torch.Generator, relax: Relaxation | None = None) -> EncoderSample:
        """Draw ``h ~ Q(h | v)`` for rows ``v (n, n_visible)`` (exact when ``relax`` is None)."""
        x, hs = v, []
        entropy = log_prob = 0.0
        for net in self.nets:
            logits = net(x)
            x = sample_bernoulli(logits, generator, relax)
            hs.append(x)
            entropy = entropy + bernoulli_entropy(logits)
            log_prob = log_prob + bernoulli_log_prob(x, logits)
        return EncoderSample(hs, entropy, log_prob)

    def log_prob(self, v: torch.Tensor, hs: Sequence[torch.Tensor]) -> torch.Tensor:
        """``log Q(h | v)``, shape ``(n,)``."""
        out, x = 0.0, v
        for net, h in zip(self.nets, hs):
            out = out + bernoulli_log_prob(h, net(x))
            x = h
        return out


class DecoderSample(NamedTuple):
    """A draw ``(z, h, v) ~ q``.

    Attributes
    ----------
    z : torch.Tensor, shape (n, aux_size)
    hs : list of torch.Tensor
        ``[h_1, ..., h_L]`` (``h_1`` next to ``v``), shapes ``(n, n_l)``.
    v : torch.Tensor, shape (n, n_visible)
    cond_entropy : torch.Tensor, shape (n,)
        ``H(q(v | h_1)) + sum_{l<L} H(q(h_l | h_{l+1})) + H(q(h_L | z))`` given the sampled parents.
    log_r : torch.Tensor, shape (n,)
        ``log r(z | h_L)``.
    prior_entropy : float
        ``H(q(z))``.
    """

    z: torch.Tensor
    hs: list
    v: torch.Tensor
    cond_entropy: torch.Tensor
    log_r: torch.Tensor
    prior_entropy: float

    def entropy_bound(self) -> torch.Tensor:
        """Per-sample estimate of the Eq. 13 lower bound on ``H(q(v, h))``, shape ``(n,)``."""
        return self.cond_entropy + self.prior_entropy + self.log_r


class Decoder(nn.Module):
    """``q(v, h) = int q(z) q(h_L | z) prod_{l<L} q(h_l | h_{l+1}) q(v | h_1) dz`` and ``r(z | h_L)``.

    Parameters
    ----------
    n_visible : int
    hidden_sizes : sequence of int
        ``(n_1, ..., n_L)`` (the MRF's hidden layers).
    aux_size : int
        Dimension of ``z`` (the paper's "# auxiliary": 15, 50 or 25).
    z : {"continuous", "discrete"}
        ``q(z) = N(0, I)`` with a diagonal-Gaussian ``r(z | h_L)``, or ``q(z)`` uniform on
        ``{0, 1}^aux_size`` with a factorial Bernoulli ``r(z | h_L)`` (the digits study, where
        ``q(v, h)`` can be enumerated).
    visible : {"binary", "real"}
        Bernoulli ``q(v | h_1)``, or Gaussian ``N(mean(h_1), diag(s^2))`` (for a GRBM).
    mlp_hidden : int
        Width of each MLP's hidden layer (0: a linear map).
    generator : torch.Generator
        CPU generator for the initial weights.
    visible_std : float, optional
        Real ``v`` only: a fixed ``s``; ``None`` learns ``log s`` per unit (initially ``s = 1``).
    """

    def __init__(self, n_visible: int, hidden_sizes: Sequence[int], aux_size: int, z: str = "continuous",
                 visible: str = "binary", mlp_hidden: int = 25, generator: torch.Generator | None = None,
                 visible_std: float | None = None):
        super().__init__()
        if z not in Z_KINDS:
            raise ValueError(f"unknown z {z!r}; choose one of {Z_KINDS}")
        if visible not in ("binary", "real"):
            raise ValueError(f"unknown visible type {visible!r}; choose 'binary' or 'real'")
        g = generator if generator is not None else torch.Generator().manual_seed(0)
        self.z_kind, self.visible = z, visible
        self.aux_size, self.n_visible = int(aux_size), int(n_visible)
        self.hidden_sizes = tuple(int(n) for n in hidden_sizes)
        top = self.hidden_sizes[-1]
        self.top = MLP(self.aux_size, top, mlp_hidden, g)  # z -> h_L
        self.down = nn.ModuleList(MLP(self.hidden_sizes[l + 1], self.hidden_sizes[l], mlp_hidden, g)
                                  for l in range(len(self.hidden_sizes) - 1))  # h_{l+1} -> h_l
        self.vis = MLP(self.hidden_sizes[0], self.n_visible, mlp_hidden, g)  # h_1 -> v
        self.r = MLP(top, self.aux_size * (2 if z == "continuous" else 1), mlp_hidden, g)  # h_L -> z
        self.log_std = None
        if visible == "real":
            if visible_std is None:
                self.log_std = nn.Parameter(torch.zeros(self.n_visible))
            else:
                _check_real("visible_std", visible_std, 0.0, math.inf, low_open=True, high_open=True)
                self.register_buffer("fixed_log_std", torch.full((self.n_visible,), math.log(visible_std)))

    # -- pieces
    def prior_entropy(self) -> float:
        """``H(q(z))``: ``k (1 + log 2 pi) / 2`` (continuous) or ``k log 2`` (discrete)."""
        k = self.aux_size
        return 0.5 * k * (1.0 + _LOG_2PI) if self.z_kind == "continuous" else k * math.log(2.0)

    def sample_z(self, n: int, generator: torch.Generator, device, dtype=torch.float32) -> torch.Tensor:
        """``z ~ q(z)``, shape ``(n, aux_size)``."""
        if self.z_kind == "continuous":
            return torch.randn(n, self.aux_size, generator=generator, device=device, dtype=dtype)
        return (torch.rand(n, self.aux_size, generator=generator, device=device, dtype=dtype) < 0.5).to(dtype)

    def log_prior(self, z: torch.Tensor) -> torch.Tensor:
        """``log q(z)``, shape ``(n,)``."""
        if self.z_kind == "continuous":
            return -0.5 * (z * z).sum(-1) - 0.5 * self.aux_size * _LOG_2PI
        return torch.full(z.shape[:-1], -self.aux_size * math.log(2.0), dtype=z.dtype, device=z.device)

    def log_r(self, z: torch.Tensor, h_top: torch.Tensor) -> torch.Tensor:
        """``log r(z | h_L)``, shape ``(n,)``."""
        out = self.r(h_top)
        if self.z_kind == "discrete":
            return bernoulli_log_prob(z, out)
        mean, log_std = out.chunk(2, dim=-1)
        return gaussian_log_prob(z, mean, log_std)

    def _visible_log_std(self) -> torch.Tensor:
        return self.log_std if self.log_std is not None else self.fixed_log_std

    def visible_entropy(self, h1: torch.Tensor) -> torch.Tensor:
        """``H(q(v | h_1))``, shape ``(n,)``."""
        if self.visible == "binary":
            return bernoulli_entropy(self.vis(h1))
        return gaussian_entropy(self._visible_log_std()).expand(h1.shape[0])

    def log_prob_visible(self, v: torch.Tensor, h1: torch.Tensor) -> torch.Tensor:
        """``log q(v | h_1)``, shape ``(n,)``."""
        out = self.vis(h1)
        if self.visible == "binary":
            return bernoulli_log_prob(v, out)
        return gaussian_log_prob(v, out, self._visible_log_std())

    def log_prob_hidden_given_z(self, hs: Sequence[torch.Tensor], z: torch.Tensor) -> torch.Tensor:
        """``log q(h | z) = log q(h_L | z) + sum_{l<L} log q(h_l | h_{l+1})``, shape ``(n,)``."""
        out = bernoulli_log_prob(hs[-1], self.top(z))
        for l, net in enumerate(self.down):
            out = out + bernoulli_log_prob(hs[l], net(hs[l + 1]))
        return out

    def log_joint(self, z: torch.Tensor, hs: Sequence[torch.Tensor], v: torch.Tensor) -> torch.Tensor:
        """``log q(z, h, v)``, shape ``(n,)``."""
        return self.log_prior(z) + self.log_prob_hidden_given_z(hs, z) + self.log_prob_visible(v, hs[0])

    # -- sampling
    def sample(self, n: int, generator: torch.Generator, relax: Relaxation | None = None,
               device=None) -> DecoderSample:
        """Ancestral draw ``z -> h_L -> ... -> h_1 -> v`` of ``n`` rows (exact when ``relax`` is None)."""
        p = next(self.parameters())
        device, dtype = (p.device if device is None else device), p.dtype
        z = self.sample_z(n, generator, device, dtype)
        logits = self.top(z)
        h = sample_bernoulli(logits, generator, relax)
        ent = bernoulli_entropy(logits)
        hs = [h]
        for net in reversed(self.down):
            logits = net(hs[0])
            hs.insert(0, sample_bernoulli(logits, generator, relax))
            ent = ent + bernoulli_entropy(logits)
        out = self.vis(hs[0])
        if self.visible == "binary":
            v = sample_bernoulli(out, generator, relax)
            ent = ent + bernoulli_entropy(out)
        else:
            eps = torch.randn(out.shape, generator=generator, device=device, dtype=dtype)
            log_std = self._visible_log_std()
            v = out + torch.exp(log_std) * eps
            if relax is None:
                v = v.detach()
            ent = ent + gaussian_entropy(log_std)
        return DecoderSample(z, hs, v, ent, self.log_r(z, hs[-1]), self.prior_entropy())

    # -- exact (discrete z)
    def all_z(self, device=None, dtype=torch.float64) -> torch.Tensor:
        """Every ``z`` of a discrete decoder, shape ``(2^aux_size, aux_size)``."""
        if self.z_kind != "discrete":
            raise ValueError("only a decoder with discrete z can be enumerated")
        return state_bits(0, 1 << self.aux_size, self.aux_size, device, dtype)

    def log_prob_top(self, h_top: torch.Tensor) -> torch.Tensor:
        """Exact ``log q(h_L) = logsumexp_z log q(z) + log q(h_L | z)`` (discrete ``z``), shape ``(n,)``."""
        zs = self.all_z(h_top.device, h_top.dtype)
        logits = self.top(zs)  # (2^k, n_L)
        pair = bernoulli_log_prob_table(h_top, logits)  # (n, 2^k): log q(h_L | z)
        return torch.logsumexp(pair, dim=1) - self.aux_size * math.log(2.0)

    def log_prob_hidden(self, hs: Sequence[torch.Tensor]) -> torch.Tensor:
        """Exact ``log q(h) = log q(h_L) + sum_{l<L} log q(h_l | h_{l+1})`` (discrete ``z`` enumerated),
        shape ``(n,)``."""
        out = self.log_prob_top(hs[-1])
        for l, net in enumerate(self.down):
            out = out + bernoulli_log_prob(hs[l], net(hs[l + 1]))
        return out

    def log_prob(self, v: torch.Tensor, hs: Sequence[torch.Tensor]) -> torch.Tensor:
        """Exact ``log q(v, h)`` (discrete ``z`` enumerated), shape ``(n,)``."""
        return self.log_prob_hidden(hs) + self.log_prob_visible(v, hs[0])


@torch.no_grad()
def exact_decoder_entropy(decoder: Decoder, max_bits: int = MAX_EXACT_BITS, chunk: int = 1 << 12) -> float:
    """Exact ``H(q(v, h))`` of a decoder with discrete ``z`` (float64).

    ``H(q(v, h)) = H(q(h)) + E_{q(h)} H(q(v | h_1))`` with ``q(h)`` computed by enumerating every
    hidden configuration (``2^sum n_l`` states) and, for ``q(h_L)``, every ``z``
    (``2^(aux_size + n_L)`` pairs, as matrix products).

    Parameters
    ----------
    decoder : Decoder
        With ``z="discrete"``.
    max_bits : int
        Refuse when ``sum_l n_l`` or ``aux_size + n_L`` exceeds it.
    chunk : int
        Hidden states per step.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Continuous ``z``, or too many states.
    """
    if decoder.z_kind != "discrete":
        raise ValueError("the exact decoder entropy needs discrete z (a continuous z cannot be enumerated)")
    n_h = sum(decoder.hidden_sizes)
    if n_h > max_bits or decoder.aux_size + decoder.hidden_sizes[-1] > max_bits:
        raise ValueError(f"exact decoder entropy needs 2^{n_h} hidden states and 2^{decoder.aux_size} values of z; "
                         f"refusing above 2^{max_bits}")
    p = next(decoder.parameters())
    dec = float64_copy(decoder)
    total, ent, vis_ent = 1 << n_h, [], []
    for start in range(0, total, chunk):
        h = state_bits(start, min(start + chunk, total), n_h, p.device, torch.float64)
        hs = list(torch.split(h, decoder.hidden_sizes, dim=1))
        ent.append(dec.log_prob_hidden(hs))
        vis_ent.append(dec.visible_entropy(hs[0]))
    log_q, vis = torch.cat(ent), torch.cat(vis_ent)
    q = torch.exp(log_q)
    return float(-(q * log_q).sum() + (q * vis).sum())


def float64_copy(module: nn.Module) -> nn.Module:
    """A float64 copy of ``module`` (for exact evaluation)."""
    return copy.deepcopy(module).double()


# ---------------------------------------------------------------------------- energies
def layered_energy(p: Mapping[str, torch.Tensor], v: torch.Tensor, hs: Sequence[torch.Tensor]) -> torch.Tensor:
    """``E(v, h) = -sum_l b_l'h_l - sum_l h_{l-1}' W_l h_l`` (``h_0 = v``; RBM and DBM), shape ``(n,)``.

    ``p`` holds ``W_1..W_L`` (``(n_{l-1}, n_l)``) and ``bias_0..bias_L``.
    """
    xs = [v, *hs]
    out = -sum(x @ p[f"bias_{l}"] for l, x in enumerate(xs))
    for l in range(1, len(xs)):
        out = out - ((xs[l - 1] @ p[f"W_{l}"]) * xs[l]).sum(-1)
    return out


def layered_free_energy(p: Mapping[str, torch.Tensor], v: torch.Tensor) -> torch.Tensor:
    """``F(v) = -b'v - sum_j softplus(c_j + (v W)_j)`` of a one-layer (RBM) energy, shape ``(n,)``."""
    if "W_2" in p:
        raise ValueError("the free energy is tractable only for a one-layer model (RBM)")
    return -(v @ p["bias_0"]) - F.softplus(v @ p["W_1"] + p["bias_1"]).sum(-1)


def grbm_energy(p: Mapping[str, torch.Tensor], v: torch.Tensor, hs: Sequence[torch.Tensor]) -> torch.Tensor:
    """``E(v, h) = ||v - b||^2 / (2 sigma^2) - c'h - v'W h / sigma`` (Gaussian-Bernoulli RBM), shape ``(n,)``."""
    h, s = hs[0], p["sigma"]
    return ((v - p["b"]) ** 2).sum(-1) / (2 * s * s) - h @ p["c"] - ((v @ p["W"]) * h).sum(-1) / s


def grbm_free_energy(p: Mapping[str, torch.Tensor], v: torch.Tensor) -> torch.Tensor:
    """``F(v) = ||v - b||^2 / (2 sigma^2) - sum_j softplus(c_j + (v W)_j / sigma)``, shape ``(n,)``."""
    s = p["sigma"]
    return ((v - p["b"]) ** 2).sum(-1) / (2 * s * s) - F.softplus(v @ p["W"] / s + p["c"]).sum(-1)


def _init_layered(n_visible, hidden_sizes, data, generator, init_scale, options):
    sizes = [n_visible, *hidden_sizes]
    params = {f"W_{l}": torch.randn(sizes[l - 1], sizes[l], generator=generator, dtype=torch.float64) * init_scale
              for l in range(1, len(sizes))}
    params["bias_0"] = _base_rate_logit(data.double().mean(0).cpu())
    params.update({f"bias_{l}": torch.zeros(sizes[l], dtype=torch.float64) for l in range(1, len(sizes))})
    return params, {}


def _init_grbm(n_visible, hidden_sizes, data, generator, init_scale, options):
    sigma = options.get("sigma", 1.0)
    _check_real("sigma", sigma, 0.0, math.inf, low_open=True, high_open=True)
    params = {"W": torch.randn(n_visible, hidden_sizes[0], generator=generator, dtype=torch.float64) * init_scale,
              "b": data.double().mean(0).cpu(), "c": torch.zeros(hidden_sizes[0], dtype=torch.float64)}
    return params, {"sigma": torch.tensor(float(sigma), dtype=torch.float64)}


def _arrays(p):
    return {k: t.detach().cpu().double().numpy() for k, t in p.items()}


def _layered_model(p, data_mean=None, family="dbm"):
    a = _arrays(p)
    n_layers = sum(1 for k in a if k.startswith("W_"))
    weights = [a[f"W_{l}"] for l in range(1, n_layers + 1)]
    biases = [a[f"bias_{l}"] for l in range(n_layers + 1)]
    if family == "rbm":
        return BinaryRBM(weights[0], biases[0], biases[1], data_mean=data_mean)
    return DBM(weights, biases, data_mean=data_mean)


#: Units enumerated per data row for a deep model's exact ``log f(v)`` (its even hidden layers) when
#: monitoring: every logged iteration evaluates every training row, so this stays small
MAX_LOG_F_UNITS = 12


def _layered_exact(p, max_units):
    """``(log Z, log f)`` of the layered model when enumerable (else ``None``): ``log Z`` over at most
    ``max_units`` units, ``log f(v)`` per row over at most ``min(max_units, MAX_LOG_F_UNITS)``."""
    dbm = _layered_model(p)
    view = dbm.as_rbm()
    if min(view.n_visible, view.n_hidden) > max_units or \
            view.n_visible - dbm.n_visible > min(max_units, MAX_LOG_F_UNITS):
        return None
    return dbm.exact_log_z(), dbm.exact_log_f


def _grbm_exact(p, max_units):
    """``(log Z, log f)`` of a GRBM (:class:`~logzbench.models.grbm.GaussianBernoulliRBM`: ``log Z`` by
    enumerating ``h``, ``log f`` in closed form) when it has at most ``max_units`` hidden units."""
    if p["W"].shape[1] > max_units:
        return None
    model = _build_grbm({k: t.detach().double() for k, t in p.items()})
    return model.exact_log_z(), model.exact_log_f


@dataclass(frozen=True)
class EnergyFamily:
    """An energy-based model family as the variational learners see it.

    Attributes
    ----------
    name : str
    visible : {"binary", "real"}
    n_layers : tuple of (int, int or None)
        Allowed number of hidden layers ``(min, max)``.
    energy : callable
        ``energy(params, v, hs) -> (n,)``: the only thing AVIL needs (differentiable in ``params``).
    init : callable
        ``init(n_visible, hidden_sizes, data, generator, init_scale, options) -> (params, buffers)``
        (float64 CPU tensors; ``params`` are trained, ``buffers`` are fixed).
    build : callable
        ``build(params, data_mean) -> model`` (the project's model object, or an arrays dict).
    free_energy : callable, optional
        ``free_energy(params, v) -> (n,)`` when tractable (NVIL needs it).
    exact : callable, optional
        ``exact(params, max_units) -> (log_z, log_f) or None``: exact monitoring when enumerable.
    """

    name: str
    visible: str
    n_layers: tuple
    energy: Callable
    init: Callable
    build: Callable
    free_energy: Callable | None = None
    exact: Callable | None = None


def _build_grbm(p, data_mean=None):
    """A :class:`~logzbench.models.grbm.GaussianBernoulliRBM` of the parameters ``{W, b, c, sigma}``."""
    from ..models.grbm import GaussianBernoulliRBM

    return GaussianBernoulliRBM.from_arrays(_arrays(p), source="trained GRBM")


FAMILIES: dict[str, EnergyFamily] = {
    "rbm": EnergyFamily("rbm", "binary", (1, 1), layered_energy, _init_layered,
                        lambda p, m=None: _layered_model(p, m, "rbm"), layered_free_energy, _layered_exact),
    "dbm": EnergyFamily("dbm", "binary", (1, None), layered_energy, _init_layered,
                        lambda p, m=None: _layered_model(p, m, "dbm"), None, _layered_exact),
    "grbm": EnergyFamily("grbm", "real", (1, 1), grbm_energy, _init_grbm, _build_grbm, grbm_free_energy,
                         _grbm_exact),
}


def get_family(name: str) -> EnergyFamily:
    """The :class:`EnergyFamily` named ``name`` (case-insensitive); ValueError naming the choices."""
    key = str(name).lower()
    if key not in FAMILIES:
        raise ValueError(f"unknown family {name!r} for the variational learners; choose one of {sorted(FAMILIES)}")
    return FAMILIES[key]


class EnergyModel(nn.Module):
    """The MRF's parameters (``requires_grad``) and its energy ``E(v, hs)``.

    Parameters
    ----------
    family : str or EnergyFamily
    params : mapping of str to tensor
        Trained parameters (copied into ``nn.Parameter``).
    buffers : mapping of str to tensor, optional
        Fixed parameters (e.g. the GRBM's ``sigma``).
    """

    def __init__(self, family, params: Mapping[str, torch.Tensor], buffers: Mapping[str, torch.Tensor] | None = None):
        super().__init__()
        self.family = family if isinstance(family, EnergyFamily) else get_family(family)
        self.params = nn.ParameterDict({k: nn.Parameter(torch.as_tensor(t).clone()) for k, t in params.items()})
        self._buffer_names = tuple(buffers or ())
        for k, t in (buffers or {}).items():
            self.register_buffer(k, torch.as_tensor(t).clone())

    def tensors(self, dtype=None) -> dict[str, torch.Tensor]:
        """Parameters and buffers by name (cast to ``dtype`` when given)."""
        out = {k: p for k, p in self.params.items()}
        out.update({k: getattr(self, k) for k in self._buffer_names})
        return out if dtype is None else {k: t.to(dtype) for k, t in out.items()}

    def forward(self, v: torch.Tensor, hs: Sequence[torch.Tensor]) -> torch.Tensor:
        """``E(v, hs)``, shape ``(n,)``, in ``v``'s dtype."""
        return self.family.energy(self.tensors(v.dtype), v, [h.to(v.dtype) for h in hs])

    def free_energy(self, v: torch.Tensor) -> torch.Tensor:
        """``F(v)`` when the family's free energy is tractable, shape ``(n,)``."""
        if self.family.free_energy is None:
            raise ValueError(f"family {self.family.name!r} has no tractable free energy")
        return self.family.free_energy(self.tensors(v.dtype), v)

    def to_model(self, data_mean=None):
        """The project's model object (``BinaryRBM``, ``DBM``; the GRBM's arrays dict)."""
        return self.family.build(self.tensors(), data_mean)

    @torch.no_grad()
    def exact(self, max_units: int):
        """``(log Z, log_f)`` (``log_f(v) -> (n,)`` float64) when enumerable with at most ``max_units``
        units per enumerated layer, else ``None``."""
        if self.family.exact is None or max_units < 1:
            return None
        return self.family.exact({k: t.detach() for k, t in self.tensors().items()}, max_units)

    def check_finite(self, where: str) -> None:
        """:class:`~logzbench.training.trainer.TrainingDivergedError` naming a parameter that is NaN, infinite
        or larger than :data:`DIVERGED_ABS` in magnitude."""
        _check_params_finite({k: p.detach() for k, p in self.params.items()}, where, limit=DIVERGED_ABS,
                             remedy="lower the learning rate (lr)")


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
def free_energy_bound(energy: Callable, encoder: Encoder, v: torch.Tensor, generator: torch.Generator,
                      n_samples: int = 1, entropy: bool = True) -> MCEstimate:
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
def decoder_bounds(energy: Callable, decoder: Decoder, n_samples: int, generator: torch.Generator,
                   chunk: int = 1 << 14) -> DecoderBounds:
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


# ---------------------------------------------------------------------------- training helpers
# ABLATIONS and their aliases: logzbench.training.learner_options (with every learner hyperparameter's rule)


def check_ablation(ablation) -> str | None:
    """``None`` or one of :data:`ABLATIONS` (``"no_H(Q)"`` / ``"no_H(q)"`` accepted too)."""
    if ablation is None:
        return None
    name = ABLATION_ALIASES.get(str(ablation), str(ablation))
    if name not in ABLATIONS:
        raise ValueError(f"unknown ablation {ablation!r}; choose None, {ABLATIONS[0]!r} (no H(Q)) or "
                         f"{ABLATIONS[1]!r} (no H(q))")
    return name


class Setup(NamedTuple):
    """What every variational learner starts from (see :func:`setup`)."""

    family: EnergyFamily
    device: torch.device
    train: torch.Tensor
    valid: torch.Tensor | None
    hidden_sizes: list
    mlp_hidden: int
    relax: Relaxation
    init_gen: torch.Generator
    gen: torch.Generator
    eval_gen: torch.Generator
    energy: EnergyModel
    batches: "Batches"
    monitor: torch.Tensor
    exact: "ExactMonitor"
    ais: "AISMonitor"
    best: "BestSnapshot"
    data_mean: np.ndarray | None

    def observe(self, history: "History", it: int, row: dict) -> None:
        """Complete a logged ``row`` of iteration ``it`` with the exact (:class:`ExactMonitor`) and AIS
        (:class:`AISMonitor`) values, offer it to the selection (:class:`BestSnapshot`), and add it to
        ``history``.  A learner's own value that is NaN or infinite (its bounds: not a standard error,
        nor a ``valid_`` or ``exact_`` value, which are NaN where there is none) means the training
        diverged: :class:`~logzbench.training.trainer.TrainingDivergedError` naming the iteration (the
        parameters can stay finite, e.g. ``|W| = 3e10`` after three steps at ``lr=1e10``)."""
        bad = next((k for k, v in row.items() if isinstance(v, float) and not math.isfinite(v)
                    and not k.startswith(("valid_", "exact_")) and not k.endswith("_stderr")), None)
        if bad is not None:
            where = f"by iteration {it}" if it else "before the first iteration"
            raise TrainingDivergedError(f"training diverged {where}: the logged {bad} is {row[bad]}; lower the "
                                        "learning rate (lr) or the initial weights (init_scale)")
        row.update(self.exact(self.energy))
        row.update(self.ais(it, self.energy))
        if it == 0 and self.best.select == "best-valid" and not math.isfinite(self.best.criterion(row)):
            # (before any training: the first logged row has the monitors' values or none)
            raise ValueError("select='best-valid' needs a validation log-likelihood during training: the model is "
                             f"not enumerable with exact_max_units={self.exact.max_units}; set ais_every (AIS on "
                             "the validation rows every that many iterations)")
        self.best.offer(it, row, self.energy)
        history.add(row)

    def finish(self, history: "History", state: Mapping[str, nn.Module], return_state: bool):
        """``(model, history)`` -- plus ``state`` (the trained modules and ``selected_iteration``) when
        ``return_state`` -- with the model's ``data_mean`` set to the training means (binary families).
        With ``select="best-valid"`` the model is the logged one of the best validation log-likelihood
        (the networks in ``state`` stay the last ones)."""
        selected = self.best.restore(self.energy)
        if selected is None:
            selected = int(history.rows["iteration"][-1]) if history.rows.get("iteration") else 0
        model = self.energy.to_model(self.data_mean)
        if not return_state:
            return model, history.result()
        return model, history.result(), {**dict(state), "selected_iteration": selected}


def setup(train, valid, *, family, hidden_sizes, iterations, batch_size, lr, betas, seed, device, log_every,
          temperature, straight_through, mlp_hidden, init_scale, exact_max_units, family_options=None,
          own: Mapping[str, Any] | None = None, ais_every: int = 0, ais_K: int = 1000, ais_chains: int = 100,
          ais_init: str | None = None, ais_is_samples: int = 100, select: str = "last") -> Setup:
    """Validate a learner's common arguments and build its data, generators and :class:`EnergyModel`.

    The trained parameters' initial values, the data order, the monitoring batch (``monitor``:
    ``batch_size`` training rows) and the networks' initial weights come from a CPU generator
    seeded by ``seed``; the sampling noise from a generator on
    ``device`` spawned from it, and the monitoring draws from a third one (so the monitoring
    never changes the trained model).  ``ais_*`` configure :class:`AISMonitor` (``ais_every=0``: off) and
    ``select`` the model returned (:class:`BestSnapshot`); ``own``: the learner's other hyperparameters
    (``K1``, ``aux_size``, ``z``, ...), checked with these by their rules
    (:func:`logzbench.training.learner_options.check_values`).

    Raises
    ------
    ValueError
        Naming the argument or data problem.
    """
    fam = get_family(family)
    # every value by its rule (logzbench.training.learner_options, also the workflow's config check)
    check_values({"iterations": iterations, "batch_size": batch_size, "seed": seed, "log_every": log_every,
                  "exact_max_units": exact_max_units, "ais_every": ais_every, "ais_K": ais_K, "ais_chains": ais_chains,
                  "ais_init": ais_init, "ais_is_samples": ais_is_samples, "select": select, "lr": lr, "betas": betas,
                  "temperature": temperature, "straight_through": straight_through, "init_scale": init_scale,
                  "mlp_hidden": mlp_hidden, **(own or {})})
    sizes = _check_hidden_sizes(hidden_sizes)
    lo, hi = fam.n_layers
    if len(sizes) < lo or (hi is not None and len(sizes) > hi):
        raise ValueError(f"family {fam.name!r} takes {lo if hi == lo else f'{lo} or more'} hidden layer(s); "
                         f"hidden_sizes={list(hidden_sizes)!r}")
    if mlp_hidden is None:
        mlp_hidden = max(1, sizes[0] // 2)
    dev = resolve_device(device)
    x_train = _as_data(train, "training", fam, dev)
    x_valid = None if valid is None else _as_data(valid, "validation", fam, dev, x_train.shape[1])
    init_gen = torch.Generator().manual_seed(int(seed))
    params, buffers = fam.init(x_train.shape[1], sizes, x_train, init_gen, init_scale, dict(family_options or {}))
    energy = EnergyModel(fam, {k: t.float() for k, t in params.items()},
                         {k: t.float() for k, t in buffers.items()}).to(dev)
    gen = make_generator(_spawn_seed(init_gen), dev)
    eval_gen = make_generator(_spawn_seed(init_gen), dev)
    batches = Batches(x_train, min(int(batch_size), x_train.shape[0]), init_gen)
    monitor = x_train[torch.randperm(x_train.shape[0], generator=init_gen)[:batches.batch_size].to(dev)]
    relax = Relaxation(float(temperature), bool(straight_through))
    data_mean = x_train.mean(0).cpu().numpy() if fam.visible == "binary" else None
    ais = AISMonitor(ais_every, ais_K, ais_chains, ais_init, ais_is_samples, int(seed), iterations, x_train, x_valid,
                     data_mean, fam)
    exact = ExactMonitor(x_train, monitor, x_valid, exact_max_units)
    best = BestSnapshot(select)
    if best.select == "best-valid" and x_valid is None:
        raise ValueError("select='best-valid' needs validation rows (the dataset has no validation split)")
    return Setup(fam, dev, x_train, x_valid, sizes, int(mlp_hidden), relax, init_gen, gen, eval_gen, energy, batches, monitor,
                 exact, ais, best, data_mean)


def _as_data(x, what: str, family: EnergyFamily, device, n_visible: int | None = None) -> torch.Tensor:
    """Training / validation rows as float32 on ``device``: 0/1 rows for a binary family, finite
    real rows otherwise (ValueError naming ``what`` and the problem)."""
    if family.visible == "binary":
        return _as_binary_data(x, what, device, n_visible)
    arr = np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{what} data has dtype {arr.dtype}; expected real numbers")
    if arr.ndim != 2 or 0 in arr.shape:
        raise ValueError(f"{what} data has shape {arr.shape}; expected a non-empty 2-D array (rows, features)")
    if n_visible is not None and arr.shape[1] != n_visible:
        raise ValueError(f"{what} data has {arr.shape[1]} columns; expected rows of {n_visible} values")
    if not np.isfinite(arr).all():
        raise ValueError(f"{what} data contains NaN or infinite values")
    return torch.as_tensor(arr, dtype=torch.float32, device=device)


class Batches:
    """Minibatches of ``batch_size`` rows, reshuffled every epoch with ``generator`` (CPU)."""

    def __init__(self, data: torch.Tensor, batch_size: int, generator: torch.Generator):
        self.data, self.batch_size, self.generator = data, batch_size, generator
        self._order, self._pos = None, 0

    def next(self) -> torch.Tensor:
        n = self.data.shape[0]
        if self._order is None or self._pos + self.batch_size > n:
            self._order = torch.randperm(n, generator=self.generator).to(self.data.device)
            self._pos = 0
        idx = self._order[self._pos:self._pos + self.batch_size]
        self._pos += self.batch_size
        return self.data[idx]


def adam(params, lr: float, betas) -> torch.optim.Adam:
    """Adam over ``params`` (the paper: lr 3e-4, betas (0.5, 0.999))."""
    return torch.optim.Adam(list(params), lr=float(lr), betas=tuple(float(b) for b in betas))


def step(optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """One optimizer step on ``loss``."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


class ExactMonitor:
    """Exact values for the history when the model is enumerable (NaN otherwise).

    ``__call__(energy)`` returns ``exact_log_z``, ``exact_free_energy`` (mean ``F(v)`` over the
    monitoring batch), ``exact_log_likelihood`` (mean over the training rows) and, with
    validation rows, ``valid_exact_log_likelihood``.
    """

    KEYS = ("exact_log_z", "exact_free_energy", "exact_log_likelihood", "valid_exact_log_likelihood")

    def __init__(self, train: torch.Tensor, batch: torch.Tensor, valid: torch.Tensor | None, max_units: int):
        self.train, self.batch, self.valid, self.max_units = train, batch, valid, int(max_units)

    def __call__(self, energy: EnergyModel) -> dict:
        out = dict.fromkeys(self.KEYS, math.nan)
        ex = energy.exact(self.max_units)
        if ex is None:
            return out
        log_z, log_f = ex
        out["exact_log_z"] = float(log_z)
        out["exact_free_energy"] = -float(log_f(self.batch).mean())
        out["exact_log_likelihood"] = float(log_f(self.train).mean()) - log_z
        if self.valid is not None:
            out["valid_exact_log_likelihood"] = float(log_f(self.valid).mean()) - log_z
        return out


class AISMonitor:
    """AIS on the model being trained, every ``every`` iterations and at the last (the paper's Fig. 5
    curves, and its selection of the model by the validation log-likelihood).

    ``__call__(it, energy)`` returns ``ais_log_z`` and ``ais_log_z_stderr`` (the project's AIS estimator,
    :func:`logzbench.api.estimate`, ``K`` intermediate distributions, ``chains`` chains, seed ``seed + it``,
    from ``init``: the data base rate for binary models, else the family's own) and
    ``valid_ais_log_likelihood`` (the mean validation log-likelihood with that ``log Z``; a DBM's
    ``log f(v)`` by importance sampling with ``is_samples`` samples); NaN where it does not run.
    """

    KEYS = ("ais_log_z", "ais_log_z_stderr", "valid_ais_log_likelihood")

    def __init__(self, every: int, K: int, chains: int, init: str | None, is_samples: int, seed: int,
                 iterations: int, train: torch.Tensor, valid: torch.Tensor | None, data_mean, family: EnergyFamily):
        self.every, self.K, self.chains, self.is_samples = int(every), int(K), int(chains), int(is_samples)
        self.seed, self.iterations = int(seed), int(iterations)
        self.train, self.valid, self.data_mean = train, valid, data_mean
        self.init = init if init is not None else ("base-rate" if family.visible == "binary" else "uniform")

    def due(self, it: int) -> bool:
        return bool(self.every) and (it % self.every == 0 or it == self.iterations)

    def __call__(self, it: int, energy: EnergyModel) -> dict:
        out = dict.fromkeys(self.KEYS, math.nan)
        if not self.due(it):
            return out
        from ..api import estimate  # (same layer: the estimators' one entry point)

        model = energy.to_model(self.data_mean)
        res = estimate(model, "ais", data=None if self.valid is None else self.valid.cpu().double().numpy(),
                       K=self.K, chains=self.chains, init=self.init, seed=self.seed + int(it),
                       is_samples=self.is_samples, device=str(self.train.device), threads=torch.get_num_threads())
        out["ais_log_z"], out["ais_log_z_stderr"] = float(res.log_z), float(res.log_z_stderr)
        if self.valid is not None and res.mean_log_likelihood is not None:
            out["valid_ais_log_likelihood"] = float(res.mean_log_likelihood)
        return out


def check_select(select) -> str:
    """One of :data:`SELECTIONS` (ValueError naming the choices otherwise)."""
    if select not in SELECTIONS:
        raise ValueError(f"unknown select {select!r}; choose one of {list(SELECTIONS)}")
    return str(select)


class BestSnapshot:
    """The model kept at the end of training: the last (``select="last"``) or the logged one with the
    best validation log-likelihood (``"best-valid"``, the paper's protocol for Tables 2-3): its exact
    value where the model is enumerable, else the AIS monitor's."""

    def __init__(self, select: str = "last"):
        self.select = select
        self.iteration: int | None = None
        self.value = -math.inf
        self.state: dict | None = None

    @staticmethod
    def criterion(row: Mapping[str, float]) -> float:
        for key in ("valid_exact_log_likelihood", "valid_ais_log_likelihood"):
            x = row.get(key, math.nan)
            if x is not None and math.isfinite(x):
                return float(x)
        return math.nan

    def offer(self, it: int, row: Mapping[str, float], energy: nn.Module) -> None:
        if self.select != "best-valid":
            return
        x = self.criterion(row)
        if math.isfinite(x) and x > self.value:
            self.iteration, self.value = int(it), x
            self.state = {k: t.detach().clone() for k, t in energy.state_dict().items()}

    def restore(self, energy: nn.Module) -> int | None:
        """Load the kept parameters into ``energy``; the iteration they are from (``None``: the last)."""
        if self.state is None:
            return None
        energy.load_state_dict(self.state)
        return self.iteration


class History:
    """A dict of equal-length lists, one row per logging step."""

    def __init__(self):
        self.rows: dict[str, list] = {}
        self._t0 = time.perf_counter()

    def add(self, row: Mapping[str, float]) -> None:
        row = {"seconds": time.perf_counter() - self._t0, **row}
        if self.rows and set(row) != set(self.rows):
            raise RuntimeError(f"history row keys changed: {sorted(set(row) ^ set(self.rows))}")
        for k, v in row.items():
            self.rows.setdefault(k, []).append(float(v) if not isinstance(v, int) else v)

    def result(self) -> dict[str, list]:
        return self.rows


def logged(it: int, iterations: int, log_every: int) -> bool:
    """Whether iteration ``it`` (0 = before training) is a logging step."""
    return it == 0 or it % log_every == 0 or it == iterations


# ---------------------------------------------------------------------------- samples for figures
def figure_samples(model, state: Mapping[str, nn.Module], n: int = 64, sweeps: int = 1000,
                   seed: int = 0) -> dict[str, np.ndarray]:
    """Visible means of the trained model and of its variational decoder, for figures (the paper's
    Figs. 4 and 6 show "the mean of v").

    Parameters
    ----------
    model : BinaryRBM, DBM or GaussianBernoulliRBM
        The trained model.
    state : mapping
        The learner's trained networks (``return_state=True``); its ``"decoder"``, when present, is
        sampled ancestrally.
    n : int
        Samples of each.
    sweeps : int
        Gibbs sweeps of the model's chains at ``beta = 1``, started from its annealing path's initial
        distribution (the paper: 100,000 burn-in sweeps).
    seed : int
        Seed of the draws.

    Returns
    -------
    dict
        ``model_mean_v`` (n, D) float64: ``E[v | h]`` of a final hidden draw (RBM, GRBM), or the chains'
        visible units (DBM); ``decoder_mean_v`` (n, D) float64, when there is a decoder: the mean of
        ``q(v | h_1)`` of ancestral draws ``z -> h -> ...``.
    """
    gen = torch.Generator(device=model.device).manual_seed(int(seed))
    out: dict[str, np.ndarray] = {}
    with torch.no_grad():
        decoder = state.get("decoder") if state else None
        if decoder is not None:
            draw = decoder.sample(int(n), gen, device=model.device)
            mean = decoder.vis(draw.hs[0])
            out["decoder_mean_v"] = (torch.sigmoid(mean) if decoder.visible == "binary" else mean).double().cpu().numpy()
        path = model.annealing_path("uniform")
        chains = path.sample_initial(int(n), gen)
        for _ in range(int(sweeps)):
            chains = path.transition(chains, 1.0, gen)
        v = chains.v[:, :model.n_visible]
        if hasattr(model, "mean_v_given_h"):  # GRBM
            mean = model.mean_v_given_h(model.sample_h_given_v(v, gen))
        elif hasattr(model, "layer_sizes"):  # DBM: the chains' visible units
            mean = v
        else:
            mean = model.prob_v_given_h(model.sample_h_given_v(v, gen))
        out["model_mean_v"] = mean.double().cpu().numpy()
    return out
