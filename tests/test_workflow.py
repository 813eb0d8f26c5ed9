"""The Snakemake workflow: dry runs of every config, and a tiny real run with MLflow tracking.

Everything runs with ``--directory <tmp>`` so nothing is written into the repository.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import yaml_alias_bomb

pytest.importorskip("snakemake", reason="snakemake is not installed; the workflow tests need it")
pytest.importorskip("mlflow", reason="mlflow is not installed; the workflow tests need it")

REPO = Path(__file__).resolve().parents[1]
SNAKEFILE = REPO / "Snakefile"
CONFIGS = sorted((REPO / "config").glob("*.yaml"))
TEST_CONFIG = REPO / "config" / "test.yaml"
EXPERIMENT = "logzbench-test"
# config/test.yaml: RBM exact 1 + AIS (2 K x 2 inits x 2 seeds) 8 + RAISE (2 K x 2 inits) 4 + CSL 1
# + ADS and reverse AIS (1 K x base-rate x 2 seeds) 4 + DS (the IS family: base-rate x 2 seeds) 2
# + the sandwich (seed 0) 1 + AIS on the adaptive schedule (1 K x base-rate x seed 0) 1;
# DBM exact 1 + AIS and RAISE (1 K x 2 inits) 4; DBN exact 1 + AIS and RAISE (1 K, uniform only) 2
N_ESTIMATES = 22 + 5 + 3 + 3 + 4  # + continuous: per model exact 1, hais 1, ais-mh 1; BDMC on the linear model 1
# trials: Gaussian 2 sigma0 + grid 1 sigma_pair x 2 references
N_TRIAL_SETTINGS = 2 + 2
N_TRAIN = 3 + 2


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("MLFLOW_TRACKING_URI", None)  # the store must land in the temporary working directory
    env.setdefault("LOGZBENCH_DATA_MIRROR", str(REPO.parent / "shared" / "data"))
    env["PYTHONHASHSEED"] = "0"
    return env


def snakemake(
    workdir: Path,
    *args: str,
    configfile: Path | None = TEST_CONFIG,
    timeout: int = 600,
    check: bool = True,
    env: dict[str, str | None] | None = None,
) -> subprocess.CompletedProcess:
    """Run snakemake in ``workdir``; ``env``: environment variables to set (``None``: to remove)."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(SNAKEFILE),
        "--directory",
        str(workdir),
        "--cores",
        "2",
        *args,
    ]
    if configfile is not None:
        cmd += ["--configfile", str(configfile)]
    environ = _env()
    for key, value in (env or {}).items():
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = value
    proc = subprocess.run(cmd, capture_output=True, text=True, env=environ, timeout=timeout, cwd=workdir)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake failed ({proc.returncode}): {' '.join(cmd)}\n"
            f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"
        )
    return proc


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a snakemake (dry) run."""
    block = output.split("Job stats:", 1)[1]
    counts = {}
    for line in block.splitlines()[3:]:
        m = re.match(r"^(\S+)\s+(\d+)\s*$", line)
        if not m:
            break
        counts[m.group(1)] = int(m.group(2))
    return counts


def _config(configfiles) -> dict:
    """The config Snakemake builds from ``configfiles`` (later files update earlier ones, recursively),
    validated against the schema (which fills in the defaults)."""
    import yaml
    from snakemake.utils import update_config, validate

    config: dict = {}
    for f in configfiles:
        update_config(config, yaml.safe_load(Path(f).read_text()))
    validate(config, str(REPO / "workflow" / "schemas" / "config.schema.yaml"))
    return config


def estimate_dirs(output: str) -> set[tuple[str, str]]:
    """The rule estimate jobs of a (dry) run: the ``(model, estimator)`` of each output directory."""
    return set(re.findall(r"results/estimates/([^/\s,;]+)/([^/\s,;]+?)(?=[\s,;]|$)", output, flags=re.M))


def estimate_stems(output: str, configfiles) -> list[str]:
    """File stems of every estimate the (dry) run's rule estimate jobs write: each job (a model x
    estimator directory of the output) runs its sweep (logzbench.pipeline.sweep.sweep_settings of the config)."""
    from logzbench.pipeline import sweep
    from logzbench.pipeline.jobs import setting_stem

    config = _config(configfiles)
    return [
        f"{m}/{e}/{setting_stem(s)}"
        for m, e in sorted(estimate_dirs(output))
        for s in sweep.sweep_settings(config, m, e)
    ]


def estimate_shapes(output: str, configfiles=(TEST_CONFIG,)) -> Counter:
    """Estimates of a (dry) run by their sweep axes, from the file stems of their outputs: exact,
    K x init x seed (ais, raise, ads, ...), K x seed (csl, hais, ...), init x seed (the IS family)."""
    shapes = Counter()
    for f in estimate_stems(output, configfiles):
        stem = f.rsplit("/", 1)[1]
        shape = re.sub(r"(uniform|base-rate)", "init", re.sub(r"[0-9]+", "", stem))
        shapes[
            {
                "exact": "exact",
                "K_init_seed": "K x init x seed",
                "K_seed": "K x seed",
                "init_seed": "init x seed",
                "seed": "seed",
            }[shape]
        ] += 1
    return shapes


# --------------------------------------------------------------------------- dry runs
#: Expected job counts of the dry run per config; for rule estimate the number of estimates its jobs
#: (one per model x estimator) write (exact once per model with a layer of <= exact_max_units units, csl
#: and the continuous-model estimators K x seed, the annealed binary-model estimators K x init x seed,
#: the IS family init x seed), for the trials rules the number of settings (one job runs them all).
EXPECTED_JOBS = {
    # estimate: exact 5 + csl 1 + annealed 12 + 4 + 4 + 2 + adaptive AIS 1 + hais / ais-mh 4 + bdmc 1 + ds 2
    # + sandwich 1
    "test": {
        "init_tracking": 1,
        "prepare_dataset": 2,
        "train_model": 5,
        "estimate": 5 + 1 + 23 + 5 + 2 + 1,
        "report": 1,
        "trials_gaussian": 2,
        "trials_grid": 2,
        "report_trials": 1,
        "diagnose": 5,  # one per model (logzbench.pipeline.diagnose.diagnosed_models)
        "all": 1,
    },
    # 3 RBMs (2 with exact) + DBM (exact; both inits) + DBN (exact; uniform only, no CSL); on digits-rbm16
    # AIS, reverse AIS, ADS and multinomial ADS at 3 K x base-rate x 3 seeds (Liu et al. Fig. 3 in small);
    # 6 sigma0 (Fig. 1) and 2 sigma_p x 3 references (Fig. 2)
    # + 4 continuous models on van Hateren patches (3 closed forms) x 3 estimators x 3 K
    # + IS, reverse IS and DS on digits-rbm16 (base-rate x 2 seeds)
    # + 8 learner-trained models on 3 more datasets: 7 binary (exact + AIS 2 K x 2 inits x 2 seeds) and
    #   a GRBM (exact + AIS 2 K x uniform x 2 seeds)
    # + the sandwich on digits-rbm16, mnist-rbm20 and vh-poe-laplace-8 (2 seeds each), AIS with the adaptive
    #   schedule on digits-rbm16 (1 K x base-rate x 2 seeds), BDMC on vh-linear-gaussian-8 (3 K x 1 seed)
    "config": {
        "prepare_dataset": 3 + 3 + 2,
        "train_model": 9 + 8 + 2,
        "estimate": (2 + 2 + 3)
        + 3 * 1 * 2
        + 3 * 2 * (2 * 2 * 2)
        + 2 * (2 * 2 * 2)
        + 2 * (2 * 1 * 2)
        + 4 * 3 * 3
        + 4 * 3 * 3
        + 3 * 2
        + 7 * (1 + 2 * 2 * 2)
        + (1 + 2 * 1 * 2)
        + 3 * 2
        + 2
        + 3
        # issue 38: clustered-rbm12 as every RBM, the spin glass's exact and ais-grid (2 K x 2 seeds), ais-mixture
        # (2 K x 2 seeds), smc on two models, pt and pt-grid
        + 19
        + (1 + 2 * 2)
        + 2 * 2
        + 2
        + 2,
        "trials_gaussian": 6,
        "trials_grid": 6,
        "report_trials": 1,
        # every trained model: RBMs, the DBMs and DBNs, the continuous models (a generated grid MRF is not trained)
        "diagnose": 9 + 8 + 1,
    },
    # Sohl-Dickstein & Culpepper: 17 models x HAIS at 5 K, the baselines on the 3 closed-form models
    "hais_table1": {"train_model": 17, "estimate": 3 + 17 * 5 + 2 * 3 * 5},
    # 2 DBMs x 2 methods x 3 K x 2 inits + 2 DBNs x 2 methods x 3 K x uniform; no exact, no CSL
    "raise_table2": {"prepare_dataset": 2, "train_model": 4, "estimate": 2 * 2 * 3 * 2 + 2 * 2 * 3 * 1},
    # Liu et al.: Fig. 1 13 sigma0; Fig. 2 6 sigma_p x 3 references; Figs 3-4 10 K x 10 seeds for AIS,
    # reverse AIS, ADS and multinomial ADS, and the two K = 100,000 truth runs
    "liu_fig1": {"trials_gaussian": 13, "trials_grid": 0, "train_model": 0},
    "liu_fig2": {"trials_grid": 18, "trials_gaussian": 0, "train_model": 0},
    "liu_fig3": {"train_model": 1, "estimate": 4 * 100 + 2},
    "liu_fig4": {"train_model": 1, "estimate": 4 * 100 + 2},
    # exact 2 + CSL 6 + AIS and RAISE 4 K x 2 inits on 6 RBMs (five on MNIST, omniPCD-1000 on Omniglot)
    "raise_table1": {"prepare_dataset": 2, "train_model": 6, "estimate": 2 + 6 + 6 * 2 * (4 * 2 * 1)},
    # RAISE Table 1's 20-unit RBMs under an hour: exact + CSL (1 K) + AIS 3 K x 2 inits x 3 seeds + RAISE 3 K x 2 inits
    "raise_table1_20": {"prepare_dataset": 1, "train_model": 2, "estimate": 2 * (1 + 1 + 3 * 2 * 3 + 3 * 2)},
    # AIS linear (2 K x 2 inits x 50 seeds), AIS sm14500 (one schedule: not multiplied by the K
    # list), RAISE (2 K x 2 inits x 1 seed); CSL 15 settings x 2 K (N = 100k, 200k) x 100 seeds; on the
    # 500-row per-class test subset: AIS (1 K x base-rate x 1 seed), CSL (1 K x 1 seed), exact (RBM20)
    # Li et al. (AVIL): Tables 2-3 two learners x 9 datasets, AIS at 2 K x base-rate x 2 seeds; Fig. 3 exact +
    # AIS; Fig. 4 three models (AVIL and its two ablations) at one K; Fig. 5 two learners; Fig. 6 a GRBM
    "avil_table2": {"prepare_dataset": 9, "train_model": 18, "estimate": 18 * 2 * 1 * 2},
    "avil_table3": {"prepare_dataset": 9, "train_model": 18, "estimate": 18 * 2 * 1 * 2},
    "avil_fig3": {"prepare_dataset": 1, "train_model": 1, "estimate": 1 + 2 * 1 * 2},
    "avil_fig4": {"prepare_dataset": 1, "train_model": 3, "estimate": 3 * 1 * 1 * 1},
    "avil_fig5": {"prepare_dataset": 1, "train_model": 2, "estimate": 2 * 2 * 1 * 2},
    "avil_fig6": {"prepare_dataset": 1, "train_model": 1, "estimate": 2 * 1 * 1},
    "upadhya_sastry": {
        "train_model": 3,
        "estimate": 1 + 1 + 3 * 15 * 2 * 100 + 3 * (2 * 2 * 50 + 1 * 2 * 50 + 2 * 2 * 1 + 1 * 1 * 1 + 1 * 1),
    },
}


@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_dry_run_every_config(config, tmp_path, config_jobs_tool):
    """Each config's dry run: its jobs, and the job count config/README.md's row quotes (one dry run serves
    both; tests/test_config_jobs.py checks the rows' presence, the default config's quotes and the parsers)."""
    proc = snakemake(tmp_path, "-n", configfile=config)
    counts = job_counts(proc.stdout + proc.stderr)
    said = config_jobs_tool.table_counts((REPO / "config" / "README.md").read_text()).get(config.name)
    n = config_jobs_tool.parse_total(proc.stdout + proc.stderr)
    assert said == n, (
        f"config/README.md says {said} jobs for {config.name}, the dry run {n}; "
        "refresh the counts with: python benchmarks/config_jobs.py --write"
    )
    assert counts["init_tracking"] == 1
    if counts.get("train_model"):  # a config with models gets the model report
        assert counts["report"] == 1 and counts["estimate"] >= 1
    else:  # a config of repeated-trial experiments only (liu_fig1, liu_fig2)
        assert "report" not in counts and counts["report_trials"] == 1
    out = proc.stdout + proc.stderr
    # one estimate job per model x estimator, one trials job per experiment
    assert counts.get("estimate", 0) == len(estimate_dirs(out))
    n_trials = {e: len(set(re.findall(rf"results/trials/{e}/\S+?\.csv", out))) for e in ("gaussian", "grid")}
    for e, n in n_trials.items():
        assert counts.get(f"trials_{e}", 0) == (1 if n else 0)
    for job, n in EXPECTED_JOBS.get(config.stem, {}).items():
        if job == "estimate":
            assert len(estimate_stems(out, [config])) == n
        elif job.startswith("trials_"):
            assert n_trials[job.removeprefix("trials_")] == n, (job, n_trials)
        else:
            assert counts.get(job, 0) == n, (job, counts)
    if config.stem == "test":
        assert estimate_shapes(out) == {
            "exact": 5,
            "K x init x seed": 22 + 1,
            "K x seed": 1 + 4 + 1,
            "init x seed": 2,
            "seed": 1,
        }
    assert not (tmp_path / "results").exists() and not (tmp_path / "mlflow.db").exists()


def test_default_config_and_profile_without_configfile(tmp_path):
    """No --configfile: the Snakefile falls back to the repository's config/config.yaml."""
    proc = snakemake(
        tmp_path, "-n", "--workflow-profile", str(REPO / "workflow" / "profiles" / "default"), configfile=None
    )
    assert job_counts(proc.stdout)["train_model"] == 19


def test_config_without_models_or_trials_is_refused(tmp_path):
    bad = tmp_path / "empty.yaml"
    bad.write_text("description: nothing\ntracking: {enabled: false}\n")
    proc = snakemake(tmp_path, "-n", configfile=bad, check=False)
    assert proc.returncode != 0 and "no models and no trials" in proc.stdout + proc.stderr


def test_config_overrides_and_exact_limit(tmp_path):
    """A second --configfile overrides the first (here: exact limits below the enumerated layers)."""
    override = tmp_path / "override.yaml"
    override.write_text("evaluation: {exact_max_units: 4, K: [10], inits: [uniform], seeds: [0]}\n")
    proc = snakemake(tmp_path, "-n", "--configfile", str(TEST_CONFIG), str(override), configfile=None)
    shapes = estimate_shapes(proc.stdout, [TEST_CONFIG, override])
    # RBM 64-8: 8 > 4; DBM 64-8-4: min(64 + 4, 8) = 8 > 4; DBN 64-8-4: log Z min(8, 4) = 4 <= 4 and
    # log f(v) 8 <= exact_max_log_f_units (16): only the DBN keeps its exact job
    assert shapes["exact"] == 1 + 2  # + the continuous models' closed forms (no enumeration)
    # ais + raise per model (one K, uniform, one seed); the RBM's ads, reverse-ais and adaptive AIS keep their
    # own K [10] and base-rate init, and ds its base-rate init (one seed)
    assert shapes["K x init x seed"] == 2 + 2 + 2 + 2 + 1
    assert shapes["init x seed"] == 1
    assert job_counts(proc.stdout)["estimate"] == len(estimate_dirs(proc.stdout))
    override.write_text("evaluation: {exact_max_units: 4, exact_max_log_f_units: 4, inits: [base-rate]}\n")
    proc = snakemake(tmp_path, "-n", "--configfile", str(TEST_CONFIG), str(override), configfile=None)
    out = proc.stdout + proc.stderr
    shapes = estimate_shapes(out, [TEST_CONFIG, override])
    assert shapes["exact"] == 2  # DBN: h_1 (8 units) > 4 for log f(v); the continuous closed forms stay
    # base-rate only: RBM (2 K x 2 seeds AIS, 2 K RAISE, 2 seeds ADS and reverse AIS, adaptive AIS 1) and DBM 2;
    # the DBN has nothing left (a warning)
    assert shapes["K x init x seed"] == 4 + 2 + 4 + 1 + 2
    assert "model digits-dbn8-4 (dbn) has no estimate to run" in out
    proc = snakemake(tmp_path, "-n", "--config", "device=cpu", "report={'gap_threshold': 0.5}")
    assert (
        estimate_shapes(proc.stdout)["K x init x seed"] == 18 + 4 + 1
        and len(estimate_stems(proc.stdout, [TEST_CONFIG])) == 37
    )
    assert (
        job_counts(proc.stdout)["estimate"] == 19 + 3
    )  # one job per model x estimator (+ sandwich, adaptive AIS, bdmc)


def _dbn_models(config: Path) -> list[str]:
    import yaml

    from logzbench.training import MODEL_PRESETS

    models = yaml.safe_load(config.read_text())["models"]
    return [
        m
        for m, spec in models.items()
        if {**MODEL_PRESETS.get(spec.get("preset"), {}), **(spec.get("hyperparams") or {})}.get("family") == "dbn"
    ]


@pytest.mark.parametrize("name", ["config", "raise_table2"])
def test_dbn_targets_have_no_base_rate_or_csl_jobs(name, tmp_path):
    """DBNs: the data-base-rate init is not defined and CSL is RBM-only, so neither is scheduled
    (while the config's evaluation lists both inits and, for config.yaml, CSL)."""
    config = REPO / "config" / f"{name}.yaml"
    dbns = _dbn_models(config)
    assert dbns
    proc = snakemake(tmp_path, "-n", configfile=config)
    out = proc.stdout + proc.stderr
    stems = estimate_stems(out, [config])
    for m in dbns:
        files = [f for f in stems if f.startswith(f"{m}/")]
        assert any("_uniform_seed" in f for f in files), files
        assert not [f for f in files if "base-rate" in f or "/csl/" in f], files
    assert any("base-rate" in f for f in stems)  # the other models still get them


def test_csl_listed_for_a_deep_model_is_refused(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        TEST_CONFIG.read_text().replace(
            "estimators: [exact, ais-deep, raise-deep]", "estimators: [exact, ais-deep, csl]"
        )
    )
    proc = snakemake(tmp_path, "-n", configfile=bad, check=False)
    assert proc.returncode != 0
    assert "estimator 'csl' (csl) is not available for a DBM" in proc.stdout + proc.stderr


def test_invalid_config_is_refused(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(TEST_CONFIG.read_text().replace("dataset: digits", "dataset: nosuchdata"))
    proc = snakemake(tmp_path, "-n", configfile=bad, check=False)
    assert proc.returncode != 0
    assert "unknown dataset 'nosuchdata'" in proc.stdout + proc.stderr
    bad.write_text(TEST_CONFIG.read_text().replace("chains: 20", "chains: -3"))
    proc = snakemake(tmp_path, "-n", configfile=bad, check=False)
    assert proc.returncode != 0 and "-3" in proc.stdout + proc.stderr
    bad.write_text(
        TEST_CONFIG.read_text().replace(
            "hidden_sizes: [8, 4]\n      n_epochs: 3", "hidden_sizes: [8, 4, 2]\n      n_epochs: 3"
        )
    )
    proc = snakemake(tmp_path, "-n", configfile=bad, check=False)
    assert proc.returncode != 0 and "a DBN has exactly two hidden layers" in proc.stdout + proc.stderr


def _with_learner(hyperparams: str) -> tuple[str, str]:
    """``(old, new)`` adding the model ``digits-avil`` trained by a black-box learner, whose ``hyperparams`` are
    the YAML flow mapping ``{hyperparams}``, before ``digits-rbm8`` (config/test.yaml has no learner model)."""
    old = "  digits-rbm8:\n    dataset: digits\n"
    return old, f"  digits-avil:\n    dataset: digits\n    hyperparams: {{{hyperparams}}}\n" + old


#: (text of config/test.yaml, its replacement, words of the error): each refused when the config is loaded
_CLUSTERED = "  digits:\n    source: digits\n  cl:\n    source: clustered\n    n_visible: 10\n"
BAD_CONFIGS = [
    # issue 38, item 5: the clustered source's settings, a generated grid MRF's
    (
        "  digits:\n    source: digits\n",
        _CLUSTERED + "    prototypes: 3\n    weights: [1, 2]\n",
        "dataset cl: clustered: weights must be 3 positive numbers (one mass per prototype; prototypes = 3)",
    ),
    ("  digits:\n    source: digits\n", _CLUSTERED + "    flip: 0.7\n", "0.7 is greater than the maximum of 0.5"),
    (
        "  digits:\n    source: digits\n",
        "  digits:\n    source: digits\n    prototypes: 3\n",
        "dataset digits: prototypes applies to clustered only, not to digits; remove it",
    ),
    (
        "models:\n",
        "models:\n  sg:\n    dataset: digits\n    hyperparams: {family: grid-mrf, height: 2, width: 5}\n",
        "model sg: a 2x5 grid takes rows of 10 values, but its dataset's rows have 64 (n_visible)",
    ),
    (
        "models:\n",
        "models:\n  sg:\n    dataset: digits\n    hyperparams: {family: grid-mrf, height: 8, width: 8, couplings: x}\n",
        "model sg: hyperparams.couplings must be one of ['gaussian', 'pm1'], got 'x'",
    ),
    # an estimator's test_subset, checked by the schema (the first `n_examples: 10` is the raise entry's)
    (
        "    n_examples: 10\n",
        "    n_examples: 10\n    test_subset: {per_class: 0}\n",
        "0 is less than the minimum of 1",
    ),
    (
        "    n_examples: 10\n",
        "    n_examples: 10\n    test_subset: {per_class: 5, seeds: [0]}\n",
        "Additional properties are not allowed ('seeds' was unexpected)",
    ),
    # a model's published row: an unknown paper (schema), a row the file does not have (the check)
    (
        "  digits-rbm8:\n    dataset: digits\n",
        "  digits-rbm8:\n    dataset: digits\n    paper: {burda: x}\n",
        "'burda' is not one of",
    ),
    (
        "  digits-rbm8:\n    dataset: digits\n",
        "  digits-rbm8:\n    dataset: digits\n    paper: {burda_raise: mnistCD1-21}\n",
        "model 'digits-rbm8': paper 'burda_raise' has no published row 'mnistCD1-21'",
    ),
    # pt: a ladder of one temperature
    (
        "  ais:\n    chains: 20\n",
        "  pt:\n    method: pt\n    models: [digits-rbm8]\n    temperatures: 1\n  ais:\n    chains: 20\n",
        "1 is less than the minimum of 2",
    ),
    # issue 38: the mixture reference's components without the mixture init
    (
        "  ais:\n    chains: 20\n",
        "  ais:\n    chains: 20\n    mixture_components: 4\n",
        "estimator ais: mixture_components applies to init mixture only",
    ),
    # issue 39: a gradient transition is for a user's discrete energy, not a family's model
    (
        "  ais:\n    chains: 20\n",
        "  ais:\n    chains: 20\n    transition: gwg\n",
        "estimator ais has transition gwg, which is for a user's discrete energy",
    ),
    (
        "  ais:\n    chains: 20\n",
        "  ais:\n    chains: 20\n    transition: langevin\n",
        "'langevin' is not one of ['gibbs', 'gwg', 'dmala', 'auto']",
    ),
    # issue 15: what failed only at run time, after prepare and train
    (
        "  ais:\n    chains: 20\n",
        "  ais:\n    chains: 20\n    schedule: cubic\n",
        "estimator ais: schedule 'cubic' is neither a schedule name (linear, sigmoid, sm14500, adaptive, tuned) nor a "
        "file of betas",
    ),
    (
        "  ais:\n    chains: 20\n",
        "  ais:\n    chains: 20\n    schedule: no/such/betas.txt\n",
        "estimator ais: schedule 'no/such/betas.txt' is neither a schedule name",
    ),
    (
        "      learning_rate: 0.05\n",
        "      learnin_rate: 0.05\n",
        "model digits-rbm8: unknown hyperparameter 'learnin_rate' (models.digits-rbm8.hyperparams.learnin_rate); "
        "did you mean 'learning_rate'?",
    ),
    (
        "    threshold: 0.5\n    seed: 0\n",
        "    threshold: 0.5\n    seed: 0\n    n_train: 5000\n",
        "dataset digits: n_train=5000 is more than the 1437 training rows of digits",
    ),
    (
        "    n_test_images: 2\n",
        "    n_test_images: 6\n",
        "dataset vh-4: n_test_images=6 leaves no training image of n_images=6",
    ),
    (
        "    n_components: 4\n",
        "    n_components: 300\n",
        "dataset vh-4: n_components=300 is more than the 256 pixels of a 16x16 patch",
    ),
    ("    chains: 20\n", "    chains: 1000000000\n", "1000000000 is greater than the maximum of 10000000"),
    ("    threshold: 0.5\n", "    threshold: 1.0\n", "1.0 is greater than or equal to the maximum of 1"),
    # issue 22: a learner's values a training job refused only after the data were prepared
    # (logzbench.training.learner_options, the learners' own rules), and a test_subset no label can give
    (
        *_with_learner("learner: avil, n_hidden: 4, z: bogus"),
        "model digits-avil: unknown z 'bogus'; choose one of ['continuous', 'discrete']",
    ),
    (*_with_learner("learner: avil, n_hidden: 4, iterations: 0"), "model digits-avil: iterations must be >= 1, got 0"),
    (
        *_with_learner("learner: nvil, n_hidden: 4, iterations: many"),
        "model digits-avil: iterations must be an integer, got 'many'",
    ),
    (
        *_with_learner("learner: avil, n_hidden: 4, lr: -1"),
        "model digits-avil: lr must be a finite number in (0.0, inf), got -1",
    ),
    (
        *_with_learner("learner: avil, n_hidden: 4, select: bogus"),
        "model digits-avil: unknown select 'bogus'; choose one of ['last', 'best-valid']",
    ),
    (
        *_with_learner("learner: avil, n_hidden: 4, betas: [2, 3]"),
        "model digits-avil: betas[0] must be a finite number in [0.0, 1.0), got 2",
    ),
    (*_with_learner("learner: nvil, n_hidden: 4, betas: 0.5"), "model digits-avil: betas must be a pair"),
    (*_with_learner("learner: avil, n_hidden: 4, K1: 2.5"), "model digits-avil: K1 must be an integer, got 2.5"),
    (
        *_with_learner("learner: avil, n_hidden: 4, ais_every: 150"),
        "model digits-avil: ais_every=150 must be a multiple of log_every=100",
    ),
    (
        *_with_learner("learner: avil, n_hidden: 4, exact_max_units: 40"),
        "model digits-avil: exact_max_units must be <= 24, got 40",
    ),
    (
        *_with_learner("learner: avil, n_hidden: 4, figure_samples: 0"),
        "model digits-avil: figure_samples must be >= 1, got 0",
    ),
    (
        "    n_examples: 10\n",
        "    n_examples: 10\n    test_subset: {per_class: 1000000}\n",
        "estimator raise: test_subset per_class=1000000 is more than model digits-rbm8's dataset digits (digits) can "
        "give: its 360 test rows of 10 labels leave at most 36 rows to its smallest label",
    ),
    # issue 22, item 9: a tracking URI MLflow cannot use, refused at load (not as MLflow's error in a job log)
    ("  uri: null ", '  uri: "not a uri" ', "tracking.uri 'not a uri' is not a tracking URI logzbench can use"),
    # issue 37, item 5: NaN (YAML .nan) passed every range check of the schema (a comparison with NaN is False)
    (
        "    target_width: 1.0\n",
        "    target_width: .nan\n",
        "estimator sandwich.target_width: nan is not a finite number",
    ),
    (
        "    target_width: 1.0\n",
        "    target_width: 1.0\n    confidence: .nan\n",
        "estimator sandwich.confidence: nan is not a finite number",
    ),
    (
        "    schedule: adaptive\n",
        "    schedule: adaptive\n    target_ess: .nan\n",
        "estimator ais-adaptive.target_ess: nan is not a finite number",
    ),
    (  # an estimator's own option (smc's, declared in its registry entry) is checked as the shipped ones
        "estimators:\n  exact: {}\n",
        "estimators:\n  exact: {}\n  smc: {method: smc, ess_threshold: 1.5}\n",
        "estimator smc.ess_threshold: 1.5 is greater than or equal to the maximum of 1",
    ),
    ("    step_size: 0.05\n", "    step_size: .nan\n", "estimator hais.step_size: nan is not a finite number"),
    ("    step_size: 0.05\n", "    step_size: .inf\n", "estimator hais.step_size: inf is not a finite number"),
    (
        "      learning_rate: 0.05\n",
        "      learning_rate: .nan\n",
        "config.models.digits-rbm8.hyperparams.learning_rate: nan is not a finite number",
    ),
    ("    threshold: 0.5\n", "    threshold: .nan\n", "config.datasets.digits.threshold: nan is not a finite number"),
    ("  gap_threshold: 1.0\n", "  gap_threshold: .nan\n", "config.report.gap_threshold: nan is not a finite number"),
    # issue 38, item 4: the tuned schedule doubles K from a start without a length of its own, to a K of at least 16
    (
        "  ais:\n    chains: 20\n",
        "  ais:\n    chains: 20\n    schedule: tuned\n    tuned_start: sm14500\n",
        "tuned_start (--tuned-start) 'sm14500'",
    ),
    (
        "  ais:\n    chains: 20\n",
        "  ais:\n    chains: 20\n    schedule: tuned\n",
        "K (--steps) = 10 is too small to double from",
    ),
    (
        "  sandwich:             # a bracket on log Z and the test log-likelihood, K doubled from 10 (issue 23)\n",
        "  sandwich:\n    schedule: tuned\n",
        "estimator sandwich: sandwich doubles K itself, and the tuned schedule is tuned for one K",
    ),
    # smc takes the tuned schedule at its one K, which it needs
    (
        "  ais:\n    chains: 20\n",
        "  smc:\n    method: smc\n    models: [digits-rbm8]\n    schedule: tuned\n  ais:\n    chains: 20\n",
        "estimator smc: the tuned schedule needs K, the length of its last round",
    ),
    ("  z: 2.0\n", "  z: 2.0\n  exact_tolerance: -0.1\n", "-0.1 is less than the minimum of 0"),
    (
        "    max_sweeps: 100000\n",
        "    max_sweeps: 100000\n    time_budget: 0\n",
        "0 is less than or equal to the minimum of 0",
    ),
    # issue 37, item 11: 100,000 seeds took 106 s and 827 MB to dry-run (each seed an estimate of every sweep)
    (
        "  seeds: [0, 1]\n",
        f"  seeds: {list(range(10_001))}\n",
        "config.evaluation.seeds: 10,001 values are more than the 10,000 allowed",
    ),
]


def _bad_config(tmp_path, old, new) -> Path:
    bad = tmp_path / "bad.yaml"
    text = TEST_CONFIG.read_text()
    assert old in text
    bad.write_text(text.replace(old, new, 1))
    return bad


@pytest.mark.parametrize("old, new, why", BAD_CONFIGS, ids=[w[:40] for _, _, w in BAD_CONFIGS])
def test_bad_config_is_refused_when_loaded(tmp_path, monkeypatch, old, new, why):
    """What the workflow does with the config Snakemake loads (common.smk: plan.from_workflow_config on
    Snakemake's own reading of the file, in the working directory) refuses it, naming the problem; that a
    refusal stops the dry run with the message is checked on a spread of the cases below."""
    from snakemake.common.configfile import load_configfile

    from logzbench.errors import ConfigError, TrackingError
    from logzbench.pipeline import plan

    config = load_configfile(str(_bad_config(tmp_path, old, new)))
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises((ConfigError, TrackingError)) as refused:
        plan.from_workflow_config(config, schema)
    assert why in str(refused.value) and "\n" not in str(refused.value), str(refused.value)


#: every fifth refusal also through a real dry run: Snakemake stops and prints the one line
DRY_RUN_REFUSALS = BAD_CONFIGS[::5]


@pytest.mark.parametrize("old, new, why", DRY_RUN_REFUSALS, ids=[w[:40] for _, _, w in DRY_RUN_REFUSALS])
def test_bad_config_stops_the_dry_run(tmp_path, old, new, why):
    proc = snakemake(tmp_path, "-n", configfile=_bad_config(tmp_path, old, new), check=False)
    assert proc.returncode != 0 and why in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-2000:]


#: (text of config/test.yaml, its replacement): a YAML alias bomb (a billion values in a few lines) in each place
ALIAS_BOMBS = [
    ("  seeds: [0, 1]\n", f"  seeds: {yaml_alias_bomb()}\n"),  # config key evaluation
    ("tracking:\n", f"junk: {yaml_alias_bomb()}\ntracking:\n"),  # an unknown top-level key
    ("description: tiny end-to-end test configuration\n", f"description: {yaml_alias_bomb()}\n"),
]


@pytest.mark.parametrize("old, new", ALIAS_BOMBS, ids=["seeds", "unknown key", "description"])
def test_alias_bomb_is_refused_in_one_line(tmp_path, old, new):
    """Issue 37, item 6: a YAML alias bomb ran the dry run at 100 % CPU (every walk over the config expands it)
    or printed megabytes of it; it is refused by counting each distinct list once, before any walk, in one line.
    (A bomb of nested mappings is expanded by Snakemake itself as it merges the config files: not ours.)"""
    bad = tmp_path / "bad.yaml"
    text = TEST_CONFIG.read_text()
    assert old in text
    bad.write_text(text.replace(old, new, 1))
    proc = snakemake(tmp_path, "-n", configfile=bad, check=False, timeout=120)
    out = proc.stdout + proc.stderr
    key = {"  seeds": "evaluation", "tracking": "junk", "description": "description"}[old.split(":")[0]]
    assert proc.returncode != 0
    assert f"config key {key}: the config holds more than 1,000,000 values once its YAML aliases" in out, out[-2000:]
    assert len(out) < 5000, out[-2000:]


def test_quoted_numeric_model_name_is_a_name(tmp_path):
    """Issue 37, item 7: a model named "2024" (quoted in the YAML) listed in an estimator's `models` was turned into
    the number 2024 by the coercion meant for --config values (and refused: "not of type 'string'")."""
    good = tmp_path / "good.yaml"
    text = TEST_CONFIG.read_text()
    model = "  '2024':\n    dataset: digits\n    hyperparams: {n_hidden: 4}\n"
    text = text.replace("  digits-rbm8:\n", model + "  digits-rbm8:\n", 1)
    text = text.replace("    chains: 20\n", "    chains: 20\n    models: ['2024', digits-rbm8]\n", 1)  # the ais entry
    good.write_text(text)
    proc = snakemake(tmp_path, "-n", configfile=good)
    assert ("2024", "ais") in estimate_dirs(proc.stdout)
    # --config values are still coerced where they are numbers (Snakemake gives the strings '0', '3'), and names
    # stay names there too
    proc = snakemake(
        tmp_path, "-n", "--config", "evaluation={'seeds': [0, 3]}", "estimators={'ais': {'models': [2024]}}",
        configfile=good,
    )  # fmt: skip
    assert ("2024", "ais") in estimate_dirs(proc.stdout)  # (a number 2024 would be refused: not a name)


@pytest.mark.skipif(
    importlib.util.find_spec("snakemake_executor_plugin_slurm") is None,
    reason="snakemake-executor-plugin-slurm is not installed",
)
def test_slurm_profile_dry_run(tmp_path):
    """The SLURM profile takes each job's resources from the rules (threads -> cpus_per_task, the
    config's runtime / mem_mb, a GPU for device cuda|auto) and only fills in what a config leaves
    unset.  tests/test_slurm.py checks the sbatch command lines and runs the workflow on SLURM."""
    profile = str(REPO / "workflow" / "profiles" / "slurm")
    # config/test.yaml (threads 1, device cpu), each job its own SLURM job
    proc = snakemake(tmp_path, "-n", "--workflow-profile", profile, "--config", "cluster_group=none")
    res = re.findall(r"resources: (.*)", proc.stdout)
    assert res and all(
        "cpus_per_task=1" in r and "runtime=60" in r and "gres" not in r for r in res if "cpus_per_task" in r
    ), res
    # a dry run caps threads at --cores (1 unless given); the SLURM executor does not
    proc = snakemake(
        tmp_path,
        "-n",
        "--cores",
        "256",
        "--workflow-profile",
        profile,
        configfile=REPO / "config" / "raise_table1.yaml",
    )
    jobs = Counter()
    for block in re.split(r"\n(?=rule \w+:)", proc.stdout):
        m = re.match(r"rule (\w+):", block)
        res = re.search(r"resources: (.*)", block)
        if m and res and "cpus_per_task" in res.group(1):
            r = dict(x.split("=", 1) for x in res.group(1).split(", "))
            jobs[(m.group(1), r["cpus_per_task"], r["runtime"], r["mem_mb"], r.get("gres"))] += 1
    # raise_table1: threads {train: 4, estimate: 4, exact: 8}, resources train 720 min / 8 GB,
    # estimate 1,440 min / 16 GB, exact 240 min / 16 GB, device auto
    assert jobs == {
        ("prepare_dataset", "1", "60", "4000", None): 2,
        ("train_model", "4", "720", "8000", "gpu:1"): 6,
        ("estimate", "4", "1440", "16000", "gpu:1"): 18,
        ("estimate", "8", "240", "16000", "gpu:1"): 2,
        ("diagnose", "4", "1440", "16000", "gpu:1"): 6,  # the estimate step's, on the config's device
        ("report", "1", "60", "4000", None): 1,
    }, jobs


@pytest.mark.skipif(
    importlib.util.find_spec("snakemake_executor_plugin_slurm") is None,
    reason="snakemake-executor-plugin-slurm is not installed",
)
@pytest.mark.parametrize("grouping", ["none", "model", "workflow"])
def test_cluster_group_dry_run(tmp_path, grouping):
    """config `cluster_group` on the SLURM profile: none = no group job; model = one per model, one for the
    datasets (the profile's group-components join them), one for the report and the trials; workflow = one.
    Under a grouping no rule asks for cpus_per_task (it would be summed over the group: --cores sizes it)."""
    config = yaml.safe_load(TEST_CONFIG.read_text())
    profile = str(REPO / "workflow" / "profiles" / "slurm")
    proc = snakemake(tmp_path, "-n", "--workflow-profile", profile, "--config", f"cluster_group={grouping}")
    groups = sorted(re.findall(r"Group job (\S+) \(jobs", proc.stdout))
    expected = {
        "none": [],
        "model": sorted(["datasets", "report", *(f"model-{m}" for m in config["models"])]),
        "workflow": ["logzbench"],
    }[grouping]
    assert groups == expected, groups
    assert ("cpus_per_task" in proc.stdout) == (grouping == "none")


# --------------------------------------------------------------------------- real run
@pytest.mark.start_first
def test_real_run_end_to_end(tmp_path):
    """config/test.yaml on CPU: every run tracked, report tables, re-run without duplicates,
    HTML report.  One test (not several sharing a fixture) so that pytest-xdist never runs
    the workflow twice."""
    snakemake(tmp_path)
    check_job_usage(tmp_path)
    check_tracked_runs(tmp_path)
    check_report_tables(tmp_path)
    check_repeated_trials(tmp_path)
    check_continuous_models(tmp_path)
    check_diagnostics(tmp_path)
    check_workflow_equals_command_line(tmp_path)
    check_rerun_does_not_duplicate_runs(tmp_path)
    check_mirror_named_another_way_reruns_nothing(tmp_path)
    check_damaged_outputs_are_rebuilt(tmp_path)
    check_html_report(tmp_path)


def check_diagnostics(real_run):
    """The per-model diagnostics (rule diagnose) and their report: the RBM's hidden mass enumerated and its
    per-class log-likelihoods on the exact log Z, summing back to the overall mean; the DBM and DBN say why
    they have none; the samples and filters figures."""
    res = real_run / "results"
    rbm = json.loads((res / "diagnostics" / "digits-rbm8.json").read_text())
    assert rbm["hidden_mass"]["method"] == "exact" and rbm["per_class"]["log_z_source"] == "exact"
    # over all test rows, the per-class table's overall mean is the exact estimator's mean test log-likelihood
    exact = json.loads((res / "estimates" / "digits-rbm8" / "exact" / "exact.json").read_text())["result"]
    assert rbm["per_class"]["overall"]["mean_test_ll"] == pytest.approx(exact["mean_log_likelihood"], abs=1e-6)
    for deep in ("digits-dbm8-4", "digits-dbn8-4"):
        assert "not_available" in json.loads((res / "diagnostics" / f"{deep}.json").read_text())["per_class"]
    rep = res / "report"
    hm = pd.read_csv(rep / "table_hidden_mass.csv")
    assert list(hm["model"]) == ["digits-rbm8"] and 0 < hm["top1"].iloc[0] <= hm["top100"].iloc[0] <= 1
    pc = pd.read_csv(rep / "table_per_class.csv", keep_default_na=False)
    assert set(pc["model"]) == {"digits-rbm8"} and len(pc) == 10 + 1  # digits: 10 classes and `all`
    classes, overall = pc[pc["class"] != "all"], pc[pc["class"] == "all"].iloc[0]
    weighted = (classes["n"] * classes["mean_test_ll"]).sum() / overall["n"]
    assert weighted == pytest.approx(overall["mean_test_ll"], abs=1e-6)
    for name in (
        "digits-rbm8_samples",
        "digits-rbm8_annealed_samples",
        "vh-poe-laplace-4_filters",
        "vh-linear-gaussian-4_filters",
    ):
        assert (rep / "plots" / f"{name}.png").stat().st_size > 1000, name


def check_job_usage(real_run):
    """Beside every rule's benchmark (its own process: under the warm start a thin client), the job's own
    process's usage (logzbench.pipeline.usage): <benchmark>.job.tsv, measured in the forked process."""
    from logzbench.pipeline.usage import USAGE_COLUMNS, read_usage

    bench = real_run / "results" / "benchmarks"
    rules = sorted(p for p in bench.rglob("*.tsv") if not p.name.endswith(".job.tsv"))
    assert len(rules) == 34 + 5, rules  # every job but `all` (+ a diagnose job per model)
    for p in rules:
        row = read_usage(p.with_name(p.name[: -len(".tsv")] + ".job.tsv"))
        assert tuple(row) == USAGE_COLUMNS and row["warm"] == "True", (p, row)
        assert float(row["s"]) > 0 and float(row["max_rss"]) > 0, (p, row)


#: ``logzbench estimate`` flag of each estimator option a record holds
_CLI_FLAGS = {
    "K": "--steps",
    "schedule": "--schedule",
    "chains": "--chains",
    "init": "--init",
    "n_examples": "--n-examples",
    "is_samples": "--is-samples",
    "csl_mode": "--csl-mode",
    "burn_in": "--burn-in",
    "thin": "--thin",
    "samples_per_chain": "--samples-per-chain",
    "step_size": "--step-size",
    "gamma": "--gamma",
    "mh_sigma": "--mh-sigma",
    "proposal_scale": "--proposal-scale",
    "sweeps_per_beta": "--sweeps-per-beta",
    "pilot_chains": "--pilot-chains",
    "target_ess": "--target-ess",
    "tune_rounds": "--tune-rounds",
    "tuned_start": "--tuned-start",
    "target_width": "--target-width",
    "max_sweeps": "--max-sweeps",
    "confidence": "--confidence",
    "time_budget": "--time-budget",
}


def check_workflow_equals_command_line(real_run):
    """For one record of every estimator method in the sweep, ``logzbench estimate`` on the same model
    file and dataset with the record's settings gives exactly the recorded numbers (same seed, same
    estimate): the workflow's plumbing (config -> sweep -> job -> api) passes every option through."""
    import torch

    from logzbench import cli, registry

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the workflow's jobs (threads: 1): the same summation order
    try:
        seen = set()
        for path in sorted((real_run / "results" / "estimates").rglob("*.json")):
            rec = json.loads(path.read_text())
            if rec["method"] in seen:
                continue
            seen.add(rec["method"])
            data = real_run / "results" / "data" / f"{rec['dataset']}.npz"
            argv = [
                "estimate",
                str(real_run / "results" / "models" / f"{rec['model']}.npz"),
                "--estimator",
                rec["method"],
                "--data",
                str(data),
                "--json",
                str(real_run / "cli.json"),
            ]
            if registry.family(rec["family"]).data_kind == "binary":
                argv += ["--train-data", str(data)]
            for k in registry.estimator(rec["method"]).options:
                if rec.get(k) is not None and k in _CLI_FLAGS:
                    argv += [_CLI_FLAGS[k], str(rec[k])]
            if rec.get("seed") is not None:
                argv += ["--seed", str(rec["seed"])]
            assert cli.main(argv) == 0, argv
            got = json.loads((real_run / "cli.json").read_text())
            for k in (
                "log_z",
                "log_z_stderr",
                "ess",
                "mean_log_likelihood",
                "mean_log_likelihood_stderr",
                "n_sweeps",
                "total_sweeps",
            ):
                assert got[k] == rec["result"][k], (rec["key"], k, got[k], rec["result"][k])
        assert {
            "exact",
            "ais",
            "raise",
            "csl",
            "ads",
            "reverse-ais",
            "ds",
            "hais",
            "ais-mh",
            "sandwich",
            "bdmc",
        } <= seen, seen
    finally:
        torch.set_num_threads(threads)
        (real_run / "cli.json").unlink(missing_ok=True)


def _runs(workdir: Path, kind: str):
    from logzbench import tracking

    return tracking.find_runs(uri="sqlite:///" + str(workdir / "mlflow.db"), experiment_name=EXPERIMENT, kind=kind)


def check_tracked_runs(real_run):
    train, est = _runs(real_run, "train"), _runs(real_run, "estimate")
    assert len(train) == N_TRAIN and len(est) == N_ESTIMATES
    keys = [r.data.tags["logzbench.key"] for r in est]
    assert len(set(keys)) == N_ESTIMATES
    for r in est:
        m, p = r.data.metrics, r.data.params
        assert r.info.status == "FINISHED"
        assert {"seconds", "mean_test_ll"} <= set(m), (p, m)
        assert {"model", "dataset", "estimator", "method", "device", "code_version"} <= set(p)
        assert ("seed" in p) == (p["estimator"] != "exact")
        if p["estimator"] == "ais" or (p["estimator"] == "exact" and not p["model"].startswith("vh-linear")):
            assert "log_z" in m
        if p["estimator"] in ("ais", "raise"):
            assert {"K", "init", "chains", "schedule"} <= set(p) and "ess" in m and "sweeps_per_second" in m
        if p["estimator"] == "csl":
            assert "init" not in p
        assert "logzbench.flagged" in r.data.tags
        family = r.data.tags["logzbench.family"]
        assert (
            family
            == {
                "digits-rbm8": "rbm",
                "digits-dbm8-4": "dbm",
                "digits-dbn8-4": "dbn",
                "vh-poe-laplace-4": "poe-laplace",
                "vh-linear-gaussian-4": "linear-gaussian",
            }[p["model"]]
        )
        if family == "dbn":
            assert p.get("init", "uniform") == "uniform" and p["method"] != "csl"
    by_model = {r.data.params["model"]: r for r in train}
    assert set(by_model) == {
        "digits-rbm8",
        "digits-dbm8-4",
        "digits-dbn8-4",
        "vh-poe-laplace-4",
        "vh-linear-gaussian-4",
    }
    assert by_model["digits-dbm8-4"].data.params["family"] == "dbm"
    assert by_model["digits-dbn8-4"].data.params["hidden_sizes"] == "[8, 4]"
    assert by_model["vh-poe-laplace-4"].data.params["family"] == "poe-laplace"
    t = by_model["digits-rbm8"]
    from logzbench import tracking

    client = tracking.get_client("sqlite:///" + str(real_run / "mlflow.db"))
    hist = client.get_metric_history(t.info.run_id, "train_reconstruction_error")
    assert sorted(h.step for h in hist)[-1] == 3  # one point per epoch, step = epoch
    arts = {a.path for a in client.list_artifacts(t.info.run_id)}
    assert {"digits-rbm8.history.csv", "digits-rbm8.history.png"} <= arts
    ais = next(r for r in est if r.data.params["estimator"] == "ais")
    arts = sorted(a.path for a in client.list_artifacts(ais.info.run_id))
    assert arts[0].endswith(".npz") and tracking.SCHEDULE_ARTIFACT in arts  # the per-chain arrays, the schedule
    # the sandwich: its bracket as metrics and tags (the JSON's names), its rounds of K doubling as an artifact
    (sandwich,) = [r for r in est if r.data.params["estimator"] == "sandwich"]
    assert {
        "log_z_lower",
        "log_z_upper",
        "log_z_width",
        "mean_log_likelihood_lower",
        "mean_log_likelihood_upper",
    } <= set(sandwich.data.metrics)
    assert sandwich.data.tags["log_z_lower_estimator"] == "ais" and "width_reached" in sandwich.data.tags
    assert sandwich.data.params["schedule"] == "adaptive"  # the sandwich's own default
    arts = {a.path for a in client.list_artifacts(sandwich.info.run_id)}
    assert {tracking.BRACKET_HISTORY_ARTIFACT, tracking.SCHEDULE_ARTIFACT} <= arts
    (adaptive,) = [r for r in est if r.data.params["estimator"] == "ais-adaptive"]
    assert adaptive.data.params["pilot_chains"] == "20" and "pilot_sweeps" in adaptive.data.metrics


def check_report_tables(real_run):
    rep = real_run / "results" / "report"
    per_run = pd.read_csv(rep / "per_run.csv")
    assert len(per_run) == N_ESTIMATES
    assert per_run["mlflow_run_id"].notna().all()
    summary = pd.read_csv(rep / "summary.csv", keep_default_na=False)
    # RBM: exact 1 + ais 2 K x 2 inits + raise 2 K x 2 inits + csl 1 + ads 1 + reverse-ais 1 + ds 1 (seeds
    # aggregated); DBM 1 + 2 + 2; DBN 1 + 1 + 1
    # + the sandwich and the adaptive AIS; + continuous: 2 models x (exact, hais, ais-mh) and BDMC
    assert len(summary) == 13 + 2 + 5 + 3 + 7
    ds = summary[summary["estimator"] == "ds"]
    assert len(ds) == 1 and ds["n_seeds"].iloc[0] == 2
    # every DS run agrees with the exact log Z within 4 of its own reported standard errors
    ds_runs = per_run[per_run["estimator"] == "ds"]
    assert len(ds_runs) == 2 and (ds_runs["log_z_minus_exact"].abs() < 4 * ds_runs["log_z_stderr"]).all(), ds_runs
    ais = summary[summary["estimator"] == "ais"]
    assert set(ais["n_seeds"]) == {2}
    table1 = pd.read_csv(rep / "table1.csv")
    assert list(zip(table1["schedule"], table1["K"])) == [("adaptive", 10), ("linear", 10), ("linear", 50)]
    assert set(table1["model"]) == {"digits-rbm8"}
    assert {
        "exact",
        "csl",
        "raise_uniform",
        "ais_uniform",
        "gap_uniform",
        "raise_base-rate",
        "ais_base-rate",
        "gap_base-rate",
        "flags",
    } <= set(table1.columns)
    assert table1["exact"].notna().all()
    gap = table1["ais_uniform"] - table1["raise_uniform"]
    assert (gap - table1["gap_uniform"]).abs().max() < 1e-3  # CSV keeps 6 significant digits
    assert (rep / "plots" / "digits-rbm8.png").stat().st_size > 1000
    # deep models: RAISE Table 2 layout
    table2 = pd.read_csv(rep / "table2.csv")
    assert list(zip(table2["model"], table2["family"], table2["K"])) == [
        ("digits-dbm8-4", "dbm", 10),
        ("digits-dbn8-4", "dbn", 10),
    ]
    assert list(table2["architecture"]) == ["64-8-4", "64-8-4"]
    assert table2["exact"].notna().all() and table2["log_f_is"].notna().all()
    assert table2[["raise_uniform", "ais_uniform", "gap_uniform", "gap_uniform_se"]].notna().all().all()
    assert (table2["gap_uniform"] - (table2["ais_uniform"] - table2["raise_uniform"])).abs().max() < 1e-3
    dbm, dbn = table2.iloc[0], table2.iloc[1]
    assert pd.notna(dbm["ais_base-rate"]) and pd.notna(dbm["log_f_mean_field"])
    assert pd.isna(dbn["ais_base-rate"]) and pd.isna(dbn["raise_base-rate"])
    for m in ("digits-dbm8-4", "digits-dbn8-4"):
        assert (rep / "plots" / f"{m}.png").stat().st_size > 1000
    report = json.loads((rep / "report.json").read_text())
    assert report["n_runs"] == N_ESTIMATES
    assert [r["model"] for r in report["table2"]] == ["digits-dbm8-4", "digits-dbn8-4"]
    # the flagged settings are tagged in MLflow
    flagged = {
        r.data.tags["logzbench.key"]
        for r in _runs(real_run, "estimate")
        if r.data.tags.get("logzbench.flagged") == "true"
    }
    expected = set(per_run.loc[per_run["flags"].notna(), "key"])
    assert flagged == expected
    # the brackets: the sandwich on the RBM (log Z and the test log-likelihood against their exact values) and
    # BDMC on the linear-Gaussian model (its simulated points' closed form)
    bracket = pd.read_csv(rep / "table_bracket.csv")
    from logzbench.report import BRACKET_COLUMNS

    assert list(bracket.columns) == BRACKET_COLUMNS
    assert sorted(zip(bracket["model"], bracket["estimator"], bracket["quantity"])) == [
        ("digits-rbm8", "sandwich", "log_z"),
        ("digits-rbm8", "sandwich", "mean_log_likelihood"),
        ("vh-linear-gaussian-4", "bdmc", "mean_log_likelihood"),
    ]
    assert bracket[["lower", "upper", "width", "exact", "K", "total_sweeps"]].notna().all().all()
    assert set(bracket["contains_exact"].astype(str)) <= {"True", "False"}
    for m in ("digits-rbm8", "vh-linear-gaussian-4"):
        assert (rep / "plots" / f"{m}_bracket.png").stat().st_size > 1000
    assert [r["model"] for r in report["table_bracket"]] == sorted(bracket["model"])


def check_repeated_trials(real_run):
    """Liu et al. Figs 1-2 in miniature (every trial tracked) and the bias / MSE over seeds of the
    annealed log Z estimators against the exact value (Figs 3-4 layout)."""
    from logzbench import tracking

    runs = _runs(real_run, "trials")
    assert len(runs) == N_TRIAL_SETTINGS
    client = tracking.get_client("sqlite:///" + str(real_run / "mlflow.db"))
    for r in runs:
        steps = {m.step for m in client.get_metric_history(r.info.run_id, "error/ds")}
        assert steps == set(range(int(r.data.params["n_trials"])))
    rep = real_run / "results" / "report"
    for name, n_settings in (("gaussian", 2), ("grid", 2)):
        s = pd.read_csv(rep / "trials" / f"{name}.csv")
        assert {"bias", "mse", "coverage", "n_trials"} <= set(s.columns)
        assert len(s[s["method"] == "ds"]) == n_settings
        assert (rep / "trials" / f"{name}.png").stat().st_size > 1000
    grid = pd.read_csv(rep / "trials" / "grid.csv")
    assert (grid.loc[grid["method"] == "trw-bound", "bias"] >= 0).all()  # an upper bound in every trial
    t = pd.read_csv(rep / "annealed_trials.csv")
    assert (t["truth_source"] == "exact").all()  # every test model has an exact log Z
    assert set(t["model"]) == {"digits-rbm8", "digits-dbm8-4", "digits-dbn8-4"}
    rbm = t[(t["model"] == "digits-rbm8") & (t["K"] == 10) & (t["init"] == "base-rate") & (t["schedule"] == "linear")]
    assert set(rbm["method"]) == {"ais", "ads", "reverse-ais", "avg-ais-reverse-ais"}
    assert (rbm["n_trials"] == 2).all()
    assert (rep / "plots" / "digits-rbm8_bias_mse.png").stat().st_size > 1000


def check_continuous_models(real_run):
    """van Hateren patches -> PoE (MPF) and linear-Gaussian (EM) models -> closed forms, HAIS and AIS-MH ->
    the Table 1 layout and the model-size plot."""
    rep = real_run / "results" / "report"
    t = pd.read_csv(rep / "table_continuous.csv")
    assert list(t["model"]) == ["vh-linear-gaussian-4", "vh-poe-laplace-4"]
    assert t[["exact", "hais", "hais_se", "ais-mh", "spread"]].notna().all().all()
    assert (t["hais_K"] == 20).all() and (t["n_test"] == 20).all() and (t["size"] == 4).all()
    # BDMC's bracket of the linear-Gaussian model's mean log-likelihood (on simulated points); none for the PoE
    lin, poe = t.set_index("model").loc["vh-linear-gaussian-4"], t.set_index("model").loc["vh-poe-laplace-4"]
    assert lin[["bracket_lower", "bracket_upper", "bracket_width"]].notna().all()
    assert lin["bracket_estimator"] == "bdmc (simulated data)" and pd.isna(poe["bracket_lower"])
    assert (rep / "plots" / "model_size.png").stat().st_size > 1000
    assert (rep / "plots" / "vh-poe-laplace-4.png").stat().st_size > 1000


def check_rerun_does_not_duplicate_runs(real_run):
    """Re-running a sweep replaces its MLflow runs (one live run per setting) and its files."""
    target = "results/estimates/digits-rbm8/ais/K10_uniform_seed0.json"
    before = json.loads((real_run / target).read_text())["mlflow_run_id"]
    snakemake(real_run, "--forcerun", "results/estimates/digits-rbm8/ais")
    est = _runs(real_run, "estimate")
    assert len(est) == N_ESTIMATES
    same = [r for r in est if r.data.tags["logzbench.key"] == "estimate/digits-rbm8/ais/K10/uniform/seed0"]
    assert len(same) == 1
    after = json.loads((real_run / target).read_text())["mlflow_run_id"]
    assert same[0].info.run_id == after != before
    assert len(_runs(real_run, "train")) == N_TRAIN
    assert len(_runs(real_run, "report")) == 1
    # nothing left to do
    proc = snakemake(real_run, "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def check_mirror_named_another_way_reruns_nothing(real_run):
    """The data mirror is not a param of any rule (issue 15): the same mirror through a symbolic link, given by
    the environment or by the config, schedules no job."""
    link = real_run / "mirror-link"
    link.symlink_to(Path(_env()["LOGZBENCH_DATA_MIRROR"]).resolve(), target_is_directory=True)
    proc = snakemake(real_run, "-n", env={"LOGZBENCH_DATA_MIRROR": str(link)})
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-3000:]
    proc = snakemake(real_run, "-n", "--config", f"data_mirror={link}", env={"LOGZBENCH_DATA_MIRROR": None})
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-3000:]
    link.unlink()


def check_damaged_outputs_are_rebuilt(real_run):
    """A deleted per-chain .npz and a truncated model file with its old time stamp (issue 15): Snakemake itself
    sees neither (it sees the estimate's directory, and keeps an up-to-date output), so the run stops before
    any job, naming each file and the --forcerun that rebuilds it; that rebuilds them and what depends on
    them, replacing their MLflow runs (none duplicated)."""
    import zipfile

    npz = real_run / "results" / "estimates" / "digits-rbm8" / "ais" / "K10_uniform_seed0.npz"
    model = real_run / "results" / "models" / "digits-dbn8-4.npz"
    npz.unlink()
    st = model.stat()
    model.write_bytes(model.read_bytes()[: st.st_size // 2])
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns))
    proc = snakemake(real_run, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "results/models/digits-dbn8-4.npz is damaged (not a complete .npz archive; truncated?)" in out, out[-3000:]
    assert "results/estimates/digits-rbm8/ais/K10_uniform_seed0.npz is missing" in out
    targets = ["results/models/digits-dbn8-4.npz", "results/estimates/digits-rbm8/ais"]
    assert f"rebuild them all with: snakemake --forcerun {' '.join(targets)}" in out
    assert model.stat().st_size < st.st_size and not npz.exists()  # no job ran
    snakemake(real_run, "--forcerun", *targets)
    assert npz.is_file() and zipfile.is_zipfile(model)
    est = _runs(real_run, "estimate")
    assert len(est) == N_ESTIMATES and len({r.data.tags["logzbench.key"] for r in est}) == N_ESTIMATES
    assert len(_runs(real_run, "train")) == N_TRAIN and len(_runs(real_run, "report")) == 1
    proc = snakemake(real_run, "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def check_html_report(real_run):
    out = real_run / "report.html"
    snakemake(real_run, "--report", str(out))
    assert out.stat().st_size > 10_000
