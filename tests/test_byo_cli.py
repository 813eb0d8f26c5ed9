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
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import assert_refused, tree_snapshot

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


# ------------------------------------------------------------- user code and the CLI's promises (issue 37)
#: the user's file with functions that chdir or are interrupted
MORE_FILE = (
    USER_FILE
    + """
import os
import time


def moves_away():
    os.makedirs("elsewhere", exist_ok=True)
    os.chdir("elsewhere")
    return make()


def interrupted():
    def log_f_interrupted(x):
        if x.shape[0] > 4:  # past the load-time check on 4 states
            raise KeyboardInterrupt
        return log_f(x)

    return EnergyModel(log_f_interrupted, {DIM}, "binary")


def waits():
    def log_f_waiting(x):
        if x.shape[0] > 4:  # past the load-time check: say so, then wait for the signal
            open(os.environ["READY_FILE"], "w").close()
            time.sleep(600)
        return log_f(x)

    return EnergyModel(log_f_waiting, {DIM}, "binary")
""".replace("{DIM}", str(DIM))
)

#: the user's file printing at import, in NAME() and in log_f (print and os.write(1, ...))
NOISY_FILE = (
    USER_FILE
    + """
import os

print("printed at import")
os.write(1, b"os.write at import\\n")


def noisy():
    print("printed in NAME()")
    os.write(1, b"os.write in NAME()\\n")

    def loud_log_f(x):
        print("printed in log_f")
        os.write(1, b"os.write in log_f\\n")
        return log_f(x)

    return EnergyModel(loud_log_f, {DIM}, "binary")
""".replace("{DIM}", str(DIM))
)

#: what NOISY_FILE prints when imported and its NAME() and log_f are called
NOISE = [
    "printed at import",
    "os.write at import",
    "printed in NAME()",
    "os.write in NAME()",
    "printed in log_f",
    "os.write in log_f",
]


def test_user_output_goes_to_stderr_not_before_the_json(byo, capsys):
    """print() at import, in NAME() and in log_f leaves stdout one JSON object; the text is on stderr."""
    (byo / "noisy.py").write_text(NOISY_FILE)
    capsys.readouterr()
    assert main(["estimate", "noisy.py:noisy", "--estimator", "exact", "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["log_z"] == pytest.approx(_true_log_z(), abs=1e-9)
    for text in (t for t in NOISE if t.startswith("printed")):  # (os.write: the next test's)
        assert text in err and text not in out, text


def test_user_writes_to_file_descriptor_1_go_to_stderr(byo):
    """The command line as a process: os.write(1, ...) too goes to stderr (fd 1 is redirected for the run)."""
    (byo / "noisy.py").write_text(NOISY_FILE)
    proc = subprocess.run(
        [sys.executable, "-m", "logzbench.cli", "estimate", "noisy.py:noisy", "--estimator", "exact", "--threads", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["log_z"] == pytest.approx(_true_log_z(), abs=1e-9)
    for text in NOISE:
        assert text in proc.stderr and text not in proc.stdout, text


def test_a_chdir_in_user_code_moves_no_path(byo, capsys):
    """NAME() changes directory: --data is still read, and --json, --log-weights and sample's --out are
    still written, where they were named (the paths are made absolute before user code runs)."""
    (byo / "more.py").write_text(MORE_FILE)
    cwd = os.getcwd()
    try:
        capsys.readouterr()
        argv = ["estimate", "more.py:moves_away", "--estimator", "ais", "--steps", "5", "--chains", "8"]
        rc = main([*argv, "--data", "rows.npy", "--json", "rel.json", "--log-weights", "rel.npz", "--threads", "1"])
        out, err = capsys.readouterr()
        assert rc == 0, err
        assert os.getcwd() == str(byo / "elsewhere")  # the user's code did move
        os.chdir(cwd)
        assert json.loads((byo / "rel.json").read_text()) == json.loads(out)
        assert json.loads(out)["data"] == "rows.npy"  # recorded as given
        assert (byo / "rel.npz").is_file()
        rc = main(["sample", "more.py:moves_away", "--n", "3", "--burn-in", "2", "--out", "s.npz", "--threads", "1"])
        assert rc == 0, capsys.readouterr().err
        os.chdir(cwd)
        assert (byo / "s.npz").is_file()
        assert sorted(p.name for p in (byo / "elsewhere").iterdir()) == []
    finally:
        os.chdir(cwd)


def test_ctrl_c_is_one_line_exit_130_nothing_written(byo, capsys, monkeypatch):
    """Ctrl-C (KeyboardInterrupt) in the user's log_f, and while the outputs are written (--json written,
    --log-weights not yet): one line, exit status 130, nothing on stdout, no file written or changed."""
    import logzbench.utils

    (byo / "more.py").write_text(MORE_FILE)
    (byo / "out.json").write_text("an earlier run's output\n")  # kept as it was
    argv = ["estimate", "more.py:interrupted", "--estimator", "ais", "--steps", "5", "--chains", "8", *OUT]

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    for case in ("log_f", "writing"):
        if case == "writing":
            argv[1] = "more.py:make"
            monkeypatch.setattr(logzbench.utils, "save_npz_atomic", interrupted)
        capsys.readouterr()
        before = tree_snapshot(byo)
        try:
            rc = main([*argv, "--threads", "1"])
        except KeyboardInterrupt:  # (escaping, it would stop the whole test session)
            pytest.fail(f"{case}: KeyboardInterrupt escaped the command line")
        out, err = capsys.readouterr()
        assert rc == 130, (case, err)
        assert out == "" and err.strip().splitlines() == ["logzbench estimate: interrupted"], (case, err)
        assert tree_snapshot(byo) == before, case


def test_sigint_to_the_command_line_is_one_line_exit_130(byo):
    """Ctrl-C (SIGINT) during an estimate: one line, exit status 130, no traceback, no output. SIGINT is
    reset to its default in the child: a test run started in the background has it ignored."""
    (byo / "more.py").write_text(MORE_FILE)
    ready = byo / "ready"
    argv = ["estimate", "more.py:waits", "--estimator", "ais", "--steps", "5", "--chains", "8", *OUT, "--threads", "1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "logzbench.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "READY_FILE": str(ready)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 300
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready.exists(), proc.communicate(timeout=60)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert out == "" and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "logzbench estimate: interrupted", err
    assert not (byo / "out.json").exists() and not (byo / "out.npz").exists()
