"""Every setting of one repeated-trials experiment (rules trials_gaussian / trials_grid):
logzbench.pipeline.jobs.trials_job.

Per setting: runs every trial, writes the long per-trial table (CSV, atomically) and logs one MLflow
run with every trial as metric steps (logzbench.pipeline.warm.run_job: in a process forked from the warm
server when enabled).
"""

from logzbench.pipeline.usage import job_usage_file
from logzbench.pipeline.warm import run_job

sm = snakemake  # noqa: F821
run_job(
    "logzbench.pipeline.jobs:trials_job",
    log=sm.log[0],
    threads=sm.threads,
    usage=job_usage_file(sm.log[0]),
    experiment=sm.params.experiment,
    settings=list(sm.params.settings),
    outputs=list(sm.output),
    tracking=dict(sm.params.tracking),
)
