"""Triton kernels of the exact Bernoulli sampler on the GPU: one launch per draw, no host sync.

These are the GPU twins of the compiled CPU kernel ``bernoulli.c`` (see :mod:`logzbench.kernels`
for the decision rule).  :func:`bernoulli_` draws Bernoulli samples from
probabilities or logits; :func:`hidden_step` does the hidden half of an RBM path's AIS step
(the log-weight increment and the hidden draws) in one pass over the pre-activations.

**Decision rule.**  Unit ``i`` takes a random byte ``r`` and compares ``zb = fl(scale * x)``
(in ``x``'s dtype, ``scale`` rounded to it first) with ``lo = r, hi = r + 1`` (probabilities,
``scale = 256``) or with ``lo = T[r], hi = T[r + 1]`` (logits; ``T`` the threshold table of
``logzbench.kernels._constants._table``): it fires when ``zb >= hi``, stays off when ``zb < lo``, and
otherwise (a tie, probability ``1/256``) fires with probability
``f = clip(256 sigmoid(zb) - r, 0, 1)`` (``zb - r`` for probabilities), computed in float64 and
resolved exactly by 52-bit rounds: with ``k`` uniform on ``[0, 2^52)`` it fires when
``k < floor(2^52 f)``, stays off when ``k > floor(2^52 f)`` and on equality repeats with
``f <- frac(2^52 f)`` (off once ``f = 0``).  NaN gives NaN.  For logits the kernel first screens
each unit with a float32 sigmoid (error below ``4e-4`` in units of ``1/256``, with the GPU's
approximate ``exp`` too) and loads ``T[r]`` and ``T[r + 1]`` only for the units within ``1/64``
of ``r`` or ``r + 1``, so the decisions are the table's while few units gather from it.  Ties
are resolved in the kernel, a round taking the lowest unresolved tie of every group of 16 units
(the refinement loops run while any lane of the block is pending, which is about once per block).

**Random bits.**  Philox4x32-10 (``tl.philox``, the CPU kernel's generator) under the 64-bit key
``key[0]`` (Philox's key words ``k0 = key & 0xFFFFFFFF``, ``k1 = key >> 32``), with the CPU
kernel's layout: unit ``i`` (flat index) takes byte ``i mod 16`` (little-endian across the four
words) of counter ``(i // 16, 0, 0, 0)``, and round ``s >= 1`` of its tie's refinement the words
``w0, w1`` of counter ``(i, 0, s, 0)`` as ``k = (w1 * 2^32 + w0) >> 12``.  So the draws depend
only on the key and the unit's index, not on the block size, and for the same key words
``(k0, k1)`` they are those of the CPU kernel and its NumPy twin (:mod:`._numpy`), bit for
bit, except that the tie fraction's float64 sigmoid (``exp`` from Triton / libdevice here) may
differ from the CPU's in its last bits: a different decision with probability about ``2^-45``
per tied unit.

**Increments** (:func:`hidden_step`): per element, in float64 from ``float64(x)``,
``softplus(bt x) - softplus(bf x) = max(bt x, 0) - max(bf x, 0) + log1p(q)``,
``q = (e1 - e0) / (1 + e0)``, ``e = exp(-|beta x|)`` (the difference of the ``log1p(e)`` parts of
``softplus(y) = max(y, 0) + log1p(exp(-|y|))``, one ``log`` instead of two; absolute error a few
``1e-16`` per element for every ``|d x|``), summed in float64 per row.

**Triton** is imported lazily: this module imports without it, and :func:`available` says
whether the kernels can run for a device.  The kernels are built on first use.  Triton's
interpreter (CPU tensors; the tests' mode without a GPU) needs ``TRITON_INTERPRET=1`` in the
environment both when triton is first imported (its library's own jitted functions are made
then) and when the kernels are built.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import torch

__all__ = ["available", "bernoulli_", "hidden_step"]

#: Units per program of :func:`bernoulli_` and its warps, by dtype: 16 units per thread (the
#: fastest of the sizes tried on an H100; docs/benchmarks.md).
BLOCKS = {torch.float32: (512, 1), torch.float64: (1024, 4)}
#: Largest number of columns one program of :func:`hidden_step` holds at once (a power of two), and
#: its warps (the float64 increments want more threads).
ROW_BLOCK, ROW_WARPS = 512, 4
#: Largest flat index the kernels address with 32-bit offsets (with room for a block past the end).
MAX_NUMEL = 2**31 - 2**16

tl = None  # triton.language, bound by _build()
_lock = threading.Lock()
_state: dict = {"triton": None, "imported": False, "kernels": None}


def _triton():
    """The triton module, or None when it does not import (cached)."""
    if not _state["imported"]:
        with _lock:
            if not _state["imported"]:
                try:
                    import triton
                    import triton.language
                except Exception:  # ImportError, or a broken installation
                    triton = None
                _state["triton"] = triton
                _state["imported"] = True
    return _state["triton"]


def _interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def available(device) -> bool:
    """Whether the Triton kernels can run for ``device``.

    Parameters
    ----------
    device : torch.device or str

    Returns
    -------
    bool
        True when triton imports and ``device`` is CUDA, or ``device`` is the CPU and
        ``TRITON_INTERPRET=1`` is set (and was when triton was imported): Triton's interpreter,
        slow, for tests.
    """
    dev = device if isinstance(device, torch.device) else torch.device(device)
    if dev.type == "cuda":
        return _triton() is not None
    if dev.type == "cpu" and _interpret():
        triton = _triton()
        # triton imported without TRITON_INTERPRET=1 made its library functions for a GPU
        return triton is not None and type(triton.language.sum).__name__ == "InterpretedFunction"
    return False


# ============================================================================ device code
# Plain functions here, wrapped by triton.jit in _build() (the module must import without
# triton); their annotations stay strings (from __future__ import annotations), which Triton
# reads.  Every shape below is (G, 16): G groups of 16 consecutive units, group g holding units
# 16 g .. 16 g + 15, so that one Philox counter gives the bytes of a whole group.


def _unit_bytes(key, g, j):
    """Random bytes (int32 in 0..255), shape (G, 16), of the units 16 g + j."""
    gu = g.to(tl.uint32)
    z = gu * 0
    w0, w1, w2, w3 = tl.philox(key, gu, z, z, z)
    jw = (j // 4)[None, :]
    w = tl.where(jw == 0, w0[:, None], tl.where(jw == 1, w1[:, None], tl.where(jw == 2, w2[:, None], w3[:, None])))
    sh = ((j % 4) * 8).to(tl.uint32)
    return ((w >> sh[None, :]) & 0xFF).to(tl.int32)


def _sigmoid64(v):
    """float64 sigmoid without overflow."""
    e = tl.exp(-tl.abs(v))
    return tl.where(v >= 0.0, 1.0, e) / (1.0 + e)


def _softplus_diff64(xd, bt, bf):
    """softplus(bt xd) - softplus(bf xd) in float64, as max(bt xd, 0) - max(bf xd, 0) + log1p(q) with
    q = (e1 - e0) / (1 + e0), e = exp(-|beta xd|) (the difference of the log1p(e) terms of
    softplus(y) = max(y, 0) + log1p(exp(-|y|)), one log instead of two), log1p(q) by the
    log(1 + q) q / ((1 + q) - 1) trick."""
    y1 = xd * bt
    y0 = xd * bf
    e1 = tl.exp(-tl.abs(y1))
    e0 = tl.exp(-tl.abs(y0))
    q = (e1 - e0) / (1.0 + e0)
    u = 1.0 + q
    one = u == 1.0
    lp = tl.where(one, q, tl.log(u) * (q / tl.where(one, 1.0, u - 1.0)))
    lin = tl.maximum(y1, 0.0, propagate_nan=tl.PropagateNan.ALL) - tl.maximum(
        y0, 0.0, propagate_nan=tl.PropagateNan.ALL
    )
    return lin + lp


def _refine(f, idx, key, active):
    """Exact Bernoulli(f) for f in [0, 1], shape (G,): unit idx (uint32) compares a uniform real with
    f 52 bits per round, round s from Philox counter (idx, 0, s, 0); inactive lanes give False."""
    cur = tl.where(active, f, 0.0)
    pending = cur > 0.0
    fire = cur < 0.0
    z = idx * 0
    s = z + 1
    while tl.max(pending.to(tl.int32), axis=0) != 0:
        w0, w1, w2, w3 = tl.philox(key, idx, z, s, z)
        k = (((w1.to(tl.uint64) << 32) | w0.to(tl.uint64)) >> 12).to(tl.int64)
        gg = cur * 4503599627370496.0  # 2^52: exact
        fl = tl.floor(gg)
        fli = fl.to(tl.int64)
        fire = fire | (pending & (k < fli))
        rest = gg - fl
        pending = pending & (k == fli) & (rest > 0.0)
        cur = rest
        s = s + 1
    return fire


def _resolve_ties(res, tied, zb, r, g, j, key, LOGITS: tl.constexpr):
    """Sets the tied (non-NaN) units of res, shape (G, 16), to their exact draws.  Ties are rare (1/256),
    so each round takes the lowest pending tie of every group and refines those G at once."""
    bit = (j * 0 + 1) << j
    bits = tl.sum(tl.where(tied, bit[None, :], 0), axis=1)
    while tl.max(bits, axis=0) != 0:
        low = bits & (-bits)
        sel = bit[None, :] == low[:, None]
        v = tl.sum(tl.where(sel, zb, 0.0), axis=1).to(tl.float64)  # one nonzero term: exact
        rj = tl.sum(tl.where(sel, r * 16 + j[None, :], 0), axis=1)
        rr = (rj >> 4).to(tl.float64)
        jj = rj & 15
        if LOGITS:
            f = 256.0 * _sigmoid64(v) - rr
        else:
            f = v - rr
        f = tl.minimum(tl.maximum(f, 0.0), 1.0)
        fire = _refine(f, (g * 16 + jj).to(tl.uint32), key, low != 0)
        res = tl.where(sel & fire[:, None], 1.0, res)
        bits = bits ^ low
    return res


def _draw(zb, r, g, j, mask, key, table_ptr, LOGITS: tl.constexpr):
    """0./1. (NaN for NaN) draws of the scaled inputs zb, shape (G, 16), in zb's dtype."""
    if LOGITS:
        zs = zb.to(tl.float32)
        e = tl.exp(-tl.abs(zs))
        p = tl.where(zs >= 0.0, 1.0, e) / (1.0 + e) * 256.0
        rf = r.to(tl.float32)
        sure_fire = p >= rf + 1.015625
        sure_off = p < rf - 0.015625
        near = mask & ~(sure_fire | sure_off)
        lo = tl.load(table_ptr + r, mask=near, other=0.0)
        hi = tl.load(table_ptr + (r + 1), mask=near, other=0.0)
        up = near & (zb >= hi)
        fire = sure_fire | up
        tie = near & ~up & ~(zb < lo)
    else:
        lo = r.to(zb.dtype)
        fire = zb >= lo + 1.0
        tie = mask & ~fire & ~(zb < lo)
    nan = zb != zb
    res = tl.where(nan, zb, fire.to(zb.dtype))
    return _resolve_ties(res, tie & ~nan, zb, r, g, j, key, LOGITS)


def _bernoulli_kernel(
    x_ptr,
    out_ptr,
    key_ptr,
    table_ptr,
    n,
    scale32: tl.float32,
    scale64: tl.float64,
    LOGITS: tl.constexpr,
    IS64: tl.constexpr,
    GROUPS: tl.constexpr,
):
    pid = tl.program_id(0)
    g = pid * GROUPS + tl.arange(0, GROUPS)
    j = tl.arange(0, 16)
    offs = g[:, None] * 16 + j[None, :]
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    key = tl.load(key_ptr)
    if IS64:
        zb = x * scale64
    else:
        zb = x * scale32
    r = _unit_bytes(key, g, j)
    res = _draw(zb, r, g, j, mask, key, table_ptr, LOGITS)
    tl.store(out_ptr + offs, res, mask=mask)


def _row_step(
    x_ptr,
    h_ptr,
    v_ptr,
    dv_ptr,
    table_ptr,
    key,
    row,
    cols,
    nv,
    bt32,
    bt64,
    bf64,
    d64,
    LINEAR: tl.constexpr,
    GROUPS: tl.constexpr,
    VBLOCK: tl.constexpr,
):
    """Row ``row`` of an AIS step: draw its hidden units at ``bt`` (from ``x``, into ``h``) and return its
    log-weight increment from ``bf`` to ``bt`` (softplus differences, plus ``d64 v.dv`` when LINEAR).
    The body of :func:`_hidden_kernel` and of the CUDA-graph AIS's hidden kernel."""
    start = row * cols
    end = start + cols
    j = tl.arange(0, 16)
    acc = tl.zeros([GROUPS, 16], tl.float64)
    # the aligned groups that overlap the row's units start .. end - 1
    for g0 in range(start // 16, (end + 15) // 16, GROUPS):
        g = g0 + tl.arange(0, GROUPS)
        offs = g[:, None] * 16 + j[None, :]
        mask = (offs >= start) & (offs < end)
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        xd = x.to(tl.float64)
        acc += tl.where(mask, _softplus_diff64(xd, bt64, bf64), 0.0)
        r = _unit_bytes(key, g, j)
        res = _draw(x * bt32, r, g, j, mask, key, table_ptr, True)
        tl.store(h_ptr + offs, res, mask=mask)
    inc = tl.sum(tl.sum(acc, axis=1), axis=0)
    if LINEAR:
        lacc = tl.zeros([VBLOCK], tl.float64)
        for c0 in range(0, nv, VBLOCK):
            c = c0 + tl.arange(0, VBLOCK)
            m = c < nv
            vv = tl.load(v_ptr + row * nv + c, mask=m, other=0.0).to(tl.float64)
            dd = tl.load(dv_ptr + c, mask=m, other=0.0).to(tl.float64)
            lacc += vv * dd
        inc = inc + d64 * tl.sum(lacc, axis=0)
    return inc


def _hidden_kernel(
    x_ptr,
    h_ptr,
    inc_ptr,
    v_ptr,
    dv_ptr,
    key_ptr,
    table_ptr,
    cols,
    nv,
    bt32: tl.float32,
    bt64: tl.float64,
    bf64: tl.float64,
    d64: tl.float64,
    LINEAR: tl.constexpr,
    GROUPS: tl.constexpr,
    VBLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    key = tl.load(key_ptr)
    inc = _row_step(
        x_ptr, h_ptr, v_ptr, dv_ptr, table_ptr, key, row, cols, nv, bt32, bt64, bf64, d64, LINEAR, GROUPS, VBLOCK
    )
    tl.store(inc_ptr + row, inc)


_HELPERS = ("_unit_bytes", "_sigmoid64", "_softplus_diff64", "_refine", "_resolve_ties", "_draw", "_row_step")


def _build() -> dict:
    """The jitted kernels (built once per process, in the interpreter if TRITON_INTERPRET=1 then)."""
    k = _state["kernels"]
    if k is None:
        triton = _triton()
        if triton is None:
            raise RuntimeError("triton is not installed")
        with _lock:
            k = _state["kernels"]
            if k is None:
                g = globals()
                g["tl"] = triton.language
                for name in _HELPERS:  # the kernels call the helpers through these globals
                    g[name] = triton.jit(g[name])
                k = {
                    "bernoulli": triton.jit(_bernoulli_kernel),
                    "hidden": triton.jit(_hidden_kernel),
                    "interpret": _interpret(),
                }
                _state["kernels"] = k
    return k


_ROUNDED: dict = {}


def _round32(a) -> float:
    """``a`` rounded to float32 (to nearest, overflowing to +-inf), as a Python float (cached)."""
    r = _ROUNDED.get(a)
    if r is None:
        with np.errstate(over="ignore"):
            r = float(np.float32(a))
        if len(_ROUNDED) > 4096:
            _ROUNDED.clear()
        _ROUNDED[a] = r
    return r


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def _warps(block: int) -> int:
    return max(1, min(4, block // 128))


def bernoulli_(
    x: torch.Tensor, scale: float, logits: bool, key: torch.Tensor, table, out: torch.Tensor, _block: int | None = None
) -> torch.Tensor:
    """Exact Bernoulli draws of ``fl(scale * x)`` (probabilities times 256, or logits) into ``out``.

    One kernel launch, no host synchronisation.

    Parameters
    ----------
    x : torch.Tensor, any shape (n elements in all, n < 2^31 - 2^16)
        Contiguous float32 or float64: probabilities (``logits=False``, with ``scale=256``) or logits.
    scale : float
        Multiplies ``x`` (rounded to ``x``'s dtype first, the product rounded to it too).
    logits : bool
        Whether ``x`` holds logits (``P(1) = sigmoid(fl(scale x))``) or probabilities
        (``P(1) = fl(scale x) / 256``: values below 0 never fire, above 256 always).
    key : torch.Tensor, shape (1,), int64, on ``x``'s device
        The 64-bit Philox key, read by the kernel (e.g. ``torch.randint(0, 2**62, (1,),
        generator=g, device=dev, dtype=torch.int64)``: no host sync); its low and high 32-bit
        words are the CPU kernel's key words ``(k0, k1)``.
    table : torch.Tensor, shape (257,), ``x``'s dtype, on ``x``'s device
        The logit thresholds ``logzbench.kernels._constants._table`` of ``x``'s dtype; ignored (may be None)
        when ``logits`` is False.
    out : torch.Tensor, ``x``'s shape and dtype, contiguous
        Receives 0./1. (NaN where ``fl(scale x)`` is NaN); may be ``x`` itself.
    _block : int, optional
        Units per program (a power of two >= 16; tests).

    Returns
    -------
    torch.Tensor
        ``out``.
    """
    n = x.numel()
    if x.dtype not in (torch.float32, torch.float64) or out.dtype != x.dtype or out.shape != x.shape:
        raise ValueError(
            f"expected float32/float64 x and out of one dtype and shape, got {x.dtype} "
            f"{tuple(x.shape)} and {out.dtype} {tuple(out.shape)}"
        )
    if not (x.is_contiguous() and out.is_contiguous()):
        raise ValueError("x and out must be contiguous")
    if n > MAX_NUMEL:
        raise ValueError(f"{n} elements: the Triton kernels address at most {MAX_NUMEL}")
    if n == 0:
        return out
    kern = _build()["bernoulli"]
    is64 = x.dtype == torch.float64
    s64 = float(scale) if is64 else _round32(scale)
    block, warps = BLOCKS[x.dtype]
    if _block:
        block, warps = _block, _warps(_block)
    if logits:
        if table is None or table.dtype != x.dtype or table.numel() != 257:
            raise ValueError("logits need the 257 thresholds of x's dtype")
    else:
        table = x
    kern[(-(-n // block),)](
        x, out, key, table, n, s64, s64, LOGITS=bool(logits), IS64=is64, GROUPS=block // 16, num_warps=warps
    )
    return out


def hidden_step(
    x: torch.Tensor,
    beta_from: float,
    beta_to: float,
    v: torch.Tensor | None,
    dv: torch.Tensor | None,
    key: torch.Tensor,
    table: torch.Tensor,
    _block: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The hidden half of an RBM path's AIS step in one launch: increments and hidden draws.

    Parameters
    ----------
    x : torch.Tensor, shape (rows, cols), float32, contiguous
        Hidden pre-activations (rows * cols < 2^31 - 2^16).
    beta_from, beta_to : float
    v : torch.Tensor, shape (rows, nv), float32, contiguous, or None
    dv : torch.Tensor, shape (nv,), float32, contiguous, or None
        With ``v``: the linear term's coefficients.
    key : torch.Tensor, shape (1,), int64, on ``x``'s device
        The Philox key of the draws (as :func:`bernoulli_`).
    table : torch.Tensor, shape (257,), float32, on ``x``'s device
        The float32 logit thresholds.
    _block : int, optional
        Columns per step of a row's loop (a power of two >= 16; tests).

    Returns
    -------
    inc : torch.Tensor, shape (rows,), float64
        ``sum_j softplus(beta_to x_ij) - softplus(beta_from x_ij)`` (each term in float64 from
        ``float64(x_ij)`` and the float64 betas, see the module docstring; any ``|d x|``) plus
        ``(beta_to - beta_from) sum_i v_ri dv_i`` when ``v`` and ``dv`` are given, all in float64.
    h : torch.Tensor, shape (rows, cols), float32
        Bernoulli(``sigmoid(fl32(beta_to x))``) draws: exactly :func:`bernoulli_` ``(x, beta_to,
        True, key, table, out)``.
    """
    if x.dim() != 2 or x.dtype != torch.float32 or not x.is_contiguous():
        raise ValueError(f"expected a contiguous 2-D float32 tensor, got {x.dtype} {tuple(x.shape)}")
    rows, cols = x.shape
    linear = v is not None and dv is not None
    nv = 0
    if linear:
        if (
            v.dim() != 2
            or v.shape[0] != rows
            or dv.shape != (v.shape[1],)
            or v.dtype != torch.float32
            or dv.dtype != torch.float32
            or not (v.is_contiguous() and dv.is_contiguous())
        ):
            raise ValueError(f"v {tuple(v.shape)} and dv {tuple(dv.shape)} do not match x {tuple(x.shape)}")
        nv = v.shape[1]
    if rows * max(cols, nv) > MAX_NUMEL:
        raise ValueError(f"{rows} x {max(cols, nv)} elements: the Triton kernels address at most {MAX_NUMEL}")
    if table is None or table.dtype != torch.float32 or table.numel() != 257:
        raise ValueError("expected the 257 float32 logit thresholds")
    inc = torch.empty(rows, dtype=torch.float64, device=x.device)
    h = torch.empty((rows, cols), dtype=torch.float32, device=x.device)
    if rows == 0:
        return inc, h
    kern = _build()["hidden"]
    bt, bf = float(beta_to), float(beta_from)
    bt32 = _round32(bt)
    block = _block or min(ROW_BLOCK, max(16, _next_pow2(cols)))
    vblock = min(1024, max(16, _next_pow2(nv)))
    kern[(rows,)](
        x,
        h,
        inc,
        v if linear else x,
        dv if linear else x,
        key,
        table,
        cols,
        nv,
        bt32,
        bt,
        bf,
        bt - bf,
        LINEAR=linear,
        GROUPS=block // 16,
        VBLOCK=vblock,
        num_warps=min(ROW_WARPS, _warps(block)),
    )
    return inc, h
