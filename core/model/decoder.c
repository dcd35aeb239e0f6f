/* decoder.c - the Llama-style causal decoder over a KV cache (kvcache.c; docs/MODEL.md §4): the
 * plain block (RMSNorm, attention with RoPE and GQA over the cache, SwiGLU) run as a chunked
 * prefill with sgemm attention or single-position decode steps with fused attention. Each
 * option's part is in its own file (decoder-options.h). */
#include "model/decoder-options.h"

#include <math.h>
#include <string.h>

/* Positions per pass through the layers: bounds the workspace (activations and the attention
 * scores) however long the prompt. A call with a tap runs as one chunk (the taps are whole). */
#define CHUNK 256

static void tap_rows(ClTensorTap tap, gpointer data, ClBackend *be, const char *name,
                     const float *x, gint64 rows, gint64 cols)
{
    gint64 shape[2] = { rows, cols };
    g_autofree float *tmp = NULL;
    if (be) /* x is in a device's memory */
        x = cl_backend_host_view(be, x, (size_t)MAX(rows, 1) * cols, &tmp);
    if (rows > 0)
        tap(name, x, 2, shape, data);
    else
        tap(name, x, 1, shape + 1, data);
}

void cl_dec_rope_tables_at(const ClDecRun *r, int pos, int rows)
{
    ClKVCache *c = r->c;
    const size_t half = (size_t)c->hd / 2;
    float *cs = r->host ? c->rope_cos : c->host_rope;
    float *sn = r->host ? c->rope_sin : c->host_rope + (size_t)rows * half;
    cl_rope_table_1d(cs, sn, pos, 1, c->hd, r->cfg->rope_base);
    for (int i = 1; i < rows; i++) {
        memcpy(cs + i * half, cs, half * sizeof(float));
        memcpy(sn + i * half, sn, half * sizeof(float));
    }
    if (!r->host) {
        r->be->ops->upload(r->be, c->rope_cos, cs, (size_t)rows * half * sizeof(float));
        r->be->ops->upload(r->be, c->rope_sin, sn, (size_t)rows * half * sizeof(float));
    }
}

/* ---- the plain block ---- */

void cl_dec_attention_map(float *out, int ldo, const float *q, int ldq, const float *k, int ldk,
                          int rows, int pos0, int Hq, int Hkv, int hd, float scale)
{
    const int group = Hq / Hkv;
    float *s = g_new(float, MAX(pos0 + rows, 1));
    for (int i = 0; i < rows; i++) {
        const int t = pos0 + i;
        float *row = out + (size_t)i * ldo;
        for (int h = 0; h < Hq; h++) {
            const float *qh = q + (size_t)i * ldq + (size_t)h * hd;
            const int kh = h / group;
            float mx = -INFINITY;
            for (int j = 0; j <= t; j++) {
                const float *kj = k + (size_t)j * ldk + (size_t)kh * hd;
                float dot = 0;
                for (int e = 0; e < hd; e++)
                    dot += qh[e] * kj[e];
                s[j] = dot * scale;
                mx = MAX(mx, s[j]);
            }
            double sum = 0;
            for (int j = 0; j <= t; j++)
                sum += (s[j] = expf(s[j] - mx));
            for (int j = 0; j <= t; j++)
                row[j] += (float)(s[j] / sum / Hq);
        }
    }
    g_free(s);
}

/* The asked attention map's rows among the chunk's (pos0, cn), from its roped queries c->q and
 * the layer's keys kl (positions 0 .. pos0 + cn − 1 by then). */
static void attention_map_rows(const ClDecRun *r, const float *kl, int pos0, int cn)
{
    ClKVCache *c = r->c;
    const int from = MAX(pos0, r->att_q0), rows = pos0 + cn - from;
    if (rows <= 0)
        return;
    const int Q = c->heads * c->hd;
    g_autofree float *qt = NULL;
    g_autofree float *kt = NULL;
    const float *q = cl_backend_host_view(r->be, c->q, (size_t)cn * Q, &qt);
    const float *k = cl_backend_host_view(r->be, kl, (size_t)(pos0 + cn) * c->kv_dim, &kt);
    cl_dec_attention_map(r->att_out + (size_t)(from - r->att_q0) * r->att_cols, r->att_cols,
                         q + (size_t)(from - pos0) * Q, Q, k, c->kv_dim, rows, from, c->heads,
                         c->kv_heads, c->hd, r->scale);
}

/* The chunk's rows into c->x (token embeddings, visual rows from *vis_row on) and their RoPE
 * tables (VIST2: at positions shifted from the slots). */
static void embed_chunk(const ClDecRun *r, const gint32 *cid, int cn, int pos0, const float *visual,
                        int *vis_row)
{
    ClBackend *be = r->be;
    const struct cl_backend_ops *op = be->ops;
    ClKVCache *c = r->c;
    const int E = c->e, hd = c->hd, rope0 = pos0 + c->pos_shift;
    op->embed(be, c->x, r->w->embed, cid, cn, E);
    for (int i = 0; i < cn;) {
        if (cid[i] != CL_DECODER_VISUAL) {
            i++;
            continue;
        }
        int run = 1; /* a run of visual rows is one copy */
        while (i + run < cn && cid[i + run] == CL_DECODER_VISUAL)
            run++;
        op->upload(be, c->x + (size_t)i * E, visual + (size_t)*vis_row * E,
                   (size_t)run * E * sizeof(float));
        *vis_row += run;
        i += run;
    }
    if (r->host) {
        cl_rope_table_1d(c->rope_cos, c->rope_sin, rope0, cn, hd, r->cfg->rope_base);
    } else {
        size_t half = (size_t)cn * (hd / 2);
        cl_rope_table_1d(c->host_rope, c->host_rope + half, rope0, cn, hd, r->cfg->rope_base);
        op->upload(be, c->rope_cos, c->host_rope, half * sizeof(float));
        op->upload(be, c->rope_sin, c->host_rope + half, half * sizeof(float));
    }
}

/* out (cn, n) = x (cn, k) · W^T: W's f32 view through the backend, or its quantized blocks
 * (nn/quant.h) on the CPU's pool: a matrix-vector product for one row, tiles for more. */
static void dec_linear(const ClDecRun *r, float *out, const float *x, const float *w,
                       const ClQuantMatrix *q, int cn, int k, int n)
{
    if (q && q->data) {
        if (cn == 1)
            cl_quant_matvec_multi(r->pool, &(ClQuantMatvec){ q->type, q->data, n, out, q->x4 }, 1,
                                  k, x);
        else
            cl_quant_matmul(r->pool, q->type, q->x4, q->data, n, k, x, cn, out);
        return;
    }
    r->be->ops->linear(r->be, out, x, w, NULL, cn, k, n);
}

/* Several products of the same one row x (q, k, v; gate, up): one quantized job when every
 * matrix is quantized and x is one row, else one dec_linear each. */
static void dec_linear_same_x(const ClDecRun *r, const float *x, int cn, int k, int n_mats,
                              float *const *outs, const float *const *ws,
                              const ClQuantMatrix *const *qs, const int *ns)
{
    gboolean all_q = cn == 1;
    for (int j = 0; j < n_mats; j++)
        all_q = all_q && qs[j] && qs[j]->data;
    if (all_q) {
        ClQuantMatvec mv[CL_QUANT_MAX_MULTI];
        for (int j = 0; j < n_mats; j++)
            mv[j] = (ClQuantMatvec){ qs[j]->type, qs[j]->data, ns[j], outs[j], qs[j]->x4 };
        cl_quant_matvec_multi(r->pool, mv, n_mats, k, x);
        return;
    }
    for (int j = 0; j < n_mats; j++)
        dec_linear(r, outs[j], x, ws[j], qs[j], cn, k, ns[j]);
}

/* Layer l's quantized matrices, or NULL. */
static const ClQuantLayer *quant_layer(const ClDecRun *r, int l)
{
    return r->quant ? &r->quant->dec[l] : NULL;
}

/* Self-attention of layer l for the chunk: its keys and values into their cache slots,
 * x += o(Attn(rope(q), rope(k), v)); c->h keeps RMSNorm(x) for CASA's cross-attention. */
static void self_attention(const ClDecRun *r, const ClDecoderLayerWeights *L, int l, int pos0,
                           int cn)
{
    ClBackend *be = r->be;
    const struct cl_backend_ops *op = be->ops;
    ClKVCache *c = r->c;
    const int E = c->e, Hq = c->heads, Hkv = c->kv_heads, hd = c->hd;
    const int Q = Hq * hd, KV = c->kv_dim;
    float *kl = c->k + (size_t)c->kv_slot[l] * c->capacity * KV;
    float *vl = c->v + (size_t)c->kv_slot[l] * c->capacity * KV;
    const int kslot = cl_dec_slot_of(c, pos0);
    float *kc = kl + (size_t)kslot * KV, *vc = vl + (size_t)kslot * KV;

    const ClQuantLayer *QL = quant_layer(r, l);
    op->rmsnorm(be, c->h, c->x, L->attn_norm, cn, E, r->eps);
    dec_linear_same_x(r, c->h, cn, E, 3, (float *const[]){ c->q, kc, vc },
                      (const float *const[]){ L->q, L->k, L->v },
                      (const ClQuantMatrix *const[]){ QL ? &QL->q : NULL, QL ? &QL->k : NULL,
                                                      QL ? &QL->v : NULL },
                      (const int[]){ Q, KV, KV });
    op->rope(be, c->q, c->rope_cos, c->rope_sin, cn, Q, Hq, hd, 1);
    op->rope(be, kc, c->rope_cos, c->rope_sin, cn, KV, Hkv, hd, 1);
    if (cl_dec_stream_ring(c, pos0, cn))
        cl_dec_stream_attention(r, kl, vl, cn);
    else if (cl_dec_sparse_on(c, cn))
        cl_dec_sparse_attention(r, kl, vl, pos0, cn);
    else
        op->attention(be, c->att, NULL, c->q, kl, vl, cn, pos0 + cn, Q, KV, KV, Q, Hq, Hkv, hd,
                      r->scale, pos0, 0, c->scores);
    if (r->att_out && l == r->att_layer)
        attention_map_rows(r, kl, pos0, cn);
    dec_linear(r, c->proj, c->att, L->o, QL ? &QL->o : NULL, cn, Q, E);
    op->residual(be, c->x, c->proj, NULL, cn, E);
}

/* Layer l's token mixer: the self-attention (CASA: its cross-attention beside it), or what the
 * hybrid (a Gated DeltaNet layer) or CA^# (the cross-attention alone) puts in its place. */
static void token_mixer(const ClDecRun *r, const ClDecoderLayerWeights *L, int l, int pos0, int cn)
{
    ClKVCache *c = r->c;
    if (c->gdn_slot[l] >= 0) {
        cl_dec_gdn_layer(r, L, c->gdn_slot[l], cn);
    } else if (c->kv_slot[l] < 0) {
        cl_dec_casa_only(r, L, l, cn);
    } else {
        self_attention(r, L, l, pos0, cn);
        if (c->casa_rows > 0) /* x += CA(RMSNorm(x), window), from the same h */
            cl_dec_casa_cross(r, L, l, cn);
    }
}

/* x += down(SiLU(gate(h)) ⊙ up(h)), h = RMSNorm(x); PVM beside the FFN reads the same x:
 * x = x + FFN + P. */
static void feed_forward(const ClDecRun *r, const ClDecoderLayerWeights *L, int l,
                         const gint32 *cid, int cn)
{
    ClBackend *be = r->be;
    const struct cl_backend_ops *op = be->ops;
    ClKVCache *c = r->c;
    const int E = c->e, F = c->f;
    const gboolean pvm = cl_dec_pvm_branch(r, L, l, c->x, cid, cn);
    const ClQuantLayer *QL = quant_layer(r, l);
    op->rmsnorm(be, c->h, c->x, L->mlp_norm, cn, E, r->eps);
    dec_linear_same_x(r, c->h, cn, E, 2, (float *const[]){ c->gate, c->up },
                      (const float *const[]){ L->gate, L->up },
                      (const ClQuantMatrix *const[]){ QL ? &QL->gate : NULL, QL ? &QL->up : NULL },
                      (const int[]){ F, F });
    op->silu_mul(be, c->gate, c->gate, c->up, (size_t)cn * F);
    dec_linear(r, c->proj, c->gate, L->down, QL ? &QL->down : NULL, cn, F, E);
    op->residual(be, c->x, c->proj, NULL, cn, E);
    if (pvm)
        op->residual(be, c->x, c->pp, NULL, cn, E);
}

void cl_dec_run_layers(const ClDecRun *r, const gint32 *cid, int cn, int pos0, const float *visual,
                       int *vis_row)
{
    ClKVCache *c = r->c;
    embed_chunk(r, cid, cn, pos0, visual, vis_row);
    for (int l = 0; l < c->depth; l++) {
        const ClDecoderLayerWeights *L = &r->w->dec[l];
        token_mixer(r, L, l, pos0, cn);
        feed_forward(r, L, l, cid, cn);
        if (r->tap) {
            g_autofree char *name = g_strdup_printf("dec.%d.out", l);
            tap_rows(r->tap, r->tap_data, r->host ? NULL : r->be, name, c->x, cn, c->e);
        }
    }
}

/* On a device the logits are made in its memory, then downloaded. */
void cl_dec_run_logits(const ClDecRun *r, int cn, float *rows_out, float *last)
{
    ClBackend *be = r->be;
    const struct cl_backend_ops *op = be->ops;
    ClKVCache *c = r->c;
    const ClModelWeights *w = r->w;
    const int E = c->e, V = c->vocab;
    const float *lm_head = w->lm_head ? w->lm_head : w->embed;
    const ClQuantMatrix *qh = r->quant ? &r->quant->lm_head : NULL;
    if (rows_out) {
        float *dst = r->host ? rows_out : c->logits;
        op->rmsnorm(be, c->h, c->x, w->dec_norm, cn, E, r->eps);
        dec_linear(r, dst, c->h, lm_head, qh, cn, E, V);
        if (!r->host)
            op->download(be, rows_out, dst, (size_t)cn * V * sizeof(float));
    }
    if (last) {
        float *dst = r->host ? last : c->logits;
        op->rmsnorm(be, c->h, c->x + (size_t)(cn - 1) * E, w->dec_norm, 1, E, r->eps);
        dec_linear(r, dst, c->h, lm_head, qh, 1, E, V);
        if (!r->host)
            op->download(be, last, dst, (size_t)V * sizeof(float));
    }
}

/* Every check before anything is written: a refused call leaves the cache as it was. */
static gboolean check_call(const ClKVCache *cache, const ClModelConfig *cfg, const gint32 *ids,
                           int n, const float *visual, GError **error)
{
    if (!cl_dec_same_model(cache, cfg)) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "The KV cache was made for a model of another shape");
        return FALSE;
    }
    if (n < 1 || !ids) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "No positions to run through the decoder");
        return FALSE;
    }
    /* positions the call adds to the cache: every one, or (CASA) the text alone */
    const int adds = cfg->casa != CL_CASA_OFF ? cl_dec_casa_adds(ids, n) : n;
    if (!cache->window && adds > cache->capacity - cache->len) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "The sequence is too long: %d positions after %d do not fit in %d", adds,
                    cache->len, cache->capacity);
        return FALSE;
    }
    for (int i = 0; i < n; i++) {
        if (ids[i] == CL_DECODER_VISUAL) {
            if (!visual) {
                g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                            "Position %d asks for a visual token but no image was given", i);
                return FALSE;
            }
        } else if (ids[i] < 0 || ids[i] >= cfg->vocab_size) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "Token id %d at position %d is out of range (vocabulary %d)", ids[i], i,
                        cfg->vocab_size);
            return FALSE;
        }
    }
    return TRUE;
}

/* The backend, workspace and option state the call needs, made before the layers run. */
static gboolean prepare_call(ClKVCache *cache, ClBackend *be, const ClModelConfig *cfg, int rows,
                             int n, GError **error)
{
    /* CA_{t+v}: room for the window's text this call may add (before the workspace, which is
     * sized for the window's keys) */
    if (cfg->casa_tv &&
        !cl_dec_casa_reserve(cache, be, cache->casa_rows + cache->casa_text + n, error))
        return FALSE;
    if (!cl_dec_ensure_workspace(cache, be, rows, error))
        return FALSE;
    if (cache->sp_block > 0 && !be->ops->host_memory) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "The sparse prefill runs on the CPU only for now");
        return FALSE;
    }
    if (cache->n_gdn && !be->ops->host_memory) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "The hybrid (Gated DeltaNet) decoder runs on the CPU only for now");
        return FALSE;
    }
    return TRUE;
}

/* cl_decoder_forward's work; r carries the attention map asked (r->att_out, or NULL). */
static gboolean forward(ClDecRun *r, ClBackend *be, const ClModel *model, ClKVCache *cache,
                        const gint32 *ids, int n, const float *visual, float *logits,
                        float *logits_all, GError **error)
{
    const ClModelConfig *cfg = &model->config;
    if (!check_call(cache, cfg, ids, n, visual, error))
        return FALSE;
    int rows = r->tap ? n : MIN(n, CHUNK); /* a tap sees whole tensors: one chunk */
    if (cfg->casa != CL_CASA_OFF && !r->tap)
        rows = cl_dec_casa_rows(ids, n, CHUNK);
    if (!prepare_call(cache, be, cfg, rows, n, error))
        return FALSE;
    const ClModelWeights *w = cl_model_weights_on(model, be, error);
    if (!w || !cl_dec_pvm_prepare(cache, be, cfg, w, ids, n, visual, error))
        return FALSE;

    r->be = be, r->cfg = cfg, r->w = w, r->c = cache, r->host = be->ops->host_memory;
    /* the CPU runs a quantized model's blocks; a device its f32 copy (cl_model_weights_on) */
    r->pool = cl_backend_cpu_pool(be);
    r->quant = r->pool ? model->quant : NULL;
    r->eps = (float)cfg->norm_eps, r->scale = (float)(1.0 / sqrt((double)cache->hd));
    ClKVCache *c = cache;
    const int V = c->vocab;
    int pos = c->len;
    if (cfg->casa != CL_CASA_OFF) {
        if (!cl_dec_casa_forward(r, ids, n, visual, rows, logits, logits_all, &pos, error))
            return FALSE;
    } else {
        int vis_row = 0;
        for (int c0 = 0, cn; c0 < n; c0 += cn) {
            cn = cl_dec_chunk_rows(c, pos + c0, MIN(rows, n - c0));
            cl_dec_run_layers(r, ids + c0, cn, pos + c0, visual, &vis_row);
            const gboolean last = c0 + cn == n;
            cl_dec_run_logits(r, cn, logits_all ? logits_all + (size_t)c0 * V : NULL,
                              last && logits && !logits_all ? logits : NULL);
        }
        pos += n;
    }
    if (logits && logits_all)
        memcpy(logits, logits_all + (size_t)(n - 1) * V, (size_t)V * sizeof(float));
    if (!be->ops->finish(be, error))
        return FALSE; /* the cache keeps its length: the new positions are not in it */
    c->len = pos;

    if (r->tap && (logits || logits_all))
        tap_rows(r->tap, r->tap_data, NULL, "dec.logits",
                 logits ? logits : logits_all + (size_t)(n - 1) * V, 0, V);
    return TRUE;
}

gboolean cl_decoder_forward(ClBackend *be, const ClModel *model, ClKVCache *cache,
                            const gint32 *ids, int n, const float *visual, float *logits,
                            float *logits_all, ClTensorTap tap, gpointer tap_data, GError **error)
{
    g_return_val_if_fail(be != NULL && model != NULL && cache != NULL, FALSE);
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    ClDecRun r = { .tap = tap, .tap_data = tap_data };
    return forward(&r, be, model, cache, ids, n, visual, logits, logits_all, error);
}

gboolean cl_decoder_forward_attention(ClBackend *be, const ClModel *model, ClKVCache *cache,
                                      const gint32 *ids, int n, const float *visual, float *logits,
                                      int layer, int q0, float *att, GError **error)
{
    g_return_val_if_fail(be != NULL && model != NULL && cache != NULL && att != NULL, FALSE);
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    const ClModelConfig *cfg = &model->config;
    const int depth = cfg->dec_depth, end = cache->len + MAX(n, 0);
    if (layer < 0)
        layer += depth;
    if (cache->window || cache->sp_block > 0 || cfg->casa != CL_CASA_OFF) {
        /* the map is the dense softmax over every earlier position in the sequence */
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "Attention maps come from an ordinary KV cache and a model with its images "
                    "in the sequence (not streaming, sparse or CASA)");
        return FALSE;
    }
    if (layer < 0 || layer >= MIN(depth, cache->depth) || cache->kv_slot[layer] < 0 ||
        q0 < cache->len || q0 > end) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "No attention map of layer %d from position %d (a self-attention layer of "
                    "%d, positions %d..%d)",
                    layer, q0, depth, cache->len, end);
        return FALSE;
    }
    memset(att, 0, sizeof(float) * (size_t)(end - q0) * end);
    ClDecRun r = { .att_layer = layer, .att_q0 = q0, .att_cols = end, .att_out = att };
    return forward(&r, be, model, cache, ids, n, visual, logits, NULL, error);
}
