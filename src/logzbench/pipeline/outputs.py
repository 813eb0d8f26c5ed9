"""The workflow's files of an earlier run, checked before they are trusted (importable without torch).

Snakemake sees an estimate's directory, not the files in it, keeps an output whose time stamp is up
to date however damaged, and does not rebuild a deleted one while what depends on it is up to date:
:func:`damaged_outputs` finds such files of a plan's sweeps and :func:`rebuild_hint` says how to
rebuild them; :func:`check_npz` and :func:`check_estimate_record` check one file (the rules' scripts
run them on their inputs).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:
    from .plan import Plan

__all__ = ["check_estimate_record", "check_npz", "damaged_outputs", "missing_records", "rebuild_hint"]

#: the arrays each kind of workflow file must hold to be used (per-chain arrays: one of the two)
_EXPECTED_ARRAYS = {
    "model": ("model_type",),
    "data": ("train", "test"),
    "estimate": ("log_weights", "per_example_log_likelihood"),
}


def rebuild_hint(target: str | Path) -> str:
    """How to rebuild a workflow output and what depends on it.  Snakemake does not rebuild a missing or
    damaged file of an earlier run while what depends on it is up to date (deleting it is not enough):
    ``--forcerun`` reruns the job that writes it and every job downstream."""
    return f"rebuild it and what depends on it with: snakemake --forcerun {target} (and your usual options)"


def check_npz(path: str | Path, kind: str, *, quick: bool = False, rebuild: str | Path | None = None) -> None:
    """Raise :class:`ConfigError` (one line: the file, what is wrong, how to rebuild it) unless ``path`` is a
    complete ``.npz`` holding the arrays of ``kind`` (``model``, ``data``: all of them; ``estimate``: one of
    ``log_weights``, ``per_example_log_likelihood``).  ``quick``: only the zip archive's directory (a
    truncated file has none; milliseconds for thousands of files), else every array is read and its
    checksum verified.  ``rebuild``: the output to rebuild (:func:`rebuild_hint`; default ``path``)."""
    import numpy as np

    path = Path(path)
    hint = rebuild_hint(rebuild if rebuild is not None else path)
    if not path.is_file():
        raise ConfigError(f"{path} is missing; {hint}")
    try:
        if quick:
            if not zipfile.is_zipfile(path):
                raise ValueError("not a complete .npz archive; truncated?")
            return
        with np.load(path, allow_pickle=False) as z:
            names = list(z.files)
            need = _EXPECTED_ARRAYS[kind]
            if kind == "estimate" and not set(need) & set(names):
                raise ValueError(f"holds neither {' nor '.join(need)} (arrays: {names})")
            missing = [k for k in need if k not in names] if kind != "estimate" else []
            if missing:
                raise ValueError(f"holds no {', '.join(missing)} (arrays: {names})")
            for k in names:
                z[k]
    except Exception as exc:
        why = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        raise ConfigError(f"{path} is damaged ({why}); {hint}") from None


def check_estimate_record(path: str | Path, *, quick: bool = False) -> None:
    """Raise :class:`ConfigError` unless the estimate record ``path`` (``<setting>.json``) parses as a record and
    the per-chain arrays beside it (``<setting>.npz``) are complete (:func:`check_npz`, ``kind="estimate"``);
    the message names the file and how to rebuild the estimate's directory (the rule's output)."""
    path = Path(path)
    hint = rebuild_hint(path.parent)
    if not path.is_file():
        raise ConfigError(f"{path} is missing; {hint}")
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path} is damaged (not JSON: {exc}); {hint}") from None
    if not isinstance(record, dict) or "result" not in record:
        raise ConfigError(f"{path} is damaged (not an estimate record); {hint}")
    check_npz(path.with_suffix(".npz"), "estimate", quick=quick, rebuild=path.parent)


def damaged_outputs(plan: Plan, results: str = "results") -> list[tuple[str, str]]:
    """What a run of the workflow would trust but cannot use: ``(the output to rebuild, one-line message)``
    pairs (:func:`check_npz`, :func:`check_estimate_record`, ``quick``) for the prepared datasets and models
    that exist but are not complete ``.npz`` files, and each estimate record of the plan's sweeps that
    exists but does not parse or whose per-chain arrays are missing or truncated (Snakemake sees only the
    estimate's directory, and keeps an output of an earlier run that is up to date by its time stamp), and
    each setting of a finished sweep whose record is missing (deleted): a record of the same directory lists
    it among its sweep's settings (``sweep_stems``, :func:`logzbench.pipeline.jobs.run_estimate_sweep`), or the
    directory holds no record at all.  Other estimates whose record is absent are not reported (their sweep
    is new or changed, and reruns)."""
    problems = []
    datasets = {m.dataset for m in plan.models.values()} - {None}  # (a source model's rows may be files)
    candidates = [(Path(results) / "data" / f"{d}.npz", "data") for d in sorted(datasets)]
    # the trained models (a source model is the user's file, read by its estimate jobs)
    candidates += [(Path(results) / "models" / f"{m}.npz", "model") for m in plan.trained_models]
    for path, kind in candidates:
        if path.exists():
            try:
                check_npz(path, kind, quick=True)
            except ConfigError as exc:
                problems.append((str(path), str(exc)))
    finished: dict[Path, set[str]] = {}  # estimate directory -> the settings its records list
    exists: dict[Path, bool] = {}  # estimate directory -> whether it exists (a new sweep's has no record to check)
    for j in plan.jobs:
        record = Path(j.path("json", results))
        if record.parent not in exists:
            exists[record.parent] = record.parent.is_dir()
        if not exists[record.parent]:
            continue
        if record.exists():
            try:
                check_estimate_record(record, quick=True)
            except ConfigError as exc:
                problems.append((str(record.parent), str(exc)))
        else:
            if record.parent not in finished:
                finished[record.parent] = _sweep_stems(record.parent)
            listed = finished[record.parent]
            if listed is None or record.stem in listed:
                why = "its sweep's directory holds no record" if listed is None else "a setting of the finished sweep"
                problems.append((str(record.parent), _missing(record, why)))
    return problems


def missing_records(directory: str | Path) -> list[tuple[str, str]]:
    """``(the output to rebuild, one-line message)`` of each setting of the finished sweep in ``directory``
    whose record (``<setting>.json``) is missing: listed in the ``sweep_stems`` of the records there
    (:func:`_sweep_stems`) but not on disk.  :func:`damaged_outputs` finds the same from a plan;
    ``logzbench report`` (:func:`logzbench.report.records.load_results`), which has only the records, from
    this, so that both refuse a sweep with a deleted setting with the same message."""
    directory = Path(directory)
    listed = _sweep_stems(directory) or set()
    present = {f.stem for f in directory.glob("*.json")}
    return [
        (str(directory), _missing(directory / f"{stem}.json", "a setting of the finished sweep"))
        for stem in sorted(listed - present)
    ]


def _missing(record: Path, why: str) -> str:
    """The one-line message of a missing estimate record: the file, why it is missed, how to rebuild it."""
    return f"{record} is missing ({why} in {record.parent}); {rebuild_hint(record.parent)}"


def _sweep_stems(directory: Path) -> set[str] | None:
    """The settings (file stems) of the sweep whose records lie in ``directory``: the union of their
    ``sweep_stems`` (records written before those were recorded, and files that do not parse: none);
    ``None`` when the directory holds no record at all (every file of a finished sweep deleted: Snakemake
    sees its output directory and reruns nothing)."""
    files = list(directory.glob("*.json"))
    if not files:
        return None
    stems: set[str] = set()
    for f in files:
        try:
            listed = json.loads(f.read_text()).get("sweep_stems")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            continue
        if isinstance(listed, list):
            stems.update(str(x) for x in listed)
    return stems
