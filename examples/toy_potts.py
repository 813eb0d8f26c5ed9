"""A pairwise Potts model of a toy alignment: sample, fit by pseudo-likelihood, save as text, estimate.

What it shows, end to end:

1. a short toy "alignment": ``--n-train + --n-test`` sequences (default 400 + 100) of ``L = 8`` sites
   over ``q = 5`` letters, drawn *exactly* from a known random :class:`~logzbench.models.PottsModel`
   by enumerating its ``5^8 = 390,625`` states, with a fixed seed; written as an ``.npy`` of integer
   states (what the estimators read) and as FASTA-like text (for show; letters ``-ACDE``, adabmDCA's
   protein alphabet with the gap as state 0);
2. a pairwise Potts model fitted to the training sequences by pseudo-likelihood
   (:func:`logzbench.training.potts.train_potts`, plmDCA's objective, L-BFGS);
3. the fit written in the plain-text ``J i j a b value`` / ``h i a value`` format
   (:func:`~logzbench.models.potts_text.write_potts_text`, as adabmDCA / bmDCA parameter files) and read back
   with :func:`logzbench.models.load_model`;
4. log Z of the fit by exact enumeration, AIS and the sandwich bracket, and the test log-likelihood by
   exact enumeration, AIS and RAISE, side by side.

Run::

    python examples/toy_potts.py --quick          # a few seconds
    python examples/toy_potts.py                  # larger K and more chains
    logzbench estimate toy_potts/potts_fit.txt --estimator ais --data toy_potts/test.npy \\
        --train-data toy_potts/train.npy --init base-rate --steps 1000 --chains 200

(the text file holds no training frequencies, so ``--init base-rate`` needs ``--train-data``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

from logzbench.api import estimate
from logzbench.models.io import load_model
from logzbench.models.potts import PottsModel
from logzbench.models.potts_text import write_potts_text
from logzbench.training.potts import train_potts

#: letters of the toy alignment: adabmDCA's protein alphabet's first five (the gap is state 0), so the
#: FASTA text reads back with the same state numbers
ALPHABET = "-ACDE"


def all_states(L: int, q: int) -> torch.Tensor:
    """The ``q^L`` states as int64 rows, lexicographic (site 0 most significant)."""
    k = torch.arange(q**L, dtype=torch.int64)
    powers = q ** torch.arange(L - 1, -1, -1, dtype=torch.int64)
    return (k[:, None] // powers[None, :]) % q


def exact_samples(model: PottsModel, n: int, generator: torch.Generator) -> np.ndarray:
    """``n`` exact, independent draws from ``model`` by enumerating its states (float64 probabilities)."""
    states = all_states(model.n_visible, model.n_states)
    log_p = model.log_unnormalized_marginal(states)
    p = torch.softmax(log_p, dim=0)
    idx = torch.multinomial(p, int(n), replacement=True, generator=generator)
    return states[idx].numpy()


def write_fasta(rows: np.ndarray, path: Path, prefix: str = "seq") -> None:
    with open(path, "w") as fh:
        for r, row in enumerate(rows):
            fh.write(f">{prefix}{r}\n{''.join(ALPHABET[int(a)] for a in row)}\n")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small K and chains (a few seconds)")
    ap.add_argument("--out-dir", default="toy_potts", help="where the alignment and the fit go (default %(default)s)")
    ap.add_argument("--L", type=int, default=8, help="sites")
    ap.add_argument("--q", type=int, default=len(ALPHABET), help="letters (at most 5 for the FASTA text)")
    ap.add_argument("--n-train", type=int, default=400)
    ap.add_argument("--n-test", type=int, default=100)
    ap.add_argument("--scale", type=float, default=0.5, help="std of the true model's couplings")
    ap.add_argument("--field-scale", type=float, default=1.0, help="std of the true model's fields")
    ap.add_argument("--n-iter", type=int, default=None, help="L-BFGS iterations of the fit (default 50; quick 30)")
    ap.add_argument("--K", type=int, default=None, help="AIS / RAISE steps (default 2000; quick 300)")
    ap.add_argument("--chains", type=int, default=None, help="AIS chains (default 500; quick 100)")
    ap.add_argument("--raise-chains", type=int, default=None, help="RAISE chains per test row (default 20; quick 5)")
    ap.add_argument("--target-width", type=float, default=None, help="sandwich width, nats (default 0.1; quick 0.5)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    for k, (quick, full) in dict(
        n_iter=(30, 50), K=(300, 2000), chains=(100, 500), raise_chains=(5, 20), target_width=(0.5, 0.1)
    ).items():
        if getattr(args, k) is None:
            setattr(args, k, quick if args.quick else full)
    if args.q > len(ALPHABET):
        ap.error(f"--q at most {len(ALPHABET)} (letters {ALPHABET!r})")
    return args


def _cell(x, se=None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return f"{'':>18}"
    return f"{x:9.4f}" + (f" ± {se:<6.4f}" if se is not None and not math.isnan(se) else f"{'':9}")


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    t_all = time.perf_counter()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(args.seed)

    # 1. the alignment, drawn exactly from a known model
    truth = PottsModel.random(args.L, args.q, scale=args.scale, field_scale=args.field_scale, generator=g)
    rows = exact_samples(truth, args.n_train + args.n_test, g)
    train, test = rows[: args.n_train], rows[args.n_train :]
    np.save(out / "train.npy", train)
    np.save(out / "test.npy", test)
    write_fasta(train, out / "train.fasta")
    print(
        f"alignment: {len(train)} training + {len(test)} test sequences, L = {args.L}, q = {args.q} "
        f"({args.q}^{args.L} = {args.q**args.L:,} states), drawn exactly from a random Potts model"
    )
    print("first sequences:", " ".join("".join(ALPHABET[int(a)] for a in r) for r in train[:6]))
    print(f"wrote {out}/train.npy, {out}/test.npy (integer states) and {out}/train.fasta (letters {ALPHABET!r})")

    # 2. the fit
    t0 = time.perf_counter()
    # exact_ll_max_bits=0: no exact log-likelihood per iteration (5^8 states each time); the end is enumerated below
    fit, history = train_potts(train, test, n_states=args.q, n_iter=args.n_iter, exact_ll_max_bits=0)
    t_fit = time.perf_counter() - t0
    last = history[-1]
    print(
        f"\npseudo-likelihood fit: {args.n_iter} L-BFGS iterations, {t_fit:.1f} s; train / test "
        f"pseudo-LL {last['train_pseudo_log_likelihood']:.3f} / {last['test_pseudo_log_likelihood']:.3f}"
    )

    # 3. the text format, and back
    txt = out / "potts_fit.txt"
    write_potts_text(fit, txt)
    model = load_model(txt)
    diff = float((model.log_unnormalized_marginal(test) - fit.log_unnormalized_marginal(test)).abs().max())
    n_lines = sum(1 for _ in open(txt))
    print(
        f"wrote {txt} ({n_lines} lines of 'J i j a b value' / 'h i a value'); read back: "
        f"{type(model).__name__}, max |log f difference| on the test rows {diff:.1e}"
    )

    # 4. the estimates
    common = dict(train_data=train, init="base-rate", seed=args.seed, threads=args.threads)
    res = {}
    res["exact"] = estimate(model, "exact", data=test, **common)
    res["ais"] = estimate(model, "ais", data=test, K=args.K, chains=args.chains, **common)
    res["sandwich"] = estimate(model, "sandwich", chains=args.chains, target_width=args.target_width, **common)
    res["raise"] = estimate(model, "raise", data=test, K=args.K, chains=args.raise_chains, **common)
    truth_ll = float((truth.log_unnormalized_marginal(test)).mean()) - truth.exact_log_z()

    print(
        f"\nthe fitted model (K = {args.K}; AIS and sandwich {args.chains} chains, RAISE {args.raise_chains} "
        f"chains per test row; base-rate start):"
    )
    print(f"{'estimator':<10} {'log Z':>18} {'test log-likelihood':>22} {'ESS':>7} {'seconds':>8}  sweeps/chain")
    for name, r in res.items():
        ll = _cell(r.mean_log_likelihood, r.mean_log_likelihood_stderr)
        print(f"{name:<10} {_cell(r.log_z, r.log_z_stderr)} {ll:>22} {r.ess:7.1f} {r.seconds:8.2f}  {r.n_sweeps}")
    b = res["sandwich"].extra["bracket"]
    print(
        f"sandwich bracket on log Z: [{b['log_z_lower']:.4f}, {b['log_z_upper']:.4f}] "
        f"(lower: {b['log_z_lower_estimator']}, {'guaranteed' if b['log_z_lower_guaranteed'] else 'approximate'}; "
        f"upper: {b['log_z_upper_estimator']}, {'guaranteed' if b['log_z_upper_guaranteed'] else 'approximate'}; "
        f"K = {b['K']}, width reached: {b['width_reached']})"
    )
    ex = res["exact"].log_z
    for name in ("ais", "sandwich"):
        r = res[name]
        print(f"  {name} - exact: {r.log_z - ex:+.4f} nats ({(r.log_z - ex) / r.log_z_stderr:+.2f} standard errors)")
    print(f"the generating model's own test log-likelihood (exact): {truth_ll:.4f}")
    print(
        "\nAIS's log Z-hat errs low (its Z-hat is unbiased), so its test LL errs high; RAISE's errs low "
        "(a stochastic lower bound of the annealing model's LL); exact enumeration is the truth here."
    )
    print(f"\ntotal {time.perf_counter() - t_all:.1f} s")
    return {
        "truth": truth,
        "fit": fit,
        "model": model,
        "results": res,
        "train": train,
        "test": test,
        "text_file": txt,
        "truth_test_ll": truth_ll,
        "roundtrip_diff": diff,
    }


if __name__ == "__main__":
    main(sys.argv[1:])
