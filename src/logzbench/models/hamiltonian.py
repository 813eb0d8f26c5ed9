"""Annealing paths with Hamiltonian (and Metropolis) kernels for continuous models
(Sohl-Dickstein & Culpepper 2012, "Hamiltonian annealed importance sampling", Sec. 2.3).

The path is the geometric one of the paper's Eq. (12) in energies,

    E_beta(x) = (1 - beta) E_q(x) + beta E_p(x),        f_beta = exp(-E_beta),

from a normalised proposal ``q = exp(-E_q) / Z_q`` (exact samples, known ``log Z_q``) to an
unnormalised target ``exp(-E_p)``.  Its state carries a momentum ``v`` next to the position
``x`` (both ``(n_chains, D)`` float64) and the two energies at ``x``, so reweighting costs
nothing extra.  Momenta are standard normal under every ``pi_beta``, so they cancel from the
AIS weights (Eqs. 24-25): :func:`logzbench.estimators.ais.ais` runs unchanged on this path.

Kernels (:data:`KERNELS`), one transition per intermediate distribution:

``"hais"``
    One leapfrog step of size ``step_size`` (position half step, momentum full step, position
    half step), Metropolis accept / reject of ``(x', -v')``, then a partial momentum refresh
    ``v <- -sqrt(1 - gamma) v + sqrt(gamma) r``, ``r ~ N(0, I)``.  The momentum is kept across
    intermediate distributions.  ``gamma`` defaults to :func:`default_gamma`: half the momentum
    power randomised per unit simulation time, ``(1 - gamma)^(1 / step_size) = 1/2``.
``"hmc"``
    The same with ``gamma = 1``: the momentum is resampled at every step (the paper's "AIS with
    one Hamiltonian leapfrog step ... we randomize the momenta before each update step").
``"mh"``
    Gaussian random-walk Metropolis-Hastings with proposal scale ``mh_sigma`` (0.1 in the paper).

Linear constraints ``x >= lower`` (e.g. the non-negative ``d`` of the bilinear model) are
handled as in the paper: whenever a leapfrog position half step crosses the boundary, the
position is reflected across it and that momentum component negated (a volume-preserving,
reversible map, so the Metropolis step stays exact).  A random-walk proposal outside the
constraint is rejected.

Every transition leaves ``pi_beta(x) N(v; 0, I)`` invariant.  Acceptance counts are kept on
the path (:attr:`HamiltonianPath.acceptance_rate`).  Gradients come from the energy objects'
``grad`` when given, else from autograd.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch

from .base import AcceptanceCounts

#: Transition kernels of :class:`HamiltonianPath`.
KERNELS = ("hais", "hmc", "mh")

EnergyFn = Callable[[torch.Tensor], torch.Tensor]


class HMCState(NamedTuple):
    """Batched chain state: position ``x`` and momentum ``v`` (``(n, D)``, float64), and the
    proposal and target energies ``e0 = E_q(x)``, ``e1 = E_p(x)`` (``(n,)``)."""

    x: torch.Tensor
    v: torch.Tensor
    e0: torch.Tensor
    e1: torch.Tensor


def default_gamma(step_size: float) -> float:
    """``gamma`` randomising half the momentum power per unit simulation time:
    ``(1 - gamma)^(1 / step_size) = 1/2``, i.e. ``gamma = 1 - 2^(-step_size)`` (0.129 at 0.2)."""
    return 1.0 - 0.5 ** float(step_size)


def autograd_grad(energy: EnergyFn) -> EnergyFn:
    """``x -> dE/dx`` (``(n, D)``) of a batched energy by autograd."""

    def grad(x: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            xg = x.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(energy(xg).sum(), xg)
        return g

    return grad


class HamiltonianPath(AcceptanceCounts):
    """The path ``E_beta = (1 - beta) E_q + beta E_p`` with a Hamiltonian or random-walk kernel.

    Parameters
    ----------
    energy0 : callable ``(n, D) -> (n,)``
        ``E_q`` of the normalised proposal.
    sample0 : callable ``(n, generator) -> (n, D)``
        Exact samples of ``q``.
    log_z0 : float
        ``log Z_q`` (``q = exp(-E_q) / Z_q``).
    energy1 : callable ``(n, D) -> (n,)``
        ``E_p`` of the target (unnormalised; ``+inf`` outside its support).
    kernel : {"hais", "hmc", "mh"}
    step_size : float
        Leapfrog step size ``epsilon`` (0.2 in the paper).
    gamma : float, optional
        Momentum refresh fraction in (0, 1] (``"hais"``; default :func:`default_gamma`).
    mh_sigma : float
        Random-walk proposal scale (``"mh"``).
    lower : torch.Tensor, shape (D,), optional
        Lower bounds of the coordinates (``-inf`` where unconstrained).
    grad0, grad1 : callable, optional
        Analytic gradients of ``energy0`` / ``energy1`` (default autograd).
    n_leapfrog : int
        Leapfrog steps per transition (1 in the paper).
    """

    def __init__(
        self,
        energy0: EnergyFn,
        sample0: Callable,
        log_z0: float,
        energy1: EnergyFn,
        *,
        kernel: str = "hais",
        step_size: float = 0.2,
        gamma: float | None = None,
        mh_sigma: float = 0.1,
        lower: torch.Tensor | None = None,
        grad0: EnergyFn | None = None,
        grad1: EnergyFn | None = None,
        n_leapfrog: int = 1,
    ):
        if kernel not in KERNELS:
            raise ValueError(f"unknown kernel {kernel!r}; choose one of {KERNELS}")
        if not (math.isfinite(step_size) and step_size > 0):
            raise ValueError(f"step_size must be > 0, got {step_size!r}")
        if not (math.isfinite(mh_sigma) and mh_sigma > 0):
            raise ValueError(f"mh_sigma must be > 0, got {mh_sigma!r}")
        if kernel == "hmc":
            gamma = 1.0
        elif gamma is None:
            gamma = default_gamma(step_size)
        if not (0.0 < float(gamma) <= 1.0):
            raise ValueError(f"gamma must be in (0, 1], got {gamma!r}")
        if int(n_leapfrog) != n_leapfrog or n_leapfrog < 1:
            raise ValueError(f"n_leapfrog must be a positive integer, got {n_leapfrog!r}")
        self.energy0, self.energy1 = energy0, energy1
        self.grad0 = grad0 or autograd_grad(energy0)
        self.grad1 = grad1 or autograd_grad(energy1)
        self._sample0, self._log_z0 = sample0, float(log_z0)
        self.kernel, self.step_size, self.gamma = kernel, float(step_size), float(gamma)
        self.mh_sigma, self.n_leapfrog = float(mh_sigma), int(n_leapfrog)
        self.lower = lower
        self.n_proposed = 0
        self.n_accepted = 0

    def settings(self) -> dict:
        out = {"kernel": self.kernel, "step_size": self.step_size, "n_leapfrog": self.n_leapfrog}
        if self.kernel == "mh":
            return {"kernel": "mh", "mh_sigma": self.mh_sigma}
        out["gamma"] = self.gamma
        return out

    def _state(self, x: torch.Tensor, v: torch.Tensor) -> HMCState:
        return HMCState(x, v, self.energy0(x).double(), self.energy1(x).double())

    # ------------------------------------------------------------------ AnnealingPath protocol
    def log_z0(self) -> float:
        return self._log_z0

    def sample_initial(self, n_chains: int, generator: torch.Generator) -> HMCState:
        x = self._sample0(int(n_chains), generator).double()
        v = torch.randn(x.shape, generator=generator, dtype=torch.float64, device=x.device)
        return self._state(x, v)

    def log_f(self, state: HMCState, beta: float) -> torch.Tensor:
        return -((1.0 - beta) * state.e0 + beta * state.e1)

    def log_f_ratio(self, state: HMCState, beta_from: float, beta_to: float) -> torch.Tensor:
        return -(beta_to - beta_from) * (state.e1 - state.e0)

    def state_from_data(self, data: torch.Tensor) -> HMCState:
        x = torch.as_tensor(data, dtype=torch.float64)
        return self._state(x, torch.zeros_like(x))

    def transition(self, state: HMCState, beta: float, generator: torch.Generator) -> HMCState:
        if self.kernel == "mh":
            return self._metropolis(state, beta, generator)
        return self._hamiltonian(state, beta, generator)

    # ------------------------------------------------------------------ kernels
    def _energy(self, state: HMCState, beta: float) -> torch.Tensor:
        return (1.0 - beta) * state.e0 + beta * state.e1

    def _grad(self, x: torch.Tensor, beta: float) -> torch.Tensor:
        g = self.grad1(x) * beta
        if beta < 1.0:
            g = g + (1.0 - beta) * self.grad0(x)
        return g

    def _drift(self, x: torch.Tensor, v: torch.Tensor, h: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Position half step ``x + h v`` with reflection at the lower bounds."""
        x = x + h * v
        if self.lower is not None:
            below = x < self.lower
            if bool(below.any()):
                x = torch.where(below, 2.0 * self.lower - x, x)
                v = torch.where(below, -v, v)
        return x, v

    def _accept(self, log_ratio: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        u = torch.rand(log_ratio.shape, generator=generator, dtype=torch.float64, device=log_ratio.device)
        ok = torch.isfinite(log_ratio) & (torch.log(u) < log_ratio)
        self.n_proposed += int(ok.numel())
        self.n_accepted += int(ok.sum())
        return ok

    def _hamiltonian(self, state: HMCState, beta: float, generator: torch.Generator) -> HMCState:
        eps = self.step_size
        x, v = state.x, state.v
        for _ in range(self.n_leapfrog):
            x, v = self._drift(x, v, 0.5 * eps)
            v = v - eps * self._grad(x, beta)
            x, v = self._drift(x, v, 0.5 * eps)
        new = self._state(x, -v)
        h0 = self._energy(state, beta) + 0.5 * (state.v**2).sum(dim=1)
        h1 = self._energy(new, beta) + 0.5 * (new.v**2).sum(dim=1)
        ok = self._accept(h0 - h1, generator)[:, None]
        x = torch.where(ok, new.x, state.x)
        v = torch.where(ok, new.v, state.v)
        e0 = torch.where(ok[:, 0], new.e0, state.e0)
        e1 = torch.where(ok[:, 0], new.e1, state.e1)
        r = torch.randn(v.shape, generator=generator, dtype=torch.float64, device=v.device)
        v = -math.sqrt(1.0 - self.gamma) * v + math.sqrt(self.gamma) * r
        return HMCState(x, v, e0, e1)

    def _metropolis(self, state: HMCState, beta: float, generator: torch.Generator) -> HMCState:
        r = torch.randn(state.x.shape, generator=generator, dtype=torch.float64, device=state.x.device)
        x = state.x + self.mh_sigma * r
        if self.lower is not None:
            inside = (x >= self.lower).all(dim=1)
            x = torch.where(inside[:, None], x, state.x)  # outside the support: rejected below
        else:
            inside = torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
        new = self._state(x, state.v)
        log_ratio = torch.where(
            inside, self._energy(state, beta) - self._energy(new, beta), torch.full_like(new.e0, -math.inf)
        )
        ok = self._accept(log_ratio, generator)
        return HMCState(
            torch.where(ok[:, None], new.x, state.x),
            state.v,
            torch.where(ok, new.e0, state.e0),
            torch.where(ok, new.e1, state.e1),
        )


# ---------------------------------------------------------------------- standard proposals
def gaussian_proposal(dim: int, scale: float = 1.0, device=None) -> tuple[EnergyFn, Callable, float, EnergyFn]:
    """``q = N(0, scale^2 I_dim)``: ``(energy, sampler, log Z, grad)``."""
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"proposal scale must be > 0, got {scale!r}")
    s2 = float(scale) ** 2

    def energy(x):
        return 0.5 * (x**2).sum(dim=1) / s2

    def sample(n, generator):
        return scale * torch.randn((n, dim), generator=generator, dtype=torch.float64, device=device)

    def grad(x):
        return x / s2

    return energy, sample, 0.5 * dim * math.log(2 * math.pi * s2), grad
