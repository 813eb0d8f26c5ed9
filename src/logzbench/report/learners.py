"""Tables of the models a black-box learner trained (Li et al., AVIL: Secs. 5.3-5.6).

A model is *learner-trained* when its training summary record (``results/models/<model>.json``)
has ``hyperparams.learner`` (``avil``, ``nvil``, ``vcd``: :data:`logzbench.registry.LEARNERS`);
its history (``<model>.history.csv``), samples (``<model>.samples.npz``) and parameters
(``<model>.npz``) lie beside that record, its prepared dataset (``<dataset>.npz``: the source name
and image shape in ``meta``) in the data directory.

``table_learners.csv`` (:func:`make_table_learners`)
    The layout of the paper's Tables 2-3, one row per learner-trained model (a reviewer reads
    one comparison per line, and models of one dataset and family stand together): the model, its
    dataset and the dataset's source, family, learner, hidden sizes and auxiliary size, our mean test
    log-likelihood by AIS at its largest K (mean over seeds, its standard error, that K, the initial
    distribution it starts from, the number of seeds) -- the start chosen by a rule fixed in advance
    (:data:`START_PREFERENCE`), never by value, with every start's value beside it (``ais_<start>``,
    ``ais_<start>_se``) -- and the exact value where there is one, the paper's value
    (Table 2 for RBMs, Table 3 for DBMs; row ``<family>/<learner>``, column the source), the
    difference ours - paper, the tolerance ``z`` x s.e. and whether the difference lies within it.

The figures of these models (``plots/<model>_bounds.png``, ``_samples.png``, ``_filters.png`` and
``plots/<dataset>_bounds_vs_ais.png``) are drawn by :mod:`.learner_plots` from the models read here.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..registry import LEARNERS
from .compared import COMPARED_FAMILY, COMPARED_LEARNERS, compared_learner_datasets, learner_label
from .published import load_published, lookup, within_uncertainty
from .records import as_float, int_or_none

__all__ = [
    "LEARNER_TABLE_COLUMNS",
    "LearnerModel",
    "PAPER",
    "PAPER_QUANTITY",
    "PAPER_TABLES",
    "START_COLUMNS",
    "START_PREFERENCE",
    "bound_check",
    "bounds_vs_ais_datasets",
    "final_ais",
    "learner_models",
    "make_table_learners",
    "make_table_learners_paper",
    "reported_start",
    "within_uncertainty",
]

#: the paper the table compares with (a key of ``published.csv``), its quantity, and its table per family
PAPER = "li_avil"
PAPER_QUANTITY = "mean_test_ll_ais"
PAPER_TABLES = {"rbm": "2", "dbm": "3"}
#: families in the table's order (others after them, by name)
_FAMILY_ORDER = ("rbm", "dbm", "grbm")
#: AIS start (initial) distributions in the order the table prefers them, fixed in advance: the data base rate
#: (Salakhutdinov & Murray 2008's AIS, which Li et al. cite for their Tables 2-3), else the uniform
#: distribution; any other start after these, by name.  Choosing the start of the largest estimate instead
#: would report the maximum of noisy estimates, biased upwards.
START_PREFERENCE = ("base-rate", "uniform")
#: ``init`` -> its columns ``(value, s.e.)`` in the table, for each start of :data:`START_PREFERENCE`
START_COLUMNS = {i: (f"ais_{i.replace('-', '_')}", f"ais_{i.replace('-', '_')}_se") for i in START_PREFERENCE}

LEARNER_TABLE_COLUMNS = [
    "model",
    "dataset",
    "source",
    "family",
    "learner",
    "ablation",
    "hidden_sizes",
    "aux_size",
    "selected_iteration",
    "K",
    "init",
    "n_seeds",
    "ais",
    "ais_se",
    *(c for pair in START_COLUMNS.values() for c in pair),
    "exact",
    "paper_table",
    "paper_row",
    "paper",
    "diff",
    "tolerance",
    "within_uncertainty",
    "paper_note",
    "bound",
    "bound_log_z",
    "reference_log_z",
    "reference",
    "bound_holds",
    "bound_violated_rows",
    "bound_rows",
]

#: the learner's running bound of log Z in its history: learner -> (column, its s.e. column); its direction
#: is the registry's (:attr:`logzbench.registry.LearnerSpec.bound`)
LOG_Z_BOUNDS = {"avil": ("log_z_bound", "log_z_bound_stderr"), "nvil": ("log_z_upper_bound", "")}
#: the datasets of the paper's Tables 2-3, in its column order (the sources' names)
PAPER_COLUMNS = ("digits-avil", "adult", "connect4", "dna", "mushrooms", "nips-0-12", "ocr_letters", "rcv1", "web")


# --------------------------------------------------------------------------- the models
@dataclass(frozen=True)
class LearnerModel:
    """A learner-trained model as the report sees it.

    ``files`` is the directory of its training outputs (``None`` for a record given as a dict);
    ``data`` its prepared dataset file when that exists; ``source`` the dataset's source name
    (the prepared file's ``meta.dataset``, else the record's ``source`` or ``dataset``);
    ``image_shape`` from the prepared file's meta (``None``: no images).
    """

    model: str
    dataset: str
    source: str
    family: str
    learner: str
    hidden_sizes: tuple[int, ...]
    aux_size: int | None
    files: Path | None = None
    data: Path | None = None
    image_shape: tuple[int, ...] | None = None
    selected_iteration: int | None = None
    ablation: str = ""

    def columns(self) -> dict[str, Any]:
        """The columns that name the model in the learner tables (``table_learners.csv``,
        ``table_learner_timing.csv``): model, dataset, source, family, learner, hidden sizes (``50-50``)."""
        return {
            "model": self.model,
            "dataset": self.dataset,
            "source": self.source,
            "family": self.family,
            "learner": self.learner,
            "hidden_sizes": "-".join(str(h) for h in self.hidden_sizes),
        }

    def file(self, suffix: str) -> Path | None:
        """``<files>/<model><suffix>`` when it exists."""
        p = self.files / f"{self.model}{suffix}" if self.files is not None else None
        return p if p is not None and p.is_file() else None


def _read_record(item: str | os.PathLike | Mapping[str, Any]) -> tuple[dict[str, Any], Path | None]:
    """A training summary record and the directory of its model's files (``None`` for a dict)."""
    if isinstance(item, Mapping):
        return dict(item), None
    path = Path(item)
    with open(path) as fh:
        rec = json.load(fh)
    rec.setdefault("model", path.stem)
    return rec, path.parent


def _dataset_meta(data: Path | None) -> Mapping[str, Any]:
    if data is None:
        return {}
    with np.load(data, allow_pickle=False) as z:
        return json.loads(str(z["meta"])) if "meta" in z.files else {}


def _history(m: LearnerModel) -> pd.DataFrame | None:
    path = m.file(".history.csv")
    return pd.read_csv(path) if path is not None else None


def learner_models(
    records: Iterable[str | os.PathLike | Mapping[str, Any]], data_dir: str | os.PathLike | None = None
) -> list[LearnerModel]:
    """The learner-trained models among training summary records (``results/models/<model>.json``
    files or their dicts), their prepared datasets looked up as ``<data_dir>/<dataset>.npz``."""
    out = []
    for item in records:
        rec, files = _read_record(item)
        hp = dict(rec.get("hyperparams") or {})
        if not hp.get("learner"):
            continue
        dataset = str(rec.get("dataset", ""))
        data = Path(data_dir) / f"{dataset}.npz" if data_dir is not None else None
        data = data if data is not None and data.is_file() else None
        meta = _dataset_meta(data)
        shape = meta.get("image_shape")
        hidden = rec.get("hidden_sizes") or hp.get("hidden_sizes") or [rec.get("n_hidden") or hp.get("n_hidden")]
        out.append(
            LearnerModel(
                model=str(rec.get("model", "?")),
                dataset=dataset,
                source=str(meta.get("dataset") or rec.get("source") or dataset),
                family=str(rec.get("family") or hp.get("family") or "rbm").lower(),
                learner=str(hp["learner"]).lower(),
                hidden_sizes=tuple(int(h) for h in hidden if h is not None),
                aux_size=int_or_none(hp.get("aux_size")),
                files=files,
                data=data,
                image_shape=tuple(int(s) for s in shape) if shape else None,
                selected_iteration=int_or_none((rec.get("final") or {}).get("selected_iteration")),
                ablation=str(hp.get("ablation") or ""),
            )
        )
    return out


def bounds_vs_ais_datasets(models: Sequence[LearnerModel]) -> dict[str, list[LearnerModel]]:
    """Datasets with an NVIL-trained and an AVIL-trained RBM (:func:`.compared.compared_learner_datasets`):
    {dataset: those RBMs, NVIL first}."""
    datasets = compared_learner_datasets((m.dataset, m.family, m.learner) for m in models)
    return {
        d: sorted(
            (m for m in models if m.dataset == d and m.family == COMPARED_FAMILY and m.learner in COMPARED_LEARNERS),
            key=lambda m: (m.learner != "nvil", m.model),
        )
        for d in datasets
    }


# --------------------------------------------------------------------------- the table
_NO_AIS = {
    "K": pd.NA,
    "init": "",
    "n_seeds": 0,
    "ais": float("nan"),
    "ais_se": float("nan"),
    "log_z": float("nan"),
    "log_z_se": float("nan"),
    "by_init": {},
}


def reported_start(inits: Iterable[str]) -> str | None:
    """The start distribution the learner table reports among ``inits`` (the starts run), by the fixed
    order :data:`START_PREFERENCE` (base-rate, then uniform, then the others by name); ``None`` when
    there is none.  Never chosen by value."""
    present = {str(i) for i in inits}
    order = [i for i in START_PREFERENCE if i in present] + sorted(present - set(START_PREFERENCE))
    return order[0] if order else None


def _one_entry(rows: pd.DataFrame) -> pd.Series:
    """One summary row among those of one start and K: the default AIS estimator entry (``ais``) when
    there, else the first entry by name (a fixed rule, not the largest value)."""
    if "estimator" in rows:
        rows = rows.assign(_k=[(str(e) != "ais", str(e)) for e in rows["estimator"]]).sort_values("_k", kind="stable")
    return rows.iloc[0]


def _estimate(row: pd.Series) -> dict[str, Any]:
    return {
        "n_seeds": int(row["n_seeds"]),
        "ais": float(row["mean_test_ll"]),
        "ais_se": float(row["mean_test_ll_se"]),
        "log_z": float(row["log_z"]),
        "log_z_se": float(row["log_z_se"]),
    }


def final_ais(summary: pd.DataFrame, model: str) -> dict[str, Any]:
    """The model's AIS estimate at its largest K, from the report's summary over seeds
    (:func:`.records.summarize`).

    Every start distribution run at that K has its estimate in ``by_init`` (init -> ``n_seeds``,
    ``ais``, ``ais_se``, ``log_z``, ``log_z_se``); the one reported is chosen by a rule fixed in
    advance (:func:`reported_start`: base-rate, else uniform, else the first other by name), never by
    value -- picking the largest of noisy estimates would bias the reported value upwards.  Several AIS
    estimator entries of one start: the default ``ais`` entry, else the first by name.

    Returns
    -------
    dict
        ``K``, ``init`` (the reported start), ``n_seeds``, the mean test log-likelihood ``ais`` with its
        standard error ``ais_se``, ``log_z`` / ``log_z_se`` of that start, and ``by_init``; ``K`` NA,
        ``init`` empty and NaN values when the model has no AIS estimate.
    """
    rows = summary[
        (summary["model"] == model)
        & (summary["method"] == "ais")
        & summary["K"].notna()
        & summary["mean_test_ll"].notna()
    ]
    if rows.empty:
        return {**_NO_AIS, "by_init": {}}
    rows = rows[rows["K"] == rows["K"].max()]
    inits = rows["init"].fillna("").astype(str)  # "": a model without a choice of start
    by_init = {init: _estimate(_one_entry(group)) for init, group in rows.groupby(inits, sort=True)}
    start = reported_start(by_init)
    return {"K": int(rows["K"].iloc[0]), "init": start, **by_init[start], "by_init": by_init}


def _exact(summary: pd.DataFrame, model: str, column: str) -> float:
    ex = summary.loc[summary["model"] == model, column].dropna()
    return float(ex.iloc[0]) if len(ex) else float("nan")


def _reference(row: Mapping[str, Any]) -> tuple[float, float, str]:
    """A history row's reference log Z: exact where logged, else the AIS monitor's (value, s.e., name)."""
    for col, se_col, name in (("exact_log_z", "", "exact"), ("ais_log_z", "ais_log_z_stderr", "AIS")):
        x = as_float(row.get(col))
        if math.isfinite(x):
            se = as_float(row.get(se_col)) if se_col else 0.0
            return x, se if math.isfinite(se) else 0.0, name
    return math.nan, math.nan, ""


def bound_check(m: LearnerModel, hist: pd.DataFrame | None, z: float) -> dict[str, Any]:
    """Whether the learner's running bound of log Z (:data:`LOG_Z_BOUNDS`: AVIL's decoder lower bound,
    NVIL's chi-square upper bound) sits on its side of the reference log Z (exact where the history
    logs it, else its AIS monitor's), beyond ``z`` combined standard errors.

    Returns ``bound`` (lower / upper / none), at the last logged iteration ``bound_log_z``,
    ``reference_log_z``, ``reference`` (exact / AIS / empty) and ``bound_holds`` (yes / no / ``no bound``
    / ``no reference``), and over the logged iterations with a reference ``bound_rows`` and
    ``bound_violated_rows`` (NVIL's Fig. 5a: its estimate falls below log Z when ``q`` misses modes)."""
    columns = LOG_Z_BOUNDS.get(m.learner)
    side = LEARNERS[m.learner].bound if m.learner in LEARNERS else "none"
    out = {
        "bound": side if columns else "none",
        "bound_log_z": math.nan,
        "reference_log_z": math.nan,
        "reference": "",
        "bound_holds": "no bound",
        "bound_violated_rows": 0,
        "bound_rows": 0,
    }
    if columns is None or hist is None or hist.empty or columns[0] not in hist:
        return out
    col, se_col = columns
    violated = []
    last = None
    for _, row in hist.iterrows():
        b = as_float(row.get(col))
        ref, ref_se, name = _reference(row)
        if not (math.isfinite(b) and math.isfinite(ref)):
            continue
        se = as_float(row.get(se_col)) if se_col else 0.0
        tol = z * math.hypot(se if math.isfinite(se) else 0.0, ref_se)
        violated.append((b - ref > tol) if side == "lower" else (ref - b > tol))
        last = (b, ref, name, violated[-1])
    out["bound_rows"], out["bound_violated_rows"] = len(violated), int(sum(violated))
    b_last = as_float(hist[col].iloc[-1])
    out["bound_log_z"] = b_last
    if last is None:
        out["bound_holds"] = "no reference"
        return out
    out["reference_log_z"], out["reference"] = last[1], last[2]
    out["bound_holds"] = "no" if last[3] else "yes"
    return out


def _table_row(m: LearnerModel, summary: pd.DataFrame, published: pd.DataFrame, z: float) -> dict[str, Any]:
    ais = final_ais(summary, m.model)
    # an ablation (Fig. 4) is not a row of the paper's tables
    table = PAPER_TABLES.get(m.family) if not m.ablation else None
    paper_row = f"{m.family}/{m.learner}"
    hit = lookup(published, PAPER, table, paper_row, m.source, PAPER_QUANTITY) if table is not None else None
    paper = float(hit["value"]) if hit is not None else float("nan")
    cols = m.columns()
    return {
        **{k: cols[k] for k in ("model", "dataset", "source", "family", "learner")},
        "ablation": m.ablation,
        "hidden_sizes": cols["hidden_sizes"],
        "aux_size": m.aux_size,
        **{k: ais[k] for k in ("K", "init", "n_seeds", "ais", "ais_se")},
        **{
            col: ais["by_init"].get(init, {}).get(key, float("nan"))
            for init, cols in START_COLUMNS.items()
            for col, key in zip(cols, ("ais", "ais_se"))
        },
        "exact": _exact(summary, m.model, "exact_test_ll"),
        "paper_table": table if table is not None else "",
        "paper_row": paper_row if table is not None else "",
        "paper": paper,
        "diff": ais["ais"] - paper,
        "tolerance": z * ais["ais_se"],
        "within_uncertainty": within_uncertainty(ais["ais"], ais["ais_se"], paper, z),
        "paper_note": hit["note"] if hit is not None else "",
        "selected_iteration": m.selected_iteration,
        **bound_check(m, _history(m), z),
    }


def make_table_learners(
    summary: pd.DataFrame, models: Sequence[LearnerModel], *, z: float = 2.0, published: pd.DataFrame | None = None
) -> pd.DataFrame:
    """``table_learners.csv``: one row per learner-trained model (columns :data:`LEARNER_TABLE_COLUMNS`).

    From the report's ``summary`` over seeds (:func:`.records.summarize`). ``K``, ``init``, ``n_seeds``,
    ``ais``, ``ais_se``: our mean test log-likelihood by AIS at the largest K (:func:`final_ais`) from
    the start distribution ``init`` -- base-rate when run, else uniform (a rule fixed in advance,
    :data:`START_PREFERENCE`) -- its standard error (nats), the seeds averaged; ``ais_base_rate``,
    ``ais_base_rate_se``, ``ais_uniform``, ``ais_uniform_se`` (:data:`START_COLUMNS`): every start's
    value at that K (NaN for a start not run), the reported one included; ``exact``: the exact value
    where the report has one; ``paper``: the paper's value (:data:`PAPER`, Table :data:`PAPER_TABLES` of
    the family, row ``<family>/<learner>``, column the dataset's source; NaN when it has none, e.g. a
    GRBM or an ``ablation``); ``diff`` = ``ais`` - ``paper``; ``tolerance`` = ``z`` x ``ais_se``;
    ``within_uncertainty``: ``yes`` / ``no`` (``|diff| <= tolerance``), ``no uncertainty`` (no standard
    error), ``no paper value`` or ``no AIS estimate``.  Rows by family (RBMs, DBMs, GRBMs), source, learner.
    With no models: the header only.
    """
    published = load_published() if published is None else published
    rows = [_table_row(m, summary, published, z) for m in models]
    t = pd.DataFrame(rows, columns=LEARNER_TABLE_COLUMNS)
    for c in ("K", "aux_size", "n_seeds", "selected_iteration", "bound_violated_rows", "bound_rows"):
        t[c] = pd.array(t[c], dtype="Int64")
    order = {f: i for i, f in enumerate(_FAMILY_ORDER)}
    key = t["family"].map(lambda f: (order.get(f, len(order)), f))
    t = t.assign(_key=key).sort_values(["_key", "source", "learner", "model"], kind="stable")
    return t.drop(columns="_key").reset_index(drop=True)


def make_table_learners_paper(table: pd.DataFrame, published: pd.DataFrame | None = None) -> pd.DataFrame:
    """``table_learners_paper.csv``: the paper's Tables 2-3 as they are printed -- one row per table,
    learner and quantity (``ours``: our AIS mean test log-likelihood, ``ours_se``, ``paper``, ``diff``),
    one column per dataset in the paper's order (:data:`PAPER_COLUMNS`; other sources after them) --
    from the rows of :func:`make_table_learners` (the first model of a source, learner and table; its AIS
    start chosen by the same fixed rule, :func:`reported_start`) and
    every published value of the two tables (so a dataset we did not run shows the paper's value only)."""
    published = load_published() if published is None else published
    pub = published[
        (published["paper"] == PAPER)
        & published["table"].astype(str).isin(PAPER_TABLES.values())
        & (published["quantity"] == PAPER_QUANTITY)
    ]
    cells: dict[tuple[str, str, str], dict[str, float]] = {}
    for _, r in pub.iterrows():
        cells.setdefault((str(r["table"]), str(r["row"]).split("/")[-1], "paper"), {})[str(r["column"])] = float(
            r["value"]
        )
    ours = table[table["paper_table"].astype(str) != ""] if len(table) else table
    for _, r in ours.drop_duplicates(["paper_table", "learner", "source"]).iterrows():
        key = (str(r["paper_table"]), str(r["learner"]))
        for what, value in (("ours", r["ais"]), ("ours_se", r["ais_se"]), ("diff", r["diff"])):
            cells.setdefault((*key, what), {})[str(r["source"])] = float(value)
    sources = sorted(
        {c for row in cells.values() for c in row},
        key=lambda c: (PAPER_COLUMNS.index(c) if c in PAPER_COLUMNS else len(PAPER_COLUMNS), c),
    )
    what_order = {"ours": 0, "ours_se": 1, "paper": 2, "diff": 3}
    keys = sorted(cells, key=lambda k: (k[0], k[1], what_order[k[2]]))
    rows = [
        {
            "table": k[0],
            "learner": learner_label(k[1]),
            "value": k[2],
            **{c: cells[k].get(c, float("nan")) for c in sources},
        }
        for k in keys
    ]
    return pd.DataFrame(rows, columns=["table", "learner", "value", *sources])
