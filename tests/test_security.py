"""Issue 22's security holes, each played by a second local user (uid 65534, fixture ``other_user``).

* The compiled sampler kernel is loaded only from the installed package (it is built at
  installation): a library planted by somebody else where a runtime build would have cached it is
  never loaded (its constructor would run as the victim).
* The warm server's directory must be the user's own, mode 0700, not a link: a squatted directory
  or a planted listener gets nothing (no job, no environment), the job runs in its own process
  with a one-line warning.
* The warm server serves only its own uid (SO_PEERCRED) and only the package's registered jobs.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import logzbench
from logzbench import kernels as S
from logzbench.pipeline import trusted, warm

PLANT = r"""
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen("%s", "w");
    if (f) { fprintf(f, "ran as uid %%d\n", (int)getuid()); fclose(f); }
}
"""


def _python(code: str, env: dict, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, **kw)


# --------------------------------------------------------------------------- trusted paths
def test_trusted_dir_rules(tmp_path):
    d = trusted.private_dir(tmp_path / "a" / "b")
    assert d.stat().st_mode & 0o777 == 0o700 and trusted.untrusted_dir(d, private=True) is None
    (tmp_path / "open").mkdir()
    os.chmod(tmp_path / "open", 0o777)
    assert "writable by other users" in trusted.untrusted_dir(tmp_path / "open")
    os.chmod(tmp_path / "open", 0o755)
    assert trusted.untrusted_dir(tmp_path / "open") is None
    assert "not 0700" in trusted.untrusted_dir(tmp_path / "open", private=True)
    (tmp_path / "link").symlink_to(d)
    assert "symbolic link" in trusted.untrusted_dir(tmp_path / "link")
    with pytest.raises(PermissionError, match="symbolic link"):
        trusted.private_dir(tmp_path / "link")
    os.chmod(tmp_path / "open", 0o777)  # a writable directory above (no sticky bit) is refused too
    (tmp_path / "open" / "inner").mkdir(mode=0o700)
    assert "above it is writable by other users" in trusted.untrusted_dir(tmp_path / "open" / "inner")
    f = d / "f.so"
    f.write_bytes(b"x")
    os.chmod(f, 0o644)
    assert trusted.untrusted_file(f) is None
    os.chmod(f, 0o666)
    assert "writable by other users" in trusted.untrusted_file(f)


def test_directories_of_another_user_are_refused(other_user):
    theirs = other_user.shared / "theirs"
    assert other_user.run(["mkdir", "-m", "700", theirs]).returncode == 0
    assert "owned by nobody" in trusted.untrusted_dir(theirs)
    with pytest.raises(PermissionError, match="owned by nobody"):
        trusted.private_dir(theirs)
    mine = trusted.private_dir(other_user.shared / "mine")  # in a sticky world-writable directory: fine
    assert trusted.untrusted_dir(mine, private=True) is None


# --------------------------------------------------------------------------- the compiled kernel
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to build the planted library")
def test_planted_kernel_in_a_squatted_cache_is_never_loaded(other_user, tmp_path):
    """The squatter creates the temporary directory's ``logzbench-kernels-<uid>`` (where a runtime
    build would cache the kernel) and puts libraries there; the victim never loads them."""
    shared = other_user.shared
    marker = shared / "planted-ran"
    squat = shared / f"logzbench-kernels-{os.getuid()}"
    (shared / "plant.c").write_text(PLANT % marker)
    os.chmod(shared / "plant.c", 0o644)
    assert other_user.run(["mkdir", "-m", "777", squat]).returncode == 0
    for name in ("lzsampling.so", "_bernoulli.so"):
        built = other_user.run(["cc", "-shared", "-fPIC", "-o", squat / name, shared / "plant.c"])
        assert built.returncode == 0, built.stderr
    # control: the planted library does run its code when loaded (so the check below can fail)
    control = _python(f"import ctypes; ctypes.CDLL({str(squat / 'lzsampling.so')!r})", dict(os.environ))
    assert control.returncode == 0 and marker.exists(), control.stderr
    marker.unlink()

    env = {**os.environ, "TMPDIR": str(shared), "XDG_CACHE_HOME": str(squat), "LOGZBENCH_KERNEL_DIR": str(squat)}
    env.pop(S.ENV_NO_COMPILE, None)
    out = _python("from logzbench import kernels as S; print(S.kernel_status())", env)
    assert out.returncode == 0, out.stderr
    assert not marker.exists(), "the planted library was loaded"
    assert str(squat) not in out.stdout, out.stdout


# --------------------------------------------------------------------------- the warm server
HERE = Path(__file__).resolve().parent


def _listen(path: str, record: str) -> None:
    """The squatter's listener: record whatever any client sends."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o777)
    s.listen(8)
    s.settimeout(60)
    open(record + ".ready", "w").close()
    while True:
        try:
            c, _ = s.accept()
        except socket.timeout:
            return
        c.settimeout(5)
        data = b""
        try:
            while chunk := c.recv(65536):
                data += chunk
        except OSError:
            pass
        with open(record, "ab") as f:
            f.write(data or b"(connected)")
        c.close()


def _send(path: str, request: dict) -> None:
    """A client that talks to a server directly: print all the server answers."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(30)
    answer = b""
    try:
        s.sendall(json.dumps(request).encode() + b"\n")
        while chunk := s.recv(4096):  # until the server closes (after the job's status, if it ran one)
            answer += chunk
        print(repr(answer))
    except (BrokenPipeError, ConnectionResetError):
        print("closed")


def _env(**extra) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "LOGZBENCH_WARM_EXTRA_JOBS": "os:makedirs",
        **extra,
    }
    env.pop("LOGZBENCH_WARM", None)
    env.pop("LOGZBENCH_WARM_DIR", None)
    return env


def _wait_for(path: Path, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.05)


def _stop(pid: int) -> None:
    import signal

    with __import__("contextlib").suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with __import__("contextlib").suppress(ChildProcessError):
        os.waitpid(pid, 0)


@pytest.mark.parametrize("squat", ["dir-0777", "dir-0700", "symlink"])
def test_squatted_warm_directory_gets_no_job_and_no_environment(other_user, tmp_path, squat):
    """The squatter creates the victim's default ``$TMPDIR/logzbench-<uid>`` first (open, private
    to the squatter, or a link to its own directory) and listens on the socket name the victim
    will use: the victim sends nothing (its environment holds a secret), creates nothing there,
    and runs the job in its own process after one line."""
    shared = other_user.shared
    env = _env(TMPDIR=str(shared), SECRET_TOKEN="s3cr3t")
    key = _python("from logzbench.pipeline.warm import fingerprint; print(fingerprint())", env).stdout.strip()
    assert key
    warm_dir = shared / f"logzbench-{os.getuid()}"
    record = shared / "received"
    if squat == "symlink":
        sock_dir = shared / "elsewhere"
        assert other_user.run(["mkdir", "-m", "777", sock_dir]).returncode == 0
        assert other_user.run(["ln", "-s", sock_dir, warm_dir]).returncode == 0
    else:
        sock_dir = warm_dir
        assert other_user.run(["mkdir", "-m", squat[-3:], warm_dir]).returncode == 0
    listener = other_user.spawn(_listen, str(sock_dir / f"{key}.sock"), str(record))
    try:
        _wait_for(Path(str(record) + ".ready"))
        made = tmp_path / "made"
        code = f"from logzbench.pipeline.warm import run_job; run_job('os:makedirs', log=None, name={str(made)!r})"
        proc = _python(code, env, cwd=tmp_path)
        assert proc.returncode == 0 and made.is_dir(), proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert (
            len(lines) == 1
            and "warm directory not usable" in lines[0]
            and "running the job in this process" in lines[0]
        ), proc.stderr
        assert not record.exists(), f"the squatter received: {record.read_bytes()[:200]!r}"
        assert sorted(p.name for p in sock_dir.iterdir()) == [f"{key}.sock"]  # no log, lock or socket of ours
    finally:
        _stop(listener)


def test_client_sends_nothing_to_a_listener_of_another_uid(other_user):
    """Even given a socket path directly, the client checks the listener's uid (SO_PEERCRED)
    before it sends a request (which carries its environment)."""
    record = other_user.shared / "received"
    sock = other_user.shared / "planted.sock"
    listener = other_user.spawn(_listen, str(sock), str(record))
    try:
        _wait_for(Path(str(record) + ".ready"))
        with pytest.raises(warm._Unavailable, match="uid 65534's, not yours"):
            warm._server(sock, start=False)
    finally:
        _stop(listener)
    assert not record.exists() or record.read_bytes() in (b"", b"(connected)")  # no request, no environment


def test_server_refuses_other_uids_and_unregistered_targets(other_user, tmp_path, capfd):
    """A server reachable by another user (its socket in a shared directory, as in the issue's
    proof) refuses that user's connection; and even its own user runs only registered jobs."""
    srv_dir = other_user.shared / "srv"
    srv_dir.mkdir()
    os.chmod(srv_dir, 0o777)
    sock = srv_dir / "server.sock"
    env = _env()
    with open(tmp_path / "server.log", "wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "logzbench.pipeline.warm", "serve", "--socket", str(sock), "--idle", "60"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for(sock, 120)
        os.chmod(sock, 0o777)
        marker = other_user.shared / "pwned"
        request = {
            "op": "run",
            "target": "subprocess:run",
            "kwargs": {"args": ["touch", str(marker)]},
            "cwd": "/",
            "env": {},
            "log": None,
            "threads": None,
        }
        status, out = other_user.call(_send, str(sock), request)
        assert status == 0 and out.strip() in ("b''", "closed"), out  # closed without a word
        mine = _python(f"import test_security as t; t._send({str(sock)!r}, {request!r})", env)
        assert "not a registered job" in mine.stdout, mine.stdout + mine.stderr
        time.sleep(1)
        assert not marker.exists()
        text = (tmp_path / "server.log").read_text()
        assert "refused a connection from uid 65534" in text and "refused target 'subprocess:run'" in text, text
        # control: a registered target from the server's own user runs
        ok = dict(request, target="os:makedirs", kwargs={"name": str(tmp_path / "made")})
        done = _python(f"import test_security as t; t._send({str(sock)!r}, {ok!r})", env)
        assert "pid" in done.stdout and '"status": 0' in done.stdout, done.stdout + done.stderr
        assert (tmp_path / "made").is_dir()
    finally:
        _stop(server.pid)


def _run_job_here(warm_dir: str, made: str) -> None:
    os.environ.update(LOGZBENCH_WARM_DIR=warm_dir, LOGZBENCH_WARM_EXTRA_JOBS="os:makedirs")
    os.environ.pop("LOGZBENCH_WARM", None)
    from logzbench.pipeline.warm import run_job

    run_job("os:makedirs", log=None, name=made)


def test_read_only_warm_directory_runs_the_job_in_its_own_process(other_user):
    """Played by the second user (root ignores permissions): its own warm directory is read-only."""
    ro, made = other_user.shared / "ro", other_user.shared / "made"
    assert other_user.run(["mkdir", "-m", "500", ro]).returncode == 0
    status, out = other_user.call(_run_job_here, str(ro), str(made))
    assert status == 0 and made.is_dir(), out
    lines = out.strip().splitlines()
    assert len(lines) == 1 and "running the job in this process" in lines[0] and "Traceback" not in out, out


# --------------------------------------------------------------------------- issue 37
PLANTED = ("yaml", "pandas", "numpy", "torch", "mlflow", "logzbench")


def test_modules_planted_in_the_jobs_directory_are_never_imported(short_dir, tmp_path):
    """Another user plants ``yaml.py``, ``pandas.py``, ... (each would write a marker) in a shared
    directory (mode 1777); a warm job run from there starts its server, which imports none of them,
    even with an empty entry (the working directory) in ``$PYTHONPATH``; the job succeeds on the
    server, with its relative paths resolved against its own directory."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    marker = tmp_path / "imported"
    for name in PLANTED:
        (shared / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n")
    warm_dir = short_dir / "warm"
    # the job's script lives elsewhere (as a Snakemake script does), so only the server could import from here
    script = tmp_path / "scripts" / "job.py"
    script.parent.mkdir()
    script.write_text(
        "from logzbench.pipeline.warm import run_job\nrun_job('os:makedirs', log='job.log', name='made')\n"
    )
    env = {**_env(), "LOGZBENCH_WARM_DIR": str(warm_dir)}
    # the package's own directory first (an editable install's .pth comes after $PYTHONPATH, and the
    # client, a cold Python of the user's own making, would import the planted logzbench.py), then a
    # trailing empty entry: the working directory, for Python
    package_dir = str(Path(logzbench.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([package_dir, env["PYTHONPATH"], ""])
    try:
        proc = subprocess.run(
            [sys.executable, str(script)], env=env, cwd=shared, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert (shared / "made").is_dir() and (shared / "job.log").exists()
        assert not marker.exists(), f"imported from the job's directory: {marker.read_text().split()}"
        server_log = "".join(p.read_text() for p in warm_dir.glob("*.log"))
        assert f"os:makedirs (log {shared / 'job.log'})" in server_log  # it ran on the server
    finally:
        _python("from logzbench.pipeline.warm import stop_server; stop_server()", env)
