"""Exact Bernoulli draws and the fused element-wise work of the samplers' hot loops.

**Exact Bernoulli.**  :func:`bernoulli` fires with probability exactly ``p`` for every ``p`` of
the input's dtype: ``0`` never fires, ``1`` always does, and ``p = 1e-30`` fires with
probability ``1e-30`` (a float32 uniform compared with ``p`` rounds every ``p`` up to a
multiple of ``2^-24``).  Each unit gets one random byte ``r`` (uniform on ``0..255``) and
``c = floor(256 p)``: it fires when ``r < c`` and stays off when ``r > c``.  Only on a tie
``r = c`` (probability ``1/256``) is the fraction ``f = 256 p - c`` resolved, by comparing a
uniform real ``U`` with ``f`` 52 bits at a time: with ``k`` uniform on ``0 .. 2^52 - 1`` it
fires when ``k < floor(2^52 f)``, stays off when ``k > floor(2^52 f)``, and on equality
repeats with ``f <- frac(2^52 f)`` (off once ``f = 0``).  So ``P(1) = c/256 + f/256 = p``
exactly: ``256 p`` and every refinement step are exact in floating point.

From logits (:func:`bernoulli_from_logits`), ``c = floor(256 sigmoid(z))`` is found without
rounding by comparing ``z`` with ``T_k``, the smallest float of ``z``'s dtype with
``sigmoid(T_k) >= k/256`` (computed once per process, checked against 60-digit logits), and the
tie fraction is ``256 sigmoid(z) - c`` in float64, so ``P(1) = sigmoid(z)`` to float64
precision for every ``z``; no sigmoid is stored.  NaN inputs give NaN samples.  (The compiled
kernel first screens each unit with a float32 sigmoid and consults the table only when
``256 sigmoid(z)`` is within ``1/64`` of ``r`` or ``r + 1``; the screen's error is below
``0.006``, so the decisions are the table's.)

**Random bits.**  Philox4x32-10 (Salmon et al. 2011, "Parallel random numbers: as easy as
1, 2, 3"), a counter-based generator: unit ``i`` of a draw takes byte ``i mod 16`` of the words of
counter ``(i // 16, 0)``, and round ``s`` of its tie's refinement the words of counter
``(i, s)``, under a 64-bit key that each draw takes from the run's :class:`torch.Generator`.  So
the same seed gives the same samples at every thread count and in every blocking of the work.

**Compiled kernel.**  On CPU, a draw is one pass of a small C kernel (:data:`C_SOURCE`: Philox
bytes, decisions and ties; AVX2 where the CPU has it), and so is the hidden half of an RBM path's
AIS step (:func:`reweight_and_draw`: the log-weight increment of :func:`softplus_diff_rows` and
the hidden draws from the same pre-activations), threaded with OpenMP (the runtime torch already
loaded, when torch uses GNU OpenMP).  It is compiled once per machine and source version with the
system C compiler (``$CC``, else ``cc``) into ``$LOGZBENCH_KERNEL_DIR`` (default
``~/.cache/logzbench/kernels``; a directory only this user controls, else the next candidate or
NumPy: :func:`_cache_dir`), under a file lock so that concurrent processes compile it once;
later processes only load the cached library (a few milliseconds), and a failed compilation is
remembered (delete the directory to retry).  Without a compiler, or with
``LOGZBENCH_NO_COMPILE=1``, a NumPy implementation of the same arithmetic (every float operation
is one IEEE operation in both) gives bit-for-bit the same samples and increments, only slower.
:func:`kernel_status` says which is in use.

**CUDA** uses the same decision rule in one Triton kernel per draw
(:mod:`logzbench.triton_kernels`: Philox bytes under a key the run's device generator draws on
the device, ties refined inside the kernel), and one kernel for the hidden half of an AIS step:
no host synchronisation, so the GPU is never left waiting for Python.  The log-weight increment
there is a float64 softplus difference per unit.  Without Triton (or with
``LOGZBENCH_NO_TRITON=1``), and on other devices, torch operations implement the same rule.

:func:`uniform` (``U[0, 1)`` draws for other samplers) fills large draws in ``N_STREAMS`` fixed
blocks, each from its own NumPy ``PCG64`` generator seeded once from the run's generator, in
parallel threads; the layout does not depend on the number of threads.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .trusted import private_dir, untrusted_file

__all__ = ["CHUNK", "C_SOURCE", "N_STREAMS", "bernoulli", "bernoulli_from_logits", "bernoulli_from_logits_",
           "kernel_status", "reweight_and_draw", "softplus_diff_rows", "uniform"]

#: Blocks (and sub-generators) per large :func:`uniform` draw; fixed so results do not depend on threads.
N_STREAMS = 4
#: :func:`uniform` draws smaller than this use the run's generator directly.
MIN_PARALLEL = 1 << 15
#: Units per block of the kernel's parallel loop over a draw (a multiple of 16).
CHUNK = 4096
#: Environment variable: ``1`` forces the NumPy implementation (no compilation).
ENV_NO_COMPILE = "LOGZBENCH_NO_COMPILE"
#: Environment variable: directory of the compiled kernel (default ``~/.cache/logzbench/kernels``).
ENV_KERNEL_DIR = "LOGZBENCH_KERNEL_DIR"
#: Seconds the one-time compilation may take before the NumPy implementation is used instead.
COMPILE_TIMEOUT = 120.0
#: Environment variable: ``1`` keeps CUDA draws on torch operations instead of the Triton kernels.
ENV_NO_TRITON = "LOGZBENCH_NO_TRITON"

_streams: "weakref.WeakKeyDictionary[torch.Generator, list[np.random.Generator]]" = weakref.WeakKeyDictionary()
_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()
_NUMPY_DTYPES = {torch.float32: np.float32, torch.float64: np.float64}
#: softplus(y) = y in float64 beyond this (exp(-40) is below half an ulp of 40).
_SOFTPLUS64_LINEAR = 40.0


# ============================================================================ uniform draws

def _sub_generators(generator: torch.Generator) -> list[np.random.Generator]:
    subs = _streams.get(generator)
    if subs is None:
        seeds = torch.randint(0, 2**62, (N_STREAMS,), generator=generator, device=generator.device).tolist()
        subs = [np.random.Generator(np.random.PCG64(int(s))) for s in seeds]
        _streams[generator] = subs
    return subs


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=N_STREAMS - 1, thread_name_prefix="logzbench-rng")
        return _pool


def uniform(shape, generator: torch.Generator, device: torch.device, dtype=torch.float32) -> torch.Tensor:
    """``U[0, 1)`` draws of ``shape`` from ``generator`` (see the module docstring)."""
    out = torch.empty(shape, device=device, dtype=dtype)
    n = out.numel()
    if out.device.type != "cpu" or n < MIN_PARALLEL or dtype not in _NUMPY_DTYPES:
        return out.uniform_(generator=generator)
    subs = _sub_generators(generator)
    flat = out.view(-1).numpy()
    step = -(-n // N_STREAMS)
    np_dtype = _NUMPY_DTYPES[dtype]
    blocks = [flat[i * step:(i + 1) * step] for i in range(N_STREAMS)]
    if torch.get_num_threads() < 2:
        for blk, rng in zip(blocks, subs):
            rng.random(out=blk, dtype=np_dtype)
        return out
    futures = [_executor().submit(rng.random, out=blk, dtype=np_dtype) for blk, rng in zip(blocks[1:], subs[1:])]
    subs[0].random(out=blocks[0], dtype=np_dtype)
    for f in futures:
        f.result()
    return out


# ============================================================================ constants

def _f32(x) -> np.float32:
    return np.float32(x)


def _inv_factorial(k: int) -> float:
    from fractions import Fraction
    from math import factorial
    return float(Fraction(1, factorial(k)))


#: float32 constants shared by the C kernel and its NumPy twin (hex literals in C: exact).
_K32 = {
    # Cephes expf: exp(a) = 2^n exp(r), r = a - n ln2 (ln2 in two parts), degree-5 polynomial
    "LOG2E": _f32(1.44269504088896341), "EXP_C1": _f32(0.693359375), "EXP_C2": _f32(-2.12194440e-4),
    "EXP_P0": _f32(1.9875691500e-4), "EXP_P1": _f32(1.3981999507e-3), "EXP_P2": _f32(8.3334519073e-3),
    "EXP_P3": _f32(4.1665795894e-2), "EXP_P4": _f32(1.6666665459e-1), "EXP_P5": _f32(5.0000001201e-1),
    "EXP_LO": _f32(-86.0),
    # the kernel's screening of logit decisions (not part of any result): 2^f ~ 1 + f (Q1 + f (Q2 + f Q3))
    # on [0, 1) with relative error < 8.7e-5, and the slack DELTA in units of 1/256
    "SCR_Q1": _f32(0.69511664), "SCR_Q2": _f32(0.22764947), "SCR_Q3": _f32(0.07706159), "DELTA": _f32(1.0 / 64.0),
    # expm1(t) = t (1 + t/2! + ... + t^(N-1)/N!) and log1p(a) = 2 w (1 + w^2/3 + ... + w^(2M)/(2M+1)),
    # w = a / (2 + a); the degrees (N, M) follow the row's max |t| (see _DEGREES)
    **{f"EM{k}": _f32(_inv_factorial(k)) for k in range(2, 11)},
    **{f"AT{k}": _f32(1.0 / k) for k in range(3, 22, 2)},
    "TM1": _f32(0.03), "TM2": _f32(0.1), "TM3": _f32(0.25),
}
#: (N, M) for max |t| <= TM1, TM2, TM3, 1: truncation below 1.5e-8 relative (a quarter ulp).
_DEGREES = ((4, 1), (6, 2), (7, 4), (10, 10))
#: float64 constants of the tie's sigmoid: exp(a) = 2^n exp(r), ln2 in two parts (fdlibm), Taylor degree 13.
_K64 = {
    "LOG2E64": 1.4426950408889634, "LN2HI64": 6.93147180369123816490e-01, "LN2LO64": 1.90821492927058770002e-10,
    **{f"EX{k}": _inv_factorial(k) for k in range(2, 14)},
}
_PHILOX_M0, _PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
_PHILOX_W0, _PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
_TWO52 = float(2**52)


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
    within 1e-12 of it (which none does: about a millisecond instead of 30 per process)."""
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


# ============================================================================ the C kernel

def _c_constants() -> str:
    lines = [f"#define {k} ({float(v).hex()}f)" for k, v in _K32.items()]
    lines += [f"#define {k} ({float(v).hex()})" for k, v in _K64.items()]
    lines += [f"#define PHILOX_M0 0x{_PHILOX_M0:08X}u", f"#define PHILOX_M1 0x{_PHILOX_M1:08X}u",
              f"#define PHILOX_W0 0x{_PHILOX_W0:08X}u", f"#define PHILOX_W1 0x{_PHILOX_W1:08X}u",
              f"#define CHUNK {CHUNK}"]
    return "\n".join(lines)


_C_BODY = r"""
#include <stdint.h>
#include <string.h>
#include <math.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* Every floating-point operation below is one IEEE operation (no fast-math, no contraction into
   fused multiply-adds), so the NumPy twin in logzbench/sampling.py reproduces each result bit for
   bit, and the AVX2 and portable paths agree exactly. */

static inline uint32_t f2u(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline float u2f(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
static inline double u2d(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }

/* ------------------------------------------------------------------ Philox4x32-10 */

static inline void philox1(uint64_t c, uint32_t stream, uint32_t k0, uint32_t k1, uint32_t w[4]) {
    uint32_t x0 = (uint32_t)c, x1 = (uint32_t)(c >> 32), x2 = stream, x3 = 0, a = k0, b = k1;
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * x0, p1 = (uint64_t)PHILOX_M1 * x2;
        uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1 ^ a, y2 = (uint32_t)(p0 >> 32) ^ x3 ^ b;
        x1 = (uint32_t)p1;
        x3 = (uint32_t)p0;
        x0 = y0;
        x2 = y2;
        a += PHILOX_W0;
        b += PHILOX_W1;
    }
    w[0] = x0; w[1] = x1; w[2] = x2; w[3] = x3;
}

/* the random bytes of the counters first .. first + n - 1 (stream 0): the 16 bytes of counter c
   (its words 0..3, little-endian) are those of units 16 c .. 16 c + 15 */
static void philox_bytes(uint64_t first, int64_t n, uint32_t k0, uint32_t k1, uint8_t* out) {
    int64_t i = 0;
#if defined(__AVX2__)
    const __m256i M0 = _mm256_set1_epi32((int)PHILOX_M0), M1 = _mm256_set1_epi32((int)PHILOX_M1);
    for (; i + 8 <= n; i += 8) {
        uint32_t lo[8], hi[8];
        for (int l = 0; l < 8; l++) {
            uint64_t c = first + (uint64_t)(i + l);
            lo[l] = (uint32_t)c;
            hi[l] = (uint32_t)(c >> 32);
        }
        __m256i X0 = _mm256_loadu_si256((const __m256i*)lo), X1 = _mm256_loadu_si256((const __m256i*)hi);
        __m256i X2 = _mm256_setzero_si256(), X3 = _mm256_setzero_si256();
        uint32_t a = k0, b = k1;
        for (int r = 0; r < 10; r++) {
            __m256i pe0 = _mm256_mul_epu32(X0, M0), po0 = _mm256_mul_epu32(_mm256_srli_epi64(X0, 32), M0);
            __m256i pe1 = _mm256_mul_epu32(X2, M1), po1 = _mm256_mul_epu32(_mm256_srli_epi64(X2, 32), M1);
            __m256i lo0 = _mm256_blend_epi32(pe0, _mm256_slli_epi64(po0, 32), 0xAA);
            __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(pe0, 32), po0, 0xAA);
            __m256i lo1 = _mm256_blend_epi32(pe1, _mm256_slli_epi64(po1, 32), 0xAA);
            __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(pe1, 32), po1, 0xAA);
            X0 = _mm256_xor_si256(_mm256_xor_si256(hi1, X1), _mm256_set1_epi32((int)a));
            X2 = _mm256_xor_si256(_mm256_xor_si256(hi0, X3), _mm256_set1_epi32((int)b));
            X1 = lo1;
            X3 = lo0;
            a += PHILOX_W0;
            b += PHILOX_W1;
        }
        /* transpose: counter l's words X0[l], X1[l], X2[l], X3[l] go to out + 16 (i + l) */
        __m256i t0 = _mm256_unpacklo_epi32(X0, X1), t1 = _mm256_unpackhi_epi32(X0, X1);
        __m256i t2 = _mm256_unpacklo_epi32(X2, X3), t3 = _mm256_unpackhi_epi32(X2, X3);
        __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
        __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
        __m256i* o = (__m256i*)(out + 16 * i);
        _mm256_storeu_si256(o, _mm256_permute2x128_si256(u0, u1, 0x20));
        _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(u2, u3, 0x20));
        _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(u0, u1, 0x31));
        _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(u2, u3, 0x31));
    }
#endif
    for (; i < n; i++) {
        uint32_t w[4];
        philox1(first + (uint64_t)i, 0u, k0, k1, w);
        for (int j = 0; j < 4; j++)
            for (int b = 0; b < 4; b++) out[16 * i + 4 * j + b] = (uint8_t)(w[j] >> (8 * b));
    }
}

/* the random bytes of units u0 .. u0 + m - 1 into out (scratch: 16 (m / 16 + 2) bytes) */
static void unit_bytes(uint64_t u0, int64_t m, uint32_t k0, uint32_t k1, uint8_t* scratch, const uint8_t** r) {
    uint64_t c0 = u0 / 16, c1 = (u0 + (uint64_t)m + 15) / 16;
    philox_bytes(c0, (int64_t)(c1 - c0), k0, k1, scratch);
    *r = scratch + (u0 - 16 * c0);
}

/* Philox words of n counters (first + i, stream, 0), stored as out[4 i + j] (tests) */
void lz_philox(uint64_t first, int64_t n, uint32_t stream, uint32_t k0, uint32_t k1, uint32_t* out) {
    for (int64_t i = 0; i < n; i++) philox1(first + (uint64_t)i, stream, k0, k1, out + 4 * i);
}

/* the random bytes of units 0 .. n-1 (tests) */
void lz_random_bytes(int64_t n, uint32_t k0, uint32_t k1, uint8_t* out) {
    uint8_t scratch[CHUNK + 32];
    for (int64_t s = 0; s < n; s += CHUNK) {
        int64_t m = n - s < CHUNK ? n - s : CHUNK;
        const uint8_t* r;
        unit_bytes((uint64_t)s, m, k0, k1, scratch, &r);
        memcpy(out + s, r, (size_t)m);
    }
}

/* ------------------------------------------------------------------ float32 element-wise functions */

/* exp(a) for a in [-86, 1] (Cephes expf, about 1 ulp) */
static inline float lz_exp(float a) {
    float n = floorf(a * LOG2E + 0.5f);
    float r = a - n * EXP_C1;
    r = r - n * EXP_C2;
    float p = EXP_P0;
    p = p * r + EXP_P1;
    p = p * r + EXP_P2;
    p = p * r + EXP_P3;
    p = p * r + EXP_P4;
    p = p * r + EXP_P5;
    float rr = r * r;
    float y = p * rr;
    y = y + r;
    y = y + 1.0f;
    return u2f(f2u(y) + ((uint32_t)(int32_t)n << 23));
}

/* sigmoid(y), a few ulp (saturating below exp(-86)) (tests) */
void lz_sigmoid_f32(const float* x, float* out, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float y = x[i], a = -fabsf(y);
        a = a >= EXP_LO ? a : EXP_LO;
        float e = lz_exp(a);
        out[i] = (y >= 0.0f ? 1.0f : e) / (1.0f + e);
    }
}

static const float EMC[11] = {0.0f, 1.0f, EM2, EM3, EM4, EM5, EM6, EM7, EM8, EM9, EM10};
static const float ATC[11] = {1.0f, AT3, AT5, AT7, AT9, AT11, AT13, AT15, AT17, AT19, AT21};

/* softplus(b2 x) - softplus((b2 + nd) x) = -log1p(sigmoid(b2 x) expm1(nd x)) for |nd x| <= 1:
   with e = exp(-|b2 x|), sigmoid = num / den (num = 1 or e, den = 1 + e) and a = sigmoid expm1(t),
   log1p(a) = 2 atanh(w), w = a / (2 + a) = num expm1(t) / (2 den + num expm1(t)). */
static inline float lz_term_end(float t, float num, float den, const int NE, const int NM) {
    float p = EMC[NE];
    for (int k = NE - 1; k >= 2; k--) p = p * t + EMC[k];
    p = p * t + 1.0f;
    float an = num * (p * t);
    float w = an / ((den + den) + an);
    float w2 = w * w;
    float q = ATC[NM];
    for (int j = NM - 1; j >= 1; j--) q = q * w2 + ATC[j];
    q = q * w2 + 1.0f;
    return -((w + w) * q);
}

static inline float lz_term(float xv, float b2, float nd, const int NE, const int NM) {
    float y = xv * b2, t = xv * nd;
    float a = -fabsf(y);
    a = a >= EXP_LO ? a : EXP_LO;
    float e = lz_exp(a);
    float num = y >= 0.0f ? 1.0f : e;
    return lz_term_end(t, num, 1.0f + e, NE, NM);
}

/* one row: sum_j term, accumulated in float64 in 16 lanes (lane l adds columns j = l mod 16 in
   order, starting from 0.0, the row padded with 0.0 to a multiple of 16), lanes added in order.
   The terms are computed on a zero-padded copy (no scalar remainder), the padding's set to 0. */
#define LZ_ROW(NAME, NE, NM)                                                                        \
static double NAME(const float* xr, int64_t cols, float b2, float nd) {                             \
    double acc[16];                                                                                 \
    float xb[1024], term[1024];                                                                     \
    for (int l = 0; l < 16; l++) acc[l] = 0.0;                                                      \
    for (int64_t j0 = 0; j0 < cols; j0 += 1024) {                                                   \
        int64_t m = cols - j0 < 1024 ? cols - j0 : 1024, mp = (m + 15) & ~(int64_t)15;             \
        memcpy(xb, xr + j0, (size_t)m * sizeof(float));                                             \
        for (int64_t j = m; j < mp; j++) xb[j] = 0.0f;                                              \
        for (int64_t j = 0; j < mp; j++) term[j] = lz_term(xb[j], b2, nd, NE, NM);                 \
        for (int64_t j = m; j < mp; j++) term[j] = 0.0f;                                            \
        for (int64_t j = 0; j < mp; j += 16)                                                        \
            for (int l = 0; l < 16; l++) acc[l] += (double)term[j + l];                             \
    }                                                                                               \
    double tot = acc[0];                                                                            \
    for (int l = 1; l < 16; l++) tot += acc[l];                                                     \
    return tot;                                                                                     \
}
LZ_ROW(lz_row_4_1, 4, 1)
LZ_ROW(lz_row_6_2, 6, 2)
LZ_ROW(lz_row_7_4, 7, 4)
LZ_ROW(lz_row_10_10, 10, 10)

/* sum_j (double)(a_j b_j) in the lanes of LZ_ROW (the products rounded to float32 first) */
static double lz_dot_lanes(const float* a, const float* b, int64_t n) {
    double acc[16];
    for (int l = 0; l < 16; l++) acc[l] = 0.0;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++) acc[l] += (double)(a[j + l] * b[j + l]);
    if (j < n)
        for (int l = 0; l < 16; l++) acc[l] += (double)(j + l < n ? a[j + l] * b[j + l] : 0.0f);
    double tot = acc[0];
    for (int l = 1; l < 16; l++) tot += acc[l];
    return tot;
}

/* tm = |fl(max_j |x_j| * nd)| of a row (max_j |fl(x_j nd)|: rounding is monotone), NaN if a x_j is
   NaN (its bits exceed every finite |x|): the row's largest step, which picks its series degree */
static inline float lz_row_tm(const float* xr, int64_t cols, float nd) {
    uint32_t mb = 0;
    for (int64_t j = 0; j < cols; j++) {
        uint32_t u = f2u(xr[j]) & 0x7FFFFFFFu;
        mb = u > mb ? u : mb;
    }
    return fabsf(u2f(mb) * nd);
}

/* out[i] = d (v_i . dv) + sum_j softplus(b2 x_ij) - softplus((b2 + nd) x_ij) for a (rows x cols)
   float32 matrix x (the linear term only where v is given: rows x vcols, dv of length vcols).
   The degrees follow tm = |fl(max_j |x_ij| * nd)| = max_j |fl(x_ij nd)|.  Returns 1 if some
   |nd x| > 1 or is NaN (out is then unusable). */
int lz_softplus_diff_f32(const float* x, int64_t rows, int64_t cols, float b2, float nd, const float* v,
                         int64_t vcols, const float* dv, double d, double* out, int nthreads) {
    int coarse = 0;
#pragma omp parallel for schedule(static) num_threads(nthreads) reduction(|:coarse) \
    if(nthreads > 1 && rows * cols >= 65536)
    for (int64_t i = 0; i < rows; i++) {
        const float* xr = x + i * cols;
        float tm = lz_row_tm(xr, cols, nd);
        double hid;
        if (!(tm <= 1.0f)) {
            coarse = 1;
            hid = 0.0;
        } else if (tm <= TM1) hid = lz_row_4_1(xr, cols, b2, nd);
        else if (tm <= TM2) hid = lz_row_6_2(xr, cols, b2, nd);
        else if (tm <= TM3) hid = lz_row_7_4(xr, cols, b2, nd);
        else hid = lz_row_10_10(xr, cols, b2, nd);
        out[i] = v ? d * lz_dot_lanes(v + i * vcols, dv, vcols) + hid : hid;
    }
    return coarse;
}

/* ------------------------------------------------------------------ ties */

/* sigmoid in float64 (a few ulp, down to the subnormal range) */
static double lz_sigmoid64(double v) {
    double a = -fabs(v), e = 0.0;
    if (a >= -746.0) {
        double n = floor(a * LOG2E64 + 0.5);
        double r = a - n * LN2HI64;
        r = r - n * LN2LO64;
        double p = EX13;
        p = p * r + EX12;
        p = p * r + EX11;
        p = p * r + EX10;
        p = p * r + EX9;
        p = p * r + EX8;
        p = p * r + EX7;
        p = p * r + EX6;
        p = p * r + EX5;
        p = p * r + EX4;
        p = p * r + EX3;
        p = p * r + EX2;
        p = p * r + 1.0;
        p = p * r + 1.0;
        int64_t ni = (int64_t)n, n1 = ni / 2, n2 = ni - n1; /* n in [-1077, 0]: each half >= -539 */
        e = p * u2d((uint64_t)(n1 + 1023) << 52);
        e = e * u2d((uint64_t)(n2 + 1023) << 52);
    }
    return (v >= 0.0 ? 1.0 : e) / (1.0 + e);
}

void lz_sigmoid64_arr(const double* x, double* out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = lz_sigmoid64(x[i]);
}

/* A tied unit (its byte r equals floor(256 p)): fires with probability f = 256 p - r, comparing a
   uniform real with f 52 bits at a time; the bits of unit idx in round s are Philox words of the
   counter (idx, s, 0).  v is the scaled input: 256 p, or the logit. */
static double lz_tie(double v, int logits, int r, uint64_t idx, uint32_t k0, uint32_t k1) {
    if (v != v) return v;
    double f = logits ? 256.0 * lz_sigmoid64(v) - (double)r : v - (double)r;
    f = f < 0.0 ? 0.0 : (f > 1.0 ? 1.0 : f);
    for (uint32_t s = 1; f > 0.0; s++) {
        uint32_t w[4];
        philox1(idx, s, k0, k1, w);
        double k = (double)(((((uint64_t)w[1]) << 32) | w[0]) >> 12);
        double g = f * 4503599627370496.0, fl = floor(g);
        if (k < fl) return 1.0;
        if (k > fl) return 0.0;
        f = g - fl;
    }
    return 0.0;
}

/* ------------------------------------------------------------------ the hidden half of an AIS step */

static inline float exact_f32(float zb, int logits, const float* table, int rr, uint64_t idx, uint32_t k0,
                              uint32_t k1);

/* one row of lz_hidden_step_f32: returns the row's increment (as LZ_ROW) and writes hr, the
   draws of units u0 .. u0 + cols - 1, screened with this sigmoid and decided exactly */
#define LZ_ROW_DRAW(NAME, NE, NM)                                                                   \
static double NAME(const float* xr, int64_t cols, float b2, float nd, const float* table, uint64_t u0, \
                   uint32_t k0, uint32_t k1, float* hr) {                                           \
    double acc[16];                                                                                 \
    float xb[1024], term[1024], hb[1024];                                                           \
    unsigned char flag[1024];                                                                       \
    uint8_t scratch[1024 + 32];                                                                     \
    for (int l = 0; l < 16; l++) acc[l] = 0.0;                                                      \
    for (int64_t j0 = 0; j0 < cols; j0 += 1024) {                                                   \
        int64_t m = cols - j0 < 1024 ? cols - j0 : 1024, mp = (m + 15) & ~(int64_t)15;             \
        const uint8_t* r;                                                                           \
        unit_bytes(u0 + (uint64_t)j0, mp, k0, k1, scratch, &r);                                     \
        memcpy(xb, xr + j0, (size_t)m * sizeof(float));                                             \
        for (int64_t j = m; j < mp; j++) xb[j] = 0.0f;                                              \
        for (int64_t j = 0; j < mp; j++) {                                                          \
            float xv = xb[j], y = xv * b2, t = xv * nd;                                             \
            float a = -fabsf(y);                                                                    \
            a = a >= EXP_LO ? a : EXP_LO;                                                           \
            float e = lz_exp(a);                                                                    \
            float num = y >= 0.0f ? 1.0f : e, den = 1.0f + e;                                       \
            term[j] = lz_term_end(t, num, den, NE, NM);                                             \
            float rf = (float)r[j], n256 = y >= 0.0f ? 256.0f : 256.0f * e;                        \
            int fire = n256 >= (rf + (1.0f + DELTA)) * den;                                         \
            int no = n256 < (rf - DELTA) * den;                                                     \
            flag[j] = (unsigned char)((!(fire | no)) | (y != y));                                   \
            hb[j] = fire ? 1.0f : 0.0f;                                                             \
        }                                                                                           \
        for (int64_t j = m; j < mp; j++) term[j] = 0.0f;                                            \
        for (int64_t j = 0; j < mp; j += 16)                                                        \
            for (int l = 0; l < 16; l++) acc[l] += (double)term[j + l];                             \
        memcpy(hr + j0, hb, (size_t)m * sizeof(float));                                             \
        for (int64_t j = 0; j < m; j += 8) {                                                        \
            uint64_t f8;                                                                            \
            memcpy(&f8, flag + j, 8);                                                               \
            if (f8)                                                                                 \
                for (int64_t jj = j; jj < j + 8 && jj < m; jj++)                                    \
                    if (flag[jj])                                                                   \
                        hr[j0 + jj] = exact_f32(xb[jj] * b2, 1, table, r[jj], u0 + (uint64_t)(j0 + jj), k0, k1); \
        }                                                                                           \
    }                                                                                               \
    double tot = acc[0];                                                                            \
    for (int l = 1; l < 16; l++) tot += acc[l];                                                     \
    return tot;                                                                                     \
}
LZ_ROW_DRAW(lz_rowdraw_4_1, 4, 1)
LZ_ROW_DRAW(lz_rowdraw_6_2, 6, 2)
LZ_ROW_DRAW(lz_rowdraw_7_4, 7, 4)
LZ_ROW_DRAW(lz_rowdraw_10_10, 10, 10)

/* lz_softplus_diff_f32 (its out and return value) and, in the same pass over x,
   h = Bernoulli(sigmoid(b2 x)): the same bits as lz_bernoulli_f32(x, b2, logits = 1, table, k0, k1)
   (rows with some |nd x| > 1 are drawn too) */
int lz_hidden_step_f32(const float* x, int64_t rows, int64_t cols, float b2, float nd, const float* v,
                       int64_t vcols, const float* dv, double d, double* out, const float* table, uint32_t k0,
                       uint32_t k1, float* h, int nthreads) {
    int coarse = 0;
#pragma omp parallel for schedule(static) num_threads(nthreads) reduction(|:coarse) \
    if(nthreads > 1 && rows * cols >= 65536)
    for (int64_t i = 0; i < rows; i++) {
        const float* xr = x + i * cols;
        float tm = lz_row_tm(xr, cols, nd);
        int big = !(tm <= 1.0f);
        uint64_t u0 = (uint64_t)(i * cols);
        float* hr = h + i * cols;
        double hid;
        if (big || tm > TM3) hid = lz_rowdraw_10_10(xr, cols, b2, nd, table, u0, k0, k1, hr);
        else if (tm <= TM1) hid = lz_rowdraw_4_1(xr, cols, b2, nd, table, u0, k0, k1, hr);
        else if (tm <= TM2) hid = lz_rowdraw_6_2(xr, cols, b2, nd, table, u0, k0, k1, hr);
        else hid = lz_rowdraw_7_4(xr, cols, b2, nd, table, u0, k0, k1, hr);
        coarse |= big;
        out[i] = big ? 0.0 : (v ? d * lz_dot_lanes(v + i * vcols, dv, vcols) + hid : hid);
    }
    return coarse;
}

/* ------------------------------------------------------------------ Bernoulli blocks */

/* One block of m <= CHUNK units starting at global index base: out[i] = 1 or 0 (out may be z).
   Unit i fires if zb >= hi(r_i), stays off if zb < lo(r_i), else is a tie, with zb = z[i] * scale
   and (lo, hi) = (table[r], table[r + 1]) for logits, (r, r + 1) for probabilities (scale 256). */
static inline float exact_f32(float zb, int logits, const float* table, int rr, uint64_t idx, uint32_t k0,
                              uint32_t k1) {
    float lo = logits ? table[rr] : (float)rr, hi = logits ? table[rr + 1] : (float)rr + 1.0f;
    if (zb >= hi) return 1.0f;
    if (zb < lo) return 0.0f;
    return (float)lz_tie((double)zb, logits, rr, idx, k0, k1);
}

static void block_f32(const float* z, float scale, int logits, const float* table, const uint8_t* r, float* out,
                      int64_t m, uint64_t base, uint32_t k0, uint32_t k1) {
    int64_t i = 0;
#if defined(__AVX2__)
    const __m256 sc = _mm256_set1_ps(scale), one = _mm256_set1_ps(1.0f);
    if (logits) {
        /* Screen with q = 256 sigmoid(zb) from a short exp, 2^n 2^f with 2^f (0 <= f < 1) a cubic of
           relative error < 9e-5, so |q error| < 0.006: fire if q >= r + 1 + DELTA, off if q < r - DELTA,
           written without division as 256 num >= (r + 1 + DELTA) den (sigmoid = num / den); the
           close calls (and NaN) are decided exactly against the table. */
        const __m256 sign = _mm256_set1_ps(-0.0f), lo86 = _mm256_set1_ps(EXP_LO), l2e = _mm256_set1_ps(LOG2E);
        const __m256 q1 = _mm256_set1_ps(SCR_Q1), q2 = _mm256_set1_ps(SCR_Q2), q3 = _mm256_set1_ps(SCR_Q3);
        const __m256 s256 = _mm256_set1_ps(256.0f);
        const __m256 up = _mm256_set1_ps(1.0f + DELTA), dn = _mm256_set1_ps(DELTA), zero = _mm256_setzero_ps();
        const __m256 ones = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
        for (; i + 8 <= m; i += 8) {
            __m256 zb = _mm256_mul_ps(_mm256_loadu_ps(z + i), sc);
            __m256 y = _mm256_mul_ps(_mm256_max_ps(_mm256_or_ps(zb, sign), lo86), l2e);
            __m256 n = _mm256_floor_ps(y), f = _mm256_sub_ps(y, n);
            __m256 p = _mm256_add_ps(_mm256_mul_ps(f, q3), q2);
            p = _mm256_add_ps(_mm256_mul_ps(p, f), q1);
            p = _mm256_add_ps(_mm256_mul_ps(p, f), one);
            __m256 e = _mm256_castsi256_ps(
                _mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(_mm256_cvttps_epi32(n), 23)));
            __m256 num = _mm256_blendv_ps(_mm256_mul_ps(e, s256), s256, _mm256_cmp_ps(zb, zero, _CMP_GE_OQ));
            __m256 den = _mm256_add_ps(one, e);
            __m256 rf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(r + i))));
            __m256 fire = _mm256_cmp_ps(num, _mm256_mul_ps(_mm256_add_ps(rf, up), den), _CMP_GE_OQ);
            __m256 no = _mm256_cmp_ps(num, _mm256_mul_ps(_mm256_sub_ps(rf, dn), den), _CMP_LT_OQ);
            __m256 amb = _mm256_or_ps(_mm256_cmp_ps(zb, zb, _CMP_UNORD_Q),
                                      _mm256_andnot_ps(_mm256_or_ps(fire, no), ones));
            int am = _mm256_movemask_ps(amb), tb = am;
            float tv[8];
            while (tb) {
                int b = __builtin_ctz(tb);
                tv[b] = exact_f32(z[i + b] * scale, 1, table, r[i + b], base + (uint64_t)(i + b), k0, k1);
                tb &= tb - 1;
            }
            _mm256_storeu_ps(out + i, _mm256_and_ps(fire, one));
            while (am) {
                int b = __builtin_ctz(am);
                out[i + b] = tv[b];
                am &= am - 1;
            }
        }
    } else {
        for (; i + 8 <= m; i += 8) {
            __m256 zb = _mm256_mul_ps(_mm256_loadu_ps(z + i), sc);
            __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(r + i))));
            __m256 fire = _mm256_cmp_ps(zb, _mm256_add_ps(lo, one), _CMP_GE_OQ);
            __m256 no = _mm256_cmp_ps(zb, lo, _CMP_LT_OQ);
            int tie = ~_mm256_movemask_ps(_mm256_or_ps(fire, no)) & 0xFF, tb = tie;
            float tv[8];
            while (tb) {
                int b = __builtin_ctz(tb);
                tv[b] = (float)lz_tie((double)(z[i + b] * scale), 0, r[i + b], base + (uint64_t)(i + b), k0, k1);
                tb &= tb - 1;
            }
            _mm256_storeu_ps(out + i, _mm256_and_ps(fire, one));
            while (tie) {
                int b = __builtin_ctz(tie);
                out[i + b] = tv[b];
                tie &= tie - 1;
            }
        }
    }
#endif
    for (; i < m; i++) out[i] = exact_f32(z[i] * scale, logits, table, r[i], base + (uint64_t)i, k0, k1);
}

static void block_f64(const double* z, double scale, int logits, const double* table, const uint8_t* r,
                      double* out, int64_t m, uint64_t base, uint32_t k0, uint32_t k1) {
    for (int64_t i = 0; i < m; i++) {
        double zb = z[i] * scale;
        int rr = r[i];
        double lo = logits ? table[rr] : (double)rr, hi = logits ? table[rr + 1] : (double)rr + 1.0;
        if (zb >= hi) out[i] = 1.0;
        else if (zb < lo) out[i] = 0.0;
        else out[i] = lz_tie(zb, logits, rr, base + (uint64_t)i, k0, k1);
    }
}

/* Bernoulli draws of n units (see block_f32) in blocks of CHUNK units: the random byte of unit u
   is byte u mod 16 of the Philox words of counter (u / 16, 0, 0), or given[u] (tests). */
#define LZ_BERNOULLI(NAME, T, BLOCK)                                                                \
void NAME(const T* z, T scale, int logits, const T* table, uint32_t k0, uint32_t k1,                \
          const uint8_t* given, T* out, int64_t n, int nthreads) {                                  \
    int64_t nchunks = (n + CHUNK - 1) / CHUNK;                                                      \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(nthreads > 1 && nchunks > 1)") \
    for (int64_t ch = 0; ch < nchunks; ch++) {                                                      \
        uint8_t scratch[CHUNK + 32];                                                                \
        int64_t s = ch * CHUNK, m = n - s < CHUNK ? n - s : CHUNK;                                  \
        const uint8_t* r;                                                                           \
        if (given) r = given + s;                                                                   \
        else unit_bytes((uint64_t)s, m, k0, k1, scratch, &r);                                       \
        BLOCK(z + s, scale, logits, table, r, out + s, m, (uint64_t)s, k0, k1);                     \
    }                                                                                               \
}
LZ_BERNOULLI(lz_bernoulli_f32, float, block_f32)
LZ_BERNOULLI(lz_bernoulli_f64, double, block_f64)

int lz_avx2(void) {
#if defined(__AVX2__)
    return 1;
#else
    return 0;
#endif
}
"""

#: The kernel's C source (constants first, generated from ``_K32`` and ``_K64``).
C_SOURCE = "/* logzbench sampling kernel (generated by logzbench.sampling) */\n" + _c_constants() + "\n" + _C_BODY

_kernel_state: dict = {}


def _cache_dir() -> Path:
    """The first candidate directory for the compiled kernel that this user alone controls
    (:func:`logzbench.trusted.private_dir`: owned by the user, not writable by others, no link, and
    nobody else can replace it on the way): ``$LOGZBENCH_KERNEL_DIR``, ``$XDG_CACHE_HOME`` or
    ``~/.cache``'s ``logzbench/kernels``, the temporary directory's ``logzbench-kernels-<uid>``.
    A library loaded from a directory another user can write would run that user's code."""
    env = os.environ.get(ENV_KERNEL_DIR)
    candidates = [Path(env)] if env else []
    xdg = os.environ.get("XDG_CACHE_HOME")
    candidates.append((Path(xdg) if xdg else Path("~/.cache").expanduser()) / "logzbench" / "kernels")
    uid = os.getuid() if hasattr(os, "getuid") else 0
    candidates.append(Path(tempfile.gettempdir()) / f"logzbench-kernels-{uid}")
    problems = []
    for d in candidates:
        try:
            d = private_dir(d, private=False)
        except OSError as exc:
            problems.append(str(exc))
            continue
        if os.access(d, os.W_OK):
            return d
        problems.append(f"{d} is not writable")
    raise OSError("no directory for the compiled kernel that only you control: " + "; ".join(problems))


def _cpu_signature() -> str:
    """What ``-march=native`` depends on: the machine and its CPU feature flags."""
    flags = ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    flags = line
                    break
    except OSError:
        flags = platform.processor()
    return f"{sys.platform} {platform.machine()} {flags}"


#: Compiler flags, best first.  No fast-math and no contraction into fused multiply-adds: every
#: operation stays one IEEE operation; -fno-trapping-math only lets the vectoriser turn
#: comparisons into selects (it changes no value).
_FLAG_SETS = (
    ["-O3", "-march=native", "-ffp-contract=off", "-fno-trapping-math", "-fno-strict-aliasing", "-fopenmp"],
    ["-O3", "-march=native", "-ffp-contract=off", "-fno-trapping-math", "-fno-strict-aliasing"],
    ["-O3", "-ffp-contract=off", "-fno-strict-aliasing"],
)


def _compile(cc: str, src: Path, target: Path) -> str | None:
    """Compile ``src`` into ``target`` with the first flag set that works; the errors otherwise."""
    errors = []
    for flags in _FLAG_SETS:
        tmp = target.with_name(f"{target.stem}.{os.getpid()}.tmp.so")
        cmd = [cc, *flags, "-fPIC", "-shared", "-o", str(tmp), str(src), "-lm"]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            errors.append(f"{' '.join(cmd)}: {exc}")
            break
        if res.returncode == 0:
            os.chmod(tmp, 0o755)  # never group- or world-writable, whatever the umask: it would not be loaded
            os.replace(tmp, target)
            return None
        errors.append(f"{' '.join(cmd)}:\n{res.stderr[-2000:]}")
        tmp.unlink(missing_ok=True)
    return "\n".join(errors) or "compilation failed"


def _load(path: Path):
    lib = ctypes.CDLL(str(path))
    P, I64, U32, INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint32, ctypes.c_int
    lib.lz_bernoulli_f32.argtypes = [P, ctypes.c_float, INT, P, U32, U32, P, P, I64, INT]
    lib.lz_bernoulli_f32.restype = None
    lib.lz_bernoulli_f64.argtypes = [P, ctypes.c_double, INT, P, U32, U32, P, P, I64, INT]
    lib.lz_bernoulli_f64.restype = None
    lib.lz_softplus_diff_f32.argtypes = [P, I64, I64, ctypes.c_float, ctypes.c_float, P, I64, P, ctypes.c_double, P,
                                         INT]
    lib.lz_softplus_diff_f32.restype = INT
    lib.lz_hidden_step_f32.argtypes = [P, I64, I64, ctypes.c_float, ctypes.c_float, P, I64, P, ctypes.c_double, P,
                                       P, U32, U32, P, INT]
    lib.lz_hidden_step_f32.restype = INT
    lib.lz_philox.argtypes = [ctypes.c_uint64, I64, U32, U32, U32, P]
    lib.lz_philox.restype = None
    lib.lz_random_bytes.argtypes = [I64, U32, U32, P]
    lib.lz_random_bytes.restype = None
    lib.lz_sigmoid_f32.argtypes = [P, P, I64]
    lib.lz_sigmoid_f32.restype = None
    lib.lz_sigmoid64_arr.argtypes = [P, P, I64]
    lib.lz_sigmoid64_arr.restype = None
    lib.lz_avx2.argtypes = []
    lib.lz_avx2.restype = INT
    return lib


def _self_check(lib) -> str | None:
    """Compare the loaded kernel with known answers and the NumPy twin; a message on mismatch."""
    out = np.empty(4, np.uint32)
    lib.lz_philox(0, 1, 0, 0, 0, out.ctypes.data)
    if out.tolist() != [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]:
        return "Philox4x32-10 known-answer test failed"
    b = np.empty(CHUNK + 100, np.uint8)
    lib.lz_random_bytes(b.size, 7, 9, b.ctypes.data)
    if not np.array_equal(b, _random_bytes_np(b.size, 7, 9)):
        return "random bytes differ from the NumPy implementation"
    x = np.linspace(-40, 40, 801)
    s = np.empty_like(x)
    lib.lz_sigmoid64_arr(x.ctypes.data, s.ctypes.data, x.size)
    if not np.array_equal(s, _sigmoid64(x)):
        return "float64 sigmoid differs from the NumPy implementation"
    return None


def _kernel_digest() -> str:
    """The compiled library's name part (``lzsampling-<digest>.so``): source, flags and CPU."""
    return hashlib.sha256((C_SOURCE + repr(_FLAG_SETS) + _cpu_signature()).encode()).hexdigest()[:16]


def _build_and_load():
    """The compiled kernel library and a status line, compiling it first if this machine has none."""
    if os.environ.get(ENV_NO_COMPILE, "").strip().lower() in ("1", "true", "yes", "on"):
        return None, f"NumPy implementation (${ENV_NO_COMPILE} is set)"
    digest = _kernel_digest()
    try:
        d = _cache_dir()
    except OSError as exc:
        return None, f"NumPy implementation ({exc})"
    target = d / f"lzsampling-{digest}.so"
    failed = d / f"lzsampling-{digest}.failed"
    if not target.exists():
        if failed.exists():
            return None, f"NumPy implementation (an earlier compilation failed; see {failed})"
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if not cc:
            return None, "NumPy implementation (no C compiler found)"
        lock = d / f"lzsampling-{digest}.lock"
        with open(lock, "w") as lf:
            try:
                import fcntl
                fcntl.flock(lf, fcntl.LOCK_EX)  # one compilation per machine; other processes wait for it
            except ImportError:
                pass
            if not target.exists() and not failed.exists():
                src = d / f"lzsampling-{digest}.c"
                src.write_text(C_SOURCE)
                err = _compile(cc, src, target)
                if err is not None:
                    failed.write_text(err)
        if not target.exists():
            return None, f"NumPy implementation (compilation failed; see {failed})"
    problem = untrusted_file(target)
    if problem:
        return None, f"NumPy implementation (not loading the kernel: {problem})"
    try:
        lib = _load(target)
    except (OSError, AttributeError) as exc:
        return None, f"NumPy implementation (cannot load {target}: {exc})"
    problem = _self_check(lib)
    if problem:
        return None, f"NumPy implementation ({target}: {problem})"
    return lib, f"compiled kernel {target}" + (" (AVX2)" if lib.lz_avx2() else "")


def _kernel():
    """The loaded C kernel, or ``None`` for the NumPy implementation (decided once per process)."""
    if "lib" not in _kernel_state:
        with _lock:
            if "lib" not in _kernel_state:
                lib, status = _build_and_load()
                _kernel_state["status"] = status
                _kernel_state["lib"] = lib
    return _kernel_state["lib"]


def kernel_status() -> str:
    """Which implementation CPU draws use: the compiled kernel (its path), or why NumPy is used."""
    _kernel()
    return _kernel_state["status"]


# ============================================================================ NumPy twin of the kernel

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
    padded[:, 16:16 + n] = terms
    acc = np.cumsum(padded.reshape(rows, groups + 1, 16), axis=1)[:, -1, :]  # sequential in each lane
    return np.cumsum(acc, axis=1)[:, -1]


def _softplus_diff_np(x: np.ndarray, b2, nd, v: np.ndarray | None = None, dv: np.ndarray | None = None,
                      d: float = 0.0) -> np.ndarray | None:
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


def _bernoulli_np(x: np.ndarray, scale, logits: bool, key: tuple[int, int], out: np.ndarray,
                  given: np.ndarray | None = None) -> None:
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


# ============================================================================ drivers

def _key(generator: torch.Generator) -> tuple[int, int]:
    """A fresh 64-bit Philox key from the run's generator."""
    k = torch.randint(0, 2**32, (2,), generator=generator, dtype=torch.int64, device=generator.device).tolist()
    return int(k[0]), int(k[1])


def _bernoulli_cpu(x: np.ndarray, scale, logits: bool, key: tuple[int, int], out: np.ndarray, lib="auto",
                   given: np.ndarray | None = None) -> None:
    """Draws for the flat contiguous float32 / float64 array ``x`` into ``out`` (may be ``x``), with
    a chosen implementation (the tests' entry point; :func:`_bernoulli` calls the kernel directly).

    ``lib``: the kernel, ``None`` for the NumPy twin, ``"auto"`` for :func:`_kernel`; ``given``:
    random bytes to use instead of Philox's."""
    lib = _kernel() if lib == "auto" else lib
    if lib is None:
        _bernoulli_np(x, scale, logits, key, out, given)
        return
    dt = x.dtype.type
    fn = lib.lz_bernoulli_f32 if dt is np.float32 else lib.lz_bernoulli_f64
    table = _table(dt) if logits else None
    fn(x.ctypes.data, scale, int(logits), None if table is None else table.ctypes.data, key[0], key[1],
       None if given is None else given.ctypes.data, out.ctypes.data, x.shape[0], max(1, torch.get_num_threads()))


def _device_kernels(device: torch.device):
    """:mod:`logzbench.triton_kernels` when it serves ``device`` (CUDA, Triton importable, not
    switched off by ``LOGZBENCH_NO_TRITON=1``), else None."""
    if device.type != "cuda" or os.environ.get(ENV_NO_TRITON, "").strip() == "1":
        return None
    from . import triton_kernels

    return triton_kernels if triton_kernels.available(device) else None


_DEVICE_TABLES: dict = {}


def _device_table(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """:func:`_table` as a tensor on ``device`` (cached)."""
    t = _DEVICE_TABLES.get((dtype, device))
    if t is None:
        t = _DEVICE_TABLES[(dtype, device)] = torch.as_tensor(_table(_NUMPY_DTYPES[dtype]), device=device)
    return t


def _device_key(generator: torch.Generator) -> torch.Tensor:
    """A fresh Philox key from the run's device generator, left on the device (no host sync)."""
    return torch.randint(0, 2**62, (1,), generator=generator, device=generator.device, dtype=torch.int64)


def _bernoulli_torch(x: torch.Tensor, scale: float, logits: bool, generator: torch.Generator,
                     out: torch.Tensor) -> torch.Tensor:
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
            k = torch.randint(0, 2**52, (pending.numel(),), generator=generator, device=dev,
                              dtype=torch.int64).double()
            g = cur[pending] * _TWO52
            fl = torch.floor(g)
            res[pending[k < fl]] = 1.0
            rest = g - fl
            cur[pending] = rest
            pending = pending[(k == fl) & (rest > 0)]
        res[torch.isnan(f)] = float("nan")
        out.view(-1)[idx] = res.to(out.dtype)
    return out


def _bernoulli(x: torch.Tensor, scale: float, logits: bool, generator: torch.Generator,
               out: torch.Tensor | None) -> torch.Tensor:
    x = x.detach()
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    if x.dtype not in _NUMPY_DTYPES:  # half precision etc.: decide in float32
        return out.copy_(_bernoulli(x.float(), scale, logits, generator, None))
    if x.device.type != "cpu":
        direct = out.is_contiguous() and out.dtype == x.dtype
        target = out if direct else torch.empty_like(x, memory_format=torch.contiguous_format)
        kernels = _device_kernels(x.device)
        if kernels is not None:
            kernels.bernoulli_(x.contiguous(), scale, logits, _device_key(generator),
                               _device_table(x.dtype, x.device), target)
        else:
            _bernoulli_torch(x, scale, logits, generator, target)
        return out if direct else out.copy_(target)
    key = _key(generator)
    xc = x.contiguous()
    target = out if (out.is_contiguous() and out.dtype == x.dtype) else torch.empty(x.shape, dtype=x.dtype)
    lib = _kernel()
    if lib is not None:  # the hot path: straight to the kernel
        f32 = x.dtype == torch.float32
        table = _table_address(np.float32 if f32 else np.float64) if logits else None
        (lib.lz_bernoulli_f32 if f32 else lib.lz_bernoulli_f64)(
            xc.data_ptr(), scale, int(logits), table, key[0], key[1], None, target.data_ptr(), xc.numel(),
            max(1, torch.get_num_threads()))
    else:
        _bernoulli_np(xc.view(-1).numpy(), scale, logits, key, target.view(-1).numpy())
    if target is not out:
        out.copy_(target)
    return out


def bernoulli(p: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Bernoulli(``p``) samples with ``P(1) = p`` exactly (see the module docstring).

    Parameters
    ----------
    p : torch.Tensor, any shape
        Probabilities (below 0 never fires, above 1 always; NaN gives NaN).
    generator : torch.Generator
        The run's generator, on ``p``'s device.

    Returns
    -------
    torch.Tensor
        0./1. of ``p``'s shape and dtype (contiguous).
    """
    return _bernoulli(p, 256.0, False, generator, None)


def bernoulli_from_logits(z: torch.Tensor, generator: torch.Generator, scale: float = 1.0,
                          out: torch.Tensor | None = None) -> torch.Tensor:
    """Bernoulli(``sigmoid(scale * z)``) samples, ``scale * z`` rounded to ``z``'s dtype.

    ``P(1) = sigmoid(fl(scale * z))`` to float64 precision; no sigmoid is materialised (the
    annealing kernels pass ``beta`` as ``scale`` and the hidden pre-activations as ``z``).

    Parameters
    ----------
    z : torch.Tensor, any shape
        Logits (float32 or float64; other dtypes are decided in float32).
    generator : torch.Generator
    scale : float
        Multiplies ``z`` (in ``z``'s dtype) before the draw.
    out : torch.Tensor, optional
        Where the 0./1. samples go (may be ``z`` itself); default a new tensor.

    Returns
    -------
    torch.Tensor
        ``out``: 0./1. of ``z``'s shape.
    """
    return _bernoulli(z, float(scale), True, generator, out)


def bernoulli_from_logits_(z: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Bernoulli(``sigmoid(z)``) samples, overwriting ``z`` (saves one allocation per sweep)."""
    return _bernoulli(z, 1.0, True, generator, z)


def softplus_diff_rows(x: torch.Tensor, beta_from: float, beta_to: float, v: torch.Tensor | None = None,
                       dv: torch.Tensor | None = None) -> torch.Tensor | None:
    """``sum_j softplus(beta_to x_ij) - softplus(beta_from x_ij)`` per row, float64, as a small number,
    plus ``(beta_to - beta_from) (v_i . dv)`` when ``v`` and ``dv`` are given.

    Each term is ``-log1p(sigmoid(beta_to x) expm1(-d x))`` with ``d = beta_to - beta_from``,
    which keeps the full relative precision of the (small) increment in float32; the sums are
    accumulated in float64.  On CPU this is one fused pass of the compiled kernel (or its
    bit-identical NumPy twin), with series truncated by the row's largest ``|d x|`` at a quarter
    ulp; on other devices, torch operations.

    Parameters
    ----------
    x : torch.Tensor, shape (n_rows, n_cols)
        Pre-activations (float32; other dtypes are computed by torch in their own precision).
    beta_from, beta_to : float
    v : torch.Tensor, shape (n_rows, n_v), optional
        With ``dv``: the rows of the linear term (an RBM path's visible states).
    dv : torch.Tensor, shape (n_v,), optional
        Its coefficients (``a - a0``).

    Returns
    -------
    torch.Tensor of shape (n_rows,), float64, or None
        ``None`` when some ``|d x| > 1`` (a coarse step) or is NaN: the caller then subtracts
        float64 softplus values instead.  On CUDA (and other non-CPU devices) the terms are float64
        softplus differences, for every step size, and the result is never ``None``.
    """
    d = float(beta_to) - float(beta_from)
    if x.dim() != 2:
        raise ValueError(f"expected a 2-D tensor, got shape {tuple(x.shape)}")
    x = x.detach()
    linear = v is not None and dv is not None
    if linear and (v.dim() != 2 or v.shape[0] != x.shape[0] or dv.shape != (v.shape[1],)):
        raise ValueError(f"v {tuple(v.shape)} and dv {tuple(dv.shape)} do not match x {tuple(x.shape)}")
    if x.device.type != "cpu":  # float64 softplus differences: no coarse-step test, no host sync
        x64 = x.double()
        hid = (F.softplus(x64 * beta_to, threshold=_SOFTPLUS64_LINEAR)
               - F.softplus(x64 * beta_from, threshold=_SOFTPLUS64_LINEAR)).sum(dim=1)
        return hid + d * (v.double() @ dv.double()) if linear else hid
    if x.dtype != torch.float32 or (linear and (v.dtype != torch.float32 or dv.dtype != torch.float32)):
        t = torch.mul(x, -d)
        if not bool((t.abs() <= 1.0).all()):
            return None
        p = torch.mul(x, beta_to).sigmoid_()
        hid = -t.expm1_().mul_(p).log1p_().sum(dim=1, dtype=torch.float64)
        return hid + d * (v.double() @ dv.double()) if linear else hid
    xc = x.contiguous()
    rows, cols = xc.shape
    vc = v.detach().contiguous() if linear else None
    dc = dv.detach().contiguous() if linear else None
    lib = _kernel()
    if lib is None:
        res = _softplus_diff_np(xc.numpy(), beta_to, -d, None if vc is None else vc.numpy(),
                                None if dc is None else dc.numpy(), d)
        return None if res is None else torch.from_numpy(res)
    out = torch.empty(rows, dtype=torch.float64)
    coarse = lib.lz_softplus_diff_f32(xc.data_ptr(), rows, cols, beta_to, -d, vc.data_ptr() if linear else None,
                                      vc.shape[1] if linear else 0, dc.data_ptr() if linear else None, d,
                                      out.data_ptr(), max(1, torch.get_num_threads()))
    return None if coarse else out


def reweight_and_draw(x: torch.Tensor, beta_from: float, beta_to: float, generator: torch.Generator,
                      v: torch.Tensor | None = None, dv: torch.Tensor | None = None
                      ) -> tuple[torch.Tensor | None, torch.Tensor]:
    """:func:`softplus_diff_rows` and then :func:`bernoulli_from_logits` ``(x, generator, scale=beta_to)``,
    with the same results (and the same draws from ``generator``), in one pass over ``x`` on CPU.

    The hidden half of a sweep of an RBM path's AIS step: the log-weight increment from
    ``beta_from`` to ``beta_to`` and the hidden units drawn at ``beta_to``.

    Parameters
    ----------
    x : torch.Tensor, shape (n_rows, n_cols)
        Hidden pre-activations.
    beta_from, beta_to : float
    generator : torch.Generator
    v, dv : torch.Tensor, shapes (n_rows, n_v) and (n_v,), optional
        The linear term, as in :func:`softplus_diff_rows`.

    Returns
    -------
    (torch.Tensor of shape (n_rows,) or None, torch.Tensor of shape (n_rows, n_cols))
        The increments (``None`` on a coarse step, as :func:`softplus_diff_rows`) and the 0./1. draws.
    """
    linear = v is not None and dv is not None
    kernels = _device_kernels(x.device)
    if (kernels is not None and x.dim() == 2 and x.dtype == torch.float32
            and (not linear or (v.dtype == torch.float32 and dv.dtype == torch.float32 and v.dim() == 2
                                and v.shape[0] == x.shape[0] and dv.shape == (v.shape[1],)))):
        return kernels.hidden_step(x.detach().contiguous(), float(beta_from), float(beta_to),
                                   v.detach().contiguous() if linear else None,
                                   dv.detach().contiguous() if linear else None,
                                   _device_key(generator), _device_table(torch.float32, x.device))
    lib = _kernel() if x.device.type == "cpu" else None
    if (lib is None or x.dim() != 2 or x.dtype != torch.float32
            or (linear and (v.dtype != torch.float32 or dv.dtype != torch.float32 or v.dim() != 2
                            or v.shape[0] != x.shape[0] or dv.shape != (v.shape[1],)))):
        inc = softplus_diff_rows(x, beta_from, beta_to, v=v, dv=dv)
        return inc, bernoulli_from_logits(x, generator, scale=beta_to)
    d = float(beta_to) - float(beta_from)
    xc = x.detach().contiguous()
    rows, cols = xc.shape
    vc = v.detach().contiguous() if linear else None
    dc = dv.detach().contiguous() if linear else None
    key = _key(generator)
    out = torch.empty(rows, dtype=torch.float64)
    h = torch.empty((rows, cols), dtype=torch.float32)
    if h.numel():
        coarse = lib.lz_hidden_step_f32(xc.data_ptr(), rows, cols, beta_to, -d, vc.data_ptr() if linear else None,
                                        vc.shape[1] if linear else 0, dc.data_ptr() if linear else None, d,
                                        out.data_ptr(), _table_address(np.float32), key[0], key[1], h.data_ptr(),
                                        max(1, torch.get_num_threads()))
    else:
        coarse = 0
        out.zero_()
        if linear:
            out += d * (vc.double() @ dc.double())
    return (None if coarse else out), h
