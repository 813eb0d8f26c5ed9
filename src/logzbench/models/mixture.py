"""A mixture of product distributions fitted to training rows by EM: the ``mixture`` reference.

Temperature annealing from one product distribution (uniform, the data base rate) crosses a
first-order transition on models trained on clustered data: the chains never find the data's heavy
modes and AIS errs low by nats at every K (issue 38).  A mixture of ``C`` product distributions
fitted to the training rows starts the chains inside the modes, and the importance weights only
have to correct the modes' relative masses.

:class:`ProductMixture` is ``q(x) = sum_z pi_z q_z(x)`` over ``n`` sites of ``q`` states each, with
``q_z(x) = prod_i p_{z i}(x_i)``: exact samples, a normalised ``log_prob``, and the per-component
terms the augmented annealing paths use.  Binary rows (0./1. floats, the binary families) are
``q = 2`` with ``binary=True``; categorical rows are int64 states ``0 .. q-1``.

:func:`fit_mixture` fits it by EM with Dirichlet pseudo-counts (no probability is 0 or 1; every site
probability is then clipped to ``[MIN_PROB, 1 - MIN_PROB]`` as the base rate's are), from
k-means++-style starts at training rows, the best of ``n_init`` restarts by training log-likelihood.
Without ``n_components`` it chooses ``C`` by held-out log-likelihood: a share of the training rows
(chosen from ``seed``) is held out, ``C`` runs over :data:`COMPONENT_GRID` (capped by the rows), the
best held-out log-likelihood per row wins, and the mixture is refitted on all rows.

**The cost of EM** is counted in *component passes*: one E-step evaluates every training row under
every component, ``C`` component passes over the data (``N`` rows x ``n`` sites each); the M-step
reuses the E-step's responsibilities.  :attr:`MixtureFit.em_passes` sums them over every fit made
(the held-out grid, the restarts, the final refit); ``em_row_evaluations`` is that times the rows.

**The augmented path** (:class:`MixtureGibbsPath`, :class:`MixturePottsPath`; the user energy's
:class:`~logzbench.models.energy_path.MixtureEnergyPath`): with the component label ``z``,

    p_beta(v, z, h) proportional to (pi_z q_z(v))^(1 - beta) f(v, h)^beta,

and ``z`` summed out of the weights (Rao-Blackwellised),

    f_beta(v) = f_model_beta(v) (1/C) sum_z (pi_z q_z(v))^(1 - beta),

with ``f_model_beta(v) = sum_h f(v, h)^beta`` the family's own (``2^n_hidden`` at ``beta = 0`` for an
RBM).  At ``beta = 1`` the sum is ``C``, so ``f_1`` is the model exactly; at ``beta = 0`` it is
``q(v)``, so ``log Z_0 = (hidden factor) - log C``.  No estimator needs to know ``C``.  The transition
is block Gibbs on the augmented space: ``z ~ p_beta(z | v)`` (proportional to ``(pi_z q_z(v))^(1-beta)``)
and the family's hidden units ``h ~ p_beta(h | v)``, which are independent given ``v``, then
``v ~ p_beta(v | z, h)`` (site logits ``(1 - beta) log p_z + beta (a + W h)``).  As a kernel on ``v``
it is a two-block data augmentation (``(z, h) | v``, then ``v | (z, h)``), so it leaves ``p_beta(v)``
invariant and is reversible with respect to it, as RAISE needs; the chain state is ``v`` (with cached
terms) and ``z`` is drawn afresh in every transition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from ..kernels import categorical_from_logits
from ._shape import Axis, DeviceOf

__all__ = [
    "COMPONENT_GRID",
    "HELDOUT_SHARE",
    "MIN_PROB",
    "MixtureFit",
    "MixtureGibbsPath",
    "MixturePottsPath",
    "MixtureState",
    "MixtureTerms",
    "ProductMixture",
    "check_reference_shape",
    "fit_mixture",
    "mixture_reference",
    "mixture_increment",
]

#: the component counts tried when none is given (capped by the training rows)
COMPONENT_GRID = (1, 2, 4, 8, 16, 32)
#: share of the training rows held out to choose the number of components
HELDOUT_SHARE = 0.2
#: every site probability is clipped to [MIN_PROB, 1 - MIN_PROB] (as the data base rate's)
MIN_PROB = 1e-3
#: Dirichlet pseudo-count added to every site state's count in the M-step
PSEUDO_COUNT = 0.5
#: rows per chunk of the E-step (bounds the one-hot matrix of categorical rows)
_CHUNK = 8192


class ProductMixture:
    """``q(x) = sum_z pi_z prod_i p_{z i}(x_i)`` over ``n_sites`` sites of ``n_states`` states.

    Parameters
    ----------
    log_weights : tensor (C,)
        ``log pi_z`` (normalised here).
    log_p : tensor (C, n_sites, q)
        Site log-probabilities of each component (each row normalised here).
    binary : bool
        Rows are 0./1. floats (``q = 2``, state 1 the unit on); otherwise int64 states.
    """

    def __init__(self, log_weights, log_p, binary: bool = False):
        lw = torch.as_tensor(log_weights, dtype=torch.float64)
        lp = torch.as_tensor(log_p, dtype=torch.float64, device=lw.device)
        if lp.ndim != 3 or lw.shape != (lp.shape[0],):
            raise ValueError(f"mixture: log_p {tuple(lp.shape)} and log_weights {tuple(lw.shape)} do not match")
        if not (torch.isfinite(lw).all() and torch.isfinite(lp).all()):
            raise ValueError("mixture: non-finite log-probabilities")
        if binary and lp.shape[2] != 2:
            raise ValueError("mixture: binary rows need 2 states per site")
        self.log_weights = lw - torch.logsumexp(lw, 0)
        self.log_p = lp - torch.logsumexp(lp, 2, keepdim=True)
        self.binary = bool(binary)

    n_components = Axis("log_p", 0)
    n_sites = Axis("log_p", 1)
    n_states = Axis("log_p", 2)
    device = DeviceOf("log_p")

    def to(self, device) -> "ProductMixture":
        return ProductMixture(self.log_weights.to(device), self.log_p.to(device), self.binary)

    # ----------------------------------------------------------------- the linear form
    def linear_form(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(T, c)``: ``log pi_z + log q_z(x) = c_z + phi(x) . T_z`` with ``phi(x)`` the row itself
        (binary: ``T`` the logits ``log p_z(1) - log p_z(0)``, ``c_z = log pi_z + sum_i log p_{z i}(0)``)
        or its one-hot matrix flattened (``T = log p_z`` flattened, ``c_z = log pi_z``).  ``T``: ``(C, m)``
        float64.  ``T_z`` also serves as the component's site logits in a visible move."""
        if self.binary:
            T = self.log_p[:, :, 1] - self.log_p[:, :, 0]
            c = self.log_weights + self.log_p[:, :, 0].sum(1)
        else:
            T = self.log_p.reshape(self.n_components, -1)
            c = self.log_weights.clone()
        return T, c

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """``phi(x)``: binary rows as float64, categorical rows as their flattened one-hot matrix."""
        if self.binary:
            return x.to(torch.float64)
        return torch.nn.functional.one_hot(x.long(), self.n_states).reshape(x.shape[0], -1).to(torch.float64)

    # ----------------------------------------------------------------- densities
    def component_log_prob(self, x) -> torch.Tensor:
        """``log pi_z + log q_z(x)`` per row and component, float64 ``(n_rows, C)``."""
        x = torch.as_tensor(x, device=self.device)
        T, c = self.linear_form()
        out = [c + self.features(x[s : s + _CHUNK]) @ T.T for s in range(0, x.shape[0], _CHUNK)]
        return torch.cat(out) if out else torch.zeros(0, self.n_components, dtype=torch.float64, device=self.device)

    def log_prob(self, x) -> torch.Tensor:
        """Normalised ``log q(x)``, float64 ``(n_rows,)``."""
        return torch.logsumexp(self.component_log_prob(x), dim=1)

    def responsibilities(self, x) -> torch.Tensor:
        """``p(z | x)``, float64 ``(n_rows, C)``."""
        return torch.softmax(self.component_log_prob(x), dim=1)

    # ----------------------------------------------------------------- sampling
    def sample_joint(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` exact draws ``(x, z)``: ``z ~ pi`` then every site from ``p_z`` (float64 inverse CDF);
        ``x`` is float32 0./1. (binary) or int64 states, on ``generator``'s device."""
        dev = generator.device
        lw, lp = self.log_weights.to(dev), self.log_p.to(dev)
        z = categorical_from_logits(lw.expand(int(n), -1), generator)
        x = categorical_from_logits(lp[z], generator)
        return (x.to(torch.float32) if self.binary else x), z

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` exact draws of ``x`` (:meth:`sample_joint` without the labels): the reference protocol
        of a user's energy (``log_prob`` / ``sample``)."""
        return self.sample_joint(n, generator)[0]


# --------------------------------------------------------------------------- EM
@dataclass
class MixtureFit:
    """A fitted mixture and how it was chosen.

    Attributes
    ----------
    mixture : ProductMixture
    n_components : int
    chosen : str
        ``"held-out"`` (the best held-out log-likelihood over :data:`COMPONENT_GRID`) or ``"given"``.
    train_log_lik : float
        Mean log-likelihood per training row of the final fit (nats).
    heldout_log_lik : float or None
        Mean held-out log-likelihood per row of the chosen ``C`` (``None`` when ``C`` was given).
    heldout_by_components : dict
        Held-out log-likelihood per row of every ``C`` tried.
    em_passes : int
        Component passes over the data of every EM iteration of every fit (module docstring).
    em_row_evaluations : int
        Rows times components evaluated, summed over every E-step.
    """

    mixture: ProductMixture
    n_components: int
    chosen: str
    train_log_lik: float
    heldout_log_lik: float | None = None
    heldout_by_components: dict = field(default_factory=dict)
    em_passes: int = 0
    em_row_evaluations: int = 0

    def settings(self) -> dict[str, Any]:
        """What a result on a mixture path records (``reference_*``)."""
        out: dict[str, Any] = {
            "reference": "mixture",
            "reference_components": int(self.n_components),
            "reference_components_chosen": self.chosen,
            "reference_train_log_lik": float(self.train_log_lik),
            "reference_em_passes": int(self.em_passes),
            "reference_em_row_evaluations": int(self.em_row_evaluations),
        }
        if self.heldout_log_lik is not None:
            out["reference_heldout_log_lik"] = float(self.heldout_log_lik)
        return out


def _em(F: torch.Tensor, n_sites: int, q: int, binary: bool, C: int, g: torch.Generator, max_iter: int, tol: float):
    """One EM run from a k-means++-style start; ``(mixture, mean train log-lik, component passes, row evals)``."""
    N = F.shape[0]
    # k-means++ on the feature rows (squared Hamming distance = squared Euclidean of the one-hot / 0-1 rows)
    centres = [int(torch.randint(N, (1,), generator=g))]
    d2 = ((F - F[centres[0]]) ** 2).sum(1)
    for _ in range(1, C):
        w = d2 / d2.sum() if float(d2.sum()) > 0 else torch.full_like(d2, 1.0 / N)
        centres.append(int(torch.multinomial(w, 1, generator=g)))
        d2 = torch.minimum(d2, ((F - F[centres[-1]]) ** 2).sum(1))
    mean = F.mean(0)
    # start: each component near its centre row, blended with the data's mean (no site at 0 or 1)
    start = 0.5 * F[centres] + 0.5 * mean
    mix = _m_step(start * N / C, torch.full((C,), N / C, dtype=torch.float64), n_sites, q, binary)
    prev, passes, rows = -math.inf, 0, 0
    ll = -math.inf
    for _ in range(int(max_iter)):
        lc = mix.component_log_prob_features(F)
        passes += C
        rows += N * C
        norm = torch.logsumexp(lc, 1)
        ll = float(norm.mean())
        R = torch.exp(lc - norm[:, None])
        mix = _m_step(R.T @ F, R.sum(0), n_sites, q, binary)
        if ll - prev < tol:
            break
        prev = ll
    return mix.mixture, ll, passes, rows


class _FeatureMixture(NamedTuple):
    mixture: ProductMixture
    T: torch.Tensor
    c: torch.Tensor

    def component_log_prob_features(self, F: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.c + F[s : s + _CHUNK] @ self.T.T for s in range(0, F.shape[0], _CHUNK)])


def _m_step(counts: torch.Tensor, Nz: torch.Tensor, n_sites: int, q: int, binary: bool) -> _FeatureMixture:
    """Site probabilities ``(count + a) / (N_z + q a)`` clipped to ``[MIN_PROB, 1 - MIN_PROB]``, weights
    ``(N_z + 1) / (N + C)``."""
    C = counts.shape[0]
    if binary:
        p1 = (counts + PSEUDO_COUNT) / (Nz[:, None] + 2 * PSEUDO_COUNT)
        p = torch.stack([1 - p1, p1], dim=2)
    else:
        p = (counts.reshape(C, n_sites, q) + PSEUDO_COUNT) / (Nz[:, None, None] + q * PSEUDO_COUNT)
    p = p.clamp(MIN_PROB, 1 - MIN_PROB)
    p = p / p.sum(2, keepdim=True)
    w = (Nz + 1.0) / (Nz.sum() + C)
    mix = ProductMixture(torch.log(w), torch.log(p), binary)
    T, c = mix.linear_form()
    return _FeatureMixture(mix, T, c)


def _fit_fixed(F, n_sites, q, binary, C, g, n_init, max_iter, tol):
    best, passes, rows = None, 0, 0
    for _ in range(int(n_init) if C > 1 else 1):
        mix, ll, p, r = _em(F, n_sites, q, binary, C, g, max_iter, tol)
        passes, rows = passes + p, rows + r
        if best is None or ll > best[1]:
            best = (mix, ll)
    return best[0], best[1], passes, rows


def fit_mixture(
    rows,
    n_components: int | None = None,
    *,
    seed: int = 0,
    q: int | None = None,
    binary: bool | None = None,
    n_init: int = 3,
    max_iter: int = 100,
    tol: float = 1e-5,
    grid: tuple[int, ...] = COMPONENT_GRID,
    heldout_share: float = HELDOUT_SHARE,
) -> MixtureFit:
    """Fit a :class:`ProductMixture` to ``rows`` by EM (module docstring).

    Parameters
    ----------
    rows : tensor or array (N, n_sites)
        Binary 0/1 rows (float) or categorical states ``0 .. q-1`` (integer).
    n_components : int, optional
        ``C`` (at most ``N``); default: chosen by held-out log-likelihood over ``grid``.
    seed : int
        Seeds every random choice (the held-out split, the k-means++ starts): same seed, same fit.
    q : int, optional
        States per site (default: 2 for float rows, ``max + 1`` for integer rows).
    binary : bool, optional
        Rows are 0./1. floats (default: ``rows`` is a floating-point tensor).
    n_init : int
        EM restarts per ``C``; the best training log-likelihood is kept.
    max_iter, tol : int, float
        Each EM run stops after ``max_iter`` iterations, or once an iteration raises the mean training
        log-likelihood by less than ``tol`` nats per row.

    Raises
    ------
    ValueError
        No rows, or more components than rows.
    """
    x = torch.as_tensor(rows).cpu()
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError("the mixture reference needs training rows (CLI: --train-data X.npy)")
    N, n_sites = int(x.shape[0]), int(x.shape[1])
    if binary is None:
        binary = bool(x.is_floating_point())
    q = 2 if binary else int(q if q is not None else int(x.max()) + 1)
    q = max(q, 2)
    if n_components is not None and int(n_components) > N:
        raise ValueError(
            f"mixture_components = {int(n_components)} is more than the {N} training rows; give at most {N}"
        )
    proto = ProductMixture(torch.zeros(1), torch.zeros(1, n_sites, q), binary)
    F = proto.features(x if binary else x.long())
    g = torch.Generator().manual_seed(int(seed))
    passes = rows_eval = 0
    heldout: dict[int, float] = {}
    if n_components is None:
        perm = torch.randperm(N, generator=g)
        n_held = int(round(heldout_share * N))
        if n_held < 1 or N - n_held < 1:
            C = 1
        else:
            F_tr, F_ho = F[perm[n_held:]], F[perm[:n_held]]
            worse = 0
            for C_try in [c for c in grid if c <= F_tr.shape[0]]:
                mix, _, p, r = _fit_fixed(F_tr, n_sites, q, binary, C_try, g, n_init, max_iter, tol)
                passes, rows_eval = passes + p, rows_eval + r
                T, c = mix.linear_form()
                heldout[C_try] = float(torch.logsumexp(c + F_ho @ T.T, 1).mean())
                if len(heldout) > 1 and heldout[C_try] <= max(v for k, v in heldout.items() if k != C_try):
                    worse += 1
                    if worse >= 2:  # two in a row no better than the best so far: stop
                        break
                else:
                    worse = 0
            C = max(heldout, key=lambda k: (heldout[k], -k))
        chosen = "held-out"
    else:
        C, chosen = int(n_components), "given"
    mix, ll, p, r = _fit_fixed(F, n_sites, q, binary, C, g, n_init, max_iter, tol)
    return MixtureFit(
        mixture=mix,
        n_components=C,
        chosen=chosen,
        train_log_lik=ll,
        heldout_log_lik=heldout.get(C) if chosen == "held-out" else None,
        heldout_by_components=heldout,
        em_passes=passes + p,
        em_row_evaluations=rows_eval + r,
    )


def mixture_reference(reference, data, check_rows=None) -> ProductMixture:
    """A family path's mixture: ``reference`` when given, else one fitted to the training rows ``data``
    (checked by ``check_rows``; seed 0, ``C`` chosen by held-out log-likelihood); a ValueError without
    either.  (An estimate fits it once, from its seed and ``mixture_components``:
    :meth:`logzbench.estimators.context.EstimateContext.reference`.)"""
    if reference is not None:
        return reference
    if data is None:
        raise ValueError(
            "--init mixture needs training rows to fit the mixture to: pass training data (CLI: --train-data X.npy)"
        )
    return fit_mixture(check_rows(data) if check_rows is not None else data).mixture


def check_reference_shape(mix: ProductMixture, model) -> None:
    """Refuse a mixture reference of another shape than a categorical model's sites and states."""
    if mix.binary or mix.n_sites != model.n_visible or mix.n_states != model.n_states:
        raise ValueError(
            f"the mixture reference has {mix.n_sites} sites of {mix.n_states} states; this {model.family} has "
            f"{model.n_visible} sites of {model.n_states} states"
        )


# --------------------------------------------------------------------------- the augmented paths
def mixture_increment(comp: torch.Tensor, beta_from: float, beta_to: float) -> torch.Tensor:
    """``LSE_z((1 - beta_to) l_z) - LSE_z((1 - beta_from) l_z)`` per row of ``comp = l`` ``(n, C)``, float64,
    as a small number: with ``p = softmax((1 - beta_from) l)``, ``m = sum_z p_z l_z`` and
    ``d = beta_to - beta_from`` it is ``-d m + log1p(sum_z p_z expm1(-d (l_z - m)))``, exact in relative
    terms for small steps; steps with some ``|d (l_z - m)| > 1`` take the difference of the two
    log-sum-exps."""
    d = float(beta_to) - float(beta_from)
    if d == 0.0:
        return torch.zeros(comp.shape[0], dtype=torch.float64, device=comp.device)
    p = torch.softmax((1.0 - float(beta_from)) * comp, dim=1)
    m = (p * comp).sum(1, keepdim=True)
    t = -d * (comp - m)
    small = (t.abs() <= 1.0) | (p == 0)
    fine = -d * m[:, 0] + torch.log1p((p * torch.expm1(torch.where(small, t, torch.zeros_like(t)))).sum(1))
    if bool(small.all()):
        return fine
    coarse = torch.logsumexp((1.0 - float(beta_to)) * comp, 1) - torch.logsumexp((1.0 - float(beta_from)) * comp, 1)
    return torch.where(small.all(1), fine, coarse)


class MixtureState(NamedTuple):
    """Chain state on a mixture path: the family's own state ``base`` (its visible rows, cached
    pre-activations) and ``comp``, ``log pi_z + log q_z(v)`` per component ``(n, C)`` float64.  ``x``,
    ``v`` and ``pre_h`` are the base state's (what :mod:`logzbench.sampling` reads)."""

    base: Any
    comp: torch.Tensor

    @property
    def x(self):
        b = self.base
        if isinstance(b, torch.Tensor):
            return b
        return b.x if hasattr(b, "x") else b.v

    @property
    def v(self):
        return self.base.v if hasattr(self.base, "v") else self.x

    @property
    def pre_h(self):
        return self.base.pre_h


class MixtureTerms:
    """What every mixture path shares: the mixture's linear form, ``log Z_0``, the ``z`` draw and the
    increment of the mixture factor."""

    def _init_mixture(self, mixture: ProductMixture, device, hidden_log_z: float):
        self.mixture = mixture.to(device)
        self.n_components = mixture.n_components
        T, c = self.mixture.linear_form()
        self._T64, self._c = T, c
        self._T32 = T.to(torch.float32)
        self._hidden_log_z = float(hidden_log_z)

    def _comp(self, x: torch.Tensor) -> torch.Tensor:
        return self._c + self.mixture.features(x) @ self._T64.T

    def log_z0(self) -> float:
        """``(hidden factor) - log C``: ``f_0(v) = 2^n_hidden q(v) / C`` (module docstring)."""
        return self._hidden_log_z - math.log(self.n_components)

    def _mixture_log_f(self, comp: torch.Tensor, beta: float) -> torch.Tensor:
        return torch.logsumexp((1.0 - float(beta)) * comp, dim=1) - math.log(self.n_components)

    def _draw_z(self, comp: torch.Tensor, beta: float, generator: torch.Generator) -> torch.Tensor:
        """``z ~ p_beta(z | v)``, proportional to ``(pi_z q_z(v))^(1 - beta)``."""
        return categorical_from_logits((1.0 - float(beta)) * comp, generator)

    def settings(self) -> dict:
        return {"reference": "mixture", "reference_components": int(self.n_components)}


class MixtureGibbsPath(MixtureTerms):
    """The augmented mixture path (module docstring) of a family with one hidden layer summed out (a
    binary RBM, a Potts RBM).

    Parameters
    ----------
    base
        The family's path from the uniform logits ``0`` (its model part: ``log f_beta`` is
        ``beta a.v + sum_j softplus(beta x_j)``; its ``_state``, ``_da32`` = ``a`` and ``_coarse_increment``).
    mixture : ProductMixture
    W_T : tensor (n_hidden, m)
        The weights of the visible move's ``h W^T`` (float32).
    a : tensor (m,)
        The model's visible biases, flat (float32).
    draw_visible : callable
        ``(logits (n, m) float32, generator) -> visible rows`` (the family's exact draw).
    n_hidden : int
    """

    def __init__(self, base, mixture: ProductMixture, W_T, a, draw_visible, n_hidden: int):
        self.base = base
        self._init_mixture(mixture, a.device, n_hidden * math.log(2.0))
        self._W_T, self._a = W_T, a
        self._draw_visible = draw_visible

    def _wrap(self, bs) -> MixtureState:
        return MixtureState(bs, self._comp(bs.x if hasattr(bs, "x") else bs.v))

    def state_from_data(self, data) -> MixtureState:
        return self._wrap(self.base.state_from_data(data))

    def sample_initial(self, n_chains: int, generator: torch.Generator) -> MixtureState:
        """Exact draws of ``v`` from the mixture ``q``."""
        x, _ = self.mixture.sample_joint(n_chains, generator)
        return self._wrap(self.base._state(x))

    def log_f(self, state: MixtureState, beta: float) -> torch.Tensor:
        return self.base.log_f(state.base, beta) + self._mixture_log_f(state.comp, beta)

    def log_f_ratio(self, state: MixtureState, beta_from: float, beta_to: float) -> torch.Tensor:
        """The family's increment (from the uniform logits: ``d a.v`` and the softplus differences, as its
        own path computes it) plus the mixture factor's (:func:`mixture_increment`)."""
        return self.base.log_f_ratio(state.base, beta_from, beta_to) + mixture_increment(state.comp, beta_from, beta_to)

    def transition(self, state: MixtureState, beta: float, generator: torch.Generator) -> MixtureState:
        """One augmented block-Gibbs sweep at ``beta``: ``z ~ p(z | v)``, ``h ~ p(h | v)``, then
        ``v ~ p(v | z, h)`` with site logits ``(1 - beta) T_z + beta (a + W h)``."""
        from ..kernels import bernoulli_from_logits

        h = bernoulli_from_logits(state.base.pre_h, generator, scale=float(beta))
        return self._visible_move(state, h, float(beta), generator)

    def reweight_and_move(
        self, state: MixtureState, beta_from: float, beta_to: float, generator: torch.Generator
    ) -> tuple[torch.Tensor, MixtureState]:
        """``(log_f_ratio, transition)`` with the family's increment and hidden draw in one pass."""
        from ..kernels import reweight_and_draw

        bs = state.base
        inc, h = reweight_and_draw(bs.pre_h, beta_from, beta_to, generator, v=bs.v, dv=self.base._da32)
        if inc is None:
            inc = self.base._coarse_increment(bs, beta_from, beta_to)
        inc = inc + mixture_increment(state.comp, beta_from, beta_to)
        return inc, self._visible_move(state, h, float(beta_to), generator)

    def _visible_move(self, state: MixtureState, h: torch.Tensor, beta: float, generator) -> MixtureState:
        z = self._draw_z(state.comp, beta, generator)
        bias = torch.add(self._T32[z] * (1.0 - beta), self._a, alpha=beta)  # (n, m)
        pre_v = torch.addmm(bias, h, self._W_T, beta=1.0, alpha=beta)
        return self._wrap(self.base._state(self._draw_visible(pre_v, generator)))


class MixturePottsPath(MixtureTerms):
    """The augmented mixture path of a :class:`~logzbench.models.potts.PottsModel` (no hidden layer):
    ``z ~ p_beta(z | x)``, then the family's palindromic heat-bath sweep with the fields
    ``(1 - beta) log p_z + beta h`` of the chain's component (reversible for ``p_beta(x | z)``, so the
    kernel on ``x`` is reversible for ``p_beta(x)``: ``p(x) sum_z p(z | x) K_z(x, x') = sum_z p(z) p(x | z)
    K_z(x, x')`` is symmetric)."""

    def __init__(self, base, mixture: ProductMixture):
        self.base = base  # the family's path from the uniform logits 0
        self._init_mixture(mixture, base.model.device, 0.0)

    def _wrap(self, x) -> MixtureState:
        return MixtureState(x, self._comp(x))

    def state_from_data(self, data) -> MixtureState:
        return self._wrap(self.base.state_from_data(data))

    def sample_initial(self, n_chains: int, generator: torch.Generator) -> MixtureState:
        return self._wrap(self.mixture.sample_joint(n_chains, generator)[0])

    def log_f(self, state: MixtureState, beta: float) -> torch.Tensor:
        return float(beta) * self.base._u(state.base) + self._mixture_log_f(state.comp, beta)

    def log_f_ratio(self, state: MixtureState, beta_from: float, beta_to: float) -> torch.Tensor:
        return self.base.log_f_ratio(state.base, beta_from, beta_to) + mixture_increment(state.comp, beta_from, beta_to)

    def transition(self, state: MixtureState, beta: float, generator: torch.Generator) -> MixtureState:
        m, beta = self.base.model, float(beta)
        L, q = m.n_visible, m.n_states
        z = self._draw_z(state.comp, beta, generator)
        ref = self._T64[z].view(-1, L, q) * (1.0 - beta)  # (n, L, q)
        fields = beta * m.h
        x = state.base.clone()
        for i in list(range(L)) + list(range(L - 2, -1, -1)):
            x[:, i] = categorical_from_logits(m.conditional_logits(x, i, fields, beta) + ref[:, i], generator)
        return self._wrap(x)
