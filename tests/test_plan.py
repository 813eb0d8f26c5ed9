"""The workflow's plan (logzbench.pipeline.plan): the config read once into frozen entries, with the schema's
defaults applied, refused with the check's one-line errors, and the same jobs and settings as the sweep's
functions of the config."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from logzbench import registry
from logzbench.errors import ConfigError
from logzbench.pipeline import config_schema, diagnose, plan, sweep
from logzbench.pipeline.config import check_config
from logzbench.pipeline.model_files import npz_model

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def load_config(name: str = "test") -> dict:
    """A config of config/ completed against the schema (as workflow/rules/common.smk loads it)."""
    config = yaml.safe_load((REPO / "config" / f"{name}.yaml").read_text())
    config_schema.load_config(config, yaml.safe_load(SCHEMA.read_text()))
    return config


@pytest.fixture(scope="module")
def test_plan():
    return plan.load(load_config())


def test_plan_is_frozen(test_plan):
    with pytest.raises(dataclasses.FrozenInstanceError):
        test_plan.models = {}
    m = test_plan.models["digits-rbm8"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.n_visible = 3
    for mapping in (test_plan.models, test_plan.estimators, m.hyperparams, test_plan.estimators["ais"].options):
        with pytest.raises(TypeError):
            mapping["x"] = 1
    assert isinstance(m.jobs, tuple) and isinstance(m.hidden_sizes, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.jobs[0].K = 1


def test_plan_holds_each_model_worked_out_with_defaults(test_plan):
    rbm = test_plan.models["digits-rbm8"]
    assert rbm.family is registry.family("rbm") and rbm.hyperparams["family"] == "rbm"  # the default family
    assert (rbm.dataset, rbm.n_visible, rbm.hidden_sizes) == ("digits", 64, (8,))
    assert rbm.estimators == ("exact", "ais", "raise", "csl", "ads", "reverse-ais", "ds", "sandwich", "ais-adaptive")
    assert not rbm.is_source and rbm.source is None and rbm.learner is None
    dbn = test_plan.models["digits-dbn8-4"]
    assert dbn.hidden_sizes == (8, 4) and dbn.inits == ("uniform",)
    assert {j.init for j in dbn.jobs} <= {None, "uniform"}
    # the estimator entries as the schema completed them: its defaults filled in, the registry's method
    ais = test_plan.estimators["ais"]
    raw = yaml.safe_load((REPO / "config" / "test.yaml").read_text())["estimators"]["ais"]
    assert ais.method == "ais" and ais.spec is registry.estimator("ais")
    assert set(raw) < set(ais.options)
    assert test_plan.tracking["experiment"] == "logzbench-test" and test_plan.tracking["uri"]
    assert test_plan.trained_models == tuple(test_plan.models)
    assert test_plan.bracket_models == ("vh-linear-gaussian-4", "digits-rbm8")


@pytest.mark.parametrize("name", ["test", "config"])
def test_plan_agrees_with_the_sweep_of_the_config(name):
    """The plan's jobs, pairs and settings are those the sweep's functions of the config give (37 estimates of
    config/test.yaml: tests/test_workflow.py), and its warnings those of the check."""
    config = load_config(name)
    p = plan.load(config)
    assert list(p.jobs) == sweep.all_jobs(config)
    assert list(p.sweep_pairs) == sweep.sweep_pairs(config)
    assert list(p.warnings) == check_config(config)
    for m, e in p.sweep_pairs[:12]:
        assert p.settings(m, e) == sweep.sweep_settings(config, m, e)
    for m in p.models:
        assert dict(p.models[m].hyperparams) == sweep.model_hyperparams(config, m)
    if name == "test":
        assert len(p.jobs) == 37 and len(p.sweep_pairs) == 22
        assert len(diagnose.diagnosed_models(p)) == 5


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c["estimators"]["ais"].update(method="magic"), "estimator ais: unknown method 'magic'"),
        (
            lambda c: c["models"]["digits-rbm8"]["hyperparams"].update(family="boltzmann"),
            "model digits-rbm8: unknown family 'boltzmann'",
        ),
        (lambda c: c["models"]["digits-rbm8"].update(dataset="nope"), "model digits-rbm8: unknown dataset 'nope'"),
        (
            lambda c: c["models"]["digits-rbm8"]["hyperparams"].update(learnin_rate=0.1),
            "model digits-rbm8: unknown hyperparameter 'learnin_rate'",
        ),
    ],
)
def test_bad_config_is_refused_with_the_checks_one_line_error(change, message):
    config = load_config()
    change(config)
    with pytest.raises(ConfigError) as checked:
        check_config(config)
    with pytest.raises(ConfigError) as planned:
        plan.load(config)
    assert str(planned.value) == str(checked.value)
    assert str(planned.value).startswith(message) and "\n" not in str(planned.value)


def test_npz_model_read_once_per_version(tmp_path):
    """A source model's .npz is read in one place (model_files.npz_model): its model_type, hidden sizes and
    data_mean; a file written again is read again."""
    path = tmp_path / "m.npz"
    np.savez(path, model_type=np.array("dbm"), W_1=np.zeros((6, 3)), W_2=np.zeros((3, 2)))
    first = npz_model(str(path))
    assert (first.model_type, first.hidden_sizes, first.has_data_mean) == ("dbm", (3, 2), False)
    assert npz_model(str(path)) is first
    np.savez(path, W=np.zeros((6, 5)), data_mean=np.full(6, 0.5), extra=np.zeros(100))
    again = npz_model(str(path))
    assert (again.model_type, again.hidden_sizes, again.has_data_mean) == ("rbm", (5,), True)
    path.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable .npz model file"):
        npz_model(str(path))


def test_plan_of_the_default_config_imports_no_torch(tmp_path):
    code = (
        "import sys, yaml; from logzbench.pipeline import config_schema, plan; "
        f"c = yaml.safe_load(open({str(REPO / 'config' / 'config.yaml')!r})); "
        f"config_schema.load_config(c, yaml.safe_load(open({str(SCHEMA)!r}))); plan.load(c); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)
