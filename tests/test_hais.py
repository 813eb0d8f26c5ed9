"""HAIS and its baselines through logzbench.estimators.hais, on models with closed forms.

Two minimal models implementing the continuous-model interfaces: an analysis model with a
Gaussian energy (exact log Z) and a linear-Gaussian generative model (exact marginal p(x)).
"""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from logzbench import schedules
from logzbench.estimators.hais import hais


class GaussianEnergy:
    """Analysis model ``E(x) = x^T A x / 2``."""

    kind, family = "analysis", "test-gaussian"
    device = torch.device("cpu")

    def __init__(self, A):
        self.A = torch.as_tensor(A, dtype=torch.float64)
        self.n_dims = self.A.shape[0]

    def energy(self, x):
        return 0.5 * ((x @ self.A) * x).sum(dim=1)

    def exact_log_z(self):
        return 0.5 * self.n_dims * math.log(2 * math.pi) - 0.5 * float(torch.logdet(self.A))


class LinearGaussian:
    """Generative model ``a ~ N(0, I_L)``, ``x | a ~ N(Phi a, s^2 I_M)``."""

    kind, family = "generative", "test-linear-gaussian"
    device = torch.device("cpu")

    def __init__(self, Phi, s=0.5):
        self.Phi = torch.as_tensor(Phi, dtype=torch.float64)
        self.n_dims, self.n_latent = self.Phi.shape
        self.s = s

    def prior_energy(self, a):
        return 0.5 * (a**2).sum(dim=1)

    def prior_log_z(self):
        return 0.5 * self.n_latent * math.log(2 * math.pi)

    def sample_prior(self, n, generator):
        return torch.randn(n, self.n_latent, generator=generator, dtype=torch.float64)

    def likelihood_energy(self, x, a):
        r = x - a @ self.Phi.T
        return 0.5 * (r**2).sum(dim=1) / self.s**2 + 0.5 * self.n_dims * math.log(2 * math.pi * self.s**2)

    def latent_lower(self):
        return None

    def exact_log_likelihood(self, x):
        cov = self.Phi @ self.Phi.T + self.s**2 * torch.eye(self.n_dims, dtype=torch.float64)
        return torch.as_tensor(stats.multivariate_normal(np.zeros(self.n_dims), cov.numpy()).logpdf(x.numpy()))


def _spd(dim, seed):
    g = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(g.normal(size=(dim, dim)))
    return Q @ np.diag(np.linspace(0.5, 4.0, dim)) @ Q.T


@pytest.mark.parametrize("estimator", ["hais", "ais-hmc", "ais-mh"])
def test_analysis_model_log_z_and_test_log_likelihood(estimator):
    model = GaussianEnergy(_spd(5, 0))
    X = torch.randn(50, 5, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    res = hais(model, estimator, schedules.linear(300), 300, torch.Generator().manual_seed(1), data=X, n_bootstrap=0)
    exact = model.exact_log_z()
    assert res.estimator == estimator and abs(res.log_z - exact) < 4 * res.log_z_stderr + 0.01
    exact_ll = float((-model.energy(X)).mean()) - exact
    assert abs(res.mean_log_likelihood - exact_ll) < 4 * res.mean_log_likelihood_stderr + 0.01
    assert 0 < res.extra["acceptance_rate"] <= 1 and res.settings["kernel"] in ("hais", "hmc", "mh")
    assert res.n_sweeps == 299 and res.seconds > 0


def test_generative_model_one_run_per_test_point():
    g = np.random.default_rng(3)
    model = LinearGaussian(g.normal(size=(4, 2)), s=0.5)
    X = torch.as_tensor(g.normal(size=(6, 4)) * 1.5)
    res = hais(model, "hais", schedules.linear(200), 200, torch.Generator().manual_seed(2), data=X, n_bootstrap=0)
    exact = model.exact_log_likelihood(X).numpy()
    per = res.per_example_log_likelihood
    se = res.extra["per_example_stderr_mean"]
    assert per.shape == (6,) and res.log_weights.shape == (6, 200)
    assert np.all(np.abs(per - exact) < 5 * se + 0.02), (per - exact, se)
    assert abs(res.mean_log_likelihood - exact.mean()) < 4 * res.mean_log_likelihood_stderr + 0.01
    assert math.isnan(res.log_z)


def test_generative_model_with_zero_basis_is_exact():
    """Phi = 0: the likelihood does not depend on the latent, every weight is exact (Eq. 41)."""
    model = LinearGaussian(np.zeros((3, 2)), s=0.7)
    X = torch.randn(4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    res = hais(model, "ais-mh", schedules.linear(10), 20, torch.Generator().manual_seed(0), data=X, n_bootstrap=0)
    assert np.allclose(res.per_example_log_likelihood, model.exact_log_likelihood(X).numpy(), atol=1e-10)


def _log_z_mse(model, exact, *, K, chains, n_seeds=5):
    """Mean squared error of log Z-hat over ``n_seeds`` runs, per estimator."""
    out = {}
    for est in ("hais", "ais-hmc", "ais-mh"):
        errs = [
            hais(model, est, schedules.linear(K), chains, torch.Generator().manual_seed(s), n_bootstrap=0).log_z - exact
            for s in range(n_seeds)
        ]
        out[est] = float(np.mean(np.square(errs)))
    return out


def test_hais_converges_with_fewer_distributions_than_the_baselines():
    """Sohl-Dickstein & Culpepper Figs 2-3: at few intermediate distributions HAIS's log Z error is
    smaller than AIS with a random-walk kernel and than AIS with fully resampled momenta (mean
    squared error over repeated runs, on an ill-conditioned 12-dimensional Gaussian)."""
    model = GaussianEnergy(_spd(12, 5) * 4)
    exact = model.exact_log_z()
    mse = _log_z_mse(model, exact, K=50, chains=100)
    assert mse["hais"] < mse["ais-hmc"] and mse["hais"] < mse["ais-mh"], mse


def test_bad_input():
    model = LinearGaussian(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="test data"):
        hais(model, "hais", schedules.linear(5), 4, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="unknown continuous estimator"):
        hais(model, "ais", schedules.linear(5), 4, torch.Generator().manual_seed(0))


def test_hais_beats_the_baselines_on_a_complete_laplace_poe():
    """The paper's Fig. 3 setting in small: a complete (16 x 16) product of Laplace experts with its
    closed-form log Z; at 100 intermediate distributions HAIS's mean squared log Z error over
    repeated runs is below both baselines'."""
    from logzbench.models.poe import ProductOfExperts

    g = np.random.default_rng(0)
    Q, _ = np.linalg.qr(g.normal(size=(16, 16)))
    model = ProductOfExperts(Q * np.exp(g.normal(size=16) * 0.5)[:, None], np.ones(16), expert="laplace")
    exact = model.exact_log_z()
    mse = _log_z_mse(model, exact, K=100, chains=200)
    assert mse["hais"] < mse["ais-hmc"] and mse["hais"] < mse["ais-mh"], mse
