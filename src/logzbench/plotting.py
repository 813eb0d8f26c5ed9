"""Matplotlib helpers shared by the report and the repeated-trial figures, and training curves.

The one place for what every figure shares: how it is saved (:func:`save_figure`: PNG and a PDF
beside it), how an estimator and its start distribution are drawn and named (:func:`series_style`,
:func:`series_label`: one colour per (estimator, init) in every figure), robust y-limits that one
outlier cannot squeeze a panel with (:func:`robust_limits`, :func:`set_robust_ylim`) and the marker
of a flagged point (:func:`mark_flagged`).
"""

from __future__ import annotations

import math
import os
import zlib
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from .options import INITS
from .registry import ESTIMATORS
from .utils import atomic_path

#: formats every figure is written in (the PNG for the report's pages, the PDF for papers and zooming)
FIGURE_FORMATS = ("png", "pdf")
#: line style of each initial distribution (others, and estimators without one: dotted)
INIT_LINESTYLES = {"uniform": "-", "base-rate": "--"}
#: how much darker each later initial distribution's colour is than the estimator's registry colour
#: (the first, ``uniform``, keeps it): AIS (uniform) and AIS (base rate) differ in colour and line
INIT_DARKEN = 0.42
#: colours of methods the registry does not know (chosen by the name's hash, so stable across figures)
FALLBACK_COLORS = ("tab:pink", "tab:gray", "navy", "gold", "teal", "maroon", "darkkhaki", "slateblue")
#: a flagged setting's marker, drawn over its point: hollow, red-edged
FLAG_STYLE = {
    "marker": "o",
    "markersize": 13,
    "markerfacecolor": "none",
    "markeredgecolor": "red",
    "markeredgewidth": 1.6,
    "linestyle": "none",
}
#: a point beyond the robust y-limits, drawn at the panel's edge
CLIPPED_STYLE = {
    "markersize": 8,
    "markeredgecolor": "black",
    "markeredgewidth": 0.8,
    "linestyle": "none",
    "clip_on": False,
    "zorder": 6,
}
CLIPPED_LABEL = "beyond the axis (drawn at its edge)"


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (imported lazily)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def figure_paths(path: str | os.PathLike) -> list[Path]:
    """Every file :func:`save_figure` writes for ``path`` (``plots/m.png`` -> ``plots/m.png``,
    ``plots/m.pdf``), in :data:`FIGURE_FORMATS` order."""
    path = Path(path)
    return [path] + [path.with_suffix(f".{fmt}") for fmt in FIGURE_FORMATS[1:]]


def save_figure(fig, path: str | os.PathLike, dpi: int = 110) -> Path:
    """Write ``fig`` as the PNG ``path`` and as a PDF beside it (:func:`figure_paths`), each atomically
    (parent directories created), and close it; returns the PNG's path.  Every figure of the package is
    saved here, so that every figure exists in both formats (the PNG at ``dpi``, the PDF as vectors)."""
    path = Path(path)
    try:
        for fmt, target in zip(FIGURE_FORMATS, figure_paths(path)):
            with atomic_path(target) as tmp:
                fig.savefig(tmp, dpi=dpi, format=fmt)
    finally:
        pyplot().close(fig)
    return path


# --------------------------------------------------------------------------- estimator styles and names
def method_label(method: str) -> str:
    """Display name of ``method`` in every legend (the registry's label, e.g. ``AIS``; the name itself
    for a method the registry does not know)."""
    spec = ESTIMATORS.get(str(method))
    return spec.label if spec is not None else str(method)


def init_label(init: str) -> str:
    """Display name of an initial distribution (``base-rate`` -> ``base rate``)."""
    return str(init).replace("-", " ")


def series_label(method: str, init: str = "", *, entry: str = "", schedule: str = "") -> str:
    """Legend entry of one estimator's line: its display name (:func:`method_label`), the config entry
    in brackets when it is not the method's own name (two entries of one method in a figure), then the
    initial distribution and a non-linear schedule in parentheses: ``AIS (base rate)``,
    ``AIS [ais-long] (uniform, sigmoid)``."""
    name = method_label(method)
    if entry and entry != method:
        name += f" [{entry}]"
    extras = [init_label(init)] if init else []
    if schedule and schedule != "linear":
        extras.append(str(schedule))
    return f"{name} ({', '.join(extras)})" if extras else name


def series_color(method: str, init: str = "") -> str:
    """The one colour of ``method`` started from ``init`` in every figure (hex): the registry colour for
    the first initial distribution (and none), darker for each later one (:data:`INIT_DARKEN`); a method
    the registry does not know takes a fixed colour from :data:`FALLBACK_COLORS` by its name."""
    from matplotlib import colors

    spec = ESTIMATORS.get(str(method))
    base = spec.color if spec is not None else FALLBACK_COLORS[zlib.crc32(str(method).encode()) % len(FALLBACK_COLORS)]
    rgb = np.asarray(colors.to_rgb(base))
    step = INITS.index(init) if init in INITS else (len(INITS) if init else 0)
    return colors.to_hex(rgb * (1.0 - INIT_DARKEN) ** step)


def method_style(method: str) -> dict[str, Any]:
    """Matplotlib style of ``method``'s lines (:attr:`~logzbench.registry.EstimatorSpec.style`; a method
    the registry does not know: round markers)."""
    spec = ESTIMATORS.get(str(method))
    return dict(spec.style) if spec is not None else {"marker": "o"}


def series_style(method: str, init: str = "") -> dict[str, Any]:
    """Matplotlib keywords of ``method``'s line from ``init``: :func:`series_color`, the registry's marker
    (and emphasis, :func:`method_style`), the init's line style (:data:`INIT_LINESTYLES`)."""
    style = method_style(method)
    style["color"] = series_color(method, init)
    style["linestyle"] = INIT_LINESTYLES.get(init, ":") if init else "-"
    return style


# --------------------------------------------------------------------------- robust axis limits
def robust_limits(
    values: Iterable[float], spans: Iterable[tuple[float, float]] = (), *, k: float = 3.0, pad: float = 0.08
) -> tuple[float, float] | None:
    """y-limits of a panel that one outlier cannot squeeze: the values within ``k`` interquartile ranges
    of the quartiles (all of them below 4 values), with the ``spans`` (error bars: (low, high)) of those
    values, padded by ``pad`` of the range; ``None`` without a finite value.  A value outside is drawn
    at the edge (:func:`mark_clipped`)."""
    v = np.asarray([float(x) for x in values], dtype=float)
    v = v[np.isfinite(v)]
    if not v.size:
        return None
    if v.size >= 4:
        q1, q3 = np.percentile(v, [25, 75])
        iqr = q3 - q1
        if iqr <= 0:  # most values equal: a spread from the data's own scale
            iqr = max(1e-9, 0.05 * float(np.median(np.abs(v))))
        lo_fence, hi_fence = q1 - k * iqr, q3 + k * iqr
    else:
        lo_fence, hi_fence = -math.inf, math.inf
    inside = v[(v >= lo_fence) & (v <= hi_fence)]
    lo, hi = float(inside.min()), float(inside.max())
    for a, b in spans:
        a, b = float(a), float(b)
        if math.isfinite(a) and math.isfinite(b) and lo_fence <= (a + b) / 2 <= hi_fence:
            lo, hi = min(lo, a), max(hi, b)
    margin = pad * (hi - lo) if hi > lo else max(0.5, 0.05 * abs(lo))
    return lo - margin, hi + margin


def mark_clipped(ax, x, y, limits: tuple[float, float] | None, color: str) -> bool:
    """Draw the points of ``(x, y)`` beyond ``limits`` at the panel's edge (a triangle pointing out, in
    ``color``); whether there were any."""
    if limits is None:
        return False
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    lo, hi = limits
    clipped = False
    for sel, edge, marker in ((y > hi, hi, "^"), (y < lo, lo, "v")):
        sel &= np.isfinite(x)
        if sel.any():
            ax.plot(x[sel], np.full(int(sel.sum()), edge), marker=marker, color=color, **CLIPPED_STYLE)
            clipped = True
    return clipped


def set_robust_ylim(ax, limits: tuple[float, float] | None, clipped: bool) -> None:
    """Apply ``limits`` to ``ax`` (nothing when ``None``); with ``clipped`` points, add the legend entry
    that says what the edge triangles are (:data:`CLIPPED_LABEL`)."""
    if limits is None:
        return
    ax.set_ylim(*limits)
    if clipped:  # a legend proxy (clipped: an unclipped empty line would stretch tight_layout to the origin)
        ax.plot([], [], marker="^", color="grey", label=CLIPPED_LABEL, **{**CLIPPED_STYLE, "clip_on": True})


def mark_flagged(ax, x, y, flagged, *, first: bool, limits: tuple[float, float] | None = None) -> bool:
    """Circle the points of ``(x, y)`` whose ``flagged`` is true (:data:`FLAG_STYLE`), labelled ``flagged``
    in the legend when ``first`` (once per panel); a point beyond ``limits`` is circled at the edge where
    :func:`mark_clipped` draws it.  Whether any was flagged."""
    sel = np.asarray(flagged, dtype=bool)
    if not sel.any():
        return False
    y = np.asarray(y, dtype=float)
    if limits is not None:
        y = np.clip(y, *limits)
    ax.plot(
        np.asarray(x, dtype=float)[sel],
        y[sel],
        label="flagged" if first else None,
        zorder=7,
        clip_on=False,
        **FLAG_STYLE,
    )
    return True


def plot_history(
    history: Sequence[Mapping[str, Any]], path: str | os.PathLike, title: str = "", step: str = "epoch"
) -> Path:
    """Training curves (every numeric per-epoch entry but time) vs ``step`` (a black-box learner's:
    ``iteration``), one panel each (PNG and PDF, atomic)."""
    plt = pyplot()
    df = pd.DataFrame(list(history))
    x = df[step] if step in df else pd.Series(range(1, len(df) + 1))
    cols = [
        c
        for c in df.columns
        if c != step and "second" not in c and pd.api.types.is_numeric_dtype(df[c]) and df[c].notna().any()
    ]
    n = max(1, len(cols))
    ncol = min(3, n)
    nrow = (n + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.0 * ncol, 2.8 * nrow), squeeze=False)
    for ax, c in zip(axes.ravel(), cols):
        ax.plot(x, df[c], marker="o", markersize=3)
        ax.set_title(c, fontsize=9)
        ax.set_xlabel(step, fontsize=8)
        ax.grid(True, alpha=0.3)
    for ax in axes.ravel()[len(cols) :]:
        ax.axis("off")
    if not cols:
        axes[0, 0].text(0.5, 0.5, "no per-epoch metrics", ha="center", va="center")
    if title:
        fig.suptitle(title)
    # fixed margins (in inches, as the panels are 4.0 x 2.8 in): tight_layout would measure every tick
    # label first, a third of the plot's time
    height = 2.8 * nrow + (0.4 if title else 0.0)
    fig.set_size_inches(4.0 * ncol, height)
    fig.subplots_adjust(
        left=0.6 / (4.0 * ncol),
        right=1 - 0.15 / (4.0 * ncol),
        bottom=0.45 / height,
        top=1 - (0.75 if title else 0.35) / height,
        wspace=0.35,
        hspace=0.45,
    )
    return save_figure(fig, path, dpi=100)
