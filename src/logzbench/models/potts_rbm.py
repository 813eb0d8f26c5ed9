"""Potts RBM: categorical visible units (``L`` sites, ``q`` states each), binary hidden units.

With ``v`` a row of states ``0..q-1`` (one-hot ``V`` of shape ``(L, q)`` internally),

    f(v, h) = exp(sum_i a_{i, v_i} + b.h + sum_i W_{i, v_i} . h),

with ``W`` of shape ``(L, q, H)``, visible biases ``a`` ``(L, q)`` and hidden biases ``b`` ``(H,)``.
Summing ``h`` out,

    log f(v) = sum_i a_{i, v_i} + sum_j softplus(b_j + sum_i W_{i, v_i, j}),

and summing ``v`` out instead (each site independently given ``h``),

    log f(h) = b.h + sum_i logsumexp_a (a_{i a} + W_{i a} . h).

Everything in the hidden pre-activations is a product of the one-hot matrix ``(n, L q)`` with
``W`` reshaped to ``(L q, H)``, so the model reuses the binary RBM's machinery for the hidden layer
(the exact Bernoulli draws and the fused AIS increment of :mod:`logzbench.kernels`).  Parameters are
float32 tensors on the model's device; log-densities are float64.

Annealing path (as :class:`~logzbench.models.rbm.RBMAnnealingPath`)
--------------------------------------------------------------------

    f_beta(v, h) = exp((1 - beta) a0[v] + beta (a[v] + b.h + sum_i W_{i v_i} . h)),

``p_0`` = a factorised categorical with logits ``a0`` (uniform: zeros; base rate: ``log`` of the
smoothed site frequencies) times the uniform distribution on ``h``, so
``log Z_0 = H log 2 + sum_i logsumexp_a a0_{i a}``.  The transition is one block-Gibbs sweep
``v -> h -> v`` at ``beta`` (each site's softmax over ``q``), reversible with respect to ``p_beta(v)``.

Model files (``.npz``, ``model_type="potts-rbm"``): ``W`` ``(L, q, H)``, ``visible_bias`` ``(L, q)``,
``hidden_bias`` ``(H,)``, optional ``data_mean`` ``(L, q)`` (site frequencies of the training rows).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import ModelFileError
from ..kernels import bernoulli_from_logits, reweight_and_draw, softplus_diff_rows
from ._arrays import ParameterFile, as_float64
from ._random import bipartite, resolve_generator
from ._shape import Axis, DeviceOf
from .enumeration import MAX_ENUMERATION_BITS
from .potts import (
    ChunkedEnumeration,
    _check_data_mean,
    _initial_logits,
    as_states,
    categorical_from_logits,
    check_enumerable,
    states_range,
)

__all__ = ["PottsRBM", "PottsRBMAnnealingPath", "PottsRBMState", "exact_seconds"]

#: hidden (or visible) states per enumeration step
_STEP_STATES = 1 << 14
#: one-thread rates: multiply-adds per second, and exp/log (logsumexp, softplus) terms per second
_MATMUL_RATE = 5e9
_TRANSCENDENTAL_RATE = 1e8


class PottsRBM(ParameterFile, ChunkedEnumeration):
    """A Potts RBM (module docstring).

    Parameters
    ----------
    W : array-like, shape (L, q, H)
    visible_bias : array-like, shape (L, q)
    hidden_bias : array-like, shape (H,)
    device : str or torch.device, optional
    data_mean : array-like, shape (L, q), optional
        Site frequencies of the training rows (base-rate initial distribution).

    Attributes
    ----------
    W, visible_bias, hidden_bias : torch.Tensor (float32)
    n_visible, n_states, n_hidden : int
        ``L``, ``q`` and ``H``.
    """

    family = "potts-rbm"
    PARAMETERS = ("W", "visible_bias", "hidden_bias")
    _EXACT_WHAT = "exact enumeration of a Potts RBM"
    _EXACT_STEP = _STEP_STATES

    def __init__(self, W, visible_bias, hidden_bias, device=None, data_mean=None):
        device = torch.device(device) if device is not None else torch.device("cpu")
        W64, a64, b64, dm64 = as_float64(W), as_float64(visible_bias), as_float64(hidden_bias), as_float64(data_mean)
        validate_potts_rbm_arrays(W64, a64, b64, dm64)
        self.W = torch.as_tensor(W64, device=device).to(torch.float32).contiguous()
        self.visible_bias = torch.as_tensor(a64, device=device).to(torch.float32).contiguous()
        self.hidden_bias = torch.as_tensor(b64, device=device).to(torch.float32).contiguous()
        self.data_mean = None if dm64 is None else torch.as_tensor(dm64, device=device, dtype=torch.float64)

    # ------------------------------------------------------------------ basics
    n_visible = Axis("W", 0)
    n_states = Axis("W", 1)
    n_hidden = Axis("W", 2)
    device = DeviceOf("W")

    @property
    def W_flat(self) -> torch.Tensor:
        """``W`` as ``(L q, H)`` (a view): the weights of the one-hot visible matrix."""
        return self.W.view(-1, self.n_hidden)

    @classmethod
    def random(
        cls,
        n_sites: int,
        n_states: int,
        n_hidden: int,
        scale: float = 0.1,
        generator: torch.Generator | None = None,
        bias_scale: float = 0.0,
        device=None,
        seed: int | None = None,
    ) -> "PottsRBM":
        """Weights ``N(0, scale^2)``, biases ``N(0, bias_scale^2)`` (tests, initialisation); ``seed``
        stands for a generator seeded with it."""
        W, a, b = bipartite(resolve_generator(generator, seed), (n_sites, n_states), n_hidden, scale, bias_scale)
        return cls(W, a, b, device=device)

    def as_rows(self, v, what: str = "data") -> torch.Tensor:
        """Rows of states as int64 ``(n, L)`` on the model's device (checked)."""
        return as_states(v, self.n_visible, self.n_states, self.device, what)

    def one_hot(self, v: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
        """The one-hot matrix ``(n, L q)`` of int64 rows ``(n, L)``."""
        return F.one_hot(v, self.n_states).reshape(v.shape[0], -1).to(dtype)

    # ------------------------------------------------------------------ densities
    def log_unnormalized_marginal(self, v) -> torch.Tensor:
        """``log f(v) = sum_i a_{i v_i} + sum_j softplus(b_j + sum_i W_{i v_i j})``, float64 ``(n,)``."""
        V = self.one_hot(self.as_rows(v), torch.float64)
        pre = V @ self.W_flat.double() + self.hidden_bias.double()
        return V @ self.visible_bias.double().reshape(-1) + F.softplus(pre).sum(dim=1)

    def exact_log_f(self, v) -> torch.Tensor:
        """``log f(v)``: exact (the same as :meth:`log_unnormalized_marginal`)."""
        return self.log_unnormalized_marginal(v)

    def log_unnormalized_hidden_marginal(self, h) -> torch.Tensor:
        """``log f(h) = b.h + sum_i logsumexp_a (a_{i a} + W_{i a} . h)``, float64 ``(n,)``."""
        h = torch.as_tensor(h, device=self.device).double()
        pre = (h @ self.W_flat.double().T).reshape(h.shape[0], self.n_visible, self.n_states)
        return h @ self.hidden_bias.double() + torch.logsumexp(pre + self.visible_bias.double(), dim=2).sum(dim=1)

    def _enumeration(self) -> tuple[int, str]:
        """The ``2^H`` hidden states with the visible sites summed out
        (:meth:`log_unnormalized_hidden_marginal`), or the ``q^L`` visible states with ``h`` summed out when
        there are fewer of those (refused when both pass ``2^MAX_ENUMERATION_BITS``)."""
        L, q, H = self.n_visible, self.n_states, self.n_hidden
        hidden = _hidden_is_smaller(L, q, H)
        if hidden and H > MAX_ENUMERATION_BITS:
            raise ValueError(
                f"exact enumeration of this Potts RBM needs 2^{H} hidden states; refusing above "
                f"2^{MAX_ENUMERATION_BITS}. Use an estimator (ais, raise) instead."
            )
        if not hidden:
            check_enumerable(L, q, "Potts RBM")
        return (2**H, f"2^{H} hidden") if hidden else (q**L, f"{q}^{L} visible")

    def _enumerated_log_f(self, start: int, stop: int) -> torch.Tensor:
        """``log f`` of the enumerated states ``start .. stop - 1`` (:meth:`_enumeration`), float64."""
        L, q, H = self.n_visible, self.n_states, self.n_hidden
        if _hidden_is_smaller(L, q, H):
            return self.log_unnormalized_hidden_marginal(states_range(start, stop, H, 2, self.device).double())
        return self.log_unnormalized_marginal(states_range(start, stop, L, q, self.device))

    def _rounding_bound(self, n_total: int) -> float:
        """A-priori float64 error bound of :meth:`exact_log_z`: each state's term sums
        ``k = L q + H + L`` products and transcendentals of magnitude at most ``M`` (the sum of all
        ``|parameters|`` plus ``log q`` per site and ``log 2`` per hidden unit), each within a few ulps."""
        L, q, H = self.n_visible, self.n_states, self.n_hidden
        u = 2.0**-53
        k = L * q + H + L + 8
        mag = (
            float(
                self.W.double().abs().sum()
                + self.visible_bias.double().abs().sum()
                + self.hidden_bias.double().abs().sum()
            )
            + L * math.log(q)
            + H * math.log(2.0)
        )
        gamma = k * u / (1 - k * u)
        return gamma * mag * 4 + 8 * u * (mag + math.log(max(n_total, 2)) + 1.0)

    # ------------------------------------------------------------------ sampling
    def gibbs(self, v, generator: torch.Generator, n_sweeps: int = 1) -> torch.Tensor:
        """``n_sweeps`` block-Gibbs sweeps ``v -> h -> v`` of the model; returns the new int64 rows."""
        path = self.annealing_path("uniform")
        state = path.state_from_data(v)
        for _ in range(int(n_sweeps)):
            state = path.transition(state, 1.0, generator)
        return state.x

    # ------------------------------------------------------------------ annealing
    def annealing_path(self, init: str = "uniform", data=None, logits_0=None, reference=None):
        """The geometric path from ``init`` (``"uniform"`` or ``"base-rate"``: the site frequencies of
        ``data``, default ``data_mean``) to this model; ``logits_0`` ``(L, q)`` overrides the initial logits.
        ``"mixture"``: the augmented path from ``reference`` (a
        :class:`~logzbench.models.mixture.ProductMixture`, else one fitted to ``data``;
        :class:`~logzbench.models.mixture.MixtureGibbsPath`)."""
        if init == "mixture":
            from .mixture import MixtureGibbsPath, check_reference_shape, mixture_reference

            mix = mixture_reference(reference, data, lambda d: self.as_rows(d, "training data"))
            check_reference_shape(mix, self)
            base = PottsRBMAnnealingPath(self, torch.zeros(self.n_visible, self.n_states, device=self.device))
            L, q = self.n_visible, self.n_states

            def draw(pre_v, generator):
                return categorical_from_logits(pre_v.view(pre_v.shape[0], L, q), generator)

            return MixtureGibbsPath(base, mix, self.W_flat.T, self.visible_bias.reshape(-1), draw, self.n_hidden)
        return PottsRBMAnnealingPath(self, _initial_logits(self, init, data, logits_0))


def _hidden_is_smaller(L: int, q: int, H: int) -> bool:
    """Whether the ``2^H`` hidden states are no more than the ``q^L`` visible ones."""
    return H <= L * math.log2(q)


class PottsRBMState(NamedTuple):
    """Chain state on the Potts RBM path with the hidden layer summed out.

    ``x``: the visible states ``(n_chains, L)`` int64; ``v``: their one-hot matrix ``(n_chains, L q)``
    float32; ``pre_h``: the cached hidden pre-activations ``v W + b`` ``(n_chains, H)`` float32.
    """

    x: torch.Tensor
    v: torch.Tensor
    pre_h: torch.Tensor


class PottsRBMAnnealingPath:
    """Geometric path between a factorised categorical distribution and a :class:`PottsRBM` (module
    docstring); states are :class:`PottsRBMState`.

    Summing ``h`` out, ``log f_beta(v) = ((1 - beta) a0 + beta a)[v] + sum_j softplus(beta x_j)`` with
    ``x = b + sum_i W_{i v_i}``; the increment from ``beta`` to ``beta'`` is computed as a small number
    (:func:`logzbench.kernels.softplus_diff_rows` with the one-hot rows as the linear term's ``v``).
    """

    def __init__(self, model: PottsRBM, logits_0: torch.Tensor):
        self.model = model
        self.a0 = torch.as_tensor(logits_0, device=model.device, dtype=torch.float64)
        self._a0_flat = self.a0.reshape(-1).to(torch.float32)
        self._da32 = model.visible_bias.reshape(-1) - self._a0_flat  # a - a0, flat (L q,)
        self._a0_64 = self.a0.reshape(-1)
        self._da64 = model.visible_bias.double().reshape(-1) - self._a0_64

    def _state(self, x: torch.Tensor) -> PottsRBMState:
        v = self.model.one_hot(x)
        return PottsRBMState(x, v, torch.addmm(self.model.hidden_bias, v, self.model.W_flat))

    def state_from_data(self, data) -> PottsRBMState:
        return self._state(self.model.as_rows(data))

    def log_z0(self) -> float:
        return float(self.model.n_hidden * math.log(2.0) + torch.logsumexp(self.a0, dim=1).sum())

    def sample_initial(self, n_chains: int, generator: torch.Generator) -> PottsRBMState:
        """Exact draws from ``p_0`` (float64 inverse CDF of each site's ``softmax(a0_i)``)."""
        return self._state(categorical_from_logits(self.a0.expand(int(n_chains), -1, -1), generator))

    def log_f(self, state: PottsRBMState, beta: float) -> torch.Tensor:
        beta = float(beta)
        lin = state.v.double() @ (self._a0_64 + beta * self._da64)
        return lin + F.softplus(beta * state.pre_h.double()).sum(dim=1)

    def log_f_ratio(self, state: PottsRBMState, beta_from: float, beta_to: float) -> torch.Tensor:
        """``log f_{beta_to}(v) - log f_{beta_from}(v)`` as a small number (see
        :meth:`logzbench.models.rbm.RBMAnnealingPath.log_f_ratio`); float64 softplus differences on a
        coarse step."""
        inc = softplus_diff_rows(state.pre_h, beta_from, beta_to, v=state.v, dv=self._da32)
        return self._coarse_increment(state, beta_from, beta_to) if inc is None else inc

    def _coarse_increment(self, state: PottsRBMState, beta_from: float, beta_to: float) -> torch.Tensor:
        x64 = state.pre_h.double()
        lin = (float(beta_to) - float(beta_from)) * (state.v.double() @ self._da32.double())
        return lin + (F.softplus(beta_to * x64) - F.softplus(beta_from * x64)).sum(dim=1)

    def transition(self, state: PottsRBMState, beta: float, generator: torch.Generator) -> PottsRBMState:
        """One block-Gibbs sweep ``v -> h -> v`` at ``beta``: ``h ~ Bernoulli(sigmoid(beta x))`` from the
        cached pre-activations, then every site from its softmax over ``q``."""
        h = bernoulli_from_logits(state.pre_h, generator, scale=float(beta))
        return self._visible_move(h, float(beta), generator)

    def reweight_and_move(
        self, state: PottsRBMState, beta_from: float, beta_to: float, generator: torch.Generator
    ) -> tuple[torch.Tensor, PottsRBMState]:
        """``(log_f_ratio(state, beta_from, beta_to), transition(state, beta_to, generator))`` with the
        increment and the hidden draw in one pass (:func:`logzbench.kernels.reweight_and_draw`): an AIS step."""
        inc, h = reweight_and_draw(state.pre_h, beta_from, beta_to, generator, v=state.v, dv=self._da32)
        if inc is None:
            inc = self._coarse_increment(state, beta_from, beta_to)
        return inc, self._visible_move(h, float(beta_to), generator)

    def _visible_move(self, h: torch.Tensor, beta: float, generator: torch.Generator) -> PottsRBMState:
        """``v ~ p_beta(v | h)``: logits ``a0 + beta (a - a0) + beta W h`` per site, the new state."""
        m = self.model
        bias = torch.add(self._a0_flat, self._da32, alpha=beta)
        pre_v = torch.addmm(bias, h, m.W_flat.T, beta=1.0, alpha=beta)
        x = categorical_from_logits(pre_v.view(h.shape[0], m.n_visible, m.n_states), generator)
        return self._state(x)


def exact_seconds(model, n_rows: int, precision: str, device) -> tuple[float, str]:
    """One-thread seconds of :meth:`PottsRBM.exact_log_z` (the exact estimator's time estimate): the
    smaller layer's states, each a product with ``W`` and ``L q`` (hidden) or ``H`` (visible)
    exp/log terms; ``log f(v)`` of the test rows is a closed form."""
    L, q, H = model.n_visible, model.n_states, model.n_hidden
    if _hidden_is_smaller(L, q, H):
        if H > MAX_ENUMERATION_BITS:
            raise ValueError(
                f"exact enumeration of this Potts RBM needs 2^{H} hidden states; refusing above "
                f"2^{MAX_ENUMERATION_BITS}. Use an estimator (ais, raise) instead."
            )
        n = 2.0**H
        return n * (L * q * H / _MATMUL_RATE + L * q / _TRANSCENDENTAL_RATE), f"2^{H} hidden states"
    check_enumerable(L, q, "Potts RBM")
    n = float(q**L)
    return n * (L * q * H / _MATMUL_RATE + H / _TRANSCENDENTAL_RATE), f"{q}^{L} visible states"


def validate_potts_rbm_arrays(
    W: np.ndarray, visible_bias: np.ndarray, hidden_bias: np.ndarray, data_mean: np.ndarray | None = None
) -> None:
    """Refuse wrong shapes, NaN / inf and overflowing parameters (ModelFileError naming the array)."""
    if W.ndim != 3 or 0 in W.shape or W.shape[1] < 2:
        raise ModelFileError(f"'W' must be 3-D (sites x states x hidden, at least 2 states), got shape {W.shape}")
    L, q, H = W.shape
    if visible_bias.shape != (L, q):
        raise ModelFileError(f"'visible_bias' has shape {visible_bias.shape}, expected ({L}, {q}) to match W {W.shape}")
    if hidden_bias.shape != (H,):
        raise ModelFileError(f"'hidden_bias' has shape {hidden_bias.shape}, expected ({H},) to match W {W.shape}")
    for name, arr in (("W", W), ("visible_bias", visible_bias), ("hidden_bias", hidden_bias)):
        bad = ~np.isfinite(arr)
        if bad.any():
            raise ModelFileError(f"'{name}' contains NaN or inf ({int(bad.sum())} entries)")
    limit = 1e30
    reach = float(np.abs(W).max(axis=1).sum(axis=0).max() + np.abs(hidden_bias).max())
    if reach > limit or float(np.abs(W).max()) > 1e15:
        raise ModelFileError(
            f"parameters overflow (a hidden pre-activation can reach {reach:.3g}); the weights are not a usable model"
        )
    _check_data_mean(data_mean, L, q)
