"""Build the report (rule report): logzbench.report.build_report; tag flagged MLflow runs."""

import sys

sys.stdout = sys.stderr = open(snakemake.log[0], "w", buffering=1)  # noqa: F821

from pathlib import Path  # noqa: E402

from logzbench.report import build_report  # noqa: E402

sm = snakemake  # noqa: F821
t = sm.params.tracking
th = sm.params.thresholds
paths = build_report(
    list(sm.input.estimates), Path(sm.output.table1).parent,
    gap_threshold=th["gap_threshold"], ess_fraction=th["ess_fraction"], z=th["z"],
    truth_tolerance=th["truth_tolerance"], models=sm.params.models,
    tracking_uri=t["uri"] if t["enabled"] else None, experiment_name=t["experiment"] if t["enabled"] else None,
)
if t["enabled"]:
    from logzbench.tracking import log_run

    files = [sm.output.table1, sm.output.table2, sm.output.summary, sm.output.per_run, sm.output.flags, sm.output.json,
             sm.output.annealed_trials, sm.output.table_continuous]
    log_run("report", uri=t["uri"], experiment_name=t["experiment"], kind="report",
            params={"n_estimates": len(sm.input.estimates), **th},
            metrics={"n_flagged_settings": paths["n_flagged"]},
            artifacts={**{f: "tables" for f in files},
                       **{p: "plots" for p in list(sm.output.plots) + list(sm.output.trial_plots)
                          + [sm.output.model_size]}})
print(f"report: {paths}")
