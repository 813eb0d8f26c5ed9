"""Constants shared by the compiled kernel, its NumPy twin and the GPU kernels, and the logit
thresholds of the exact Bernoulli decision rule.

The float constants of ``bernoulli.c`` are those of :data:`_K32` and :data:`_K64` written as exact
hex literals (``tests/test_sampling.py`` checks that the file and this module agree).  The threshold
table ``T`` of a dtype holds ``T[0] = -inf``, ``T[256] = +inf`` and, for ``k = 1 .. 255``, the
smallest float with ``sigmoid(T[k]) >= k/256``: a logit ``z`` and a byte ``r`` give
``floor(256 sigmoid(z)) >= r + 1`` exactly when ``z >= T[r + 1]``.
"""

from __future__ import annotations

import threading

import numpy as np
import torch

#: Units per block of the kernel's parallel loop over a draw (a multiple of 16).
CHUNK = 4096

_NUMPY_DTYPES = {torch.float32: np.float32, torch.float64: np.float64}
_lock = threading.Lock()


def _f32(x) -> np.float32:
    return np.float32(x)


def _inv_factorial(k: int) -> float:
    from fractions import Fraction
    from math import factorial

    return float(Fraction(1, factorial(k)))


#: float32 constants shared by the C kernel and its NumPy twin (hex literals in C: exact).
_K32 = {
    # Cephes expf: exp(a) = 2^n exp(r), r = a - n ln2 (ln2 in two parts), degree-5 polynomial
    "LOG2E": _f32(1.44269504088896341),
    "EXP_C1": _f32(0.693359375),
    "EXP_C2": _f32(-2.12194440e-4),
    "EXP_P0": _f32(1.9875691500e-4),
    "EXP_P1": _f32(1.3981999507e-3),
    "EXP_P2": _f32(8.3334519073e-3),
    "EXP_P3": _f32(4.1665795894e-2),
    "EXP_P4": _f32(1.6666665459e-1),
    "EXP_P5": _f32(5.0000001201e-1),
    "EXP_LO": _f32(-86.0),
    # the kernel's screening of logit decisions (not part of any result): 2^f ~ 1 + f (Q1 + f (Q2 + f Q3))
    # on [0, 1) with relative error < 8.7e-5, and the slack DELTA in units of 1/256
    "SCR_Q1": _f32(0.69511664),
    "SCR_Q2": _f32(0.22764947),
    "SCR_Q3": _f32(0.07706159),
    "DELTA": _f32(1.0 / 64.0),
    # expm1(t) = t (1 + t/2! + ... + t^(N-1)/N!) and log1p(a) = 2 w (1 + w^2/3 + ... + w^(2M)/(2M+1)),
    # w = a / (2 + a); the degrees (N, M) follow the row's max |t| (see _DEGREES)
    **{f"EM{k}": _f32(_inv_factorial(k)) for k in range(2, 11)},
    **{f"AT{k}": _f32(1.0 / k) for k in range(3, 22, 2)},
    "TM1": _f32(0.03),
    "TM2": _f32(0.1),
    "TM3": _f32(0.25),
}
#: (N, M) for max |t| <= TM1, TM2, TM3, 1: truncation below 1.5e-8 relative (a quarter ulp).
_DEGREES = ((4, 1), (6, 2), (7, 4), (10, 10))
#: float64 constants of the tie's sigmoid: exp(a) = 2^n exp(r), ln2 in two parts (fdlibm), Taylor degree 13.
_K64 = {
    "LOG2E64": 1.4426950408889634,
    "LN2HI64": 6.93147180369123816490e-01,
    "LN2LO64": 1.90821492927058770002e-10,
    **{f"EX{k}": _inv_factorial(k) for k in range(2, 14)},
}
_PHILOX_M0, _PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
_PHILOX_W0, _PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
_TWO52 = float(2**52)


def _c_constants() -> str:
    """The ``#define`` lines of ``bernoulli.c``'s constants section, as they must read."""
    lines = [f"#define {k} ({float(v).hex()}f)" for k, v in _K32.items()]
    lines += [f"#define {k} ({float(v).hex()})" for k, v in _K64.items()]
    lines += [
        f"#define PHILOX_M0 0x{_PHILOX_M0:08X}u",
        f"#define PHILOX_M1 0x{_PHILOX_M1:08X}u",
        f"#define PHILOX_W0 0x{_PHILOX_W0:08X}u",
        f"#define PHILOX_W1 0x{_PHILOX_W1:08X}u",
        f"#define CHUNK {CHUNK}",
    ]
    return "\n".join(lines)


# ============================================================================ logit thresholds


def _smallest_at_least(x, dtype):
    """The smallest float of ``dtype`` that is >= the Decimal ``x``."""
    from decimal import Decimal

    f = dtype(float(x))
    up, down = dtype(np.inf), dtype(-np.inf)
    while Decimal(float(f)) < x:
        f = np.nextafter(f, up)
    while Decimal(float(np.nextafter(f, down))) >= x:
        f = np.nextafter(f, down)
    return f


def _logit_decimal(k: int):
    """``log(k / (256 - k))`` to 60 digits."""
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = 60
        return Decimal(k).ln() - Decimal(256 - k).ln()


def _thresholds(dtype) -> np.ndarray:
    """Logit thresholds of length 257 for ``dtype``: ``T[0] = -inf``, ``T[256] = +inf`` and ``T[k]``
    the smallest float with ``sigmoid(T[k]) >= k/256``, i.e. ``T[k] >= log(k / (256 - k))``.

    float64: from the 60-digit logits.  float32: from the float64 logits, whose error (< 1e-14)
    is far below the float32 spacing, checked against the 60-digit value only when a float32 lies
    within 1e-12 of it (which none does, so the float32 table costs no Decimal arithmetic)."""
    import math

    t = np.empty(257, dtype)
    t[0], t[256] = -np.inf, np.inf
    for k in range(1, 256):
        if k == 128:
            t[k] = 0.0
        elif dtype is np.float64:
            t[k] = _smallest_at_least(_logit_decimal(k), np.float64)
        else:
            ell = math.log(k) - math.log(256 - k)
            c = np.float32(ell)
            if float(c) < ell:
                c = np.nextafter(c, np.float32(np.inf))
            below = np.nextafter(c, np.float32(-np.inf))
            if min(float(c) - ell, ell - float(below)) > 1e-12:
                t[k] = c
            else:  # too close to call in float64
                t[k] = _smallest_at_least(_logit_decimal(k), np.float32)
    return t


_TABLES: dict = {}


def _table(dtype) -> np.ndarray:
    """The logit thresholds for ``dtype`` (``np.float32`` or ``np.float64``), computed once."""
    t = _TABLES.get(dtype)
    if t is None:
        with _lock:
            t = _TABLES.get(dtype)
            if t is None:
                t = _TABLES[dtype] = _thresholds(dtype)
    return t


_TABLE_ADDRESSES: dict = {}


def _table_address(dtype) -> int:
    """The address of :func:`_table` ``(dtype)`` (the arrays live as long as the module)."""
    a = _TABLE_ADDRESSES.get(dtype)
    if a is None:
        a = _TABLE_ADDRESSES[dtype] = _table(dtype).__array_interface__["data"][0]
    return a


_DEVICE_TABLES: dict = {}


def _device_table(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """:func:`_table` as a tensor on ``device`` (cached)."""
    t = _DEVICE_TABLES.get((dtype, device))
    if t is None:
        t = _DEVICE_TABLES[(dtype, device)] = torch.as_tensor(_table(_NUMPY_DTYPES[dtype]), device=device)
    return t
