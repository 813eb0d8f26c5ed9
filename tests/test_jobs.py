"""logzbench.pipeline.jobs: one workflow estimate job from its settings (the workflow's rule estimate,
without Snakemake)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import model_samples, random_rbm

from logzbench.api import estimate
from logzbench.models import save_model
from logzbench.pipeline.jobs import estimate_options, run_estimate

BASE = {
    "model": "tiny",
    "dataset": "tiny-data",
    "device": "cpu",
    "n_visible": 12,
    "family": "rbm",
    "hidden_sizes": [8],
    "n_hidden": 8,
}


def test_options_are_the_registry_options_in_the_settings():
    ais = {
        **BASE,
        "estimator": "ais-x",
        "method": "ais",
        "K": 10,
        "init": "base-rate",
        "seed": 3,
        "schedule": "linear",
        "chains": 20,
        "n_examples": None,
    }
    assert estimate_options(ais) == {
        "K": 10,
        "schedule": "linear",
        "chains": 20,
        "init": "base-rate",
        "seed": 3,
        "device": "cpu",
        "progress": False,
    }
    raise_ = {**ais, "method": "raise", "n_examples": 5}
    assert estimate_options(raise_)["n_examples"] == 5
    exact = {**BASE, "estimator": "exact", "method": "exact", "K": None, "init": None, "seed": None}
    assert estimate_options(exact, progress=True) == {"seed": 0, "device": "cpu", "progress": True}
    ds = {
        **BASE,
        "estimator": "ds",
        "method": "ds",
        "K": None,
        "init": "uniform",
        "seed": 1,
        "chains": 50,
        "burn_in": 5,
        "n_examples": None,
    }
    assert estimate_options(ds) == {
        "chains": 50,
        "burn_in": 5,
        "init": "uniform",
        "seed": 1,
        "device": "cpu",
        "progress": False,
    }


@pytest.mark.parametrize(
    "method,extra,stem",
    [
        ("exact", {"K": None, "init": None, "seed": None}, "exact"),
        (
            "ais",
            {"K": 10, "init": "base-rate", "seed": 0, "schedule": "linear", "chains": 20, "n_examples": None},
            "K10_base-rate_seed0",
        ),
        (
            "ds",
            {"K": None, "init": "uniform", "seed": 1, "chains": 50, "burn_in": 5, "n_examples": None},
            "uniform_seed1",
        ),
    ],
)
def test_run_estimate_writes_the_record_and_the_arrays(tmp_path, method, extra, stem):
    rbm = random_rbm(12, 8, seed=0, scale=0.5)
    save_model(rbm, tmp_path / "tiny.npz")
    rows = model_samples(rbm, 60, seed=1, sweeps=50).numpy().astype(np.uint8)
    np.savez(tmp_path / "tiny-data.npz", train=rows[:40], test=rows[40:])
    settings = {**BASE, "estimator": method, "method": method, **extra}
    record = run_estimate(
        settings,
        model=tmp_path / "tiny.npz",
        data=tmp_path / "tiny-data.npz",
        arrays=tmp_path / f"{stem}.npz",
        record_path=tmp_path / f"{stem}.json",
        tracking={"enabled": False},
        log=lambda msg: None,
    )
    on_disk = json.loads((tmp_path / f"{stem}.json").read_text())
    assert on_disk == json.loads(json.dumps(record))
    assert list(record)[: len(settings) + 1] == ["key", *settings]
    assert {k: record[k] for k in settings} == settings and "mlflow_run_id" not in record
    assert (
        record["key"]
        == {
            "exact": "estimate/tiny/exact/K-/-/seed-",
            "ais": "estimate/tiny/ais/K10/base-rate/seed0",
            "ds": "estimate/tiny/ds/K-/uniform/seed1",
        }[method]
    )
    assert record["arrays"] == str(tmp_path / f"{stem}.npz") and (tmp_path / f"{stem}.npz").is_file()
    # the same estimate as the API with the registry options
    direct = estimate(tmp_path / "tiny.npz", method, data=rows[40:], train_data=rows[:40], **estimate_options(settings))
    assert record["result"]["log_z"] == pytest.approx(direct.log_z, abs=0, rel=0)
    assert record["result"]["mean_log_likelihood"] == pytest.approx(direct.mean_log_likelihood, abs=0, rel=0)


def test_sweep_writes_each_setting_and_keeps_one_mlflow_run_per_setting(tmp_path):
    """run_estimate_sweep: one file pair per setting, each the same estimate as run_estimate on its own,
    each its own MLflow run; running the sweep again replaces the runs (one live run per key)."""
    from logzbench.pipeline.jobs import run_estimate_sweep
    from logzbench.tracking import find_runs

    rbm = random_rbm(12, 8, seed=0, scale=0.5)
    save_model(rbm, tmp_path / "tiny.npz")
    rows = model_samples(rbm, 60, seed=1, sweeps=50).numpy().astype(np.uint8)
    np.savez(tmp_path / "tiny-data.npz", train=rows[:40], test=rows[40:])
    settings = [
        {
            **BASE,
            "estimator": "ais",
            "method": "ais",
            "K": K,
            "init": init,
            "seed": seed,
            "schedule": "linear",
            "chains": 20,
            "n_examples": None,
        }
        for K in (5, 10)
        for init in ("uniform", "base-rate")
        for seed in (0, 1)
    ]
    uri = "sqlite:///" + str(tmp_path / "mlflow.db")
    tracking = {"enabled": True, "uri": uri, "experiment": "sweep-test"}
    out = tmp_path / "ais"
    records = run_estimate_sweep(
        settings,
        model=tmp_path / "tiny.npz",
        data=tmp_path / "tiny-data.npz",
        out_dir=out,
        tracking=tracking,
        log=lambda msg: None,
    )
    stems = sorted(p.stem for p in out.glob("*.json"))
    assert stems == sorted(f"K{s['K']}_{s['init']}_seed{s['seed']}" for s in settings)
    assert sorted(p.stem for p in out.glob("*.npz")) == stems
    alone = run_estimate(
        settings[3],
        model=tmp_path / "tiny.npz",
        data=tmp_path / "tiny-data.npz",
        arrays=tmp_path / "alone.npz",
        record_path=tmp_path / "alone.json",
        tracking={"enabled": False},
        log=lambda msg: None,
    )
    assert records[3]["result"]["log_z"] == alone["result"]["log_z"]
    runs = find_runs(uri=uri, experiment_name="sweep-test", kind="estimate")
    assert sorted(r.data.tags["logzbench.key"] for r in runs) == sorted(r["key"] for r in records)
    assert {r.info.run_id for r in runs} == {r["mlflow_run_id"] for r in records}
    again = run_estimate_sweep(
        settings,
        model=tmp_path / "tiny.npz",
        data=tmp_path / "tiny-data.npz",
        out_dir=out,
        tracking=tracking,
        log=lambda msg: None,
    )
    runs = find_runs(uri=uri, experiment_name="sweep-test", kind="estimate")
    assert len(runs) == len(settings)
    assert {r.info.run_id for r in runs} == {r["mlflow_run_id"] for r in again}
    assert not {r["mlflow_run_id"] for r in again} & {r["mlflow_run_id"] for r in records}


def test_a_refused_setting_is_recorded_and_flagged_and_the_sweep_goes_on(tmp_path):
    """Annealed discriminance sampling refuses K = 1 on a strongly coupled RBM (the samples of p and p_0
    do not overlap: log Z is not identified) but not K = 50.  The sweep still writes every setting: the
    refused ones carry the reason and no estimate, the others are the estimates run_estimate gives alone;
    each setting is its own MLflow run, the refused ones tagged with the reason; the report builds, flags
    the refused rows with the reason and their seeds, and leaves the others' values as they are."""
    from logzbench import report
    from logzbench.pipeline.jobs import run_estimate_sweep
    from logzbench.tracking import find_runs

    rbm = random_rbm(12, 8, seed=0, scale=5.0)
    save_model(rbm, tmp_path / "tiny.npz")
    rows = model_samples(rbm, 60, seed=1, sweeps=50).numpy().astype(np.uint8)
    np.savez(tmp_path / "tiny-data.npz", train=rows[:40], test=rows[40:])
    settings = [
        {**BASE, "estimator": "ads", "method": "ads", "K": K, "init": "uniform", "seed": seed, "chains": 20}
        for K in (1, 50)
        for seed in (0, 1)
    ]
    uri = "sqlite:///" + str(tmp_path / "mlflow.db")
    tracking = {"enabled": True, "uri": uri, "experiment": "refused"}
    lines = []
    records = run_estimate_sweep(
        settings,
        model=tmp_path / "tiny.npz",
        data=tmp_path / "tiny-data.npz",
        out_dir=tmp_path / "ads",
        tracking=tracking,
        log=lines.append,
    )
    assert len(records) == 4 and len(list((tmp_path / "ads").glob("*.json"))) == 4
    refused = [r for r in records if r["K"] == 1]
    for r in refused:
        # one line, without the "; " that joins a row's flag reasons (the estimator's message has one)
        assert "do not overlap" in r["refused"] and "\n" not in r["refused"] and "; " not in r["refused"]
        assert "(gamma = " in r["refused"] and "), log Z is not identified" in r["refused"]
        assert r["result"]["log_z"] is None and r["result"]["mean_log_likelihood"] is None
        on_disk = json.loads((tmp_path / "ads" / f"K1_uniform_seed{r['seed']}.json").read_text())
        assert on_disk["refused"] == r["refused"]
    assert sum(line.startswith("refused: discriminance sampling") for line in lines) == 2
    for r in records[2:]:
        assert "refused" not in r and math.isfinite(r["result"]["log_z"])
        alone = estimate(tmp_path / "tiny.npz", "ads", **estimate_options(r))
        assert r["result"]["log_z"] == alone.log_z
    runs = {r.data.tags["logzbench.key"]: r for r in find_runs(uri=uri, experiment_name="refused", kind="estimate")}
    assert len(runs) == 4
    for r in records:
        flag = runs[r["key"]].data.tags.get("logzbench.flag") or ""
        assert flag.startswith("refused: discriminance sampling") == (r["K"] == 1)

    paths = report.build_report(tmp_path / "ads", tmp_path / "report")
    summary = pd.read_csv(paths["summary"])
    k1, k50 = summary[summary["K"] == 1].iloc[0], summary[summary["K"] == 50].iloc[0]
    assert k1["flags"].startswith("refused (seed 0,1): discriminance sampling: the samples of p and p_0 do not")
    assert math.isnan(k1["log_z"]) and k1["n_seeds"] == 2
    assert "refused" not in str(k50["flags"])
    # (summary.csv rounds to 2 decimals)
    assert k50["log_z"] == pytest.approx(np.mean([r["result"]["log_z"] for r in records[2:]]), abs=0.006)
    flag_rows = pd.read_csv(paths["flags"])
    assert len(flag_rows) == 1 and flag_rows["flag"].iloc[0] == k1["flags"]  # one reason, not split at its "; "
    per_run = pd.read_csv(paths["per_run"], keep_default_na=False)
    assert sorted(per_run["refused"] != "") == [False, False, True, True]


def test_test_subset_restricts_the_rows_of_each_setting(tmp_path):
    """An estimator entry's test_subset: each setting evaluates per_class test rows of each label
    (logzbench.data.class_subset of test_labels), chosen per setting within one sweep; RAISE's n_examples
    then subsamples those rows; a dataset without labels is refused, naming the file."""
    from logzbench.data import class_subset
    from logzbench.errors import DatasetError
    from logzbench.pipeline.jobs import run_estimate_sweep

    rbm = random_rbm(12, 8, seed=0, scale=0.5)
    save_model(rbm, tmp_path / "tiny.npz")
    rows = model_samples(rbm, 70, seed=1, sweeps=50).numpy().astype(np.uint8)
    labels = np.random.default_rng(5).permutation(np.repeat([0, 1, 2], 10))
    data = tmp_path / "tiny-data.npz"
    np.savez(data, train=rows[:40], test=rows[40:], test_labels=labels)
    test = torch.as_tensor(rows[40:], dtype=torch.float64)
    log_f, log_z = rbm.exact_log_f(test).numpy(), rbm.exact_log_z()

    def run(settings, out, tracking=None):
        return run_estimate_sweep(
            settings,
            model=tmp_path / "tiny.npz",
            data=data,
            out_dir=tmp_path / out,
            tracking=tracking or {"enabled": False},
            log=lambda msg: None,
        )

    sub = {"per_class": 4, "seed": 0}
    exact = {
        **BASE,
        "estimator": "exact-subset",
        "method": "exact",
        "K": None,
        "init": None,
        "seed": None,
        "test_subset": sub,
    }
    [rec] = run([exact], "exact")
    idx = class_subset(labels, 4, 0)
    assert len(idx) == 12 and rec["test_subset"] == sub and rec["result"]["n_examples"] == 12
    assert rec["result"]["mean_log_likelihood"] == pytest.approx(log_f[idx].mean() - log_z, abs=1e-9)
    # AIS: per-example log-likelihood = exact log f(v) - log Z-hat, on the rows of each setting's own subset
    ais = {**BASE, "estimator": "ais", "method": "ais", "K": 5, "schedule": "linear", "chains": 10, "n_examples": None}
    settings = [
        {**ais, "init": "uniform", "seed": 0},
        {**ais, "init": "uniform", "seed": 1, "test_subset": sub},
        {**ais, "init": "base-rate", "seed": 0, "test_subset": {"per_class": 2, "seed": 7}},
    ]
    uri = "sqlite:///" + str(tmp_path / "mlflow.db")
    records = run(settings, "ais", {"enabled": True, "uri": uri, "experiment": "subset-test"})
    for s, r, want in zip(settings, records, (np.arange(30), idx, class_subset(labels, 2, 7))):
        with np.load(r["arrays"]) as z:
            per_ex = z["per_example_log_likelihood"]
        assert r["result"]["n_examples"] == len(want) and ("test_subset" in r) == ("test_subset" in s)
        assert per_ex + r["result"]["log_z"] == pytest.approx(log_f[want], abs=1e-9)
    from logzbench.tracking import find_runs

    tags = {
        r.data.tags["logzbench.key"]: r.data.tags.get("logzbench.test_subset")
        for r in find_runs(uri=uri, experiment_name="subset-test", kind="estimate")
    }
    assert tags == {
        r["key"]: None if "test_subset" not in s else json.dumps(s["test_subset"], sort_keys=True)
        for s, r in zip(settings, records)
    }
    # RAISE: n_examples of the subset's rows, as of the full test set (at least as many: all of them)
    raise_ = {**ais, "method": "raise", "estimator": "raise", "init": "uniform", "test_subset": sub}
    all_rows, five = run([{**raise_, "seed": 0, "n_examples": 100}, {**raise_, "seed": 1, "n_examples": 5}], "raise")
    assert all_rows["result"]["n_examples"] == 12 and all_rows["result"]["settings"]["n_test"] == 12
    assert five["result"]["n_examples"] == 5 and five["result"]["settings"]["n_test"] == 12
    np.savez(tmp_path / "unlabelled.npz", train=rows[:40], test=rows[40:])
    with pytest.raises(DatasetError, match=r"unlabelled\.npz has no test_labels: test_subset"):
        run_estimate(
            exact,
            model=tmp_path / "tiny.npz",
            data=tmp_path / "unlabelled.npz",
            arrays=tmp_path / "u.npz",
            record_path=tmp_path / "u.json",
            log=lambda msg: None,
        )
    with pytest.raises(DatasetError, match="class 0 has 10 test rows, fewer than test_subset per_class = 11"):
        run([{**exact, "test_subset": {"per_class": 11, "seed": 0}}], "exact-11")


def test_sweep_refuses_settings_that_share_a_file(tmp_path):
    from logzbench.pipeline.jobs import run_estimate_sweep

    s = {**BASE, "estimator": "ais", "method": "ais", "K": 5, "init": "uniform", "seed": 0, "chains": 5}
    with pytest.raises(ValueError, match="different file stems"):
        run_estimate_sweep([s, dict(s)], model=tmp_path / "m.npz", data=tmp_path / "d.npz", out_dir=tmp_path / "o")
    with pytest.raises(ValueError, match="at least one setting"):
        run_estimate_sweep([], model=tmp_path / "m.npz", data=tmp_path / "d.npz", out_dir=tmp_path / "o")


def test_learner_train_job_then_estimate_then_report(tmp_path):
    """The workflow's path for a black-box learner, without Snakemake: train_job (AVIL with AIS during
    training and the best validation model kept) writes the model, its history, samples and summary;
    an AIS estimate of the saved model; the report's learner tables and figures from both."""
    from logzbench.models import load_model
    from logzbench.pipeline.jobs import train_job
    from logzbench.report import build_report

    rbm = random_rbm(12, 3, seed=2, scale=1.0)
    rows = model_samples(rbm, 160, seed=3, sweeps=50).numpy().astype(np.uint8)
    meta = json.dumps({"dataset": "tiny-uci", "image_shape": [3, 4]})
    np.savez(tmp_path / "tiny-data.npz", train=rows[:100], valid=rows[100:130], test=rows[130:], meta=meta)
    models = tmp_path / "models"
    models.mkdir()
    hp = {
        "learner": "avil",
        "n_hidden": 3,
        "aux_size": 3,
        "z": "discrete",
        "iterations": 40,
        "K1": 3,
        "batch_size": 50,
        "lr": 0.02,
        "log_every": 10,
        "ais_every": 20,
        "ais_K": 100,
        "ais_chains": 50,
        "select": "best-valid",
        "seed": 0,
        "figure_samples": 8,
        "figure_sweeps": 20,
    }
    record = train_job(
        "tiny",
        hyperparams=hp,
        dataset="tiny-data",
        data=tmp_path / "tiny-data.npz",
        out_model=models / "tiny.npz",
        out_summary=models / "tiny.json",
        out_history=models / "tiny.history.csv",
        out_plot=models / "tiny.history.png",
        tracking={"enabled": False},
    )
    history = pd.read_csv(models / "tiny.history.csv")
    assert list(history["iteration"]) == [0, 10, 20, 30, 40]
    best = history.loc[history["valid_exact_log_likelihood"].idxmax()]
    assert record["final"]["selected_iteration"] == best["iteration"]
    model = load_model(models / "tiny.npz")
    valid = torch.as_tensor(rows[100:130], dtype=torch.float64)
    assert float(model.exact_log_f(valid).mean()) - model.exact_log_z() == pytest.approx(
        best["valid_exact_log_likelihood"], abs=1e-6
    )
    with np.load(models / "tiny.samples.npz") as z:
        assert z["model_mean_v"].shape == z["decoder_mean_v"].shape == (8, 12)
    assert history["ais_log_z"].notna().sum() == 3  # iterations 0, 20 and 40

    settings = {
        **BASE,
        "model": "tiny",
        "n_hidden": 3,
        "hidden_sizes": [3],
        "estimator": "ais",
        "method": "ais",
        "K": 100,
        "init": "base-rate",
        "seed": 0,
        "schedule": "linear",
        "chains": 50,
        "n_examples": None,
    }
    est_record = run_estimate(
        settings,
        model=models / "tiny.npz",
        data=tmp_path / "tiny-data.npz",
        arrays=tmp_path / "ais.npz",
        record_path=tmp_path / "ais.json",
        tracking={"enabled": False},
        log=lambda msg: None,
    )
    out = tmp_path / "report"
    paths = build_report([est_record], out, model_records=[models / "tiny.json"], data_dir=tmp_path)
    table = pd.read_csv(out / "table_learners.csv")
    row = table.iloc[0]
    assert (row["model"], row["source"], row["learner"], row["selected_iteration"]) == (
        "tiny",
        "tiny-uci",
        "avil",
        best["iteration"],
    )
    assert row["ais"] == pytest.approx(est_record["result"]["mean_log_likelihood"])
    assert row["within_uncertainty"] == "no paper value"  # not a dataset of the paper
    assert (row["bound"], row["reference"], row["bound_rows"]) == ("lower", "exact", 5)
    assert (out / "table_learners_paper.csv").is_file()
    assert {"tiny_bounds", "tiny_samples"} <= set(paths["learner_plots"])
