"""The report's tables: the papers' layouts, the ground truth of log Z, bias / MSE over seeds, flag rows."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .methods import CONTINUOUS_FAMILIES, CONTINUOUS_METHODS, DEEP_FAMILIES, INIT_ORDER, LOG_Z_METHODS

#: the per-seed average of AIS and reverse AIS (the paper's "average of AIS and RAISE")
AVERAGE_METHOD = "avg-ais-reverse-ais"
ANNEALED_TRIAL_COLUMNS = [
    "model",
    "family",
    "init",
    "schedule",
    "K",
    "estimator",
    "method",
    "n_trials",
    "seeds",
    "chains",
    "bias",
    "mse",
    "sd",
    "bias_se",
    "mean_stderr",
    "coverage",
    "mean_seconds",
    "truth",
    "truth_source",
]
FLAG_ROW_COLUMNS = ["model", "estimator", "method", "schedule", "K", "init", "flag"]


# --------------------------------------------------------------------------- helpers
def _is_deep(summary: pd.DataFrame) -> pd.Series:
    fam = summary["family"] if "family" in summary else pd.Series("rbm", index=summary.index)
    return fam.isin(DEEP_FAMILIES)


def _inits(summary: pd.DataFrame) -> list[str]:
    annealed = set(summary.loc[summary["method"].isin(["ais", "raise"]), "init"]) - {""}
    inits = [i for i in INIT_ORDER if i in annealed] + sorted(annealed - set(INIT_ORDER))
    return inits or list(INIT_ORDER)


def _by_test_set(summary: pd.DataFrame) -> pd.DataFrame:
    """``summary`` with the estimates on a per-class test subset as a model of their own, named
    ``"<model> (<test set>)"`` (its exact value is the subset's): the RAISE tables compare AIS and
    RAISE on the same test rows."""
    if not (summary["test_set"] != "").any():
        return summary
    out = summary.copy()
    sub = out["test_set"] != ""
    out.loc[sub, "model"] = out.loc[sub, "model"] + " (" + out.loc[sub, "test_set"] + ")"
    return out


def _table_keys(summary: pd.DataFrame) -> pd.DataFrame:
    """model x schedule x K of the annealed estimates, plus one row (K = NA) per model without any."""
    annealed = summary[summary["method"].isin(["ais", "raise"])]
    keys = annealed[["model", "schedule", "K"]].drop_duplicates()
    models_without = sorted(set(summary["model"]) - set(keys["model"]))
    return pd.concat([keys, pd.DataFrame({"model": models_without, "schedule": "", "K": pd.NA})], ignore_index=True)


def _at_k(frame: pd.DataFrame, K) -> pd.DataFrame:
    """Rows of ``frame`` at ``K`` (none when ``K`` is NA)."""
    return frame[(frame["K"] == K).fillna(False)] if not pd.isna(K) else frame.iloc[0:0]


def _exact(ms: pd.DataFrame) -> float:
    """The model's exact mean test log-likelihood (NaN when it has none)."""
    ex = ms["exact_test_ll"].dropna()
    return float(ex.iloc[0]) if len(ex) else float("nan")


def _annealed_cell(ms: pd.DataFrame, sched: str, K, init: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The RAISE and the AIS summary rows of one model at (schedule, K, init)."""
    sel = _at_k(ms[(ms["schedule"] == sched) & (ms["init"] == init)], K)
    return sel[sel["method"] == "raise"], sel[sel["method"] == "ais"]


def _split(flags: pd.Series) -> list[str]:
    """The reasons of some rows' ``flags``, in order."""
    return [f for f in "; ".join(flags).split("; ") if f]


def _cell_flags(init: str, r_: pd.DataFrame, a_: pd.DataFrame) -> list[str]:
    flags = []
    for method, part in (("RAISE", r_), ("AIS", a_)):
        for f in _split(part["flags"]):  # shared AIS/RAISE flags name their init already
            flags.append(f if f"{init}, K=" in f else f"{method} ({init}): {f}")
    return flags


def _first(frame: pd.DataFrame, col: str) -> float:
    return float(frame[col].iloc[0]) if len(frame) else float("nan")


def _mean_se(frame: pd.DataFrame, value: str, se: str) -> tuple[float, float]:
    """Mean of the rows' values and the standard error of that mean (from the rows' errors)."""
    v = frame[value].dropna()
    if not len(v):
        return float("nan"), float("nan")
    e = frame.loc[v.index, se].to_numpy(dtype=float)
    return float(v.mean()), float(np.sqrt(np.sum(e**2)) / len(v)) if np.isfinite(e).all() else float("nan")


def _finish(rows: list[dict[str, Any]], cols: list[str]) -> pd.DataFrame:
    """Table of ``rows`` sorted by model, schedule and K (an integer column)."""
    t = pd.DataFrame(rows, columns=cols)
    t["K"] = pd.array(t["K"], dtype="Int64")
    return t.sort_values(["model", "schedule", "K"], kind="stable", na_position="first").reset_index(drop=True)


# --------------------------------------------------------------------------- RAISE tables 1 and 2
def _csl_cells(ms: pd.DataFrame, K, csl_cols: dict[str, str]) -> tuple[dict[str, float], list[str]]:
    """CSL column values of one model at ``K`` and their flags."""
    values, flags = {}, []
    for name, col in csl_cols.items():
        c = _at_k(ms[ms["estimator"] == name], K)
        values[col], values[f"{col}_se"] = _mean_se(c, "mean_test_ll", "mean_test_ll_se")
        flags += [f if f.startswith("CSL") else f"CSL: {f}" for f in _split(c["flags"])]
    return values, flags


def make_table1(summary: pd.DataFrame) -> pd.DataFrame:
    """RAISE Table 1 layout for the RBMs (deep models go to :func:`make_table2`): one row per
    model x schedule x K.

    Columns ``model, schedule, K, exact, csl, csl_se`` (one pair per CSL estimator when several:
    ``csl:<name>, csl:<name>_se``), ``raise_<init>, raise_<init>_se, ais_<init>, ais_<init>_se,
    gap_<init>, gap_<init>_se`` for each initial distribution present (``uniform`` and ``base-rate``
    first), and ``flags``.  Values are mean test log-likelihoods (nats), averaged over seeds; ``gap``
    is AIS - RAISE.  Each ``_se`` is the standard error of the value beside it (the summary's
    ``mean_test_ll_se``: the runs' own errors, else the spread over seeds; the gap's: the two combined
    in quadrature), as in :func:`make_table2`, so that a reader can tell a gap from noise.
    """
    summary = _by_test_set(summary[~_is_deep(summary) & ~summary["family"].isin(CONTINUOUS_FAMILIES)])
    inits = _inits(summary)
    csl_names = sorted(set(summary.loc[summary["method"] == "csl", "estimator"]))
    csl_cols = {n: ("csl" if len(csl_names) == 1 else f"csl:{n}") for n in csl_names}
    rows = []
    for _, k in _table_keys(summary).iterrows():
        model, sched, K = k["model"], k["schedule"], k["K"]
        ms = summary[summary["model"] == model]
        csl, flags = _csl_cells(ms, K, csl_cols)
        row: dict[str, Any] = {"model": model, "schedule": sched, "K": K, "exact": _exact(ms), **csl}
        for init in inits:
            values, cell_flags = _annealed_cells(ms, sched, K, init)
            row.update(values)
            flags += cell_flags
        row["flags"] = "; ".join(dict.fromkeys(flags))
        rows.append(row)
    cols = ["model", "schedule", "K", "exact"]
    for col in csl_cols.values():
        cols += [col, f"{col}_se"]
    for init in inits:
        cols += [f"raise_{init}", f"raise_{init}_se", f"ais_{init}", f"ais_{init}_se", f"gap_{init}", f"gap_{init}_se"]
    return _finish(rows, cols + ["flags"])


def _annealed_cells(ms: pd.DataFrame, sched: str, K, init: str) -> tuple[dict[str, float], list[str]]:
    """RAISE, AIS and gap (with standard errors) of one model at (schedule, K, init), and their flags
    (a row's cells of table1 and table2)."""
    r_, a_ = _annealed_cell(ms, sched, K, init)
    rv, rse = _first(r_, "mean_test_ll"), _first(r_, "mean_test_ll_se")
    av, ase = _first(a_, "mean_test_ll"), _first(a_, "mean_test_ll_se")
    values = {
        f"raise_{init}": rv,
        f"raise_{init}_se": rse,
        f"ais_{init}": av,
        f"ais_{init}_se": ase,
        f"gap_{init}": av - rv,
        f"gap_{init}_se": math.sqrt(rse**2 + ase**2),
    }
    return values, _cell_flags(init, r_, a_)


def make_table2(summary: pd.DataFrame) -> pd.DataFrame:
    """RAISE Table 2 layout for the deep models (DBMs, DBNs): one row per model x schedule x K.

    Columns ``model, family, architecture, schedule, K, n_seeds, exact``, then for each initial
    distribution present ``raise_<init>, raise_<init>_se, ais_<init>, ais_<init>_se, gap_<init>,
    gap_<init>_se`` (a DBN has no data-base-rate estimates: NaN), then the importance-sampling
    estimate of the test set's mean ``log f(v)`` (``log_f_is`` with its standard error and the
    estimated Jensen gap of ``log f-hat``) and the DBM mean-field lower bound ``log_f_mean_field``
    (averaged over the AIS and RAISE runs of the row), and ``flags``.  Values are mean test
    log-likelihoods (nats) averaged over seeds, standard errors of those means; ``gap`` is
    AIS - RAISE with the combined standard error.
    """
    summary = _by_test_set(summary[_is_deep(summary)])
    inits = _inits(summary)
    rows = []
    for _, k in _table_keys(summary).iterrows():
        model, sched, K = k["model"], k["schedule"], k["K"]
        ms = summary[summary["model"] == model]
        cells = _at_k(ms[ms["method"].isin(["ais", "raise"]) & (ms["schedule"] == sched)], K)
        row: dict[str, Any] = {
            "model": model,
            "family": ms["family"].iloc[0],
            "architecture": ms["architecture"].iloc[0],
            "schedule": sched,
            "K": K,
            "n_seeds": int(cells["n_seeds"].max()) if len(cells) else 0,
            "exact": _exact(ms),
        }
        flags: list[str] = []
        for init in inits:
            values, cell_flags = _annealed_cells(ms, sched, K, init)
            row.update(values)
            flags += cell_flags
        row["log_f_is"], row["log_f_is_se"] = _mean_se(cells, "log_f_is", "log_f_is_se")
        row["log_f_is_jensen_gap"] = float(cells["log_f_is_jensen_gap"].mean()) if len(cells) else float("nan")
        row["log_f_mean_field"] = float(cells["log_f_mean_field"].mean()) if len(cells) else float("nan")
        row["flags"] = "; ".join(dict.fromkeys(flags))
        rows.append(row)
    cols = ["model", "family", "architecture", "schedule", "K", "n_seeds", "exact"]
    for init in inits:
        cols += [f"raise_{init}", f"raise_{init}_se", f"ais_{init}", f"ais_{init}_se", f"gap_{init}", f"gap_{init}_se"]
    t = _finish(rows, cols + ["log_f_is", "log_f_is_se", "log_f_is_jensen_gap", "log_f_mean_field", "flags"])
    t["n_seeds"] = pd.array(t["n_seeds"], dtype="Int64")
    return t


# --------------------------------------------------------------------------- Sohl-Dickstein & Culpepper table 1
def make_table_continuous(summary: pd.DataFrame) -> pd.DataFrame:
    """Sohl-Dickstein & Culpepper Table 1 layout for the continuous models: one row per model.

    Columns ``model, family, architecture`` (``M-size``), ``size``, ``exact`` (closed form, where
    one exists), for each estimator of :data:`CONTINUOUS_METHODS` run on the model its mean test
    log-likelihood at the largest K (mean over seeds), its standard error ``<est>_se`` and that
    ``<est>_K``, ``spread`` (the standard error of the mean over test points, sd / sqrt(n), of the
    best available estimate: the paper's "±"), ``n_test`` and ``flags``.
    """
    cont = summary[summary["family"].isin(CONTINUOUS_FAMILIES)]
    methods = [m for m in CONTINUOUS_METHODS if m in set(cont["method"])]
    rows = [_continuous_row(model, ms, methods) for model, ms in cont.groupby("model", sort=True)]
    cols = ["model", "family", "architecture", "size", "exact"]
    for m in methods:
        cols += [m, f"{m}_se", f"{m}_K"]
    t = pd.DataFrame(rows, columns=cols + ["spread", "n_test", "flags"])
    return t.sort_values(["family", "size", "model"], kind="stable").reset_index(drop=True)


def _continuous_row(model: str, ms: pd.DataFrame, methods: list[str]) -> dict[str, Any]:
    """One model's row of :func:`make_table_continuous`."""
    arch = ms["architecture"].iloc[0]
    row: dict[str, Any] = {
        "model": model,
        "family": ms["family"].iloc[0],
        "architecture": arch,
        "size": int(arch.split("-")[-1]) if arch else pd.NA,
        "exact": _exact(ms),
    }
    spread_src = ms[ms["method"] == "exact"]
    flags: list[str] = []
    for m in methods:
        g = ms[(ms["method"] == m) & ms["K"].notna()]
        if g.empty:
            row.update({m: float("nan"), f"{m}_se": float("nan"), f"{m}_K": pd.NA})
            continue
        top = g[g["K"] == g["K"].max()].iloc[0]
        row.update({m: float(top["mean_test_ll"]), f"{m}_se": float(top["mean_test_ll_se"]), f"{m}_K": int(top["K"])})
        flags += [f"{m}: {f}" for f in str(top["flags"]).split("; ") if f]
        if m == "hais" and spread_src.empty:
            spread_src = g[g["K"] == g["K"].max()]
    sd = spread_src["per_example_ll_sd"].dropna()
    n = spread_src["n_examples"].dropna()
    row["n_test"] = int(n.iloc[0]) if len(n) else pd.NA
    row["spread"] = float(sd.iloc[0]) / math.sqrt(int(n.iloc[0])) if len(sd) and len(n) else float("nan")
    row["flags"] = "; ".join(dict.fromkeys(flags))
    return row


# --------------------------------------------------------------------------- repeated log Z estimates
def _truth_row(model: str, g: pd.DataFrame, tolerance: float) -> dict[str, Any]:
    """One model's row of :func:`ground_truth`."""
    ex = g["exact_log_z"].dropna()
    if len(ex):
        return {"model": model, "truth": float(ex.iloc[0]), "truth_K": pd.NA, "truth_source": "exact"}
    a = g[(g["method"] == "ais") & g["log_z"].notna()]
    r = g[(g["method"] == "reverse-ais") & g["log_z"].notna()]
    common = sorted(set(a["K"].dropna().astype(int)) & set(r["K"].dropna().astype(int)))
    if not common:
        return {
            "model": model,
            "truth": float("nan"),
            "truth_K": pd.NA,
            "truth_source": "none: no exact value, no AIS and reverse-AIS runs at a common K",
        }
    k = common[-1]
    la, lr = float(a.loc[a["K"] == k, "log_z"].mean()), float(r.loc[r["K"] == k, "log_z"].mean())
    if abs(la - lr) <= tolerance:
        return {
            "model": model,
            "truth": 0.5 * (la + lr),
            "truth_K": k,
            "truth_source": f"mean of AIS {la:.3f} and reverse AIS {lr:.3f} at K={k} (agree within {tolerance:g} nat)",
        }
    return {
        "model": model,
        "truth": float("nan"),
        "truth_K": k,
        "truth_source": f"none: AIS {la:.3f} and reverse AIS {lr:.3f} at K={k} differ by "
        f"{abs(la - lr):.3f} > {tolerance:g} nat; run both at larger K",
    }


def ground_truth(per_run: pd.DataFrame, tolerance: float = 0.1) -> pd.DataFrame:
    """Reference ``log Z`` per model for the bias / MSE of repeated estimates (Liu et al. Sec. 6).

    The exact value where a model has one; otherwise the mean of the AIS and reverse-AIS
    estimates (mean over seeds) at the largest ``K`` where both were run, accepted only when they
    agree within ``tolerance`` nats (the paper's criterion: AIS and reverse AIS are stochastic
    lower and upper bounds, so agreement pins ``log Z`` down).  Columns ``model``, ``truth``
    (NaN when there is none), ``truth_K`` (the K used, NA for exact), ``truth_source``.
    """
    rows = [_truth_row(model, g, tolerance) for model, g in per_run.groupby("model", sort=True)]
    out = pd.DataFrame(rows, columns=["model", "truth", "truth_K", "truth_source"])
    out["truth_K"] = pd.array(out["truth_K"], dtype="Int64")
    return out


_TRIAL_KEYS = ["model", "family", "init", "schedule", "K"]


def _runs_against_truth(per_run: pd.DataFrame, truth: pd.DataFrame) -> pd.DataFrame:
    """Runs of :data:`LOG_Z_METHODS` with a log Z, of models with a truth, at a K other than the truth's."""
    t = truth.set_index("model")
    runs = per_run[per_run["method"].isin(LOG_Z_METHODS) & per_run["log_z"].notna()].copy()
    runs["truth"] = [float(t["truth"].get(m, float("nan"))) for m in runs["model"]]
    runs["truth_source"] = [str(t["truth_source"].get(m, "")) for m in runs["model"]]
    truth_k = [t["truth_K"].get(m, pd.NA) for m in runs["model"]]
    keep = runs["truth"].notna().to_numpy() & np.array(
        [bool(pd.isna(tk) or int(k) != int(tk)) for k, tk in zip(runs["K"], truth_k)], dtype=bool
    )
    return runs[keep]


def _averages(runs: pd.DataFrame) -> list[pd.Series]:
    """Per-seed :data:`AVERAGE_METHOD` runs of each setting with exactly one AIS and one reverse-AIS estimator."""
    extra = []
    for _, g in runs.groupby(_TRIAL_KEYS, sort=False, dropna=False):
        a, r = g[g["method"] == "ais"], g[g["method"] == "reverse-ais"]
        if a["estimator"].nunique() != 1 or r["estimator"].nunique() != 1:
            continue
        for _, row in a.merge(r, on="seed", suffixes=("", "_r")).iterrows():
            new = row[list(runs.columns)].copy()
            new["estimator"] = new["method"] = AVERAGE_METHOD
            new["log_z"] = 0.5 * (row["log_z"] + row["log_z_r"])
            new["log_z_stderr"] = 0.5 * math.hypot(row["log_z_stderr"], row["log_z_stderr_r"])
            new["seconds"] = row["seconds"] + row["seconds_r"]
            extra.append(new)
    return extra


def _trial_row(g: pd.DataFrame, z: float) -> dict[str, Any]:
    """Bias, MSE, spread and coverage of one setting's runs."""
    err = (g["log_z"] - g["truth"]).to_numpy(dtype=float)
    se = g["log_z_stderr"].to_numpy(dtype=float)
    n = len(err)
    sd = float(np.std(err, ddof=1)) if n > 1 else float("nan")
    return {
        "n_trials": n,
        "seeds": " ".join(str(int(x)) for x in g["seed"].dropna()),
        "chains": g["chains"].dropna().iloc[0] if g["chains"].notna().any() else pd.NA,
        "bias": float(err.mean()),
        "mse": float(np.mean(err**2)),
        "sd": sd,
        "bias_se": sd / math.sqrt(n) if n > 1 else float("nan"),
        "mean_stderr": float(np.nanmean(se)) if np.isfinite(se).any() else float("nan"),
        "coverage": float(np.mean(np.abs(err) <= z * se)) if np.isfinite(se).all() else float("nan"),
        "mean_seconds": float(g["seconds"].mean()),
        "truth": float(g["truth"].iloc[0]),
        "truth_source": g["truth_source"].iloc[0],
    }


def annealed_trials(per_run: pd.DataFrame, truth: pd.DataFrame, z: float = 2.0) -> pd.DataFrame:
    """Bias and MSE of ``log Ẑ`` over seeds per model x init x schedule x K x estimator (Figs 3-4).

    Only log Z estimators from one annealing run (:data:`LOG_Z_METHODS`) of models with a
    ground truth (:func:`ground_truth`); runs at the ``K`` that defined the truth are left out.
    Where a setting has exactly one AIS and one reverse-AIS estimator, their per-seed average
    is added as :data:`AVERAGE_METHOD` (twice the samples, three times the sweeps of AIS).
    ``coverage`` is the fraction of seeds whose ``|error| <= z * stderr``.
    """
    runs = _runs_against_truth(per_run, truth)
    extra = _averages(runs)
    if extra:
        runs = pd.concat([runs, pd.DataFrame(extra)], ignore_index=True)
    keys = _TRIAL_KEYS + ["estimator", "method"]
    rows = [{**dict(zip(keys, k)), **_trial_row(g, z)} for k, g in runs.groupby(keys, sort=True, dropna=False)]
    out = pd.DataFrame(rows, columns=ANNEALED_TRIAL_COLUMNS)
    out["K"] = pd.array(out["K"], dtype="Int64")
    return out


# --------------------------------------------------------------------------- flags
def flag_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per reason of each flagged summary row (``model, estimator, method, schedule, K, init, flag``)."""
    rows = [
        {**{c: s[c] for c in FLAG_ROW_COLUMNS[:-1]}, "flag": f}
        for _, s in summary.iterrows()
        for f in s["flags"].split("; ")
        if f
    ]
    t = pd.DataFrame(rows, columns=FLAG_ROW_COLUMNS)
    t["K"] = pd.array(t["K"], dtype="Int64")
    return t


# --------------------------------------------------------------------------- CSL (Upadhya & Sastry Table 2)
#: the leading columns of table_csl.csv; then per model ``<model>``, ``<model>_var``, ``<model>_n``
CSL_TABLE_KEYS = ["block", "csl_mode", "csl_protocol", "burn_in", "thin", "N", "M"]


def _csl_block(mode: str, burn_in: float, burn_ins: list[float]) -> str:
    """``unbiased`` / ``biased, large burn-in (5000)`` / ``biased, small burn-in (10)``: the paper's
    blocks; a biased mode with one burn-in only is ``biased, burn-in B``."""
    if mode != "biased":
        return str(mode)
    b = int(burn_in)
    if len(burn_ins) < 2:
        return f"biased, burn-in {b}"
    size = "large" if burn_in == max(burn_ins) else "small" if burn_in == min(burn_ins) else "mid"
    return f"biased, {size} burn-in ({b})"


def make_table_csl(summary: pd.DataFrame) -> pd.DataFrame:
    """Upadhya & Sastry Table 2 layout of the CSL estimates: one row per (mode and burn-in block, protocol:
    ``fresh`` chains or Upadhya & Sastry's ``pooled`` ones, N = samples, M = parallel chains), one column
    group per model: the mean test log-likelihood
    over seeds (``<model>``), its variance over seeds (``<model>_var``, the paper's sigma^2 over
    100 repeats) and the number of seeds (``<model>_n``).

    ``N = M * K / thin`` with K the sweeps per chain.  Rows sorted by block (unbiased first), N, M;
    models in the order of the summary.  Header only without CSL estimates."""
    csl = summary[summary["method"] == "csl"] if len(summary) else summary
    models = list(dict.fromkeys(csl["model"])) if len(csl) else []
    cols = CSL_TABLE_KEYS + [f"{m}{s}" for m in models for s in ("", "_var", "_n")]
    if csl.empty:
        return pd.DataFrame(columns=cols)
    csl = csl.copy()
    csl["N"] = [
        int(round(m * k / t)) if all(pd.notna(x) for x in (m, k, t)) and t else pd.NA
        for m, k, t in zip(csl["chains"], csl["K"], csl["thin"])
    ]
    burn_ins = {mode: sorted(set(g["burn_in"].dropna())) for mode, g in csl.groupby("csl_mode")}
    csl["block"] = [_csl_block(mode, b, burn_ins.get(mode, [])) for mode, b in zip(csl["csl_mode"], csl["burn_in"])]
    rows = []
    keys = ["block", "csl_mode", "csl_protocol", "burn_in", "thin", "N", "chains"]
    for key, g in csl.groupby(keys, dropna=False, sort=False):
        row = dict(zip(CSL_TABLE_KEYS, key))
        for m in models:
            gm = g[g["model"] == m]
            row[m] = float(gm["mean_test_ll"].iloc[0]) if len(gm) else float("nan")
            sd = float(gm["mean_test_ll_sd"].iloc[0]) if len(gm) else float("nan")
            row[f"{m}_var"] = sd**2
            row[f"{m}_n"] = int(gm["n_seeds"].iloc[0]) if len(gm) else 0
        rows.append(row)
    table = pd.DataFrame(rows, columns=cols)
    table["_order"] = (table["csl_mode"] != "unbiased").astype(int)
    table = table.sort_values(["_order", "block", "N", "M"], kind="stable").drop(columns="_order")
    for c in ("N", "M"):
        table[c] = pd.array(table[c], dtype="Int64")
    return table.reset_index(drop=True)
