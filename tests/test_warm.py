"""logzbench.pipeline.warm: a job run on the warm server behaves as the same job run in its own process.

Each client is a separate Python process (as a Snakemake job's script is); the server is started
on demand in a private directory (``LOGZBENCH_WARM_DIR``) and stopped at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
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


def sleep_then_append_pid(seconds: float, path: str) -> None:
    """A job target: sleep, then append the pid of the process that ran it to ``path``."""
    time.sleep(seconds)
    with open(path, "a") as f:
        f.write(f"{os.getpid()}\n")


def write_locale(path: str) -> None:
    """A job target: write what the process's locale decides (set at interpreter start from
    ``LC_*``/``LANG``): its LC_CTYPE locale, UTF-8 mode, preferred and stream encodings."""
    import locale

    Path(path).write_text(
        json.dumps(
            {
                "ctype": locale.setlocale(locale.LC_CTYPE),
                "utf8_mode": sys.flags.utf8_mode,
                "preferred": locale.getpreferredencoding(False),
                "stdout": sys.stdout.encoding,
            }
        )
    )


#: the test jobs a test server may run besides the package's (logzbench.pipeline.warm.ENV_EXTRA_JOBS)
EXTRA_JOBS = (
    "subprocess:run,os:makedirs,os:_exit,no_colon,test_warm:sleep_then_write,test_warm:write_attributes,"
    "test_warm:allocate_and_spin,test_warm:sleep_then_append_pid,test_warm:write_locale"
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


def test_stop_removes_the_socket(short_dir, tmp_path):
    d = short_dir
    env = {**os.environ, "LOGZBENCH_WARM_DIR": str(d), "LOGZBENCH_WARM_EXTRA_JOBS": EXTRA_JOBS}
    env.pop("LOGZBENCH_WARM", None)
    proc = client(env, tmp_path, "os:makedirs", tmp_path / "job.log", name="x")
    assert proc.returncode == 0 and list(d.glob("*.sock"))
    code = "from logzbench.pipeline.warm import stop_server; print(stop_server()); print(stop_server())"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["True", "False"]
    assert not list(d.glob("*.sock"))
    deadline = time.monotonic() + 10
    while "stopped" not in server_log(d) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "stopped" in server_log(d)


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


# --------------------------------------------------------------------------- issue 37
@pytest.fixture
def own_warm(short_dir):
    """A warm directory of the test's own (its servers are the test's to kill), stopped at the end."""
    d = short_dir / "warm"
    env = {**os.environ, "LOGZBENCH_WARM_DIR": str(d), "LOGZBENCH_WARM_EXTRA_JOBS": EXTRA_JOBS}
    env.pop("LOGZBENCH_WARM", None)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    yield env, d
    code = "from logzbench.pipeline.warm import stop_server; stop_server()"
    subprocess.run([sys.executable, "-c", code], env=env, cwd=HERE, timeout=60)


def _wait_for_line(d: Path, starts: str, contains: str = "", seconds: float = 180) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for line in server_log(d).splitlines():
            if line.startswith(starts) and contains in line:
                return line
        time.sleep(0.1)
    pytest.fail(f"no line {starts!r} ... {contains!r} in the server's log: {server_log(d)}")


def _ended(pid: int) -> bool:
    """Whether process ``pid`` has ended (reaped, or a zombie its new parent has not reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _one_fallback_line(stderr: str, why: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "running the job in this process" in lines[0] and why in lines[0], stderr


def test_a_socket_path_too_long_runs_the_job_here_at_once(tmp_path):
    """A warm directory whose socket path exceeds a Unix socket's 107 bytes: the socket could be bound
    (under a shorter name, then renamed) but never reached, so each job waited for a server nobody could
    connect to until it went idle (over a minute), then ran in its own process.  Now: one line naming
    the length and LOGZBENCH_WARM_DIR, no server started, the job run here."""
    d = tmp_path / ("w" * 110)
    env = {**os.environ, "LOGZBENCH_WARM_DIR": str(d), "LOGZBENCH_WARM_EXTRA_JOBS": EXTRA_JOBS}
    env.pop("LOGZBENCH_WARM", None)
    proc = client(env, tmp_path, "os:makedirs", tmp_path / "job.log", name="made")
    assert proc.returncode == 0 and (tmp_path / "made").is_dir(), proc.stderr
    _one_fallback_line(proc.stderr, "more than the 107 a Unix socket allows; set LOGZBENCH_WARM_DIR")
    assert not list(d.glob("*.sock")) and not list(d.glob("*.log"))  # no server was started


def test_server_killed_mid_job_runs_it_here_and_its_socket_is_replaced(own_warm, tmp_path):
    """A server killed (SIGKILL) while its job runs: the client stops the job's orphaned process and
    runs the job in its own process after one line (exit 0, the output written once, by the client);
    the dead server's socket is left behind, and the next job replaces it with a new server."""
    env, d = own_warm
    out, log = tmp_path / "out.txt", tmp_path / "job.log"
    code = (
        f"from logzbench.pipeline.warm import run_job; run_job('test_warm:sleep_then_append_pid', "
        f"log={str(log)!r}, seconds=4, path={str(out)!r})"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    server = int(_wait_for_line(d, "pid ", "serving").split()[1])
    child = int(_wait_for_line(d, "job ", f"(log {log})").split()[1].rstrip(":"))
    os.kill(server, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    _one_fallback_line(stderr, f"the warm server (pid {server}) died during the job")
    assert out.read_text().split() == [str(proc.pid)]  # the orphaned job never finished; the client's run did
    assert _ended(child)
    (stale,) = d.glob("*.sock")  # nothing removed it: SIGKILL
    again = client(env, tmp_path, "os:makedirs", tmp_path / "again.log", name="again")
    assert again.returncode == 0 and again.stderr == "" and (tmp_path / "again").is_dir(), again.stderr
    assert f"(log {tmp_path / 'again.log'})" in server_log(d)  # it ran on a new server
    assert stale.is_socket() and len(list(d.glob("*.sock"))) == 1


def _listen_and_reset(path: str, ready) -> None:
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(path)
        s.listen(1)
        ready.set()
        conn, _ = s.accept()
        time.sleep(0.5)  # the client's request arrives unread: closing resets the connection
        conn.close()


def test_connection_reset_by_the_server_runs_the_job_here(own_warm, tmp_path):
    """The issue's ``ConnectionResetError: [Errno 104]`` (a server that dies with a request unread)
    gives one line and the job in the client's own process, no traceback."""
    import threading

    env, d = own_warm
    code = "from logzbench.pipeline.warm import server_address; print(server_address())"
    address = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()
    ready = threading.Event()
    listener = threading.Thread(target=_listen_and_reset, args=(address, ready), daemon=True)
    listener.start()
    assert ready.wait(30)
    proc = client(env, tmp_path, "os:makedirs", tmp_path / "job.log", name="made")
    listener.join(30)
    assert proc.returncode == 0 and (tmp_path / "made").is_dir(), proc.stderr
    _one_fallback_line(proc.stderr, "ConnectionResetError")


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_a_non_socket_in_the_sockets_place_is_left_alone(own_warm, tmp_path, kind):
    """Only a socket of the user's own is removed as a dead server's: a file or a link in its place
    is left as it is, and the job runs in its own process after one line naming it."""
    env, d = own_warm
    code = "from logzbench.pipeline.warm import server_address; print(server_address())"
    address = Path(
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True
        ).stdout.strip()
    )
    if kind == "file":
        address.write_text("mine")
    else:
        address.symlink_to(tmp_path / "nowhere.sock")
    proc = client(env, tmp_path, "os:makedirs", tmp_path / "job.log", name="made")
    assert proc.returncode == 0 and (tmp_path / "made").is_dir(), proc.stderr
    _one_fallback_line(proc.stderr, "not a socket of yours")
    assert address.is_symlink() if kind == "symlink" else address.read_text() == "mine"


def test_full_warm_directory_simulated_runs_the_job_here(own_warm, tmp_path):
    """No space left to create the server's lock, log or socket (ENOSPC, simulated): one line, the
    job in the client's own process."""
    env, d = own_warm
    code = (
        "import errno, os; from logzbench.pipeline import warm\n"
        "def full(path, flags):\n    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))\n"
        "warm._open_nofollow = full\n"
        "warm.run_job('os:makedirs', log=None, name='made')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0 and (tmp_path / "made").is_dir(), proc.stderr
    _one_fallback_line(proc.stderr, "No space left on device")


@pytest.fixture
def full_tmpfs():
    """A 64 KiB tmpfs (root only), unmounted at the end; mounted at a short path, so that its sockets fit
    a Unix socket's 107 bytes also under pytest-xdist's longer temporary directories."""
    if os.getuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = Path(tempfile.mkdtemp(prefix="lzfull-"))
    opts = "size=64k,nr_inodes=8"
    if subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        with contextlib.suppress(OSError):
            mnt.rmdir()


@pytest.mark.parametrize("full", ["space", "inodes"])
def test_full_warm_directory_runs_every_job(full_tmpfs, tmp_path, full):
    """A warm directory on a full file system (no space for the server's log, or no inode for its
    lock, log or socket): every job runs and succeeds, on the server or, after one line, in its
    own process; no traceback, and no socket is left without a server."""
    d = full_tmpfs / "warm"
    d.mkdir(mode=0o700)
    env = {**os.environ, "LOGZBENCH_WARM_DIR": str(d), "LOGZBENCH_WARM_EXTRA_JOBS": EXTRA_JOBS}
    env.pop("LOGZBENCH_WARM", None)
    if full == "space":  # the lock, log and socket can still be created, but nothing written
        code = "from logzbench.pipeline.warm import server_address; print(server_address())"
        address = Path(
            subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True
            ).stdout.strip()
        )
        for suffix in (".lock", ".log"):
            address.with_suffix(suffix).touch(mode=0o600)
    with open(full_tmpfs / "fill", "wb", buffering=0) as f:  # fill the blocks
        with pytest.raises(OSError):
            while True:
                f.write(b"\0" * 4096)
    if full == "inodes":
        with pytest.raises(OSError):
            for i in range(100):
                (full_tmpfs / f"i{i}").touch()
    try:
        for i in range(2):
            proc = client(env, tmp_path, "os:makedirs", tmp_path / "job.log", name=f"made{i}")
            assert proc.returncode == 0 and (tmp_path / f"made{i}").is_dir(), proc.stderr
            assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) <= 1, proc.stderr
            if full == "inodes":
                _one_fallback_line(proc.stderr, "No space left on device")
    finally:
        code = "from logzbench.pipeline.warm import stop_server; stop_server()"
        subprocess.run([sys.executable, "-c", code], env=env, timeout=60)
    deadline = time.monotonic() + 10
    while list(d.glob("*.sock")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not list(d.glob("*.sock"))


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGINT], ids=["SIGHUP", "SIGINT"])
def test_a_signal_the_caller_ignores_stays_ignored(warm_env, tmp_path, signum, warm):
    """A caller that ignores SIGHUP (``nohup``, ``trap "" HUP``) or SIGINT (a background job of a
    non-interactive shell) finishes its job through that signal, warm as in its own process."""
    env, d = warm_env
    if not warm:
        env = {**env, "LOGZBENCH_WARM": "0"}
    out, log = tmp_path / "out.txt", tmp_path / "job.log"
    code = (
        f"import sys; from logzbench.pipeline.warm import run_job; print('ready', file=sys.stderr, flush=True); "
        f"run_job('test_warm:sleep_then_write', log={str(log)!r}, seconds=3, path={str(out)!r})"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signum, signal.SIG_IGN),
    )
    assert proc.stderr.readline().strip() == "ready"
    if warm:
        _wait_for_line(d, "job ", f"test_warm:sleep_then_write (log {log})")
    else:
        time.sleep(1)
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0 and out.read_text() == "done", stderr
    assert stderr == ""  # warm: no fallback either


def test_relative_pythonpath_entries_resolve_against_the_jobs_directory(own_warm, tmp_path):
    """The server runs in its own directory, yet a relative ``$PYTHONPATH`` entry means what it
    means to the job in its own process: here ``tests`` and ``src`` from the checkout's root."""
    env, d = own_warm
    env = {**env, "PYTHONPATH": os.pathsep.join(["tests", "src"])}
    out = tmp_path / "out.txt"
    proc = client(env, HERE.parent, "test_warm:sleep_then_write", tmp_path / "job.log", seconds=0, path=str(out))
    assert proc.returncode == 0 and proc.stderr == "" and out.read_text() == "done", proc.stderr
    assert f"test_warm:sleep_then_write (log {tmp_path / 'job.log'})" in server_log(d)  # on the server


@pytest.mark.parametrize("name", ["LC_ALL", "LC_CTYPE", "LANG", "LANGUAGE", "TZ"])
def test_the_locale_is_part_of_the_servers_key(monkeypatch, name):
    from logzbench.pipeline.warm_common import fingerprint

    monkeypatch.setenv(name, "C")
    a = fingerprint()
    monkeypatch.setenv(name, "C.UTF-8")
    assert fingerprint() != a


def test_a_warm_job_runs_in_its_callers_locale(warm_env, tmp_path):
    """Two callers with different ``LC_ALL`` get two servers, and each job sees the locale (LC_CTYPE,
    UTF-8 mode, encodings) it sees in its own process."""
    env, d = warm_env
    got = {}
    for lc in ("C", "C.UTF-8"):
        for warm in ("1", "0"):
            out = tmp_path / f"{lc}-{warm}.json"
            proc = client(
                {**env, "LC_ALL": lc, "LOGZBENCH_WARM": warm},
                tmp_path,
                "test_warm:write_locale",
                tmp_path / "l",
                path=str(out),
            )
            assert proc.returncode == 0 and proc.stderr == "", proc.stderr
            got[lc, warm] = json.loads(out.read_text())
        assert got[lc, "1"] == got[lc, "0"], (lc, got)
    assert got["C", "0"] != got["C.UTF-8", "0"]  # the two locales differ here (else the test proves nothing)
    assert server_log(d).count(f"test_warm:write_locale (log {tmp_path / 'l'})") == 2
