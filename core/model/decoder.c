/* decoder.c - the Llama-style causal decoder over a KV cache (docs/MODEL.md §4): chunked
 * prefill with sgemm attention, single-position decode steps with fused attention. */
#include "model/decoder.h"

#include <math.h>
#include <string.h>

#include "model/gdn.h"

/* Positions per pass through the layers: bounds the workspace (activations and the attention
 * scores) however long the prompt. A call with a tap runs as one chunk (the taps are whole). */
#define CHUNK 256

struct _ClKVCache {
    int depth, capacity, len;
    /* layers with keys and values (all but the Gated DeltaNet ones) and each layer's slot among
     * them (-1: a GDN layer) */
    int kv_layers;
    int *kv_slot;
    /* the hybrid's Gated DeltaNet layers (host memory): per layer H states of dk × dv
     * (gdn_state floats) and the convolution's last inputs (gdn_conv_n floats) */
    int n_gdn, gdn_h, gdn_dk, gdn_dv, gdn_k;
    int *gdn_slot;
    size_t gdn_state, gdn_conv_n;
    float *gdn_S, *gdn_convst;
    /* its per-chunk activations, in the arena: (rows, H·dk) ×2, (rows, H·dv) ×3, (rows, H) ×2 */
    float *gq, *gk, *gv, *gg, *go, *ga, *gb;
    /* streaming (sink + window): positions p >= sink live in slot sink + (p − sink) % window
     * and len may exceed capacity = sink + window; 0: an ordinary cache */
    int sink, window;
    /* VIST2: the RoPE position of a row added now is its slot + pos_shift */
    int pos_shift;
    /* offline sparse prefill (sp_block > 0): a chunk's queries in blocks of sp_block positions
     * attend to the first key block, the previous one, their own and the sp_topk best others */
    int sp_block, sp_topk;
    int kv_dim;         /* Hkv · hd */
    int e, f, heads, kv_heads, hd, vocab;
    float *k, *v;       /* (depth, capacity, kv_dim) */
    ClBackend *kv_be;   /* a reference to the device backend k and v live on; NULL: host memory
                         * (g_malloc), which every host-memory backend uses as it is */

    /* workspace for `rows` positions at a time, grown on demand */
    ClBackend *arena_be; /* a reference to the backend the arena belongs to */
    int rows;
    size_t scratch_floats; /* attention scratch laid out (depends on the backend's threads) */
    float *arena;
    float *x;           /* (rows, E) the stream */
    float *h;           /* (rows, E) normalised */
    float *q;           /* (rows, Hq·hd) */
    float *att;         /* (rows, Hq·hd) */
    float *proj;        /* (rows, E) */
    float *gate, *up;   /* (rows, F) */
    float *scores;      /* attention scratch for (rows, capacity) */
    float *rope_cos;    /* (rows, hd/2) */
    float *rope_sin;
    /* device backends only: the logits before their download, (rows, V); the RoPE tables in
     * host memory before their upload */
    float *logits;
    float *host_rope;

    /* PVM (config pvm_layers): each PVM layer's keys and values of the prompt's visual rows,
     * (n_pvm, pvm_cap, hp) each, made by the call that brought them (the first at position
     * pvm_from) and kept for the decode steps after it */
    int n_pvm, pvm_r, pvm_heads, pvm_hp, pvm_f;
    ClBackend *pvm_be;  /* a reference to the backend pvm_k/pvm_v/pvm_vis live on */
    int pvm_cap, pvm_n, pvm_from;
    float *pvm_k, *pvm_v;
    float *pvm_vis;     /* (pvm_cap, E) the visual rows in backend memory (device backends) */
    /* the branch's activations, in the arena: (rows, r) ×3, (rows, Fp) ×2, (rows, E), (E) */
    float *pa, *pb, *pc, *pg, *pu, *pp, *ones;

    /* CASA (config casa): the current window's visual rows as every layer's cross-attention
     * keys and values, (depth, casa_cap, kv_dim) each; casa_open: the last position was visual
     * (more visual rows extend the window; text closes it, the next image starts a new one) */
    ClCasaVariant casa;
    ClBackend *casa_be; /* a reference to the backend casa_k/casa_v live on */
    int casa_cap, casa_rows;
    /* CA_{t+v}: the window's text rows' cross-attention keys and values after its visual rows
     * (casa_text of them), the window's first text position */
    int casa_text, casa_pos;
    gboolean casa_open;
    float *casa_k, *casa_v;
};

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

/* ---- CASA's window ---- */

static void casa_release(ClKVCache *c)
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

/* Room for n window rows on backend be, the rows already there kept. */
static gboolean casa_reserve(ClKVCache *c, ClBackend *be, int n, GError **error)
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
    casa_release(c);
    c->casa_k = k, c->casa_v = v;
    c->casa_cap = cap;
    c->casa_rows = keep - keep_text;
    c->casa_text = keep_text;
    c->casa_open = open;
    c->casa_be = cl_backend_ref(be);
    return TRUE;
}

/* ---- PVM's visual keys and values ---- */


static void pvm_release(ClKVCache *c)
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
    pvm_release(c);
    size_t kv = (size_t)c->n_pvm * n * c->pvm_hp * sizeof(float);
    size_t vis = be->ops->host_memory ? 0 : (size_t)n * c->e * sizeof(float);
    c->pvm_k = be->ops->alloc(be, kv);
    c->pvm_v = be->ops->alloc(be, kv);
    c->pvm_vis = vis ? be->ops->alloc(be, vis) : NULL;
    c->pvm_be = cl_backend_ref(be);
    if (!c->pvm_k || !c->pvm_v || (vis && !c->pvm_vis)) {
        pvm_release(c);
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "Not enough %s memory for the PVM's visual keys (%d rows)",
                    cl_backend_name(be), n);
        return FALSE;
    }
    c->pvm_cap = n;
    return TRUE;
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
    c->n_pvm = cfg->pvm_n_layers;
    c->pvm_r = cfg->pvm_rank;
    c->pvm_heads = cfg->pvm_heads;
    c->pvm_hp = c->n_pvm ? cfg->pvm_rank / cfg->pvm_heads : 0;
    c->pvm_f = cfg->pvm_mlp;
    c->casa = cfg->casa;
    c->kv_slot = g_new(int, MAX(c->depth, 1));
    c->gdn_slot = g_new(int, MAX(c->depth, 1));
    for (int l = 0; l < c->depth; l++) {
        const gboolean gdn = cl_config_is_gdn(cfg, l);
        /* no keys or values: a GDN layer, or a layer whose self-attention CASA replaced */
        c->kv_slot[l] = gdn || cl_config_casa_replaced(cfg, l) ? -1 : c->kv_layers++;
        c->gdn_slot[l] = gdn ? c->n_gdn++ : -1;
    }
    if (c->n_gdn) {
        c->gdn_h = cfg->gdn_heads, c->gdn_dk = cfg->gdn_dk, c->gdn_dv = cfg->gdn_dv;
        c->gdn_k = cfg->gdn_conv;
        c->gdn_state = (size_t)c->gdn_h * c->gdn_dk * c->gdn_dv;
        c->gdn_conv_n = (size_t)(c->gdn_k - 1) * c->gdn_h * (2 * c->gdn_dk + c->gdn_dv);
        c->gdn_S = g_try_new0(float, MAX((size_t)c->n_gdn * c->gdn_state, 1));
        c->gdn_convst = g_try_new0(float, MAX((size_t)c->n_gdn * c->gdn_conv_n, 1));
        if (!c->gdn_S || !c->gdn_convst) {
            g_free(c->gdn_S), g_free(c->gdn_convst), g_free(c->kv_slot), g_free(c->gdn_slot);
            g_free(c);
            return NULL;
        }
    }
    size_t n = 0;
    if (!g_size_checked_mul(&n, (size_t)MAX(c->kv_layers, 1), (size_t)capacity) ||
        !g_size_checked_mul(&n, n, (size_t)c->kv_dim) ||
        !g_size_checked_mul(&n, n, sizeof(float)) || !(c->k = g_try_malloc(n)) ||
        !(c->v = g_try_malloc(n))) {
        g_free(c->k);
        g_free(c);
        return NULL;
    }
    return c;
}

ClKVCache *cl_kv_cache_new_streaming(const ClModel *model, int sink, int window)
{
    g_return_val_if_fail(model != NULL, NULL);
    g_return_val_if_fail(sink >= 0 && window >= 1 && sink <= CL_CONFIG_MAX_LEN - window, NULL);
    ClKVCache *c = cl_kv_cache_new(model, sink + window);
    if (c) {
        c->sink = sink;
        c->window = window;
    }
    return c;
}

/* The slot of position p (streaming: the ring after the sink). */
static int slot_of(const ClKVCache *c, int p)
{
    if (!c->window || p < c->sink)
        return p;
    return c->sink + (p - c->sink) % c->window;
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
    /* streaming: the ring holds no position before the last window, so only a cut that
     * leaves every kept position in its slot is possible */
    if (cache->window && cache->len > cache->capacity && len > 0) {
        g_warning("A streaming KV cache past its window can only be truncated to 0");
        return;
    }
    if (cache->n_gdn && len > 0 && len < cache->len) {
        /* a recurrent state cannot be rewound */
        g_warning("A hybrid (Gated DeltaNet) KV cache can only be truncated to 0");
        return;
    }
    if (cache->n_gdn && len == 0) {
        memset(cache->gdn_S, 0, sizeof(float) * cache->n_gdn * cache->gdn_state);
        memset(cache->gdn_convst, 0, sizeof(float) * cache->n_gdn * cache->gdn_conv_n);
    }
    if (cache->casa_text > 0 && len >= 0 && len < cache->len) /* CA_{t+v}: its text cut too */
        cache->casa_text = MAX(0, cache->casa_text - (cache->len - len));
    if (len >= 0 && len < cache->len)
        cache->len = len;
    if (cache->pvm_n > 0 && len <= cache->pvm_from)
        cache->pvm_n = 0; /* the visual rows PVM read are gone */
    if (len == 0) { /* CASA: a new sequence has no window yet */
        cache->casa_rows = cache->casa_text = 0;
        cache->casa_open = FALSE;
    }
}

void cl_kv_cache_set_sparse_prefill(ClKVCache *cache, int block, int topk)
{
    g_return_if_fail(cache != NULL);
    cache->sp_block = MAX(block, 0);
    cache->sp_topk = MAX(topk, 0);
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
    size_t n = (size_t)MAX(c->kv_layers, 1) * c->capacity * c->kv_dim * sizeof(float); /* checked in new */
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
    g_return_if_fail(dst->depth == src->depth && dst->kv_dim == src->kv_dim &&
                     dst->e == src->e && dst->vocab == src->vocab);
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
    if (src->n_gdn) {
        memcpy(dst->gdn_S, src->gdn_S, sizeof(float) * src->n_gdn * src->gdn_state);
        memcpy(dst->gdn_convst, src->gdn_convst, sizeof(float) * src->n_gdn * src->gdn_conv_n);
    }
    dst->casa_rows = dst->casa_text = 0;
    dst->casa_open = FALSE;
    const int wrows = src->casa_rows + src->casa_text; /* CA_{t+v}: its text's rows too */
    if (src->casa_rows > 0 && casa_reserve(dst, src->casa_be, wrows, NULL)) {
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
    dst->pvm_n = 0;
    if (src->pvm_n > 0 && pvm_reserve(dst, src->pvm_be, src->pvm_n, NULL)) {
        /* the same (n_pvm, cap, hp) layout only when the capacities agree: copy per layer */
        size_t prow = (size_t)src->pvm_hp * sizeof(float);
        for (int l = 0; l < src->n_pvm; l++) {
            size_t so = (size_t)l * src->pvm_cap * src->pvm_hp,
                   d_o = (size_t)l * dst->pvm_cap * dst->pvm_hp;
            src->pvm_be->ops->copy(src->pvm_be, dst->pvm_k + d_o, src->pvm_k + so,
                                   prow * src->pvm_n);
            src->pvm_be->ops->copy(src->pvm_be, dst->pvm_v + d_o, src->pvm_v + so,
                                   prow * src->pvm_n);
        }
        dst->pvm_n = src->pvm_n;
        dst->pvm_from = src->pvm_from;
    }
}

void cl_kv_cache_free(ClKVCache *cache)
{
    if (!cache)
        return;
    kv_release(cache);
    pvm_release(cache);
    casa_release(cache);
    g_free(cache->kv_slot);
    g_free(cache->gdn_slot);
    g_free(cache->gdn_S);
    g_free(cache->gdn_convst);
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

static gboolean ensure_workspace(ClKVCache *c, ClBackend *be, int rows, GError **error)
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

/* PVM's keys and values of the call's n_vis visual rows (host memory `visual`), per PVM
 * layer: zv = Vimg W_v^T, k = RMSNorm_head(zv W_k^T), v = zv W_vv^T. */
static gboolean pvm_visual(ClKVCache *c, ClBackend *be, const ClModelConfig *cfg,
                           const ClModelWeights *w, const float *visual, int n_vis,
                           int first_pos, GError **error)
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

/* P = α · RMSNorm0(m' W_up^T) for the chunk's cn rows of h (docs/MODEL.md §4.2), zero at
 * visual rows; into c->pp. */
static void pvm_branch(ClKVCache *c, ClBackend *be, const ClDecoderLayerWeights *L, int slot,
                       const float *h, const gint32 *cid, int cn, float eps)
{
    const struct cl_backend_ops *op = be->ops;
    const int r = c->pvm_r, hp = c->pvm_hp, H = c->pvm_heads, Fp = c->pvm_f, E = c->e;
    const float *ks = c->pvm_k + (size_t)slot * c->pvm_cap * hp;
    const float *vs = c->pvm_v + (size_t)slot * c->pvm_cap * hp;
    op->linear(be, c->pa, h, L->pvm_t, NULL, cn, E, r);                 /* h W_t^T */
    op->rmsnorm(be, c->pa, c->pa, L->pvm_norm_a, cn, r, eps);          /* zq */
    op->linear(be, c->pb, c->pa, L->pvm_q, NULL, cn, r, r);             /* zq W_q^T */
    op->rmsnorm(be, c->pb, c->pb, L->pvm_q_norm, cn * H, hp, eps);     /* q, per head */
    op->attention(be, c->pc, NULL, c->pb, ks, vs, cn, c->pvm_n, r, hp, hp, r, H, 1, hp,
                  (float)(1.0 / sqrt((double)hp)), -1, 0, c->scores);
    op->linear(be, c->pa, c->pc, L->pvm_o, NULL, cn, r, r);             /* m */
    op->rmsnorm(be, c->pb, c->pa, L->pvm_norm_b, cn, r, eps);
    op->linear(be, c->pg, c->pb, L->pvm_gate, NULL, cn, r, Fp);
    op->linear(be, c->pu, c->pb, L->pvm_up, NULL, cn, r, Fp);
    op->silu_mul(be, c->pg, c->pg, c->pu, (size_t)cn * Fp);
    op->linear(be, c->pc, c->pg, L->pvm_down, NULL, cn, Fp, r);
    op->residual(be, c->pc, c->pa, NULL, cn, r);                        /* m' = m + SwiGLU */
    op->linear(be, c->pp, c->pc, L->pvm_out, NULL, cn, r, E);
    op->rmsnorm(be, c->pp, c->pp, c->ones, cn, E, eps);                 /* RMSNorm0 */
    op->scale_by(be, c->pp, L->pvm_alpha, (size_t)cn * E);              /* α · */
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

/* Rows of the next chunk from position pos, at most `want`: a streaming cache fills its slots
 * in chunks, then takes one position at a time (a chunk would overwrite keys its own earlier
 * rows still see). */
static int chunk_rows(const ClKVCache *c, int pos, int want)
{
    if (!c->window)
        return want;
    return pos < c->capacity ? MIN(want, c->capacity - pos) : 1;
}

/* What one forward call's helpers share. */
typedef struct {
    ClBackend *be;
    const ClModelConfig *cfg;
    const ClModelWeights *w;
    ClKVCache *c;
    gboolean host;
    ClTensorTap tap;
    gpointer tap_data;
    float eps, scale;
} Run;

/* A Gated DeltaNet layer in place of the attention (docs/MODEL.md §4.5), on cn rows of
 * c->x, its state carried in the cache: q, k, v through the causal convolution and SiLU, q and
 * k L2-normalised per head (q by 1/√dk too), beta = σ(h W_b), g = −exp(A_log)·softplus(h W_a +
 * dt_bias); the delta rule per head (gdn.h); y = RMSNorm_head(o; o_norm) ⊙ SiLU(h W_g);
 * x += y W_o^T. Host memory (the CPU backend). */
static void gdn_layer(const Run *r, const ClDecoderLayerWeights *L, int slot, int cn)
{
    ClBackend *be = r->be;
    const struct cl_backend_ops *op = be->ops;
    ClKVCache *c = r->c;
    const int E = c->e, H = c->gdn_h, dk = c->gdn_dk, dv = c->gdn_dv, K = c->gdn_k;
    const int Qk = H * dk, Vv = H * dv;
    op->rmsnorm(be, c->h, c->x, L->attn_norm, cn, E, r->eps);
    op->linear(be, c->gq, c->h, L->gdn_q, NULL, cn, E, Qk);
    op->linear(be, c->gk, c->h, L->gdn_k, NULL, cn, E, Qk);
    op->linear(be, c->gv, c->h, L->gdn_v, NULL, cn, E, Vv);
    op->linear(be, c->gg, c->h, L->gdn_g, NULL, cn, E, Vv);
    op->linear(be, c->ga, c->h, L->gdn_a, NULL, cn, E, H);
    op->linear(be, c->gb, c->h, L->gdn_b, NULL, cn, E, H);
    /* the causal convolutions (their states after the layer's earlier rows), then SiLU */
    float *st = c->gdn_convst + (size_t)slot * c->gdn_conv_n;
    float *tmp = g_new(float, (size_t)cn * MAX(Qk, Vv));
    struct {
        float *x;
        const float *w;
        int ch;
    } conv[3] = { { c->gq, L->gdn_conv_q, Qk }, { c->gk, L->gdn_conv_k, Qk },
                  { c->gv, L->gdn_conv_v, Vv } };
    for (int i = 0; i < 3; i++) {
        cl_causal_conv1d(tmp, st, conv[i].x, conv[i].w, cn, conv[i].ch, K);
        op->silu(be, conv[i].x, tmp, (size_t)cn * conv[i].ch);
        st += (size_t)(K - 1) * conv[i].ch;
    }
    g_free(tmp);
    /* per head: unit q and k (q scaled), beta, the log-decay */
    cl_gdn_gates(c->gq, c->gk, Qk, c->ga, c->ga, c->gb, c->gb, L->gdn_A_log, L->gdn_dt_bias, cn,
                 H, dk);
    /* the delta rule, head by head, on contiguous copies */
    float *qh = g_new(float, (size_t)cn * dk), *kh = g_new(float, (size_t)cn * dk);
    float *vh = g_new(float, (size_t)cn * dv), *oh = g_new(float, (size_t)cn * dv);
    float *gh = g_new(float, cn), *bh = g_new(float, cn);
    for (int h = 0; h < H; h++) {
        for (int i = 0; i < cn; i++) {
            memcpy(qh + (size_t)i * dk, c->gq + (size_t)i * Qk + (size_t)h * dk, dk * sizeof(float));
            memcpy(kh + (size_t)i * dk, c->gk + (size_t)i * Qk + (size_t)h * dk, dk * sizeof(float));
            memcpy(vh + (size_t)i * dv, c->gv + (size_t)i * Vv + (size_t)h * dv, dv * sizeof(float));
            gh[i] = c->ga[(size_t)i * H + h];
            bh[i] = c->gb[(size_t)i * H + h];
        }
        float *S = c->gdn_S + (size_t)slot * c->gdn_state + (size_t)h * dk * dv;
        if (cn == 1) /* a decode step: the recurrence is the cheaper form */
            cl_gdn_recurrent(oh, S, qh, kh, vh, gh, bh, cn, dk, dv);
        else
            cl_gdn_chunked(oh, S, qh, kh, vh, gh, bh, cn, dk, dv, 64);
        for (int i = 0; i < cn; i++)
            memcpy(c->go + (size_t)i * Vv + (size_t)h * dv, oh + (size_t)i * dv, dv * sizeof(float));
    }
    g_free(qh), g_free(kh), g_free(vh), g_free(oh), g_free(gh), g_free(bh);
    /* the gated output */
    op->rmsnorm(be, c->go, c->go, L->gdn_o_norm, cn * H, dv, r->eps);
    op->silu_mul(be, c->go, c->gg, c->go, (size_t)cn * Vv);
    op->linear(be, c->proj, c->go, L->gdn_o, NULL, cn, Vv, E);
    op->residual(be, c->x, c->proj, NULL, cn, E);
}

/* The offline sparse prefill's attention (docs/MODEL.md §4.5, InfLLM-V2's rule): the cn
 * queries at pos0.. in blocks of B positions; a query block qb attends, causally, to key block 0,
 * block qb − 1, its own block and the topk other earlier blocks whose mean key scores highest
 * against the block's mean query (the best over the query heads); with no more candidates than
 * that, to every earlier block (dense). Host memory. */
static void sparse_attention(const Run *r, const float *kl, const float *vl, int pos0, int cn)
{
    ClKVCache *c = r->c;
    ClBackend *be = r->be;
    const int B = c->sp_block, KV = c->kv_dim, Hq = c->heads, Hkv = c->kv_heads, hd = c->hd;
    const int Q = Hq * hd, grp = Hq / Hkv, end = pos0 + cn;
    const int nb = (end + B - 1) / B;
    /* each key block's mean key (its rows so far) */
    float *kmean = g_new0(float, (size_t)nb * KV);
    for (int kb = 0; kb < nb; kb++) {
        const int a = kb * B, b = MIN(end, a + B);
        float *m = kmean + (size_t)kb * KV;
        for (int j = a; j < b; j++)
            for (int e = 0; e < KV; e++)
                m[e] += kl[(size_t)j * KV + e];
        for (int e = 0; e < KV; e++)
            m[e] /= (float)(b - a);
    }
    float *gk = g_new(float, (size_t)end * KV), *gv = g_new(float, (size_t)end * KV);
    double *score = g_new(double, MAX(nb, 1));
    gboolean *take = g_new(gboolean, MAX(nb, 1));
    float *qmean = g_new(float, Q);
    for (int qb = pos0 / B; qb * B < end; qb++) {
        const int r0 = MAX(pos0, qb * B) - pos0, r1 = MIN(end, (qb + 1) * B) - pos0;
        const int extra = qb - 2; /* earlier blocks other than block 0 and qb − 1 */
        for (int kb = 0; kb < qb; kb++)
            take[kb] = extra <= c->sp_topk || kb == 0 || kb == qb - 1;
        if (extra > c->sp_topk) {
            memset(qmean, 0, sizeof(float) * Q);
            for (int i = r0; i < r1; i++)
                for (int e = 0; e < Q; e++)
                    qmean[e] += c->q[(size_t)i * Q + e];
            for (int kb = 1; kb < qb - 1; kb++) {
                double best = -INFINITY;
                for (int h = 0; h < Hq; h++) {
                    const float *qh = qmean + (size_t)h * hd;
                    const float *kh = kmean + (size_t)kb * KV + (size_t)(h / grp) * hd;
                    double d = 0;
                    for (int e = 0; e < hd; e++)
                        d += (double)qh[e] * kh[e];
                    best = MAX(best, d);
                }
                score[kb] = best;
            }
            for (int t = 0; t < c->sp_topk; t++) { /* the topk best, ties to the earlier */
                int arg = -1;
                for (int kb = 1; kb < qb - 1; kb++)
                    if (!take[kb] && (arg < 0 || score[kb] > score[arg]))
                        arg = kb;
                take[arg] = TRUE;
            }
        }
        /* the chosen blocks in order, then the own block's keys up to the last query */
        int g = 0;
        for (int kb = 0; kb < qb; kb++) {
            if (!take[kb])
                continue;
            memcpy(gk + (size_t)g * KV, kl + (size_t)kb * B * KV, sizeof(float) * B * KV);
            memcpy(gv + (size_t)g * KV, vl + (size_t)kb * B * KV, sizeof(float) * B * KV);
            g += B;
        }
        const int own = pos0 + r1 - qb * B;
        memcpy(gk + (size_t)g * KV, kl + (size_t)qb * B * KV, sizeof(float) * own * KV);
        memcpy(gv + (size_t)g * KV, vl + (size_t)qb * B * KV, sizeof(float) * own * KV);
        g += own;
        be->ops->attention(be, c->att + (size_t)r0 * Q, NULL, c->q + (size_t)r0 * Q, gk, gv,
                           r1 - r0, g, Q, KV, KV, Q, Hq, Hkv, hd, r->scale, g - (r1 - r0), 0,
                           c->scores);
    }
    g_free(kmean), g_free(gk), g_free(gv), g_free(score), g_free(take), g_free(qmean);
}

/* CASA's cross-attention of the cn rows of c->h (normalised) to the window: x += o_c(CA). No
 * positions; CA_{t+v}: the window's text keys and values too (these rows' appended after the
 * text before them), causal, with RoPE (the rows' tables are in c->rope_cos/sin). */
static void casa_cross(const Run *r, const ClDecoderLayerWeights *L, int l, int cn)
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

/* Positions cid[0, cn) at positions pos0.. through every layer into c->x, their keys and values
 * into the cache. Insertion: visual ids take the next rows of `visual` from *vis_row. CASA: the
 * cross-attention to the window's visual rows beside the self-attention. */
static void run_layers(const Run *r, const gint32 *cid, int cn, int pos0, const float *visual,
                       int *vis_row)
{
    const int rope0 = pos0 + r->c->pos_shift; /* VIST2: positions other than the slots */
    ClBackend *be = r->be;
    const struct cl_backend_ops *op = be->ops;
    const ClModelConfig *cfg = r->cfg;
    const ClModelWeights *w = r->w;
    ClKVCache *c = r->c;
    const int E = c->e, F = c->f, Hq = c->heads, Hkv = c->kv_heads, hd = c->hd;
    const int Q = Hq * hd, KV = c->kv_dim;
    const float eps = r->eps, scale = r->scale;

    op->embed(be, c->x, w->embed, cid, cn, E);
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
        cl_rope_table_1d(c->rope_cos, c->rope_sin, rope0, cn, hd, cfg->rope_base);
    } else {
        size_t half = (size_t)cn * (hd / 2);
        cl_rope_table_1d(c->host_rope, c->host_rope + half, rope0, cn, hd, cfg->rope_base);
        op->upload(be, c->rope_cos, c->host_rope, half * sizeof(float));
        op->upload(be, c->rope_sin, c->host_rope + half, half * sizeof(float));
    }

    for (int l = 0; l < c->depth; l++) {
        const ClDecoderLayerWeights *L = &w->dec[l];
        if (c->gdn_slot[l] >= 0) { /* a Gated DeltaNet layer in place of the attention */
            gdn_layer(r, L, c->gdn_slot[l], cn);
            goto mlp;
        }
        if (c->kv_slot[l] < 0) { /* CASA's CA^#: the cross-attention alone (0 without a window) */
            if (c->casa_rows > 0) {
                op->rmsnorm(be, c->h, c->x, L->attn_norm, cn, E, eps);
                casa_cross(r, L, l, cn);
            }
            goto mlp;
        }
        float *kl = c->k + (size_t)c->kv_slot[l] * c->capacity * KV;
        float *vl = c->v + (size_t)c->kv_slot[l] * c->capacity * KV;
        /* streaming past the ring's first fill: one position, in its slot, attending to every
         * slot (the sink and the last window; their order does not matter to a softmax) */
        const gboolean ring = c->window && pos0 + cn > c->capacity;
        const int kslot = slot_of(c, pos0);
        float *kc = kl + (size_t)kslot * KV, *vc = vl + (size_t)kslot * KV;

        op->rmsnorm(be, c->h, c->x, L->attn_norm, cn, E, eps);
        op->linear(be, c->q, c->h, L->q, NULL, cn, E, Q);
        op->linear(be, kc, c->h, L->k, NULL, cn, E, KV);
        op->linear(be, vc, c->h, L->v, NULL, cn, E, KV);
        op->rope(be, c->q, c->rope_cos, c->rope_sin, cn, Q, Hq, hd, 1);
        op->rope(be, kc, c->rope_cos, c->rope_sin, cn, KV, Hkv, hd, 1);
        if (ring)
            op->attention(be, c->att, NULL, c->q, kl, vl, cn, c->capacity, Q, KV, KV, Q, Hq, Hkv,
                          hd, scale, -1, 0, c->scores);
        else if (c->sp_block > 0 && cn > 1 && !c->window)
            sparse_attention(r, kl, vl, pos0, cn);
        else
            op->attention(be, c->att, NULL, c->q, kl, vl, cn, pos0 + cn, Q, KV, KV, Q, Hq, Hkv,
                          hd, scale, pos0, 0, c->scores);
        op->linear(be, c->proj, c->att, L->o, NULL, cn, Q, E);
        op->residual(be, c->x, c->proj, NULL, cn, E);
        if (c->casa_rows > 0) /* CASA: x += CA(RMSNorm(x), window), from the same h */
            casa_cross(r, L, l, cn);

    mlp:;
        /* PVM beside the FFN: x = h + FFN(h) + P(h), P from h before the FFN's add */
        const int slot = c->n_pvm ? cl_config_pvm_slot(cfg, l) : -1;
        const gboolean pvm = slot >= 0 && c->pvm_n > 0;
        if (pvm)
            pvm_branch(c, be, L, slot, c->x, cid, cn, eps);
        op->rmsnorm(be, c->h, c->x, L->mlp_norm, cn, E, eps);
        op->linear(be, c->gate, c->h, L->gate, NULL, cn, E, F);
        op->linear(be, c->up, c->h, L->up, NULL, cn, E, F);
        op->silu_mul(be, c->gate, c->gate, c->up, (size_t)cn * F);
        op->linear(be, c->proj, c->gate, L->down, NULL, cn, F, E);
        op->residual(be, c->x, c->proj, NULL, cn, E);
        if (pvm)
            op->residual(be, c->x, c->pp, NULL, cn, E);

        if (r->tap) {
            g_autofree char *name = g_strdup_printf("dec.%d.out", l);
            tap_rows(r->tap, r->tap_data, r->host ? NULL : be, name, c->x, cn, E);
        }
    }
}

/* Logits of c->x's cn rows: every row's into rows_out (host, (cn, V)) when given, the last
 * row's into last (host) when given. On a device they are made in its memory, then downloaded. */
static void run_logits(const Run *r, int cn, float *rows_out, float *last)
{
    ClBackend *be = r->be;
    const struct cl_backend_ops *op = be->ops;
    ClKVCache *c = r->c;
    const ClModelWeights *w = r->w;
    const int E = c->e, V = c->vocab;
    const float *lm_head = w->lm_head ? w->lm_head : w->embed;
    if (rows_out) {
        float *dst = r->host ? rows_out : c->logits;
        op->rmsnorm(be, c->h, c->x, w->dec_norm, cn, E, r->eps);
        op->linear(be, dst, c->h, lm_head, NULL, cn, E, V);
        if (!r->host)
            op->download(be, rows_out, dst, (size_t)cn * V * sizeof(float));
    }
    if (last) {
        float *dst = r->host ? last : c->logits;
        op->rmsnorm(be, c->h, c->x + (size_t)(cn - 1) * E, w->dec_norm, 1, E, r->eps);
        op->linear(be, dst, c->h, lm_head, NULL, 1, E, V);
        if (!r->host)
            op->download(be, last, dst, (size_t)V * sizeof(float));
    }
}

/* The RoPE tables of `rows` rows all at position pos (in the workspace, on the backend). */
static void rope_tables_at(const Run *r, int pos, int rows)
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

/* CASA: k visual rows (host memory) join the window — a new window when text came since the
 * last visual row, its text starting at position pos — as every layer's keys and values
 * RMSNorm(y) W_k^T, RMSNorm(y) W_v^T (CA_{t+v}: the keys with RoPE at pos). */
static gboolean casa_window_add(const Run *r, const float *rows, int k, int pos, GError **error)
{
    ClBackend *be = r->be;
    const struct cl_backend_ops *op = be->ops;
    ClKVCache *c = r->c;
    const int E = c->e, KV = c->kv_dim;
    if (!c->casa_open) { /* a new window: its text starts at the next position */
        c->casa_rows = c->casa_text = 0;
        c->casa_pos = pos;
    }
    if (!casa_reserve(c, be, c->casa_rows + k, error) ||
        !ensure_workspace(c, be, c->rows, error))
        return FALSE;
    const gboolean own = r->cfg->casa == CL_CASA_CA, tv = r->cfg->casa_tv;
    for (int i0 = 0; i0 < k; i0 += c->rows) {
        const int b = MIN(c->rows, k - i0);
        op->upload(be, c->x, rows + (size_t)i0 * E, (size_t)b * E * sizeof(float));
        if (tv) /* CA_{t+v}: the visual rows' keys all at the window's first text position */
            rope_tables_at(r, c->casa_pos, b);
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

gboolean cl_decoder_forward(ClBackend *be, const ClModel *model, ClKVCache *cache,
                            const gint32 *ids, int n, const float *visual, float *logits,
                            float *logits_all, ClTensorTap tap, gpointer tap_data,
                            GError **error)
{
    g_return_val_if_fail(be != NULL && model != NULL && cache != NULL, FALSE);
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    const ClModelConfig *cfg = &model->config;

    /* every check before anything is written: a refused call leaves the cache as it was */
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
    int adds = n;
    if (cfg->casa != CL_CASA_OFF)
        for (int i = 0; i < n; i++)
            adds -= ids[i] == CL_DECODER_VISUAL;
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
    int rows = tap ? n : MIN(n, CHUNK);
    if (cfg->casa != CL_CASA_OFF && !tap) {
        /* CASA: only text runs go through the layers (a window's rows in blocks of these) */
        int longest = 1;
        for (int i = 0, run = 0; i < n; i++) {
            run = ids[i] == CL_DECODER_VISUAL ? 0 : run + 1;
            longest = MAX(longest, run);
        }
        rows = MIN(longest, CHUNK);
    }
    /* CA_{t+v}: room for the window's text this call may add (before the workspace, which is
     * sized for the window's keys) */
    if (cfg->casa_tv &&
        !casa_reserve(cache, be, cache->casa_rows + cache->casa_text + n, error))
        return FALSE;
    if (!ensure_workspace(cache, be, rows, error))
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
    const ClModelWeights *w = cl_model_weights_on(model, be, error);
    if (!w)
        return FALSE;
    const gboolean host = be->ops->host_memory;
    if (cache->n_pvm) {
        int n_vis = 0, first = -1;
        for (int i = 0; i < n; i++)
            if (ids[i] == CL_DECODER_VISUAL) {
                n_vis++;
                if (first < 0)
                    first = cache->len + i;
            }
        if (n_vis > 0 && !pvm_visual(cache, be, cfg, w, visual, n_vis, first, error))
            return FALSE;
    }

    Run r = { be, cfg, w, cache, host, tap, tap_data, (float)cfg->norm_eps,
              (float)(1.0 / sqrt((double)cache->hd)) };
    ClKVCache *c = cache;
    const int V = c->vocab;
    int pos = c->len;
    if (cfg->casa == CL_CASA_OFF) {
        int vis_row = 0;
        for (int c0 = 0, cn; c0 < n; c0 += cn) {
            cn = chunk_rows(c, pos + c0, MIN(rows, n - c0));
            run_layers(&r, ids + c0, cn, pos + c0, visual, &vis_row);
            const gboolean last = c0 + cn == n;
            run_logits(&r, cn, logits_all ? logits_all + (size_t)c0 * V : NULL,
                       last && logits && !logits_all ? logits : NULL);
        }
        pos += n;
    } else {
        /* CASA: a run of visual rows goes into the window; a run of text through the layers */
        int vis_row = 0;
        for (int i = 0; i < n;) {
            int run = 1;
            while (i + run < n &&
                   (ids[i + run] == CL_DECODER_VISUAL) == (ids[i] == CL_DECODER_VISUAL))
                run++;
            if (ids[i] == CL_DECODER_VISUAL) {
                if (!casa_window_add(&r, visual + (size_t)vis_row * c->e, run, pos, error))
                    return FALSE;
                vis_row += run;
                if (logits_all) /* visual rows have no logits here */
                    memset(logits_all + (size_t)i * V, 0, (size_t)run * V * sizeof(float));
                if (i + run == n && logits && !logits_all)
                    memset(logits, 0, (size_t)V * sizeof(float));
            } else {
                c->casa_open = FALSE;
                for (int c0 = 0, cn; c0 < run; c0 += cn) {
                    cn = chunk_rows(c, pos, MIN(rows, run - c0));
                    run_layers(&r, ids + i + c0, cn, pos, NULL, NULL);
                    if (cfg->casa_tv && c->casa_rows > 0)
                        c->casa_text += cn; /* their CA keys and values stay for the window */
                    const gboolean last = i + c0 + cn == n;
                    run_logits(&r, cn, logits_all ? logits_all + (size_t)(i + c0) * V : NULL,
                               last && logits && !logits_all ? logits : NULL);
                    pos += cn;
                }
            }
            i += run;
        }
    }
    if (logits && logits_all)
        memcpy(logits, logits_all + (size_t)(n - 1) * V, (size_t)V * sizeof(float));
    if (!be->ops->finish(be, error))
        return FALSE; /* the cache keeps its length: the new positions are not in it */
    c->len = pos;

    if (tap && (logits || logits_all))
        tap_rows(tap, tap_data, NULL, "dec.logits",
                 logits ? logits : logits_all + (size_t)(n - 1) * V, 0, V);
    return TRUE;
}
