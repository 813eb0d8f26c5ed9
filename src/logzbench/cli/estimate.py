"""``logzbench estimate``: one estimator on one model file, one JSON object."""

from __future__ import annotations

import json
import os

from .. import options, registry
from .outputs import check_outputs, model_path, pin_paths, result_stream
from .threads import add_threads

HELP = "estimate log Z / test log-likelihood of a model file"
DESCRIPTION = (
    "Estimate log Z and, with --data, the mean test log-likelihood of a model "
    "(an .npz, a Potts text file, FILE.py:NAME or a TorchScript .pt; see the documentation, Models and "
    "file formats). Prints one JSON object. FILE.py:NAME imports FILE.py -- running its code, as any "
    "Python import does: give only files you trust -- and calls NAME()."
)


def add(p) -> None:
    """The flags of ``logzbench estimate`` on its parser ``p``."""
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
    add_threads(p)


def _estimate_options(args) -> dict:
    """The API options of ``logzbench estimate``: the flags given; the rest take their defaults there (K's:
    :func:`logzbench.schedules.default_K`, the API's too)."""
    names = options.option_names()
    return {k: v for k, v in vars(args).items() if k in names}


def run(args) -> int:
    model_file = model_path(args.model)  # FILE.py of FILE.py:NAME: checked before anything is loaded
    from ..api import estimate
    from ..data import load_rows
    from ..models.io import load_model
    from ..utils import file_sha256, output_transaction, save_npz_atomic, write_json_atomic

    schedule = getattr(args, "schedule", None)
    schedule_file = schedule if schedule and os.path.isfile(schedule) else None
    check_outputs(
        [("--json", args.json_out), ("--log-weights", args.log_weights)],
        inputs=[
            ("model", model_file),
            ("--data", args.data),
            ("--train-data", args.train_data),
            ("--schedule", schedule_file),
        ],
    )
    data_given = args.data  # recorded as given
    pin_paths(args, "json_out", "log_weights", "data", "train_data", *(("schedule",) if schedule_file else ()))
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
    print(json.dumps(out, indent=2), file=result_stream())
    return 0
