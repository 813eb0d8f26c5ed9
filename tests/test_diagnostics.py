"""Per-model diagnostics (logzbench.pipeline.diagnose) and their report (logzbench.report.diagnostics).

Real properties: the hidden-configuration mass against a brute-force sum over the joint states of a
tiny RBM, the sample-based mass within its own standard errors, per-class log-likelihoods against
brute-force per-row values and summing back to the overall mean, the choice and error propagation of
log Z from estimate records, the report's tables and figures from diagnostics files, and the workflow's
diagnose jobs in a dry run (none when disabled).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import all_states, random_rbm

from logzbench.models import save_model
from logzbench.pipeline.diagnose import (
    TOP,
    diagnose_job,
    hidden_mass_exact,
    hidden_mass_from_samples,
    log_z_for,
    per_class_log_likelihood,
)

REPO = Path(__file__).resolve().parents[1]
Z = 4.0  # standard errors allowed for a stochastic estimate (two-sided p ~ 6e-5)


def brute_hidden_log_p(rbm) -> tuple[np.ndarray, np.ndarray, float]:
    """(every h as rows, log p(h), log Z) by summing exp(a.v + c.h + v W h) over every joint state."""
    v, h = all_states(rbm.n_visible), all_states(rbm.n_hidden)
    W = rbm.W.double()
    E = (v @ rbm.visible_bias.double())[:, None] + (h @ rbm.hidden_bias.double())[None, :] + v @ W @ h.T
    log_z = float(torch.logsumexp(E.reshape(-1), 0))
    return h.numpy(), (torch.logsumexp(E, 0) - log_z).numpy(), log_z


def brute_visible_log_p(rbm, rows: np.ndarray) -> np.ndarray:
    """log p(v) of each row by summing over every h and every joint state."""
    v, h = all_states(rbm.n_visible), all_states(rbm.n_hidden)
    W, a, c = rbm.W.double(), rbm.visible_bias.double(), rbm.hidden_bias.double()
    log_z = float(torch.logsumexp(((v @ a)[:, None] + (h @ c)[None, :] + v @ W @ h.T).reshape(-1), 0))
    x = torch.as_tensor(rows, dtype=torch.float64)
    return (torch.logsumexp((x @ a)[:, None] + (h @ c)[None, :] + x @ W @ h.T, 1) - log_z).numpy()


def top_mass(log_p: np.ndarray, k: int) -> float:
    return float(np.exp(np.sort(log_p)[::-1][:k]).sum())


# --------------------------------------------------------------------------- hidden mass
def test_hidden_mass_exact_equals_brute_force():
    rbm = random_rbm(6, 7, seed=3, scale=1.5)
    _, log_p, log_z = brute_hidden_log_p(rbm)
    hm = hidden_mass_exact(rbm, chunk=16)  # several chunks: the running top-k and log-sum-exp are merged
    assert hm["method"] == "exact" and hm["H"] == 7 and hm["n_states"] == 128
    assert hm["log_z"] == pytest.approx(log_z, abs=1e-10)
    for k in TOP:
        assert hm[f"top{k}"] == pytest.approx(top_mass(log_p, k), abs=1e-12)
    # the states returned are the most probable ones, most probable first
    order = np.argsort(log_p)[::-1]
    codes = (hm["top_states"].astype(np.int64) << np.arange(7)).sum(1)
    brute_codes = (all_states(7).numpy()[order[:100]].astype(np.int64) << np.arange(7)).sum(1)
    assert np.array_equal(np.sort(codes[:10]), np.sort(brute_codes[:10]))
    assert np.allclose(hm["top_log_p"], np.sort(log_p)[::-1][:100], atol=1e-10)


def test_hidden_mass_from_exact_draws_agrees_within_its_standard_error():
    rbm = random_rbm(6, 7, seed=4, scale=1.5)
    states, log_p, _ = brute_hidden_log_p(rbm)
    p = np.exp(log_p)
    draws = np.random.default_rng(0).choice(len(p), size=20_000, p=p / p.sum())
    hm = hidden_mass_from_samples(states[draws], TOP)
    assert hm["n_samples"] == 20_000 and hm["se_method"].startswith("binomial")
    for k in TOP:
        exact = top_mass(log_p, k)
        assert abs(hm[f"top{k}"] - exact) < Z * hm[f"top{k}_se"] + 1e-12, (k, hm[f"top{k}"], exact)


def test_hidden_mass_standard_error_sees_correlated_chains():
    """Chains that never move: the binomial standard error treats N draws as independent, the between-chain
    one sees only as many as there are chains."""
    rng = np.random.default_rng(1)
    chains = 20
    start = rng.integers(0, 2, (chains, 5))
    h = np.tile(start, (50, 1))  # row i from chain i % chains, the same state all along
    hm = hidden_mass_from_samples(h, TOP, chains=chains)
    independent = hidden_mass_from_samples(h, TOP)
    p = hm["top1"]
    assert 0 < p < 1
    assert hm["top1_se"] >= math.sqrt(p * (1 - p) / chains) * 0.9 > 2 * independent["top1_se"]


def test_hidden_mass_from_samples_refuses_bad_input():
    with pytest.raises(ValueError, match="non-empty"):
        hidden_mass_from_samples(np.zeros((0, 3)))


# --------------------------------------------------------------------------- per-class log-likelihood
def test_per_class_means_weighted_by_counts_sum_to_the_overall_mean():
    rng = np.random.default_rng(2)
    log_f = rng.normal(-60.0, 7.0, size=997)
    labels = rng.integers(0, 7, size=997)
    pc = per_class_log_likelihood(log_f, labels, log_z=12.5, log_z_se=0.3)
    n = sum(c["n"] for c in pc["classes"])
    assert n == pc["overall"]["n"] == 997
    weighted = math.fsum(c["n"] * c["mean_test_ll"] for c in pc["classes"]) / n
    assert weighted == pc["overall"]["mean_test_ll"]
    assert pc["overall"]["mean_test_ll"] == pytest.approx(log_f.mean() - 12.5, abs=1e-11)
    for c in pc["classes"]:
        rows = log_f[labels == c["class"]]
        assert c["se"] == pytest.approx(rows.std(ddof=1) / math.sqrt(len(rows)), rel=1e-12)
    assert pc["log_z_se"] == 0.3
    with pytest.raises(ValueError, match="same length"):
        per_class_log_likelihood(log_f, labels[:-1], 0.0)


def _tiny_dataset(path: Path, nv: int, seed: int = 0, image_shape=(2, 3)) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = {
        "train": rng.integers(0, 2, (40, nv)).astype(np.uint8),
        "test": rng.integers(0, 2, (30, nv)).astype(np.uint8),
        "test_labels": rng.integers(0, 3, 30).astype(np.int64),
        "image_shape": np.asarray(image_shape, dtype=np.int64),
        "meta": np.asarray(json.dumps({"dataset": "tiny", "n_features": nv})),
    }
    np.savez_compressed(path, **arrays)
    return arrays


SETTINGS = {
    "model": "tiny",
    "family": "rbm",
    "dataset": "tiny",
    "learner": None,
    "init": "base-rate",
    "annealed_K": 20,
    "device": "cpu",
    "n_samples": 30,
    "burn_in": 20,
    "hidden_samples": 20_000,
    "hidden_chains": 20,
    "exact_max_units": 16,
    "ais_chains": 20,
    "seed": 0,
}


def test_diagnose_job_matches_brute_force_on_a_tiny_rbm(tmp_path):
    rbm = random_rbm(6, 5, seed=5, scale=1.0)
    save_model(rbm, tmp_path / "m.npz")
    data = _tiny_dataset(tmp_path / "d.npz", 6)
    files = dict(model=tmp_path / "m.npz", data=tmp_path / "d.npz")
    rec = diagnose_job(SETTINGS, **files, out_json=tmp_path / "o.json", out_npz=tmp_path / "o.npz")
    assert json.loads((tmp_path / "o.json").read_text()) == rec
    # per-class means against brute-force per-row log p(v), log Z enumerated here
    pc = rec["per_class"]
    assert pc["log_z_source"] == "exact (enumerated here)" and pc["log_z_se"] == 0.0
    exact = brute_visible_log_p(rbm, data["test"])
    for c in pc["classes"]:
        rows = exact[data["test_labels"] == c["class"]]
        assert c["n"] == len(rows) and c["mean_test_ll"] == pytest.approx(rows.mean(), abs=1e-9)
    assert pc["overall"]["mean_test_ll"] == pytest.approx(exact.mean(), abs=1e-9)
    # hidden mass enumerated, samples of the model and of p_ann drawn, every array saved
    _, log_p, _ = brute_hidden_log_p(rbm)
    assert rec["hidden_mass"]["method"] == "exact"
    assert rec["hidden_mass"]["top10"] == pytest.approx(top_mass(log_p, 10), abs=1e-12)
    with np.load(tmp_path / "o.npz") as z:
        assert z["samples"].shape == z["annealed_samples"].shape == (30, 6)
        assert set(np.unique(z["samples"])) <= {0, 1}
        assert np.array_equal(z["per_class_labels"], data["test_labels"])
    assert rec["samples"]["method"] == "exact" and rec["annealed_samples"]["method"] == "ais-final"
    assert rec["annealed_samples"]["K"] == 20 and rec["figures"] == ["samples", "annealed_samples"]


def _without_times(x):
    """A record without its wall-clock times (``seconds`` at any depth)."""
    if isinstance(x, dict):
        return {k: _without_times(v) for k, v in x.items() if k != "seconds"}
    return x


def test_diagnose_job_sampled_hidden_mass_agrees_with_exact(tmp_path):
    rbm = random_rbm(6, 5, seed=6, scale=1.5)
    save_model(rbm, tmp_path / "m.npz")
    _tiny_dataset(tmp_path / "d.npz", 6)
    kw = dict(model=tmp_path / "m.npz", data=tmp_path / "d.npz", hidden_method="samples")
    # exact_max_units 2 < min(6, 5): the hidden states come from Gibbs chains (20 of them)
    settings = {**SETTINGS, "exact_max_units": 2, "burn_in": 50}
    rec = diagnose_job(settings, out_json=tmp_path / "a.json", out_npz=tmp_path / "a.npz", **kw)
    hm = rec["hidden_mass"]
    assert hm["method"] == "samples" and hm["sampler"] == "gibbs" and hm["n_samples"] == 20_000 and hm["chains"] == 20
    _, log_p, _ = brute_hidden_log_p(rbm)
    for k in TOP:
        assert abs(hm[f"top{k}"] - top_mass(log_p, k)) < Z * hm[f"top{k}_se"] + 1e-12, (k, hm)
    # no exact record and nothing enumerated: log Z of a small AIS run here, with its standard error
    assert rec["per_class"]["log_z_source"].startswith("ais (run here")
    assert rec["per_class"]["log_z_se"] > 0
    # the same seed gives the same diagnostics
    again = diagnose_job(settings, out_json=tmp_path / "b.json", out_npz=tmp_path / "b.npz", **kw)
    assert _without_times(again) == _without_times(rec)
    with np.load(tmp_path / "a.npz") as a, np.load(tmp_path / "b.npz") as b:
        assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)


def test_log_z_for_prefers_exact_then_ais_at_the_largest_K():
    def rec(method, K, init, seed, lz, se, estimator=None):
        return {
            "method": method,
            "estimator": estimator or method,
            "K": K,
            "init": init,
            "seed": seed,
            "result": {"log_z": lz, "log_z_stderr": se},
        }

    ais = [
        rec("ais", 100, "base-rate", 0, 10.0, 0.3),
        rec("ais", 100, "base-rate", 1, 10.4, 0.4),
        rec("ais", 100, "uniform", 0, 9.0, 1.0),
        rec("ais", 10, "base-rate", 0, 8.0, 2.0),
        rec("ais", 1000, "base-rate", 0, 11.0, 0.1, estimator="ais-adaptive"),
    ]
    got = log_z_for(ais[:4])
    assert got["log_z"] == pytest.approx(10.2) and got["log_z_se"] == pytest.approx(0.25)  # sqrt(.09 + .16) / 2
    assert got["source"] == "ais (workflow, K=100, init=base-rate, 2 seeds)"
    assert log_z_for(ais)["source"].startswith("ais-adaptive (workflow, K=1000")  # the largest K wins
    assert log_z_for([*ais, rec("exact", None, None, None, 10.1, None)]) == {
        "source": "exact",
        "log_z": 10.1,
        "log_z_se": 0.0,
    }
    assert log_z_for(ais, enumerated=10.05)["source"] == "exact (enumerated here)"
    with pytest.raises(ValueError, match="no exact or AIS"):
        log_z_for([])


# --------------------------------------------------------------------------- the report
def test_report_writes_tables_and_figures_from_diagnostics_files(tmp_path):
    from logzbench.report.diagnostics import HIDDEN_MASS_COLUMNS, PER_CLASS_COLUMNS, write_diagnostics

    d = tmp_path / "diagnostics"
    d.mkdir()
    rbm = random_rbm(6, 5, seed=7)
    save_model(rbm, tmp_path / "m.npz")
    _tiny_dataset(tmp_path / "d.npz", 6)
    files = dict(model=tmp_path / "m.npz", data=tmp_path / "d.npz")
    diagnose_job(SETTINGS, **files, out_json=d / "tiny.json", out_npz=d / "tiny_samples.npz")
    # a continuous model's record: filters only (4 bases of 3 x 3 pixels), per-class not available
    (d / "cont.json").write_text(
        json.dumps(
            {
                "model": "cont",
                "family": "linear-gaussian",
                "image_shape": [3, 3],
                "figures": ["filters"],
                "filters": {"array": "Phi", "kind": "bases", "n": 4, "space": "pixels"},
                "per_class": {"not_available": "the dataset has no test labels"},
            }
        )
    )
    np.savez(d / "cont_samples.npz", filters=np.random.default_rng(0).normal(size=(4, 9)))
    # a deep model: nothing but reasons
    deep = {"model": "deep", "family": "dbm", "figures": [], "per_class": {"not_available": "x"}}
    (d / "deep.json").write_text(json.dumps(deep))
    np.savez(d / "deep_samples.npz", empty=np.zeros(0))
    out = tmp_path / "report"
    paths = write_diagnostics(sorted(d.glob("*.json")), out)
    hm = pd.read_csv(out / "table_hidden_mass.csv")
    assert list(hm.columns) == HIDDEN_MASS_COLUMNS and list(hm["model"]) == ["tiny"] and hm["method"].iloc[0] == "exact"
    assert (hm["top1"] <= hm["top10"]).all() and (hm["top10"] <= hm["top100"]).all() and (hm["top100"] <= 1).all()
    pc = pd.read_csv(out / "table_per_class.csv", keep_default_na=False)
    assert list(pc.columns) == PER_CLASS_COLUMNS and set(pc["model"]) == {"tiny"}
    classes, overall = pc[pc["class"] != "all"], pc[pc["class"] == "all"].iloc[0]
    assert classes["n"].sum() == overall["n"] == 30
    weighted = (classes["n"] * classes["mean_test_ll"]).sum() / overall["n"]
    assert weighted == pytest.approx(overall["mean_test_ll"], abs=1e-8)  # the CSV keeps 10 significant digits
    assert set(paths["diagnostic_plots"]) == {"tiny_samples", "tiny_annealed_samples", "cont_filters"}
    for p in paths["diagnostic_plots"].values():
        assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # without records: both tables with their header only
    empty = write_diagnostics([], tmp_path / "empty")
    assert list(pd.read_csv(empty["table_hidden_mass"]).columns) == HIDDEN_MASS_COLUMNS
    assert len(pd.read_csv(empty["table_per_class"])) == 0 and empty["diagnostic_plots"] == {}


# --------------------------------------------------------------------------- the workflow
def _dry_run_counts(tmp_path: Path, *extra: str) -> dict[str, int]:
    pytest.importorskip("snakemake")
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path)]
    cmd += ["--cores", "1", "-n", "--configfile", str(REPO / "config" / "test.yaml"), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    block = (proc.stdout + proc.stderr).split("Job stats:", 1)[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+(\d+)\s*$", block, flags=re.M)}


def test_dry_run_has_one_diagnose_job_per_diagnosed_model(tmp_path):
    import yaml

    from logzbench.pipeline import config_schema, plan
    from logzbench.pipeline.diagnose import diagnosed_models

    config = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    config_schema.load_config(
        config, yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    )
    expected = diagnosed_models(plan.load(config))  # the RBM, the DBM, the DBN and both continuous models
    assert len(expected) == len(config["models"]) == 5
    assert _dry_run_counts(tmp_path)["diagnose"] == len(expected)
    assert not (tmp_path / "results").exists()


def test_dry_run_without_diagnostics_has_no_diagnose_job(tmp_path):
    counts = _dry_run_counts(tmp_path, "--config", "diagnostics={'enabled': False}")
    assert "diagnose" not in counts and counts["report"] == 1
