"""The energy-based models the variational learners train, seen only through their energy ``E(v, hs)``.

**The energy interface.**  A learner needs only a differentiable ``E(v, hs)`` (``hs`` the list of
hidden layers): an :class:`EnergyFamily` is that function plus how to initialise its parameters
and (optionally) how to turn them into the project's model object, its free energy (NVIL) and
exact values for monitoring.  :data:`ENERGIES` holds

* ``"rbm"``: ``E = -b'v - v'W h - c'h`` (a one-layer case of the layered energy);
* ``"dbm"``: ``E = -sum_l b_l'h_l - sum_l h_{l-1}' W_l h_l`` (``h_0 = v``; any depth, 2 in the paper);
* ``"grbm"``: ``E = ||v - b||^2 / (2 sigma^2) - c'h - v'W h / sigma`` (real ``v``, fixed ``sigma``).

Adding a family is one energy function and one :class:`EnergyFamily` entry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ...models.dbm import DBM
from ...models.rbm import BinaryRBM
from ..common import _base_rate_logit, _check_params_finite
from ..trainer import _check_real

#: A learner's parameter beyond this in magnitude has diverged (:meth:`EnergyModel.check_finite`, every
#: iteration): Adam moves a parameter by about ``lr`` per step (3e-4 in the paper, at most a few units over a
#: whole run), and float32 energies of such weights keep no digit below 0.1 (``lr=1e10`` gave |W| = 3e10)
DIVERGED_ABS = 1e6


# ---------------------------------------------------------------------------- energies
def layered_energy(p: Mapping[str, torch.Tensor], v: torch.Tensor, hs: Sequence[torch.Tensor]) -> torch.Tensor:
    """``E(v, h) = -sum_l b_l'h_l - sum_l h_{l-1}' W_l h_l`` (``h_0 = v``; RBM and DBM), shape ``(n,)``.

    ``p`` holds ``W_1..W_L`` (``(n_{l-1}, n_l)``) and ``bias_0..bias_L``.
    """
    xs = [v, *hs]
    out = -sum(x @ p[f"bias_{l}"] for l, x in enumerate(xs))
    for l in range(1, len(xs)):
        out = out - ((xs[l - 1] @ p[f"W_{l}"]) * xs[l]).sum(-1)
    return out


def layered_free_energy(p: Mapping[str, torch.Tensor], v: torch.Tensor) -> torch.Tensor:
    """``F(v) = -b'v - sum_j softplus(c_j + (v W)_j)`` of a one-layer (RBM) energy, shape ``(n,)``."""
    if "W_2" in p:
        raise ValueError("the free energy is tractable only for a one-layer model (RBM)")
    return -(v @ p["bias_0"]) - F.softplus(v @ p["W_1"] + p["bias_1"]).sum(-1)


def grbm_energy(p: Mapping[str, torch.Tensor], v: torch.Tensor, hs: Sequence[torch.Tensor]) -> torch.Tensor:
    """``E(v, h) = ||v - b||^2 / (2 sigma^2) - c'h - v'W h / sigma`` (Gaussian-Bernoulli RBM), shape ``(n,)``."""
    h, s = hs[0], p["sigma"]
    return ((v - p["b"]) ** 2).sum(-1) / (2 * s * s) - h @ p["c"] - ((v @ p["W"]) * h).sum(-1) / s


def grbm_free_energy(p: Mapping[str, torch.Tensor], v: torch.Tensor) -> torch.Tensor:
    """``F(v) = ||v - b||^2 / (2 sigma^2) - sum_j softplus(c_j + (v W)_j / sigma)``, shape ``(n,)``."""
    s = p["sigma"]
    return ((v - p["b"]) ** 2).sum(-1) / (2 * s * s) - F.softplus(v @ p["W"] / s + p["c"]).sum(-1)


def _init_layered(n_visible, hidden_sizes, data, generator, init_scale, options):
    sizes = [n_visible, *hidden_sizes]
    params = {
        f"W_{l}": torch.randn(sizes[l - 1], sizes[l], generator=generator, dtype=torch.float64) * init_scale
        for l in range(1, len(sizes))
    }
    params["bias_0"] = _base_rate_logit(data.double().mean(0).cpu())
    params.update({f"bias_{l}": torch.zeros(sizes[l], dtype=torch.float64) for l in range(1, len(sizes))})
    return params, {}


def _init_grbm(n_visible, hidden_sizes, data, generator, init_scale, options):
    sigma = options.get("sigma", 1.0)
    _check_real("sigma", sigma, 0.0, math.inf, low_open=True, high_open=True)
    params = {
        "W": torch.randn(n_visible, hidden_sizes[0], generator=generator, dtype=torch.float64) * init_scale,
        "b": data.double().mean(0).cpu(),
        "c": torch.zeros(hidden_sizes[0], dtype=torch.float64),
    }
    return params, {"sigma": torch.tensor(float(sigma), dtype=torch.float64)}


def _arrays(p):
    return {k: t.detach().cpu().double().numpy() for k, t in p.items()}


def _layered_model(p, data_mean=None, family="dbm"):
    a = _arrays(p)
    n_layers = sum(1 for k in a if k.startswith("W_"))
    weights = [a[f"W_{l}"] for l in range(1, n_layers + 1)]
    biases = [a[f"bias_{l}"] for l in range(n_layers + 1)]
    if family == "rbm":
        return BinaryRBM(weights[0], biases[0], biases[1], data_mean=data_mean)
    return DBM(weights, biases, data_mean=data_mean)


#: Units enumerated per data row for a deep model's exact ``log f(v)`` (its even hidden layers) when
#: monitoring: every logged iteration evaluates every training row, so this stays small
MAX_LOG_F_UNITS = 12


def _layered_exact(p, max_units):
    """``(log Z, log f)`` of the layered model when enumerable (else ``None``): ``log Z`` over at most
    ``max_units`` units, ``log f(v)`` per row over at most ``min(max_units, MAX_LOG_F_UNITS)``."""
    dbm = _layered_model(p)
    view = dbm.as_rbm()
    if min(view.n_visible, view.n_hidden) > max_units or view.n_visible - dbm.n_visible > min(
        max_units, MAX_LOG_F_UNITS
    ):
        return None
    return dbm.exact_log_z(), dbm.exact_log_f


def _grbm_exact(p, max_units):
    """``(log Z, log f)`` of a GRBM (:class:`~logzbench.models.grbm.GaussianBernoulliRBM`: ``log Z`` by
    enumerating ``h``, ``log f`` in closed form) when it has at most ``max_units`` hidden units."""
    if p["W"].shape[1] > max_units:
        return None
    model = _build_grbm({k: t.detach().double() for k, t in p.items()})
    return model.exact_log_z(), model.exact_log_f


@dataclass(frozen=True)
class EnergyFamily:
    """An energy-based model family as the variational learners see it.

    Attributes
    ----------
    name : str
    visible : {"binary", "real"}
    n_layers : tuple of (int, int or None)
        Allowed number of hidden layers ``(min, max)``.
    energy : callable
        ``energy(params, v, hs) -> (n,)``: the only thing AVIL needs (differentiable in ``params``).
    init : callable
        ``init(n_visible, hidden_sizes, data, generator, init_scale, options) -> (params, buffers)``
        (float64 CPU tensors; ``params`` are trained, ``buffers`` are fixed).
    build : callable
        ``build(params, data_mean) -> model`` (the project's model object, or an arrays dict).
    free_energy : callable, optional
        ``free_energy(params, v) -> (n,)`` when tractable (NVIL needs it).
    exact : callable, optional
        ``exact(params, max_units) -> (log_z, log_f) or None``: exact monitoring when enumerable.
    """

    name: str
    visible: str
    n_layers: tuple
    energy: Callable
    init: Callable
    build: Callable
    free_energy: Callable | None = None
    exact: Callable | None = None


def _build_grbm(p, data_mean=None):
    """A :class:`~logzbench.models.grbm.GaussianBernoulliRBM` of the parameters ``{W, b, c, sigma}``."""
    from ...models.grbm import GaussianBernoulliRBM

    return GaussianBernoulliRBM.from_arrays(_arrays(p), source="trained GRBM")


#: The energies the variational learners train, by family name (:func:`get_family`).
ENERGIES: dict[str, EnergyFamily] = {
    "rbm": EnergyFamily(
        "rbm",
        "binary",
        (1, 1),
        layered_energy,
        _init_layered,
        lambda p, m=None: _layered_model(p, m, "rbm"),
        layered_free_energy,
        _layered_exact,
    ),
    "dbm": EnergyFamily(
        "dbm",
        "binary",
        (1, None),
        layered_energy,
        _init_layered,
        lambda p, m=None: _layered_model(p, m, "dbm"),
        None,
        _layered_exact,
    ),
    "grbm": EnergyFamily("grbm", "real", (1, 1), grbm_energy, _init_grbm, _build_grbm, grbm_free_energy, _grbm_exact),
}


def get_family(name: str) -> EnergyFamily:
    """The :class:`EnergyFamily` named ``name`` (case-insensitive); ValueError naming the choices."""
    key = str(name).lower()
    if key not in ENERGIES:
        raise ValueError(f"unknown family {name!r} for the variational learners; choose one of {sorted(ENERGIES)}")
    return ENERGIES[key]


class EnergyModel(nn.Module):
    """The MRF's parameters (``requires_grad``) and its energy ``E(v, hs)``.

    Parameters
    ----------
    family : str or EnergyFamily
    params : mapping of str to tensor
        Trained parameters (copied into ``nn.Parameter``).
    buffers : mapping of str to tensor, optional
        Fixed parameters (e.g. the GRBM's ``sigma``).
    """

    def __init__(self, family, params: Mapping[str, torch.Tensor], buffers: Mapping[str, torch.Tensor] | None = None):
        super().__init__()
        self.family = family if isinstance(family, EnergyFamily) else get_family(family)
        self.params = nn.ParameterDict({k: nn.Parameter(torch.as_tensor(t).clone()) for k, t in params.items()})
        self._buffer_names = tuple(buffers or ())
        for k, t in (buffers or {}).items():
            self.register_buffer(k, torch.as_tensor(t).clone())

    def tensors(self, dtype=None) -> dict[str, torch.Tensor]:
        """Parameters and buffers by name (cast to ``dtype`` when given)."""
        out = {k: p for k, p in self.params.items()}
        out.update({k: getattr(self, k) for k in self._buffer_names})
        return out if dtype is None else {k: t.to(dtype) for k, t in out.items()}

    def forward(self, v: torch.Tensor, hs: Sequence[torch.Tensor]) -> torch.Tensor:
        """``E(v, hs)``, shape ``(n,)``, in ``v``'s dtype."""
        return self.family.energy(self.tensors(v.dtype), v, [h.to(v.dtype) for h in hs])

    def free_energy(self, v: torch.Tensor) -> torch.Tensor:
        """``F(v)`` when the family's free energy is tractable, shape ``(n,)``."""
        if self.family.free_energy is None:
            raise ValueError(f"family {self.family.name!r} has no tractable free energy")
        return self.family.free_energy(self.tensors(v.dtype), v)

    def to_model(self, data_mean=None):
        """The project's model object (``BinaryRBM``, ``DBM``; the GRBM's arrays dict)."""
        return self.family.build(self.tensors(), data_mean)

    @torch.no_grad()
    def exact(self, max_units: int):
        """``(log Z, log_f)`` (``log_f(v) -> (n,)`` float64) when enumerable with at most ``max_units``
        units per enumerated layer, else ``None``."""
        if self.family.exact is None or max_units < 1:
            return None
        return self.family.exact({k: t.detach() for k, t in self.tensors().items()}, max_units)

    def check_finite(self, where: str) -> None:
        """:class:`~logzbench.training.trainer.TrainingDivergedError` naming a parameter that is NaN, infinite
        or larger than :data:`DIVERGED_ABS` in magnitude."""
        _check_params_finite(
            {k: p.detach() for k, p in self.params.items()},
            where,
            limit=DIVERGED_ABS,
            remedy="lower the learning rate (lr)",
        )
