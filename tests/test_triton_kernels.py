"""The Triton kernels of the exact Bernoulli sampler (:mod:`logzbench.kernels._triton`).

Skipped where triton does not import.  With a CUDA device the kernels run compiled on it (the
tests are marked ``cuda``); otherwise in Triton's interpreter on the CPU (``TRITON_INTERPRET=1``
for this module only, with small draws).  Real properties only: bit-for-bit agreement with the
CPU kernel's NumPy twin for the same 64-bit key, units of tiny probability decided by the 52-bit
rounds exactly as derived from the Philox words, thresholds, empirical frequencies within
5 binomial standard errors, tie-path frequencies, determinism and block-size independence, and
the hidden half-step's float64 increments.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

CUDA = torch.cuda.is_available()
DEV = "cuda" if CUDA else "cpu"
if not CUDA and "triton" not in sys.modules:
    # Triton's interpreter needs TRITON_INTERPRET=1 when triton is first imported (its own jitted
    # library functions are made then); the variable is restored at once and set again only while
    # this module's tests run (the interpreter fixture below)
    _old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton  # noqa: F401
    except ImportError:
        pass
    finally:
        if _old is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = _old

pytest.importorskip("triton")

from logzbench.kernels import _constants as C  # noqa: E402
from logzbench.kernels import _numpy as S  # noqa: E402
from logzbench.kernels import _triton as tk  # noqa: E402

pytestmark = [pytest.mark.cuda] if CUDA else []
#: Draws per value in the frequency tests (the interpreter is slow).
N = 1 << 16 if CUDA else 1 << 12
NP = {torch.float32: np.float32, torch.float64: np.float64}
TWO52 = float(2**52)


@pytest.fixture(scope="module", autouse=True)
def interpreter():
    """Without CUDA, the kernels run in Triton's interpreter: TRITON_INTERPRET=1 while this module's
    tests run (the kernels are built at their first use, which happens here)."""
    if CUDA:
        yield
        return
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    built = tk._state["kernels"]
    if not isinstance(tl.sum, InterpretedFunction) or (built is not None and not built["interpret"]):
        pytest.skip("triton was imported in this process without TRITON_INTERPRET=1: no interpreter")
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    yield
    if old is None:
        del os.environ["TRITON_INTERPRET"]
    else:
        os.environ["TRITON_INTERPRET"] = old


def make_key(k0: int, k1: int) -> torch.Tensor:
    """The kernels' int64 key of the CPU kernel's key words (k0, k1), k1 < 2^31."""
    return torch.tensor([k0 | (k1 << 32)], dtype=torch.int64, device=DEV)


_TABLES: dict = {}


def table(dtype) -> torch.Tensor:
    t = _TABLES.get(dtype)
    if t is None:
        t = _TABLES[dtype] = torch.from_numpy(C._table(NP[dtype])).to(DEV)
    return t


def draw(x: torch.Tensor, scale: float, logits: bool, key: torch.Tensor, out=None, block=None) -> torch.Tensor:
    """bernoulli_ into a new tensor (or out); in the interpreter one program for the whole draw
    unless ``block`` says otherwise (each program costs tens of milliseconds there)."""
    if out is None:
        out = torch.empty_like(x)
    if block is None and not CUDA:
        block = min(1 << 17, max(16, tk._next_pow2(x.numel())))
    return tk.bernoulli_(x, scale, logits, key, table(x.dtype) if logits else None, out, _block=block)


def twin(x: np.ndarray, scale: float, logits: bool, k0: int, k1: int) -> np.ndarray:
    """The CPU kernel's NumPy twin on the flat array x."""
    xf = np.ascontiguousarray(x).reshape(-1).copy()
    out = np.empty_like(xf)
    S._bernoulli_np(xf, scale, logits, (k0, k1), out)
    return out.reshape(np.shape(x))


def assert_same(a: np.ndarray, b: np.ndarray):
    assert a.shape == b.shape
    assert np.array_equal(np.isnan(a), np.isnan(b))
    ok = ~np.isnan(a)
    assert np.array_equal(a[ok], b[ok]), f"{int((a[ok] != b[ok]).sum())} of {a.size} differ"


def assert_frequency(hits: int, n: int, p: float):
    """hits of n within 5 binomial standard errors of n p (exact at p = 0 and p = 1)."""
    sd = np.sqrt(n * p * (1.0 - p))
    assert abs(hits - n * p) <= 5.0 * sd + 1e-9, f"{hits} of {n}, expected {n * p:.2f} +- {sd:.2f}"


def logit(p: float) -> float:
    return float(np.log(p) - np.log1p(-p))


# ============================================================================ the draws


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("logits", [True, False])
def test_bit_for_bit_the_cpu_kernels_draws(dtype, logits):
    """Same 64-bit key, same draws as the CPU kernel's NumPy twin: random values, the thresholds and
    their float neighbours (logits) or exact ties (probabilities), and NaN / inf / 0 / 1."""
    k0, k1 = 0x9ABCDEF1, 0x1234567
    rng = np.random.default_rng(1)
    dt = NP[dtype]
    n = (1 << 18) if CUDA else 6000
    if logits:
        x = (rng.normal(size=n) * 5).astype(dt)
        t = C._table(dt)[rng.integers(1, 256, n // 4)]
        x[: n // 4] = t
        x[n // 4 : n // 2] = np.nextafter(t, dt(-np.inf))
        scale = 1.0
    else:
        x = rng.uniform(-0.1, 1.1, n).astype(dt)
        x[: n // 4] = (rng.integers(0, 256, n // 4) + rng.random(n // 4).astype(dt) * (rng.random(n // 4) < 0.5)) / 256
        scale = 256.0
    x[-8:] = [np.nan, np.inf, -np.inf, 0.0, 1.0, -0.0, 1e30, -1e30]
    rng.shuffle(x)
    got = draw(torch.from_numpy(x).to(DEV), scale, logits, make_key(k0, k1)).cpu().numpy()
    assert_same(got, twin(x, scale, logits, k0, k1))
    # a scale other than 1 / 256 (rounded to the dtype, the product too)
    got = draw(torch.from_numpy(x).to(DEV), 0.3, logits, make_key(k0, k1)).cpu().numpy()
    assert_same(got, twin(x, 0.3, logits, k0, k1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("logits", [True, False])
def test_every_unit_tied(dtype, logits):
    """Inputs placed on each unit's own byte, 256 p = r + f (f near 0, near 1 and in between), so that
    (nearly) every unit ties, up to 16 per group of 16: the draws are the CPU twin's bit for bit, and
    the tied units fire with frequency f."""
    k0, k1 = 0x51ED, 0x2718
    n = (1 << 18) if CUDA else 4096
    rng = np.random.default_rng(2)
    r = S._random_bytes_np(n, k0, k1).astype(np.float64)
    f = rng.choice([1e-3, 0.03, 0.25, 0.5, 0.75, 0.97, 0.999], n)
    p = (r + f) / 256.0
    x = (np.log(p) - np.log1p(-p) if logits else p).astype(NP[dtype])
    scale = 1.0 if logits else 256.0
    got = draw(torch.from_numpy(x).to(DEV), scale, logits, make_key(k0, k1)).cpu().numpy()
    assert_same(got, twin(x, scale, logits, k0, k1))
    zb = x.astype(np.float64)
    fr = S._tie_fraction_np(zb, r, logits) if logits else zb * 256.0 - r
    tied = (fr > 0.0) & (fr < 1.0)
    assert tied.mean() > 0.99
    for fi in np.unique(f):
        sel = tied & (f == fi)
        assert_frequency(int(got[sel].sum()), int(sel.sum()), float(fr[sel].mean()))


# a key under which unit 15's byte is 0 and its first 52-bit refinement integer K is below 2^32
# (found by a search over k0): that unit ties for every p < 1/256 and fires exactly when
# K < floor(2^60 p), i.e. for p >= (K + 1) / 2^60 = 1.76e-9 and not below
TINY_KEY, TINY_UNIT = (38938784, 0x00C0FFEE), 15


def _tiny_key_words():
    k0, k1 = TINY_KEY
    r = int(S._random_bytes_np(16, k0, k1)[TINY_UNIT])
    ks = []
    for s in (1, 2):
        w = S._philox_np(np.array([TINY_UNIT], np.uint64), s, k0, k1)[0].astype(np.uint64)
        ks.append(int((w[0] | (w[1] << np.uint64(32))) >> np.uint64(12)))
    return r, ks[0], ks[1]


def test_the_tiny_probability_key_is_as_described():
    r, K, K2 = _tiny_key_words()
    assert r == 0 and K < 2**32


@pytest.mark.parametrize("dtype, logits", [(torch.float64, False), (torch.float64, True), (torch.float32, True)])
def test_tiny_probabilities_are_decided_exactly(dtype, logits):
    """p around 1e-9 (below float32 uniform resolution 2^-24 = 6e-8): the unit with byte 0 fires
    exactly when its 52-bit integers say so, including a second round on an exact first-round tie."""
    r, K, K2 = _tiny_key_words()
    cases = []  # (probability, logit, expected)
    if not logits:
        cases += [
            ((K + 1) / 2**60, None, 1.0),
            (K / 2**60, None, 0.0),
            ((K - 1) / 2**60, None, 0.0),
            ((K + 2**20) / 2**60, None, 1.0),
        ]
        for phi in (0.25, 0.5, 0.75):  # floor(2^52 f) = K: a second round compares K2 with phi 2^52
            cases.append(((K + phi) / 2**60, None, float(K2 < phi * TWO52)))
    elif dtype == torch.float64:
        cases += [
            (None, logit((K + 2) / 2**60), 1.0),
            (None, logit((K - 1) / 2**60), 0.0),
            (None, -30.0, 0.0),
            (None, logit(1e-9), 0.0),
            (None, logit(2e-9), 1.0),
        ]
    else:  # float32 logits: the float32 neighbours around the boundary, far from it in units of K
        z = np.nextafter(np.float32(logit(K / 2**60)), np.float32(-np.inf))
        for _ in range(3):
            f = S._tie_fraction_np(np.array([z], np.float64), np.array([0.0]), True)[0]
            assert abs(f * TWO52 - K) > 100  # decided in the first round, whatever the sigmoid's last bits
            cases.append((None, float(z), float(np.floor(f * TWO52) > K)))
            z = np.nextafter(z, np.float32(np.inf))
        assert {c[2] for c in cases} == {0.0, 1.0}
    k0, k1 = TINY_KEY
    key = make_key(k0, k1)
    for p, z, expected in cases:
        x = torch.zeros(16, dtype=dtype, device=DEV)
        x[TINY_UNIT] = z if logits else p
        if logits:
            x[:TINY_UNIT] = -1e4  # never fire
        out = draw(x, 1.0 if logits else 256.0, logits, key)
        assert float(out[TINY_UNIT]) == expected, (p, z)
        assert_same(out.cpu().numpy(), twin(x.cpu().numpy(), 1.0 if logits else 256.0, logits, k0, k1))
        assert float(out[:TINY_UNIT].sum()) == 0.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_values_on_thresholds_behave_as_derived(dtype):
    """z = T[k] fires exactly when the byte r < k (r = k ties with f = 256 sigmoid(T[k]) - k < 1e-4);
    its float below, T[k]^-, fires when r < k - 1 and ties at r = k - 1 with f > 1 - 1e-4."""
    k0, k1 = 77, 1234
    t = C._table(NP[dtype])
    reps = 64 if CUDA else 16
    k = np.repeat(np.arange(1, 256), reps)
    for x, tie_byte, tie_lo, tie_hi in [(t[k], k, 0.0, 1e-4), (np.nextafter(t[k], -np.inf), k - 1, 1 - 1e-4, 1.0)]:
        x = x.astype(NP[dtype])
        rbytes = S._random_bytes_np(x.size, k0, k1).astype(np.int64)
        out = draw(torch.from_numpy(x).to(DEV), 1.0, True, make_key(k0, k1)).cpu().numpy()
        tie = rbytes == tie_byte
        assert np.array_equal(out[~tie], (rbytes[~tie] < tie_byte[~tie]).astype(out.dtype))
        f = S._tie_fraction_np(x[tie].astype(np.float64), rbytes[tie].astype(np.float64), True)
        assert ((f >= tie_lo) & (f <= tie_hi)).all()
        assert np.array_equal(out[tie], twin(x, 1.0, True, k0, k1)[tie])
        if tie_lo == 0.0:
            assert out[tie].sum() <= 1
        else:
            assert out[tie].sum() >= tie.sum() - 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1.0, 0.37])
def test_logit_frequencies(dtype, scale):
    z = np.arange(-8, 9, dtype=np.float64)
    x = torch.from_numpy(np.repeat(z / scale, N).astype(NP[dtype])).to(DEV)
    out = draw(x, scale, True, make_key(31337, 4242)).cpu().numpy().reshape(z.size, N)
    xs = x.cpu().numpy().reshape(z.size, N)[:, 0]
    for i in range(z.size):
        zb = float(NP[dtype](xs[i] * NP[dtype](scale)))
        assert_frequency(int(out[i].sum()), N, 1.0 / (1.0 + np.exp(-zb)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_probability_frequencies(dtype):
    ps = [0.0, 1.0, 1e-3, 0.5, 255 / 256, 0.3, 1 / 3, 0.999]
    x = torch.tensor(np.repeat(ps, N), dtype=dtype, device=DEV)
    out = draw(x, 256.0, False, make_key(2024, 11)).cpu().numpy().reshape(len(ps), N)
    for i, p in enumerate(ps):
        assert_frequency(int(out[i].sum()), N, float(NP[dtype](p)))
    assert out[0].sum() == 0 and out[1].sum() == N


@pytest.mark.parametrize("c, f", [(100, 2.0**-40), (37, 0.5), (200, 0.25), (0, 1.0 - 2.0**-52), (255, 0.75)])
def test_tie_path_frequencies(c, f):
    """p = (c + f) / 256: units whose byte is c tie and fire with probability f; the others fire
    exactly when their byte is below c."""
    k0, k1 = 99 + c, 7
    n = (1 << 20) if CUDA else (1 << 15)
    p = (c + f) / 256.0
    assert (p * 256.0 - c) == f  # exact in float64
    x = torch.full((n,), p, dtype=torch.float64, device=DEV)
    out = draw(x, 256.0, False, make_key(k0, k1)).cpu().numpy()
    r = S._random_bytes_np(n, k0, k1).astype(np.int64)
    tie = r == c
    assert np.array_equal(out[~tie], (r[~tie] < c).astype(np.float64))
    assert_frequency(int(out[tie].sum()), int(tie.sum()), f)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_special_values(dtype):
    n = 512
    key = make_key(5, 6)
    z = torch.tensor([float("nan"), float("inf"), -float("inf"), 1e4, -1e4, 100.0, -100.0], dtype=dtype)
    out = draw(z.repeat_interleave(n).to(DEV), 1.0, True, key).cpu().reshape(-1, n)
    assert out[0].isnan().all()
    assert (out[1] == 1).all() and (out[2] == 0).all() and (out[3] == 1).all() and (out[4] == 0).all()
    assert (out[5] == 1).all() and (out[6] == 0).all()  # 1 - sigmoid(100) = 3.7e-44
    p = torch.tensor([float("nan"), 0.0, 1.0, -0.5, 1.5, -float("inf"), float("inf"), 0.0], dtype=dtype)
    p[-1] = -0.0
    out = draw(p.repeat_interleave(n).to(DEV), 256.0, False, key).cpu().reshape(-1, n)
    assert out[0].isnan().all()
    assert (out[1] == 0).all() and (out[2] == 1).all() and (out[3] == 0).all() and (out[4] == 1).all()
    assert (out[5] == 0).all() and (out[6] == 1).all() and (out[7] == 0).all()


def test_same_key_same_draws_other_key_other_draws():
    x = torch.rand(5000, device=DEV)
    a = draw(x, 256.0, False, make_key(1, 2))
    b = draw(x, 256.0, False, make_key(1, 2))
    c = draw(x, 256.0, False, make_key(1, 3))
    d = draw(x, 256.0, False, make_key(2, 2))
    assert torch.equal(a, b)
    assert not torch.equal(a, c) and not torch.equal(a, d)
    assert (a != c).float().mean() > 0.2


@pytest.mark.parametrize("logits", [True, False])
def test_independent_of_the_block_size(logits):
    g = torch.Generator().manual_seed(3)
    n = 100_000 if CUDA else 1000
    x = (
        torch.randn(n, generator=g, dtype=torch.float64) * 4
        if logits
        else torch.rand(n, generator=g, dtype=torch.float64)
    ).to(DEV)
    key = make_key(123, 456)
    ref = draw(x, 1.0 if logits else 256.0, logits, key).cpu()
    blocks = [16, 256, 4096, None] if CUDA else [32, 256]
    for block in blocks:
        got = tk.bernoulli_(
            x,
            1.0 if logits else 256.0,
            logits,
            key,
            table(x.dtype) if logits else None,
            torch.empty_like(x),
            _block=block,
        ).cpu()
        assert torch.equal(got, ref), block


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_in_place_and_any_shape(dtype):
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(3, 5, 7, generator=g) * 3).to(dtype).to(DEV)
    key = make_key(8, 9)
    ref = draw(x, 0.9, True, key)
    assert ref.shape == x.shape
    assert_same(ref.cpu().numpy(), twin(x.cpu().numpy(), 0.9, True, 8, 9))
    y = x.clone()
    assert draw(y, 0.9, True, key, out=y) is y
    assert torch.equal(y, ref)
    for n in (1, 17):
        p = torch.rand(n, generator=g, dtype=dtype).to(DEV)
        assert_same(draw(p, 256.0, False, key).cpu().numpy(), twin(p.cpu().numpy(), 256.0, False, 8, 9))
    assert draw(torch.empty(0, dtype=dtype, device=DEV), 1.0, True, key).numel() == 0


def test_rejects_what_it_cannot_address():
    big = torch.empty(2**31, device="meta")
    with pytest.raises(ValueError):
        tk.bernoulli_(big, 1.0, True, torch.zeros(1, dtype=torch.int64), None, big)
    with pytest.raises(ValueError):
        tk.hidden_step(torch.empty(2**16, 2**15, device="meta"), 0.0, 1.0, None, None, None, None)
    x = torch.zeros(4, 4)
    with pytest.raises(ValueError):
        tk.bernoulli_(x.t(), 1.0, True, make_key(1, 1), table(torch.float32), torch.empty(4, 4))
    with pytest.raises(ValueError):
        tk.bernoulli_(x.half(), 1.0, True, make_key(1, 1), table(torch.float32), x.half())


# ============================================================================ the hidden half-step


def _reference_increment(x, bf, bt, v=None, dv=None):
    xd = x.double()
    sp = torch.nn.functional.softplus
    inc = (sp(bt * xd) - sp(bf * xd)).sum(dim=1)
    if v is not None:
        inc = inc + (bt - bf) * (v.double() @ dv.double())
    return inc


@pytest.mark.parametrize(
    "rows, cols, nv, block", [(6, 50, 13, None), (4, 300, 0, 64), (5, 3, 2000, None), (3, 0, 7, None)]
)
@pytest.mark.parametrize("bf, bt", [(0.3, 0.3125), (0.0, 1e-3), (0.9, 1.0)])
def test_hidden_step_increments_match_float64(rows, cols, nv, block, bf, bt):
    g = torch.Generator().manual_seed(rows * 1000 + cols)
    x = torch.randn(rows, cols, generator=g) * 6
    if cols >= 4:
        x[0, :4] = torch.tensor([80.0, -80.0, 0.0, 1e-30])
    v = torch.bernoulli(torch.full((rows, nv), 0.5), generator=g) if nv else None
    dv = torch.randn(nv, generator=g) if nv else None

    def to(t):
        return None if t is None else t.to(DEV)

    inc, h = tk.hidden_step(to(x), bf, bt, to(v), to(dv), make_key(10, 20), table(torch.float32), _block=block)
    assert inc.dtype == torch.float64 and inc.shape == (rows,) and h.shape == (rows, cols)
    ref = _reference_increment(x, bf, bt, v, dv)
    torch.testing.assert_close(inc.cpu(), ref, rtol=1e-12, atol=1e-12 * max(cols, 1))


def test_hidden_step_draws_are_the_logit_draws_at_beta_to():
    """h is bernoulli_(x, beta_to, logits) with the same key (unit i of the flat tensor), so the CPU
    kernel's draws too, also when a row spans several column blocks and starts mid-group."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(7, 37, generator=g) * 8
    key = make_key(11, 12)
    for block in (None, 16):
        _, h = tk.hidden_step(x.to(DEV), 0.2, 0.7, None, None, key, table(torch.float32), _block=block)
        assert torch.equal(h, draw(x.to(DEV), 0.7, True, key))
        assert_same(h.cpu().numpy(), twin(x.numpy(), 0.7, True, 11, 12))


def test_hidden_step_frequencies():
    z = torch.linspace(-4.0, 4.0, 9)
    rows, m = (N // 16, 16) if CUDA else (4, N // 4)
    x = z.repeat_interleave(m).repeat(rows, 1).contiguous()  # (rows, 9 m): each z in m columns
    bt = 0.8
    _, h = tk.hidden_step(
        x.to(DEV), 0.5, bt, None, None, make_key(3, 4), table(torch.float32), _block=None if CUDA else 1 << 14
    )
    hits = h.cpu().reshape(rows, 9, m).sum(dim=(0, 2)).numpy()
    for j in range(9):
        zb = float(np.float32(z[j].item()) * np.float32(bt))
        assert_frequency(int(hits[j]), rows * m, 1.0 / (1.0 + np.exp(-zb)))


# ============================================================================ availability


def test_available():
    assert tk.available(DEV)
    assert not tk.available("meta")


def test_imports_without_triton():
    code = (
        "import sys; sys.modules['triton'] = None\n"
        "import logzbench.kernels._triton as tk\n"
        "assert not tk.available('cuda') and not tk.available('cpu')\n"
    )
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(tk.__file__))))
    env = dict(
        os.environ,
        TRITON_INTERPRET="1",
        PYTHONPATH=os.pathsep.join([src] + [p for p in [os.environ.get("PYTHONPATH")] if p]),
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
