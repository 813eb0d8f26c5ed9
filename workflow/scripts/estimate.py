"""One estimate (rule estimate): logzbench.jobs.run_estimate with the job's settings.

Writes the per-chain arrays (.npz), logs one MLflow run keyed by the settings, then the
JSON record (settings + EstimateResult.to_dict() + the run id).
"""

import sys

sys.stdout = sys.stderr = open(snakemake.log[0], "w", buffering=1)  # noqa: F821

import torch  # noqa: E402

from logzbench.jobs import run_estimate  # noqa: E402

sm = snakemake  # noqa: F821
torch.set_num_threads(sm.threads)
run_estimate(sm.params.settings, model=sm.input.model, data=sm.input.data, arrays=sm.output.arrays,
             record_path=sm.output.json, tracking=sm.params.tracking, ess_fraction=sm.params.ess_fraction,
             progress=bool(sm.config.get("progress", False)))
