"""The report of learner-trained models (AVIL, NVIL, VCD) and the published-values loader, on synthetic records."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from logzbench import report
from logzbench.report import learner_plots, learners, published
from logzbench.report.published import PublishedError, load_published, lookup, published_value


# --------------------------------------------------------------------------- published values
def test_published_lookups():
    pub = load_published()
    assert list(pub.columns) == list(published.COLUMNS)
    assert pub["value"].dtype == float
    assert published_value(pub, "li_avil", 2, "rbm/avil", "mushrooms", "mean_test_ll_ais") == -16.82
    assert published_value(pub, "li_avil", "3", "dbm/vcd", "adult", "mean_test_ll_ais") == -21.89
    hit = lookup(pub, "li_avil", 2, "rbm/nvil", "digits-avil", "mean_test_ll_ais")
    assert hit["value"] == -27.54 and hit["units"] == "nats" and "validation" in hit["note"]
    assert lookup(pub, "li_avil", 2, "rbm/avil", "frey", "mean_test_ll_ais") is None
    assert math.isnan(published_value(pub, "li_avil", 3, "rbm/avil", "mushrooms", "mean_test_ll_ais"))


HEADER = "paper,table,row,column,quantity,units,value,uncertainty,uncertainty_kind,estimator,init,K,note\n"


@pytest.mark.parametrize(
    "text, match",
    [
        ("paper,table,row,column,quantity,value,note\nx,1,r,c,q,1.0,\n", r"header must be .*missing: units"),
        (
            HEADER + "x,1,r,c,q,nats,1.0,,,,,,\nx,1,r,c,q,nats,abc,,,,,,\n",
            r"line 3: value 'abc' is not a finite number",
        ),
        (
            HEADER + "x,1,r,c,q,nats,1.0,,,,,,\nx,1,r,c,q,nats,2.0,,,,,,again\n",
            r"lines 2, 3: the same .* more than once",
        ),
        (HEADER + "x,,r,c,q,nats,1.0,,,,,,\n", r"line 2: empty table"),
    ],
)
def test_malformed_published_refused(tmp_path, text, match):
    path = tmp_path / "published.csv"
    path.write_text(text)
    with pytest.raises(PublishedError, match=match):
        load_published(path)


# --------------------------------------------------------------------------- synthetic records
def est(model, method, *, K=None, init=None, seed=0, ll=-17.0, ll_se=0.05, log_z=30.0, dataset="mushrooms"):
    exact = method == "exact"
    return {
        "key": f"estimate/{model}/{method}/{K}/{init}/{seed}",
        "model": model,
        "dataset": dataset,
        "estimator": method,
        "method": method,
        "K": K,
        "init": init,
        "seed": None if exact else seed,
        "schedule": None if exact else "linear",
        "chains": 100,
        "result": {
            "estimator": method,
            "log_z": log_z,
            "log_z_stderr": 0.01,
            "ess": 90.0,
            "n_chains": 0 if exact else 100,
            "mean_log_likelihood": ll,
            "mean_log_likelihood_stderr": ll_se,
            "seconds": 1.0,
            "settings": {},
            "extra": {},
        },
    }


def trained(model, learner, *, family="rbm", dataset="mushrooms", hidden=(50,), aux=15):
    hp = {"family": family, "aux_size": aux}
    if learner:
        hp["learner"] = learner
    return {"model": model, "dataset": dataset, "family": family, "hidden_sizes": list(hidden), "hyperparams": hp}


def avil_records(ll=-17.0, ll_se=0.05):
    out = [est("mush-avil", "exact", ll=-17.05, log_z=30.0)]
    for seed in (0, 1):
        out.append(est("mush-avil", "ais", K=100, init="uniform", seed=seed, ll=-40.0))  # the smaller K: ignored
        out.append(est("mush-avil", "ais", K=1000, init="uniform", seed=seed, ll=ll - 0.5, log_z=29.5, ll_se=ll_se))
        out.append(est("mush-avil", "ais", K=1000, init="base-rate", seed=seed, ll=ll, log_z=29.9, ll_se=ll_se))
    return out


def test_table_paper_column_and_difference():
    summary = report.summarize(
        report.load_results(
            avil_records() + [est("adult-vcd", "ais", K=100, init="uniform", ll=-22.0, dataset="adult")]
        )
    )
    models = learners.learner_models(
        [
            trained("mush-avil", "avil"),
            trained("plain", None),
            trained("adult-vcd", "vcd", family="dbm", dataset="adult", hidden=(50, 50)),
            trained("frey-grbm", "avil", family="grbm", dataset="frey"),
        ]
    )
    t = learners.make_table_learners(summary, models, z=2.0)
    assert list(t.columns) == learners.LEARNER_TABLE_COLUMNS
    assert list(t["model"]) == ["mush-avil", "adult-vcd", "frey-grbm"]  # RBMs, DBMs, GRBMs; "plain" has no learner
    row = t.iloc[0]
    assert (row["source"], row["family"], row["learner"], row["hidden_sizes"], row["aux_size"]) == (
        "mushrooms",
        "rbm",
        "avil",
        "50",
        15,
    )
    # the largest K, the base-rate start (the fixed rule), mean over two seeds; every start's value beside it
    assert (row["K"], row["init"], row["n_seeds"]) == (1000, "base-rate", 2)
    assert row["ais"] == pytest.approx(-17.0)
    assert row["ais_se"] == pytest.approx(math.sqrt(2 * 0.05**2) / 2)
    assert (row["ais_base_rate"], row["ais_uniform"]) == (pytest.approx(-17.0), pytest.approx(-17.5))
    assert row["ais_base_rate_se"] == row["ais_se"] and row["ais_uniform_se"] == pytest.approx(row["ais_se"])
    assert row["exact"] == pytest.approx(-17.05)
    assert (row["paper_table"], row["paper_row"], row["paper"]) == ("2", "rbm/avil", -16.82)
    assert row["diff"] == pytest.approx(-0.18)
    assert row["tolerance"] == pytest.approx(2 * row["ais_se"])
    assert row["within_uncertainty"] == "no"
    vcd = t.iloc[1]
    assert (vcd["paper_table"], vcd["paper_row"], vcd["paper"], vcd["hidden_sizes"]) == (
        "3",
        "dbm/vcd",
        -21.89,
        "50-50",
    )
    assert vcd["diff"] == pytest.approx(-0.11) and vcd["within_uncertainty"] == "no"
    grbm = t.iloc[2]
    assert math.isnan(grbm["paper"]) and grbm["within_uncertainty"] == "no paper value"
    # a looser z takes the AVIL difference in
    assert learners.make_table_learners(summary, models[:1], z=6.0)["within_uncertainty"].iloc[0] == "yes"


def test_within_uncertainty():
    nan = float("nan")
    assert learners.within_uncertainty(-17.0, 0.1, -16.82, 2.0) == "yes"
    assert learners.within_uncertainty(-17.0, 0.05, -16.82, 2.0) == "no"
    assert learners.within_uncertainty(-17.0, nan, -16.82, 2.0) == "no uncertainty"
    assert learners.within_uncertainty(-17.0, 0.1, nan, 2.0) == "no paper value"
    assert learners.within_uncertainty(nan, nan, -16.82, 2.0) == "no AIS estimate"


def test_header_only_table_without_learners(tmp_path):
    paths = report.build_report(avil_records(), tmp_path, model_records=[trained("mush-avil", None)], plots=False)
    assert (tmp_path / "table_learners.csv").read_text().strip() == ",".join(learners.LEARNER_TABLE_COLUMNS)
    assert paths["learner_plots"] == {}
    rep = json.loads((tmp_path / "report.json").read_text())
    assert "table_learners" not in rep and "table_learners" not in rep["files"]


# --------------------------------------------------------------------------- figures
def write_run(root):
    """A tiny results tree: an AVIL RBM (exact values), an NVIL RBM (none: its AIS log Z is drawn), a VCD
    DBM and an AVIL GRBM on 2x3 "images", with histories, samples and the GRBM's W."""
    models, data = root / "models", root / "data"
    models.mkdir(parents=True)
    data.mkdir()
    np.savez(
        data / "tiny.npz",
        train=np.zeros((4, 6), np.uint8),
        meta=np.array(json.dumps({"dataset": "mushrooms", "image_shape": [2, 3]})),
    )
    it = np.arange(0, 50, 10)
    hist = {
        "avil": {
            "iteration": it,
            "free_energy_bound": -3 + 0.1 / (1 + it),
            "free_energy_bound_stderr": 0.1 + 0 * it,
            "exact_free_energy": -3.2 + 0 * it,
            "entropy_bound": 4 - 0.01 * it,
            "exact_entropy": 4.1 + 0 * it,
            "log_z_bound": 10 + 0.1 * it,
            "log_z_bound_stderr": 0.3 + 0 * it,
            "exact_log_z": 15 + 0 * it,
            "model_loss": -1 / (1 + it),
        },
        "nvil": {
            "iteration": it,
            "log_z_upper_bound": 20 - 0.1 * it,
            "log_z_importance": 19 - 0.1 * it,
            "model_loss": -2 / (1 + it),
            "exact_log_z": np.full(len(it), np.nan),
        },
        "vcd": {
            "iteration": it,
            "free_energy_bound": -3 + 0 * it,
            "negative_free_energy_bound": -2.5 + 0 * it,
            "model_loss": 0.1 + 0 * it,
        },
    }
    records = []
    for name, lrn, fam in (
        ("t-avil", "avil", "rbm"),
        ("t-nvil", "nvil", "rbm"),
        ("t-vcd", "vcd", "dbm"),
        ("t-grbm", "avil", "grbm"),
    ):
        rec = trained(name, lrn, family=fam, dataset="tiny", hidden=(4,))
        (models / f"{name}.json").write_text(json.dumps(rec))
        pd.DataFrame(hist[lrn]).to_csv(models / f"{name}.history.csv", index=False)
        records.append(models / f"{name}.json")
    rng = np.random.default_rng(0)
    np.savez(models / "t-avil.samples.npz", model_mean_v=rng.random((5, 6)), decoder_mean_v=rng.random((5, 6)))
    np.savez(models / "t-vcd.samples.npz", model_mean_v=rng.random((5, 6)))
    np.savez(models / "t-grbm.npz", W=rng.normal(size=(6, 4)))
    estimates = [
        est(m, "ais", K=100, init="uniform", ll=-5.0, log_z=14.0, dataset="tiny")
        for m in ("t-avil", "t-nvil", "t-vcd", "t-grbm")
    ]
    return records, data, estimates


def test_learner_figures_written(tmp_path):
    records, data, estimates = write_run(tmp_path / "results")
    out = tmp_path / "results" / "report"
    report.build_report(estimates, out, model_records=records, data_dir=data, plots=False)
    t = pd.read_csv(out / "table_learners.csv", keep_default_na=False)
    assert set(t["model"]) == {"t-avil", "t-nvil", "t-vcd", "t-grbm"}
    assert set(t["source"]) == {"mushrooms"}  # from the prepared dataset's meta
    rep = json.loads((out / "report.json").read_text())
    assert len(rep["table_learners"]) == 4 and "table_learners" in rep["files"]
    # the figures (build_report draws them with plots=True)
    models = learners.learner_models(records, data)
    paths = learner_plots.plot_learners(report.summarize(report.load_results(estimates)), models, out / "plots")
    expected = {
        "t-avil_bounds",
        "t-nvil_bounds",
        "t-vcd_bounds",
        "t-grbm_bounds",
        "tiny_bounds_vs_ais",
        "t-avil_samples",
        "t-vcd_samples",
        "t-grbm_filters",
    }
    assert set(paths) == expected
    for stem in expected:
        assert (out / "plots" / f"{stem}.png").stat().st_size > 1000, stem


def test_frey_samples_back_to_pixels(tmp_path):
    shape = (28, 20)
    n = shape[0] * shape[1]
    np.savez(
        tmp_path / "frey.npz",
        mean=np.full(n, 100.0),
        sd=np.full(n, 10.0),
        meta=np.array(json.dumps({"dataset": "frey", "image_shape": list(shape)})),
    )
    (m,) = learners.learner_models([trained("f", "avil", family="grbm", dataset="frey")], tmp_path)
    assert m.image_shape == shape and m.source == "frey"
    images, lo, hi = learner_plots._as_images(np.array([np.ones(n), np.full(n, 30.0)]), m)
    assert images.shape == (2, *shape) and (lo, hi) == (0.0, 255.0)
    assert (images[0] == 110).all() and (images[1] == 255).all()  # clipped


def test_an_ablation_has_no_paper_value():
    summary = report.summarize(report.load_results(avil_records()))
    rec = trained("mush-avil", "avil")
    rec["hyperparams"]["ablation"] = "no_decoder_entropy"
    row = learners.make_table_learners(summary, learners.learner_models([rec]), z=2.0).iloc[0]
    assert row["ablation"] == "no_decoder_entropy"
    assert math.isnan(row["paper"]) and row["within_uncertainty"] == "no paper value"
    paper = learners.make_table_learners_paper(learners.make_table_learners(summary, learners.learner_models([rec])))
    assert set(paper["value"]) == {"paper"}  # only the published rows: the ablation is not ours to compare
