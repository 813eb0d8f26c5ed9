"""Frey faces: verified .mat file, split, per-pixel standardization, prepared file, load_rows.

Uses the offline mirror at ``../shared/data/frey_faces`` and is skipped without it.  The network is
never used: ``_download`` is replaced in every test (conftest's ``offline`` fixture).  The expected
sha256 is read from the mirror's ``MANIFEST.tsv``; the faces are read back with scipy here.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy.io import loadmat

from logzbench.data import (
    CONTINUOUS_DATASETS,
    N_FEATURES,
    download,
    load_meta,
    load_rows,
    prepare_dataset,
    prepare_patches,
)
from logzbench.data.frey import (
    FILENAME,
    FOLDER,
    load_faces,
    load_frey_faces,
    load_standardization,
    prepare_frey,
    read_frey,
    save_prepared_faces,
    to_images,
)
from logzbench.errors import DatasetError

MIRROR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
MAT = MIRROR / FOLDER / FILENAME
needs_mirror = pytest.mark.skipif(not MAT.is_file(), reason=f"Frey faces not found in the offline mirror at {MAT}")
pytestmark = [pytest.mark.usefixtures("offline"), needs_mirror]  # conftest: no network, empty cache, no mirror


@pytest.fixture(scope="module")
def faces():
    """The 1,965 faces as uint8 (1965, 28, 20), read independently of the module."""
    return loadmat(str(MAT))["ff"].T.reshape(-1, 28, 20)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The default preparation (all 1,965 faces in train), written and read back."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(download, "_download", lambda url, dest: (_ for _ in ()).throw(OSError("network disabled")))
        return prepare_patches("frey", tmp_path_factory.mktemp("frey") / "frey.npz", mirror=MIRROR)


def test_registry_matches_manifest():
    with open(MIRROR / "MANIFEST.tsv", newline="") as fh:
        sha = {
            Path(r["file"]).name: r["sha256"]
            for r in csv.DictReader(fh, delimiter="\t")
            if r["dataset"] == "frey_faces"
        }
    entry = download.remote_file(FOLDER, FILENAME)
    assert entry.sha256 == sha[FILENAME] and entry.urls[0] == "https://cs.nyu.edu/~roweis/data/frey_rawface.mat"
    assert "frey" in CONTINUOUS_DATASETS and N_FEATURES["frey"] == 560


def test_standardized_rows(prepared, faces):
    x = load_faces(prepared, "train")
    assert x.shape == (1965, 560) and x.dtype == np.float64
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(x.std(axis=0), 1.0, atol=1e-12)
    stats = load_standardization(prepared)
    flat = faces.reshape(1965, 560).astype(np.float64)
    np.testing.assert_allclose(stats["mean"], flat.mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(stats["sd"], flat.std(axis=0), rtol=1e-13)
    assert stats["image_shape"] == (28, 20)
    np.testing.assert_array_equal(to_images(x, stats), faces)  # round trip back to the 8-bit images, exact
    meta = load_meta(prepared)
    assert meta["dataset"] == "frey" and meta["sizes"] == {"train": 1965} and meta["image_shape"] == [28, 20]
    assert meta["settings"] == {"n_test": 0, "n_train": 1965, "seed": 0}
    with np.load(prepared) as z:
        assert z["image_shape"].tolist() == [28, 20] and z["train_frames"].tolist() == list(range(1965))


def test_load_rows_reads_the_prepared_file(prepared):
    train = load_rows(prepared, "real", "train", prepared=True)  # what training reads
    np.testing.assert_array_equal(train, load_rows(prepared, "real", "train"))  # what estimates read
    assert train.shape == (1965, 560)
    with pytest.raises(DatasetError, match="no split 'test'.*n_test"):
        load_rows(prepared, "real", "test", prepared=True)


def test_held_out_split(tmp_path, faces):
    out = prepare_patches("frey", tmp_path / "f.npz", mirror=MIRROR, n_test=165, n_train=None, seed=0)
    train, test = load_faces(out, "train"), load_faces(out, "test")
    assert train.shape == (1800, 560) and test.shape == (165, 560)
    np.testing.assert_allclose(train.mean(axis=0), 0.0, atol=1e-12)  # statistics of the training rows only
    np.testing.assert_allclose(train.std(axis=0), 1.0, atol=1e-12)
    stats = load_standardization(out)
    np.testing.assert_array_equal(to_images(test, stats), faces[1800:])  # the last 165 frames
    np.testing.assert_array_equal(to_images(train, stats), faces[:1800])
    with np.load(out) as z:
        assert z["test_frames"].tolist() == list(range(1800, 1965))
    assert load_rows(out, "real", "test").shape == (165, 560)
    small = prepare_frey(n_test=165, n_train=100, mirror=MIRROR)
    assert small["train"].shape == (100, 560) and small["test"].shape == (165, 560)
    for bad in ({"n_test": 1964}, {"n_test": -1}, {"n_train": 1}, {"n_test": 100, "n_train": 1866}):
        with pytest.raises(DatasetError, match="n_t"):
            prepare_frey(mirror=MIRROR, **bad)
    with pytest.raises(DatasetError, match="unknown settings"):
        prepare_patches("frey", tmp_path / "x.npz", mirror=MIRROR, n_components=4)


def test_workflow_prepare_job(tmp_path):
    """The prepare rule's job with a schema-filled frey entry (binarize, threshold, n_valid dropped)."""
    from logzbench.pipeline.jobs import prepare_job

    spec = {
        "source": "frey",
        "binarize": "stochastic",
        "threshold": 0.5,
        "seed": 0,
        "n_train": None,
        "n_test": 65,
        "n_valid": 0,
    }
    out = prepare_job(spec, tmp_path / "frey.npz", mirror=str(MIRROR))
    assert load_meta(out)["sizes"] == {"train": 1900, "test": 65}


def test_corrupt_and_missing_source(tmp_path, offline):
    mirror = tmp_path / "mirror"
    (mirror / FOLDER).mkdir(parents=True)
    with pytest.raises(DatasetError, match="frey_rawface.mat is not available offline") as info:
        load_frey_faces(mirror=mirror)
    msg = str(info.value)
    assert str(mirror / FOLDER / FILENAME) in msg and "https://cs.nyu.edu/~roweis/data/frey_rawface.mat" in msg
    assert offline == list(download.remote_file(FOLDER, FILENAME).urls)
    data = bytearray(MAT.read_bytes())
    data[5000] ^= 0xFF
    (mirror / FOLDER / FILENAME).write_bytes(bytes(data))
    with pytest.raises(DatasetError, match="frey_rawface.mat is corrupt.*expected sha256 265a83a2"):
        prepare_patches("frey", tmp_path / "f.npz", mirror=mirror)
    assert not (tmp_path / "f.npz").exists()


def test_file_refusals(tmp_path, prepared):
    bad = tmp_path / "bad.mat"
    from scipy.io import savemat

    savemat(bad, {"ff": np.zeros((560, 10), dtype=np.uint8)})
    with pytest.raises(DatasetError, match=r"'ff' is uint8 \(560, 10\); expected uint8 \(560, 1965\)"):
        read_frey(bad)
    bad.write_bytes(b"not a mat file")
    with pytest.raises(DatasetError, match="cannot read Frey faces file"):
        read_frey(bad)
    assert read_frey(MAT).shape == (1965, 560)
    digits = prepare_dataset("digits", tmp_path / "d.npz", n_train=10, n_test=10)
    with pytest.raises(DatasetError, match="not a prepared Frey faces file"):
        load_faces(digits, "train")
    with pytest.raises(DatasetError, match="not a prepared patch file|van Hateren"):
        load_rows(digits, "real", "train", prepared=True)  # neither kind of continuous file
    copy = tmp_path / "nan.npz"
    shutil.copy(prepared, copy)
    with np.load(copy) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["train"][0, 0] = np.nan
    np.savez(copy, **arrays)
    with pytest.raises(DatasetError, match="NaN"):
        load_faces(copy, "train")
    arrays["sd"][3] = 0.0
    np.savez(copy, **arrays)
    with pytest.raises(DatasetError, match="non-positive"):
        load_standardization(copy)
    with pytest.raises(DatasetError, match=r"pixel\(s\) \[27\] are constant over the 10 training faces"):
        prepare_frey(n_train=10, mirror=MIRROR)
    path = save_prepared_faces(tmp_path / "s.npz", prepare_frey(n_train=50, mirror=MIRROR))
    assert load_faces(path).shape == (50, 560) and load_meta(path)["settings"]["n_train"] == 50
