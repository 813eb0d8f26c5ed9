"""The sandwich estimator: its bracket holds the exact value as often as it states, each guaranteed
end fails at most as often as its confidence allows, a run that cannot reach its width says so, and
bad input is refused before any work.

Tolerances: a bracket at confidence c misses in at most a fraction 1 - c of runs (each end errs in its
labelled direction; the noise allowance is spread over the looks of the stopping rule).  Over n
independent seeds the misses are then at most Binomial(n, 1 - c); the tests allow the count whose
upper tail under that binomial is below 1 % (:func:`_allowed`), so a correct implementation fails a
test less than once in a hundred runs, and a bracket that misses twice as often fails it most runs.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import assert_refused, model_samples, random_rbm
from scipy.stats import binom

from logzbench.api import estimate
from logzbench.cli import main
from logzbench.models import DBM, save_model
from logzbench.models.grbm import GaussianBernoulliRBM
from logzbench.models.linear_generative import LinearGenerative
from logzbench.models.poe import ProductOfExperts

sys.path.insert(0, str(Path(__file__).parent))
import closed_form_energies
import coupled_rbm

CONFIDENCE = 0.95


def _allowed(n: int, rate: float, tail: float = 0.01) -> int:
    """The largest miss count k whose chance P(Binomial(n, rate) > k) is at most ``tail``... plus zero slack:
    the smallest k with P(X > k) <= tail."""
    k = 0
    while binom.sf(k, n, rate) > tail:
        k += 1
    return k


def _misses(results, exact: float, q: str) -> tuple[int, int, int]:
    """``(bracket misses, guaranteed lower-end failures, guaranteed upper-end failures)``."""
    miss = lo_fail = hi_fail = 0
    for r in results:
        lo, hi = r[f"{q}_lower"], r[f"{q}_upper"]
        miss += not (lo <= exact <= hi)
        if r[f"{q}_lower_guaranteed"]:
            lo_fail += r[f"{q}_lower_estimate"] - r[f"{q}_lower_slack"] > exact
        if r[f"{q}_upper_guaranteed"]:
            hi_fail += r[f"{q}_upper_estimate"] + r[f"{q}_upper_slack"] < exact
    return miss, lo_fail, hi_fail


def _runs(model, n_seeds: int, **kw) -> list[dict]:
    return [estimate(model, "sandwich", seed=s, confidence=CONFIDENCE, **kw).to_dict() for s in range(n_seeds)]


def _check_coverage(results, exact: float, q: str) -> None:
    n = len(results)
    miss, lo_fail, hi_fail = _misses(results, exact, q)
    allowed = _allowed(n, 1 - CONFIDENCE)
    assert miss <= allowed, (q, miss, allowed, [(r[f"{q}_lower"], r[f"{q}_upper"]) for r in results], exact)
    assert lo_fail <= allowed and hi_fail <= allowed, (lo_fail, hi_fail)


# --------------------------------------------------------------------------- coverage on exact models
def test_rbm_bracket_holds_log_z_and_the_test_log_likelihood_in_40_seeds():
    rbm = random_rbm(12, 8, seed=3, scale=1.2)
    exact = rbm.exact_log_z()
    data = model_samples(rbm, 20, seed=1)
    exact_ll = float((rbm.log_unnormalized_marginal(data).double() - exact).mean())
    z_runs = _runs(rbm, 40, chains=40, K=20, target_width=0.5, max_sweeps=200_000, pilot_chains=20)
    _check_coverage(z_runs, exact, "log_z")
    ll_runs = _runs(rbm, 40, data=data, chains=10, K=20, target_width=0.5, max_sweeps=400_000, pilot_chains=20)
    _check_coverage(ll_runs, exact_ll, "mean_log_likelihood")
    _check_coverage(ll_runs, exact, "log_z")
    # the runs are informative: most reach the width, and those that do are that narrow
    reached = [r for r in ll_runs if r["width_reached"]]
    assert len(reached) >= 30
    assert all(r["mean_log_likelihood_upper"] - r["mean_log_likelihood_lower"] <= 0.5 + 1e-9 for r in reached)
    for r in ll_runs:
        assert r["mean_log_likelihood_lower_of"] == "p_ann" and r["mean_log_likelihood_lower_guaranteed"]
        assert "p_ann" in r["mean_log_likelihood_lower_guarantee"]
        assert r["mean_log_likelihood_upper_of"] == "p" and r["mean_log_likelihood_upper_guaranteed"]
        assert math.isclose(r["mean_log_likelihood_lower_slack"], math.log(20) / 20)
        assert math.isclose(r["mean_log_likelihood_upper_slack"], math.log(20))
        assert not r["log_z_upper_guaranteed"] and "approximate" in r["log_z_upper_guarantee"]


def test_dbm_bracket_holds_log_z_in_40_seeds():
    dbm = DBM.random((8, 6, 4), scale=0.8, bias_scale=0.5, generator=torch.Generator().manual_seed(0))
    exact = dbm.exact_log_z()
    runs = _runs(dbm, 40, chains=40, K=20, target_width=0.5, max_sweeps=200_000, pilot_chains=20)
    _check_coverage(runs, exact, "log_z")


def test_gaussian_rbm_bracket_holds_log_z_in_40_seeds():
    m = GaussianBernoulliRBM.random(
        3, 4, scale=0.6, sigma=0.8, bias_scale=0.5, generator=torch.Generator().manual_seed(2)
    )
    exact = m.exact_log_z()
    runs = _runs(m, 40, chains=40, K=20, target_width=0.5, max_sweeps=200_000, pilot_chains=20)
    _check_coverage(runs, exact, "log_z")


def test_complete_poe_bracket_holds_log_z_in_40_seeds():
    poe = ProductOfExperts.random(2, seed=1)
    exact = poe.exact_log_z()
    runs = _runs(poe, 40, chains=40, K=20, target_width=0.5, max_sweeps=200_000, pilot_chains=20)
    _check_coverage(runs, exact, "log_z")


def test_linear_gaussian_bracket_holds_the_test_log_likelihood_in_40_seeds():
    lin = LinearGenerative.random(3, 2, sigma_n=0.5, seed=2)
    x = lin.sample(10, torch.Generator().manual_seed(7)).double()
    exact_ll = float(lin.exact_log_likelihood(x).mean())
    runs = _runs(lin, 40, data=x, chains=20, K=20, target_width=0.5, max_sweeps=400_000, pilot_chains=20)
    _check_coverage(runs, exact_ll, "mean_log_likelihood")
    for r in runs:
        assert r["mean_log_likelihood_lower_guaranteed"] and r["mean_log_likelihood_lower_of"] == "p"
        assert not r["mean_log_likelihood_upper_guaranteed"]


# --------------------------------------------------------------------------- user energies with closed forms
def _bad_reached(model: str, n_seeds: int, n_rows: int | None = None, **kw) -> tuple[list, int]:
    """Sandwich runs of one of :mod:`closed_form_energies`' models, seeds ``0 .. n_seeds - 1`` (with
    ``n_rows`` exact samples as test rows, seeded per run, where given): ``(reached brackets that exclude
    the truth, records)``, each bad one as ``(seed, quantity, lower - truth, upper - truth)``."""
    make, samples, log_z = closed_form_energies.MODELS[model]
    m = make()
    bad, records = [], []
    for s in range(n_seeds):
        truth = {"log_z": log_z}
        extra = {}
        if n_rows:
            x = samples(n_rows, 1000 + s)
            extra["data"] = x
            truth["mean_log_likelihood"] = float((m.log_f_fn(x).double() - log_z).mean())
        r = estimate(m, "sandwich", seed=s, confidence=CONFIDENCE, **kw, **extra).to_dict()
        records.append(r)
        for q, t in truth.items():
            if r["width_reached"] and not r[f"{q}_lower"] <= t <= r[f"{q}_upper"]:
                bad.append((s, q, r[f"{q}_lower"] - t, r[f"{q}_upper"] - t))
    return bad, records


def _check_crossed(records, quantities=("log_z",)) -> None:
    """Crossed raw ends are spanned (never reported inverted), flagged, and never reached."""
    for r in records:
        for q in quantities:
            assert r[f"{q}_lower"] <= r[f"{q}_upper"]
            crossed = r[f"{q}_lower_estimate"] > r[f"{q}_upper_estimate"]
            assert r[f"{q}_crossed"] == crossed and (r[f"{q}_crossed_by"] > 0) == crossed
            assert not (crossed and r["width_reached"])


@pytest.mark.parametrize("model", ["mixture", "twisted"])
def test_user_energy_log_z_brackets_hold_the_closed_form_in_40_seeds(model):
    """A three-component 2-D Gaussian mixture and a twisted Gaussian as user energies, no data: the log Z
    bracket (HAIS below, reverse HAIS from HAIS's end states above).  Reached brackets that exclude the
    closed-form log Z are at most the binomial allowance of the stated confidence over the 40 seeds.

    Before crossed raw ends stopped counting as reached (the stopping rule checked for crossing only after
    widening each end), the twisted Gaussian gave 14 of 40 such brackets at these settings, the mixture 4:
    the raw ends crossed by less than their noise, and the narrow bracket between them missed."""
    bad, records = _bad_reached(model, 40, chains=100, K=20, schedule="linear", target_width=0.3, max_sweeps=50_000)
    assert len(bad) <= _allowed(40, 1 - CONFIDENCE), bad
    _check_crossed(records)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["mixture", "twisted"])
def test_user_energy_brackets_hold_the_closed_forms_in_40_seeds_with_data(model):
    """As above, with a tighter target and a larger budget, and with 20 exact samples as test rows: the
    mean log-likelihood bracket (RAISE-HMC below, HAIS's implied mean above) and the log Z bracket (HAIS
    below, the log Z that RAISE's mean implies above, its standard error over the rows)."""
    bad, records = _bad_reached(model, 40, chains=100, K=25, schedule="linear", target_width=0.2, max_sweeps=200_000)
    assert len(bad) <= _allowed(40, 1 - CONFIDENCE), bad
    _check_crossed(records)
    bad, records = _bad_reached(
        model, 40, n_rows=20, chains=20, K=25, schedule="linear", target_width=0.5, max_sweeps=100_000
    )
    assert len(bad) <= _allowed(80, 1 - CONFIDENCE), bad  # two brackets per run
    _check_crossed(records, ("log_z", "mean_log_likelihood"))


def test_crossed_raw_ends_are_never_reached_and_the_bracket_spans_both():
    """Raw estimates that cross by less than their noise: the widened ends would not cross, yet the round is
    not reached; its reason says the ends cross and by how much, and the bracket is the span of both ends."""
    from logzbench.estimators.bracket import End, make_bracket, noise_z
    from logzbench.estimators.sandwich import _verdict
    from logzbench.estimators.sandwich_plans import Round

    lo = End("hais", 2.604, 0.05, True, "p", "lower")
    hi = End("reverse-hais", 2.58, 0.04, False, None, "upper")
    z = noise_z(CONFIDENCE, 4)
    assert lo.value - z * lo.stderr < hi.value + z * hi.stderr  # widened, they do not cross
    r = Round(400, {"log_z": (lo, hi)}, {}, 0, 0.0, np.linspace(0, 1, 401), None, None)
    prev = r._replace(K=200)
    reached, why = _verdict(r, "log_z", 10.0, z, prev)
    assert not reached and "cross by 0.024" in why and "span" in why
    b = make_bracket("log_z", lo, hi, CONFIDENCE, looks=4)
    assert b["log_z_crossed"] is True and b["log_z_crossed_by"] == pytest.approx(0.024)
    assert b["log_z_lower"] == pytest.approx(min(lo.value - z * lo.stderr, hi.value - z * hi.stderr))
    assert b["log_z_upper"] == pytest.approx(max(lo.value + z * lo.stderr, hi.value + z * hi.stderr))
    assert b["log_z_width"] == pytest.approx(b["log_z_upper"] - b["log_z_lower"]) and b["log_z_width"] > 0
    # ends that do not cross: widened each by its own noise, as before
    ok = make_bracket("log_z", hi, lo, CONFIDENCE, looks=4)
    assert ok["log_z_crossed"] is False and ok["log_z_crossed_by"] == 0.0
    assert ok["log_z_lower"] == pytest.approx(hi.value - z * hi.stderr)
    assert ok["log_z_upper"] == pytest.approx(lo.value + z * lo.stderr)
    assert _verdict(r._replace(ends={"log_z": (hi, lo)}), "log_z", 10.0, z, prev._replace(ends={"log_z": (hi, lo)}))[0]


def test_the_implied_log_z_end_carries_the_spread_over_the_test_rows():
    """With data on an analysis model, the log Z bracket's upper end is the log Z RAISE-HMC's mean implies,
    ``mean_i (log f(v_i) - log p_hat(v_i))``: its standard error is the spread of those per-row values over
    sqrt(n), which holds the gap between p_ann and p that differs from row to row, not RAISE's Monte Carlo
    error alone (which it exceeds here)."""
    make, samples, log_z = closed_form_energies.MODELS["twisted"]
    m, x = make(), samples(20, 5)
    r = estimate(m, "sandwich", data=x, chains=10, K=25, schedule="linear", target_width=5.0, max_sweeps=30_000)
    d = r.to_dict()
    assert d["log_z_upper_estimator"] == "raise-hmc"
    per_row = m.log_f_fn(x).double().numpy() - np.asarray(r.per_example_log_likelihood)
    se = float(np.std(per_row, ddof=1) / math.sqrt(len(per_row)))
    assert d["log_z_upper_stderr"] == pytest.approx(se)
    assert d["log_z_upper_estimate"] == pytest.approx(float(per_row.mean()))
    assert se > d["mean_log_likelihood_lower_stderr"]  # the rows' spread exceeds the Monte Carlo noise


# --------------------------------------------------------------------------- a missed mode
def test_a_missed_mode_never_yields_a_narrow_bracket_without_the_truth():
    """The strongly coupled RBM: base-rate AIS misses a mode holding a third of the mass in most runs,
    0.4 nats low with a small standard error.  A single sandwich run either holds the exact value or
    says its width was not reached, up to the stated confidence."""
    rbm, masses = coupled_rbm.build()
    assert np.allclose(masses, 1 / 3, atol=1e-3)
    exact = rbm.exact_log_z()
    train = coupled_rbm.exact_samples(rbm, 2000, seed=1)
    # the trap: a plain AIS run at this budget often misses with a small error, unflagged
    plain = [estimate(rbm, "ais", K=500, chains=100, init="base-rate", train_data=train, seed=s) for s in range(8)]
    trapped = [r for r in plain if r.log_z < exact - 0.3 and r.log_z_stderr < 0.1]
    assert len(trapped) >= 2, [(r.log_z - exact, r.log_z_stderr) for r in plain]
    bad = []
    for s in range(40):
        data = coupled_rbm.exact_samples(rbm, 30, seed=100 + s)
        exact_ll = float((rbm.log_unnormalized_marginal(torch.as_tensor(data)).double() - exact).mean())
        r = estimate(
            rbm,
            "sandwich",
            data=data,
            train_data=train,
            init="base-rate",
            chains=50,
            K=250,
            seed=s,
            target_width=0.3,
            max_sweeps=2_000_000,
            pilot_chains=50,
        ).to_dict()
        for q, truth in (("mean_log_likelihood", exact_ll), ("log_z", exact)):
            if r["width_reached"] and not r[f"{q}_lower"] <= truth <= r[f"{q}_upper"]:
                bad.append((s, q, r[f"{q}_lower"] - truth, r[f"{q}_upper"] - truth))
        if not r["width_reached"]:
            assert r["reason"].startswith("width not reached")
    assert len(bad) <= _allowed(40, 1 - CONFIDENCE), bad


# --------------------------------------------------------------------------- reporting
def test_not_reached_says_so_and_extrapolates_k():
    rbm = random_rbm(12, 8, seed=3, scale=1.2)
    r = estimate(
        rbm, "sandwich", chains=30, K=10, schedule="linear", target_width=1e-3, max_sweeps=60_000, seed=0
    ).to_dict()
    assert r["width_reached"] is False
    assert "width not reached" in r["reason"] and "max_sweeps" in r["reason"]
    assert r["stopped_by"] == "max_sweeps" and r["time_budget"] == 600.0  # the default budget did not bind
    assert r["total_sweeps"] <= 60_000
    hist = r["history"]
    assert [h["K"] for h in hist] == [10 * 2**i for i in range(len(hist))] and len(hist) >= 2
    assert r["total_sweeps"] == hist[-1]["total_sweeps"]
    widths = [h["width"] for h in hist]
    if r["K_needed"] is not None:  # extrapolated from shrinking widths: beyond the K reached
        assert r["K_needed"] > r["K"] and widths[-1] < widths[0]


def test_a_time_budget_stops_the_doubling_and_says_how_far_it_got():
    """A budget the first round already spends: that round runs (it always does), the next is not started, and
    the result is the bracket so far, not reached, with the reason, the K and the time."""
    rbm = random_rbm(10, 6, seed=1)
    kw = dict(chains=20, K=10, schedule="linear", target_width=1e-3, max_sweeps=10**9, seed=0)
    r = estimate(rbm, "sandwich", time_budget=1e-6, **kw).to_dict()
    assert r["width_reached"] is False and r["stopped_by"] == "time_budget"
    assert [h["K"] for h in r["history"]] == [10] and r["K"] == 10
    assert "stopped at the time budget after" in r["reason"] and "at K = 10" in r["reason"]
    assert "time_budget = 1e-06 s" in r["reason"] and r["time_budget"] == 1e-6
    assert r["seconds"] >= r["history"][0]["elapsed_seconds"] > 0
    assert math.isfinite(r["log_z_lower"]) and math.isfinite(r["log_z_upper"])  # the bracket so far
    # no limit: the same run goes on until max_sweeps
    r = estimate(rbm, "sandwich", time_budget=math.inf, **{**kw, "max_sweeps": 20_000}).to_dict()
    assert r["stopped_by"] == "max_sweeps" and len(r["history"]) >= 2 and r["time_budget"] is None


def _progress_run(tmp_path, capsys, *flags):
    """``logzbench estimate`` of a small sandwich (3 rounds): ``(stdout, stderr, record)``."""
    path = tmp_path / "rbm.npz"
    save_model(random_rbm(10, 6, seed=1), path)
    argv = ["estimate", str(path), "--estimator", "sandwich", "--schedule", "linear", "--steps", "10"]
    argv += ["--chains", "20", "--target-width", "1e-3", "--max-sweeps", "6000", "--json", str(tmp_path / "r.json")]
    assert main([*argv, *flags]) == 0
    out, err = capsys.readouterr()
    return out, err, json.loads((tmp_path / "r.json").read_text())


def test_progress_lines_go_to_stderr_once_the_run_is_slow(tmp_path, capsys, monkeypatch):
    from logzbench.estimators import sandwich

    monkeypatch.setattr(sandwich, "PROGRESS_AFTER", 0.0)  # every run counts as slow
    out, err, rec = _progress_run(tmp_path, capsys)
    ends = [line for line in err.splitlines() if line.startswith("sandwich: K = ") and " in [" in line]
    assert len(ends) == len(rec["history"]) >= 2  # one line per round
    for line, h in zip(ends, rec["history"]):
        assert line.startswith(f"sandwich: K = {h['K']}: log Z in [") and "width" in line and " s, " in line
        assert f"{h['total_sweeps']:.3g} of 6e+03 sweeps x chains" in line
    assert "sandwich: not reached at K = " in err and "sandwich:" not in out  # never on stdout
    # a fast run prints nothing, unless asked to (--progress)
    monkeypatch.setattr(sandwich, "PROGRESS_AFTER", 1e9)
    assert "sandwich:" not in _progress_run(tmp_path, capsys)[1]
    out, err, rec = _progress_run(tmp_path, capsys, "--progress")
    assert sum(" in [" in line for line in err.splitlines()) == len(rec["history"]) and "sandwich:" not in out


def test_same_seed_same_bracket_and_the_pilot_is_counted():
    rbm = random_rbm(12, 8, seed=3, scale=1.2)
    kw = dict(chains=20, K=16, target_width=0.5, max_sweeps=100_000, pilot_chains=10, seed=4)
    a, b = estimate(rbm, "sandwich", **kw), estimate(rbm, "sandwich", **kw)
    assert a.to_dict()["log_z_lower"] == b.to_dict()["log_z_lower"]
    d = a.to_dict()
    assert d["settings"]["schedule"] == "adaptive"  # the sandwich's own default
    assert d["extra"]["pilot_sweeps"] > 0
    rounds = sum(3 * h["K"] - 1 for h in d["history"]) * 20  # AIS (K - 1) + reverse AIS (2 K) per chain
    assert d["total_sweeps"] == rounds + d["extra"]["pilot_sweeps"]


def test_cli_prints_the_bracket_keys(tmp_path, capsys):
    rbm = random_rbm(10, 6, seed=1)
    path = tmp_path / "rbm.npz"
    save_model(rbm, path)
    rc = main(
        [
            "estimate",
            str(path),
            "--estimator",
            "sandwich",
            "--target-width",
            "0.5",
            "--max-sweeps",
            "200000",
            "--chains",
            "20",
            "--pilot-chains",
            "10",
            "--json",
            str(tmp_path / "out.json"),
        ]
    )
    assert rc == 0
    out = json.loads((tmp_path / "out.json").read_text())
    for key in (
        "log_z_lower",
        "log_z_upper",
        "target_width",
        "width_reached",
        "total_sweeps",
        "K",
        "log_z_lower_guarantee",
        "log_z_upper_guarantee",
        "log_z_lower_slack",
        "confidence",
        "history",
    ):
        assert key in out, key
    assert out["log_z_lower"] <= out["log_z_upper"] or not out["width_reached"]


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "extra, words",
    [
        (["--target-width", "0"], ["target_width", "positive"]),
        (["--target-width", "-1"], ["target_width"]),
        (["--max-sweeps", "0"], ["max_sweeps", ">= 1"]),
        (["--time-budget", "0"], ["time_budget", "> 0"]),
        (["--max-sweeps", "50"], ["max_sweeps = 50", "first round"]),
        (["--schedule", "adaptive", "--pilot-chains", "1"], ["pilot_chains >= 2"]),
        (["--schedule", "sm14500"], ["sandwich doubles K"]),
    ],
)
def test_bad_input_is_refused_before_any_work(tmp_path, capsys, extra, words):
    rbm = random_rbm(10, 6, seed=1)
    path = tmp_path / "rbm.npz"
    save_model(rbm, path)
    argv = ["estimate", str(path), "--estimator", "sandwich", "--json", str(tmp_path / "out.json"), *extra]
    assert_refused(main, argv, words, tmp_path, capsys)


def test_generative_model_without_data_is_refused(tmp_path, capsys):
    lin = LinearGenerative.random(3, 2, sigma_n=0.5, seed=2)
    path = tmp_path / "lin.npz"
    save_model(lin, path)
    argv = ["estimate", str(path), "--estimator", "sandwich"]
    assert_refused(main, argv, ["give test data"], tmp_path, capsys)


def test_a_model_kind_without_an_upper_bound_estimator_is_refused():
    """A family of a kind the sandwich has no pair for (a future Potts or bring-your-own-energy model)
    is refused by its check, before any work, in one line naming the kind."""
    from types import SimpleNamespace

    from logzbench.estimators import sandwich
    from logzbench.options import EstimateOptions

    ctx = SimpleNamespace(
        options=EstimateOptions(schedule="adaptive"),
        data=None,
        family=SimpleNamespace(kind="potts", name="potts-model"),
    )
    with pytest.raises(ValueError, match="no upper-bound estimator for a potts model") as info:
        sandwich.check(ctx)
    assert "\n" not in str(info.value)
