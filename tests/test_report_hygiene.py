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
        labels = [k for k in seen if k[0].startswith(label + " (")]
        assert len(labels) == 2, seen
        for lab, init in labels:
            # named with its start as series_label names it, so the figure's one legend shows both colours
            assert lab == plotting.series_label(method, init), (lab, init)
            assert seen[(lab, init)] == mcolors.to_hex(series_color(method, init)), (lab, init, seen)
        assert len({seen[k] for k in labels}) == 2  # uniform and base rate differ


# --------------------------------------------------------------------------- every figure drawn the shared way
# (the bracket, bias / MSE and learner figures: robust limits with clipped points at the edge, colours from
# series_color, flagged points circled, a PDF twin; issue 27, item 5)
def _hex(c) -> str:
    import matplotlib.colors as mcolors

    return mcolors.to_hex(c)


def _capture_axes(monkeypatch, module):
    """Patch ``module.save_figure`` to keep, per figure, each axes' y-limits, legend texts (its own and the
    figure's) and lines (colour, marker, label, data, marker edge colour, whether clipped to the axes)."""
    seen = []
    original = module.save_figure

    def keep(fig, path, dpi=110):
        fig_legend = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
        axes = []
        for ax in fig.axes:
            axes.append(
                {
                    "ylim": ax.get_ylim(),
                    "title": ax.get_title(),
                    "legend": ([t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else [])
                    + fig_legend,
                    # errorbar containers (label, colour of its data line)
                    "containers": [
                        (c.get_label(), _hex(c.lines[0].get_color()))
                        for c in ax.containers
                        if getattr(c, "lines", None) and c.lines[0] is not None
                    ],
                    "lines": [
                        {
                            "color": _hex(ln.get_color()),
                            "marker": ln.get_marker(),
                            "label": ln.get_label(),
                            "x": np.asarray(ln.get_xdata(), dtype=float),
                            "y": np.asarray(ln.get_ydata(), dtype=float),
                            "edge": ln.get_markeredgecolor(),
                            "clip_on": ln.get_clip_on(),
                        }
                        for ln in ax.lines
                    ],
                }
            )
        seen.append(axes)
        return original(fig, path, dpi=dpi)

    monkeypatch.setattr(module, "save_figure", keep)
    return seen


def _edge_points(ax_info, color: str):
    """The (x, y) of the triangles drawn at the panel's edge in ``color`` (points beyond the y-limits)."""
    lo, hi = ax_info["ylim"]
    out = []
    for ln in ax_info["lines"]:
        if ln["color"] == color and not ln["clip_on"] and ln["marker"] in ("^", "v") and ln["edge"] == "black":
            for x, y in zip(ln["x"], ln["y"]):
                assert y in (lo, hi), (y, lo, hi)  # drawn at the edge, not somewhere off the panel
                out.append((float(x), "hi" if y == hi else "lo"))
    return out


def _pdf_twin(png: Path) -> bool:
    return png.with_suffix(".pdf").read_bytes().startswith(b"%PDF")


def _bracket_rec(method, seed, history, *, estimator=None, K=80):
    """An in-memory bracket record of model ``m``: ``history`` (total_sweeps, lower, upper) rounds of its
    log Z bracket (the sandwich), or one point without (BDMC: one record per K)."""
    last = history[-1]
    bracket = {"log_z_lower": last[1], "log_z_upper": last[2], "K": K, "total_sweeps": last[0]}
    if method == "sandwich":
        bracket["history"] = [{"total_sweeps": t, "log_z_lower": lo, "log_z_upper": hi} for t, lo, hi in history]
    return {
        "model": "m",
        "dataset": "digits",
        "family": "rbm",
        "estimator": estimator or method,
        "method": method,
        "seed": seed,
        "K": K,
        "result": {"estimator": method, "log_z": (last[1] + last[2]) / 2, "extra": {"bracket": bracket}},
    }


def _bracket_records(bad_seed: bool):
    """Two sandwich seeds (seed 0's first round 50 nats wide; seed 1's last lower end above the exact
    log Z of 10 when ``bad_seed``) and BDMC at two K."""
    recs = [
        _bracket_rec("sandwich", 0, [(100, -40.0, 60.0), (200, 9.0, 11.0), (400, 9.5, 10.5), (800, 9.8, 10.2)]),
        _bracket_rec(
            "sandwich", 1, [(200, 9.1, 10.9), (400, 9.6, 10.4), (800, 10.4, 10.6) if bad_seed else (800, 9.9, 10.1)]
        ),
        _bracket_rec("bdmc", 0, [(300, 9.0, 11.5)], K=10),
        _bracket_rec("bdmc", 0, [(3000, 9.6, 10.4)], K=100),
    ]
    return [(r, None) for r in recs]


def _bracket_figure(monkeypatch, tmp_path, *, bad_seed: bool, name: str):
    from logzbench.report import bracket

    records = _bracket_records(bad_seed)
    table = bracket.make_table_bracket(records)
    table["exact"] = 10.0  # the exact log Z of model m (the per-run table's, which these records lack)
    seen = _capture_axes(monkeypatch, bracket)
    png = bracket.plot_bracket(records, "m", tmp_path / f"{name}.png", table)
    ((ax,),) = seen
    return png, ax


def test_bracket_figure_robust_limits_colours_flags_and_pdf(monkeypatch, tmp_path):
    from logzbench.report import bracket

    png, ax = _bracket_figure(monkeypatch, tmp_path, bad_seed=True, name="m_bracket")
    lo, hi = ax["ylim"]
    sandwich, bdmc = plotting.series_color("sandwich"), plotting.series_color("bdmc")
    # (a) the first round's [-40, 60] does not flatten the converged brackets: it is drawn at the edges
    assert 8.0 < lo < 9.0 and 11.5 < hi < 13.0, (lo, hi)
    assert sorted(_edge_points(ax, sandwich)) == [(100.0, "hi"), (100.0, "lo")]
    assert plotting.CLIPPED_LABEL in ax["legend"]
    # (b) one colour per estimator, from series_color, the same for every seed; one legend entry each
    ends = [ln for ln in ax["lines"] if ln["marker"] in ("^", "v") and ln["clip_on"] and ln["edge"] != "black"]
    assert len(ends) == 2 * 3  # lower and upper of sandwich seeds 0, 1 and BDMC's seed (one point per K)
    assert {ln["color"] for ln in ends} == {sandwich, bdmc}
    named = {ln["label"]: ln["color"] for ln in ends if not ln["label"].startswith("_")}
    assert named == {
        "sandwich (seeds 0, 1): lower": sandwich,
        "sandwich (seeds 0, 1): upper": sandwich,
        "BDMC (seed 0): lower": bdmc,
        "BDMC (seed 0): upper": bdmc,
    }
    exact = [ln for ln in ax["lines"] if ln["label"] == plotting.method_label("exact")]
    assert exact and exact[0]["color"] == _hex(plotting.series_color("exact"))
    # (c) seed 1's last lower end (10.4, above the exact 10) is circled; nothing else
    circles = [ln for ln in ax["lines"] if ln["edge"] == "red"]
    assert bracket.BRACKET_FLAG_LABEL in ax["legend"]
    assert [(float(x), float(y)) for c in circles for x, y in zip(c["x"], c["y"])] == [(800.0, 10.4)]
    # (d)
    assert _pdf_twin(png)


def test_bracket_figure_without_a_miss_has_no_flag(monkeypatch, tmp_path):
    from logzbench.report import bracket

    _, ax = _bracket_figure(monkeypatch, tmp_path, bad_seed=False, name="clean")
    assert bracket.BRACKET_FLAG_LABEL not in ax["legend"]
    assert not [ln for ln in ax["lines"] if ln["edge"] == "red"]


def test_bracket_ends_that_cross_are_flagged():
    from logzbench.report.bracket import _bracket_flags

    lo, hi = np.array([9.0, 10.5, 9.5, 9.0]), np.array([11.0, 11.0, 9.8, 8.5])
    bad_lo, bad_hi = _bracket_flags(lo, hi, np.array([10.0, 10.0, 10.0, np.nan]))
    assert list(bad_lo) == [False, True, False, True]  # above the exact value; crossing (no exact known)
    assert list(bad_hi) == [False, False, True, True]  # below the exact value; crossing


def _annealed_trials(outlier: bool) -> pd.DataFrame:
    """The report's annealed_trials rows of model ``good``: AIS and reverse AIS from both starts at four K,
    biases within a nat; with ``outlier``, AIS from the uniform start diverged at K=10 (bias -80)."""
    rows = []
    for init in ("uniform", "base-rate"):
        for method in ("ais", "reverse-ais"):
            for K in (10, 100, 1000, 10000):
                bias = (-1.0 if method == "ais" else 1.0) / math.sqrt(K)
                if outlier and (init, method, K) == ("uniform", "ais", 10):
                    bias = -80.0
                rows.append(
                    {
                        "model": "good",
                        "init": init,
                        "schedule": "linear",
                        "K": K,
                        "estimator": method,
                        "method": method,
                        "bias": bias,
                        "bias_se": 0.02,
                        "mse": bias**2 + 0.01,
                        "truth_source": "exact",
                    }
                )
    return pd.DataFrame(rows)


def test_bias_mse_figure_robust_limits_and_pdf(monkeypatch, tmp_path):
    """One diverged setting (bias -80, MSE 6400) squeezes neither its bias nor its MSE panel: it is drawn
    at the panel's edge in its estimator's colour from its start; the other panels keep theirs."""
    import logzbench.trials.plots as tp

    seen = _capture_axes(monkeypatch, tp)
    png = plots.plot_annealed_trials(_annealed_trials(outlier=True), "good", tmp_path / "good_bias_mse.png")
    (axes,) = seen
    bias_u, bias_b, mse_u, mse_b = axes  # 2 x 2: bias row (uniform, base rate), MSE row
    assert bias_u["title"] == "init = base-rate" or bias_u["title"] == "init = uniform"
    if bias_u["title"] != "init = uniform":
        bias_u, bias_b, mse_u, mse_b = bias_b, bias_u, mse_b, mse_u
    ais_u = plotting.series_color("ais", "uniform")
    # (a) bias: the -80 does not set the lower limit; it is at the bottom edge, in AIS (uniform)'s colour
    lo, hi = bias_u["ylim"]
    assert lo > -5.0 and hi < 5.0, (lo, hi)
    assert _edge_points(bias_u, ais_u) == [(10.0, "lo")]
    # MSE (log axis): 6400 among values below 1.1 is clipped at the top edge
    lo, hi = mse_u["ylim"]
    assert hi < 100.0 and lo > 1e-4, (lo, hi)
    assert _edge_points(mse_u, ais_u) == [(10.0, "hi")]
    assert plotting.CLIPPED_LABEL in bias_u["legend"]
    # the base-rate panels have no outlier: nothing at their edges
    assert not any(ln["edge"] == "black" and not ln["clip_on"] for a in (bias_b, mse_b) for ln in a["lines"])
    # (b) every estimator's line in series_color of (estimator, start)
    for ax, init in ((bias_u, "uniform"), (bias_b, "base-rate"), (mse_u, "uniform"), (mse_b, "base-rate")):
        drawn = {lab: c for lab, c in ax["containers"]} | {ln["label"]: ln["color"] for ln in ax["lines"]}
        names = {plotting.series_label(m, init): m for m in ("ais", "reverse-ais")}
        drawn = {lab: c for lab, c in drawn.items() if lab in names}
        assert drawn == {lab: plotting.series_color(m, init) for lab, m in names.items()}, (init, drawn)
    # (d)
    assert _pdf_twin(png)


def test_bias_mse_limits_follow_the_data_without_an_outlier(monkeypatch, tmp_path):
    """Without the diverged setting nothing is clipped: the limits hold every point."""
    import logzbench.trials.plots as tp

    seen = _capture_axes(monkeypatch, tp)
    trials = _annealed_trials(outlier=False)
    plots.plot_annealed_trials(trials, "good", tmp_path / "clean.png")
    for ax in seen[0]:
        assert not any(ln["edge"] == "black" and not ln["clip_on"] for ln in ax["lines"])
        assert plotting.CLIPPED_LABEL not in ax["legend"]
        lo, hi = ax["ylim"]
        col = "mse" if ax["ylim"][0] > 0 else "bias"
        assert lo <= trials[col].min() and hi >= trials[col].max(), (col, lo, hi)


def _estimator_colours() -> set[str]:
    return {plotting.series_color(m, i) for m in ESTIMATORS for i in ("", *INITS)}


def test_other_colours_are_no_estimators():
    """The colours of lines that are no estimator's (a learner's bounds, the models of a panel) never name
    an estimator: none is any estimator's colour from any start."""
    others = {_hex(plotting.other_color(i)) for i in range(len(plotting.OTHER_COLORS))}
    assert len(others) == len(plotting.OTHER_COLORS)
    assert not others & _estimator_colours()


def test_learner_bounds_figure_robust_limits_shared_colours_and_pdf(monkeypatch, tmp_path):
    """NVIL's bounds: iteration 0 (the untrained model, 300 nats off) and one spike at iteration 500 do not
    flatten the curves (drawn at the edge); the final AIS line in AIS's colour, the learner's curves in
    colours that are no estimator's."""
    it = np.arange(0, 1100, 100)
    upper = 20.0 + 0.01 * it / 100
    upper[it == 0], upper[it == 500] = 300.0, 90.0
    hist = pd.DataFrame(
        {"iteration": it, "log_z_upper_bound": upper, "log_z_importance": 19.0 + 0.01 * it / 100, "model_loss": 1.0}
    )
    ais = {"log_z": 19.5, "K": 1000}
    seen = _capture_axes(monkeypatch, learner_plots)
    png = learner_plots.plot_bounds(_learner("n", "nvil"), hist, ais, tmp_path / "n_bounds.png")
    (axes,) = seen
    ax = axes[0]  # (a) log Z
    lo, hi = ax["ylim"]
    assert 15.0 < lo < 19.0 and 20.1 < hi < 25.0, (lo, hi)
    bound_colour = _hex(plotting.other_color(0))
    assert sorted(_edge_points(ax, bound_colour)) == [(0.0, "hi"), (500.0, "hi")]
    assert plotting.CLIPPED_LABEL in ax["legend"]
    by_label = {ln["label"]: ln["color"] for ln in ax["lines"]}
    assert by_label["chi-square upper bound"] == bound_colour
    assert by_label["importance estimate"] == _hex(plotting.other_color(1))
    assert by_label[f"{plotting.method_label('ais')} (K=1000, final)"] == plotting.series_color("ais")
    assert not {by_label["chi-square upper bound"], by_label["importance estimate"]} & _estimator_colours()
    assert _pdf_twin(png)


def test_learner_bounds_exact_in_its_colour_and_only_iteration_zero_logged(monkeypatch, tmp_path):
    """AVIL's bounds figure draws the exact values in the exact estimator's colour; a history of iteration 0
    alone still gets limits that hold it (nothing after it to fit)."""
    hist = pd.DataFrame(
        {
            "iteration": [0, 100, 200, 300, 400],
            "log_z_bound": [-200.0, 18.0, 18.5, 18.7, 18.8],
            "exact_log_z": 19.0,
            "free_energy_bound": [5.0, 4.0, 3.9, 3.8, 3.8],
            "exact_free_energy": 3.5,
        }
    )
    seen = _capture_axes(monkeypatch, learner_plots)
    learner_plots.plot_bounds(_learner("a", "avil"), hist, {"log_z": float("nan"), "K": pd.NA}, tmp_path / "a.png")
    learner_plots.plot_bounds(_learner("a", "avil"), hist.iloc[:1], {"log_z": float("nan")}, tmp_path / "a0.png")
    (axes, axes0) = seen
    log_z = next(a for a in axes if a["title"] == "(c) log Z")
    assert log_z["ylim"][0] > 10.0  # iteration 0's -200 at the edge
    exact = [ln for ln in log_z["lines"] if ln["label"] == "exact log Z"]
    assert exact and exact[0]["color"] == _hex(plotting.series_color("exact"))
    log_z0 = next(a for a in axes0 if a["title"] == "(c) log Z")
    lo, hi = log_z0["ylim"]
    assert lo < -200.0 < 19.0 < hi


def test_bounds_vs_ais_models_in_other_colours_clipped_at_the_edge(monkeypatch, tmp_path):
    """Each model of a bounds_vs_ais panel has its own colour that is no estimator's, and its iteration 0
    is drawn at the edge in that colour."""
    it = np.arange(0, 600, 100)
    hists = [
        pd.DataFrame({"iteration": it, "log_z_upper_bound": np.where(it == 0, 300.0, 20.0 + d), "exact_log_z": 19.5})
        for d in (0.0, 0.5)
    ]
    no_ais = {"log_z": float("nan"), "K": pd.NA}
    seen = _capture_axes(monkeypatch, learner_plots)
    entries = [(_learner(f"n{i}", "nvil"), h, no_ais) for i, h in enumerate(hists)]
    png = learner_plots.plot_bounds_vs_ais("tiny", entries, tmp_path / "tiny_bounds_vs_ais.png")
    ax = seen[0][0]
    colours = [ln["color"] for ln in ax["lines"] if ln["label"].endswith("chi-square upper bound")]
    assert colours == [_hex(plotting.other_color(0)), _hex(plotting.other_color(1))]
    assert not set(colours) & _estimator_colours()
    for c in colours:
        assert _edge_points(ax, c) == [(0.0, "hi")]
    assert _pdf_twin(png)


def test_trial_styles_defined_once_in_plotting():
    """The repeated trials' styles are plotting's: every method's colour, marker and label there is what
    plotting.method_style / series_color / method_label say, the derived lines included."""
    from logzbench import trials

    for method, style in trials.METHOD_STYLES.items():
        assert _hex(style["color"]) == plotting.series_color(method), method
        assert style["marker"] == plotting.method_style(method)["marker"], method
        assert style["label"] == trials.TRIAL_LABELS.get(method, plotting.method_label(method)), method
    assert plotting.method_label("avg-ais-reverse-ais") == "avg(AIS, reverse AIS)"
    assert plotting.series_style("mf-bound")["linestyle"] == "--"


def test_robust_limits_on_a_log_axis():
    """On a log axis an outlier is one by its order of magnitude: 1e6 among values near 1e-2."""
    lo, hi = plotting.robust_limits([0.01, 0.02, 0.015, 0.03, 0.012, 1e6], log=True)
    assert 1e-3 < lo < 0.01 and 0.03 < hi < 1.0


def test_every_savefig_goes_through_save_figure():
    """No module of the package writes a figure but through plotting.save_figure (PNG and PDF): the one
    other ``savefig`` is the warm server's render into memory, which writes no file."""
    src = REPO / "src" / "logzbench"
    hits = sorted(str(p.relative_to(src)) for p in src.rglob("*.py") if ".savefig(" in p.read_text())
    assert hits == ["pipeline/warm_server.py", "plotting.py"], hits
    assert "io.BytesIO()" in (src / "pipeline" / "warm_server.py").read_text()


def test_robust_limits_keep_a_trend_whole():
    """A bias that halves with each K is data, not an outlier: the limits hold every value (the values
    beyond the quartile fences are kept while each continues the data)."""
    values = [-1.0, -0.5, -0.25, -0.125, -0.0625, -0.03, -0.015, 0.0]
    lo, hi = plotting.robust_limits(values)
    assert lo < -1.0 and hi > 0.0
    lo, hi = plotting.robust_limits(values + [-60.0])  # one 60 times the trend's range off is not
    assert -2.0 < lo < -1.0
