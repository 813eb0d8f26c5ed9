"""MLflow tracking: store created once, parallel writers, one live run per key."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

pytest.importorskip("mlflow", reason="mlflow is not installed; tracking tests need it")

from logzbench import tracking
from logzbench.tracking.retries import _retry

N_WRITERS = 8


def _uri(tmp_path: Path) -> str:
    return "sqlite:///" + str(tmp_path / "mlflow.db")


def _record(model="m", estimator="ais", K=100, init="uniform", seed=0, log_z=10.0, ess=50.0, chains=100):
    return {
        "model": model,
        "dataset": "digits",
        "estimator": estimator,
        "method": estimator,
        "K": K,
        "init": init,
        "seed": seed,
        "schedule": "linear",
        "chains": chains,
        "device": "cpu",
        "code_version": "test",
        "result": {
            "estimator": estimator,
            "log_z": log_z,
            "log_z_stderr": 0.1,
            "ess": ess,
            "n_chains": chains,
            "mean_log_likelihood": -20.0,
            "mean_log_likelihood_stderr": 0.5,
            "seconds": 1.5,
            "sweeps_per_second": 100.0,
            "n_sweeps": K,
            "total_sweeps": K * chains,
            "log_z_ci": [9.8, 10.2],
            "n_examples": 50,
            "settings": {},
        },
    }


def _writer(args):
    uri, seed, same_key = args
    rec = _record(seed=0 if same_key else seed, log_z=10.0 + seed)
    return tracking.log_estimate(rec, uri=uri, experiment_name="exp")


def test_resolve_tracking_uri(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.resolve_tracking_uri(None, workdir=tmp_path) == "sqlite:///" + str(tmp_path.resolve() / "mlflow.db")
    assert tracking.resolve_tracking_uri("sqlite:///x/y.db", workdir=tmp_path) == "sqlite:///" + str(
        tmp_path.resolve() / "x" / "y.db"
    )
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////abs/env.db")
    assert tracking.resolve_tracking_uri(None) == "sqlite:////abs/env.db"
    # an explicit URI (the config key) beats the environment
    assert tracking.resolve_tracking_uri("sqlite:////abs/cfg.db") == "sqlite:////abs/cfg.db"
    assert tracking.default_artifact_location("sqlite:////abs/cfg.db") == "file:///abs/mlartifacts"


def test_keys_are_deterministic():
    assert tracking.estimate_key("m", "ais", 100, "uniform", 0) == "estimate/m/ais/K100/uniform/seed0"
    assert tracking.estimate_key("m", "exact") == "estimate/m/exact/K-/-/seed-"
    assert tracking.train_key("m") == "train/m"


def test_init_store_idempotent(tmp_path):
    uri = _uri(tmp_path)
    a = tracking.init_store(uri, "exp")
    b = tracking.init_store(uri, "exp")
    assert a["experiment_id"] == b["experiment_id"]
    assert (tmp_path / "mlflow.db").exists()
    assert a["artifact_location"].startswith("file://")


@pytest.mark.start_first
def test_parallel_writers_all_recorded(tmp_path):
    uri = _uri(tmp_path)
    tracking.init_store(uri, "exp")
    ctx = mp.get_context("spawn")
    with ctx.Pool(N_WRITERS) as pool:
        ids = pool.map(_writer, [(uri, s, False) for s in range(N_WRITERS)])
    assert len(set(ids)) == N_WRITERS
    runs = tracking.find_runs(uri=uri, experiment_name="exp", kind="estimate")
    assert len(runs) == N_WRITERS
    keys = {r.data.tags[tracking.KEY_TAG] for r in runs}
    assert len(keys) == N_WRITERS
    for r in runs:
        assert {"log_z", "seconds", "ess", "mean_test_ll", "sweeps_per_second"} <= set(r.data.metrics)
        assert r.data.params["estimator"] == "ais" and r.data.params["code_version"] == "test"
        assert r.info.status == "FINISHED"


def test_parallel_writers_same_key_converge_to_one(tmp_path):
    uri = _uri(tmp_path)
    tracking.init_store(uri, "exp")
    ctx = mp.get_context("spawn")
    with ctx.Pool(3) as pool:
        pool.map(_writer, [(uri, s, True) for s in range(3)])
    runs = tracking.find_runs(tracking.estimate_key("m", "ais", 100, "uniform", 0), uri=uri, experiment_name="exp")
    assert len(runs) == 1


def test_writer_superseded_while_logging_keeps_one_run_and_does_not_fail(tmp_path):
    """The race of test_parallel_writers_same_key_converge_to_one, made deterministic: while one writer
    is still logging its run, a newer writer of the same key finishes and deletes it; the first writer's
    job must not fail, and one live run remains (the newer one)."""
    uri = _uri(tmp_path)
    tracking.init_store(uri, "exp")
    key = tracking.estimate_key("m", "ais", 100, "uniform", 0)
    with tracking.TrackingSession(uri, "exp") as slow:
        real = slow.client.set_terminated
        newer = {}

        def interleave(run_id, *args, **kwargs):
            if not newer:  # a concurrent writer logs the same key now and closes its session
                newer["id"] = tracking.log_run(key, uri=uri, experiment_name="exp", metrics={"log_z": 2.0})
            return real(run_id, *args, **kwargs)

        slow.client.set_terminated = interleave
        first = slow.log_run(key, metrics={"log_z": 1.0})
    assert newer["id"] != first
    runs = tracking.find_runs(key, uri=uri, experiment_name="exp")
    assert [r.info.run_id for r in runs] == [newer["id"]]
    assert runs[0].data.metrics["log_z"] == 2.0


def test_relogging_same_key_replaces(tmp_path):
    uri = _uri(tmp_path)
    tracking.init_store(uri, "exp")
    art = tmp_path / "w.npz"
    art.write_bytes(b"x")
    first = tracking.log_estimate(_record(log_z=1.0), uri=uri, experiment_name="exp", artifacts=[art])
    second = tracking.log_estimate(_record(log_z=2.0), uri=uri, experiment_name="exp", artifacts=[art])
    other = tracking.log_estimate(_record(seed=1), uri=uri, experiment_name="exp")
    assert len({first, second, other}) == 3
    runs = tracking.find_runs(uri=uri, experiment_name="exp")
    assert sorted(r.info.run_id for r in runs) == sorted([second, other])
    same = tracking.find_runs(tracking.estimate_key("m", "ais", 100, "uniform", 0), uri=uri, experiment_name="exp")
    assert [r.info.run_id for r in same] == [second]
    assert same[0].data.metrics["log_z"] == 2.0
    client = tracking.get_client(uri)
    assert [a.path for a in client.list_artifacts(second)] == ["w.npz"]


def test_log_run_creates_missing_store(tmp_path):
    uri = _uri(tmp_path / "sub")
    run_id = tracking.log_run("k1", uri=uri, experiment_name="fresh", params={"a": 1}, metrics={"x": 1.0, "y": None})
    runs = tracking.find_runs("k1", uri=uri, experiment_name="fresh")
    assert [r.info.run_id for r in runs] == [run_id]
    assert runs[0].data.metrics == {"x": 1.0}


def test_training_run_per_epoch_metrics(tmp_path):
    uri = _uri(tmp_path)
    tracking.init_store(uri, "exp")
    history = [{"epoch": e, "reconstruction_error_train": 1.0 / e, "seconds": 0.1, "note": "x"} for e in (1, 2, 3)]
    run_id = tracking.log_training(
        "m",
        hyperparams={"n_hidden": 8, "method": "cd"},
        history=history,
        summary={"final_reconstruction_error_train": 1 / 3},
        uri=uri,
        experiment_name="exp",
        dataset="digits",
    )
    client = tracking.get_client(uri)
    hist = client.get_metric_history(run_id, "reconstruction_error_train")
    assert sorted(m.step for m in hist) == [1, 2, 3]
    run = client.get_run(run_id)
    assert run.data.params["n_hidden"] == "8" and run.data.tags[tracking.KIND_TAG] == "train"
    # re-logging the same model replaces the run
    tracking.log_training("m", hyperparams={"n_hidden": 8}, history=history, uri=uri, experiment_name="exp")
    assert len(tracking.find_runs(tracking.train_key("m"), uri=uri, experiment_name="exp")) == 1


def test_estimate_flags_and_set_flags(tmp_path):
    assert tracking.estimate_flags(_record(ess=5.0, chains=100))
    assert not tracking.estimate_flags(_record(ess=50.0, chains=100))
    uri = _uri(tmp_path)
    tracking.init_store(uri, "exp")
    tracking.log_estimate(_record(ess=5.0), uri=uri, experiment_name="exp")
    tracking.log_estimate(_record(seed=1), uri=uri, experiment_name="exp")
    k0 = tracking.estimate_key("m", "ais", 100, "uniform", 0)
    k1 = tracking.estimate_key("m", "ais", 100, "uniform", 1)
    (r0,) = tracking.find_runs(k0, uri=uri, experiment_name="exp")
    assert r0.data.tags[tracking.FLAGGED_TAG] == "true" and "low ESS" in r0.data.tags[tracking.FLAG_TAG]
    tracking.log_estimate(_record(seed=2, ess=1.0), uri=uri, experiment_name="exp")  # not in the report
    n = tracking.set_flags({k0: [], k1: ["AIS-RAISE gap 3 nats"]}, uri=uri, experiment_name="exp")
    assert n == 1
    (r0,) = tracking.find_runs(k0, uri=uri, experiment_name="exp")
    (r1,) = tracking.find_runs(k1, uri=uri, experiment_name="exp")
    assert r1.data.tags[tracking.FLAG_TAG] == "AIS-RAISE gap 3 nats"
    assert r1.data.tags[tracking.FLAGGED_TAG] == "true"
    assert r0.data.tags[tracking.FLAGGED_TAG] == "false" and tracking.FLAG_TAG not in r0.data.tags
    (r2,) = tracking.find_runs(tracking.estimate_key("m", "ais", 100, "uniform", 2), uri=uri, experiment_name="exp")
    assert r2.data.tags[tracking.FLAGGED_TAG] == "true"  # untouched


def test_retry_on_locked():
    calls = {"n": 0}

    def flaky():
        calls["n"] += 1
        if calls["n"] < 3:
            raise RuntimeError("(sqlite3.OperationalError) database is locked")
        return "ok"

    assert _retry(flaky, base_delay=0.001) == "ok" and calls["n"] == 3
    with pytest.raises(ValueError):
        _retry(lambda: (_ for _ in ()).throw(ValueError("other")), base_delay=0.001)


def test_every_trial_is_recorded(tmp_path):
    """A repeated-trials setting is one run; every trial's estimate, error and s.e. is a metric step."""
    from logzbench import trials

    uri = _uri(tmp_path)
    tracking.init_store(uri, "exp")
    df = trials.gaussian_trials(0.5, n=200, n_trials=4, seed=3)
    summary = trials.summarize_trials(df)
    run_id = tracking.log_trials(
        "gaussian", {"sigma0": 0.5}, df, summary, uri=uri, experiment_name="exp", params={"n": 200}
    )
    client = tracking.get_client(uri)
    for method in ("is", "ris", "ds"):
        hist = sorted(client.get_metric_history(run_id, f"error/{method}"), key=lambda m: m.step)
        want = df[df["method"] == method].sort_values("trial")["error"].to_numpy()
        assert [m.step for m in hist] == [0, 1, 2, 3]
        assert [m.value for m in hist] == pytest.approx(list(want))
    run = client.get_run(run_id)
    ds = summary[summary["method"] == "ds"].iloc[0]
    assert run.data.metrics["bias/ds"] == pytest.approx(ds["bias"]) and run.data.metrics["mse/ds"] == pytest.approx(
        ds["mse"]
    )
    assert run.data.params["sigma0"] == "0.5" and run.data.tags[tracking.KIND_TAG] == "trials"
    # re-logging the same setting replaces the run
    tracking.log_trials("gaussian", {"sigma0": 0.5}, df, summary, uri=uri, experiment_name="exp")
    assert (
        len(tracking.find_runs(tracking.trials_key("gaussian", {"sigma0": 0.5}), uri=uri, experiment_name="exp")) == 1
    )
