"""EM with a Hamiltonian Monte Carlo E-step for the generative models (paper Sec. 4).

The linear-Gaussian model has a closed-form likelihood, so training is checked against the
true generating model and the closed-form maximum-likelihood solution.
"""

import numpy as np
import pytest
import torch

from logzbench import schedules
from logzbench.estimators.ais import ais
from logzbench.models.bilinear import BilinearGenerative
from logzbench.models.linear_generative import LinearGenerative
from logzbench.training.em import posterior_path, train_em

SIGMA_N = 0.1


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def gaussian_problem():
    """3,000 rows from a known linear-Gaussian model (M = 4, L = 2, sigma_n = 0.1)."""
    true = LinearGenerative.random(4, 2, prior="gaussian", sigma_n=SIGMA_N, seed=11)
    X = true.sample(3000, torch.Generator().manual_seed(1))
    return true, X


def _ml_solution(X: torch.Tensor, L: int, sigma_n: float) -> LinearGenerative:
    """Closed-form maximum likelihood with fixed sigma_n (Tipping & Bishop 1999):
    ``Phi = U_L (Lambda_L - sigma_n^2)^(1/2)`` from the sample covariance."""
    ev, U = torch.linalg.eigh(X.T @ X / X.shape[0])
    return LinearGenerative(U[:, -L:] * torch.sqrt(ev[-L:] - sigma_n**2), sigma_n=sigma_n)


def test_em_linear_gaussian_approaches_the_true_model(gaussian_problem):
    """From a random start (~100 nats per row below the truth) EM reaches the maximum-likelihood
    solution, and hence the generating model, to within 0.01 nats per row.

    Tolerance: the ML solution beats the true model on its training data by only O(k / 2n)
    ~ 0.001-0.002 nats (k = 7 free parameters, n = 3,000 rows).  The Monte Carlo E-step leaves
    ``Phi`` fluctuating around the ML point with a loss of about k / (2 n_eff) ~ 0.001 nats, with
    n_eff ~ n x transitions; 0.01 nats per row is ten times that, and 1e-4 of the initial gap.
    """
    true, X = gaussian_problem
    init = LinearGenerative.random(4, 2, prior="gaussian", sigma_n=SIGMA_N, seed=5)
    ll = lambda m: float(m.exact_log_likelihood(X).mean())  # noqa: E731
    ll_true, ll_init, ll_ml = ll(true), ll(init), ll(_ml_solution(X, 2, SIGMA_N))
    n_iter = 30
    model, history = train_em(init, X, n_iter=n_iter, seed=0)
    ll_em = ll(model)

    assert ll_init < ll_true - 50  # the start is far off
    assert 0 < ll_ml - ll_true < 0.01  # the ML bound is barely above the truth
    assert ll_em > ll_ml - 0.01, (ll_em, ll_ml)
    assert ll_em > ll_true - 0.01, (ll_em, ll_true)
    assert ll_em < ll_ml + 1e-9  # nothing beats maximum likelihood
    assert torch.equal(init.Phi, LinearGenerative.random(4, 2, sigma_n=SIGMA_N, seed=5).Phi)  # input untouched

    assert len(history) == n_iter
    assert history[-1]["exact_log_likelihood"] == pytest.approx(ll_em)
    assert history[-1]["exact_log_likelihood"] > history[0]["exact_log_likelihood"]
    assert history[-1]["objective"] < history[0]["objective"]
    assert history[-1]["recon"] < history[0]["recon"]
    secs = [r["seconds"] for r in history]
    assert all(b >= a for a, b in zip(secs, secs[1:]))
    assert all(0.5 < r["acceptance"] <= 1.0 for r in history)


def test_em_without_parameter_expansion_still_climbs(gaussian_problem):
    """Plain Monte Carlo EM (no PX rescaling) improves too, but converges more slowly along the
    directions only the prior determines: after 30 iterations it has closed > 99 % of the initial
    gap yet is still short of the ML solution."""
    true, X = gaussian_problem
    init = LinearGenerative.random(4, 2, prior="gaussian", sigma_n=SIGMA_N, seed=5)
    ll = lambda m: float(m.exact_log_likelihood(X).mean())  # noqa: E731
    model, _ = train_em(init, X, n_iter=30, seed=0, parameter_expansion=False)
    ll_true, ll_init, ll_em = ll(true), ll(init), ll(model)
    assert ll_em > ll_init + 0.99 * (ll_true - ll_init)
    assert ll_em < ll(_ml_solution(X, 2, SIGMA_N))


def test_em_is_deterministic_for_a_seed(gaussian_problem):
    _, X = gaussian_problem
    X = X[:300]
    init = LinearGenerative.random(4, 2, prior="laplace", sigma_n=SIGMA_N, seed=3)
    m1, h1 = train_em(init, X, n_iter=4, seed=7, n_burnin=1, n_map=20)
    m2, h2 = train_em(init, X, n_iter=4, seed=7, n_burnin=1, n_map=20)
    m3, _ = train_em(init, X, n_iter=4, seed=8, n_burnin=1, n_map=20)
    assert torch.equal(m1.Phi, m2.Phi)
    drop = lambda h: [{k: v for k, v in r.items() if k != "seconds"} for r in h]  # noqa: E731
    assert drop(h1) == drop(h2)
    assert not torch.equal(m1.Phi, m3.Phi)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_em_refuses_non_finite_data(bad):
    X = np.random.default_rng(0).normal(size=(50, 4))
    X[7, 2] = bad
    with pytest.raises(ValueError, match=f"X_train contains {'NaN' if np.isnan(bad) else 'inf'}.*row 7"):
        train_em(LinearGenerative.random(4, 2), X, n_iter=1)


def test_em_refuses_bad_shapes_and_settings():
    X = np.zeros((10, 4))
    with pytest.raises(ValueError, match="columns"):
        train_em(LinearGenerative.random(3, 2), X, n_iter=1)
    with pytest.raises(ValueError, match="kernel"):
        train_em(LinearGenerative.random(4, 2), X, n_iter=1, kernel="mh")
    with pytest.raises(ValueError, match="n_transitions"):
        train_em(LinearGenerative.random(4, 2), X, n_iter=1, n_transitions=0)


@pytest.mark.parametrize("kernel", ["hmc", "hais"])
def test_em_laplace_smoke(kernel):
    """Laplace prior (no closed form): the Monte Carlo EM objective (mean -log p(x, a) at the
    posterior samples) and the reconstruction error go down."""
    true = LinearGenerative.random(4, 3, prior="laplace", sigma_n=SIGMA_N, seed=21)
    X = true.sample(600, torch.Generator().manual_seed(2))
    kw = {} if kernel == "hmc" else {"n_leapfrog": 1, "n_transitions": 20}
    model, history = train_em(
        LinearGenerative.random(4, 3, prior="laplace", sigma_n=SIGMA_N, seed=22),
        X,
        n_iter=12,
        seed=1,
        kernel=kernel,
        **kw,
    )
    assert isinstance(model, LinearGenerative) and model.family == "linear-laplace"
    assert history[-1]["objective"] < history[0]["objective"] - 0.5
    assert history[-1]["recon"] < history[0]["recon"]
    assert "exact_log_likelihood" not in history[-1]


def test_em_bilinear_smoke():
    """Bilinear model: the objective goes down, the posterior samples respect d >= 0 (the
    objective stays finite), and the gauge ||Phi[:, l]|| = ||Psi[l]|| = 1 is kept."""
    true = BilinearGenerative.random(6, 4, 3, 2, sigma_n=SIGMA_N, seed=31)
    X = true.sample(600, torch.Generator().manual_seed(3))
    init = BilinearGenerative.random(6, 4, 3, 2, sigma_n=SIGMA_N, seed=32)
    model, history = train_em(init, X, n_iter=12, seed=2)
    assert isinstance(model, BilinearGenerative)
    assert all(np.isfinite(r["objective"]) for r in history)
    assert history[-1]["objective"] < history[0]["objective"] - 1.0
    torch.testing.assert_close(model.Phi.norm(dim=0), torch.ones(4, dtype=torch.float64))
    torch.testing.assert_close(model.Psi.norm(dim=1), torch.ones(4, dtype=torch.float64))


def test_posterior_path_normaliser_is_the_likelihood():
    """AIS on :func:`posterior_path` estimates log p(x) itself (the prior's log Z is inside
    energy1): exact with equal weights when Phi = 0 (Eq. 41), and close for a Gaussian model."""
    x = torch.randn(1, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    zero = LinearGenerative(torch.zeros(4, 2), sigma_n=0.3, prior="laplace")
    res = ais(
        posterior_path(zero, x.expand(32, 4)), schedules.linear(10), 32, torch.Generator().manual_seed(1), n_bootstrap=0
    )
    assert np.ptp(res.log_weights) < 1e-10
    assert res.log_z == pytest.approx(float(zero.exact_log_likelihood(x)), abs=1e-10)
    model = LinearGenerative.random(4, 2, sigma_n=0.3, seed=1)
    res = ais(
        posterior_path(model, x.expand(500, 4), step_size=0.1),
        schedules.linear(300),
        500,
        torch.Generator().manual_seed(2),
        n_bootstrap=0,
    )
    assert abs(res.log_z - float(model.exact_log_likelihood(x))) < 4 * res.log_z_stderr + 1e-3
