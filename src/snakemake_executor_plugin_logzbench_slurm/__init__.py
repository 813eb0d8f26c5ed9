"""Snakemake executor ``logzbench-slurm``: snakemake-executor-plugin-slurm 2.x, with jobs that end
outside Snakemake reported as failed, group jobs run side by side, and a cap on the polling interval.

The upstream plugin (2.8.0, the latest at the time of writing) reads each job's state from
``sacct -X --parsable2 --format=JobIdRaw,State`` and compares it with its list of failed states
exactly.  A job cancelled with ``scancel`` is recorded as ``CANCELLED by <uid>``, which matches
nothing; the plugin keeps the job among the running ones and Snakemake waits for ever.  A job
preempted without requeueing (``PREEMPTED``) is likewise waited for, in the hope that SLURM
resumes it.

This executor is the upstream one with four changes:

* before each status check it asks sacct the same question and reports as failed every job whose
  state is a failed state followed by a reason (``CANCELLED by 0``) or ``PREEMPTED`` when the plugin's
  ``requeue`` setting is off;
* it removes a job's log files when it submits the job, so that a submission the controller refuses
  does not show an earlier run's log as the failed job's (Snakemake removes them only once the job
  starts);
* a group job's Snakemake runs the group's jobs with the local executor, side by side within the
  allocation's ``--cores``, instead of ``--executor slurm-jobstep --jobs 1`` (one job at a time, each in
  its own ``srun`` step and its own Snakemake process);
* the wait between two status checks is capped (setting ``max_seconds_between_status_checks``, default
  30 s; upstream lengthens it by 10 s after each check that finds nothing finished, up to 180 s).

Everything else (submission, resources, the other states, cancelling on Ctrl-C, its settings) is the
upstream plugin's; its settings keep their names under this executor's prefix (``--logzbench-slurm-...``,
e.g. ``--logzbench-slurm-init-seconds-before-status-checks``).

Used by ``workflow/profiles/slurm`` (``executor: logzbench-slurm``); the plugin's defects and their
reproductions are in the documentation, Troubleshooting, "Known issues".
"""

import os
from dataclasses import dataclass, field
from typing import AsyncGenerator, List

from snakemake_executor_plugin_slurm import Executor as _SlurmExecutor
from snakemake_executor_plugin_slurm import ExecutorSettings as _SlurmSettings
from snakemake_executor_plugin_slurm import common_settings
from snakemake_executor_plugin_slurm.job_status_query import (
    is_query_tool_available,
    query_job_status,
    query_job_status_sacct,
)
from snakemake_interface_common.exceptions import WorkflowError
from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo

__all__ = ["Executor", "ExecutorSettings", "check_group_cores", "common_settings", "ended_state"]

#: sacct states after which a job will not run again (without requeueing)
FAILED_STATES = frozenset(
    {"BOOT_FAIL", "CANCELLED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT", "PREEMPTED"}
)


@dataclass
class ExecutorSettings(_SlurmSettings):
    """The upstream plugin's settings, and a cap on the time between two status checks."""

    max_seconds_between_status_checks: int = field(
        default=30,
        metadata={
            "help": "The longest wait in seconds between two status checks (sacct).  The upstream "
            "plugin waits 10 s longer after each check that finds no job finished, up to 180 s, so "
            "a short job's end is noticed up to three minutes late; this caps the wait.",
        },
    )

    def __post_init__(self):
        super().__post_init__()
        if self.max_seconds_between_status_checks is None or self.max_seconds_between_status_checks < 1:
            raise ValueError("max_seconds_between_status_checks must be a positive number of seconds")


def ended_state(state: str, requeue: bool = False) -> str | None:
    """The failed state a sacct ``State`` reports where the upstream plugin would keep waiting.

    Parameters
    ----------
    state : str
        sacct's ``State`` of one job, e.g. ``"CANCELLED by 0"``, ``"RUNNING"``, ``"PREEMPTED"``.
    requeue : bool
        The plugin's ``requeue`` setting: with it, a preempted job is left to SLURM to requeue.

    Returns
    -------
    str or None
        The state's first word (``"CANCELLED"``) when the job has failed and the upstream plugin
        would not notice (a failed state with a reason appended, or ``PREEMPTED`` without
        requeueing); None for every other state, which the upstream plugin handles.
    """
    text = state.strip()
    word = text.split()[0] if text else ""
    if word not in FAILED_STATES:
        return None
    if word == "PREEMPTED":
        return None if requeue else word
    return word if text != word else None


def _lookup(status: dict[str, str], external_jobid: str) -> str | None:
    """A job's state, by its id or (array tasks, ``<id>_<task>``) its parent's."""
    for candidate in (external_jobid, external_jobid.split("_", 1)[0]):
        if candidate in status:
            return status[candidate]
    return None


def _describe(job_info: SubmittedJobInfo) -> str:
    job = job_info.job
    if job.is_group():
        return f"group {job.name}"
    outputs = list(job.output)
    return f"rule {job.name}" + (f" (output {outputs[0]})" if outputs else "")


def check_group_cores(grouped_rules: List[str], cores) -> None:
    """Refuse group jobs without ``--cores``: Snakemake sizes a group job's CPUs by ``--cores`` and, without
    it, asks for the sum of the CPUs of every job of the group that could run at once."""
    if grouped_rules and cores is None:
        raise WorkflowError(
            f"rules {', '.join(grouped_rules)} are grouped (config cluster_group, or --groups): give --cores N, "
            "the CPUs of one group job (e.g. one node's)"
        )


class Executor(_SlurmExecutor):
    """The upstream SLURM executor; jobs cancelled or preempted outside Snakemake fail the workflow, a
    job's log files are removed when it is submitted, a group job runs its jobs side by side, and the wait
    between status checks is capped."""

    def __post_init__(self, *args, **kwargs):
        rules = getattr(self.workflow, "rules", None) or []
        check_group_cores(
            sorted(r.name for r in rules if getattr(r, "group", None) is not None),
            self.workflow.resource_settings.cores,
        )
        super().__post_init__(*args, **kwargs)

    def run_job_pre(self, job) -> None:
        """Remove the job's log files (``log:``) before it is submitted.  Snakemake removes them when the
        job starts on its node; a submission that fails (a refused partition, too much memory) never
        gets there, and Snakemake's error would show the log of an earlier run as this job's."""
        for f in job.log:
            try:
                os.remove(str(f))
            except FileNotFoundError:
                pass
        super().run_job_pre(job)

    def format_job_exec(self, job) -> str:
        """The command the job's SLURM allocation runs.  A group job's Snakemake runs its jobs with the
        local executor, in parallel within the allocation's ``--cores``, instead of the upstream
        ``--executor slurm-jobstep --jobs 1``: one job at a time, each in its own ``srun`` step and
        its own Snakemake process (which parses the workflow again), seconds per job."""
        call = super().format_job_exec(job)
        if job.is_group():
            upstream = super().additional_general_args()
            if upstream not in call:  # pragma: no cover - an upstream change; keep its command
                return call
            call = call.replace(upstream, "--executor local", 1)
        return call

    async def _states_ended_elsewhere(self, active_jobs: List[SubmittedJobInfo]) -> dict[str, str]:
        """external job id -> sacct state, for the active jobs :func:`ended_state` picks out."""
        if not active_jobs or not is_query_tool_available("sacct"):
            return {}
        async with self.status_rate_limiter:
            status, _ = await query_job_status(query_job_status_sacct(self.run_uuid), self.logger)
        if not status:
            return {}
        requeue = bool(getattr(self.workflow.executor_settings, "requeue", False))
        ended = {}
        for j in active_jobs:
            state = _lookup(status, j.external_jobid)
            if state is not None and ended_state(state, requeue):
                ended[j.external_jobid] = state
        return ended

    async def check_active_jobs(self, active_jobs: List[SubmittedJobInfo]) -> AsyncGenerator[SubmittedJobInfo, None]:
        ended = await self._states_ended_elsewhere(active_jobs)
        for j in active_jobs:
            if j.external_jobid in ended:
                state = ended[j.external_jobid]
                logfile = j.aux.get("slurm_logfile")
                self.report_job_error(
                    j,
                    msg=(
                        f"SLURM job '{j.external_jobid}' of {_describe(j)} ended outside Snakemake, "
                        f"SLURM status is: '{state}'. Its outputs are incomplete and removed; run "
                        "Snakemake again to resubmit what is missing."
                    ),
                    aux_logs=[str(logfile)] if logfile is not None else [],
                )
        rest = [j for j in active_jobs if j.external_jobid not in ended]
        async for j in super().check_active_jobs(rest):
            yield j
        cap = getattr(self.workflow.executor_settings, "max_seconds_between_status_checks", None)
        if cap:
            self.next_seconds_between_status_checks = min(self.next_seconds_between_status_checks, cap)
