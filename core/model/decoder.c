/* decoder.c - the Llama-style causal decoder over a KV cache (docs/MODEL.md §4): the cache, and
 * the plain block (RMSNorm, attention with RoPE and GQA over the cache, SwiGLU) run as a chunked
 * prefill with sgemm attention or single-position decode steps with fused attention. Each
 * option's part is in its own file (decoder-options.h). */
#include "model/decoder-options.h"

#include <math.h>
#include <string.h>

/* Positions per pass through the layers: bounds the workspace (activations and the attention
 * scores) however long the prompt. A call with a tap runs as one chunk (the taps are whole). */
#define CHUNK 256

static int cl_kv_layers(const ClModelConfig *cfg)
{
    int n = 0;
    for (int l = 0; l < cfg->dec_depth; l++)
        n += !cl_config_is_gdn(cfg, l) && !cl_config_casa_replaced(cfg, l);
    return n;
}

static gboolean same_model(const ClKVCache *c, const ClModelConfig *cfg)
{
    return c->depth == cfg->dec_depth && c->e == cfg->dec_dim && c->f == cfg->dec_mlp &&
           c->heads == cfg->dec_heads && c->kv_heads == cfg->dec_kv_heads &&
           c->vocab == cfg->vocab_size && c->n_pvm == cfg->pvm_n_layers && c->casa == cfg->casa &&
           (!c->n_gdn || (c->gdn_h == cfg->gdn_heads && c->gdn_dk == cfg->gdn_dk &&
                          c->gdn_dv == cfg->gdn_dv && c->gdn_k == cfg->gdn_conv)) &&
           c->kv_layers == cl_kv_layers(cfg) &&
           (!c->n_pvm || (c->pvm_r == cfg->pvm_rank && c->pvm_heads == cfg->pvm_heads &&
                          c->pvm_f == cfg->pvm_mlp));
}

ClKVCache *cl_kv_cache_new(const ClModel *model, int capacity)
{
    g_return_val_if_fail(model != NULL, NULL);
    g_return_val_if_fail(capacity >= 1 && capacity <= CL_CONFIG_MAX_LEN, NULL);
    const ClModelConfig *cfg = &model->config;
    ClKVCache *c = g_new0(ClKVCache, 1);
    c->depth = cfg->dec_depth;
    c->capacity = capacity;
    c->e = cfg->dec_dim;
    c->f = cfg->dec_mlp;
    c->heads = cfg->dec_heads;
    c->kv_heads = cfg->dec_kv_heads;
    c->hd = cfg->dec_dim / cfg->dec_heads;
    c->kv_dim = c->kv_heads * c->hd;
    c->vocab = cfg->vocab_size;
    cl_dec_pvm_init(c, cfg);
    c->casa = cfg->casa;
    c->kv_slot = g_new(int, MAX(c->depth, 1));
    c->gdn_slot = g_new(int, MAX(c->depth, 1));
    for (int l = 0; l < c->depth; l++) {
        const gboolean gdn = cl_config_is_gdn(cfg, l);
        /* no keys or values: a GDN layer, or a layer whose self-attention CASA replaced */
        c->kv_slot[l] = gdn || cl_config_casa_replaced(cfg, l) ? -1 : c->kv_layers++;
        c->gdn_slot[l] = gdn ? c->n_gdn++ : -1;
    }
    if (!cl_dec_gdn_init(c, cfg)) {
        cl_dec_gdn_free(c);
        g_free(c->kv_slot), g_free(c->gdn_slot);
        g_free(c);
        return NULL;
    }
    size_t n = 0;
    if (!g_size_checked_mul(&n, (size_t)MAX(c->kv_layers, 1), (size_t)capacity) ||
        !g_size_checked_mul(&n, n, (size_t)c->kv_dim) ||
        !g_size_checked_mul(&n, n, sizeof(float)) || !(c->k = g_try_malloc(n)) ||
        !(c->v = g_try_malloc(n))) {
        g_free(c->k);
        cl_dec_gdn_free(c);
        g_free(c->kv_slot), g_free(c->gdn_slot);
        g_free(c);
        return NULL;
    }
    return c;
}

int cl_kv_cache_len(const ClKVCache *cache)
{
    g_return_val_if_fail(cache != NULL, 0);
    return cache->len;
}

static gboolean layout(ClKVCache *c, ClBackend *be, int rows, float *arena, size_t *total);

size_t cl_kv_cache_bytes(const ClKVCache *cache)
{
    g_return_val_if_fail(cache != NULL, 0);
    const ClKVCache *c = cache;
    size_t kv = c->k ? 2 * (size_t)MAX(c->kv_layers, 1) * c->capacity * c->kv_dim : 0;
    size_t gdn = (size_t)c->n_gdn * (c->gdn_state + c->gdn_conv_n);
    size_t arena = 0;
    if (c->arena)
        layout((ClKVCache *)c, c->arena_be, c->rows, NULL, &arena);
    size_t pvm = c->pvm_be ? (size_t)2 * c->n_pvm * c->pvm_cap * c->pvm_hp +
                                 (c->pvm_vis ? (size_t)c->pvm_cap * c->e : 0)
                           : 0;
    size_t casa = c->casa_be ? (size_t)2 * c->depth * c->casa_cap * c->kv_dim : 0;
    return (kv + arena + pvm + casa + gdn) * sizeof(float);
}

int cl_kv_cache_capacity(const ClKVCache *cache)
{
    g_return_val_if_fail(cache != NULL, 0);
    return cache->capacity;
}

void cl_kv_cache_truncate(ClKVCache *cache, int len)
{
    g_return_if_fail(cache != NULL);
    if (!cl_dec_stream_truncate_ok(cache, len) || !cl_dec_gdn_truncate(cache, len))
        return;
    cl_dec_casa_truncate(cache, len); /* (before the length changes: it cuts the window's text) */
    if (len >= 0 && len < cache->len)
        cache->len = len;
    cl_dec_pvm_truncate(cache, len);
}

void cl_kv_cache_set_position_shift(ClKVCache *cache, int shift)
{
    g_return_if_fail(cache != NULL);
    cache->pos_shift = shift;
}

static void kv_copy(ClBackend *be, float *dst, const float *src, size_t bytes);

gboolean cl_kv_cache_remove(ClKVCache *cache, int from, int count, GError **error)
{
    g_return_val_if_fail(cache != NULL, FALSE);
    ClKVCache *c = cache;
    if (c->window || c->n_gdn || c->n_pvm || c->casa != CL_CASA_OFF) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "Positions can only be removed from an ordinary KV cache (not a streaming, "
                    "hybrid, PVM or CASA one)");
        return FALSE;
    }
    if (from < 0 || count < 0 || from > c->len || count > c->len - from) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "Cannot remove positions %d..%d of a KV cache of %d", from, from + count,
                    c->len);
        return FALSE;
    }
    if (count == 0)
        return TRUE;
    /* the later rows move down in blocks of `count` rows: a block and its destination never
     * overlap, so a device copy (no overlap allowed) serves as well as memcpy */
    const size_t row = (size_t)c->kv_dim;
    for (int l = 0; l < c->kv_layers; l++)
        for (int kv = 0; kv < 2; kv++) {
            float *base = (kv ? c->v : c->k) + (size_t)l * c->capacity * row;
            for (int at = from + count; at < c->len; at += count) {
                const int n = MIN(count, c->len - at);
                kv_copy(c->kv_be, base + (size_t)(at - count) * row, base + (size_t)at * row,
                        (size_t)n * row * sizeof(float));
            }
        }
    c->len -= count;
    return TRUE;
}

static void kv_copy(ClBackend *be, float *dst, const float *src, size_t bytes)
{
    if (!bytes)
        return;
    if (be)
        be->ops->copy(be, dst, src, bytes);
    else
        memcpy(dst, src, bytes);
}

static void kv_release(ClKVCache *c)
{
    if (c->kv_be) {
        c->kv_be->ops->release(c->kv_be, c->k);
        c->kv_be->ops->release(c->kv_be, c->v);
        g_clear_pointer(&c->kv_be, cl_backend_free);
    } else {
        g_free(c->k);
        g_free(c->v);
    }
    c->k = c->v = NULL;
}

/* Moves k and v into the memory of device backend `be` (NULL: the host), keeping the cached
 * positions. FALSE (nothing changed) when that memory is short. */
static gboolean kv_move_to(ClKVCache *c, ClBackend *be, GError **error)
{
    if (be == c->kv_be)
        return TRUE;
    size_t n =
        (size_t)MAX(c->kv_layers, 1) * c->capacity * c->kv_dim * sizeof(float); /* checked in new */
    float *k = be ? be->ops->alloc(be, n) : g_try_malloc(n);
    float *v = be ? be->ops->alloc(be, n) : g_try_malloc(n);
    if (!k || !v) {
        if (be) {
            if (k)
                be->ops->release(be, k);
            if (v)
                be->ops->release(be, v);
        } else {
            g_free(k);
            g_free(v);
        }
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "Not enough %s memory for the KV cache (%d positions)",
                    be ? cl_backend_name(be) : "host", c->capacity);
        return FALSE;
    }
    size_t used = (size_t)MIN(c->len, c->capacity) * c->kv_dim * sizeof(float);
    for (int l = 0; l < c->kv_layers && used; l++) {
        size_t off = (size_t)l * c->capacity * c->kv_dim;
        for (int which = 0; which < 2; which++) {
            float *to = (which ? v : k) + off;
            const float *from = (which ? c->v : c->k) + off;
            if (be && c->kv_be) {
                g_autofree float *tmp = g_malloc(used);
                c->kv_be->ops->download(c->kv_be, tmp, from, used);
                be->ops->upload(be, to, tmp, used);
            } else if (be) {
                be->ops->upload(be, to, from, used);
            } else if (c->kv_be) {
                c->kv_be->ops->download(c->kv_be, to, from, used);
            }
        }
    }
    kv_release(c);
    c->k = k;
    c->v = v;
    c->kv_be = be ? cl_backend_ref(be) : NULL;
    return TRUE;
}

void cl_kv_cache_copy_from(ClKVCache *dst, const ClKVCache *src)
{
    g_return_if_fail(dst != NULL && src != NULL);
    g_return_if_fail(dst->depth == src->depth && dst->kv_dim == src->kv_dim && dst->e == src->e &&
                     dst->vocab == src->vocab);
    g_return_if_fail(dst->capacity >= MIN(src->len, src->capacity));
    g_return_if_fail(dst->capacity == src->capacity || !src->window);
    if (dst == src)
        return;
    dst->sink = src->sink;
    dst->pos_shift = src->pos_shift;
    dst->sp_block = src->sp_block;
    dst->sp_topk = src->sp_topk;
    dst->window = src->window;
    if (dst->kv_be != src->kv_be && !kv_move_to(dst, src->kv_be, NULL)) {
        g_warning("Not enough memory to copy a KV cache");
        return;
    }
    size_t row = (size_t)src->kv_dim * sizeof(float);
    const size_t filled = (size_t)MIN(src->len, src->capacity); /* streaming: every slot */
    for (int l = 0; l < src->kv_layers; l++) {
        kv_copy(src->kv_be, dst->k + (size_t)l * dst->capacity * dst->kv_dim,
                src->k + (size_t)l * src->capacity * src->kv_dim, row * filled);
        kv_copy(src->kv_be, dst->v + (size_t)l * dst->capacity * dst->kv_dim,
                src->v + (size_t)l * src->capacity * src->kv_dim, row * filled);
    }
    dst->len = src->len;
    cl_dec_gdn_copy(dst, src);
    cl_dec_casa_copy(dst, src);
    cl_dec_pvm_copy(dst, src);
}

void cl_kv_cache_free(ClKVCache *cache)
{
    if (!cache)
        return;
    kv_release(cache);
    cl_dec_pvm_release(cache);
    cl_dec_casa_release(cache);
    cl_dec_gdn_free(cache);
    g_free(cache->kv_slot);
    g_free(cache->gdn_slot);
    if (cache->arena_be) {
        cache->arena_be->ops->release(cache->arena_be, cache->arena);
        cl_backend_free(cache->arena_be);
    }
    g_free(cache->host_rope);
    g_free(cache);
}

/* total += a·b floats (64-byte aligned views), FALSE on overflow */
static gboolean add_floats(size_t *total, size_t a, size_t b)
{
    size_t p;
    if (!g_size_checked_mul(&p, a, b))
        return FALSE;
    p = (p + 15) & ~(size_t)15;
    return g_size_checked_add(total, *total, p);
}

static gboolean layout(ClKVCache *c, ClBackend *be, int rows, float *arena, size_t *total)
{
    size_t R = (size_t)rows, E = c->e, Q = (size_t)c->heads * c->hd, F = c->f;
    struct {
        float **view;
        size_t a, b;
    } parts[] = {
        { &c->x, R, E },
        { &c->h, R, E },
        { &c->q, R, Q },
        { &c->att, R, Q },
        { &c->proj, R, E },
        { &c->gate, R, F },
        { &c->up, R, F },
        { &c->scores, c->scratch_floats, 1 },
        { &c->rope_cos, R, (size_t)c->hd / 2 },
        { &c->rope_sin, R, (size_t)c->hd / 2 },
        { &c->logits, be->ops->host_memory ? 0 : R, (size_t)c->vocab },
        { &c->pa, c->n_pvm ? R : 0, (size_t)c->pvm_r },
        { &c->pb, c->n_pvm ? R : 0, (size_t)c->pvm_r },
        { &c->pc, c->n_pvm ? R : 0, (size_t)c->pvm_r },
        { &c->pg, c->n_pvm ? R : 0, (size_t)c->pvm_f },
        { &c->pu, c->n_pvm ? R : 0, (size_t)c->pvm_f },
        { &c->pp, c->n_pvm ? R : 0, E },
        { &c->ones, c->n_pvm ? 1 : 0, E },
        { &c->gq, c->n_gdn ? R : 0, (size_t)c->gdn_h * c->gdn_dk },
        { &c->gk, c->n_gdn ? R : 0, (size_t)c->gdn_h * c->gdn_dk },
        { &c->gv, c->n_gdn ? R : 0, (size_t)c->gdn_h * c->gdn_dv },
        { &c->gg, c->n_gdn ? R : 0, (size_t)c->gdn_h * c->gdn_dv },
        { &c->go, c->n_gdn ? R : 0, (size_t)c->gdn_h * c->gdn_dv },
        { &c->ga, c->n_gdn ? R : 0, (size_t)c->gdn_h },
        { &c->gb, c->n_gdn ? R : 0, (size_t)c->gdn_h },
    };
    size_t at = 0;
    for (size_t i = 0; i < G_N_ELEMENTS(parts); i++) {
        size_t before = at;
        if (!add_floats(&at, parts[i].a, parts[i].b))
            return FALSE;
        if (arena)
            *parts[i].view = arena + before;
    }
    *total = at;
    return TRUE;
}

gboolean cl_dec_ensure_workspace(ClKVCache *c, ClBackend *be, int rows, GError **error)
{
    /* the keys and values: host memory serves every host-memory backend as it is */
    if (!kv_move_to(c, be->ops->host_memory ? NULL : be, error))
        return FALSE;
    /* PVM attends with its own heads over at most `capacity` visual rows, CASA over the
     * window's */
    const int heads = MAX(c->heads, c->n_pvm ? c->pvm_heads : 0);
    const int keys = MAX(c->capacity, c->casa_cap);
    size_t scratch = be->ops->attention_scratch(be, rows, keys, heads);
    if (c->arena && c->arena_be == be && c->rows >= rows && c->scratch_floats >= scratch)
        return TRUE;
    if (c->arena_be == be)
        rows = MAX(rows, c->arena ? c->rows : 0); /* never shrink */
    scratch = be->ops->attention_scratch(be, rows, keys, heads);
    size_t total = 0, bytes = 0;
    float *arena = NULL;
    size_t old_scratch = c->scratch_floats;
    c->scratch_floats = scratch;
    if (!layout(c, be, rows, NULL, &total) || !g_size_checked_mul(&bytes, total, sizeof(float)) ||
        !(arena = be->ops->alloc(be, bytes))) {
        c->scratch_floats = old_scratch; /* counting moved no view: the old ones stay valid */
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "Not enough %s memory for the decoder's workspace (%d positions)",
                    cl_backend_name(be), rows);
        return FALSE;
    }
    if (c->arena_be) {
        c->arena_be->ops->release(c->arena_be, c->arena);
        cl_backend_free(c->arena_be);
    }
    c->arena = arena;
    c->arena_be = cl_backend_ref(be);
    c->rows = rows;
    layout(c, be, rows, arena, &total);
    if (!be->ops->host_memory) {
        g_free(c->host_rope);
        c->host_rope = g_new(float, (size_t)rows * MAX(c->hd, 2));
    }
    if (c->n_pvm) { /* RMSNorm0's unit gain */
        g_autofree float *ones = g_new(float, c->e);
        for (int i = 0; i < c->e; i++)
            ones[i] = 1.0f;
        be->ops->upload(be, c->ones, ones, (size_t)c->e * sizeof(float));
    }
    return TRUE;
}

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
            cl_quant_matvec(r->pool, q->type, q->data, n, k, x, out);
        else
            cl_quant_matmul(r->pool, q->type, q->data, n, k, x, cn, out);
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
            mv[j] = (ClQuantMatvec){ qs[j]->type, qs[j]->data, ns[j], outs[j] };
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
    if (!same_model(cache, cfg)) {
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
    r->quant = model->quant, r->pool = cl_backend_cpu_pool(be);
    if (r->quant && !r->pool) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "This model's decoder weights "
                    "are kept quantized (Q8_0/Q4_1), which runs on the CPU backend only");
        return FALSE;
    }
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
