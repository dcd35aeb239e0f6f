/* decoder-gdn.c - the hybrid decoder's Gated DeltaNet layers (docs/MODEL.md §4.5): the token
 * mixer in place of the attention, its recurrent state carried in the cache; the math is gdn.c's.
 * Inference here, training after it. */
#include "model/decoder-options.h"
#include "model/decoder-train.h"

#include <math.h>
#include <string.h>

#include "model/gdn.h"

/* ---- inference ---- */

gboolean cl_dec_gdn_init(ClKVCache *c, const ClModelConfig *cfg)
{
    if (!c->n_gdn)
        return TRUE;
    c->gdn_h = cfg->gdn_heads, c->gdn_dk = cfg->gdn_dk, c->gdn_dv = cfg->gdn_dv;
    c->gdn_k = cfg->gdn_conv;
    c->gdn_state = (size_t)c->gdn_h * c->gdn_dk * c->gdn_dv;
    c->gdn_conv_n = (size_t)(c->gdn_k - 1) * c->gdn_h * (2 * c->gdn_dk + c->gdn_dv);
    c->gdn_S = g_try_new0(float, MAX((size_t)c->n_gdn * c->gdn_state, 1));
    c->gdn_convst = g_try_new0(float, MAX((size_t)c->n_gdn * c->gdn_conv_n, 1));
    return c->gdn_S && c->gdn_convst;
}

void cl_dec_gdn_free(ClKVCache *c)
{
    g_clear_pointer(&c->gdn_S, g_free);
    g_clear_pointer(&c->gdn_convst, g_free);
}

gboolean cl_dec_gdn_truncate(ClKVCache *c, int len)
{
    if (c->n_gdn && len > 0 && len < c->len) {
        /* a recurrent state cannot be rewound */
        g_warning("A hybrid (Gated DeltaNet) KV cache can only be truncated to 0");
        return FALSE;
    }
    if (c->n_gdn && len == 0) {
        memset(c->gdn_S, 0, sizeof(float) * c->n_gdn * c->gdn_state);
        memset(c->gdn_convst, 0, sizeof(float) * c->n_gdn * c->gdn_conv_n);
    }
    return TRUE;
}

void cl_dec_gdn_copy(ClKVCache *dst, const ClKVCache *src)
{
    if (!src->n_gdn)
        return;
    memcpy(dst->gdn_S, src->gdn_S, sizeof(float) * src->n_gdn * src->gdn_state);
    memcpy(dst->gdn_convst, src->gdn_convst, sizeof(float) * src->n_gdn * src->gdn_conv_n);
}

/* Head h's columns of the rows of src (n rows of ld floats, heads of w) into dst (n, w), and
 * back (cols_put). */
static void head_cols(float *dst, const float *src, int n, int ld, int w, int h)
{
    for (int i = 0; i < n; i++)
        memcpy(dst + (size_t)i * w, src + (size_t)i * ld + (size_t)h * w, w * sizeof(float));
}

static void cols_put(float *dst, const float *src, int n, int ld, int w, int h)
{
    for (int i = 0; i < n; i++)
        memcpy(dst + (size_t)i * ld + (size_t)h * w, src + (size_t)i * w, w * sizeof(float));
}

/* The delta rule over n rows (gdn.h), head by head on contiguous copies: o (n, H·dv) from the
 * unit q, k (n, H·dk), v (n, H·dv), the log-decay g and beta b (n, H); S: the H states of
 * dk × dv, carried. One row (a decode step): the recurrence, the cheaper form; more: the chunked
 * form. */
static void delta_rule(float *o, float *S, const float *q, const float *k, const float *v,
                       const float *g, const float *b, int n, int H, int dk, int dv)
{
    float *qh = g_new(float, (size_t)n * dk), *kh = g_new(float, (size_t)n * dk);
    float *vh = g_new(float, (size_t)n * dv), *oh = g_new(float, (size_t)n * dv);
    float *gh = g_new(float, MAX(n, 1)), *bh = g_new(float, MAX(n, 1));
    for (int h = 0; h < H; h++) {
        head_cols(qh, q, n, H * dk, dk, h);
        head_cols(kh, k, n, H * dk, dk, h);
        head_cols(vh, v, n, H * dv, dv, h);
        head_cols(gh, g, n, H, 1, h);
        head_cols(bh, b, n, H, 1, h);
        float *Sh = S + (size_t)h * dk * dv;
        if (n == 1)
            cl_gdn_recurrent(oh, Sh, qh, kh, vh, gh, bh, n, dk, dv);
        else
            cl_gdn_chunked(oh, Sh, qh, kh, vh, gh, bh, n, dk, dv, 64);
        cols_put(o, oh, n, H * dv, dv, h);
    }
    g_free(qh), g_free(kh), g_free(vh), g_free(oh), g_free(gh), g_free(bh);
}

/* The layer's six products of h (n, E): z = q, k (n, H·dk), v, gate (n, H·dv), a, b (n, H). */
static void products(ClBackend *be, const ClDecoderLayerWeights *L, const float *h, int n, int E,
                     int H, int dk, int dv, float *const z[6])
{
    const float *wt[6] = { L->gdn_q, L->gdn_k, L->gdn_v, L->gdn_g, L->gdn_a, L->gdn_b };
    const int out[6] = { H * dk, H * dk, H * dv, H * dv, H, H };
    for (int i = 0; i < 6; i++)
        be->ops->linear(be, z[i], h, wt[i], NULL, n, E, out[i]);
}

/* A Gated DeltaNet layer in place of the attention (docs/MODEL.md §4.5), on cn rows of
 * c->x, its state carried in the cache: q, k, v through the causal convolution and SiLU, q and
 * k L2-normalised per head (q by 1/√dk too), beta = σ(h W_b), g = −exp(A_log)·softplus(h W_a +
 * dt_bias); the delta rule per head (gdn.h); y = RMSNorm_head(o; o_norm) ⊙ SiLU(h W_g);
 * x += y W_o^T. Host memory (the CPU backend). */
void cl_dec_gdn_layer(const ClDecRun *r, const ClDecoderLayerWeights *L, int slot, int cn)
{
    ClBackend *be = r->be;
    const struct cl_backend_ops *op = be->ops;
    ClKVCache *c = r->c;
    const int E = c->e, H = c->gdn_h, dk = c->gdn_dk, dv = c->gdn_dv, K = c->gdn_k;
    const int Qk = H * dk, Vv = H * dv;
    op->rmsnorm(be, c->h, c->x, L->attn_norm, cn, E, r->eps);
    float *z[6] = { c->gq, c->gk, c->gv, c->gg, c->ga, c->gb };
    products(be, L, c->h, cn, E, H, dk, dv, z);
    /* the causal convolutions (their states after the layer's earlier rows), then SiLU */
    float *st = c->gdn_convst + (size_t)slot * c->gdn_conv_n;
    float *tmp = g_new(float, (size_t)cn * MAX(Qk, Vv));
    struct {
        float *x;
        const float *w;
        int ch;
    } conv[3] = { { c->gq, L->gdn_conv_q, Qk },
                  { c->gk, L->gdn_conv_k, Qk },
                  { c->gv, L->gdn_conv_v, Vv } };
    for (int i = 0; i < 3; i++) {
        cl_causal_conv1d(tmp, st, conv[i].x, conv[i].w, cn, conv[i].ch, K);
        op->silu(be, conv[i].x, tmp, (size_t)cn * conv[i].ch);
        st += (size_t)(K - 1) * conv[i].ch;
    }
    g_free(tmp);
    /* per head: unit q and k (q scaled), beta, the log-decay */
    cl_gdn_gates(c->gq, c->gk, Qk, c->ga, c->ga, c->gb, c->gb, L->gdn_A_log, L->gdn_dt_bias, cn, H,
                 dk);
    /* the delta rule, head by head */
    delta_rule(c->go, c->gdn_S + (size_t)slot * c->gdn_state, c->gq, c->gk, c->gv, c->ga, c->gb, cn,
               H, dk, dv);
    /* the gated output */
    op->rmsnorm(be, c->go, c->go, L->gdn_o_norm, cn * H, dv, r->eps);
    op->silu_mul(be, c->go, c->gg, c->go, (size_t)cn * Vv);
    op->linear(be, c->proj, c->go, L->gdn_o, NULL, cn, Vv, E);
    op->residual(be, c->x, c->proj, NULL, cn, E);
}

/* ---- training (decoder-train.h) ---- */

void cl_dec_train_gdn_layout(ClTrainDec *d, ClTrainGdnAct *g, ClActArena *a)
{
    const ClModelConfig *cfg = d->cfg;
    const int H = cfg->gdn_heads, Qk = H * cfg->gdn_dk, Vv = H * cfg->gdn_dv;
    const size_t nQ = (size_t)d->n * Qk, nV = (size_t)d->n * Vv, nH = (size_t)d->n * H;
    float **q[] = { &g->zq, &g->zk, &g->cq, &g->ck, &g->sq, &g->sk, &g->nq, &g->nk };
    float **v[] = { &g->zv, &g->zg, &g->cv, &g->sv, &g->o, &g->on, &g->y };
    float **h[] = { &g->za, &g->zb, &g->gd, &g->bt };
    for (size_t i = 0; i < G_N_ELEMENTS(q); i++)
        *q[i] = cl_act_take(a, nQ);
    for (size_t i = 0; i < G_N_ELEMENTS(v); i++)
        *v[i] = cl_act_take(a, nV);
    for (size_t i = 0; i < G_N_ELEMENTS(h); i++)
        *h[i] = cl_act_take(a, nH);
}

/* The inference step's ops in its order, over a whole sequence. */
void cl_dec_train_gdn_forward(ClTrainDec *d, const ClDecoderLayerWeights *L, ClTrainLayerAct *a,
                              float *x, int s)
{
    ClBackend *be = d->be;
    const struct cl_backend_ops *op = be->ops;
    const ClModelConfig *cfg = d->cfg;
    const int n = d->n, E = d->E, H = cfg->gdn_heads, dk = cfg->gdn_dk, dv = cfg->gdn_dv;
    const int K = cfg->gdn_conv, Qk = H * dk, Vv = H * dv;
    const size_t nQ = (size_t)n * Qk, nV = (size_t)n * Vv;
    ClTrainGdnAct *g = &a->g;
    float *proj = d->proj;
    float *z[6] = { g->zq, g->zk, g->zv, g->zg, g->za, g->zb };
    products(be, L, a->h1, n, E, H, dk, dv, z);
    /* the causal convolutions from a zero state (a sequence's start), then SiLU */
    float *st = g_new0(float, (size_t)MAX(K - 1, 1) * MAX(Qk, Vv));
    struct {
        const float *z, *w;
        float *c, *sl;
        int ch;
    } conv[3] = { { g->zq, L->gdn_conv_q, g->cq, g->sq, Qk },
                  { g->zk, L->gdn_conv_k, g->ck, g->sk, Qk },
                  { g->zv, L->gdn_conv_v, g->cv, g->sv, Vv } };
    for (int i = 0; i < 3; i++) {
        memset(st, 0, sizeof(float) * (size_t)MAX(K - 1, 1) * MAX(Qk, Vv));
        cl_causal_conv1d(conv[i].c, st, conv[i].z, conv[i].w, n, conv[i].ch, K);
        op->silu(be, conv[i].sl, conv[i].c, (size_t)n * conv[i].ch);
    }
    g_free(st);
    /* per head: unit q and k (q scaled), beta, the log-decay (as the inference step, in float) */
    memcpy(g->nq, g->sq, nQ * sizeof(float));
    memcpy(g->nk, g->sk, nQ * sizeof(float));
    cl_gdn_gates(g->nq, g->nk, Qk, g->gd, g->za, g->bt, g->zb, L->gdn_A_log, L->gdn_dt_bias, n, H,
                 dk);
    /* the delta rule, head by head, from zero states */
    float *S = g_new0(float, (size_t)H * dk * dv);
    delta_rule(g->o, S, g->nq, g->nk, g->sv, g->gd, g->bt, n, H, dk, dv);
    g_free(S);
    /* the gated output; the projection and residual at the rows read later */
    op->rmsnorm(be, g->on, g->o, L->gdn_o_norm, n * H, dv, d->eps);
    op->silu_mul(be, g->y, g->zg, g->on, nV);
    const int m = n - s;
    if (m > 0) {
        op->linear(be, proj, g->y + (size_t)s * Vv, L->gdn_o, NULL, m, Vv, E);
        op->residual(be, x + (size_t)s * E, proj, NULL, m, E);
    }
}

void cl_dec_train_gdn_backward(const ClTrainDec *d, const ClDecoderLayerWeights *L,
                               ClDecoderLayerWeights *G, const ClTrainLayerAct *a, float *dx, int s)
{
    const ClModelConfig *cfg = d->cfg;
    const int n = d->n, E = d->E, H = cfg->gdn_heads, dk = cfg->gdn_dk, dv = cfg->gdn_dv;
    const int K = cfg->gdn_conv, Qk = H * dk, Vv = H * dv, m = n - s;
    const size_t nQ = (size_t)n * Qk, nV = (size_t)n * Vv, nH = (size_t)n * H;
    const ClTrainGdnAct *g = &a->g;
    float *dy = g_new0(float, nV), *dzg = g_new0(float, nV), *don = g_new0(float, nV);
    float *dO = g_new0(float, nV), *dsv = g_new0(float, nV), *dcv = g_new0(float, nV);
    float *dzv = g_new0(float, nV);
    float *dnq = g_new0(float, nQ), *dnk = g_new0(float, nQ), *dsq = g_new0(float, nQ);
    float *dsk = g_new0(float, nQ), *dcq = g_new0(float, nQ), *dck = g_new0(float, nQ);
    float *dzq = g_new0(float, nQ), *dzk = g_new0(float, nQ);
    float *dgd = g_new0(float, nH), *dbt = g_new0(float, nH);
    float *dza = g_new0(float, nH), *dzb = g_new0(float, nH);
    float *dh = g_new0(float, (size_t)n * E);

    /* x += y W_o^T at rows [s, n); y = SiLU(zg) ⊙ on; on = RMSNorm_head(o; o_norm) */
    cl_grad_linear(dy + (size_t)s * Vv, G->gdn_o, NULL, dx + (size_t)s * E, g->y + (size_t)s * Vv,
                   L->gdn_o, m, Vv, E);
    cl_grad_silu_mul(dzg, don, dy, g->zg, g->on, nV);
    cl_grad_rmsnorm(dO, G->gdn_o_norm, don, g->o, L->gdn_o_norm, n * H, dv, d->eps);
    /* the delta rule per head from a zero state (gdn.h) */
    float *qh = g_new(float, (size_t)n * dk), *kh = g_new(float, (size_t)n * dk);
    float *vh = g_new(float, (size_t)n * dv), *doh = g_new(float, (size_t)n * dv);
    float *gh = g_new(float, MAX(n, 1)), *bh = g_new(float, MAX(n, 1));
    float *dqh = g_new(float, (size_t)n * dk), *dkh = g_new(float, (size_t)n * dk);
    float *dvh = g_new(float, (size_t)n * dv);
    float *dgh = g_new(float, MAX(n, 1)), *dbh = g_new(float, MAX(n, 1));
    for (int h = 0; h < H; h++) {
        head_cols(qh, g->nq, n, Qk, dk, h);
        head_cols(kh, g->nk, n, Qk, dk, h);
        head_cols(vh, g->sv, n, Vv, dv, h);
        head_cols(doh, dO, n, Vv, dv, h);
        head_cols(gh, g->gd, n, H, 1, h);
        head_cols(bh, g->bt, n, H, 1, h);
        memset(dqh, 0, sizeof(float) * (size_t)n * dk);
        memset(dkh, 0, sizeof(float) * (size_t)n * dk);
        memset(dvh, 0, sizeof(float) * (size_t)n * dv);
        memset(dgh, 0, sizeof(float) * (size_t)n);
        memset(dbh, 0, sizeof(float) * (size_t)n);
        cl_gdn_recurrent_backward(dqh, dkh, dvh, dgh, dbh, NULL, doh, NULL, NULL, qh, kh, vh, gh,
                                  bh, n, dk, dv);
        cols_put(dnq, dqh, n, Qk, dk, h);
        cols_put(dnk, dkh, n, Qk, dk, h);
        cols_put(dsv, dvh, n, Vv, dv, h);
        cols_put(dgd, dgh, n, H, 1, h);
        cols_put(dbt, dbh, n, H, 1, h);
    }
    g_free(qh), g_free(kh), g_free(vh), g_free(doh), g_free(gh), g_free(bh);
    g_free(dqh), g_free(dkh), g_free(dvh), g_free(dgh), g_free(dbh);
    /* per head: the unit q and k back to SiLU's outputs (y = c x / r, r = √(|x|² + 1e-12):
     * dx = c (dy − x (x·dy) / r²) / r), beta = σ(zb), g = −exp(A_log) softplus(za + dt_bias) */
    for (int h = 0; h < H; h++) {
        const double A = exp((double)L->gdn_A_log[h]);
        double dA = 0, dbias = 0;
        for (int i = 0; i < n; i++) {
            for (int qk = 0; qk < 2; qk++) {
                const size_t o = (size_t)i * Qk + (size_t)h * dk;
                const float *x = (qk ? g->sk : g->sq) + o, *dyn = (qk ? dnk : dnq) + o;
                float *dxs = (qk ? dsk : dsq) + o;
                double xx = 0, xd = 0;
                for (int e = 0; e < dk; e++)
                    xx += (double)x[e] * x[e], xd += (double)x[e] * dyn[e];
                const double r2 = xx + 1e-12, r = sqrt(r2);
                const double c = qk ? 1.0 : 1.0 / sqrt((double)dk);
                for (int e = 0; e < dk; e++)
                    dxs[e] += (float)(c * (dyn[e] - x[e] * xd / r2) / r);
            }
            const size_t at = (size_t)i * H + h;
            const double bt = g->bt[at];
            dzb[at] += (float)(dbt[at] * bt * (1 - bt));
            const double z = (double)g->za[at] + L->gdn_dt_bias[h];
            const double sp = z > 20 ? z : log1p(exp(z)), sg = z > 20 ? 1.0 : 1 / (1 + exp(-z));
            dA += dgd[at] * (-A * sp); /* d g / d A_log = g */
            const double dz = dgd[at] * (-A * sg);
            dza[at] += (float)dz;
            dbias += dz;
        }
        G->gdn_A_log[h] += (float)dA;
        G->gdn_dt_bias[h] += (float)dbias;
    }
    /* SiLU, the causal convolutions (from zero states), the products of h1 */
    cl_grad_silu(dcq, dsq, g->cq, nQ);
    cl_grad_silu(dck, dsk, g->ck, nQ);
    cl_grad_silu(dcv, dsv, g->cv, nV);
    cl_causal_conv1d_backward(dzq, G->gdn_conv_q, NULL, dcq, NULL, g->zq, L->gdn_conv_q, n, Qk, K);
    cl_causal_conv1d_backward(dzk, G->gdn_conv_k, NULL, dck, NULL, g->zk, L->gdn_conv_k, n, Qk, K);
    cl_causal_conv1d_backward(dzv, G->gdn_conv_v, NULL, dcv, NULL, g->zv, L->gdn_conv_v, n, Vv, K);
    cl_grad_linear(dh, G->gdn_q, NULL, dzq, a->h1, L->gdn_q, n, E, Qk);
    cl_grad_linear(dh, G->gdn_k, NULL, dzk, a->h1, L->gdn_k, n, E, Qk);
    cl_grad_linear(dh, G->gdn_v, NULL, dzv, a->h1, L->gdn_v, n, E, Vv);
    cl_grad_linear(dh, G->gdn_g, NULL, dzg, a->h1, L->gdn_g, n, E, Vv);
    cl_grad_linear(dh, G->gdn_a, NULL, dza, a->h1, L->gdn_a, n, E, H);
    cl_grad_linear(dh, G->gdn_b, NULL, dzb, a->h1, L->gdn_b, n, E, H);
    cl_grad_rmsnorm(dx, G->attn_norm, dh, a->x_in, L->attn_norm, n, E, d->eps);
    g_free(dy), g_free(dzg), g_free(don), g_free(dO), g_free(dsv), g_free(dcv), g_free(dzv);
    g_free(dnq), g_free(dnk), g_free(dsq), g_free(dsk), g_free(dcq), g_free(dck);
    g_free(dzq), g_free(dzk), g_free(dgd), g_free(dbt), g_free(dza), g_free(dzb), g_free(dh);
}
