"""Binarized UCI data sets of Larochelle & Murray (2011), with the splits of the AVIL paper's Table 1.

Larochelle & Murray ("The neural autoregressive distribution estimator", AISTATS 2011) published
eight binary density-estimation benchmarks with fixed train / validation / test splits; Li et al.
("Adversarial variational inference and learning in Markov random fields", Table 1) use them
unchanged:

===============  ===  ======  ======  ======  =============================================
source           D    train   valid   test    file(s) (``<mirror>/uci_binary/<folder>/``)
===============  ===  ======  ======  ======  =============================================
``adult``        123   5000    1414   26147   ``adult/a5a_{train,valid,test}.libsvm``
``connect4``     126  16000    4000   47557   ``connect4/connect4.npz``
``dna``          180   1400     600    1186   ``dna/dna.npz``
``mushrooms``    112   2000     500    5624   ``mushrooms/mushrooms.npz``
``nips-0-12``    500    400     100    1240   ``nips/nips.npz``
``ocr_letters``  128  32152   10000   10000   ``ocr_letters/ocr_letters.npz``
``rcv1``         150  40000   10000  150000   ``rcv1/rcv1.npz``
``web``          300  14000    3188   32561   ``web/web.npz``
===============  ===  ======  ======  ======  =============================================

Sources and checksums (all through :func:`logzbench.data.download.fetch`: mirror, cache, download)
    ``adult``: Larochelle's LIBSVM text files (``a5a``; ``+1``/``-1`` label, then the 1-based
    indices of the active features as ``index:1``), canonical URL
    ``http://www.cs.toronto.edu/~larocheh/public/datasets/adult/``, with the unchanged copies in
    ``shabanian/Fuel`` at a pinned commit as fallback; sha256 pinned.
    ``dna``, ``mushrooms``, ``nips-0-12``: the ``.npz`` conversions of Larochelle's files committed to
    ``mgermain/MADE`` (Germain et al., ICML 2015) at a pinned commit (keys ``train_data``,
    ``valid_data``, ``test_data`` float32 0/1, ``inputsize``); sha256 pinned.
    ``connect4``, ``ocr_letters``, ``web``: the same repository's ``datasets/<name>.npz``.  Their
    sha256 is not published and no copy was available to compute it; they are checked against
    their **git blob SHA-1** in the pinned commit's tree (``git ls-tree``), which identifies the
    content just as well.
    ``rcv1``: a release asset of ``mgermain/MADE`` (``releases/download/ICML2015/rcv1.npz``).
    **No checksum of it is known**: the file is accepted as downloaded and checked by its content
    only (below); the sha256 actually read is recorded in the prepared file's ``meta`` so that a
    later run can be compared.

Checks on every load (:func:`load_uci`)
    Every split must be a 2-D array of 0/1 values (NaN, 0.5, 2, ... refused), exactly ``D`` columns
    wide (a LIBSVM feature index outside ``1..D`` is refused), and have the row count of the
    table; a ``.npz``'s ``inputsize``, when present, must equal ``D``.  Any failure is a
    :class:`~logzbench.errors.DatasetError` naming the file, the split and the problem.  The class
    labels of ``adult`` are not kept (density estimation; the ``.npz`` files have none), and no set
    has an image shape.
"""

from __future__ import annotations

import os
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DatasetError
from .download import RemoteFile, content_sha256, expected_digest, fetch, register, remote_file
from .rows import check_binary_rows
from .sizes import UCI_ROWS, UCI_WIDTHS

SPLITS = ("train", "valid", "test")
#: Mirror / cache folder of all UCI sets: ``<mirror>/uci_binary/<folder>/<file>``.
ROOT = "uci_binary"
#: ``mgermain/MADE`` commit whose tree holds ``datasets/*.npz`` (files added in ``ace8010e``, 2015-05-15).
MADE_COMMIT = "514849eb9451311c02049f9e2d9a17fac589996a"
#: ``shabanian/Fuel`` commit holding unchanged copies of Larochelle's ``a5a_*.libsvm`` at its root.
FUEL_COMMIT = "b116ff77a4a8c75bb0b55bdaa88b79818abac65b"
LAROCHELLE_URL = "http://www.cs.toronto.edu/~larocheh/public/datasets/"
MADE_RCV1_URL = "https://github.com/mgermain/MADE/releases/download/ICML2015/rcv1.npz"
_MADE_BASES = (
    f"https://github.com/mgermain/MADE/raw/{MADE_COMMIT}/datasets/",  # canonical (commit-pinned)
    f"https://raw.githubusercontent.com/mgermain/MADE/{MADE_COMMIT}/datasets/",
)
#: Keys of a MADE ``.npz``, by split.
NPZ_KEYS = {"train": "train_data", "valid": "valid_data", "test": "test_data"}


@dataclass(frozen=True)
class UciSet:
    """One binarized UCI data set.

    Attributes
    ----------
    name : str
        Source name (``prepare_dataset(name, ...)``, the config's ``datasets.<name>.source``).
    folder : str
        Folder under ``<mirror>/uci_binary/``.
    n_features : int
        ``D``, the row width.
    sizes : dict
        Rows per split, ``{"train": ..., "valid": ..., "test": ...}`` (AVIL Table 1).
    files : tuple of str
        Registry file names: one ``.npz`` with all splits, or one LIBSVM file per split (train,
        valid, test).
    """

    name: str
    folder: str
    n_features: int
    sizes: dict
    files: tuple[str, ...]

    @property
    def dataset(self) -> str:
        """Registry / mirror folder key, ``uci_binary/<folder>``."""
        return f"{ROOT}/{self.folder}"

    @property
    def libsvm(self) -> bool:
        """Whether the splits are LIBSVM text files (else one MADE ``.npz``)."""
        return self.files[0].endswith(".libsvm")


def _set(name, folder, files=None) -> UciSet:
    """One set: its width and split sizes from :mod:`logzbench.data.sizes`."""
    return UciSet(name, folder, UCI_WIDTHS[name], dict(UCI_ROWS[name]), files or (f"{folder}.npz",))


#: The eight sets of Table 1, by source name.
UCI_SETS = {
    s.name: s
    for s in (
        _set("adult", "adult", tuple(f"a5a_{s}.libsvm" for s in SPLITS)),
        _set("connect4", "connect4"),
        _set("dna", "dna"),
        _set("mushrooms", "mushrooms"),
        _set("nips-0-12", "nips"),
        _set("ocr_letters", "ocr_letters"),
        _set("rcv1", "rcv1"),
        _set("web", "web"),
    )
}
UCI_DATASETS = tuple(UCI_SETS)

for _name, _sha in (  # sha256 of the files themselves (= the mirror's MANIFEST.tsv)
    ("a5a_train.libsvm", "fec00da4593cec3adea33986d958ceb3434c0e635e6e7495f3c1f6d4a64b54fa"),
    ("a5a_valid.libsvm", "c54b5973ca19d03a8d153ffbdf0a5114fff5d587ea1d2589dfa4865526b91826"),
    ("a5a_test.libsvm", "9ddbc60c0a3c5a8249e51f663d7110c4050e40d67301640418e9f44186db1bd1"),
):
    register(
        RemoteFile(
            f"{ROOT}/adult",
            _name,
            _sha,
            (
                f"{LAROCHELLE_URL}adult/{_name}",  # canonical
                f"https://github.com/shabanian/Fuel/raw/{FUEL_COMMIT}/{_name}",
                f"https://raw.githubusercontent.com/shabanian/Fuel/{FUEL_COMMIT}/{_name}",
            ),
        )
    )
for _folder, _sha, _git in (
    (
        "dna",
        "df2d2e7ce1469edfead15e41024e108d64f1b4633cfecfc40ef7107cc22c895c",
        "6375b479f1a0c6cdc4ff836d7e53c0814e10873f",
    ),
    (
        "mushrooms",
        "4130f1defa3033911fe746a3ab1bb22b0c812bb29e68391a0fbc2d65bab6ae74",
        "a0349099324fa4b579228d31f8edb706c9d238dd",
    ),
    (
        "nips",
        "dbf3b659a49670957c0851971bd51ff952a657f010581d12f6c1e2dca8907b20",
        "bdc1319ac88d344ea518c6a5814996989ebdb7d8",
    ),
    # sha256 not known (not published; the files were not available to hash): git blob SHA-1 of
    # datasets/<name>.npz in the tree of MADE_COMMIT instead
    ("connect4", None, "4685318ab6aabc98eec09b93ad4fa5debc24ec93"),
    ("ocr_letters", None, "b472383a2ddeddbc87b4e3019a3bd47736bddb37"),
    ("web", None, "a565424fc5782cb99d79788618cd6c332440a8a1"),
):
    register(
        RemoteFile(
            f"{ROOT}/{_folder}", f"{_folder}.npz", _sha, tuple(f"{b}{_folder}.npz" for b in _MADE_BASES), git_sha1=_git
        )
    )
# rcv1: a release asset; no checksum of any kind is known -> checked by content after loading
register(RemoteFile(f"{ROOT}/rcv1", "rcv1.npz", None, (MADE_RCV1_URL,)))


def uci_set(name: str) -> UciSet:
    """The :class:`UciSet` called ``name``; a :class:`DatasetError` listing the sets otherwise."""
    try:
        return UCI_SETS[name]
    except KeyError:
        raise DatasetError(f"unknown UCI data set {name!r}; choose from {UCI_DATASETS}") from None


def load_uci(name: str, mirror: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None) -> dict:
    """Load one binarized UCI set with its fixed splits, checked against the table above.

    Parameters
    ----------
    name : str
        One of :data:`UCI_DATASETS`.
    mirror : path-like, optional
        Offline mirror root holding ``uci_binary/<folder>/<file>``; default ``$LOGZBENCH_DATA_MIRROR``.
    cache_dir : path-like, optional
        Download cache root (see :func:`logzbench.data.download.fetch`).

    Returns
    -------
    dict
        ``train``, ``valid``, ``test``: ``uint8`` (N_split, D) arrays of 0/1 with the sizes of
        :data:`UCI_SETS`; ``sources``: ``{file name: {"sha256": sha256 of the file read,
        "checked": what was verified before reading, "url": canonical URL}}``.

    Raises
    ------
    DatasetError
        If a file is missing offline (naming the file, the mirror path looked at and the URL),
        fails its checksum, cannot be parsed, or holds non-binary values, rows of the wrong width
        or the wrong number of rows.
    """
    spec = uci_set(name)
    entries = [remote_file(spec.dataset, f) for f in spec.files]
    paths = [fetch(spec.dataset, f, mirror=mirror, cache_dir=cache_dir) for f in spec.files]
    try:
        if spec.libsvm:
            raw = {s: (read_libsvm(p, spec.n_features), p) for s, p in zip(SPLITS, paths)}
        else:
            raw = {s: (x, paths[0]) for s, x in read_made_npz(paths[0], spec.n_features).items()}
        out = {s: check_split(x, spec, s, p) for s, (x, p) in raw.items()}
    except DatasetError as exc:
        if any(e.sha256 is None and e.git_sha1 is None for e in entries):
            raise DatasetError(
                f"{exc} (no checksum is known for this file, so only its content is checked: "
                "replace or delete it to download it again)"
            ) from exc
        raise
    out["sources"] = {
        e.filename: {"sha256": content_sha256(p, gzipped=False), "checked": expected_digest(e), "url": e.urls[0]}
        for e, p in zip(entries, paths)
    }
    return out


def check_split(x, spec: UciSet, split: str, path: str | os.PathLike) -> np.ndarray:
    """Validate one split: 0/1 values, ``spec.n_features`` columns, the row count of Table 1.

    Returns
    -------
    numpy.ndarray
        ``uint8`` (N, D).

    Raises
    ------
    DatasetError
        Naming ``path``, the split and the problem.
    """
    rows = check_binary_rows(x, f"{spec.name} {split} rows of {path}", spec.n_features, error=DatasetError)
    if len(rows) != spec.sizes[split]:
        raise DatasetError(
            f"{spec.name} {split} rows of {path}: {len(rows)} rows, expected "
            f"{spec.sizes[split]} (Larochelle & Murray's split, AVIL Table 1)"
        )
    return rows


def read_libsvm(path: str | os.PathLike, n_features: int) -> np.ndarray:
    """Read a binary LIBSVM file (``label index:1 index:1 ...``, 1-based indices) into rows.

    Parameters
    ----------
    path : path-like
        Text file, one example per line; the label (first field) is ignored; blank lines are skipped.
    n_features : int
        Row width ``D``; every index must lie in ``1..D``.

    Returns
    -------
    numpy.ndarray
        ``uint8`` (N, D): column ``i - 1`` is 1 where the line lists ``i:1``.

    Raises
    ------
    DatasetError
        For an unreadable file, a malformed field, an index outside ``1..D`` (rows wider than the
        data set) or a value other than 0 and 1; the message names the file and the line.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read LIBSVM file {path}: {type(exc).__name__}: {exc}") from exc
    lines = [line.split() for line in lines if line.strip()]
    rows = np.zeros((len(lines), n_features), dtype=np.uint8)
    for r, fields in enumerate(lines):
        try:
            pairs = [(int(i), float(v)) for i, _, v in (f.partition(":") for f in fields[1:])]
        except ValueError:
            raise DatasetError(
                f"LIBSVM file {path}, example {r + 1}: cannot parse {' '.join(fields[1:])!r} as index:value pairs"
            ) from None
        for i, v in pairs:
            if not 1 <= i <= n_features:
                raise DatasetError(
                    f"LIBSVM file {path}, example {r + 1}: feature index {i} is outside "
                    f"1..{n_features}; the rows are wider than the {n_features} features of this data set"
                )
            if v not in (0.0, 1.0):
                raise DatasetError(
                    f"LIBSVM file {path}, example {r + 1}: feature {i} has the value {v!r}; "
                    "the data set is binary (values 0 and 1)"
                )
            rows[r, i - 1] = int(v)
    return rows


def read_made_npz(path: str | os.PathLike, n_features: int) -> dict:
    """The three splits of a MADE ``.npz`` (``train_data``, ``valid_data``, ``test_data``), unchecked.

    Raises
    ------
    DatasetError
        If the file cannot be read (pickles are refused), lacks a split, or its ``inputsize``
        differs from ``n_features``.
    """
    try:
        with warnings.catch_warnings():  # the MADE files were written by Python 2: a harmless header warning
            warnings.simplefilter("ignore", UserWarning)
            with np.load(path, allow_pickle=False) as npz:
                missing = [k for k in NPZ_KEYS.values() if k not in npz.files]
                if missing:
                    raise DatasetError(f"UCI file {path} lacks arrays {missing} (has {npz.files})")
                out = {s: npz[k] for s, k in NPZ_KEYS.items()}
                width = npz["inputsize"] if "inputsize" in npz.files else None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise DatasetError(f"cannot read UCI file {path}: {type(exc).__name__}: {exc}") from exc
    if width is not None and (width.shape != () or int(width) != n_features):
        raise DatasetError(f"UCI file {path} has inputsize {width.tolist()}, expected {n_features}")
    return out
