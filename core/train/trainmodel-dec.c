/* trainmodel-dec.c - the decoder's training forward over a whole sequence (the backend's ops in
 * decoder.c's order, one chunk, no cache) with its activations kept per layer in one buffer, and
 * its backward (docs/MODEL.md §4). The options' own parts (PVM, CASA, the hybrid's GDN layers)
 * are in their files in core/model, beside their inference steps (model/decoder-train.h). */
#include "train/trainmodel.h"

#include <math.h>
#include <string.h>

#include "model/decoder-train.h"

/* The attention probabilities are kept for the backward while all layers' take at most this
 * (a short sequence; a long one recomputes them a block at a time). */
#define KEEP_PROBS_BYTES ((size_t)96 << 20)

void cl_train_dec_free(ClTrainDec *d)
{
    if (!d)
        return;
    cl_train_give(d->be, d->buf, d->buf_n);
    g_free(d->layer);
    g_free(d->pvm);
    g_free(d->tids);
    g_free(d->win0);
    g_free(d->winn);
    g_free(d->wstart);
    g_free(d->img_cos);
    g_free(d->img_sin);
    g_free(d->rows);
    g_free(d);
}

/* The shapes, the logit rows and which layers keep what, before anything is laid out. */
static void setup(ClTrainDec *d, const gint32 *ids, int n, const float *visual, const int *rows,
                  int n_rows)
{
    const ClModelConfig *cfg = d->cfg;
    d->n = n, d->ids = ids;
    d->E = cfg->dec_dim, d->F = cfg->dec_mlp, d->Hq = cfg->dec_heads, d->Hkv = cfg->dec_kv_heads;
    d->hd = d->E / d->Hq, d->Q = d->Hq * d->hd, d->KV = d->Hkv * d->hd, d->V = cfg->vocab_size;
    d->QKV = d->Q + 2 * d->KV;
    d->eps = (float)cfg->norm_eps;
    d->scale = (float)(1.0 / sqrt((double)d->hd));
    d->layer = g_new0(ClTrainLayerAct, cfg->dec_depth);
    d->visual = visual;
    if (!d->casa)
        for (int i = 0; i < n; i++)
            d->n_vis += ids[i] == CL_DECODER_VISUAL;
    d->pvm = g_new0(ClTrainPvmAct, MAX(cfg->pvm_n_layers, 1));
    int n_attn = 0; /* the attention layers (the hybrid's GDN layers keep no probabilities) */
    for (int l = 0; l < cfg->dec_depth; l++) {
        d->layer[l].gdn = cl_config_is_gdn(cfg, l);
        d->layer[l].ca_only = cl_config_casa_replaced(cfg, l);
        n_attn += !d->layer[l].gdn && !d->layer[l].ca_only;
    }
    d->keep_probs = (size_t)d->Hq * n * n * sizeof(float) * n_attn <= KEEP_PROBS_BYTES;
    /* Nothing reads the last layer's output before the first logit row: that layer still
     * makes every position's keys and values (the tail attends to them), but its attention,
     * projections and MLP run on the tail alone (the loss and every gradient are the same) */
    d->tail = 0;
    d->n_rows = rows ? n_rows : n;
    if (rows) {
        d->tail = n;
        for (int r = 0; r < n_rows; r++)
            d->tail = MIN(d->tail, rows[r]);
        d->rows = g_memdup2(rows, sizeof(int) * (size_t)MAX(n_rows, 1));
    }
}

/* Every view of the forward's activations and scratch: run once to count (a->base NULL), once
 * over the buffer to hand them out. */
static void layout(ClTrainDec *d, ClActArena *a)
{
    const ClModelConfig *cfg = d->cfg;
    const int n = d->n, E = d->E, F = d->F, nv = d->n_vis;
    const size_t nE = (size_t)n * E, nF = (size_t)n * F;
    d->x_out = cl_act_take(a, nE), d->proj = cl_act_take(a, nE), d->hn = cl_act_take(a, nE);
    /* (CASA: a window's rows may outnumber the text's) */
    d->scratch =
        cl_act_take(a, d->be->ops->attention_scratch(d->be, n, MAX(n, d->casa ? nv : 0), d->Hq));
    d->wtmp = cl_act_take(a, MAX((size_t)MAX(d->QKV, 2 * F) * E,
                                 cfg->pvm_n_layers ? (size_t)2 * cfg->pvm_mlp * cfg->pvm_rank : 0));
    d->rope_cos = cl_act_take(a, (size_t)n * d->hd / 2);
    d->rope_sin = cl_act_take(a, (size_t)n * d->hd / 2);
    d->hk = d->rows ? cl_act_take(a, (size_t)MAX(d->n_rows, 1) * E) : d->hn;
    if (cfg->pvm_n_layers && nv > 0) {
        d->pp = cl_act_take(a, nE), d->ones = cl_act_take(a, E);
        for (int slot = 0; slot < cfg->pvm_n_layers; slot++)
            cl_dec_train_pvm_layout(d, &d->pvm[slot], a);
    }
    if (d->casa && cfg->casa_tv && nv > 0)
        d->cgk = cl_act_take(a, (size_t)(nv + n) * d->KV),
        d->cgv = cl_act_take(a, (size_t)(nv + n) * d->KV);
    for (int l = 0; l < cfg->dec_depth; l++) {
        ClTrainLayerAct *la = &d->layer[l];
        la->x_in = cl_act_take(a, nE), la->h1 = cl_act_take(a, nE);
        la->x_mid = cl_act_take(a, nE), la->h2 = cl_act_take(a, nE);
        la->gu = cl_act_take(a, 2 * nF), la->act = cl_act_take(a, nF);
        if (la->gdn) {
            cl_dec_train_gdn_layout(d, &la->g, a);
            continue;
        }
        if (!la->ca_only) {
            la->qkv = cl_act_take(a, (size_t)n * d->QKV);
            la->att = cl_act_take(a, (size_t)n * d->Q);
            la->probs = d->keep_probs ? cl_act_take(a, (size_t)d->Hq * n * n) : NULL;
        }
        if (d->casa && nv > 0)
            cl_dec_train_casa_layout(d, &la->casa, a);
    }
}

/* The layer's self-attention: q, k, v one stacked product with RoPE over every row; x +=
 * o(Attn) at rows [s, n). FALSE: nothing past the keys and values (s == n). */
static gboolean self_attention(ClTrainDec *d, const ClDecoderLayerWeights *L, ClTrainLayerAct *a,
                               float *x, int s)
{
    ClBackend *be = d->be;
    const struct cl_backend_ops *op = be->ops;
    const int n = d->n, E = d->E, Q = d->Q, KV = d->KV, QKV = d->QKV, hd = d->hd, m = n - s;
    op->linear(be, a->qkv, a->h1, cl_grad_stacked(be, L->q, Q, L->k, KV, L->v, KV, E, d->wtmp),
               NULL, n, E, QKV);
    float *q = a->qkv, *k = a->qkv + Q, *v = a->qkv + Q + KV;
    op->rope(be, q, d->rope_cos, d->rope_sin, n, QKV, d->Hq, hd, 1);
    op->rope(be, k, d->rope_cos, d->rope_sin, n, QKV, d->Hkv, hd, 1);
    if (m == 0)
        return FALSE;
    /* queries from position s see keys [0, s + i]: the causal offset is s */
    if (a->probs)
        op->train->attention_keep(be, a->att + (size_t)s * Q, a->probs, q + (size_t)s * QKV, k, v,
                                  m, n, QKV, QKV, QKV, Q, d->Hq, d->Hkv, hd, d->scale, s);
    else
        op->attention(be, a->att + (size_t)s * Q, NULL, q + (size_t)s * QKV, k, v, m, n, QKV, QKV,
                      QKV, Q, d->Hq, d->Hkv, hd, d->scale, s, 0, d->scratch);
    op->linear(be, d->proj, a->att + (size_t)s * Q, L->o, NULL, m, Q, E);
    op->residual(be, x + (size_t)s * E, d->proj, NULL, m, E);
    return TRUE;
}

/* Layer l over the stream x: its output rows [s, n) (all but the last layer: every row). */
static void layer_forward(ClTrainDec *d, const ClDecoderLayerWeights *L, int l, float *x, int s)
{
    ClBackend *be = d->be;
    const struct cl_backend_ops *op = be->ops;
    ClTrainLayerAct *a = &d->layer[l];
    const int n = d->n, E = d->E, F = d->F, m = n - s;
    const size_t nE = (size_t)n * E, sE = (size_t)s * E, sF = (size_t)s * F;
    cl_train_copy(be, a->x_in, x, nE);
    op->rmsnorm(be, a->h1, x, L->attn_norm, n, E, d->eps);
    if (a->gdn) { /* a Gated DeltaNet layer in place of the attention */
        if (m == 0)
            return;
        cl_dec_train_gdn_forward(d, L, a, x, s);
    } else if (a->ca_only) { /* CASA's CA^#: x += CA(h1, window) alone */
        if (m == 0)
            return;
        if (d->n_vis > 0)
            cl_dec_train_casa_forward(d, L, a, x, s);
    } else {
        if (!self_attention(d, L, a, x, s))
            return;
        if (d->casa && d->n_vis > 0)
            cl_dec_train_casa_forward(d, L, a, x, s);
    }
    cl_train_copy(be, a->x_mid + sE, x + sE, (size_t)m * E);
    op->rmsnorm(be, a->h2 + sE, x + sE, L->mlp_norm, m, E, d->eps);
    op->linear(be, a->gu + 2 * sF, a->h2 + sE,
               cl_grad_stacked(be, L->gate, F, L->up, F, NULL, 0, E, d->wtmp), NULL, m, E, 2 * F);
    for (int i = s; i < n; i++) {
        const float *gi = a->gu + (size_t)i * 2 * F;
        op->silu_mul(be, a->act + (size_t)i * F, gi, gi + F, F);
    }
    op->linear(be, d->proj, a->act + sF, L->down, NULL, m, F, E);
    op->residual(be, x + sE, d->proj, NULL, m, E);
    /* PVM beside the FFN, from the same h (x_mid): x = h + FFN(h) + P(h) */
    const int slot = cl_config_pvm_slot(d->cfg, l);
    if (slot >= 0 && d->n_vis > 0) {
        a->pvm = &d->pvm[slot];
        cl_dec_train_pvm_forward(d, L, a->pvm, a->x_mid, x, s);
    }
}

static ClTrainDec *out_of_memory(ClTrainDec *d, int n, GError **error)
{
    cl_train_dec_free(d);
    g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                "Not enough memory for the decoder's training activations (%d positions)", n);
    return NULL;
}

ClTrainDec *cl_train_dec_forward(ClBackend *be, const ClModel *model, const gint32 *ids, int n,
                                 const float *visual, const int *rows, int n_rows, float *logits,
                                 GError **error)
{
    const ClModelConfig *cfg = &model->config;
    const ClModelWeights *w = &model->w;
    const struct cl_backend_ops *op = be->ops;
    ClTrainDec *d = g_new0(ClTrainDec, 1);
    d->be = be, d->cfg = cfg;
    /* CASA: the text rows alone, each with its window; logit rows renumbered to text rows
     * (every row: logits scattered back, visual rows' zero, as inference gives them) */
    const int n_full = n;
    g_autofree int *trows = NULL;
    g_autofree int *full2text = NULL;
    if (cfg->casa != CL_CASA_OFF) {
        full2text = g_new(int, MAX(n, 1));
        if (!cl_dec_train_casa_rows(d, &ids, &n, &rows, n_rows, full2text, &trows, error)) {
            cl_train_dec_free(d);
            return NULL;
        }
    }
    const gboolean scatter = d->casa && !rows;
    if (!op->host_memory &&
        (cfg->casa != CL_CASA_OFF || cfg->pvm_n_layers > 0 || cfg->hybrid_every > 0)) {
        cl_train_dec_free(d);
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "The decoder options (PVM, CASA, the Gated DeltaNet hybrid) train on the CPU "
                    "only, not on %s",
                    op->name);
        return NULL;
    }
    setup(d, ids, n, visual, rows, n_rows);
    ClActArena a = { NULL, 0 };
    layout(d, &a);
    if (!(d->buf = cl_train_take(be, a.used, &d->buf_n)))
        return out_of_memory(d, n, error);
    a = (ClActArena){ d->buf, 0 };
    layout(d, &a);

    const int E = d->E;
    float *x = d->x_out;
    op->embed(be, x, w->embed, ids, n, E);
    for (int i = 0, row = 0; i < n; i++)
        if (ids[i] == CL_DECODER_VISUAL)
            cl_train_copy(be, x + (size_t)i * E, visual + (size_t)row++ * E, (size_t)E);
    /* the tables are made on the host */
    const size_t half = (size_t)n * d->hd / 2;
    g_autofree float *rope = g_new(float, MAX(2 * half, 1));
    cl_rope_table_1d(rope, rope + half, 0, n, d->hd, cfg->rope_base);
    op->upload(be, d->rope_cos, rope, half * sizeof(float));
    op->upload(be, d->rope_sin, rope + half, half * sizeof(float));
    if (d->ones) {
        g_autofree float *ones = g_new(float, E);
        for (int i = 0; i < E; i++)
            ones[i] = 1.0f;
        op->upload(be, d->ones, ones, (size_t)E * sizeof(float));
    }
    for (int l = 0; l < cfg->dec_depth; l++)
        layer_forward(d, &w->dec[l], l, x, l == cfg->dec_depth - 1 ? d->tail : 0);

    const size_t tE = (size_t)d->tail * E;
    const float *lm_head = w->lm_head ? w->lm_head : w->embed;
    if (d->tail < n)
        op->rmsnorm(be, d->hn + tE, x + tE, w->dec_norm, n - d->tail, E, d->eps);
    for (int r = 0; rows && r < n_rows; r++)
        cl_train_copy(be, d->hk + (size_t)r * E, d->hn + (size_t)rows[r] * E, (size_t)E);
    if (d->n_rows > 0 && !scatter)
        op->linear(be, logits, d->hk, lm_head, NULL, d->n_rows, E, d->V);
    if (scatter && !cl_dec_train_casa_logits(d, lm_head, full2text, n_full, logits))
        return out_of_memory(d, n, error);
    return d;
}

/* The backward's buffers: dx the gradient at the stream, the rest scratch (PVM's and CASA's
 * visual rows' gradients summed over the layers). */
typedef struct {
    float *dx, *dh, *dact, *dgu, *datt, *dqkv, *gtmp;
    float *dvis_pvm, *dh_pvm, *dvis_casa, *dh_casa;
} Back;

/* Layer l's backward: b->dx from the layer's output's gradient to its input's. */
static void layer_backward(const ClTrainDec *d, const ClDecoderLayerWeights *L,
                           ClDecoderLayerWeights *G, const ClTrainLayerAct *a, int l, Back *b)
{
    const int n = d->n, E = d->E, F = d->F, Q = d->Q, KV = d->KV, QKV = d->QKV, hd = d->hd;
    const size_t nE = (size_t)n * E, nF = (size_t)n * F;
    float *dx = b->dx, *dh = b->dh, *dact = b->dact, *dgu = b->dgu, *datt = b->datt;
    float *dqkv = b->dqkv, *wtmp = d->wtmp, *gtmp = b->gtmp, *dh_pvm = b->dh_pvm;
    float *dh_casa = b->dh_casa;
    ClBackend *be = d->be;
    const struct cl_backend_train_ops *T = be->ops->train;
    /* the rows the forward ran past the keys and values: [s, n) (see tail) */
    const int s = l == d->cfg->dec_depth - 1 ? d->tail : 0, m = n - s;
    const size_t sE = (size_t)s * E, sF = (size_t)s * F;
    cl_train_zero(be, dqkv, (size_t)n * QKV);
    /* PVM beside the FFN reads the same dx (the layer output's gradient) */
    if (a->pvm && m > 0) {
        cl_train_zero(be, dh_pvm, nE);
        cl_dec_train_pvm_backward(d, L, G, a->pvm, a->x_mid, dx, s, dh_pvm, b->dvis_pvm, wtmp,
                                  gtmp);
    }
    if (m > 0) {
        /* MLP: x += down(SiLU(gate) ⊙ up), gate and up one stacked product */
        cl_train_zero(be, dact, nF);
        T->linear(be, dact + sF, G->down, NULL, dx + sE, a->act + sF, L->down, m, F, E);
        cl_train_zero(be, dgu, 2 * nF);
        for (int i = s; i < n; i++) {
            const float *gi = a->gu + (size_t)i * 2 * F;
            float *dgi = dgu + (size_t)i * 2 * F;
            T->silu_mul(be, dgi, dgi + F, dact + (size_t)i * F, gi, gi + F, F);
        }
        cl_train_zero(be, dh, nE);
        float *ggu = cl_grad_stacked_grad(be, G->gate, F, G->up, F, NULL, 0, E, gtmp);
        T->linear(be, dh + sE, ggu, NULL, dgu + 2 * sF, a->h2 + sE,
                  cl_grad_stacked(be, L->gate, F, L->up, F, NULL, 0, E, wtmp), m, E, 2 * F);
        cl_grad_unstack(be, ggu, G->gate, F, G->up, F, NULL, 0, E);
        T->rmsnorm(be, dx + sE, G->mlp_norm, dh + sE, a->x_mid + sE, L->mlp_norm, m, E, d->eps);
        if (a->pvm)
            be->ops->add(be, dx + sE, dx + sE, dh_pvm + sE, nE - sE);
        if (a->gdn) { /* a Gated DeltaNet layer in place of the attention */
            cl_dec_train_gdn_backward(d, L, G, a, dx, s);
            return;
        }
        if (a->ca_only) { /* CA^#: the cross-attention's gradient through attn_norm */
            if (dh_casa) {
                cl_train_zero(be, dh_casa, nE);
                cl_dec_train_casa_backward(d, L, G, a, dx, s, dh_casa, b->dvis_casa);
                T->rmsnorm(be, dx, G->attn_norm, dh_casa, a->x_in, L->attn_norm, n, E, d->eps);
            }
            return;
        }
        /* attention: x += o(Attn(rope(q), rope(k), v)), q, k and v one stacked product */
        cl_train_zero(be, datt, (size_t)n * Q);
        T->linear(be, datt + (size_t)s * Q, G->o, NULL, dx + sE, a->att + (size_t)s * Q, L->o, m, Q,
                  E);
        T->attention_probs(be, dqkv + (size_t)s * QKV, dqkv + Q, dqkv + Q + KV,
                           datt + (size_t)s * Q, a->qkv + (size_t)s * QKV, a->qkv + Q,
                           a->qkv + Q + KV, a->probs, m, n, QKV, QKV, QKV, Q, d->Hq, d->Hkv, hd,
                           d->scale, s);
        if (dh_casa) { /* CA beside the self-attention reads the same dx */
            cl_train_zero(be, dh_casa, nE);
            cl_dec_train_casa_backward(d, L, G, a, dx, s, dh_casa, b->dvis_casa);
        }
    }
    if (a->gdn || a->ca_only) /* m == 0: the forward ran nothing */
        return;
    T->rope(be, dqkv, d->rope_cos, d->rope_sin, n, QKV, d->Hq, hd, 1);
    T->rope(be, dqkv + Q, d->rope_cos, d->rope_sin, n, QKV, d->Hkv, hd, 1);
    cl_train_zero(be, dh, nE);
    float *gqkv = cl_grad_stacked_grad(be, G->q, Q, G->k, KV, G->v, KV, E, gtmp);
    T->linear(be, dh, gqkv, NULL, dqkv, a->h1,
              cl_grad_stacked(be, L->q, Q, L->k, KV, L->v, KV, E, wtmp), n, E, QKV);
    cl_grad_unstack(be, gqkv, G->q, Q, G->k, KV, G->v, KV, E);
    if (dh_casa && m > 0) /* (CA_{t+v}: rows before s feed its text keys too) */
        be->ops->add(be, dh, dh, dh_casa, nE);
    T->rmsnorm(be, dx, G->attn_norm, dh, a->x_in, L->attn_norm, n, E, d->eps);
}

void cl_train_dec_backward(ClTrainDec *d, const ClModelWeights *w, const float *dlogits,
                           float *dvisual, ClModelWeights *g)
{
    const int n = d->n, E = d->E, F = d->F, QKV = d->QKV;
    const size_t nE = (size_t)n * E, nF = (size_t)n * F;
    const size_t tmp_n =
        MAX((size_t)MAX(QKV, 2 * F) * E,
            d->cfg->pvm_n_layers ? (size_t)2 * d->cfg->pvm_mlp * d->cfg->pvm_rank : 0);
    ClBackend *be = d->be;
    const struct cl_backend_train_ops *T = be->ops->train;
    Back b = { 0 };
    b.dx = cl_train_scratch0(be, nE), b.dh = cl_train_scratch(be, nE);
    b.dact = cl_train_scratch(be, nF), b.dgu = cl_train_scratch(be, 2 * nF);
    b.datt = cl_train_scratch(be, (size_t)n * d->Q);
    b.dqkv = cl_train_scratch(be, (size_t)n * QKV);
    /* (the stacked weights go through the forward's d->wtmp) */
    b.gtmp = cl_train_scratch(be, tmp_n);
    /* PVM: the gradient at the visual rows through the branches' keys and values */
    if (d->n_vis && d->cfg->pvm_n_layers)
        b.dvis_pvm = cl_train_scratch0(be, (size_t)d->n_vis * E);
    if (d->cfg->pvm_n_layers)
        b.dh_pvm = cl_train_scratch(be, nE);
    /* CASA: the visual rows' gradient through every layer's window keys and values */
    if (d->casa && d->n_vis)
        b.dvis_casa = cl_train_scratch0(be, (size_t)d->n_vis * E),
        b.dh_casa = cl_train_scratch(be, nE);
    float *dx = b.dx, *dh = b.dh;

    /* logits = RMSNorm(x) lm_head^T at the logit rows (tied: the gradient lands in the
     * embedding); the other positions get no gradient from the head */
    cl_train_zero(be, dh, nE);
    if (d->rows) {
        float *dhk = cl_train_scratch0(be, (size_t)MAX(d->n_rows, 1) * E);
        if (d->n_rows > 0)
            T->linear(be, dhk, g->lm_head ? g->lm_head : g->embed, NULL, dlogits, d->hk,
                      w->lm_head ? w->lm_head : w->embed, d->n_rows, E, d->V);
        for (int r = 0; r < d->n_rows; r++)
            cl_train_copy(be, dh + (size_t)d->rows[r] * E, dhk + (size_t)r * E, (size_t)E);
        cl_train_scratch_free(be, dhk);
    } else {
        T->linear(be, dh, g->lm_head ? g->lm_head : g->embed, NULL, dlogits, d->hn,
                  w->lm_head ? w->lm_head : w->embed, n, E, d->V);
    }
    const size_t tE = (size_t)d->tail * E;
    if (d->tail < n)
        T->rmsnorm(be, dx + tE, g->dec_norm, dh + tE, d->x_out + tE, w->dec_norm, n - d->tail, E,
                   d->eps);
    for (int l = d->cfg->dec_depth - 1; l >= 0; l--)
        layer_backward(d, &w->dec[l], &g->dec[l], &d->layer[l], l, &b);

    /* the inputs: token rows into the embedding, visual rows out in order */
    T->embed(be, g->embed, dx, d->ids, n, E);
    for (int i = 0, row = 0; i < n; i++)
        if (d->ids[i] == CL_DECODER_VISUAL && dvisual) {
            float *dv = dvisual + (size_t)row * E;
            cl_train_copy(be, dv, dx + (size_t)i * E, (size_t)E);
            if (b.dvis_pvm)
                be->ops->add(be, dv, dv, b.dvis_pvm + (size_t)row * E, (size_t)E);
            row++;
        }
    if (b.dvis_casa && dvisual) /* CASA: no visual row is in the sequence */
        cl_train_copy(be, dvisual, b.dvis_casa, (size_t)d->n_vis * E);
    float *const bufs[] = { b.dvis_pvm, b.dh_pvm, b.dvis_casa, b.dh_casa, b.dx,  b.dh,
                            b.dact,     b.dgu,    b.datt,      b.dqkv,    b.gtmp };
    for (size_t i = 0; i < G_N_ELEMENTS(bufs); i++)
        cl_train_scratch_free(be, bufs[i]);
}

gboolean cl_train_dec_attention(const ClTrainDec *d, int layer, int q0, float *out)
{
    if (d->casa) /* its rows are the text's alone: no map onto the full sequence's positions */
        return FALSE;
    const int L = d->cfg->dec_depth, n = d->n;
    if (layer < 0)
        layer += L;
    if (layer < 0 || layer >= L || q0 < 0 || q0 > n)
        return FALSE;
    const ClTrainLayerAct *a = &d->layer[layer];
    if (a->gdn || a->ca_only || !d->be->ops->host_memory) /* (no map: GDN, CA^#, a device) */
        return FALSE;
    memset(out, 0, sizeof(float) * (size_t)(n - q0) * n);
    cl_dec_attention_map(out, n, a->qkv + (size_t)q0 * d->QKV, d->QKV, a->qkv + d->Q, d->QKV,
                         n - q0, q0, d->Hq, d->Hkv, d->hd, d->scale);
    return TRUE;
}
