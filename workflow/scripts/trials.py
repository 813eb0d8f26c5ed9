"""One setting of a repeated-trials experiment (rules trials_gaussian / trials_grid): logzbench.trials.

Runs every trial, writes the long per-trial table (CSV, atomically) and logs one MLflow run with
every trial as metric steps.
"""

import sys

sys.stdout = sys.stderr = open(snakemake.log[0], "w", buffering=1)  # noqa: F821

import torch  # noqa: E402

from logzbench import trials  # noqa: E402
from logzbench.utils import write_csv_atomic  # noqa: E402

sm = snakemake  # noqa: F821
torch.set_num_threads(sm.threads)
s = dict(sm.params.setting)
experiment = sm.params.experiment
print(f"{experiment} trials: {s}")
if experiment == "gaussian":
    df = trials.gaussian_trials(s["sigma0"], n=s["n"], n_trials=s["n_trials"], seed=s["seed"])
    setting = {"sigma0": s["sigma0"]}
else:
    df = trials.grid_trials(s["height"], s["width"], s["sigma_pair"], s["reference"], n=s["n"],
                            n_trials=s["n_trials"], seed=s["seed"], sigma_unary=s["sigma_unary"],
                            burn_in=s["burn_in"], trw_trees=s["trw_trees"])
    setting = {"reference": s["reference"], "sigma_pair": s["sigma_pair"]}
write_csv_atomic(sm.output[0], df)
summary = trials.summarize_trials(df)
print(summary.to_string())

t = sm.params.tracking
if t["enabled"]:
    from logzbench.tracking import log_trials

    run_id = log_trials(experiment, setting, df, summary, uri=t["uri"], experiment_name=t["experiment"],
                        params=s, artifacts=[sm.output[0]])
    print(f"MLflow run {run_id}")
