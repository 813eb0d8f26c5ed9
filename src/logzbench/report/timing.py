"""Training time of the learner-trained models, AVIL's against VCD's (Li et al. 2019, Sec. 5.5).

The paper reports that AVIL trains a DBM about ten times slower than VCD in its implementation;
``table_learner_timing.csv`` (:func:`make_table_learner_timing`) puts our measured times beside the
models' final test log-likelihoods so that the cost of each learner is read with what it bought.

The times come from each model's training summary record (``results/models/<model>.json``, written
by :func:`logzbench.pipeline.jobs.train_job`): ``seconds`` is the wall time of the training call,
the learner's monitors included (the exact and AIS monitors of ``log_every`` / ``ais_every``, which a
config gives both learners alike).  The AIS monitor can cost more than a cheap learner's training
(VCD's iterations take milliseconds), so the ratio of AVIL's time to VCD's is taken from the model's
history (``<model>.history.csv``, cumulative ``seconds`` per logged row) over the logged intervals
without an AIS monitor run.  The job's CPU seconds come from its usage file
(:func:`logzbench.pipeline.usage.job_usage_file`, ``results/benchmarks/train/<model>.job.tsv``) where
the workflow wrote one.  A time that was not recorded is left empty, never zero.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from ..pipeline.usage import job_usage_file, log_file, read_usage
from .learners import _read_record, final_ais, learner_models
from .records import as_float, int_or_none

__all__ = ["TIMING_COLUMNS", "make_table_learner_timing"]

TIMING_COLUMNS = [
    "model",
    "dataset",
    "source",
    "family",
    "learner",
    "hidden_sizes",
    "iterations",
    "train_seconds",
    "seconds_per_iteration",
    "seconds_per_iteration_no_ais",
    "cpu_seconds",
    "threads",
    "device",
    "K",
    "init",
    "ais",
    "ais_se",
    "avil_vcd_time_ratio",
]

#: the pair of learners whose times the paper compares (Sec. 5.5), on models of this family
RATIO_LEARNERS = ("avil", "vcd")
RATIO_FAMILY = "dbm"


def _positive(x: Any) -> float:
    """``x`` as a float when it is a finite positive number, else NaN (a time not recorded)."""
    v = as_float(x)
    return v if math.isfinite(v) and v > 0 else math.nan


def _no_ais_seconds_per_iteration(history: pd.DataFrame | None) -> float:
    """Seconds per iteration over the logged intervals that end at a row without an AIS monitor run: the
    history's ``seconds`` is cumulative and a row's time includes its monitors, so these intervals hold
    training (and the cheap bound / exact monitors of that row) but not the AIS monitor's sweeps.  NaN
    without a history, its ``seconds`` and ``iteration``, or such an interval."""
    if history is None or not {"seconds", "iteration"} <= set(history.columns) or len(history) < 2:
        return math.nan
    h = history.sort_values("iteration")
    d_sec, d_it = h["seconds"].diff().iloc[1:], h["iteration"].diff().iloc[1:]
    clean = h["ais_log_z"].iloc[1:].isna() if "ais_log_z" in h else pd.Series(True, index=d_sec.index)
    keep = clean & d_it.gt(0) & d_sec.notna()
    its = float(d_it[keep].sum())
    return float(d_sec[keep].sum()) / its if its > 0 else math.nan


def _cpu_seconds(files: Path | None, model: str) -> float:
    """The training job's CPU seconds from its usage file beside the results (NaN where none)."""
    if files is None:
        return math.nan
    path = job_usage_file(log_file(str(files.parent), f"train/{model}"))
    if path is None or not os.path.isfile(path):
        return math.nan
    try:
        return _positive(read_usage(path).get("cpu_time"))
    except (OSError, ValueError):
        return math.nan


def _row(rec: Mapping[str, Any], files: Path | None, summary: pd.DataFrame) -> dict[str, Any] | None:
    models = learner_models([rec])
    if not models:
        return None
    m = models[0]
    history = files / f"{m.model}.history.csv" if files is not None else None
    history = pd.read_csv(history) if history is not None and history.is_file() else None
    hp = rec.get("hyperparams") or {}
    final = rec.get("final") or {}
    iterations = int_or_none(final.get("final_iteration"))
    if iterations is None:
        iterations = int_or_none(hp.get("iterations"))
    seconds = _positive(rec.get("seconds", final.get("train_seconds")))
    per_it = seconds / iterations if iterations and math.isfinite(seconds) else math.nan
    ais = final_ais(summary, m.model)
    return {
        **m.columns(),
        "iterations": iterations,
        "train_seconds": seconds,
        "seconds_per_iteration": per_it,
        "seconds_per_iteration_no_ais": _no_ais_seconds_per_iteration(history),
        "cpu_seconds": _cpu_seconds(files, m.model),
        "threads": int_or_none(rec.get("threads")),
        "device": str(rec.get("device") or hp.get("device") or ""),
        **{k: ais[k] for k in ("K", "init", "ais", "ais_se")},
    }


def _ratios(t: pd.DataFrame) -> pd.Series:
    """Per row, AVIL's seconds per iteration over VCD's for the DBMs of one dataset and hidden sizes
    that have both (an AVIL row against the first VCD model by name, a VCD row the first AVIL
    model against it): without the AIS monitor's time where both have it
    (``seconds_per_iteration_no_ais``), else of the whole training; NaN elsewhere or where a time is
    missing."""
    out = pd.Series(math.nan, index=t.index, dtype=float)
    dbm = t[(t["family"] == RATIO_FAMILY) & t["learner"].isin(RATIO_LEARNERS)]
    for _, g in dbm.groupby(["dataset", "hidden_sizes"]):
        avil, vcd = (g[g["learner"] == x].sort_values("model") for x in RATIO_LEARNERS)
        if avil.empty or vcd.empty:
            continue
        col = "seconds_per_iteration_no_ais"
        if avil[col].isna().any() or vcd[col].isna().any():
            col = "seconds_per_iteration"
        a0, v0 = avil[col].iloc[0], vcd[col].iloc[0]
        out[avil.index] = avil[col] / v0
        out[vcd.index] = a0 / vcd[col]
    return out


def make_table_learner_timing(
    summary: pd.DataFrame, model_records: Iterable[str | os.PathLike | Mapping[str, Any]]
) -> pd.DataFrame:
    """``table_learner_timing.csv``: one row per learner-trained model, its training time beside its
    final AIS test log-likelihood.

    Parameters
    ----------
    summary : pandas.DataFrame
        The report's summary over seeds (:func:`.records.summarize`): ``K``, ``init``, ``ais`` and
        ``ais_se`` of :func:`.learners.final_ais` (empty without an AIS estimate).
    model_records : iterable of JSON files or dicts
        Training summary records (``results/models/<model>.json``); those without
        ``hyperparams.learner`` are skipped.  Beside a file, its history (``<model>.history.csv``) gives
        ``seconds_per_iteration_no_ais`` and its usage file (``<results>/benchmarks/train/<model>.job.tsv``)
        ``cpu_seconds``.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`TIMING_COLUMNS`, one row per learner-trained model sorted by dataset, family,
        learner and model: ``iterations`` (the last logged iteration, else the ``iterations``
        hyperparameter), ``train_seconds`` (wall seconds of training, monitors included),
        ``seconds_per_iteration``, ``seconds_per_iteration_no_ais`` (from the history, over the logged
        intervals that end without an AIS monitor run), ``cpu_seconds`` (the job's user + system CPU
        time), ``threads`` and ``device`` as recorded, and ``avil_vcd_time_ratio``: on the AVIL and VCD DBMs
        of a dataset (and hidden sizes) that has both, AVIL's seconds per iteration over VCD's, without
        the AIS monitor where both histories allow it, else of the whole training (the paper's Sec. 5.5:
        about 10).  A time that was not recorded is NaN (an empty CSV cell), not zero.
    """
    rows = []
    for item in model_records:
        rec, files = _read_record(item)
        row = _row(rec, files, summary)
        if row is not None:
            rows.append(row)
    t = pd.DataFrame(rows, columns=TIMING_COLUMNS)
    t = t.sort_values(["dataset", "family", "learner", "model"], kind="stable").reset_index(drop=True)
    for c in ("iterations", "threads", "K"):
        t[c] = pd.array(t[c], dtype="Int64")
    for c in ("train_seconds", "seconds_per_iteration", "seconds_per_iteration_no_ais", "cpu_seconds", "ais", "ais_se"):
        t[c] = t[c].astype(float)
    t["avil_vcd_time_ratio"] = _ratios(t) if len(t) else pd.Series(dtype=float)
    return t
