"""Prepare one dataset (rule prepare_dataset): logzbench.pipeline.jobs.prepare_job (through
logzbench.pipeline.warm.run_job), which sends continuous sources (logzbench.data.CONTINUOUS_DATASETS:
vanhateren, frey) to prepare_patches and the others (mnist, digits, omniglot, digits-avil, the UCI sets)
to prepare_dataset."""

import os

from logzbench.pipeline.usage import job_usage_file
from logzbench.pipeline.warm import run_job

sm = snakemake  # noqa: F821
# the mirror: $LOGZBENCH_DATA_MIRROR, which the workflow sets (common.smk), not a param (naming it another way
# reruns nothing)
run_job(
    "logzbench.pipeline.jobs:prepare_job",
    log=sm.log[0],
    threads=sm.threads,
    usage=job_usage_file(sm.log[0]),
    spec=dict(sm.params.spec),
    out=sm.output[0],
    mirror=os.environ.get("LOGZBENCH_DATA_MIRROR"),
)
