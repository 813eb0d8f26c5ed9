"""Estimate records: loading and normalising them, the per-run table and its summary over seeds."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from .. import registry
from .methods import uses_axis, uses_schedule

#: per-run summaries of the importance-sampling log f(v) of deep models (EstimateResult.extra)
LOG_F_COLUMNS = {
    "log_f_is": "mean_log_f_is",
    "log_f_is_stderr": "mean_log_f_is_stderr",
    "log_f_is_jensen_gap": "mean_log_f_is_jensen_gap",
    "log_f_mean_field": "mean_log_f_mean_field",
    "log_f_is_ess_mean": "is_ess_mean",
    "log_f_is_ess_min": "is_ess_min",
    "is_samples": "is_samples",
    "log_f_is_khat": "is_khat_median",
}

#: the size and sampling settings of a run, in the per-run and the summary table alike
_RUN_SIZE_COLUMNS = ("chains", "n_weights", "n_examples", "csl_mode", "csl_protocol", "burn_in", "thin")

PER_RUN_COLUMNS = [
    "model",
    "family",
    "architecture",
    "dataset",
    "test_set",
    "estimator",
    "method",
    "schedule",
    "K",
    "init",
    "seed",
    *_RUN_SIZE_COLUMNS,
    "mean_test_ll",
    "mean_test_ll_stderr",
    "log_z",
    "log_z_stderr",
    "ess",
    "ess_fraction",
    "khat",
    "seconds",
    "n_sweeps",
    "total_sweeps",
    "sweeps_per_second",
    "per_example_ll_sd",
    "exact_test_ll",
    "exact_log_z",
    "ll_minus_exact",
    "log_z_minus_exact",
    *LOG_F_COLUMNS,
    "device",
    "refused",
    "flags",
    "key",
    "mlflow_run_id",
    "source",
]
#: one summary row per distinct value of these (aggregated over seeds)
GROUP_COLUMNS = ["model", "dataset", "test_set", "estimator", "method", "schedule", "K", "init"]
#: per-run columns that need the whole table (exact values of the model, flags)
_DERIVED_COLUMNS = ("exact_test_ll", "exact_log_z", "ll_minus_exact", "log_z_minus_exact", "flags")
_SUMMARY_COLUMNS = GROUP_COLUMNS + [
    "family",
    "architecture",
    "n_seeds",
    "seeds",
    *_RUN_SIZE_COLUMNS,
    "mean_test_ll",
    "mean_test_ll_sd",
    "mean_test_ll_se",
    "se_spread_ratio",
    "mean_test_ll_min",
    "mean_test_ll_max",
    "log_z",
    "log_z_sd",
    "log_z_se",
    "log_z_se_spread_ratio",
    "ess",
    "ess_min",
    "ess_fraction_min",
    "khat_max",
    "seconds",
    "total_sweeps",
    "sweeps_per_second",
    "per_example_ll_sd",
    "exact_test_ll",
    "exact_log_z",
    "log_f_is",
    "log_f_is_se",
    "log_f_is_jensen_gap",
    "log_f_mean_field",
    "log_f_is_ess_mean",
    "log_f_is_khat",
    "is_samples",
]


# --------------------------------------------------------------------------- loading
def as_float(x: Any) -> float:
    """``float(x)``; NaN for ``None`` and what is not a number."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def int_or_none(x: Any) -> int | None:
    """``int(x)``; ``None`` for ``None``, NaN / NA and what is not a number."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return None
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def _architecture(n_visible, hidden_sizes, n_hidden, family: str = "rbm") -> str:
    """Layer sizes as ``"784-500-1000"``; the visible units alone for a discrete model without hidden
    units (a pairwise Potts model, a user's binary or categorical energy); empty when unknown."""
    sizes = (
        list(hidden_sizes) if isinstance(hidden_sizes, (list, tuple)) else ([n_hidden] if n_hidden is not None else [])
    )
    if n_visible is not None and not sizes and family in registry.family_names(("binary", "categorical")):
        return str(int_or_none(n_visible) or "")
    if n_visible is None or not sizes:
        return ""
    try:
        return "-".join(str(int(n)) for n in [n_visible, *sizes])
    except (TypeError, ValueError):
        return ""


def _model_name(model: Any, source: str | os.PathLike | None) -> str:
    """The model's name: the record's model name (the workflow's), or the stem of the model file it
    names (``logzbench estimate --json``'s ``model``), else the record's directory two levels up."""
    if model is not None and (os.sep in str(model) or str(model).endswith(".npz")):
        model = Path(str(model)).stem
    if model is None and source is not None:
        model = Path(source).parent.parent.name or Path(source).stem
    return str(model) if model is not None else "?"


def _reads_start(method: str, family: Any) -> bool:
    """Whether ``method`` reads ``init`` without sweeping it (the sandwich, smc, pt: one start each) on a family
    with a choice of start: the row still says which reference it used."""
    spec = registry.ESTIMATORS.get(method)
    fam = registry.FAMILIES.get(str(family)) if family is not None else None
    return spec is not None and spec.reads_unswept("init") and fam is not None and bool(fam.inits)


def _sweep(method: str, pick) -> dict[str, Any]:
    """The record's ``schedule``, ``K``, ``init`` and ``seed``, each only where ``method`` has that axis (and
    ``init`` where it reads one start without sweeping it, on a family that has a choice)."""
    schedule, k, init, seed = pick("schedule"), pick("K", "steps", "n_steps"), pick("init"), pick("seed")
    start = uses_axis(method, "init", init) or _reads_start(method, pick("family", "model_family"))
    return {
        "schedule": (schedule if schedule is not None else "linear") if uses_schedule(method, schedule) else "",
        "K": int_or_none(k) if uses_axis(method, "K", k) else None,
        "init": str(init if init is not None else "uniform") if start else "",
        "seed": int_or_none(seed if seed is not None else 0) if uses_axis(method, "seed", seed) else None,
    }


def normalize_record(rec: Mapping[str, Any], source: str | os.PathLike | None = None) -> dict[str, Any]:
    """One flat row from an estimate record.

    Accepts the workflow's record (``{"model", "estimator", "method", "K", "init", "seed",
    ..., "result": EstimateResult.to_dict()}``) and a bare ``EstimateResult.to_dict()``
    whose ``settings`` name the model, K (``K``/``steps``), init and seed.  A record has a
    K, init and seed only where its estimator sweeps that axis (see :func:`.methods.uses_axis`).
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
    if model is None and "result" not in rec:  # `logzbench estimate --json`: the model file it read
        model = rec.get("model")
    chains = pick("chains", default=res.get("n_chains"))
    # ESS is measured against the number of weights: chains (AIS), chains per example (RAISE),
    # samples (CSL, importance sampling)
    n_weights = res.get("n_chains") or chains
    ess, n_chains = as_float(res.get("ess")), as_float(n_weights)
    extra = res.get("extra") or {}
    return {
        "model": _model_name(model, source),
        "family": (family := str(pick("family", "model_family", default="rbm")).lower()),
        "architecture": _architecture(pick("n_visible"), pick("hidden_sizes", default=None), pick("n_hidden"), family),
        "dataset": pick("dataset", default=""),
        "test_set": test_set_label(pick("test_subset")),
        "estimator": estimator,
        "method": method,
        **_sweep(method, pick),
        "chains": int_or_none(chains),
        "n_weights": int_or_none(n_weights),
        "n_examples": int_or_none(res.get("n_examples", pick("n_examples"))),
        **(
            {
                "csl_mode": str(pick("csl_mode", default="")),
                # records written before the option existed ran the default: fresh chains
                "csl_protocol": str(pick("csl_protocol", default="fresh")),
                "burn_in": int_or_none(pick("burn_in")),
                "thin": int_or_none(pick("thin")),
            }
            if method == "csl"
            else {"csl_mode": "", "csl_protocol": "", "burn_in": None, "thin": None}
        ),
        "mean_test_ll": as_float(res.get("mean_log_likelihood")),
        "mean_test_ll_stderr": as_float(res.get("mean_log_likelihood_stderr")),
        "log_z": as_float(res.get("log_z")),
        "log_z_stderr": as_float(res.get("log_z_stderr")),
        "ess": ess,
        "ess_fraction": ess / n_chains if n_chains and math.isfinite(n_chains) and n_chains > 0 else float("nan"),
        "khat": as_float(res.get("khat")),
        "seconds": as_float(res.get("seconds")),
        "n_sweeps": as_float(res.get("n_sweeps")),
        "total_sweeps": as_float(res.get("total_sweeps")),
        "sweeps_per_second": as_float(res.get("sweeps_per_second")),
        "per_example_ll_sd": as_float(extra.get("per_example_ll_sd")),
        **{col: as_float(extra.get(k)) for col, k in LOG_F_COLUMNS.items()},
        "device": pick("device", default=""),
        "refused": str(rec.get("refused") or ""),
        "key": rec.get("key", ""),
        "mlflow_run_id": rec.get("mlflow_run_id", ""),
        "source": str(source) if source is not None else "",
    }


def test_set_label(subset: Any) -> str:
    """The test rows a record was evaluated on: ``""`` for the dataset's whole test split, else the
    per-class subset (``test_subset`` of the settings) as ``"50 per class, seed 0"``."""
    if not isinstance(subset, Mapping) or subset.get("per_class") is None:
        return ""
    return f"{int(subset['per_class'])} per class, seed {int(subset.get('seed') or 0)}"


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
                yield from _read_json(f, strict=False)
        else:
            yield from _read_json(p)


def _is_record(obj: Any) -> bool:
    """Whether a JSON value is an estimate record (the workflow's, or ``logzbench estimate --json``'s)."""
    return isinstance(obj, Mapping) and ("result" in obj or "estimator" in obj)


def _read_json(path: Path, strict: bool = True) -> Iterable[tuple[Mapping[str, Any], str]]:
    """The estimate records of a JSON file: one record, or a list of them.

    Raises ValueError naming the file for malformed JSON, a list mixing records with anything
    else, and (``strict``: a file named directly) any other JSON; found in a directory (not
    ``strict``), other JSON files (e.g. a ``report.json``, a model's training record) are skipped.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            obj = json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file or directory") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if isinstance(obj, list):
        bad = next((i for i, o in enumerate(obj) if not _is_record(o)), None)
        if bad is not None and not strict and not any(_is_record(o) for o in obj):
            return  # a foreign list in a directory: skipped as other JSON files are
        if bad is not None:
            raise ValueError(
                f"{path}: item {bad} of the list is not an estimate record ({_describe(obj[bad])}); "
                "expected an estimate record (with 'result' or 'estimator') or a list of them"
            )
        for o in obj:
            yield o, str(path)
    elif _is_record(obj):
        yield obj, str(path)
    elif strict:
        raise ValueError(
            f"{path}: not an estimate record ({_describe(obj)}); expected an estimate record "
            "(with 'result' or 'estimator') or a list of them"
        )
    # other JSON files in a directory (e.g. a report.json in the same tree) are ignored


def _describe(obj: Any) -> str:
    """A JSON value in a few words, for messages."""
    if isinstance(obj, Mapping):
        return f"an object with keys {sorted(obj)[:6]}"
    return f"{type(obj).__name__} {json.dumps(obj)[:40]}"


def find_records(results) -> list[tuple[Mapping[str, Any], str | None]]:
    """Every (estimate record, source file) of ``results`` (as :func:`load_results` takes them)."""
    return list(_iter_sources(results))


def _model_constant(df: pd.DataFrame, column: str, default: str) -> list[str]:
    """``column`` with one value per model: rows that leave it unset (``""`` or ``default``, e.g. a
    bare exact result) take the model's other rows' value."""
    known = df[~df[column].isin(["", default])].groupby("model")[column].first()
    return [known.get(m, v) if v in ("", default) else v for m, v in zip(df["model"], df[column])]


# --------------------------------------------------------------------------- consistency of the inputs
#: estimators whose ``log Z`` is, by definition, a function of the per-chain log-weights they store
#: (``<setting>.npz``, ``--log-weights``): ``+1``: ``log Z = logmeanexp(log_weights)``; ``-1``:
#: ``log Z = -logmeanexp(log_weights)`` (reverse importance sampling stores the weights of ``1 / Z``; smc
#: stores its replicas' log Z-hats)
LOG_Z_FROM_WEIGHTS = {"ais": 1, "is": 1, "ris": -1, "hais": 1, "ais-hmc": 1, "ais-mh": 1, "smc": 1}
#: relative tolerance of a recomputed ``log Z`` (float64 round-off of two logsumexp implementations)
LOG_Z_RTOL = 1e-9


def printable_path(path: str | os.PathLike) -> str:
    """``path`` as text that can be printed and written in any encoding (a name that is not UTF-8
    shows its bytes as ``\\xNN``)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def check_utf8_path(path: str | os.PathLike, what: str = "path") -> None:
    """Refuse (``ValueError`` naming it) a path whose name is not valid UTF-8: the report's tables
    and ``report.json`` record every source file by its name, as UTF-8 text."""
    try:
        os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(
            f"{what} {printable_path(path)}: the name is not valid UTF-8 (the report records every "
            "source file by name, as UTF-8 text); rename it"
        ) from None


def _arrays_file(source: str | os.PathLike | None) -> Path | None:
    """The per-chain arrays of a record file: ``<stem>.npz`` beside ``<stem>.json`` (the workflow's
    ``<setting>.npz``; ``logzbench estimate --json X.json --log-weights X.npz``), where it exists.  (Not the
    path a record names: relative to another working directory it may be another run's file.)"""
    npz = Path(source).with_suffix(".npz") if source is not None else None
    return npz if npz is not None and npz.is_file() else None


def check_log_weights(rec: Mapping[str, Any], source: str | os.PathLike | None) -> None:
    """Refuse a record whose ``log Z`` disagrees with the per-chain log-weights stored with it.

    For the estimators of :data:`LOG_Z_FROM_WEIGHTS` ``log Z`` is ``+-logmeanexp`` of the 1-D
    ``log_weights`` in ``<stem>.npz`` beside the record file (:func:`_arrays_file`); a record edited by
    hand (or arrays of another run) differs by more than :data:`LOG_Z_RTOL` and is refused
    (``ValueError``, one line naming the record and the arrays).  Records without such arrays, and
    other estimators, are not checked."""
    res = rec.get("result", rec)
    sign = LOG_Z_FROM_WEIGHTS.get(str(res.get("estimator") or "").lower())
    log_z = res.get("log_z")
    if sign is None or not isinstance(log_z, (int, float)) or isinstance(log_z, bool):
        return
    npz = _arrays_file(source)
    if npz is None:
        return
    try:
        with np.load(npz, allow_pickle=False) as z:
            if "log_weights" not in z.files:
                return
            lw = np.asarray(z["log_weights"], dtype=np.float64)
    except Exception as exc:
        raise ValueError(
            f"{printable_path(npz)}: the per-chain arrays of {printable_path(source or npz)} cannot "
            f"be read ({type(exc).__name__}: {exc})"
        ) from None
    if lw.ndim != 1 or lw.size == 0 or not np.isfinite(lw).all():
        return
    from scipy.special import logsumexp  # lazy, as in flags.py: only a report needs it

    recomputed = sign * (float(logsumexp(lw)) - math.log(lw.size))  # +-logmeanexp
    if abs(float(log_z) - recomputed) > LOG_Z_RTOL * max(1.0, abs(recomputed)):
        raise ValueError(
            f"{printable_path(source or npz)}: log_z {float(log_z)!r} disagrees with the {lw.size} "
            f"log-weights in {printable_path(npz)} ({'-' if sign < 0 else ''}logmeanexp = "
            f"{recomputed!r}); the record was edited or its arrays are another run's: rerun the "
            "estimate"
        )


def _model_identity(rec: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``(sha256, model file)`` a record names: ``logzbench estimate --json`` records the model file it
    read and its content hash (``model_sha256``); the workflow's records name the config's model."""
    sha = rec.get("model_sha256") if isinstance(rec.get("model_sha256"), str) else None
    path = rec.get("model") if "result" not in rec and isinstance(rec.get("model"), str) else None
    return sha, path


def check_models_distinct(records: Sequence[tuple[Mapping[str, Any], str | None]], names: Sequence[str]) -> None:
    """Refuse (``ValueError``, one line naming two of the records) records of two different models that
    would be reported under one name, e.g. ``model.npz`` of two runs: their exact values would be averaged
    and every estimate compared with the mean.  Models are told apart by their content hash, else (records
    without one) by the model file the records name; records that name neither are not checked."""
    ids = [_model_identity(rec) for rec, _ in records]
    sha_of_path = {path: sha for sha, path in ids if sha and path}
    seen: dict[str, tuple[str, int]] = {}
    for i, ((sha, path), name) in enumerate(zip(ids, names)):
        ident = sha or sha_of_path.get(path) or (os.path.normpath(path) if path else None)
        if ident is None:
            continue
        first = seen.setdefault(name, (ident, i))
        if first[0] != ident:

            def what(j):
                (h, p), src = ids[j], records[j][1]
                return (
                    f"{printable_path(src) if src else 'a record'} (model {printable_path(p) if p else '?'}"
                    + (f", sha256 {h[:12]}" if h else "")
                    + ")"
                )

            raise ValueError(
                f"records of two different models would both be reported as model {name!r}: "
                f"{what(first[1])} and {what(i)}; give the model files different names or report "
                "them separately"
            )


def check_sweeps_complete(sources: Iterable[str | os.PathLike | None]) -> None:
    """Refuse (``ValueError``, one line) records of a workflow sweep one of whose settings' record
    (``<setting>.json``) was deleted: the records in the directory of each source file list their sweep's
    settings (``sweep_stems``), and a report without one of them would report one seed fewer.  The check
    and the message (the file, the ``snakemake --forcerun`` that rebuilds it) are the workflow's own
    (:func:`logzbench.pipeline.outputs.missing_records`)."""
    from ..pipeline.outputs import missing_records

    problems = [p for d in dict.fromkeys(Path(s).parent for s in sources if s is not None) for p in missing_records(d)]
    if problems:
        more = f"; {len(problems) - 1} more records of finished sweeps are missing too" if len(problems) > 1 else ""
        raise ValueError(problems[0][1] + more)


def load_results(results, records: Sequence[tuple[Mapping[str, Any], str | None]] | None = None) -> pd.DataFrame:
    """Per-run table from a results directory (searched recursively for ``*.json``), JSON
    files, or record dicts.  Exact values of each model are attached to every row.  ``records``: the
    ``(record, source file)`` pairs of ``results`` already read (:func:`find_records`), read again otherwise.

    Refused (``ValueError``, one line naming the file): a record whose ``log Z`` disagrees with its
    stored log-weights (:func:`check_log_weights`), records of two different models under one name
    (:func:`check_models_distinct`), a source path that is not UTF-8 (:func:`check_utf8_path`), a workflow
    sweep with a setting's record deleted (:func:`check_sweeps_complete`)."""
    records = list(_iter_sources(results)) if records is None else list(records)
    for rec, src in records:
        if src is not None:
            check_utf8_path(src, "estimate record")
        check_log_weights(rec, src)
    check_sweeps_complete(src for _, src in records)
    rows = [normalize_record(rec, src) for rec, src in records]
    check_models_distinct(records, [r["model"] for r in rows])
    df = pd.DataFrame(rows, columns=[c for c in PER_RUN_COLUMNS if c not in _DERIVED_COLUMNS])
    for c in ("K", "seed", "chains", "n_weights", "n_examples", "burn_in", "thin"):
        df[c] = pd.array(df[c], dtype="Int64")
    for c in (
        "family",
        "architecture",
        "dataset",
        "test_set",
        "csl_mode",
        "csl_protocol",
        "schedule",
        "init",
        "device",
        "refused",
        "key",
        "mlflow_run_id",
        "source",
    ):
        df[c] = df[c].fillna("").astype(str)
    df["family"] = _model_constant(df, "family", "rbm")
    df["architecture"] = _model_constant(df, "architecture", "")
    # the exact log-likelihood of the same test rows (a per-class subset has its own), log Z of the model
    exacts = df[df["method"] == "exact"]
    df = df.merge(
        exacts.groupby(["model", "test_set"]).agg(exact_test_ll=("mean_test_ll", "mean")),
        how="left",
        left_on=["model", "test_set"],
        right_index=True,
    )
    df = df.merge(
        exacts.groupby("model").agg(exact_log_z=("log_z", "mean")), how="left", left_on="model", right_index=True
    )
    # a mean over points simulated from the model (BDMC) has no exact value of the test rows: its own exact mean
    # is its bracket's (table_bracket.csv), not this column's
    simulated = np.array([_simulated(rec) for rec, _ in records], dtype=bool)
    df.loc[simulated, "exact_test_ll"] = float("nan")
    df["ll_minus_exact"] = df["mean_test_ll"] - df["exact_test_ll"]
    df["log_z_minus_exact"] = df["log_z"] - df["exact_log_z"]
    df["flags"] = ""
    df = df.sort_values(
        ["model", "method", "estimator", "schedule", "K", "init", "seed"], na_position="first", kind="stable"
    ).reset_index(drop=True)
    return df[PER_RUN_COLUMNS]


def _simulated(rec: Mapping[str, Any]) -> bool:
    """Whether a record's mean log-likelihood is over points simulated from the model (BDMC:
    ``extra.data == "simulated"``), not over the test rows."""
    return (rec.get("result", rec).get("extra") or {}).get("data") == "simulated"


def group_key(row: pd.Series) -> tuple:
    """The row's :data:`GROUP_COLUMNS` values (missing ones as ``None``): equal for the runs of one
    summary row and that row."""
    return tuple(None if pd.isna(row[c]) else row[c] for c in GROUP_COLUMNS)


# --------------------------------------------------------------------------- aggregation over seeds
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


def seed_spread(values: pd.Series, se: pd.Series) -> tuple[int, float, float]:
    """``(n, sd, rms_se)`` over the runs with a finite value and a finite standard error: ``n`` such
    runs, the sd of their values (``ddof=1``; NaN below 2) and ``sqrt(mean(se^2))``.  With correct
    standard errors (and normal errors) ``(n - 1) sd^2 / rms_se^2`` is about chi-square(n - 1)."""
    v, e = values.to_numpy(dtype=float), se.to_numpy(dtype=float)
    ok = np.isfinite(v) & np.isfinite(e)
    n = int(ok.sum())
    sd = float(np.std(v[ok], ddof=1)) if n >= 2 else float("nan")
    rms = float(np.sqrt(np.mean(np.square(e[ok])))) if n else float("nan")
    return n, sd, rms


def _spread_ratio(values: pd.Series, se: pd.Series) -> float:
    """sd over seeds / rms of the runs' standard errors (about 1 when the standard errors are right)."""
    n, sd, rms = seed_spread(values, se)
    return sd / rms if n >= 2 and rms > 0 else float("nan")


def _stat(values: pd.Series, how: str) -> float:
    """``values.<how>()`` over the known values (NaN when there are none; ``std`` needs two)."""
    if values.notna().sum() < (2 if how == "std" else 1):
        return float("nan")
    return float(values.std(ddof=1) if how == "std" else getattr(values, how)())


def _first_known(values: pd.Series) -> Any:
    return values.dropna().iloc[0] if values.notna().any() else pd.NA


def _summary_row(g: pd.DataFrame) -> dict[str, Any]:
    """The aggregates of one group of runs (see :func:`summarize`)."""
    ll, lz = g["mean_test_ll"], g["log_z"]
    return {
        "family": g["family"].iloc[0],
        "architecture": g["architecture"].iloc[0],
        "n_seeds": len(g),
        "seeds": " ".join(str(int(s)) for s in g["seed"].dropna()),
        **{
            c: _first_known(g[c])
            for c in ("chains", "n_weights", "n_examples", "csl_mode", "csl_protocol", "burn_in", "thin")
        },
        "mean_test_ll": _stat(ll, "mean"),
        "mean_test_ll_sd": _stat(ll, "std"),
        "mean_test_ll_se": _combined_se(g["mean_test_ll_stderr"], ll),
        "se_spread_ratio": _spread_ratio(ll, g["mean_test_ll_stderr"]),
        "mean_test_ll_min": _stat(ll, "min"),
        "mean_test_ll_max": _stat(ll, "max"),
        "log_z": _stat(lz, "mean"),
        "log_z_sd": _stat(lz, "std"),
        "log_z_se": _combined_se(g["log_z_stderr"], lz),
        "log_z_se_spread_ratio": _spread_ratio(lz, g["log_z_stderr"]),
        "ess": _stat(g["ess"], "mean"),
        "ess_min": _stat(g["ess"], "min"),
        "ess_fraction_min": _stat(g["ess_fraction"], "min"),
        "khat_max": _stat(g["khat"], "max"),
        "seconds": float(g["seconds"].mean()),
        "total_sweeps": float(g["total_sweeps"].mean()),
        **{c: _stat(g[c], "mean") for c in ("sweeps_per_second", "per_example_ll_sd")},
        "exact_test_ll": float(g["exact_test_ll"].iloc[0]),
        "exact_log_z": float(g["exact_log_z"].iloc[0]),
        "log_f_is": _stat(g["log_f_is"], "mean"),
        "log_f_is_se": _combined_se(g["log_f_is_stderr"], g["log_f_is"]),
        **{c: _stat(g[c], "mean") for c in ("log_f_is_jensen_gap", "log_f_mean_field", "log_f_is_ess_mean")},
        "log_f_is_khat": _stat(g["log_f_is_khat"], "max"),  # the largest of the seeds' medians over test rows
        "is_samples": _stat(g["is_samples"], "max"),
    }


def summarize(per_run: pd.DataFrame) -> pd.DataFrame:
    """Aggregate the per-run table over seeds (one row per model x estimator x schedule x K x init).

    Means, spread (sd, min, max) and standard errors of the mean test log-likelihood and of
    log Z, the spread over seeds against the runs' standard errors (``se_spread_ratio``,
    ``log_z_se_spread_ratio``: about 1 when they are right), ESS, the largest Pareto k-hat
    (``khat_max``), timings, the exact values, the deep models' log f(v) summaries; empty
    ``gap_ais_minus_raise`` and ``flags`` columns (see :func:`.flags.apply_flags`).
    """
    rows = [
        {**dict(zip(GROUP_COLUMNS, keys)), **_summary_row(g)}
        for keys, g in per_run.groupby(GROUP_COLUMNS, dropna=False, sort=False)
    ]
    s = pd.DataFrame(rows, columns=_SUMMARY_COLUMNS)
    for c in ("K", "burn_in", "thin"):
        s[c] = pd.array(s[c], dtype="Int64")
    s["ll_minus_exact"] = s["mean_test_ll"] - s["exact_test_ll"]
    s["log_z_minus_exact"] = s["log_z"] - s["exact_log_z"]
    s["gap_ais_minus_raise"] = float("nan")
    s["flags"] = ""
    return s.reset_index(drop=True)
