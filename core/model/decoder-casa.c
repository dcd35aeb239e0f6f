/* decoder-casa.c - CASA (docs/MODEL.md §4.3): the images are not in the sequence; the text
 * cross-attends to the current window of visual rows beside its self-attention (variants:
 * CA^φ reuses the self-attention's projections, CA_{t+v} adds the window's text with RoPE, CA^#
 * replaces the self-attention of some layers). Inference here, training after it. */
#include "model/decoder-options.h"

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
                    "Not enough %s memory for CASA's window (%d visual rows)",
                    cl_backend_name(be), n);
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
        op->rope(be, ck + (size_t)at * KV, c->rope_cos, c->rope_sin, cn, KV, c->kv_heads, c->hd,
                 1);
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
                             int rows, float *logits, float *logits_all, int *pos,
                             GError **error)
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
