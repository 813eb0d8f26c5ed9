"""IS, reverse IS, their combinations and discriminance sampling on the Gaussian toy (Liu et al. 2015).

Tolerances come from the spread of repeated trials or from reported standard errors; the only
absolute thresholds are the ones that define "small" (MSE < 0.05 at n = 1000) and "degrades".
"""

import math

import numpy as np
import pandas as pd
import pytest

from logzbench.errors import EstimatorError
from logzbench.estimators.discriminance import discriminance
from logzbench.estimators.importance import importance_sampling
from logzbench.estimators.is_combinations import (
    discriminance_sampling,
    naive_average,
    weighted_average,
    weighted_selection,
)
from logzbench.estimators.reverse_importance import reverse_importance_sampling
from logzbench.models import gaussian_toy as toy
from logzbench.trials import METHODS, estimate_all, run_trial, sweep, trial_errors

SIGMA0S = (0.2, 0.5, 1.0, 2.0, 5.0)
N = 1000
TRIALS = 120


@pytest.fixture(scope="module")
def trials() -> dict[float, pd.DataFrame]:
    """Per-trial errors and reported stderrs of every method, for each sigma0 (n = 1000)."""
    return {s0: trial_errors(s0, N, TRIALS, seed=2015, with_stderr=True) for s0 in SIGMA0S}


def _mean_se(x: np.ndarray) -> tuple[float, float]:
    return float(np.mean(x)), float(np.std(x, ddof=1) / math.sqrt(x.size))


# --------------------------------------------------------------------------- unbiasedness


def test_is_unbiased_for_z_where_variance_finite():
    sigma0, n, reps = 1.5, 100, 2000  # var(Ẑ_is) finite for sigma0 > sigma / sqrt(2)
    ratios = []
    for t in range(reps):
        l0, _ = toy.draw(sigma0, n, np.random.default_rng((7, t)))
        ratios.append(math.exp(importance_sampling(l0, n_bootstrap=0).log_z - toy.log_z()))
    m, se = _mean_se(np.array(ratios))
    assert abs(m - 1.0) < 4 * se, (m, se)


def test_ris_inverse_unbiased_for_inverse_z():
    sigma0, n, reps = 0.8, 100, 2000  # var(1/Ẑ_ris) finite for sigma0 < sqrt(2) sigma
    inv = []
    for t in range(reps):
        _, l1 = toy.draw(sigma0, n, np.random.default_rng((8, t)))
        inv.append(math.exp(-(reverse_importance_sampling(l1, n_bootstrap=0).log_z - toy.log_z())))
    m, se = _mean_se(np.array(inv))
    assert abs(m - 1.0) < 4 * se, (m, se)


# --------------------------------------------------------------------------- Fig. 1 behaviour


def test_is_accurate_for_wide_reference(trials):
    for s0 in (1.0, 2.0, 5.0):
        e = trials[s0]["is"].to_numpy()
        m, se = _mean_se(e)
        assert abs(m) <= 4 * se + 1e-12, (s0, m, se)
        assert np.mean(e**2) < 0.05, s0


def test_is_degrades_and_underestimates_for_peaked_reference(trials):
    e = trials[0.2]
    mse_is, mse_ds = np.mean(e["is"] ** 2), np.mean(e["ds"] ** 2)
    assert mse_is > 10 * mse_ds, (mse_is, mse_ds)
    m, se = _mean_se(e["is"].to_numpy())
    assert m + 4 * se < 0, (m, se)  # a stochastic lower bound


def test_ris_degrades_and_overestimates_for_peaked_target(trials):
    e = trials[5.0]
    mse_ris, mse_ds = np.mean(e["ris"] ** 2), np.mean(e["ds"] ** 2)
    assert mse_ris > 10 * mse_ds, (mse_ris, mse_ds)
    m, se = _mean_se(e["ris"].to_numpy())
    assert m - 4 * se > 0, (m, se)  # a stochastic upper bound


def test_ds_small_mse_everywhere_and_stderr_calibrated(trials):
    for s0, e in trials.items():
        err, se = e["ds"].to_numpy(), e["ds_se"].to_numpy()
        assert np.isfinite(err).all() and np.mean(err**2) < 0.05, s0
        m, bse = _mean_se(err)
        assert abs(m) <= 4 * bse + 1e-12, (s0, m, bse)
        if s0 == 1.0:  # p_0 = p: exact, with zero reported error
            assert np.abs(err).max() < 1e-9 and se.max() < 1e-6
            continue
        ratio = np.std(err, ddof=1) / np.mean(se)
        assert 0.7 < ratio < 1.4, (s0, ratio)


def test_weighted_selection_picks_the_better_side(trials):
    assert (trials[5.0]["selected"] == "is").mean() > 0.9
    assert (trials[0.2]["selected"] == "ris").mean() > 0.9


def test_sweep_table_and_reproducible():
    a = sweep([0.5, 2.0], n=200, n_trials=5, seed=3)
    b = sweep([0.5, 2.0], n=200, n_trials=5, seed=3)
    pd.testing.assert_frame_equal(a, b)
    assert set(a["method"]) == set(METHODS) and len(a) == 2 * len(METHODS)
    assert np.allclose(a["mse"], a["bias"] ** 2 + a["sd"] ** 2 * (5 - 1) / 5)
    c = sweep([0.5, 2.0], n=200, n_trials=5, seed=4)
    assert not np.allclose(a["bias"], c["bias"])


def test_same_seed_same_results():
    assert run_trial(0.7, 300, seed=11) == run_trial(0.7, 300, seed=11)
    assert run_trial(0.7, 300, seed=11) != run_trial(0.7, 300, seed=12)
    l0, l1 = toy.draw(0.7, 300, np.random.default_rng(5))
    for f in (naive_average, weighted_average, weighted_selection):
        assert f(l0, l1, n_bootstrap=200, seed=1).log_z_ci == f(l0, l1, n_bootstrap=200, seed=1).log_z_ci
    assert importance_sampling(l0, seed=1).log_z_ci == importance_sampling(l0, seed=1).log_z_ci


# --------------------------------------------------------------------------- discriminance edge cases


def test_ds_exact_when_reference_equals_target():
    sigma = 1.7
    l0, l1 = toy.draw(sigma, 400, np.random.default_rng(0), sigma=sigma)
    r = discriminance_sampling(l0, l1)
    assert abs(r.log_z - toy.log_z(sigma)) < 1e-9
    assert r.log_z_stderr < 1e-6


def test_ds_disjoint_samples_raise():
    s = np.arange(1.0, 51.0)
    with pytest.raises(EstimatorError, match="overlap"):
        discriminance_sampling(-100 * s, 100 * s)
    with pytest.raises(EstimatorError, match="overlap"):
        discriminance(-100 * s, 100 * s)


ALL = {
    "is": lambda a, b: importance_sampling(a),
    "ris": lambda a, b: reverse_importance_sampling(b),
    "is-avg": naive_average,
    "is-weighted": weighted_average,
    "is-select": weighted_selection,
    "ds": discriminance_sampling,
}


@pytest.mark.parametrize("name", list(ALL))
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input_raises(name, bad):
    l0, l1 = toy.draw(0.8, 50, np.random.default_rng(0))
    l0[3] = bad
    l1[7] = bad
    with pytest.raises(EstimatorError, match="not finite"):
        ALL[name](l0, l1)


@pytest.mark.parametrize("name", list(ALL))
def test_empty_input_raises(name):
    with pytest.raises(ValueError):
        ALL[name](np.array([]), np.array([]))


# --------------------------------------------------------------------------- result records


def test_result_records():
    l0, l1 = toy.draw(0.8, 200, np.random.default_rng(1))
    res = estimate_all(l0, l1, n_bootstrap=200, seed=0)
    assert list(res) == list(METHODS)
    for name, r in res.items():
        assert r.estimator == name and r.seconds >= 0 and {"n0", "n1"} <= set(r.settings)
        assert np.isfinite(r.log_z) and np.isfinite(r.log_z_stderr) and r.log_z_stderr > 0
        assert r.log_z_ci[0] <= r.log_z_ci[1]
        assert r.n_chains == r.settings["n0"] + r.settings["n1"]
        r.to_dict()
    assert res["is-select"].ess == pytest.approx(res[res["is-select"].extra["selected"]].ess)
    assert res["is"].n_chains == 200 and res["ris"].n_chains == 200 and res["ds"].n_chains == 200
    for name in ("is-avg", "is-weighted", "is-select"):
        ex = res[name].extra
        assert {"log_z_is", "log_z_ris", "v_is", "v_ris"} <= set(ex)
        assert ex["log_z_is"] == pytest.approx(res["is"].log_z) and ex["log_z_ris"] == pytest.approx(res["ris"].log_z)
        assert ex["v_is"] == pytest.approx(res["is"].extra["v_is"]) and ex["v_ris"] == pytest.approx(
            res["ris"].extra["v_ris"]
        )
        lo, hi = sorted((ex["log_z_is"], ex["log_z_ris"]))
        assert lo - 1e-12 <= res[name].log_z <= hi + 1e-12
    assert res["is-avg"].log_z == pytest.approx((res["is"].log_z + res["ris"].log_z) / 2)
    assert res["is-select"].log_z == pytest.approx(res[res["is-select"].extra["selected"]].log_z, abs=1e-12)
    # the delta-method stderr is sqrt(v / n)
    assert res["is"].log_z_stderr == pytest.approx(math.sqrt(res["is"].extra["v_is"] / 200))
    assert res["ris"].log_z_stderr == pytest.approx(math.sqrt(res["ris"].extra["v_ris"] / 200))
    assert 0 < res["ds"].extra["gamma"] <= 0.25
    assert res["ds"].log_z_ci == pytest.approx(
        (res["ds"].log_z - 1.96 * res["ds"].log_z_stderr, res["ds"].log_z + 1.96 * res["ds"].log_z_stderr)
    )


def test_log_space_no_overflow():
    """Scaling f by e^c shifts every log Ẑ by exactly c, even where exp(l) overflows."""
    l0, l1 = toy.draw(0.8, 200, np.random.default_rng(2))
    c = 2000.0
    base = estimate_all(l0, l1)
    shifted = estimate_all(l0 + c, l1 + c)
    for name in METHODS:
        assert shifted[name].log_z - c == pytest.approx(base[name].log_z, abs=1e-8), name
        assert shifted[name].log_z_stderr == pytest.approx(base[name].log_z_stderr, rel=1e-6, abs=1e-12), name
