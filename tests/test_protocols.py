"""The papers' protocol switches (issue 26): RAISE's ``control_variate`` (fitted or the paper's fixed
alpha = 1, Burda et al. Sec. 4) and CSL's ``csl_protocol`` (fresh chains or Upadhya & Sastry's pooled
chains after a random burn-in, Sec. 4.2).

The control-variate tests run the estimator on synthetic per-row estimates ``y = exact log p(v) + noise``
of a tiny RBM's rows (exact by enumeration) over many random subsamples, so their mean and spread are
known; the RAISE and CSL tests run the estimators themselves on small RBMs.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import all_states, model_samples, random_rbm

from logzbench.api import estimate
from logzbench.cli import main
from logzbench.errors import ConfigError
from logzbench.estimators import csl as csl_mod
from logzbench.estimators.exact import exact_log_z
from logzbench.estimators.raise_ import FIXED_ALPHA, control_variate_mean, control_variate_population_stderr
from logzbench.pipeline.config_schema import check_estimator_options

SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"

#: repeats of the synthetic control-variate experiments
REPEATS = 2000
#: test rows N and RAISE's subsample n of them
N_ROWS, N_SUB = 400, 40


def _spread_tolerance(repeats: int) -> float:
    """Four standard errors of a sample standard deviation of ``repeats`` nearly normal values, relative."""
    return 4.0 / math.sqrt(2.0 * (repeats - 1))


@pytest.fixture(scope="module")
def tiny_model():
    """A 10-6 RBM's every visible state: ``(log f(v), log p(v), p(v))`` and an imperfect control variate
    ``log f(v) + g(v)`` (``g`` fixed per state, as an importance-sampled ``log f`` of a DBM would be), so
    that ``Y - X`` still varies between rows."""
    rbm = random_rbm(10, 6, seed=3)
    log_f = rbm.log_unnormalized_marginal(all_states(10)).double().numpy()
    log_p = log_f - float(exact_log_z(rbm))
    g = 0.5 * np.random.default_rng(11).standard_normal(len(log_f))
    return log_f + g, log_p, np.exp(log_p)


def _experiment(tiny_model, alpha, redraw_test_set: bool, seed: int):
    """``REPEATS`` control-variate estimates from random subsamples of ``N_SUB`` of ``N_ROWS`` test rows drawn
    from the model, each row's estimate its exact ``log p(v)`` plus Gaussian noise of a random scale.

    Returns the estimates, their standard errors over the test set and over the data distribution, the
    exact mean over the (last) test set and the exact mean over the distribution."""
    x_states, log_p, p = tiny_model
    rng = np.random.default_rng(seed)
    rows = rng.choice(len(p), size=N_ROWS, p=p)
    est, se, se_pop = (np.empty(REPEATS) for _ in range(3))
    for r in range(REPEATS):
        if redraw_test_set:
            rows = rng.choice(len(p), size=N_ROWS, p=p)
        sub = rows[rng.choice(N_ROWS, size=N_SUB, replace=False)]
        y = log_p[sub] + (0.2 + 0.6 * rng.random(N_SUB)) * rng.standard_normal(N_SUB)
        est[r], se[r], a = control_variate_mean(y, x_states[sub], x_states[rows], alpha)
        se_pop[r] = control_variate_population_stderr(y, x_states[sub], N_ROWS, a)
    return est, se, se_pop, float(log_p[rows].mean()), float(np.sum(p * log_p))


@pytest.mark.parametrize("alpha", [FIXED_ALPHA, None], ids=["fixed", "fitted"])
def test_control_variate_is_unbiased_for_the_test_set_mean_with_its_stderr(tiny_model, alpha):
    """One test set, random subsamples: the estimates average to the exact mean over the test set, and the
    reported standard error matches their spread (it may exceed it by the finite-population factor
    ``1 / sqrt(1 - n/N)`` it leaves out; a fitted alpha's residuals lose one more degree of freedom)."""
    est, se, _, set_mean, _ = _experiment(tiny_model, alpha, redraw_test_set=False, seed=1)
    spread = est.std(ddof=1)
    assert abs(est.mean() - set_mean) < 4 * spread / math.sqrt(REPEATS), (est.mean(), set_mean, spread)
    tol = _spread_tolerance(REPEATS) + (2.0 / N_SUB if alpha is None else 0.0)
    ratio = math.sqrt(np.mean(se**2)) / spread
    assert 1 / (1 + tol) < ratio < 1 / math.sqrt(1 - N_SUB / N_ROWS) / (1 - tol), ratio


@pytest.mark.parametrize("alpha", [FIXED_ALPHA, None], ids=["fixed", "fitted"])
def test_population_stderr_adds_the_test_sets_own_sampling_error(tiny_model, alpha):
    """Test sets redrawn from the model each time: the estimates average to ``E_p[log p(v)]``, their spread
    is the population standard error (with the ``alpha^2 Var(X) / N`` and covariance terms), and the
    standard error over one test set, which leaves those terms out, is clearly smaller than that spread."""
    est, se, se_pop, _, population_mean = _experiment(tiny_model, alpha, redraw_test_set=True, seed=2)
    spread = est.std(ddof=1)
    assert abs(est.mean() - population_mean) < 4 * spread / math.sqrt(REPEATS), (est.mean(), population_mean)
    tol = _spread_tolerance(REPEATS) + (2.0 / N_SUB if alpha is None else 0.0)
    assert 1 / (1 + tol) < math.sqrt(np.mean(se_pop**2)) / spread < 1 / (1 - tol)
    assert math.sqrt(np.mean(se**2)) / spread < 1 / (1 + tol)


def test_population_stderr_without_subsampling_is_the_rows_spread():
    y = np.random.default_rng(0).normal(size=50)
    assert control_variate_population_stderr(y, y + 1, 50, 0.0) == pytest.approx(y.std(ddof=1) / math.sqrt(50))


# --------------------------------------------------------------------------- RAISE's control_variate option
@pytest.fixture(scope="module")
def raise_rbm():
    rbm = random_rbm(12, 8, seed=2, scale=0.8)
    X = model_samples(rbm, 200, seed=6)
    exact_ll = (rbm.log_unnormalized_marginal(X) - exact_log_z(rbm)).double().numpy()
    return rbm, X, exact_ll


def test_raise_fixed_control_variate_uses_alpha_one(raise_rbm):
    """``fixed`` combines the same per-row RAISE estimates (same seed) with alpha = 1 and records it; the
    default is ``fitted``, unchanged; the estimate agrees with the exact mean within its uncertainty."""
    rbm, X, exact_ll = raise_rbm
    kw = dict(data=X, steps=200, chains=10, n_examples=25, seed=4)
    default = estimate(rbm, "raise", **kw)
    fitted = estimate(rbm, "raise", control_variate="fitted", **kw)
    fixed = estimate(rbm, "raise", control_variate="fixed", **kw)
    assert default.mean_log_likelihood == fitted.mean_log_likelihood
    assert default.mean_log_likelihood_stderr == fitted.mean_log_likelihood_stderr
    assert default.settings["control_variate"] == "fitted" and fixed.settings["control_variate"] == "fixed"
    assert fixed.extra["control_variate_alpha"] == 1.0 != fitted.extra["control_variate_alpha"]
    np.testing.assert_array_equal(fixed.per_example_log_likelihood, fitted.per_example_log_likelihood)
    idx = np.asarray(fixed.extra["subsample_indices"])
    log_f = rbm.log_unnormalized_marginal(X).double().numpy()
    expected = np.mean(fixed.per_example_log_likelihood - log_f[idx]) + log_f.mean()
    assert fixed.mean_log_likelihood == pytest.approx(expected, abs=1e-12)
    for res in (fitted, fixed):
        assert abs(res.mean_log_likelihood - exact_ll.mean()) < 4 * res.mean_log_likelihood_stderr + 1e-3
        lo, hi = res.mean_log_likelihood_ci
        assert lo < res.mean_log_likelihood < hi
        assert res.extra["mean_log_likelihood_stderr_population"] > 0
    # fitted reports the standard error over this test set, fixed the full one (the paper's, with alpha^2 Var(X)/N)
    assert fitted.mean_log_likelihood_stderr == fitted.extra["mean_log_likelihood_stderr_test_set"]
    assert fixed.mean_log_likelihood_stderr == fixed.extra["mean_log_likelihood_stderr_population"]
    assert fixed.extra["mean_log_likelihood_stderr_test_set"] < fixed.mean_log_likelihood_stderr


# --------------------------------------------------------------------------- CSL's csl_protocol option
@pytest.fixture(scope="module")
def csl_rbm():
    rbm = random_rbm(20, 10, seed=2, scale=1.2)
    X = model_samples(rbm, 50, seed=7)
    return rbm, X, float((rbm.log_unnormalized_marginal(X) - exact_log_z(rbm)).mean())


@pytest.mark.parametrize("mode", ["unbiased", "biased"])
def test_pooled_csl_is_below_exact(csl_rbm, mode):
    """The acceptance of fresh CSL (tests/test_estimators.py): few samples fall below the exact value, many
    reach it within three standard errors and are the tighter bound; the settings record the drawn
    burn-in, the pool's chain length and the sweeps run."""
    rbm, X, exact_ll = csl_rbm
    kw = dict(data=X, train_data=X, csl_mode=mode, csl_protocol="pooled")
    small = estimate(rbm, "csl", chains=5, samples_per_chain=2, burn_in=10, **kw)
    big = estimate(rbm, "csl", chains=200, samples_per_chain=20, burn_in=50, thin=2, **kw)
    assert small.mean_log_likelihood < exact_ll
    assert big.mean_log_likelihood <= exact_ll + 3 * big.mean_log_likelihood_stderr
    assert small.mean_log_likelihood < big.mean_log_likelihood
    s = big.settings
    assert s["csl_protocol"] == "pooled" and s["burn_in"] == 50 and 0 <= s["burn_in_drawn"] <= 50
    assert s["pool_sweeps"] == 50 + 2 * 20
    assert big.n_sweeps == s["burn_in_drawn"] + 2 * 20 and big.total_sweeps == big.n_sweeps * 200
    assert 0 < big.ess <= 200 * 20


def test_pooled_csl_same_seed_same_estimate_and_a_random_burn_in(csl_rbm):
    rbm, X, _ = csl_rbm
    # threads fixed: the automatic choice looks at the machine's load, and the settings record it
    kw = dict(data=X, chains=20, samples_per_chain=5, burn_in=30, csl_protocol="pooled", threads=1)
    a, b = estimate(rbm, "csl", seed=3, **kw), estimate(rbm, "csl", seed=3, **kw)
    assert a.mean_log_likelihood == b.mean_log_likelihood and a.settings == b.settings
    np.testing.assert_array_equal(a.per_example_log_likelihood, b.per_example_log_likelihood)
    drawn = {estimate(rbm, "csl", seed=s, **kw).settings["burn_in_drawn"] for s in range(8)}
    assert len(drawn) > 1 and all(0 <= d <= 30 for d in drawn)
    fresh = estimate(rbm, "csl", seed=3, **{**kw, "csl_protocol": "fresh"})
    assert fresh.settings["csl_protocol"] == "fresh" and "burn_in_drawn" not in fresh.settings


def test_pooled_csl_stderr_matches_the_spread_over_seeds(monkeypatch):
    """Batch means over chains: the reported standard error of the mean agrees with the spread of the
    estimates over independent seeds, with every sweep kept (samples within a chain correlated).  The
    chains start at model samples, so the random burn-in does not move the estimate."""
    monkeypatch.setattr(csl_mod, "khat_per_example", lambda log_w: (float("nan"), {}))  # not under test; slow
    rbm = random_rbm(12, 8, seed=4, scale=2.0)
    X = model_samples(rbm, 40, seed=1)
    repeats = 200
    est, se = np.empty(repeats), np.empty(repeats)
    for s in range(repeats):
        res = csl_mod.csl(
            rbm,
            X,
            torch.Generator().manual_seed(s),
            n_chains=20,
            samples_per_chain=25,
            burn_in=20,
            mode="biased",
            train_data=X,
            protocol="pooled",
        )
        est[s], se[s] = res.mean_log_likelihood, res.mean_log_likelihood_stderr
    tol = _spread_tolerance(repeats)
    assert 1 / (1 + tol) < math.sqrt(np.mean(se**2)) / est.std(ddof=1) < 1 / (1 - tol)


# --------------------------------------------------------------------------- bad values
@pytest.mark.parametrize(
    "estimator, option, value", [("raise", "control_variate", "alpha1"), ("csl", "csl_protocol", "pool")]
)
def test_bad_protocol_value_is_refused_with_one_line(csl_rbm, capsys, estimator, option, value):
    """The API, the config check and the command line each refuse an unknown value, naming the option."""
    rbm, X, _ = csl_rbm
    with pytest.raises(ValueError) as exc:
        estimate(rbm, estimator, data=X, **{option: value})
    assert option in str(exc.value) and "\n" not in str(exc.value) and repr(value) in str(exc.value)

    schema = yaml.safe_load(SCHEMA.read_text())
    with pytest.raises(ConfigError, match=f"estimator {estimator}.{option}: '{value}' is not one of"):
        check_estimator_options({"estimators": {estimator: {option: value}}}, schema)

    with pytest.raises(SystemExit) as stop:
        main(["estimate", "model.npz", "--estimator", estimator, f"--{option.replace('_', '-')}", value])
    assert stop.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("logzbench estimate: error:") and option.replace("_", "-") in last and value in last


def test_pooled_csl_needs_two_chains(csl_rbm):
    rbm, X, _ = csl_rbm
    with pytest.raises(ValueError, match="pooled CSL needs chains >= 2"):
        estimate(rbm, "csl", data=X, chains=1, csl_protocol="pooled")
