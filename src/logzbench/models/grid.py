"""Binary pairwise Markov random fields on an ``H x W`` grid (discriminance-sampling paper,
Sec. 6, "MRF on 10 x 10 Grid").

    p(x) = exp( sum_<ij> theta_ij(x_i, x_j) + sum_i theta_i(x_i) ) / Z,   x_i in {0, 1},

over the 4-neighbour edges of the grid.  Parameters are tables: ``theta_unary`` of shape
``(H, W, 2)``, ``theta_h`` of shape ``(H, W-1, 2, 2)`` for the edge ``(r, c) -- (r, c+1)``
(indexed ``[x_(r,c), x_(r,c+1)]``) and ``theta_v`` of shape ``(H-1, W, 2, 2)`` for the edge
``(r, c) -- (r+1, c)`` (indexed ``[x_(r,c), x_(r+1,c)]``).

Internally the tables are rewritten exactly in the "Ising" form

    log f(x) = c + sum_i b_i x_i + sum_<ij> J_ij x_i x_j,

which is what every computation here uses (log-densities, Gibbs conditionals, the
transfer-matrix ``log Z``, mean field).

Contents
--------
* :class:`GridMRF`: the model; :meth:`GridMRF.random` draws ``theta_i(k) ~ N(0, sigma_s^2)``
  and ``theta_ij(k, l) ~ N(0, sigma_p^2)`` as in the paper; exact ``log Z`` by a column-wise
  transfer-matrix recursion (:meth:`GridMRF.exact_log_z`, ``2^min(H, W)`` states per column)
  and by enumeration (:meth:`GridMRF.brute_force_log_z`, tiny grids only).
* :class:`FactorialReference`: a fully factorised Bernoulli distribution over the grid
  (exact sampling, normalised ``log_prob``); built by :func:`uniform_reference` and
  :func:`mean_field` (naive mean field, damped block-coordinate fixed-point iteration;
  ``log_z_bound`` is the mean-field lower bound on ``log Z``).  They live in
  :mod:`logzbench.models.grid_reference` and are importable from here.
* The mixture-of-trees reference from tree-reweighted BP, with the TRW upper bound on
  ``log Z``, is :func:`logzbench.models.grid_trw.trw_mixture` (it builds on this module).
* :class:`GridAnnealingPath`: the geometric path ``f_beta = f_0^(1-beta) f^beta`` from a
  factorial reference to the MRF (the :class:`~logzbench.models.base.AnnealingPath`
  protocol), whose transition is one checkerboard Gibbs sweep at ``beta``.

All parameters and log-densities are float64; states are float64 tensors of 0./1. with shape
``(n_chains, H, W)``.

The model family ``grid-mrf``
-----------------------------
:class:`GridMRF` is the registry's family ``grid-mrf`` (:data:`logzbench.registry.FAMILIES`): its model
file is an ``.npz`` with ``model_type = "grid-mrf"`` and exactly the three tables above
(:meth:`GridMRF.from_arrays`, :meth:`GridMRF.to_arrays`).  To the estimators a state of the grid is a
*row* of ``H W`` values 0/1, the grid read row-major (site ``(r, c)`` is column ``r W + c``; NumPy's
``x.reshape(n, H * W)`` of ``(n, H, W)`` states): test and training rows (``--data``, ``--train-data``)
are such rows, :meth:`GridMRF.log_unnormalized_marginal` takes them, and the path's
``state_from_data`` reshapes them.  ``exact`` uses the transfer matrix (``min(H, W) <= 20``);
:meth:`GridMRF.spin_glass` builds the Edwards-Anderson spin glass of the default benchmark.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import ModelFileError
from ..kernels import bernoulli, uniform
from ._arrays import checked_arrays, errors_named
from .enumeration import Float64Exact
from .grid_reference import (
    FactorialReference,
    _as_table,
    mean_field,
    uniform_reference,
)

#: Largest ``min(H, W)`` accepted by :meth:`GridMRF.exact_log_z` (2^20 states per column).
MAX_TRANSFER_WIDTH = 20
#: the largest magnitude of a table entry in a model file (as the Potts families' limit): far below it,
#: ``log f`` and the annealing increments stay far from float64 overflow
PARAM_LIMIT = 1e30
#: the model file's tables, in the order of :class:`GridMRF`'s arguments
TABLES = ("theta_unary", "theta_h", "theta_v")
#: one-thread log-add-exp operations per second of the transfer-matrix recursion, rounded down
_CPU_OPS_PER_SECOND = 2e7
#: Largest number of sites accepted by :meth:`GridMRF.brute_force_log_z`.
MAX_BRUTE_FORCE_SITES = 24


def enumerate_states(height: int, width: int, device=None) -> torch.Tensor:
    """All ``2^(H W)`` binary states, float64, shape ``(2^(H W), H, W)`` (tiny grids: tests)."""
    n = height * width
    if n > MAX_BRUTE_FORCE_SITES:
        raise ValueError(
            f"refusing to enumerate 2^{n} states of a {height}x{width} grid (at most {MAX_BRUTE_FORCE_SITES} sites)"
        )
    k = torch.arange(2**n, device=device, dtype=torch.int64)
    shifts = torch.arange(n - 1, -1, -1, device=device, dtype=torch.int64)
    bits = (k[:, None] >> shifts[None, :]) & 1
    return bits.to(torch.float64).reshape(-1, height, width)


class GridMRF(Float64Exact):
    """A binary pairwise MRF on an ``H x W`` grid with 4-neighbour edges.

    Parameters
    ----------
    theta_unary : array-like, shape (H, W, 2)
        ``theta_i(k)``.
    theta_h : array-like, shape (H, W-1, 2, 2)
        ``theta_ij(k, l)`` of horizontal edges ``(r, c) -- (r, c+1)``.
    theta_v : array-like, shape (H-1, W, 2, 2)
        ``theta_ij(k, l)`` of vertical edges ``(r, c) -- (r+1, c)``.
    device : str or torch.device, optional
        Where parameters and sampling live (default CPU).

    Attributes
    ----------
    theta_unary, theta_h, theta_v : torch.Tensor (float64)
    const : float
        ``c`` of the Ising form ``log f(x) = c + b.x + sum J_ij x_i x_j``.
    field : torch.Tensor, shape (H, W)
        ``b``.
    J_h, J_v : torch.Tensor, shapes (H, W-1), (H-1, W)
        Couplings of horizontal and vertical edges.
    """

    family = "grid-mrf"

    def __init__(self, theta_unary, theta_h, theta_v, device=None):
        device = torch.device(device) if device is not None else torch.device("cpu")
        tu = theta_unary.detach() if isinstance(theta_unary, torch.Tensor) else np.asarray(theta_unary)
        if tu.ndim != 3 or tu.shape[2] != 2 or tu.shape[0] < 1 or tu.shape[1] < 1:
            raise ValueError(f"'theta_unary' must have shape (H, W, 2) with H, W >= 1, got {tuple(tu.shape)}")
        H, W = int(tu.shape[0]), int(tu.shape[1])
        self.theta_unary = _as_table(theta_unary, "theta_unary", (H, W, 2), device)
        self.theta_h = _as_table(theta_h, "theta_h", (H, W - 1, 2, 2), device)
        self.theta_v = _as_table(theta_v, "theta_v", (H - 1, W, 2, 2), device)
        self._to_ising()

    def _to_ising(self) -> None:
        tu, th, tv = self.theta_unary, self.theta_h, self.theta_v
        b = tu[..., 1] - tu[..., 0]
        c = tu[..., 0].sum()
        # theta(k, l) = t00 + k (t10 - t00) + l (t01 - t00) + k l (t11 - t10 - t01 + t00)
        c = c + th[..., 0, 0].sum() + tv[..., 0, 0].sum()
        b = b.clone()
        b[:, :-1] += th[..., 1, 0] - th[..., 0, 0]
        b[:, 1:] += th[..., 0, 1] - th[..., 0, 0]
        b[:-1, :] += tv[..., 1, 0] - tv[..., 0, 0]
        b[1:, :] += tv[..., 0, 1] - tv[..., 0, 0]
        self.const = float(c)
        self.field = b.contiguous()
        self.J_h = (th[..., 1, 1] - th[..., 1, 0] - th[..., 0, 1] + th[..., 0, 0]).contiguous()
        self.J_v = (tv[..., 1, 1] - tv[..., 1, 0] - tv[..., 0, 1] + tv[..., 0, 0]).contiguous()

    # ------------------------------------------------------------------ basics
    @property
    def height(self) -> int:
        return int(self.theta_unary.shape[0])

    @property
    def width(self) -> int:
        return int(self.theta_unary.shape[1])

    @property
    def shape(self) -> tuple[int, int]:
        return (self.height, self.width)

    @property
    def n_sites(self) -> int:
        return self.height * self.width

    @property
    def n_visible(self) -> int:
        """``H W``: the length of a row of the grid (the estimators' view of a state)."""
        return self.n_sites

    @property
    def layer_sizes(self) -> tuple[int]:
        """``(H W,)``: one layer of ``H W`` binary sites and no hidden units (the memory estimate's units)."""
        return (self.n_sites,)

    @property
    def device(self) -> torch.device:
        return self.theta_unary.device

    # ------------------------------------------------------------------ model files
    def to_arrays(self) -> dict[str, np.ndarray]:
        """The model-file arrays ``theta_unary``, ``theta_h``, ``theta_v`` (float64, indexed as the class)."""
        return {name: getattr(self, name).detach().cpu().numpy() for name in TABLES}

    @classmethod
    def from_arrays(cls, arrays, source: str = "model", device=None) -> "GridMRF":
        """A model from :meth:`to_arrays` output (an ``.npz`` file's contents, ``model_type="grid-mrf"``).

        Raises
        ------
        ModelFileError
            Naming ``source``: a missing or unexpected array, a table of the wrong shape (the three must
            agree on ``H`` and ``W``), NaN / inf, an entry beyond :data:`PARAM_LIMIT`.
        """
        a = checked_arrays(arrays, cls.family, TABLES, (), source)
        with errors_named(source):
            for name in TABLES:
                big = np.abs(np.nan_to_num(a[name], nan=0.0, posinf=0.0, neginf=0.0)) > PARAM_LIMIT
                if big.any():
                    raise ModelFileError(
                        f"'{name}' has {int(big.sum())} entries of magnitude above {PARAM_LIMIT:.0e}; "
                        "not a usable model"
                    )
            try:
                return cls(*(a[name] for name in TABLES), device=device)
            except ValueError as exc:
                raise ModelFileError(str(exc)) from None

    def to(self, device) -> "GridMRF":
        """A copy on ``device``."""
        return GridMRF(self.theta_unary.to(device), self.theta_h.to(device), self.theta_v.to(device), device=device)

    def transpose(self) -> "GridMRF":
        """The same model on the transposed ``W x H`` grid (``x -> x^T`` keeps ``log f``)."""
        return GridMRF(
            self.theta_unary.transpose(0, 1),
            self.theta_v.transpose(0, 1),
            self.theta_h.transpose(0, 1),
            device=self.device,
        )

    @classmethod
    def random(
        cls,
        height: int,
        width: int,
        sigma_pair: float,
        sigma_unary: float = 0.1,
        generator: torch.Generator | None = None,
        seed: int | None = None,
        device=None,
    ) -> "GridMRF":
        """``theta_i(k) ~ N(0, sigma_unary^2)``, ``theta_ij(k, l) ~ N(0, sigma_pair^2)``, independent.

        Draws come from ``generator`` (CPU), else from a new generator seeded with ``seed``
        (default 0).
        """
        if int(height) != height or int(width) != width or height < 1 or width < 1:
            raise ValueError(f"grid size must be positive integers, got {height}x{width}")
        for name, s in (("sigma_pair", sigma_pair), ("sigma_unary", sigma_unary)):
            if not (math.isfinite(float(s)) and float(s) >= 0.0):
                raise ValueError(f"{name} must be finite and >= 0, got {s!r}")
        H, W = int(height), int(width)
        g = generator if generator is not None else torch.Generator().manual_seed(0 if seed is None else int(seed))
        tu = torch.randn(H, W, 2, generator=g, dtype=torch.float64, device=g.device) * float(sigma_unary)
        th = torch.randn(H, W - 1, 2, 2, generator=g, dtype=torch.float64, device=g.device) * float(sigma_pair)
        tv = torch.randn(H - 1, W, 2, 2, generator=g, dtype=torch.float64, device=g.device) * float(sigma_pair)
        return cls(tu, th, tv, device=device)

    @classmethod
    def spin_glass(
        cls,
        height: int,
        width: int,
        beta: float = 1.0,
        couplings: str = "gaussian",
        field: float = 0.0,
        seed: int = 0,
        device=None,
    ) -> "GridMRF":
        """An Edwards-Anderson spin glass on the ``H x W`` grid at inverse temperature ``beta``.

        With spins ``s_i = 2 x_i - 1``,

            log f(x) = beta (sum_<ij> J_ij s_i s_j + sum_i h_i s_i),

        couplings ``J_ij ~ N(0, 1)`` (``couplings="gaussian"``) or ``+-1`` with equal odds (``"pm1"``),
        fields ``h_i ~ N(0, field^2)`` (``field=0``: none, and ``f(x) = f(1 - x)``), all drawn from a CPU
        generator seeded with ``seed`` (the same seed gives the same model).  Written as tables:
        ``theta_ij(k, l) = beta J_ij (2k - 1)(2l - 1)``, ``theta_i(k) = beta h_i (2k - 1)``.
        """
        if int(height) != height or int(width) != width or height < 1 or width < 1:
            raise ValueError(f"grid size must be positive integers, got {height}x{width}")
        for name, v in (("beta", beta), ("field", field)):
            if not (math.isfinite(float(v)) and float(v) >= 0.0):
                raise ValueError(f"{name} must be finite and >= 0, got {v!r}")
        if couplings not in SPIN_GLASS_COUPLINGS:
            raise ValueError(f"couplings must be one of {list(SPIN_GLASS_COUPLINGS)}, got {couplings!r}")
        H, W, b = int(height), int(width), float(beta)
        g = torch.Generator().manual_seed(int(seed))

        def draw(*shape):
            if couplings == "gaussian":
                return torch.randn(*shape, generator=g, dtype=torch.float64)
            return torch.randint(0, 2, shape, generator=g).to(torch.float64) * 2.0 - 1.0

        sign = torch.tensor([-1.0, 1.0], dtype=torch.float64)
        pair = sign[:, None] * sign[None, :]  # (2s_k - 1)(2s_l - 1)
        jh, jv = draw(H, W - 1), draw(H - 1, W)
        h = torch.randn(H, W, generator=g, dtype=torch.float64) * float(field)
        return cls(
            b * h[..., None] * sign, b * jh[..., None, None] * pair, b * jv[..., None, None] * pair, device=device
        )

    def as_states(self, x) -> torch.Tensor:
        """Binary states as float64 ``(n, H, W)`` on the model's device; accepts ``(n, H, W)``,
        ``(n, H*W)``, ``(H, W)`` or ``(H*W,)`` (one state); refuses values other than 0/1."""
        x = torch.as_tensor(x, device=self.device)
        H, W = self.shape
        if x.ndim == 1 and x.shape[0] == H * W:
            x = x.reshape(1, H, W)
        elif x.ndim == 2 and tuple(x.shape) == (H, W) and not (H == 1 or W == 1):
            x = x.unsqueeze(0)
        elif x.ndim == 2 and x.shape[1] == H * W:
            x = x.reshape(-1, H, W)
        if x.ndim != 3 or tuple(x.shape[1:]) != (H, W):
            raise ValueError(
                f"states have shape {tuple(x.shape)}; this {H}x{W} grid expects (n, {H}, {W}) or (n, {H * W})"
            )
        x = x.to(torch.float64)
        if not ((x == 0) | (x == 1)).all():
            raise ValueError("grid states must hold only 0 and 1 (found other values or NaN)")
        return x

    # ------------------------------------------------------------------ densities
    def _energy_terms(self, x: torch.Tensor) -> torch.Tensor:
        """``b.x + sum J_ij x_i x_j`` per state (no constant), float64."""
        out = (x * self.field).sum(dim=(1, 2))
        if self.width > 1:
            out = out + (x[:, :, :-1] * x[:, :, 1:] * self.J_h).sum(dim=(1, 2))
        if self.height > 1:
            out = out + (x[:, :-1, :] * x[:, 1:, :] * self.J_v).sum(dim=(1, 2))
        return out

    def log_f(self, x) -> torch.Tensor:
        """Unnormalised ``log f(x)`` per state, float64, shape ``(n,)``."""
        return self.const + self._energy_terms(self.as_states(x))

    def log_prob(self, x, log_z: float | None = None) -> torch.Tensor:
        """``log p(x)`` using the exact ``log Z`` (transfer matrix) unless given."""
        lz = self.exact_log_z() if log_z is None else float(log_z)
        return self.log_f(x) - lz

    def neighbour_field(self, x: torch.Tensor) -> torch.Tensor:
        """``sum_{j in N(i)} J_ij x_j`` for every site, shape ``(n, H, W)``."""
        nb = torch.zeros_like(x)
        if self.width > 1:
            nb[:, :, :-1] += self.J_h * x[:, :, 1:]
            nb[:, :, 1:] += self.J_h * x[:, :, :-1]
        if self.height > 1:
            nb[:, :-1, :] += self.J_v * x[:, 1:, :]
            nb[:, 1:, :] += self.J_v * x[:, :-1, :]
        return nb

    # ------------------------------------------------------------------ exact log Z
    _EXACT_WHAT = "the transfer-matrix log Z of a grid MRF"

    def _exact_plan(self, chunk_size: int | None) -> None:
        """Refuses a grid too wide (:func:`check_transfer_width`); ``chunk_size`` is unused (the messages of
        one column are the unit of work)."""
        check_transfer_width(self.height, self.width)

    def _exact_sum(self, plan: None, progress: bool) -> float:
        """``log Z`` by a column-wise transfer-matrix recursion in log space (float64).

        The grid is transposed when ``W < H`` so that a column holds ``min(H, W)`` sites;
        each column's ``2^min(H, W)`` configurations are carried as a vector of log
        messages, and the horizontal edges between two columns are absorbed one site at a
        time, so a column costs ``O(H 2^H)`` rather than ``O(4^H)`` (:meth:`_exact_plan` refuses
        ``min(H, W) > 20``).  ``progress`` shows one tick per column.
        """
        m = self.transpose() if self.width < self.height else self
        H, W = m.shape
        Jh = m.J_h
        alpha = m._column_potential(0)
        columns = range(1, W)
        if progress:
            from tqdm.auto import tqdm

            columns = tqdm(columns, desc=f"exact log Z ({W} columns of 2^{H} states)", unit="column")
        for c in columns:
            for i in range(H):
                a = alpha.view(2**i, 2, 2 ** (H - 1 - i))
                off, on = a[:, 0], a[:, 1]
                new0 = torch.logaddexp(off, on)
                new1 = torch.logaddexp(off, on + Jh[i, c - 1])
                alpha = torch.stack([new0, new1], dim=1).reshape(-1)
            alpha = alpha + m._column_potential(c)
        return float(m.const + torch.logsumexp(alpha, dim=0))

    def _exact_bound(self, plan: None) -> float:
        """An a-priori bound (first order in the unit roundoff ``u``) on the float64 error of
        :meth:`exact_log_z`: every message is a log-sum of terms of magnitude at most
        ``M = |c| + sum |b_i| + sum |J_ij| + n log 2``; each of the ``n`` site absorptions and ``W``
        column potentials adds at most a few ulps of ``M`` (an addition and a ``logaddexp``, ``exp`` and
        ``log1p`` within 2 ulp), and the final log-sum-exp a few more."""
        u = 2.0**-53
        n = self.n_sites
        mag = abs(self.const) + float(self.field.abs().sum() + self.J_h.abs().sum() + self.J_v.abs().sum())
        mag += n * math.log(2.0) + 1.0
        steps = 2 * n + max(self.height, self.width) + 2
        return 8.0 * u * steps * mag

    def log_unnormalized_marginal(self, x) -> torch.Tensor:
        """``log f(x)`` of rows ``(n, H W)`` (row-major grids; ``(n, H, W)`` states too), float64 ``(n,)``,
        exact: there is nothing to sum out."""
        return self.log_f(x)

    def exact_log_f(self, x) -> torch.Tensor:
        """The same as :meth:`log_unnormalized_marginal` (the ``exact`` estimator's name)."""
        return self.log_f(x)

    def _column_potential(self, c: int) -> torch.Tensor:
        """``sum_i b_(i,c) s_i + sum_i J_v(i,c) s_i s_(i+1)`` over all ``2^H`` column states
        (site 0 is the most significant bit), float64."""
        H = self.height
        t = torch.tensor([0.0, 1.0], dtype=torch.float64, device=self.device)
        phi = self.field[0, c] * t  # shape (2,), last axis = site 0
        for i in range(1, H):
            prev = phi.view(-1, 2)
            phi = (
                prev[:, :, None]
                + self.field[i, c] * t[None, None, :]
                + self.J_v[i - 1, c] * t[None, :, None] * t[None, None, :]
            ).reshape(-1)
        return phi

    def brute_force_log_z(self) -> float:
        """``log Z`` by enumerating all ``2^(H W)`` states (at most 24 sites; tests)."""
        x = enumerate_states(self.height, self.width, device=self.device)
        out = []
        for chunk in torch.split(x, 1 << 16):
            out.append(self.log_f(chunk))
        return float(torch.logsumexp(torch.cat(out), dim=0))

    # ------------------------------------------------------------------ Gibbs sampling
    def colour_masks(self) -> torch.Tensor:
        """Boolean checkerboard masks, shape ``(2, H, W)``: ``[0]`` where ``(r + c)`` is even."""
        r = torch.arange(self.height, device=self.device)[:, None]
        c = torch.arange(self.width, device=self.device)[None, :]
        even = (r + c) % 2 == 0
        return torch.stack([even, ~even])

    def gibbs(
        self, x, generator: torch.Generator, n_sweeps: int = 1, beta: float = 1.0, p0_logits=None
    ) -> torch.Tensor:
        """``n_sweeps`` checkerboard Gibbs sweeps of ``p_beta ∝ f_0^(1-beta) f^beta`` (``f_0`` the
        factorial distribution with ``p0_logits``; default uniform), batched over chains."""
        x = self.as_states(x)
        logits0 = (
            torch.zeros(self.shape, dtype=torch.float64, device=self.device)
            if p0_logits is None
            else _as_table(p0_logits, "p0_logits", self.shape, self.device)
        )
        masks = self.colour_masks()
        for _ in range(n_sweeps):
            x = _checkerboard_sweep(self, x, float(beta), logits0, masks, generator)
        return x

    # ------------------------------------------------------------------ references / annealing
    def uniform_reference(self) -> "FactorialReference":
        return uniform_reference(self)

    def mean_field(self, **kw) -> "FactorialReference":
        return mean_field(self, **kw)

    def annealing_path(self, init: str = "uniform", data=None, **kw) -> "GridAnnealingPath":
        """The geometric path from ``init`` to this MRF: ``"uniform"``, ``"base-rate"`` (the factorial
        distribution of the site means of the training rows ``data``, ``(n, H W)`` row-major or ``(n, H,
        W)``, smoothed as an RBM's: :func:`~logzbench.models.rbm.base_rate_bias_from_mean`) or
        ``"mean-field"`` (:func:`mean_field`, keywords ``kw``; the trials' reference)."""
        if init == "uniform":
            ref = uniform_reference(self)
        elif init == "base-rate":
            if data is None:
                raise ValueError(
                    "the data-base-rate initial distribution of a grid MRF needs training rows (CLI: --train-data "
                    "X.npy, rows of H*W values 0/1, the grid row-major); a grid model file holds no data_mean"
                )
            from .rbm import base_rate_bias_from_mean

            mean = self.as_states(data).mean(dim=0)
            ref = FactorialReference(base_rate_bias_from_mean(mean).double(), name="base-rate")
        elif init == "mean-field":
            ref = mean_field(self, **kw)
        else:
            raise ValueError(f"unknown initial distribution {init!r}; choose 'uniform', 'base-rate' or 'mean-field'")
        return GridAnnealingPath(self, ref.logits)


def _checkerboard_sweep(
    mrf: GridMRF, x: torch.Tensor, beta: float, logits0: torch.Tensor, masks: torch.Tensor, generator: torch.Generator
) -> torch.Tensor:
    """One sweep: each chain updates one colour, then the other, in an order drawn per chain
    (a fair coin), so the kernel is the mixture ``(K_A K_B + K_B K_A) / 2`` — invariant *and*
    reversible with respect to ``p_beta`` (each half-sweep is an exact block conditional, since
    sites of one colour are conditionally independent given the other colour)."""
    n = x.shape[0]
    bias = (1.0 - beta) * logits0 + beta * mrf.field
    flip = uniform((n,), generator, x.device, torch.float64) < 0.5
    first = masks[0][None] ^ flip[:, None, None]  # (n, H, W): colour updated first in each chain
    for upd in (first, ~first):
        eta = bias + beta * mrf.neighbour_field(x)
        new = bernoulli(torch.sigmoid(eta), generator)
        x = torch.where(upd, new, x)
    return x


# ---------------------------------------------------------------------- annealing path
class GridAnnealingPath:
    """Geometric path between a factorial reference and a grid MRF.

    With ``f_0(x) = exp(sum_i a_i x_i)`` (``a`` the reference logits, ``log Z_0 = sum_i
    softplus(a_i)``) and ``f`` the MRF,

        log f_beta(x) = (1 - beta) a.x + beta log f(x).

    States are float64 ``(n_chains, H, W)`` tensors of 0./1.  The transition is one
    checkerboard Gibbs sweep at ``beta`` with the colour order drawn per chain, which is
    reversible with respect to ``p_beta``.
    """

    def __init__(self, mrf: GridMRF, p0_logits):
        self.mrf = mrf
        if isinstance(p0_logits, FactorialReference):
            p0_logits = p0_logits.logits
        self.a0 = _as_table(p0_logits, "p0_logits", mrf.shape, mrf.device)
        self._masks = mrf.colour_masks()

    def _log_f0(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.a0).sum(dim=(1, 2))

    # AnnealingPath protocol
    def log_z0(self) -> float:
        return float(F.softplus(self.a0).sum())

    def sample_initial(self, n_chains: int, generator: torch.Generator) -> torch.Tensor:
        p = torch.sigmoid(self.a0).expand(int(n_chains), *self.mrf.shape).contiguous()
        return bernoulli(p, generator)

    def log_f(self, state: torch.Tensor, beta: float) -> torch.Tensor:
        return (1.0 - beta) * self._log_f0(state) + beta * (self.mrf.const + self.mrf._energy_terms(state))

    def log_f_ratio(self, state: torch.Tensor, beta_from: float, beta_to: float) -> torch.Tensor:
        """``(beta_to - beta_from) (log f(x) - log f_0(x))``, float64."""
        diff = self.mrf.const + self.mrf._energy_terms(state) - self._log_f0(state)
        return (beta_to - beta_from) * diff

    def transition(self, state: torch.Tensor, beta: float, generator: torch.Generator) -> torch.Tensor:
        return _checkerboard_sweep(self.mrf, state, float(beta), self.a0, self._masks, generator)

    def state_from_data(self, data) -> torch.Tensor:
        data = torch.as_tensor(data, device=self.mrf.device)
        H, W = self.mrf.shape
        if data.ndim == 2 and data.shape[1] == H * W:
            data = data.reshape(-1, H, W)
        if data.ndim != 3 or tuple(data.shape[1:]) != (H, W):
            raise ValueError(
                f"data has shape {tuple(data.shape)}; this {H}x{W} grid expects (n, {H}, {W}) or (n, {H * W})"
            )
        return self.mrf.as_states(data)


# ---------------------------------------------------------------------- the family's exact cost
#: ``couplings`` of :meth:`GridMRF.spin_glass`
SPIN_GLASS_COUPLINGS = ("gaussian", "pm1")


def check_transfer_width(height: int, width: int) -> None:
    """Refuse a grid whose smaller side exceeds :data:`MAX_TRANSFER_WIDTH` (ValueError, one line)."""
    if min(height, width) > MAX_TRANSFER_WIDTH:
        raise ValueError(
            f"exact log Z of a {height}x{width} grid needs 2^{min(height, width)} states per column; "
            f"the transfer-matrix computation is limited to min(H, W) <= {MAX_TRANSFER_WIDTH}. "
            "Use an estimator (ais, raise, sandwich) instead."
        )


def exact_seconds(model: GridMRF, n_rows: int, precision: str, device) -> tuple[float, str]:
    """One-thread seconds of the transfer matrix (``H W 2^min(H, W)`` log-add-exps; ``log f`` of the rows
    is a closed form): the ``exact`` estimator's time estimate (:attr:`logzbench.registry.FamilySpec.exact_time`).
    Refuses ``min(H, W) > 20`` and a precision other than float64 (ValueError)."""
    if precision != "float64":
        raise ValueError(f"the transfer-matrix log Z of a grid MRF is float64 only, not precision={precision!r}")
    H, W = model.height, model.width
    check_transfer_width(H, W)
    k = min(H, W)
    return float(H * W) * 2.0**k / _CPU_OPS_PER_SECOND, f"{max(H, W)} transfer-matrix columns of 2^{k} states"
