"""Binarized UCI sets of Larochelle & Murray (AVIL Table 1): registry, parsing, checks, prepared files.

Uses the offline mirror at ``../shared/data/uci_binary`` (adult, dna, mushrooms, nips) and skips
what needs it when it is absent.  The network is never used: ``_download`` is replaced in every test
(conftest's ``offline`` fixture, or a fake that writes a file).  Expected sha256 values are read
from the mirror's ``MANIFEST.tsv`` and the LIBSVM rows are re-read here independently.
"""

from __future__ import annotations

import csv
import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest

from logzbench.data import DATASETS, N_FEATURES, download, load_meta, load_prepared, load_rows, prepare_dataset
from logzbench.data.uci import MADE_COMMIT, UCI_DATASETS, UCI_SETS, load_uci, read_libsvm
from logzbench.errors import DatasetError

MIRROR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
FOLDER = MIRROR / "uci_binary"
#: AVIL Table 1: D, train, valid, test
TABLE1 = {
    "adult": (123, 5000, 1414, 26147),
    "connect4": (126, 16000, 4000, 47557),
    "dna": (180, 1400, 600, 1186),
    "mushrooms": (112, 2000, 500, 5624),
    "nips-0-12": (500, 400, 100, 1240),
    "ocr_letters": (128, 32152, 10000, 10000),
    "rcv1": (150, 40000, 10000, 150000),
    "web": (300, 14000, 3188, 32561),
}
MIRRORED = ("adult", "dna", "mushrooms", "nips-0-12")
needs_mirror = pytest.mark.skipif(not FOLDER.is_dir(), reason=f"UCI sets not found in the offline mirror {FOLDER}")
pytestmark = pytest.mark.usefixtures("offline")  # conftest: no network, empty cache, no mirror from the environment


def manifest_sha256() -> dict[str, str]:
    with open(MIRROR / "MANIFEST.tsv", newline="") as fh:
        rows = csv.DictReader(fh, delimiter="\t")
        return {Path(r["file"]).name: r["sha256"] for r in rows if r["dataset"].startswith("uci_binary/")}


@pytest.fixture(scope="module")
def loaded():
    """The four mirrored sets, each loaded once (network disabled)."""
    if not FOLDER.is_dir():
        pytest.skip(f"UCI sets not found in the offline mirror {FOLDER}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(download, "_download", lambda url, dest: (_ for _ in ()).throw(OSError("network disabled")))
        return {name: load_uci(name, mirror=MIRROR) for name in MIRRORED}


def fake_rcv1(path: Path, widths=(150, 150, 150), sizes=(40000, 10000, 150000), value=1) -> Path:
    """A MADE-style rcv1.npz (uint8, one active feature per row; ``value`` at [0, 0] of train)."""
    arrays = {}
    for key, width, n in zip(("train_data", "valid_data", "test_data"), widths, sizes):
        x = np.zeros((n, width), dtype=np.uint8)
        x[np.arange(n), np.arange(n) % width] = 1
        arrays[key] = x
    arrays["train_data"] = arrays["train_data"].astype(np.float32)
    arrays["train_data"][0, 0] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    return path


# --------------------------------------------------------------------------- registry


def test_registry_matches_table1_and_manifest():
    assert set(UCI_DATASETS) == set(TABLE1) and set(UCI_DATASETS) <= set(DATASETS)
    for name, (d, train, valid, test) in TABLE1.items():
        spec = UCI_SETS[name]
        assert (spec.n_features, spec.sizes) == (d, {"train": train, "valid": valid, "test": test})
        assert N_FEATURES[name] == d
    expected = manifest_sha256()
    assert sorted(expected) == sorted(
        ["a5a_train.libsvm", "a5a_valid.libsvm", "a5a_test.libsvm", "dna.npz", "mushrooms.npz", "nips.npz"]
    )
    for name in MIRRORED:
        spec = UCI_SETS[name]
        for f in spec.files:
            assert download.remote_file(spec.dataset, f).sha256 == expected[f]
    for name in ("connect4", "ocr_letters", "web"):  # no sha256 known: git blob sha1 of MADE's tree instead
        entry = download.remote_file(f"uci_binary/{name}", f"{name}.npz")
        assert entry.sha256 is None and len(entry.git_sha1) == 40
        assert entry.urls[0] == f"https://github.com/mgermain/MADE/raw/{MADE_COMMIT}/datasets/{name}.npz"
    rcv1 = download.remote_file("uci_binary/rcv1", "rcv1.npz")
    assert rcv1.sha256 is None and rcv1.git_sha1 is None
    assert rcv1.urls == ("https://github.com/mgermain/MADE/releases/download/ICML2015/rcv1.npz",)
    assert (
        download.remote_file("uci_binary/adult", "a5a_test.libsvm").urls[0]
        == "http://www.cs.toronto.edu/~larocheh/public/datasets/adult/a5a_test.libsvm"
    )


@needs_mirror
def test_git_blob_sha1_of_mirrored_npz_matches_made_tree():
    """The git blob hashes used for connect4 / ocr_letters / web are checked the same way as these."""
    for folder, blob in (
        ("dna", "6375b479f1a0c6cdc4ff836d7e53c0814e10873f"),
        ("nips", "bdc1319ac88d344ea518c6a5814996989ebdb7d8"),
    ):
        path = FOLDER / folder / f"{folder}.npz"
        assert download.git_blob_sha1(path) == blob == download.remote_file(f"uci_binary/{folder}", path.name).git_sha1


# --------------------------------------------------------------------------- the mirrored sets


@pytest.mark.parametrize("name", MIRRORED)
def test_mirrored_sets_match_table1(loaded, name):
    d, *sizes = TABLE1[name]
    data = loaded[name]
    for split, n in zip(("train", "valid", "test"), sizes):
        assert data[split].shape == (n, d) and data[split].dtype == np.uint8
        assert set(np.unique(data[split]).tolist()) == {0, 1}
    expected = manifest_sha256()
    assert {f: s["sha256"] for f, s in data["sources"].items()} == {f: expected[f] for f in UCI_SETS[name].files}


def test_adult_libsvm_parse(loaded):
    adult = loaded["adult"]
    # first training line: "+1 4:1 10:1 18:1 19:1 39:1 42:1 52:1 64:1 67:1 72:1 74:1 76:1 82:1 83:1"
    first = [4, 10, 18, 19, 39, 42, 52, 64, 67, 72, 74, 76, 82, 83]
    assert (np.flatnonzero(adult["train"][0]) + 1).tolist() == first
    for split, row in (("valid", 0), ("test", 12345), ("test", 26146)):
        line = (FOLDER / "adult" / f"a5a_{split}.libsvm").read_text().splitlines()[row].split()
        assert line[0] in ("+1", "-1") and all(t.endswith(":1") for t in line[1:])
        assert (np.flatnonzero(adult[split][row]) + 1).tolist() == sorted(int(t.split(":")[0]) for t in line[1:])
    assert adult["test"][:, 122].any() and not adult["train"][:, 122].any()  # D = 123 from the test file


# --------------------------------------------------------------------------- refusals


@needs_mirror
@pytest.mark.parametrize(
    "folder, filename, sha",
    [
        ("dna", "dna.npz", "df2d2e7ce1469edfead15e41024e108d64f1b4633cfecfc40ef7107cc22c895c"),
        ("adult", "a5a_valid.libsvm", "c54b5973ca19d03a8d153ffbdf0a5114fff5d587ea1d2589dfa4865526b91826"),
    ],
)
def test_corrupted_copy_is_refused(tmp_path, folder, filename, sha):
    mirror = tmp_path / "mirror"
    shutil.copytree(FOLDER / folder, mirror / "uci_binary" / folder)
    target = mirror / "uci_binary" / folder / filename
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    name = "nips-0-12" if folder == "nips" else folder
    with pytest.raises(DatasetError, match=rf"{filename} is corrupt.*expected sha256 {sha}") as info:
        load_uci(name, mirror=mirror)
    assert str(target) in str(info.value)


def test_content_checks_of_a_file_without_checksum(tmp_path):
    mirror = tmp_path / "mirror"
    target = mirror / "uci_binary" / "rcv1" / "rcv1.npz"
    small = (3, 2, 2)
    fake_rcv1(target, sizes=small, value=0.5)  # rcv1 has no known checksum: the content is checked
    with pytest.raises(DatasetError, match=r"rcv1 train rows of .*rcv1.npz is not binary.*0.5"):
        load_uci("rcv1", mirror=mirror)
    fake_rcv1(target, widths=(151, 150, 150), sizes=small)
    with pytest.raises(DatasetError, match=r"rcv1 train rows of .*rcv1.npz has 151 columns; expected rows of 150"):
        load_uci("rcv1", mirror=mirror)
    fake_rcv1(target, sizes=small)
    with pytest.raises(DatasetError, match=r"rcv1 train rows of .*rcv1.npz: 3 rows, expected 40000") as info:
        load_uci("rcv1", mirror=mirror)
    assert "no checksum is known for this file" in str(info.value)
    np.savez(target, train_data=np.zeros((3, 150)))
    with pytest.raises(DatasetError, match=r"lacks arrays \['valid_data', 'test_data'\]"):
        load_uci("rcv1", mirror=mirror)
    np.savez(
        target,
        train_data=np.zeros((3, 150)),
        valid_data=np.zeros((3, 150)),
        test_data=np.zeros((3, 150)),
        inputsize=np.int32(151),
    )
    with pytest.raises(DatasetError, match="inputsize 151, expected 150"):
        load_uci("rcv1", mirror=mirror)


def test_libsvm_refusals(tmp_path):
    path = tmp_path / "rows.libsvm"
    path.write_text("+1 1:1 3:1\n-1 123:1\n\n-1\n")
    assert read_libsvm(path, 123).nonzero()[1].tolist() == [0, 2, 122]
    for text, why in (
        ("+1 3:1 7:2\n", r"example 1: feature 7 has the value 2.0; the data set is binary"),
        ("+1 3:1\n-1 124:1\n", r"example 2: feature index 124 is outside 1..123; the rows are wider"),
        ("+1 0:1\n", "feature index 0 is outside"),
        ("+1 3:x\n", "cannot parse"),
    ):
        path.write_text(text)
        with pytest.raises(DatasetError, match=why) as info:
            read_libsvm(path, 123)
        assert str(path) in str(info.value)


def test_missing_set_offline_names_file_mirror_and_url(tmp_path, offline):
    mirror = tmp_path / "mirror"
    (mirror / "uci_binary").mkdir(parents=True)
    entry = download.remote_file("uci_binary/connect4", "connect4.npz")
    with pytest.raises(DatasetError, match="connect4.npz is not available offline") as info:
        load_uci("connect4", mirror=mirror)
    msg = str(info.value)
    assert str(mirror / "uci_binary" / "connect4" / "connect4.npz") in msg and entry.urls[0] in msg
    assert "git blob sha1 4685318ab6aabc98eec09b93ad4fa5debc24ec93" in msg
    assert offline == list(entry.urls)  # every URL tried once, each failing at once
    with pytest.raises(DatasetError, match=r"rcv1.npz is not available offline.*no checksum") as info:
        prepare_dataset("rcv1", tmp_path / "r.npz", mirror=mirror)
    assert "releases/download/ICML2015/rcv1.npz" in str(info.value) and not (tmp_path / "r.npz").exists()


def test_download_checked_by_git_blob_sha1(tmp_path, monkeypatch):
    monkeypatch.setattr(download, "_download", lambda url, dest: Path(dest).write_bytes(b"not connect4"))
    with pytest.raises(DatasetError, match=r"connect4.npz.*has git blob sha1 [0-9a-f]{40}, expected git blob sha1 468"):
        load_uci("connect4")
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))  # nothing left in the cache


def test_download_without_checksum_records_its_sha256(tmp_path, monkeypatch):
    source = fake_rcv1(tmp_path / "served" / "rcv1.npz")
    urls = []

    def serve(url, dest):
        urls.append(url)
        shutil.copy(source, dest)

    monkeypatch.setattr(download, "_download", serve)
    out = prepare_dataset("rcv1", tmp_path / "rcv1.npz", n_train=100, n_test=50)
    assert urls == ["https://github.com/mgermain/MADE/releases/download/ICML2015/rcv1.npz"]
    meta = load_meta(out)
    src = meta["sources"]["rcv1.npz"]
    assert src["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert src["checked"].startswith("no checksum")
    assert meta["sizes"] == {"train": 100, "test": 50, "valid": 10000}
    assert load_prepared(out, "train")[0, 0] == 1
    assert (tmp_path / "cache" / "uci_binary" / "rcv1" / "rcv1.npz").is_file()  # cached for the next run


# --------------------------------------------------------------------------- prepared files


@needs_mirror
def test_prepare_uci(tmp_path):
    out = prepare_dataset("dna", tmp_path / "dna.npz", mirror=MIRROR)
    with np.load(out, allow_pickle=False) as z:
        assert sorted(z.files) == ["meta", "test", "train", "valid"]  # no labels, no image shape
        assert z["train"].dtype == np.uint8
    for split, n in zip(("train", "valid", "test"), TABLE1["dna"][1:]):
        assert load_prepared(out, split).shape == (n, 180)
        assert load_rows(out, "binary", split, prepared=True).shape == (n, 180)
    meta = load_meta(out)
    assert meta["dataset"] == "dna" and meta["image_shape"] is None and meta["binarize"] is None
    assert meta["n_features"] == 180 and meta["sizes"] == {"train": 1400, "test": 1186, "valid": 600}
    np.testing.assert_array_equal(load_prepared(out, "test"), load_uci("dna", mirror=MIRROR)["test"])
    small = prepare_dataset(
        "dna", tmp_path / "small.npz", mirror=MIRROR, n_train=10, n_test=20, binarize="threshold", threshold=0.9
    )  # binarization unused: already binary
    np.testing.assert_array_equal(load_prepared(small, "train"), load_prepared(out, "train")[:10])
    assert load_prepared(small, "valid").shape == (600, 180)
    with pytest.raises(DatasetError, match="fixed validation split"):
        prepare_dataset("dna", tmp_path / "x.npz", mirror=MIRROR, n_valid=5)
    with pytest.raises(DatasetError, match="shift_augment applies to digits-avil only"):
        prepare_dataset("dna", tmp_path / "x.npz", mirror=MIRROR, shift_augment="train")
    assert not (tmp_path / "x.npz").exists()


@needs_mirror
def test_workflow_prepare_job(tmp_path):
    """The prepare rule's job with a schema-filled dataset entry."""
    from logzbench.pipeline.jobs import prepare_job

    spec = {
        "source": "mushrooms",
        "binarize": "stochastic",
        "threshold": 0.5,
        "seed": 0,
        "n_train": None,
        "n_test": None,
        "n_valid": 0,
    }
    out = prepare_job(spec, tmp_path / "mushrooms.npz", mirror=str(MIRROR))
    assert load_meta(out)["sizes"] == {"train": 2000, "test": 5624, "valid": 500}
