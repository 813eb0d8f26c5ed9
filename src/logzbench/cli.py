"""The ``logzbench`` command line: ``prepare``, ``train``, ``estimate``, ``sample``, ``report``.

Every subcommand is a thin layer over a documented Python function; bad input ends with a
one-line error naming the problem and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import json
import logging
import os
import sys
from pathlib import Path

from . import options, registry
from .errors import LogzbenchError

_log = logging.getLogger(__name__)

#: environment variable of the default thread count (the same name as ``logzbench.utils.THREADS_ENV``;
#: not imported from there: ``utils`` imports torch, and importing the command line must not)
_THREADS_ENV = "LOGZBENCH_THREADS"


#: the most torch threads ``--threads`` (and ``$LOGZBENCH_THREADS`` on the command line) may ask for: far more
#: than any machine this runs on has CPUs to use (threads beyond the free CPUs only slow a run down), and far
#: below the counts that crash torch's thread pool (100,000 threads: interrupted; 99,999,999: a segfault)
MAX_THREADS = 256


def _thread_count(text: str) -> int:
    """``--threads`` value: an integer from 1 to :data:`MAX_THREADS`."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects an integer >= 1 (torch threads), got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expects an integer >= 1 (torch threads), got {n}")
    if n > MAX_THREADS:
        raise argparse.ArgumentTypeError(
            f"expects at most {MAX_THREADS} torch threads (this machine has {os.cpu_count()} CPUs), got {n}"
        )
    return n


def _add_threads(p) -> None:
    p.add_argument(
        "--threads",
        type=_thread_count,
        metavar="N",
        help=f"torch threads (default: ${_THREADS_ENV} if set, else automatic: the CPUs this process "
        "may use minus those other processes keep busy right now, at least 1 and at most torch's "
        f"default; more threads than free CPUs slow a run down many times); at most {MAX_THREADS}",
    )


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (``os.path.samefile`` where both exist, else equal resolved paths)."""
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def _check_outputs(outputs=(), inputs=(), dirs=()) -> None:
    """Refuse, before anything is loaded or computed, an output the command could not or must not write.

    ``outputs``: ``(option, file path or None)``; ``dirs``: ``(option, output directory or None)``;
    ``inputs``: ``(name, path or None)`` of the command's input files.  An output file must not be a
    directory, an existing non-regular file, one of the inputs or another output; an output directory
    must not be an existing non-directory; and the nearest existing directory above (the output
    directory itself, when it exists) must be a writable directory, where the missing folders are
    created.  An output file that is a symlink is written through (the file it resolves to is replaced,
    the link kept; a dangling link's target is created in its existing directory); one resolving to a
    special file (``/dev/stdout`` -> a pipe or terminal, a device, a FIFO, a socket) is refused.  Raises
    ValueError naming the option and the path.
    """
    done: list[tuple[str, Path]] = []
    for option, path, is_dir in [*((o, q, False) for o, q in outputs), *((o, q, True) for o, q in dirs)]:
        if path is None or str(path) == "":
            continue
        p, what = Path(path), f"{option} {path}"
        if is_dir and p.exists() and not p.is_dir():
            raise ValueError(f"{what}: exists and is not a directory (an output directory is expected)")
        if not is_dir and (p.is_dir() or str(path).endswith(("/", os.sep))):
            raise ValueError(f"{what}: is a directory; give a file name")
        if not is_dir and os.path.lexists(p):  # a symlink is written through; a special file is refused
            from .errors import OutputError
            from .utils import output_target

            try:
                p = output_target(p)
            except OutputError as exc:
                raise ValueError(f"{what}: {exc.reason}") from None
        base = Path(os.path.abspath(p if is_dir else p.parent))
        while not base.exists() and base != base.parent:
            base = base.parent
        if not base.is_dir():
            raise ValueError(f"{what}: cannot be created, {base} is not a directory")
        if not os.access(base, os.W_OK | os.X_OK):
            raise ValueError(f"{what}: directory {base} is not writable")
        if is_dir:
            continue
        for name, src in inputs:
            if src is not None and str(src) != "" and _same_file(p, Path(src)):
                raise ValueError(f"{what}: is the {name} file {src}; refusing to overwrite an input")
        for other, q in done:
            if _same_file(p, q):
                raise ValueError(f"{what}: {other} names the same file")
        done.append((option, p))


def _add_estimate(sub) -> None:
    p = sub.add_parser(
        "estimate",
        help="estimate log Z / test log-likelihood of a model file",
        description="Estimate log Z and, with --data, the mean test log-likelihood of a model "
        "(an .npz, a Potts text file, FILE.py:NAME or a TorchScript .pt; see the documentation, Models and "
        "file formats). Prints one JSON object. FILE.py:NAME imports FILE.py -- running its code, as any "
        "Python import does: give only files you trust -- and calls NAME().",
    )
    p.add_argument(
        "model",
        help="the model: an .npz file (an RBM, DBM, DBN, Potts or continuous model); a Potts text file "
        "('J i j a b value' / 'h i a value' lines); FILE.py:NAME, NAME() in FILE.py returning a "
        "logzbench.models.EnergyModel (FILE.py is imported, which runs its code as any Python import does); "
        "or a TorchScript .pt (logzbench.models.source.save_torchscript). See the documentation, Models and "
        "file formats",
    )
    p.add_argument(
        "--estimator",
        required=True,
        choices=registry.estimator_names(),
        metavar="ESTIMATOR",
        help="; ".join(f"{n}: {s.summary}" for n, s in registry.ESTIMATORS.items()),
    )
    p.add_argument(
        "--data",
        help="test rows of the model's kind (binary 0/1, categorical states 0..q-1, or real): .npy, or .npz "
        "(a prepared dataset's 'test' split)",
    )
    p.add_argument("--split", default="test", help="split to read from a prepared dataset .npz (default: test)")
    p.add_argument(
        "--train-data",
        help="training rows of the model's kind (binary or categorical: the base-rate init without data_mean; "
        "biased CSL)",
    )
    options.add_cli_flags(p)  # every estimator option, declared once (logzbench.options)
    p.add_argument("--json", dest="json_out", help="also write the JSON object to this file")
    p.add_argument("--log-weights", help="write per-chain log-weights (.npz) to this file")
    _add_threads(p)


def _estimate_options(args) -> dict:
    """The API options of ``logzbench estimate``: K defaults to 1000 for a schedule without its own length
    (linear, sigmoid, tuned, adaptive: the pilot's own length, kept by the API without K, is too coarse for an
    accurate estimate); ``sm14500`` and a schedule file keep theirs (a different ``--steps`` is refused);
    an estimator that reads K without sweeping it (the sandwich) starts from its own."""
    names = options.option_names()
    opts = {k: v for k, v in vars(args).items() if k in names}  # the flags given; the rest take their defaults
    spec = registry.estimator(args.estimator)
    schedule = opts.get("schedule") or dict(spec.defaults).get("schedule", "linear")
    if opts.get("K") is None and schedule in ("linear", "sigmoid", "adaptive", "tuned") and not spec.reads_unswept("K"):
        from .schedules import DEFAULT_K

        opts["K"] = DEFAULT_K
    return opts


def _model_file(spec: str) -> Path:
    """The file of a model argument (:func:`logzbench.sources.parse_source`: FILE.py of ``FILE.py:NAME``);
    ValueError (one line) for a ``.py`` without ``:NAME`` and for a file that does not exist, before anything
    is imported or computed."""
    from .sources import parse_source

    try:
        path = Path(parse_source(spec).path)
    except ValueError as exc:
        raise ValueError(f"model {exc}") from None
    if not path.exists():
        raise ValueError(f"model file not found: {path}")
    if path.is_dir():
        raise ValueError(f"model {path}: a directory, not a model file")
    return path.absolute()  # hashed after the user's code ran, which may chdir


def _pin_paths(args, *names: str) -> None:
    """Make the path options ``names`` of ``args`` that were given absolute, after :func:`_check_outputs`
    (which sees them as given) and before the model is loaded: a user's FILE.py:NAME runs code (at import,
    in NAME(), in log_f) that may ``os.chdir``, and must not move what the command reads or writes later."""
    for name in names:
        value = getattr(args, name, None)
        if value is not None and str(value) != "":
            setattr(args, name, os.path.abspath(value))


def _cmd_estimate(args) -> int:
    model_file = _model_file(args.model)  # FILE.py of FILE.py:NAME: checked before anything is loaded
    from .api import estimate
    from .data import load_rows
    from .models.io import load_model
    from .utils import file_sha256, output_transaction, save_npz_atomic, write_json_atomic

    schedule = getattr(args, "schedule", None)
    schedule_file = schedule if schedule and os.path.isfile(schedule) else None
    _check_outputs(
        [("--json", args.json_out), ("--log-weights", args.log_weights)],
        inputs=[
            ("model", model_file),
            ("--data", args.data),
            ("--train-data", args.train_data),
            ("--schedule", schedule_file),
        ],
    )
    data_given = args.data  # recorded as given
    _pin_paths(args, "json_out", "log_weights", "data", "train_data", *(("schedule",) if schedule_file else ()))
    model = load_model(args.model)  # FILE.py:NAME: imports FILE.py and checks NAME()'s model (one line if bad)
    kind = registry.family(model.family).data_kind  # binary 0/1, categorical 0..q-1 or real rows
    data = load_rows(args.data, kind, args.split, family=model.family) if args.data else None
    train = load_rows(args.train_data, kind, "train", family=model.family) if args.train_data else None
    res = estimate(model, args.estimator, data=data, train_data=train, threads=args.threads, **_estimate_options(args))
    # the model's identity: its file and content hash (the report never merges two different models; the
    # hash of FILE.py for FILE.py:NAME)
    out = {"model": str(args.model), "model_sha256": file_sha256(model_file), "data": data_given, **res.to_dict()}
    with output_transaction():  # both outputs, or neither
        if args.json_out:
            write_json_atomic(args.json_out, out)
        if args.log_weights:
            save_npz_atomic(args.log_weights, **res.arrays())
    print(json.dumps(out, indent=2), file=_stdout())
    return 0


def _add_sample(sub) -> None:
    p = sub.add_parser(
        "sample",
        help="draw samples from a model file (exact, MCMC, parallel tempering, or the final states of AIS)",
        description="Draw samples from a model (the same MODEL argument as estimate): exact draws where "
        "enumeration is cheap, else MCMC on the model's annealing path at --beta; with --annealed K the final "
        "states of AIS (the annealing model p_ann). Writes x, h (hidden units, where the model has them) and a "
        "JSON 'meta' string to --out (.npz) and prints one summary line.",
    )
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
    _add_threads(p)


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
    from .report.samples import image_shape

    shape = image_shape(d)
    if shape is None:
        raise ValueError(f"--grid: samples of {d} values are not images (not a square, no image_shape); leave it out")
    return shape


def _cmd_sample(args) -> int:
    model_file = _model_file(args.model)  # FILE.py of FILE.py:NAME: checked before anything is loaded
    import numpy as np

    from .data import load_rows
    from .models.io import load_model
    from .sampling import sample
    from .utils import file_sha256, output_transaction, save_npz_atomic

    _check_outputs(
        [("--out", args.out), ("--grid", args.grid)],
        inputs=[("model", model_file), ("--train-data", args.train_data)],
    )
    _pin_paths(args, "out", "grid", "train_data")
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
            from .report.samples import plot_sample_grid

            plot_sample_grid(res.x, shape, args.grid, title=f"{Path(str(args.model)).name}: {res.method}")
    print(
        f"logzbench sample: {len(res.x)} samples, method {res.method}, burn-in {res.burn_in} sweeps, "
        f"{res.sweeps} sweeps, {res.seconds:.2f} s -> {args.out}",
        file=_stdout(),
    )
    return 0


def _add_prepare(sub) -> None:
    p = sub.add_parser("prepare", help="download/verify and binarise a dataset (or cut whitened image patches)")
    p.add_argument(
        "name",
        help="dataset name (mnist, omniglot, digits, digits-avil, the UCI sets adult, connect4, "
        "dna, mushrooms, nips-0-12, ocr_letters, rcv1, web, clustered (synthetic); continuous: vanhateren "
        "patches, frey faces)",
    )
    p.add_argument("--out", required=True, help="output .npz")
    p.add_argument("--mirror", help="local mirror directory (default: $LOGZBENCH_DATA_MIRROR)")
    # options of some datasets only (default None: a given one that does not apply is refused, _PREPARE_OPTIONS)
    p.add_argument(
        "--binarize",
        choices=["stochastic", "threshold"],
        help="image sets: stochastic (default) or threshold binarization",
    )
    p.add_argument("--threshold", type=float, help="image sets, --binarize threshold: cut-off in [0, 1) (default 0.5)")
    p.add_argument(
        "--seed", type=int, help="image sets: binarization seed; vanhateren: patch sampling seed (default 0)"
    )
    p.add_argument("--n-train", type=int)
    p.add_argument("--n-test", type=int)
    p.add_argument("--n-valid", type=int, help="binary sets: training rows moved to a valid split (default 0)")
    g = p.add_argument_group("vanhateren (continuous patches)")
    g.add_argument("--n-images", type=int, help="images used (of the 20 registered; default 20)")
    g.add_argument("--n-test-images", type=int, help="held-out images the test patches come from (default 4)")
    g.add_argument("--patch-size", type=int, help="default 16")
    g.add_argument("--n-components", type=int, help="PCA components kept (M; default 36)")
    g.add_argument("--remove-dc", action="store_true", default=None, help="also remove each patch's own mean")
    g = p.add_argument_group("clustered (synthetic rows around random prototypes, drawn from --seed)")
    g.add_argument("--n-visible", type=int, help="bits per row (required)")
    g.add_argument("--prototypes", type=int, help="random prototypes (default 4)")
    g.add_argument("--weights", type=float, nargs="+", metavar="W", help="one mass per prototype (default equal)")
    g.add_argument(
        "--flip",
        type=float,
        nargs="+",
        metavar="P",
        help="bit-flip rate in [0, 0.5], or one per prototype (default 0.05)",
    )


#: binarized image sets (the other binary sets, the UCI ones, are binary already)
_IMAGE_SETS = ("mnist", "digits", "omniglot", "digits-avil")
#: ``prepare`` options that apply to some datasets only: dest -> (flag, default, the datasets it applies to)
_PREPARE_OPTIONS = {
    "binarize": ("--binarize", "stochastic", _IMAGE_SETS),
    "threshold": ("--threshold", 0.5, _IMAGE_SETS),
    "seed": ("--seed", 0, (*_IMAGE_SETS, "vanhateren", "clustered")),
    **{k: (f"--{k.replace('_', '-')}", None, ("clustered",)) for k in ("n_visible", "prototypes", "weights", "flip")},
    "n_valid": ("--n-valid", 0, "binary"),
    **{
        k: (f"--{k.replace('_', '-')}", d, ("vanhateren",))
        for k, d in (
            ("n_images", 20),
            ("n_test_images", 4),
            ("patch_size", 16),
            ("n_components", 36),
            ("remove_dc", False),
        )
    },
}


def _prepare_settings(args) -> None:
    """Refuse a ``prepare`` option given for a dataset it does not apply to (it would be ignored), naming
    the option and the dataset; then fill in the defaults of those not given."""
    from .data import CONTINUOUS_DATASETS, DATASETS

    name = args.name
    known = name in DATASETS or name in CONTINUOUS_DATASETS  # an unknown name is refused by its preparer
    what = (
        "Frey faces: standardized real rows"
        if name == "frey"
        else "van Hateren: whitened real-valued patches"
        if name == "vanhateren"
        else "a binarized image set"
        if name in _IMAGE_SETS
        else "synthetic binary rows"
        if name == "clustered"
        else "a UCI set: binary rows as published"
    )
    for dest, (flag, default, applies) in _PREPARE_OPTIONS.items():
        value = getattr(args, dest)
        if value is None:
            setattr(args, dest, default)
            continue
        sets = DATASETS if applies == "binary" else applies
        if known and name not in sets:
            where = "the binary sets" if applies == "binary" else ", ".join(sets)
            raise ValueError(f"{flag} does not apply to {name} ({what}); it applies to {where}")


def _cmd_prepare(args) -> int:
    from .data import CONTINUOUS_DATASETS, prepare_dataset, prepare_patches
    from .data.download import check_mirror

    _check_outputs([("--out", args.out)])
    _prepare_settings(args)  # an option the dataset does not take is refused, not ignored
    check_mirror(args.mirror)  # a mistyped mirror would fall back to downloading
    if args.name == "frey":  # standardized faces: only the split sizes apply
        sizes = {k: v for k, v in (("n_train", args.n_train), ("n_test", args.n_test)) if v is not None}
        path = prepare_patches(args.name, args.out, mirror=args.mirror, seed=args.seed, **sizes)
        print(json.dumps({"prepared": str(path)}))
        return 0
    if args.name in CONTINUOUS_DATASETS:
        sizes = {k: v for k, v in (("n_train", args.n_train), ("n_test", args.n_test)) if v is not None}
        path = prepare_patches(
            args.name,
            args.out,
            mirror=args.mirror,
            n_images=args.n_images,
            n_test_images=args.n_test_images,
            patch_size=args.patch_size,
            n_components=args.n_components,
            remove_dc=args.remove_dc,
            seed=args.seed,
            **sizes,
        )
        print(json.dumps({"prepared": str(path)}))
        return 0
    path = prepare_dataset(
        args.name,
        args.out,
        mirror=args.mirror,
        binarize=args.binarize,
        threshold=args.threshold,
        seed=args.seed,
        n_train=args.n_train,
        n_test=args.n_test,
        n_valid=args.n_valid,
        n_visible=args.n_visible,
        prototypes=args.prototypes,
        weights=args.weights,
        flip=args.flip[0] if args.flip is not None and len(args.flip) == 1 else args.flip,
    )
    print(json.dumps({"prepared": str(path)}))
    return 0


def _add_train(sub) -> None:
    p = sub.add_parser(
        "train",
        help="train a model of any family (RBM, DBM, DBN, continuous models)",
        description="Train a model with logzbench.training.train_model and save it (.npz). "
        "RBM: --n-hidden; DBM / DBN: --family and --hidden-sizes, or a --preset "
        "(logzbench.training.MODEL_PRESETS); continuous families: --family and "
        "--set size=N on prepared patches.",
    )
    p.add_argument("--data", required=True, help="prepared dataset .npz (uses its train and test splits)")
    p.add_argument("--out", required=True, help="output model .npz")
    p.add_argument(
        "--preset",
        help="named hyperparameters (e.g. mnistCD25-500, us-rbm20, mnist-dbm-500-1000; "
        "the families' trainers only, not with --learner)",
    )
    p.add_argument("--family", choices=registry.family_names(), help="model family (default: the preset's, else rbm)")
    p.add_argument("--hidden-sizes", help="DBM / DBN hidden layer sizes, comma-separated, e.g. 500,1000")
    p.add_argument("--n-hidden", type=int, help="RBM hidden units")
    p.add_argument("--method", choices=["cd", "pcd"], help="RBM, DBN first layer: CD or PCD (not with --learner)")
    p.add_argument("--k", type=int, help="Gibbs steps per update (not with --learner; vcd: --set cd_k=N)")
    p.add_argument("--learning-rate", type=float, help="learning rate (with --learner: its Adam step size lr)")
    p.add_argument(
        "--batch-size",
        type=int,
        help="rows per minibatch (with --learner: at most the training rows are used per minibatch, and "
        "the decoder draws that many samples per update, at most 100000)",
    )
    p.add_argument(
        "--epochs",
        dest="n_epochs",
        type=int,
        help="epochs (DBM: of joint training; not with --learner: --set iterations=N)",
    )
    p.add_argument("--weight-decay", type=float, help="weight decay (not with --learner)")
    p.add_argument("--seed", type=int)
    p.add_argument("--device")
    p.add_argument(
        "--learner",
        choices=sorted(registry.LEARNERS),
        help="train by a black-box variational learner (documentation: Black-box learners; e.g. "
        "--learner avil --set aux_size=15 --set iterations=10000); it monitors the data's valid split "
        "when present. "
        "Its hyperparameters are checked before any data is read "
        "(logzbench.training.learner_options); the families' trainer flags --preset, --method, --k, "
        "--epochs, --weight-decay are refused",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other trainer hyperparameter (JSON value), e.g. --set final_momentum=0.9; a learner's "
        "(iterations, K1, lr, ...), but not the workflow's figure_samples / figure_sweeps (the "
        "command line draws no samples for figures)",
    )
    p.add_argument("--history", help="write per-epoch metrics (.csv; a learner's: per logged iteration)")
    p.add_argument("--progress", action="store_true")
    _add_threads(p)


def _parse_hidden_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise ValueError(f"--hidden-sizes expects comma-separated integers such as 500,1000, got {text!r}") from None
    if not sizes:
        raise ValueError(f"--hidden-sizes expects comma-separated integers such as 500,1000, got {text!r}")
    return sizes


def _check_size(spec: registry.FamilySpec, params: dict) -> None:
    """Refuse, before loading anything, training hyperparameters without the family's size."""
    if spec.size_key in params or (spec.name == "rbm" and "hidden_sizes" in params):
        return
    if spec.size_key == "n_hidden":
        raise ValueError("give --n-hidden or a --preset")
    if spec.size_key == "hidden_sizes":
        raise ValueError(f"a {spec.name.upper()} needs --hidden-sizes (e.g. 500,1000) or a --preset")
    raise ValueError(f"a {spec.name} model needs --set {spec.size_key}=N (experts, units or latent variables)")


def _training_rows(path: str, data_kind: str, family: str | None = None):
    """(train rows, test rows or None) of a prepared dataset of the family's data kind."""
    from .data import load_rows, load_split_if_present

    train = load_rows(path, data_kind, "train", prepared=True, family=family)
    return train, load_split_if_present(path, data_kind, "test")  # a damaged test split still raises


#: ``logzbench train`` flags of the families' own trainers, which a black-box learner does not take: the flag
#: and what to give instead
_NOT_FOR_LEARNERS = {
    "preset": (
        "--preset",
        "presets hold the families' trainer hyperparameters; give --n-hidden or --hidden-sizes and --set KEY=VALUE",
    ),
    "method": ("--method", "CD / PCD are methods of the families' own trainers"),
    "k": ("--k", "Gibbs steps of the families' trainers (vcd's are --set cd_k=N)"),
    "n_epochs": ("--epochs", "a learner counts model updates: --set iterations=N"),
    "weight_decay": ("--weight-decay", "the learners have no weight decay"),
}


def _check_learner_params(args, params: dict, family: str) -> None:
    """With ``--learner`` (or ``--set learner=...``): refuse the families' trainer flags
    (:data:`_NOT_FOR_LEARNERS`) and the workflow's figure keys, take ``--learning-rate`` as the learner's
    ``lr``, and check the rest -- unknown names (the closest named) and values -- by the learners' rules
    (:func:`logzbench.training.learner_options.check_hyperparams`), all before any data is read."""
    from .training.learner_options import FIGURE_KEYS, check_hyperparams

    learner = registry.learner(params["learner"]).name
    for attr, (flag, instead) in _NOT_FOR_LEARNERS.items():
        if getattr(args, attr) is not None:
            raise ValueError(f"{flag} does not apply to --learner {learner}: {instead}")
    if args.learning_rate is not None:
        params.pop("learning_rate", None)
        if "lr" in params and params["lr"] != args.learning_rate:
            raise ValueError(f"conflicting --learning-rate {args.learning_rate} and --set lr={params['lr']}")
        params["lr"] = args.learning_rate
    for key in FIGURE_KEYS:
        if key in params:
            raise ValueError(
                f"--set {key} does not apply to logzbench train --learner {learner}: it sets the "
                "samples the workflow's training job draws for the report's figures; the command line "
                "draws none"
            )
    check_hyperparams(learner, family, params)


def _cmd_train(args) -> int:
    from .models.io import save_model
    from .training import get_preset, history_to_csv, train_model
    from .training.dispatch import check_family_hyperparams

    _check_outputs([("--out", args.out), ("--history", args.history)], inputs=[("--data", args.data)])
    params: dict = get_preset(args.preset) if args.preset else {}
    if args.family:
        params["family"] = args.family
    if args.hidden_sizes:
        params["hidden_sizes"] = _parse_hidden_sizes(args.hidden_sizes)
    for key in ("n_hidden", "method", "k", "learning_rate", "batch_size", "n_epochs", "weight_decay", "seed", "device"):
        val = getattr(args, key)
        if val is not None:
            params[key] = val
    for item in args.set:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            params[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            params[key.strip()] = raw
    if args.learner:
        params["learner"] = args.learner
    spec = registry.family(params.setdefault("family", "rbm"))
    _check_size(spec, params)
    if params.get("learner") is not None:  # refused before any data is read
        registry.learner(params["learner"], spec.name)
        _check_learner_params(args, params, spec.name)
    elif args.progress:
        params["progress"] = True
    if params.get("learner") is None:  # a name the trainer does not take: refused before any data is read
        check_family_hyperparams(spec.name, params)
    train, test = _training_rows(args.data, spec.data_kind, spec.name)
    if params.get("learner") is not None:
        from .data import load_split_if_present

        params["valid"] = load_split_if_present(args.data, spec.data_kind, "valid")
    model, history = train_model(train, test, **params)
    from .utils import output_transaction

    with output_transaction():  # the model and its history, or neither
        save_model(model, args.out)
        if args.history:
            history_to_csv(history, args.history)
    print(
        json.dumps(
            {
                "model": args.out,
                "family": model.family,
                "threads": args.threads,
                "final": history[-1] if history else {},
            },
            default=float,
        )
    )
    return 0


def _add_report(sub) -> None:
    p = sub.add_parser("report", help="tables and plots from estimate JSON files")
    p.add_argument("results", nargs="+", help="estimate .json files or directories holding them")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--paper",
        action="append",
        default=[],
        metavar="MODEL=PAPER:ROW",
        help="the published row a model stands for (table_papers.csv), e.g. "
        "mnist-rbm20=burda_raise:mnistCD1-20; repeat for more models",
    )


def _cmd_report(args) -> int:
    from .report import build_report
    from .report.papers import check_paper_rows, parse_paper_rows
    from .report.records import find_records

    _check_outputs(dirs=[("--out", args.out)])
    paper_rows = check_paper_rows(parse_paper_rows(args.paper))  # before reading any result
    if not find_records(args.results):  # (malformed or foreign JSON named directly is refused there)
        raise ValueError(
            f"no estimate records in {' '.join(map(str, args.results))}: expected the JSON files "
            "`logzbench estimate --json` or the workflow writes"
        )
    from .utils import output_transaction

    with output_transaction() as tx:  # every file of the report, or none (a new --out removed again)
        tx.watch_dir(args.out)
        out = build_report(args.results, args.out, paper_rows=paper_rows, check_papers=True)
    print(json.dumps({"report": str(args.out), **out}, default=str))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="logzbench", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"logzbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_prepare(sub)
    _add_train(sub)
    _add_estimate(sub)
    _add_sample(sub)
    _add_report(sub)
    return parser


_COMMANDS = {
    "prepare": _cmd_prepare,
    "train": _cmd_train,
    "estimate": _cmd_estimate,
    "sample": _cmd_sample,
    "report": _cmd_report,
}
#: subcommands that run torch work, and take --threads
_THREADED = ("train", "estimate", "sample")


def _run(args) -> int:
    """Run the subcommand; one that computes runs with the thread count of ``--threads`` (see
    ``logzbench.utils.choose_threads``), which replaces ``args.threads`` and is logged once."""
    if args.command not in _THREADED:
        return _COMMANDS[args.command](args)
    from .utils import using_threads

    if args.threads is not None:
        source = "--threads"
    elif os.environ.get(_THREADS_ENV, "").strip():
        source = _THREADS_ENV
        value = os.environ[_THREADS_ENV].strip()
        if value.lstrip("+").isdigit() and int(value) > MAX_THREADS:  # (not an integer: refused by choose_threads)
            raise ValueError(f"{_THREADS_ENV} must be at most {MAX_THREADS} (torch threads), got {value}")
    else:
        source = "automatic"
    with using_threads(args.threads) as n:
        _log.info("logzbench %s: %d torch thread%s (%s)", args.command, n, "" if n == 1 else "s", source)
        args.threads = n
        return _COMMANDS[args.command](args)


#: subcommands that may run a user's code (FILE.py:NAME): its stdout goes to stderr (:func:`_stdout_to_stderr`)
_USER_CODE = ("estimate", "sample")
#: the buffer a subcommand prints its result to while :func:`_stdout_to_stderr` holds stdout
_RESULT: io.StringIO | None = None


def _stdout():
    """The stream a subcommand prints its result to: ``sys.stdout``, or while :func:`_stdout_to_stderr`
    holds it, a buffer written to the real stdout when the command has succeeded."""
    return sys.stdout if _RESULT is None else _RESULT


def _flush_all(*streams) -> None:
    """Flush Python ``streams`` and C stdio's buffers (a C extension's ``printf``), ignoring failures."""
    for s in streams:
        with contextlib.suppress(Exception):
            s.flush()
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def _stdout_to_stderr(active: bool = True):
    """While the block runs, everything written to stdout goes to stderr: ``print`` (``sys.stdout`` is
    ``sys.stderr``) and file descriptor 1 itself (``os.write(1, ...)``, C code; fd 1 is a duplicate of fd
    2), so that a user's FILE.py:NAME -- at import, in ``NAME()``, in ``log_f`` -- cannot put text before
    the command's JSON on stdout.  What the command prints to :func:`_stdout` is written to the real
    stdout after the block, only when it ends without an exception."""
    global _RESULT
    if not active or _RESULT is not None:
        yield
        return
    out, buf = sys.stdout, io.StringIO()
    _flush_all(out, sys.stderr)
    saved = None
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # fd 1 or 2 closed: the Python-level redirect only
        if saved is not None:
            os.close(saved)
            saved = None
    sys.stdout, _RESULT = sys.stderr, buf
    try:
        yield
    finally:
        _flush_all(sys.stdout, out, sys.__stdout__, sys.stderr)  # the user's buffered text still goes to stderr
        sys.stdout, _RESULT = out, None
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)
    if out is not None:
        out.write(buf.getvalue())
        out.flush()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with _stdout_to_stderr(args.command in _USER_CODE):
            return _run(args)
    except KeyboardInterrupt:  # Ctrl-C: one line (outputs are written in transactions: none half-written)
        print(f"logzbench {args.command}: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:  # sys.exit() in a user's code that no narrower check named
        print(f"logzbench {args.command}: error: user code raised SystemExit({exc.code!r})", file=sys.stderr)
        return 2
    except (LogzbenchError, ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"logzbench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a write outside logzbench.utils.atomic_path on a full or read-only disk
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS):
            raise
        where = f" {exc.filename}" if exc.filename else " an output"
        print(f"logzbench {args.command}: error: cannot write{where}: {exc.strerror or exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
