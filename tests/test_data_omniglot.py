"""Omniglot: verified fetch, exact 105->28 area downsampling, fixed random split, prepared file.

Uses the offline mirror at ``../shared/data/omniglot`` (relative to the repository root) and
is skipped without it.  The network is never used: ``_download`` is replaced in every test.
The reference downsampling here is written independently of the module (4x pixel
replication to 420x420, then the mean of 15x15 blocks).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest

from logzbench.data import DATASETS, download, load_meta, load_prepared, omniglot, prepare_dataset
from logzbench.data.binarize import binarize
from logzbench.data.omniglot import _read_npz, load_omniglot
from logzbench.errors import DatasetError

MIRROR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
FILES = {  # sha256 from ../shared/data/omniglot/PROVENANCE.md (= the source repository's .sha256 files)
    "images_background.npz": "8bf84167413cd00beacdce3fe582f780ab538d8dbef043a6d688f2527bbce199",
    "images_evaluation.npz": "0b84c7ffd94c4841c0040e529c86a82eaaccb986d8eadad5673f7991b7475276",
}
COMMIT = "b0481240b7eb42393285a93ce7d2f266ff10c62b"
N_TRAIN, N_TEST, N_BACKGROUND, N_CHAR = 24345, 8070, 964, 1623
needs_mirror = pytest.mark.skipif(
    not all((MIRROR / "omniglot" / f).is_file() for f in FILES),
    reason=f"Omniglot files not found in the offline mirror {MIRROR / 'omniglot'}",
)


pytestmark = pytest.mark.usefixtures("offline")  # conftest: no network, empty cache, no mirror


@pytest.fixture(scope="module")
def prepared_run(tmp_path_factory):
    """The full prepared file from the mirror, and the grey-level dict its loader returned (one load)."""
    if not all((MIRROR / "omniglot" / f).is_file() for f in FILES):
        pytest.skip("Omniglot mirror missing")
    captured = {}
    real = omniglot.load_omniglot

    def spy(*args, **kwargs):
        captured.update(real(*args, **kwargs))
        return captured

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(omniglot, "load_omniglot", spy)
        out = prepare_dataset("omniglot", tmp_path_factory.mktemp("omniglot") / "omni.npz", mirror=MIRROR, seed=0)
    assert captured, "prepare_dataset did not go through load_omniglot"
    return out, captured


@pytest.fixture(scope="module")
def raw():
    """Source drawings as (1623, 20, 105, 105) bool, ink = True, global character order."""
    if not all((MIRROR / "omniglot" / f).is_file() for f in FILES):
        pytest.skip("Omniglot mirror missing")
    parts = []
    for fname in FILES:
        with np.load(MIRROR / "omniglot" / fname, allow_pickle=False) as z:
            parts.append(~z["images"])
    return np.concatenate(parts)


def reference_downsample(ink: np.ndarray) -> np.ndarray:
    """Area average by replication: each source pixel -> 4x4 subpixels, each output pixel = 15x15 subpixels."""
    up = ink.repeat(4, axis=-2).repeat(4, axis=-1)  # (..., 420, 420) bool
    counts = up.reshape(*ink.shape[:-2], 28, 15, 28, 15).sum(axis=(-3, -1))
    return counts.reshape(*ink.shape[:-2], 784) / 225.0


def digests(rows: np.ndarray) -> list[str]:
    """Content hash of each grey-level row (values k / 225)."""
    return [hashlib.sha1(np.rint(r * 225).astype(np.uint8).tobytes()).hexdigest() for r in rows]


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def copy_mirror(tmp_path: Path) -> Path:
    folder = tmp_path / "mirror" / "omniglot"
    folder.mkdir(parents=True)
    for fname in FILES:
        shutil.copy(MIRROR / "omniglot" / fname, folder / fname)
    return folder.parent


# --------------------------------------------------------------------------- the full prepared set
# Everything that needs the full 32,415 images is in this one test, so that the (few-second)
# preparation runs once even when pytest-xdist spreads the other tests over workers.


@needs_mirror
def test_prepare_omniglot_full(prepared_run, offline):
    prepared, loaded = prepared_run
    assert "omniglot" in DATASETS
    with np.load(prepared, allow_pickle=False) as z:
        assert z["train"].shape == (N_TRAIN, 784) and z["test"].shape == (N_TEST, 784)
        assert z["train"].dtype == np.uint8 and "valid" not in z.files
        assert z["image_shape"].tolist() == [28, 28]
        train, test = z["train"], z["test"]
        y_train, y_test = z["train_labels"], z["test_labels"]
    assert set(np.unique(train)) == {0, 1} and set(np.unique(test)) == {0, 1}
    np.testing.assert_array_equal(load_prepared(prepared, "test"), test)

    # labels: global character index 0..1622, each character at most its 20 drawings
    assert y_train.dtype == np.int64 and y_train.min() == 0 and y_train.max() == N_CHAR - 1
    assert 0 <= y_test.min() and y_test.max() <= N_CHAR - 1
    counts = np.bincount(np.concatenate([y_train, y_test]), minlength=N_CHAR)
    assert len(counts) == N_CHAR and counts.max() <= 20 and counts.sum() == N_TRAIN + N_TEST
    assert (counts >= 18).all()  # only 45 of the 32,460 drawings are left out

    # the rows are the loader's grey levels, binarized with the per-split streams of seed 0
    np.testing.assert_array_equal(y_train, loaded["train_labels"])
    np.testing.assert_array_equal(y_test, loaded["test_labels"])
    np.testing.assert_array_equal(train, binarize(loaded["train_images"], seed=[0, 0]))
    np.testing.assert_array_equal(test, binarize(loaded["test_images"], seed=[0, 1]))
    assert abs(train.mean() - loaded["train_images"].mean()) < 0.002

    # split: the documented permutation; no (character, drawer) in both splits
    idx_tr, idx_te = loaded["train_index"], loaded["test_index"]
    used = np.concatenate([idx_tr, idx_te])
    np.testing.assert_array_equal(used, np.random.default_rng(0).permutation(32460)[: N_TRAIN + N_TEST])
    assert len(np.unique(used)) == N_TRAIN + N_TEST and np.intersect1d(idx_tr, idx_te).size == 0
    np.testing.assert_array_equal(y_train, idx_tr // 20)
    np.testing.assert_array_equal(y_test, idx_te // 20)
    # same split seed, independent load: identical arrays (n_train/n_test cut the same permutation)
    again = load_omniglot(mirror=str(MIRROR), n_train=1000, n_test=200, split_seed=0)
    for key in ("images", "labels", "index"):
        np.testing.assert_array_equal(again[f"train_{key}"], loaded[f"train_{key}"][:1000])
        np.testing.assert_array_equal(again[f"test_{key}"], loaded[f"train_{key}"][1000:1200])
    # by content: the grey images are distinct up to the one drawing duplicated in the source
    # (characters 191, drawers 2 and 18; see test_split_is_traceable_and_seeded)
    train_hashes = set(digests(loaded["train_images"]))
    assert len(train_hashes) >= N_TRAIN - 1
    assert sum(h in train_hashes for h in digests(loaded["test_images"])) <= 1

    meta = load_meta(prepared)
    assert meta["dataset"] == "omniglot" and meta["sizes"] == {"train": N_TRAIN, "test": N_TEST}
    assert meta["image_shape"] == [28, 28] and meta["n_features"] == 784
    assert {f: s["sha256"] for f, s in meta["sources"].items()} == FILES
    assert all(COMMIT in s["url"] for s in meta["sources"].values())
    assert "default_rng(0)" in meta["split"] and "45" in meta["split"] and "964..1622" in meta["split"]
    assert offline == []

    # plausible 28x28 characters: ink fraction, grey stroke edges, ink in the centre
    x = np.concatenate([loaded["train_images"], loaded["test_images"]])
    assert x.dtype == np.float64 and x.min() == 0.0 and x.max() == 1.0
    ink = x.mean()
    assert 0.07 < ink < 0.09  # measured 0.0805 (the 105x105 sources: 7.8% / 8.4% ink)
    per_image = x.mean(axis=1)
    assert per_image.min() > 0 and per_image.max() < 0.3  # every drawing has ink; none is mostly ink
    assert (x[x > 0] < 1).mean() > 0.5  # area averaging gives grey levels (measured 0.875)
    images = x.reshape(-1, 28, 28)
    mean_image = images.mean(axis=0)
    ring = np.ones((28, 28), bool)
    ring[3:-3, 3:-3] = False
    assert mean_image[ring].mean() < 0.1 * ink  # little ink near the border (measured 0.05 x)
    assert mean_image[7:21, 7:21].mean() > 2 * ink  # strokes concentrated in the centre (2.7 x)
    central_share = images[:, 7:21, 7:21].sum(axis=(1, 2)) / images.sum(axis=(1, 2))
    assert central_share.mean() > 0.6  # the central quarter holds ~71% of a drawing's ink


# --------------------------------------------------------------------------- split (small loads)


@needs_mirror
def test_split_is_traceable_and_seeded(raw):
    got = load_omniglot(mirror=MIRROR, n_train=2000, n_test=1000, split_seed=1)
    perm = np.random.default_rng(1).permutation(32460)
    np.testing.assert_array_equal(got["train_index"], perm[:2000])
    np.testing.assert_array_equal(got["test_index"], perm[2000:3000])
    for split in ("train", "test"):
        idx = got[f"{split}_index"]
        np.testing.assert_array_equal(got[f"{split}_labels"], idx // 20)
        # each row is the exact area average of drawing (label, drawer); label >= 964 <=> evaluation file
        rows = np.arange(0, len(idx), 5)  # every 5th row: 400 + 200 drawings
        ref = reference_downsample(raw[idx[rows] // 20, idx[rows] % 20])
        np.testing.assert_allclose(got[f"{split}_images"][rows], ref, rtol=0, atol=1e-12)
        assert (got[f"{split}_labels"] >= N_BACKGROUND).any() and (got[f"{split}_labels"] < N_BACKGROUND).any()
    # another seed, another split (split_seed=0 is checked in test_prepare_omniglot_full)
    seed0 = np.random.default_rng(0).permutation(32460)
    assert np.intersect1d(got["train_index"], seed0[:2000]).size < 400  # ~2000 * 2000 / 32460
    # the only identical drawings in the source (why content hashes may coincide once)
    hashes = {}
    for k, img in enumerate(raw.reshape(-1, 105 * 105)):
        hashes.setdefault(hashlib.sha1(np.packbits(img).tobytes()).hexdigest(), []).append(k)
    assert [v for v in hashes.values() if len(v) > 1] == [[191 * 20 + 2, 191 * 20 + 18]]


def test_split_sizes_validated(offline):
    with pytest.raises(DatasetError, match="32460"):
        load_omniglot(n_train=30000, n_test=2461)
    with pytest.raises(DatasetError, match="n_train=0"):
        load_omniglot(n_train=0)
    assert offline == []  # rejected before any file is looked up


# --------------------------------------------------------------------------- bad sources, download


@needs_mirror
@pytest.mark.parametrize("fname", list(FILES))
def test_corrupt_mirror_file(tmp_path, fname, offline):
    mirror = copy_mirror(tmp_path)
    bad = mirror / "omniglot" / fname
    data = bytearray(bad.read_bytes())
    for i in range(5000, 5010):
        data[i] ^= 0xFF
    bad.write_bytes(bytes(data))
    out = tmp_path / "out" / "omni.npz"
    with pytest.raises(DatasetError) as info:
        prepare_dataset("omniglot", out, mirror=mirror, cache_dir=tmp_path / "cache")
    msg = str(info.value)
    assert str(bad) in msg and FILES[fname] in msg and "corrupt" in msg
    assert files_under(tmp_path / "out") == [] and files_under(tmp_path / "cache") == []
    assert offline == []  # a corrupt mirror copy is an error, not a reason to download


@needs_mirror
def test_missing_file_without_network(tmp_path, offline):
    mirror = copy_mirror(tmp_path)
    (mirror / "omniglot" / "images_evaluation.npz").unlink()
    with pytest.raises(DatasetError, match="omniglot/images_evaluation.npz") as info:
        prepare_dataset("omniglot", tmp_path / "o.npz", mirror=mirror, cache_dir=tmp_path / "cache")
    assert FILES["images_evaluation.npz"] in str(info.value)
    assert offline == [
        f"https://github.com/bitsandscraps/omniglot/raw/{COMMIT}/images_evaluation.npz",
        f"https://raw.githubusercontent.com/bitsandscraps/omniglot/{COMMIT}/images_evaluation.npz",
    ]
    assert not (tmp_path / "o.npz").exists() and files_under(tmp_path / "cache") == []


def test_unreadable_source_contents(tmp_path):
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04 not really a zip")
    np.savez(tmp_path / "keys.npz", pictures=np.zeros((2, 20, 105, 105), bool), labels=np.zeros((2, 20)))
    np.savez(tmp_path / "shape.npz", images=np.zeros((2, 20, 28, 28), bool), labels=np.zeros((2, 20), int))
    np.savez(tmp_path / "labels.npz", images=np.zeros((2, 20, 105, 105), bool), labels=np.zeros((2, 20), int))
    for name, why in (
        ("junk.npz", "cannot read"),
        ("keys.npz", "lacks"),
        ("shape.npz", "expected bool"),
        ("labels.npz", "not the character index"),
    ):
        with pytest.raises(DatasetError, match=why) as info:
            _read_npz(tmp_path / name, 2)
        assert name in str(info.value)


@needs_mirror
def test_download_into_cache(tmp_path, monkeypatch):
    calls = []

    def fake(url, dest):  # the first (canonical) URL fails for one file: the fallback is used
        calls.append(url)
        name = url.rsplit("/", 1)[1]
        if name == "images_evaluation.npz" and url.startswith("https://github.com/"):
            raise ConnectionError("connection reset")
        shutil.copy(MIRROR / "omniglot" / name, dest)

    monkeypatch.setattr(download, "_download", fake)
    cache = tmp_path / "cache"
    got = load_omniglot(mirror=tmp_path / "empty_mirror", cache_dir=cache, n_train=300, n_test=100)
    assert calls == [
        f"https://github.com/bitsandscraps/omniglot/raw/{COMMIT}/images_background.npz",
        f"https://github.com/bitsandscraps/omniglot/raw/{COMMIT}/images_evaluation.npz",
        f"https://raw.githubusercontent.com/bitsandscraps/omniglot/{COMMIT}/images_evaluation.npz",
    ]
    assert sorted(files_under(cache)) == sorted(cache / "omniglot" / f for f in FILES)
    for fname in FILES:
        assert (cache / "omniglot" / fname).read_bytes() == (MIRROR / "omniglot" / fname).read_bytes()
    assert got["train_images"].shape == (300, 784) and got["test_images"].shape == (100, 784)
    np.testing.assert_array_equal(got["test_index"], np.random.default_rng(0).permutation(32460)[300:400])
    for fname in FILES:  # now served from the cache
        assert download.fetch("omniglot", fname, cache_dir=cache) == cache / "omniglot" / fname
    assert len(calls) == 3
