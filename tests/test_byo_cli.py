"""Bring your own model on the command line: ``logzbench estimate FILE.py:NAME`` (and a TorchScript ``.pt``, a
Potts text file) runs like an ``.npz`` model, and every bad input is refused as the README promises (exit
status 2, one line on stderr naming the problem, no traceback, no output file: :func:`conftest.assert_refused`).

The user's file is written into the test's temporary directory: a binary energy on 6 sites,
``log f(x) = x @ b + x^T J x`` (J strictly upper triangular), whose log Z the test enumerates itself.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math

import numpy as np
import pytest
from conftest import assert_refused

from logzbench.cli import main

DIM = 6
B = np.linspace(-1.0, 1.0, DIM)
J = 0.3 * np.triu(np.ones((DIM, DIM)), 1)

USER_FILE = f"""
import torch
from logzbench.models.energy import EnergyModel

B = torch.tensor({B.tolist()!r}, dtype=torch.float64)
J = torch.tensor({J.tolist()!r}, dtype=torch.float64)


def log_f(x):
    x = x.double()
    return x @ B + ((x @ J) * x).sum(dim=1)


def make():
    return EnergyModel(log_f, {DIM}, "binary")


def make_categorical():
    return EnergyModel(lambda x: -(x.double() - 1.0).abs().sum(dim=1), 5, ("categorical", 3))


class Quadratic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.b = torch.nn.Parameter(B.clone())
        self.J = torch.nn.Parameter(J.clone())

    def forward(self, x):
        x = x.double()
        return x @ self.b + ((x @ self.J) * x).sum(dim=1)


def make_module():
    return EnergyModel(Quadratic(), {DIM}, "binary")


def not_a_model():
    return 42


def wrong_shape():
    return EnergyModel(lambda x: x.double().sum(dim=1, keepdim=True), {DIM}, "binary")


def nan():
    return EnergyModel(lambda x: x.double().sum(dim=1) * float("nan"), {DIM}, "binary")


def not_a_tensor():
    return EnergyModel(lambda x: [0.0] * x.shape[0], {DIM}, "binary")


def raises():
    raise RuntimeError("the user's function failed")


NOT_CALLABLE = 3
"""


def _true_log_z() -> float:
    states = np.array(list(itertools.product([0.0, 1.0], repeat=DIM)))
    lf = states @ B + np.einsum("ni,ij,nj->n", states, J, states)
    return float(np.log(np.exp(lf - lf.max()).sum()) + lf.max())


@pytest.fixture
def byo(tmp_path, monkeypatch):
    """A working directory with the user's file ``energy.py``, binary rows ``rows.npy`` (20 x 6) and
    ``train.npy`` (40 x 6), and categorical rows ``cat.npy`` (20 x 5, states 0..2)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "energy.py").write_text(USER_FILE)
    rng = np.random.default_rng(0)
    np.save(tmp_path / "rows.npy", rng.integers(0, 2, (20, DIM)).astype(np.uint8))
    np.save(tmp_path / "train.npy", rng.integers(0, 2, (40, DIM)).astype(np.uint8))
    np.save(tmp_path / "cat.npy", rng.integers(0, 3, (20, 5)).astype(np.int64))
    return tmp_path


def _estimate(capsys, *argv) -> dict:
    capsys.readouterr()
    assert main(["estimate", *argv, "--threads", "1"]) == 0
    return json.loads(capsys.readouterr().out)


def test_file_py_name_runs_ais_and_exact(byo, capsys):
    exact = _estimate(capsys, "energy.py:make", "--estimator", "exact", "--data", "rows.npy", "--json", "exact.json")
    assert exact["log_z"] == pytest.approx(_true_log_z(), abs=1e-9)
    assert json.loads((byo / "exact.json").read_text()) == exact
    # the model's identity: the spec as given and the content hash of FILE.py
    assert exact["model"] == "energy.py:make"
    assert exact["model_sha256"] == hashlib.sha256((byo / "energy.py").read_bytes()).hexdigest()
    assert math.isfinite(exact["mean_log_likelihood"])

    ais = _estimate(
        capsys,
        "energy.py:make",
        "--estimator",
        "ais",
        "--data",
        "rows.npy",
        "--train-data",
        "train.npy",
        "--init",
        "base-rate",
        "--steps",
        "50",
        "--chains",
        "50",
        "--json",
        "ais.json",
        "--log-weights",
        "ais.npz",
    )
    assert json.loads((byo / "ais.json").read_text()) == ais
    assert ais["log_z"] == pytest.approx(_true_log_z(), abs=0.5)
    assert ais["model_sha256"] == exact["model_sha256"]
    with np.load(byo / "ais.npz") as z:
        assert z["log_weights"].shape[0] == 50


def test_categorical_energy_and_torchscript(byo, capsys):
    cat = _estimate(capsys, "energy.py:make_categorical", "--estimator", "exact", "--data", "cat.npy")
    # log f = -sum |x_i - 1| over 5 sites of 3 states: Z = (1 + 2/e)^5
    assert cat["log_z"] == pytest.approx(5 * math.log(1 + 2 / math.e), abs=1e-9)
    ais = _estimate(
        capsys,
        "energy.py:make_categorical",
        "--estimator",
        "ais",
        "--data",
        "cat.npy",
        "--steps",
        "20",
        "--chains",
        "20",
    )
    assert ais["log_z"] == pytest.approx(cat["log_z"], abs=0.5)

    # a TorchScript file of the same energy (a torch.nn.Module log_f) reads like the .py
    from logzbench.models.io import load_model
    from logzbench.models.source import save_torchscript

    save_torchscript(load_model(str(byo / "energy.py") + ":make_module"), byo / "energy.pt")
    pt = _estimate(capsys, "energy.pt", "--estimator", "exact", "--data", "rows.npy", "--json", "pt.json")
    assert pt["log_z"] == pytest.approx(_true_log_z(), abs=1e-9)
    assert pt["model_sha256"] == hashlib.sha256((byo / "energy.pt").read_bytes()).hexdigest()


def test_potts_text_file(byo, capsys):
    """A Potts model as plain text (``h i a value`` / ``J i j a b value``) reads like an .npz."""
    lines = ["h 0 0 0.5", "h 1 2 -0.3", "h 2 1 0.2", "J 0 1 0 2 0.7", "J 1 2 1 1 -0.4", "h 2 2 0.0"]
    (byo / "potts.txt").write_text("\n".join(lines) + "\n")
    np.save(byo / "potts_rows.npy", np.array([[0, 2, 1], [1, 1, 1], [2, 0, 0]]))
    out = _estimate(capsys, "potts.txt", "--estimator", "exact", "--data", "potts_rows.npy", "--json", "potts.json")
    h = np.zeros((3, 3))
    h[0, 0], h[1, 2], h[2, 1] = 0.5, -0.3, 0.2
    total = [
        h[0, a] + h[1, b] + h[2, c] + 0.7 * (a == 0 and b == 2) - 0.4 * (b == 1 and c == 1)
        for a, b, c in itertools.product(range(3), repeat=3)
    ]
    assert out["log_z"] == pytest.approx(float(np.log(np.exp(total).sum())), abs=1e-9)
    assert (byo / "potts.json").is_file()


def _write(name, text):
    def setup(tmp):
        (tmp / name).write_text(text)

    return setup


def _save(name, array):
    def setup(tmp):
        np.save(tmp / name, array)

    return setup


def _nothing(tmp):
    pass


OUT = ["--json", "out.json", "--log-weights", "out.npz"]
#: (id, setup(tmp), argv after `estimate`, words of the one-line error)
BAD = [
    ("missing-file", _nothing, ["nope.py:make", "--estimator", "exact"], ["model file not found", "nope.py"]),
    ("py-without-name", _nothing, ["energy.py", "--estimator", "exact"], ["energy.py:NAME"]),
    (
        "raises-on-import",
        _write("broken.py", "import math\nraise RuntimeError('cannot import me')\n"),
        ["broken.py:make", "--estimator", "exact"],
        ["broken.py", "raised on import", "cannot import me"],
    ),
    (
        "syntax-error",
        _write("syntax.py", "def make(:\n"),
        ["syntax.py:make", "--estimator", "exact"],
        ["syntax.py", "raised on import", "SyntaxError"],
    ),
    ("missing-name", _nothing, ["energy.py:nosuch", "--estimator", "exact"], ["energy.py", "has no 'nosuch'"]),
    (
        "name-not-callable",
        _nothing,
        ["energy.py:NOT_CALLABLE", "--estimator", "exact"],
        ["NOT_CALLABLE", "not a function"],
    ),
    ("name-raises", _nothing, ["energy.py:raises", "--estimator", "exact"], ["raises()", "the user's function failed"]),
    (
        "not-an-energy-model",
        _nothing,
        ["energy.py:not_a_model", "--estimator", "exact"],
        ["int", "not a", "EnergyModel"],
    ),
    ("wrong-shape", _nothing, ["energy.py:wrong_shape", "--estimator", "exact"], ["log_f", "shape", "expected"]),
    ("nan", _nothing, ["energy.py:nan", "--estimator", "exact"], ["log_f", "NaN"]),
    (
        "not-a-tensor",
        _nothing,
        ["energy.py:not_a_tensor", "--estimator", "exact"],
        ["log_f", "list", "not a torch.Tensor"],
    ),
    (
        "data-wrong-dim",
        _save("rows5.npy", np.zeros((4, 5), dtype=np.uint8)),
        ["energy.py:make", "--estimator", "exact", "--data", "rows5.npy"],
        ["test data", "5 columns", "6"],
    ),
    (
        "data-not-binary",
        _save("rows2.npy", np.full((4, DIM), 2, dtype=np.uint8)),
        ["energy.py:make", "--estimator", "exact", "--data", "rows2.npy"],
        ["rows2.npy", "not binary"],
    ),
    (
        "categorical-out-of-range",
        _save("cat_bad.npy", np.full((4, 5), 3, dtype=np.int64)),
        ["energy.py:make_categorical", "--estimator", "exact", "--data", "cat_bad.npy"],
        ["outside 0..2", "3 states"],
    ),
    (
        "categorical-wrong-dim",
        _nothing,
        ["energy.py:make_categorical", "--estimator", "exact", "--data", "rows.npy"],
        ["6 columns", "5 categorical states"],
    ),
    (
        "train-data-wrong-dim",
        _save("train5.npy", np.zeros((4, 5), dtype=np.uint8)),
        ["energy.py:make", "--estimator", "ais", "--steps", "5", "--train-data", "train5.npy"],
        ["training data", "5"],
    ),
    (
        "base-rate-without-training-rows",
        _nothing,
        ["energy.py:make", "--estimator", "ais", "--init", "base-rate", "--steps", "5"],
        ["base-rate", "needs training rows", "--train-data"],
    ),
    (
        "continuous-estimator-on-binary-energy",
        _nothing,
        ["energy.py:make", "--estimator", "hais"],
        ["hais", "energy-binary".upper()],
    ),
]


@pytest.mark.parametrize("setup, argv, words", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_input_is_refused(byo, capsys, setup, argv, words):
    setup(byo)
    assert_refused(main, ["estimate", *argv, *OUT, "--threads", "1"], words, byo, capsys)
    assert not (byo / "out.json").exists() and not (byo / "out.npz").exists()


def test_help_says_what_a_model_may_be(capsys):
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("FILE.py:NAME", "TorchScript .pt", "Potts text file", "runs its code", "as any Python import does"):
        assert words in text, words
