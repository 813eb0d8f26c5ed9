"""Our estimates beside the papers' published values: ``table_papers.csv``.

A model of a config stands for rows of the reproduced papers through its ``paper`` entry
(``{paper key: row name}``, e.g. ``{burda_raise: mnistCD1-20}``).  For each published value of
those rows (:mod:`.published`) :func:`make_table_papers` finds our summary row that matches it --
the same estimator, initial distribution and K where the published line names them -- and writes
one line: the published value and its printed uncertainty, ours with its standard error and its
spread over seeds, the difference, and whether the difference lies within our uncertainty
(:func:`.published.within_uncertainty`, as in the learner tables, with ``ROUNDING``, half a unit of
the papers' last printed digit: ``|ours - published| <= z * s.e. + ROUNDING``; ``no uncertainty``
without a standard error).

Where our run differs from the paper's setting the line says so in ``note`` (``ours at K=10000;
the paper's at K=100000``): such a difference is expected and is not an error of either.  A
published value we have no estimate for keeps empty ``ours`` columns, so the whole published row
is visible.  Quantities: ``mean_test_ll`` and ``log_z`` (our summary's columns of the same name),
``gap_ais_minus_raise`` (our AIS minus our RAISE mean test log-likelihood at the same initial
distribution and K).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
import pandas as pd

from ..pipeline.config import check_paper_rows
from .published import load_published, within_uncertainty
from .records import as_float, int_or_none

__all__ = [
    "ROUNDING",
    "TABLE_PAPERS_COLUMNS",
    "check_paper_rows",
    "check_paper_rows_match",
    "make_table_papers",
    "parse_paper_rows",
]

#: half a unit of the last printed digit of the papers' values (two decimals at least)
ROUNDING = 0.005

TABLE_PAPERS_COLUMNS = [
    "paper",
    "table",
    "row",
    "column",
    "quantity",
    "model",
    "estimator",
    "init",
    "K_paper",
    "K_ours",
    "n_seeds",
    "published",
    "published_uncertainty",
    "uncertainty_kind",
    "ours",
    "ours_se",
    "ours_uncertainty",
    "difference",
    "z_score",
    "within_uncertainty",
    "note",
]


def parse_paper_rows(items: Any) -> dict[str, dict[str, str]]:
    """``{model: {paper: row}}`` from a mapping of that shape or from ``"MODEL=PAPER:ROW"`` strings
    (the CLI's ``--paper``).  Raises ``ValueError`` naming a malformed item."""
    if items is None:
        return {}
    if isinstance(items, Mapping):
        out: dict[str, dict[str, str]] = {}
        for model, rows in items.items():
            if rows is None:
                continue
            if not isinstance(rows, Mapping):
                raise ValueError(f"paper rows of model {model!r} must map a paper key to a row name, got {rows!r}")
            out[str(model)] = {str(p): str(r) for p, r in rows.items()}
        return out
    out = {}
    for item in items:
        model, sep, rest = str(item).partition("=")
        paper, sep2, row = rest.partition(":")
        if not (sep and sep2 and model and paper and row):
            raise ValueError(f"--paper {item!r}: expected MODEL=PAPER:ROW, e.g. mnist-rbm20=burda_raise:mnistCD1-20")
        rows = out.setdefault(model, {})
        if paper in rows:  # a model stands for one row of each paper
            raise ValueError(
                f"--paper {item!r}: model {model!r} already stands for {paper} row {rows[paper]!r} "
                "(an earlier --paper); give one --paper per model and paper"
            )
        rows[paper] = row
    return out


def check_paper_rows_match(
    summary: pd.DataFrame, paper_rows: Mapping[str, Mapping[str, str]], *, published: pd.DataFrame | None = None
) -> None:
    """Refuse (``ValueError``, one line) a paper row whose model has no estimate in ``summary`` (e.g. a
    misspelt model name), or none of the values the row publishes (e.g. a ``log_z`` row for a model
    with no log Z estimate): its lines would all have empty ``ours`` columns.  A row of which some
    values have an estimate of ours passes (the others stay visible, empty, in ``table_papers.csv``).
    The command line's ``--paper`` is checked so (``build_report(check_papers=True)``)."""
    published = load_published() if published is None else published
    models = sorted(set(summary["model"])) if len(summary) else []
    for model, rows in check_paper_rows(paper_rows, _known_rows(published)).items():
        for paper, row in rows.items():
            what = f"--paper {model}={paper}:{row}"
            if model not in models:
                raise ValueError(
                    f"{what}: the results have no estimate of model {model!r} (their models: "
                    f"{', '.join(models) or 'none'})"
                )
            lines = published[(published["paper"] == paper) & (published["row"] == row)]
            found = [
                _ours(
                    summary,
                    model,
                    {k: (None if (not isinstance(v, str) and pd.isna(v)) else v) for k, v in line.items()},
                )
                for _, line in lines.iterrows()
            ]
            if all(f is None for f in found):
                theirs = sorted(
                    {
                        f"{q} ({e})" if isinstance(e, str) and e else str(q)
                        for q, e in zip(lines["quantity"], lines["estimator"])
                    }
                )
                ours = summary[summary["model"] == model]
                have = sorted(
                    {
                        f"{e} ({'log Z' if pd.notna(z) else 'test log-likelihood'})"
                        for e, z in zip(ours["estimator"], ours["log_z"])
                    }
                )
                raise ValueError(
                    f"{what}: model {model!r} has no estimate of what the row publishes "
                    f"({', '.join(theirs)}); its estimates: {', '.join(have)}"
                )


def _known_rows(published: pd.DataFrame) -> dict[str, set[str]]:
    """The rows of each paper in ``published`` (:func:`.published.load_published`), for
    :func:`logzbench.pipeline.config.check_paper_rows`."""
    return {p: set(g["row"]) for p, g in published.groupby("paper")}


def _candidates(summary: pd.DataFrame, model: str, line: Mapping[str, Any]) -> pd.DataFrame:
    """Our summary rows of ``model`` with the line's estimator and init (where the line names them).

    The line's estimator is a config entry's name (``ais-sm14500``) or a method; rows of an entry of that
    name are taken, else those of the one entry running that method on the model (``hais-generative`` for
    ``hais``); none where several entries run it, which would mix their settings."""
    rows = summary[summary["model"] == model]
    if line.get("estimator"):
        named = rows[rows["estimator"] == line["estimator"]]
        if named.empty and "method" in rows:
            by_method = rows[rows["method"] == line["estimator"]]
            named = by_method if by_method["estimator"].nunique() == 1 else named
        rows = named
    if line.get("init"):
        rows = rows[rows["init"] == line["init"]]
    return rows


def _pick_k(rows: pd.DataFrame, k_paper: int | None) -> pd.DataFrame:
    """The rows at the paper's K when we have it, else at our largest K (rows without K as they are)."""
    ks = rows["K"].dropna()
    if ks.empty:
        return rows
    k = k_paper if k_paper is not None and (ks == k_paper).any() else int(ks.max())
    return rows[rows["K"] == k]


def _ours(summary: pd.DataFrame, model: str, line: Mapping[str, Any]) -> dict[str, Any] | None:
    """Our value of a published line: ``ours``, ``ours_se``, the spread over seeds, ``K_ours``,
    ``n_seeds``; ``None`` when we have no estimate to compare."""
    quantity = line["quantity"]
    k_paper = int_or_none(line.get("K"))
    if quantity == "gap_ais_minus_raise":
        init = {"init": line.get("init")} if line.get("init") else {}
        ais = _pick_k(_candidates(summary, model, {"estimator": "ais", **init}), k_paper)
        rai = _candidates(summary, model, {"estimator": "raise", **init})
        if ais.empty or rai.empty:
            return None
        a = ais.iloc[0]
        rai = rai[rai["K"] == a["K"]]
        if rai.empty:
            return None
        r = rai.iloc[0]
        se = math.sqrt(np.nansum([as_float(a["mean_test_ll_se"]) ** 2, as_float(r["mean_test_ll_se"]) ** 2]))
        return {
            "ours": as_float(a["mean_test_ll"]) - as_float(r["mean_test_ll"]),
            "ours_se": se,
            "sd": float("nan"),
            "K_ours": int_or_none(a["K"]),
            "n_seeds": int(min(a["n_seeds"], r["n_seeds"])),
        }
    column = {"mean_test_ll": "mean_test_ll", "mean_test_ll_ais": "mean_test_ll", "log_z": "log_z"}.get(quantity)
    if column is None:
        return None
    rows = _pick_k(_candidates(summary, model, line), k_paper)
    rows = rows[rows[column].notna()]
    if rows.empty:
        return None
    s = rows.iloc[0]
    exact = s["method"] == "exact"
    return {
        "ours": as_float(s[column]),
        "ours_se": 0.0 if exact else as_float(s[f"{column}_se"]),
        "sd": as_float(s[f"{column}_sd"]),
        "K_ours": int_or_none(s["K"]),
        "n_seeds": int(s["n_seeds"]),
    }


def _ours_uncertainty(kind: str, ours: Mapping[str, Any]) -> float:
    """Ours in the paper's kind of uncertainty: the spread over seeds (``sd``), its square (``var``),
    our standard error (``pm``, the papers' unexplained ``±``)."""
    if kind == "sd":
        return ours["sd"]
    if kind == "var":
        return ours["sd"] ** 2
    if kind == "pm":
        return ours["ours_se"]
    return float("nan")


def _note(line: Mapping[str, Any], ours: Mapping[str, Any] | None) -> str:
    notes = []
    k_paper = int_or_none(line.get("K"))
    if ours is not None and k_paper is not None and ours["K_ours"] is not None and ours["K_ours"] != k_paper:
        notes.append(f"ours at K={ours['K_ours']}; the paper's at K={k_paper}")
    if ours is None:
        notes.append("no estimate of ours for this setting")
    if line.get("note"):
        notes.append(f"paper: {line['note']}")
    return "; ".join(notes)


def make_table_papers(
    summary: pd.DataFrame,
    paper_rows: Mapping[str, Mapping[str, str]],
    *,
    z: float = 2.0,
    published: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One line per published value of the rows the models stand for, ours beside it.

    Parameters
    ----------
    summary : pandas.DataFrame
        The report's summary over seeds (:func:`.records.summarize`).
    paper_rows : mapping
        ``{model: {paper key: row name}}`` (a config's ``models.<name>.paper`` entries).
    z : float
        Standard errors of ours within which a difference counts as agreement.
    published : pandas.DataFrame, optional
        :func:`.published.load_published` (default: the package's file).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`TABLE_PAPERS_COLUMNS`, in the published file's order per model.  A
        ``(paper, row)`` without published values is an error (``ValueError``): a misspelt row
        would otherwise show nothing.
    """
    published = load_published() if published is None else published
    out: list[dict[str, Any]] = []
    for model, rows in check_paper_rows(paper_rows, _known_rows(published)).items():
        for paper, row in rows.items():
            lines = published[(published["paper"] == paper) & (published["row"] == row)]
            for _, line in lines.iterrows():
                line = {k: (None if (not isinstance(v, str) and pd.isna(v)) else v) for k, v in line.items()}
                ours = _ours(summary, model, line) if len(summary) else None
                kind = line.get("uncertainty_kind") or ""
                value = float(line["value"])
                rec = {
                    "paper": paper,
                    "table": line["table"],
                    "row": row,
                    "column": line["column"],
                    "quantity": line["quantity"],
                    "model": model,
                    "estimator": line.get("estimator") or "",
                    "init": line.get("init") or "",
                    "K_paper": int_or_none(line.get("K")),
                    "published": value,
                    "published_uncertainty": as_float(line.get("uncertainty")),
                    "uncertainty_kind": kind,
                    "note": _note(line, ours),
                }
                if ours is not None:
                    diff = ours["ours"] - value
                    se = ours["ours_se"]
                    rec.update(
                        {
                            "K_ours": ours["K_ours"],
                            "n_seeds": ours["n_seeds"],
                            "ours": ours["ours"],
                            "ours_se": se,
                            "ours_uncertainty": _ours_uncertainty(kind, ours),
                            "difference": diff,
                            "z_score": diff / se if se and math.isfinite(se) and se > 0 else float("nan"),
                            "within_uncertainty": within_uncertainty(ours["ours"], se, value, z, ROUNDING),
                        }
                    )
                out.append(rec)
    table = pd.DataFrame(out, columns=TABLE_PAPERS_COLUMNS)
    for col in ("K_paper", "K_ours", "n_seeds"):
        table[col] = pd.array(table[col], dtype="Int64")
    return table
