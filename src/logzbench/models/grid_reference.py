"""The factorial references of a grid MRF (:mod:`logzbench.models.grid`): fully factorised Bernoulli
distributions over the grid, the start of its annealing paths and the trials' references.

* :class:`FactorialReference`: exact sampling and a normalised ``log_prob``;
* :func:`uniform_reference`: all logits 0;
* :func:`mean_field`: naive mean field (damped block-coordinate fixed-point iteration), with the
  mean-field lower bound on ``log Z`` (:func:`mean_field_log_z_bound`).

Each function takes the MRF (a :class:`~logzbench.models.grid.GridMRF`) as its first argument; this
module does not import it (the model builds its references from here).  Also the checks of a table and
of a batch of grid states that the model and its references share (:func:`_as_table`,
:func:`_states_like`).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..kernels import bernoulli

__all__ = ["FactorialReference", "mean_field", "mean_field_log_z_bound", "uniform_reference"]


def _as_table(x, name: str, shape: tuple[int, ...], device) -> torch.Tensor:
    """A float64 tensor of exactly ``shape`` with finite entries, or a ValueError naming ``name``."""
    if x is None:
        raise ValueError(f"'{name}' is missing")
    t = x.detach() if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x, dtype=np.float64))
    t = t.to(device=device, dtype=torch.float64)
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"'{name}' has shape {tuple(t.shape)}, expected {tuple(shape)}")
    bad = ~torch.isfinite(t)
    if bad.any():
        kinds = [k for k, m in (("NaN", torch.isnan(t)), ("inf", torch.isinf(t))) if m.any()]
        raise ValueError(f"'{name}' contains {' and '.join(kinds)} ({int(bad.sum())} entries)")
    return t.contiguous()


class FactorialReference:
    """A fully factorised Bernoulli distribution over the grid, ``q(x) = prod_i q_i^x_i (1-q_i)^(1-x_i)``
    with ``q_i = sigmoid(logits_i)``.

    Attributes
    ----------
    logits : torch.Tensor, shape (H, W), float64
    name : str
    log_z_bound : float or None
        For mean field, the lower bound ``E_q[log f] + H(q) <= log Z``.
    n_iter : int or None
        Iterations the mean-field fixed point took.
    """

    def __init__(self, logits, name: str = "factorial", log_z_bound: float | None = None, n_iter: int | None = None):
        t = (
            logits.detach()
            if isinstance(logits, torch.Tensor)
            else torch.as_tensor(np.asarray(logits, dtype=np.float64))
        )
        if t.ndim != 2:
            raise ValueError(f"reference logits must have shape (H, W), got {tuple(t.shape)}")
        self.logits = _as_table(t, "reference logits", tuple(t.shape), t.device)
        self.name = name
        self.log_z_bound = log_z_bound
        self.n_iter = n_iter

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.logits.shape[0]), int(self.logits.shape[1]))

    @property
    def marginals(self) -> torch.Tensor:
        """``q_i = P(x_i = 1)``, shape ``(H, W)``."""
        return torch.sigmoid(self.logits)

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` exact independent samples, float64 0./1., shape ``(n, H, W)``."""
        if int(n) != n or n < 1:
            raise ValueError(f"number of samples must be a positive integer, got {n!r}")
        return bernoulli(self.marginals.expand(int(n), *self.shape).contiguous(), generator)

    def log_prob(self, x) -> torch.Tensor:
        """Normalised ``log q(x)`` per state, float64, shape ``(n,)``."""
        x = _states_like(x, self.shape, self.logits.device)
        return (x * self.logits).sum(dim=(1, 2)) - F.softplus(self.logits).sum()

    def entropy(self) -> float:
        q = self.marginals
        return float((F.softplus(self.logits) - q * self.logits).sum())


def _states_like(x, shape: tuple[int, int], device) -> torch.Tensor:
    H, W = shape
    x = torch.as_tensor(x, device=device)
    if x.ndim == 2 and x.shape[1] == H * W:
        x = x.reshape(-1, H, W)
    if x.ndim != 3 or tuple(x.shape[1:]) != (H, W):
        raise ValueError(f"states have shape {tuple(x.shape)}; expected (n, {H}, {W}) or (n, {H * W})")
    x = x.to(torch.float64)
    if not ((x == 0) | (x == 1)).all():
        raise ValueError("grid states must hold only 0 and 1 (found other values or NaN)")
    return x


def uniform_reference(mrf) -> FactorialReference:
    """The uniform distribution over ``{0, 1}^(H W)`` (all logits 0)."""
    return FactorialReference(torch.zeros(mrf.shape, dtype=torch.float64, device=mrf.device), name="uniform")


def mean_field_log_z_bound(mrf, q: torch.Tensor) -> float:
    """``E_q[log f] + H(q)`` for factorial marginals ``q`` (a lower bound on ``log Z``)."""
    q = q.to(torch.float64)
    e = mrf.const + (mrf.field * q).sum()
    if mrf.width > 1:
        e = e + (mrf.J_h * q[:, :-1] * q[:, 1:]).sum()
    if mrf.height > 1:
        e = e + (mrf.J_v * q[:-1, :] * q[1:, :]).sum()
    ent = -(torch.special.xlogy(q, q) + torch.special.xlogy(1 - q, 1 - q)).sum()
    return float(e + ent)


def mean_field(mrf, damping: float = 0.5, tol: float = 1e-10, max_iter: int = 100_000, init=None) -> FactorialReference:
    """Naive mean field: iterate ``q_i <- (1 - damping) q_i + damping sigmoid(b_i + sum_j J_ij q_j)``.

    Updates go one checkerboard colour at a time (block-coordinate ascent: the mean-field
    objective is concave in one colour's marginals given the other's, so every damped block
    update increases it and the iteration converges).  Stops when the largest residual
    ``|sigmoid(eta_i) - q_i|`` is below ``tol``.  The returned reference has ``logits = eta`` of
    the last update (so ``marginals`` satisfy the fixed-point equations to within ``tol``)
    and ``log_z_bound`` the mean-field lower bound on ``log Z``.

    Parameters
    ----------
    damping : float in (0, 1]
        Step towards the block's fixed point (1 = undamped).
    init : array-like (H, W), optional
        Initial marginals (default ``sigmoid(b)``).
    """
    if not (0.0 < float(damping) <= 1.0):
        raise ValueError(f"damping must be in (0, 1], got {damping!r}")
    if not (float(tol) > 0.0):
        raise ValueError(f"tol must be > 0, got {tol!r}")
    masks = mrf.colour_masks()
    q = torch.sigmoid(mrf.field) if init is None else _as_table(init, "init", mrf.shape, mrf.device).clone()
    if ((q < 0) | (q > 1)).any():
        raise ValueError("initial mean-field marginals must lie in [0, 1]")
    eta = mrf.field + mrf.neighbour_field(q[None])[0]
    n_iter = 0
    for n_iter in range(1, int(max_iter) + 1):
        for m in masks:
            eta = mrf.field + mrf.neighbour_field(q[None])[0]
            target = torch.sigmoid(eta)
            q = torch.where(m, (1.0 - damping) * q + damping * target, q)
        eta = mrf.field + mrf.neighbour_field(q[None])[0]
        if float((torch.sigmoid(eta) - q).abs().max()) < tol:
            break
    else:
        raise RuntimeError(f"mean field did not converge in {max_iter} iterations (tol {tol})")
    ref = FactorialReference(eta, name="mean-field", n_iter=n_iter)
    ref.log_z_bound = mean_field_log_z_bound(mrf, ref.marginals)
    return ref
