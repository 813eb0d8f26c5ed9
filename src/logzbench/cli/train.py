"""``logzbench train``: a model of any family trained and saved."""

from __future__ import annotations

import json

from .. import registry
from .outputs import check_outputs
from .threads import add_threads

HELP = "train a model of any family (RBM, DBM, DBN, continuous models)"
DESCRIPTION = (
    "Train a model with logzbench.training.train_model and save it (.npz). "
    "RBM: --n-hidden; DBM / DBN: --family and --hidden-sizes, or a --preset "
    "(logzbench.training.MODEL_PRESETS); continuous families: --family and "
    "--set size=N on prepared patches."
)


def add(p) -> None:
    """The flags of ``logzbench train`` on its parser ``p``."""
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
    add_threads(p)


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
    from ..data import load_rows, load_split_if_present

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
    from ..training.learner_options import FIGURE_KEYS, check_hyperparams

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


def run(args) -> int:
    from ..models.io import save_model
    from ..training import get_preset, history_to_csv, train_model
    from ..training.dispatch import check_family_hyperparams

    check_outputs([("--out", args.out), ("--history", args.history)], inputs=[("--data", args.data)])
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
        from ..data import load_split_if_present

        params["valid"] = load_split_if_present(args.data, spec.data_kind, "valid")
    model, history = train_model(train, test, **params)
    from ..utils import output_transaction

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
