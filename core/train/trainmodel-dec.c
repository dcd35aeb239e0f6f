/* trainmodel-dec.c - the decoder's training forward over a whole sequence (the backend's ops in
 * decoder.c's order, one chunk, no cache) with its activations kept per layer, and its backward
 * (docs/MODEL.md §4). */
#include "trainmodel.h"

#include <math.h>
#include <string.h>

#include "decoder.h"
#include "grad.h"

/* qkv: (n, Q + 2 KV) rows [q | k | v], one product with the layer's q, k and v weights
 * stacked (they are consecutive in a trainable model); gu: (n, 2 F) rows [gate | up], likewise.
 * Fewer, wider products: the activation is packed once instead of three times. */
typedef struct {
    float *x_in, *h1, *qkv, *att, *x_mid, *h2, *gu, *act;
    float *probs; /* (Hq, n, n) attention probabilities, or NULL: the backward recomputes them */
} LayerAct;

/* The attention probabilities are kept for the backward while all layers' take at most this
 * (a short sequence; a long one recomputes them a block at a time). */
#define KEEP_PROBS_BYTES ((size_t)96 << 20)

struct _ClTrainDec {
    ClBackend *be;
    const ClModelConfig *cfg;
    int n, E, F, Hq, Hkv, hd, Q, KV, QKV, V;
    float eps, scale;
    const gint32 *ids;
    LayerAct *layer;
    float *x_out, *hn, *rope_cos, *rope_sin;
    int n_rows;        /* logit rows: every position, or the listed ones */
    int tail;          /* the first logit row: the last layer's queries, output projection,
                        * MLP and the final norm run on positions [tail, n) only */
    int *rows;         /* (n_rows) their positions, NULL = all */
    float *hk;         /* (n_rows, E) the final norm's output at those rows */
    GPtrArray *bufs;
    gboolean failed;
};

static float *alloc(ClTrainDec *d, size_t n)
{
    float *p = g_try_new(float, MAX(n, 1));
    if (!p)
        d->failed = TRUE;
    else
        g_ptr_array_add(d->bufs, p);
    return p;
}

/* Rows a (na, E) and b (nb, E) (and c (nc, E), may be NULL) as one (na + nb + nc, E) matrix:
 * themselves when consecutive (a trainable model's flat parameters), else a copy in tmp. */
static const float *stacked(const float *a, int na, const float *b, int nb, const float *c,
                            int nc, int E, float *tmp)
{
    const size_t sa = (size_t)na * E, sb = (size_t)nb * E;
    if (b == a + sa && (!c || c == b + sb))
        return a;
    memcpy(tmp, a, sa * sizeof(float));
    memcpy(tmp + sa, b, sb * sizeof(float));
    if (c)
        memcpy(tmp + sa + sb, c, (size_t)nc * E * sizeof(float));
    return tmp;
}

void cl_train_dec_free(ClTrainDec *d)
{
    if (!d)
        return;
    g_ptr_array_free(d->bufs, TRUE);
    g_free(d->layer);
    g_free(d->rows);
    g_free(d);
}

ClTrainDec *cl_train_dec_forward(ClBackend *be, const ClModel *model, const gint32 *ids, int n,
                                 const float *visual, const int *rows, int n_rows, float *logits,
                                 GError **error)
{
    const ClModelConfig *cfg = &model->config;
    const ClModelWeights *w = &model->w;
    const struct cl_backend_ops *op = be->ops;
    ClTrainDec *d = g_new0(ClTrainDec, 1);
    d->be = be, d->cfg = cfg, d->n = n, d->ids = ids;
    d->E = cfg->dec_dim, d->F = cfg->dec_mlp, d->Hq = cfg->dec_heads, d->Hkv = cfg->dec_kv_heads;
    d->hd = d->E / d->Hq, d->Q = d->Hq * d->hd, d->KV = d->Hkv * d->hd, d->V = cfg->vocab_size;
    d->QKV = d->Q + 2 * d->KV;
    d->eps = (float)cfg->norm_eps;
    d->scale = (float)(1.0 / sqrt((double)d->hd));
    d->bufs = g_ptr_array_new_with_free_func(g_free);
    d->layer = g_new0(LayerAct, cfg->dec_depth);
    const int E = d->E, F = d->F, Q = d->Q, KV = d->KV, QKV = d->QKV, hd = d->hd;
    const size_t nE = (size_t)n * E, nF = (size_t)n * F;
    const gboolean keep_probs =
        (size_t)d->Hq * n * n * sizeof(float) * cfg->dec_depth <= KEEP_PROBS_BYTES;

    float *x = alloc(d, nE), *proj = alloc(d, nE);
    float *scratch = alloc(d, op->attention_scratch(be, n, n, d->Hq));
    float *wtmp = alloc(d, (size_t)MAX(QKV, 2 * F) * E);
    d->rope_cos = alloc(d, (size_t)n * hd / 2), d->rope_sin = alloc(d, (size_t)n * hd / 2);
    d->hn = alloc(d, nE);
    if (d->failed)
        goto oom;
    /* Nothing reads the last layer's output before the first logit row: that layer still
     * makes every position's keys and values (the tail attends to them), but its attention,
     * projections and MLP run on the tail alone (the loss and every gradient are the same) */
    d->tail = 0;
    if (rows) {
        d->tail = n;
        for (int r = 0; r < n_rows; r++)
            d->tail = MIN(d->tail, rows[r]);
    }
    op->embed(be, x, w->embed, ids, n, E);
    for (int i = 0, row = 0; i < n; i++)
        if (ids[i] == CL_DECODER_VISUAL)
            memcpy(x + (size_t)i * E, visual + (size_t)row++ * E, (size_t)E * sizeof(float));
    cl_rope_table_1d(d->rope_cos, d->rope_sin, 0, n, hd, cfg->rope_base);

    for (int l = 0; l < cfg->dec_depth; l++) {
        const ClDecoderLayerWeights *L = &w->dec[l];
        LayerAct *a = &d->layer[l];
        /* this layer's output rows [s, n), m of them (all but the last layer: every row) */
        const int s = l == cfg->dec_depth - 1 ? d->tail : 0, m = n - s;
        const size_t sE = (size_t)s * E, sF = (size_t)s * F;
        a->x_in = alloc(d, nE), a->h1 = alloc(d, nE), a->qkv = alloc(d, (size_t)n * QKV);
        a->att = alloc(d, (size_t)n * Q), a->x_mid = alloc(d, nE), a->h2 = alloc(d, nE);
        a->gu = alloc(d, 2 * nF), a->act = alloc(d, nF);
        if (keep_probs)
            a->probs = alloc(d, (size_t)d->Hq * n * n);
        if (d->failed)
            goto oom;
        memcpy(a->x_in, x, nE * sizeof(float));
        op->rmsnorm(be, a->h1, x, L->attn_norm, n, E, d->eps);
        op->linear(be, a->qkv, a->h1, stacked(L->q, Q, L->k, KV, L->v, KV, E, wtmp), NULL, n, E,
                   QKV);
        float *q = a->qkv, *k = a->qkv + Q, *v = a->qkv + Q + KV;
        op->rope(be, q, d->rope_cos, d->rope_sin, n, QKV, d->Hq, hd, 1);
        op->rope(be, k, d->rope_cos, d->rope_sin, n, QKV, d->Hkv, hd, 1);
        if (m == 0)
            continue;
        /* queries from position s see keys [0, s + i]: the causal offset is s */
        if (a->probs)
            cl_train_attention(a->att + (size_t)s * Q, a->probs, q + (size_t)s * QKV, k, v, m,
                               n, QKV, QKV, QKV, Q, d->Hq, d->Hkv, hd, d->scale, s);
        else
            op->attention(be, a->att + (size_t)s * Q, NULL, q + (size_t)s * QKV, k, v, m, n,
                          QKV, QKV, QKV, Q, d->Hq, d->Hkv, hd, d->scale, s, 0, scratch);
        op->linear(be, proj, a->att + (size_t)s * Q, L->o, NULL, m, Q, E);
        op->residual(be, x + sE, proj, NULL, m, E);
        memcpy(a->x_mid + sE, x + sE, (size_t)m * E * sizeof(float));
        op->rmsnorm(be, a->h2 + sE, x + sE, L->mlp_norm, m, E, d->eps);
        op->linear(be, a->gu + 2 * sF, a->h2 + sE,
                   stacked(L->gate, F, L->up, F, NULL, 0, E, wtmp), NULL, m, E, 2 * F);
        for (int i = s; i < n; i++) {
            const float *gi = a->gu + (size_t)i * 2 * F;
            op->silu_mul(be, a->act + (size_t)i * F, gi, gi + F, F);
        }
        op->linear(be, proj, a->act + sF, L->down, NULL, m, F, E);
        op->residual(be, x + sE, proj, NULL, m, E);
    }
    d->x_out = x;
    const size_t tE = (size_t)d->tail * E;
    if (d->tail < n)
        op->rmsnorm(be, d->hn + tE, x + tE, w->dec_norm, n - d->tail, E, d->eps);
    d->n_rows = rows ? n_rows : n;
    d->hk = d->hn;
    if (rows) {
        d->rows = g_memdup2(rows, sizeof(int) * (size_t)MAX(n_rows, 1));
        d->hk = alloc(d, (size_t)MAX(n_rows, 1) * E);
        if (d->failed)
            goto oom;
        for (int r = 0; r < n_rows; r++)
            memcpy(d->hk + (size_t)r * E, d->hn + (size_t)rows[r] * E, (size_t)E * sizeof(float));
    }
    if (d->n_rows > 0)
        op->linear(be, logits, d->hk, w->lm_head ? w->lm_head : w->embed, NULL, d->n_rows, E,
                   d->V);
    g_ptr_array_remove_fast(d->bufs, proj);
    g_ptr_array_remove_fast(d->bufs, scratch);
    g_ptr_array_remove_fast(d->bufs, wtmp);
    return d;

oom:
    cl_train_dec_free(d);
    g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                "Not enough memory for the decoder's training activations (%d positions)", n);
    return NULL;
}

/* The gradient of a stacked product's weights (see stacked()): into g itself when its parts are
 * consecutive, else through tmp, added back part by part by the caller's unstack(). */
static float *stacked_grad(float *a, int na, float *b, int nb, float *c, int nc, int E,
                           float *tmp)
{
    const size_t sa = (size_t)na * E, sb = (size_t)nb * E;
    if (b == a + sa && (!c || c == b + sb))
        return a;
    memset(tmp, 0, (sa + sb + (c ? (size_t)nc * E : 0)) * sizeof(float));
    return tmp;
}

static void unstack_grad(const float *at, float *a, int na, float *b, int nb, float *c, int nc,
                         int E)
{
    if (at == a)
        return;
    const size_t sa = (size_t)na * E, sb = (size_t)nb * E, sc = c ? (size_t)nc * E : 0;
    for (size_t i = 0; i < sa; i++)
        a[i] += at[i];
    for (size_t i = 0; i < sb; i++)
        b[i] += at[sa + i];
    for (size_t i = 0; i < sc; i++)
        c[i] += at[sa + sb + i];
}

void cl_train_dec_backward(ClTrainDec *d, const ClModelWeights *w, const float *dlogits,
                           float *dvisual, ClModelWeights *g)
{
    const int n = d->n, E = d->E, F = d->F, Q = d->Q, KV = d->KV, QKV = d->QKV, hd = d->hd;
    const size_t nE = (size_t)n * E, nF = (size_t)n * F;
    float *dx = g_new0(float, nE), *dh = g_new(float, nE);
    float *dact = g_new(float, nF), *dgu = g_new(float, 2 * nF);
    float *datt = g_new(float, (size_t)n * Q), *dqkv = g_new(float, (size_t)n * QKV);
    float *wtmp = g_new(float, (size_t)MAX(QKV, 2 * F) * E);
    float *gtmp = g_new(float, (size_t)MAX(QKV, 2 * F) * E);

    /* logits = RMSNorm(x) lm_head^T at the logit rows (tied: the gradient lands in the
     * embedding); the other positions get no gradient from the head */
    memset(dh, 0, nE * sizeof(float));
    if (d->rows) {
        float *dhk = g_new0(float, (size_t)MAX(d->n_rows, 1) * E);
        if (d->n_rows > 0)
            cl_grad_linear(dhk, g->lm_head ? g->lm_head : g->embed, NULL, dlogits, d->hk,
                           w->lm_head ? w->lm_head : w->embed, d->n_rows, E, d->V);
        for (int r = 0; r < d->n_rows; r++)
            memcpy(dh + (size_t)d->rows[r] * E, dhk + (size_t)r * E, (size_t)E * sizeof(float));
        g_free(dhk);
    } else {
        cl_grad_linear(dh, g->lm_head ? g->lm_head : g->embed, NULL, dlogits, d->hn,
                       w->lm_head ? w->lm_head : w->embed, n, E, d->V);
    }
    const size_t tE = (size_t)d->tail * E;
    if (d->tail < n)
        cl_grad_rmsnorm(dx + tE, g->dec_norm, dh + tE, d->x_out + tE, w->dec_norm, n - d->tail,
                        E, d->eps);

    for (int l = d->cfg->dec_depth - 1; l >= 0; l--) {
        const ClDecoderLayerWeights *L = &w->dec[l];
        ClDecoderLayerWeights *G = &g->dec[l];
        LayerAct *a = &d->layer[l];
        /* the rows the forward ran past the keys and values: [s, n) (see tail) */
        const int s = l == d->cfg->dec_depth - 1 ? d->tail : 0, m = n - s;
        const size_t sE = (size_t)s * E, sF = (size_t)s * F;
        memset(dqkv, 0, (size_t)n * QKV * sizeof(float));
        if (m > 0) {
            /* MLP: x += down(SiLU(gate) ⊙ up), gate and up one stacked product */
            memset(dact, 0, nF * sizeof(float));
            cl_grad_linear(dact + sF, G->down, NULL, dx + sE, a->act + sF, L->down, m, F, E);
            memset(dgu, 0, 2 * nF * sizeof(float));
            for (int i = s; i < n; i++) {
                const float *gi = a->gu + (size_t)i * 2 * F;
                float *dgi = dgu + (size_t)i * 2 * F;
                cl_grad_silu_mul(dgi, dgi + F, dact + (size_t)i * F, gi, gi + F, F);
            }
            memset(dh, 0, nE * sizeof(float));
            float *ggu = stacked_grad(G->gate, F, G->up, F, NULL, 0, E, gtmp);
            cl_grad_linear(dh + sE, ggu, NULL, dgu + 2 * sF, a->h2 + sE,
                           stacked(L->gate, F, L->up, F, NULL, 0, E, wtmp), m, E, 2 * F);
            unstack_grad(ggu, G->gate, F, G->up, F, NULL, 0, E);
            cl_grad_rmsnorm(dx + sE, G->mlp_norm, dh + sE, a->x_mid + sE, L->mlp_norm, m, E,
                            d->eps);
            /* attention: x += o(Attn(rope(q), rope(k), v)), q, k and v one stacked product */
            memset(datt, 0, (size_t)n * Q * sizeof(float));
            cl_grad_linear(datt + (size_t)s * Q, G->o, NULL, dx + sE, a->att + (size_t)s * Q,
                           L->o, m, Q, E);
            cl_grad_attention_probs(dqkv + (size_t)s * QKV, dqkv + Q, dqkv + Q + KV,
                                    datt + (size_t)s * Q, a->qkv + (size_t)s * QKV, a->qkv + Q,
                                    a->qkv + Q + KV, a->probs, m, n, QKV, QKV, QKV, Q, d->Hq,
                                    d->Hkv, hd, d->scale, s);
        }
        cl_grad_rope(dqkv, d->rope_cos, d->rope_sin, n, QKV, d->Hq, hd, 1);
        cl_grad_rope(dqkv + Q, d->rope_cos, d->rope_sin, n, QKV, d->Hkv, hd, 1);
        memset(dh, 0, nE * sizeof(float));
        float *gqkv = stacked_grad(G->q, Q, G->k, KV, G->v, KV, E, gtmp);
        cl_grad_linear(dh, gqkv, NULL, dqkv, a->h1, stacked(L->q, Q, L->k, KV, L->v, KV, E, wtmp),
                       n, E, QKV);
        unstack_grad(gqkv, G->q, Q, G->k, KV, G->v, KV, E);
        cl_grad_rmsnorm(dx, G->attn_norm, dh, a->x_in, L->attn_norm, n, E, d->eps);
    }
    /* the inputs: token rows into the embedding, visual rows out in order */
    cl_grad_embed(g->embed, dx, d->ids, n, E);
    for (int i = 0, row = 0; i < n; i++)
        if (d->ids[i] == CL_DECODER_VISUAL && dvisual)
            memcpy(dvisual + (size_t)row++ * E, dx + (size_t)i * E, (size_t)E * sizeof(float));
    g_free(dx), g_free(dh), g_free(dact), g_free(dgu);
    g_free(datt), g_free(dqkv), g_free(wtmp), g_free(gtmp);
}

gboolean cl_train_dec_attention(const ClTrainDec *d, int layer, int q0, float *out)
{
    const int L = d->cfg->dec_depth, n = d->n;
    if (layer < 0)
        layer += L;
    if (layer < 0 || layer >= L || q0 < 0 || q0 > n)
        return FALSE;
    const LayerAct *a = &d->layer[layer];
    const int hd = d->hd, group = d->Hq / d->Hkv;
    float *s = g_new(float, MAX(n, 1));
    memset(out, 0, sizeof(float) * (size_t)(n - q0) * n);
    for (int t = q0; t < n; t++) {
        float *row = out + (size_t)(t - q0) * n;
        for (int h = 0; h < d->Hq; h++) {
            const float *q = a->qkv + (size_t)t * d->QKV + (size_t)h * hd;
            int kh = h / group;
            float mx = -INFINITY;
            for (int j = 0; j <= t; j++) {
                const float *k = a->qkv + (size_t)j * d->QKV + d->Q + (size_t)kh * hd;
                float dot = 0;
                for (int e = 0; e < hd; e++)
                    dot += q[e] * k[e];
                s[j] = dot * d->scale;
                mx = MAX(mx, s[j]);
            }
            double sum = 0;
            for (int j = 0; j <= t; j++)
                sum += (s[j] = expf(s[j] - mx));
            for (int j = 0; j <= t; j++)
                row[j] += (float)(s[j] / sum / d->Hq);
        }
    }
    g_free(s);
    return TRUE;
}
