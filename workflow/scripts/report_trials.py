"""Bias / MSE of log Z over repeated trials (rule report_trials): the Liu et al. Fig. 1 / Fig. 2 layouts."""

import sys

sys.stdout = sys.stderr = open(snakemake.log[0], "w", buffering=1)  # noqa: F821

from logzbench.trials import report_trials  # noqa: E402

sm = snakemake  # noqa: F821
paths = report_trials({"gaussian": list(sm.input.gaussian), "grid": list(sm.input.grid)}, sm.params.out_dir)
print(f"report_trials: {paths}")
