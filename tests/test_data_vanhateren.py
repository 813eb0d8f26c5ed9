"""van Hateren patches: verified .iml files, image-disjoint split, log / PCA / whitening, prepared file.

Uses the offline mirror at ``../shared/data/vanhateren`` (relative to the repository root) and
is skipped without it.  The network is never used: ``_download`` is replaced in every test.
Expected sha256 values are read from the mirror's ``MANIFEST.tsv``, and the images are read
back independently with ``numpy.fromfile`` (big-endian uint16), not with the module.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from logzbench.data import download, vanhateren
from logzbench.data.patches import transform_patches
from logzbench.data.vanhateren import (
    VANHATEREN_IMAGES,
    load_images,
    load_patches,
    load_patches_meta,
    load_whitening,
    prepare_vanhateren,
    read_iml,
    save_prepared_patches,
)
from logzbench.errors import DatasetError

MIRROR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
FOLDER = MIRROR / "vanhateren"
COMMIT = "08eb7a0a138350e5e1dbedc67b1bbd48d76f289d"
SMALL = {"n_images": 6, "n_test_images": 2, "n_train": 2000, "n_test": 50, "n_components": 8}
needs_mirror = pytest.mark.skipif(
    not all((FOLDER / n).is_file() for n in VANHATEREN_IMAGES),
    reason=f"van Hateren images not found in the offline mirror {FOLDER}",
)
pytestmark = [pytest.mark.usefixtures("offline"), needs_mirror]  # conftest: no network, empty cache, no mirror


def manifest_sha256() -> dict[str, str]:
    with open(MIRROR / "MANIFEST.tsv", newline="") as fh:
        rows = csv.DictReader(fh, delimiter="\t")
        return {Path(r["file"]).name: r["sha256"] for r in rows if r["dataset"] == "vanhateren"}


def raw_image(name: str) -> np.ndarray:
    """Independent reader: 1024 rows x 1536 columns of big-endian uint16."""
    return np.fromfile(FOLDER / name, dtype=">u2").reshape(1024, 1536)


@pytest.fixture(scope="module")
def small():
    """One small preparation from the mirror (network disabled)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(download, "_download", lambda url, dest: (_ for _ in ()).throw(OSError("network disabled")))
        return prepare_vanhateren(**SMALL, seed=0, mirror=MIRROR)


@pytest.fixture(scope="module")
def saved(small, tmp_path_factory):
    return save_prepared_patches(tmp_path_factory.mktemp("vh") / "patches.npz", small)


# --------------------------------------------------------------------------- files


def test_registry_matches_manifest():
    expected = manifest_sha256()
    assert sorted(expected) == sorted(VANHATEREN_IMAGES) and len(set(VANHATEREN_IMAGES)) == 20
    for name in VANHATEREN_IMAGES:
        entry = download.remote_file("vanhateren", name)
        assert entry.sha256 == expected[name] and not entry.gzipped
        assert all(COMMIT in u and u.endswith("/VHsubsample_20160105/" + name) for u in entry.urls)
        assert entry.urls[0].startswith("https://github.com/Rieke-Lab/turner-package/raw/")
        assert "%2Bedu/%2Bwashington/%2Briekelab/%2Bturner/%2Brescource/" in entry.urls[0]


def test_read_iml_shape_values_and_truncation(tmp_path):
    name = VANHATEREN_IMAGES[0]
    img = read_iml(FOLDER / name)
    assert img.shape == (1024, 1536) and img.dtype == np.float64
    assert (img > 0).all() and np.isfinite(img).all()
    np.testing.assert_array_equal(img, raw_image(name).astype(np.float64))
    assert img.max() < 65536 and img.std() > 0

    short = tmp_path / "short.iml"
    short.write_bytes((FOLDER / name).read_bytes()[:-2])
    with pytest.raises(DatasetError, match=r"short\.iml.*3145726 bytes"):
        read_iml(short)
    with pytest.raises(DatasetError, match="missing.iml"):
        read_iml(tmp_path / "missing.iml")


def test_fetch_verifies_and_refuses_corrupt_copy(tmp_path, offline):
    name = VANHATEREN_IMAGES[3]
    assert download.fetch("vanhateren", name, mirror=MIRROR) == FOLDER / name
    images = load_images(2, mirror=MIRROR)
    assert len(images) == 2
    for img, n in zip(images, VANHATEREN_IMAGES[:2]):
        np.testing.assert_array_equal(img, raw_image(n))

    bad_mirror = tmp_path / "mirror"
    (bad_mirror / "vanhateren").mkdir(parents=True)
    data = bytearray((FOLDER / name).read_bytes())
    data[12345] ^= 0xFF  # one changed pixel byte, same size
    (bad_mirror / "vanhateren" / name).write_bytes(bytes(data))
    with pytest.raises(DatasetError, match=rf"{name} is corrupt.*expected sha256 {manifest_sha256()[name]}"):
        download.fetch("vanhateren", name, mirror=bad_mirror)
    # absent everywhere: the registered URLs are tried (and fail offline), nothing is left in the cache
    with pytest.raises(DatasetError, match="not available offline"):
        vanhateren.image_path(VANHATEREN_IMAGES[5], mirror=bad_mirror)
    assert offline == list(download.remote_file("vanhateren", VANHATEREN_IMAGES[5]).urls)
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))


# --------------------------------------------------------------------------- preparation


def test_prepare_shapes_split_and_patches(small):
    p, m = 16, SMALL["n_components"]
    assert small["train"].shape == (SMALL["n_train"], m) and small["test"].shape == (SMALL["n_test"], m)
    assert small["train"].dtype == np.float64 and small["test"].dtype == np.float64
    assert small["pca_components"].shape == (m, p * p) and small["pca_mean"].shape == (p * p,)
    assert small["whitening_scale"].shape == (m,) and small["explained_variance"].shape == (m,)
    for key in ("n_images", "n_test_images", "n_train", "n_test", "n_components"):
        assert small[key] == SMALL[key]
    assert small["patch_size"] == p and small["seed"] == 0 and small["remove_dc"] is False

    # image split: disjoint, covering the first n_images, sizes as asked
    train_im, test_im = set(small["train_images"]), set(small["test_images"])
    assert len(test_im) == 2 and len(train_im) == 4 and not train_im & test_im
    assert train_im | test_im == set(VANHATEREN_IMAGES[:6])
    # every patch comes from an image of its own split; both splits sample several images
    for split, allowed in (("train", train_im), ("test", test_im)):
        loc = small[f"{split}_locations"]
        used = {VANHATEREN_IMAGES[i] for i in loc[:, 0]}
        assert used <= allowed and len(used) == len(allowed)
        assert loc[:, 1].min() >= 0 and loc[:, 1].max() <= 1024 - p and loc[:, 2].max() <= 1536 - p
    # the raw patches are the image pixels at the recorded locations (independent reader)
    for split in ("train", "test"):
        loc, raw = small[f"{split}_locations"], small[f"{split}_raw"]
        for k in (0, 1, len(loc) - 1):
            i, r, c = loc[k]
            np.testing.assert_array_equal(raw[k], raw_image(VANHATEREN_IMAGES[i])[r : r + p, c : c + p])
    assert small["sources"][VANHATEREN_IMAGES[0]]["sha256"] == manifest_sha256()[VANHATEREN_IMAGES[0]]


def test_whitening_properties(small):
    x, m = small["train"], SMALL["n_components"]
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(np.cov(x, rowvar=False), np.eye(m), atol=1e-10)  # unit variance, uncorrelated
    # PCA of the log training patches, checked against an eigendecomposition of their covariance
    logs = np.log(small["train_raw"].reshape(len(x), -1))
    np.testing.assert_allclose(small["pca_mean"], logs.mean(axis=0), rtol=1e-12)
    evals, evecs = np.linalg.eigh(np.cov(logs, rowvar=False))
    np.testing.assert_allclose(small["explained_variance"], evals[::-1][:m], rtol=1e-8)
    np.testing.assert_allclose(small["whitening_scale"] ** 2, small["explained_variance"], rtol=1e-12)
    comp = small["pca_components"]
    np.testing.assert_allclose(comp @ comp.T, np.eye(m), atol=1e-10)
    np.testing.assert_allclose(np.abs(comp @ evecs[:, ::-1][:, :m]), np.eye(m), atol=1e-6)
    assert np.all(np.diff(small["explained_variance"]) <= 0)
    # the test set uses the training whitening: finite, not re-standardized to exactly 0 / 1
    t = small["test"]
    assert np.isfinite(t).all() and not np.allclose(t.mean(axis=0), 0.0, atol=1e-6)
    # one implementation: transform_patches on the raw patches gives both splits
    for split in ("train", "test"):
        np.testing.assert_array_equal(transform_patches(small[f"{split}_raw"], small), small[split])


def test_seeds_and_independent_streams(small):
    again = prepare_vanhateren(**SMALL, seed=0, mirror=MIRROR)
    for key in ("train", "test", "train_locations", "test_locations", "pca_components", "whitening_scale"):
        np.testing.assert_array_equal(again[key], small[key])
    assert again["train_images"] == small["train_images"] and again["test_images"] == small["test_images"]

    other = prepare_vanhateren(**SMALL, seed=1, mirror=MIRROR)
    assert not np.array_equal(other["train_locations"], small["train_locations"])
    assert not np.array_equal(other["test_locations"], small["test_locations"])
    assert other["train"].shape == small["train"].shape and not np.allclose(other["train"], small["train"])

    # the test patches do not depend on n_train (separate stream)
    fewer = prepare_vanhateren(**{**SMALL, "n_train": 500}, seed=0, mirror=MIRROR)
    np.testing.assert_array_equal(fewer["test_locations"], small["test_locations"])
    np.testing.assert_array_equal(fewer["train_locations"], small["train_locations"][:500])


def test_remove_dc_option_is_gain_invariant(small):
    raw = small["test_raw"][:10]
    pixel_mean = small  # default: the per-pixel training mean only
    assert not np.allclose(transform_patches(2.0 * raw, pixel_mean), transform_patches(raw, pixel_mean))
    dc = prepare_vanhateren(**SMALL, seed=0, remove_dc=True, mirror=MIRROR)
    np.testing.assert_allclose(np.cov(dc["train"], rowvar=False), np.eye(SMALL["n_components"]), atol=1e-10)
    np.testing.assert_allclose(transform_patches(3.0 * raw, dc), transform_patches(raw, dc), atol=1e-10)
    # the DC direction is gone: every component is orthogonal to the constant patch
    np.testing.assert_allclose(dc["pca_components"].sum(axis=1), 0.0, atol=1e-8)


@pytest.mark.parametrize(
    "bad",
    [
        {"n_test_images": 6},  # == n_images
        {"n_test_images": 7},
        {"n_test_images": 0},
        {"n_images": 21},
        {"n_images": 1, "n_test_images": 1},
        {"n_components": 257},
        {"n_components": 0},
        {"n_components": 256, "remove_dc": True},
        {"n_train": 8},  # not above n_components
        {"n_test": 0},
        {"patch_size": 0},
        {"patch_size": 1025},
        {"patch_size": 4.0},
        {"seed": -1},
        {"n_train": True},
        {"remove_dc": "yes"},
    ],
)
def test_bad_settings(bad):
    with pytest.raises(ValueError):
        prepare_vanhateren(**{**SMALL, **bad}, mirror=MIRROR)


def test_non_positive_pixels_are_refused(monkeypatch):
    dark = np.zeros((1024, 1536))
    monkeypatch.setattr(vanhateren, "read_iml", lambda path: dark)
    with pytest.raises(DatasetError, match=r"van Hateren image imk\d{5}\.iml .*non-positive"):
        prepare_vanhateren(**SMALL, mirror=MIRROR)
    patches = np.ones((3, 16, 16))
    patches[1, 2, 3] = 0.0
    with pytest.raises(DatasetError, match="raw patch 1"):
        transform_patches(
            patches, {"pca_components": np.eye(2, 256), "pca_mean": np.zeros(256), "whitening_scale": np.ones(2)}
        )
    with pytest.raises(ValueError, match="shape"):
        transform_patches(
            np.ones((3, 8, 8)),
            {"pca_components": np.eye(2, 256), "pca_mean": np.zeros(256), "whitening_scale": np.ones(2)},
        )


# --------------------------------------------------------------------------- prepared file


def test_save_load_roundtrip(small, saved):
    assert not [p for p in saved.parent.iterdir() if p.name != saved.name]  # no temporary files left
    for split in ("train", "test"):
        loaded = load_patches(saved, split)
        assert loaded.dtype == np.float64
        np.testing.assert_array_equal(loaded, small[split])
    np.testing.assert_array_equal(load_patches(saved), small["test"])  # default split
    white = load_whitening(saved)
    for key in ("pca_components", "pca_mean", "whitening_scale", "explained_variance"):
        np.testing.assert_array_equal(white[key], small[key])
    assert white["patch_size"] == 16 and white["remove_dc"] is False
    # the saved whitening reproduces both splits from raw patches cut again from the mirror
    for split in ("train", "test"):
        loc = small[f"{split}_locations"][:40]
        raw = np.stack([raw_image(VANHATEREN_IMAGES[i])[r : r + 16, c : c + 16] for i, r, c in loc])
        np.testing.assert_allclose(transform_patches(raw, white), small[split][:40], rtol=0, atol=1e-12)

    meta = load_patches_meta(saved)
    assert meta["dataset"] == "vanhateren" and meta["settings"]["n_components"] == SMALL["n_components"]
    assert meta["train_images"] == small["train_images"] and meta["test_images"] == small["test_images"]
    assert meta["sizes"] == {"train": SMALL["n_train"], "test": SMALL["n_test"]}
    sha = manifest_sha256()
    assert {n: s["sha256"] for n, s in meta["sources"].items()} == {n: sha[n] for n in VANHATEREN_IMAGES[:6]}
    assert all(COMMIT in s["url"] for s in meta["sources"].values())
    with np.load(saved, allow_pickle=False) as z:
        np.testing.assert_array_equal(z["train_locations"], small["train_locations"])


def test_load_patches_refuses_bad_files(saved, tmp_path):
    with pytest.raises(DatasetError, match="has no split 'valid'"):
        load_patches(saved, "valid")
    with pytest.raises(DatasetError, match="does not exist"):
        load_patches(tmp_path / "nope.npz")

    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(saved.read_bytes()[:1000])
    with pytest.raises(DatasetError, match="garbage.npz"):
        load_patches(garbage)

    with np.load(saved, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["meta"]))

    def write(name, **changes):
        path = tmp_path / name
        np.savez(path, **{**arrays, **changes})
        return path

    nan = arrays["test"].copy()
    nan[3, 1] = np.nan
    with pytest.raises(DatasetError, match=r"nan\.npz \[test\] contains NaN"):
        load_patches(write("nan.npz", test=nan))
    with pytest.raises(DatasetError, match=r"flat\.npz \[test\] has shape \(400,\)"):
        load_patches(write("flat.npz", test=arrays["test"].ravel()))
    with pytest.raises(DatasetError, match=r"ints\.npz \[test\] has dtype int"):
        load_patches(write("ints.npz", test=np.zeros((5, 8), dtype=np.int64)))
    with pytest.raises(DatasetError, match="not a prepared van Hateren patch file"):
        load_patches(write("other.npz", meta=np.asarray(json.dumps({**meta, "dataset": "mnist"}))))
    no_meta = tmp_path / "nometa.npz"
    np.savez(no_meta, test=arrays["test"])
    with pytest.raises(DatasetError, match="not a prepared patch file"):
        load_patches(no_meta)
    with pytest.raises(DatasetError, match="inconsistent whitening"):
        load_whitening(write("shape.npz", pca_mean=arrays["pca_mean"][:-1]))
    with pytest.raises(DatasetError, match="whitening_scale"):
        load_whitening(write("scale.npz", whitening_scale=-arrays["whitening_scale"]))
