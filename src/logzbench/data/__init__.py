"""Data sets: preparation into one ``.npz`` and validated loading.

Prepared file format of the binary sets (written by :func:`prepare_dataset`, ``np.savez_compressed``,
no pickles):

=================  ==========================================================================
``train``          ``uint8`` (N_train, D), values 0/1
``test``           ``uint8`` (N_test, D), values 0/1
``valid``          ``uint8`` (N_valid, D), when ``n_valid > 0`` or the source has a fixed
                   validation split (UCI sets, ``digits-avil``)
``train_labels``   ``int64`` (N_train,) (and ``test_labels``, ``valid_labels`` likewise); only
                   for sources with labels (not the UCI sets)
``image_shape``    ``int64`` (2,), e.g. ``[28, 28]``; ``D == prod(image_shape)``; only for image
                   sources (not the UCI sets; their ``meta["image_shape"]`` is null)
``meta``           0-d unicode string holding JSON (see :func:`load_meta`)
=================  ==========================================================================

Continuous sets (:func:`prepare_patches`) have their own formats: ``vanhateren``
(:mod:`logzbench.data.vanhateren`) and ``frey`` (:mod:`logzbench.data.frey`); both hold ``float64``
``train`` / ``test`` rows and a ``meta`` naming the data set, and :func:`load_rows` reads either.
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
from .rows import _member, _open_npz, check_binary_rows
from .subset import class_subset, load_labels
from .uci import UCI_DATASETS, UCI_SETS

DATASETS = ("mnist", "digits", "omniglot", "digits-avil", *UCI_DATASETS)
#: Continuous data sets (real-valued rows; :func:`prepare_patches`).
CONTINUOUS_DATASETS = ("vanhateren", "frey")
#: Row width of the sources whose width does not depend on settings (``vanhateren``: its ``n_components``).
N_FEATURES = {"mnist": 784, "digits": 64, "omniglot": 784, "digits-avil": 64, "frey": 560,
              **{name: spec.n_features for name, spec in UCI_SETS.items()}}
SPLITS = ("train", "valid", "test")
FORMAT_VERSION = 1
#: Stream index per split: split ``s`` is binarized with ``default_rng([seed, _STREAM[s]])``.
_STREAM = {"train": 0, "test": 1, "valid": 2}

__all__ = ["DATASETS", "CONTINUOUS_DATASETS", "N_FEATURES", "check_binary_rows", "class_subset", "prepare_dataset",
           "prepare_patches", "load_labels", "load_prepared", "load_binary_rows", "load_meta", "load_rows",
           "load_split_if_present"]


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

    Returns
    -------
    Path
        ``output``.

    Raises
    ------
    DatasetError
        For an unknown data set or method, impossible sizes, or missing/corrupt sources.
    """
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
    if name == "digits-avil" and n_test is not None:
        raise DatasetError("digits-avil has no n_test: its test split is the 359-image validation split "
                           "(the paper reports the best validation result)")
    raw = _load_raw(name, mirror, cache_dir, shift_augment)
    parts = raw["parts"]

    if raw["fixed_valid"]:
        if int(n_valid):
            raise DatasetError(f"{name} has a fixed validation split ({len(parts['valid'][0])} rows); "
                               f"n_valid must be 0, got {n_valid}")
        n_valid = 0
    else:
        x, y = parts["train"]
        n_full = len(x)
        if not 0 <= int(n_valid) < n_full:
            raise DatasetError(f"n_valid={n_valid} must be in [0, {n_full}) for {name}")
        n_valid = int(n_valid)
        parts["train"] = (x[: n_full - n_valid], y[: n_full - n_valid])
        if n_valid:
            parts["valid"] = (x[n_full - n_valid:], y[n_full - n_valid:])
    for split, limit in (("train", n_train), ("test", n_test)):
        xs, ys = parts[split]
        if limit is not None:
            if not 1 <= int(limit) <= len(xs):
                raise DatasetError(f"n_{split}={limit} must be in [1, {len(xs)}] for {name} (n_valid={n_valid})")
            parts[split] = (xs[: int(limit)], None if ys is None else ys[: int(limit)])

    scale, image_shape = raw["scale"], raw["image_shape"]
    arrays = {}
    for split, (xs, ys) in parts.items():
        if xs is None:  # digits-avil: test is a copy of valid
            continue
        arrays[split] = xs if scale is None else _binarize(xs / scale, binarize, seed=[int(seed), _STREAM[split]],
                                                          threshold=threshold)
        if ys is not None:
            arrays[f"{split}_labels"] = np.asarray(ys, dtype=np.int64)
    for split, same in raw.get("copies", {}).items():
        arrays[split] = arrays[same]
        if f"{same}_labels" in arrays:
            arrays[f"{split}_labels"] = arrays[f"{same}_labels"]
    binary = scale is None
    meta = {
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
    extra = {} if image_shape is None else {"image_shape": np.asarray(image_shape, dtype=np.int64)}
    output = Path(output)
    save_npz_atomic(output, **arrays, **extra, meta=np.asarray(json.dumps(meta)))
    return output


#: Continuous sources: module, its settings, its prepare and save functions (names in that module).
_CONTINUOUS = {"vanhateren": ("vanhateren", "prepare_vanhateren", "save_prepared_patches"),
               "frey": ("frey", "prepare_frey", "save_prepared_faces")}


def prepare_patches(name: str, output: str | os.PathLike, *, mirror: str | os.PathLike | None = None,
                    cache_dir: str | os.PathLike | None = None, **settings) -> Path:
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
    module = importlib.import_module(f"{__name__}.{module_name}")
    unknown = sorted(set(settings) - set(module.SETTINGS))
    if unknown:
        raise DatasetError(f"{name}: unknown settings {unknown}; known: {list(module.SETTINGS)}")
    prepared = getattr(module, prepare)(mirror=mirror, cache_dir=cache_dir, **settings)
    return getattr(module, save)(output, prepared)


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
        out.update(scale=255.0, image_shape=IMAGE_SHAPE, sources=mnist_sources(),
                   note="official 60000/10000; valid = last n_valid training rows")
    elif name == "omniglot":
        from . import omniglot as om

        raw = om.load_omniglot(mirror=mirror, cache_dir=cache_dir)
        out.update(image_shape=om.IMAGE_SHAPE, sources=om.omniglot_sources(), note=(
            f"pooled {om.N_IMAGES} images (1623 characters x 20 drawers, background then evaluation); "
            f"numpy.random.default_rng({om.DEFAULT_SPLIT_SEED}).permutation: first {om.DEFAULT_N_TRAIN} "
            f"train, next {om.DEFAULT_N_TEST} test, last {om.N_IMAGES - om.DEFAULT_N_TRAIN - om.DEFAULT_N_TEST} "
            "unused; 105x105 -> 28x28 exact area average; labels = global character index "
            "(background 0..963, evaluation 964..1622); valid = last n_valid training rows"))
    elif name in UCI_SETS:
        from .uci import load_uci

        data = load_uci(name, mirror=mirror, cache_dir=cache_dir)
        sizes = "/".join(str(len(data[s])) for s in ("train", "valid", "test"))
        return {"parts": {s: (data[s], None) for s in ("train", "test", "valid")}, "scale": None,
                "image_shape": None, "sources": data["sources"], "fixed_valid": True,
                "note": (f"fixed train/valid/test {sizes} of Larochelle & Murray (2011) = AVIL Table 1; "
                         "already binary (binarize, threshold and seed unused)")}
    else:
        import sklearn

        from . import digits as dg

        out.update(image_shape=dg.IMAGE_SHAPE,
                   sources={"sklearn.datasets.load_digits": {"version": sklearn.__version__}})
        if name == "digits-avil":
            mode = shift_augment or "train"
            raw = dg.load_digits_avil(mode)
            shifts = [f"{n} ({dr:+d} row, {dc:+d} column)" for n, dr, dc in dg.SHIFTS]
            out.update(fixed_valid=True, copies={"test": "valid"}, meta={"shift_augment": mode, "shifts": shifts},
                       note=dg.AVIL_SPLIT_NOTES[mode], parts={
                           "train": (raw["train_images"], raw["train_labels"]), "test": (None, None),
                           "valid": (raw["valid_images"], raw["valid_labels"])})
            return out
        raw = dg.load_digits_dataset()
        out["note"] = (f"sklearn train_test_split(test_size={dg.DEFAULT_TEST_FRACTION}, stratify=labels, "
                       f"random_state={dg.DEFAULT_SPLIT_SEED}); valid = last n_valid training rows")
    out["parts"] = {s: (raw[f"{s}_images"], raw[f"{s}_labels"]) for s in ("train", "test")}
    return out


def load_prepared(path: str | os.PathLike, split: str = "test") -> np.ndarray:
    """Load one split of a file written by :func:`prepare_dataset`.

    Parameters
    ----------
    path : path-like
        Prepared ``.npz``.
    split : {"train", "valid", "test"}
        Which rows.

    Returns
    -------
    numpy.ndarray
        ``uint8`` (N, D) array of 0/1.

    Raises
    ------
    DatasetError
        If the file is missing, unreadable, lacks ``split``, or holds non-binary values.
    """
    path = Path(path)
    with _open_npz(path) as npz:
        if not isinstance(npz, np.lib.npyio.NpzFile) or "meta" not in npz.files:
            raise DatasetError(f"{path} is not a prepared dataset (.npz with 'meta'); create it with prepare_dataset")
        if split not in npz.files:
            have = [s for s in SPLITS if s in npz.files]
            raise DatasetError(f"{path} has no split {split!r} (it has {have})")
        return _check_binary(_member(npz, split, path), f"{path} [{split}]")


def load_binary_rows(path: str | os.PathLike, split: str = "test", n_features: int | None = None) -> np.ndarray:
    """Load binary data rows for the command line ``--data`` option.

    Parameters
    ----------
    path : path-like
        A prepared ``.npz`` (``split`` is taken), a ``.npz`` holding exactly one array,
        or a ``.npy`` array.
    split : str, default "test"
        Array to take from a ``.npz`` holding several.
    n_features : int, optional
        Required number of columns (e.g. the model's visible units).

    Returns
    -------
    numpy.ndarray
        ``uint8`` (N, D) array of 0/1.

    Raises
    ------
    DatasetError
        If the file is missing or unreadable, or the data are not a non-empty 2-D array
        of 0/1 (NaN, other values, wrong number of dimensions or columns); the message
        names the file.
    """
    path = Path(path)
    with _open_npz(path) as obj:
        if not isinstance(obj, np.lib.npyio.NpzFile):
            return _check_binary(obj, str(path), n_features)
        key = split if split in obj.files else obj.files[0] if len(obj.files) == 1 else None
        if key is not None:
            return _check_binary(_member(obj, key, path), f"{path} [{key}]", n_features)
        raise DatasetError(f"{path} holds arrays {obj.files} but no {split!r}; give a prepared dataset or a single array")


def load_rows(path: str | os.PathLike, data_kind: str, split: str = "test", *, prepared: bool = False,
              family: str | None = None) -> np.ndarray:
    """Data rows of either kind a model family takes (``registry.family(name).data_kind``).

    Parameters
    ----------
    path : path-like
        A data file.
    data_kind : {"binary", "real"}
        ``binary`` 0/1 rows, ``real`` rows (whitened image patches, standardized Frey faces).
    split : str
        The split to take from a prepared dataset.
    prepared : bool
        Only a prepared dataset is accepted, and it must hold ``split`` (:func:`load_prepared`,
        :func:`logzbench.data.vanhateren.load_patches`, :func:`logzbench.data.frey.load_faces`: what
        training reads).  Otherwise binary rows come from :func:`load_binary_rows` (also a ``.npy``
        or a single-array ``.npz``) and real rows from a prepared file as above or a ``.npy``
        (:func:`logzbench.data.vanhateren.load_real_rows`).
    family : str, optional
        The model family the rows are for, named in the error when a prepared binary dataset is
        given for real rows (e.g. a GRBM given ``digits.npz``).

    Returns
    -------
    numpy.ndarray, shape (n, n_features)
    """
    if data_kind == "real":
        from .vanhateren import load_patches, load_real_rows

        if not prepared and str(path).endswith(".npy"):
            return load_real_rows(path, split)
        if _is_frey(Path(path)):
            from .frey import load_faces

            return load_faces(path, split)
        try:
            return load_patches(path, split)
        except DatasetError:  # say what the file is where it is binary data (read only on this path)
            binary = _binary_dataset(Path(path), split)
            if binary is None:
                raise
        who = f"a {family} model" if family else "a model of real-valued rows"
        raise DatasetError(f"{path} holds binary 0/1 rows (the prepared dataset {binary}), not real-valued rows; "
                           f"{who} needs real-valued rows: prepared van Hateren patches or Frey faces (logzbench "
                           "prepare vanhateren | frey), or a .npy of real rows")
    if data_kind != "binary":
        raise ValueError(f"unknown data kind {data_kind!r}; expected 'binary' or 'real'")
    return (load_prepared if prepared else load_binary_rows)(path, split)


def load_split_if_present(path: str | os.PathLike, data_kind: str, split: str) -> np.ndarray | None:
    """:func:`load_rows` of a prepared dataset's ``split`` (e.g. ``valid``), or ``None`` when the file
    has no such array (a corrupt file or bad rows still raise)."""
    with _open_npz(Path(path)) as npz:
        present = isinstance(npz, np.lib.npyio.NpzFile) and split in npz.files
    return load_rows(path, data_kind, split, prepared=True) if present else None


def load_meta(path: str | os.PathLike) -> dict:
    """Return the ``meta`` dictionary of a prepared dataset (see :func:`prepare_dataset`)."""
    path = Path(path)
    with _open_npz(path) as npz:
        if not isinstance(npz, np.lib.npyio.NpzFile) or "meta" not in npz.files:
            raise DatasetError(f"{path} is not a prepared dataset (.npz with 'meta')")
        return json.loads(str(_member(npz, "meta", path)))


def _binary_dataset(path: Path, split: str) -> str | None:
    """What a prepared binary dataset ``path`` is (its ``meta`` dataset name, quoted), else ``None``: a
    ``meta`` naming a binary source, or one naming no continuous set over integer 0/1 rows.  A file that
    cannot be read is ``None`` here (its reader names the problem)."""
    try:
        with _open_npz(path) as npz:
            if not isinstance(npz, np.lib.npyio.NpzFile) or "meta" not in npz.files:
                return None
            meta = json.loads(str(npz["meta"]))
            name = meta.get("dataset") if isinstance(meta, dict) else None
            if name in CONTINUOUS_DATASETS:
                return None
            if name in DATASETS:
                return repr(name)
            key = split if split in npz.files else "train" if "train" in npz.files else None
            if key is not None and npz[key].dtype.kind in "biu":
                rows = npz[key]
                if rows.size and ((rows == 0) | (rows == 1)).all():
                    return repr(name) if name is not None else "without a name"
    except Exception:  # noqa: BLE001 - damaged or foreign: load_patches reports it
        return None
    return None


def _is_frey(path: Path) -> bool:
    """Whether ``path`` is a prepared Frey faces file (else real rows are read as van Hateren patches,
    whose reader reports what is wrong with the file)."""
    try:
        with _open_npz(path) as obj:
            from .frey import is_frey_file

            return is_frey_file(obj)
    except DatasetError:
        return False


def _check_binary(arr: np.ndarray, where: str, n_features: int | None = None) -> np.ndarray:
    """A prepared dataset file's rows (:func:`check_binary_rows` raising :class:`DatasetError`)."""
    return check_binary_rows(arr, f"data {where}", n_features, error=DatasetError)
