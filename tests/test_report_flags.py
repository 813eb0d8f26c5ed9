"""The report's flag rules, one by one, and records of the importance-sampling family."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from logzbench import report
from logzbench.estimators.result import EstimateResult
from logzbench.report.flags import (AIS_VS_RAISE, LOWER_BOUND_ABOVE_EXACT, POOR_LOG_F_SAMPLING, RULES,
                                    SANDWICH_RULES, Z_UNBIASED_ABOVE_CLOSED_FORM, Z_UNBIASED_BELOW_EXACT, FlagInput,
                                    ReportThresholds, low_ess)


def rec(method, *, model="m", K=None, init=None, seed=0, ll=-100.0, ll_se=0.05, log_z=None, ess=None, chains=100,
        family="rbm", extra=None):
    """A workflow estimate record (the result as ``EstimateResult.to_dict()``)."""
    res = EstimateResult(estimator=method, log_z=float("nan") if log_z is None else log_z,
                         log_z_stderr=0.01 if log_z is not None else float("nan"),
                         ess=float("nan") if ess is None else ess, n_chains=0 if method == "exact" else chains,
                         mean_log_likelihood=ll, mean_log_likelihood_stderr=ll_se, seconds=1.0,
                         extra=dict(extra or {}))
    return {"key": f"estimate/{model}/{method}/{K}/{init}/{seed}", "model": model, "dataset": "digits",
            "estimator": method, "method": method, "K": K, "init": init,
            "seed": None if method == "exact" else seed, "family": family, "hidden_sizes": [8, 4],
            "n_visible": 16, "chains": chains, "result": res.to_dict()}


def exact(ll=-100.0, family="rbm", log_z=10.0):
    return rec("exact", ll=ll, ll_se=0.0, log_z=log_z, chains=0, family=family)


LF = {"mean_log_f_is": -70.0, "mean_log_f_is_stderr": 0.05, "is_samples": 500}
GEN = "linear-gaussian"
#: rule -> (records on which it fires, a clean variant, text of the reason)
CASES = {
    low_ess: ([rec("ais", K=10, init="uniform", ess=5.0)], [rec("ais", K=10, init="uniform", ess=50.0)],
              "low ESS (seed 0): min 5 of 100 chains"),
    AIS_VS_RAISE: ([rec("ais", K=10, init="uniform", ll=-90.0), rec("raise", K=10, init="uniform", ll=-92.5)],
                   [rec("ais", K=10, init="uniform", ll=-90.0), rec("raise", K=10, init="uniform", ll=-90.3)],
                   "AIS-RAISE gap +2.50 nats exceeds 1 nat (uniform, K=10)"),
    SANDWICH_RULES[0]: ([rec("ais", K=10, init="uniform", log_z=41.0), rec("reverse-ais", K=10, init="uniform",
                                                                          log_z=40.0)],
                        [rec("ais", K=10, init="uniform", log_z=40.0), rec("reverse-ais", K=10, init="uniform",
                                                                          log_z=40.1)],
                        "AIS log Z exceeds reverse AIS by 1.00 nats"),
    SANDWICH_RULES[1]: ([rec("is", init="uniform", log_z=41.0), rec("ris", init="uniform", log_z=40.0)],
                        [rec("is", init="uniform", log_z=40.0), rec("ris", init="uniform", log_z=40.1)],
                        "IS log Z exceeds reverse IS by 1.00 nats"),
    POOR_LOG_F_SAMPLING: ([rec("ais", K=10, init="uniform", family="dbn", extra={**LF, "is_ess_mean": 20.0})],
                          [rec("ais", K=10, init="uniform", family="dbn", extra={**LF, "is_ess_mean": 400.0})],
                          "log f(v) importance sampling: mean ESS 20 of 500 proposals"),
    Z_UNBIASED_BELOW_EXACT: ([exact(), rec("is", init="base-rate", ll=-101.0)],
                             [exact(), rec("is", init="base-rate", ll=-99.5)],
                             "IS falls below exact by 1.00 nats (> 2 x s.e. 0.05)"),
    Z_UNBIASED_ABOVE_CLOSED_FORM: ([exact(-10.0, GEN), rec("hais", K=10, ll=-9.0, family=GEN)],
                                   [exact(-10.0, GEN), rec("hais", K=10, ll=-10.5, family=GEN)],
                                   "HAIS exceeds the closed form by 1.00 nats"),
    LOWER_BOUND_ABOVE_EXACT: ([exact(), rec("csl", K=10, ll=-99.0)], [exact(), rec("csl", K=10, ll=-101.0)],
                              "CSL lower bound exceeds exact by 1.00 nats"),
}


def _reasons(rule, records) -> list[str]:
    per_run = report.load_results(records)
    return [text for _, text in rule(FlagInput(report.summarize(per_run), per_run, ReportThresholds()))]


def test_every_rule_has_a_case():
    assert set(CASES) == set(RULES)


@pytest.mark.parametrize("rule", list(CASES), ids=lambda r: getattr(r, "name", getattr(r, "__name__", "")))
def test_rule_fires_on_its_case_only(rule):
    bad, clean, text = CASES[rule]
    reasons = _reasons(rule, bad)
    assert any(r.startswith(text) for r in reasons), reasons
    assert _reasons(rule, clean) == []
    # apply_flags carries the reason into the summary
    _, summary = report.apply_flags(*(lambda p: (p, report.summarize(p)))(report.load_results(bad)))
    assert summary["flags"].str.contains(text, regex=False).any()


def _is_family_records():
    """An RBM with an exact value and every IS-family estimator at both inits and two seeds."""
    out = [exact(ll=-100.0, log_z=40.0)]
    for seed in (0, 1):
        for init in ("uniform", "base-rate"):
            for method, log_z, ess in (("is", 40.8, 3.0), ("ris", 40.2, 60.0), ("is-avg", 40.5, None),
                                       ("is-weighted", 40.3, None), ("is-select", 40.2, 60.0), ("ds", 40.05, 80.0)):
                out.append(rec(method, init=init, seed=seed, log_z=log_z, ll=-60.0 - log_z, ess=ess, chains=100))
    return out


def test_is_family_records_through_build_report(tmp_path):
    paths = report.build_report(_is_family_records(), tmp_path)
    per_run = pd.read_csv(paths["per_run"], keep_default_na=False, na_values=[""])
    is_runs = per_run[per_run["method"] != "exact"]
    assert len(is_runs) == 6 * 2 * 2
    assert is_runs["K"].isna().all() and (is_runs["schedule"].isna()).all()  # no K, no schedule
    assert set(is_runs["init"]) == {"uniform", "base-rate"} and set(is_runs["seed"]) == {0, 1}
    s = pd.read_csv(paths["summary"], keep_default_na=False, na_values=[""])
    s = s[s["method"] != "exact"]
    assert len(s) == 6 * 2 and (s["n_seeds"] == 2).all() and s["K"].isna().all()
    flags = dict(zip(zip(s["method"], s["init"]), s["flags"].fillna("")))
    # IS: few effective samples, log Z 0.8 above exact (the log-likelihood below it), above reverse IS
    assert "low ESS (seed 0,1): min 3 of 100 samples (< 10%)" in flags["is", "uniform"]
    assert "IS falls below exact by 0.80 nats" in flags["is", "uniform"]
    assert "IS log Z exceeds reverse IS by 0.60 nats" in flags["is", "base-rate"]
    assert "IS log Z exceeds reverse IS" in flags["ris", "base-rate"]
    assert flags["ds", "uniform"] == ""  # 0.05 nats off, no bound: nothing to flag
    # the papers' tables and the repeated-trials table have no IS-family columns or rows
    t1 = pd.read_csv(paths["table1"], keep_default_na=False, na_values=[""])
    assert list(t1["model"]) == ["m"] and t1["K"].isna().all()
    assert pd.read_csv(paths["annealed_trials"]).empty
    rep = json.loads(paths["report_json"].read_text())
    assert rep["n_runs"] == 25 and rep["ground_truth"][0]["truth_source"] == "exact"
    for p in (*paths["plots"].values(), *paths["trial_plots"].values(), paths["model_size_plot"]):
        assert p.stat().st_size > 1000
