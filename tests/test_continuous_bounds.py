"""Two-sided bounds on continuous models: RAISE with HAIS transitions (``raise-hmc``), reverse HAIS
(``reverse-hais``) and bidirectional Monte Carlo (``bdmc``), on small models with closed forms.

Every tolerance comes from a standard error (reported by the estimator, or the spread of the
per-example differences over an i.i.d. test set) or, for the BDMC ends, from Markov's inequality.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from logzbench import api, plotting, registry, schedules
from logzbench.estimators import hais as hais_mod
from logzbench.estimators.bdmc import bdmc
from logzbench.estimators.bracket import markov_slack
from logzbench.estimators.raise_ import reverse as reverse_run
from logzbench.estimators.raise_hmc import raise_hmc, reverse_hais
from logzbench.models.linear_generative import LinearGenerative
from logzbench.models.poe import ProductOfExperts


def _poe() -> ProductOfExperts:
    """A complete 2-D Laplace product of experts: closed-form log Z, exact samples."""
    return ProductOfExperts.random(2, seed=1)


def _linear(sigma_n: float = 0.5) -> LinearGenerative:
    """A 3-D linear-Gaussian model with 2 latents: closed-form p(x)."""
    return LinearGenerative.random(3, 2, sigma_n=sigma_n, seed=2)


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _laplace_draws(n: int, dim: int, b: float, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` draws of an i.i.d. Laplace(0, b) vector and their log-density."""
    u = torch.rand(n, dim, generator=g, dtype=torch.float64)
    s = torch.rand(n, dim, generator=g, dtype=torch.float64)
    e = -torch.log1p(-u) * b
    x = torch.where(s < 0.5, -e, e)
    return x, (-x.abs() / b - math.log(2 * b)).sum(dim=1)


# --------------------------------------------------------------------------- raise-hmc
@pytest.mark.parametrize("kernel", ["hais", "hmc", "mh"])
def test_raise_hmc_weights_are_unbiased_for_a_normalised_density(kernel):
    """E[w(x)] = p_ann(x), a probability density: importance sampling x from a broad Laplace q' gives
    E[w(x) / q'(x)] = 1.  At K = 10 p_ann is far from p, so this checks the reversed kernel and the
    fresh starting momentum, not the model.  A zero starting momentum (not a sample of the extended
    target) misses 1 by many standard errors with the Hamiltonian kernels: the check has power."""
    poe, K, n = _poe(), 10, 20000
    x, log_q = _laplace_draws(n, 2, 2.0, _g(0))
    res = raise_hmc(
        poe, schedules.linear(K), 1, _g(1), data=x, kernel=kernel, step_size=0.5, mh_sigma=0.5, n_bootstrap=0
    )
    r = np.exp(res.per_example_log_likelihood - log_q.numpy())
    mean, se = r.mean(), r.std(ddof=1) / math.sqrt(n)
    assert abs(mean - 1.0) < 4 * se, (mean, se)
    assert res.n_sweeps == K and res.total_sweeps == K * n
    if kernel != "mh":  # the negative control: start with v = 0 instead of a fresh momentum
        path = hais_mod.analysis_path(poe, kernel=kernel, step_size=0.5)
        g = _g(1)
        st = path.state_from_data(x)
        _, lw = reverse_run(path, st, path.log_f(st, 1.0) - path.log_z0(), schedules.linear(K), g)
        r0 = torch.exp(lw - log_q).numpy()
        assert abs(r0.mean() - 1.0) > 4 * r0.std(ddof=1) / math.sqrt(n), r0.mean()


def test_raise_hmc_is_a_lower_bound_on_fresh_test_sets():
    """Over test sets drawn from p, E[RAISE - mean log p] = -KL(p || p_ann) - (Jensen gap) <= 0.  Each
    seed's difference has the standard error of its per-example differences (i.i.d. rows); the mean
    over seeds may exceed 0 by at most 3 combined standard errors.  With a poor proposal at K = 10
    it is clearly negative."""
    poe, S, P = _poe(), 8, 40
    log_z = poe.exact_log_z()
    diffs, ses = [], []
    for seed in range(S):
        X = poe.sample(P, _g(100 + seed))
        lp = (-poe.energy(X) - log_z).numpy()
        res = raise_hmc(poe, schedules.linear(10), 10, _g(seed), data=X, proposal_scale=3.0, n_bootstrap=0)
        d = res.per_example_log_likelihood - lp
        diffs.append(d.mean())
        ses.append(d.std(ddof=1) / math.sqrt(P))
        # implied log Z sits above the exact one exactly as far as the mean sits below
        assert res.extra["implied_log_z"] - log_z == pytest.approx(-(res.mean_log_likelihood - lp.mean()), abs=1e-9)
        assert res.log_weights.shape == (P, 10) and res.extra["of"] == "p_ann"
    mean, se = float(np.mean(diffs)), math.sqrt(sum(s**2 for s in ses)) / S
    assert mean <= 3 * se, (mean, se)
    assert mean < -3 * se, (mean, se)  # K = 10 from N(0, 9 I): RAISE errs clearly low


def test_raise_hmc_is_close_to_exact_at_large_k():
    """At K = 1000 p_ann ~ p: on one test set, the mean over seeds agrees with the exact mean
    log-likelihood within 4 combined reported standard errors (plus 0.01 nats of finite-K bias)."""
    poe, S = _poe(), 3
    X = poe.sample(20, _g(7))
    exact = float((-poe.energy(X) - poe.exact_log_z()).mean())
    est, ses = [], []
    for seed in range(S):
        res = api.estimate(
            poe, "raise-hmc", data=X, K=1000, chains=10, seed=seed, step_size=0.5, proposal_scale=1.5, n_bootstrap=0
        )
        est.append(res.mean_log_likelihood)
        ses.append(res.mean_log_likelihood_stderr)
        assert res.estimator == "raise-hmc" and res.total_sweeps == 1000 * 10 * 20
    se = math.sqrt(sum(s**2 for s in ses)) / S
    assert abs(np.mean(est) - exact) < 4 * se + 0.01, (np.mean(est), exact, se)


# --------------------------------------------------------------------------- reverse-hais
def test_reverse_hais_is_close_to_exact_at_large_k():
    """sigma_n = 0.5, K = 1000: the harmonic estimate agrees with the closed form within 4 combined
    reported standard errors (mean over seeds)."""
    model = _linear(0.5)
    X = model.sample(10, _g(3))
    exact = float(model.exact_log_likelihood(X).mean())
    est, ses = [], []
    for seed in range(3):
        res = reverse_hais(model, schedules.linear(1000), 20, _g(seed), data=X, n_bootstrap=0)
        est.append(res.mean_log_likelihood)
        ses.append(res.mean_log_likelihood_stderr)
        assert res.n_sweeps == 2000 and "APPROXIMATE" in res.extra["guarantee"]
    se = math.sqrt(sum(s**2 for s in ses)) / 3
    assert abs(np.mean(est) - exact) < 4 * se, (np.mean(est), exact, se)


def test_reverse_hais_lies_above_the_forward_estimate():
    """A tight posterior (sigma_n = 0.2) at K = 150: the forward (HAIS) estimate errs low, the reverse
    one high, so reverse - forward is positive on average beyond 2 combined standard errors; each
    side is on its side of the exact value within 2 combined standard errors."""
    model = _linear(0.2)
    X = model.sample(20, _g(3))
    exact = float(model.exact_log_likelihood(X).mean())
    rev, fwd, se_r, se_f = [], [], [], []
    for seed in range(6):
        res = api.estimate(model, "reverse-hais", data=X, K=150, chains=20, seed=seed, n_bootstrap=0)
        rev.append(res.mean_log_likelihood)
        fwd.append(res.extra["forward_mean_log_likelihood"])
        se_r.append(res.mean_log_likelihood_stderr)
        se_f.append(res.extra["forward_mean_log_likelihood_stderr"])
    S = len(rev)
    cr, cf = math.sqrt(sum(s**2 for s in se_r)) / S, math.sqrt(sum(s**2 for s in se_f)) / S
    diff = float(np.mean(rev) - np.mean(fwd))
    assert diff > 2 * math.hypot(cr, cf), (diff, cr, cf)
    assert np.mean(rev) > exact - 2 * cr and np.mean(fwd) < exact + 2 * cf, (np.mean(rev), np.mean(fwd), exact)


# --------------------------------------------------------------------------- bdmc
def test_bdmc_ends_bracket_the_exact_value_at_a_markov_rate():
    """20 seeds, N = 20 simulated points each, K = 50.  Each end of one seed misses the exact mean
    (the closed form over that seed's points) by more than t = log(20) / N with probability at most
    exp(-N t) = 0.05 (Markov's inequality on exp(N (end - truth)), the points being independent), so
    the misses of each end over 20 seeds are at most Binomial(20, 0.05): 5 or more has probability
    0.003.  Allow 4."""
    model, N, S = _linear(0.5), 20, 20
    t = markov_slack(0.95, N)
    assert t == pytest.approx(math.log(20) / N)
    low_miss = up_miss = 0
    for seed in range(S):
        res = bdmc(model, schedules.linear(50), 10, _g(seed), n_examples=N)
        exact = res.extra["exact_mean_log_likelihood"]
        b = res.extra["bracket"]
        lo, hi = b["mean_log_likelihood_lower_estimate"], b["mean_log_likelihood_upper_estimate"]
        low_miss += lo > exact + t
        up_miss += hi < exact - t
        # the reported interval: the ends widened by their noise
        assert (b["mean_log_likelihood_lower"], b["mean_log_likelihood_upper"]) == res.mean_log_likelihood_ci
        assert b["mean_log_likelihood_lower"] <= lo and b["mean_log_likelihood_upper"] >= hi
        assert b["mean_log_likelihood_lower_guaranteed"] and b["mean_log_likelihood_upper_guaranteed"]
        assert b["mean_log_likelihood_lower_of"] == b["mean_log_likelihood_upper_of"] == "p"
        assert b["mean_log_likelihood_lower_slack"] == pytest.approx(t)
        assert res.mean_log_likelihood == pytest.approx(0.5 * sum(res.mean_log_likelihood_ci))
    assert low_miss <= 4 and up_miss <= 4, (low_miss, up_miss)


def test_bdmc_ends_agree_with_exact_at_large_k():
    """K = 1000: both ends within 4 of their reported standard errors of the exact mean; the bracket
    is narrower than at K = 10."""
    model = _linear(0.5)
    narrow = bdmc(model, schedules.linear(10), 10, _g(0), n_examples=20).extra["width"]
    for seed in range(2):
        res = api.estimate(model, "bdmc", K=1000, chains=10, seed=seed, n_examples=20)
        e = res.extra
        exact = e["exact_mean_log_likelihood"]
        assert abs(e["lower"] - exact) < 4 * e["lower_stderr"], (e["lower"], exact, e["lower_stderr"])
        assert abs(e["upper"] - exact) < 4 * e["upper_stderr"], (e["upper"], exact, e["upper_stderr"])
        assert abs(e["width"]) < narrow
        assert res.total_sweeps == (2 * 1000 - 1) * 10 * 20 and res.log_weights.shape == (20, 10)
        d = res.to_dict()
        assert d["mean_log_likelihood_lower_estimate"] == e["lower"] and d["n_examples"] == 20


# --------------------------------------------------------------------------- plumbing
@pytest.mark.parametrize("name", ["raise-hmc", "reverse-hais", "bdmc"])
def test_same_seed_same_result_and_sweeps_per_beta(name):
    model = _poe() if name == "raise-hmc" else _linear()
    data = None if name == "bdmc" else (model.sample(4, _g(5)))
    kw = dict(K=8, chains=3, n_bootstrap=50, **({"n_examples": 4} if name == "bdmc" else {}))
    a = api.estimate(model, name, data=data, seed=3, **kw)
    b = api.estimate(model, name, data=data, seed=3, **kw)
    c = api.estimate(model, name, data=data, seed=4, **kw)
    assert a.mean_log_likelihood == b.mean_log_likelihood and a.mean_log_likelihood_ci == b.mean_log_likelihood_ci
    np.testing.assert_array_equal(a.log_weights, b.log_weights)
    assert a.mean_log_likelihood != c.mean_log_likelihood
    per_beta = {"raise-hmc": 8, "reverse-hais": 16, "bdmc": 15}[name]
    assert a.n_sweeps == per_beta and a.total_sweeps == per_beta * 3 * 4
    s3 = api.estimate(model, name, data=data, seed=3, sweeps_per_beta=3, **kw)
    assert s3.n_sweeps == 3 * per_beta and s3.settings["sweeps_per_beta"] == 3
    assert s3.mean_log_likelihood != a.mean_log_likelihood


def test_bad_input_is_refused_with_a_clear_message():
    poe, lin = _poe(), _linear()
    for model, name in ((poe, "raise-hmc"), (lin, "reverse-hais")):
        with pytest.raises(ValueError, match="give test data"):
            api.estimate(model, name, K=5, chains=2)
    with pytest.raises(ValueError, match="raise-hmc.*give test data"):
        raise_hmc(poe, schedules.linear(5), 2, _g(0), data=None)
    with pytest.raises(ValueError, match="reverse-hais.*give test data"):
        reverse_hais(lin, schedules.linear(5), 2, _g(0), data=None)
    with pytest.raises(ValueError, match="raise-hmc is for analysis models.*reverse-hais"):
        raise_hmc(lin, schedules.linear(5), 2, _g(0), data=lin.sample(2, _g(0)))
    with pytest.raises(ValueError, match="reverse-hais is for generative models"):
        reverse_hais(poe, schedules.linear(5), 2, _g(0), data=poe.sample(2, _g(0)))
    with pytest.raises(ValueError, match="bdmc simulates data from a directed generative model"):
        bdmc(poe, schedules.linear(5), 2, _g(0), n_examples=3)
    with pytest.raises(ValueError, match="not available for a continuous"):
        api.estimate(poe, "bdmc", K=5, chains=2)


def test_registry_entries_follow_ais_mh():
    names = list(registry.ESTIMATORS)
    i = names.index("ais-mh")
    assert names[i + 1 : i + 4] == ["raise-hmc", "reverse-hais", "bdmc"]
    r, v, b = (registry.estimator(n) for n in ("raise-hmc", "reverse-hais", "bdmc"))
    assert (r.kinds, r.yields, r.bound, r.needs_data) == (("analysis",), "log_likelihood", "lower", True)
    assert (v.kinds, v.yields, v.bound, v.needs_data) == (("generative",), "log_likelihood", "upper", True)
    assert (b.kinds, b.yields, b.bound, b.needs_data) == (("generative",), "log_likelihood", "bracket", False)
    assert "n_examples" in b.options and "sweeps_per_beta" in r.options and b.axes == ("K", "seed")
    styles = [(s.color, s.marker) for s in map(plotting.estimator_style, registry.ESTIMATORS)]
    assert all(styles.count((s.color, s.marker)) == 1 for s in map(plotting.estimator_style, (r.name, v.name, b.name)))


@pytest.mark.parametrize("name", ["raise-hmc", "reverse-hais", "bdmc"])
def test_adaptive_schedule_is_chosen_on_the_estimators_own_path(name):
    """schedule="adaptive": the pilot anneals the estimator's path (the analysis path, or the latent paths
    of test / simulated points); the result keeps the schedule it used and counts the pilot's sweeps."""
    model = _poe() if name == "raise-hmc" else _linear()
    data = None if name == "bdmc" else model.sample(4, _g(5))
    res = api.estimate(
        model,
        name,
        data=data,
        chains=3,
        seed=0,
        schedule="adaptive",
        pilot_chains=10,
        n_bootstrap=0,
        **({"n_examples": 4} if name == "bdmc" else {}),
    )
    K = res.settings["K"]
    assert len(res.schedule) == K + 1 and res.schedule[0] == 0.0 and res.schedule[-1] == 1.0
    assert res.extra["pilot_sweeps"] > 0 and res.settings["pilot_chains"] == 10
    per_beta = {"raise-hmc": K, "reverse-hais": 2 * K, "bdmc": 2 * K - 1}[name]
    assert res.total_sweeps == per_beta * 3 * 4 + res.extra["pilot_sweeps"]
