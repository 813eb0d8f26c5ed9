"""Hard-model benchmark (not a test): prints figures, asserts nothing.

The models researchers train, where temperature annealing from a product distribution misses the data's
modes, with exact ``log Z``; for each contender, the **total sweeps** (chain-sweeps: transitions times
chains, every tuning round, pilot and replica included; the mixture reference's EM added as its component
passes, data passes times components, each run's stated as ``em_cost``) before the **median over 5 seeds
of |log Z_hat - log Z|** falls below ``--tol`` (0.1 nat), confirmed on 5 fresh seeds (1000, ...).  The
budget ``K`` is doubled from ``--k-start`` up to ``--k-cap`` (:func:`bench_schedules.measure`, the same
loop as the schedule benchmark).

Contenders (all through :func:`logzbench.api.estimate`, 100 chains):

* ``ais`` with the ``linear``, ``sigmoid``, ``adaptive`` and ``tuned`` schedules, each from the
  ``base-rate`` reference (the training rows' per-unit means; ``uniform`` for a model without rows) and
  from the ``mixture`` reference (:mod:`logzbench.models.mixture`: a mixture of product distributions fitted
  to the training rows by EM); ``K`` is the number of temperatures (tuned: of its last round);
* ``smc``: tempered SMC with resampling, its temperatures chosen by the conditional ESS (0.95); ``K`` is its
  particles per replica (8 replicas);
* ``pt``: non-reversible parallel tempering (16 temperatures, 8 replicas); ``K`` is the scans of its last
  round, after ``log2 K`` tuning rounds of 1, 2, ..., K / 2 scans;

``smc`` and ``pt`` also from both references.

Models (``--model``, repeatable; default all):

* ``synth-rbm60-14``: bench_schedules' RBM 60-14 trained by PCD on six 60-bit prototypes;
* ``mnist-rbm20``: the default config's MNIST RBM 784-20 (CD-1);
* ``mnist-rbm20-pcd``: a 784-20 MNIST RBM trained longer by PCD (``--pcd-epochs``, default 30);
* ``clustered-rbm400-18``: an RBM 400-18 trained by PCD-1 (1,000 epochs, learning rate 0.1) on 2,000 rows
  of the ``clustered`` data source (seed 3): eight 400-bit prototypes of unequal mass (0.30 ... 0.04) with
  1-10 % bit flips.  Temperature AIS from the base rate misses its ``log Z`` by tens of nats (seeds 0-7 of
  the recipe give models from easy to 70 nats missed; seed 3 is the hard one);
* ``clustered-rbm12``: the default config's RBM 100-12 trained by PCD on the ``clustered`` data source;
* ``spin-glass-16x48``: a 16 x 48 grid of Gaussian couplings at inverse temperature ``--sg-beta`` (no rows:
  ``uniform`` reference; exact ``log Z`` by the transfer matrix).

Usage::

    python benchmarks/bench_hard_models.py [--quick] [--threads 1] [--seeds 5] [--k-start 16] [--k-cap 4096]
        [--contenders ais-linear/base-rate,...] [--model NAME ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_schedules as bs
from _machine import cpu_model, machine

from logzbench.api import estimate
from logzbench.models.grid import GridMRF

AIS_SCHEDULES = ("linear", "sigmoid", "adaptive", "tuned")
REFERENCES = ("base-rate", "mixture")
#: every contender, ``method/schedule/reference`` style labels
CONTENDERS = tuple(f"{m}/{r}" for r in REFERENCES for m in [f"ais-{s}" for s in AIS_SCHEDULES] + ["smc", "pt"])
FULL_MODELS = (
    "synth-rbm60-14",
    "mnist-rbm20",
    "mnist-rbm20-pcd",
    "clustered-rbm12",
    "clustered-rbm400-18",
    "spin-glass-16x48",
)
QUICK_MODELS = ("synth-rbm20-8", "clustered-rbm60-10", "spin-glass-6x10")


CLUSTER_WEIGHTS = (0.30, 0.20, 0.15, 0.10, 0.08, 0.07, 0.06, 0.04)
CLUSTER_FLIPS = (0.01, 0.03, 0.05, 0.02, 0.10, 0.04, 0.08, 0.06)


def train_clustered(n_visible: int, n_hidden: int, epochs: int, n_protos: int = 8, seed: int = 0):
    """An RBM trained by PCD-1 on 2,000 rows of the ``clustered`` data source
    (:func:`logzbench.data.clustered.make_clustered`: the first ``n_protos`` prototypes of
    :data:`CLUSTER_WEIGHTS` and :data:`CLUSTER_FLIPS`)."""
    from logzbench.data.clustered import make_clustered

    X = make_clustered(
        n_visible, n_protos, CLUSTER_WEIGHTS[:n_protos], CLUSTER_FLIPS[:n_protos], n_train=2000, n_test=100, seed=seed
    )["train"]
    return bs.train_pcd(X, n_hidden, epochs, seed), X


def build(names, workdir: Path, args) -> list[bs.Bench]:
    cfg = bs._config()
    out = []
    for name in names:
        t0 = time.perf_counter()
        if name in bs.FULL_MODELS + bs.QUICK_MODELS:
            b = bs.build_models([name], workdir, quick=False)[0]
            out.append(b)
            continue
        if name == "clustered-rbm12":  # the default config's clustered PCD RBM, trained as the workflow does
            model, X = bs._train_config_model(cfg, name, workdir)
            note = "config clustered-rbm12 (PCD-1 on the clustered data source)"
        elif name == "mnist-rbm20-pcd":
            model, X = bs._train_config_model(
                cfg, "mnist-rbm20", workdir, {"method": "pcd", "n_epochs": args.pcd_epochs, "n_persistent_chains": 100}
            )
            note = f"mnist-rbm20's preset trained by PCD-1 for {args.pcd_epochs} epochs"
        elif name == "clustered-rbm400-18":
            model, X = train_clustered(400, 18, 1000, seed=3)
            note = "PCD-1, 1000 epochs, 8 prototypes x 400 bits of unequal mass, 1-10 % flips"
        elif name == "clustered-rbm60-10":
            model, X = train_clustered(60, 10, 300, n_protos=4)
            note = "PCD-1, 300 epochs, 4 prototypes x 60 bits (quick)"
        elif name.startswith("spin-glass-"):
            h, w = (int(x) for x in name.rsplit("-", 1)[1].split("x"))
            model, X = GridMRF.spin_glass(h, w, beta=args.sg_beta, couplings="gaussian", seed=0), None
            note = f"Gaussian couplings at inverse temperature {args.sg_beta}"
        else:
            raise ValueError(f"unknown model {name!r}; choose from {FULL_MODELS + QUICK_MODELS}")
        b = bs.Bench(name, model, X, note)
        b.train_seconds = time.perf_counter() - t0 - b.exact_seconds
        out.append(b)
    return out


def variant(label: str, bench: bs.Bench) -> dict | None:
    """The settings of contender ``label`` on ``bench`` (``None``: it does not apply, e.g. a mixture without
    training rows)."""
    method_schedule, _, ref = label.partition("/")
    if ref == "mixture" and bench.train is None:
        return None
    init = bench.init if ref == "base-rate" else ref
    method, _, schedule = method_schedule.partition("-")
    return {"label": label, "method": method, "schedule": schedule or None, "init": init}


def run_one(bench: bs.Bench, seed: int, K: int, threads: int, chains: int, v: dict, _cache=None) -> dict:
    """One estimate at budget ``K``: its error, total sweeps (the EM's component passes added) and seconds."""
    t0 = time.perf_counter()
    kw = {"K": K, "chains": chains, "init": v["init"], "seed": seed, "threads": threads, "n_bootstrap": 1}
    if v["schedule"]:
        kw["schedule"] = v["schedule"]
    if v["method"] == "smc":  # its temperatures by the conditional ESS: the budget is its particles
        kw.update(K=None, chains=int(K))
    if v["method"] == "pt":  # as many tuning scans as final ones: rounds of 1, 2, ..., K / 2 scans
        kw.pop("chains")
        kw["rounds"] = max(1, int(K).bit_length() - 1)
    if v["init"] in ("base-rate", "mixture"):
        kw["train_data"] = bench.train
    res = estimate(bench.model, v["method"], **kw)
    em = int(res.extra.get("reference_em_passes", 0) or 0)
    return {
        "seed": seed,
        "K": K,
        "log_z": float(res.log_z),
        "error": float(res.log_z) - bench.log_z,
        "total_sweeps": int(res.total_sweeps) + em,
        "em_cost": em,
        "seconds": time.perf_counter() - t0,
        **{k: res.extra[k] for k in ("pilot_sweeps", "tuning_sweeps", "reference_components") if k in res.extra},
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny models, 2 seeds, K up to 256 (a smoke run)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 (default 5; --quick 2)")
    p.add_argument("--k-start", type=int, default=16)
    p.add_argument("--k-cap", type=int, default=None, help="largest K tried (default 4096; --quick 256)")
    p.add_argument("--tol", type=float, default=0.1)
    p.add_argument("--chains", type=int, default=100)
    p.add_argument("--contenders", default=",".join(CONTENDERS), help=f"comma-separated subset of {CONTENDERS}")
    p.add_argument("--model", action="append", help=f"model(s) (default {FULL_MODELS}; --quick {QUICK_MODELS})")
    p.add_argument("--pcd-epochs", type=int, default=30)
    p.add_argument("--sg-beta", type=float, default=1.5, help="the spin glass's inverse temperature")
    p.add_argument("--no-confirm", action="store_true")
    p.add_argument("--json")
    args = p.parse_args(argv)
    seeds = list(range(args.seeds if args.seeds is not None else (2 if args.quick else 5)))
    k_cap = args.k_cap if args.k_cap is not None else (256 if args.quick else 4096)
    labels = [c.strip() for c in args.contenders.split(",") if c.strip()]
    for c in labels:
        if c not in CONTENDERS:
            p.error(f"unknown contender {c!r}; choose from {CONTENDERS}")
    prev = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return _run(args, seeds, k_cap, labels)
    finally:
        torch.set_num_threads(prev)


def _run(args, seeds, k_cap, labels) -> dict:
    started = time.perf_counter()
    now = datetime.datetime.now().astimezone()
    print(
        f"# bench_hard_models  {now.isoformat(timespec='seconds')}\n"
        f"# machine: {machine(' | ')} | Python {platform.python_version()} | torch {torch.__version__}\n"
        f"# torch threads: {torch.get_num_threads()}; chains {args.chains}; seeds {seeds}; K doubled from "
        f"{args.k_start} to at most {k_cap}; target median |log Z_hat - log Z| < {args.tol} nat",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        benches = build(args.model or (QUICK_MODELS if args.quick else FULL_MODELS), Path(tmp), args)
    models = []
    for b in benches:
        models.append({"model": b.name, "family": b.model.family, "exact_log_z": b.log_z, "note": b.note})
        print(f"# model {b.name}: exact log Z {b.log_z:.4f}; {b.note}; trained in {b.train_seconds:.1f} s", flush=True)
    results = []
    for b in benches:
        for label in labels:
            v = variant(label, b)
            if v is None:
                continue
            try:
                r = bs.measure(
                    b,
                    {**v, "schedule": v["schedule"] or v["method"]},
                    seeds,
                    args.k_start,
                    k_cap,
                    args.tol,
                    args.threads,
                    args.chains,
                    {},
                    confirm_seeds=() if args.no_confirm else [1000 + s for s in seeds],
                    runner=lambda bench, s, K, th, ch, vv, c: run_one(bench, s, K, th, ch, v),
                )
            except (ValueError, RuntimeError) as e:  # a contender that refuses this model: say so
                print(f"    {b.name:20s} {label:24s} refused: {e}", flush=True)
                continue
            r["contender"] = label
            results.append(r)
    print(f"\n{'model':20s} {'contender':24s} {'K':>7s} {'total sweeps':>13s} {'median |err|':>12s} {'confirm':>8s}")
    for r in results:
        c = r.get("confirm_median_abs_error")
        print(
            f"{r['model']:20s} {r['contender']:24s} {r['K']:7d}{' cap' if r['capped'] else '    '}"
            f"{('>' if r['capped'] else '') + format(r['total_sweeps'], '.3g'):>10s} {r['median_abs_error']:12.4f} "
            f"{'' if c is None else f'{c:.4f}':>8s}"
        )
    wall = time.perf_counter() - started
    print(f"\ntotal wall time {wall:.0f} s")
    out = {
        "date": now.isoformat(),
        "machine": machine(),
        "cpu": cpu_model(),
        "threads": torch.get_num_threads(),
        "seeds": seeds,
        "k_cap": k_cap,
        "tol": args.tol,
        "models": models,
        "results": results,
        "wall_seconds": wall,
    }
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1, default=float)
    return out


if __name__ == "__main__":
    main()
