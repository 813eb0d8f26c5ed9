"""Linear generative image models (Sohl-Dickstein & Culpepper 2012, Sec. 3, model 1).

The joint density over a data vector ``x`` in R^M and latent coefficients ``a`` in R^L is

    p(x, a) = p(x | a) p(a),      p(x | a) = N(x; Phi a, sigma_n^2 I)          (Eq. 30)

with one of two priors on ``a``:

``"gaussian"`` (Eq. 31)
    ``p(a) = N(0, I_L)``; the marginal is closed form, ``p(x) = N(0, Phi Phi^T + sigma_n^2 I)``.
``"laplace"`` (Eq. 32, Olshausen & Field 1997)
    ``p(a) = prod_l (1/2) exp(-|a_l|)``; ``p(x)`` is intractable except when ``Phi = 0``
    (Eq. 41: ``p(x) = N(0, sigma_n^2 I)``).

The log-likelihood ``log p(x) = log Z_{a|x}`` of a generative model (Eqs. 28-29) is the
normaliser of ``exp(-E_a(a) - log Z_a - E_{x|a}(x, a)) = p(x, a)`` over ``a``; Hamiltonian AIS
estimates it on the path from the prior (``energy0 = prior_energy``, ``log Z_q = prior_log_z()``)
to the unnormalised posterior ``energy1 = prior_energy + prior_log_z() + likelihood_energy(x, .)``
(note the constant ``prior_log_z()``: without it the estimate is ``log p(x) + prior_log_z()``),
one test point per path; many points and chains are batched by repeating ``x`` row-wise
(:func:`logzbench.training.em.posterior_path` builds this path).

Shared interface of the generative families (also :class:`~logzbench.models.bilinear.BilinearGenerative`):
``family``, ``kind = "generative"``, ``n_dims``, ``n_latent``, ``size``, ``device``,
``prior_energy``, ``prior_energy_grad``, ``prior_log_z``, ``sample_prior``,
``likelihood_energy``, ``likelihood_energy_grad``, ``latent_lower``, ``exact_log_likelihood``,
``to_arrays`` / ``from_arrays``, ``random``, ``to``.  Everything is float64.

Model-file arrays (``to_arrays``):

=============  ===========  ==============================================
``Phi``        (M, L)       dictionary / basis functions
``sigma_n``    ()           observation noise standard deviation (> 0)
``model_type`` () str       ``"linear-gaussian"`` or ``"linear-laplace"``
=============  ===========  ==============================================
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..errors import ModelFileError
from ._shape import Axis, DeviceOf

#: prior name -> family name
PRIORS = {"gaussian": "linear-gaussian", "laplace": "linear-laplace"}
#: family name -> prior name
FAMILY_PRIOR = {v: k for k, v in PRIORS.items()}

LOG_2PI = math.log(2.0 * math.pi)


# ---------------------------------------------------------------------- shared helpers
def _bad_values(arr: np.ndarray) -> str:
    kinds = []
    if np.isnan(arr).any():
        kinds.append("NaN")
    if np.isinf(arr).any():
        kinds.append("inf")
    return " and ".join(kinds)


def check_array(arrays: dict, name: str, ndim: int, source: str, shape: tuple | None = None) -> np.ndarray:
    """``arrays[name]`` as a finite float64 array with ``ndim`` dimensions (and ``shape`` where
    an entry is not ``None``); :class:`ModelFileError` naming ``source``, the array and the problem."""
    if name not in arrays:
        raise ModelFileError(f"{source}: missing array '{name}' (found {sorted(arrays)})")
    raw = np.asarray(arrays[name])
    if not np.issubdtype(raw.dtype, np.number) or np.issubdtype(raw.dtype, np.complexfloating):
        raise ModelFileError(f"{source}: array '{name}' has non-real dtype {raw.dtype}")
    arr = raw.astype(np.float64)
    if arr.ndim != ndim:
        raise ModelFileError(f"{source}: array '{name}' must be {ndim}-D, got shape {arr.shape}")
    if shape is not None:
        for axis, want in enumerate(shape):
            if want is not None and arr.shape[axis] != want:
                raise ModelFileError(
                    f"{source}: array '{name}' has shape {arr.shape}, expected "
                    f"{tuple('*' if w is None else w for w in shape)}"
                )
    if ndim and min(arr.shape) == 0:
        raise ModelFileError(f"{source}: array '{name}' has an empty dimension, shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ModelFileError(f"{source}: array '{name}' contains {_bad_values(arr)} ({int(bad.sum())} entries)")
    return arr


def check_sigma_n(value, source: str) -> float:
    """A finite, positive scalar ``sigma_n`` (0-d or one-element array); else :class:`ModelFileError`."""
    arr = np.asarray(value)
    if arr.size != 1:
        raise ModelFileError(f"{source}: array 'sigma_n' must be a scalar, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise ModelFileError(f"{source}: array 'sigma_n' has non-real dtype {arr.dtype}")
    s = float(arr.reshape(()))
    if not math.isfinite(s):
        raise ModelFileError(f"{source}: array 'sigma_n' is {s} (must be finite and > 0)")
    if s <= 0:
        raise ModelFileError(f"{source}: array 'sigma_n' = {s} must be > 0")
    return s


def check_unknown(arrays: dict, allowed: set, source: str, family: str) -> None:
    unknown = sorted(set(arrays) - allowed)
    if unknown:
        raise ModelFileError(f"{source}: unexpected array(s) {unknown} for a {family} model")


def model_type_of(arrays: dict, source: str) -> str | None:
    """``arrays["model_type"]`` as a lower-case string, or ``None`` when absent."""
    if "model_type" not in arrays:
        return None
    mt = np.asarray(arrays["model_type"])
    if mt.size != 1:
        raise ModelFileError(f"{source}: 'model_type' must be a scalar string, got shape {mt.shape}")
    return str(mt.reshape(())).lower()


def make_generator(generator: torch.Generator | None, seed: int | None) -> torch.Generator:
    if generator is not None:
        return generator
    return torch.Generator().manual_seed(0 if seed is None else int(seed))


def gaussian_log_likelihood(x: torch.Tensor, cov: torch.Tensor) -> torch.Tensor:
    """``log N(x; 0, cov)`` per row, float64, shape ``(n,)``."""
    M = cov.shape[0]
    chol = torch.linalg.cholesky(cov)
    z = torch.linalg.solve_triangular(chol, x.T, upper=False)  # (M, n)
    log_det = 2.0 * torch.log(torch.diagonal(chol)).sum()
    return -0.5 * ((z**2).sum(dim=0) + log_det + M * LOG_2PI)


def isotropic_log_likelihood(x: torch.Tensor, sigma_n: float) -> torch.Tensor:
    """``log N(x; 0, sigma_n^2 I)`` per row (Eq. 41), float64, shape ``(n,)``."""
    M = x.shape[1]
    return -0.5 * (x**2).sum(dim=1) / sigma_n**2 - 0.5 * M * (LOG_2PI + 2.0 * math.log(sigma_n))


def noisy_rows(mean: torch.Tensor, sigma_n: float, generator: torch.Generator) -> torch.Tensor:
    """Exact draws of ``x ~ N(mean, sigma_n^2 I)`` per row, float64: the observation noise of the linear and
    bilinear generative models."""
    noise = torch.randn(mean.shape, generator=generator, dtype=torch.float64, device=mean.device)
    return mean + sigma_n * noise


def laplace_sample(shape, generator: torch.Generator, device) -> torch.Tensor:
    """Exact draws from the standard Laplace density ``(1/2) exp(-|a|)``."""
    u = torch.rand(shape, generator=generator, dtype=torch.float64, device=device)
    s = torch.rand(shape, generator=generator, dtype=torch.float64, device=device)
    e = -torch.log1p(-u)  # Exp(1); u in [0, 1) so 1 - u in (0, 1]
    return torch.where(s < 0.5, -e, e)


def exponential_sample(shape, generator: torch.Generator, device) -> torch.Tensor:
    """Exact draws from ``Exp(1)``, density ``exp(-d)`` on ``d >= 0``."""
    u = torch.rand(shape, generator=generator, dtype=torch.float64, device=device)
    return -torch.log1p(-u)


# ---------------------------------------------------------------------- the model
class LinearGenerative:
    """Linear generative model ``x = Phi a + sigma_n n`` with a Gaussian or Laplace prior on ``a``.

    Parameters
    ----------
    Phi : array-like, shape (M, L)
        Basis functions (columns).
    sigma_n : float
        Observation noise standard deviation (the paper's constant 0.1).
    prior : {"gaussian", "laplace"}
        ``p(a) = N(0, I)`` (Eq. 31) or ``prod_l (1/2) exp(-|a_l|)`` (Eq. 32).
    device : str or torch.device, optional
        Where the parameters live (default CPU).

    Attributes
    ----------
    Phi : torch.Tensor, shape (M, L), float64
    sigma_n : float
    prior : str
    family : str
        ``"linear-gaussian"`` or ``"linear-laplace"``.
    kind : str
        ``"generative"``.
    n_dims, n_latent, size : int
        ``M``, ``L`` and ``L`` (the paper's "size" = number of latent variables).
    """

    kind = "generative"

    def __init__(self, Phi, sigma_n: float = 0.1, prior: str = "gaussian", device=None):
        prior = str(prior).lower()
        if prior not in PRIORS:
            raise ValueError(f"unknown prior {prior!r}; choose one of {sorted(PRIORS)}")
        source = f"LinearGenerative ({prior} prior)"
        Phi_np = check_array({"Phi": Phi.detach().cpu().numpy() if torch.is_tensor(Phi) else Phi}, "Phi", 2, source)
        device = (
            torch.device(device)
            if device is not None
            else (Phi.device if torch.is_tensor(Phi) else torch.device("cpu"))
        )
        self.prior = prior
        self.family = PRIORS[prior]
        self.sigma_n = check_sigma_n(sigma_n, source)
        self.Phi = torch.as_tensor(Phi_np, dtype=torch.float64, device=device)

    # ------------------------------------------------------------------ basics
    n_dims = Axis("Phi", 0, "``M``, the data dimension.")
    n_latent = Axis("Phi", 1, "``L``, the dimension of the latent vector ``a`` (the HAIS state).")

    @property
    def size(self) -> int:
        """The paper's model size: the number of latent variables, ``L``."""
        return self.n_latent

    device = DeviceOf("Phi")

    def __repr__(self) -> str:
        return f"LinearGenerative(M={self.n_dims}, L={self.n_latent}, prior={self.prior!r}, sigma_n={self.sigma_n})"

    def to(self, device) -> "LinearGenerative":
        """A copy on ``device``."""
        return LinearGenerative(self.Phi.to(device), self.sigma_n, self.prior, device=device)

    def copy(self) -> "LinearGenerative":
        return self.to(self.device)

    @classmethod
    def random(
        cls,
        n_dims: int,
        n_latent: int,
        prior: str = "gaussian",
        sigma_n: float = 0.1,
        scale: float | None = None,
        generator: torch.Generator | None = None,
        seed: int | None = None,
        device=None,
    ) -> "LinearGenerative":
        """``Phi`` with i.i.d. ``N(0, scale^2)`` entries (default ``scale = 1 / sqrt(L)``).

        Parameters
        ----------
        n_dims, n_latent : int
            ``M`` and ``L``.
        prior : {"gaussian", "laplace"}
        sigma_n : float
        scale : float, optional
        generator : torch.Generator, optional
            Source of randomness (CPU); else one seeded with ``seed`` (default 0).
        seed : int, optional
        device : optional
        """
        g = make_generator(generator, seed)
        scale = 1.0 / math.sqrt(n_latent) if scale is None else float(scale)
        Phi = torch.randn(int(n_dims), int(n_latent), generator=g, dtype=torch.float64, device=g.device) * scale
        return cls(Phi, sigma_n=sigma_n, prior=prior, device=device)

    # ------------------------------------------------------------------ files
    def to_arrays(self) -> dict[str, np.ndarray]:
        """``{"Phi": (M, L), "sigma_n": (), "model_type": () str}``, float64."""
        return {
            "Phi": self.Phi.detach().cpu().numpy().copy(),
            "sigma_n": np.array(self.sigma_n, dtype=np.float64),
            "model_type": np.array(self.family),
        }

    @classmethod
    def from_arrays(
        cls, arrays: dict, source: str = "model", prior: str | None = None, device=None
    ) -> "LinearGenerative":
        """Build from model-file arrays, refusing bad ones with :class:`ModelFileError`.

        Parameters
        ----------
        arrays : dict of numpy.ndarray
            ``Phi``, ``sigma_n`` and ``model_type`` (``"linear-gaussian"`` / ``"linear-laplace"``).
            ``model_type`` may be omitted when ``prior`` is given.
        source : str
            Named in every error message (e.g. the file path).
        prior : {"gaussian", "laplace"}, optional
            The prior when ``arrays`` has no ``model_type`` (must agree with it otherwise).
        """
        family = model_type_of(arrays, source)
        if family is not None:
            if family not in FAMILY_PRIOR:
                raise ModelFileError(
                    f"{source}: model_type {family!r} is not a linear generative model "
                    f"(expected one of {sorted(FAMILY_PRIOR)})"
                )
            if prior is not None and PRIORS.get(str(prior).lower()) != family:
                raise ModelFileError(f"{source}: model_type {family!r} disagrees with prior={prior!r}")
            prior = FAMILY_PRIOR[family]
        elif prior is None:
            raise ModelFileError(f"{source}: missing 'model_type' (one of {sorted(FAMILY_PRIOR)})")
        elif str(prior).lower() not in PRIORS:
            raise ValueError(f"unknown prior {prior!r}; choose one of {sorted(PRIORS)}")
        check_unknown(arrays, {"Phi", "sigma_n", "model_type"}, source, PRIORS[str(prior).lower()])
        Phi = check_array(arrays, "Phi", 2, source)
        if "sigma_n" not in arrays:
            raise ModelFileError(f"{source}: missing array 'sigma_n' (found {sorted(arrays)})")
        sigma_n = check_sigma_n(arrays["sigma_n"], source)
        return cls(Phi, sigma_n=sigma_n, prior=prior, device=device)

    # ------------------------------------------------------------------ prior
    def prior_energy(self, a: torch.Tensor) -> torch.Tensor:
        """``E_a(a)`` with ``p(a) = exp(-E_a(a) - prior_log_z())``.

        Parameters
        ----------
        a : torch.Tensor, shape (n, L), float64

        Returns
        -------
        torch.Tensor, shape (n,)
            ``|a|^2 / 2`` (Gaussian) or ``||a||_1`` (Laplace).
        """
        if self.prior == "gaussian":
            return 0.5 * (a**2).sum(dim=1)
        return a.abs().sum(dim=1)

    def prior_energy_grad(self, a: torch.Tensor) -> torch.Tensor:
        """``dE_a/da``, shape ``(n, L)`` (``sign(a)`` for the Laplace prior, 0 at 0)."""
        if self.prior == "gaussian":
            return a.clone()
        return torch.sign(a)

    def prior_log_z(self) -> float:
        """``log Z_a``: ``(L/2) log(2 pi)`` (Gaussian) or ``L log 2`` (Laplace)."""
        if self.prior == "gaussian":
            return 0.5 * self.n_latent * LOG_2PI
        return self.n_latent * math.log(2.0)

    def sample_prior(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` exact draws from ``p(a)``, shape ``(n, L)``, float64 on the model's device."""
        shape = (int(n), self.n_latent)
        if self.prior == "gaussian":
            return torch.randn(shape, generator=generator, dtype=torch.float64, device=self.device)
        return laplace_sample(shape, generator, self.device)

    def latent_lower(self) -> torch.Tensor | None:
        """``None``: ``a`` is unconstrained."""
        return None

    # ------------------------------------------------------------------ likelihood
    def mean(self, a: torch.Tensor) -> torch.Tensor:
        """``Phi a`` per row, shape ``(n, M)``."""
        return a @ self.Phi.T

    def likelihood_energy(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """``-log p(x | a) = |x - Phi a|^2 / (2 sigma_n^2) + (M/2) log(2 pi sigma_n^2)`` (Eq. 30).

        Parameters
        ----------
        x : torch.Tensor, shape (n, M) (or (1, M), broadcast)
        a : torch.Tensor, shape (n, L)
            Rows paired with ``x``.

        Returns
        -------
        torch.Tensor, shape (n,)
        """
        return -isotropic_log_likelihood(x - a @ self.Phi.T, self.sigma_n)

    def likelihood_energy_grad(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """``d(-log p(x | a))/da = -Phi^T (x - Phi a) / sigma_n^2``, shape ``(n, L)``."""
        r = x - a @ self.Phi.T
        return -(r @ self.Phi) / self.sigma_n**2

    # ------------------------------------------------------------------ closed forms
    def exact_log_likelihood(self, x) -> torch.Tensor | None:
        """``log p(x)`` where it is closed form, else ``None``.

        Gaussian prior: ``N(x; 0, Phi Phi^T + sigma_n^2 I)``.  Any prior with ``Phi = 0``:
        ``N(x; 0, sigma_n^2 I)`` (Eq. 41).

        Parameters
        ----------
        x : array-like, shape (n, M)

        Returns
        -------
        torch.Tensor, shape (n,), or None
        """
        x = torch.as_tensor(x, dtype=torch.float64, device=self.device)
        if x.ndim == 1:
            x = x[None, :]
        if not bool((self.Phi != 0).any()):
            return isotropic_log_likelihood(x, self.sigma_n)
        if self.prior == "gaussian":
            cov = self.Phi @ self.Phi.T + self.sigma_n**2 * torch.eye(
                self.n_dims, dtype=torch.float64, device=self.device
            )
            return gaussian_log_likelihood(x, cov)
        return None

    # ------------------------------------------------------------------ sampling
    def sample(self, n: int, generator: torch.Generator, return_latent: bool = False):
        """``n`` exact draws of ``x`` (and ``a`` with ``return_latent``) from the model.

        Returns
        -------
        x : torch.Tensor, shape (n, M)
        a : torch.Tensor, shape (n, L)
            Only with ``return_latent``.
        """
        a = self.sample_prior(n, generator)
        x = noisy_rows(self.mean(a), self.sigma_n, generator)
        return (x, a) if return_latent else x
