/* test-grad.c - every op's backward (core/nn/grad.h) against central finite differences of
 * the CPU backend's forward, in the manner of ggml's test-backend-ops gradient mode: the loss is
 * L = Σ dy ⊙ op(inputs) (accumulated in double) for a random dy, and every input and parameter
 * gradient is compared element by element (norm-wise relative error). */
#include <math.h>
#include <string.h>

#include <glib.h>

#include "nn/backend.h"
#include "nn/grad.h"
#include "op-path.h"

static ClBackend *be;

#define EPS 2e-3
#define TOL 2e-3

static float *rnd(GRand *r, size_t n, double lo, double hi)
{
    float *x = g_new(float, n);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)g_rand_double_range(r, lo, hi);
    return x;
}

/* One op under test: fwd writes the output (ny floats) from the inputs held in ctx. */
typedef void (*FwdFn)(void *ctx, float *y);

typedef struct {
    FwdFn fwd;
    void *ctx;
    const float *dy;
    size_t ny;
    float *y;
} Probe;

static double probe_loss(Probe *p)
{
    p->fwd(p->ctx, p->y);
    double l = 0;
    for (size_t i = 0; i < p->ny; i++)
        l += (double)p->dy[i] * p->y[i];
    return l;
}

/* Compares grad (n floats) with finite differences over x; returns the norm-wise error. */
static double check_input(Probe *p, const char *op, const char *name, float *x, const float *grad,
                          size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        float keep = x[i];
        x[i] = keep + (float)EPS;
        double lp = probe_loss(p);
        x[i] = keep - (float)EPS;
        double lm = probe_loss(p);
        x[i] = keep;
        double fd = (lp - lm) / (2 * EPS);
        num += (fd - grad[i]) * (fd - grad[i]);
        den += fd * fd;
    }
    double err = sqrt(num / MAX(den, 1e-30));
    g_test_message("%-14s d%-6s rel err %.2e (|g| %.3g, %zu values)", op, name, err, sqrt(den), n);
    g_assert_cmpfloat(den, >, 1e-12); /* a gradient that is all zeros proves nothing */
    g_assert_cmpfloat(err, <, TOL);
    return err;
}

/* ---- linear ---------------------------------------------------------------------------------- */

typedef struct {
    float *x, *w, *b;
    int m, k, n;
} LinCtx;

static void lin_fwd(void *p, float *y)
{
    LinCtx *c = p;
    be->ops->linear(be, y, c->x, c->w, c->b, c->m, c->k, c->n);
}

/* p: m, k, n */
static void test_linear(gconstpointer data)
{
    const int *p_ = data;
    g_autoptr(GRand) r = g_rand_new_with_seed(1);
    LinCtx c = { .m = p_[0], .k = p_[1], .n = p_[2] };
    const size_t nx = (size_t)c.m * c.k, nw = (size_t)c.n * c.k, ny = (size_t)c.m * c.n;
    c.x = rnd(r, nx, -1, 1), c.w = rnd(r, nw, -1, 1), c.b = rnd(r, c.n, -1, 1);
    float *dy = rnd(r, ny, -1, 1), *y = g_new(float, ny);
    float *dx = g_new0(float, nx), *dw = g_new0(float, nw), *db = g_new0(float, c.n);
    cl_grad_linear(dx, dw, db, dy, c.x, c.w, c.m, c.k, c.n);
    Probe p = { lin_fwd, &c, dy, ny, y };
    check_input(&p, "linear", "x", c.x, dx, nx);
    check_input(&p, "linear", "w", c.w, dw, nw);
    check_input(&p, "linear", "b", c.b, db, c.n);
    g_free(c.x), g_free(c.w), g_free(c.b), g_free(dy), g_free(y), g_free(dx), g_free(dw),
        g_free(db);
}

/* ---- norms ----------------------------------------------------------------------------------- */

typedef struct {
    float *x, *w, *b;
    int m, n;
    gboolean rms;
} NormCtx;

static void norm_fwd(void *p, float *y)
{
    NormCtx *c = p;
    if (c->rms)
        be->ops->rmsnorm(be, y, c->x, c->w, c->m, c->n, 1e-6f);
    else
        be->ops->layernorm(be, y, c->x, c->w, c->b, c->m, c->n, 1e-6f);
}

/* p: rms (0: layernorm), m, n */
static void test_norms(gconstpointer data)
{
    const int *p_ = data;
    g_autoptr(GRand) r = g_rand_new_with_seed(2);
    {
        const int rms = p_[0], m = p_[1], n = p_[2], mn = m * n;
        NormCtx c = { .m = m, .n = n, .rms = rms };
        c.x = rnd(r, mn, -2, 2), c.w = rnd(r, n, 0.5, 1.5), c.b = rnd(r, n, -1, 1);
        float *dy = rnd(r, mn, -1, 1), *y = g_new(float, mn);
        float *dx = g_new0(float, mn), *dw = g_new0(float, n), *db = g_new0(float, n);
        if (rms)
            cl_grad_rmsnorm(dx, dw, dy, c.x, c.w, c.m, c.n, 1e-6f);
        else
            cl_grad_layernorm(dx, dw, db, dy, c.x, c.w, c.m, c.n, 1e-6f);
        Probe p = { norm_fwd, &c, dy, mn, y };
        const char *op = rms ? "rmsnorm" : "layernorm";
        check_input(&p, op, "x", c.x, dx, mn);
        check_input(&p, op, "w", c.w, dw, n);
        if (!rms)
            check_input(&p, op, "b", c.b, db, n);
        g_free(c.x), g_free(c.w), g_free(c.b), g_free(dy), g_free(y), g_free(dx), g_free(dw),
            g_free(db);
    }
}

/* ---- elementwise and column ops -------------------------------------------------------------- */

typedef struct {
    float *x, *a, *g, *h;
    int m, n, which;
} EwCtx;

enum {
    EW_MODULATE,
    EW_GELU,
    EW_SILU,
    EW_SILU_MUL,
    EW_RESIDUAL,
    EW_RESIDUAL_PLAIN,
    EW_SCALE_COLS,
    EW_SCALE_COLS_ACC,
    EW_SOFTMAX,
    EW_ROW_NORMS,
    EW_N
};
static const char *ew_names[] = {
    "modulate",  "gelu",       "silu",        "silu_mul", "residual",
    "residual+", "scale_cols", "scale_cols+", "softmax",  "row_norms"
};

static void ew_fwd(void *p, float *y)
{
    EwCtx *c = p;
    size_t mn = (size_t)c->m * c->n;
    switch (c->which) {
    case EW_MODULATE:
        memcpy(y, c->x, mn * sizeof(float));
        be->ops->modulate(be, y, c->g, c->h, c->m, c->n);
        break;
    case EW_GELU: be->ops->gelu(be, y, c->x, mn); break;
    case EW_SILU: be->ops->silu(be, y, c->x, mn); break;
    case EW_SILU_MUL: be->ops->silu_mul(be, y, c->x, c->a, mn); break;
    case EW_RESIDUAL:
    case EW_RESIDUAL_PLAIN:
        memcpy(y, c->x, mn * sizeof(float));
        be->ops->residual(be, y, c->a, c->which == EW_RESIDUAL ? c->g : NULL, c->m, c->n);
        break;
    case EW_SCALE_COLS:
    case EW_SCALE_COLS_ACC:
        memcpy(y, c->x, mn * sizeof(float));
        be->ops->scale_cols(be, y, c->a, c->g, c->m, c->n, c->which == EW_SCALE_COLS_ACC);
        break;
    case EW_SOFTMAX:
        memcpy(y, c->x, mn * sizeof(float));
        be->ops->softmax(be, y, c->m, c->n, c->n);
        break;
    case EW_ROW_NORMS: be->ops->row_norms(be, y, c->x, NULL, c->m, c->n, c->n); break;
    }
}

static void test_elementwise(void)
{
    g_autoptr(GRand) r = g_rand_new_with_seed(3);
    const int m = 3, n = 9;
    const size_t mn = (size_t)m * n;
    for (int which = 0; which < EW_N; which++) {
        EwCtx c = { .m = m, .n = n, .which = which };
        c.x = rnd(r, mn, -3, 3), c.a = rnd(r, mn, -2, 2), c.g = rnd(r, n, -1, 1),
        c.h = rnd(r, n, -1, 1);
        size_t ny = which == EW_ROW_NORMS ? (size_t)m : mn;
        float *dy = rnd(r, ny, -1, 1), *y = g_new(float, mn);
        float *dx = g_new0(float, mn),
                           *da = g_new0(float, mn), *dg = g_new0(float, n), *dh = g_new0(float, n);
        Probe p = { ew_fwd, &c, dy, ny, y };
        const char *op = ew_names[which];
        switch (which) {
        case EW_MODULATE:
            cl_grad_modulate(dx, dg, dh, dy, c.x, c.g, m, n);
            check_input(&p, op, "x", c.x, dx, mn);
            check_input(&p, op, "scale", c.g, dg, n);
            check_input(&p, op, "shift", c.h, dh, n);
            break;
        case EW_GELU:
            cl_grad_gelu(dx, dy, c.x, mn);
            check_input(&p, op, "x", c.x, dx, mn);
            break;
        case EW_SILU:
            cl_grad_silu(dx, dy, c.x, mn);
            check_input(&p, op, "x", c.x, dx, mn);
            break;
        case EW_SILU_MUL:
            cl_grad_silu_mul(dx, da, dy, c.x, c.a, mn);
            check_input(&p, op, "gate", c.x, dx, mn);
            check_input(&p, op, "up", c.a, da, mn);
            break;
        case EW_RESIDUAL:
        case EW_RESIDUAL_PLAIN:
            /* the stream passes dy through */
            memcpy(dx, dy, mn * sizeof(float));
            cl_grad_residual(da, dg, dy, c.a, which == EW_RESIDUAL ? c.g : NULL, m, n);
            check_input(&p, op, "x", c.x, dx, mn);
            check_input(&p, op, "a", c.a, da, mn);
            if (which == EW_RESIDUAL)
                check_input(&p, op, "gate", c.g, dg, n);
            break;
        case EW_SCALE_COLS:
        case EW_SCALE_COLS_ACC:
            cl_grad_scale_cols(da, dg, dy, c.a, c.g, m, n);
            check_input(&p, op, "a", c.a, da, mn);
            check_input(&p, op, "gate", c.g, dg, n);
            if (which == EW_SCALE_COLS_ACC) {
                memcpy(dx, dy, mn * sizeof(float));
                check_input(&p, op, "out", c.x, dx, mn);
            }
            break;
        case EW_SOFTMAX:
            ew_fwd(&c, y);
            cl_grad_softmax(dx, dy, y, m, n, n);
            check_input(&p, op, "x", c.x, dx, mn);
            break;
        case EW_ROW_NORMS:
            ew_fwd(&c, y);
            cl_grad_row_norms(dx, dy, c.x, y, m, n);
            check_input(&p, op, "x", c.x, dx, mn);
            break;
        }
        g_free(c.x), g_free(c.a), g_free(c.g), g_free(c.h), g_free(dy), g_free(y), g_free(dx),
            g_free(da), g_free(dg), g_free(dh);
    }
}

/* ---- RoPE ------------------------------------------------------------------------------------ */

typedef struct {
    float *x, *cos, *sin;
    int n_tok, ld, n_head, hd, sections;
} RopeCtx;

static void rope_fwd(void *p, float *y)
{
    RopeCtx *c = p;
    memcpy(y, c->x, (size_t)c->n_tok * c->ld * sizeof(float));
    be->ops->rope(be, y, c->cos, c->sin, c->n_tok, c->ld, c->n_head, c->hd, c->sections);
}

static void test_rope(void)
{
    g_autoptr(GRand) r = g_rand_new_with_seed(4);
    for (int sections = 1; sections <= 2; sections++) {
        /* 2-D: a 3×3 grid; 1-D: positions 5.. (a cached prefix); ld wider than the heads */
        RopeCtx c = { .n_tok = 9, .n_head = 2, .hd = 8, .sections = sections };
        c.ld = c.n_head * c.hd + 3;
        size_t nx = (size_t)c.n_tok * c.ld;
        c.x = rnd(r, nx, -1, 1);
        c.cos = g_new(float, (size_t)c.n_tok * c.hd / 2);
        c.sin = g_new(float, (size_t)c.n_tok * c.hd / 2);
        if (sections == 1)
            cl_rope_table_1d(c.cos, c.sin, 5, c.n_tok, c.hd, 10.0);
        else
            cl_rope_table_2d(c.cos, c.sin, 3, c.hd, 10.0);
        float *dy = rnd(r, nx, -1, 1), *y = g_new(float, nx), *dx = g_memdup2(dy, nx * 4);
        cl_grad_rope(dx, c.cos, c.sin, c.n_tok, c.ld, c.n_head, c.hd, c.sections);
        Probe p = { rope_fwd, &c, dy, nx, y };
        check_input(&p, sections == 1 ? "rope-1d" : "rope-2d", "x", c.x, dx, nx);
        g_free(c.x), g_free(c.cos), g_free(c.sin), g_free(dy), g_free(y), g_free(dx);
    }
}

/* ---- attention ------------------------------------------------------------------------------- */

typedef struct {
    float *q, *k, *v, *scratch;
    int n_q, n_kv, ldq, ldk, ldv, ldo, h, hkv, hd, causal;
    float scale;
} AttCtx;

static void att_fwd(void *p, float *y)
{
    AttCtx *c = p;
    be->ops->attention(be, y, NULL, c->q, c->k, c->v, c->n_q, c->n_kv, c->ldq, c->ldk, c->ldv,
                       c->ldo, c->h, c->hkv, c->hd, c->scale, c->causal, 0, c->scratch);
}

static void check_attention(GRand *r, const char *name, int n_q, int n_kv, int h, int hkv, int hd,
                            int causal, int pad)
{
    AttCtx c = { .n_q = n_q, .n_kv = n_kv, .h = h, .hkv = hkv, .hd = hd, .causal = causal };
    c.ldq = h * hd + pad, c.ldk = hkv * hd + pad, c.ldv = hkv * hd + 2 * pad, c.ldo = h * hd;
    c.scale = 1.0f / sqrtf((float)hd);
    size_t nq = (size_t)n_q * c.ldq, nk = (size_t)n_kv * c.ldk, nv = (size_t)n_kv * c.ldv;
    size_t no = (size_t)n_q * c.ldo;
    c.q = rnd(r, nq, -1.5, 1.5), c.k = rnd(r, nk, -1.5, 1.5), c.v = rnd(r, nv, -1, 1);
    c.scratch = g_new(float, be->ops->attention_scratch(be, n_q, n_kv, h));
    float *dy = rnd(r, no, -1, 1), *y = g_new(float, no);
    float *dq = g_new0(float, nq), *dk = g_new0(float, nk), *dv = g_new0(float, nv);
    cl_grad_attention(dq, dk, dv, dy, c.q, c.k, c.v, n_q, n_kv, c.ldq, c.ldk, c.ldv, c.ldo, h, hkv,
                      hd, c.scale, causal);
    Probe p = { att_fwd, &c, dy, no, y };
    if (n_kv > 1) {
        check_input(&p, name, "q", c.q, dq, nq);
        check_input(&p, name, "k", c.k, dk, nk);
    } else {
        /* one key: its weight is 1 whatever q and k are, so their gradients are exactly 0 */
        for (size_t i = 0; i < nq; i++)
            g_assert_cmpfloat(dq[i], ==, 0.0f);
        for (size_t i = 0; i < nk; i++)
            g_assert_cmpfloat(dk[i], ==, 0.0f);
    }
    check_input(&p, name, "v", c.v, dv, nv);

    /* the training pair: the forward keeps the probabilities, the backward reads them */
    float *probs = g_new(float, (size_t)h * n_q * n_kv), *y2 = g_new(float, no);
    float *dq2 = g_new0(float, nq), *dk2 = g_new0(float, nk), *dv2 = g_new0(float, nv);
    att_fwd(&c, y);
    cl_train_attention(y2, probs, c.q, c.k, c.v, n_q, n_kv, c.ldq, c.ldk, c.ldv, c.ldo, h, hkv, hd,
                       c.scale, causal);
    cl_grad_attention_probs(dq2, dk2, dv2, dy, c.q, c.k, c.v, probs, n_q, n_kv, c.ldq, c.ldk, c.ldv,
                            c.ldo, h, hkv, hd, c.scale, causal);
    for (int i = 0; i < n_q; i++)
        for (int j = 0; j < h * hd; j++)
            g_assert_cmpfloat_with_epsilon(y2[(size_t)i * c.ldo + j], y[(size_t)i * c.ldo + j],
                                           1e-5);
    const struct {
        const float *a, *b;
        size_t n;
    } t[] = { { dq, dq2, nq }, { dk, dk2, nk }, { dv, dv2, nv } };
    for (guint i = 0; i < G_N_ELEMENTS(t); i++)
        for (size_t j = 0; j < t[i].n; j++)
            g_assert_cmpfloat_with_epsilon(t[i].a[j], t[i].b[j], 1e-5 + 1e-5 * fabsf(t[i].a[j]));
    g_free(probs), g_free(y2), g_free(dq2), g_free(dk2), g_free(dv2);
    g_free(c.q), g_free(c.k), g_free(c.v), g_free(c.scratch), g_free(dy), g_free(y), g_free(dq),
        g_free(dk), g_free(dv);
}

static void test_attention(void)
{
    g_autoptr(GRand) r = g_rand_new_with_seed(5);
    /* the encoder: no mask, strided q/k/v (fused qkv), more queries than the fused path */
    check_attention(r, "attn-enc", 9, 9, 2, 2, 8, -1, 5);
    /* cross-attention onto a different number of keys (the null state: 1) */
    check_attention(r, "attn-cross", 6, 4, 2, 2, 4, -1, 0);
    check_attention(r, "attn-null", 5, 1, 2, 2, 4, -1, 0);
    /* the decoder: causal, GQA (4 query heads on 2 KV heads), from scratch and after a prefix */
    check_attention(r, "attn-causal", 7, 7, 4, 2, 4, 0, 0);
    check_attention(r, "attn-cached", 3, 8, 4, 1, 4, 5, 2);
    /* long enough for the causal backward's row blocks (64 rows; the last one partial), from
     * scratch and after a prefix */
    check_attention(r, "attn-causal-blocks", 150, 150, 2, 1, 4, 0, 1);
    check_attention(r, "attn-cached-blocks", 70, 90, 2, 2, 2, 20, 0);
}

/* ---- embedding, unfolds, cross-entropy ------------------------------------------------------- */

typedef struct {
    float *table, *pix, *w, *b, *tmp;
    gint32 *ids;
    int n, dim, c, s, p, grid;
} MiscCtx;

static void embed_fwd(void *p, float *y)
{
    MiscCtx *c = p;
    memset(y, 0, (size_t)c->n * c->dim * sizeof(float));
    be->ops->embed(be, y, c->table, c->ids, c->n, c->dim);
}

static void test_embed(void)
{
    g_autoptr(GRand) r = g_rand_new_with_seed(6);
    gint32 ids[] = { 3, 0, -1, 3, 5, -1 }; /* repeats, and visual rows (-1) left alone */
    MiscCtx c = { .ids = ids, .n = 6, .dim = 5 };
    c.table = rnd(r, 30, -1, 1);
    float *dy = rnd(r, 30, -1, 1), *y = g_new(float, 30), *dt = g_new0(float, 30);
    cl_grad_embed(dt, dy, ids, 6, 5);
    Probe p = { embed_fwd, &c, dy, 30, y };
    check_input(&p, "embed", "table", c.table, dt, 30);
    g_free(c.table), g_free(dy), g_free(y), g_free(dt);
}

/* the patch embedding as the encoder runs it: unfold, then a linear layer */
static void patch_fwd(void *p, float *y)
{
    MiscCtx *c = p;
    cl_patch_unfold(c->tmp, c->pix, c->c, c->s, c->p);
    int cpp = c->c * c->p * c->p, n = (c->s / c->p) * (c->s / c->p);
    be->ops->linear(be, y, c->tmp, c->w, c->b, n, cpp, c->dim);
}

static void test_patch(void)
{
    g_autoptr(GRand) r = g_rand_new_with_seed(7);
    MiscCtx c = { .c = 3, .s = 8, .p = 4, .dim = 5 };
    const int cpp = 48, n = 4;
    size_t npix = 3 * 8 * 8;
    c.pix = rnd(r, npix, -1, 1), c.w = rnd(r, (size_t)5 * cpp, -1, 1), c.b = rnd(r, 5, -1, 1);
    c.tmp = g_new(float, (size_t)n * cpp);
    float *dy = rnd(r, (size_t)n * 5, -1, 1), *y = g_new(float, (size_t)n * 5);
    float *dpatch = g_new0(float, (size_t)n * cpp), *dpix = g_new0(float, npix);
    float *dw = g_new0(float, (size_t)5 * cpp), *db = g_new0(float, 5);
    cl_patch_unfold(c.tmp, c.pix, 3, 8, 4);
    cl_grad_linear(dpatch, dw, db, dy, c.tmp, c.w, n, cpp, 5);
    cl_grad_patch_unfold(dpix, dpatch, 3, 8, 4);
    Probe p = { patch_fwd, &c, dy, (size_t)n * 5, y };
    check_input(&p, "patch-conv", "pixels", c.pix, dpix, npix);
    check_input(&p, "patch-conv", "w", c.w, dw, (size_t)5 * cpp);
    check_input(&p, "patch-conv", "b", c.b, db, 5);
    g_free(c.pix), g_free(c.w), g_free(c.b), g_free(c.tmp), g_free(dy), g_free(y), g_free(dpatch),
        g_free(dpix), g_free(dw), g_free(db);
}

static void merger_fwd(void *p, float *y)
{
    MiscCtx *c = p;
    cl_merger_unfold(y, c->table, c->grid, c->dim);
}

static void test_merger_unfold(void)
{
    g_autoptr(GRand) r = g_rand_new_with_seed(8);
    MiscCtx c = { .grid = 4, .dim = 3 };
    size_t nx = 16 * 3;
    c.table = rnd(r, nx, -1, 1);
    float *dy = rnd(r, nx, -1, 1), *y = g_new(float, nx), *dx = g_new0(float, nx);
    cl_grad_merger_unfold(dx, dy, 4, 3);
    Probe p = { merger_fwd, &c, dy, nx, y };
    check_input(&p, "merger-unfold", "x", c.table, dx, nx);
    /* the layout itself: merged token (1, 0) of a 4×4 grid starts with token (2, 0) = 8 */
    cl_merger_unfold(y, c.table, 4, 3);
    g_assert_cmpfloat(y[(2 * 4 + 0) * 3], ==, c.table[8 * 3]);
    g_assert_cmpfloat(y[(2 * 4 + 3) * 3], ==, c.table[13 * 3]);
    g_free(c.table), g_free(dy), g_free(y), g_free(dx);
}

static void test_cross_entropy(void)
{
    g_autoptr(GRand) r = g_rand_new_with_seed(9);
    const int n = 5, V = 13;
    float *z = rnd(r, (size_t)n * V, -3, 3), *dz = g_new(float, (size_t)n * V);
    gint32 tgt[] = { 4, 0, 12, 7, 7 };
    guint8 mask[] = { 1, 0, 1, 1, 0 };
    int ns = 0;
    double loss = cl_cross_entropy(dz, z, tgt, mask, n, V, 1.0f, &ns);
    g_assert_cmpint(ns, ==, 3);
    /* the loss itself, by hand */
    double want = 0;
    for (int t = 0; t < n; t++) {
        if (!mask[t])
            continue;
        double s = 0;
        for (int j = 0; j < V; j++)
            s += exp(z[t * V + j]);
        want += log(s) - z[t * V + tgt[t]];
    }
    /* float exponentials summed in double: exact to float rounding */
    g_assert_cmpfloat(fabs(loss - want / 3), <, 1e-6 * MAX(1.0, fabs(want / 3)));
    /* unsupervised rows get no gradient */
    for (int j = 0; j < V; j++)
        g_assert_cmpfloat(dz[V + j], ==, 0.0f);
    double num = 0, den = 0;
    for (int i = 0; i < n * V; i++) {
        float keep = z[i];
        z[i] = keep + (float)EPS;
        double lp = cl_cross_entropy(NULL, z, tgt, mask, n, V, 1.0f, NULL);
        z[i] = keep - (float)EPS;
        double lm = cl_cross_entropy(NULL, z, tgt, mask, n, V, 1.0f, NULL);
        z[i] = keep;
        double fd = (lp - lm) / (2 * EPS);
        num += (fd - dz[i]) * (fd - dz[i]);
        den += fd * fd;
    }
    g_test_message("cross-entropy  dlogits rel err %.2e", sqrt(num / den));
    g_assert_cmpfloat(sqrt(num / den), <, TOL);
    /* nothing supervised: loss 0, zero gradient, no division by zero */
    guint8 none[5] = { 0 };
    g_assert_cmpfloat(cl_cross_entropy(dz, z, tgt, none, n, V, 1.0f, &ns), ==, 0.0);
    g_assert_cmpint(ns, ==, 0);
    g_assert_cmpfloat(dz[0], ==, 0.0f);
    g_free(z), g_free(dz);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    be = cl_backend_cpu_new(2);
    /* the op table's naming (op-path.h): an op and its parameters in every path */
    static const struct {
        const char *op, *names;
        GTestDataFunc fn;
        int p[4];
        int skip;
    } cases[] = {
        { "linear", "m,k,n", test_linear, { 5, 7, 6 }, 0 },
        { "linear", "m,k,n", test_linear, { 1, 33, 9 }, 0 }, /* a decode step's row */
        { "layernorm", "rms,m,n", test_norms, { 0, 4, 11 }, 1 },
        { "rmsnorm", "rms,m,n", test_norms, { 1, 4, 11 }, 1 },
        { "rmsnorm", "rms,m,n", test_norms, { 1, 1, 24 }, 1 },
    };
    for (gsize k = 0; k < G_N_ELEMENTS(cases); k++) {
        g_autofree char *path =
            cl_test_op_path("/grad", cases[k].op, cases[k].names, cases[k].p, cases[k].skip);
        g_test_add_data_func(path, cases[k].p, cases[k].fn);
    }
    g_test_add_func("/grad/elementwise/m=3,n=9", test_elementwise);
    g_test_add_func("/grad/rope/tokens=9,heads=2,hd=8", test_rope);
    g_test_add_func("/grad/attention/default", test_attention);
    g_test_add_func("/grad/embed/n=6,dim=5", test_embed);
    g_test_add_func("/grad/im2col/channels=3,size=8,patch=4", test_patch);
    g_test_add_func("/grad/merge2x2/grid=4,d=3", test_merger_unfold);
    g_test_add_func("/grad/cross-entropy/default", test_cross_entropy);
    int rc = g_test_run();
    cl_backend_free(be);
    return rc;
}
