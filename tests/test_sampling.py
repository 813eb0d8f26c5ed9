"""The exact Bernoulli sampler and the fused kernels of :mod:`logzbench.kernels`.

Real properties only (no timings): exactness of the decision rule with controlled random bits,
hit counts of tiny probabilities that the old float32-uniform rule fails, means of many draws,
determinism (seed, thread count, compiled kernel vs its NumPy twin), the exact Gibbs transition
matrix of a tiny RBM, the log-weight increments against float64, and the loading of the kernel
built at installation (its checks, and the NumPy implementation wherever it is absent or refused).
"""

import math
import os
import subprocess
import sys
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import all_states, random_rbm
from scipy import stats

from logzbench import kernels as S
from logzbench.api import estimate
from logzbench.kernels import _build, _native
from logzbench.kernels import _constants as C
from logzbench.kernels import _dispatch as D
from logzbench.kernels import _numpy as NP
from logzbench.kernels import _torch as T


@pytest.fixture
def lib():
    """The compiled kernel (skipped where this machine has none)."""
    k = _native._kernel()
    if k is None:
        pytest.skip(f"no compiled kernel: {S.kernel_status()}")
    return k


@pytest.fixture(params=["compiled", "numpy"])
def backend(request, monkeypatch):
    """Run the public functions with the compiled kernel, then with the NumPy twin."""
    if request.param == "compiled":
        if _native._kernel() is None:
            pytest.skip(f"no compiled kernel: {S.kernel_status()}")
    else:
        monkeypatch.setattr(_native, "_kernel_state", {"lib": None, "status": "NumPy implementation (test)"})
    return request.param


def _old_bernoulli(p: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """The rule this module replaced: ``ceil(p - u)`` with a float32 uniform ``u`` (multiples of
    ``2^-24``), so ``P(1) = ceil(2^24 p) / 2^24``: every ``0 < p < 2^-24`` fires with ``2^-24``."""
    u = torch.rand(p.shape, generator=generator, dtype=p.dtype)
    return torch.sub(p, u).ceil_()


def _count_hits(sampler, p, n_total: int, chunk: int = 1 << 24, logits: bool = False) -> int:
    g = torch.Generator().manual_seed(20261123)
    x = torch.full((chunk,), p, dtype=torch.float32)
    hits = 0
    for _ in range(n_total // chunk):
        out = sampler(x.clone() if logits else x, g)
        hits += int(out.sum())
    return hits


# --------------------------------------------------------------------------- (a) tiny probabilities

#: 2^29 draws at p = 2^-30: Poisson(0.5) hits, more than 8 with probability 3e-9.  The old rule
#: fires with 2^-24 (Poisson(32) hits): 8 or fewer with probability 5e-7.
N_TINY, P_TINY, MAX_HITS = 1 << 29, 2.0**-30, 8


def test_hit_bound_separates_exact_from_rounded():
    assert stats.poisson.sf(MAX_HITS, N_TINY * P_TINY) < 1e-8  # false alarm of the exact sampler
    assert stats.poisson.cdf(MAX_HITS, N_TINY * 2.0**-24) < 1e-6  # the old rule passes


def test_tiny_probability_hit_count():
    """p = 2^-30 over 2^29 draws: hits consistent with Poisson(0.5).

    Run with this machine's implementation only (the other one gives the same bits, see
    ``test_compiled_kernel_equals_numpy_twin``).  The old rule (:func:`_old_bernoulli`) rounds p
    up to 2^-24 and gives about 32 hits here, so it fails this check:
    ``test_old_rule_fails_the_hit_count`` (marked slow) runs it."""
    hits = _count_hits(S.bernoulli, P_TINY, N_TINY)
    assert hits <= MAX_HITS, hits


def test_tiny_probability_hit_count_from_logits():
    """The same through logits: z = logit(2^-30) in float32."""
    z = float(np.float32(math.log(P_TINY) - math.log1p(-P_TINY)))
    hits = _count_hits(S.bernoulli_from_logits_, z, N_TINY, logits=True)
    assert hits <= MAX_HITS, hits


@pytest.mark.slow
def test_old_rule_fails_the_hit_count():
    assert _count_hits(_old_bernoulli, P_TINY, N_TINY) > MAX_HITS


# --------------------------------------------------------------------------- (b) exact decision rule


def _probabilities(dtype):
    tiny = 2.0**-149 if dtype is np.float32 else 2.0**-1074
    eps = float(np.finfo(dtype).eps)
    ps = [
        0.0,
        1.0,
        tiny,
        2 * tiny,
        1e-30,
        2.0**-30,
        1e-9,
        2.0**-24,
        3 * 2.0**-25,
        1.0 / 256,
        0.5,
        1.0 - eps / 2,
        1.0 - eps,
        255 / 256,
        0.3,
        0.7,
        1.0 / 3,
    ]
    ps += list(np.random.default_rng(0).random(40))
    return np.array(ps, dtype=dtype)


def _outcomes(x: np.ndarray, scale, logits: bool, lib) -> tuple[np.ndarray, np.ndarray]:
    """Decisions for every input against every byte value 0..255: (fires, ties), each (len(x), 256) bool.

    Ties are told apart by running twice with different keys: a decided unit gives the same output."""
    xs = np.repeat(x, 256)
    r = np.tile(np.arange(256, dtype=np.uint8), x.size)
    o1, o2 = np.empty_like(xs), np.empty_like(xs)
    D._bernoulli_cpu(xs, scale, logits, (1, 2), o1, lib=lib, given=r)
    D._bernoulli_cpu(xs, scale, logits, (3, 4), o2, lib=lib, given=r)
    dt = xs.dtype.type
    zb = xs * dt(scale)
    if logits:
        table = C._table(dt)
        tie = (zb >= table[r]) & (zb < table[r.astype(np.intp) + 1])
    else:
        tie = (zb >= r) & (zb < r.astype(dt) + 1)
    assert np.array_equal(o1[~tie], o2[~tie])
    shape = (x.size, 256)
    return ((o1 == 1) & ~tie).reshape(shape), tie.reshape(shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("impl", ["compiled", "numpy"])
def test_probability_sums_to_p_exactly(dtype, impl):
    """Over the 256 byte values, (fires + tie fraction) / 256 is p exactly (in rationals)."""
    lib = _native._kernel() if impl == "compiled" else None
    if impl == "compiled" and lib is None:
        pytest.skip("no compiled kernel")
    p = _probabilities(dtype)
    fires, ties = _outcomes(p, 256.0, False, lib)
    c = fires.sum(1)  # floor(256 p): it fires for the bytes below c, ties at c (if c < 256), stays off above
    assert np.array_equal(ties.sum(1), (c < 256).astype(int))
    assert all(fires[i, : c[i]].all() and (c[i] == 256 or ties[i, c[i]]) for i in range(len(p)))
    f = np.where(c < 256, NP._tie_fraction_np(p.astype(np.float64) * 256.0, c.astype(np.float64), logits=False), 0.0)
    for pi, ci, fi in zip(p, c, f):
        assert (Fraction(int(ci)) + Fraction(float(fi))) / 256 == Fraction(float(pi))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("impl", ["compiled", "numpy"])
def test_logit_probability_is_sigmoid(dtype, impl):
    """From logits, (fires + tie fraction) / 256 is sigmoid(z) to float64 precision (60-digit reference)."""
    lib = _native._kernel() if impl == "compiled" else None
    if impl == "compiled" and lib is None:
        pytest.skip("no compiled kernel")
    t = C._table(dtype)
    z = np.concatenate(
        [
            np.array([0.0, -0.0, 1e-30, -1e-30, 5.5, -5.5, 30.0, -30.0, -80.0, -100.0, -700.0, 40.0], dtype),
            t[1:256:17],
            np.nextafter(t[1:256:17], dtype(-np.inf)),
            np.random.default_rng(1).normal(0, 5, 40).astype(dtype),
        ]
    ).astype(dtype)
    fires, ties = _outcomes(z, 1.0, True, lib)
    assert (ties.sum(1) == 1).all()
    c = fires.sum(1)
    assert np.array_equal(c, np.argmax(ties, 1))
    f = NP._tie_fraction_np(z.astype(np.float64), c.astype(np.float64), logits=True)
    with localcontext() as ctx:
        ctx.prec = 60
        for zi, ci, fi in zip(z, c, f):
            exact = 1 / (1 + (-Decimal(float(zi))).exp())
            got = (Decimal(int(ci)) + Decimal(float(fi))) / 256
            assert abs(got - exact) <= exact * Decimal(2.0**-50), (zi, got, exact)


def test_refinement_is_exact():
    """The 52-bit refinement fires with probability f exactly: P = floor(2^52 f) / 2^52 +
    P(frac(2^52 f)) / 2^52, each step exact in float64, down to subnormal f."""

    def exact_probability(f: float) -> Fraction:
        g = f * C._TWO52
        fl = math.floor(g)
        rest = g - fl
        assert Fraction(g) == Fraction(f) * 2**52 and Fraction(rest) == Fraction(g) - fl  # no rounding
        return Fraction(fl, 2**52) + (exact_probability(rest) / 2**52 if rest > 0 else 0)

    for f in [0.0, 1.0, 0.5, 1 / 3, 2.0**-60, 5e-324, 1e-300, 1 - 2.0**-53, 0.123456789]:
        assert exact_probability(f) == Fraction(f)
    # the implementation follows those steps: k below, on and above floor(2^52 f)
    f = np.array([1 / 3, 1 / 3, 1 / 3, 2.0**-60, 0.0, 1.0, float("nan")])
    fl = np.floor(f * C._TWO52)
    first = np.nan_to_num(np.array([fl[0] - 1, fl[1] + 1, fl[2], 0.0, 0.0, C._TWO52 - 1, 0.0]))
    calls = []

    def draw(sel, s):
        calls.append((sel.copy(), s))
        if s == 1:
            return first[sel]
        return np.zeros(sel.size)  # round 2: unit 2 (1/3) has frac > 0: fires; unit 3 (2^-60): 2^-8 > 0: fires

    out = NP._refine_np(f, draw)
    assert out[:6].tolist() == [1.0, 0.0, 1.0, 1.0, 0.0, 1.0] and np.isnan(out[6])
    assert calls[1][1] == 2 and calls[1][0].tolist() == [2, 3]


def test_thresholds_are_the_exact_bucket_boundaries():
    """T[k] is the smallest float with sigmoid(T[k]) >= k/256, i.e. with T[k] >= log(k / (256 - k))."""
    t32, t64 = C._table(np.float32), C._table(np.float64)
    assert t32[0] == t64[0] == -np.inf and t32[256] == t64[256] == np.inf and t32[128] == t64[128] == 0.0
    with localcontext() as ctx:
        ctx.prec = 60
        for k in range(1, 256):
            logit = Decimal(k).ln() - Decimal(256 - k).ln()
            for t, dt in ((t32, np.float32), (t64, np.float64)):
                assert Decimal(float(t[k])) >= logit > Decimal(float(np.nextafter(t[k], dt(-np.inf))))


def test_philox_known_answers(lib):
    """Random123's known-answer vectors for Philox4x32-10 (counter, key -> words)."""
    cases = [
        ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        (
            (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
            (0xA4093822, 0x299F31D0),
            (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
        ),
    ]
    for (c0, c1, c2, c3), (k0, k1), want in cases:
        if c3 == 0:  # the kernel's counters are (64-bit index, stream, 0)
            out = np.empty(4, np.uint32)
            lib.lz_philox(c0 | (c1 << 32), 1, c2, k0, k1, out.ctypes.data)
            assert tuple(out.tolist()) == want
    for (c0, c1, c2, c3), (k0, k1), want in cases:
        if c3 == 0:
            got = NP._philox_np(np.array([c0 | (c1 << 32)], np.uint64), c2, k0, k1)[0]
            assert tuple(got.tolist()) == want


def test_philox_twin_matches_reference_round_function():
    """The NumPy Philox against a plain-integer transcription of the published algorithm."""

    def reference(c, key):
        x, (k0, k1) = list(c), key
        for _ in range(10):
            p0, p1 = 0xD2511F53 * x[0], 0xCD9E8D57 * x[2]
            x = [(p1 >> 32) ^ x[1] ^ k0, p1 & 0xFFFFFFFF, (p0 >> 32) ^ x[3] ^ k1, p0 & 0xFFFFFFFF]
            k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
        return x

    assert reference((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0)) == [
        0xD16CFE09,
        0x94FDCCEB,
        0x5001E420,
        0x24126EA1,
    ]
    counters = np.array([0, 1, 2**32 + 5, 2**63 + 12345], np.uint64)
    got = NP._philox_np(counters, 7, 123, 456)
    for c, row in zip(counters.tolist(), got):
        assert row.tolist() == reference((c & 0xFFFFFFFF, c >> 32, 7, 0), (123, 456))


def test_random_bytes_are_uniform():
    b = NP._random_bytes_np(1 << 20, 11, 13)
    counts = np.bincount(b, minlength=256)
    assert stats.chisquare(counts).pvalue > 1e-6
    # consecutive bytes independent: pairs of (even, odd) positions
    pairs = np.bincount(b[0::2].astype(np.int64) // 16 * 16 + b[1::2] // 16, minlength=256)
    assert stats.chisquare(pairs).pvalue > 1e-6


# --------------------------------------------------------------------------- (c) means


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_means_agree_with_p(backend, dtype):
    g = torch.Generator().manual_seed(3)
    n = 400_000
    for p in [1e-3, 0.1, 0.37, 0.5, 0.9, 0.999]:
        x = S.bernoulli(torch.full((n,), p, dtype=dtype), g)
        assert x.dtype == dtype and set(torch.unique(x).tolist()) <= {0.0, 1.0}
        assert abs(float(x.mean()) - p) < 5 * math.sqrt(p * (1 - p) / n)
        z = torch.full((n,), math.log(p) - math.log1p(-p), dtype=dtype)
        y = S.bernoulli_from_logits(z, g)
        q = 1 / (1 + math.exp(-float(z[0])))
        assert abs(float(y.mean()) - q) < 5 * math.sqrt(q * (1 - q) / n)


def test_scaled_logits_mean(backend):
    g = torch.Generator().manual_seed(4)
    z = torch.linspace(-6, 6, 1000).repeat(500)
    beta = 0.37
    y = S.bernoulli_from_logits(z, g, scale=beta).reshape(500, 1000).mean(0)
    p = torch.sigmoid(beta * z[:1000].double())
    assert float(((y - p).abs() / torch.sqrt(p * (1 - p) / 500)).max()) < 5.5


def test_edge_values(backend):
    g = torch.Generator().manual_seed(5)
    p = torch.tensor([0.0, 1.0, -0.5, 1.5, float("nan")]).repeat(10_000)
    x = S.bernoulli(p, g).reshape(10_000, 5)
    assert (x[:, 0] == 0).all() and (x[:, 1] == 1).all() and (x[:, 2] == 0).all() and (x[:, 3] == 1).all()
    assert torch.isnan(x[:, 4]).all()
    z = torch.tensor([-math.inf, math.inf, float("nan"), -1e30, 1e30, -100.0]).repeat(10_000)
    y = S.bernoulli_from_logits(z, g).reshape(10_000, 6)
    assert (y[:, 0] == 0).all() and (y[:, 1] == 1).all() and torch.isnan(y[:, 2]).all()
    assert (y[:, 3] == 0).all() and (y[:, 4] == 1).all() and (y[:, 5] == 0).all()


def test_shapes_dtypes_and_in_place(backend):
    g = torch.Generator().manual_seed(6)
    z = torch.randn(40, 30)
    zt = z.t()  # not contiguous
    y = S.bernoulli_from_logits_(zt, g)
    assert y is zt and set(torch.unique(z).tolist()) <= {0.0, 1.0}
    h = S.bernoulli(torch.full((3, 4), 0.5, dtype=torch.float16), g)
    assert h.dtype == torch.float16 and h.shape == (3, 4)
    e = S.bernoulli(torch.empty(0, 5), g)
    assert e.shape == (0, 5)
    p = torch.sigmoid(torch.randn(7)).expand(5, 7)
    assert S.bernoulli(p, g).shape == (5, 7)
    out = torch.empty(50, 20)
    assert S.bernoulli_from_logits(torch.randn(50, 20), g, out=out) is out


def test_device_path_on_cpu():
    """The torch implementation used on CUDA, run on CPU tensors: right means, exact edge cases."""
    g = torch.Generator().manual_seed(7)
    n = 400_000
    for p in [0.0, 2.0**-40, 0.2, 0.999, 1.0]:
        x = T._bernoulli_torch(torch.full((n,), p), 256.0, False, g, torch.empty(n))
        assert abs(float(x.mean()) - p) <= 5 * math.sqrt(p * (1 - p) / n) + (1.0 if p == 2.0**-40 else 0.0) / n
    z = torch.randn(n, dtype=torch.float64) * 3
    y = T._bernoulli_torch(z, 0.5, True, g, torch.empty_like(z))
    assert abs(float((y - torch.sigmoid(0.5 * z)).mean())) < 5 * 0.5 / math.sqrt(n)
    nan = T._bernoulli_torch(torch.tensor([float("nan")] * 8), 1.0, True, g, torch.empty(8))
    assert torch.isnan(nan).all()


# --------------------------------------------------------------------------- (d) determinism


def test_same_seed_same_samples(backend):
    def draw(seed):
        g = torch.Generator().manual_seed(seed)
        return S.bernoulli(
            torch.rand(300, 700, generator=torch.Generator().manual_seed(1)), g
        ), S.bernoulli_from_logits(torch.randn(300, 700, generator=torch.Generator().manual_seed(2)), g, scale=0.7)

    a, b, c = draw(5), draw(5), draw(6)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


def test_thread_count_does_not_change_samples(backend):
    before = torch.get_num_threads()
    outs = []
    try:
        for t in (1, 2, 3):
            torch.set_num_threads(t)
            g = torch.Generator().manual_seed(9)
            x = torch.randn(200_003, generator=torch.Generator().manual_seed(3))
            outs.append(
                (
                    S.bernoulli_from_logits(x, g, scale=0.9),
                    S.softplus_diff_rows(x[:200_000].reshape(400, 500), 0.3, 0.301),
                )
            )
    finally:
        torch.set_num_threads(before)
    for o in outs[1:]:
        assert torch.equal(o[0], outs[0][0]) and torch.equal(o[1], outs[0][1])


def _adversarial(dtype, logits: bool, n: int = 100_000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if logits:
        t = C._table(dtype)[1:256]
        parts = [
            rng.normal(0, 6, n),
            t,
            np.nextafter(t, dtype(np.inf)),
            np.nextafter(t, dtype(-np.inf)),
            [0.0, -0.0, np.inf, -np.inf, np.nan, 86.0, -86.0, 87.0, -87.0, 1e30, -1e30, -745.0, -800.0],
        ]
    else:
        parts = [
            rng.random(n),
            np.arange(257) / 256,
            np.nextafter(np.arange(257) / 256, 2.0),
            [0.0, 1.0, 2.0**-149, 1e-30, np.nan, -1.0, 2.0, 1 - 2.0**-24],
        ]
    return np.concatenate([np.asarray(p_, dtype=np.float64) for p_ in parts]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("logits", [True, False])
def test_compiled_kernel_equals_numpy_twin(lib, dtype, logits):
    """Bit-identical samples from the compiled kernel and the NumPy implementation, including
    values on and next to every threshold (where the kernel's fast screening must defer)."""
    x = _adversarial(dtype, logits)
    for scale in (1.0, 0.37) if logits else (256.0,):
        for key in ((1, 2), (2**32 - 1, 12345)):
            o1, o2 = np.empty_like(x), np.empty_like(x)
            D._bernoulli_cpu(x, scale, logits, key, o1, lib=lib)
            D._bernoulli_cpu(x, scale, logits, key, o2, lib=None)
            assert np.array_equal(o1, o2, equal_nan=True)


def test_compiled_kernel_screening_near_every_bucket(lib):
    """Logits within a few thousand ulps of every threshold, bytes at the bucket and next to it."""
    rng = np.random.default_rng(2)
    t = C._table(np.float32)
    k = rng.integers(1, 256, 400_000)
    x = (t[k].view(np.int32) + rng.integers(-3000, 3000, k.size).astype(np.int32)).view(np.float32)
    r = np.clip(k - 1 + rng.integers(-1, 2, k.size), 0, 255).astype(np.uint8)
    o1, o2 = np.empty_like(x), np.empty_like(x)
    D._bernoulli_cpu(x, 1.0, True, (5, 6), o1, lib=lib, given=r)
    D._bernoulli_cpu(x, 1.0, True, (5, 6), o2, lib=None, given=r)
    assert np.array_equal(o1, o2, equal_nan=True)


def test_compiled_random_bytes_and_sigmoids_equal_twin(lib):
    b = np.empty(3 * S.CHUNK + 17, np.uint8)
    lib.lz_random_bytes(b.size, 123, 456, b.ctypes.data)
    assert np.array_equal(b, NP._random_bytes_np(b.size, 123, 456))
    x = np.concatenate([np.linspace(-750, 750, 30001), [0.0, -0.0, np.inf, -np.inf, 1e-300]])
    s = np.empty_like(x)
    lib.lz_sigmoid64_arr(x.ctypes.data, s.ctypes.data, x.size)
    assert np.array_equal(s, NP._sigmoid64(x))
    x32 = np.linspace(-100, 100, 20001, dtype=np.float32)
    s32 = np.empty_like(x32)
    lib.lz_sigmoid_f32(x32.ctypes.data, s32.ctypes.data, x32.size)
    assert np.array_equal(s32, NP._sigmoid32(x32))


def _compile(tmp_path, *extra, source=None) -> Path:
    """The kernel (or ``source``) compiled into ``tmp_path`` with the portable flags and ``extra``;
    skipped without a compiler."""
    if _build.find_compiler() is None or not _build.SOURCE.is_file():
        pytest.skip("no C compiler (or no kernel source) here")
    target = tmp_path / "k.so"
    errors = []
    assert _build.compile_kernel(
        target, sets=[[*_build.PORTABLE_FLAGS, *extra]], log=errors.append, source=source or _build.SOURCE
    ), errors
    return target


def test_portable_build_equals_twin(tmp_path):
    """The kernel compiled without -march=native (no AVX2 paths) gives the same bits too."""
    portable = _native._load(_compile(tmp_path))
    assert portable.lz_avx2() == 0 and _native._self_check(portable) is None
    for dtype, logits in ((np.float32, True), (np.float32, False), (np.float64, True)):
        x = _adversarial(dtype, logits, n=20_000)
        o1, o2 = np.empty_like(x), np.empty_like(x)
        D._bernoulli_cpu(x, 0.8 if logits else 256.0, logits, (3, 4), o1, lib=portable)
        D._bernoulli_cpu(x, 0.8 if logits else 256.0, logits, (3, 4), o2, lib=None)
        assert np.array_equal(o1, o2, equal_nan=True)
    x = np.random.default_rng(3).normal(0, 3, (50, 333)).astype(np.float32)
    out = np.empty(50)
    assert (
        portable.lz_softplus_diff_f32(x.ctypes.data, 50, 333, 0.4, -0.001, None, 0, None, 0.0, out.ctypes.data, 1) == 0
    )
    assert np.array_equal(out, NP._softplus_diff_np(x, 0.4, -0.001))


def test_c_source_constants_are_the_twins():
    """The ``#define`` constants of bernoulli.c are the NumPy twin's, as exact hex literals."""
    if not _build.SOURCE.is_file():
        pytest.skip("no kernel source here")
    defines = [
        line
        for line in _build.SOURCE.read_text().splitlines()
        if line.startswith("#define ") and line.split()[1].isupper() and not line.split()[1].startswith("LZ_")
    ]
    assert "\n".join(defines) == C._c_constants()


def test_float64_sigmoid_accuracy():
    x = np.concatenate([np.linspace(-745, 40, 4001), [-1e-20, 1e-20, 0.5, -36.7]])
    got = NP._sigmoid64(x)
    with localcontext() as ctx:
        ctx.prec = 50
        for xi, gi in zip(x, got):
            exact = 1 / (1 + (-Decimal(float(xi))).exp())
            assert abs(Decimal(float(gi)) - exact) <= exact * Decimal(2.0**-50) + Decimal(2.0**-1074)


def test_same_estimate_with_and_without_the_compiled_kernel(lib, monkeypatch):
    rbm = random_rbm(20, 12, seed=1, scale=0.8)
    X = torch.bernoulli(torch.full((30, 20), 0.4), generator=torch.Generator().manual_seed(1))
    a = estimate(rbm, "ais", data=X, steps=100, chains=40, seed=7, threads=1)
    r = estimate(rbm, "raise", data=X[:10], train_data=X, steps=50, chains=4, init="base-rate", seed=7, threads=1)
    monkeypatch.setattr(_native, "_kernel_state", {"lib": None, "status": "NumPy implementation (test)"})
    b = estimate(rbm, "ais", data=X, steps=100, chains=40, seed=7, threads=1)
    s = estimate(rbm, "raise", data=X[:10], train_data=X, steps=50, chains=4, init="base-rate", seed=7, threads=1)
    np.testing.assert_array_equal(a.log_weights, b.log_weights)
    np.testing.assert_array_equal(r.log_weights, s.log_weights)


def test_no_compile_environment_variable_forces_numpy():
    code = "from logzbench import kernels as S; print(S.kernel_status())"
    env = {**os.environ, S.ENV_NO_COMPILE: "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert "NumPy implementation" in out and S.ENV_NO_COMPILE in out


def test_installed_kernel_is_found_in_the_package(lib):
    """The installation (editable or not) put the library beside the package's modules."""
    path = _native._library_path()
    assert path is not None and path.parent == Path(_native.__file__).parent
    assert str(path) in S.kernel_status()


def test_absent_kernel_falls_back_to_the_twin_with_the_same_draws(monkeypatch):
    """Without the library (no compiler at installation) the NumPy twin serves, says why, and
    draws exactly what the compiled kernel draws (where there is one)."""

    def draws():
        g = torch.Generator().manual_seed(21)
        x = torch.randn(300, 257, generator=torch.Generator().manual_seed(22)) * 3
        inc, h = S.reweight_and_draw(x, 0.4, 0.401, g)
        return inc, h, S.bernoulli(torch.rand(5000, generator=torch.Generator().manual_seed(23)), g)

    compiled = draws() if _native._kernel() is not None else None
    monkeypatch.delenv(S.ENV_NO_COMPILE, raising=False)
    monkeypatch.setattr(_native, "_library_path", lambda: None)
    monkeypatch.setattr(_native, "_kernel_state", {})
    assert _native._kernel() is None
    assert "NumPy implementation" in S.kernel_status() and "not built at installation" in S.kernel_status()
    fallback = draws()
    if compiled is not None:
        assert all(torch.equal(a, b) for a, b in zip(compiled, fallback))


def test_library_of_another_cpu_or_source_is_not_loaded(tmp_path):
    """A -march=native build records its CPU's flags and the source's digest; the loader refuses a
    library whose CPU had a flag this one lacks, or that was built from another source."""
    here = _build.cpu_signature()
    assert _build.cpu_mismatch("", here) is None and _build.cpu_mismatch(here, here) is None
    x86 = "linux x86_64 : fpu sse2 avx2 hypervisor"
    assert "avx2, which this one lacks" in _build.cpu_mismatch(x86, "linux x86_64 : fpu sse2")
    assert _build.cpu_mismatch(x86, "linux x86_64 : fpu sse2 avx2 avx512f") is None  # no hypervisor: no matter
    assert "sve" in _build.cpu_mismatch("linux aarch64 : fp asimd sve", "linux aarch64 : fp asimd")
    assert "built on" in _build.cpu_mismatch("plan9 mips : fpu", here)
    good = _compile(tmp_path)
    lib, status = _native._open(good)
    assert lib is not None and str(good) in status
    (tmp_path / "cpu").mkdir()
    foreign = _compile(tmp_path / "cpu", f'-DLZ_BUILD_CPU="{here} avx1024 asimd_future"')
    lib, status = _native._open(foreign)
    assert lib is None and "NumPy implementation" in status and "lacks" in status
    (tmp_path / "src").mkdir()
    older = tmp_path / "src" / "bernoulli.c"
    older.write_text(_build.SOURCE.read_text() + "/* another version */\n")
    stale = _compile(tmp_path / "src", source=older)
    lib, status = _native._open(stale)
    assert lib is None and "another version of bernoulli.c" in status


def test_failed_build_leaves_no_library(tmp_path, monkeypatch):
    """An installation whose compiler fails builds nothing (and says why), so the twin serves."""
    monkeypatch.setenv("CC", "false")
    errors = []
    assert _build.compile_kernel(tmp_path / "k.so", log=errors.append) is None
    assert not list(tmp_path.iterdir()) and "could not be built" in errors[-1]


# --------------------------------------------------------------------------- (e) invariance


@pytest.mark.parametrize("beta", [0.4, 1.0])
def test_gibbs_transition_matrix_is_exact(backend, beta):
    """From each visible state, the empirical next state of one sweep matches the exact kernel
    T(v, v') = sum_h p_beta(h | v) p_beta(v' | h) (chi-square per start state)."""
    rbm = random_rbm(3, 2, seed=12, scale=2.0, bias_scale=1.5)
    path = rbm.annealing_path("base-rate", visible_bias_0=torch.tensor([0.3, -2.0, 1.0]))
    vs, hs = all_states(3), all_states(2)
    W, a, b = rbm.W.double(), rbm.visible_bias.double(), rbm.hidden_bias.double()
    a_beta = (1 - beta) * path.a0.double() + beta * a
    ph = torch.sigmoid(beta * (vs @ W + b))  # (8, 2)
    p_h = torch.prod(torch.where(hs[None] == 1, ph[:, None], 1 - ph[:, None]), -1)  # (8 v, 4 h)
    pv = torch.sigmoid(beta * (hs @ W.T) + a_beta)  # (4, 3)
    p_v = torch.prod(torch.where(vs[None] == 1, pv[:, None], 1 - pv[:, None]), -1)  # (4 h, 8 v')
    T = (p_h @ p_v).numpy()
    n = 20_000
    g = torch.Generator().manual_seed(13)
    start = vs.float().repeat_interleave(n, 0)
    nxt = path.transition(path.state_from_data(start), beta, g).v
    codes = (nxt.long() * torch.tensor([4, 2, 1])).sum(1).reshape(8, n)
    for i in range(8):
        counts = np.bincount(codes[i].numpy(), minlength=8)
        expected = T[i] * n
        keep = expected > 0
        assert counts[~keep].sum() == 0
        assert stats.chisquare(counts[keep], expected[keep] * counts.sum() / expected[keep].sum()).pvalue > 1e-5


def test_gibbs_leaves_p_beta_invariant(backend):
    rbm = random_rbm(4, 3, seed=5, scale=1.5)
    path = rbm.annealing_path("base-rate", visible_bias_0=torch.tensor([0.5, -1.0, 0.0, 2.0]))
    states = all_states(4).float()
    beta = 0.7
    p = torch.softmax(path.log_f(path.state_from_data(states), beta), 0).numpy()
    g = torch.Generator().manual_seed(11)
    n = 60_000
    s = path.state_from_data(states[torch.multinomial(torch.as_tensor(p), n, replacement=True, generator=g)])
    for _ in range(3):
        s = path.transition(s, beta, g)
    counts = np.bincount((s.v.long() * torch.tensor([8, 4, 2, 1])).sum(1).numpy(), minlength=16)
    assert stats.chisquare(counts, p * n).pvalue > 1e-5


# --------------------------------------------------------------------------- log-weight increments


def test_softplus_increments_match_float64(backend):
    g = torch.Generator().manual_seed(8)
    x = torch.randn(64, 777, generator=g) * 6
    x[0, 0] = 0.0
    for b0, b1 in [(0.0, 1e-4), (0.3, 0.302), (0.5, 0.53), (0.1, 0.2), (0.9, 1.0), (0.6, 0.6)]:
        got = S.softplus_diff_rows(x, b0, b1)
        x64, d = x.double(), b1 - b0
        terms = -torch.log1p(torch.sigmoid(b1 * x64) * torch.expm1(-d * x64))
        ref = terms.sum(1)
        if float((d * x64).abs().max()) > 1:
            assert got is None
            continue
        assert got.dtype == torch.float64
        assert float(((got - ref).abs() / terms.abs().sum(1).clamp_min(1e-300)).max()) < 2e-7, (b0, b1)
    assert S.softplus_diff_rows(x * float("nan"), 0.1, 0.2) is None


def test_softplus_increments_equal_twin_at_every_degree(lib):
    """Rows whose largest |d x| falls in each truncation band, and on the band edges."""
    rng = np.random.default_rng(9)
    d = 1e-3
    targets = [float(C._K32[k]) * f for k in ("TM1", "TM2", "TM3") for f in (0.999, 1.0, 1.001)] + [0.5, 0.999, 0.9999]
    x = rng.normal(0, 1, (len(targets), 1000)).astype(np.float32)
    for i, tm in enumerate(targets):
        x[i] *= np.float32(tm / d / np.abs(x[i]).max())
    xt = torch.from_numpy(x)
    got = S.softplus_diff_rows(xt, 0.4, 0.4 + d)
    twin = NP._softplus_diff_np(x, 0.4 + d, -d)
    assert got is not None and np.array_equal(got.numpy(), twin)


def test_linear_term_of_the_increment(backend):
    """With v and dv: d (v . dv) + the softplus differences, the linear term summed in float64."""
    g = torch.Generator().manual_seed(10)
    x = torch.randn(40, 300, generator=g) * 4
    v = torch.bernoulli(torch.full((40, 77), 0.4), generator=g)
    dv = torch.randn(77, generator=g)
    b0, b1 = 0.25, 0.2513
    got = S.softplus_diff_rows(x, b0, b1, v=v, dv=dv)
    ref = S.softplus_diff_rows(x, b0, b1) + (b1 - b0) * (v.double() @ dv.double())
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="do not match"):
        S.softplus_diff_rows(x, b0, b1, v=v[:3], dv=dv)


def test_linear_term_equals_twin(lib):
    rng = np.random.default_rng(11)
    x = rng.normal(0, 3, (33, 250)).astype(np.float32)
    v = (rng.random((33, 101)) < 0.5).astype(np.float32)
    dv = rng.normal(0, 2, 101).astype(np.float32)
    out = np.empty(33)
    d = 0.0037
    assert (
        lib.lz_softplus_diff_f32(
            x.ctypes.data, 33, 250, 0.6, -d, v.ctypes.data, 101, dv.ctypes.data, d, out.ctypes.data, 2
        )
        == 0
    )
    assert np.array_equal(out, NP._softplus_diff_np(x, 0.6, -d, v, dv, d))


def test_fused_hidden_step_equals_separate_calls(backend):
    """reweight_and_draw gives the increments and the draws of softplus_diff_rows followed by
    bernoulli_from_logits, including coarse steps, NaN and rows wider than the kernel's blocks."""
    g = torch.Generator().manual_seed(12)
    for rows, cols, b0, b1 in [(500, 500, 0.3, 0.303), (37, 1500, 0.5, 0.5004), (20, 33, 0.0, 1.0), (9, 16, 0.2, 0.21)]:
        x = torch.randn(rows, cols, generator=g) * 4
        x[0, 3] = float("nan")
        v = torch.bernoulli(torch.full((rows, 50), 0.5), generator=g)
        dv = torch.randn(50, generator=g)
        g1, g2 = torch.Generator().manual_seed(rows), torch.Generator().manual_seed(rows)
        inc, h = S.reweight_and_draw(x, b0, b1, g1, v=v, dv=dv)
        inc2 = S.softplus_diff_rows(x, b0, b1, v=v, dv=dv)
        h2 = S.bernoulli_from_logits(x, g2, scale=b1)
        assert (inc is None) == (inc2 is None) and (inc is None or torch.equal(inc, inc2))
        assert torch.equal(torch.nan_to_num(h, nan=-1.0), torch.nan_to_num(h2, nan=-1.0))
        assert torch.equal(torch.randint(0, 2**30, (3,), generator=g1), torch.randint(0, 2**30, (3,), generator=g2))


def test_fused_ais_step_equals_two_calls():
    """AIS through the paths' reweight_and_move gives the log-weights of log_f_ratio + transition."""
    from logzbench import schedules
    from logzbench.estimators import ais
    from logzbench.models import DBM

    paths = [
        random_rbm(30, 20, seed=0, scale=0.5).annealing_path("uniform"),
        DBM.random((10, 8, 6), scale=0.8, generator=torch.Generator().manual_seed(1)).annealing_path("uniform"),
    ]
    for path in paths:
        assert ais._fused_step(path) is not None
        betas = schedules.linear(100)
        fused, _ = ais.run(path, betas, 40, torch.Generator().manual_seed(5))
        g = torch.Generator().manual_seed(5)
        s = ais.init(path, 40, g)
        for k in range(len(betas) - 1):
            log_w = s.log_w + path.log_f_ratio(s.x, float(betas[k]), float(betas[k + 1]))
            s = ais.AISState(path.transition(s.x, float(betas[k + 1]), g) if k + 2 < len(betas) else s.x, log_w)
        assert torch.equal(fused.log_w, s.log_w) and torch.equal(fused.x.v, s.x.v)
