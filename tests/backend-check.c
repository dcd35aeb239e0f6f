/* backend-check.c - a device backend against the CPU backend (backend-check.h). */
#include "backend-check.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <glib.h>

#include "model/decoder.h"
#include "model/encoder.h"
#include "model/generate.h"
#include "model/model.h"

/* ---- the walled backend ---------------------------------------------------------------------- */

/* bit 62 set: a non-canonical x86-64 (and AArch64) address, so a host access faults; views are
 * offsets from an allocation and never carry into bit 62 */
#define WALL ((uintptr_t)1 << 62)

static void *in(const void *p)
{
    return p ? (void *)((uintptr_t)p ^ WALL) : NULL;
}
#define U(p) ((float *)in(p))

static ClBackend *cpu_of(ClBackend *be)
{
    return be->data;
}

#define CPU(be) cpu_of(be), cpu_of(be)->ops

static void w_destroy(ClBackend *be)
{
    cl_backend_free(cpu_of(be));
}
static void *w_alloc(ClBackend *be, size_t bytes)
{
    (void)be;
    void *p = g_try_malloc(MAX(bytes, 1));
    return p ? in(p) : NULL;
}
static void w_release(ClBackend *be, void *p)
{
    (void)be;
    g_free(in(p));
}
static void w_upload(ClBackend *be, void *dst, const void *src, size_t n)
{
    (void)be;
    if (n)
        memcpy(in(dst), src, n);
}
static void w_download(ClBackend *be, void *dst, const void *src, size_t n)
{
    (void)be;
    if (n)
        memcpy(dst, in(src), n);
}
static void w_copy(ClBackend *be, void *dst, const void *src, size_t n)
{
    (void)be;
    if (n)
        memcpy(in(dst), in(src), n);
}
static void w_zero(ClBackend *be, void *dst, size_t n)
{
    (void)be;
    if (n)
        memset(in(dst), 0, n);
}
static gboolean w_finish(ClBackend *be, GError **error)
{
    (void)be, (void)error;
    return TRUE;
}
static void w_linear(ClBackend *be, float *out, const float *x, const float *w, const float *b,
                     int m, int k, int n)
{
    ClBackend *c = cpu_of(be);
    c->ops->linear(c, U(out), U(x), U(w), U(b), m, k, n);
}
static void w_gemm(ClBackend *be, gboolean ta, gboolean tb, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    ClBackend *p = cpu_of(be);
    p->ops->gemm(p, ta, tb, m, n, k, alpha, U(a), lda, U(b), ldb, beta, U(c), ldc);
}
static void w_layernorm(ClBackend *be, float *out, const float *x, const float *w, const float *b,
                        int m, int n, float eps)
{
    ClBackend *c = cpu_of(be);
    c->ops->layernorm(c, U(out), U(x), U(w), U(b), m, n, eps);
}
static void w_rmsnorm(ClBackend *be, float *out, const float *x, const float *w, int m, int n,
                      float eps)
{
    ClBackend *c = cpu_of(be);
    c->ops->rmsnorm(c, U(out), U(x), U(w), m, n, eps);
}
static void w_modulate(ClBackend *be, float *x, const float *s, const float *h, int m, int n)
{
    ClBackend *c = cpu_of(be);
    c->ops->modulate(c, U(x), U(s), U(h), m, n);
}
static void w_gelu(ClBackend *be, float *out, const float *x, size_t n)
{
    ClBackend *c = cpu_of(be);
    c->ops->gelu(c, U(out), U(x), n);
}
static void w_silu(ClBackend *be, float *out, const float *x, size_t n)
{
    ClBackend *c = cpu_of(be);
    c->ops->silu(c, U(out), U(x), n);
}
static void w_silu_mul(ClBackend *be, float *out, const float *g, const float *u, size_t n)
{
    ClBackend *c = cpu_of(be);
    c->ops->silu_mul(c, U(out), U(g), U(u), n);
}
static void w_add(ClBackend *be, float *out, const float *a, const float *b, size_t n)
{
    ClBackend *c = cpu_of(be);
    c->ops->add(c, U(out), U(a), U(b), n);
}
static void w_residual(ClBackend *be, float *x, const float *a, const float *g, int m, int n)
{
    ClBackend *c = cpu_of(be);
    c->ops->residual(c, U(x), U(a), U(g), m, n);
}
static void w_scale_cols(ClBackend *be, float *out, const float *a, const float *g, int m, int n,
                         gboolean acc)
{
    ClBackend *c = cpu_of(be);
    c->ops->scale_cols(c, U(out), U(a), U(g), m, n, acc);
}
static void w_rope(ClBackend *be, float *x, const float *cs, const float *sn, int n_tok, int ld,
                   int n_head, int hd, int sections)
{
    ClBackend *c = cpu_of(be);
    c->ops->rope(c, U(x), U(cs), U(sn), n_tok, ld, n_head, hd, sections);
}
static void w_softmax(ClBackend *be, float *x, int m, int n, int ld)
{
    ClBackend *c = cpu_of(be);
    c->ops->softmax(c, U(x), m, n, ld);
}
static void w_attention(ClBackend *be, float *out, float *out_tail, const float *q, const float *k,
                        const float *v, int n_q, int n_kv, int ldq, int ldk, int ldv, int ldo,
                        int n_head, int n_kv_head, int hd, float scale, int causal, int tail_start,
                        float *scratch)
{
    ClBackend *c = cpu_of(be);
    c->ops->attention(c, U(out), U(out_tail), U(q), U(k), U(v), n_q, n_kv, ldq, ldk, ldv, ldo,
                      n_head, n_kv_head, hd, scale, causal, tail_start, U(scratch));
}
static size_t w_attention_scratch(ClBackend *be, int n_q, int n_kv, int n_head)
{
    ClBackend *c = cpu_of(be);
    return c->ops->attention_scratch(c, n_q, n_kv, n_head);
}
static void w_row_norms(ClBackend *be, float *out, const float *a, const float *b, int m, int n,
                        int ld)
{
    ClBackend *c = cpu_of(be);
    c->ops->row_norms(c, U(out), U(a), U(b), m, n, ld);
}
static void w_embed(ClBackend *be, float *out, const float *table, const gint32 *ids, int n,
                    int dim)
{
    ClBackend *c = cpu_of(be);
    c->ops->embed(c, U(out), U(table), ids /* host */, n, dim);
}
static void w_im2col(ClBackend *be, float *p, const float *px, int ch, int size, int patch)
{
    ClBackend *c = cpu_of(be);
    c->ops->im2col(c, U(p), U(px), ch, size, patch);
}
static void w_merge2x2(ClBackend *be, float *out, const float *x, int grid, int d)
{
    ClBackend *c = cpu_of(be);
    c->ops->merge2x2(c, U(out), U(x), grid, d);
}
static void w_col_mean(ClBackend *be, float *out, const float *x, int m, int n)
{
    ClBackend *c = cpu_of(be);
    c->ops->col_mean(c, U(out), U(x), m, n);
}
static void w_center_cols(ClBackend *be, float *x, int m, int n)
{
    ClBackend *c = cpu_of(be);
    c->ops->center_cols(c, U(x), m, n);
}

static void w_scale_by(ClBackend *be, float *x, const float *s, size_t n)
{
    ClBackend *c = cpu_of(be);
    c->ops->scale_by(c, U(x), U(s), n);
}

static const struct cl_backend_ops walled_ops = {
    .name = "walled-cpu",
    .destroy = w_destroy,
    .host_memory = FALSE,
    .alloc = w_alloc,
    .release = w_release,
    .upload = w_upload,
    .download = w_download,
    .copy = w_copy,
    .zero = w_zero,
    .finish = w_finish,
    .linear = w_linear,
    .gemm = w_gemm,
    .layernorm = w_layernorm,
    .rmsnorm = w_rmsnorm,
    .modulate = w_modulate,
    .gelu = w_gelu,
    .silu = w_silu,
    .silu_mul = w_silu_mul,
    .add = w_add,
    .residual = w_residual,
    .scale_cols = w_scale_cols,
    .rope = w_rope,
    .softmax = w_softmax,
    .attention = w_attention,
    .attention_scratch = w_attention_scratch,
    .row_norms = w_row_norms,
    .embed = w_embed,
    .im2col = w_im2col,
    .merge2x2 = w_merge2x2,
    .col_mean = w_col_mean,
    .center_cols = w_center_cols,
    .scale_by = w_scale_by,
};

ClBackend *cl_test_walled_backend_new(void)
{
    ClBackend *be = g_new0(ClBackend, 1);
    be->ops = &walled_ops;
    be->data = cl_backend_cpu_new(0);
    return be;
}

/* ---- comparing ------------------------------------------------------------------------------- */

static ClBackend *cpu_be; /* the oracle */

typedef struct {
    ClBackend *dev;
    ClTolerances tol;
    gboolean exact_decodes;
} Ctx;

/* Asserts dev ≈ cpu under tol; reports the worst element and the normalised error. */
static void expect_close(const char *what, const float *dev, const float *cpu, size_t n,
                         const ClTol *tol)
{
    double num = 0, den = 0, worst = 0;
    size_t worst_i = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)dev[i] - (double)cpu[i];
        if (!isfinite(dev[i]) && !(isnan(dev[i]) && isnan(cpu[i])) && dev[i] != cpu[i])
            g_error("%s: element %zu is %g on the device, %g on the CPU", what, i, dev[i],
                    cpu[i]);
        num += d * d;
        den += (double)cpu[i] * cpu[i];
        double excess = fabs(d) - (tol->atol + tol->rtol * fabs((double)cpu[i]));
        if (excess > worst) {
            worst = excess;
            worst_i = i;
        }
    }
    double nmse = den > 0 ? num / den : num;
    g_test_message("%s: %zu values, normalised squared error %.3g (bound %.3g)", what, n, nmse,
                   tol->nmse);
    if (worst > 0)
        g_error("%s: element %zu is %.9g on the device and %.9g on the CPU: beyond %g + %g·|cpu|",
                what, worst_i, dev[worst_i], cpu[worst_i], tol->atol, tol->rtol);
    if (nmse > tol->nmse)
        g_error("%s: normalised squared error %.3g over the bound %.3g", what, nmse, tol->nmse);
}

/* host data on the device (a new buffer) */
static float *up(ClBackend *dev, const float *h, size_t n)
{
    float *d = dev->ops->alloc(dev, MAX(n, 1) * sizeof(float));
    g_assert_nonnull(d);
    dev->ops->upload(dev, d, h, n * sizeof(float));
    return d;
}

static float *down(ClBackend *dev, const float *d, size_t n)
{
    float *h = g_new(float, MAX(n, 1));
    dev->ops->download(dev, h, d, n * sizeof(float));
    return h;
}

static float *rnd(GRand *r, size_t n, double lo, double hi)
{
    float *x = g_new(float, MAX(n, 1));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)g_rand_double_range(r, lo, hi);
    return x;
}

static void finish_ok(ClBackend *dev)
{
    g_autoptr(GError) err = NULL;
    g_assert_true(dev->ops->finish(dev, &err));
    g_assert_no_error(err);
}

/* ---- the ops --------------------------------------------------------------------------------- */

static void test_linear_gemm(gconstpointer p)
{
    const Ctx *c = p;
    ClBackend *dev = c->dev;
    GRand *r = g_rand_new_with_seed(11);
    const int shapes[][3] = { { 1, 65, 129 }, { 7, 64, 96 }, { 37, 200, 33 }, { 300, 192, 576 } };
    for (size_t s = 0; s < G_N_ELEMENTS(shapes); s++) {
        int m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
        g_autofree float *x = rnd(r, (size_t)m * k, -1, 1), *w = rnd(r, (size_t)n * k, -0.2, 0.2);
        g_autofree float *b = rnd(r, (size_t)n, -1, 1), *o = g_new(float, (size_t)m * n);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            cpu_be->ops->linear(cpu_be, o, x, w, with_bias ? b : NULL, m, k, n);
            float *dx = up(dev, x, (size_t)m * k), *dw = up(dev, w, (size_t)n * k),
                  *db = up(dev, b, n), *dout = up(dev, o, (size_t)m * n);
            dev->ops->zero(dev, dout, (size_t)m * n * sizeof(float));
            dev->ops->linear(dev, dout, dx, dw, with_bias ? db : NULL, m, k, n);
            g_autofree float *got = down(dev, dout, (size_t)m * n);
            finish_ok(dev);
            g_autofree char *what = g_strdup_printf("linear %dx%dx%d%s", m, k, n,
                                                    with_bias ? " + bias" : "");
            expect_close(what, got, o, (size_t)m * n, &c->tol.product);
            dev->ops->release(dev, dx), dev->ops->release(dev, dw), dev->ops->release(dev, db),
                dev->ops->release(dev, dout);
        }
    }
    /* gemm with every transpose and strided operands: C = α op(A) op(B) + β C */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int m = 23, n = 17, k = 41, lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
            size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb,
                   nc = (size_t)m * ldc;
            g_autofree float *a = rnd(r, na, -1, 1), *bm = rnd(r, nb, -1, 1),
                             *cc = rnd(r, nc, -1, 1);
            float *da = up(dev, a, na), *dbm = up(dev, bm, nb), *dc = up(dev, cc, nc);
            cpu_be->ops->gemm(cpu_be, ta, tb, m, n, k, 0.7f, a, lda, bm, ldb, 0.5f, cc, ldc);
            dev->ops->gemm(dev, ta, tb, m, n, k, 0.7f, da, lda, dbm, ldb, 0.5f, dc, ldc);
            g_autofree float *got = down(dev, dc, nc);
            finish_ok(dev);
            g_autofree char *what = g_strdup_printf("gemm trans_a %d trans_b %d", ta, tb);
            expect_close(what, got, cc, nc, &c->tol.product);
            dev->ops->release(dev, da), dev->ops->release(dev, dbm), dev->ops->release(dev, dc);
        }
    g_rand_free(r);
}

static void test_rows(gconstpointer p)
{
    const Ctx *c = p;
    ClBackend *dev = c->dev;
    GRand *r = g_rand_new_with_seed(12);
    const int m = 19, n = 333;
    const size_t mn = (size_t)m * n;
    g_autofree float *x = rnd(r, mn, -3, 5), *w = rnd(r, n, 0.5, 1.5), *b = rnd(r, n, -1, 1);
    g_autofree float *o = g_new(float, mn);
    float *dx = up(dev, x, mn), *dw = up(dev, w, n), *db = up(dev, b, n), *dout = up(dev, x, mn);

    cpu_be->ops->layernorm(cpu_be, o, x, w, b, m, n, 1e-6f);
    dev->ops->layernorm(dev, dout, dx, dw, db, m, n, 1e-6f);
    g_autofree float *g1 = down(dev, dout, mn);
    expect_close("layernorm", g1, o, mn, &c->tol.reduction);

    cpu_be->ops->rmsnorm(cpu_be, o, x, w, m, n, 1e-6f);
    dev->ops->rmsnorm(dev, dout, dx, dw, m, n, 1e-6f);
    g_autofree float *g2 = down(dev, dout, mn);
    expect_close("rmsnorm", g2, o, mn, &c->tol.reduction);

    /* softmax in place on a strided block (ld > n) */
    memcpy(o, x, mn * sizeof(float));
    dev->ops->upload(dev, dout, x, mn * sizeof(float));
    cpu_be->ops->softmax(cpu_be, o, m, n - 10, n);
    dev->ops->softmax(dev, dout, m, n - 10, n);
    g_autofree float *g3 = down(dev, dout, mn);
    expect_close("softmax", g3, o, mn, &c->tol.reduction);

    float rn_cpu[19], rn_dev_h[19];
    float *drn = dev->ops->alloc(dev, sizeof rn_cpu);
    for (int with_b = 0; with_b < 2; with_b++) {
        cpu_be->ops->row_norms(cpu_be, rn_cpu, x, with_b ? o : NULL, m, n - 1, n);
        dev->ops->upload(dev, dout, o, mn * sizeof(float));
        dev->ops->row_norms(dev, drn, dx, with_b ? dout : NULL, m, n - 1, n);
        dev->ops->download(dev, rn_dev_h, drn, sizeof rn_dev_h);
        expect_close(with_b ? "row_norms a − b" : "row_norms", rn_dev_h, rn_cpu, (size_t)m,
                     &c->tol.reduction);
    }

    /* column means and centring (the adaLN pool, visual_center) */
    g_autofree float *cm = g_new(float, n);
    float *dcm = dev->ops->alloc(dev, (size_t)n * sizeof(float));
    cpu_be->ops->col_mean(cpu_be, cm, x, m, n);
    dev->ops->col_mean(dev, dcm, dx, m, n);
    g_autofree float *g4 = down(dev, dcm, n);
    expect_close("col_mean", g4, cm, n, &c->tol.reduction);
    memcpy(o, x, mn * sizeof(float));
    dev->ops->upload(dev, dout, x, mn * sizeof(float));
    cpu_be->ops->center_cols(cpu_be, o, m, n);
    dev->ops->center_cols(dev, dout, m, n);
    g_autofree float *g5 = down(dev, dout, mn);
    expect_close("center_cols", g5, o, mn, &c->tol.reduction);
    finish_ok(dev);
    dev->ops->release(dev, dx), dev->ops->release(dev, dw), dev->ops->release(dev, db);
    dev->ops->release(dev, dout), dev->ops->release(dev, drn), dev->ops->release(dev, dcm);
    g_rand_free(r);
}

static void test_elementwise(gconstpointer p)
{
    const Ctx *c = p;
    ClBackend *dev = c->dev;
    GRand *r = g_rand_new_with_seed(13);
    const int m = 13, n = 301;
    const size_t mn = (size_t)m * n;
    g_autofree float *a = rnd(r, mn, -8, 8), *b = rnd(r, mn, -2, 2), *g = rnd(r, n, -0.5, 0.5),
                     *h = rnd(r, n, -0.5, 0.5), *o = g_new(float, mn);
    float *da = up(dev, a, mn), *dbuf = up(dev, b, mn), *dg = up(dev, g, n), *dh = up(dev, h, n),
          *dout = up(dev, b, mn);
#define RESET()                                                                                    \
    do {                                                                                           \
        memcpy(o, b, mn * sizeof(float));                                                          \
        dev->ops->upload(dev, dout, b, mn * sizeof(float));                                       \
    } while (0)
#define CHECK(name, tolp)                                                                          \
    do {                                                                                           \
        g_autofree float *got_ = down(dev, dout, mn);                                              \
        expect_close(name, got_, o, mn, tolp);                                                     \
    } while (0)
    RESET();
    cpu_be->ops->gelu(cpu_be, o, a, mn);
    dev->ops->gelu(dev, dout, da, mn);
    CHECK("gelu", &c->tol.elementwise);
    RESET();
    cpu_be->ops->silu(cpu_be, o, a, mn);
    dev->ops->silu(dev, dout, da, mn);
    CHECK("silu", &c->tol.elementwise);
    RESET();
    cpu_be->ops->silu_mul(cpu_be, o, a, b, mn);
    dev->ops->silu_mul(dev, dout, da, dbuf, mn);
    CHECK("silu_mul", &c->tol.elementwise);
    RESET();
    cpu_be->ops->add(cpu_be, o, a, b, mn);
    dev->ops->add(dev, dout, da, dbuf, mn);
    CHECK("add", &c->tol.elementwise);
    for (int gated = 0; gated < 2; gated++) {
        RESET();
        cpu_be->ops->residual(cpu_be, o, a, gated ? g : NULL, m, n);
        dev->ops->residual(dev, dout, da, gated ? dg : NULL, m, n);
        CHECK(gated ? "residual gated" : "residual", &c->tol.elementwise);
        RESET();
        cpu_be->ops->scale_cols(cpu_be, o, a, g, m, n, gated);
        dev->ops->scale_cols(dev, dout, da, dg, m, n, gated);
        CHECK(gated ? "scale_cols accumulate" : "scale_cols", &c->tol.elementwise);
    }
    RESET();
    cpu_be->ops->modulate(cpu_be, o, g, h, m, n);
    dev->ops->modulate(dev, dout, dg, dh, m, n);
    CHECK("modulate", &c->tol.elementwise);
    RESET();
    cpu_be->ops->scale_by(cpu_be, o, g + 3, mn);
    dev->ops->scale_by(dev, dout, dg + 3, mn);
    CHECK("scale_by", &c->tol.elementwise);

    /* embedding: ids in host memory, negative ids leave their rows alone */
    const gint32 ids[] = { 3, -1, 0, 12, 12, -1, 7 };
    const int dim = 29;
    g_autofree float *table = rnd(r, 13 * dim, -1, 1);
    float *dt = up(dev, table, 13 * dim);
    RESET();
    cpu_be->ops->embed(cpu_be, o, table, ids, G_N_ELEMENTS(ids), dim);
    dev->ops->embed(dev, dout, dt, ids, G_N_ELEMENTS(ids), dim);
    CHECK("embed", &c->tol.elementwise);
    finish_ok(dev);
    dev->ops->release(dev, da), dev->ops->release(dev, dbuf), dev->ops->release(dev, dg);
    dev->ops->release(dev, dh), dev->ops->release(dev, dout), dev->ops->release(dev, dt);
#undef RESET
#undef CHECK
    g_rand_free(r);
}

static void test_rope_layout(gconstpointer p)
{
    const Ctx *c = p;
    ClBackend *dev = c->dev;
    GRand *r = g_rand_new_with_seed(14);
    /* RoPE, 1 and 2 sections, on q columns of a strided qkv buffer */
    const int n_tok = 25, heads = 3, hd = 24, ld = 3 * heads * hd + 4;
    const size_t nx = (size_t)n_tok * ld;
    g_autofree float *x = rnd(r, nx, -1, 1), *o = g_new(float, nx);
    g_autofree float *cs = g_new(float, (size_t)n_tok * hd / 2),
                     *sn = g_new(float, (size_t)n_tok * hd / 2);
    for (int sections = 1; sections <= 2; sections++) {
        if (sections == 1)
            cl_rope_table_1d(cs, sn, 3, n_tok, hd, 50.0);
        else
            cl_rope_table_2d(cs, sn, 5, hd, 100.0);
        memcpy(o, x, nx * sizeof(float));
        float *dx = up(dev, x, nx), *dcs = up(dev, cs, (size_t)n_tok * hd / 2),
              *dsn = up(dev, sn, (size_t)n_tok * hd / 2);
        cpu_be->ops->rope(cpu_be, o + heads * hd, cs, sn, n_tok, ld, heads, hd, sections);
        dev->ops->rope(dev, dx + heads * hd, dcs, dsn, n_tok, ld, heads, hd, sections);
        g_autofree float *got = down(dev, dx, nx);
        expect_close(sections == 1 ? "rope 1-D" : "rope 2-D", got, o, nx, &c->tol.elementwise);
        dev->ops->release(dev, dx), dev->ops->release(dev, dcs), dev->ops->release(dev, dsn);
    }
    /* im2col and the 2×2 merger's gather: pure data movement, exact */
    const ClTol exact = { 0, 0, 0 };
    const int C = 3, S = 40, P = 8, G = S / P, D = 11;
    g_autofree float *px = rnd(r, (size_t)C * S * S, -1, 1);
    g_autofree float *pc = g_new(float, (size_t)G * G * C * P * P);
    float *dpx = up(dev, px, (size_t)C * S * S),
          *dpc = dev->ops->alloc(dev, (size_t)G * G * C * P * P * sizeof(float));
    cpu_be->ops->im2col(cpu_be, pc, px, C, S, P);
    dev->ops->im2col(dev, dpc, dpx, C, S, P);
    g_autofree float *g1 = down(dev, dpc, (size_t)G * G * C * P * P);
    expect_close("im2col", g1, pc, (size_t)G * G * C * P * P, &exact);
    const int GM = 6;
    g_autofree float *tok = rnd(r, (size_t)GM * GM * D, -1, 1), *mg = g_new(float, (size_t)GM * GM * D);
    float *dtok = up(dev, tok, (size_t)GM * GM * D),
          *dmg = dev->ops->alloc(dev, (size_t)GM * GM * D * sizeof(float));
    cpu_be->ops->merge2x2(cpu_be, mg, tok, GM, D);
    dev->ops->merge2x2(dev, dmg, dtok, GM, D);
    g_autofree float *g2 = down(dev, dmg, (size_t)GM * GM * D);
    expect_close("merge2x2", g2, mg, (size_t)GM * GM * D, &exact);
    finish_ok(dev);
    dev->ops->release(dev, dpx), dev->ops->release(dev, dpc), dev->ops->release(dev, dtok),
        dev->ops->release(dev, dmg);
    g_rand_free(r);
}

/* Attention in every form the engine uses: the encoder's (non-causal, q|k|v columns of one
 * buffer), self_ext's (2N keys and the tail share), the decoder's prefill (causal after cached
 * positions, GQA) and decode step (one query), head sizes on each kernel path. */
static void test_attention(gconstpointer p)
{
    const Ctx *c = p;
    ClBackend *dev = c->dev;
    GRand *r = g_rand_new_with_seed(15);
    const struct {
        int n_q, n_kv, heads, kv_heads, hd, causal, tail;
    } cases[] = {
        { 36, 36, 3, 3, 64, -1, -1 },   /* encoder self-attention */
        { 36, 72, 2, 2, 24, -1, 36 },   /* self_ext with its tail */
        { 36, 1, 2, 2, 24, -1, -1 },    /* cross-attention to the null state */
        { 21, 50, 4, 2, 64, 29, -1 },   /* decoder prefill after 29 cached positions, GQA */
        { 1, 300, 16, 4, 64, 299, -1 }, /* a decode step */
        { 5, 40, 4, 1, 80, 35, -1 },    /* the large preset's head size */
        { 3, 17, 2, 1, 160, 14, -1 },
        { 4, 33, 2, 2, 320, -1, 20 },   /* beyond 256: the block kernel, with a tail */
    };
    for (size_t t = 0; t < G_N_ELEMENTS(cases); t++) {
        const int nq = cases[t].n_q, nkv = cases[t].n_kv, H = cases[t].heads,
                  Hk = cases[t].kv_heads, hd = cases[t].hd;
        const int ldq = H * hd + 3, ldk = Hk * hd + 1, ldv = Hk * hd + 2, ldo = H * hd + 5;
        size_t nqf = (size_t)nq * ldq, nkf = (size_t)nkv * ldk, nvf = (size_t)nkv * ldv,
               nof = (size_t)nq * ldo;
        g_autofree float *q = rnd(r, nqf, -2, 2), *k = rnd(r, nkf, -2, 2), *v = rnd(r, nvf, -1, 1);
        g_autofree float *o = g_new0(float, nof), *ot = g_new0(float, nof);
        size_t scr = cpu_be->ops->attention_scratch(cpu_be, nq, nkv, H);
        g_autofree float *scratch = g_new(float, MAX(scr, 1));
        float scale = (float)(1.0 / sqrt(hd));
        gboolean tail = cases[t].tail >= 0;
        cpu_be->ops->attention(cpu_be, o, tail ? ot : NULL, q, k, v, nq, nkv, ldq, ldk, ldv, ldo,
                               H, Hk, hd, scale, cases[t].causal, tail ? cases[t].tail : 0,
                               scratch);
        float *dq = up(dev, q, nqf), *dk = up(dev, k, nkf), *dv = up(dev, v, nvf);
        float *dout = up(dev, o, nof), *dot = up(dev, ot, nof); /* the gaps keep their values */
        size_t dscr = dev->ops->attention_scratch(dev, nq, nkv, H);
        float *dscratch = dev->ops->alloc(dev, MAX(dscr, 1) * sizeof(float));
        dev->ops->attention(dev, dout, tail ? dot : NULL, dq, dk, dv, nq, nkv, ldq, ldk, ldv, ldo,
                            H, Hk, hd, scale, cases[t].causal, tail ? cases[t].tail : 0,
                            dscratch);
        g_autofree float *got = down(dev, dout, nof), *got_t = down(dev, dot, nof);
        finish_ok(dev);
        g_autofree char *what = g_strdup_printf("attention q %d kv %d heads %d/%d hd %d causal %d",
                                                nq, nkv, H, Hk, hd, cases[t].causal);
        expect_close(what, got, o, nof, &c->tol.reduction);
        if (tail) {
            g_autofree char *wt = g_strdup_printf("%s, tail from %d", what, cases[t].tail);
            expect_close(wt, got_t, ot, nof, &c->tol.reduction);
        }
        dev->ops->release(dev, dq), dev->ops->release(dev, dk), dev->ops->release(dev, dv);
        dev->ops->release(dev, dout), dev->ops->release(dev, dot),
            dev->ops->release(dev, dscratch);
    }
    g_rand_free(r);
}

/* ---- the whole model ------------------------------------------------------------------------- */

static ClModel *check_model(ClSveVariant v, gboolean tied, guint64 seed, gboolean pvm,
                            ClCasaVariant casa)
{
    ClModelConfig cfg;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_config_preset(&cfg, "tiny", &err));
    cfg.image_size = 48;
    cfg.patch_size = 8; /* G = 6, N = 36, M = 9 */
    cfg.enc_dim = 48;
    cfg.enc_depth = 2;
    cfg.enc_heads = 2;
    cfg.enc_mlp = 64;
    cfg.merger_hidden = 40;
    cfg.dec_dim = 64;
    cfg.dec_depth = 2;
    cfg.dec_heads = 4;
    cfg.dec_kv_heads = 2;
    cfg.dec_mlp = 96;
    cfg.vocab_size = 300;
    cfg.max_len = 256;
    cfg.sve_variant = v;
    cfg.sve_out_init_std = 0.05;
    cfg.tie_embeddings = tied;
    cfg.visual_center = v == CL_SVE_ADALN_ZERO;
    if (pvm) /* PVM beside the FFN of layer 1: rank 32, 4 heads */
        g_assert_true(cl_config_set_pvm(&cfg, 1, 32));
    cfg.casa = casa;
    ClModel *m = cl_model_new_random(&cfg, seed, &err);
    g_assert_no_error(err);
    /* lively weights: random init's zero biases and unit norms would hide misplaced columns */
    GRand *r = g_rand_new_with_seed((guint32)seed);
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(&m->config, &m->w);
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        float *w = *s->slot;
        if (!w)
            continue;
        gint64 n = cl_weight_spec_numel(s);
        for (gint64 j = 0; j < n; j++)
            w[j] += (float)g_rand_double_range(r, -0.1, 0.1);
    }
    g_rand_free(r);
    cl_model_weights_changed(m);
    return m;
}

static void image(const ClModelConfig *cfg, float *px, int t)
{
    int S = cfg->image_size;
    for (int ch = 0; ch < cfg->channels; ch++)
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++)
                px[((size_t)ch * S + y) * S + x] =
                    (float)(0.5 * sin(0.3 * x + ch) * cos(0.2 * y) +
                            (abs(x - 10 - 6 * t) < 5 && abs(y - 20) < 5 ? 0.8 : 0.0));
}

/* Encodes two images (with Δ) on both backends, runs the prompt with logits at every position,
 * then greedy and beam generation; compares everything. */
static void run_model_check(const Ctx *c, ClModel *m, const char *name)
{
    ClBackend *dev = c->dev;
    const ClModelConfig *cfg = &m->config;
    g_autoptr(GError) err = NULL;
    const int M = cl_config_n_visual(cfg), E = cfg->dec_dim, V = cfg->vocab_size;
    size_t img = (size_t)cfg->channels * cfg->image_size * cfg->image_size;
    g_autofree float *px = g_new(float, img);
    g_autofree float *vis_cpu = g_new(float, 2 * (size_t)M * E),
                     *vis_dev = g_new(float, 2 * (size_t)M * E);
    g_autoptr(ClEncoderState) s_cpu = cl_encoder_state_new(m);
    g_autoptr(ClEncoderState) s_dev = cl_encoder_state_new(m);
    for (int t = 0; t < 2; t++) {
        image(cfg, px, t);
        ClEncoderOutput a = { 0 }, b = { 0 };
        g_assert_true(cl_encoder_forward(cpu_be, m, s_cpu, px, t, TRUE, NULL, NULL, &a, &err));
        g_assert_true(cl_encoder_forward(dev, m, s_dev, px, t, TRUE, NULL, NULL, &b, &err));
        g_assert_no_error(err);
        g_autofree char *w1 = g_strdup_printf("%s image %d visual tokens", name, t);
        expect_close(w1, b.visual, a.visual, (size_t)M * E, &c->tol.model);
        g_autofree char *w2 = g_strdup_printf("%s image %d update norms", name, t);
        expect_close(w2, b.update_norm, a.update_norm, (size_t)cfg->enc_depth * a.n_patches,
                     &c->tol.model);
        g_autofree char *w3 = g_strdup_printf("%s image %d delta map", name, t);
        ClTol dtol = c->tol.model;
        dtol.atol = MAX(dtol.atol, 1e-7); /* Δ is a difference of near-equal tokens */
        expect_close(w3, b.delta, a.delta, (size_t)M, &dtol);
        memcpy(vis_cpu + (size_t)t * M * E, a.visual, (size_t)M * E * sizeof(float));
        memcpy(vis_dev + (size_t)t * M * E, b.visual, (size_t)M * E * sizeof(float));
        cl_encoder_output_clear(&a);
        cl_encoder_output_clear(&b);
    }
    /* a prompt: a few tokens, the two images' rows, a few more */
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(gint32));
    for (int i = 0; i < 5; i++) {
        gint32 id = 40 + 7 * i;
        g_array_append_val(ids, id);
    }
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < M; i++) {
            gint32 id = CL_DECODER_VISUAL;
            g_array_append_val(ids, id);
        }
        gint32 id = 90 + t;
        g_array_append_val(ids, id);
    }
    int n = (int)ids->len;
    g_autofree float *la = g_new(float, (size_t)n * V), *lb = g_new(float, (size_t)n * V);
    g_autofree float *last_a = g_new(float, V), *last_b = g_new(float, V);
    g_autoptr(ClKVCache) ka = cl_kv_cache_new(m, 64 + n);
    g_autoptr(ClKVCache) kb = cl_kv_cache_new(m, 64 + n);
    g_assert_true(cl_decoder_forward(cpu_be, m, ka, (gint32 *)ids->data, n, vis_cpu, last_a, la,
                                     NULL, NULL, &err));
    g_assert_true(cl_decoder_forward(dev, m, kb, (gint32 *)ids->data, n, vis_cpu, last_b, lb, NULL,
                                     NULL, &err));
    g_assert_no_error(err);
    g_autofree char *w4 = g_strdup_printf("%s logits at every prompt position", name);
    expect_close(w4, lb, la, (size_t)n * V, &c->tol.model);
    /* two decode steps on the cache */
    for (int step = 0; step < 2; step++) {
        gint32 id = 100 + step;
        g_assert_true(cl_decoder_forward(cpu_be, m, ka, &id, 1, NULL, last_a, NULL, NULL, NULL,
                                         &err));
        g_assert_true(cl_decoder_forward(dev, m, kb, &id, 1, NULL, last_b, NULL, NULL, NULL, &err));
        g_assert_no_error(err);
        g_autofree char *w5 = g_strdup_printf("%s logits of decode step %d", name, step + 1);
        expect_close(w5, last_b, last_a, (size_t)V, &c->tol.model);
    }

    /* generation: greedy and beam (beam copies caches on the device) */
    for (int beam = 1; beam <= 3; beam += 2) {
        ClGenerateOptions o;
        cl_generate_options_init(&o);
        o.max_new_tokens = 12;
        o.beam_size = beam;
        ClGenerateResult ga, gb;
        g_assert_true(cl_generate(cpu_be, m, (gint32 *)ids->data, n, vis_cpu, &o, &ga, &err));
        g_assert_true(cl_generate(dev, m, (gint32 *)ids->data, n, vis_dev, &o, &gb, &err));
        g_assert_no_error(err);
        g_autofree char *ta = g_strescape(ga.text->str, NULL);
        g_autofree char *tb = g_strescape(gb.text->str, NULL);
        g_test_message("%s %s: CPU \"%s\", device \"%s\"", name,
                       beam == 1 ? "greedy" : "beam 3", ta, tb);
        if (c->exact_decodes) {
            g_assert_cmpuint(gb.ids->len, ==, ga.ids->len);
            for (guint i = 0; i < ga.ids->len; i++)
                g_assert_cmpint(g_array_index(gb.ids, gint32, i), ==,
                                g_array_index(ga.ids, gint32, i));
        }
        cl_generate_result_clear(&ga);
        cl_generate_result_clear(&gb);
    }
}

static void test_model_variants(gconstpointer p)
{
    const Ctx *c = p;
    const ClSveVariant variants[] = { CL_SVE_CROSS_FFN, CL_SVE_SELF_EXT, CL_SVE_ADALN_ZERO,
                                      CL_SVE_STATELESS };
    for (size_t i = 0; i < G_N_ELEMENTS(variants); i++) {
        g_autoptr(ClModel) m = check_model(variants[i], i == 1, 31 + i, FALSE, CL_CASA_OFF);
        run_model_check(c, m, cl_sve_variant_name(variants[i]));
    }
    g_autoptr(ClModel) pvm = check_model(CL_SVE_CROSS_FFN, FALSE, 39, TRUE, CL_CASA_OFF);
    run_model_check(c, pvm, "cross_ffn with PVM");
    g_autoptr(ClModel) casa = check_model(CL_SVE_CROSS_FFN, FALSE, 43, FALSE, CL_CASA_CA);
    run_model_check(c, casa, "cross_ffn with CASA");
    /* the same weights with CA_{t+v}, CA^# and the gist token (switches: no new tensors) */
    casa->config.casa_tv = TRUE;
    casa->config.casa_replace = 2;
    casa->config.casa_gist = TRUE;
    run_model_check(c, casa, "cross_ffn with CASA t+v, CA^# and gists");
}

/* The shipped model, when the source tree has it: real weights, real decodes. */
static void test_model_shipped(gconstpointer p)
{
    const Ctx *c = p;
    const char *root = g_getenv("CL_SOURCE_ROOT");
    g_autofree char *path =
        g_build_filename(root ? root : ".", "data", "models", "changelens-default.safetensors",
                         NULL);
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_test_skip("no shipped model in this tree");
        return;
    }
    g_autoptr(GError) err = NULL;
    g_autoptr(ClModel) m = cl_model_load(path, &err);
    g_assert_no_error(err);
    run_model_check(c, m, "shipped model");
}

/* The device copy of the weights follows the model's edits (cl_model_weights_changed). */
static void test_weights_follow_edits(gconstpointer p)
{
    const Ctx *c = p;
    g_autoptr(ClModel) m = check_model(CL_SVE_CROSS_FFN, FALSE, 77, FALSE, CL_CASA_OFF);
    run_model_check(c, m, "before the edit");
    for (gint64 i = 0; i < (gint64)m->config.dec_dim * m->config.vocab_size; i++)
        m->w.lm_head[i] *= -1.0f;
    cl_model_weights_changed(m);
    run_model_check(c, m, "after the edit");
}

void cl_test_add_backend_checks(const char *prefix, ClBackend *dev, const ClTolerances *tol,
                                gboolean exact_decodes)
{
    if (!cpu_be)
        cpu_be = cl_backend_cpu_new(0);
    Ctx *c = g_new0(Ctx, 1);
    c->dev = dev;
    c->tol = *tol;
    c->exact_decodes = exact_decodes; /* lives as long as the test program */
#define ADD(path, fn)                                                                              \
    do {                                                                                           \
        g_autofree char *p_ = g_strconcat(prefix, path, NULL);                                     \
        g_test_add_data_func(p_, c, fn);                                                           \
    } while (0)
    ADD("/ops/linear-gemm", test_linear_gemm);
    ADD("/ops/rows", test_rows);
    ADD("/ops/elementwise", test_elementwise);
    ADD("/ops/rope-layout", test_rope_layout);
    ADD("/ops/attention", test_attention);
    ADD("/model/variants", test_model_variants);
    ADD("/model/weights-follow-edits", test_weights_follow_edits);
    ADD("/model/shipped", test_model_shipped);
#undef ADD
}
