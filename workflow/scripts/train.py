"""Train one model (rule train_model): logzbench.pipeline.jobs.train_job (RBM, DBM, DBN or a continuous
model), then log the run (logzbench.pipeline.warm.run_job: in a process forked from the warm server when
enabled)."""

import sys

from logzbench.errors import ConfigError
from logzbench.pipeline.outputs import check_npz
from logzbench.pipeline.usage import job_usage_file
from logzbench.pipeline.warm import run_job

sm = snakemake  # noqa: F821
try:  # the prepared dataset of an earlier run is complete (else one line: how to rebuild it)
    check_npz(sm.input.data, "data")
except ConfigError as exc:
    sys.exit(f"logzbench: {exc}")
run_job(
    "logzbench.pipeline.jobs:train_job",
    log=sm.log[0],
    threads=sm.threads,
    usage=job_usage_file(sm.log[0]),
    model_name=sm.wildcards.model,
    hyperparams=dict(sm.params.hyperparams),
    dataset=sm.params.dataset,
    data=sm.input.data,
    out_model=sm.output.model,
    out_summary=sm.output.summary,
    out_history=sm.output.history,
    out_plot=sm.output.plot,
    device=sm.params.device,
    tracking=dict(sm.params.tracking),
    progress=sm.params.progress,
)
