"""An MLflow tracking server on PostgreSQL (logzbench.tracking.server) under the workflow's jobs.

A throwaway PostgreSQL cluster (tests/pg_fixture.py) and one ``mlflow server`` on it serve the
module.  Default run: 16 parallel estimate jobs (the workflow's, through logzbench.pipeline.warm as
Snakemake runs them) leave exactly one live run per setting, rows of the server's PostgreSQL
database (one test uses the server, so that pytest-xdist starts only one); an unreachable server
fails a job after bounded retries with an error naming the URI.  Slow (``-m slow``): the 16 jobs
three rounds over; the Snakemake workflow against a server started with
``python -m logzbench.tracking.server``, stopped midway (a clear error in Snakemake's log) and
started again (the rerun completes, no run duplicated).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mlflow", reason="mlflow is not installed; tracking tests need it")

import pg_fixture
from conftest import model_samples, random_rbm

from logzbench import tracking
from logzbench.errors import TrackingError
from logzbench.tracking.retries import _is_locked_error, _retry
from logzbench.tracking.server import TrackingServer, check_backend_store_uri, free_port, server_command

REPO = Path(__file__).resolve().parents[1]
N_JOBS = 16
SEEDS = (0, 1)  # settings per job: one AIS sweep over two seeds
ROUNDS = 3
LOAD_EXPERIMENT = "load"


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.setdefault("LOGZBENCH_DATA_MIRROR", str(REPO.parent / "shared" / "data"))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def postgres():
    reason = pg_fixture.unavailable_reason()
    if reason:
        pytest.skip(reason)
    pytest.importorskip(
        "psycopg2", reason="psycopg2 (package psycopg2-binary, a dependency) is needed for MLflow's PostgreSQL store"
    )
    with pg_fixture.PostgresCluster() as cluster:
        yield cluster


@pytest.fixture(scope="module")
def booting_server(postgres, tmp_path_factory):
    """The module's server, started but perhaps not answering yet (it boots while other tests run)."""
    root = tmp_path_factory.mktemp("server")
    srv = TrackingServer(postgres.createdb("mlflow"), root / "mlartifacts", workers=1, log=root / "server.log")
    srv.t0 = time.monotonic()
    srv.start(wait=False)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def server(booting_server):
    srv = booting_server.wait()
    print(f"MLflow server on PostgreSQL answers {time.monotonic() - srv.t0:.1f} s after its start: {srv.uri}")
    return srv


@pytest.fixture
def server_boots_meanwhile(request):
    """Start the module's server in the background where PostgreSQL is available (a test that only
    waits lends it the time); nothing where it is not, nor under pytest-xdist (the test using the
    server may run in another worker)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    try:
        request.getfixturevalue("booting_server")
    except pytest.skip.Exception:
        pass


def _bounded_http_defaults(monkeypatch) -> None:
    """No MLFLOW_HTTP_* in the environment (so our defaults apply), restored after the test."""
    for k in tracking.HTTP_DEFAULTS:
        monkeypatch.setenv(k, "x")
        monkeypatch.delenv(k)


# --------------------------------------------------------------------------- URIs and settings
def test_http_uris_are_kept_and_a_bare_host_port_is_refused(tmp_path):
    assert tracking.resolve_tracking_uri("http://127.0.0.1:5000/") == "http://127.0.0.1:5000"
    assert tracking.resolve_tracking_uri("https://mlflow.example.org") == "https://mlflow.example.org"
    assert tracking.is_http_uri("HTTP://x:1") and not tracking.is_http_uri("sqlite:///x.db")
    with pytest.raises(TrackingError, match=r"has no scheme.*http://localhost:5000"):
        tracking.resolve_tracking_uri("localhost:5000")
    # a relative path still is a SQLite file
    assert tracking.resolve_tracking_uri("x.db", workdir=tmp_path) == "sqlite:///" + str(tmp_path.resolve() / "x.db")


def test_http_retries_are_bounded_unless_the_environment_says_otherwise(monkeypatch):
    import mlflow

    _bounded_http_defaults(monkeypatch)
    monkeypatch.setattr(mlflow, "MlflowClient", lambda tracking_uri: tracking_uri)  # no store is opened
    assert tracking.get_client("sqlite:////nonexistent/x.db") == "sqlite:////nonexistent/x.db"
    assert not any(k in os.environ for k in tracking.HTTP_DEFAULTS)  # SQLite: untouched
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    assert tracking.get_client("http://127.0.0.1:1/") == "http://127.0.0.1:1"
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "1"  # the user's value wins
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == tracking.HTTP_DEFAULTS["MLFLOW_HTTP_REQUEST_TIMEOUT"]


def test_backend_store_uri_checks(monkeypatch, tmp_path):
    assert check_backend_store_uri("sqlite:///x.db") == "sqlite:///x.db"
    with pytest.raises(TrackingError, match="not a database URI"):
        check_backend_store_uri("/var/lib/mlflow")
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "psycopg2" else real(name, *a))
    with pytest.raises(TrackingError, match="pip install psycopg2-binary"):
        check_backend_store_uri("postgresql://u@h/db")
    cmd = server_command("sqlite:///x.db", tmp_path / "art", host="0.0.0.0", port=5001, workers=3)
    assert cmd[1:4] == ["-m", "mlflow", "server"] and "--allowed-hosts" in cmd
    assert cmd[cmd.index("--artifacts-destination") + 1] == str((tmp_path / "art").resolve())
    assert "--allowed-hosts" not in server_command("sqlite:///x.db", tmp_path / "art", port=5001)


def test_the_former_command_name_still_starts_the_server():
    """``python -m logzbench.tracking_server`` runs ``python -m logzbench.tracking.server`` (a note on stderr)."""
    new, old = (
        subprocess.run(
            [sys.executable, "-m", module, "--help"], capture_output=True, text=True, env=_clean_env(), timeout=120
        )
        for module in ("logzbench.tracking.server", "logzbench.tracking_server")
    )
    assert new.returncode == old.returncode == 0, new.stderr + old.stderr
    assert old.stdout == new.stdout and "--backend-store-uri" in new.stdout and not new.stderr
    assert "python -m logzbench.tracking.server" in old.stderr


def test_transient_store_errors_are_retried_and_real_conflicts_are_not():
    """Concurrent upserts of one row on PostgreSQL (16 jobs creating the experiment's tags at once)
    are retried; an experiment name that exists, or any other error, is not."""
    race = (
        "BAD_REQUEST: (psycopg2.errors.UniqueViolation) duplicate key value violates unique constraint "
        '"experiment_tag_pk"\nDETAIL:  Key (key, experiment_id)=(mlflow.experimentKind, 1) already exists.'
    )
    for text in (
        race,
        "(psycopg2.errors.DeadlockDetected) deadlock detected",
        "FATAL: sorry, too many clients already",
        "(sqlite3.OperationalError) database is locked",
    ):
        assert _is_locked_error(RuntimeError(text)), text
    for text in (
        "RESOURCE_ALREADY_EXISTS: Experiment(name=x) already exists. Error: (psycopg2.errors.UniqueViolation) "
        "duplicate key value violates unique constraint",
        "INVALID_PARAMETER_VALUE: bad metric",
    ):
        assert not _is_locked_error(RuntimeError(text)), text
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError(race)
        return "ok"

    assert _retry(flaky, base_delay=0.001) == "ok" and len(calls) == 3


# --------------------------------------------------------------------------- unreachable server
def test_unreachable_server_error_names_the_uri_and_honours_the_environment(monkeypatch):
    uri = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    t0 = time.monotonic()
    with pytest.raises(TrackingError) as err:
        tracking.log_run("k", uri=uri, experiment_name="x", metrics={"a": 1.0})
    assert time.monotonic() - t0 < 10
    msg = str(err.value)
    assert f"MLflow tracking server {uri} is unreachable (connection refused" in msg
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES=0" in msg and "tracking.uri" in msg
    # a password in the URI is not shown
    with pytest.raises(TrackingError) as err:
        tracking.find_runs(uri=f"http://user:secret@127.0.0.1:{free_port()}", experiment_name="x")
    assert "secret" not in str(err.value) and "user:***@127.0.0.1" in str(err.value)


def _tiny_model(d: Path) -> tuple[Path, Path]:
    rbm = random_rbm(12, 8, seed=0, scale=0.5)
    from logzbench.models import save_model

    save_model(rbm, d / "tiny.npz")
    rows = model_samples(rbm, 60, seed=1, sweeps=20).numpy().astype(np.uint8)
    np.savez(d / "tiny-data.npz", train=rows[:40], test=rows[40:])
    return d / "tiny.npz", d / "tiny-data.npz"


def _settings(model: str) -> list[dict]:
    return [
        {
            "model": model,
            "dataset": "tiny-data",
            "device": "cpu",
            "n_visible": 12,
            "family": "rbm",
            "hidden_sizes": [8],
            "n_hidden": 8,
            "estimator": "ais",
            "method": "ais",
            "K": 5,
            "init": "uniform",
            "seed": s,
            "schedule": "linear",
            "chains": 10,
            "n_examples": None,
        }
        for s in SEEDS
    ]


#: one workflow estimate job, as workflow/scripts/estimate.py runs it (arguments from a JSON file)
_JOB = (
    "import json, sys, time\nfrom logzbench.pipeline.warm import run_job\na = json.load(open(sys.argv[1]))\n"
    "t0 = time.time()\n"
    "run_job('logzbench.pipeline.jobs:run_estimate_sweep', log=a.pop('log'), threads=1, warm=a.pop('warm'), **a)\n"
    "print('job interval', t0, time.time())\n"
)


def _job_args(d: Path, j: int, model: Path, data: Path, uri: str, experiment: str, warm: bool) -> Path:
    args = {
        "settings": _settings(f"load{j:02d}"),
        "model": str(model),
        "data": str(data),
        "out_dir": str(d / f"job{j:02d}"),
        "tracking": {"enabled": True, "uri": uri, "experiment": experiment},
        "ess_fraction": 0.1,
        "progress": False,
        "log": str(d / f"job{j:02d}.log"),
        "warm": warm,
    }
    path = d / f"job{j:02d}.json"
    path.write_text(json.dumps(args))
    return path


def test_unreachable_server_fails_the_job_within_bounded_time(tmp_path, monkeypatch, server_boots_meanwhile):
    """An estimate job (our default retry settings) on a closed port fails in well under a minute with
    an error naming the URI, and writes no record.  (The module's server boots meanwhile.)"""
    from logzbench.pipeline.jobs import run_estimate_sweep

    _bounded_http_defaults(monkeypatch)
    model, data = _tiny_model(tmp_path)
    uri = f"http://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(TrackingError) as err:
        run_estimate_sweep(
            _settings("down"),
            model=model,
            data=data,
            out_dir=tmp_path / "out",
            tracking={"enabled": True, "uri": uri, "experiment": "x"},
            log=lambda msg: None,
        )
    seconds = time.monotonic() - t0
    print(f"unreachable server: the job failed after {seconds:.1f} s: {err.value}")
    assert seconds < 60
    assert f"MLflow tracking server {uri} is unreachable (connection refused" in str(err.value)
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES=4" in str(err.value)  # our bound; MLflow's 7 take about 4 minutes
    assert not list((tmp_path / "out").glob("*.json"))


# --------------------------------------------------------------------------- the server under load
def _check_postgres_store(server, postgres, experiment: str, run_ids: set[str]) -> None:
    """The runs (``run_ids``: the estimates' and their sweeps' parents') are the live rows of the server's
    PostgreSQL database; the experiment's artifacts go through the server (mlflow-artifacts:/) to its artifact
    root; init_store on the live server is idempotent."""
    import psycopg2

    info = tracking.init_store(server.uri + "/", experiment)
    assert info["uri"] == server.uri
    db = server.backend_store_uri.rsplit("/", 1)[1]
    with psycopg2.connect(host="127.0.0.1", port=postgres.port, user=pg_fixture.PG_USER, dbname=db) as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT experiment_id, artifact_location FROM experiments WHERE name = %s", (experiment,))
            ((exp_id, location),) = cur.fetchall()
            cur.execute(
                "SELECT run_uuid, status FROM runs WHERE experiment_id = %s AND lifecycle_stage = 'active'", (exp_id,)
            )
            live = dict(cur.fetchall())
    assert str(exp_id) == info["experiment_id"]
    assert set(live) == run_ids and set(live.values()) == {"FINISHED"}
    assert location.startswith("mlflow-artifacts:")
    assert list(Path(server.artifacts_destination).rglob("*.npz"))


def _round(d: Path, jobs: list[Path], env: dict[str, str]) -> tuple[float, int]:
    """Run the jobs at once; (seconds, the most jobs running at one moment)."""
    t0 = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _JOB, str(a)],
            env=env,
            cwd=d,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for a in jobs
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    failed = [
        (a, p.returncode, o, Path(str(a).replace(".json", ".log")).read_text(errors="replace")[-3000:])
        for a, p, o in zip(jobs, procs, outs)
        if p.returncode != 0
    ]
    assert not failed, failed[0]
    spans = [tuple(map(float, re.search(r"job interval (\S+) (\S+)", o).groups())) for o in outs]
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return time.monotonic() - t0, most


@pytest.mark.parametrize("rounds", [1, pytest.param(ROUNDS, marks=pytest.mark.slow)])
def test_sixteen_parallel_estimate_jobs(server, postgres, tmp_path, rounds):
    """16 estimate jobs at once (2 settings each) against the server, ``rounds`` times: after every
    round exactly one live run per setting (32), each the round's own, FINISHED with its metrics and
    its artifact; the earlier rounds' runs are deleted, none lost."""
    from mlflow.entities import ViewType

    experiment = f"{LOAD_EXPERIMENT}-{rounds}"

    model, data = _tiny_model(tmp_path)
    warm_dir = tempfile.mkdtemp(prefix="lzw-")  # a short path for the warm server's Unix socket
    env = _clean_env(LOGZBENCH_WARM_DIR=warm_dir, OMP_NUM_THREADS="1")
    jobs = [_job_args(tmp_path, j, model, data, server.uri, experiment, warm=True) for j in range(N_JOBS)]
    expected = {tracking.estimate_key(f"load{j:02d}", "ais", 5, "uniform", s) for j in range(N_JOBS) for s in SEEDS}
    client = tracking.get_client(server.uri)
    seen: set[str] = set()
    parent_ids: set[str] = set()
    try:
        for r in range(rounds):
            seconds, parallel = _round(tmp_path, jobs, env)
            runs = tracking.find_runs(uri=server.uri, experiment_name=experiment, kind="estimate")
            keys = Counter(run.data.tags[tracking.KEY_TAG] for run in runs)
            ids = {run.info.run_id for run in runs}
            recorded = {json.loads(p.read_text())["mlflow_run_id"] for p in tmp_path.glob("job*/*.json")}
            exp = client.get_experiment_by_name(experiment)
            deleted = client.search_runs([exp.experiment_id], run_view_type=ViewType.DELETED_ONLY, max_results=1000)
            print(
                f"round {r + 1}: {N_JOBS} jobs in {seconds:.1f} s, {len(runs)} live runs "
                f"({len(keys)} keys, at most {max(keys.values())} per key), {len(deleted)} deleted, "
                f"up to {parallel} jobs running at once"
            )
            assert parallel >= N_JOBS // 2  # the jobs really ran at the same time
            assert len(runs) == len(expected) == N_JOBS * len(SEEDS)
            assert set(keys) == expected and set(keys.values()) == {1}
            assert ids == recorded and not ids & seen
            assert len(deleted) == r * len(expected) and {d.info.run_id for d in deleted} == seen
            seen |= ids
            for run in runs:
                assert run.info.status == "FINISHED" and {"log_z", "ess", "seconds"} <= set(run.data.metrics)
            # one parent run per job's sweep (one model each), created in the first round and reused after
            parents = tracking.find_runs(uri=server.uri, experiment_name=experiment, parents=True)
            assert sorted(p.info.run_name for p in parents) == sorted(f"load{j:02d} ais uniform" for j in range(N_JOBS))
            assert {run.data.tags["mlflow.parentRunId"] for run in runs} == {p.info.run_id for p in parents}
            assert r == 0 or {p.info.run_id for p in parents} == parent_ids
            parent_ids = {p.info.run_id for p in parents}
        arts = [a.path for a in client.list_artifacts(runs[0].info.run_id)]
        # the per-chain arrays, and the schedule the annealed run used (one beta per line)
        assert sorted(a.rsplit(".", 1)[-1] for a in arts) == ["npz", "txt"], arts
        _check_postgres_store(server, postgres, experiment, ids | parent_ids)
    finally:
        from logzbench.pipeline import warm

        os.environ["LOGZBENCH_WARM_DIR"], old = warm_dir, os.environ.get("LOGZBENCH_WARM_DIR")
        try:
            warm.stop_server()
            shutil.rmtree(warm_dir, ignore_errors=True)
        finally:
            if old is None:
                del os.environ["LOGZBENCH_WARM_DIR"]
            else:
                os.environ["LOGZBENCH_WARM_DIR"] = old


# --------------------------------------------------------------------------- the workflow against the server
SMALL_CONFIG = """\
description: tracking-server test (tests/test_tracking_server.py)
device: cpu
threads: {prepare: 1, train: 1, estimate: 1, exact: 1, report: 1}
tracking: {enabled: true, uri: null, experiment: logzbench-server}
datasets:
  digits: {source: digits, binarize: threshold, threshold: 0.5, seed: 0}
models:
  digits-rbm8:
    dataset: digits
    hyperparams: {n_hidden: 8, method: cd, k: 1, learning_rate: 0.05, batch_size: 50, n_epochs: 2, seed: 0}
    estimators: [exact, ais]
evaluation: {K: [10], inits: [uniform], seeds: [0, 1], exact_max_units: 20}
estimators:
  exact: {}
  ais: {chains: 20}
"""
WF_EXPERIMENT = "logzbench-server"
WF_KEYS = {
    "estimate/digits-rbm8/exact/K-/-/seed-",
    "estimate/digits-rbm8/ais/K10/uniform/seed0",
    "estimate/digits-rbm8/ais/K10/uniform/seed1",
}


def _snakemake(workdir: Path, uri: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--cores",
        "2",
        "--show-failed-logs",
        "--configfile",
        str(workdir / "small.yaml"),
        *args,
        "--config",
        f"tracking={{'uri': '{uri}'}}",
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=workdir)


def _start_cli_server(backend: str, art: Path, port: int, log: Path) -> subprocess.Popen:
    """``python -m logzbench.tracking.server ...`` as the README says; returns once it is ready."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "logzbench.tracking.server",
            "--backend-store-uri",
            backend,
            "--artifacts-destination",
            str(art),
            "--port",
            str(port),
            "--workers",
            "1",
            "--log",
            str(log),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_clean_env(),
    )
    first = proc.stdout.readline()
    assert first.startswith(f"MLflow tracking server ready: http://127.0.0.1:{port}"), first + proc.stdout.read()
    return proc


def _stop_cli_server(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0


@pytest.mark.slow
def test_workflow_against_the_server_stops_clearly_and_resumes(postgres, tmp_path):
    """The workflow on a small config against a server started from the command line: the model and
    one sweep's runs are logged; the server stops (and the sweep's outputs are lost); the workflow fails
    with the server's URI in Snakemake's log; the server starts again; the rerun completes the rest
    and every setting keeps exactly one run (the lost sweep's runs are replaced, not duplicated)."""
    (tmp_path / "small.yaml").write_text(SMALL_CONFIG)
    backend, port = postgres.createdb("workflow"), free_port()
    uri = f"http://127.0.0.1:{port}"
    warm_dir = tempfile.mkdtemp(prefix="lzw-")  # a short path for the warm server's Unix socket
    env = _clean_env(LOGZBENCH_WARM_DIR=warm_dir, PYTHONHASHSEED="0")
    art, log = tmp_path / "mlartifacts", tmp_path / "server.log"

    srv = _start_cli_server(backend, art, port, log)
    try:
        proc = _snakemake(tmp_path, uri, "--until", "estimate", env=env)
        assert proc.returncode == 0, proc.stderr[-5000:]
        first = tracking.find_runs(uri=uri, experiment_name=WF_EXPERIMENT, kind="estimate")
        assert len(first) == 3 and len(tracking.find_runs(uri=uri, experiment_name=WF_EXPERIMENT, kind="train")) == 1
    finally:
        _stop_cli_server(srv)
    shutil.rmtree(tmp_path / "results" / "estimates" / "digits-rbm8" / "ais")  # a sweep to redo: runs already logged

    t0 = time.monotonic()
    proc = _snakemake(tmp_path, uri, env=env)
    seconds = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    message = f"MLflow tracking server {uri} is unreachable (connection refused"
    assert message in out, out[-5000:]
    (snakelog,) = sorted((tmp_path / ".snakemake" / "log").glob("*.snakemake.log"))[-1:]
    assert message in snakelog.read_text()
    print(
        f"workflow with the server down: failed after {seconds:.0f} s; Snakemake's log: "
        + next(line.strip() for line in snakelog.read_text().splitlines() if message in line)[:300]
    )

    srv = _start_cli_server(backend, art, port, log)
    try:
        proc = _snakemake(tmp_path, uri, env=env)
        assert proc.returncode == 0, proc.stderr[-5000:]
        est = tracking.find_runs(uri=uri, experiment_name=WF_EXPERIMENT, kind="estimate")
        keys = Counter(r.data.tags[tracking.KEY_TAG] for r in est)
        assert set(keys) == WF_KEYS and set(keys.values()) == {1}
        assert len(tracking.find_runs(uri=uri, experiment_name=WF_EXPERIMENT, kind="train")) == 1
        assert len(tracking.find_runs(uri=uri, experiment_name=WF_EXPERIMENT, kind="report")) == 1
        exact_before = {r.info.run_id for r in first if "/exact/" in r.data.tags[tracking.KEY_TAG]}
        exact_after = {r.info.run_id for r in est if "/exact/" in r.data.tags[tracking.KEY_TAG]}
        assert exact_before == exact_after  # the finished sweep was not redone
        records = {
            json.loads(p.read_text())["mlflow_run_id"]
            for p in (tmp_path / "results" / "estimates" / "digits-rbm8").rglob("*.json")
        }
        assert records == {r.info.run_id for r in est}
        assert "Nothing to be done" in (lambda p: p.stdout + p.stderr)(_snakemake(tmp_path, uri, "-n", env=env))
    finally:
        _stop_cli_server(srv)
        shutil.rmtree(warm_dir, ignore_errors=True)
    assert re.search(r"Uvicorn running|Listening at", log.read_text())


def test_server_log_outside_the_working_tree(tmp_path, monkeypatch):
    """By default the server's output goes to the user's state directory, not beside the artifact
    root (the working directory, often a checkout); ``log=`` still puts it where asked."""
    state, work = tmp_path / "state", tmp_path / "checkout"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    srv = TrackingServer("sqlite:///" + str(work / "mlflow.db"), work / "mlartifacts", port=5999)
    assert srv.log == state / "logzbench" / "mlflow-server-5999.log"
    assert work not in srv.log.parents
    assert TrackingServer("sqlite:///x.db", work / "mlartifacts", port=5999, log=work / "s.log").log == work / "s.log"
