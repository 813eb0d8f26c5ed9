"""The published values (``report/published.csv``): format, checks, and transcription against the papers' texts."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from logzbench.report.published import (
    COLUMNS,
    PAPERS,
    PUBLISHED_CSV,
    PublishedError,
    load_published,
    lookup,
    paper_values,
    published_value,
)

#: the papers' texts (``/work/shared/papers`` beside the repository), by the file names' prefix
PAPERS_DIR = Path(__file__).resolve().parents[1] / ".." / "shared" / "papers"
PAPER_FILES = {"burda_raise": "000_", "sohl_dickstein_hais": "001_", "upadhya_sastry": "002_", "li_avil": "003_"}


@pytest.fixture(scope="module")
def pub() -> pd.DataFrame:
    return load_published()


def test_file_loads(pub):
    assert list(pub.columns) == list(COLUMNS)
    assert pub["value"].dtype == float and pub["uncertainty"].dtype == float
    assert str(pub["K"].dtype) == "Int64"
    assert set(pub["units"]) == {"nats"}
    assert set(pub["uncertainty_kind"]) <= {"", "sd", "var", "pm"}
    assert (pub["uncertainty"].notna() == (pub["uncertainty_kind"] != "")).all()


def test_every_paper_has_values(pub):
    assert set(PAPERS) == set(pub["paper"])
    for key, citation in PAPERS.items():
        assert (pub["paper"] == key).sum() > 0, key
        assert re.search(r"(19|20)\d\d", citation), citation
    counts = pub.groupby(["paper", "table"]).size().to_dict()
    assert counts == {
        ("burda_raise", "1"): 44,
        ("burda_raise", "2"): 18,
        ("li_avil", "2"): 18,
        ("li_avil", "3"): 18,
        ("sohl_dickstein_hais", "1"): 6,
        ("upadhya_sastry", "1"): 38,
        ("upadhya_sastry", "2"): 54,
        ("upadhya_sastry", "3"): 19,
    }


def test_spot_values(pub):
    assert published_value(pub, "burda_raise", 1, "mnistPCD-20", "exact", "mean_test_ll") == -150.11
    hit = lookup(pub, "burda_raise", 1, "mnistCD1-500", "uniform gap", "gap_ais_minus_raise")
    assert hit["value"] == 44.26 and hit["init"] == "uniform" and hit["K"] == 100000 and hit["estimator"] == ""
    assert lookup(pub, "burda_raise", 1, "mnistCD1-500", "exact", "mean_test_ll") is None  # a "—" cell
    assert lookup(pub, "burda_raise", 2, "MNIST DBN", "data base rates AIS", "mean_test_ll") is None
    assert published_value(pub, "burda_raise", 2, "Omniglot DBM", "uniform AIS", "mean_test_ll") == -110.86
    hit = lookup(pub, "upadhya_sastry", 1, "rbm200", "uniform K=10000", "log_z")
    assert (hit["value"], hit["uncertainty"], hit["uncertainty_kind"]) == (174.7664, 0.1528, "sd")
    assert (hit["estimator"], hit["init"], hit["K"]) == ("ais", "uniform", 10000)
    hit = lookup(pub, "upadhya_sastry", 1, "rbm500", "baserate K=14500", "mean_test_ll")
    assert (hit["value"], hit["uncertainty"], hit["estimator"], hit["init"], hit["K"]) == (
        -114.7883,
        0.1717,
        "ais-sm14500",
        "base-rate",
        14500,
    )
    assert published_value(pub, "upadhya_sastry", 1, "rbm20", "ground truth", "log_z") == 230.61
    hit = lookup(pub, "upadhya_sastry", 2, "rbm20", "biased-small-burnin N=200k M=4000", "mean_test_ll")
    assert (hit["value"], hit["uncertainty"], hit["uncertainty_kind"]) == (-142.06, 0.13, "var")
    assert (hit["estimator"], hit["K"]) == ("csl-biased-small-burnin-M4000", 5000)
    hit = lookup(pub, "upadhya_sastry", 2, "rbm500", "unbiased N=100k M=250", "mean_test_ll")
    assert (hit["value"], hit["uncertainty"], hit["estimator"], hit["K"]) == (-296.18, 5.90, "csl-unbiased-M250", 40000)
    hit = lookup(pub, "upadhya_sastry", 3, "rbm500", "AIS", "mean_test_ll")
    assert (hit["value"], hit["estimator"], hit["init"], hit["K"]) == (-116.46, "ais-subset", "base-rate", 10000)
    assert published_value(pub, "upadhya_sastry", 3, "rbm20", "ground truth", "mean_test_ll") == -142.39
    hit = lookup(pub, "sohl_dickstein_hais", 1, "mcRBM", "log likelihood", "mean_test_ll")
    assert (hit["value"], hit["uncertainty"], hit["uncertainty_kind"], hit["estimator"]) == (-36.01, 2.57, "pm", "hais")
    assert "size 432" in hit["note"]
    hit = lookup(pub, "li_avil", 2, "rbm/avil", "mushrooms", "mean_test_ll_ais")
    assert (hit["value"], hit["estimator"], hit["init"]) == (-16.82, "ais", "") and pd.isna(hit["K"])


def test_paper_values(pub):
    rows = paper_values(pub, "upadhya_sastry", "rbm20")
    assert set(rows["table"]) == {"1", "2", "3"} and set(rows["row"]) == {"rbm20"}
    assert len(rows) == 14 + 18 + 7
    assert len(paper_values(pub, "burda_raise", "mnistPCD-20")) == 8
    assert paper_values(pub, "burda_raise", "no such row").empty


def test_internal_consistency(pub):
    """What the papers' own arithmetic implies: Burda's gap = AIS - RAISE; Upadhya's log Z-hat + L-hat
    is the same for every AIS run of one RBM (L = mean log f(v) - log Z); CSL's K = N * T / M."""
    burda = pub[pub["paper"] == "burda_raise"]
    for (table, row), g in burda.groupby(["table", "row"]):
        for prefix in ("uniform", "data base rates"):
            cells = {c.split()[-1]: v for c, v in zip(g["column"], g["value"]) if c.startswith(prefix + " ")}
            if cells:
                assert abs(cells["AIS"] - cells["RAISE"] - cells["gap"]) < 0.0101, (table, row, prefix)
    t1 = pub[(pub["paper"] == "upadhya_sastry") & (pub["table"] == "1")]
    for row, g in t1.groupby("row"):
        z = g[g["quantity"] == "log_z"].set_index("column")["value"]
        ll = g[g["quantity"] == "mean_test_ll"].set_index("column")["value"]
        sums = (z + ll).dropna()
        tol = 0.011 if row == "rbm20" else 2e-4  # rbm20's ground truth is printed with 2 decimals
        assert len(sums) == (7 if row == "rbm20" else 6) and sums.max() - sums.min() < tol, row
        sd = g.pivot(index="column", columns="quantity", values="uncertainty")
        sd = sd.drop(index="ground truth", errors="ignore")
        assert (sd["log_z"] == sd["mean_test_ll"]).all()
    t2 = pub[(pub["paper"] == "upadhya_sastry") & (pub["table"] == "2")]
    for _, r in t2.iterrows():
        mode, n, m = re.fullmatch(r"(\S+) N=(\d+)k M=(\d+)", r["column"]).groups()
        assert r["estimator"] == f"csl-{mode}-M{m}" and r["K"] == int(n) * 1000 * 100 // int(m)
        assert r["uncertainty_kind"] == "var"


HEADER = ",".join(COLUMNS) + "\n"
GOOD = "x,1,r,c,q,nats,-1.5,0.2,sd,ais,uniform,1000,\n"


@pytest.mark.parametrize(
    "line, match",
    [
        ("x,1,r,c,q,nats,-1.5,0.2,se,ais,uniform,1000,", r"line 3: uncertainty_kind 'se' is not one of sd, var, pm"),
        ("x,1,r,c,q,nats,-1.5,-0.2,sd,ais,uniform,1000,", r"line 3: uncertainty '-0.2' is not a finite number >= 0"),
        ("x,1,r,c,q,nats,-1.5,inf,sd,ais,uniform,1000,", r"line 3: uncertainty 'inf' is not a finite number >= 0"),
        ("x,1,r,c,q,nats,-1.5,0.2,,ais,uniform,1000,", r"line 3: uncertainty '0.2' without an uncertainty_kind"),
        ("x,1,r,c,q,nats,-1.5,,sd,ais,uniform,1000,", r"line 3: uncertainty_kind 'sd' without an uncertainty"),
        ("x,1,r,c,q,nats,-1.5,0.2,sd,ais,uniform,1e3,", r"line 3: K '1e3' is not a positive integer"),
        ("x,1,r,c,q,nats,-1.5,0.2,sd,ais,uniform,10.5,", r"line 3: K '10.5' is not a positive integer"),
        ("x,1,r,c,q,nats,-1.5,0.2,sd,ais,uniform,0,", r"line 3: K '0' is not a positive integer"),
        ("x,1,r,c,q,nats,-1.5,0.2,sd,ais,gaussian,1000,", r"line 3: init 'gaussian' is not one of uniform, base-rate"),
        ("x,1,r,c,q,nats,nan,0.2,sd,ais,uniform,1000,", r"line 3: value 'nan' is not a finite number"),
        ("x,1,,c,q,nats,-1.5,0.2,sd,ais,uniform,1000,", r"line 3: empty row"),
        ("x,1,r,c,q,nats,-2.0,,,,,,again", r"lines 2, 3: the same .* more than once"),
    ],
)
def test_malformed_refused(tmp_path, line, match):
    path = tmp_path / "published.csv"
    path.write_text(HEADER + GOOD + line + "\n")
    with pytest.raises(PublishedError, match=match) as info:
        load_published(path)
    assert str(path) in str(info.value)


def test_header_refused(tmp_path):
    path = tmp_path / "published.csv"
    path.write_text("paper,table,row,column,quantity,units,value,note\nx,1,r,c,q,nats,1.0,\n")
    with pytest.raises(PublishedError, match=r"header must be .*missing: uncertainty, uncertainty_kind, estimator"):
        load_published(path)


def test_well_formed_variant_loads(tmp_path):
    path = tmp_path / "published.csv"
    path.write_text(HEADER + GOOD + "x,1,r,c2,q,nats,3,,,,,,\n")
    df = load_published(path)
    assert df["K"].tolist()[0] == 1000 and pd.isna(df["K"].iloc[1])
    assert df["uncertainty"].iloc[0] == 0.2 and math.isnan(df["uncertainty"].iloc[1])


# --------------------------------------------------------------------------- transcription
def _paper_text(paper: str) -> str:
    if not PAPERS_DIR.is_dir():
        pytest.skip(f"the papers' texts are not at {PAPERS_DIR}")
    files = sorted(PAPERS_DIR.glob(PAPER_FILES[paper] + "*.txt"))
    if not files:
        pytest.skip(f"no text of {paper} in {PAPERS_DIR}")
    return files[0].read_text(encoding="utf-8")


def _as_printed(text: str) -> str:
    """A number written as in the file, with its printed decimals, without its sign (the texts
    reformat signs: '-164.50', '$-164.50$', '164.50164.50-164.50')."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return f"{abs(float(text)):.{decimals}f}"


@pytest.mark.parametrize("paper", sorted(PAPER_FILES))
def test_transcription(paper):
    text = _paper_text(paper)
    with open(PUBLISHED_CSV, newline="", encoding="utf-8") as f:
        lines = [r for r in csv.DictReader(f) if r["paper"] == paper]
    assert lines
    missing = [
        (r["table"], r["row"], r["column"], r["quantity"], field, r[field])
        for r in lines
        for field in ("value", "uncertainty")
        if r[field] and _as_printed(r[field]) not in text
    ]
    assert not missing, missing
