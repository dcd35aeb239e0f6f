/* model-quant.c - a model's decoder matrices kept block-quantized (Q8_0/Q4_1, nn/quant.h): made
 * from f32 (cl_model_quantize), and stored in a model file as U8 tensors of blocks named in
 * __metadata__ "changelens.quant" (docs/MODEL.md §7). */
#include "model/model-quant.h"

#include <json-glib/json-glib.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define QFAIL(code, ...) g_set_error(error, CL_MODEL_ERROR, code, __VA_ARGS__)

/* ---- the matrices a model may keep quantized ------------------------------------------------ */

typedef struct {
    char name[64];
    int layer;   /* -1: the output matrix */
    size_t qoff; /* of the matrix in ClQuantLayer */
    size_t foff; /* of its f32 view in ClDecoderLayerWeights */
    int rows, cols;
} Slot;

#define N_LAYER_SLOTS 7

/* Layer l's seven matrices (q, k, v, o, gate, up, down), then (l == depth) the output matrix. */
static int slots_of(const ClModelConfig *c, int l, Slot out[N_LAYER_SLOTS])
{
    const int E = c->dec_dim, F = c->dec_mlp, hd = E / c->dec_heads;
    const int Q = c->dec_heads * hd, KV = c->dec_kv_heads * hd;
    if (l == c->dec_depth) {
        out[0] = (Slot){ "dec.lm_head.weight", -1, 0, 0, c->vocab_size, E };
        return 1;
    }
    static const struct {
        const char *suffix;
        size_t qoff, foff;
    } parts[N_LAYER_SLOTS] = {
        { "attn.q", offsetof(ClQuantLayer, q), offsetof(ClDecoderLayerWeights, q) },
        { "attn.k", offsetof(ClQuantLayer, k), offsetof(ClDecoderLayerWeights, k) },
        { "attn.v", offsetof(ClQuantLayer, v), offsetof(ClDecoderLayerWeights, v) },
        { "attn.o", offsetof(ClQuantLayer, o), offsetof(ClDecoderLayerWeights, o) },
        { "mlp.gate", offsetof(ClQuantLayer, gate), offsetof(ClDecoderLayerWeights, gate) },
        { "mlp.up", offsetof(ClQuantLayer, up), offsetof(ClDecoderLayerWeights, up) },
        { "mlp.down", offsetof(ClQuantLayer, down), offsetof(ClDecoderLayerWeights, down) },
    };
    const int rows[N_LAYER_SLOTS] = { Q, KV, KV, E, F, F, E };
    const int cols[N_LAYER_SLOTS] = { E, E, E, Q, E, E, F };
    for (int k = 0; k < N_LAYER_SLOTS; k++) {
        Slot *s = &out[k];
        g_snprintf(s->name, sizeof s->name, "dec.%d.%s.weight", l, parts[k].suffix);
        s->layer = l, s->qoff = parts[k].qoff, s->foff = parts[k].foff;
        s->rows = rows[k], s->cols = cols[k];
    }
    return N_LAYER_SLOTS;
}

static ClQuantMatrix *slot_matrix(ClQuantWeights *qw, const Slot *s)
{
    if (s->layer < 0)
        return &qw->lm_head;
    return (ClQuantMatrix *)((guint8 *)&qw->dec[s->layer] + s->qoff);
}

/* The f32 view the matrix stands for (the output matrix: lm_head, or the embedding when tied) */
static float **slot_f32(ClModel *m, const Slot *s)
{
    if (s->layer < 0)
        return m->w.lm_head ? &m->w.lm_head : &m->w.embed;
    return (float **)((guint8 *)&m->w.dec[s->layer] + s->foff);
}

static size_t block_bytes(ClQuantType t)
{
    return cl_quant_row_bytes(t, CL_QUANT_BLOCK);
}

gboolean cl_quant_type_from_name(const char *name, ClQuantType *out)
{
    for (int t = 0; t < CL_QUANT_N_TYPES && name; t++)
        if (g_ascii_strcasecmp(name, cl_quant_type_name((ClQuantType)t)) == 0) {
            *out = (ClQuantType)t;
            return TRUE;
        }
    return FALSE;
}

/* Plain Llama blocks only: the quantized path is dec_linear's in decoder.c. */
static gboolean check_plain(const ClModelConfig *c, GError **error)
{
    if (c->casa != CL_CASA_OFF || c->pvm_n_layers > 0 || c->hybrid_every > 0) {
        QFAIL(CL_MODEL_ERROR_CONFIG, "a quantized decoder is made of plain blocks: this model "
                                     "has CASA, PVM or Gated DeltaNet layers");
        return FALSE;
    }
    return TRUE;
}

/* ---- quantizing a loaded model -------------------------------------------------------------- */

gboolean cl_model_quantize(ClModel *model, ClQuantType t, GError **error)
{
    g_return_val_if_fail(model != NULL, FALSE);
    const ClModelConfig *c = &model->config;
    if ((unsigned)t >= CL_QUANT_N_TYPES) {
        QFAIL(CL_MODEL_ERROR_INPUT, "unknown quantization type %d", (int)t);
        return FALSE;
    }
    if (!check_plain(c, error))
        return FALSE;
    size_t total = 0;
    Slot slots[N_LAYER_SLOTS];
    for (int l = 0; l <= c->dec_depth; l++)
        for (int k = 0, n = slots_of(c, l, slots); k < n; k++) {
            if (slots[k].cols % CL_QUANT_BLOCK) {
                QFAIL(CL_MODEL_ERROR_CONFIG,
                      "%s has rows of %d values, not a multiple of %s's blocks of %d",
                      slots[k].name, slots[k].cols, cl_quant_type_name(t), CL_QUANT_BLOCK);
                return FALSE;
            }
            total += cl_quant_row_bytes(t, slots[k].cols) * (size_t)slots[k].rows;
        }
    ClQuantWeights *qw = g_new0(ClQuantWeights, 1);
    qw->dec = g_new0(ClQuantLayer, c->dec_depth);
    qw->bytes = g_try_malloc(total);
    qw->n_bytes = total;
    if (!qw->bytes) {
        QFAIL(CL_MODEL_ERROR_NO_MEMORY, "no memory for %zu bytes of quantized weights", total);
        cl_quant_weights_free(qw);
        return FALSE;
    }
    guint8 *at = qw->bytes;
    ClQuantWeights *old = model->quant;
    for (int l = 0; l <= c->dec_depth; l++)
        for (int k = 0, n = slots_of(c, l, slots); k < n; k++) {
            const Slot *s = &slots[k];
            const ClQuantMatrix *from = old ? slot_matrix(old, s) : NULL;
            size_t bytes = cl_quant_row_bytes(t, s->cols) * (size_t)s->rows;
            if (from && from->data && from->type == t) { /* as stored: no second rounding */
                if (from->x4)
                    cl_quant_unpack4(t, from->data, at, s->rows, s->cols);
                else
                    memcpy(at, from->data, bytes);
            } else if (from && from->data) {
                g_autofree float *f = g_new(float, (size_t)s->rows * s->cols);
                g_autofree guint8 *rows = NULL;
                const guint8 *src = from->data;
                if (from->x4) {
                    size_t from_bytes = cl_quant_row_bytes(from->type, s->cols) * (size_t)s->rows;
                    rows = g_malloc(from_bytes);
                    cl_quant_unpack4(from->type, from->data, rows, s->rows, s->cols);
                    src = rows;
                }
                cl_dequantize_rows(from->type, src, f, s->rows, s->cols);
                cl_quantize_rows(t, f, at, s->rows, s->cols);
            } else {
                const float *f = *slot_f32(model, s);
                g_assert(f != NULL);
                cl_quantize_rows(t, f, at, s->rows, s->cols);
            }
            *slot_matrix(qw, s) = (ClQuantMatrix){ t, at };
            at += bytes;
        }
    /* the f32 views the blocks stand for are gone (the embedding stays: tokens are looked up) */
    for (int l = 0; l < c->dec_depth; l++)
        for (int k = 0, n = slots_of(c, l, slots); k < n; k++)
            *slot_f32(model, &slots[k]) = NULL;
    if (!c->tie_embeddings)
        model->w.lm_head = NULL;
    cl_quant_weights_free(old);
    model->quant = qw;
    g_clear_pointer(&model->sha256, g_free);
    cl_model_weights_changed(model);
    return TRUE;
}

void cl_quant_weights_free(ClQuantWeights *qw)
{
    if (!qw)
        return;
    g_free(qw->dec);
    g_free(qw->bytes);
    g_free(qw);
}

/* ---- the model file ------------------------------------------------------------------------- */

/* The slot of a matrix name, FALSE for a name that is none of the config's quantizable ones. */
static gboolean find_slot(const ClModelConfig *c, const char *name, Slot *out)
{
    int l = -1;
    if (strcmp(name, "dec.lm_head.weight") == 0)
        l = c->dec_depth;
    else if (sscanf(name, "dec.%d.", &l) != 1 || l < 0 || l >= c->dec_depth)
        return FALSE;
    Slot slots[N_LAYER_SLOTS];
    for (int k = 0, n = slots_of(c, l, slots); k < n; k++)
        if (strcmp(slots[k].name, name) == 0) {
            *out = slots[k];
            return TRUE;
        }
    return FALSE;
}

GHashTable *cl_model_quant_parse(const ClModelConfig *c, const char *json, GError **error)
{
    if (!check_plain(c, error))
        return NULL;
    g_autoptr(JsonNode) root = cl_json_parse_strict(json, -1, CL_MODEL_ERROR_FILE, error);
    if (!root) {
        g_prefix_error(error, "changelens.quant: ");
        return NULL;
    }
    if (!JSON_NODE_HOLDS_OBJECT(root)) {
        QFAIL(CL_MODEL_ERROR_FILE, "changelens.quant is not a JSON object");
        return NULL;
    }
    g_autoptr(GHashTable) types = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    JsonObject *o = json_node_get_object(root);
    g_autoptr(GList) members = json_object_get_members(o);
    for (GList *it = members; it; it = it->next) {
        const char *name = it->data;
        JsonNode *v = json_object_get_member(o, name);
        const char *tname = JSON_NODE_HOLDS_VALUE(v) && json_node_get_value_type(v) == G_TYPE_STRING
                                ? json_node_get_string(v)
                                : NULL;
        ClQuantType t;
        Slot s;
        if (!tname || !cl_quant_type_from_name(tname, &t) ||
            strcmp(tname, cl_quant_type_name(t)) != 0) {
            QFAIL(CL_MODEL_ERROR_FILE,
                  "changelens.quant: '%s' has type %s (Q8_0, Q4_1, F16 or BF16 are known)", name,
                  tname ? tname : "(not a string)");
            return NULL;
        }
        if (!find_slot(c, name, &s)) {
            QFAIL(CL_MODEL_ERROR_FILE,
                  "changelens.quant: '%s' is not a decoder matrix that can be quantized (the "
                  "attention and MLP matrices of each layer and dec.lm_head.weight)",
                  name);
            return NULL;
        }
        if (s.cols % CL_QUANT_BLOCK) {
            QFAIL(CL_MODEL_ERROR_FILE,
                  "changelens.quant: '%s' has rows of %d values, not whole "
                  "blocks of %d",
                  name, s.cols, CL_QUANT_BLOCK);
            return NULL;
        }
        g_hash_table_insert(types, g_strdup(name), GINT_TO_POINTER((int)t + 1));
    }
    return g_steal_pointer(&types);
}

gboolean cl_model_quant_check_tensor(const ClModelConfig *c, GHashTable *types,
                                     const ClSafeTensor *t, guint64 *numel, GError **error)
{
    Slot s;
    g_assert(find_slot(c, t->name, &s));
    ClQuantType q = (ClQuantType)(GPOINTER_TO_INT(g_hash_table_lookup(types, t->name)) - 1);
    gint64 want[3] = { s.rows, s.cols / CL_QUANT_BLOCK, (gint64)block_bytes(q) };
    gboolean same = t->dtype == CL_DTYPE_U8 && t->ndim == 3;
    for (int d = 0; same && d < 3; d++)
        same = t->shape[d] == want[d];
    if (!same) {
        QFAIL(CL_MODEL_ERROR_FILE,
              "tensor '%s' is listed as %s in changelens.quant: it must be U8 of shape "
              "[%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "] (rows, blocks "
              "a row, bytes a block)",
              t->name, cl_quant_type_name(q), want[0], want[1], want[2]);
        return FALSE;
    }
    *numel = (guint64)s.rows * (guint64)s.cols;
    return TRUE;
}

gboolean cl_model_quant_bind(ClModel *m, const ClSafetensors *st, GHashTable *types,
                             gboolean in_place, GError **error)
{
    const ClModelConfig *c = &m->config;
    ClQuantWeights *qw = g_new0(ClQuantWeights, 1);
    qw->dec = g_new0(ClQuantLayer, c->dec_depth);
    size_t total = 0;
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, types);
    while (g_hash_table_iter_next(&it, &key, NULL)) {
        const ClSafeTensor *t = cl_safetensors_get(st, key);
        if (!t) {
            QFAIL(CL_MODEL_ERROR_FILE, "changelens.quant lists '%s', which the file does not hold",
                  (const char *)key);
            cl_quant_weights_free(qw);
            return FALSE;
        }
        total += (size_t)t->numel;
    }
    if (!in_place && total && !(qw->bytes = g_try_malloc(total))) {
        QFAIL(CL_MODEL_ERROR_NO_MEMORY, "no memory for %zu bytes of quantized weights", total);
        cl_quant_weights_free(qw);
        return FALSE;
    }
    qw->n_bytes = in_place ? 0 : total;
    guint8 *at = qw->bytes;
    g_hash_table_iter_init(&it, types);
    gpointer val;
    while (g_hash_table_iter_next(&it, &key, &val)) {
        const ClSafeTensor *t = cl_safetensors_get(st, key);
        Slot s;
        g_assert(find_slot(c, key, &s));
        const guint8 *data = t->data; /* blocks are read byte by byte: any alignment */
        if (!in_place) {
            memcpy(at, t->data, (size_t)t->numel);
            data = at;
            at += t->numel;
        }
        *slot_matrix(qw, &s) = (ClQuantMatrix){ (ClQuantType)(GPOINTER_TO_INT(val) - 1), data };
    }
    m->quant = qw;
    return TRUE;
}

gboolean cl_model_quant_entry(const ClModel *m, const char *name, gint64 shape[3],
                              ClSafetensorsEntry *e)
{
    Slot s;
    if (!m->quant || !find_slot(&m->config, name, &s))
        return FALSE;
    const ClQuantMatrix *q = slot_matrix(m->quant, &s);
    if (!q->data)
        return FALSE;
    shape[0] = s.rows, shape[1] = s.cols / CL_QUANT_BLOCK, shape[2] = (gint64)block_bytes(q->type);
    *e = (ClSafetensorsEntry){
        .name = name, .dtype = CL_DTYPE_U8, .ndim = 3, .shape = shape, .bytes = q->data
    };
    return TRUE;
}

char *cl_model_quant_json(const ClModel *m)
{
    if (!m->quant)
        return NULL;
    const ClModelConfig *c = &m->config;
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    Slot slots[N_LAYER_SLOTS];
    int n_quant = 0;
    for (int l = 0; l <= c->dec_depth; l++)
        for (int k = 0, n = slots_of(c, l, slots); k < n; k++) {
            const ClQuantMatrix *q = slot_matrix(m->quant, &slots[k]);
            if (!q->data)
                continue;
            json_builder_set_member_name(b, slots[k].name);
            json_builder_add_string_value(b, cl_quant_type_name(q->type));
            n_quant++;
        }
    json_builder_end_object(b);
    if (!n_quant)
        return NULL;
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return json_to_string(root, FALSE);
}
