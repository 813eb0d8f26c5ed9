"""table_learner_timing.csv (Li et al. Sec. 5.5: AVIL's training time against VCD's), from synthetic records."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from logzbench import report
from logzbench.pipeline.usage import job_usage_file, log_file, write_usage
from logzbench.report import learners
from logzbench.report.timing import TIMING_COLUMNS, make_table_learner_timing


def trained(model, learner, *, family="dbm", dataset="mushrooms", hidden=(50, 50), seconds=None, iterations=1000):
    """A training summary record as :func:`logzbench.pipeline.jobs.train_job` writes it (``seconds``
    absent when ``None``)."""
    hp = {"family": family, "iterations": iterations, "device": "cpu"}
    if learner:
        hp["learner"] = learner
    rec = {
        "model": model,
        "dataset": dataset,
        "family": family,
        "hidden_sizes": list(hidden),
        "hyperparams": hp,
        "final": {"final_iteration": iterations},
    }
    if seconds is not None:
        rec["seconds"] = seconds
    return rec


def ais_record(model, *, ll, seed, dataset="mushrooms"):
    return {
        "key": f"estimate/{model}/ais/1000/base-rate/{seed}",
        "model": model,
        "dataset": dataset,
        "estimator": "ais",
        "method": "ais",
        "K": 1000,
        "init": "base-rate",
        "seed": seed,
        "schedule": "linear",
        "chains": 100,
        "result": {
            "estimator": "ais",
            "log_z": 30.0,
            "log_z_stderr": 0.01,
            "ess": 90.0,
            "n_chains": 100,
            "mean_log_likelihood": ll,
            "mean_log_likelihood_stderr": 0.05,
            "seconds": 1.0,
            "settings": {},
            "extra": {},
        },
    }


@pytest.fixture
def records():
    return [
        trained("mush-dbm-avil", "avil", seconds=500.0),
        trained("mush-dbm-vcd", "vcd", seconds=50.0, iterations=500),
        trained("adult-dbm-avil", "avil", dataset="adult", seconds=80.0),  # no VCD DBM on adult
        trained("mush-rbm-nvil", "nvil", family="rbm", hidden=(50,), seconds=None),  # time not recorded
        trained("mush-rbm-cd", None, family="rbm", hidden=(50,), seconds=10.0),  # not learner-trained
    ]


def summary_of(*ests):
    return report.summarize(report.load_results(list(ests)))


def test_rows_ratio_and_missing_times(records):
    summary = summary_of(*(ais_record("mush-dbm-avil", ll=-21.0 - s, seed=s) for s in (0, 1)))
    t = make_table_learner_timing(summary, records)
    assert list(t.columns) == TIMING_COLUMNS
    # one row per learner-trained model (the CD-trained RBM has none), sorted by dataset, family, learner
    assert list(t["model"]) == ["adult-dbm-avil", "mush-dbm-avil", "mush-dbm-vcd", "mush-rbm-nvil"]
    t = t.set_index("model")
    assert t.loc["mush-dbm-avil", "seconds_per_iteration"] == pytest.approx(0.5)
    assert t.loc["mush-dbm-vcd", "seconds_per_iteration"] == pytest.approx(0.1)
    # AVIL's seconds per iteration over VCD's, on both DBMs of the dataset that has the pair, by
    # iteration and not by total time (VCD ran half the iterations)
    assert t.loc["mush-dbm-avil", "avil_vcd_time_ratio"] == pytest.approx(5.0)
    assert t.loc["mush-dbm-vcd", "avil_vcd_time_ratio"] == pytest.approx(5.0)
    assert math.isnan(t.loc["adult-dbm-avil", "avil_vcd_time_ratio"])  # no VCD DBM there
    # a time not recorded is missing, not zero, and so is everything computed from it
    for c in ("train_seconds", "seconds_per_iteration", "avil_vcd_time_ratio", "cpu_seconds"):
        assert math.isnan(t.loc["mush-rbm-nvil", c]), c
    assert pd.isna(t.loc["mush-rbm-nvil", "threads"])
    # the final AIS test log-likelihood: mean over the seeds at the largest K; none without an estimate
    assert t.loc["mush-dbm-avil", "ais"] == pytest.approx(-21.5)
    assert t.loc["mush-dbm-avil", "K"] == 1000 and t.loc["mush-dbm-avil", "init"] == "base-rate"
    assert math.isnan(t.loc["mush-dbm-vcd", "ais"])
    assert (t.loc["mush-dbm-avil", "iterations"], t.loc["mush-dbm-avil", "device"]) == (1000, "cpu")


def test_missing_vcd_time_leaves_ratio_empty(records):
    records[1].pop("seconds")
    t = make_table_learner_timing(summary_of(), records).set_index("model")
    assert t["avil_vcd_time_ratio"].isna().all()
    assert t.loc["mush-dbm-avil", "train_seconds"] == pytest.approx(500.0)


def test_csv_from_files_with_usage(tmp_path, records):
    """From the workflow's layout: the record files, a job usage file for one of them; the CSV's
    missing cells are empty."""
    models = tmp_path / "results" / "models"
    models.mkdir(parents=True)
    paths = []
    for rec in records:
        p = models / f"{rec['model']}.json"
        p.write_text(json.dumps({k: v for k, v in rec.items() if k != "model"}))  # the name from the file
        paths.append(p)
    usage = job_usage_file(log_file(str(tmp_path / "results"), "train/mush-dbm-vcd"))
    write_usage(
        usage,
        {"s": 50.0, "h:m:s": "0:00:50", "max_rss": 1.0, "cpu_time": 95.5, "user_s": 95.0, "system_s": 0.5, "pid": 1,
         "warm": True},
    )  # fmt: skip
    out = tmp_path / "report"
    built = report.build_report([], out, model_records=paths, plots=False)
    assert built["table_learner_timing"] == out / "table_learner_timing.csv"
    csv = pd.read_csv(out / "table_learner_timing.csv", keep_default_na=False)
    assert list(csv.columns) == TIMING_COLUMNS and len(csv) == 4
    by = csv.set_index("model")
    assert float(by.loc["mush-dbm-vcd", "cpu_seconds"]) == pytest.approx(95.5)
    assert by.loc["mush-dbm-avil", "cpu_seconds"] == ""  # no usage file
    assert by.loc["mush-rbm-nvil", "train_seconds"] == "" and by.loc["mush-rbm-nvil", "threads"] == ""


def test_not_written_without_learner_models(tmp_path):
    records = [trained("cd", None, family="rbm", hidden=(5,))]
    built = report.build_report([], tmp_path, model_records=records, plots=False)
    assert "table_learner_timing" not in built and not (tmp_path / "table_learner_timing.csv").exists()


def test_offline_avil_config_has_paper_values_and_a_ratio_per_dataset():
    """config/avil_offline.yaml: every model finds its published value (Table 2 or 3, by family, learner and
    data set) and every data set has an AVIL and a VCD DBM, so the timing table has a ratio for each."""
    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "avil_offline.yaml").read_text())
    records = []
    for i, (name, entry) in enumerate(cfg["models"].items()):
        hp = entry["hyperparams"]
        hidden = hp.get("hidden_sizes") or [hp["n_hidden"]]
        records.append(
            trained(name, hp["learner"], family=hp.get("family", "rbm"), dataset=entry["dataset"], hidden=hidden,
                    seconds=10.0 + i, iterations=hp["iterations"])
        )  # fmt: skip
    summary = summary_of()
    table = learners.make_table_learners(summary, learners.learner_models(records))
    assert len(table) == len(cfg["models"]) and table["paper"].notna().all(), table[["model", "paper"]]
    ratio = make_table_learner_timing(summary, records).dropna(subset=["avil_vcd_time_ratio"])
    assert set(ratio["dataset"]) == set(cfg["datasets"]) and len(ratio) == 2 * len(cfg["datasets"])


def write_history(path, seconds, ais_at):
    """A learner's history: rows every 100 iterations, cumulative ``seconds``, an AIS value where run."""
    its = [100 * i for i in range(len(seconds))]
    ais = [30.0 if it in ais_at else float("nan") for it in its]
    pd.DataFrame({"iteration": its, "seconds": seconds, "ais_log_z": ais}).to_csv(path, index=False)


def test_ratio_leaves_the_ais_monitor_out(tmp_path):
    """AVIL trains 0.5 s per iteration, VCD 0.01 s, and each spends 10 s in the AIS monitor at iterations 0,
    200 and 400: the ratio is that of training (50), not of the totals (230 s / 34 s)."""
    cum = {"avil": [10, 60, 120, 170, 230], "vcd": [10, 11, 22, 23, 34]}
    paths = []
    for learner, seconds in cum.items():
        rec = trained(f"m-{learner}", learner, seconds=float(seconds[-1]), iterations=400)
        path = tmp_path / f"m-{learner}.json"
        path.write_text(json.dumps(rec))
        write_history(tmp_path / f"m-{learner}.history.csv", seconds, ais_at=(0, 200, 400))
        paths.append(path)
    t = make_table_learner_timing(summary_of(), paths).set_index("model")
    assert t.loc["m-avil", "seconds_per_iteration_no_ais"] == pytest.approx(0.5)
    assert t.loc["m-vcd", "seconds_per_iteration_no_ais"] == pytest.approx(0.01)
    assert t.loc["m-avil", "seconds_per_iteration"] == pytest.approx(230 / 400)
    assert t["avil_vcd_time_ratio"].tolist() == [pytest.approx(50.0)] * 2
    # without the VCD history the ratio falls back to the whole training's time, for both rows alike
    (tmp_path / "m-vcd.history.csv").unlink()
    t = make_table_learner_timing(summary_of(), paths)
    assert t["avil_vcd_time_ratio"].tolist() == [pytest.approx(230 / 34)] * 2
