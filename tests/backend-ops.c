/* backend-ops.c - the op table: one entry per member of struct cl_backend_ops and shape, each
 * run on the backend under test and on the CPU oracle and compared with its kind's tolerance;
 * test paths name the op and its parameters (/ops/rope/sections=2). A member added to the struct
 * without a line in OP_MEMBERS fails to compile, and one without a case fails /ops/coverage. The
 * training ops (struct cl_backend_train_ops) have a table of their own under /ops/train, held to
 * the struct the same way by TRAIN_MEMBERS. */
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

/* Every member of struct cl_backend_train_ops, in order, held to the struct as above. */
// clang-format off
#define TRAIN_MEMBERS(X) \
    X(linear) \
    X(layernorm) \
    X(rmsnorm) \
    X(modulate) \
    X(gelu) \
    X(silu) \
    X(silu_mul) \
    X(residual) \
    X(scale_cols) \
    X(rope) \
    X(softmax) \
    X(attention) \
    X(attention_keep) \
    X(attention_probs) \
    X(row_norms) \
    X(embed) \
    X(merge2x2) \
    X(cross_entropy) \
    X(bce) \
    X(sumsq) \
    X(scale) \
    X(adamw)
// clang-format on

#define TRAIN_MIRROR(m) __typeof__(((struct cl_backend_train_ops *)0)->m) m;
struct train_mirror {
    TRAIN_MEMBERS(TRAIN_MIRROR)
};
#define TRAIN_SAME_OFFSET(m)                                                                       \
    _Static_assert(offsetof(struct train_mirror, m) == offsetof(struct cl_backend_train_ops, m),   \
                   "struct cl_backend_train_ops changed: update TRAIN_MEMBERS and the train "      \
                   "table (" #m ")");
TRAIN_MEMBERS(TRAIN_SAME_OFFSET)
_Static_assert(sizeof(struct train_mirror) == sizeof(struct cl_backend_train_ops),
               "struct cl_backend_train_ops has a member TRAIN_MEMBERS does not list: add it and "
               "its cases");

/* Members every case exercises (memory, the end of a batch, identity), checked by all of them
 * rather than by a case of their own. */
static const char *const by_every_case[] = {
    "name",     "destroy", "host_memory", "alloc",  "release",           "upload",
    "download", "copy",    "zero",        "finish", "attention_scratch",
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

/* ---- the training ops (struct cl_backend_train_ops) ----
 *
 * Each check makes its operands once (host random values and a device copy of each), runs the op
 * on the CPU's host copies and on the device's, and compares every output buffer whole: a
 * gradient output starts non-zero, so a backend that sets where the op accumulates (or the
 * reverse), that writes an output it was passed NULL for, or that touches the gaps of a strided
 * buffer shows up. The returned doubles are compared under the same tolerance. */

#define TCPU (CPU->ops->train)
#define TDEV (DEV->ops->train)

typedef struct {
    float *h, *d; /* the CPU's operand (host), its device copy */
    size_t n;
} Buf;

typedef struct {
    const Ctx *c;
    const char *op;
    GRand *r;
    int n;
    Buf all[16];
} Tc;

static void tc_init(Tc *t, const Ctx *c, const char *op, guint32 seed)
{
    *t = (Tc){ .c = c, .op = op, .r = g_rand_new_with_seed(seed) };
}

static Buf tc_put(Tc *t, float *h, size_t n)
{
    g_assert_cmpint(t->n, <, G_N_ELEMENTS(t->all));
    Buf b = { h, cl_check_up(t->c->dev, h, n), n };
    t->all[t->n++] = b;
    return b;
}

/* n values uniform in [lo, hi), on both sides */
static Buf tc_rnd(Tc *t, size_t n, double lo, double hi)
{
    return tc_put(t, cl_check_rnd(t->r, n, lo, hi), n);
}

static Buf tc_fill(Tc *t, size_t n, float v)
{
    float *h = g_new(float, MAX(n, 1));
    for (size_t i = 0; i < n; i++)
        h[i] = v;
    return tc_put(t, h, n);
}

/* Every operand but the NaN-filled probabilities is finite, so a non-finite CPU result means a
 * pre-fill the op was not meant to read got through (and cl_check_close lets NaN match NaN). */
static void tc_finite(Tc *t, const char *what, const float *h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(h[i]))
            g_error("train %s %s: element %zu is %g on the CPU", t->op, what, i, h[i]);
}

/* The device's b against the CPU's. */
static void tc_expect(Tc *t, const char *what, Buf b, const ClTol *tol)
{
    tc_finite(t, what, b.h, b.n);
    ClBackend *dev = t->c->dev;
    g_autofree float *got = cl_check_down(dev, b.d, b.n);
    cl_check_finish(dev);
    g_autofree char *name = g_strdup_printf("train %s %s", t->op, what);
    cl_check_close(name, got, b.h, b.n, tol);
}

/* a returned double (a loss, a sum of squares) under the same rule as the elements */
static void tc_expect_scalar(Tc *t, const char *what, double dev, double cpu, const ClTol *tol)
{
    g_test_message("train %s %s: %.17g on the device, %.17g on the CPU", t->op, what, dev, cpu);
    if (!isfinite(cpu))
        g_error("train %s %s: %g on the CPU", t->op, what, cpu);
    if (!(fabs(dev - cpu) <= tol->atol + tol->rtol * fabs(cpu)))
        g_error("train %s %s: %.17g on the device and %.17g on the CPU: beyond %g + %g·|cpu|",
                t->op, what, dev, cpu, tol->atol, tol->rtol);
}

static void tc_clear(Tc *t)
{
    ClBackend *dev = t->c->dev;
    cl_check_finish(dev);
    for (int i = 0; i < t->n; i++) {
        dev->ops->release(dev, t->all[i].d);
        g_free(t->all[i].h);
    }
    g_rand_free(t->r);
}

/* b's host or device side, or NULL for an output not asked for */
#define OPT(b, side, on) ((on) ? (b).side : NULL)

/* dy through y = x·w^T + b; p[3..5] say which of dx, dw, db are asked for (the patch
 * embedding's dx and the decoder's biases are not) */
static void check_t_linear(const Ctx *c, const int *p)
{
    const int m = p[0], k = p[1], n = p[2], gx = p[3], gw = p[4], gb = p[5];
    Tc t;
    tc_init(&t, c, "linear", 101 + (guint32)(m * 31 + k));
    Buf x = tc_rnd(&t, (size_t)m * k, -1, 1), w = tc_rnd(&t, (size_t)n * k, -0.2, 0.2);
    Buf dy = tc_rnd(&t, (size_t)m * n, -1, 1);
    Buf dx = tc_rnd(&t, (size_t)m * k, -1, 1), dw = tc_rnd(&t, (size_t)n * k, -1, 1),
        db = tc_rnd(&t, n, -1, 1);
    TCPU->linear(CPU, OPT(dx, h, gx), OPT(dw, h, gw), OPT(db, h, gb), dy.h, x.h, w.h, m, k, n);
    TDEV->linear(DEV, OPT(dx, d, gx), OPT(dw, d, gw), OPT(db, d, gb), dy.d, x.d, w.d, m, k, n);
    tc_expect(&t, "dx", dx, &c->tol.product);
    tc_expect(&t, "dw", dw, &c->tol.product);
    tc_expect(&t, "db", db, &c->tol.reduction);
    tc_clear(&t);
}

/* p[2..4]: dx, dw, db asked for (a frozen norm's weights are not) */
static void check_t_layernorm(const Ctx *c, const int *p)
{
    const int m = p[0], n = p[1];
    Tc t;
    tc_init(&t, c, "layernorm", 102 + (guint32)m);
    Buf x = tc_rnd(&t, (size_t)m * n, -3, 5), w = tc_rnd(&t, n, 0.5, 1.5);
    Buf dy = tc_rnd(&t, (size_t)m * n, -1, 1), dx = tc_rnd(&t, (size_t)m * n, -1, 1);
    Buf dw = tc_rnd(&t, n, -1, 1), db = tc_rnd(&t, n, -1, 1);
    TCPU->layernorm(CPU, OPT(dx, h, p[2]), OPT(dw, h, p[3]), OPT(db, h, p[4]), dy.h, x.h, w.h, m, n,
                    1e-6f);
    TDEV->layernorm(DEV, OPT(dx, d, p[2]), OPT(dw, d, p[3]), OPT(db, d, p[4]), dy.d, x.d, w.d, m, n,
                    1e-6f);
    tc_expect(&t, "dx", dx, &c->tol.reduction);
    tc_expect(&t, "dw", dw, &c->tol.reduction);
    tc_expect(&t, "db", db, &c->tol.reduction);
    tc_clear(&t);
}

/* more than 32 rows: the CPU sums dw over blocks of rows */
static void check_t_rmsnorm(const Ctx *c, const int *p)
{
    const int m = p[0], n = p[1];
    Tc t;
    tc_init(&t, c, "rmsnorm", 103 + (guint32)m);
    Buf x = tc_rnd(&t, (size_t)m * n, -3, 5), w = tc_rnd(&t, n, 0.5, 1.5);
    Buf dy = tc_rnd(&t, (size_t)m * n, -1, 1), dx = tc_rnd(&t, (size_t)m * n, -1, 1);
    Buf dw = tc_rnd(&t, n, -1, 1);
    TCPU->rmsnorm(CPU, OPT(dx, h, p[2]), OPT(dw, h, p[3]), dy.h, x.h, w.h, m, n, 1e-6f);
    TDEV->rmsnorm(DEV, OPT(dx, d, p[2]), OPT(dw, d, p[3]), dy.d, x.d, w.d, m, n, 1e-6f);
    tc_expect(&t, "dx", dx, &c->tol.reduction);
    tc_expect(&t, "dw", dw, &c->tol.reduction);
    tc_clear(&t);
}

/* elementwise backward passes: x (or a, gate) m × n, the column gates n; column sums of the
 * gated ops are reductions */
typedef enum { TEW_GELU, TEW_SILU, TEW_SILU_MUL, TEW_RESIDUAL, TEW_SCALE_COLS, TEW_MODULATE } TewOp;

static void check_t_elementwise(const Ctx *c, const int *p)
{
    const TewOp op = (TewOp)p[0];
    const int flag = p[1], m = 13, n = 301;
    const size_t mn = (size_t)m * n;
    static const char *const names[] = { "gelu",     "silu",       "silu_mul",
                                         "residual", "scale_cols", "modulate" };
    Tc t;
    tc_init(&t, c, names[op], 104 + (guint32)(p[0] * 2 + flag));
    Buf a = tc_rnd(&t, mn, -8, 8), b = tc_rnd(&t, mn, -2, 2), dy = tc_rnd(&t, mn, -2, 2);
    Buf g = tc_rnd(&t, n, -0.5, 0.5);
    Buf da = tc_rnd(&t, mn, -1, 1), db = tc_rnd(&t, mn, -1, 1), dg = tc_rnd(&t, n, -1, 1),
        dh = tc_rnd(&t, n, -1, 1);
    const ClTol *ew = &c->tol.elementwise, *red = &c->tol.reduction;
    switch (op) {
    case TEW_GELU:
        TCPU->gelu(CPU, da.h, dy.h, a.h, mn);
        TDEV->gelu(DEV, da.d, dy.d, a.d, mn);
        break;
    case TEW_SILU:
        TCPU->silu(CPU, da.h, dy.h, a.h, mn);
        TDEV->silu(DEV, da.d, dy.d, a.d, mn);
        break;
    case TEW_SILU_MUL:
        TCPU->silu_mul(CPU, da.h, db.h, dy.h, a.h, b.h, mn);
        TDEV->silu_mul(DEV, da.d, db.d, dy.d, a.d, b.d, mn);
        break;
    case TEW_RESIDUAL: /* flag: gated (gate NULL: dgate is not touched) */
        TCPU->residual(CPU, da.h, dg.h, dy.h, a.h, OPT(g, h, flag), m, n);
        TDEV->residual(DEV, da.d, dg.d, dy.d, a.d, OPT(g, d, flag), m, n);
        break;
    case TEW_SCALE_COLS:
        TCPU->scale_cols(CPU, da.h, dg.h, dy.h, a.h, g.h, m, n);
        TDEV->scale_cols(DEV, da.d, dg.d, dy.d, a.d, g.d, m, n);
        break;
    case TEW_MODULATE: /* dx, dscale, dshift */
        TCPU->modulate(CPU, da.h, dg.h, dh.h, dy.h, a.h, g.h, m, n);
        TDEV->modulate(DEV, da.d, dg.d, dh.d, dy.d, a.d, g.d, m, n);
        break;
    }
    tc_expect(&t, "first input", da, ew);
    tc_expect(&t, "second input", db, ew);
    tc_expect(&t, "column gate", dg, red);
    tc_expect(&t, "column shift", dh, red);
    tc_clear(&t);
}

/* the gradient of the q columns of a strided qkv buffer, rotated back in place */
static void check_t_rope(const Ctx *c, const int *p)
{
    const int sections = p[0], n_tok = 25, heads = 3, hd = 24, ld = 3 * heads * hd + 4;
    const size_t nx = (size_t)n_tok * ld, nt = (size_t)n_tok * hd / 2;
    Tc t;
    tc_init(&t, c, "rope", 105 + (guint32)sections);
    float *cs = g_new(float, nt), *sn = g_new(float, nt);
    if (sections == 1)
        cl_rope_table_1d(cs, sn, 3, n_tok, hd, 50.0);
    else
        cl_rope_table_2d(cs, sn, 5, hd, 100.0);
    Buf dcs = tc_put(&t, cs, nt), dsn = tc_put(&t, sn, nt), dx = tc_rnd(&t, nx, -1, 1);
    TCPU->rope(CPU, dx.h + heads * hd, dcs.h, dsn.h, n_tok, ld, heads, hd, sections);
    TDEV->rope(DEV, dx.d + heads * hd, dcs.d, dsn.d, n_tok, ld, heads, hd, sections);
    tc_expect(&t, "dx", dx, &c->tol.elementwise);
    tc_clear(&t);
}

/* y: the softmax of m rows of n − gap columns (stride n), dy and dx the same shape */
static void check_t_softmax(const Ctx *c, const int *p)
{
    const int m = p[0], ld = p[1], n = ld - p[2];
    const size_t mn = (size_t)m * ld;
    Tc t;
    tc_init(&t, c, "softmax", 106);
    float *yh = cl_check_rnd(t.r, mn, -3, 5);
    CPU->ops->softmax(CPU, yh, m, n, ld);
    Buf y = tc_put(&t, yh, mn), dy = tc_rnd(&t, mn, -1, 1), dx = tc_rnd(&t, mn, -1, 1);
    TCPU->softmax(CPU, dx.h, dy.h, y.h, m, n, ld);
    TDEV->softmax(DEV, dx.d, dy.d, y.d, m, n, ld);
    tc_expect(&t, "dx", dx, &c->tol.reduction);
    tc_clear(&t);
}

/* out = ‖a‖ per row (the CPU's forward), one row all zeros (its gradient is left alone) */
static void check_t_row_norms(const Ctx *c, const int *p)
{
    const int m = p[0], n = p[1];
    Tc t;
    tc_init(&t, c, "row_norms", 107);
    float *ah = cl_check_rnd(t.r, (size_t)m * n, -1, 1), *oh = g_new(float, m);
    memset(ah + 2 * (size_t)n, 0, (size_t)n * sizeof(float));
    CPU->ops->row_norms(CPU, oh, ah, NULL, m, n, n);
    Buf a = tc_put(&t, ah, (size_t)m * n), out = tc_put(&t, oh, m);
    Buf dout = tc_rnd(&t, m, -1, 1), da = tc_rnd(&t, (size_t)m * n, -1, 1);
    TCPU->row_norms(CPU, da.h, dout.h, a.h, out.h, m, n);
    TDEV->row_norms(DEV, da.d, dout.d, a.d, out.d, m, n);
    tc_expect(&t, "da", da, &c->tol.elementwise);
    tc_clear(&t);
}

/* ids in host memory: repeats add up (in any order: elementwise), negative ids add nothing */
static void check_t_embed(const Ctx *c, const int *p)
{
    const gint32 ids[] = { 3, -1, 0, 12, 12, -1, 7, 3, 12 };
    const int dim = p[0], n = G_N_ELEMENTS(ids);
    Tc t;
    tc_init(&t, c, "embed", 108);
    Buf dy = tc_rnd(&t, (size_t)n * dim, -1, 1), dtable = tc_rnd(&t, 13 * (size_t)dim, -1, 1);
    TCPU->embed(CPU, dtable.h, dy.h, ids, n, dim);
    TDEV->embed(DEV, dtable.d, dy.d, ids, n, dim);
    tc_expect(&t, "dtable", dtable, &c->tol.elementwise);
    tc_clear(&t);
}

/* one addition per element of dx: exact on any device */
static void check_t_merge2x2(const Ctx *c, const int *p)
{
    const int grid = p[0], dim = p[1];
    const size_t nx = (size_t)grid * grid * dim;
    Tc t;
    tc_init(&t, c, "merge2x2", 109);
    Buf dcat = tc_rnd(&t, nx, -1, 1), dx = tc_rnd(&t, nx, -1, 1);
    TCPU->merge2x2(CPU, dx.h, dcat.h, grid, dim);
    TDEV->merge2x2(DEV, dx.d, dcat.d, grid, dim);
    tc_expect(&t, "dx", dx, &exact);
    tc_clear(&t);
}

/* Attention's backward as the trainer lays it out: q, k and v are column ranges of one fused
 * buffer of R = max(n_q, n_kv) rows (and a gap), keys and values in rows [0, n_kv), the queries
 * the last n_q rows (the decoder's queries from position causal on); the gradients go into a
 * buffer of the same layout, dout is strided too. p[0], the mode: 0 the backward that recomputes
 * the probabilities; 1 the forward that keeps them (out SET, and the probabilities each query
 * sees); 2 that forward then the backward that reads its probabilities, each backend its own (as
 * a training step runs them). The probabilities past a causal block's last key are left
 * unwritten: they start as NaN on both sides, so a backward that reads them fails. Products
 * throughout (a backend may run them through its BLAS). */
static void check_t_attention(const Ctx *c, const int *p)
{
    static const char *const names[] = { "attention", "attention_keep", "attention_probs" };
    const int mode = p[0], nq = p[1], nkv = p[2], H = p[3], Hk = p[4], hd = p[5], causal = p[6];
    const int R = MAX(nq, nkv), ld = (H + 2 * Hk) * hd + 3, ldo = H * hd + 5;
    const size_t q0 = (size_t)(R - nq) * ld, k0 = (size_t)H * hd, v0 = k0 + (size_t)Hk * hd;
    const size_t nf = (size_t)R * ld, no = (size_t)nq * ldo, np = (size_t)H * nq * nkv;
    const float scale = (float)(1.0 / sqrt(hd));
    Tc t;
    tc_init(&t, c, names[mode], 110 + (guint32)(mode * 131 + nq * 7 + nkv));
    Buf qkv = tc_rnd(&t, nf, -2, 2), dout = tc_rnd(&t, no, -1, 1), dqkv = tc_rnd(&t, nf, -1, 1);
    Buf out = tc_rnd(&t, no, -1, 1), probs = tc_fill(&t, np, NAN);
    const ClTol *tol = &c->tol.product;
    if (mode == 0) {
        TCPU->attention(CPU, dqkv.h + q0, dqkv.h + k0, dqkv.h + v0, dout.h, qkv.h + q0, qkv.h + k0,
                        qkv.h + v0, nq, nkv, ld, ld, ld, ldo, H, Hk, hd, scale, causal);
        TDEV->attention(DEV, dqkv.d + q0, dqkv.d + k0, dqkv.d + v0, dout.d, qkv.d + q0, qkv.d + k0,
                        qkv.d + v0, nq, nkv, ld, ld, ld, ldo, H, Hk, hd, scale, causal);
        tc_expect(&t, "dqkv", dqkv, tol);
        tc_clear(&t);
        return;
    }
    TCPU->attention_keep(CPU, out.h, probs.h, qkv.h + q0, qkv.h + k0, qkv.h + v0, nq, nkv, ld, ld,
                         ld, ldo, H, Hk, hd, scale, causal);
    TDEV->attention_keep(DEV, out.d, probs.d, qkv.d + q0, qkv.d + k0, qkv.d + v0, nq, nkv, ld, ld,
                         ld, ldo, H, Hk, hd, scale, causal);
    tc_expect(&t, "out", out, tol);
    /* the probabilities query i sees: keys j <= causal + i */
    g_autofree float *got = cl_check_down(DEV, probs.d, np);
    cl_check_finish(DEV);
    g_autofree float *seen_dev = g_new(float, np), *seen_cpu = g_new(float, np);
    size_t n_seen = 0;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < nq; i++) {
            const int vis = causal < 0 ? nkv : MIN(nkv, causal + i + 1);
            const size_t row = ((size_t)h * nq + i) * nkv;
            memcpy(seen_dev + n_seen, got + row, (size_t)vis * sizeof(float));
            memcpy(seen_cpu + n_seen, probs.h + row, (size_t)vis * sizeof(float));
            n_seen += vis;
        }
    tc_finite(&t, "probabilities", seen_cpu, n_seen);
    g_autofree char *what = g_strdup_printf("train %s probabilities", t.op);
    cl_check_close(what, seen_dev, seen_cpu, n_seen, tol);
    if (mode == 2) {
        TCPU->attention_probs(CPU, dqkv.h + q0, dqkv.h + k0, dqkv.h + v0, dout.h, qkv.h + q0,
                              qkv.h + k0, qkv.h + v0, probs.h, nq, nkv, ld, ld, ld, ldo, H, Hk, hd,
                              scale, causal);
        TDEV->attention_probs(DEV, dqkv.d + q0, dqkv.d + k0, dqkv.d + v0, dout.d, qkv.d + q0,
                              qkv.d + k0, qkv.d + v0, probs.d, nq, nkv, ld, ld, ld, ldo, H, Hk, hd,
                              scale, causal);
    }
    tc_expect(&t, "dqkv", dqkv, tol); /* mode 1: untouched */
    tc_clear(&t);
}

/* p: rows, vocabulary, mask (0: NULL, every row; 1: every third row left out; 2: every row left
 * out, so no supervised row), dlogits asked for. dlogits is SET: its pre-fill must go, masked rows
 * included. */
static void check_t_cross_entropy(const Ctx *c, const int *p)
{
    const int n = p[0], V = p[1], masked = p[2], grad = p[3];
    Tc t;
    tc_init(&t, c, "cross_entropy", 111 + (guint32)(masked * 2 + grad));
    g_autofree gint32 *targets = g_new(gint32, n);
    g_autofree guint8 *mask = g_new(guint8, n);
    for (int i = 0; i < n; i++) {
        targets[i] = g_rand_int_range(t.r, 0, V);
        mask[i] = masked == 1 ? i % 3 != 1 : masked == 0;
    }
    Buf logits = tc_rnd(&t, (size_t)n * V, -4, 6), dlogits = tc_rnd(&t, (size_t)n * V, -1, 1);
    int ns_cpu = -1, ns_dev = -2;
    double l_cpu = TCPU->cross_entropy(CPU, OPT(dlogits, h, grad), logits.h, targets,
                                       masked ? mask : NULL, n, V, 0.75f, &ns_cpu);
    double l_dev = TDEV->cross_entropy(DEV, OPT(dlogits, d, grad), logits.d, targets,
                                       masked ? mask : NULL, n, V, 0.75f, &ns_dev);
    g_assert_cmpint(ns_dev, ==, ns_cpu);
    tc_expect_scalar(&t, "loss", l_dev, l_cpu, &c->tol.reduction);
    tc_expect(&t, "dlogits", dlogits, &c->tol.reduction);
    tc_clear(&t);
}

/* logits within ±8 and two far out (the loss without overflow), targets 0 or 1; dz is SET */
static void check_t_bce(const Ctx *c, const int *p)
{
    const int n = p[0], grad = p[1];
    Tc t;
    tc_init(&t, c, "bce", 112 + (guint32)grad);
    float *zh = cl_check_rnd(t.r, n, -8, 8), *yh = g_new(float, n);
    zh[0] = 60, zh[1] = -60;
    for (int i = 0; i < n; i++)
        yh[i] = g_rand_boolean(t.r) ? 1.0f : 0.0f;
    Buf z = tc_put(&t, zh, n), y = tc_put(&t, yh, n), dz = tc_rnd(&t, n, -1, 1);
    double l_cpu = TCPU->bce(CPU, OPT(dz, h, grad), z.h, y.h, n, 0.25f);
    double l_dev = TDEV->bce(DEV, OPT(dz, d, grad), z.d, y.d, n, 0.25f);
    tc_expect_scalar(&t, "loss", l_dev, l_cpu, &c->tol.reduction);
    tc_expect(&t, "dz", dz, &c->tol.elementwise);
    tc_clear(&t);
}

/* a count that is no multiple of 4 (the CPU's four partial sums), from an offset view */
static void check_t_sumsq(const Ctx *c, const int *p)
{
    const int n = p[0];
    Tc t;
    tc_init(&t, c, "sumsq", 113 + (guint32)n);
    Buf x = tc_rnd(&t, (size_t)n + 3, -2, 2);
    double s_cpu = TCPU->sumsq(CPU, x.h + 3, n), s_dev = TDEV->sumsq(DEV, x.d + 3, n);
    tc_expect_scalar(&t, "sum", s_dev, s_cpu, &c->tol.reduction);
    tc_expect(&t, "x", x, &exact); /* read only */
    tc_clear(&t);
}

/* one multiplication per element: exact on any device; the element past the end stays */
static void check_t_scale(const Ctx *c, const int *p)
{
    const int n = p[0];
    Tc t;
    tc_init(&t, c, "scale", 114);
    Buf x = tc_rnd(&t, (size_t)n + 1, -1, 1);
    TCPU->scale(CPU, x.h, -0.37f, n);
    TDEV->scale(DEV, x.d, -0.37f, n);
    tc_expect(&t, "x", x, &exact);
    tc_clear(&t);
}

/* Step 3 of AdamW with cl_adamw_update_range's scalars (lr 1e-3, betas 0.9 and 0.999, eps 1e-8);
 * p[1]: weight decay 0.1 (else a span without decay: 1), p[2]: the gradients scaled by 0.5 (a
 * clipped norm; else 1), p[3]: the span's first element (the trainer updates spans in place; the
 * elements around it stay). */
static void check_t_adamw(const Ctx *c, const int *p)
{
    const int n = p[0], decayed = p[1], clipped = p[2], at = p[3];
    const size_t all = (size_t)n + at + 2;
    const double lr = 1e-3, b1 = 0.9, b2 = 0.999, step = 3;
    const float decay = decayed ? (float)(1.0 - lr * 0.1) : 1.0f, gscale = clipped ? 0.5f : 1.0f;
    const float w1 = (float)(1.0 - b1), w2 = (float)(1.0 - b2);
    const float bc2_sqrt = (float)sqrt(1.0 - pow(b2, step));
    const float step_size = (float)(-(lr / (1.0 - pow(b1, step))));
    Tc t;
    tc_init(&t, c, "adamw", 115 + (guint32)(decayed * 2 + clipped));
    Buf prm = tc_rnd(&t, all, -1, 1), m = tc_rnd(&t, all, -0.1, 0.1);
    Buf v = tc_rnd(&t, all, 0, 1e-2), g = tc_rnd(&t, all, -1, 1);
    TCPU->adamw(CPU, prm.h + at, m.h + at, v.h + at, g.h + at, n, decay, w1, (float)b2, w2,
                bc2_sqrt, 1e-8f, step_size, gscale);
    TDEV->adamw(DEV, prm.d + at, m.d + at, v.d + at, g.d + at, n, decay, w1, (float)b2, w2,
                bc2_sqrt, 1e-8f, step_size, gscale);
    tc_expect(&t, "parameters", prm, &c->tol.elementwise);
    tc_expect(&t, "first moments", m, &c->tol.elementwise);
    tc_expect(&t, "second moments", v, &c->tol.elementwise);
    tc_clear(&t);
}

#undef OPT
#undef TCPU
#undef TDEV

static const OpCase train_cases[] = {
    /* a decoder product (no bias), the encoder's with its bias, the patch embedding (no dx),
     * adaLN's one row of 6·D, a frozen weight (dx only) */
    { "linear", "m,k,n,dx,dw,db", check_t_linear, { 7, 64, 96, 1, 1, 0 } },
    { "linear", "m,k,n,dx,dw,db", check_t_linear, { 37, 200, 33, 1, 1, 1 } },
    { "linear", "m,k,n,dx,dw,db", check_t_linear, { 300, 192, 576, 0, 1, 1 } },
    { "linear", "m,k,n,dx,dw,db", check_t_linear, { 1, 48, 288, 1, 1, 1 } },
    { "linear", "m,k,n,dx,dw,db", check_t_linear, { 5, 64, 40, 1, 0, 0 } },
    { "layernorm", "m,n,dx,dw,db", check_t_layernorm, { 19, 333, 1, 1, 1 } },
    { "layernorm", "m,n,dx,dw,db", check_t_layernorm, { 36, 48, 1, 0, 0 } },
    { "rmsnorm", "m,n,dx,dw", check_t_rmsnorm, { 70, 64, 1, 1 } },
    { "rmsnorm", "m,n,dx,dw", check_t_rmsnorm, { 19, 333, 1, 0 } },
    { "modulate", "op", check_t_elementwise, { TEW_MODULATE } },
    { "gelu", "op", check_t_elementwise, { TEW_GELU } },
    { "silu", "op", check_t_elementwise, { TEW_SILU } },
    { "silu_mul", "op", check_t_elementwise, { TEW_SILU_MUL } },
    { "residual", "op,gated", check_t_elementwise, { TEW_RESIDUAL, 0 } },
    { "residual", "op,gated", check_t_elementwise, { TEW_RESIDUAL, 1 } },
    { "scale_cols", "op", check_t_elementwise, { TEW_SCALE_COLS } },
    { "rope", "sections", check_t_rope, { 1 } },
    { "rope", "sections", check_t_rope, { 2 } },
    { "softmax", "m,ld,gap", check_t_softmax, { 19, 333, 10 } },
    { "row_norms", "m,n", check_t_row_norms, { 9, 48 } },
    { "embed", "dim", check_t_embed, { 29 } },
    { "merge2x2", "grid,d", check_t_merge2x2, { 6, 11 } },
    /* the encoder's self-attention, self_ext's queries over twice the keys, cross-attention to
     * one null key (more queries than keys), the decoder's prefill (GQA, causal 0), its queries
     * from position 29 on, a single kv head, and past the CPU's 64-row causal blocks */
    { "attention",
      "mode,q,kv,heads,kv_heads,hd,causal",
      check_t_attention,
      { 0, 36, 36, 3, 3, 64, -1 } },
    { "attention",
      "mode,q,kv,heads,kv_heads,hd,causal",
      check_t_attention,
      { 0, 36, 72, 2, 2, 24, -1 } },
    { "attention",
      "mode,q,kv,heads,kv_heads,hd,causal",
      check_t_attention,
      { 0, 36, 1, 2, 2, 24, -1 } },
    { "attention",
      "mode,q,kv,heads,kv_heads,hd,causal",
      check_t_attention,
      { 0, 21, 21, 4, 2, 32, 0 } },
    { "attention",
      "mode,q,kv,heads,kv_heads,hd,causal",
      check_t_attention,
      { 0, 21, 50, 4, 2, 64, 29 } },
    { "attention",
      "mode,q,kv,heads,kv_heads,hd,causal",
      check_t_attention,
      { 0, 100, 100, 4, 1, 16, 0 } },
    { "attention_keep",
      "mode,q,kv,heads,kv_heads,hd,causal",
      check_t_attention,
      { 1, 36, 36, 2, 1, 32, -1 } },
    { "attention_keep",
      "mode,q,kv,heads,kv_heads,hd,causal",
      check_t_attention,
      { 1, 21, 50, 4, 2, 64, 29 } },
    { "attention_keep",
      "mode,q,kv,heads,kv_heads,hd,causal",
      check_t_attention,
      { 1, 100, 100, 4, 1, 16, 0 } },
    { "attention_probs",
      "mode,q,kv,heads,kv_heads,hd,causal",
      check_t_attention,
      { 2, 36, 36, 2, 1, 32, -1 } },
    { "attention_probs",
      "mode,q,kv,heads,kv_heads,hd,causal",
      check_t_attention,
      { 2, 21, 21, 4, 2, 32, 0 } },
    { "attention_probs",
      "mode,q,kv,heads,kv_heads,hd,causal",
      check_t_attention,
      { 2, 21, 50, 4, 2, 64, 29 } },
    { "attention_probs",
      "mode,q,kv,heads,kv_heads,hd,causal",
      check_t_attention,
      { 2, 100, 100, 4, 1, 16, 0 } },
    { "cross_entropy", "n,vocab,mask,dlogits", check_t_cross_entropy, { 9, 300, 1, 1 } },
    { "cross_entropy", "n,vocab,mask,dlogits", check_t_cross_entropy, { 9, 300, 0, 1 } },
    { "cross_entropy", "n,vocab,mask,dlogits", check_t_cross_entropy, { 5, 1000, 1, 0 } },
    { "cross_entropy", "n,vocab,mask,dlogits", check_t_cross_entropy, { 4, 50, 2, 1 } },
    { "bce", "n,dz", check_t_bce, { 1000, 1 } },
    { "bce", "n,dz", check_t_bce, { 37, 0 } },
    { "sumsq", "n", check_t_sumsq, { 10007 } },
    { "sumsq", "n", check_t_sumsq, { 3 } },
    { "scale", "n", check_t_scale, { 1001 } },
    { "adamw", "n,decay,clipped,at", check_t_adamw, { 1001, 1, 1, 0 } },
    { "adamw", "n,decay,clipped,at", check_t_adamw, { 1001, 0, 0, 5 } },
};

/* Every training op has a case in train_cases. */
static void check_train_coverage(void)
{
#define NAME(m) #m,
    static const char *const members[] = { TRAIN_MEMBERS(NAME) };
#undef NAME
    for (gsize i = 0; i < G_N_ELEMENTS(members); i++) {
        gboolean covered = FALSE;
        for (gsize k = 0; k < G_N_ELEMENTS(train_cases) && !covered; k++)
            covered = strcmp(members[i], train_cases[k].op) == 0;
        if (!covered)
            g_error("struct cl_backend_train_ops member '%s' has no case in the train table",
                    members[i]);
    }
}

typedef struct {
    const Ctx *c;
    const OpCase *oc;
} OpTest;

static void run_case(gconstpointer data)
{
    const OpTest *t = data;
    t->oc->check(t->c, t->oc->p);
}

/* A backend without training ops (train NULL) is one that cannot train: nothing to check. */
static void run_train_case(gconstpointer data)
{
    const OpTest *t = data;
    g_assert_nonnull(cl_check_cpu_be->ops->train);
    if (!t->c->dev->ops->train) {
        g_autofree char *why =
            g_strdup_printf("backend '%s' has no training ops", t->c->dev->ops->name);
        g_test_skip(why);
        return;
    }
    t->oc->check(t->c, t->oc->p);
}

/* Every member has a case of its own or is one every case exercises; `train` is covered when
 * each of its members has a case in the train table. */
static void check_coverage(gconstpointer data)
{
#define NAME(m) #m,
    static const char *const members[] = { OP_MEMBERS(NAME) };
#undef NAME
    for (gsize i = 0; i < G_N_ELEMENTS(members); i++) {
        if (strcmp(members[i], "train") == 0) {
            check_train_coverage();
            continue;
        }
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
    for (gsize k = 0; k < G_N_ELEMENTS(train_cases); k++) {
        OpTest *t = g_new(OpTest, 1);
        t->c = c, t->oc = &train_cases[k];
        g_autofree char *ops = g_strconcat(prefix, "/ops/train", NULL);
        /* the elementwise and attention checks' first value selects the op: not in the path */
        int skip = train_cases[k].check == check_t_elementwise ||
                   train_cases[k].check == check_t_attention;
        g_autofree char *path =
            cl_test_op_path(ops, train_cases[k].op, train_cases[k].params, train_cases[k].p, skip);
        g_test_add_data_func(path, t, run_train_case);
    }
    g_autofree char *cov = g_strdup_printf("%s/ops/coverage", prefix);
    g_test_add_data_func(cov, c, check_coverage);
}
