"""Create the MLflow store and experiment once (rule init_tracking); write the sentinel."""

import sys
import time

sys.stdout = sys.stderr = open(snakemake.log[0], "w", buffering=1)  # noqa: F821

from logzbench.utils import write_json_atomic  # noqa: E402

t = dict(snakemake.params.tracking)  # noqa: F821
info = {"enabled": t["enabled"]}
if t["enabled"]:
    from logzbench.tracking import init_store

    info.update(init_store(t["uri"], t["experiment"], t["artifact_dir"]))
    print(f"MLflow store ready: {info['uri']} (experiment {info['experiment_name']!r}, id {info['experiment_id']})")
else:
    print("MLflow tracking disabled (tracking.enabled: false)")
info["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
write_json_atomic(snakemake.output[0], info)  # noqa: F821
