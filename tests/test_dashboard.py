"""The MLflow dashboard a reviewer reads: the experiment's kind, description and saved views, runs
grouped by model, each sweep's parent run, each run's real start and end -- and the UI itself in a
headless Chromium.

The browser test serves a store with the runs of a finished ``config/test.yaml`` run (the same run
names, tags, params and metric names, logged through the package's logging functions with made-up
numbers, in a few seconds) with ``mlflow server``, loads the dashboard page
(:func:`logzbench.tracking.dashboard_url`) with ``chromium --headless=new --dump-dom`` and checks
that it is the runs table (not MLflow 3's GenAI overview), not grouped, each sweep (model, estimator,
start) one parent row with its runs hidden under it, with the description; then, in a Chromium driven
over the DevTools protocol, it clicks every parent's ``+`` and checks that each sweep's runs (one per K
and seed, named by them) are the rows right under their parent, one level in, that every run is listed,
with the metric columns (the differences from the exact value among them) and the flag's short reason;
then it keeps a screenshot (``dashboard.png`` in the test's ``tmp_path``, copied to
``$LOGZBENCH_TEST_ARTIFACTS`` or ``<tmp>/logzbench-dashboard/``; its path is printed, see ``pytest -s``).

``LOGZBENCH_DASHBOARD_STORE=<dir or sqlite URI>`` points it at the store of a real finished run
instead (e.g. a ``snakemake --configfile config/test.yaml`` working directory).  Without a
``chromium`` (Debian: ``apt-get install -y chromium``) the browser test skips.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("mlflow", reason="mlflow is not installed; the dashboard tests need it")

from conftest import CHROMIUM_FLAGS, headless

from logzbench import tracking
from logzbench.tracking.runs import _epoch_ms

REPO = Path(__file__).resolve().parents[1]
TEST_CONFIG = REPO / "config" / "test.yaml"
EXPERIMENT = "logzbench-test"  # config/test.yaml's tracking.experiment
HOUR = 3600.0
#: the reason the test store's flagged runs carry (longer than a table column: logzbench.flag_reason cuts it)
FLAG = "heavy-tailed log-weights: Pareto k-hat 0.91 > 0.7, the standard error understates the uncertainty"


def _uri(path: Path) -> str:
    return "sqlite:///" + str(path / "mlflow.db")


def _record(model="m", estimator="ais", K=100, init="uniform", seed=0, log_z=10.0, **extra):
    return {
        "model": model,
        "dataset": "digits",
        "estimator": estimator,
        "method": estimator,
        "K": K,
        "init": init,
        "seed": seed,
        "schedule": "linear",
        "chains": 100,
        "device": "cpu",
        "code_version": "test",
        "result": {
            "estimator": estimator,
            "log_z": log_z,
            "log_z_stderr": 0.1,
            "ess": 50.0,
            "n_chains": 100,
            "mean_log_likelihood": -20.0,
            "mean_log_likelihood_stderr": 0.5,
            "seconds": 1.5,
        },
        **extra,
    }


# --------------------------------------------------------------------------- runs: times and groups
def test_runs_start_and_end_when_the_record_says(tmp_path):
    """A run's start and end (the UI's Created and Duration) are the record's ``started_at`` /
    ``finished_at``, not the moment it was logged; training and trials runs take theirs too."""
    import pandas as pd

    uri = _uri(tmp_path)
    tracking.init_store(uri, "exp")
    t0 = time.time() - HOUR
    rec = _record(started_at="2026-01-02T03:04:05.250+00:00", finished_at="2026-01-02T03:06:05.750+00:00")
    run_id = tracking.log_estimate(rec, uri=uri, experiment_name="exp")
    tracking.log_training(
        "m",
        hyperparams={"n_hidden": 8},
        history=[{"epoch": 1, "loss": 1.0}],
        uri=uri,
        experiment_name="exp",
        start_time=t0,
        end_time=t0 + 90,
    )
    trials = pd.DataFrame(
        {
            "trial": [0, 1],
            "method": ["ds", "ds"],
            "log_z": [1.0, 1.1],
            "log_z_stderr": [0.1, 0.1],
            "error": [0.0, 0.1],
            "truth": [1.0, 1.0],
        }
    )
    summary = pd.DataFrame({"method": ["ds"], "bias": [0.05], "mse": [0.005], "sd": [0.07], "coverage": [1.0]})
    tracking.log_trials(
        "gaussian",
        {"sigma0": 0.5},
        trials,
        summary,
        uri=uri,
        experiment_name="exp",
        start_time=t0 + 100,
        end_time=t0 + 112.5,
    )
    before = int(time.time() * 1000)
    plain = tracking.log_run("report", uri=uri, experiment_name="exp", kind="report")  # no times: now
    client = tracking.get_client(uri)

    info = client.get_run(run_id).info
    assert (info.start_time, info.end_time) == (1767323045250, 1767323165750)  # 2 min 0.5 s
    assert info.status == "FINISHED"
    assert client.get_run(run_id).data.metrics["log_z"] == 10.0
    assert [m.timestamp for m in client.get_metric_history(run_id, "log_z")] == [info.end_time]
    train = tracking.find_runs("train/m", uri=uri, experiment_name="exp")[0]
    assert (train.info.start_time, train.info.end_time) == (round(t0 * 1000), round((t0 + 90) * 1000))
    trial = tracking.find_runs(kind="trials", uri=uri, experiment_name="exp")[0]
    assert trial.info.end_time - trial.info.start_time == 12500
    report = client.get_run(plain).info
    assert before <= report.start_time <= report.end_time <= int(time.time() * 1000)


def test_runs_are_tagged_with_the_group_the_ui_groups_by(tmp_path):
    """Estimates and training runs group by model, an estimate's K and seeds by its sweep (model,
    estimator, start: ``logzbench.sweep``), the seeds of one setting by ``logzbench.setting``, trials by
    experiment, the report by itself; an estimate's run is named by its settings."""
    uri = _uri(tmp_path)
    for seed in (0, 1):
        tracking.log_estimate(_record(seed=seed), uri=uri, experiment_name="exp")
    tracking.log_estimate(_record(estimator="exact", K=None, init=None, seed=None), uri=uri, experiment_name="exp")
    tracking.log_training("m", hyperparams={}, history=[], uri=uri, experiment_name="exp")
    tracking.log_run("report", uri=uri, experiment_name="exp", kind="report")
    tags = {r.data.tags["mlflow.runName"]: r.data.tags for r in tracking.find_runs(uri=uri, experiment_name="exp")}
    assert {n: (t[tracking.GROUP_TAG], t[tracking.SWEEP_TAG], t[tracking.SETTING_TAG]) for n, t in tags.items()} == {
        "m ais uniform K=100 seed=0": ("m", "m / ais / uniform", "m/ais/K100/uniform"),
        "m ais uniform K=100 seed=1": ("m", "m / ais / uniform", "m/ais/K100/uniform"),
        "m exact": ("m", "m / exact", "m/exact/K-/-"),
        "train/m": ("m", "m / train", "train/m"),
        "report": ("report", "report", "report"),
    }


def test_relogging_a_record_replaces_its_run_even_with_the_same_times(tmp_path):
    """Which of a key's runs is kept is decided by when it was logged, not by its (the job's)
    start time: logging the same record twice keeps the second run."""
    uri = _uri(tmp_path)
    rec = _record(started_at="2026-01-02T03:04:05+00:00", finished_at="2026-01-02T03:05:05+00:00")
    first = tracking.log_estimate(rec, uri=uri, experiment_name="exp")
    second = tracking.log_estimate(rec, uri=uri, experiment_name="exp")
    assert [r.info.run_id for r in tracking.find_runs(uri=uri, experiment_name="exp")] == [second] != [first]
    # an earlier job logged later still replaces
    third = tracking.log_estimate(
        {**rec, "started_at": "2025-01-01T00:00:00+00:00", "finished_at": "2025-01-01T00:01:00+00:00"},
        uri=uri,
        experiment_name="exp",
    )
    assert [r.info.run_id for r in tracking.find_runs(uri=uri, experiment_name="exp")] == [third]


def test_a_sweep_job_gives_each_setting_its_own_real_start_and_end(tmp_path):
    """run_estimate_sweep: each setting's record has its start and end, its run spans them exactly,
    and the settings' runs follow one another (the job ran them in turn)."""
    import numpy as np
    from conftest import model_samples, random_rbm

    from logzbench.models import save_model
    from logzbench.pipeline.jobs import run_estimate_sweep

    rbm = random_rbm(12, 8, seed=0, scale=0.5)
    save_model(rbm, tmp_path / "tiny.npz")
    rows = model_samples(rbm, 60, seed=1, sweeps=50).numpy().astype(np.uint8)
    np.savez(tmp_path / "tiny-data.npz", train=rows[:40], test=rows[40:])
    base = {
        "model": "tiny",
        "dataset": "tiny-data",
        "device": "cpu",
        "n_visible": 12,
        "family": "rbm",
        "hidden_sizes": [8],
        "n_hidden": 8,
        "estimator": "ais",
        "method": "ais",
        "init": "uniform",
        "schedule": "linear",
        "chains": 20,
        "n_examples": None,
    }
    settings = [{**base, "K": K, "seed": 0} for K in (5, 200)]
    uri = _uri(tmp_path)
    t0 = int(time.time() * 1000)
    records = run_estimate_sweep(
        settings,
        model=tmp_path / "tiny.npz",
        data=tmp_path / "tiny-data.npz",
        out_dir=tmp_path / "ais",
        log=lambda msg: None,
        tracking={"enabled": True, "uri": uri, "experiment": "exp"},
    )
    client = tracking.get_client(uri)
    spans = []
    for rec in records:
        on_disk = json.loads((tmp_path / "ais" / f"K{rec['K']}_uniform_seed0.json").read_text())
        assert on_disk["started_at"] == rec["started_at"] and on_disk["finished_at"] == rec["finished_at"]
        info = client.get_run(rec["mlflow_run_id"]).info
        assert (info.start_time, info.end_time) == (_epoch_ms(rec["started_at"]), _epoch_ms(rec["finished_at"]))
        # the run spans the estimator's own time (and the test rows' log f(v), the arrays)
        assert info.end_time - info.start_time >= 1000 * rec["result"]["seconds"] - 2
        spans.append((info.start_time, info.end_time))
    assert t0 <= spans[0][0] <= spans[0][1] <= spans[1][0] <= spans[1][1]
    # the sweep's one parent run ("tiny ais uniform") spans its settings' runs, which are its children
    (parent,) = tracking.find_runs(uri=uri, experiment_name="exp", parents=True)
    assert parent.info.run_name == "tiny ais uniform" and parent.data.tags["logzbench.K_values"] == "5, 200"
    assert (parent.info.start_time, parent.info.end_time, parent.info.status) == (spans[0][0], spans[1][1], "FINISHED")
    for rec in records:
        assert client.get_run(rec["mlflow_run_id"]).data.tags["mlflow.parentRunId"] == parent.info.run_id


# --------------------------------------------------------------------------- the experiment
def test_experiment_kind_description_and_views_are_set_once(tmp_path):
    """init_store makes a model-training experiment with the description and the saved views; a
    second call changes nothing; a person's own description or overridden view is kept."""
    uri = _uri(tmp_path)
    exp_id = tracking.init_store(uri, "exp")["experiment_id"]
    client = tracking.get_client(uri)
    tags = client.get_experiment(exp_id).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development"
    assert tags["mlflow.note.content"] == tracking.DASHBOARD_DESCRIPTION
    views = {
        k.removeprefix("mlflow.sharedViewState."): json.loads(v)
        for k, v in tags.items()
        if k.startswith("mlflow.sharedViewState.")
    }
    assert {k: v["name"] for k, v in views.items()} == {
        "logzbench-by-sweep": "By sweep",
        "logzbench-by-model": "By model",
        "logzbench-seeds-pooled": "Seeds pooled",
    }
    state = json.loads(views["logzbench-by-model"]["state"])
    assert state["groupBy"]["groupByKeys"] == [{"mode": "tag", "groupByData": tracking.GROUP_TAG}]
    assert "metrics.`mean_test_ll`" in state["selectedColumns"]
    state = json.loads(views["logzbench-by-sweep"]["state"])  # the view the dashboard's page opens
    # not grouped (a group's row would average K and seeds): sorted by start, which MLflow's UI nests parents in
    assert state["groupBy"] is None and state["orderByKey"] == "attributes.start_time"
    for column in (
        "metrics.`log_z_minus_exact`",
        "metrics.`mean_test_ll_minus_exact`",
        f"tags.`{tracking.FLAG_REASON_TAG}`",
        "params.`K`",
        "params.`seed`",
    ):
        assert column in state["selectedColumns"] and column in state["columnOrder"], column
    assert tracking.setup_dashboard(client, exp_id) == {}  # idempotent
    assert tracking.init_store(uri, "exp")["experiment_id"] == exp_id
    assert client.get_experiment(exp_id).tags == tags

    client.set_experiment_tag(exp_id, "mlflow.note.content", "my own notes")
    client.set_experiment_tag(exp_id, "mlflow.experimentKind", "finetuning")
    overridden = json.dumps({"name": "By model", "createdAt": 1, "updatedAt": 2, "state": "H4sIAAAA-compressed"})
    client.set_experiment_tag(exp_id, "mlflow.sharedViewState.logzbench-by-model", overridden)
    client.delete_experiment_tag(exp_id, "mlflow.sharedViewState.logzbench-seeds-pooled")
    assert set(tracking.setup_dashboard(client, exp_id)) == {"mlflow.sharedViewState.logzbench-seeds-pooled"}
    tags = client.get_experiment(exp_id).tags
    assert tags["mlflow.note.content"] == "my own notes" and tags["mlflow.experimentKind"] == "finetuning"
    assert tags["mlflow.sharedViewState.logzbench-by-model"] == overridden
    # a description of the workflow's config
    other = tracking.init_store(_uri(tmp_path / "b"), "exp", description="compare AIS and RAISE")
    assert (
        tracking.get_client(_uri(tmp_path / "b")).get_experiment(other["experiment_id"]).tags["mlflow.note.content"]
        == "compare AIS and RAISE"
    )


def test_dashboard_url_and_hint():
    url = tracking.dashboard_url("7", "http://127.0.0.1:5000/")
    assert url == (
        "http://127.0.0.1:5000/#/experiments/7/runs?workflowType=machine_learning&viewStateShareKey=logzbench-by-sweep"
    )
    assert tracking.DASHBOARD_VIEW == "logzbench-by-sweep" and tracking.DASHBOARD_VIEW in tracking.DASHBOARD_VIEWS
    assert tracking.dashboard_url("7", view=None).endswith("/#/experiments/7/runs?workflowType=machine_learning")
    hint = tracking.dashboard_hint("sqlite:////x/mlflow.db", "7")
    assert "mlflow ui --backend-store-uri sqlite:////x/mlflow.db --port 5000" in hint and url in hint
    assert tracking.dashboard_hint("http://srv:5001", "7").endswith(tracking.dashboard_url("7", "http://srv:5001"))


# --------------------------------------------------------------------------- a config/test.yaml store
def _test_config() -> dict:
    """config/test.yaml as the workflow sees it (validated against the schema, defaults filled in)."""
    pytest.importorskip("snakemake", reason="snakemake validates the config")
    import yaml
    from snakemake.utils import validate

    config = yaml.safe_load(TEST_CONFIG.read_text())
    validate(config, str(REPO / "workflow" / "schemas" / "config.schema.yaml"))
    return config


def _trials_settings(config) -> list[tuple[str, dict]]:
    out = []
    g = (config.get("trials") or {}).get("gaussian")
    if g:
        out += [("gaussian", {"sigma0": float(s)}) for s in g["sigma0"]]
    g = (config.get("trials") or {}).get("grid")
    if g:
        out += [("grid", {"reference": r, "sigma_pair": float(s)}) for r in g["references"] for s in g["sigma_pair"]]
    return out


def build_test_store(uri: str, config: dict, experiment: str = EXPERIMENT) -> dict[str, str]:
    """Log the runs a finished ``config/test.yaml`` run has (training, every estimate of its sweeps,
    the trials settings, the report) through the package's logging functions, with made-up numbers
    and job times (the last hour, one job after another).  Returns ``{run name: kind}``, the sweeps' parent
    runs among them (kind ``sweep``)."""
    import pandas as pd

    from logzbench.pipeline import sweep

    presets = sweep._load_presets()
    tracking.init_store(uri, experiment, description=None)
    estimates: dict[str, tuple[str, str, float, float]] = {}  # key -> model, estimator, log Z, mean test LL
    t = time.time() - HOUR
    names: dict[str, str] = {}
    for i, model in enumerate(config["models"]):
        tracking.log_training(
            model,
            hyperparams={"n_epochs": 3},
            history=[{"epoch": e, "loss": 1.0 / e} for e in (1, 2, 3)],
            summary={"train_seconds": 90.0},
            uri=uri,
            experiment_name=experiment,
            dataset=config["models"][model]["dataset"],
            start_time=t,
            end_time=t + 90,
        )
        names[tracking.train_key(model)] = "train"
        t += 95
    with tracking.TrackingSession(uri, experiment) as session:
        for i, (model, est) in enumerate(sweep.sweep_pairs(config, presets)):
            for j, s in enumerate(sweep.sweep_settings(config, model, est, presets)):
                key = tracking.estimate_key(s["model"], s["estimator"], s.get("K"), s.get("init"), s.get("seed"))
                seconds = 2.0 + 0.5 * j
                ll = -30.0 + 0.1 * i + 0.01 * j
                rec = {
                    "key": key,
                    **s,
                    "code_version": "test",
                    "result": {
                        "estimator": s["method"],
                        "log_z": 40.0 - ll,
                        "log_z_stderr": 0.05,
                        "ess": 0.6 * (s.get("chains") or 20),
                        "n_chains": s.get("chains") or 20,
                        "mean_log_likelihood": ll,
                        "mean_log_likelihood_stderr": 0.05,
                        "seconds": seconds,
                        "n_sweeps": s.get("K") or 0,
                    },
                    "started_at": t,
                    "finished_at": t + seconds + 0.7,
                }
                tracking.log_estimate(rec, session=session, extra_tags={"logzbench.family": s.get("family", "rbm")})
                names[tracking.estimate_run_name(key)] = "estimate"
                if tracking.sweep_parent(key) is not None:
                    names[tracking.sweep_run_name(key)] = tracking.PARENT_KIND
                estimates[key] = (s["model"], s["estimator"], 40.0 - ll, ll)
                t += seconds + 1
    # what the report sets on them: the flags (here: every AIS run of the RBM) and the differences from the
    # exact value of the models with an exact estimate
    exact = {m: (lz, ll) for m, e, lz, ll in estimates.values() if e == "exact"}
    tracking.set_flags(
        {k: [FLAG] if (m, e) == ("digits-rbm8", "ais") else [] for k, (m, e, _, _) in estimates.items()},
        uri=uri,
        experiment_name=experiment,
        metrics={
            k: {"log_z_minus_exact": lz - exact[m][0], "mean_test_ll_minus_exact": ll - exact[m][1]}
            for k, (m, _, lz, ll) in estimates.items()
            if m in exact
        },
    )
    for experiment_name, setting in _trials_settings(config):
        df = pd.DataFrame(
            {
                "trial": [0, 1],
                "method": ["ds", "ds"],
                "log_z": [1.0, 1.2],
                "log_z_stderr": [0.1, 0.1],
                "error": [0.0, 0.2],
                "truth": [1.0, 1.0],
            }
        )
        summary = pd.DataFrame({"method": ["ds"], "bias": [0.1], "mse": [0.02], "sd": [0.14], "coverage": [1.0]})
        tracking.log_trials(
            experiment_name, setting, df, summary, uri=uri, experiment_name=experiment, start_time=t, end_time=t + 4
        )
        names[tracking.trials_key(experiment_name, setting).removeprefix("trials/")] = "trials"
        t += 5
    tracking.log_run(
        "report",
        uri=uri,
        experiment_name=experiment,
        kind="report",
        metrics={"n_flagged_settings": 0},
        start_time=t,
        end_time=t + 3,
    )
    names["report"] = "report"
    return names


def test_the_test_store_has_every_run_of_a_finished_test_run(tmp_path):
    """The store the browser test reads has the runs tests/test_workflow.py counts after a real run, and one
    parent run per sweep with K or seeds (not the exact runs), which find_runs leaves out."""
    names = build_test_store(_uri(tmp_path), _test_config())
    kinds = [k for k in names.values()]
    assert (kinds.count("train"), kinds.count("estimate"), kinds.count("trials"), kinds.count("report")) == (
        5,
        37,
        4,
        1,
    )
    runs = tracking.find_runs(uri=_uri(tmp_path), experiment_name=EXPERIMENT)
    parents = tracking.find_runs(uri=_uri(tmp_path), experiment_name=EXPERIMENT, parents=True)
    assert sorted(r.data.tags["mlflow.runName"] for r in runs) == sorted(n for n, k in names.items() if k != "sweep")
    assert sorted(r.data.tags["mlflow.runName"] for r in parents) == sorted(n for n, k in names.items() if k == "sweep")
    sweeps = {r.data.tags[tracking.SWEEP_TAG] for r in runs if r.data.tags[tracking.KIND_TAG] == "estimate"}
    exact = {r.data.tags[tracking.SWEEP_TAG] for r in runs if r.data.tags.get("logzbench.estimator") == "exact"}
    assert len(parents) == len(sweeps - exact) >= 5  # one per sweep
    by_id = {p.info.run_id: p for p in parents}
    for r in runs:
        if r.data.tags[tracking.KIND_TAG] == "estimate" and r.data.tags[tracking.SWEEP_TAG] not in exact:
            parent = by_id[r.data.tags["mlflow.parentRunId"]]
            assert parent.data.tags[tracking.SWEEP_TAG] == r.data.tags[tracking.SWEEP_TAG]
        else:
            assert "mlflow.parentRunId" not in r.data.tags, r.data.tags["mlflow.runName"]
    durations = {r.data.tags["mlflow.runName"]: r.info.end_time - r.info.start_time for r in runs}
    assert durations["train/digits-rbm8"] == 90_000 and min(durations.values()) >= 2_700


# --------------------------------------------------------------------------- the UI, in a real browser
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mlflow_ui(tmp_path):
    """``(base URL, store URI, {run name: kind} or None)``: ``mlflow server`` on a config/test.yaml store
    (``$LOGZBENCH_DASHBOARD_STORE``, else :func:`build_test_store` in ``tmp_path``)."""
    store = os.environ.get("LOGZBENCH_DASHBOARD_STORE")
    if store:
        uri = store if "://" in store else _uri(Path(store))
        names = None
    else:
        uri = _uri(tmp_path)
        names = build_test_store(uri, _test_config())
    port = _free_port()
    log = open(tmp_path / "mlflow-server.log", "w")
    # no job runner (its queue consumers are half a dozen processes the UI's runs table does not need)
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            uri,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
        env=env,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail(f"mlflow server did not start:\n{(tmp_path / 'mlflow-server.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield base, uri, names
    finally:
        _stop(proc)
        log.close()


def _stop(proc: subprocess.Popen) -> None:
    """Stop the server this test started and its workers (the process group it leads)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):  # whatever of the group is left
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=20)


def _page_text(dom: str) -> str:
    text = re.sub(r"<script.*?</script>|<style.*?</style>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", text)))


def _headless(
    chromium: str, url: str, profile: Path, *args: str, budget_ms: int = 25_000, size: tuple[int, int] = (1900, 2600)
) -> subprocess.CompletedProcess:
    """One headless Chromium run on ``url`` with a fresh profile (no remembered UI state); scrollbars hidden."""
    return headless(chromium, url, profile, "--hide-scrollbars", *args, size=size, budget_ms=budget_ms)


#: run in the page by :func:`_opened_rows`: wait for the runs table, note its rows, click every parent row's ``+``
#: (the button in its Run Name cell) as a reviewer would, one at a time until none is left unclicked, and return
#: the rows before and after, top to bottom, as ``[nesting level, run name, has a +]`` (the level is the run name's
#: indent in steps of 24 px, as MLflow's UI draws it: 0 a top row, 1 a child), and the page's text after
_OPEN_PARENTS_JS = """
(async (budget) => {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const deadline = Date.now() + budget;
  const rows = () => [...document.querySelectorAll('.ag-row')].flatMap((row) => {
    const cell = row.querySelector('[col-id="attributes.`Run Name`"]');
    const link = cell && cell.querySelector('a[href*="/runs/"]');
    if (!link) return [];
    const indent = cell.querySelector('div[style*="width"]');
    const level = indent ? Math.round(parseFloat(indent.style.width) / 24) - 1 : -1;
    return [{id: row.getAttribute('row-id'), index: Number(row.getAttribute('row-index')), level,
             name: link.textContent.trim(), button: cell.querySelector('button')}];
  });
  const listed = () => rows().sort((a, b) => a.index - b.index).map((r) => [r.level, r.name, Boolean(r.button)]);
  while (!rows().length && Date.now() < deadline) await sleep(250);
  await sleep(1000);  // the first page of runs, all of it
  const before = listed();
  const clicked = new Set();
  for (;;) {
    const next = rows().find((r) => r.button && !clicked.has(r.id));
    if (!next || Date.now() > deadline) break;
    clicked.add(next.id);
    next.button.click();
    await sleep(150);
  }
  await sleep(1000);
  return {before, after: listed(), text: document.body.innerText};
})
"""


def _opened_rows(chromium: str, url: str, profile: Path, budget_s: float = 90.0) -> dict:
    """The runs table of ``url`` in a headless Chromium driven over the DevTools protocol (``aiohttp``'s
    WebSocket client, an MLflow dependency), as loaded and with every parent row opened
    (:data:`_OPEN_PARENTS_JS`): ``{"before": rows, "after": rows, "text": the page's text after}``, each row
    ``(nesting level, run name, has a +)``, top to bottom.  ``--dump-dom`` cannot click: a saved view cannot open
    parent rows (MLflow leaves ``runsExpanded`` out of it), so a reviewer clicks their ``+``."""
    import asyncio

    aiohttp = pytest.importorskip("aiohttp", reason="the DevTools protocol client")
    shutil.rmtree(profile, ignore_errors=True)
    port = _free_port()
    cmd = [
        chromium,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        "--window-size=1900,4000",  # every row drawn (the grid draws the rows in sight)
        f"--remote-debugging-port={port}",
        url,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    async def drive() -> list:
        deadline = time.monotonic() + budget_s
        async with aiohttp.ClientSession() as http:
            while True:
                with contextlib.suppress(aiohttp.ClientError, OSError, ValueError):
                    async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
                        pages = [p for p in await r.json() if p.get("type") == "page"]
                    if pages:
                        break
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("chromium's DevTools endpoint did not answer")
                await asyncio.sleep(0.5)
            async with http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                ids = iter(range(1, 10**6))

                async def call(method: str, **params) -> dict:
                    n = next(ids)
                    await ws.send_json({"id": n, "method": method, "params": params})
                    async for msg in ws:
                        reply = json.loads(msg.data)
                        if reply.get("id") == n:
                            if "error" in reply:
                                raise RuntimeError(f"{method}: {reply['error']}")
                            return reply["result"]
                    raise RuntimeError("chromium closed the DevTools connection")

                while time.monotonic() < deadline:  # the app's page, loaded (not the first blank one)
                    with contextlib.suppress(RuntimeError):
                        r = await call("Runtime.evaluate", expression="document.readyState + ' ' + location.href")
                        if r["result"].get("value", "").startswith("complete http"):
                            break
                    await asyncio.sleep(0.5)
                left_ms = max(int((deadline - time.monotonic()) * 1000), 1000)
                r = await call(
                    "Runtime.evaluate",
                    expression=f"{_OPEN_PARENTS_JS}({left_ms})",
                    awaitPromise=True,
                    returnByValue=True,
                )
                if "exceptionDetails" in r:
                    raise RuntimeError(r["exceptionDetails"])
                value = r["result"]["value"]
                return {
                    "before": [tuple(row) for row in value["before"]],
                    "after": [tuple(row) for row in value["after"]],
                    "text": re.sub(r"\s+", " ", value["text"]),
                }

    try:
        return asyncio.run(asyncio.wait_for(drive(), budget_s + 30))
    finally:
        _stop(proc)


def test_mlflow_ui_opens_on_the_sweeps_with_their_runs_nested(chromium, mlflow_ui, tmp_path, record_property):
    """The page the workflow prints (tracking.dashboard_url) is the runs table, not the GenAI
    overview, in the view *By sweep*: not grouped (no group row averaging K and seeds), each sweep (model,
    estimator, start) a parent row named ``<model> <estimator> <start>`` with a ``+``, its runs hidden under
    it.  Opened (every ``+`` clicked in the browser), each sweep's runs, one per K and seed, named by model,
    estimator, start, K and seed, are the rows right under their parent, one level in; the other runs
    (training, exact, trials, report) stay top rows.  The page shows the metric columns with the
    differences from the exact value, the flag's reason in short and the description, and its durations are
    the jobs' (not ~60 ms).  A screenshot is kept."""
    base, uri, names = mlflow_ui
    runs = tracking.find_runs(uri=uri, experiment_name=EXPERIMENT)
    parents = tracking.find_runs(uri=uri, experiment_name=EXPERIMENT, parents=True)
    if names is None:  # a real store: its runs
        names = {r.data.tags["mlflow.runName"]: r.data.tags.get(tracking.KIND_TAG) for r in runs + parents}
    parent_name = {p.info.run_id: p.data.tags["mlflow.runName"] for p in parents}
    # each child run's name -> its parent's name (as the store says)
    under = {
        r.data.tags["mlflow.runName"]: parent_name[r.data.tags["mlflow.parentRunId"]]
        for r in runs
        if r.data.tags.get("mlflow.parentRunId") in parent_name
    }
    exp = tracking.get_client(uri).get_experiment_by_name(EXPERIMENT)
    url = tracking.dashboard_url(exp.experiment_id, base)
    reasons = sorted({r.data.tags[tracking.FLAG_REASON_TAG] for r in runs if tracking.FLAG_REASON_TAG in r.data.tags})
    tops = sorted(n for n in names if n not in under)

    # as the page opens: the top rows only (the sweeps closed), listed in the DOM
    text = ""
    for budget in (25_000, 60_000):  # a slow machine: once more, with more (virtual) time
        proc = _headless(chromium, url, tmp_path / "profile", "--dump-dom", budget_ms=budget)
        text = _page_text(proc.stdout)
        if all(n in text for n in tops):
            break
    (tmp_path / "dashboard.txt").write_text(text)
    where = f"(page text in {tmp_path / 'dashboard.txt'}; chromium stderr: {proc.stderr[-1500:]})"
    assert f"Runs - Experiment {exp.experiment_id} - MLflow" in text[:300], where  # the page's title
    assert "Traces 0" not in text and "No data available for the selected time range" not in text, where
    assert "By sweep" in text and "Group by:" not in text and "Group:" not in text, where  # not grouped
    missing = [n for n in tops if n not in text]
    assert not missing, (missing, where)
    assert "Compare one model's estimators side by side" in text, where
    assert "Metrics" in text and "mean_test_ll" in text and "log_z" in text, where

    # every + clicked, as a reviewer would
    table = {}
    for budget_s in (90.0, 180.0):  # a slow machine: once more, with more time
        table = _opened_rows(chromium, url, tmp_path / "profile-cdp", budget_s=budget_s)
        if len(table["after"]) == len(names):
            break
    (tmp_path / "dashboard-opened.txt").write_text(table["text"])
    where = f"(rows {table}; page text in {tmp_path / 'dashboard-opened.txt'})"
    before, after, text = table["before"], table["after"], table["text"]
    assert sorted(n for _, n, _ in before) == tops, where  # the children hidden, each sweep one row
    assert {n for _, n, plus in before if plus} == set(parent_name.values()), where  # the parents have a +
    assert sorted(n for _, n, _ in after) == sorted(names), where  # every run, once
    parent = None
    for level, name, plus in after:
        if level == 0:
            parent = name
            assert name not in under, (name, where)
        else:  # a child: right under its parent (after the parent and its other children), one level in
            assert (level, plus, parent) == (1, False, under[name]), (name, where)
    # the runs under a parent: exactly the estimates with a K or a seed (an exact run is its own top row)
    assert set(under) == {n for n, k in names.items() if k == "estimate" and re.search(r" (K|seed)=\S+$", n)}, where
    for column in ("log_z_minus_exact", "mean_test_ll_minus_exact", tracking.FLAG_REASON_TAG):
        assert column in text, (column, where)
    if not os.environ.get("LOGZBENCH_DASHBOARD_STORE"):
        assert len(parent_name) >= 5 and len(under) >= 30, where
        assert "digits-rbm8 ais base-rate" in parent_name.values(), where
        assert under["digits-rbm8 ais base-rate K=10 seed=1"] == "digits-rbm8 ais base-rate", where
        assert "1.5min" in text, where  # the training runs' 90 s
        assert not re.search(r"\b\d+ms\b", text), where  # no run lasts the ~60 ms of logging
        assert reasons == [tracking.flag_reason([FLAG])], reasons
    for reason in reasons:
        assert reason in text, (reason, where)  # the reason in words in the runs table, not only on a run's page

    shot = tmp_path / "dashboard.png"
    proc = _headless(chromium, url, tmp_path / "profile", f"--screenshot={shot}", budget_ms=25_000, size=(1900, 1300))
    assert shot.is_file() and shot.stat().st_size > 20_000, proc.stderr[-1500:]
    keep = Path(os.environ.get("LOGZBENCH_TEST_ARTIFACTS") or Path(tempfile.gettempdir()) / "logzbench-dashboard")
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy2(shot, keep / "dashboard.png")
    record_property("screenshot", str(keep / "dashboard.png"))
    print(f"\nMLflow dashboard screenshot: {shot} (kept as {keep / 'dashboard.png'})")
