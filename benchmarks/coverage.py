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
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import torch

from _machine import cpu_model
from logzbench import report
from logzbench.api import estimate
from logzbench.models import BinaryRBM


def _records(model_name, method, K, init, results):
    return [{"key": f"estimate/{model_name}/{method}/K{K}/{init}/seed{s}", "model": model_name,
             "dataset": "synthetic", "estimator": method, "method": method, "K": K, "init": init, "seed": s,
             "result": r.to_dict()} for s, r in results]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-visible", type=int, default=40)
    ap.add_argument("--n-hidden", type=int, default=14)
    ap.add_argument("--scale", type=float, default=1.0, help="sd of the random weights (coupling strength)")
    ap.add_argument("--model-seed", type=int, default=0)
    ap.add_argument("--method", default="ais")
    ap.add_argument("--init", default="base-rate")
    ap.add_argument("--K", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    g = torch.Generator().manual_seed(args.model_seed)
    rbm = BinaryRBM.random(args.n_visible, args.n_hidden, scale=args.scale, bias_scale=0.5, generator=g)
    exact = float(rbm.exact_log_z())
    # training rows for the data base rate: long Gibbs chains from the model
    v0 = torch.bernoulli(torch.full((500, rbm.n_visible), 0.5), generator=g)
    train = rbm.gibbs(v0, g, n_sweeps=500)

    t0 = time.perf_counter()
    results = [(s, estimate(rbm, args.method, train_data=train, steps=args.K, chains=args.chains, init=args.init,
                            seed=s)) for s in range(args.seeds)]
    seconds = time.perf_counter() - t0
    lz = [r.log_z for _, r in results]
    se = [r.log_z_stderr for _, r in results]
    ci = [r.log_z_ci for _, r in results]
    kh = [r.khat for _, r in results]
    per_run = report.load_results(_records("rbm", args.method, args.K, args.init, results))
    _, summary = report.apply_flags(per_run, report.summarize(per_run))
    row = summary.iloc[0]
    out = {
        "date": time.strftime("%Y-%m-%d"), "machine": cpu_model(), "threads": args.threads,
        "model": f"RBM {args.n_visible}x{args.n_hidden}, weights N(0, {args.scale}^2), seed {args.model_seed}",
        "estimator": f"{args.method}, init {args.init}, K {args.K}, {args.chains} chains, {args.seeds} seeds",
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
