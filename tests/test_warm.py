"""logzbench.warm: a job run on the warm server behaves as the same job run in its own process.

Each client is a separate Python process (as a Snakemake job's script is); the server is started
on demand in a private directory (``LOGZBENCH_WARM_DIR``) and stopped at the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def sleep_then_write(seconds: float, path: str) -> None:
    """A job target (imported by the server's child from this module): sleep, then write ``path``."""
    time.sleep(seconds)
    Path(path).write_text("done")


@pytest.fixture(scope="module")
def warm_env(tmp_path_factory):
    d = tmp_path_factory.mktemp("warm")
    env = dict(os.environ)
    env.update(LOGZBENCH_WARM_DIR=str(d), FOO="bar")
    env.pop("LOGZBENCH_WARM", None)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    yield env, d
    subprocess.run([sys.executable, "-c", "from logzbench.warm import stop_server; stop_server()"], env=env,
                   cwd=HERE, timeout=60)


def client(env, cwd, target, log, timeout=300, **kwargs):
    code = (f"from logzbench.warm import run_job; "
            f"run_job({target!r}, log={str(log)!r}, threads=1, **{json.dumps(kwargs)})")
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def server_log(d: Path) -> str:
    return "".join(p.read_text() for p in d.glob("*.log"))


def test_job_runs_on_the_server_with_the_callers_cwd_env_and_log(warm_env, tmp_path):
    env, d = warm_env
    log = tmp_path / "job.log"
    script = "echo out=$FOO; echo err >&2; pwd"
    proc = client(env, tmp_path, "subprocess:run", log, args=["sh", "-c", script])
    assert proc.returncode == 0, proc.stderr
    text = log.read_text()
    assert "out=bar" in text and "err" in text and str(tmp_path) in text  # C-level output goes to the log
    assert f"subprocess:run (log {log})" in server_log(d)  # it ran on the server
    assert list(d.glob("*.sock"))
    # the same job in its own process gives the same log
    local = tmp_path / "local.log"
    proc = client({**env, "LOGZBENCH_WARM": "0"}, tmp_path, "subprocess:run", local, args=["sh", "-c", script])
    assert proc.returncode == 0 and local.read_text() == text
    assert f"(log {local})" not in server_log(d)


def test_failed_job_exits_non_zero_with_its_traceback_in_the_log(warm_env, tmp_path):
    env, d = warm_env
    (tmp_path / "exists").mkdir()
    log = tmp_path / "job.log"
    proc = client(env, tmp_path, "os:makedirs", log, name="exists")  # relative to the client's cwd
    assert proc.returncode == 1
    assert "FileExistsError" in log.read_text() and str(log) in proc.stderr
    proc = client(env, tmp_path, "os:makedirs", log, name="new/dir")
    assert proc.returncode == 0 and (tmp_path / "new" / "dir").is_dir()


def test_bad_target_is_a_clear_error(warm_env, tmp_path):
    env, _ = warm_env
    log = tmp_path / "job.log"
    proc = client(env, tmp_path, "no_colon", log)
    assert proc.returncode == 1 and "is not 'module:function'" in log.read_text()


def test_cancelled_job_stops_its_process(warm_env, tmp_path):
    """SIGTERM to the client (Snakemake cancelling the job) reaches the job's process on the server."""
    env, d = warm_env
    log, out = tmp_path / "job.log", tmp_path / "out.txt"
    code = (f"from logzbench.warm import run_job; run_job('test_warm:sleep_then_write', log={str(log)!r}, "
            f"seconds=30, path={str(out)!r})")
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tmp_path)
    pid = None
    deadline = time.monotonic() + 120
    while pid is None and time.monotonic() < deadline:
        for line in server_log(d).splitlines():
            if line.startswith("job ") and f"(log {log})" in line:
                pid = int(line.split()[1].rstrip(":"))
        time.sleep(0.1)
    assert pid is not None, server_log(d)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) != 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the job's process {pid} still runs after its client was cancelled")
    assert not out.exists()


def test_stop_removes_the_socket(tmp_path):
    env = {**os.environ, "LOGZBENCH_WARM_DIR": str(tmp_path)}
    env.pop("LOGZBENCH_WARM", None)
    proc = client(env, tmp_path, "os:makedirs", tmp_path / "job.log", name="x")
    assert proc.returncode == 0 and list(tmp_path.glob("*.sock"))
    code = "from logzbench.warm import stop_server; print(stop_server()); print(stop_server())"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["True", "False"]
    assert not list(tmp_path.glob("*.sock"))
    deadline = time.monotonic() + 10
    while "stopped" not in server_log(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "stopped" in server_log(tmp_path)
