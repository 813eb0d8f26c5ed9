"""The ``transition`` option (issue 39, item 1) end to end: chosen and tuned once per estimate, recorded with the
result, its pilots counted in ``total_sweeps``; the same seed gives the same estimate; estimators that run the
transition backwards refuse a non-reversible one; ``sample`` takes it too."""

import math

import pytest
import torch

from logzbench.api import estimate
from logzbench.models import EnergyModel
from logzbench.models.energy_path import DiscreteEnergyPath
from logzbench.options import TRANSITIONS
from logzbench.sampling import sample


def cubic() -> EnergyModel:
    """A 9-site binary energy with fields, pairwise and three-body terms (512 states: exact by enumeration)."""
    g = torch.Generator().manual_seed(7)
    b = 0.5 * torch.randn(9, generator=g, dtype=torch.float64)
    J = 0.4 * torch.randn(9, 9, generator=g, dtype=torch.float64).triu(1)
    T = 0.3 * torch.randn(7, generator=g, dtype=torch.float64)

    def log_f(x):
        x = x.double()
        return x @ b + ((x @ J) * x).sum(1) + (x[:, :-2] * x[:, 1:-1] * x[:, 2:]) @ T

    return EnergyModel(log_f, 9, "binary")


@pytest.fixture(scope="module")
def model():
    return cubic()


@pytest.fixture(scope="module")
def truth(model):
    return estimate(model, "exact").log_z


@pytest.mark.parametrize("transition, param", [("gwg", "n_flips"), ("dmala", "alpha")])
def test_gradient_transition_is_tuned_recorded_and_counted(model, truth, transition, param):
    K, chains = 200, 200
    res = estimate(model, "ais", K=K, chains=chains, seed=1, transition=transition, pilot_chains=50)
    assert res.settings["transition"] == transition and res.settings[param] is not None
    pilot = res.extra["transition_pilot_sweeps"]
    assert pilot > 0 and pilot % 50 == 0  # transitions x the pilot's 50 chains
    assert res.total_sweeps == (K - 1) * chains + pilot  # AIS: K - 1 transitions per chain, then the pilot's
    assert 0.0 < res.extra["transition_acceptance"] <= 1.0
    assert abs(res.log_z - truth) < 4 * res.log_z_stderr
    again = estimate(model, "ais", K=K, chains=chains, seed=1, transition=transition, pilot_chains=50)
    assert again.log_z == res.log_z and again.settings[param] == res.settings[param]


def test_auto_records_its_pick_and_every_candidate(model, truth):
    res = estimate(model, "ais", K=200, chains=200, seed=2, transition="auto", pilot_chains=50)
    assert res.extra["transition_requested"] == "auto"
    assert res.settings["transition"] in TRANSITIONS
    cands = res.extra["transition_candidates"]
    assert set(cands) == set(TRANSITIONS)
    best = max((t for t in cands if cands[t]["ess_per_s"] is not None), key=lambda t: cands[t]["ess_per_s"])
    assert res.settings["transition"] == best
    assert abs(res.log_z - truth) < 4 * res.log_z_stderr
    # the pick, given by name, is reproducible exactly
    picked = res.settings["transition"]
    a = estimate(model, "ais", K=100, chains=50, seed=3, transition=picked, pilot_chains=50)
    b = estimate(model, "ais", K=100, chains=50, seed=3, transition=picked, pilot_chains=50)
    assert a.log_z == b.log_z


def test_gibbs_is_the_path_as_it_was(model):
    """The default records nothing new and runs no pilot: the estimate is the one without the option."""
    a = estimate(model, "ais", K=50, chains=50, seed=4)
    b = estimate(model, "ais", K=50, chains=50, seed=4, transition="gibbs")
    assert a.log_z == b.log_z and a.total_sweeps == b.total_sweeps == 49 * 50
    assert "transition" not in a.settings and "transition_pilot_sweeps" not in a.extra


def test_raise_with_a_gradient_transition_is_a_lower_bound_in_expectation(model, truth):
    g = torch.Generator().manual_seed(5)
    X = torch.bernoulli(torch.full((10, 9), 0.5), generator=g)
    exact_ll = float((model.log_f(X) - truth).mean())
    r = estimate(model, "raise", data=X, K=200, chains=20, seed=0, transition="dmala", pilot_chains=50)
    assert r.settings["transition"] == "dmala"
    assert abs(r.mean_log_likelihood - exact_ll) < 4 * r.mean_log_likelihood_stderr + 1e-2


@pytest.mark.parametrize("estimator", ["raise", "reverse-ais", "sandwich"])
def test_a_non_reversible_transition_is_refused_where_it_runs_backwards(model, monkeypatch, estimator):
    """Every shipped transition is reversible; the check refuses one that is not (here: the gwg path told so)."""
    monkeypatch.setattr(DiscreteEnergyPath, "reversible", property(lambda self: self.transition_name == "gibbs"))
    X = torch.bernoulli(torch.full((4, 9), 0.5), generator=torch.Generator().manual_seed(6))
    with pytest.raises(ValueError) as err:
        estimate(model, estimator, data=X, K=20, chains=10, seed=0, transition="gwg", pilot_chains=20)
    line = str(err.value)
    assert "\n" not in line and f"{estimator} runs its transitions in reverse" in line and "gwg" in line
    # forward-only estimators take it
    assert math.isfinite(estimate(model, "ais", K=20, chains=10, seed=0, transition="gwg", pilot_chains=20).log_z)


@pytest.mark.parametrize("transition", ["gwg", "dmala"])
def test_sample_takes_the_transition(model, transition):
    res = sample(model, 40, init="uniform", exact="never", burn_in=30, transition=transition, seed=0)
    s = res.settings
    assert s["transition"] == transition and s["transition_pilot_sweeps"] > 0
    assert 0.0 < s["acceptance_rate"] <= 1.0
    assert res.x.shape == (40, 9) and set(res.x.ravel().tolist()) <= {0.0, 1.0}
    again = sample(model, 40, init="uniform", exact="never", burn_in=30, transition=transition, seed=0)
    assert (again.x == res.x).all()


def test_auto_on_a_family_model_keeps_its_sampler():
    from conftest import random_rbm

    rbm = random_rbm(8, 4, seed=1)
    a = estimate(rbm, "ais", K=30, chains=20, seed=0, transition="auto")
    b = estimate(rbm, "ais", K=30, chains=20, seed=0)
    assert a.log_z == b.log_z and "transition" not in a.settings
