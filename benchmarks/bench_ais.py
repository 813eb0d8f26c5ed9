"""AIS throughput benchmark (not a test): prints figures, asserts nothing.

For each torch thread count (``--threads``, default ``1,2``), in one process on one device:

* the float32 matrix-multiply rate for the shapes one Gibbs sweep uses
  (``(chains x n_visible) @ (n_visible x n_hidden)`` and its transpose, as ``addmm``);
* AIS on an ``n_visible x n_hidden`` RBM with ``chains`` chains: Gibbs sweeps per second
  (per chain-batch) and the achieved matmul flop rate, ``4 * chains * n_visible * n_hidden``
  flops per sweep, as a fraction of the measured matmul rate;
* the **NumPy yardstick**: the same AIS written the plain way in NumPy float32 (two products
  per sweep, sigmoid / softplus by ``np.exp`` / ``np.logaddexp``, Bernoulli draws by comparing
  ``np.random.Generator.random`` uniforms), its sweeps per second, its fraction of the same
  matmul rate, and the ratio of the two AIS rates;
* a per-sweep breakdown of the library's AIS sweep: the two products at the measured rate, the
  log-weight increment with the hidden draws (one pass of the compiled kernel over the hidden
  pre-activations), the visible draws (each timed alone), and the rest of the AIS sweep's time
  (Python, allocation, the small products, the products running below their best rate);
* the same AIS figures on a DBM (``--dbm 784,500,1000``, the RAISE paper's MNIST DBM), whose
  sweep samples the odd layers given the even ones and back: ``4 * chains * sum_l n_{l-1} n_l``
  useful flops per sweep, compared with the matmul rate of its even/odd shapes;
* with ``--cuda-graph N`` (opt-in, CUDA): the same figures for
  :func:`logzbench.estimators.ais_graph.run_graph`, whose chunks of ``N`` sweeps are replayed from
  one CUDA graph; a sweep's time is then its chunk's (synchronised) time over ``N``, from the
  replayed chunks only (the wall-clock rate includes the capture and a shorter last chunk).  Such a
  record also gives the matmul rate of pairs issued back to back with one synchronisation per 200
  pairs (``matmul_gflops_batched``), and the AIS rate as a fraction of it: a stricter yardstick than
  the per-pair synchronised one once the sweeps no longer synchronise.

The matmul pairs, AIS and the yardstick are timed in turn in ``--rounds`` rounds, each pair and
each sweep on its own, and every rate comes from the median time per pair / sweep (the wall-clock
rate of the fastest AIS run is printed too); warm-up runs are excluded from every timing.  The
machine may be shared: compare figures of the same run only.  Usage::

    python benchmarks/bench_ais.py [--n-visible 784] [--n-hidden 500] [--dbm 784,500,1000]
        [--family rbm|dbm|both] [--chains 500] [--steps 300] [--numpy-steps 100]
        [--rounds 3] [--device cpu|cuda] [--threads 1,2] [--cuda-graph N] [--json out.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import time

import numpy as np
import torch
from _machine import machine

from logzbench import schedules
from logzbench.estimators import ais
from logzbench.kernels import bernoulli_from_logits, bernoulli_from_logits_, kernel_status, reweight_and_draw
from logzbench.models import DBM, BinaryRBM
from logzbench.utils import make_generator, resolve_device


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def matmul_times(chains: int, nv: int, nh: int, dev: torch.device, seconds: float = 1.0) -> list[float]:
    """Seconds per pair of the two sweep-shaped float32 products (addmm, as the kernel uses), for
    ``seconds`` of pairs."""
    g = make_generator(0, dev)
    v = torch.rand(chains, nv, generator=g, device=dev)
    h = torch.rand(chains, nh, generator=g, device=dev)
    W = torch.rand(nv, nh, generator=g, device=dev)
    b, a = torch.rand(nh, generator=g, device=dev), torch.rand(nv, generator=g, device=dev)
    for _ in range(5):
        torch.addmm(b, v, W)
        torch.addmm(a, h, W.T)
    _sync(dev)
    times, t_end = [], time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t0 = time.perf_counter()
        torch.addmm(b, v, W)
        torch.addmm(a, h, W.T)
        _sync(dev)
        times.append(time.perf_counter() - t0)
    return times


def ais_times(model, chains: int, steps: int, dev: torch.device) -> tuple[list[float], float]:
    """Seconds of each Gibbs sweep (reweighting and transition: :func:`logzbench.estimators.ais.step`)
    of AIS with ``steps`` intermediate distributions, and the seconds of the whole run."""
    path = model.annealing_path("uniform")
    ais.run(path, schedules.linear(20), chains, make_generator(1, dev))  # warm-up
    betas = schedules.linear(steps)
    g = make_generator(2, dev)
    _sync(dev)
    t_start = time.perf_counter()
    state = ais.init(path, chains, g)
    times = []
    for k in range(len(betas) - 2):
        t0 = time.perf_counter()
        state = ais.step(path, state, float(betas[k]), float(betas[k + 1]), g)
        _sync(dev)
        times.append(time.perf_counter() - t0)
    state = ais.step(path, state, float(betas[-2]), float(betas[-1]), g, move=False)
    _sync(dev)
    return times, time.perf_counter() - t_start


def matmul_batched_time(chains: int, nv: int, nh: int, dev: torch.device, pairs: int = 200) -> float:
    """Seconds per pair of the sweep-shaped products issued ``pairs`` at a time with one
    synchronisation (median of 7 batches after a warm-up batch)."""
    g = make_generator(0, dev)
    v = torch.rand(chains, nv, generator=g, device=dev)
    h = torch.rand(chains, nh, generator=g, device=dev)
    W = torch.rand(nv, nh, generator=g, device=dev)
    b, a = torch.rand(nh, generator=g, device=dev), torch.rand(nv, generator=g, device=dev)
    out_h, out_v = torch.empty(chains, nh, device=dev), torch.empty(chains, nv, device=dev)
    times = []
    for rep in range(8):
        _sync(dev)
        t0 = time.perf_counter()
        for _ in range(pairs):
            torch.addmm(b, v, W, out=out_h)
            torch.addmm(a, h, W.T, out=out_v)
        _sync(dev)
        if rep:
            times.append((time.perf_counter() - t0) / pairs)
    return float(np.median(times))


def graph_ais_times(model, chains: int, steps: int, dev: torch.device, graph_sweeps: int) -> tuple[list[float], float]:
    """:func:`ais_times` for :func:`logzbench.estimators.ais_graph.run_graph`: seconds per sweep of
    each replayed chunk (its synchronised time over its sweeps, once per sweep), and the seconds of
    the whole run (capture, warm-up and the uncaptured last chunk included)."""
    from logzbench.estimators import ais_graph

    path = model.annealing_path("uniform")
    ais_graph.run_graph(path, schedules.linear(20), chains, make_generator(1, dev), graph_sweeps=graph_sweeps)
    betas = schedules.linear(steps)
    chunks: list = []
    _sync(dev)
    t_start = time.perf_counter()
    ais_graph.run_graph(path, betas, chains, make_generator(2, dev), graph_sweeps=graph_sweeps, chunk_times=chunks)
    _sync(dev)
    wall = time.perf_counter() - t_start
    replayed = [c for c in chunks if c[2]] or chunks
    times = [sec / cnt for sec, cnt, _ in replayed for _ in range(cnt)]
    return times, wall


def numpy_ais(
    W: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    betas: np.ndarray,
    chains: int,
    rng: np.random.Generator,
    times: list | None = None,
) -> np.ndarray:
    """The yardstick: AIS from the uniform distribution to the RBM, written the plain NumPy way.

    Parameters
    ----------
    W : ndarray, shape (n_visible, n_hidden), float32
    a, b : ndarray, shapes (n_visible,) and (n_hidden,), float32
    betas : ndarray, shape (K + 1,)
    chains : int
    rng : numpy.random.Generator
    times : list, optional
        Gets the seconds of each sweep (reweighting and transition).

    Returns
    -------
    ndarray, shape (chains,), float64
        Log-weights (``log Z_0`` included).
    """
    nv, nh = W.shape
    v = (rng.random((chains, nv), dtype=np.float32) < 0.5).astype(np.float32)
    log_w = np.full(chains, (nv + nh) * math.log(2.0))
    for k in range(len(betas) - 1):
        t0 = time.perf_counter()
        b0, b1 = np.float32(betas[k]), np.float32(betas[k + 1])
        x = v @ W + b
        log_w += (b1 - b0) * (v @ a) + (np.logaddexp(0, b1 * x) - np.logaddexp(0, b0 * x)).sum(1, dtype=np.float64)
        if k + 2 == len(betas):
            break
        h = (rng.random((chains, nh), dtype=np.float32) < 1 / (1 + np.exp(-b1 * x))).astype(np.float32)
        p_v = 1 / (1 + np.exp(-b1 * (h @ W.T + a)))
        v = (rng.random((chains, nv), dtype=np.float32) < p_v).astype(np.float32)
        if times is not None:
            times.append(time.perf_counter() - t0)
    return log_w


def numpy_times(rbm: BinaryRBM, chains: int, steps: int) -> list[float]:
    """Seconds of each sweep of :func:`numpy_ais` (same RBM, same chains)."""
    W, a, b = (t.cpu().numpy() for t in (rbm.W, rbm.visible_bias, rbm.hidden_bias))
    rng = np.random.default_rng(0)
    numpy_ais(W, a, b, schedules.linear(10), chains, rng)  # warm-up
    times: list[float] = []
    numpy_ais(W, a, b, schedules.linear(steps), chains, rng, times)
    return times


def _best_ms(fn, reps: int, dev: torch.device) -> float:
    """Milliseconds per call of ``fn``: the best of three batches of ``reps`` calls."""
    for _ in range(3):
        fn()
    best = math.inf
    for _ in range(3):
        _sync(dev)
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        _sync(dev)
        best = min(best, (time.perf_counter() - t0) / reps)
    return 1e3 * best


def breakdown(model, chains: int, dev: torch.device, reps: int = 30) -> dict:
    """Milliseconds per AIS sweep of its element-wise parts, each timed alone on one state at
    beta ~ 0.5: the log-weight increment with the hidden draws (one pass over the hidden
    pre-activations, :func:`logzbench.kernels.reweight_and_draw`), and the visible draws."""
    path = model.annealing_path("uniform")
    g = make_generator(4, dev)
    state = path.sample_initial(chains, g)
    beta, beta_next = 0.5, 0.5 + 1.0 / 300
    rbm = path.rbm
    h = bernoulli_from_logits(state.pre_h, g, scale=beta_next)
    bias_v = (1.0 - beta_next) * path.a0 + beta_next * rbm.visible_bias
    pre_v = torch.addmm(bias_v, h, rbm.W.T, beta=1.0, alpha=beta_next)
    scratch = torch.empty_like(pre_v)
    return {
        "ms_log_weights_and_hidden_draws": _best_ms(
            lambda: reweight_and_draw(state.pre_h, beta, beta_next, g, v=state.v, dv=path._da32), reps, dev
        ),
        "ms_visible_draws": _best_ms(lambda: bernoulli_from_logits_(scratch.copy_(pre_v), g), reps, dev)
        - _best_ms(lambda: scratch.copy_(pre_v), reps, dev),
    }


def measure(
    name: str,
    model,
    nv: int,
    nh: int,
    useful_flops: float,
    chains: int,
    steps: int,
    dev: torch.device,
    numpy_steps: int = 0,
    rounds: int = 3,
    graph_sweeps: int = 0,
) -> dict:
    """One benchmark record; ``nv x nh`` are the matmul shapes of a sweep, ``useful_flops`` its work.

    ``rounds`` rounds each time the matmul pairs, the AIS sweeps and the yardstick's sweeps in turn;
    rates come from the median time per pair / sweep over all rounds, which a shared machine's
    bursts of other work barely move, so that their ratios compare like with like.

    ``graph_sweeps``: time :func:`logzbench.estimators.ais_graph.run_graph` with chunks of that many
    sweeps in a CUDA graph instead of :func:`logzbench.estimators.ais.step`."""
    mm, sweeps, np_sweeps, walls, batched = [], [], [], [], []
    for _ in range(rounds):
        mm += matmul_times(chains, nv, nh, dev)
        if graph_sweeps:
            batched.append(matmul_batched_time(chains, nv, nh, dev))
            t, wall = graph_ais_times(model, chains, steps, dev, graph_sweeps)
        else:
            t, wall = ais_times(model, chains, steps, dev)
        sweeps += t
        walls.append(wall)
        if numpy_steps:
            np_sweeps += numpy_times(model, chains, numpy_steps)
    peak = 4.0 * chains * nv * nh / float(np.median(mm))
    sps = 1.0 / float(np.median(sweeps))
    parts = breakdown(model if isinstance(model, BinaryRBM) else model.as_rbm(), chains, dev)
    matmul = 1e3 * 4.0 * chains * nv * nh / peak
    rec = {
        "model": name,
        "device": (
            (platform.processor() or platform.machine()) if dev.type == "cpu" else torch.cuda.get_device_name(dev)
        ),
        "threads": torch.get_num_threads(),
        "chains": chains,
        "steps": steps,
        "rounds": rounds,
        "ais_seconds": min(walls),
        "sweeps_per_second": sps,
        "sweeps_per_second_wall": (steps - 1) / min(walls),
        "chain_sweeps_per_second": sps * chains,
        "achieved_gflops": sps * useful_flops / 1e9,
        "matmul_gflops": peak / 1e9,
        "fraction_of_matmul_rate": sps * useful_flops / peak,
        "cuda_graph": graph_sweeps,
    }
    if graph_sweeps:
        peak_batched = 4.0 * chains * nv * nh / float(np.median(batched))
        rec.update(
            {
                "matmul_gflops_batched": peak_batched / 1e9,
                "fraction_of_batched_matmul_rate": sps * useful_flops / peak_batched,
            }
        )
    if numpy_steps:
        np_sps = 1.0 / float(np.median(np_sweeps))
        rec.update(
            {
                "numpy_sweeps_per_second": np_sps,
                "numpy_fraction_of_matmul_rate": np_sps * useful_flops / peak,
                "ratio_to_numpy": sps / np_sps,
            }
        )
    rec.update(
        {
            "ms_per_sweep": 1e3 / sps,
            "ms_matmul_at_peak": matmul,
            **parts,
            "ms_other": 1e3 / sps - matmul - parts["ms_log_weights_and_hidden_draws"] - parts["ms_visible_draws"],
        }
    )
    return rec


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-visible", type=int, default=784)
    p.add_argument("--n-hidden", type=int, default=500)
    p.add_argument("--dbm", default="784,500,1000", help="DBM layer sizes, comma-separated")
    p.add_argument("--family", default="both", choices=["rbm", "dbm", "both"])
    p.add_argument("--chains", type=int, default=500)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument(
        "--numpy-steps", type=int, default=100, help="intermediate distributions of the NumPy yardstick (0: skip it)"
    )
    p.add_argument("--rounds", type=int, default=3, help="rounds of (matmul pairs, AIS, yardstick), timed in turn")
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--threads",
        default="1,2",
        help="comma-separated torch intra-op thread counts, each measured in turn (default 1,2)",
    )
    p.add_argument(
        "--cuda-graph",
        type=int,
        default=0,
        metavar="N",
        help="time AIS with chunks of N sweeps replayed from a CUDA graph (0: off, the default)",
    )
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    dev = resolve_device(args.device)
    if args.cuda_graph and dev.type != "cuda":
        p.error("--cuda-graph needs --device cuda")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# {date}; machine: {machine()}")
    print(
        f"torch {torch.__version__}, numpy {np.__version__}, {platform.processor() or platform.machine()}; "
        f"CPU draws: {kernel_status()}\n"
    )
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # the yardstick's BLAS then keeps its own thread count
        threadpool_limits = None
    records = []
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        limit = threadpool_limits(limits=threads) if threadpool_limits else None
        try:
            if args.family in ("rbm", "both"):
                nv, nh = args.n_visible, args.n_hidden
                rbm = BinaryRBM.random(nv, nh, scale=0.05, generator=make_generator(0, "cpu")).to(dev)
                records.append(
                    measure(
                        f"RBM {nv}x{nh}",
                        rbm,
                        nv,
                        nh,
                        4.0 * args.chains * nv * nh,
                        args.chains,
                        args.steps,
                        dev,
                        numpy_steps=args.numpy_steps if dev.type == "cpu" else 0,
                        rounds=args.rounds,
                        graph_sweeps=args.cuda_graph,
                    )
                )
            if args.family in ("dbm", "both"):
                sizes = [int(n) for n in args.dbm.split(",")]
                dbm = DBM.random(sizes, scale=0.05, generator=make_generator(0, "cpu")).to(dev)
                view = dbm.as_rbm()
                useful = 4.0 * args.chains * sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))
                records.append(
                    measure(
                        f"DBM {'-'.join(map(str, sizes))}",
                        dbm,
                        view.n_visible,
                        view.n_hidden,
                        useful,
                        args.chains,
                        args.steps,
                        dev,
                        rounds=args.rounds,
                        graph_sweeps=args.cuda_graph,
                    )
                )
        finally:
            if limit is not None:
                limit.restore_original_limits()
    for out in records:
        for k, v in out.items():
            print(f"{k:>32}: {v:.4g}" if isinstance(v, float) else f"{k:>32}: {v}")
        print()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([{"date": date, "machine": machine(), **r} for r in records], fh, indent=2)
    return records


if __name__ == "__main__":
    main()
