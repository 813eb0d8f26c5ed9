"""The ``smc`` estimator: systematic resampling is unbiased with counts within floor / ceil, log Z covers the
exact value as often as its replicas' standard error says, a fixed schedule's Z-hat is unbiased, the same seed
gives the same estimate, and the command line runs it (its bad input: tests/test_cli_errors.py CASES).

Tolerances.  Resampling counts: a particle of weight ``W`` gets ``floor(M W)`` or ``ceil(M W)`` copies, the
larger with probability ``f = frac(M W)``, so the mean count over ``N`` independent draws has standard
deviation ``sqrt(f (1 - f) / N)``; the tests allow 5 of them.  Coverage: ``log Z`` +- ``t_{R-1} x s.e.`` (the
Student quantile of ``R`` replicas at 95 %) misses the exact value in about 5 % of runs; over 40 seeds the
misses are then about Binomial(40, 0.05), and the tests allow the count whose upper tail is below 1 %
(:func:`_allowed`, as in tests/test_sandwich.py): a correct implementation fails less than once in a hundred
runs, one biased by a standard error fails most runs.
"""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
import torch
from conftest import model_samples, random_rbm, write_estimate_record
from scipy.stats import binom, t

from logzbench.api import estimate
from logzbench.cli import main
from logzbench.estimators import smc as smc_kernel
from logzbench.models import EnergyModel, save_model
from logzbench.models.potts import PottsModel

LEVEL = 0.95


def _allowed(n: int, rate: float, tail: float = 0.01) -> int:
    """The smallest miss count k with P(Binomial(n, rate) > k) <= ``tail``."""
    k = 0
    while binom.sf(k, n, rate) > tail:
        k += 1
    return k


def _misses(results, exact: float) -> list[tuple[float, float]]:
    """``(error, allowance)`` of the runs whose ``log Z`` +- ``t_{R-1} s.e.`` misses ``exact``."""
    out = []
    for r in results:
        q = t.ppf(0.5 + LEVEL / 2, r.settings["replicas"] - 1)
        if abs(r.log_z - exact) > q * r.log_z_stderr:
            out.append((r.log_z - exact, q * r.log_z_stderr))
    return out


def _check_coverage(results, exact: float) -> None:
    bad = _misses(results, exact)
    assert len(bad) <= _allowed(len(results), 1 - LEVEL), (bad, exact)


# --------------------------------------------------------------------------- systematic resampling
def test_systematic_resampling_is_unbiased_and_within_floor_and_ceil():
    g = torch.Generator().manual_seed(0)
    M, N = 7, 20_000
    w = torch.tensor([0.31, 0.0, 0.05, 0.2, 0.123, 0.017, 0.3], dtype=torch.float64)
    log_w = torch.log(w).expand(N, M) + 700.0  # unnormalised and far from 0: normalised in float64
    idx = smc_kernel.systematic_resample(log_w, g)
    assert idx.shape == (N, M) and int(idx.min()) >= 0 and int(idx.max()) < M
    counts = torch.zeros(N, M, dtype=torch.float64).scatter_add_(1, idx, torch.ones(N, M, dtype=torch.float64))
    expected = M * w / w.sum()
    lo, hi = torch.floor(expected), torch.ceil(expected)
    assert bool(((counts >= lo) & (counts <= hi)).all())  # the low-variance property, every draw
    assert bool((counts.sum(1) == M).all()) and float(counts[:, 1].max()) == 0.0  # weight 0: never copied
    f = expected - lo
    sd = torch.sqrt(f * (1 - f) / N)
    assert bool((torch.abs(counts.mean(0) - expected) <= 5 * sd + 1e-12).all()), (counts.mean(0), expected)


def test_systematic_resampling_of_equal_weights_keeps_every_particle():
    idx = smc_kernel.systematic_resample(torch.zeros(3, 5, dtype=torch.float64), torch.Generator().manual_seed(1))
    assert torch.equal(idx, torch.arange(5).expand(3, 5))


# --------------------------------------------------------------------------- coverage against enumeration
def test_rbm_log_z_covers_the_exact_value_in_40_seeds_adaptive():
    """The default (adaptive) schedule on a 10x4 RBM: 40 seeds, 4 replicas of 20 particles each."""
    rbm = random_rbm(10, 4, seed=3, scale=1.5)
    exact = rbm.exact_log_z()
    runs = [estimate(rbm, "smc", chains=20, replicas=4, seed=s, n_bootstrap=0, threads=1) for s in range(40)]
    _check_coverage(runs, exact)
    assert all(r.settings["schedule"] == "adaptive" and not r.extra["unbiased"] for r in runs)
    assert sum(r.extra["n_resampled"] for r in runs) > 0  # the runs resample: the test exercises it


def test_potts_log_z_covers_the_exact_value_in_40_seeds_linear():
    """A 5-site, 3-state Potts model on the linear schedule (Z-hat unbiased), resampling at ESS < 0.9."""
    pm = PottsModel.random(5, 3, scale=0.8, field_scale=0.5, seed=1)
    exact = pm.exact_log_z()
    kw = dict(chains=20, replicas=4, schedule="linear", K=20, ess_threshold=0.9, n_bootstrap=0, threads=1)
    runs = [estimate(pm, "smc", seed=s, **kw) for s in range(40)]
    _check_coverage(runs, exact)
    assert all(r.extra["unbiased"] and r.settings["K"] == 20 for r in runs)
    assert sum(r.extra["n_resampled"] for r in runs) > 0


def test_fixed_schedule_z_hat_is_unbiased_with_resampling():
    """2000 independent replicas of 10 particles (one batched run) on a coarse linear schedule (5 steps: the
    weights drift far from uniform between resamplings at ESS < 0.5): the mean of their Z-hat / Z is 1 within
    4 standard errors of that mean.  (Dropping the weights W from the increment's mean errs by 9 of them.)"""
    rbm = random_rbm(10, 4, seed=3, scale=1.5)
    exact = rbm.exact_log_z()
    path = rbm.annealing_path("uniform")
    res = smc_kernel.smc(
        path, 10, 2000, torch.Generator().manual_seed(0), betas=np.linspace(0, 1, 6), ess_threshold=0.5, n_bootstrap=0
    )
    ratio = np.exp(np.asarray(res.extra["replica_log_z"]) - exact)
    assert res.extra["n_resampled"] > 50
    assert abs(ratio.mean() - 1.0) <= 4 * ratio.std(ddof=1) / math.sqrt(ratio.size), (ratio.mean(), ratio.std())
    assert res.total_sweeps == 4 * 10 * 2000 and res.n_chains == 20_000 and res.extra["unbiased"]


def test_rbm_with_data_attaches_the_test_log_likelihood():
    rbm = random_rbm(10, 4, seed=3, scale=1.5)
    data = model_samples(rbm, 15, seed=1)
    r = estimate(rbm, "smc", data=data, chains=20, replicas=4, seed=0, n_bootstrap=0, threads=1)
    exact_ll = float((rbm.log_unnormalized_marginal(data).double() - rbm.exact_log_z()).mean())
    assert r.mean_log_likelihood == pytest.approx(float(rbm.log_unnormalized_marginal(data).double().mean()) - r.log_z)
    assert r.mean_log_likelihood_stderr == pytest.approx(r.log_z_stderr)
    assert abs(r.mean_log_likelihood - exact_ll) <= 6 * r.log_z_stderr + 1e-3


@pytest.mark.slow
def test_potts_log_z_covers_the_exact_value_in_40_seeds_adaptive():
    pm = PottsModel.random(5, 3, scale=0.8, field_scale=0.5, seed=1)
    runs = [estimate(pm, "smc", chains=30, seed=s, n_bootstrap=0, threads=1) for s in range(40)]
    _check_coverage(runs, pm.exact_log_z())


@pytest.mark.slow
def test_dbm_log_z_covers_the_exact_value_in_40_seeds():
    from logzbench.models import DBM

    dbm = DBM.random((8, 6, 4), scale=0.8, bias_scale=0.5, generator=torch.Generator().manual_seed(0))
    runs = [estimate(dbm, "smc", chains=30, seed=s, n_bootstrap=0, threads=1) for s in range(40)]
    _check_coverage(runs, dbm.exact_log_z())


@pytest.mark.slow
def test_complete_poe_log_z_covers_the_closed_form_in_40_seeds():
    from logzbench.models.poe import ProductOfExperts

    poe = ProductOfExperts.random(2, seed=1)
    runs = [estimate(poe, "smc", chains=30, seed=s, n_bootstrap=0, threads=1) for s in range(40)]
    _check_coverage(runs, poe.exact_log_z())
    assert all(0.0 < r.extra["acceptance_rate"] <= 1.0 for r in runs)


# --------------------------------------------------------------------------- reproducibility and bookkeeping
def test_same_seed_same_estimate_and_the_counts_add_up():
    rbm = random_rbm(10, 4, seed=3, scale=1.5)
    a, b = (estimate(rbm, "smc", chains=20, replicas=3, seed=5, n_bootstrap=0, threads=1) for _ in range(2))
    c = estimate(rbm, "smc", chains=20, replicas=3, seed=6, n_bootstrap=0, threads=1)
    assert a.log_z == b.log_z and a.extra == b.extra and np.array_equal(a.schedule, b.schedule)
    assert a.log_z != c.log_z
    # the replicas' Z-hats give log Z; sweeps count every replica's particles
    assert a.log_z == pytest.approx(float(torch.logsumexp(torch.tensor(a.extra["replica_log_z"]), 0)) - math.log(3))
    assert a.total_sweeps == round(a.extra["n_temperatures"] * 3 - 3) * 20  # (K_r - 1) sweeps per replica
    assert a.n_chains == 60 and 0 < a.ess <= 60
    assert a.settings["ess_threshold"] == 0.5 and a.settings["replicas"] == 3 and a.settings["chains"] == 20


def test_the_cap_k_bounds_the_adaptive_temperatures():
    rbm = random_rbm(10, 4, seed=3, scale=1.5)
    r = estimate(rbm, "smc", chains=20, replicas=2, seed=0, K=3, target_ess=0.999, n_bootstrap=0, threads=1)
    assert r.extra["n_temperatures_max"] <= 3 and r.extra["capped_replicas"] == 2
    assert r.schedule[-1] == 1.0 and len(r.schedule) <= 4


# --------------------------------------------------------------------------- a user's energy
def _quadratic(x):
    """A binary energy on 6 sites with couplings (exact log Z by enumeration of 64 states)."""
    x = x.double()
    return 0.8 * (x[:, :-1] * x[:, 1:]).sum(1) - 0.4 * x.sum(1) + 1.2 * x[:, 0] * x[:, -1]


def _slow(x):
    time.sleep(SLEEP)
    return -x.double().sum(1)


SLEEP = 0.01


def test_a_users_binary_energy_runs_and_covers_its_exact_value():
    model = EnergyModel(_quadratic, 6, "binary")
    exact = estimate(model, "exact", threads=1).log_z
    r = estimate(model, "smc", chains=20, replicas=4, seed=0, n_bootstrap=0, threads=1)
    assert abs(r.log_z - exact) <= t.ppf(0.999, 3) * r.log_z_stderr, (r.log_z, exact, r.log_z_stderr)


def test_a_users_energy_is_timed_with_smcs_plan_of_sweeps():
    """A fixed schedule: (K - 1) sweeps of every replica's particles at once; the adaptive one: up to the cap K
    per replica (without K only a lower bound is known)."""
    model = EnergyModel(_slow, 5, "binary")
    with pytest.raises(ValueError) as info:  # 3 sweeps x 5 sites x at least 10 ms: over 0.05 s
        estimate(model, "smc", schedule="linear", K=3, chains=4, replicas=2, max_seconds=0.05, threads=1)
    assert "3 sweeps of 8 chains" in str(info.value) and "over the budget" in str(info.value)
    with pytest.raises(ValueError) as info:  # 2 replicas x 3 sweeps x 5 sites x at least 10 ms: over 0.25 s
        estimate(model, "smc", K=3, chains=4, replicas=2, max_seconds=0.25, threads=1)
    assert "at most 3 sweeps of 4 particles in each of 2 replicas" in str(info.value)


# --------------------------------------------------------------------------- command line
def test_cli_runs_smc_on_a_model_file(tmp_path, capsys):
    rbm = random_rbm(10, 4, seed=3, scale=1.5)
    path = tmp_path / "rbm.npz"
    save_model(rbm, path)
    out = tmp_path / "out.json"
    argv = ["estimate", str(path), "--estimator", "smc", "--chains", "20", "--replicas", "4", "--json", str(out)]
    assert main(argv + ["--ess-threshold", "0.7"]) == 0
    d = json.loads(out.read_text())
    assert d["estimator"] == "smc" and d["settings"]["schedule"] == "adaptive"
    assert d["settings"]["ess_threshold"] == 0.7 and d["settings"]["replicas"] == 4
    for key in ("n_resampled", "n_temperatures", "ess_min_fraction", "replica_log_z", "unbiased"):
        assert key in d["extra"], key
    q = t.ppf(0.999, 3)
    assert abs(d["log_z"] - rbm.exact_log_z()) <= q * d["log_z_stderr"]


# --------------------------------------------------------------------------- the workflow
def _config(**entry):
    return {
        "datasets": {"d": {"source": "digits"}, "v": {"source": "vanhateren", "n_components": 4}},
        "models": {
            "m": {"dataset": "d", "hyperparams": {"n_hidden": 8}},
            "p": {"dataset": "v", "hyperparams": {"family": "poe-laplace", "size": 4}},
        },
        "evaluation": {"K": [10, 20], "inits": ["uniform", "base-rate"], "seeds": [0, 1], "exact_max_units": 20},
        "estimators": {"x": dict(entry)},
        "device": "cpu",
    }


def test_workflow_sweeps_smc_over_seeds_with_its_own_schedule_and_options():
    """Swept over seeds only (K, when given, is one value: a fixed schedule's steps or the adaptive cap; one init);
    the adaptive schedule is its default, and its options reach the estimate."""
    from logzbench.errors import ConfigError
    from logzbench.pipeline import config as checks
    from logzbench.pipeline import sweep
    from logzbench.pipeline.jobs import estimate_options

    config = _config(method="smc", chains=50, replicas=4, ess_threshold=0.3, inits=["base-rate"])
    assert [j.path() for j in sweep.model_jobs(config, "m", presets={})] == [
        "results/estimates/m/x/seed0.json",
        "results/estimates/m/x/seed1.json",
    ]
    assert [j.path() for j in sweep.model_jobs(config, "p", presets={})] == [
        "results/estimates/p/x/seed0.json",
        "results/estimates/p/x/seed1.json",
    ]
    s = sweep.job_settings(config, "m", "x", "seed1", presets={})
    assert (s["schedule"], s["K"], s["init"], s["target_ess"]) == ("adaptive", None, "base-rate", 0.95)
    opts = estimate_options(s)
    assert (opts["replicas"], opts["ess_threshold"], opts["chains"], opts["seed"]) == (4, 0.3, 50, 1)
    s = sweep.job_settings(_config(method="smc", schedule="linear", K=[64]), "m", "x", "seed0", presets={})
    assert (s["schedule"], s["K"]) == ("linear", 64)
    with pytest.raises(ConfigError, match="not swept over K.*give one value"):
        checks.check_config(_config(method="smc", K=[10, 20]), presets={})


# --------------------------------------------------------------------------- the report
def _write_record(root, model, entry, res, stem, K=None, init=None, seed=None):
    """One estimate's files, as :func:`logzbench.pipeline.jobs.run_estimate` writes them."""
    settings = {
        "model": model,
        "dataset": "digits",
        "estimator": entry,
        "method": res.estimator,
        "K": K,
        "init": init,
        "seed": seed,
        "device": "cpu",
        "n_visible": 10,
        "family": "rbm",
        "hidden_sizes": [4],
        "n_hidden": 4,
    }
    write_estimate_record(root, settings, res, stem)


def test_report_summarises_smc_rows_against_exact(tmp_path):
    """Records of smc (two seeds) and exact build a report: one summary row for smc, its log Z checked against
    the replicas' stored log Z-hats (a record whose log Z was edited is refused)."""
    import pandas as pd

    from logzbench.report import build_report

    rbm = random_rbm(10, 4, seed=3, scale=1.5)
    _write_record(tmp_path, "m", "exact", estimate(rbm, "exact", threads=1), "exact")
    for s in (0, 1):
        res = estimate(rbm, "smc", chains=20, replicas=4, seed=s, init="uniform", threads=1)
        _write_record(tmp_path, "m", "smc", res, f"seed{s}", init="uniform", seed=s)
    paths = build_report(tmp_path / "results" / "estimates", tmp_path / "report", plots=False)
    summary = pd.read_csv(paths["summary"])
    row = summary[summary["method"] == "smc"]
    assert len(row) == 1 and np.isfinite(row["log_z"]).all()
    rec = tmp_path / "results" / "estimates" / "m" / "smc" / "seed0.json"
    d = json.loads(rec.read_text())
    d["result"]["log_z"] += 0.5
    rec.write_text(json.dumps(d))
    with pytest.raises(ValueError, match="disagrees with the 4"):
        build_report(tmp_path / "results" / "estimates", tmp_path / "report2", plots=False)
