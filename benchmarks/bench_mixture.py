"""Mixture-reference benchmark (not a test): prints figures, asserts nothing.

AIS error on a clustered PCD-trained RBM (issue 38) from three starts, over ``--seeds`` seeds at each K:

* ``base-rate``: the data base rate, block Gibbs on the geometric path (the RBM's own path);
* ``mixture``: the augmented mixture path of :mod:`logzbench.models.mixture` (``z`` summed out of the
  weights), block Gibbs ``z, h | v`` then ``v | z, h``;
* ``mixture-mh``: the same mixture as the reference of the plain geometric path ``q^(1-beta) f^beta``
  with single-site Metropolis-within-Gibbs sweeps (the model wrapped as a user energy,
  :class:`~logzbench.models.energy_path.DiscreteEnergyPath` with the mixture as its reference).

The model: ``--visible`` (100) visible and ``--hidden`` (14) hidden units, PCD-1 for ``--epochs`` (300) epochs on
2,000 rows of ``len(NOISES)`` random prototypes of unequal mass (:data:`MASSES`) with 1-10 % bit flips
(:data:`NOISES`); exact log Z by enumerating the hidden layer.  The mixture is fitted once (EM, ``C`` by
held-out log-likelihood); its EM cost is printed in component passes over the data.  Costs are sweeps
(K x chains; one sweep updates every visible unit once), not seconds.  Usage::

    python benchmarks/bench_mixture.py [--seeds 5] [--K 16,64,256,1024] [--chains 100] [--epochs 300]
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_schedules as bs
from _machine import machine

from logzbench.estimators import ais
from logzbench.models import EnergyModel
from logzbench.models.energy_path import DiscreteEnergyPath
from logzbench.models.mixture import fit_mixture

#: the prototypes' masses and bit-flip rates
MASSES = (0.4, 0.25, 0.15, 0.1, 0.06, 0.04)
NOISES = (0.01, 0.03, 0.05, 0.02, 0.1, 0.08)


def prototype_rows(n_visible: int, n_rows: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    protos = (rng.random((len(MASSES), n_visible)) < 0.5).astype(np.uint8)
    idx = rng.choice(len(MASSES), size=n_rows, p=np.asarray(MASSES) / sum(MASSES))
    flips = (rng.random((n_rows, n_visible)) < np.asarray(NOISES)[idx][:, None]).astype(np.uint8)
    return protos[idx] ^ flips


def train(n_visible: int, n_hidden: int, epochs: int, seed: int = 0):
    """PCD-1 (learning rate 0.05 decaying linearly, batches of 20, 500 persistent chains) on 2,000 rows."""
    X = prototype_rows(n_visible, 2000, seed)
    model = bs.train_pcd(X, n_hidden, epochs, seed, **{**bs.SCRATCH, "learning_rate": 0.05, "batch_size": 20,
                                                         "n_persistent_chains": 500})  # fmt: skip
    return model, X


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--K", default="16,64,256,1024")
    ap.add_argument("--chains", type=int, default=100)
    ap.add_argument("--visible", type=int, default=100)
    ap.add_argument("--hidden", type=int, default=14)
    ap.add_argument("--epochs", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--paths", default="base-rate,mixture,mixture-mh", help="the starts to run (comma-separated)")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    Ks = [int(k) for k in a.K.split(",")]
    t0 = time.perf_counter()
    rbm, X = train(a.visible, a.hidden, a.epochs)
    exact = rbm.exact_log_z()
    rows = torch.as_tensor(X, dtype=torch.float32)
    from bench_schedules import hidden_modes

    mass, dist = hidden_modes(rbm)
    model_ll = float(rbm.log_unnormalized_marginal(rows).mean()) - exact
    fit = fit_mixture(rows, seed=0)
    print(f"# {datetime.date.today()}  {machine()}  threads {a.threads}")
    print(
        f"# RBM {a.visible}x{a.hidden}, PCD-1 {a.epochs} epochs on 2000 rows of {len(MASSES)} prototypes "
        f"(masses {MASSES}, flips {NOISES}); exact log Z = {exact:.4f}; trained in {time.perf_counter() - t0:.0f} s"
    )
    print(
        f"# model: training log-likelihood {model_ll:.2f} nats per row; modes of p(h) (mass, Hamming distance of "
        "their visible patterns from the heaviest's): "
        + ", ".join(f"{m:.3f} @ {int(d)}" for m, d in zip(mass[:6], dist[:6]))
    )
    print(
        f"# mixture: C = {fit.n_components}, training log-likelihood {fit.train_log_lik:.2f} (held-out per row: "
        + ", ".join(f"{k}: {v:.2f}" for k, v in fit.heldout_by_components.items())
        + f"), EM {fit.em_passes} component passes over the data ({fit.em_row_evaluations} row evaluations)"
    )
    energy = EnergyModel(lambda x: rbm.log_unnormalized_marginal(x.float()), a.visible, "binary")
    paths = {
        "base-rate": rbm.annealing_path("base-rate", data=rows),
        "mixture": rbm.annealing_path("mixture", reference=fit.mixture),
        "mixture-mh": DiscreteEnergyPath(energy, fit.mixture),
    }
    paths = {n: p for n, p in paths.items() if n in a.paths.split(",")}
    print(
        f"# |AIS log Z error| (nats), median and max over {a.seeds} seeds, and the median stated standard error; "
        f"{a.chains} chains; sweeps = K x chains"
    )
    print("| K | sweeps | " + " | ".join(f"{n} median | {n} max | {n} s.e." for n in paths) + " |")
    print("|---:|---:|" + "---:|---:|---:|" * len(paths))
    for K in Ks:
        betas = np.linspace(0.0, 1.0, K + 1)
        cells = []
        for path in paths.values():
            runs = [
                ais.ais(path, betas, a.chains, torch.Generator().manual_seed(s), n_bootstrap=0) for s in range(a.seeds)
            ]
            errs = [abs(r.log_z - exact) for r in runs]
            se = np.median([r.log_z_stderr for r in runs])
            cells += [f"{np.median(errs):.3f}", f"{max(errs):.3f}", f"{se:.3f}"]
        print(f"| {K} | {K * a.chains} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
