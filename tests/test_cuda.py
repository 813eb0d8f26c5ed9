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


@pytest.mark.parametrize("family, init", [("dbm", "uniform"), ("dbm", "base-rate"), ("dbn", "uniform")])
def test_deep_models_on_cuda_agree_with_exact(family, init):
    from logzbench.models import DBM, DBN

    cls = DBM if family == "dbm" else DBN
    model = cls.random((10, 8, 6), scale=0.8, bias_scale=0.5, generator=torch.Generator().manual_seed(4))
    X = torch.bernoulli(torch.full((30, 10), 0.5), generator=torch.Generator().manual_seed(1))
    truth = model.exact_log_z()
    exact_ll = float((model.exact_log_f(X) - truth).mean())
    a = estimate(model, "ais", data=X, train_data=X, steps=500, chains=500, init=init, seed=0, device="cuda")
    assert abs(a.log_z - truth) < 4 * a.log_z_stderr + 1e-3
    assert abs(a.mean_log_likelihood - exact_ll) < 4 * a.mean_log_likelihood_stderr + 1e-2
    r = estimate(model, "raise", data=X, train_data=X, steps=500, chains=20, init=init, seed=0, device="cuda")
    assert abs(r.mean_log_likelihood - exact_ll) < 4 * r.mean_log_likelihood_stderr + 2e-2
    assert model.to("cuda").exact_log_z() == pytest.approx(truth, abs=1e-8)
