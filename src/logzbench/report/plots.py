"""The report's figures: log-likelihood vs K per model, vs model size, and bias / MSE of log Z vs K.

Every estimator is drawn in one colour per initial distribution with its registry marker and display
name (:func:`logzbench.plotting.series_style`, :func:`~logzbench.plotting.series_label`), the same
in every figure; y-limits are robust to an outlier (drawn at the panel's edge) and flagged settings
are circled, the one way every figure does it (:class:`~logzbench.plotting.RobustY`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..plotting import INIT_LINESTYLES, RobustY, method_label, pyplot, save_figure, series_label, series_style
from .methods import DEEP_FAMILIES, K_METHODS

__all__ = ["INIT_LINESTYLES", "plot_annealed_trials", "plot_model", "plot_model_size"]

#: markers of a method's second, third, ... config entry in one figure (its first: the registry marker)
ENTRY_MARKERS = ("x", "+", "1", "2")


def _placeholder(text: str, path: str | os.PathLike, size: tuple[float, float]) -> Path:
    """A figure holding only ``text`` (PNG and PDF, written atomically)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=size)
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center")
    ax.set_axis_off()
    return save_figure(fig, path, dpi=110)


def _flagged(g: pd.DataFrame) -> np.ndarray:
    """Whether each summary row carries a flag (:mod:`.flags`; an empty ``flags`` is none)."""
    if "flags" not in g:
        return np.zeros(len(g), dtype=bool)
    return g["flags"].fillna("").astype(str).str.strip().ne("").to_numpy()


def plot_model(summary: pd.DataFrame, model: str, path: str | os.PathLike) -> Path:
    """Mean test log-likelihood vs K for one model (PNG and PDF, written atomically): each estimator
    swept over K per initial distribution and schedule with standard-error bars, and the exact value.

    One colour per (estimator, initial distribution) (:func:`~logzbench.plotting.series_style`);
    flagged settings circled in red (legend: ``flagged``); y-limits from the bulk of the values
    (:func:`~logzbench.plotting.robust_limits`), so that one estimate far off (a CSL value 50 nats
    below) does not squeeze the others: it is drawn as a triangle at the panel's edge."""
    plt = pyplot()
    ms = summary[summary["model"] == model]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    swept = ms[ms["method"].isin(K_METHODS)]
    entries = {m: sorted(set(g)) for m, g in swept.groupby("method")["estimator"]}
    series = []
    for (method, est, sched, init), g in swept.groupby(["method", "estimator", "schedule", "init"], sort=True):
        g = g[g["K"].notna() & g["mean_test_ll"].notna()].sort_values("K")
        if not g.empty:
            series.append((method, est, sched, init, g))
    ex = ms["exact_test_ll"].dropna()
    exact = float(ex.iloc[0]) if len(ex) else None
    robust = RobustY(ax)
    for method, est, sched, init, g in series:
        x, y = g["K"].to_numpy(dtype=float), g["mean_test_ll"].to_numpy(dtype=float)
        err = g["mean_test_ll_se"].to_numpy(dtype=float)
        style = series_style(method, init)
        i = entries[method].index(est)
        if i:  # another config entry of the same method: same colour, its own marker
            style["marker"] = ENTRY_MARKERS[(i - 1) % len(ENTRY_MARKERS)]
        ax.errorbar(
            x,
            y,
            yerr=np.where(np.isfinite(err), err, 0.0),
            capsize=3,
            alpha=0.9,
            label=series_label(method, init, entry=est if len(entries[method]) > 1 else "", schedule=sched),
            **style,
        )
        robust.add(x, y, style["color"], err=err, flagged=_flagged(g))
    if exact is not None:
        ax.axhline(exact, color=series_style("exact")["color"], linewidth=1.2, label=method_label("exact"))
        robust.add_level(exact)
    plotted = bool(series) or exact is not None
    ks = ms["K"].dropna()
    if len(ks) and ks.min() > 0 and ks.nunique() > 1:
        ax.set_xscale("log")
    if not plotted:
        ax.text(0.5, 0.5, "no estimates", transform=ax.transAxes, ha="center", va="center")
    else:
        robust.finish()
    ax.set_xlabel("K (intermediate distributions / CSL sweeps per chain)")
    ax.set_ylabel("mean test log-likelihood (nats)")
    fam = ms["family"].iloc[0] if "family" in ms and len(ms) else ""
    arch = ms["architecture"].iloc[0] if "architecture" in ms and len(ms) else ""
    ax.set_title(f"{model} ({fam.upper()} {arch})" if fam in DEEP_FAMILIES else model)
    ax.grid(True, alpha=0.3)
    if plotted:
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)


def plot_model_size(table: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Mean test log-likelihood against model size, one line per family (Sohl-Dickstein &
    Culpepper Fig. 5): the HAIS estimate at its largest K (the closed form where HAIS is absent); PNG
    and PDF."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    plotted = False
    for family, g in table.groupby("family", sort=True):
        y = g["hais"] if "hais" in g else pd.Series(float("nan"), index=g.index)
        y = y.where(y.notna(), g["exact"]).to_numpy(dtype=float)
        err = (g["hais_se"] if "hais_se" in g else pd.Series(0.0, index=g.index)).fillna(0.0).to_numpy(dtype=float)
        # (a model of unknown size, e.g. a user's continuous energy: NA, not plotted)
        x = pd.to_numeric(g["size"], errors="coerce").to_numpy(dtype=float)
        ok = np.isfinite(y) & np.isfinite(x)
        if ok.any():
            order = np.argsort(x[ok])
            ax.errorbar(x[ok][order], y[ok][order], yerr=err[ok][order], marker="o", capsize=3, label=family)
            plotted = True
    if not plotted:
        ax.text(0.5, 0.5, "no continuous models", transform=ax.transAxes, ha="center", va="center")
    else:
        ax.legend(fontsize=8)
    ax.set_xlabel("model size (experts / units / latent variables)")
    ax.set_ylabel("mean test log-likelihood (nats)")
    ax.set_title("log-likelihood vs model size (HAIS at the largest K)")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)


def plot_annealed_trials(trials: pd.DataFrame, model: str, path: str | os.PathLike) -> Path:
    """Bias (with ±2 s.e. over seeds) and MSE of ``log Ẑ`` vs K for one model, one line per
    estimator, one column per initial distribution (the layout of Liu et al. Figs 3-4); PNG and PDF,
    atomic.  Drawn by :func:`logzbench.trials.plot_trials`: each estimator in the colour of its start
    (:func:`~logzbench.plotting.series_color`), both rows' y-limits robust to an outlier (a setting far
    off, e.g. one K where an estimator diverged, is drawn at the panel's edge)."""
    from ..trials import plot_trials

    ms = trials[(trials["model"] == model) & trials["bias"].notna()]
    if ms.empty:
        return _placeholder(f"{model}: no repeated log Z estimates with a ground truth", path, (6.4, 3.0))
    # one line per estimator, styled by its method when it is the method's only estimator
    per_method = ms.groupby("method")["estimator"].nunique()
    ms = ms.assign(
        method=[
            (m if per_method[m] == 1 else e) + ("" if s in ("", "linear") else f" ({s})")
            for m, e, s in zip(ms["method"], ms["estimator"], ms["schedule"])
        ]
    )
    ms = ms.assign(K=ms["K"].astype(float))
    src = str(ms["truth_source"].iloc[0]).split(" (")[0]
    return plot_trials(
        ms, path, x="K", panel="init", log_x=True, title=f"{model}: log Z error over seeds vs K (truth: {src})"
    )
