"""Train one model (rule train_model): logzbench.training.train_model (RBM, DBM or DBN), then log the run."""

import sys
import time

sys.stdout = sys.stderr = open(snakemake.log[0], "w", buffering=1)  # noqa: F821

import torch  # noqa: E402

from logzbench import registry  # noqa: E402
from logzbench.data import load_rows  # noqa: E402
from logzbench.models import save_model  # noqa: E402
from logzbench.plotting import plot_history  # noqa: E402
from logzbench.training import history_to_csv, train_model  # noqa: E402
from logzbench.utils import code_version, write_json_atomic  # noqa: E402

sm = snakemake  # noqa: F821
torch.set_num_threads(sm.threads)
model_name = sm.wildcards.model
hp = dict(sm.params.hyperparams)
hp.setdefault("device", sm.params.device)
family = str(hp.pop("family", "rbm")).lower()
fam = registry.family(family)
binary = fam.kind == "binary"  # continuous models train on whitened image patches
train, test = (load_rows(sm.input.data, fam.data_kind, split, prepared=True) for split in ("train", "test"))
print(f"training {model_name} ({family}) on {sm.params.dataset}: {train.shape[0]} x {train.shape[1]}; {hp}")

t0 = time.perf_counter()
# "progress" is not an argument of the continuous trainers
extra = {"progress": bool(sm.config.get("progress", False))} if binary else {}
model, history = train_model(train, test, family=family, **{**hp, **extra})
seconds = time.perf_counter() - t0

save_model(model, sm.output.model)
history_to_csv(history, sm.output.history)
plot_history(history, sm.output.plot, title=model_name)
final = {f"final_{k}": v for k, v in (history[-1] if history else {}).items() if isinstance(v, (int, float))}
final["train_seconds"] = seconds

# hidden layer sizes: [n_hidden] for an RBM, layer_sizes[1:] for a DBM / DBN, [size] for a continuous model
if not binary:
    sizes, n_vis = [int(model.size)], int(model.n_dims)
else:
    sizes = [int(n) for n in (model.layer_sizes[1:] if hasattr(model, "layer_sizes") else [model.n_hidden])]
    n_vis = int(model.n_visible)
record = {"model": model_name, "dataset": sm.params.dataset, "family": family, "n_visible": n_vis,
          "hidden_sizes": sizes, "n_hidden": sizes[0] if family == "rbm" else None,
          "hyperparams": {"family": family, **hp}, "seconds": seconds, "final": final,
          "code_version": code_version(), "n_train": int(train.shape[0]), "n_test": int(test.shape[0])}
t = sm.params.tracking
if t["enabled"]:
    from logzbench.tracking import log_training

    def _tracked(row):
        """Deep trainers record greedy pretraining epochs (phase != "joint", one series per layer) before
        joint training; give those their own metric names so that the per-epoch series do not mix."""
        phase = row.get("phase")
        if not isinstance(phase, str) or phase in ("", "joint", "train"):
            return row
        layer = row.get("layer")
        prefix = f"{phase}_" if layer is None or str(layer) in phase else f"{phase}_l{layer}_"
        return {(k if k == "epoch" else prefix + k): v for k, v in row.items()}

    record["mlflow_run_id"] = log_training(
        model_name, hyperparams=hp, history=[_tracked(r) for r in history], summary=final, uri=t["uri"], experiment_name=t["experiment"],
        dataset=sm.params.dataset, artifacts=[sm.output.history, sm.output.plot, sm.output.model],
        extra_params={"family": family, "n_visible": n_vis, "hidden_sizes": sizes, "n_train": train.shape[0]},
    )
write_json_atomic(sm.output.summary, record)
print(f"done in {seconds:.1f} s: {final}")
