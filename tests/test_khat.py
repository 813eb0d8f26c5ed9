"""Pareto k-hat of the log-weights (PSIS, via arviz-stats): recovery of known tails, where it is
recorded (EstimateResult, WeightSummary, MLflow metrics and flags)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import model_samples, random_rbm

from logzbench import tracking
from logzbench.api import estimate
from logzbench.estimators.result import EstimateResult, summarize_log_weights
from logzbench.stats import KHAT_MIN_WEIGHTS, pareto_khat

N_DRAWS = 20_000
#: PSIS fits the largest M = 3 sqrt(S) weights (S > 225)
M_TAIL = math.floor(3 * math.sqrt(N_DRAWS))


def pareto_log_weights(xi: float, n: int, seed: int) -> np.ndarray:
    """``log w`` with ``w = U^(-xi)``, U uniform: above any threshold ``w`` is generalized Pareto with shape ``xi``."""
    return -xi * np.log(np.random.default_rng(seed).uniform(size=n))


@pytest.mark.parametrize("xi", [0.2, 0.5, 0.9])
def test_khat_recovers_pareto_shape(xi):
    # The shape estimate from M tail draws has standard deviation about (1 + xi) / sqrt(M)
    # (0.058, 0.073, 0.092 here; measured over 200 seeds: 0.060, 0.074, 0.091).  Each of 10
    # seeded replicates must be within 4 of those, their mean within 3 / sqrt(10) of them plus
    # 0.02 for the fit's weak prior (10 pseudo-observations at 0.5: a shift of at most 0.01).
    sd = (1 + xi) / math.sqrt(M_TAIL)
    ks = np.array([pareto_khat(pareto_log_weights(xi, N_DRAWS, seed)) for seed in range(10)])
    assert np.all(np.abs(ks - xi) < 4 * sd), ks
    assert abs(ks.mean() - xi) < 3 * sd / math.sqrt(len(ks)) + 0.02, ks.mean()


def test_khat_orders_tails():
    ks = [pareto_khat(pareto_log_weights(xi, N_DRAWS, seed=1)) for xi in (0.2, 0.5, 0.9)]
    assert ks[0] < ks[1] < ks[2] and ks[0] < 0.5 < ks[2] and ks[2] > 0.7


def test_light_tailed_log_weights_have_small_khat():
    # log-normal weights with sd 0.1: all moments finite, k-hat near 0 (sd about 0.13 at S = 1000)
    for seed in range(5):
        lw = 0.1 * np.random.default_rng(seed).normal(size=2000)
        assert pareto_khat(lw) < 0.5


def test_khat_input_handling():
    lw = pareto_log_weights(0.5, 2000, seed=3)
    k = pareto_khat(lw)
    assert isinstance(k, float) and math.isfinite(k)
    assert pareto_khat(torch.tensor(lw)) == pytest.approx(k, abs=1e-12)
    assert pareto_khat(lw + 123.0) == pytest.approx(k, abs=1e-9)  # only ratios of weights matter
    # batch dimensions: one k-hat per row, along any dim
    batch = np.stack([lw, pareto_log_weights(0.9, 2000, seed=4)])
    kb = pareto_khat(batch)
    assert kb.shape == (2,) and kb[0] == pytest.approx(k, abs=1e-12) and kb[1] > kb[0]
    assert np.allclose(pareto_khat(batch.T, dim=0), kb)
    # too few weights, non-finite weights, constant weights: NaN
    assert math.isnan(pareto_khat(lw[: KHAT_MIN_WEIGHTS - 1]))
    assert math.isfinite(pareto_khat(lw[:KHAT_MIN_WEIGHTS]))
    assert math.isnan(pareto_khat(np.r_[lw, np.nan]))
    assert math.isnan(pareto_khat(np.zeros(100)))


def test_weight_summary_and_result_record_carry_khat():
    lw = pareto_log_weights(0.9, 5000, seed=5)
    s = summarize_log_weights(lw, n_bootstrap=0)
    assert s.khat == pytest.approx(pareto_khat(lw)) and s.khat > 0.7
    assert math.isnan(EstimateResult("exact").khat)
    assert EstimateResult("exact").to_dict()["khat"] is None  # NaN -> None


def test_ais_result_has_finite_khat():
    rbm = random_rbm(12, 8, seed=0)
    X = model_samples(rbm, 30, seed=1)
    res = estimate(rbm, "ais", data=X, train_data=X, steps=50, chains=100, init="uniform", seed=0)
    d = res.to_dict()
    assert d["khat"] is not None and math.isfinite(d["khat"])
    assert d["khat"] == pytest.approx(pareto_khat(res.log_weights))
    assert math.isnan(estimate(rbm, "exact", data=X).khat)


def test_per_example_khat_is_the_median():
    rbm = random_rbm(12, 8, seed=0)
    X = model_samples(rbm, 10, seed=1)
    res = estimate(rbm, "raise", data=X, train_data=X, steps=50, chains=30, init="uniform", seed=0)
    per_ex = pareto_khat(res.log_weights)  # (n_examples, chains)
    assert per_ex.shape == (10,)
    assert res.khat == pytest.approx(np.nanmedian(per_ex)) and res.extra["khat_median"] == res.khat
    assert res.extra["khat_max"] == pytest.approx(np.nanmax(per_ex))
    assert res.extra["khat_frac_above_0.7"] == pytest.approx(np.mean(per_ex[np.isfinite(per_ex)] > 0.7))
    # 10 chains per example: too few for a k-hat
    res = estimate(rbm, "raise", data=X, train_data=X, steps=50, chains=10, init="uniform", seed=0)
    assert math.isnan(res.khat) and res.extra["khat_frac_above_0.7"] is None


def test_is_combination_khat_is_the_heavier_side():
    from logzbench.estimators.is_combinations import naive_average, weighted_selection

    l0, l1 = pareto_log_weights(0.2, 2000, seed=6), -pareto_log_weights(0.9, 2000, seed=7)
    avg = naive_average(l0, l1, n_bootstrap=0)
    assert avg.extra["khat_is"] == pytest.approx(pareto_khat(l0))
    assert avg.extra["khat_ris"] == pytest.approx(pareto_khat(-l1))
    assert avg.khat == pytest.approx(max(pareto_khat(l0), pareto_khat(-l1)))
    sel = weighted_selection(l0, l1, n_bootstrap=0)
    assert sel.khat == pytest.approx(sel.extra["khat_is" if sel.extra["selected"] == "is" else "khat_ris"])


def test_tracking_logs_khat_and_flags_heavy_tails():
    rec = {
        "model": "m",
        "estimator": "ais",
        "K": 10,
        "init": "uniform",
        "seed": 0,
        "result": EstimateResult("ais", log_z=1.0, ess=80.0, khat=0.83, n_chains=100).to_dict(),
    }
    assert tracking.estimate_metrics(rec)["khat"] == pytest.approx(0.83)
    flags = tracking.estimate_flags(rec)
    assert flags == [
        "heavy-tailed log-weights: Pareto k-hat 0.83 > 0.7, the standard error understates the uncertainty"
    ]
    assert tracking.estimate_flags(rec, khat=0.9) == []
    rec["result"]["khat"] = 0.5
    assert tracking.estimate_flags(rec) == []
