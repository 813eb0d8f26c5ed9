"""Two 2-D continuous user energies (:class:`logzbench.models.EnergyModel`) with closed-form log Z and
exact samples, for statistical tests of brackets and log Z estimators on models that no family of
logzbench samples natively.

``mixture()``
    Three isotropic Gaussian components (weights :data:`MIX_WEIGHTS`, means :data:`MIX_MEANS`, standard
    deviations :data:`MIX_SDS`), a normalised density times ``exp(MIX_LOG_Z)``.
``twisted()``
    The twisted Gaussian ("banana"): ``x1 ~ N(0, s^2)``, ``x2 | x1 ~ N(b (x1^2 - s^2), 1)``
    (``s = TWIST_S``, ``b = TWIST_B``), a normalised density times ``exp(TWIST_LOG_Z)``.  The map
    ``(x1, x2) -> (x1, x2 - b (x1^2 - s^2))`` has unit Jacobian, so the normaliser is that of the two
    Gaussians.  Its x1 is twice as wide as the estimators' default base ``N(0, I)`` and its arms carry a
    few per cent of the mass far out in x2, which chains from that base reach late.
"""

from __future__ import annotations

import math

import torch

from logzbench.models import EnergyModel

MIX_WEIGHTS = (0.5, 0.3, 0.2)
MIX_MEANS = ((-2.0, 0.0), (2.0, 1.0), (0.0, 3.0))
MIX_SDS = (0.6, 0.8, 0.5)
MIX_LOG_Z = 2.5

TWIST_S, TWIST_B, TWIST_LOG_Z = 2.0, 0.5, 1.0


def _mix_params():
    f64 = torch.float64
    return (
        torch.tensor(MIX_WEIGHTS, dtype=f64),
        torch.tensor(MIX_MEANS, dtype=f64),
        torch.tensor(MIX_SDS, dtype=f64),
    )


def mixture() -> EnergyModel:
    """The three-component mixture: ``log f = MIX_LOG_Z + log sum_k w_k N(x; mu_k, s_k^2 I)``."""
    w, mu, s = _mix_params()

    def log_f(x: torch.Tensor) -> torch.Tensor:
        d2 = ((x.double()[:, None, :] - mu[None]) ** 2).sum(-1)
        return MIX_LOG_Z + torch.logsumexp(torch.log(w) - d2 / (2 * s**2) - torch.log(2 * math.pi * s**2), dim=1)

    return EnergyModel(log_f, 2, "continuous", dtype=torch.float64, name="mixture")


def mixture_samples(n: int, seed: int) -> torch.Tensor:
    """``n`` exact samples of :func:`mixture`."""
    w, mu, s = _mix_params()
    g = torch.Generator().manual_seed(int(seed))
    k = torch.multinomial(w, n, replacement=True, generator=g)
    return mu[k] + s[k, None] * torch.randn(n, 2, generator=g, dtype=torch.float64)


def twisted() -> EnergyModel:
    """The twisted Gaussian: ``log f = TWIST_LOG_Z + log N(x1; 0, s^2) + log N(x2; b (x1^2 - s^2), 1)``."""
    s, b = TWIST_S, TWIST_B

    def log_f(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.double()[:, 0], x.double()[:, 1]
        return TWIST_LOG_Z - x1**2 / (2 * s * s) - (x2 - b * (x1**2 - s * s)) ** 2 / 2 - math.log(2 * math.pi * s)

    return EnergyModel(log_f, 2, "continuous", dtype=torch.float64, name="twisted")


def twisted_samples(n: int, seed: int) -> torch.Tensor:
    """``n`` exact samples of :func:`twisted`."""
    g = torch.Generator().manual_seed(int(seed))
    x1 = TWIST_S * torch.randn(n, generator=g, dtype=torch.float64)
    x2 = TWIST_B * (x1**2 - TWIST_S**2) + torch.randn(n, generator=g, dtype=torch.float64)
    return torch.stack([x1, x2], dim=1)


#: name -> (model factory, exact samples, exact log Z)
MODELS = {
    "mixture": (mixture, mixture_samples, MIX_LOG_Z),
    "twisted": (twisted, twisted_samples, TWIST_LOG_Z),
}
