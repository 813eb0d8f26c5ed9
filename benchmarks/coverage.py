"""Does the reported uncertainty cover, and do the flags say so when it does not? (not a test)

Runs an estimator over many seeds on an RBM small enough for exact ``log Z`` (default: a strongly
coupled 40 x 14 RBM, AIS from the data base rate, K = 1000, 100 chains, 40 seeds -- the case issue
14 measured at 75 % coverage) and prints, against the exact value:

* the spread of ``log Ẑ`` over seeds beside the mean reported standard error;
* the coverage of ``log Ẑ ± 2 s.e.`` and of the bootstrap interval;
* the Pareto k-hat of each seed's log-weights (how many above 0.7);
* the report's flags for the setting (k-hat, the between-seed spread rule), as ``logzbench report``
  computes them.

    python benchmarks/coverage.py                                  # AIS from the base rate
    python benchmarks/coverage.py --method reverse-ais --init uniform --K 100
    python benchmarks/coverage.py --model poe-laplace --method hais --K 100 --cond 200   # HAIS, complete PoE
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import numpy as np
import torch
from _machine import cpu_model

from logzbench import report
from logzbench.api import estimate
from logzbench.models import BinaryRBM


def _records(model_name, method, K, init, results):
    return [
        {
            "key": f"estimate/{model_name}/{method}/K{K}/{init}/seed{s}",
            "model": model_name,
            "dataset": "synthetic",
            "estimator": method,
            "method": method,
            "K": K,
            "init": init,
            "seed": s,
            "result": r.to_dict(),
        }
        for s, r in results
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--model",
        choices=["rbm", "poe-laplace", "poe-student-t"],
        default="rbm",
        help="an RBM (exact by enumeration) or a complete product of experts (closed form)",
    )
    ap.add_argument("--dim", type=int, default=16, help="PoE: dimensions = experts")
    ap.add_argument("--cond", type=float, default=10.0, help="PoE: condition number of the filter matrix")
    ap.add_argument("--n-visible", type=int, default=40)
    ap.add_argument("--n-hidden", type=int, default=14)
    ap.add_argument("--scale", type=float, default=1.0, help="sd of the random weights (coupling strength)")
    ap.add_argument("--model-seed", type=int, default=0)
    ap.add_argument("--method", default="ais")
    ap.add_argument("--init", default="base-rate")
    ap.add_argument("--K", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--step-size", type=float, help="HAIS / AIS-HMC leapfrog step (default: the estimator's)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    if args.model == "rbm":
        g = torch.Generator().manual_seed(args.model_seed)
        model = BinaryRBM.random(args.n_visible, args.n_hidden, scale=args.scale, bias_scale=0.5, generator=g)
        # training rows for the data base rate: long Gibbs chains from the model
        v0 = torch.bernoulli(torch.full((500, model.n_visible), 0.5), generator=g)
        opts = {"train_data": model.gibbs(v0, g, n_sweeps=500), "init": args.init}
        name = f"RBM {args.n_visible}x{args.n_hidden}, weights N(0, {args.scale}^2), seed {args.model_seed}"
    else:
        from logzbench.models.poe import ProductOfExperts

        rng = np.random.default_rng(args.model_seed)
        q, _ = np.linalg.qr(rng.normal(size=(args.dim, args.dim)))
        scales = np.exp(np.linspace(0.0, math.log(args.cond), args.dim))  # singular values 1 ... cond
        expert = args.model.removeprefix("poe-")
        model = ProductOfExperts(q * scales[:, None], np.ones(args.dim), expert=expert)
        opts = {} if args.step_size is None else {"step_size": args.step_size}
        name = f"complete PoE ({expert} experts), {args.dim} dims, condition number {args.cond:g}"
    exact = float(model.exact_log_z())

    t0 = time.perf_counter()
    results = [
        (s, estimate(model, args.method, steps=args.K, chains=args.chains, seed=s, **opts)) for s in range(args.seeds)
    ]
    seconds = time.perf_counter() - t0
    lz = [r.log_z for _, r in results]
    se = [r.log_z_stderr for _, r in results]
    ci = [r.log_z_ci for _, r in results]
    kh = [r.khat for _, r in results]
    init = args.init if args.model == "rbm" else None
    per_run = report.load_results(_records(args.model, args.method, args.K, init, results))
    _, summary = report.apply_flags(per_run, report.summarize(per_run))
    row = summary.iloc[0]
    out = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": cpu_model(),
        "threads": args.threads,
        "model": name,
        "estimator": f"{args.method}{f', init {init}' if init else ''}, K {args.K}, {args.chains} chains, "
        f"{args.seeds} seeds",
        "exact_log_z": exact,
        "mean_log_z_minus_exact": statistics.fmean(lz) - exact,
        "sd_over_seeds": statistics.stdev(lz),
        "mean_reported_se": statistics.fmean(se),
        "coverage_2se": sum(abs(v - exact) <= 2 * e for v, e in zip(lz, se)) / len(lz),
        "coverage_bootstrap": sum(lo <= exact <= hi for lo, hi in ci) / len(lz),
        "khat_median": statistics.median(k for k in kh if math.isfinite(k)) if any(map(math.isfinite, kh)) else None,
        "khat_above_0.7": sum(k > 0.7 for k in kh if math.isfinite(k)),
        "se_spread_ratio": float(row.get("log_z_se_spread_ratio", float("nan"))),
        "flags": row["flags"] or "(none)",
        "seconds": round(seconds, 1),
    }
    width = max(map(len, out))
    for k, v in out.items():
        print(f"{k:>{width}}: {v:.4g}" if isinstance(v, float) else f"{k:>{width}}: {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
