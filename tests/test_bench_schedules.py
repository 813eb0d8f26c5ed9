"""benchmarks/bench_schedules.py: the moment-averaging path is a valid AIS path, and ``--quick`` runs end to end."""

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import brute_log_z, random_rbm

from logzbench.estimators import ais
from logzbench.utils import make_generator

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_schedules.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_schedules", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _ma_path(bench, rbm, L=4, seed=0):
    a0 = torch.zeros(rbm.n_visible)
    return bench.fit_anchors(
        rbm, a0, L, bench.ma_generator(seed), chains=50, target_burn_in=20, target_sweeps=20, fit_updates=10
    )


def test_ma_path_endpoints_and_fused_step(bench):
    rbm = random_rbm(8, 4, seed=3, scale=0.8)
    path, cost = _ma_path(bench, rbm)
    assert cost["sweeps"] == (20 + 20) * 50 + 3 * 10 * 50  # target moments, then 3 fitted anchors
    v = path.sample_initial(30, make_generator(1))
    # beta = 1 is the model, beta = 0 the factorial p_0 (uniform here: log f_0 = n_hidden log 2)
    torch.testing.assert_close(path.log_f(v, 1.0), rbm.log_unnormalized_marginal(v))
    torch.testing.assert_close(path.log_f(v, 0.0), torch.full((30,), 4 * math.log(2.0), dtype=torch.float64))
    # increments inside a segment and across an anchor equal differences of log f
    for b0, b1 in ((0.1, 0.2), (0.2, 0.3), (0.7, 1.0)):
        torch.testing.assert_close(path.log_f_ratio(v, b0, b1), path.log_f(v, b1) - path.log_f(v, b0))
    # the fused AIS step: the same increment and the same draws as reweighting then moving
    inc, v1 = path.reweight_and_move(v, 0.3, 0.4, make_generator(7))
    v2 = path.transition(v, 0.4, make_generator(7))
    torch.testing.assert_close(inc, path.log_f_ratio(v, 0.3, 0.4))
    assert torch.equal(v1, v2)


def test_ma_ais_is_consistent(bench):
    """AIS on the fitted moment-averaging path estimates the exact log Z (any path from p_0 is valid)."""
    rbm = random_rbm(8, 4, seed=5, scale=0.8)
    path, _ = _ma_path(bench, rbm, L=8)
    res = ais.ais(path, np.linspace(0.0, 1.0, 201), 2000, make_generator(0), n_bootstrap=1)
    exact = brute_log_z(rbm)
    assert abs(res.log_z - exact) < 5 * res.log_z_stderr + 0.02


def test_hidden_modes_of_a_two_mode_rbm(bench):
    """Two hidden units, each switching one half of the visibles on and the other off: two heavy basins,
    ``h = (1, 0)`` and ``(0, 1)``, whose visible patterns differ everywhere."""
    from logzbench.models import BinaryRBM

    W = np.zeros((12, 2))
    W[:6, 0], W[6:, 0], W[:6, 1], W[6:, 1] = 4.0, -4.0, -4.0, 4.0
    rbm = BinaryRBM(W, -2.0 * np.ones(12), np.array([-6.0, -6.0]))
    mass, ham = bench.hidden_modes(rbm)
    assert mass[:2].sum() > 0.9 and mass[0] > 0.3 and mass[1] > 0.3
    assert ham[1] == 12  # the two basins' most likely visible patterns differ everywhere


def test_quick_run(bench, tmp_path):
    out = bench.main(["--quick", "--threads", "1", "--json", str(tmp_path / "out.json")])
    models = {m["model"] for m in out["models"]}
    assert models == set(bench.QUICK_MODELS)
    rows = out["table"]
    assert {(r["model"], r["schedule"]) for r in rows} == {(m, s) for m in models for s in bench.SCHEDULES}
    for r in rows:
        assert r["total_sweeps"] > 0 and math.isfinite(r["median_abs_error"])
        assert r["K"] == bench.SM14500_K if r["schedule"] == "sm14500" else 16 <= r["K"] <= 256
        if r["schedule"] == "moment-averaging":  # the fits are counted
            runs = r["levels"][-1]["runs"]
            assert all(x["total_sweeps"] > x["fit_sweeps"] > 0 for x in runs)
        if r["schedule"] == "adaptive":  # the pilot is counted
            assert all(x["pilot_sweeps"] > 0 for x in r["levels"][-1]["runs"])
    for m in models:  # both adaptive settings were tried, with 1 and 2 sweeps per temperature
        tried = {x["variant"] for x in out["results"] if x["model"] == m and x["schedule"] == "adaptive"}
        assert len(tried) == 4
    saved = json.loads((tmp_path / "out.json").read_text())
    assert saved["threads"] == 1 and len(saved["seeds"]) == 2
