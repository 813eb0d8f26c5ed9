"""Gaussian-Bernoulli restricted Boltzmann machine (GRBM): real visible units, binary hidden units.

The energy (Hinton & Salakhutdinov 2006; the AVIL paper, Sec. 5.1) with a fixed standard
deviation ``sigma > 0`` of the visible units is

    E(v, h) = ||v - b||^2 / (2 sigma^2) - c.h - (1 / sigma) v^T W h,      v in R^D, h in {0, 1}^H,

with ``W`` of shape ``(D, H)``.  Its conditionals are

    h_j | v ~ Bernoulli(sigmoid(c_j + (W^T v)_j / sigma)),      v | h ~ N(b + sigma W h, sigma^2 I),

and summing ``h`` out gives the unnormalised marginal (minus the free energy), exactly:

    log f(v) = -||v - b||^2 / (2 sigma^2) + sum_j softplus(c_j + (W^T v)_j / sigma).

**log Z.**  Integrating ``v`` out instead: with ``u = v - b`` and ``a = W h / sigma``,
``-||v - b||^2 / (2 sigma^2) + v^T W h / sigma = -||u||^2 / (2 sigma^2) + u.a + b^T W h / sigma``, and
``int exp(-||u||^2 / (2 sigma^2) + u.a) du = (2 pi sigma^2)^(D/2) exp(sigma^2 ||a||^2 / 2)``
(complete the square: ``u = sigma^2 a`` is the mode), so ``sigma^2 ||a||^2 / 2 = ||W h||^2 / 2`` and

    log Z = (D/2) log(2 pi sigma^2) + log sum_h exp(g(h)),
    g(h)  = e.h + ||W h||^2 / 2,      e = c + W^T b / sigma.

:meth:`GaussianBernoulliRBM.exact_log_z` enumerates the ``2^H`` hidden states in float64 (see
:meth:`GaussianBernoulliRBM._exact_sum`); there is no other exact route, since ``v`` is continuous.

**Annealing path** (:class:`GRBMAnnealingPath`, the AVIL paper's AIS baseline): the base
distribution at ``beta = 0`` is ``N(b, sigma^2 I) x uniform(h)``, ``log Z_0 = (D/2) log(2 pi sigma^2) +
H log 2``, and

    f_beta(v, h) = exp(-||v - b||^2 / (2 sigma^2) + beta (c.h + v^T W h / sigma)),
    log f_beta(v) = -||v - b||^2 / (2 sigma^2) + sum_j softplus(beta (c_j + (W^T v)_j / sigma)),

with the Gibbs sweep ``h ~ Bernoulli(sigmoid(beta x))``, ``x = c + W^T v / sigma``, then
``v ~ N(b + sigma beta W h, sigma^2 I)``, which is reversible with respect to ``p_beta(v)``.  The
Gaussian term is the same at every ``beta``, so a log-weight increment is a sum of softplus
differences of the cached hidden pre-activations alone -- the binary RBM's fused kernels
(:func:`logzbench.kernels.reweight_and_draw`) serve it unchanged.  (For tests: by the integral
above, ``log Z_beta = (D/2) log(2 pi sigma^2) + log sum_h exp(beta e.h + beta^2 ||W h||^2 / 2)``.)

Parameters are float32 tensors on the model's device (chains run in float32, as the binary
RBM's); every log-density, ``log Z`` and log-weight is float64.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import ModelFileError
from ..kernels import bernoulli_from_logits, reweight_and_draw, softplus_diff_rows
from ._arrays import checked_arrays, errors_named
from ._continuous import as_rows
from ._random import bipartite, resolve_generator
from ._shape import Axis, DeviceOf
from .enumeration import MAX_ENUMERATION_BITS, PRECISIONS, ExactLogZ, Float64Exact, state_bits
from .linear_generative import check_array
from .rbm import RBMState, VisibleRows, as_float64, as_param

__all__ = ["GRBMAnnealingPath", "GaussianBernoulliRBM", "exact_log_z", "validate_grbm_arrays"]

#: Largest magnitude a parameter (or ``W`` scaled by ``sigma`` or ``1 / sigma``) may have: beyond it
#: the float32 parameters and pre-activations overflow.
_PARAM_LIMIT = 1e30
#: States per enumeration step (float64 terms of one matrix product), and most table rows.
_STEP_STATES = 1 << 20
_TABLE_BITS = 12
_U64 = 2.0**-53


class GaussianBernoulliRBM(Float64Exact, VisibleRows):
    """A Gaussian-Bernoulli RBM with a fixed visible standard deviation (module docstring).

    Parameters
    ----------
    W : array-like, shape (D, H)
        Weights.
    b : array-like, shape (D,)
        Visible means (biases).
    c : array-like, shape (H,)
        Hidden biases.
    sigma : float
        Standard deviation of the visible units given the hidden ones, ``> 0`` (1 on standardised
        data, as in the AVIL paper).
    device : str or torch.device, optional
        Where the parameters (and all sampling) live.  Default CPU.

    Attributes
    ----------
    W, b, c : torch.Tensor (float32)
    sigma : float
    n_visible, n_hidden : int
        ``D`` and ``H``; ``n_dims`` and ``size`` are the same numbers under the continuous families'
        names (real data rows of ``n_dims`` values; ``size`` hidden units).

    Raises
    ------
    ModelFileError
        Wrong shapes, NaN / inf, ``sigma <= 0`` or overflowing parameters.
    """

    family = "grbm"
    kind = "gaussian-binary"
    #: no data base rate: the annealing path starts at the model's own visible Gaussian
    data_mean = None

    def __init__(self, W, b, c, sigma: float = 1.0, device=None):
        device = torch.device(device) if device is not None else torch.device("cpu")
        self.sigma = validate_grbm_arrays(as_float64(W), as_float64(b), as_float64(c), sigma)
        self.W = as_param(W, device)
        self.b = as_param(b, device)
        self.c = as_param(c, device)

    # ------------------------------------------------------------------ basics
    n_visible = Axis("W", 0)
    n_hidden = Axis("W", 1)

    n_dims = n_visible
    size = n_hidden

    device = DeviceOf("W")

    def to(self, device) -> "GaussianBernoulliRBM":
        """A copy on ``device``."""
        return GaussianBernoulliRBM(self.W.to(device), self.b.to(device), self.c.to(device), self.sigma, device=device)

    @classmethod
    def random(
        cls,
        n_visible: int,
        n_hidden: int,
        scale: float = 0.1,
        sigma: float = 1.0,
        generator: torch.Generator | None = None,
        bias_scale: float = 0.0,
        device=None,
    ) -> "GaussianBernoulliRBM":
        """Random weights ``N(0, scale^2)`` and biases ``N(0, bias_scale^2)`` (tests, initialisation)."""
        W, b, c = bipartite(resolve_generator(generator), (n_visible,), n_hidden, scale, bias_scale)
        return cls(W, b, c, sigma, device=device)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The model-file arrays (see "Model files" in the documentation): ``W``, ``b``, ``c`` and the
        scalar ``sigma``."""
        return {
            "W": self.W.detach().cpu().numpy(),
            "b": self.b.detach().cpu().numpy(),
            "c": self.c.detach().cpu().numpy(),
            "sigma": np.array(self.sigma, dtype=np.float64),
        }

    @classmethod
    def from_arrays(
        cls, arrays: Mapping[str, np.ndarray], source: str = "model", device=None
    ) -> "GaussianBernoulliRBM":
        """A model from :meth:`to_arrays` output (e.g. an ``.npz`` file's contents): ``W`` (D, H), ``b`` (D,),
        ``c`` (H,), the scalar ``sigma`` and optionally ``model_type`` (``"grbm"``).  Anything else -- missing,
        unexpected or non-real arrays, wrong shapes, NaN / inf, ``sigma <= 0``, overflowing parameters -- is
        a :class:`~logzbench.errors.ModelFileError` naming ``source`` (e.g. the file path) and the array."""
        a = checked_arrays(arrays, cls.family, ("W", "b", "c", "sigma"), (), source)
        with errors_named(source):
            return cls(a["W"], a["b"], a["c"], a["sigma"], device=device)

    def _rows64(self, v) -> torch.Tensor:
        """Real rows ``(n, D)`` as float64 on the model's device (one row may be 1-D)."""
        v = torch.as_tensor(v, device=self.device)
        return as_rows(v.unsqueeze(0) if v.ndim == 1 else v, self.n_visible, self.device)

    def _params64(self, device=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        dev = self.device if device is None else device
        return tuple(p.to(device=dev, dtype=torch.float64) for p in (self.W, self.b, self.c))

    # ------------------------------------------------------------------ densities
    def hidden_logits(self, v) -> torch.Tensor:
        """``x = c + W^T v / sigma`` per row, float32, shape ``(n, H)``."""
        return torch.addmm(self.c, self._as_input(v), self.W, alpha=1.0 / self.sigma)

    def log_unnormalized_marginal(self, v) -> torch.Tensor:
        """``log f(v) = -||v - b||^2 / (2 sigma^2) + sum_j softplus(c_j + (W^T v)_j / sigma)``, float64,
        shape ``(n,)`` (exact; computed entirely in float64)."""
        v = self._rows64(v)
        W, b, c = self._params64()
        quad = ((v - b) ** 2).sum(dim=1) / (2.0 * self.sigma**2)
        return F.softplus(c + v @ W / self.sigma).sum(dim=1) - quad

    def exact_log_f(self, v) -> torch.Tensor:
        """``log f(v)``: exact for a GRBM (same as :meth:`log_unnormalized_marginal`)."""
        return self.log_unnormalized_marginal(v)

    def log_unnormalized_joint(self, v, h) -> torch.Tensor:
        """``-E(v, h)``, float64, shape ``(n,)``."""
        v = self._rows64(v)
        h = torch.as_tensor(h, device=self.device).double()
        W, b, c = self._params64()
        return -((v - b) ** 2).sum(dim=1) / (2.0 * self.sigma**2) + h @ c + ((v @ W) * h).sum(dim=1) / self.sigma

    # ------------------------------------------------------------------ exact log Z (Float64Exact)
    def _check_precision(self, precision: str) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; expected one of {', '.join(PRECISIONS)}")
        if precision != "float64":
            raise ValueError("a GRBM's exact log Z is computed in float64 only; use precision='float64'")

    def _exact_plan(self, chunk_size: int | None) -> tuple[int, int, int]:
        """``(k, block, n_steps)``: the low bits tabulated, the high patterns per step and the steps of
        :meth:`_exact_sum` for ``chunk_size`` states per step (rounded down to a power of two; default
        ``2^20``).  Refuses a ``chunk_size`` that is not a positive integer and more than
        ``2^MAX_ENUMERATION_BITS`` hidden states."""
        if chunk_size is not None and (isinstance(chunk_size, bool) or int(chunk_size) != chunk_size or chunk_size < 1):
            raise ValueError(f"chunk_size must be a positive integer (or None for automatic), got {chunk_size!r}")
        H = self.n_hidden
        if H > MAX_ENUMERATION_BITS:
            raise ValueError(
                f"exact enumeration of a GRBM needs 2^{H} hidden states; refusing above "
                f"2^{MAX_ENUMERATION_BITS}. Use an estimator (ais, raise) instead."
            )
        log_states = min(H, max(0, int(chunk_size or _STEP_STATES).bit_length() - 1))
        k = min(log_states, _TABLE_BITS)
        block = 1 << (log_states - k)  # high patterns per step
        return k, block, -(-(1 << (H - k)) // block)

    def _exact_sum(self, plan: tuple[int, int, int], progress: bool) -> float:
        """``(D/2) log(2 pi sigma^2) + logsumexp_h g(h)`` over the ``2^H`` hidden states.

        With ``g(h) = e.h + ||W h||^2 / 2`` and ``e = c + W^T b / sigma`` (module docstring).  The state
        splits into ``k`` low and ``H - k`` high bits, ``W h = L(low) + O(high)``; a table of ``L`` and
        ``A = e_low.low + ||L||^2 / 2`` is built once, and each step takes a block of high patterns with
        ``B = e_high.high + ||O||^2 / 2`` and evaluates all their states as ``B + A + O L^T`` (one matrix
        product), reduced by a log-sum-exp per step and once at the end.  Everything is float64.
        """
        k, block, n_steps = plan
        H = self.n_hidden
        dev = self.device
        f64 = torch.float64
        W, b, c = self._params64()
        sigma = float(self.sigma)
        e = c + (W.T @ b) / sigma  # (H,)
        low = state_bits(0, 1 << k, k, dev, f64)  # (2^k, k)
        L = low @ W[:, :k].T  # (2^k, D)
        A = low @ e[:k] + 0.5 * (L * L).sum(dim=1)  # (2^k,)
        del low
        n_high = H - k
        W_high, e_high = W[:, k:], e[k:]
        total_high = 1 << n_high
        parts = torch.empty(n_steps, dtype=f64, device=dev)
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=n_steps, desc="exact log Z (GRBM)", unit="step")
        for i, u0 in enumerate(range(0, total_high, block)):
            high = state_bits(u0, min(u0 + block, total_high), n_high, dev, f64)  # (nb, H - k)
            O = high @ W_high.T  # (nb, D)
            B = high @ e_high + 0.5 * (O * O).sum(dim=1)  # (nb,)
            t = torch.addmm(A.expand(O.shape[0], -1), O, L.T)  # A + O L^T, (nb, 2^k)
            t += B.unsqueeze(1)
            parts[i] = torch.logsumexp(t.reshape(-1), dim=0)
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        return self._log_normalizer() + float(torch.logsumexp(parts, dim=0))

    def _log_normalizer(self) -> float:
        """``(D/2) log(2 pi sigma^2)``, the visible Gaussian's part of ``log Z``."""
        return 0.5 * self.n_visible * math.log(2.0 * math.pi * self.sigma**2)

    def _exact_bound(self, plan: tuple[int, int, int]) -> float:
        """The a-priori float64 error bound of :meth:`_exact_sum` (:func:`_error_bound`; about ``1e-12``
        nats for small models)."""
        k, block, n_steps = plan
        W, b, c = self._params64()
        return _error_bound(W, b, c, float(self.sigma), self._log_normalizer(), block << k, n_steps)

    # ------------------------------------------------------------------ conditionals / sampling
    def prob_h_given_v(self, v) -> torch.Tensor:
        """``p(h_j = 1 | v) = sigmoid(c_j + (W^T v)_j / sigma)``, float32, shape ``(n, H)``."""
        return torch.sigmoid(self.hidden_logits(v))

    def mean_v_given_h(self, h) -> torch.Tensor:
        """``E[v | h] = b + sigma W h``, float32, shape ``(n, D)``."""
        h = torch.as_tensor(h, device=self.device, dtype=torch.float32)
        return torch.addmm(self.b, h, self.W.T, alpha=self.sigma)

    def sample_h_given_v(self, v, generator: torch.Generator) -> torch.Tensor:
        return bernoulli_from_logits(self.hidden_logits(v), generator)

    def sample_v_given_h(self, h, generator: torch.Generator) -> torch.Tensor:
        """``v ~ N(b + sigma W h, sigma^2 I)``, float32."""
        mean = self.mean_v_given_h(h)
        return mean + self.sigma * torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)

    def gibbs(self, v, generator: torch.Generator, n_sweeps: int = 1) -> torch.Tensor:
        """``n_sweeps`` block-Gibbs sweeps v -> h -> v; returns the final visible states."""
        v = self._as_input(v)
        for _ in range(n_sweeps):
            v = self.sample_v_given_h(self.sample_h_given_v(v, generator), generator)
        return v

    # ------------------------------------------------------------------ annealing
    def annealing_path(self, init: str = "uniform", data=None) -> "GRBMAnnealingPath":
        """The path from ``N(b, sigma^2 I) x uniform(h)`` (``init="uniform"``, the only one) to this GRBM.

        ``data`` is accepted for the estimators' common call and not used.
        """
        if init != "uniform":
            raise ValueError(
                f"a GRBM's annealing path starts at N(b, sigma^2 I) x uniform(h): init 'uniform' only, not {init!r}"
            )
        return GRBMAnnealingPath(self)


class GRBMAnnealingPath:
    """Geometric path from ``N(b, sigma^2 I) x uniform(h)`` to a GRBM (module docstring).

    States are :class:`~logzbench.models.rbm.RBMState` ``(v, pre_h)``: the visible rows (float32)
    and their cached hidden pre-activations ``x = c + W^T v / sigma`` (float32), with ``h`` summed out.
    """

    def __init__(self, grbm: GaussianBernoulliRBM):
        self.grbm = grbm
        self.sigma = float(grbm.sigma)
        self._W_scaled = (grbm.W / self.sigma).contiguous()  # pre_h = c + v W / sigma
        self._W_t = grbm.W.T.contiguous()

    def _state(self, v: torch.Tensor) -> RBMState:
        return RBMState(v, torch.addmm(self.grbm.c, v, self._W_scaled))

    def state_from_data(self, data: torch.Tensor) -> RBMState:
        return self._state(self.grbm._as_input(data))

    # AnnealingPath protocol
    def log_z0(self) -> float:
        g = self.grbm
        return 0.5 * g.n_visible * math.log(2.0 * math.pi * self.sigma**2) + g.n_hidden * math.log(2.0)

    def sample_initial(self, n_chains: int, generator: torch.Generator) -> RBMState:
        """Exact draws ``v ~ N(b, sigma^2 I)`` (``h`` is uniform and summed out)."""
        g = self.grbm
        noise = torch.randn((n_chains, g.n_visible), generator=generator, device=g.device, dtype=torch.float32)
        return self._state(torch.add(g.b, noise, alpha=self.sigma))

    def log_f(self, state: RBMState, beta: float) -> torch.Tensor:
        quad = ((state.v.double() - self.grbm.b.double()) ** 2).sum(dim=1) / (2.0 * self.sigma**2)
        return F.softplus(beta * state.pre_h.double()).sum(dim=1) - quad

    def log_f_ratio(self, state: RBMState, beta_from: float, beta_to: float) -> torch.Tensor:
        """``sum_j softplus(beta_to x_j) - softplus(beta_from x_j)`` (the Gaussian term cancels),
        as a small number directly (:func:`logzbench.kernels.softplus_diff_rows`)."""
        inc = softplus_diff_rows(state.pre_h, beta_from, beta_to)
        return self._coarse_increment(state, beta_from, beta_to) if inc is None else inc

    @staticmethod
    def _coarse_increment(state: RBMState, beta_from: float, beta_to: float) -> torch.Tensor:
        """:meth:`log_f_ratio` from float64 softplus values (steps with some ``|d x| > 1``)."""
        x64 = state.pre_h.double()
        return (F.softplus(beta_to * x64) - F.softplus(beta_from * x64)).sum(dim=1)

    def transition(self, state: RBMState, beta: float, generator: torch.Generator) -> RBMState:
        """One block-Gibbs sweep at ``beta``: ``h ~ Bernoulli(sigmoid(beta x))``, then
        ``v ~ N(b + sigma beta W h, sigma^2 I)``."""
        return self._visible_move(bernoulli_from_logits(state.pre_h, generator, scale=beta), beta, generator)

    def reweight_and_move(
        self, state: RBMState, beta_from: float, beta_to: float, generator: torch.Generator
    ) -> tuple[torch.Tensor, RBMState]:
        """``(log_f_ratio(...), transition(state, beta_to, ...))`` with the increment and the hidden
        draw in one pass over the pre-activations (an AIS step; same numbers and draws)."""
        inc, h = reweight_and_draw(state.pre_h, beta_from, beta_to, generator)
        if inc is None:
            inc = self._coarse_increment(state, beta_from, beta_to)
        return inc, self._visible_move(h, beta_to, generator)

    def _visible_move(self, h: torch.Tensor, beta: float, generator: torch.Generator) -> RBMState:
        g = self.grbm
        v = torch.randn((h.shape[0], g.n_visible), generator=generator, device=h.device, dtype=torch.float32)
        v.mul_(self.sigma).add_(g.b)  # b + sigma eps
        v = torch.addmm(v, h, self._W_t, alpha=self.sigma * beta)  # + sigma beta W h
        return self._state(v)


# ---------------------------------------------------------------------- exact log Z
def _gamma(k: int) -> float:
    return k * _U64 / (1.0 - k * _U64)


def _error_bound(
    W: torch.Tensor, b: torch.Tensor, c: torch.Tensor, sigma: float, const: float, states_per_step: int, n_steps: int
) -> float:
    """A-priori bound (nats) on the float64 rounding error of :func:`exact_log_z`.

    ``T = sum_j (|c_j| + sum_i |W_ij| |b_i| / sigma) + sum_i (sum_j |W_ij|)^2 / 2`` bounds ``|g(h)|`` and
    the absolute values of everything summed into it (for ``||W h||^2 / 2 = ||L||^2 / 2 + ||O||^2 / 2 +
    L.O``: ``(|L_i| + |O_i|)^2 / 2 <= (sum_j |W_ij|)^2 / 2``); each term takes at most ``2H + D + 8``
    roundings (the dot products of ``e`` and of ``W h``, the squares and the sums), so errs by at most
    ``gamma_{2H+D+8} T``.  Each of the two log-sum-exp stages (``N`` terms) adds at most
    ``1.01 (3 (T + H ln 2) u + rho + gamma_N + (rho + u) ln N)`` (``rho = 4u``: 2-ulp exp / log, as in
    :mod:`logzbench.models.enumeration`), and the constant ``(D/2) log(2 pi sigma^2)`` and the last sum
    a few ulp of their magnitudes.
    """
    H, D = W.shape[1], W.shape[0]
    Wa = W.abs().cpu()
    T = float((c.abs().cpu() + Wa.T @ b.abs().cpu() / sigma).sum() + 0.5 * (Wa.sum(dim=1) ** 2).sum())
    rho = 4 * _U64

    def stage(N: int) -> float:
        return 1.01 * (3 * (T + H * math.log(2.0)) * _U64 + rho + _gamma(N) + (rho + _U64) * math.log(max(N, 1)))

    total = _gamma(2 * H + D + 8) * T + stage(states_per_step) + stage(n_steps)
    total += 8 * _U64 * (abs(const) + T + H * math.log(2.0))
    return total * (1 + 1e-6)


def exact_log_z(grbm: GaussianBernoulliRBM, *args, **kwargs) -> float | ExactLogZ:
    """:meth:`GaussianBernoulliRBM.exact_log_z` of ``grbm`` (its arguments)."""
    return grbm.exact_log_z(*args, **kwargs)


# ---------------------------------------------------------------------- validation
def validate_grbm_arrays(W: np.ndarray, b: np.ndarray, c: np.ndarray, sigma, source: str = "GRBM") -> float:
    """Refuse wrong shapes, NaN / inf, ``sigma <= 0`` and overflowing parameters; returns ``sigma`` as a float.

    Raises
    ------
    ModelFileError
        Naming ``source``, the array and the problem.
    """
    W = check_array({"W": W}, "W", 2, source)
    D, H = W.shape
    b = check_array({"b": b}, "b", 1, source, (D,))
    c = check_array({"c": c}, "c", 1, source, (H,))
    s = as_float64(sigma)
    if s.size != 1:
        raise ModelFileError(
            f"{source}: 'sigma' must be a scalar (the visible units' standard deviation), got shape {s.shape}"
        )
    s = float(check_array({"sigma": s.reshape(())}, "sigma", 0, source))
    if s <= 0:
        raise ModelFileError(f"{source}: 'sigma' = {s:g} must be > 0 (the visible units' standard deviation)")
    largest = max(float(np.abs(W).max()) * max(s, 1.0 / s), float(np.abs(b).max()), float(np.abs(c).max()), s, 1.0 / s)
    if largest > _PARAM_LIMIT:
        raise ModelFileError(
            f"{source}: parameters overflow (|W| max(sigma, 1/sigma), |b|, |c|, sigma or 1/sigma "
            f"reaches {largest:.3g} > {_PARAM_LIMIT:.0e}); the arrays are not a usable model"
        )
    return s
