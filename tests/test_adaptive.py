"""The adaptive schedule and ``sweeps_per_beta``: the pilot is reproducible and independent of the
main run, the frozen schedule leaves each estimator's properties intact, its cost is counted, and bad
settings are refused before any work."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import assert_refused, model_samples, random_rbm

from logzbench.api import estimate
from logzbench.cli import main
from logzbench.estimators import adaptive
from logzbench.estimators import ais as ais_kernel
from logzbench.models import DBM, save_model
from logzbench.models.poe import ProductOfExperts
from logzbench.options import EstimateOptions
from logzbench.schedules import resample


def test_conditional_ess_is_one_for_constant_increments_and_matches_its_formula():
    log_w = torch.log(torch.tensor([[0.1, 0.2, 0.3, 0.4]], dtype=torch.float64))
    inc = torch.full((1, 4), 0.7, dtype=torch.float64)
    assert float(adaptive.conditional_ess(log_w, inc)) == pytest.approx(1.0)
    inc = torch.tensor([[0.0, 1.0, -1.0, 0.5]], dtype=torch.float64)
    W, w = torch.exp(log_w), torch.exp(inc)
    want = float((W * w).sum() ** 2 / (W * w**2).sum())
    assert float(adaptive.conditional_ess(log_w, inc)) == pytest.approx(want, rel=1e-12)


def test_pilot_keeps_the_target_cess_at_every_step():
    rbm = random_rbm(16, 8, seed=2, scale=1.5)
    path = rbm.annealing_path("uniform")
    g = adaptive.pilot_generator(0)
    state = adaptive.init(path, 200, g)
    cess = []
    while state.beta < 1.0:
        b = adaptive.next_beta(path, state, 0.9)
        inc = path.log_f_ratio(state.x, state.beta, b).reshape(state.log_w.shape)
        cess.append((b, float(adaptive.conditional_ess(state.log_w, inc))))
        state, _ = adaptive.step(path, state, 0.9, g)
    steps = np.array(cess)
    assert (steps[:, 1] >= 0.9 - 1e-9).all()  # never below the target
    inner = steps[:-1, 1]  # every step but the last (which may stop short at beta = 1) hits it closely
    assert (inner <= 0.9 + 0.05 * 0.1 + 1e-9).all()
    assert steps[-1, 0] == 1.0


def test_schedule_is_reproducible_and_drawn_apart_from_the_main_run():
    rbm = random_rbm(16, 8, seed=2, scale=1.5)
    kw = dict(K=200, chains=50, seed=3, schedule="adaptive", pilot_chains=30)
    a, b = estimate(rbm, "ais", **kw), estimate(rbm, "ais", **kw)
    np.testing.assert_array_equal(a.schedule, b.schedule)
    assert a.log_z == b.log_z
    c = estimate(rbm, "ais", **{**kw, "seed": 4})
    assert not np.array_equal(a.schedule, c.schedule)
    # the main run draws from its own stream: the same weights as a fixed schedule of these betas
    path = rbm.annealing_path("uniform")
    g = torch.Generator().manual_seed(3)
    state, _ = ais_kernel.run(path, a.schedule, 50, g)
    np.testing.assert_array_equal(state.log_w.numpy(), a.log_weights)
    # and the pilot's own stream differs from the main run's
    p1 = adaptive.pilot_generator(3)
    assert torch.rand(5, generator=p1).tolist() != torch.rand(5, generator=torch.Generator().manual_seed(3)).tolist()


def test_adaptive_ais_agrees_with_exact_and_counts_the_pilot():
    rbm = random_rbm(16, 8, seed=2, scale=1.5)
    exact = rbm.exact_log_z()
    errs = []
    for s in range(6):
        r = estimate(rbm, "ais", K=200, chains=100, seed=s, schedule="adaptive", pilot_chains=50)
        errs.append((r.log_z - exact) / r.log_z_stderr)
        assert r.total_sweeps == 199 * 100 + r.extra["pilot_sweeps"]
        assert r.extra["pilot_sweeps"] == (r.extra["pilot_K"] - 1) * 50
        assert len(r.schedule) == 201 and r.schedule[0] == 0 and r.schedule[-1] == 1
        assert r.settings["target_ess"] == 0.95 and r.settings["pilot_chains"] == 50
    z = np.asarray(errs)
    assert np.abs(z).max() < 4.5 and abs(z.mean()) < 3 / math.sqrt(len(z)) + 1.0


def test_adaptive_without_k_reads_the_pilot_at_the_default_k():
    """Without K the API reads the pilot's shape at the command line's default K (schedules.default_K); the
    pilot's own length is recorded as pilot_K."""
    from logzbench.schedules import DEFAULT_K

    rbm = random_rbm(12, 6, seed=1)
    r = estimate(rbm, "ais", chains=20, seed=0, schedule="adaptive", target_ess=0.99, pilot_chains=20)
    assert r.settings["K"] == DEFAULT_K == len(r.schedule) - 1
    assert r.extra["pilot_sweeps"] == (r.extra["pilot_K"] - 1) * 20


@pytest.mark.parametrize("name", ["raise", "reverse-ais", "ads", "ads-multinomial"])
def test_every_annealed_gibbs_estimator_takes_the_adaptive_schedule(name):
    rbm = random_rbm(10, 6, seed=1)
    data = model_samples(rbm, 5, seed=0)
    exact = rbm.exact_log_z()
    r = estimate(rbm, name, data=data, K=50, chains=30, seed=0, schedule="adaptive", pilot_chains=20)
    assert r.extra["pilot_sweeps"] > 0 and len(r.schedule) == 51
    if r.log_z == r.log_z:  # a log Z estimate: near the exact value
        assert abs(r.log_z - exact) < 0.5
    else:
        exact_ll = float((rbm.log_unnormalized_marginal(data).double() - exact).mean())
        assert abs(r.mean_log_likelihood - exact_ll) < 0.5


def test_dbm_and_hais_take_the_adaptive_schedule():
    dbm = DBM.random((8, 6, 4), scale=0.8, bias_scale=0.5, generator=torch.Generator().manual_seed(0))
    r = estimate(dbm, "ais", K=100, chains=50, seed=0, schedule="adaptive", pilot_chains=20)
    assert abs(r.log_z - dbm.exact_log_z()) < 5 * r.log_z_stderr + 0.05
    poe = ProductOfExperts.random(2, seed=1)
    h = estimate(poe, "hais", K=100, chains=50, seed=0, schedule="adaptive", pilot_chains=20)
    assert abs(h.log_z - poe.exact_log_z()) < 5 * h.log_z_stderr + 0.05
    assert h.extra["pilot_sweeps"] > 0 and len(h.schedule) == 101


def test_sweeps_per_beta_multiplies_the_transitions_and_keeps_the_estimate_right():
    rbm = random_rbm(12, 6, seed=1)
    exact = rbm.exact_log_z()
    one = estimate(rbm, "ais", K=50, chains=50, seed=0)
    three = estimate(rbm, "ais", K=50, chains=50, seed=0, sweeps_per_beta=3)
    assert three.n_sweeps == 3 * one.n_sweeps and three.total_sweeps == 3 * one.total_sweeps
    assert abs(three.log_z - exact) < 4 * three.log_z_stderr + 0.02
    data = model_samples(rbm, 4, seed=0)
    r = estimate(rbm, "raise", data=data, K=50, chains=10, seed=0, sweeps_per_beta=2)
    assert r.n_sweeps == 100


def test_resample_keeps_the_shape():
    b = np.array([0.0, 0.01, 0.05, 0.2, 0.6, 1.0])
    np.testing.assert_allclose(resample(b, 5), b)
    r = resample(b, 50)
    assert len(r) == 51 and r[0] == 0 and r[-1] == 1 and (np.diff(r) >= 0).all()
    np.testing.assert_allclose(r[::10], b)


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(schedule="adaptive", pilot_chains=1), "pilot_chains >= 2"),
        (dict(target_ess=1.0), "target_ess must be in (0, 1)"),
        (dict(target_ess=0), "target_ess must be in (0, 1)"),
        (dict(sweeps_per_beta=0), "sweeps_per_beta must be >= 1"),
    ],
)
def test_bad_settings_are_refused(kw, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        EstimateOptions(**kw)


def test_cli_refuses_adaptive_with_one_pilot_chain(tmp_path, capsys):
    path = tmp_path / "rbm.npz"
    save_model(random_rbm(8, 4, seed=0), path)
    assert_refused(
        main,
        ["estimate", str(path), "--estimator", "ais", "--schedule", "adaptive", "--pilot-chains", "1"],
        ["pilot_chains >= 2"],
        tmp_path,
        capsys,
    )


def test_the_schedule_search_takes_an_injected_root_finder():
    """next_beta's root finder is a parameter (brentq by default): a plain bisection lands in the same CESS
    band, and the pilot passes the finder through to every step."""
    rbm = random_rbm(16, 8, seed=2, scale=1.5)
    path = rbm.annealing_path("uniform")
    calls = []

    def bisect(f, a, b):
        calls.append((a, b))
        for _ in range(60):
            a, b = ((a + b) / 2, b) if f((a + b) / 2) > 0 else (a, (a + b) / 2)
        return a

    default = adaptive.pilot_schedule(path, 200, adaptive.pilot_generator(0), target_ess=0.9)
    mine = adaptive.pilot_schedule(path, 200, adaptive.pilot_generator(0), target_ess=0.9, root_finder=bisect)
    assert len(calls) == len(mine.betas) - 2  # every step but the last, which reaches beta = 1 directly
    assert len(mine.betas) == len(default.betas) and np.allclose(mine.betas, default.betas, atol=1e-3)
