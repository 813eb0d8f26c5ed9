"""Brackets ``[lower, upper]`` of the sandwich and of bidirectional Monte Carlo (registry bound ``bracket``):
``table_bracket.csv``, ``plots/<model>_bracket.png`` and the bracket columns of ``table_continuous.csv``.

A bracket estimate's record holds ``result.extra.bracket`` (:func:`logzbench.estimators.bracket.make_bracket`
and the sandwich's stopping rule: ``<q>_lower`` / ``<q>_upper`` of each bracketed quantity ``<q>`` in
``log_z`` and ``mean_log_likelihood``, each end's estimator, guarantee and Markov slack, ``confidence``,
``target_width``, ``width_reached``, the K reached, ``total_sweeps`` and the ``history`` of its rounds of K
doubling); :meth:`EstimateResult.to_dict` also copies these keys to the top of ``result``, which is read
where ``extra`` has none.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..estimators.bracket import QUANTITIES
from ..plotting import RobustY, pyplot, save_figure, series_color, series_label
from ..tracking import estimate_bracket
from .methods import BRACKET_METHODS
from .plots import _placeholder
from .records import as_float, int_or_none, normalize_record

#: columns of ``table_bracket.csv``: one row per bracket estimate and bracketed quantity
BRACKET_COLUMNS = [
    "model",
    "dataset",
    "family",
    "estimator",
    "method",
    "seed",
    "quantity",
    "data",
    "lower",
    "upper",
    "width",
    "lower_estimator",
    "upper_estimator",
    "lower_guarantee",
    "upper_guarantee",
    "lower_guaranteed",
    "upper_guaranteed",
    "lower_slack",
    "upper_slack",
    "confidence",
    "target_width",
    "width_reached",
    "K",
    "total_sweeps",
    "exact",
    "contains_exact",
    "lower_estimate",
    "upper_estimate",
    "noise_z",
    "crossed",
    "crossed_by",
    "stopped_by",
]
#: the bracket columns of ``table_continuous.csv`` (the mean test log-likelihood's; see :func:`continuous_brackets`)
CONTINUOUS_BRACKET_COLUMNS = ["bracket_lower", "bracket_upper", "bracket_width", "bracket_estimator"]
#: axis labels of the bracketed quantities
QUANTITY_LABELS = {"log_z": "log Z (nats)", "mean_log_likelihood": "mean log-likelihood (nats)"}


def is_bracket_record(rec: Mapping[str, Any]) -> bool:
    """Whether an estimate record holds a bracket (its method is a bracket estimator, or it has one)."""
    res = rec.get("result", rec)
    method = str(rec.get("method") or res.get("estimator") or "").lower()
    return method in BRACKET_METHODS or bool(estimate_bracket(rec))


def _bool_or_none(v: Any) -> bool | None:
    return bool(v) if isinstance(v, (bool, np.bool_)) else None


def _str_or_empty(v: Any) -> str:
    return "" if v is None else str(v)


def bracket_data(rec: Mapping[str, Any]) -> str:
    """What a record's mean log-likelihood bracket is about: ``simulated`` (BDMC's points drawn from the
    model) or ``test`` (the test rows)."""
    extra = rec.get("result", rec).get("extra") or {}
    return "simulated" if extra.get("data") == "simulated" else "test"


def _exact_values(per_run: pd.DataFrame | None) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """The exact estimator's ``log Z`` per model and mean test log-likelihood per (model, test set)."""
    if per_run is None or per_run.empty:
        return {}, {}
    ex = per_run[per_run["method"] == "exact"]
    log_z = {m: float(v) for m, v in ex.groupby("model")["log_z"].mean().items() if math.isfinite(float(v))}
    ll = {
        k: float(v)
        for k, v in ex.groupby(["model", "test_set"])["mean_test_ll"].mean().items()
        if math.isfinite(float(v))
    }
    return log_z, ll


def _crossing(flag: Any, lo_est: float, hi_est: float, lower: float, upper: float) -> tuple[bool | None, float]:
    """``(crossed, crossed_by)`` of one bracket: whether its raw estimates cross and by how many nats (0 where
    they do not, NaN where unknown).  The record's ``<q>_crossed`` says so where true; else the raw estimates
    are compared, else the reported ends (a record written before brackets spanned crossed ends, whose
    ``<q>_crossed`` meant ends that cross even widened by their noise)."""
    gap = lo_est - hi_est if math.isfinite(lo_est) and math.isfinite(hi_est) else lower - upper
    if isinstance(flag, (bool, np.bool_)) and flag:
        crossed: bool | None = True
    else:
        crossed = bool(gap > 0) if math.isfinite(gap) else None
    if not crossed:
        return crossed, 0.0 if crossed is False else math.nan
    return True, float(gap) if gap > 0 else math.nan


def _rows_of(
    rec: Mapping[str, Any], src: str | None, exact_z: Mapping[str, float], exact_ll: Mapping[tuple[str, str], float]
) -> list[dict[str, Any]]:
    """The table rows of one bracket record: one per bracketed quantity."""
    b = estimate_bracket(rec)
    if not b:
        return []
    row = normalize_record(rec, src)
    res = rec.get("result", rec)
    extra = res.get("extra") or {}
    data = bracket_data(rec)
    K = int_or_none(b.get("K"))
    if K is None:  # a bracket at one K (BDMC): the record's K
        K = int_or_none((res.get("settings") or {}).get("K", rec.get("K")))
    total = as_float(b.get("total_sweeps")) if b.get("total_sweeps") is not None else as_float(res.get("total_sweeps"))
    out = []
    for q in QUANTITIES:
        if b.get(f"{q}_lower") is None and b.get(f"{q}_upper") is None:
            continue
        lower, upper = as_float(b.get(f"{q}_lower")), as_float(b.get(f"{q}_upper"))
        width = as_float(b.get(f"{q}_width")) if b.get(f"{q}_width") is not None else upper - lower
        lo_est, hi_est = as_float(b.get(f"{q}_lower_estimate")), as_float(b.get(f"{q}_upper_estimate"))
        crossed, crossed_by = _crossing(b.get(f"{q}_crossed"), lo_est, hi_est, lower, upper)
        if q == "log_z":
            exact = exact_z.get(row["model"], float("nan"))
        elif data == "simulated":  # BDMC: the exact mean over its own simulated points, where a closed form has it
            exact = as_float(extra.get("exact_mean_log_likelihood"))
        else:
            exact = exact_ll.get((row["model"], row["test_set"]), float("nan"))
        contains = bool(lower <= exact <= upper) if all(math.isfinite(x) for x in (lower, upper, exact)) else None
        out.append(
            {
                "model": row["model"],
                "dataset": row["dataset"],
                "family": row["family"],
                "estimator": row["estimator"],
                "method": row["method"],
                "seed": row["seed"],
                "quantity": q,
                "data": "test" if q == "log_z" else data,
                "lower": lower,
                "upper": upper,
                "width": width,
                "lower_estimator": _str_or_empty(b.get(f"{q}_lower_estimator")),
                "upper_estimator": _str_or_empty(b.get(f"{q}_upper_estimator")),
                "lower_guarantee": _str_or_empty(b.get(f"{q}_lower_guarantee")),
                "upper_guarantee": _str_or_empty(b.get(f"{q}_upper_guarantee")),
                "lower_guaranteed": _bool_or_none(b.get(f"{q}_lower_guaranteed")),
                "upper_guaranteed": _bool_or_none(b.get(f"{q}_upper_guaranteed")),
                "lower_slack": as_float(b.get(f"{q}_lower_slack")),
                "upper_slack": as_float(b.get(f"{q}_upper_slack")),
                "confidence": as_float(b.get("confidence")),
                "target_width": as_float(b.get("target_width")),
                "width_reached": _bool_or_none(b.get("width_reached")),
                "K": K,
                "total_sweeps": total,
                "exact": exact,
                "contains_exact": contains,
                # the raw estimates, where the ends are widened by their noise (noise_z standard errors)
                "lower_estimate": lo_est,
                "upper_estimate": hi_est,
                "noise_z": as_float(b.get("noise_z")),
                "crossed": crossed,
                "crossed_by": crossed_by,
                # what ended a sandwich short of its width: max_sweeps or its time budget (empty: reached, or
                # a record that does not say)
                "stopped_by": _str_or_empty(b.get("stopped_by")),
            }
        )
    return out


def make_table_bracket(
    records: Sequence[tuple[Mapping[str, Any], str | None]], per_run: pd.DataFrame | None = None
) -> pd.DataFrame:
    """``table_bracket.csv``: one row per bracket estimate (sandwich, BDMC) and bracketed quantity
    (:data:`BRACKET_COLUMNS`).

    ``records`` are ``(estimate record, source file)`` pairs (:func:`.records.find_records`); ``per_run`` (the
    per-run table) gives the exact values: the ``exact`` estimator's log Z of the model and its mean test
    log-likelihood on the same test rows; a mean log-likelihood bracket of BDMC's simulated points takes the
    exact mean over those points that the record holds (a closed form), else none.  ``contains_exact`` is
    ``lower <= exact <= upper`` (empty where the exact value is unknown); ``width`` is ``upper - lower``;
    ``crossed``: the raw estimates cross (the bracket is then the span of both ends, never a reached one), by
    ``crossed_by`` nats; ``stopped_by``: what stopped a sandwich short of its width (``max_sweeps``,
    ``time_budget``).  Sorted by model, estimator, quantity, seed, K."""
    exact_z, exact_ll = _exact_values(per_run)
    rows = [r for rec, src in records if is_bracket_record(rec) for r in _rows_of(rec, src, exact_z, exact_ll)]
    t = pd.DataFrame(rows, columns=BRACKET_COLUMNS)
    for c in ("seed", "K"):
        t[c] = pd.array(t[c], dtype="Int64")
    for c in ("lower_guaranteed", "upper_guaranteed", "width_reached", "contains_exact", "crossed"):
        t[c] = pd.array(t[c], dtype="boolean")
    return t.sort_values(
        ["model", "estimator", "quantity", "seed", "K"], kind="stable", na_position="first"
    ).reset_index(drop=True)


# --------------------------------------------------------------------------- the bracket against its cost
def _round_crossed(h: Mapping[str, Any], quantity: str) -> bool:
    """Whether one round's (or one record's) raw estimates of ``quantity`` cross: its ``<q>_crossed``, else
    its raw estimates compared."""
    flag = h.get(f"{quantity}_crossed")
    if isinstance(flag, (bool, np.bool_)):
        return bool(flag)
    lo, hi = as_float(h.get(f"{quantity}_lower_estimate")), as_float(h.get(f"{quantity}_upper_estimate"))
    return bool(lo > hi) if math.isfinite(lo) and math.isfinite(hi) else False


def _history_points(
    recs: Sequence[tuple[Mapping[str, Any], str | None]], quantity: str
) -> list[tuple[str, str, int | None, pd.DataFrame]]:
    """``(method, estimator, seed, points)`` for each bracket estimator and seed of one model: ``points`` has
    ``total_sweeps``, ``lower``, ``upper`` sorted by ``total_sweeps``: the rounds of the record's ``history``
    (the sandwich), else one point per record (BDMC: one per K of its sweep)."""
    groups: dict[tuple[str, str, int | None], list[dict[str, float]]] = {}
    for rec, src in recs:
        b = estimate_bracket(rec)
        if not b:
            continue
        row = normalize_record(rec, src)
        key = (row["method"], row["estimator"], row["seed"])
        hist = b.get("history")
        if isinstance(hist, list) and hist:
            pts = [
                {
                    "total_sweeps": as_float(h.get("total_sweeps")),
                    "lower": as_float(h.get(f"{quantity}_lower")),
                    "upper": as_float(h.get(f"{quantity}_upper")),
                    "crossed": _round_crossed(h, quantity),
                }
                for h in hist
                if isinstance(h, Mapping)
            ]
        else:
            total = b.get("total_sweeps", (rec.get("result", rec)).get("total_sweeps"))
            pts = [
                {
                    "total_sweeps": as_float(total),
                    "lower": as_float(b.get(f"{quantity}_lower")),
                    "upper": as_float(b.get(f"{quantity}_upper")),
                    "crossed": _round_crossed(b, quantity),
                }
            ]
        groups.setdefault(key, []).extend(pts)
    out = []
    for (method, est, seed), pts in sorted(
        groups.items(), key=lambda kv: tuple("" if x is None else str(x) for x in kv[0])
    ):
        df = pd.DataFrame(pts, columns=["total_sweeps", "lower", "upper", "crossed"])
        df = df[
            np.isfinite(df["total_sweeps"])
            & (df["total_sweeps"] > 0)
            & (np.isfinite(df["lower"]) | np.isfinite(df["upper"]))
        ]
        if not df.empty:
            out.append((method, est, seed, df.sort_values("total_sweeps", kind="stable").reset_index(drop=True)))
    return out


#: legend text of the circle on a bracket end that misses the exact value (or of ends that cross)
BRACKET_FLAG_LABEL = "flagged: misses the exact value or the ends cross"


def _exact_at(table: pd.DataFrame | None, model: str, quantity: str, est: str, seed, x: np.ndarray) -> np.ndarray:
    """The exact value at each point ``x`` (``total_sweeps``) of one bracket line of ``quantity`` on
    ``model`` from ``table`` (:func:`make_table_bracket`: the test rows', or BDMC's own simulated points',
    which differ per record): the row of the same estimator, seed and ``total_sweeps``, else the
    estimator and seed's; NaN where the table does not know it."""
    out = np.full(len(x), np.nan)
    if table is None or not len(table):
        return out
    ex = table[
        (table["model"] == model)
        & (table["quantity"] == quantity)
        & (table["estimator"] == est)
        & table["exact"].notna()
        & (table["seed"].isna() if seed is None else table["seed"].eq(seed).fillna(False))
    ]
    if ex.empty:
        return out
    sweeps = ex["total_sweeps"].to_numpy(dtype=float)
    values = ex["exact"].to_numpy(dtype=float)
    for i, xi in enumerate(x):
        same = np.isclose(sweeps, xi, rtol=1e-9, atol=0.0)
        out[i] = values[same][0] if same.any() else values[0]
    return out


def _bracket_flags(
    lo: np.ndarray, hi: np.ndarray, exact: np.ndarray, crossed: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Which lower and which upper ends to circle: an end on the wrong side of the exact value (a lower
    end above it, an upper end below it; none where the exact value is NaN) and both ends where the raw
    estimates cross (``crossed``: the ends drawn are then the span of both) or the ends drawn do
    (``lower > upper``: a record written before brackets spanned crossed ends)."""
    with np.errstate(invalid="ignore"):
        cross = lo > hi
        if crossed is not None:
            cross = cross | np.asarray(crossed, dtype=bool)
        return (lo > exact) | cross, (hi < exact) | cross


def plot_bracket(
    records: Sequence[tuple[Mapping[str, Any], str | None]],
    model: str,
    path: str | os.PathLike,
    table: pd.DataFrame | None = None,
) -> Path:
    """``plots/<model>_bracket.png`` (and its PDF): the lower and upper ends of each bracket estimate of
    ``model`` against the Gibbs sweeps spent (``total_sweeps``, log scale), shaded between, from the
    record's ``history`` (the sandwich's rounds of K doubling; BDMC: one point per K); one panel per
    bracketed quantity, with a horizontal line at the exact value where ``table`` (:func:`make_table_bracket`)
    knows it.  A placeholder where the model has no bracket estimate.

    Drawn as every figure is: one colour per estimator (:func:`~logzbench.plotting.series_color`, the same
    for all its seeds; lower ends ``^`` solid, upper ends ``v`` dashed; a second config entry of one method
    with hollow markers) named by :func:`~logzbench.plotting.series_label`; y-limits from the bulk of the
    ends (:class:`~logzbench.plotting.RobustY`), so that the first rounds' wide brackets do not flatten the
    converged ones (points beyond are drawn at the edge); an end on the wrong side of the exact value, or
    both ends of a round whose raw estimates cross, circled (:data:`BRACKET_FLAG_LABEL`)."""
    mine = [
        (rec, src) for rec, src in records if is_bracket_record(rec) and normalize_record(rec, src)["model"] == model
    ]
    panels = [(q, pts) for q in QUANTITIES if (pts := _history_points(mine, q))]
    if not panels:
        return _placeholder(f"{model}: no bracket estimates (sandwich, BDMC)", path, (6.4, 3.0))
    fig, axes = pyplot().subplots(1, len(panels), figsize=(6.4 * len(panels), 4.4), squeeze=False)
    for ax, (q, groups) in zip(axes[0], panels):
        _bracket_panel(ax, model, q, groups, table)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)


def _bracket_panel(ax, model: str, q: str, groups: list, table: pd.DataFrame | None) -> None:
    """One quantity's panel of :func:`plot_bracket`: every estimate's ends (:func:`_draw_ends`), one legend
    entry per estimator (its seeds share its colour), the exact levels (:func:`_draw_exact_levels`), robust
    y-limits and the labels."""
    from matplotlib.ticker import NullFormatter

    entries = {m: sorted({e for mm, e, _, _ in groups if mm == m}) for m, _, _, _ in groups}
    seeds = {(m, e): [s for mm, ee, s, _ in groups if (mm, ee) == (m, e) and s is not None] for m, e, _, _ in groups}
    robust = RobustY(ax, flag_label=BRACKET_FLAG_LABEL)
    labelled: set[tuple[str, str]] = set()
    for method, est, seed, df in groups:
        name = series_label(method, entry=est if len(entries[method]) > 1 else "")
        n_seeds = len(seeds[(method, est)])
        if n_seeds:
            name += f" (seed{'s' if n_seeds > 1 else ''} {', '.join(str(s) for s in seeds[(method, est)])})"
        first = (method, est) not in labelled  # one legend entry per estimator: its seeds share its colour
        labelled.add((method, est))
        exact = _exact_at(table, model, q, est, seed, df["total_sweeps"].to_numpy(dtype=float))
        hollow = bool(entries[method].index(est))
        _draw_ends(ax, robust, df, exact, series_color(method), name if first else None, hollow=hollow)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())  # (labelled minor ticks of a short range overlap)
    if table is not None and len(table):
        _draw_exact_levels(ax, robust, table[(table["model"] == model) & (table["quantity"] == q)])
    robust.finish()
    ax.set_xlabel("Gibbs sweeps x chains spent (total_sweeps)")
    ax.set_ylabel(QUANTITY_LABELS.get(q, q))
    ax.set_title(f"{model}: bracket on {'log Z' if q == 'log_z' else 'the mean log-likelihood'}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best")


def _draw_ends(
    ax, robust: RobustY, df: pd.DataFrame, exact: np.ndarray, color: str, name: str | None, *, hollow: bool
) -> None:
    """One estimate's bracket history: lower ends ``^`` solid and upper ends ``v`` dashed in ``color`` (hollow
    markers for a second config entry of its method; legend entries ``name: lower`` / ``upper`` unless
    ``name`` is ``None``), shaded between with a bar per round, the flagged ends (:func:`_bracket_flags`
    against ``exact``) circled by ``robust``."""
    x = df["total_sweeps"].to_numpy(dtype=float)
    lo, hi = df["lower"].to_numpy(dtype=float), df["upper"].to_numpy(dtype=float)
    bad_lo, bad_hi = _bracket_flags(lo, hi, exact, df["crossed"].to_numpy(dtype=bool))
    face = {"markerfacecolor": "none"} if hollow else {}
    for y, marker, linestyle, end, bad in ((lo, "^", "-", "lower", bad_lo), (hi, "v", "--", "upper", bad_hi)):
        label = f"{name}: {end}" if name is not None else None
        ax.plot(x, y, marker=marker, markersize=4, linestyle=linestyle, color=color, label=label, **face)
        robust.add(x, y, color, flagged=bad)
    both = np.isfinite(lo) & np.isfinite(hi)
    if both.any():
        ax.fill_between(x[both], lo[both], hi[both], color=color, alpha=0.15, linewidth=0)
        # each round's bracket as a bar (one round alone has no area to shade)
        ax.vlines(x[both], lo[both], hi[both], color=color, alpha=0.4, linewidth=3)


def _draw_exact_levels(ax, robust: RobustY, rows: pd.DataFrame) -> None:
    """Horizontal lines at the exact values of one panel's :func:`make_table_bracket` ``rows``: the test rows'
    solid, BDMC's simulated points' dotted, each kind labelled once."""
    exact_label = series_label("exact")
    for data, g in rows[rows["exact"].notna()].groupby("data", sort=True):
        label = exact_label if data == "test" else f"{exact_label} (simulated points)"
        for i, v in enumerate(sorted(set(np.round(g["exact"].to_numpy(dtype=float), 12)))):
            ax.axhline(
                v,
                color=series_color("exact"),
                linewidth=1.2,
                linestyle="-" if data == "test" else ":",
                label=None if i else label,
            )
            robust.add_level(v)


# --------------------------------------------------------------------------- table_continuous.csv
def continuous_brackets(table: pd.DataFrame) -> pd.DataFrame:
    """The bracket on the mean log-likelihood per model (:data:`CONTINUOUS_BRACKET_COLUMNS`, indexed by model)
    from :func:`make_table_bracket`'s rows: the sandwich's (the test rows) where the model has one, else BDMC's
    (simulated points: ``bracket_estimator`` says so); at the estimator's largest K, ends averaged over
    seeds."""
    out: dict[str, dict[str, Any]] = {}
    if table is None or table.empty:
        return pd.DataFrame(columns=CONTINUOUS_BRACKET_COLUMNS)
    ll = table[table["quantity"] == "mean_log_likelihood"]
    for model, g in ll.groupby("model", sort=True):
        pref = sorted(g["method"].unique(), key=lambda m: (m != "sandwich", m))
        pick = g[g["method"] == pref[0]]
        pick = pick[pick["estimator"] == sorted(pick["estimator"].unique())[0]]
        if pick["K"].notna().any() and pick["method"].iloc[0] != "sandwich":
            pick = pick[pick["K"] == pick["K"].max()]
        lower, upper = float(pick["lower"].mean()), float(pick["upper"].mean())
        est = pick["estimator"].iloc[0]
        out[model] = {
            "bracket_lower": lower,
            "bracket_upper": upper,
            "bracket_width": upper - lower,
            "bracket_estimator": est + (" (simulated data)" if (pick["data"] == "simulated").any() else ""),
        }
    return pd.DataFrame.from_dict(out, orient="index", columns=CONTINUOUS_BRACKET_COLUMNS)


def add_continuous_brackets(table_c: pd.DataFrame, table_b: pd.DataFrame) -> pd.DataFrame:
    """``table_continuous.csv`` with the bracket columns appended (empty for a model without a bracket
    estimate)."""
    b = continuous_brackets(table_b)
    out = table_c.copy()
    for c in CONTINUOUS_BRACKET_COLUMNS:
        out[c] = [
            b.at[m, c] if m in b.index else (float("nan") if c != "bracket_estimator" else "") for m in out["model"]
        ]
    return out[list(table_c.columns) + CONTINUOUS_BRACKET_COLUMNS]
