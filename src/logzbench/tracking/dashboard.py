"""The experiment as the MLflow UI shows it: its kind, its description and saved views of the runs table.

The experiment is a model-training experiment (its page is the runs table, not the GenAI overview)
with a description of what to compare (:data:`DASHBOARD_DESCRIPTION`) and saved views
(:data:`DASHBOARD_VIEWS`): *By sweep*, the one :func:`dashboard_url` opens, nests each sweep's runs (one per K
and seed) under the sweep's parent run (model, estimator, start), nothing averaged; *By model* and *Seeds
pooled* group by a tag and average.  :func:`setup_dashboard` sets them without overwriting what a person
wrote in the UI.  The texts are versioned: a description an earlier version wrote
(:data:`_PREVIOUS_DESCRIPTIONS`) is recognised in an older store and replaced.  :func:`dashboard_url`
is the page to open and :func:`dashboard_hint` how to serve it.
"""

from __future__ import annotations

import contextlib
import json
import time

from .keys import FLAG_REASON_TAG, FLAGGED_TAG, GROUP_TAG, SETTING_TAG
from .retries import _retry
from .uris import resolve_tracking_uri

#: The description the first version wrote (kept to recognise and replace it in an older store).
_DESCRIPTION_V1 = """\
**Compare one model's estimators side by side**: the view *By model* groups the runs by model \
(*Group by* `logzbench.group`); *Seeds pooled* groups the seeds of each setting (`logzbench.setting`) \
and shows their average.

- `mean_test_ll` ± `mean_test_ll_stderr` (nats): the `exact` run, where there is one, is the truth. \
AIS estimates Z without bias, so its log-likelihood errs high when chains are too few or too short; \
RAISE and CSL are stochastic lower bounds. RAISE below and AIS above bracket the truth: a wide gap \
means neither has converged (grow K).
- `log_z` ± `log_z_stderr` against the exact run's; a small `ess_fraction` (effective / all chains; the \
report flags < 0.1 by default) makes an estimate unreliable.
- `seconds`: the estimator's own time; *Duration*: the job's wall time for that setting.
- `logzbench.flagged`, `logzbench.flag`: the report's reasons to distrust a setting (AIS-RAISE gap, \
low ESS, a bound on the wrong side of the exact value).

**logzbench** (log-likelihood estimates of energy-based models): one run per estimate \
(`<model>/<estimator>/K<K>/<init>/seed<seed>`), per trained model (`train/<model>`), per \
repeated-trials setting (`<experiment>/...`) and the report (`report`).
"""
#: The second version's (the first, with the Pareto k-hat and the flags added).
_DESCRIPTION_V2 = _DESCRIPTION_V1.replace(
    "- `seconds`:",
    "- `khat`: the Pareto k-hat of the run's log-weights (PSIS); above 0.7 their tail is so heavy that the "
    "standard error understates the uncertainty (flagged).\n- `seconds`:",
).replace(
    "low ESS, a bound on the wrong side of the exact value).",
    "low ESS, heavy-tailed weights, standard errors below the spread between seeds, a bound on the wrong side "
    "of the exact value).",
)
#: The third version's (the second, with the view by sweep, the run names, the short flag reason and the
#: differences from the exact value added).
_DESCRIPTION_V3 = (
    _DESCRIPTION_V2.replace(
        "the view *By model* groups the runs by model (*Group by* `logzbench.group`); ",
        "the view *By sweep* groups the runs by model, estimator and start distribution (*Group by* "
        "`logzbench.sweep`), one row per run named `<model> <estimator> <start> K=<K> seed=<seed>` (a group "
        "row averages its K and seeds: read its runs); *By model* groups them by model (`logzbench.group`); ",
    )
    .replace(
        "- `seconds`:",
        "- `log_z_minus_exact`, `mean_test_ll_minus_exact`: the estimate minus the exact value, in full "
        "precision, on the runs of a model with one (set by the report).\n- `seconds`:",
    )
    .replace(
        "- `logzbench.flagged`, `logzbench.flag`: the report's reasons",
        "- `logzbench.flagged`, `logzbench.flag_reason` (the first reason, short), `logzbench.flag` (all): the "
        "report's reasons",
    )
    .replace(
        "one run per estimate (`<model>/<estimator>/K<K>/<init>/seed<seed>`)",
        "one run per estimate (`<model> <estimator> <init> K=<K> seed=<seed>`)",
    )
)
#: The experiment's description in the MLflow UI (``mlflow.note.content``, Markdown): what to compare
#: (the third version's, with *By sweep* nesting each sweep's runs under its parent run instead of grouping
#: and averaging them).
DASHBOARD_DESCRIPTION = _DESCRIPTION_V3.replace(
    "the view *By sweep* groups the runs by model, estimator and start distribution (*Group by* "
    "`logzbench.sweep`), one row per run named `<model> <estimator> <start> K=<K> seed=<seed>` (a group "
    "row averages its K and seeds: read its runs); ",
    "the view *By sweep* shows each sweep (model, estimator, start distribution) as a parent row named "
    "`<model> <estimator> <start>` with its runs nested under it, one row per K and seed named "
    "`<model> <estimator> <start> K=<K> seed=<seed>` (its `+` opens it; the parent holds no estimate and "
    "averages nothing); ",
)
# descriptions an earlier version wrote (replaced by the current one; a person's own text is kept)
_PREVIOUS_DESCRIPTIONS: tuple[str, ...] = (_DESCRIPTION_V1, _DESCRIPTION_V2, _DESCRIPTION_V3)

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
#: MLflow 3's experiment kind of a model-training experiment: its page is the runs table, not the
#: GenAI overview.  (MLflow 3.17's UI decides by its sidebar's "GenAI / Model training" switch, set
#: by ``workflowType=machine_learning`` in :func:`dashboard_url`; earlier 3.x releases read the tag.)
EXPERIMENT_KIND = "custom_model_development"
_REPLACEABLE_KINDS = ("", "no_inferred_type", "genai_development_inferred", "custom_model_development_inferred")
NOTE_TAG = "mlflow.note.content"
_VIEW_TAG_PREFIX = "mlflow.sharedViewState."  # the runs table's saved views ("Views" menu; ?viewStateShareKey=)
#: the saved view :func:`dashboard_url` opens: each sweep (model, estimator, start) a parent row with its runs,
#: one per K and seed, nested under it (its ``+`` opens it)
DASHBOARD_VIEW = "logzbench-by-sweep"
#: saved views of the runs table: id -> (name, tag grouped by; ``None``: not grouped, the sweeps' runs nested
#: under their parent runs)
DASHBOARD_VIEWS: dict[str, tuple[str, str | None]] = {
    "logzbench-by-sweep": ("By sweep", None),
    "logzbench-by-model": ("By model", GROUP_TAG),
    "logzbench-seeds-pooled": ("Seeds pooled", SETTING_TAG),
}
# the flag's reason and the differences from the exact value early, where a 1366-1600 px window shows them
_VIEW_COLUMNS = (
    *(f"params.`{p}`" for p in ("K", "seed")),
    *(f"metrics.`{m}`" for m in ("mean_test_ll", "mean_test_ll_minus_exact")),
    f"tags.`{FLAG_REASON_TAG}`",
    *(f"metrics.`{m}`" for m in ("mean_test_ll_stderr", "log_z", "log_z_stderr", "log_z_minus_exact")),
    *(f"metrics.`{m}`" for m in ("ess_fraction", "khat", "seconds")),
    *(f"params.`{p}`" for p in ("estimator", "init", "chains")),
    f"tags.`{FLAGGED_TAG}`",
)


def _view_state(group_tag: str | None) -> str:
    """A saved view's state (the runs table's search facets and UI state, as MLflow's UI stores them), with
    the main metric and parameter columns: grouped by the tag ``group_tag`` (average over each group),
    sorted by run name; or, ``group_tag=None``, not grouped, sorted by start: MLflow's UI nests child runs
    under their parent only so (sorted by start or not at all, no search filter), each parent a row with a
    ``+`` that opens it (a saved view cannot open them: MLflow leaves ``runsExpanded`` out of it)."""
    if group_tag is None:
        order = {"orderByKey": "attributes.start_time", "orderByAsc": True, "groupBy": None}
    else:
        order = {
            "orderByKey": "tags.`mlflow.runName`",
            "orderByAsc": True,
            "groupBy": {"aggregateFunction": "average", "groupByKeys": [{"mode": "tag", "groupByData": group_tag}]},
        }
    return json.dumps(
        {
            **order,
            "groupsExpanded": {},
            "selectedColumns": list(_VIEW_COLUMNS),
            # the grid's column ids: run name, Created, Duration, then ours (its widths apply to these only)
            "columnOrder": ["attributes.`Run Name`", "runDateAndNestInfo", "duration", *_VIEW_COLUMNS],
            # run names are long: <model> <estimator> <init> K=<K> seed=<seed>; the reason is <= 80 characters
            "columnWidths": {
                "attributes.`Run Name`": 330,
                "params.`K`": 70,
                "params.`seed`": 60,
                f"tags.`{FLAG_REASON_TAG}`": 330,
            },
        },
        sort_keys=True,
    )


def _own_view(value: str | None, name: str, state: str) -> bool | None:
    """Whether a saved view's tag ``value`` is this one (``True``), one of ours to update (``False``:
    absent, or an uncompressed state, which MLflow's UI never writes), or a person's (``None``)."""
    if value is None:
        return False
    try:
        env = json.loads(value)
        json.loads(env["state"])
    except (ValueError, TypeError, KeyError):
        return None  # compressed by the UI ("Override saved view"): keep it
    return env.get("name") == name and env.get("state") == state


def setup_dashboard(client, experiment_id: str, description: str | None = None) -> dict[str, str]:
    """Set the experiment up for reviewing in the MLflow UI; return the tags it set.

    * ``mlflow.experimentKind`` = :data:`EXPERIMENT_KIND` unless a definite kind is set;
    * the description ``mlflow.note.content`` (``description``, default :data:`DASHBOARD_DESCRIPTION`)
      unless a person wrote another;
    * the saved views :data:`DASHBOARD_VIEWS` of the runs table (by sweep: each sweep's parent run over its
      runs; by model; by setting, seeds pooled) unless a person overrode them.

    Idempotent: a second call sets nothing.
    """
    exp = _retry(client.get_experiment, experiment_id)
    tags = dict(getattr(exp, "tags", None) or {})
    want: dict[str, str] = {}
    if tags.get(EXPERIMENT_KIND_TAG, "") in _REPLACEABLE_KINDS:
        want[EXPERIMENT_KIND_TAG] = EXPERIMENT_KIND
    text = description or DASHBOARD_DESCRIPTION
    note = tags.get(NOTE_TAG)
    if note != text and (note in (None, "", DASHBOARD_DESCRIPTION) or note in _PREVIOUS_DESCRIPTIONS):
        want[NOTE_TAG] = text
    want.update(_views_to_set(tags))
    for key, value in want.items():
        _retry(client.set_experiment_tag, experiment_id, key, value)
    return want


def _views_to_set(tags: dict[str, str]) -> dict[str, str]:
    """The saved views (experiment tags) that are missing or ours and out of date (:func:`_own_view`: e.g. an
    older version's *By sweep*, grouped), given the experiment's ``tags``; a person's overridden view is left
    alone."""
    now = int(time.time() * 1000)
    want = {}
    for view_id, (name, group_tag) in DASHBOARD_VIEWS.items():
        state, current = _view_state(group_tag), tags.get(_VIEW_TAG_PREFIX + view_id)
        if _own_view(current, name, state) is False:
            created = now
            with contextlib.suppress(ValueError, TypeError, KeyError):
                created = int(json.loads(current)["createdAt"])
            want[_VIEW_TAG_PREFIX + view_id] = json.dumps(
                {"name": name, "createdAt": created, "updatedAt": now, "state": state}
            )
    return want


def dashboard_url(
    experiment_id: str, base_url: str = "http://127.0.0.1:5000", view: str | None = DASHBOARD_VIEW
) -> str:
    """The experiment's runs table in the MLflow UI at ``base_url``, as the saved ``view`` (default
    *By sweep*: each sweep's parent run, model, estimator and start, over its runs; ``None``: the plain runs
    table).
    ``workflowType=machine_learning`` switches MLflow 3's sidebar to "Model training" (its default, GenAI,
    opens experiments on the traces overview)."""
    url = f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
    return url + (f"&viewStateShareKey={view}" if view else "")


def dashboard_hint(uri: str | None, experiment_id: str, port: int = 5000) -> str:
    """How to review the experiment in the MLflow UI: the command that serves the store (a SQLite or
    file store; a tracking server is its own UI) and the page to open (:func:`dashboard_url`)."""
    uri = resolve_tracking_uri(uri)
    if uri.lower().startswith(("http://", "https://")):
        return f"MLflow UI: open {dashboard_url(experiment_id, uri)}"
    return (
        f"MLflow UI: mlflow ui --backend-store-uri {uri} --port {port}, then open "
        f"{dashboard_url(experiment_id, f'http://127.0.0.1:{port}')}"
    )
