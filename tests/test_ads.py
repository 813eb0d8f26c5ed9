"""Annealed discriminance sampling (Liu et al. 2015, Alg. 1) and reverse AIS for log Z, against exact enumeration."""

import numpy as np
import pytest
import torch
from conftest import model_samples, random_rbm

from logzbench import schedules
from logzbench.errors import EstimatorError
from logzbench.estimators.ads import ads, ads_multinomial
from logzbench.estimators.discriminance import discriminance
from logzbench.estimators.exact import exact_log_z
from logzbench.estimators.reverse_ais import reverse_ais


@pytest.mark.parametrize("init", ["uniform", "base-rate"])
def test_ads_agrees_with_exact_within_reported_uncertainty(init):
    rbm = random_rbm(20, 12, seed=2, scale=0.8)
    X = model_samples(rbm, 300, seed=1)
    res = ads(rbm.annealing_path(init, data=X), schedules.linear(64), 400, torch.Generator().manual_seed(0))
    exact = exact_log_z(rbm)
    assert abs(res.log_z - exact) < 4 * res.log_z_stderr
    assert res.extra["stderr_method"].startswith("jackknife")
    assert res.n_sweeps == 64 and res.settings["version"] == "sequential-binary"


def test_ads_jackknife_error_matches_the_spread_of_repeated_runs():
    rbm = random_rbm(20, 12, seed=2, scale=0.8)
    path, exact = rbm.annealing_path("uniform"), exact_log_z(rbm)
    runs = [ads(path, schedules.linear(32), 300, torch.Generator().manual_seed(s)) for s in range(12)]
    err = np.array([r.log_z - exact for r in runs])
    se = np.mean([r.log_z_stderr for r in runs])
    rmse = float(np.sqrt(np.mean(err**2)))
    assert 0.5 < se / rmse < 2.0, (se, rmse)
    # the independent-ratio figure understates it (the ratios share chains)
    assert np.mean([r.extra["stderr_independent_ratios"] for r in runs]) < se


def test_reverse_ais_agrees_with_exact_at_many_temperatures():
    rbm = random_rbm(20, 12, seed=2, scale=0.8)
    res = reverse_ais(rbm.annealing_path("uniform"), schedules.linear(500), 300, torch.Generator().manual_seed(0))
    assert abs(res.log_z - exact_log_z(rbm)) < 4 * res.log_z_stderr + 1e-3
    assert res.n_sweeps == 1000 and res.extra["aggregation"] == "harmonic"


def test_ads_beats_ais_and_reverse_ais_at_few_temperatures():
    """Liu et al. Figs 3-4: with 2 intermediate distributions ADS has the smallest MSE over repeated trials."""
    rbm = random_rbm(20, 12, seed=3, scale=2.0)
    path, exact = rbm.annealing_path("uniform"), exact_log_z(rbm)
    betas = schedules.linear(2)
    err = {"ads": [], "ais": [], "reverse-ais": []}
    for s in range(10):
        a = ads(path, betas, 300, torch.Generator().manual_seed(s))
        err["ads"].append(a.log_z - exact)
        err["ais"].append(a.extra["ais_log_z"] - exact)  # AIS on the very same run
        err["reverse-ais"].append(reverse_ais(path, betas, 300, torch.Generator().manual_seed(100 + s)).log_z - exact)
    mse = {k: float(np.mean(np.square(v))) for k, v in err.items()}
    assert mse["ads"] < mse["ais"] and mse["ads"] < mse["reverse-ais"], mse


def test_ads_same_seed_same_estimate():
    rbm = random_rbm(12, 8, seed=0)
    path = rbm.annealing_path("uniform")
    a = ads(path, schedules.linear(10), 50, torch.Generator().manual_seed(7))
    b = ads(path, schedules.linear(10), 50, torch.Generator().manual_seed(7))
    assert a.log_z == b.log_z and a.log_z_stderr == b.log_z_stderr


def test_weighted_discriminance_corrects_a_mismatched_population():
    """Importance weights turn samples of q into a weighted sample of p (as AIS populations are in ADS)."""
    rng = np.random.default_rng(0)
    log_z = 0.5 * np.log(2 * np.pi)  # f(x) = exp(-x^2 / 2)
    s0 = 1.5

    def ell(x):  # log f - log p_0 with p_0 = N(0, s0^2)
        return -(x**2) / 2 + x**2 / (2 * s0**2) + np.log(s0 * np.sqrt(2 * np.pi))

    x0 = rng.normal(0.0, s0, 4000)
    x1 = rng.normal(0.7, 1.0, 4000)  # not the target: q = N(0.7, 1)
    log_w1 = -(x1**2) / 2 + (x1 - 0.7) ** 2 / 2  # log p(x) - log q(x)
    fit = discriminance(ell(x0), ell(x1), None, log_w1)
    assert abs(fit.log_z - log_z) < 4 * fit.stderr
    biased = discriminance(ell(x0), ell(x1))  # without the weights the shift biases the estimate
    assert abs(biased.log_z - log_z) > 4 * biased.stderr


def test_discriminance_refuses_separated_samples():
    with pytest.raises(EstimatorError, match="do not overlap"):
        discriminance(np.full(100, -200.0), np.full(100, 200.0))
    with pytest.raises(EstimatorError, match="non-finite"):
        discriminance(np.array([0.0, np.nan]), np.array([0.0, 1.0]))


@pytest.mark.parametrize("estimator", ["ads", "ads-multinomial", "reverse-ais"])
def test_api_and_cli_run_the_new_estimators(estimator, tmp_path, capsys):
    import json

    from logzbench.api import estimate
    from logzbench.cli import main
    from logzbench.models import save_model

    rbm = random_rbm(12, 8, seed=1, scale=0.8)
    X = model_samples(rbm, 40, seed=2)
    res = estimate(rbm, estimator, data=X, steps=200, chains=100, seed=0)
    exact = exact_log_z(rbm)
    assert abs(res.log_z - exact) < 4 * res.log_z_stderr + 1e-3
    exact_ll = float((rbm.log_unnormalized_marginal(X) - exact).mean())
    assert abs(res.mean_log_likelihood - exact_ll) < 4 * res.mean_log_likelihood_stderr + 1e-3
    path = tmp_path / "rbm.npz"
    save_model(rbm, path)
    assert main(["estimate", str(path), "--estimator", estimator, "-K", "20", "--chains", "30"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["estimator"] == estimator and out["log_z"] is not None


def test_multinomial_ads_agrees_with_exact_and_with_the_binary_version():
    rbm = random_rbm(20, 12, seed=2, scale=0.8)
    path, exact = rbm.annealing_path("uniform"), exact_log_z(rbm)
    m = ads_multinomial(path, schedules.linear(16), 300, torch.Generator().manual_seed(0))
    assert abs(m.log_z - exact) < 4 * m.log_z_stderr + 1e-3
    assert len(m.extra["log_z_path"]) == 17 and m.extra["log_z_path"][0] == pytest.approx(path.log_z0())
    b = ads(path, schedules.linear(16), 300, torch.Generator().manual_seed(0))  # the same AIS run
    assert abs(m.log_z - b.log_z) < 2 * max(m.log_z_stderr, b.log_z_stderr)
    with pytest.raises(ValueError, match="sequential binary"):
        ads_multinomial(path, schedules.linear(5000), 100, torch.Generator().manual_seed(0))


def test_multinomial_ads_chunking_and_memory_budget(monkeypatch):
    """The objective evaluated in chunks of temperatures gives the same fit as in one piece; a run
    over its memory budget is refused before any sampling, naming the need."""
    import logzbench.estimators.ads as ads_mod

    rbm = random_rbm(12, 8, seed=4, scale=0.8)
    path = rbm.annealing_path("uniform")
    whole = ads_multinomial(path, schedules.linear(12), 100, torch.Generator().manual_seed(3))
    monkeypatch.setattr(ads_mod, "_CHUNK_BYTES", 8 * 100 * 13 * 2)  # two temperatures per chunk
    chunked = ads_multinomial(path, schedules.linear(12), 100, torch.Generator().manual_seed(3))
    assert chunked.log_z == pytest.approx(whole.log_z, abs=1e-8)
    assert chunked.log_z_stderr == pytest.approx(whole.log_z_stderr, rel=1e-5)
    g = torch.Generator().manual_seed(3)
    with pytest.raises(ValueError, match="GiB"):
        ads_multinomial(path, schedules.linear(12), 100, g, max_bytes=1000)
    assert torch.equal(g.get_state(), torch.Generator().manual_seed(3).get_state())  # nothing was sampled
