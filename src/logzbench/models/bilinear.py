"""Bilinear generative image model (Culpepper et al. 2011; Sohl-Dickstein & Culpepper 2012,
Sec. 3, model 2, Eqs. 33-35).

The form is that of the linear generative model (:mod:`.linear_generative`), with the
coefficients ``a`` in R^L factored into two multiplicative parts,

    a = (Theta c) ⊙ (Psi d),      p(x | a) = N(x; Phi a, sigma_n^2 I),

    p(c) = prod_k (1/2) exp(-|c_k|),  c in R^Kc       (Laplace, Eq. 34)
    p(d) = prod_k exp(-d_k),          d in R_+^Kd     (Eq. 35)

The paper writes ``p(d) = (1/2) exp(-||d||_1)`` with ``d in R_+``; restricted to the positive
orthant the *normalised* density is ``exp(-||d||_1)`` (each ``int_0^inf exp(-d) dd = 1``), which
is what is used here, so ``log Z_prior = Kc log 2``.  (The constant only shifts log-likelihoods
by ``Kd log 2``; with the paper's ``1/2`` the prior would not integrate to one.)

The latent vector of the Hamiltonian AIS chain is the concatenation ``z = (c, d)`` of dimension
``Kc + Kd``; ``latent_lower()`` is ``-inf`` for ``c`` and ``0`` for ``d`` (the path reflects at
the boundary) and ``prior_energy`` is ``+inf`` where any ``d_k < 0``.  ``size`` (the paper's
"size" column, the total number of latent variables) is ``Kc + Kd``.

Closed form: when ``a`` is identically zero (``Phi = 0``, ``Theta = 0`` or ``Psi = 0``),
``p(x) = N(0, sigma_n^2 I)`` (Eq. 41).

Scale ambiguity: for every ``l``, ``Phi[:, l] -> s t Phi[:, l]``, ``Theta[l] -> Theta[l] / s``,
``Psi[l] -> Psi[l] / t`` leaves the model unchanged.  :meth:`BilinearGenerative.normalized`
fixes the gauge ``||Phi[:, l]|| = ||Psi[l, :]|| = 1`` (the scale moves into ``Theta``) without
changing the distribution; EM training (:mod:`logzbench.training.em`) applies it after every
M-step.

Model-file arrays (``to_arrays``):

=============  ===========  ==============================================
``Phi``        (M, L)       basis functions
``Theta``      (L, Kc)      loadings of the signed factor ``c``
``Psi``        (L, Kd)      loadings of the non-negative factor ``d``
``sigma_n``    ()           observation noise standard deviation (> 0)
``model_type`` () str       ``"bilinear"``
=============  ===========  ==============================================
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..errors import ModelFileError
from ._shape import Axis, DeviceOf
from .linear_generative import (
    check_array,
    check_sigma_n,
    check_unknown,
    exponential_sample,
    isotropic_log_likelihood,
    laplace_sample,
    make_generator,
    model_type_of,
    noisy_rows,
)

FAMILY = "bilinear"


class BilinearGenerative:
    """Bilinear generative model ``x = Phi ((Theta c) ⊙ (Psi d)) + sigma_n n``.

    Parameters
    ----------
    Phi : array-like, shape (M, L)
        Basis functions.
    Theta : array-like, shape (L, Kc)
        Maps the Laplace-distributed ``c`` to the coefficients.
    Psi : array-like, shape (L, Kd)
        Maps the non-negative, exponentially distributed ``d`` to coefficient amplitudes.
    sigma_n : float
        Observation noise standard deviation (0.1 in the paper).
    device : str or torch.device, optional

    Attributes
    ----------
    Phi, Theta, Psi : torch.Tensor, float64
    sigma_n : float
    family : str
        ``"bilinear"``.
    kind : str
        ``"generative"``.
    n_dims : int
        ``M``.
    n_coefficients : int
        ``L``.
    n_c, n_d : int
        ``Kc`` and ``Kd``.
    n_latent, size : int
        ``Kc + Kd`` (the HAIS latent vector ``z = (c, d)``; the paper's size).
    """

    family = FAMILY
    kind = "generative"

    def __init__(self, Phi, Theta, Psi, sigma_n: float = 0.1, device=None):
        source = "BilinearGenerative"
        arrays = {
            k: (v.detach().cpu().numpy() if torch.is_tensor(v) else v)
            for k, v in (("Phi", Phi), ("Theta", Theta), ("Psi", Psi))
        }
        Phi_np, Theta_np, Psi_np = _check_params(arrays, source)
        if device is None:
            device = Phi.device if torch.is_tensor(Phi) else torch.device("cpu")
        device = torch.device(device)
        self.sigma_n = check_sigma_n(sigma_n, source)
        self.Phi = torch.as_tensor(Phi_np, dtype=torch.float64, device=device)
        self.Theta = torch.as_tensor(Theta_np, dtype=torch.float64, device=device)
        self.Psi = torch.as_tensor(Psi_np, dtype=torch.float64, device=device)

    # ------------------------------------------------------------------ basics
    n_dims = Axis("Phi", 0)
    n_coefficients = Axis("Phi", 1, "``L``, the length of ``a``.")
    n_c = Axis("Theta", 1)
    n_d = Axis("Psi", 1)

    @property
    def n_latent(self) -> int:
        """``Kc + Kd``, the dimension of the HAIS latent vector ``z = (c, d)``."""
        return self.n_c + self.n_d

    @property
    def size(self) -> int:
        """The paper's model size: the number of latent variables ``Kc + Kd``."""
        return self.n_latent

    device = DeviceOf("Phi")

    def __repr__(self) -> str:
        return (
            f"BilinearGenerative(M={self.n_dims}, L={self.n_coefficients}, Kc={self.n_c}, Kd={self.n_d}, "
            f"sigma_n={self.sigma_n})"
        )

    def to(self, device) -> "BilinearGenerative":
        """A copy on ``device``."""
        return BilinearGenerative(
            self.Phi.to(device), self.Theta.to(device), self.Psi.to(device), self.sigma_n, device=device
        )

    def copy(self) -> "BilinearGenerative":
        return self.to(self.device)

    def normalized(self) -> "BilinearGenerative":
        """The same distribution with ``||Phi[:, l]|| = 1`` and ``||Psi[l, :]|| = 1`` for every ``l``
        (the scales move into the rows of ``Theta``); zero columns / rows are left as they are."""
        s = self.Phi.norm(dim=0)
        t = self.Psi.norm(dim=1)
        s = torch.where(s > 0, s, torch.ones_like(s))
        t = torch.where(t > 0, t, torch.ones_like(t))
        return BilinearGenerative(
            self.Phi / s, self.Theta * (s * t)[:, None], self.Psi / t[:, None], self.sigma_n, device=self.device
        )

    @classmethod
    def random(
        cls,
        n_dims: int,
        n_coefficients: int,
        n_c: int,
        n_d: int,
        sigma_n: float = 0.1,
        theta_scale: float | None = None,
        generator: torch.Generator | None = None,
        seed: int | None = None,
        device=None,
    ) -> "BilinearGenerative":
        """Random parameters in the normalised gauge (tests, initialisation).

        ``Phi`` has Gaussian columns of unit norm; ``Psi`` has non-negative (``|N(0, 1)|``) rows of
        unit norm, so ``Psi d >= 0`` acts as an amplitude; ``Theta`` is ``N(0, theta_scale^2)``
        (default ``1 / sqrt(Kc)``).

        Parameters
        ----------
        n_dims, n_coefficients, n_c, n_d : int
            ``M``, ``L``, ``Kc``, ``Kd``.
        sigma_n : float
        theta_scale : float, optional
        generator : torch.Generator, optional
            Else one seeded with ``seed`` (default 0).
        seed : int, optional
        device : optional
        """
        g = make_generator(generator, seed)
        M, L, Kc, Kd = int(n_dims), int(n_coefficients), int(n_c), int(n_d)
        theta_scale = 1.0 / math.sqrt(Kc) if theta_scale is None else float(theta_scale)
        Phi = torch.randn(M, L, generator=g, dtype=torch.float64, device=g.device)
        Phi = Phi / Phi.norm(dim=0)
        Theta = torch.randn(L, Kc, generator=g, dtype=torch.float64, device=g.device) * theta_scale
        Psi = torch.randn(L, Kd, generator=g, dtype=torch.float64, device=g.device).abs()
        Psi = Psi / Psi.norm(dim=1, keepdim=True)
        return cls(Phi, Theta, Psi, sigma_n=sigma_n, device=device)

    # ------------------------------------------------------------------ files
    def to_arrays(self) -> dict[str, np.ndarray]:
        """``{"Phi", "Theta", "Psi", "sigma_n" (0-d), "model_type" ("bilinear")}``, float64."""
        return {
            "Phi": self.Phi.detach().cpu().numpy().copy(),
            "Theta": self.Theta.detach().cpu().numpy().copy(),
            "Psi": self.Psi.detach().cpu().numpy().copy(),
            "sigma_n": np.array(self.sigma_n, dtype=np.float64),
            "model_type": np.array(FAMILY),
        }

    @classmethod
    def from_arrays(cls, arrays: dict, source: str = "model", device=None) -> "BilinearGenerative":
        """Build from model-file arrays, refusing bad ones with :class:`ModelFileError` naming
        ``source``, the array and the problem (``model_type``, if present, must be ``"bilinear"``)."""
        family = model_type_of(arrays, source)
        if family is not None and family != FAMILY:
            raise ModelFileError(f"{source}: model_type {family!r} is not {FAMILY!r}")
        check_unknown(arrays, {"Phi", "Theta", "Psi", "sigma_n", "model_type"}, source, FAMILY)
        Phi, Theta, Psi = _check_params(arrays, source)
        if "sigma_n" not in arrays:
            raise ModelFileError(f"{source}: missing array 'sigma_n' (found {sorted(arrays)})")
        return cls(Phi, Theta, Psi, sigma_n=check_sigma_n(arrays["sigma_n"], source), device=device)

    # ------------------------------------------------------------------ latent layout
    def split(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``z = (c, d)`` -> ``c`` ``(n, Kc)``, ``d`` ``(n, Kd)``."""
        return z[:, : self.n_c], z[:, self.n_c :]

    def coefficients(self, z: torch.Tensor) -> torch.Tensor:
        """``a = (Theta c) ⊙ (Psi d)`` per row, shape ``(n, L)``."""
        c, d = self.split(z)
        return (c @ self.Theta.T) * (d @ self.Psi.T)

    def mean(self, z: torch.Tensor) -> torch.Tensor:
        """``Phi a`` per row, shape ``(n, M)``."""
        return self.coefficients(z) @ self.Phi.T

    # ------------------------------------------------------------------ prior
    def prior_energy(self, z: torch.Tensor) -> torch.Tensor:
        """``||c||_1 + ||d||_1`` (``+inf`` where any ``d_k < 0``).

        Parameters
        ----------
        z : torch.Tensor, shape (n, Kc + Kd)

        Returns
        -------
        torch.Tensor, shape (n,)
        """
        c, d = self.split(z)
        e = c.abs().sum(dim=1) + d.sum(dim=1)
        outside = (d < 0).any(dim=1)
        return torch.where(outside, torch.full_like(e, math.inf), e)

    def prior_energy_grad(self, z: torch.Tensor) -> torch.Tensor:
        """``(sign(c), 1)``, shape ``(n, Kc + Kd)`` (inside the support)."""
        c, d = self.split(z)
        return torch.cat([torch.sign(c), torch.ones_like(d)], dim=1)

    def prior_log_z(self) -> float:
        """``Kc log 2`` (the ``d`` part is normalised on ``R_+``)."""
        return self.n_c * math.log(2.0)

    def sample_prior(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` exact draws of ``z = (c, d)``: Laplace ``c`` and ``Exp(1)`` ``d``, shape ``(n, Kc + Kd)``."""
        c = laplace_sample((int(n), self.n_c), generator, self.device)
        d = exponential_sample((int(n), self.n_d), generator, self.device)
        return torch.cat([c, d], dim=1)

    def latent_lower(self) -> torch.Tensor:
        """Lower bounds of ``z``: ``-inf`` for ``c``, ``0`` for ``d``; shape ``(Kc + Kd,)``."""
        return torch.cat(
            [
                torch.full((self.n_c,), -math.inf, dtype=torch.float64, device=self.device),
                torch.zeros(self.n_d, dtype=torch.float64, device=self.device),
            ]
        )

    # ------------------------------------------------------------------ likelihood
    def likelihood_energy(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """``-log p(x | a(z)) = |x - Phi a|^2 / (2 sigma_n^2) + (M/2) log(2 pi sigma_n^2)``.

        Parameters
        ----------
        x : torch.Tensor, shape (n, M) (or (1, M), broadcast)
        z : torch.Tensor, shape (n, Kc + Kd)
            Rows paired with ``x``.

        Returns
        -------
        torch.Tensor, shape (n,)
        """
        return -isotropic_log_likelihood(x - self.mean(z), self.sigma_n)

    def likelihood_energy_grad(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """``d(-log p(x | a(z)))/dz``, shape ``(n, Kc + Kd)``.

        With ``g = -Phi^T (x - Phi a) / sigma_n^2``: ``dE/dc = Theta^T (g ⊙ Psi d)`` and
        ``dE/dd = Psi^T (g ⊙ Theta c)``.
        """
        c, d = self.split(z)
        u, w = c @ self.Theta.T, d @ self.Psi.T
        r = x - (u * w) @ self.Phi.T
        g = -(r @ self.Phi) / self.sigma_n**2
        return torch.cat([(g * w) @ self.Theta, (g * u) @ self.Psi], dim=1)

    # ------------------------------------------------------------------ closed forms
    def exact_log_likelihood(self, x) -> torch.Tensor | None:
        """``N(x; 0, sigma_n^2 I)`` (Eq. 41) when ``a`` is identically zero (``Phi``, ``Theta`` or
        ``Psi`` all zero), else ``None``.

        Parameters
        ----------
        x : array-like, shape (n, M)

        Returns
        -------
        torch.Tensor, shape (n,), or None
        """
        if any(not bool((p != 0).any()) for p in (self.Phi, self.Theta, self.Psi)):
            x = torch.as_tensor(x, dtype=torch.float64, device=self.device)
            return isotropic_log_likelihood(x[None, :] if x.ndim == 1 else x, self.sigma_n)
        return None

    # ------------------------------------------------------------------ sampling
    def sample(self, n: int, generator: torch.Generator, return_latent: bool = False):
        """``n`` exact draws of ``x`` (and ``z = (c, d)`` with ``return_latent``) from the model."""
        z = self.sample_prior(n, generator)
        x = noisy_rows(self.mean(z), self.sigma_n, generator)
        return (x, z) if return_latent else x


def _check_params(arrays: dict, source: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    Phi = check_array(arrays, "Phi", 2, source)
    L = Phi.shape[1]
    Theta = check_array(arrays, "Theta", 2, source, shape=(L, None))
    Psi = check_array(arrays, "Psi", 2, source, shape=(L, None))
    return Phi, Theta, Psi
