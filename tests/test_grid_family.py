"""The grid MRF as a model family (issue 38, item 5): its model file, the CLI's every discrete estimator
on a 3x4 grid file against brute-force enumeration, the spin-glass generator and its refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from logzbench import registry
from logzbench.cli import main
from logzbench.errors import ModelFileError
from logzbench.models import load_model, save_model
from logzbench.models.grid import GridMRF
from logzbench.training import train_model

#: standard errors an estimate may lie from the exact value (a fixed seed: the tests are deterministic)
Z = 5.0


@pytest.fixture(scope="module")
def grid_files(tmp_path_factory):
    """A 3x4 grid file, its exact log Z by brute force (2^12 states), and rows drawn from it (row-major)."""
    tmp = tmp_path_factory.mktemp("grid")
    m = GridMRF.random(3, 4, sigma_pair=1.0, sigma_unary=0.3, seed=1)
    save_model(m, tmp / "grid.npz")
    x = m.gibbs(torch.zeros(60, 3, 4, dtype=torch.float64), torch.Generator().manual_seed(0), n_sweeps=50)
    rows = x.reshape(60, 12).numpy().astype(np.uint8)
    np.save(tmp / "test.npy", rows[:10])
    np.save(tmp / "train.npy", rows[10:])
    ll = (m.log_f(rows[:10]) - m.brute_force_log_z()).mean().item()
    return tmp, m.brute_force_log_z(), ll


def test_grid_file_round_trip_and_exact_equals_brute_force(grid_files, tmp_path, capsys):
    tmp, log_z, ll = grid_files
    m = load_model(tmp / "grid.npz")
    assert m.family == "grid-mrf" and m.shape == (3, 4) and m.n_visible == 12
    assert set(np.load(tmp / "grid.npz").files) == {"model_type", "theta_unary", "theta_h", "theta_v"}
    out = tmp_path / "exact.json"
    argv = ["estimate", str(tmp / "grid.npz"), "--estimator", "exact", "--data", str(tmp / "test.npy")]
    assert main([*argv, "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["log_z"] == pytest.approx(log_z, abs=1e-10)
    assert res["mean_log_likelihood"] == pytest.approx(ll, abs=1e-10)
    assert res["extra"]["log_z_error_bound"] < 1e-9


def test_rows_are_the_grid_row_major():
    """Row ``r W + c`` of a data row is site ``(r, c)``: log f of rows equals log f of the grids."""
    m = GridMRF.random(3, 4, sigma_pair=1.0, sigma_unary=0.5, seed=2)
    x = torch.randint(0, 2, (20, 3, 4), generator=torch.Generator().manual_seed(1)).double()
    rows = x.numpy().reshape(20, 12)
    torch.testing.assert_close(m.log_unnormalized_marginal(rows), m.log_f(x), rtol=0, atol=0)
    torch.testing.assert_close(m.exact_log_f(rows), m.log_f(x), rtol=0, atol=0)


ESTIMATORS = [e for e in registry.estimators_for("grid-mrf") if e != "exact"]


def test_every_discrete_estimator_applies():
    discrete = {n for n, s in registry.ESTIMATORS.items() if "binary" in s.kinds and s.families is None}
    assert set(registry.estimators_for("grid-mrf")) == discrete


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_cli_estimators_agree_with_brute_force(grid_files, tmp_path, estimator):
    """``logzbench estimate FILE.npz --estimator X`` on the 3x4 grid, from the training rows' base rate: within
    Z standard errors of the brute-force value (RAISE: of the exact mean test log-likelihood; the sandwich:
    its bracket holds it)."""
    tmp, log_z, ll = grid_files
    spec = registry.estimator(estimator)
    argv = ["estimate", str(tmp / "grid.npz"), "--estimator", estimator, "--data", str(tmp / "test.npy")]
    argv += ["--train-data", str(tmp / "train.npy"), "--init", "base-rate", "--chains", "200", "--seed", "0"]
    if "K" in spec.options:
        argv += ["--steps", "100"]
    out = tmp_path / "res.json"
    assert main([*argv, "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["settings"]["model_family"] == "grid-mrf"
    if spec.bound == "bracket":
        lo, hi = res["log_z_ci"]
        assert lo <= log_z <= hi
    elif spec.yields == "log_likelihood":
        assert abs(res["mean_log_likelihood"] - ll) <= Z * res["mean_log_likelihood_stderr"]
    else:
        assert abs(res["log_z"] - log_z) <= Z * res["log_z_stderr"]


def test_base_rate_needs_training_rows(grid_files, capsys):
    tmp, _, _ = grid_files
    rc = main(["estimate", str(tmp / "grid.npz"), "--estimator", "ais", "--init", "base-rate", "--steps", "5"])
    assert rc == 2
    assert "needs training rows" in capsys.readouterr().err


def test_exact_refuses_a_grid_wider_than_the_transfer_matrix(tmp_path, capsys):
    save_model(GridMRF.random(21, 21, sigma_pair=0.1, seed=0), tmp_path / "wide.npz")
    assert main(["estimate", str(tmp_path / "wide.npz"), "--estimator", "exact"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "min(H, W) <= 20" in err


@pytest.mark.parametrize(
    "arrays, words",
    [
        ({"theta_h": np.zeros((3, 4, 2, 2))}, ["'theta_h' has shape (3, 4, 2, 2)", "expected (3, 3, 2, 2)"]),
        ({"theta_v": np.full((2, 4, 2, 2), np.nan)}, ["'theta_v' contains NaN"]),
        ({"theta_unary": np.full((3, 4, 2), np.inf)}, ["'theta_unary' contains inf"]),
        ({"theta_v": None}, ["missing array(s) ['theta_v']"]),
        ({"extra": np.zeros(3)}, ["unexpected array(s) ['extra']"]),
        ({"theta_h": np.full((3, 3, 2, 2), 1e31)}, ["'theta_h'", "above 1e+30"]),
    ],
)
def test_bad_grid_arrays_are_refused_naming_the_file(arrays, words):
    good = GridMRF.random(3, 4, sigma_pair=1.0, seed=0).to_arrays()
    a = {"model_type": np.array("grid-mrf"), **good, **arrays}
    a = {k: v for k, v in a.items() if v is not None}
    with pytest.raises(ModelFileError) as info:
        GridMRF.from_arrays(a, source="g.npz")
    msg = str(info.value)
    assert msg.startswith("g.npz: ") and "\n" not in msg
    for w in words:
        assert w in msg


def test_spin_glass_is_deterministic_and_its_tables_are_ising():
    a = GridMRF.spin_glass(4, 6, beta=1.5, couplings="gaussian", field=0.2, seed=3)
    b = GridMRF.spin_glass(4, 6, beta=1.5, couplings="gaussian", field=0.2, seed=3)
    for name in ("theta_unary", "theta_h", "theta_v"):
        assert torch.equal(getattr(a, name), getattr(b, name))
    pm = GridMRF.spin_glass(3, 3, beta=2.0, couplings="pm1", seed=0)
    # log f(x) = beta sum J s_i s_j: J_h of the Ising form is 4 beta J with |J| = 1
    assert set(pm.J_h.abs().flatten().tolist()) == {8.0}
    # no field: f(x) = f(1 - x)
    z = GridMRF.spin_glass(3, 4, beta=1.0, seed=1)
    x = torch.randint(0, 2, (10, 3, 4), generator=torch.Generator().manual_seed(0)).double()
    torch.testing.assert_close(z.log_f(x), z.log_f(1 - x), rtol=0, atol=1e-12)
    assert z.exact_log_z() == pytest.approx(z.brute_force_log_z(), abs=1e-10)


def test_the_family_trainer_generates_the_spin_glass():
    rows = np.zeros((5, 12), dtype=np.float32)
    m, history = train_model(rows, rows, family="grid-mrf", height=3, width=4, beta=1.2, seed=7)
    assert history == [] and m.family == "grid-mrf"
    assert torch.equal(m.theta_h, GridMRF.spin_glass(3, 4, beta=1.2, seed=7).theta_h)
    with pytest.raises(ValueError, match="rows of 12"):
        train_model(np.zeros((5, 10)), None, family="grid-mrf", height=3, width=4)
    with pytest.raises(ValueError, match="couplings must be one of"):
        train_model(rows, None, family="grid-mrf", height=3, width=4, couplings="cauchy")


def test_the_config_check_knows_the_spin_glass_couplings():
    """The torch-free check of the workflow's config (training.grid) and the model agree on the couplings."""
    from logzbench.models.grid import SPIN_GLASS_COUPLINGS
    from logzbench.training.grid import COUPLINGS, check_grid_hyperparams

    assert COUPLINGS == SPIN_GLASS_COUPLINGS
    assert check_grid_hyperparams({"height": 16, "width": 48, "beta": 1.5}, 768) is None
    assert "rows of 12 values" in check_grid_hyperparams({"height": 3, "width": 4}, 10)
    assert "beta must be a finite number >= 0" in check_grid_hyperparams({"height": 3, "width": 4, "beta": -1})


def test_samples_of_a_grid_are_rows(grid_files, tmp_path):
    """``logzbench sample`` writes a grid's states as rows of H*W values, row-major (what --data takes)."""
    tmp, _, _ = grid_files
    out = tmp_path / "s.npz"
    argv = ["sample", str(tmp / "grid.npz"), "--n", "7", "--init", "uniform", "--exact", "never", "--burn-in", "5"]
    assert main([*argv, "--out", str(out)]) == 0
    x = np.load(out)["x"]
    assert x.shape == (7, 12) and set(np.unique(x)) <= {0, 1}
