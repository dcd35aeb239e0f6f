/* decoder-pvm.c - persistent visual memory (docs/MODEL.md §4.2): a low-rank branch beside the
 * FFN of the PVM layers that attends to the prompt's visual rows with its own keys and values,
 * silent at the visual rows themselves. Inference here, training after it. */
#include "model/decoder-options.h"
#include "model/decoder-train.h"

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
                    "Not enough %s memory for the PVM's visual keys (%d rows)", cl_backend_name(be),
                    n);
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
                           const ClModelWeights *w, const float *visual, int n_vis, int first_pos,
                           GError **error)
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
                            const ClModelWeights *w, const gint32 *ids, int n, const float *visual,
                            GError **error)
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
gboolean cl_dec_pvm_branch(const ClDecRun *r, const ClDecoderLayerWeights *L, int l, const float *h,
                           const gint32 *cid, int cn)
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
    op->linear(be, c->pa, h, L->pvm_t, NULL, cn, E, R);            /* h W_t^T */
    op->rmsnorm(be, c->pa, c->pa, L->pvm_norm_a, cn, R, eps);      /* zq */
    op->linear(be, c->pb, c->pa, L->pvm_q, NULL, cn, R, R);        /* zq W_q^T */
    op->rmsnorm(be, c->pb, c->pb, L->pvm_q_norm, cn * H, hp, eps); /* q, per head */
    op->attention(be, c->pc, NULL, c->pb, ks, vs, cn, c->pvm_n, R, hp, hp, R, H, 1, hp,
                  (float)(1.0 / sqrt((double)hp)), -1, 0, c->scores);
    op->linear(be, c->pa, c->pc, L->pvm_o, NULL, cn, R, R); /* m */
    op->rmsnorm(be, c->pb, c->pa, L->pvm_norm_b, cn, R, eps);
    op->linear(be, c->pg, c->pb, L->pvm_gate, NULL, cn, R, Fp);
    op->linear(be, c->pu, c->pb, L->pvm_up, NULL, cn, R, Fp);
    op->silu_mul(be, c->pg, c->pg, c->pu, (size_t)cn * Fp);
    op->linear(be, c->pc, c->pg, L->pvm_down, NULL, cn, Fp, R);
    op->residual(be, c->pc, c->pa, NULL, cn, R); /* m' = m + SwiGLU */
    op->linear(be, c->pp, c->pc, L->pvm_out, NULL, cn, R, E);
    op->rmsnorm(be, c->pp, c->pp, c->ones, cn, E, eps);    /* RMSNorm0 */
    op->scale_by(be, c->pp, L->pvm_alpha, (size_t)cn * E); /* α · */
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

/* ---- training (decoder-train.h) ---- */

void cl_dec_train_pvm_layout(ClTrainDec *d, ClTrainPvmAct *p, ClActArena *a)
{
    const ClModelConfig *cfg = d->cfg;
    const int n = d->n, E = d->E, nv = d->n_vis;
    const int r = cfg->pvm_rank, H = cfg->pvm_heads, hp = r / H, Fp = cfg->pvm_mlp;
    const size_t nr = (size_t)n * r;
    p->zv = cl_act_take(a, (size_t)nv * r), p->kp = cl_act_take(a, (size_t)nv * hp);
    p->kn = cl_act_take(a, (size_t)nv * hp), p->vv = cl_act_take(a, (size_t)nv * hp);
    p->zt = cl_act_take(a, nr), p->zq = cl_act_take(a, nr), p->qp = cl_act_take(a, nr);
    p->qn = cl_act_take(a, nr), p->att = cl_act_take(a, nr), p->mo = cl_act_take(a, nr);
    p->nb = cl_act_take(a, nr), p->m2 = cl_act_take(a, nr);
    p->gu = cl_act_take(a, (size_t)n * 2 * Fp), p->act = cl_act_take(a, (size_t)n * Fp);
    p->y = cl_act_take(a, (size_t)n * E), p->u = cl_act_take(a, (size_t)n * E);
    p->probs = cl_act_take(a, (size_t)H * n * nv);
}

void cl_dec_train_pvm_forward(ClTrainDec *d, const ClDecoderLayerWeights *L, ClTrainPvmAct *p,
                              const float *h, float *x, int s)
{
    ClBackend *be = d->be;
    const struct cl_backend_ops *op = be->ops;
    const ClModelConfig *cfg = d->cfg;
    const int n = d->n, E = d->E, nv = d->n_vis, m = n - s;
    const int r = cfg->pvm_rank, H = cfg->pvm_heads, hp = r / H, Fp = cfg->pvm_mlp;
    const size_t sr = (size_t)s * r, sE = (size_t)s * E;
    float *pp = d->pp, *wtmp = d->wtmp;
    const float eps = d->eps;
    op->linear(be, p->zv, d->visual, L->pvm_v, NULL, nv, E, r);
    op->linear(be, p->kp, p->zv, L->pvm_k, NULL, nv, r, hp);
    op->rmsnorm(be, p->kn, p->kp, L->pvm_k_norm, nv, hp, eps);
    op->linear(be, p->vv, p->zv, L->pvm_vv, NULL, nv, r, hp);
    op->linear(be, p->zt + sr, h + sE, L->pvm_t, NULL, m, E, r);
    op->rmsnorm(be, p->zq + sr, p->zt + sr, L->pvm_norm_a, m, r, eps);
    op->linear(be, p->qp + sr, p->zq + sr, L->pvm_q, NULL, m, r, r);
    op->rmsnorm(be, p->qn + sr, p->qp + sr, L->pvm_q_norm, m * H, hp, eps);
    cl_train_attention(p->att + sr, p->probs, p->qn + sr, p->kn, p->vv, m, nv, r, hp, hp, r, H, 1,
                       hp, (float)(1.0 / sqrt((double)hp)), -1);
    op->linear(be, p->mo + sr, p->att + sr, L->pvm_o, NULL, m, r, r);
    op->rmsnorm(be, p->nb + sr, p->mo + sr, L->pvm_norm_b, m, r, eps);
    op->linear(be, p->gu + (size_t)s * 2 * Fp, p->nb + sr,
               cl_grad_stacked(d->be, L->pvm_gate, Fp, L->pvm_up, Fp, NULL, 0, r, wtmp), NULL, m, r,
               2 * Fp);
    for (int i = s; i < n; i++) {
        const float *gi = p->gu + (size_t)i * 2 * Fp;
        op->silu_mul(be, p->act + (size_t)i * Fp, gi, gi + Fp, Fp);
    }
    op->linear(be, p->m2 + sr, p->act + (size_t)s * Fp, L->pvm_down, NULL, m, Fp, r);
    op->residual(be, p->m2 + sr, p->mo + sr, NULL, m, r);
    op->linear(be, p->y + sE, p->m2 + sr, L->pvm_out, NULL, m, r, E);
    op->rmsnorm(be, p->u + sE, p->y + sE, d->ones, m, E, eps); /* RMSNorm0: a unit gain */
    const float alpha = L->pvm_alpha[0];
    for (int i = s; i < n; i++) {
        if (d->ids[i] == CL_DECODER_VISUAL)
            continue; /* the silencing mask */
        for (int j = 0; j < E; j++)
            pp[(size_t)i * E + j] = alpha * p->u[(size_t)i * E + j];
        op->residual(be, x + (size_t)i * E, pp + (size_t)i * E, NULL, 1, E);
    }
}

void cl_dec_train_pvm_backward(const ClTrainDec *d, const ClDecoderLayerWeights *L,
                               ClDecoderLayerWeights *G, const ClTrainPvmAct *p, const float *h,
                               const float *dx, int s, float *dh, float *dvis, float *wtmp,
                               float *gtmp)
{
    const ClModelConfig *cfg = d->cfg;
    const int n = d->n, E = d->E, nv = d->n_vis, m = n - s;
    const int r = cfg->pvm_rank, H = cfg->pvm_heads, hp = r / H, Fp = cfg->pvm_mlp;
    const size_t nr = (size_t)n * r, sr = (size_t)s * r, sE = (size_t)s * E;
    const float eps = d->eps, alpha = L->pvm_alpha[0];
    float *du = g_new0(float, (size_t)n * E), *dy = g_new0(float, (size_t)n * E);
    float *dm2 = g_new0(float, nr), *dmo = g_new0(float, nr), *dnb = g_new0(float, nr);
    float *datt = g_new0(float, nr), *dqn = g_new0(float, nr), *dqp = g_new0(float, nr);
    float *dzq = g_new0(float, nr), *dzt = g_new0(float, nr);
    float *dact = g_new0(float, (size_t)n * Fp), *dgu = g_new0(float, (size_t)n * 2 * Fp);
    float *dkn = g_new0(float, (size_t)nv * hp), *dkp = g_new0(float, (size_t)nv * hp);
    float *dvv = g_new0(float, (size_t)nv * hp), *dzv = g_new0(float, (size_t)nv * r);

    /* P = α u at text rows: dα = Σ dP ⊙ u, du = α dP */
    double da = 0;
    for (int i = s; i < n; i++) {
        if (d->ids[i] == CL_DECODER_VISUAL)
            continue;
        for (int j = 0; j < E; j++) {
            const size_t at = (size_t)i * E + j;
            da += (double)dx[at] * p->u[at];
            du[at] = alpha * dx[at];
        }
    }
    G->pvm_alpha[0] += (float)da;
    cl_grad_rmsnorm(dy + sE, NULL, du + sE, p->y + sE, d->ones, m, E, eps);
    cl_grad_linear(dm2 + sr, G->pvm_out, NULL, dy + sE, p->m2 + sr, L->pvm_out, m, r, E);
    /* m2 = mo + down(SiLU(gate) ⊙ up)(RMSNorm_b(mo)) */
    memcpy(dmo + sr, dm2 + sr, (size_t)m * r * sizeof(float));
    cl_grad_linear(dact + (size_t)s * Fp, G->pvm_down, NULL, dm2 + sr, p->act + (size_t)s * Fp,
                   L->pvm_down, m, Fp, r);
    for (int i = s; i < n; i++) {
        const float *gi = p->gu + (size_t)i * 2 * Fp;
        float *dgi = dgu + (size_t)i * 2 * Fp;
        cl_grad_silu_mul(dgi, dgi + Fp, dact + (size_t)i * Fp, gi, gi + Fp, Fp);
    }
    float *ggu = cl_grad_stacked_grad(d->be, G->pvm_gate, Fp, G->pvm_up, Fp, NULL, 0, r, gtmp);
    cl_grad_linear(dnb + sr, ggu, NULL, dgu + (size_t)s * 2 * Fp, p->nb + sr,
                   cl_grad_stacked(d->be, L->pvm_gate, Fp, L->pvm_up, Fp, NULL, 0, r, wtmp), m, r,
                   2 * Fp);
    cl_grad_unstack(d->be, ggu, G->pvm_gate, Fp, G->pvm_up, Fp, NULL, 0, r);
    cl_grad_rmsnorm(dmo + sr, G->pvm_norm_b, dnb + sr, p->mo + sr, L->pvm_norm_b, m, r, eps);
    /* mo = Attn(qn; kn, vv) W_o^T */
    cl_grad_linear(datt + sr, G->pvm_o, NULL, dmo + sr, p->att + sr, L->pvm_o, m, r, r);
    cl_grad_attention_probs(dqn + sr, dkn, dvv, datt + sr, p->qn + sr, p->kn, p->vv, p->probs, m,
                            nv, r, hp, hp, r, H, 1, hp, (float)(1.0 / sqrt((double)hp)), -1);
    /* the query side, back to h */
    cl_grad_rmsnorm(dqp + sr, G->pvm_q_norm, dqn + sr, p->qp + sr, L->pvm_q_norm, m * H, hp, eps);
    cl_grad_linear(dzq + sr, G->pvm_q, NULL, dqp + sr, p->zq + sr, L->pvm_q, m, r, r);
    cl_grad_rmsnorm(dzt + sr, G->pvm_norm_a, dzq + sr, p->zt + sr, L->pvm_norm_a, m, r, eps);
    cl_grad_linear(dh + sE, G->pvm_t, NULL, dzt + sr, h + sE, L->pvm_t, m, E, r);
    /* the key/value side, back to the visual rows */
    cl_grad_rmsnorm(dkp, G->pvm_k_norm, dkn, p->kp, L->pvm_k_norm, nv, hp, eps);
    cl_grad_linear(dzv, G->pvm_k, NULL, dkp, p->zv, L->pvm_k, nv, r, hp);
    cl_grad_linear(dzv, G->pvm_vv, NULL, dvv, p->zv, L->pvm_vv, nv, r, hp);
    cl_grad_linear(dvis, G->pvm_v, NULL, dzv, d->visual, L->pvm_v, nv, E, r);
    g_free(du), g_free(dy), g_free(dm2), g_free(dmo), g_free(dnb), g_free(datt), g_free(dqn);
    g_free(dqp), g_free(dzq), g_free(dzt), g_free(dact), g_free(dgu), g_free(dkn), g_free(dkp);
    g_free(dvv), g_free(dzv);
}
