"""Repeated-trial experiments of Liu et al. (2015) Figs. 1-2: the trials table, its summary and plots."""

import importlib.util
import math

import numpy as np
import pandas as pd
import pytest

from logzbench import plotting, registry, trials
from logzbench.models import GridMRF, gaussian_toy

GRID = {"height": 4, "width": 4, "sigma_pair": 0.5, "n": 400, "n_trials": 3, "seed": 11, "burn_in": 100}


def _have_trw() -> bool:
    try:
        return importlib.util.find_spec("logzbench.models.grid_trw") is not None
    except ImportError:
        return False


REFERENCES = ["uniform", "mean-field"] + (["trw"] if _have_trw() else [])


@pytest.fixture(scope="module")
def grid_runs():
    out = {}
    for ref in REFERENCES:
        kw = dict(GRID)
        out[ref] = trials.grid_trials(kw.pop("height"), kw.pop("width"), kw.pop("sigma_pair"), ref, **kw)
    return out


def _no_seconds(df):
    return df.drop(columns=["seconds"]).reset_index(drop=True)


# --------------------------------------------------------------------------- Gaussian toy (Fig. 1)
@pytest.mark.parametrize("sigma0", [0.5, 2.0])
def test_gaussian_trials_reproduce_trial_errors(sigma0):
    df = trials.gaussian_trials(sigma0, n=200, n_trials=4, seed=7)
    assert list(df.columns) == list(trials.TRIAL_COLUMNS)
    assert len(df) == 4 * len(trials.METHODS)
    assert (df["experiment"] == "gaussian").all() and (df["sigma0"] == sigma0).all() and (df["seed"] == 7).all()
    assert df["height"].isna().all() and df["reference"].isna().all()
    ref = trials.trial_errors(sigma0, 200, 4, 7, with_stderr=True)
    for m in trials.METHODS:
        rows = df[df["method"] == m].sort_values("trial")
        assert rows["trial"].tolist() == [0, 1, 2, 3]
        np.testing.assert_array_equal(rows["error"].to_numpy(), ref[m].to_numpy())
        np.testing.assert_array_equal(rows["log_z_stderr"].to_numpy(), ref[f"{m}_se"].to_numpy())
    np.testing.assert_allclose(df["truth"], gaussian_toy.log_z(1.0))
    np.testing.assert_array_equal(df["error"], df["log_z"] - df["truth"])
    assert (df["n"] == 200).all()


def test_gaussian_trials_are_deterministic():
    a = trials.gaussian_trials(1.0, n=100, n_trials=3, seed=5)
    b = trials.gaussian_trials(1.0, n=100, n_trials=3, seed=5)
    c = trials.gaussian_trials(1.0, n=100, n_trials=3, seed=6)
    pd.testing.assert_frame_equal(_no_seconds(a), _no_seconds(b))
    assert not np.array_equal(a["log_z"].to_numpy(), c["log_z"].to_numpy())


# --------------------------------------------------------------------------- summary
def test_summarize_trials_matches_numpy():
    rng = np.random.default_rng(0)
    rows = []
    for s0 in (0.5, 1.0):
        for m in ("is", "ds", "mf-bound"):
            for t in range(7):
                e = float(rng.normal(0.1, 0.3))
                se = 0.0 if m == "mf-bound" else float(rng.uniform(0.05, 0.4))
                rows.append(
                    {
                        "experiment": "gaussian",
                        "sigma0": s0,
                        "sigma": 1.0,
                        "trial": t,
                        "seed": 0,
                        "method": m,
                        "log_z": 1.0 + e,
                        "log_z_stderr": se,
                        "truth": 1.0,
                        "error": e,
                        "n": 10,
                        "seconds": 0.0,
                    }
                )
    df = pd.DataFrame(rows).reindex(columns=list(trials.TRIAL_COLUMNS))
    s = trials.summarize_trials(df)
    assert len(s) == 6
    assert list(s.columns[-len(trials.SUMMARY_COLUMNS) :]) == list(trials.SUMMARY_COLUMNS)
    for _, r in s.iterrows():
        g = df[(df["sigma0"] == r["sigma0"]) & (df["method"] == r["method"])]
        e, se = g["error"].to_numpy(), g["log_z_stderr"].to_numpy()
        assert r["n_trials"] == len(g) == 7
        assert r["bias"] == pytest.approx(np.mean(e))
        assert r["mse"] == pytest.approx(np.mean(e**2))
        assert r["sd"] == pytest.approx(np.std(e, ddof=1))
        assert r["bias_se"] == pytest.approx(np.std(e, ddof=1) / math.sqrt(7))
        assert r["mean_stderr"] == pytest.approx(np.mean(se))
        if r["method"] == "mf-bound":
            assert math.isnan(r["coverage"])
        else:
            assert r["coverage"] == pytest.approx(np.mean(np.abs(e) <= 2 * se))


def test_summarize_trials_keeps_experiments_and_settings_apart(grid_runs):
    gauss = pd.concat([trials.gaussian_trials(s0, 50, 2, seed=1) for s0 in (0.7, 1.4)])
    both = pd.concat([gauss, *grid_runs.values()], ignore_index=True)
    s = trials.summarize_trials(both)
    n_grid_methods = sum(g["method"].nunique() for g in grid_runs.values())
    assert len(s) == 2 * len(trials.METHODS) + n_grid_methods
    assert (s.loc[s["experiment"] == "gaussian", "n_trials"] == 2).all()
    assert (s.loc[s["experiment"] == "grid", "n_trials"] == GRID["n_trials"]).all()


# --------------------------------------------------------------------------- grid MRFs (Fig. 2)
def test_grid_trials_format_and_truth(grid_runs):
    for ref, df in grid_runs.items():
        assert list(df.columns) == list(trials.TRIAL_COLUMNS)
        assert (df["experiment"] == "grid").all() and (df["reference"] == ref).all()
        assert df["sigma0"].isna().all() and (df["sigma_pair"] == GRID["sigma_pair"]).all()
        bound = {"uniform": set(), "mean-field": {"mf-bound"}, "trw": {"trw-bound"}}[ref]
        assert set(df["method"]) == set(trials.METHODS) | bound
        np.testing.assert_array_equal(df["error"], df["log_z"] - df["truth"])
        for t in range(GRID["n_trials"]):
            mrf_seed, _, _ = trials.trial_seeds(GRID["seed"], t)
            exact = GridMRF.random(4, 4, GRID["sigma_pair"], 0.1, seed=mrf_seed).exact_log_z()
            assert (df.loc[df["trial"] == t, "truth"] == exact).all()


def test_grid_truth_is_common_across_references(grid_runs):
    truths = {ref: df.groupby("trial")["truth"].first() for ref, df in grid_runs.items()}
    first = truths["uniform"]
    assert first.nunique() == GRID["n_trials"]  # a fresh MRF per trial
    for t in truths.values():
        pd.testing.assert_series_equal(t, first)


def test_grid_mrf_parameters_are_common_across_sigma_pair():
    mrf_seed, _, _ = trials.trial_seeds(3, 2)
    a = GridMRF.random(4, 5, 0.5, 0.1, seed=mrf_seed)
    b = GridMRF.random(4, 5, 1.5, 0.1, seed=mrf_seed)
    np.testing.assert_allclose(b.theta_h.numpy(), 3 * a.theta_h.numpy())
    np.testing.assert_allclose(b.theta_v.numpy(), 3 * a.theta_v.numpy())
    np.testing.assert_array_equal(a.theta_unary.numpy(), b.theta_unary.numpy())
    assert len({trials.trial_seeds(3, t) for t in range(5)}) == 5


def test_grid_bounds_bracket_the_truth(grid_runs):
    mf = grid_runs["mean-field"]
    b = mf[mf["method"] == "mf-bound"]
    assert len(b) == GRID["n_trials"]
    assert (b["log_z"] <= b["truth"] + 1e-9).all() and (b["log_z_stderr"] == 0).all()
    if "trw" in grid_runs:
        tb = grid_runs["trw"][grid_runs["trw"]["method"] == "trw-bound"]
        assert len(tb) == GRID["n_trials"]
        assert (tb["log_z"] >= tb["truth"] - 1e-9).all()


def test_trw_reference_when_available(grid_runs):
    pytest.importorskip("logzbench.models.grid_trw")
    df = grid_runs["trw"]
    assert "trw-bound" in set(df["method"])
    ref = trials.grid_reference(GridMRF.random(3, 3, 0.5, seed=0), "trw", trw_trees=3, seed=1)
    assert ref.name == "trw" and ref.log_z_bound is not None


def test_grid_ds_within_reported_error(grid_runs):
    for ref, df in grid_runs.items():
        ds = df[df["method"] == "ds"]
        assert len(ds) == GRID["n_trials"]
        assert (ds["log_z_stderr"] > 0).all()
        assert (ds["error"].abs() <= 4 * ds["log_z_stderr"] + 0.05).all(), (ref, ds[["error", "log_z_stderr"]])


def test_grid_trials_are_deterministic(grid_runs):
    kw = dict(GRID)
    again = trials.grid_trials(kw.pop("height"), kw.pop("width"), kw.pop("sigma_pair"), "mean-field", **kw)
    pd.testing.assert_frame_equal(_no_seconds(again), _no_seconds(grid_runs["mean-field"]))


def test_grid_reference_factory():
    mrf = GridMRF.random(3, 4, 0.5, seed=2)
    assert trials.grid_reference(mrf, "uniform").name == "uniform"
    mf = trials.grid_reference(mrf, "mean-field")
    assert mf.name == "mean-field" and mf.log_z_bound <= mrf.exact_log_z() + 1e-9
    with pytest.raises(ValueError, match="uniform.*mean-field.*trw"):
        trials.grid_reference(mrf, "gaussian")


# --------------------------------------------------------------------------- plots
def test_method_styles_follow_the_registry():
    order = list(trials.METHOD_STYLES)
    assert order[: len(trials.METHODS)] == list(trials.METHODS)
    assert order[len(trials.METHODS) :] == [
        "ais",
        "reverse-ais",
        "avg-ais-reverse-ais",
        "ads-multinomial",
        "ads",
        "mf-bound",
        "trw-bound",
    ]
    for method, style in trials.METHOD_STYLES.items():
        if method not in registry.ESTIMATORS:
            continue
        spec = plotting.ESTIMATOR_STYLES[method]
        assert (style["color"], style["marker"]) == (spec.color, spec.marker)
        assert style["label"] == trials.TRIAL_LABELS.get(method, spec.label)
        heavy = {k: style.get(k) for k in trials.EMPHASIS_STYLE}
        assert heavy == (trials.EMPHASIS_STYLE if spec.emphasis else dict.fromkeys(trials.EMPHASIS_STYLE))
    assert trials.METHOD_STYLES["ds"]["label"] == "DS (n/2 per side)"
    assert trials.METHOD_STYLES["ds"]["linewidth"] == trials.METHOD_STYLES["ads"]["linewidth"] == 2.6


def _read_png(path):
    import matplotlib.image

    img = matplotlib.image.imread(path)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    return img


def test_plot_gaussian_figure(tmp_path):
    s = trials.summarize_trials(pd.concat([trials.gaussian_trials(s0, 60, 3, seed=0) for s0 in (0.5, 1.0, 2.0)]))
    out = tmp_path / "new" / "dir" / "fig1.png"
    assert trials.plot_trials(s, out, x="sigma0", title="Fig. 1", methods=["is", "ris", "is-select", "ds"]) == out
    assert out.stat().st_size > 0
    _read_png(out)
    assert sorted(p.name for p in out.parent.iterdir()) == ["fig1.pdf", "fig1.png"]  # the PDF beside it


def test_plot_grid_figure_with_panels(tmp_path, grid_runs):
    more = [trials.grid_trials(4, 4, 1.0, ref, n=100, n_trials=1, seed=11, burn_in=20) for ref in grid_runs]
    s = trials.summarize_trials(pd.concat([*grid_runs.values(), *more], ignore_index=True))
    out = tmp_path / "fig2.png"
    trials.plot_trials(s, out, x="sigma_pair", panel="reference")
    assert out.stat().st_size > 0
    _read_png(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig2.pdf", "fig2.png"]
    # several rows per (method, x) without a panel: refuse rather than mix them
    with pytest.raises(ValueError, match="several rows"):
        trials.plot_trials(s, tmp_path / "bad.png", x="sigma_pair")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig2.pdf", "fig2.png"]


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"sigma0": 0.0}, "sigma0"),
        ({"sigma0": -1.0}, "sigma0"),
        ({"n": 1}, "n "),
        ({"n_trials": 0}, "n_trials"),
        ({"seed": -1}, "seed"),
    ],
)
def test_gaussian_trials_bad_inputs(kwargs, match):
    args = {"sigma0": 1.0, "n": 10, "n_trials": 2, "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=match):
        trials.gaussian_trials(**args)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"reference": "gibbs"}, "unknown reference 'gibbs'"),
        ({"n": 1}, "n "),
        ({"n_trials": 0}, "n_trials"),
        ({"burn_in": -1}, "burn_in"),
        ({"sigma_pair": -0.5}, "sigma_pair"),
        ({"height": 0}, "height"),
    ],
)
def test_grid_trials_bad_inputs(kwargs, match):
    args = {
        "height": 3,
        "width": 3,
        "sigma_pair": 0.5,
        "reference": "uniform",
        "n": 10,
        "n_trials": 1,
        "seed": 0,
        "burn_in": 1,
        **kwargs,
    }
    with pytest.raises(ValueError, match=match):
        trials.grid_trials(**args)


def test_summary_and_plot_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="empty"):
        trials.summarize_trials(pd.DataFrame(columns=list(trials.TRIAL_COLUMNS)))
    with pytest.raises(ValueError, match="error"):
        trials.summarize_trials(pd.DataFrame({"experiment": ["gaussian"], "method": ["is"]}))
    s = trials.summarize_trials(trials.gaussian_trials(1.0, 20, 2, seed=0))
    with pytest.raises(ValueError, match="sigma_pair"):
        trials.plot_trials(s, tmp_path / "x.png", x="sigma_pair")
    with pytest.raises(ValueError, match="empty"):
        trials.plot_trials(s.iloc[:0], tmp_path / "x.png", x="sigma0")
    assert list(tmp_path.iterdir()) == []
