"""Report hygiene (issue 27, item 5): names that collide by case refused, table1.csv with standard
errors, every figure also as PDF, one colour per (estimator, init), robust y-limits, flagged points
marked, and captions that docutils renders without a warning."""

from __future__ import annotations

import io
import itertools
import math
import types
from pathlib import Path

import jinja2
import numpy as np
import pandas as pd
import pytest
import yaml
from test_report import agreeing_model, rec

from logzbench import plotting, report
from logzbench.errors import ConfigError
from logzbench.pipeline.config import check_config
from logzbench.registry import ESTIMATORS, INITS
from logzbench.report import learner_plots, plots
from logzbench.report.learners import LearnerModel
from logzbench.report.methods import K_METHODS

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted((REPO / "config").glob("*.yaml"))


# --------------------------------------------------------------------------- names colliding by case
@pytest.mark.parametrize("section", ["models", "datasets"])
def test_names_differing_only_by_case_refused(section):
    config = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    name = next(iter(config[section]))
    twin = name.upper() if name.upper() != name else name.lower()
    config[section][twin] = config[section][name]
    with pytest.raises(ConfigError) as err:
        check_config(config)
    msg = str(err.value)
    assert "\n" not in msg and "differ only by case" in msg
    assert repr(name) in msg and repr(twin) in msg and section in msg


def test_distinct_names_pass_the_case_check():
    """The same config without the twin is not refused for its names (the check compares case-folded
    names, not merely any two)."""
    config = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    config["models"]["another-" + next(iter(config["models"]))] = next(iter(config["models"].values()))
    try:
        check_config(config)
    except ConfigError as exc:
        assert "by case" not in str(exc)


@pytest.mark.parametrize("path", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_shipped_configs_have_no_case_collisions(path):
    config = yaml.safe_load(path.read_text())
    for section in ("models", "datasets"):
        names = [str(n).casefold() for n in config.get(section) or {}]
        assert len(names) == len(set(names)), f"{path.name}: {section} collide by case"


# --------------------------------------------------------------------------- table 1's standard errors
def test_table1_has_standard_errors_matching_the_spread():
    """Without per-run errors the s.e. of a mean over seeds is the seeds' spread sd / sqrt(n); the gap's
    combines AIS's and RAISE's in quadrature; CSL gets one too."""
    recs = agreeing_model() + [rec("good", "ais", K=1000, init="uniform", seed=2, ll=-99.0, ess=80.0, log_z=49.9)]
    # drop the runs' own errors, so that the summary's s.e. is the spread over the seeds
    for r in recs:
        r["result"]["mean_log_likelihood_stderr"] = None
    s = report.summarize(report.load_results(recs))
    t = report.make_table1(s)
    for col in ("csl_se", "raise_uniform_se", "ais_uniform_se", "gap_uniform_se", "ais_base-rate_se"):
        assert col in t.columns
    # every value column keeps its place and is followed by its s.e.
    cols = list(t.columns)
    for col in ("csl", "raise_uniform", "ais_uniform", "gap_uniform", "raise_base-rate", "ais_base-rate"):
        assert cols[cols.index(col) + 1] == f"{col}_se"
    row = t.iloc[0]
    ais_uniform = np.array([-99.95, -99.94, -99.0])  # the three seeds' values
    assert row["ais_uniform"] == pytest.approx(ais_uniform.mean())
    assert row["ais_uniform_se"] == pytest.approx(ais_uniform.std(ddof=1) / math.sqrt(3))
    assert row["raise_uniform_se"] == pytest.approx(0.0, abs=1e-12)  # both seeds -100.2
    assert row["gap_uniform_se"] == pytest.approx(math.hypot(row["ais_uniform_se"], row["raise_uniform_se"]))
    assert row["csl_se"] == pytest.approx(0.0, abs=1e-12)
    assert row["ais_base-rate_se"] == pytest.approx(np.std([-99.95, -99.94], ddof=1) / math.sqrt(2))


# --------------------------------------------------------------------------- every figure also as PDF
def test_save_figure_writes_png_and_pdf(tmp_path):
    plt = plotting.pyplot()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    out = plotting.save_figure(fig, tmp_path / "sub" / "f.png")
    assert out == tmp_path / "sub" / "f.png"
    assert out.read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "sub" / "f.pdf").read_bytes().startswith(b"%PDF")
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["f.pdf", "f.png"]  # no temporary left


def test_report_figures_have_pdfs(tmp_path):
    paths = report.build_report(agreeing_model(), tmp_path)
    pngs = sorted((tmp_path / "plots").glob("*.png"))
    assert pngs and paths["plots"]["good"] in pngs
    for png in pngs:
        assert png.with_suffix(".pdf").read_bytes().startswith(b"%PDF"), png.name


# --------------------------------------------------------------------------- one colour per (estimator, init)
def test_colours_distinct_per_estimator_and_init():
    """Every (estimator, init) pair drawn together in an estimate-vs-K figure has its own colour: AIS from
    the uniform and from the base-rate distribution differ; the same pair has the same colour always."""
    for kind in ("binary", "analysis", "generative"):
        methods = [m for m in K_METHODS if kind in ESTIMATORS[m].kinds]
        pairs = [(m, i) for m in methods for i in (INITS if "init" in ESTIMATORS[m].axes else ("",))] + [("exact", "")]
        colours = [plotting.series_color(m, i) for m, i in pairs]
        assert len(set(colours)) == len(colours), dict(zip(pairs, colours))
    assert plotting.series_color("ais", "uniform") != plotting.series_color("ais", "base-rate")
    assert plotting.series_color("ais", "base-rate") == plotting.series_color("ais", "base-rate")


def test_colours_of_a_shipped_config_distinct():
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    inits = (config.get("evaluation") or {}).get("inits") or list(INITS)
    pairs = set()
    for entry, spec in (config.get("estimators") or {}).items():
        method = (spec or {}).get("method", entry)
        if method in K_METHODS:
            for i in inits if "init" in ESTIMATORS[method].axes else [""]:
                pairs.add((method, i))
    assert len(pairs) > 2
    for a, b in itertools.combinations(sorted(pairs), 2):
        if set(ESTIMATORS[a[0]].kinds) & set(ESTIMATORS[b[0]].kinds):  # ever in one figure
            assert plotting.series_color(*a) != plotting.series_color(*b), (a, b)


def test_labels_one_case_from_the_registry():
    assert plotting.series_label("ais", "base-rate") == "AIS (base rate)"
    assert plotting.series_label("raise", "uniform", schedule="sigmoid") == "RAISE (uniform, sigmoid)"
    assert plotting.series_label("ais", "uniform", entry="ais-long") == "AIS [ais-long] (uniform)"
    assert plotting.series_label("csl") == "CSL"


def _capture(monkeypatch, module):
    """Patch ``module.save_figure`` to keep each figure's axes' y-limits and legend texts before saving."""
    seen = []
    original = module.save_figure

    def keep(fig, path, dpi=110):
        seen.append(
            [
                (ax.get_ylim(), [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else [])
                for ax in fig.axes
            ]
        )
        return original(fig, path, dpi=dpi)

    monkeypatch.setattr(module, "save_figure", keep)
    return seen


def _summary_with_csl_outlier(flag_csl: bool = False):
    recs = agreeing_model()
    for K in (100, 300):
        for seed in (0, 1):
            for init in ("uniform", "base-rate"):
                recs.append(rec("good", "ais", K=K, init=init, seed=seed, ll=-99.9 + 0.001 * K, ess=80.0))
                recs.append(rec("good", "raise", K=K, init=init, seed=seed, ll=-100.3, ess=8.0, chains=10))
            recs.append(rec("good", "csl", K=K, seed=seed, ll=-101.0 if K == 300 else -150.0))
    s = report.summarize(report.load_results(recs))
    s["flags"] = ""
    if flag_csl:
        s.loc[(s["method"] == "csl") & (s["K"] == 100), "flags"] = "CSL: a flag"
    return s


def test_plot_model_legend_distinct_and_consistent(monkeypatch, tmp_path):
    seen = _capture(monkeypatch, plots)
    plots.plot_model(_summary_with_csl_outlier(), "good", tmp_path / "good.png")
    ((_, legend),) = seen[0]
    assert {"AIS (uniform)", "AIS (base rate)", "RAISE (uniform)", "RAISE (base rate)", "CSL", "exact"} <= set(legend)


# --------------------------------------------------------------------------- robust axis limits
def test_robust_limits_ignore_one_outlier():
    values = [-100.0, -100.2, -99.9, -100.1, -100.05, -150.0]
    lo, hi = plotting.robust_limits(values)
    assert lo > -101.0 and hi < -99.0
    assert lo < -100.2 and hi > -99.9  # the bulk inside


def test_one_outlier_does_not_set_the_y_limits(monkeypatch, tmp_path):
    """A CSL value 50 nats off is drawn at the edge (with a legend entry saying so), not squeezing the rest."""
    seen = _capture(monkeypatch, plots)
    plots.plot_model(_summary_with_csl_outlier(), "good", tmp_path / "good.png")
    (((lo, hi), legend),) = seen[0]
    assert lo > -140.0, (lo, hi)  # the -150 CSL value would set it
    assert hi - lo < 30.0
    assert plotting.CLIPPED_LABEL in legend


def _learner(model, learner):
    return LearnerModel(model, "tiny", "mushrooms", "rbm", learner, (4,), 3)


def test_bounds_vs_ais_leave_iteration_zero_out_of_the_limits(monkeypatch, tmp_path):
    it = np.arange(0, 1100, 100)
    nvil = pd.DataFrame(
        {"iteration": it, "log_z_upper_bound": np.where(it == 0, 300.0, 20.0 + 0.01 * it / 100), "exact_log_z": 19.5}
    )
    avil = pd.DataFrame(
        {"iteration": it, "log_z_bound": np.where(it == 0, -200.0, 18.0 + 0.02 * it / 100), "exact_log_z": 19.0}
    )
    no_ais = {"log_z": float("nan"), "K": pd.NA}
    seen = _capture(monkeypatch, learner_plots)
    learner_plots.plot_bounds_vs_ais(
        "tiny", [(_learner("n", "nvil"), nvil, no_ais), (_learner("a", "avil"), avil, no_ais)], tmp_path / "b.png"
    )
    (((lo_a, hi_a), leg_a), ((lo_b, hi_b), leg_b)) = seen[0]
    assert hi_a < 30.0 and lo_a > 15.0, (lo_a, hi_a)  # not up to iteration 0's 300
    assert lo_b > 10.0 and hi_b < 25.0, (lo_b, hi_b)  # not down to iteration 0's -200
    assert plotting.CLIPPED_LABEL in leg_a and plotting.CLIPPED_LABEL in leg_b
    assert (tmp_path / "b.pdf").read_bytes().startswith(b"%PDF")


# --------------------------------------------------------------------------- flagged points marked
def test_flagged_points_marked(monkeypatch, tmp_path):
    seen = _capture(monkeypatch, plots)
    plots.plot_model(_summary_with_csl_outlier(flag_csl=True), "good", tmp_path / "flagged.png")
    plots.plot_model(_summary_with_csl_outlier(flag_csl=False), "good", tmp_path / "clean.png")
    (((_, flagged),), ((_, clean),)) = seen
    assert "flagged" in flagged and "flagged" not in clean


def test_flag_marker_drawn_at_the_flagged_points():
    plt = plotting.pyplot()
    fig, ax = plt.subplots()
    assert plotting.mark_flagged(ax, [1, 2, 3], [4, 5, 6], [False, True, False], first=True)
    (line,) = ax.lines
    assert list(line.get_xdata()) == [2.0] and list(line.get_ydata()) == [5.0]
    assert line.get_markerfacecolor() == "none" and line.get_markeredgecolor() == "red"
    assert not plotting.mark_flagged(ax, [1], [1], [False], first=False)
    # a flagged point beyond the axis is circled at the edge, where it is drawn, not off the panel
    assert plotting.mark_flagged(ax, [1, 2], [4, -150], [False, True], first=False, limits=(3.0, 7.0))
    assert list(ax.lines[-1].get_ydata()) == [3.0]
    plt.close(fig)


# --------------------------------------------------------------------------- docutils warnings
def _caption_context(model: str):
    config = {
        "report": {"gap_threshold": 1.0, "z": 2.0, "ess_fraction": 0.1},
        "tracking": {"experiment": "logzbench"},
        "device": "cpu",
    }
    return types.SimpleNamespace(config=config, wildcards=types.SimpleNamespace(model=model))


@pytest.mark.parametrize("rst", sorted((REPO / "workflow" / "report").glob("*.rst")), ids=lambda p: p.stem)
def test_captions_render_without_docutils_warnings(rst):
    """Each caption, rendered as Snakemake does (Jinja, then docutils' HTML writer), gives no docutils
    message at all; the model name goes in as a literal, so a name that is reStructuredText markup
    (``*`` starts emphasis, a trailing ``_`` is a reference) cannot make one."""
    from docutils.core import publish_parts

    text = (
        jinja2.Environment()
        .from_string(rst.read_text())
        .render(snakemake=_caption_context("*rbm_"), categories={}, files=[])
    )
    stream = io.StringIO()
    publish_parts(
        text, writer="html", settings_overrides={"warning_stream": stream, "report_level": 1, "halt_level": 5}
    )
    assert stream.getvalue() == "", stream.getvalue()


def test_bias_mse_figure_colours_by_start(tmp_path, monkeypatch):
    """The bias / MSE figure (one panel per initial distribution) draws each estimator in the colour of
    its start (:func:`logzbench.plotting.series_color`), as every other figure does: AIS from the base
    rate is not AIS from the uniform distribution."""
    import matplotlib.colors as mcolors

    import logzbench.trials.plots as tp
    from logzbench.plotting import series_color

    figs = []
    real = tp.save_figure

    def keep(fig, path, **kw):
        figs.append(fig)
        return real(fig, path, **kw)

    monkeypatch.setattr(tp, "save_figure", keep)
    rows = [
        {"init": init, "method": m, "K": K, "bias": -1.0 / K, "bias_se": 0.1, "mse": 1.0 / K}
        for init in ("uniform", "base-rate")
        for m in ("ais", "reverse-ais")
        for K in (10, 100)
    ]
    tp.plot_trials(pd.DataFrame(rows), tmp_path / "b.png", x="K", panel="init", log_x=True)
    (fig,) = figs
    seen = {}
    for ax in fig.axes:
        title = ax.get_title()
        if not title.startswith("init = "):
            continue
        init = title.removeprefix("init = ")
        for handle, label in zip(*ax.get_legend_handles_labels()):
            line = handle.lines[0] if hasattr(handle, "lines") else handle
            seen[(label, init)] = mcolors.to_hex(line.get_color())
    for method, label in (("ais", "AIS"), ("reverse-ais", "reverse AIS")):
        labels = [k for k in seen if k[0].lower() == label.lower()]
        assert len(labels) == 2, seen
        for lab, init in labels:
            assert seen[(lab, init)] == mcolors.to_hex(series_color(method, init)), (lab, init, seen)
        assert seen[(labels[0][0], "uniform")] != seen[(labels[0][0], "base-rate")]
