"""What identifies a logzbench MLflow run: its deterministic key and the tags it carries.

Every run has a key (tag :data:`KEY_TAG`) built from its settings (:func:`estimate_key`,
:func:`train_key`, :func:`trials_key`), so that re-running a job replaces its run instead of adding
one (:mod:`logzbench.tracking.runs`).  The tags the MLflow UI groups by (:data:`GROUP_TAG`,
:data:`SETTING_TAG`) and those the report sets (:data:`FLAG_TAG`, :data:`FLAGGED_TAG`) are named here,
so the logging, the dashboard's saved views and the report agree on them.
"""

from __future__ import annotations

from typing import Any, Mapping

#: the MLflow experiment runs go to unless told otherwise
DEFAULT_EXPERIMENT = "logzbench"
KEY_TAG = "logzbench.key"
KIND_TAG = "logzbench.kind"
FLAG_TAG = "logzbench.flag"
FLAGGED_TAG = "logzbench.flagged"
#: what the MLflow UI groups a run by: its model (estimates and training), ``trials/<experiment>``, ``report``
GROUP_TAG = "logzbench.group"
#: an estimate's key less its seed (the seeds of one setting group together); other runs: their key
SETTING_TAG = "logzbench.setting"
#: when the run was recorded (ms since the epoch): of a key's runs the last recorded is kept
LOGGED_TAG = "logzbench.logged"


# --------------------------------------------------------------------------- run keys
def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def estimate_key(model: str, estimator: str, K: Any = None, init: Any = None, seed: Any = None) -> str:
    """Deterministic key of one estimate: ``estimate/<model>/<estimator>/K<K>/<init>/seed<seed>``.

    Settings an estimator does not use are ``-`` (e.g. ``estimate/m/exact/K-/-/seed-``).
    """
    return f"estimate/{model}/{estimator}/K{_fmt(K)}/{_fmt(init)}/seed{_fmt(seed)}"


def train_key(model: str) -> str:
    """Deterministic key of one training run: ``train/<model>``."""
    return f"train/{model}"


def trials_key(experiment: str, setting: Mapping[str, Any]) -> str:
    """Deterministic key of one repeated-trials setting, e.g. ``trials/grid/reference=trw/sigma_pair=0.5``."""
    return "/".join(["trials", experiment] + [f"{k}={_fmt(v)}" for k, v in setting.items()])
