"""What a reviewer reads in the MLflow UI beside the numbers: run names that say the setting, the
sweep family the default view groups by, the flag's reason in short and the difference from the
exact value (set by the report)."""

from __future__ import annotations

import itertools
import math
from collections import Counter

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


# --------------------------------------------------------------------------- a parent run per sweep
def _sweeps(recs) -> dict[str, list[dict]]:
    """The records with a K or a seed by sweep (:func:`tracking.estimate_sweep`); exact runs have no sweep
    parent."""
    out: dict[str, list[dict]] = {}
    for r in recs:
        if tracking.sweep_parent(r["key"]) is not None:
            out.setdefault(tracking.estimate_sweep(r["key"]), []).append(r)
    return out


def _timed(recs, t0: float = 1.7e9) -> list[dict]:
    """``recs`` with job times, one after another (10 s each, 2 s apart), as a sweep job runs them."""
    return [{**r, "started_at": t0 + 12 * i, "finished_at": t0 + 12 * i + 10} for i, r in enumerate(recs)]


def _parents(uri) -> dict[str, object]:
    """The live parent runs by sweep; fails on two of one sweep."""
    runs = tracking.find_runs(uri=uri, experiment_name="exp", parents=True)
    by_sweep = {r.data.tags[tracking.SWEEP_TAG]: r for r in runs}
    assert len(by_sweep) == len(runs), [r.data.tags[tracking.SWEEP_TAG] for r in runs]
    return by_sweep


def test_sweep_parent_names_the_sweep_and_skips_the_exact_run():
    key = tracking.estimate_key("mnist-rbm20", "ais", 1000, "base-rate", 0)
    assert tracking.sweep_run_name(key) == "mnist-rbm20 ais base-rate"
    assert tracking.sweep_key(key) == "sweep/mnist-rbm20/ais/base-rate"
    assert tracking.sweep_parent(key) == {
        "sweep": "mnist-rbm20 / ais / base-rate",
        "key": "sweep/mnist-rbm20/ais/base-rate",
        "name": "mnist-rbm20 ais base-rate",
        "params": {"model": "mnist-rbm20", "estimator": "ais", "init": "base-rate"},
    }
    csl = tracking.estimate_key("m", "csl", 100, None, 3)
    assert (tracking.sweep_run_name(csl), tracking.sweep_key(csl)) == ("m csl", "sweep/m/csl")
    assert tracking.sweep_parent(csl)["params"] == {"model": "m", "estimator": "csl"}
    # seeds without K (DS) have a sweep; exact (neither) is one run, its own row
    assert tracking.sweep_parent(tracking.estimate_key("m", "ds", None, "base-rate", 1))["name"] == "m ds base-rate"
    assert tracking.sweep_parent(tracking.estimate_key("m", "exact")) is None
    # a parent's name is its children's less K and seed, and no child's name
    assert tracking.estimate_run_name(key).startswith(tracking.sweep_run_name(key) + " K=")


def test_each_sweep_gets_one_parent_run_that_its_runs_are_children_of(tmp_path):
    """One parent per model and sweep (estimator, start), named for it, with the sweep's params, K values,
    seeds and number of runs (no mean of anything), finished when its last run finished; every run of the
    sweep points to it (``mlflow.parentRunId``), the exact run to none."""
    uri = _uri(tmp_path)
    recs = _timed(_records())
    with tracking.TrackingSession(uri, "exp") as session:
        for r in recs:
            tracking.log_estimate(r, session=session)
    sweeps, parents = _sweeps(recs), _parents(uri)
    assert (
        set(parents)
        == set(sweeps)
        == {
            "good / ais / base-rate",
            "good / raise / base-rate",
            "good / ais / uniform",
            "free / ais / uniform",
            "free / raise / uniform",
        }
    )
    runs = {r.data.tags[tracking.KEY_TAG]: r for r in tracking.find_runs(uri=uri, experiment_name="exp")}
    for sweep, members in sweeps.items():
        p = parents[sweep]
        model, estimator, init = sweep.split(" / ")
        assert p.info.run_name == p.data.tags["mlflow.runName"] == f"{model} {estimator} {init}"
        assert p.data.params == {"model": model, "estimator": estimator, "init": init}
        assert p.data.tags[tracking.KIND_TAG] == tracking.PARENT_KIND and p.data.tags[tracking.PARENT_TAG] == "true"
        assert p.data.tags[tracking.KEY_TAG] == f"sweep/{model}/{estimator}/{init}"
        assert p.data.tags[tracking.GROUP_TAG] == model
        assert p.data.tags["logzbench.K_values"] == ", ".join(sorted({str(r["K"]) for r in members}, key=int))
        assert p.data.tags["logzbench.seeds"] == ", ".join(sorted({str(r["seed"]) for r in members}, key=int))
        assert p.data.metrics == {"n_runs": len(members)}  # a count, no estimate averaged over K or seeds
        children = [runs[r["key"]] for r in members]
        assert {c.data.tags["mlflow.parentRunId"] for c in children} == {p.info.run_id}
        assert p.info.status == "FINISHED"
        assert p.info.start_time == min(c.info.start_time for c in children)
        assert p.info.end_time == max(c.info.end_time for c in children)
    exact = runs[tracking.estimate_key("good", "exact")]
    assert "mlflow.parentRunId" not in exact.data.tags
    # 4 K x seed settings of "good / ais / base-rate": 4 children
    assert parents["good / ais / base-rate"].data.metrics["n_runs"] == 4


def test_a_rerun_reuses_the_parents_and_a_new_k_updates_them(tmp_path):
    """Logging a sweep again (a rerun, in a new session, or its runs one at a time without a session)
    reuses each sweep's parent run: no second parent, the new runs its children; a new K value is added to
    the parent's K values and run count."""
    uri = _uri(tmp_path)
    recs = _timed(_records())
    with tracking.TrackingSession(uri, "exp") as session:
        for r in recs:
            tracking.log_estimate(r, session=session)
    first = {s: p.info.run_id for s, p in _parents(uri).items()}
    with tracking.TrackingSession(uri, "exp") as session:  # the rerun
        for r in recs:
            tracking.log_estimate(r, session=session)
    for r in recs[:3]:  # and a few more reruns, one run each
        tracking.log_estimate(r, uri=uri, experiment_name="exp")
    more = _rec("good", "ais", K=10000, init="base-rate", seed=0, ll=-100.0, log_z=50.1, ess=80)
    tracking.log_estimate({**more, "started_at": 1.8e9, "finished_at": 1.8e9 + 30}, uri=uri, experiment_name="exp")
    parents = _parents(uri)
    assert {s: p.info.run_id for s, p in parents.items()} == first
    runs = tracking.find_runs(uri=uri, experiment_name="exp")
    keys = Counter(r.data.tags[tracking.KEY_TAG] for r in runs)
    assert set(keys.values()) == {1} and len(keys) == len(recs) + 1  # one run per key, no parent among them
    for r in runs:
        sweep = r.data.tags[tracking.SWEEP_TAG]
        assert r.data.tags.get("mlflow.parentRunId") == first.get(sweep), r.data.tags[tracking.KEY_TAG]
    p = parents["good / ais / base-rate"]
    assert p.data.tags["logzbench.K_values"] == "100, 1000, 10000" and p.data.metrics["n_runs"] == 5
    assert p.info.end_time == int((1.8e9 + 30) * 1000) and p.info.status == "FINISHED"
    client = tracking.get_client(uri)
    exp = client.get_experiment_by_name("exp")
    deleted = client.search_runs([exp.experiment_id], filter_string="tags.`logzbench.parent` = 'true'", run_view_type=2)
    assert deleted == []  # no parent was ever created twice


def test_parent_runs_are_left_out_of_every_listing_of_estimates(tmp_path):
    """find_runs (all runs, by kind, by key prefix), the one-run-per-key tidying and set_flags see no parent
    run; ``parents=True`` lists only them."""
    uri = _uri(tmp_path)
    recs = _records()
    with tracking.TrackingSession(uri, "exp") as session:
        for r in recs:
            tracking.log_estimate(r, session=session)
    tracking.log_run("report", uri=uri, experiment_name="exp", kind="report")
    everything = tracking.find_runs(uri=uri, experiment_name="exp")
    assert len(everything) == len(recs) + 1
    assert not [r for r in everything if r.data.tags.get(tracking.PARENT_TAG)]
    assert len(tracking.find_runs(uri=uri, experiment_name="exp", kind="estimate")) == len(recs)
    assert tracking.find_runs(uri=uri, experiment_name="exp", kind=tracking.PARENT_KIND) == []
    assert tracking.find_runs("sweep/good/ais/base-rate", uri=uri, experiment_name="exp") == []
    assert tracking.find_runs(uri=uri, experiment_name="exp", key_prefix="sweep/") == []
    parents = tracking.find_runs(uri=uri, experiment_name="exp", parents=True)
    assert len(parents) == len(_sweeps(recs)) and all(p.data.tags[tracking.PARENT_TAG] == "true" for p in parents)
    # the report's flags: every key flagged, the parents untouched
    flags = {r["key"]: ["x"] for r in recs}
    assert tracking.set_flags(flags, uri=uri, experiment_name="exp", metrics={k: {"m": 1.0} for k in flags}) == len(
        recs
    )
    for p in tracking.find_runs(uri=uri, experiment_name="exp", parents=True):
        assert tracking.FLAGGED_TAG not in p.data.tags and "m" not in p.data.metrics


def test_the_report_flags_no_parent_run(reported, tmp_path):
    """After a real report (its flags and differences from the exact value on the runs) the parent runs carry
    none of the report's tags or metrics, and the runs listed are the estimates, one per key."""
    runs, recs, _ = reported
    assert set(runs) == set(recs)
    for p in tracking.find_runs(uri=_uri(tmp_path), experiment_name="exp", parents=True):
        assert not {tracking.FLAGGED_TAG, tracking.FLAG_TAG, tracking.FLAG_REASON_TAG} & set(p.data.tags)
        assert set(p.data.metrics) == {"n_runs"}


def test_concurrent_creators_of_a_parent_converge_on_the_oldest(tmp_path):
    """Two processes creating one sweep's parent: the second, seeing the first's, deletes its own; one that
    kept its own while another, recorded earlier, won (and deleted it) has its runs moved to the winner when
    it closes; a newer duplicate still alive is deleted.  In the end one parent, every run its child."""
    from mlflow.entities import ViewType

    uri = _uri(tmp_path)
    recs = [r for r in _timed(_records()) if tracking.estimate_sweep(r["key"]) == "good / ais / base-rate"]
    spec = tracking.sweep_parent(recs[0]["key"])
    a = tracking.TrackingSession(uri, "exp")
    for r in recs[:2]:
        tracking.log_estimate(r, session=a)
    (pa,) = _parents(uri).values()
    b = tracking.TrackingSession(uri, "exp")
    assert b._create_parent(spec, pa.info.start_time) == pa.info.run_id  # saw the older one: its own deleted
    assert list(_parents(uri).values())[0].info.run_id == pa.info.run_id

    # another process's parent, recorded earlier (its clock), won and deleted a's
    client = tracking.get_client(uri)
    exp_id = client.get_experiment_by_name("exp").experiment_id
    tags = {
        tracking.KEY_TAG: spec["key"],
        tracking.KIND_TAG: tracking.PARENT_KIND,
        tracking.PARENT_TAG: "true",
        tracking.SWEEP_TAG: spec["sweep"],
        tracking.LOGGED_TAG: str(int(pa.data.tags[tracking.LOGGED_TAG]) - 1000),
    }
    winner = client.create_run(exp_id, start_time=pa.info.start_time, tags=tags, run_name=spec["name"]).info.run_id
    client.delete_run(pa.info.run_id)
    newer = client.create_run(exp_id, tags={**tags, tracking.LOGGED_TAG: str(2 * 10**12)}).info.run_id
    for r in recs[2:]:
        tracking.log_estimate(r, session=a)  # still a's parent, deleted meanwhile
    a.close()
    (p,) = _parents(uri).values()
    assert p.info.run_id == winner and p.info.status == "FINISHED" and p.data.metrics["n_runs"] == len(recs)
    children = tracking.find_runs(uri=uri, experiment_name="exp", kind="estimate")
    assert len(children) == len(recs) and {c.data.tags["mlflow.parentRunId"] for c in children} == {winner}
    deleted = {r.info.run_id for r in client.search_runs([exp_id], run_view_type=ViewType.DELETED_ONLY)}
    assert {pa.info.run_id, newer} <= deleted and winner not in deleted


def test_a_failed_sweep_job_leaves_its_parent_failed_until_a_rerun(tmp_path):
    uri = _uri(tmp_path)
    recs = [r for r in _timed(_records()) if tracking.estimate_sweep(r["key"]) == "free / ais / uniform"]
    with pytest.raises(RuntimeError, match="the estimator broke"):
        with tracking.TrackingSession(uri, "exp") as session:
            tracking.log_estimate(recs[0], session=session)
            raise RuntimeError("the estimator broke")
    (p,) = _parents(uri).values()
    assert p.info.status == "FAILED" and p.data.metrics["n_runs"] == 1
    with tracking.TrackingSession(uri, "exp") as session:
        for r in recs:
            tracking.log_estimate(r, session=session)
    (again,) = _parents(uri).values()
    assert again.info.run_id == p.info.run_id and again.info.status == "FINISHED"
    assert again.data.metrics["n_runs"] == len(recs) == 2
