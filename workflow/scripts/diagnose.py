"""One model's diagnostics (rule diagnose): logzbench.pipeline.diagnose.diagnose_job with its settings.

Writes results/diagnostics/<model>.json and <model>_samples.npz (both or neither), through
logzbench.pipeline.warm.run_job (in a process forked from the warm server when enabled).
"""

import sys

from logzbench.errors import ConfigError
from logzbench.pipeline.outputs import check_npz
from logzbench.pipeline.usage import job_usage_file
from logzbench.pipeline.warm import run_job

sm = snakemake  # noqa: F821
try:  # the model and data of an earlier run are complete (else one line: how to rebuild them)
    check_npz(sm.input.model, "model")
    check_npz(sm.input.data, "data")
except ConfigError as exc:
    sys.exit(f"logzbench: {exc}")
run_job(
    "logzbench.pipeline.diagnose:diagnose_job",
    log=sm.log[0],
    threads=sm.threads,
    usage=job_usage_file(sm.log[0]),
    settings=dict(sm.params.settings),
    model=sm.input.model,
    data=sm.input.data,
    estimates=list(sm.input.estimates),
    out_json=sm.output.json,
    out_npz=sm.output.npz,
)
