"""One model x estimator sweep (rule estimate): logzbench.pipeline.jobs.run_estimate_sweep with its settings.

Writes <setting>.json and <setting>.npz per setting into the output directory and logs one MLflow
run per setting (logzbench.pipeline.warm.run_job: in a process forked from the warm server when enabled).
A source model (config `source`, not trained) is read from its file by the job: its settings carry the
source, and its rows are a prepared dataset or its `data` files (input `train`: its training rows).
"""

import sys

from logzbench.errors import ConfigError
from logzbench.pipeline.outputs import check_npz
from logzbench.pipeline.usage import job_usage_file
from logzbench.pipeline.warm import run_job

sm = snakemake  # noqa: F821
settings = list(sm.params.settings)
source = settings[0].get("source") if settings else None
try:  # the model and data of an earlier run are complete (else one line: how to rebuild them)
    if source is None:  # a trained model (a source model's file is the user's, checked when it is loaded)
        check_npz(sm.input.model, "model")
    if not (settings and settings[0].get("data_files")):  # a prepared dataset (not the user's row files)
        check_npz(sm.input.data, "data")
except ConfigError as exc:
    sys.exit(f"logzbench: {exc}")
run_job(
    "logzbench.pipeline.jobs:run_estimate_sweep",
    log=sm.log[0],
    threads=sm.threads,
    usage=job_usage_file(sm.log[0]),
    settings=settings,
    model=sm.input.model,
    data=sm.input.data,
    train_data=getattr(sm.input, "train", None),
    out_dir=sm.output[0],
    tracking=dict(sm.params.tracking),
    ess_fraction=sm.params.ess_fraction,
    progress=sm.params.progress,
)
