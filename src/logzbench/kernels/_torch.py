"""The exact Bernoulli rule and the log-weight increments in torch operations (any device).

They serve where neither compiled kernel does: devices without the Triton kernels (CUDA without
Triton or with ``LOGZBENCH_NO_TRITON=1``, other accelerators) and CPU tensors of other dtypes than
the kernel's.  :func:`_bernoulli_torch` applies the CPU kernel's decision rule (a random byte per
unit against ``floor(256 p)``, ties refined 52 bits at a time) with random numbers from the run's
generator, so it is exact but does not give the kernel's bits.  The increments are float64
softplus differences (:func:`_softplus_diff_float64`), or on CPU for other dtypes the series form
``-log1p(sigmoid(beta_to x) expm1(-d x))`` in the input's precision (:func:`_softplus_diff_series`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._constants import _NUMPY_DTYPES, _TWO52, _table

#: softplus(y) = y in float64 beyond this (exp(-40) is below half an ulp of 40).
_SOFTPLUS64_LINEAR = 40.0


def _bernoulli_torch(
    x: torch.Tensor, scale: float, logits: bool, generator: torch.Generator, out: torch.Tensor
) -> torch.Tensor:
    """The same decision rule in torch operations (any device), random numbers from ``generator``:
    a byte per unit, then for ties 52-bit integers (``torch.sigmoid`` for the tie fraction)."""
    dev = x.device
    zb = x * scale if scale != 1.0 else x.clone()
    r = torch.randint(0, 256, x.shape, generator=generator, device=dev, dtype=torch.uint8).long()
    if logits:
        table = torch.as_tensor(_table(_NUMPY_DTYPES[x.dtype]), device=dev)
        lo, hi = table[r], table[r + 1]
    else:
        lo = r.to(x.dtype)
        hi = lo + 1.0
    fire = zb >= hi
    tie = ~(fire | (zb < lo))
    out.copy_(fire)
    idx = tie.reshape(-1).nonzero().squeeze(1)
    if idx.numel():
        v = zb.reshape(-1)[idx].double()
        rr = r.reshape(-1)[idx].double()
        f = (256.0 * torch.sigmoid(v) - rr if logits else v - rr).clamp(0.0, 1.0)
        res = torch.zeros_like(f)
        cur = torch.nan_to_num(f, nan=0.0)
        pending = (cur > 0).nonzero().squeeze(1)
        while pending.numel():
            k = torch.randint(0, 2**52, (pending.numel(),), generator=generator, device=dev, dtype=torch.int64).double()
            g = cur[pending] * _TWO52
            fl = torch.floor(g)
            res[pending[k < fl]] = 1.0
            rest = g - fl
            cur[pending] = rest
            pending = pending[(k == fl) & (rest > 0)]
        res[torch.isnan(f)] = float("nan")
        out.view(-1)[idx] = res.to(out.dtype)
    return out


def _softplus_diff_float64(
    x: torch.Tensor, beta_from: float, beta_to: float, d: float, v: torch.Tensor | None, dv: torch.Tensor | None
) -> torch.Tensor:
    """Row sums of float64 ``softplus(beta_to x) - softplus(beta_from x)``, plus ``d (v . dv)`` when
    ``v`` is given: no coarse-step test and no host synchronisation (the non-CPU devices' path)."""
    x64 = x.double()
    hid = (
        F.softplus(x64 * beta_to, threshold=_SOFTPLUS64_LINEAR)
        - F.softplus(x64 * beta_from, threshold=_SOFTPLUS64_LINEAR)
    ).sum(dim=1)
    return hid + d * (v.double() @ dv.double()) if v is not None else hid


def _softplus_diff_series(
    x: torch.Tensor, beta_to: float, d: float, v: torch.Tensor | None, dv: torch.Tensor | None
) -> torch.Tensor | None:
    """Row sums of ``-log1p(sigmoid(beta_to x) expm1(-d x))`` in ``x``'s precision, summed in float64,
    plus ``d (v . dv)`` when ``v`` is given; ``None`` when some ``|d x| > 1`` (or is NaN)."""
    t = torch.mul(x, -d)
    if not bool((t.abs() <= 1.0).all()):
        return None
    p = torch.mul(x, beta_to).sigmoid_()
    hid = -t.expm1_().mul_(p).log1p_().sum(dim=1, dtype=torch.float64)
    return hid + d * (v.double() @ dv.double()) if v is not None else hid
