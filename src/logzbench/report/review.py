"""The review page: ``review.html``, one self-contained HTML file a person reads in a browser.

:func:`build_report` writes the report as many CSV files and figures; to judge a run one wants them side by
side, per model.  :func:`review_html` lays out, from the data frames :func:`build_report` already has:

* a contents list of the models (each with how many of its settings are flagged, and the first reason in
  short, :func:`logzbench.tracking.runs.flag_reason`);
* per model a section: a table of every estimator and start distribution (the figures' names,
  :func:`logzbench.plotting.series_label`) at each K with its seed count, the log Z estimate and the mean
  test log-likelihood each with its standard error, the exact value where known and the estimate's
  difference from it (in nats and in standard errors), and each flag's reason in words
  (:mod:`.flags`); the brackets of the sandwich and of BDMC where ``table_bracket`` has the model (each
  end with its estimator and whether it is a guaranteed bound, and of what); then the model's figures;
* the report's tables rendered as HTML tables (wide ones split into blocks of columns, the key columns
  repeated, so that no table is wider than the page).

The page needs nothing beside it: the figures are embedded as base64 PNG ``data:`` URIs, the style sheet
is inline, and there is no script and no external resource.  The layout fits a 1366 px wide window
without horizontal scrolling (fixed-layout tables of the page's width whose cells wrap, images at most
the width of their column), the size of a common laptop screen.  All text is HTML-escaped.

Numbers: an estimate has at least 4 decimals, and more where its standard error needs them for two
significant digits; a standard error has two significant digits; the difference from the exact value has
a column of its own (in scientific notation when it would round to zero), so that an estimate and the
exact value never look equal when they are not.
"""

from __future__ import annotations

import base64
import html
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from ..plotting import method_label, series_label
from ..utils import atomic_path, utc_now
from .flags import split_reasons

__all__ = ["REVIEW_TABLES", "review_html", "write_review"]

#: the report's tables shown at the end of the page, in this order, with a title each (those present)
REVIEW_TABLES: dict[str, str] = {
    "table1": "RAISE Table 1 layout (RBMs)",
    "table2": "RAISE Table 2 layout (DBMs, DBNs)",
    "table_continuous": "Continuous models (HAIS Table 1 layout)",
    "table_bracket": "Brackets (sandwich, BDMC)",
    "table_csl": "CSL (Upadhya & Sastry Table 2 layout)",
    "annealed_trials": "Bias / MSE of log Z over seeds",
    "table_papers": "The papers' values beside ours",
    "table_learners": "Learner-trained models",
    "table_learners_paper": "The AVIL paper's Tables 2-3 as printed, ours beside",
    "table_learner_timing": "Learners' training time",
    "table_hidden_mass": "Mass on the top hidden configurations",
    "table_per_class": "Test log-likelihood per class",
    "flags": "Flags (one row per reason)",
    "summary": "Summary over seeds",
}

#: columns that identify a row, most telling first: the first few present are repeated in every block of a
#: table split by columns
_KEY_COLUMNS = ("model", "estimator", "K", "init", "seed", "quantity", "schedule", "block")
#: most columns of one block of a rendered table (at 1366 px, about 100 px a column)
_MAX_COLUMNS = 12
#: figures of a model, in this order: (file stem suffix, caption)
_FIGURE_KINDS = (
    ("", "Mean test log-likelihood against K"),
    ("_bias_mse", "Bias and MSE of log Z over seeds against K"),
    ("_bracket", "Bracket against the sweeps spent"),
)

_CSS = """
*, *::before, *::after { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin: 0 auto; max-width: 1600px; padding: 0 16px 48px; font: 14px/1.45 system-ui, -apple-system,
  "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: #1b1f24; background: #fff;
  overflow-wrap: anywhere; }
h1 { font-size: 1.6em; margin: 18px 0 4px; }
h2 { font-size: 1.3em; margin: 36px 0 6px; padding-top: 10px; border-top: 2px solid #d0d7de; }
h3 { font-size: 1.05em; margin: 20px 0 6px; }
p.meta, p.note { color: #57606a; margin: 4px 0 10px; }
nav ol { columns: 2 380px; margin: 6px 0; padding-left: 1.6em; }
nav li { break-inside: avoid; margin: 2px 0; }
a { color: #0550ae; }
.wrap { width: 100%; max-width: 100%; }
table { width: 100%; max-width: 100%; border-collapse: collapse; margin: 6px 0 14px; font-size: 13px; }
table.estimates { table-layout: fixed; }
table.data { table-layout: auto; }
caption { text-align: left; color: #57606a; padding: 2px 0; caption-side: top; }
th, td { border: 1px solid #d0d7de; padding: 3px 5px; vertical-align: top; text-align: left;
  overflow-wrap: anywhere; word-break: normal; }
th { background: #f3f5f7; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: normal; }
tr.flagged td { background: #fff4f2; }
tr.exact td { background: #f4f9f4; }
td.flag ul { margin: 0; padding-left: 1.1em; }
td.flag li { margin: 0 0 2px; }
.ok { color: #57606a; }
.bad { color: #b42318; font-weight: 600; }
.small { color: #57606a; font-size: 0.9em; }
dl.exact { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 6px 0 10px; }
dl.exact dt { font-weight: 600; }
dl.exact dd { margin: 0; }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 520px), 1fr)); gap: 12px; }
figure { margin: 0; min-width: 0; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid #d0d7de; }
figcaption { color: #57606a; font-size: 0.9em; margin-top: 2px; }
details > summary { cursor: pointer; font-weight: 600; font-size: 1.05em; margin: 14px 0 4px; }
"""


# --------------------------------------------------------------------------- formatting
def _esc(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def _float(v: Any) -> float:
    try:
        if v is None or isinstance(v, str) or pd.isna(v):
            return float("nan")
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _decimals(se: float, least: int = 4, most: int = 10) -> int:
    """Decimals that show ``se`` to two significant digits (at least ``least``, at most ``most``)."""
    if not (math.isfinite(se) and se > 0):
        return least
    return int(min(most, max(least, 1 - math.floor(math.log10(se)))))


def fmt_estimate(v: Any, se: Any = None) -> str:
    """An estimate with at least 4 decimals, more where its standard error needs them; ``""`` if unknown."""
    x = _float(v)
    return f"{x:.{_decimals(_float(se))}f}" if math.isfinite(x) else ""


def fmt_se(v: Any) -> str:
    """A standard error to two significant digits; ``""`` if unknown."""
    x = _float(v)
    if not math.isfinite(x):
        return ""
    if x == 0:
        return "0"
    if abs(x) < 1e-4 or abs(x) >= 1e5:
        return f"{x:.1e}"
    return f"{x:.{max(0, 1 - math.floor(math.log10(abs(x))))}f}"


def fmt_difference(d: Any, se: Any = None) -> str:
    """A signed difference from the exact value: 4 decimals (more where the standard error needs them),
    scientific notation where that would round a non-zero difference to zero; ``""`` if unknown."""
    x = _float(d)
    if not math.isfinite(x):
        return ""
    n = _decimals(_float(se))
    if x != 0 and abs(x) < 0.5 * 10.0**-n:
        return f"{x:+.2e}"
    return f"{x:+.{n}f}"


def _fmt_cell(v: Any) -> str:
    """A table cell as the CSV files write it (floats ``%.6g``, missing values empty)."""
    if v is None or (not isinstance(v, str) and pd.api.types.is_scalar(v) and pd.isna(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _fmt_int(v: Any) -> str:
    x = _float(v)
    return str(int(x)) if math.isfinite(x) else ""


def _slug(name: str, taken: set[str]) -> str:
    """An id for ``name`` (letters, digits, ``-``, ``_``), unique among ``taken``."""
    base = "".join(c if c.isalnum() or c in "-_" else "-" for c in str(name)) or "model"
    slug, i = f"model-{base}", 2
    while slug in taken:
        slug, i = f"model-{base}-{i}", i + 1
    taken.add(slug)
    return slug


def _image(path: str | os.PathLike) -> str | None:
    """A PNG file as a ``data:`` URI; ``None`` where it is missing."""
    p = Path(path)
    if not p.is_file():
        return None
    return "data:image/png;base64," + base64.b64encode(p.read_bytes()).decode("ascii")


# --------------------------------------------------------------------------- per model
def _estimator_name(s: pd.Series) -> str:
    return series_label(
        str(s.get("method") or s.get("estimator") or ""),
        "" if pd.isna(s.get("init")) else str(s.get("init") or ""),
        entry=str(s.get("estimator") or ""),
        schedule="" if pd.isna(s.get("schedule")) else str(s.get("schedule") or ""),
    )


def _first_finite(df: pd.DataFrame, col: str) -> float:
    if col not in df:
        return float("nan")
    vals = [x for x in map(_float, df[col]) if math.isfinite(x)]
    return vals[0] if vals else float("nan")


def _smallest_se(df: pd.DataFrame, col: str) -> float:
    """The smallest positive finite standard error of ``col`` (NaN without one)."""
    vals = [x for x in map(_float, df[col])] if col in df else []
    vals = [x for x in vals if math.isfinite(x) and x > 0]
    return min(vals) if vals else float("nan")


def _diff_cell(s: pd.Series, value: str, se: str, diff: str, exact: float) -> str:
    """The ``estimate - exact`` cell: the difference, and in how many standard errors."""
    d = _float(s.get(diff))
    if not math.isfinite(d):
        v = _float(s.get(value))
        d = v - exact if math.isfinite(v) and math.isfinite(exact) else float("nan")
    if not math.isfinite(d):
        return '<td class="num diff"></td>'
    e = _float(s.get(se))
    r = abs(d) / e if math.isfinite(e) and e > 0 else float("nan")
    z = f'<br><span class="small">{r:.2g} s.e.</span>' if r < 100 else f'<br><span class="small">{r:.0f} s.e.</span>'
    z = z if math.isfinite(r) else ""
    return f'<td class="num diff">{_esc(fmt_difference(d, e))}{z}</td>'


def _flag_cell(flags: Any) -> str:
    reasons = split_reasons(flags)
    if not reasons:
        return '<td class="flag"><span class="ok">none</span></td>'
    items = "".join(f"<li>{_esc(r)}</li>" for r in reasons)
    return f'<td class="flag"><ul>{items}</ul></td>'


def _sort_rows(rows: pd.DataFrame) -> pd.DataFrame:
    from .methods import INIT_ORDER

    exact_first = (rows["method"] != "exact").astype(int)
    init_rank = rows["init"].map(lambda x: INIT_ORDER.index(x) if x in INIT_ORDER else len(INIT_ORDER))
    key = pd.DataFrame(
        {
            "exact": exact_first,
            "est": rows["estimator"].astype(str),
            "init": init_rank,
            "sched": rows["schedule"].astype(str),
            "K": pd.to_numeric(rows["K"], errors="coerce").fillna(-1),
        },
        index=rows.index,
    )
    return rows.loc[key.sort_values(["exact", "est", "init", "sched", "K"], kind="stable").index]


def _estimates_table(rows: pd.DataFrame, exact_z: float, exact_ll: float) -> str:
    """The estimates of one model: one row per estimator, start, schedule and K."""
    has_z = any(math.isfinite(_float(v)) for v in rows["log_z"])
    has_ll = any(math.isfinite(_float(v)) for v in rows["mean_test_ll"])
    z_diff, ll_diff = has_z and math.isfinite(exact_z), has_ll and math.isfinite(exact_ll)
    cols: list[tuple[str, str, str]] = [("Estimator (start)", "14%", ""), ("K", "4%", "num"), ("Seeds", "5%", "num")]
    if has_z:
        cols += [("log Z", "9%", "num"), ("s.e.", "5%", "num")]
        cols += [("log Z \u2212 exact", "8%", "num")] if z_diff else []
    if has_ll:
        cols += [("Mean test log-likelihood", "9%", "num"), ("s.e.", "5%", "num")]
        cols += [("LL \u2212 exact", "8%", "num")] if ll_diff else []
    used = sum(float(w.rstrip("%")) for _, w, _ in cols)
    cols.append(("Flags (reasons)", f"{max(100 - used, 20):g}%", ""))
    head = "".join(f'<col style="width:{w}">' for _, w, _ in cols)
    ths = "".join(f'<th scope="col">{_esc(n)}</th>' for n, _, _ in cols)
    body = []
    for _, s in _sort_rows(rows).iterrows():
        cls = "exact" if s["method"] == "exact" else "flagged" if split_reasons(s.get("flags")) else ""
        cells = [
            f'<th scope="row" class="estimator">{_esc(_estimator_name(s))}</th>',
            f'<td class="num">{_esc(_fmt_int(s.get("K")))}</td>',
            f'<td class="num">{_esc(_fmt_int(s.get("n_seeds")))}</td>',
        ]
        if has_z:
            cells += [
                f'<td class="num estimate">{_esc(fmt_estimate(s.get("log_z"), s.get("log_z_se")))}</td>',
                f'<td class="num se">{_esc(fmt_se(s.get("log_z_se")))}</td>',
            ]
            cells += [_diff_cell(s, "log_z", "log_z_se", "log_z_minus_exact", exact_z)] if z_diff else []
        if has_ll:
            cells += [
                f'<td class="num estimate">{_esc(fmt_estimate(s.get("mean_test_ll"), s.get("mean_test_ll_se")))}</td>',
                f'<td class="num se">{_esc(fmt_se(s.get("mean_test_ll_se")))}</td>',
            ]
            cells += [_diff_cell(s, "mean_test_ll", "mean_test_ll_se", "ll_minus_exact", exact_ll)] if ll_diff else []
        cells.append(_flag_cell(s.get("flags")))
        body.append(f'<tr class="{cls}">{"".join(cells)}</tr>')
    return (
        f'<div class="wrap"><table class="estimates"><colgroup>{head}</colgroup>'
        f"<thead><tr>{ths}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def _end_words(b: pd.Series, end: str) -> str:
    """One end of a bracket in words: its value, its estimator, and whether (and of what) it is a bound."""
    est = str(b.get(f"{end}_estimator") or "")
    words = str(b.get(f"{end}_guarantee") or "")
    guaranteed = b.get(f"{end}_guaranteed")
    if guaranteed is None or pd.isna(guaranteed):
        status = "guarantee unknown"
    else:
        status = "guaranteed bound" if bool(guaranteed) else '<span class="bad">approximate, no guarantee</span>'
    return (
        f'{_esc(fmt_estimate(b.get(end)))}<br><span class="small">{_esc(method_label(est) if est else "")}'
        f" \u2014 {status}{(': ' + _esc(words)) if words else ''}</span>"
    )


def _crossed_words(b: pd.Series) -> str:
    """The flag of a bracket whose raw estimates cross, in words ('' where they do not): one end is wrong, and
    the bracket shown is the span of both ends."""
    crossed = b.get("crossed")
    if crossed is None or pd.isna(crossed) or not bool(crossed):
        return ""
    by = _float(b.get("crossed_by"))
    amount = f" by {fmt_estimate(by)} nats" if math.isfinite(by) else ""
    return (
        f'<br><span class="bad">flagged: the raw ends cross{_esc(amount)} (lower estimate above the upper one): '
        "an end is wrong; the bracket shown is the span of both ends</span>"
    )


def _bracket_table(rows: pd.DataFrame) -> str:
    """The brackets of one model (``table_bracket`` rows): each end with its estimator and guarantee."""
    from .bracket import QUANTITY_LABELS

    cols = [
        ("Bracket (seed)", "12%"),
        ("Quantity", "11%"),
        ("Lower end", "24%"),
        ("Upper end", "24%"),
        ("Width", "8%"),
        ("Exact, inside?", "10%"),
        ("K, sweeps", "11%"),
    ]
    head = "".join(f'<col style="width:{w}">' for _, w in cols)
    ths = "".join(f'<th scope="col">{_esc(n)}</th>' for n, _ in cols)
    body = []
    for _, b in rows.iterrows():
        seed = _fmt_int(b.get("seed"))
        q = str(b.get("quantity") or "")
        what = QUANTITY_LABELS.get(q, q) + (" of simulated points" if b.get("data") == "simulated" else "")
        target = _float(b.get("target_width"))
        reached = b.get("width_reached")
        width = _esc(fmt_estimate(b.get("width")))
        if math.isfinite(target):
            ok = "reached" if (not pd.isna(reached) and bool(reached)) else "not reached"
            width += f'<br><span class="small">target {_esc(f"{target:g}")}: {ok}</span>'
        width += _crossed_words(b)
        exact = _float(b.get("exact"))
        contains = b.get("contains_exact")
        inside = (
            ""
            if pd.isna(contains)
            else '<br><span class="ok">inside</span>'
            if bool(contains)
            else '<br><span class="bad">outside</span>'
        )
        conf = _float(b.get("confidence"))
        confidence = f'<br><span class="small">confidence {conf:g}</span>' if math.isfinite(conf) else ""
        label = method_label(str(b.get("method") or b.get("estimator") or ""))
        body.append(
            "<tr>"
            f'<th scope="row">{_esc(label)}{f" (seed {_esc(seed)})" if seed else ""}'
            f"{confidence}</th>"
            f"<td>{_esc(what)}</td>"
            f'<td class="end lower">{_end_words(b, "lower")}</td>'
            f'<td class="end upper">{_end_words(b, "upper")}</td>'
            f'<td class="num">{width}</td>'
            f'<td class="num">{_esc(fmt_estimate(exact)) if math.isfinite(exact) else "unknown"}{inside}</td>'
            f'<td class="num">K {_esc(_fmt_int(b.get("K")))}<br>{_esc(_fmt_cell(_float(b.get("total_sweeps"))))}'
            " sweeps</td>"
            "</tr>"
        )
    return (
        f'<div class="wrap"><table class="estimates brackets"><colgroup>{head}</colgroup>'
        f"<thead><tr>{ths}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def _figures(figs: Sequence[tuple[str, Path]]) -> str:
    out = []
    for caption, path in figs:
        uri = _image(path)
        if uri is None:
            continue
        out.append(
            f'<figure><img src="{uri}" alt="{_esc(caption)}" loading="eager">'
            f"<figcaption>{_esc(caption)} ({_esc(Path(path).name)})</figcaption></figure>"
        )
    return f'<div class="figures">{"".join(out)}</div>' if out else ""


def _model_section(
    model: str, slug: str, rows: pd.DataFrame, brackets: pd.DataFrame, figs: Sequence[tuple[str, Path]]
) -> str:
    first = rows.iloc[0] if len(rows) else pd.Series(dtype=object)
    facts = [f"{k} {_esc(first.get(c))}" for k, c in (("family", "family"), ("dataset", "dataset")) if first.get(c)]
    if first.get("architecture") and not pd.isna(first.get("architecture")):
        facts.append(f"architecture {_esc(first.get('architecture'))}")
    exact_z, exact_ll = _first_finite(rows, "exact_log_z"), _first_finite(rows, "exact_test_ll")
    # the exact values to as many decimals as the model's most precise estimate shows
    se_z, se_ll = (_smallest_se(rows, c) for c in ("log_z_se", "mean_test_ll_se"))
    parts = [f'<section class="model" id="{_esc(slug)}" data-model="{_esc(model)}">', f"<h2>{_esc(model)}</h2>"]
    if facts:
        parts.append(f'<p class="meta">{", ".join(facts)}</p>')
    parts.append('<dl class="exact">')
    parts.append(
        f"<dt>Exact log Z</dt><dd>{_esc(fmt_estimate(exact_z, se_z)) if math.isfinite(exact_z) else 'unknown'}</dd>"
    )
    parts.append(
        "<dt>Exact mean test log-likelihood</dt>"
        f"<dd>{_esc(fmt_estimate(exact_ll, se_ll)) if math.isfinite(exact_ll) else 'unknown'}</dd></dl>"
    )
    if len(rows):
        n_flag = sum(bool(split_reasons(f)) for f in rows["flags"])
        parts.append(f'<p class="note">{len(rows)} settings, {n_flag} flagged.</p>')
        parts.append(_estimates_table(rows, exact_z, exact_ll))
    else:
        parts.append('<p class="note">No estimates of this model.</p>')
    if len(brackets):
        parts.append("<h3>Brackets</h3>")
        parts.append(_bracket_table(brackets))
    fig_html = _figures(figs)
    if fig_html:
        parts.append("<h3>Figures</h3>" + fig_html)
    parts.append("</section>")
    return "\n".join(parts)


# --------------------------------------------------------------------------- the report's tables
def _data_table(name: str, title: str, df: pd.DataFrame) -> str:
    """A table of the report as HTML; one wider than :data:`_MAX_COLUMNS` is split into blocks of columns,
    each repeating the columns that identify a row."""
    cols = [str(c) for c in df.columns]
    if df.empty:
        return (
            f'<details open id="table-{_esc(name)}"><summary>{_esc(title)} ({_esc(name)}.csv)</summary>'
            f'<p class="note">No rows (columns: {_esc(", ".join(cols))}).</p></details>'
        )
    first = [c for c in _KEY_COLUMNS if c in cols][: _MAX_COLUMNS // 2]
    keys = [c for c in cols if c in first]  # (in the table's own order)
    rest = [c for c in cols if c not in keys]
    per = max(_MAX_COLUMNS - len(keys), 1)
    blocks = [rest[i : i + per] for i in range(0, len(rest), per)] or [[]]
    values = df.astype(object).to_numpy()
    index = {c: i for i, c in enumerate(cols)}
    out = [f'<details open id="table-{_esc(name)}"><summary>{_esc(title)} ({_esc(name)}.csv, {len(df)} rows)</summary>']
    for b, block in enumerate(blocks):
        shown = keys + block
        cap = f"columns {_esc(', '.join(block))}" if len(blocks) > 1 else ""
        ths = "".join(f'<th scope="col">{_esc(c)}</th>' for c in shown)
        trs = "".join(
            "<tr>" + "".join(f"<td>{_esc(_fmt_cell(row[index[c]]))}</td>" for c in shown) + "</tr>" for row in values
        )
        caption = f"<caption>Part {b + 1} of {len(blocks)}: {cap}</caption>" if cap else ""
        out.append(
            f'<div class="wrap"><table class="data" data-table="{_esc(name)}">{caption}'
            f"<thead><tr>{ths}</tr></thead><tbody>{trs}</tbody></table></div>"
        )
    out.append("</details>")
    return "\n".join(out)


# --------------------------------------------------------------------------- the page
def _model_of(stem: str, models: Sequence[str]) -> str | None:
    """The model a figure's file stem belongs to (``<model>`` or ``<model>_<kind>``; the longest match)."""
    hits = [m for m in models if stem == m or stem.startswith(f"{m}_")]
    return max(hits, key=len) if hits else None


def _model_figures(
    models: Sequence[str], figures: Mapping[str, Mapping[str, str | os.PathLike]]
) -> tuple[dict[str, list[tuple[str, Path]]], list[tuple[str, Path]]]:
    """``({model: [(caption, png)]}, [(caption, png) of no one model])`` from ``build_report``'s figure maps:
    ``plots``, ``trial_plots``, ``bracket_plots`` (``{model: path}``) and any other (``{file stem: path}``)."""
    per: dict[str, list[tuple[str, Path]]] = {m: [] for m in models}
    other: list[tuple[str, Path]] = []
    captions = dict(zip(("plots", "trial_plots", "bracket_plots"), (c for _, c in _FIGURE_KINDS)))
    for kind in ("plots", "trial_plots", "bracket_plots"):
        for m, p in (figures.get(kind) or {}).items():
            if m in per:
                per[m].append((captions[kind], Path(p)))
    for kind, paths in figures.items():
        if kind in captions:
            continue
        for stem, p in (paths or {}).items():
            m = _model_of(str(stem), models)
            caption = str(stem).replace("_", " ")
            (per[m] if m is not None else other).append((caption, Path(p)))
    return per, other


def review_html(
    summary: pd.DataFrame,
    *,
    table_bracket: pd.DataFrame | None = None,
    tables: Mapping[str, pd.DataFrame] | None = None,
    figures: Mapping[str, Mapping[str, str | os.PathLike]] | None = None,
    extra_figures: Iterable[tuple[str, str | os.PathLike]] = (),
    models: Sequence[str] | None = None,
    thresholds: Mapping[str, Any] | None = None,
    title: str = "logzbench review",
) -> str:
    """The review page as one HTML string (see the module's docstring for what it shows).

    Parameters
    ----------
    summary : DataFrame
        The flagged summary over seeds (:func:`.records.summarize`, then :func:`.flags.apply_flags`): the rows
        of the per-model tables.
    table_bracket : DataFrame, optional
        ``table_bracket.csv`` (:func:`.bracket.make_table_bracket`): a model's rows make its bracket table.
    tables : mapping, optional
        ``{name: DataFrame}`` of the report's tables rendered at the end, in :data:`REVIEW_TABLES` order
        (names not listed there follow, titled by their name).
    figures : mapping, optional
        ``build_report``'s figure maps: ``plots``, ``trial_plots``, ``bracket_plots`` (``{model: png}``) and
        others as ``{file stem: png}`` (``learner_plots``, ``diagnostic_plots``), each shown in the section of
        its model (by the stem's prefix) or with the figures of no one model.
    extra_figures : iterable of (caption, png)
        Figures of no one model (``plots/model_size.png``).
    models : sequence of str, optional
        Models to list even without estimates (in addition to those of ``summary``).
    thresholds : mapping, optional
        The flag thresholds (``report.json``'s), quoted in the page's heading.
    title : str
        The page's title.

    Returns
    -------
    str
        A complete HTML document that loads nothing else.
    """
    from ..tracking.runs import flag_reason

    table_bracket = table_bracket if table_bracket is not None else pd.DataFrame(columns=["model"])
    names = sorted(
        set(map(str, summary["model"])) | set(map(str, models or ())) | set(map(str, table_bracket["model"]))
    )
    per_fig, other_figs = _model_figures(names, figures or {})
    other_figs = [(c, Path(p)) for c, p in extra_figures] + other_figs
    taken: set[str] = set()
    slugs = {m: _slug(m, taken) for m in names}

    n_flagged = int(sum(bool(split_reasons(f)) for f in summary["flags"])) if len(summary) else 0
    head = [
        f"<h1>{_esc(title)}</h1>",
        f'<p class="meta">Written {_esc(utc_now())}: {len(names)} models, {len(summary)} settings '
        f"(model \u00d7 estimator \u00d7 start \u00d7 K, over seeds), {n_flagged} flagged.",
    ]
    if thresholds:
        th = ", ".join(f"{_esc(k)} = {_esc(f'{v:g}' if isinstance(v, float) else v)}" for k, v in thresholds.items())
        head[-1] += f" Flag thresholds: {th}."
    head[-1] += "</p>"
    head.append(
        '<p class="note">Per model: each estimator and start distribution at each K with its estimate, standard '
        "error (s.e., of the mean over seeds) and difference from the exact value where known (in nats, and in "
        "standard errors below it), and the reasons it is flagged; then its brackets and figures.  The report's "
        'tables follow the models (<a href="#tables">tables</a>).</p>'
    )
    toc = []
    for m in names:
        rows = summary[summary["model"].astype(str) == m]
        reasons = [r for f in rows["flags"] for r in split_reasons(f)]
        n = sum(bool(split_reasons(f)) for f in rows["flags"])
        short = flag_reason(reasons) if reasons else None
        note = f"{len(rows)} settings, {n} flagged" + (f": {short}" if short else "")
        toc.append(f'<li><a href="#{_esc(slugs[m])}">{_esc(m)}</a> <span class="small">{_esc(note)}</span></li>')
    if other_figs:
        toc.append('<li><a href="#other-figures">Figures across models</a></li>')
    toc.append('<li><a href="#tables">Tables</a></li>')
    body = [*head, f'<nav aria-label="contents"><h3>Contents</h3><ol>{"".join(toc)}</ol></nav>']
    for m in names:
        rows = summary[summary["model"].astype(str) == m]
        brackets = table_bracket[table_bracket["model"].astype(str) == m]
        body.append(_model_section(m, slugs[m], rows, brackets, per_fig.get(m, [])))
    if other_figs:
        body.append(f'<section id="other-figures"><h2>Figures across models</h2>{_figures(other_figs)}</section>')
    tabs = dict(tables or {})
    order = [n for n in REVIEW_TABLES if n in tabs] + [n for n in tabs if n not in REVIEW_TABLES]
    body.append('<section id="tables"><h2>Tables</h2>')
    body.extend(_data_table(n, REVIEW_TABLES.get(n, n), tabs[n]) for n in order)
    body.append("</section>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{_CSS}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def write_review(path: str | os.PathLike, summary: pd.DataFrame, **kwargs: Any) -> Path:
    """Write :func:`review_html` of ``summary`` (and ``kwargs``) to ``path`` atomically; its path."""
    path = Path(path)
    with atomic_path(path) as tmp:
        Path(tmp).write_text(review_html(summary, **kwargs), encoding="utf-8")
    return path
