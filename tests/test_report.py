"""Report tables and flags on synthetic estimate records."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from logzbench import plotting, report


def rec(
    model,
    estimator,
    *,
    K=None,
    init=None,
    seed=0,
    ll=-100.0,
    ll_se=0.05,
    log_z=None,
    ess=None,
    chains=100,
    method=None,
    schedule="linear",
    family=None,
    hidden_sizes=None,
    extra=None,
):
    method = method or estimator
    deep = {} if family is None else {"family": family, "hidden_sizes": hidden_sizes, "n_visible": 784}
    return {
        **deep,
        "key": f"estimate/{model}/{estimator}/K{K if K is not None else '-'}/{init or '-'}"
        f"/seed{seed if method != 'exact' else '-'}",
        "model": model,
        "dataset": "digits",
        "estimator": estimator,
        "method": method,
        "K": K,
        "init": init,
        "seed": None if method == "exact" else seed,
        "schedule": schedule if method in ("ais", "raise") else None,
        "chains": chains,
        "result": {
            "estimator": method,
            "log_z": log_z,
            "log_z_stderr": 0.01 if log_z is not None else None,
            "ess": ess,
            "n_chains": 0 if method == "exact" else chains,
            "mean_log_likelihood": ll,
            "mean_log_likelihood_stderr": ll_se,
            "seconds": 1.0,
            "n_sweeps": K or 0,
            "total_sweeps": (K or 0) * chains,
            "sweeps_per_second": 100.0,
            "settings": {},
            "extra": dict(extra or {}),
        },
    }


def agreeing_model(model="good", exact=-100.0):
    """An RBM whose AIS, RAISE and CSL estimates all lie within 2 standard errors of the exact value (no
    flag of any rule, the off-exact one included)."""
    out = [rec(model, "exact", ll=exact, log_z=50.0, ll_se=0.5, chains=0)]
    for seed in (0, 1):
        for init in ("uniform", "base-rate"):
            out.append(
                rec(model, "ais", K=1000, init=init, seed=seed, ll=exact + 0.05 + 0.01 * seed, ess=80.0, log_z=49.95)
            )
            out.append(rec(model, "raise", K=1000, init=init, seed=seed, ll=exact - 0.2, ll_se=0.2, ess=8.0, chains=10))
        out.append(rec(model, "csl", K=1000, seed=seed, ll=exact - 0.3, ll_se=0.3, ess=None))
    return out


def test_agreement_not_flagged(tmp_path):
    paths = report.build_report(agreeing_model(), tmp_path)
    s = pd.read_csv(paths["summary"], keep_default_na=False)
    assert (s["flags"] == "").all(), s[["estimator", "init", "flags"]]
    t = pd.read_csv(paths["table1"])
    assert list(t.columns) == [
        "model",
        "schedule",
        "K",
        "exact",
        "csl",
        "csl_se",
        "raise_uniform",
        "raise_uniform_se",
        "ais_uniform",
        "ais_uniform_se",
        "gap_uniform",
        "gap_uniform_se",
        "raise_base-rate",
        "raise_base-rate_se",
        "ais_base-rate",
        "ais_base-rate_se",
        "gap_base-rate",
        "gap_base-rate_se",
        "flags",
    ]
    (row,) = t.itertuples(index=False)
    assert row.K == 1000 and row.exact == pytest.approx(-100.0)
    assert row.csl == pytest.approx(-100.3)
    assert getattr(row, "gap_uniform") == pytest.approx(0.255)  # AIS - RAISE, mean over seeds
    assert getattr(row, "ais_uniform") == pytest.approx(-99.945)
    assert isinstance(row.flags, float) and math.isnan(row.flags)  # empty
    per_run = pd.read_csv(paths["per_run"])
    assert len(per_run) == 1 + 2 * (4 + 1)
    assert (tmp_path / "plots" / "good.png").stat().st_size > 1000
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["n_flagged_settings"] == 0 and rep["n_runs"] == 11


def test_gap_over_one_nat_flagged_and_sign():
    recs = [
        rec("m", "ais", K=100, init="uniform", ll=-90.0, ess=50),
        rec("m", "raise", K=100, init="uniform", ll=-92.5, ess=5, chains=10),
        rec("m", "ais", K=100, init="base-rate", ll=-90.0, ess=50),
        rec("m", "raise", K=100, init="base-rate", ll=-90.3, ess=5, chains=10),
    ]
    per_run = report.load_results(recs)
    s = report.summarize(per_run)
    per_run, s = report.apply_flags(per_run, s, gap_threshold=1.0)
    uni = s[(s["init"] == "uniform")]
    assert list(uni["gap_ais_minus_raise"]) == pytest.approx([2.5, 2.5])  # AIS - RAISE
    assert all("AIS-RAISE gap +2.50 nats" in f for f in uni["flags"])
    br = s[(s["init"] == "base-rate")]
    assert (br["flags"] == "").all()
    assert list(br["gap_ais_minus_raise"]) == pytest.approx([0.3, 0.3])
    # the runs of the flagged settings carry the flag (for the MLflow tags)
    assert all("gap" in f for f in per_run.loc[per_run["init"] == "uniform", "flags"])
    t = report.make_table1(s)
    assert t.loc[0, "gap_uniform"] == pytest.approx(2.5)
    assert "uniform" in t.loc[0, "flags"] and "gap" in t.loc[0, "flags"]
    # a configurable threshold
    _, s2 = report.apply_flags(
        report.load_results(recs), report.summarize(report.load_results(recs)), gap_threshold=5.0
    )
    assert (s2["flags"] == "").all()


def test_low_ess_flagged():
    recs = [
        rec("m", "ais", K=100, init="uniform", seed=0, ll=-90.0, ess=9.0, chains=100),
        rec("m", "ais", K=100, init="uniform", seed=1, ll=-90.0, ess=50.0, chains=100),
        rec("m", "ais", K=1000, init="uniform", seed=0, ll=-90.0, ess=10.0, chains=100),
    ]
    per_run = report.load_results(recs)
    per_run, s = report.apply_flags(per_run, report.summarize(per_run), ess_fraction=0.1)
    flagged = per_run[per_run["flags"] != ""]
    assert len(flagged) == 1 and flagged.iloc[0]["seed"] == 0 and flagged.iloc[0]["K"] == 100
    assert "low ESS: 9 of 100 chains (9% < 10%)" in flagged.iloc[0]["flags"]
    row = s[s["K"] == 100].iloc[0]
    assert "low ESS (seed 0)" in row["flags"]
    assert s[s["K"] == 1000].iloc[0]["flags"] == ""  # exactly 10 % is not below 10 %
    _, s2 = report.apply_flags(per_run, report.summarize(per_run), ess_fraction=0.05)
    assert (s2["flags"] == "").all()


def test_raise_above_ais_and_lower_bound_above_exact():
    recs = [
        rec("m", "exact", ll=-100.0, log_z=10.0, ll_se=0.0, chains=0),
        rec("m", "ais", K=100, init="base-rate", ll=-100.2, ll_se=0.05, ess=60),
        rec("m", "raise", K=100, init="base-rate", ll=-99.6, ll_se=0.05, ess=8, chains=10),
        rec("m", "csl", K=100, ll=-99.0, ll_se=2.0, ess=None),
    ]
    per_run = report.load_results(recs)
    per_run, s = report.apply_flags(per_run, report.summarize(per_run), gap_threshold=1.0, z=2.0)
    r = s[s["method"] == "raise"].iloc[0]["flags"]
    a = s[s["method"] == "ais"].iloc[0]["flags"]
    assert "RAISE exceeds AIS by 0.60 nats" in r and "RAISE exceeds AIS" in a
    assert "RAISE lower bound exceeds exact by 0.40 nats" in r
    assert "gap" not in r  # |gap| = 0.6 < 1 nat
    # CSL is 1 nat above exact but within 2 s.e. (2.0): not flagged
    assert s[s["method"] == "csl"].iloc[0]["flags"] == ""
    assert s[s["method"] == "raise"].iloc[0]["ll_minus_exact"] == pytest.approx(0.4)


def test_aggregation_over_seeds():
    recs = [
        rec("m", "ais", K=100, init="uniform", seed=s, ll=v, ll_se=0.3, ess=50)
        for s, v in [(0, -91.0), (1, -89.0), (2, -90.0)]
    ]
    s = report.summarize(report.load_results(recs))
    (row,) = s.itertuples(index=False)
    assert row.n_seeds == 3 and row.seeds == "0 1 2"
    assert row.mean_test_ll == pytest.approx(-90.0)
    assert row.mean_test_ll_sd == pytest.approx(1.0)
    assert row.mean_test_ll_min == -91.0 and row.mean_test_ll_max == -89.0
    assert row.mean_test_ll_se == pytest.approx(math.sqrt(3 * 0.09) / 3)


def test_load_from_directory_and_flat_records(tmp_path):
    d = tmp_path / "estimates" / "m" / "ais"
    d.mkdir(parents=True)
    (d / "K10_uniform_seed0.json").write_text(json.dumps(rec("m", "ais", K=10, init="uniform", ess=50)))
    flat = rec("m", "raise", K=10, init="uniform", ess=5, chains=10)["result"]
    flat["settings"] = {
        "model": "results/models/m.npz",
        "steps": 10,
        "init": "uniform",
        "seed": 0,
        "schedule": "linear",
    }
    (tmp_path / "estimates" / "flat.json").write_text(json.dumps(flat))
    (tmp_path / "estimates" / "other.json").write_text(json.dumps({"unrelated": 1}))
    df = report.load_results(tmp_path / "estimates")
    assert sorted(df["method"]) == ["ais", "raise"]
    assert set(df["model"]) == {"m"} and set(df["K"]) == {10}


def test_placeholder_plot_for_model_without_estimates(tmp_path):
    paths = report.build_report(agreeing_model("a"), tmp_path, models=["a", "b"])
    assert set(paths["plots"]) == {"a", "b"}
    assert paths["plots"]["b"].exists()


def test_report_tags_mlflow_runs(tmp_path):
    pytest.importorskip("mlflow", reason="mlflow is not installed")
    from logzbench import tracking

    uri = "sqlite:///" + str(tmp_path / "mlflow.db")
    tracking.init_store(uri, "exp")
    recs = [
        rec("m", "ais", K=100, init="uniform", ll=-90.0, ess=50),
        rec("m", "raise", K=100, init="uniform", ll=-93.0, ess=5, chains=10),
        rec("m", "ais", K=100, init="base-rate", ll=-90.0, ess=50),
    ]
    for r in recs:
        tracking.log_estimate(r, uri=uri, experiment_name="exp")
    paths = report.build_report(recs, tmp_path / "out", tracking_uri=uri, experiment_name="exp")
    assert paths["n_flagged"] == 2
    runs = {r.data.tags[tracking.KEY_TAG]: r for r in tracking.find_runs(uri=uri, experiment_name="exp")}
    assert "gap" in runs[recs[0]["key"]].data.tags[tracking.FLAG_TAG]
    assert runs[recs[1]["key"]].data.tags[tracking.FLAGGED_TAG] == "true"
    assert runs[recs[2]["key"]].data.tags[tracking.FLAGGED_TAG] == "false"


def test_two_workers_write_the_same_report_and_tags_as_one(tmp_path):
    """The report's figures drawn in a forked process (workers=2) while this one tags the MLflow runs: the same
    files, byte for byte (PNG; the PDFs carry their creation date), the same paths and flags as one process."""
    pytest.importorskip("mlflow", reason="mlflow is not installed")
    from logzbench import tracking

    recs = [
        rec("m", "ais", K=100, init="uniform", ll=-90.0, ess=50),
        rec("m", "raise", K=100, init="uniform", ll=-93.0, ess=5, chains=10),
        rec("m", "ais", K=100, init="base-rate", ll=-90.0, ess=50),
    ]
    out = {}
    for workers in (1, 2):
        uri = "sqlite:///" + str(tmp_path / f"mlflow{workers}.db")
        tracking.init_store(uri, "exp")
        for r in recs:
            tracking.log_estimate(r, uri=uri, experiment_name="exp")
        root = tmp_path / f"out{workers}"
        paths = report.build_report(
            recs, root, models=["m", "b"], tracking_uri=uri, experiment_name="exp", workers=workers
        )
        runs = tracking.find_runs(uri=uri, experiment_name="exp")
        tags = sorted((r.data.tags[tracking.KEY_TAG], r.data.tags.get(tracking.FLAG_TAG)) for r in runs)
        files = {
            str(f.relative_to(root)): f.read_bytes() for f in sorted(root.rglob("*")) if f.suffix in (".png", ".csv")
        }
        out[workers] = (
            paths["n_flagged"],
            {k: str(Path(v).relative_to(root)) for k, v in paths["plots"].items()},
            tags,
            files,
        )
    assert out[2][:3] == out[1][:3]
    assert out[2][3].keys() == out[1][3].keys() and any(k.endswith(".png") for k in out[1][3])
    assert [k for k in out[1][3] if out[1][3][k] != out[2][3][k]] == []


def test_csl_ess_against_samples_and_flag_text_separable():
    r = rec("m", "csl", K=100, ll=-99.0, ess=50.0, chains=100)
    r["result"]["n_chains"] = 10000  # CSL: weights are the S = chains x samples_per_chain samples
    recs = [
        r,
        rec("m", "exact", ll=-100.0, log_z=1.0, ll_se=0.0, chains=0),
        rec("m", "ais", K=100, init="uniform", ll=-100.0, ll_se=0.01, ess=50),
        rec("m", "raise", K=100, init="uniform", ll=-97.0, ll_se=0.01, ess=5, chains=10),
    ]
    per_run = report.load_results(recs)
    per_run, s = report.apply_flags(per_run, report.summarize(per_run))
    csl = per_run[per_run["method"] == "csl"].iloc[0]
    assert csl["n_weights"] == 10000 and csl["chains"] == 100
    assert "low ESS: 50 of 10000 samples" in csl["flags"]
    # every reason is one item of the "; "-separated list (no "; " inside a reason)
    raise_flags = s[s["method"] == "raise"].iloc[0]["flags"].split("; ")
    assert len(raise_flags) == 3, raise_flags  # gap, RAISE > AIS, above exact
    assert all(f.startswith(("AIS-RAISE gap", "RAISE exceeds AIS", "RAISE lower bound")) for f in raise_flags)


def test_plot_history(tmp_path):
    history = [
        {
            "epoch": e,
            "train_reconstruction_error": 1.0 / (e + 1),
            "test_log_likelihood": -100.0 + e,
            "seconds": 0.1,
            "note": "x",
        }
        for e in range(4)
    ]
    p = report.plot_history(history, tmp_path / "h.png", title="m")
    assert p.stat().st_size > 1000
    assert report.plot_history([], tmp_path / "empty.png").exists()
    assert report.plot_history is plotting.plot_history  # training curves live in plotting, re-exported here


# --------------------------------------------------------------------------- deep models (table 2)
def deep_records():
    """A DBM (both inits, 2 seeds, 2 K, exact) and a DBN (uniform only, 2 seeds, 1 K), plus an RBM."""
    out = [rec("dbm", "exact", ll=-90.0, log_z=20.0, ll_se=0.0, chains=0, family="dbm", hidden_sizes=[20, 10])]
    lf = {
        "mean_log_f_is": 30.0,
        "mean_log_f_is_stderr": 0.02,
        "mean_log_f_is_jensen_gap": 0.001,
        "mean_log_f_mean_field": 29.5,
    }
    for seed in (0, 1):
        for K in (100, 1000):
            for init, shift in (("uniform", 0.0), ("base-rate", 0.5)):
                out.append(
                    rec(
                        "dbm",
                        "ais",
                        K=K,
                        init=init,
                        seed=seed,
                        ll=-89.0 + shift + seed,
                        ll_se=0.1,
                        ess=60,
                        log_z=19.0,
                        family="dbm",
                        hidden_sizes=[20, 10],
                        extra=lf,
                    )
                )
                out.append(
                    rec(
                        "dbm",
                        "raise",
                        K=K,
                        init=init,
                        seed=seed,
                        ll=-92.0 + shift + seed,
                        ll_se=0.2,
                        ess=6,
                        chains=10,
                        family="dbm",
                        hidden_sizes=[20, 10],
                        extra=lf,
                    )
                )
        out.append(
            rec(
                "dbn",
                "ais",
                K=1000,
                init="uniform",
                seed=seed,
                ll=-85.0,
                ll_se=0.1,
                ess=60,
                log_z=5.0,
                family="dbn",
                hidden_sizes=[16, 10],
                extra={"mean_log_f_is": -70.0 + seed, "mean_log_f_is_stderr": 0.03},
            )
        )
        out.append(
            rec(
                "dbn",
                "raise",
                K=1000,
                init="uniform",
                seed=seed,
                ll=-85.4,
                ll_se=0.1,
                ess=6,
                chains=10,
                family="dbn",
                hidden_sizes=[16, 10],
                extra={"mean_log_f_is": -70.0 + seed, "mean_log_f_is_stderr": 0.03},
            )
        )
    return out + agreeing_model("rbm")


def test_table2_deep_models(tmp_path):
    paths = report.build_report(deep_records(), tmp_path, gap_threshold=1.0)
    t2 = pd.read_csv(paths["table2"], keep_default_na=False, na_values=[""])
    assert list(t2.columns) == [
        "model",
        "family",
        "architecture",
        "schedule",
        "K",
        "n_seeds",
        "exact",
        "raise_uniform",
        "raise_uniform_se",
        "ais_uniform",
        "ais_uniform_se",
        "gap_uniform",
        "gap_uniform_se",
        "raise_base-rate",
        "raise_base-rate_se",
        "ais_base-rate",
        "ais_base-rate_se",
        "gap_base-rate",
        "gap_base-rate_se",
        "log_f_is",
        "log_f_is_se",
        "log_f_is_jensen_gap",
        "log_f_mean_field",
        "flags",
    ]
    assert list(zip(t2["model"], t2["K"])) == [("dbm", 100), ("dbm", 1000), ("dbn", 1000)]
    dbm = t2[t2["model"] == "dbm"].iloc[1]
    assert dbm["family"] == "dbm" and dbm["architecture"] == "784-20-10" and dbm["n_seeds"] == 2
    assert dbm["exact"] == pytest.approx(-90.0)
    # means over seeds 0 and 1 (values -89 + seed, -92 + seed): -88.5 and -91.5; gap = AIS - RAISE = +3
    assert dbm["ais_uniform"] == pytest.approx(-88.5) and dbm["raise_uniform"] == pytest.approx(-91.5)
    assert dbm["gap_uniform"] == pytest.approx(3.0) and dbm["gap_base-rate"] == pytest.approx(3.0)
    assert dbm["ais_base-rate"] == pytest.approx(-88.0)
    # standard errors of the means over two seeds: sqrt(2 se^2) / 2; the gap's combines both
    # (the CSV keeps 6 significant digits)
    assert dbm["ais_uniform_se"] == pytest.approx(math.sqrt(2 * 0.01) / 2, rel=1e-5)
    assert dbm["raise_uniform_se"] == pytest.approx(math.sqrt(2 * 0.04) / 2, rel=1e-5)
    assert dbm["gap_uniform_se"] == pytest.approx(math.sqrt(0.02 / 4 + 0.08 / 4), rel=1e-5)
    assert dbm["log_f_is"] == pytest.approx(30.0) and dbm["log_f_mean_field"] == pytest.approx(29.5)
    assert "AIS-RAISE gap +3.00 nats" in dbm["flags"]
    dbn = t2[t2["model"] == "dbn"].iloc[0]
    assert dbn["family"] == "dbn" and dbn["architecture"] == "784-16-10"
    assert dbn["gap_uniform"] == pytest.approx(0.4) and pd.isna(dbn["flags"])  # |gap| < 1 nat, RAISE below AIS
    assert math.isnan(dbn["raise_base-rate"]) and math.isnan(dbn["ais_base-rate"])  # no DBR for DBNs
    assert math.isnan(dbn["exact"]) and math.isnan(dbn["log_f_mean_field"])
    assert dbn["log_f_is"] == pytest.approx(-69.5)
    # deep models never appear in table 1; the RBM does, unchanged
    t1 = pd.read_csv(paths["table1"])
    assert set(t1["model"]) == {"rbm"} and "csl" in t1.columns
    assert set(t2["model"]) == {"dbm", "dbn"}
    rep = json.loads((tmp_path / "report.json").read_text())
    assert [r["model"] for r in rep["table2"]] == ["dbm", "dbm", "dbn"]
    assert rep["table2"][2]["raise_base-rate"] is None
    assert rep["families"] == {"dbm": "dbm", "dbn": "dbn", "rbm": "rbm"}
    for m in ("dbm", "dbn", "rbm"):
        assert paths["plots"][m].stat().st_size > 1000


def test_table2_flags_raise_above_ais_and_exact():
    recs = [
        rec("d", "exact", ll=-100.0, log_z=1.0, ll_se=0.0, chains=0, family="dbm", hidden_sizes=[8, 4]),
        rec("d", "ais", K=100, init="base-rate", ll=-100.1, ll_se=0.05, ess=50, family="dbm", hidden_sizes=[8, 4]),
        rec(
            "d",
            "raise",
            K=100,
            init="base-rate",
            ll=-99.5,
            ll_se=0.05,
            ess=5,
            chains=10,
            family="dbm",
            hidden_sizes=[8, 4],
        ),
    ]
    per_run = report.load_results(recs)
    per_run, s = report.apply_flags(per_run, report.summarize(per_run), gap_threshold=1.0, z=2.0)
    t2 = report.make_table2(s)
    assert len(t2) == 1 and t2.loc[0, "gap_base-rate"] == pytest.approx(-0.6)  # AIS - RAISE < 0
    assert list(t2.columns)[7:13] == [
        "raise_base-rate",
        "raise_base-rate_se",
        "ais_base-rate",
        "ais_base-rate_se",
        "gap_base-rate",
        "gap_base-rate_se",
    ]  # only the init present
    flags = t2.loc[0, "flags"]
    assert "RAISE exceeds AIS by 0.60 nats" in flags and "RAISE lower bound exceeds exact" in flags
    assert report.make_table1(s).empty  # no RBM


def test_family_of_bare_exact_record_follows_the_model():
    """An exact record without a family (e.g. a bare EstimateResult) takes its model's family."""
    exact = rec("d", "exact", ll=-100.0, log_z=1.0, ll_se=0.0, chains=0)
    recs = [exact, rec("d", "ais", K=10, init="uniform", ll=-99.0, ess=50, family="dbn", hidden_sizes=[8, 4])]
    df = report.load_results(recs)
    assert set(df["family"]) == {"dbn"} and set(df["architecture"]) == {"784-8-4"}
    s = report.summarize(df)
    assert report.make_table2(s).loc[0, "exact"] == pytest.approx(-100.0)
    assert report.make_table1(s).empty


def test_deep_ais_below_exact_and_poor_importance_sampling_flagged():
    """A DBN whose importance-sampled log f(v) errs low: AIS lands below exact, and few effective proposals."""
    lf = {
        "mean_log_f_is": -70.0,
        "mean_log_f_is_stderr": 0.05,
        "is_ess_mean": 20.0,
        "is_ess_min": 1.0,
        "is_samples": 500,
    }
    recs = [rec("dbn", "exact", ll=-146.0, log_z=8.0, ll_se=0.0, chains=0, family="dbn", hidden_sizes=[16, 10])]
    for seed in (0, 1):
        recs.append(
            rec(
                "dbn",
                "ais",
                K=1000,
                init="uniform",
                seed=seed,
                ll=-147.7,
                ll_se=0.05,
                log_z=8.0,
                ess=90.0,
                family="dbn",
                hidden_sizes=[16, 10],
                extra=lf,
            )
        )
    summary = report.apply_flags(*(lambda p: (p, report.summarize(p)))(report.load_results(recs)))[1]
    ais = summary[summary["method"] == "ais"].iloc[0]
    assert "AIS falls below exact by 1.70 nats" in ais["flags"]
    assert "importance-sampled log f(v) errs low" in ais["flags"]
    assert "mean ESS 20 of 500 proposals" in ais["flags"]
    # enough effective proposals and AIS above exact: neither flag
    good = [dict(r) for r in recs]
    for r in good[1:]:
        r["result"] = {**r["result"], "mean_log_likelihood": -145.9, "extra": {**lf, "is_ess_mean": 400.0}}
    summary = report.apply_flags(*(lambda p: (p, report.summarize(p)))(report.load_results(good)))[1]
    flags = summary[summary["method"] == "ais"].iloc[0]["flags"]
    assert "below exact" not in flags and "importance sampling" not in flags


# --------------------------------------------------------------------------- bias / MSE of log Z over seeds
def _log_z_runs(model, truth, *, exact=True, biases=None, Ks=(4, 16), seeds=(0, 1, 2)):
    """log Z records of AIS, reverse AIS and ADS around ``truth`` (error = bias + seed-dependent noise)."""
    biases = biases or {"ais": -1.0, "reverse-ais": 0.6, "ads": 0.1}
    out = [rec(model, "exact", ll=-90.0, log_z=truth, ll_se=0.0, chains=0)] if exact else []
    for K in Ks:
        for seed in seeds:
            for method, b in biases.items():
                out.append(
                    rec(
                        model,
                        method,
                        K=K,
                        init="base-rate",
                        seed=seed,
                        ll=-90.0,
                        log_z=truth + b / K * 4 + 0.01 * (seed - 1),
                        ess=50.0,
                    )
                )
    return out


def test_bias_and_mse_over_seeds_against_exact(tmp_path):
    paths = report.build_report(_log_z_runs("m", 40.0), tmp_path)
    t = pd.read_csv(paths["annealed_trials"])
    assert set(t["method"]) == {"ais", "reverse-ais", "ads", report.AVERAGE_METHOD}
    assert (t["truth_source"] == "exact").all() and (t["n_trials"] == 3).all()
    for row in t.itertuples(index=False):
        errs = {"ais": -1.0, "reverse-ais": 0.6, "ads": 0.1, report.AVERAGE_METHOD: -0.2}[row.method] * 4 / row.K
        noise = [0.01 * (s - 1) for s in (0, 1, 2)]
        assert row.bias == pytest.approx(errs, rel=1e-5)  # the CSV keeps 6 significant digits
        assert row.mse == pytest.approx(sum((errs + n) ** 2 for n in noise) / 3, rel=1e-5)
    assert (tmp_path / "plots" / "m_bias_mse.png").stat().st_size > 1000
    assert json.loads((tmp_path / "report.json").read_text())["ground_truth"][0]["truth_source"] == "exact"


def test_ground_truth_from_agreeing_ais_and_reverse_ais(tmp_path):
    """Without an exact value the truth is the mean of AIS and reverse AIS at their largest common K,
    only if they agree within the tolerance; those runs are left out of the comparison."""
    runs = _log_z_runs("m", 40.0, exact=False, Ks=(4, 16, 4096))
    per_run = report.load_results(runs)
    truth = report.ground_truth(per_run, tolerance=0.1)
    row = truth.iloc[0]
    # at K = 4096: AIS 40 - 1/1024, reverse AIS 40 + 0.6/1024 (mean over seeds): they agree
    assert row["truth_K"] == 4096 and row["truth"] == pytest.approx(40.0 - 0.2 / 1024)
    t = report.annealed_trials(per_run, truth)
    assert set(t["K"]) == {4, 16}
    strict = report.ground_truth(per_run, tolerance=1e-4)
    assert math.isnan(strict.iloc[0]["truth"]) and "differ" in strict.iloc[0]["truth_source"]
    assert report.annealed_trials(per_run, strict).empty


def test_ais_above_reverse_ais_is_flagged(tmp_path):
    runs = [rec("m", "ais", K=100, init="uniform", seed=s, log_z=41.0, ess=50.0) for s in (0, 1)]
    runs += [rec("m", "reverse-ais", K=100, init="uniform", seed=s, log_z=40.0, ess=50.0) for s in (0, 1)]
    paths = report.build_report(runs, tmp_path)
    s = pd.read_csv(paths["summary"], keep_default_na=False)
    assert s["flags"].str.contains("do not sandwich").all()
