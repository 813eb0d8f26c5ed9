"""The examples in examples/ run in quick mode and produce what they claim.

* ``digits_mlp_energy.py --quick``: trains, saves a TorchScript ``.pt`` that :func:`load_model` reads
  back with the same ``log_f``; its estimates are finite and the sandwich's ends are ordered; its
  ``model()`` loads through the ``FILE.py:NAME`` route, in-process and from the command line.
* ``toy_potts.py --quick``: the text round trip is exact, AIS agrees with exact enumeration within 4 of
  its standard errors, RAISE's test log-likelihood within 4 of its standard errors of the exact one
  (from below, up to noise), and the sandwich's log Z bracket holds the exact value.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from logzbench.models import EnergyModel
from logzbench.models.io import load_model

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

#: a few float32 roundings (the scripted network may order its sums differently)
F32_RTOL = 8 * float(torch.finfo(torch.float32).eps)


def _import(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """``digits_mlp_energy.main(["--quick", ...])`` run once for the module's tests (by import)."""
    out = tmp_path_factory.mktemp("digits") / "digits_mlp.pt"
    n = torch.get_num_threads()
    try:
        result = _import("digits_mlp_energy").main(["--quick", "--threads", "1", "--out", str(out)])
    finally:
        torch.set_num_threads(n)
    return result


def test_digits_quick_saves_a_model_with_the_same_log_f(digits):
    path = digits["path"]
    assert path.exists()
    stem = path.with_suffix("")
    train, test = np.load(f"{stem}_train.npy"), np.load(f"{stem}_test.npy")
    assert train.shape[1] == test.shape[1] == 64 and set(np.unique(train)) <= {0, 1}
    loaded = load_model(path)
    assert isinstance(loaded, EnergyModel) and loaded.dim == 64 and loaded.domain == "binary"
    probe = torch.as_tensor(test[:5], dtype=torch.float32)
    # the same float32 network, scripted: equal up to float32 rounding of values of size ~30 (eps 1.2e-7)
    torch.testing.assert_close(loaded.log_f(probe), digits["probe_log_f"], rtol=F32_RTOL, atol=0.0)
    # the training rows travel with the .pt (the base-rate reference)
    assert loaded.data is not None and tuple(loaded.data.shape) == train.shape


def test_digits_quick_estimates(digits):
    res = digits["results"]
    ais, rai, sw = res["ais"], res["raise"], res["sandwich"]
    for r in (ais, rai, sw):
        assert math.isfinite(r.mean_log_likelihood) and math.isfinite(r.mean_log_likelihood_stderr)
        assert r.seconds > 0 and r.n_sweeps > 0
    assert math.isfinite(ais.log_z) and ais.log_z_stderr > 0 and ais.ess > 1
    # a 64-unit binary model: log p(v) < 0 and above the uniform model's -64 log 2
    assert -64 * math.log(2) < rai.mean_log_likelihood < 0
    # RAISE errs low and AIS's LL high: they agree within noise on this easy model
    se = math.hypot(ais.mean_log_likelihood_stderr, rai.mean_log_likelihood_stderr)
    assert rai.mean_log_likelihood - ais.mean_log_likelihood < 4 * se + 0.05
    b = sw.extra["bracket"]
    assert b["quantity"] == "mean_log_likelihood"
    lo, hi = b["mean_log_likelihood_lower"], b["mean_log_likelihood_upper"]
    assert lo <= hi and b["mean_log_likelihood_lower_estimator"] == "raise"
    assert b["mean_log_likelihood_upper_estimator"] == "ais"


def test_digits_file_name_route_loads(digits, monkeypatch):
    monkeypatch.setenv("DIGITS_MLP_PT", str(digits["path"]))
    m = load_model(f"{EXAMPLES / 'digits_mlp_energy.py'}:model")
    assert isinstance(m, EnergyModel) and m.dim == 64
    assert m.source.endswith("digits_mlp_energy.py:model")
    probe = torch.as_tensor(np.load(f"{digits['path'].with_suffix('')}_test.npy")[:5], dtype=torch.float32)
    torch.testing.assert_close(m.log_f(probe), digits["probe_log_f"], rtol=F32_RTOL, atol=0.0)


def test_digits_file_name_route_from_the_command_line(digits, tmp_path):
    stem = digits["path"].with_suffix("")
    env = {**os.environ, "DIGITS_MLP_PT": str(digits["path"]), "OMP_NUM_THREADS": "1"}
    out = tmp_path / "ais.json"
    cmd = [
        sys.executable, "-m", "logzbench.cli", "estimate", f"{EXAMPLES / 'digits_mlp_energy.py'}:model",
        "--estimator", "ais", "--data", f"{stem}_test.npy", "--train-data", f"{stem}_train.npy",
        "--init", "base-rate", "--steps", "50", "--chains", "20", "--seed", "1", "--threads", "1",
        "--json", str(out),
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rec = json.loads(out.read_text())
    assert math.isfinite(rec["log_z"]) and math.isfinite(rec["mean_log_likelihood"])
    # the same model as the script's: its AIS log Z within a few nats of the script's (K differs)
    assert abs(rec["log_z"] - digits["results"]["ais"].log_z) < 5.0


def test_digits_model_without_weights_says_how_to_make_them(tmp_path, monkeypatch):
    from logzbench.errors import ModelFileError

    monkeypatch.setenv("DIGITS_MLP_PT", str(tmp_path / "missing.pt"))
    with pytest.raises(ModelFileError, match="train it first"):
        load_model(f"{EXAMPLES / 'digits_mlp_energy.py'}:model")


def test_toy_potts_quick(tmp_path):
    n = torch.get_num_threads()
    try:
        r = _import("toy_potts").main(["--quick", "--threads", "1", "--out-dir", str(tmp_path / "tp")])
    finally:
        torch.set_num_threads(n)
    out = tmp_path / "tp"
    for f in ("train.npy", "test.npy", "train.fasta", "potts_fit.txt"):
        assert (out / f).exists(), f
    train = np.load(out / "train.npy")
    assert train.shape == (400, 8) and train.min() >= 0 and train.max() <= 4
    assert (out / "train.fasta").read_text().count(">") == 400
    assert r["roundtrip_diff"] < 1e-9
    res = r["results"]
    exact = res["exact"]
    # the exact log Z agrees with the fitted model's own enumeration
    assert exact.log_z == pytest.approx(r["fit"].exact_log_z(), abs=1e-9)
    ais = res["ais"]
    assert abs(ais.log_z - exact.log_z) <= 4 * ais.log_z_stderr
    assert abs(ais.mean_log_likelihood - exact.mean_log_likelihood) <= 4 * ais.mean_log_likelihood_stderr
    rai = res["raise"]
    assert abs(rai.mean_log_likelihood - exact.mean_log_likelihood) <= 4 * rai.mean_log_likelihood_stderr + 0.01
    b = res["sandwich"].extra["bracket"]
    assert b["log_z_lower"] <= exact.log_z <= b["log_z_upper"]
    # the fit is close to the generating model: its test LL within a nat of the truth's
    assert abs(exact.mean_log_likelihood - r["truth_test_ll"]) < 1.0
