"""Build the report (rule report): logzbench.report.report_job (tables, flags, plots; flags tagged on the
MLflow runs; one MLflow run `report`), through logzbench.pipeline.warm.run_job."""

import sys

from logzbench.errors import ConfigError
from logzbench.pipeline.outputs import check_estimate_record
from logzbench.pipeline.usage import job_usage_file
from logzbench.pipeline.warm import run_job

sm = snakemake  # noqa: F821
o = sm.output
try:  # every record parses and its per-chain arrays load (else one line: the file, how to rebuild it)
    for record in sm.params.estimates:
        check_estimate_record(record)
except ConfigError as exc:
    sys.exit(f"logzbench: {exc}")
run_job(
    "logzbench.report:report_job",
    log=sm.log[0],
    threads=sm.threads,
    usage=job_usage_file(sm.log[0]),
    estimates=list(sm.params.estimates),
    out_dir=sm.params.out_dir,
    thresholds=dict(sm.params.thresholds),
    models=list(sm.params.models),
    tracking=dict(sm.params.tracking),
    paper_rows=dict(sm.params.paper_rows),
    bracket_models=list(sm.params.bracket_models),
    diagnostics=list(sm.input.diagnostics),
    workers=sm.threads,
    tables=[
        o.table1,
        o.table2,
        o.summary,
        o.per_run,
        o.flags,
        o.json,
        o.annealed_trials,
        o.table_continuous,
        o.table_bracket,
    ],
    plots=list(o.plots) + list(o.trial_plots) + [o.model_size] + list(o.bracket_plots),
)
