"""The NumPy twin of the compiled kernel (``bernoulli.c``): the same arithmetic, one IEEE operation
for each of the kernel's, so that it gives bit for bit the same random bytes, draws and log-weight
increments.

It runs wherever the compiled kernel is missing, was built for another CPU, or is switched off
(``LOGZBENCH_NO_COMPILE=1``), and the loader checks the kernel against it before first use.  The
names mirror the kernel's functions: :func:`_philox_np` (``philox1``), :func:`_random_bytes_np`
(``lz_random_bytes``), :func:`_sigmoid32` (``lz_sigmoid_f32``), :func:`_softplus_diff_np`
(``lz_softplus_diff_f32``), :func:`_sigmoid64` (``lz_sigmoid64``) and :func:`_bernoulli_np`
(``lz_bernoulli_f32`` / ``_f64``).
"""

from __future__ import annotations

import numpy as np

from ._constants import _DEGREES, _K32, _K64, _PHILOX_M0, _PHILOX_M1, _PHILOX_W0, _PHILOX_W1, _TWO52, _table


def _philox_np(counters, stream: int, k0: int, k1: int) -> np.ndarray:
    """Philox4x32-10 words of the counters ``(c, stream, 0)``: shape ``(len(counters), 4)`` uint32."""
    c = np.asarray(counters, dtype=np.uint64)
    x0 = (c & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    x1 = (c >> np.uint64(32)).astype(np.uint32)
    x2 = np.full(c.shape, stream, np.uint32)
    x3 = np.zeros(c.shape, np.uint32)
    m0, m1 = np.uint64(_PHILOX_M0), np.uint64(_PHILOX_M1)
    a, b = k0, k1
    for _ in range(10):
        p0 = x0.astype(np.uint64) * m0
        p1 = x2.astype(np.uint64) * m1
        y0 = (p1 >> np.uint64(32)).astype(np.uint32) ^ x1 ^ np.uint32(a)
        y2 = (p0 >> np.uint64(32)).astype(np.uint32) ^ x3 ^ np.uint32(b)
        x1 = p1.astype(np.uint32)
        x3 = p0.astype(np.uint32)
        x0, x2 = y0, y2
        a = (a + _PHILOX_W0) & 0xFFFFFFFF
        b = (b + _PHILOX_W1) & 0xFFFFFFFF
    return np.stack([x0, x1, x2, x3], axis=-1)


def _random_bytes_np(n: int, k0: int, k1: int) -> np.ndarray:
    """The random bytes of units ``0 .. n-1``: unit ``u`` takes byte ``u mod 16`` of the Philox words
    (little-endian) of counter ``(u // 16, 0, 0)``."""
    w = _philox_np(np.arange(-(-n // 16), dtype=np.uint64), 0, k0, k1)  # (n / 16, 4)
    return np.ascontiguousarray(w).astype("<u4").view(np.uint8).reshape(-1)[:n]


def _exp32(a: np.ndarray) -> np.ndarray:
    K = _K32
    n = np.floor(a * K["LOG2E"] + np.float32(0.5))
    r = a - n * K["EXP_C1"]
    r = r - n * K["EXP_C2"]
    p = np.full_like(r, K["EXP_P0"])
    for c in ("EXP_P1", "EXP_P2", "EXP_P3", "EXP_P4", "EXP_P5"):
        p = p * r + K[c]
    rr = r * r
    y = p * rr
    y = y + r
    y = y + np.float32(1.0)
    bits = y.view(np.uint32) + (n.astype(np.int32).view(np.uint32) << np.uint32(23))
    return bits.view(np.float32)


def _sigmoid32(y: np.ndarray) -> np.ndarray:
    """The kernel's float32 sigmoid (``lz_sigmoid_f32``)."""
    with np.errstate(invalid="ignore"):
        e = _exp32(np.fmax(-np.abs(y), _K32["EXP_LO"]))  # fmax(NaN, lo) = lo, as the kernel's select
        num = np.where(y >= 0, np.float32(1.0), e)
        return num / (np.float32(1.0) + e)


def _terms_np(x: np.ndarray, b2: np.float32, nd: np.float32, ne: int, nm: int) -> np.ndarray:
    """NumPy twin of ``lz_term``."""
    K = _K32
    y = x * b2
    t = x * nd
    with np.errstate(invalid="ignore", over="ignore"):
        e = _exp32(np.fmax(-np.abs(y), K["EXP_LO"]))
        num = np.where(y >= 0, np.float32(1.0), e)
        den = np.float32(1.0) + e
        p = np.full_like(t, K[f"EM{ne}"])
        for k in range(ne - 1, 1, -1):
            p = p * t + K[f"EM{k}"]
        p = p * t + np.float32(1.0)
        an = num * (p * t)
        w = an / ((den + den) + an)
        w2 = w * w
        q = np.full_like(w2, K[f"AT{2 * nm + 1}"])
        for j in range(nm - 1, 0, -1):
            q = q * w2 + K[f"AT{2 * j + 1}"]
        q = q * w2 + np.float32(1.0)
        return -((w + w) * q)


def _lane_sum(terms: np.ndarray) -> np.ndarray:
    """Row sums of float64 ``terms`` (rows, n) in the kernel's order: lane ``l`` adds the columns
    ``j = l mod 16`` in order from 0.0 (the row padded with 0.0), then the lanes are added in order."""
    rows, n = terms.shape
    groups = -(-n // 16)
    padded = np.zeros((rows, (groups + 1) * 16), np.float64)  # a leading 0.0, as the lanes start
    padded[:, 16 : 16 + n] = terms
    acc = np.cumsum(padded.reshape(rows, groups + 1, 16), axis=1)[:, -1, :]  # sequential in each lane
    return np.cumsum(acc, axis=1)[:, -1]


def _softplus_diff_np(
    x: np.ndarray, b2, nd, v: np.ndarray | None = None, dv: np.ndarray | None = None, d: float = 0.0
) -> np.ndarray | None:
    """NumPy twin of ``lz_softplus_diff_f32`` (same float32 operations, same summation order)."""
    b2, nd = np.float32(b2), np.float32(nd)
    rows, cols = x.shape
    xm = (x.view(np.uint32) & np.uint32(0x7FFFFFFF)).max(axis=1).view(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        tm = np.abs(xm * nd)
        if not (tm <= np.float32(1.0)).all():
            return None
    bounds = (_K32["TM1"], _K32["TM2"], _K32["TM3"], np.float32(1.0))
    which = np.searchsorted(np.array(bounds, np.float32), tm, side="left")  # first bound >= tm
    terms = np.empty((rows, cols), np.float64)
    for g, (ne, nm) in enumerate(_DEGREES):
        sel = np.flatnonzero(which == g)
        if sel.size:
            terms[sel] = _terms_np(x[sel], b2, nd, ne, nm)
    hid = _lane_sum(terms)
    if v is None:
        return hid
    return float(d) * _lane_sum((v * dv[None, :]).astype(np.float64)) + hid


def _sigmoid64(v: np.ndarray) -> np.ndarray:
    """NumPy twin of ``lz_sigmoid64``."""
    K = _K64
    v = np.asarray(v, np.float64)
    a = -np.abs(v)
    with np.errstate(invalid="ignore", over="ignore"):
        live = a >= -746.0
        al = np.where(live, a, 0.0)
        n = np.floor(al * K["LOG2E64"] + 0.5)
        r = al - n * K["LN2HI64"]
        r = r - n * K["LN2LO64"]
        p = np.full_like(r, K["EX13"])
        for k in range(12, 1, -1):
            p = p * r + K[f"EX{k}"]
        p = p * r + 1.0
        p = p * r + 1.0
        ni = n.astype(np.int64)
        n1 = -((-ni) // 2)
        n2 = ni - n1
        e = p * ((n1 + 1023).astype(np.uint64) << np.uint64(52)).view(np.float64)
        e = e * ((n2 + 1023).astype(np.uint64) << np.uint64(52)).view(np.float64)
        e = np.where(live, e, 0.0)
        return np.where(v >= 0.0, 1.0, e) / (1.0 + e)


def _tie_fraction_np(v: np.ndarray, r: np.ndarray, logits: bool) -> np.ndarray:
    """``f = 256 p - r`` in ``[0, 1]`` of tied units (NaN stays NaN): ``v`` is ``256 p``, or the
    logit (``p = sigmoid(v)``), ``r`` the byte (``floor(256 p)``), both float64."""
    with np.errstate(invalid="ignore"):
        f = np.clip(256.0 * _sigmoid64(v) - r if logits else v - r, 0.0, 1.0)
    f[np.isnan(v)] = np.nan
    return f


def _refine_np(f: np.ndarray, draw) -> np.ndarray:
    """0./1. with ``P(1) = f`` exactly, for ``f`` in ``[0, 1]`` (NaN gives NaN): a uniform real is
    compared with ``f`` 52 bits per round, ``draw(sel, s)`` giving the round-``s`` integers
    (uniform on ``[0, 2^52)``, as float64) of the units ``sel``."""
    m = f.shape[0]
    res = np.zeros(m, np.float64)
    cur = np.nan_to_num(f, nan=0.0)
    pending = np.flatnonzero(cur > 0)
    s = 1
    while pending.size:
        k = draw(pending, s)
        g = cur[pending] * _TWO52
        fl = np.floor(g)
        res[pending[k < fl]] = 1.0
        rest = g - fl
        cur[pending] = rest
        pending = pending[(k == fl) & (rest > 0)]
        s += 1
    res[np.isnan(f)] = np.nan
    return res


def _bernoulli_np(
    x: np.ndarray, scale, logits: bool, key: tuple[int, int], out: np.ndarray, given: np.ndarray | None = None
) -> None:
    """NumPy twin of ``lz_bernoulli_f32`` / ``_f64`` for the flat array ``x`` into ``out`` (may be ``x``)."""
    dt = x.dtype.type
    k0, k1 = key
    r = _random_bytes_np(x.shape[0], k0, k1) if given is None else given
    with np.errstate(invalid="ignore", over="ignore"):
        zb = x * dt(scale)
    if logits:
        table = _table(dt)
        lo, hi = table[r], table[r.astype(np.intp) + 1]
    else:
        lo = r.astype(dt)
        hi = lo + dt(1.0)
    with np.errstate(invalid="ignore"):
        fire = zb >= hi
        tie = ~(fire | (zb < lo))
    idx = np.flatnonzero(tie)
    v = zb[idx].astype(np.float64)
    out[...] = fire
    if idx.size:
        f = _tie_fraction_np(v, r[idx].astype(np.float64), logits)

        def draw(sel, s):
            w = _philox_np(idx[sel].astype(np.uint64), s, k0, k1).astype(np.uint64)
            return ((w[:, 0] | (w[:, 1] << np.uint64(32))) >> np.uint64(12)).astype(np.float64)

        out[idx] = _refine_np(f, draw)
