"""The transition of a discrete user energy's annealing path, chosen once per estimate (``transition``).

A :class:`~logzbench.models.EnergyModel` on a binary or categorical domain anneals with one of
:data:`~logzbench.options.TRANSITIONS` (:class:`~logzbench.models.energy_path.DiscreteEnergyPath`):

``gibbs``
    a Metropolis-within-Gibbs sweep (``dim`` calls of ``log_f``), or block Gibbs over the colour classes
    of the model's exact ``conditional``;
``gwg``
    a Gibbs-with-Gradients move (one gradient of ``log f`` ranks every single-site change), its number of
    flips per move tuned;
``dmala``
    a discrete Langevin move (every coordinate proposed at once from one gradient), its step size tuned;
``auto``
    the one of these with the most effective samples per second in a short pilot at ``beta = 1``.

Everything that must be known before the measured run happens here, once, from a generator of its own
(:func:`transition_generator`, never the run's): ``auto``'s pilot, then the chosen kernel's tuning by
acceptance rate at ``beta = 1`` (:meth:`~logzbench.models.energy_path.DiscreteEnergyPath.tune`), whose
parameter is frozen on every path the estimator builds afterwards.  The pilots' transitions times their
chains are added to the result's ``total_sweeps`` (:meth:`TransitionChoice.record`), and the result
records what ran (``settings["transition"]``, the tuned parameter) and, for ``auto``, what was measured.

An estimator that runs its transitions backwards (RAISE, reverse AIS, the sandwich's upper end) sets
``NEEDS_REVERSIBLE = True`` in its module: its reverse chain is valid only for a kernel reversible with
respect to each intermediate distribution (RAISE, Burda et al. 2015, Sec. 3), and a path whose
``reversible`` is false is refused there (:func:`check_reversible`).
"""

from __future__ import annotations

import math
import time
from typing import Any, NamedTuple

import torch

from ..options import AUTO_TRANSITION
from ..sources import DISCRETE_ENERGY_FAMILIES, ENERGY_FAMILIES
from ..utils import stream_generator

__all__ = [
    "TransitionChoice",
    "applies",
    "check_options",
    "check_reversible",
    "choose",
    "transition_generator",
    "transition_path",
]

#: the transition pilot's stream of the run's seed (:func:`transition_generator`)
_TRANSITION_STREAM = 0x7452414E


def transition_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The transition pilots' generator: seeded from ``seed`` through a separate stream, so their draws are
    independent of the main run's generator and of the schedule pilots'."""
    return stream_generator(seed, _TRANSITION_STREAM, device)


def applies(model) -> bool:
    """Whether ``model``'s path takes a transition: a discrete user energy (the families have their own
    samplers; a continuous energy anneals with Hamiltonian transitions)."""
    return getattr(model, "family", None) in DISCRETE_ENERGY_FAMILIES


def check_options(transition: str, model) -> None:
    """Refuse, before any work, a gradient transition where there is none to take: on a family's model (its
    own Gibbs sampler) or on a continuous energy.  ``gibbs`` and ``auto`` are accepted everywhere (``auto``
    leaves a family's or a continuous energy's own transitions as they are)."""
    if transition in ("gibbs", AUTO_TRANSITION) or applies(model):
        return
    fam = getattr(model, "family", "")
    if fam == ENERGY_FAMILIES["continuous"]:
        raise ValueError(
            f"transition {transition} (--transition) needs a discrete domain (binary or categorical); this energy "
            "is continuous and anneals with Hamiltonian transitions (hais, raise-hmc)"
        )
    raise ValueError(
        f"transition {transition} (--transition) is for a user's discrete energy (FILE.py:NAME); a {fam} model "
        "anneals with its own Gibbs sampler: leave transition at gibbs"
    )


def check_reversible(ctx, path) -> None:
    """Refuse a non-reversible transition in an estimator that runs it backwards (``NEEDS_REVERSIBLE``)."""
    if not getattr(ctx.spec.module, "NEEDS_REVERSIBLE", False) or getattr(path, "reversible", True):
        return
    name = getattr(path, "transition_name", "this")
    raise ValueError(
        f"{ctx.name} runs its transitions in reverse, which needs a kernel reversible with respect to each "
        f"intermediate distribution; the {name} transition of this path is not ({path.transition_description}): "
        "use a reversible one (gibbs, gwg and dmala are; docs/models.md, 'Gradient-informed transitions')"
    )


class TransitionChoice(NamedTuple):
    """What :func:`choose` settled: the transition (``name``; ``requested``: as asked, ``auto`` included),
    its tuned parameter (``param_name``, ``param``; ``None`` for gibbs), the pilot's acceptance rate at
    ``beta = 1``, its cost (``sweeps``: transitions times chains of every pilot, ``seconds``) and, for
    ``auto``, the figures of every candidate (``candidates``)."""

    name: str
    requested: str
    param_name: str | None
    param: Any
    acceptance: float | None
    sweeps: int
    seconds: float
    candidates: dict | None

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"transition": self.name}
        if self.param_name is not None:
            out[self.param_name] = self.param
        return out

    def record(self, res):
        """Add the pilots' sweeps to ``res.total_sweeps`` and what ran to ``res.settings`` / ``res.extra``."""
        res.total_sweeps = int(res.total_sweeps) + int(self.sweeps)
        res.settings.update(self.settings())
        res.extra.update(
            transition_requested=self.requested,
            transition_pilot_sweeps=int(self.sweeps),
            transition_pilot_seconds=float(self.seconds),
        )
        if self.acceptance is not None and math.isfinite(float(self.acceptance)):
            res.extra["transition_acceptance"] = float(self.acceptance)
        if self.candidates is not None:
            res.extra["transition_candidates"] = self.candidates
        return res


def choose(requested: str, build, n_chains: int, generator: torch.Generator) -> TransitionChoice:
    """The transition to run: ``auto``'s pilot (:func:`~logzbench.models.energy_moves.choose_transition`) if
    ``requested``, then the kernel's tuning on a path from ``build(name)``, both on ``n_chains`` chains
    from ``generator`` (:func:`transition_generator`: not the run's)."""
    t0 = time.perf_counter()
    if requested == AUTO_TRANSITION:  # each candidate tuned in the pilot: the picked one's parameter is kept
        from ..models.energy_moves import choose_transition

        picked = choose_transition(build, n_chains, generator)
        name, candidates = picked["transition"], picked["candidates"]
        tuned = {k: candidates[name].get(k) for k in ("param_name", "param", "acceptance")}
        sweeps = int(picked["sweeps"]) * n_chains
    else:
        name, candidates = requested, None
        tuned = {} if name == "gibbs" else build(name).tune(n_chains, generator)  # gibbs has nothing to tune
        sweeps = int(tuned.get("sweeps", 0)) * n_chains
    return TransitionChoice(
        name=name,
        requested=requested,
        param_name=tuned.get("param_name"),
        param=tuned.get("param"),
        acceptance=tuned.get("acceptance"),
        sweeps=sweeps,
        seconds=time.perf_counter() - t0,
        candidates=candidates,
    )


def transition_path(requested: str, model, build, n_chains: int, seed: int, device, choice=None):
    """``(path, choice)``: the path a run moves its chains on.  ``build(name)`` makes ``model``'s path with
    transition ``name`` (``None``: the path as it always was, a family's or a continuous model's, and
    ``gibbs``, which has nothing to choose or tune; ``choice`` is then ``None``).  A discrete user energy's
    transition is settled by :func:`choose` (on ``n_chains`` chains from :func:`transition_generator` of
    ``seed``), unless ``choice`` says it already was, and its parameter is frozen on the path."""
    if requested == "gibbs" or not applies(model):
        return build(None), None
    if choice is None:
        choice = choose(requested, build, n_chains, transition_generator(seed, device))
    path = build(choice.name)
    if choice.param is not None:
        path.move_param = choice.param
    return path, choice
