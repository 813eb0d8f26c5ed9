"""Bias / MSE of log Z over repeated trials (rule report_trials): logzbench.trials.report_trials
(the Liu et al. Fig. 1 / Fig. 2 layouts), through logzbench.pipeline.warm.run_job."""

from logzbench.pipeline.usage import job_usage_file
from logzbench.pipeline.warm import run_job

sm = snakemake  # noqa: F821
run_job(
    "logzbench.trials:report_trials",
    log=sm.log[0],
    threads=sm.threads,
    usage=job_usage_file(sm.log[0]),
    files={"gaussian": list(sm.input.gaussian), "grid": list(sm.input.grid)},
    out_dir=sm.params.out_dir,
)
