"""Brackets in the workflow and the report (issue 23): the config schema's new keys, the settings the sweep
records, table_bracket.csv, plots/<model>_bracket.png, the bracket columns of table_continuous.csv and
the MLflow run of a bracket, all from synthetic records written as the workflow writes them
(``results/estimates/<model>/<estimator>/<stem>.{json,npz}``: :func:`logzbench.pipeline.jobs.run_estimate`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import write_estimate_record

from logzbench.errors import ConfigError
from logzbench.estimators.result import EstimateResult
from logzbench.pipeline import config as checks
from logzbench.pipeline import config_schema, sweep
from logzbench.report import BRACKET_COLUMNS, build_report, make_table_bracket
from logzbench.report.records import find_records

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"

EXACT_LOG_Z, EXACT_LL = 10.0, -20.0


# --------------------------------------------------------------------------- synthetic workflow records
def _settings(model, estimator, method, *, family="rbm", K=None, init=None, seed=None, **more):
    hidden = [8]
    return {
        "model": model,
        "dataset": "digits" if family == "rbm" else "vh-4",
        "estimator": estimator,
        "method": method,
        "K": K,
        "init": init,
        "seed": seed,
        "device": "cpu",
        "n_visible": 64 if family == "rbm" else 4,
        "family": family,
        "hidden_sizes": hidden,
        "n_hidden": 8 if family == "rbm" else None,
        **more,
    }


def _end(prefix, value, stderr, estimator, of, words, n=1, confidence=0.95):
    """One end of a bracket as the estimators record it (``logzbench.estimators.bracket``): a guaranteed end
    (``of`` given) with its Markov slack ``log(1 / (1 - confidence)) / n``, an approximate one without."""
    slack = math.log(1.0 / (1.0 - confidence)) / n if of else None
    return {
        prefix: value,
        f"{prefix}_estimate": value - (-0.1 if prefix.endswith("lower") else 0.1),
        f"{prefix}_stderr": stderr,
        f"{prefix}_estimator": estimator,
        f"{prefix}_guaranteed": of is not None,
        f"{prefix}_of": of,
        f"{prefix}_slack": slack,
        f"{prefix}_guarantee": words + (f" (slack {slack:.3g} nats at confidence {confidence:g})" if of else ""),
    }


def _bracket(q, lower, upper, confidence=0.95):
    out = {**lower, **upper}
    out[f"{q}_width"] = out[f"{q}_upper"] - out[f"{q}_lower"]
    out[f"{q}_crossed"] = out[f"{q}_width"] < 0
    return {**out, "confidence": confidence, "noise_z": 2.24}


def _sandwich_result(seed: int, z: tuple[float, float], ll: tuple[float, float], *, rounds=3, target=1.0):
    """A sandwich result whose bracket on log Z is ``z`` and on the mean log-likelihood ``ll`` at its last
    round, with ``rounds`` rounds of K doubling from K = 10 (100 chains)."""
    b = {
        **_bracket(
            "log_z",
            _end("log_z_lower", z[0], 0.05, "ais", "p", "stochastic lower bound of log Z"),
            _end("log_z_upper", z[1], 0.06, "reverse-ais", None, "upper end: no exact model samples"),
        ),
        **_bracket(
            "mean_log_likelihood",
            _end(
                "mean_log_likelihood_lower",
                ll[0],
                0.1,
                "raise",
                "p_ann",
                "stochastic lower bound (annealing model)",
                20,
            ),
            _end("mean_log_likelihood_upper", ll[1], 0.1, "ais", None, "AIS errs high: no guarantee"),
        ),
    }
    history = []
    for r in range(rounds):
        grow = 2.0 ** (rounds - 1 - r)  # the bracket halves every round
        mz, hz = 0.5 * (z[0] + z[1]), 0.5 * (z[1] - z[0]) * grow
        ml, hl = 0.5 * (ll[0] + ll[1]), 0.5 * (ll[1] - ll[0]) * grow
        history.append(
            {
                "K": 10 * 2**r,
                "total_sweeps": 100 * 10 * (2 ** (r + 1) - 1) + 500,
                "seconds": 0.1 * r,
                "log_z_lower": mz - hz,
                "log_z_upper": mz + hz,
                "mean_log_likelihood_lower": ml - hl,
                "mean_log_likelihood_upper": ml + hl,
                "width": 2 * hz,
            }
        )
    width = z[1] - z[0]
    b.update(
        target_width=target,
        width_reached=bool(width <= target),
        quantity="log_z",
        K=history[-1]["K"],
        total_sweeps=history[-1]["total_sweeps"],
        K_needed=None if width <= target else 4 * history[-1]["K"],
        reason="width reached" if width <= target else "max_sweeps spent",
        history=history,
    )
    return EstimateResult(
        estimator="sandwich",
        log_z=0.5 * sum(z),
        log_z_ci=z,
        log_z_stderr=0.05,
        n_chains=100,
        mean_log_likelihood=0.5 * sum(ll),
        mean_log_likelihood_ci=ll,
        mean_log_likelihood_stderr=0.1,
        seconds=0.3,
        n_sweeps=history[-1]["total_sweeps"] // 100,
        total_sweeps=history[-1]["total_sweeps"],
        settings={"seed": seed},
        log_weights=np.linspace(-1, 0, 100),
        schedule=np.linspace(0.0, 1.0, 41),
        extra={"bracket": b, "pilot_sweeps": 500, "pilot_K": 12, "pilot_seconds": 0.01, "pilot_resampled": 3},
    )


def _bdmc_result(K: int, ll: tuple[float, float], exact: float):
    b = _bracket(
        "mean_log_likelihood",
        _end("mean_log_likelihood_lower", ll[0], 0.02, "bdmc-forward", "p", "forward HAIS: E[w] = p(x)", 50),
        _end("mean_log_likelihood_upper", ll[1], 0.02, "bdmc-reverse", "p", "reverse HAIS from the exact latent", 50),
    )
    return EstimateResult(
        estimator="bdmc",
        n_chains=10,
        mean_log_likelihood=0.5 * sum(ll),
        mean_log_likelihood_ci=ll,
        mean_log_likelihood_stderr=0.01,
        seconds=0.2,
        n_sweeps=2 * K - 1,
        total_sweeps=(2 * K - 1) * 10 * 50,
        settings={"K": K, "chains": 10, "n_examples": 50},
        log_weights=np.zeros((50, 10)),
        schedule=np.linspace(0.0, 1.0, K + 1),
        extra={"bracket": b, "data": "simulated", "n_simulated": 50, "exact_mean_log_likelihood": exact},
    )


@pytest.fixture
def workflow_results(tmp_path):
    """A results tree: an RBM with an exact value and two sandwich seeds (seed 0 contains the exact log Z,
    seed 1 misses it), a linear-Gaussian model with HAIS and BDMC at two K."""
    root = tmp_path
    exact = EstimateResult(
        estimator="exact",
        log_z=EXACT_LOG_Z,
        log_z_stderr=0.0,
        mean_log_likelihood=EXACT_LL,
        mean_log_likelihood_stderr=0.5,
        per_example_log_likelihood=np.full(20, EXACT_LL),
    )
    write_estimate_record(root, _settings("m", "exact", "exact"), exact, "exact")
    write_estimate_record(
        root,
        _settings(
            "m",
            "sandwich",
            "sandwich",
            K=10,
            init="base-rate",
            seed=0,
            schedule="adaptive",
            pilot_chains=50,
            target_ess=0.9,
            chains=100,
            target_width=1.0,
            max_sweeps=10**6,
            confidence=0.95,
        ),
        _sandwich_result(0, (9.6, 10.3), (-20.4, -19.7)),
        "seed0",
    )
    write_estimate_record(
        root,
        _settings(
            "m",
            "sandwich",
            "sandwich",
            K=10,
            init="base-rate",
            seed=1,
            schedule="adaptive",
            pilot_chains=50,
            target_ess=0.9,
            chains=100,
            target_width=0.5,
            max_sweeps=10**6,
            confidence=0.95,
        ),
        _sandwich_result(1, (10.2, 10.9), (-20.9, -20.1), target=0.5),
        "seed1",
    )
    hais = EstimateResult(
        estimator="hais",
        log_z=3.0,
        log_z_stderr=0.1,
        mean_log_likelihood=-5.0,
        mean_log_likelihood_stderr=0.1,
        n_chains=10,
        n_sweeps=20,
        total_sweeps=200,
        log_weights=np.full(10, 3.0),
        schedule=np.linspace(0, 1, 21),
        extra={"per_example_ll_sd": 1.0},
    )
    write_estimate_record(
        root,
        _settings("c", "hais", "hais", family="linear-gaussian", K=20, seed=0, schedule="linear", chains=10),
        hais,
        "K20_seed0",
    )
    for K, ll in ((10, (-6.0, -4.0)), (100, (-5.2, -4.9))):
        write_estimate_record(
            root,
            _settings(
                "c",
                "bdmc",
                "bdmc",
                family="linear-gaussian",
                K=K,
                seed=0,
                schedule="linear",
                chains=10,
                n_examples=50,
                confidence=0.95,
            ),
            _bdmc_result(K, ll, -5.05),
            f"K{K}_seed0",
        )
    return root


# --------------------------------------------------------------------------- table_bracket.csv and plots
def test_table_bracket_from_workflow_records(workflow_results, tmp_path):
    est = workflow_results / "results" / "estimates"
    out = tmp_path / "report"
    paths = build_report(est, out, bracket_models=["m", "c", "no-bracket"])
    t = pd.read_csv(out / "table_bracket.csv", keep_default_na=False, na_values=[""])
    assert list(t.columns) == BRACKET_COLUMNS
    # m: 2 seeds x (log Z, mean LL); c: BDMC at 2 K x the mean log-likelihood of simulated points
    assert len(t) == 2 * 2 + 2
    m = t[t["model"] == "m"].set_index(["seed", "quantity"])
    z0, z1 = m.loc[(0, "log_z")], m.loc[(1, "log_z")]
    assert (z0["lower"], z0["upper"], z0["width"]) == pytest.approx((9.6, 10.3, 0.7))
    assert z0["exact"] == pytest.approx(EXACT_LOG_Z) and str(z0["contains_exact"]) == "True"
    assert str(z1["contains_exact"]) == "False" and z1["exact"] == pytest.approx(EXACT_LOG_Z)
    assert z0["lower_estimator"] == "ais" and z0["upper_estimator"] == "reverse-ais"
    assert str(z0["lower_guaranteed"]) == "True" and str(z0["upper_guaranteed"]) == "False"
    assert z0["lower_slack"] == pytest.approx(math.log(20.0), rel=1e-5) and pd.isna(z0["upper_slack"])
    assert "slack" in z0["lower_guarantee"] and z0["upper_guarantee"] == "upper end: no exact model samples"
    assert z0["confidence"] == 0.95 and z0["target_width"] == 1.0 and str(z0["width_reached"]) == "True"
    assert str(z1["width_reached"]) == "False" and z1["target_width"] == 0.5
    assert z0["K"] == 40 and z0["total_sweeps"] == 100 * 10 * 7 + 500
    assert (z0["lower_estimate"], z0["upper_estimate"], z0["noise_z"]) == pytest.approx((9.7, 10.2, 2.24))
    assert (m["dataset"] == "digits").all() and (m["family"] == "rbm").all() and (m["method"] == "sandwich").all()
    ll0 = m.loc[(0, "mean_log_likelihood")]
    assert ll0["exact"] == pytest.approx(EXACT_LL) and str(ll0["contains_exact"]) == "True"
    assert ll0["lower_slack"] == pytest.approx(math.log(20.0) / 20, rel=1e-5) and ll0["data"] == "test"
    c = t[t["model"] == "c"].sort_values("K")
    assert list(c["K"]) == [10, 100] and (c["quantity"] == "mean_log_likelihood").all()
    assert (c["data"] == "simulated").all() and (c["exact"] == -5.05).all()  # the record's own exact mean
    assert [str(x) for x in c["contains_exact"]] == ["True", "True"]
    assert list(c["total_sweeps"]) == [19 * 500, 199 * 500]
    # the figures: one per model with a bracket estimate, a placeholder for a declared model without one
    for model in ("m", "c", "no-bracket"):
        assert paths["bracket_plots"][model] == out / "plots" / f"{model}_bracket.png"
        assert paths["bracket_plots"][model].stat().st_size > 1000
    assert (out / "plots" / "m_bracket.png").stat().st_size > (out / "plots" / "no-bracket_bracket.png").stat().st_size
    rep = json.loads((out / "report.json").read_text())
    assert len(rep["table_bracket"]) == 6 and set(rep["bracket_plots"]) == {"m", "c", "no-bracket"}
    assert rep["files"]["table_bracket"].endswith("table_bracket.csv")
    assert {r["contains_exact"] for r in rep["table_bracket"]} == {True, False}
    # table_continuous.csv: the bracket of c's mean log-likelihood (BDMC's largest K; simulated points)
    tc = pd.read_csv(out / "table_continuous.csv")
    row = tc.set_index("model").loc["c"]
    assert (row["bracket_lower"], row["bracket_upper"], row["bracket_width"]) == pytest.approx((-5.2, -4.9, 0.3))
    assert row["bracket_estimator"] == "bdmc (simulated data)"
    assert list(tc.columns)[-4:] == ["bracket_lower", "bracket_upper", "bracket_width", "bracket_estimator"]
    assert "bdmc" not in tc.columns and "sandwich" not in tc.columns  # brackets are not point estimates


def test_plot_draws_history_and_exact(workflow_results, tmp_path, monkeypatch):
    """The figure's lines come from the record's history (sandwich) or one point per K (BDMC), log x."""
    from logzbench.report import bracket as bracket_mod

    drawn = {}
    real = bracket_mod._history_points

    def spy(recs, quantity):
        out = real(recs, quantity)
        drawn.setdefault(quantity, []).extend(out)
        return out

    monkeypatch.setattr(bracket_mod, "_history_points", spy)
    recs = find_records(workflow_results / "results" / "estimates")
    table = make_table_bracket(recs)
    assert table["exact"].isna().sum() == 4  # without the per-run table only BDMC's own exact value is known
    bracket_mod.plot_bracket(recs, "m", tmp_path / "m.png", table)
    (s0, s1) = [d for d in drawn["log_z"] if d[0] == "sandwich"]
    assert (s0[2], s1[2]) == (0, 1) and list(s0[3]["total_sweeps"]) == [1500, 3500, 7500]
    assert s0[3]["lower"].iloc[-1] == pytest.approx(9.6) and s0[3]["upper"].iloc[0] == pytest.approx(10.65 + 0.7)
    drawn.clear()
    bracket_mod.plot_bracket(recs, "c", tmp_path / "c.png", table)
    assert [q for q, v in drawn.items() if v] == ["mean_log_likelihood"]
    assert list(drawn["mean_log_likelihood"][0][3]["lower"]) == [-6.0, -5.2]


def test_empty_table_bracket_without_bracket_estimates(tmp_path):
    res = EstimateResult(estimator="exact", log_z=1.0, mean_log_likelihood=-2.0)
    write_estimate_record(tmp_path, _settings("m", "exact", "exact"), res, "exact")
    out = tmp_path / "report"
    paths = build_report(tmp_path / "results" / "estimates", out)
    t = pd.read_csv(paths["table_bracket"])
    assert list(t.columns) == BRACKET_COLUMNS and t.empty and paths["bracket_plots"] == {}
    rep = json.loads((out / "report.json").read_text())
    assert "table_bracket" not in rep and "table_bracket" not in rep["files"]  # report.json as before


# --------------------------------------------------------------------------- the config schema and the sweep
def _validated(**estimator) -> dict:
    from snakemake.utils import validate

    config = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    config["estimators"]["x"] = dict(estimator)
    validate(config, str(SCHEMA))
    config_schema.check_estimator_options(config, yaml.safe_load(SCHEMA.read_text()))  # as workflow/rules/common.smk
    return config


def test_schema_accepts_the_new_keys_with_their_defaults():
    pytest.importorskip("snakemake")
    from logzbench.options import EstimateOptions

    e = _validated(method="ais", schedule="adaptive")["estimators"]["x"]
    defaults = EstimateOptions()
    for k in ("sweeps_per_beta", "pilot_chains", "target_ess", "target_width", "max_sweeps", "confidence"):
        assert e[k] == getattr(defaults, k), k
    e = _validated(
        method="ais",
        schedule="adaptive",
        sweeps_per_beta=3,
        pilot_chains=2,
        target_ess=0.5,
        target_width=0.25,
        max_sweeps=1000,
        confidence=0.99,
    )["estimators"]["x"]
    assert (e["pilot_chains"], e["target_width"], e["confidence"]) == (2, 0.25, 0.99)
    assert _validated(method="ais", pilot_chains=1)["estimators"]["x"]["pilot_chains"] == 1  # not adaptive: unused
    schema = yaml.safe_load(SCHEMA.read_text())
    est = config_schema.estimator_entry_schema(schema)["properties"]
    assert "adaptive" in est["schedule"]["description"]


@pytest.mark.parametrize(
    "bad",
    [
        {"target_width": 0},
        {"target_width": -1.0},
        {"schedule": "adaptive", "pilot_chains": 1},
        {"pilot_chains": 0},
        {"target_ess": 1.0},
        {"target_ess": 0},
        {"confidence": 1.0},
        {"confidence": 0.0},
        {"max_sweeps": 0},
        {"sweeps_per_beta": 0},
        {"sweeps_per_beta": 1.5},
    ],
    ids=lambda b: ",".join(f"{k}={v}" for k, v in b.items()),
)
def test_schema_rejects_bad_values(bad):
    pytest.importorskip("snakemake")
    with pytest.raises(ConfigError, match=rf"estimator x\.{next(iter(bad)) if len(bad) == 1 else 'pilot_chains'}: "):
        _validated(method="ais", **bad)


def _config(**entry):
    return {
        "datasets": {"d": {"source": "digits"}, "v": {"source": "vanhateren", "n_components": 4}},
        "models": {
            "m": {"dataset": "d", "hyperparams": {"n_hidden": 8}},
            "g": {"dataset": "v", "hyperparams": {"family": "linear-gaussian", "size": 4}},
        },
        "evaluation": {
            "K": [10, 20],
            "inits": ["uniform", "base-rate"],
            "seeds": [0, 1],
            "exact_max_units": 20,
            "exact_max_log_f_units": 16,
        },
        "estimators": {"x": dict(entry)},
        "device": "cpu",
    }


def test_sweep_records_schedule_keys_only_where_they_matter():
    """Settings of estimates that use neither stay as they were (no rerun, same MLflow params)."""
    plain = sweep.job_settings(_config(method="ais", chains=5), "m", "x", "K10_uniform_seed0", presets={})
    assert not {"sweeps_per_beta", "pilot_chains", "target_ess", "target_width"} & set(plain)
    s = sweep.job_settings(
        _config(method="ais", chains=5, schedule="adaptive", pilot_chains=7, target_ess=0.8, sweeps_per_beta=2),
        "m",
        "x",
        "K10_uniform_seed0",
        presets={},
    )
    assert (s["schedule"], s["pilot_chains"], s["target_ess"], s["sweeps_per_beta"]) == ("adaptive", 7, 0.8, 2)
    from logzbench.pipeline.jobs import estimate_options

    opts = estimate_options(s)
    assert (opts["schedule"], opts["pilot_chains"], opts["target_ess"], opts["sweeps_per_beta"], opts["K"]) == (
        "adaptive",
        7,
        0.8,
        2,
        10,
    )
    s = sweep.job_settings(_config(method="hais", sweeps_per_beta=1, pilot_chains=3), "g", "x", "K10_seed0", presets={})
    assert "sweeps_per_beta" not in s and "pilot_chains" not in s


def test_sandwich_jobs_and_settings():
    """The sandwich is swept over seeds only; its one K is the starting K, its one init the path's start."""
    config = _config(
        method="sandwich",
        K=[16],
        inits=["base-rate"],
        chains=50,
        schedule="adaptive",
        target_width=0.5,
        max_sweeps=10**6,
        confidence=0.9,
    )
    config["estimators"]["x"]["models"] = ["m"]
    assert [j.path() for j in sweep.model_jobs(config, "m", presets={})] == [
        "results/estimates/m/x/seed0.json",
        "results/estimates/m/x/seed1.json",
    ]
    assert not [w for w in checks.check_config(config, presets={}) if "ignored" in w]  # K and inits are used
    s = sweep.job_settings(config, "m", "x", "seed1", presets={})
    assert (s["K"], s["init"], s["seed"], s["target_width"], s["max_sweeps"], s["confidence"], s["pilot_chains"]) == (
        16,
        "base-rate",
        1,
        0.5,
        10**6,
        0.9,
        100,
    )
    from logzbench.pipeline.jobs import estimate_options

    opts = estimate_options(s)
    assert (opts["K"], opts["init"], opts["target_width"], opts["seed"]) == (16, "base-rate", 0.5, 1)
    # without K: the estimator's own starting K; without inits: the family's first initial distribution; without
    # a schedule: the sandwich's own default (the adaptive one; the schema leaves it unset)
    config = _config(method="sandwich", chains=50)
    s = sweep.job_settings(config, "m", "x", "seed0", presets={})
    assert s["K"] is None and s["init"] == "uniform"
    assert (s["schedule"], s["pilot_chains"], s["target_ess"]) == ("adaptive", 100, 0.95)
    assert sweep.job_settings(_config(method="ais"), "m", "x", "K10_uniform_seed0", presets={})["schedule"] == "linear"
    s = sweep.job_settings(config, "g", "x", "seed0", presets={})
    assert s["K"] is None and s["init"] is None  # a continuous model has no initial distribution to choose
    assert "init" not in estimate_options(s)
    with pytest.raises(ConfigError, match="not swept over K.*give one value"):
        checks.check_config(_config(method="sandwich", K=[10, 20]), presets={})
    with pytest.raises(ConfigError, match="not swept over inits.*give one value"):
        checks.check_config(_config(method="sandwich", inits=["uniform", "base-rate"]), presets={})


# --------------------------------------------------------------------------- MLflow
def test_mlflow_logs_a_bracket_and_the_schedule(workflow_results, tmp_path):
    pytest.importorskip("mlflow")
    from logzbench import tracking

    uri = "sqlite:///" + str(tmp_path / "mlflow.db")
    path = workflow_results / "results" / "estimates" / "m" / "sandwich" / "seed0.json"
    record = json.loads(path.read_text())
    run_id = tracking.log_estimate(record, uri=uri, experiment_name="exp", artifacts=[path.with_suffix(".npz")])
    client = tracking.get_client(uri)
    run = client.get_run(run_id)
    m, tags, params = run.data.metrics, run.data.tags, run.data.params
    b = record["result"]["extra"]["bracket"]
    for k in (
        "log_z_lower",
        "log_z_upper",
        "log_z_width",
        "log_z_lower_stderr",
        "log_z_lower_slack",
        "mean_log_likelihood_lower",
        "mean_log_likelihood_upper",
        "mean_log_likelihood_width",
        "confidence",
        "target_width",
        "K",
    ):
        assert m[k] == pytest.approx(b[k]), k
    assert "log_z_upper_slack" not in m and "K_needed" not in m  # unknown: not logged
    assert m["total_sweeps"] == record["result"]["total_sweeps"] and m["pilot_K"] == 12
    assert tags["log_z_lower_guaranteed"] == "true" and tags["log_z_upper_guaranteed"] == "false"
    assert tags["log_z_lower_estimator"] == "ais" and tags["log_z_lower_of"] == "p"
    assert tags["log_z_lower_guarantee"] == b["log_z_lower_guarantee"] and tags["width_reached"] == "true"
    assert tags["log_z_crossed"] == "false" and tags["quantity"] == "log_z" and m["pilot_resampled"] == 3
    assert (params["schedule"], params["pilot_chains"], params["target_width"], params["confidence"]) == (
        "adaptive",
        "50",
        "1",
        "0.95",
    )
    # the existing names are unchanged
    assert {"log_z", "log_z_stderr", "mean_test_ll", "seconds", "total_sweeps"} <= set(m)
    assert {"model", "estimator", "method", "seed", "code_version"} <= set(params)
    arts = {a.path for a in client.list_artifacts(run_id)}
    assert arts == {"seed0.npz", tracking.SCHEDULE_ARTIFACT, tracking.BRACKET_HISTORY_ARTIFACT}
    got = Path(client.download_artifacts(run_id, tracking.BRACKET_HISTORY_ARTIFACT, str(tmp_path)))
    assert json.loads(got.read_text()) == b["history"]
    got = Path(client.download_artifacts(run_id, tracking.SCHEDULE_ARTIFACT, str(tmp_path)))
    from logzbench.schedules import from_file

    assert np.array_equal(from_file(got), np.linspace(0.0, 1.0, 41))  # a schedule file: `schedule: <file>` reruns it


def test_mlflow_logs_the_schedule_of_every_annealed_run(workflow_results, tmp_path):
    pytest.importorskip("mlflow")
    from logzbench import tracking

    uri = "sqlite:///" + str(tmp_path / "mlflow.db")
    est = workflow_results / "results" / "estimates"
    hais = json.loads((est / "c" / "hais" / "K20_seed0.json").read_text())
    run_id = tracking.log_estimate(
        hais, uri=uri, experiment_name="exp", artifacts=[est / "c" / "hais" / "K20_seed0.npz"]
    )
    client = tracking.get_client(uri)
    assert {a.path for a in client.list_artifacts(run_id)} == {"K20_seed0.npz", tracking.SCHEDULE_ARTIFACT}
    run = client.get_run(run_id)
    assert not {k for k in run.data.metrics if k.startswith(("log_z_lower", "mean_log_likelihood_"))}
    # an explicit schedule wins; an estimate without one (exact) logs no schedule
    run_id = tracking.log_estimate(hais, uri=uri, experiment_name="exp", schedule=[0.0, 0.5, 1.0])
    path = Path(client.download_artifacts(run_id, tracking.SCHEDULE_ARTIFACT, str(tmp_path / "x")))
    assert path.read_text().split() == ["0", "0.5", "1"]
    exact = json.loads((est / "m" / "exact" / "exact.json").read_text())
    run_id = tracking.log_estimate(exact, uri=uri, experiment_name="exp", artifacts=[est / "m" / "exact" / "exact.npz"])
    assert {a.path for a in client.list_artifacts(run_id)} == {"exact.npz"}


def test_report_run_carries_the_bracket_outputs(workflow_results, tmp_path):
    pytest.importorskip("mlflow")
    from logzbench import tracking
    from logzbench.report import report_job

    uri = "sqlite:///" + str(tmp_path / "mlflow.db")
    out = workflow_results / "results" / "report"
    files = sorted(str(p) for p in (workflow_results / "results" / "estimates").rglob("*.json"))
    thresholds = {"gap_threshold": 1.0, "ess_fraction": 0.1, "z": 2.0, "truth_tolerance": 0.1}
    paths = report_job(
        files,
        out,
        thresholds=thresholds,
        models=["m", "c"],
        bracket_models=["m", "c"],
        tracking={"enabled": True, "uri": uri, "experiment": "exp"},
    )
    assert paths["table_bracket"].is_file()
    (run,) = tracking.find_runs(uri=uri, experiment_name="exp", kind="report")
    client = tracking.get_client(uri)
    tables = {a.path for a in client.list_artifacts(run.info.run_id, "tables")}
    plots = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    assert "tables/table_bracket.csv" in tables and {"plots/m_bracket.png", "plots/c_bracket.png"} <= plots


def test_a_bracket_whose_raw_ends_cross_is_flagged_in_words(tmp_path):
    """A sandwich whose raw estimates cross (the lower end's above the upper end's): table_bracket says so
    (``crossed``, ``crossed_by``), its ends span both estimates, the review page's bracket table flags it in
    words and the figure circles both ends.  A record written before brackets spanned crossed ends (its
    reported ends inverted, no ``crossed_by``) is flagged the same way."""
    from logzbench.estimators.bracket import End, make_bracket
    from logzbench.report import bracket as bracket_mod
    from logzbench.report.review import _bracket_table

    lo = End("hais", 10.1, 0.05, True, "p", "stochastic lower bound of log Z")
    hi = End("reverse-hais", 9.9, 0.04, False, None, "approximate")
    b = make_bracket("log_z", lo, hi, 0.95, looks=4)
    b.update(target_width=1.0, width_reached=False, quantity="log_z", K=100, total_sweeps=30_000, reason="crossed")
    old = _bracket(
        "log_z",
        _end("log_z_lower", 10.2, 0.05, "ais", "p", "stochastic lower bound of log Z"),
        _end("log_z_upper", 9.8, 0.06, "reverse-ais", None, "approximate"),
    )
    old.update(target_width=1.0, width_reached=False, quantity="log_z", K=100, total_sweeps=30_000)
    for seed, br in ((0, b), (1, old)):
        res = EstimateResult(estimator="sandwich", log_z=10.0, settings={"seed": seed}, extra={"bracket": br})
        write_estimate_record(tmp_path, _settings("m", "sandwich", "sandwich", seed=seed), res, f"sandwich_{seed}")
    t = make_table_bracket(find_records(tmp_path / "results" / "estimates")).set_index("seed")
    new_row, old_row = t.loc[0], t.loc[1]
    assert bool(new_row["crossed"]) and new_row["crossed_by"] == pytest.approx(0.2)
    assert new_row["lower"] <= 9.9 - 0.04 and new_row["upper"] >= 10.1 + 0.05  # the span of both ends
    assert bool(old_row["crossed"]) and old_row["crossed_by"] == pytest.approx(0.6)  # 10.3 - 9.7, raw
    page = _bracket_table(t.reset_index())
    assert page.count("flagged: the raw ends cross by") == 2 and "span of both ends" in page
    assert "by 0.2" in page
    bad_lo, bad_hi = bracket_mod._bracket_flags(
        np.array([9.8, 9.0]), np.array([10.2, 11.0]), np.array([10.0, 10.0]), np.array([True, False])
    )
    assert list(bad_lo) == [True, False] and list(bad_hi) == [True, False]
