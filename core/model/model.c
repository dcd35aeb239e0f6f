/* model.c - a model: config + weights + tokenizer, bound to a safetensors file (F32 used in
 * place from a private mapping, F16/BF16 converted) or seeded random weights (docs/MODEL.md). */
#include "cl-config.h"

#include "model/model.h"
#include "model/gguf-model.h"
#include "model/model-quant.h"

#include <math.h>
#include <string.h>

#include "nn/half.h"
#include "model/safetensors.h"

#define MODEL_FAIL(code, ...) g_set_error(error, CL_MODEL_ERROR, code, __VA_ARGS__)

static guint64 next_serial(void)
{
    static gint64 counter = 0; /* GLib has no 64-bit atomic add; a lock is cheap here */
    static GMutex lock;
    g_mutex_lock(&lock);
    guint64 s = (guint64)++counter;
    g_mutex_unlock(&lock);
    return s;
}

void cl_model_weights_changed(ClModel *model)
{
    g_return_if_fail(model != NULL);
    model->serial = next_serial();
}

/* ---- the device copy of the weights ---------------------------------------------------------- */

typedef struct {
    ClBackend *be;  /* not a reference: the copy lives on (and dies with) this backend */
    guint64 serial; /* of the model it copies */
    ClModelWeights w;
    void *block; /* every tensor, in the backend's memory */
} DeviceWeights;

static void device_weights_free(gpointer p)
{
    DeviceWeights *d = p;
    if (!d)
        return;
    if (d->block)
        d->be->ops->release(d->be, d->block);
    cl_model_weights_clear(&d->w);
    g_free(d);
}

/* The blocks that stand for a weight whose f32 view is NULL (a quantized model's decoder matrix
 * or untied output matrix): `slot` is a field of `src` (the model's weights as copied for the
 * device, whose per-layer arrays are the model's own); NULL when none does. */
static const ClQuantMatrix *quant_for_slot(const ClModel *model, const ClModelWeights *src,
                                           float **slot)
{
    const ClQuantWeights *q = model->quant;
    if (!q)
        return NULL;
    if (slot == &src->lm_head)
        return q->lm_head.data ? &q->lm_head : NULL;
    for (int l = 0; q->dec && l < model->config.dec_depth; l++) {
        ClDecoderLayerWeights *L = &src->dec[l];
        const ClQuantLayer *Q = &q->dec[l];
        const ClQuantMatrix *m = slot == &L->q      ? &Q->q
                                 : slot == &L->k    ? &Q->k
                                 : slot == &L->v    ? &Q->v
                                 : slot == &L->o    ? &Q->o
                                 : slot == &L->gate ? &Q->gate
                                 : slot == &L->up   ? &Q->up
                                 : slot == &L->down ? &Q->down
                                                    : NULL;
        if (m)
            return m->data ? m : NULL;
    }
    return NULL;
}

/* A quantized matrix's f32 values (rows × cols) into `out`, for a device's copy. */
static void dequantize_matrix(const ClQuantMatrix *m, gint64 rows, gint64 cols, float *out)
{
    if (!m->x4) {
        cl_dequantize_rows(m->type, m->data, out, (int)rows, (int)cols);
        return;
    }
    g_autofree guint8 *plain = g_malloc(cl_quant_row_bytes(m->type, (int)cols) * (size_t)rows);
    cl_quant_unpack4(m->type, m->data, plain, (int)rows, (int)cols);
    cl_dequantize_rows(m->type, plain, out, (int)rows, (int)cols);
}

/* A quantized model's matrices reach a device as f32 (dequantized once, at the upload): the
 * device runs f32 products, and the CPU keeps its blocks. */
const ClModelWeights *cl_model_weights_on(const ClModel *model, ClBackend *be, GError **error)
{
    g_return_val_if_fail(model != NULL && be != NULL, NULL);
    if (be->ops->host_memory)
        return &model->w;
    DeviceWeights *d = be->cache;
    if (d && be->cache_free == device_weights_free && d->serial == model->serial)
        return &d->w;
    /* one model at a time: drop the copy of another */
    if (be->cache && be->cache_free)
        be->cache_free(be->cache);
    be->cache = NULL;
    be->cache_free = NULL;

    ClModelWeights src = model->w; /* its enc/dec arrays are the model's: only read */
    d = g_new0(DeviceWeights, 1);
    d->be = be;
    d->serial = model->serial;
    g_autoptr(GPtrArray) from = cl_model_weight_specs(&model->config, &src);
    g_autoptr(GPtrArray) to = cl_model_weight_specs(&model->config, &d->w);
    size_t total = 0;
    for (guint i = 0; i < from->len; i++) {
        gint64 n = cl_weight_spec_numel(from->pdata[i]);
        total += ((size_t)n + 63) & ~(size_t)63; /* 256-byte aligned tensors */
    }
    d->block = be->ops->alloc(be, MAX(total, 1) * sizeof(float));
    if (!d->block) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "Not enough %s memory for the model's weights (%.1f MB)", cl_backend_name(be),
                    total * 4.0 / 1e6);
        device_weights_free(d);
        return NULL;
    }
    float *at = d->block;
    for (guint i = 0; i < from->len; i++) {
        const ClWeightSpec *f = from->pdata[i], *t = to->pdata[i];
        size_t n = (size_t)cl_weight_spec_numel(f);
        *t->slot = at;
        const ClQuantMatrix *qm = *f->slot ? NULL : quant_for_slot(model, &src, f->slot);
        if (qm && f->ndim == 2) {
            g_autofree float *values = g_try_new(float, n);
            if (!values) {
                g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                            "Not enough memory to dequantize %s (%.1f MB)", f->name, n * 4.0 / 1e6);
                device_weights_free(d);
                return NULL;
            }
            dequantize_matrix(qm, f->shape[0], f->shape[1], values);
            be->ops->upload(be, at, values, n * sizeof(float));
        } else if (*f->slot) {
            be->ops->upload(be, at, *f->slot, n * sizeof(float));
        } else {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "%s has no values to copy to the %s", f->name, cl_backend_name(be));
            device_weights_free(d);
            return NULL;
        }
        at += (n + 63) & ~(size_t)63;
    }
    /* tied embeddings: the head is the embedding */
    if (model->w.lm_head && model->w.lm_head == model->w.embed)
        d->w.lm_head = d->w.embed;
    if (!be->ops->finish(be, error)) {
        device_weights_free(d);
        return NULL;
    }
    be->cache = d;
    be->cache_free = device_weights_free;
    return &d->w;
}

void cl_model_free(ClModel *model)
{
    if (!model)
        return;
    g_clear_pointer(&model->tokenizer, cl_tokenizer_free);
    g_free(model->arena);
    cl_quant_weights_free(model->quant);
    g_clear_pointer(&model->mapping, g_mapped_file_unref);
    g_free(model->path);
    g_free(model->sha256);
    cl_model_weights_clear(&model->w);
    g_free(model);
}

size_t cl_model_n_params(const ClModelConfig *cfg)
{
    g_return_val_if_fail(cfg != NULL, 0);
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(cfg, NULL);
    size_t n = 0;
    for (guint i = 0; i < specs->len; i++)
        n += (size_t)cl_weight_spec_numel(g_ptr_array_index(specs, i));
    return n;
}

static char *sha256_hex(const guint8 *bytes, gsize size)
{
    GChecksum *sum = g_checksum_new(G_CHECKSUM_SHA256);
    for (gsize at = 0; at < size;) {
        gsize n = MIN(size - at, (gsize)1 << 30);
        g_checksum_update(sum, bytes + at, (gssize)n);
        at += n;
    }
    char *hex = g_strdup(g_checksum_get_string(sum));
    g_checksum_free(sum);
    return hex;
}

static char *shape_str(const gint64 *shape, int ndim)
{
    GString *s = g_string_new("[");
    for (int d = 0; d < ndim; d++)
        g_string_append_printf(s, "%s%" G_GINT64_FORMAT, d ? ", " : "", shape[d]);
    g_string_append_c(s, ']');
    return g_string_free(s, FALSE);
}

/* ---- loading -------------------------------------------------------------------------------- */

/* F32 straight from the buffer: little-endian host and 4-byte aligned address. */
static gboolean usable_in_place(const ClSafeTensor *t)
{
    return t->dtype == CL_DTYPE_F32 && G_BYTE_ORDER == G_LITTLE_ENDIAN &&
           ((guintptr)t->data % sizeof(float)) == 0;
}

static void convert(float *dst, const ClSafeTensor *t)
{
    const guint8 *p = t->data; /* any alignment: read element by element */
    if (t->dtype == CL_DTYPE_F32) {
        if (G_BYTE_ORDER == G_LITTLE_ENDIAN) {
            memcpy(dst, p, t->numel * sizeof(float));
            return;
        }
        for (guint64 i = 0; i < t->numel; i++) {
            guint32 v;
            memcpy(&v, p + 4 * i, 4);
            v = GUINT32_FROM_LE(v);
            memcpy(&dst[i], &v, 4);
        }
        return;
    }
    for (guint64 i = 0; i < t->numel; i++) {
        guint16 v;
        memcpy(&v, p + 2 * i, 2);
        v = GUINT16_FROM_LE(v);
        dst[i] = t->dtype == CL_DTYPE_F16 ? cl_f16_to_f32(v) : cl_bf16_to_f32(v);
    }
}

/* Binds the parsed file to a new model; `in_place`: F32 tensors may point into st->bytes
 * (which must then stay valid: the caller keeps the mapping). */
static ClModel *model_from_safetensors(const ClSafetensors *st, gboolean in_place, GError **error)
{
    const char *format = cl_safetensors_metadata(st, "changelens.format");
    if (!format) {
        MODEL_FAIL(CL_MODEL_ERROR_FILE,
                   "not a ChangeLens model: no changelens.format in __metadata__");
        return NULL;
    }
    if (strcmp(format, "1") != 0) {
        MODEL_FAIL(CL_MODEL_ERROR_FILE, "unsupported changelens.format '%s' (this build reads 1)",
                   format);
        return NULL;
    }
    const char *cfg_json = cl_safetensors_metadata(st, "changelens.config");
    const char *tok_json = cl_safetensors_metadata(st, "changelens.tokenizer");
    if (!cfg_json || !tok_json) {
        MODEL_FAIL(CL_MODEL_ERROR_FILE, "no %s in __metadata__",
                   !cfg_json ? "changelens.config" : "changelens.tokenizer");
        return NULL;
    }
    g_autoptr(ClModel) model = g_new0(ClModel, 1);
    model->serial = next_serial();
    if (!cl_model_config_from_json(&model->config, cfg_json, error))
        return NULL;
    /* untrusted: the strict checks (depth, NULs, duplicates) before the tokenizer's parser */
    JsonNode *tok_root = cl_json_parse_strict(tok_json, -1, CL_MODEL_ERROR_TOKENIZER, error);
    if (!tok_root) {
        g_prefix_error(error, "tokenizer: ");
        return NULL;
    }
    json_node_unref(tok_root);
    model->tokenizer = cl_tokenizer_from_json(tok_json, error);
    if (!model->tokenizer)
        return NULL;
    int tok_vocab = cl_tokenizer_vocab_size(model->tokenizer);
    if (model->config.vocab_size < tok_vocab) {
        MODEL_FAIL(CL_MODEL_ERROR_CONFIG,
                   "config: vocab_size (%d) is smaller than the tokenizer's %d tokens",
                   model->config.vocab_size, tok_vocab);
        return NULL;
    }

    /* the matrices stored as quantized blocks (docs/MODEL.md §7) */
    const char *quant_json = cl_safetensors_metadata(st, "changelens.quant");
    g_autoptr(GHashTable) quant = NULL;
    if (quant_json && !(quant = cl_model_quant_parse(&model->config, quant_json, error)))
        return NULL;

    /* every expected tensor with its exact shape, before anything is allocated */
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(&model->config, &model->w);
    g_autoptr(GHashTable) expected = g_hash_table_new(g_str_hash, g_str_equal);
    guint64 arena_n = 0, n_params = 0;
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        g_hash_table_add(expected, s->name);
        const ClSafeTensor *t = cl_safetensors_get(st, s->name);
        if (!t) {
            MODEL_FAIL(CL_MODEL_ERROR_FILE, "missing tensor '%s'", s->name);
            return NULL;
        }
        if (quant && g_hash_table_contains(quant, s->name)) {
            guint64 numel;
            if (!cl_model_quant_check_tensor(&model->config, quant, t, &numel, error))
                return NULL;
            n_params += numel;
            continue;
        }
        if (t->dtype == CL_DTYPE_U8) {
            MODEL_FAIL(CL_MODEL_ERROR_FILE,
                       "tensor '%s' is U8 (quantized blocks), but changelens.quant does not "
                       "list it",
                       s->name);
            return NULL;
        }
        gboolean same = t->ndim == s->ndim;
        for (int d = 0; same && d < s->ndim; d++)
            same = t->shape[d] == s->shape[d];
        if (!same) {
            g_autofree char *got = shape_str(t->shape, t->ndim);
            g_autofree char *want = shape_str(s->shape, s->ndim);
            MODEL_FAIL(CL_MODEL_ERROR_FILE, "tensor '%s' has shape %s, the config needs %s",
                       s->name, got, want);
            return NULL;
        }
        n_params += t->numel;
        if (!(in_place && usable_in_place(t)))
            arena_n += t->numel;
    }
    for (guint i = 0; i < st->tensors->len; i++) {
        const ClSafeTensor *t = g_ptr_array_index(st->tensors, i);
        gboolean tied = model->config.tie_embeddings && strcmp(t->name, "dec.lm_head.weight") == 0;
        if (tied && quant && g_hash_table_contains(quant, t->name)) {
            /* a tied output matrix's quantized copy */
            guint64 numel;
            if (!cl_model_quant_check_tensor(&model->config, quant, t, &numel, error))
                return NULL;
            continue;
        }
        if (!g_hash_table_contains(expected, t->name)) {
            MODEL_FAIL(CL_MODEL_ERROR_FILE, "unexpected tensor '%s'%s (not part of this config)",
                       t->name, tied ? " with tie_embeddings" : "");
            return NULL;
        }
    }

    if (arena_n) {
        model->arena = g_try_malloc_n((gsize)arena_n, sizeof(float));
        if (!model->arena) {
            MODEL_FAIL(CL_MODEL_ERROR_NO_MEMORY,
                       "out of memory for %" G_GUINT64_FORMAT " parameters", arena_n);
            return NULL;
        }
    }
    float *at = model->arena;
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        const ClSafeTensor *t = cl_safetensors_get(st, s->name);
        if (quant && g_hash_table_contains(quant, s->name)) {
            *s->slot = NULL; /* model->quant's blocks stand for it */
        } else if (in_place && usable_in_place(t)) {
            /* the mapping is private and writable: in-place edits never reach the file */
            *s->slot = (float *)(guintptr)t->data;
        } else {
            *s->slot = at;
            convert(at, t);
            at += t->numel;
        }
    }
    if (model->config.tie_embeddings)
        model->w.lm_head = model->w.embed;
    if (quant && !cl_model_quant_bind(model, st, quant, in_place, error))
        return NULL;
    model->n_params = (size_t)n_params;
    model->sha256 = sha256_hex(st->bytes, st->size);
    return g_steal_pointer(&model);
}

ClModel *cl_model_load(const char *path, GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    if (cl_file_is_gguf(path)) /* a pretrained language model (gguf-model.h) */
        return cl_model_load_gguf(path, 0, FALSE, error);
    g_autoptr(ClSafetensors) st = cl_safetensors_open(path, error);
    if (!st)
        return NULL;
    ClModel *model = model_from_safetensors(st, TRUE, error);
    if (!model) {
        g_autofree char *display = g_filename_display_name(path);
        g_prefix_error(error, "%s: ", display);
        return NULL;
    }
    model->mapping = g_mapped_file_ref(st->mapping);
    model->path = g_strdup(path);
    return model;
}

ClModel *cl_model_load_from_bytes(const guint8 *bytes, gsize size, GError **error)
{
    g_return_val_if_fail(bytes != NULL || size == 0, NULL);
    g_autoptr(ClSafetensors) st =
        cl_safetensors_parse(bytes ? bytes : (const guint8 *)"", size, error);
    if (!st)
        return NULL;
    return model_from_safetensors(st, FALSE, error);
}

/* ---- random init ---------------------------------------------------------------------------- */

/* splitmix64: one independent stream per tensor, identical on every machine */
static guint64 splitmix64(guint64 *s)
{
    guint64 z = (*s += G_GUINT64_CONSTANT(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static guint64 stream_seed(guint64 seed, guint64 domain, guint64 index)
{
    guint64 s = seed;
    guint64 a = splitmix64(&s);
    s = a ^ domain ^ ((index + 1) * G_GUINT64_CONSTANT(0xD1B54A32D192ED03));
    return splitmix64(&s);
}

#define DOMAIN_INIT G_GUINT64_CONSTANT(0x494e4954)        /* "INIT" */
#define DOMAIN_SVE G_GUINT64_CONSTANT(0x5356455f494e4954) /* "SVE_INIT" */

/* N(0, std^2) by Box-Muller in double, both outputs used, cast to float. */
static void fill_normal(float *dst, gint64 n, double std, guint64 state)
{
    if (std == 0) {
        memset(dst, 0, (size_t)n * sizeof(float));
        return;
    }
    for (gint64 i = 0; i < n; i += 2) {
        double u1 = (double)((splitmix64(&state) >> 11) + 1) * 0x1p-53; /* (0, 1] */
        double u2 = (double)(splitmix64(&state) >> 11) * 0x1p-53;       /* [0, 1) */
        double r = std * sqrt(-2.0 * log(u1)), th = 2.0 * G_PI * u2;
        dst[i] = (float)(r * cos(th));
        if (i + 1 < n)
            dst[i + 1] = (float)(r * sin(th));
    }
}

static void fill_const(float *dst, gint64 n, float v)
{
    for (gint64 i = 0; i < n; i++)
        dst[i] = v;
}

static gboolean has_suffix(const char *s, const char *suffix)
{
    return g_str_has_suffix(s, suffix);
}

/* LayerNorm / RMSNorm gains: every norm weight of docs/MODEL.md §3-4 */
static gboolean is_norm_weight(const char *name)
{
    static const char *const norms[] = {
        ".ln1.weight",        ".ln2.weight",        ".attn_norm.weight",  ".mlp_norm.weight",
        "dec.norm.weight",    "merger.ln.weight",   ".sve.ln.weight",     ".sve.ffn_ln.weight",
        ".pvm.norm_a.weight", ".pvm.norm_b.weight", ".pvm.q_norm.weight", ".pvm.k_norm.weight",
        ".casa.norm.weight",  ".gdn.o_norm.weight"
    };
    for (gsize i = 0; i < G_N_ELEMENTS(norms); i++)
        if (has_suffix(name, norms[i]))
            return TRUE;
    return FALSE;
}

/* Gated DeltaNet's decay parameters as the reference code initialises them (docs/MODEL.md §4
 * §3.1): A ~ U(0, 16) as A_log = log A, dt ~ logU(1e-3, 1e-1) as dt_bias = softplus⁻¹(dt). */
static void init_gdn(ClModel *model, guint64 seed)
{
    const ClModelConfig *c = &model->config;
    guint64 r = seed ^ G_GUINT64_CONSTANT(0x47444e494e4954); /* "GDNINIT" */
    for (int l = 0; l < c->dec_depth; l++) {
        ClDecoderLayerWeights *L = &model->w.dec[l];
        if (!L->gdn_A_log)
            continue;
        for (int h = 0; h < c->gdn_heads; h++) {
            double u1 = (double)(splitmix64(&r) >> 11) * 0x1p-53;
            double u2 = (double)(splitmix64(&r) >> 11) * 0x1p-53;
            L->gdn_A_log[h] = (float)log(MAX(16.0 * u1, 1e-4));
            double dt = exp(log(1e-3) + u2 * (log(1e-1) - log(1e-3)));
            dt = MAX(dt, 1e-4);
            L->gdn_dt_bias[h] = (float)(dt + log(-expm1(-dt))); /* softplus⁻¹ */
        }
    }
}

/* The decoder matrices a quantized model keeps as blocks (ClQuantLayer's). */
static gboolean quantized_matrix(const char *name)
{
    static const char *const suffixes[] = {
        ".attn.q.weight",   ".attn.k.weight", ".attn.v.weight",   ".attn.o.weight",
        ".mlp.gate.weight", ".mlp.up.weight", ".mlp.down.weight",
    };
    if (!g_str_has_prefix(name, "dec.") || strstr(name, ".pvm.") || strstr(name, ".casa."))
        return FALSE;
    for (gsize k = 0; k < G_N_ELEMENTS(suffixes); k++)
        if (has_suffix(name, suffixes[k]))
            return TRUE;
    return FALSE;
}

static ClModel *model_new_random(const ClModelConfig *cfg, guint64 seed, gboolean quantized,
                                 GError **error);

ClModel *cl_model_new_random(const ClModelConfig *cfg, guint64 seed, GError **error)
{
    return model_new_random(cfg, seed, FALSE, error);
}

ClModel *cl_model_new_random_quantized(const ClModelConfig *cfg, guint64 seed, GError **error)
{
    g_return_val_if_fail(cfg != NULL, NULL);
    if (cfg->casa != CL_CASA_OFF || cfg->pvm_n_layers > 0 || cfg->hybrid_every > 0) {
        MODEL_FAIL(CL_MODEL_ERROR_CONFIG, "a quantized decoder is made of plain blocks (no "
                                          "CASA, PVM or Gated DeltaNet layers)");
        return NULL;
    }
    return model_new_random(cfg, seed, TRUE, error);
}

static ClModel *model_new_random(const ClModelConfig *cfg, guint64 seed, gboolean quantized,
                                 GError **error)
{
    g_return_val_if_fail(cfg != NULL, NULL);
    if (!cl_model_config_validate(cfg, error))
        return NULL;
    g_autoptr(ClModel) model = g_new0(ClModel, 1);
    model->serial = next_serial();
    model->config = *cfg;
    model->tokenizer = cl_tokenizer_new_bytes();
    if (cl_tokenizer_vocab_size(model->tokenizer) > cfg->vocab_size) {
        MODEL_FAIL(CL_MODEL_ERROR_CONFIG,
                   "config: vocab_size (%d) is smaller than the "
                   "tokenizer's %d tokens",
                   cfg->vocab_size, cl_tokenizer_vocab_size(model->tokenizer));
        return NULL;
    }
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(cfg, &model->w);
    size_t n = 0;
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        if (!(quantized && quantized_matrix(s->name)))
            n += (size_t)cl_weight_spec_numel(s);
    }
    if (quantized) {
        model->quant = g_new0(ClQuantWeights, 1);
        model->quant->dec = g_new0(ClQuantLayer, cfg->dec_depth);
    }
    model->arena = g_try_malloc_n(MAX(n, 1), sizeof(float));
    if (!model->arena) {
        MODEL_FAIL(CL_MODEL_ERROR_NO_MEMORY, "out of memory for %zu parameters", n);
        return NULL;
    }
    model->n_params = n;
    float *at = model->arena;
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        gint64 numel = cl_weight_spec_numel(s);
        if (quantized && quantized_matrix(s->name)) {
            *s->slot = NULL; /* model->quant's blocks stand for it */
            continue;
        }
        *s->slot = at;
        if (g_str_has_prefix(s->name, "ood.")) {
            /* no statistics yet: unit variance, and a threshold nothing reaches */
            fill_const(at, numel,
                       has_suffix(s->name, ".var")         ? 1.0f
                       : has_suffix(s->name, ".threshold") ? 1e30f
                                                           : 0.0f);
        } else if (strstr(s->name, ".sve.")) {
            /* cl_model_weights_insert_sve below */
        } else if (has_suffix(s->name, ".bias") || has_suffix(s->name, ".pvm.alpha")) {
            /* biases, and PVM's gate (its W_up stays random, so that d/dα is not 0) */
            fill_const(at, numel, 0.0f);
        } else if (is_norm_weight(s->name)) {
            fill_const(at, numel, 1.0f);
        } else {
            fill_normal(at, numel, 0.02, stream_seed(seed, DOMAIN_INIT, i));
        }
        at += numel;
    }
    if (cfg->tie_embeddings)
        model->w.lm_head = model->w.embed;
    cl_model_weights_insert_sve(model, seed);
    cl_model_weights_init_casa(model);
    init_gdn(model, seed);
    return g_steal_pointer(&model);
}

void cl_model_weights_init_casa(ClModel *model)
{
    g_return_if_fail(model != NULL);
    const ClModelConfig *c = &model->config;
    if (c->casa != CL_CASA_CA)
        return;
    const size_t E = c->dec_dim, hd = E / c->dec_heads;
    const size_t Q = c->dec_heads * hd, KV = c->dec_kv_heads * hd;
    for (int l = 0; l < c->dec_depth; l++) {
        ClDecoderLayerWeights *L = &model->w.dec[l];
        memcpy(L->casa_q, L->q, Q * E * sizeof(float));
        memcpy(L->casa_k, L->k, KV * E * sizeof(float));
        memcpy(L->casa_v, L->v, KV * E * sizeof(float));
        memcpy(L->casa_o, L->o, E * Q * sizeof(float));
    }
    cl_model_weights_changed(model);
}

/* pos (G·G, E) = a centred 2-D sin-cos grid times scale (docs/MODEL.md §3.8) */
static void fill_pos_grid(float *pos, int G, int E, double scale)
{
    const int M = G * G, q = E / 4;
    for (int m = 0; m < M; m++) {
        const double ij[2] = { m / G, m % G };
        float *row = pos + (size_t)m * E;
        memset(row, 0, sizeof(float) * (size_t)E);
        for (int a = 0; a < 2; a++)
            for (int k = 0; k < q; k++) {
                double f = pow(2.0, -4.0 * k / q);
                row[2 * a * q + k] = (float)sin(ij[a] * f);
                row[2 * a * q + q + k] = (float)cos(ij[a] * f);
            }
    }
    for (int e = 0; e < E; e++) {
        double mean = 0;
        for (int m = 0; m < M; m++)
            mean += pos[(size_t)m * E + e];
        mean /= M;
        for (int m = 0; m < M; m++)
            pos[(size_t)m * E + e] = (float)((pos[(size_t)m * E + e] - mean) * scale);
    }
}

gboolean cl_model_init_visual_pos_grid(ClModel *model, double scale)
{
    if (!model->config.visual_pos || !model->w.merger_pos)
        return FALSE;
    const int G = cl_config_grid(&model->config);
    fill_pos_grid(model->w.merger_pos, G / 2, model->config.dec_dim, scale);
    if (model->w.enc_pos) /* config enc_pos: the patch grid at the encoder's width */
        fill_pos_grid(model->w.enc_pos, G, model->config.enc_dim, scale);
    g_clear_pointer(&model->sha256, g_free);
    cl_model_weights_changed(model);
    return TRUE;
}

/* ---- SVE insertion (docs/MODEL.md §3.7) ----------------------------------------------------- */

static void copy_floats(float *dst, const float *src, size_t n)
{
    if (dst && src && dst != src)
        memcpy(dst, src, n * sizeof(float));
}

void cl_model_weights_insert_sve(ClModel *model, guint64 seed)
{
    g_return_if_fail(model != NULL);
    const ClModelConfig *c = &model->config;
    const size_t D = (size_t)c->enc_dim, F = (size_t)c->enc_mlp;
    for (int l = 0; l < c->enc_depth && model->w.enc; l++) {
        ClEncoderLayerWeights *L = &model->w.enc[l];
        guint64 idx = (guint64)l * 8;
        copy_floats(L->sve_ln_w, L->ln1_w, D);
        copy_floats(L->sve_ln_b, L->ln1_b, D);
        copy_floats(L->sve_q_w, L->qkv_w, D * D); /* q rows */
        copy_floats(L->sve_q_b, L->qkv_b, D);
        if (L->qkv_w)
            copy_floats(L->sve_kv_w, L->qkv_w + D * D, 2 * D * D); /* k then v rows */
        if (L->qkv_b)
            copy_floats(L->sve_kv_b, L->qkv_b + D, 2 * D);
        if (L->sve_out_w)
            fill_normal(L->sve_out_w, (gint64)(D * D), c->sve_out_init_std,
                        stream_seed(seed, DOMAIN_SVE, idx + 0));
        if (L->sve_out_b)
            fill_const(L->sve_out_b, (gint64)D, 0.0f);
        copy_floats(L->sve_ffn_ln_w, L->ln2_w, D);
        copy_floats(L->sve_ffn_ln_b, L->ln2_b, D);
        copy_floats(L->sve_fc1_w, L->fc1_w, F * D);
        copy_floats(L->sve_fc1_b, L->fc1_b, F);
        if (L->sve_fc2_w)
            fill_normal(L->sve_fc2_w, (gint64)(D * F), c->sve_out_init_std,
                        stream_seed(seed, DOMAIN_SVE, idx + 1));
        if (L->sve_fc2_b)
            fill_const(L->sve_fc2_b, (gint64)D, 0.0f);
        if (L->sve_ada_w)
            fill_normal(L->sve_ada_w, (gint64)(6 * D * D), c->sve_out_init_std,
                        stream_seed(seed, DOMAIN_SVE, idx + 2));
        if (L->sve_ada_b)
            fill_const(L->sve_ada_b, (gint64)(6 * D), 0.0f);
        if (L->sve_null)
            fill_normal(L->sve_null, (gint64)D, 0.02, stream_seed(seed, DOMAIN_SVE, idx + 3));
    }
    /* the weights no longer are the file's */
    g_clear_pointer(&model->sha256, g_free);
    cl_model_weights_changed(model);
}

/* ---- saving --------------------------------------------------------------------------------- */

gboolean cl_model_save(ClModel *model, const char *path, const char *dtype, GError **error)
{
    g_return_val_if_fail(model != NULL && path != NULL, FALSE);
    ClDtype dt;
    if (!cl_dtype_from_name(dtype ? dtype : "F32", &dt)) {
        MODEL_FAIL(CL_MODEL_ERROR_INPUT, "unknown dtype '%s' (F32, F16 or BF16)", dtype);
        return FALSE;
    }
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(&model->config, &model->w);
    g_autofree ClSafetensorsEntry *entries = g_new0(ClSafetensorsEntry, specs->len + 1);
    g_autofree gint64 *qshapes = g_new0(gint64, 3 * ((size_t)specs->len + 1));
    guint n_entries = specs->len;
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        if (cl_model_quant_entry(model, s->name, qshapes + 3 * i, &entries[i]))
            continue;
        if (!*s->slot) {
            MODEL_FAIL(CL_MODEL_ERROR_INPUT, "tensor '%s' has no data", s->name);
            return FALSE;
        }
        entries[i] = (ClSafetensorsEntry){ s->name, dt, s->ndim, s->shape, *s->slot };
    }
    /* a tied output matrix kept quantized: its copy after the others */
    if (model->config.tie_embeddings &&
        cl_model_quant_entry(model, "dec.lm_head.weight", qshapes + 3 * n_entries,
                             &entries[n_entries]))
        n_entries++;
    g_autofree char *cfg_json = cl_model_config_to_json(&model->config);
    g_autofree char *tok_json = cl_tokenizer_to_json(model->tokenizer);
    g_autofree char *quant_json = cl_model_quant_json(model);
    const char *meta[] = { "changelens.format",
                           "1",
                           "changelens.config",
                           cfg_json,
                           "changelens.tokenizer",
                           tok_json,
                           quant_json ? "changelens.quant" : NULL,
                           quant_json,
                           NULL };
    char *sha = NULL;
    if (!cl_safetensors_write(path, entries, n_entries, meta, &sha, error))
        return FALSE;
    g_free(model->sha256);
    model->sha256 = sha;
    g_free(model->path);
    model->path = g_strdup(path);
    return TRUE;
}

/* path is dir or inside it (both canonical, no trailing '/'). */
static gboolean path_within(const char *path, const char *dir)
{
    gsize n = strlen(dir);
    return n > 0 && strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

void cl_data_dirs_for(const char *exe, const char *source_root, const char *build_root,
                      const char *bindir, const char *datadir, const char *sub, char **source_dir,
                      char **install_dir)
{
    g_autofree char *exe_dir = g_path_get_dirname(exe);
    g_autofree char *build = g_canonicalize_filename(build_root, "/");
    g_autofree char *bin = g_canonicalize_filename(bindir, "/");
    if (path_within(exe_dir, build)) {
        /* run from its build folder, wherever that is (`meson setup ../b` as well as build/
         * inside the tree): the source tree meson configured it from */
        *source_dir = g_build_filename(source_root, "data", sub, NULL);
    } else {
        /* a build folder moved or copied along with its tree (TREE/BUILD/app/program) */
        *source_dir = g_build_filename(exe_dir, "..", "..", "data", sub, NULL);
    }
    if (path_within(exe_dir, build) || strcmp(exe_dir, bin) == 0)
        *install_dir = g_build_filename(datadir, "changelens", sub, NULL);
    else /* an install moved to another prefix: prefix/bin/program */
        *install_dir = g_build_filename(exe_dir, "..", "share", "changelens", sub, NULL);
}

void cl_data_dirs(const char *sub, char **source_dir, char **install_dir)
{
    g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
    g_autofree char *abs = exe ? NULL : g_canonicalize_filename("program", NULL);
    cl_data_dirs_for(exe ? exe : abs, CL_SOURCE_DIR, CL_BUILD_DIR, CL_BINDIR, CL_DATADIR, sub,
                     source_dir, install_dir);
}

char *cl_pretrained_path(const char *file)
{
    const char *env = g_getenv("CHANGELENS_DATA");
    g_autofree char *base =
        env && *env ? g_strdup(env) : g_build_filename(g_get_user_data_dir(), "changelens", NULL);
    return g_build_filename(base, "pretrained", file, NULL);
}

/* Every tensor of dst that src has by name gets src's values; the others (their names hold
 * `new_part`) keep their init. The shapes of shared names agree (the same config otherwise). */
static void copy_by_name(ClModel *dst, const ClModel *src, const char *new_part)
{
    g_autoptr(GPtrArray) sspecs = cl_model_weight_specs(&src->config, (ClModelWeights *)&src->w);
    g_autoptr(GHashTable) by_name = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint i = 0; i < sspecs->len; i++) {
        ClWeightSpec *s = g_ptr_array_index(sspecs, i);
        g_hash_table_insert(by_name, s->name, s);
    }
    g_autoptr(GPtrArray) dspecs = cl_model_weight_specs(&dst->config, &dst->w);
    for (guint i = 0; i < dspecs->len; i++) {
        const ClWeightSpec *d = g_ptr_array_index(dspecs, i);
        const ClWeightSpec *s = g_hash_table_lookup(by_name, d->name);
        if (!s) {
            g_assert(strstr(d->name, new_part) != NULL);
            continue;
        }
        g_assert(cl_weight_spec_numel(s) == cl_weight_spec_numel(d));
        memcpy(*d->slot, *s->slot, (size_t)cl_weight_spec_numel(d) * sizeof(float));
    }
    cl_model_weights_changed(dst);
}

/* m's tokenizer replaced by a copy of src's */
static gboolean take_tokenizer(ClModel *m, const ClModel *src, GError **error)
{
    g_autofree char *tok_json = cl_tokenizer_to_json(src->tokenizer);
    ClTokenizer *tok = cl_tokenizer_from_json(tok_json, error);
    if (!tok)
        return FALSE;
    cl_tokenizer_free(m->tokenizer);
    m->tokenizer = tok;
    return TRUE;
}

/* A random model of cfg (seeded) with src's tokenizer and every tensor of src by name; the new
 * ones (their names hold new_part) keep their init. */
ClModel *cl_model_reshaped(const ClModel *src, const ClModelConfig *cfg, guint64 seed,
                           const char *new_part, GError **error)
{
    g_autoptr(ClModel) m = cl_model_new_random(cfg, seed, error);
    if (!m || !take_tokenizer(m, src, error))
        return NULL;
    copy_by_name(m, src, new_part);
    return g_steal_pointer(&m);
}

ClModel *cl_model_grafted(const ClModel *vision, const ClModel *language, guint64 seed,
                          GError **error)
{
    ClModelConfig cfg = vision->config;
    const ClModelConfig *l = &language->config;
    cfg.dec_dim = l->dec_dim, cfg.dec_depth = l->dec_depth, cfg.dec_heads = l->dec_heads;
    cfg.dec_kv_heads = l->dec_kv_heads, cfg.dec_mlp = l->dec_mlp, cfg.vocab_size = l->vocab_size;
    cfg.rope_base = l->rope_base, cfg.max_len = l->max_len, cfg.norm_eps = l->norm_eps;
    cfg.tie_embeddings = l->tie_embeddings;
    cfg.pvm_n_layers = 0, cfg.casa = CL_CASA_OFF, cfg.casa_replace = 0, cfg.casa_gist = FALSE;
    cfg.casa_tv = FALSE, cfg.hybrid_every = 0, cfg.vist_chunk = 0, cfg.vist_sees_text = FALSE;
    cfg.ood = 0, cfg.ood_head = FALSE, cfg.ood_min_colour = 0;
    if (!cl_model_config_validate(&cfg, error))
        return NULL;
    g_autoptr(ClModel) m = cl_model_new_random(&cfg, seed, error);
    if (!m || !take_tokenizer(m, language, error))
        return NULL;
    const ClModel *src[2] = { vision, language };
    GHashTable *by_name[2];
    GPtrArray *specs[2];
    for (int k = 0; k < 2; k++) {
        specs[k] = cl_model_weight_specs(&src[k]->config, (ClModelWeights *)&src[k]->w);
        by_name[k] = g_hash_table_new(g_str_hash, g_str_equal);
        for (guint i = 0; i < specs[k]->len; i++) {
            ClWeightSpec *sp = g_ptr_array_index(specs[k], i);
            g_hash_table_insert(by_name[k], sp->name, sp);
        }
    }
    g_autoptr(GPtrArray) dspecs = cl_model_weight_specs(&m->config, &m->w);
    for (guint i = 0; i < dspecs->len; i++) {
        const ClWeightSpec *d = g_ptr_array_index(dspecs, i);
        const int k =
            g_str_has_prefix(d->name, "enc.") || g_str_has_prefix(d->name, "merger.") ? 0 : 1;
        const ClWeightSpec *sp = g_hash_table_lookup(by_name[k], d->name);
        if (sp && cl_weight_spec_numel(sp) == cl_weight_spec_numel(d))
            memcpy(*d->slot, *sp->slot, (size_t)cl_weight_spec_numel(d) * sizeof(float));
    }
    for (int k = 0; k < 2; k++) {
        g_hash_table_unref(by_name[k]);
        g_ptr_array_unref(specs[k]);
    }
    cl_model_weights_changed(m);
    return g_steal_pointer(&m);
}

/* ---- the default model ---------------------------------------------------------------------- */

/* The photo model and the radiograph-and-aerial one need the pretrained EfficientNet-Lite0 that
 * set-up fetches. */
static gboolean stem_model_usable(const char *dir, const char *file, char **path)
{
    g_autofree char *effnet = cl_pretrained_path("efficientnet-lite0.safetensors");
    g_autofree char *p = g_build_filename(dir, file, NULL);
    if (!g_file_test(p, G_FILE_TEST_IS_REGULAR) || !g_file_test(effnet, G_FILE_TEST_IS_REGULAR))
        return FALSE;
    *path = g_steal_pointer(&p);
    return TRUE;
}

static char *first_model_in(const char *dir, ClChatDomain domain)
{
    char *own = NULL;
    if (domain == CL_CHAT_DOMAIN_EDITS && stem_model_usable(dir, CL_MODEL_PHOTO_FILE, &own))
        return own;
    if ((domain == CL_CHAT_DOMAIN_RADIOGRAPH || domain == CL_CHAT_DOMAIN_AERIAL) &&
        stem_model_usable(dir, CL_MODEL_SCAN_FILE, &own))
        return own;
    g_autofree char *def = g_build_filename(dir, "changelens-default.safetensors", NULL);
    if (g_file_test(def, G_FILE_TEST_IS_REGULAR))
        return g_steal_pointer(&def);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    if (!d)
        return NULL;
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    const char *name;
    while ((name = g_dir_read_name(d)))
        if (g_str_has_suffix(name, ".safetensors"))
            g_ptr_array_add(names, g_strdup(name));
    if (names->len == 0)
        return NULL;
    const char *best = NULL;
    for (guint i = 0; i < names->len; i++)
        if (!best || strcmp(g_ptr_array_index(names, i), best) < 0)
            best = g_ptr_array_index(names, i);
    return g_build_filename(dir, best, NULL);
}

char *cl_model_find_default(GError **error)
{
    return cl_model_find_default_for(CL_CHAT_DOMAIN_GENERIC, error);
}

char *cl_model_find_default_for(ClChatDomain domain, GError **error)
{
    const char *env = g_getenv("CHANGELENS_MODEL");
    if (env && *env) {
        if (g_file_test(env, G_FILE_TEST_IS_REGULAR))
            return g_strdup(env);
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOENT,
                    "CHANGELENS_MODEL is set to %s, which is not a model file; pass --model FILE, "
                    "or --random-init tiny for an untrained model (its text is noise)",
                    env);
        return NULL;
    }
    char *dirs[2];
    cl_data_dirs("models", &dirs[0], &dirs[1]);
    char *found = NULL;
    for (guint i = 0; i < G_N_ELEMENTS(dirs) && !found; i++)
        found = first_model_in(dirs[i], domain);
    if (!found)
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOENT,
                    "no model given and no default model found (CHANGELENS_MODEL is not set; "
                    "nothing in %s or %s): pass --model FILE, or --random-init tiny for an "
                    "untrained model (its text is noise)",
                    dirs[0], dirs[1]);
    for (guint i = 0; i < G_N_ELEMENTS(dirs); i++)
        g_free(dirs[i]);
    return found;
}
