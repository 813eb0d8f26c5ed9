"""Figures of the models a black-box learner trained (Li et al., AVIL: Figs. 3-6).

The drawing half of the learner report, apart from :mod:`.learners` (which reads the models and
makes their tables) so that each stays one concern: this module takes the
:class:`~.learners.LearnerModel` objects that :func:`~.learners.learner_models` found, their
histories, samples and parameters beside their records, and the final AIS estimates of the report's
summary (:func:`~.learners.final_ais`).  :func:`plot_learners` draws every figure into ``plots/``:

``plots/<model>_bounds.png`` (:func:`plot_bounds`)
    The learner's running bounds against their exact values (Fig. 3 for AVIL, Fig. 5a for NVIL; VCD:
    its free-energy bound and loss); without an exact ``log Z``, the final model's AIS estimate.
``plots/<dataset>_bounds_vs_ais.png`` (:func:`plot_bounds_vs_ais`)
    Where a dataset has an NVIL-trained and an AVIL-trained RBM: NVIL's upper and AVIL's lower
    bound of ``log Z`` against iterations, each with its exact ``log Z`` or its AIS estimate (Fig. 5).
``plots/<model>_samples.png`` (:func:`plot_samples`)
    Model samples (row 1) and decoder samples (row 2) as images (Figs. 4, 6c-d; Frey faces mapped
    back to pixels), where the samples file exists and the dataset has an image shape.
``plots/<model>_filters.png`` (:func:`plot_filters`)
    A learner-trained Gaussian RBM's first 40 filters (columns of ``W``) as images (Fig. 6b).

Each figure is also written as a PDF beside its PNG (:func:`logzbench.plotting.save_figure`).  The bounds
figures' y-limits leave iteration 0 out and are robust to an outlier, points beyond them drawn at the
panel's edge (:class:`logzbench.plotting.RobustY`, as in every figure); the exact values and AIS are
drawn in their estimators' colours (:func:`logzbench.plotting.series_color`), the learner's curves and
the models of a ``bounds_vs_ais`` panel in colours that are no estimator's
(:func:`logzbench.plotting.other_color`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..plotting import RobustY, other_color, pyplot, save_figure, series_color
from .compared import learner_label
from .learners import LearnerModel, _history, bounds_vs_ais_datasets, final_ais
from .methods import label
from .plots import _placeholder

__all__ = [
    "PANELS",
    "Panel",
    "plot_bounds",
    "plot_bounds_vs_ais",
    "plot_filters",
    "plot_learners",
    "plot_samples",
]


# --------------------------------------------------------------------------- bounds figures
@dataclass(frozen=True)
class Panel:
    """One panel of a bounds figure: history ``curves`` (column, legend; a ``<column>_stderr`` column
    is drawn as a ±1 s.e. band), the exact value's column ``truth``; with ``ais``, the final model's
    AIS log Z where the history has no exact one; with ``zero``, a line at 0."""

    title: str
    curves: tuple[tuple[str, str], ...]
    truth: str = ""
    truth_label: str = ""
    ais: bool = False
    zero: bool = False


def _loss(letter: str) -> Panel:
    return Panel(f"({letter}) model loss", (("model_loss", "loss"),), zero=True)


#: the panels of each learner's bounds figure (AVIL: the paper's Fig. 3; NVIL: Fig. 5a)
PANELS: dict[str, tuple[Panel, ...]] = {
    "avil": (
        Panel(
            "(a) free energy",
            (("free_energy_bound", "encoder bound G(v)"), ("valid_free_energy_bound", "G(v), validation")),
            "exact_free_energy",
            "exact F(v)",
        ),
        Panel("(b) decoder entropy", (("entropy_bound", "entropy bound"),), "exact_entropy", "exact H(q)"),
        Panel("(c) log Z", (("log_z_bound", "decoder lower bound"),), "exact_log_z", "exact log Z", ais=True),
        _loss("d"),
    ),
    "nvil": (
        Panel(
            "(a) log Z",
            (("log_z_upper_bound", "chi-square upper bound"), ("log_z_importance", "importance estimate")),
            "exact_log_z",
            "exact log Z",
            ais=True,
        ),
        _loss("b"),
    ),
    "vcd": (
        Panel(
            "(a) free energy",
            (
                ("free_energy_bound", "encoder bound G(v), data"),
                ("valid_free_energy_bound", "G(v), validation"),
                ("negative_free_energy_bound", "G(v), negative samples"),
            ),
            "exact_free_energy",
            "exact F(v)",
        ),
        _loss("b"),
    ),
}


def _series(hist: pd.DataFrame, col: str) -> np.ndarray | None:
    if col not in hist:
        return None
    y = pd.to_numeric(hist[col], errors="coerce").to_numpy(dtype=float)
    return y if np.isfinite(y).any() else None


def _fit(x: np.ndarray) -> np.ndarray:
    """Which points of a history set a panel's y-limits: those after iteration 0 (the untrained
    model's bounds are far off and would flatten the curves; they are drawn at the edge instead)."""
    return x > 0


def _ais_line(ax, ais: Mapping[str, Any], color: str, text: str, robust: RobustY | None = None) -> bool:
    """The final model's AIS log Z as a horizontal line; whether there was one."""
    lz = float(ais.get("log_z", float("nan")))
    if not math.isfinite(lz):
        return False
    ax.axhline(lz, color=color, linestyle=":", linewidth=1.4, label=f"{text}{label('ais')} (K={ais['K']}, final)")
    if robust is not None:
        robust.add_level(lz)
    return True


def _draw_panel(
    ax,
    hist: pd.DataFrame,
    panel: Panel,
    ais: Mapping[str, Any],
    *,
    color: str | None = None,
    prefix: str = "",
    robust: RobustY | None = None,
) -> bool:
    """Draw ``panel`` of one model's history on ``ax``; whether anything was drawn.  With ``color`` (one
    model among several) all its curves are in it, its exact value dashed and its AIS dotted; without,
    each curve in its own :func:`~logzbench.plotting.other_color`, the exact value and AIS in their
    estimators' colours.  Each series drawn is added to ``robust`` (its y-limits, :class:`RobustY`)."""
    x = (
        pd.to_numeric(hist["iteration"], errors="coerce").to_numpy(dtype=float)
        if "iteration" in hist
        else np.arange(len(hist), dtype=float)
    )
    robust = robust if robust is not None else RobustY(ax)
    drawn = False
    for i, (col, text) in enumerate(panel.curves):
        y = _series(hist, col)
        if y is None:
            continue
        style = {"color": color, "linestyle": ("-", "--", "-.")[i % 3]} if color else {"color": other_color(i)}
        ax.plot(x, y, marker="o", markersize=2.5, linewidth=1.3, label=prefix + text, **style)
        se = _series(hist, f"{col}_stderr")
        if se is not None:
            ax.fill_between(x, y - se, y + se, color=style["color"], alpha=0.2, linewidth=0)
        robust.add(x, y, style["color"], err=se, fit=_fit(x))
        drawn = True
    truth = _series(hist, panel.truth) if panel.truth else None
    exact_color = color or series_color("exact")
    if truth is not None:
        robust.add(x, truth, exact_color, fit=_fit(x))
        ax.plot(
            x,
            truth,
            color=exact_color,
            linestyle="--" if color else "-",
            linewidth=1.6,
            alpha=0.9,
            label=prefix + panel.truth_label,
        )
        drawn = True
    if panel.ais:
        ais_color = color or series_color("ais")
        y = _series(hist, "ais_log_z")
        if y is not None:  # the AIS monitor during training (Fig. 5), where it ran
            ok = np.isfinite(y)
            se = _series(hist, "ais_log_z_stderr")
            robust.add(x[ok], y[ok], ais_color, err=None if se is None else se[ok], fit=_fit(x[ok]))
            ax.errorbar(
                x[ok],
                y[ok],
                yerr=None if se is None else se[ok],
                color=ais_color,
                linestyle=":",
                marker="s",
                markersize=3,
                linewidth=1.3,
                capsize=2,
                label=f"{prefix}{label('ais')} during training",
            )
            drawn = True
        elif truth is None:  # no reference during training: the final model's AIS
            drawn = _ais_line(ax, ais, ais_color, prefix, robust) or drawn
    if panel.zero and drawn:
        ax.axhline(0.0, color="grey", linewidth=0.8, alpha=0.6)
    return drawn


def _finish_panel(ax, title: str, drawn: bool) -> None:
    if drawn:
        ax.legend(fontsize=7, loc="best")
    else:
        ax.text(0.5, 0.5, "not logged", transform=ax.transAxes, ha="center", va="center")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("iteration", fontsize=8)
    ax.set_ylabel("nats", fontsize=8)
    ax.grid(True, alpha=0.3)


def _title(m: LearnerModel) -> str:
    arch = "-".join(str(h) for h in m.hidden_sizes)
    ablation = f", {m.ablation.replace('_', ' ')}" if m.ablation else ""
    return f"{m.model}: {m.family.upper()} ({arch} hidden) by {learner_label(m.learner)}{ablation} on {m.source}"


def plot_bounds(m: LearnerModel, hist: pd.DataFrame | None, ais: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """``<model>_bounds.png``: the panels :data:`PANELS` of ``m``'s learner from its history ``hist``
    (one row per logged iteration), ``ais`` the final model's estimate (:func:`final_ais`); a
    placeholder without a history or for a learner without panels.  Each panel's y-limits leave
    iteration 0 out and are robust to an outlier (:class:`RobustY`; points beyond drawn at the edge)."""
    panels = PANELS.get(m.learner)
    if hist is None or hist.empty or panels is None:
        why = "no training history" if panels is not None else f"no bounds figure for learner {m.learner!r}"
        return _placeholder(f"{m.model}: {why}", path, (6.4, 3.0))
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(3.7 * len(panels), 3.4), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        robust = RobustY(ax)
        drawn = _draw_panel(ax, hist, panel, ais, robust=robust)
        robust.finish()
        _finish_panel(ax, panel.title, drawn)
    fig.suptitle(_title(m), fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)


def plot_bounds_vs_ais(
    dataset: str,
    entries: Sequence[tuple[LearnerModel, pd.DataFrame | None, Mapping[str, Any]]],
    path: str | os.PathLike,
) -> Path:
    """``<dataset>_bounds_vs_ais.png`` (Fig. 5): (a) the NVIL RBMs' upper bound and (b) the AVIL RBMs'
    lower bound of log Z against iterations, each model in its own colour with its exact log Z
    (dashed) or its final AIS estimate (dotted); the models' colours are no estimator's
    (:func:`~logzbench.plotting.other_color`).  ``entries``: (model, history, :func:`final_ais`).
    The y-limits leave iteration 0 out and are robust to an outlier (:class:`RobustY`): iteration 0's
    bounds, of the untrained model, are drawn at the edge instead of flattening the curves."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.6), squeeze=False)
    n_each = {lrn: sum(m.learner == lrn for m, _, _ in entries) for lrn in ("nvil", "avil")}
    for ax, (letter, lrn) in zip(axes[0], (("a", "nvil"), ("b", "avil"))):
        drawn = False
        robust = RobustY(ax)
        for i, (m, hist, ais) in enumerate([e for e in entries if e[0].learner == lrn]):
            if hist is None or hist.empty:
                continue
            panel = PANELS[lrn][0] if lrn == "nvil" else PANELS[lrn][2]
            panel = Panel(panel.title, panel.curves[:1], panel.truth, panel.truth_label, ais=True)
            prefix = f"{m.model}: " if n_each[lrn] > 1 else ""
            drawn = _draw_panel(ax, hist, panel, ais, color=other_color(i), prefix=prefix, robust=robust) or drawn
        robust.finish()
        bound = "upper" if lrn == "nvil" else "lower"
        _finish_panel(ax, f"({letter}) {learner_label(lrn)}: {bound} bound of log Z", drawn)
    fig.suptitle(f"{dataset}: log Z bounds of the black-box learners vs exact / AIS", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)


# --------------------------------------------------------------------------- images
def _mosaic(images: np.ndarray, ncol: int) -> np.ndarray:
    """Tile ``images`` (n, h, w) into one array, ``ncol`` across, NaN between them."""
    n, h, w = images.shape
    nrow = max(1, -(-n // ncol))
    out = np.full((nrow * (h + 1) - 1, ncol * (w + 1) - 1), np.nan)
    for k in range(n):
        r, c = divmod(k, ncol)
        out[r * (h + 1) : r * (h + 1) + h, c * (w + 1) : c * (w + 1) + w] = images[k]
    return out


def _show(ax, mosaic: np.ndarray, vmin: float, vmax: float, text: str) -> None:
    cmap = pyplot().get_cmap("gray").with_extremes(bad="white")
    ax.imshow(np.ma.masked_invalid(mosaic), cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest")
    ax.set_title(text, fontsize=9)
    ax.set_axis_off()


def _as_images(rows: np.ndarray, m: LearnerModel) -> tuple[np.ndarray, float, float]:
    """Rows of the model's visible units as images of its dataset and their display range: Frey faces
    mapped back to 8-bit pixels (the dataset's ``mean`` and ``sd``), binary means on [0, 1]."""
    rows = np.asarray(rows, dtype=np.float64)
    if m.source == "frey" and m.data is not None:
        from ..data.frey import load_standardization, to_images

        return to_images(rows, load_standardization(m.data)).astype(np.float64), 0.0, 255.0
    images = rows.reshape(len(rows), *m.image_shape)
    lo, hi = float(np.nanmin(images)), float(np.nanmax(images))
    return images, *((0.0, 1.0) if lo >= 0.0 and hi <= 1.0 else (lo, hi))


def plot_samples(m: LearnerModel, samples: Mapping[str, np.ndarray], path: str | os.PathLike, n: int = 16) -> Path:
    """``<model>_samples.png`` (Figs. 4, 6c-d): up to ``n`` visible means of the model's Gibbs chains
    (row 1, ``model_mean_v``) and of the decoder's ancestral draws (row 2, ``decoder_mean_v``; absent
    for VCD), as images of the dataset's ``image_shape``."""
    # a DBM's chains end on visible states (figure_samples), the others' on E[v | h]
    model_text = "visible units" if m.family == "dbm" else "mean of v"
    rows = [
        (key, text)
        for key, text in (
            ("model_mean_v", f"{m.family.upper()} (Gibbs sampling): {model_text}"),
            ("decoder_mean_v", "variational decoder (ancestral sampling): mean of v"),
        )
        if key in samples
    ]
    if not rows:
        return _placeholder(f"{m.model}: no model_mean_v / decoder_mean_v in its samples", path, (6.4, 3.0))
    n = max(1, min([n, *(len(samples[key]) for key, _ in rows)]))
    plt = pyplot()
    h, w = m.image_shape
    fig, axes = plt.subplots(
        len(rows), 1, figsize=(max(4.0, min(12.0, 0.75 * n * w / h)), 1.1 * len(rows) + 0.5), squeeze=False
    )
    for ax, (key, text) in zip(axes[:, 0], rows):
        images, lo, hi = _as_images(np.asarray(samples[key])[:n], m)
        _show(ax, _mosaic(images, n), lo, hi, text)
    fig.suptitle(_title(m), fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)


def plot_filters(m: LearnerModel, W: np.ndarray, path: str | os.PathLike, n: int = 40, ncol: int = 10) -> Path:
    """``<model>_filters.png`` (Fig. 6b): the first ``n`` columns of ``W`` (visible x hidden) as images,
    each scaled to its own range."""
    W = np.asarray(W, dtype=np.float64)[:, :n]
    images = W.T.reshape(W.shape[1], *m.image_shape)
    lo = images.min(axis=(1, 2), keepdims=True)
    span = images.max(axis=(1, 2), keepdims=True) - lo
    images = (images - lo) / np.where(span > 0, span, 1.0)
    plt = pyplot()
    nrow = max(1, -(-len(images) // ncol))
    h, w = m.image_shape
    fig, ax = plt.subplots(figsize=(min(12.0, 0.6 * ncol * w / h + 0.4), 0.6 * nrow + 0.7))
    _show(ax, _mosaic(images, ncol), 0.0, 1.0, f"{m.model}: the first {len(images)} filters (columns of W)")
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)


def plot_learners(
    summary: pd.DataFrame, models: Sequence[LearnerModel], plot_dir: str | os.PathLike
) -> dict[str, Path]:
    """Every learner figure of ``models`` into ``plot_dir`` (``summary``: the report's summary over
    seeds, for the final AIS estimates): {file stem: path}.  ``<model>_bounds``
    for each model; ``<dataset>_bounds_vs_ais`` for each dataset of :func:`bounds_vs_ais_datasets`;
    ``<model>_samples`` where the samples file exists and the dataset has an image shape;
    ``<model>_filters`` for a Gaussian RBM whose dataset has one."""
    plot_dir = Path(plot_dir)
    out: dict[str, Path] = {}
    hists = {m.model: _history(m) for m in models}
    ais = {m.model: final_ais(summary, m.model) for m in models}
    for m in models:
        out[f"{m.model}_bounds"] = plot_bounds(m, hists[m.model], ais[m.model], plot_dir / f"{m.model}_bounds.png")
    for dataset, ms in bounds_vs_ais_datasets(models).items():
        out[f"{dataset}_bounds_vs_ais"] = plot_bounds_vs_ais(
            dataset, [(m, hists[m.model], ais[m.model]) for m in ms], plot_dir / f"{dataset}_bounds_vs_ais.png"
        )
    for m in models:
        if m.image_shape is None:
            continue
        n_pixels = int(np.prod(m.image_shape))
        samples, params = m.file(".samples.npz"), m.file(".npz")
        if samples is not None:
            with np.load(samples, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files if z[k].ndim == 2 and z[k].shape[1] == n_pixels}
            out[f"{m.model}_samples"] = plot_samples(m, arrays, plot_dir / f"{m.model}_samples.png")
        if m.family == "grbm" and params is not None:
            with np.load(params, allow_pickle=False) as z:
                W = z["W"] if "W" in z.files and z["W"].shape[0] == n_pixels else None
            if W is not None:
                out[f"{m.model}_filters"] = plot_filters(m, W, plot_dir / f"{m.model}_filters.png")
    return out
