"""Samples from a model: exact draws where enumeration is cheap, MCMC on the model's annealing path
otherwise, or the final states of AIS (the annealing model ``p_ann`` of the RAISE paper, Sec. 3).

What is sampled
    ``p_beta``, the intermediate distribution of the model's annealing path at inverse temperature
    ``beta``: ``f_beta = f_0^(1 - beta) f_1^beta`` with ``f_0`` the initial distribution ``init`` names
    (uniform or the data base rate; a GRBM's ``N(b, sigma^2 I)``, a continuous model's Gaussian
    proposal) and ``f_1`` the model.  At ``beta = 1`` (the default) this is the model itself and ``init``
    only decides where MCMC chains start; at ``beta < 1`` with ``init="uniform"`` it is the tempered
    model ``f_1^beta / Z(beta)``.

How (``SampleResult.method``)
    ``"exact"``
        Independent draws by enumeration when the smaller side of the model has at most
        ``2^EXACT_SAMPLE_BITS`` states: an RBM-like model (RBM, DBM's even/odd view, DBN's top RBM,
        GRBM, Potts RBM) enumerates whichever of its visible or hidden configurations are fewer, draws
        that side from its exact marginal and the other from its conditional; a Potts model or a
        discrete energy enumerates its visible states.  The log-probabilities are float64 and one draw
        is an inverse-CDF lookup of one float64 uniform.  A complete product of experts (``L = M``) and
        the generative models (linear, bilinear) are sampled exactly in closed form (``beta = 1``).
    ``"gibbs"``
        The path's own transition at fixed ``beta`` (a block-Gibbs sweep, a heat-bath or
        Metropolis-within-Gibbs sweep), which leaves ``p_beta`` invariant: ``chains`` chains from
        ``p_0``, ``burn_in`` sweeps discarded (default :data:`DEFAULT_BURN_IN`), then one state kept per
        chain every ``thin`` sweeps until ``n`` are kept.
    ``"hmc"``
        The same on a continuous analysis model (product of experts, mcRBM, continuous energy) with the
        Hamiltonian kernel HAIS uses (one leapfrog step of 0.2, partial momentum refresh; Sohl-Dickstein
        & Culpepper 2012).
    ``"ais-final"``
        With ``annealed=K``: the final states of ``n`` AIS chains over the linear schedule of ``K``
        steps (the estimate command's default schedule), each moved once at every ``beta_1 .. beta_K``.
        They are exact draws from ``p_ann``, the distribution whose probabilities RAISE bounds from below;
        nothing is reweighted.
    ``"pt"``
        With ``method="pt"``: the states at ``beta = 1`` of non-reversible parallel tempering
        (:mod:`logzbench.estimators.pt`): ``chains`` runs of ``temperatures`` chains each, the ladder tuned
        in ``rounds`` rounds of doubling scans (they are the burn-in), then ``burn_in`` more scans (default
        0) and one state per run kept every ``thin`` scans until ``n`` are kept.  Swaps carry states found at
        high temperature (where the chains cross between modes) down to the model; ``settings`` reports the
        ladder, the barrier ``Lambda``, the round trips and the swap acceptance of the kept scans.

Hidden units
    Where the state has them (RBM, DBM, DBN, GRBM, Potts RBM) ``SampleResult.h`` holds the first hidden
    layer, drawn from ``p_beta(h | x)`` (so ``(x, h)`` is a joint draw); otherwise ``None``.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from . import registry
from .api import as_rows
from .estimators import ais as ais_kernel
from .estimators import pt as pt_kernel
from .estimators.hais import analysis_path
from .estimators.transition import check_options as check_transition
from .estimators.transition import transition_path
from .kernels import bernoulli_from_logits
from .models.energy_path import DiscreteEnergyPath
from .models.grbm import GRBMAnnealingPath
from .models.io import load_model
from .models.potts import PottsAnnealingPath
from .models.potts_rbm import PottsRBMAnnealingPath
from .models.rbm import RBMAnnealingPath
from .options import declared
from .schedules import make_schedule
from .utils import make_generator, resolve_device

__all__ = ["DEFAULT_BURN_IN", "EXACT_CHOICES", "EXACT_SAMPLE_BITS", "METHODS", "SAMPLERS", "SampleResult", "sample"]

#: the most states (``2^EXACT_SAMPLE_BITS``) exact sampling enumerates: their float64
#: log-probabilities take 8 MiB, and enumerating them a fraction of a second for small layers
EXACT_SAMPLE_BITS = 20
#: MCMC sweeps discarded before the first kept sample when ``burn_in`` is not given: a rule of thumb,
#: not a guarantee (a trained RBM with separated modes can need far more; compare with exact or annealed
#: draws, or run longer and see whether the samples change)
DEFAULT_BURN_IN = 1000
#: how samples are drawn (:attr:`SampleResult.method`)
METHODS = ("exact", "gibbs", "hmc", "ais-final", "pt")
#: what ``sample(method=...)`` chooses from: ``auto`` (exact where cheap, else the path's own MCMC; AIS with
#: ``annealed``) or ``pt`` (parallel tempering)
SAMPLERS = ("auto", "pt")
#: values of ``exact``
EXACT_CHOICES = ("auto", "always", "never")
#: states per enumeration step
_CHUNK = 1 << 14


class SampleResult(NamedTuple):
    """Samples and how they were drawn.

    Attributes
    ----------
    x : numpy.ndarray, shape (n, D)
        Visible samples: float64 (binary 0/1 or real), int64 states ``0..q-1`` for a categorical model.
    h : numpy.ndarray, shape (n, H), or None
        First-layer hidden units (float64 0/1) drawn jointly with ``x`` where the model has them.
    method : str
        ``"exact"``, ``"gibbs"`` (a user's discrete energy: its transition, ``"gwg"`` or ``"dmala"``), ``"hmc"``,
        ``"ais-final"`` or ``"pt"`` (module docstring).
    burn_in : int
        Sweeps discarded before the first kept sample (0 for exact and annealed draws; for ``pt`` the tuning
        scans and ``burn_in``).
    sweeps : int
        Transition sweeps run per chain in all (burn-in included; ``K`` for annealed draws; for ``pt`` the scans,
        each one sweep of every temperature's chain).
    seconds : float
        Wall time of the drawing.
    settings : dict
        Everything used: ``n``, ``beta``, ``annealed``, ``init``, ``schedule``, ``seed``, ``thin``,
        ``chains``, ``device``, ``model_family``, ``exact`` and, for exact draws, ``enumerated``.
    """

    x: np.ndarray
    h: np.ndarray | None
    method: str
    burn_in: int
    sweeps: int
    seconds: float
    settings: dict


def _int(value, name: str, low: int) -> int:
    """``value`` as an int ``>= low``; a one-line ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _check_pt(method, beta, annealed, exact, temperatures, rounds) -> tuple[int, int]:
    """``(temperatures, rounds)`` of a ``pt`` draw (their defaults when ``None``); a one-line ValueError for
    a method that is not one of :data:`SAMPLERS`, for what ``pt`` cannot do, and for ``temperatures`` /
    ``rounds`` given to another method."""
    if method not in SAMPLERS:
        raise ValueError(f"unknown sampling method {method!r}; choose one of {SAMPLERS}")
    if method != "pt":
        given = [k for k, v in (("temperatures", temperatures), ("rounds", rounds)) if v is not None]
        if given:
            raise ValueError(f"{' and '.join(given)} apply to method='pt' only (parallel tempering)")
        return 0, 0
    if annealed is not None or beta != 1.0 or exact == "always":
        what = "annealed" if annealed is not None else f"beta = {beta}" if beta != 1.0 else "exact='always'"
        raise ValueError(f"method='pt' draws MCMC samples of the model (beta = 1); {what} does not apply")
    temperatures = pt_kernel.DEFAULT_TEMPERATURES if temperatures is None else temperatures
    if isinstance(temperatures, bool) or not isinstance(temperatures, (int, np.integer)) or temperatures < 2:
        raise ValueError(
            f"temperatures must be an integer >= 2 (a ladder from beta = 0 to beta = 1), got {temperatures!r}"
        )
    rounds = _int(pt_kernel.DEFAULT_ROUNDS if rounds is None else rounds, "rounds", 0)
    return int(temperatures), rounds


def _check(n, beta, annealed, init, burn_in, thin, chains, exact) -> tuple:
    n = _int(n, "n (samples)", 1)
    try:
        beta = float(beta)
    except (TypeError, ValueError):
        raise ValueError(f"beta must be a number in [0, 1], got {beta!r}") from None
    if not (0.0 <= beta <= 1.0):
        raise ValueError(f"beta must be in [0, 1], got {beta!r}")
    annealed = None if annealed is None else _int(annealed, "annealed (K)", 1)
    if annealed is not None and beta != 1.0:
        raise ValueError(f"annealed samples are the final states of AIS, at beta = 1; got beta = {beta}")
    if init not in registry.INITS:
        raise ValueError(f"unknown initial distribution {init!r}; choose one of {registry.INITS}")
    burn_in = None if burn_in is None else _int(burn_in, "burn_in", 0)
    thin = _int(thin, "thin", 1)
    chains = None if chains is None else _int(chains, "chains", 1)
    if exact not in EXACT_CHOICES:
        raise ValueError(f"exact must be one of {EXACT_CHOICES}, got {exact!r}")
    return n, beta, annealed, burn_in, thin, chains


def sample(
    model,
    n: int,
    *,
    beta: float = 1.0,
    annealed: int | None = None,
    init: str = "base-rate",
    data=None,
    burn_in: int | None = None,
    thin: int = 1,
    chains: int | None = None,
    seed: int = 0,
    device="cpu",
    exact: str = "auto",
    method: str = "auto",
    temperatures: int | None = None,
    rounds: int | None = None,
    transition: str = "gibbs",
) -> SampleResult:
    """``n`` samples of ``p_beta`` (or of the annealing model ``p_ann``) of ``model``.

    Parameters
    ----------
    model : model object, or what :func:`logzbench.models.load_model` reads
    n : int
        Samples, ``> 0``.
    beta : float
        Inverse temperature in ``[0, 1]`` on the model's annealing path (module docstring); 1 = the model.
    annealed : int, optional
        ``K``: return the final states of ``n`` AIS chains over the linear schedule of ``K`` steps
        (draws from ``p_ann``); ``beta`` must be 1.
    init : {"base-rate", "uniform"}
        The path's initial distribution: where MCMC and AIS chains start, and ``f_0`` of ``p_beta`` for
        ``beta < 1``.  A family with one initial distribution (GRBM, DBN: uniform; continuous models:
        the Gaussian proposal) uses it whatever ``init`` says; the one used is recorded.
    data : array-like, shape (N, D), or path, optional
        Training rows: the data base rate when the model has no ``data_mean``.
    burn_in : int, optional
        MCMC sweeps discarded first (default :data:`DEFAULT_BURN_IN`).
    thin : int
        MCMC sweeps between two kept states of a chain.
    chains : int, optional
        Parallel MCMC chains (default ``n``: one sample per chain).
    seed : int
        Seeds the run's one :class:`torch.Generator`: the same seed gives the same samples.
    device : str or torch.device
    exact : {"auto", "always", "never"}
        ``auto``: exact where enumeration (``<= 2^EXACT_SAMPLE_BITS`` states) or a closed form allows,
        else MCMC; ``never`` forces MCMC; ``always`` refuses a model that cannot be sampled exactly.
    method : {"auto", "pt"}
        ``auto``: as ``exact`` and ``annealed`` say; ``pt``: non-reversible parallel tempering (module
        docstring; ``chains`` runs, default ``n``; ``burn_in`` scans after the tuning, default 0).
    temperatures, rounds : int, optional
        ``pt``: chains on the ladder (default 16, at least 2) and ladder-tuning rounds (default 10).
    transition : {"gibbs", "gwg", "dmala", "auto"}
        A user's discrete energy: the MCMC, pt and AIS transition (:mod:`logzbench.estimators.transition`;
        tuned, or picked and tuned, by a pilot at ``beta = 1`` before the run, from a generator of its own;
        what ran is recorded in ``settings``).  A family's model and a continuous energy keep their own.

    Returns
    -------
    SampleResult

    Raises
    ------
    ValueError
        One line naming the problem: ``n <= 0``, ``beta`` outside ``[0, 1]``, bad options, or a model
        with no sampler for what was asked (naming its family).
    """
    n, beta, annealed, burn_in, thin, chains = _check(n, beta, annealed, init, burn_in, thin, chains, exact)
    temperatures, rounds = _check_pt(method, beta, annealed, exact, temperatures, rounds)
    transition = declared()["transition"].check(transition)
    dev = resolve_device(device)
    model = _as_model(model, dev)
    check_transition(transition, model)
    fam = registry.family(model.family)
    train = as_rows(data, model, fam, "training data")
    g = make_generator(seed, dev)
    settings: dict[str, Any] = {
        "n": n,
        "beta": beta,
        "annealed": annealed,
        "seed": int(seed),
        "device": str(dev),
        "model_family": model.family,
        "model_kind": fam.kind,
        "exact": exact,
    }

    def moving_path():  # the one path a branch below moves its chains on
        n_chains = n if chains is None else chains
        return _moving_path(model, fam, init_used, train, transition, n_chains, seed, dev, settings)

    init_used = init if init in fam.inits else (fam.inits[0] if fam.inits else "proposal")
    t0 = time.perf_counter()
    if fam.kind == "generative":
        if method == "pt":
            raise ValueError(f"a {model.family} model has no tempering path over x: it is sampled exactly")
        out = _generative(model, n, beta, annealed, exact, g)
        settings.update(init=None, thin=None, chains=None)
    elif method == "pt":
        out = _by_pt(model, moving_path(), n, chains, burn_in, thin, temperatures, rounds, g, init_used, settings)
    elif annealed is not None:
        out = _by_ais(model, moving_path, n, annealed, exact, g, init_used, settings)
    else:
        out = _exact(model, fam, n, beta, init_used, train, g, settings) if exact != "never" else None
        if out is None and exact == "always":
            raise ValueError(
                f"this {model.family} model cannot be sampled exactly at beta = {beta} (enumeration is "
                f"limited to 2^{EXACT_SAMPLE_BITS} states; closed forms at beta = 1: complete PoE, linear / "
                f"bilinear models); use exact='auto' or 'never' (MCMC)"
            )
        if out is None:
            out = _by_mcmc(model, fam, moving_path(), n, beta, burn_in, thin, chains, g, init_used, settings)
    return _result(out, fam, time.perf_counter() - t0, settings)


def _as_model(model, dev):
    """``model`` on ``dev``: loaded when it is a path, refused when it is no logzbench model."""
    if isinstance(model, (str, os.PathLike)):
        return load_model(model, device=dev)
    if not callable(getattr(model, "to", None)) or getattr(model, "family", None) is None:
        raise ValueError(f"cannot sample a {type(model).__name__}: not a logzbench model")
    return model.to(dev)


def _by_pt(
    model, path, n: int, chains, burn_in, thin: int, temperatures: int, rounds: int, g, init_used: str, settings: dict
):
    """``method="pt"``: ``(x, h, method, burn_in, sweeps)`` of parallel tempering on ``path``."""
    n_runs = n if chains is None else chains
    burn = 0 if burn_in is None else burn_in
    x, h, scans, info = _pt(model, path, n, n_runs, temperatures, rounds, burn, thin, g)
    settings.update(init=init_used, thin=thin, chains=n_runs, temperatures=temperatures, rounds=rounds, **info)
    _acceptance(path, settings)
    return x, h, "pt", int(2**rounds - 1 + burn), scans


def _by_ais(model, moving_path, n: int, annealed: int, exact: str, g, init_used: str, settings: dict):
    """``annealed``: the final states of ``n`` AIS chains over the linear schedule of ``annealed`` steps."""
    if exact == "always":
        raise ValueError("annealed samples come from AIS, not enumeration: exact='always' does not apply")
    path = moving_path()
    betas = make_schedule("linear", annealed)
    state, sweeps = ais_kernel.run(path, betas, n, g, final_move=True)
    x, h = _extract(model, path, state.x, 1.0, g)
    settings.update(init=init_used, schedule="linear", chains=n, thin=None)
    _acceptance(path, settings)
    return x, h, "ais-final", 0, int(sweeps)


def _by_mcmc(model, fam, path, n: int, beta: float, burn_in, thin: int, chains, g, init_used: str, settings: dict):
    """MCMC at ``beta`` on ``path``: ``n`` states, ``thin`` sweeps apart, after the burn-in."""
    burn = DEFAULT_BURN_IN if burn_in is None else burn_in
    n_chains = n if chains is None else chains
    x, h, sweeps = _mcmc(model, path, n, beta, burn, thin, n_chains, g)
    method = "hmc" if fam.kind == "analysis" else getattr(path, "transition_name", "gibbs")
    settings.update(init=init_used, burn_in_rule="given" if burn_in is not None else "default")
    settings.update(thin=thin, chains=n_chains)
    _acceptance(path, settings)
    return x, h, method, burn, sweeps


def _result(out: tuple, fam, seconds: float, settings: dict) -> SampleResult:
    """The :class:`SampleResult` of a branch's ``(x, h, method, burn_in, sweeps)``; ``settings`` completed."""
    x, h, method, burn, sweeps = out
    for key in ("init", "schedule", "thin", "chains"):
        settings.setdefault(key, None)
    settings.update(method=method, burn_in=int(burn), sweeps=int(sweeps))
    return SampleResult(
        x=_numpy(x, fam.kind == "categorical"),
        h=None if h is None else _numpy(h, False),
        method=method,
        burn_in=int(burn),
        sweeps=int(sweeps),
        seconds=seconds,
        settings=settings,
    )


def _numpy(t: torch.Tensor, categorical: bool) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.int64 if categorical else np.float64)


def _acceptance(path, settings: dict) -> None:
    """Record the acceptance rate of a Metropolis or Hamiltonian kernel (none for Gibbs sweeps)."""
    rate = getattr(path, "acceptance_rate", None)
    if isinstance(rate, float) and math.isfinite(rate):
        settings["acceptance_rate"] = rate


def _path(model, fam, init: str, train, **kw):
    """The model's annealing path from ``init``: the Gibbs path of a discrete or Gaussian-binary model (``kw``:
    a user energy's ``transition``), the Hamiltonian path (HAIS's kernel and proposal) of a continuous analysis
    model."""
    if fam.kind == "analysis":
        return analysis_path(model)
    return model.annealing_path(init, data=train, **kw)


def _moving_path(model, fam, init: str, train, transition: str, n_chains: int, seed: int, device, settings: dict):
    """:func:`_path` with ``transition`` (a discrete user energy's, chosen and tuned once on at most 100 of the
    run's chains from a generator of its own, :func:`logzbench.estimators.transition.transition_path`), what
    ran recorded in ``settings`` (the pilots' sweeps as ``transition_pilot_sweeps``, apart from the run's own
    ``sweeps``)."""

    def build(name: str | None):
        return _path(model, fam, init, train, **({} if name is None else {"transition": name}))

    path, choice = transition_path(transition, model, build, min(int(n_chains), 100), seed, device)
    if choice is not None:
        settings.update(choice.settings())
        settings.update(transition_requested=transition, transition_pilot_sweeps=int(choice.sweeps))
    return path


def _generative(model, n: int, beta: float, annealed, exact: str, g):
    """Ancestral draws ``a ~ p(a)``, ``x ~ p(x | a)`` of a generative model (exact, ``beta = 1`` only)."""
    if exact == "never" or annealed is not None or beta != 1.0:
        what = "exact='never'" if exact == "never" else "annealed" if annealed is not None else f"beta = {beta}"
        raise ValueError(
            f"a {model.family} model has no MCMC or annealing sampler over x ({what}): it is sampled "
            f"ancestrally, exactly, at beta = 1 only"
        )
    x = model.sample(n, g)
    return x, None, "exact", 0, 0


# --------------------------------------------------------------------------- exact draws
def _digits(idx: torch.Tensor, n_sites: int, q: int) -> torch.Tensor:
    """States of indices ``idx`` in base ``q`` (site 0 the fastest digit, as
    :func:`logzbench.models.potts.states_range` and :func:`logzbench.models.enumeration.state_bits`
    enumerate them), int64 ``(len(idx), n_sites)``."""
    powers = q ** torch.arange(n_sites, device=idx.device, dtype=torch.int64)
    return (idx.unsqueeze(1) // powers) % q


def _visible_side(core) -> tuple[int, int] | None:
    """``(sites, states per site)`` of a path's discrete state (``None``: real-valued, a GRBM)."""
    if isinstance(core, RBMAnnealingPath):
        return core.rbm.n_visible, 2
    if isinstance(core, (PottsAnnealingPath, PottsRBMAnnealingPath, DiscreteEnergyPath)):
        return int(core.model.n_visible), int(core.model.n_states)
    return None


def _hidden_side(core) -> int | None:
    """Hidden units summed out of a path's state that can be enumerated instead (RBM-like paths)."""
    if isinstance(core, RBMAnnealingPath):
        return core.rbm.n_hidden
    if isinstance(core, GRBMAnnealingPath):
        return core.grbm.n_hidden
    if isinstance(core, PottsRBMAnnealingPath):
        return core.model.n_hidden
    return None


def _hidden_log_f(core, h: torch.Tensor, beta: float) -> torch.Tensor:
    """``log f_beta(h)``, the path's joint density at ``beta`` with the visible units summed (integrated)
    out, float64 ``(n,)`` (up to a constant), for hidden rows ``h`` (float64 0/1)."""
    if isinstance(core, RBMAnnealingPath):
        rbm, a0 = core.rbm, core.a0.double()
        bias = a0 + beta * (rbm.visible_bias.double() - a0)
        pre = bias + beta * (h @ rbm.W.double().T)
        return beta * (h @ rbm.hidden_bias.double()) + F.softplus(pre).sum(dim=1)
    if isinstance(core, GRBMAnnealingPath):
        # int exp(-|v - b|^2 / (2 s^2) + beta v.W h / s) dv = const * exp(beta b.W h / s + beta^2 |W h|^2 / 2)
        W, b, c = core.grbm._params64()
        wh = h @ W.T
        return beta * (h @ c) + beta * (wh @ b) / core.sigma + 0.5 * beta**2 * (wh**2).sum(dim=1)
    m = core.model  # Potts RBM: each site's softmax normaliser
    bias = core._a0_64 + beta * core._da64
    pre = (bias + beta * (h @ m.W_flat.double().T)).reshape(h.shape[0], m.n_visible, m.n_states)
    return beta * (h @ m.hidden_bias.double()) + torch.logsumexp(pre, dim=2).sum(dim=1)


def _draw_index(log_f: torch.Tensor, n: int, g: torch.Generator) -> torch.Tensor:
    """``n`` indices drawn from ``softmax(log_f)``: float64 inverse CDF, one uniform per draw."""
    p = torch.exp(log_f - log_f.max())
    cdf = torch.cumsum(p, dim=0)
    u = torch.rand(n, generator=g, dtype=torch.float64, device=g.device).to(cdf.device) * cdf[-1]
    return torch.searchsorted(cdf, u, right=True).clamp_max(log_f.numel() - 1)


def _enumerate(count: int, log_f_of) -> torch.Tensor:
    """``log_f_of(indices)`` over ``0 .. count-1`` in chunks, float64 ``(count,)``."""
    parts = []
    with torch.no_grad():
        for start in range(0, count, _CHUNK):
            parts.append(log_f_of(start, min(count, start + _CHUNK)).double())
    return torch.cat(parts)


def _exact(model, fam, n: int, beta: float, init: str, train, g, settings: dict):
    """Exact draws ``(x, h, "exact", 0, 0)``, or ``None`` where the model is too large to enumerate
    (:data:`EXACT_SAMPLE_BITS`) and has no closed-form sampler."""
    if fam.kind == "analysis":
        complete = getattr(model, "size", None) == getattr(model, "n_dims", None)
        if beta != 1.0 or not complete or not callable(getattr(model, "sample", None)):
            return None
        settings.update(init=None, enumerated=None)
        if g.device.type != "cpu":  # the closed-form sampler draws on the CPU: a CPU generator seeded from g
            seed = int(torch.randint(0, 2**62, (1,), generator=g, device=g.device))
            g = torch.Generator().manual_seed(seed)
        return model.sample(n, g), None, "exact", 0, 0
    # at beta = 1 the path's density does not depend on its start: enumerate the model without needing data
    start = "uniform" if beta == 1.0 and "uniform" in fam.inits else init
    path = _path(model, fam, start, train)
    core = getattr(path, "top_path", path)  # a DBN: its top RBM's path
    sides = []
    vis = _visible_side(core)
    if vis is not None:
        sites, q = vis
        sides.append((q**sites if sites * math.log2(q) <= EXACT_SAMPLE_BITS + 1e-9 else None, "visible"))
    hid = _hidden_side(core)
    if hid is not None:
        sides.append((2**hid if hid <= EXACT_SAMPLE_BITS else None, "hidden"))
    sides = [(c, s) for c, s in sides if c is not None]
    if not sides:
        return None
    count, side = min(sides)
    dev = model.device
    if side == "visible":
        sites, q = vis

        def log_f_of(a, b):
            rows = _digits(torch.arange(a, b, device=dev), sites, q)
            return core.log_f(core.state_from_data(rows), beta)

        idx = _draw_index(_enumerate(count, log_f_of), n, g)
        state = core.state_from_data(_digits(idx, sites, q))
        x, h = _extract(model, path, state, beta, g)
    else:

        def log_f_of(a, b):
            return _hidden_log_f(core, _digits(torch.arange(a, b, device=dev), hid, 2).double(), beta)

        idx = _draw_index(_enumerate(count, log_f_of), n, g)
        h_top = _digits(idx, hid, 2).to(torch.float32)
        state = core._visible_move(h_top, beta, g)
        x, h = _extract(model, path, state, beta, g, h=h_top)
    settings.update(init=None if beta == 1.0 else start, enumerated=f"{count} {side} states")
    return x, h, "exact", 0, 0


# --------------------------------------------------------------------------- MCMC
def _extract(model, path, state, beta: float, g, h: torch.Tensor | None = None):
    """``(x, h)`` of a path's state: the visible rows and the first hidden layer, drawn from
    ``p_beta(h | x)`` unless given (``h``: the hidden units the state's visible rows were drawn from)."""
    if hasattr(path, "encode"):  # a DBN: the top RBM's visible units are h_1; v ~ p(v | h_1)
        h1 = state.v
        v = bernoulli_from_logits(torch.addmm(model.bias_0, h1, model.W_1.T), g)
        return v, h1
    x = state.x if hasattr(state, "x") else state.v if hasattr(state, "v") else state
    x = x.reshape(x.shape[0], -1) if x.ndim > 2 else x  # a grid MRF's (n, H, W) states: rows, row-major
    x = x[:, : model.n_visible] if hasattr(model, "n_visible") else x  # a DBM's view: [v, h_2, ...]
    if not hasattr(state, "pre_h"):
        return x, None
    if h is None:
        h = bernoulli_from_logits(state.pre_h, g, scale=beta)
    sizes = getattr(model, "layer_sizes", None)
    return x, (h[:, : sizes[1]] if sizes else h)


def _pt(model, path, n: int, n_runs: int, temperatures: int, rounds: int, burn_in: int, thin: int, g):
    """``(x, h, scans, diagnostics)``: ``n_runs`` parallel-tempering runs tuned in ``rounds`` rounds, ``burn_in``
    more scans, then the ``beta = 1`` state of every run kept every ``thin`` scans until ``n`` are kept."""
    state, betas, _, history = pt_kernel.run(path, temperatures, n_runs, g, rounds=rounds)
    for _ in range(burn_in):
        state, _ = pt_kernel.step(path, state, betas, g)
    stats = pt_kernel.RoundStats(len(betas) - 1, n_runs, g.device)
    trips0 = int(state.round_trips.sum())
    xs, hs, kept = [], [], 0
    while kept < n:
        if xs:
            for _ in range(thin):
                parity = state.scans % 2
                state, s = pt_kernel.step(path, state, betas, g)
                stats.add(s, parity)
        x, h = _extract(model, path, state.x[-1], 1.0, g)
        xs.append(x.detach())
        hs.append(None if h is None else h.detach())
        kept += int(x.shape[0])
    info = {"ladder": [float(b) for b in betas], "Lambda_tuning": history[-1]["Lambda"] if history else None}
    if stats.scans:
        info.update(
            Lambda=float(stats.rates().sum()),
            round_trips=int(state.round_trips.sum()) - trips0,
            swap_acceptance=(stats.accepted / stats.proposed.clamp(min=1)).cpu().numpy().tolist(),
        )
    x = torch.cat(xs)[:n]
    h = None if hs[0] is None else torch.cat(hs)[:n]
    return x, h, int(state.scans), info


def _mcmc(model, path, n: int, beta: float, burn_in: int, thin: int, n_chains: int, g):
    """``(x, h, sweeps)``: ``n_chains`` chains from ``p_0``, ``burn_in`` transitions at ``beta`` discarded,
    then one state per chain kept every ``thin`` transitions until ``n`` are kept."""
    state = path.sample_initial(n_chains, g)
    sweeps = 0
    for _ in range(burn_in):
        state = path.transition(state, beta, g)
        sweeps += 1
    xs, hs, kept = [], [], 0
    while kept < n:
        if xs:
            for _ in range(thin):
                state = path.transition(state, beta, g)
                sweeps += 1
        x, h = _extract(model, path, state, beta, g)
        xs.append(x.detach())
        hs.append(None if h is None else h.detach())
        kept += int(x.shape[0])
    x = torch.cat(xs)[:n]
    h = None if hs[0] is None else torch.cat(hs)[:n]
    return x, h, sweeps
