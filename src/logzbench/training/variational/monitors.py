"""What a variational learner records while it trains: exact and AIS values of the model, the
snapshot kept for ``select="best-valid"``, and the history of logged rows."""

from __future__ import annotations

import math
import time
from typing import Mapping

import torch
from torch import nn

from ..learner_options import SELECTIONS
from .energies import EnergyFamily, EnergyModel


class ExactMonitor:
    """Exact values for the history when the model is enumerable (NaN otherwise).

    ``__call__(energy)`` returns ``exact_log_z``, ``exact_free_energy`` (mean ``F(v)`` over the
    monitoring batch), ``exact_log_likelihood`` (mean over the training rows) and, with
    validation rows, ``valid_exact_log_likelihood``.
    """

    KEYS = ("exact_log_z", "exact_free_energy", "exact_log_likelihood", "valid_exact_log_likelihood")

    def __init__(self, train: torch.Tensor, batch: torch.Tensor, valid: torch.Tensor | None, max_units: int):
        self.train, self.batch, self.valid, self.max_units = train, batch, valid, int(max_units)

    def __call__(self, energy: EnergyModel) -> dict:
        out = dict.fromkeys(self.KEYS, math.nan)
        ex = energy.exact(self.max_units)
        if ex is None:
            return out
        log_z, log_f = ex
        out["exact_log_z"] = float(log_z)
        out["exact_free_energy"] = -float(log_f(self.batch).mean())
        out["exact_log_likelihood"] = float(log_f(self.train).mean()) - log_z
        if self.valid is not None:
            out["valid_exact_log_likelihood"] = float(log_f(self.valid).mean()) - log_z
        return out


class AISMonitor:
    """AIS on the model being trained, every ``every`` iterations and at the last (the paper's Fig. 5
    curves, and its selection of the model by the validation log-likelihood).

    ``__call__(it, energy)`` returns ``ais_log_z`` and ``ais_log_z_stderr`` (the project's AIS estimator,
    :func:`logzbench.api.estimate`, ``K`` intermediate distributions, ``chains`` chains, seed ``seed + it``,
    from ``init``: the data base rate for binary models, else the family's own) and
    ``valid_ais_log_likelihood`` (the mean validation log-likelihood with that ``log Z``; a DBM's
    ``log f(v)`` by importance sampling with ``is_samples`` samples); NaN where it does not run.
    """

    KEYS = ("ais_log_z", "ais_log_z_stderr", "valid_ais_log_likelihood")

    def __init__(
        self,
        every: int,
        K: int,
        chains: int,
        init: str | None,
        is_samples: int,
        seed: int,
        iterations: int,
        train: torch.Tensor,
        valid: torch.Tensor | None,
        data_mean,
        family: EnergyFamily,
    ):
        self.every, self.K, self.chains, self.is_samples = int(every), int(K), int(chains), int(is_samples)
        self.seed, self.iterations = int(seed), int(iterations)
        self.train, self.valid, self.data_mean = train, valid, data_mean
        self.init = init if init is not None else ("base-rate" if family.visible == "binary" else "uniform")

    def due(self, it: int) -> bool:
        return bool(self.every) and (it % self.every == 0 or it == self.iterations)

    def __call__(self, it: int, energy: EnergyModel) -> dict:
        out = dict.fromkeys(self.KEYS, math.nan)
        if not self.due(it):
            return out
        from ...api import estimate  # (same layer: the estimators' one entry point)

        model = energy.to_model(self.data_mean)
        res = estimate(
            model,
            "ais",
            data=None if self.valid is None else self.valid.cpu().double().numpy(),
            K=self.K,
            chains=self.chains,
            init=self.init,
            seed=self.seed + int(it),
            is_samples=self.is_samples,
            device=str(self.train.device),
            threads=torch.get_num_threads(),
        )
        out["ais_log_z"], out["ais_log_z_stderr"] = float(res.log_z), float(res.log_z_stderr)
        if self.valid is not None and res.mean_log_likelihood is not None:
            out["valid_ais_log_likelihood"] = float(res.mean_log_likelihood)
        return out


def check_select(select) -> str:
    """One of :data:`SELECTIONS` (ValueError naming the choices otherwise)."""
    if select not in SELECTIONS:
        raise ValueError(f"unknown select {select!r}; choose one of {list(SELECTIONS)}")
    return str(select)


class BestSnapshot:
    """The model kept at the end of training: the last (``select="last"``) or the logged one with the
    best validation log-likelihood (``"best-valid"``, the paper's protocol for Tables 2-3): its exact
    value where the model is enumerable, else the AIS monitor's."""

    def __init__(self, select: str = "last"):
        self.select = select
        self.iteration: int | None = None
        self.value = -math.inf
        self.state: dict | None = None

    @staticmethod
    def criterion(row: Mapping[str, float]) -> float:
        for key in ("valid_exact_log_likelihood", "valid_ais_log_likelihood"):
            x = row.get(key, math.nan)
            if x is not None and math.isfinite(x):
                return float(x)
        return math.nan

    def offer(self, it: int, row: Mapping[str, float], energy: nn.Module) -> None:
        if self.select != "best-valid":
            return
        x = self.criterion(row)
        if math.isfinite(x) and x > self.value:
            self.iteration, self.value = int(it), x
            self.state = {k: t.detach().clone() for k, t in energy.state_dict().items()}

    def restore(self, energy: nn.Module) -> int | None:
        """Load the kept parameters into ``energy``; the iteration they are from (``None``: the last)."""
        if self.state is None:
            return None
        energy.load_state_dict(self.state)
        return self.iteration


class History:
    """A dict of equal-length lists, one row per logging step."""

    def __init__(self):
        self.rows: dict[str, list] = {}
        self._t0 = time.perf_counter()

    def add(self, row: Mapping[str, float]) -> None:
        row = {"seconds": time.perf_counter() - self._t0, **row}
        if self.rows and set(row) != set(self.rows):
            raise RuntimeError(f"history row keys changed: {sorted(set(row) ^ set(self.rows))}")
        for k, v in row.items():
            self.rows.setdefault(k, []).append(float(v) if not isinstance(v, int) else v)

    def result(self) -> dict[str, list]:
        return self.rows


def logged(it: int, iterations: int, log_every: int) -> bool:
    """Whether iteration ``it`` (0 = before training) is a logging step."""
    return it == 0 or it % log_every == 0 or it == iterations
