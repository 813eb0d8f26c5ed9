"""Hamiltonian / Metropolis kernels of the continuous annealing path (Sohl-Dickstein & Culpepper 2012).

Ground truth is analytic: a correlated Gaussian target (exact log Z, exact samples) and a
half-normal target under a non-negativity constraint (reflection at the boundary).
"""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from logzbench import schedules
from logzbench.estimators.ais import ais
from logzbench.models.hamiltonian import HamiltonianPath, default_gamma, gaussian_proposal

D = 4


def _gaussian_target(seed=0, dim=D):
    """``E(x) = x^T A x / 2`` with a random SPD ``A`` (condition number ~10); its exact log Z."""
    g = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(g.normal(size=(dim, dim)))
    A = Q @ np.diag(np.linspace(0.5, 5.0, dim)) @ Q.T
    At = torch.as_tensor(A)
    log_z = 0.5 * dim * math.log(2 * math.pi) - 0.5 * float(np.linalg.slogdet(A)[1])
    return At, (lambda x: 0.5 * ((x @ At) * x).sum(dim=1)), log_z


def _path(kernel, energy1, dim=D, lower=None, **kw):
    e0, s0, lz0, g0 = gaussian_proposal(dim)
    return HamiltonianPath(e0, s0, lz0, energy1, kernel=kernel, grad0=g0, lower=lower, **kw)


def test_default_gamma_randomises_half_the_power_per_unit_time():
    for eps in (0.05, 0.2, 1.0):
        assert (1 - default_gamma(eps)) ** (1 / eps) == pytest.approx(0.5)


@pytest.mark.parametrize("kernel", ["hais", "hmc", "mh"])
def test_kernel_leaves_a_gaussian_invariant(kernel):
    """Start at exact samples of N(0, A^-1), apply the kernel at beta = 1: x^T A x stays chi^2_D
    and every coordinate keeps its exact normal marginal (Kolmogorov-Smirnov)."""
    A, energy, _ = _gaussian_target(1)
    cov = torch.linalg.inv(A)
    g = torch.Generator().manual_seed(2)
    n = 20_000
    L = torch.linalg.cholesky(cov)
    x0 = torch.randn(n, D, generator=g, dtype=torch.float64) @ L.T
    path = _path(kernel, energy, step_size=0.3 if kernel != "mh" else 0.2, mh_sigma=0.5)
    state = path.state_from_data(x0)._replace(v=torch.randn(n, D, generator=g, dtype=torch.float64))
    for _ in range(30):
        state = path.transition(state, 1.0, g)
    x = state.x
    q = ((x @ A) * x).sum(dim=1).numpy()
    assert stats.kstest(q, stats.chi2(D).cdf).pvalue > 1e-3
    for i in range(D):
        assert stats.kstest(x[:, i].numpy(), stats.norm(scale=float(cov[i, i]) ** 0.5).cdf).pvalue > 1e-3
    assert 0.2 < path.acceptance_rate < 1.0


def test_kernel_is_not_trivially_passing():
    """The same statistical test rejects unadjusted dynamics with a wrong gradient (every move
    accepted), so its passing above means something."""
    A, energy, _ = _gaussian_target(1)
    cov = torch.linalg.inv(A)
    g = torch.Generator().manual_seed(2)
    n = 20_000
    x0 = torch.randn(n, D, generator=g, dtype=torch.float64) @ torch.linalg.cholesky(cov).T
    path = _path("hais", energy, step_size=0.3, grad1=lambda x: 2 * x @ A)  # twice the true gradient
    state = path.state_from_data(x0)._replace(v=torch.randn(n, D, generator=g, dtype=torch.float64))
    path._accept = lambda log_ratio, generator: torch.ones_like(log_ratio, dtype=torch.bool)
    for _ in range(30):
        state = path.transition(state, 1.0, g)
    q = ((state.x @ A) * state.x).sum(dim=1).numpy()
    assert stats.kstest(q, stats.chi2(D).cdf).pvalue < 1e-6


@pytest.mark.parametrize("kernel", ["hais", "mh"])
def test_reflection_at_a_lower_bound_keeps_the_truncated_target(kernel):
    """Target N(0, I) restricted to x >= 0 (a half-normal per coordinate): reflection (HAIS) or
    rejection (MH) at the boundary must keep it invariant."""
    dim, n = 3, 20_000
    g = torch.Generator().manual_seed(5)
    x0 = torch.randn(n, dim, generator=g, dtype=torch.float64).abs()

    def energy(x):
        return torch.where((x >= 0).all(dim=1), 0.5 * (x**2).sum(dim=1), torch.full_like(x[:, 0], math.inf))

    path = _path(
        kernel,
        energy,
        dim=dim,
        lower=torch.zeros(dim, dtype=torch.float64),
        step_size=0.5,
        grad1=lambda x: x,
        mh_sigma=0.5,
    )
    state = path.state_from_data(x0)._replace(v=torch.randn(n, dim, generator=g, dtype=torch.float64))
    for _ in range(30):
        state = path.transition(state, 1.0, g)
    assert (state.x >= 0).all()
    for i in range(dim):
        assert stats.kstest(state.x[:, i].numpy(), stats.halfnorm.cdf).pvalue > 1e-3


@pytest.mark.parametrize("kernel", ["hais", "hmc", "mh"])
def test_annealing_recovers_the_gaussian_log_z(kernel):
    _, energy, log_z = _gaussian_target(3)
    path = _path(kernel, energy)
    res = ais(path, schedules.linear(300), 400, torch.Generator().manual_seed(0), n_bootstrap=0)
    assert abs(res.log_z - log_z) < 4 * res.log_z_stderr + 0.01, (res.log_z, log_z, res.log_z_stderr)


def test_hais_needs_fewer_distributions_than_the_baselines():
    """At few intermediate distributions HAIS (momentum kept) is closer to log Z than AIS with a
    random-walk kernel and than AIS with a fully refreshed momentum, over repeated runs."""
    _, energy, log_z = _gaussian_target(4, dim=8)
    err = {}
    for kernel in ("hais", "hmc", "mh"):
        e = []
        for seed in range(6):
            path = _path(kernel, energy, dim=8)
            e.append(
                ais(path, schedules.linear(30), 200, torch.Generator().manual_seed(seed), n_bootstrap=0).log_z - log_z
            )
        err[kernel] = float(np.mean(np.square(e)))
    assert err["hais"] < err["hmc"] and err["hais"] < err["mh"], err


def test_bad_settings():
    _, energy, _ = _gaussian_target(0)
    with pytest.raises(ValueError, match="kernel"):
        _path("leapfrog", energy)
    with pytest.raises(ValueError, match="gamma"):
        _path("hais", energy, gamma=0.0)
    with pytest.raises(ValueError, match="step_size"):
        _path("hais", energy, step_size=-1.0)
