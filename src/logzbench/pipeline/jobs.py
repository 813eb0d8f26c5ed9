"""The workflow's jobs, end to end, without Snakemake (each rule's script calls one of these
through :func:`logzbench.pipeline.warm.run_job`).

* :func:`run_estimate_sweep` (rule ``estimate``): every setting of one model x estimator sweep
  (:func:`logzbench.pipeline.sweep.sweep_settings`) in one process, each through :func:`run_estimate`:
  from a setting (:func:`logzbench.pipeline.sweep.job_settings`) run :func:`logzbench.api.estimate` with
  the estimator's registry ``options`` taken from it, write the per-chain arrays (``.npz``), log
  one MLflow run keyed by the setting, then write the JSON record (``key``, the settings,
  ``code_version``, ``arrays``, ``result`` = :meth:`EstimateResult.to_dict`, ``mlflow_run_id``
  when tracked).  The data rows and the model are loaded once per sweep; a setting's
  ``test_subset`` (``{"per_class", "seed"}``) restricts the test rows it evaluates
  (:func:`logzbench.data.class_subset` of the dataset's ``test_labels``).
* :func:`train_job` (rule ``train_model``), :func:`trials_job` (rules ``trials_gaussian`` /
  ``trials_grid``: every setting of one experiment), :func:`prepare_job` (rule
  ``prepare_dataset``) and :func:`init_tracking_job` (rule ``init_tracking``).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .. import registry
from ..api import estimate
from ..data import class_subset, load_labels, load_rows, load_split_if_present
from ..errors import DatasetError, EstimatorError
from ..estimators.result import EstimateResult
from ..tracking import estimate_key
from ..tracking.records import one_reason
from ..utils import (
    code_version,
    file_sha256,
    publish_outputs,
    save_npz_atomic,
    transactional,
    utc_now,
    write_csv_atomic,
    write_json_atomic,
)

__all__ = [
    "estimate_options",
    "init_tracking_job",
    "prepare_job",
    "run_estimate",
    "run_estimate_sweep",
    "setting_stem",
    "train_job",
    "trials_job",
]


def estimate_options(settings: Mapping[str, Any], *, progress: bool = False) -> dict[str, Any]:
    """Keyword arguments of :func:`logzbench.api.estimate` for a job: the estimator's registry
    ``options`` present in ``settings`` (``K``, ``init`` from the sweep, ``chains``, ``schedule``,
    ...), its ``seed`` (0 without a seed axis), ``device`` and ``progress``.  An ``init`` of ``None`` (a
    continuous model, which has no initial distribution to choose, under an estimator that reads one: the
    sandwich) is left to the estimator's default."""
    spec = registry.estimator(settings["method"])
    opts = {k: settings[k] for k in spec.options if k in settings and not (k == "init" and settings[k] is None)}
    opts.update(seed=settings.get("seed") or 0, device=settings.get("device", "cpu"), progress=bool(progress))
    return opts


def _rows(settings: Mapping[str, Any], data: str | os.PathLike, train_data: str | os.PathLike | None = None):
    """(test rows, training rows or ``None``) of the model family's data kind: binary and categorical
    models also need the training rows (the data base rate, init="base-rate", and biased CSL's chain
    starts): ``train_data``'s, else the prepared dataset ``data``'s ``train`` split; a source model whose
    rows are files (``data_files``) without a ``train`` file has none."""
    fam = registry.family(settings["family"])
    test = load_rows(data, fam.data_kind, "test")
    if fam.data_kind not in ("binary", "categorical"):
        return test, None
    if train_data is not None:
        return test, load_rows(train_data, fam.data_kind, "train")
    if settings.get("data_files"):  # a test file only: no training rows
        return test, None
    return test, load_rows(data, fam.data_kind, "train")


def _load_source_model(settings: Mapping[str, Any], source: str):
    """Load a source model (:func:`logzbench.models.io.load_model`: ``FILE.py:NAME`` imports FILE.py and
    calls NAME) and refuse, with one line naming the config entry, a model of another family than the
    config's (``models.<model>.family``, or what the file says) or of another dimension than its rows."""
    from ..errors import ConfigError
    from ..models import load_model
    from ..sources import parse_source

    name, family = settings["model"], settings["family"]
    m = load_model(source)
    if m.family != family:
        raise ConfigError(
            f"model {name}: source {source} holds a {m.family} model, but the config says {family} "
            f"(models.{name}.family); set it to {m.family}"
        )
    dim = getattr(m, "n_visible", None)
    if dim is not None and settings.get("n_visible") is not None and int(dim) != int(settings["n_visible"]):
        rows = settings.get("data_files", {}).get("test") or f"dataset {settings.get('dataset')}"
        raise ConfigError(
            f"model {name}: source {source} has {dim} variables, but its rows ({rows}) have {settings['n_visible']} "
            "columns"
        )
    return m, file_sha256(parse_source(source).path)


def _test_subset(settings: Mapping[str, Any], data: str | os.PathLike, test):
    """The test rows a setting evaluates: all, or with ``test_subset`` ``{"per_class", "seed"}`` those of
    :func:`logzbench.data.class_subset` of the dataset's ``test_labels`` (in their original order)."""
    subset = settings.get("test_subset")
    if not subset:
        return test
    labels = load_labels(data, "test")
    idx = class_subset(labels, subset["per_class"], subset.get("seed", 0), source=data)
    if len(labels) != len(test):
        raise DatasetError(
            f"{data}: {len(labels)} test_labels for {len(test)} test rows; test_subset needs one label per test row"
        )
    return test[idx]


@transactional  # the arrays and the record, or neither
def run_estimate(
    settings: Mapping[str, Any],
    *,
    model,
    data: str | os.PathLike,
    arrays: str | os.PathLike,
    record_path: str | os.PathLike,
    tracking: Mapping[str, Any] | None = None,
    ess_fraction: float = 0.1,
    progress: bool = False,
    log: Callable[[str], Any] = print,
    rows: tuple | None = None,
    session=None,
    sweep_stems: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Run one estimate job and write its outputs; return the JSON record.

    Parameters
    ----------
    settings : mapping
        :func:`logzbench.pipeline.sweep.job_settings` (``method`` and ``family`` are registry names).
    model : path or model object
        The model (file).
    data : path
        The prepared dataset (its ``test`` split; binary models: also ``train``).
    arrays, record_path : path
        Outputs: the arrays ``.npz`` and the JSON record.
    tracking : mapping, optional
        ``{"enabled", "uri", "experiment"}``: log one MLflow run (its id goes into the record).
    ess_fraction : float
        ESS flag threshold of the MLflow run's tags.
    rows : (test, train), optional
        The data rows, already loaded from ``data`` (a sweep loads them once): all test rows; the
        setting's ``test_subset``, if any, is applied to them here.
    session : logzbench.tracking.TrackingSession, optional
        Log through this session (a sweep's runs share one client; it replaces older runs of the
        same keys when it closes).
    sweep_stems : sequence of str, optional
        The file stems of every setting of the sweep this one belongs to, recorded as ``sweep_stems``:
        a setting of a finished sweep whose files are missing is a damaged output
        (:func:`logzbench.pipeline.outputs.damaged_outputs`).

    Notes
    -----
    RAISE evaluates at most the test rows it has: ``n_examples`` above their number (or above a
    ``test_subset``'s rows) evaluates every row, and the record's ``n_examples`` is the number used,
    with the configured value as ``n_examples_requested``.

    An estimator that refuses the setting (:class:`~logzbench.errors.EstimatorError`: e.g. discriminance
    sampling whose samples of ``p`` and ``p_0`` do not overlap, a log-weight that overflowed) does not end
    the job, so the other settings of its sweep still run: the record carries ``refused`` (the reason, one
    line) and no estimate, its arrays file is empty, and the report and the MLflow run flag it.
    """
    s = dict(settings)
    method = s["method"]
    fam = registry.family(s["family"])
    test, train = rows if rows is not None else _rows(s, data)
    test = _test_subset(s, data, test)
    opts = estimate_options(s, progress=progress)
    log(f"{method} on {s['model']} ({fam.name} {s.get('hidden_sizes')}): {opts}")
    if s.get("test_subset"):
        log(f"test subset {s['test_subset']}: {len(test)} test rows")

    import torch

    started = utc_now()
    t0 = time.perf_counter()
    refused = None
    try:
        # the job's thread count (Snakemake's `threads`, set by pipeline.warm.run_job), not torch's own choice
        res = estimate(model, method, data=test, train_data=train, threads=torch.get_num_threads(), **opts)
    except EstimatorError as exc:  # this setting has no estimate; the sweep's other settings still run
        refused = one_reason(exc)
        plain = {k: v for k, v in opts.items() if v is None or isinstance(v, (str, int, float, bool))}
        res = EstimateResult(estimator=method, seconds=time.perf_counter() - t0, settings=plain)
        log(f"refused: {refused}")

    used = res.settings.get("n_examples")  # RAISE: the rows evaluated (at most the test rows there are)
    if s.get("n_examples") is not None and isinstance(used, (int, np.integer)) and used != s["n_examples"]:
        log(
            f"n_examples = {s['n_examples']} but only {used} test rows: every row evaluated, n_examples = {used} "
            "recorded"
        )
        s = {**s, "n_examples": int(used), "n_examples_requested": s["n_examples"]}
    key = estimate_key(s["model"], s["estimator"], s.get("K"), s.get("init"), s.get("seed"))
    record = {
        "key": key,
        **s,
        "code_version": code_version(),
        "arrays": str(arrays),
        **({"sweep_stems": list(sweep_stems)} if sweep_stems is not None else {}),
        **({"refused": refused} if refused is not None else {}),
        "result": res.to_dict(),
    }
    save_npz_atomic(arrays, **(res.arrays() or {"log_weights": np.zeros(0)}))
    # when this setting ran (the MLflow run's start and end): the estimate and its arrays
    record["started_at"], record["finished_at"] = started, utc_now()
    if tracking and tracking.get("enabled"):
        from ..tracking import log_estimate

        publish_outputs()  # MLflow reads the arrays file (still undone if the record cannot be written)

        record["mlflow_run_id"] = log_estimate(
            record,
            uri=tracking.get("uri"),
            experiment_name=tracking["experiment"],
            artifacts=[arrays],
            ess_fraction=ess_fraction,
            extra_tags={
                "logzbench.family": s.get("family", "rbm"),
                "logzbench.hidden_sizes": s.get("hidden_sizes"),
                "logzbench.test_subset": s.get("test_subset"),
                # a source model (not trained): the file it was read from and that file's content hash
                "logzbench.source": s.get("source"),
                "logzbench.model_sha256": s.get("model_sha256"),
            },  # None: no tag
            session=session,
        )
    write_json_atomic(record_path, record)

    r = record["result"]
    log(
        f"log Z = {r['log_z']}, mean test LL = {r['mean_log_likelihood']} +- {r['mean_log_likelihood_stderr']}, "
        f"ESS = {r['ess']}, {r['seconds']} s"
    )
    x = r.get("extra") or {}
    if x.get("mean_log_f_is") is not None:
        log(
            f"log f(v) by importance sampling ({x.get('is_samples')} samples): mean {x['mean_log_f_is']} +- "
            f"{x.get('mean_log_f_is_stderr')} (Jensen gap ~ {x.get('mean_log_f_is_jensen_gap')}); "
            f"mean-field bound {x.get('mean_log_f_mean_field')}"
        )
    return record


def setting_stem(settings: Mapping[str, Any]) -> str:
    """The file stem of a setting (:func:`logzbench.registry.setting_stem` of its estimator's axes)."""
    return registry.setting_stem(registry.estimator(settings["method"]).axes, settings)


def run_estimate_sweep(
    settings: Sequence[Mapping[str, Any]],
    *,
    model: str | os.PathLike,
    data: str | os.PathLike,
    out_dir: str | os.PathLike,
    train_data: str | os.PathLike | None = None,
    tracking: Mapping[str, Any] | None = None,
    ess_fraction: float = 0.1,
    progress: bool = False,
    log: Callable[[str], Any] = print,
) -> list[dict[str, Any]]:
    """Run every setting of one model x estimator sweep: ``out_dir/<stem>.json`` and ``.npz`` each.

    Parameters
    ----------
    settings : sequence of mapping
        :func:`logzbench.pipeline.sweep.sweep_settings`: one :func:`logzbench.pipeline.sweep.job_settings` per
        setting, all of one model (``out_dir`` holds their files; their stems must differ).
    model, data : path
        The model file and the prepared dataset, loaded once.  A source model's settings carry its
        ``source`` (``FILE.py:NAME``, a TorchScript or Potts text file, an ``.npz``), which is loaded instead
        (:func:`logzbench.models.io.load_model`; a model of another family or dimension than the config's is
        refused) and recorded with its file's content hash (``model_sha256``); where its rows are files,
        ``data`` is its test rows.
    train_data : path, optional
        Training rows of a source model whose rows are files (``data.train``).
    out_dir : path
        Receives ``<stem>.json`` and ``<stem>.npz`` per setting (:func:`setting_stem`).
    tracking, ess_fraction, progress, log
        As :func:`run_estimate`: each setting is its own MLflow run, keyed by its settings.

    Returns
    -------
    list of dict
        The records, in the order of ``settings``.
    """
    from ..models import load_model

    settings = [dict(s) for s in settings]
    if not settings:
        raise ValueError("an estimate sweep needs at least one setting")
    stems = [setting_stem(s) for s in settings]
    if len(set(stems)) != len(stems):
        raise ValueError(f"the settings of one sweep must have different file stems; got {stems}")
    if len({(s["model"], s["family"]) for s in settings}) != 1:
        raise ValueError("the settings of one sweep must be of one model")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    source = settings[0].get("source")
    if source is not None:
        m, sha = _load_source_model(settings[0], source)
        settings = [{**s, "model_sha256": sha} for s in settings]
        log(f"model {settings[0]['model']}: {m!r} from {source} (sha256 {sha[:12]})")
    else:
        m = load_model(model)
    rows = _rows(settings[0], data, train_data)
    log(f"sweep of {len(settings)} settings: {', '.join(stems)}")
    records = []
    with contextlib.ExitStack() as stack:
        session = None
        if tracking and tracking.get("enabled"):
            from ..tracking import TrackingSession

            session = stack.enter_context(TrackingSession(tracking.get("uri"), tracking["experiment"]))
        for s, stem in zip(settings, stems):
            records.append(
                run_estimate(
                    s,
                    model=m,
                    data=data,
                    arrays=out / f"{stem}.npz",
                    record_path=out / f"{stem}.json",
                    tracking=tracking,
                    ess_fraction=ess_fraction,
                    progress=progress,
                    log=log,
                    rows=rows,
                    session=session,
                    sweep_stems=stems,
                )
            )
    computed = sum(float(r["result"].get("seconds") or 0.0) for r in records)
    log(f"sweep done: {len(records)} estimates in {time.perf_counter() - t0:.1f} s ({computed:.1f} s estimating)")
    return records


# --------------------------------------------------------------------------- the other workflow jobs
def prepare_job(spec: Mapping[str, Any], out: str | os.PathLike, mirror: str | os.PathLike | None = None) -> Path:
    """Download / verify (the mirror first) and prepare one dataset (rule ``prepare_dataset``): binary
    sets binarised (:func:`logzbench.data.prepare_dataset`), continuous ones as whitened patches
    (:func:`logzbench.data.prepare_patches`).  ``spec`` is the config's dataset entry."""
    from ..data import CONTINUOUS_DATASETS, prepare_dataset, prepare_patches

    spec = dict(spec)
    source = spec.pop("source")
    if source in CONTINUOUS_DATASETS:  # a setting the config leaves out (null) takes the preparer's default
        path = prepare_patches(
            source,
            out,
            mirror=mirror,
            **{k: v for k, v in spec.items() if k not in ("binarize", "threshold", "n_valid") and v is not None},
        )
    else:
        path = prepare_dataset(source, out, mirror=mirror, **spec)
    print(f"prepared {source} -> {path} (mirror {mirror}, {spec})")
    return path


def init_tracking_job(tracking: Mapping[str, Any], out: str | os.PathLike) -> dict[str, Any]:
    """Create the MLflow store and experiment once (rule ``init_tracking``); write the sentinel ``out``."""
    info: dict[str, Any] = {"enabled": bool(tracking["enabled"])}
    if tracking["enabled"]:
        from ..tracking import dashboard_hint, init_store

        info.update(
            init_store(
                tracking["uri"],
                tracking["experiment"],
                tracking.get("artifact_dir"),
                description=tracking.get("description"),
            )
        )
        print(f"MLflow store ready: {info['uri']} (experiment {info['experiment_name']!r}, id {info['experiment_id']})")
        info["mlflow_ui"] = dashboard_hint(info["uri"], info["experiment_id"])  # how to review the runs
        print(info["mlflow_ui"])
    else:
        print("MLflow tracking disabled (tracking.enabled: false)")
    info["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    write_json_atomic(out, info)
    return info


def _tracked_row(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """Deep trainers record greedy pretraining epochs (phase != "joint", one series per layer) before
    joint training; give those their own metric names so that the per-epoch series do not mix."""
    phase = row.get("phase")
    if not isinstance(phase, str) or phase in ("", "joint", "train"):
        return row
    layer = row.get("layer")
    prefix = f"{phase}_" if layer is None or str(layer) in phase else f"{phase}_l{layer}_"
    return {(k if k == "epoch" else prefix + k): v for k, v in row.items()}


@transactional  # the model, its samples, history and plot and the summary, or none
def _fit(family: str, data, hp: Mapping[str, Any], test, train, progress: bool):
    """Train with the family's trainer, or a black-box learner (``hyperparams.learner``) monitoring the validation
    split where the dataset has one: ``(model, history, learner state or None)``.  ``progress`` is an argument of
    the binary families' own trainers only."""
    from ..training import train_model, train_with_learner

    fam = registry.family(family)
    if hp.get("learner"):
        valid = load_split_if_present(data, fam.data_kind, "valid")
        return train_with_learner(train, valid if valid is not None else test, family=family, **hp)
    extra = {"progress": bool(progress)} if fam.kind == "binary" else {}
    model, history = train_model(train, test, family=family, **{**hp, **extra})
    return model, history, None


def _write_training_files(model_name, model, history, state, hp, figure_opts, out_model, out_history, out_plot) -> str:
    """The model, a learner's figure samples beside it (``<model>.samples.npz``: the report's sample figures,
    Figs. 4, 6), the history (CSV) and its plot; returns the history's step (``iteration`` for a learner, one row
    per logged iteration, else ``epoch``)."""
    from ..models import save_model
    from ..plotting import plot_history
    from ..training import history_to_csv

    save_model(model, out_model)
    if state is not None:
        from ..training.variational import figure_samples

        save_npz_atomic(
            Path(out_model).with_suffix(".samples.npz"),
            **figure_samples(model, state, seed=int(hp.get("seed", 0)), **figure_opts),
        )
    history_to_csv(history, out_history)
    step = "iteration" if state is not None else "epoch"
    plot_history(history, out_plot, title=model_name, step=step)
    return step


def _trained_sizes(model, binary: bool) -> tuple[list[int], int]:
    """``(hidden layer sizes, n_visible)`` of a trained model: ``[n_hidden]`` for an RBM, ``layer_sizes[1:]`` for a
    DBM / DBN, ``[size]`` for a continuous model."""
    if not binary:
        return [int(model.size)], int(model.n_dims)
    sizes = [int(n) for n in (model.layer_sizes[1:] if hasattr(model, "layer_sizes") else [model.n_hidden])]
    return sizes, int(model.n_visible)


def train_job(
    model_name: str,
    *,
    hyperparams: Mapping[str, Any],
    dataset: str,
    data: str | os.PathLike,
    out_model: str | os.PathLike,
    out_summary: str | os.PathLike,
    out_history: str | os.PathLike,
    out_plot: str | os.PathLike,
    device: str = "cpu",
    tracking: Mapping[str, Any] | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Train one model (rule ``train_model``): :func:`logzbench.training.train_model` of the family in
    ``hyperparams`` (default ``rbm``) on the prepared dataset ``data``; write the model, its history
    (CSV and plot) and the summary record (JSON, last); log one MLflow run (``train/<model>``)."""
    import torch

    hp = dict(hyperparams)
    hp.setdefault("device", device)
    # figures of a learner-trained model (not training arguments): samples of the model and its decoder
    figure_opts = {"n": hp.pop("figure_samples", 64), "sweeps": hp.pop("figure_sweeps", 1000)}
    family = str(hp.pop("family", "rbm")).lower()
    fam = registry.family(family)
    train, test = (load_rows(data, fam.data_kind, split, prepared=True) for split in ("train", "test"))
    print(f"training {model_name} ({family}) on {dataset}: {train.shape[0]} x {train.shape[1]}; {hp}")

    started = utc_now()
    t0 = time.perf_counter()
    model, history, state = _fit(family, data, hp, test, train, progress)
    seconds = time.perf_counter() - t0

    step = _write_training_files(model_name, model, history, state, hp, figure_opts, out_model, out_history, out_plot)
    final = {f"final_{k}": v for k, v in (history[-1] if history else {}).items() if isinstance(v, (int, float))}
    final["train_seconds"] = seconds
    if state is not None:  # the iteration of the saved model (the last, or the best on validation rows)
        final["selected_iteration"] = int(state["selected_iteration"])
    sizes, n_vis = _trained_sizes(model, fam.kind == "binary")  # continuous models train on whitened patches
    record = {
        "model": model_name,
        "dataset": dataset,
        "family": family,
        "n_visible": n_vis,
        "hidden_sizes": sizes,
        "n_hidden": sizes[0] if family == "rbm" else None,
        "hyperparams": {"family": family, **hp},
        "seconds": seconds,
        "threads": torch.get_num_threads(),  # the job's (logzbench.pipeline.warm.run_job sets it)
        "final": final,
        "code_version": code_version(),
        "n_train": int(train.shape[0]),
        "n_test": int(test.shape[0]),
        "started_at": started,
        "finished_at": utc_now(),
    }
    if tracking and tracking.get("enabled"):
        from ..tracking import log_training

        publish_outputs()  # MLflow reads the history, plot and model files

        record["mlflow_run_id"] = log_training(
            model_name,
            hyperparams=hp,
            history=[_tracked_row(r) for r in history],
            summary=final,
            uri=tracking["uri"],
            experiment_name=tracking["experiment"],
            dataset=dataset,
            artifacts=[out_history, out_plot, out_model],
            extra_params={"family": family, "n_visible": n_vis, "hidden_sizes": sizes, "n_train": train.shape[0]},
            start_time=record["started_at"],
            end_time=record["finished_at"],
            step_key=step,
        )
    write_json_atomic(out_summary, record)
    print(f"done in {seconds:.1f} s: {final}")
    return record


@transactional  # every setting's table, or none
def trials_job(
    experiment: str,
    settings: Sequence[Mapping[str, Any]],
    outputs: Sequence[str | os.PathLike],
    *,
    tracking: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Every setting of one repeated-trials experiment (rules ``trials_gaussian`` / ``trials_grid``):
    for each, run every trial (:func:`logzbench.trials.gaussian_trials` / :func:`~logzbench.trials.grid_trials`),
    write its long per-trial table to the matching ``outputs`` file (CSV, atomically) and log one MLflow
    run with every trial as metric steps.  The per-trial tables record each method's seconds."""
    from .. import trials

    if len(settings) != len(outputs):
        raise ValueError(f"{len(settings)} settings for {len(outputs)} output files")
    written = []
    for s, out in zip(settings, outputs):
        s = dict(s)
        print(f"{experiment} trials: {s}")
        started = utc_now()
        if experiment == "gaussian":
            df = trials.gaussian_trials(s["sigma0"], n=s["n"], n_trials=s["n_trials"], seed=s["seed"])
            setting = {"sigma0": s["sigma0"]}
        elif experiment == "grid":
            df = trials.grid_trials(
                s["height"],
                s["width"],
                s["sigma_pair"],
                s["reference"],
                n=s["n"],
                n_trials=s["n_trials"],
                seed=s["seed"],
                sigma_unary=s["sigma_unary"],
                burn_in=s["burn_in"],
                trw_trees=s["trw_trees"],
            )
            setting = {"reference": s["reference"], "sigma_pair": s["sigma_pair"]}
        else:
            raise ValueError(f"unknown repeated-trials experiment {experiment!r}: gaussian or grid")
        write_csv_atomic(out, df)
        finished = utc_now()
        summary = trials.summarize_trials(df)
        print(summary.to_string())
        if tracking and tracking.get("enabled"):
            from ..tracking import log_trials

            publish_outputs()  # MLflow reads the table

            run_id = log_trials(
                experiment,
                setting,
                df,
                summary,
                uri=tracking["uri"],
                experiment_name=tracking["experiment"],
                params=s,
                artifacts=[out],
                start_time=started,
                end_time=finished,
            )
            print(f"MLflow run {run_id}")
        written.append(Path(out))
    return written
