/* quant.c - Q8_0 / Q4_1 / F16 / BF16 weight rows as stored (formats in quant.h): quantizers as
 * llama.cpp's reference ones, integer dot products against 8-bit activation blocks and half ×
 * f32 dot products (scalar and AVX2), the matrix-vector product of a decode step and the tiled
 * f32 product of a prefill. */
#include "nn/quant.h"

#include <cblas.h>
#include <glib.h>
#include <math.h>
#include <string.h>

#include "nn/half.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_X86 1
#endif

/* 8-bit activation blocks: Q8_0 (against Q8_0 weights) or Q8_1 (against Q4_1: `s` = d·Σq lets
 * the weights' offset m enter as one product per block). d and s hold the values of llama.cpp's
 * f16 fields, kept as floats: the activations serve every row of the matrix. */
typedef struct {
    float d, s;
    int8_t qs[CL_QUANT_BLOCK];
} BlockQ8;

/* the kernels below read these offsets literally */
_Static_assert(CL_QUANT_Q8_0_BYTES == 2 + CL_QUANT_BLOCK, "Q8_0: f16 d + 32 int8");
_Static_assert(CL_QUANT_Q4_1_BYTES == 4 + CL_QUANT_BLOCK / 2, "Q4_1: f16 d, f16 m + 16 bytes");

/* rows a four-row kernel and an x4 quad take */
#define ROWS4 4

static const size_t block_bytes[CL_QUANT_N_TYPES] = {
    [CL_QUANT_Q8_0] = CL_QUANT_Q8_0_BYTES,
    [CL_QUANT_Q4_1] = CL_QUANT_Q4_1_BYTES,
    [CL_QUANT_F16] = CL_QUANT_HALF_BYTES,
    [CL_QUANT_BF16] = CL_QUANT_HALF_BYTES,
};

const char *cl_quant_type_name(ClQuantType t)
{
    static const char *const names[CL_QUANT_N_TYPES] = { "Q8_0", "Q4_1", "F16", "BF16" };
    return (unsigned)t < CL_QUANT_N_TYPES ? names[t] : "invalid";
}

size_t cl_quant_row_bytes(ClQuantType t, int k)
{
    return (size_t)(k / CL_QUANT_BLOCK) * block_bytes[t];
}

static inline float f16(const uint8_t *p)
{
    return cl_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

static inline void put16(uint8_t *p, uint16_t h)
{
    p[0] = (uint8_t)(h & 255), p[1] = (uint8_t)(h >> 8);
}

/* ---- quantize / dequantize ------------------------------------------------------------------ */

/* One block of 32 to 8 bits, d = max|x| / 127; the sum of the q's in *sum. */
static void quantize_q8_block(const float *x, float *d_out, int8_t *q, int *sum)
{
    float amax = 0;
    for (int j = 0; j < CL_QUANT_BLOCK; j++) { /* not fmaxf: a libm call without -ffast-math */
        float a = fabsf(x[j]);
        amax = a > amax ? a : amax;
    }
    float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    int s = 0;
    for (int j = 0; j < CL_QUANT_BLOCK; j++) {
        q[j] = (int8_t)roundf(x[j] * id);
        s += q[j];
    }
    *d_out = d;
    *sum = s;
}

static void quantize_q4_1_block(const float *x, uint8_t *b)
{
    float lo = x[0], hi = x[0];
    for (int j = 1; j < CL_QUANT_BLOCK; j++)
        lo = fminf(lo, x[j]), hi = fmaxf(hi, x[j]);
    float d = (hi - lo) / 15.0f, id = d != 0 ? 1.0f / d : 0.0f;
    put16(b, cl_f32_to_f16(d));
    put16(b + 2, cl_f32_to_f16(lo));
    for (int j = 0; j < 16; j++) {
        int a = (int)(int8_t)((x[j] - lo) * id + 0.5f),
            c = (int)(int8_t)((x[j + 16] - lo) * id + 0.5f);
        b[4 + j] = (uint8_t)(MIN(15, a) | MIN(15, c) << 4);
    }
}

void cl_quantize_rows(ClQuantType t, const float *x, void *out, int n, int k)
{
    uint8_t *o = out;
    if (!CL_QUANT_IS_BLOCK(t)) { /* halves, little-endian */
        for (size_t i = 0; i < (size_t)n * (size_t)k; i++)
            put16(o + 2 * i, t == CL_QUANT_F16 ? cl_f32_to_f16(x[i]) : cl_f32_to_bf16(x[i]));
        return;
    }
    for (size_t b = 0; b < (size_t)n * (size_t)(k / CL_QUANT_BLOCK); b++) {
        const float *xb = x + b * CL_QUANT_BLOCK;
        uint8_t *ob = o + b * block_bytes[t];
        if (t == CL_QUANT_Q8_0) {
            float d;
            int s;
            quantize_q8_block(xb, &d, (int8_t *)(ob + 2), &s);
            put16(ob, cl_f32_to_f16(d));
        } else {
            quantize_q4_1_block(xb, ob);
        }
    }
}

static inline float bf16(const uint8_t *p)
{
    return cl_bf16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

void cl_dequantize_rows(ClQuantType t, const void *q, float *out, int n, int k)
{
    const uint8_t *p = q;
    if (!CL_QUANT_IS_BLOCK(t)) {
        for (size_t i = 0; i < (size_t)n * (size_t)k; i++)
            out[i] = t == CL_QUANT_F16 ? f16(p + 2 * i) : bf16(p + 2 * i);
        return;
    }
    for (size_t b = 0; b < (size_t)n * (size_t)(k / CL_QUANT_BLOCK); b++) {
        const uint8_t *pb = p + b * block_bytes[t];
        float *y = out + b * CL_QUANT_BLOCK;
        float d = f16(pb);
        if (t == CL_QUANT_Q8_0) {
            for (int j = 0; j < CL_QUANT_BLOCK; j++)
                y[j] = d * (float)(int8_t)pb[2 + j];
        } else {
            float m = f16(pb + 2);
            for (int j = 0; j < 16; j++) {
                y[j] = d * (float)(pb[4 + j] & 15) + m;
                y[j + 16] = d * (float)(pb[4 + j] >> 4) + m;
            }
        }
    }
}

/* ---- four rows interleaved ------------------------------------------------------------------ */

/* Where row r's block b puts its quants and its scale bytes within a quad (quant.h) */
typedef struct {
    size_t quant_bytes, scale_bytes, quant_off, scale_off; /* per block and row */
} QuadLayout;

static QuadLayout quad_layout(ClQuantType t)
{
    if (t == CL_QUANT_Q8_0)
        return (QuadLayout){ 32, 2, 2, 0 };
    return (QuadLayout){ 16, 4, 4, 0 }; /* Q4_1: d and m, then 16 bytes of nibbles */
}

static void move_quad(ClQuantType t, uint8_t *rows, uint8_t *quad, int nb, gboolean pack)
{
    QuadLayout L = quad_layout(t);
    size_t rb = (size_t)nb * block_bytes[t];
    uint8_t *scales = quad + (size_t)nb * ROWS4 * L.quant_bytes;
    for (int r = 0; r < ROWS4; r++)
        for (int b = 0; b < nb; b++) {
            uint8_t *blk = rows + r * rb + (size_t)b * block_bytes[t];
            uint8_t *q = quad + ((size_t)b * ROWS4 + r) * L.quant_bytes;
            uint8_t *sc = scales + ((size_t)b * ROWS4 + r) * L.scale_bytes;
            if (pack) {
                memcpy(q, blk + L.quant_off, L.quant_bytes);
                memcpy(sc, blk + L.scale_off, L.scale_bytes);
            } else {
                memcpy(blk + L.quant_off, q, L.quant_bytes);
                memcpy(blk + L.scale_off, sc, L.scale_bytes);
            }
        }
}

/* m rows: m/4 quads, then the last m % 4 rows as they are */
static void move_rows(ClQuantType t, uint8_t *rows, uint8_t *x4, int m, int k, gboolean pack)
{
    size_t rb = cl_quant_row_bytes(t, k), quad = ROWS4 * rb;
    int quads = m / ROWS4;
    for (int i = 0; i < quads; i++)
        move_quad(t, rows + i * quad, x4 + i * quad, k / CL_QUANT_BLOCK, pack);
    size_t tail = (size_t)(m - quads * ROWS4) * rb;
    if (tail)
        memmove(pack ? x4 + quads * quad : rows + quads * quad,
                pack ? rows + quads * quad : x4 + quads * quad, tail);
}

void cl_quant_pack4(ClQuantType t, const void *rows, void *x4, int m, int k)
{
    g_return_if_fail(CL_QUANT_IS_BLOCK(t) && m >= 0 && k % CL_QUANT_BLOCK == 0);
    move_rows(t, (uint8_t *)rows, x4, m, k, TRUE);
}

void cl_quant_unpack4(ClQuantType t, const void *x4, void *rows, int m, int k)
{
    g_return_if_fail(CL_QUANT_IS_BLOCK(t) && m >= 0 && k % CL_QUANT_BLOCK == 0);
    move_rows(t, rows, (uint8_t *)x4, m, k, FALSE);
}

/* rows [r0, r0 + n) of an x4 matrix of m rows (r0 a multiple of 4), as f32 */
static void dequantize_x4_rows(ClQuantType t, const uint8_t *x4, int r0, int n, int m, int k,
                               float *out)
{
    size_t rb = cl_quant_row_bytes(t, k), quad = ROWS4 * rb;
    g_autofree uint8_t *rows = g_malloc(quad);
    int i = r0, quad_end = m / ROWS4 * ROWS4;
    for (; i + ROWS4 <= MIN(r0 + n, quad_end); i += ROWS4) {
        cl_quant_unpack4(t, x4 + (size_t)i * rb, rows, ROWS4, k);
        cl_dequantize_rows(t, rows, out + (size_t)(i - r0) * k, ROWS4, k);
    }
    if (i < r0 + n) /* the plain tail */
        cl_dequantize_rows(t, x4 + (size_t)i * rb, out + (size_t)(i - r0) * k, r0 + n - i, k);
}

/* x (k values) to 8-bit blocks */
static void quantize_activations_scalar(const float *x, int k, BlockQ8 *out)
{
    for (int b = 0; b < k / CL_QUANT_BLOCK; b++) {
        float d;
        int s;
        quantize_q8_block(x + b * CL_QUANT_BLOCK, &d, out[b].qs, &s);
        out[b].d = cl_f16_to_f32(cl_f32_to_f16(d));
        out[b].s = cl_f16_to_f32(cl_f32_to_f16((float)s * d));
    }
}

#ifdef HAVE_X86
/* The same blocks as the scalar quantizer, bit for bit: the same max, scale and products, and
 * roundf's halves away from zero (truncate, then one step outwards where the rest is ≥ ½) rather
 * than the vector unit's halves to even. A decode step quantizes every product's input, a few
 * thousand values a layer: the scalar roundf calls were a few per cent of the step. */
__attribute__((target("avx2,fma,f16c"))) static void quantize_activations_avx2(const float *x,
                                                                               int k, BlockQ8 *out)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    for (int b = 0; b < k / CL_QUANT_BLOCK; b++) {
        const float *xb = x + b * CL_QUANT_BLOCK;
        __m256 v[4], m = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(xb + 8 * i);
            m = _mm256_max_ps(_mm256_and_ps(v[i], absmask), m); /* a NaN lane keeps m */
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        __m256 idv = _mm256_set1_ps(id);
        __m256i q[4], sum = _mm256_setzero_si256();
        for (int i = 0; i < 4; i++) {
            __m256 p = _mm256_mul_ps(v[i], idv);
            __m256 t = _mm256_round_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            __m256 out_step =
                _mm256_cmp_ps(_mm256_and_ps(_mm256_sub_ps(p, t), absmask), half, _CMP_GE_OQ);
            t = _mm256_add_ps(t,
                              _mm256_and_ps(out_step, _mm256_or_ps(one, _mm256_and_ps(p, sign))));
            q[i] = _mm256_cvttps_epi32(t);
            sum = _mm256_add_epi32(sum, q[i]);
        }
        __m256i q16 =
            _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        /* packs works within 128-bit lanes: the 32-bit groups back in order */
        q16 = _mm256_permutevar8x32_epi32(q16, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)out[b].qs, q16);
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
        int s_int = _mm_cvtsi128_si32(s4);
        out[b].d = cl_f16_to_f32(cl_f32_to_f16(d));
        out[b].s = cl_f16_to_f32(cl_f32_to_f16((float)s_int * d));
    }
}
#endif

typedef void (*QuantizeFn)(const float *x, int k, BlockQ8 *out);
static QuantizeFn quantize_activations = quantize_activations_scalar;

/* ---- dot products of one weight row with the activation blocks ------------------------------ */

typedef float (*DotFn)(const uint8_t *w, const BlockQ8 *x, int nb);

/* The AVX2 kernels take four rows at a time against the same activation block: the activations
 * are loaded once and the four rows' chains run side by side. */

static float dot_q8_0_scalar(const uint8_t *w, const BlockQ8 *x, int nb)
{
    float sum = 0;
    for (int b = 0; b < nb; b++, w += 34) {
        int s = 0;
        for (int j = 0; j < CL_QUANT_BLOCK; j++)
            s += (int)(int8_t)w[2 + j] * x[b].qs[j];
        sum += (float)s * (f16(w) * x[b].d);
    }
    return sum;
}

static float dot_q4_1_scalar(const uint8_t *w, const BlockQ8 *x, int nb)
{
    float sum = 0;
    for (int b = 0; b < nb; b++, w += 20) {
        int s = 0;
        for (int j = 0; j < 16; j++)
            s += (w[4 + j] & 15) * x[b].qs[j] + (w[4 + j] >> 4) * x[b].qs[j + 16];
        sum += (f16(w) * x[b].d) * (float)s + f16(w + 2) * x[b].s;
    }
    return sum;
}

/* Four rows interleaved (x4): each row summed as the one-row kernels sum it */
static void dot4_q8_0_x4_scalar(const uint8_t *w, const BlockQ8 *x, int nb, float *y)
{
    const uint8_t *sc = w + (size_t)nb * 128;
    for (int r = 0; r < ROWS4; r++) {
        float sum = 0;
        for (int b = 0; b < nb; b++) {
            const int8_t *q = (const int8_t *)(w + (size_t)b * 128 + 32 * r);
            int s = 0;
            for (int j = 0; j < CL_QUANT_BLOCK; j++)
                s += (int)q[j] * x[b].qs[j];
            sum += (float)s * (f16(sc + 8 * b + 2 * r) * x[b].d);
        }
        y[r] = sum;
    }
}

static void dot4_q4_1_x4_scalar(const uint8_t *w, const BlockQ8 *x, int nb, float *y)
{
    const uint8_t *dmp = w + (size_t)nb * 64;
    for (int r = 0; r < ROWS4; r++) {
        float sum = 0;
        for (int b = 0; b < nb; b++) {
            const uint8_t *n = w + (size_t)b * 64 + 16 * r, *dm = dmp + 16 * b + 4 * r;
            int s = 0;
            for (int j = 0; j < 16; j++)
                s += (n[j] & 15) * x[b].qs[j] + (n[j] >> 4) * x[b].qs[j + 16];
            sum += (f16(dm) * x[b].d) * (float)s + f16(dm + 2) * x[b].s;
        }
        y[r] = sum;
    }
}

#ifdef HAVE_X86
__attribute__((target("avx2,fma,f16c"))) static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Four rows' integer block sums folded into one vector: lanes [r0 r1 r2 r3 | r0 r1 r2 r3] hold
 * each row's sum over the block's low and high sixteen values, so one conversion and one fused
 * multiply-add with the four rows' scales serve the four rows. */
__attribute__((target("avx2,fma,f16c"))) static inline __m256i fold4(__m256i s0, __m256i s1,
                                                                     __m256i s2, __m256i s3)
{
    return _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
}

/* |w| · (x with w's sign) — maddubs takes an unsigned and a signed operand — in eight int32 */
__attribute__((target("avx2,fma,f16c"))) static inline __m256i q8_block_isums(__m256i qw,
                                                                              __m256i qx)
{
    __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qx, qw));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

__attribute__((target("avx2,fma,f16c"))) static float dot_q8_0_avx2(const uint8_t *w,
                                                                    const BlockQ8 *x, int nb)
{
    __m256 acc = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++, w += 34) {
        __m256 p = _mm256_cvtepi32_ps(q8_block_isums(_mm256_loadu_si256((const __m256i *)(w + 2)),
                                                     _mm256_loadu_si256((const __m256i *)x[b].qs)));
        float d = _cvtsh_ss((uint16_t)(w[0] | w[1] << 8)) * x[b].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), p, acc);
    }
    return hsum8(acc);
}

static inline uint16_t le16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

__attribute__((target("avx2,fma,f16c"))) static void
dot4_q8_0_avx2(const uint8_t *w, size_t rb, const BlockQ8 *x, int nb, float *y)
{
    __m256 acc = _mm256_setzero_ps();
    const uint8_t *w0 = w, *w1 = w + rb, *w2 = w + 2 * rb, *w3 = w + 3 * rb;
    for (int b = 0; b < nb; b++, w0 += 34, w1 += 34, w2 += 34, w3 += 34) {
        __m256i qx = _mm256_loadu_si256((const __m256i *)x[b].qs);
        __m256i h = fold4(q8_block_isums(_mm256_loadu_si256((const __m256i *)(w0 + 2)), qx),
                          q8_block_isums(_mm256_loadu_si256((const __m256i *)(w1 + 2)), qx),
                          q8_block_isums(_mm256_loadu_si256((const __m256i *)(w2 + 2)), qx),
                          q8_block_isums(_mm256_loadu_si256((const __m256i *)(w3 + 2)), qx));
        __m128 d4 =
            _mm_mul_ps(_mm_cvtph_ps(_mm_setr_epi16((short)le16(w0), (short)le16(w1),
                                                   (short)le16(w2), (short)le16(w3), 0, 0, 0, 0)),
                       _mm_set1_ps(x[b].d));
        acc = _mm256_fmadd_ps(_mm256_set_m128(d4, d4), _mm256_cvtepi32_ps(h), acc);
    }
    _mm_storeu_ps(y, _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1)));
}

/* Q4_1: elements 0..15 the low nibbles, 16..31 the high ones — the activations' order */
__attribute__((target("avx2,fma,f16c"))) static inline __m256i q4_1_block_isums(const uint8_t *wb,
                                                                                __m256i qx)
{
    __m128i n = _mm_loadu_si128((const __m128i *)(wb + 4));
    __m256i qw = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(n, 4), n), _mm256_set1_epi8(15));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(qw, qx), _mm256_set1_epi16(1));
}

/* The block's d and m (two f16) of four rows convert together; the offsets m·s gather in a
 * vector too. */
__attribute__((target("avx2,fma,f16c"))) static void
dot4_q4_1_avx2(const uint8_t *w, size_t rb, const BlockQ8 *x, int nb, float *y)
{
    __m256 acc = _mm256_setzero_ps();
    __m128 off = _mm_setzero_ps();
    const __m256i deint = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const uint8_t *w0 = w, *w1 = w + rb, *w2 = w + 2 * rb, *w3 = w + 3 * rb;
    for (int b = 0; b < nb; b++, w0 += 20, w1 += 20, w2 += 20, w3 += 20) {
        __m256i qx = _mm256_loadu_si256((const __m256i *)x[b].qs);
        __m256i h = fold4(q4_1_block_isums(w0, qx), q4_1_block_isums(w1, qx),
                          q4_1_block_isums(w2, qx), q4_1_block_isums(w3, qx));
        int32_t dm[4];
        memcpy(&dm[0], w0, 4), memcpy(&dm[1], w1, 4), memcpy(&dm[2], w2, 4), memcpy(&dm[3], w3, 4);
        /* d0 m0 d1 m1 … → d0 d1 d2 d3 m0 m1 m2 m3, times x's d (the d's) and s (the m's) */
        __m256 f = _mm256_permutevar8x32_ps(
            _mm256_cvtph_ps(_mm_setr_epi32(dm[0], dm[1], dm[2], dm[3])), deint);
        f = _mm256_mul_ps(f, _mm256_set_m128(_mm_set1_ps(x[b].s), _mm_set1_ps(x[b].d)));
        __m128 d4 = _mm256_castps256_ps128(f);
        off = _mm_add_ps(off, _mm256_extractf128_ps(f, 1));
        acc = _mm256_fmadd_ps(_mm256_set_m128(d4, d4), _mm256_cvtepi32_ps(h), acc);
    }
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    _mm_storeu_ps(y, _mm_add_ps(r, off));
}

/* Four rows interleaved (x4, see quant.h): a quad's quants block by block, then its scales. */
__attribute__((target("avx2,fma,f16c"))) static void
dot4_q8_0_x4_avx2(const uint8_t *w, const BlockQ8 *x, int nb, float *y)
{
    const uint8_t *sc = w + (size_t)nb * 128;
    __m256 acc = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++, w += 128) {
        __m256i qx = _mm256_loadu_si256((const __m256i *)x[b].qs);
        __m256i h = fold4(q8_block_isums(_mm256_loadu_si256((const __m256i *)w), qx),
                          q8_block_isums(_mm256_loadu_si256((const __m256i *)(w + 32)), qx),
                          q8_block_isums(_mm256_loadu_si256((const __m256i *)(w + 64)), qx),
                          q8_block_isums(_mm256_loadu_si256((const __m256i *)(w + 96)), qx));
        __m128 d4 = _mm_mul_ps(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(sc + 8 * b))),
                               _mm_set1_ps(x[b].d));
        acc = _mm256_fmadd_ps(_mm256_set_m128(d4, d4), _mm256_cvtepi32_ps(h), acc);
    }
    _mm_storeu_ps(y, _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1)));
}

/* A quad's block is [row 0's 16 nibble bytes | row 1's] [row 2's | row 3's]: one load holds two
 * rows, its low nibbles their elements 0..15 and its high nibbles 16..31, so x's two halves are
 * each broadcast to both lanes once a block and no nibble is moved across lanes. The two
 * halves' byte-pair products (≤ 2·15·127 each) add in 16 bits before widening. */
__attribute__((target("avx2,fma,f16c"))) static void
dot4_q4_1_x4_avx2(const uint8_t *w, const BlockQ8 *x, int nb, float *y)
{
    const uint8_t *dmp = w + (size_t)nb * 64;
    const __m256i low = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    /* fold lanes [r0 r0 r2 r2 | r1 r1 r3 r3] take the scales d0 d0 d2 d2 d1 d1 d3 d3 */
    const __m256i spread = _mm256_setr_epi32(0, 0, 4, 4, 2, 2, 6, 6);
    __m256 acc = _mm256_setzero_ps(), off = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++, w += 64) {
        __m256i xlo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)x[b].qs));
        __m256i xhi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x[b].qs + 16)));
        __m256i v01 = _mm256_loadu_si256((const __m256i *)w);
        __m256i v23 = _mm256_loadu_si256((const __m256i *)(w + 32));
        __m256i s01 = _mm256_madd_epi16(
            _mm256_add_epi16(
                _mm256_maddubs_epi16(_mm256_and_si256(v01, low), xlo),
                _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v01, 4), low), xhi)),
            ones);
        __m256i s23 = _mm256_madd_epi16(
            _mm256_add_epi16(
                _mm256_maddubs_epi16(_mm256_and_si256(v23, low), xlo),
                _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v23, 4), low), xhi)),
            ones);
        __m256i h = _mm256_hadd_epi32(s01, s23); /* [r0 r0 r2 r2 | r1 r1 r3 r3] */
        /* d0 m0 d1 m1 d2 m2 d3 m3 times x's d, s, d, s, … */
        __m256 f =
            _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dmp + 16 * b))),
                          _mm256_blend_ps(_mm256_set1_ps(x[b].d), _mm256_set1_ps(x[b].s), 0xaa));
        acc = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(f, spread), _mm256_cvtepi32_ps(h), acc);
        off = _mm256_add_ps(off, f); /* the odd lanes: m·s */
    }
    float a[8], o[8];
    _mm256_storeu_ps(a, acc);
    _mm256_storeu_ps(o, off);
    y[0] = (a[0] + a[1]) + o[1];
    y[1] = (a[4] + a[5]) + o[3];
    y[2] = (a[2] + a[3]) + o[5];
    y[3] = (a[6] + a[7]) + o[7];
}

__attribute__((target("avx2,fma,f16c"))) static float dot_q4_1_avx2(const uint8_t *w,
                                                                    const BlockQ8 *x, int nb)
{
    float y[ROWS4];
    /* one row: the four-row kernel on the same row (rb = 0), the first result kept */
    dot4_q4_1_avx2(w, 0, x, nb, y);
    return y[0];
}
#endif

/* ---- half rows against f32 activations --------------------------------------------------------- */

typedef float (*HalfDotFn)(const uint8_t *w, const float *x, int k);

/* Eight partial sums (the AVX2 kernels' lanes, in the same order), added pairwise at the end */
static float dot_f16_scalar(const uint8_t *w, const float *x, int k)
{
    float acc[8] = { 0 };
    for (int j = 0; j < k; j++)
        acc[j & 7] += f16(w + 2 * j) * x[j];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static float dot_bf16_scalar(const uint8_t *w, const float *x, int k)
{
    float acc[8] = { 0 };
    for (int j = 0; j < k; j++)
        acc[j & 7] += bf16(w + 2 * j) * x[j];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

#ifdef HAVE_X86
/* k is a multiple of 32: four vectors of eight a block */
__attribute__((target("avx2,fma,f16c"))) static float dot_f16_avx2(const uint8_t *w, const float *x,
                                                                   int k)
{
    __m256 acc = _mm256_setzero_ps();
    for (int j = 0; j < k; j += 8) {
        __m256 wv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * j)));
        acc = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + j), acc);
    }
    return hsum8(acc);
}

__attribute__((target("avx2,fma,f16c"))) static float dot_bf16_avx2(const uint8_t *w,
                                                                    const float *x, int k)
{
    __m256 acc = _mm256_setzero_ps();
    for (int j = 0; j < k; j += 8) {
        __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(w + 2 * j)));
        __m256 wv = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)); /* bf16: the upper half */
        acc = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + j), acc);
    }
    return hsum8(acc);
}
#endif

/* Four rows rb bytes apart; NULL: four calls of the one-row kernel. */
typedef void (*Dot4Fn)(const uint8_t *w, size_t rb, const BlockQ8 *x, int nb, float *y);

static DotFn dot_fns[CL_QUANT_N_TYPES] = { dot_q8_0_scalar, dot_q4_1_scalar };
static Dot4Fn dot4_fns[CL_QUANT_N_TYPES] = { NULL, NULL };
/* One quad of an x4 matrix (quant.h) */
typedef void (*QuadFn)(const uint8_t *w, const BlockQ8 *x, int nb, float *y);
static QuadFn quad_fns[CL_QUANT_N_TYPES] = { dot4_q8_0_x4_scalar, dot4_q4_1_x4_scalar };
static HalfDotFn half_fns[CL_QUANT_N_TYPES] = {
    [CL_QUANT_F16] = dot_f16_scalar, [CL_QUANT_BF16] = dot_bf16_scalar
};
static const char *kernel_level = "scalar";
static gsize kernels_chosen = 0;

static const char *set_kernels(ClQuantKernels k)
{
    dot_fns[CL_QUANT_Q8_0] = dot_q8_0_scalar;
    dot_fns[CL_QUANT_Q4_1] = dot_q4_1_scalar;
    dot4_fns[CL_QUANT_Q8_0] = dot4_fns[CL_QUANT_Q4_1] = NULL;
    quad_fns[CL_QUANT_Q8_0] = dot4_q8_0_x4_scalar;
    quad_fns[CL_QUANT_Q4_1] = dot4_q4_1_x4_scalar;
    half_fns[CL_QUANT_F16] = dot_f16_scalar;
    half_fns[CL_QUANT_BF16] = dot_bf16_scalar;
    quantize_activations = quantize_activations_scalar;
    kernel_level = "scalar";
#ifdef HAVE_X86
    /* F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c" */
    unsigned int a, b, c, d;
    gboolean f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    if (k == CL_QUANT_KERNELS_AUTO && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma") && f16c) {
        dot_fns[CL_QUANT_Q8_0] = dot_q8_0_avx2;
        dot_fns[CL_QUANT_Q4_1] = dot_q4_1_avx2;
        dot4_fns[CL_QUANT_Q8_0] = dot4_q8_0_avx2;
        dot4_fns[CL_QUANT_Q4_1] = dot4_q4_1_avx2;
        quad_fns[CL_QUANT_Q8_0] = dot4_q8_0_x4_avx2;
        quad_fns[CL_QUANT_Q4_1] = dot4_q4_1_x4_avx2;
        half_fns[CL_QUANT_F16] = dot_f16_avx2;
        half_fns[CL_QUANT_BF16] = dot_bf16_avx2;
        quantize_activations = quantize_activations_avx2;
        kernel_level = "avx2";
    }
#endif
    return kernel_level;
}

static void choose_kernels(void)
{
    if (g_once_init_enter(&kernels_chosen)) {
        set_kernels(CL_QUANT_KERNELS_AUTO);
        g_once_init_leave(&kernels_chosen, 1);
    }
}

const char *cl_quant_set_kernels(ClQuantKernels k)
{
    choose_kernels(); /* else the first product would choose again, over this choice */
    return set_kernels(k);
}

const char *cl_quant_kernels(void)
{
    choose_kernels();
    return kernel_level;
}

/* ---- products ------------------------------------------------------------------------------- */

typedef struct {
    DotFn dot;
    Dot4Fn dot4;
    const uint8_t *W;
    size_t row_bytes;
    const BlockQ8 *x;
    int nb;
    float *y;
    HalfDotFn half; /* F16 / BF16 rows (dot and x unused) against xf */
    const float *xf;
    QuadFn quad;   /* non-NULL: W is x4, and a job's chunks start at multiples of four */
    int quad_rows; /* x4: the rows in quads (the rest, < 4, are plain rows after them) */
} MatvecCtx;

static void matvec_rows(void *p, int begin, int end)
{
    const MatvecCtx *c = p;
    int i = begin;
    if (c->quad) {
        for (; i < MIN(end, c->quad_rows); i += ROWS4)
            c->quad(c->W + (size_t)i * c->row_bytes, c->x, c->nb, c->y + i);
        for (; i < end; i++)
            c->y[i] = c->dot(c->W + (size_t)i * c->row_bytes, c->x, c->nb);
        return;
    }
    if (c->half) {
        for (; i < end; i++)
            c->y[i] = c->half(c->W + (size_t)i * c->row_bytes, c->xf, c->nb * CL_QUANT_BLOCK);
        return;
    }
    if (c->dot4)
        for (; i + ROWS4 <= end; i += ROWS4)
            c->dot4(c->W + (size_t)i * c->row_bytes, c->row_bytes, c->x, c->nb, c->y + i);
    for (; i < end; i++)
        c->y[i] = c->dot(c->W + (size_t)i * c->row_bytes, c->x, c->nb);
}

/* Matrix-vector products of fewer multiply-adds than this run on the calling thread: a small
 * decoder's (dimension 256) take a few microseconds, less than the pool's wake-up. */
#define POOL_MIN_MACS (1 << 18)

/* Several matrices over the same x: one quantization, one pool job over all their rows. */
typedef struct {
    int n;
    const ClQuantMatvec *mats;
    const BlockQ8 *x;
    const float *xf;
    int nb;
    int bounds[CL_QUANT_MAX_MULTI + 1]; /* first row of each matrix in the joint numbering */
    int unit; /* rows an item of the job stands for: 1, or 4 (quads; the last may be shorter) */
} MultiCtx;

static void multi_rows(void *p, int begin, int end)
{
    const MultiCtx *c = p;
    begin *= c->unit, end = MIN(end * c->unit, c->bounds[c->n]);
    for (int j = 0; j < c->n; j++) {
        int b0 = MAX(begin, c->bounds[j]), b1 = MIN(end, c->bounds[j + 1]);
        if (b0 >= b1)
            continue;
        const ClQuantMatvec *mv = &c->mats[j];
        MatvecCtx one = { dot_fns[mv->type],
                          dot4_fns[mv->type],
                          mv->W,
                          cl_quant_row_bytes(mv->type, c->nb * CL_QUANT_BLOCK),
                          c->x,
                          c->nb,
                          mv->y,
                          half_fns[mv->type],
                          c->xf,
                          mv->x4 ? quad_fns[mv->type] : NULL,
                          mv->m / ROWS4 * ROWS4 };
        matvec_rows(&one, b0 - c->bounds[j], b1 - c->bounds[j]);
    }
}

void cl_quant_matvec_multi(ClThreadPool *pool, const ClQuantMatvec *mats, int n, int k,
                           const float *x)
{
    g_return_if_fail(n >= 1 && n <= CL_QUANT_MAX_MULTI && k % CL_QUANT_BLOCK == 0);
    choose_kernels();
    int nb = k / CL_QUANT_BLOCK;
    BlockQ8 stack[64];
    BlockQ8 *xq = nb <= 64 ? stack : g_new(BlockQ8, nb);
    gboolean blocks = FALSE; /* 8-bit activations only for the block formats */
    MultiCtx c = { n, mats, xq, x, nb, { 0 }, ROWS4 };
    for (int j = 0; j < n; j++) {
        blocks = blocks || CL_QUANT_IS_BLOCK(mats[j].type);
        c.bounds[j + 1] = c.bounds[j] + mats[j].m;
        if (mats[j].m % ROWS4 && j < n - 1)
            c.unit = 1; /* a later matrix would start inside a quad: rows one by one */
    }
    for (int j = 0; j < n; j++)
        if (mats[j].x4 && (c.unit != ROWS4 || !CL_QUANT_IS_BLOCK(mats[j].type))) {
            g_critical("x4 matrices are Q8_0 or Q4_1, and only the last of a job may end "
                       "inside a quad");
            if (xq != stack)
                g_free(xq);
            return;
        }
    if (blocks)
        quantize_activations(x, k, xq);
    /* ~64 rows per task keep the wake-ups small against the work; a job smaller than
     * POOL_MIN_MACS runs here, where waking the pool would cost more than it saves */
    int items = (c.bounds[n] + c.unit - 1) / c.unit;
    if (pool && (gint64)c.bounds[n] * k >= POOL_MIN_MACS)
        cl_threadpool_run(pool, items, 64 / c.unit, multi_rows, &c);
    else
        multi_rows(&c, 0, items);
    if (xq != stack)
        g_free(xq);
}

void cl_quant_matvec(ClThreadPool *pool, ClQuantType t, const void *W, int m, int k, const float *x,
                     float *y)
{
    g_return_if_fail((unsigned)t < CL_QUANT_N_TYPES && k % CL_QUANT_BLOCK == 0);
    choose_kernels();
    int nb = k / CL_QUANT_BLOCK;
    BlockQ8 stack[64];
    BlockQ8 *xq = nb <= 64 ? stack : g_new(BlockQ8, nb);
    if (CL_QUANT_IS_BLOCK(t))
        quantize_activations(x, k, xq);
    MatvecCtx c = { dot_fns[t], dot4_fns[t], W, cl_quant_row_bytes(t, k), xq, nb, y, half_fns[t],
                    x,          NULL,        0 };
    /* a row is k/32 blocks: ~64 rows per task keep the wake-ups small against the work (a
     * product smaller than POOL_MIN_MACS runs here) */
    if (pool && (gint64)m * k >= POOL_MIN_MACS) /* chunks of whole row quads */
        cl_threadpool_run(pool, m, 64, matvec_rows, &c);
    else
        matvec_rows(&c, 0, m);
    if (xq != stack)
        g_free(xq);
}

#define TILE_ROWS 64

typedef struct {
    ClQuantType t;
    int x4;
    const uint8_t *W;
    int m, k, n;
    const float *X;
    float *Y;
} MatmulCtx;

static void matmul_tiles(void *p, int begin, int end)
{
    const MatmulCtx *c = p;
    float *tile = g_new(float, (size_t)TILE_ROWS * c->k);
    size_t rb = cl_quant_row_bytes(c->t, c->k);
    for (int tb = begin; tb < end; tb++) {
        int r0 = tb * TILE_ROWS, rows = MIN(TILE_ROWS, c->m - r0);
        if (c->x4)
            dequantize_x4_rows(c->t, c->W, r0, rows, c->m, c->k, tile);
        else
            cl_dequantize_rows(c->t, c->W + (size_t)r0 * rb, tile, rows, c->k);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c->n, rows, c->k, 1.0f, c->X, c->k,
                    tile, c->k, 0.0f, c->Y + r0, c->m);
    }
    g_free(tile);
}

void cl_quant_matmul(ClThreadPool *pool, ClQuantType t, int x4, const void *W, int m, int k,
                     const float *X, int n, float *Y)
{
    g_return_if_fail((unsigned)t < CL_QUANT_N_TYPES && k % CL_QUANT_BLOCK == 0);
    g_return_if_fail(!x4 || CL_QUANT_IS_BLOCK(t));
    MatmulCtx c = { t, x4, W, m, k, n, X, Y }; /* tiles of 64 rows start at a quad */
    int tiles = (m + TILE_ROWS - 1) / TILE_ROWS;
    int prev = openblas_get_num_threads(); /* one BLAS thread inside each of the pool's tasks */
    if (prev != 1)
        openblas_set_num_threads(1);
    if (pool)
        cl_threadpool_run(pool, tiles, 1, matmul_tiles, &c);
    else
        matmul_tiles(&c, 0, tiles);
    if (prev != 1)
        openblas_set_num_threads(prev);
}
