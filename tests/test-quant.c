/* test-quant.c - the products on weights as stored (nn/quant.c): quantizers against the block
 * formats' definitions, the AVX2 dot products against the scalar reference, the decode step's
 * matrix-vector product and the prefill's tiled product against f32 on the dequantized weights;
 * F16 and BF16 rows the same way. */
#include <math.h>
#include <string.h>

#include "nn/half.h"
#include "nn/quant.h"
#include "nn/threadpool.h"

static void fill(float *x, size_t n, guint32 seed, float scale)
{
    GRand *r = g_rand_new_with_seed(seed);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)g_rand_double_range(r, -scale, scale);
    g_rand_free(r);
}

/* normalised squared error of a against the reference */
static double nmse(const float *a, const float *ref, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        g_assert_true(isfinite(a[i]));
        e += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        s += (double)ref[i] * ref[i];
    }
    return s > 0 ? e / s : e;
}

/* Quantize → dequantize stays within half a step of each block's grid. */
static void test_roundtrip(void)
{
    enum { k = 256, n = 8 };
    float x[n * k], y[n * k];
    fill(x, n * k, 1, 3.0f);
    x[5] = 0; /* a block with one exact zero, and one constant block */
    for (int j = 32; j < 64; j++)
        x[j] = 0.75f;
    for (int t = 0; t < CL_QUANT_N_TYPES; t++) {
        g_autofree guint8 *q = g_malloc(cl_quant_row_bytes(t, k) * n);
        cl_quantize_rows(t, x, q, n, k);
        cl_dequantize_rows(t, q, y, n, k);
        for (int b = 0; b < n * k / 32; b++) {
            float lo = INFINITY, hi = -INFINITY;
            for (int j = 0; j < 32; j++)
                lo = fminf(lo, x[32 * b + j]), hi = fmaxf(hi, x[32 * b + j]);
            /* step: max|x|/127 (Q8_0), (max − min)/15 (Q4_1); the f16 scale and offset add
             * up to 2^-11 of the block's range each */
            float step = t == CL_QUANT_Q8_0 ? fmaxf(fabsf(lo), fabsf(hi)) / 127 : (hi - lo) / 15;
            for (int j = 0; !CL_QUANT_IS_BLOCK(t) && j < 32; j++) {
                /* halves: round to nearest, half a unit in the last place (2^-11 relative for
                 * f16's 11-bit significand, 2^-8 for bf16's 8) */
                float v = x[32 * b + j], rel = t == CL_QUANT_F16 ? 0x1p-11f : 0x1p-8f;
                g_assert_cmpfloat(fabsf(y[32 * b + j] - v), <=, fabsf(v) * rel);
                g_assert_cmpfloat(y[32 * b + j], ==,
                                  t == CL_QUANT_F16 ? cl_f16_to_f32(cl_f32_to_f16(v))
                                                    : cl_bf16_to_f32(cl_f32_to_bf16(v)));
            }
            for (int j = 0; CL_QUANT_IS_BLOCK(t) && j < 32; j++) {
                float err = fabsf(y[32 * b + j] - x[32 * b + j]);
                if (err > 0.5f * step + 1e-3f * (fabsf(lo) + fabsf(hi)) + 1e-6f)
                    g_error("%s block %d elem %d: %g -> %g (step %g)", cl_quant_type_name(t), b, j,
                            x[32 * b + j], y[32 * b + j], step);
            }
        }
        for (int j = 32; t == CL_QUANT_Q4_1 && j < 64; j++) /* a constant block: m, exactly */
            g_assert_cmpfloat(y[j], ==, 0.75f);
    }
}

/* Q4_1's nibble order: element j is the low nibble of byte j, element j + 16 the high one. */
static void test_layout(void)
{
    guint8 b[20] = { 0 };
    uint16_t d = cl_f32_to_f16(1.0f), m = cl_f32_to_f16(-2.0f);
    b[0] = d & 255, b[1] = d >> 8, b[2] = m & 255, b[3] = m >> 8;
    b[4] = 0x72; /* element 0: 2, element 16: 7 */
    float y[32];
    cl_dequantize_rows(CL_QUANT_Q4_1, b, y, 1, 32);
    g_assert_cmpfloat(y[0], ==, 0.0f);
    g_assert_cmpfloat(y[16], ==, 5.0f);
    g_assert_cmpfloat(y[1], ==, -2.0f);
}

static void check_matvec(ClQuantType t, ClThreadPool *pool)
{
    const int m = 133, k = 576;
    g_autofree float *w = g_new(float, (size_t)m * k), *wd = g_new(float, (size_t)m * k);
    float x[576], ref[133], y_scalar[133], y_auto[133];
    fill(w, (size_t)m * k, 2, 0.1f);
    fill(x, k, 3, 2.0f);
    g_autofree guint8 *q = g_malloc(cl_quant_row_bytes(t, k) * m);
    cl_quantize_rows(t, w, q, m, k);
    cl_dequantize_rows(t, q, wd, m, k);
    for (int i = 0; i < m; i++) {
        double s = 0;
        for (int j = 0; j < k; j++)
            s += (double)wd[(size_t)i * k + j] * x[j];
        ref[i] = (float)s;
    }
    cl_quant_set_kernels(CL_QUANT_KERNELS_SCALAR);
    cl_quant_matvec(NULL, t, q, m, k, x, y_scalar);
    const char *level = cl_quant_set_kernels(CL_QUANT_KERNELS_AUTO);
    cl_quant_matvec(pool, t, q, m, k, x, y_auto);
    /* blocks: the same integer sums, only the float accumulation order differs; halves: the
     * same products, fused (AVX2) or not (scalar), summed in another order — f32 rounding over
     * 576 terms of ~0.1 each */
    for (int i = 0; i < m; i++)
        g_assert_cmpfloat_with_epsilon(y_auto[i], y_scalar[i], 1e-4f * (1 + fabsf(y_scalar[i])));
    /* against f32 on the same weights: the activations' 8-bit blocks, ~0.4 % of a block's max;
     * halves take x as it is, so only f32 rounding is left */
    double e = nmse(y_scalar, ref, m), e_auto = nmse(y_auto, ref, m);
    g_test_message("%s matvec (%s): nmse vs f32 %.2e (scalar), %.2e (%s)", cl_quant_type_name(t),
                   level, e, e_auto, level);
    g_assert_cmpfloat(e, <, CL_QUANT_IS_BLOCK(t) ? 1e-4 : 1e-11);
    g_assert_cmpfloat(e_auto, <, CL_QUANT_IS_BLOCK(t) ? 1e-4 : 1e-11);
    if (!CL_QUANT_IS_BLOCK(t)) {
        /* and against f32 on the original weights: the halves' own rounding (2^-11 or 2^-8
         * relative per weight, random in sign: nmse ~ 2^-22·k/k or 2^-16) */
        double s2 = 0, e2 = 0;
        for (int i = 0; i < m; i++) {
            double r = 0;
            for (int j = 0; j < k; j++)
                r += (double)w[(size_t)i * k + j] * x[j];
            e2 += (y_auto[i] - r) * (y_auto[i] - r), s2 += r * r;
        }
        g_test_message("%s matvec: nmse vs the f32 weights %.2e", cl_quant_type_name(t), e2 / s2);
        g_assert_cmpfloat(e2 / s2, <, t == CL_QUANT_F16 ? 1e-6 : 1e-4);
    }
}

static void test_matvec(void)
{
    ClThreadPool *pool = cl_threadpool_new(2);
    for (int t = 0; t < CL_QUANT_N_TYPES; t++)
        check_matvec((ClQuantType)t, pool);
    cl_threadpool_free(pool);
}

/* Three matrices over the same x in one job = three matrix-vector products. */
static void test_matvec_multi(void)
{
    enum { k = 96 };
    const int ms[3] = { 37, 8, 64 };
    const ClQuantType ts[3] = { CL_QUANT_Q4_1, CL_QUANT_F16, CL_QUANT_BF16 }; /* mixed kinds */
    float x[k], w[64 * k], y_one[3][64], y_multi[3][64];
    guint8 *q[3];
    ClQuantMatvec mv[3];
    fill(x, k, 9, 1.0f);
    ClThreadPool *pool = cl_threadpool_new(2);
    for (int j = 0; j < 3; j++) {
        fill(w, (size_t)ms[j] * k, 10 + j, 0.3f);
        q[j] = g_malloc(cl_quant_row_bytes(ts[j], k) * ms[j]);
        cl_quantize_rows(ts[j], w, q[j], ms[j], k);
        cl_quant_matvec(NULL, ts[j], q[j], ms[j], k, x, y_one[j]);
        mv[j] = (ClQuantMatvec){ ts[j], q[j], ms[j], y_multi[j] };
    }
    cl_quant_matvec_multi(pool, mv, 3, k, x);
    for (int j = 0; j < 3; j++) {
        for (int i = 0; i < ms[j]; i++)
            g_assert_cmpfloat(y_multi[j][i], ==, y_one[j][i]); /* the same kernels, rows, order */
        g_free(q[j]);
    }
    cl_threadpool_free(pool);
}

/* The activations' 8-bit blocks round halves away from zero (as roundf and llama.cpp's reference
 * quantizer) with every kernel level: one-hot Q8_0 rows read the quantized activations back. */
static void test_activation_rounding(void)
{
    enum { k = 64 };
    float x[k], w[k * k], y_scalar[k], y_auto[k];
    const float halves[] = { 2.5f, -2.5f, 3.5f, -0.5f, 0.5f, 0.49999997f, -126.5f, 1.5f };
    for (int j = 0; j < k; j++)
        x[j] = j % 32 == 0 ? 127.0f : halves[j % 8] + (float)(j / 8 % 4) * (j % 2 ? -10 : 10);
    memset(w, 0, sizeof w);
    for (int i = 0; i < k; i++)
        w[i * k + i] = 1.0f;
    g_autofree guint8 *q = g_malloc(cl_quant_row_bytes(CL_QUANT_Q8_0, k) * k);
    cl_quantize_rows(CL_QUANT_Q8_0, w, q, k, k);
    cl_quant_set_kernels(CL_QUANT_KERNELS_SCALAR);
    cl_quant_matvec(NULL, CL_QUANT_Q8_0, q, k, k, x, y_scalar);
    const char *level = cl_quant_set_kernels(CL_QUANT_KERNELS_AUTO);
    cl_quant_matvec(NULL, CL_QUANT_Q8_0, q, k, k, x, y_auto);
    g_test_message("activation blocks with %s kernels", level);
    for (int i = 0; i < k; i++) {
        g_assert_cmpfloat(y_auto[i], ==, y_scalar[i]); /* the same blocks, bit for bit */
        /* d = 1 in both blocks: the value read back is roundf(x) up to the f16 scales */
        g_assert_cmpfloat_with_epsilon(y_auto[i], roundf(x[i]), 0.01f * (1 + fabsf(x[i])));
    }
}

static void test_matmul(void)
{
    const int m = 200, k = 96, n = 7;
    ClThreadPool *pool = cl_threadpool_new(2);
    for (int t = 0; t < CL_QUANT_N_TYPES; t++) {
        g_autofree float *w = g_new(float, (size_t)m * k), *wd = g_new(float, (size_t)m * k);
        g_autofree float *X = g_new(float, (size_t)n * k), *Y = g_new(float, (size_t)n * m);
        g_autofree float *R = g_new(float, (size_t)n * m);
        fill(w, (size_t)m * k, 4, 0.2f);
        fill(X, (size_t)n * k, 5, 1.0f);
        g_autofree guint8 *q = g_malloc(cl_quant_row_bytes(t, k) * m);
        cl_quantize_rows(t, w, q, m, k);
        cl_dequantize_rows(t, q, wd, m, k);
        for (int r = 0; r < n; r++)
            for (int i = 0; i < m; i++) {
                double s = 0;
                for (int j = 0; j < k; j++)
                    s += (double)X[(size_t)r * k + j] * wd[(size_t)i * k + j];
                R[(size_t)r * m + i] = (float)s;
            }
        cl_quant_matmul(pool, t, FALSE, q, m, k, X, n, Y);
        /* f32 products of the dequantized tiles: rounding only */
        g_assert_cmpfloat(nmse(Y, R, (size_t)n * m), <, 1e-10);
    }
    cl_threadpool_free(pool);
}

/* The x4 layout: the same bytes (unpacked back exactly), the same products as the rows it came
 * from — bit for bit with the scalar kernels (each row summed in the same order), within float
 * rounding with AVX2 — in a decode step's job beside a plain matrix, and in prefill tiles. */
static void test_x4(void)
{
    enum { m = 137, k = 576, n = 5 }; /* 34 quads and a plain row */
    ClThreadPool *pool = cl_threadpool_new(2);
    for (int t = CL_QUANT_Q8_0; t <= CL_QUANT_Q4_1; t++) {
        size_t bytes = cl_quant_row_bytes(t, k) * m;
        g_autofree float *w = g_new(float, (size_t)m * k), *X = g_new(float, (size_t)n * k);
        g_autofree float *Y = g_new(float, (size_t)n * m), *Y4 = g_new(float, (size_t)n * m);
        float x[k], y[m], y4[m], y_auto[m], y4_auto[m], y_other[8], y_other4[8];
        fill(w, (size_t)m * k, 20 + t, 0.3f);
        fill(x, k, 21, 1.5f);
        fill(X, (size_t)n * k, 22, 1.0f);
        g_autofree guint8 *q = g_malloc(bytes), *q4 = g_malloc(bytes), *back = g_malloc(bytes);
        cl_quantize_rows(t, w, q, m, k);
        cl_quant_pack4(t, q, q4, m, k);
        g_assert_true(memcmp(q, q4, bytes) != 0);
        cl_quant_unpack4(t, q4, back, m, k);
        g_assert_cmpmem(back, bytes, q, bytes);
        /* a plain matrix first in the same job: q's first 8 rows */
        cl_quant_set_kernels(CL_QUANT_KERNELS_SCALAR);
        cl_quant_matvec_multi(
            NULL, (ClQuantMatvec[]){ { t, q, 8, y_other, FALSE }, { t, q, m, y, FALSE } }, 2, k, x);
        cl_quant_matvec_multi(
            pool, (ClQuantMatvec[]){ { t, q, 8, y_other4, FALSE }, { t, q4, m, y4, TRUE } }, 2, k,
            x);
        for (int i = 0; i < m; i++)
            g_assert_cmpfloat(y4[i], ==, y[i]);
        for (int i = 0; i < 8; i++)
            g_assert_cmpfloat(y_other4[i], ==, y[i]);
        const char *level = cl_quant_set_kernels(CL_QUANT_KERNELS_AUTO);
        cl_quant_matvec_multi(pool, &(ClQuantMatvec){ t, q4, m, y4_auto, TRUE }, 1, k, x);
        cl_quant_matvec(pool, t, q, m, k, x, y_auto);
        for (int i = 0; i < m; i++) {
            g_assert_cmpfloat_with_epsilon(y4_auto[i], y[i], 1e-4f * (1 + fabsf(y[i])));
            g_assert_cmpfloat_with_epsilon(y_auto[i], y[i], 1e-4f * (1 + fabsf(y[i])));
        }
        g_test_message("%s x4 (%s): matvec as the rows'", cl_quant_type_name(t), level);
        cl_quant_matmul(pool, t, FALSE, q, m, k, X, n, Y);
        cl_quant_matmul(pool, t, TRUE, q4, m, k, X, n, Y4);
        g_assert_cmpmem(Y4, sizeof(float) * n * m, Y, sizeof(float) * n * m);
    }
    cl_threadpool_free(pool);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/quant/roundtrip", test_roundtrip);
    g_test_add_func("/quant/layout", test_layout);
    g_test_add_func("/quant/matvec", test_matvec);
    g_test_add_func("/quant/matvec-multi", test_matvec_multi);
    g_test_add_func("/quant/matmul", test_matmul);
    g_test_add_func("/quant/activation-rounding", test_activation_rounding);
    g_test_add_func("/quant/x4", test_x4);
    return g_test_run();
}
