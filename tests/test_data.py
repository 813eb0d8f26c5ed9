"""Dataset layer: verified fetch, MNIST IDX reading, digits, binarization, prepared files.

MNIST tests use the offline mirror at ``../shared/data`` (relative to the repository root)
and are skipped when it is absent.  The network is never used: ``_download`` is replaced
by a stub in every test.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from logzbench.data import DATASETS, download, load_binary_rows, load_meta, load_prepared, prepare_dataset
from logzbench.data.binarize import binarize
from logzbench.data.mnist import load_mnist, read_idx
from logzbench.errors import DatasetError

MIRROR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
needs_mirror = pytest.mark.skipif(
    not (MIRROR / "mnist").is_dir(),
    reason=f"offline data mirror not found at {MIRROR} (../shared/data from the repository root)",
)
TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
SMALL = "t10k-labels-idx1-ubyte.gz"


pytestmark = pytest.mark.usefixtures("offline")  # conftest: no network, empty cache, no mirror


@pytest.fixture(scope="module")
def mnist():
    if not (MIRROR / "mnist").is_dir():
        pytest.skip(f"offline data mirror not found at {MIRROR}")
    return load_mnist(mirror=MIRROR)


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def small_mirror(tmp_path: Path, content: bytes | None = None) -> Path:
    """A mirror holding only the small test-label file (``content`` replaces its bytes)."""
    folder = tmp_path / "mirror" / "mnist"
    folder.mkdir(parents=True)
    target = folder / SMALL
    if content is None:
        shutil.copy(MIRROR / "mnist" / SMALL, target)
    else:
        target.write_bytes(content)
    return tmp_path / "mirror"


# --------------------------------------------------------------------------- fetch / MNIST


@needs_mirror
def test_mnist_from_mirror(mnist, offline):
    assert mnist["train_images"].shape == (60000, 784) and mnist["train_images"].dtype == np.uint8
    assert mnist["test_images"].shape == (10000, 784)
    assert mnist["train_labels"].shape == (60000,) and mnist["test_labels"].shape == (10000,)
    assert np.bincount(mnist["train_labels"], minlength=10).tolist() == TRAIN_COUNTS
    assert np.bincount(mnist["test_labels"], minlength=10).tolist() == TEST_COUNTS
    assert mnist["train_images"].max() == 255
    assert offline == []


@needs_mirror
def test_mirror_from_environment(monkeypatch, offline):
    monkeypatch.setenv(download.MIRROR_ENV, str(MIRROR))
    assert download.fetch("mnist", SMALL) == MIRROR / "mnist" / SMALL
    assert offline == []


@needs_mirror
def test_regzipped_and_uncompressed_copies_accepted(tmp_path):
    raw = gzip.decompress((MIRROR / "mnist" / SMALL).read_bytes())
    mirror = small_mirror(tmp_path, gzip.compress(raw, compresslevel=9, mtime=12345))
    assert download.fetch("mnist", SMALL, mirror=mirror) == mirror / "mnist" / SMALL
    other = tmp_path / "raw_mirror" / "mnist"
    other.mkdir(parents=True)
    (other / SMALL[:-3]).write_bytes(raw)
    path = download.fetch("mnist", SMALL, mirror=other.parent)
    assert path.name == SMALL[:-3]
    assert read_idx(path, 2049).shape == (10000,)


@needs_mirror
@pytest.mark.parametrize("damage", ["flip_bytes", "valid_gzip_other_content"])
def test_corrupt_mirror_copy(tmp_path, damage, offline):
    data = bytearray((MIRROR / "mnist" / SMALL).read_bytes())
    if damage == "flip_bytes":
        for i in range(100, 110):
            data[i] ^= 0xFF
    else:
        raw = bytearray(gzip.decompress(bytes(data)))
        raw[-1] = (raw[-1] + 1) % 10
        data = gzip.compress(bytes(raw))
    mirror = small_mirror(tmp_path, bytes(data))
    expected = download.remote_file("mnist", SMALL).sha256
    with pytest.raises(DatasetError) as info:
        download.fetch("mnist", SMALL, mirror=mirror)
    msg = str(info.value)
    assert SMALL in msg and expected in msg and str(mirror / "mnist" / SMALL) in msg
    assert offline == []  # a corrupt mirror copy is an error, not a reason to download


@needs_mirror
def test_load_mnist_with_corrupt_file(tmp_path):
    folder = tmp_path / "mirror" / "mnist"
    folder.mkdir(parents=True)
    for src in (MIRROR / "mnist").glob("*.gz"):
        (folder / src.name).symlink_to(src)
    bad = folder / "t10k-images-idx3-ubyte.gz"
    bad.unlink()
    bad.write_bytes((MIRROR / "mnist" / bad.name).read_bytes()[:5000])  # truncated
    with pytest.raises(DatasetError, match="t10k-images-idx3-ubyte.gz") as info:
        load_mnist(mirror=folder.parent)
    assert download.remote_file("mnist", bad.name).sha256 in str(info.value)


def test_missing_file_no_network(tmp_path, offline):
    mirror = tmp_path / "empty_mirror"
    cache = tmp_path / "cache"
    entry = download.remote_file("mnist", SMALL)
    with pytest.raises(DatasetError) as info:
        download.fetch("mnist", SMALL, mirror=mirror, cache_dir=cache)
    msg = str(info.value)
    assert SMALL in msg and entry.sha256 in msg
    assert str(mirror / "mnist" / SMALL) in msg and download.MIRROR_ENV in msg
    assert offline == list(entry.urls) and offline[0] == "http://yann.lecun.com/exdb/mnist/" + SMALL
    assert files_under(cache) == [] and files_under(mirror) == []


def test_missing_file_message_without_mirror():
    with pytest.raises(DatasetError, match=download.MIRROR_ENV):
        download.fetch("mnist", SMALL)


@pytest.mark.parametrize("payload", [b"partial data", None])
def test_failed_or_wrong_download_leaves_nothing(tmp_path, monkeypatch, payload):
    cache = tmp_path / "cache"

    def broken(url, dest):
        if payload is None:  # a complete download of the wrong content
            Path(dest).write_bytes(gzip.compress(b"not mnist"))
            return
        Path(dest).write_bytes(payload)
        raise ConnectionError("connection reset")

    monkeypatch.setattr(download, "_download", broken)
    with pytest.raises(DatasetError, match=download.remote_file("mnist", SMALL).sha256):
        download.fetch("mnist", SMALL, cache_dir=cache)
    assert files_under(cache) == []


@needs_mirror
def test_download_is_verified_and_cached(tmp_path, monkeypatch):
    calls = []

    def fake(url, dest):
        calls.append(url)
        shutil.copy(MIRROR / "mnist" / SMALL, dest)

    monkeypatch.setattr(download, "_download", fake)
    cache = tmp_path / "cache"
    path = download.fetch("mnist", SMALL, cache_dir=cache)
    assert path == cache / "mnist" / SMALL and len(calls) == 1
    assert download.fetch("mnist", SMALL, cache_dir=cache) == path and len(calls) == 1
    assert files_under(cache) == [path]


def test_unknown_file():
    with pytest.raises(DatasetError, match="unknown data file"):
        download.fetch("mnist", "nope.gz")


def test_read_idx_rejects_bad_files(tmp_path):
    good = b"\x00\x00\x08\x01" + (3).to_bytes(4, "big") + bytes([1, 2, 3])
    (tmp_path / "ok-idx1-ubyte").write_bytes(good)
    assert read_idx(tmp_path / "ok-idx1-ubyte", 2049).tolist() == [1, 2, 3]
    cases = {
        "magic-idx1-ubyte": b"\x00\x00\x08\x03" + good[4:],  # 2051 where 2049 is expected
        "short-idx1-ubyte": good[:-1],
        "tiny-idx1-ubyte": b"\x00\x00",
        "notgz-idx1-ubyte.gz": good,
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(DatasetError, match=name):
            read_idx(tmp_path / name, 2049)


# --------------------------------------------------------------------------- binarize


def test_binarize_deterministic_per_seed():
    x = np.random.default_rng(1).random((300, 50))
    a, b, c = binarize(x, seed=3), binarize(x, seed=3), binarize(x, seed=4)
    assert a.dtype == np.uint8 and set(np.unique(a)) <= {0, 1}
    np.testing.assert_array_equal(a, b)
    assert (a != c).any()
    np.testing.assert_array_equal(binarize(x[:10], seed=3), a[:10])  # prefix property
    assert abs(a.mean() - x.mean()) < 0.02


def test_binarize_threshold_and_errors():
    x = np.array([[0.0, 0.5, 0.51, 1.0]])
    assert binarize(x, "threshold").tolist() == [[0, 0, 1, 1]]
    assert binarize(x, "threshold", threshold=0.2).tolist() == [[0, 1, 1, 1]]
    assert binarize(np.zeros((0, 4))).shape == (0, 4)
    for bad in (np.array([[np.nan]]), np.array([[1.5]]), np.array([[-0.1]])):
        with pytest.raises(ValueError):
            binarize(bad)
    with pytest.raises(ValueError, match="unknown binarization"):
        binarize(x, "median")


# --------------------------------------------------------------------------- prepared files


@needs_mirror
def test_prepare_mnist_small(tmp_path, mnist):
    out = prepare_dataset("mnist", tmp_path / "m.npz", mirror=MIRROR, n_train=100, n_test=50, n_valid=20, seed=7)
    with np.load(out, allow_pickle=False) as z:
        assert z["train"].shape == (100, 784) and z["train"].dtype == np.uint8
        assert z["test"].shape == (50, 784) and z["valid"].shape == (20, 784)
        np.testing.assert_array_equal(z["train_labels"], mnist["train_labels"][:100])
        np.testing.assert_array_equal(z["valid_labels"], mnist["train_labels"][-20:])
        np.testing.assert_array_equal(z["test_labels"], mnist["test_labels"][:50])
        assert z["image_shape"].tolist() == [28, 28]
        train = z["train"]
    meta = load_meta(out)
    assert meta["dataset"] == "mnist" and meta["seed"] == 7 and meta["binarize"] == "stochastic"
    assert meta["sizes"] == {"train": 100, "test": 50, "valid": 20}
    assert meta["sources"]["train-images-idx3-ubyte.gz"]["sha256"].startswith("ba891046")
    assert load_prepared(out, "valid").shape == (20, 784)
    smaller = prepare_dataset("mnist", tmp_path / "s.npz", mirror=MIRROR, n_train=30, n_test=5, seed=7)
    np.testing.assert_array_equal(load_prepared(smaller, "train"), train[:30])  # same bits per row
    with pytest.raises(DatasetError, match="n_train"):
        prepare_dataset("mnist", tmp_path / "x.npz", mirror=MIRROR, n_train=59990, n_valid=20)


def test_prepare_digits_without_mirror(tmp_path, monkeypatch, offline):
    monkeypatch.setenv(download.MIRROR_ENV, str(tmp_path / "no_such_mirror"))
    out = prepare_dataset("digits", tmp_path / "d.npz", seed=1)
    again = prepare_dataset("digits", tmp_path / "d2.npz", seed=1)
    other = prepare_dataset("digits", tmp_path / "d3.npz", seed=2)
    train, test = load_prepared(out, "train"), load_prepared(out, "test")
    assert train.shape == (1437, 64) and test.shape == (360, 64)
    np.testing.assert_array_equal(train, load_prepared(again, "train"))
    assert (train != load_prepared(other, "train")).any()
    with np.load(out) as z:
        assert z["image_shape"].tolist() == [8, 8] and "valid" not in z.files
        assert np.bincount(z["test_labels"], minlength=10).min() >= 35  # stratified
    assert json.loads(str(np.load(out)["meta"]))["split"].startswith("sklearn train_test_split")
    assert offline == [] and "digits" in DATASETS


def test_prepare_failure_leaves_nothing(tmp_path, monkeypatch):
    out = tmp_path / "out" / "d.npz"
    prepare_dataset("digits", out, n_train=10, n_test=10)
    before = out.read_bytes()

    def crash(fh, **arrays):
        fh.write(b"PK half an archive")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez_compressed", crash)
    with pytest.raises(OSError, match="disk full"):
        prepare_dataset("digits", out, n_train=20, n_test=10)
    with pytest.raises(OSError):
        prepare_dataset("digits", tmp_path / "out" / "new.npz")
    assert files_under(tmp_path / "out") == [out] and out.read_bytes() == before


def test_prepare_rejects_bad_arguments(tmp_path):
    with pytest.raises(DatasetError, match="unknown dataset"):
        prepare_dataset("cifar", tmp_path / "x.npz")
    with pytest.raises(DatasetError, match="unknown binarization"):
        prepare_dataset("digits", tmp_path / "x.npz", binarize="median")
    with pytest.raises(DatasetError, match="n_valid"):
        prepare_dataset("digits", tmp_path / "x.npz", n_valid=5000)
    assert files_under(tmp_path) == []


def test_load_prepared_errors(tmp_path):
    out = prepare_dataset("digits", tmp_path / "d.npz", n_train=10, n_test=10)
    with pytest.raises(DatasetError, match="no split 'valid'"):
        load_prepared(out, "valid")
    with pytest.raises(DatasetError, match="does not exist"):
        load_prepared(tmp_path / "missing.npz")
    np.savez(tmp_path / "plain.npz", test=np.zeros((2, 3)))
    with pytest.raises(DatasetError, match="not a prepared dataset"):
        load_prepared(tmp_path / "plain.npz")
    np.savez(tmp_path / "bad.npz", test=np.full((2, 3), 2), meta=np.asarray("{}"))
    with pytest.raises(DatasetError, match="not binary"):
        load_prepared(tmp_path / "bad.npz")


def test_load_binary_rows(tmp_path):
    rows = (np.random.default_rng(0).random((5, 4)) < 0.5).astype(np.float32)
    np.save(tmp_path / "rows.npy", rows)
    got = load_binary_rows(tmp_path / "rows.npy", n_features=4)
    assert got.dtype == np.uint8 and got.tolist() == rows.tolist()
    np.savez(tmp_path / "single.npz", anything=rows.astype(bool))
    assert load_binary_rows(tmp_path / "single.npz").shape == (5, 4)
    out = prepare_dataset("digits", tmp_path / "d.npz", n_train=10, n_test=7)
    assert load_binary_rows(out).shape == (7, 64) and load_binary_rows(out, "train").shape == (10, 64)

    bad = {
        "half.npy": (np.full((2, 3), 0.5), "not binary"),
        "nan.npy": (np.array([[0.0, np.nan]]), "NaN"),
        "flat.npy": (np.array([0, 1, 1]), "2-D"),
        "cube.npy": (np.zeros((2, 2, 2)), "2-D"),
        "empty.npy": (np.zeros((0, 3)), "2-D"),
        "text.npy": (np.array([["0", "1"]]), "dtype"),
    }
    for name, (arr, why) in bad.items():
        np.save(tmp_path / name, arr)
        with pytest.raises(DatasetError, match=why) as info:
            load_binary_rows(tmp_path / name)
        assert name in str(info.value)
    with pytest.raises(DatasetError, match="columns"):
        load_binary_rows(tmp_path / "rows.npy", n_features=5)
    np.savez(tmp_path / "two.npz", a=rows, b=rows)
    with pytest.raises(DatasetError, match="two.npz"):
        load_binary_rows(tmp_path / "two.npz")
    (tmp_path / "junk.npy").write_bytes(b"junk")
    with pytest.raises(DatasetError, match="junk.npy"):
        load_binary_rows(tmp_path / "junk.npy")
    np.save(tmp_path / "obj.npy", np.array([[0, 1]], dtype=object), allow_pickle=True)
    with pytest.raises(DatasetError, match="obj.npy"):
        load_binary_rows(tmp_path / "obj.npy")
    with pytest.raises(DatasetError, match="missing.npy"):
        load_binary_rows(tmp_path / "missing.npy")


def test_class_subset_takes_per_class_rows_of_each_label(tmp_path):
    from logzbench.data import class_subset, load_labels

    labels = np.random.default_rng(0).permutation(np.repeat(np.arange(4), [7, 5, 9, 6]))
    idx = class_subset(labels, 5, seed=0)
    assert idx.dtype == np.int64 and list(idx) == sorted(set(idx.tolist()))  # distinct, in the original order
    assert np.bincount(labels[idx]).tolist() == [5, 5, 5, 5]
    assert np.array_equal(class_subset(labels, 5, seed=0), idx)  # reproducible
    assert not np.array_equal(class_subset(labels, 3, seed=1), class_subset(labels, 3, seed=0))
    assert set(np.flatnonzero(labels == 1)) <= set(idx.tolist())  # a class of exactly per_class rows: all of them
    with pytest.raises(DatasetError, match=r"class 1 has 5 test rows, fewer than test_subset per_class = 6"):
        class_subset(labels, 6, seed=0)
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="per_class must be an integer >= 1"):
            class_subset(labels, bad, seed=0)
    np.savez(tmp_path / "unlabelled.npz", train=np.zeros((3, 2)), test=np.zeros((3, 2)))
    assert load_labels(tmp_path / "unlabelled.npz") is None
    with pytest.raises(
        DatasetError,
        match=r"unlabelled\.npz has no test_labels: test_subset .* needs a dataset "
        r"with labels",
    ):
        class_subset(load_labels(tmp_path / "unlabelled.npz"), 2, seed=0, source=tmp_path / "unlabelled.npz")
    np.savez(tmp_path / "labelled.npz", test=np.zeros((len(labels), 2)), test_labels=labels)
    assert np.array_equal(load_labels(tmp_path / "labelled.npz", "test"), labels)
