"""The directed networks of the variational learners: the encoder ``Q(h | v)`` and the decoder ``q(z, h, v)``.

Both are stacks of small MLPs with Bernoulli (or, for a real ``v``, Gaussian) outputs.  The
decoder's auxiliary ``z`` is continuous (``N(0, I)``) or discrete (uniform bits, then ``q(v, h)``
can be enumerated: :func:`exact_decoder_entropy`).
"""

from __future__ import annotations

import copy
import math
from typing import NamedTuple, Sequence

import torch
from torch import nn

from ...models.enumeration import state_bits
from ..learner_options import Z_KINDS
from ..trainer import _check_real
from .distributions import (
    _LOG_2PI,
    Relaxation,
    bernoulli_entropy,
    bernoulli_log_prob,
    bernoulli_log_prob_table,
    gaussian_entropy,
    gaussian_log_prob,
    sample_bernoulli,
)

#: Largest number of states (log2) that exact monitoring enumerates.
MAX_EXACT_BITS = 26


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

    def __init__(
        self,
        n_visible: int,
        hidden_sizes: Sequence[int],
        aux_size: int,
        z: str = "continuous",
        visible: str = "binary",
        mlp_hidden: int = 25,
        generator: torch.Generator | None = None,
        visible_std: float | None = None,
    ):
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
        self.down = nn.ModuleList(
            MLP(self.hidden_sizes[l + 1], self.hidden_sizes[l], mlp_hidden, g)
            for l in range(len(self.hidden_sizes) - 1)
        )  # h_{l+1} -> h_l
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
    def sample(self, n: int, generator: torch.Generator, relax: Relaxation | None = None, device=None) -> DecoderSample:
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
        raise ValueError(
            f"exact decoder entropy needs 2^{n_h} hidden states and 2^{decoder.aux_size} values of z; "
            f"refusing above 2^{max_bits}"
        )
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
