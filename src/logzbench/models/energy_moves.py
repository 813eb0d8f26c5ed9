"""Gradient-informed Metropolis-Hastings moves for discrete user energies, their pilot tuning, and the
``auto`` chooser.

The target is the geometric path's ``p_beta(x) ∝ r(x)^(1 - beta) f(x)^beta`` on ``{0..q-1}^dim`` (binary:
``q = 2``), ``r`` the path's reference.  Both kernels rank candidate changes by ``D(i, v)``, an estimate of
``log p_beta(x with x_i = v) - log p_beta(x)``:

    D(i, v) = beta * g_i * (v - x_i) + (1 - beta) * (log r_i(v) - log r_i(x_i))

with ``g = grad log f(x)`` (autograd through :meth:`~logzbench.models.energy.EnergyModel.log_f`, with respect
to the state values as ``log_f`` receives them: a flip of a binary site is ``v - x_i = ±1``).  The factorised
reference's term is exact (its site table ``log r_i``; the mixture path's per-chain component's table); a user
reference (an object with ``log_prob``) has no site table and enters only the acceptance, through its exact
``log_prob``.  The estimate only shapes the proposal: each move is Metropolis-Hastings corrected with the exact
``log f`` and ``log r``, so it leaves ``p_beta`` invariant and is reversible with respect to it whatever the
quality of the estimate.

* **GWG** (Gibbs-with-Gradients; Grathwohl, Swersky, Hashemi, Duvenaud & Maddison 2021): the proposal over the
  ``dim (q - 1)`` single-site changes ``(i, v != x_i)`` is ``softmax(D / 2)``.  With ``n_flips = m > 1``: ``m``
  changes ``S`` are drawn with replacement from it and applied (the auxiliary-multiset form).  It is an exact MH
  kernel on the extended space ``(x, S)`` with target ``p_beta(x) q(S | x)``: ``S`` is refreshed from
  ``q(. | x)`` (a Gibbs step), then the involution ``(x, S) -> (x', S~)`` is proposed, ``S~`` the reverse
  changes ``(i, x_i)`` of the ``(i, v)`` in ``S`` in the same order, and accepted with
  ``p_beta(x') q(S~ | x') / (p_beta(x) q(S | x))`` (for a binary site ``S~`` flips the same sites as ``S``);
  an ``S`` that sets one site to two different values is not an involution's point and stays where it is
  (rejected).  Marginally on ``x`` the kernel leaves ``p_beta`` invariant and is reversible (the involution
  pairs the ``S`` taking ``x`` to ``x'`` with those taking ``x'`` back).
* **DMALA** (discrete Langevin; Zhang, Liu & Liu 2022): every site proposed at once and independently,
  ``q_i(v | x) ∝ exp(D(i, v) / 2 - (v - x_i)^2 / (2 alpha))`` over all ``q`` values (``x_i`` included),
  corrected by MH with the reverse proposal computed at ``x'``.

Log-ratios are float64; every random number comes from the caller's ``torch.Generator`` (drawn on its device
and moved to the state's).  A gradient that is NaN or infinite at a state of finite ``log f`` is refused in one
line; states with ``log f = -inf`` get a zero gradient (any function of ``x`` alone is a valid proposal).

The step size ``alpha`` (DMALA) and the number of changes per move ``n_flips`` (GWG) are tuned in a pilot at
``beta = 1`` (:func:`tune_param`) toward :data:`TARGET_ACCEPTANCE`; :func:`choose_transition` is the ``auto``
pilot (effective samples per second at ``beta = 1``).
"""

from __future__ import annotations

import math
import numbers
import time
from typing import Callable, NamedTuple

import torch

from ..kernels._categorical import categorical_from_logits
from ..options import TRANSITIONS  # declared once, with the option (auto resolved by choose_transition)

__all__ = [
    "DEFAULT_PARAM",
    "GRADIENT_TRANSITIONS",
    "PARAM_NAMES",
    "TARGET_ACCEPTANCE",
    "TRANSITIONS",
    "MoveTarget",
    "check_gradient",
    "check_param",
    "check_transition",
    "choose_transition",
    "dmala_log_proposal",
    "dmala_move",
    "gwg_apply",
    "gwg_log_proposal",
    "gwg_move",
    "log_acceptance",
    "log_f_and_grad",
    "log_target",
    "tune_param",
]

#: the transitions that need ``grad log f``
GRADIENT_TRANSITIONS = ("gwg", "dmala")
#: the tuned parameter of each transition
PARAM_NAMES = {"gibbs": None, "gwg": "n_flips", "dmala": "alpha"}
#: the parameter a move uses before it is tuned or set (GWG's single change as in Grathwohl et al.; DMALA's a
#: starting point of the pilot, not a recommendation)
DEFAULT_PARAM = {"gwg": 1, "dmala": 0.2}
#: the acceptance rate the pilot tunes toward: 0.574, the asymptotically optimal acceptance of locally balanced
#: proposals in discrete spaces (Sun, Dai, Dai, Zhou & Schuurmans 2022, "Optimal scaling for locally balanced
#: proposals in discrete spaces"; MALA's figure, Roberts & Rosenthal 1998).  Derived for product-form targets as
#: dim -> infinity: a heuristic for other energies
TARGET_ACCEPTANCE = 0.574
#: the pilot's burn-in from the reference's samples (moves at beta = 1 with :data:`DEFAULT_PARAM`)
TUNE_BURN_IN = 10
#: moves per acceptance measurement in the pilot
TUNE_MOVES = 3
#: GWG's n_flips tried: 1, 2, 4, ... up to this (and the dimension)
MAX_FLIPS = 256
#: DMALA's alpha searched by bisection in log alpha on this bracket, this many halvings
ALPHA_BRACKET = (1e-3, 1e3)
ALPHA_HALVINGS = 8
#: the ``auto`` pilot: transitions from the reference's samples before the measured ones, and measured ones
PILOT_BURN_IN = 3
PILOT_TRANSITIONS = 16


def check_transition(name, model=None) -> str:
    """``name`` if it is a transition of :data:`TRANSITIONS` valid for ``model`` (its domain); else a one-line
    ValueError (an unknown name; ``gwg`` / ``dmala`` on a continuous domain)."""
    if not isinstance(name, str) or name not in TRANSITIONS:
        hint = " (auto is resolved by choose_transition before a path is built)" if name == "auto" else ""
        raise ValueError(f"unknown transition {name!r}; choose gibbs, gwg or dmala{hint}")
    if model is not None and not getattr(model, "discrete", True) and name in GRADIENT_TRANSITIONS:
        raise ValueError(
            f"transition {name} is for discrete domains (binary, categorical); a continuous energy anneals with "
            "Hamiltonian transitions (hais)"
        )
    return name


def check_param(name: str, value):
    """``value`` as the parameter of transition ``name`` (``n_flips``: an integer >= 1; ``alpha``: a finite float
    > 0); a one-line ValueError otherwise."""
    if name == "gwg":
        ok = isinstance(value, numbers.Integral) or isinstance(value, float) and value.is_integer()
        if isinstance(value, bool) or not ok:
            raise ValueError(f"gwg's n_flips must be an integer >= 1, got {value!r}")
        if int(value) < 1:
            raise ValueError(f"gwg's n_flips must be an integer >= 1, got {value!r}")
        return int(value)
    if name == "dmala":
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"dmala's alpha must be a finite number > 0, got {value!r}") from None
        if not (math.isfinite(v) and v > 0.0) or isinstance(value, bool):
            raise ValueError(f"dmala's alpha must be a finite number > 0, got {value!r}")
        return v
    raise ValueError(f"transition {name} has no parameter to set")


class MoveTarget(NamedTuple):
    """What a move needs of ``p_beta``: ``beta``; ``table``, the factorised reference's ``log r_i(v)`` ``(dim, q)``
    or per chain ``(n, dim, q)`` (float64), ``None`` for a user reference; ``log_r``, the user reference's exact
    ``log r(x)`` of a batch (float64 ``(n,)``), ``None`` with a table."""

    beta: float
    table: torch.Tensor | None
    log_r: Callable[[torch.Tensor], torch.Tensor] | None


# --------------------------------------------------------------------------- shared pieces
def log_f_and_grad(model, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(log f(x), grad log f(x))``, float64 ``(n,)`` and ``(n, dim)``, by one forward and backward pass of
    ``model.log_f`` (autograd; the gradient with respect to the state values as ``log_f`` receives them).

    A ``log_f`` whose output does not depend on its input through autograd (``x.long()``, ``one_hot``, numpy)
    and a gradient that is NaN or infinite where ``log f`` is finite are refused in one line; rows with
    ``log f = -inf`` get a zero gradient."""
    xg = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        lf = model.log_f(xg)
        grad = None
        if lf.requires_grad:
            (grad,) = torch.autograd.grad(lf, xg, grad_outputs=torch.ones_like(lf), allow_unused=True)
    if grad is None:
        raise ValueError(
            f"log_f ({model.name}) is not differentiable in its input (x.long(), one_hot or numpy cut the autograd "
            "graph); gwg and dmala need its gradient: write log_f in float operations on x or use transition gibbs"
        )
    lf, grad = lf.detach(), grad.double()
    finite = torch.isfinite(lf)
    if bool(finite.all()) and bool(torch.isfinite(grad).all()):  # the common case: two reductions, no copies
        return lf, grad
    for bad, what in ((torch.isnan(grad).any(1), "NaN"), (torch.isinf(grad).any(1), "an infinite")):
        k = int((bad & finite).sum())
        if k:
            raise ValueError(
                f"log_f ({model.name}) has {what} gradient at {k} of {int(x.shape[0])} states; gwg and dmala need a "
                "finite gradient of log_f (use transition gibbs)"
            )
    return lf, torch.where(finite.unsqueeze(1), grad, torch.zeros_like(grad))


def check_gradient(model, n: int = 4, seed: int = 0) -> None:
    """Refuse, in one line (:func:`log_f_and_grad`'s), a ``log_f`` without a usable gradient: called on ``n``
    uniform states of the domain from a generator of its own (the run's is not touched), when a gradient
    move's path is built."""
    g = torch.Generator(device=model.device).manual_seed(int(seed))
    x = torch.randint(0, int(model.n_states), (int(n), model.dim), generator=g, device=model.device)
    log_f_and_grad(model, x.to(model.dtype))


def log_acceptance(log_p_new, log_p_old, log_q_reverse, log_q_forward) -> torch.Tensor:
    """The Metropolis-Hastings log acceptance probability
    ``min(0, log p(x') - log p(x) + log q(x | x') - log q(x' | x))``, float64; NaN (``-inf - -inf``) is
    ``-inf`` (rejected)."""
    a = (log_p_new - log_p_old) + (log_q_reverse - log_q_forward)
    a = torch.where(torch.isnan(a), torch.full_like(a, -math.inf), a)
    return torch.clamp(a, max=0.0)


def log_target(lr: torch.Tensor, lf: torch.Tensor, beta: float) -> torch.Tensor:
    """``log f_beta = (1 - beta) lr + beta lf`` of the geometric path, with ``0 * (-inf) = 0`` at the ends (beta 0
    ignores ``f``, 1 ignores ``r``): the target of every transition of a discrete energy's path."""
    if beta <= 0.0:
        return lr
    if beta >= 1.0:
        return lf
    return (1.0 - beta) * lr + beta * lf


def _deltas(x: torch.Tensor, grad: torch.Tensor | None, target: MoveTarget, q: int) -> torch.Tensor:
    """``D(i, v)`` (module docstring) for every site and value, float64 ``(n, dim, q)`` (``D(i, x_i) = 0``)."""
    beta = float(target.beta)
    xv = x.double()
    diff = torch.arange(q, dtype=torch.float64, device=x.device) - xv.unsqueeze(2)  # v - x_i
    d = torch.zeros_like(diff)
    if beta > 0.0:
        d = d + beta * grad.to(x.device).unsqueeze(2) * diff
    if beta < 1.0 and target.table is not None:
        table = target.table.to(x.device)
        table = table.expand(x.shape[0], -1, -1) if table.dim() == 2 else table
        d = d + (1.0 - beta) * (table - table.gather(2, x.long().unsqueeze(2)))
    return d


def _log_r_new(x: torch.Tensor, x_new: torch.Tensor, lr: torch.Tensor, target: MoveTarget) -> torch.Tensor:
    """``log r(x')``: ``lr`` plus the site-table differences (a factorised reference), or the user's exact
    ``log_prob``."""
    if target.table is None:
        return target.log_r(x_new)
    table = target.table.to(x.device)
    if table.shape[-1] == 2:  # binary: each change is a flip, +-(log r_i(1) - log r_i(0))
        return lr + ((x_new - x).double() * (table[..., 1] - table[..., 0])).sum(1)
    table = table.expand(x.shape[0], -1, -1) if table.dim() == 2 else table
    old = table.gather(2, x.long().unsqueeze(2)).squeeze(2)
    new = table.gather(2, x_new.long().unsqueeze(2)).squeeze(2)
    return lr + (new - old).sum(1)


def _uniforms(shape, generator: torch.Generator, device) -> torch.Tensor:
    return torch.rand(shape, generator=generator, dtype=torch.float64, device=generator.device).to(device)


# --------------------------------------------------------------------------- binary sites
# On {0, 1}^dim the only change of a site is its flip, so ``D(i, 1 - x_i) = s_i c_i`` with ``s = 1 - 2x`` and
# ``c = beta g + (1 - beta) (log r_i(1) - log r_i(0))``: the moves below work on ``(n, dim)`` arrays instead of
# the general ``(n, dim, q)`` ones (a softmax over a last axis of 2 costs about ten times an elementwise op).
# They draw from the same proposals as the general functions, which the tests' transition matrices are built
# from (``gwg_log_proposal``, ``dmala_log_proposal``).
def _flip_coef(grad: torch.Tensor, target: MoveTarget, n: int, device) -> torch.Tensor:
    """``c`` (above), float64 ``(n, dim)``."""
    beta = float(target.beta)
    c = beta * grad.to(device) if beta > 0.0 else torch.zeros_like(grad, device=device)
    if beta < 1.0 and target.table is not None:
        table = target.table.to(device)
        c = c + (1.0 - beta) * (table[..., 1] - table[..., 0])
    return c


def _gwg_binary(model, x, lf, lr, grad, target: MoveTarget, n_flips: int, generator: torch.Generator):
    """:func:`gwg_move` on binary sites: ``n_flips`` sites drawn from ``softmax(s c / 2)``, flipped."""
    n, dev = x.shape[0], x.device
    log_q = torch.log_softmax((1.0 - 2.0 * x.double()) * _flip_coef(grad, target, n, dev) / 2.0, dim=1)
    cdf = torch.cumsum(torch.exp(log_q), dim=1)
    u = _uniforms((n, int(n_flips)), generator, dev)
    sites = torch.searchsorted(cdf, u, right=True).clamp_(max=log_q.shape[1] - 1)
    x_new = x.clone().scatter_(1, sites, 1.0 - x.gather(1, sites))  # a site drawn twice is set once, as gwg_apply
    lf_new, grad_new = log_f_and_grad(model, x_new)
    lr_new = _log_r_new(x, x_new, lr, target)
    coef_new = _flip_coef(grad_new, target, n, dev)
    log_q_new = torch.log_softmax((1.0 - 2.0 * x_new.double()) * coef_new / 2.0, dim=1)
    log_q_reverse = log_q_new.gather(1, sites).sum(1)  # the reverse changes flip the same sites back
    log_q_forward = log_q.gather(1, sites).sum(1)
    new, old = (x_new, lf_new, lr_new, grad_new), (x, lf, lr, grad)
    return _metropolis(new, old, target, log_q_reverse, log_q_forward, generator)


def _dmala_binary(model, x, lf, lr, grad, target: MoveTarget, alpha: float, generator: torch.Generator):
    """:func:`dmala_move` on binary sites: each site flipped with probability ``sigmoid(a)``,
    ``a = s c / 2 - 1/(2 alpha)`` (``log q(stay) = log q(flip) - a``: one log-sigmoid per state)."""
    n, dev = x.shape[0], x.device
    penalty = torch.tensor(-1.0 / (2.0 * float(alpha)), dtype=torch.float64, device=dev)
    sign = 1.0 - 2.0 * x.double()
    a = torch.addcmul(penalty, sign, _flip_coef(grad, target, n, dev), value=0.5)
    log_flip = torch.nn.functional.logsigmoid(a)
    flip = (_uniforms(a.shape, generator, dev).log_() < log_flip).double()  # 0./1. masks: cheaper than where
    x_new = x + (flip * sign).to(x.dtype)
    lf_new, grad_new = log_f_and_grad(model, x_new)
    lr_new = _log_r_new(x, x_new, lr, target)
    a_new = torch.addcmul(penalty, sign - 2.0 * flip * sign, _flip_coef(grad_new, target, n, dev), value=0.5)
    log_flip_new = torch.nn.functional.logsigmoid(a_new)
    log_q_reverse = log_flip_new.sum(1) - (a_new - a_new * flip).sum(1)  # back: the same sites flip, the rest stay
    log_q_forward = log_flip.sum(1) - (a - a * flip).sum(1)
    new, old = (x_new, lf_new, lr_new, grad_new), (x, lf, lr, grad)
    return _metropolis(new, old, target, log_q_reverse, log_q_forward, generator)


# --------------------------------------------------------------------------- GWG
def gwg_log_proposal(x: torch.Tensor, grad: torch.Tensor | None, target: MoveTarget, q: int) -> torch.Tensor:
    """``log q(i, v | x)`` of GWG's single changes, float64 ``(n, dim * q)`` (index ``i * q + v``):
    ``log_softmax(D / 2)`` over the changes ``v != x_i`` (``-inf`` at ``v = x_i``)."""
    d = _deltas(x, grad, target, q) / 2.0
    current = torch.nn.functional.one_hot(x.long(), q).bool()
    d = d.masked_fill(current, -math.inf)
    return torch.log_softmax(d.reshape(x.shape[0], -1), dim=1)


def gwg_apply(x: torch.Tensor, idx: torch.Tensor, q: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Apply the changes ``idx`` ``(n, m)`` (index ``i * q + v``: set site ``i`` to ``v``) to ``x``: returns
    ``(x', reverse, valid)``, the reverse changes ``(i, x_i)`` in the same order, and whether no site is set to
    two different values (where it is, ``x'`` is ``x``: not an involution's point, the move is rejected)."""
    sites, vals = idx // q, idx % q
    same_site = sites.unsqueeze(2) == sites.unsqueeze(1)
    valid = ~(same_site & (vals.unsqueeze(2) != vals.unsqueeze(1))).any(2).any(1)
    reverse = sites * q + x.long().gather(1, sites)
    x_new = x.clone().scatter_(1, sites, vals.to(x.dtype))
    x_new = torch.where(valid.unsqueeze(1), x_new, x)
    return x_new, reverse, valid


def gwg_move(model, x, lf, lr, grad, target: MoveTarget, n_flips: int, generator: torch.Generator):
    """One GWG move of every chain (module docstring) from ``x`` with cached ``lf``, ``lr`` and ``grad``
    (``None``: computed here): returns ``(x, lf, lr, grad, accepted)``."""
    q = int(model.n_states)
    if grad is None:
        lf, grad = log_f_and_grad(model, x)
    if q == 2:
        return _gwg_binary(model, x, lf, lr, grad, target, n_flips, generator)
    n, dev = x.shape[0], x.device
    log_q = gwg_log_proposal(x, grad, target, q)
    cdf = torch.cumsum(torch.exp(log_q), dim=1)
    u = _uniforms((n, int(n_flips)), generator, dev)
    # inverse CDF, the rule of categorical_from_logits (the cdf computed once for the m draws)
    idx = torch.searchsorted(cdf, u, right=True).clamp_(max=log_q.shape[1] - 1)
    x_new, reverse, valid = gwg_apply(x, idx, q)
    lf_new, grad_new = log_f_and_grad(model, x_new)
    lr_new = _log_r_new(x, x_new, lr, target)
    log_q_new = gwg_log_proposal(x_new, grad_new, target, q)
    log_q_reverse = log_q_new.gather(1, reverse).sum(1)
    log_q_forward = log_q.gather(1, idx).sum(1)
    new, old = (x_new, lf_new, lr_new, grad_new), (x, lf, lr, grad)
    return _metropolis(new, old, target, log_q_reverse, log_q_forward, generator, valid=valid)


# --------------------------------------------------------------------------- DMALA
def dmala_log_proposal(
    x: torch.Tensor, grad: torch.Tensor | None, target: MoveTarget, q: int, alpha: float
) -> torch.Tensor:
    """``log q_i(v | x)`` of DMALA's independent site proposals, float64 ``(n, dim, q)``:
    ``log_softmax_v(D(i, v) / 2 - (v - x_i)^2 / (2 alpha))``."""
    diff = torch.arange(q, dtype=torch.float64, device=x.device) - x.double().unsqueeze(2)
    logits = _deltas(x, grad, target, q) / 2.0 - diff**2 / (2.0 * float(alpha))
    return torch.log_softmax(logits, dim=2)


def dmala_move(model, x, lf, lr, grad, target: MoveTarget, alpha: float, generator: torch.Generator):
    """One DMALA move of every chain (module docstring): returns ``(x, lf, lr, grad, accepted)``."""
    q = int(model.n_states)
    if grad is None:
        lf, grad = log_f_and_grad(model, x)
    if q == 2:
        return _dmala_binary(model, x, lf, lr, grad, target, alpha, generator)
    dev = x.device
    log_q = dmala_log_proposal(x, grad, target, q, alpha)
    draw = categorical_from_logits(log_q.to(generator.device), generator).to(dev)  # (n, dim)
    x_new = draw.to(x.dtype)
    lf_new, grad_new = log_f_and_grad(model, x_new)
    lr_new = _log_r_new(x, x_new, lr, target)
    log_q_new = dmala_log_proposal(x_new, grad_new, target, q, alpha)
    log_q_reverse = log_q_new.gather(2, x.long().unsqueeze(2)).sum((1, 2))
    log_q_forward = log_q.gather(2, draw.unsqueeze(2)).sum((1, 2))
    new, old = (x_new, lf_new, lr_new, grad_new), (x, lf, lr, grad)
    return _metropolis(new, old, target, log_q_reverse, log_q_forward, generator)


def _metropolis(new: tuple, old: tuple, target: MoveTarget, log_q_reverse, log_q_forward, generator, valid=None):
    """Accept each chain's proposal ``new = (x', lf', lr', grad')`` over ``old`` with the Metropolis-Hastings
    probability for ``p_beta`` (:func:`log_acceptance`; ``valid`` false: rejected); returns the rows kept and
    ``accepted``."""
    beta = float(target.beta)
    log_p_new, log_p_old = log_target(new[2], new[1], beta), log_target(old[2], old[1], beta)
    log_a = log_acceptance(log_p_new, log_p_old, log_q_reverse, log_q_forward)
    accept = torch.log(_uniforms(log_a.shape[0], generator, log_a.device)) < log_a
    if valid is not None:
        accept = accept & valid
    return _select(accept, new, old) + (accept,)


def _select(accept: torch.Tensor, new: tuple, old: tuple) -> tuple:
    """Row-wise ``new`` where ``accept`` else ``old``, for each of the tensors ``(n, ...)``."""
    out = []
    for a, b in zip(new, old):
        mask = accept.reshape((-1,) + (1,) * (a.dim() - 1))
        out.append(torch.where(mask, a, b))
    return tuple(out)


# --------------------------------------------------------------------------- the pilot
def tune_param(name: str, dim: int, run: Callable[[object, int], float]) -> dict:
    """Tune transition ``name``'s parameter by acceptance rate, ``run(param, n_moves) -> acceptance`` moving the
    pilot's chains at ``beta = 1``.  After :data:`TUNE_BURN_IN` moves with :data:`DEFAULT_PARAM`:

    * ``gwg``: ``n_flips`` = the largest of 1, 2, 4, ... (up to ``min(dim, MAX_FLIPS)``) whose acceptance is at
      least :data:`TARGET_ACCEPTANCE` (tried in increasing order until one falls below; 1 if none reaches it);
    * ``dmala``: ``alpha`` by bisection in ``log alpha`` on :data:`ALPHA_BRACKET` (:data:`ALPHA_HALVINGS`
      halvings; acceptance falls as ``alpha`` grows), then measured once more at the value kept.

    Returns ``{"param_name", "param", "acceptance", "sweeps"}`` (``sweeps``: moves per chain)."""
    sweeps = TUNE_BURN_IN
    run(DEFAULT_PARAM[name], TUNE_BURN_IN)
    if name == "gwg":
        best, best_acc, m = 1, float("nan"), 1
        while m <= min(int(dim), MAX_FLIPS):
            acc = run(m, TUNE_MOVES)
            sweeps += TUNE_MOVES
            if m == 1:
                best_acc = acc
            if acc < TARGET_ACCEPTANCE:
                break
            best, best_acc, m = m, acc, 2 * m
        return {"param_name": "n_flips", "param": best, "acceptance": best_acc, "sweeps": sweeps}
    lo, hi = math.log(ALPHA_BRACKET[0]), math.log(ALPHA_BRACKET[1])
    for _ in range(ALPHA_HALVINGS):
        mid = 0.5 * (lo + hi)
        if run(math.exp(mid), TUNE_MOVES) >= TARGET_ACCEPTANCE:
            lo = mid
        else:
            hi = mid
        sweeps += TUNE_MOVES
    alpha = math.exp(0.5 * (lo + hi))
    acc = run(alpha, TUNE_MOVES)
    return {"param_name": "alpha", "param": alpha, "acceptance": acc, "sweeps": sweeps + TUNE_MOVES}


def choose_transition(
    model_or_path_factory,
    n_chains: int,
    generator: torch.Generator,
    *,
    candidates=TRANSITIONS,
    n_transitions: int = PILOT_TRANSITIONS,
    burn_in: int = PILOT_BURN_IN,
    init: str = "uniform",
    data=None,
    reference=None,
) -> dict:
    """The ``auto`` pilot: the transition of most effective samples per second at ``beta = 1``.

    ``model_or_path_factory``: an :class:`~logzbench.models.energy.EnergyModel` (its paths built by
    ``annealing_path(init, data=, reference=, transition=name)``) or a callable ``name -> path``.  For each of
    ``candidates``: a fresh path, its pilot (``path.tune(n_chains, generator)``: the parameter frozen on it),
    ``burn_in`` transitions from the reference's samples at ``beta = 1``, then ``n_transitions`` measured ones;
    the statistic is ``log f`` of each chain after each measured transition, its effective sample size the bulk
    ESS of ``arviz-stats`` (rank-normalised, from the autocorrelation across the ``n_chains`` chains; capped at
    the number of draws, which a short antithetic trace can appear to exceed), divided by the measured
    transitions' wall time.  The gradient moves are measured first; a later candidate whose first transition
    shows it cannot beat the best so far (its effective samples per second are at most ``n_chains`` per
    transition's seconds, the ESS being capped at the draws) is recorded with that bound
    (``ess_per_s_bound``), ``skipped`` and ``ess_per_s`` ``None``, and not measured further.  A candidate whose
    ``log_f`` has no usable gradient is recorded with its ``refused`` reason and ``ess_per_s`` 0.  All
    randomness from ``generator``.

    Returns ``{"transition": picked, "candidates": {name: {"ess_per_s", "ess", "seconds", "param_name",
    "param", "acceptance"[, "refused"]}}, "sweeps": transitions per chain run by the whole pilot}``.  The picked
    path of the measured run may take ``candidates[picked]["param"]`` as its ``move_param`` (then
    ``path.tune`` runs no second pilot)."""
    from arviz_stats.base import array_stats  # lazy: importing arviz-stats takes about a second

    if hasattr(model_or_path_factory, "annealing_path"):
        model = model_or_path_factory
        if not getattr(model, "discrete", True):
            raise ValueError("transition auto is for discrete domains; a continuous energy anneals with hais")

        def factory(name):
            return model.annealing_path(init, data=data, reference=reference, transition=name)
    elif callable(model_or_path_factory):
        factory = model_or_path_factory
    else:
        raise ValueError("choose_transition needs an EnergyModel or a callable transition name -> path")
    names = [check_transition(c) for c in candidates]
    if not names:
        raise ValueError("choose_transition needs at least one candidate transition")
    out, sweeps = {}, 0
    # the gradient moves first: a gibbs sweep (dim calls of log_f) is often the dearest, and once a candidate
    # is measured, another whose bound cannot beat it is not measured (below)
    order = [n for n in names if n in GRADIENT_TRANSITIONS] + [n for n in names if n not in GRADIENT_TRANSITIONS]
    for name in order:
        try:
            path = factory(name)
            tuned = path.tune(n_chains, generator)
            sweeps += int(tuned["sweeps"])
            state = path.sample_initial(n_chains, generator)
            t1 = time.perf_counter()
            state = path.transition(state, 1.0, generator)
            device = path.log_f(state, 1.0).device
            if device.type == "cuda":  # the time of the work, not of its launch
                torch.cuda.synchronize(device)
            sweeps += 1
            best = max((c["ess_per_s"] for c in out.values() if c["ess_per_s"] is not None), default=0.0)
            bound = n_chains / max(time.perf_counter() - t1, 1e-9)  # ESS <= the draws (capped below)
            if bound < best:  # its ESS per second cannot reach the best measured: not measured further
                out[name] = {"ess_per_s": None, "ess_per_s_bound": bound, "ess": None, "seconds": None}
                out[name].update(param_name=tuned["param_name"], param=tuned["param"], acceptance=tuned["acceptance"])
                out[name]["skipped"] = f"at most {bound:.3g} effective samples/s (n_chains per transition's seconds)"
                continue
            for _ in range(int(burn_in) - 1):
                state = path.transition(state, 1.0, generator)
            trace = []
            t0 = time.perf_counter()
            for _ in range(int(n_transitions)):
                state = path.transition(state, 1.0, generator)
                trace.append(path.log_f(state, 1.0))
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            seconds = time.perf_counter() - t0
            sweeps += int(burn_in) - 1 + int(n_transitions)
        except ValueError as exc:
            if name not in GRADIENT_TRANSITIONS or "gradient" not in str(exc):
                raise
            out[name] = {"ess_per_s": 0.0, "ess": 0.0, "seconds": float("nan"), "param_name": PARAM_NAMES[name]}
            out[name].update(param=None, acceptance=float("nan"), refused=str(exc))
            continue
        chains = torch.stack(trace, dim=1).cpu().numpy()  # (n_chains, n_transitions)
        ess = float(array_stats.ess(chains, chain_axis=0, draw_axis=1, method="bulk"))
        ess = ess if math.isfinite(ess) else 0.0  # a constant trace (nothing moved): no information
        ess = min(ess, float(chains.size))  # above the draws: anticorrelation estimated from short chains
        out[name] = {
            "ess_per_s": ess / max(seconds, 1e-9),
            "ess": ess,
            "seconds": seconds,
            "param_name": tuned["param_name"],
            "param": tuned["param"],
            "acceptance": tuned["acceptance"],
        }
    picked = max((k for k in names if out[k]["ess_per_s"] is not None), key=lambda k: out[k]["ess_per_s"])
    return {"transition": picked, "candidates": {k: out[k] for k in names}, "sweeps": sweeps}
