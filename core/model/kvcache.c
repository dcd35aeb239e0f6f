/* kvcache.c - the decoder's state (decoder.h, docs/MODEL.md §4): keys and values per layer in the
 * backend's memory (ordinary, streaming ring), the options' state beside them, and the workspace
 * a forward call runs in. */
#include "model/decoder-options.h"

#include <string.h>

static int cl_kv_layers(const ClModelConfig *cfg)
{
    int n = 0;
    for (int l = 0; l < cfg->dec_depth; l++)
        n += !cl_config_is_gdn(cfg, l) && !cl_config_casa_replaced(cfg, l);
    return n;
}

gboolean cl_dec_same_model(const ClKVCache *c, const ClModelConfig *cfg)
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
