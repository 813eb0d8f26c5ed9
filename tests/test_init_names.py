"""``init`` is canonical past the boundary: the option check, the sampler and the config refuse any other
spelling, and the models take the canonical names only (``uniform``, ``base-rate``, ``mixture``; a grid's
``mean-field``), parsing no aliases of their own."""

import pytest
import torch

from logzbench.models.dbm import DBM
from logzbench.models.energy import EnergyModel
from logzbench.models.grid import GridMRF
from logzbench.models.potts import PottsModel
from logzbench.models.potts_rbm import PottsRBM
from logzbench.models.rbm import BinaryRBM
from logzbench.options import INITS, EstimateOptions

FORMER = ("base_rate", "dbr", "Base-Rate")


def _models():
    g = torch.Generator().manual_seed(0)
    return {
        "rbm": BinaryRBM.random(6, 3, generator=g),
        "dbm": DBM.random([6, 4, 4], generator=g),
        "potts": PottsModel.random(5, 3, generator=g),
        "potts-rbm": PottsRBM.random(5, 3, 4, generator=g),
        "grid": GridMRF.random(3, 3, 0.5, generator=g),
        "energy-binary": EnergyModel(lambda x: -(x.double() ** 2).sum(-1), 5, "binary"),
    }


@pytest.mark.parametrize("family", sorted(_models()))
def test_a_model_takes_the_canonical_base_rate_only(family):
    model = _models()[family]
    n = int(getattr(model, "n_visible", None) or model.dim)
    rows = torch.zeros(4, n) if family != "potts" and family != "potts-rbm" else torch.zeros(4, n, dtype=torch.int64)
    model.annealing_path("base-rate", data=rows)  # the canonical name
    for name in FORMER:
        with pytest.raises(ValueError, match=f"unknown initial distribution '{name}'"):
            model.annealing_path(name, data=rows)


def test_a_grid_takes_the_canonical_mean_field_only():
    model = _models()["grid"]
    model.annealing_path("mean-field")
    for name in ("mean_field", "mf"):
        with pytest.raises(ValueError, match=f"unknown initial distribution '{name}'"):
            model.annealing_path(name)


@pytest.mark.parametrize("name", FORMER)
def test_the_boundaries_refuse_another_spelling(name):
    assert INITS == ("uniform", "base-rate", "mixture")
    with pytest.raises(ValueError, match=f"unknown initial distribution '{name}'; choose one of"):
        EstimateOptions(init=name)
    from logzbench.sampling import sample

    with pytest.raises(ValueError, match=f"unknown initial distribution '{name}'; choose one of"):
        sample(_models()["rbm"], 3, init=name)


def test_a_former_option_name_warns_with_a_deprecation_warning(monkeypatch):
    """Option.aliases: a former name is taken as the current one, with a DeprecationWarning naming both that
    points at the caller (here: this test), not at logzbench's own frames."""
    import warnings

    from logzbench import options

    monkeypatch.setitem(options._ALIASES, "n_chains", "chains")
    with pytest.warns(DeprecationWarning, match="option 'n_chains' is deprecated; use 'chains'") as rec:
        assert EstimateOptions(n_chains=7).chains == 7
    assert rec[0].filename == __file__
    with pytest.warns(DeprecationWarning, match="'n_chains'"):
        assert options.rename_deprecated({"n_chains": 3, "K": [5]}) == {"chains": 3, "K": [5]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert options.canonical_name("chains") == "chains"
