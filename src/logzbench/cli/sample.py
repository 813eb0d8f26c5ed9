"""``logzbench sample``: samples of a model file, written to an ``.npz``."""

from __future__ import annotations

import json
from pathlib import Path

from .. import options, registry
from .outputs import check_outputs, model_path, pin_paths, result_stream
from .threads import add_threads

HELP = "draw samples from a model file (exact, MCMC, parallel tempering, or the final states of AIS)"
DESCRIPTION = (
    "Draw samples from a model (the same MODEL argument as estimate): exact draws where "
    "enumeration is cheap, else MCMC on the model's annealing path at --beta; with --annealed K the final "
    "states of AIS (the annealing model p_ann). Writes x, h (hidden units, where the model has them) and a "
    "JSON 'meta' string to --out (.npz) and prints one summary line."
)


def add(p) -> None:
    """The flags of ``logzbench sample`` on its parser ``p``."""
    p.add_argument(
        "model", help="the model, as for logzbench estimate (an .npz, a Potts text file, FILE.py:NAME, a .pt)"
    )
    p.add_argument("--n", type=int, required=True, help="samples to draw (> 0)")
    p.add_argument("--beta", type=float, default=1.0, help="inverse temperature on the annealing path, in [0, 1]")
    p.add_argument("--annealed", type=int, metavar="K", help="final states of AIS with K intermediate distributions")
    p.add_argument(
        "--init",
        default="base-rate",
        choices=registry.INITS,
        help="initial distribution of the path: where chains start, and f_0 of p_beta for beta < 1",
    )
    p.add_argument("--train-data", help="training rows (the base rate without the model's data_mean)")
    p.add_argument("--burn-in", type=int, help="MCMC sweeps discarded first (default 1000)")
    p.add_argument("--thin", type=int, default=1, help="MCMC sweeps between kept states of a chain")
    p.add_argument("--chains", type=int, help="parallel MCMC chains (default: --n, one sample each)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    p.add_argument("--exact", default="auto", choices=("auto", "always", "never"), help="exact draws: where cheap")
    p.add_argument(
        "--method",
        default="auto",
        choices=("auto", "pt"),
        help="auto: exact where cheap, else MCMC on the path (AIS with --annealed); pt: the beta = 1 chains of "
        "non-reversible parallel tempering, its ladder tuned first (--chains runs; --burn-in: scans after the "
        "tuning, default 0)",
    )
    p.add_argument("--temperatures", type=int, help="--method pt: chains on the ladder (default 16, at least 2)")
    p.add_argument("--rounds", type=int, help="--method pt: ladder-tuning rounds of doubling scans (default 10)")
    options.declared()["transition"].add_to(p)  # the estimators' flag: a user's discrete energy's transition
    p.add_argument("--out", required=True, help="the samples (.npz, written atomically)")
    p.add_argument("--grid", help="also a PNG grid of the first 100 samples (image-shaped rows only)")
    add_threads(p)


def _grid_shape(model, kind: str, train_data: str | None) -> tuple[int, int]:
    """``(h, w)`` of one sample as an image: the prepared training file's ``image_shape``, else a square;
    ValueError (one line) for rows that are not images."""
    d = int(getattr(model, "n_visible", None) or model.n_dims)
    if kind == "categorical":
        raise ValueError(f"--grid draws images; a categorical model's rows of {d} states are not images")
    if train_data and str(train_data).endswith(".npz"):
        import numpy as np

        with np.load(train_data, allow_pickle=False) as z:
            shape = tuple(int(s) for s in z["image_shape"]) if "image_shape" in z.files else ()
        if len(shape) == 2 and shape[0] * shape[1] == d:
            return shape
    from ..report.samples import image_shape

    shape = image_shape(d)
    if shape is None:
        raise ValueError(f"--grid: samples of {d} values are not images (not a square, no image_shape); leave it out")
    return shape


def run(args) -> int:
    model_file = model_path(args.model)  # FILE.py of FILE.py:NAME: checked before anything is loaded
    import numpy as np

    from ..data import load_rows
    from ..models.io import load_model
    from ..sampling import sample
    from ..utils import file_sha256, output_transaction, save_npz_atomic

    check_outputs(
        [("--out", args.out), ("--grid", args.grid)],
        inputs=[("model", model_file), ("--train-data", args.train_data)],
    )
    pin_paths(args, "out", "grid", "train_data")
    model = load_model(args.model)
    kind = registry.family(model.family).data_kind
    shape = _grid_shape(model, kind, args.train_data) if args.grid else None  # refused before any work
    train = load_rows(args.train_data, kind, "train", family=model.family) if args.train_data else None
    res = sample(
        model,
        args.n,
        beta=args.beta,
        annealed=args.annealed,
        init=args.init,
        data=train,
        burn_in=args.burn_in,
        thin=args.thin,
        chains=args.chains,
        seed=args.seed,
        device=args.device,
        exact=args.exact,
        method=args.method,
        temperatures=args.temperatures,
        rounds=args.rounds,
        transition=getattr(args, "transition", "gibbs"),
    )
    meta = {
        "model": str(args.model),
        "model_sha256": file_sha256(model_file),
        "method": res.method,
        "burn_in": res.burn_in,
        "sweeps": res.sweeps,
        "seconds": res.seconds,
        "threads": args.threads,
        "settings": res.settings,
    }
    arrays = {"x": res.x, "meta": np.asarray(json.dumps(meta))}
    if res.h is not None:
        arrays["h"] = res.h
    with output_transaction():  # both outputs, or neither
        save_npz_atomic(args.out, **arrays)
        if args.grid:
            from ..report.samples import plot_sample_grid

            plot_sample_grid(res.x, shape, args.grid, title=f"{Path(str(args.model)).name}: {res.method}")
    print(
        f"logzbench sample: {len(res.x)} samples, method {res.method}, burn-in {res.burn_in} sweeps, "
        f"{res.sweeps} sweeps, {res.seconds:.2f} s -> {args.out}",
        file=result_stream(),
    )
    return 0
