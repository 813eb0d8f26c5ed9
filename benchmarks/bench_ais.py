"""AIS throughput benchmark (not a test): prints figures, asserts nothing.

Measures, in one process on one device:

* the float32 matrix-multiply rate for the shapes one Gibbs sweep uses
  (``(chains x n_visible) @ (n_visible x n_hidden)`` and its transpose);
* AIS on an ``n_visible x n_hidden`` RBM with ``chains`` chains: Gibbs sweeps per second
  (per chain-batch) and the achieved matmul flop rate, ``4 * chains * n_visible * n_hidden``
  flops per sweep, as a fraction of the measured matmul rate;
* the same for AIS on a DBM (``--dbm 784,500,1000``, the RAISE paper's MNIST DBM), whose
  sweep samples the odd layers given the even ones and back: ``4 * chains * sum_l n_{l-1} n_l``
  useful flops per sweep, compared with the matmul rate of its even/odd shapes.

Warm-up runs are excluded from every timing.  Usage::

    python benchmarks/bench_ais.py [--n-visible 784] [--n-hidden 500] [--dbm 784,500,1000]
        [--family rbm|dbm|both] [--chains 500] [--steps 300] [--device cpu|cuda] [--threads N]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from logzbench import schedules
from logzbench.estimators import ais
from logzbench.models import DBM, BinaryRBM
from logzbench.utils import make_generator, resolve_device


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def matmul_rate(chains: int, nv: int, nh: int, dev: torch.device, min_seconds: float = 2.0) -> float:
    """Flops/s of the two sweep-shaped float32 products (addmm, as the kernel uses)."""
    g = make_generator(0, dev)
    v = torch.rand(chains, nv, generator=g, device=dev)
    h = torch.rand(chains, nh, generator=g, device=dev)
    W = torch.rand(nv, nh, generator=g, device=dev)
    b, a = torch.rand(nh, generator=g, device=dev), torch.rand(nv, generator=g, device=dev)
    for _ in range(5):
        torch.addmm(b, v, W)
        torch.addmm(a, h, W.T)
    _sync(dev)
    n, t0 = 0, time.perf_counter()
    while True:
        torch.addmm(b, v, W)
        torch.addmm(a, h, W.T)
        n += 1
        if n % 10 == 0:
            _sync(dev)
            if time.perf_counter() - t0 > min_seconds:
                break
    return n * 4.0 * chains * nv * nh / (time.perf_counter() - t0)


def rng_seconds_per_sweep(chains: int, nv: int, nh: int, dev: torch.device, reps: int = 50) -> float:
    """Seconds per sweep spent drawing the sweep's uniforms alone (``chains * (nv + nh)``)."""
    from logzbench.sampling import uniform

    g = make_generator(3, dev)
    for _ in range(3):
        uniform((chains, nh), g, dev), uniform((chains, nv), g, dev)
    _sync(dev)
    t0 = time.perf_counter()
    for _ in range(reps):
        uniform((chains, nh), g, dev), uniform((chains, nv), g, dev)
    _sync(dev)
    return (time.perf_counter() - t0) / reps


def ais_rate(model, chains: int, steps: int, dev: torch.device) -> tuple[float, float]:
    """(sweeps per second, seconds) of AIS with ``steps`` intermediate distributions."""
    path = model.annealing_path("uniform")
    ais.run(path, schedules.linear(20), chains, make_generator(1, dev))  # warm-up
    _sync(dev)
    t0 = time.perf_counter()
    _, n_sweeps = ais.run(path, schedules.linear(steps), chains, make_generator(2, dev))
    _sync(dev)
    dt = time.perf_counter() - t0
    return n_sweeps / dt, dt


def measure(name: str, model, nv: int, nh: int, useful_flops: float, chains: int, steps: int,
            dev: torch.device) -> dict:
    """One benchmark record; ``nv x nh`` are the matmul shapes of a sweep, ``useful_flops`` its work."""
    peak = matmul_rate(chains, nv, nh, dev)
    sps, seconds = ais_rate(model, chains, steps, dev)
    peak = max(peak, matmul_rate(chains, nv, nh, dev))
    rng = rng_seconds_per_sweep(chains, nv, nh, dev)
    sweep = 1.0 / sps
    matmul = 4.0 * chains * nv * nh / peak
    return {
        "model": name,
        "device": str(dev) if dev.type == "cpu" else torch.cuda.get_device_name(dev),
        "threads": torch.get_num_threads(),
        "chains": chains,
        "steps": steps,
        "ais_seconds": seconds,
        "sweeps_per_second": sps,
        "chain_sweeps_per_second": sps * chains,
        "achieved_gflops": sps * useful_flops / 1e9,
        "matmul_gflops": peak / 1e9,
        "fraction_of_matmul_rate": sps * useful_flops / peak,
        "ms_per_sweep": 1e3 * sweep,
        "ms_matmul_at_peak": 1e3 * matmul,
        "ms_uniform_draws": 1e3 * rng,
        "ms_other": 1e3 * (sweep - matmul - rng),
    }


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-visible", type=int, default=784)
    p.add_argument("--n-hidden", type=int, default=500)
    p.add_argument("--dbm", default="784,500,1000", help="DBM layer sizes, comma-separated")
    p.add_argument("--family", default="both", choices=["rbm", "dbm", "both"])
    p.add_argument("--chains", type=int, default=500)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = resolve_device(args.device)
    records = []
    if args.family in ("rbm", "both"):
        nv, nh = args.n_visible, args.n_hidden
        rbm = BinaryRBM.random(nv, nh, scale=0.05, generator=make_generator(0, "cpu")).to(dev)
        records.append(measure(f"RBM {nv}x{nh}", rbm, nv, nh, 4.0 * args.chains * nv * nh, args.chains,
                               args.steps, dev))
    if args.family in ("dbm", "both"):
        sizes = [int(n) for n in args.dbm.split(",")]
        dbm = DBM.random(sizes, scale=0.05, generator=make_generator(0, "cpu")).to(dev)
        view = dbm.as_rbm()
        useful = 4.0 * args.chains * sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))
        records.append(measure(f"DBM {'-'.join(map(str, sizes))}", dbm, view.n_visible, view.n_hidden, useful,
                               args.chains, args.steps, dev))
    for out in records:
        for k, v in out.items():
            print(f"{k:>26}: {v:.4g}" if isinstance(v, float) else f"{k:>26}: {v}")
        print()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(records, fh, indent=2)
    return records


if __name__ == "__main__":
    main()
