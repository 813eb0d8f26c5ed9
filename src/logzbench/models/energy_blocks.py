"""Block Gibbs over colour classes: a user's exact conditional for an
:class:`~logzbench.models.energy.EnergyModel` (``conditional=fn, colouring=classes``).

The colouring
    A list of ``C`` colour classes, each a sequence of site indices; every site is in exactly one class,
    and no two sites of one class interact: ``log f`` is, for each class, a sum of terms each holding at
    most one of its sites, so given the other classes' sites the sites of a class are independent.  A
    bipartite energy (an RBM written by hand over its visible and hidden units) has two classes; a
    nearest-neighbour grid, two (a checkerboard).

The conditional ``fn(x, c) -> logits``
    For all chains at once: ``x``, the ``(n, dim)`` states (the model's dtype and device), and ``c``, the
    class's index (``0 .. C - 1``, an ``int``).  It returns the logits of the class's sites given the rest,
    in the order the class lists them:

    * binary: ``(n, len(class))``, the log-odds of 1, ``log f(x_i = 1, rest) - log f(x_i = 0, rest)``;
    * categorical: ``(n, len(class), q)``, ``log f(x_i = v, rest)`` up to a constant per chain and site.

    The class's own entries of ``x`` are ignored (their conditional is asked for).  A hand-written RBM
    with visible sites ``0 .. V-1`` and hidden ``V .. V+H-1``::

        def conditional(x, c):
            if c == 0:                       # the visible units given the hidden ones
                return x[:, V:] @ W.T + a
            return x[:, :V] @ W + b          # the hidden units given the visible ones

        EnergyModel(log_f, V + H, "binary", conditional=conditional, colouring=[range(V), range(V, V + H)])

The transition (:func:`block_gibbs_sweep`)
    Along the geometric path ``p_beta ~ r^(1 - beta) f^beta`` from a factorised reference ``r`` the sites of
    a class stay independent given the rest, with logits ``(1 - beta) log r_i(v) + beta logit_i(v)``: each
    class update is an exact draw from its conditional under ``p_beta`` (reversible on its own).  A fixed
    scan ``0, 1, .., C-1`` is not reversible; each chain instead runs the classes forward or in reverse
    order, with probability 1/2 per sweep, and the even mixture of a scan and its reverse is self-adjoint
    (the adjoint of ``K_0 .. K_{C-1}`` is ``K_{C-1} .. K_0``), so the sweep is reversible with respect to
    ``p_beta`` and RAISE's reverse chains are valid.  All chains run one schedule ``0, 1, .., C-1, .., 1,
    0``, each masked to its own half: a sweep costs ``2C - 1`` calls of ``fn`` on all chains (3 for two
    classes, against 2 for the fixed scan: the price of reversibility) and one call of ``log_f`` (the
    chain state caches ``log f``).  A user reference without per-site terms has no such conditional; the
    path then keeps the Metropolis-within-Gibbs sweep.

:func:`check_conditional` (called by :meth:`EnergyModel.check` and before the first path) compares ``fn``
with ``log f`` differences on a few states and refuses a wrong one in one line; its check that no class
couples two of its sites is on sampled states and pairs, so a coupling it does not sample passes.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..kernels import categorical_from_logits
from .energy_moves import log_target
from .energy_path import _checked, first_line

__all__ = [
    "CHECK_PAIRS",
    "block_gibbs_sweep",
    "check_conditional",
    "conditional_logits",
    "parse_colouring",
    "schedule",
]

#: pairs of sites per class on which :func:`check_conditional` looks for a coupling (all pairs when fewer)
CHECK_PAIRS = 32
#: the check's tolerance, in units of the float precision of ``log_f`` and ``fn`` times the largest
#: magnitude they take on the checked states (a float32 ``log f`` of size 1000 is off by about 1e-4)
CHECK_ULPS = 64
#: states (rows x dim) per call of ``log_f`` in the check
CHECK_ELEMENTS = 1 << 22


def parse_colouring(colouring, dim: int) -> tuple[torch.Tensor, ...]:
    """The classes of ``colouring`` as int64 index tensors (CPU); a ValueError, one line, unless every site
    ``0 .. dim-1`` is in exactly one non-empty class."""
    if isinstance(colouring, (str, bytes)) or not hasattr(colouring, "__iter__"):
        raise ValueError(f"colouring must be a list of colour classes (sequences of site indices), got {colouring!r}")
    classes, seen = [], {}
    for c, cls in enumerate(colouring):
        try:
            arr = np.asarray(cls.cpu() if isinstance(cls, torch.Tensor) else list(cls))
        except TypeError:
            raise ValueError(f"colouring: class {c} is a {type(cls).__name__}, not a sequence of sites") from None
        if arr.size == 0:
            raise ValueError(f"colouring: class {c} is empty")
        if arr.ndim != 1 or not (np.issubdtype(arr.dtype, np.integer) and arr.dtype != np.bool_):
            raise ValueError(f"colouring: class {c} must be a flat sequence of integer site indices")
        for i in arr.tolist():
            if not 0 <= i < dim:
                raise ValueError(f"colouring: class {c} has site {i}, outside 0..{dim - 1}")
            if i in seen:
                where = f"classes {seen[i]} and {c}" if seen[i] != c else f"class {c} twice"
                raise ValueError(f"colouring: site {i} is in {where}; each site must be in exactly one class")
            seen[i] = c
        classes.append(torch.as_tensor(arr, dtype=torch.int64))
    if len(seen) != dim:
        missing = sorted(set(range(dim)) - set(seen))
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ValueError(f"colouring: site {missing[0]}{more} is in no class; every site 0..{dim - 1} must be in one")
    return tuple(classes)


def schedule(n_classes: int) -> list[tuple[int, str]]:
    """The masked schedule of one sweep: ``(class, who)`` per step, ``who`` one of ``"forward"``, ``"both"``,
    ``"reverse"`` (the chains that update at that step): ``2C - 1`` steps for ``C`` classes."""
    C = int(n_classes)
    steps = [(c, "forward") for c in range(C - 1)] + [(C - 1, "both")]
    return steps + [(c, "reverse") for c in range(C - 2, -1, -1)]


def conditional_logits(model, x: torch.Tensor, c: int) -> torch.Tensor:
    """``fn(x, c)`` of ``model``'s conditional, float64, checked: a tensor of the class's shape (binary
    ``(n, m)``, categorical ``(n, m, q)``), float32 or float64, no NaN (nor ``+inf`` for categorical
    logits); a ValueError, one line, otherwise (the user's exception too)."""
    return _conditional(model, x, c)[0]


def _conditional(model, x: torch.Tensor, c: int) -> tuple[torch.Tensor, float]:
    """:func:`conditional_logits` and the float epsilon of ``fn``'s own output dtype."""
    name = getattr(model.conditional, "__name__", None) or type(model.conditional).__name__
    n, m = int(x.shape[0]), int(model.colouring[c].numel())
    try:
        out = model.conditional(x.to(dtype=model.dtype, device=model.device), int(c))
    except (Exception, SystemExit) as exc:
        raise ValueError(f"conditional ({name}) raised {first_line(exc)} on class {c}") from exc
    want = (n, m) if model.n_states == 2 and model.domain_name == "binary" else (n, m, int(model.n_states))
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"conditional ({name}) returned a {type(out).__name__} for class {c}, not a torch.Tensor")
    if tuple(out.shape) != want:
        raise ValueError(
            f"conditional ({name}) returned shape {tuple(out.shape)} for class {c} of {m} sites on {n} states; "
            f"expected {want}"
        )
    if out.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"conditional ({name}) returned dtype {out.dtype}; expected float32 or float64")
    eps = float(torch.finfo(out.dtype).eps)
    out = out.double()
    if torch.isnan(out).any():
        raise ValueError(f"conditional ({name}) returned NaN for class {c}")
    if len(want) == 3 and (out == math.inf).any():
        raise ValueError(f"conditional ({name}) returned a logit of +inf for class {c}")
    return out, eps


def block_gibbs_sweep(model, x: torch.Tensor, beta: float, generator: torch.Generator, log_r: torch.Tensor):
    """One reversible block-Gibbs sweep at ``beta`` (module docstring): the new states ``(n, dim)``.

    ``log_r``: the factorised reference's per-site log-probabilities, ``(dim, q)``, or ``(n, dim, q)`` when
    each chain has its own (the mixture path's component).  Uses only ``generator``: one float64 uniform
    per chain for its order, then one per chain and site of each step (drawn for every chain, active or
    not, so the draws do not depend on the orders)."""
    x = x.clone()
    n, dev, gdev = int(x.shape[0]), x.device, generator.device
    beta = float(beta)
    binary = model.domain_name == "binary"
    log_r = log_r.to(dev)
    reverse = (torch.rand(n, generator=generator, dtype=torch.float64, device=gdev) < 0.5).to(dev)
    for c, who in schedule(len(model.colouring)):
        idx = model.colouring[c].to(dev)
        active = torch.ones_like(reverse) if who == "both" else (reverse if who == "reverse" else ~reverse)
        lr = log_r[..., idx, :]  # (m, q) or (n, m, q)
        logits = conditional_logits(model, x, c) if beta > 0.0 else None
        if binary:
            r_odds = lr[..., 1] - lr[..., 0]
            a = log_target(r_odds, logits if logits is not None else r_odds, beta).expand(n, -1)
            u = torch.rand(n, int(idx.numel()), generator=generator, dtype=torch.float64, device=gdev).to(dev)
            new = (u < torch.sigmoid(a)).to(x.dtype)
        else:
            a = log_target(lr, logits if logits is not None else lr, beta).expand(n, -1, -1)
            new = categorical_from_logits(a.to(gdev), generator).to(dev).to(x.dtype)
        x[:, idx] = torch.where(active[:, None], new, x[:, idx])
    return x


def _log_f_rows(model, states: torch.Tensor) -> tuple[torch.Tensor, float]:
    """``log f`` of ``states`` ``(N, dim)`` in chunks (float64, checked) and the float epsilon of
    ``log_f``'s own output dtype."""
    chunk = max(1, CHECK_ELEMENTS // model.dim)
    out, eps = [], float(torch.finfo(model.dtype).eps) if model.dtype.is_floating_point else 2.0**-52
    for start in range(0, int(states.shape[0]), chunk):
        part = states[start : start + chunk]
        raw = model._call(part)
        lf = _checked(raw, int(part.shape[0]), model.name)
        eps = max(eps, float(torch.finfo(raw.dtype).eps))
        out.append(lf)
    return torch.cat(out), eps


def _magnitude(*ts: torch.Tensor) -> float:
    finite = [t[torch.isfinite(t)].abs() for t in ts]
    return max([1.0] + [float(f.max()) for f in finite if f.numel()])


@torch.no_grad()
def check_conditional(model, n: int = 4, seed: int = 0) -> None:
    """Refuse (ValueError, one line) a colouring that couples two sites of one class or a conditional that
    disagrees with ``log f`` differences, on ``n`` uniform states (a generator of its own, seeded ``seed``).

    * coupling: for up to :data:`CHECK_PAIRS` sampled pairs ``(i, j)`` of each class and each state, the
      change of ``log f`` from one value of site ``i`` to another must not depend on the value of site ``j``;
    * values: every site of every class, every value: ``fn``'s logits against ``log f(x_i = v, rest)``
      (binary: the log-odds exactly; categorical: up to a constant per site, compared after log-softmax).

    The tolerance is :data:`CHECK_ULPS` float epsilons (of ``log_f``'s and ``fn``'s output dtypes, and the
    model's) times the largest magnitude of ``log f`` and the logits on the checked states.  States where
    ``log f`` is ``-inf`` for both values compared say nothing and are skipped."""
    dev, q, dim = model.device, int(model.n_states), model.dim
    g = torch.Generator(device=dev).manual_seed(int(seed))
    x = torch.randint(0, q, (n, dim), generator=g, device=dev).to(model.dtype)
    for c, idx in enumerate(model.colouring):
        idx = idx.to(dev)
        m = int(idx.numel())
        # --- coupling: pairs (i, j) of the class, values (u -> v) at i, (b, w) at j
        if m * (m - 1) // 2 <= CHECK_PAIRS:
            pairs = [(a, b) for a in range(m) for b in range(a + 1, m)]
        else:  # drawn (a wide class has too many pairs to list): i, and j another site of the class
            first = torch.randint(0, m, (CHECK_PAIRS,), generator=g, device=dev)
            second = (first + torch.randint(1, m, (CHECK_PAIRS,), generator=g, device=dev)) % m
            pairs = list(zip(first.tolist(), second.tolist()))
        if pairs:
            P = len(pairs)
            si = idx[torch.tensor([p[0] for p in pairs], device=dev)]
            sj = idx[torch.tensor([p[1] for p in pairs], device=dev)]
            vals = torch.randint(0, q, (n, P, 2), generator=g, device=dev)
            shift = torch.randint(1, q, (n, P, 2), generator=g, device=dev)
            other = (vals + shift) % q  # a second value at each of i and j
            s = x[:, None, None, :].expand(n, P, 4, dim).clone()
            for k, (vi, vj) in enumerate(((vals, vals), (other, vals), (vals, other), (other, other))):
                s[:, :, k].scatter_(2, si.expand(n, P)[..., None], vi[..., 0:1].to(s.dtype))
                s[:, :, k].scatter_(2, sj.expand(n, P)[..., None], vj[..., 1:2].to(s.dtype))
            lf, eps = _log_f_rows(model, s.reshape(-1, dim))
            lf = lf.view(n, P, 4)
            d0, d1 = lf[..., 1] - lf[..., 0], lf[..., 3] - lf[..., 2]  # the change at i, for two values at j
            tol = CHECK_ULPS * eps * _magnitude(lf)
            # no coupling: log f = g(x_i) + h(x_j) + rest, so d0 = d1 wherever both are defined (a value of j
            # without mass, both -inf, says nothing); an infinite d on one side only is a coupling too
            known = ~torch.isnan(d0) & ~torch.isnan(d1)
            bad = known & (d0 != d1) & ~((d0 - d1).abs() <= tol)
            if bad.any():
                k, p = (int(t) for t in bad.nonzero()[0])
                i, j = int(si[p]), int(sj[p])
                raise ValueError(
                    f"colouring: class {c} couples sites {i} and {j} (log f's change at site {i} depends on site "
                    f"{j}, by {float((d0 - d1)[k, p].abs()):.3g} on a checked state); sites of one class must not "
                    "interact"
                )
        # --- values
        logits, eps_c = _conditional(model, x, c)
        lf_all = []
        for v in range(q):
            s = x[:, None, :].expand(n, m, dim).clone()
            s[:, torch.arange(m, device=dev), idx] = float(v)
            lf, eps = _log_f_rows(model, s.reshape(-1, dim))
            lf_all.append(lf.view(n, m))
            eps_c = max(eps_c, eps)
        lf = torch.stack(lf_all, dim=-1)  # (n, m, q)
        tol = CHECK_ULPS * eps_c * (_magnitude(lf) + _magnitude(logits))
        if q == 2 and logits.dim() == 2:
            exact, got, what = lf[..., 1] - lf[..., 0], logits, "log-odds"
            exact = exact[..., None]
            got = got[..., None]
        else:
            exact, got, what = torch.log_softmax(lf, -1), torch.log_softmax(logits, -1), "log-probability"
        known = ~torch.isnan(exact)
        same = (got == exact) | ((got - exact).abs() <= tol)
        bad = known & ~same
        if bad.any():
            k, site, v = (int(t) for t in bad.nonzero()[0])
            val = "" if what == "log-odds" else f" = {v}"
            name = getattr(model.conditional, "__name__", None) or type(model.conditional).__name__
            raise ValueError(
                f"conditional ({name}) is wrong: class {c}, site {int(idx[site])}{val}: {what} "
                f"{float(got[k, site, v]):.6g} where log f's differences give {float(exact[k, site, v]):.6g} "
                f"(tolerance {tol:.2g}, on a checked state)"
            )
