"""van Hateren natural image patches: log, mean subtraction, PCA and whitening (Sohl-Dickstein & Culpepper 2012).

Source
    The van Hateren & van der Schaaf (1998) natural image database ("Independent component
    filters of natural images compared with simple cells in primary visual cortex", Proc. R.
    Soc. Lond. B 265:359-366), about 4,200 calibrated monochrome photographs, originally
    distributed by its author and later by the Bethge lab (http://bethgelab.org/datasets/vanhateren/).
    Its ``.iml`` files are 1536 x 1024 pixels, stored row by row from the upper left corner as
    2-byte unsigned big-endian integers without header, linear in luminance (the per-image
    factor converting pixel values to cd/m^2 is not applied; under the logarithm it is a
    per-image additive constant).  Here: the 20 ``.iml`` files in :data:`VANHATEREN_IMAGES`,
    copied unchanged into ``Rieke-Lab/turner-package`` at commit
    ``08eb7a0a138350e5e1dbedc67b1bbd48d76f289d`` (folder
    ``+edu/+washington/+riekelab/+turner/+rescource/VHsubsample_20160105``), each verified
    against its sha256 by :func:`logzbench.data.download.fetch` (mirror, cache or download).

Split (by image, so test patches come from images never used for training)
    ``perm = numpy.random.default_rng([seed, 0]).permutation(n_images)`` over the first
    ``n_images`` names of :data:`VANHATEREN_IMAGES`; images ``perm[:n_test_images]`` are test
    images, the others training images.

Patches
    Each patch picks an image uniformly from its split's images and its top-left corner
    uniformly from the ``(1024 - P + 1) x (1536 - P + 1)`` positions where a ``P x P`` patch
    fits, with the generator ``default_rng([seed, 1])`` for the training patches and
    ``default_rng([seed, 2])`` for the test patches (independent streams: the test patches do
    not depend on ``n_train``), drawn as ``integers(0, [n_split_images, 1025 - P, 1537 - P],
    size=(n, 3))``, one (image, row, column) triple per patch, so the first ``k`` patches are the
    same for any ``n >= k``.  Patches may overlap; a location is recorded as (index in
    :data:`VANHATEREN_IMAGES`, row, column).

Processing (:func:`~logzbench.data.patches.transform_patches`, the same for training and test patches)
    1. ``log`` of the pixel values (positive luminances; a patch containing a zero or a
       non-finite value is refused with a :class:`~logzbench.errors.DatasetError`, no
       epsilon is added).  Patches are flattened row-major to ``P * P`` values.
    2. Mean subtraction: the per-pixel mean of the log training patches (``pca_mean``) is
       subtracted from every patch.  The paper says the patches "were first logged, and then
       mean subtracted.  They were then projected onto the top M PCA components", i.e. the
       centering that defines PCA, with one mean estimated on the training set and applied
       unchanged to the test set ("the test data was preprocessed in an identical fashion").
       Removing each patch's own mean (DC) instead would delete the mean log-luminance
       direction, which is the top principal component of log patches; the paper mentions
       no such deletion, only the projection onto the top M components.  The authors'
       public code (``Sohl-Dickstein/Hamiltonian-Annealed-Importance-Sampling``) holds no
       preprocessing script that could settle it.  ``remove_dc=True`` additionally removes
       each patch's own mean before the PCA (the data then span ``P * P - 1`` dimensions), for
       the other reading.
    3. Projection onto the top ``M`` principal components of the training patches
       (:class:`sklearn.decomposition.PCA`, full SVD with one BLAS thread, deterministic signs).
    4. Whitening: each component is divided by its training standard deviation
       (``whitening_scale = sqrt(explained_variance)``, ``ddof=1``), so every training
       dimension has mean 0 and unit variance and the training covariance is the identity.
       This is how "whitened by rescaling each dimension to unit norm" is read: unit
       variance per dimension (the per-dimension norm divided by ``sqrt(n_train - 1)``).

What differs from the paper
    The paper samples its 10,000 training patches from 4,112 images and its test patches
    from 100 held-out images; here the pool has 20 images (default: 16 training, 4 test,
    ``n_images`` / ``n_test_images`` configurable), so the patches are far less diverse and
    test log-likelihoods are not directly comparable to the paper's.  The paper's exact
    image list and patch positions are not published.

File format (:func:`save_prepared_patches`, ``np.savez_compressed``, no pickles)
    ``train`` (N_train, M) and ``test`` (N_test, M) float64; ``pca_components`` (M, P*P);
    ``pca_mean`` (P*P,); ``whitening_scale`` (M,); ``explained_variance`` (M,);
    ``train_locations`` / ``test_locations`` int64 (N, 3) = (image index, row, column);
    ``meta``: 0-d string holding JSON (settings, image names, sources with sha256 and URL).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..errors import DatasetError
from ..utils import save_npz_atomic
from .download import fetch, remote_file
from .patches import extract_patches, fit_whitening, transform_patches
from .rows import READ_ERRORS, is_prepared, load_npy_npz
from .sizes import VANHATEREN_DEFAULTS as _DEFAULTS
from .sizes import VANHATEREN_IMAGE_SHAPE

DATASET = "vanhateren"
IMAGE_SHAPE = VANHATEREN_IMAGE_SHAPE  # rows, columns
IML_BYTES = IMAGE_SHAPE[0] * IMAGE_SHAPE[1] * 2  # 3,145,728
#: The registered ``.iml`` files in a fixed order (``n_images=k`` uses the first ``k``).
VANHATEREN_IMAGES = (
    "imk00152.iml",
    "imk00377.iml",
    "imk00405.iml",
    "imk00459.iml",
    "imk00657.iml",
    "imk01151.iml",
    "imk01154.iml",
    "imk01192.iml",
    "imk01769.iml",
    "imk01829.iml",
    "imk02265.iml",
    "imk02281.iml",
    "imk02733.iml",
    "imk02999.iml",
    "imk03093.iml",
    "imk03347.iml",
    "imk03447.iml",
    "imk03584.iml",
    "imk03758.iml",
    "imk03760.iml",
)
FORMAT_VERSION = 1
#: ``default_rng([seed, k])`` stream per use.
STREAMS = {"split": 0, "train": 1, "test": 2}
#: Settings of :func:`prepare_vanhateren`, stored in its result and in the file's ``meta``.
SETTINGS = ("n_images", "n_test_images", "patch_size", "n_train", "n_test", "n_components", "seed", "remove_dc")
WHITENING_KEYS = ("pca_components", "pca_mean", "whitening_scale", "explained_variance")
PATCH_SPLITS = ("train", "test")


def read_iml(path: str | os.PathLike) -> np.ndarray:
    """Read one van Hateren ``.iml`` image.

    Parameters
    ----------
    path : path-like
        A raw ``.iml`` file: 1024 rows x 1536 columns of big-endian ``uint16``, no header.

    Returns
    -------
    numpy.ndarray
        ``float64`` (1024, 1536), the raw (linear) pixel values.

    Raises
    ------
    DatasetError
        If the file is missing, unreadable or not exactly 3,145,728 bytes long.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise DatasetError(f"cannot read van Hateren image {path}: {exc}") from exc
    if size != IML_BYTES:
        raise DatasetError(
            f"van Hateren image {path} has {size} bytes; a .iml image has {IML_BYTES} "
            f"(= {IMAGE_SHAPE[0]} x {IMAGE_SHAPE[1]} big-endian uint16); the file is truncated or not a .iml"
        )
    try:
        raw = np.fromfile(path, dtype=">u2")
    except (OSError, ValueError) as exc:
        raise DatasetError(f"cannot read van Hateren image {path}: {exc}") from exc
    if raw.size != IMAGE_SHAPE[0] * IMAGE_SHAPE[1]:  # file changed under us
        raise DatasetError(
            f"van Hateren image {path}: read {raw.size} pixels, expected {IMAGE_SHAPE[0] * IMAGE_SHAPE[1]}"
        )
    return raw.reshape(IMAGE_SHAPE).astype(np.float64)


def image_path(name: str, mirror: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None) -> Path:
    """Local, sha256-verified copy of one registered image (see :func:`~logzbench.data.download.fetch`)."""
    return fetch(DATASET, name, mirror=mirror, cache_dir=cache_dir)


def load_images(
    n_images: int = 20,
    mirror: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> list[np.ndarray]:
    """Load the first ``n_images`` images of :data:`VANHATEREN_IMAGES`, verified.

    Parameters
    ----------
    n_images : int, default 20
        How many images, 1..20.
    mirror, cache_dir : path-like, optional
        Offline mirror root (``<mirror>/vanhateren/*.iml``) and download cache, as for
        :func:`~logzbench.data.download.fetch`.

    Returns
    -------
    list of numpy.ndarray
        ``n_images`` ``float64`` arrays (1024, 1536) (about 12.6 MB each).

    Raises
    ------
    ValueError
        If ``n_images`` is out of range.
    DatasetError
        If a file is missing, corrupt (sha256) or malformed.
    """
    n_images = _int("n_images", n_images, 1, len(VANHATEREN_IMAGES))
    return [read_iml(image_path(name, mirror, cache_dir)) for name in VANHATEREN_IMAGES[:n_images]]


def vanhateren_sources(names=VANHATEREN_IMAGES) -> dict:
    """``{file name: {"sha256": ..., "url": canonical URL}}`` for the metadata."""
    entries = (remote_file(DATASET, n) for n in names)
    return {e.filename: {"sha256": e.sha256, "url": e.urls[0]} for e in entries}


def prepare_vanhateren(
    *,
    n_images: int = _DEFAULTS["n_images"],
    n_test_images: int = _DEFAULTS["n_test_images"],
    patch_size: int = _DEFAULTS["patch_size"],
    n_train: int = _DEFAULTS["n_train"],
    n_test: int = _DEFAULTS["n_test"],
    n_components: int = _DEFAULTS["n_components"],
    seed: int = 0,
    remove_dc: bool = _DEFAULTS["remove_dc"],
    mirror: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> dict:
    """Sample, log, center, PCA-project and whiten van Hateren patches (split by image).

    Parameters
    ----------
    n_images : int, default 20
        Use the first ``n_images`` of :data:`VANHATEREN_IMAGES` (2..20).
    n_test_images : int, default 4
        Held-out test images, 1..``n_images - 1``.
    patch_size : int, default 16
        Patch side ``P`` (1..1024).
    n_train, n_test : int, default 10,000 and 100
        Number of training / test patches.  ``n_train`` must exceed ``n_components``.
    n_components : int, default 36
        ``M``, the number of PCA components kept (1..``P*P``; ``P*P - 1`` with ``remove_dc``).
    seed : int, default 0
        Seed of the image split and of the patch positions (streams in :data:`STREAMS`).
    remove_dc : bool, default False
        Also remove each patch's own mean after the log (not the paper's reading, see the
        module docstring).
    mirror, cache_dir : path-like, optional
        Offline mirror root and download cache (see :func:`~logzbench.data.download.fetch`).

    Returns
    -------
    dict
        ``train`` (n_train, M) and ``test`` (n_test, M) ``float64`` whitened data;
        ``train_raw`` (n_train, P, P) and ``test_raw`` (n_test, P, P) ``float64`` raw patches;
        ``train_locations`` / ``test_locations`` ``int64`` (n, 3) = (index in
        :data:`VANHATEREN_IMAGES`, row, column) of each patch's top-left corner;
        ``pca_components`` (M, P*P); ``pca_mean`` (P*P,); ``whitening_scale`` (M,);
        ``explained_variance`` (M,); ``train_images`` / ``test_images`` (lists of file
        names); ``sources`` (file name -> sha256 and URL); and the settings
        (:data:`SETTINGS`).

    Raises
    ------
    ValueError
        For impossible settings.
    DatasetError
        If an image is missing, corrupt, or a sampled patch holds a zero / non-finite value
        (the message names the image).
    """
    settings = _check_settings(
        n_images=n_images,
        n_test_images=n_test_images,
        patch_size=patch_size,
        n_train=n_train,
        n_test=n_test,
        n_components=n_components,
        seed=seed,
        remove_dc=remove_dc,
    )
    seed, p = settings["seed"], settings["patch_size"]
    perm = np.random.default_rng([seed, STREAMS["split"]]).permutation(settings["n_images"])
    test_idx, train_idx = perm[: settings["n_test_images"]], perm[settings["n_test_images"] :]

    out = dict(settings)
    for split, idx, n in (("train", train_idx, settings["n_train"]), ("test", test_idx, settings["n_test"])):
        # one (image, row, column) triple per patch, drawn in order: patch k does not depend on n
        draws = np.random.default_rng([seed, STREAMS[split]]).integers(
            0, [len(idx), IMAGE_SHAPE[0] - p + 1, IMAGE_SHAPE[1] - p + 1], size=(n, 3)
        )
        images, rows, cols = idx[draws[:, 0]], draws[:, 1], draws[:, 2]
        raw = np.empty((n, p, p), dtype=np.float64)
        for i in np.unique(images):  # one image in memory at a time
            name = VANHATEREN_IMAGES[i]
            path = image_path(name, mirror, cache_dir)
            here = np.flatnonzero(images == i)
            raw[here] = extract_patches(read_iml(path), rows[here], cols[here], p)
            bad = ~(np.isfinite(raw[here]) & (raw[here] > 0))
            if bad.any():
                k, r, c = np.argwhere(bad)[0]
                raise DatasetError(
                    f"van Hateren image {name} ({path}) has the value {raw[here][k, r, c]!r} at row "
                    f"{rows[here][k] + r}, column {cols[here][k] + c}, inside a sampled patch; the log of a "
                    "non-positive or non-finite luminance is undefined (no epsilon is added). "
                    "Use another seed or image set."
                )
        out[f"{split}_raw"] = raw
        out[f"{split}_locations"] = np.stack([images, rows, cols], axis=1).astype(np.int64)
        out[f"{split}_images"] = [VANHATEREN_IMAGES[i] for i in idx]

    whitening = fit_whitening(out["train_raw"], settings["n_components"], settings["remove_dc"])
    for key in WHITENING_KEYS:
        out[key] = whitening[key]
    out["train"] = transform_patches(out["train_raw"], whitening)
    out["test"] = transform_patches(out["test_raw"], whitening)
    out["sources"] = vanhateren_sources(VANHATEREN_IMAGES[: settings["n_images"]])
    return out


def save_prepared_patches(path: str | os.PathLike, prepared: dict) -> Path:
    """Write the result of :func:`prepare_vanhateren` to an ``.npz``, atomically.

    Parameters
    ----------
    path : path-like
        Destination (written to a temporary file and renamed: complete or absent).
    prepared : dict
        As returned by :func:`prepare_vanhateren`.  The raw patches are not stored (their
        locations and the images' sha256 are, so they can be cut again).

    Returns
    -------
    Path
        ``path``.
    """
    from .. import __version__

    arrays = {k: np.asarray(prepared[k], dtype=np.float64) for k in ("train", "test", *WHITENING_KEYS)}
    arrays.update({f"{s}_locations": np.asarray(prepared[f"{s}_locations"], dtype=np.int64) for s in PATCH_SPLITS})
    settings = {k: prepared[k] for k in SETTINGS}
    meta = {
        "format_version": FORMAT_VERSION,
        "dataset": DATASET,
        "settings": settings,
        "sizes": {s: len(arrays[s]) for s in PATCH_SPLITS},
        "train_images": list(prepared["train_images"]),
        "test_images": list(prepared["test_images"]),
        "image_order": list(VANHATEREN_IMAGES),
        "split": (
            f"perm = default_rng([seed, {STREAMS['split']}]).permutation(n_images) over the first n_images "
            "of image_order; perm[:n_test_images] test images, the rest training images"
        ),
        "patches": (
            f"image uniform over the split's images, top-left corner uniform over all positions; streams "
            f"default_rng([seed, {STREAMS['train']}]) (train) and "
            f"default_rng([seed, {STREAMS['test']}]) (test), one (image, row, column) triple per patch; "
            "locations = (index in image_order, row, column)"
        ),
        "processing": (
            "log(pixel)"
            + (", minus each patch's own mean" if settings["remove_dc"] else "")
            + ", minus the per-pixel training mean (pca_mean), projected onto the top n_components "
            "PCA components of the training patches (pca_components), divided by the training standard "
            "deviation of each component (whitening_scale, ddof=1)"
        ),
        "sources": prepared.get("sources") or vanhateren_sources(VANHATEREN_IMAGES[: settings["n_images"]]),
        "logzbench_version": __version__,
    }
    path = Path(path)
    save_npz_atomic(path, **arrays, meta=np.asarray(json.dumps(meta)))
    return path


def load_patches(path: str | os.PathLike, split: str = "test") -> np.ndarray:
    """Load one split of a file written by :func:`save_prepared_patches`.

    Parameters
    ----------
    path : path-like
        Prepared ``.npz``.
    split : {"train", "test"}
        Which rows.

    Returns
    -------
    numpy.ndarray
        ``float64`` (n, M) whitened patches.

    Raises
    ------
    DatasetError
        If the file is missing or unreadable, lacks ``split``, or the array is not a
        non-empty 2-D array of finite floats; the message names the file.
    """
    path = Path(path)
    with _open_prepared(path) as npz:
        if split not in npz.files:
            have = [s for s in PATCH_SPLITS if s in npz.files]
            raise DatasetError(f"prepared patch file {path} has no split {split!r} (it has {have})")
        _read_meta(npz, path)
        arr = _member(npz, split, path)
    return _check_float2d(arr, f"{path} [{split}]")


def load_real_rows(path: str | os.PathLike, split: str = "test") -> np.ndarray:
    """Real-valued data rows from a file: a ``.npy`` array as stored (the caller checks it against
    the model), or one split of a prepared patches file (:func:`load_patches`)."""
    if not str(path).endswith(".npy"):
        return load_patches(path, split)
    arr = load_npy_npz(Path(path))
    if isinstance(arr, np.lib.npyio.NpzFile):
        arr.close()
        raise DatasetError(f"{path}: an .npz archive named .npy; give one array (.npy) or a prepared .npz")
    return arr


def load_whitening(path: str | os.PathLike) -> dict:
    """The PCA / whitening of a prepared file, for :func:`~logzbench.data.patches.transform_patches` on new
    raw patches.

    Parameters
    ----------
    path : path-like
        Prepared ``.npz``.

    Returns
    -------
    dict
        ``pca_components`` (M, P*P), ``pca_mean`` (P*P,), ``whitening_scale`` (M,),
        ``explained_variance`` (M,) ``float64``; ``patch_size`` (int); ``remove_dc`` (bool).

    Raises
    ------
    DatasetError
        If an array is missing, non-finite, inconsistent in shape, or a scale is not positive.
    """
    path = Path(path)
    with _open_prepared(path) as npz:
        missing = [k for k in WHITENING_KEYS if k not in npz.files]
        if missing:
            raise DatasetError(f"prepared patch file {path} lacks the whitening arrays {missing}")
        out = {k: np.asarray(_member(npz, k, path)) for k in WHITENING_KEYS}
        meta = _read_meta(npz, path)
    for key, arr in out.items():
        if arr.dtype.kind != "f" or not np.isfinite(arr).all():
            raise DatasetError(f"whitening array {key!r} of {path} is not finite floats (dtype {arr.dtype})")
        out[key] = arr.astype(np.float64)
    settings = meta.get("settings", {})
    p, m = settings.get("patch_size"), settings.get("n_components")
    comp = out["pca_components"]
    if (
        comp.ndim != 2
        or (p is not None and comp.shape[1] != p * p)
        or (m is not None and comp.shape[0] != m)
        or out["pca_mean"].shape != (comp.shape[1],)
        or out["whitening_scale"].shape != (comp.shape[0],)
        or out["explained_variance"].shape != (comp.shape[0],)
    ):
        raise DatasetError(
            f"inconsistent whitening arrays in {path}: pca_components {comp.shape}, pca_mean {out['pca_mean'].shape}, "
            f"whitening_scale {out['whitening_scale'].shape}, explained_variance {out['explained_variance'].shape} "
            f"(meta: patch_size {p}, n_components {m})"
        )
    if not (out["whitening_scale"] > 0).all():
        raise DatasetError(f"whitening_scale of {path} has non-positive entries")
    out["patch_size"] = int(p) if p is not None else round(float(np.sqrt(comp.shape[1])))
    out["remove_dc"] = bool(settings.get("remove_dc", False))
    return out


def load_patches_meta(path: str | os.PathLike) -> dict:
    """The ``meta`` dictionary of a prepared patch file (settings, images, sources)."""
    path = Path(path)
    with _open_prepared(path) as npz:
        return _read_meta(npz, path)


# --------------------------------------------------------------------------- helpers


def _int(name: str, value, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < lo or (hi is not None and value > hi):
        raise ValueError(f"{name}={value} must be in [{lo}, {hi if hi is not None else 'inf'}]")
    return value


def _check_settings(**s) -> dict:
    out = {"n_images": _int("n_images", s["n_images"], 2, len(VANHATEREN_IMAGES))}
    out["n_test_images"] = _int("n_test_images", s["n_test_images"], 1, out["n_images"] - 1)
    out["patch_size"] = _int("patch_size", s["patch_size"], 1, min(IMAGE_SHAPE))
    out["n_train"] = _int("n_train", s["n_train"], 2)
    out["n_test"] = _int("n_test", s["n_test"], 1)
    if not isinstance(s["remove_dc"], (bool, np.bool_)):
        raise ValueError(f"remove_dc must be True or False, got {s['remove_dc']!r}")
    out["remove_dc"] = bool(s["remove_dc"])
    dims = out["patch_size"] ** 2 - int(out["remove_dc"])
    if dims < 1:
        raise ValueError("remove_dc=True needs patch_size >= 2")
    out["n_components"] = _int("n_components", s["n_components"], 1, dims)
    if out["n_components"] >= out["n_train"]:
        raise ValueError(f"n_components={out['n_components']} must be below n_train={out['n_train']}")
    out["seed"] = _int("seed", s["seed"], 0)
    return {k: out[k] for k in SETTINGS}


class _open_prepared:
    """``np.load`` of a prepared patch ``.npz`` (no pickles) as a context manager; errors become DatasetError."""

    def __init__(self, path: Path):
        if not path.is_file() and not path.is_dir():
            raise DatasetError(f"prepared patch file {path} does not exist")
        self.npz = load_npy_npz(path)
        if not is_prepared(self.npz):
            raise DatasetError(
                f"{path} is not a prepared patch file (.npz with 'meta'); create it with "
                "save_prepared_patches(path, prepare_vanhateren(...))"
            )

    def __enter__(self):
        return self.npz

    def __exit__(self, *exc):
        self.npz.close()


def _member(npz, key: str, path: Path) -> np.ndarray:
    try:
        return npz[key]
    except READ_ERRORS as exc:
        raise DatasetError(
            f"{path}: not a readable .npz/.npy file (array {key!r}: {type(exc).__name__}: {exc})"
        ) from exc


def _read_meta(npz, path: Path) -> dict:
    try:
        meta = json.loads(str(_member(npz, "meta", path)))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"the 'meta' of {path} is not valid JSON: {exc}") from exc
    if not isinstance(meta, dict) or meta.get("dataset") != DATASET:
        raise DatasetError(
            f"{path} is not a prepared van Hateren patch file (meta dataset "
            f"{meta.get('dataset') if isinstance(meta, dict) else meta!r})"
        )
    return meta


def _check_float2d(arr: np.ndarray, where: str) -> np.ndarray:
    if arr.dtype.kind != "f":
        raise DatasetError(f"data {where} has dtype {arr.dtype}; expected floating-point numbers")
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise DatasetError(f"data {where} has shape {arr.shape}; expected a non-empty 2-D array (patches, components)")
    if not np.isfinite(arr).all():
        raise DatasetError(f"data {where} contains NaN or infinite values")
    return arr.astype(np.float64)
