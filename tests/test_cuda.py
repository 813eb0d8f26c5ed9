"""CUDA: the same estimators on the GPU agree with exact values (skipped without a GPU)."""

import pytest
import torch

from conftest import model_samples, random_rbm
from logzbench.api import estimate
from logzbench.estimators.exact import exact_log_z

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")]


@pytest.mark.parametrize("init", ["uniform", "base-rate"])
def test_ais_and_raise_on_cuda_agree_with_exact(init):
    rbm = random_rbm(20, 12, seed=1, scale=0.8)
    X = model_samples(rbm, 40, seed=2)
    truth = exact_log_z(rbm)
    a = estimate(rbm, "ais", data=X, train_data=X, steps=500, chains=500, init=init, seed=0, device="cuda")
    assert a.settings["device"].startswith("cuda")
    assert abs(a.log_z - truth) < 4 * a.log_z_stderr + 1e-4
    exact_ll = float((rbm.log_unnormalized_marginal(X) - truth).mean())
    r = estimate(rbm, "raise", data=X, train_data=X, steps=500, chains=20, init=init, seed=0, device="cuda")
    assert abs(r.mean_log_likelihood - exact_ll) < 4 * r.mean_log_likelihood_stderr + 1e-3


def test_cuda_same_seed_same_estimate():
    rbm = random_rbm(20, 12, seed=1, scale=0.8)
    a = estimate(rbm, "ais", steps=100, chains=100, seed=5, device="cuda")
    b = estimate(rbm, "ais", steps=100, chains=100, seed=5, device="cuda")
    assert a.log_z == b.log_z


def test_exact_on_cuda_matches_cpu():
    rbm = random_rbm(30, 14, seed=3, scale=0.5)
    assert exact_log_z(rbm.to("cuda")) == pytest.approx(exact_log_z(rbm), abs=1e-8)
