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

/* x (k values) to 8-bit blocks */
static void quantize_activations(const float *x, int k, BlockQ8 *out)
{
    for (int b = 0; b < k / CL_QUANT_BLOCK; b++) {
        float d;
        int s;
        quantize_q8_block(x + b * CL_QUANT_BLOCK, &d, out[b].qs, &s);
        out[b].d = cl_f16_to_f32(cl_f32_to_f16(d));
        out[b].s = cl_f16_to_f32(cl_f32_to_f16((float)s * d));
    }
}

/* ---- dot products of one weight row with the activation blocks ------------------------------ */

typedef float (*DotFn)(const uint8_t *w, const BlockQ8 *x, int nb);

/* The AVX2 kernels take four rows at a time against the same activation block: the activations
 * are loaded once and the four rows' chains run side by side. */
#define ROWS4 4

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

#ifdef HAVE_X86
__attribute__((target("avx2,fma,f16c"))) static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma,f16c"))) static inline __m256 q8_block_products(__m256i qw,
                                                                                __m256i qx)
{
    /* |w| · (x with w's sign): maddubs takes an unsigned and a signed operand */
    __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qx, qw));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

__attribute__((target("avx2,fma,f16c"))) static void
dot4_q8_0_avx2(const uint8_t *w, size_t rb, const BlockQ8 *x, int nb, float *y)
{
    __m256 acc[ROWS4];
    for (int r = 0; r < ROWS4; r++)
        acc[r] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m256i qx = _mm256_loadu_si256((const __m256i *)x[b].qs);
        for (int r = 0; r < ROWS4; r++) {
            const uint8_t *wb = w + r * rb + (size_t)b * 34;
            __m256 p = q8_block_products(_mm256_loadu_si256((const __m256i *)(wb + 2)), qx);
            float d = _cvtsh_ss((uint16_t)(wb[0] | wb[1] << 8)) * x[b].d;
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), p, acc[r]);
        }
    }
    for (int r = 0; r < ROWS4; r++)
        y[r] = hsum8(acc[r]);
}

__attribute__((target("avx2,fma,f16c"))) static float dot_q8_0_avx2(const uint8_t *w,
                                                                    const BlockQ8 *x, int nb)
{
    __m256 acc = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++, w += 34) {
        __m256 p = q8_block_products(_mm256_loadu_si256((const __m256i *)(w + 2)),
                                     _mm256_loadu_si256((const __m256i *)x[b].qs));
        float d = _cvtsh_ss((uint16_t)(w[0] | w[1] << 8)) * x[b].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), p, acc);
    }
    return hsum8(acc);
}

/* Q4_1: elements 0..15 the low nibbles, 16..31 the high ones — the activations' order. The
 * block's d and m (two f16) convert together; the offsets m·s gather in a vector too. */
__attribute__((target("avx2,fma,f16c"))) static void
dot4_q4_1_avx2(const uint8_t *w, size_t rb, const BlockQ8 *x, int nb, float *y)
{
    const __m256i ones = _mm256_set1_epi16(1), low = _mm256_set1_epi8(15);
    __m256 acc[ROWS4];
    __m128 off[ROWS4];
    for (int r = 0; r < ROWS4; r++)
        acc[r] = _mm256_setzero_ps(), off[r] = _mm_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m256i qx = _mm256_loadu_si256((const __m256i *)x[b].qs);
        __m128 ds = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)&x[b].d)); /* d, s */
        for (int r = 0; r < ROWS4; r++) {
            const uint8_t *wb = w + r * rb + (size_t)b * 20;
            int32_t dm;
            memcpy(&dm, wb, 4);
            __m128 wdm = _mm_cvtph_ps(_mm_cvtsi32_si128(dm)); /* d, m */
            __m128 prod = _mm_mul_ps(wdm, ds);                /* d·dx, m·s */
            __m128i n = _mm_loadu_si128((const __m128i *)(wb + 4));
            __m256i qw = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(n, 4), n), low);
            __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(qw, qx), ones));
            acc[r] = _mm256_fmadd_ps(_mm256_broadcastss_ps(prod), p, acc[r]);
            off[r] = _mm_add_ps(off[r], prod);
        }
    }
    for (int r = 0; r < ROWS4; r++)
        y[r] = hsum8(acc[r]) + _mm_cvtss_f32(_mm_shuffle_ps(off[r], off[r], 1));
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
static HalfDotFn half_fns[CL_QUANT_N_TYPES] = {
    [CL_QUANT_F16] = dot_f16_scalar, [CL_QUANT_BF16] = dot_bf16_scalar
};
static const char *kernel_level = "scalar";
static gsize kernels_chosen = 0;

const char *cl_quant_set_kernels(ClQuantKernels k)
{
    dot_fns[CL_QUANT_Q8_0] = dot_q8_0_scalar;
    dot_fns[CL_QUANT_Q4_1] = dot_q4_1_scalar;
    dot4_fns[CL_QUANT_Q8_0] = dot4_fns[CL_QUANT_Q4_1] = NULL;
    half_fns[CL_QUANT_F16] = dot_f16_scalar;
    half_fns[CL_QUANT_BF16] = dot_bf16_scalar;
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
        half_fns[CL_QUANT_F16] = dot_f16_avx2;
        half_fns[CL_QUANT_BF16] = dot_bf16_avx2;
        kernel_level = "avx2";
    }
#endif
    return kernel_level;
}

static void choose_kernels(void)
{
    if (g_once_init_enter(&kernels_chosen)) {
        cl_quant_set_kernels(CL_QUANT_KERNELS_AUTO);
        g_once_init_leave(&kernels_chosen, 1);
    }
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
} MatvecCtx;

static void matvec_rows(void *p, int begin, int end)
{
    const MatvecCtx *c = p;
    int i = begin;
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

/* Several matrices over the same x: one quantization, one pool job over all their rows. */
typedef struct {
    int n;
    const ClQuantMatvec *mats;
    const BlockQ8 *x;
    const float *xf;
    int nb;
    int bounds[CL_QUANT_MAX_MULTI + 1]; /* first row of each matrix in the joint numbering */
} MultiCtx;

static void multi_rows(void *p, int begin, int end)
{
    const MultiCtx *c = p;
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
                          c->xf };
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
    for (int j = 0; j < n; j++)
        blocks = blocks || CL_QUANT_IS_BLOCK(mats[j].type);
    if (blocks)
        quantize_activations(x, k, xq);
    MultiCtx c = { n, mats, xq, x, nb, { 0 } };
    for (int j = 0; j < n; j++)
        c.bounds[j + 1] = c.bounds[j] + mats[j].m;
    if (pool)
        cl_threadpool_run(pool, c.bounds[n], 64, multi_rows, &c);
    else
        multi_rows(&c, 0, c.bounds[n]);
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
    MatvecCtx c = {
        dot_fns[t], dot4_fns[t], W, cl_quant_row_bytes(t, k), xq, nb, y, half_fns[t], x
    };
    /* a row is k/32 blocks: ~64 rows per task keep the wake-ups small against the work */
    if (pool) /* chunks of whole row quads */
        cl_threadpool_run(pool, m, 64, matvec_rows, &c);
    else
        matvec_rows(&c, 0, m);
    if (xq != stack)
        g_free(xq);
}

#define TILE_ROWS 64

typedef struct {
    ClQuantType t;
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
        cl_dequantize_rows(c->t, c->W + (size_t)r0 * rb, tile, rows, c->k);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c->n, rows, c->k, 1.0f, c->X, c->k,
                    tile, c->k, 0.0f, c->Y + r0, c->m);
    }
    g_free(tile);
}

void cl_quant_matmul(ClThreadPool *pool, ClQuantType t, const void *W, int m, int k, const float *X,
                     int n, float *Y)
{
    g_return_if_fail((unsigned)t < CL_QUANT_N_TYPES && k % CL_QUANT_BLOCK == 0);
    MatmulCtx c = { t, W, m, k, n, X, Y };
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
