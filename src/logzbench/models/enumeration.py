"""Exact ``log Z`` of a binary RBM by enumerating its smaller layer.

Summing the larger layer out analytically, ``Z = sum_h exp(b.h) prod_i (1 + exp(a_i + (W h)_i))``
(or the same with the layers swapped), so a model with ``min(n_visible, n_hidden) = n``
needs ``2^n`` terms.  The states are enumerated in chunks on the device and reduced with
a running log-sum-exp in float64.

The DBM and the DBN enumerate with the same pieces (:func:`state_bits`; :func:`exact_log_z` of
the DBM's even/odd view and of the DBN's top RBM); the ``exact`` estimator
(:mod:`logzbench.estimators.exact`) and training's exact monitoring call :func:`exact_log_z`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["MAX_ENUMERATION_BITS", "exact_log_z", "state_bits"]

#: Refuse to enumerate more than 2^MAX_ENUMERATION_BITS states (it would take hours).
MAX_ENUMERATION_BITS = 32


def state_bits(start: int, stop: int, n: int, device, dtype) -> torch.Tensor:
    """Binary states ``start, ..., stop - 1`` of ``n`` units, one per row (bit ``i`` of the index is unit ``i``).

    Parameters
    ----------
    start, stop : int
        Range of state indices, ``0 <= start <= stop <= 2^n``.
    n : int
        Number of units.
    device : torch.device
    dtype : torch.dtype

    Returns
    -------
    torch.Tensor, shape (stop - start, n)
    """
    idx = torch.arange(start, stop, device=device, dtype=torch.int64)
    shifts = torch.arange(n, device=device, dtype=torch.int64)
    return ((idx.unsqueeze(1) >> shifts) & 1).to(dtype)


def exact_log_z(rbm, chunk_size: int = 1 << 14, dtype=torch.float64, progress: bool = False) -> float:
    """``log Z`` of ``rbm`` by enumeration of the smaller layer.

    Parameters
    ----------
    rbm : BinaryRBM
    chunk_size : int
        States per chunk (memory ~ ``chunk_size * max(n_visible, n_hidden)`` values).
    dtype : torch.dtype
        Arithmetic precision (float64 by default).
    progress : bool
        Show a progress bar.

    Returns
    -------
    float
    """
    W = rbm.W.to(dtype)
    if rbm.n_hidden <= rbm.n_visible:
        n, M, own_bias, other_bias = rbm.n_hidden, W.T, rbm.hidden_bias.to(dtype), rbm.visible_bias.to(dtype)
    else:
        n, M, own_bias, other_bias = rbm.n_visible, W, rbm.visible_bias.to(dtype), rbm.hidden_bias.to(dtype)
    if n > MAX_ENUMERATION_BITS:
        raise ValueError(
            f"exact enumeration needs 2^{n} states (smaller layer has {n} units); "
            f"refusing above 2^{MAX_ENUMERATION_BITS}. Use an estimator (ais, raise, csl) instead."
        )
    total = 1 << n
    parts = []
    it = range(0, total, chunk_size)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, total=(total + chunk_size - 1) // chunk_size, desc="exact log Z", unit="chunk")
    for start in it:
        s = state_bits(start, min(start + chunk_size, total), n, rbm.device, dtype)
        pre = torch.addmm(other_bias, s, M)
        parts.append(torch.logsumexp(s @ own_bias + F.softplus(pre).sum(dim=1), dim=0))
    return float(torch.logsumexp(torch.stack(parts), dim=0))
