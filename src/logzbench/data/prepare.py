"""Preparing a data set into one ``.npz``: :func:`prepare_dataset` (binary sources, binarized) and
:func:`prepare_patches` (continuous sources); the file format is described in :mod:`logzbench.data`.

Each source's loader (:mod:`~logzbench.data.mnist`, ``omniglot``, ``digits``, ``uci``, ``frey``,
``vanhateren``) is imported when its data set is prepared.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from .. import __version__
from ..errors import DatasetError
from ..utils import save_npz_atomic
from .binarize import METHODS as BINARIZE_METHODS
from .binarize import binarize as _binarize
from .binarize import check_threshold
from .sizes import CONTINUOUS_DATASETS, DATASETS
from .uci import UCI_SETS

__all__ = ["FORMAT_VERSION", "prepare_dataset", "prepare_patches"]

FORMAT_VERSION = 1
#: Stream index per split: split ``s`` is binarized with ``default_rng([seed, _STREAM[s]])``.
_STREAM = {"train": 0, "test": 1, "valid": 2}


def prepare_dataset(
    name: str,
    output: str | os.PathLike,
    *,
    mirror: str | os.PathLike | None = None,
    binarize: str = "stochastic",
    threshold: float = 0.5,
    seed: int = 0,
    n_train: int | None = None,
    n_test: int | None = None,
    n_valid: int = 0,
    cache_dir: str | os.PathLike | None = None,
    shift_augment: str | None = None,
    n_visible: int | None = None,
    prototypes: int | None = None,
    weights=None,
    flip=None,
) -> Path:
    """Load a data set, binarize it and write one ``.npz`` atomically.

    Parameters
    ----------
    name : str
        Data set (:data:`DATASETS`).  MNIST comes from :func:`~logzbench.data.mnist.load_mnist`
        (mirror, cache or download, checksum-verified); digits from scikit-learn (stratified
        80/20 split with seed 0, see :mod:`logzbench.data.digits`); Omniglot from
        :func:`~logzbench.data.omniglot.load_omniglot` (mirror, cache or download,
        checksum-verified; 105x105 drawings area-averaged to 28x28 grey levels, fixed
        random 24,345/8,070 split of the 32,460 images with split seed 0, labels = global
        character index 0..1622; see :mod:`logzbench.data.omniglot`).  ``digits-avil``: the
        digits as in the AVIL paper (1,438 / 359 split, five-fold shift augmentation, ``test`` =
        a copy of ``valid``; :func:`~logzbench.data.digits.load_digits_avil`).  The UCI sets
        (``adult``, ``connect4``, ``dna``, ``mushrooms``, ``nips-0-12``, ``ocr_letters``, ``rcv1``,
        ``web``): already binary, with fixed train / valid / test splits
        (:func:`~logzbench.data.uci.load_uci`); no binarization, labels or image shape.
        ``clustered``: synthetic rows around random prototypes (:mod:`logzbench.data.clustered`; no
        download, already binary): ``n_train`` (default 2000) and ``n_test`` (default 500) rows are
        drawn, plus ``n_valid``; labels are the prototypes' indices.
    output : path-like
        Destination file; written via a temporary file and renamed, so it is either
        complete or absent.
    mirror : path-like, optional
        Offline mirror root (default ``$LOGZBENCH_DATA_MIRROR``); unused for digits.
        MNIST is read from ``<mirror>/mnist/``, Omniglot from ``<mirror>/omniglot/``, the UCI
        sets from ``<mirror>/uci_binary/<folder>/``.
    binarize : {"stochastic", "threshold"}
        See :func:`logzbench.data.binarize.binarize`; unused for the (binary) UCI sets.
    threshold : float, default 0.5
        Cut-off for ``binarize="threshold"``, in [0, 1) (the grey levels are scaled to [0, 1]).
    seed : int, default 0
        Binarization seed.  Each split uses its own stream ``default_rng([seed, k])``
        (train k=0, test k=1, valid k=2), so a row's bits do not depend on ``n_train``,
        ``n_test`` or the other splits.
    n_train, n_test : int, optional
        Keep only the first ``n`` rows (after removing the validation rows).  ``digits-avil``
        takes no ``n_test`` (its ``test`` is its validation split).
    n_valid : int, default 0
        Move the last ``n_valid`` rows of the full training set into ``valid``.  Must be 0 for
        sources with a fixed validation split (UCI sets, ``digits-avil``).
    cache_dir : path-like, optional
        Download cache root (default ``$LOGZBENCH_DATA_CACHE`` or ``~/.cache/logzbench``).
    shift_augment : {"train", "all", "none"}, optional
        ``digits-avil`` only (default ``"train"``): which images get the five-fold shift
        augmentation (see :func:`~logzbench.data.digits.load_digits_avil`).
    n_visible, prototypes, weights, flip : optional
        ``clustered`` only: the row width (required), the number of prototypes, their masses and their
        bit-flip rates (:func:`~logzbench.data.clustered.make_clustered`); ``seed`` seeds the draw.

    Returns
    -------
    Path
        ``output``.

    Raises
    ------
    DatasetError
        For an unknown data set or method, impossible sizes, or missing/corrupt sources.
    """
    clustered = {"n_visible": n_visible, "prototypes": prototypes, "weights": weights, "flip": flip}
    _check_options(name, binarize, threshold, shift_augment, clustered)
    if name == "clustered":
        try:
            from .clustered import make_clustered

            raw = _clustered_raw(
                make_clustered(**clustered, n_train=n_train, n_test=n_test, n_valid=n_valid, seed=seed)
            )
        except ValueError as exc:
            raise DatasetError(str(exc)) from None
        raw["meta"]["clustered"]["seed"] = int(seed)
    if name == "digits-avil" and n_test is not None:
        raise DatasetError(
            "digits-avil has no n_test: its test split is the 359-image validation split "
            "(the paper reports the best validation result)"
        )
    if name != "clustered":
        raw = _load_raw(name, mirror, cache_dir, shift_augment)
    parts = raw["parts"]
    n_valid = _split(name, parts, raw["fixed_valid"], n_valid, n_train, n_test)
    arrays = _arrays(parts, raw, binarize, threshold, seed)
    meta = _meta(name, parts, arrays, raw, binarize, threshold, seed)
    image_shape = raw["image_shape"]
    extra = {} if image_shape is None else {"image_shape": np.asarray(image_shape, dtype=np.int64)}
    output = Path(output)
    save_npz_atomic(output, **arrays, **extra, meta=np.asarray(json.dumps(meta)))
    return output


def _check_options(name: str, binarize: str, threshold: float, shift_augment, clustered: dict) -> None:
    """Refuse an unknown data set or binarization, a bad threshold, and options of another data set."""
    if name in CONTINUOUS_DATASETS:
        raise DatasetError(f"{name} is a continuous data set: use logzbench.data.prepare_patches")
    if name not in DATASETS:
        raise DatasetError(f"unknown dataset {name!r}; choose from {DATASETS + CONTINUOUS_DATASETS}")
    if binarize not in BINARIZE_METHODS:
        raise DatasetError(f"unknown binarization {binarize!r}; choose from {BINARIZE_METHODS}")
    if shift_augment is not None and name != "digits-avil":
        raise DatasetError(f"shift_augment applies to digits-avil only, not to {name}")
    if binarize == "threshold" and name not in UCI_SETS:  # (the UCI sets are binary already)
        try:
            check_threshold(threshold)
        except ValueError as exc:
            raise DatasetError(f"{name}: {exc}") from None
    given = [k for k, v in clustered.items() if v is not None]
    if given and name != "clustered":
        raise DatasetError(
            f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to clustered only, not to {name}"
        )


def _split(name: str, parts: dict, fixed_valid: bool, n_valid, n_train, n_test) -> int:
    """Move the last ``n_valid`` training rows to ``valid`` (unless the source fixes its validation split)
    and keep the first ``n_train`` / ``n_test`` rows, in ``parts``; returns ``n_valid``."""
    if fixed_valid:
        if int(n_valid):
            raise DatasetError(
                f"{name} has a fixed validation split ({len(parts['valid'][0])} rows); n_valid must be 0, got {n_valid}"
            )
        n_valid = 0
    else:
        x, y = parts["train"]
        n_full = len(x)
        if not 0 <= int(n_valid) < n_full:
            raise DatasetError(f"n_valid={n_valid} must be in [0, {n_full}) for {name}")
        n_valid = int(n_valid)
        parts["train"] = (x[: n_full - n_valid], y[: n_full - n_valid])
        if n_valid:
            parts["valid"] = (x[n_full - n_valid :], y[n_full - n_valid :])
    for split, limit in (("train", n_train), ("test", n_test)):
        xs, ys = parts[split]
        if limit is not None:
            if not 1 <= int(limit) <= len(xs):
                raise DatasetError(f"n_{split}={limit} must be in [1, {len(xs)}] for {name} (n_valid={n_valid})")
            parts[split] = (xs[: int(limit)], None if ys is None else ys[: int(limit)])
    return n_valid


def _arrays(parts: dict, raw: dict, binarize: str, threshold: float, seed: int) -> dict:
    """Each split's rows, binarized from its own stream (a binary source's as they are), and labels; the
    source's copied splits (digits-avil: test is valid)."""
    scale = raw["scale"]
    arrays = {}
    for split, (xs, ys) in parts.items():
        if xs is None:  # digits-avil: test is a copy of valid
            continue
        arrays[split] = (
            xs
            if scale is None
            else _binarize(xs / scale, binarize, seed=[int(seed), _STREAM[split]], threshold=threshold)
        )
        if ys is not None:
            arrays[f"{split}_labels"] = np.asarray(ys, dtype=np.int64)
    for split, same in raw.get("copies", {}).items():
        arrays[split] = arrays[same]
        if f"{same}_labels" in arrays:
            arrays[f"{split}_labels"] = arrays[f"{same}_labels"]
    return arrays


def _meta(name: str, parts: dict, arrays: dict, raw: dict, binarize: str, threshold: float, seed: int) -> dict:
    """The file's ``meta`` record: format, source, binarization and its seeds, sizes and shape."""
    binary = raw["scale"] is None
    image_shape = raw["image_shape"]
    return {
        "format_version": FORMAT_VERSION,
        "dataset": name,
        "binarize": None if binary else binarize,
        "threshold": float(threshold) if binarize == "threshold" and not binary else None,
        "seed": None if binary else int(seed),
        "split_seeds": {} if binary else {s: [int(seed), _STREAM[raw.get("copies", {}).get(s, s)]] for s in parts},
        "sizes": {s: int(len(arrays[s])) for s in parts},
        "n_features": int(arrays["train"].shape[1]),
        "image_shape": None if image_shape is None else list(image_shape),
        "split": raw["note"],
        "sources": raw["sources"],
        "logzbench_version": __version__,
        **raw.get("meta", {}),
    }


#: Continuous sources: module, its settings, its prepare and save functions (names in that module).
_CONTINUOUS = {
    "vanhateren": ("vanhateren", "prepare_vanhateren", "save_prepared_patches"),
    "frey": ("frey", "prepare_frey", "save_prepared_faces"),
}


def prepare_patches(
    name: str,
    output: str | os.PathLike,
    *,
    mirror: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    **settings,
) -> Path:
    """Prepare a continuous data set and write it atomically.

    ``"vanhateren"``: whitened PCA coefficients of log image patches; ``settings`` are those of
    :func:`logzbench.data.vanhateren.prepare_vanhateren`; read back with
    :func:`logzbench.data.vanhateren.load_patches`.  ``"frey"``: standardized Frey faces;
    ``settings`` are those of :func:`logzbench.data.frey.prepare_frey` (``n_test``, ``n_train``,
    ``seed``; ``None`` means the default); read back with :func:`logzbench.data.frey.load_faces`.
    Either is read by :func:`load_rows` with ``data_kind="real"``.
    """
    if name not in CONTINUOUS_DATASETS:
        raise DatasetError(f"unknown continuous dataset {name!r}; choose from {CONTINUOUS_DATASETS}")
    import importlib

    module_name, prepare, save = _CONTINUOUS[name]
    module = importlib.import_module(f".{module_name}", __package__)
    unknown = sorted(set(settings) - set(module.SETTINGS))
    if unknown:
        raise DatasetError(f"{name}: unknown settings {unknown}; known: {list(module.SETTINGS)}")
    prepared = getattr(module, prepare)(mirror=mirror, cache_dir=cache_dir, **settings)
    return getattr(module, save)(output, prepared)


def _clustered_raw(drawn: dict) -> dict:
    """:func:`_load_raw`'s record of the ``clustered`` source's rows (already binary; the prototypes, their
    masses and flip rates in ``meta["clustered"]``)."""
    protos = drawn["prototypes"]
    return {
        "parts": {s: (drawn[s], drawn[f"{s}_labels"]) for s in ("train", "test")},
        "scale": None,
        "image_shape": None,
        "sources": {"logzbench.data.clustered": {"version": __version__}},
        "fixed_valid": False,
        "note": (
            "synthetic rows around random prototypes (logzbench.data.clustered); valid = last n_valid training rows"
        ),
        "meta": {
            "clustered": {
                "n_visible": int(protos.shape[1]),
                "prototypes": ["".join(map(str, row)) for row in protos.tolist()],
                "weights": drawn["weights"],
                "flip": drawn["flip"],
            }
        },
    }


def _load_raw(name, mirror, cache_dir, shift_augment=None) -> dict:
    """Splits before binarization and what the file records about them.

    Returns a dict: ``parts`` (split -> (rows, labels or None); rows are grey levels in
    ``[0, scale]``, or 0/1 when ``scale`` is None (already binary)), ``scale``, ``image_shape`` (or
    None), ``sources``, ``note`` (the split), ``fixed_valid`` (the source has its own validation
    split), optionally ``copies`` (split -> the split it copies) and ``meta`` (extra meta entries).
    """
    out = {"scale": 1.0, "fixed_valid": False}
    if name == "mnist":
        from .mnist import IMAGE_SHAPE, load_mnist, mnist_sources

        raw = load_mnist(mirror=mirror, cache_dir=cache_dir)
        out.update(
            scale=255.0,
            image_shape=IMAGE_SHAPE,
            sources=mnist_sources(),
            note="official 60000/10000; valid = last n_valid training rows",
        )
    elif name == "omniglot":
        from . import omniglot as om

        raw = om.load_omniglot(mirror=mirror, cache_dir=cache_dir)
        out.update(
            image_shape=om.IMAGE_SHAPE,
            sources=om.omniglot_sources(),
            note=(
                f"pooled {om.N_IMAGES} images (1623 characters x 20 drawers, background then evaluation); "
                f"numpy.random.default_rng({om.DEFAULT_SPLIT_SEED}).permutation: first {om.DEFAULT_N_TRAIN} "
                f"train, next {om.DEFAULT_N_TEST} test, last {om.N_IMAGES - om.DEFAULT_N_TRAIN - om.DEFAULT_N_TEST} "
                "unused; 105x105 -> 28x28 exact area average; labels = global character index "
                "(background 0..963, evaluation 964..1622); valid = last n_valid training rows"
            ),
        )
    elif name in UCI_SETS:
        from .uci import load_uci

        data = load_uci(name, mirror=mirror, cache_dir=cache_dir)
        sizes = "/".join(str(len(data[s])) for s in ("train", "valid", "test"))
        return {
            "parts": {s: (data[s], None) for s in ("train", "test", "valid")},
            "scale": None,
            "image_shape": None,
            "sources": data["sources"],
            "fixed_valid": True,
            "note": (
                f"fixed train/valid/test {sizes} of Larochelle & Murray (2011) = AVIL Table 1; "
                "already binary (binarize, threshold and seed unused)"
            ),
        }
    else:
        import sklearn

        from . import digits as dg

        out.update(
            image_shape=dg.IMAGE_SHAPE, sources={"sklearn.datasets.load_digits": {"version": sklearn.__version__}}
        )
        if name == "digits-avil":
            mode = shift_augment or "train"
            raw = dg.load_digits_avil(mode)
            shifts = [f"{n} ({dr:+d} row, {dc:+d} column)" for n, dr, dc in dg.SHIFTS]
            out.update(
                fixed_valid=True,
                copies={"test": "valid"},
                meta={"shift_augment": mode, "shifts": shifts},
                note=dg.AVIL_SPLIT_NOTES[mode],
                parts={
                    "train": (raw["train_images"], raw["train_labels"]),
                    "test": (None, None),
                    "valid": (raw["valid_images"], raw["valid_labels"]),
                },
            )
            return out
        raw = dg.load_digits_dataset()
        out["note"] = (
            f"sklearn train_test_split(test_size={dg.DEFAULT_TEST_FRACTION}, stratify=labels, "
            f"random_state={dg.DEFAULT_SPLIT_SEED}); valid = last n_valid training rows"
        )
    out["parts"] = {s: (raw[f"{s}_images"], raw[f"{s}_labels"]) for s in ("train", "test")}
    return out
