"""The annealing path of a user's :class:`~logzbench.models.energy.EnergyModel`: its references and the
discrete domains' Metropolis-within-Gibbs path.

* the tractable references ``r`` the geometric path ``f_beta = r^(1 - beta) f^beta`` starts from
  (:class:`FactorizedReference` on a discrete domain, :class:`GaussianReference` on the continuous one);
* every call of a user's ``log_f`` or ``reference`` goes through one check (``_checked``: a tensor of the
  right shape and dtype, no NaN or ``+inf``) and one wrapper (``_reference_call``: an exception becomes one
  ValueError line, :func:`first_line`);
* :class:`DiscreteEnergyPath` (with its chain state :class:`EnergyState`): the Metropolis-within-Gibbs
  sweep on ``{0..q-1}^dim`` (:mod:`logzbench.models.energy`'s docstring says why it is reversible), or the
  gradient-informed Metropolis-Hastings moves of :mod:`logzbench.models.energy_moves` (``transition=``).

The model (:class:`~logzbench.models.energy.EnergyModel`: the domain, ``log_f``, the time estimate, exact
enumeration) is :mod:`logzbench.models.energy`'s; it builds these.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .base import AcceptanceCounts
from .energy_moves import (
    DEFAULT_PARAM,
    GRADIENT_TRANSITIONS,
    PARAM_NAMES,
    MoveTarget,
    check_gradient,
    check_param,
    check_transition,
    dmala_move,
    gwg_move,
    log_target,
    tune_param,
)
from .potts import base_rate_logits, categorical_from_logits, site_frequencies

__all__ = [
    "BASE_RATE_SMOOTHING",
    "DiscreteEnergyPath",
    "EnergyState",
    "FactorizedReference",
    "GaussianReference",
    "MixtureEnergyPath",
    "first_line",
]

#: smoothing of the data base rate toward uniform (as the RBM's base-rate initial distribution)
BASE_RATE_SMOOTHING = 0.05


# --------------------------------------------------------------------------- references
class FactorizedReference:
    """A factorised distribution over ``{0, .., q-1}^dim`` (``q = 2`` for binary states): independent
    sites with log-probabilities ``log_p`` ``(dim, q)`` (rows normalised).  Exact samples, exact
    ``log_prob`` and the per-site terms the Metropolis sweep needs."""

    def __init__(self, log_p: torch.Tensor):
        log_p = torch.as_tensor(log_p, dtype=torch.float64)
        self.log_p = log_p - torch.logsumexp(log_p, dim=1, keepdim=True)
        self.dim, self.q = int(log_p.shape[0]), int(log_p.shape[1])

    @classmethod
    def uniform(cls, dim: int, q: int, device=None) -> "FactorizedReference":
        return cls(torch.zeros(dim, q, dtype=torch.float64, device=device))

    @classmethod
    def base_rate(cls, rows: torch.Tensor, q: int, smoothing: float = BASE_RATE_SMOOTHING) -> "FactorizedReference":
        """Site frequencies of ``rows`` ``(n, dim)`` mixed with the uniform distribution by ``smoothing``
        (the Potts families' base rate, :func:`~logzbench.models.potts.base_rate_logits`)."""
        return cls(base_rate_logits(site_frequencies(rows.long(), q), smoothing))

    def to(self, device) -> "FactorizedReference":
        return FactorizedReference(self.log_p.to(device))

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        idx = x.long()
        return self.log_p.gather(1, idx.T).T.sum(dim=1) if idx.shape[0] else torch.zeros(0, dtype=torch.float64)

    def site_log_p(self, sites: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """``log p_site(value)`` per chain (``sites``, ``values``: ``(n,)``)."""
        return self.log_p[sites, values.long()]

    def sample(self, n: int, generator: torch.Generator, dtype=torch.float32) -> torch.Tensor:
        """``n`` exact draws ``(n, dim)`` of ``dtype`` (inverse CDF on float64 uniforms, as the Potts paths)."""
        return categorical_from_logits(self.log_p.to(generator.device).expand(int(n), -1, -1), generator).to(dtype)


class GaussianReference:
    """``N(mean, diag(std^2))`` over ``R^dim``: the continuous domain's default reference."""

    def __init__(self, mean: torch.Tensor, std: torch.Tensor):
        self.mean = torch.as_tensor(mean, dtype=torch.float64)
        self.std = torch.as_tensor(std, dtype=torch.float64)

    @classmethod
    def fit(cls, rows: torch.Tensor) -> "GaussianReference":
        x = rows.double()
        std = x.std(dim=0) if x.shape[0] > 1 else torch.ones(x.shape[1], dtype=torch.float64, device=x.device)
        return cls(x.mean(dim=0), torch.where(std > 0, std, torch.ones_like(std)))

    def to(self, device) -> "GaussianReference":
        return GaussianReference(self.mean.to(device), self.std.to(device))

    def scaled(self, scale: float) -> "GaussianReference":
        return GaussianReference(self.mean, self.std * float(scale))

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * (((x - self.mean) / self.std) ** 2).sum(dim=1)

    def grad(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std**2

    def log_z(self) -> float:
        return float(0.5 * len(self.mean) * math.log(2 * math.pi) + torch.log(self.std).sum())

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        return -self.energy(x.double()) - self.log_z()

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        z = torch.randn(int(n), len(self.mean), generator=generator, dtype=torch.float64, device=generator.device)
        return self.mean + self.std * z


# --------------------------------------------------------------------------- user calls
def first_line(exc: BaseException) -> str:
    """``"Type: first line of the message"``: a user's exception in a one-line error."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _reference_call(reference, method: str, *args):
    """``reference.<method>(*args)`` of a user's reference; its exception (``sys.exit()`` included) becomes
    one ValueError line naming the method and the exception, as ``log_f``'s do (:meth:`EnergyModel._call`)."""
    try:
        return getattr(reference, method)(*args)
    except (Exception, SystemExit) as exc:
        raise ValueError(f"reference.{method} ({type(reference).__name__}) raised {first_line(exc)}") from exc


def _checked(out, n: int, name: str) -> torch.Tensor:
    """``out`` as float64 ``(n,)``; a ValueError naming ``name`` and the problem otherwise."""
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"log_f ({name}) returned a {type(out).__module__}.{type(out).__name__}, not a torch.Tensor")
    if tuple(out.shape) != (n,):
        raise ValueError(f"log_f ({name}) returned shape {tuple(out.shape)} for {n} states; expected ({n},)")
    if out.dtype not in (torch.float32, torch.float64):  # float16 / bfloat16 round log f to 2-3 digits
        raise ValueError(f"log_f ({name}) returned dtype {out.dtype}; expected float32 or float64 (cast it: .double())")
    out = out.double()
    if torch.isnan(out).any():
        raise ValueError(f"log_f ({name}) returned NaN for {int(torch.isnan(out).sum())} of {n} states")
    if (out == math.inf).any():
        raise ValueError(f"log_f ({name}) returned +inf for {int((out == math.inf).sum())} of {n} states")
    return out


# --------------------------------------------------------------------------- the discrete path
class EnergyState(NamedTuple):
    """Chain state on a discrete energy's path: states ``x`` ``(n, dim)`` (the model's dtype), and
    ``log f(x)`` and ``log r(x)`` (float64 ``(n,)``), so reweighting costs no call of ``log_f``; ``grad``:
    ``grad log f(x)`` (float64 ``(n, dim)``) where a gradient move (gwg, dmala) computed it, else ``None``
    (the next gradient move computes it; it does not depend on ``beta``).

    The cached values are those of ``log_f`` when the state was made: a trainer that changes ``log_f``'s
    parameters between sweeps (persistent chains) rebuilds the state with ``path.state_from_data(state.x)``
    first, else the sweep targets the old model."""

    x: torch.Tensor
    lf: torch.Tensor
    lr: torch.Tensor
    grad: torch.Tensor | None = None


class DiscreteEnergyPath(AcceptanceCounts):
    """``f_beta = r^(1 - beta) f^beta`` on ``{0..q-1}^dim``: the :class:`~logzbench.models.base.AnnealingPath`
    of a discrete :class:`~logzbench.models.energy.EnergyModel`, with one of three transitions:

    * ``"gibbs"`` (default): one Metropolis-within-Gibbs sweep in a random order per chain
      (:mod:`logzbench.models.energy`'s docstring);
    * ``"gwg"``: one Gibbs-with-Gradients move of ``n_flips`` single-site changes;
    * ``"dmala"``: one discrete-Langevin move of all sites with step size ``alpha``
      (:mod:`logzbench.models.energy_moves`).

    All three are reversible with respect to ``p_beta`` (:attr:`reversible`), so every estimator, RAISE's
    reverse chains included, may use them.  The gradient moves' parameter is tuned by :meth:`tune` (a pilot by
    acceptance rate at ``beta = 1``) or set as :attr:`move_param`; untuned, a move uses
    :data:`~logzbench.models.energy_moves.DEFAULT_PARAM`.

    Parameters
    ----------
    model : EnergyModel
    reference : FactorizedReference or a user object with ``log_prob`` / ``sample``
    transition : {"gibbs", "gwg", "dmala"}
    """

    def __init__(self, model, reference, transition: str = "gibbs"):
        self.model = model
        self.reference = reference
        self.factorized = isinstance(reference, FactorizedReference)
        self.q = int(model.n_states)
        self.transition_name = check_transition(transition, model)
        if self.transition_name in GRADIENT_TRANSITIONS:
            check_gradient(model)  # a log_f without a usable gradient: refused where the path is built
        self._move_param = None
        self.n_proposed = 0
        self.n_accepted = 0

    @property
    def reversible(self) -> bool:
        """Whether :meth:`transition` is reversible with respect to ``p_beta`` (RAISE needs it): always.  The
        random-scan sweep (``gibbs``) is, because each site's Metropolis update is and the reversed order of the
        sites is as likely as the order; ``gwg`` and ``dmala`` are Metropolis-Hastings kernels, reversible with
        respect to their target by construction (GWG's several changes per move: on the extended space of the
        changes, marginally on ``x`` too; :mod:`logzbench.models.energy_moves`)."""
        return True

    @property
    def transition_description(self) -> str:
        """What :meth:`transition` runs, in a few words (for messages and records)."""
        if self.transition_name == "gibbs" and self.model.conditional is not None and self.factorized:
            return f"a block-Gibbs sweep over {len(self.model.colouring)} colour classes, forward or reversed per chain"
        if self.transition_name == "gibbs":
            return "a Metropolis-within-Gibbs sweep in a random order per chain"
        param = self._move_param if self._move_param is not None else DEFAULT_PARAM[self.transition_name]
        what = "a Gibbs-with-Gradients move" if self.transition_name == "gwg" else "a discrete Langevin (DMALA) move"
        return f"{what}, Metropolis-Hastings corrected, {PARAM_NAMES[self.transition_name]} = {param:g}"

    @property
    def move_param(self):
        """The gradient move's parameter (``n_flips`` for gwg, ``alpha`` for dmala): set by :meth:`tune` or
        directly (then frozen: :meth:`tune` runs no pilot); ``None`` until then (and always for gibbs)."""
        return self._move_param

    @move_param.setter
    def move_param(self, value) -> None:
        self._move_param = None if value is None else check_param(self.transition_name, value)

    def tune(self, n_chains: int, generator: torch.Generator) -> dict:
        """The pilot of a gradient move (none for gibbs): from ``n_chains`` of the reference's samples, moves at
        ``beta = 1`` tune the parameter by acceptance rate (:func:`~logzbench.models.energy_moves.tune_param`)
        and freeze it as :attr:`move_param`.  Uses only ``generator``; leaves the acceptance counters as they
        were.  Returns ``{"transition", "param_name", "param", "acceptance", "sweeps"}`` (``sweeps``:
        transitions per chain run; 0 when there is nothing to tune or the parameter is already frozen)."""
        name = self.transition_name
        out = {"transition": name, "param_name": PARAM_NAMES[name], "param": self._move_param}
        if name == "gibbs" or self._move_param is not None:
            return {**out, "acceptance": float("nan"), "sweeps": 0}
        counters = (self.n_proposed, self.n_accepted)
        box = [self.sample_initial(n_chains, generator)]

        def run(param, n_moves: int) -> float:
            self._move_param = param
            p0, a0 = self.n_proposed, self.n_accepted
            for _ in range(int(n_moves)):
                box[0] = self.transition(box[0], 1.0, generator)
            return (self.n_accepted - a0) / max(1, self.n_proposed - p0)

        try:
            tuned = tune_param(name, self.model.dim, run)
        finally:
            self._move_param = None
            self.n_proposed, self.n_accepted = counters
        self.move_param = tuned["param"]
        return {**out, **tuned, "param": self._move_param}

    def _log_r(self, x: torch.Tensor) -> torch.Tensor:
        if self.factorized:
            return self.reference.log_prob(x)
        return _checked(_reference_call(self.reference, "log_prob", x), int(x.shape[0]), "reference.log_prob")

    def _state(self, x: torch.Tensor) -> EnergyState:
        x = x.to(dtype=self.model.dtype, device=self.model.device)
        with torch.no_grad():
            return EnergyState(x, self.model.log_f(x), self._log_r(x))

    def state_from_data(self, data: torch.Tensor) -> EnergyState:
        return self._state(torch.as_tensor(data))

    def log_z0(self) -> float:
        return 0.0  # the reference is normalised

    def sample_initial(self, n_chains: int, generator: torch.Generator) -> EnergyState:
        if self.factorized:
            x = self.reference.sample(n_chains, generator, dtype=self.model.dtype)
        else:
            x = _reference_call(self.reference, "sample", n_chains, generator)
            if not isinstance(x, torch.Tensor) or tuple(x.shape) != (int(n_chains), self.model.dim):
                raise ValueError(f"reference.sample must return a ({n_chains}, {self.model.dim}) tensor")
        return self._state(x)

    def log_f(self, state: EnergyState, beta: float) -> torch.Tensor:
        return log_target(state.lr, state.lf, beta)

    def log_f_ratio(self, state: EnergyState, beta_from: float, beta_to: float) -> torch.Tensor:
        """``(beta_to - beta_from) (log f(x) - log r(x))``, from the cached values (``0`` where both are
        ``-inf``: a state outside the model's support has weight zero all along)."""
        d = state.lf - state.lr
        return torch.where(torch.isnan(d), torch.zeros_like(d), (float(beta_to) - float(beta_from)) * d)

    @torch.no_grad()
    def transition(self, state: EnergyState, beta: float, generator: torch.Generator) -> EnergyState:
        """One transition at ``beta`` (:attr:`transition_name`).  gibbs: a Metropolis-within-Gibbs sweep,
        every site once, in each chain's own random order; at each, a binary site proposes the flip and accepts
        with ``min(1, f_beta(x') / f_beta(x))``, a categorical one is drawn from its conditional under
        ``p_beta`` (its other states scored in one call of ``log_f``); all chains are updated together (one
        call of ``log_f`` per step).  With the model's ``conditional`` and a factorised reference: one
        reversible block-Gibbs sweep over its colour classes (:mod:`logzbench.models.energy_blocks`).
        gwg / dmala: one Metropolis-Hastings move of every chain (one forward and backward pass of ``log_f``)."""
        if self.transition_name == "gibbs":
            if self.model.conditional is not None and self.factorized:  # block Gibbs (energy_blocks)
                return self._block(state, float(beta), generator, self.reference.log_p)
            return self._sweep(state, float(beta), generator, self.reference.site_log_p if self.factorized else None)
        table = self.reference.log_p if self.factorized else None
        return self._move(state, MoveTarget(float(beta), table, None if self.factorized else self._log_r), generator)

    def _move(self, state: EnergyState, target: MoveTarget, generator: torch.Generator) -> EnergyState:
        """The gradient move of :meth:`transition` toward ``target`` (the mixture path passes each chain's
        component's site table), counting its proposals and acceptances (one per chain and move)."""
        name = self.transition_name
        param = self._move_param if self._move_param is not None else DEFAULT_PARAM[name]
        move = gwg_move if name == "gwg" else dmala_move
        x, lf, lr, grad, accept = move(self.model, state.x, state.lf, state.lr, state.grad, target, param, generator)
        self.n_proposed += int(x.shape[0])
        self.n_accepted += int(accept.sum())
        return EnergyState(x, lf, lr, grad)

    def _block(self, state: EnergyState, beta: float, generator: torch.Generator, log_r: torch.Tensor) -> EnergyState:
        """The block-Gibbs sweep (:meth:`EnergyModel.block_gibbs`, reference per-site log-probabilities
        ``log_r``: ``(dim, q)``, or ``(n, dim, q)`` per chain); every site draw counts as accepted."""
        x = self.model.block_gibbs(state.x, beta, generator, log_r)
        self.n_proposed += x.numel()
        self.n_accepted += x.numel()
        return EnergyState(x, self.model.log_f(x), self._log_r(x))

    def _sweep(self, state: EnergyState, beta: float, generator: torch.Generator, site_log_p) -> EnergyState:
        """The sweep of :meth:`transition` with the reference's per-site terms ``site_log_p(sites, values)``
        (``None``: a user reference, called whole; the mixture path passes each chain's component's)."""
        x, lf, lr = state.x.clone(), state.lf, state.lr
        n, dim = x.shape
        dev = x.device
        factorized = site_log_p is not None
        use_f = beta > 0.0  # f_0 = r: log f is recomputed once after the sweep
        use_r = beta < 1.0 or factorized  # a user reference at beta = 1: once after the sweep
        # each chain's own random order of the sites (independent chains, and a reversible sweep)
        keys = torch.rand(n, dim, generator=generator, dtype=torch.float64, device=generator.device)
        orders = torch.argsort(keys, dim=1).to(dev)
        rows = torch.arange(n, device=dev)
        accepted = 0
        for t in range(dim):
            sites = orders[:, t]
            old = x[rows, sites]
            if self.q > 2:  # heat bath: the site's q states scored in one call, drawn from p_beta's conditional
                lf, lr = self._heat_bath(x, lf, lr, sites, old, beta, generator, site_log_p, use_f, use_r)
                accepted += n
                continue
            if self.q == 2:
                new = 1.0 - old
            else:
                shift = torch.randint(1, self.q, (n,), generator=generator, device=generator.device).to(dev)
                new = ((old.long() + shift) % self.q).to(x.dtype)
            x[rows, sites] = new
            lf_new = self.model.log_f(x) if use_f else lf
            if not use_r:
                lr_new = lr
            elif factorized:
                lr_new = lr + site_log_p(sites, new) - site_log_p(sites, old)
            else:
                lr_new = self._log_r(x)
            log_u = torch.log(torch.rand(n, generator=generator, dtype=torch.float64, device=generator.device)).to(dev)
            accept = log_u < log_target(lr_new, lf_new, beta) - log_target(lr, lf, beta)  # NaN (both -inf): rejected
            x[rows, sites] = torch.where(accept, new, old)
            lf = torch.where(accept, lf_new, lf)
            lr = torch.where(accept, lr_new, lr)
            accepted += int(accept.sum())
        if not use_f:
            lf = self.model.log_f(x)
        if not use_r:
            lr = self._log_r(x)
        self.n_proposed += n * dim
        self.n_accepted += accepted
        return EnergyState(x, lf, lr)

    def _heat_bath(self, x, lf, lr, sites, old, beta, generator, site_log_p, use_f, use_r):
        """One categorical site per chain (``sites``, current values ``old``) drawn from its conditional
        under ``p_beta`` (exact, so reversible): the ``q - 1`` other states of every chain's site scored in
        one ``(n * (q - 1), dim)`` call of ``log_f`` (and of a user reference's ``log_prob``; a factorised
        reference's per-site terms otherwise).  Writes ``x`` in place; returns the new ``(lf, lr)``."""
        n, dim = x.shape
        q, dev = self.q, x.device
        rows = torch.arange(n, device=dev)
        others = (old.long()[:, None] + torch.arange(1, q, device=dev)) % q  # (n, q - 1)
        batch = x[:, None, :].expand(n, q - 1, dim).clone()
        batch[rows[:, None], torch.arange(q - 1, device=dev), sites[:, None]] = others.to(x.dtype)
        batch = batch.reshape(n * (q - 1), dim)
        lf_o = self.model.log_f(batch).view(n, q - 1) if use_f else lf[:, None].expand(n, q - 1)
        if not use_r:
            lr_o = lr[:, None].expand(n, q - 1)
        elif site_log_p is not None:
            base = lr - site_log_p(sites, old)
            lr_o = torch.stack([base + site_log_p(sites, others[:, k]) for k in range(q - 1)], dim=1)
        else:
            lr_o = self._log_r(batch).view(n, q - 1)
        lf_c, lr_c = torch.cat([lf[:, None], lf_o], 1), torch.cat([lr[:, None], lr_o], 1)
        logits = log_target(lr_c, lf_c, beta)
        logits = torch.where(torch.isnan(logits), torch.full_like(logits, -math.inf), logits)
        stuck = torch.isneginf(logits).all(dim=1)  # no state of mass (a chain outside the support): stays
        logits[:, 0] = torch.where(stuck, torch.zeros_like(logits[:, 0]), logits[:, 0])
        k = categorical_from_logits(logits.to(generator.device), generator).to(dev)
        values = torch.cat([old.long()[:, None], others], 1)
        x[rows, sites] = values[rows, k].to(x.dtype)
        return lf_c[rows, k], lr_c[rows, k]


class MixtureEnergyPath(DiscreteEnergyPath):
    """The augmented mixture path (:mod:`logzbench.models.mixture`) of a discrete user energy:
    ``f_beta(x) = f(x)^beta (1/C) sum_z (pi_z q_z(x))^(1 - beta)``, ``log Z_0 = -log C``.  A transition draws
    each chain's component ``z ~ p_beta(z | x)``, then runs the Metropolis-within-Gibbs sweep of
    :class:`DiscreteEnergyPath` (or its gwg / dmala move, ``transition``) on ``q_z(x)^(1 - beta) f(x)^beta``
    (reversible for ``p_beta(x | z)``), so the kernel on ``x`` leaves ``p_beta(x)`` invariant and is reversible
    for it: ``p(x) p(z | x) K_z(x, x') = p(x, z) K_z(x, x')`` is symmetric in ``x, x'``.  States are
    :class:`~logzbench.models.mixture.MixtureState` (``base``: an :class:`EnergyState` whose ``lr`` is
    ``log q(x)``; ``comp``: ``log pi_z + log q_z(x)`` per component)."""

    def __init__(self, model, mixture, transition: str = "gibbs"):
        super().__init__(model, FactorizedReference.uniform(model.dim, int(model.n_states), model._device), transition)
        from .mixture import MixtureTerms

        self._terms = MixtureTerms()
        self._terms._init_mixture(mixture, model._device, 0.0)
        self.mixture = self._terms.mixture

    def _wrap(self, x: torch.Tensor, lf: torch.Tensor | None = None, grad: torch.Tensor | None = None):
        from .mixture import MixtureState

        x = x.to(dtype=self.model.dtype, device=self.model.device)
        comp = self._terms._comp(x)
        if lf is None:
            with torch.no_grad():
                lf = self.model.log_f(x)
        return MixtureState(EnergyState(x, lf, torch.logsumexp(comp, 1), grad), comp)

    def state_from_data(self, data: torch.Tensor):
        return self._wrap(torch.as_tensor(data))

    def log_z0(self) -> float:
        return self._terms.log_z0()

    def sample_initial(self, n_chains: int, generator: torch.Generator):
        return self._wrap(self.mixture.sample(n_chains, generator))

    def log_f(self, state, beta: float) -> torch.Tensor:
        beta = float(beta)
        mix = self._terms._mixture_log_f(state.comp, beta)
        return mix if beta <= 0.0 else beta * state.base.lf + mix

    def log_f_ratio(self, state, beta_from: float, beta_to: float) -> torch.Tensor:
        from .mixture import mixture_increment

        d = float(beta_to) - float(beta_from)
        lf = state.base.lf
        model_part = torch.zeros_like(lf) if d == 0.0 else d * lf
        return model_part + mixture_increment(state.comp, beta_from, beta_to)

    @torch.no_grad()
    def transition(self, state, beta: float, generator: torch.Generator):
        beta = float(beta)
        z = self._terms._draw_z(state.comp, beta, generator).to(state.comp.device)
        log_p = self.mixture.log_p  # (C, dim, q)
        rows = torch.arange(z.shape[0], device=z.device)
        lr_z = state.comp[rows, z]

        base = EnergyState(state.base.x, state.base.lf, lr_z, state.base.grad)
        if self.transition_name != "gibbs":  # the move on q_z^(1 - beta) f^beta, z's site table exact
            out = self._move(base, MoveTarget(beta, log_p[z], None), generator)
            return self._wrap(out.x, out.lf, out.grad)

        def site_log_p(sites, values):
            return log_p[z, sites, values.long()]

        if self.model.conditional is not None:  # block Gibbs on each chain's component's site terms
            out = self._block(base, beta, generator, log_p[z])
        else:
            out = self._sweep(base, beta, generator, site_log_p)
        return self._wrap(out.x, out.lf)
