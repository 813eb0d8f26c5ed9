"""``logzbench prepare``: a dataset downloaded, verified and binarised (or cut into patches)."""

from __future__ import annotations

import json

from .outputs import check_outputs

HELP = "download/verify and binarise a dataset (or cut whitened image patches)"


def add(p) -> None:
    """The flags of ``logzbench prepare`` on its parser ``p``."""
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
    from ..data import CONTINUOUS_DATASETS, DATASETS

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


def run(args) -> int:
    from ..data import CONTINUOUS_DATASETS, prepare_dataset, prepare_patches
    from ..data.download import check_mirror

    check_outputs([("--out", args.out)])
    _prepare_settings(args)  # an option the dataset does not take is refused, not ignored
    check_mirror(args.mirror)  # a mistyped mirror would fall back to downloading
    sizes = {k: v for k, v in (("n_train", args.n_train), ("n_test", args.n_test)) if v is not None}
    if args.name == "frey":  # standardized faces: only the split sizes apply
        path = prepare_patches(args.name, args.out, mirror=args.mirror, seed=args.seed, **sizes)
    elif args.name in CONTINUOUS_DATASETS:
        patches = {k: getattr(args, k) for k in ("n_images", "n_test_images", "patch_size", "n_components")}
        path = prepare_patches(
            args.name, args.out, mirror=args.mirror, remove_dc=args.remove_dc, seed=args.seed, **patches, **sizes
        )
    else:
        keys = ("binarize", "threshold", "seed", "n_train", "n_test", "n_valid", "n_visible", "prototypes", "weights")
        flip = args.flip[0] if args.flip is not None and len(args.flip) == 1 else args.flip
        given = {k: getattr(args, k) for k in keys}
        path = prepare_dataset(args.name, args.out, mirror=args.mirror, flip=flip, **given)
    print(json.dumps({"prepared": str(path)}))
    return 0
