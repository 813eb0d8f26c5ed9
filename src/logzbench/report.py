"""Benchmark report: tables, flags and plots from estimate records.

:func:`build_report` reads every estimate JSON (as written by the workflow's estimate step
or by ``logzbench estimate``), and writes into ``out_dir``:

``per_run.csv``
    One row per estimate (model x estimator x K x init x seed), with its own flags.
``summary.csv``
    One row per model x estimator x schedule x K x init, aggregated over seeds: mean,
    spread (sd, min, max) and standard error of the mean test log-likelihood and of log Z,
    the exact values where known, the AIS - RAISE gap and the flags.
``table1.csv``
    RAISE Table 1 layout (RBMs only), one row per model x schedule x K: exact, CSL, and
    RAISE / AIS / gap (= AIS - RAISE) for each initial distribution (``uniform``, ``base-rate``).
``table2.csv``
    RAISE Table 2 layout (deep models: DBMs and DBNs), one row per model x schedule x K:
    RAISE, AIS and gap = AIS - RAISE with standard errors for each initial distribution
    (DBNs: uniform only), exact where enumeration was affordable, and the importance-sampling
    (and DBM mean-field) estimates of the mean ``log f(v)`` of the test set.
``flags.csv``
    One row per flag reason of a summary row.
``report.json``
    Counts, thresholds and the flags, machine-readable.
``plots/<model>.png``
    Mean test log-likelihood vs K per model: AIS and RAISE per initial distribution with
    error bars, CSL, and the exact value as a horizontal line.

Flags (readable reasons in a ``flags`` column):

* AIS and RAISE (same model, schedule, K, init) disagree by more than ``gap_threshold`` nats;
* RAISE exceeds AIS by more than ``z`` combined standard errors (RAISE is a stochastic
  lower bound of the annealing model's log-likelihood, AIS an upper bound of the RBM's);
* a stochastic lower bound (RAISE, CSL) exceeds the exact value by more than ``z``
  standard errors;
* the effective sample size is below ``ess_fraction`` of the chains.

With a ``tracking_uri`` the flags are also set as tags (``logzbench.flag``,
``logzbench.flagged``) on the runs of the affected estimates.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from .plotting import pyplot, save_figure
from .utils import write_csv_atomic, write_json_atomic

__all__ = [
    "ReportThresholds",
    "build_report",
    "load_results",
    "normalize_record",
    "summarize",
    "apply_flags",
    "make_table1",
    "make_table2",
    "make_table_continuous",
    "plot_model_size",
    "ground_truth",
    "annealed_trials",
    "plot_annealed_trials",
    "plot_model",
    "plot_history",
]

LOWER_BOUND_METHODS = ("raise", "csl")
#: methods with an annealing schedule, swept over K and the initial distribution
ANNEALED_METHODS = ("ais", "raise", "ads", "ads-multinomial", "reverse-ais")
#: estimators of continuous models (Sohl-Dickstein & Culpepper 2012), swept over K (no init)
CONTINUOUS_METHODS = ("hais", "ais-hmc", "ais-mh")
#: continuous families: analysis models (HAIS errs high on their log-likelihood, as AIS does) and
#: generative ones (one run per test point: log p-hat(x) errs low)
ANALYSIS_FAMILIES = ("poe-laplace", "poe-student-t", "mcrbm")
GENERATIVE_FAMILIES = ("linear-gaussian", "linear-laplace", "bilinear")
CONTINUOUS_FAMILIES = ANALYSIS_FAMILIES + GENERATIVE_FAMILIES
INIT_ORDER = ("uniform", "base-rate")
DEEP_FAMILIES = ("dbm", "dbn")
#: per-run summaries of the importance-sampling log f(v) of deep models (EstimateResult.extra)
LOG_F_COLUMNS = {"log_f_is": "mean_log_f_is", "log_f_is_stderr": "mean_log_f_is_stderr",
                 "log_f_is_jensen_gap": "mean_log_f_is_jensen_gap", "log_f_mean_field": "mean_log_f_mean_field",
                 "log_f_is_ess_mean": "is_ess_mean", "log_f_is_ess_min": "is_ess_min", "is_samples": "is_samples"}

PER_RUN_COLUMNS = [
    "model", "family", "architecture", "dataset", "estimator", "method", "schedule", "K", "init", "seed", "chains",
    "n_weights", "n_examples", "mean_test_ll", "mean_test_ll_stderr", "log_z", "log_z_stderr", "ess", "ess_fraction",
    "seconds", "n_sweeps", "total_sweeps", "sweeps_per_second", "per_example_ll_sd", "exact_test_ll", "exact_log_z",
    "ll_minus_exact", "log_z_minus_exact", *LOG_F_COLUMNS, "device", "flags", "key", "mlflow_run_id", "source",
]
GROUP_COLUMNS = ["model", "dataset", "estimator", "method", "schedule", "K", "init"]


class ReportThresholds(dict):
    """Flag thresholds: ``gap_threshold`` (nats), ``ess_fraction``, ``z`` (standard errors)."""

    def __init__(self, gap_threshold: float = 1.0, ess_fraction: float = 0.1, z: float = 2.0):
        super().__init__(gap_threshold=float(gap_threshold), ess_fraction=float(ess_fraction), z=float(z))


# --------------------------------------------------------------------------- loading
def _num(x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return float("nan")
    return v


def _int_or_none(x: Any) -> int | None:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return None
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def _architecture(n_visible, hidden_sizes, n_hidden) -> str:
    """Layer sizes as ``"784-500-1000"`` (empty when unknown)."""
    sizes = list(hidden_sizes) if isinstance(hidden_sizes, (list, tuple)) else (
        [n_hidden] if n_hidden is not None else [])
    if n_visible is None or not sizes:
        return ""
    try:
        return "-".join(str(int(n)) for n in [n_visible, *sizes])
    except (TypeError, ValueError):
        return ""


def normalize_record(rec: Mapping[str, Any], source: str | os.PathLike | None = None) -> dict[str, Any]:
    """One flat row from an estimate record.

    Accepts the workflow's record (``{"model", "estimator", "method", "K", "init", "seed",
    ..., "result": EstimateResult.to_dict()}``) and a bare ``EstimateResult.to_dict()``
    whose ``settings`` name the model, K (``K``/``steps``), init and seed.
    """
    res = rec.get("result", rec)
    settings = dict(res.get("settings") or {})
    if "result" in rec:
        settings.update({k: v for k, v in rec.items() if k != "result" and v is not None})

    def pick(*names, default=None):
        for n in names:
            if settings.get(n) is not None:
                return settings[n]
        return default

    method = str(rec.get("method") or res.get("estimator") or pick("method") or "?").lower()
    estimator = str(rec.get("estimator") if "result" in rec and rec.get("estimator") else pick("name", default=method))
    model = pick("model", "model_name")
    if model is not None and (os.sep in str(model) or str(model).endswith(".npz")):
        model = Path(str(model)).stem
    if model is None and source is not None:
        model = Path(source).parent.parent.name or Path(source).stem
    uses_k = method in ANNEALED_METHODS + CONTINUOUS_METHODS + ("csl",)
    uses_init = method in ANNEALED_METHODS
    uses_seed = method != "exact"
    chains = pick("chains", default=res.get("n_chains"))
    # ESS is measured against the number of weights: chains (AIS), chains per example (RAISE),
    # samples (CSL)
    n_weights = res.get("n_chains") or chains
    ess, n_chains = _num(res.get("ess")), _num(n_weights)
    family = str(pick("family", "model_family", default="rbm")).lower()
    extra = res.get("extra") or {}
    return {
        "model": str(model) if model is not None else "?",
        "family": family,
        "architecture": _architecture(pick("n_visible"), pick("hidden_sizes", default=None), pick("n_hidden")),
        "dataset": pick("dataset", default=""),
        "estimator": estimator,
        "method": method,
        "schedule": (pick("schedule", default="linear") if method in ANNEALED_METHODS + CONTINUOUS_METHODS else ""),
        "K": _int_or_none(pick("K", "steps", "n_steps")) if uses_k else None,
        "init": str(pick("init", default="uniform")) if uses_init else "",
        "seed": _int_or_none(pick("seed", default=0)) if uses_seed else None,
        "chains": _int_or_none(chains),
        "n_weights": _int_or_none(n_weights),
        "n_examples": _int_or_none(res.get("n_examples", pick("n_examples"))),
        "mean_test_ll": _num(res.get("mean_log_likelihood")),
        "mean_test_ll_stderr": _num(res.get("mean_log_likelihood_stderr")),
        "log_z": _num(res.get("log_z")),
        "log_z_stderr": _num(res.get("log_z_stderr")),
        "ess": ess,
        "ess_fraction": ess / n_chains if n_chains and math.isfinite(n_chains) and n_chains > 0 else float("nan"),
        "seconds": _num(res.get("seconds")),
        "n_sweeps": _num(res.get("n_sweeps")),
        "total_sweeps": _num(res.get("total_sweeps")),
        "sweeps_per_second": _num(res.get("sweeps_per_second")),
        "per_example_ll_sd": _num(extra.get("per_example_ll_sd")),
        **{col: _num(extra.get(k)) for col, k in LOG_F_COLUMNS.items()},
        "device": pick("device", default=""),
        "key": rec.get("key", ""),
        "mlflow_run_id": rec.get("mlflow_run_id", ""),
        "source": str(source) if source is not None else "",
    }


def _iter_sources(results) -> Iterable[tuple[Mapping[str, Any], str | None]]:
    if isinstance(results, (str, os.PathLike, Mapping)):
        results = [results]
    for item in results:
        if isinstance(item, Mapping):
            yield item, None
            continue
        p = Path(item)
        if p.is_dir():
            for f in sorted(p.rglob("*.json")):
                yield from _read_json(f)
        else:
            yield from _read_json(p)


def _read_json(path: Path) -> Iterable[tuple[Mapping[str, Any], str]]:
    with open(path) as fh:
        obj = json.load(fh)
    if isinstance(obj, list):
        for o in obj:
            yield o, str(path)
    elif isinstance(obj, Mapping) and ("result" in obj or "estimator" in obj):
        yield obj, str(path)
    # other JSON files (e.g. a report.json in the same tree) are ignored


def load_results(results) -> pd.DataFrame:
    """Per-run table from a results directory (searched recursively for ``*.json``), JSON
    files, or record dicts.  Exact values of each model are attached to every row."""
    rows = [normalize_record(rec, src) for rec, src in _iter_sources(results)]
    df = pd.DataFrame(rows, columns=[c for c in PER_RUN_COLUMNS if c not in
                                     ("exact_test_ll", "exact_log_z", "ll_minus_exact", "log_z_minus_exact", "flags")])
    for c in ("K", "seed", "chains", "n_weights", "n_examples"):
        df[c] = pd.array(df[c], dtype="Int64")
    for c in ("family", "architecture", "dataset", "schedule", "init", "device", "key", "mlflow_run_id", "source"):
        df[c] = df[c].fillna("").astype(str)
    # one family / architecture per model (a record that does not name them, e.g. a bare exact
    # result, takes the model's other records')
    for c, default in (("family", "rbm"), ("architecture", "")):
        known = df[~df[c].isin(["", default])].groupby("model")[c].first()
        df[c] = [known.get(m, v) if v in ("", default) else v for m, v in zip(df["model"], df[c])]
    exact = df[df["method"] == "exact"].groupby("model").agg(exact_test_ll=("mean_test_ll", "mean"),
                                                             exact_log_z=("log_z", "mean"))
    df = df.merge(exact, how="left", left_on="model", right_index=True)
    df["ll_minus_exact"] = df["mean_test_ll"] - df["exact_test_ll"]
    df["log_z_minus_exact"] = df["log_z"] - df["exact_log_z"]
    df["flags"] = ""
    df = df.sort_values(["model", "method", "estimator", "schedule", "K", "init", "seed"], na_position="first",
                        kind="stable").reset_index(drop=True)
    return df[PER_RUN_COLUMNS]


# --------------------------------------------------------------------------- aggregation
def _combined_se(se: pd.Series, values: pd.Series) -> float:
    """Standard error of the mean over seeds: from the runs' own errors when all are known,
    else from the spread between seeds."""
    n = int(values.notna().sum())
    if n == 0:
        return float("nan")
    se = se[values.notna()]
    if len(se) and se.notna().all():
        return float(np.sqrt(np.sum(np.square(se.to_numpy(dtype=float)))) / n)
    if n > 1:
        return float(values.std(ddof=1) / math.sqrt(n))
    return float("nan")


def summarize(per_run: pd.DataFrame) -> pd.DataFrame:
    """Aggregate the per-run table over seeds (one row per model x estimator x schedule x K x init)."""
    rows = []
    for keys, g in per_run.groupby(GROUP_COLUMNS, dropna=False, sort=False):
        row = dict(zip(GROUP_COLUMNS, keys))
        ll, lz = g["mean_test_ll"], g["log_z"]
        seeds = [int(s) for s in g["seed"].dropna()]
        row.update({
            "family": g["family"].iloc[0],
            "architecture": g["architecture"].iloc[0],
            "n_seeds": len(g),
            "seeds": " ".join(map(str, seeds)),
            "chains": g["chains"].dropna().iloc[0] if g["chains"].notna().any() else pd.NA,
            "n_weights": g["n_weights"].dropna().iloc[0] if g["n_weights"].notna().any() else pd.NA,
            "n_examples": g["n_examples"].dropna().iloc[0] if g["n_examples"].notna().any() else pd.NA,
            "mean_test_ll": float(ll.mean()) if ll.notna().any() else float("nan"),
            "mean_test_ll_sd": float(ll.std(ddof=1)) if ll.notna().sum() > 1 else float("nan"),
            "mean_test_ll_se": _combined_se(g["mean_test_ll_stderr"], ll),
            "mean_test_ll_min": float(ll.min()) if ll.notna().any() else float("nan"),
            "mean_test_ll_max": float(ll.max()) if ll.notna().any() else float("nan"),
            "log_z": float(lz.mean()) if lz.notna().any() else float("nan"),
            "log_z_sd": float(lz.std(ddof=1)) if lz.notna().sum() > 1 else float("nan"),
            "log_z_se": _combined_se(g["log_z_stderr"], lz),
            "ess": float(g["ess"].mean()) if g["ess"].notna().any() else float("nan"),
            "ess_min": float(g["ess"].min()) if g["ess"].notna().any() else float("nan"),
            "ess_fraction_min": float(g["ess_fraction"].min()) if g["ess_fraction"].notna().any() else float("nan"),
            "seconds": float(g["seconds"].mean()),
            "total_sweeps": float(g["total_sweeps"].mean()),
            "sweeps_per_second": float(g["sweeps_per_second"].mean()) if g["sweeps_per_second"].notna().any()
            else float("nan"),
            "per_example_ll_sd": float(g["per_example_ll_sd"].mean()) if g["per_example_ll_sd"].notna().any()
            else float("nan"),
            "exact_test_ll": float(g["exact_test_ll"].iloc[0]),
            "exact_log_z": float(g["exact_log_z"].iloc[0]),
            "log_f_is": float(g["log_f_is"].mean()) if g["log_f_is"].notna().any() else float("nan"),
            "log_f_is_se": _combined_se(g["log_f_is_stderr"], g["log_f_is"]),
            "log_f_is_jensen_gap": float(g["log_f_is_jensen_gap"].mean()) if g["log_f_is_jensen_gap"].notna().any()
            else float("nan"),
            "log_f_mean_field": float(g["log_f_mean_field"].mean()) if g["log_f_mean_field"].notna().any()
            else float("nan"),
            "log_f_is_ess_mean": float(g["log_f_is_ess_mean"].mean()) if g["log_f_is_ess_mean"].notna().any()
            else float("nan"),
            "is_samples": float(g["is_samples"].max()) if g["is_samples"].notna().any() else float("nan"),
        })
        rows.append(row)
    cols = GROUP_COLUMNS + ["family", "architecture", "n_seeds", "seeds", "chains", "n_weights", "n_examples", "mean_test_ll", "mean_test_ll_sd",
                            "mean_test_ll_se", "mean_test_ll_min", "mean_test_ll_max", "log_z", "log_z_sd",
                            "log_z_se", "ess", "ess_min", "ess_fraction_min", "seconds", "total_sweeps",
                            "sweeps_per_second", "per_example_ll_sd", "exact_test_ll", "exact_log_z", "log_f_is",
                            "log_f_is_se",
                            "log_f_is_jensen_gap", "log_f_mean_field", "log_f_is_ess_mean", "is_samples"]
    s = pd.DataFrame(rows, columns=cols)
    s["K"] = pd.array(s["K"], dtype="Int64")
    s["ll_minus_exact"] = s["mean_test_ll"] - s["exact_test_ll"]
    s["log_z_minus_exact"] = s["log_z"] - s["exact_log_z"]
    s["gap_ais_minus_raise"] = float("nan")
    s["flags"] = ""
    return s.reset_index(drop=True)


# --------------------------------------------------------------------------- flags
def _fmt_k(k) -> str:
    return "-" if k is None or pd.isna(k) else str(int(k))


def _unit(method: str) -> str:
    return "samples" if method == "csl" else "chains"


def _ess_flag(ess: float, n_weights, frac: float, method: str = "") -> str | None:
    if not (math.isfinite(ess) and n_weights is not None and not pd.isna(n_weights) and int(n_weights) > 0):
        return None
    n = int(n_weights)
    if ess < frac * n:
        return f"low ESS: {ess:.3g} of {n} {_unit(method)} ({100 * ess / n:.2g}% < {100 * frac:g}%)"
    return None


def _same_setting(summary: pd.DataFrame, row: pd.Series, method: str) -> pd.DataFrame:
    m = (summary["model"] == row["model"]) & (summary["method"] == method) & \
        (summary["schedule"] == row["schedule"]) & (summary["init"] == row["init"])
    k = summary["K"]
    m &= (k == row["K"]).fillna(False) if not pd.isna(row["K"]) else k.isna()
    return summary[m]


def apply_flags(per_run: pd.DataFrame, summary: pd.DataFrame, *, gap_threshold: float = 1.0,
                ess_fraction: float = 0.1, z: float = 2.0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fill the ``flags`` columns (and ``gap_ais_minus_raise``) of both tables; returns copies."""
    per_run, summary = per_run.copy(), summary.copy()
    run_flags: list[list[str]] = []
    for _, r in per_run.iterrows():
        f = _ess_flag(float(r["ess"]), r["n_weights"], ess_fraction, r["method"])
        run_flags.append([f] if f else [])
    group_flags: list[list[str]] = [[] for _ in range(len(summary))]

    def add(i: int, text: str) -> None:
        if text not in group_flags[i]:
            group_flags[i].append(text)

    # ESS: a summary row is flagged when any of its seeds is
    for i, s in summary.iterrows():
        sel = _group_mask(per_run, s).to_numpy()
        bad = [("-" if pd.isna(sd) else str(int(sd))) for sd, fl, on in zip(per_run["seed"], run_flags, sel)
               if on and fl]
        if bad:
            seeds = ",".join(bad)
            add(i, f"low ESS (seed {seeds}): min {s['ess_min']:.3g} of {_fmt_k(s['n_weights'])} {_unit(s['method'])} "
                   f"(< {100 * ess_fraction:g}%)")

    # AIS vs RAISE, same model / schedule / K / init
    for i, s in summary.iterrows():
        if s["method"] != "ais":
            continue
        for j, r in _same_setting(summary, s, "raise").iterrows():
            a, b = float(s["mean_test_ll"]), float(r["mean_test_ll"])
            if not (math.isfinite(a) and math.isfinite(b)):
                continue
            gap = a - b
            if math.isnan(summary.at[i, "gap_ais_minus_raise"]):
                summary.at[i, "gap_ais_minus_raise"] = gap
            if math.isnan(summary.at[j, "gap_ais_minus_raise"]):
                summary.at[j, "gap_ais_minus_raise"] = gap
            where = f"{s['init']}, K={_fmt_k(s['K'])}"
            if abs(gap) > gap_threshold:
                text = f"AIS-RAISE gap {gap:+.2f} nats exceeds {gap_threshold:g} nat ({where})"
                add(i, text)
                add(j, text)
            se = math.sqrt(np.nansum([float(s["mean_test_ll_se"]) ** 2, float(r["mean_test_ll_se"]) ** 2]))
            if -gap > 0 and -gap > z * se:
                text = f"RAISE exceeds AIS by {-gap:.2f} nats (> {z:g} x combined s.e. {se:.2g}, {where})"
                add(i, text)
                add(j, text)

    # log Z: AIS (a stochastic lower bound) above reverse AIS (an upper one, for exact model samples)
    for i, s in summary.iterrows():
        if s["method"] != "ais":
            continue
        for j, r in _same_setting(summary, s, "reverse-ais").iterrows():
            a, b = float(s["log_z"]), float(r["log_z"])
            se = math.sqrt(np.nansum([float(s["log_z_se"]) ** 2, float(r["log_z_se"]) ** 2]))
            if math.isfinite(a) and math.isfinite(b) and a - b > z * se:
                text = (f"AIS log Z exceeds reverse AIS by {a - b:.2f} nats (> {z:g} x combined s.e. {se:.2g}, "
                        f"{s['init']}, K={_fmt_k(s['K'])}): the bounds do not sandwich log Z")
                add(i, text)
                add(j, text)

    # importance-sampled log f(v) of deep models: few effective proposals per example
    for i, s in summary.iterrows():
        ess_is, n_is = float(s["log_f_is_ess_mean"]), float(s["is_samples"])
        if math.isfinite(ess_is) and math.isfinite(n_is) and ess_is < ess_fraction * n_is:
            add(i, f"log f(v) importance sampling: mean ESS {ess_is:.3g} of {n_is:.0f} proposals "
                   f"(< {100 * ess_fraction:g}%); log f-hat may err low by more than its s.e. shows")

    # AIS (an upper estimate of the test log-likelihood) below the exact value
    for i, s in summary.iterrows():
        if s["method"] != "ais":
            continue
        ex, v = float(s["exact_test_ll"]), float(s["mean_test_ll"])
        if not (math.isfinite(ex) and math.isfinite(v)):
            continue
        se = float(s["mean_test_ll_se"]) if math.isfinite(float(s["mean_test_ll_se"])) else 0.0
        if ex - v > 0 and ex - v > z * se:
            why = ("; the importance-sampled log f(v) errs low" if s.get("family") in DEEP_FAMILIES else "")
            add(i, f"AIS falls below exact by {ex - v:.2f} nats (> {z:g} x s.e. {se:.2g}){why}")

    # continuous models: HAIS and its baselines err high on an analysis model's log-likelihood (log Z-hat
    # is low) and low on a generative model's (log p-hat(x) is low per point)
    for i, s in summary.iterrows():
        if s["method"] not in CONTINUOUS_METHODS:
            continue
        ex, v = float(s["exact_test_ll"]), float(s["mean_test_ll"])
        if not (math.isfinite(ex) and math.isfinite(v)):
            continue
        se = float(s["mean_test_ll_se"]) if math.isfinite(float(s["mean_test_ll_se"])) else 0.0
        if s["family"] in ANALYSIS_FAMILIES and ex - v > z * se:
            add(i, f"{s['method'].upper()} falls below the closed form by {ex - v:.2f} nats (> {z:g} x s.e. {se:.2g}); "
                   f"an analysis model's estimate should err high")
        if s["family"] in GENERATIVE_FAMILIES and v - ex > z * se:
            add(i, f"{s['method'].upper()} exceeds the closed form by {v - ex:.2f} nats (> {z:g} x s.e. {se:.2g}); "
                   f"a generative model's estimate should err low")

    # stochastic lower bounds above the exact value
    for i, s in summary.iterrows():
        if s["method"] not in LOWER_BOUND_METHODS:
            continue
        ex, v = float(s["exact_test_ll"]), float(s["mean_test_ll"])
        if not (math.isfinite(ex) and math.isfinite(v)):
            continue
        se = float(s["mean_test_ll_se"]) if math.isfinite(float(s["mean_test_ll_se"])) else 0.0
        if v - ex > 0 and v - ex > z * se:
            add(i, f"{s['method'].upper()} lower bound exceeds exact by {v - ex:.2f} nats (> {z:g} x s.e. {se:.2g})")

    summary["flags"] = ["; ".join(f) for f in group_flags]
    # each run carries its own ESS flag plus its group's cross-estimator flags
    out = []
    for idx, (_, r) in enumerate(per_run.iterrows()):
        fl = list(run_flags[idx])
        gi = _group_index(summary, r)
        if gi is not None:
            fl += [f for f in group_flags[gi] if not f.startswith("low ESS")]
        out.append("; ".join(dict.fromkeys(fl)))
    per_run["flags"] = out
    return per_run, summary


def _group_mask(frame: pd.DataFrame, s: pd.Series) -> pd.Series:
    """Rows of ``frame`` in the same group (equal GROUP_COLUMNS, NaN matching NaN) as ``s``."""
    m = pd.Series(True, index=frame.index)
    for c in GROUP_COLUMNS:
        col = frame[c]
        if pd.isna(s[c]):
            m &= col.isna()
        else:
            m &= (col == s[c]).fillna(False).astype(bool)
    return m


def _group_index(summary: pd.DataFrame, r: pd.Series) -> int | None:
    idx = summary.index[_group_mask(summary, r)]
    return int(idx[0]) if len(idx) else None


# --------------------------------------------------------------------------- tables 1 and 2
def _is_deep(summary: pd.DataFrame) -> pd.Series:
    fam = summary["family"] if "family" in summary else pd.Series("rbm", index=summary.index)
    return fam.isin(DEEP_FAMILIES)


def _inits(summary: pd.DataFrame) -> list[str]:
    annealed = set(summary.loc[summary["method"].isin(["ais", "raise"]), "init"]) - {""}
    inits = [i for i in INIT_ORDER if i in annealed] + sorted(annealed - set(INIT_ORDER))
    return inits or list(INIT_ORDER)


def _table_keys(summary: pd.DataFrame) -> pd.DataFrame:
    """model x schedule x K of the annealed estimates, plus one row (K = NA) per model without any."""
    annealed = summary[summary["method"].isin(["ais", "raise"])]
    keys = annealed[["model", "schedule", "K"]].drop_duplicates()
    models_without = sorted(set(summary["model"]) - set(keys["model"]))
    return pd.concat([keys, pd.DataFrame({"model": models_without, "schedule": "", "K": pd.NA})],
                     ignore_index=True)


def _annealed_cell(ms: pd.DataFrame, sched: str, K, init: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The RAISE and the AIS summary rows of one model at (schedule, K, init)."""
    sel = ms[(ms["schedule"] == sched) & (ms["init"] == init)]
    sel = sel[(sel["K"] == K).fillna(False)] if not pd.isna(K) else sel.iloc[0:0]
    return sel[sel["method"] == "raise"], sel[sel["method"] == "ais"]


def _cell_flags(init: str, r_: pd.DataFrame, a_: pd.DataFrame) -> list[str]:
    flags = []
    for method, part in (("RAISE", r_), ("AIS", a_)):
        for f in "; ".join(part["flags"]).split("; "):
            if f:  # shared AIS/RAISE flags name their init already
                flags.append(f if f"{init}, K=" in f else f"{method} ({init}): {f}")
    return flags


def _first(frame: pd.DataFrame, col: str) -> float:
    return float(frame[col].iloc[0]) if len(frame) else float("nan")


def make_table1(summary: pd.DataFrame) -> pd.DataFrame:
    """RAISE Table 1 layout for the RBMs (deep models go to :func:`make_table2`): one row per
    model x schedule x K.

    Columns ``model, schedule, K, exact, csl (one column per CSL estimator when several),
    raise_<init>, ais_<init>, gap_<init>`` for each initial distribution present
    (``uniform`` and ``base-rate`` first), and ``flags``.  Values are mean test
    log-likelihoods (nats), averaged over seeds; ``gap`` is AIS - RAISE.
    """
    summary = summary[~_is_deep(summary) & ~summary["family"].isin(CONTINUOUS_FAMILIES)]
    inits = _inits(summary)
    csl_names = sorted(set(summary.loc[summary["method"] == "csl", "estimator"]))
    csl_cols = {n: ("csl" if len(csl_names) == 1 else f"csl:{n}") for n in csl_names}
    rows = []
    for _, k in _table_keys(summary).iterrows():
        model, sched, K = k["model"], k["schedule"], k["K"]
        ms = summary[summary["model"] == model]
        row: dict[str, Any] = {"model": model, "schedule": sched, "K": K}
        ex = ms["exact_test_ll"].dropna()
        row["exact"] = float(ex.iloc[0]) if len(ex) else float("nan")
        flags: list[str] = []
        for name, col in csl_cols.items():
            c = ms[(ms["estimator"] == name)]
            c = c[(c["K"] == K).fillna(False)] if not pd.isna(K) else c.iloc[0:0]
            row[col] = float(c["mean_test_ll"].mean()) if len(c) else float("nan")
            flags += [f"CSL: {f}" if not f.startswith("CSL") else f
                      for f in "; ".join(c["flags"]).split("; ") if f]
        for init in inits:
            r_, a_ = _annealed_cell(ms, sched, K, init)
            rv, av = _first(r_, "mean_test_ll"), _first(a_, "mean_test_ll")
            row[f"raise_{init}"] = rv
            row[f"ais_{init}"] = av
            row[f"gap_{init}"] = av - rv
            flags += _cell_flags(init, r_, a_)
        row["flags"] = "; ".join(dict.fromkeys(flags))
        rows.append(row)
    cols = ["model", "schedule", "K", "exact"] + list(csl_cols.values())
    for init in inits:
        cols += [f"raise_{init}", f"ais_{init}", f"gap_{init}"]
    cols.append("flags")
    t = pd.DataFrame(rows, columns=cols)
    t["K"] = pd.array(t["K"], dtype="Int64")
    return t.sort_values(["model", "schedule", "K"], kind="stable", na_position="first").reset_index(drop=True)


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
    rows = []
    for model, ms in cont.groupby("model", sort=True):
        arch = ms["architecture"].iloc[0]
        row: dict[str, Any] = {"model": model, "family": ms["family"].iloc[0], "architecture": arch,
                               "size": int(arch.split("-")[-1]) if arch else pd.NA}
        ex = ms["exact_test_ll"].dropna()
        row["exact"] = float(ex.iloc[0]) if len(ex) else float("nan")
        spread_src = ms[ms["method"] == "exact"]
        flags: list[str] = []
        for m in methods:
            g = ms[(ms["method"] == m) & ms["K"].notna()]
            if g.empty:
                row[m] = row[f"{m}_se"] = float("nan")
                row[f"{m}_K"] = pd.NA
                continue
            top = g[g["K"] == g["K"].max()].iloc[0]
            row[m], row[f"{m}_se"], row[f"{m}_K"] = float(top["mean_test_ll"]), float(top["mean_test_ll_se"]), int(top["K"])
            flags += [f"{m}: {f}" for f in str(top["flags"]).split("; ") if f]
            if m == "hais" and spread_src.empty:
                spread_src = g[g["K"] == g["K"].max()]
        sd = spread_src["per_example_ll_sd"].dropna()
        n = spread_src["n_examples"].dropna()
        row["n_test"] = int(n.iloc[0]) if len(n) else pd.NA
        row["spread"] = float(sd.iloc[0]) / math.sqrt(int(n.iloc[0])) if len(sd) and len(n) else float("nan")
        row["flags"] = "; ".join(dict.fromkeys(flags))
        rows.append(row)
    cols = ["model", "family", "architecture", "size", "exact"]
    for m in methods:
        cols += [m, f"{m}_se", f"{m}_K"]
    cols += ["spread", "n_test", "flags"]
    t = pd.DataFrame(rows, columns=cols)
    return t.sort_values(["family", "size", "model"], kind="stable").reset_index(drop=True)


def plot_model_size(table: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Mean test log-likelihood against model size, one line per family (Sohl-Dickstein &
    Culpepper Fig. 5): the HAIS estimate at its largest K (the closed form where HAIS is absent)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    plotted = False
    for family, g in table.groupby("family", sort=True):
        y = g["hais"] if "hais" in g else pd.Series(float("nan"), index=g.index)
        y = y.where(y.notna(), g["exact"]).to_numpy(dtype=float)
        err = (g["hais_se"] if "hais_se" in g else pd.Series(0.0, index=g.index)).fillna(0.0).to_numpy(dtype=float)
        x = g["size"].to_numpy(dtype=float)
        ok = np.isfinite(y) & np.isfinite(x)
        if ok.any():
            order = np.argsort(x[ok])
            ax.errorbar(x[ok][order], y[ok][order], yerr=err[ok][order], marker="o", capsize=3, label=family)
            plotted = True
    if not plotted:
        ax.text(0.5, 0.5, "no continuous models", transform=ax.transAxes, ha="center", va="center")
    else:
        ax.legend(fontsize=8)
    ax.set_xlabel("model size (experts / units / latent variables)")
    ax.set_ylabel("mean test log-likelihood (nats)")
    ax.set_title("log-likelihood vs model size (HAIS at the largest K)")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)


def _mean_se(frame: pd.DataFrame, value: str, se: str) -> tuple[float, float]:
    """Mean of the rows' values and the standard error of that mean (from the rows' errors)."""
    v = frame[value].dropna()
    if not len(v):
        return float("nan"), float("nan")
    e = frame.loc[v.index, se].to_numpy(dtype=float)
    return float(v.mean()), float(np.sqrt(np.sum(e**2)) / len(v)) if np.isfinite(e).all() else float("nan")


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
    summary = summary[_is_deep(summary)]
    inits = _inits(summary)
    rows = []
    for _, k in _table_keys(summary).iterrows():
        model, sched, K = k["model"], k["schedule"], k["K"]
        ms = summary[summary["model"] == model]
        row: dict[str, Any] = {"model": model, "family": ms["family"].iloc[0],
                               "architecture": ms["architecture"].iloc[0], "schedule": sched, "K": K}
        ex = ms["exact_test_ll"].dropna()
        cells = ms[ms["method"].isin(["ais", "raise"]) & (ms["schedule"] == sched)]
        cells = cells[(cells["K"] == K).fillna(False)] if not pd.isna(K) else cells.iloc[0:0]
        row["n_seeds"] = int(cells["n_seeds"].max()) if len(cells) else 0
        row["exact"] = float(ex.iloc[0]) if len(ex) else float("nan")
        flags: list[str] = []
        for init in inits:
            r_, a_ = _annealed_cell(ms, sched, K, init)
            rv, rse = _first(r_, "mean_test_ll"), _first(r_, "mean_test_ll_se")
            av, ase = _first(a_, "mean_test_ll"), _first(a_, "mean_test_ll_se")
            row[f"raise_{init}"], row[f"raise_{init}_se"] = rv, rse
            row[f"ais_{init}"], row[f"ais_{init}_se"] = av, ase
            row[f"gap_{init}"] = av - rv
            row[f"gap_{init}_se"] = math.sqrt(rse**2 + ase**2)
            flags += _cell_flags(init, r_, a_)
        row["log_f_is"], row["log_f_is_se"] = _mean_se(cells, "log_f_is", "log_f_is_se")
        row["log_f_is_jensen_gap"] = float(cells["log_f_is_jensen_gap"].mean()) if len(cells) else float("nan")
        row["log_f_mean_field"] = float(cells["log_f_mean_field"].mean()) if len(cells) else float("nan")
        row["flags"] = "; ".join(dict.fromkeys(flags))
        rows.append(row)
    cols = ["model", "family", "architecture", "schedule", "K", "n_seeds", "exact"]
    for init in inits:
        cols += [f"raise_{init}", f"raise_{init}_se", f"ais_{init}", f"ais_{init}_se", f"gap_{init}",
                 f"gap_{init}_se"]
    cols += ["log_f_is", "log_f_is_se", "log_f_is_jensen_gap", "log_f_mean_field", "flags"]
    t = pd.DataFrame(rows, columns=cols)
    t["K"] = pd.array(t["K"], dtype="Int64")
    t["n_seeds"] = pd.array(t["n_seeds"], dtype="Int64")
    return t.sort_values(["model", "schedule", "K"], kind="stable", na_position="first").reset_index(drop=True)


# --------------------------------------------------------------------------- repeated log Z estimates
#: methods that estimate log Z from one annealing run (Liu et al. Figs 3-4 compare them over K)
LOG_Z_METHODS = ("ais", "ads", "ads-multinomial", "reverse-ais")
#: the per-seed average of AIS and reverse AIS (the paper's "average of AIS and RAISE")
AVERAGE_METHOD = "avg-ais-reverse-ais"
ANNEALED_TRIAL_COLUMNS = ["model", "family", "init", "schedule", "K", "estimator", "method", "n_trials", "seeds",
                          "chains", "bias", "mse", "sd", "bias_se", "mean_stderr", "coverage", "mean_seconds",
                          "truth", "truth_source"]


def ground_truth(per_run: pd.DataFrame, tolerance: float = 0.1) -> pd.DataFrame:
    """Reference ``log Z`` per model for the bias / MSE of repeated estimates (Liu et al. Sec. 6).

    The exact value where a model has one; otherwise the mean of the AIS and reverse-AIS
    estimates (mean over seeds) at the largest ``K`` where both were run, accepted only when they
    agree within ``tolerance`` nats (the paper's criterion: AIS and reverse AIS are stochastic
    lower and upper bounds, so agreement pins ``log Z`` down).  Columns ``model``, ``truth``
    (NaN when there is none), ``truth_K`` (the K used, NA for exact), ``truth_source``.
    """
    rows = []
    for model, g in per_run.groupby("model", sort=True):
        ex = g["exact_log_z"].dropna()
        if len(ex):
            rows.append({"model": model, "truth": float(ex.iloc[0]), "truth_K": pd.NA, "truth_source": "exact"})
            continue
        a = g[(g["method"] == "ais") & g["log_z"].notna()]
        r = g[(g["method"] == "reverse-ais") & g["log_z"].notna()]
        common = sorted(set(a["K"].dropna().astype(int)) & set(r["K"].dropna().astype(int)))
        if not common:
            rows.append({"model": model, "truth": float("nan"), "truth_K": pd.NA,
                         "truth_source": "none: no exact value, no AIS and reverse-AIS runs at a common K"})
            continue
        k = common[-1]
        la, lr = float(a.loc[a["K"] == k, "log_z"].mean()), float(r.loc[r["K"] == k, "log_z"].mean())
        if abs(la - lr) <= tolerance:
            rows.append({"model": model, "truth": 0.5 * (la + lr), "truth_K": k,
                         "truth_source": f"mean of AIS {la:.3f} and reverse AIS {lr:.3f} at K={k} "
                                         f"(agree within {tolerance:g} nat)"})
        else:
            rows.append({"model": model, "truth": float("nan"), "truth_K": k,
                         "truth_source": f"none: AIS {la:.3f} and reverse AIS {lr:.3f} at K={k} differ by "
                                         f"{abs(la - lr):.3f} > {tolerance:g} nat; run both at larger K"})
    out = pd.DataFrame(rows, columns=["model", "truth", "truth_K", "truth_source"])
    out["truth_K"] = pd.array(out["truth_K"], dtype="Int64")
    return out


def annealed_trials(per_run: pd.DataFrame, truth: pd.DataFrame, z: float = 2.0) -> pd.DataFrame:
    """Bias and MSE of ``log Ẑ`` over seeds per model x init x schedule x K x estimator (Figs 3-4).

    Only log Z estimators from one annealing run (:data:`LOG_Z_METHODS`) of models with a
    ground truth (:func:`ground_truth`); runs at the ``K`` that defined the truth are left out.
    Where a setting has exactly one AIS and one reverse-AIS estimator, their per-seed average
    is added as :data:`AVERAGE_METHOD` (twice the samples, three times the sweeps of AIS).
    ``coverage`` is the fraction of seeds whose ``|error| <= z * stderr``.
    """
    t = truth.set_index("model")
    runs = per_run[per_run["method"].isin(LOG_Z_METHODS) & per_run["log_z"].notna()].copy()
    runs["truth"] = [float(t["truth"].get(m, float("nan"))) for m in runs["model"]]
    runs["truth_source"] = [str(t["truth_source"].get(m, "")) for m in runs["model"]]
    truth_k = [t["truth_K"].get(m, pd.NA) for m in runs["model"]]
    keep = runs["truth"].notna().to_numpy() & np.array(
        [bool(pd.isna(tk) or int(k) != int(tk)) for k, tk in zip(runs["K"], truth_k)], dtype=bool)
    runs = runs[keep]
    keys = ["model", "family", "init", "schedule", "K"]
    extra = []
    for _, g in runs.groupby(keys, sort=False, dropna=False):
        a, r = g[g["method"] == "ais"], g[g["method"] == "reverse-ais"]
        if a["estimator"].nunique() != 1 or r["estimator"].nunique() != 1:
            continue
        both = a.merge(r, on="seed", suffixes=("", "_r"))
        for _, row in both.iterrows():
            new = row[[c for c in runs.columns]].copy()
            new["estimator"] = new["method"] = AVERAGE_METHOD
            new["log_z"] = 0.5 * (row["log_z"] + row["log_z_r"])
            new["log_z_stderr"] = 0.5 * math.hypot(row["log_z_stderr"], row["log_z_stderr_r"])
            new["seconds"] = row["seconds"] + row["seconds_r"]
            extra.append(new)
    if extra:
        runs = pd.concat([runs, pd.DataFrame(extra)], ignore_index=True)
    rows = []
    for k, g in runs.groupby(keys + ["estimator", "method"], sort=True, dropna=False):
        err = (g["log_z"] - g["truth"]).to_numpy(dtype=float)
        se = g["log_z_stderr"].to_numpy(dtype=float)
        n = len(err)
        sd = float(np.std(err, ddof=1)) if n > 1 else float("nan")
        rows.append({**dict(zip(keys + ["estimator", "method"], k)), "n_trials": n,
                     "seeds": " ".join(str(int(x)) for x in g["seed"].dropna()),
                     "chains": g["chains"].dropna().iloc[0] if g["chains"].notna().any() else pd.NA,
                     "bias": float(err.mean()), "mse": float(np.mean(err**2)), "sd": sd,
                     "bias_se": sd / math.sqrt(n) if n > 1 else float("nan"),
                     "mean_stderr": float(np.nanmean(se)) if np.isfinite(se).any() else float("nan"),
                     "coverage": float(np.mean(np.abs(err) <= z * se)) if np.isfinite(se).all() else float("nan"),
                     "mean_seconds": float(g["seconds"].mean()), "truth": float(g["truth"].iloc[0]),
                     "truth_source": g["truth_source"].iloc[0]})
    out = pd.DataFrame(rows, columns=ANNEALED_TRIAL_COLUMNS)
    out["K"] = pd.array(out["K"], dtype="Int64")
    return out


def plot_annealed_trials(trials: pd.DataFrame, model: str, path: str | os.PathLike) -> Path:
    """Bias (with ±2 s.e. over seeds) and MSE of ``log Ẑ`` vs K for one model, one line per
    estimator, one column per initial distribution (the layout of Liu et al. Figs 3-4); PNG, atomic."""
    from .trials import plot_trials

    ms = trials[(trials["model"] == model) & trials["bias"].notna()]
    if ms.empty:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(6.4, 3.0))
        ax.text(0.5, 0.5, f"{model}: no repeated log Z estimates with a ground truth", transform=ax.transAxes,
                ha="center", va="center")
        ax.set_axis_off()
        return save_figure(fig, path, dpi=110)
    # one line per estimator, styled by its method when it is the method's only estimator
    per_method = ms.groupby("method")["estimator"].nunique()
    ms = ms.assign(method=[(m if per_method[m] == 1 else e) + ("" if s in ("", "linear") else f" ({s})")
                           for m, e, s in zip(ms["method"], ms["estimator"], ms["schedule"])])
    ms = ms.assign(K=ms["K"].astype(float))
    src = str(ms["truth_source"].iloc[0]).split(" (")[0]
    return plot_trials(ms, path, x="K", panel="init", log_x=True,
                       title=f"{model}: log Z error over seeds vs K (truth: {src})")


# --------------------------------------------------------------------------- plots
def plot_model(summary: pd.DataFrame, model: str, path: str | os.PathLike) -> Path:
    """Mean test log-likelihood vs K for one model (PNG, written atomically)."""
    plt = pyplot()

    ms = summary[summary["model"] == model]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    styles = {"uniform": "-", "base-rate": "--"}
    colors = {"ais": "tab:red", "raise": "tab:blue", "csl": "tab:green", "ads": "tab:purple",
              "ads-multinomial": "tab:pink", "reverse-ais": "tab:cyan", "hais": "tab:blue", "ais-hmc": "tab:green",
              "ais-mh": "tab:red"}
    plotted = False
    for (method, est, sched, init), g in ms[ms["method"].isin(ANNEALED_METHODS + CONTINUOUS_METHODS + ("csl",))].groupby(
            ["method", "estimator", "schedule", "init"], sort=True):
        g = g[g["K"].notna() & g["mean_test_ll"].notna()].sort_values("K")
        if g.empty:
            continue
        err = g["mean_test_ll_se"].to_numpy(dtype=float)
        err = np.where(np.isfinite(err), err, 0.0)
        label = est if method == "csl" or not init else f"{est} ({init}{', ' + sched if sched not in ('', 'linear') else ''})"
        ax.errorbar(g["K"].to_numpy(dtype=float), g["mean_test_ll"].to_numpy(dtype=float), yerr=err, capsize=3,
                    marker="o" if method != "csl" else "s", linestyle=styles.get(init, ":") if method != "csl" else ":",
                    color=colors.get(method), label=label, alpha=0.9)
        plotted = True
    ex = ms["exact_test_ll"].dropna()
    if len(ex):
        ax.axhline(float(ex.iloc[0]), color="black", linewidth=1.2, label="exact")
        plotted = True
    ks = ms["K"].dropna()
    if len(ks) and ks.min() > 0 and ks.nunique() > 1:
        ax.set_xscale("log")
    if not plotted:
        ax.text(0.5, 0.5, "no estimates", transform=ax.transAxes, ha="center", va="center")
    ax.set_xlabel("K (intermediate distributions / CSL sweeps per chain)")
    ax.set_ylabel("mean test log-likelihood (nats)")
    fam = ms["family"].iloc[0] if "family" in ms and len(ms) else ""
    arch = ms["architecture"].iloc[0] if "architecture" in ms and len(ms) else ""
    ax.set_title(f"{model} ({fam.upper()} {arch})" if fam in DEEP_FAMILIES else model)
    ax.grid(True, alpha=0.3)
    if plotted:
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)


def plot_history(history: Sequence[Mapping[str, Any]], path: str | os.PathLike, title: str = "") -> Path:
    """Training curves (every numeric per-epoch entry but time) vs epoch, one panel each."""
    plt = pyplot()

    df = pd.DataFrame(list(history))
    x = df["epoch"] if "epoch" in df else pd.Series(range(1, len(df) + 1))
    cols = [c for c in df.columns if c != "epoch" and "second" not in c and pd.api.types.is_numeric_dtype(df[c])
            and df[c].notna().any()]
    n = max(1, len(cols))
    ncol = min(3, n)
    nrow = (n + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.0 * ncol, 2.8 * nrow), squeeze=False)
    for ax, c in zip(axes.ravel(), cols):
        ax.plot(x, df[c], marker="o", markersize=3)
        ax.set_title(c, fontsize=9)
        ax.set_xlabel("epoch", fontsize=8)
        ax.grid(True, alpha=0.3)
    for ax in axes.ravel()[len(cols):]:
        ax.axis("off")
    if not cols:
        axes[0, 0].text(0.5, 0.5, "no per-epoch metrics", ha="center", va="center")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path, dpi=100)


# --------------------------------------------------------------------------- driver
def _write_csv(df: pd.DataFrame, path: Path) -> Path:
    return write_csv_atomic(path, df, float_format="%.6g")


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-friendly rows (NaN / NA -> None, numpy scalars -> Python)."""
    out = []
    for row in df.to_dict(orient="records"):
        clean = {}
        for k, v in row.items():
            if v is None or (not isinstance(v, str) and pd.isna(v)):
                clean[k] = None
            elif isinstance(v, (np.integer, int)) and not isinstance(v, bool):
                clean[k] = int(v)
            elif isinstance(v, (np.floating, float)):
                clean[k] = float(v)
            else:
                clean[k] = v
        out.append(clean)
    return out


def _flag_rows(summary: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, s in summary.iterrows():
        for f in [f for f in s["flags"].split("; ") if f]:
            rows.append({"model": s["model"], "estimator": s["estimator"], "method": s["method"],
                         "schedule": s["schedule"], "K": s["K"], "init": s["init"], "flag": f})
    t = pd.DataFrame(rows, columns=["model", "estimator", "method", "schedule", "K", "init", "flag"])
    t["K"] = pd.array(t["K"], dtype="Int64")
    return t


def build_report(results: str | os.PathLike | Iterable[str | os.PathLike | Mapping[str, Any]],
                 out_dir: str | os.PathLike, *, gap_threshold: float = 1.0, ess_fraction: float = 0.1,
                 z: float = 2.0, truth_tolerance: float = 0.1, models: Sequence[str] | None = None, plots: bool = True,
                 tracking_uri: str | None = None, experiment_name: str | None = None) -> dict[str, Any]:
    """Build the report from estimate records.

    Parameters
    ----------
    results : directory, JSON file, or iterable of JSON files / record dicts
        A directory is searched recursively for ``*.json`` estimate records.
    out_dir : directory
        Receives ``per_run.csv``, ``summary.csv``, ``table1.csv`` (RBMs), ``table2.csv`` (DBMs and
        DBNs), ``flags.csv``, ``annealed_trials.csv`` (bias / MSE of log Z over seeds against the
        ground truth, Liu et al. Figs 3-4), ``report.json``, ``plots/<model>.png`` and
        ``plots/<model>_bias_mse.png`` (all written atomically).
    gap_threshold : float
        Flag AIS and RAISE estimates disagreeing by more than this many nats.
    ess_fraction : float
        Flag estimates whose effective sample size is below this fraction of the chains.
    z : float
        Standard errors beyond which RAISE > AIS, AIS log Z > reverse-AIS log Z, or a lower bound >
        exact, is flagged; also the interval of the repeated-trials coverage.
    truth_tolerance : float
        Models without an exact value: the ground truth of ``annealed_trials.csv`` is the mean of
        AIS and reverse AIS at their largest common K when they agree within this many nats.
    models : sequence of str, optional
        Models that must get a plot even without estimates (a placeholder is drawn).
    plots : bool
        Draw the per-model plots.
    tracking_uri, experiment_name : str, optional
        When given, tag the affected MLflow runs (``logzbench.flag``/``logzbench.flagged``).

    Returns
    -------
    dict with the paths written (``per_run``, ``summary``, ``table1``, ``table2``, ``flags``,
    ``report_json``, ``plots`` = {model: path}) and ``n_flagged`` (summary rows flagged).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    per_run = load_results(results)
    summary = summarize(per_run)
    per_run, summary = apply_flags(per_run, summary, gap_threshold=gap_threshold, ess_fraction=ess_fraction, z=z)
    table1 = make_table1(summary) if len(summary) else pd.DataFrame(columns=["model", "schedule", "K", "exact",
                                                                             "flags"])
    table2 = make_table2(summary) if len(summary) else pd.DataFrame(
        columns=["model", "family", "architecture", "schedule", "K", "n_seeds", "exact", "flags"])
    table_c = make_table_continuous(summary)
    truth = ground_truth(per_run, tolerance=truth_tolerance)
    trials = annealed_trials(per_run, truth, z=z)
    paths: dict[str, Any] = {
        "annealed_trials": _write_csv(trials, out / "annealed_trials.csv"),
        "per_run": _write_csv(per_run, out / "per_run.csv"),
        "summary": _write_csv(summary, out / "summary.csv"),
        "table1": _write_csv(table1, out / "table1.csv"),
        "table2": _write_csv(table2, out / "table2.csv"),
        "table_continuous": _write_csv(table_c, out / "table_continuous.csv"),
        "flags": _write_csv(_flag_rows(summary), out / "flags.csv"),
    }
    plot_paths: dict[str, Path] = {}
    trial_plots: dict[str, Path] = {}
    if plots:
        for m in sorted(set(per_run["model"]) | set(models or [])):
            plot_paths[m] = plot_model(summary, m, out / "plots" / f"{m}.png")
            trial_plots[m] = plot_annealed_trials(trials, m, out / "plots" / f"{m}_bias_mse.png")
        paths["model_size_plot"] = plot_model_size(table_c, out / "plots" / "model_size.png")
    paths["plots"] = plot_paths
    paths["trial_plots"] = trial_plots

    tagged = None
    if tracking_uri is not None or experiment_name is not None:
        from . import tracking

        flags_by_key = {r["key"]: [f for f in r["flags"].split("; ") if f]
                        for _, r in per_run.iterrows() if r["key"]}
        tagged = tracking.set_flags(flags_by_key, uri=tracking_uri,
                                    experiment_name=experiment_name or tracking.DEFAULT_EXPERIMENT)
    n_flagged = int((summary["flags"] != "").sum())
    report = {
        "n_runs": int(len(per_run)),
        "n_settings": int(len(summary)),
        "n_flagged_settings": n_flagged,
        "n_flagged_runs": int((per_run["flags"] != "").sum()),
        "mlflow_runs_tagged": tagged,
        "thresholds": dict(ReportThresholds(gap_threshold, ess_fraction, z)),
        "models": sorted(set(per_run["model"])),
        "flags": [{"model": s["model"], "estimator": s["estimator"], "K": None if pd.isna(s["K"]) else int(s["K"]),
                   "init": s["init"], "flags": s["flags"]} for _, s in summary.iterrows() if s["flags"]],
        "files": {k: str(v) for k, v in paths.items() if k not in ("plots", "trial_plots")},
        "table_continuous": _records(table_c),
        "ground_truth": _records(truth),
        "families": {m: f for m, f in per_run.groupby("model")["family"].first().items()},
        "table2": _records(table2),
        "plots": {k: str(v) for k, v in plot_paths.items()},
        "trial_plots": {k: str(v) for k, v in trial_plots.items()},
    }
    paths["report_json"] = out / "report.json"
    write_json_atomic(paths["report_json"], report)
    paths["n_flagged"] = n_flagged
    return paths
