/* cpu-train.c - the CPU backend's training ops (backend.h's struct cl_backend_train_ops): the
 * host passes of nn/grad.h, called as they are, so a training step on the CPU backend is the
 * same arithmetic whether the trainer calls them directly or through the table. */
#include "nn/backend.h"
#include "nn/grad.h"

static void t_linear(ClBackend *be, float *dx, float *dw, float *db, const float *dy,
                     const float *x, const float *w, int m, int k, int n)
{
    (void)be;
    cl_grad_linear(dx, dw, db, dy, x, w, m, k, n);
}

static void t_layernorm(ClBackend *be, float *dx, float *dw, float *db, const float *dy,
                        const float *x, const float *w, int m, int n, float eps)
{
    (void)be;
    cl_grad_layernorm(dx, dw, db, dy, x, w, m, n, eps);
}

static void t_rmsnorm(ClBackend *be, float *dx, float *dw, const float *dy, const float *x,
                      const float *w, int m, int n, float eps)
{
    (void)be;
    cl_grad_rmsnorm(dx, dw, dy, x, w, m, n, eps);
}

static void t_modulate(ClBackend *be, float *dx, float *dscale, float *dshift, const float *dy,
                       const float *x, const float *scale, int m, int n)
{
    (void)be;
    cl_grad_modulate(dx, dscale, dshift, dy, x, scale, m, n);
}

static void t_gelu(ClBackend *be, float *dx, const float *dy, const float *x, size_t count)
{
    (void)be;
    cl_grad_gelu(dx, dy, x, count);
}

static void t_silu(ClBackend *be, float *dx, const float *dy, const float *x, size_t count)
{
    (void)be;
    cl_grad_silu(dx, dy, x, count);
}

static void t_silu_mul(ClBackend *be, float *dgate, float *dup, const float *dy, const float *gate,
                       const float *up, size_t count)
{
    (void)be;
    cl_grad_silu_mul(dgate, dup, dy, gate, up, count);
}

static void t_residual(ClBackend *be, float *da, float *dgate, const float *dy, const float *a,
                       const float *gate, int m, int n)
{
    (void)be;
    cl_grad_residual(da, dgate, dy, a, gate, m, n);
}

static void t_scale_cols(ClBackend *be, float *da, float *dgate, const float *dy, const float *a,
                         const float *gate, int m, int n)
{
    (void)be;
    cl_grad_scale_cols(da, dgate, dy, a, gate, m, n);
}

static void t_rope(ClBackend *be, float *dx, const float *cos_t, const float *sin_t, int n_tok,
                   int ld, int n_head, int head_dim, int n_sections)
{
    (void)be;
    cl_grad_rope(dx, cos_t, sin_t, n_tok, ld, n_head, head_dim, n_sections);
}

static void t_softmax(ClBackend *be, float *dx, const float *dy, const float *y, int m, int n,
                      int ld)
{
    (void)be;
    cl_grad_softmax(dx, dy, y, m, n, ld);
}

static void t_attention(ClBackend *be, float *dq, float *dk, float *dv, const float *dout,
                        const float *q, const float *k, const float *v, int n_q, int n_kv, int ldq,
                        int ldk, int ldv, int ldo, int n_head, int n_kv_head, int head_dim,
                        float scale, int causal)
{
    (void)be;
    cl_grad_attention(dq, dk, dv, dout, q, k, v, n_q, n_kv, ldq, ldk, ldv, ldo, n_head, n_kv_head,
                      head_dim, scale, causal);
}

static void t_attention_keep(ClBackend *be, float *out, float *probs, const float *q,
                             const float *k, const float *v, int n_q, int n_kv, int ldq, int ldk,
                             int ldv, int ldo, int n_head, int n_kv_head, int head_dim, float scale,
                             int causal)
{
    (void)be;
    cl_train_attention(out, probs, q, k, v, n_q, n_kv, ldq, ldk, ldv, ldo, n_head, n_kv_head,
                       head_dim, scale, causal);
}

static void t_attention_probs(ClBackend *be, float *dq, float *dk, float *dv, const float *dout,
                              const float *q, const float *k, const float *v, const float *probs,
                              int n_q, int n_kv, int ldq, int ldk, int ldv, int ldo, int n_head,
                              int n_kv_head, int head_dim, float scale, int causal)
{
    (void)be;
    cl_grad_attention_probs(dq, dk, dv, dout, q, k, v, probs, n_q, n_kv, ldq, ldk, ldv, ldo, n_head,
                            n_kv_head, head_dim, scale, causal);
}

static void t_row_norms(ClBackend *be, float *da, const float *dout, const float *a,
                        const float *out, int m, int n)
{
    (void)be;
    cl_grad_row_norms(da, dout, a, out, m, n);
}

static void t_embed(ClBackend *be, float *dtable, const float *dy, const gint32 *ids, int n,
                    int dim)
{
    (void)be;
    cl_grad_embed(dtable, dy, ids, n, dim);
}

static void t_merge2x2(ClBackend *be, float *dx, const float *dcat, int grid, int dim)
{
    (void)be;
    cl_grad_merger_unfold(dx, dcat, grid, dim);
}

static double t_cross_entropy(ClBackend *be, float *dlogits, const float *logits,
                              const gint32 *targets, const guint8 *mask, int n, int vocab,
                              float scale, int *n_supervised)
{
    (void)be;
    return cl_cross_entropy(dlogits, logits, targets, mask, n, vocab, scale, n_supervised);
}

static double t_bce(ClBackend *be, float *dz, const float *z, const float *y, size_t count,
                    float scale)
{
    (void)be;
    return cl_bce_logits(dz, z, y, count, scale);
}

static double t_sumsq(ClBackend *be, const float *x, size_t n)
{
    (void)be;
    return cl_sumsq(x, 0, n);
}

static void t_scale(ClBackend *be, float *x, float s, size_t n)
{
    (void)be;
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
}

static void t_adamw(ClBackend *be, float *p, float *m, float *v, const float *g, size_t n,
                    float decay, float w1, float b2, float w2, float bc2_sqrt, float eps,
                    float step_size, float gscale)
{
    (void)be;
    cl_adamw_elements(p, m, v, g, 0, n, decay, w1, b2, w2, bc2_sqrt, eps, step_size, gscale);
}

const struct cl_backend_train_ops cl_cpu_train_ops = {
    .linear = t_linear,
    .layernorm = t_layernorm,
    .rmsnorm = t_rmsnorm,
    .modulate = t_modulate,
    .gelu = t_gelu,
    .silu = t_silu,
    .silu_mul = t_silu_mul,
    .residual = t_residual,
    .scale_cols = t_scale_cols,
    .rope = t_rope,
    .softmax = t_softmax,
    .attention = t_attention,
    .attention_keep = t_attention_keep,
    .attention_probs = t_attention_probs,
    .row_norms = t_row_norms,
    .embed = t_embed,
    .merge2x2 = t_merge2x2,
    .cross_entropy = t_cross_entropy,
    .bce = t_bce,
    .sumsq = t_sumsq,
    .scale = t_scale,
    .adamw = t_adamw,
};
