"""The per-model diagnostics in the report: tables and figures from ``results/diagnostics/<model>.json``
and ``<model>_samples.npz`` (written by :func:`logzbench.pipeline.diagnose.diagnose_job`).

``table_hidden_mass.csv`` (:func:`make_table_hidden_mass`)
    One row per RBM: the probability under ``p(h)`` of its top-1, top-10 and top-100 hidden
    configurations (RAISE Sec. 5.1), ``method`` ``exact`` (enumerated) or ``samples`` (frequencies among
    ``n_samples`` draws, with binomial standard errors ``top<k>_se``), and ``H``.
``table_per_class.csv`` (:func:`make_table_per_class`)
    One row per model and class of the test rows, and one ``all`` row per model: the count, the mean test
    log-likelihood and the standard error of the mean over rows, with the ``log Z`` used, where it comes
    from and its standard error (shared by every row of the model).
``plots/<model>_samples.png``, ``plots/<model>_annealed_samples.png``
    The RBM's samples and the samples of its annealing model ``p_ann`` (RAISE Figs. 5-6), by
    :func:`.samples.plot_sample_grid`.
``plots/<model>_filters.png``
    A continuous model's learned filters or bases (HAIS Fig. 1) in pixels, by :func:`.samples.plot_filters`.

Which models get which figure is :func:`logzbench.pipeline.diagnose.figure_names` (the workflow declares
the same); a figure whose arrays are missing (a dataset without an image shape) is a placeholder
naming why.  Both tables are written with their header only when there are no such rows.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..pipeline.diagnose import TOP
from ..utils import write_csv_atomic
from .plots import _placeholder
from .samples import image_shape, plot_filters, plot_sample_grid

__all__ = [
    "HIDDEN_MASS_COLUMNS",
    "PER_CLASS_COLUMNS",
    "load_diagnostics",
    "make_table_hidden_mass",
    "make_table_per_class",
    "plot_diagnostics",
    "write_diagnostics",
]

HIDDEN_MASS_COLUMNS = [
    "model",
    "method",
    "n_samples",
    *(f"top{k}" for k in TOP),
    "H",
    *(f"top{k}_se" for k in TOP),
]
PER_CLASS_COLUMNS = ["model", "class", "n", "mean_test_ll", "se", "log_z_source", "log_z", "log_z_se"]


def load_diagnostics(paths: Iterable[str | os.PathLike]) -> list[dict[str, Any]]:
    """The diagnostics records (``<model>.json``), each with ``_arrays``: the path of its
    ``<model>_samples.npz`` beside it."""
    out = []
    for p in paths:
        p = Path(p)
        with open(p) as f:
            rec = json.load(f)
        rec["_arrays"] = str(p.with_name(f"{p.stem}_samples.npz"))
        out.append(rec)
    return out


def _num(x) -> float:
    return float("nan") if x is None else float(x)


def make_table_hidden_mass(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """``table_hidden_mass.csv``: one row per record with a hidden mass (:data:`HIDDEN_MASS_COLUMNS`;
    ``n_samples`` and the standard errors empty where the mass was enumerated)."""
    rows = []
    for r in records:
        hm = r.get("hidden_mass") or {}
        if "method" not in hm:
            continue
        rows.append(
            {
                "model": r["model"],
                "method": hm["method"],
                "n_samples": hm.get("n_samples"),
                **{f"top{k}": _num(hm.get(f"top{k}")) for k in TOP},
                "H": hm.get("H"),
                **{f"top{k}_se": _num(hm.get(f"top{k}_se")) for k in TOP},
            }
        )
    df = pd.DataFrame(rows, columns=HIDDEN_MASS_COLUMNS)
    return df.astype({"n_samples": "Int64", "H": "Int64"}) if len(df) else df


def make_table_per_class(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """``table_per_class.csv``: per record with per-class log-likelihoods, one row per class and an ``all``
    row (:data:`PER_CLASS_COLUMNS`)."""
    rows = []
    for r in records:
        pc = r.get("per_class") or {}
        if "classes" not in pc:
            continue
        common = {
            "log_z_source": pc.get("log_z_source", ""),
            "log_z": _num(pc["log_z"]),
            "log_z_se": _num(pc["log_z_se"]),
        }
        for c in [*pc["classes"], pc["overall"]]:
            rows.append(
                {
                    "model": r["model"],
                    "class": str(c["class"]),
                    "n": int(c["n"]),
                    "mean_test_ll": _num(c["mean_test_ll"]),
                    "se": _num(c["se"]),
                    **common,
                }
            )
    return pd.DataFrame(rows, columns=PER_CLASS_COLUMNS)


def _image_shape(rec: Mapping[str, Any], n_features: int) -> tuple[int, int] | None:
    """The record's dataset image shape where it holds ``n_features`` pixels, else a square one, else ``None``."""
    shape = rec.get("image_shape")
    if shape and int(np.prod(shape)) == n_features:
        return tuple(int(s) for s in shape)
    return image_shape(n_features)


def plot_diagnostics(records: Sequence[Mapping[str, Any]], plot_dir: str | os.PathLike) -> dict[str, Path]:
    """Draw every record's figures (its ``figures``: ``samples``, ``annealed_samples``, ``filters``) into
    ``plot_dir`` as ``<model>_<name>.png``; ``{file stem: path}``."""
    plot_dir = Path(plot_dir)
    out: dict[str, Path] = {}
    for r in records:
        names = list(r.get("figures") or [])
        if not names:
            continue
        arrays: dict[str, np.ndarray] = {}
        if Path(r["_arrays"]).is_file():
            with np.load(r["_arrays"], allow_pickle=False) as npz:
                arrays = {k: np.asarray(npz[k]) for k in npz.files}
        model = r["model"]
        for name in names:
            path = plot_dir / f"{model}_{name}.png"
            stem = f"{model}_{name}"
            x = arrays.get(name)
            shape = _image_shape(r, x.shape[1]) if x is not None and x.ndim == 2 and x.size else None
            if shape is None:
                why = (r.get(name) or {}).get("not_available") or (r.get("samples") or {}).get("not_available")
                text = f"{model}: no {name.replace('_', ' ')} ({why or 'no image shape'})"
                out[stem] = _placeholder(text, path, (6.4, 2.0))
            elif name == "filters":
                info = r.get("filters") or {}
                title = f"{model}: learned {info.get('kind', 'filters')} ({info.get('space', '')})"
                out[stem] = plot_filters(x, shape, path, title=title)
            else:
                info = r.get(name) or {}
                what = "p_ann" if name == "annealed_samples" else "the model"
                extra = f", K={info.get('K')}, init {info.get('init')}" if name == "annealed_samples" else ""
                burn = f", burn-in {info['burn_in']}" if info.get("method") == "gibbs" else ""
                title = f"{model}: {len(x)} samples of {what} ({info.get('method', '?')}{burn}{extra})"
                out[stem] = plot_sample_grid(x, shape, path, title=title)
    return out


def write_diagnostics(
    diagnostics: Iterable[str | os.PathLike], out_dir: str | os.PathLike, *, plots: bool = True
) -> dict[str, Any]:
    """``table_hidden_mass.csv``, ``table_per_class.csv`` and the figures of the diagnostics records
    ``diagnostics`` (``<model>.json`` paths) into ``out_dir`` (figures in ``out_dir/plots``), atomically.

    Returns
    -------
    dict
        ``table_hidden_mass``, ``table_per_class`` (paths), ``diagnostic_plots`` (``{file stem: path}``) and
        the tables' rows as JSON-friendly lists (``hidden_mass``, ``per_class``).
    """
    out = Path(out_dir)
    records = load_diagnostics(diagnostics)
    hm = make_table_hidden_mass(records)
    pc = make_table_per_class(records)
    paths: dict[str, Any] = {
        "table_hidden_mass": write_csv_atomic(out / "table_hidden_mass.csv", hm, float_format="%.6g"),
        "table_per_class": write_csv_atomic(out / "table_per_class.csv", pc, float_format="%.10g"),
        "diagnostic_plots": plot_diagnostics(records, out / "plots") if plots else {},
    }
    paths["hidden_mass"] = _json_rows(hm)
    paths["per_class"] = _json_rows(pc)
    return paths


def _json_rows(df: pd.DataFrame) -> list[dict[str, Any]]:
    def clean(v):
        if v is None or (not isinstance(v, str) and pd.isna(v)):
            return None
        return v.item() if hasattr(v, "item") else v

    return [{k: clean(v) for k, v in row.items()} for row in df.to_dict(orient="records")]
