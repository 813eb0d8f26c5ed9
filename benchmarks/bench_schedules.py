"""Annealing-schedule benchmark (not a test): prints figures, asserts nothing.

For each model with an exact ``log Z`` and each schedule, the Gibbs sweeps AIS needs before the
**median over seeds of |log Z_hat - log Z|** falls below ``--tol`` (0.1 nat): ``K`` is doubled from
``--k-start`` (16) up to ``--k-cap`` (every seed rerun at each ``K``), and the first ``K`` whose median
error is below the tolerance -- and whose median over as many fresh seeds (1000, 1001, ...) is below it
too, else the doubling goes on -- is reported with the median ``total_sweeps`` of its runs
(chain-sweeps: transitions times chains, the adaptive pilot's included, the moment-averaging fits
included).  A schedule that is still above the tolerance at the cap is reported at the cap, marked ``>``.

Schedules (AIS through :func:`logzbench.api.estimate`, ``chains`` = 100, ``init="base-rate"`` with the
training rows, else ``"uniform"``):

* ``linear``, ``sigmoid``: ``K`` evenly spaced / sigmoidally spaced inverse temperatures;
* ``sm14500``: the fixed 14,500-step Salakhutdinov-Murray schedule; its error is reported (no doubling);
* ``adaptive``: the pilot-run schedule (:mod:`logzbench.estimators.adaptive`), read at ``K`` steps, for
  every ``--target-ess`` and ``--sweeps-per-beta`` (all variants are printed; the table's ``adaptive``
  row is the variant with the fewest sweeps, or with the smallest error at the cap when none got there);
* ``tuned``: rounds of doubling K, each re-spaced from the previous round's log-weight increments
  (:mod:`logzbench.estimators.tuned`; the pilot rounds' sweeps counted; from ``K = 16``);
* ``moment-averaging``: Grosse, Maddison & Salakhutdinov (NIPS 2013): the intermediate distributions
  are RBMs whose moments ``E[v], E[h], E[v h^T]`` are ``(1 - beta) E_0[s] + beta E_1[s]``.  Implemented
  here (:class:`MomentAveragingPath`, :func:`fit_anchors`): ``E_1[s]`` is estimated by Gibbs chains on the
  model started at training rows; ``--ma-anchors`` RBMs at ``beta_j = j / L`` are fitted in turn by
  PCD-style moment matching (each warm-started from the previous one, persistent chains carried over,
  Polyak-averaged, then smoothed over neighbouring anchors);
  AIS then runs on the path that is geometric *between consecutive anchors* (exact MA at the anchors,
  ``p_0`` at 0 and the model at 1), with the ``K`` temperatures linear in ``beta`` (the paper's choice).
  Every sweep spent estimating ``E_1[s]`` and fitting is added to ``total_sweeps``.  A DBM is annealed on
  its even/odd RBM view (for two hidden layers the view is a dense RBM and its moments are the DBM's).

Models: the default config's ``digits-rbm16`` and ``mnist-rbm20`` (trained here as config/config.yaml
trains them, on the data mirror ``$LOGZBENCH_DATA_MIRROR``), ``synth-rbm60-14`` (a strongly coupled
RBM 60-14 trained by PCD on six 60-bit prototypes, three kept with 2 % bit flips and three with 20 %:
enumerating its 2^14 hidden states shows several well-separated modes, printed), and ``mnist-dbm20-10``
(the config's DBM 784-20-10).  ``--models a.npz b.npz`` evaluates model files instead (exact ``log Z``
by enumeration; base rate from the file's ``data_mean``).  ``--quick``: tiny models (digits RBM 64-16,
a synthetic RBM 20-8, a DBM 64-8-4 on digits), 2 seeds, ``K`` up to 256: a smoke run of about 15 s.
Usage::

    python benchmarks/bench_schedules.py [--quick] [--threads 1] [--seeds 5] [--k-start 16]
        [--k-cap 32768] [--tol 0.1] [--chains 100] [--target-ess 0.9,0.99] [--sweeps-per-beta 1,2]
        [--ma-anchors 32] [--model NAME ...] [--models A.npz ...] [--no-confirm] [--json out.json]
"""

from __future__ import annotations

import argparse
import bisect
import datetime
import json
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_model, machine

from logzbench.api import estimate
from logzbench.estimators import ais as ais_kernel
from logzbench.kernels import bernoulli_from_logits
from logzbench.utils import make_generator

REPO = Path(__file__).resolve().parents[1]
SCHEDULES = ("linear", "sigmoid", "sm14500", "adaptive", "moment-averaging", "tuned")
SM14500_K = 14500
#: the settings of :func:`fit_anchors` a moment-averaging variant carries
_MA_KEYS = ("target", "target_burn_in", "target_sweeps", "fit_updates", "learning_rate", "smooth")
#: a fixed word mixed into the seed of the moment-averaging fits' stream (independent of the AIS run's)
_MA_STREAM = 0x3A_11_0C_5D


# ----------------------------------------------------------------------------------------------------------
# moment averaging (Grosse, Maddison & Salakhutdinov 2013)
# ----------------------------------------------------------------------------------------------------------
class MomentAveragingPath:
    """An AIS path through RBMs ``theta_0, ..., theta_L`` at anchor temperatures ``beta_0 = 0 < ... < beta_L = 1``.

    ``theta_0 = (a0, 0, 0)`` is the factorial ``p_0`` (Bernoulli(sigmoid(a0)) visibles, uniform hiddens),
    ``theta_L`` the model, the others fitted to averaged moments (:func:`fit_anchors`).  Between anchors the
    parameters are interpolated linearly, ``theta(beta) = (1 - t) theta_j + t theta_{j+1}``: on the joint
    space ``f_beta(v, h) = exp(theta(beta) . s(v, h))``, the geometric path between two neighbouring anchors,
    and with ``h`` summed out ``log f_beta(v) = a(beta).v + sum_j softplus(b(beta)_j + (v W(beta))_j)``.

    The state is the visible rows ``v`` (float32).  The AIS increment between two temperatures of one
    segment is computed from the anchors' pre-activations ``x_j = v W_j + b_j`` (float32 products, float64
    arithmetic after), so its rounding error is relative to the increment, not to ``log f``.  Implements
    the :class:`logzbench.models.base.AnnealingPath` protocol, with a fused ``reweight_and_move`` (one AIS step).
    """

    def __init__(self, betas, weights, visible_biases, hidden_biases, a0):
        self.betas = [float(b) for b in betas]
        if self.betas[0] != 0.0 or self.betas[-1] != 1.0 or any(np.diff(self.betas) <= 0):
            raise ValueError("anchor temperatures must increase from 0 to 1")
        self.W = torch.stack([torch.as_tensor(w, dtype=torch.float32) for w in weights]).contiguous()
        self.a = torch.stack([torch.as_tensor(x, dtype=torch.float32) for x in visible_biases]).contiguous()
        self.b = torch.stack([torch.as_tensor(x, dtype=torch.float32) for x in hidden_biases]).contiguous()
        self.a0 = torch.as_tensor(a0, dtype=torch.float32)
        self.n_visible, self.n_hidden = int(self.W.shape[1]), int(self.W.shape[2])

    # -- parameters along the path
    def _segment(self, beta: float) -> tuple[int, float]:
        j = min(max(bisect.bisect_right(self.betas, beta) - 1, 0), len(self.betas) - 2)
        lo, hi = self.betas[j], self.betas[j + 1]
        return j, min(max((beta - lo) / (hi - lo), 0.0), 1.0)

    def params(self, beta: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        j, t = self._segment(beta)
        return (
            torch.lerp(self.W[j], self.W[j + 1], t),
            torch.lerp(self.a[j], self.a[j + 1], t),
            torch.lerp(self.b[j], self.b[j + 1], t),
        )

    def _pre64(self, v: torch.Tensor, beta: float, cache: dict) -> torch.Tensor:
        """Hidden pre-activations at ``beta`` in float64, from the (cached) anchor products."""
        j, t = self._segment(beta)
        for i in (j, j + 1):
            if i not in cache:
                cache[i] = torch.addmm(self.b[i], v, self.W[i]).double()
        return (1.0 - t) * cache[j] + t * cache[j + 1]

    def _lin64(self, v: torch.Tensor, beta: float) -> torch.Tensor:
        j, t = self._segment(beta)
        return v.double() @ ((1.0 - t) * self.a[j].double() + t * self.a[j + 1].double())

    # -- AnnealingPath protocol
    def log_z0(self) -> float:
        return float(self.n_hidden * math.log(2.0) + F.softplus(self.a0.double()).sum())

    def sample_initial(self, n_chains: int, generator: torch.Generator) -> torch.Tensor:
        return bernoulli_from_logits(self.a0.expand(n_chains, -1).contiguous(), generator)

    def state_from_data(self, data: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(data, dtype=torch.float32)

    def log_f(self, v: torch.Tensor, beta: float) -> torch.Tensor:
        return self._lin64(v, beta) + F.softplus(self._pre64(v, beta, {})).sum(1)

    def _increment(self, v, beta_from, beta_to, cache) -> tuple[torch.Tensor, torch.Tensor]:
        p0, p1 = self._pre64(v, beta_from, cache), self._pre64(v, beta_to, cache)
        inc = self._lin64(v, beta_to) - self._lin64(v, beta_from) + (F.softplus(p1) - F.softplus(p0)).sum(1)
        return inc, p1

    def log_f_ratio(self, v: torch.Tensor, beta_from: float, beta_to: float) -> torch.Tensor:
        return self._increment(v, beta_from, beta_to, {})[0]

    def _move_from(self, pre_h: torch.Tensor, beta: float, generator: torch.Generator) -> torch.Tensor:
        W, a, _ = self.params(beta)
        h = bernoulli_from_logits(pre_h, generator)
        return bernoulli_from_logits(torch.addmm(a, h, W.T), generator)

    def transition(self, v: torch.Tensor, beta: float, generator: torch.Generator) -> torch.Tensor:
        """One block-Gibbs sweep ``v -> h -> v`` of the RBM ``theta(beta)`` (reversible for ``p_beta(v)``)."""
        W, _, b = self.params(beta)
        return self._move_from(torch.addmm(b, v, W), beta, generator)

    def reweight_and_move(self, v, beta_from: float, beta_to: float, generator):
        """``(log_f_ratio(v, beta_from, beta_to), transition(v, beta_to))`` sharing the anchor products."""
        inc, pre = self._increment(v, beta_from, beta_to, {})
        return inc, self._move_from(pre.float(), beta_to, generator)


def _stats(v: torch.Tensor, W: torch.Tensor, b: torch.Tensor, w: torch.Tensor | None = None):
    """Rao-Blackwellised moments ``E[v], E[h], E[v h^T]`` of chains ``v`` (``h`` replaced by ``p(h | v)``),
    with normalised chain weights ``w`` (float64) or equal weights."""
    ph = torch.sigmoid(torch.addmm(b, v, W)).double()
    vd = v.double()
    if w is None:
        return vd.mean(0), ph.mean(0), (vd.T @ ph) / v.shape[0]
    return w @ vd, w @ ph, vd.T @ (w[:, None] * ph)


def _gibbs(v, W, a, b, generator):
    h = bernoulli_from_logits(torch.addmm(b, v, W), generator)
    return bernoulli_from_logits(torch.addmm(a, h, W.T), generator)


def _start_states(rows, a0, n, generator):
    """``n`` chain starts: random training rows (a DBM view's even hidden layers drawn uniformly), else ``p_0``."""
    nv = a0.shape[0]
    if rows is None or rows.shape[0] == 0:
        return bernoulli_from_logits(a0.expand(n, -1).contiguous(), generator)
    v = rows[torch.randint(rows.shape[0], (n,), generator=generator)].float()
    if v.shape[1] < nv:
        v = torch.cat([v, bernoulli_from_logits(torch.zeros(n, nv - v.shape[1]), generator)], 1)
    return v


def target_moments(
    rbm,
    a0,
    generator,
    *,
    chains: int,
    how: str,
    start_rows=None,
    burn_in: int = 100,
    sweeps: int = 400,
    pilot_ess: float = 0.9,
):
    """``E_1[s]`` of the model by sampling, and the chain-sweeps it took.

    ``how="data"``: ``chains`` Gibbs chains started at training rows, ``burn_in`` sweeps, then ``sweeps``
    sweeps averaged.  ``how="pilot"``: an adaptive SMC pilot on the geometric path from ``p_0`` (the
    library's :mod:`~logzbench.estimators.adaptive` steps, conditional ESS ``pilot_ess``) brings weighted
    particles to the model; then ``sweeps`` Gibbs sweeps of them at ``beta = 1`` are averaged with their
    weights (moves that leave the model invariant keep the particles properly weighted).  Data-started
    chains keep the data's proportions between modes that Gibbs sampling does not cross; the pilot's
    weights correct them."""
    from logzbench.estimators import adaptive

    W1, a1, b1 = rbm.W.float(), rbm.visible_bias.float(), rbm.hidden_bias.float()
    nv, nh = W1.shape
    acc = [
        torch.zeros(nv, dtype=torch.float64),
        torch.zeros(nh, dtype=torch.float64),
        torch.zeros(nv, nh, dtype=torch.float64),
    ]
    if how == "data":
        v, w, cost = _start_states(start_rows, a0, chains, generator), None, 0
        for _ in range(burn_in):
            v = _gibbs(v, W1, a1, b1, generator)
        cost += burn_in * chains
    elif how == "pilot":
        from logzbench.models.rbm import RBMAnnealingPath

        path = RBMAnnealingPath(rbm, a0)
        state, n_moves = adaptive.init(path, chains, generator), 0
        while state.beta < 1.0:
            state, _ = adaptive.step(path, state, pilot_ess, generator)
            n_moves += int(state.beta < 1.0)
        v, w, cost = state.x.v, torch.exp(state.log_w[0]), n_moves * chains
    else:
        raise ValueError(f"unknown target-moment method {how!r}")
    for _ in range(sweeps):
        v = _gibbs(v, W1, a1, b1, generator)
        for s, x in zip(acc, _stats(v, W1, b1, w)):
            s += x
    return [s / max(sweeps, 1) for s in acc], cost + sweeps * chains


def fit_anchors(
    rbm,
    a0: torch.Tensor,
    n_anchors: int,
    generator: torch.Generator,
    *,
    chains: int = 100,
    start_rows: torch.Tensor | None = None,
    target: str = "data",
    target_burn_in: int = 100,
    target_sweeps: int = 200,
    fit_updates: int = 50,
    learning_rate: float = 0.05,
    smooth: int = 2,
) -> tuple[MomentAveragingPath, dict]:
    """Fit the moment-averaging anchors of ``rbm`` (its ``W``, ``visible_bias``, ``hidden_bias``) from ``p_0``.

    1. ``E_1[s]`` by :func:`target_moments` (``target``: ``"data"`` or ``"pilot"``); ``E_0[s]`` is exact:
       ``sigmoid(a0)``, 1/2 and their outer product.
    2. For ``j = 1 .. L - 1``, ``beta_j = j / L``: ``theta_j`` starts at ``theta_{j-1}`` extrapolated by its
       last change and takes ``fit_updates`` PCD-style moment-matching steps
       ``theta += learning_rate * (mu_j - E_theta[s])`` towards ``mu_j = (1 - beta_j) E_0[s] + beta_j E_1[s]``,
       ``E_theta[s]`` from ``chains`` persistent chains (Rao-Blackwellised over ``h``; one Gibbs sweep per
       step; the chains start as exact ``p_0`` draws and are carried from anchor to anchor).  The anchor
       is the mean of the parameters over the second half of its steps (Polyak averaging).
    3. ``smooth > 0``: each fitted anchor is replaced by the mean of the fitted anchors within ``smooth``
       of it (the endpoints stay exact), which damps the chains' noise that would zig-zag the path.

    Returns the path and its cost: ``{"sweeps": chain-sweeps of both phases, "seconds": ...}``.
    """
    t0 = time.perf_counter()
    L = int(n_anchors)
    if L < 1:
        raise ValueError(f"moment averaging needs at least one anchor interval, got {n_anchors}")
    W1, a1, b1 = rbm.W.float(), rbm.visible_bias.float(), rbm.hidden_bias.float()
    nv, nh = W1.shape
    a0 = torch.as_tensor(a0, dtype=torch.float32)
    mu1, sweeps = target_moments(
        rbm,
        a0,
        generator,
        chains=chains,
        how=target,
        start_rows=start_rows,
        burn_in=target_burn_in,
        sweeps=target_sweeps,
    )
    m0 = torch.sigmoid(a0.double())
    mu0 = [m0, torch.full((nh,), 0.5, dtype=torch.float64), 0.5 * m0[:, None].expand(nv, nh)]
    thetas = [(torch.zeros(nv, nh), a0.clone(), torch.zeros(nh))]
    v = bernoulli_from_logits(a0.expand(chains, -1).contiguous(), generator)  # exact p_0 draws
    for j in range(1, L):
        beta = j / L
        mu = [((1.0 - beta) * x0 + beta * x1).float() for x0, x1 in zip(mu0, mu1)]
        prev = thetas[-1]
        theta = [2.0 * p - q for p, q in zip(prev, thetas[-2])] if j >= 2 else [p.clone() for p in prev]
        avg, n_avg = [torch.zeros_like(p) for p in theta], 0
        for u in range(fit_updates):
            W, a, b = theta
            v = _gibbs(v, W, a, b, generator)
            ev, eh, evh = _stats(v, W, b)
            theta = [
                W + learning_rate * (mu[2] - evh.float()),
                a + learning_rate * (mu[0] - ev.float()),
                b + learning_rate * (mu[1] - eh.float()),
            ]
            if u >= fit_updates // 2:
                avg, n_avg = [x + p for x, p in zip(avg, theta)], n_avg + 1
        thetas.append(tuple(x / n_avg for x in avg) if n_avg else tuple(theta))
        sweeps += fit_updates * chains
    thetas.append((W1.clone(), a1.clone(), b1.clone()))
    if smooth > 0 and L > 2:
        raw = thetas
        thetas = (
            [raw[0]]
            + [
                tuple(
                    torch.stack([raw[i][k] for i in range(max(1, j - smooth), min(L - 1, j + smooth) + 1)]).mean(0)
                    for k in range(3)
                )
                for j in range(1, L)
            ]
            + [raw[L]]
        )
    path = MomentAveragingPath(
        [j / L for j in range(L + 1)], [t[0] for t in thetas], [t[1] for t in thetas], [t[2] for t in thetas], a0
    )
    return path, {"sweeps": int(sweeps), "seconds": time.perf_counter() - t0}


def ma_generator(seed: int) -> torch.Generator:
    """The fits' own stream, derived from the run's seed (independent of the AIS run's generator)."""
    s = int(np.random.SeedSequence([int(seed), _MA_STREAM]).generate_state(1, np.uint64)[0] >> 1)
    return torch.Generator().manual_seed(s)


# ----------------------------------------------------------------------------------------------------------
# models
# ----------------------------------------------------------------------------------------------------------
class Bench:
    """A model with its exact ``log Z``, training rows (or ``None``) and the initial distribution used."""

    def __init__(self, name, model, train=None, note=""):
        self.name, self.model, self.train, self.note = name, model, train, note
        t0 = time.perf_counter()
        self.log_z = float(model.exact_log_z())
        self.exact_seconds = time.perf_counter() - t0
        self.init = "base-rate" if (train is not None or getattr(model, "data_mean", None) is not None) else "uniform"

    def geometric_path(self):
        return self.model.annealing_path(self.init, data=None if self.train is None else self.train)


def synthetic_prototypes(n_visible: int, noises, n_rows: int, seed: int) -> np.ndarray:
    """Rows drawn from ``len(noises)`` random prototypes (equally often), each bit of a row drawn from
    prototype ``p`` flipped with probability ``noises[p]``."""
    rng = np.random.default_rng(seed)
    protos = (rng.random((len(noises), n_visible)) < 0.5).astype(np.uint8)
    idx = rng.integers(len(noises), size=n_rows)
    flips = (rng.random((n_rows, n_visible)) < np.asarray(noises)[idx][:, None]).astype(np.uint8)
    return protos[idx] ^ flips


def hidden_modes(rbm, max_bits: int = 16) -> tuple[np.ndarray, np.ndarray] | None:
    """Modes of ``p(h)`` (hidden layer enumerated, ``v`` summed out): each state climbs to its best
    single-flip neighbour until none is better; returns the basins' masses (descending) and the Hamming
    distances between the most likely visible pattern ``E[v | h] > 1/2`` of the heaviest basin's peak and
    the others'.  ``None`` above ``max_bits`` hidden units."""
    nh = rbm.n_hidden
    if nh > max_bits:
        return None
    H = torch.tensor((np.arange(2**nh)[:, None] >> np.arange(nh)) & 1, dtype=torch.float64)
    lf = rbm.log_unnormalized_hidden_marginal(H)
    p = torch.softmax(lf, 0)
    nb = torch.arange(2**nh)[:, None] ^ (1 << torch.arange(nh))[None, :]
    best = lf[nb].max(1)
    ptr = torch.where(best.values > lf, nb[torch.arange(2**nh), best.indices], torch.arange(2**nh))
    for _ in range(2 * nh + 2):
        ptr = ptr[ptr]
    roots, inv = torch.unique(ptr, return_inverse=True)
    mass = torch.zeros(len(roots), dtype=torch.float64).index_add_(0, inv, p)
    order = torch.argsort(mass, descending=True)
    pats = (rbm.prob_v_given_h(H[roots[order]].float()) > 0.5).float()
    return mass[order].numpy(), (pats - pats[0]).abs().sum(1).numpy()


def _config():
    import yaml

    with open(REPO / "config" / "config.yaml") as fh:
        return yaml.safe_load(fh)


def _prepared(cfg, dataset: str, workdir: Path) -> Path:
    from logzbench.data import prepare_dataset

    spec = dict(cfg["datasets"][dataset])
    source = spec.pop("source")
    out = workdir / f"{dataset}.npz"
    if not out.exists():
        prepare_dataset(source, out, mirror=os.environ.get("LOGZBENCH_DATA_MIRROR") or cfg.get("data_mirror"), **spec)
    return out


def _train_config_model(cfg, name: str, workdir: Path, overrides: dict | None = None):
    """Train model ``name`` of config/config.yaml the way the workflow does (its preset, then its
    ``hyperparams``), on its prepared dataset; returns (model, training rows)."""
    from logzbench.data import load_rows
    from logzbench.pipeline.sweep import model_hyperparams
    from logzbench.training import train_model

    hp = dict(model_hyperparams(cfg, name))
    hp.update(overrides or {})
    data = _prepared(cfg, cfg["models"][name]["dataset"], workdir)
    train, test = (load_rows(data, "binary", s, prepared=True) for s in ("train", "test"))
    model, _ = train_model(train, test, **hp)
    return model, np.asarray(train, dtype=np.uint8)


def _train_digits_dbm(cfg, workdir: Path):
    from logzbench.data import load_rows
    from logzbench.training import train_model

    train = load_rows(_prepared(cfg, "digits", workdir), "binary", "train", prepared=True)
    model, _ = train_model(
        train,
        None,
        family="dbm",
        hidden_sizes=[8, 4],
        pretrain_epochs=2,
        n_epochs=3,
        exact_ll_max_units=0,
        eval_every=10**6,
        seed=0,
    )
    return model, np.asarray(train, dtype=np.uint8)


#: the from-scratch recipe of the synthetic RBMs: learning rate decaying linearly, no weight decay or momentum,
#: small normal initial weights
SCRATCH = dict(lr_schedule="linear", weight_decay=0.0, init="normal", init_scale=0.01, initial_momentum=0.0,
               final_momentum=0.0)  # fmt: skip


def train_pcd(X, n_hidden: int, epochs: int, seed: int = 0, **hyperparams):
    """An RBM trained by PCD-1 on rows ``X`` (learning rate 0.1, batches of 100, 100 persistent chains unless
    ``hyperparams`` say otherwise; no per-epoch evaluation); the benchmarks' one trainer of synthetic RBMs."""
    from logzbench.training import train_model

    hp = dict(learning_rate=0.1, batch_size=100, n_persistent_chains=100)
    hp.update(hyperparams)
    model, _ = train_model(
        X,
        None,
        family="rbm",
        n_hidden=n_hidden,
        method="pcd",
        k=1,
        n_epochs=epochs,
        exact_ll_max_units=0,
        eval_every=10**6,
        seed=seed,
        **hp,
    )
    return model


def _train_synthetic(n_visible: int, n_hidden: int, noises, epochs: int, seed: int = 0):
    X = synthetic_prototypes(n_visible, noises, 2000, seed)
    return train_pcd(X, n_hidden, epochs, seed, **SCRATCH), X


FULL_MODELS = ("digits-rbm16", "mnist-rbm20", "synth-rbm60-14", "mnist-dbm20-10")
QUICK_MODELS = ("digits-rbm16", "synth-rbm20-8", "digits-dbm8-4")


def build_models(names, workdir: Path, quick: bool) -> list[Bench]:
    cfg = _config()
    out = []
    for name in names:
        t0 = time.perf_counter()
        if name == "digits-rbm16":
            model, X = _train_config_model(cfg, "digits-rbm16", workdir)
            note = "config digits-rbm16 (CD-1)"
        elif name == "mnist-rbm20":
            model, X = _train_config_model(cfg, "mnist-rbm20", workdir)
            note = "config mnist-rbm20 (mnistCD1-20, 3 epochs)"
        elif name == "mnist-dbm20-10":
            model, X = _train_config_model(cfg, "mnist-dbm20-10", workdir)
            note = "config mnist-dbm20-10"
        elif name == "digits-dbm8-4":  # quick: a DBM 64-8-4, briefly trained on digits
            model, X = _train_digits_dbm(cfg, workdir)
            note = "DBM 64-8-4 on digits (quick)"
        elif name == "synth-rbm60-14":
            model, X = _train_synthetic(60, 14, (0.02, 0.02, 0.02, 0.2, 0.2, 0.2), epochs=300)
            note = "PCD-1, 6 prototypes x 60 bits (2%/20% flips)"
        elif name == "synth-rbm20-8":
            model, X = _train_synthetic(20, 8, (0.02, 0.02, 0.2, 0.2), epochs=50)
            note = "PCD-1, 4 prototypes x 20 bits (quick)"
        else:
            raise ValueError(f"unknown model {name!r}; choose from {FULL_MODELS + QUICK_MODELS} or give --models FILE")
        b = Bench(name, model, X, note)
        b.train_seconds = time.perf_counter() - t0 - b.exact_seconds
        out.append(b)
    return out


def load_model_files(paths) -> list[Bench]:
    from logzbench.models import load_model

    out = []
    for p in paths:
        t0 = time.perf_counter()
        b = Bench(Path(p).stem, load_model(p), None, f"file {p}")
        b.train_seconds = time.perf_counter() - t0 - b.exact_seconds
        out.append(b)
    return out


# ----------------------------------------------------------------------------------------------------------
# measurement
# ----------------------------------------------------------------------------------------------------------
def _ais_run(bench: Bench, seed: int, K: int, threads: int, chains: int, variant: dict, ma_cache: dict) -> dict:
    """One AIS estimate; returns its error, total sweeps and seconds."""
    t0 = time.perf_counter()
    if variant["schedule"] == "moment-averaging":
        key = (seed, min(K, variant["anchors"]))
        if key not in ma_cache:
            geo = bench.geometric_path()
            rows = None if bench.train is None else torch.as_tensor(bench.train, dtype=torch.float32)
            ma_cache[key] = fit_anchors(
                geo.rbm,
                geo.a0,
                key[1],
                ma_generator(seed),
                chains=chains,
                start_rows=rows,
                **{k: variant[k] for k in _MA_KEYS},
            )
        path, cost = ma_cache[key]
        res = ais_kernel.ais(path, np.linspace(0.0, 1.0, K + 1), chains, make_generator(seed), n_bootstrap=1)
        total, extra = int(res.total_sweeps) + cost["sweeps"], {"fit_sweeps": cost["sweeps"]}
    else:
        kw = {k: variant[k] for k in ("target_ess", "sweeps_per_beta", "pilot_chains", "tuned_start") if k in variant}
        res = estimate(
            bench.model,
            "ais",
            K=None if variant["schedule"] == "sm14500" else K,
            schedule=variant["schedule"],
            chains=chains,
            init=bench.init,
            train_data=bench.train,
            seed=seed,
            threads=threads,
            n_bootstrap=1,
            **kw,
        )
        keep = ("pilot_sweeps", "pilot_K", "tuned_round_K", "tuned_barrier", "tuned_G", "tuned_G_lagged")
        total, extra = int(res.total_sweeps), {k: res.extra[k] for k in keep if k in res.extra}
    return {
        "seed": seed,
        "K": K,
        "log_z": float(res.log_z),
        "error": float(res.log_z) - bench.log_z,
        "total_sweeps": total,
        "seconds": time.perf_counter() - t0,
        **extra,
    }


def measure(
    bench: Bench,
    variant: dict,
    seeds,
    k_start: int,
    k_cap: int,
    tol: float,
    threads: int,
    chains: int,
    ma_cache: dict,
    confirm_seeds=(),
    log=print,
    runner=None,
    max_seconds: float | None = None,
) -> dict:
    """Double ``K`` until the median |error| over ``seeds`` is below ``tol`` (or the cap); ``sm14500`` once.

    With ``confirm_seeds`` a ``K`` whose median is below ``tol`` counts only when the median over those
    fresh seeds is below ``tol`` too (else doubling goes on): the first of several noisy medians to dip
    below the tolerance is otherwise often a lucky one.  ``runner(bench, seed, K, threads, chains, variant,
    ma_cache)`` makes one run (default: AIS, :func:`_ais_run`); ``variant["fixed"]`` runs once at its own K.
    With ``max_seconds`` doubling also stops where the next level (about twice this one's time) would end
    past ``max_seconds`` from the start (``"stopped": "time"``)."""
    run = runner or _ais_run
    t0 = time.perf_counter()
    levels = []
    fixed = variant["schedule"] == "sm14500" or bool(variant.get("fixed"))
    K = (
        SM14500_K
        if variant["schedule"] == "sm14500"
        else max(int(variant.get("K", k_start)), int(variant.get("k_min", 1)))
    )
    while True:
        runs = [run(bench, s, K, threads, chains, variant, ma_cache) for s in seeds]
        med = float(np.median([abs(r["error"]) for r in runs]))
        lvl = {
            "K": K,
            "median_abs_error": med,
            "median_total_sweeps": float(np.median([r["total_sweeps"] for r in runs])),
            "runs": runs,
            "confirm": None,
        }
        levels.append(lvl)
        log(
            f"    {bench.name:16s} {variant['label']:28s} K={K:6d}  median |err| {med:7.4f}  "
            f"sweeps {lvl['median_total_sweeps']:.3g}  ({sum(r['seconds'] for r in runs):.1f} s)",
            flush=True,
        )
        ok = med < tol
        if ok and confirm_seeds and not fixed:
            cruns = [run(bench, s, K, threads, chains, variant, ma_cache) for s in confirm_seeds]
            cmed = float(np.median([abs(r["error"]) for r in cruns]))
            lvl["confirm"] = {"seeds": list(confirm_seeds), "median_abs_error": cmed, "runs": cruns}
            ok = cmed < tol
            log(
                f"    {bench.name:16s} {variant['label']:28s} K={K:6d}  confirmation on seeds {confirm_seeds[0]}.."
                f"{confirm_seeds[-1]}: median |err| {cmed:7.4f}{'' if ok else ' (not confirmed: K doubles)'}",
                flush=True,
            )
        if fixed or ok or 2 * K > k_cap:
            stopped = "tol" if ok else ("fixed" if fixed else "k_cap")
            break
        level_seconds = sum(r["seconds"] for r in runs) + sum(
            r["seconds"] for r in (lvl["confirm"] or {}).get("runs", [])
        )
        if max_seconds is not None and time.perf_counter() - t0 + 2 * level_seconds > max_seconds:
            stopped = "time"
            break
        K *= 2
    last = levels[-1]
    return {
        "model": bench.name,
        "schedule": variant["schedule"],
        "variant": variant["label"],
        "settings": {k: v for k, v in variant.items() if k not in ("label",)},
        "K": last["K"],
        "reached": ok,
        "capped": not ok,
        "stopped": stopped,
        "total_sweeps": last["median_total_sweeps"],
        "median_abs_error": last["median_abs_error"],
        "confirm_median_abs_error": None if last["confirm"] is None else last["confirm"]["median_abs_error"],
        "seconds": time.perf_counter() - t0,
        "levels": levels,
    }


def variants(args) -> list[dict]:
    out = []
    for name in args.schedules:
        if name in ("linear", "sigmoid", "sm14500"):
            out.append({"schedule": name, "label": name})
        elif name == "adaptive":
            for spb in args.sweeps_per_beta:
                for te in args.target_ess:
                    out.append(
                        {
                            "schedule": "adaptive",
                            "label": f"adaptive ess={te:g} spb={spb}",
                            "target_ess": te,
                            "sweeps_per_beta": spb,
                        }
                    )
        elif name == "tuned":
            for start in args.tuned_start.split(","):
                out.extend(tuned_variant(int(pc), start) for pc in args.tuned_pilot_chains.split(","))
        elif name == "moment-averaging":
            for L in args.ma_anchors:
                out.append(
                    {
                        "schedule": "moment-averaging",
                        "label": f"moment-averaging L={L}",
                        "anchors": L,
                        "target": args.ma_target,
                        "target_burn_in": args.ma_target_burn_in,
                        "target_sweeps": args.ma_target_sweeps,
                        "fit_updates": args.ma_fit_updates,
                        "learning_rate": args.ma_lr,
                        "smooth": args.ma_smooth,
                    }
                )
    return out


def tuned_variant(pilot_chains: int = 100, start: str = "linear") -> dict:
    """The ``tuned`` contender (:mod:`logzbench.estimators.tuned`): pilot rounds of doubling K (``pilot_chains``
    chains each, as many rounds as keep the first at 8 steps, the first on the ``start`` schedule) re-space beta
    from their log-weight increments;
    ``K`` is the final round's, the pilot rounds' sweeps count in ``total_sweeps``.  It starts at ``K = 16`` at
    least (the smallest K it can double to)."""
    from logzbench.schedules import TUNED_MIN_START_K

    return {
        "schedule": "tuned",
        "label": f"tuned {start} pilot_chains={pilot_chains}",
        "pilot_chains": pilot_chains,
        "tuned_start": start,
        "k_min": 2 * TUNED_MIN_START_K,
    }


def best_of(rows: list[dict]) -> dict:
    """The variant that got below the tolerance with the fewest sweeps; else the smallest error at the cap."""
    ok = [r for r in rows if r["reached"]]
    if ok:
        return min(ok, key=lambda r: r["total_sweeps"])
    return min(rows, key=lambda r: r["median_abs_error"])


def _fmt_sweeps(r: dict) -> str:
    return (">" if r["capped"] and r["schedule"] != "sm14500" else "") + f"{r['total_sweeps']:.3g}"


def _ratio(r: dict, lin: dict | None) -> str:
    if lin is None:
        return "n/a"
    x = r["total_sweeps"] / lin["total_sweeps"]
    rc, lc = r["capped"] and r["schedule"] != "sm14500", lin["capped"]
    if rc and lc:
        return "n/a (both capped)"
    if lc:  # linear needs more than its cap's sweeps
        return f"<{x:.2f}"
    if rc:
        return f">{x:.2f}"
    return f"{x:.2f}"


def table(results: list[dict], tol: float) -> tuple[str, list[dict]]:
    """The main table (one row per model and schedule, adaptive / MA: the best variant) as text."""
    lines = [
        f"{'model':16s} {'schedule':18s} {'best variant':28s} {'K reached':>13s} {'total sweeps':>13s} "
        f"{'ratio to linear':>17s} {'median |err|':>12s} {'confirm':>8s}"
    ]
    rows = []
    for model in dict.fromkeys(r["model"] for r in results):
        mine = [r for r in results if r["model"] == model]
        lin = next((r for r in mine if r["schedule"] == "linear"), None)
        for sched in SCHEDULES:
            group = [r for r in mine if r["schedule"] == sched]
            if not group:
                continue
            r = best_of(group)
            rows.append(r)
            k = f"{r['K']}" + (" (fixed)" if sched == "sm14500" else (" (cap)" if r["capped"] else ""))
            c = r.get("confirm_median_abs_error")
            lines.append(
                f"{model:16s} {sched:18s} {r['variant'] if len(group) > 1 else '':28s} {k:>13s} "
                f"{_fmt_sweeps(r):>13s} {_ratio(r, lin):>17s} {r['median_abs_error']:12.4f} "
                f"{'' if c is None else f'{c:.4f}':>8s}"
            )
    return "\n".join(lines), rows


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny models, 2 seeds, K up to 256 (a smoke run)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 (default 5; --quick 2)")
    p.add_argument("--k-start", type=int, default=16)
    p.add_argument("--k-cap", type=int, default=None, help="largest K tried (default 32768; --quick 256)")
    p.add_argument("--tol", type=float, default=0.1, help="target median |log Z_hat - log Z| in nats")
    p.add_argument("--chains", type=int, default=100)
    p.add_argument("--schedules", default=",".join(SCHEDULES), help=f"comma-separated subset of {SCHEDULES}")
    p.add_argument("--target-ess", default="0.9,0.99", help="adaptive: conditional ESS targets tried")
    p.add_argument("--sweeps-per-beta", default="1,2", help="adaptive: sweeps per temperature tried")
    p.add_argument("--tuned-pilot-chains", default="100,25", help="tuned: chains of each pilot round, tried")
    p.add_argument("--tuned-start", default="linear", help="tuned: first-round schedules tried (linear, sigmoid)")
    p.add_argument(
        "--ma-anchors",
        default=None,
        help="moment averaging: anchor intervals L (fitted RBMs at j / L; "
        "comma-separated values are each tried; default 32; --quick 8); K < L uses K anchors",
    )
    p.add_argument("--ma-fit-updates", type=int, default=50, help="moment-matching steps (Gibbs sweeps) per anchor")
    p.add_argument("--ma-lr", type=float, default=0.05, help="moment-matching step size")
    p.add_argument(
        "--ma-smooth",
        type=int,
        default=2,
        help="average each fitted anchor with this many neighbours on each side (0: none)",
    )
    p.add_argument(
        "--ma-target",
        default="data",
        choices=["data", "pilot"],
        help="the model's moments from Gibbs "
        "chains started at training rows, or from an adaptive SMC pilot's weighted particles",
    )
    p.add_argument("--ma-target-burn-in", type=int, default=100, help="sweeps before averaging the model's moments")
    p.add_argument("--ma-target-sweeps", type=int, default=200, help="sweeps averaged for the model's moments")
    p.add_argument(
        "--model",
        action="append",
        help=f"built-in model(s) to run (default: {', '.join(FULL_MODELS)}; --quick: {', '.join(QUICK_MODELS)})",
    )
    p.add_argument(
        "--models", nargs="+", metavar="NPZ", help="model files to evaluate instead (exact log Z by enumeration)"
    )
    p.add_argument("--workdir", help="where prepared data sets go (default: a temporary directory)")
    p.add_argument(
        "--no-confirm",
        action="store_true",
        help="accept the first K whose median is below the "
        "tolerance without confirming it on as many fresh seeds (1000, 1001, ...)",
    )
    p.add_argument("--json", help="also write every run here")
    args = p.parse_args(argv)
    seeds = list(range(args.seeds if args.seeds is not None else (2 if args.quick else 5)))
    k_cap = args.k_cap if args.k_cap is not None else (256 if args.quick else 32768)
    args.schedules = [s.strip() for s in args.schedules.split(",") if s.strip()]
    for s in args.schedules:
        if s not in SCHEDULES:
            p.error(f"unknown schedule {s!r}; choose from {SCHEDULES}")
    args.target_ess = [float(x) for x in args.target_ess.split(",")]
    args.sweeps_per_beta = [int(x) for x in args.sweeps_per_beta.split(",")]
    args.ma_anchors = [int(x) for x in (args.ma_anchors or ("8" if args.quick else "32")).split(",")]
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return _run(args, seeds, k_cap)
    finally:
        torch.set_num_threads(previous_threads)


def _run(args, seeds, k_cap: int) -> dict:
    started = time.perf_counter()
    now = datetime.datetime.now().astimezone()
    header = [
        f"# bench_schedules  {now.isoformat(timespec='seconds')}",
        f"# machine: {machine(' | ')} | Python {platform.python_version()} | torch {torch.__version__}",
        f"# torch threads: {torch.get_num_threads()}",
        f"# AIS chains {args.chains}, seeds {seeds}, K doubled from {args.k_start} to at most {k_cap}, "
        f"target median |log Z_hat - log Z| < {args.tol} nat; sm14500 fixed at K = {SM14500_K}",
    ]
    print("\n".join(header), flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir) if args.workdir else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        if args.models:
            benches = load_model_files(args.models)
        else:
            benches = build_models(args.model or (QUICK_MODELS if args.quick else FULL_MODELS), workdir, args.quick)
    models_info = []
    for b in benches:
        m = b.model
        sizes = getattr(m, "layer_sizes", None) or (m.n_visible, m.n_hidden)
        info = {
            "model": b.name,
            "family": m.family,
            "sizes": list(sizes),
            "exact_log_z": b.log_z,
            "init": b.init,
            "note": b.note,
            "train_seconds": round(b.train_seconds, 2),
            "exact_seconds": round(b.exact_seconds, 2),
        }
        rbm = m if m.family == "rbm" else None
        modes = hidden_modes(rbm) if rbm is not None else None
        if modes is not None:
            mass, ham = modes
            keep = mass > 0.01
            info.update(modes_mass=[round(float(x), 3) for x in mass[keep]], modes_hamming=[int(x) for x in ham[keep]])
        models_info.append(info)
        print(
            f"# model {b.name}: {m.family} {'-'.join(map(str, sizes))}, exact log Z {b.log_z:.4f}, init {b.init}; "
            f"{b.note}; trained in {b.train_seconds:.1f} s, exact in {b.exact_seconds:.1f} s"
            + (
                f"; p(h) basins >1 %: masses {info['modes_mass']}, Hamming from the heaviest {info['modes_hamming']}"
                if "modes_mass" in info
                else ""
            ),
            flush=True,
        )

    results = []
    for b in benches:
        ma_cache: dict = {}
        for v in variants(args):
            results.append(
                measure(
                    b,
                    v,
                    seeds,
                    args.k_start,
                    k_cap,
                    args.tol,
                    args.threads,
                    args.chains,
                    ma_cache,
                    confirm_seeds=() if args.no_confirm else [1000 + s for s in seeds],
                )
            )
    text, rows = table(results, args.tol)
    print("\nEvery variant tried (K reached, median total sweeps, median |err|, seconds of benchmark time):")
    for r in results:
        print(
            f"  {r['model']:16s} {r['variant']:28s} K={r['K']:6d}"
            f"{' cap' if r['capped'] and r['schedule'] != 'sm14500' else '    '}"
            f"  sweeps {_fmt_sweeps(r):>10s}  |err| {r['median_abs_error']:.4f}  {r['seconds']:.1f} s"
        )
    print(f"\n{text}")
    # the hardest model: the one whose linear schedule needs the most sweeps
    summary = {}
    lin_rows = [r for r in rows if r["schedule"] == "linear"]
    if lin_rows:
        hard = max(lin_rows, key=lambda r: (r["capped"], r["total_sweeps"]))
        ada = next((r for r in rows if r["model"] == hard["model"] and r["schedule"] == "adaptive"), None)
        ma = next((r for r in rows if r["model"] == hard["model"] and r["schedule"] == "moment-averaging"), None)
        summary = {"hardest_model": hard["model"]}
        line = f"\nhardest model (most linear sweeps): {hard['model']}"
        for label, r in (("adaptive", ada), ("moment-averaging", ma)):
            if r is not None:
                fewer = hard["total_sweeps"] / r["total_sweeps"]
                summary[f"{label}_fewer_sweeps_than_linear"] = fewer
                how = f"{fewer:.2f}x fewer" if fewer >= 1 else f"{1 / fewer:.2f}x more"
                line += (
                    f"; {label} ({r['variant']}) needs {_ratio(r, hard)} of linear's sweeps "
                    f"({'at least ' if hard['capped'] and not r['capped'] else ''}{how})"
                )
        print(line + "; the issue's target for adaptive: at least 3x fewer")
    wall = time.perf_counter() - started
    print(f"\ntotal wall time {wall:.0f} s")
    out = {
        "date": now.isoformat(),
        "machine": machine(),
        "cpu": cpu_model(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "seeds": seeds,
        "k_start": args.k_start,
        "k_cap": k_cap,
        "tol": args.tol,
        "chains": args.chains,
        "models": models_info,
        "results": results,
        "table": rows,
        "summary": summary,
        "wall_seconds": wall,
    }
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1, default=float)
    return out


if __name__ == "__main__":
    main()
