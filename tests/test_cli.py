"""The command line: JSON output, exit status and clear refusals."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import model_samples, random_rbm

from logzbench.cli import main
from logzbench.estimators.exact import exact_log_z
from logzbench.models import load_model, save_model


@pytest.fixture
def model_and_data(tmp_path):
    rbm = random_rbm(16, 8, seed=3, scale=0.8)
    model = tmp_path / "model.npz"
    save_model(rbm, model)
    X = model_samples(rbm, 30, seed=1).numpy().astype(np.uint8)
    data = tmp_path / "test.npy"
    np.save(data, X)
    return rbm, model, data


def test_estimate_prints_one_json_object(model_and_data, tmp_path, capsys):
    rbm, model, data = model_and_data
    out = tmp_path / "res.json"
    lw = tmp_path / "lw.npz"
    rc = main(
        [
            "estimate",
            str(model),
            "--estimator",
            "ais",
            "--data",
            str(data),
            "--steps",
            "200",
            "--chains",
            "50",
            "--seed",
            "1",
            "--json",
            str(out),
            "--log-weights",
            str(lw),
        ]
    )
    assert rc == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text())
    for key in ("log_z", "log_z_stderr", "ess", "seconds", "mean_log_likelihood", "n_sweeps", "settings"):
        assert key in printed
    assert abs(printed["log_z"] - exact_log_z(rbm)) < 4 * printed["log_z_stderr"] + 1e-4
    assert np.load(lw)["log_weights"].shape == (50,)


@pytest.mark.parametrize(
    "schedule, steps, K", [("linear", [], 1000), ("sm14500", [], 14500), ("sm14500", ["--steps", "14500"], 14500)]
)
def test_steps_default_to_the_schedules_own(model_and_data, capsys, schedule, steps, K):
    """Without --steps a linear schedule has K = 1000 and sm14500 its own 14,500 (a different --steps is refused:
    tests/test_option_errors.py)."""
    rbm, model, _ = model_and_data
    assert main(["estimate", str(model), "--estimator", "ais", "--schedule", schedule, "--chains", "4", *steps]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["settings"]["K"] == K and abs(res["log_z"] - exact_log_z(rbm)) < 4 * res["log_z_stderr"] + 0.05


@pytest.mark.parametrize("estimator", ["exact", "raise", "csl"])
def test_estimate_other_estimators(model_and_data, capsys, estimator):
    _, model, data = model_and_data
    rc = main(["estimate", str(model), "--estimator", estimator, "--data", str(data), "--steps", "50", "--chains", "5"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    assert res["mean_log_likelihood"] is not None and res["mean_log_likelihood_stderr"] is not None


def test_base_rate_init_uses_stored_data_mean_or_train_data(model_and_data, tmp_path, capsys):
    rbm, model, data = model_and_data
    rc = main(["estimate", str(model), "--estimator", "ais", "--init", "base-rate", "--steps", "20"])
    assert rc == 2 and "data-base-rate" in capsys.readouterr().err
    rc = main(
        [
            "estimate",
            str(model),
            "--estimator",
            "ais",
            "--init",
            "base-rate",
            "--steps",
            "20",
            "--train-data",
            str(data),
        ]
    )
    assert rc == 0


@pytest.mark.parametrize(
    "payload, message",
    [
        (dict(W=np.full((16, 8), np.nan), visible_bias=np.zeros(16), hidden_bias=np.zeros(8)), "NaN"),
        (dict(W=np.zeros((16, 8)), visible_bias=np.zeros(16)), "missing array"),
        (dict(W=np.zeros((16, 8)), visible_bias=np.zeros(15), hidden_bias=np.zeros(8)), "visible_bias"),
    ],
)
def test_bad_model_file_is_a_clear_error(tmp_path, capsys, payload, message):
    bad = tmp_path / "bad.npz"
    np.savez(bad, **payload)
    out = tmp_path / "res.json"
    rc = main(["estimate", str(bad), "--estimator", "ais", "--steps", "5", "--json", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and str(bad) in err
    assert not out.exists()  # nothing half-written


def test_data_shape_mismatch(model_and_data, tmp_path, capsys):
    _, model, _ = model_and_data
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.zeros((4, 10), dtype=np.uint8))
    rc = main(["estimate", str(model), "--estimator", "ais", "--data", str(wrong), "--steps", "5"])
    assert rc == 2 and "16" in capsys.readouterr().err


def test_console_script_entry_point(model_and_data):
    _, model, _ = model_and_data
    proc = subprocess.run(
        [sys.executable, "-m", "logzbench.cli", "estimate", str(model), "--estimator", "exact"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["estimator"] == "exact"


def test_train_with_a_learner_monitors_the_valid_split(tmp_path, capsys):
    rbm = random_rbm(10, 4, seed=5, scale=0.8)
    rows = model_samples(rbm, 150, seed=2).numpy().astype(np.uint8)
    data = tmp_path / "data.npz"
    np.savez(data, train=rows[:100], valid=rows[100:130], test=rows[130:], meta=json.dumps({"dataset": "toy"}))
    out, hist = tmp_path / "avil.npz", tmp_path / "avil.csv"
    rc = main(
        [
            "train",
            "--data",
            str(data),
            "--out",
            str(out),
            "--learner",
            "avil",
            "--n-hidden",
            "4",
            "--set",
            "aux_size=3",
            "--set",
            "iterations=10",
            "--set",
            "K1=2",
            "--set",
            "batch_size=50",
            "--set",
            "log_every=5",
            "--history",
            str(hist),
            "--threads",
            "1",
        ]
    )
    assert rc == 0 and out.is_file()
    printed = json.loads(capsys.readouterr().out)
    assert printed["final"]["iteration"] == 10
    header = hist.read_text().splitlines()[0].split(",")
    assert "valid_exact_log_likelihood" in header and "log_z_bound" in header
    # the validation rows, not the test rows, are monitored
    model = load_model(out)
    valid = torch.as_tensor(rows[100:130], dtype=torch.float64)
    last = hist.read_text().splitlines()[-1].split(",")
    recorded = float(last[header.index("valid_exact_log_likelihood")])
    assert recorded == pytest.approx(float(model.exact_log_f(valid).mean()) - model.exact_log_z(), abs=1e-6)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--learner", "vcd", "--n-hidden", "4"], "learner vcd trains dbm models, not a rbm"),
        (["--learner", "nvil", "--family", "dbm", "--hidden-sizes", "4,3"], "learner nvil trains rbm, grbm models"),
    ],
)
def test_train_learner_refused_before_reading_data(tmp_path, capsys, args, message):
    out = tmp_path / "m.npz"
    rc = main(["train", "--data", str(tmp_path / "missing.npz"), "--out", str(out), *args])
    assert rc == 2 and not out.exists()
    assert message in capsys.readouterr().err
