"""Bring-your-own-energy throughput benchmark (not a test): the generic Metropolis path against the
native Gibbs kernel on the same RBM.

A :class:`logzbench.models.EnergyModel` on binary states anneals with
:class:`~logzbench.models.energy_path.DiscreteEnergyPath`: one Metropolis-within-Gibbs sweep proposes a
flip at every site in turn, so it costs ``n_visible`` calls of ``log_f`` on all chains.  A family with
its own sampler does far less: an RBM's block-Gibbs sweep is two matrix products.  This script prices
the difference on equivalent work:

* ``BinaryRBM.random(n_visible, n_hidden)`` and its :class:`~logzbench.models.rbm.RBMAnnealingPath`
  (uniform start): one block-Gibbs sweep ``v -> h -> v``;
* an :class:`EnergyModel` whose ``log_f`` is the *same* RBM's free energy,
  ``log f(v) = v.a + sum_j softplus(v W + b)_j`` in float32 like the RBM, with its
  :class:`DiscreteEnergyPath` (uniform start): one Metropolis-within-Gibbs sweep;

both ``transition`` at ``beta`` (default 0.5) on the same number of chains, in one process, in
interleaved repetitions (each repetition times a batch of RBM sweeps, then a batch of energy sweeps),
after a warm-up.  It reports each path's sweeps per second (median over repetitions of the per-sweep
time) and chain-sweeps per second, their ratio, the energy path's acceptance rate, and the machine,
date and torch threads; and, timed in the same repetitions, the float32 product
``(chains x n_visible) @ (n_visible x n_hidden)`` that one ``log_f`` call makes (an RBM sweep makes
two), so that the ratio can be read against its floor, ``n_visible / 2`` products.

The two paths' intermediate distributions differ (the RBM's path is geometric on the joint ``(v, h)``,
the energy's on the marginal ``p(v)``), but both end at the RBM: as a check that the comparison is of
equivalent work, both estimate log Z of a small RBM (``--check-visible`` x ``--check-hidden``) by AIS,
compared with exact enumeration, within ``--check-z`` standard errors.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_energy.py --threads 1 [--n-visible 784] [--n-hidden 500]
        [--chains 100] [--beta 0.5] [--reps 5] [--rbm-sweeps 50] [--energy-sweeps 2] [--json out.json]

The machine may be shared: compare figures of the same run only.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time

import torch
from _machine import cpu_model, machine
from torch import nn

from logzbench.api import estimate
from logzbench.models import BinaryRBM, EnergyModel
from logzbench.utils import make_generator


class RBMFreeEnergy(nn.Module):
    """``log f(v) = v.a + sum_j softplus(v W + b)_j``: an RBM's unnormalised marginal as a module."""

    def __init__(self, rbm: BinaryRBM):
        super().__init__()
        self.register_buffer("W", rbm.W.detach().float().clone())
        self.register_buffer("a", rbm.visible_bias.detach().float().clone())
        self.register_buffer("b", rbm.hidden_bias.detach().float().clone())

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        return v @ self.a + nn.functional.softplus(torch.addmm(self.b, v, self.W)).sum(1)


def energy_twin(rbm: BinaryRBM) -> EnergyModel:
    """The :class:`EnergyModel` whose ``log_f`` is ``rbm``'s free energy (float32, as the RBM)."""
    return EnergyModel(RBMFreeEnergy(rbm), rbm.n_visible, "binary", name="rbm-free-energy")


def time_sweeps(path, state, beta: float, n: int, g: torch.Generator):
    """``(seconds per sweep, final state)`` of ``n`` transitions at ``beta``."""
    t0 = time.perf_counter()
    for _ in range(n):
        state = path.transition(state, beta, g)
    return (time.perf_counter() - t0) / n, state


def product_seconds(rbm: BinaryRBM, v: torch.Tensor, seconds: float = 0.3) -> float:
    """Median seconds of one ``addmm(b, v, W)``: the product inside one call of the energy's ``log_f``
    (and each of the two products of an RBM sweep), float32."""
    W, b = rbm.W.float(), rbm.hidden_bias.float()
    torch.addmm(b, v, W)
    times, t_end = [], time.perf_counter() + seconds
    while time.perf_counter() < t_end or len(times) < 5:
        t0 = time.perf_counter()
        torch.addmm(b, v, W)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def throughput(args) -> dict:
    g = make_generator(args.seed)
    rbm = BinaryRBM.random(args.n_visible, args.n_hidden, scale=args.scale, generator=g)
    em = energy_twin(rbm)
    rbm_path = rbm.annealing_path("uniform")
    en_path = em.annealing_path("uniform")
    rs = rbm_path.sample_initial(args.chains, g)
    es = en_path.sample_initial(args.chains, g)
    # warm-up (allocator, kernel loading), not timed
    _, rs = time_sweeps(rbm_path, rs, args.beta, max(2, args.rbm_sweeps // 10), g)
    _, es = time_sweeps(en_path, es, args.beta, 1, g)
    en_path.n_proposed = en_path.n_accepted = 0
    rbm_t, en_t, mm_t = [], [], []
    for rep in range(args.reps):
        mm_t.append(product_seconds(rbm, es.x))
        t, rs = time_sweeps(rbm_path, rs, args.beta, args.rbm_sweeps, g)
        rbm_t.append(t)
        t, es = time_sweeps(en_path, es, args.beta, args.energy_sweeps, g)
        en_t.append(t)
        print(
            f"  rep {rep + 1}/{args.reps}: RBM {1 / rbm_t[-1]:8.1f} sweeps/s   energy {1 / en_t[-1]:8.3f} sweeps/s",
            flush=True,
        )
    rbm_med, en_med, mm_med = statistics.median(rbm_t), statistics.median(en_t), statistics.median(mm_t)
    return {
        "product_ms": 1e3 * mm_med,
        "product_gflops": 2 * args.chains * args.n_visible * args.n_hidden / mm_med / 1e9,
        "floor_ratio": args.n_visible / 2,
        "rbm_sweeps_per_s": 1.0 / rbm_med,
        "energy_sweeps_per_s": 1.0 / en_med,
        "rbm_chain_sweeps_per_s": args.chains / rbm_med,
        "energy_chain_sweeps_per_s": args.chains / en_med,
        "ratio": en_med / rbm_med,
        "rbm_range": [1.0 / max(rbm_t), 1.0 / min(rbm_t)],
        "energy_range": [1.0 / max(en_t), 1.0 / min(en_t)],
        "energy_ms_per_log_f_call": 1e3 * en_med / args.n_visible,
        "energy_site_over_product": en_med / args.n_visible / mm_med,
        "rbm_sweep_over_products": rbm_med / (2 * mm_med),
        "energy_acceptance": en_path.acceptance_rate,
    }


def equivalence(args) -> dict:
    """AIS log Z of a small RBM through both paths, against exact enumeration."""
    g = make_generator(args.seed + 1)
    rbm = BinaryRBM.random(args.check_visible, args.check_hidden, scale=args.check_scale, generator=g, bias_scale=0.5)
    em = energy_twin(rbm)
    exact = estimate(rbm, "exact", seed=0, threads=args.threads).log_z
    exact_em = estimate(em, "exact", seed=0, threads=args.threads).log_z
    out = {"exact": exact, "exact_energy": exact_em}
    for name, m in (("rbm", rbm), ("energy", em)):
        r = estimate(
            m, "ais", K=args.check_K, chains=args.check_chains, seed=args.seed, init="uniform", threads=args.threads
        )
        out[name] = {
            "log_z": r.log_z,
            "stderr": r.log_z_stderr,
            "seconds": r.seconds,
            "z": (r.log_z - exact) / r.log_z_stderr if r.log_z_stderr > 0 else float("nan"),
        }
    out["agree"] = bool(
        abs(exact - exact_em) < 1e-4 and all(abs(out[n]["z"]) <= args.check_z for n in ("rbm", "energy"))
    )
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-visible", type=int, default=784)
    ap.add_argument("--n-hidden", type=int, default=500)
    ap.add_argument("--scale", type=float, default=0.01, help="std of the random RBM's weights")
    ap.add_argument("--chains", type=int, default=100)
    ap.add_argument("--beta", type=float, default=0.5)
    ap.add_argument("--reps", type=int, default=5, help="interleaved repetitions")
    ap.add_argument("--rbm-sweeps", type=int, default=50, help="RBM sweeps per repetition")
    ap.add_argument("--energy-sweeps", type=int, default=2, help="energy sweeps per repetition")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check-visible", type=int, default=20)
    ap.add_argument("--check-hidden", type=int, default=10)
    ap.add_argument("--check-scale", type=float, default=0.5)
    ap.add_argument("--check-K", type=int, default=1000)
    ap.add_argument("--check-chains", type=int, default=200)
    ap.add_argument("--check-z", type=float, default=4.0, help="agreement: within this many standard errors")
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    now = datetime.datetime.now(datetime.timezone.utc)
    print(
        f"bench_energy: {now:%Y-%m-%d %H:%M} UTC, {machine()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} torch thread(s)"
    )
    print(
        f"RBM {args.n_visible}x{args.n_hidden} (weights N(0, {args.scale}^2)), {args.chains} chains, "
        f"beta = {args.beta}, "
        f"{args.reps} interleaved repetitions of {args.rbm_sweeps} RBM / {args.energy_sweeps} energy sweeps"
    )
    tp = throughput(args)
    rows = [
        ("path", "sweeps/s (median)", "range", "chain-sweeps/s"),
        (
            "RBM block Gibbs (native)",
            f"{tp['rbm_sweeps_per_s']:.1f}",
            f"{tp['rbm_range'][0]:.1f}-{tp['rbm_range'][1]:.1f}",
            f"{tp['rbm_chain_sweeps_per_s']:.3g}",
        ),
        (
            "EnergyModel Metropolis",
            f"{tp['energy_sweeps_per_s']:.3f}",
            f"{tp['energy_range'][0]:.3f}-{tp['energy_range'][1]:.3f}",
            f"{tp['energy_chain_sweeps_per_s']:.3g}",
        ),
    ]
    print()
    for r in rows:
        print(f"{r[0]:<28} {r[1]:>18} {r[2]:>16} {r[3]:>15}")
    print(
        f"ratio (energy time per sweep / RBM time per sweep): {tp['ratio']:.0f}x; energy path: "
        f"{tp['energy_ms_per_log_f_call']:.2f} ms per site (one log_f call on {args.chains} chains), "
        f"acceptance {tp['energy_acceptance']:.3f}"
    )
    print(
        f"one product ({args.chains}x{args.n_visible} @ {args.n_visible}x{args.n_hidden}, float32): "
        f"{tp['product_ms']:.3f} ms ({tp['product_gflops']:.1f} GFLOP/s); energy: {tp['energy_site_over_product']:.2f} "
        f"products' time per site; RBM: {tp['rbm_sweep_over_products']:.2f}x its two products per sweep; the floor "
        f"of the ratio, n_visible / 2 products: {tp['floor_ratio']:.0f}x"
    )
    out = {
        "date": now.isoformat(timespec="seconds"),
        "machine": machine(),
        "cpu": cpu_model(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "args": vars(args),
        "throughput": tp,
    }
    if not args.skip_check:
        eq = equivalence(args)
        out["equivalence"] = eq
        print(
            f"\nsame target: AIS log Z of a {args.check_visible}x{args.check_hidden} RBM (weights N(0, "
            f"{args.check_scale}^2), K = {args.check_K}, {args.check_chains} chains), exact {eq['exact']:.4f} "
            f"(energy enumeration {eq['exact_energy']:.4f})"
        )
        for n in ("rbm", "energy"):
            e = eq[n]
            print(
                f"  {n:<7} {e['log_z']:.4f} ± {e['stderr']:.4f}  ({e['z']:+.2f} s.e. from exact, {e['seconds']:.1f} s)"
            )
        print(f"  agree within {args.check_z:g} s.e.: {eq['agree']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return out


if __name__ == "__main__":
    res = main(sys.argv[1:])
    sys.exit(0 if res.get("equivalence", {"agree": True})["agree"] else 1)
