"""A variational learner's common set-up and training steps.

:func:`setup` checks the arguments every learner shares and builds its data, generators, energy model,
minibatches and monitors (:class:`Setup`); :func:`adam` and :func:`step` are its optimiser.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Mapping, NamedTuple

import numpy as np
import torch
from torch import nn

from ...utils import make_generator, resolve_device
from ..common import _check_hidden_sizes
from ..learner_options import ABLATION_ALIASES, ABLATIONS, RULES, check_values
from ..trainer import TrainingDivergedError, _as_binary_data, _spawn_seed
from .distributions import Relaxation
from .energies import EnergyFamily, EnergyModel, get_family
from .monitors import AISMonitor, BestSnapshot, ExactMonitor, History, logged

# ABLATIONS and their aliases: logzbench.training.learner_options (with every learner hyperparameter's rule)


def check_ablation(ablation) -> str | None:
    """``None`` or one of :data:`ABLATIONS` (``"no_H(Q)"`` / ``"no_H(q)"`` accepted too)."""
    if ablation is None:
        return None
    name = ABLATION_ALIASES.get(str(ablation), str(ablation))
    if name not in ABLATIONS:
        raise ValueError(
            f"unknown ablation {ablation!r}; choose None, {ABLATIONS[0]!r} (no H(Q)) or {ABLATIONS[1]!r} (no H(q))"
        )
    return name


class Setup(NamedTuple):
    """What every variational learner starts from (see :func:`setup`)."""

    family: EnergyFamily
    device: torch.device
    train: torch.Tensor
    valid: torch.Tensor | None
    hidden_sizes: list
    mlp_hidden: int
    relax: Relaxation
    init_gen: torch.Generator
    gen: torch.Generator
    eval_gen: torch.Generator
    energy: EnergyModel
    batches: "Batches"
    monitor: torch.Tensor
    exact: "ExactMonitor"
    ais: "AISMonitor"
    best: "BestSnapshot"
    data_mean: np.ndarray | None

    def observe(self, history: "History", it: int, row: dict) -> None:
        """Complete a logged ``row`` of iteration ``it`` with the exact (:class:`ExactMonitor`) and AIS
        (:class:`AISMonitor`) values, offer it to the selection (:class:`BestSnapshot`), and add it to
        ``history``.  A learner's own value that is NaN or infinite (its bounds: not a standard error,
        nor a ``valid_`` or ``exact_`` value, which are NaN where there is none) means the training
        diverged: :class:`~logzbench.training.trainer.TrainingDivergedError` naming the iteration (the
        parameters can stay finite, e.g. ``|W| = 3e10`` after three steps at ``lr=1e10``)."""
        bad = next(
            (
                k
                for k, v in row.items()
                if isinstance(v, float)
                and not math.isfinite(v)
                and not k.startswith(("valid_", "exact_"))
                and not k.endswith("_stderr")
            ),
            None,
        )
        if bad is not None:
            where = f"by iteration {it}" if it else "before the first iteration"
            raise TrainingDivergedError(
                f"training diverged {where}: the logged {bad} is {row[bad]}; lower the "
                "learning rate (lr) or the initial weights (init_scale)"
            )
        row.update(self.exact(self.energy))
        row.update(self.ais(it, self.energy))
        if it == 0 and self.best.select == "best-valid" and not math.isfinite(self.best.criterion(row)):
            # (before any training: the first logged row has the monitors' values or none)
            raise ValueError(
                "select='best-valid' needs a validation log-likelihood during training: the model is "
                f"not enumerable with exact_max_units={self.exact.max_units}; set ais_every (AIS on "
                "the validation rows every that many iterations)"
            )
        self.best.offer(it, row, self.energy)
        history.add(row)

    def iterate(self, name: str, hp, update: Callable[[], None], record: Callable[[int], dict]) -> "History":
        """A learner's loop, which every learner shares: the logged row of iteration 0, then
        ``hp.iterations`` times its ``update`` of the networks and the model, a check that the model is
        finite (naming ``name``), and the row of each logged iteration (every ``hp.log_every``-th and the
        last; :meth:`observe` completes each)."""
        history = History()
        self.observe(history, 0, record(0))
        for it in range(1, int(hp.iterations) + 1):
            update()
            self.energy.check_finite(f"{name} iteration {it}")
            if logged(it, hp.iterations, hp.log_every):
                self.observe(history, it, record(it))
        return history

    def finish(self, history: "History", state: Mapping[str, nn.Module], return_state: bool):
        """``(model, history)`` -- plus ``state`` (the trained modules and ``selected_iteration``) when
        ``return_state`` -- with the model's ``data_mean`` set to the training means (binary families).
        With ``select="best-valid"`` the model is the logged one of the best validation log-likelihood
        (the networks in ``state`` stay the last ones)."""
        selected = self.best.restore(self.energy)
        if selected is None:
            selected = int(history.rows["iteration"][-1]) if history.rows.get("iteration") else 0
        model = self.energy.to_model(self.data_mean)
        if not return_state:
            return model, history.result()
        return model, history.result(), {**dict(state), "selected_iteration": selected}


def setup(train, valid, hp, *, family_options=None) -> Setup:
    """Validate a learner's hyperparameters ``hp`` (its declaration,
    :mod:`logzbench.training.hyperparams`) and build its data, generators and :class:`EnergyModel`.

    The trained parameters' initial values, the data order, the monitoring batch (``monitor``:
    ``batch_size`` training rows) and the networks' initial weights come from a CPU generator
    seeded by ``seed``; the sampling noise from a generator on
    ``device`` spawned from it, and the monitoring draws from a third one (so the monitoring
    never changes the trained model).  ``ais_*`` configure :class:`AISMonitor` (``ais_every=0``: off) and
    ``select`` the model returned (:class:`BestSnapshot`); every value with a rule is checked by it
    (:func:`logzbench.training.learner_options.check_values`).  A learner without ``temperature`` /
    ``straight_through`` (NVIL) gets the relaxation at their defaults.

    Raises
    ------
    ValueError
        Naming the argument or data problem.
    """
    fam = get_family(hp.family)
    # every value by its rule (logzbench.training.learner_options, also the workflow's config check)
    check_values({f.name: getattr(hp, f.name) for f in dataclasses.fields(hp) if f.name in RULES})
    hidden_sizes, seed, mlp_hidden = hp.hidden_sizes, hp.seed, hp.mlp_hidden
    sizes = _check_hidden_sizes(hidden_sizes)
    lo, hi = fam.n_layers
    if len(sizes) < lo or (hi is not None and len(sizes) > hi):
        raise ValueError(
            f"family {fam.name!r} takes {lo if hi == lo else f'{lo} or more'} hidden layer(s); "
            f"hidden_sizes={list(hidden_sizes)!r}"
        )
    if mlp_hidden is None:
        mlp_hidden = max(1, sizes[0] // 2)
    dev = resolve_device(hp.device)
    x_train = _as_data(train, "training", fam, dev)
    x_valid = None if valid is None else _as_data(valid, "validation", fam, dev, x_train.shape[1])
    init_gen = torch.Generator().manual_seed(int(seed))
    params, buffers = fam.init(x_train.shape[1], sizes, x_train, init_gen, hp.init_scale, dict(family_options or {}))
    energy = EnergyModel(fam, {k: t.float() for k, t in params.items()}, {k: t.float() for k, t in buffers.items()}).to(
        dev
    )
    gen = make_generator(_spawn_seed(init_gen), dev)
    eval_gen = make_generator(_spawn_seed(init_gen), dev)
    batches = Batches(x_train, min(int(hp.batch_size), x_train.shape[0]), init_gen)
    monitor = x_train[torch.randperm(x_train.shape[0], generator=init_gen)[: batches.batch_size].to(dev)]
    relax = Relaxation(float(getattr(hp, "temperature", 0.1)), bool(getattr(hp, "straight_through", False)))
    data_mean = x_train.mean(0).cpu().numpy() if fam.visible == "binary" else None
    ais = AISMonitor(
        hp.ais_every,
        hp.ais_K,
        hp.ais_chains,
        hp.ais_init,
        hp.ais_is_samples,
        int(seed),
        hp.iterations,
        x_train,
        x_valid,
        data_mean,
        fam,
    )
    exact = ExactMonitor(x_train, monitor, x_valid, hp.exact_max_units)
    best = BestSnapshot(hp.select)
    if best.select == "best-valid" and x_valid is None:
        raise ValueError("select='best-valid' needs validation rows (the dataset has no validation split)")
    return Setup(
        fam,
        dev,
        x_train,
        x_valid,
        sizes,
        int(mlp_hidden),
        relax,
        init_gen,
        gen,
        eval_gen,
        energy,
        batches,
        monitor,
        exact,
        ais,
        best,
        data_mean,
    )


def _as_data(x, what: str, family: EnergyFamily, device, n_visible: int | None = None) -> torch.Tensor:
    """Training / validation rows as float32 on ``device``: 0/1 rows for a binary family, finite
    real rows otherwise (ValueError naming ``what`` and the problem)."""
    if family.visible == "binary":
        return _as_binary_data(x, what, device, n_visible)
    arr = np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{what} data has dtype {arr.dtype}; expected real numbers")
    if arr.ndim != 2 or 0 in arr.shape:
        raise ValueError(f"{what} data has shape {arr.shape}; expected a non-empty 2-D array (rows, features)")
    if n_visible is not None and arr.shape[1] != n_visible:
        raise ValueError(f"{what} data has {arr.shape[1]} columns; expected rows of {n_visible} values")
    if not np.isfinite(arr).all():
        raise ValueError(f"{what} data contains NaN or infinite values")
    return torch.as_tensor(arr, dtype=torch.float32, device=device)


class Batches:
    """Minibatches of ``batch_size`` rows, reshuffled every epoch with ``generator`` (CPU)."""

    def __init__(self, data: torch.Tensor, batch_size: int, generator: torch.Generator):
        self.data, self.batch_size, self.generator = data, batch_size, generator
        self._order, self._pos = None, 0

    def next(self) -> torch.Tensor:
        n = self.data.shape[0]
        if self._order is None or self._pos + self.batch_size > n:
            self._order = torch.randperm(n, generator=self.generator).to(self.data.device)
            self._pos = 0
        idx = self._order[self._pos : self._pos + self.batch_size]
        self._pos += self.batch_size
        return self.data[idx]


def adam(params, lr: float, betas) -> torch.optim.Adam:
    """Adam over ``params`` (the paper: lr 3e-4, betas (0.5, 0.999))."""
    return torch.optim.Adam(list(params), lr=float(lr), betas=tuple(float(b) for b in betas))


def step(optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """One optimizer step on ``loss``."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
