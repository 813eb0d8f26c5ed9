"""What a reviewer reads in the MLflow UI beside the numbers: run names that say the setting, the
sweep family the default view groups by, the flag's reason in short and the difference from the
exact value (set by the report)."""

from __future__ import annotations

import itertools
import math

import pytest
from test_report import rec as _rec

from logzbench import tracking

# the per-run numbers below: log Z and mean test LL of each (model, estimator, init, K, seed)
EXACT = {"good": (50.123456789012, -100.0)}  # model -> (log Z, mean test LL); "free" has no exact value


def _uri(tmp_path) -> str:
    return "sqlite:///" + str(tmp_path / "mlflow.db")


def _records() -> list[dict]:
    """A model with an exact value (AIS a little off it, one AIS start far off: flagged; RAISE) and one
    without (AIS, RAISE 3 nats apart: the AIS-RAISE gap flags both)."""
    lz, ll = EXACT["good"]
    out = [_rec("good", "exact", ll=ll, log_z=lz, chains=0)]
    for K, seed in itertools.product((100, 1000), (0, 1)):
        d = 0.01 * seed + 1e-7 * K  # differences that 3 significant digits would round away
        out.append(_rec("good", "ais", K=K, init="base-rate", seed=seed, ll=ll + 0.02 + d, log_z=lz - 0.02 - d, ess=80))
        out.append(_rec("good", "raise", K=K, init="base-rate", seed=seed, ll=ll - 0.1 - d, log_z=lz + 0.1, ess=8))
    # AIS from the uniform start: its log-likelihood far below exact (flagged: Z-unbiased estimate below exact)
    out.append(_rec("good", "ais", K=100, init="uniform", seed=0, ll=ll - 5.0, log_z=lz + 5.0, ess=80))
    for seed in (0, 1):
        out.append(_rec("free", "ais", K=100, init="uniform", seed=seed, ll=-90.0, log_z=30.0, ess=80))
        out.append(_rec("free", "raise", K=100, init="uniform", seed=seed, ll=-93.0, log_z=33.0, ess=8))
    return out


# --------------------------------------------------------------------------- run names and sweeps
def test_run_names_say_model_estimator_start_k_and_seed():
    key = tracking.estimate_key("mnist-rbm20", "ais", 1000, "base-rate", 0)
    assert tracking.estimate_run_name(key) == "mnist-rbm20 ais base-rate K=1000 seed=0"
    assert tracking.estimate_run_name(tracking.estimate_key("m", "exact")) == "m exact"
    assert tracking.estimate_run_name(tracking.estimate_key("m", "csl", 100.0, None, 3)) == "m csl K=100 seed=3"
    assert tracking.estimate_sweep(key) == "mnist-rbm20 / ais / base-rate"
    assert tracking.estimate_sweep(tracking.estimate_key("m", "csl", 100, None, 3)) == "m / csl"
    assert tracking.estimate_run_name("estimate/odd") == "odd"  # not a key of estimate_key's form: itself


def test_run_names_are_unique_per_key_and_sweeps_hold_only_k_and_seed():
    """Over a grid of settings (models with dashes and dots, settings an estimator does not use), distinct
    keys get distinct run names, and two keys share a sweep exactly when only their K and seed differ."""
    settings = list(
        itertools.product(
            ("m", "mnist-rbm20", "m.v2", "ais"),
            ("ais", "raise", "exact", "csl"),
            (None, 10, 100, 1000),
            (None, "uniform", "base-rate"),
            (None, 0, 1, 10),
        )
    )
    keys = {tracking.estimate_key(*s): s for s in settings}
    names = {tracking.estimate_run_name(k) for k in keys}
    assert len(names) == len(keys) == len(settings)
    for (k1, s1), (k2, s2) in itertools.combinations(list(keys.items())[::7], 2):
        same_family = s1[:2] == s2[:2] and s1[3] == s2[3]
        assert (tracking.estimate_sweep(k1) == tracking.estimate_sweep(k2)) == same_family, (k1, k2)


def test_logged_estimates_carry_their_name_sweep_and_unchanged_keys(tmp_path):
    uri = _uri(tmp_path)
    recs = _records()
    with tracking.TrackingSession(uri, "exp") as session:
        for r in recs:
            tracking.log_estimate(r, session=session)
    runs = tracking.find_runs(uri=uri, experiment_name="exp", kind="estimate")
    assert len(runs) == len(recs)
    by_key = {r.data.tags[tracking.KEY_TAG]: r for r in runs}
    assert set(by_key) == {r["key"] for r in recs}
    for rec in recs:
        tags = by_key[rec["key"]].data.tags
        assert tags["mlflow.runName"] == tracking.estimate_run_name(rec["key"])
        init = f" / {rec['init']}" if rec["init"] else ""
        assert tags[tracking.SWEEP_TAG] == f"{rec['model']} / {rec['estimator']}{init}"
        # the tags the UI grouped by before stay as they were
        assert tags[tracking.GROUP_TAG] == rec["model"]
        assert tags[tracking.SETTING_TAG] == rec["key"].removeprefix("estimate/").rsplit("/seed", 1)[0]
    assert len({r.data.tags["mlflow.runName"] for r in runs}) == len(runs)


def test_training_and_other_runs_have_a_sweep_to_group_by(tmp_path):
    uri = _uri(tmp_path)
    tracking.log_training("m", hyperparams={}, history=[], uri=uri, experiment_name="exp")
    tracking.log_run("report", uri=uri, experiment_name="exp", kind="report")
    tags = {r.data.tags[tracking.KEY_TAG]: r.data.tags for r in tracking.find_runs(uri=uri, experiment_name="exp")}
    assert tags["train/m"][tracking.SWEEP_TAG] == "m / train"
    assert tags["train/m"]["mlflow.runName"] == "train/m"  # unchanged
    assert tags["report"][tracking.SWEEP_TAG] == "report"


# --------------------------------------------------------------------------- the flag's reason in short
LONG = "heavy-tailed log-weights: Pareto k-hat 0.91 > 0.7, the standard error understates the uncertainty"
SANDWICH = (
    "AIS log Z exceeds reverse AIS by 1.23 nats (> 2 x combined s.e. 0.12, base-rate, K=1000): "
    "the bounds do not sandwich log Z"
)


@pytest.mark.parametrize(
    "reasons, expected",
    [
        ([], None),
        (["", ""], None),
        (["low ESS: 3 of 100 chains (3% < 10%)"], "low ESS: 3 of 100 chains (3% < 10%)"),
        ([LONG], "heavy-tailed log-weights: Pareto k-hat 0.91 > 0.7"),
        ([SANDWICH, LONG], "AIS log Z exceeds reverse AIS by 1.23 nats (+1 more)"),  # no cut inside parentheses
        ([LONG, LONG], "heavy-tailed log-weights: Pareto k-hat 0.91 > 0.7"),  # the same reason twice is one
    ],
)
def test_flag_reason_is_the_first_reason_in_short(reasons, expected):
    assert tracking.flag_reason(reasons) == expected


@pytest.mark.parametrize("width", [20, 40, 80])
@pytest.mark.parametrize("first", [LONG, SANDWICH, "x" * 200, "word " * 40, "a, b"])
def test_flag_reason_fits_its_column_and_begins_the_first_reason(first, width):
    short = tracking.flag_reason([first, "other"], width=width)
    assert len(short) <= width
    head = short.removesuffix(" (+1 more)").removesuffix("\u2026")
    assert short.endswith(" (+1 more)") and head and " ".join(first.split()).startswith(head)


# --------------------------------------------------------------------------- what the report sets
@pytest.fixture
def reported(tmp_path):
    """The runs of :func:`_records` after a report with MLflow tracking: ``(runs by key, records by key,
    report paths)``."""
    pytest.importorskip("matplotlib")
    from logzbench import report

    uri = _uri(tmp_path)
    tracking.init_store(uri, "exp")
    recs = _records()
    with tracking.TrackingSession(uri, "exp") as session:
        for r in recs:
            tracking.log_estimate(r, session=session)
    paths = report.build_report(recs, tmp_path / "out", tracking_uri=uri, experiment_name="exp", plots=False)
    runs = {r.data.tags[tracking.KEY_TAG]: r for r in tracking.find_runs(uri=uri, experiment_name="exp")}
    return runs, {r["key"]: r for r in recs}, paths


def test_report_sets_the_difference_from_the_exact_value_in_full_precision(reported):
    runs, recs, _ = reported
    lz, ll = EXACT["good"]
    n = 0
    for key, run in runs.items():
        m = run.data.metrics
        if recs[key]["model"] == "good":
            res = recs[key]["result"]
            assert set(tracking.EXACT_DIFFERENCE_METRICS) <= set(m), key
            assert m["log_z_minus_exact"] == pytest.approx(res["log_z"] - lz, abs=1e-9), key
            assert m["log_z_minus_exact"] == pytest.approx(m["log_z"] - lz, abs=1e-9), key
            assert m["mean_test_ll_minus_exact"] == pytest.approx(m["mean_test_ll"] - ll, abs=1e-9), key
            n += 1
        else:  # no exact value for the model: no difference
            assert "log_z_minus_exact" not in m and "mean_test_ll_minus_exact" not in m, key
    assert n == sum(r["model"] == "good" for r in recs.values()) > 1
    # the exact run itself: 0; differences 3 significant digits would round to one value stay apart
    assert runs[tracking.estimate_key("good", "exact")].data.metrics["log_z_minus_exact"] == 0.0
    k100 = runs[tracking.estimate_key("good", "ais", 100, "base-rate", 0)].data.metrics["log_z_minus_exact"]
    k1000 = runs[tracking.estimate_key("good", "ais", 1000, "base-rate", 0)].data.metrics["log_z_minus_exact"]
    assert k100 != k1000 and k100 - k1000 == pytest.approx(9e-5, abs=1e-9)


def test_report_tags_the_reason_exactly_on_flagged_runs(reported):
    runs, recs, _ = reported
    flagged = {k for k, r in runs.items() if r.data.tags.get(tracking.FLAGGED_TAG) == "true"}
    # the AIS far below exact, and the AIS-RAISE gap of the model without an exact value
    assert tracking.estimate_key("good", "ais", 100, "uniform", 0) in flagged
    assert {k for k in recs if recs[k]["model"] == "free"} <= flagged
    assert tracking.estimate_key("good", "exact") not in flagged
    for key, run in runs.items():
        tags = run.data.tags
        assert (tracking.FLAG_REASON_TAG in tags) == (key in flagged) == (tracking.FLAG_TAG in tags), key
        if key in flagged:
            reason, full = tags[tracking.FLAG_REASON_TAG], tags[tracking.FLAG_TAG]
            assert 0 < len(reason) <= tracking.keys.FLAG_REASON_WIDTH
            assert reason == tracking.flag_reason(full.split("; "))
            first = full.split("; ")[0]
            head = reason.split(" (+")[0].removesuffix("\u2026")
            assert first.startswith(head), (reason, full)
        else:
            assert tags[tracking.FLAGGED_TAG] == "false"


def test_a_report_that_no_longer_flags_a_run_removes_its_reason(tmp_path):
    uri = _uri(tmp_path)
    key = tracking.estimate_key("m", "ais", 100, "uniform", 0)
    tracking.log_estimate(
        _rec("m", "ais", K=100, init="uniform", ll=-90.0, log_z=30.0, ess=1), uri=uri, experiment_name="exp"
    )  # low ESS: flagged when logged
    (run,) = tracking.find_runs(key, uri=uri, experiment_name="exp")
    assert run.data.tags[tracking.FLAG_REASON_TAG].startswith("low ESS")
    assert tracking.set_flags({key: [LONG]}, uri=uri, experiment_name="exp") == 1
    (run,) = tracking.find_runs(key, uri=uri, experiment_name="exp")
    assert run.data.tags[tracking.FLAG_REASON_TAG] == tracking.flag_reason([LONG])
    assert tracking.set_flags({key: []}, uri=uri, experiment_name="exp", metrics={key: {"x": math.nan}}) == 0
    (run,) = tracking.find_runs(key, uri=uri, experiment_name="exp")
    assert tracking.FLAG_REASON_TAG not in run.data.tags and tracking.FLAG_TAG not in run.data.tags
    assert run.data.tags[tracking.FLAGGED_TAG] == "false" and "x" not in run.data.metrics
