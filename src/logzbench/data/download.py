"""Registry of remote dataset files and a verified, offline-first ``fetch``.

Lookup order for ``fetch(dataset, filename)``:

1. the local mirror ``<mirror>/<dataset>/<filename>`` (``mirror`` argument, else the
   environment variable ``LOGZBENCH_DATA_MIRROR``);
2. the cache ``<cache>/<dataset>/<filename>`` (``cache_dir`` argument, else
   ``LOGZBENCH_DATA_CACHE``, else ``~/.cache/logzbench``);
3. a download from the canonical URL, then the fallback mirrors, into the cache.

For a ``.gz`` entry the uncompressed file (name without ``.gz``) is accepted too, in the
mirror and in the cache.  Every file is checked against the sha256 of its **decompressed**
content, so re-gzipped copies (different gzip header) are accepted while any change
of the data is not; entries that are not ``.gz`` (Omniglot's ``.npz`` files) are checked
against the sha256 of the file itself.  A file whose sha256 is not published (``sha256=None``) is
checked against the git blob SHA-1 of the repository tree it comes from when that is known
(``git_sha1``), and otherwise accepted as found: its reader must then check the content (shapes,
values) and record the sha256 it saw (see :mod:`logzbench.data.uci`).  All network access goes
through :func:`_download`, which tests replace.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

from ..errors import DatasetError
from ..utils import atomic_path

MIRROR_ENV = "LOGZBENCH_DATA_MIRROR"
CACHE_ENV = "LOGZBENCH_DATA_CACHE"
DEFAULT_CACHE = Path("~/.cache/logzbench")
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RemoteFile:
    """One remote dataset file.

    Attributes
    ----------
    dataset, filename : str
        Where the file lives in a mirror or cache: ``<root>/<dataset>/<filename>``.
    sha256 : str or None
        sha256 of the decompressed content (of the file itself when not ``.gz``); ``None`` when
        no trustworthy value is known (then ``git_sha1``, or nothing, is checked).
    urls : tuple of str
        Canonical public URL first, then fallback mirrors, tried in order.
    gz_sha256 : str or None
        sha256 of the official ``.gz`` as published, for reference only (not enforced).
    git_sha1 : str or None
        Git blob SHA-1 of the file (``git hash-object``) in the pinned repository tree it comes
        from; checked only when ``sha256`` is ``None``.
    """

    dataset: str
    filename: str
    sha256: str | None
    urls: tuple[str, ...]
    gz_sha256: str | None = None
    git_sha1: str | None = None

    @property
    def gzipped(self) -> bool:
        """Whether the registered file is gzip-compressed."""
        return self.filename.endswith(".gz")


REGISTRY: dict[tuple[str, str], RemoteFile] = {}


def register(entry: RemoteFile) -> RemoteFile:
    """Add ``entry`` to :data:`REGISTRY` (replacing one with the same dataset and file name)."""
    REGISTRY[(entry.dataset, entry.filename)] = entry
    return entry


_MNIST_BASES = (
    "http://yann.lecun.com/exdb/mnist/",  # canonical
    "https://ossci-datasets.s3.amazonaws.com/mnist/",  # torchvision's mirror
    "https://storage.googleapis.com/cvdf-datasets/mnist/",  # TensorFlow's mirror
)
for _name, _sha, _gz_sha in (
    (
        "train-images-idx3-ubyte.gz",
        "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
        "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    ),
    (
        "train-labels-idx1-ubyte.gz",
        "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
        "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    ),
    (
        "t10k-images-idx3-ubyte.gz",
        "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
        "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    ),
    (
        "t10k-labels-idx1-ubyte.gz",
        "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
        "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
    ),
):
    register(RemoteFile("mnist", _name, _sha, tuple(b + _name for b in _MNIST_BASES), _gz_sha))

#: Omniglot (Lake et al. 2015) as 105x105 boolean NumPy arrays, made from the official
#: ``brendenlake/omniglot`` PNG zips by the repository ``bitsandscraps/omniglot``; pinned to a commit.
OMNIGLOT_COMMIT = "b0481240b7eb42393285a93ce7d2f266ff10c62b"
_OMNIGLOT_BASES = (
    f"https://github.com/bitsandscraps/omniglot/raw/{OMNIGLOT_COMMIT}/",  # canonical (commit-pinned)
    f"https://raw.githubusercontent.com/bitsandscraps/omniglot/{OMNIGLOT_COMMIT}/",
)
for _name, _sha in (
    ("images_background.npz", "8bf84167413cd00beacdce3fe582f780ab538d8dbef043a6d688f2527bbce199"),
    ("images_evaluation.npz", "0b84c7ffd94c4841c0040e529c86a82eaaccb986d8eadad5673f7991b7475276"),
):  # not compressed by gzip: sha256 of the file itself
    register(RemoteFile("omniglot", _name, _sha, tuple(b + _name for b in _OMNIGLOT_BASES)))

#: A 20-image sample of the van Hateren & van der Schaaf (1998) natural images (``.iml``: 1024 x 1536
#: big-endian uint16, linearized luminance), as copied unchanged into ``Rieke-Lab/turner-package``;
#: pinned to a commit.  The ``+`` of the MATLAB package folders is percent-encoded (``%2B``, the form
#: GitHub's own links use; a literal ``+`` may be read as a space by some servers), with the literal
#: form as the last fallback.
VANHATEREN_COMMIT = "08eb7a0a138350e5e1dbedc67b1bbd48d76f289d"
_VANHATEREN_DIR = "+edu/+washington/+riekelab/+turner/+rescource/VHsubsample_20160105/"
_VANHATEREN_BASES = (
    f"https://github.com/Rieke-Lab/turner-package/raw/{VANHATEREN_COMMIT}/"
    + _VANHATEREN_DIR.replace("+", "%2B"),  # canonical (commit-pinned)
    f"https://raw.githubusercontent.com/Rieke-Lab/turner-package/{VANHATEREN_COMMIT}/"
    + _VANHATEREN_DIR.replace("+", "%2B"),
    f"https://raw.githubusercontent.com/Rieke-Lab/turner-package/{VANHATEREN_COMMIT}/" + _VANHATEREN_DIR,
)
for _name, _sha in (  # not compressed: sha256 of the file itself
    ("imk00152.iml", "4c70cbe8dab467c1f820a61efa2496d8dae15b41a892591d0c9e7e230f9b825a"),
    ("imk00377.iml", "c53831290f70c619bf52f08c62dc085a638c9804b69f3d8af92bc392daaec3ba"),
    ("imk00405.iml", "d9a7e92f6087cdf7b1db55d7f6b250c760608e55ef020a999d43b7b095808122"),
    ("imk00459.iml", "c3ba1b9e67d62d7011aeb8ad7b92081b50e5f2038600460d7b5c34656323dd54"),
    ("imk00657.iml", "46180fc8fba8328e523b4907ed4babddd01d4fc3971a8fcc92e673934c85890d"),
    ("imk01151.iml", "2012351ad8ba8a931c7d207ed33b8deed592c1ae995c314d019b1cd899d38f1d"),
    ("imk01154.iml", "f5d8f3c4fe61ac142e3d1f3396abcd2ce6a0b9ed8d54ee00fe6eb484d5b06927"),
    ("imk01192.iml", "117fe280dbc27a1971c6111a60da04baf3b0878ad91adde7978a3ed79a0959af"),
    ("imk01769.iml", "f29059744f67f85131c82b252c5b1831c8a0cd30b53b933f44438a532ad5128c"),
    ("imk01829.iml", "9ca07b1c0121880cd6185fbe0d28b2ba93e6d5fe09dafcf72c145a6842c888d0"),
    ("imk02265.iml", "6a6aafc0aa29fd67d3aa3eaac3a3bf806f910e5c1f6f2eadd283e4401f7c9998"),
    ("imk02281.iml", "3e3c067943020582a09c74944f32fd7db50244b8c30fa75b0ba02ad87bb10354"),
    ("imk02733.iml", "c202c22e8f1fe03358f7632cd3a3e20a6bca2cb469a7155a39ef9eb8094d0fd9"),
    ("imk02999.iml", "a4b571964f07b0b39343bd2df3e51356137bcb0cd5993032432ba2b007a48fc0"),
    ("imk03093.iml", "5d295e21031910f61e2518f4a2eaa79dc9a6e305beb76f0f2d4cf91a464de9d8"),
    ("imk03347.iml", "88fa2368b738d50efc86a1d1ab0f48a6f823e64eb2932a460adc23f0f5ddf1aa"),
    ("imk03447.iml", "7a3754d0c32ec52a3ec09eb3af2893f040259ac19ba472e0a702a2643cdf740a"),
    ("imk03584.iml", "4eed3b222328978ffa3b9119c9a74ed25d3fa7d0e2760f61648f955b9364ce92"),
    ("imk03758.iml", "a5a89f192a0552bca9455d900660594338b122457c60bc8afe72589e6b604c74"),
    ("imk03760.iml", "2fd70bdc2468a00b825417c3dd3c96ac6145edfad8e7575a2825e6e4748ba880"),
):
    register(RemoteFile("vanhateren", _name, _sha, tuple(b + _name for b in _VANHATEREN_BASES)))


def remote_file(dataset: str, filename: str) -> RemoteFile:
    """Return the registry entry for ``dataset/filename``.

    Raises
    ------
    DatasetError
        If the file is not registered.
    """
    try:
        return REGISTRY[(dataset, filename)]
    except KeyError:
        known = ", ".join(f"{d}/{f}" for d, f in sorted(REGISTRY))
        raise DatasetError(f"unknown data file {dataset}/{filename}; registered: {known}") from None


def content_sha256(path: str | os.PathLike, gzipped: bool | None = None) -> str:
    """sha256 of the (decompressed, when ``gzipped``) content of ``path``.

    Parameters
    ----------
    path : path-like
        File to hash.
    gzipped : bool, optional
        Decompress while hashing; by default when the name ends in ``.gz``.

    Raises
    ------
    OSError, EOFError, zlib.error
        If the file cannot be read or is not valid gzip.
    """
    path = Path(path)
    if gzipped is None:
        gzipped = path.name.endswith(".gz")
    digest = hashlib.sha256()
    with (gzip.open if gzipped else open)(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def git_blob_sha1(path: str | os.PathLike) -> str:
    """Git's blob SHA-1 of a file (``git hash-object path``): sha1 of ``b"blob <size>\\0"`` + content."""
    path = Path(path)
    digest = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def expected_digest(entry: RemoteFile) -> str:
    """What :func:`verify` checks for ``entry``, in words (for messages)."""
    if entry.sha256 is not None:
        return f"sha256 {entry.sha256}" + (" of the decompressed content" if entry.gzipped else "")
    if entry.git_sha1 is not None:
        return f"git blob sha1 {entry.git_sha1} (no sha256 is published)"
    return "no checksum (none is known; the content is checked after loading)"


def verify(path: str | os.PathLike, entry: RemoteFile, gzipped: bool | None = None, hint: str | None = None) -> None:
    """Check the decompressed sha256 of ``path`` against ``entry``.

    Without a registered sha256 the git blob SHA-1 (``entry.git_sha1``) is checked instead, and
    with neither the file is accepted unchecked (its reader checks the content).

    Parameters
    ----------
    path : path-like
        The copy to check.
    entry : RemoteFile
        What it should be.
    gzipped : bool, optional
        Whether ``path`` is gzip-compressed; default ``entry.gzipped``.
    hint : str, optional
        Where a good copy should go (part of the error message).

    Raises
    ------
    DatasetError
        On a mismatch or an unreadable / truncated gzip stream; the message names the
        file, the expected sha256 and where a good copy must go.
    """
    if entry.sha256 is None and entry.git_sha1 is None:
        return
    try:
        if entry.sha256 is None:
            expected, actual = entry.git_sha1, git_blob_sha1(path)
            problem = f"has git blob sha1 {actual}"
        else:
            expected, actual = entry.sha256, content_sha256(path, entry.gzipped if gzipped is None else gzipped)
            problem = f"has sha256 {actual}" + (" (decompressed content)" if entry.gzipped else "")
    except (OSError, EOFError, zlib.error) as exc:
        problem = f"cannot be decompressed/read ({type(exc).__name__}: {exc})"
    else:
        if actual == expected:
            return
    what = (
        f"sha256 {entry.sha256} of the {'decompressed ' if entry.gzipped else ''}{entry.filename}"
        if entry.sha256 is not None
        else f"git blob sha1 {entry.git_sha1} of {entry.filename}"
    )
    raise DatasetError(
        f"data file {path} is corrupt: it {problem}, expected {what}. Replace it with a good copy "
        f"({hint or _where_to_put(entry)})."
    )


def fetch(
    dataset: str,
    filename: str,
    mirror: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Path:
    """Return a local, verified copy of a registered data file.

    Parameters
    ----------
    dataset, filename : str
        Registry key, e.g. ``("mnist", "train-images-idx3-ubyte.gz")``.
    mirror : path-like, optional
        Offline mirror root holding ``<dataset>/<filename>``; default
        ``$LOGZBENCH_DATA_MIRROR``.
    cache_dir : path-like, optional
        Download cache root; default ``$LOGZBENCH_DATA_CACHE`` or ``~/.cache/logzbench``.

    Returns
    -------
    Path
        The mirror copy, the cached copy or the freshly downloaded one (possibly the
        uncompressed variant of a ``.gz`` entry).

    Raises
    ------
    DatasetError
        If the mirror copy is corrupt, or no copy exists and every download failed.
        A failed download leaves no file behind.
    """
    entry = remote_file(dataset, filename)
    mirror_root = _mirror_root(mirror)
    if mirror_root is not None and not mirror_root.is_dir():
        _log.warning(
            "data mirror %s is not a directory; looking for %s/%s in the cache, then downloading",
            mirror_root,
            dataset,
            filename,
        )
    if mirror_root is not None:
        found = _existing(mirror_root / dataset, entry)
        if found is not None:
            verify(found, entry, found.name.endswith(".gz"), _where_to_put(entry, mirror_root))
            return found

    cache_root = _cache_root(cache_dir)
    found = _existing(cache_root / dataset, entry)
    cache_note = ""
    if found is not None:
        try:
            verify(found, entry, found.name.endswith(".gz"), _where_to_put(entry, None, cache_root))
            return found
        except DatasetError as exc:  # corrupt cache copy: download a fresh one over it
            cache_note = f" The cached copy was rejected: {exc}"

    target = cache_root / dataset / filename
    failures = []
    for url in entry.urls:
        try:
            with atomic_path(target) as tmp:
                _download(url, tmp)
                verify(tmp, entry)
            return target
        except Exception as exc:
            failures.append(f"{url}: {type(exc).__name__}: {exc}")
    raise DatasetError(
        f"data file {dataset}/{filename} is not available offline and could not be "
        f"downloaded (expected {expected_digest(entry)}). "
        f"{_where_to_put(entry, mirror_root, cache_root)}.{cache_note}\nDownload attempts:\n  " + "\n  ".join(failures)
    )


def _download(url: str, dest: Path) -> None:
    """Download ``url`` to ``dest`` (the one place that touches the network)."""
    import pooch

    pooch.HTTPDownloader(progressbar=False, timeout=60)(url, str(dest), None)


def check_mirror(mirror: str | os.PathLike | None = None) -> Path | None:
    """The mirror root ``mirror`` (else ``$LOGZBENCH_DATA_MIRROR``; ``None`` when neither is set),
    refused when it is not an existing directory (a mistyped mirror would otherwise fall back to
    downloading; :func:`fetch` itself only warns, for the workflow's default mirror).

    Raises
    ------
    DatasetError
        Naming the path and where it came from.
    """
    root = _mirror_root(mirror)
    if root is not None and not root.is_dir():
        where = "--mirror / mirror=" if mirror is not None else f"${MIRROR_ENV}"
        raise DatasetError(
            f"data mirror {root} (from {where}) "
            f"{'is not a directory' if root.exists() else 'does not exist'}; give the directory "
            f"holding <dataset>/<file>, or leave it unset to use the cache and download"
        )
    return root


def _mirror_root(mirror: str | os.PathLike | None) -> Path | None:
    mirror = mirror if mirror is not None else os.environ.get(MIRROR_ENV) or None
    return None if mirror is None else Path(mirror).expanduser()


def _cache_root(cache_dir: str | os.PathLike | None) -> Path:
    cache_dir = cache_dir if cache_dir is not None else os.environ.get(CACHE_ENV) or DEFAULT_CACHE
    return Path(cache_dir).expanduser()


def _existing(folder: Path, entry: RemoteFile) -> Path | None:
    names = [entry.filename] + ([entry.filename[:-3]] if entry.gzipped else [])
    return next((folder / n for n in names if (folder / n).is_file()), None)


def _where_to_put(entry: RemoteFile, mirror_root: Path | None = None, cache_root: Path | None = None) -> str:
    rel = f"{entry.dataset}/{entry.filename}"
    if mirror_root is not None:
        text = f"Put the file at {mirror_root / rel} (the mirror given by mirror= or ${MIRROR_ENV})"
    else:
        text = f"Put the file at <mirror>/{rel} and set ${MIRROR_ENV}=<mirror> (or pass mirror=)"
    if cache_root is not None:
        text += f", or at {cache_root / rel} (the download cache, ${CACHE_ENV})"
    return text + f"; source: {entry.urls[0]}"
