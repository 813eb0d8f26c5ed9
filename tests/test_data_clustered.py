"""The ``clustered`` data source (issue 38, item 5): deterministic from its seed, the stated cluster
structure (label frequencies and per-prototype flip rates within their binomial noise), test rows that
do not depend on ``n_train``, and its settings refused in one line."""

from __future__ import annotations

import math

import numpy as np
import pytest

from logzbench.data import load_meta, prepare_dataset
from logzbench.data.clustered import check_settings, make_clustered
from logzbench.errors import DatasetError

#: standard deviations a binomial count may lie from its mean (deterministic: fixed seeds)
Z = 5.0
WEIGHTS, FLIP = [4, 2, 1, 1], [0.01, 0.05, 0.1, 0.2]


def test_same_seed_same_rows_and_test_rows_independent_of_n_train(tmp_path):
    a = make_clustered(30, 4, WEIGHTS, FLIP, n_train=300, n_test=100, seed=5)
    b = make_clustered(30, 4, WEIGHTS, FLIP, n_train=300, n_test=100, seed=5)
    for k in ("train", "test", "train_labels", "test_labels", "prototypes"):
        assert np.array_equal(a[k], b[k])
    c = make_clustered(30, 4, WEIGHTS, FLIP, n_train=50, n_test=100, seed=5)
    assert np.array_equal(a["test"], c["test"]) and np.array_equal(a["train"][:50], c["train"])
    d = make_clustered(30, 4, WEIGHTS, FLIP, n_train=300, n_test=100, seed=6)
    assert not np.array_equal(a["prototypes"], d["prototypes"])
    settings = dict(n_visible=30, prototypes=4, weights=WEIGHTS, flip=FLIP, n_train=300, n_test=100, seed=5)
    p1, p2 = (prepare_dataset("clustered", tmp_path / name, **settings) for name in ("a.npz", "b.npz"))
    with np.load(p1) as f, np.load(p2) as g:
        assert sorted(f.files) == sorted(g.files)
        assert all(np.array_equal(f[k], g[k]) for k in f.files)
        assert f["train"].dtype == np.uint8 and f["train"].shape == (300, 30) and f["test"].shape == (100, 30)
    meta = load_meta(p1)["clustered"]
    assert meta["prototypes"] == ["".join(map(str, r)) for r in a["prototypes"].tolist()]
    assert meta["seed"] == 5 and meta["flip"] == FLIP


def test_rows_have_the_stated_cluster_structure():
    n, D = 8000, 50
    d = make_clustered(D, 4, WEIGHTS, FLIP, n_train=n, n_test=10, seed=1)
    x, z, protos = d["train"], d["train_labels"], d["prototypes"]
    w = np.asarray(WEIGHTS) / sum(WEIGHTS)
    counts = np.bincount(z, minlength=4)
    assert np.all(np.abs(counts - n * w) <= Z * np.sqrt(n * w * (1 - w)))
    flips = (x != protos[z]).sum(axis=1)
    for k, r in enumerate(FLIP):  # each row's distance to its prototype: Binomial(D, flip_k)
        m = counts[k] * D
        assert abs(flips[z == k].sum() - m * r) <= Z * math.sqrt(m * r * (1 - r))
    # the prototypes are fair coins, and the rows nearest their own prototype (distinct prototypes)
    assert len({r.tobytes() for r in protos}) == 4
    nearest = np.argmin((x[:, None, :] != protos[None]).sum(axis=2), axis=1)
    assert (nearest == z).mean() > 0.99


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"n_visible": 0}, ["n_visible must be a positive integer"]),
        ({"n_visible": 10, "prototypes": 0}, ["prototypes must be a positive integer"]),
        ({"n_visible": 10, "prototypes": 3, "weights": [1, 2]}, ["weights must be 3 positive numbers"]),
        ({"n_visible": 10, "prototypes": 2, "weights": [1, -1]}, ["weights must be 2 positive numbers"]),
        ({"n_visible": 10, "flip": 0.7}, ["flip must be a bit-flip rate in [0, 0.5]"]),
        ({"n_visible": 10, "prototypes": 2, "flip": [0.1]}, ["or 2 of them"]),
        ({"n_visible": 10, "flip": float("nan")}, ["flip must be"]),
    ],
)
def test_bad_settings_are_refused(kwargs, words, tmp_path):
    with pytest.raises(ValueError) as info:
        check_settings(**kwargs)
    assert all(w in str(info.value) for w in words) and "\n" not in str(info.value)
    with pytest.raises(DatasetError):
        prepare_dataset("clustered", tmp_path / "x.npz", **kwargs)
    assert not (tmp_path / "x.npz").exists()


def test_clustered_settings_belong_to_clustered_only(tmp_path):
    with pytest.raises(DatasetError, match="prototypes applies to clustered only, not to digits"):
        prepare_dataset("digits", tmp_path / "x.npz", prototypes=3)


def test_the_command_line_prepares_the_same_rows(tmp_path, capsys):
    from logzbench.cli import main

    argv = ["prepare", "clustered", "--n-visible", "12", "--prototypes", "2", "--weights", "3", "1"]
    argv += ["--flip", "0.01", "0.1", "--n-train", "40", "--n-test", "20", "--seed", "4"]
    assert main([*argv, "--out", str(tmp_path / "c.npz")]) == 0
    want = make_clustered(12, 2, [3, 1], [0.01, 0.1], n_train=40, n_test=20, seed=4)
    with np.load(tmp_path / "c.npz") as f:
        assert np.array_equal(f["train"], want["train"]) and np.array_equal(f["test_labels"], want["test_labels"])
