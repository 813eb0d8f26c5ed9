"""Bring your own model in the workflow: a model entry with ``source:`` (``FILE.py:NAME``, a TorchScript ``.pt``,
a Potts text file or an ``.npz``) instead of ``hyperparams`` is not trained, but swept by its estimators,
tracked in MLflow and reported like a trained model.

The config checks run on the config as the workflow builds it (:func:`logzbench.pipeline.config.check_config` on
the schema-validated config); two of them, and the dry and real runs, through Snakemake itself (helpers of
``tests/test_workflow.py``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

pytest.importorskip("snakemake", reason="snakemake is not installed; the workflow tests need it")
pytest.importorskip("mlflow", reason="mlflow is not installed; the workflow tests need it")

from test_workflow import estimate_dirs, job_counts, snakemake

from logzbench.errors import ConfigError
from logzbench.pipeline import sweep
from logzbench.pipeline.config import check_config

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"

USER_FILE = """
import torch
from logzbench.models.energy import EnergyModel

B = torch.linspace(-1.0, 1.0, 6, dtype=torch.float64)
J = 0.3 * torch.ones(6, 6, dtype=torch.float64).triu(1)


def log_f(x):
    x = x.double()
    return x @ B + ((x @ J) * x).sum(dim=1)


def make():
    return EnergyModel(log_f, 6, "binary")


def make_categorical():
    return EnergyModel(lambda x: -(x.double() - 1.0).abs().sum(dim=1), 5, ("categorical", 3))


def make_64():
    return EnergyModel(lambda x: 0.1 * x.double().sum(dim=1), 64, "binary")


def make_gauss():
    return EnergyModel(lambda x: -0.5 * (x.double() ** 2).sum(dim=1), 3, "continuous")
"""

#: a tiny config: three source models read from energy.py (a binary energy on 6 sites with training rows, a
#: categorical one on 5 sites of 3 states, exact and AIS on each; a standard Gaussian in 3 dimensions, HAIS),
#: their rows files
CONFIG = {
    "description": "bring your own model",
    "tracking": {"enabled": True, "experiment": "logzbench-byo"},
    "models": {
        "my-energy": {
            "source": "energy.py:make",
            "family": "energy-binary",
            "data": {"test": "rows.npy", "train": "train.npy"},
            "estimators": ["exact", "ais"],
        },
        "my-potts": {
            "source": "energy.py:make_categorical",
            "family": "energy-categorical",
            "data": {"test": "cat.npy"},
            "exact": True,
            "estimators": ["exact", "ais"],
        },
        "my-gauss": {
            "source": "energy.py:make_gauss",
            "family": "energy-continuous",
            "data": {"test": "real.npy"},
            "estimators": ["hais"],
        },
    },
    "evaluation": {"K": [10], "inits": ["uniform"], "seeds": [0]},
    "estimators": {"exact": {}, "ais": {"chains": 20}, "hais": {"chains": 10}},
}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working directory with energy.py, rows.npy (20 x 6), train.npy (40 x 6), cat.npy (20 x 5, states
    0..2) and config.yaml (:data:`CONFIG`); the test runs in it (relative paths are the jobs')."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "energy.py").write_text(USER_FILE)
    rng = np.random.default_rng(0)
    np.save(tmp_path / "rows.npy", rng.integers(0, 2, (20, 6)).astype(np.uint8))
    np.save(tmp_path / "train.npy", rng.integers(0, 2, (40, 6)).astype(np.uint8))
    np.save(tmp_path / "cat.npy", rng.integers(0, 3, (20, 5)).astype(np.int64))
    np.save(tmp_path / "real.npy", rng.normal(size=(30, 3)))
    write_config(tmp_path / "config.yaml", CONFIG)
    return tmp_path


def write_config(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def validated(config: dict) -> dict:
    """``config`` as the workflow sees it: validated against the schema, which fills in the defaults."""
    from snakemake.utils import validate

    config = json.loads(json.dumps(config))
    validate(config, str(SCHEMA))
    return config


def with_model(name: str, entry: dict, **top) -> dict:
    config = json.loads(json.dumps(CONFIG))
    config["models"][name] = entry
    config.update(top)
    return config


# --------------------------------------------------------------------------- the sweep, statically
def test_source_models_are_swept_not_trained(workdir):
    config = validated(CONFIG)
    assert check_config(config) == []
    jobs = sweep.all_jobs(config)
    assert [(j.model, j.entry, j.stem) for j in jobs] == [
        ("my-energy", "exact", "exact"),
        ("my-energy", "ais", "K10_uniform_seed0"),
        ("my-potts", "exact", "exact"),
        ("my-potts", "ais", "K10_uniform_seed0"),
        ("my-gauss", "hais", "K10_seed0"),
    ]
    s = sweep.job_settings(config, "my-energy", "ais", "K10_uniform_seed0")
    assert s["family"] == "energy-binary" and s["n_visible"] == 6 and s["hidden_sizes"] == [] and s["n_hidden"] is None
    assert s["source"] == "energy.py:make" and s["data_files"] == {"test": "rows.npy", "train": "train.npy"}
    assert s["dataset"] is None
    s = sweep.job_settings(config, "my-potts", "exact", "exact")
    assert s["family"] == "energy-categorical" and s["n_visible"] == 5 and s["data_files"] == {"test": "cat.npy"}


def test_npz_potts_text_and_dataset_sources(workdir):
    """An .npz source's family is its model_type (its hidden sizes read from its weights, so exact: auto
    applies as for a trained RBM), a Potts text file's is potts; a source's rows may be a configured dataset."""
    from conftest import write_tiny_inputs

    write_tiny_inputs(workdir)  # model.npz: a 6-3 RBM
    (workdir / "potts.txt").write_text("h 0 0 0.5\nJ 0 1 0 2 0.7\nh 2 2 0.1\n")
    np.save(workdir / "potts_rows.npy", np.array([[0, 2, 1], [1, 1, 1]]))
    config = with_model(
        "rbm-file", {"source": "model.npz", "data": {"test": "rows.npy"}, "estimators": ["exact", "ais"]}
    )
    config["models"]["potts-file"] = {"source": "potts.txt", "data": {"test": "potts_rows.npy"}, "estimators": ["ais"]}
    config["models"]["digits-energy"] = {"source": "energy.py:make_64", "family": "energy-binary", "dataset": "digits"}
    config["datasets"] = {"digits": {"source": "digits"}}
    config = validated(config)
    assert check_config(config) == []
    s = sweep.job_settings(config, "rbm-file", "exact", "exact")
    assert (s["family"], s["hidden_sizes"], s["n_hidden"], s["n_visible"]) == ("rbm", [3], 3, 6)
    assert sweep.job_settings(config, "potts-file", "ais", "K10_uniform_seed0")["family"] == "potts"
    s = sweep.job_settings(config, "digits-energy", "ais", "K10_uniform_seed0")
    assert (s["dataset"], s["n_visible"], "data_files" in s) == ("digits", 64, False)
    # a 64-site energy is not enumerated under exact: auto (2^64 states)
    assert [j.entry for j in sweep.model_jobs(config, "digits-energy")] == ["ais"]


def test_base_rate_needs_training_rows(workdir):
    """A source model's base-rate estimates need training rows (data.train, a dataset's train split, or an
    .npz's data_mean): without them they are skipped, with a warning, as a DBN's are."""
    from conftest import write_tiny_inputs

    write_tiny_inputs(workdir)  # model.npz: a 6-3 RBM without data_mean
    config = json.loads(json.dumps(CONFIG))
    config["evaluation"]["inits"] = ["uniform", "base-rate"]
    config["models"]["rbm-file"] = {"source": "model.npz", "data": {"test": "rows.npy"}, "estimators": ["ais"]}
    config = validated(config)
    warnings = check_config(config)

    def stems(model):
        return [j.stem for j in sweep.model_jobs(config, model) if j.entry == "ais"]

    assert stems("my-energy") == ["K10_uniform_seed0", "K10_base-rate_seed0"]  # data.train given
    assert stems("my-potts") == stems("rbm-file") == ["K10_uniform_seed0"]
    assert sorted(w.split(" has ")[0] for w in warnings) == ["model my-potts", "model rbm-file"]
    assert "(models.my-potts.data.train), so its base-rate estimates (ais) are skipped" in " ".join(warnings)
    with np.load(workdir / "model.npz") as z:  # an .npz with the training rows' means has a base rate
        arrays = dict(z)
    np.savez(workdir / "model.npz", **arrays, data_mean=np.full(6, 0.5))
    assert stems("rbm-file") == ["K10_uniform_seed0", "K10_base-rate_seed0"]


def test_torchscript_family_is_read_from_its_archive(workdir):
    """A TorchScript file's family is the domain its logzbench.json says, read without torch; a `family` that
    disagrees is refused when the config is loaded."""
    from logzbench.models.io import load_model
    from logzbench.models.source import save_torchscript

    (workdir / "module.py").write_text(
        "import torch\nfrom logzbench.models.energy import EnergyModel\n\n\n"
        "class Linear(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.b = torch.nn.Parameter(torch.linspace(-1.0, 1.0, 5, dtype=torch.float64))\n\n"
        "    def forward(self, x):\n"
        "        return x.double() @ self.b\n\n\n"
        "def make():\n"
        "    return EnergyModel(Linear(), 5, ('categorical', 3))\n"
    )
    save_torchscript(load_model("module.py:make"), workdir / "cat.pt")
    config = validated(with_model("ts", {"source": "cat.pt", "data": {"test": "cat.npy"}}))
    assert check_config(config) == []
    assert sweep.job_settings(config, "ts", "ais", "K10_uniform_seed0")["family"] == "energy-categorical"
    config["models"]["ts"]["family"] = "energy-binary"
    with pytest.raises(ConfigError, match="family is 'energy-binary' but cat.pt holds a 'energy-categorical' model"):
        check_config(config)


#: (id, model entry added to CONFIG as `bad`, words of the ConfigError); relative paths are the workdir's
BAD_ENTRIES = [
    (
        "missing-file",
        {"source": "nosuch.py:make", "family": "energy-binary", "data": {"test": "rows.npy"}},
        ["model bad", "source file nosuch.py", "not found"],
    ),
    (
        "missing-name",
        {"source": "energy.py", "family": "energy-binary", "data": {"test": "rows.npy"}},
        ["model bad", "energy.py", "FILE.py:NAME"],
    ),
    (
        "name-not-an-identifier",
        {"source": "energy.py:make-it", "family": "energy-binary", "data": {"test": "rows.npy"}},
        ["model bad", "'make-it' is not a Python name"],
    ),
    (
        "source-and-hyperparams",
        {
            "source": "energy.py:make",
            "family": "energy-binary",
            "data": {"test": "rows.npy"},
            "hyperparams": {"n_hidden": 4},
        },
        ["model bad", "either `source`", "or `hyperparams`", "not both"],
    ),
    (
        "source-and-preset",
        {"source": "energy.py:make", "family": "energy-binary", "data": {"test": "rows.npy"}, "preset": "mnistCD1-20"},
        ["model bad", "either `source`", "`preset`"],
    ),
    (
        "unknown-family",
        {"source": "energy.py:make", "family": "energy-bianry", "data": {"test": "rows.npy"}},
        ["model bad", "unknown family 'energy-bianry'", "energy-binary"],
    ),
    (
        "no-family",
        {"source": "energy.py:make", "data": {"test": "rows.npy"}},
        ["model bad", "needs `family`", "energy-binary"],
    ),
    (
        "torchscript-of-a-trained-family",
        {"source": "model.pt", "family": "rbm", "data": {"test": "rows.npy"}},
        ["model bad", "TorchScript source cannot hold a 'rbm' model"],
    ),
    (
        "no-rows",
        {"source": "energy.py:make", "family": "energy-binary"},
        ["model bad", "`dataset`", "`data: {test:", "neither"],
    ),
    (
        "missing-rows-file",
        {"source": "energy.py:make", "family": "energy-binary", "data": {"test": "nosuch.npy"}},
        ["model bad", "data.test file nosuch.npy", "not found"],
    ),
    (
        "rows-not-an-array",
        {"source": "energy.py:make", "family": "energy-binary", "data": {"test": "energy.py"}},
        ["model bad", "data.test energy.py", "not a readable .npy"],
    ),
    (
        "categorical-family-on-a-binary-dataset",
        {"source": "energy.py:make_categorical", "family": "energy-categorical", "dataset": "digits"},
        ["model bad", "categorical rows", "data: {test: ROWS.npy}", "digits is binary"],
    ),
    (
        "family-for-a-trained-model",
        {"dataset": "digits", "family": "rbm", "hyperparams": {"n_hidden": 4}},
        ["model bad", "models.bad.family applies to a model read from a `source` file only"],
    ),
    ("trained-model-without-dataset", {"hyperparams": {"n_hidden": 4}}, ["model bad", "give its `dataset`"]),
    (
        "npz-family-disagrees",
        {"source": "model.npz", "family": "dbm", "data": {"test": "rows.npy"}},
        ["model bad", "family is 'dbm' but model.npz holds a 'rbm' model"],
    ),
    (
        "estimator-not-for-the-family",
        {"source": "energy.py:make", "family": "energy-binary", "data": {"test": "rows.npy"}, "estimators": ["hais"]},
        ["model bad", "'hais'", "not available for a ENERGY-BINARY"],
    ),
]


@pytest.mark.parametrize("entry, words", [c[1:] for c in BAD_ENTRIES], ids=[c[0] for c in BAD_ENTRIES])
def test_bad_source_entry_is_refused_when_loaded(workdir, entry, words):
    from conftest import write_tiny_inputs

    write_tiny_inputs(workdir)  # model.npz (a 6-3 RBM)
    (workdir / "model.pt").write_bytes(b"not really a TorchScript file")
    config = with_model("bad", entry, datasets={"digits": {"source": "digits"}})
    with pytest.raises(ConfigError) as info:
        check_config(validated(config))
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)


def test_wrong_family_is_refused_when_the_model_is_loaded(workdir):
    """The family the config states is all the workflow knows before a job loads the model: a model of another
    family is refused by its estimate job, naming the entry and the family to give."""
    from logzbench.pipeline.jobs import run_estimate_sweep

    config = validated(
        with_model(
            "wrong",
            {"source": "energy.py:make", "family": "energy-categorical", "data": {"test": "cat.npy"}, "exact": True},
        )
    )
    settings = sweep.sweep_settings(config, "wrong", "exact")
    with pytest.raises(
        ConfigError,
        match=r"model wrong: source energy.py:make holds a energy-binary model, but the "
        r"config says energy-categorical \(models.wrong.family\)",
    ):
        run_estimate_sweep(settings, model="energy.py", data="cat.npy", out_dir=str(workdir / "out"))
    assert not (workdir / "out").exists() or not any((workdir / "out").iterdir())


# --------------------------------------------------------------------------- through Snakemake
def test_dry_run_has_estimates_and_no_train_job(workdir):
    """A source model next to a trained one: estimate jobs for both, a train job for the trained one only."""
    config = with_model(
        "digits-rbm4",
        {"dataset": "digits", "hyperparams": {"n_hidden": 4, "n_epochs": 1}, "estimators": ["ais"]},
        datasets={"digits": {"source": "digits"}},
    )
    config["models"]["digits-energy"] = {
        "source": "energy.py:make_64",
        "family": "energy-binary",
        "dataset": "digits",
        "estimators": ["ais"],
    }
    proc = snakemake(workdir, "-n", configfile=write_config(workdir / "mixed.yaml", config))
    out = proc.stdout + proc.stderr
    counts = job_counts(out)
    assert counts["train_model"] == 1 and counts["prepare_dataset"] == 1, counts
    assert "results/models/digits-rbm4.npz" in out
    for m in ("my-energy", "my-potts", "my-gauss", "digits-energy"):
        assert f"results/models/{m}" not in out
    assert estimate_dirs(out) == {
        ("my-energy", "exact"),
        ("my-energy", "ais"),
        ("my-potts", "exact"),
        ("my-potts", "ais"),
        ("my-gauss", "hais"),
        ("digits-rbm4", "ais"),
        ("digits-energy", "ais"),
    }
    assert counts["estimate"] == 7
    # the source file and the rows files are the estimate jobs' inputs
    assert "input: energy.py, rows.npy, train.npy, results/tracking/store.json" in out
    assert "input: energy.py, results/data/digits.npz, results/tracking/store.json" in out
    assert not (workdir / "results").exists()


def test_bad_source_entry_refused_by_snakemake_in_one_line(workdir):
    for entry, words in [
        (
            {"source": "nosuch.py:make", "family": "energy-binary", "data": {"test": "rows.npy"}},
            "model bad: source file nosuch.py (relative to the working directory",
        ),
        (
            {
                "source": "energy.py:make",
                "family": "energy-binary",
                "data": {"test": "rows.npy"},
                "hyperparams": {"n_hidden": 3},
            },
            "model bad: give either `source`",
        ),
    ]:
        bad = write_config(workdir / "bad.yaml", with_model("bad", entry))
        proc = snakemake(workdir, "-n", configfile=bad, check=False)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0
        lines = [line for line in out.splitlines() if words in line]
        assert len(lines) == 1, out[-3000:]


@pytest.mark.slow  # about 40 s: three Snakemake runs (the run, then two dry runs)
def test_real_run_estimates_tracks_and_reports(workdir):
    """The workflow on the source models: every estimate's record (with the source and its content hash), one
    MLflow run each, and the report's tables; editing the source reruns its estimates."""
    snakemake(workdir, configfile=workdir / "config.yaml")
    sha = hashlib.sha256((workdir / "energy.py").read_bytes()).hexdigest()
    records = {}
    for model, estimator, stem in [
        ("my-energy", "exact", "exact"),
        ("my-energy", "ais", "K10_uniform_seed0"),
        ("my-potts", "exact", "exact"),
        ("my-potts", "ais", "K10_uniform_seed0"),
        ("my-gauss", "hais", "K10_seed0"),
    ]:
        path = workdir / "results" / "estimates" / model / estimator / f"{stem}.json"
        rec = json.loads(path.read_text())
        assert rec["source"] == CONFIG["models"][model]["source"] and rec["model_sha256"] == sha
        assert rec["family"] == CONFIG["models"][model]["family"]
        assert (path.with_suffix(".npz")).is_file()
        records[model, estimator] = rec
    # log f = -sum |x_i - 1| over 5 sites of 3 states: Z = (1 + 2/e)^5
    assert records["my-potts", "exact"]["result"]["log_z"] == pytest.approx(5 * np.log(1 + 2 / np.e), abs=1e-9)
    for model in ("my-energy", "my-potts"):
        exact = records[model, "exact"]["result"]["log_z"]
        assert records[model, "ais"]["result"]["log_z"] == pytest.approx(exact, abs=1.0)
    assert not (workdir / "results" / "models").exists()  # nothing trained

    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{workdir / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["logzbench-byo"])
    est = runs[runs["tags.logzbench.kind"] == "estimate"]  # not the report run, nor the sweeps' parent runs
    assert len(est) == 5
    assert set(est["params.family"]) == {"energy-binary", "energy-categorical", "energy-continuous"}
    assert set(est["tags.logzbench.source"]) == {"energy.py:make", "energy.py:make_categorical", "energy.py:make_gauss"}
    assert set(est["tags.logzbench.model_sha256"]) == {sha}
    assert {r["mlflow_run_id"] for r in records.values()} == set(est["run_id"])

    report = workdir / "results" / "report"
    summary = pd.read_csv(report / "summary.csv")
    assert set(summary["model"]) == {"my-energy", "my-potts", "my-gauss"}
    assert json.loads((report / "report.json").read_text())["families"] == {
        "my-energy": "energy-binary",
        "my-potts": "energy-categorical",
        "my-gauss": "energy-continuous",
    }
    for model in ("my-energy", "my-potts", "my-gauss"):
        assert (report / "plots" / f"{model}.png").is_file()
    # the continuous energy in the continuous table (its size unknown): HAIS's log-likelihood of N(0, I)
    cont = pd.read_csv(report / "table_continuous.csv")
    assert list(cont["model"]) == ["my-gauss"] and pd.isna(cont["size"][0])
    rows = np.load(workdir / "real.npy")
    want = float(np.mean(-0.5 * (rows**2).sum(axis=1) - 1.5 * np.log(2 * np.pi)))
    assert cont["hais"][0] == pytest.approx(want, abs=0.05)

    # nothing to redo; editing the user's file reruns every estimate of its models (and the report)
    proc = snakemake(workdir, "-n", configfile=workdir / "config.yaml")
    assert "Nothing to be done" in proc.stdout + proc.stderr
    with open(workdir / "energy.py", "a") as fh:
        fh.write("\n# edited\n")
    proc = snakemake(workdir, "-n", configfile=workdir / "config.yaml")
    assert job_counts(proc.stdout + proc.stderr)["estimate"] == 5


def test_report_names_the_size_of_a_model_without_hidden_units():
    """A pairwise Potts model or a user's discrete energy has no hidden layer: its architecture in the
    report is its visible units (not blank); a continuous model's is left to its own table."""
    from logzbench.report.records import normalize_record

    def arch(family, **settings):
        rec = {"model": "m", "estimator": "ais", "method": "ais", "family": family, **settings, "result": {}}
        return normalize_record(rec)["architecture"]

    assert arch("energy-binary", n_visible=64) == "64"
    assert arch("potts", n_visible=8) == "8"
    assert arch("potts-rbm", n_visible=8, n_hidden=20) == "8-20"
    assert arch("rbm", n_visible=784, n_hidden=500) == "784-500"
    assert arch("energy-continuous", n_visible=2) == ""


def test_transition_entry_reaches_the_estimate(workdir):
    """An estimator entry's ``transition`` (issue 39) is recorded with the job and passed to the estimate; a
    gradient transition is for a discrete energy only, so the continuous model is not given the entry."""
    from logzbench.pipeline.jobs import estimate_options

    config = json.loads(json.dumps(CONFIG))
    config["estimators"]["ais-dmala"] = {"method": "ais", "chains": 20, "transition": "dmala"}
    config["models"]["my-energy"]["estimators"].append("ais-dmala")
    config = validated(config)
    assert check_config(config) == []
    stems = [j.stem for j in sweep.all_jobs(config) if j.entry == "ais-dmala"]
    assert stems == ["K10_uniform_seed0"]
    settings = sweep.job_settings(config, "my-energy", "ais-dmala", stems[0])
    assert settings["transition"] == "dmala"
    assert estimate_options(settings)["transition"] == "dmala"
    # the default transition is not recorded: the other jobs' settings (and files, MLflow params) are as before
    assert "transition" not in sweep.job_settings(config, "my-energy", "ais", stems[0])
    config["estimators"]["smc-dmala"] = {"method": "smc", "transition": "dmala"}  # smc runs on continuous models
    config["models"]["my-gauss"]["estimators"].append("smc-dmala")
    with pytest.raises(ConfigError, match="transition dmala, which is for a user's discrete energy"):
        check_config(validated(config))
