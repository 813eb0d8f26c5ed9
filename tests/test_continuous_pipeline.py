"""Continuous models end to end without Snakemake: van Hateren patches -> training -> model file ->
``logzbench estimate`` (closed forms, HAIS, baselines), and the refusals."""

import json

import numpy as np
import pytest
import torch

from logzbench import api, cli
from logzbench.data.vanhateren import load_patches
from logzbench.errors import ModelFileError
from logzbench.models import load_model, save_model
from logzbench.training import train_model


@pytest.fixture(scope="module")
def patches(tmp_path_factory, shared_mirror):
    out = tmp_path_factory.mktemp("vh") / "vh.npz"
    assert (
        cli.main(
            [
                "prepare",
                "vanhateren",
                "--out",
                str(out),
                "--mirror",
                str(shared_mirror),
                "--n-images",
                "5",
                "--n-test-images",
                "1",
                "--n-train",
                "1500",
                "--n-test",
                "40",
                "--n-components",
                "4",
            ]
        )
        == 0
    )
    return out


@pytest.fixture(scope="module")
def shared_mirror():
    from conftest import SHARED_DATA

    if not (SHARED_DATA / "vanhateren").is_dir():
        pytest.skip("no van Hateren mirror")
    return SHARED_DATA


@pytest.mark.parametrize(
    "family,size,n_iter",
    [
        ("poe-laplace", 4, 20),
        ("poe-student-t", 4, 20),
        ("mcrbm", 6, 10),
        ("linear-gaussian", 3, 3),
        ("linear-laplace", 3, 2),
        ("bilinear", 4, 2),
    ],
)
def test_train_save_load_estimate(patches, tmp_path, family, size, n_iter):
    X, Xt = load_patches(patches, "train"), load_patches(patches, "test")
    model, history = train_model(X, Xt, family=family, size=size, n_iter=n_iter, seed=0)
    assert model.family == family and model.size == size and history
    path = tmp_path / f"{family}.npz"
    save_model(model, path)
    loaded = load_model(path)
    assert type(loaded) is type(model) and loaded.family == family
    x = torch.as_tensor(Xt[:5])
    if model.kind == "analysis":
        assert torch.allclose(loaded.energy(x), model.energy(x))
    else:
        a = model.sample_prior(5, torch.Generator().manual_seed(0))
        assert torch.allclose(loaded.likelihood_energy(x, a), model.likelihood_energy(x, a))
    res = api.estimate(loaded, "hais", data=Xt[:10], steps=50, chains=8, seed=1, step_size=0.05, n_bootstrap=0)
    assert np.isfinite(res.mean_log_likelihood) and res.settings["kernel"] == "hais"


def test_cli_closed_form_and_hais_agree(patches, tmp_path, capsys):
    """A complete Laplace PoE: the closed form and HAIS (from the command line) agree within HAIS's error."""
    X = load_patches(patches, "train")
    model, _ = train_model(X, None, family="poe-laplace", size=4, n_iter=30, seed=0)
    path = tmp_path / "poe.npz"
    save_model(model, path)
    out = {}
    for est in ("exact", "hais", "ais-hmc", "ais-mh"):
        assert (
            cli.main(
                [
                    "estimate",
                    str(path),
                    "--estimator",
                    est,
                    "--data",
                    str(patches),
                    "--steps",
                    "500",
                    "--chains",
                    "200",
                    "--seed",
                    "0",
                ]
            )
            == 0
        )
        out[est] = json.loads(capsys.readouterr().out)
    exact = out["exact"]["mean_log_likelihood"]
    for est in ("hais", "ais-hmc", "ais-mh"):
        r = out[est]
        assert abs(r["mean_log_likelihood"] - exact) < 4 * r["mean_log_likelihood_stderr"] + 0.01, (est, r, exact)
        assert r["settings"]["kernel"] == {"hais": "hais", "ais-hmc": "hmc", "ais-mh": "mh"}[est]
    assert out["exact"]["extra"]["per_example_ll_sd"] > 0


def test_refusals(patches, tmp_path, capsys):
    X = load_patches(patches, "train")
    model, _ = train_model(X, None, family="mcrbm", size=4, n_iter=2, seed=0)
    with pytest.raises(ValueError, match="no closed-form log Z"):
        api.estimate(model, "exact")
    with pytest.raises(ValueError, match="not available for a continuous"):
        api.estimate(model, "ais", steps=10)
    bad = np.array(load_patches(patches, "test"))
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        api.estimate(model, "hais", data=bad, steps=10, chains=2)
    with pytest.raises(ValueError, match="expected rows of 4"):
        api.estimate(model, "hais", data=np.zeros((3, 5)), steps=10, chains=2)
    # NaN parameters in a model file: refused, naming the file and the array
    arrays = {k: np.array(v) for k, v in model.to_arrays().items()}
    arrays["W"] = arrays["W"].copy()
    arrays["W"][0, 0] = np.nan
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ModelFileError, match="bad.npz.*'W'.*NaN"):
        load_model(tmp_path / "bad.npz")
    assert cli.main(["estimate", str(tmp_path / "bad.npz"), "--estimator", "hais"]) == 2
    assert "NaN" in capsys.readouterr().err
    # HAIS on a binary model
    from conftest import random_rbm

    with pytest.raises(ValueError, match="continuous models"):
        api.estimate(random_rbm(6, 4, seed=0), "hais", steps=10)
    with pytest.raises(ValueError, match="at least as many experts"):
        train_model(X, None, family="poe-laplace", size=2, n_iter=2)


def test_cli_trains_a_continuous_family(patches, tmp_path, capsys):
    """``logzbench train --family`` takes every registry family: a linear-Gaussian model trained from
    the command line on prepared patches is the same model as train_model's, and its closed form is
    evaluated by ``logzbench estimate``; without its size it is refused before any work."""
    out = tmp_path / "lg.npz"
    assert (
        cli.main(
            [
                "train",
                "--data",
                str(patches),
                "--out",
                str(out),
                "--family",
                "linear-gaussian",
                "--set",
                "size=3",
                "--set",
                "n_iter=2",
                "--seed",
                "0",
            ]
        )
        == 0
    )
    capsys.readouterr()
    ref, _ = train_model(
        load_patches(patches, "train"),
        load_patches(patches, "test"),
        family="linear-gaussian",
        size=3,
        n_iter=2,
        seed=0,
    )
    cli_model, ref_model = load_model(out).to_arrays(), ref.to_arrays()
    for k in ref_model:
        np.testing.assert_array_equal(np.asarray(cli_model[k]), np.asarray(ref_model[k]))
    assert cli.main(["estimate", str(out), "--estimator", "exact", "--data", str(patches)]) == 0
    res = json.loads(capsys.readouterr().out)
    expected = api.estimate(ref, "exact", data=load_patches(patches, "test")).mean_log_likelihood
    assert res["mean_log_likelihood"] == pytest.approx(expected, rel=1e-12)
    assert (
        cli.main(["train", "--data", str(patches), "--out", str(tmp_path / "no.npz"), "--family", "poe-laplace"]) == 2
    )
    assert "needs --set size=N" in capsys.readouterr().err and not (tmp_path / "no.npz").exists()
