/* test-nn.c - every CPU backend op against a plain scalar double-precision reference. */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include <glib.h>

#include "nn/backend.h"
#include "nn/blas.h"
#include "nn/elementwise.h"
#include "nn/threadpool.h"

/* Float sums of K products: the classic forward error bound of a dot product in any summation
 * order is γ_K · Σ|a_k·b_k| with γ_K ≈ K·2^-24; we allow K·FLT_EPSILON (= 2·K·2^-24), which
 * covers the bound with a factor 2 for the final rounding and the preloaded bias. */
#define DOT_TOL(K) ((double)(K)*FLT_EPSILON)

static ClBackend *be;
static GRand *rng;

static float *rand_vec(size_t n, double scale)
{
    float *x = g_new(float, n);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(g_rand_double_range(rng, -1.0, 1.0) * scale);
    return x;
}

/* |got − ref| <= atol + rtol·|ref| + mag[i]·dtol per element (mag may be NULL); NaN/Inf fail. */
static gboolean check_close(const char *what, const float *got, const double *ref,
                            const double *mag, size_t n, double atol, double rtol, double dtol)
{
    for (size_t i = 0; i < n; i++) {
        double tol = atol + rtol * fabs(ref[i]) + (mag ? mag[i] * dtol : 0.0);
        if (!isfinite(got[i]) || !(fabs((double)got[i] - ref[i]) <= tol)) {
            g_test_message("%s: element %zu: got %.9g, want %.9g (tol %.3g)", what, i,
                           (double)got[i], ref[i], tol);
            g_printerr("%s: element %zu: got %.9g, want %.9g (tol %.3g)\n", what, i, (double)got[i],
                       ref[i], tol);
            g_test_fail();
            return FALSE;
        }
    }
    return TRUE;
}

static double gelu_ref(double x)
{
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static double silu_ref(double x)
{
    return x / (1.0 + exp(-x));
}

/* ---- products ---- */

static void test_linear(void)
{
    /* the last three exceed the backend's split threshold (2^22 multiply-adds): their output
     * columns are cut into blocks, one per thread (sgemv blocks for m = 1) */
    int shapes[][3] = { { 1, 7, 5 },       { 1, 64, 300 },   { 3, 17, 9 },
                        { 37, 33, 65 },    { 128, 96, 40 },  { 5, 1, 1 },
                        { 1, 2300, 2001 }, { 70, 400, 181 }, { 300, 130, 131 } };
    for (size_t s = 0; s < G_N_ELEMENTS(shapes); s++) {
        int m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            g_autofree float *x = rand_vec((size_t)m * k, 1.0);
            g_autofree float *w = rand_vec((size_t)n * k, 0.5);
            g_autofree float *b = with_bias ? rand_vec(n, 1.0) : NULL;
            g_autofree float *out = rand_vec((size_t)m * n, 100.0); /* garbage: overwritten */
            g_autofree double *ref = g_new(double, (size_t)m * n);
            g_autofree double *mag = g_new(double, (size_t)m * n);
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    double acc = b ? b[j] : 0, am = b ? fabs(b[j]) : 0;
                    for (int q = 0; q < k; q++) {
                        acc += (double)x[i * k + q] * w[j * k + q];
                        am += fabs((double)x[i * k + q] * w[j * k + q]);
                    }
                    ref[i * n + j] = acc;
                    mag[i * n + j] = am;
                }
            be->ops->linear(be, out, x, w, b, m, k, n);
            g_autofree char *what = g_strdup_printf("linear %dx%dx%d bias=%d", m, k, n, with_bias);
            check_close(what, out, ref, mag, (size_t)m * n, 0, 0, DOT_TOL(k + 1));
        }
    }
}

static void test_gemm(void)
{
    /* 13x21x29, then one above the split threshold (2^22: column blocks per thread) */
    for (int big = 0; big < 2; big++) {
        int m = big ? 150 : 13, n = big ? 250 : 21, k = big ? 127 : 29;
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                /* strided: leading dims larger than the rows */
                int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 5;
                g_autofree float *a = rand_vec((size_t)(ta ? k : m) * lda, 1.0);
                g_autofree float *b = rand_vec((size_t)(tb ? n : k) * ldb, 1.0);
                g_autofree float *c = rand_vec((size_t)m * ldc, 1.0);
                g_autofree double *ref = g_new(double, (size_t)m * n);
                g_autofree double *mag = g_new(double, (size_t)m * n);
                g_autofree float *got = g_new(float, (size_t)m * n);
                float alpha = 0.75f, beta = -0.5f;
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < n; j++) {
                        double acc = 0, am = 0;
                        for (int q = 0; q < k; q++) {
                            double av = ta ? a[q * lda + i] : a[i * lda + q];
                            double bv = tb ? b[j * ldb + q] : b[q * ldb + j];
                            acc += av * bv;
                            am += fabs(av * bv);
                        }
                        ref[i * n + j] = alpha * acc + beta * c[i * ldc + j];
                        mag[i * n + j] = am + fabs(c[i * ldc + j]);
                    }
                be->ops->gemm(be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
                for (int i = 0; i < m; i++)
                    memcpy(got + i * n, c + i * ldc, n * sizeof(float));
                g_autofree char *what =
                    g_strdup_printf("gemm %dx%dx%d ta=%d tb=%d", m, n, k, ta, tb);
                check_close(what, got, ref, mag, (size_t)m * n, 0, 0, DOT_TOL(k + 2));
            }
    }
}

/* ---- norms ---- */

static void test_norms(void)
{
    int shapes[][2] = { { 1, 1 }, { 3, 5 }, { 7, 33 }, { 64, 768 }, { 300, 19 } };
    for (size_t s = 0; s < G_N_ELEMENTS(shapes); s++) {
        int m = shapes[s][0], n = shapes[s][1];
        float eps = 1e-6f;
        g_autofree float *x = rand_vec((size_t)m * n, 3.0);
        for (int i = 0; i < m * n; i++)
            x[i] += 2.0f; /* a mean far from zero: catches one-pass variance */
        g_autofree float *w = rand_vec(n, 1.0);
        g_autofree float *b = rand_vec(n, 1.0);
        g_autofree float *out = g_new(float, (size_t)m * n);
        g_autofree double *ref = g_new(double, (size_t)m * n);
        g_autofree double *ref2 = g_new(double, (size_t)m * n);
        for (int i = 0; i < m; i++) {
            double mean = 0, var = 0, ms = 0;
            for (int j = 0; j < n; j++)
                mean += x[i * n + j];
            mean /= n;
            for (int j = 0; j < n; j++) {
                var += (x[i * n + j] - mean) * (x[i * n + j] - mean);
                ms += (double)x[i * n + j] * x[i * n + j];
            }
            var /= n;
            ms /= n;
            for (int j = 0; j < n; j++) {
                ref[i * n + j] = (x[i * n + j] - mean) / sqrt(var + eps) * w[j] + b[j];
                ref2[i * n + j] = x[i * n + j] / sqrt(ms + eps) * w[j];
            }
        }
        /* Inputs are O(5): the float result rounds mean, rstd and the products (a few ulp of
         * O(1) values, 1e-6 relative covers them); n = 1 has var = 0 and an output of b. */
        g_autofree char *w1 = g_strdup_printf("layernorm %dx%d", m, n);
        be->ops->layernorm(be, out, x, w, b, m, n, eps);
        check_close(w1, out, ref, NULL, (size_t)m * n, 2e-6, 2e-6, 0);
        g_autofree char *w2 = g_strdup_printf("rmsnorm %dx%d", m, n);
        be->ops->rmsnorm(be, out, x, w, m, n, eps);
        check_close(w2, out, ref2, NULL, (size_t)m * n, 1e-6, 2e-6, 0);
        /* in place */
        memcpy(out, x, (size_t)m * n * sizeof(float));
        be->ops->layernorm(be, out, out, w, b, m, n, eps);
        check_close(w1, out, ref, NULL, (size_t)m * n, 2e-6, 2e-6, 0);
    }
}

/* ---- elementwise ---- */

static void test_gelu_silu(void)
{
    /* a sweep over the whole useful range (with the branch points ±1.25·√2 and ±4·√2) plus
     * extremes, in an odd count so the vector tail runs */
    size_t n = 200001;
    g_autofree float *x = g_new(float, n);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(-12.0 + 24.0 * i / (n - 1));
    x[0] = -1e4f;
    x[1] = 1e4f;
    x[2] = -90.0f;
    x[3] = 0.0f;
    x[4] = -0.0f;
    x[5] = 1e-30f;
    g_autofree float *out = g_new(float, n);
    g_autofree double *ref = g_new(double, n);
    g_autofree double *mag = g_new(double, n);

    for (size_t i = 0; i < n; i++) {
        ref[i] = gelu_ref(x[i]);
        mag[i] = 0.5 * fabs(x[i]);
    }
    /* GELU = x/2·(1 + erf): the fast erf's absolute error is <= 1.1e-7, so the absolute error is
     * <= |x|/2 · 2.5e-7 (erf plus rounding of 1 + erf), plus a few ulp of the result. */
    be->ops->gelu(be, out, x, n);
    check_close("gelu", out, ref, mag, n, 1e-30, 4 * FLT_EPSILON, 2.5e-7);
    /* in place */
    memcpy(out, x, n * sizeof(float));
    be->ops->gelu(be, out, out, n);
    check_close("gelu in place", out, ref, mag, n, 1e-30, 4 * FLT_EPSILON, 2.5e-7);

    /* SiLU: fast exp has relative error <= 9e-8; x/(1 + e) keeps it relative: a few ulp. */
    for (size_t i = 0; i < n; i++)
        ref[i] = silu_ref(x[i]);
    be->ops->silu(be, out, x, n);
    check_close("silu", out, ref, NULL, n, 1e-30, 4 * FLT_EPSILON, 0);

    g_autofree float *up = rand_vec(n, 2.0);
    for (size_t i = 0; i < n; i++)
        ref[i] = silu_ref(x[i]) * up[i];
    be->ops->silu_mul(be, out, x, up, n);
    check_close("silu_mul", out, ref, NULL, n, 1e-30, 5 * FLT_EPSILON, 0);

    for (size_t i = 0; i < n; i++)
        ref[i] = (double)(x[i] + up[i]); /* one float add: exact to the rounding */
    be->ops->add(be, out, x, up, n);
    check_close("add", out, ref, NULL, n, 0, 0, 0);
}

static void test_residual_modulate(void)
{
    int m = 9, n = 37;
    g_autofree float *x = rand_vec((size_t)m * n, 1.0);
    g_autofree float *a = rand_vec((size_t)m * n, 1.0);
    g_autofree float *g = rand_vec(n, 1.0);
    g_autofree float *h = rand_vec(n, 1.0);
    g_autofree float *y = g_memdup2(x, (size_t)m * n * sizeof(float));
    g_autofree double *ref = g_new(double, (size_t)m * n);

    for (int i = 0; i < m * n; i++)
        ref[i] = x[i] + (double)a[i];
    be->ops->residual(be, y, a, NULL, m, n);
    check_close("residual", y, ref, NULL, (size_t)m * n, 0, FLT_EPSILON, 0);

    memcpy(y, x, (size_t)m * n * sizeof(float));
    for (int i = 0; i < m * n; i++)
        ref[i] = x[i] + (1.0 + g[i % n]) * a[i];
    be->ops->residual(be, y, a, g, m, n);
    check_close("residual gated", y, ref, NULL, (size_t)m * n, 3 * FLT_EPSILON, 3 * FLT_EPSILON, 0);

    /* zero gate: bit for bit the plain residual (adaln_zero's zero init relies on it) */
    g_autofree float *zero = g_new0(float, n);
    g_autofree float *y1 = g_memdup2(x, (size_t)m * n * sizeof(float));
    g_autofree float *y2 = g_memdup2(x, (size_t)m * n * sizeof(float));
    be->ops->residual(be, y1, a, NULL, m, n);
    be->ops->residual(be, y2, a, zero, m, n);
    g_assert_cmpmem(y1, (size_t)m * n * sizeof(float), y2, (size_t)m * n * sizeof(float));

    memcpy(y, x, (size_t)m * n * sizeof(float));
    for (int i = 0; i < m * n; i++)
        ref[i] = x[i] * (1.0 + g[i % n]) + h[i % n];
    be->ops->modulate(be, y, g, h, m, n);
    check_close("modulate", y, ref, NULL, (size_t)m * n, 3 * FLT_EPSILON, 3 * FLT_EPSILON, 0);
    memcpy(y, x, (size_t)m * n * sizeof(float));
    be->ops->modulate(be, y, zero, zero, m, n);
    g_assert_cmpmem(y, (size_t)m * n * sizeof(float), x, (size_t)m * n * sizeof(float));

    for (int i = 0; i < m * n; i++)
        ref[i] = (double)g[i % n] * a[i];
    be->ops->scale_cols(be, y, a, g, m, n, FALSE);
    check_close("scale_cols", y, ref, NULL, (size_t)m * n, 0, FLT_EPSILON, 0);
    for (int i = 0; i < m * n; i++)
        ref[i] *= 2;
    be->ops->scale_cols(be, y, a, g, m, n, TRUE);
    check_close("scale_cols acc", y, ref, NULL, (size_t)m * n, 0, 2 * FLT_EPSILON, 0);
}

/* ---- RoPE ---- */

static void rope_ref(double *x, int head_dim, int n_sections, const int *pos, double base)
{
    int q = head_dim / n_sections;
    for (int s = 0; s < n_sections; s++)
        for (int i = 0; i < q / 2; i++) {
            double ang = pos[s] * pow(base, -2.0 * i / q);
            double a = x[s * q + i], b = x[s * q + i + q / 2];
            x[s * q + i] = a * cos(ang) - b * sin(ang);
            x[s * q + i + q / 2] = b * cos(ang) + a * sin(ang);
        }
}

static void test_rope(void)
{
    /* 1-D (decoder): 3 heads of 8 in rows of stride 30, positions 5..11 */
    {
        int n = 7, hd = 8, heads = 3, ld = 30, pos0 = 5;
        double base = 10000.0;
        g_autofree float *x = rand_vec((size_t)n * ld, 1.0);
        g_autofree float *orig = g_memdup2(x, (size_t)n * ld * sizeof(float));
        g_autofree float *ct = g_new(float, (size_t)n * hd / 2);
        g_autofree float *st = g_new(float, (size_t)n * hd / 2);
        cl_rope_table_1d(ct, st, pos0, n, hd, base);
        be->ops->rope(be, x, ct, st, n, ld, heads, hd, 1);
        g_autofree double *ref = g_new(double, (size_t)n * ld);
        for (int t = 0; t < n; t++) {
            for (int j = 0; j < ld; j++)
                ref[t * ld + j] = orig[t * ld + j];
            for (int h = 0; h < heads; h++) {
                int pos[1] = { pos0 + t };
                rope_ref(ref + t * ld + h * hd, hd, 1, pos, base);
            }
        }
        /* two products and a sum of O(1) values, cos/sin rounded to float: a few ulp; the
         * columns past the heads must be untouched (exact) */
        check_close("rope 1d", x, ref, NULL, (size_t)n * ld, 4 * FLT_EPSILON, 0, 0);
    }
    /* 2-D (encoder): a 4x4 grid, 2 heads of 12 (sections of 6), rows of stride 24 */
    {
        int grid = 4, n = 16, hd = 12, heads = 2, ld = 24;
        double base = 100.0;
        g_autofree float *x = rand_vec((size_t)n * ld, 1.0);
        g_autofree float *orig = g_memdup2(x, (size_t)n * ld * sizeof(float));
        g_autofree float *ct = g_new(float, (size_t)n * hd / 2);
        g_autofree float *st = g_new(float, (size_t)n * hd / 2);
        cl_rope_table_2d(ct, st, grid, hd, base);
        be->ops->rope(be, x, ct, st, n, ld, heads, hd, 2);
        g_autofree double *ref = g_new(double, (size_t)n * ld);
        for (int t = 0; t < n; t++) {
            for (int j = 0; j < ld; j++)
                ref[t * ld + j] = orig[t * ld + j];
            int pos[2] = { t / grid, t % grid };
            for (int h = 0; h < heads; h++)
                rope_ref(ref + t * ld + h * hd, hd, 2, pos, base);
        }
        check_close("rope 2d", x, ref, NULL, (size_t)n * ld, 4 * FLT_EPSILON, 0, 0);
        /* token 0 sits at (0, 0): no rotation at all */
        g_assert_cmpmem(x, ld * sizeof(float), orig, ld * sizeof(float));
    }
}

/* ---- softmax, attention ---- */

static void test_softmax(void)
{
    int m = 5, n = 67, ld = 70;
    g_autofree float *x = rand_vec((size_t)m * ld, 20.0);
    g_autofree double *ref = g_new(double, (size_t)m * n);
    g_autofree double *mag = g_new(double, (size_t)m * n);
    g_autofree float *got = g_new(float, (size_t)m * n);
    x[0] = -1e30f; /* a masked-like value: exp underflows to exactly 0 */
    for (int i = 0; i < m; i++) {
        double mx = -INFINITY, s = 0;
        for (int j = 0; j < n; j++)
            mx = MAX(mx, x[i * ld + j]);
        for (int j = 0; j < n; j++)
            s += exp(x[i * ld + j] - mx);
        for (int j = 0; j < n; j++) {
            ref[i * n + j] = exp(x[i * ld + j] - mx) / s;
            /* x − max is rounded to float before the exp (as in every float softmax): an
             * argument error of |x − max|·eps/2 is that much relative error of the result */
            mag[i * n + j] = ref[i * n + j] * fabs(x[i * ld + j] - mx);
        }
    }
    float pad = x[n];
    be->ops->softmax(be, x, m, n, ld);
    g_assert_cmpfloat(x[n], ==, pad); /* stride respected */
    for (int i = 0; i < m; i++)
        memcpy(got + i * n, x + i * ld, n * sizeof(float));
    /* plus: fast exp is within 9e-8 relative, the sum and the division add a few ulp */
    check_close("softmax", got, ref, mag, (size_t)m * n, 1e-30, 1e-6, FLT_EPSILON / 2);

    /* host helpers */
    float v[6] = { 1, 3, -2, 3, 0.5f, NAN };
    g_assert_cmpint(cl_argmax(v, 6), ==, 1);
    g_assert_cmpint(cl_argmax(v, 0), ==, -1);
    float w[5] = { 1, 2, 3, 4, -100 }, lw[5];
    memcpy(lw, w, sizeof w);
    cl_softmax(w, 5);
    cl_log_softmax(lw, 5);
    double s = 0;
    for (int i = 0; i < 5; i++) {
        s += w[i];
        g_assert_cmpfloat_with_epsilon(log(w[0]) - log(w[1]), -1.0, 1e-6);
        if (i < 4)
            g_assert_cmpfloat_with_epsilon(exp(lw[i]), w[i], 1e-7);
    }
    g_assert_cmpfloat_with_epsilon(s, 1.0, 1e-6);
}

/* out_i = Σ_j softmax(q_i·k_j·scale) v_j over the visible keys, in double */
static void attention_ref(double *out, double *tail, const float *q, const float *k, const float *v,
                          int n_q, int n_kv, int ldq, int ldk, int ldv, int ldo, int n_head,
                          int n_kv_head, int hd, float scale, int causal, int tail_start)
{
    g_autofree double *p = g_new(double, n_kv);
    for (int h = 0; h < n_head; h++) {
        int g = h / (n_head / n_kv_head);
        for (int i = 0; i < n_q; i++) {
            int vis = causal < 0 ? n_kv : MIN(n_kv, causal + i + 1);
            double mx = -INFINITY, s = 0;
            for (int j = 0; j < vis; j++) {
                double d = 0;
                for (int c = 0; c < hd; c++)
                    d += (double)q[i * ldq + h * hd + c] * k[j * ldk + g * hd + c];
                p[j] = d * scale;
                mx = MAX(mx, p[j]);
            }
            for (int j = 0; j < vis; j++)
                s += (p[j] = exp(p[j] - mx));
            for (int c = 0; c < hd; c++) {
                double o = 0, ot = 0;
                for (int j = 0; j < vis; j++) {
                    o += p[j] / s * v[j * ldv + g * hd + c];
                    if (j >= tail_start)
                        ot += p[j] / s * v[j * ldv + g * hd + c];
                }
                out[i * ldo + h * hd + c] = o;
                if (tail)
                    tail[i * ldo + h * hd + c] = ot;
            }
        }
    }
}

static void run_attention_case(int n_q, int n_kv, int n_head, int n_kv_head, int hd, int causal,
                               gboolean with_tail)
{
    int ldq = n_head * hd + 3, ldk = 2 * n_kv_head * hd + 1, ldv = ldk, ldo = n_head * hd;
    g_autofree float *q = rand_vec((size_t)n_q * ldq, 1.0);
    g_autofree float *kv = rand_vec((size_t)n_kv * ldk, 1.0);
    const float *k = kv, *v = kv + n_kv_head * hd;
    float scale = 1.0f / sqrtf((float)hd) * 3.0f; /* sharper than usual: exercises the exp */
    int tail_start = n_kv / 2;
    g_autofree float *out = g_new(float, (size_t)n_q * ldo);
    g_autofree float *tail = with_tail ? g_new(float, (size_t)n_q * ldo) : NULL;
    g_autofree float *scratch = g_new(float, be->ops->attention_scratch(be, n_q, n_kv, n_head));
    g_autofree double *ref = g_new(double, (size_t)n_q * ldo);
    g_autofree double *reft = g_new(double, (size_t)n_q * ldo);
    attention_ref(ref, reft, q, k, v, n_q, n_kv, ldq, ldk, ldv, ldo, n_head, n_kv_head, hd, scale,
                  causal, tail_start);
    be->ops->attention(be, out, tail, q, k, v, n_q, n_kv, ldq, ldk, ldv, ldo, n_head, n_kv_head, hd,
                       scale, causal, with_tail ? tail_start : 0, scratch);
    /* values are O(1): scores have a dot-product error ~hd·eps, exp and the weighted sum add a
     * few ulp relative: 2e-6 absolute is ~30 ulp of O(1) outputs */
    g_autofree char *what = g_strdup_printf("attention q=%d kv=%d h=%d/%d hd=%d causal=%d", n_q,
                                            n_kv, n_head, n_kv_head, hd, causal);
    check_close(what, out, ref, NULL, (size_t)n_q * ldo, 2e-6, 2e-6, 0);
    if (with_tail)
        check_close(what, tail, reft, NULL, (size_t)n_q * ldo, 2e-6, 2e-6, 0);
}

static void test_attention(void)
{
    /* sgemm path: non-causal (encoder), with the self_ext tail */
    run_attention_case(23, 46, 3, 3, 16, -1, TRUE);
    run_attention_case(64, 64, 4, 4, 8, -1, FALSE);
    /* above the split threshold (2^22): heads in groups, one per thread (5 heads over 3) */
    run_attention_case(120, 150, 5, 5, 52, -1, TRUE);
    run_attention_case(100, 130, 6, 2, 64, 30, FALSE);
    /* a training decoder's sequence: causal from scratch over several row blocks */
    run_attention_case(200, 200, 4, 2, 16, 0, FALSE);
    /* cross-attention to a single key (the null state): output = v */
    run_attention_case(9, 1, 2, 2, 8, -1, FALSE);
    /* decoder: causal with an offset (prefill after 10 cached positions), GQA 4/2 */
    run_attention_case(12, 22, 4, 2, 8, 10, FALSE);
    run_attention_case(17, 17, 6, 3, 10, 0, FALSE);
    /* fused path: decode steps (one or a few queries) */
    run_attention_case(1, 40, 4, 2, 8, 39, FALSE);
    run_attention_case(3, 30, 8, 1, 12, 27, FALSE);
    run_attention_case(2, 19, 2, 2, 5, -1, TRUE);
    /* head sizes the AVX2 decode path takes (16·k), key counts that are not a multiple of 8 */
    run_attention_case(1, 77, 9, 3, 64, 76, FALSE);
    run_attention_case(2, 45, 4, 2, 48, -1, TRUE);
    run_attention_case(1, 5, 2, 1, 32, 4, FALSE);
    run_attention_case(4, 130, 2, 2, 128, 126, TRUE);
}

/* The decode attention's AVX2 loops give the portable loops' bits (the same summation order),
 * so a model's output does not depend on the CPU it runs on. */
static void test_attention_simd_bits(void)
{
    const int shapes[][5] = { /* n_q, n_kv, n_head, n_kv_head, hd */
                              { 1, 77, 9, 3, 64 },
                              { 3, 45, 4, 2, 48 },
                              { 1, 8, 2, 1, 16 },
                              { 4, 130, 2, 2, 128 }
    };
    for (guint t = 0; t < G_N_ELEMENTS(shapes); t++) {
        const int n_q = shapes[t][0], n_kv = shapes[t][1], n_head = shapes[t][2];
        const int n_kv_head = shapes[t][3], hd = shapes[t][4];
        int ldq = n_head * hd, ldk = 2 * n_kv_head * hd + 8, ldo = n_head * hd;
        g_autofree float *q = rand_vec((size_t)n_q * ldq, 1.0);
        g_autofree float *kv = rand_vec((size_t)n_kv * ldk, 1.0);
        const float *k = kv, *v = kv + n_kv_head * hd;
        const float scale = 1.0f / sqrtf((float)hd);
        size_t n_out = (size_t)n_q * ldo;
        float *outs[2], *tails[2];
        g_autofree float *scratch = g_new(float, be->ops->attention_scratch(be, n_q, n_kv, n_head));
        for (int portable = 0; portable < 2; portable++) {
            gboolean prev = cl_backend_cpu_set_simd(!portable);
            outs[portable] = g_new(float, n_out);
            tails[portable] = g_new(float, n_out);
            be->ops->attention(be, outs[portable], tails[portable], q, k, v, n_q, n_kv, ldq, ldk,
                               ldk, ldo, n_head, n_kv_head, hd, scale, n_kv - n_q, n_kv / 3,
                               scratch);
            cl_backend_cpu_set_simd(prev);
        }
        g_assert_cmpmem(outs[0], n_out * sizeof(float), outs[1], n_out * sizeof(float));
        g_assert_cmpmem(tails[0], n_out * sizeof(float), tails[1], n_out * sizeof(float));
        for (int i = 0; i < 2; i++)
            g_free(outs[i]), g_free(tails[i]);
    }
}

/* ---- row norms, embed ---- */

static void test_rows(void)
{
    int m = 11, n = 45, ld = 50;
    g_autofree float *a = rand_vec((size_t)m * ld, 1.0);
    g_autofree float *b = rand_vec((size_t)m * ld, 1.0);
    g_autofree float *out = g_new(float, m);
    g_autofree double *ref = g_new(double, m);
    for (int i = 0; i < m; i++) {
        double s = 0;
        for (int j = 0; j < n; j++)
            s += (double)a[i * ld + j] * a[i * ld + j];
        ref[i] = sqrt(s);
    }
    be->ops->row_norms(be, out, a, NULL, m, n, ld);
    check_close("row_norms", out, ref, NULL, m, 0, FLT_EPSILON, 0); /* double sums: rounding */
    for (int i = 0; i < m; i++) {
        double s = 0;
        for (int j = 0; j < n; j++)
            s += ((double)a[i * ld + j] - b[i * ld + j]) * ((double)a[i * ld + j] - b[i * ld + j]);
        ref[i] = sqrt(s);
    }
    be->ops->row_norms(be, out, a, b, m, n, ld);
    check_close("row_norms diff", out, ref, NULL, m, 0, FLT_EPSILON, 0);

    int V = 10, E = 6;
    g_autofree float *table = rand_vec((size_t)V * E, 1.0);
    gint32 ids[4] = { 3, -1, 9, 0 };
    float emb[4 * 6];
    for (int i = 0; i < 24; i++)
        emb[i] = 42.0f;
    be->ops->embed(be, emb, table, ids, 4, E);
    g_assert_cmpmem(emb, E * sizeof(float), table + 3 * E, E * sizeof(float));
    g_assert_cmpfloat(emb[E], ==, 42.0f); /* negative id: left for the caller */
    g_assert_cmpmem(emb + 2 * E, E * sizeof(float), table + 9 * E, E * sizeof(float));
    g_assert_cmpmem(emb + 3 * E, E * sizeof(float), table, E * sizeof(float));
}

/* ---- thread pool ---- */

static void count_items(void *ctx, int begin, int end)
{
    int *hits = ctx;
    for (int i = begin; i < end; i++)
        g_atomic_int_inc(&hits[i]);
}

static void test_threadpool(void)
{
    for (int threads = 1; threads <= 5; threads++) {
        ClThreadPool *pool = cl_threadpool_new(threads);
        g_assert_cmpint(cl_threadpool_size(pool), ==, threads);
        int sizes[] = { 0, 1, 2, 3, 7, 100, 1001 };
        for (int rep = 0; rep < 50; rep++)
            for (size_t s = 0; s < G_N_ELEMENTS(sizes); s++) {
                int n = sizes[s];
                g_autofree int *hits = g_new0(int, MAX(n, 1));
                cl_threadpool_run(pool, n, 1 + rep % 4, count_items, hits);
                for (int i = 0; i < n; i++)
                    g_assert_cmpint(hits[i], ==, 1);
            }
        cl_threadpool_free(pool);
    }
}

/* ---- backend selection ---- */

static void test_backend_new(void)
{
    g_autoptr(GError) err = NULL;
    char *notice = NULL;
    ClBackend *b = cl_backend_new("cpu", &notice, &err);
    g_assert_no_error(err);
    g_assert_null(notice);
    g_assert_cmpstr(cl_backend_name(b), ==, "cpu");
    g_assert_cmpint(cl_backend_cpu_threads(b), ==, (int)g_get_num_processors());
    cl_backend_free(b);

    /* without a GPU, "auto" runs on the CPU and says why */
    b = cl_backend_new("auto", &notice, &err);
    g_assert_no_error(err);
    g_assert_cmpstr(cl_backend_name(b), ==, "cpu");
    g_assert_nonnull(notice);
    g_assert_true(g_str_has_suffix(notice, ": running on the CPU"));
    g_free(notice);
    cl_backend_free(b);

    b = cl_backend_new("cuda", NULL, &err);
    g_assert_null(b);
    g_assert_error(err, CL_BACKEND_ERROR, CL_BACKEND_ERROR_NO_DEVICE);
    g_clear_error(&err);

    b = cl_backend_new("tpu", NULL, &err);
    g_assert_null(b);
    g_assert_error(err, CL_BACKEND_ERROR, CL_BACKEND_ERROR_UNKNOWN);
}

/* The 16-lane elementwise kernels give the 4-lane ones' bits for every element (elementwise.h:
 * a result never depends on the machine), over ordinary values, both GELU branches, the exp
 * clamps, odd lengths (tails) and infinities. */
static void test_elementwise_widths(void)
{
    const ClElementwise *n4 = cl_elementwise_v4(), *n16 = cl_elementwise_v16();
    g_assert_nonnull(cl_elementwise());
    if (!n16) {
        g_test_skip("no 16-lane kernels on this build or CPU");
        return;
    }
    g_assert_cmpint(n4->lanes, ==, 4);
    g_assert_cmpint(n16->lanes, ==, 16);
    const size_t N = 4099; /* not a multiple of 16: a tail */
    float *a = g_new(float, N), *b = g_new(float, N), *d = g_new(float, N);
    float *o4 = g_new(float, N),
                      *o16 = g_new(float, N), *p4 = g_new(float, N), *p16 = g_new(float, N);
    GRand *r = g_rand_new_with_seed(17);
    for (size_t i = 0; i < N; i++) {
        double scale = i % 5 == 0 ? 100.0 : i % 5 == 1 ? 6.0 : 2.0;
        a[i] = (float)g_rand_double_range(r, -scale, scale);
        b[i] = (float)g_rand_double_range(r, -3, 3);
        d[i] = (float)g_rand_double_range(r, -1, 1);
    }
    a[7] = INFINITY, a[8] = -INFINITY, a[9] = 0.0f, a[10] = -0.0f, a[11] = 88.5f, a[12] = -90.0f;
    for (size_t n = 1; n <= N; n = n < 40 ? n + 1 : n * 3 + 1) {
        void (*maps4[3])(float *, const float *, const float *, size_t) = { n4->gelu, n4->silu,
                                                                            n4->silu_mul };
        void (*maps16[3])(float *, const float *, const float *, size_t) = { n16->gelu, n16->silu,
                                                                             n16->silu_mul };
        for (int f = 0; f < 3; f++) {
            maps4[f](o4, a, b, n);
            maps16[f](o16, a, b, n);
            g_assert_cmpmem(o4, n * sizeof(float), o16, n * sizeof(float));
        }
        memcpy(o4, b, n * sizeof(float));
        memcpy(o16, b, n * sizeof(float));
        n4->gelu_grad_acc(o4, d, a, n);
        n16->gelu_grad_acc(o16, d, a, n);
        g_assert_cmpmem(o4, n * sizeof(float), o16, n * sizeof(float));
        memcpy(o4, b, n * sizeof(float)), memcpy(o16, b, n * sizeof(float));
        memcpy(p4, d, n * sizeof(float)), memcpy(p16, d, n * sizeof(float));
        n4->silu_mul_grad_acc(o4, p4, d, a, b, n);
        n16->silu_mul_grad_acc(o16, p16, d, a, b, n);
        g_assert_cmpmem(o4, n * sizeof(float), o16, n * sizeof(float));
        g_assert_cmpmem(p4, n * sizeof(float), p16, n * sizeof(float));
        memcpy(o4, a, n * sizeof(float)), memcpy(o16, a, n * sizeof(float));
        n4->exp_shift(o4, n, 1.5f);
        n16->exp_shift(o16, n, 1.5f);
        g_assert_cmpmem(o4, n * sizeof(float), o16, n * sizeof(float));
    }
    /* and they compute what they say: a few values against libm */
    const float x[4] = { -3.0f, -0.5f, 0.25f, 2.0f };
    float y[4];
    n16->silu(y, x, NULL, 4);
    for (int i = 0; i < 4; i++)
        g_assert_cmpfloat_with_epsilon(y[i], x[i] / (1.0 + exp(-x[i])), 1e-6);
    n16->gelu(y, x, NULL, 4);
    for (int i = 0; i < 4; i++)
        g_assert_cmpfloat_with_epsilon(y[i], 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0))), 1e-6);
    g_rand_free(r);
    g_free(a), g_free(b), g_free(d), g_free(o4), g_free(o16), g_free(p4), g_free(p16);
}

/* OpenBLAS runs kernels this CPU can use well: on a CPU with AVX2 (or AVX-512) that the
 * library's table does not know, core/nn/blas.c must have replaced its SSE3 fallback
 * ("Prescott", 3.4x slower on the shipping model's training step) before the first product. */
static void test_blas_kernels(void)
{
    const char *k = cl_blas_kernels();
    g_test_message("OpenBLAS kernels: %s%s", k,
                   cl_blas_kernels_rechosen() ? " (re-chosen at start-up)" : "");
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!g_getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
        g_assert_cmpstr(k, !=, "Prescott");
#endif
    g_assert_true(cl_blas_kernels_fit_cpu());
    /* and the products still compute what they should after a re-choice */
    enum { M = 37, K = 53, N = 70 };
    float a[M * K], b[N * K], c[M * N];
    for (int i = 0; i < M * K; i++)
        a[i] = (float)g_rand_double_range(rng, -1, 1);
    for (int i = 0; i < N * K; i++)
        b[i] = (float)g_rand_double_range(rng, -1, 1);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double ref = 0;
            for (int p = 0; p < K; p++)
                ref += (double)a[i * K + p] * b[j * K + p];
            /* f32 accumulation of 53 products of magnitude <= 1: a few ulps of the sum */
            g_assert_cmpfloat_with_epsilon(c[i * N + j], ref, 1e-5);
        }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    rng = g_rand_new_with_seed(20240611);
    /* 3 threads on any machine: the split and the tails are exercised even on 1-2 cores */
    be = cl_backend_cpu_new(3);
    g_test_add_func("/nn/blas-kernels", test_blas_kernels);
    g_test_add_func("/nn/linear", test_linear);
    g_test_add_func("/nn/gemm", test_gemm);
    g_test_add_func("/nn/norms", test_norms);
    g_test_add_func("/nn/gelu-silu", test_gelu_silu);
    g_test_add_func("/nn/elementwise-widths", test_elementwise_widths);
    g_test_add_func("/nn/residual-modulate", test_residual_modulate);
    g_test_add_func("/nn/rope", test_rope);
    g_test_add_func("/nn/softmax", test_softmax);
    g_test_add_func("/nn/attention", test_attention);
    g_test_add_func("/nn/attention/simd-bits", test_attention_simd_bits);
    g_test_add_func("/nn/rows-embed", test_rows);
    g_test_add_func("/nn/threadpool", test_threadpool);
    g_test_add_func("/nn/backend-new", test_backend_new);
    int rc = g_test_run();
    cl_backend_free(be);
    g_rand_free(rng);
    return rc;
}
