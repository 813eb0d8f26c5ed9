"""Binary deep Boltzmann machine with any number of hidden layers.

Layers ``0 (visible), 1, ..., L`` with biases ``b_0 = a, b_1, ..., b_L`` and weights
``W_l`` of shape ``(n_{l-1}, n_l)`` between consecutive layers; the joint unnormalised
density is (RAISE paper, Eq. 2)

    log f(v, h_1, ..., h_L) = sum_l b_l.h_l + sum_l h_{l-1}^T W_l h_l,   h_0 = v.

**The even/odd view.**  Layers only talk to their neighbours, so the units split into the
*even* layers (``v, h_2, h_4, ...``) and the *odd* layers (``h_1, h_3, ...``), and the DBM is a
binary RBM between those two sets (with zero blocks in its weight matrix when ``L >= 3``;
for ``L = 2`` the matrix ``[W_1; W_2^T]`` is dense).  :meth:`DBM.as_rbm` builds that RBM:
its "visible" vector is ``x = [v, h_2, h_4, ...]`` and its "hidden" vector is
``[h_1, h_3, ...]``.  Everything that sums the odd layers out analytically — AIS on ``x``, the
Gibbs sweep odd | even -> even | odd, the importance-sampling estimate of ``f(v)`` with
``h_1`` summed out (RAISE Sec. 5.2), exact enumeration — is then the RBM code applied to the
view, and the DBM only adds what is specific to it: the mean-field approximation, the
data-base-rate initial distribution on ``v`` alone, and transitions that keep ``v`` fixed
(RAISE Alg. 3).

Parameters are float32 on the model's device; log-densities are float64.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import ModelFileError
from ..kernels import bernoulli, bernoulli_from_logits, bernoulli_from_logits_
from . import enumeration
from ._arrays import checked_arrays, errors_named, file_arrays
from ._importance import PROPOSAL_CLIP, LogFEstimate, clip_logits, importance_log_f
from ._random import normal, resolve_generator
from .mixture import MixtureGibbsPath, ProductMixture
from .rbm import BinaryRBM, RBMAnnealingPath, RBMState, VisibleRows, as_float64, as_param, validate_rbm_arrays

#: Exact log f(v) enumerates the even hidden layers; refuse above 2^MAX_EXACT_BITS states.
MAX_EXACT_BITS = 26


def validate_dbm_arrays(weights, biases, data_mean=None, source: str = "DBM") -> None:
    """Refuse inconsistent shapes, NaN/inf and overflowing parameters, naming the array."""
    if len(weights) < 1:
        raise ModelFileError(f"{source}: a DBM needs at least one weight matrix W_1")
    if len(biases) != len(weights) + 1:
        raise ModelFileError(
            f"{source}: {len(weights)} weight matrices need {len(weights) + 1} bias vectors "
            f"bias_0..bias_{len(weights)}, got {len(biases)}"
        )
    for l, W in enumerate(weights, start=1):
        # each consecutive pair of layers is an RBM: reuse its shape / NaN / inf / overflow checks
        validate_rbm_arrays(
            np.asarray(W),
            np.asarray(biases[l - 1]),
            np.asarray(biases[l]),
            data_mean if l == 1 else None,
            source=f"{source} (layers {l - 1}-{l}: W_{l}, bias_{l - 1}, bias_{l})",
        )


class DBM(VisibleRows):
    """A binary deep Boltzmann machine.

    Parameters
    ----------
    weights : sequence of array-like
        ``[W_1, ..., W_L]``, ``W_l`` of shape ``(n_{l-1}, n_l)``.
    biases : sequence of array-like
        ``[b_0, ..., b_L]``, ``b_0`` the visible biases.
    device : str or torch.device, optional
    data_mean : array-like, shape (n_visible,), optional
        Training-data pixel means, for the data-base-rate initial distribution.

    Attributes
    ----------
    weights, biases : list of torch.Tensor (float32)
    layer_sizes : tuple of int
        ``(n_0, ..., n_L)``.
    """

    family = "dbm"

    def __init__(self, weights, biases, device=None, data_mean=None):
        device = torch.device(device) if device is not None else torch.device("cpu")
        validate_dbm_arrays([as_float64(W) for W in weights], [as_float64(b) for b in biases], as_float64(data_mean))
        self.weights = [as_param(W, device) for W in weights]
        self.biases = [as_param(b, device) for b in biases]
        self.data_mean = None if data_mean is None else as_param(data_mean, device)
        self._view: BinaryRBM | None = None

    # ------------------------------------------------------------------ basics
    @property
    def layer_sizes(self) -> tuple[int, ...]:
        return tuple(int(b.shape[0]) for b in self.biases)

    @property
    def n_visible(self) -> int:
        return self.layer_sizes[0]

    @property
    def n_layers(self) -> int:
        """Number of hidden layers ``L``."""
        return len(self.weights)

    @property
    def device(self) -> torch.device:
        return self.weights[0].device

    @property
    def even_layers(self) -> list[int]:
        return list(range(0, self.n_layers + 1, 2))

    @property
    def odd_layers(self) -> list[int]:
        return list(range(1, self.n_layers + 1, 2))

    def to(self, device) -> "DBM":
        return DBM(
            [W.to(device) for W in self.weights],
            [b.to(device) for b in self.biases],
            device=device,
            data_mean=None if self.data_mean is None else self.data_mean.to(device),
        )

    @classmethod
    def random(
        cls,
        layer_sizes,
        scale: float = 0.01,
        bias_scale: float = 0.0,
        generator: torch.Generator | None = None,
        device=None,
    ) -> "DBM":
        """Random weights ``N(0, scale^2)`` and biases ``N(0, bias_scale^2)`` (tests, initialisation)."""
        g = resolve_generator(generator)
        sizes = [int(n) for n in layer_sizes]
        Ws = [normal(g, sizes[l], sizes[l + 1], scale=scale) for l in range(len(sizes) - 1)]
        bs = [normal(g, n, scale=bias_scale) for n in sizes]
        return cls(Ws, bs, device=device)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The model-file arrays: ``W_1..W_L``, ``bias_0..bias_L`` and optional ``data_mean``."""
        weights = {f"W_{l}": W for l, W in enumerate(self.weights, start=1)}
        return file_arrays({**weights, **{f"bias_{l}": b for l, b in enumerate(self.biases)}}, self.data_mean)

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], source: str = "model", device=None) -> "DBM":
        """A model from :meth:`to_arrays` output (e.g. an ``.npz`` file's contents): ``W_1 .. W_L``,
        ``bias_0 .. bias_L``; optional ``data_mean`` and ``model_type`` (``"dbm"``).  ``source`` and
        ``device`` as in :meth:`~logzbench.models._arrays.ParameterFile.from_arrays`; a
        :class:`~logzbench.errors.ModelFileError` names ``source`` and the problem: no ``W_1``, missing,
        unexpected or non-real arrays, inconsistent shapes, NaN / inf, overflowing parameters."""
        n_layers = 0
        while f"W_{n_layers + 1}" in arrays:
            n_layers += 1
        if n_layers == 0:
            raise ModelFileError(
                f"{source}: a dbm file needs weight arrays W_1, ..., W_L and biases bias_0, ..., "
                f"bias_L (found {sorted(k for k in arrays if k != 'model_type')})"
            )
        required = (*(f"W_{l}" for l in range(1, n_layers + 1)), *(f"bias_{l}" for l in range(n_layers + 1)))
        a = checked_arrays(arrays, cls.family, required, ("data_mean",), source)
        with errors_named(source):
            return cls(
                [a[f"W_{l}"] for l in range(1, n_layers + 1)],
                [a[f"bias_{l}"] for l in range(n_layers + 1)],
                device=device,
                data_mean=a.get("data_mean"),
            )

    # ------------------------------------------------------------------ even/odd view
    def as_rbm(self) -> BinaryRBM:
        """The bipartite RBM between the even layers (its visible units, ``v`` first) and the odd layers."""
        if self._view is None:
            even, odd = self.even_layers, self.odd_layers
            sizes = self.layer_sizes
            W = torch.zeros(sum(sizes[l] for l in even), sum(sizes[l] for l in odd), device=self.device)
            row = {l: sum(sizes[m] for m in even if m < l) for l in even}
            col = {l: sum(sizes[m] for m in odd if m < l) for l in odd}
            for l in range(1, self.n_layers + 1):  # W_l joins layers l-1 and l
                Wl = self.weights[l - 1]
                if l % 2:  # l-1 even, l odd
                    W[row[l - 1] : row[l - 1] + sizes[l - 1], col[l] : col[l] + sizes[l]] = Wl
                else:  # l-1 odd, l even
                    W[row[l] : row[l] + sizes[l], col[l - 1] : col[l - 1] + sizes[l - 1]] = Wl.T
            self._view = BinaryRBM(
                W,
                torch.cat([self.biases[l] for l in even]),
                torch.cat([self.biases[l] for l in odd]),
                device=self.device,
            )
        return self._view

    def _split_even(self, x: torch.Tensor) -> list[torch.Tensor]:
        sizes = [self.layer_sizes[l] for l in self.even_layers]
        return list(torch.split(x, sizes, dim=1))

    # ------------------------------------------------------------------ densities
    def log_unnormalized_joint(self, layers) -> torch.Tensor:
        """``log f(v, h_1, ..., h_L)`` for a list of layer states (rows), float64, shape ``(n,)``."""
        if len(layers) != self.n_layers + 1:
            raise ValueError(f"expected {self.n_layers + 1} layer states, got {len(layers)}")
        xs = [torch.as_tensor(s, device=self.device).double() for s in layers]
        out = sum(x @ b.double() for x, b in zip(xs, self.biases))
        for l, W in enumerate(self.weights, start=1):
            out = out + ((xs[l - 1] @ W.double()) * xs[l]).sum(1)
        return out

    def log_unnormalized_even(self, x) -> torch.Tensor:
        """``log f(v, h_2, h_4, ...)`` with the odd layers summed out; ``x`` rows ``[v, h_2, ...]``."""
        return self.as_rbm().log_unnormalized_marginal(x)

    def mean_field(self, v, n_iter: int = 100, tol: float = 1e-7) -> list[torch.Tensor]:
        """Mean-field posterior ``q(h | v) = prod Bernoulli(mu)`` (Salakhutdinov & Hinton 2009).

        Block coordinate ascent on the variational lower bound: all odd layers, then all even
        hidden layers (each block's units are conditionally independent, so each update is the
        exact maximiser given the other block).  The even hidden layers start at 1/2.

        Returns
        -------
        list of torch.Tensor
            ``[mu_1, ..., mu_L]``, float64, each of shape ``(n, n_l)``.
        """
        v = self._as_input(v).double()
        view = self.as_rbm()
        W, b_odd, b_even = view.W.double(), view.hidden_bias.double(), view.visible_bias.double()
        nv = self.n_visible
        # initialise the even hidden layers at 1/2
        x = torch.cat([v, torch.full((v.shape[0], W.shape[0] - nv), 0.5, dtype=torch.float64, device=v.device)], 1)
        y = torch.sigmoid(x @ W + b_odd)
        for _ in range(n_iter):
            if W.shape[0] == nv:
                break
            rest = torch.sigmoid(y @ W[nv:].T + b_even[nv:])
            x = torch.cat([v, rest], 1)
            y_new = torch.sigmoid(x @ W + b_odd)
            delta = float((y_new - y).abs().max())
            y = y_new
            if delta < tol:
                break
        return self._layers_from_view(x, y)[1:]

    def _layers_from_view(self, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
        evens = self._split_even(x)
        odds = list(torch.split(y, [self.layer_sizes[l] for l in self.odd_layers], dim=1))
        out = []
        for l in range(self.n_layers + 1):
            out.append(evens[l // 2] if l % 2 == 0 else odds[l // 2])
        return out

    def mean_field_bound(self, v, mu=None) -> torch.Tensor:
        """Variational lower bound ``E_q[log f(v, h)] + H(q) <= log f(v)``, float64, shape ``(n,)``."""
        v = self._as_input(v).double()
        mu = self.mean_field(v) if mu is None else mu
        bound = self.log_unnormalized_joint([v, *mu])  # bilinear: E_q[log f] is log f at the means
        for m in mu:
            m = m.clamp(1e-300, 1.0)
            m1 = (1.0 - m).clamp(1e-300, 1.0)
            bound = bound - (m * torch.log(m) + m1 * torch.log(m1)).sum(1)
        return bound

    def importance_log_f(
        self, v, n_samples: int, generator: torch.Generator, clip: float = PROPOSAL_CLIP, mu=None
    ) -> LogFEstimate:
        """Importance-sampling estimate of ``log f(v)`` (RAISE Sec. 5.2).

        The odd layers (``h_1``, ...) are summed out analytically; the even hidden layers
        (``h_2``, ...) are drawn from the mean-field distribution with its probabilities kept
        in ``[clip, 1 - clip]`` (see :mod:`logzbench.models._importance`), so
        ``f̂(v) = mean_s f(v, h_2^s) / q(h_2^s | v)`` is unbiased for ``f(v)`` and ``log f̂(v)``
        is a stochastic lower bound on ``log f(v)``.

        Returns
        -------
        LogFEstimate
            ``(log_f, stderr, ess)``, each float64 of shape ``(n,)``; exact (stderr 0) for a
            one-layer DBM.
        """
        v = self._as_input(v)
        view = self.as_rbm()
        nv, n = self.n_visible, v.shape[0]
        if int(n_samples) < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}")
        if view.n_visible == nv:  # no even hidden layer: f(v) is exact
            zero = torch.zeros(n, dtype=torch.float64, device=v.device)
            return LogFEstimate(view.log_unnormalized_marginal(v), zero, zero + int(n_samples), zero + float("nan"))
        mu = self.mean_field(v) if mu is None else mu  # pass it in to share it with mean_field_bound
        mu = torch.cat([m for l, m in enumerate(mu, start=1) if l % 2 == 0], 1)
        logits = clip_logits(torch.log(mu) - torch.log1p(-mu), clip)
        return importance_log_f(
            v, logits, n_samples, generator, lambda vi, h: view.log_unnormalized_marginal(torch.cat([vi, h], 1))
        )

    def exact_log_f(self, v, chunk: int = 1 << 14) -> torch.Tensor:
        """``log f(v)`` by enumerating the even hidden layers (odd ones summed out), float64."""
        v = self._as_input(v)
        view = self.as_rbm()
        nv, n_rest = self.n_visible, view.n_visible - self.n_visible
        if n_rest == 0:
            return view.log_unnormalized_marginal(v)
        if n_rest > MAX_EXACT_BITS:
            raise ValueError(
                f"exact log f(v) needs 2^{n_rest} states of the even hidden layers; refusing above 2^{MAX_EXACT_BITS}"
            )
        total = 1 << n_rest
        W, b_odd, b_even = view.W.double(), view.hidden_bias.double(), view.visible_bias.double()
        vd = v.double()
        n_odd = W.shape[1]
        c = min(total, chunk)
        rows = max(1, (1 << 22) // (c * n_odd))  # keep (rows, c, n_odd) float64 blocks near 32 MB
        out = []
        for r in range(0, vd.shape[0], rows):
            vr = vd[r : r + rows]
            base_pre = vr @ W[:nv] + b_odd  # (rows, n_odd)
            parts = []
            for start in range(0, total, c):
                s = enumeration.state_bits(start, min(start + c, total), n_rest, v.device, torch.float64)  # (c, n_rest)
                pre = base_pre.unsqueeze(1) + (s @ W[nv:]).unsqueeze(0)  # (rows, c, n_odd)
                parts.append(torch.logsumexp(F.softplus(pre).sum(-1) + (s @ b_even[nv:]).unsqueeze(0), dim=1))
            out.append(vr @ b_even[:nv] + torch.logsumexp(torch.stack(parts, 1), dim=1))
        return torch.cat(out)

    def exact_log_z(self, **kw) -> float:
        """``log Z`` by enumerating the smaller side of the even/odd view."""
        return enumeration.exact_log_z(self.as_rbm(), **kw)

    # ------------------------------------------------------------------ annealing
    def annealing_path(self, init: str = "uniform", data=None, reference=None):
        """Geometric path from a factorial ``p_0`` to this DBM, on ``x = [v, h_2, ...]`` with odd layers summed out.

        ``p_0`` is uniform on every hidden unit; on ``v`` it is uniform (``init="uniform"``) or
        the data base rate (``init="base-rate"``; RAISE Sec. 5, Salakhutdinov & Murray 2008).
        ``"mixture"``: the augmented path from ``reference`` (a
        :class:`~logzbench.models.mixture.ProductMixture` over ``v``, else one fitted to ``data``), the even
        hidden layers uniform in every component (:class:`MixtureDBMPath`).
        """
        view = self.as_rbm()
        if init == "mixture":
            from .mixture import mixture_reference

            mix = mixture_reference(reference, data, self._as_input)
            return MixtureDBMPath.build(view, mix, self.n_visible)
        a0 = torch.zeros(view.n_visible, device=self.device)
        if init == "base-rate":
            a0[: self.n_visible] = self.base_rate_bias(data)
        elif init != "uniform":
            raise ValueError(f"unknown initial distribution {init!r}; choose 'uniform', 'base-rate' or 'mixture'")
        return DBMAnnealingPath(view, a0, self.n_visible)


class DBMAnnealingPath(RBMAnnealingPath):
    """The even/odd view's RBM path, plus the operators RAISE Alg. 3 needs for a DBM.

    ``p_0`` is factorial with the hidden units uniform, so ``p_0(h | v)`` is uniform and
    ``p_0(v) = prod_i Bernoulli(v_i; sigmoid(a0_i))``.  :meth:`transition_given_visible`
    resamples the odd layers and then the even hidden layers at ``beta``, keeping ``v``: a
    Gibbs sweep on ``p_beta(h | v)`` (with the odd layers summed out it is a data-augmentation
    kernel, hence reversible).
    """

    def __init__(self, view: BinaryRBM, visible_bias_0: torch.Tensor, n_clamped: int):
        super().__init__(view, visible_bias_0)
        self.n_clamped = int(n_clamped)

    def log_p0_visible(self, v: torch.Tensor) -> torch.Tensor:
        """``log p_0(v)``, float64, shape ``(n,)``."""
        a0 = self.a0[: self.n_clamped].double()
        return v.double() @ a0 - F.softplus(a0).sum()

    def sample_initial_given_visible(self, v: torch.Tensor, generator: torch.Generator) -> RBMState:
        """State ``[v, h_2, ...]`` with the even hidden layers drawn from ``p_0(h | v)`` (uniform)."""
        v = v.to(torch.float32)
        rest = self.rbm.n_visible - self.n_clamped
        h = bernoulli(torch.full((v.shape[0], rest), 0.5, device=v.device), generator)
        return self._state(torch.cat([v[:, : self.n_clamped], h], 1))

    def transition_given_visible(self, state: RBMState, beta: float, generator: torch.Generator) -> RBMState:
        """One Gibbs sweep at ``beta`` over every layer except ``v``."""
        nv, rbm = self.n_clamped, self.rbm
        if rbm.n_visible == nv:  # one hidden layer: summed out, nothing left to move
            return state
        h = bernoulli_from_logits(state.pre_h, generator, scale=beta)
        bias = (1.0 - beta) * self.a0[nv:] + beta * rbm.visible_bias[nv:]
        rest = bernoulli_from_logits_(torch.addmm(bias, h, rbm.W[nv:].T, beta=1.0, alpha=beta), generator)
        return self._state(torch.cat([state.v[:, :nv], rest], 1))


class MixtureDBMPath(MixtureGibbsPath):
    """The augmented mixture path (:mod:`logzbench.models.mixture`) of a DBM's even/odd view: the mixture
    is over ``v`` and uniform on the even hidden layers in every component, so ``log Z_0 = (odd units)
    log 2 - log C``.  With ``v`` fixed the mixture factor is a constant, so the heating phase of RAISE
    (Alg. 3) uses the plain path's operators on the hidden layers, and ``p_0(v) = q(v)``."""

    @classmethod
    def build(cls, view: BinaryRBM, mixture, n_visible: int) -> "MixtureDBMPath":
        if not mixture.binary or mixture.n_sites != n_visible:
            raise ValueError(
                f"the mixture reference has {mixture.n_sites} sites of {mixture.n_states} states; this DBM has "
                f"{n_visible} binary visible units"
            )
        C, rest = mixture.n_components, view.n_visible - n_visible
        uniform = torch.full((C, rest, 2), -float(np.log(2.0)), dtype=torch.float64, device=mixture.device)
        wide = ProductMixture(mixture.log_weights, torch.cat([mixture.log_p, uniform], 1), True)
        base = DBMAnnealingPath(view, torch.zeros(view.n_visible, device=view.device), n_visible)
        path = cls(base, wide, view.W.T, view.visible_bias, bernoulli_from_logits_, view.n_hidden)
        path.visible_mixture = mixture.to(view.device)
        return path

    def log_p0_visible(self, v: torch.Tensor) -> torch.Tensor:
        """``log p_0(v) = log q(v)``, float64 ``(n,)``."""
        return self.visible_mixture.log_prob(v[:, : self.base.n_clamped])

    def sample_initial_given_visible(self, v: torch.Tensor, generator: torch.Generator):
        return self._wrap(self.base.sample_initial_given_visible(v, generator))

    def transition_given_visible(self, state, beta: float, generator: torch.Generator):
        return self._wrap(self.base.transition_given_visible(state.base, beta, generator))
