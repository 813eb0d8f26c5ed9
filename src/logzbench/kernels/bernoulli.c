/* The exact Bernoulli sampler's CPU kernel: Philox4x32-10 random bytes, the byte-and-tie decision
   rule of Bernoulli draws from probabilities or logits, and the fused hidden half of an RBM path's
   AIS step (the log-weight increment and the hidden draws in one pass).  The decision rule and the
   layout of the random bits are described in logzbench/kernels/__init__.py.

   Built at installation into a shared library (setup.py, logzbench/kernels/_build.py) and loaded
   with ctypes (logzbench/kernels/_native.py), which checks it against the NumPy twin
   (logzbench/kernels/_numpy.py) first.  The constants below are the twin's (_constants.py: _K32,
   _K64, the Philox constants and CHUNK) as exact hex literals; tests/test_sampling.py checks that
   the two agree. */

/* ------------------------------------------------------------------ constants */

#define LOG2E (0x1.7154760000000p+0f)
#define EXP_C1 (0x1.6300000000000p-1f)
#define EXP_C2 (-0x1.bd01060000000p-13f)
#define EXP_P0 (0x1.a0d2ce0000000p-13f)
#define EXP_P1 (0x1.6e879c0000000p-10f)
#define EXP_P2 (0x1.1112100000000p-7f)
#define EXP_P3 (0x1.5553820000000p-5f)
#define EXP_P4 (0x1.5555540000000p-3f)
#define EXP_P5 (0x1.0000000000000p-1f)
#define EXP_LO (-0x1.5800000000000p+6f)
#define SCR_Q1 (0x1.63e6540000000p-1f)
#define SCR_Q2 (0x1.d239e20000000p-3f)
#define SCR_Q3 (0x1.3ba4f00000000p-4f)
#define DELTA (0x1.0000000000000p-6f)
#define EM2 (0x1.0000000000000p-1f)
#define EM3 (0x1.5555560000000p-3f)
#define EM4 (0x1.5555560000000p-5f)
#define EM5 (0x1.1111120000000p-7f)
#define EM6 (0x1.6c16c20000000p-10f)
#define EM7 (0x1.a01a020000000p-13f)
#define EM8 (0x1.a01a020000000p-16f)
#define EM9 (0x1.71de3a0000000p-19f)
#define EM10 (0x1.27e4fc0000000p-22f)
#define AT3 (0x1.5555560000000p-2f)
#define AT5 (0x1.99999a0000000p-3f)
#define AT7 (0x1.24924a0000000p-3f)
#define AT9 (0x1.c71c720000000p-4f)
#define AT11 (0x1.745d180000000p-4f)
#define AT13 (0x1.3b13b20000000p-4f)
#define AT15 (0x1.1111120000000p-4f)
#define AT17 (0x1.e1e1e20000000p-5f)
#define AT19 (0x1.af286c0000000p-5f)
#define AT21 (0x1.8618620000000p-5f)
#define TM1 (0x1.eb851e0000000p-6f)
#define TM2 (0x1.99999a0000000p-4f)
#define TM3 (0x1.0000000000000p-2f)
#define LOG2E64 (0x1.71547652b82fep+0)
#define LN2HI64 (0x1.62e42fee00000p-1)
#define LN2LO64 (0x1.a39ef35793c76p-33)
#define EX2 (0x1.0000000000000p-1)
#define EX3 (0x1.5555555555555p-3)
#define EX4 (0x1.5555555555555p-5)
#define EX5 (0x1.1111111111111p-7)
#define EX6 (0x1.6c16c16c16c17p-10)
#define EX7 (0x1.a01a01a01a01ap-13)
#define EX8 (0x1.a01a01a01a01ap-16)
#define EX9 (0x1.71de3a556c734p-19)
#define EX10 (0x1.27e4fb7789f5cp-22)
#define EX11 (0x1.ae64567f544e4p-26)
#define EX12 (0x1.1eed8eff8d898p-29)
#define EX13 (0x1.6124613a86d09p-33)
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u
#define CHUNK 4096


#include <stdint.h>
#include <string.h>
#include <math.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* Every floating-point operation below is one IEEE operation (no fast-math, no contraction into
   fused multiply-adds), so the NumPy twin (logzbench/kernels/_numpy.py) reproduces each result bit for
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

/* Read by the loader as data (none of this library's code runs before they are checked):
   lz_build_cpu, the CPU flags of the machine that built this library with -march=native (empty for a
   portable build), so that a CPU lacking one of them never calls into it; lz_source_digest, the
   digest of this file when it was built, so that an in-place build older than the source is not
   used. */
#ifndef LZ_BUILD_CPU
#define LZ_BUILD_CPU ""
#endif
#ifndef LZ_SOURCE_DIGEST
#define LZ_SOURCE_DIGEST ""
#endif
const char lz_build_cpu[] = LZ_BUILD_CPU;
const char lz_source_digest[] = LZ_SOURCE_DIGEST;
