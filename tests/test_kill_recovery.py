"""The documentation's "Recovering from a killed run" (docs/troubleshooting.md), as a user on a shared
machine would follow it.

* ``Ctrl-C`` (SIGINT) cancels the run's jobs: afterwards no job script of the run and no job
  process forked for it on the warm server remains.
* A plain ``kill`` (SIGTERM) stops Snakemake gracefully: running jobs finish (their outputs
  complete), no new job starts, and the run does not reach its end.
* The documentation's ``ps`` command lists this run's job scripts and nothing of another user, even one
  whose command line names the same directory.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FOREGROUND_SIGNALS, foreground_signals

pytest.importorskip("snakemake", reason="snakemake is not installed; the workflow tests need it")

REPO = Path(__file__).resolve().parents[1]
TROUBLESHOOTING = (REPO / "docs" / "troubleshooting.md").read_text()
#: the documentation's listing of a run's jobs (run from the run directory)
PS = (
    'for p in $(pgrep -u "$(id -u)" -f \'[.]snakemake/scripts/\'); do [ "$(readlink /proc/$p/cwd)" = "$(pwd -P)" ] '
    '&& ps -ww -o pid=,etime=,args= -p "$p"; done'
)


def _env() -> dict:
    env = dict(os.environ)
    env.pop("MLFLOW_TRACKING_URI", None)
    env.setdefault("LOGZBENCH_DATA_MIRROR", str(REPO.parent / "shared" / "data"))
    env.pop("LOGZBENCH_WARM_DIR", None)  # the default private directory
    return env


def _listed(workdir: Path) -> list[str]:
    out = subprocess.run(["bash", "-c", PS], cwd=workdir, capture_output=True, text=True).stdout  # status: grep's
    return [line for line in out.splitlines() if line.strip()]


def _start(workdir: Path) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--cores",
        "1",
        "--configfile",
        str(REPO / "config" / "test.yaml"),
    ]
    # Ctrl-C and kill as a foreground user's: SIGINT is ignored from the start where pytest runs in the background
    return subprocess.Popen(
        cmd,
        cwd=workdir,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=foreground_signals,
    )


def _wait_for_a_job(workdir: Path, proc: subprocess.Popen, rule: str, timeout: float = 300) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = [j for j in _listed(workdir) if f".{rule}.py" in j]
        if jobs:
            return jobs
        assert proc.poll() is None, "snakemake ended before a job of rule " + rule
        time.sleep(0.2)
    pytest.fail(f"no {rule} job within {timeout} s")


def test_docs_give_this_listing():
    assert PS in TROUBLESHOOTING


def _mask(status: str, field: str) -> set[int]:
    """The signals of a ``SigIgn``/``SigBlk`` line of /proc/PID/status (a hex mask, bit n-1 for signal n)."""
    bits = int(re.search(rf"^{field}:\s*([0-9a-f]+)$", status, flags=re.M).group(1), 16)
    return {n for n in range(1, 65) if bits >> (n - 1) & 1}


def test_children_start_with_a_foreground_users_signals():
    """Where pytest runs in the background (SIGINT and SIGQUIT ignored; SIGHUP under nohup) or with signals
    blocked, the children the tests signal still start with each one's default action and none blocked."""
    wanted = set(FOREGROUND_SIGNALS)
    saved = {s: signal.signal(s, signal.SIG_IGN) for s in wanted}
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
    try:
        plain = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True, check=True).stdout
        fg = subprocess.run(
            ["cat", "/proc/self/status"], capture_output=True, text=True, check=True, preexec_fn=foreground_signals
        ).stdout
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        for s, handler in saved.items():
            signal.signal(s, handler)
    assert wanted <= _mask(plain, "SigIgn") and wanted <= _mask(plain, "SigBlk")  # what a child inherits
    assert not wanted & _mask(fg, "SigIgn") and not wanted & _mask(fg, "SigBlk")


def _signal_during_training(workdir: Path, signum: int, timeout: float) -> tuple[int, str]:
    """Run the test config, send ``signum`` to snakemake while a training job runs; its status and output."""
    proc = _start(workdir)
    try:
        _wait_for_a_job(workdir, proc, "train")
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out


@pytest.mark.start_first
def test_ctrl_c_cancels_the_runs_jobs_and_their_processes(tmp_path):
    status, out = _signal_during_training(tmp_path, signal.SIGINT, 120)
    assert status != 0
    assert "Terminating processes on user request" in out, out[-3000:]
    deadline = time.monotonic() + 15
    while _listed(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _listed(tmp_path) == []
    # nor any job process the warm server forked for this run (its working directory is the run's)
    left = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.readlink(f"/proc/{pid}/cwd") == str(tmp_path.resolve()):
                    left.append(pid)
            except OSError:
                pass
    assert left == [], left


@pytest.mark.start_first
def test_plain_kill_lets_running_jobs_finish_and_starts_no_more(tmp_path):
    _, out = _signal_during_training(tmp_path, signal.SIGTERM, 300)
    assert "Will exit after finishing currently running jobs" in out, out[-3000:]
    finished = re.findall(r"Finished jobid: \d+ \(Rule: (\w+)\)", out)
    assert "train_model" in finished, out[-3000:]  # the running job finished
    after = out[out.index("Will exit after finishing") :]
    started = re.findall(r"^(?:local)?rule (\w+):$", after, flags=re.M)
    assert started == [], started  # no job started after the signal
    # and the run stopped short of its end (report_trials may have run before training: it needs none)
    assert not (tmp_path / "results" / "report" / "report.json").exists()
    assert _listed(tmp_path) == []


def test_listing_shows_only_this_users_jobs_of_this_run(other_user):
    """Job scripts run as ``python .snakemake/scripts/tmpXXXX.<rule>.py`` in their run directory;
    another user's job in the same directory and this user's job of another run are not listed."""
    run, other = other_user.shared / "run", other_user.shared / "other"
    run.mkdir(mode=0o755)
    other.mkdir(mode=0o755)
    job = ["sh", "-c", "sleep 60", ".snakemake/scripts/tmpx.estimate.py"]
    mine = subprocess.Popen(job, cwd=run)
    theirs = subprocess.Popen(job, cwd=run, user=65534, group=65534, extra_groups=[])
    elsewhere = subprocess.Popen(job, cwd=other)
    try:
        time.sleep(0.3)
        listed = _listed(run)
        assert len(listed) == 1 and listed[0].split()[0] == str(mine.pid), listed
    finally:
        for p in (mine, theirs, elsewhere):
            p.kill()
            p.wait()
