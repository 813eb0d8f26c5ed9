"""Estimators against exact enumeration, analytic values and the bounds they promise."""

import math

import numpy as np
import pytest
import torch
from conftest import brute_log_z, model_samples, random_rbm

from logzbench import schedules
from logzbench.api import estimate
from logzbench.errors import EstimatorError
from logzbench.estimators import ais as ais_mod
from logzbench.estimators.exact import exact_log_z
from logzbench.estimators.result import summarize_log_weights
from logzbench.models import BinaryRBM


@pytest.mark.parametrize("nv, nh", [(7, 5), (5, 7), (9, 9)])
def test_exact_equals_brute_force(nv, nh):
    rbm = random_rbm(nv, nh, seed=nv * 10 + nh, scale=1.2)
    assert exact_log_z(rbm, chunk_size=16) == pytest.approx(brute_log_z(rbm), abs=1e-9)


def test_exact_refuses_huge_enumeration():
    rbm = BinaryRBM(np.zeros((40, 40)), np.zeros(40), np.zeros(40))
    with pytest.raises(ValueError, match="2\\^40"):
        exact_log_z(rbm)


def test_exact_analytic_zero_weights():
    a, b = np.linspace(-1, 1, 10), np.linspace(0.5, -0.5, 6)
    rbm = BinaryRBM(np.zeros((10, 6)), a, b)
    a, b = rbm.visible_bias.double().numpy(), rbm.hidden_bias.double().numpy()  # as stored (float32)
    analytic = np.log1p(np.exp(a)).sum() + np.log1p(np.exp(b)).sum()
    assert exact_log_z(rbm) == pytest.approx(analytic, abs=1e-9)


# --------------------------------------------------------------------------- AIS


@pytest.mark.parametrize(
    "nv, nh, scale, init, schedule",
    [
        (20, 10, 0.8, "uniform", "linear"),
        (20, 10, 0.8, "base-rate", "linear"),
        (30, 20, 0.4, "base-rate", "sigmoid"),
        (16, 20, 0.6, "uniform", "sigmoid"),
    ],
)
def test_ais_agrees_with_exact_within_reported_uncertainty(nv, nh, scale, init, schedule):
    rbm = random_rbm(nv, nh, seed=nv + nh, scale=scale)
    X = model_samples(rbm, 200, seed=1)
    truth = exact_log_z(rbm)
    res = estimate(rbm, "ais", data=X, train_data=X, steps=500, chains=200, init=init, schedule=schedule, seed=3)
    assert res.log_z_stderr > 0
    assert abs(res.log_z - truth) < 4 * res.log_z_stderr + 1e-4
    assert res.log_z_ci[0] - 4 * res.log_z_stderr < truth < res.log_z_ci[1] + 4 * res.log_z_stderr
    exact_ll = float((rbm.log_unnormalized_marginal(X) - truth).mean())
    assert abs(res.mean_log_likelihood - exact_ll) < 4 * res.mean_log_likelihood_stderr + 1e-4
    assert 0 < res.ess <= 200
    assert res.n_sweeps == 499 and res.total_sweeps == 499 * 200 and res.seconds > 0


def test_ais_partition_function_is_unbiased():
    """mean(Ẑ / Z) over many independent runs is 1 within its standard error."""
    rbm = random_rbm(10, 6, seed=4, scale=1.0)
    truth = exact_log_z(rbm)
    path = rbm.annealing_path("uniform")
    g = torch.Generator().manual_seed(0)
    state, _ = ais_mod.run(path, schedules.linear(20), 20000, g)  # each chain is an independent 1-chain run
    ratio = torch.exp(state.log_w - truth).numpy()
    mean, se = ratio.mean(), ratio.std(ddof=1) / math.sqrt(len(ratio))
    assert se < 0.05  # the test has power: a bias of a few percent would be detected
    assert abs(mean - 1.0) < 4 * se
    # ... while the log of the estimate is a stochastic lower bound (Jensen): E[log Ẑ] < log Z
    assert np.mean(state.log_w.numpy()) < truth


def test_ais_reproducible_and_seed_dependent(small_rbm):
    a = estimate(small_rbm, "ais", steps=50, chains=20, seed=7)
    b = estimate(small_rbm, "ais", steps=50, chains=20, seed=7)
    c = estimate(small_rbm, "ais", steps=50, chains=20, seed=8)
    np.testing.assert_array_equal(a.log_weights, b.log_weights)
    assert a.log_z == b.log_z and a.log_z != c.log_z


def test_sm14500_schedule_runs_and_is_accurate():
    rbm = random_rbm(12, 8, seed=9, scale=1.0)
    betas = schedules.salakhutdinov_murray()
    assert len(betas) == 14501 and np.all(np.diff(betas) > 0)
    res = estimate(rbm, "ais", schedule="sm14500", chains=20, seed=0)
    assert res.settings["K"] == 14500
    assert abs(res.log_z - exact_log_z(rbm)) < 4 * res.log_z_stderr + 1e-4


class _OverflowPath:
    """A path whose weights blow up: must raise, never be dropped."""

    def __init__(self, rbm):
        self.inner = rbm.annealing_path("uniform")

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def log_f_ratio(self, state, b0, b1):
        r = self.inner.log_f_ratio(state, b0, b1)
        r[0] = float("inf")
        r[1] = float("nan")
        return r


def test_overflowing_chain_is_an_error(small_rbm):
    with pytest.raises(EstimatorError, match="2 of 10 chains have non-finite weights"):
        ais_mod.ais(_OverflowPath(small_rbm), schedules.linear(5), 10, torch.Generator().manual_seed(0))


# --------------------------------------------------------------------------- RAISE


@pytest.mark.parametrize("init", ["uniform", "base-rate"])
def test_raise_agrees_with_exact(init):
    rbm = random_rbm(20, 10, seed=2, scale=0.8)
    X = model_samples(rbm, 40, seed=5)
    exact_ll = (rbm.log_unnormalized_marginal(X) - exact_log_z(rbm)).numpy()
    res = estimate(rbm, "raise", data=X, train_data=X, steps=1000, chains=20, init=init, seed=1)
    assert abs(res.mean_log_likelihood - exact_ll.mean()) < 4 * res.mean_log_likelihood_stderr + 1e-3
    per_ex_err = np.abs(res.per_example_log_likelihood - exact_ll)
    assert np.median(per_ex_err) < 0.05
    assert res.log_weights.shape == (40, 20)


def test_raise_is_conservative_on_average():
    """With few intermediate distributions RAISE errs low: at or below exact on average."""
    rbm = random_rbm(20, 12, seed=21, scale=1.5, bias_scale=0.2)
    X = model_samples(rbm, 30, seed=2)
    exact_ll = float((rbm.log_unnormalized_marginal(X) - exact_log_z(rbm)).mean())
    diffs = []
    for seed in range(3):
        res = estimate(rbm, "raise", data=X, steps=20, chains=5, seed=seed)
        diffs.append(res.mean_log_likelihood - exact_ll)
        assert res.mean_log_likelihood <= exact_ll + 3 * res.mean_log_likelihood_stderr
    assert np.mean(diffs) < 0


def test_raise_control_variate_subsample():
    rbm = random_rbm(20, 10, seed=2, scale=0.8)
    X = model_samples(rbm, 300, seed=6)
    exact_ll = float((rbm.log_unnormalized_marginal(X) - exact_log_z(rbm)).mean())
    res = estimate(rbm, "raise", data=X, steps=500, chains=10, n_examples=30, seed=4)
    assert res.settings["n_examples"] == 30 and len(res.per_example_log_likelihood) == 30
    # the control variate removes almost all of the between-example spread
    plain_se = np.std(res.per_example_log_likelihood, ddof=1) / math.sqrt(30)
    assert res.mean_log_likelihood_stderr < plain_se / 3
    assert abs(res.mean_log_likelihood - exact_ll) < 4 * res.mean_log_likelihood_stderr + 1e-3


# --------------------------------------------------------------------------- CSL


@pytest.mark.parametrize("mode", ["unbiased", "biased"])
def test_csl_is_below_exact(mode):
    rbm = random_rbm(20, 10, seed=2, scale=1.2)
    X = model_samples(rbm, 50, seed=7)
    exact_ll = float((rbm.log_unnormalized_marginal(X) - exact_log_z(rbm)).mean())
    small = estimate(rbm, "csl", data=X, train_data=X, chains=5, samples_per_chain=2, burn_in=10, csl_mode=mode)
    big = estimate(
        rbm, "csl", data=X, train_data=X, chains=200, samples_per_chain=20, burn_in=50, thin=2, csl_mode=mode
    )
    assert small.mean_log_likelihood < exact_ll
    assert big.mean_log_likelihood <= exact_ll + 3 * big.mean_log_likelihood_stderr
    assert small.mean_log_likelihood < big.mean_log_likelihood  # more samples: tighter bound
    assert big.n_sweeps == 50 + 2 * 20


def test_csl_bad_settings(small_rbm):
    X = model_samples(small_rbm, 5, seed=0)
    with pytest.raises(ValueError, match="train_data"):
        estimate(small_rbm, "csl", data=X, csl_mode="biased")
    with pytest.raises(ValueError, match="thin"):
        estimate(small_rbm, "csl", data=X, thin=0)


# --------------------------------------------------------------------------- records and input checks


def test_weight_summary_statistics():
    s = summarize_log_weights(torch.zeros(50))
    assert s.ess == pytest.approx(50) and s.stderr == 0 and s.log_mean == 0
    lw = torch.log(torch.distributions.Exponential(1.0).sample((4000,)).double())
    s = summarize_log_weights(lw, seed=1)
    assert abs(s.log_mean) < 4 * s.stderr  # E[w] = 1
    assert s.ci_low < s.log_mean < s.ci_high
    assert (s.ci_high - s.ci_low) / (2 * 1.96) == pytest.approx(s.stderr, rel=0.25)


def test_estimate_input_errors(small_rbm):
    with pytest.raises(ValueError, match="unknown estimator"):
        estimate(small_rbm, "magic")
    with pytest.raises(ValueError, match="expected rows of 12"):
        estimate(small_rbm, "ais", data=np.zeros((3, 5)))
    with pytest.raises(ValueError, match="binary"):
        estimate(small_rbm, "ais", data=np.full((3, 12), 0.5))
    with pytest.raises(ValueError, match="give test data"):
        estimate(small_rbm, "raise")
    with pytest.raises(ValueError, match="start at 0 and end at 1"):
        schedules.from_array([0.1, 0.5, 1.0])


def test_result_record_json_safe(small_rbm):
    import json

    res = estimate(small_rbm, "ais", steps=10, chains=1)  # one chain: no standard error
    d = res.to_dict()
    json.dumps(d)
    assert d["log_z_stderr"] is None and d["n_sweeps"] == 9
    for key in ("log_z", "ess", "seconds", "settings", "sweeps_per_second", "total_sweeps"):
        assert key in d


def _gibbs_matrix(path, beta: float) -> torch.Tensor:
    """Exact transition matrix T_beta(v' | v) of one Gibbs sweep v -> h -> v' on the path."""
    from conftest import all_states

    rbm = path.rbm
    V, H = all_states(rbm.n_visible), all_states(rbm.n_hidden)
    W, a, b, a0 = rbm.W.double(), rbm.visible_bias.double(), rbm.hidden_bias.double(), path.a0.double()
    ph = torch.sigmoid(beta * (V @ W + b))  # (nV, nh)
    p_h_given_v = torch.exp(H @ torch.log(ph).T + (1 - H) @ torch.log1p(-ph).T).T  # (nV, nH)
    pv = torch.sigmoid((1 - beta) * a0 + beta * (a + H @ W.T))  # (nH, nv)
    p_v_given_h = torch.exp(V @ torch.log(pv).T + (1 - V) @ torch.log1p(-pv).T).T  # (nH, nV)
    return p_h_given_v @ p_v_given_h


@pytest.mark.parametrize("init", ["uniform", "base-rate"])
def test_raise_weights_are_unbiased_for_the_annealing_model(init):
    """mean(w) estimates p_ann(v) = [p_0 T_1 ... T_K](v) without bias (RAISE Eq. 12)."""
    from conftest import all_states

    rbm = random_rbm(4, 3, seed=13, scale=1.5)
    path = rbm.annealing_path(init, visible_bias_0=None if init == "uniform" else torch.tensor([1.0, -1, 0.5, -2]))
    betas = schedules.linear(4)
    V = all_states(4)
    p = torch.softmax(path.log_f(path.state_from_data(V.float()), 0.0), 0)
    for k in range(1, len(betas)):
        p = p @ _gibbs_matrix(path, float(betas[k]))
    from logzbench.estimators.raise_ import raise_log_weights

    test_rows = V[[0, 5, 10, 15]].float()
    log_w, _ = raise_log_weights(path, test_rows, betas, 40000, torch.Generator().manual_seed(0))
    w = torch.exp(log_w)
    mean, se = w.mean(1), w.std(1) / math.sqrt(w.shape[1])
    p_ann = p[[0, 5, 10, 15]]
    assert torch.all(torch.abs(mean - p_ann) < 4 * se), (mean, p_ann, se)
    assert torch.all(se < 0.05 * p_ann)  # the test has power


@pytest.mark.parametrize("estimator, kw", [("ais", {}), ("raise", {}), ("raise", {"n_examples": 20})])
def test_mean_log_likelihood_interval_covers_exact(estimator, kw):
    rbm = random_rbm(20, 10, seed=2, scale=0.8)
    X = model_samples(rbm, 60, seed=5)
    exact_ll = float((rbm.log_unnormalized_marginal(X) - exact_log_z(rbm)).mean())
    res = estimate(rbm, estimator, data=X, steps=300, chains=20, seed=2, **kw)
    lo, hi = res.mean_log_likelihood_ci
    assert lo <= res.mean_log_likelihood <= hi
    slack = 2 * res.mean_log_likelihood_stderr + 1e-3
    assert lo - slack <= exact_ll <= hi + slack
    if not kw:  # (with a small subsample the bootstrap also carries the refitted alpha's noise)
        # the interval's width agrees with the reported standard error
        assert (hi - lo) / (2 * 1.96) == pytest.approx(res.mean_log_likelihood_stderr, rel=0.5)
