"""The extension points hold: an estimator with an option of its own and a binary model family,
added at run time as one module plus one registry entry each, reach the API, the command line,
the config check and the workflow's sweep, with nothing else edited.

The plugin module is written to a temporary directory and imported by its dotted name, as a
user's package would be; the registry and option tables are restored after each test.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest

from logzbench import options, registry
from logzbench.options import Option

SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"
PLUGIN = textwrap.dedent('''
    """A user's plugin: naive importance sampling of log Z from the uniform distribution, and a
    binary family that is an RBM under another name."""
    import math

    import torch

    from logzbench.estimators.result import EstimateResult, summarize_log_weights
    from logzbench.models.rbm import BinaryRBM
    from logzbench.training import train_rbm


    def estimate(ctx):
        o = ctx.options
        n = o.chains * o.draws_per_chain
        v = torch.randint(0, 2, (n, ctx.model.n_visible), generator=ctx.generator, device=ctx.device)
        log_w = ctx.model.log_unnormalized_marginal(v.to(ctx.model.W.dtype)).double()
        log_w = log_w + ctx.model.n_visible * math.log(2.0)
        s = summarize_log_weights(log_w, n_bootstrap=0)
        res = EstimateResult(estimator=ctx.name, log_z=s.log_mean, log_z_stderr=s.stderr, ess=s.ess,
                             khat=s.khat, n_chains=n, settings=ctx.settings("draws_per_chain"),
                             log_weights=log_w.cpu().numpy())
        return ctx.finish(res)


    def peak_bytes(ctx):
        o = ctx.options
        return 8 * o.chains * o.draws_per_chain * ctx.model.n_visible, f"draws = {o.chains * o.draws_per_chain}"


    class ToyRBM(BinaryRBM):
        family = "toy-rbm"


    def train(train, test=None, **hyperparams):
        model, history = train_rbm(train, test, **hyperparams)
        return ToyRBM(model.W, model.visible_bias, model.hidden_bias, data_mean=model.data_mean), history
''')


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """Register the plugin's estimator ``toy-is`` (option ``draws_per_chain``) and family ``toy-rbm``."""
    (tmp_path / "toy_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "ESTIMATORS", dict(registry.ESTIMATORS))
    monkeypatch.setattr(registry, "FAMILIES", dict(registry.FAMILIES))
    monkeypatch.setattr(options, "_TABLE", dict(options._TABLE))
    draws = Option("draws_per_chain", 1, "toy-is: uniform draws per chain", "int", minimum=1)
    registry.register(
        registry.EstimatorSpec(
            name="toy-is",
            entry="toy_plugin:estimate",
            kinds=("binary",),
            axes=("seed",),
            yields="log_z",
            bound="unbiased-in-z",
            options=("chains", "draws_per_chain"),
            declares=(draws,),
            summary="naive importance sampling from the uniform distribution",
        )
    )
    registry.register(
        registry.FamilySpec(
            "toy-rbm",
            "toy_plugin:ToyRBM",
            "toy_plugin:train",
            "binary",
            options.INITS,
            "n_hidden",
            lambda nv, h: (min(nv, h[0]), 0),
            hyperparams=("logzbench.training.trainer:RBMTrainer",),
        )
    )
    return tmp_path


def _model():
    import torch
    from toy_plugin import ToyRBM

    g = torch.Generator().manual_seed(3)
    return ToyRBM(
        0.5 * torch.randn(8, 4, generator=g), 0.3 * torch.randn(8, generator=g), 0.3 * torch.randn(4, generator=g)
    )


def test_the_registry_refuses_a_second_entry_of_one_name(plugin):
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.estimator("toy-is"))
    with pytest.raises(ValueError, match="already declared"):
        options.declare(Option("draws_per_chain", 2, "again", "int"))


def test_api_runs_the_plugin_with_its_option(plugin):
    from logzbench.api import estimate

    model = _model()
    exact = estimate(model, "exact").log_z
    res = estimate(model, "toy-is", chains=500, draws_per_chain=4, seed=1)
    assert res.n_chains == 2000 and res.settings["draws_per_chain"] == 4
    # naive IS over 2^8 states with 2000 draws: within 5 standard errors of the exact value
    assert abs(res.log_z - exact) < 5 * res.log_z_stderr + 1e-9, (res.log_z, res.log_z_stderr, exact)
    # the option is checked like a shipped one, and an unknown one is refused with the closest name
    with pytest.raises(ValueError, match="draws_per_chain must be >= 1"):
        estimate(model, "toy-is", draws_per_chain=0)
    with pytest.raises(ValueError, match="did you mean 'draws_per_chain'"):
        estimate(model, "toy-is", draw_per_chain=2)
    # the module's memory hook is what the context asks
    from logzbench.estimators.context import estimated_bytes
    from logzbench.options import EstimateOptions

    ctx = type("Ctx", (), {})()
    ctx.spec, ctx.model, ctx.options = (
        registry.estimator("toy-is"),
        model,
        EstimateOptions(chains=10, draws_per_chain=3),
    )
    assert estimated_bytes(ctx) == (8 * 30 * 8, "draws = 30")


def test_cli_has_the_flag_and_family(plugin, tmp_path, capsys):
    from logzbench import cli
    from logzbench.models.io import load_model, save_model

    path = tmp_path / "toy.npz"
    save_model(_model(), path)
    assert type(load_model(path)).__name__ == "ToyRBM"  # the model file names the plugin's family
    with pytest.raises(SystemExit):
        cli.main(["estimate", "--help"])
    assert "--draws-per-chain" in capsys.readouterr().out
    out = tmp_path / "est.json"
    assert (
        cli.main(
            [
                "estimate",
                str(path),
                "--estimator",
                "toy-is",
                "--chains",
                "50",
                "--draws-per-chain",
                "3",
                "--json",
                str(out),
                "--threads",
                "1",
            ]
        )
        == 0
    )
    rec = json.loads(out.read_text())
    assert rec["n_chains"] == 150 and rec["settings"]["draws_per_chain"] == 3 and math.isfinite(rec["log_z"])
    capsys.readouterr()
    assert cli.main(["estimate", str(path), "--estimator", "toy-is", "--draws-per-chain", "0"]) == 2
    assert "draws_per_chain must be >= 1" in capsys.readouterr().err


def test_a_former_flag_is_accepted_with_a_note(tmp_path, capsys):
    """--exact-budget is the former name of --exact-max-seconds: it still works, with one line saying so."""
    import torch

    from logzbench import cli
    from logzbench.models.io import save_model
    from logzbench.models.rbm import BinaryRBM

    path = tmp_path / "rbm.npz"
    save_model(BinaryRBM.random(6, 3, generator=torch.Generator().manual_seed(0)), path)
    assert cli.main(["estimate", str(path), "--estimator", "exact", "--exact-budget", "60"]) == 0
    err = capsys.readouterr().err
    assert "--exact-budget is deprecated; use --exact-max-seconds" in err


def _config():
    """config/test.yaml with a model of the plugin's family and an entry of the plugin's estimator."""
    import yaml

    config = yaml.safe_load((SCHEMA.parents[2] / "config" / "test.yaml").read_text())
    config["models"]["digits-toy"] = {
        "dataset": "digits",
        "hyperparams": {"family": "toy-rbm", "n_hidden": 6, "n_epochs": 1, "learning_rate": 0.05},
        "estimators": ["toy", "ais"],
    }
    config["estimators"]["toy"] = {"method": "toy-is", "chains": 20, "draws_per_chain": 3, "seeds": [0, 1]}
    return config, yaml.safe_load(SCHEMA.read_text())


def test_config_check_and_sweep_take_the_plugin(plugin):
    from snakemake.utils import validate

    from logzbench.errors import ConfigError
    from logzbench.pipeline import sweep
    from logzbench.pipeline.config import check_config, hyperparam_names
    from logzbench.pipeline.config_schema import check_estimator_options

    config, schema = _config()
    validate(config, schema=str(SCHEMA))
    check_estimator_options(config, schema)
    check_config(config)
    assert "n_hidden" in hyperparam_names("toy-rbm")  # the family's trainer keywords, from its entry
    jobs = [j for j in sweep.model_jobs(config, "digits-toy") if j.entry == "toy"]
    assert [j.stem for j in jobs] == ["seed0", "seed1"]
    s = sweep.job_settings(config, "digits-toy", "toy", "seed1")
    assert s["method"] == "toy-is" and s["family"] == "toy-rbm" and s["draws_per_chain"] == 3 and s["seed"] == 1
    # the option's schema comes from its declaration: unknown keys, bad values and hyperparameters are refused
    for key, value, why in (
        ("draw_per_chain", 3, "'draw_per_chain' was unexpected"),
        ("draws_per_chain", 0, "0 is less than the minimum of 1"),
    ):
        bad, _ = _config()
        bad["estimators"]["toy"][key] = value
        with pytest.raises(ConfigError, match=why):
            check_estimator_options(bad, schema)
    bad, _ = _config()
    bad["models"]["digits-toy"]["hyperparams"]["n_hiden"] = 3
    check_estimator_options(bad, schema)
    with pytest.raises(ConfigError, match="did you mean 'n_hidden'"):
        check_config(bad)
