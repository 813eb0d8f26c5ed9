"""The workflow on a real SLURM: ``--workflow-profile workflow/profiles/slurm`` against the single-node
cluster of ``.ci/slurm.sh`` (``.ci/run`` starts it; ``bash .ci/slurm.sh start`` as root by hand).

* ``test_slurm_end_to_end``: config/test.yaml, grouped as it asks (``cluster_group: workflow``).  Every
  job Snakemake ran (but the local rule init_tracking and the target rule all) ran in one SLURM job that
  completed (sacct: the job name the executor plugin gives every job of a run, the group's comment, state
  COMPLETED), with ``--cores`` CPUs, its jobs side by side through the warm server; every expected MLflow
  run is in the store once; the report is built.  Then, each job its own SLURM job, a submission the
  controller refuses (a partition that does not exist, more memory than the node has): Snakemake fails
  with the controller's message in its log, and a rerun submits only what is missing.
* ``test_slurm_time_limit``: a job killed by SLURM for its time limit (TIMEOUT in the log); a rerun
  with the normal resources completes only what is missing and the store has no duplicated runs.  Its
  small config (each job its own SLURM job: ``cluster_group: none``) asks for 2 threads, the config's
  resources and a GPU (``device: auto``; the test node has a GPU on /dev/null), and the test checks each
  on the sbatch command lines and in sacct's allocations.
* ``test_slurm_cancelled_job``: ``scancel`` of a running job fails the run within one status check
  (the upstream plugin waits for ever on ``CANCELLED by <uid>``; the profile's executor
  ``logzbench-slurm`` does not), and a rerun completes only what is missing.
* ``test_plugin_submit_command``: what the plugin makes of the rules' resources for the paper-scale
  configs (no SLURM needed, only the plugin); ``test_ended_state``, ``test_profile_executor``: the
  executor's state rule and its registration (no SLURM needed).

Without a running SLURM (no ``sinfo``, or no idle node) these tests skip with the reason.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml
from conftest import foreground_signals

pytest.importorskip("snakemake", reason="snakemake is not installed; the workflow tests need it")
pytest.importorskip("mlflow", reason="mlflow is not installed; the workflow tests need it")

REPO = Path(__file__).resolve().parents[1]
SNAKEFILE = REPO / "Snakefile"
PROFILE = REPO / "workflow" / "profiles" / "slurm"
TEST_CONFIG = REPO / "config" / "test.yaml"
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
#: rules Snakemake runs itself (not SLURM jobs): the local rule that creates the MLflow store, the target
LOCAL_RULES = {"init_tracking", "all"}

HAS_PLUGIN = importlib.util.find_spec("snakemake_executor_plugin_slurm") is not None


# --------------------------------------------------------------------------- is there a SLURM?
def _slurm_unavailable() -> str | None:
    """Why the SLURM tests cannot run here, or None."""
    if not HAS_PLUGIN:
        return "snakemake-executor-plugin-slurm is not installed"
    for tool in ("sinfo", "sbatch", "sacct", "scontrol"):
        if shutil.which(tool) is None:
            return f"SLURM is not installed ('{tool}' not found; start one with: bash .ci/slurm.sh start)"
    try:
        states = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "sinfo does not answer (is slurmctld running? bash .ci/slurm.sh start)"
    if states.returncode != 0:
        return f"SLURM is not running (sinfo: {states.stderr.strip()[:200]}; bash .ci/slurm.sh start)"
    if not {s.strip("*~#$@^-") for s in states.stdout.split()} & {"idle", "mixed"}:
        return f"no idle SLURM node (sinfo: {' '.join(states.stdout.split()) or 'no nodes'})"
    acct = subprocess.run(["sacct", "-n", "-X", "-S", "now"], capture_output=True, text=True, timeout=30)
    if acct.returncode != 0:
        return f"SLURM accounting does not answer (sacct: {acct.stderr.strip()[:200]})"
    return None


_REASON: list[str | None] = []


def _reason() -> str | None:
    if not _REASON:
        _REASON.append(_slurm_unavailable())
    return _REASON[0]


@pytest.fixture
def slurm():
    reason = _reason()
    if reason:
        pytest.skip(reason)


def _node() -> tuple[int, int]:
    """CPUs and memory (MB) of the largest idle node."""
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%c %m"], capture_output=True, text=True, check=True).stdout
    return max(tuple(int(x) for x in line.split()[:2]) for line in out.splitlines() if line.strip())


def _profile_defaults() -> dict[str, int]:
    return yaml.safe_load((PROFILE / "config.yaml").read_text())["default-resources"]


def _default_resources_args() -> tuple[list[str], dict[str, int]]:
    """The profile's default-resources, unless a node is too small for two jobs of its mem_mb (a CI
    machine): then as much memory per job as fits two (the defaults are a cluster's, not this test's)."""
    defaults = {k: v for k, v in _profile_defaults().items() if k in ("runtime", "mem_mb")}
    mem = _node()[1]
    if mem < 2 * defaults["mem_mb"]:
        defaults["mem_mb"] = max(256, mem // 2 - 100)
        return ["--default-resources", *(f"{k}={v}" for k, v in defaults.items())], defaults
    return [], defaults


# --------------------------------------------------------------------------- running Snakemake
def _env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("MLFLOW_TRACKING_URI", None)  # the store must land in the working directory
    env.setdefault("LOGZBENCH_DATA_MIRROR", str(REPO.parent / "shared" / "data"))
    env["PYTHONHASHSEED"] = "0"
    # the warm server's sockets and logs of this test only: which jobs it served
    env["LOGZBENCH_WARM_DIR"] = str(workdir / "warm")
    # a test run inside a SLURM job must not take that job's settings into its own
    for k in list(env):
        if k.startswith(("SLURM_", "SBATCH_", "SRUN_")):
            env.pop(k)
    return env


def run_slurm(
    workdir: Path,
    name: str,
    *args: str,
    configfile: Path = TEST_CONFIG,
    timeout: int = 1500,
    check: bool = True,
    on_start=None,
) -> "Run":
    """Snakemake with the SLURM profile (``--verbose``: the plugin logs every sbatch command line).
    Its output goes to ``workdir/<name>.log``."""
    log = workdir / f"{name}.log"
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(SNAKEFILE),
        "--directory",
        str(workdir),
        "--workflow-profile",
        str(PROFILE),
        "--configfile",
        str(configfile),
        "--verbose",
        # the first status check 2 s after a submission (default 40 s: right for a real cluster).
        # The plugin lengthens the interval by 10 s after every check that finds no job finished,
        # so a failure can take a minute to be noticed: part of this test's time.
        "--logzbench-slurm-init-seconds-before-status-checks",
        "2",
        *args,
    ]
    started = datetime.now() - timedelta(minutes=1)
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            cmd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            text=True,
            env=_env(workdir),
            cwd=workdir,
            preexec_fn=foreground_signals,  # its SIGINT below cancels the jobs also where pytest runs in the background
        )
        watcher = None
        if on_start is not None:
            watcher = threading.Thread(target=on_start, args=(proc,), daemon=True)
            watcher.start()
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)  # Snakemake cancels its SLURM jobs
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise AssertionError(f"snakemake did not finish in {timeout} s: {' '.join(cmd)}\n{_tail(log)}")
        if watcher is not None:
            watcher.join(timeout=30)
    run = Run(cmd, rc, log.read_text(), started)
    if check and rc != 0:
        raise AssertionError(f"snakemake failed ({rc}): {' '.join(cmd)}\n{_tail(log)}")
    return run


def _tail(log: Path, n: int = 8000) -> str:
    text = log.read_text()
    errors = "\n".join(line for line in text.splitlines() if re.search(r"error|fail|TIMEOUT", line, re.I))
    return f"--- error lines ---\n{errors[-4000:]}\n--- log tail ---\n{text[-n:]}"


_RULE = re.compile(r"^rule_(.+?)(?:_wildcards_(.*))?$")


class Run:
    """One Snakemake run with the SLURM executor, read from its log."""

    def __init__(self, cmd, rc, log, started):
        self.cmd, self.rc, self.log, self.started = cmd, rc, log, started
        m = re.search(r"SLURM run ID: (\S+)", log)
        self.uuid = m.group(1) if m else None
        #: Snakemake job id -> SLURM job id
        self.submitted = {int(j): s for j, s in re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", log)}
        #: Snakemake job id -> rule, of every job that finished
        self.finished = {int(j): r for j, r in re.findall(r"Finished jobid: (\d+) \(Rule: (\S+)\)", log)}
        #: the sbatch command lines, as option dicts (plus "comment")
        self.sbatch = [_sbatch_options(line) for line in re.findall(r"sbatch call: (sbatch .*)", log)]

    def sacct(self) -> list[dict[str, str]]:
        """This run's SLURM jobs (the plugin names every job of a run by its run ID)."""
        fields = ["JobID", "JobName", "State", "Comment", "AllocTRES", "Timelimit", "ExitCode"]
        out = subprocess.run(
            [
                "sacct",
                "-X",
                "-n",
                "-P",
                "--name",
                self.uuid,
                "-S",
                self.started.strftime("%Y-%m-%dT%H:%M:%S"),
                "-o",
                ",".join(fields),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return [dict(zip(fields, line.split("|"))) for line in out.splitlines() if line.strip()]


def _sbatch_options(line: str) -> dict[str, str]:
    """The options of one sbatch command line the plugin logged (its --wrap command left out)."""
    words = shlex.split(line.split(" --wrap=", 1)[0])
    opts: dict[str, str] = {}
    i = 1
    while i < len(words):
        w = words[i]
        if w.startswith("--") and "=" in w:
            k, v = w.split("=", 1)
            opts[k] = v
        elif w.startswith("-") and i + 1 < len(words) and not words[i + 1].startswith("-") and w not in ("--parsable",):
            opts[w] = words[i + 1]
            i += 1
        else:
            opts[w] = ""
        i += 1
    m = _RULE.match(opts.get("--comment", ""))
    opts["rule"] = m.group(1) if m else ""
    opts["wildcards"] = (m.group(2) or "") if m else ""
    return opts


def _sacct_wait(
    run: Run, n: int, final=("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL")
) -> list[dict[str, str]]:
    """sacct's records of the run once it has ``n`` of them, all in a final state (slurmdbd may lag)."""
    deadline = time.time() + 60
    while True:
        jobs = run.sacct()
        if (len(jobs) >= n and all(j["State"].split()[0] in final for j in jobs)) or time.time() > deadline:
            return jobs
        time.sleep(2)


# --------------------------------------------------------------------------- expectations
def _config(*configfiles) -> dict:
    """The config Snakemake builds from ``configfiles``, validated (defaults filled in)."""
    from snakemake.utils import update_config, validate

    config: dict = {}
    for f in configfiles:
        update_config(config, yaml.safe_load(Path(f).read_text()))
    validate(config, str(SCHEMA))
    return config


def expected_runs(config: dict) -> dict[str, Counter]:
    """The MLflow runs a complete run of ``config`` leaves, by kind: each key once."""
    from logzbench.pipeline import sweep
    from logzbench.tracking import estimate_key, train_key

    est = Counter(
        estimate_key(m, e, s.get("K"), s.get("init"), s.get("seed"))
        for m, e in sweep.sweep_pairs(config)
        for s in sweep.sweep_settings(config, m, e)
    )
    trials = config.get("trials") or {}
    n_trials = len((trials.get("gaussian") or {}).get("sigma0", [])) + len(
        (trials.get("grid") or {}).get("references", [])
    ) * len((trials.get("grid") or {}).get("sigma_pair", []))
    return {
        "estimate": est,
        "train": Counter(train_key(m) for m in config["models"]),
        "trials": n_trials,
        "report": 1 if config["models"] else 0,
    }


def check_tracked_runs(workdir: Path, config: dict) -> None:
    """Every expected run in the store exactly once, finished (none left running by a killed job)."""
    from logzbench import tracking

    uri = "sqlite:///" + str(workdir / "mlflow.db")
    exp = expected_runs(config)
    experiment = config["tracking"]["experiment"]
    for kind in ("estimate", "train"):
        runs = tracking.find_runs(uri=uri, experiment_name=experiment, kind=kind)
        keys = Counter(r.data.tags[tracking.KEY_TAG] for r in runs)
        assert keys == exp[kind], (
            kind,
            {k: n for k, n in (keys - exp[kind]).items()},
            {k: n for k, n in (exp[kind] - keys).items()},
        )
        assert {r.info.status for r in runs} == {"FINISHED"}, kind
    for kind in ("trials", "report"):
        runs = tracking.find_runs(uri=uri, experiment_name=experiment, kind=kind)
        assert len(runs) == exp[kind], (kind, len(runs))
        assert len({r.data.tags[tracking.KEY_TAG] for r in runs}) == exp[kind], kind


def check_all_slurm_jobs_completed(run: Run) -> list[dict[str, str]]:
    """Every job Snakemake ran but the local ones was a SLURM job of this run that completed."""
    assert run.uuid, "no 'SLURM run ID' in the log"
    remote = {j: r for j, r in run.finished.items() if r not in LOCAL_RULES}
    assert remote, "Snakemake ran no job"
    assert set(remote) == set(run.submitted), (sorted(remote), sorted(run.submitted))
    jobs = _sacct_wait(run, len(remote))
    assert len(jobs) == len(remote), (len(jobs), len(remote), jobs)
    assert {j["JobID"] for j in jobs} == set(run.submitted.values())
    assert all(j["JobName"] == run.uuid for j in jobs)
    states = Counter(j["State"] for j in jobs)
    assert states == {"COMPLETED": len(remote)}, states
    # the comment (rule and wildcards) of each SLURM job: as many jobs of each rule as Snakemake ran
    rules = Counter(m.group(1) for j in jobs if (m := _RULE.match(j["Comment"])))
    assert rules == Counter(remote.values()), (rules, Counter(remote.values()))
    return jobs


def _tres(alloc: str) -> dict[str, str]:
    return dict(x.split("=", 1) for x in alloc.split(",") if "=" in x)


def _mem_mb(value: str) -> int:
    m = re.fullmatch(r"([\d.]+)([KMGT]?)", value)
    scale = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024, "": 1}[m.group(2)]
    return round(float(m.group(1)) * scale)


# --------------------------------------------------------------------------- config/test.yaml
def check_group_job_completed(run: Run, group: str) -> dict[str, str]:
    """Every job Snakemake ran but the local ones ran in one SLURM job of this run, the group job of
    ``group``, which completed."""
    assert run.uuid, "no 'SLURM run ID' in the log"
    remote = [r for r in run.finished.values() if r not in LOCAL_RULES]
    assert remote, "Snakemake ran no job"
    groups = re.findall(r"Job (\S+) has been submitted with SLURM jobid (\d+)", run.log)
    assert len(groups) == 1, groups  # one submission for all of them
    jobs = _sacct_wait(run, 1)
    assert [j["JobID"] for j in jobs] == [groups[0][1]], jobs
    assert jobs[0]["State"] == "COMPLETED" and jobs[0]["JobName"] == run.uuid, jobs
    assert jobs[0]["Comment"].startswith(f"rule_{group}_"), jobs  # the plugin's comment for a group job
    return jobs[0]


def test_slurm_end_to_end(slurm, tmp_path):
    """config/test.yaml on SLURM as it asks (``cluster_group: workflow``, ``--cores`` = a node's CPUs): one
    SLURM job runs every job side by side, through the warm server; every MLflow run is tracked once and the
    report is built.  Then refused submissions (each job its own SLURM job: ``cluster_group=none``) and a
    rerun that completes what is missing."""
    t0 = time.time()
    extra, defaults = _default_resources_args()
    cpus = _node()[0]
    config = _config(TEST_CONFIG)
    assert config["cluster_group"] == "workflow"
    run = run_slurm(tmp_path, "run", *extra, "--cores", str(cpus))
    job = check_group_job_completed(run, "logzbench")
    # the group job's CPUs are --cores; its memory that of the jobs it runs side by side
    assert len(run.sbatch) == 1 and run.sbatch[0]["--cpus-per-task"] == str(cpus), run.sbatch
    tres = _tres(job["AllocTRES"])
    assert tres.get("cpu") == str(cpus) and "gres/gpu" not in tres, job
    assert defaults["mem_mb"] <= _mem_mb(tres["mem"]) <= cpus * defaults["mem_mb"], job
    # the group job's Snakemake ran them side by side (the local executor), not one srun step at a time
    assert "--executor local" in run.log and "--executor slurm-jobstep" not in run.log, _tail(tmp_path / "run.log")

    check_tracked_runs(tmp_path, config)
    report = tmp_path / "results" / "report"
    for f in (
        "table1.csv",
        "table2.csv",
        "summary.csv",
        "per_run.csv",
        "flags.csv",
        "report.json",
        "review.html",
        "annealed_trials.csv",
        "table_continuous.csv",
        "trials/gaussian.csv",
        "trials/grid.csv",
    ):
        assert (report / f).stat().st_size > 0, f
    for m in config["models"]:
        assert (report / "plots" / f"{m}.png").stat().st_size > 1000, m

    # inside the group job the jobs ran in processes forked from a warm server (warm_start: auto): the
    # usage record beside each job's benchmark says so
    usage = sorted((tmp_path / "results" / "benchmarks").rglob("*.job.tsv"))
    assert len(usage) >= len([r for r in run.finished.values() if r not in LOCAL_RULES]), usage
    cold = [str(p) for p in usage if p.read_text().splitlines()[1].split("\t")[-1] != "True"]
    assert cold == [], cold
    print(f"config/test.yaml on SLURM, one group job: {len(run.finished)} jobs in {time.time() - t0:.0f} s")

    # --- a submission the controller refuses: Snakemake fails with the controller's message.  Each job its
    # own SLURM job here (the grouping is not a param of any job: switching it reruns nothing)
    t1 = time.time()
    extra = [*extra, "--config", "cluster_group=none"]
    for bad, message in (
        ("slurm_partition=no-such-partition", "Invalid partition name specified"),
        (f"mem_mb={_node()[1] * 4}", "Requested node configuration is not available"),
    ):
        # an earlier run's log of the job: a refused submission must not show it as this job's
        stale = tmp_path / "results" / "logs" / "report.log"
        stale.write_text("STALE: the log of an earlier report job\n")
        refused = run_slurm(
            tmp_path,
            f"refused-{bad.split('=')[0]}",
            *extra,
            "--forcerun",
            "report",
            "--set-resources",
            f"report:{bad}",
            check=False,
        )
        assert refused.rc != 0, refused.log[-3000:]
        assert "SLURM sbatch failed" in refused.log and message in refused.log, _tail(
            tmp_path / f"refused-{bad.split('=')[0]}.log"
        )
        assert not refused.submitted
        # removed at submission (Snakemake may leave an empty file after the failure): nothing of the old run
        assert "STALE" not in refused.log + (stale.read_text() if stale.exists() else ""), _tail(
            tmp_path / f"refused-{bad.split('=')[0]}.log"
        )
    # the refused job's outputs are gone (--forcerun): a plain rerun submits it, and only it
    rerun = run_slurm(tmp_path, "rerun", *extra)
    check_all_slurm_jobs_completed(rerun)
    assert Counter(r for r in rerun.finished.values() if r not in LOCAL_RULES) == {"report": 1}
    check_tracked_runs(tmp_path, config)
    assert (report / "report.json").stat().st_size > 0
    print(f"refused submissions and the rerun: {time.time() - t1:.0f} s")


# --------------------------------------------------------------------------- a job killed for its time limit
def _small_config(tmp_path: Path) -> Path:
    """config/test.yaml cut down to the RBM (exact and AIS), with 2 threads, a GPU request (device auto)
    and the config's own resources; the AIS sweep's second setting runs for some seconds."""
    c = yaml.safe_load(TEST_CONFIG.read_text())
    c["description"] = "tests/test_slurm.py: time limit"
    c["cluster_group"] = "none"  # every job its own SLURM job
    c["device"] = "auto"
    c["threads"] = {"prepare": 1, "train": 2, "estimate": 2, "exact": 1, "report": 1}
    c["resources"] = {
        "train": {"runtime": 30, "mem_mb": 1500},
        "estimate": {"runtime": 45, "mem_mb": 2000},
        "exact": {"runtime": 20, "mem_mb": 1000},
    }
    c["datasets"] = {"digits": c["datasets"]["digits"]}
    c["models"] = {"digits-rbm8": {**c["models"]["digits-rbm8"], "estimators": ["exact", "ais"]}}
    c["estimators"] = {"exact": {}, "ais": {"chains": 20, "K": [10, 30000], "inits": ["uniform"], "seeds": [0]}}
    c.pop("trials", None)
    c["tracking"]["experiment"] = "logzbench-slurm-time-limit"
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(c, sort_keys=False))
    return path


def _ais_script_jobs(workdir: Path) -> list[str]:
    """SLURM ids of this working directory's running AIS job of digits-rbm8 (squeue: comment, workdir)."""
    out = subprocess.run(["squeue", "-h", "-o", "%i|%k|%Z"], capture_output=True, text=True).stdout
    return [
        i
        for i, k, d in (line.split("|", 2) for line in out.splitlines() if line.count("|") >= 2)
        if k == "rule_estimate_wildcards_digits-rbm8_ais" and Path(d).resolve() == workdir.resolve()
    ]


def _after_first_setting(workdir: Path, state: dict, act):
    """A watcher for run_slurm: once the AIS job has logged its first setting (an MLflow run, a JSON
    record), call ``act(jobid, state)`` for each running AIS job of ``workdir``."""
    log = workdir / "results" / "logs" / "estimate" / "digits-rbm8" / "ais.log"

    def watch(proc):
        while proc.poll() is None:
            if log.exists() and "log Z =" in log.read_text(errors="replace"):
                break
            time.sleep(0.05)
        else:
            return
        for jobid in _ais_script_jobs(workdir):
            act(jobid, state)
        state["seen_log"] = log.read_text(errors="replace")

    return watch


def _freeze_after_first_setting(workdir: Path, state: dict):
    """Stop the AIS job's script process (SIGSTOP) after its first setting -- as if the next setting
    computed for longer than the job's time limit.  SLURM then kills the job (TIMEOUT) like any job
    past its limit."""

    def freeze(jobid, state):
        pids = subprocess.run(["scontrol", "listpids", jobid], capture_output=True, text=True).stdout
        for pid in (int(line.split()[0]) for line in pids.splitlines()[1:] if line.split()):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            # the rule's script (Snakemake runs .snakemake/scripts/tmp*.estimate.py), not Snakemake
            if "estimate.py" in cmdline and "-m snakemake" not in cmdline:
                os.kill(pid, signal.SIGSTOP)
                state.setdefault("stopped", []).append((jobid, pid))

    return _after_first_setting(workdir, state, freeze)


def _cancel_after_first_setting(workdir: Path, state: dict):
    """``scancel`` the running AIS job after its first setting, as a user or an administrator would."""

    def cancel(jobid, state):
        subprocess.run(["scancel", jobid], check=True)
        state.setdefault("cancelled", []).append((jobid, time.time()))

    return _after_first_setting(workdir, state, cancel)


def _rerun_runs_what_is_missing(workdir: Path, name: str, extra: list[str], configfile: Path, config: dict) -> "Run":
    """Snakemake again after a job was killed: every job completes, nothing that completed before the
    kill runs again (data, training), the estimate and the report do, and every MLflow run is there once."""
    rerun = run_slurm(workdir, name, *extra, configfile=configfile)
    check_all_slurm_jobs_completed(rerun)
    ran = Counter(r for r in rerun.finished.values() if r not in LOCAL_RULES)
    assert "prepare_dataset" not in ran and "train_model" not in ran, ran
    assert ran["estimate"] >= 1 and ran["report"] == 1, ran
    check_tracked_runs(workdir, config)
    return rerun


def test_slurm_cancelled_job(slurm, tmp_path):
    """``scancel`` of a running job (sacct: ``CANCELLED by <uid>``, which the upstream plugin does not
    recognise and waits on for ever): the run fails within a bounded time with an error naming the
    SLURM job and its rule, and a rerun completes only what is missing, every MLflow run once."""
    small = _small_config(tmp_path)
    config = _config(small)
    extra, _ = _default_resources_args()
    state: dict = {}
    cancelled = run_slurm(
        tmp_path,
        "cancelled",
        *extra,
        configfile=small,
        check=False,
        timeout=600,
        on_start=_cancel_after_first_setting(tmp_path, state),
    )
    t_exit = time.time()
    assert state.get("cancelled"), (
        "the AIS job finished before the test could cancel it",
        _tail(tmp_path / "cancelled.log"),
    )
    jobid, t_cancel = state["cancelled"][0]
    assert cancelled.rc != 0, _tail(tmp_path / "cancelled.log")
    assert re.search(
        rf"SLURM job '{jobid}' of rule estimate \(output results/estimates/digits-rbm8/ais\) ended outside "
        r"Snakemake, SLURM status is: 'CANCELLED by \d+'",
        cancelled.log,
    ), _tail(tmp_path / "cancelled.log")
    states = {j["JobID"]: j["State"] for j in _sacct_wait(cancelled, len(cancelled.submitted))}
    assert states[jobid].startswith("CANCELLED by"), states
    # bounded: the profile's status checks are at most 15 s apart (logzbench-slurm's cap; upstream 180 s)
    waited = t_exit - t_cancel
    assert waited < 60, f"Snakemake took {waited:.0f} s to notice the cancelled job"
    assert not (tmp_path / "results" / "estimates" / "digits-rbm8" / "ais").exists()  # incomplete: removed

    _rerun_runs_what_is_missing(tmp_path, "after-cancel", extra, small, config)
    print(f"cancelled job noticed {waited:.0f} s after scancel")


@pytest.mark.slow
def test_slurm_time_limit(slurm, tmp_path):
    """A job past its time limit is killed by SLURM: TIMEOUT in Snakemake's log; a rerun with the normal
    resources runs only what is missing, and every MLflow run is there once.  The small config's
    resources reach SLURM: threads -> CPUs, the config's runtime and memory, a GPU for device auto."""
    t0 = time.time()
    small = _small_config(tmp_path)
    config = _config(small)
    extra, defaults = _default_resources_args()
    state: dict = {}
    killed = run_slurm(
        tmp_path,
        "time-limit",
        *extra,
        "--set-resources",
        "estimate:runtime=1",
        configfile=small,
        check=False,
        on_start=_freeze_after_first_setting(tmp_path, state),
    )
    assert state.get("stopped"), (
        "the AIS job finished before the test could hold it",
        state,
        _tail(tmp_path / "time-limit.log"),
    )
    jobid = state["stopped"][0][0]
    assert killed.rc != 0
    assert re.search(rf"SLURM-job '{jobid}' failed, SLURM status is: 'TIMEOUT'", killed.log), _tail(
        tmp_path / "time-limit.log"
    )
    states = {j["JobID"]: j["State"] for j in _sacct_wait(killed, len(killed.submitted))}
    assert states[jobid] == "TIMEOUT", states
    assert (tmp_path / "results" / "models" / "digits-rbm8.npz").exists()  # done before the kill
    assert not (tmp_path / "results" / "estimates" / "digits-rbm8" / "ais").exists()  # incomplete: removed
    t_killed = time.time() - t0

    rerun = _rerun_runs_what_is_missing(tmp_path, "after-time-limit", extra, small, config)

    # the resources of each rule on the sbatch command lines and in SLURM's allocations
    want = {
        "prepare_dataset": ("1", defaults["runtime"], defaults["mem_mb"], False),
        "train_model": ("2", 30, 1500, True),
        "estimate:digits-rbm8_ais": ("2", 45, 2000, True),
        "estimate:digits-rbm8_exact": ("1", 20, 1000, True),
        "diagnose": ("2", 45, 2000, True),  # the estimate's threads and resources, on the estimate's device
        "report": ("1", defaults["runtime"], defaults["mem_mb"], False),
    }
    seen = {}
    for r in (killed, rerun):
        alloc = {j["Comment"]: _tres(j["AllocTRES"]) for j in r.sacct()}
        for opts in r.sbatch:
            key = opts["rule"] if opts["rule"] != "estimate" else f"estimate:{opts['wildcards']}"
            cpus, runtime, mem, gpu = want[key]
            if r is killed and opts["rule"] == "estimate":
                runtime = 1  # --set-resources estimate:runtime=1
            assert (opts["--cpus-per-task"], opts["-t"], opts["--mem"]) == (cpus, str(runtime), str(mem)), opts
            assert (opts.get("--gres") == "gpu:1") == gpu, opts
            tres = alloc.get(opts["--comment"])
            if tres:  # a job submitted and started
                assert tres["cpu"] == cpus and _mem_mb(tres["mem"]) == mem, (opts, tres)
                assert (tres.get("gres/gpu") == "1") == gpu, (opts, tres)
            seen[key] = True
    assert set(seen) == set(want), seen
    print(f"time limit: killed after {t_killed:.0f} s, rerun done after {time.time() - t0:.0f} s")


# --------------------------------------------------------------------------- the plugin's command lines
class _Resources(dict):
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class _Job:
    def __init__(self, rule, threads, resources):
        self.name, self.threads, self.resources = rule, threads, _Resources(resources)

    def is_group(self):
        return False


def _dry_run_jobs(configfile: Path, tmp_path: Path) -> list[tuple[str, str, int, dict]]:
    """(rule, output, threads, resources) of every job of a dry run with the SLURM profile."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(SNAKEFILE),
        "--directory",
        str(tmp_path),
        "-n",
        # a dry run's --cores defaults to 1, which would cap every job's threads (the SLURM executor
        # has no such cap)
        "--cores",
        "256",
        "--workflow-profile",
        str(PROFILE),
        "--configfile",
        str(configfile),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", proc.stdout + proc.stderr):
        m = re.match(r"(local)?rule (\w+):", block)
        if not m or m.group(1):
            continue
        out = re.search(r"output: (\S+?),?\n", block)
        threads = int(re.search(r"threads: (\d+)", block).group(1)) if "threads:" in block else 1
        res = {}
        for item in re.search(r"resources: (.*)", block).group(1).split(", "):
            k, v = item.split("=", 1)
            res[k] = int(v) if v.isdigit() else v
        jobs.append((m.group(2), out.group(1) if out else "", threads, res))
    return jobs


@pytest.mark.skipif(not HAS_PLUGIN, reason="snakemake-executor-plugin-slurm is not installed")
@pytest.mark.parametrize("name", ["raise_table1", "hais_table1", "liu_fig3", "upadhya_sastry", "test"])
def test_plugin_submit_command(name, tmp_path):
    """The sbatch options the installed plugin builds from the rules' resources: --cpus-per-task = the
    config's threads, -t / --mem = the config's resources (else the profile's defaults), --gres=gpu:1 on
    train_model and estimate where the device is cuda/auto, nothing else asks for a GPU."""
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    configfile = REPO / "config" / f"{name}.yaml"
    config = _config(configfile)
    defaults = _profile_defaults()
    gpu = config["device"] != "cpu"
    seen = Counter()
    for rule, output, threads, res in _dry_run_jobs(configfile, tmp_path):
        if rule in LOCAL_RULES:
            continue
        params = {
            "run_uuid": "x",
            "slurm_logfile": "x.log",
            "comment_str": f"rule_{rule}",
            "account": "",
            "partition": "",
            "workdir": str(tmp_path),
        }
        call = get_submit_command(_Job(rule, threads, res), params) + set_gres_string(_Job(rule, threads, res))
        opts = _sbatch_options(call)
        step = {
            "prepare_dataset": "prepare",
            "train_model": "train",
            "report": "report",
            "report_trials": "report",
            "trials_gaussian": "estimate",
            "trials_grid": "estimate",
            "diagnose": "estimate",
        }.get(rule)
        if rule == "estimate":
            entry = output.rsplit("/", 1)[1]  # results/estimates/<model>/<estimator>: exact by its method
            step = "exact" if config["estimators"][entry].get("method", entry) == "exact" else "estimate"
            want_threads = config["threads"][step]
            own = {
                **config["resources"].get("exact" if step == "estimate" else "estimate", {}),
                **config["resources"].get(step, {}),
            }
        else:
            want_threads = config["threads"][step] if rule != "report" else config["threads"]["report"]
            own = config["resources"].get(step, {})
        assert opts["--cpus-per-task"] == str(want_threads), (rule, output, call)
        assert opts["-t"] == str(own.get("runtime", defaults["runtime"])), (rule, output, call)
        assert opts["--mem"] == str(own.get("mem_mb", defaults["mem_mb"])), (rule, output, call)
        wants_gpu = gpu and rule in ("train_model", "estimate", "diagnose")
        assert (opts.get("--gres") == "gpu:1") == wants_gpu, (rule, output, call)
        seen[(rule, opts["--cpus-per-task"], opts["-t"], opts["--mem"], opts.get("--gres"))] += 1
    if name == "raise_table1":  # the example: 4- and 8-thread jobs, the config's 1,440 minutes
        assert seen[("estimate", "4", "1440", "16000", "gpu:1")] == 18  # 6 models x AIS, RAISE, CSL
        assert seen[("estimate", "8", "240", "16000", "gpu:1")] == 2
        assert seen[("train_model", "4", "720", "8000", "gpu:1")] == 6


# --------------------------------------------------------------------------- the executor logzbench-slurm
@pytest.mark.skipif(not HAS_PLUGIN, reason="snakemake-executor-plugin-slurm is not installed")
@pytest.mark.parametrize(
    "state, requeue, ended",
    [
        ("CANCELLED by 0", False, "CANCELLED"),
        ("CANCELLED by 1234", True, "CANCELLED"),
        ("PREEMPTED", False, "PREEMPTED"),
        ("PREEMPTED", True, None),  # left to SLURM to requeue
        # what the upstream plugin already recognises, or a live job: left to it
        ("CANCELLED", False, None),
        ("TIMEOUT", False, None),
        ("FAILED", False, None),
        ("RUNNING", False, None),
        ("PENDING", False, None),
        ("COMPLETED", False, None),
        ("", False, None),
    ],
)
def test_ended_state(state, requeue, ended):
    from snakemake_executor_plugin_logzbench_slurm import ended_state

    assert ended_state(state, requeue) == ended


@pytest.mark.skipif(not HAS_PLUGIN, reason="snakemake-executor-plugin-slurm is not installed")
def test_profile_executor():
    """The profile names the executor, and Snakemake's registry finds it with the plugin's settings and
    the status-check cap, which must be a positive number of seconds; the profile's settings are its."""
    from snakemake_executor_plugin_slurm import ExecutorSettings
    from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry

    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    assert profile["executor"] == "logzbench-slurm"
    plugin = ExecutorPluginRegistry().get_plugin(profile["executor"])
    assert issubclass(plugin.settings_cls, ExecutorSettings)
    fields = {f.name.replace("_", "-") for f in dataclasses.fields(plugin.settings_cls)}
    assert "max-seconds-between-status-checks" in fields
    for key in (k for k in profile if k.startswith("logzbench-slurm-")):
        assert key.removeprefix("logzbench-slurm-") in fields, key
    assert plugin.settings_cls(max_seconds_between_status_checks=15).max_seconds_between_status_checks == 15
    with pytest.raises(ValueError, match="max_seconds_between_status_checks"):
        plugin.settings_cls(max_seconds_between_status_checks=0)


@pytest.mark.skipif(not HAS_PLUGIN, reason="snakemake-executor-plugin-slurm is not installed")
def test_group_jobs_need_cores():
    """Grouped rules without --cores are refused with a message naming them and the fix (Snakemake would ask
    for the sum of the CPUs of every job of a group that could run at once); with --cores, or ungrouped, not."""
    from snakemake_interface_common.exceptions import WorkflowError

    from snakemake_executor_plugin_logzbench_slurm import check_group_cores

    with pytest.raises(WorkflowError, match=r"rules estimate, train_model are grouped .* give --cores N"):
        check_group_cores(["estimate", "train_model"], None)
    check_group_cores(["estimate"], 4)
    check_group_cores([], None)
