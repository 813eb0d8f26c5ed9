"""Bias / MSE of log Z over repeated trials (rule report_trials): logzbench.trials.report_trials
(the Liu et al. Fig. 1 / Fig. 2 layouts), through logzbench.warm.run_job."""

from logzbench.warm import run_job

sm = snakemake  # noqa: F821
run_job("logzbench.trials:report_trials", log=sm.log[0], threads=sm.threads, warm=sm.params.warm,
        files={"gaussian": list(sm.input.gaussian), "grid": list(sm.input.grid)}, out_dir=sm.params.out_dir)
