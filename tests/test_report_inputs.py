"""Report inputs and other misleading or silent cases (issue 22, items 8 and 9): one line on stderr naming
the problem, exit status 2, no traceback, and no file written or changed -- or the documented behaviour.

Each refused case is one row of :data:`CASES`: ``(id, setup, argv, words)``, in the style of
tests/test_cli_errors.py.  The fixture ``workdir`` makes the tiny inputs in a temporary working directory
(``model.npz`` and ``other/model.npz``: two different 6x3 RBMs of one file name; ``m2.npz``: a third;
``grbm.npz``: a 6x3 Gaussian-Bernoulli RBM; ``data.npz``: a prepared binary dataset ``tiny``); ``setup(tmp,
env)`` makes what else the case needs (estimate records, through the command line itself where it can);
``words`` must all appear in the error line.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import assert_refused

from logzbench import report
from logzbench.cli import main
from logzbench.errors import ConfigError, TrackingError
from logzbench.models import BinaryRBM, save_model
from logzbench.models.grbm import GaussianBernoulliRBM

EXACT = ["--estimator", "exact"]


def _run(*argv):
    assert main(list(argv)) == 0


def _cli_records(t, e):
    """``res/``: the exact estimate of ``model.npz`` (a ``logzbench estimate --json`` record)."""
    _run("estimate", "model.npz", *EXACT, "--json", "res/exact.json")


def _two_models_one_name(t, e):
    """Records of two different models whose files are both called ``model.npz``."""
    _run("estimate", "model.npz", *EXACT, "--json", "res/a/exact.json")
    _run("estimate", "other/model.npz", *EXACT, "--json", "res/b/exact.json")


def _edit_log_z(path, delta=0.25):
    rec = json.loads(path.read_text())
    res = rec.get("result", rec)
    res["log_z"] += delta
    path.write_text(json.dumps(rec))


def _edited_cli_record(t, e):
    """An AIS record whose log Z was changed by hand; its log-weights beside it (``--log-weights``)."""
    _run(
        "estimate",
        "model.npz",
        "--estimator",
        "ais",
        "--steps",
        "5",
        "--chains",
        "30",
        "--json",
        "res/ais.json",
        "--log-weights",
        "res/ais.npz",
    )
    _edit_log_z(t / "res" / "ais.json")


def _workflow_record(t, estimator, log_z_shift=0.0, sign=1):
    """A workflow record ``res/m/<estimator>/uniform_seed0.json`` and its ``.npz``, log Z shifted by ``log_z_shift``."""
    lw = np.random.default_rng(0).normal(3.0, 1.0, 40)
    log_z = sign * (float(np.log(np.mean(np.exp(lw))))) + log_z_shift
    d = t / "res" / "m" / estimator
    d.mkdir(parents=True)
    np.savez(d / "uniform_seed0.npz", log_weights=lw)
    rec = {
        "key": f"estimate/m/{estimator}/K-/uniform/seed0",
        "model": "m",
        "estimator": estimator,
        "method": estimator,
        "init": "uniform",
        "seed": 0,
        "chains": 40,
        "result": {"estimator": estimator, "log_z": log_z, "log_z_stderr": 0.1, "n_chains": 40, "settings": {}},
    }
    (d / "uniform_seed0.json").write_text(json.dumps(rec))


def _non_utf8_name(t, e):
    _cli_records(t, e)
    (t / "res" / os.fsdecode(b"\xff.json")).write_bytes((t / "res" / "exact.json").read_bytes())


def _sweep_with_a_setting_deleted(t, e):
    """``res/m/ais``: a finished workflow sweep of two seeds (its records list both settings, ``sweep_stems``)
    whose second record was deleted afterwards."""
    from logzbench.pipeline.jobs import run_estimate_sweep

    base = {k: v for k, v in _raise_settings(None).items() if k != "n_examples"}
    settings = [{**base, "estimator": "ais", "method": "ais", "K": 2, "chains": 5, "seed": s} for s in (0, 1)]
    run_estimate_sweep(
        settings, model=t / "model.npz", data=t / "data.npz", out_dir=t / "res" / "m" / "ais", log=lambda m: None
    )
    (t / "res" / "m" / "ais" / "K2_uniform_seed1.json").unlink()


PREPARE = ["prepare", "--out", "d.npz"]

CASES = [
    # --- item 8: the model's identity, the records' consistency, --paper rows
    (
        "two-models-one-name",
        _two_models_one_name,
        ["report", "res", "--out", "rep"],
        ["two different models", "'model'", "res/a/exact.json", "res/b/exact.json", "other/model.npz"],
    ),
    (
        "edited-cli-record",
        _edited_cli_record,
        ["report", "res", "--out", "rep"],
        ["res/ais.json", "log_z", "disagrees", "res/ais.npz", "logmeanexp"],
    ),
    (
        "edited-workflow-record",
        lambda t, e: _workflow_record(t, "ais", 0.5),
        ["report", "res", "--out", "rep"],
        ["uniform_seed0.json", "disagrees", "uniform_seed0.npz"],
    ),
    (
        "edited-ris-sign",
        lambda t, e: _workflow_record(t, "ris", sign=1),
        ["report", "res", "--out", "rep"],
        ["ris/uniform_seed0.json", "disagrees", "-logmeanexp"],
    ),
    (
        "paper-repeated",
        _cli_records,
        [
            "report",
            "res",
            "--out",
            "rep",
            "--paper",
            "model=burda_raise:mnistCD1-20",
            "--paper",
            "model=burda_raise:mnistPCD-20",
        ],
        ["--paper", "mnistPCD-20", "already stands for", "'mnistCD1-20'"],
    ),
    (
        "paper-unknown-model",
        _cli_records,
        ["report", "res", "--out", "rep", "--paper", "nosuch=burda_raise:mnistCD1-20"],
        ["--paper nosuch=burda_raise:mnistCD1-20", "no estimate of model 'nosuch'", "their models: model"],
    ),
    # a row of test log-likelihoods (and their gaps) for a model with only a log Z
    (
        "paper-wrong-kind",
        _cli_records,
        ["report", "res", "--out", "rep", "--paper", "model=burda_raise:mnistCD1-20"],
        [
            "--paper model=burda_raise:mnistCD1-20",
            "no estimate of what the row publishes",
            "mean_test_ll (exact)",
            "gap_ais_minus_raise",
            "its estimates: exact (log Z)",
        ],
    ),
    # --- item 9: misleading or silent
    ("report-non-utf8-path", _non_utf8_name, ["report", "res", "--out", "rep"], ["not valid UTF-8", "\\xff.json"]),
    (
        "grbm-estimate-binary-data",
        lambda t, e: None,
        ["estimate", "grbm.npz", *EXACT, "--data", "data.npz"],
        ["data.npz", "binary 0/1 rows", "'tiny'", "a grbm model needs real-valued rows", "vanhateren"],
    ),
    (
        "grbm-train-binary-data",
        lambda t, e: None,
        ["train", "--family", "grbm", "--data", "data.npz", "--out", "g.npz", "--n-hidden", "3"],
        ["data.npz", "binary 0/1 rows", "'tiny'", "a grbm model needs real-valued rows"],
    ),
    (
        "prepare-uci-binarize",
        lambda t, e: None,
        [*PREPARE[:1], "adult", *PREPARE[1:], "--binarize", "threshold"],
        ["--binarize does not apply to adult", "UCI"],
    ),
    (
        "prepare-uci-threshold",
        lambda t, e: None,
        [*PREPARE[:1], "adult", *PREPARE[1:], "--threshold", "0.3"],
        ["--threshold does not apply to adult"],
    ),
    (
        "prepare-uci-seed",
        lambda t, e: None,
        [*PREPARE[:1], "mushrooms", *PREPARE[1:], "--seed", "3"],
        ["--seed does not apply to mushrooms"],
    ),
    (
        "prepare-uci-n-components",
        lambda t, e: None,
        [*PREPARE[:1], "dna", *PREPARE[1:], "--n-components", "5"],
        ["--n-components does not apply to dna", "vanhateren"],
    ),
    (
        "prepare-frey-seed",
        lambda t, e: None,
        [*PREPARE[:1], "frey", *PREPARE[1:], "--seed", "1"],
        ["--seed does not apply to frey", "Frey faces"],
    ),
    (
        "prepare-frey-binarize",
        lambda t, e: None,
        [*PREPARE[:1], "frey", *PREPARE[1:], "--binarize", "stochastic"],
        ["--binarize does not apply to frey"],
    ),
    (
        "prepare-frey-n-components",
        lambda t, e: None,
        [*PREPARE[:1], "frey", *PREPARE[1:], "--n-components", "10"],
        ["--n-components does not apply to frey"],
    ),
    (
        "prepare-frey-n-valid",
        lambda t, e: None,
        [*PREPARE[:1], "frey", *PREPARE[1:], "--n-valid", "10"],
        ["--n-valid does not apply to frey"],
    ),
    (
        "prepare-digits-remove-dc",
        lambda t, e: None,
        [*PREPARE[:1], "digits", *PREPARE[1:], "--remove-dc"],
        ["--remove-dc does not apply to digits"],
    ),
    # --- issue 37, item 10: a deleted record of a finished workflow sweep, refused as the workflow refuses it
    (
        "report-sweep-record-deleted",
        _sweep_with_a_setting_deleted,
        ["report", "res", "--out", "rep"],
        ["res/m/ais/K2_uniform_seed1.json is missing", "a setting of the finished sweep", "snakemake --forcerun"],
    ),
]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working directory with the tiny inputs (see the module docstring)."""
    monkeypatch.chdir(tmp_path)
    save_model(BinaryRBM.random(6, 3, generator=torch.Generator().manual_seed(0)), tmp_path / "model.npz")
    (tmp_path / "other").mkdir()
    save_model(BinaryRBM.random(6, 3, generator=torch.Generator().manual_seed(1)), tmp_path / "other" / "model.npz")
    save_model(BinaryRBM.random(6, 3, generator=torch.Generator().manual_seed(2)), tmp_path / "m2.npz")
    save_model(GaussianBernoulliRBM.random(6, 3, generator=torch.Generator().manual_seed(0)), tmp_path / "grbm.npz")
    rows = np.random.default_rng(0).integers(0, 2, (8, 6)).astype(np.uint8)
    np.savez_compressed(
        tmp_path / "data.npz",
        train=rows,
        test=rows[:4],
        meta=np.asarray(json.dumps({"dataset": "tiny", "n_features": 6})),
    )
    return tmp_path


@pytest.mark.parametrize("setup, argv, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_nothing_written(workdir, monkeypatch, capsys, setup, argv, words):
    setup(workdir, monkeypatch)
    assert_refused(main, argv, words, workdir, capsys)


# --------------------------------------------------------------------------- the documented behaviour
def test_two_models_in_one_directory_are_two_models(workdir, capsys):
    """Records of two models in one directory are two models, each named after its model file (not one model
    named after the folder, with the two exact values averaged), and each record holds the model's hash."""
    _run("estimate", "model.npz", *EXACT, "--json", "res/est/exact-1.json")
    _run("estimate", "m2.npz", *EXACT, "--json", "res/est/exact-2.json")
    recs = [json.loads((workdir / "res" / "est" / f"exact-{i}.json").read_text()) for i in (1, 2)]
    assert [r["model"] for r in recs] == ["model.npz", "m2.npz"] and recs[0]["model_sha256"] != recs[1]["model_sha256"]
    _run("report", "res", "--out", "rep")
    summary = pd.read_csv(workdir / "rep" / "summary.csv")
    assert sorted(summary["model"]) == ["m2", "model"] and (summary["n_seeds"] == 1).all()
    by_model = summary.set_index("model")["exact_log_z"]
    assert by_model["model"] == pytest.approx(recs[0]["log_z"]) and by_model["m2"] == pytest.approx(recs[1]["log_z"])
    # the same model (the same content) under two paths is one model
    (workdir / "copy").mkdir()
    (workdir / "copy" / "model.npz").write_bytes((workdir / "model.npz").read_bytes())
    _run("estimate", "copy/model.npz", *EXACT, "--json", "res/copy/exact.json")
    _run("report", "res", "--out", "rep2")
    summary = pd.read_csv(workdir / "rep2" / "summary.csv")
    assert summary.set_index("model").loc["model", "n_seeds"] == 2


@pytest.mark.parametrize("estimator, extra", [("ais", ["--steps", "5"]), ("is", []), ("ris", ["--burn-in", "3"])])
def test_genuine_log_weights_pass_the_check(workdir, capsys, estimator, extra):
    """The records of the estimators whose log Z is defined by their log-weights pass the check (float
    tolerance), through the command line and the workflow's job alike."""
    from logzbench.pipeline.jobs import run_estimate

    _run(
        "estimate",
        "model.npz",
        "--estimator",
        estimator,
        "--chains",
        "30",
        *extra,
        "--json",
        f"res/{estimator}.json",
        "--log-weights",
        f"res/{estimator}.npz",
    )
    settings = {
        "model": "wf",
        "dataset": "tiny",
        "device": "cpu",
        "n_visible": 6,
        "family": "rbm",
        "hidden_sizes": [3],
        "n_hidden": 3,
        "estimator": estimator,
        "method": estimator,
        "init": "uniform",
        "seed": 0,
        "chains": 30,
        **({"K": 5, "schedule": "linear"} if estimator == "ais" else {"K": None}),
        **({"burn_in": 3} if estimator == "ris" else {}),
    }
    run_estimate(
        settings,
        model=workdir / "model.npz",
        data=workdir / "data.npz",
        arrays=workdir / "res/wf/x.npz",
        record_path=workdir / "res/wf/x.json",
        tracking={"enabled": False},
        log=lambda m: None,
    )
    capsys.readouterr()
    assert main(["report", "res", "--out", "rep"]) == 0, capsys.readouterr().err
    per_run = pd.read_csv(workdir / "rep" / "per_run.csv")
    assert len(per_run) == 2 and per_run["log_z"].notna().all()
    # and the check is what refuses an edited copy
    _edit_log_z(workdir / "res" / "wf" / "x.json", delta=1e-6)
    assert main(["report", "res", "--out", "rep3"]) == 2 and "disagrees" in capsys.readouterr().err


def test_report_api_refuses_a_bad_tracking_uri_before_writing(tmp_path):
    records = [
        json.loads(
            json.dumps(
                {
                    "model": "m",
                    "estimator": "exact",
                    "method": "exact",
                    "result": {"estimator": "exact", "log_z": 1.0, "settings": {}},
                }
            )
        )
    ]
    with pytest.raises(TrackingError, match=r"tracking URI 'not a uri' is not a tracking URI .*sqlite:///PATH.db"):
        report.build_report(records, tmp_path / "rep", tracking_uri="not a uri")
    assert not (tmp_path / "rep").exists()


@pytest.mark.parametrize(
    "uri, ok",
    [
        ("not a uri", False),
        ("mlruns", False),
        ("file:///tmp/mlruns", False),
        ("foo://host/x", False),
        ("http://", False),
        ("http://not a host", False),
        ("localhost:5000", False),
        ("x.db", True),
        ("sqlite:///x.db", True),
        ("http://127.0.0.1:5000", True),
        ("postgresql+psycopg2://u@h:5432/db", True),
        ("mysql://u@h/db", True),
    ],
)
def test_tracking_uri_forms(tmp_path, monkeypatch, uri, ok):
    from logzbench.tracking import resolve_tracking_uri

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    if ok:
        resolve_tracking_uri(uri, workdir=tmp_path, key="tracking.uri")
    else:
        with pytest.raises(TrackingError, match=f"^tracking.uri '{uri}' "):
            resolve_tracking_uri(uri, workdir=tmp_path, key="tracking.uri")


def test_tracking_uri_file_store_only_where_mlflow_allows_it(tmp_path, monkeypatch):
    from logzbench.tracking import resolve_tracking_uri

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "not a uri")
    with pytest.raises(TrackingError, match=r"^\$MLFLOW_TRACKING_URI 'not a uri' is not a tracking URI"):
        resolve_tracking_uri(None, workdir=tmp_path)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    assert resolve_tracking_uri("mlruns", workdir=tmp_path) == (tmp_path / "mlruns").resolve().as_uri()
    assert resolve_tracking_uri("file:///tmp/mlruns") == "file:///tmp/mlruns"


def test_config_tracking_uri_is_checked():
    from test_sweep import load_config

    from logzbench.pipeline.config import check_config

    config = load_config()
    config["tracking"] = {**config["tracking"], "uri": "not a uri"}
    with pytest.raises(ConfigError, match=r"^tracking.uri 'not a uri' is not a tracking URI logzbench can use"):
        check_config(config)
    config["tracking"]["enabled"] = False
    check_config(config)


def _raise_settings(n_examples):
    return {
        "model": "m",
        "dataset": "tiny",
        "device": "cpu",
        "n_visible": 6,
        "family": "rbm",
        "hidden_sizes": [3],
        "n_hidden": 3,
        "estimator": "raise",
        "method": "raise",
        "K": 3,
        "init": "uniform",
        "seed": 0,
        "schedule": "linear",
        "chains": 2,
        "n_examples": n_examples,
    }


def test_raise_records_the_examples_it_used(workdir):
    """RAISE with n_examples above the test rows (4 here) evaluates every row, and the record says so:
    n_examples is the number used (the MLflow param too), the configured value n_examples_requested."""
    from logzbench.pipeline.jobs import run_estimate
    from logzbench.tracking import estimate_params

    logs = []
    rec = run_estimate(
        _raise_settings(50),
        model=workdir / "model.npz",
        data=workdir / "data.npz",
        arrays=workdir / "r.npz",
        record_path=workdir / "r.json",
        tracking={"enabled": False},
        log=logs.append,
    )
    assert rec["n_examples"] == 4 and rec["n_examples_requested"] == 50 and rec["result"]["n_examples"] == 4
    assert json.loads((workdir / "r.json").read_text())["n_examples"] == 4
    assert estimate_params(rec)["n_examples"] == 4 and any("only 4 test rows" in m for m in logs)
    rec = run_estimate(
        _raise_settings(3),
        model=workdir / "model.npz",
        data=workdir / "data.npz",
        arrays=workdir / "r3.npz",
        record_path=workdir / "r3.json",
        tracking={"enabled": False},
        log=lambda m: None,
    )
    assert rec["n_examples"] == 3 and "n_examples_requested" not in rec and rec["result"]["n_examples"] == 3


def test_a_sweeps_records_list_its_settings(workdir):
    """Each record of a sweep lists the sweep's settings (sweep_stems): what tells a deleted setting of a
    finished sweep from a new one (logzbench.pipeline.outputs.damaged_outputs; tests/test_sweep.py)."""
    from logzbench.pipeline.jobs import run_estimate_sweep

    base = {k: v for k, v in _raise_settings(None).items() if k != "n_examples"}
    settings = [{**base, "estimator": "ais", "method": "ais", "K": k, "chains": 5} for k in (2, 3)]
    run_estimate_sweep(
        settings, model=workdir / "model.npz", data=workdir / "data.npz", out_dir=workdir / "ais", log=lambda m: None
    )
    for stem in ("K2_uniform_seed0", "K3_uniform_seed0"):
        assert json.loads((workdir / "ais" / f"{stem}.json").read_text())["sweep_stems"] == [
            "K2_uniform_seed0",
            "K3_uniform_seed0",
        ]
    assert math.isfinite(json.loads((workdir / "ais" / "K2_uniform_seed0.json").read_text())["result"]["log_z"])
