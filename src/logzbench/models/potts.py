"""Pairwise Potts model (categorical sites, pairwise couplings): the DCA model of protein families.

A state is a row ``x`` of ``L`` sites, each in ``0..q-1``; the unnormalised density is

    log f(x) = sum_i h_i(x_i) + sum_{i<j} J_ij(x_i, x_j),

with fields ``h`` of shape ``(L, q)`` and couplings ``J`` of shape ``(L, L, q, q)`` stored in both
orders, ``J[i, j, a, b] = J[j, i, b, a]``, with zero diagonal blocks ``J[i, i] = 0`` (so
``sum_{i<j} J_ij(x_i, x_j) = (1/2) sum_{i,j} J[i, j, x_i, x_j]``).  Parameters are float64 tensors on
the model's device; every log-density is float64.

Annealing path
--------------
From a factorised categorical ``p_0(x) = prod_i softmax(a0_i)[x_i]`` (``init="uniform"``: ``a0 = 0``;
``"base-rate"``: ``a0_i = log`` of the smoothed site frequencies of the training rows), the geometric path

    log f_beta(x) = sum_i a0_i(x_i) + beta u(x),    u(x) = sum_i (h_i - a0_i)(x_i) + sum_{i<j} J_ij(x_i, x_j),

is at every ``beta`` again a pairwise Potts model (fields ``(1 - beta) a0 + beta h``, couplings
``beta J``), so its transition is exact heat-bath Gibbs: each site in turn is redrawn from its
conditional, a softmax over ``q`` states, for all chains at once.  The sweep visits the sites in the
palindromic order ``0, 1, ..., L-1, ..., 1, 0`` (``2L - 1`` updates; updating a site twice in a row is
the same as once), which makes the kernel reversible with respect to ``p_beta`` as RAISE and the
reverse estimators need (a one-way systematic sweep is not).  ``log Z_0 = sum_i logsumexp_a a0_{i,a}``
and the AIS increment ``log f_{b'}(x) - log f_b(x) = (b' - b) u(x)`` is computed directly.

Plain-text parameter files (adabmDCA / bmDCA) are read and written by :mod:`logzbench.models.potts_text`.

Model files (``.npz``, ``model_type="potts"``): arrays ``h`` ``(L, q)``, ``J`` ``(L, L, q, q)``
(symmetric as above, zero diagonal blocks) and optional ``data_mean`` ``(L, q)`` (site frequencies of
the training rows, for the base-rate initial distribution).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..errors import ModelFileError
from ..kernels import categorical_from_logits
from ._arrays import ParameterFile, as_float64
from ._random import normal, resolve_generator
from ._shape import Axis, DeviceOf
from .enumeration import MAX_ENUMERATION_BITS, Float64Exact

__all__ = [
    "PottsAnnealingPath",
    "PottsModel",
    "categorical_from_logits",
    "dense_bytes",
    "exact_seconds",
]

#: states per enumeration step (float64 log-densities of ``(chunk, L)`` rows)
_STEP_STATES = 1 << 16
#: elements of the index tensor of one gather in :meth:`PottsModel.pair_energy`
_GATHER_ELEMENTS = 1 << 22
#: the largest magnitude of a parameter (``h`` or ``J`` entry): a trained model is nowhere near it, and
#: below it ``log f`` (a sum of ``L + L^2 / 2`` of them) and the annealing increments stay far from
#: float64 overflow (as the RBM's bias limit)
PARAM_LIMIT = 1e30
#: one-thread terms per second of the enumeration (a term: one site pair of one state), rounded down
_CPU_TERMS_PER_SECOND = 5e7
_CUDA_SPEEDUP = 200.0


# --------------------------------------------------------------------------- shared helpers
def as_states(x, n_sites: int, n_states: int, device, what: str = "data") -> torch.Tensor:
    """Rows of states as an int64 tensor ``(n, n_sites)`` on ``device`` (one row may be 1-D); refuses
    non-integer values, a wrong row length and states outside ``0..n_states-1`` (ValueError)."""
    t = torch.as_tensor(x, device=device)
    if t.ndim == 1:
        t = t.unsqueeze(0)
    if t.ndim != 2 or t.shape[1] != n_sites:
        raise ValueError(f"{what} has shape {tuple(t.shape)}; expected rows of {n_sites} sites")
    if t.is_floating_point():
        if t.numel() and not bool((t == torch.round(t)).all()):
            raise ValueError(f"{what} holds non-integer values; categorical rows are states 0..{n_states - 1}")
    elif t.dtype == torch.bool:
        raise ValueError(f"{what} is boolean; categorical rows are integer states 0..{n_states - 1}")
    t = t.to(torch.int64)
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= n_states):
        raise ValueError(
            f"{what} holds states in {int(t.min())}..{int(t.max())}; this model has {n_states} states "
            f"per site (0..{n_states - 1})"
        )
    return t


def site_frequencies(x: torch.Tensor, n_states: int) -> torch.Tensor:
    """Per-site state frequencies ``(L, q)`` float64 of int64 rows ``(n, L)``."""
    if x.shape[0] == 0:
        raise ValueError("no training rows to take the site frequencies of")
    return torch.nn.functional.one_hot(x, n_states).double().mean(dim=0)


def base_rate_logits(freq: torch.Tensor, smoothing: float = 0.05) -> torch.Tensor:
    """Logits ``(L, q)`` of the data-base-rate distribution: ``log`` of the site frequencies mixed
    with the uniform distribution by ``smoothing`` and clipped below at ``1e-3 / q`` (every logit finite)."""
    q = freq.shape[-1]
    p = (1.0 - smoothing) * freq.double() + smoothing / q
    return torch.log(p.clamp_min(1e-3 / q))


def states_range(start: int, stop: int, n_sites: int, n_states: int, device) -> torch.Tensor:
    """States ``start .. stop-1`` of ``n_sites`` sites in base ``n_states`` (site 0 the fastest digit),
    int64 ``(stop - start, n_sites)``."""
    idx = torch.arange(start, stop, device=device, dtype=torch.int64).unsqueeze(1)
    powers = n_states ** torch.arange(n_sites, device=device, dtype=torch.int64)
    return (idx // powers) % n_states


def _initial_logits(model, init: str, data, logits_0) -> torch.Tensor:
    """``a0`` ``(L, q)`` float64 of the initial distribution (uniform or base rate)."""
    L, q = model.n_visible, model.n_states
    if logits_0 is not None:
        a0 = torch.as_tensor(logits_0, device=model.device, dtype=torch.float64)
    elif init == "uniform":
        a0 = torch.zeros(L, q, device=model.device, dtype=torch.float64)
    elif init == "base-rate":
        if data is not None:
            freq = site_frequencies(as_states(data, L, q, model.device, "training data"), q)
        elif model.data_mean is not None:
            freq = model.data_mean.double()
        else:
            raise ValueError(
                "the data-base-rate initial distribution needs the training data's site frequencies: "
                "pass training data (CLI: --train-data X.npy) or use a model file with a 'data_mean' array"
            )
        a0 = base_rate_logits(freq)
    else:
        raise ValueError(f"unknown initial distribution {init!r}; choose 'uniform', 'base-rate' or 'mixture'")
    if a0.shape != (L, q):
        raise ValueError(f"initial logits have shape {tuple(a0.shape)}, expected ({L}, {q})")
    if not torch.isfinite(a0).all():
        raise ValueError("initial logits contain NaN or inf")
    return a0


def _check_data_mean(dm: np.ndarray | None, L: int, q: int) -> None:
    if dm is None:
        return
    if dm.shape != (L, q):
        raise ModelFileError(f"'data_mean' has shape {dm.shape}, expected ({L}, {q}) (site frequencies)")
    if not np.isfinite(dm).all() or (dm < 0).any() or (dm > 1).any():
        raise ModelFileError("'data_mean' must hold finite frequencies in [0, 1]")


# --------------------------------------------------------------------------- the model
class ChunkedEnumeration(Float64Exact):
    """``exact_log_z`` of a discrete model by enumerating its states in chunks, in float64 (a log-sum-exp per
    chunk, then of the chunks).  The model gives ``_EXACT_WHAT`` (its method, in messages), ``_EXACT_STEP``
    (the default states per chunk), ``_enumeration()`` (how many states, and what they are, for the
    progress bar; it refuses a model with too many), ``_enumerated_log_f(start, stop)`` and
    ``_rounding_bound(n_total)``."""

    def _exact_plan(self, chunk_size: int | None) -> tuple[int, str, int]:
        """The states (:meth:`_enumeration`) and the states per chunk (default ``_EXACT_STEP``)."""
        n_total, what = self._enumeration()
        step = self._EXACT_STEP if chunk_size is None else int(chunk_size)
        if step < 1:
            raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
        return n_total, what, step

    def _exact_sum(self, plan: tuple[int, str, int], progress: bool) -> float:
        """A log-sum-exp of ``log f`` per chunk of states, then of the chunks; ``progress`` ticks once per
        chunk."""
        n_total, what, step = plan
        starts = range(0, n_total, step)
        if progress:
            from tqdm.auto import tqdm

            starts = tqdm(starts, desc=f"exact log Z ({what} states)", unit="step")
        parts = [torch.logsumexp(self._enumerated_log_f(s, min(s + step, n_total)), dim=0) for s in starts]
        return float(torch.logsumexp(torch.stack(parts), dim=0))

    def _exact_bound(self, plan: tuple[int, str, int]) -> float:
        return self._rounding_bound(plan[0])


class PottsModel(ParameterFile, ChunkedEnumeration):
    """A pairwise Potts model (module docstring).

    Parameters
    ----------
    h : array-like, shape (L, q)
        Fields.
    J : array-like, shape (L, L, q, q)
        Couplings, ``J[i, j, a, b] = J[j, i, b, a]``, zero diagonal blocks.
    device : str or torch.device, optional
        Default CPU.
    data_mean : array-like, shape (L, q), optional
        Site frequencies of the training rows (base-rate initial distribution); saved with the model.

    Attributes
    ----------
    h, J : torch.Tensor (float64)
    n_visible : int
        ``L``, the number of sites.
    n_states : int
        ``q``, the states per site.
    """

    family = "potts"
    PARAMETERS = ("h", "J")
    _EXACT_WHAT = "exact enumeration of a Potts model"
    _EXACT_STEP = _STEP_STATES

    def __init__(self, h, J, device=None, data_mean=None):
        device = torch.device(device) if device is not None else torch.device("cpu")
        h64, J64, dm64 = as_float64(h), as_float64(J), as_float64(data_mean)
        if h64.ndim == 2:  # the model's copies of J (beyond the arrays given), before any is made
            from ..utils import memory_shortfall

            short = memory_shortfall(dense_bytes(*h64.shape) - J64.nbytes - h64.nbytes, device)
            if short is not None:
                raise ModelFileError(
                    f"a dense Potts model of L = {h64.shape[0]} sites and q = {h64.shape[1]} states needs {short}"
                )
        validate_potts_arrays(h64, J64, dm64)
        self.h = torch.as_tensor(h64, device=device, dtype=torch.float64).contiguous()
        J = torch.as_tensor(J64, device=device, dtype=torch.float64)
        self.J = (0.5 * (J + J.permute(1, 0, 3, 2))).contiguous()  # exactly symmetric
        self.data_mean = None if dm64 is None else torch.as_tensor(dm64, device=device, dtype=torch.float64)
        L = self.n_visible
        #: ``JT[i, j, b, a] = J[i, j, a, b]``: site i's field over its q states given site j's state b
        self._JT = self.J.permute(0, 1, 3, 2).contiguous()
        self._flat = self.J.reshape(-1)
        self._site = torch.arange(L, device=device)

    # ------------------------------------------------------------------ basics
    n_visible = Axis("h", 0)
    n_states = Axis("h", 1)
    device = DeviceOf("h")

    @classmethod
    def random(
        cls,
        n_sites: int,
        n_states: int,
        scale: float = 0.1,
        generator: torch.Generator | None = None,
        field_scale: float = 0.0,
        device=None,
        seed: int | None = None,
    ) -> "PottsModel":
        """Couplings ``N(0, scale^2)`` (symmetrised, zero diagonal blocks) and fields
        ``N(0, field_scale^2)`` (tests, initialisation); ``seed`` stands for a generator seeded with it."""
        g = resolve_generator(generator, seed)
        L, q = int(n_sites), int(n_states)
        J = normal(g, L, L, q, q, scale=scale)
        J = torch.triu(torch.ones(L, L, dtype=torch.float64), diagonal=1)[:, :, None, None] * J
        J = J + J.permute(1, 0, 3, 2)
        h = normal(g, L, q, scale=field_scale)
        return cls(h, J, device=device)

    def as_rows(self, x, what: str = "data") -> torch.Tensor:
        """Rows of states as int64 ``(n, L)`` on the model's device (checked; see :func:`as_states`)."""
        return as_states(x, self.n_visible, self.n_states, self.device, what)

    # ------------------------------------------------------------------ densities
    def pair_energy(self, x: torch.Tensor) -> torch.Tensor:
        """``sum_{i<j} J_ij(x_i, x_j)`` of int64 rows ``(n, L)``, float64 ``(n,)``."""
        L, q = self.n_visible, self.n_states
        out = torch.zeros(x.shape[0], dtype=torch.float64, device=x.device)
        block = max(1, _GATHER_ELEMENTS // max(1, x.shape[0] * L))  # sites i per gather: bounded memory
        for s in range(0, L, block):
            rows = self._site[s : s + block]
            pair = (rows[:, None] * L + self._site[None, :]) * (q * q)  # (b, L): offset of block J[i, j]
            idx = pair.unsqueeze(0) + x[:, s : s + block].unsqueeze(2) * q + x.unsqueeze(1)  # J[i, j, x_i, x_j]
            out += self._flat[idx].sum(dim=(1, 2))
        return 0.5 * out

    def field_energy(self, x: torch.Tensor, h: torch.Tensor | None = None) -> torch.Tensor:
        """``sum_i h_i(x_i)`` (default the model's fields), float64 ``(n,)``."""
        h = self.h if h is None else h
        return h[self._site.unsqueeze(0), x].sum(dim=1)

    def log_unnormalized_marginal(self, x) -> torch.Tensor:
        """``log f(x) = sum_i h_i(x_i) + sum_{i<j} J_ij(x_i, x_j)``, float64, shape ``(n,)`` (exact)."""
        x = self.as_rows(x)
        return self.field_energy(x) + self.pair_energy(x)

    def exact_log_f(self, x) -> torch.Tensor:
        """``log f(x)``: the same as :meth:`log_unnormalized_marginal` (there is nothing to sum out)."""
        return self.log_unnormalized_marginal(x)

    def conditional_logits(self, x: torch.Tensor, site: int, h: torch.Tensor | None = None, beta: float = 1.0):
        """Logits ``(n, q)`` of site ``site`` given the others: ``h_site + beta sum_j J[site, j, :, x_j]``
        (``h``: the fields to use, default the model's; ``beta`` scales the couplings)."""
        h = self.h if h is None else h
        field = self._JT[site][self._site.unsqueeze(0), x].sum(dim=1)  # (n, q)
        return h[site] + beta * field

    def _enumeration(self) -> tuple[int, str]:
        """The ``q^L`` states (refused above ``2^MAX_ENUMERATION_BITS``)."""
        L, q = self.n_visible, self.n_states
        check_enumerable(L, q, "Potts model")
        return q**L, f"{q}^{L}"

    def _enumerated_log_f(self, start: int, stop: int) -> torch.Tensor:
        """``log f`` of states ``start .. stop - 1``, float64."""
        x = states_range(start, stop, self.n_visible, self.n_states, self.device)
        return self.field_energy(x) + self.pair_energy(x)

    def _rounding_bound(self, n_total: int) -> float:
        """A-priori bound on the float64 error of :meth:`exact_log_z`: each ``log f`` sums ``L + L^2``
        terms (error ``gamma_{L + L^2}`` times the sum of their magnitudes), the log-sum-exp adds a few
        ulps of ``log Z`` per level (``exp``/``log`` within 2 ulp)."""
        L = self.n_visible
        u = 2.0**-53
        k = L + L * L
        mag = float(self.h.abs().amax(dim=1).sum() + 0.5 * self.J.abs().amax(dim=(2, 3)).sum())
        gamma = k * u / (1 - k * u)
        return gamma * mag + 8 * u * (mag + math.log(max(n_total, 2)) + 1.0) * 2

    # ------------------------------------------------------------------ annealing
    def annealing_path(self, init: str = "uniform", data=None, logits_0=None, reference=None):
        """The geometric path from ``init`` (``"uniform"`` or ``"base-rate"``: the site frequencies of
        ``data``, default ``data_mean``) to this model; ``logits_0`` ``(L, q)`` overrides the initial
        distribution's logits.  ``"mixture"``: the augmented path from ``reference`` (a
        :class:`~logzbench.models.mixture.ProductMixture`, else one fitted to ``data``;
        :class:`~logzbench.models.mixture.MixturePottsPath`)."""
        if init == "mixture":
            from .mixture import MixturePottsPath, check_reference_shape, mixture_reference

            mix = mixture_reference(reference, data, lambda d: as_states(d, self.n_visible, self.n_states, self.device))
            check_reference_shape(mix, self)
            return MixturePottsPath(PottsAnnealingPath(self, torch.zeros_like(self.h)), mix)
        return PottsAnnealingPath(self, _initial_logits(self, init, data, logits_0))

    def gibbs(self, x, generator: torch.Generator, n_sweeps: int = 1) -> torch.Tensor:
        """``n_sweeps`` heat-bath sweeps of the model (``beta = 1``); returns the new int64 rows."""
        path = PottsAnnealingPath(self, torch.zeros_like(self.h))
        x = self.as_rows(x)
        for _ in range(int(n_sweeps)):
            x = path.transition(x, 1.0, generator)
        return x


class PottsAnnealingPath:
    """Geometric path from a factorised categorical ``softmax(a0)`` to a :class:`PottsModel` (module
    docstring).  States are the int64 rows ``(n_chains, L)`` themselves."""

    def __init__(self, model: PottsModel, logits_0: torch.Tensor):
        self.model = model
        self.a0 = torch.as_tensor(logits_0, device=model.device, dtype=torch.float64)
        self._dh = model.h - self.a0  # the linear part of u(x)

    def state_from_data(self, data) -> torch.Tensor:
        return self.model.as_rows(data)

    def log_z0(self) -> float:
        return float(torch.logsumexp(self.a0, dim=1).sum())

    def sample_initial(self, n_chains: int, generator: torch.Generator) -> torch.Tensor:
        """Exact draws from ``p_0 = prod_i softmax(a0_i)``."""
        return categorical_from_logits(self.a0.expand(int(n_chains), -1, -1), generator)

    def _u(self, x: torch.Tensor) -> torch.Tensor:
        """``u(x) = log f_1(x) - log f_0(x)``, float64 ``(n,)``."""
        m = self.model
        return m.field_energy(x, self._dh) + m.pair_energy(x)

    def log_f(self, state: torch.Tensor, beta: float) -> torch.Tensor:
        return self.model.field_energy(state, self.a0) + float(beta) * self._u(state)

    def log_f_ratio(self, state: torch.Tensor, beta_from: float, beta_to: float) -> torch.Tensor:
        """``(beta_to - beta_from) u(x)``: the increment as a small number, directly."""
        return (float(beta_to) - float(beta_from)) * self._u(state)

    def transition(self, state: torch.Tensor, beta: float, generator: torch.Generator) -> torch.Tensor:
        """One palindromic heat-bath sweep (sites ``0..L-1..0``) at ``beta``; reversible for ``p_beta``."""
        m, beta = self.model, float(beta)
        L = m.n_visible
        x = state.clone()
        fields = self.a0 + beta * self._dh  # (L, q)
        for i in list(range(L)) + list(range(L - 2, -1, -1)):
            x[:, i] = categorical_from_logits(m.conditional_logits(x, i, fields, beta), generator)
        return x


# --------------------------------------------------------------------------- validation, cost
def check_enumerable(L: int, q: int, what: str) -> None:
    """Refuse an enumeration of ``q^L`` states above ``2^MAX_ENUMERATION_BITS`` (ValueError)."""
    bits = L * math.log2(q) if q > 1 else 0.0
    if bits > MAX_ENUMERATION_BITS + 1e-9:
        raise ValueError(
            f"exact enumeration of this {what} needs {q}^{L} = 2^{bits:.1f} states; refusing above "
            f"2^{MAX_ENUMERATION_BITS}. Use an estimator (ais, raise) instead."
        )


def exact_seconds(model, n_rows: int, precision: str, device) -> tuple[float, str]:
    """One-thread seconds of enumerating a Potts model's ``q^L`` states (each ``L^2`` pair terms):
    the exact estimator's time estimate (:attr:`logzbench.registry.FamilySpec.exact_time`)."""
    L, q = model.n_visible, model.n_states
    check_enumerable(L, q, "Potts model")
    return float(q**L) * (L * L + L) / _CPU_TERMS_PER_SECOND, f"{q}^{L} states"


def validate_potts_arrays(h: np.ndarray, J: np.ndarray, data_mean: np.ndarray | None = None) -> None:
    """Refuse wrong shapes, NaN / inf, asymmetric couplings and non-zero diagonal blocks (ModelFileError)."""
    if h.ndim != 2 or h.shape[0] < 1 or h.shape[1] < 2:
        raise ModelFileError(f"'h' must be 2-D (sites x states, at least 2 states), got shape {h.shape}")
    L, q = h.shape
    if J.shape != (L, L, q, q):
        raise ModelFileError(f"'J' has shape {J.shape}, expected ({L}, {L}, {q}, {q}) to match h {h.shape}")
    for name, arr in (("h", h), ("J", J)):
        bad = ~np.isfinite(arr)
        if bad.any():
            first = tuple(int(k) for k in np.argwhere(bad)[0])
            raise ModelFileError(
                f"'{name}' contains NaN or inf ({int(bad.sum())} entries; the first "
                f"{_entry(name, first)} = {arr[first]})"
            )
        big = np.abs(arr) > PARAM_LIMIT
        if big.any():
            first = tuple(int(k) for k in np.argwhere(big)[0])
            raise ModelFileError(
                f"parameters overflow: '{name}' has {int(big.sum())} entries of magnitude above {PARAM_LIMIT:.0e} "
                f"(the first {_entry(name, first)} = {arr[first]:.3g}); not a usable model"
            )
    scale = max(1.0, float(np.abs(J).max(initial=0.0)))
    asym = float(np.abs(J - J.transpose(1, 0, 3, 2)).max(initial=0.0))
    if asym > 1e-6 * scale:
        raise ModelFileError(
            f"'J' is not symmetric: J[i, j, a, b] and J[j, i, b, a] differ by up to {asym:.3g} "
            f"(store both orders of every coupling)"
        )
    diag = float(np.abs(J[np.arange(L), np.arange(L)]).max(initial=0.0))
    if diag > 0:
        raise ModelFileError(f"'J' has non-zero diagonal blocks J[i, i] (up to {diag:.3g}); a Potts model has none")
    _check_data_mean(data_mean, L, q)


def _entry(name: str, index: tuple[int, ...]) -> str:
    """``J[0, 1, 0, 1]``: an array entry as a message names it."""
    return f"{name}[{', '.join(map(str, index))}]"


def dense_bytes(L: int, q: int) -> int:
    """Peak bytes of building a :class:`PottsModel` of ``L`` sites and ``q`` states from dense arrays:
    four ``(L, L, q, q)`` float64 arrays (the couplings given, the model's symmetric copy, its transposed
    copy and the temporary of the symmetrisation) and the fields."""
    return 8 * (4 * L * L * q * q + 2 * L * q)
