"""logzbench.pipeline (sweep, config, outputs): from a workflow config to its estimate jobs, their settings
and its checks (no Snakemake run).

Also checks that the config schema's enums are the registry's."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import yaml_alias_bomb

from logzbench import options, registry
from logzbench.data import sizes
from logzbench.errors import ConfigError
from logzbench.pipeline import config as checks
from logzbench.pipeline import config_schema, outputs, plan, sweep

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
CONFIGS = sorted((REPO / "config").glob("*.yaml"))


def load_config(name: str = "test", **overrides) -> dict:
    """A config of config/ validated against the schema and the declared options (defaults filled in)."""
    config = yaml.safe_load((REPO / "config" / f"{name}.yaml").read_text())
    for key, value in overrides.items():
        config[key] = {**config.get(key, {}), **value} if isinstance(value, dict) else value
    config_schema.load_config(config, yaml.safe_load(SCHEMA.read_text()))  # as workflow/rules/common.smk
    return config


def stems(config, model, estimator=None):
    return sorted(j.stem for j in sweep.model_jobs(config, model) if estimator in (None, j.entry))


# --------------------------------------------------------------------------- schema = registry
def test_schema_defers_estimator_and_family_names_to_the_registry():
    """The schema holds no list of estimators or families (adding one is a registry entry); the names
    are checked against the registry when the config is loaded, with the choices in the message."""
    schema = yaml.safe_load(SCHEMA.read_text())
    est = schema["properties"]["estimators"]["additionalProperties"]["properties"]
    assert "enum" not in est["method"]
    hp = schema["properties"]["models"]["additionalProperties"]["properties"]["hyperparams"]["properties"]
    assert "enum" not in hp["family"]
    assert schema["$defs"]["init_list"]["items"]["enum"] == list(registry.INITS)
    sources = schema["properties"]["datasets"]["additionalProperties"]["properties"]["source"]["enum"]
    assert sorted(sources) == sorted(sizes.SOURCE_DATA_KINDS)
    # the option keys are not written in the schema file but generated from their declarations
    # (logzbench.options): every option a job may record is a key of an estimator entry (CSL's
    # samples_per_chain is derived from K and thin)
    entry = config_schema.estimator_entry_schema(schema)["properties"]
    assert not set(options.config_properties()) & set(est)
    assert set(sweep.setting_keys()) - {"samples_per_chain"} <= set(entry)
    config = load_config()
    config["estimators"]["ais"]["method"] = "magic"
    with pytest.raises(ConfigError, match="unknown method 'magic'.*reverse-ais"):
        checks.check_config(config)
    config = load_config()
    config["models"]["digits-rbm8"]["hyperparams"]["family"] = "boltzmann"
    with pytest.raises(ConfigError, match="unknown family 'boltzmann'.*'dbn'"):
        checks.check_config(config)


def test_importable_without_torch():
    """What building the workflow's DAG imports (workflow/rules/common.smk: the pipeline's plan, sweep, config
    checks, output checks, file names and rule settings; the data sizes and trainer hyperparameters they read)
    imports no torch."""
    code = (
        "import sys, logzbench.data.sizes, logzbench.training.hyperparams, logzbench.pipeline.sweep, "
        "logzbench.pipeline.config, logzbench.pipeline.config_schema, logzbench.pipeline.outputs, "
        "logzbench.pipeline.usage, logzbench.pipeline.plan, logzbench.pipeline.rules, logzbench.pipeline.diagnose, "
        "logzbench.pipeline.model_files; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_default_config_checked_without_torch(tmp_path):
    """The DAG build's config check (its models' published rows included) imports no torch."""
    config = load_config("config")
    assert any(m.get("paper") for m in config["models"].values())
    (tmp_path / "config.json").write_text(json.dumps(config))
    code = (
        "import json, sys, logzbench.pipeline.config as c; c.check_config(json.load(open(sys.argv[1]))); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "config.json")], check=True)


def test_published_rows_read_without_pandas_are_those_of_the_report():
    from logzbench.report import published

    pub = published.load_published()
    assert checks.PUBLISHED_CSV == published.PUBLISHED_CSV
    assert checks._published_rows(str(checks.PUBLISHED_CSV)) == {p: set(g["row"]) for p, g in pub.groupby("paper")}


# --------------------------------------------------------------------------- jobs of config/test.yaml
def test_mixture_init_is_swept_and_its_components_recorded_on_its_estimates_only():
    """``inits: [base-rate, mixture]`` sweeps both starts; ``mixture_components`` reaches the mixture jobs'
    settings and options (and the workflow's records), not the base-rate jobs' (which would refuse it); a DBN
    has no mixture start (nor a base rate), so its sweep leaves it out, and a DBM's keeps it."""
    from logzbench.pipeline.jobs import estimate_options

    config = load_config()
    config["estimators"]["ais"].update(inits=["base-rate", "mixture"], mixture_components=3)
    config["estimators"]["ais-deep"]["inits"] = ["base-rate", "mixture"]
    settings = sweep.sweep_settings(config, "digits-rbm8", "ais")
    assert {s["init"] for s in settings} == {"base-rate", "mixture"}
    for s in settings:
        opts = estimate_options(s)
        assert opts.get("mixture_components") == (3 if s["init"] == "mixture" else None)
    assert "mixture" not in {s["init"] for s in sweep.sweep_settings(config, "digits-dbn8-4", "ais-deep")}
    assert "mixture" in {s["init"] for s in sweep.sweep_settings(config, "digits-dbm8-4", "ais-deep")}


def test_jobs_of_the_test_config():
    config = load_config()
    jobs = sweep.all_jobs(config)
    assert len(jobs) == 37 and len({j.path() for j in jobs}) == 37
    per_model = Counter(j.model for j in jobs)
    assert per_model == {
        "digits-rbm8": 22,
        "digits-dbm8-4": 5,
        "digits-dbn8-4": 3,
        "vh-poe-laplace-4": 3,
        "vh-linear-gaussian-4": 4,
    }
    rbm = Counter(j.entry for j in sweep.model_jobs(config, "digits-rbm8"))
    assert rbm == {
        "exact": 1,
        "ais": 8,
        "raise": 4,
        "csl": 1,
        "ads": 2,
        "reverse-ais": 2,
        "ds": 2,
        "sandwich": 1,
        "ais-adaptive": 1,
    }
    assert stems(config, "digits-rbm8", "sandwich") == ["seed0"]  # seeds only: its K is the starting K
    assert stems(config, "vh-linear-gaussian-4", "bdmc") == ["K50_seed0"]
    assert stems(config, "digits-rbm8", "exact") == ["exact"]
    assert stems(config, "digits-rbm8", "csl") == ["K50_seed0"]
    assert stems(config, "digits-rbm8", "raise") == [
        "K10_base-rate_seed0",
        "K10_uniform_seed0",
        "K50_base-rate_seed0",
        "K50_uniform_seed0",
    ]
    assert stems(config, "digits-rbm8", "ds") == ["base-rate_seed0", "base-rate_seed1"]
    assert stems(config, "vh-poe-laplace-4") == ["K20_seed0", "K20_seed0", "exact"]  # exact, hais, ais-mh
    # the order of the old expand(): K, then init, then seed
    ais = [j.stem for j in sweep.model_jobs(config, "digits-rbm8") if j.entry == "ais"]
    assert ais[:3] == ["K10_uniform_seed0", "K10_uniform_seed1", "K10_base-rate_seed0"]
    j = next(j for j in jobs if j.entry == "ds")
    assert (j.method, j.K, j.init, j.seed) == ("ds", None, "base-rate", 0)
    assert j.path("npz") == "results/estimates/digits-rbm8/ds/base-rate_seed0.npz"


def test_file_stems_round_trip_and_match_the_wildcard_pattern():
    config = load_config()
    pattern = re.compile(sweep.setting_pattern())
    for j in sweep.all_jobs(config):
        assert pattern.fullmatch(j.stem), j.stem
        assert sweep.job(config, j.model, j.entry, j.stem) == j
    for bad in ("K10_uniform", "seed0_K10", "K10_gaussian_seed0", "exact_seed0", "uniform"):
        assert not pattern.fullmatch(bad), bad
    with pytest.raises(ValueError, match="does not match the axes"):
        sweep.job(config, "digits-rbm8", "ais", "K10_seed0")


def test_estimators_follow_the_registry_families():
    """CSL on RBMs only, hais / ais-mh on continuous models only, the IS family on binary models only."""
    config = load_config()
    for m in config["models"]:
        config["models"][m].pop("estimators", None)  # without a list: every estimator, less those the family lacks
    config["estimators"]["is"] = {"chains": 10, "burn_in": 2, "seeds": [0]}
    run = {m: set(sweep.estimators_run(config, m)) for m in config["models"]}
    assert {"csl", "is", "ais", "ads"} <= run["digits-rbm8"] and not run["digits-rbm8"] & {"hais", "ais-mh"}
    assert "csl" not in run["digits-dbm8-4"] and "is" in run["digits-dbm8-4"]
    assert run["vh-poe-laplace-4"] == {"exact", "hais", "ais-mh"}
    for m, names in run.items():
        fam = sweep.model_family(config, m)
        assert all(registry.estimator(sweep.estimator_method(config, n)).applies_to(fam) for n in names)


# --------------------------------------------------------------------------- settings
BASE_KEYS = [
    "model",
    "dataset",
    "estimator",
    "method",
    "K",
    "init",
    "seed",
    "device",
    "n_visible",
    "family",
    "hidden_sizes",
    "n_hidden",
]


def test_settings_of_each_kind_of_job():
    config = load_config()
    s = sweep.job_settings(config, "digits-rbm8", "exact", "exact")
    assert list(s) == BASE_KEYS + ["exact_precision"] and s["exact_precision"] == "float64"
    assert (s["K"], s["init"], s["seed"], s["n_visible"], s["hidden_sizes"], s["n_hidden"]) == (
        None,
        None,
        None,
        64,
        [8],
        8,
    )
    s = sweep.job_settings(config, "digits-rbm8", "ais", "K50_base-rate_seed1")
    assert list(s) == BASE_KEYS + ["schedule", "chains", "n_examples"]
    assert (s["K"], s["init"], s["seed"], s["chains"], s["n_examples"]) == (50, "base-rate", 1, 20, None)
    s = sweep.job_settings(config, "digits-rbm8", "raise", "K10_uniform_seed0")
    assert s["n_examples"] == 10 and s["chains"] == 5 and "is_samples" not in s
    s = sweep.job_settings(config, "digits-dbm8-4", "ais-deep", "K10_uniform_seed0")
    assert list(s) == BASE_KEYS + ["schedule", "chains", "n_examples", "is_samples"]
    assert (s["method"], s["family"], s["hidden_sizes"], s["n_hidden"], s["is_samples"]) == (
        "ais",
        "dbm",
        [8, 4],
        None,
        50,
    )
    s = sweep.job_settings(config, "digits-rbm8", "csl", "K50_seed0")
    assert list(s) == BASE_KEYS + ["chains", "csl_mode", "burn_in", "thin", "samples_per_chain", "n_examples"]
    assert (s["init"], s["samples_per_chain"], s["burn_in"], s["thin"]) == (None, 10, 10, 5)  # 50 // 5
    s = sweep.job_settings(config, "vh-poe-laplace-4", "hais", "K20_seed0")
    assert list(s) == BASE_KEYS + ["schedule", "chains", "step_size", "gamma", "mh_sigma", "proposal_scale"]
    assert (s["family"], s["n_visible"], s["step_size"], s["gamma"], s["n_hidden"]) == (
        "poe-laplace",
        4,
        0.05,
        None,
        None,
    )
    s = sweep.job_settings(config, "digits-rbm8", "ds", "base-rate_seed1")
    assert list(s) == BASE_KEYS + ["chains", "burn_in", "n_examples"]
    assert (s["K"], s["init"], s["seed"], s["chains"], s["burn_in"]) == (None, "base-rate", 1, 200, 20)


def test_settings_hold_what_the_estimator_reads():
    """Every recorded estimator key is one of the estimator's registry options (n_examples aside: recorded
    as None by binary-model estimators that do not subsample)."""
    config = load_config()
    for j in sweep.all_jobs(config):
        s = sweep.job_settings(config, j.model, j.entry, j.stem)
        spec = registry.estimator(j.method)
        extra = set(s) - set(BASE_KEYS)
        assert extra - {"n_examples", "test_subset"} <= set(spec.options), (j, extra)
        if "n_examples" not in spec.options and "n_examples" in s:
            assert s["n_examples"] is None


def test_test_subset_flows_into_the_settings_of_its_entry_only():
    """An estimator entry's test_subset ({per_class, seed}; seed defaults to 0) is recorded last in its
    settings; other entries' settings and every file stem are unchanged; the schema refuses a bad one at
    parse time and check_config a model whose dataset has no labels."""
    validate = pytest.importorskip("snakemake.utils").validate
    base = load_config()
    config = copy.deepcopy(base)
    config["estimators"]["raise"]["test_subset"] = {"per_class": 2, "seed": 3}
    config["estimators"]["csl"]["test_subset"] = {"per_class": 4}
    validate(config, str(SCHEMA))
    assert config["estimators"]["csl"]["test_subset"] == {"per_class": 4, "seed": 0}
    assert checks.check_config(config) == []
    jobs = sweep.all_jobs(config)
    assert jobs == sweep.all_jobs(base)
    for j in jobs:
        s, before = (sweep.job_settings(c, j.model, j.entry, j.stem) for c in (config, base))
        if j.entry in ("raise", "csl"):
            assert list(s) == [*before, "test_subset"] and {k: s[k] for k in before} == before
            assert (
                s["test_subset"] == {"raise": {"per_class": 2, "seed": 3}, "csl": {"per_class": 4, "seed": 0}}[j.entry]
            )
        else:
            assert s == before
    from snakemake.exceptions import WorkflowError

    for bad, why in (
        ({"per_class": 0}, "0 is less than the minimum of 1"),
        ({"per_class": 5, "n": 3}, "Additional properties are not allowed"),
        ({"seed": 1}, "'per_class' is a required property"),
        ({"per_class": 1.5}, "1.5 is not of type 'integer'"),
        ({"per_class": 5, "seed": -1}, "-1 is less than the minimum of 0"),
        (50, "50 is not of type 'object'"),
    ):
        c = copy.deepcopy(base)
        c["estimators"]["raise"]["test_subset"] = bad
        with pytest.raises(WorkflowError, match=re.escape(why)):
            validate(c, str(SCHEMA))
    c = copy.deepcopy(base)
    c["estimators"]["exact"]["test_subset"] = {"per_class": 5, "seed": 0}  # exact also runs on van Hateren patches
    _refused(
        c,
        r"estimator exact: test_subset needs test labels, and model vh-poe-laplace-4's dataset \(vanhateren\) "
        r"has none",
    )


# --------------------------------------------------------------------------- exact, inits, K
def test_exact_limits():
    config = load_config(evaluation={"exact_max_units": 4})
    # RBM 64-8: 8 > 4; DBM 64-8-4: min(64 + 4, 8) = 8 > 4; DBN 64-8-4: min(8, 4) = 4 and h_1 = 8 <= 16
    applies = {m: sweep.exact_applies(config, m, "exact") for m in config["models"]}
    assert applies == {
        "digits-rbm8": False,
        "digits-dbm8-4": False,
        "digits-dbn8-4": True,
        "vh-poe-laplace-4": True,
        "vh-linear-gaussian-4": True,
    }  # closed forms: no enumeration
    config["evaluation"]["exact_max_log_f_units"] = 4
    assert not sweep.exact_applies(config, "digits-dbn8-4", "exact")
    config["estimators"]["exact"]["max_log_f_units"] = 8  # the estimator's own limit wins
    assert sweep.exact_applies(config, "digits-dbn8-4", "exact")
    config["models"]["digits-rbm8"]["exact"] = True
    config["models"]["vh-poe-laplace-4"]["exact"] = False
    assert sweep.exact_applies(config, "digits-rbm8", "exact")
    assert "exact" not in stems(config, "vh-poe-laplace-4")
    config = load_config()
    config["models"]["vh-poe-laplace-4"]["hyperparams"]["size"] = 3  # an incomplete PoE: no closed form
    assert not sweep.exact_applies(config, "vh-poe-laplace-4", "exact")
    assert sweep.exact_limits(config, "exact") == (20, 16)


def test_dbn_gets_the_uniform_init_only():
    config = load_config()
    assert stems(config, "digits-dbn8-4") == ["K10_uniform_seed0", "K10_uniform_seed0", "exact"]
    assert sweep.sweep_values(config, "digits-dbn8-4", "ais-deep") == {"K": [10], "init": ["uniform"], "seed": [0]}
    config = load_config(evaluation={"inits": ["base-rate"], "exact_max_units": 4, "exact_max_log_f_units": 4})
    assert sweep.model_jobs(config, "digits-dbn8-4") == []
    warnings = checks.check_config(config)
    assert any("model digits-dbn8-4 (dbn) has no estimate to run" in w for w in warnings)


def test_sm14500_schedule_has_one_K():
    config = load_config()
    config["estimators"]["ais-sm"] = {"method": "ais", "schedule": "sm14500", "seeds": [0], "inits": ["uniform"]}
    config["models"]["digits-rbm8"]["estimators"].append("ais-sm")
    assert stems(config, "digits-rbm8", "ais-sm") == ["K14500_uniform_seed0"]
    config["estimators"]["ais-sm"]["K"] = [100]
    with pytest.raises(ConfigError, match="the sm14500 schedule has K = 14500"):
        checks.check_config(config)


# --------------------------------------------------------------------------- refusals
def _refused(config, match):
    with pytest.raises(ConfigError, match=match):
        checks.check_config(config, presets={})


def test_refusals_name_the_entry_and_the_fix():
    base = load_config()
    assert checks.check_config(base) == []

    c = copy.deepcopy(base)
    c["models"]["digits-dbm8-4"]["estimators"] = ["exact", "csl"]
    _refused(c, r"model digits-dbm8-4: estimator 'csl' \(csl\) is not available for a DBM \(csl runs on RBMs only")
    c = copy.deepcopy(base)
    c["models"]["digits-rbm8"]["estimators"].append("hais")
    _refused(c, r"estimator 'hais' \(hais\) is not available for a RBM .*remove it from models.digits-rbm8.estimators")
    c = copy.deepcopy(base)
    c["models"]["vh-poe-laplace-4"]["estimators"] = ["ds"]
    _refused(
        c,
        r"estimator 'ds' \(ds\) is not available for a POE-LAPLACE \(ds runs on binary, gaussian-binary and "
        r"categorical models only",
    )
    c = copy.deepcopy(base)
    c["models"]["digits-rbm8"]["dataset"] = "nosuchdata"
    _refused(c, "model digits-rbm8: unknown dataset 'nosuchdata'")
    c = copy.deepcopy(base)
    c["models"]["digits-rbm8"]["estimators"].append("nosuch")
    _refused(c, "model digits-rbm8: unknown estimator 'nosuch'")
    c = copy.deepcopy(base)
    c["estimators"]["mystery"] = {}
    _refused(c, r"estimator mystery: unknown method 'mystery'; set `method` to one of \['exact'")
    c = copy.deepcopy(base)
    c["estimators"]["ais"]["models"] = ["nosuchmodel"]
    _refused(c, r"estimator ais: unknown models \['nosuchmodel'\]")
    c = copy.deepcopy(base)
    c["models"]["digits-dbn8-4"]["hyperparams"]["hidden_sizes"] = [8, 4, 2]
    _refused(c, "model digits-dbn8-4: a DBN has exactly two hidden layers")
    c = copy.deepcopy(base)
    c["models"]["digits-rbm8"]["hyperparams"]["family"] = "poe-laplace"
    _refused(
        c, r"model digits-rbm8: a poe-laplace model needs a continuous \(vanhateren, frey\) dataset; digits is binary"
    )
    c = copy.deepcopy(base)
    c["models"]["digits-rbm8"]["hyperparams"]["family"] = "boltzmann"
    _refused(c, "model digits-rbm8: unknown family 'boltzmann'")
    c = copy.deepcopy(base)
    c["models"]["digits-rbm8"]["preset"] = "nosuchpreset"
    _refused(c, "model digits-rbm8: unknown preset 'nosuchpreset'")
    c = copy.deepcopy(base)
    del c["models"]["digits-rbm8"]["hyperparams"]["n_hidden"]
    _refused(c, "model digits-rbm8: give `hyperparams.n_hidden` or a `preset`")
    c = copy.deepcopy(base)
    c["estimators"]["csl"]["K"] = [3]
    _refused(c, r"estimator csl: K \[3\] < thin: no CSL sample would be kept")
    c = copy.deepcopy(base)
    c["datasets"]["digits"]["source"] = "mystery-bits"
    _refused(c, "dataset digits: give n_visible")
    _refused({"models": {}, "datasets": {}, "estimators": {}, "trials": {}}, "no models and no trials")


def test_ignored_sweep_keys_are_warned_about():
    config = load_config()
    config["estimators"]["ds"]["K"] = [10]
    config["estimators"]["csl"]["inits"] = ["uniform"]
    warnings = checks.check_config(config)
    assert "estimator ds (ds) is not swept over K: its `K` is ignored" in warnings
    assert "estimator csl (csl) is not swept over inits: its `inits` is ignored" in warnings


@pytest.mark.parametrize("path", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_every_shipped_config_passes_the_checks_without_warnings(path):
    config = load_config(path.stem)
    assert checks.check_config(config) == []
    jobs = sweep.all_jobs(config)
    assert len({j.path() for j in jobs}) == len(jobs)
    if config.get("models"):
        assert jobs


# --------------------------------------------------------------------------- issue 15: checked when loaded
def test_hyperparameter_names_are_the_trainers():
    """The torch-free names (logzbench.training.hyperparams) are those train_model / the learners accept."""
    import dataclasses
    import inspect

    from logzbench import training
    from logzbench.training.em import train_em
    from logzbench.training.grbm import GRBMHyperparams
    from logzbench.training.mpf import train_mpf

    def params(f, drop=()):
        return {
            n
            for n, p in inspect.signature(f).parameters.items()
            if p.kind is not inspect.Parameter.VAR_KEYWORD and n not in drop
        }

    from logzbench.training.dbm import DBMTrainer
    from logzbench.training.dbn import DBNTrainer
    from logzbench.training.trainer import RBMTrainer

    common = checks._COMMON_HYPERPARAMS
    expected = {"rbm": params(RBMTrainer), "dbm": params(DBMTrainer), "dbn": params(DBNTrainer)}
    expected["rbm"] |= {"hidden_sizes"}
    expected["grbm"] = {f.name for f in dataclasses.fields(GRBMHyperparams)}
    from logzbench.training.hyperparams import FAMILY_ONLY

    cont = params(training.train_continuous, ("train", "test"))
    for name in registry.family_names(("analysis", "generative")):
        if not registry.family(name).hyperparams:  # a user's energy (a source model): not trained
            continue
        fit = train_mpf if registry.family(name).kind == "analysis" else train_em
        only_others = {k for k, fams in FAMILY_ONLY.items() if name not in fams}  # e.g. learn_sigma: mcrbm only
        expected[name] = (cont | params(fit, ("model", "X_train", "n_iter", "seed"))) - only_others
    from logzbench.training.potts import train_potts, train_potts_rbm

    expected["potts"] = params(train_potts, ("train", "test"))
    expected["potts-rbm"] = params(train_potts_rbm, ("train", "test"))
    from logzbench.training.grid import generate_grid_mrf  # a grid MRF is generated: its generator's keywords

    expected["grid-mrf"] = params(generate_grid_mrf, ("train", "test"))
    for name, fam in registry.FAMILIES.items():  # the user's energies: no trainer, no hyperparameters
        if fam.model.endswith(":EnergyModel"):
            expected[name] = set()
    assert set(expected) == set(registry.FAMILIES)
    for name, names in expected.items():
        assert checks.hyperparam_names(name) - common == names - common, name
    for spec in registry.LEARNERS.values():
        entry = registry.load(spec.entry)
        want = params(entry, ("train", "valid", "family", "return_state")) | {"n_hidden"}
        assert checks.hyperparam_names(spec.families[0], spec.name) - common == want - common, spec.name


def test_trainers_signatures_are_their_declarations():
    """Each trainer's and learner's signature has exactly the keyword parameters declared in
    logzbench.training.hyperparams (besides the data it is given), with those defaults."""
    import dataclasses
    import inspect

    from logzbench.training.hyperparams import DECLARED, REQUIRED

    data = {"train", "test", "valid", "model", "X_train", "return_state"}
    for target, declared in DECLARED.items():
        obj = registry.load(target)
        if dataclasses.is_dataclass(obj):
            have = {
                f.name: REQUIRED if f.default is dataclasses.MISSING else f.default for f in dataclasses.fields(obj)
            }
        else:
            have = {
                n: REQUIRED if p.default is inspect.Parameter.empty else p.default
                for n, p in inspect.signature(obj).parameters.items()
                if p.kind is not inspect.Parameter.VAR_KEYWORD and n not in data
            }
        assert have == declared, target
    learners = {spec.entry for spec in registry.LEARNERS.values()}
    # every declaration is some family's or learner's, and every shipped family's is declared (no torch)
    assert set(DECLARED) == learners | {t for spec in registry.FAMILIES.values() for t in spec.hyperparams}


MIRROR = Path(os.environ.get("LOGZBENCH_DATA_MIRROR") or REPO.parent / "shared" / "data")


def _mirrored(*parts: str) -> bool:
    return (MIRROR.joinpath(*parts)).exists()


def test_loaded_data_sets_have_their_declared_sizes():
    """The sizes the workflow checks a config against (logzbench.data.sizes, which the loaders read) are
    those of the data as loaded: digits and digits-avil always (scikit-learn's), the mirrored sources where
    the mirror ($LOGZBENCH_DATA_MIRROR, else ../shared/data) has them (Omniglot's split is not loaded: slow)."""
    from logzbench.data import digits, frey, mnist, uci, vanhateren

    d = digits.load_digits_dataset()
    assert sizes.SOURCE_ROWS["digits"] == {"train": len(d["train_images"]), "test": len(d["test_images"])}
    assert int(np.prod(d["train_images"].shape[1:])) == sizes.N_FEATURES["digits"]
    for mode, rows in sizes.DIGITS_AVIL_ROWS.items():
        d = digits.load_digits_avil(mode)
        assert rows == {"train": len(d["train_images"]), "valid": len(d["valid_images"])}, mode
    checked = ["digits", "digits-avil"]
    if _mirrored("mnist"):
        m = mnist.load_mnist(mirror=MIRROR)
        assert {s: len(m[f"{s}_images"]) for s in ("train", "test")} == sizes.SOURCE_ROWS["mnist"]
        assert int(np.prod(m["train_images"].shape[1:])) == sizes.N_FEATURES["mnist"]
        checked.append("mnist")
    for name, spec in uci.UCI_SETS.items():
        if _mirrored("uci_binary", spec.folder):
            x = uci.load_uci(name, mirror=MIRROR)
            assert {s: len(x[s]) for s in ("train", "valid", "test")} == sizes.SOURCE_ROWS[name], name
            assert x["train"].shape[1] == sizes.N_FEATURES[name], name
            checked.append(name)
    if _mirrored("frey_faces"):
        faces = frey.load_frey_faces(mirror=MIRROR)
        assert faces.shape == (sizes.FREY_FACES, sizes.N_FEATURES["frey"])
        checked.append("frey")
    assert len(vanhateren.VANHATEREN_IMAGES) == sizes.VANHATEREN_N_IMAGES
    first = MIRROR / "vanhateren" / vanhateren.VANHATEREN_IMAGES[0]
    if first.is_file():
        assert vanhateren.read_iml(first).shape == sizes.VANHATEREN_IMAGE_SHAPE
        checked.append("vanhateren")
    print("checked:", ", ".join(checked))
    schema = yaml.safe_load(SCHEMA.read_text())
    assert config_schema.estimator_entry_schema(schema)["properties"]["chains"]["maximum"] == checks.MAX_CHAINS


def _set(config, path, value):
    *keys, last = path.split(".")
    for k in keys:
        config = config[k]
    config[last] = value


@pytest.mark.parametrize(
    "path, value, match",
    [
        (
            "models.digits-rbm8.hyperparams.learnin_rate",
            0.1,
            r"model digits-rbm8: unknown hyperparameter 'learnin_rate' "
            r"\(models.digits-rbm8.hyperparams.learnin_rate\); "
            r"did you mean 'learning_rate'\? \(the rbm trainer takes batch_size, ",
        ),
        ("models.digits-dbm8-4.hyperparams.pretrain_epoch", 2, "did you mean 'pretrain_epochs'"),
        ("models.vh-poe-laplace-4.hyperparams.n_iters", 2, r"unknown hyperparameter 'n_iters'.*did you mean 'n_iter'"),
        ("models.vh-poe-laplace-4.hyperparams.learn_sigma", True, r"unknown hyperparameter 'learn_sigma'"),
        (
            "estimators.ais.schedule",
            "cubic",
            r"estimator ais: schedule 'cubic' is neither a schedule name \(linear, "
            r"sigmoid, sm14500, adaptive, tuned\) nor a file of betas",
        ),
        ("estimators.ais.schedule", "no/such/file.txt", "estimator ais: schedule 'no/such/file.txt' is neither"),
        (
            "datasets.digits.n_train",
            1438,
            "dataset digits: n_train=1438 is more than the 1437 training rows of digits; "
            "set datasets.digits.n_train to at most 1437",
        ),
        ("datasets.digits.n_test", 361, "dataset digits: n_test=361 is more than the 360 test rows"),
        ("datasets.digits.n_valid", 1437, "n_valid=1437 is more than the 1437 training rows of digits less one"),
        ("datasets.vh-4.n_test_images", 6, "dataset vh-4: n_test_images=6 leaves no training image of n_images=6"),
        ("datasets.vh-4.n_components", 257, "n_components=257 is more than the 256 pixels of a 16x16 patch"),
        ("datasets.vh-4.n_train", 4, "n_train=4 training patches cannot fit n_components=4"),
        ("datasets.digits.shift_augment", "all", "shift_augment applies to digits-avil only"),
    ],
)
def test_sizes_names_and_schedules_are_checked_when_loaded(path, value, match):
    config = load_config()
    _set(config, path, value)
    with pytest.raises(ConfigError, match=match):
        checks.check_config(config)


def test_dataset_sizes_of_other_sources_are_checked():
    config = load_config()
    config["datasets"]["uci"] = {"source": "mushrooms", "n_valid": 10}
    with pytest.raises(ConfigError, match="mushrooms has a fixed validation split"):
        checks.check_config(config)
    config["datasets"]["uci"] = {"source": "mushrooms", "n_train": 2001}
    with pytest.raises(ConfigError, match="n_train=2001 is more than the 2000 training rows of mushrooms"):
        checks.check_config(config)
    config["datasets"]["uci"] = {"source": "digits-avil", "n_test": 10}
    with pytest.raises(ConfigError, match="digits-avil has no n_test"):
        checks.check_config(config)
    config["datasets"]["uci"] = {"source": "digits-avil", "shift_augment": "none", "n_train": 1439}
    with pytest.raises(ConfigError, match="the 1438 training rows of digits-avil"):
        checks.check_config(config)
    config["datasets"]["uci"] = {"source": "frey", "n_test": 100, "n_train": 1866}
    with pytest.raises(ConfigError, match="n_train=1866 is more than the 1865 Frey faces left after n_test=100"):
        checks.check_config(config)
    config["datasets"]["uci"] = {"source": "mnist", "n_valid": 10000, "n_train": 50000, "n_test": 10000}
    assert checks.check_config(config) == []


def test_schedule_file_is_read_when_loaded(tmp_path, monkeypatch):
    """A schedule file: it must exist and hold a schedule; without K its own length is the sweep's K, and
    another K is refused (as for sm14500).  A relative path is taken from the working directory."""
    monkeypatch.chdir(tmp_path)
    config = load_config()
    config["estimators"]["ais"] = {"chains": 20, "schedule": "betas.txt", "seeds": [0], "inits": ["uniform"]}
    (tmp_path / "betas.txt").write_text("0\n0.5\n0.2\n1\n")
    with pytest.raises(ConfigError, match=r"estimator ais: schedule file betas.txt: .*non-decreasing"):
        checks.check_config(config)
    (tmp_path / "betas.txt").write_text("0\n0.25\n0.5\n1\n")
    assert checks.check_config(config) == []
    assert stems(config, "digits-rbm8", "ais") == ["K3_uniform_seed0"]
    config["estimators"]["ais"]["K"] = [10]
    with pytest.raises(ConfigError, match=r"estimator ais: the schedule file betas.txt has K = 3; set K: \[3\]"):
        checks.check_config(config)


# --------------------------------------------------------------------------- issue 15: damaged outputs
def test_damaged_files_are_named_with_how_to_rebuild_them(tmp_path):
    import numpy as np

    model = tmp_path / "m.npz"
    np.savez(model, W=np.zeros((2, 3)), model_type=np.array("rbm"))
    outputs.check_npz(model, "model")
    model.write_bytes(model.read_bytes()[:-40])  # truncated
    for quick in (True, False):
        with pytest.raises(
            ConfigError,
            match=rf"^{re.escape(str(model))} is damaged \(.*\); rebuild it and what "
            rf"depends on it with: snakemake --forcerun {re.escape(str(model))} ",
        ):
            outputs.check_npz(model, "model", quick=quick)
    np.savez(model, W=np.zeros((2, 3)))
    with pytest.raises(ConfigError, match="holds no model_type"):
        outputs.check_npz(model, "model")
    d = tmp_path / "estimates" / "m" / "ais"
    d.mkdir(parents=True)
    rec = d / "K10_seed0.json"
    rec.write_text('{"result": {}}')
    with pytest.raises(ConfigError, match=rf"K10_seed0.npz is missing; .* snakemake --forcerun {re.escape(str(d))} "):
        outputs.check_estimate_record(rec)
    np.savez(d / "K10_seed0.npz", other=np.zeros(3))
    with pytest.raises(ConfigError, match="holds neither log_weights nor per_example_log_likelihood"):
        outputs.check_estimate_record(rec)
    np.savez(d / "K10_seed0.npz", log_weights=np.zeros(3))
    outputs.check_estimate_record(rec)
    rec.write_text('{"result": ')
    with pytest.raises(ConfigError, match="K10_seed0.json is damaged \\(not JSON"):
        outputs.check_estimate_record(rec)


def test_damaged_outputs_of_the_config(tmp_path):
    import numpy as np

    config = load_config()
    results = tmp_path / "results"
    assert outputs.damaged_outputs(plan.load(config), str(results)) == []
    jobs = sweep.model_jobs(config, "digits-rbm8")
    for j in jobs[:3]:
        p = Path(j.path("json", str(results)))
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text('{"result": {}}')
        np.savez(p.with_suffix(".npz"), log_weights=np.zeros(3))
    (results / "models").mkdir()
    np.savez(results / "models" / "digits-rbm8.npz", model_type=np.array("rbm"))
    (results / "models" / "digits-dbn8-4.npz").write_bytes(b"PK\x03\x04 truncated")
    npz = Path(jobs[1].path("npz", str(results)))
    npz.unlink()
    model = f"{results}/models/digits-dbn8-4.npz"
    assert outputs.damaged_outputs(plan.load(config), str(results)) == [
        (model, f"{model} is damaged (not a complete .npz archive; truncated?); {outputs.rebuild_hint(model)}"),
        (str(npz.parent), f"{npz} is missing; {outputs.rebuild_hint(npz.parent)}"),
    ]


def test_deleted_setting_of_a_finished_sweep_is_damaged(tmp_path):
    """Issue 22: a deleted <setting>.{json,npz} pair inside a finished sweep's directory is a damaged output (its
    records list the sweep's settings, sweep_stems); a setting that no record lists is new (its sweep reruns)."""
    import json

    import numpy as np

    config = load_config()
    results = tmp_path / "results"
    jobs = [j for j in sweep.model_jobs(config, "digits-rbm8") if j.entry == "ais"]
    paths = [Path(j.path("json", str(results))) for j in jobs]
    assert len(paths) > 2 and len({p.parent for p in paths}) == 1
    listed = [p.stem for p in paths]
    paths[0].parent.mkdir(parents=True)
    for p in paths:
        p.write_text(json.dumps({"result": {}, "sweep_stems": listed}))
        np.savez(p.with_suffix(".npz"), log_weights=np.zeros(3))
    assert outputs.damaged_outputs(plan.load(config), str(results)) == []
    gone = paths[1]
    gone.unlink()
    gone.with_suffix(".npz").unlink()
    d = str(gone.parent)
    assert outputs.damaged_outputs(plan.load(config), str(results)) == [
        (d, f"{gone} is missing (a setting of the finished sweep in {d}); {outputs.rebuild_hint(d)}")
    ]
    # records that do not list it (an earlier, smaller sweep: the config added the setting) leave it to rerun
    for p in paths[:1] + paths[2:]:
        p.write_text(json.dumps({"result": {}, "sweep_stems": [q.stem for q in paths if q != gone]}))
    assert outputs.damaged_outputs(plan.load(config), str(results)) == []
    # every file of the sweep deleted, its directory left (Snakemake: "Nothing to be done"): each setting is named
    for p in paths:
        p.unlink(missing_ok=True)
        p.with_suffix(".npz").unlink(missing_ok=True)
    assert outputs.damaged_outputs(plan.load(config), str(results)) == [
        (d, f"{p} is missing (its sweep's directory holds no record in {d}); {outputs.rebuild_hint(d)}") for p in paths
    ]


# --------------------------------------------------------------------------- loading: numbers, aliases, --config
#: where config/test.yaml's entries of each kind stand in for every entry of their map
_ENTRY = {"datasets": "digits", "models": "digits-rbm8", "estimators": "ais"}


def _numeric_keys() -> list[tuple[str, bool]]:
    """``(path, is a list)`` of every config key the schema (with the declared estimator options) says holds a
    number or a list of numbers: the keys a NaN could hide in, found in the schema rather than listed here."""
    schema = yaml.safe_load(SCHEMA.read_text())
    defs = schema["$defs"]

    def numeric(s):
        types = s.get("type", [])
        return bool({"number", "integer"} & ({types} if isinstance(types, str) else set(types)))

    def walk(s, path):
        s = defs[s["$ref"].rsplit("/", 1)[1]] if "$ref" in s else s
        if s.get("type") == "array" and numeric(s.get("items", {})):
            yield path, True
        elif numeric(s):
            yield path, False
        props = dict(s.get("properties") or {})
        if path == "estimators.ais":
            props = config_schema.estimator_entry_schema(schema)["properties"]
        for key, sub in props.items():
            yield from walk(sub, f"{path}.{key}" if path else key)
        if path in _ENTRY:
            yield from walk(s["additionalProperties"], f"{path}.{_ENTRY[path]}")

    return sorted(set(walk(schema, "")))


NUMERIC_KEYS = _numeric_keys()


def test_numeric_keys_cover_the_issues_keys():
    """The issue's keys (every option of every estimator entry among them) are found in the schema."""
    found = {p for p, _ in NUMERIC_KEYS}
    assert {
        "estimators.ais.target_width",
        "estimators.ais.target_ess",
        "estimators.ais.confidence",
        "estimators.ais.step_size",
        "models.digits-rbm8.hyperparams.learning_rate",
        "datasets.digits.threshold",
        "report.gap_threshold",
        "evaluation.seeds",
    } <= found
    assert {f"estimators.ais.{o.name}" for o in options.declared().values() if o.config and o.kind in (
        "int", "float", "fraction", "seconds")} <= found  # fmt: skip


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("path, is_list", NUMERIC_KEYS, ids=[p for p, _ in NUMERIC_KEYS])
def test_every_numeric_key_refuses_nan_and_inf(path, is_list, bad):
    """Every number of the schema is finite: a range check alone (``minimum: 0``) is False for NaN and lets it
    through; YAML's ``.nan`` / ``.inf`` load as floats.  The refusal names the key."""
    config = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    parent = config
    *keys, last = path.split(".")
    for k in keys:
        parent = parent.setdefault(k, {"per_class": 1} if k == "test_subset" else {})
    parent[last] = [bad] if is_list else bad
    where = re.escape(f"{path}{'.0' if is_list else ''}: {bad!r} is not a finite number")
    if path.startswith("estimators.ais."):  # the schema file's keys, or a declared option's
        where = where.replace(re.escape("estimators.ais"), "(estimators.ais|estimator ais)", 1)
    with pytest.raises(ConfigError, match=f"^(config.)?{where}$"):
        config_schema.load_config(config, yaml.safe_load(SCHEMA.read_text()))


def test_a_number_among_a_trainers_other_hyperparameters_is_finite():
    """A trainer's keyword the schema does not list (weight_decay) is a JSON value too: finite."""
    config = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    config["models"]["digits-rbm8"]["hyperparams"]["weight_decay"] = float("nan")
    with pytest.raises(ConfigError, match=r"hyperparams.weight_decay: nan is not a finite number"):
        config_schema.load_config(config, yaml.safe_load(SCHEMA.read_text()))
    config["models"]["digits-rbm8"]["hyperparams"]["weight_decay"] = [1.0, {"x": float("inf")}]
    with pytest.raises(ConfigError, match=r"hyperparams.weight_decay.1.x: inf is not a finite number"):
        config_schema.load_config(config, yaml.safe_load(SCHEMA.read_text()))


@pytest.mark.parametrize(
    "where",
    ["evaluation:\n  seeds: {bomb}\n", "junk: {bomb}\n", "description: {bomb}\n", "models: {{x: {{bomb: {bomb}}}}}\n"],
    ids=["seeds", "unknown key", "description", "a model's entry"],
)
def test_an_alias_bomb_is_refused_before_it_is_expanded(where):
    """A billion-value config written in a few lines (YAML aliases repeated in what they name) is refused by
    counting each distinct list once, before the schema or any other walk expands it: one short line naming
    the top-level key and the limit."""
    config = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    config.update(yaml.safe_load(where.format(bomb=yaml_alias_bomb())))
    with pytest.raises(ConfigError) as exc:
        config_schema.load_config(config, yaml.safe_load(SCHEMA.read_text()))
    message = str(exc.value)
    key = where.split(":")[0]
    assert message.startswith(
        f"config key {key}: the config holds more than {config_schema.MAX_CONFIG_VALUES:,} values"
    )
    assert "\n" not in message and len(message) < 300


def test_a_recursive_alias_is_refused():
    config = yaml.safe_load("description: x\nevaluation: &e {seeds: [0], K: [*e]}\n")
    with pytest.raises(ConfigError, match="config key evaluation: the config holds more than"):
        config_schema.check_size(config)


def test_shipped_configs_and_large_values_within_the_limit():
    """The count is of values expanded (each alias counted as often as it appears): within the limit a config of
    repeated aliases is loaded, and a value of the wrong type is named with its repr cut short."""
    config = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    config.update(yaml.safe_load(f"description: {yaml_alias_bomb(4)}\n"))  # 6,561 numbers
    config_schema.check_size(config)
    with pytest.raises(ConfigError) as exc:
        config_schema.load_config(config, yaml.safe_load(SCHEMA.read_text()))
    message = str(exc.value)
    assert message.startswith("config.description: [[[...], [...], [...], [...], [...], ...], [[...], ")
    assert message.endswith(", ...] is not of type 'string'") and len(message) < 300
    for path in CONFIGS:
        config_schema.check_size(yaml.safe_load(path.read_text()))


def test_only_command_line_values_are_coerced():
    """``--config`` values reach the workflow as strings below the top level (``seeds=[0,1]`` gives ``['0', '1']``):
    those become numbers; a config file's values keep their YAML types, so a model named ``"2024"`` (quoted) is
    a name wherever it is used."""
    schema = yaml.safe_load(SCHEMA.read_text())
    text = (REPO / "config" / "test.yaml").read_text()
    model = "  '2024':\n    dataset: digits\n    hyperparams: {n_hidden: 4}\n"
    text = text.replace("  digits-rbm8:\n", model + "  digits-rbm8:\n", 1)
    text = text.replace("  ais:\n    chains: 20\n", "  ais:\n    chains: 20\n    models: ['2024', digits-rbm8]\n", 1)
    config = yaml.safe_load(text)
    config_schema.load_config(config, schema)
    assert config["estimators"]["ais"]["models"] == ["2024", "digits-rbm8"]
    assert checks.check_config(config) == []
    assert "ais" in {j.entry for j in sweep.model_jobs(config, "2024")}
    cli = {"evaluation": {"seeds": ["0", "1", "5"]}, "report": {"gap_threshold": "0.5"},
           "estimators": {"ais": {"models": ["2024"]}}}  # fmt: skip
    config = yaml.safe_load(text)
    config_schema.load_config(config, schema, cli)
    assert config["evaluation"]["seeds"] == [0, 1, 5] and config["report"]["gap_threshold"] == 0.5
    assert config["estimators"]["ais"]["models"] == ["2024"] and config["estimators"]["ais"]["chains"] == 20
    config = yaml.safe_load(text)
    with pytest.raises(ConfigError, match=r"config.evaluation.seeds.0: nan is not a finite number"):
        config_schema.load_config(config, schema, {"evaluation": {"seeds": [".nan"]}})
