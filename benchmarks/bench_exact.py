"""Exact-enumeration benchmark (not a test): prints figures, asserts nothing.

Times :func:`logzbench.models.enumeration.exact_log_z` on a random ``784 x n`` RBM
(``2^n`` states, ``n = --bits``) in one process, for every requested device:

* ``float64`` with the default kernel (the float64 product kernel when safe) and with
  ``kernel="softplus"`` (the elementwise float64 softplus, the arithmetic of the previous code);
* ``mixed`` (float32 pre-activations and softplus, float64 sums), with its a-priori error bound
  and its observed difference from float64.

Each configuration runs ``--repeats`` times, interleaved (so a load change on a shared machine
hits all of them alike), after one untimed warm-up on ``--warmup-bits`` states; the minimum is
reported together with the ratios to ``float64/softplus``.  The header prints the machine,
torch's thread count and the date.  Usage::

    python benchmarks/bench_exact.py [--bits 22] [--device cpu|cuda|all] [--threads N]
        [--scale 0.1] [--repeats 2] [--chunk-size N] [--json out.json]

The issue's GPU measurement is ``python benchmarks/bench_exact.py --bits 25 --device cuda``
(2^25 states of a 784 x 25 RBM).  On a CPU, ``--bits 22`` takes about a minute per repeat in
float64/softplus on one core of a 2-core EPYC.  On a shared, loaded machine ``--threads 1``
gives steadier ratios than oversubscribed threads.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import time

import torch
from _machine import machine

from logzbench.models import BinaryRBM
from logzbench.models.enumeration import exact_log_z

#: (label, precision, kernel)
CONFIGS = [("float64", "float64", "auto"), ("float64/softplus", "float64", "softplus"), ("mixed", "mixed", "auto")]


def _machine() -> str:
    return f"{machine(' | ')} | Python {platform.python_version()} | torch {torch.__version__}"


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def run(bits: int, device: str, repeats: int, scale: float, chunk_size: int | None, warmup_bits: int) -> list[dict]:
    dev = torch.device(device)
    gen = torch.Generator().manual_seed(0)
    rbm = BinaryRBM.random(784, bits, scale=scale, bias_scale=0.5, generator=gen, device=dev)
    small = BinaryRBM.random(784, min(bits, warmup_bits), scale=scale, bias_scale=0.5, generator=gen, device=dev)
    for _, precision, kernel in CONFIGS:  # warm-up: kernels, allocator, threads
        exact_log_z(small, chunk_size=chunk_size, precision=precision, kernel=kernel)
    times = {label: [] for label, _, _ in CONFIGS}
    values = {}
    for _ in range(repeats):
        for label, precision, kernel in CONFIGS:
            _sync(dev)
            t0 = time.perf_counter()
            values[label] = exact_log_z(
                rbm, chunk_size=chunk_size, precision=precision, kernel=kernel, return_bound=True
            )
            _sync(dev)
            times[label].append(time.perf_counter() - t0)
    ref_label = "float64/softplus"
    base = min(times[ref_label])
    rows = []
    for label, precision, kernel in CONFIGS:
        t = min(times[label])
        v = values[label]
        rows.append(
            {
                "device": str(dev),
                "bits": bits,
                "n_visible": 784,
                "label": label,
                "precision": precision,
                "kernel": kernel,
                "seconds": t,
                "seconds_all": times[label],
                "states_per_second": (1 << bits) / t,
                "speedup_vs_float64_softplus": base / t,
                "log_z": v.log_z,
                "bound": v.bound,
                "diff_vs_float64": v.log_z - values["float64"].log_z,
            }
        )
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bits", type=int, default=22, help="smaller layer's units n (2^n states); default 22")
    p.add_argument("--device", default="cpu", help="cpu, cuda[:i] or all (cpu and, when available, cuda)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--scale", type=float, default=0.1, help="standard deviation of the random weights")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--chunk-size", type=int, default=None, help="states per step (default: automatic)")
    p.add_argument("--warmup-bits", type=int, default=12)
    p.add_argument("--json", default=None, help="also write the rows to this file")
    args = p.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    devices = [args.device]
    if args.device == "all":
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"# bench_exact  {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"# machine: {_machine()}")
    print(f"# torch threads: {torch.get_num_threads()}")
    for d in devices:
        if d.startswith("cuda"):
            print(f"# cuda: {torch.cuda.get_device_name(torch.device(d))}")
    print(
        f"# RBM 784 x {args.bits} (2^{args.bits} = {1 << args.bits} states), weights N(0, {args.scale}^2), "
        f"biases N(0, 0.25), repeats {args.repeats} (minimum reported)"
    )
    print(
        f"{'device':8s} {'config':18s} {'seconds':>9s} {'states/s':>10s} {'x f64/sp':>9s} "
        f"{'log Z':>18s} {'bound':>9s} {'diff vs f64':>12s}"
    )
    rows = []
    for d in devices:
        for r in run(args.bits, d, args.repeats, args.scale, args.chunk_size, args.warmup_bits):
            rows.append(r)
            print(
                f"{r['device']:8s} {r['label']:18s} {r['seconds']:9.2f} {r['states_per_second']:10.3g} "
                f"{r['speedup_vs_float64_softplus']:9.2f} {r['log_z']:18.10f} {r['bound']:9.2e} "
                f"{r['diff_vs_float64']:12.2e}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "date": datetime.datetime.now().astimezone().isoformat(),
                    "machine": _machine(),
                    "threads": torch.get_num_threads(),
                    "rows": rows,
                },
                fh,
                indent=1,
            )


if __name__ == "__main__":
    main()
