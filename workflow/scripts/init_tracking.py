"""Create the MLflow store and experiment once (rule init_tracking): logzbench.jobs.init_tracking_job."""

from logzbench.warm import run_job

sm = snakemake  # noqa: F821
run_job("logzbench.jobs:init_tracking_job", log=sm.log[0], warm=sm.params.warm,
        tracking=dict(sm.params.tracking), out=sm.output[0])
