"""Product of experts (PoE) analysis models of continuous data (Sohl-Dickstein & Culpepper 2012,
"Hamiltonian annealed importance sampling", Sec. 3, model 3; Hinton 2002).

The density of ``x`` in ``R^M`` is

    p(x) = exp(-E(x)) / Z,      E(x) = sum_{l=1}^{L} E_expert(Phi_l x; lambda_l),

with filters ``Phi`` of shape ``(L, M)`` (row ``Phi_l``) and expert weights ``lambda`` of
shape ``(L,)``, ``lambda_l > 0``.  Two experts (:data:`EXPERTS`):

``"laplace"``
    ``E(u; lambda) = lambda |u|``.  The paper fixes ``lambda_l = 1`` (a different ``lambda_l``
    is the same as rescaling the row ``Phi_l``); the default here is ``lambda = 1`` and
    :func:`logzbench.training.mpf.train_mpf` keeps it fixed, but any ``lambda > 0`` is a
    valid model.
``"student-t"``
    ``E(u; lambda) = lambda log(1 + u^2)``.

``E`` is cheap to evaluate, ``Z`` is intractable in general.  In the *complete* case
``L = M`` with an invertible ``Phi``, ``u = Phi x`` is a change of variables, so

    log Z = -log|det Phi| + sum_l log z_l,     z_l = int exp(-E(u; lambda_l)) du,

with ``z_l = 2 / lambda_l`` for Laplace experts (``log Z = log|det Phi^{-1}| + L log 2`` at
``lambda = 1``) and ``z_l = sqrt(pi) Gamma(lambda_l - 1/2) / Gamma(lambda_l)`` for
Student's t experts, finite only for ``lambda_l > 1/2`` (the density ``(1 + u^2)^-lambda``
is then a Student's t of ``nu = 2 lambda - 1`` degrees of freedom, scaled by
``1 / sqrt(nu)``).  :meth:`ProductOfExperts.exact_log_z` returns it, ``None`` for ``L > M``
(no closed form; estimate it, e.g. by HAIS).  ``L < M`` or a rank-deficient ``Phi`` gives a
density that is flat along the null space of ``Phi``: ``Z`` is infinite and such a model is
refused.

Parameters are float64 tensors; every energy is float64.  The model-file arrays are
``Phi`` (L, M), ``lam`` (L,) and ``model_type`` (``"poe-laplace"`` or ``"poe-student-t"``).
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import torch

from ..errors import ModelFileError
from ._continuous import AnalysisRows
from ._random import resolve_generator
from ._shape import Axis, DeviceOf

#: expert name -> model family (``model_type`` in model files)
EXPERTS = {"laplace": "poe-laplace", "student-t": "poe-student-t"}
#: model family -> expert name
FAMILY_EXPERT = {v: k for k, v in EXPERTS.items()}


# ---------------------------------------------------------------------- shared validation helpers
def _array(arrays: Mapping, name: str, source: str, ndim: int | tuple[int, ...]) -> np.ndarray:
    """``arrays[name]`` as float64 with ``ndim`` dimensions, refusing absent / non-real / non-finite
    arrays with a :class:`ModelFileError` naming ``source``, the array and the problem."""
    if name not in arrays or arrays[name] is None:
        raise ModelFileError(f"{source}: missing array '{name}' (found {sorted(arrays)})")
    raw = arrays[name]
    if isinstance(raw, torch.Tensor):
        raw = raw.detach().cpu().numpy()
    a = np.asarray(raw)
    if not np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.complexfloating):
        raise ModelFileError(f"{source}: array '{name}' has non-real dtype {a.dtype}")
    ndims = (ndim,) if isinstance(ndim, int) else ndim
    if a.ndim not in ndims:
        raise ModelFileError(
            f"{source}: array '{name}' must have {' or '.join(map(str, ndims))} dimension(s), got shape {a.shape}"
        )
    a = a.astype(np.float64)
    bad = ~np.isfinite(a)
    if bad.any():
        kinds = [k for k, m in (("NaN", np.isnan(a)), ("inf", np.isinf(a))) if m.any()]
        raise ModelFileError(f"{source}: array '{name}' contains {' and '.join(kinds)} ({int(bad.sum())} entries)")
    return a


def _check_shape(a: np.ndarray, name: str, expected: tuple[int, ...], source: str, why: str) -> None:
    if a.shape != expected:
        raise ModelFileError(f"{source}: array '{name}' has shape {a.shape}, expected {expected} ({why})")


def _check_keys(arrays: Mapping, allowed: tuple[str, ...], source: str, family: str) -> None:
    unknown = sorted(set(arrays) - set(allowed) - {"model_type"})
    if unknown:
        raise ModelFileError(f"{source}: unexpected array(s) {unknown} for a {family} model (expected {list(allowed)})")


def _model_type(arrays: Mapping) -> str | None:
    if "model_type" not in arrays:
        return None
    return str(np.asarray(arrays["model_type"])).lower()


def _as_tensor(x, device) -> torch.Tensor:
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x, dtype=np.float64))
    return t.detach().to(device=device, dtype=torch.float64).clone().contiguous()


# ---------------------------------------------------------------------- the model
def expert_log_normalizer(lam: np.ndarray, expert: str) -> np.ndarray:
    """``log z_l = log int exp(-E_expert(u; lambda_l)) du`` per expert, shape ``(L,)``.

    Laplace: ``log(2 / lambda)``.  Student's t: ``log(sqrt(pi) Gamma(lambda - 1/2) / Gamma(lambda))``,
    ``+inf`` where ``lambda <= 1/2`` (the integral diverges).
    """
    lam = np.asarray(lam, dtype=np.float64)
    if expert == "laplace":
        return np.log(2.0) - np.log(lam)
    if expert == "student-t":
        out = np.full(lam.shape, np.inf)
        ok = lam > 0.5
        out[ok] = [0.5 * math.log(math.pi) + math.lgamma(v - 0.5) - math.lgamma(v) for v in lam[ok]]
        return out
    raise ValueError(f"unknown expert {expert!r}; choose one of {sorted(EXPERTS)}")


class ProductOfExperts(AnalysisRows):
    """Product of Laplace or Student's t experts, ``E(x) = sum_l E_expert(Phi_l x; lambda_l)``.

    Parameters
    ----------
    Phi : array-like or torch.Tensor, shape (L, M)
        Filters (one expert per row), ``L >= M`` and rank ``M``.
    lam : array-like or torch.Tensor, shape (L,), optional
        Expert weights ``lambda_l > 0`` (default all ones; the paper's Laplace experts use 1).
    expert : {"laplace", "student-t"}
    device : torch.device or str, optional
    source : str
        Name used in error messages.

    Attributes
    ----------
    family : str
        ``"poe-laplace"`` or ``"poe-student-t"``.
    kind : str
        ``"analysis"`` (the energy of ``x`` is cheap; only ``Z`` is hard).
    n_dims : int
        ``M``.
    size : int
        ``L``, the number of experts.
    Phi : torch.Tensor, shape (L, M), float64
    lam : torch.Tensor, shape (L,), float64

    Raises
    ------
    ModelFileError
        For wrong shapes, NaN / inf, ``lambda <= 0``, or a ``Phi`` of rank ``< M``.
    """

    kind = "analysis"

    def __init__(self, Phi, lam=None, expert: str = "laplace", device=None, source: str = "model"):
        if expert not in EXPERTS:
            raise ValueError(f"unknown expert {expert!r}; choose one of {sorted(EXPERTS)}")
        if device is None:
            device = Phi.device if isinstance(Phi, torch.Tensor) else torch.device("cpu")
        device = torch.device(device)
        phi = _array({"Phi": Phi}, "Phi", source, 2)
        L, M = phi.shape
        if L == 0 or M == 0:
            raise ModelFileError(f"{source}: array 'Phi' has an empty dimension, shape {phi.shape}")
        lam_np = np.ones(L) if lam is None else _array({"lam": lam}, "lam", source, 1)
        _check_shape(lam_np, "lam", (L,), source, f"one weight per row of Phi {phi.shape}")
        if (lam_np <= 0).any():
            raise ModelFileError(
                f"{source}: array 'lam' must be > 0 (min {lam_np.min():.6g}, "
                f"{int((lam_np <= 0).sum())} non-positive entries)"
            )
        if L < M:
            raise ModelFileError(
                f"{source}: array 'Phi' has shape {phi.shape}: fewer experts (L={L}) than dimensions "
                f"(M={M}) leave the density flat along the null space of Phi, so Z is infinite"
            )
        rank = int(np.linalg.matrix_rank(phi))
        if rank < M:
            raise ModelFileError(
                f"{source}: array 'Phi' has rank {rank} < M={M}: the density is flat along its "
                "null space, so Z is infinite"
            )
        self.expert = expert
        self.family = EXPERTS[expert]
        self.Phi = _as_tensor(Phi, device)
        self.lam = _as_tensor(lam_np if lam is None else lam, device)

    # ------------------------------------------------------------------ basics
    n_dims = Axis("Phi", 1)
    size = Axis("Phi", 0)
    device = DeviceOf("Phi")

    def to(self, device) -> "ProductOfExperts":
        """A copy on ``device``."""
        return ProductOfExperts(self.Phi.to(device), self.lam.to(device), self.expert, device=device)

    def __repr__(self) -> str:
        return f"ProductOfExperts(expert={self.expert!r}, n_dims={self.n_dims}, size={self.size}, device={self.device})"

    @classmethod
    def random(
        cls,
        n_dims: int,
        size: int | None = None,
        *,
        expert: str = "laplace",
        generator: torch.Generator | None = None,
        seed: int | None = None,
        scale: float = 1.0,
        lam: float | tuple[float, float] = 1.0,
        device=None,
    ) -> "ProductOfExperts":
        """A random model (tests, initialisation).

        Parameters
        ----------
        n_dims : int
            ``M``.
        size : int, optional
            ``L`` (default ``M``, the complete case).
        expert : {"laplace", "student-t"}
        generator, seed
            Source of randomness (``generator`` wins; default seed 0).
        scale : float
            ``Phi = scale * (E + G / sqrt(M))`` with ``E`` the ``(L, M)`` identity (ones on the
            leading diagonal) and ``G`` standard normal: full rank (almost surely), so proper.
        lam : float or (low, high)
            Every ``lambda_l`` equal to ``lam``, or uniform in ``[low, high)``.
        """
        g = resolve_generator(generator, seed)
        L = n_dims if size is None else int(size)
        eye = torch.zeros(L, n_dims, dtype=torch.float64)
        eye[: min(L, n_dims), : min(L, n_dims)] = torch.eye(min(L, n_dims), dtype=torch.float64)
        Phi = scale * (eye + torch.randn(L, n_dims, generator=g, dtype=torch.float64) / math.sqrt(n_dims))
        if isinstance(lam, (tuple, list)):
            lo, hi = map(float, lam)
            lam_t = lo + (hi - lo) * torch.rand(L, generator=g, dtype=torch.float64)
        else:
            lam_t = torch.full((L,), float(lam), dtype=torch.float64)
        return cls(Phi, lam_t, expert, device=device)

    # ------------------------------------------------------------------ energy
    @staticmethod
    def _energy(x: torch.Tensor, Phi: torch.Tensor, lam: torch.Tensor, expert: str) -> torch.Tensor:
        """``E(x) = sum_l E_expert(Phi_l x; lambda_l)`` of rows ``x`` under these parameters."""
        u = x @ Phi.T
        if expert == "laplace":
            return u.abs() @ lam
        return torch.log1p(u * u) @ lam

    def _energy_parameters(self) -> tuple:
        return self.Phi, self.lam, self.expert

    def energy_grad(self, x: torch.Tensor) -> torch.Tensor:
        """``dE/dx = Phi^T (lambda * E'_expert(Phi x))``, shape ``(n, M)`` float64.

        ``E'(u) = sign(u)`` (0 at ``u = 0``, as autograd) for Laplace experts and
        ``2 u / (1 + u^2)`` for Student's t experts.
        """
        x = self._input(x)
        u = x @ self.Phi.T
        d = torch.sign(u) if self.expert == "laplace" else 2.0 * u / (1.0 + u * u)
        return (d * self.lam) @ self.Phi

    # ------------------------------------------------------------------ normalisation
    def expert_log_normalizers(self) -> np.ndarray:
        """``log z_l`` per expert (see :func:`expert_log_normalizer`), shape ``(L,)``."""
        return expert_log_normalizer(self.lam.cpu().numpy(), self.expert)

    def exact_log_z(self) -> float | None:
        """Closed-form ``log Z`` of a complete model (``L = M``), ``None`` otherwise.

        ``log Z = -log|det Phi| + sum_l log z_l`` (module docstring).

        Raises
        ------
        ValueError
            For a complete Student's t model with some ``lambda_l <= 1/2``: its ``Z`` is infinite.
        """
        if self.size != self.n_dims:
            return None
        log_z = self.expert_log_normalizers()
        if not np.isfinite(log_z).all():
            bad = np.flatnonzero(~np.isfinite(log_z))
            raise ValueError(
                f"complete Student's t product of experts with lambda <= 1/2 at expert(s) {bad.tolist()} "
                f"(lambda = {self.lam.cpu().numpy()[bad].tolist()}): int (1 + u^2)^-lambda du diverges, so Z is "
                "infinite and the model is not a probability density"
            )
        _, logabsdet = torch.linalg.slogdet(self.Phi.cpu())
        return float(log_z.sum() - float(logabsdet))

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Exact ``log p(x) = -E(x) - log Z`` of a complete model, shape ``(n,)`` float64.

        Raises
        ------
        ValueError
            When ``log Z`` has no closed form (``L > M``).
        """
        log_z = self.exact_log_z()
        if log_z is None:
            raise ValueError(
                f"no closed-form log Z for an overcomplete product of experts (L={self.size} > M={self.n_dims})"
            )
        return -self.energy(x) - log_z

    def sample(self, n: int, generator: torch.Generator | None = None, *, seed: int | None = None) -> torch.Tensor:
        """Exact samples of a complete model: ``u_l`` iid from each expert, ``x = Phi^{-1} u``.

        Laplace: ``u = -sign(r) log(1 - |r|) / lambda`` with ``r`` uniform in (-1, 1).  Student's t:
        ``u = z / sqrt(2 g)`` with ``z ~ N(0, 1)``, ``g ~ Gamma(nu / 2)``, ``nu = 2 lambda - 1`` (the gamma
        draws come from ``numpy.random.default_rng`` seeded from ``generator``).

        Returns
        -------
        torch.Tensor, shape (n, M), float64
        """
        if self.size != self.n_dims:
            raise ValueError("exact sampling needs a complete model (L = M)")
        g = resolve_generator(generator, seed)
        L = self.size
        if self.expert == "laplace":
            r = 2.0 * torch.rand(n, L, generator=g, dtype=torch.float64) - 1.0
            u = -torch.sign(r) * torch.log1p(-r.abs()) / self.lam.cpu()
        else:
            lam = self.lam.cpu().numpy()
            if (lam <= 0.5).any():
                raise ValueError("Student's t experts with lambda <= 1/2 are improper; cannot sample")
            z = torch.randn(n, L, generator=g, dtype=torch.float64)
            seed_np = int(torch.randint(0, 2**62, (1,), generator=g))
            gam = np.random.default_rng(seed_np).standard_gamma((lam - 0.5)[None, :], size=(n, L))
            u = z / torch.sqrt(2.0 * torch.as_tensor(gam))
        x = torch.linalg.solve(self.Phi.cpu(), u.T).T
        return x.to(self.device)

    # ------------------------------------------------------------------ training interface
    def train_parameters(self) -> dict[str, torch.Tensor]:
        """Unconstrained parameters for gradient-based training (detached float64 copies).

        ``Phi``; for Student's t experts also ``log_lam = log(lambda)``.  Laplace weights stay
        fixed (the paper fixes ``lambda = 1``: it is redundant with the scale of ``Phi``).
        """
        out = {"Phi": self.Phi.detach().clone()}
        if self.expert == "student-t":
            out["log_lam"] = torch.log(self.lam).detach().clone()
        return out

    def energy_from_parameters(self, theta: Mapping[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """:meth:`energy` with the parameters ``theta`` of :meth:`train_parameters` (differentiable in both)."""
        lam = torch.exp(theta["log_lam"]) if "log_lam" in theta else self.lam
        return self._energy(x, theta["Phi"], lam, self.expert)

    def with_parameters(self, theta: Mapping[str, torch.Tensor]) -> "ProductOfExperts":
        """A new model from the parameters ``theta`` of :meth:`train_parameters` (validated)."""
        lam = torch.exp(theta["log_lam"]) if "log_lam" in theta else self.lam
        return ProductOfExperts(
            theta["Phi"].detach(), lam.detach(), self.expert, device=self.device, source="trained model"
        )

    # ------------------------------------------------------------------ files
    def to_arrays(self) -> dict[str, np.ndarray]:
        """Model-file arrays: ``Phi`` (L, M), ``lam`` (L,) float64 and ``model_type`` (0-d str)."""
        return {
            "Phi": self.Phi.detach().cpu().numpy().copy(),
            "lam": self.lam.detach().cpu().numpy().copy(),
            "model_type": np.array(self.family),
        }

    @classmethod
    def from_arrays(
        cls, arrays: Mapping[str, np.ndarray], source: str = "model", *, expert: str | None = None, device=None
    ) -> "ProductOfExperts":
        """A model from :meth:`to_arrays` output (e.g. an ``.npz`` file's contents).

        Parameters
        ----------
        arrays : mapping
            ``Phi`` (L, M); ``lam`` (L,) (optional for Laplace experts: default 1); ``model_type``
            (``"poe-laplace"`` / ``"poe-student-t"``), optional when ``expert`` is given.
        source : str
            Named in error messages (e.g. the file path).
        expert : {"laplace", "student-t"}, optional
            The expert type when ``arrays`` carries no ``model_type``.

        Raises
        ------
        ModelFileError
            Naming ``source``, the array and the problem: missing or unexpected arrays, wrong
            shapes, NaN / inf, ``lam <= 0``, rank-deficient ``Phi``, unknown or conflicting
            ``model_type``.
        """
        mt = _model_type(arrays)
        if mt is not None and mt not in FAMILY_EXPERT:
            raise ModelFileError(
                f"{source}: array 'model_type' is {mt!r}, not a product of experts "
                f"(expected one of {sorted(FAMILY_EXPERT)})"
            )
        if expert is not None and expert not in EXPERTS:
            raise ValueError(f"unknown expert {expert!r}; choose one of {sorted(EXPERTS)}")
        if mt is not None and expert is not None and FAMILY_EXPERT[mt] != expert:
            raise ModelFileError(f"{source}: array 'model_type' is {mt!r} but expert={expert!r} was requested")
        if mt is None and expert is None:
            raise ModelFileError(
                f"{source}: missing array 'model_type' (needed to tell Laplace from Student's t experts)"
            )
        expert = FAMILY_EXPERT[mt] if mt is not None else expert
        _check_keys(arrays, ("Phi", "lam"), source, EXPERTS[expert])
        phi = _array(arrays, "Phi", source, 2)
        if "lam" in arrays or expert == "student-t":
            lam = _array(arrays, "lam", source, 1)
        else:
            lam = None
        return cls(phi, lam, expert, device=device, source=source)
