"""Bring-your-own-energy benchmarks (not tests): what a user's energy costs on the generic paths, against
the native sampler of the same model, in three modes (``--mode``).

``throughput`` (the default): the generic Metropolis path against the native Gibbs kernel on the same RBM.
A :class:`logzbench.models.EnergyModel` on binary states anneals with
:class:`~logzbench.models.energy_path.DiscreteEnergyPath`: one Metropolis-within-Gibbs sweep proposes a
flip at every site in turn, so it costs ``n_visible`` calls of ``log_f`` on all chains.  A family with
its own sampler does far less: an RBM's block-Gibbs sweep is two matrix products.  This mode prices
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

``accuracy``: wall time to a ``--tol`` (0.1-nat) median |error| of AIS log Z over ``--seeds`` (5) seeds,
per transition, on a 784-16 RBM (by default trained by PCD-1 on binarized MNIST rows, ``--rbm pcd``;
``--rbm random``: ``BinaryRBM.random`` with weights ``N(0, --scale^2)``).  ``native`` is the RBM's own
block-Gibbs path (``estimate(rbm, "ais", ...)``); ``gibbs``, ``gwg``, ``dmala`` and ``auto`` are the
:class:`EnergyModel` of its free energy (:func:`energy_twin`) through ``estimate(..., transition=...)``;
``conditional`` is the RBM's joint energy over ``(v, h)`` written by hand with its exact conditional
(:func:`joint_twin`: block Gibbs over the colour classes visible | hidden, from the native path's start).
Every run is ``logzbench.api.estimate(model, "ais", K=K, chains=C, seed=s, init=..., threads=...)``;
``K`` doubles from ``--k-start`` until the median |log Z - exact| over the seeds is below ``--tol``
(:func:`bench_schedules.measure`), or ``K`` would pass ``--k-cap``, or the method's next level would end
past ``--max-seconds`` (``--gibbs-max-seconds`` for the generic Metropolis-within-Gibbs path, which costs
``n_visible`` calls of ``log_f`` per sweep).  A method that stops short is "not reached", with its best
level and an *extrapolated* K and wall time (median |error| taken to fall as 1/K from its last level,
labelled as such, never as a measurement).  Reported per method: K, median wall time per run at that K
(the transition's pilot included), sweeps per chain, the tuned parameter and acceptance the result
records, and the ratio of the wall time to the native path's.  Exact log Z: the package's enumeration
of the hidden layer (``rbm.exact_log_z()``), checked against ``logsumexp_h [b.h + sum_i softplus(a_i +
W_i.h)]`` in float64 over the 2^16 hidden states (:func:`hidden_log_z`) and, on a small RBM, against the
energy twin's own exact enumeration over its visible states.

``mlp``: a 784-256-1 MLP energy ``log f(x) = w2 . tanh(W1 (2x - 1) + b1) + b2`` (:class:`MLPEnergy`, random
weights of fixed seed) as a binary :class:`EnergyModel`.  Per transition: effective samples per second
at beta = 1 (chains annealed to beta = 1 by a short AIS run, then ``--ess-draws`` transitions, or as
many as ``--ess-seconds`` allow, recording ``log f``; bulk ESS of that trace over chains and draws by
``arviz_stats``, over the draws' wall time), and AIS log Z with its standard error; then every pair's
z-score ``(a - b) / sqrt(se_a^2 + se_b^2)``, any ``|z| > 3`` flagged (exit status 1).  ``auto`` runs the
AIS estimate with ``transition="auto"`` and shows what it picked (and its pilot's per-candidate figures
where the result records them).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_energy.py --threads 1 [--n-visible 784] [--n-hidden 500]
        [--chains 100] [--beta 0.5] [--reps 5] [--rbm-sweeps 50] [--energy-sweeps 2] [--json out.json]
    OMP_NUM_THREADS=1 python benchmarks/bench_energy.py --mode accuracy --threads 1 [--rbm pcd|random]
        [--pcd-epochs 20] [--transitions native,gibbs,gwg,dmala,auto] [--seeds 5] [--tol 0.1]
        [--k-start 64] [--k-cap 65536] [--max-seconds 1800] [--gibbs-max-seconds 600] [--json out.json]
    OMP_NUM_THREADS=1 python benchmarks/bench_energy.py --mode mlp --threads 1 [--n-hidden 256]
        [--transitions gibbs,gwg,dmala,auto] [--K 5000] [--K-gibbs 200] [--ess-burn 100]
        [--ess-burn-moves 5000] [--ess-draws 2000] [--ess-seconds 60] [--json out.json]

``--n-visible``, ``--n-hidden`` and ``--scale`` default per mode (784 x 500 and 0.01; 784 x 16 and 0.1
for ``--rbm random``; 784 x 256 and 8.0, the MLP's output scale; ``--in-scale`` 2.0).  With
``--n-visible`` at most 20 the MLP mode also compares every estimate with the exact log Z.  The machine
may be shared: compare figures of the same run only.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_model, machine
from torch import nn

from logzbench.api import estimate
from logzbench.models import BinaryRBM, EnergyModel
from logzbench.utils import make_generator

STARTED = time.perf_counter()


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


class RBMJoint(nn.Module):
    """``log f(v, h) = v.a + h.b + v W h`` on the ``n_visible + n_hidden`` sites ``x = [v, h]``, with its exact
    conditional (:meth:`conditional`): the RBM's joint energy written by hand, as a user would."""

    def __init__(self, rbm: BinaryRBM):
        super().__init__()
        self.register_buffer("W", rbm.W.detach().float().clone())
        self.register_buffer("a", rbm.visible_bias.detach().float().clone())
        self.register_buffer("b", rbm.hidden_bias.detach().float().clone())
        self.n_visible = rbm.n_visible

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v, h = x[:, : self.n_visible], x[:, self.n_visible :]
        return v @ self.a + h @ self.b + ((v @ self.W) * h).sum(1)

    def conditional(self, x: torch.Tensor, c: int) -> torch.Tensor:
        """Log-odds of colour class ``c`` (0: the visible units, 1: the hidden ones) given the other."""
        if c == 0:
            return torch.addmm(self.a, x[:, self.n_visible :], self.W.T)
        return torch.addmm(self.b, x[:, : self.n_visible], self.W)


def joint_twin(rbm: BinaryRBM, rows=None) -> EnergyModel:
    """The :class:`EnergyModel` of ``rbm``'s joint energy (:class:`RBMJoint`) with its exact conditional and the
    colouring visible | hidden, from the reference the native path starts from: the smoothed base rate of
    ``rows`` on the visible sites (uniform without rows), uniform on the hidden ones.  Its ``log Z`` is the
    RBM's."""
    from logzbench.models.energy_path import FactorizedReference
    from logzbench.models.potts import base_rate_logits, site_frequencies

    V, H = rbm.n_visible, rbm.n_hidden
    log_p = torch.zeros(V + H, 2, dtype=torch.float64)
    if rows is not None:
        log_p[:V] = base_rate_logits(site_frequencies(torch.as_tensor(rows).long(), 2), 0.05)
    f = RBMJoint(rbm)
    return EnergyModel(
        f,
        V + H,
        "binary",
        reference=FactorizedReference(log_p),
        name="rbm-joint-energy",
        conditional=f.conditional,
        colouring=[range(V), range(V, V + H)],
    )


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


# --------------------------------------------------------------------------- the transitions, by name
NATIVE = "native"
#: ``conditional``: the RBM's joint energy with its exact conditional (:func:`joint_twin`), block Gibbs
CONDITIONAL = "conditional"
ACCURACY_TRANSITIONS = (NATIVE, CONDITIONAL, "gibbs", "gwg", "dmala", "auto")
MLP_TRANSITIONS = ("gibbs", "gwg", "dmala", "auto")
#: what the result's settings and extra say about the transition (its pilot, what ``auto`` picked)
_KERNEL_KEYS = ("transition", "accept", "flip", "step", "alpha", "param")


def energy_path(model: EnergyModel, transition: str, init: str = "uniform", data=None):
    """``model``'s annealing path with ``transition`` (``gibbs``: the path as it was before issue 39)."""
    if transition == "gibbs":
        return model.annealing_path(init, data=data)
    return model.annealing_path(init, data=data, transition=transition)


def run_ais(model, transition: str, *, K: int, chains: int, seed: int, init: str, train, schedule: str, threads):
    """One AIS estimate, ``logzbench.api.estimate(model, "ais", ...)``, with ``transition`` (``native``: the
    model's own path, no ``transition=``); returns ``(result, wall seconds)``, the transition's pilot
    (``auto``'s choice, the tuning) included in both."""
    kw = {"K": K, "chains": chains, "seed": seed, "init": init, "schedule": schedule, "threads": threads}
    kw["n_bootstrap"] = 1
    if init == "base-rate" and transition != CONDITIONAL:  # the joint twin carries its own reference
        kw["train_data"] = train
    if transition == CONDITIONAL:
        kw["init"] = "uniform"  # (ignored: the model's reference is the start)
    elif transition != NATIVE:
        kw["transition"] = transition
    t0 = time.perf_counter()
    res = estimate(model, "ais", **kw)
    return res, time.perf_counter() - t0


def kernel_info(res) -> dict:
    """What ``res`` records about its transition (:class:`logzbench.estimators.transition.TransitionChoice`):
    the settings' and extra's entries whose names say transition, acceptance, flips, step size (dmala's
    ``alpha``) or parameter."""
    out = {}
    for src in (res.settings, res.extra):
        for k, v in (src or {}).items():
            if any(w in k.lower() for w in _KERNEL_KEYS):
                out[k] = v
    return out


def _short(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_short(x)}" for k, x in v.items()) + "}"
    return str(v)


def kernel_summary(info: dict) -> str:
    """One short line of :func:`kernel_info`: what ran, its tuned parameter, acceptance and pilot sweeps
    (``auto``'s per-candidate figures and the pilot's seconds left to the JSON)."""
    skip = ("candidates", "pilot_seconds", "transition_requested")
    line = "; ".join(f"{k} {_short(v)}" for k, v in info.items() if not any(w in k for w in skip))
    req = info.get("transition_requested")
    return (f"requested {req}; " if req and req != info.get("transition") else "") + (line or "-")


# --------------------------------------------------------------------------- (a) accuracy
def hidden_log_z(rbm: BinaryRBM, chunk: int = 4096) -> float:
    """``log Z = logsumexp_h [b.h + sum_i softplus(a_i + W_i.h)]`` over all ``2^n_hidden`` hidden states, float64
    (:meth:`BinaryRBM.log_unnormalized_hidden_marginal`): the cross-check of the package's enumeration."""
    n = rbm.n_hidden
    bits = torch.arange(n)
    parts = []
    for start in range(0, 1 << n, chunk):
        idx = torch.arange(start, min(start + chunk, 1 << n))
        h = ((idx[:, None] >> bits) & 1).double()
        parts.append(torch.logsumexp(rbm.log_unnormalized_hidden_marginal(h), 0))
    return float(torch.logsumexp(torch.stack(parts), 0))


def exact_checks(rbm: BinaryRBM, log_z: float, args) -> dict:
    """The exact log Z three ways: the package's (``log_z``) against :func:`hidden_log_z` on ``rbm``; and
    on a small RBM (16 x 8) the package's, :func:`hidden_log_z` and the energy twin's own enumeration of
    its visible states; plus the twin's ``log_f`` against the RBM's float64 free energy on a few states."""
    direct = hidden_log_z(rbm)
    small = BinaryRBM.random(16, 8, scale=0.5, generator=make_generator(args.seed + 2), bias_scale=0.5)
    s_pkg = estimate(small, "exact", seed=0, threads=args.threads).log_z
    s_direct = hidden_log_z(small)
    s_twin = estimate(energy_twin(small), "exact", seed=0, threads=args.threads).log_z
    v = (torch.rand(64, rbm.n_visible, generator=make_generator(args.seed + 3)) < 0.5).float()
    lf_err = float((energy_twin(rbm).log_f(v).double() - rbm.log_unnormalized_marginal(v)).abs().max())
    tol = 1e-6 * max(1.0, abs(log_z))
    ok = abs(direct - log_z) < tol and abs(s_direct - s_pkg) < 1e-6 * max(1.0, abs(s_pkg))
    ok = ok and abs(s_twin - s_pkg) < 1e-4 and lf_err < 1e-5 * max(1.0, abs(log_z))
    return {
        "package": log_z,
        "hidden_enumeration": direct,
        "small_package": s_pkg,
        "small_hidden_enumeration": s_direct,
        "small_energy_enumeration": s_twin,
        "twin_log_f_max_abs_diff": lf_err,
        "agree": bool(ok),
    }


def accuracy_model(args, workdir):
    """``(rbm, training rows or None, note)``: PCD-1 on binarized MNIST (the config's ``mnist-10k``, the
    preset of ``mnist-rbm20`` with ``--n-hidden`` units) or ``BinaryRBM.random``."""
    if args.rbm == "random":
        rbm = BinaryRBM.random(
            args.n_visible, args.n_hidden, scale=args.scale, generator=make_generator(args.seed), bias_scale=0.5
        )
        return rbm, None, f"BinaryRBM.random, weights N(0, {args.scale}^2), biases N(0, 0.25), seed {args.seed}"
    import bench_schedules as bs

    over = {"n_hidden": args.n_hidden, "method": "pcd", "n_epochs": args.pcd_epochs, "n_persistent_chains": 100}
    over["exact_ll_max_units"] = 0
    rbm, X = bs._train_config_model(bs._config(), "mnist-rbm20", workdir, over)
    return rbm, X, f"PCD-1, {args.pcd_epochs} epochs on the config's mnist-10k (stochastically binarized MNIST)"


def accuracy(args) -> dict:
    import tempfile
    from pathlib import Path

    import bench_schedules as bs

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        rbm, X, note = accuracy_model(args, Path(tmp))
    train_s = time.perf_counter() - t0
    bench = bs.Bench(f"rbm{rbm.n_visible}-{rbm.n_hidden}", rbm, X, note)
    init = args.init or bench.init
    twin = energy_twin(rbm)
    checks = exact_checks(rbm, bench.log_z, args)
    print(
        f"model: RBM {rbm.n_visible}x{rbm.n_hidden}, {note} ({train_s:.1f} s); exact log Z {bench.log_z:.6f} "
        f"(package enumeration of the hidden layer, {bench.exact_seconds:.2f} s; direct float64 logsumexp over h "
        f"{checks['hidden_enumeration']:.6f}; 16x8 check: package {checks['small_package']:.6f}, over h "
        f"{checks['small_hidden_enumeration']:.6f}, energy twin {checks['small_energy_enumeration']:.6f}; twin log_f "
        f"within {checks['twin_log_f_max_abs_diff']:.1e}): {'agree' if checks['agree'] else 'DISAGREE'}"
    )
    print(
        f"AIS: init {init}, schedule {args.schedule}, {args.chains} chains, seeds 0..{args.seeds - 1}, K doubled from "
        f"{args.k_start} to at most {args.k_cap} until the median |log Z - exact| < {args.tol} nat; at most "
        f"{args.max_seconds:.0f} s per method ({args.gibbs_max_seconds:.0f} s for gibbs)",
        flush=True,
    )
    seeds = list(range(args.seeds))
    results = {}
    joint = joint_twin(rbm, X if init == "base-rate" else None) if CONDITIONAL in args.transitions else None
    for name in args.transitions:
        model = rbm if name == NATIVE else joint if name == CONDITIONAL else twin

        def runner(b, s, K, th, ch, v, cache, name=name, model=model):
            res, wall = run_ais(
                model, name, K=K, chains=ch, seed=s, init=init, train=X, schedule=args.schedule, threads=th
            )
            return {
                "seed": s,
                "K": K,
                "log_z": float(res.log_z),
                "stderr": float(res.log_z_stderr),
                "error": float(res.log_z) - b.log_z,
                "total_sweeps": int(res.total_sweeps),
                "n_sweeps": int(res.n_sweeps),
                "seconds": wall,
                "estimator_seconds": float(res.seconds),
                "kernel": kernel_info(res),
            }

        limit = args.gibbs_max_seconds if name == "gibbs" else args.max_seconds
        try:  # a warm-up run (allocator, kernel loading, first calls), not counted
            run_ais(
                model,
                name,
                K=2,
                chains=args.chains,
                seed=10**6,
                init=init,
                train=X,
                schedule=args.schedule,
                threads=args.threads,
            )
            r = bs.measure(
                bench,
                {"label": name, "schedule": args.schedule, "K": args.k_start},
                seeds,
                args.k_start,
                args.k_cap,
                args.tol,
                args.threads,
                args.chains,
                {},
                confirm_seeds=[1000 + s for s in seeds] if args.confirm else (),
                runner=runner,
                max_seconds=limit,
            )
        except (ValueError, RuntimeError, TypeError) as e:  # refused, or not in this checkout: say so, go on
            print(f"    {name:8s} unavailable: {str(e).splitlines()[0] if str(e) else type(e).__name__}", flush=True)
            results[name] = {"unavailable": str(e)}
            continue
        results[name] = summarize_level(r, args.tol)
    ratios_to_native(results)
    print_accuracy(results, args)
    return {
        "model": {"n_visible": rbm.n_visible, "n_hidden": rbm.n_hidden, "note": note, "init": init},
        **{"exact": checks, "results": results},
    }


def summarize_level(r: dict, tol: float) -> dict:
    """The figures of :func:`bench_schedules.measure`'s outcome: at the last level (where the median
    |error| fell below ``tol``, else the one doubling stopped at) the median wall time per run, sweeps
    per chain, the kernel's record; the best level tried; and, not reached, the extrapolation."""
    import numpy as np

    last = r["levels"][-1]
    runs = last["runs"]
    out = {
        "reached": bool(r["reached"]),
        "stopped": r.get("stopped"),
        "K": int(last["K"]),
        "median_abs_error": float(last["median_abs_error"]),
        "seconds_per_run": float(np.median([x["seconds"] for x in runs])),
        "sweeps_per_chain": int(np.median([x["n_sweeps"] for x in runs])),
        "total_sweeps": float(last["median_total_sweeps"]),
        "kernel": runs[0]["kernel"],
        "method_seconds": float(r["seconds"]),
        "levels": [
            {
                "K": lv["K"],
                "median_abs_error": lv["median_abs_error"],
                "seconds_per_run": float(np.median([x["seconds"] for x in lv["runs"]])),
                "runs": lv["runs"],
            }
            for lv in r["levels"]
        ],
    }
    best = min(out["levels"], key=lambda lv: lv["median_abs_error"])
    out["best_K"], out["best_median_abs_error"] = int(best["K"]), float(best["median_abs_error"])
    out["extrapolated_K"] = out["extrapolated_seconds_per_run"] = None
    err = out["median_abs_error"]
    if not out["reached"] and err > tol and np.isfinite(err):
        # AIS's error falls about as 1/K once the schedule is fine enough: an estimate, not a measurement
        out["extrapolated_K"] = out["K"] * err / tol
        out["extrapolated_seconds_per_run"] = out["seconds_per_run"] * err / tol
    return out


def ratios_to_native(results: dict) -> None:
    """Each transition's wall time per run over the native path's: ``ratio_to_native`` where both reached
    the tolerance (measured); ``extrapolated_ratio_to_native`` where either is extrapolated (against the
    native path's measured time, or its extrapolation, ``native_extrapolated``)."""
    nat = results.get(NATIVE, {})
    if "seconds_per_run" not in nat:
        return
    nat_s = nat["seconds_per_run"] if nat["reached"] else nat["extrapolated_seconds_per_run"]
    for name, r in results.items():
        if "seconds_per_run" not in r:
            continue
        if r["reached"] and nat["reached"]:
            r["ratio_to_native"] = r["seconds_per_run"] / nat_s
        elif name != NATIVE and nat_s:
            mine = r["seconds_per_run"] if r["reached"] else r["extrapolated_seconds_per_run"]
            if mine is not None:
                r["extrapolated_ratio_to_native"] = mine / nat_s
                r["native_extrapolated"] = not nat["reached"]


def print_accuracy(results: dict, args) -> None:
    print()
    head = ("transition", "reached", "K", "median |err|", "s / run", "vs native", "sweeps", "transition record")
    print(f"{head[0]:<10} {head[1]:>8} {head[2]:>7} {head[3]:>12} {head[4]:>10} {head[5]:>9} {head[6]:>8}  {head[7]}")
    for name, r in results.items():
        if "unavailable" in r:
            print(f"{name:<10} unavailable: {r['unavailable'].splitlines()[0]}")
            continue
        ratio = r.get("ratio_to_native")
        print(
            f"{name:<10} {'yes' if r['reached'] else 'no (' + str(r['stopped']) + ')':>8} {r['K']:>7d} "
            f"{r['median_abs_error']:>12.4f} {r['seconds_per_run']:>10.3f} "
            f"{'-' if ratio is None else format(ratio, '.1f') + 'x':>9} {r['sweeps_per_chain']:>8d}  "
            f"{kernel_summary(r['kernel'])}"
        )
    for name, r in results.items():
        cands = {k: v for k, v in r.get("kernel", {}).items() if "candidates" in k}
        if cands:
            print(f"  {name}: pilot candidates {_short(cands)}")
    for name, r in results.items():
        if r.get("extrapolated_K") is not None:
            print(
                f"  {name}: not reached (best K {r['best_K']}: median |err| {r['best_median_abs_error']:.4f}); "
                f"EXTRAPOLATED, not measured (error taken to fall as 1/K from K = {r['K']}): K ~ "
                f"{r['extrapolated_K']:.3g}, ~{r['extrapolated_seconds_per_run']:.3g} s per run"
            )
        ratio = r.get("extrapolated_ratio_to_native")
        if ratio is not None:
            print(
                f"  {name}: EXTRAPOLATED ratio to the native path's wall time ~{ratio:.3g}x (against the native "
                f"path's {'extrapolation' if r['native_extrapolated'] else 'measured time'})"
            )
    g = results.get("gibbs", {})
    if g.get("stopped") == "time":
        print(
            f"  gibbs (generic Metropolis-within-Gibbs: n_visible calls of log_f per sweep) was capped at "
            f"--gibbs-max-seconds {args.gibbs_max_seconds:.0f} s of runs: its figures past K = {g['K']} are "
            f"extrapolations"
        )


# --------------------------------------------------------------------------- (b) the MLP energy
class MLPEnergy(nn.Module):
    """``log f(x) = w2 . tanh(W1 (2x - 1) + b1) + b2``: a one-hidden-layer MLP on ``{0, 1}^n_in``, weights
    ``W1 ~ N(0, in_scale^2 / n_in)``, ``b1 ~ N(0, 0.1^2)``, ``w2 ~ N(0, out_scale^2 / n_hidden)`` (float32,
    drawn from ``seed``): ``log f`` varies by about ``out_scale`` nats across states, and every site couples
    to every other through the hidden layer."""

    def __init__(self, n_in: int, n_hidden: int, in_scale: float, out_scale: float, seed: int):
        super().__init__()
        g = make_generator(seed)
        self.hidden = nn.Linear(n_in, n_hidden)
        self.out = nn.Linear(n_hidden, 1)
        with torch.no_grad():
            self.hidden.weight.copy_(torch.randn(n_hidden, n_in, generator=g) * in_scale / n_in**0.5)
            self.hidden.bias.copy_(torch.randn(n_hidden, generator=g) * 0.1)
            self.out.weight.copy_(torch.randn(1, n_hidden, generator=g) * out_scale / n_hidden**0.5)
            self.out.bias.zero_()
        self.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.hidden(2 * x - 1))).squeeze(-1)


def mlp_model(args) -> EnergyModel:
    f = MLPEnergy(args.n_visible, args.n_hidden, args.in_scale, args.scale, args.seed)
    return EnergyModel(f, args.n_visible, "binary", name=f"mlp-{args.n_visible}-{args.n_hidden}-1")


def ess_at_one(model: EnergyModel, transition: str, args) -> dict:
    """Effective samples per second of ``log f`` at beta = 1 with ``transition``: its pilot
    (``path.tune``), chains annealed to beta = 1 by ``--ess-burn`` AIS steps (``--ess-burn-moves`` for a
    gradient move, which changes a few sites where a sweep visits all; not timed), then up to
    ``--ess-draws`` transitions (at most ``--ess-seconds``) recording ``log f``; bulk ESS over chains and
    draws (``arviz_stats``) over the draws' wall time."""
    from arviz_stats.base import array_stats

    from logzbench.estimators import ais as ais_kernel
    from logzbench.schedules import make_schedule

    g = make_generator(args.seed + 10)
    path = energy_path(model, transition)
    t0 = time.perf_counter()
    pilot = {} if transition == "gibbs" else path.tune(args.chains, g)  # as the estimator does; gibbs: no pilot
    pilot_s = time.perf_counter() - t0
    burn = args.ess_burn if transition == "gibbs" else args.ess_burn_moves
    annealed, _ = ais_kernel.run(path, make_schedule("linear", burn), args.chains, g, final_move=True)
    state = annealed.x
    path.n_proposed = path.n_accepted = 0
    trace, t0 = [], time.perf_counter()
    while len(trace) < args.ess_draws and (len(trace) < 4 or time.perf_counter() - t0 < args.ess_seconds):
        state = path.transition(state, 1.0, g)
        trace.append(path.log_f(state, 1.0).double().cpu())
    seconds = time.perf_counter() - t0
    tr = torch.stack(trace, 1).numpy()  # (chains, draws)
    ess = float(array_stats.ess(tr, chain_axis=0, draw_axis=1, method="bulk"))
    return {
        "draws": len(trace),
        "seconds": seconds,
        "seconds_per_transition": seconds / len(trace),
        "ess": ess,
        "ess_per_s": ess / seconds,
        "acceptance": float(path.acceptance_rate) if path.n_proposed else None,
        "mean_log_f": float(tr.mean()),
        "pilot": pilot,
        "pilot_seconds": pilot_s,
        "burn_in": burn,
    }


def mlp(args) -> dict:
    model = mlp_model(args)
    probe = (torch.rand(1000, args.n_visible, generator=make_generator(args.seed + 1)) < 0.5).float()
    lf = model.log_f(probe).double()
    print(
        f"model: MLP energy {args.n_visible}-{args.n_hidden}-1, W1 ~ N(0, {args.in_scale}^2 / {args.n_visible}), "
        f"w2 ~ N(0, {args.scale}^2 / {args.n_hidden}), seed {args.seed}; log f over 1000 uniform states: "
        f"mean {lf.mean():.2f}, std {lf.std():.2f}, range {lf.min():.2f}..{lf.max():.2f}"
    )
    # a small energy (the script's own check at tiny sizes) is also compared with its exact log Z
    exact = estimate(model, "exact", seed=0, threads=args.threads).log_z if args.n_visible <= 20 else None
    print(
        f"{args.chains} chains; ESS at beta = 1 after {args.ess_burn} AIS steps (gwg, dmala: {args.ess_burn_moves}): "
        f"up to {args.ess_draws} transitions "
        f"or {args.ess_seconds:.0f} s; AIS K = {args.K} (gibbs {args.K_gibbs}), schedule {args.schedule}, seed "
        f"{args.seed}",
        flush=True,
    )
    rows = {}
    for name in args.transitions:
        row = {}
        try:
            if name != "auto":
                row["ess"] = ess_at_one(model, name, args)
            K = args.K_gibbs if name == "gibbs" else args.K
            res, wall = run_ais(
                model,
                name,
                K=K,
                chains=args.chains,
                seed=args.seed,
                init="uniform",
                train=None,
                schedule=args.schedule,
                threads=args.threads,
            )
        except (ValueError, RuntimeError, TypeError) as e:
            print(f"    {name:8s} unavailable: {str(e).splitlines()[0] if str(e) else type(e).__name__}", flush=True)
            rows[name] = {"unavailable": str(e)}
            continue
        row["ais"] = {
            "K": K,
            "log_z": float(res.log_z),
            "stderr": float(res.log_z_stderr),
            "ess": float(res.ess),
            "khat": float(res.khat),
            "n_sweeps": int(res.n_sweeps),
            "seconds": wall,
            "kernel": kernel_info(res),
        }
        rows[name] = row
        e = row.get("ess")
        print(
            f"    {name:8s} AIS {res.log_z:.4f} ± {res.log_z_stderr:.4f} ({wall:.1f} s)"
            + ("" if e is None else f"; {e['ess_per_s']:.3g} effective samples/s ({e['draws']} draws)"),
            flush=True,
        )
    done = {n: r["ais"] for n, r in rows.items() if "ais" in r}
    pairs = []
    names = list(done)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            se = (done[a]["stderr"] ** 2 + done[b]["stderr"] ** 2) ** 0.5
            z = (done[a]["log_z"] - done[b]["log_z"]) / se if se > 0 else float("nan")
            pairs.append({"a": a, "b": b, "z": z, "flag": not abs(z) <= 3})
    print()
    head = ("transition", "ESS/s", "s/transition", "acceptance", "AIS log Z", "± s.e.", "K", "transition record")
    print(f"{head[0]:<10} {head[1]:>10} {head[2]:>12} {head[3]:>10} {head[4]:>12} {head[5]:>8} {head[6]:>6}  {head[7]}")
    for name, r in rows.items():
        if "unavailable" in r:
            print(f"{name:<10} unavailable: {r['unavailable'].splitlines()[0]}")
            continue
        e, a = r.get("ess"), r["ais"]
        acc = None if e is None else e["acceptance"]
        rec = kernel_summary(a["kernel"])
        p = (e or {}).get("pilot") or {}
        if p.get("param_name"):  # the ESS run's own pilot (its generator is not the estimate's)
            rec += f" (ESS run: {p['param_name']} {_short(p['param'])}, acceptance {_short(p.get('acceptance'))})"
        print(
            f"{name:<10} {'-' if e is None else format(e['ess_per_s'], '.3g'):>10} "
            f"{'-' if e is None else format(e['seconds_per_transition'], '.3g'):>12} "
            f"{'-' if acc is None else format(acc, '.3f'):>10} {a['log_z']:>12.4f} {a['stderr']:>8.4f} "
            f"{a['K']:>6d}  {rec}"
        )
    for name, r in rows.items():
        cands = {k: v for k, v in r.get("ais", {}).get("kernel", {}).items() if "candidates" in k}
        if cands:
            print(f"  {name}: pilot candidates {_short(cands)}")
    print("pairwise z = (log Z_a - log Z_b) / sqrt(se_a^2 + se_b^2):")
    for p in pairs:
        print(f"  {p['a']:>6} - {p['b']:<6} {p['z']:+7.2f}{'   FLAG |z| > 3' if p['flag'] else ''}")
    agree = not any(p["flag"] for p in pairs)
    if len(pairs) == 0:
        print("fewer than two transitions ran: nothing to compare")
    print(f"all transitions agree within 3 combined standard errors: {agree}")
    if exact is not None:
        print(f"exact log Z (enumeration of the {args.n_visible} sites) {exact:.4f}:")
        for name, a in done.items():
            a["z_exact"] = (a["log_z"] - exact) / a["stderr"] if a["stderr"] > 0 else float("nan")
            print(f"  {name:<8} {a['z_exact']:+7.2f} s.e.{'   FLAG |z| > 3' if not abs(a['z_exact']) <= 3 else ''}")
        agree = agree and all(abs(a["z_exact"]) <= 3 for a in done.values())
    return {
        "model": {"n_visible": args.n_visible, "n_hidden": args.n_hidden, "log_f_uniform_std": float(lf.std())},
        "exact": exact,
        "rows": rows,
        "pairs": pairs,
        "agree": agree,
    }


# --------------------------------------------------------------------------- main
#: (n_visible, n_hidden, scale) by mode; ``scale``: the random RBM's weight std, the MLP's output scale
MODE_DEFAULTS = {"throughput": (784, 500, 0.01), "accuracy": (784, 16, 0.1), "mlp": (784, 256, 8.0)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=tuple(MODE_DEFAULTS), default="throughput")
    ap.add_argument("--n-visible", type=int, default=None, help="default 784")
    ap.add_argument("--n-hidden", type=int, default=None, help="default 500 (throughput), 16 (accuracy), 256 (mlp)")
    ap.add_argument(
        "--scale",
        type=float,
        default=None,
        help="std of the random RBM's weights (0.01; accuracy 0.1); mlp: output scale (8.0)",
    )
    ap.add_argument("--chains", type=int, default=100)
    ap.add_argument(
        "--threads", type=int, default=None, help="torch.set_num_threads (default: torch's; accuracy, mlp: 1)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    t = ap.add_argument_group("throughput")
    t.add_argument("--beta", type=float, default=0.5)
    t.add_argument("--reps", type=int, default=5, help="interleaved repetitions")
    t.add_argument("--rbm-sweeps", type=int, default=50, help="RBM sweeps per repetition")
    t.add_argument("--energy-sweeps", type=int, default=2, help="energy sweeps per repetition")
    t.add_argument("--check-visible", type=int, default=20)
    t.add_argument("--check-hidden", type=int, default=10)
    t.add_argument("--check-scale", type=float, default=0.5)
    t.add_argument("--check-K", type=int, default=1000)
    t.add_argument("--check-chains", type=int, default=200)
    t.add_argument("--check-z", type=float, default=4.0, help="agreement: within this many standard errors")
    t.add_argument("--skip-check", action="store_true")
    a = ap.add_argument_group("accuracy and mlp")
    a.add_argument(
        "--transitions",
        default=None,
        help=f"comma-separated (accuracy: {','.join(ACCURACY_TRANSITIONS)}; mlp: {','.join(MLP_TRANSITIONS)})",
    )
    a.add_argument("--schedule", default="linear", help="AIS schedule (the estimator's option)")
    a.add_argument("--rbm", choices=("pcd", "random"), default="pcd", help="accuracy: trained on MNIST, or random")
    a.add_argument("--pcd-epochs", type=int, default=20)
    a.add_argument("--init", choices=("uniform", "base-rate"), default=None, help="default: base-rate with rows")
    a.add_argument("--seeds", type=int, default=5)
    a.add_argument("--tol", type=float, default=0.1, help="target median |log Z - exact| (nat)")
    a.add_argument("--k-start", type=int, default=64)
    a.add_argument("--k-cap", type=int, default=65536)
    a.add_argument("--max-seconds", type=float, default=1800.0, help="per transition, all its levels")
    a.add_argument("--gibbs-max-seconds", type=float, default=600.0, help="the generic gibbs path's cap")
    a.add_argument("--confirm", action="store_true", help="a level counts only if fresh seeds confirm it")
    a.add_argument("--in-scale", type=float, default=2.0, help="mlp: W1 ~ N(0, in_scale^2 / n_visible)")
    a.add_argument("--K", type=int, default=5000, help="mlp: AIS steps (one gwg or dmala move each)")
    a.add_argument("--K-gibbs", type=int, default=200, help="mlp: AIS steps of the gibbs path (a sweep per step)")
    a.add_argument("--ess-burn", type=int, default=100, help="mlp: gibbs sweeps (AIS steps) to beta = 1 first")
    a.add_argument("--ess-burn-moves", type=int, default=5000, help="mlp: the same for gwg and dmala moves")
    a.add_argument("--ess-draws", type=int, default=2000, help="mlp: transitions recorded at beta = 1")
    a.add_argument("--ess-seconds", type=float, default=60.0, help="mlp: at most this long recording")
    args = ap.parse_args(argv)
    nv, nh, sc = MODE_DEFAULTS[args.mode]
    args.n_visible = nv if args.n_visible is None else args.n_visible
    args.n_hidden = nh if args.n_hidden is None else args.n_hidden
    args.scale = sc if args.scale is None else args.scale
    allowed = {"accuracy": ACCURACY_TRANSITIONS, "mlp": MLP_TRANSITIONS}.get(args.mode, ())
    args.transitions = [x.strip() for x in (args.transitions or ",".join(allowed)).split(",") if x.strip()]
    bad = [x for x in args.transitions if x not in allowed]
    if args.mode != "throughput" and (bad or not args.transitions):
        ap.error(f"--transitions {','.join(bad) or '(none)'}: choose from {','.join(allowed)}")
    if args.mode == "accuracy" and args.rbm == "pcd" and args.n_visible != 784:
        ap.error(f"--rbm pcd trains on MNIST rows (784 pixels), not --n-visible {args.n_visible}; use --rbm random")
    if args.mode == "accuracy" and args.init == "base-rate" and args.rbm == "random":
        ap.error("--init base-rate needs training rows; a --rbm random model has none")
    if args.threads is None and args.mode != "throughput":
        args.threads = 1
    if args.threads:
        torch.set_num_threads(args.threads)
    now = datetime.datetime.now(datetime.timezone.utc)
    print(
        f"bench_energy --mode {args.mode}: {now:%Y-%m-%d %H:%M} UTC, {machine()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} torch thread(s)"
    )
    out = {
        "mode": args.mode,
        "date": now.isoformat(timespec="seconds"),
        "machine": machine(),
        "cpu": cpu_model(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "args": vars(args),
    }
    if args.mode == "accuracy":
        res = accuracy(args)
        out.update(res, ok=res["exact"]["agree"])
    elif args.mode == "mlp":
        res = mlp(args)
        out.update(res, ok=res["agree"])
    else:
        out.update(throughput_mode(args))
    wall = time.perf_counter() - STARTED
    out["wall_seconds"] = wall
    print(f"wall time {wall:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2, default=float)
    return out


def throughput_mode(args) -> dict:
    """The throughput mode's run and printout: :func:`throughput`, then :func:`equivalence`."""
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
    out = {"throughput": tp, "ok": True}
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
        out["ok"] = eq["agree"]
    return out


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1:])["ok"] else 1)
