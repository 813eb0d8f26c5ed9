"""MLflow runs under deterministic keys: one live run per key, found, logged and flagged.

:func:`log_run` creates a fresh run, logs its params, metrics, tags and artifacts, and then
deletes every *other* live run with the same key, always keeping the newest, so re-running a job
replaces its run and concurrent writers of the same key converge to exactly one run.  A run starts
and ends when its job did (``start_time`` / ``end_time``); of a key's runs the last *recorded* is
kept (tag :data:`~logzbench.tracking.keys.LOGGED_TAG`).  A :class:`TrackingSession` logs many runs
through one client and tidies all their keys with one search.

An estimate's run is the child (``mlflow.parentRunId``) of its sweep's parent run (model, estimator, start:
:func:`~logzbench.tracking.keys.sweep_parent`), which the MLflow UI shows as a collapsible row over the
sweep's K and seeds, nothing averaged.  A parent is found by its tags (:data:`PARENT_TAG`, :data:`SWEEP_TAG`)
and created only where there is none, so a rerun or a second job of the sweep reuses it; of parents created
at the same time the oldest is kept (:meth:`TrackingSession.close` deletes the others and points every run
of the sweep to the one kept).  Parents are no estimates: :func:`find_runs` leaves them out unless asked
(``parents=True``), and with it the report's flags, the one-run-per-key tidying and whatever lists runs
through it.  :func:`set_flags` tags runs with the
report's reasons to distrust them (the first in short: :func:`flag_reason`) and logs the report's
metrics of them (the differences from the exact value).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import unquote, urlparse

from .keys import (
    DEFAULT_EXPERIMENT,
    FLAG_REASON_TAG,
    FLAG_REASON_WIDTH,
    FLAG_TAG,
    FLAGGED_TAG,
    GROUP_TAG,
    KEY_TAG,
    KIND_TAG,
    LOGGED_TAG,
    MLFLOW_PARENT_TAG,
    PARENT_KIND,
    PARENT_TAG,
    SETTING_TAG,
    SWEEP_TAG,
    _fmt,
)
from .retries import _retry
from .store import _ensure_store, _experiment_id, get_client
from .uris import resolve_tracking_uri

# MLflow's per-request limits for log_batch.
_MAX_METRICS_PER_BATCH = 1000
_MAX_PARAMS_PER_BATCH = 100
_MAX_TAGS_PER_BATCH = 100


def _finite(x: Any) -> bool:
    try:
        return x is not None and not isinstance(x, bool) and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _param_value(v: Any) -> str:
    if isinstance(v, (dict, list, tuple)):
        s = json.dumps(v, sort_keys=True, default=str)
    else:
        s = _fmt(v) if v is not None else "None"
    return s[:6000]


# --------------------------------------------------------------------------- finding runs
def find_runs(
    key: str | None = None,
    *,
    uri: str | None = None,
    experiment_name: str = DEFAULT_EXPERIMENT,
    kind: str | None = None,
    client=None,
    key_prefix: str | None = None,
    sweep: str | None = None,
    parents: bool = False,
) -> list:
    """Live (not deleted) runs of the experiment, optionally only those with ``key`` / ``kind`` / a key
    starting with ``key_prefix`` (``LIKE``: ``_`` and ``%`` in the prefix match more; filter the keys) /
    the sweep family ``sweep`` (:data:`SWEEP_TAG`).

    The sweeps' parent runs (tag :data:`PARENT_TAG`) are rows of the MLflow UI, not estimates: they are
    left out, unless ``parents=True``, which returns only them.

    Ordered newest first.  Returns ``[]`` when the experiment does not exist.
    """
    uri = resolve_tracking_uri(uri)
    client = client or get_client(uri)
    exp = _retry(client.get_experiment_by_name, experiment_name)
    if exp is None:
        return []
    filters = []
    if key is not None:
        filters.append(f"tags.`{KEY_TAG}` = '{_quote(key)}'")
    if kind is not None:
        filters.append(f"tags.`{KIND_TAG}` = '{_quote(kind)}'")
    if key_prefix:
        filters.append(f"tags.`{KEY_TAG}` LIKE '{_quote(key_prefix)}%'")
    if sweep is not None:
        filters.append(f"tags.`{SWEEP_TAG}` = '{_quote(sweep)}'")
    if parents:
        filters.append(f"tags.`{PARENT_TAG}` = 'true'")
    out, token = [], None
    while True:
        page = _retry(
            client.search_runs,
            [exp.experiment_id],
            filter_string=" and ".join(filters),
            max_results=1000,
            order_by=["attributes.start_time DESC"],
            page_token=token,
        )
        out.extend(page)
        token = getattr(page, "token", None)
        if not token:
            break
    if not parents:  # (a filter on a tag's absence is not MLflow's: drop them here)
        out = [r for r in out if r.data.tags.get(PARENT_TAG) != "true"]
    return out


def _quote(s: str) -> str:
    return s.replace("\\", "\\\\").replace("'", "\\'")


# --------------------------------------------------------------------------- logging
def _delete_run(client, run) -> None:
    _retry(client.delete_run, run.info.run_id)
    art = run.info.artifact_uri or ""
    if art.startswith("file://"):
        p = Path(unquote(urlparse(art).path))
        # artifact_uri is <location>/<run_id>/artifacts: remove the run's folder
        target = p.parent if p.name == "artifacts" and p.parent.name == run.info.run_id else p
        shutil.rmtree(target, ignore_errors=True)


def _logged_ms(run) -> int:
    """When ``run`` was recorded: its :data:`LOGGED_TAG` (a run's start time is its job's, which a
    re-logged record repeats), else its start time (runs recorded before the tag existed)."""
    with contextlib.suppress(TypeError, ValueError):
        return int(run.data.tags[LOGGED_TAG])
    return int(run.info.start_time or 0)


def _recorded_order(run) -> tuple:
    """When ``run`` was recorded, ties broken by its start and then its id, so that every process orders
    the same runs the same way."""
    return (_logged_ms(run), run.info.start_time or 0, run.info.run_id)


def _newest_first(runs: Sequence) -> list:
    return sorted(runs, key=_recorded_order, reverse=True)


def _oldest(runs: Sequence):
    """The first recorded of ``runs`` (:func:`_recorded_order`): of a sweep's parent runs the one kept, as
    its children may already point to it."""
    return min(runs, key=_recorded_order)


def _epoch_ms(t: Any) -> int | None:
    """Milliseconds since the epoch of ``t``: a :class:`datetime.datetime` (naive = UTC), an ISO 8601
    string (as the job records write) or seconds since the epoch; ``None`` stays ``None``."""
    import datetime as _dt

    if t is None or t == "":
        return None
    if isinstance(t, str):
        t = _dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
    if isinstance(t, _dt.datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=_dt.timezone.utc)
        return int(round(t.timestamp() * 1000))
    return int(round(float(t) * 1000))


def log_run(
    key: str,
    *,
    uri: str | None = None,
    experiment_name: str = DEFAULT_EXPERIMENT,
    session: "TrackingSession | None" = None,
    **fields: Any,
) -> str:
    """Record one run under the deterministic ``key`` and return its run id.

    ``fields`` are :meth:`TrackingSession.log_run`'s keywords: ``run_name``, ``kind`` (default
    ``"estimate"``), ``params``, ``metrics``, ``step_metrics``, ``step_key`` (default ``"epoch"``), ``tags``,
    ``artifacts``, ``start_time``, ``end_time`` and ``parent``.

    ``params`` and ``metrics`` are flat mappings (non-finite or ``None`` metrics are
    skipped).  ``step_metrics`` is a sequence of dicts (e.g. a training history), each
    logged at ``step = d[step_key]``.  ``artifacts`` are files (a mapping gives each its
    artifact sub-directory).  Any live run with the same key is replaced: exactly one live
    run per key remains, even under concurrent writers.  Within a :class:`TrackingSession`
    (``session``) the replacing waits for :meth:`TrackingSession.close`, which does it for every
    key of the session with one search.

    ``start_time`` and ``end_time`` (a :class:`datetime.datetime`, an ISO 8601 string or seconds
    since the epoch) are the run's start and end in the MLflow UI (its *Created* and *Duration*):
    the job's own, where the run is logged after the job; either defaults to now.  Every run is
    tagged with its group (:data:`GROUP_TAG`, default ``kind``), sweep family (:data:`SWEEP_TAG`, default
    ``kind``) and setting (:data:`SETTING_TAG`, default ``key``), which the UI's runs table groups by.

    ``parent`` (:func:`~logzbench.tracking.keys.sweep_parent` of an estimate's key) makes the run a child
    of its sweep's parent run (``mlflow.parentRunId``), found or else created (:meth:`TrackingSession.log_run`).
    """
    # a session given stays open (its close does the replacing); otherwise one of its own, closed here
    with contextlib.nullcontext(session) if session is not None else TrackingSession(uri, experiment_name) as s:
        return s.log_run(key, **fields)


def _superseded(client, run_id: str) -> bool:
    """Whether run ``run_id`` was deleted (by a concurrent writer's :meth:`TrackingSession.close` that kept
    a newer run of the same key)."""
    try:
        return client.get_run(run_id).info.lifecycle_stage == "deleted"
    except Exception:
        return False


class TrackingSession:
    """Several runs logged with one client (one store connection, one experiment lookup); on
    :meth:`close` (or leaving the ``with`` block) every key logged keeps exactly one live run, the
    newest, found with one search of the session's key prefix.

    A workflow job that runs a whole sweep logs each setting's run as it finishes through one
    session; :func:`log_run` without a session is a session of one run.

    Runs logged with a ``parent`` (an estimate's sweep: :func:`~logzbench.tracking.keys.sweep_parent`) are
    children of that sweep's parent run: the one already in the store (a rerun, another job of the
    sweep), else one this session creates (:meth:`_sweep_parent`).  :meth:`close` then makes every run of
    each such sweep a child of its one parent and finishes the parent with its children
    (:meth:`_finish_sweep`).  In the workflow one job logs all the runs of a sweep (a model x estimator
    sweep, :func:`logzbench.pipeline.jobs.run_estimate_sweep`), so two creators of one parent are a rerun
    racing a job still running, or two workflows on one store: rare, and tidied up when either closes.
    """

    def __init__(self, uri: str | None = None, experiment_name: str = DEFAULT_EXPERIMENT):
        self.uri = resolve_tracking_uri(uri)
        self.experiment_name = experiment_name
        _ensure_store(self.uri, experiment_name)
        self.client = get_client(self.uri)
        self.experiment_id = _experiment_id(self.client, self.uri, experiment_name)
        self.keys: list[str] = []
        #: sweep (:data:`SWEEP_TAG`) -> its parent run's id; the sweeps logged since the last close -> what
        #: :func:`~logzbench.tracking.keys.sweep_parent` said of them (finished by :meth:`close`)
        self.parents: dict[str, str] = {}
        self._parent_specs: dict[str, Mapping[str, Any]] = {}

    def __enter__(self) -> "TrackingSession":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        from ..errors import TrackingError

        if exc_type is not None and issubclass(exc_type, TrackingError):
            return  # the store is unreachable: closing would wait out the retries again; a rerun tidies up
        self.close(failed=exc_type is not None)

    def log_run(
        self,
        key: str,
        *,
        run_name: str | None = None,
        kind: str = "estimate",
        params: Mapping[str, Any] | None = None,
        metrics: Mapping[str, Any] | None = None,
        step_metrics: Iterable[Mapping[str, Any]] | None = None,
        step_key: str = "epoch",
        tags: Mapping[str, Any] | None = None,
        artifacts: Iterable[str | os.PathLike] | Mapping[str, str | os.PathLike] | None = None,
        start_time: Any = None,
        end_time: Any = None,
        parent: Mapping[str, Any] | None = None,
    ) -> str:
        """Log one run (see :func:`log_run`); return its id."""
        from mlflow.entities import Metric, Param

        client = self.client
        logged = int(time.time() * 1000)
        start, end = _epoch_ms(start_time), _epoch_ms(end_time)
        start = start if start is not None else (min(end, logged) if end is not None else logged)
        end = max(end if end is not None else logged, start)
        all_tags = {KEY_TAG: key, KIND_TAG: kind, GROUP_TAG: kind, SWEEP_TAG: kind, SETTING_TAG: key}
        all_tags.update({str(k): _param_value(v) for k, v in (tags or {}).items() if v is not None})
        all_tags[LOGGED_TAG] = str(logged)
        if parent is not None:
            all_tags[MLFLOW_PARENT_TAG] = self._sweep_parent(parent, start)
        run = _retry(client.create_run, self.experiment_id, start_time=start, tags=all_tags, run_name=run_name or key)
        run_id = run.info.run_id
        try:
            now = end  # the metrics' time: when the job had them
            plist = [Param(str(k), _param_value(v)) for k, v in (params or {}).items()]
            mlist = [Metric(str(k), float(v), now, 0) for k, v in (metrics or {}).items() if _finite(v)]
            for row in step_metrics or []:
                step = int(row.get(step_key, 0) or 0)
                for k, v in row.items():
                    if k != step_key and _finite(v):
                        mlist.append(Metric(str(k), float(v), now, step))
            # one request for the params and the first metrics where MLflow's limits allow
            first = min(len(mlist), _MAX_METRICS_PER_BATCH) if len(plist) <= _MAX_PARAMS_PER_BATCH else 0
            if plist or first:
                _retry(client.log_batch, run_id, params=plist[:_MAX_PARAMS_PER_BATCH], metrics=mlist[:first])
            for i in range(_MAX_PARAMS_PER_BATCH, len(plist), _MAX_PARAMS_PER_BATCH):
                _retry(client.log_batch, run_id, params=plist[i : i + _MAX_PARAMS_PER_BATCH])
            for i in range(first, len(mlist), _MAX_METRICS_PER_BATCH):
                _retry(client.log_batch, run_id, metrics=mlist[i : i + _MAX_METRICS_PER_BATCH])
            if artifacts:
                items = artifacts.items() if isinstance(artifacts, Mapping) else ((a, None) for a in artifacts)
                for path, sub in items:
                    if path is not None and Path(path).exists():
                        _retry(client.log_artifact, run_id, str(path), sub)
            _retry(client.set_terminated, run_id, "FINISHED", end_time=end)
        except BaseException as exc:
            if isinstance(exc, Exception) and _superseded(client, run_id):
                # a concurrent writer of the same key logged a newer run and removed this one while it
                # was being written (TrackingSession.close): the key has its one live run
                return run_id
            with contextlib.suppress(Exception):
                _retry(client.delete_run, run_id)
            raise
        self.keys.append(key)
        return run_id

    def close(self, failed: bool = False) -> None:
        """Keep exactly one live run per logged key: the newest (ours, unless a concurrent writer's is newer);
        then finish the parent run of every sweep logged (:meth:`_finish_sweep`; ``failed``: the job failed,
        the parent's status is ``FAILED``)."""
        keys, self.keys = set(self.keys), []
        if keys:
            self._tidy_keys(keys)
        specs, self._parent_specs = self._parent_specs, {}
        for sweep, spec in specs.items():
            self._finish_sweep(sweep, spec, failed)

    def _tidy_keys(self, keys: set[str]) -> None:
        prefix = os.path.commonprefix(sorted(keys))
        if len(keys) == 1:
            runs = find_runs(next(iter(keys)), uri=self.uri, experiment_name=self.experiment_name, client=self.client)
        else:
            runs = find_runs(
                None, uri=self.uri, experiment_name=self.experiment_name, client=self.client, key_prefix=prefix
            )
        by_key: dict[str, list] = {}
        for run in runs:
            k = run.data.tags.get(KEY_TAG)
            if k in keys:
                by_key.setdefault(k, []).append(run)
        for same in by_key.values():
            for old in _newest_first(same)[1:]:
                with contextlib.suppress(Exception):
                    _delete_run(self.client, old)

    # ------------------------------------------------------------------- a sweep's parent run
    def _live_parents(self, sweep: str) -> list:
        return find_runs(
            uri=self.uri, experiment_name=self.experiment_name, client=self.client, sweep=sweep, parents=True
        )

    def _sweep_parent(self, spec: Mapping[str, Any], start: int) -> str:
        """The id of the parent run of the sweep ``spec`` (:func:`~logzbench.tracking.keys.sweep_parent`): the
        one this session already has, else the store's (the oldest, should there be several), else a new one
        (:meth:`_create_parent`, starting at ``start``, its first child's start)."""
        sweep = spec["sweep"]
        if sweep not in self.parents:
            found = self._live_parents(sweep)
            self.parents[sweep] = _oldest(found).info.run_id if found else self._create_parent(spec, start)
        self._parent_specs[sweep] = spec
        return self.parents[sweep]

    def _create_parent(self, spec: Mapping[str, Any], start: int) -> str:
        """Create the parent run of a sweep (name ``<model> <estimator> <start>``, the params the sweep's runs
        share, tags :data:`PARENT_TAG` = ``true``, kind :data:`PARENT_KIND`, its sweep, group and key) and
        return the id of the sweep's parent: this one, unless another process created one first (searched
        again right after: of several, the oldest is kept and ours deleted; one created later still is
        tidied up by :meth:`_finish_sweep`)."""
        from mlflow.entities import Param

        model = spec.get("params", {}).get("model")
        tags = {
            KEY_TAG: spec["key"],
            KIND_TAG: PARENT_KIND,
            PARENT_TAG: "true",
            SWEEP_TAG: spec["sweep"],
            GROUP_TAG: model or PARENT_KIND,
            LOGGED_TAG: str(int(time.time() * 1000)),
            "mlflow.note.content": (
                f"The runs of the sweep **{spec['name']}**, one per K and seed (expand the row). This run is no "
                "estimate: it holds the sweep's K values and seeds (tags `logzbench.K_values`, `logzbench.seeds`) "
                "and its number of runs (metric `n_runs`); it averages nothing."
            ),
        }
        if model:
            tags["logzbench.model"] = model
        run = _retry(self.client.create_run, self.experiment_id, start_time=start, tags=tags, run_name=spec["name"])
        params = [Param(str(k), _param_value(v)) for k, v in (spec.get("params") or {}).items()]
        if params:
            _retry(self.client.log_batch, run.info.run_id, params=params)
        keep = _oldest(self._live_parents(spec["sweep"]) or [run])
        if keep.info.run_id != run.info.run_id:
            with contextlib.suppress(Exception):
                _delete_run(self.client, run)
        return keep.info.run_id

    def _finish_sweep(self, sweep: str, spec: Mapping[str, Any], failed: bool = False) -> None:
        """After a session logged runs of ``sweep``: keep its oldest parent run (deleting any other, e.g. of a
        concurrent creator), make every live estimate of the sweep its child, set what it says of them (tags
        ``logzbench.K_values`` and ``logzbench.seeds``, metric ``n_runs``; tags, as MLflow cannot change a
        param and a rerun may add K values) and end it when its last child ended (``FINISHED``, or
        ``FAILED`` when the job failed)."""
        from mlflow.entities import Metric, RunTag

        client = self.client
        children = find_runs(
            uri=self.uri, experiment_name=self.experiment_name, client=client, kind="estimate", sweep=sweep
        )
        parents = self._live_parents(sweep)
        if parents:
            keep = _oldest(parents)
            for other in parents:
                if other.info.run_id != keep.info.run_id:
                    with contextlib.suppress(Exception):
                        _delete_run(client, other)
            parent_id = keep.info.run_id
        else:  # deleted meanwhile (by hand): a new one, starting with the sweep's first run
            start = min((c.info.start_time for c in children if c.info.start_time), default=None)
            parent_id = self._create_parent(spec, start if start is not None else int(time.time() * 1000))
        self.parents[sweep] = parent_id
        for child in children:
            if child.data.tags.get(MLFLOW_PARENT_TAG) != parent_id:
                _retry(client.set_tag, child.info.run_id, MLFLOW_PARENT_TAG, parent_id)
        tags = [RunTag(f"logzbench.{name}", ", ".join(values)) for name, values in _settings_of(children).items()]
        now = int(time.time() * 1000)
        _retry(client.log_batch, parent_id, metrics=[Metric("n_runs", float(len(children)), now, 0)], tags=tags)
        end = max((c.info.end_time or c.info.start_time or 0 for c in children), default=0) or now
        _retry(client.set_terminated, parent_id, "FAILED" if failed else "FINISHED", end_time=end)


def _settings_of(children: Sequence) -> dict[str, list[str]]:
    """The K values and seeds of a sweep's runs (their params ``K`` and ``seed``), each once, in numeric order:
    ``{"K_values": [...], "seeds": [...]}`` (a setting none of them has is left out)."""

    def order(v: str) -> tuple:
        try:
            return (0, float(v), v)
        except ValueError:
            return (1, 0.0, v)

    out = {}
    for name, param in (("K_values", "K"), ("seeds", "seed")):
        values = {c.data.params[param] for c in children if c.data.params.get(param) not in (None, "", "None")}
        if values:
            out[name] = sorted(values, key=order)
    return out


# --------------------------------------------------------------------------- flags
_CLAUSE_ENDS = re.compile(r"(?=\s\()|[,;:](?=\s)")


def flag_reason(reasons: Sequence[str], width: int = FLAG_REASON_WIDTH) -> str | None:
    """The first of ``reasons`` (the report lists them most important first) in at most ``width``
    characters, for a table column: whole when it fits, else cut after its last clause (before ``" ("``,
    at ``,`` ``;`` ``:``, outside parentheses) that fits, else after its last word that fits, with ``…``;
    `` (+N more)`` when there are other reasons.  ``None`` without reasons."""
    reasons = [r.strip() for r in dict.fromkeys(reasons) if r and r.strip()]
    if not reasons:
        return None
    first = " ".join(reasons[0].split())
    more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
    room = max(width - len(more), 8)
    if len(first) > room:
        ends = [
            m.start()
            for m in _CLAUSE_ENDS.finditer(first)
            if 0 < m.start() <= room and first.count("(", 0, m.start()) == first.count(")", 0, m.start())
        ]  # clause ends outside parentheses
        ends = [e for e in ends if e >= room // 3]  # a clause long enough to say something
        if ends:
            first = first[: ends[-1]].rstrip(" ,;:")
        else:
            cut = first[: room - 1]
            cut = cut[: cut.rfind(" ")] if " " in cut[room // 3 :] else cut
            first = cut.rstrip(" ,;:") + "\u2026"
    return first + more


def set_flags(
    flags: Mapping[str, Sequence[str]],
    *,
    uri: str | None = None,
    experiment_name: str = DEFAULT_EXPERIMENT,
    metrics: Mapping[str, Mapping[str, float]] | None = None,
) -> int:
    """Tag the live runs whose key is in ``flags``: ``logzbench.flag`` = the reasons joined
    by ``"; "``, ``logzbench.flag_reason`` = the first in short (:func:`flag_reason`) and
    ``logzbench.flagged`` = ``true``; a key mapped to no reasons gets ``logzbench.flagged = false``
    and loses a stale ``logzbench.flag`` and ``logzbench.flag_reason``.  ``metrics`` (key -> {name:
    value}; non-finite values skipped) are logged on the runs of their keys (e.g. the report's
    ``log_z_minus_exact``).  Runs with other keys are left alone.  Returns the number of runs tagged as
    flagged.
    """
    from mlflow.entities import Metric, RunTag

    uri = resolve_tracking_uri(uri)
    client = get_client(uri)
    runs = find_runs(None, uri=uri, experiment_name=experiment_name, client=client)
    metrics = metrics or {}
    now = int(time.time() * 1000)
    n = 0
    for run in runs:
        key = run.data.tags.get(KEY_TAG)
        if key is None:
            continue
        values = [Metric(str(k), float(v), now, 0) for k, v in (metrics.get(key) or {}).items() if _finite(v)]
        tags: dict[str, str] = {}
        reasons = [r for r in flags.get(key, ()) if r]
        if reasons:
            text = "; ".join(dict.fromkeys(reasons))[:5000]
            tags = {FLAG_TAG: text, FLAG_REASON_TAG: flag_reason(reasons), FLAGGED_TAG: "true"}
            n += 1
        elif key in flags:
            for tag in (FLAG_TAG, FLAG_REASON_TAG):
                if tag in run.data.tags:
                    with contextlib.suppress(Exception):
                        _retry(client.delete_tag, run.info.run_id, tag)
            if run.data.tags.get(FLAGGED_TAG) != "false":
                tags[FLAGGED_TAG] = "false"
        # the run's tags and metrics in one request (more only past MLflow's per-request metric limit)
        tag_list = [RunTag(k, v) for k, v in tags.items()]
        batches = [values[i : i + _MAX_METRICS_PER_BATCH] for i in range(0, len(values), _MAX_METRICS_PER_BATCH)]
        for j, batch in enumerate(batches or ([[]] if tag_list else [])):
            _retry(client.log_batch, run.info.run_id, metrics=batch, tags=tag_list if j == 0 else [])
    return n
