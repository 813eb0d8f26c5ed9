"""Interfaces every model family implements.

The estimators never look inside a model: they talk to an :class:`AnnealingPath`,
a sequence of unnormalised densities ``f_beta`` indexed by an inverse temperature
``beta`` in [0, 1] with

* ``beta = 0``: a tractable initial distribution ``p_0`` (exact samples, known ``log Z_0``);
* ``beta = 1``: the model, whose ``log Z`` is wanted.

A path's *state* is whatever the family needs to carry between transitions: a tensor
of visible units for an RBM with the hidden layer summed out, a NamedTuple of
(position, momentum) for a Hamiltonian kernel on a continuous model, and so on.
States are batched: their leading dimension is the number of chains.  Log-densities are
returned in float64, one value per chain.

Estimators that need samples from the target (RAISE, CSL, reverse IS) also use
``transition`` at ``beta = 1``; estimators that need samples from the proposal use
``sample_initial``.  Nothing here assumes binary or discrete states.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch


@runtime_checkable
class AnnealingPath(Protocol):
    """A geometric-average path ``f_beta(x) = f_0(x)^(1-beta) f_1(x)^beta`` between a
    tractable initial distribution and a model.

    Implementations must make ``transition(state, beta)`` leave ``p_beta`` invariant and be
    reversible with respect to it (Gibbs sweeps over a marginalised layer and HMC with
    momentum negation both qualify), so that the same kernel serves AIS and RAISE.
    """

    def log_z0(self) -> float:
        """``log Z_0`` of the initial distribution, exactly."""

    def sample_initial(self, n_chains: int, generator: torch.Generator) -> Any:
        """``n_chains`` exact, independent samples from ``p_0``."""

    def log_f(self, state: Any, beta: float) -> torch.Tensor:
        """``log f_beta(x)`` per chain, float64, shape ``(n_chains,)``."""

    def log_f_ratio(self, state: Any, beta_from: float, beta_to: float) -> torch.Tensor:
        """``log f_{beta_to}(x) - log f_{beta_from}(x)`` per chain, float64.

        Implementations compute this difference directly (not as a difference of two
        large numbers) so that tens of thousands of increments do not accumulate
        rounding error.
        """

    def transition(self, state: Any, beta: float, generator: torch.Generator) -> Any:
        """One MCMC transition leaving ``p_beta`` invariant."""

    def state_from_data(self, data: torch.Tensor) -> Any:
        """A state whose observed part is ``data`` (rows), for estimators that start at data."""


class AcceptanceCounts:
    """A path whose transitions propose and accept or reject: its ``n_proposed`` and ``n_accepted`` (set to
    0 by the path, counted by its transitions) and their ratio."""

    n_proposed: int
    n_accepted: int

    @property
    def acceptance_rate(self) -> float:
        """Fraction of accepted moves over all transitions so far (NaN before any)."""
        return self.n_accepted / self.n_proposed if self.n_proposed else float("nan")
