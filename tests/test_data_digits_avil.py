"""Digits as in the AVIL paper (source ``digits-avil``): 1,438 / 359 split, five-fold shift augmentation.

The shifts are checked against Kuleshov & Ermon's own construction (``scipy.ndimage.convolve`` with
their one-hot 3x3 kernels, zero fill) and pixel by pixel; the existing ``digits`` source is checked
against fingerprints of its output taken before the variant was added.  No mirror, no network.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from scipy.ndimage import convolve
from sklearn.datasets import load_digits

from logzbench.data import DATASETS, N_FEATURES, load_meta, load_prepared, prepare_dataset
from logzbench.data.digits import SHIFTS, augment_shifts, load_digits_avil, shift_images
from logzbench.errors import DatasetError

pytestmark = pytest.mark.usefixtures("offline")
#: Kuleshov & Ermon's nudge_dataset kernels, in their order (up, left, right, down).
KERNELS = (
    [[0, 1, 0], [0, 0, 0], [0, 0, 0]],
    [[0, 0, 0], [1, 0, 0], [0, 0, 0]],
    [[0, 0, 0], [0, 0, 1], [0, 0, 0]],
    [[0, 0, 0], [0, 0, 0], [0, 1, 0]],
)


@pytest.fixture(scope="module")
def avil(tmp_path_factory):
    """digits-avil, thresholded (shifting commutes with thresholding, so the shifts stay exact)."""
    out = tmp_path_factory.mktemp("avil") / "digits-avil.npz"
    return prepare_dataset("digits-avil", out, binarize="threshold", threshold=0.5)


def test_sizes(avil):
    assert "digits-avil" in DATASETS and N_FEATURES["digits-avil"] == 64
    train, valid, test = (load_prepared(avil, s) for s in ("train", "valid", "test"))
    assert train.shape == (5 * 1438, 64) and valid.shape == (359, 64)
    np.testing.assert_array_equal(test, valid)  # no test split in the paper: test = valid
    meta = load_meta(avil)
    assert meta["sizes"] == {"train": 7190, "test": 359, "valid": 359} and meta["shift_augment"] == "train"
    assert meta["split_seeds"]["test"] == meta["split_seeds"]["valid"] and meta["image_shape"] == [8, 8]
    with np.load(avil) as z:
        np.testing.assert_array_equal(z["train_labels"][::5].repeat(5), z["train_labels"])
        np.testing.assert_array_equal(z["test_labels"], z["valid_labels"])


def test_training_rows_are_the_claimed_shifts(avil):
    train = load_prepared(avil, "train").reshape(1438, 5, 8, 8)
    original = train[:, 0]
    for k, (name, dr, dc) in enumerate(SHIFTS):
        moved = train[:, k]
        # pixel (r, c) of the shifted image is pixel (r - dr, c - dc) of the original; the uncovered edge is 0
        for r in range(8):
            for c in range(8):
                src_r, src_c = r - dr, c - dc
                want = original[:, src_r, src_c] if 0 <= src_r < 8 and 0 <= src_c < 8 else 0
                np.testing.assert_array_equal(moved[:, r, c], want, err_msg=f"{name} ({r}, {c})")
    assert all((train[:, 0] != train[:, k]).any() for k in range(1, 5))


def test_shifts_match_kuleshov_ermon():
    x = load_digits().data[:100]
    assert [s[0] for s in SHIFTS] == ["original", "up", "left", "right", "down"]
    for (name, dr, dc), kernel in zip(SHIFTS[1:], KERNELS):
        ref = np.stack([convolve(img.reshape(8, 8), np.array(kernel), mode="constant").ravel() for img in x])
        np.testing.assert_array_equal(shift_images(x, dr, dc), ref, err_msg=name)
    one = np.zeros((1, 64))
    one[0, 3 * 8 + 4] = 1.0  # pixel (3, 4)
    where = {name: divmod(int(np.flatnonzero(shift_images(one, dr, dc))[0]), 8) for name, dr, dc in SHIFTS}
    assert where == {"original": (3, 4), "up": (2, 4), "left": (3, 3), "right": (3, 5), "down": (4, 4)}
    edge = np.zeros((1, 64))
    edge[0, 0] = 1.0  # pixel (0, 0) falls off when moved up or left
    assert not shift_images(edge, -1, 0).any() and not shift_images(edge, 0, -1).any()
    stacked, labels = augment_shifts(x[:3], np.arange(3), image_major=False)
    assert stacked.shape == (15, 64) and labels.tolist() == [0, 1, 2] * 5


def test_split_is_disjoint_and_modes():
    plain = load_digits_avil("none")
    assert plain["train_images"].shape == (1438, 64) and plain["valid_images"].shape == (359, 64)
    everything = load_digits().data / 16.0
    rows = {r.tobytes(): i for i, r in enumerate(everything)}
    train_ids = {rows[r.tobytes()] for r in plain["train_images"]}
    valid_ids = {rows[r.tobytes()] for r in plain["valid_images"]}
    assert not train_ids & valid_ids and len(train_ids | valid_ids) >= 1790  # (the data hold a few duplicates)
    aug = load_digits_avil("train")
    np.testing.assert_array_equal(aug["train_images"][::5], plain["train_images"])
    np.testing.assert_array_equal(aug["valid_images"], plain["valid_images"])
    kuleshov = load_digits_avil("all")  # their code: augment all 1797, then an 80/20 split
    assert kuleshov["train_images"].shape == (7188, 64) and kuleshov["valid_images"].shape == (1797, 64)
    with pytest.raises(DatasetError, match="augment='sideways'"):
        load_digits_avil("sideways")


def test_options_and_refusals(tmp_path):
    out = prepare_dataset("digits-avil", tmp_path / "a.npz", shift_augment="all", seed=1, n_train=100)
    assert load_meta(out)["sizes"] == {"train": 100, "test": 1797, "valid": 1797}
    out = prepare_dataset("digits-avil", tmp_path / "n.npz", shift_augment="none")
    assert load_prepared(out, "train").shape == (1438, 64)
    with pytest.raises(DatasetError, match="n_valid must be 0"):
        prepare_dataset("digits-avil", tmp_path / "x.npz", n_valid=10)
    with pytest.raises(DatasetError, match="no n_test"):
        prepare_dataset("digits-avil", tmp_path / "x.npz", n_test=10)
    with pytest.raises(DatasetError, match="digits-avil only"):
        prepare_dataset("digits", tmp_path / "x.npz", shift_augment="train")
    assert not (tmp_path / "x.npz").exists()


@pytest.mark.parametrize(
    "kwargs, digest",
    [
        ({"seed": 0}, "cfa339f61e9a63750385c118f8ecbf3f8ed4e5aebecb8e8ee86cec79994fd1d6"),
        (
            {"binarize": "threshold", "threshold": 0.5, "seed": 0},
            "79d31bcf99e121871c69df3ac7686f924d1b6d40c86d46e3ab225e4cd32e4932",
        ),
        (
            {"seed": 3, "n_valid": 100, "n_train": 500, "n_test": 50},
            "5be5ea43f9beeef9f9ca22a0f2db6e10ddbcc5d00d4d715115b16ffb7d82bc3d",
        ),
    ],
)
def test_digits_source_unchanged(tmp_path, kwargs, digest):
    """Fingerprints of the ``digits`` output (arrays and meta) taken before digits-avil was added."""
    out = prepare_dataset("digits", tmp_path / "d.npz", **kwargs)
    h = hashlib.sha256()
    with np.load(out) as z:
        for key in sorted(k for k in z.files if k != "meta"):
            a = z[key]
            h.update(key.encode())
            h.update(str(a.dtype).encode())
            h.update(str(a.shape).encode())
            h.update(a.tobytes())
    assert h.hexdigest() == digest
    meta = load_meta(out)
    assert list(meta) == [
        "format_version",
        "dataset",
        "binarize",
        "threshold",
        "seed",
        "split_seeds",
        "sizes",
        "n_features",
        "image_shape",
        "split",
        "sources",
        "logzbench_version",
    ]
    assert json.dumps(meta["split"]) == json.dumps(
        "sklearn train_test_split(test_size=0.2, stratify=labels, random_state=0); valid = last n_valid training rows"
    )
