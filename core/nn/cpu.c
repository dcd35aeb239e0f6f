/* cpu.c - the CPU backend: one thread pool for every op (OpenBLAS single-threaded inside its
 * tasks), SIMD row ops, fast vectorisable exp/erf/GELU. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "nn/backend.h"
#include "nn/grad.h"
#include "nn/blas.h"
#include "nn/elementwise.h"
#include "nn/simd.h"
#include "nn/threadpool.h"

typedef struct {
    int n_threads;
    ClThreadPool *pool;
} CpuData;

static ClThreadPool *pool_of(ClBackend *be)
{
    return ((CpuData *)be->data)->pool;
}

static const struct cl_backend_ops cpu_ops;

ClThreadPool *cl_backend_cpu_pool(ClBackend *be)
{
    return be && be->ops == &cpu_ops ? pool_of(be) : NULL;
}

/* Reductions keep LANES partial sums in fixed blocks (then a scalar tail): GCC's -O2 vectoriser
 * takes such loops, and the summation order is the same on every machine. */
#define LANES 16

/* Work per thread below which an op stays on the calling thread (a wake-up costs 10-40 µs). */
#define GRAIN_FLOATS 32768
/* Elementwise ops are split into blocks of this many floats. */
#define BLOCK_FLOATS 2048

/* ---- products ------------------------------------------------------------------------------
 * OpenBLAS's own threads busy-wait for ~2^28 cycles after every product (sched_yield loop), and
 * so hold the core the pool's worker needs for the ops in between: measured on 2 cores, a
 * second pool thread gained nothing. So the pool runs the products too: every BLAS call is
 * single-threaded inside a pool task (on a block of output columns, or on a group of attention
 * heads), OpenBLAS is switched to one thread around the pool's parallel regions and the
 * process's setting is restored after (the switch costs nanoseconds). */

static int blas_enter(void)
{
    int prev = openblas_get_num_threads();
    if (prev != 1)
        openblas_set_num_threads(1);
    return prev;
}

static void blas_leave(int prev)
{
    if (prev != 1)
        openblas_set_num_threads(prev);
}

/* Products smaller than this (multiply-adds) run as one task. */
#define SPLIT_MACS (1 << 22)

/* Column block b of nb over [0, n), boundaries on multiples of 16 floats (whole cache lines). */
static void col_block(int n, int nb, int b, int *c0, int *c1)
{
    *c0 = b == 0 ? 0 : (int)(((gint64)n * b / nb) & ~(gint64)15);
    *c1 = b == nb - 1 ? n : (int)(((gint64)n * (b + 1) / nb) & ~(gint64)15);
}

static int n_col_blocks(ClBackend *be, gint64 m, gint64 n, gint64 k)
{
    int t = ((CpuData *)be->data)->n_threads;
    if (t <= 1 || m * n * k < SPLIT_MACS || n < 32)
        return 1;
    return (int)MIN((gint64)t, n / 16);
}

typedef struct {
    float *out;
    const float *x, *w, *bias;
    int m, k, n, nb;
} LinearCtx;

static void linear_blocks(void *p, int begin, int end)
{
    const LinearCtx *c = p;
    for (int b = begin; b < end; b++) {
        int c0, c1;
        col_block(c->n, c->nb, b, &c0, &c1);
        int nc = c1 - c0;
        if (nc <= 0)
            continue;
        float beta = 0.0f;
        if (c->bias) {
            for (int i = 0; i < c->m; i++)
                memcpy(c->out + (size_t)i * c->n + c0, c->bias + c0, (size_t)nc * sizeof(float));
            beta = 1.0f;
        }
        const float *w = c->w + (size_t)c0 * c->k;
        if (c->m == 1) /* one row (a decode step): a matrix-vector product, no packing */
            cblas_sgemv(CblasRowMajor, CblasNoTrans, nc, c->k, 1.0f, w, c->k, c->x, 1, beta,
                        c->out + c0, 1);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c->m, nc, c->k, 1.0f, c->x, c->k,
                        w, c->k, beta, c->out + c0, c->n);
    }
}

static void cpu_linear(ClBackend *be, float *out, const float *x, const float *w, const float *bias,
                       int m, int k, int n)
{
    LinearCtx c = { out, x, w, bias, m, k, n, n_col_blocks(be, m, n, k) };
    int prev = blas_enter();
    cl_threadpool_run(pool_of(be), c.nb, 1, linear_blocks, &c);
    blas_leave(prev);
}

typedef struct {
    gboolean ta, tb;
    int m, n, k, nb;
    float alpha, beta;
    const float *a, *b;
    int lda, ldb, ldc;
    float *c;
} GemmCtx;

static void gemm_blocks(void *p, int begin, int end)
{
    const GemmCtx *g = p;
    for (int blk = begin; blk < end; blk++) {
        int c0, c1;
        col_block(g->n, g->nb, blk, &c0, &c1);
        if (c1 <= c0)
            continue;
        /* op(b) columns c0..c1: rows of a transposed b, columns of a plain one */
        const float *b = g->tb ? g->b + (size_t)c0 * g->ldb : g->b + c0;
        cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                    g->tb ? CblasTrans : CblasNoTrans, g->m, c1 - c0, g->k, g->alpha, g->a, g->lda,
                    b, g->ldb, g->beta, g->c + c0, g->ldc);
    }
}

static void cpu_gemm(ClBackend *be, gboolean trans_a, gboolean trans_b, int m, int n, int k,
                     float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                     float *c, int ldc)
{
    GemmCtx g = { trans_a, trans_b, m,   n,   k, n_col_blocks(be, m, n, k), alpha, beta, a,
                  b,       lda,     ldb, ldc, c };
    int prev = blas_enter();
    cl_threadpool_run(pool_of(be), g.nb, 1, gemm_blocks, &g);
    blas_leave(prev);
}

/* ---- reductions (LANES partial sums in double) -------------------------------------------- */

static double sum_f(const float *x, int n)
{
    double acc[LANES] = { 0 };
    int i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++)
            acc[j] += x[i + j];
    double s = 0;
    for (int j = 0; j < LANES; j++)
        s += acc[j];
    for (; i < n; i++)
        s += x[i];
    return s;
}

static double sumsq_centered(const float *x, int n, double mean)
{
    double acc[LANES] = { 0 };
    int i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            double d = x[i + j] - mean;
            acc[j] += d * d;
        }
    double s = 0;
    for (int j = 0; j < LANES; j++)
        s += acc[j];
    for (; i < n; i++) {
        double d = x[i] - mean;
        s += d * d;
    }
    return s;
}

static float dot_f(const float *a, const float *b, int n)
{
    float acc[LANES] = { 0 };
    int i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++)
            acc[j] += a[i + j] * b[i + j];
    float s = 0;
    for (int j = 0; j < LANES; j++)
        s += acc[j];
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* y += a · x */
static void axpy_f(float *y, float a, const float *x, int n)
{
    int i = 0;
    for (; i + VL <= n; i += VL)
        vstore(y + i, vload(y + i) + V(a) * vload(x + i));
    if (i < n)
        vstore_n(y + i, vload_n(y + i, n - i) + V(a) * vload_n(x + i, n - i), n - i);
}

static void scale_f(float *y, float a, int n)
{
    int i = 0;
    for (; i + VL <= n; i += VL)
        vstore(y + i, vload(y + i) * V(a));
    if (i < n)
        vstore_n(y + i, vload_n(y + i, n - i) * V(a), n - i);
}

/* ---- norms ----------------------------------------------------------------------------------- */

typedef struct {
    float *out;
    const float *x, *w, *b;
    int n;
    float eps;
} NormCtx;

static void layernorm_rows(void *p, int begin, int end)
{
    const NormCtx *c = p;
    int n = c->n;
    for (int r = begin; r < end; r++) {
        const float *x = c->x + (size_t)r * n;
        float *y = c->out + (size_t)r * n;
        double mean = sum_f(x, n) / n;
        double var = sumsq_centered(x, n, mean) / n;
        float mu = (float)mean;
        float rstd = (float)(1.0 / sqrt(var + c->eps));
        const float *w = c->w, *b = c->b;
        int i = 0;
        for (; i + VL <= n; i += VL)
            vstore(y + i, (vload(x + i) - V(mu)) * V(rstd) * vload(w + i) + vload(b + i));
        if (i < n) {
            int k = n - i;
            vf v = (vload_n(x + i, k) - V(mu)) * V(rstd) * vload_n(w + i, k) + vload_n(b + i, k);
            vstore_n(y + i, v, k);
        }
    }
}

static int rows_grain(int n)
{
    return MAX(1, GRAIN_FLOATS / MAX(n, 1));
}

static void cpu_layernorm(ClBackend *be, float *out, const float *x, const float *w, const float *b,
                          int m, int n, float eps)
{
    NormCtx c = { out, x, w, b, n, eps };
    cl_threadpool_run(pool_of(be), m, rows_grain(n), layernorm_rows, &c);
}

static void rmsnorm_rows(void *p, int begin, int end)
{
    const NormCtx *c = p;
    int n = c->n;
    for (int r = begin; r < end; r++) {
        const float *x = c->x + (size_t)r * n;
        float *y = c->out + (size_t)r * n;
        double ms = sumsq_centered(x, n, 0.0) / n;
        float rs = (float)(1.0 / sqrt(ms + c->eps));
        const float *w = c->w;
        int i = 0;
        for (; i + VL <= n; i += VL)
            vstore(y + i, vload(x + i) * V(rs) * vload(w + i));
        if (i < n)
            vstore_n(y + i, vload_n(x + i, n - i) * V(rs) * vload_n(w + i, n - i), n - i);
    }
}

static void cpu_rmsnorm(ClBackend *be, float *out, const float *x, const float *w, int m, int n,
                        float eps)
{
    NormCtx c = { out, x, w, NULL, n, eps };
    cl_threadpool_run(pool_of(be), m, rows_grain(n), rmsnorm_rows, &c);
}

/* ---- elementwise ----------------------------------------------------------------------------- */

typedef struct {
    float *out;
    const float *a, *b;
    size_t count;
} MapCtx;

/* out[i] = EXPR over vectors va = a[i..], vb = b[i..] (b may be NULL: then vb is zero) */
#define MAP_FN(NAME, EXPR)                                                                         \
    static void NAME(void *p, int begin, int end)                                                  \
    {                                                                                              \
        const MapCtx *c = p;                                                                       \
        size_t i = (size_t)begin * BLOCK_FLOATS;                                                   \
        size_t stop = MIN((size_t)end * BLOCK_FLOATS, c->count);                                   \
        for (; i + VL <= stop; i += VL) {                                                          \
            vf va = vload(c->a + i);                                                               \
            vf vb = c->b ? vload(c->b + i) : V(0.0f);                                              \
            (void)vb;                                                                              \
            vstore(c->out + i, (EXPR));                                                            \
        }                                                                                          \
        if (i < stop) {                                                                            \
            int k = (int)(stop - i);                                                               \
            vf va = vload_n(c->a + i, k);                                                          \
            vf vb = c->b ? vload_n(c->b + i, k) : V(0.0f);                                         \
            (void)vb;                                                                              \
            vstore_n(c->out + i, (EXPR), k);                                                       \
        }                                                                                          \
    }

MAP_FN(add_blocks, va + vb)

/* the same over the elementwise kernels (elementwise.h: the widest the CPU runs) */
#define EW_FN(NAME, KERNEL)                                                                        \
    static void NAME(void *p, int begin, int end)                                                  \
    {                                                                                              \
        const MapCtx *c = p;                                                                       \
        size_t i = (size_t)begin * BLOCK_FLOATS;                                                   \
        size_t stop = MIN((size_t)end * BLOCK_FLOATS, c->count);                                   \
        if (i < stop)                                                                              \
            cl_elementwise()->KERNEL(c->out + i, c->a + i, c->b ? c->b + i : NULL, stop - i);      \
    }

EW_FN(gelu_blocks, gelu)
EW_FN(silu_blocks, silu)
EW_FN(silu_mul_blocks, silu_mul)

void cl_gelu_grad_accumulate(float *dx, const float *dy, const float *x, size_t count)
{
    cl_elementwise()->gelu_grad_acc(dx, dy, x, count);
}

void cl_silu_mul_grad_accumulate(float *dgate, float *dup, const float *dy, const float *gate,
                                 const float *up, size_t count)
{
    cl_elementwise()->silu_mul_grad_acc(dgate, dup, dy, gate, up, count);
}

static void run_map(ClBackend *be, ClParallelFn fn, float *out, const float *a, const float *b,
                    size_t count)
{
    MapCtx c = { out, a, b, count };
    size_t n_blocks = (count + BLOCK_FLOATS - 1) / BLOCK_FLOATS;
    g_assert(n_blocks <= G_MAXINT);
    cl_threadpool_run(pool_of(be), (int)n_blocks, GRAIN_FLOATS / BLOCK_FLOATS, fn, &c);
}

static void cpu_gelu(ClBackend *be, float *out, const float *x, size_t count)
{
    run_map(be, gelu_blocks, out, x, NULL, count);
}

static void cpu_silu(ClBackend *be, float *out, const float *x, size_t count)
{
    run_map(be, silu_blocks, out, x, NULL, count);
}

static void cpu_silu_mul(ClBackend *be, float *out, const float *gate, const float *up,
                         size_t count)
{
    run_map(be, silu_mul_blocks, out, gate, up, count);
}

static void cpu_add(ClBackend *be, float *out, const float *a, const float *b, size_t count)
{
    run_map(be, add_blocks, out, a, b, count);
}

/* Column-vector ops over [m, n]: modulate, residual, scale_cols. */
typedef struct {
    float *x;
    const float *a, *g, *h;
    int n;
    gboolean accumulate;
} ColCtx;

static void modulate_rows(void *p, int begin, int end)
{
    const ColCtx *c = p;
    for (int r = begin; r < end; r++) {
        float *x = c->x + (size_t)r * c->n;
        for (int i = 0; i < c->n; i++)
            x[i] = x[i] * (1.0f + c->g[i]) + c->h[i];
    }
}

static void cpu_modulate(ClBackend *be, float *x, const float *scale, const float *shift, int m,
                         int n)
{
    ColCtx c = { x, NULL, scale, shift, n, FALSE };
    cl_threadpool_run(pool_of(be), m, rows_grain(n), modulate_rows, &c);
}

static void residual_rows(void *p, int begin, int end)
{
    const ColCtx *c = p;
    int n = c->n;
    for (int r = begin; r < end; r++) {
        float *x = c->x + (size_t)r * n;
        const float *a = c->a + (size_t)r * n;
        if (c->g) {
            for (int i = 0; i < n; i++)
                x[i] += (1.0f + c->g[i]) * a[i];
        } else {
            int i = 0;
            for (; i + VL <= n; i += VL)
                vstore(x + i, vload(x + i) + vload(a + i));
            if (i < n)
                vstore_n(x + i, vload_n(x + i, n - i) + vload_n(a + i, n - i), n - i);
        }
    }
}

static void cpu_residual(ClBackend *be, float *x, const float *a, const float *gate, int m, int n)
{
    ColCtx c = { x, a, gate, NULL, n, FALSE };
    cl_threadpool_run(pool_of(be), m, rows_grain(n), residual_rows, &c);
}

static void scale_cols_rows(void *p, int begin, int end)
{
    const ColCtx *c = p;
    for (int r = begin; r < end; r++) {
        float *x = c->x + (size_t)r * c->n;
        const float *a = c->a + (size_t)r * c->n;
        for (int i = 0; i < c->n; i++)
            x[i] = (c->accumulate ? x[i] : 0.0f) + c->g[i] * a[i];
    }
}

static void cpu_scale_cols(ClBackend *be, float *out, const float *a, const float *gate, int m,
                           int n, gboolean accumulate)
{
    ColCtx c = { out, a, gate, NULL, n, accumulate };
    cl_threadpool_run(pool_of(be), m, rows_grain(n), scale_cols_rows, &c);
}

/* ---- RoPE ------------------------------------------------------------------------------------ */

typedef struct {
    float *x;
    const float *cos, *sin;
    int ld, n_head, head_dim, n_sections;
} RopeCtx;

static void rope_rows(void *p, int begin, int end)
{
    const RopeCtx *c = p;
    int half_dim = c->head_dim / 2;
    int q = c->head_dim / c->n_sections;
    int h2 = q / 2;
    for (int t = begin; t < end; t++) {
        const float *ct = c->cos + (size_t)t * half_dim;
        const float *st = c->sin + (size_t)t * half_dim;
        for (int h = 0; h < c->n_head; h++) {
            float *x = c->x + (size_t)t * c->ld + (size_t)h * c->head_dim;
            for (int s = 0; s < c->n_sections; s++) {
                float *xs = x + s * q;
                const float *cs = ct + s * h2, *ss = st + s * h2;
                for (int i = 0; i < h2; i++) {
                    float a = xs[i], b = xs[i + h2];
                    xs[i] = a * cs[i] - b * ss[i];
                    xs[i + h2] = b * cs[i] + a * ss[i];
                }
            }
        }
    }
}

static void cpu_rope(ClBackend *be, float *x, const float *cos_t, const float *sin_t, int n_tok,
                     int ld, int n_head, int head_dim, int n_sections)
{
    RopeCtx c = { x, cos_t, sin_t, ld, n_head, head_dim, n_sections };
    cl_threadpool_run(pool_of(be), n_tok, rows_grain(n_head * head_dim), rope_rows, &c);
}

/* ---- softmax --------------------------------------------------------------------------------- */

/* Softmax of x[0, n) in place; returns nothing, leaves zeros for an empty row. */
static void softmax_row(float *x, int n)
{
    if (n <= 0)
        return;
    float mx[LANES];
    for (int j = 0; j < LANES; j++)
        mx[j] = -INFINITY;
    int i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++)
            mx[j] = x[i + j] > mx[j] ? x[i + j] : mx[j];
    float m = -INFINITY;
    for (int j = 0; j < LANES; j++)
        m = mx[j] > m ? mx[j] : m;
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    /* the exponentials (at the machine's width: the same bits), then their sum in VL partial
     * sums in a fixed order */
    cl_elementwise()->exp_shift(x, (size_t)n, m);
    vf acc = V(0.0f);
    i = 0;
    for (; i + VL <= n; i += VL)
        acc += vload(x + i);
    if (i < n)
        acc += vload_n(x + i, n - i);
    double s = 0;
    for (int j = 0; j < VL; j++)
        s += acc[j];
    scale_f(x, (float)(1.0 / s), n);
}

typedef struct {
    float *x;
    int n, ld;
    int causal; /* < 0: none; else row r sees columns <= causal + r */
    int row0;   /* row index of x's first row (for the causal limit) */
} SoftmaxCtx;

static void softmax_rows(void *p, int begin, int end)
{
    const SoftmaxCtx *c = p;
    for (int r = begin; r < end; r++) {
        float *x = c->x + (size_t)r * c->ld;
        int n = c->n;
        if (c->causal >= 0) {
            n = MIN(c->n, c->causal + c->row0 + r + 1);
            memset(x + n, 0, (size_t)(c->n - n) * sizeof(float));
        }
        softmax_row(x, n);
    }
}

void cl_softmax_rows(float *x, int m, int n, int ld, int causal, int row0)
{
    SoftmaxCtx c = { x, n, ld, causal, row0 };
    softmax_rows(&c, 0, m);
}

static void cpu_softmax(ClBackend *be, float *x, int m, int n, int ld)
{
    SoftmaxCtx c = { x, n, ld, -1, 0 };
    cl_threadpool_run(pool_of(be), m, rows_grain(n), softmax_rows, &c);
}

/* ---- attention ------------------------------------------------------------------------------- */

/* Up to this many queries, attention runs as one fused loop per (head, query) (a decode step):
 * scores, softmax and the weighted sum stay in cache, threads split the heads. Beyond it, each
 * thread takes a group of heads: S = Q K^T (sgemm), softmax rows, O = S V (sgemm), with its own
 * slice of the scratch. */
#define FUSED_MAX_Q 4

static int attention_lanes(ClBackend *be, int n_head)
{
    return MAX(1, MIN(((CpuData *)be->data)->n_threads, n_head));
}

/* enough for every n_q' <= n_q, n_kv' <= n_kv: the fused path's need grows with the heads */
static size_t cpu_attention_scratch(ClBackend *be, int n_q, int n_kv, int n_head)
{
    size_t fused = (size_t)MIN(n_q, FUSED_MAX_Q) * n_head * n_kv;
    if (n_q <= FUSED_MAX_Q)
        return fused;
    return MAX(fused, (size_t)attention_lanes(be, n_head) * n_q * n_kv);
}

typedef struct {
    float *out, *out_tail;
    const float *q, *k, *v;
    int n_q, n_kv, ldq, ldk, ldv, ldo, n_head, group, hd;
    float scale;
    int causal, tail_start;
    float *scratch;
    int lanes;
} AttnCtx;

/* One query's scores against keys j = 0 .. n−1 (rows ldk apart), and a weighted sum of value rows:
 * the portable loops, and the same arithmetic on AVX2 where the CPU has it. The AVX2 versions
 * keep dot_f's summation order (16 partial sums, then added in order) and axpy_f's (o + s·v, a
 * product then a sum, no FMA): both give the same bits; they only keep the sums in registers
 * and take eight keys at a time, which is what a decode step's attention over a long cache
 * spends its time on. */
static void attn_scores_portable(const float *q, const float *k, int ldk, int n, int hd,
                                 float scale, float *s)
{
    for (int j = 0; j < n; j++)
        s[j] = dot_f(q, k + (size_t)j * ldk, hd) * scale;
}

static void attn_values_portable(const float *s, const float *v, int ldv, int j0, int n, int hd,
                                 float *o)
{
    memset(o, 0, (size_t)hd * sizeof(float));
    for (int j = j0; j < n; j++)
        axpy_f(o, s[j], v + (size_t)j * ldv, hd);
}

#if defined(__x86_64__)
#include <immintrin.h>
_Static_assert(LANES == 16, "the AVX2 scores keep dot_f's 16 partial sums in two vectors");

/* r[i] lane j = m[j] lane i, for eight vectors */
__attribute__((target("avx2"))) static inline void transpose8(__m256 m[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(m[i], m[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(m[i], m[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        m[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        m[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* Eight keys' scores from their 16 partial sums (lo[r] lanes 0-7, hi[r] lanes 8-15 of key r),
 * added in dot_f's order, times scale, to s[0..7] */
__attribute__((target("avx2"))) static inline void store_scores(__m256 lo[8], __m256 hi[8],
                                                                float scale, float *s)
{
    transpose8(lo); /* now lane r of lo[i] / hi[i]: key r's partial sum i / 8 + i */
    transpose8(hi);
    __m256 t = _mm256_setzero_ps();
    for (int i = 0; i < 8; i++)
        t = _mm256_add_ps(t, lo[i]);
    for (int i = 0; i < 8; i++)
        t = _mm256_add_ps(t, hi[i]);
    _mm256_storeu_ps(s, _mm256_mul_ps(t, _mm256_set1_ps(scale)));
}

/* hd a multiple of 16 */
__attribute__((target("avx2"))) static void
attn_scores_avx2(const float *q, const float *k, int ldk, int n, int hd, float scale, float *s)
{
    int j0 = 0;
    if (hd == 64) { /* the usual head size: the query stays in registers */
        __m256 qv[8];
        for (int u = 0; u < 8; u++)
            qv[u] = _mm256_loadu_ps(q + 8 * u);
        for (; j0 + 8 <= n; j0 += 8) {
            __m256 lo[8], hi[8];
            for (int r = 0; r < 8; r++) {
                const float *kr = k + (size_t)(j0 + r) * ldk;
                __m256 a = _mm256_mul_ps(qv[0], _mm256_loadu_ps(kr));
                __m256 b = _mm256_mul_ps(qv[1], _mm256_loadu_ps(kr + 8));
                for (int d = 16; d < 64; d += 16) {
                    a = _mm256_add_ps(a, _mm256_mul_ps(qv[d / 8], _mm256_loadu_ps(kr + d)));
                    b = _mm256_add_ps(b, _mm256_mul_ps(qv[d / 8 + 1], _mm256_loadu_ps(kr + d + 8)));
                }
                lo[r] = a, hi[r] = b;
            }
            store_scores(lo, hi, scale, s + j0);
        }
    }
    for (; j0 + 8 <= n; j0 += 8) {
        __m256 lo[8], hi[8];
        for (int r = 0; r < 8; r++) {
            const float *kr = k + (size_t)(j0 + r) * ldk;
            __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
            for (int d = 0; d < hd; d += 16) {
                a = _mm256_add_ps(a,
                                  _mm256_mul_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(kr + d)));
                b = _mm256_add_ps(
                    b, _mm256_mul_ps(_mm256_loadu_ps(q + d + 8), _mm256_loadu_ps(kr + d + 8)));
            }
            lo[r] = a, hi[r] = b;
        }
        store_scores(lo, hi, scale, s + j0);
    }
    attn_scores_portable(q, k + (size_t)j0 * ldk, ldk, n - j0, hd, scale, s + j0);
}

/* hd a multiple of 8: 64 values (eight vectors) of o at a time, summed over j in registers */
__attribute__((target("avx2"))) static void
attn_values_avx2(const float *s, const float *v, int ldv, int j0, int n, int hd, float *o)
{
    int c = 0;
    for (; c + 64 <= hd; c += 64) {
        __m256 acc[8];
        for (int u = 0; u < 8; u++)
            acc[u] = _mm256_setzero_ps();
        for (int j = j0; j < n; j++) {
            const float *vr = v + (size_t)j * ldv + c;
            const __m256 a = _mm256_set1_ps(s[j]);
            for (int u = 0; u < 8; u++)
                acc[u] = _mm256_add_ps(acc[u], _mm256_mul_ps(a, _mm256_loadu_ps(vr + 8 * u)));
        }
        for (int u = 0; u < 8; u++)
            _mm256_storeu_ps(o + c + 8 * u, acc[u]);
    }
    for (; c < hd; c += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int j = j0; j < n; j++)
            acc = _mm256_add_ps(
                acc, _mm256_mul_ps(_mm256_set1_ps(s[j]), _mm256_loadu_ps(v + (size_t)j * ldv + c)));
        _mm256_storeu_ps(o + c, acc);
    }
}

#endif

static int simd_allowed = 1;

gboolean cl_backend_cpu_set_simd(gboolean use)
{
    return __atomic_exchange_n(&simd_allowed, use ? 1 : 0, __ATOMIC_RELAXED);
}

#if defined(__x86_64__)
static gboolean attn_avx2(int hd)
{
    return __atomic_load_n(&simd_allowed, __ATOMIC_RELAXED) && __builtin_cpu_supports("avx2") &&
           hd % 16 == 0;
}
#endif

static void attention_fused(void *p, int begin, int end)
{
    const AttnCtx *c = p;
#if defined(__x86_64__)
    const gboolean avx2 = attn_avx2(c->hd);
#endif
    for (int item = begin; item < end; item++) {
        int h = item / c->n_q, i = item % c->n_q;
        int g = h / c->group;
        int n_vis = c->causal < 0 ? c->n_kv : MIN(c->n_kv, c->causal + i + 1);
        const float *q = c->q + (size_t)i * c->ldq + (size_t)h * c->hd;
        const float *k = c->k + (size_t)g * c->hd, *v = c->v + (size_t)g * c->hd;
        float *s = c->scratch + (size_t)item * c->n_kv;
        float *o = c->out + (size_t)i * c->ldo + (size_t)h * c->hd;
        float *ot = c->out_tail ? c->out_tail + (size_t)i * c->ldo + (size_t)h * c->hd : NULL;
        const int t0 = MAX(c->tail_start, 0);
#if defined(__x86_64__)
        if (avx2) {
            attn_scores_avx2(q, k, c->ldk, n_vis, c->hd, c->scale, s);
            softmax_row(s, n_vis);
            attn_values_avx2(s, v, c->ldv, 0, n_vis, c->hd, o);
            if (ot)
                attn_values_avx2(s, v, c->ldv, t0, n_vis, c->hd, ot);
            continue;
        }
#endif
        attn_scores_portable(q, k, c->ldk, n_vis, c->hd, c->scale, s);
        softmax_row(s, n_vis);
        attn_values_portable(s, v, c->ldv, 0, n_vis, c->hd, o);
        if (ot)
            attn_values_portable(s, v, c->ldv, t0, n_vis, c->hd, ot);
    }
}

/* Rows per block of a long causal attention without a tail output (the training decoder's
 * forward): each block's products stop at the last key its rows see, which skips most of the
 * masked upper triangle. */
#define CAUSAL_BLOCK_ROWS 64

/* lane = one task: heads [n_head·lane/lanes, n_head·(lane+1)/lanes) */
static void attention_lanes_run(void *p, int begin, int end)
{
    const AttnCtx *c = p;
    const int hd = c->hd, n_q = c->n_q, n_kv = c->n_kv;
    const int tail = c->out_tail ? n_kv - MAX(c->tail_start, 0) : 0;
    for (int lane = begin; lane < end; lane++) {
        float *scores = c->scratch + (size_t)lane * n_q * n_kv;
        int h0 = (int)((gint64)c->n_head * lane / c->lanes);
        int h1 = (int)((gint64)c->n_head * (lane + 1) / c->lanes);
        for (int h = h0; h < h1; h++) {
            int g = h / c->group;
            const float *qh = c->q + (size_t)h * hd;
            const float *kg = c->k + (size_t)g * hd;
            const float *vg = c->v + (size_t)g * hd;
            if (c->causal >= 0 && !c->out_tail && n_q > CAUSAL_BLOCK_ROWS) {
                /* causal: a block of rows only needs the keys its last row sees */
                for (int i0 = 0; i0 < n_q; i0 += CAUSAL_BLOCK_ROWS) {
                    const int r = MIN(CAUSAL_BLOCK_ROWS, n_q - i0);
                    const int cols = MIN(n_kv, c->causal + i0 + r);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, cols, hd, c->scale,
                                qh + (size_t)i0 * c->ldq, c->ldq, kg, c->ldk, 0.0f, scores, cols);
                    SoftmaxCtx sc = { scores, cols, cols, c->causal, i0 };
                    softmax_rows(&sc, 0, r);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, hd, cols, 1.0f,
                                scores, cols, vg, c->ldv, 0.0f,
                                c->out + (size_t)i0 * c->ldo + (size_t)h * hd, c->ldo);
                }
                continue;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n_q, n_kv, hd, c->scale, qh,
                        c->ldq, kg, c->ldk, 0.0f, scores, n_kv);
            SoftmaxCtx sc = { scores, n_kv, n_kv, c->causal, 0 };
            softmax_rows(&sc, 0, n_q);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n_q, hd, n_kv, 1.0f, scores,
                        n_kv, vg, c->ldv, 0.0f, c->out + (size_t)h * hd, c->ldo);
            if (c->out_tail) {
                float *oh = c->out_tail + (size_t)h * hd;
                if (tail > 0)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n_q, hd, tail, 1.0f,
                                scores + (n_kv - tail), n_kv, vg + (size_t)(n_kv - tail) * c->ldv,
                                c->ldv, 0.0f, oh, c->ldo);
                else
                    for (int i = 0; i < n_q; i++)
                        memset(oh + (size_t)i * c->ldo, 0, (size_t)hd * sizeof(float));
            }
        }
    }
}

static void cpu_attention(ClBackend *be, float *out, float *out_tail, const float *q,
                          const float *k, const float *v, int n_q, int n_kv, int ldq, int ldk,
                          int ldv, int ldo, int n_head, int n_kv_head, int head_dim, float scale,
                          int causal, int tail_start, float *scratch)
{
    AttnCtx c = { out,
                  out_tail,
                  q,
                  k,
                  v,
                  n_q,
                  n_kv,
                  ldq,
                  ldk,
                  ldv,
                  ldo,
                  n_head,
                  n_head / n_kv_head,
                  head_dim,
                  scale,
                  causal,
                  tail_start,
                  scratch,
                  attention_lanes(be, n_head) };
    if (n_q <= FUSED_MAX_Q) {
        /* one item = one head's query: n_kv·head_dim·2 multiply-adds (a decode step's nine heads
         * over a hundred keys are worth two threads) */
        int grain = MAX(1, GRAIN_FLOATS / MAX(1, n_kv * head_dim / 8));
        cl_threadpool_run(pool_of(be), n_head * n_q, grain, attention_fused, &c);
        return;
    }
    /* small problems on one lane: a wake-up would cost more than it saves */
    if ((gint64)n_q * n_kv * head_dim * n_head < SPLIT_MACS)
        c.lanes = 1;
    int prev = blas_enter();
    cl_threadpool_run(pool_of(be), c.lanes, 1, attention_lanes_run, &c);
    blas_leave(prev);
}

/* ---- row statistics, embedding --------------------------------------------------------------- */

typedef struct {
    float *out;
    const float *a, *b;
    int n, ld;
} RowStatCtx;

static void row_norms_rows(void *p, int begin, int end)
{
    const RowStatCtx *c = p;
    for (int r = begin; r < end; r++) {
        const float *a = c->a + (size_t)r * c->ld;
        if (!c->b) {
            c->out[r] = (float)sqrt(sumsq_centered(a, c->n, 0.0));
            continue;
        }
        const float *b = c->b + (size_t)r * c->ld;
        double acc[LANES] = { 0 };
        int i = 0;
        for (; i + LANES <= c->n; i += LANES)
            for (int j = 0; j < LANES; j++) {
                double d = (double)a[i + j] - (double)b[i + j];
                acc[j] += d * d;
            }
        double s = 0;
        for (int j = 0; j < LANES; j++)
            s += acc[j];
        for (; i < c->n; i++) {
            double d = (double)a[i] - (double)b[i];
            s += d * d;
        }
        c->out[r] = (float)sqrt(s);
    }
}

static void cpu_row_norms(ClBackend *be, float *out, const float *a, const float *b, int m, int n,
                          int ld)
{
    RowStatCtx c = { out, a, b, n, ld };
    cl_threadpool_run(pool_of(be), m, rows_grain(n), row_norms_rows, &c);
}

static void cpu_embed(ClBackend *be, float *out, const float *table, const gint32 *ids, int n,
                      int dim)
{
    for (int i = 0; i < n; i++)
        if (ids[i] >= 0)
            memcpy(out + (size_t)i * dim, table + (size_t)ids[i] * dim,
                   (size_t)dim * sizeof(float));
}

/* ---- the encoder's layout ops ---------------------------------------------------------------- */

void cl_patch_unfold(float *patches, const float *pixels, int C, int S, int P)
{
    const int G = S / P;
    for (int r = 0; r < G; r++)
        for (int cc = 0; cc < G; cc++) {
            float *dst = patches + ((size_t)r * G + cc) * C * P * P;
            for (int c = 0; c < C; c++)
                for (int py = 0; py < P; py++)
                    memcpy(dst + ((size_t)c * P + py) * P,
                           pixels + ((size_t)c * S + (size_t)r * P + py) * S + (size_t)cc * P,
                           (size_t)P * sizeof(float));
        }
}

static void cpu_im2col(ClBackend *be, float *patches, const float *pixels, int C, int S, int P)
{
    (void)be;
    cl_patch_unfold(patches, pixels, C, S, P);
}

static void cpu_merge2x2(ClBackend *be, float *out, const float *x, int G, int D)
{
    (void)be;
    const size_t row = (size_t)D * sizeof(float);
    for (int i = 0; i < G / 2; i++)
        for (int j = 0; j < G / 2; j++) {
            float *dst = out + ((size_t)i * (G / 2) + j) * 4 * D;
            memcpy(dst, x + ((size_t)(2 * i) * G + 2 * j) * D, row);
            memcpy(dst + D, x + ((size_t)(2 * i) * G + 2 * j + 1) * D, row);
            memcpy(dst + 2 * D, x + ((size_t)(2 * i + 1) * G + 2 * j) * D, row);
            memcpy(dst + 3 * D, x + ((size_t)(2 * i + 1) * G + 2 * j + 1) * D, row);
        }
}

static void cpu_col_mean(ClBackend *be, float *out, const float *x, int m, int n)
{
    (void)be;
    for (int j = 0; j < n; j++) {
        double acc = 0;
        for (int i = 0; i < m; i++)
            acc += x[(size_t)i * n + j];
        out[j] = (float)(acc / m);
    }
}

void cl_center_columns(float *x, int m, int n)
{
    if (m <= 0 || n <= 0)
        return;
    double *mean = g_new0(double, (size_t)n);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            mean[j] += x[(size_t)i * n + j];
    for (int j = 0; j < n; j++)
        mean[j] /= m;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            x[(size_t)i * n + j] = (float)(x[(size_t)i * n + j] - mean[j]);
    g_free(mean);
}

static void cpu_center_cols(ClBackend *be, float *x, int m, int n)
{
    (void)be;
    cl_center_columns(x, m, n);
}

static void cpu_scale_by(ClBackend *be, float *x, const float *s, size_t count)
{
    (void)be;
    const float a = s[0];
    for (size_t i = 0; i < count; i++)
        x[i] *= a;
}

/* ---- memory: the host's ------------------------------------------------------------------------ */

static void *cpu_alloc(ClBackend *be, size_t bytes)
{
    (void)be;
    return g_try_malloc(MAX(bytes, 1));
}

static void cpu_release(ClBackend *be, void *p)
{
    (void)be;
    g_free(p);
}

static void cpu_memcpy(ClBackend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    if (bytes)
        memcpy(dst, src, bytes);
}

static void cpu_zero(ClBackend *be, void *dst, size_t bytes)
{
    (void)be;
    if (bytes)
        memset(dst, 0, bytes);
}

static gboolean cpu_finish(ClBackend *be, GError **error)
{
    (void)be;
    (void)error;
    return TRUE;
}

/* ---- the backend ----------------------------------------------------------------------------- */

static void cpu_destroy(ClBackend *be)
{
    CpuData *d = be->data;
    cl_threadpool_free(d->pool);
    g_free(d);
}

static const struct cl_backend_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .host_memory = TRUE,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_memcpy,
    .download = cpu_memcpy,
    .copy = cpu_memcpy,
    .zero = cpu_zero,
    .finish = cpu_finish,
    .linear = cpu_linear,
    .gemm = cpu_gemm,
    .layernorm = cpu_layernorm,
    .rmsnorm = cpu_rmsnorm,
    .modulate = cpu_modulate,
    .gelu = cpu_gelu,
    .silu = cpu_silu,
    .silu_mul = cpu_silu_mul,
    .add = cpu_add,
    .residual = cpu_residual,
    .scale_cols = cpu_scale_cols,
    .rope = cpu_rope,
    .softmax = cpu_softmax,
    .attention = cpu_attention,
    .attention_scratch = cpu_attention_scratch,
    .row_norms = cpu_row_norms,
    .embed = cpu_embed,
    .im2col = cpu_im2col,
    .merge2x2 = cpu_merge2x2,
    .col_mean = cpu_col_mean,
    .center_cols = cpu_center_cols,
    .scale_by = cpu_scale_by,
    .train = &cl_cpu_train_ops,
};

ClBackend *cl_backend_cpu_new(int n_threads)
{
    if (n_threads <= 0)
        n_threads = (int)g_get_num_processors();
    n_threads = CLAMP(n_threads, 1, 256);
    /* blas.c chose OpenBLAS's kernels before main; a CPU they do not fit is worth a warning */
    if (!cl_blas_kernels_fit_cpu())
        g_message("OpenBLAS runs its SSE3 kernels (%s) on a CPU with AVX2 or AVX-512: products "
                  "will be several times slower than they could be",
                  cl_blas_kernels());
    CpuData *d = g_new0(CpuData, 1);
    d->pool = cl_threadpool_new(n_threads);
    d->n_threads = cl_threadpool_size(d->pool);
    ClBackend *be = g_new0(ClBackend, 1);
    be->ops = &cpu_ops;
    be->data = d;
    return be;
}

int cl_backend_cpu_threads(const ClBackend *be)
{
    g_return_val_if_fail(be != NULL, 0);
    if (be->ops != &cpu_ops)
        return 0;
    return ((const CpuData *)be->data)->n_threads;
}
