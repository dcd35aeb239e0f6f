/* backend-check.c - a device backend against the CPU backend (backend-check.h). */
#include "backend-check.h"
#include "backend-check-private.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <glib.h>

#include "model/decoder.h"
#include "model/effnet.h"
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

/* The training ops: every backend pointer untagged; ids, targets and mask are host arrays. */
static void tw_linear(ClBackend *be, float *dx, float *dw, float *db, const float *dy,
                      const float *x, const float *w, int m, int k, int n)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->linear(c, U(dx), U(dw), U(db), U(dy), U(x), U(w), m, k, n);
}
static void tw_layernorm(ClBackend *be, float *dx, float *dw, float *db, const float *dy,
                         const float *x, const float *w, int m, int n, float eps)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->layernorm(c, U(dx), U(dw), U(db), U(dy), U(x), U(w), m, n, eps);
}
static void tw_rmsnorm(ClBackend *be, float *dx, float *dw, const float *dy, const float *x,
                       const float *w, int m, int n, float eps)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->rmsnorm(c, U(dx), U(dw), U(dy), U(x), U(w), m, n, eps);
}
static void tw_modulate(ClBackend *be, float *dx, float *dscale, float *dshift, const float *dy,
                        const float *x, const float *scale, int m, int n)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->modulate(c, U(dx), U(dscale), U(dshift), U(dy), U(x), U(scale), m, n);
}
static void tw_gelu(ClBackend *be, float *dx, const float *dy, const float *x, size_t n)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->gelu(c, U(dx), U(dy), U(x), n);
}
static void tw_silu(ClBackend *be, float *dx, const float *dy, const float *x, size_t n)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->silu(c, U(dx), U(dy), U(x), n);
}
static void tw_silu_mul(ClBackend *be, float *dgate, float *dup, const float *dy, const float *gate,
                        const float *up, size_t n)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->silu_mul(c, U(dgate), U(dup), U(dy), U(gate), U(up), n);
}
static void tw_residual(ClBackend *be, float *da, float *dgate, const float *dy, const float *a,
                        const float *gate, int m, int n)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->residual(c, U(da), U(dgate), U(dy), U(a), U(gate), m, n);
}
static void tw_scale_cols(ClBackend *be, float *da, float *dgate, const float *dy, const float *a,
                          const float *gate, int m, int n)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->scale_cols(c, U(da), U(dgate), U(dy), U(a), U(gate), m, n);
}
static void tw_rope(ClBackend *be, float *dx, const float *cs, const float *sn, int n_tok, int ld,
                    int n_head, int hd, int sections)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->rope(c, U(dx), U(cs), U(sn), n_tok, ld, n_head, hd, sections);
}
static void tw_softmax(ClBackend *be, float *dx, const float *dy, const float *y, int m, int n,
                       int ld)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->softmax(c, U(dx), U(dy), U(y), m, n, ld);
}
static void tw_attention(ClBackend *be, float *dq, float *dk, float *dv, const float *dout,
                         const float *q, const float *k, const float *v, int n_q, int n_kv, int ldq,
                         int ldk, int ldv, int ldo, int n_head, int n_kv_head, int hd, float scale,
                         int causal)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->attention(c, U(dq), U(dk), U(dv), U(dout), U(q), U(k), U(v), n_q, n_kv, ldq, ldk,
                             ldv, ldo, n_head, n_kv_head, hd, scale, causal);
}
static void tw_attention_keep(ClBackend *be, float *out, float *probs, const float *q,
                              const float *k, const float *v, int n_q, int n_kv, int ldq, int ldk,
                              int ldv, int ldo, int n_head, int n_kv_head, int hd, float scale,
                              int causal)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->attention_keep(c, U(out), U(probs), U(q), U(k), U(v), n_q, n_kv, ldq, ldk, ldv,
                                  ldo, n_head, n_kv_head, hd, scale, causal);
}
static void tw_attention_probs(ClBackend *be, float *dq, float *dk, float *dv, const float *dout,
                               const float *q, const float *k, const float *v, const float *probs,
                               int n_q, int n_kv, int ldq, int ldk, int ldv, int ldo, int n_head,
                               int n_kv_head, int hd, float scale, int causal)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->attention_probs(c, U(dq), U(dk), U(dv), U(dout), U(q), U(k), U(v), U(probs), n_q,
                                   n_kv, ldq, ldk, ldv, ldo, n_head, n_kv_head, hd, scale, causal);
}
static void tw_row_norms(ClBackend *be, float *da, const float *dout, const float *a,
                         const float *out, int m, int n)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->row_norms(c, U(da), U(dout), U(a), U(out), m, n);
}
static void tw_embed(ClBackend *be, float *dtable, const float *dy, const gint32 *ids, int n,
                     int dim)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->embed(c, U(dtable), U(dy), ids /* host */, n, dim);
}
static void tw_merge2x2(ClBackend *be, float *dx, const float *dcat, int grid, int dim)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->merge2x2(c, U(dx), U(dcat), grid, dim);
}
static double tw_cross_entropy(ClBackend *be, float *dlogits, const float *logits,
                               const gint32 *targets, const guint8 *mask, int n, int vocab,
                               float scale, int *n_supervised)
{
    /* targets, mask and n_supervised are host memory */
    ClBackend *c = cpu_of(be);
    return c->ops->train->cross_entropy(c, U(dlogits), U(logits), targets, mask, n, vocab, scale,
                                        n_supervised);
}
static double tw_bce(ClBackend *be, float *dz, const float *z, const float *y, size_t n,
                     float scale)
{
    ClBackend *c = cpu_of(be);
    return c->ops->train->bce(c, U(dz), U(z), U(y), n, scale);
}
static double tw_sumsq(ClBackend *be, const float *x, size_t n)
{
    ClBackend *c = cpu_of(be);
    return c->ops->train->sumsq(c, U(x), n);
}
static void tw_scale(ClBackend *be, float *x, float s, size_t n)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->scale(c, U(x), s, n);
}
static void tw_adamw(ClBackend *be, float *p, float *m, float *v, const float *g, size_t n,
                     float decay, float w1, float b2, float w2, float bc2_sqrt, float eps,
                     float step_size, float gscale)
{
    ClBackend *c = cpu_of(be);
    c->ops->train->adamw(c, U(p), U(m), U(v), U(g), n, decay, w1, b2, w2, bc2_sqrt, eps, step_size,
                         gscale);
}

static const struct cl_backend_train_ops walled_train_ops = {
    .linear = tw_linear,
    .layernorm = tw_layernorm,
    .rmsnorm = tw_rmsnorm,
    .modulate = tw_modulate,
    .gelu = tw_gelu,
    .silu = tw_silu,
    .silu_mul = tw_silu_mul,
    .residual = tw_residual,
    .scale_cols = tw_scale_cols,
    .rope = tw_rope,
    .softmax = tw_softmax,
    .attention = tw_attention,
    .attention_keep = tw_attention_keep,
    .attention_probs = tw_attention_probs,
    .row_norms = tw_row_norms,
    .embed = tw_embed,
    .merge2x2 = tw_merge2x2,
    .cross_entropy = tw_cross_entropy,
    .bce = tw_bce,
    .sumsq = tw_sumsq,
    .scale = tw_scale,
    .adamw = tw_adamw,
};

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
    .train = &walled_train_ops,
};

ClBackend *cl_test_walled_backend_new(void)
{
    ClBackend *be = g_new0(ClBackend, 1);
    be->ops = &walled_ops;
    be->data = cl_backend_cpu_new(0);
    return be;
}

/* ---- comparing ------------------------------------------------------------------------------- */

ClBackend *cl_check_cpu_be; /* the oracle */

/* Asserts dev ≈ cpu under tol; reports the worst element and the normalised error. */
void cl_check_close(const char *what, const float *dev, const float *cpu, size_t n,
                    const ClTol *tol)
{
    double num = 0, den = 0, worst = 0;
    size_t worst_i = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)dev[i] - (double)cpu[i];
        if (!isfinite(dev[i]) && !(isnan(dev[i]) && isnan(cpu[i])) && dev[i] != cpu[i])
            g_error("%s: element %zu is %g on the device, %g on the CPU", what, i, dev[i], cpu[i]);
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
float *cl_check_up(ClBackend *dev, const float *h, size_t n)
{
    float *d = dev->ops->alloc(dev, MAX(n, 1) * sizeof(float));
    g_assert_nonnull(d);
    dev->ops->upload(dev, d, h, n * sizeof(float));
    return d;
}

float *cl_check_down(ClBackend *dev, const float *d, size_t n)
{
    float *h = g_new(float, MAX(n, 1));
    dev->ops->download(dev, h, d, n * sizeof(float));
    return h;
}

float *cl_check_rnd(GRand *r, size_t n, double lo, double hi)
{
    float *x = g_new(float, MAX(n, 1));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)g_rand_double_range(r, lo, hi);
    return x;
}

void cl_check_finish(ClBackend *dev)
{
    g_autoptr(GError) err = NULL;
    g_assert_true(dev->ops->finish(dev, &err));
    g_assert_no_error(err);
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
        g_assert_true(
            cl_encoder_forward(cl_check_cpu_be, m, s_cpu, px, t, TRUE, NULL, NULL, &a, &err));
        g_assert_true(cl_encoder_forward(dev, m, s_dev, px, t, TRUE, NULL, NULL, &b, &err));
        g_assert_no_error(err);
        g_autofree char *w1 = g_strdup_printf("%s image %d visual tokens", name, t);
        cl_check_close(w1, b.visual, a.visual, (size_t)M * E, &c->tol.model);
        g_autofree char *w2 = g_strdup_printf("%s image %d update norms", name, t);
        cl_check_close(w2, b.update_norm, a.update_norm, (size_t)cfg->enc_depth * a.n_patches,
                       &c->tol.model);
        g_autofree char *w3 = g_strdup_printf("%s image %d delta map", name, t);
        ClTol dtol = c->tol.model;
        dtol.atol = MAX(dtol.atol, 1e-7); /* Δ is a difference of near-equal tokens */
        cl_check_close(w3, b.delta, a.delta, (size_t)M, &dtol);
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
    /* A quantized model's decoder: the CPU multiplies its blocks with 8-bit activations, a device
     * its dequantized f32 copy (cl_model_weights_on), so the logits differ by the activations'
     * rounding, and greedy decodes may part where two tokens are near-equal. */
    ClTol dec_tol = c->tol.model;
    if (m->quant) {
        dec_tol.rtol = MAX(dec_tol.rtol, 0.05);
        dec_tol.atol = MAX(dec_tol.atol, 0.25);
        dec_tol.nmse = MAX(dec_tol.nmse, 5e-3);
    }
    g_autofree float *la = g_new(float, (size_t)n * V), *lb = g_new(float, (size_t)n * V);
    g_autofree float *last_a = g_new(float, V), *last_b = g_new(float, V);
    g_autoptr(ClKVCache) ka = cl_kv_cache_new(m, 64 + n);
    g_autoptr(ClKVCache) kb = cl_kv_cache_new(m, 64 + n);
    g_assert_true(cl_decoder_forward(cl_check_cpu_be, m, ka, (gint32 *)ids->data, n, vis_cpu,
                                     last_a, la, NULL, NULL, &err));
    g_assert_true(cl_decoder_forward(dev, m, kb, (gint32 *)ids->data, n, vis_cpu, last_b, lb, NULL,
                                     NULL, &err));
    g_assert_no_error(err);
    g_autofree char *w4 = g_strdup_printf("%s logits at every prompt position", name);
    cl_check_close(w4, lb, la, (size_t)n * V, &dec_tol);
    /* two decode steps on the cache */
    for (int step = 0; step < 2; step++) {
        gint32 id = 100 + step;
        g_assert_true(cl_decoder_forward(cl_check_cpu_be, m, ka, &id, 1, NULL, last_a, NULL, NULL,
                                         NULL, &err));
        g_assert_true(cl_decoder_forward(dev, m, kb, &id, 1, NULL, last_b, NULL, NULL, NULL, &err));
        g_assert_no_error(err);
        g_autofree char *w5 = g_strdup_printf("%s logits of decode step %d", name, step + 1);
        cl_check_close(w5, last_b, last_a, (size_t)V, &dec_tol);
    }

    /* generation: greedy and beam (beam copies caches on the device) */
    for (int beam = 1; beam <= 3; beam += 2) {
        ClGenerateOptions o;
        cl_generate_options_init(&o);
        o.max_new_tokens = 12;
        o.beam_size = beam;
        ClGenerateResult ga, gb;
        g_assert_true(
            cl_generate(cl_check_cpu_be, m, (gint32 *)ids->data, n, vis_cpu, &o, &ga, &err));
        g_assert_true(cl_generate(dev, m, (gint32 *)ids->data, n, vis_dev, &o, &gb, &err));
        g_assert_no_error(err);
        g_autofree char *ta = g_strescape(ga.text->str, NULL);
        g_autofree char *tb = g_strescape(gb.text->str, NULL);
        g_test_message("%s %s: CPU \"%s\", device \"%s\"", name, beam == 1 ? "greedy" : "beam 3",
                       ta, tb);
        if (c->exact_decodes && !m->quant) {
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
    g_autofree char *path = g_build_filename(root ? root : ".", "data", "models",
                                             "changelens-default.safetensors", NULL);
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_test_skip("no shipped model in this tree");
        return;
    }
    g_autoptr(GError) err = NULL;
    g_autoptr(ClModel) m = cl_model_load(path, &err);
    g_assert_no_error(err);
    run_model_check(c, m, "shipped model");
}

/* The shipped radiograph-and-aerial model: the EfficientNet-Lite0 stem runs on the host and its
 * features are uploaded (skipped without the pretrained stem set-up fetches). */
static void test_model_shipped_stem(gconstpointer p)
{
    const Ctx *c = p;
    const char *root = g_getenv("CL_SOURCE_ROOT");
    g_autofree char *path = g_build_filename(root ? root : ".", "data", "models",
                                             "changelens-radiograph-aerial.safetensors", NULL);
    g_autofree char *stem = cl_pretrained_path(CL_EFFNET_FILE);
    if (!g_file_test(path, G_FILE_TEST_EXISTS) || !g_file_test(stem, G_FILE_TEST_EXISTS)) {
        g_test_skip("no shipped model with a pretrained stem in this tree, or no stem");
        return;
    }
    g_autoptr(GError) err = NULL;
    g_autoptr(ClModel) m = cl_model_load(path, &err);
    g_assert_no_error(err);
    g_assert_true(m->config.enc_stem_effnet);
    run_model_check(c, m, "shipped model with the EfficientNet stem");
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
    if (!cl_check_cpu_be)
        cl_check_cpu_be = cl_backend_cpu_new(0);
    Ctx *c = g_new0(Ctx, 1);
    c->dev = dev;
    c->tol = *tol;
    c->exact_decodes = exact_decodes; /* lives as long as the test program */
#define ADD(path, fn)                                                                              \
    do {                                                                                           \
        g_autofree char *p_ = g_strconcat(prefix, path, NULL);                                     \
        g_test_add_data_func(p_, c, fn);                                                           \
    } while (0)
    cl_check_add_op_tests(prefix, c); /* backend-ops.c: one test per op and shape */
    ADD("/model/variants", test_model_variants);
    ADD("/model/weights-follow-edits", test_weights_follow_edits);
    ADD("/model/shipped", test_model_shipped);
    ADD("/model/shipped-stem", test_model_shipped_stem);
#undef ADD
}
