"""Figures and the workflow's report of the repeated-trial experiments.

:func:`plot_trials` draws bias and MSE of ``log Ẑ`` in the layout of Liu et al.'s Figs. 1-2, one
fixed style per method (:data:`METHOD_STYLES`: a view of :func:`logzbench.plotting.method_style` and
:func:`~logzbench.plotting.method_label`, where every estimator's colour is defined once) and robust
y-limits (:class:`logzbench.plotting.RobustY`); :func:`report_trials` summarises the workflow's
per-trial tables and draws them.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from .. import plotting, registry
from ..plotting import (
    DERIVED_SERIES,
    RobustY,
    init_label,
    method_label,
    method_style,
    pyplot,
    save_figure,
    series_color,
    series_style,
)
from ..utils import write_csv_atomic
from .table import BOUND_METHODS, GRID_REFERENCES, METHODS, SUMMARY_COLUMNS, summarize_trials


def estimator_style(name: str, label: str | None = None) -> dict:
    """Plot style of ``name`` (:func:`logzbench.plotting.method_style`: its
    :func:`~logzbench.plotting.estimator_style`, or the style of a line of
    :data:`~logzbench.plotting.DERIVED_SERIES`) with its label (:func:`~logzbench.plotting.method_label`,
    or ``label``)."""
    return {**method_style(name), "label": method_label(name) if label is None else label}


#: Labels of the trials figures that differ from the registry's (DS uses half of each side's samples).
TRIAL_LABELS = {"ds": "DS (n/2 per side)"}


def _annealed_order() -> tuple[str, ...]:
    """The registry's estimators of log Z from one annealing run (swept over the initial distribution: Liu et
    al. Figs 3-4, the report's annealed_trials table) in legend order: those with a bound first, then the
    average of AIS and reverse AIS (:data:`~logzbench.plotting.DERIVED_SERIES`), then those without a
    direction, the emphasised ones last (drawn on top)."""
    annealed = registry.methods_where(yields="log_z", axes="init")
    annealed = [m for m in annealed if m not in METHODS]
    bounded = [m for m in annealed if registry.estimator(m).bound != "none"]
    rest = sorted((m for m in annealed if m not in bounded), key=lambda m: plotting.estimator_style(m).emphasis)
    average = [m for m in DERIVED_SERIES if m not in BOUND_METHODS.values()]
    return (*bounded, *average, *rest)


#: Plot style per method, in legend order (same colours and markers in every figure; DS and ADS
#: drawn prominently): the IS family, then the annealed estimators (:func:`_annealed_order`) and the
#: deterministic bounds of the grid MRFs.  Every style is :func:`estimator_style`'s, defined in
#: :mod:`logzbench.plotting`, not here.
METHOD_STYLES = {
    m: estimator_style(m, TRIAL_LABELS.get(m)) for m in (*METHODS, *_annealed_order(), *BOUND_METHODS.values())
}


# --------------------------------------------------------------------------- plots
def _style(method: str, init: str = "") -> dict:
    """Keywords of ``method``'s lines: :data:`METHOD_STYLES` (a method not there: its
    :func:`~logzbench.plotting.series_style` and its name as label); with ``init``, in the colour of
    that start (:func:`~logzbench.plotting.series_color`) and labelled with it (``AIS (base rate)``, as
    :func:`~logzbench.plotting.series_label` names it), so that the figure's one legend tells the
    panels' colours apart."""
    st = dict(METHOD_STYLES.get(method) or {**series_style(method), "label": str(method)})
    if init:  # one panel per initial distribution: the estimator's colour and name from that start, as everywhere
        st["color"] = series_color(method, init)
        st["label"] = f"{st['label']} ({init_label(init)})"
    st.setdefault("linestyle", "-")
    st.setdefault("linewidth", 1.4)
    st.setdefault("markersize", 5)
    return st


def _method_order(methods) -> list[str]:
    known = [m for m in METHOD_STYLES if m in methods]
    return known + sorted(m for m in methods if m not in METHOD_STYLES)


def _panel_order(values) -> list:
    vals = list(pd.unique(values))
    if all(v in GRID_REFERENCES for v in vals):
        return [r for r in GRID_REFERENCES if r in vals]
    try:
        return sorted(vals)
    except TypeError:
        return vals


def plot_trials(
    summary: pd.DataFrame,
    path: str | os.PathLike,
    *,
    x: str,
    panel: str | None = None,
    title: str | None = None,
    methods=None,
    log_x: bool | None = None,
) -> Path:
    """Bias and MSE of ``log Ẑ`` against ``x``, in the layout of the paper's Figs. 1-2 (PNG).

    Top row: bias with ``+-2 bias_se`` error bars and a zero line; bottom row: MSE on a log
    axis.  One line per method with fixed colours/markers (:data:`METHOD_STYLES`; DS drawn
    thicker and on top; with ``panel="init"`` each in the colour of that start and named with it,
    :func:`~logzbench.plotting.series_color`).  Both rows' y-limits come from the bulk of the
    values (:class:`~logzbench.plotting.RobustY`; the MSE's from its orders of magnitude): a point
    far off is drawn as a triangle at the panel's edge.  Deterministic bounds (``"mf-bound"``,
    ``"trw-bound"``) appear as dashed lines in the bias row only.  ``x`` is on a log axis when it is ``"sigma0"``.

    Parameters
    ----------
    summary : pandas.DataFrame
        From :func:`summarize_trials`, holding one row per (panel value, method, ``x``): filter
        other varying settings out first.
    path : path-like
        PNG to write (parent directories are created; written to a temporary file in the same
        directory, then renamed onto ``path``).
    x : str
        Column on the horizontal axis (``"sigma0"`` for Fig. 1, ``"sigma_pair"`` for Fig. 2).
    panel : str, optional
        Column with one figure column per value (``"reference"`` for Fig. 2: uniform |
        mean-field | trw); y-axes are not shared, as in the paper.
    title : str, optional
        Figure title.
    methods : sequence of str, optional
        Methods to draw (default all in ``summary``).
    log_x : bool, optional
        Logarithmic ``x`` axis (default: when ``x`` is ``"sigma0"``); labelled at the data points.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    ValueError
        Empty summary, missing columns, no rows for ``methods``, or several rows for one
        (panel value, method, ``x``).
    """
    methods = list(methods) if methods is not None else None
    s = _checked_summary(summary, x, panel, methods)
    panels = _panel_order(s[panel]) if panel is not None else [None]
    order = _method_order(methods if methods is not None else pd.unique(s["method"]))
    ncol = len(panels)
    fig, axes = pyplot().subplots(2, ncol, figsize=(4.6 * ncol + 0.6, 7.2), squeeze=False, sharex="col")
    for j, pv in enumerate(panels):
        sp = s if panel is None else s[s[panel] == pv]
        _trials_panel(axes[0, j], axes[1, j], sp, order, x, str(pv) if panel == "init" else "")
        _trials_x_axes((axes[0, j], axes[1, j]), sp[x].to_numpy(dtype=float), x, log_x)
        if panel is not None:
            axes[0, j].set_title(f"p0 = {pv}" if panel == "reference" else f"{panel} = {pv}")
        if j == 0:
            axes[0, j].set_ylabel("bias of log Ẑ (nats)")
            axes[1, j].set_ylabel("MSE of log Ẑ")
    handles, labels = _legend_entries(axes)
    leg_cols = max(1, min(len(labels), 4 if ncol > 1 else 2))
    fig.legend(handles, labels, loc="lower center", ncol=leg_cols, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=9 if ncol == 1 else 11, wrap=True)
    n_rows_legend = math.ceil(len(labels) / leg_cols) if labels else 0
    fig.tight_layout(rect=(0, 0.03 * n_rows_legend + 0.01, 1, 0.96 if title else 1))
    return save_figure(fig, path, dpi=110)


def _checked_summary(summary: pd.DataFrame, x: str, panel: str | None, methods) -> pd.DataFrame:
    """The rows of ``summary`` that :func:`plot_trials` draws (those of ``methods``), or the ValueError it
    documents: an empty summary, a missing column, no rows for ``methods``, several rows per point."""
    if len(summary) == 0:
        raise ValueError("summary is empty: nothing to plot")
    need = {x, "method", "bias", "bias_se", "mse"} | ({panel} if panel is not None else set())
    missing = sorted(need - set(summary.columns))
    if missing:
        raise ValueError(f"summary lacks column(s) {missing}")
    s = summary
    if methods is not None:
        s = s[s["method"].isin(methods)]
        if len(s) == 0:
            raise ValueError(f"summary has no rows for methods {methods}")
    keys = [panel, "method", x] if panel is not None else ["method", x]
    dup = s.duplicated(keys, keep=False)
    if dup.any():
        varying = [
            c
            for c in s.columns
            if c not in keys and c not in SUMMARY_COLUMNS and s.loc[dup, c].nunique(dropna=False) > 1
        ]
        raise ValueError(
            f"summary has several rows per ({', '.join(keys)}); filter it to one setting first "
            f"(varying: {varying or 'unknown'})"
        )
    return s


def _trials_panel(ax_b, ax_m, sp: pd.DataFrame, order: list[str], x: str, init: str) -> None:
    """One column of :func:`plot_trials`: each method's bias with ``+-2 bias_se`` error bars on ``ax_b``
    and its MSE on ``ax_m`` (log axis; not the deterministic bounds'), in its :func:`_style` (from
    ``init``: that start's colour and name), both rows' y-limits robust (:class:`~logzbench.plotting.RobustY`)."""
    bounds = set(BOUND_METHODS.values())
    # robust y-limits: one setting far off (a diverged K) is drawn at the edge, not squeezing the rest
    robust_b, robust_m = RobustY(ax_b), RobustY(ax_m, log=True)
    robust_b.add_level(0.0)  # the zero line, unless it is far from the bulk itself
    for method in order:
        g = sp[sp["method"] == method].sort_values(x)
        if g.empty:
            continue
        st = _style(method, init)
        xs = g[x].to_numpy(dtype=float)
        bias = g["bias"].to_numpy(dtype=float)
        err = 2.0 * g["bias_se"].to_numpy(dtype=float)
        err = np.where(np.isfinite(err), err, 0.0)
        kw = {
            "color": st["color"],
            "marker": st["marker"],
            "linestyle": st["linestyle"],
            "linewidth": st["linewidth"],
            "markersize": st["markersize"],
            "zorder": st.get("zorder", 2),
        }
        ax_b.errorbar(xs, bias, yerr=err, capsize=2.5, label=st["label"], **kw)
        robust_b.add(xs, bias, st["color"], err=err)
        if method in bounds or str(method).endswith("-bound"):
            continue
        mse = g["mse"].to_numpy(dtype=float)
        ok = np.isfinite(mse) & (mse > 0)
        if ok.any():
            ax_m.plot(xs[ok], mse[ok], label=st["label"], **kw)
            robust_m.add(xs[ok], mse[ok], st["color"])
    ax_b.axhline(0.0, color="black", linewidth=0.8, zorder=1)
    ax_m.set_yscale("log")
    robust_b.finish()
    robust_m.finish()


def _trials_x_axes(axes, xvals: np.ndarray, x: str, log_x: bool | None) -> None:
    """The x-axes of one column (bias row, then MSE row): logarithmic where :func:`plot_trials` says
    (plain labels at up to 12 data points), a grid (the MSE row's at minor ticks too), ``x`` as the label."""
    from matplotlib import ticker

    xvals = np.unique(xvals)
    for ax in axes:
        if (x == "sigma0") if log_x is None else log_x:
            ax.set_xscale("log", base=2 if x == "K" else 10)
            if 1 < xvals.size <= 12:  # plain labels at the data points instead of crowded 10^k ones
                ax.set_xticks(xvals)
                ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
                ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.grid(True, alpha=0.3, which="both" if ax is axes[-1] else "major")
    axes[-1].set_xlabel(x)


def _legend_entries(axes) -> tuple[list, list[str]]:
    """The figure legend's handles and labels: the first panel's, then those of methods absent from it and
    of the MSE row's clipped points, each label once."""
    handles, labels = axes[0, 0].get_legend_handles_labels()
    seen = set(labels)
    for ax in [*axes[0, 1:], *axes[1, :]]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in seen:
                handles.append(h)
                labels.append(lab)
                seen.add(lab)
    return handles, labels


# --------------------------------------------------------------------------- workflow report
#: figure layout per experiment: (x, panel, title)
FIGURES = {
    "gaussian": ("sigma0", None, "Gaussian toy (Liu et al. Fig. 1): p = N(0, 1), p0 = N(0, sigma0^2)"),
    "grid": ("sigma_pair", "reference", "Grid MRFs (Liu et al. Fig. 2)"),
}


def report_trials(files: dict, out_dir: str | os.PathLike) -> dict[str, Path]:
    """Summaries and figures of the workflow's per-trial tables.

    Parameters
    ----------
    files : dict
        ``{"gaussian": [csv, ...], "grid": [csv, ...]}``: per-trial tables written by the
        workflow (one per setting); an experiment with no files is skipped.
    out_dir : path-like
        Receives ``<experiment>.csv`` (:func:`summarize_trials`) and ``<experiment>.png``
        (:func:`plot_trials` in the layout of :data:`FIGURES`), both written atomically.

    Returns
    -------
    dict
        ``{"<experiment>_csv": path, "<experiment>_png": path}`` for every experiment written.
    """
    out: dict[str, Path] = {}
    for experiment, paths in files.items():
        if experiment not in FIGURES:
            raise ValueError(f"unknown trials experiment {experiment!r}; known: {sorted(FIGURES)}")
        paths = list(paths)
        if not paths:
            continue
        df = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
        summary = summarize_trials(df)
        out[f"{experiment}_csv"] = write_csv_atomic(Path(out_dir) / f"{experiment}.csv", summary)
        x, panel, title = FIGURES[experiment]
        out[f"{experiment}_png"] = plot_trials(
            summary,
            Path(out_dir) / f"{experiment}.png",
            x=x,
            panel=panel,
            title=f"{title}: {int(summary['n_trials'].max())} trials",
        )
    return out
