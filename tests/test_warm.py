"""logzbench.pipeline.warm: a job run on the warm server behaves as the same job run in its own process.

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


def write_attributes(path: str) -> None:
    """A job target: write a file (its mode shows the umask) holding the process's umask, nice
    value, CPU affinity, open-file limit and pid."""
    import resource

    mask = os.umask(0)
    os.umask(mask)
    Path(path).write_text(
        json.dumps(
            {
                "umask": mask,
                "nice": os.getpriority(os.PRIO_PROCESS, 0),
                "affinity": sorted(os.sched_getaffinity(0)),
                "nofile": list(resource.getrlimit(resource.RLIMIT_NOFILE)),
                "pid": os.getpid(),
            }
        )
    )


def allocate_and_spin(mib: int, seconds: float) -> None:
    """A job target: hold ``mib`` MiB (every page touched) while computing for ``seconds`` of CPU time."""
    block = bytearray(mib << 20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    t0 = time.process_time()
    while time.process_time() - t0 < seconds:
        sum(range(10_000))


#: the test jobs a test server may run besides the package's (logzbench.pipeline.warm.ENV_EXTRA_JOBS)
EXTRA_JOBS = (
    "subprocess:run,os:makedirs,os:_exit,no_colon,test_warm:sleep_then_write,test_warm:write_attributes,"
    "test_warm:allocate_and_spin"
)


@pytest.fixture(scope="module")
def warm_env(tmp_path_factory):
    d = tmp_path_factory.mktemp("warm")
    env = dict(os.environ)
    env.update(LOGZBENCH_WARM_DIR=str(d), FOO="bar", LOGZBENCH_WARM_EXTRA_JOBS=EXTRA_JOBS)
    env.pop("LOGZBENCH_WARM", None)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    yield env, d
    subprocess.run(
        [sys.executable, "-c", "from logzbench.pipeline.warm import stop_server; stop_server()"],
        env=env,
        cwd=HERE,
        timeout=60,
    )


def client(env, cwd, target, log, timeout=300, **kwargs):
    code = (
        f"from logzbench.pipeline.warm import run_job; "
        f"run_job({target!r}, log={str(log)!r}, threads=1, **{json.dumps(kwargs)})"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


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


def test_the_jobs_own_usage_reaches_the_benchmarks(warm_env, tmp_path):
    """A forked job's own process is measured (its rusage as the server reaps it), not the client's: its peak
    memory and CPU time are written beside the rule's benchmark (<benchmark>.job.tsv); the same job in the
    client's own process writes the same columns."""
    from logzbench.pipeline.usage import USAGE_COLUMNS, job_usage_file, read_usage

    env, d = warm_env
    log = tmp_path / "results" / "logs" / "estimate" / "m" / "ais.log"
    log.parent.mkdir(parents=True)
    usage = job_usage_file(log)
    assert usage == str(tmp_path / "results" / "benchmarks" / "estimate" / "m" / "ais.job.tsv")
    proc = client(env, tmp_path, "test_warm:allocate_and_spin", log, mib=200, seconds=1.0, usage=usage)
    assert proc.returncode == 0, proc.stderr
    assert "test_warm:allocate_and_spin" in server_log(d)  # it ran forked from the server
    row = read_usage(usage)
    assert tuple(row) == USAGE_COLUMNS and row["warm"] == "True"
    assert float(row["max_rss"]) >= 200  # MiB: the job's, not the thin client's
    assert float(row["cpu_time"]) >= 0.9 and float(row["s"]) >= float(row["cpu_time"]) * 0.5
    assert f"job {row['pid']}: test_warm:allocate_and_spin" in server_log(d)  # the forked process's own
    local = tmp_path / "local.job.tsv"
    proc = client(
        {**env, "LOGZBENCH_WARM": "0"},
        tmp_path,
        "test_warm:allocate_and_spin",
        tmp_path / "local.log",
        mib=50,
        seconds=0.2,
        usage=str(local),
    )
    assert proc.returncode == 0, proc.stderr
    row = read_usage(local)
    assert row["warm"] == "False" and float(row["max_rss"]) >= 50 and float(row["cpu_time"]) >= 0.2


def test_usage_file_names_follow_the_logs():
    from logzbench.pipeline.usage import benchmark_file, job_usage_file, log_file

    for name in ("estimate/{model}/{estimator}", "prepare/digits", "report", "trials/grid"):
        bench = benchmark_file("results", name)
        assert job_usage_file(log_file("results", name)) == bench[: -len(".tsv")] + ".job.tsv"
    assert job_usage_file("elsewhere/job.log") is None and job_usage_file("results/logs/x.txt") is None


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
    code = (
        f"from logzbench.pipeline.warm import run_job; run_job('test_warm:sleep_then_write', log={str(log)!r}, "
        f"seconds=30, path={str(out)!r})"
    )
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


def test_a_socket_path_at_the_limit_still_serves(tmp_path):
    """A socket address of 107 bytes (the most a Unix socket path may have) still gets a server: it
    binds under a temporary name no longer than the address, whatever its pid's digits."""
    env = {**os.environ, "LOGZBENCH_WARM_EXTRA_JOBS": EXTRA_JOBS}
    env.pop("LOGZBENCH_WARM", None)
    code = "from logzbench.pipeline.warm import server_address; print(server_address().name)"
    name = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "LOGZBENCH_WARM_DIR": str(tmp_path / "probe")},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    pad = 107 - len(str(tmp_path)) - 2 - len(name)
    if pad < 1:
        pytest.skip(f"the temporary directory's path is too long for this test ({tmp_path})")
    d = tmp_path / ("w" * pad)
    env["LOGZBENCH_WARM_DIR"] = str(d)
    try:
        proc = client(env, tmp_path, "os:makedirs", tmp_path / "job.log", name="x")
        assert proc.returncode == 0 and "in this process" not in proc.stderr, proc.stderr
        assert [len(str(p)) for p in d.glob("*.sock")] == [107]
    finally:
        subprocess.run(
            [sys.executable, "-c", "from logzbench.pipeline.warm import stop_server; stop_server()"],
            env=env,
            timeout=60,
        )


def test_stop_removes_the_socket(tmp_path):
    env = {**os.environ, "LOGZBENCH_WARM_DIR": str(tmp_path), "LOGZBENCH_WARM_EXTRA_JOBS": EXTRA_JOBS}
    env.pop("LOGZBENCH_WARM", None)
    proc = client(env, tmp_path, "os:makedirs", tmp_path / "job.log", name="x")
    assert proc.returncode == 0 and list(tmp_path.glob("*.sock"))
    code = "from logzbench.pipeline.warm import stop_server; print(stop_server()); print(stop_server())"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["True", "False"]
    assert not list(tmp_path.glob("*.sock"))
    deadline = time.monotonic() + 10
    while "stopped" not in server_log(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "stopped" in server_log(tmp_path)


# --------------------------------------------------------------------------- issue 22
def test_only_registered_jobs_run_on_the_server(warm_env, tmp_path):
    """A target that is not a registered job runs in the caller's own process, never on the server."""
    env, d = warm_env
    log = tmp_path / "job.log"
    plain = {k: v for k, v in env.items() if k != "LOGZBENCH_WARM_EXTRA_JOBS"}
    proc = client(plain, tmp_path, "os:makedirs", log, name="here")
    assert proc.returncode == 0 and (tmp_path / "here").is_dir()
    assert f"(log {log})" not in server_log(d)


@pytest.mark.parametrize("code, status", [(0, 0), (3, 3)])
def test_exit_status_of_os_exit_is_the_jobs(warm_env, tmp_path, code, status):
    """``os._exit`` in a job ends its process without Python's cleanup: the status the server's
    waitpid sees goes back to the caller, as in a job run in its own process."""
    env, d = warm_env
    log = tmp_path / "job.log"
    proc = client(env, tmp_path, "os:_exit", log, status=code)
    assert proc.returncode == status, proc.stderr
    assert f"os:_exit (log {log})" in server_log(d)  # it ran on the server
    cold = client({**env, "LOGZBENCH_WARM": "0"}, tmp_path, "os:_exit", log, status=code)
    assert cold.returncode == status


@pytest.mark.parametrize("umask, nice", [(0o077, 0), (0o022, 0), (0o002, 3)])
def test_job_has_its_callers_umask_nice_affinity_and_limits(warm_env, tmp_path, umask, nice):
    """Each caller's umask, nice value, CPU affinity and resource limits reach its job, whatever
    the caller that started a server had (the attributes are part of the server's key)."""
    env, d = warm_env
    out, log = tmp_path / "attrs.json", tmp_path / "job.log"
    cpus = sorted(os.sched_getaffinity(0))
    code = (
        f"import os, resource; os.nice({nice}); os.sched_setaffinity(0, {cpus[-1:]!r}); "
        f"resource.setrlimit(resource.RLIMIT_NOFILE, (777, resource.getrlimit(resource.RLIMIT_NOFILE)[1])); "
        f"from logzbench.pipeline.warm import run_job; run_job('test_warm:write_attributes', log={str(log)!r}, "
        f"path={str(out)!r})"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, umask=umask
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(out.read_text())
    assert f"test_warm:write_attributes (log {log})" in server_log(d)  # on the server
    assert got["umask"] == umask and out.stat().st_mode & 0o777 == 0o666 & ~umask
    assert got["nice"] == os.getpriority(os.PRIO_PROCESS, 0) + nice
    assert got["affinity"] == cpus[-1:]
    assert got["nofile"][0] == 777


def test_unusable_warm_directory_runs_the_job_in_its_own_process(tmp_path):
    """A warm directory that is not a private directory of this user -- here a regular file, or a
    directory open to others -- is never used: the job runs in its own process after one line."""
    (tmp_path / "file").write_text("")
    (tmp_path / "open").mkdir()
    os.chmod(tmp_path / "open", 0o777)
    for warm_dir, why in [(tmp_path / "file", "not a directory"), (tmp_path / "open", "not 0700")]:
        env = {**os.environ, "LOGZBENCH_WARM_DIR": str(warm_dir), "LOGZBENCH_WARM_EXTRA_JOBS": EXTRA_JOBS}
        env.pop("LOGZBENCH_WARM", None)
        made = tmp_path / f"made-{warm_dir.name}"
        proc = client(env, tmp_path, "os:makedirs", tmp_path / "job.log", name=str(made))
        assert proc.returncode == 0 and made.is_dir(), proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "running the job in this process" in lines[0] and why in lines[0], proc.stderr
        assert not list(tmp_path.glob("open/*.sock"))
