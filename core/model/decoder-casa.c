/* decoder-casa.c - CASA (docs/MODEL.md §4.3): the images are not in the sequence; the text
 * cross-attends to the current window of visual rows beside its self-attention (variants:
 * CA^φ reuses the self-attention's projections, CA_{t+v} adds the window's text with RoPE, CA^#
 * replaces the self-attention of some layers). Inference here, training after it. */
#include "model/decoder-options.h"
#include "model/decoder-train.h"

#include <string.h>

/* ---- inference ---- */

void cl_dec_casa_release(ClKVCache *c)
{
    if (!c->casa_be)
        return;
    c->casa_be->ops->release(c->casa_be, c->casa_k);
    c->casa_be->ops->release(c->casa_be, c->casa_v);
    g_clear_pointer(&c->casa_be, cl_backend_free);
    c->casa_k = c->casa_v = NULL;
    c->casa_cap = c->casa_rows = c->casa_text = 0;
    c->casa_open = FALSE;
}

gboolean cl_dec_casa_reserve(ClKVCache *c, ClBackend *be, int n, GError **error)
{
    if (c->casa_be == be && c->casa_cap >= n)
        return TRUE;
    const int cap = MAX(n, c->casa_cap + c->casa_cap / 2); /* grow by half at least */
    const size_t KV = (size_t)c->kv_dim, bytes = (size_t)c->depth * cap * KV * sizeof(float);
    float *k = be->ops->alloc(be, bytes), *v = be->ops->alloc(be, bytes);
    if (!k || !v) {
        if (k)
            be->ops->release(be, k);
        if (v)
            be->ops->release(be, v);
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "Not enough %s memory for CASA's window (%d visual rows)", cl_backend_name(be),
                    n);
        return FALSE;
    }
    /* the rows there (another backend: start over) */
    const int keep = c->casa_be == be ? c->casa_rows + c->casa_text : 0;
    const int keep_text = keep ? c->casa_text : 0;
    for (int l = 0; l < c->depth && keep > 0; l++) {
        be->ops->copy(be, k + (size_t)l * cap * KV, c->casa_k + (size_t)l * c->casa_cap * KV,
                      (size_t)keep * KV * sizeof(float));
        be->ops->copy(be, v + (size_t)l * cap * KV, c->casa_v + (size_t)l * c->casa_cap * KV,
                      (size_t)keep * KV * sizeof(float));
    }
    const gboolean open = c->casa_open && keep > 0;
    cl_dec_casa_release(c);
    c->casa_k = k, c->casa_v = v;
    c->casa_cap = cap;
    c->casa_rows = keep - keep_text;
    c->casa_text = keep_text;
    c->casa_open = open;
    c->casa_be = cl_backend_ref(be);
    return TRUE;
}

/* CASA's cross-attention of the cn rows of c->h (normalised) to the window: x += o_c(CA). No
 * positions; CA_{t+v}: the window's text keys and values too (these rows' appended after the
 * text before them), causal, with RoPE (the rows' tables are in c->rope_cos/sin). */
void cl_dec_casa_cross(const ClDecRun *r, const ClDecoderLayerWeights *L, int l, int cn)
{
    ClBackend *be = r->be;
    const struct cl_backend_ops *op = be->ops;
    ClKVCache *c = r->c;
    const int E = c->e, KV = c->kv_dim, Q = c->heads * c->hd;
    const gboolean own = r->cfg->casa == CL_CASA_CA;
    float *ck = c->casa_k + (size_t)l * c->casa_cap * KV;
    float *cv = c->casa_v + (size_t)l * c->casa_cap * KV;
    op->linear(be, c->q, c->h, own ? L->casa_q : L->q, NULL, cn, E, Q);
    int nk = c->casa_rows, causal = -1;
    if (r->cfg->casa_tv) {
        const int at = c->casa_rows + c->casa_text;
        op->linear(be, ck + (size_t)at * KV, c->h, own ? L->casa_k : L->k, NULL, cn, E, KV);
        op->linear(be, cv + (size_t)at * KV, c->h, own ? L->casa_v : L->v, NULL, cn, E, KV);
        op->rope(be, ck + (size_t)at * KV, c->rope_cos, c->rope_sin, cn, KV, c->kv_heads, c->hd, 1);
        op->rope(be, c->q, c->rope_cos, c->rope_sin, cn, Q, c->heads, c->hd, 1);
        nk = at + cn;
        causal = at;
    }
    op->attention(be, c->att, NULL, c->q, ck, cv, cn, nk, Q, KV, KV, Q, c->heads, c->kv_heads,
                  c->hd, r->scale, causal, 0, c->scores);
    op->linear(be, c->proj, c->att, own ? L->casa_o : L->o, NULL, cn, Q, E);
    op->residual(be, c->x, c->proj, NULL, cn, E);
}

/* CASA: k visual rows (host memory) join the window — a new window when text came since the
 * last visual row, its text starting at position pos — as every layer's keys and values
 * RMSNorm(y) W_k^T, RMSNorm(y) W_v^T (CA_{t+v}: the keys with RoPE at pos). */
static gboolean casa_window_add(const ClDecRun *r, const float *rows, int k, int pos,
                                GError **error)
{
    ClBackend *be = r->be;
    const struct cl_backend_ops *op = be->ops;
    ClKVCache *c = r->c;
    const int E = c->e, KV = c->kv_dim;
    if (!c->casa_open) { /* a new window: its text starts at the next position */
        c->casa_rows = c->casa_text = 0;
        c->casa_pos = pos;
    }
    if (!cl_dec_casa_reserve(c, be, c->casa_rows + k, error) ||
        !cl_dec_ensure_workspace(c, be, c->rows, error))
        return FALSE;
    const gboolean own = r->cfg->casa == CL_CASA_CA, tv = r->cfg->casa_tv;
    for (int i0 = 0; i0 < k; i0 += c->rows) {
        const int b = MIN(c->rows, k - i0);
        op->upload(be, c->x, rows + (size_t)i0 * E, (size_t)b * E * sizeof(float));
        if (tv) /* CA_{t+v}: the visual rows' keys all at the window's first text position */
            cl_dec_rope_tables_at(r, c->casa_pos, b);
        for (int l = 0; l < c->depth; l++) {
            const ClDecoderLayerWeights *L = &r->w->dec[l];
            const size_t at = ((size_t)l * c->casa_cap + c->casa_rows + i0) * KV;
            op->rmsnorm(be, c->h, c->x, L->casa_norm, b, E, r->eps);
            op->linear(be, c->casa_k + at, c->h, own ? L->casa_k : L->k, NULL, b, E, KV);
            op->linear(be, c->casa_v + at, c->h, own ? L->casa_v : L->v, NULL, b, E, KV);
            if (tv)
                op->rope(be, c->casa_k + at, c->rope_cos, c->rope_sin, b, KV, c->kv_heads, c->hd,
                         1);
        }
    }
    c->casa_rows += k;
    c->casa_open = TRUE;
    return TRUE;
}

void cl_dec_casa_truncate(ClKVCache *c, int len)
{
    if (c->casa_text > 0 && len >= 0 && len < c->len) /* CA_{t+v}: its text cut too */
        c->casa_text = MAX(0, c->casa_text - (c->len - len));
    if (len == 0) { /* a new sequence has no window yet */
        c->casa_rows = c->casa_text = 0;
        c->casa_open = FALSE;
    }
}

void cl_dec_casa_copy(ClKVCache *dst, const ClKVCache *src)
{
    dst->casa_rows = dst->casa_text = 0;
    dst->casa_open = FALSE;
    const int wrows = src->casa_rows + src->casa_text; /* CA_{t+v}: its text's rows too */
    if (src->casa_rows <= 0 || !cl_dec_casa_reserve(dst, src->casa_be, wrows, NULL))
        return;
    const size_t KV = (size_t)src->kv_dim;
    for (int l = 0; l < src->depth; l++) {
        src->casa_be->ops->copy(src->casa_be, dst->casa_k + (size_t)l * dst->casa_cap * KV,
                                src->casa_k + (size_t)l * src->casa_cap * KV,
                                (size_t)wrows * KV * sizeof(float));
        src->casa_be->ops->copy(src->casa_be, dst->casa_v + (size_t)l * dst->casa_cap * KV,
                                src->casa_v + (size_t)l * src->casa_cap * KV,
                                (size_t)wrows * KV * sizeof(float));
    }
    dst->casa_rows = src->casa_rows;
    dst->casa_text = src->casa_text;
    dst->casa_pos = src->casa_pos;
    dst->casa_open = src->casa_open;
}

int cl_dec_casa_adds(const gint32 *ids, int n)
{
    int adds = n;
    for (int i = 0; i < n; i++)
        adds -= ids[i] == CL_DECODER_VISUAL;
    return adds;
}

/* Only text runs go through the layers: a window's rows go in blocks of these too. */
int cl_dec_casa_rows(const gint32 *ids, int n, int chunk)
{
    int longest = 1;
    for (int i = 0, run = 0; i < n; i++) {
        run = ids[i] == CL_DECODER_VISUAL ? 0 : run + 1;
        longest = MAX(longest, run);
    }
    return MIN(longest, chunk);
}

void cl_dec_casa_only(const ClDecRun *r, const ClDecoderLayerWeights *L, int l, int cn)
{
    ClKVCache *c = r->c;
    if (c->casa_rows <= 0)
        return;
    r->be->ops->rmsnorm(r->be, c->h, c->x, L->attn_norm, cn, c->e, r->eps);
    cl_dec_casa_cross(r, L, l, cn);
}

/* A run of text through the layers, chunk by chunk; i: its first index in the call. */
static void casa_text_run(const ClDecRun *r, const gint32 *ids, int i, int run, int n, int rows,
                          float *logits, float *logits_all, int *pos)
{
    ClKVCache *c = r->c;
    const int V = c->vocab;
    c->casa_open = FALSE;
    for (int c0 = 0, cn; c0 < run; c0 += cn) {
        cn = cl_dec_chunk_rows(c, *pos, MIN(rows, run - c0));
        cl_dec_run_layers(r, ids + i + c0, cn, *pos, NULL, NULL);
        if (r->cfg->casa_tv && c->casa_rows > 0)
            c->casa_text += cn; /* their CA keys and values stay for the window */
        const gboolean last = i + c0 + cn == n;
        cl_dec_run_logits(r, cn, logits_all ? logits_all + (size_t)(i + c0) * V : NULL,
                          last && logits && !logits_all ? logits : NULL);
        *pos += cn;
    }
}

gboolean cl_dec_casa_forward(const ClDecRun *r, const gint32 *ids, int n, const float *visual,
                             int rows, float *logits, float *logits_all, int *pos, GError **error)
{
    ClKVCache *c = r->c;
    const int V = c->vocab;
    int vis_row = 0;
    for (int i = 0; i < n;) {
        int run = 1;
        while (i + run < n && (ids[i + run] == CL_DECODER_VISUAL) == (ids[i] == CL_DECODER_VISUAL))
            run++;
        if (ids[i] == CL_DECODER_VISUAL) {
            if (!casa_window_add(r, visual + (size_t)vis_row * c->e, run, *pos, error))
                return FALSE;
            vis_row += run;
            if (logits_all) /* visual rows have no logits here */
                memset(logits_all + (size_t)i * V, 0, (size_t)run * V * sizeof(float));
            if (i + run == n && logits && !logits_all)
                memset(logits, 0, (size_t)V * sizeof(float));
        } else {
            casa_text_run(r, ids, i, run, n, rows, logits, logits_all, pos);
        }
        i += run;
    }
    return TRUE;
}

/* ---- training (decoder-train.h) ---- */

/* Text row t's window's first text row, and the RoPE tables of each visual row at it (rows no
 * text follows: unread, position 0). */
static void casa_tv_rows(ClTrainDec *d, int n, int vr)
{
    const ClModelConfig *cfg = d->cfg;
    const int hd = cfg->dec_dim / cfg->dec_heads;
    const size_t half = (size_t)hd / 2;
    d->wstart = g_new(int, MAX(n, 1));
    d->img_cos = g_new(float, (size_t)MAX(vr, 1) * half);
    d->img_sin = g_new(float, (size_t)MAX(vr, 1) * half);
    for (int j = 0; j < vr; j++)
        cl_rope_table_1d(d->img_cos + j * half, d->img_sin + j * half, 0, 1, hd, cfg->rope_base);
    for (int t = 0; t < n; t++) {
        const gboolean cont = t > 0 && d->win0[t] == d->win0[t - 1] && d->winn[t] == d->winn[t - 1];
        d->wstart[t] = cont ? d->wstart[t - 1] : t;
        if (!cont && d->winn[t] > 0)
            for (int j = d->win0[t]; j < d->win0[t] + d->winn[t]; j++)
                cl_rope_table_1d(d->img_cos + j * half, d->img_sin + j * half, t, 1, hd,
                                 cfg->rope_base);
    }
}

gboolean cl_dec_train_casa_rows(ClTrainDec *d, const gint32 **ids, int *n, const int **rows,
                                int n_rows, int *full2text, int **trows, GError **error)
{
    const gint32 *id = *ids;
    d->casa = TRUE;
    d->tids = g_new(gint32, MAX(*n, 1));
    d->win0 = g_new(int, MAX(*n, 1));
    d->winn = g_new(int, MAX(*n, 1));
    int nt = 0, vr = 0, cur0 = 0, curn = 0;
    gboolean open = FALSE;
    for (int i = 0; i < *n; i++) {
        full2text[i] = -1;
        if (id[i] == CL_DECODER_VISUAL) {
            if (!open)
                cur0 = vr, curn = 0;
            curn++, vr++;
            open = TRUE;
            continue;
        }
        open = FALSE;
        d->tids[nt] = id[i], d->win0[nt] = cur0, d->winn[nt] = curn;
        full2text[i] = nt++;
    }
    d->n_vis = vr;
    if (*rows) {
        *trows = g_new(int, MAX(n_rows, 1));
        for (int r = 0; r < n_rows; r++)
            if (((*trows)[r] = full2text[(*rows)[r]]) < 0) {
                g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                            "Position %d is a visual row: a CASA decoder gives it no logits",
                            (*rows)[r]);
                return FALSE;
            }
        *rows = *trows;
    }
    *ids = d->tids;
    *n = nt;
    if (d->cfg->casa_tv)
        casa_tv_rows(d, nt, vr);
    return TRUE;
}

void cl_dec_train_casa_layout(ClTrainDec *d, ClTrainCasaAct *c, ClActArena *a)
{
    const int n = d->n, E = d->E, Q = d->Q, KV = d->KV, nv = d->n_vis;
    c->ny = cl_act_take(a, (size_t)nv * E), c->kc = cl_act_take(a, (size_t)nv * KV);
    c->vc = cl_act_take(a, (size_t)nv * KV), c->qc = cl_act_take(a, (size_t)n * Q);
    c->attc = cl_act_take(a, (size_t)n * Q);
    if (d->cfg->casa_tv) {
        c->kr = cl_act_take(a, (size_t)nv * KV), c->kt = cl_act_take(a, (size_t)n * KV);
        c->vt = cl_act_take(a, (size_t)n * KV);
    }
}

/* The end of the run of text rows from t0 that read the same window. */
static int window_end(const ClTrainDec *d, int t0)
{
    int t1 = t0 + 1;
    while (t1 < d->n && d->win0[t1] == d->win0[t0] && d->winn[t1] == d->winn[t0])
        t1++;
    return t1;
}

/* CA_{t+v}: a window's keys and values as its text rows read them: its visual rows' (keys with
 * RoPE), then its text's from the window's first text row ws up to row t1 (exclusive). */
static void window_keys(float *gk, float *gv, const ClTrainCasaAct *c, int w0, int wn, int ws,
                        int t1, int KV)
{
    memcpy(gk, c->kr + (size_t)w0 * KV, sizeof(float) * (size_t)wn * KV);
    memcpy(gv, c->vc + (size_t)w0 * KV, sizeof(float) * (size_t)wn * KV);
    memcpy(gk + (size_t)wn * KV, c->kt + (size_t)ws * KV, sizeof(float) * (t1 - ws) * KV);
    memcpy(gv + (size_t)wn * KV, c->vt + (size_t)ws * KV, sizeof(float) * (t1 - ws) * KV);
}

void cl_dec_train_casa_forward(ClTrainDec *d, const ClDecoderLayerWeights *L, ClTrainLayerAct *a,
                               float *x, int s)
{
    ClBackend *be = d->be;
    const struct cl_backend_ops *op = be->ops;
    const int n = d->n, E = d->E, Q = d->Q, KV = d->KV, nv = d->n_vis, m = n - s;
    const gboolean own = d->cfg->casa == CL_CASA_CA;
    ClTrainCasaAct *c = &a->casa;
    float *proj = d->proj, *scratch = d->scratch;
    memset(c->attc, 0, sizeof(float) * (size_t)n * Q);
    op->rmsnorm(be, c->ny, d->visual, L->casa_norm, nv, E, d->eps);
    op->linear(be, c->kc, c->ny, own ? L->casa_k : L->k, NULL, nv, E, KV);
    op->linear(be, c->vc, c->ny, own ? L->casa_v : L->v, NULL, nv, E, KV);
    op->linear(be, c->qc + (size_t)s * Q, a->h1 + (size_t)s * E, own ? L->casa_q : L->q, NULL, m, E,
               Q);
    const gboolean tv = d->cfg->casa_tv;
    float *gk = d->cgk, *gv = d->cgv;
    if (tv) { /* CA_{t+v}: every text row's keys and values, and RoPE on them all */
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
    for (int t0 = s, t1; t0 < n; t0 = t1) {
        t1 = window_end(d, t0);
        if (d->winn[t0] > 0 && tv) {
            /* the window's visual keys, then its text from its first row up to t1, causal */
            const int w0 = d->win0[t0], wn = d->winn[t0], r = t1 - t0, ws = d->wstart[t0];
            const int nk = wn + t1 - ws;
            window_keys(gk, gv, c, w0, wn, ws, t1, KV);
            op->attention(be, c->attc + (size_t)t0 * Q, NULL, c->qc + (size_t)t0 * Q, gk, gv, r, nk,
                          Q, KV, KV, Q, d->Hq, d->Hkv, d->hd, d->scale, wn + t0 - ws, 0, scratch);
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
    }
}

void cl_dec_train_casa_backward(const ClTrainDec *d, const ClDecoderLayerWeights *L,
                                ClDecoderLayerWeights *G, const ClTrainLayerAct *a, const float *dx,
                                int s, float *dh, float *dvis)
{
    const int n = d->n, E = d->E, Q = d->Q, KV = d->KV, nv = d->n_vis;
    const gboolean own = d->cfg->casa == CL_CASA_CA;
    const ClTrainCasaAct *c = &a->casa;
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
    for (int t0 = s, t1; t0 < n; t0 = t1) {
        t1 = window_end(d, t0);
        if (d->winn[t0] > 0 && tv) {
            const int w0 = d->win0[t0], wn = d->winn[t0], r = t1 - t0, ws = d->wstart[t0];
            const int nk = wn + t1 - ws;
            cl_grad_linear(dattc + (size_t)t0 * Q, own ? G->casa_o : G->o, NULL,
                           dx + (size_t)t0 * E, c->attc + (size_t)t0 * Q, own ? L->casa_o : L->o, r,
                           Q, E);
            window_keys(gk, gv, c, w0, wn, ws, t1, KV);
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
                           dx + (size_t)t0 * E, c->attc + (size_t)t0 * Q, own ? L->casa_o : L->o, r,
                           Q, E);
            cl_grad_attention(dqc + (size_t)t0 * Q, dkc + (size_t)w0 * KV, dvc + (size_t)w0 * KV,
                              dattc + (size_t)t0 * Q, c->qc + (size_t)t0 * Q,
                              c->kc + (size_t)w0 * KV, c->vc + (size_t)w0 * KV, r, wn, Q, KV, KV, Q,
                              d->Hq, d->Hkv, d->hd, d->scale, -1);
        }
    }
    if (tv) { /* back through RoPE: the queries, the visual keys (kr → kc), the text keys */
        const size_t half = (size_t)d->hd / 2;
        cl_grad_rope(dqc + (size_t)s * Q, d->rope_cos + s * half, d->rope_sin + s * half, n - s, Q,
                     d->Hq, d->hd, 1);
        cl_grad_rope(dkc, d->img_cos, d->img_sin, nv, KV, d->Hkv, d->hd, 1);
        cl_grad_rope(dkt, d->rope_cos, d->rope_sin, n, KV, d->Hkv, d->hd, 1);
        cl_grad_linear(dh, own ? G->casa_k : G->k, NULL, dkt, a->h1, own ? L->casa_k : L->k, n, E,
                       KV);
        cl_grad_linear(dh, own ? G->casa_v : G->v, NULL, dvt, a->h1, own ? L->casa_v : L->v, n, E,
                       KV);
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
gboolean cl_dec_train_casa_logits(const ClTrainDec *d, const float *lm_head, const int *full2text,
                                  int n_full, float *logits)
{
    const int n = d->n, V = d->V;
    float *tl = g_try_new(float, (size_t)MAX(n, 1) * V);
    if (!tl)
        return FALSE;
    if (n > 0)
        d->be->ops->linear(d->be, tl, d->hk, lm_head, NULL, n, d->E, V);
    for (int i = 0; i < n_full; i++) {
        float *dst = logits + (size_t)i * V;
        if (full2text[i] < 0)
            memset(dst, 0, sizeof(float) * (size_t)V);
        else
            memcpy(dst, tl + (size_t)full2text[i] * V, sizeof(float) * (size_t)V);
    }
    g_free(tl);
    return TRUE;
}
