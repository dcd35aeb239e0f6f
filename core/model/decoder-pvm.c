/* decoder-pvm.c - persistent visual memory (docs/MODEL.md §4.2): a low-rank branch beside the
 * FFN of the PVM layers that attends to the prompt's visual rows with its own keys and values,
 * silent at the visual rows themselves. Inference here, training after it. */
#include "model/decoder-options.h"

#include <math.h>
#include <string.h>

/* ---- inference ---- */

void cl_dec_pvm_init(ClKVCache *c, const ClModelConfig *cfg)
{
    c->n_pvm = cfg->pvm_n_layers;
    c->pvm_r = cfg->pvm_rank;
    c->pvm_heads = cfg->pvm_heads;
    c->pvm_hp = c->n_pvm ? cfg->pvm_rank / cfg->pvm_heads : 0;
    c->pvm_f = cfg->pvm_mlp;
}

void cl_dec_pvm_release(ClKVCache *c)
{
    if (!c->pvm_be)
        return;
    c->pvm_be->ops->release(c->pvm_be, c->pvm_k);
    c->pvm_be->ops->release(c->pvm_be, c->pvm_v);
    if (c->pvm_vis)
        c->pvm_be->ops->release(c->pvm_be, c->pvm_vis);
    g_clear_pointer(&c->pvm_be, cl_backend_free);
    c->pvm_k = c->pvm_v = c->pvm_vis = NULL;
    c->pvm_cap = c->pvm_n = 0;
}

/* Room for n visual rows' PVM keys and values on backend be (kept contents: none). */
static gboolean pvm_reserve(ClKVCache *c, ClBackend *be, int n, GError **error)
{
    if (c->pvm_be == be && c->pvm_cap >= n)
        return TRUE;
    cl_dec_pvm_release(c);
    size_t kv = (size_t)c->n_pvm * n * c->pvm_hp * sizeof(float);
    size_t vis = be->ops->host_memory ? 0 : (size_t)n * c->e * sizeof(float);
    c->pvm_k = be->ops->alloc(be, kv);
    c->pvm_v = be->ops->alloc(be, kv);
    c->pvm_vis = vis ? be->ops->alloc(be, vis) : NULL;
    c->pvm_be = cl_backend_ref(be);
    if (!c->pvm_k || !c->pvm_v || (vis && !c->pvm_vis)) {
        cl_dec_pvm_release(c);
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "Not enough %s memory for the PVM's visual keys (%d rows)",
                    cl_backend_name(be), n);
        return FALSE;
    }
    c->pvm_cap = n;
    return TRUE;
}

void cl_dec_pvm_truncate(ClKVCache *c, int len)
{
    if (c->pvm_n > 0 && len <= c->pvm_from)
        c->pvm_n = 0; /* the visual rows PVM read are gone */
}

void cl_dec_pvm_copy(ClKVCache *dst, const ClKVCache *src)
{
    dst->pvm_n = 0;
    if (src->pvm_n <= 0 || !pvm_reserve(dst, src->pvm_be, src->pvm_n, NULL))
        return;
    /* the same (n_pvm, cap, hp) layout only when the capacities agree: copy per layer */
    size_t prow = (size_t)src->pvm_hp * sizeof(float);
    for (int l = 0; l < src->n_pvm; l++) {
        size_t so = (size_t)l * src->pvm_cap * src->pvm_hp,
               d_o = (size_t)l * dst->pvm_cap * dst->pvm_hp;
        src->pvm_be->ops->copy(src->pvm_be, dst->pvm_k + d_o, src->pvm_k + so, prow * src->pvm_n);
        src->pvm_be->ops->copy(src->pvm_be, dst->pvm_v + d_o, src->pvm_v + so, prow * src->pvm_n);
    }
    dst->pvm_n = src->pvm_n;
    dst->pvm_from = src->pvm_from;
}

/* PVM's keys and values of the call's n_vis visual rows (host memory `visual`), per PVM
 * layer: zv = Vimg W_v^T, k = RMSNorm_head(zv W_k^T), v = zv W_vv^T. */
static gboolean pvm_visual(ClKVCache *c, ClBackend *be, const ClModelConfig *cfg,
                           const ClModelWeights *w, const float *visual, int n_vis,
                           int first_pos, GError **error)
{
    const struct cl_backend_ops *op = be->ops;
    if (!pvm_reserve(c, be, n_vis, error))
        return FALSE;
    const float *vis = visual;
    if (!op->host_memory) {
        op->upload(be, c->pvm_vis, visual, (size_t)n_vis * c->e * sizeof(float));
        vis = c->pvm_vis;
    }
    /* zv needs (n_vis, r) floats: the cache's row-sized buffers hold `rows`, so a block of
     * rows at a time */
    const int r = c->pvm_r, hp = c->pvm_hp;
    for (int slot = 0; slot < c->n_pvm; slot++) {
        const ClDecoderLayerWeights *L = &w->dec[cfg->pvm_layers[slot]];
        float *ks = c->pvm_k + (size_t)slot * c->pvm_cap * hp;
        float *vs = c->pvm_v + (size_t)slot * c->pvm_cap * hp;
        for (int i0 = 0; i0 < n_vis; i0 += c->rows) {
            const int b = MIN(c->rows, n_vis - i0);
            op->linear(be, c->pa, vis + (size_t)i0 * c->e, L->pvm_v, NULL, b, c->e, r);
            op->linear(be, ks + (size_t)i0 * hp, c->pa, L->pvm_k, NULL, b, r, hp);
            op->rmsnorm(be, ks + (size_t)i0 * hp, ks + (size_t)i0 * hp, L->pvm_k_norm, b, hp,
                        (float)cfg->norm_eps);
            op->linear(be, vs + (size_t)i0 * hp, c->pa, L->pvm_vv, NULL, b, r, hp);
        }
    }
    c->pvm_n = n_vis;
    c->pvm_from = first_pos;
    return TRUE;
}

gboolean cl_dec_pvm_prepare(ClKVCache *c, ClBackend *be, const ClModelConfig *cfg,
                            const ClModelWeights *w, const gint32 *ids, int n,
                            const float *visual, GError **error)
{
    if (!c->n_pvm)
        return TRUE;
    int n_vis = 0, first = -1;
    for (int i = 0; i < n; i++)
        if (ids[i] == CL_DECODER_VISUAL) {
            n_vis++;
            if (first < 0)
                first = c->len + i;
        }
    return n_vis == 0 || pvm_visual(c, be, cfg, w, visual, n_vis, first, error);
}

/* P = α · RMSNorm0(m' W_up^T) for the chunk's cn rows of h (docs/MODEL.md §4.2), zero at
 * visual rows; into c->pp. */
gboolean cl_dec_pvm_branch(const ClDecRun *r, const ClDecoderLayerWeights *L, int l,
                           const float *h, const gint32 *cid, int cn)
{
    ClKVCache *c = r->c;
    const int slot = c->n_pvm ? cl_config_pvm_slot(r->cfg, l) : -1;
    if (slot < 0 || c->pvm_n <= 0)
        return FALSE;
    ClBackend *be = r->be;
    const struct cl_backend_ops *op = be->ops;
    const float eps = r->eps;
    const int R = c->pvm_r, hp = c->pvm_hp, H = c->pvm_heads, Fp = c->pvm_f, E = c->e;
    const float *ks = c->pvm_k + (size_t)slot * c->pvm_cap * hp;
    const float *vs = c->pvm_v + (size_t)slot * c->pvm_cap * hp;
    op->linear(be, c->pa, h, L->pvm_t, NULL, cn, E, R);                 /* h W_t^T */
    op->rmsnorm(be, c->pa, c->pa, L->pvm_norm_a, cn, R, eps);          /* zq */
    op->linear(be, c->pb, c->pa, L->pvm_q, NULL, cn, R, R);             /* zq W_q^T */
    op->rmsnorm(be, c->pb, c->pb, L->pvm_q_norm, cn * H, hp, eps);     /* q, per head */
    op->attention(be, c->pc, NULL, c->pb, ks, vs, cn, c->pvm_n, R, hp, hp, R, H, 1, hp,
                  (float)(1.0 / sqrt((double)hp)), -1, 0, c->scores);
    op->linear(be, c->pa, c->pc, L->pvm_o, NULL, cn, R, R);             /* m */
    op->rmsnorm(be, c->pb, c->pa, L->pvm_norm_b, cn, R, eps);
    op->linear(be, c->pg, c->pb, L->pvm_gate, NULL, cn, R, Fp);
    op->linear(be, c->pu, c->pb, L->pvm_up, NULL, cn, R, Fp);
    op->silu_mul(be, c->pg, c->pg, c->pu, (size_t)cn * Fp);
    op->linear(be, c->pc, c->pg, L->pvm_down, NULL, cn, Fp, R);
    op->residual(be, c->pc, c->pa, NULL, cn, R);                        /* m' = m + SwiGLU */
    op->linear(be, c->pp, c->pc, L->pvm_out, NULL, cn, R, E);
    op->rmsnorm(be, c->pp, c->pp, c->ones, cn, E, eps);                 /* RMSNorm0 */
    op->scale_by(be, c->pp, L->pvm_alpha, (size_t)cn * E);              /* α · */
    for (int i = 0; i < cn;) { /* the silencing mask: nothing at visual rows */
        if (cid[i] != CL_DECODER_VISUAL) {
            i++;
            continue;
        }
        int run = 1;
        while (i + run < cn && cid[i + run] == CL_DECODER_VISUAL)
            run++;
        op->zero(be, c->pp + (size_t)i * E, (size_t)run * E * sizeof(float));
        i += run;
    }
    return TRUE;
}
