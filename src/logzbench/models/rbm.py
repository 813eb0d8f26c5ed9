"""Binary restricted Boltzmann machine (Bernoulli visible and hidden units).

The joint unnormalised density is (RAISE paper, Eq. 1)

    f(v, h) = exp(a.v + b.h + v^T W h),

with ``a`` the visible biases, ``b`` the hidden biases and ``W`` of shape
``(n_visible, n_hidden)``.  Summing ``h`` out gives

    log f(v) = a.v + sum_j softplus(b_j + (v W)_j).

Parameters are float32 tensors on the model's device; every log-density is returned in
float64.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import ModelFileError
from ..kernels import bernoulli, bernoulli_from_logits, bernoulli_from_logits_, reweight_and_draw, softplus_diff_rows
from . import enumeration
from ._arrays import ParameterFile, as_float64
from ._random import bipartite, resolve_generator
from ._shape import Axis, DeviceOf


def as_param(x, device) -> torch.Tensor:
    """A float32 parameter tensor on ``device`` (from an array or a tensor)."""
    t = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
    return t.to(device=device, dtype=torch.float32).contiguous()


class VisibleRows:
    """What every model family shares about its visible layer (``n_visible``, ``device``,
    ``family`` and ``data_mean`` come from the family's class)."""

    def _as_input(self, v) -> torch.Tensor:
        """Rows of ``n_visible`` units as float32 on the model's device (one row may be 1-D)."""
        v = torch.as_tensor(v, device=self.device)
        if v.ndim == 1:
            v = v.unsqueeze(0)
        if v.ndim != 2 or v.shape[1] != self.n_visible:
            raise ValueError(
                f"data has shape {tuple(v.shape)}; this {self.family.upper()} expects rows of "
                f"{self.n_visible} visible units"
            )
        return v.to(torch.float32)

    def base_rate_bias(self, data=None, smoothing: float = 0.05) -> torch.Tensor:
        """Visible biases of the data-base-rate distribution (Salakhutdinov & Murray 2008).

        ``logit(p)`` with ``p`` the training-set mean of each visible unit, mixed with 1/2
        by ``smoothing`` and clipped to ``[1e-3, 1 - 1e-3]`` so that every bias is finite
        (pixels that are always off in the training set would otherwise get -inf).

        Parameters
        ----------
        data : array-like, shape (n_samples, n_visible), optional
            Training data.  Defaults to the model's stored ``data_mean``.
        smoothing : float
            Weight of the uniform distribution in the mixture.
        """
        if data is not None:
            mean = self._as_input(data).double().mean(dim=0)
        elif self.data_mean is not None:
            mean = self.data_mean.double()
        else:
            raise ValueError(
                "the data-base-rate initial distribution needs the training data's pixel means: "
                "pass training data (CLI: --train-data X.npy) or use a model file with a 'data_mean' array"
            )
        return base_rate_bias_from_mean(mean, smoothing).to(self.device)


class BinaryRBM(ParameterFile, VisibleRows):
    """A binary RBM.

    Parameters
    ----------
    W : array-like, shape (n_visible, n_hidden)
        Weights.
    visible_bias : array-like, shape (n_visible,)
    hidden_bias : array-like, shape (n_hidden,)
    device : str or torch.device, optional
        Where the parameters (and all sampling) live.  Default CPU.
    data_mean : array-like, shape (n_visible,), optional
        Mean of the training data per visible unit; used to build the data-base-rate
        initial distribution for annealing.  Saved with the model when present.

    Attributes
    ----------
    W, visible_bias, hidden_bias : torch.Tensor (float32)
    n_visible, n_hidden : int
    """

    family = "rbm"
    PARAMETERS = ("W", "visible_bias", "hidden_bias")

    def __init__(self, W, visible_bias, hidden_bias, device=None, data_mean=None):
        device = torch.device(device) if device is not None else torch.device("cpu")
        validate_rbm_arrays(as_float64(W), as_float64(visible_bias), as_float64(hidden_bias), as_float64(data_mean))
        self.W = as_param(W, device)
        self.visible_bias = as_param(visible_bias, device)
        self.hidden_bias = as_param(hidden_bias, device)
        self.data_mean = None if data_mean is None else as_param(data_mean, device)

    # ------------------------------------------------------------------ basics
    n_visible = Axis("W", 0)
    n_hidden = Axis("W", 1)
    device = DeviceOf("W")

    @classmethod
    def random(
        cls,
        n_visible: int,
        n_hidden: int,
        scale: float = 0.01,
        generator: torch.Generator | None = None,
        bias_scale: float = 0.0,
        device=None,
    ) -> "BinaryRBM":
        """Random weights ``N(0, scale^2)`` and biases ``N(0, bias_scale^2)`` (tests, initialisation)."""
        W, a, b = bipartite(resolve_generator(generator), (n_visible,), n_hidden, scale, bias_scale)
        return cls(W, a, b, device=device)

    # ------------------------------------------------------------------ densities
    def log_unnormalized_marginal(self, v) -> torch.Tensor:
        """``log f(v) = a.v + sum_j softplus(b_j + (vW)_j)``, float64, shape ``(n,)``.

        Computed entirely in float64 (used for test-set evaluation, not in hot loops).
        """
        v = self._as_input(v).double()
        pre = v @ self.W.double() + self.hidden_bias.double()
        return v @ self.visible_bias.double() + F.softplus(pre).sum(dim=1)

    def exact_log_f(self, v) -> torch.Tensor:
        """``log f(v)``: exact for an RBM (same as :meth:`log_unnormalized_marginal`)."""
        return self.log_unnormalized_marginal(v)

    def exact_log_z(self, **kw) -> float:
        """``log Z`` by enumerating the smaller layer (:func:`logzbench.models.enumeration.exact_log_z`)."""
        return enumeration.exact_log_z(self, **kw)

    def log_unnormalized_hidden_marginal(self, h) -> torch.Tensor:
        """``log f(h) = b.h + sum_i softplus(a_i + (W h)_i)``, float64, shape ``(n,)``."""
        h = torch.as_tensor(h, device=self.device).double()
        pre = h @ self.W.double().T + self.visible_bias.double()
        return h @ self.hidden_bias.double() + F.softplus(pre).sum(dim=1)

    def log_unnormalized_joint(self, v, h) -> torch.Tensor:
        """``log f(v, h) = a.v + b.h + v^T W h``, float64, shape ``(n,)``."""
        v = self._as_input(v).double()
        h = torch.as_tensor(h, device=self.device).double()
        return v @ self.visible_bias.double() + h @ self.hidden_bias.double() + ((v @ self.W.double()) * h).sum(1)

    def log_prob_v_given_h(self, v, h) -> torch.Tensor:
        """``log p(v | h)`` for every pair of rows: shape ``(n_v, n_h)``, float64.

        Used by CSL: ``p(v | h) = prod_i sigmoid(+-(a_i + (W h)_i))``.
        """
        v = self._as_input(v).double()
        h = torch.as_tensor(h, device=self.device).double()
        pre = h @ self.W.double().T + self.visible_bias.double()  # (n_h, n_visible)
        # log p(v|h) = v.pre - sum_i softplus(pre_i)
        return v @ pre.T - F.softplus(pre).sum(dim=1).unsqueeze(0)

    # ------------------------------------------------------------------ conditionals / sampling
    def prob_h_given_v(self, v) -> torch.Tensor:
        return torch.sigmoid(self._as_input(v) @ self.W + self.hidden_bias)

    def prob_v_given_h(self, h) -> torch.Tensor:
        h = torch.as_tensor(h, device=self.device, dtype=torch.float32)
        return torch.sigmoid(h @ self.W.T + self.visible_bias)

    def sample_h_given_v(self, v, generator: torch.Generator) -> torch.Tensor:
        return bernoulli(self.prob_h_given_v(v), generator)

    def sample_v_given_h(self, h, generator: torch.Generator) -> torch.Tensor:
        return bernoulli(self.prob_v_given_h(h), generator)

    def gibbs(self, v, generator: torch.Generator, n_sweeps: int = 1) -> torch.Tensor:
        """``n_sweeps`` block-Gibbs sweeps v -> h -> v; returns the final visible states."""
        v = self._as_input(v)
        for _ in range(n_sweeps):
            v = self.sample_v_given_h(self.sample_h_given_v(v, generator), generator)
        return v

    # ------------------------------------------------------------------ annealing
    def annealing_path(self, init: str = "uniform", data=None, visible_bias_0=None, reference=None):
        """The geometric path from ``init`` (``"uniform"`` or ``"base-rate"``) to this RBM, or the augmented
        path from a mixture of product distributions (``"mixture"``: ``reference``, a
        :class:`~logzbench.models.mixture.ProductMixture`, else one fitted to ``data`` with the defaults
        of :func:`~logzbench.models.mixture.fit_mixture`; :class:`~logzbench.models.mixture.MixtureGibbsPath`).

        ``visible_bias_0`` overrides the initial distribution's visible biases.
        """
        if init == "mixture":
            from .mixture import mixture_reference

            return self.mixture_path(mixture_reference(reference, data, self._as_input))
        if visible_bias_0 is None:
            if init == "uniform":
                visible_bias_0 = torch.zeros(self.n_visible, device=self.device)
            elif init == "base-rate":
                visible_bias_0 = self.base_rate_bias(data)
            else:
                raise ValueError(f"unknown initial distribution {init!r}; choose 'uniform', 'base-rate' or 'mixture'")
        return RBMAnnealingPath(self, visible_bias_0)

    def mixture_path(self, mixture):
        """The augmented path from ``mixture`` (binary, ``n_visible`` sites) to this RBM
        (:class:`~logzbench.models.mixture.MixtureGibbsPath`: block Gibbs ``z, h | v`` then ``v | z, h``)."""
        from .mixture import MixtureGibbsPath

        if not mixture.binary or mixture.n_sites != self.n_visible:
            raise ValueError(
                f"the mixture reference has {mixture.n_sites} sites of {mixture.n_states} states; this RBM has "
                f"{self.n_visible} binary visible units"
            )
        base = RBMAnnealingPath(self, torch.zeros(self.n_visible, device=self.device))
        return MixtureGibbsPath(
            base, mixture, self.W.T, self.visible_bias, bernoulli_from_logits_, n_hidden=self.n_hidden
        )


def base_rate_bias_from_mean(mean: torch.Tensor, smoothing: float = 0.05) -> torch.Tensor:
    """``logit`` of per-unit means mixed with 1/2 by ``smoothing`` and clipped to [1e-3, 1-1e-3]."""
    p = (1.0 - smoothing) * mean.double() + smoothing * 0.5
    p = p.clamp(1e-3, 1 - 1e-3)
    return (torch.log(p) - torch.log1p(-p)).to(torch.float32)


class RBMState(NamedTuple):
    """Chain state on the RBM path with the hidden layer summed out.

    ``v``: visible units ``(n_chains, n_visible)`` float32; ``pre_h``: cached hidden
    pre-activations ``v W + b`` ``(n_chains, n_hidden)`` float32, so each Gibbs sweep costs
    two matrix products, not three.
    """

    v: torch.Tensor
    pre_h: torch.Tensor


class RBMAnnealingPath:
    """Geometric path between a factorial Bernoulli distribution and a binary RBM.

    On the joint space (Salakhutdinov & Murray 2008; Upadhya & Sastry Eq. 15)

        f_beta(v, h) = exp((1 - beta) a0.v + beta (a.v + b.h + v^T W h)),

    so ``f_0`` is the Bernoulli(sigmoid(a0)) distribution on ``v`` times the uniform
    distribution on ``h``, ``log Z_0 = n_hidden log 2 + sum_i softplus(a0_i)``, and
    summing ``h`` out,

        log f_beta(v) = ((1 - beta) a0 + beta a).v + sum_j softplus(beta (b_j + (vW)_j)).

    The transition is one block-Gibbs sweep ``v -> h -> v`` at ``beta``, which is
    reversible with respect to ``p_beta(v)``.
    """

    def __init__(self, rbm: BinaryRBM, visible_bias_0: torch.Tensor):
        self.rbm = rbm
        self.a0 = torch.as_tensor(visible_bias_0, device=rbm.device, dtype=torch.float32)
        if self.a0.shape != (rbm.n_visible,):
            raise ValueError(f"initial visible biases have shape {tuple(self.a0.shape)}, expected ({rbm.n_visible},)")
        if not torch.isfinite(self.a0).all():
            raise ValueError("initial visible biases contain NaN or inf")
        self._da32 = rbm.visible_bias - self.a0  # a - a0 (the increment's linear term is scaled by d)

    # state helpers
    def _state(self, v: torch.Tensor) -> RBMState:
        return RBMState(v, torch.addmm(self.rbm.hidden_bias, v, self.rbm.W))

    def state_from_data(self, data: torch.Tensor) -> RBMState:
        return self._state(self.rbm._as_input(data))

    # AnnealingPath protocol
    def log_z0(self) -> float:
        return float(self.rbm.n_hidden * np.log(2.0) + F.softplus(self.a0.double()).sum().item())

    def sample_initial(self, n_chains: int, generator: torch.Generator) -> RBMState:
        """Exact draws from ``p_0``: ``v_i ~ Bernoulli(sigmoid(a0_i))`` with the probability exact to
        float64 precision, as ``log Z_0`` is computed (from the logits, not a float32 sigmoid)."""
        return self._state(bernoulli_from_logits(self.a0.expand(n_chains, -1), generator))

    def log_f(self, state: RBMState, beta: float) -> torch.Tensor:
        v = state.v.double()
        lin = v @ ((1.0 - beta) * self.a0.double() + beta * self.rbm.visible_bias.double())
        return lin + F.softplus(beta * state.pre_h.double()).sum(dim=1)

    def log_f_ratio(self, state: RBMState, beta_from: float, beta_to: float) -> torch.Tensor:
        """``log f_{beta_to}(v) - log f_{beta_from}(v)`` computed as a small number directly.

        With ``x = vW + b`` and ``d = beta_to - beta_from``,

            softplus(beta_to x) - softplus(beta_from x) = -log1p(sigmoid(beta_to x) expm1(-d x)),

        which keeps the full relative precision of the (small) increment in float32 (the
        argument of ``log1p`` stays above ``e^-1 - 1``); the sums over units, and the linear
        term ``d v.(a - a0)``, are accumulated in float64
        (:func:`logzbench.kernels.softplus_diff_rows`: one fused pass over ``x`` and ``v`` on
        CPU).  Coarse steps with some ``|d x| > 1`` use float64 softplus differences instead.
        """
        inc = softplus_diff_rows(state.pre_h, beta_from, beta_to, v=state.v, dv=self._da32)
        return self._coarse_increment(state, beta_from, beta_to) if inc is None else inc

    def _coarse_increment(self, state: RBMState, beta_from: float, beta_to: float) -> torch.Tensor:
        """:meth:`log_f_ratio` from float64 softplus values (steps with some ``|d x| > 1``)."""
        x64 = state.pre_h.double()
        lin = (beta_to - beta_from) * (state.v.double() @ self._da32.double())
        return lin + (F.softplus(beta_to * x64) - F.softplus(beta_from * x64)).sum(dim=1)

    def transition(self, state: RBMState, beta: float, generator: torch.Generator) -> RBMState:
        """One block-Gibbs sweep ``v -> h -> v`` at ``beta``.

        ``h ~ Bernoulli(sigmoid(beta x))`` straight from the cached pre-activations
        ``x = vW + b`` (no sigmoid is stored), then the visible units from their logits, both
        with the exact sampler of :mod:`logzbench.kernels`.
        """
        return self._visible_move(bernoulli_from_logits(state.pre_h, generator, scale=beta), beta, generator)

    def transition_rows(self, state: RBMState, beta: torch.Tensor, generator: torch.Generator) -> RBMState:
        """:meth:`transition` with an inverse temperature per row (``beta``: ``(n,)``): every row's block-Gibbs
        sweep at its own ``beta`` in one batched pass (parallel tempering moves all its temperatures at once)."""
        b = beta.to(dtype=state.pre_h.dtype, device=state.pre_h.device)[:, None]
        h = bernoulli_from_logits(state.pre_h * b, generator)
        pre_v = torch.addcmul(self.a0 + b * self._da32, b, h @ self.rbm.W.T)
        return self._state(bernoulli_from_logits_(pre_v, generator))

    def reweight_and_move(
        self, state: RBMState, beta_from: float, beta_to: float, generator: torch.Generator
    ) -> tuple[torch.Tensor, RBMState]:
        """``(log_f_ratio(state, beta_from, beta_to), transition(state, beta_to, generator))``, the
        same numbers and draws, with the log-weight increment and the hidden draw in one pass over
        the hidden pre-activations (:func:`logzbench.kernels.reweight_and_draw`): an AIS step."""
        inc, h = reweight_and_draw(state.pre_h, beta_from, beta_to, generator, v=state.v, dv=self._da32)
        if inc is None:
            inc = self._coarse_increment(state, beta_from, beta_to)
        return inc, self._visible_move(h, beta_to, generator)

    def _visible_move(self, h: torch.Tensor, beta: float, generator: torch.Generator) -> RBMState:
        """The second half of a sweep: ``v ~ p_beta(v | h)``, the new state."""
        rbm = self.rbm
        # visible pre-activation: (1 - beta) a0 + beta (a + h W^T) = a0 + beta (a - a0) + beta h W^T
        bias_v = torch.add(self.a0, self._da32, alpha=beta)
        pre_v = torch.addmm(bias_v, h, rbm.W.T, beta=1.0, alpha=beta)
        return self._state(bernoulli_from_logits_(pre_v, generator))


def validate_rbm_arrays(
    W: np.ndarray,
    visible_bias: np.ndarray,
    hidden_bias: np.ndarray,
    data_mean: np.ndarray | None = None,
    source: str = "RBM",
) -> None:
    """Refuse wrong shapes, NaN/inf and overflowing parameters with a message naming the problem."""
    if W.ndim != 2:
        raise ModelFileError(f"{source}: 'W' must be 2-D (n_visible x n_hidden), got shape {W.shape}")
    nv, nh = W.shape
    if nv == 0 or nh == 0:
        raise ModelFileError(f"{source}: 'W' has an empty dimension, shape {W.shape}")
    if visible_bias.shape != (nv,):
        raise ModelFileError(
            f"{source}: 'visible_bias' has shape {visible_bias.shape}, expected ({nv},) to match W {W.shape}"
        )
    if hidden_bias.shape != (nh,):
        raise ModelFileError(
            f"{source}: 'hidden_bias' has shape {hidden_bias.shape}, expected ({nh},) to match W {W.shape}"
        )
    if data_mean is not None and data_mean.shape != (nv,):
        raise ModelFileError(f"{source}: 'data_mean' has shape {data_mean.shape}, expected ({nv},)")
    for name, arr in (("W", W), ("visible_bias", visible_bias), ("hidden_bias", hidden_bias)):
        bad = ~np.isfinite(arr)
        if bad.any():
            kinds = []
            if np.isnan(arr).any():
                kinds.append("NaN")
            if np.isinf(arr).any():
                kinds.append("inf")
            raise ModelFileError(f"{source}: '{name}' contains {' and '.join(kinds)} ({int(bad.sum())} entries)")
    # Pre-activations beyond this bound overflow exp() in float32 conditionals and make
    # log-weights meaningless; a trained model never gets near it.
    limit, w_limit = 1e30, 1e15
    w_max = float(np.abs(W).max())
    if w_max > w_limit:
        raise ModelFileError(
            f"{source}: parameters overflow ('W' has an entry of magnitude {w_max:.3g} > "
            f"{w_limit:.0e}); the weights are not a usable model"
        )
    for layer, axis, name, bias in (
        ("hidden", 0, "hidden_bias", hidden_bias),
        ("visible", 1, "visible_bias", visible_bias),
    ):
        w_part, b_part = float(np.abs(W).sum(axis=axis).max()), float(np.abs(bias).max(initial=0.0))
        if w_part + b_part > limit:
            culprit = f"'{name}' reaches {b_part:.3g}" if b_part >= w_part else f"a sum of |'W'| reaches {w_part:.3g}"
            raise ModelFileError(
                f"{source}: parameters overflow ({culprit}: a {layer} pre-activation can reach "
                f"{w_part + b_part:.3g} > {limit:.0e}); the weights are not a usable model"
            )
    if data_mean is not None and (not np.isfinite(data_mean).all() or (data_mean < 0).any() or (data_mean > 1).any()):
        raise ModelFileError(f"{source}: 'data_mean' must hold finite values in [0, 1]")
