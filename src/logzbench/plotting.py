"""Matplotlib helpers shared by the report and the repeated-trial figures, and training curves."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from .utils import atomic_path


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (imported lazily)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str | os.PathLike, dpi: int = 110) -> Path:
    """Write ``fig`` as PNG atomically (parent directories created) and close it."""
    path = Path(path)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=dpi, format="png")
    finally:
        pyplot().close(fig)
    return path


def plot_history(
    history: Sequence[Mapping[str, Any]], path: str | os.PathLike, title: str = "", step: str = "epoch"
) -> Path:
    """Training curves (every numeric per-epoch entry but time) vs ``step`` (a black-box learner's:
    ``iteration``), one panel each (PNG, atomic)."""
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
