"""Ours beside the papers' published values (report/papers.py, table_papers.csv) and the CSL table in
Upadhya & Sastry's layout (table_csl.csv), on synthetic records."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from test_report import rec

from logzbench import cli, report
from logzbench.report.papers import ROUNDING, check_paper_rows, make_table_papers, parse_paper_rows
from logzbench.report.published import load_published
from logzbench.report.tables import make_table_csl

PUB = load_published()


def _published(row, column, paper="burda_raise"):
    hit = PUB[(PUB["paper"] == paper) & (PUB["row"] == row) & (PUB["column"] == column)]
    assert len(hit) >= 1, (row, column)
    return hit


def _summary(records):
    return report.summarize(report.load_results(records))


def mnist_cd1_20_records(ais_offset=0.0, ll_se=0.05):
    """A model standing for RAISE Table 1's mnistCD1-20 at the paper's values (plus ``ais_offset``)."""
    return [
        rec("m", "exact", ll=-164.50, log_z=10.0, ll_se=0.0, chains=0),
        # the paper's K = 100,000 for AIS (two seeds), RAISE only at K = 1,000
        *[rec("m", "ais", K=100000, init="uniform", seed=s, ll=-164.51 + ais_offset, ll_se=ll_se) for s in (0, 1)],
        rec("m", "raise", K=1000, init="uniform", ll=-170.0, ll_se=0.3),
        rec("m", "raise", K=100000, init="uniform", ll=-165.33, ll_se=0.3),
    ]


def _line(table, column, quantity="mean_test_ll"):
    hit = table[(table["column"] == column) & (table["quantity"] == quantity)]
    assert len(hit) == 1, (column, quantity, table[["column", "quantity"]])
    return hit.iloc[0]


def test_ours_beside_the_published_values():
    table = make_table_papers(_summary(mnist_cd1_20_records()), {"m": {"burda_raise": "mnistCD1-20"}})
    # every published value of the row is listed, ours or not
    assert len(table) == len(PUB[(PUB["paper"] == "burda_raise") & (PUB["row"] == "mnistCD1-20")])
    exact = _line(table, "exact")
    assert exact["published"] == -164.50 and exact["ours"] == -164.50 and exact["within_uncertainty"] == "yes"
    ais = _line(table, "uniform AIS")
    assert ais["published"] == -164.51 and ais["K_paper"] == 100000 and ais["K_ours"] == 100000
    assert ais["n_seeds"] == 2 and math.isclose(ais["difference"], 0.0, abs_tol=1e-9)
    assert ais["within_uncertainty"] == "yes"
    # RAISE at the paper's K, not at our smaller one
    raise_ = _line(table, "uniform RAISE")
    assert raise_["K_ours"] == 100000 and math.isclose(raise_["ours"], -165.33)
    # the gap is ours: AIS - RAISE at the same K and init, standard errors in quadrature
    gap = _line(table, "uniform gap", "gap_ais_minus_raise")
    assert math.isclose(gap["ours"], -164.51 + 165.33) and math.isclose(gap["published"], 0.82)
    assert math.isclose(gap["ours_se"], math.sqrt((0.05**2 * 2) / 4 + 0.3**2))
    # values we did not estimate stay visible, with empty ours and a note
    csl = _line(table, "CSL")
    assert pd.isna(csl["ours"]) and csl["within_uncertainty"] != "yes" and "no estimate" in csl["note"]
    base = _line(table, "data base rates AIS")
    assert pd.isna(base["ours"])


def test_difference_beyond_the_uncertainty_is_not_within():
    z, se = 2.0, 0.05
    combined = se / math.sqrt(2)  # two seeds' standard errors in quadrature, over 2
    inside = make_table_papers(
        _summary(mnist_cd1_20_records(ais_offset=z * combined * 0.9, ll_se=se)),
        {"m": {"burda_raise": "mnistCD1-20"}},
        z=z,
    )
    outside = make_table_papers(
        _summary(mnist_cd1_20_records(ais_offset=z * combined + 2 * ROUNDING, ll_se=se)),
        {"m": {"burda_raise": "mnistCD1-20"}},
        z=z,
    )
    assert _line(inside, "uniform AIS")["within_uncertainty"] == "yes"
    row = _line(outside, "uniform AIS")
    assert row["within_uncertainty"] == "no" and row["z_score"] > z


def test_our_largest_k_stands_in_for_the_papers_and_says_so():
    records = [rec("m", "ais", K=k, init="uniform", ll=-150.0 - 1000 / k) for k in (100, 1000)]
    table = make_table_papers(_summary(records), {"m": {"burda_raise": "mnistPCD-20"}})
    ais = _line(table, "uniform AIS")
    assert ais["K_ours"] == 1000 and math.isclose(ais["ours"], -151.0)
    assert "ours at K=1000; the paper's at K=100000" in ais["note"]


def test_upadhya_sastry_sd_and_variance_over_seeds():
    records = [
        rec("rbm20", "ais", K=1000, init="uniform", seed=s, ll=-140.0 + 0.1 * s, log_z=229.0 - 0.1 * s)
        for s in range(5)
    ]
    table = make_table_papers(_summary(records), {"rbm20": {"upadhya_sastry": "rbm20"}})
    lz = table[(table["column"] == "uniform K=1000") & (table["quantity"] == "log_z")].iloc[0]
    assert lz["uncertainty_kind"] == "sd" and lz["published_uncertainty"] > 0
    sd = pd.Series([229.0 - 0.1 * s for s in range(5)]).std(ddof=1)
    assert math.isclose(lz["ours_uncertainty"], sd)
    # the paper's Table 2 (CSL) prints variances: ours in the same kind
    assert set(table.loc[table["table"].astype(str) == "2", "uncertainty_kind"]) == {"var"}


@pytest.mark.parametrize(
    "rows, match",
    [
        ({"m": {"burda_raise": "mnistCD1-21"}}, "no published row 'mnistCD1-21'.*mnistCD1-20"),
        ({"m": {"burda_rais": "mnistCD1-20"}}, "unknown paper key"),
        ({"m": {"li_avil": "rbm/avil"}}, "table_learners.csv"),
    ],
)
def test_bad_paper_rows_refused(rows, match):
    with pytest.raises(ValueError, match=match):
        check_paper_rows(rows)


@pytest.mark.parametrize(
    "items, match",
    [
        (["m:burda_raise=mnistCD1-20"], "expected MODEL=PAPER:ROW"),
        (["m=burda_raise"], "expected MODEL=PAPER:ROW"),
        (["=burda_raise:mnistCD1-20"], "expected MODEL=PAPER:ROW"),
    ],
)
def test_cli_paper_option_parsing(items, match):
    with pytest.raises(ValueError, match=match):
        parse_paper_rows(items)


def test_cli_report_with_paper_rows(tmp_path, capsys):
    rdir = tmp_path / "records"
    rdir.mkdir()
    for i, r in enumerate(mnist_cd1_20_records()):
        (rdir / f"{i}.json").write_text(json.dumps(r))
    out = tmp_path / "report"
    assert cli.main(["report", str(rdir), "--out", str(out), "--paper", "m=burda_raise:mnistCD1-20"]) == 0
    table = pd.read_csv(out / "table_papers.csv")
    assert (table["model"] == "m").all() and table["ours"].notna().sum() == 4  # exact, uniform RAISE, AIS and gap
    # a misspelt row: exit 2, one line naming it, nothing written
    out2 = tmp_path / "report2"
    assert cli.main(["report", str(rdir), "--out", str(out2), "--paper", "m=burda_raise:nope"]) == 2
    assert "no published row 'nope'" in capsys.readouterr().err and not out2.exists()


def test_report_without_paper_rows_writes_header_only(tmp_path):
    paths = report.build_report(mnist_cd1_20_records(), tmp_path, plots=False)
    assert list(pd.read_csv(paths["table_papers"]).columns)[:4] == ["paper", "table", "row", "column"]
    assert len(pd.read_csv(paths["table_papers"])) == 0
    assert "table_papers" not in json.loads(paths["report_json"].read_text())


# --------------------------------------------------------------------------- CSL table
def _csl(model, mode, burn_in, M, K, seed, ll):
    r = rec(model, f"csl-{mode}-b{burn_in}-M{M}", K=K, seed=seed, ll=ll, method="csl", chains=M)
    r.update({"csl_mode": mode, "burn_in": burn_in, "thin": 100})
    return r


def test_csl_table_in_the_papers_layout():
    records = []
    for model, base in (("rbm500", -300.0), ("rbm20", -150.0)):
        for mode, burn_in in (("unbiased", 100), ("biased", 5000), ("biased", 10)):
            for M, K in ((250, 40000), (500, 20000), (500, 40000)):
                for s in range(4):
                    records.append(_csl(model, mode, burn_in, M, K, s, base + M / 100 + burn_in / 1000 + 0.1 * s))
    table = make_table_csl(_summary(records))
    assert list(table.columns[:7]) == ["block", "csl_mode", "csl_protocol", "burn_in", "thin", "N", "M"]
    assert list(table.columns[7:]) == ["rbm20", "rbm20_var", "rbm20_n", "rbm500", "rbm500_var", "rbm500_n"]
    assert set(table["csl_protocol"]) == {"fresh"}  # records without the setting ran the default
    assert list(dict.fromkeys(table["block"])) == [
        "unbiased",
        "biased, large burn-in (5000)",
        "biased, small burn-in (10)",
    ]
    first = table.iloc[0]
    assert (first["N"], first["M"]) == (100000, 250)
    assert list(zip(table["N"][:3], table["M"][:3])) == [(100000, 250), (100000, 500), (200000, 500)]
    var = pd.Series([0.1 * s for s in range(4)]).var(ddof=1)
    assert math.isclose(first["rbm20_var"], var) and first["rbm20_n"] == 4
    assert math.isclose(first["rbm20"], -150.0 + 2.5 + 0.1 + 0.15)


def test_csl_table_header_only_without_csl():
    table = make_table_csl(_summary([rec("m", "ais", K=10, init="uniform")]))
    assert len(table) == 0 and list(table.columns) == ["block", "csl_mode", "csl_protocol", "burn_in", "thin", "N", "M"]


def test_csl_table_keeps_the_protocols_apart():
    """Two sweeps that differ only in csl_protocol are two rows, each with its own mean and seeds (one row
    would have shown only the first)."""
    records = []
    for protocol, base in (("fresh", -150.0), ("pooled", -149.0)):
        for s in range(3):
            r = _csl("rbm20", "biased", 10, 500, 20000, s, base + 0.1 * s)
            r["estimator"] = f"csl-{protocol}"
            r["key"] = r["key"].replace("csl-biased-b10-M500", f"csl-{protocol}")
            r["csl_protocol"] = protocol
            records.append(r)
    table = make_table_csl(_summary(records))
    assert sorted(table["csl_protocol"]) == ["fresh", "pooled"]
    for protocol, base in (("fresh", -150.0), ("pooled", -149.0)):
        row = table[table["csl_protocol"] == protocol].iloc[0]
        assert math.isclose(row["rbm20"], base + 0.1) and row["rbm20_n"] == 3


# --------------------------------------------------------------------------- per-class test subsets
SUBSET = {"per_class": 50, "seed": 0}


def _on_subset(r):
    r["test_subset"] = dict(SUBSET)
    return r


def test_subset_estimates_meet_the_subsets_exact_value():
    """Upadhya & Sastry's Table 3: RAISE, AIS and CSL on 50 test images per class, against the exact
    value of that subset, beside the full test set's estimates against theirs."""
    records = [
        rec("m", "exact", ll=-100.0, log_z=10.0, ll_se=0.0, chains=0),
        _on_subset(rec("m", "exact-subset", ll=-98.0, log_z=10.0, ll_se=0.0, chains=0, method="exact")),
        rec("m", "ais", K=1000, init="base-rate", ll=-100.05),
        _on_subset(rec("m", "ais-subset", K=1000, init="base-rate", ll=-98.05, method="ais")),
        _on_subset(rec("m", "raise", K=1000, init="base-rate", ll=-98.2)),
    ]
    per_run = report.load_results(records)
    sub = per_run[per_run["test_set"] != ""]
    assert set(sub["test_set"]) == {"50 per class, seed 0"} and len(sub) == 3
    assert (sub["exact_test_ll"] == -98.0).all()
    assert (per_run.loc[per_run["test_set"] == "", "exact_test_ll"] == -100.0).all()
    summary = report.summarize(per_run)
    table = report.make_table1(summary)
    subset_row = table[table["model"] == "m (50 per class, seed 0)"].iloc[0]
    # AIS and RAISE of the same test rows side by side, the gap between them
    assert subset_row["exact"] == -98.0 and math.isclose(subset_row["gap_base-rate"], -98.05 + 98.2)
    full = table[table["model"] == "m"].iloc[0]
    assert full["exact"] == -100.0 and pd.isna(full["raise_base-rate"])
    # no AIS-RAISE gap flag across different test rows (a 1.85-nat difference would be flagged)
    _, flagged = report.apply_flags(per_run, summary)
    assert not flagged["flags"].str.contains("gap").any()


def test_a_published_method_matches_the_one_entry_running_it():
    """HAIS Table 1's lines name the method ``hais``; a config may run it under another entry name
    (``hais-generative``, with the generative models' own step size): that entry's rows stand for it, but
    not when two entries run the method on the model (their settings would mix)."""
    row = {"g": {"sohl_dickstein_hais": "Bilinear generative"}}
    one = [rec("g", "hais-generative", method="hais", K=1000, ll=-33.0, ll_se=0.2)]
    line = make_table_papers(_summary(one), row).iloc[0]
    assert line["ours"] == -33.0 and line["estimator"] == "hais"
    two = one + [rec("g", "hais-small-step", method="hais", K=1000, ll=-34.0, ll_se=0.2)]
    line = make_table_papers(_summary(two), row).iloc[0]
    assert pd.isna(line["ours"])
