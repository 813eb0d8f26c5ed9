"""The registry is the one place that makes an estimator known: an entry added at run time (with its
``estimate(ctx)`` in a module of its own, here this file) is reachable from ``api.estimate``, the
command line and the workflow's sweep without touching any of them."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import random_rbm

from logzbench import api, cli, plotting, registry
from logzbench.pipeline import sweep


def toy_estimate(ctx):
    """log Z by plain importance sampling from the path's initial distribution (a new estimator's
    whole module: the pieces come from the context)."""
    from logzbench.estimators.importance import importance_sampling
    from logzbench.estimators.is_family import reference_log_ratios

    res = importance_sampling(reference_log_ratios(ctx.path(), ctx.options.chains, ctx.generator), n_bootstrap=0)
    res.settings.update(ctx.annealed_settings())
    return ctx.finish(res)


TOY = registry.EstimatorSpec(
    name="toy-is",
    entry="test_registry:toy_estimate",
    kinds=("binary",),
    axes=("init", "seed"),
    yields="log_z",
    bound="unbiased-in-z",
    options=("chains", "init"),
    summary="test estimator",
)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(registry.ESTIMATORS, TOY.name, TOY)
    return TOY


def test_a_registry_entry_reaches_the_api(toy):
    rbm = random_rbm(8, 5, seed=3, scale=0.5)
    exact = api.estimate(rbm, "exact").log_z
    res = api.estimate(rbm, "toy-is", chains=20000, seed=1)
    assert abs(res.log_z - exact) < 4 * res.log_z_stderr, (res.log_z, res.log_z_stderr, exact)
    assert res.settings["estimator"] == "toy-is" and res.settings["init"] == "uniform"
    assert registry.estimators_for("rbm")[-1] == "toy-is" and "toy-is" not in registry.estimators_for("poe-laplace")


def test_a_registry_entry_reaches_the_command_line_and_the_sweep(toy):
    args = cli.build_parser().parse_args(["estimate", "m.npz", "--estimator", "toy-is"])
    assert args.estimator == "toy-is"
    config = {
        "datasets": {"d": {"source": "digits"}},
        "models": {"m": {"dataset": "d", "hyperparams": {"family": "dbn", "hidden_sizes": [4, 3]}}},
        "evaluation": {
            "K": [10],
            "inits": ["uniform", "base-rate"],
            "seeds": [0, 1],
            "exact_max_units": 20,
            "exact_max_log_f_units": 16,
        },
        "estimators": {"mine": {"method": "toy-is", "chains": 50}},
        "device": "cpu",
    }
    jobs = sweep.model_jobs(config, "m", presets={})
    # the toy's axes are init x seed; a DBN has the uniform initial distribution only
    assert [j.path() for j in jobs] == [
        "results/estimates/m/mine/uniform_seed0.json",
        "results/estimates/m/mine/uniform_seed1.json",
    ]
    s = sweep.job_settings(config, "m", "mine", "uniform_seed1", presets={})
    assert (s["method"], s["init"], s["seed"], s["chains"], s["K"]) == ("toy-is", "uniform", 1, 50, None)


def test_entries_are_consistent():
    """Every entry names a function that exists, options the API knows and families that exist."""
    from logzbench.options import option_names

    for spec in registry.ESTIMATORS.values():
        assert callable(spec.function), spec.name
        assert set(spec.options) <= set(option_names()), spec.name
        assert set(spec.families or ()) <= set(registry.FAMILIES), spec.name
        assert registry.parse_setting_stem(
            spec.axes, registry.setting_stem(spec.axes, {"K": 7, "init": "uniform", "seed": 3})
        ) == {
            "K": 7 if "K" in spec.axes else None,
            "init": "uniform" if "init" in spec.axes else None,
            "seed": 3 if "seed" in spec.axes else None,
        }
    for fam in registry.FAMILIES.values():
        assert hasattr(fam.model_class, "from_arrays"), fam.name
        assert callable(registry.load(fam.trainer)), fam.name
        assert set(fam.inits) <= set(registry.INITS)
    with pytest.raises(ValueError, match="unknown estimator 'nope'.*ais"):
        registry.estimator("nope")
    with pytest.raises(ValueError, match="unknown model family 'nope'.*dbm"):
        registry.family("nope")
    with pytest.raises(dataclasses.FrozenInstanceError):
        registry.ESTIMATORS["ais"].axes = ()  # type: ignore[misc]


def test_an_entry_without_a_style_is_drawn_in_an_automatic_one(toy):
    """Styling is the report's (plotting.ESTIMATOR_STYLES): a registered estimator with no entry there gets
    one keyed by its name (label, colour and marker), the same every time, unlike every shipped one."""
    assert TOY.name not in plotting.ESTIMATOR_STYLES
    style = plotting.estimator_style(TOY.name)
    assert style == plotting.estimator_style(TOY.name) and style.label == TOY.name
    assert style.color in plotting.FALLBACK_COLORS and style.marker in plotting.AUTO_MARKERS
    shipped = {(s.color, s.marker) for s in plotting.ESTIMATOR_STYLES.values()}
    assert (style.color, style.marker) not in shipped
    assert plotting.method_style(TOY.name) == {"color": style.color, "marker": style.marker}
    assert plotting.method_label(TOY.name) == TOY.name
    # every shipped estimator has its own entry; a name the registry does not know has none
    assert set(registry.ESTIMATORS) - {TOY.name} == set(plotting.ESTIMATOR_STYLES)
    assert plotting.estimator_style("not-an-estimator") is None


@pytest.mark.parametrize(
    "change, what",
    [
        ({"kinds": ("binary", "tertiary")}, "unknown kinds \\['tertiary'\\]"),
        ({"axes": ("K", "temperature")}, "unknown axes \\['temperature'\\]"),
        ({"yields": "log_p"}, "unknown yields \\['log_p'\\]"),
        ({"bound": "sideways"}, "unknown bound \\['sideways'\\]"),
        ({"options": ("chains", "no_such_option")}, "unknown options \\['no_such_option'\\]"),
    ],
)
def test_a_bad_spec_raises_value_error(change, what):
    with pytest.raises(ValueError, match=f"estimator 'toy-is': {what}"):
        dataclasses.replace(TOY, **change)


def test_constructing_a_spec_changes_no_global_state(monkeypatch):
    """A spec's own options are declared when it is registered, not when it is built."""
    from logzbench import options

    monkeypatch.setattr(registry, "ESTIMATORS", dict(registry.ESTIMATORS))
    monkeypatch.setattr(options, "_TABLE", dict(options._TABLE))
    before = (dict(options.declared()), dict(registry.ESTIMATORS), dict(registry.FAMILIES))
    own = options.Option("toy_draws", 1, "toy-is: draws per chain", "int", minimum=1)
    spec = dataclasses.replace(TOY, options=("chains", "init", "toy_draws"), declares=(own,))
    assert (dict(options.declared()), dict(registry.ESTIMATORS), dict(registry.FAMILIES)) == before
    registry.register(spec)
    assert options.declared()["toy_draws"] is own and registry.estimator("toy-is") is spec
