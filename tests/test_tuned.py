"""The tuned schedule (issue 38, item 4): AIS with it covers exact log Z, every round's sweeps are counted,
the final schedule is a function of the pilot's stream only, the barrier it measures is the path's, its
re-spacing gives every step an equal share, and bad settings are refused before any work."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import model_samples, random_rbm
from scipy.stats import binom

from logzbench import registry
from logzbench.api import estimate
from logzbench.estimators import ais as ais_kernel
from logzbench.estimators import tuned
from logzbench.estimators.context import EstimateContext
from logzbench.models.poe import ProductOfExperts
from logzbench.options import EstimateOptions
from logzbench.schedules import TUNED_MIN_START_K, linear, respace, tuned_round_ks
from logzbench.utils import make_generator


def _allowed(n: int, rate: float, tail: float = 0.01) -> int:
    """The smallest miss count k with P(Binomial(n, rate) > k) <= tail (as tests/test_sandwich.py)."""
    k = 0
    while binom.sf(k, n, rate) > tail:
        k += 1
    return k


class SpinsPath:
    """Independent spins ``x in {0, 1}^n`` on the path ``log f_beta(x) = beta theta . x`` from the uniform
    distribution: ``p_beta`` is a product of Bernoulli(sigmoid(beta theta_i)), so the barrier is known,
    ``sigma(beta)^2 = Var_{p_beta}(theta . x) = sum_i theta_i^2 s_i (1 - s_i)``.  ``transition`` redraws
    exactly from ``p_beta`` with probability ``1 - lazy`` (``lazy = 0``: increments independent across steps;
    ``lazy = r``: consecutive increments correlated by about ``r``)."""

    def __init__(self, theta, lazy: float = 0.0):
        self.theta = torch.as_tensor(theta, dtype=torch.float64)
        self.lazy = float(lazy)

    def log_z0(self) -> float:
        return len(self.theta) * math.log(2.0)

    def exact_log_z(self) -> float:
        return float(torch.nn.functional.softplus(self.theta).sum())

    def _draw(self, n, beta, generator):
        p = torch.sigmoid(beta * self.theta).expand(n, -1)
        return torch.bernoulli(p, generator=generator)

    def sample_initial(self, n_chains, generator):
        return self._draw(n_chains, 0.0, generator)

    def log_f(self, x, beta):
        return beta * (x @ self.theta)

    def log_f_ratio(self, x, beta_from, beta_to):
        return (beta_to - beta_from) * (x @ self.theta)

    def transition(self, x, beta, generator):
        new = self._draw(x.shape[0], beta, generator)
        keep = torch.rand(x.shape[0], 1, generator=generator, dtype=torch.float64) < self.lazy
        return torch.where(keep, x, new)

    def state_from_data(self, data):
        return torch.as_tensor(data, dtype=torch.float64)

    def sigma2(self, beta):
        s = torch.sigmoid(beta * self.theta)
        return float((self.theta**2 * s * (1 - s)).sum())


THETA = [6.0, -5.0, 4.0, 3.0, -2.0, 1.0]
#: strong fields: the barrier is concentrated near beta = 0, where the spins are still free (G about 6)
STEEP = [30.0, 30.0, 30.0, 30.0]


def _exact_barrier(path: SpinsPath) -> tuple[float, float]:
    b = np.linspace(0.0, 1.0, 20001)
    s2 = np.array([path.sigma2(x) for x in b])
    lam = np.trapezoid(np.sqrt(s2), b)
    return float(lam), float(np.trapezoid(s2, b) / lam**2)


# ---------------------------------------------------------------------- the re-spacing and the rounds
def test_respace_gives_every_step_an_equal_share_of_the_barrier():
    b = np.array([0.0, 0.1, 0.5, 0.6, 1.0])
    masses = np.array([1.0, 0.0, 3.0, 0.5])
    floor = 0.05
    new = respace(b, masses, 40, floor)
    assert new[0] == 0.0 and new[-1] == 1.0 and (np.diff(new) > 0).all()
    d = np.diff(b)
    m = np.maximum(masses, floor * masses.sum() * d)  # the floor: a region without barrier still gets steps
    c = np.concatenate([[0.0], np.cumsum(m)])
    shares = np.diff(np.interp(new, b, c))
    np.testing.assert_allclose(shares, c[-1] / 40, rtol=1e-9)
    np.testing.assert_allclose(respace(b, np.zeros(4), 8), linear(8), atol=1e-15)  # no barrier: linear


def test_round_ks_double_up_to_k_and_too_small_a_k_is_refused():
    assert tuned_round_ks(1000) == [16, 32, 63, 125, 250, 500]
    assert tuned_round_ks(64, 2) == [16, 32]
    assert tuned_round_ks(2 * TUNED_MIN_START_K) == [TUNED_MIN_START_K]
    with pytest.raises(ValueError, match="too small to double from"):
        tuned_round_ks(2 * TUNED_MIN_START_K - 1)
    with pytest.raises(ValueError, match="fewer tune_rounds"):
        tuned_round_ks(64, 4)


def test_barrier_of_independent_spins_matches_the_exact_integral():
    """Exact draws at every step: each increment's standard deviation is ``delta_k sigma(beta_k)``, so the
    measured barrier is a Riemann sum of the exact one (plus sampling noise of about 1/sqrt(2M) per step,
    averaged over the steps); no lag (tau about 1) and the log-weight variance is the sum of the steps'."""
    path = SpinsPath(THETA)
    lam, G = _exact_barrier(path)
    prof = tuned.increment_profile(path, linear(400), 2000, torch.Generator().manual_seed(0))
    est_lam, est_G = tuned.barrier(prof.betas, prof.var)
    assert est_lam == pytest.approx(lam, rel=0.02)
    assert est_G == pytest.approx(G, rel=0.03) and est_G >= 1.0
    lag_lam, lag_G = tuned.barrier(prof.betas, prof.var, prof.tau)
    assert lag_lam == pytest.approx(est_lam, rel=0.05)  # independent increments: no lag to correct for
    # Var(log w) over sum of the steps' variances: 1 within its sampling error (about sqrt(2 / M))
    assert prof.log_w_var / prof.var.sum() == pytest.approx(1.0, abs=4 * math.sqrt(2 / 2000))


def test_lag_factor_of_a_lazy_kernel_predicts_the_log_weight_variance():
    """A kernel that keeps the state with probability 1/2: consecutive increments are correlated by 1/2, so
    tau = (1 + 1/2) / (1 - 1/2) = 3, and Var(log w) is about sum_k var_k tau_k (three times the sum)."""
    path = SpinsPath(THETA, lazy=0.5)
    prof = tuned.increment_profile(path, linear(200), 2000, torch.Generator().manual_seed(1))
    w = prof.var / prof.var.sum()
    assert float((w * prof.tau).sum()) == pytest.approx(3.0, rel=0.15)
    predicted = float((prof.var * prof.tau).sum())
    assert prof.log_w_var == pytest.approx(predicted, rel=0.15)
    res = tuned.TuneResult(linear(200), (prof,), prof.sweeps, 2000, "linear", 0.0).extras()
    assert res["tuned_lag_inflation"] == pytest.approx(res["tuned_lag_inflation_ar1"], rel=0.15)
    assert res["tuned_lag_inflation"] == pytest.approx(3.0, rel=0.15)


def test_tuned_schedule_lowers_the_log_weight_variance_where_g_says_it_should():
    """On the spins path the barrier is concentrated near beta = 0 (G > 1): at the same K the tuned schedule's
    Var(log w) is smaller than the linear schedule's, by about G where the increments are independent."""
    path = SpinsPath(STEEP)
    K, M = 64, 1000
    res = tuned.tune_rounds(path, K, 200, tuned.tuned_generator(0))
    lin = tuned.increment_profile(path, linear(K), M, torch.Generator().manual_seed(2))
    tun = tuned.increment_profile(path, res.betas, M, torch.Generator().manual_seed(3))
    G = res.extras()["tuned_G"]
    assert G > 3  # (6.1 exactly; measured on the last pilot round's 32 steps)
    assert tun.log_w_var < lin.log_w_var / (1 + (G - 1) / 2)


# ---------------------------------------------------------------------- through the estimators
def test_tuned_ais_covers_exact_log_z_in_40_seeds_and_counts_every_round():
    rbm = random_rbm(10, 4, seed=5, scale=1.5)
    exact = rbm.exact_log_z()
    K, chains, pilot = 32, 40, 40
    miss = 0
    for s in range(40):
        r = estimate(rbm, "ais", schedule="tuned", K=K, chains=chains, pilot_chains=pilot, seed=s, n_bootstrap=0)
        miss += not abs(r.log_z - exact) <= 1.96 * r.log_z_stderr
        e = r.extra
        assert e["tuned_round_K"] == [*tuned_round_ks(K), K] == [8, 16, K]
        assert e["tuned_round_sweeps"] == [(k - 1) * pilot for k in e["tuned_round_K"][:-1]]
        assert r.total_sweeps == (K - 1) * chains + sum(e["tuned_round_sweeps"]) == (K - 1) * chains + e["pilot_sweeps"]
        assert e["tuned_G"] >= 1.0 - 1e-12 and e["tuned_G_lagged"] >= 1.0 - 1e-12  # Cauchy-Schwarz
        assert len(e["tuned_beta_deciles"]) == 10 and sum(e["tuned_beta_deciles"]) == pytest.approx(1.0)
        assert len(r.schedule) == K + 1 and r.settings["tuned_start"] == "linear"
    assert miss <= _allowed(40, 0.05), miss


def _ctx(model, generator_seed: int, **options) -> EstimateContext:
    return EstimateContext(
        spec=registry.estimator("ais"),
        family=registry.family(model.family),
        model=model,
        data=None,
        train_data=None,
        options=EstimateOptions(**options),
        generator=make_generator(generator_seed),
        device=torch.device("cpu"),
    )


def test_final_schedule_is_fixed_by_the_pilot_stream_alone():
    """The schedule depends on the seed's pilot stream, not on the run's own generator; the run then draws
    only from its own generator, with that schedule fixed (the same weights as plain AIS on those betas)."""
    rbm = random_rbm(10, 4, seed=5, scale=1.5)
    kw = dict(schedule="tuned", K=32, chains=30, pilot_chains=30, seed=7)
    a, b = _ctx(rbm, 0, **kw), _ctx(rbm, 99, **kw)
    torch.rand(10, generator=b.generator)  # the run's own stream moved: the schedule must not
    sa, sb = a.betas(a.path()), b.betas(b.path())
    np.testing.assert_array_equal(sa, sb)
    c = _ctx(rbm, 0, **{**kw, "seed": 8})
    assert not np.array_equal(sa, c.betas(c.path()))
    r = estimate(rbm, "ais", n_bootstrap=0, **kw)
    np.testing.assert_array_equal(r.schedule, sa)
    state, _ = ais_kernel.run(rbm.annealing_path("uniform"), sa, 30, make_generator(7))
    np.testing.assert_array_equal(state.log_w.numpy(), r.log_weights)


@pytest.mark.parametrize("name", ["raise", "reverse-ais", "ads", "ads-multinomial"])
def test_every_annealed_gibbs_estimator_takes_the_tuned_schedule(name):
    rbm = random_rbm(10, 6, seed=1)
    data = model_samples(rbm, 5, seed=0)
    exact = rbm.exact_log_z()
    r = estimate(rbm, name, data=data, K=32, chains=30, seed=0, schedule="tuned", pilot_chains=20)
    assert r.extra["pilot_sweeps"] == sum(r.extra["tuned_round_sweeps"]) > 0 and len(r.schedule) == 33
    if r.log_z == r.log_z:  # a log Z estimate: near the exact value
        assert abs(r.log_z - exact) < 0.5
    else:
        exact_ll = float((rbm.log_unnormalized_marginal(data).double() - exact).mean())
        assert abs(r.mean_log_likelihood - exact_ll) < 0.5


def test_hais_takes_the_tuned_schedule():
    poe = ProductOfExperts.random(2, seed=1)
    h = estimate(poe, "hais", K=64, chains=50, seed=0, schedule="tuned", pilot_chains=20)
    assert abs(h.log_z - poe.exact_log_z()) < 5 * h.log_z_stderr + 0.05
    assert h.extra["pilot_sweeps"] > 0 and len(h.schedule) == 65 and h.extra["tuned_G"] >= 1.0 - 1e-12


def test_tuned_diagnostics_are_tracked_as_metrics():
    from logzbench.tracking.records import estimate_metrics

    r = estimate(random_rbm(8, 4, seed=0), "ais", schedule="tuned", K=16, chains=10, pilot_chains=10, n_bootstrap=0)
    m = estimate_metrics({"result": r.to_dict()})
    assert m["tuned_G"] == r.extra["tuned_G"] >= 1.0 - 1e-12 and m["tuned_rounds"] == 2
    assert [m[f"tuned_beta_decile_{i}"] for i in range(10)] == r.extra["tuned_beta_deciles"]
    assert m["total_sweeps"] == 15 * 10 + 7 * 10 and m["pilot_sweeps"] == 70


def test_the_time_check_counts_the_pilot_rounds():
    """A user's energy: the run's estimated time includes the pilot rounds (K = 16: one round of 8 steps, 7
    sweeps of pilot_chains chains), named in the refusal."""
    from logzbench.models import EnergyModel

    model = EnergyModel(lambda x: x.double().sum(dim=1), 4, "binary")
    with pytest.raises(ValueError) as info:
        estimate(model, "ais", schedule="tuned", K=16, chains=10, pilot_chains=12, max_seconds=1e-9)
    msg = str(info.value)
    assert "16 sweeps of 10 chains, and the tuned schedule's pilot rounds: 7 sweeps of 12 chains" in msg, msg


# ---------------------------------------------------------------------- refusals
# (one line, before any work: tests/test_option_errors.py CASES "tuned-*" through the API and
# tests/test_cli_errors.py CASES "tuned-*" on the command line)
def test_tune_rounds_is_an_integer_of_at_least_one():
    with pytest.raises(ValueError, match="tune_rounds must be >= 1"):
        EstimateOptions(tune_rounds=0)


# ---------------------------------------------------------------------- heavier
@pytest.mark.slow
def test_tuned_ais_covers_exact_log_z_on_a_coupled_rbm_in_40_seeds():
    rbm = random_rbm(16, 8, seed=2, scale=2.0)
    exact = rbm.exact_log_z()
    miss, gs = 0, []
    for s in range(40):
        r = estimate(rbm, "ais", schedule="tuned", K=128, chains=100, pilot_chains=100, seed=s, n_bootstrap=0)
        miss += not abs(r.log_z - exact) <= 1.96 * r.log_z_stderr
        gs.append(r.extra["tuned_G"])
    assert miss <= _allowed(40, 0.05), miss
    assert min(gs) >= 1.0 - 1e-12
