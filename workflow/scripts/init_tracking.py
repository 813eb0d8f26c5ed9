"""Create the MLflow store and experiment once (rule init_tracking): logzbench.pipeline.jobs.init_tracking_job."""

from logzbench.pipeline.usage import job_usage_file
from logzbench.pipeline.warm import run_job

sm = snakemake  # noqa: F821
run_job(
    "logzbench.pipeline.jobs:init_tracking_job",
    log=sm.log[0],
    usage=job_usage_file(sm.log[0]),
    tracking=dict(sm.params.tracking),
    out=sm.output[0],
)
