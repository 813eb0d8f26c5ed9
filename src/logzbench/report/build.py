"""The report's driver: :func:`build_report` reads the estimate records and writes every table, flag
list, figure and ``report.json`` of the report (the files are described in :mod:`logzbench.report`);
:func:`report_job` is the workflow's rule ``report`` (the same, plus the MLflow run and UI set-up).

The tables, flags and figures themselves are made by the package's other modules; this one only
wires them together and writes the results atomically.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..plotting import figure_paths
from ..utils import utc_now, write_csv_atomic, write_json_atomic
from .bracket import add_continuous_brackets, make_table_bracket, plot_bracket
from .diagnostics import write_diagnostics
from .flags import EXACT_TOLERANCE, ReportThresholds, apply_flags, split_reasons
from .learner_plots import plot_learners
from .learners import learner_models, make_table_learners, make_table_learners_paper
from .papers import check_paper_rows_match, make_table_papers
from .plots import plot_annealed_trials, plot_model, plot_model_size
from .records import as_float, find_records, load_results, summarize
from .review import REVIEW_TABLES, write_review
from .tables import (
    annealed_trials,
    flag_rows,
    ground_truth,
    make_table1,
    make_table2,
    make_table_continuous,
    make_table_csl,
)
from .timing import make_table_learner_timing

__all__ = ["build_report", "report_job"]


_EMPTY_TABLE1_COLUMNS = ["model", "schedule", "K", "exact", "flags"]
_EMPTY_TABLE2_COLUMNS = ["model", "family", "architecture", "schedule", "K", "n_seeds", "exact", "flags"]


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
            elif isinstance(v, (bool, np.bool_)):
                clean[k] = bool(v)
            elif isinstance(v, (np.integer, int)) and not isinstance(v, bool):
                clean[k] = int(v)
            elif isinstance(v, (np.floating, float)):
                clean[k] = float(v)
            else:
                clean[k] = v
        out.append(clean)
    return out


def _plots(
    per_run: pd.DataFrame,
    summary: pd.DataFrame,
    trials: pd.DataFrame,
    table_c: pd.DataFrame,
    models: Sequence[str] | None,
    out: Path,
) -> tuple[dict[str, Path], dict[str, Path], Path]:
    """Draw ``plots/<model>.png`` and ``plots/<model>_bias_mse.png`` for every model (those of the
    records and ``models``) and ``plots/model_size.png``; their paths."""
    model_plots: dict[str, Path] = {}
    trial_plots: dict[str, Path] = {}
    for m in sorted(set(per_run["model"]) | set(models or [])):
        model_plots[m] = plot_model(summary, m, out / "plots" / f"{m}.png")
        trial_plots[m] = plot_annealed_trials(trials, m, out / "plots" / f"{m}_bias_mse.png")
    return model_plots, trial_plots, plot_model_size(table_c, out / "plots" / "model_size.png")


def _draw_here(draw: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """``draw(*args)`` now; a function returning what it returned."""
    result = draw(*args)
    return lambda: result


def _draw_in_background(draw: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """``draw(*args)`` in a forked process (its figures are files; what it returns comes back pickled); a
    function that waits for it and returns that, or raises what it raised.  Forked, not spawned: the
    tables are handed over as they are, without pickling or a second start-up."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"))
    future = pool.submit(draw, *args)

    def result() -> Any:
        try:
            return future.result()
        finally:
            pool.shutdown()

    return result


#: the report's per-run column of each metric :func:`_tag_runs` logs (:data:`.tracking.EXACT_DIFFERENCE_METRICS`)
_EXACT_DIFFERENCE_COLUMNS = {"log_z_minus_exact": "log_z_minus_exact", "mean_test_ll_minus_exact": "ll_minus_exact"}


def _exact_differences(per_run: pd.DataFrame) -> dict[str, dict[str, float]]:
    """``{key: {metric: value}}``: each estimate's difference from its model's exact value (log Z, mean
    test log-likelihood of the same test rows), where the model has one."""
    out: dict[str, dict[str, float]] = {}
    for _, r in per_run.iterrows():
        if not r["key"]:
            continue
        values = {m: as_float(r[c]) for m, c in _EXACT_DIFFERENCE_COLUMNS.items() if c in r}
        values = {m: v for m, v in values.items() if np.isfinite(v)}
        if values:
            out[r["key"]] = values
    return out


def _tag_runs(per_run: pd.DataFrame, tracking_uri: str | None, experiment_name: str | None):
    """Set each estimate's flags as tags on its MLflow run (all of them, and the first in short) and log
    its difference from the exact value (``log_z_minus_exact``, ``mean_test_ll_minus_exact``) where its
    model has one; what :func:`.tracking.set_flags` returns."""
    from .. import tracking

    flags_by_key = {r["key"]: split_reasons(r["flags"]) for _, r in per_run.iterrows() if r["key"]}
    return tracking.set_flags(
        flags_by_key,
        uri=tracking_uri,
        experiment_name=experiment_name or tracking.DEFAULT_EXPERIMENT,
        metrics=_exact_differences(per_run),
    )


def _write_review(
    out: Path,
    paths: Mapping[str, Any],
    summary: pd.DataFrame,
    table_b: pd.DataFrame,
    *,
    models: Sequence[str] | None,
    thresholds: Mapping[str, Any],
    extra_tables: Mapping[str, pd.DataFrame],
) -> Path:
    """``review.html`` (:mod:`.review`): the flagged summary per model, the brackets, every figure drawn
    (``paths``' figure maps) and the report's tables, those in memory (``extra_tables``) as they are and the
    others read back from the CSV files just written (the same values, as the CSV files show them)."""
    tables: dict[str, pd.DataFrame] = dict(extra_tables)
    for name in REVIEW_TABLES:
        if name not in tables and paths.get(name) is not None and Path(paths[name]).is_file():
            try:
                tables[name] = pd.read_csv(paths[name])
            except pd.errors.EmptyDataError:  # (a CSV with no columns at all)
                tables[name] = pd.DataFrame()
    figures = {
        k: paths[k]
        for k in ("plots", "trial_plots", "bracket_plots", "learner_plots", "diagnostic_plots")
        if k in paths
    }
    extra = (
        [("Mean log-likelihood against model size (continuous models)", paths["model_size_plot"])]
        if ("model_size_plot" in paths)
        else []
    )
    return write_review(
        out / "review.html",
        summary,
        table_bracket=table_b,
        tables=tables,
        figures=figures,
        extra_figures=extra,
        models=models,
        thresholds=thresholds,
    )


def build_report(
    results: str | os.PathLike | Iterable[str | os.PathLike | Mapping[str, Any]],
    out_dir: str | os.PathLike,
    *,
    gap_threshold: float = 1.0,
    ess_fraction: float = 0.1,
    z: float = 2.0,
    truth_tolerance: float = 0.1,
    khat: float = 0.7,
    exact_tolerance: float = EXACT_TOLERANCE,
    models: Sequence[str] | None = None,
    plots: bool = True,
    tracking_uri: str | None = None,
    experiment_name: str | None = None,
    model_records: Iterable[str | os.PathLike | Mapping[str, Any]] = (),
    data_dir: str | os.PathLike | None = None,
    paper_rows: Mapping[str, Mapping[str, str]] | None = None,
    check_papers: bool = False,
    bracket_models: Sequence[str] = (),
    diagnostics: Iterable[str | os.PathLike] = (),
    workers: int = 1,
) -> dict[str, Any]:
    """Build the report from estimate records.

    Parameters
    ----------
    results : directory, JSON file, or iterable of JSON files / record dicts
        A directory is searched recursively for ``*.json`` estimate records.
    out_dir : directory
        Receives ``per_run.csv``, ``summary.csv``, ``table1.csv`` (RBMs), ``table2.csv`` (DBMs and
        DBNs), ``table_continuous.csv``, ``table_bracket.csv``, ``flags.csv``, ``annealed_trials.csv``
        (bias / MSE of log Z over seeds against the ground truth, Liu et al. Figs 3-4), ``report.json``,
        ``plots/<model>.png``, ``plots/<model>_bias_mse.png``, ``plots/model_size.png``,
        ``plots/<model>_bracket.png`` (models with a bracket estimate),
        ``table_learners.csv``, ``table_papers.csv``, the learner-trained models' figures and
        ``review.html`` (the page a person reads: :mod:`.review`) (all written atomically).
    gap_threshold : float
        Flag AIS and RAISE estimates disagreeing by more than this many nats.
    ess_fraction : float
        Flag estimates whose effective sample size is below this fraction of the chains.
    z : float
        Standard errors beyond which RAISE > AIS, AIS log Z > reverse-AIS log Z, or an estimate on
        the wrong side of the exact value, is flagged; also the interval of the repeated-trials coverage.
    khat : float
        Flag estimates whose log-weights have a Pareto k-hat above this (their standard error is not
        to be trusted).
    exact_tolerance : float
        Flag any estimate more than ``z`` standard errors *and* more than this many nats from the exact
        value (closed form), on either side (:data:`.flags.OFF_EXACT`).
    truth_tolerance : float
        Models without an exact value: the ground truth of ``annealed_trials.csv`` is the mean of
        AIS and reverse AIS at their largest common K when they agree within this many nats.
    models : sequence of str, optional
        Models that must get a plot even without estimates (a placeholder is drawn).
    plots : bool
        Draw the plots.
    tracking_uri, experiment_name : str, optional
        When given, tag the affected MLflow runs (``logzbench.flag``, ``logzbench.flag_reason``,
        ``logzbench.flagged``) and log on the runs of models with an exact value their difference from it
        (metrics ``log_z_minus_exact``, ``mean_test_ll_minus_exact``).
    model_records : iterable of JSON files or dicts
        Training summary records (``results/models/<model>.json``); those of learner-trained models
        make the rows of ``table_learners.csv`` and their figures (:mod:`.learners`, :mod:`.learner_plots`;
        their histories, samples and parameters are read beside the files).
    data_dir : directory, optional
        The prepared datasets (``<dataset>.npz``): the source names and image shapes of the learner
        tables and figures.
    paper_rows : mapping, optional
        ``{model: {paper key: row name}}``: the published rows each model stands for
        (``table_papers.csv``, :func:`.papers.make_table_papers`).
    check_papers : bool
        Refuse (``ValueError``) a paper row whose model has no estimate in the results, or none of
        what the row publishes (:func:`.papers.check_paper_rows_match`; the command line's
        ``--paper``).  Otherwise such a row is listed with empty ``ours`` columns.
    bracket_models : sequence of str
        Models that must get ``plots/<model>_bracket.png`` even without bracket estimates (a placeholder is
        drawn; the workflow declares the plot of every model with a sandwich or BDMC job).
    diagnostics : iterable of path
        Per-model diagnostics records (``results/diagnostics/<model>.json``, their arrays beside them):
        ``table_hidden_mass.csv``, ``table_per_class.csv`` and their figures (:mod:`.diagnostics`; the
        tables have only their header without records).
    workers : int
        Processes drawing the figures: with 2 or more, each model's estimates and trials figures are drawn in
        a forked process while this one draws the rest and tags the MLflow runs (the same figures either
        way; the workflow's report job runs alone at the end of a run, with its ``threads``).

    Returns
    -------
    dict
        The paths written (``annealed_trials``, ``per_run``, ``summary``, ``table1``, ``table2``,
        ``table_continuous``, ``table_csl``, ``table_bracket``, ``flags``, ``model_size_plot`` with plots,
        ``report_json``, ``plots``, ``trial_plots`` and ``bracket_plots`` = {model: path}, ``table_learners``,
        ``table_papers``, ``table_learner_timing`` (with learner-trained models),
        ``learner_plots`` = {file stem: path}, ``review`` (``review.html``) and
        ``n_flagged`` (summary rows flagged).
    """
    out = Path(out_dir)
    if tracking_uri is not None:  # a URI MLflow cannot use is refused before anything is written
        from ..tracking import resolve_tracking_uri

        resolve_tracking_uri(tracking_uri)
    records = find_records(results)
    per_run = load_results(results, records=records)
    table_b = make_table_bracket(records, per_run)
    per_run, summary = apply_flags(
        per_run,
        summarize(per_run),
        gap_threshold=gap_threshold,
        ess_fraction=ess_fraction,
        z=z,
        khat=khat,
        exact_tolerance=exact_tolerance,
        brackets=table_b,
    )
    if check_papers:
        check_paper_rows_match(summary, paper_rows or {})
    out.mkdir(parents=True, exist_ok=True)
    t = _make_tables(per_run, summary, table_b, truth_tolerance, z, model_records, data_dir, paper_rows)
    paths = _write_tables(out, t, model_records)
    model_plots: dict[str, Path] = {}
    trial_plots: dict[str, Path] = {}
    drawing = _draw_in_background if plots and workers > 1 else _draw_here
    model_figures = drawing(_plots, per_run, summary, t["trials"], t["table_c"], models, out) if plots else None
    learner_plots = plot_learners(summary, t["learners"], out / "plots") if plots else {}
    bracket_plots = (
        {
            m: plot_bracket(records, m, out / "plots" / f"{m}_bracket.png", table_b)
            for m in sorted(set(table_b["model"]) | set(bracket_models or ()))
        }
        if plots
        else {}
    )
    diag = write_diagnostics(diagnostics, out, plots=plots)  # per-model diagnostics (RAISE Sec. 5, HAIS Fig. 1)
    paths.update(table_hidden_mass=diag["table_hidden_mass"], table_per_class=diag["table_per_class"])
    tagged = (
        _tag_runs(per_run, tracking_uri, experiment_name)
        if tracking_uri is not None or experiment_name is not None
        else None
    )
    if model_figures is not None:
        model_plots, trial_plots, paths["model_size_plot"] = model_figures()
    paths["plots"] = model_plots
    paths["trial_plots"] = trial_plots
    paths["bracket_plots"] = bracket_plots
    thresholds = ReportThresholds(gap_threshold, ess_fraction, z, khat, exact_tolerance)
    report = _report_record(per_run, summary, t, paths, diag, tagged, thresholds, paper_rows, learner_plots)
    paths["learner_plots"] = learner_plots
    paths["diagnostic_plots"] = diag["diagnostic_plots"]
    # the page a person reads: per model its estimates, flags, brackets and figures, then the tables
    paths["review"] = _write_review(
        out,
        paths,
        summary,
        table_b,
        models=models,
        thresholds=report["thresholds"],
        extra_tables={
            "table1": t["table1"],
            "table2": t["table2"],
            "table_continuous": t["table_c"],
            "table_bracket": table_b,
            "summary": summary,
            "flags": flag_rows(summary),
        },
    )
    report["files"]["review"] = str(paths["review"])
    paths["report_json"] = out / "report.json"
    write_json_atomic(paths["report_json"], report)
    paths["n_flagged"] = report["n_flagged_settings"]
    return paths


def _make_tables(per_run, summary, table_b, truth_tolerance, z, model_records, data_dir, paper_rows) -> dict[str, Any]:
    """The report's tables from the flagged runs and settings: ``table1``, ``table2``, ``table_c`` (continuous,
    with the brackets), ``truth`` and ``trials`` (bias / MSE over seeds), ``learners`` (the learner-trained
    models' records) and ``table_l``, ``table_p`` (the papers' rows), ``table_b`` (the brackets)."""
    table_c = add_continuous_brackets(make_table_continuous(summary), table_b)
    truth = ground_truth(per_run, tolerance=truth_tolerance)
    learners = learner_models(model_records, data_dir)
    return {
        "table1": make_table1(summary) if len(summary) else pd.DataFrame(columns=_EMPTY_TABLE1_COLUMNS),
        "table2": make_table2(summary) if len(summary) else pd.DataFrame(columns=_EMPTY_TABLE2_COLUMNS),
        "table_c": table_c,
        "table_b": table_b,
        "truth": truth,
        "trials": annealed_trials(per_run, truth, z=z),
        "learners": learners,
        "table_l": make_table_learners(summary, learners, z=z),
        "table_p": make_table_papers(summary, paper_rows or {}, z=z),
        "per_run": per_run,
        "summary": summary,
    }


def _write_tables(out: Path, t: Mapping[str, Any], model_records) -> dict[str, Any]:
    """Write the tables (atomically) and return ``{name: path}``; the learner tables only with learner-trained
    models."""
    summary = t["summary"]
    paths: dict[str, Any] = {
        "annealed_trials": _write_csv(t["trials"], out / "annealed_trials.csv"),
        "per_run": _write_csv(t["per_run"], out / "per_run.csv"),
        "summary": _write_csv(summary, out / "summary.csv"),
        "table1": _write_csv(t["table1"], out / "table1.csv"),
        "table2": _write_csv(t["table2"], out / "table2.csv"),
        "table_continuous": _write_csv(t["table_c"], out / "table_continuous.csv"),
        "flags": _write_csv(flag_rows(summary), out / "flags.csv"),
        "table_learners": _write_csv(t["table_l"], out / "table_learners.csv"),
        "table_papers": _write_csv(t["table_p"], out / "table_papers.csv"),
        "table_csl": _write_csv(make_table_csl(summary), out / "table_csl.csv"),
        "table_bracket": _write_csv(t["table_b"], out / "table_bracket.csv"),
    }
    if t["learners"]:  # the paper's Tables 2-3 as printed, ours beside theirs
        paths["table_learners_paper"] = _write_csv(
            make_table_learners_paper(t["table_l"]), out / "table_learners_paper.csv"
        )
        # training time per model, AVIL's against VCD's (Li et al. Sec. 5.5)
        timing = make_table_learner_timing(summary, model_records)
        paths["table_learner_timing"] = _write_csv(timing, out / "table_learner_timing.csv")
    return paths


def _report_record(per_run, summary, t, paths, diag, tagged, thresholds, paper_rows, learner_plots) -> dict[str, Any]:
    """``report.json``: counts, flags, the files written and the tables' records; the sections of the learner
    tables, the papers' rows, the brackets and the diagnostics only where the report has them (a report without
    them stays as it was)."""
    table_b, learners = t["table_b"], t["learners"]
    report = {
        "n_runs": int(len(per_run)),
        "n_settings": int(len(summary)),
        "n_flagged_settings": int((summary["flags"] != "").sum()),
        "n_flagged_runs": int((per_run["flags"] != "").sum()),
        "mlflow_runs_tagged": tagged,
        "thresholds": dict(thresholds),
        "models": sorted(set(per_run["model"])),
        "flags": [
            {
                "model": s["model"],
                "estimator": s["estimator"],
                "K": None if pd.isna(s["K"]) else int(s["K"]),
                "init": s["init"],
                "flags": s["flags"],
            }
            for _, s in summary.iterrows()
            if s["flags"]
        ],
        "files": {
            k: str(v)
            for k, v in paths.items()
            if k not in ("plots", "trial_plots", "bracket_plots")
            and (learners or k != "table_learners")
            and (paper_rows or k != "table_papers")
            and (len(table_b) or k != "table_bracket")
            and (diag["hidden_mass"] or diag["per_class"] or k not in ("table_hidden_mass", "table_per_class"))
        },
        "table_continuous": _records(t["table_c"]),
        "ground_truth": _records(t["truth"]),
        "families": {m: f for m, f in per_run.groupby("model")["family"].first().items()},
        "table2": _records(t["table2"]),
        "plots": {k: str(v) for k, v in paths["plots"].items()},
        "trial_plots": {k: str(v) for k, v in paths["trial_plots"].items()},
    }
    if paper_rows:
        report["table_papers"] = _records(t["table_p"])
    if len(table_b) or paths["bracket_plots"]:
        report["table_bracket"] = _records(table_b)
        report["bracket_plots"] = {k: str(v) for k, v in paths["bracket_plots"].items()}
    if learners:
        report["table_learners"] = _records(t["table_l"])
        report["learner_plots"] = {k: str(v) for k, v in learner_plots.items()}
    if diag["hidden_mass"] or diag["per_class"]:
        report["table_hidden_mass"] = diag["hidden_mass"]
        report["table_per_class"] = diag["per_class"]
        report["diagnostic_plots"] = {k: str(v) for k, v in diag["diagnostic_plots"].items()}
    return report


def report_job(
    estimates: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    thresholds: Mapping[str, Any],
    models: Sequence[str],
    tracking: Mapping[str, Any],
    tables: Sequence[str | os.PathLike] = (),
    plots: Sequence[str | os.PathLike] = (),
    model_dir: str | os.PathLike | None = None,
    data_dir: str | os.PathLike | None = None,
    paper_rows: Mapping[str, Mapping[str, str]] | None = None,
    bracket_models: Sequence[str] = (),
    diagnostics: Sequence[str | os.PathLike] = (),
    workers: int = 1,
) -> dict[str, Any]:
    """The workflow's rule ``report``: :func:`build_report` of the estimate records (JSON files) into
    ``out_dir`` with the config's ``thresholds`` (``gap_threshold``, ``ess_fraction``, ``z``,
    ``truth_tolerance``, ``khat``, ``exact_tolerance``), the flags set on the MLflow runs when ``tracking``
    is enabled, and one MLflow run ``report`` with the ``tables`` and ``plots`` as artifacts (its start and
    end: this job's; ``table_learners.csv`` and the learner figures are added to them, every figure's PDF
    twin beside its PNG under ``plots``, and ``review.html`` under ``review``).

    The training records ``<model_dir>/<model>.json`` of ``models`` and the prepared datasets in
    ``data_dir`` feed the learner table and figures; by default the workflow's layout beside
    ``out_dir`` (``results/report`` -> ``results/models``, ``results/data``); ``paper_rows`` (the
    config's ``models.<name>.paper``) make ``table_papers.csv``; ``bracket_models`` (those with a sandwich or
    BDMC job) get ``plots/<model>_bracket.png`` (``table_bracket.csv`` and the bracket figures are added to the
    report run's artifacts);
    ``diagnostics`` (the per-model records ``results/diagnostics/<model>.json``) make ``table_hidden_mass.csv``,
    ``table_per_class.csv`` and their figures (added to the report run's artifacts too); ``workers``: the
    processes drawing the figures (:func:`build_report`; the rule's threads)."""
    started = utc_now()
    enabled = bool(tracking.get("enabled"))
    root = Path(out_dir).parent
    model_dir = Path(model_dir) if model_dir is not None else root / "models"
    records = [p for p in (model_dir / f"{m}.json" for m in models) if p.is_file()]
    paths = build_report(
        list(estimates),
        out_dir,
        gap_threshold=thresholds["gap_threshold"],
        ess_fraction=thresholds["ess_fraction"],
        z=thresholds["z"],
        truth_tolerance=thresholds["truth_tolerance"],
        khat=thresholds.get("khat", 0.7),
        exact_tolerance=thresholds.get("exact_tolerance", EXACT_TOLERANCE),
        models=list(models),
        tracking_uri=tracking["uri"] if enabled else None,
        experiment_name=tracking["experiment"] if enabled else None,
        model_records=records,
        data_dir=data_dir if data_dir is not None else root / "data",
        paper_rows=paper_rows,
        bracket_models=list(bracket_models),
        diagnostics=list(diagnostics),
        workers=workers,
    )
    tables, plots = _report_artifacts(tables, plots, paths)
    if enabled:
        from ..tracking import log_run

        log_run(
            "report",
            uri=tracking["uri"],
            experiment_name=tracking["experiment"],
            kind="report",
            params={"n_estimates": len(estimates), **thresholds},
            metrics={"n_flagged_settings": paths["n_flagged"]},
            artifacts={
                **{str(f): "tables" for f in tables},
                **{str(p): "plots" for p in plots},
                str(paths["review"]): "review",
            },
            start_time=started,
            end_time=utc_now(),
        )
    print(f"report: {paths}")
    if enabled:
        _set_up_dashboard(tracking)
    return paths


def _report_artifacts(tables, plots, paths: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The report run's artifacts: the rule's ``tables`` and ``plots`` with the learner, CSL, bracket and
    diagnostics tables and figures :func:`build_report` wrote (each once), and each figure's PDF twin
    (:func:`logzbench.plotting.save_figure` writes both) beside its PNG."""
    tables = [
        *tables,
        paths["table_learners"],
        paths["table_papers"],
        paths["table_csl"],
        *([paths["table_learners_paper"]] if "table_learners_paper" in paths else []),
        *([paths["table_learner_timing"]] if "table_learner_timing" in paths else []),
    ]
    tables = list(
        dict.fromkeys(
            [
                *map(str, tables),
                str(paths["table_bracket"]),
                str(paths["table_hidden_mass"]),
                str(paths["table_per_class"]),
            ]
        )
    )
    plots = list(
        dict.fromkeys(
            [
                *map(str, plots),
                *map(str, paths["learner_plots"].values()),
                *map(str, paths["bracket_plots"].values()),
                *map(str, paths["diagnostic_plots"].values()),
            ]
        )
    )
    plots = list(dict.fromkeys(str(f) for p in plots for f in figure_paths(p) if f == Path(p) or f.is_file()))
    return tables, plots


def _set_up_dashboard(tracking: Mapping[str, Any]) -> None:
    """The MLflow UI's description and views (a store made before they existed gets them), and its page printed;
    skipped with a line where MLflow refuses."""
    from ..tracking import dashboard_hint, get_client, setup_dashboard

    try:
        client = get_client(tracking["uri"])
        exp = client.get_experiment_by_name(tracking["experiment"])
        setup_dashboard(client, exp.experiment_id, tracking.get("description"))
        print(dashboard_hint(tracking["uri"], exp.experiment_id))
    except Exception as exc:
        print(f"MLflow UI set-up skipped: {exc}")
