/* backend-ops.c - the op table: one entry per member of struct cl_backend_ops and shape, each
 * run on the backend under test and on the CPU oracle and compared with its kind's tolerance;
 * test paths name the op and its parameters (/ops/rope/sections=2). A member added to the struct
 * without a line in OP_MEMBERS fails to compile, and one without a case fails /ops/coverage. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "backend-check-private.h"
#include "op-path.h"
#include "nn/backend.h"

/* Every member of struct cl_backend_ops, in order. */
// clang-format off
#define OP_MEMBERS(X) \
    X(name) \
    X(destroy) \
    X(host_memory) \
    X(alloc) \
    X(release) \
    X(upload) \
    X(download) \
    X(copy) \
    X(zero) \
    X(finish) \
    X(linear) \
    X(gemm) \
    X(layernorm) \
    X(rmsnorm) \
    X(modulate) \
    X(gelu) \
    X(silu) \
    X(silu_mul) \
    X(add) \
    X(residual) \
    X(scale_cols) \
    X(rope) \
    X(softmax) \
    X(attention) \
    X(attention_scratch) \
    X(row_norms) \
    X(embed) \
    X(im2col) \
    X(merge2x2) \
    X(col_mean) \
    X(center_cols) \
    X(scale_by) \
    X(train)
// clang-format on

/* The struct rebuilt from the list: same size and every member at the same offset, or the list
 * (and so the table) has fallen behind the struct. */
#define MIRROR(m) __typeof__(((struct cl_backend_ops *)0)->m) m;
struct ops_mirror {
    OP_MEMBERS(MIRROR)
};
#define SAME_OFFSET(m)                                                                             \
    _Static_assert(offsetof(struct ops_mirror, m) == offsetof(struct cl_backend_ops, m),           \
                   "struct cl_backend_ops changed: update OP_MEMBERS and the op table (" #m ")");
OP_MEMBERS(SAME_OFFSET)
_Static_assert(sizeof(struct ops_mirror) == sizeof(struct cl_backend_ops),
               "struct cl_backend_ops has a member OP_MEMBERS does not list: add it and its cases");

/* Members every case exercises (memory, the end of a batch, identity), checked by all of them
 * rather than by a case of their own. */
static const char *const by_every_case[] = {
    "name",     "destroy", "host_memory", "alloc",  "release",           "upload",
    "download", "copy",    "zero",        "finish", "attention_scratch", "train",
};

typedef void (*OpCheck)(const Ctx *c, const int *p);

typedef struct {
    const char *op;     /* the member */
    const char *params; /* names of p[0..], comma-separated: "m,k,n,bias" */
    OpCheck check;
    int p[8];
} OpCase;

#define DEV (c->dev)
#define CPU (cl_check_cpu_be)

/* ---- products ---- */

static void check_linear(const Ctx *c, const int *p)
{
    const int m = p[0], k = p[1], n = p[2], with_bias = p[3];
    GRand *r = g_rand_new_with_seed(11 + (guint32)(m * 31 + k));
    g_autofree float *x = cl_check_rnd(r, (size_t)m * k, -1, 1);
    g_autofree float *w = cl_check_rnd(r, (size_t)n * k, -0.2, 0.2);
    g_autofree float *b = cl_check_rnd(r, (size_t)n, -1, 1), *o = g_new(float, (size_t)m * n);
    CPU->ops->linear(CPU, o, x, w, with_bias ? b : NULL, m, k, n);
    float *dx = cl_check_up(DEV, x, (size_t)m * k), *dw = cl_check_up(DEV, w, (size_t)n * k),
          *db = cl_check_up(DEV, b, n), *dout = cl_check_up(DEV, o, (size_t)m * n);
    DEV->ops->zero(DEV, dout, (size_t)m * n * sizeof(float));
    DEV->ops->linear(DEV, dout, dx, dw, with_bias ? db : NULL, m, k, n);
    g_autofree float *got = cl_check_down(DEV, dout, (size_t)m * n);
    cl_check_finish(DEV);
    cl_check_close("linear", got, o, (size_t)m * n, &c->tol.product);
    DEV->ops->release(DEV, dx), DEV->ops->release(DEV, dw), DEV->ops->release(DEV, db),
        DEV->ops->release(DEV, dout);
    g_rand_free(r);
}

/* C = α op(A) op(B) + β C with strided operands */
static void check_gemm(const Ctx *c, const int *p)
{
    const int ta = p[0], tb = p[1], m = 23, n = 17, k = 41;
    const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
    size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb, nc = (size_t)m * ldc;
    GRand *r = g_rand_new_with_seed(12 + (guint32)(2 * ta + tb));
    g_autofree float *a = cl_check_rnd(r, na, -1, 1), *bm = cl_check_rnd(r, nb, -1, 1),
                     *cc = cl_check_rnd(r, nc, -1, 1);
    float *da = cl_check_up(DEV, a, na), *dbm = cl_check_up(DEV, bm, nb),
          *dc = cl_check_up(DEV, cc, nc);
    CPU->ops->gemm(CPU, ta, tb, m, n, k, 0.7f, a, lda, bm, ldb, 0.5f, cc, ldc);
    DEV->ops->gemm(DEV, ta, tb, m, n, k, 0.7f, da, lda, dbm, ldb, 0.5f, dc, ldc);
    g_autofree float *got = cl_check_down(DEV, dc, nc);
    cl_check_finish(DEV);
    cl_check_close("gemm", got, cc, nc, &c->tol.product);
    DEV->ops->release(DEV, da), DEV->ops->release(DEV, dbm), DEV->ops->release(DEV, dc);
    g_rand_free(r);
}

/* ---- rows: norms, softmax, row norms, column means ---- */

typedef struct {
    int m, n;
    size_t mn;
    float *x, *w, *b, *o;       /* host */
    float *dx, *dw, *db, *dout; /* device */
    GRand *r;
} Rows;

static void rows_init(Rows *s, ClBackend *dev, int m, int n, guint32 seed)
{
    s->m = m, s->n = n, s->mn = (size_t)m * n;
    s->r = g_rand_new_with_seed(seed);
    s->x = cl_check_rnd(s->r, s->mn, -3, 5), s->w = cl_check_rnd(s->r, n, 0.5, 1.5);
    s->b = cl_check_rnd(s->r, n, -1, 1), s->o = g_new(float, s->mn);
    memcpy(s->o, s->x, s->mn * sizeof(float));
    s->dx = cl_check_up(dev, s->x, s->mn), s->dw = cl_check_up(dev, s->w, n);
    s->db = cl_check_up(dev, s->b, n), s->dout = cl_check_up(dev, s->x, s->mn);
}

static void rows_clear(Rows *s, ClBackend *dev)
{
    cl_check_finish(dev);
    dev->ops->release(dev, s->dx), dev->ops->release(dev, s->dw), dev->ops->release(dev, s->db);
    dev->ops->release(dev, s->dout);
    g_free(s->x), g_free(s->w), g_free(s->b), g_free(s->o);
    g_rand_free(s->r);
}

static void rows_expect(const Ctx *c, Rows *s, const char *what, size_t n, const ClTol *tol)
{
    g_autofree float *got = cl_check_down(DEV, s->dout, n);
    cl_check_close(what, got, s->o, n, tol);
}

static void check_layernorm(const Ctx *c, const int *p)
{
    Rows s;
    rows_init(&s, DEV, p[0], p[1], 12);
    CPU->ops->layernorm(CPU, s.o, s.x, s.w, s.b, s.m, s.n, 1e-6f);
    DEV->ops->layernorm(DEV, s.dout, s.dx, s.dw, s.db, s.m, s.n, 1e-6f);
    rows_expect(c, &s, "layernorm", s.mn, &c->tol.reduction);
    rows_clear(&s, DEV);
}

static void check_rmsnorm(const Ctx *c, const int *p)
{
    Rows s;
    rows_init(&s, DEV, p[0], p[1], 13);
    CPU->ops->rmsnorm(CPU, s.o, s.x, s.w, s.m, s.n, 1e-6f);
    DEV->ops->rmsnorm(DEV, s.dout, s.dx, s.dw, s.m, s.n, 1e-6f);
    rows_expect(c, &s, "rmsnorm", s.mn, &c->tol.reduction);
    rows_clear(&s, DEV);
}

/* in place on a strided block: n − gap columns of rows n apart */
static void check_softmax(const Ctx *c, const int *p)
{
    Rows s;
    rows_init(&s, DEV, p[0], p[1], 14);
    CPU->ops->softmax(CPU, s.o, s.m, s.n - p[2], s.n);
    DEV->ops->softmax(DEV, s.dout, s.m, s.n - p[2], s.n);
    rows_expect(c, &s, "softmax", s.mn, &c->tol.reduction);
    rows_clear(&s, DEV);
}

/* |a − b| per row over n − 1 of n columns (b NULL: |a|) */
static void check_row_norms(const Ctx *c, const int *p)
{
    Rows s;
    rows_init(&s, DEV, p[0], p[1], 15);
    const gboolean with_b = p[2];
    g_autofree float *b2 = cl_check_rnd(s.r, s.mn, -1, 1), *rn = g_new(float, s.m);
    float *db2 = cl_check_up(DEV, b2, s.mn), *drn = DEV->ops->alloc(DEV, s.m * sizeof(float));
    CPU->ops->row_norms(CPU, rn, s.x, with_b ? b2 : NULL, s.m, s.n - 1, s.n);
    DEV->ops->row_norms(DEV, drn, s.dx, with_b ? db2 : NULL, s.m, s.n - 1, s.n);
    g_autofree float *got = cl_check_down(DEV, drn, s.m);
    cl_check_close("row_norms", got, rn, s.m, &c->tol.reduction);
    DEV->ops->release(DEV, db2), DEV->ops->release(DEV, drn);
    rows_clear(&s, DEV);
}

static void check_col_mean(const Ctx *c, const int *p)
{
    Rows s;
    rows_init(&s, DEV, p[0], p[1], 16);
    CPU->ops->col_mean(CPU, s.o, s.x, s.m, s.n);
    DEV->ops->col_mean(DEV, s.dout, s.dx, s.m, s.n);
    rows_expect(c, &s, "col_mean", s.n, &c->tol.reduction);
    rows_clear(&s, DEV);
}

static void check_center_cols(const Ctx *c, const int *p)
{
    Rows s;
    rows_init(&s, DEV, p[0], p[1], 17);
    CPU->ops->center_cols(CPU, s.o, s.m, s.n);
    DEV->ops->center_cols(DEV, s.dout, s.m, s.n);
    rows_expect(c, &s, "center_cols", s.mn, &c->tol.reduction);
    rows_clear(&s, DEV);
}

/* ---- elementwise: a, b (m × n), g, h (n); out starts as b ---- */

typedef enum {
    EW_GELU,
    EW_SILU,
    EW_SILU_MUL,
    EW_ADD,
    EW_RESIDUAL,
    EW_SCALE_COLS,
    EW_MODULATE,
    EW_SCALE_BY
} EwOp;

static void run_ew(ClBackend *be, EwOp op, int flag, float *o, const float *a, const float *b,
                   const float *g, const float *h, int m, int n)
{
    size_t mn = (size_t)m * n;
    const struct cl_backend_ops *ops = be->ops;
    switch (op) {
    case EW_GELU: ops->gelu(be, o, a, mn); break;
    case EW_SILU: ops->silu(be, o, a, mn); break;
    case EW_SILU_MUL: ops->silu_mul(be, o, a, b, mn); break;
    case EW_ADD: ops->add(be, o, a, b, mn); break;
    case EW_RESIDUAL: ops->residual(be, o, a, flag ? g : NULL, m, n); break;
    case EW_SCALE_COLS: ops->scale_cols(be, o, a, g, m, n, flag); break;
    case EW_MODULATE: ops->modulate(be, o, g, h, m, n); break;
    case EW_SCALE_BY: ops->scale_by(be, o, g + 3, mn); break;
    }
}

static void check_elementwise(const Ctx *c, const int *p)
{
    const EwOp op = (EwOp)p[0];
    const int flag = p[1], m = 13, n = 301;
    const size_t mn = (size_t)m * n;
    GRand *r = g_rand_new_with_seed(18 + (guint32)(p[0] * 2 + flag));
    g_autofree float *a = cl_check_rnd(r, mn, -8, 8), *b = cl_check_rnd(r, mn, -2, 2);
    g_autofree float *g = cl_check_rnd(r, n, -0.5, 0.5), *h = cl_check_rnd(r, n, -0.5, 0.5);
    g_autofree float *o = g_memdup2(b, mn * sizeof(float));
    float *da = cl_check_up(DEV, a, mn), *dbuf = cl_check_up(DEV, b, mn);
    float *dg = cl_check_up(DEV, g, n), *dh = cl_check_up(DEV, h, n),
          *dout = cl_check_up(DEV, b, mn);
    run_ew(CPU, op, flag, o, a, b, g, h, m, n);
    run_ew(DEV, op, flag, dout, da, dbuf, dg, dh, m, n);
    g_autofree float *got = cl_check_down(DEV, dout, mn);
    cl_check_finish(DEV);
    cl_check_close("elementwise", got, o, mn, &c->tol.elementwise);
    DEV->ops->release(DEV, da), DEV->ops->release(DEV, dbuf), DEV->ops->release(DEV, dg);
    DEV->ops->release(DEV, dh), DEV->ops->release(DEV, dout);
    g_rand_free(r);
}

/* ids in host memory; negative ids leave their rows alone */
static void check_embed(const Ctx *c, const int *p)
{
    const gint32 ids[] = { 3, -1, 0, 12, 12, -1, 7 };
    const int dim = p[0], n = G_N_ELEMENTS(ids);
    GRand *r = g_rand_new_with_seed(19);
    g_autofree float *table = cl_check_rnd(r, 13 * (size_t)dim, -1, 1);
    g_autofree float *o = cl_check_rnd(r, (size_t)n * dim, -1, 1);
    float *dt = cl_check_up(DEV, table, 13 * (size_t)dim),
          *dout = cl_check_up(DEV, o, (size_t)n * dim);
    CPU->ops->embed(CPU, o, table, ids, n, dim);
    DEV->ops->embed(DEV, dout, dt, ids, n, dim);
    g_autofree float *got = cl_check_down(DEV, dout, (size_t)n * dim);
    cl_check_finish(DEV);
    cl_check_close("embed", got, o, (size_t)n * dim, &c->tol.elementwise);
    DEV->ops->release(DEV, dt), DEV->ops->release(DEV, dout);
    g_rand_free(r);
}

/* ---- layout: RoPE on the q columns of a strided qkv buffer, im2col, the 2×2 gather ---- */

static void check_rope(const Ctx *c, const int *p)
{
    const int sections = p[0], n_tok = 25, heads = 3, hd = 24, ld = 3 * heads * hd + 4;
    const size_t nx = (size_t)n_tok * ld, nt = (size_t)n_tok * hd / 2;
    GRand *r = g_rand_new_with_seed(20);
    g_autofree float *x = cl_check_rnd(r, nx, -1, 1), *o = g_memdup2(x, nx * sizeof(float));
    g_autofree float *cs = g_new(float, nt), *sn = g_new(float, nt);
    if (sections == 1)
        cl_rope_table_1d(cs, sn, 3, n_tok, hd, 50.0);
    else
        cl_rope_table_2d(cs, sn, 5, hd, 100.0);
    float *dx = cl_check_up(DEV, x, nx), *dcs = cl_check_up(DEV, cs, nt),
          *dsn = cl_check_up(DEV, sn, nt);
    CPU->ops->rope(CPU, o + heads * hd, cs, sn, n_tok, ld, heads, hd, sections);
    DEV->ops->rope(DEV, dx + heads * hd, dcs, dsn, n_tok, ld, heads, hd, sections);
    g_autofree float *got = cl_check_down(DEV, dx, nx);
    cl_check_finish(DEV);
    cl_check_close("rope", got, o, nx, &c->tol.elementwise);
    DEV->ops->release(DEV, dx), DEV->ops->release(DEV, dcs), DEV->ops->release(DEV, dsn);
    g_rand_free(r);
}

static const ClTol exact = { 0, 0, 0 }; /* pure data movement */

static void check_im2col(const Ctx *c, const int *p)
{
    const int C = p[0], S = p[1], P = p[2], G = S / P;
    const size_t npx = (size_t)C * S * S, npc = (size_t)G * G * C * P * P;
    GRand *r = g_rand_new_with_seed(21);
    g_autofree float *px = cl_check_rnd(r, npx, -1, 1), *pc = g_new(float, npc);
    float *dpx = cl_check_up(DEV, px, npx), *dpc = DEV->ops->alloc(DEV, npc * sizeof(float));
    CPU->ops->im2col(CPU, pc, px, C, S, P);
    DEV->ops->im2col(DEV, dpc, dpx, C, S, P);
    g_autofree float *got = cl_check_down(DEV, dpc, npc);
    cl_check_finish(DEV);
    cl_check_close("im2col", got, pc, npc, &exact);
    DEV->ops->release(DEV, dpx), DEV->ops->release(DEV, dpc);
    g_rand_free(r);
}

static void check_merge2x2(const Ctx *c, const int *p)
{
    const int GM = p[0], D = p[1];
    const size_t nt = (size_t)GM * GM * D;
    GRand *r = g_rand_new_with_seed(22);
    g_autofree float *tok = cl_check_rnd(r, nt, -1, 1), *mg = g_new(float, nt);
    float *dtok = cl_check_up(DEV, tok, nt), *dmg = DEV->ops->alloc(DEV, nt * sizeof(float));
    CPU->ops->merge2x2(CPU, mg, tok, GM, D);
    DEV->ops->merge2x2(DEV, dmg, dtok, GM, D);
    g_autofree float *got = cl_check_down(DEV, dmg, nt);
    cl_check_finish(DEV);
    cl_check_close("merge2x2", got, mg, nt, &exact);
    DEV->ops->release(DEV, dtok), DEV->ops->release(DEV, dmg);
    g_rand_free(r);
}

/* ---- attention: p = n_q, n_kv, heads, kv_heads, head size, causal offset (−1: none), tail
 * start (−1: none); strided q, k, v and out; the gaps keep their values ---- */

static void check_attention(const Ctx *c, const int *p)
{
    const int nq = p[0], nkv = p[1], H = p[2], Hk = p[3], hd = p[4], causal = p[5], tail_at = p[6];
    const int ldq = H * hd + 3, ldk = Hk * hd + 1, ldv = Hk * hd + 2, ldo = H * hd + 5;
    size_t nqf = (size_t)nq * ldq, nkf = (size_t)nkv * ldk, nvf = (size_t)nkv * ldv,
           nof = (size_t)nq * ldo;
    GRand *r = g_rand_new_with_seed(23 + (guint32)(nq * 7 + hd));
    g_autofree float *q = cl_check_rnd(r, nqf, -2, 2), *k = cl_check_rnd(r, nkf, -2, 2);
    g_autofree float *v = cl_check_rnd(r, nvf, -1, 1);
    g_autofree float *o = g_new0(float, nof), *ot = g_new0(float, nof);
    g_autofree float *scratch = g_new(float, MAX(CPU->ops->attention_scratch(CPU, nq, nkv, H), 1));
    float scale = (float)(1.0 / sqrt(hd));
    gboolean tail = tail_at >= 0;
    CPU->ops->attention(CPU, o, tail ? ot : NULL, q, k, v, nq, nkv, ldq, ldk, ldv, ldo, H, Hk, hd,
                        scale, causal, tail ? tail_at : 0, scratch);
    float *dq = cl_check_up(DEV, q, nqf), *dk = cl_check_up(DEV, k, nkf),
          *dv = cl_check_up(DEV, v, nvf);
    float *dout = cl_check_up(DEV, o, nof), *dot = cl_check_up(DEV, ot, nof);
    size_t dscr = DEV->ops->attention_scratch(DEV, nq, nkv, H);
    float *dscratch = DEV->ops->alloc(DEV, MAX(dscr, 1) * sizeof(float));
    DEV->ops->attention(DEV, dout, tail ? dot : NULL, dq, dk, dv, nq, nkv, ldq, ldk, ldv, ldo, H,
                        Hk, hd, scale, causal, tail ? tail_at : 0, dscratch);
    g_autofree float *got = cl_check_down(DEV, dout, nof), *got_t = cl_check_down(DEV, dot, nof);
    cl_check_finish(DEV);
    cl_check_close("attention", got, o, nof, &c->tol.reduction);
    if (tail)
        cl_check_close("attention tail", got_t, ot, nof, &c->tol.reduction);
    DEV->ops->release(DEV, dq), DEV->ops->release(DEV, dk), DEV->ops->release(DEV, dv);
    DEV->ops->release(DEV, dout), DEV->ops->release(DEV, dot), DEV->ops->release(DEV, dscratch);
    g_rand_free(r);
}

/* ---- the table ---- */

static const OpCase cases[] = {
    { "linear", "m,k,n,bias", check_linear, { 1, 65, 129, 0 } },
    { "linear", "m,k,n,bias", check_linear, { 1, 65, 129, 1 } },
    { "linear", "m,k,n,bias", check_linear, { 7, 64, 96, 1 } },
    { "linear", "m,k,n,bias", check_linear, { 37, 200, 33, 0 } },
    { "linear", "m,k,n,bias", check_linear, { 300, 192, 576, 1 } },
    { "gemm", "trans_a,trans_b", check_gemm, { 0, 0 } },
    { "gemm", "trans_a,trans_b", check_gemm, { 0, 1 } },
    { "gemm", "trans_a,trans_b", check_gemm, { 1, 0 } },
    { "gemm", "trans_a,trans_b", check_gemm, { 1, 1 } },
    { "layernorm", "m,n", check_layernorm, { 19, 333 } },
    { "rmsnorm", "m,n", check_rmsnorm, { 19, 333 } },
    { "softmax", "m,ld,gap", check_softmax, { 19, 333, 10 } },
    { "row_norms", "m,ld,minus_b", check_row_norms, { 19, 333, 0 } },
    { "row_norms", "m,ld,minus_b", check_row_norms, { 19, 333, 1 } },
    { "col_mean", "m,n", check_col_mean, { 19, 333 } },
    { "center_cols", "m,n", check_center_cols, { 19, 333 } },
    { "gelu", "op", check_elementwise, { EW_GELU } },
    { "silu", "op", check_elementwise, { EW_SILU } },
    { "silu_mul", "op", check_elementwise, { EW_SILU_MUL } },
    { "add", "op", check_elementwise, { EW_ADD } },
    { "residual", "op,gated", check_elementwise, { EW_RESIDUAL, 0 } },
    { "residual", "op,gated", check_elementwise, { EW_RESIDUAL, 1 } },
    { "scale_cols", "op,accumulate", check_elementwise, { EW_SCALE_COLS, 0 } },
    { "scale_cols", "op,accumulate", check_elementwise, { EW_SCALE_COLS, 1 } },
    { "modulate", "op", check_elementwise, { EW_MODULATE } },
    { "scale_by", "op", check_elementwise, { EW_SCALE_BY } },
    { "embed", "dim", check_embed, { 29 } },
    { "rope", "sections", check_rope, { 1 } },
    { "rope", "sections", check_rope, { 2 } },
    { "im2col", "channels,size,patch", check_im2col, { 3, 40, 8 } },
    { "merge2x2", "grid,d", check_merge2x2, { 6, 11 } },
    /* the encoder's self-attention, self_ext with its tail, cross-attention to the null state,
     * the decoder's prefill after cached positions (GQA), a decode step, the large preset's
     * head size, and beyond 256 (the block kernel) with a tail */
    { "attention",
      "q,kv,heads,kv_heads,hd,causal,tail",
      check_attention,
      { 36, 36, 3, 3, 64, -1, -1 } },
    { "attention",
      "q,kv,heads,kv_heads,hd,causal,tail",
      check_attention,
      { 36, 72, 2, 2, 24, -1, 36 } },
    { "attention",
      "q,kv,heads,kv_heads,hd,causal,tail",
      check_attention,
      { 36, 1, 2, 2, 24, -1, -1 } },
    { "attention",
      "q,kv,heads,kv_heads,hd,causal,tail",
      check_attention,
      { 21, 50, 4, 2, 64, 29, -1 } },
    { "attention",
      "q,kv,heads,kv_heads,hd,causal,tail",
      check_attention,
      { 1, 300, 16, 4, 64, 299, -1 } },
    { "attention",
      "q,kv,heads,kv_heads,hd,causal,tail",
      check_attention,
      { 5, 40, 4, 1, 80, 35, -1 } },
    { "attention",
      "q,kv,heads,kv_heads,hd,causal,tail",
      check_attention,
      { 3, 17, 2, 1, 160, 14, -1 } },
    { "attention",
      "q,kv,heads,kv_heads,hd,causal,tail",
      check_attention,
      { 4, 33, 2, 2, 320, -1, 20 } },
};

typedef struct {
    const Ctx *c;
    const OpCase *oc;
} OpTest;

static void run_case(gconstpointer data)
{
    const OpTest *t = data;
    t->oc->check(t->c, t->oc->p);
}

/* Every member has a case of its own or is one every case exercises. */
static void check_coverage(gconstpointer data)
{
#define NAME(m) #m,
    static const char *const members[] = { OP_MEMBERS(NAME) };
#undef NAME
    for (gsize i = 0; i < G_N_ELEMENTS(members); i++) {
        gboolean covered = FALSE;
        for (gsize k = 0; k < G_N_ELEMENTS(by_every_case) && !covered; k++)
            covered = strcmp(members[i], by_every_case[k]) == 0;
        for (gsize k = 0; k < G_N_ELEMENTS(cases) && !covered; k++)
            covered = strcmp(members[i], cases[k].op) == 0;
        if (!covered)
            g_error("struct cl_backend_ops member '%s' has no case in the op table", members[i]);
    }
}

void cl_check_add_op_tests(const char *prefix, const Ctx *c)
{
    for (gsize k = 0; k < G_N_ELEMENTS(cases); k++) {
        OpTest *t = g_new(OpTest, 1); /* lives as long as the test program */
        t->c = c, t->oc = &cases[k];
        g_autofree char *ops = g_strconcat(prefix, "/ops", NULL);
        /* the elementwise ops' first value is their internal selector: not in the path */
        g_autofree char *path = cl_test_op_path(ops, cases[k].op, cases[k].params, cases[k].p,
                                                cases[k].check == check_elementwise);
        g_test_add_data_func(path, t, run_case);
    }
    g_autofree char *cov = g_strdup_printf("%s/ops/coverage", prefix);
    g_test_add_data_func(cov, c, check_coverage);
}
