"""Mean and covariance RBM (mcRBM; Ranzato & Hinton 2010) as an analysis model: its energy with the
hidden units summed out (Sohl-Dickstein & Culpepper 2012, Sec. 3, model 4, Eq. 40).

Energy implemented (``x`` in ``R^M``, ``||x||^2 = x^T x``)::

    E(x) = - sum_{k=1}^{K} softplus( -1/2 sum_{l=1}^{L} P_lk (C_l x)^2 / (||x||^2 + 1) + b^c_k )
           - sum_{j=1}^{J} softplus( W_j x + b^m_j )
           + x^T x / (2 sigma^2) - x^T b^v,

with ``softplus(a) = log(1 + exp(a))``, ``C_l`` / ``W_j`` the rows of ``C`` (L, M) and ``W``
(J, M), ``P`` (L, K), ``b^m`` (J,), ``b^c`` (K,), ``b^v`` (M,) and ``sigma > 0``.
``p(x) = exp(-E(x)) / Z``.  The first sum is the free energy of the ``K`` binary covariance
units, the second that of the ``J`` binary mean units; the model "size" of the paper's
Table 1 is ``J + K`` (:attr:`MCRBM.size`).

How this reading of Eq. (40) was settled (the equation is garbled by the PDF extraction and
the paper says the marginal energy "is taken from the released code rather than the paper"):

* **Normalisation of the covariance term.**  Ranzato's released code projects a *normalised*
  input onto the factors, ``(C_l x / n(x))^2`` with ``n(x)^2 = ||x||^2 / M + small``; the
  HAIS paper's Eq. (40) divides ``(C_l x)^2`` by ``||x||^2 + 1``.  We implement the HAIS
  paper's ``||x||^2 + 1`` (the ratio of squares, not of norms).  Consequences:
  ``(C_l x)^2 / (||x||^2 + 1) < ||C_l||^2`` for every ``x``, so the covariance term is
  bounded, it is zero at ``x = 0`` and even in ``x`` (``E_cov(-x) = E_cov(x)``), and it tends
  to ``(C_l xhat)^2`` along any ray ``x = t xhat``, ``t -> inf``.
* **Sign of the 1/2.**  The minus sign is lost in the extraction; we take
  ``-1/2 sum_l P_lk (.)^2 + b^c_k`` from the released code, where ``P`` (their ``FH``) is
  kept non-negative, so a covariance unit is on when its pooled filter outputs are small.
  ``P`` of any sign is accepted here (``Z`` is finite either way) and :meth:`MCRBM.random`
  draws ``P >= 0``.
* **Visible bias.**  The paper's ``b^v in R^K`` is a typo: ``x^T b^v`` needs ``b^v in R^M``.

**Z is finite.**  With ``softplus(a + b) <= softplus(b) + max(a, 0)`` and the bound above,

    E(x) >= ||x||^2 / (2 sigma^2) - ||x|| (||b^v|| + sum_j ||W_j||)
            - sum_k softplus(1/2 sum_l |P_lk| ||C_l||^2 + b^c_k) - sum_j softplus(b^m_j),

so ``exp(-E)`` is dominated by a Gaussian and ``Z < inf`` for every finite parameter set
with ``sigma > 0``.  At ``x = 0``: ``E(0) = -sum_k softplus(b^c_k) - sum_j softplus(b^m_j)``.

Model-file arrays: ``P``, ``C``, ``W``, ``b_m``, ``b_c``, ``b_v``, ``sigma`` (0-d) float64 and
``model_type = "mcrbm"``.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import ModelFileError
from ._continuous import AnalysisRows
from ._random import resolve_generator
from ._shape import Axis, DeviceOf
from .poe import _array, _as_tensor, _check_keys, _check_shape, _model_type

#: Parameter arrays of a model file, in order.
ARRAYS = ("P", "C", "W", "b_m", "b_c", "b_v", "sigma")


class MCRBM(AnalysisRows):
    """Mean-covariance RBM with its hidden units summed out (energy in the module docstring).

    Parameters
    ----------
    P : shape (L, K)
        Factor-to-covariance-unit pooling weights.
    C : shape (L, M)
        Factor filters (row ``C_l``).
    W : shape (J, M)
        Mean-unit filters (row ``W_j``).
    b_m : shape (J,)
        Mean-unit biases.
    b_c : shape (K,)
        Covariance-unit biases.
    b_v : shape (M,)
        Visible biases.
    sigma : float (or 0-d / 1-element array)
        Visible scale, ``> 0``.
    device : torch.device or str, optional
    source : str
        Named in error messages.

    Attributes
    ----------
    family : str
        ``"mcrbm"``.
    kind : str
        ``"analysis"``.
    n_dims : int
        ``M``.
    size : int
        ``J + K`` (mean plus covariance units, the paper's Table 1 "size").
    n_mean, n_cov, n_factors : int
        ``J``, ``K``, ``L``.

    Raises
    ------
    ModelFileError
        Wrong shapes, NaN / inf, ``sigma <= 0`` (or so small that ``1 / sigma^2`` overflows).
    """

    family = "mcrbm"
    kind = "analysis"

    def __init__(self, P, C, W, b_m, b_c, b_v, sigma, device=None, source: str = "model"):
        if device is None:
            device = C.device if isinstance(C, torch.Tensor) else torch.device("cpu")
        device = torch.device(device)
        arrays = dict(P=P, C=C, W=W, b_m=b_m, b_c=b_c, b_v=b_v, sigma=sigma)
        checked = _validate(arrays, source)
        self.P, self.C, self.W = (_as_tensor(arrays[k], device) for k in ("P", "C", "W"))
        self.b_m, self.b_c, self.b_v = (_as_tensor(arrays[k], device) for k in ("b_m", "b_c", "b_v"))
        if isinstance(sigma, torch.Tensor):
            self.sigma = _as_tensor(sigma.reshape(()), device)
        else:
            self.sigma = torch.tensor(float(checked["sigma"]), dtype=torch.float64, device=device)

    # ------------------------------------------------------------------ basics
    n_dims = Axis("C", 1)
    n_mean = Axis("W", 0)
    n_cov = Axis("P", 1)
    n_factors = Axis("C", 0)

    @property
    def size(self) -> int:
        return self.n_mean + self.n_cov

    device = DeviceOf("C")

    def to(self, device) -> "MCRBM":
        """A copy on ``device``."""
        return MCRBM(*(getattr(self, k).to(device) for k in ARRAYS), device=device)

    def __repr__(self) -> str:
        return (
            f"MCRBM(n_dims={self.n_dims}, n_mean={self.n_mean}, n_cov={self.n_cov}, "
            f"n_factors={self.n_factors}, sigma={float(self.sigma):.4g}, device={self.device})"
        )

    @classmethod
    def random(
        cls,
        n_dims: int,
        size: int,
        *,
        n_mean: int | None = None,
        n_factors: int | None = None,
        generator: torch.Generator | None = None,
        seed: int | None = None,
        scale: float = 0.5,
        bias_scale: float = 0.5,
        sigma: float = 1.0,
        device=None,
    ) -> "MCRBM":
        """A random model (tests, initialisation).

        Parameters
        ----------
        n_dims : int
            ``M``.
        size : int
            ``J + K``.
        n_mean : int, optional
            ``J`` (default ``size // 2``; ``K = size - J``).
        n_factors : int, optional
            ``L`` (default ``K``, at least 1).
        generator, seed
            Source of randomness (``generator`` wins; default seed 0).
        scale : float
            ``W = scale * N(0, 1/M)``.  ``C`` has random unit-norm rows (as the released code keeps
            them) and ``P = |N(0, 1)|`` is non-negative (as there).
        bias_scale : float
            Biases ``N(0, bias_scale^2)``.
        sigma : float
        """
        g = resolve_generator(generator, seed)
        J = size // 2 if n_mean is None else int(n_mean)
        K = int(size) - J
        if J < 0 or K < 0:
            raise ValueError(f"n_mean={J} must be in [0, size={size}]")
        L = max(K, 1) if n_factors is None else int(n_factors)

        def randn(*shape):
            return torch.randn(*shape, generator=g, dtype=torch.float64)

        C = randn(L, n_dims)
        C = C / C.norm(dim=1, keepdim=True).clamp_min(1e-12)
        P = randn(L, K).abs()
        W = scale * randn(J, n_dims) / math.sqrt(n_dims)
        return cls(
            P,
            C,
            W,
            bias_scale * randn(J),
            bias_scale * randn(K),
            bias_scale * randn(n_dims) / math.sqrt(n_dims),
            float(sigma),
            device=device,
        )

    # ------------------------------------------------------------------ energy
    @staticmethod
    def _energy(x, P, C, W, b_m, b_c, b_v, sigma) -> torch.Tensor:
        """The marginal energy ``E(x)`` of the module docstring of rows ``x`` under these parameters."""
        sq = (x * x).sum(dim=1)
        f = x @ C.T  # (n, L) factor outputs
        r = (f * f / (sq + 1.0)[:, None]) @ P  # (n, K)
        e_cov = -F.softplus(-0.5 * r + b_c).sum(dim=1)
        e_mean = -F.softplus(x @ W.T + b_m).sum(dim=1)
        return e_cov + e_mean + 0.5 * sq / sigma**2 - x @ b_v

    def _energy_parameters(self) -> tuple:
        return self.P, self.C, self.W, self.b_m, self.b_c, self.b_v, self.sigma

    def energy_grad(self, x: torch.Tensor) -> torch.Tensor:
        """Analytic ``dE/dx``, shape ``(n, M)`` float64.

        With ``s = ||x||^2 + 1``, ``f = C x``, ``h^c = sigmoid(-r/2 + b^c)``, ``g = P h^c`` and
        ``h^m = sigmoid(W x + b^m)``:
        ``dE/dx = C^T (g * f) / s - x sum_l g_l f_l^2 / s^2 - W^T h^m + x / sigma^2 - b^v``.
        """
        x = self._input(x)
        s = (x * x).sum(dim=1) + 1.0
        f = x @ self.C.T
        r = (f * f / s[:, None]) @ self.P
        hc = torch.sigmoid(-0.5 * r + self.b_c)
        gf = (hc @ self.P.T) * f  # (n, L)
        hm = torch.sigmoid(x @ self.W.T + self.b_m)
        return (
            (gf @ self.C) / s[:, None]
            - x * ((gf * f).sum(dim=1) / s**2)[:, None]
            - hm @ self.W
            + x / self.sigma**2
            - self.b_v
        )

    def exact_log_z(self) -> None:
        """``None``: the mcRBM has no closed-form partition function (estimate it, e.g. by HAIS)."""
        return None

    def energy_lower_bound(self, x: torch.Tensor) -> torch.Tensor:
        """The Gaussian-type lower bound of ``E(x)`` of the module docstring, shape ``(n,)``.

        ``exp(-bound)`` is integrable (a Gaussian times ``exp(c ||x||)``), so ``Z`` is finite.
        """
        x = self._input(x)
        norm = x.norm(dim=1)
        lin = self.b_v.norm() + self.W.norm(dim=1).sum()
        cov_max = 0.5 * (self.P.abs() * (self.C * self.C).sum(dim=1)[:, None]).sum(dim=0)
        const = F.softplus(cov_max + self.b_c).sum() + F.softplus(self.b_m).sum()
        return 0.5 * norm**2 / self.sigma**2 - norm * lin - const

    # ------------------------------------------------------------------ training interface
    def train_parameters(self) -> dict[str, torch.Tensor]:
        """Unconstrained parameters for gradient-based training (detached float64 copies):
        ``P, C, W, b_m, b_c, b_v`` and ``log_sigma``."""
        out = {k: getattr(self, k).detach().clone() for k in ARRAYS[:-1]}
        out["log_sigma"] = torch.log(self.sigma).detach().clone()
        return out

    def energy_from_parameters(self, theta: Mapping[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """:meth:`energy` with the parameters ``theta`` of :meth:`train_parameters` (differentiable in both)."""
        return self._energy(
            x,
            theta["P"],
            theta["C"],
            theta["W"],
            theta["b_m"],
            theta["b_c"],
            theta["b_v"],
            torch.exp(theta["log_sigma"]),
        )

    def with_parameters(self, theta: Mapping[str, torch.Tensor]) -> "MCRBM":
        """A new model from the parameters ``theta`` of :meth:`train_parameters` (validated)."""
        args = [theta[k].detach() for k in ARRAYS[:-1]]
        return MCRBM(*args, torch.exp(theta["log_sigma"]).detach(), device=self.device, source="trained model")

    # ------------------------------------------------------------------ files
    def to_arrays(self) -> dict[str, np.ndarray]:
        """Model-file arrays: ``P, C, W, b_m, b_c, b_v`` and 0-d ``sigma`` (float64), ``model_type``."""
        out = {k: getattr(self, k).detach().cpu().numpy().copy() for k in ARRAYS[:-1]}
        out["sigma"] = np.array(float(self.sigma), dtype=np.float64)
        out["model_type"] = np.array(self.family)
        return out

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], source: str = "model", *, device=None) -> "MCRBM":
        """A model from :meth:`to_arrays` output (e.g. an ``.npz`` file's contents).

        ``model_type`` is optional but must be ``"mcrbm"`` when present; ``sigma`` may be 0-d or
        hold one element.

        Raises
        ------
        ModelFileError
            Naming ``source``, the array and the problem: missing or unexpected arrays, wrong
            shapes, NaN / inf, ``sigma <= 0``, a different ``model_type``.
        """
        mt = _model_type(arrays)
        if mt is not None and mt != cls.family:
            raise ModelFileError(f"{source}: array 'model_type' is {mt!r}, expected 'mcrbm'")
        _check_keys(arrays, ARRAYS, source, cls.family)
        checked = _validate(arrays, source)
        return cls(*(checked[k] for k in ARRAYS), device=device, source=source)


def _validate(arrays: Mapping, source: str) -> dict[str, np.ndarray]:
    """Check shapes, finiteness and ``sigma > 0``; return float64 arrays (``sigma`` 0-d)."""
    C = _array(arrays, "C", source, 2)
    L, M = C.shape
    if M == 0:
        raise ModelFileError(f"{source}: array 'C' has shape {C.shape}: zero visible dimensions")
    P = _array(arrays, "P", source, 2)
    if P.shape[0] != L:
        raise ModelFileError(
            f"{source}: array 'P' has shape {P.shape}, expected ({L}, K) (one row per factor of C {C.shape})"
        )
    K = P.shape[1]
    W = _array(arrays, "W", source, 2)
    if W.shape[1] != M:
        raise ModelFileError(f"{source}: array 'W' has shape {W.shape}, expected (J, {M}) (M from C {C.shape})")
    J = W.shape[0]
    b_m = _array(arrays, "b_m", source, 1)
    _check_shape(b_m, "b_m", (J,), source, f"one bias per row of W {W.shape}")
    b_c = _array(arrays, "b_c", source, 1)
    _check_shape(b_c, "b_c", (K,), source, f"one bias per column of P {P.shape}")
    b_v = _array(arrays, "b_v", source, 1)
    _check_shape(b_v, "b_v", (M,), source, f"one bias per visible dimension, C {C.shape}")
    sigma = _array(arrays, "sigma", source, (0, 1))
    if sigma.size != 1:
        raise ModelFileError(f"{source}: array 'sigma' must hold one value, got shape {sigma.shape}")
    s = float(sigma.reshape(()))
    if not s > 0:
        raise ModelFileError(f"{source}: array 'sigma' must be > 0, got {s!r}")
    with np.errstate(over="ignore", divide="ignore"):
        inv = np.float64(0.5) / np.float64(s) ** 2
    if not np.isfinite(inv):
        raise ModelFileError(f"{source}: array 'sigma' = {s!r} is so small that 1 / (2 sigma^2) overflows")
    return {"P": P, "C": C, "W": W, "b_m": b_m, "b_c": b_c, "b_v": b_v, "sigma": np.array(s)}
