"""One estimate (rules estimate_exact / estimate_csl / estimate_annealed): logzbench.api.estimate.

Writes the per-chain arrays (.npz), logs one MLflow run keyed by the settings, then the
JSON record (settings + EstimateResult.to_dict() + the run id).
"""

import sys

sys.stdout = sys.stderr = open(snakemake.log[0], "w", buffering=1)  # noqa: F821

import numpy as np  # noqa: E402
import torch  # noqa: E402

from logzbench.api import estimate  # noqa: E402
from logzbench.models.io import CONTINUOUS_FAMILIES  # noqa: E402
from logzbench.data import load_prepared  # noqa: E402
from logzbench.tracking import estimate_key  # noqa: E402
from logzbench.utils import code_version, save_npz_atomic, write_json_atomic  # noqa: E402

sm = snakemake  # noqa: F821
torch.set_num_threads(sm.threads)
s = dict(sm.params.settings)
method = s["method"]
if s.get("family") in CONTINUOUS_FAMILIES:  # real-valued rows (whitened image patches)
    from logzbench.data.vanhateren import load_patches

    test, train = load_patches(sm.input.data, "test"), None
else:
    test, train = load_prepared(sm.input.data, "test"), load_prepared(sm.input.data, "train")

kwargs = dict(data=test, train_data=train, seed=s["seed"] or 0, device=s["device"],
              progress=bool(sm.config.get("progress", False)))
if method in ("ais", "raise", "ads", "ads-multinomial", "reverse-ais"):  # annealed binary-model estimators
    kwargs.update(steps=s["K"], schedule=s["schedule"], chains=s["chains"], init=s["init"])
    if s.get("is_samples"):  # DBM / DBN: importance samples per example for log f(v)
        kwargs.update(is_samples=s["is_samples"])
    if method == "raise":
        kwargs.update(n_examples=s["n_examples"])
elif method in ("hais", "ais-hmc", "ais-mh"):
    kwargs.update(steps=s["K"], schedule=s["schedule"], chains=s["chains"], step_size=s["step_size"],
                  gamma=s["gamma"], mh_sigma=s["mh_sigma"], proposal_scale=s["proposal_scale"])
elif method == "csl":
    kwargs.update(chains=s["chains"], csl_mode=s["csl_mode"], burn_in=s["burn_in"], thin=s["thin"],
                  samples_per_chain=s["samples_per_chain"])
print(f"{method} on {s['model']} ({s.get('family', 'rbm')} {s.get('hidden_sizes')}): {({k: v for k, v in kwargs.items() if k not in ('data', 'train_data')})}")

res = estimate(sm.input.model, method, **kwargs)

key = estimate_key(s["model"], s["estimator"], s["K"], s["init"], s["seed"])
record = {"key": key, **s, "code_version": code_version(), "arrays": str(sm.output.arrays), "result": res.to_dict()}
arrays = res.arrays() or {"log_weights": np.zeros(0)}
save_npz_atomic(sm.output.arrays, **arrays)

t = sm.params.tracking
if t["enabled"]:
    from logzbench.tracking import log_estimate

    record["mlflow_run_id"] = log_estimate(
        record, uri=t["uri"], experiment_name=t["experiment"], artifacts=[sm.output.arrays],
        ess_fraction=sm.params.ess_fraction,
        extra_tags={"logzbench.family": s.get("family", "rbm"), "logzbench.hidden_sizes": s.get("hidden_sizes")})
write_json_atomic(sm.output.json, record)
r = record["result"]
print(f"log Z = {r['log_z']}, mean test LL = {r['mean_log_likelihood']} +- {r['mean_log_likelihood_stderr']}, "
      f"ESS = {r['ess']}, {r['seconds']} s")
if (r.get("extra") or {}).get("mean_log_f_is") is not None:
    x = r["extra"]
    print(f"log f(v) by importance sampling ({x.get('is_samples')} samples): mean {x['mean_log_f_is']} +- "
          f"{x.get('mean_log_f_is_stderr')} (Jensen gap ~ {x.get('mean_log_f_is_jensen_gap')}); "
          f"mean-field bound {x.get('mean_log_f_mean_field')}")
