"""Helpers shared by the continuous model families (PoE, mcRBM, linear and bilinear generative)."""

from __future__ import annotations

import torch


def as_rows(x, n_dims: int, device) -> torch.Tensor:
    """``x`` as float64 rows ``(n, n_dims)`` on ``device``; a ValueError naming the expected shape otherwise."""
    x = torch.as_tensor(x, device=device)
    if x.dtype != torch.float64:
        x = x.double()
    if x.ndim != 2 or x.shape[1] != n_dims:
        raise ValueError(f"x must have shape (n, {n_dims}), got {tuple(x.shape)}")
    return x


class AnalysisRows:
    """What the analysis families (PoE, mcRBM) share: their inputs are float64 rows of ``n_dims`` values, and
    :meth:`energy` is the family's static ``_energy(x, *parameters)`` (which its ``energy_from_parameters``
    calls with other parameters) at the model's own ``_energy_parameters()``."""

    def _input(self, x) -> torch.Tensor:
        return as_rows(x, self.n_dims, self.device)

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """The energy ``E(x)`` of the family's module docstring (the unnormalised ``-log p(x)``).

        Parameters
        ----------
        x : torch.Tensor, shape (n, M), float64

        Returns
        -------
        torch.Tensor, shape (n,), float64
            Differentiable with respect to ``x`` (autograd).
        """
        return self._energy(self._input(x), *self._energy_parameters())
