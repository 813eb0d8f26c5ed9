"""Minimum probability flow training (L-BFGS) of the analysis models.

Ground truth: data sampled exactly from a known complete product of experts, whose test
log-likelihood is exact through the closed-form log Z.
"""

import math

import numpy as np
import pytest
import torch

from logzbench.models.mcrbm import MCRBM
from logzbench.models.poe import ProductOfExperts
from logzbench.training.mpf import hmc_connectivity, mpf_log_objective, train_mpf

M = 4


@pytest.fixture(scope="module")
def laplace_data():
    true = ProductOfExperts.random(M, expert="laplace", seed=1)
    return true, true.sample(5000, seed=2), true.sample(5000, seed=3)


def _mean_ll(model, x):
    return float(model.log_prob(x).mean())


def test_mpf_recovers_a_laplace_product_of_experts(laplace_data):
    """From a random init, MPF reaches the true model's average test log-likelihood to within
    0.05 nat per dimension, while the init is more than 0.25 nat per dimension worse.

    Tolerance: with 5000 samples and 16 parameters the excess test loss of an efficient
    estimator is ~ 16 / (2 * 5000) = 0.0016 nat in total; MPF is less efficient than maximum
    likelihood and 60 L-BFGS iterations do not converge fully, and runs of these settings reach
    ~0.002 nat / dim, so 0.05 nat / dim leaves a wide margin that still separates a fitted model
    from the init.
    """
    true, x_train, x_test = laplace_data
    init = ProductOfExperts.random(M, expert="laplace", seed=5, scale=0.3)
    ll_true, ll_init = _mean_ll(true, x_test) / M, _mean_ll(init, x_test) / M
    assert ll_true - ll_init > 0.25
    model, history = train_mpf(init, x_train, n_iter=60, n_rounds=3, seed=0)
    ll = _mean_ll(model, x_test) / M
    assert abs(ll - ll_true) < 0.05, (ll, ll_true, ll_init)
    assert ll - ll_init > 5 * 0.05
    assert torch.equal(model.lam, init.lam)  # Laplace weights stay fixed at 1
    assert isinstance(model, ProductOfExperts) and model is not init

    # the objective goes down within every round (K = 1 at the round's start), a lot in the first
    rounds = sorted({h["round"] for h in history})
    assert rounds == [0, 1, 2]
    for r in rounds:
        objs = [h["objective"] for h in history if h["round"] == r]
        assert objs[0] == 1.0 and objs[-1] < 1.0
        assert all(b <= a + 1e-12 for a, b in zip(objs, objs[1:]))  # L-BFGS iterates never go up
    first = [h["objective"] for h in history if h["round"] == 0]
    assert first[-1] < 0.97
    assert history[-1]["iteration"] == 60
    seconds = [h["seconds"] for h in history]
    assert all(b >= a for a, b in zip(seconds, seconds[1:]))
    assert all(0.0 < h["acceptance"] <= 1.0 and h["step_size"] > 0 for h in history)


def test_mpf_gradient_vanishes_at_the_true_model(laplace_data):
    """Consistency: with data from the model and the connectivity drawn at the true parameters,
    the gradient of the MPF objective at the truth is pure sampling noise (it shrinks like
    1 / sqrt(n)), while at a perturbed model it converges to a non-zero value."""
    true = laplace_data[0]

    def grad_norm(model, x):
        pairs = torch.cat([x, x])
        xp, delta, _ = hmc_connectivity(true, pairs, torch.Generator().manual_seed(9), step_size=0.5, antithetic=True)
        theta = {k: v.requires_grad_(True) for k, v in model.train_parameters().items()}
        (g,) = torch.autograd.grad(mpf_log_objective(model, theta, pairs, xp, delta), [theta["Phi"]])
        return float(g.norm())

    small, large = true.sample(20_000, seed=11), true.sample(320_000, seed=12)
    g_small, g_large = grad_norm(true, small), grad_norm(true, large)
    assert g_large < 0.5 * g_small  # 16x the data: ~4x smaller
    for scale in (0.8, 1.2):
        perturbed = ProductOfExperts(true.Phi * scale, true.lam, "laplace")
        assert g_large < 0.3 * grad_norm(perturbed, large)


def test_mpf_is_deterministic_for_a_seed(laplace_data):
    _, x_train, _ = laplace_data
    init = ProductOfExperts.random(M, expert="student-t", lam=1.0, seed=6, scale=0.5)
    runs = [train_mpf(init, x_train[:800], n_iter=10, n_rounds=2, seed=s) for s in (4, 4, 5)]
    (m1, h1), (m2, h2), (m3, _) = runs
    assert torch.equal(m1.Phi, m2.Phi) and torch.equal(m1.lam, m2.lam)
    assert [h["objective"] for h in h1] == [h["objective"] for h in h2]
    assert not torch.equal(m1.Phi, m3.Phi)


@pytest.mark.parametrize("bad,match", [(math.nan, "NaN"), (math.inf, "inf")])
def test_mpf_refuses_non_finite_data(laplace_data, bad, match):
    _, x_train, _ = laplace_data
    x = x_train[:100].clone()
    x[3, 1] = bad
    with pytest.raises(ValueError, match=match):
        train_mpf(ProductOfExperts.random(M, seed=0), x, n_iter=2, seed=0)
    with pytest.raises(ValueError, match="shape"):
        train_mpf(ProductOfExperts.random(M, seed=0), x_train[:, :3], n_iter=2, seed=0)
    with pytest.raises(ValueError, match="n_iter"):
        train_mpf(ProductOfExperts.random(M, seed=0), x_train, n_iter=0, seed=0)


def test_mpf_trains_student_t_and_mcrbm():
    """Both other families go through the same protocol: the objective drops, parameters stay
    valid (lambda > 0, sigma > 0), and a Student's t PoE improves its exact test likelihood."""
    true = ProductOfExperts.random(3, expert="student-t", lam=(1.5, 3.0), seed=1)
    x_train, x_test = true.sample(2000, seed=2), true.sample(2000, seed=3)
    init = ProductOfExperts.random(3, expert="student-t", lam=1.0, seed=5, scale=0.3)
    model, history = train_mpf(init, x_train, n_iter=40, n_rounds=2, seed=0)
    assert (model.lam > 0).all() and not torch.equal(model.lam, init.lam)
    assert _mean_ll(model, x_test) > _mean_ll(init, x_test) + 0.5
    assert abs(_mean_ll(model, x_test) - _mean_ll(true, x_test)) < 0.05 * 3

    rbm = MCRBM.random(3, 4, seed=0)
    x = x_train / x_train.std(0)
    trained, h = train_mpf(rbm, x, n_iter=12, n_rounds=2, seed=0)
    assert isinstance(trained, MCRBM) and float(trained.sigma) > 0
    assert all(np.isfinite(a).all() for k, a in trained.to_arrays().items() if k != "model_type")
    for r in (0, 1):
        objs = [rec["objective"] for rec in h if rec["round"] == r]
        assert objs[-1] < objs[0] == 1.0


def test_mpf_holds_fixed_parameters_and_trains_the_rest():
    """``fixed`` keeps a parameter at its initial value bit for bit while L-BFGS still lowers the
    objective through the others; names the model lacks, or all of them, are refused."""
    true = ProductOfExperts.random(3, expert="student-t", lam=(1.5, 3.0), seed=1)
    x = true.sample(1000, seed=2)
    x = x / x.std(0)
    rbm = MCRBM.random(3, 4, seed=0, sigma=1.0)
    trained, h = train_mpf(rbm, x, n_iter=12, n_rounds=2, seed=0, fixed=("log_sigma",))
    assert float(trained.sigma) == 1.0
    assert not torch.equal(trained.W, rbm.W) and not torch.equal(trained.P, rbm.P)
    for r in (0, 1):
        objs = [rec["objective"] for rec in h if rec["round"] == r]
        assert objs[-1] < objs[0] == 1.0
    with pytest.raises(ValueError, match=r"fixed names \['sigma'\] are not parameters of MCRBM"):
        train_mpf(rbm, x, n_iter=2, fixed=("sigma",))
    every = tuple(rbm.train_parameters())
    with pytest.raises(ValueError, match="nothing to train"):
        train_mpf(rbm, x, n_iter=2, fixed=every)


def test_train_continuous_holds_the_mcrbm_sigma_unless_learned():
    """The mcRBM's sigma stays at 1 (the released code's x^T x / 2) unless ``learn_sigma``; the
    switch is refused for the other families."""
    from logzbench.training.continuous import train_continuous

    true = ProductOfExperts.random(3, expert="student-t", lam=(1.5, 3.0), seed=1)
    x = true.sample(1000, seed=2)
    x = (x / x.std(0)).numpy()
    held, _ = train_continuous(x, family="mcrbm", size=4, n_iter=10, seed=0)
    learned, _ = train_continuous(x, family="mcrbm", size=4, n_iter=10, seed=0, learn_sigma=True)
    assert float(held.sigma) == 1.0
    assert float(learned.sigma) != 1.0
    with pytest.raises(ValueError, match="learn_sigma applies to the mcrbm family only"):
        train_continuous(x, family="poe-laplace", size=3, n_iter=2, learn_sigma=True)


def test_mpf_weight_decay_shrinks_the_weight_matrices_only():
    """``weight_decay`` penalises the 2-D parameters (here the mcRBM's P, C, W): their squared norm ends
    below the unpenalised fit's from the same start and seed; a negative decay is refused."""
    true = ProductOfExperts.random(3, expert="student-t", lam=(1.5, 3.0), seed=1)
    x = true.sample(1000, seed=2)
    x = x / x.std(0)
    rbm = MCRBM.random(3, 6, seed=0, scale=2.0)
    plain, _ = train_mpf(rbm, x, n_iter=20, n_rounds=2, seed=0, fixed=("log_sigma",))
    decayed, h = train_mpf(rbm, x, n_iter=20, n_rounds=2, seed=0, fixed=("log_sigma",), weight_decay=0.5)

    def sq(m):
        return sum(float((getattr(m, k) ** 2).sum()) for k in ("P", "C", "W"))

    assert sq(decayed) < sq(plain)
    assert all(math.isfinite(r["objective"]) for r in h)
    with pytest.raises(ValueError, match="weight_decay must be a finite number >= 0"):
        train_mpf(rbm, x, n_iter=2, weight_decay=-1.0)
