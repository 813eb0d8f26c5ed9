"""Matplotlib helpers shared by the report and the repeated-trial figures, and training curves.

The one place for what every figure shares: how it is saved (:func:`save_figure`: PNG and a PDF
beside it), how an estimator and its start distribution are drawn and named (each estimator's label,
colour and marker, :data:`ESTIMATOR_STYLES`, and an automatic style for a registry estimator without
one, :func:`estimator_style`; :func:`series_style`, :func:`series_label`: one colour per (estimator,
init) in every figure; the few lines that are no registry estimator, :data:`DERIVED_SERIES`, and
lines that are none, :func:`other_color`), and how a
panel's y-axis is set (:class:`RobustY`: robust limits that one outlier cannot squeeze a panel with,
points beyond them drawn at the edge, flagged points circled; built on :func:`robust_limits`,
:func:`mark_clipped`, :func:`mark_flagged` and :func:`set_robust_ylim`).
"""

from __future__ import annotations

import math
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from . import registry
from .options import INITS
from .utils import atomic_path

#: formats every figure is written in (the PNG for the report's pages, the PDF for papers and zooming)
FIGURE_FORMATS = ("png", "pdf")
#: line style of each initial distribution (others, and estimators without one: dotted)
INIT_LINESTYLES = {"uniform": "-", "base-rate": "--"}
#: how much darker each later initial distribution's colour is than the estimator's own colour
#: (the first, ``uniform``, keeps it): AIS (uniform) and AIS (base rate) differ in colour and line
INIT_DARKEN = 0.42
#: colours of methods without a style of their own (chosen by the name's hash, so stable across figures)
FALLBACK_COLORS = ("tab:pink", "tab:gray", "navy", "gold", "teal", "maroon", "darkkhaki", "slateblue")
#: markers of registry estimators without a style of their own (chosen by the name's hash, beside the colour)
AUTO_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "h", "p", "*")
#: Matplotlib keywords that draw an emphasised estimator heavier and on top
EMPHASIS_STYLE = {"linewidth": 2.6, "markersize": 10, "zorder": 5}


@dataclass(frozen=True)
class EstimatorStyle:
    """How an estimator's lines look in every figure (the report's and the repeated trials' alike).

    Attributes
    ----------
    label : str
        Its name in figure legends.
    color, marker : str
        Matplotlib colour and marker of its lines.
    emphasis : bool
        Drawn heavier and on top (:data:`EMPHASIS_STYLE`): the discriminance estimators the trials
        figures are about.
    """

    label: str
    color: str
    marker: str = "o"
    emphasis: bool = False

    @property
    def keywords(self) -> dict[str, Any]:
        """Matplotlib keywords of its lines: colour and marker, and :data:`EMPHASIS_STYLE` when emphasised."""
        return {"color": self.color, "marker": self.marker, **(EMPHASIS_STYLE if self.emphasis else {})}


#: Every shipped estimator's style, by registry name; a registry estimator not here (a plugin's) is drawn
#: in an automatic style (:func:`estimator_style`), and a plugin may add its own entry.
# fmt: off
ESTIMATOR_STYLES: dict[str, EstimatorStyle] = {
    "exact": EstimatorStyle("exact", "black", "_"),
    "ais": EstimatorStyle("AIS", "tab:blue", "o"),
    "raise": EstimatorStyle("RAISE", "tab:cyan", "D"),
    "csl": EstimatorStyle("CSL", "tab:green", "s"),
    "ads": EstimatorStyle("ADS", "tab:red", "*", emphasis=True),
    "ads-multinomial": EstimatorStyle("ADS multinomial", "tab:purple", "v"),
    "reverse-ais": EstimatorStyle("reverse AIS", "tab:orange", "s"),
    "sandwich": EstimatorStyle("sandwich", "tab:olive", "P"),
    "smc": EstimatorStyle("SMC", "deeppink", "p"),
    "is": EstimatorStyle("IS", "tab:blue", "o"),
    "ris": EstimatorStyle("reverse IS", "tab:orange", "s"),
    "is-avg": EstimatorStyle("naive average", "tab:green", "^"),
    "is-weighted": EstimatorStyle("weighted average", "tab:purple", "v"),
    "is-select": EstimatorStyle("weighted selection", "tab:brown", "D"),
    "ds": EstimatorStyle("DS", "tab:red", "*", emphasis=True),
    "hais": EstimatorStyle("HAIS", "tab:blue", "o"),
    "ais-hmc": EstimatorStyle("AIS (HMC)", "tab:green", "s"),
    "ais-mh": EstimatorStyle("AIS (MH)", "tab:red", "^"),
    "raise-hmc": EstimatorStyle("RAISE (HMC)", "tab:cyan", "P"),
    "reverse-hais": EstimatorStyle("reverse HAIS", "tab:orange", "X"),
    "bdmc": EstimatorStyle("BDMC", "sienna", "h"),
    "pt": EstimatorStyle("PT", "darkslateblue", "p"),
}
# fmt: on
#: lines drawn like an estimator's that are no registry estimator: the repeated trials' per-seed average of
#: AIS and reverse AIS (:data:`logzbench.report.tables.AVERAGE_METHOD`) and the grid MRFs' deterministic
#: bounds (:data:`logzbench.trials.table.BOUND_METHODS`): style keywords and ``label``
DERIVED_SERIES: dict[str, dict[str, Any]] = {
    "avg-ais-reverse-ais": {"color": "tab:green", "marker": "^", "label": "avg(AIS, reverse AIS)"},
    "mf-bound": {"color": "tab:gray", "marker": None, "linestyle": "--", "label": "mean-field bound"},
    "trw-bound": {"color": "black", "marker": None, "linestyle": "--", "label": "TRW bound"},
}
#: colours of lines that are no estimator's (a learner's bound curves, one model among several in a
#: panel): none is a registry estimator's colour, so that a colour never names an estimator it is not
OTHER_COLORS = ("maroon", "teal", "goldenrod", "navy", "slateblue", "darkkhaki", "tab:pink", "indigo")
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
def _fallback_color(method: str) -> str:
    """A fixed colour of :data:`FALLBACK_COLORS` for a method without a style of its own, by its name."""
    return FALLBACK_COLORS[zlib.crc32(str(method).encode()) % len(FALLBACK_COLORS)]


def estimator_style(method: str) -> EstimatorStyle | None:
    """The style of registry estimator ``method``: its entry in :data:`ESTIMATOR_STYLES`, else an automatic
    one keyed by its name (the name as label, a colour of :data:`FALLBACK_COLORS` and a marker of
    :data:`AUTO_MARKERS`, so that a plugin's estimator is drawn distinguishably, the same in every figure);
    ``None`` for a method that is neither styled nor in the registry."""
    name = str(method)
    style = ESTIMATOR_STYLES.get(name)
    if style is not None or name not in registry.ESTIMATORS:
        return style
    marker = AUTO_MARKERS[(zlib.crc32(name.encode()) // len(FALLBACK_COLORS)) % len(AUTO_MARKERS)]
    return EstimatorStyle(name, _fallback_color(name), marker)


def method_label(method: str) -> str:
    """Display name of ``method`` in every legend (its style's label, e.g. ``AIS``; the name itself
    for a method the registry does not know)."""
    style = estimator_style(method)
    if style is not None:
        return style.label
    return str(DERIVED_SERIES.get(str(method), {}).get("label", method))


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
    """The one colour of ``method`` started from ``init`` in every figure (hex): its style's colour
    (:func:`estimator_style`) for the first initial distribution (and none), darker for each later one
    (:data:`INIT_DARKEN`); a method the registry does not know takes a fixed colour from
    :data:`FALLBACK_COLORS` by its name."""
    from matplotlib import colors

    style = estimator_style(method)
    derived = DERIVED_SERIES.get(str(method))
    if style is not None:
        base = style.color
    elif derived is not None:
        base = derived["color"]
    else:
        base = _fallback_color(method)
    rgb = np.asarray(colors.to_rgb(base))
    step = INITS.index(init) if init in INITS else (len(INITS) if init else 0)
    return colors.to_hex(rgb * (1.0 - INIT_DARKEN) ** step)


def method_style(method: str) -> dict[str, Any]:
    """Matplotlib style of ``method``'s lines (:attr:`EstimatorStyle.keywords` of :func:`estimator_style`; a
    line of :data:`DERIVED_SERIES`: its style; a method the registry does not know: round markers)."""
    style = estimator_style(method)
    if style is not None:
        return style.keywords
    derived = DERIVED_SERIES.get(str(method))
    if derived is not None:
        return {k: v for k, v in derived.items() if k != "label"}
    return {"marker": "o"}


def series_style(method: str, init: str = "") -> dict[str, Any]:
    """Matplotlib keywords of ``method``'s line from ``init``: :func:`series_color`, its style's marker
    (and emphasis, :func:`method_style`), the init's line style (:data:`INIT_LINESTYLES`; without an init
    the method's own, solid unless it is a dashed bound of :data:`DERIVED_SERIES`)."""
    style = method_style(method)
    style["color"] = series_color(method, init)
    style["linestyle"] = INIT_LINESTYLES.get(init, ":") if init else style.get("linestyle", "-")
    return style


def other_color(i: int) -> str:
    """The ``i``-th colour of lines that are no estimator's (:data:`OTHER_COLORS`, cycling)."""
    return OTHER_COLORS[int(i) % len(OTHER_COLORS)]


# --------------------------------------------------------------------------- robust axis limits
def robust_limits(
    values: Iterable[float],
    spans: Iterable[tuple[float, float]] = (),
    *,
    k: float = 3.0,
    reach: float = 2.0,
    pad: float = 0.08,
    log: bool = False,
) -> tuple[float, float] | None:
    """y-limits of a panel that one outlier cannot squeeze: the values within ``k`` interquartile ranges
    of the quartiles (all of them below 4 values), widened to each value beyond them that continues the
    data (nearest first, while it lies within ``reach`` times the range so far of it: a bias that halves
    with each K is kept whole, a value 50 ranges off is not), with the ``spans`` (error bars: (low, high))
    of the values kept, padded by ``pad`` of the range; ``None`` without a finite value.  A value outside
    is drawn at the edge (:func:`mark_clipped`).  With ``log`` (a log-scaled axis) all of it is done on
    the decimal logarithms of the positive values and spans (an MSE of 1e6 among ones near 1e-2 is an
    outlier by its order of magnitude)."""
    if log:
        with np.errstate(divide="ignore", invalid="ignore"):
            logged = robust_limits(
                np.log10(np.asarray([float(x) for x in values], dtype=float)),
                [(np.log10(max(float(a), 0.0)), np.log10(max(float(b), 0.0))) for a, b in spans],
                k=k,
                reach=reach,
                pad=pad,
            )
        return None if logged is None else (10.0 ** logged[0], 10.0 ** logged[1])
    v = np.asarray([float(x) for x in values], dtype=float)
    v = v[np.isfinite(v)]
    if not v.size:
        return None
    scale = 0.0
    if v.size >= 4:
        q1, q3 = np.percentile(v, [25, 75])
        scale = q3 - q1
        if scale <= 0:  # most values equal: a spread from the data's own scale
            scale = max(1e-9, 0.05 * float(np.median(np.abs(v))))
        lo_fence, hi_fence = q1 - k * scale, q3 + k * scale
    else:
        lo_fence, hi_fence = -math.inf, math.inf
    inside = v[(v >= lo_fence) & (v <= hi_fence)]
    lo, hi = float(inside.min()), float(inside.max())
    for u in np.sort(v[v > hi_fence]):  # beyond the fences: kept while each continues the data
        if u - hi > reach * max(hi - lo, scale):
            break
        hi = float(u)
    for u in np.sort(v[v < lo_fence])[::-1]:
        if lo - u > reach * max(hi - lo, scale):
            break
        lo = float(u)
    kept_lo, kept_hi = lo, hi
    for a, b in spans:
        a, b = float(a), float(b)
        if math.isfinite(a) and math.isfinite(b) and kept_lo <= (a + b) / 2 <= kept_hi:
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


def mark_flagged(
    ax, x, y, flagged, *, first: bool, limits: tuple[float, float] | None = None, label: str = "flagged"
) -> bool:
    """Circle the points of ``(x, y)`` whose ``flagged`` is true (:data:`FLAG_STYLE`), with ``label`` in
    the legend when ``first`` (once per panel); a point beyond ``limits`` is circled at the edge where
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
        label=label if first else None,
        zorder=7,
        clip_on=False,
        **FLAG_STYLE,
    )
    return True


class RobustY:
    """The y-axis of one panel, set the one way every figure sets it: collect the panel's drawn series
    (:meth:`add`) and reference levels (:meth:`add_level`), then :meth:`finish` sets robust limits from
    their bulk (:func:`robust_limits`, so that one estimate far off cannot squeeze the others), draws each
    point beyond them as a triangle at the panel's edge in its series' colour (:func:`mark_clipped`, with
    a legend entry saying so) and circles the flagged points (:func:`mark_flagged`, at the edge where a
    flagged point is clipped).

    ``log``: the axis is log-scaled (limits from the orders of magnitude); ``flag_label``: the legend text
    of the circles."""

    def __init__(self, ax, *, log: bool = False, flag_label: str = "flagged") -> None:
        self.ax = ax
        self.log = log
        self.flag_label = flag_label
        self._series: list[tuple[np.ndarray, np.ndarray, np.ndarray, str, np.ndarray, np.ndarray]] = []
        self._levels: list[float] = []

    def add(self, x, y, color: str, *, err=None, flagged=None, fit=None) -> None:
        """One drawn series: points ``(x, y)`` in ``color``, ``err`` the half-widths of its error bars or
        bands (their ends count toward the limits), ``flagged`` which points to circle, ``fit`` which
        points set the limits (default all; a learner's iteration 0, of the untrained model, does not:
        it is drawn at the edge where it lies beyond them)."""
        x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
        n = len(y)
        e = np.zeros(n) if err is None else np.broadcast_to(np.asarray(err, dtype=float), (n,)).copy()
        f = np.zeros(n, dtype=bool) if flagged is None else np.asarray(flagged, dtype=bool).ravel()
        fit = np.ones(n, dtype=bool) if fit is None else np.asarray(fit, dtype=bool).ravel()
        self._series.append((x, y, np.where(np.isfinite(e), e, 0.0), color, f, fit))

    def add_level(self, y: float) -> None:
        """A horizontal reference line at ``y`` (an exact value, a final estimate): within the limits
        unless it is an outlier itself."""
        self._levels.append(float(y))

    def limits(self) -> tuple[float, float] | None:
        """The robust limits of what was added (``None`` without a finite value); where the ``fit`` masks
        leave no point (only iteration 0 logged), from every point."""
        fits = [fit & np.isfinite(y) for _, y, _, _, _, fit in self._series]
        if not any(m.any() for m in fits):
            fits = [np.isfinite(y) for _, y, _, _, _, _ in self._series]
        values, spans = list(self._levels), []
        for (_, y, e, _, _, _), m in zip(self._series, fits):
            values += list(y[m])
            spans += [(v - h, v + h) for v, h in zip(y[m], e[m]) if h > 0]
        return robust_limits(values, spans, log=self.log)

    def finish(self) -> tuple[float, float] | None:
        """Set the limits on the axis, draw the clipped points at its edge and circle the flagged ones;
        returns the limits (``None``, and the axis untouched, without a finite value)."""
        limits = self.limits()
        if limits is None:
            return None
        clipped = flagged = False
        for x, y, _, color, f, _ in self._series:
            clipped = mark_clipped(self.ax, x, y, limits, color) or clipped
            flagged = mark_flagged(self.ax, x, y, f, first=not flagged, limits=limits, label=self.flag_label) or flagged
        set_robust_ylim(self.ax, limits, clipped)
        return limits


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
