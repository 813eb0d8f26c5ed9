"""Bring your own energy: a small MLP on the scikit-learn digits, trained, saved and estimated.

What it shows, end to end:

1. an energy model written as a plain :class:`torch.nn.Module` (``MLPEnergy``: a linear visible term
   plus a one-hidden-layer MLP, ``log f(v) = a.v + w2 . softplus(W1 v + b1)``), wrapped in a
   :class:`logzbench.models.EnergyModel` on the binary domain ``{0, 1}^64``;
2. training by persistent contrastive divergence whose negative samples come from the EnergyModel's own
   Metropolis-within-Gibbs sweep at ``beta = 1`` (``path.transition(state, 1.0, generator)``): the
   sampler the estimators use is the one training used;
3. saving it as TorchScript (:func:`logzbench.models.source.save_torchscript`) with the test and
   training rows as ``.npy`` beside it;
4. estimating it with ``ais`` (log Z and the test log-likelihood it implies), ``raise`` (the test
   log-likelihood from the other side) and the ``sandwich`` bracket.

Run::

    python examples/digits_mlp_energy.py --quick            # under a minute on one thread
    python examples/digits_mlp_energy.py                    # a few minutes: more training, larger K

and then, from the command line, with the model this file's ``model()`` loads::

    logzbench estimate examples/digits_mlp_energy.py:model --estimator sandwich \\
        --data digits_mlp_test.npy --train-data digits_mlp_train.npy --init base-rate --chains 10

``FILE.py:NAME`` *imports* this file -- which runs its top-level code, as any Python import does --
and calls ``model()``.  Training runs only under ``if __name__ == "__main__"``, so the import is cheap.
``model()`` reads the ``.pt`` file named by ``$DIGITS_MLP_PT`` (default ``digits_mlp.pt`` in the
current directory).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from logzbench.api import estimate
from logzbench.models import EnergyModel
from logzbench.models.io import load_model
from logzbench.models.source import save_torchscript

#: where ``model()`` looks for the trained weights (overridden by $DIGITS_MLP_PT)
DEFAULT_PT = "digits_mlp.pt"
SPLIT_SEED = 0


class MLPEnergy(nn.Module):
    """``log f(v) = a.v + w2 . softplus(W1 v + b1)`` on binary ``v`` ``(n, dim)`` -> ``(n,)``.

    With ``w2 = 1`` this is exactly an RBM's free energy; a learned ``w2`` (of either sign) makes it a
    small MLP energy that no family of logzbench samples natively.
    """

    def __init__(self, dim: int = 64, hidden: int = 64):
        super().__init__()
        self.visible = nn.Linear(dim, 1)  # the linear visible term a.v (its bias cancels in p)
        self.hidden = nn.Linear(dim, hidden)
        self.out = nn.Linear(hidden, 1, bias=False)

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        h = nn.functional.softplus(self.hidden(v))
        return (self.visible(v) + self.out(h)).squeeze(-1)


# --------------------------------------------------------------------------- data
def load_digits_binary(seed: int = SPLIT_SEED, test_fraction: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """The 1797 scikit-learn digits (8x8, grey levels 0..16) binarised at 8 (``pixel >= 8`` -> 1) as
    ``uint8`` rows of 64 units, split into ``(train, test)`` by a permutation seeded with ``seed``."""
    from sklearn.datasets import load_digits

    x = (load_digits().data >= 8).astype(np.uint8)
    perm = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(test_fraction * len(x)))
    return x[perm[n_test:]], x[perm[:n_test]]


# --------------------------------------------------------------------------- training
def train_pcd(
    train: np.ndarray,
    *,
    steps: int,
    hidden: int = 64,
    batch: int = 100,
    chains: int = 100,
    lr: float = 3e-3,
    weight_decay: float = 1e-4,
    seed: int = 0,
    log_every: int = 100,
) -> EnergyModel:
    """Persistent contrastive divergence: ``loss = mean(-log f(data)) - mean(-log f(negatives))`` with
    Adam, the negatives ``chains`` persistent chains advanced by one Metropolis-within-Gibbs sweep of the
    EnergyModel's own path at ``beta = 1`` per step.  Returns the trained :class:`EnergyModel` (its
    ``data`` are the training rows: the base-rate reference the estimators' ``init="base-rate"`` uses)."""
    g = torch.Generator().manual_seed(int(seed))
    torch.manual_seed(int(seed))  # nn.Linear's initialisation uses the global generator
    x = torch.as_tensor(train, dtype=torch.float32)
    net = MLPEnergy(x.shape[1], hidden)
    with torch.no_grad():  # start the visible term at the data base rate's logits, the hidden part small
        p = x.mean(0).clamp(0.02, 0.98)
        net.visible.weight.copy_(torch.log(p / (1 - p))[None, :])
        net.hidden.weight.mul_(0.1)
        net.out.weight.mul_(0.1)
    model = EnergyModel(net, x.shape[1], "binary", data=train, name="digits-mlp")
    path = model.annealing_path("base-rate")  # at beta = 1 the reference plays no part
    state = path.sample_initial(chains, g)  # persistent chains start at the base rate
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    t0 = time.perf_counter()
    for step in range(1, int(steps) + 1):
        # the parameters changed since the last sweep: refresh the chains' cached log f before moving them
        state = path.state_from_data(state.x)
        state = path.transition(state, 1.0, g)
        idx = torch.randint(0, x.shape[0], (batch,), generator=g)
        loss = (-net(x[idx])).mean() - (-net(state.x)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if log_every and (step % log_every == 0 or step == steps):
            print(
                f"  step {step:5d}  loss {loss.item():+8.3f}  acceptance {path.acceptance_rate:.3f}  "
                f"{time.perf_counter() - t0:6.1f} s",
                flush=True,
            )
    net.eval()
    return model


# --------------------------------------------------------------------------- the loader
def model() -> EnergyModel:
    """The trained model, for ``logzbench estimate examples/digits_mlp_energy.py:model``: loaded from
    ``$DIGITS_MLP_PT`` (default ``digits_mlp.pt`` in the current directory), written by running this
    file."""
    path = Path(os.environ.get("DIGITS_MLP_PT", DEFAULT_PT))
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found: train it first (python examples/digits_mlp_energy.py [--quick] --out {path}), "
            "or point $DIGITS_MLP_PT at the .pt file"
        )
    return load_model(path)


# --------------------------------------------------------------------------- reporting
def _fmt(x, se=None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "      n/a"
    return f"{x:9.3f}" + (f" ± {se:.3f}" if se is not None and not math.isnan(se) else "")


def print_result(label: str, res) -> None:
    print(
        f"{label:<8} log Z {_fmt(res.log_z, res.log_z_stderr):<20} test LL "
        f"{_fmt(res.mean_log_likelihood, res.mean_log_likelihood_stderr):<20} ESS {res.ess:7.1f}  "
        f"{res.seconds:6.1f} s  {res.n_sweeps} sweeps/chain ({res.total_sweeps} in all)"
    )


def print_bracket(res) -> None:
    b = res.extra["bracket"]
    q = b["quantity"]
    what = "mean test log-likelihood" if q == "mean_log_likelihood" else "log Z"
    print(
        f"sandwich bracket on the {what} (K = {b['K']}, width {b['width']:.3f} nats, target "
        f"{b['target_width']:g}, reached: {b['width_reached']}):"
    )
    for side in ("lower", "upper"):
        k = f"{q}_{side}"
        print(
            f"  {side:5} {b[k]:9.3f}  (estimate {b[k + '_estimate']:.3f} ± {b[k + '_stderr']:.3f}, "
            f"{b[k + '_estimator']}; {'guaranteed' if b[k + '_guaranteed'] else 'approximate'}"
            + (f", of {b[k + '_of']}" if b.get(k + "_of") else "")
            + ")"
        )
        print(f"        {b[k + '_guarantee']}")
    if not b["width_reached"]:
        print(f"  {b['reason']}")


EXPLAIN = """\
What the numbers mean:
  * AIS estimates Z without bias, so log Z-hat errs LOW (Jensen), and the test log-likelihood it implies,
    mean log f(v) - log Z-hat, errs HIGH: a stochastic upper bound when the chains have not mixed.
  * RAISE anneals each test row back to the base-rate reference: its per-row estimates are stochastic
    LOWER bounds of log p_ann(v), the log-likelihood under the annealing model (close to the model's as K grows).
  * The sandwich doubles K until RAISE (below) and AIS (above) are within target_width nats, each end
    widened by its noise; the true test log-likelihood lies between them with the stated confidence."""


# --------------------------------------------------------------------------- main
def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a few hundred training steps, small K and chains (< ~60 s)")
    ap.add_argument("--out", default=DEFAULT_PT, help="TorchScript file to write (default %(default)s)")
    ap.add_argument("--steps", type=int, default=None, help="PCD steps (default 4000; quick 500)")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--K", type=int, default=None, help="AIS / RAISE steps K (default 1000; quick 200)")
    ap.add_argument("--chains", type=int, default=None, help="AIS chains (default 200; quick 100)")
    ap.add_argument(
        "--raise-chains", type=int, default=None, help="RAISE (and sandwich) chains per test row (default 10; quick 5)"
    )
    ap.add_argument(
        "--n-test", type=int, default=None, help="test rows estimated (default all 359; quick the first 100)"
    )
    ap.add_argument(
        "--target-width", type=float, default=None, help="sandwich target width in nats (default 0.5; quick 1)"
    )
    ap.add_argument(
        "--max-sweeps", type=int, default=None, help="sandwich budget of sweeps x chains (default 2e7; quick 1e6)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--skip-sandwich", action="store_true")
    args = ap.parse_args(argv)
    q = args.quick
    defaults = dict(
        steps=(500, 4000),
        K=(200, 1000),
        chains=(100, 200),
        raise_chains=(5, 10),
        n_test=(100, None),
        target_width=(1.0, 0.5),
        max_sweeps=(1_000_000, 20_000_000),
    )
    for k, (quick, full) in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, quick if q else full)
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    t_all = time.perf_counter()
    train, test_all = load_digits_binary()
    test = test_all if args.n_test is None else test_all[: args.n_test]  # the rows estimated here
    print(f"digits: {train.shape[0]} training rows, {test_all.shape[0]} test rows of {train.shape[1]} binary units")

    print(f"training by PCD ({args.steps} steps, {args.hidden} hidden units, torch threads {torch.get_num_threads()})")
    t0 = time.perf_counter()
    m = train_pcd(train, steps=args.steps, hidden=args.hidden, seed=args.seed, log_every=max(args.steps // 5, 1))
    t_train = time.perf_counter() - t0

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_torchscript(m, out)
    stem = out.with_suffix("")
    np.save(f"{stem}_train.npy", train)
    np.save(f"{stem}_test.npy", test_all)  # the whole test split, whatever --n-test says
    loaded = load_model(out)
    probe = torch.as_tensor(test[:5], dtype=torch.float32)
    diff = float((loaded.log_f(probe) - m.log_f(probe)).abs().max())
    print(f"saved {out} (and {stem}_train.npy, {stem}_test.npy); reloaded: max |log f difference| = {diff:.2e}")

    common = dict(data=test, train_data=train, init="base-rate", seed=args.seed, threads=args.threads)
    print(
        f"\nestimates on {test.shape[0]} test rows (K = {args.K}; AIS {args.chains} chains, RAISE "
        f"{args.raise_chains} chains per test row):"
    )
    res = {}
    res["ais"] = estimate(loaded, "ais", K=args.K, chains=args.chains, **common)
    print_result("ais", res["ais"])
    res["raise"] = estimate(loaded, "raise", K=args.K, chains=args.raise_chains, **common)
    print_result("raise", res["raise"])
    if not args.skip_sandwich:
        res["sandwich"] = estimate(
            loaded,
            "sandwich",
            chains=args.raise_chains,
            target_width=args.target_width,
            max_sweeps=args.max_sweeps,
            **common,
        )
        print_result("sandwich", res["sandwich"])
        print("(the sandwich's log Z and test LL are the midpoints of its brackets: approximate values)")
        print_bracket(res["sandwich"])
    print()
    print(EXPLAIN)
    print(f"\ntotal {time.perf_counter() - t_all:.1f} s (training {t_train:.1f} s)")
    return {
        "model": m,
        "path": out,
        "train": train,
        "test": test,
        "probe_log_f": m.log_f(probe),
        "results": res,
        "train_seconds": t_train,
    }


if __name__ == "__main__":
    main(sys.argv[1:])
