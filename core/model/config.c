/* config.c - the model config (docs/MODEL.md §1): presets, strict JSON in and out, validation. */
#include "model/config.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "model/safetensors.h"
#include "model/weights.h"

G_DEFINE_QUARK(cl - model - error - quark, cl_model_error)

#define CONFIG_FAIL(...) g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_CONFIG, __VA_ARGS__)

/* ---- presets (docs/MODEL.md §1 table) ------------------------------------------------------- */

static const ClModelConfig preset_tiny = {
    .format = 1,
    .image_size = 160,
    .patch_size = 16,
    .channels = 3,
    .enc_dim = 192,
    .enc_depth = 6,
    .enc_heads = 3,
    .enc_mlp = 768,
    .enc_rope_base = 10000.0,
    .sve_variant = CL_SVE_CROSS_FFN,
    .sve_first = CL_SVE_FIRST_OWN,
    .sve_cross_pos = TRUE,
    .sve_out_init_std = 1e-4,
    .merger_hidden = 768,
    .dec_dim = 256,
    .dec_depth = 6,
    .dec_heads = 4,
    .dec_kv_heads = 2,
    .dec_mlp = 704,
    .vocab_size = 4096,
    .rope_base = 10000.0,
    .max_len = 2048,
    .norm_eps = 1e-6,
    .tie_embeddings = FALSE,
};

gboolean cl_model_config_preset(ClModelConfig *cfg, const char *name, GError **error)
{
    g_return_val_if_fail(cfg != NULL, FALSE);
    ClModelConfig c = preset_tiny;
    if (g_strcmp0(name, "tiny") == 0) {
        /* as is */
    } else if (g_strcmp0(name, "base") == 0) {
        c.image_size = 384;
        c.enc_dim = 768, c.enc_depth = 12, c.enc_heads = 12, c.enc_mlp = 3072;
        c.merger_hidden = 3072;
        c.dec_dim = 1024, c.dec_depth = 12, c.dec_heads = 16, c.dec_kv_heads = 4, c.dec_mlp = 2816;
        c.vocab_size = 32000, c.max_len = 4096;
    } else if (g_strcmp0(name, "large") == 0) {
        c.image_size = 768;
        c.enc_dim = 1152, c.enc_depth = 27, c.enc_heads = 16, c.enc_mlp = 4304;
        c.merger_hidden = 4608;
        c.dec_dim = 2560, c.dec_depth = 36, c.dec_heads = 32, c.dec_kv_heads = 8, c.dec_mlp = 9728;
        c.vocab_size = 151936, c.max_len = 8192;
    } else {
        CONFIG_FAIL("unknown model preset '%s' (tiny, base or large)", name ? name : "(null)");
        return FALSE;
    }
    *cfg = c;
    return TRUE;
}

/* ---- names ---------------------------------------------------------------------------------- */

static const char *const variant_names[CL_SVE_N_VARIANTS] = {
    [CL_SVE_STATELESS] = "stateless",   [CL_SVE_CROSS] = "cross",
    [CL_SVE_CROSS_FFN] = "cross_ffn",   [CL_SVE_SELF_EXT] = "self_ext",
    [CL_SVE_ADALN_ZERO] = "adaln_zero", [CL_SVE_SELF_FFN] = "self_ffn",
};

const char *cl_sve_variant_name(ClSveVariant v)
{
    return (unsigned)v < CL_SVE_N_VARIANTS ? variant_names[v] : "invalid";
}

gboolean cl_sve_variant_from_name(const char *name, ClSveVariant *out)
{
    for (int v = 0; v < CL_SVE_N_VARIANTS && name; v++)
        if (strcmp(name, variant_names[v]) == 0) {
            if (out)
                *out = (ClSveVariant)v;
            return TRUE;
        }
    return FALSE;
}

const char *cl_sve_first_name(ClSveFirst f)
{
    return f == CL_SVE_FIRST_OWN ? "own" : f == CL_SVE_FIRST_NULL ? "null" : "invalid";
}

gboolean cl_sve_first_from_name(const char *name, ClSveFirst *out)
{
    ClSveFirst f;
    if (g_strcmp0(name, "own") == 0)
        f = CL_SVE_FIRST_OWN;
    else if (g_strcmp0(name, "null") == 0)
        f = CL_SVE_FIRST_NULL;
    else
        return FALSE;
    if (out)
        *out = f;
    return TRUE;
}

/* ---- fields --------------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    size_t offset;
    int min, max;
} IntField;

#define INT_FIELD(f, lo, hi)                                                                       \
    {                                                                                              \
#f, offsetof(ClModelConfig, f), lo, hi                                                     \
    }
static const IntField int_fields[] = {
    INT_FIELD(image_size, 1, CL_CONFIG_MAX_IMAGE),
    INT_FIELD(patch_size, 1, CL_CONFIG_MAX_IMAGE),
    INT_FIELD(channels, 1, 3),
    INT_FIELD(enc_dim, 1, CL_CONFIG_MAX_DIM),
    INT_FIELD(enc_depth, 1, CL_CONFIG_MAX_DEPTH),
    INT_FIELD(enc_heads, 1, CL_CONFIG_MAX_HEADS),
    INT_FIELD(enc_mlp, 1, CL_CONFIG_MAX_DIM),
    INT_FIELD(merger_hidden, 1, CL_CONFIG_MAX_DIM),
    INT_FIELD(dec_dim, 1, CL_CONFIG_MAX_DIM),
    INT_FIELD(dec_depth, 1, CL_CONFIG_MAX_DEPTH),
    INT_FIELD(dec_heads, 1, CL_CONFIG_MAX_HEADS),
    INT_FIELD(dec_kv_heads, 1, CL_CONFIG_MAX_HEADS),
    INT_FIELD(dec_mlp, 1, CL_CONFIG_MAX_DIM),
    INT_FIELD(vocab_size, CL_CONFIG_MIN_VOCAB, CL_CONFIG_MAX_VOCAB),
    INT_FIELD(max_len, 16, CL_CONFIG_MAX_LEN),
};

typedef struct {
    const char *name;
    size_t offset;
    gboolean zero_ok; /* >= 0 rather than > 0 */
} DoubleField;

static const DoubleField double_fields[] = {
    { "enc_rope_base", offsetof(ClModelConfig, enc_rope_base), FALSE },
    { "rope_base", offsetof(ClModelConfig, rope_base), FALSE },
    { "norm_eps", offsetof(ClModelConfig, norm_eps), FALSE },
    { "sve.out_init_std", offsetof(ClModelConfig, sve_out_init_std), TRUE },
};

static inline int *int_at(ClModelConfig *c, size_t off)
{
    return (int *)((char *)c + off);
}
static inline const int *cint_at(const ClModelConfig *c, size_t off)
{
    return (const int *)((const char *)c + off);
}
static inline double *double_at(ClModelConfig *c, size_t off)
{
    return (double *)((char *)c + off);
}
static inline double cdouble_at(const ClModelConfig *c, size_t off)
{
    return *(const double *)((const char *)c + off);
}

/* ---- validation ----------------------------------------------------------------------------- */

/* a * b with the product's name for the message; FALSE when past CL_CONFIG_MAX_ELEMENTS */
static gboolean check_product(gint64 a, gint64 b, const char *what, GError **error)
{
    guint64 p;
    if (!g_uint64_checked_mul(&p, (guint64)a, (guint64)b) || p > (guint64)CL_CONFIG_MAX_ELEMENTS) {
        CONFIG_FAIL("config: %s = %" G_GINT64_FORMAT " × %" G_GINT64_FORMAT
                    " values is more than the limit of %" G_GINT64_FORMAT,
                    what, a, b, CL_CONFIG_MAX_ELEMENTS);
        return FALSE;
    }
    return TRUE;
}

/* Every field within its range; the enums known. */
static gboolean check_fields(const ClModelConfig *c, GError **error)
{
    if (c->format != 1) {
        CONFIG_FAIL("config: format must be 1 (got %d)", c->format);
        return FALSE;
    }
    for (gsize i = 0; i < G_N_ELEMENTS(int_fields); i++) {
        int v = *cint_at(c, int_fields[i].offset);
        if (v < int_fields[i].min || v > int_fields[i].max) {
            CONFIG_FAIL("config: %s must be between %d and %d (got %d)", int_fields[i].name,
                        int_fields[i].min, int_fields[i].max, v);
            return FALSE;
        }
    }
    for (gsize i = 0; i < G_N_ELEMENTS(double_fields); i++) {
        double v = cdouble_at(c, double_fields[i].offset);
        if (!isfinite(v) || v < 0 || (v == 0 && !double_fields[i].zero_ok)) {
            CONFIG_FAIL("config: %s must be a finite number %s 0 (got %g)", double_fields[i].name,
                        double_fields[i].zero_ok ? ">=" : ">", v);
            return FALSE;
        }
    }
    if ((unsigned)c->sve_variant >= CL_SVE_N_VARIANTS) {
        CONFIG_FAIL("config: sve.variant %d is not a variant", (int)c->sve_variant);
        return FALSE;
    }
    if (c->sve_first != CL_SVE_FIRST_OWN && c->sve_first != CL_SVE_FIRST_NULL) {
        CONFIG_FAIL("config: sve.first %d is neither own nor null", (int)c->sve_first);
        return FALSE;
    }
    return TRUE;
}

/* The shapes the encoder and decoder need: patch grid, head dims, grouped heads. */
static gboolean check_shapes(const ClModelConfig *c, GError **error)
{
    if (c->channels != 1 && c->channels != 3) {
        CONFIG_FAIL("config: channels must be 1 or 3 (got %d)", c->channels);
        return FALSE;
    }
    if (c->image_size % c->patch_size != 0) {
        CONFIG_FAIL("config: image_size (%d) must be a multiple of patch_size (%d)", c->image_size,
                    c->patch_size);
        return FALSE;
    }
    if (c->ood < 0 || c->ood > 100000) {
        CONFIG_FAIL("config: ood (the image descriptors kept) must be 0 to 100000");
        return FALSE;
    }
    if (c->ood_head && !c->enc_stem_effnet) {
        CONFIG_FAIL("config: ood_head (pooled head features) needs the EfficientNet-Lite0 stem");
        return FALSE;
    }
    if (!(c->ood_min_colour >= 0 && c->ood_min_colour < 256) ||
        (c->ood_min_colour > 0 && (c->channels != 3 || c->ood <= 0))) {
        CONFIG_FAIL("config: ood_min_colour lies between 0 and 256, and needs colour images and "
                    "the image statistics (ood)");
        return FALSE;
    }
    if (c->change_threshold != 0 &&
        (!c->change_head || !(c->change_threshold > 0 && c->change_threshold < 1))) {
        CONFIG_FAIL("config: change_threshold needs change_head and lies between 0 and 1");
        return FALSE;
    }
    if (c->sure_logprob > 0 || !isfinite(c->sure_logprob)) {
        CONFIG_FAIL("config: sure_logprob is a log-probability: below 0 (0: none)");
        return FALSE;
    }
    if (c->object_task == CL_OBJECTS_AERIAL && (c->n_objects < 1 || c->n_objects > 8)) {
        CONFIG_FAIL("config: object_task aerial needs 1 to 8 object_names (the head's colour "
                    "labels)");
        return FALSE;
    }
    if (c->object_task == CL_OBJECTS_RADIOGRAPH &&
        (c->n_objects < 1 || c->n_objects > CL_CONFIG_MAX_FINDINGS)) {
        CONFIG_FAIL("config: object_task radiograph needs 1 to %d object_names (the head's "
                    "colour, size and material labels)",
                    CL_CONFIG_MAX_FINDINGS);
        return FALSE;
    }
    if (c->n_findings > 0 && (c->n_objects == 0 || c->object_task == CL_OBJECTS_RADIOGRAPH)) {
        CONFIG_FAIL("config: radiograph_findings names an object head's classes on radiographs "
                    "beside its object_names of another object_task (photo-edits or aerial)%s",
                    c->n_objects == 0 ? ": this model has no object_names (no object head)"
                                      : ", not beside object_task radiograph's own names");
        return FALSE;
    }
    if (c->change_marker && !c->change_head) {
        CONFIG_FAIL("config: change_marker needs change_head (the marker follows its "
                    "probabilities)");
        return FALSE;
    }
    if (c->enc_stem_effnet &&
        (c->patch_size != 16 || c->channels != 3 || c->image_size % 32 != 0)) {
        CONFIG_FAIL("config: the efficientnet_lite0:16 stem needs patch_size 16, 3 channels and "
                    "an image_size that is a multiple of 32");
        return FALSE;
    }
    const int grid = c->image_size / c->patch_size;
    if (grid % 2 != 0) {
        CONFIG_FAIL("config: the patch grid image_size / patch_size = %d must be even (2×2 merger)",
                    grid);
        return FALSE;
    }
    if (c->enc_dim % c->enc_heads != 0) {
        CONFIG_FAIL("config: enc_dim (%d) must be a multiple of enc_heads (%d)", c->enc_dim,
                    c->enc_heads);
        return FALSE;
    }
    if ((c->enc_dim / c->enc_heads) % 4 != 0) {
        CONFIG_FAIL("config: the encoder head dim enc_dim / enc_heads = %d must be a multiple of 4 "
                    "(2-D RoPE)",
                    c->enc_dim / c->enc_heads);
        return FALSE;
    }
    if (c->dec_dim % c->dec_heads != 0) {
        CONFIG_FAIL("config: dec_dim (%d) must be a multiple of dec_heads (%d)", c->dec_dim,
                    c->dec_heads);
        return FALSE;
    }
    if ((c->dec_dim / c->dec_heads) % 2 != 0) {
        CONFIG_FAIL("config: the decoder head dim dec_dim / dec_heads = %d must be even (RoPE)",
                    c->dec_dim / c->dec_heads);
        return FALSE;
    }
    if (c->dec_heads % c->dec_kv_heads != 0) {
        CONFIG_FAIL("config: dec_heads (%d) must be a multiple of dec_kv_heads (%d)", c->dec_heads,
                    c->dec_kv_heads);
        return FALSE;
    }
    return TRUE;
}

/* The decoder variants (CASA, hybrid Gated DeltaNet, VIST2) and what they combine with. */
static gboolean check_variants(const ClModelConfig *c, GError **error)
{
    if (c->casa_replace < 0 || c->casa_replace == 1 || c->casa_replace > c->dec_depth ||
        (c->casa_replace > 0 && c->casa == CL_CASA_OFF)) {
        CONFIG_FAIL("config: casa_replace (%d) must be 0 or 2 to dec_depth (%d), with casa on "
                    "(every layer replaced would leave no text-to-text attention)",
                    c->casa_replace, c->dec_depth);
        return FALSE;
    }
    if ((c->casa_gist || c->casa_tv) && c->casa == CL_CASA_OFF) {
        CONFIG_FAIL("config: casa_gist and casa_tv need casa");
        return FALSE;
    }
    if ((unsigned)c->casa > CL_CASA_SHARED) {
        CONFIG_FAIL("config: unknown casa variant %d", (int)c->casa);
        return FALSE;
    }
    if (c->hybrid_every < 0 || c->hybrid_every > c->dec_depth) {
        CONFIG_FAIL("config: hybrid.attention_every (%d) must be 0 to dec_depth (%d)",
                    c->hybrid_every, c->dec_depth);
        return FALSE;
    }
    if (c->hybrid_every > 0) {
        if (c->gdn_heads < 1 || c->gdn_heads > CL_CONFIG_MAX_HEADS || c->gdn_dk < 1 ||
            c->gdn_dk > 1024 || c->gdn_dv < 1 || c->gdn_dv > 1024 || c->gdn_conv < 1 ||
            c->gdn_conv > 16) {
            CONFIG_FAIL("config: hybrid.heads (%d), dk (%d), dv (%d) and conv (%d) must be 1 to "
                        "%d, 1024, 1024 and 16",
                        c->gdn_heads, c->gdn_dk, c->gdn_dv, c->gdn_conv, CL_CONFIG_MAX_HEADS);
            return FALSE;
        }
        if (c->casa != CL_CASA_OFF || c->pvm_n_layers > 0) {
            CONFIG_FAIL("config: the hybrid decoder does not combine with casa or pvm yet");
            return FALSE;
        }
    }
    if (c->vist_chunk < 0 || c->vist_chunk > c->max_len || c->vist_tail < 0 ||
        c->vist_tail > c->max_len ||
        (c->vist_chunk > 0 && (c->vist_font_px < 4 || c->vist_font_px > c->image_size))) {
        CONFIG_FAIL("config: vist.chunk (%d) and vist.tail (%d) must be 0 to max_len (%d), "
                    "vist.font_px (%d) 4 to image_size",
                    c->vist_chunk, c->vist_tail, c->max_len, c->vist_font_px);
        return FALSE;
    }
    if (c->vist_chunk > 0 &&
        (c->casa != CL_CASA_OFF || c->pvm_n_layers > 0 || c->hybrid_every > 0)) {
        CONFIG_FAIL("config: vist does not combine with casa, pvm or hybrid (their caches keep "
                    "what VIST2 evicts)");
        return FALSE;
    }
    return TRUE;
}

/* PVM: its layers and sizes; not with CASA. */
static gboolean check_pvm(const ClModelConfig *c, GError **error)
{
    if (c->casa != CL_CASA_OFF && c->pvm_n_layers > 0) {
        CONFIG_FAIL("config: casa and pvm together are not supported (each reads the visual rows "
                    "its own way)");
        return FALSE;
    }
    if (c->pvm_n_layers < 0 || c->pvm_n_layers > CL_CONFIG_MAX_PVM_LAYERS) {
        CONFIG_FAIL("config: pvm.layers lists %d layers (at most %d)", c->pvm_n_layers,
                    CL_CONFIG_MAX_PVM_LAYERS);
        return FALSE;
    }
    for (int i = 0; i < c->pvm_n_layers; i++)
        if (c->pvm_layers[i] < 0 || c->pvm_layers[i] >= c->dec_depth ||
            (i > 0 && c->pvm_layers[i] <= c->pvm_layers[i - 1])) {
            CONFIG_FAIL("config: pvm.layers must be ascending decoder layers below dec_depth "
                        "(%d); entry %d is %d",
                        c->dec_depth, i, c->pvm_layers[i]);
            return FALSE;
        }
    if (c->pvm_n_layers > 0) {
        if (c->pvm_rank < 1 || c->pvm_rank > CL_CONFIG_MAX_DIM || c->pvm_heads < 1 ||
            c->pvm_heads > CL_CONFIG_MAX_HEADS || c->pvm_mlp < 1 ||
            c->pvm_mlp > CL_CONFIG_MAX_DIM) {
            CONFIG_FAIL("config: pvm.rank (%d), pvm.heads (%d) and pvm.mlp (%d) must be positive "
                        "and at most %d, %d and %d",
                        c->pvm_rank, c->pvm_heads, c->pvm_mlp, CL_CONFIG_MAX_DIM,
                        CL_CONFIG_MAX_HEADS, CL_CONFIG_MAX_DIM);
            return FALSE;
        }
        if (c->pvm_rank % c->pvm_heads != 0) {
            CONFIG_FAIL("config: pvm.rank (%d) must be a multiple of pvm.heads (%d)", c->pvm_rank,
                        c->pvm_heads);
            return FALSE;
        }
    }
    return TRUE;
}

/* Activations and parameters within the limits (sizes that cannot be allocated). */
static gboolean check_sizes(const ClModelConfig *c, GError **error)
{
    /* Activations: one image's largest per-layer tensors and the decoder's per-sequence ones. */
    const int grid = c->image_size / c->patch_size;
    gint64 n = (gint64)grid * grid;
    if (!check_product(n, 3 * (gint64)c->enc_dim, "N × 3·enc_dim (N = (image_size/patch_size)²)",
                       error) ||
        !check_product(n, c->enc_mlp, "N × enc_mlp (N = (image_size/patch_size)²)", error) ||
        !check_product(n, n, "N × N attention scores (N = (image_size/patch_size)²)", error) ||
        !check_product(n / 4, c->merger_hidden, "N/4 × merger_hidden", error) ||
        !check_product(c->max_len, c->dec_dim, "max_len × dec_dim", error) ||
        !check_product(c->max_len, c->dec_mlp, "max_len × dec_mlp", error))
        return FALSE;

    /* Parameters: every tensor, and their sum. */
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(c, NULL);
    guint64 total = 0;
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        guint64 numel = 1;
        gboolean ok = TRUE;
        for (int d = 0; d < s->ndim; d++)
            ok = ok && g_uint64_checked_mul(&numel, numel, (guint64)s->shape[d]);
        if (!ok || numel > (guint64)CL_CONFIG_MAX_ELEMENTS) {
            g_autoptr(GString) shape = g_string_new(NULL);
            for (int d = 0; d < s->ndim; d++)
                g_string_append_printf(shape, "%s%" G_GINT64_FORMAT, d ? ", " : "", s->shape[d]);
            CONFIG_FAIL("config: tensor %s [%s] would hold more than %" G_GINT64_FORMAT
                        " values (sizes too large)",
                        s->name, shape->str, CL_CONFIG_MAX_ELEMENTS);
            return FALSE;
        }
        total += numel;
    }
    if (total > (guint64)CL_CONFIG_MAX_PARAMS) {
        CONFIG_FAIL("config: %" G_GUINT64_FORMAT " parameters, more than the limit of "
                    "%" G_GINT64_FORMAT " (sizes too large)",
                    total, CL_CONFIG_MAX_PARAMS);
        return FALSE;
    }
    return TRUE;
}

gboolean cl_model_config_validate(const ClModelConfig *c, GError **error)
{
    g_return_val_if_fail(c != NULL, FALSE);
    return check_fields(c, error) && check_shapes(c, error) && check_variants(c, error) &&
           check_pvm(c, error) && check_sizes(c, error);
}

/* ---- JSON in -------------------------------------------------------------------------------- */

static gboolean json_int(JsonNode *node, const char *key, int *out, GError **error)
{
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64) {
        CONFIG_FAIL("config: %s must be an integer", key);
        return FALSE;
    }
    gint64 v = json_node_get_int(node);
    if (v < G_MININT || v > G_MAXINT) {
        CONFIG_FAIL("config: %s = %" G_GINT64_FORMAT " is out of range", key, v);
        return FALSE;
    }
    *out = (int)v;
    return TRUE;
}

static gboolean json_number(JsonNode *node, const char *key, double *out, GError **error)
{
    if (!JSON_NODE_HOLDS_VALUE(node) || (json_node_get_value_type(node) != G_TYPE_INT64 &&
                                         json_node_get_value_type(node) != G_TYPE_DOUBLE)) {
        CONFIG_FAIL("config: %s must be a number", key);
        return FALSE;
    }
    *out = json_node_get_value_type(node) == G_TYPE_INT64 ? (double)json_node_get_int(node)
                                                          : json_node_get_double(node);
    return TRUE;
}

static gboolean json_bool(JsonNode *node, const char *key, gboolean *out, GError **error)
{
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_BOOLEAN) {
        CONFIG_FAIL("config: %s must be true or false", key);
        return FALSE;
    }
    *out = json_node_get_boolean(node);
    return TRUE;
}

static const char *json_string(JsonNode *node, const char *key, GError **error)
{
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING) {
        CONFIG_FAIL("config: %s must be a string", key);
        return NULL;
    }
    return json_node_get_string(node);
}

/* A nested object of the config ("sve", "pvm", "hybrid"): each member goes to `member`, which
 * returns 1 (taken), 0 (error set) or -1 (not one of its keys). */
typedef int (*SectionMember)(ClModelConfig *c, const char *key, JsonNode *v, GError **error);

static gboolean parse_section(ClModelConfig *c, JsonNode *node, const char *section,
                              SectionMember member, GError **error)
{
    if (!JSON_NODE_HOLDS_OBJECT(node)) {
        CONFIG_FAIL("config: %s must be an object", section);
        return FALSE;
    }
    JsonObject *o = json_node_get_object(node);
    g_autoptr(GList) members = json_object_get_members(o);
    for (GList *l = members; l; l = l->next) {
        const char *k = l->data;
        int r = member(c, k, json_object_get_member(o, k), error);
        if (r < 0)
            CONFIG_FAIL("config: unknown key '%s.%s'", section, k);
        if (r <= 0)
            return FALSE;
    }
    return TRUE;
}

static int sve_member(ClModelConfig *c, const char *k, JsonNode *v, GError **error)
{
    if (strcmp(k, "variant") == 0) {
        const char *s = json_string(v, "sve.variant", error);
        if (!s)
            return 0;
        if (!cl_sve_variant_from_name(s, &c->sve_variant)) {
            CONFIG_FAIL("config: sve.variant '%s' is not one of stateless, cross, cross_ffn, "
                        "self_ext, adaln_zero, self_ffn",
                        s);
            return 0;
        }
        return 1;
    }
    if (strcmp(k, "first") == 0) {
        const char *s = json_string(v, "sve.first", error);
        if (!s)
            return 0;
        if (!cl_sve_first_from_name(s, &c->sve_first)) {
            CONFIG_FAIL("config: sve.first '%s' is neither own nor null", s);
            return 0;
        }
        return 1;
    }
    if (strcmp(k, "cross_pos") == 0)
        return json_bool(v, "sve.cross_pos", &c->sve_cross_pos, error);
    if (strcmp(k, "out_init_std") == 0)
        return json_number(v, "sve.out_init_std", &c->sve_out_init_std, error);
    return -1;
}

static int pvm_member(ClModelConfig *c, const char *k, JsonNode *v, GError **error)
{
    if (strcmp(k, "layers") == 0) {
        if (!JSON_NODE_HOLDS_ARRAY(v)) {
            CONFIG_FAIL("config: pvm.layers must be an array of layer indices");
            return 0;
        }
        JsonArray *a = json_node_get_array(v);
        guint n = json_array_get_length(a);
        if (n > CL_CONFIG_MAX_PVM_LAYERS) {
            CONFIG_FAIL("config: pvm.layers lists %u layers (at most %d)", n,
                        CL_CONFIG_MAX_PVM_LAYERS);
            return 0;
        }
        for (guint i = 0; i < n; i++)
            if (!json_int(json_array_get_element(a, i), "pvm.layers[]", &c->pvm_layers[i], error))
                return 0;
        c->pvm_n_layers = (int)n;
        return 1;
    }
    int *dst = strcmp(k, "rank") == 0    ? &c->pvm_rank
               : strcmp(k, "heads") == 0 ? &c->pvm_heads
               : strcmp(k, "mlp") == 0   ? &c->pvm_mlp
                                         : NULL;
    if (!dst)
        return -1;
    g_autofree char *name = g_strdup_printf("pvm.%s", k);
    return json_int(v, name, dst, error);
}

static int hybrid_member(ClModelConfig *c, const char *k, JsonNode *v, GError **error)
{
    int *dst = strcmp(k, "attention_every") == 0 ? &c->hybrid_every
               : strcmp(k, "heads") == 0         ? &c->gdn_heads
               : strcmp(k, "dk") == 0            ? &c->gdn_dk
               : strcmp(k, "dv") == 0            ? &c->gdn_dv
               : strcmp(k, "conv") == 0          ? &c->gdn_conv
                                                 : NULL;
    if (!dst)
        return -1;
    g_autofree char *name = g_strdup_printf("hybrid.%s", k);
    return json_int(v, name, dst, error);
}

static int vist_member(ClModelConfig *c, const char *k, JsonNode *v, GError **error)
{
    if (strcmp(k, "mask") == 0) {
        const char *s = json_string(v, "vist.mask", error);
        if (!s)
            return 0;
        if (strcmp(s, "image") != 0 && strcmp(s, "paper") != 0) {
            CONFIG_FAIL("config: vist.mask '%s' is neither image nor paper", s);
            return 0;
        }
        c->vist_sees_text = strcmp(s, "paper") == 0;
        return 1;
    }
    if (strcmp(k, "chunk") == 0) { /* the other keys default from it (written after it) */
        int chunk = 0;
        if (!json_int(v, "vist.chunk", &chunk, error))
            return 0;
        cl_config_set_vist(c, chunk < 0 ? -1 : chunk);
        c->vist_chunk = chunk;
        return 1;
    }
    int *dst = strcmp(k, "tail") == 0      ? &c->vist_tail
               : strcmp(k, "font_px") == 0 ? &c->vist_font_px
                                           : NULL;
    if (!dst)
        return -1;
    g_autofree char *name = g_strdup_printf("vist.%s", k);
    return json_int(v, name, dst, error);
}

void cl_config_set_vist(ClModelConfig *c, int chunk)
{
    g_return_if_fail(c != NULL);
    const int g = c->image_size / MAX(c->patch_size, 1);
    const int m = MAX(g * g / 4, 1);                             /* visual rows per image */
    c->vist_chunk = chunk > 0 ? chunk : (chunk < 0 ? 0 : 4 * m); /* 0: the default */
    c->vist_tail = c->vist_chunk > 0 ? MIN(m, c->vist_chunk) : 0;
    c->vist_font_px = c->vist_chunk > 0 ? MAX(c->image_size / 20, 4) : 0;
    c->vist_sees_text = FALSE;
}

static const char *const casa_names[] = { "off", "ca", "ca_shared" };

const char *cl_casa_variant_name(ClCasaVariant v)
{
    return (unsigned)v < G_N_ELEMENTS(casa_names) ? casa_names[v] : "?";
}

static const char *const object_task_names[] = { "photo-edits", "aerial", "radiograph" };

const char *cl_object_task_name(ClObjectTask t)
{
    return (unsigned)t < G_N_ELEMENTS(object_task_names) ? object_task_names[t] : "?";
}

gboolean cl_object_task_from_name(const char *name, ClObjectTask *out)
{
    for (gsize i = 0; i < G_N_ELEMENTS(object_task_names); i++)
        if (g_strcmp0(name, object_task_names[i]) == 0) {
            *out = (ClObjectTask)i;
            return TRUE;
        }
    return FALSE;
}

gboolean cl_casa_variant_from_name(const char *name, ClCasaVariant *out)
{
    for (gsize i = 0; i < G_N_ELEMENTS(casa_names); i++)
        if (g_strcmp0(name, casa_names[i]) == 0) {
            *out = (ClCasaVariant)i;
            return TRUE;
        }
    return FALSE;
}

gboolean cl_config_set_hybrid(ClModelConfig *c, int every)
{
    g_return_val_if_fail(c != NULL, FALSE);
    c->hybrid_every = MAX(every, 0);
    if (every <= 0)
        return TRUE;
    const int hd = c->dec_dim / MAX(c->dec_heads, 1);
    c->gdn_heads = c->dec_heads;
    c->gdn_dk = hd;
    c->gdn_dv = 2 * hd; /* InfiniteVL's expand_v = 2 */
    c->gdn_conv = 4;
    return TRUE;
}

gboolean cl_config_set_pvm(ClModelConfig *c, int every, int rank)
{
    g_return_val_if_fail(c != NULL, FALSE);
    c->pvm_n_layers = 0;
    if (every <= 0)
        return TRUE;
    for (int l = every; l < c->dec_depth; l += every) {
        if (c->pvm_n_layers == CL_CONFIG_MAX_PVM_LAYERS)
            return FALSE;
        c->pvm_layers[c->pvm_n_layers++] = l;
    }
    c->pvm_rank = rank;
    c->pvm_heads = 4;
    c->pvm_mlp = MAX(8, (int)((gint64)rank * c->dec_mlp / MAX(c->dec_dim, 1) + 4) / 8 * 8);
    return TRUE;
}

/* "object_names" (or "radiograph_findings", `key`): an array of 1 to `max` names of lower-case
 * letters and single spaces, each shorter than CL_CONFIG_OBJECT_NAME bytes, into names and *count */
static gboolean parse_object_names(const char *key, char (*names)[CL_CONFIG_OBJECT_NAME], int max,
                                   int *count, JsonNode *v, GError **error)
{
    JsonArray *a = JSON_NODE_HOLDS_ARRAY(v) ? json_node_get_array(v) : NULL;
    const guint n = a ? json_array_get_length(a) : 0;
    if (!a || n == 0 || n > (guint)max) {
        CONFIG_FAIL("config: %s must be an array of 1 to %d names", key, max);
        return FALSE;
    }
    for (guint i = 0; i < n; i++) {
        JsonNode *e = json_array_get_element(a, i);
        const char *name = JSON_NODE_HOLDS_VALUE(e) && json_node_get_value_type(e) == G_TYPE_STRING
                               ? json_node_get_string(e)
                               : NULL;
        gboolean ok = name && *name && strlen(name) < CL_CONFIG_OBJECT_NAME && name[0] != ' ';
        for (const char *q = name; ok && *q; q++)
            ok = (*q >= 'a' && *q <= 'z') || (*q == ' ' && q[1] && q[1] != ' ');
        if (!ok) {
            CONFIG_FAIL("config: %s[%u] must be 1 to %d lower-case letters and single spaces", key,
                        i, CL_CONFIG_OBJECT_NAME - 1);
            return FALSE;
        }
        g_strlcpy(names[i], name, CL_CONFIG_OBJECT_NAME);
    }
    *count = (int)n;
    return TRUE;
}

static gboolean parse_member(ClModelConfig *c, const char *k, JsonNode *v, GError **error)
{
    for (gsize i = 0; i < G_N_ELEMENTS(int_fields); i++)
        if (strcmp(k, int_fields[i].name) == 0)
            return json_int(v, k, int_at(c, int_fields[i].offset), error);
    for (gsize i = 0; i < G_N_ELEMENTS(double_fields); i++)
        if (strcmp(k, double_fields[i].name) == 0)
            return json_number(v, k, double_at(c, double_fields[i].offset), error);
    if (strcmp(k, "format") == 0)
        return json_int(v, k, &c->format, error);
    if (strcmp(k, "tie_embeddings") == 0)
        return json_bool(v, k, &c->tie_embeddings, error);
    if (strcmp(k, "visual_pos") == 0)
        return json_bool(v, k, &c->visual_pos, error);
    if (strcmp(k, "visual_center") == 0)
        return json_bool(v, k, &c->visual_center, error);
    if (strcmp(k, "enc_pos") == 0)
        return json_bool(v, k, &c->enc_pos, error);
    if (strcmp(k, "change_head") == 0)
        return json_bool(v, k, &c->change_head, error);
    if (strcmp(k, "change_marker") == 0)
        return json_bool(v, k, &c->change_marker, error);
    if (strcmp(k, "change_threshold") == 0)
        return json_number(v, k, &c->change_threshold, error);
    if (strcmp(k, "sure_logprob") == 0)
        return json_number(v, k, &c->sure_logprob, error);
    if (strcmp(k, "ood") == 0)
        return json_int(v, k, &c->ood, error);
    if (strcmp(k, "ood_head") == 0)
        return json_bool(v, k, &c->ood_head, error);
    if (strcmp(k, "ood_min_colour") == 0)
        return json_number(v, k, &c->ood_min_colour, error);
    if (strcmp(k, "object_names") == 0)
        return parse_object_names(k, c->object_names, CL_CONFIG_MAX_OBJECTS, &c->n_objects, v,
                                  error);
    if (strcmp(k, "radiograph_findings") == 0)
        return parse_object_names(k, c->finding_names, CL_CONFIG_MAX_FINDINGS, &c->n_findings, v,
                                  error);
    if (strcmp(k, "object_task") == 0) {
        const char *name = JSON_NODE_HOLDS_VALUE(v) && json_node_get_value_type(v) == G_TYPE_STRING
                               ? json_node_get_string(v)
                               : NULL;
        if (!cl_object_task_from_name(name, &c->object_task)) {
            CONFIG_FAIL("config: object_task must be \"photo-edits\", \"aerial\" or "
                        "\"radiograph\"");
            return FALSE;
        }
        return TRUE;
    }
    if (strcmp(k, "stem") == 0) {
        const char *stem = JSON_NODE_HOLDS_VALUE(v) && json_node_get_value_type(v) == G_TYPE_STRING
                               ? json_node_get_string(v)
                               : NULL;
        if (g_strcmp0(stem, "patch") == 0 || g_strcmp0(stem, "efficientnet_lite0:16") == 0) {
            c->enc_stem_effnet = g_strcmp0(stem, "patch") != 0;
            return TRUE;
        }
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_CONFIG,
                    "config: stem must be \"patch\" or \"efficientnet_lite0:16\"");
        return FALSE;
    }
    if (strcmp(k, "sve") == 0)
        return parse_section(c, v, "sve", sve_member, error);
    if (strcmp(k, "pvm") == 0)
        return parse_section(c, v, "pvm", pvm_member, error);
    if (strcmp(k, "hybrid") == 0)
        return parse_section(c, v, "hybrid", hybrid_member, error);
    if (strcmp(k, "vist") == 0)
        return parse_section(c, v, "vist", vist_member, error);
    if (strcmp(k, "casa_tv") == 0)
        return json_bool(v, k, &c->casa_tv, error);
    if (strcmp(k, "casa_gist") == 0)
        return json_bool(v, k, &c->casa_gist, error);
    if (strcmp(k, "casa_replace") == 0)
        return json_int(v, k, &c->casa_replace, error);
    if (strcmp(k, "casa") == 0) {
        const char *s = json_string(v, "casa", error);
        if (!s)
            return FALSE;
        if (!cl_casa_variant_from_name(s, &c->casa)) {
            CONFIG_FAIL("config: casa '%s' is not one of off, ca, ca_shared", s);
            return FALSE;
        }
        return TRUE;
    }
    CONFIG_FAIL("config: unknown key '%s'", k);
    return FALSE;
}

gboolean cl_model_config_from_json(ClModelConfig *cfg, const char *json, GError **error)
{
    g_return_val_if_fail(cfg != NULL, FALSE);
    if (!json) {
        CONFIG_FAIL("config: no JSON");
        return FALSE;
    }
    g_autoptr(JsonNode) root = cl_json_parse_strict(json, -1, CL_MODEL_ERROR_CONFIG, error);
    if (!root) {
        g_prefix_error(error, "config: ");
        return FALSE;
    }
    if (!JSON_NODE_HOLDS_OBJECT(root)) {
        CONFIG_FAIL("config: not a JSON object");
        return FALSE;
    }
    ClModelConfig c = preset_tiny;
    JsonObject *o = json_node_get_object(root);
    g_autoptr(GList) members = json_object_get_members(o);
    for (GList *l = members; l; l = l->next)
        if (!parse_member(&c, l->data, json_object_get_member(o, l->data), error))
            return FALSE;
    if (!cl_model_config_validate(&c, error))
        return FALSE;
    *cfg = c;
    return TRUE;
}

/* ---- JSON out ------------------------------------------------------------------------------- */

/* The shortest decimal that reads back as the same double, always with a '.' or exponent so a
 * reader sees a float. */
static void append_double(GString *s, double v)
{
    if (!isfinite(v)) {
        g_string_append(s, "null");
        return;
    }
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    if (v == floor(v) && fabs(v) < 1e15) {
        /* 10000.0, not 1e+04; g_ascii_*: a decimal point whatever the locale */
        g_string_append(s, g_ascii_formatd(buf, sizeof buf, "%.1f", v));
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        char fmt[8];
        g_snprintf(fmt, sizeof fmt, "%%.%dg", prec);
        g_ascii_formatd(buf, sizeof buf, fmt, v);
        if (g_ascii_strtod(buf, NULL) == v)
            break;
    }
    g_string_append(s, buf);
    if (!strpbrk(buf, ".eE"))
        g_string_append(s, ".0");
}

char *cl_model_config_to_json(const ClModelConfig *c)
{
    g_return_val_if_fail(c != NULL, NULL);
    GString *s = g_string_new("{");
    g_string_append_printf(s, "\"format\":%d,", c->format);
#define PUT_INT(f) g_string_append_printf(s, "\"" #f "\":%d,", c->f)
#define PUT_DOUBLE(f)                                                                              \
    do {                                                                                           \
        g_string_append(s, "\"" #f "\":");                                                         \
        append_double(s, c->f);                                                                    \
        g_string_append_c(s, ',');                                                                 \
    } while (0)
    PUT_INT(image_size);
    PUT_INT(patch_size);
    PUT_INT(channels);
    PUT_INT(enc_dim);
    PUT_INT(enc_depth);
    PUT_INT(enc_heads);
    PUT_INT(enc_mlp);
    PUT_DOUBLE(enc_rope_base);
    g_string_append_printf(s, "\"sve\":{\"variant\":\"%s\",\"first\":\"%s\",\"cross_pos\":%s,",
                           cl_sve_variant_name(c->sve_variant), cl_sve_first_name(c->sve_first),
                           c->sve_cross_pos ? "true" : "false");
    g_string_append(s, "\"out_init_std\":");
    append_double(s, c->sve_out_init_std);
    g_string_append(s, "},");
    PUT_INT(merger_hidden);
    PUT_INT(dec_dim);
    PUT_INT(dec_depth);
    PUT_INT(dec_heads);
    PUT_INT(dec_kv_heads);
    PUT_INT(dec_mlp);
    PUT_INT(vocab_size);
    PUT_DOUBLE(rope_base);
    PUT_INT(max_len);
    PUT_DOUBLE(norm_eps);
    g_string_append_printf(s, "\"tie_embeddings\":%s", c->tie_embeddings ? "true" : "false");
    /* written only when on, so the files of models without it read as before */
    if (c->visual_pos)
        g_string_append(s, ",\"visual_pos\":true");
    if (c->visual_center)
        g_string_append(s, ",\"visual_center\":true");
    if (c->enc_pos)
        g_string_append(s, ",\"enc_pos\":true");
    if (c->enc_stem_effnet)
        g_string_append(s, ",\"stem\":\"efficientnet_lite0:16\"");
    if (c->change_head)
        g_string_append(s, ",\"change_head\":true");
    if (c->change_marker)
        g_string_append(s, ",\"change_marker\":true");
    if (c->change_threshold > 0) {
        g_string_append(s, ",\"change_threshold\":");
        append_double(s, c->change_threshold);
    }
    if (c->sure_logprob < 0) {
        g_string_append(s, ",\"sure_logprob\":");
        append_double(s, c->sure_logprob);
    }
    if (c->ood > 0)
        g_string_append_printf(s, ",\"ood\":%d", c->ood);
    if (c->ood_head)
        g_string_append(s, ",\"ood_head\":true");
    if (c->ood_min_colour > 0) {
        g_string_append(s, ",\"ood_min_colour\":");
        append_double(s, c->ood_min_colour);
    }
    if (c->n_objects > 0) { /* names of letters and spaces: nothing to escape */
        g_string_append(s, ",\"object_names\":[");
        for (int i = 0; i < c->n_objects; i++)
            g_string_append_printf(s, "%s\"%s\"", i ? "," : "", c->object_names[i]);
        g_string_append_c(s, ']');
        if (c->object_task != CL_OBJECTS_PHOTO_EDITS)
            g_string_append_printf(s, ",\"object_task\":\"%s\"",
                                   cl_object_task_name(c->object_task));
        if (c->n_findings > 0) {
            g_string_append(s, ",\"radiograph_findings\":[");
            for (int i = 0; i < c->n_findings; i++)
                g_string_append_printf(s, "%s\"%s\"", i ? "," : "", c->finding_names[i]);
            g_string_append_c(s, ']');
        }
    }
    if (c->casa != CL_CASA_OFF)
        g_string_append_printf(s, ",\"casa\":\"%s\"", cl_casa_variant_name(c->casa));
    if (c->casa_replace > 0)
        g_string_append_printf(s, ",\"casa_replace\":%d", c->casa_replace);
    if (c->casa_gist)
        g_string_append(s, ",\"casa_gist\":true");
    if (c->casa_tv)
        g_string_append(s, ",\"casa_tv\":true");
    if (c->hybrid_every > 0)
        g_string_append_printf(s,
                               ",\"hybrid\":{\"attention_every\":%d,\"heads\":%d,\"dk\":%d,"
                               "\"dv\":%d,\"conv\":%d}",
                               c->hybrid_every, c->gdn_heads, c->gdn_dk, c->gdn_dv, c->gdn_conv);
    if (c->vist_chunk > 0)
        g_string_append_printf(s,
                               ",\"vist\":{\"chunk\":%d,\"tail\":%d,\"font_px\":%d,"
                               "\"mask\":\"%s\"}",
                               c->vist_chunk, c->vist_tail, c->vist_font_px,
                               c->vist_sees_text ? "paper" : "image");
    if (c->pvm_n_layers > 0) {
        g_string_append(s, ",\"pvm\":{\"layers\":[");
        for (int i = 0; i < c->pvm_n_layers; i++)
            g_string_append_printf(s, "%s%d", i ? "," : "", c->pvm_layers[i]);
        g_string_append_printf(s, "],\"rank\":%d,\"heads\":%d,\"mlp\":%d}", c->pvm_rank,
                               c->pvm_heads, c->pvm_mlp);
    }
    g_string_append_c(s, '}');
#undef PUT_INT
#undef PUT_DOUBLE
    return g_string_free(s, FALSE);
}
