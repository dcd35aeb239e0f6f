/* trainmodel-dec.c - the decoder's training forward over a whole sequence (the backend's ops in
 * decoder.c's order, one chunk, no cache) with its activations kept per layer, and its backward
 * (docs/MODEL.md §4). */
#include "train/trainmodel.h"

#include <math.h>
#include <string.h>

#include "model/decoder.h"
#include "model/gdn.h"
#include "nn/grad.h"

/* qkv: (n, Q + 2 KV) rows [q | k | v], one product with the layer's q, k and v weights
 * stacked (they are consecutive in a trainable model); gu: (n, 2 F) rows [gate | up], likewise.
 * Fewer, wider products: the activation is packed once instead of three times. */
/* PVM's activations in a PVM layer (rows [s, n) of the text queries; nv visual rows):
 * zv = Vimg W_v^T, kp = zv W_k^T, kn = RMSNorm_head(kp), vv = zv W_vv^T; zt = h W_t^T,
 * zq = RMSNorm_a(zt), qp = zq W_q^T, qn = RMSNorm_head(qp), att = Attn(qn; kn, vv), mo = att W_o^T,
 * nb = RMSNorm_b(mo), gu = nb [gate|up]^T, act = SiLU(gate) ⊙ up, m2 = mo + act W_down^T,
 * y = m2 W_up^T, u = RMSNorm0(y); P = α u at text rows. */
typedef struct {
    float *zv, *kp, *kn, *vv;                 /* (nv, r), (nv, hp) ×3 */
    float *zt, *zq, *qp, *qn, *att, *mo, *nb; /* (n, r) */
    float *gu, *act;                          /* (n, 2 Fp), (n, Fp) */
    float *m2;                                /* (n, r) */
    float *y, *u;                             /* (n, E) */
    float *probs;                             /* (H, n, nv) */
} PvmAct;

/* CASA's activations in a layer: ny = RMSNorm(Vimg; casa.norm) (nv, E), kc/vc its keys and
 * values (nv, KV), qc = h1 W_qc^T (n, Q), attc the cross-attention per window (n, Q; 0 at rows
 * without a window). */
typedef struct {
    float *ny, *kc, *vc, *qc, *attc;
    /* CA_{t+v}: kr the visual keys with RoPE at their window's first text position (nv, KV),
     * kt/vt every text row's keys (with RoPE) and values (n, KV); qc then holds roped queries */
    float *kr, *kt, *vt;
} CasaAct;

/* A Gated DeltaNet layer's activations (decoder.c's gdn_layer, docs/MODEL.md §4.5), over every
 * row (the state runs through all of them): zq, zk (n, H·dk), zv, zg (n, H·dv), za, zb (n, H)
 * the products of h1; cq, ck, cv the causal convolutions' outputs and sq, sk, sv after SiLU;
 * nq, nk the rows made unit per head (nq also /√dk); gd the log-decay, bt beta (n, H); o the
 * delta rule's output, on its RMSNorm per head, y = SiLU(zg) ⊙ on (n, H·dv). */
typedef struct {
    float *zq, *zk, *zv, *zg, *za, *zb;
    float *cq, *ck, *cv, *sq, *sk, *sv, *nq, *nk;
    float *gd, *bt, *o, *on, *y;
} GdnAct;

typedef struct {
    float *x_in, *h1, *qkv, *att, *x_mid, *h2, *gu, *act;
    gboolean gdn; /* a Gated DeltaNet layer in place of the attention (qkv, att, probs NULL) */
    gboolean ca_only; /* CASA's CA^#: the cross-attention alone (qkv, att, probs NULL) */
    GdnAct g;
    float *probs; /* (Hq, n, n) attention probabilities, or NULL: the backward recomputes them */
    PvmAct *pvm;  /* PVM layers with visual rows, else NULL */
    CasaAct casa; /* CASA models with visual rows */
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
    const float *visual; /* (n_vis, E) the visual rows (PVM's Vimg) */
    float *ones;         /* (E) RMSNorm0's unit gain */
    int n_vis;
    PvmAct *pvm;       /* one per PVM layer */
    /* CASA: the text rows alone go through the layers (ids/n are theirs); text row t reads the
     * window of visual rows [win0[t], win0[t] + winn[t]) (winn 0: no window yet) */
    gboolean casa;
    gint32 *tids;
    int *win0, *winn;
    /* CA_{t+v}: each text row's window's first text row; the visual rows' RoPE tables (at that
     * row's position, nv × hd/2) */
    int *wstart;
    float *img_cos, *img_sin;
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

/* PVM's branch in the training forward for rows [s, n) of h (docs/MODEL.md §4.2): keeps its
 * activations in p and adds P into x (rows [s, n)), nothing at visual rows. */
static gboolean pvm_forward(ClTrainDec *d, const ClDecoderLayerWeights *L, PvmAct *p,
                            const float *h, float *x, int s, float *wtmp)
{
    ClBackend *be = d->be;
    const struct cl_backend_ops *op = be->ops;
    const ClModelConfig *cfg = d->cfg;
    const int n = d->n, E = d->E, nv = d->n_vis, m = n - s;
    const int r = cfg->pvm_rank, H = cfg->pvm_heads, hp = r / H, Fp = cfg->pvm_mlp;
    const size_t nr = (size_t)n * r, sr = (size_t)s * r, sE = (size_t)s * E;
    p->zv = alloc(d, (size_t)nv * r), p->kp = alloc(d, (size_t)nv * hp);
    p->kn = alloc(d, (size_t)nv * hp), p->vv = alloc(d, (size_t)nv * hp);
    p->zt = alloc(d, nr), p->zq = alloc(d, nr), p->qp = alloc(d, nr), p->qn = alloc(d, nr);
    p->att = alloc(d, nr), p->mo = alloc(d, nr), p->nb = alloc(d, nr), p->m2 = alloc(d, nr);
    p->gu = alloc(d, (size_t)n * 2 * Fp), p->act = alloc(d, (size_t)n * Fp);
    p->y = alloc(d, (size_t)n * E), p->u = alloc(d, (size_t)n * E);
    p->probs = alloc(d, (size_t)H * n * nv);
    float *pp = alloc(d, (size_t)n * E);
    if (!d->ones && (d->ones = alloc(d, E)))
        for (int i = 0; i < E; i++)
            d->ones[i] = 1.0f;
    if (d->failed)
        return FALSE;
    const float eps = d->eps;
    op->linear(be, p->zv, d->visual, L->pvm_v, NULL, nv, E, r);
    op->linear(be, p->kp, p->zv, L->pvm_k, NULL, nv, r, hp);
    op->rmsnorm(be, p->kn, p->kp, L->pvm_k_norm, nv, hp, eps);
    op->linear(be, p->vv, p->zv, L->pvm_vv, NULL, nv, r, hp);
    op->linear(be, p->zt + sr, h + sE, L->pvm_t, NULL, m, E, r);
    op->rmsnorm(be, p->zq + sr, p->zt + sr, L->pvm_norm_a, m, r, eps);
    op->linear(be, p->qp + sr, p->zq + sr, L->pvm_q, NULL, m, r, r);
    op->rmsnorm(be, p->qn + sr, p->qp + sr, L->pvm_q_norm, m * H, hp, eps);
    cl_train_attention(p->att + sr, p->probs, p->qn + sr, p->kn, p->vv, m, nv, r, hp, hp, r, H,
                       1, hp, (float)(1.0 / sqrt((double)hp)), -1);
    op->linear(be, p->mo + sr, p->att + sr, L->pvm_o, NULL, m, r, r);
    op->rmsnorm(be, p->nb + sr, p->mo + sr, L->pvm_norm_b, m, r, eps);
    op->linear(be, p->gu + (size_t)s * 2 * Fp, p->nb + sr,
               stacked(L->pvm_gate, Fp, L->pvm_up, Fp, NULL, 0, r, wtmp), NULL, m, r, 2 * Fp);
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
    return TRUE;
}

/* CASA in the training forward, after the layer's self-attention residual: x += CA(h1, window)
 * at the text rows [s, n) that have a window, in inference's order. */
static gboolean casa_forward(ClTrainDec *d, const ClDecoderLayerWeights *L, LayerAct *a,
                             float *x, int s, float *proj, float *scratch)
{
    ClBackend *be = d->be;
    const struct cl_backend_ops *op = be->ops;
    const int n = d->n, E = d->E, Q = d->Q, KV = d->KV, nv = d->n_vis, m = n - s;
    const gboolean own = d->cfg->casa == CL_CASA_CA;
    CasaAct *c = &a->casa;
    c->ny = alloc(d, (size_t)nv * E), c->kc = alloc(d, (size_t)nv * KV);
    c->vc = alloc(d, (size_t)nv * KV), c->qc = alloc(d, (size_t)n * Q);
    c->attc = alloc(d, (size_t)n * Q);
    if (d->failed)
        return FALSE;
    memset(c->attc, 0, sizeof(float) * (size_t)n * Q);
    op->rmsnorm(be, c->ny, d->visual, L->casa_norm, nv, E, d->eps);
    op->linear(be, c->kc, c->ny, own ? L->casa_k : L->k, NULL, nv, E, KV);
    op->linear(be, c->vc, c->ny, own ? L->casa_v : L->v, NULL, nv, E, KV);
    op->linear(be, c->qc + (size_t)s * Q, a->h1 + (size_t)s * E, own ? L->casa_q : L->q, NULL, m,
               E, Q);
    const gboolean tv = d->cfg->casa_tv;
    float *gk = NULL, *gv = NULL;
    if (tv) { /* CA_{t+v}: every text row's keys and values, and RoPE on them all */
        c->kr = alloc(d, (size_t)nv * KV), c->kt = alloc(d, (size_t)n * KV);
        c->vt = alloc(d, (size_t)n * KV);
        gk = alloc(d, (size_t)(nv + n) * KV), gv = alloc(d, (size_t)(nv + n) * KV);
        if (d->failed)
            return FALSE;
        memcpy(c->kr, c->kc, sizeof(float) * (size_t)nv * KV);
        op->rope(be, c->kr, d->img_cos, d->img_sin, nv, KV, d->Hkv, d->hd, 1);
        op->linear(be, c->kt, a->h1, own ? L->casa_k : L->k, NULL, n, E, KV);
        op->linear(be, c->vt, a->h1, own ? L->casa_v : L->v, NULL, n, E, KV);
        op->rope(be, c->kt, d->rope_cos, d->rope_sin, n, KV, d->Hkv, d->hd, 1);
        const size_t half = (size_t)d->hd / 2;
        op->rope(be, c->qc + (size_t)s * Q, d->rope_cos + s * half, d->rope_sin + s * half, m, Q,
                 d->Hq, d->hd, 1);
    }
    /* one window at a time: a run of text rows with the same window */
    for (int t0 = s; t0 < n;) {
        int t1 = t0 + 1;
        while (t1 < n && d->win0[t1] == d->win0[t0] && d->winn[t1] == d->winn[t0])
            t1++;
        if (d->winn[t0] > 0 && tv) {
            /* the window's visual keys, then its text from its first row up to t1, causal */
            const int w0 = d->win0[t0], wn = d->winn[t0], r = t1 - t0, ws = d->wstart[t0];
            const int nk = wn + t1 - ws;
            memcpy(gk, c->kr + (size_t)w0 * KV, sizeof(float) * (size_t)wn * KV);
            memcpy(gv, c->vc + (size_t)w0 * KV, sizeof(float) * (size_t)wn * KV);
            memcpy(gk + (size_t)wn * KV, c->kt + (size_t)ws * KV, sizeof(float) * (t1 - ws) * KV);
            memcpy(gv + (size_t)wn * KV, c->vt + (size_t)ws * KV, sizeof(float) * (t1 - ws) * KV);
            op->attention(be, c->attc + (size_t)t0 * Q, NULL, c->qc + (size_t)t0 * Q, gk, gv, r,
                          nk, Q, KV, KV, Q, d->Hq, d->Hkv, d->hd, d->scale, wn + t0 - ws, 0,
                          scratch);
            op->linear(be, proj, c->attc + (size_t)t0 * Q, own ? L->casa_o : L->o, NULL, r, Q, E);
            op->residual(be, x + (size_t)t0 * E, proj, NULL, r, E);
        } else if (d->winn[t0] > 0) {
            const int w0 = d->win0[t0], wn = d->winn[t0], r = t1 - t0;
            op->attention(be, c->attc + (size_t)t0 * Q, NULL, c->qc + (size_t)t0 * Q,
                          c->kc + (size_t)w0 * KV, c->vc + (size_t)w0 * KV, r, wn, Q, KV, KV, Q,
                          d->Hq, d->Hkv, d->hd, d->scale, -1, 0, scratch);
            op->linear(be, proj, c->attc + (size_t)t0 * Q, own ? L->casa_o : L->o, NULL, r, Q, E);
            op->residual(be, x + (size_t)t0 * E, proj, NULL, r, E);
        }
        t0 = t1;
    }
    return TRUE;
}

/* A Gated DeltaNet layer in the training forward (decoder.c's gdn_layer, the same ops in the same
 * order, the state and the convolutions starting at zero: one sample is one sequence, so no
 * state crosses from one sample into another): from a->h1 over every row, keeping its
 * activations in a->g; x += y W_o^T at rows [s, n). */
static gboolean gdn_forward(ClTrainDec *d, const ClDecoderLayerWeights *L, LayerAct *a, float *x,
                            int s, float *proj)
{
    ClBackend *be = d->be;
    const struct cl_backend_ops *op = be->ops;
    const ClModelConfig *cfg = d->cfg;
    const int n = d->n, E = d->E, H = cfg->gdn_heads, dk = cfg->gdn_dk, dv = cfg->gdn_dv;
    const int K = cfg->gdn_conv, Qk = H * dk, Vv = H * dv;
    const size_t nQ = (size_t)n * Qk, nV = (size_t)n * Vv, nH = (size_t)n * H;
    GdnAct *g = &a->g;
    g->zq = alloc(d, nQ), g->zk = alloc(d, nQ), g->zv = alloc(d, nV), g->zg = alloc(d, nV);
    g->za = alloc(d, nH), g->zb = alloc(d, nH);
    g->cq = alloc(d, nQ), g->ck = alloc(d, nQ), g->cv = alloc(d, nV);
    g->sq = alloc(d, nQ), g->sk = alloc(d, nQ), g->sv = alloc(d, nV);
    g->nq = alloc(d, nQ), g->nk = alloc(d, nQ);
    g->gd = alloc(d, nH), g->bt = alloc(d, nH);
    g->o = alloc(d, nV), g->on = alloc(d, nV), g->y = alloc(d, nV);
    if (d->failed)
        return FALSE;
    op->linear(be, g->zq, a->h1, L->gdn_q, NULL, n, E, Qk);
    op->linear(be, g->zk, a->h1, L->gdn_k, NULL, n, E, Qk);
    op->linear(be, g->zv, a->h1, L->gdn_v, NULL, n, E, Vv);
    op->linear(be, g->zg, a->h1, L->gdn_g, NULL, n, E, Vv);
    op->linear(be, g->za, a->h1, L->gdn_a, NULL, n, E, H);
    op->linear(be, g->zb, a->h1, L->gdn_b, NULL, n, E, H);
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
    /* per head: unit q and k (q scaled), beta, the log-decay (as gdn_layer, in float) */
    memcpy(g->nq, g->sq, nQ * sizeof(float));
    memcpy(g->nk, g->sk, nQ * sizeof(float));
    cl_gdn_gates(g->nq, g->nk, Qk, g->gd, g->za, g->bt, g->zb, L->gdn_A_log, L->gdn_dt_bias, n,
                 H, dk);
    /* the delta rule, head by head, on contiguous copies (the chunked form, as a prefill) */
    float *qh = g_new(float, (size_t)n * dk), *kh = g_new(float, (size_t)n * dk);
    float *vh = g_new(float, (size_t)n * dv), *oh = g_new(float, (size_t)n * dv);
    float *gh = g_new(float, MAX(n, 1)), *bh = g_new(float, MAX(n, 1));
    float *S = g_new(float, (size_t)dk * dv);
    for (int h = 0; h < H; h++) {
        for (int i = 0; i < n; i++) {
            memcpy(qh + (size_t)i * dk, g->nq + (size_t)i * Qk + (size_t)h * dk, dk * sizeof(float));
            memcpy(kh + (size_t)i * dk, g->nk + (size_t)i * Qk + (size_t)h * dk, dk * sizeof(float));
            memcpy(vh + (size_t)i * dv, g->sv + (size_t)i * Vv + (size_t)h * dv, dv * sizeof(float));
            gh[i] = g->gd[(size_t)i * H + h];
            bh[i] = g->bt[(size_t)i * H + h];
        }
        memset(S, 0, sizeof(float) * (size_t)dk * dv);
        if (n == 1)
            cl_gdn_recurrent(oh, S, qh, kh, vh, gh, bh, n, dk, dv);
        else
            cl_gdn_chunked(oh, S, qh, kh, vh, gh, bh, n, dk, dv, 64);
        for (int i = 0; i < n; i++)
            memcpy(g->o + (size_t)i * Vv + (size_t)h * dv, oh + (size_t)i * dv, dv * sizeof(float));
    }
    g_free(qh), g_free(kh), g_free(vh), g_free(oh), g_free(gh), g_free(bh), g_free(S);
    /* the gated output; the projection and residual at the rows read later */
    op->rmsnorm(be, g->on, g->o, L->gdn_o_norm, n * H, dv, d->eps);
    op->silu_mul(be, g->y, g->zg, g->on, nV);
    const int m = n - s;
    if (m > 0) {
        op->linear(be, proj, g->y + (size_t)s * Vv, L->gdn_o, NULL, m, Vv, E);
        op->residual(be, x + (size_t)s * E, proj, NULL, m, E);
    }
    return TRUE;
}

ClTrainDec *cl_train_dec_forward(ClBackend *be, const ClModel *model, const gint32 *ids, int n,
                                 const float *visual, const int *rows, int n_rows, float *logits,
                                 GError **error)
{
    const ClModelConfig *cfg = &model->config;
    const ClModelWeights *w = &model->w;
    const struct cl_backend_ops *op = be->ops;
    ClTrainDec *d = g_new0(ClTrainDec, 1);
    /* CASA: the text rows alone, each with its window; logit rows renumbered to text rows
     * (every row: logits scattered back, visual rows' zero, as inference gives them) */
    const int n_full = n;
    g_autofree int *trows = NULL;
    g_autofree int *full2text = NULL;
    gboolean scatter = FALSE;
    if (cfg->casa != CL_CASA_OFF) {
        d->casa = TRUE;
        d->tids = g_new(gint32, MAX(n, 1));
        d->win0 = g_new(int, MAX(n, 1));
        d->winn = g_new(int, MAX(n, 1));
        full2text = g_new(int, MAX(n, 1));
        int nt = 0, vr = 0, cur0 = 0, curn = 0;
        gboolean open = FALSE;
        for (int i = 0; i < n; i++) {
            full2text[i] = -1;
            if (ids[i] == CL_DECODER_VISUAL) {
                if (!open)
                    cur0 = vr, curn = 0;
                curn++, vr++;
                open = TRUE;
                continue;
            }
            open = FALSE;
            d->tids[nt] = ids[i], d->win0[nt] = cur0, d->winn[nt] = curn;
            full2text[i] = nt++;
        }
        d->n_vis = vr;
        if (rows) {
            trows = g_new(int, MAX(n_rows, 1));
            for (int r = 0; r < n_rows; r++)
                if ((trows[r] = full2text[rows[r]]) < 0) {
                    g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                                "Position %d is a visual row: a CASA decoder gives it no logits",
                                rows[r]);
                    g_free(d->tids), g_free(d->win0), g_free(d->winn), g_free(d);
                    return NULL;
                }
            rows = trows;
        } else {
            scatter = TRUE;
        }
        ids = d->tids;
        n = nt;
        if (cfg->casa_tv) { /* each text row's window's first row; the visual rows' positions */
            d->wstart = g_new(int, MAX(n, 1));
            const size_t half = (size_t)(cfg->dec_dim / cfg->dec_heads) / 2;
            d->img_cos = g_new(float, (size_t)MAX(vr, 1) * half);
            d->img_sin = g_new(float, (size_t)MAX(vr, 1) * half);
            for (int j = 0; j < vr; j++) /* (rows no text follows: unread) */
                cl_rope_table_1d(d->img_cos + j * half, d->img_sin + j * half, 0, 1,
                                 cfg->dec_dim / cfg->dec_heads, cfg->rope_base);
            for (int t = 0; t < n; t++) {
                const gboolean cont =
                    t > 0 && d->win0[t] == d->win0[t - 1] && d->winn[t] == d->winn[t - 1];
                d->wstart[t] = cont ? d->wstart[t - 1] : t;
                if (!cont && d->winn[t] > 0)
                    for (int j = d->win0[t]; j < d->win0[t] + d->winn[t]; j++)
                        cl_rope_table_1d(d->img_cos + j * half, d->img_sin + j * half, t, 1,
                                         cfg->dec_dim / cfg->dec_heads, cfg->rope_base);
            }
        }
    }
    d->be = be, d->cfg = cfg, d->n = n, d->ids = ids;
    d->E = cfg->dec_dim, d->F = cfg->dec_mlp, d->Hq = cfg->dec_heads, d->Hkv = cfg->dec_kv_heads;
    d->hd = d->E / d->Hq, d->Q = d->Hq * d->hd, d->KV = d->Hkv * d->hd, d->V = cfg->vocab_size;
    d->QKV = d->Q + 2 * d->KV;
    d->eps = (float)cfg->norm_eps;
    d->scale = (float)(1.0 / sqrt((double)d->hd));
    d->bufs = g_ptr_array_new_with_free_func(g_free);
    d->layer = g_new0(LayerAct, cfg->dec_depth);
    d->visual = visual;
    if (!d->casa)
        for (int i = 0; i < n; i++)
            d->n_vis += ids[i] == CL_DECODER_VISUAL;
    d->pvm = g_new0(PvmAct, MAX(cfg->pvm_n_layers, 1));
    const int E = d->E, F = d->F, Q = d->Q, KV = d->KV, QKV = d->QKV, hd = d->hd;
    const size_t nE = (size_t)n * E, nF = (size_t)n * F;
    int n_attn = 0; /* the attention layers (the hybrid's GDN layers keep no probabilities) */
    for (int l = 0; l < cfg->dec_depth; l++)
        n_attn += !cl_config_is_gdn(cfg, l) && !cl_config_casa_replaced(cfg, l);
    const gboolean keep_probs =
        (size_t)d->Hq * n * n * sizeof(float) * n_attn <= KEEP_PROBS_BYTES;

    float *x = alloc(d, nE), *proj = alloc(d, nE);
    /* (CASA: a window's rows may outnumber the text's) */
    float *scratch = alloc(d, op->attention_scratch(be, n, MAX(n, d->casa ? d->n_vis : 0), d->Hq));
    float *wtmp = alloc(d, MAX((size_t)MAX(QKV, 2 * F) * E,
                               cfg->pvm_n_layers ? (size_t)2 * cfg->pvm_mlp * cfg->pvm_rank : 0));
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
        a->gdn = cl_config_is_gdn(cfg, l);
        a->ca_only = cl_config_casa_replaced(cfg, l);
        a->x_in = alloc(d, nE), a->h1 = alloc(d, nE);
        a->x_mid = alloc(d, nE), a->h2 = alloc(d, nE);
        a->gu = alloc(d, 2 * nF), a->act = alloc(d, nF);
        if (!a->gdn && !a->ca_only) {
            a->qkv = alloc(d, (size_t)n * QKV), a->att = alloc(d, (size_t)n * Q);
            if (keep_probs)
                a->probs = alloc(d, (size_t)d->Hq * n * n);
        }
        if (d->failed)
            goto oom;
        memcpy(a->x_in, x, nE * sizeof(float));
        op->rmsnorm(be, a->h1, x, L->attn_norm, n, E, d->eps);
        if (a->gdn) { /* a Gated DeltaNet layer in place of the attention */
            if (m == 0)
                continue;
            if (!gdn_forward(d, L, a, x, s, proj))
                goto oom;
        } else if (a->ca_only) { /* CASA's CA^#: x += CA(h1, window) alone */
            if (m == 0)
                continue;
            if (d->n_vis > 0 && !casa_forward(d, L, a, x, s, proj, scratch))
                goto oom;
        } else {
            op->linear(be, a->qkv, a->h1, stacked(L->q, Q, L->k, KV, L->v, KV, E, wtmp), NULL, n,
                       E, QKV);
            float *q = a->qkv, *k = a->qkv + Q, *v = a->qkv + Q + KV;
            op->rope(be, q, d->rope_cos, d->rope_sin, n, QKV, d->Hq, hd, 1);
            op->rope(be, k, d->rope_cos, d->rope_sin, n, QKV, d->Hkv, hd, 1);
            if (m == 0)
                continue;
            /* queries from position s see keys [0, s + i]: the causal offset is s */
            if (a->probs)
                cl_train_attention(a->att + (size_t)s * Q, a->probs, q + (size_t)s * QKV, k, v,
                                   m, n, QKV, QKV, QKV, Q, d->Hq, d->Hkv, hd, d->scale, s);
            else
                op->attention(be, a->att + (size_t)s * Q, NULL, q + (size_t)s * QKV, k, v, m, n,
                              QKV, QKV, QKV, Q, d->Hq, d->Hkv, hd, d->scale, s, 0, scratch);
            op->linear(be, proj, a->att + (size_t)s * Q, L->o, NULL, m, Q, E);
            op->residual(be, x + sE, proj, NULL, m, E);
            if (d->casa && d->n_vis > 0 && !casa_forward(d, L, a, x, s, proj, scratch))
                goto oom;
        }
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
        /* PVM beside the FFN, from the same h (x_mid): x = h + FFN(h) + P(h) */
        const int slot = cl_config_pvm_slot(cfg, l);
        if (slot >= 0 && d->n_vis > 0) {
            a->pvm = &d->pvm[slot];
            if (!pvm_forward(d, L, a->pvm, a->x_mid, x, s, wtmp))
                goto oom;
        }
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
    if (d->n_rows > 0 && !scatter)
        op->linear(be, logits, d->hk, w->lm_head ? w->lm_head : w->embed, NULL, d->n_rows, E,
                   d->V);
    if (scatter) { /* CASA, every row: the text rows' logits in place, zeros at visual rows */
        float *tl = alloc(d, (size_t)MAX(n, 1) * d->V);
        if (d->failed)
            goto oom;
        if (n > 0)
            op->linear(be, tl, d->hk, w->lm_head ? w->lm_head : w->embed, NULL, n, E, d->V);
        for (int i = 0; i < n_full; i++) {
            float *dst = logits + (size_t)i * d->V;
            if (full2text[i] < 0)
                memset(dst, 0, sizeof(float) * (size_t)d->V);
            else
                memcpy(dst, tl + (size_t)full2text[i] * d->V, sizeof(float) * (size_t)d->V);
        }
        g_ptr_array_remove_fast(d->bufs, tl);
    }
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

/* PVM's backward for a layer: dx is the gradient at the layer's output (the branch adds P to
 * it); the gradient at h goes into dh (rows [s, n)), at the visual rows into dvis (n_vis, E),
 * and the weights' into G. */
static void pvm_backward(const ClTrainDec *d, const ClDecoderLayerWeights *L,
                         ClDecoderLayerWeights *G, const PvmAct *p, const float *h,
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
    float *ggu = stacked_grad(G->pvm_gate, Fp, G->pvm_up, Fp, NULL, 0, r, gtmp);
    cl_grad_linear(dnb + sr, ggu, NULL, dgu + (size_t)s * 2 * Fp, p->nb + sr,
                   stacked(L->pvm_gate, Fp, L->pvm_up, Fp, NULL, 0, r, wtmp), m, r, 2 * Fp);
    unstack_grad(ggu, G->pvm_gate, Fp, G->pvm_up, Fp, NULL, 0, r);
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

/* CASA's backward in a layer: dx is the gradient at the layer's x after the attention and CA
 * residuals; the gradient at h1 goes into dh (rows [s, n)), at the visual rows into dvis. */
static void casa_backward(const ClTrainDec *d, const ClDecoderLayerWeights *L,
                          ClDecoderLayerWeights *G, const LayerAct *a, const float *dx, int s,
                          float *dh, float *dvis)
{
    const int n = d->n, E = d->E, Q = d->Q, KV = d->KV, nv = d->n_vis;
    const gboolean own = d->cfg->casa == CL_CASA_CA;
    const CasaAct *c = &a->casa;
    float *dattc = g_new0(float, (size_t)n * Q), *dqc = g_new0(float, (size_t)n * Q);
    float *dkc = g_new0(float, (size_t)nv * KV), *dvc = g_new0(float, (size_t)nv * KV);
    float *dny = g_new0(float, (size_t)nv * E);
    const gboolean tv = d->cfg->casa_tv;
    float *gk = NULL, *gv = NULL, *dgk = NULL, *dgv = NULL, *dkt = NULL, *dvt = NULL;
    if (tv) {
        gk = g_new(float, (size_t)(nv + n) * KV), gv = g_new(float, (size_t)(nv + n) * KV);
        dgk = g_new(float, (size_t)(nv + n) * KV), dgv = g_new(float, (size_t)(nv + n) * KV);
        dkt = g_new0(float, (size_t)n * KV), dvt = g_new0(float, (size_t)n * KV);
    }
    for (int t0 = s; t0 < n;) {
        int t1 = t0 + 1;
        while (t1 < n && d->win0[t1] == d->win0[t0] && d->winn[t1] == d->winn[t0])
            t1++;
        if (d->winn[t0] > 0 && tv) {
            const int w0 = d->win0[t0], wn = d->winn[t0], r = t1 - t0, ws = d->wstart[t0];
            const int nk = wn + t1 - ws;
            cl_grad_linear(dattc + (size_t)t0 * Q, own ? G->casa_o : G->o, NULL,
                           dx + (size_t)t0 * E, c->attc + (size_t)t0 * Q, own ? L->casa_o : L->o,
                           r, Q, E);
            memcpy(gk, c->kr + (size_t)w0 * KV, sizeof(float) * (size_t)wn * KV);
            memcpy(gv, c->vc + (size_t)w0 * KV, sizeof(float) * (size_t)wn * KV);
            memcpy(gk + (size_t)wn * KV, c->kt + (size_t)ws * KV, sizeof(float) * (t1 - ws) * KV);
            memcpy(gv + (size_t)wn * KV, c->vt + (size_t)ws * KV, sizeof(float) * (t1 - ws) * KV);
            memset(dgk, 0, sizeof(float) * (size_t)nk * KV);
            memset(dgv, 0, sizeof(float) * (size_t)nk * KV);
            cl_grad_attention(dqc + (size_t)t0 * Q, dgk, dgv, dattc + (size_t)t0 * Q,
                              c->qc + (size_t)t0 * Q, gk, gv, r, nk, Q, KV, KV, Q, d->Hq, d->Hkv,
                              d->hd, d->scale, wn + t0 - ws);
            for (size_t i = 0; i < (size_t)wn * KV; i++) /* the visual keys: kr's, then kc's */
                dkc[(size_t)w0 * KV + i] += dgk[i], dvc[(size_t)w0 * KV + i] += dgv[i];
            for (size_t i = 0; i < (size_t)(t1 - ws) * KV; i++)
                dkt[(size_t)ws * KV + i] += dgk[(size_t)wn * KV + i],
                    dvt[(size_t)ws * KV + i] += dgv[(size_t)wn * KV + i];
        } else if (d->winn[t0] > 0) {
            const int w0 = d->win0[t0], wn = d->winn[t0], r = t1 - t0;
            cl_grad_linear(dattc + (size_t)t0 * Q, own ? G->casa_o : G->o, NULL,
                           dx + (size_t)t0 * E, c->attc + (size_t)t0 * Q, own ? L->casa_o : L->o,
                           r, Q, E);
            cl_grad_attention(dqc + (size_t)t0 * Q, dkc + (size_t)w0 * KV, dvc + (size_t)w0 * KV,
                              dattc + (size_t)t0 * Q, c->qc + (size_t)t0 * Q,
                              c->kc + (size_t)w0 * KV, c->vc + (size_t)w0 * KV, r, wn, Q, KV, KV,
                              Q, d->Hq, d->Hkv, d->hd, d->scale, -1);
        }
        t0 = t1;
    }
    if (tv) { /* back through RoPE: the queries, the visual keys (kr → kc), the text keys */
        const size_t half = (size_t)d->hd / 2;
        cl_grad_rope(dqc + (size_t)s * Q, d->rope_cos + s * half, d->rope_sin + s * half, n - s,
                     Q, d->Hq, d->hd, 1);
        cl_grad_rope(dkc, d->img_cos, d->img_sin, nv, KV, d->Hkv, d->hd, 1);
        cl_grad_rope(dkt, d->rope_cos, d->rope_sin, n, KV, d->Hkv, d->hd, 1);
        cl_grad_linear(dh, own ? G->casa_k : G->k, NULL, dkt, a->h1, own ? L->casa_k : L->k, n,
                       E, KV);
        cl_grad_linear(dh, own ? G->casa_v : G->v, NULL, dvt, a->h1, own ? L->casa_v : L->v, n,
                       E, KV);
        g_free(gk), g_free(gv), g_free(dgk), g_free(dgv), g_free(dkt), g_free(dvt);
    }
    cl_grad_linear(dh + (size_t)s * E, own ? G->casa_q : G->q, NULL, dqc + (size_t)s * Q,
                   a->h1 + (size_t)s * E, own ? L->casa_q : L->q, n - s, E, Q);
    cl_grad_linear(dny, own ? G->casa_k : G->k, NULL, dkc, c->ny, own ? L->casa_k : L->k, nv, E,
                   KV);
    cl_grad_linear(dny, own ? G->casa_v : G->v, NULL, dvc, c->ny, own ? L->casa_v : L->v, nv, E,
                   KV);
    cl_grad_rmsnorm(dvis, G->casa_norm, dny, d->visual, L->casa_norm, nv, E, d->eps);
    g_free(dattc), g_free(dqc), g_free(dkc), g_free(dvc), g_free(dny);
}

/* A Gated DeltaNet layer's backward: dx is the gradient at the layer's x after the residual
 * (rows [s, n) nonzero); G gets every gdn_* tensor's and attn_norm's gradient and dx the
 * gradient through the branch at the layer's input (added: the residual's own path is dx). */
static void gdn_backward(const ClTrainDec *d, const ClDecoderLayerWeights *L,
                         ClDecoderLayerWeights *G, const LayerAct *a, float *dx, int s)
{
    const ClModelConfig *cfg = d->cfg;
    const int n = d->n, E = d->E, H = cfg->gdn_heads, dk = cfg->gdn_dk, dv = cfg->gdn_dv;
    const int K = cfg->gdn_conv, Qk = H * dk, Vv = H * dv, m = n - s;
    const size_t nQ = (size_t)n * Qk, nV = (size_t)n * Vv, nH = (size_t)n * H;
    const GdnAct *g = &a->g;
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
    cl_grad_linear(dy + (size_t)s * Vv, G->gdn_o, NULL, dx + (size_t)s * E,
                   g->y + (size_t)s * Vv, L->gdn_o, m, Vv, E);
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
        for (int i = 0; i < n; i++) {
            memcpy(qh + (size_t)i * dk, g->nq + (size_t)i * Qk + (size_t)h * dk, dk * sizeof(float));
            memcpy(kh + (size_t)i * dk, g->nk + (size_t)i * Qk + (size_t)h * dk, dk * sizeof(float));
            memcpy(vh + (size_t)i * dv, g->sv + (size_t)i * Vv + (size_t)h * dv, dv * sizeof(float));
            memcpy(doh + (size_t)i * dv, dO + (size_t)i * Vv + (size_t)h * dv, dv * sizeof(float));
            gh[i] = g->gd[(size_t)i * H + h];
            bh[i] = g->bt[(size_t)i * H + h];
        }
        memset(dqh, 0, sizeof(float) * (size_t)n * dk);
        memset(dkh, 0, sizeof(float) * (size_t)n * dk);
        memset(dvh, 0, sizeof(float) * (size_t)n * dv);
        memset(dgh, 0, sizeof(float) * (size_t)n);
        memset(dbh, 0, sizeof(float) * (size_t)n);
        cl_gdn_recurrent_backward(dqh, dkh, dvh, dgh, dbh, NULL, doh, NULL, NULL, qh, kh, vh, gh,
                                  bh, n, dk, dv);
        for (int i = 0; i < n; i++) {
            memcpy(dnq + (size_t)i * Qk + (size_t)h * dk, dqh + (size_t)i * dk, dk * sizeof(float));
            memcpy(dnk + (size_t)i * Qk + (size_t)h * dk, dkh + (size_t)i * dk, dk * sizeof(float));
            memcpy(dsv + (size_t)i * Vv + (size_t)h * dv, dvh + (size_t)i * dv, dv * sizeof(float));
            dgd[(size_t)i * H + h] = dgh[i];
            dbt[(size_t)i * H + h] = dbh[i];
        }
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

void cl_train_dec_backward(ClTrainDec *d, const ClModelWeights *w, const float *dlogits,
                           float *dvisual, ClModelWeights *g)
{
    const int n = d->n, E = d->E, F = d->F, Q = d->Q, KV = d->KV, QKV = d->QKV, hd = d->hd;
    const size_t nE = (size_t)n * E, nF = (size_t)n * F;
    float *dx = g_new0(float, nE), *dh = g_new(float, nE);
    float *dact = g_new(float, nF), *dgu = g_new(float, 2 * nF);
    float *datt = g_new(float, (size_t)n * Q), *dqkv = g_new(float, (size_t)n * QKV);
    const size_t tmp_n = MAX((size_t)MAX(QKV, 2 * F) * E,
                             d->cfg->pvm_n_layers
                                 ? (size_t)2 * d->cfg->pvm_mlp * d->cfg->pvm_rank
                                 : 0);
    float *wtmp = g_new(float, tmp_n);
    float *gtmp = g_new(float, tmp_n);
    /* PVM: the gradient at the visual rows through the branches' keys and values */
    float *dvis_pvm = d->n_vis && d->cfg->pvm_n_layers ? g_new0(float, (size_t)d->n_vis * E)
                                                        : NULL;
    float *dh_pvm = d->cfg->pvm_n_layers ? g_new(float, nE) : NULL;
    /* CASA: the visual rows' gradient through every layer's window keys and values */
    float *dvis_casa = d->casa && d->n_vis ? g_new0(float, (size_t)d->n_vis * E) : NULL;
    float *dh_casa = dvis_casa ? g_new(float, nE) : NULL;

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
        /* PVM beside the FFN reads the same dx (the layer output's gradient) */
        if (a->pvm && m > 0) {
            memset(dh_pvm, 0, nE * sizeof(float));
            pvm_backward(d, L, G, a->pvm, a->x_mid, dx, s, dh_pvm, dvis_pvm, wtmp, gtmp);
        }
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
            if (a->pvm)
                for (size_t i = sE; i < nE; i++)
                    dx[i] += dh_pvm[i];
            if (a->gdn) { /* a Gated DeltaNet layer in place of the attention */
                gdn_backward(d, L, G, a, dx, s);
                continue;
            }
            if (a->ca_only) { /* CA^#: the cross-attention's gradient through attn_norm */
                if (dh_casa) {
                    memset(dh_casa, 0, nE * sizeof(float));
                    casa_backward(d, L, G, a, dx, s, dh_casa, dvis_casa);
                    cl_grad_rmsnorm(dx, G->attn_norm, dh_casa, a->x_in, L->attn_norm, n, E,
                                    d->eps);
                }
                continue;
            }
            /* attention: x += o(Attn(rope(q), rope(k), v)), q, k and v one stacked product */
            memset(datt, 0, (size_t)n * Q * sizeof(float));
            cl_grad_linear(datt + (size_t)s * Q, G->o, NULL, dx + sE, a->att + (size_t)s * Q,
                           L->o, m, Q, E);
            cl_grad_attention_probs(dqkv + (size_t)s * QKV, dqkv + Q, dqkv + Q + KV,
                                    datt + (size_t)s * Q, a->qkv + (size_t)s * QKV, a->qkv + Q,
                                    a->qkv + Q + KV, a->probs, m, n, QKV, QKV, QKV, Q, d->Hq,
                                    d->Hkv, hd, d->scale, s);
            if (dh_casa) { /* CA beside the self-attention reads the same dx */
                memset(dh_casa, 0, nE * sizeof(float));
                casa_backward(d, L, G, a, dx, s, dh_casa, dvis_casa);
            }
        }
        if (a->gdn || a->ca_only) /* m == 0: the forward ran nothing */
            continue;
        cl_grad_rope(dqkv, d->rope_cos, d->rope_sin, n, QKV, d->Hq, hd, 1);
        cl_grad_rope(dqkv + Q, d->rope_cos, d->rope_sin, n, QKV, d->Hkv, hd, 1);
        memset(dh, 0, nE * sizeof(float));
        float *gqkv = stacked_grad(G->q, Q, G->k, KV, G->v, KV, E, gtmp);
        cl_grad_linear(dh, gqkv, NULL, dqkv, a->h1, stacked(L->q, Q, L->k, KV, L->v, KV, E, wtmp),
                       n, E, QKV);
        unstack_grad(gqkv, G->q, Q, G->k, KV, G->v, KV, E);
        if (dh_casa && m > 0) /* (CA_{t+v}: rows before s feed its text keys too) */
            for (size_t i = 0; i < nE; i++)
                dh[i] += dh_casa[i];
        cl_grad_rmsnorm(dx, G->attn_norm, dh, a->x_in, L->attn_norm, n, E, d->eps);
    }
    /* the inputs: token rows into the embedding, visual rows out in order */
    cl_grad_embed(g->embed, dx, d->ids, n, E);
    for (int i = 0, row = 0; i < n; i++)
        if (d->ids[i] == CL_DECODER_VISUAL && dvisual) {
            float *dv = dvisual + (size_t)row * E;
            memcpy(dv, dx + (size_t)i * E, (size_t)E * sizeof(float));
            if (dvis_pvm)
                for (int j = 0; j < E; j++)
                    dv[j] += dvis_pvm[(size_t)row * E + j];
            row++;
        }
    if (dvis_casa && dvisual) /* CASA: no visual row is in the sequence */
        memcpy(dvisual, dvis_casa, (size_t)d->n_vis * E * sizeof(float));
    g_free(dvis_pvm), g_free(dh_pvm), g_free(dvis_casa), g_free(dh_casa);
    g_free(dx), g_free(dh), g_free(dact), g_free(dgu);
    g_free(datt), g_free(dqkv), g_free(wtmp), g_free(gtmp);
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
    const LayerAct *a = &d->layer[layer];
    if (a->gdn || a->ca_only) /* a GDN or CA^# layer: no self-attention map */
        return FALSE;
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
