/* checkpoint.c - training checkpoints (checkpoint.h): the model file's tensors and metadata
 * plus the AdamW moments and the trainer's state, one atomic safetensors file, every byte
 * validated on load (shapes against the config, and a SHA-256 of the data against bit rot). */
#include "train/checkpoint.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "train/params.h"
#include "model/safetensors.h"

G_DEFINE_QUARK(cl - checkpoint - error - quark, cl_checkpoint_error)

#define CK_FAIL(code, ...) g_set_error(error, CL_CHECKPOINT_ERROR, code, __VA_ARGS__)
#define CK_FORMAT "1"

void cl_checkpoint_state_clear(ClCheckpointState *s)
{
    if (!s)
        return;
    g_clear_pointer(&s->rng, g_free);
    g_clear_pointer(&s->cursor_json, g_free);
    g_clear_pointer(&s->options_json, g_free);
    for (guint i = 0; i < s->n_extra; i++) {
        g_free(s->extra[i].name);
        g_free(s->extra[i].data);
    }
    g_clear_pointer(&s->extra, g_free);
    s->n_extra = 0;
    s->n_rng = 0;
    s->step = 0;
}

const ClCheckpointExtra *cl_checkpoint_state_extra(const ClCheckpointState *s, const char *name)
{
    g_return_val_if_fail(s != NULL && name != NULL, NULL);
    for (guint i = 0; i < s->n_extra; i++)
        if (strcmp(s->extra[i].name, name) == 0)
            return &s->extra[i];
    return NULL;
}

void cl_checkpoint_free(ClCheckpoint *ck)
{
    if (!ck)
        return;
    g_clear_pointer(&ck->model, cl_model_free);
    g_clear_pointer(&ck->opt, cl_adamw_free);
    cl_checkpoint_state_clear(&ck->state);
    g_free(ck);
}

/* The data checksum covers the tensors' little-endian bytes in the order they are listed. */
static void hash_floats(GChecksum *sum, const float *data, size_t n)
{
#if G_BYTE_ORDER == G_LITTLE_ENDIAN
    const guint8 *bytes = (const guint8 *)data;
    size_t left = n * sizeof(float);
    while (left) { /* g_checksum_update takes a gssize */
        size_t chunk = MIN(left, (size_t)1 << 30);
        g_checksum_update(sum, bytes, (gssize)chunk);
        bytes += chunk;
        left -= chunk;
    }
#else
    guint32 buf[4096];
    for (size_t i = 0; i < n;) {
        size_t k = MIN(n - i, G_N_ELEMENTS(buf));
        for (size_t j = 0; j < k; j++) {
            guint32 u;
            memcpy(&u, &data[i + j], 4);
            buf[j] = GUINT32_TO_LE(u);
        }
        g_checksum_update(sum, (const guint8 *)buf, (gssize)(k * 4));
        i += k;
    }
#endif
}

static gboolean json_ok(const char *what, const char *json, GError **error)
{
    JsonNode *root = cl_json_parse_strict(json, -1, CL_MODEL_ERROR_INPUT, error);
    if (!root) {
        g_prefix_error(error, "%s is not valid JSON: ", what);
        return FALSE;
    }
    json_node_unref(root);
    return TRUE;
}

static char *options_to_json(const ClAdamWOptions *o)
{
    char b1[G_ASCII_DTOSTR_BUF_SIZE], b2[G_ASCII_DTOSTR_BUF_SIZE];
    char eps[G_ASCII_DTOSTR_BUF_SIZE], wd[G_ASCII_DTOSTR_BUF_SIZE];
    /* g_ascii_dtostr writes the shortest exact form: the values round-trip bit for bit */
    return g_strdup_printf(
        "{\"beta1\":%s,\"beta2\":%s,\"eps\":%s,\"weight_decay\":%s}",
        g_ascii_dtostr(b1, sizeof b1, o->beta1), g_ascii_dtostr(b2, sizeof b2, o->beta2),
        g_ascii_dtostr(eps, sizeof eps, o->eps), g_ascii_dtostr(wd, sizeof wd, o->weight_decay));
}

gboolean cl_checkpoint_save(const char *path, const ClModel *model, const ClAdamW *opt,
                            const ClCheckpointState *state, GError **error)
{
    g_return_val_if_fail(path != NULL && model != NULL && opt != NULL && state != NULL, FALSE);
    size_t n = cl_model_n_params(&model->config);
    if (opt->n != n) {
        CK_FAIL(CL_CHECKPOINT_ERROR_INPUT, "the optimiser holds %zu parameters, the model %zu",
                opt->n, n);
        return FALSE;
    }
    if (state->step < 0 || (state->n_rng && !state->rng)) {
        CK_FAIL(CL_CHECKPOINT_ERROR_INPUT, "bad trainer state (step %" G_GINT64_FORMAT ")",
                state->step);
        return FALSE;
    }
    const char *cursor = state->cursor_json ? state->cursor_json : "null";
    const char *options = state->options_json ? state->options_json : "null";
    if (!json_ok("the data cursor", cursor, error) ||
        !json_ok("the training options", options, error))
        return FALSE;

    ClModelWeights w = model->w; /* spec slots point into a copy: model stays const */
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(&model->config, &w);
    g_autoptr(GHashTable) names = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint i = 0; i < specs->len; i++)
        g_hash_table_add(names, ((ClWeightSpec *)g_ptr_array_index(specs, i))->name);
    g_hash_table_add(names, (gpointer) "adam.m");
    g_hash_table_add(names, (gpointer) "adam.v");
    for (guint i = 0; i < state->n_extra; i++) {
        const ClCheckpointExtra *x = &state->extra[i];
        if (!x->name || !*x->name || strchr(x->name, ',') || !x->data || x->n == 0 ||
            g_hash_table_contains(names, x->name)) {
            CK_FAIL(CL_CHECKPOINT_ERROR_INPUT,
                    "extra tensor %u ('%s') is empty, unnamed or "
                    "named like another tensor",
                    i, x->name ? x->name : "");
            return FALSE;
        }
        g_hash_table_add(names, x->name);
    }
    const guint n_entries = specs->len + 2 + state->n_extra;
    g_autofree ClSafetensorsEntry *entries = g_new0(ClSafetensorsEntry, n_entries);
    g_autofree gint64 *extra_shapes = g_new0(gint64, MAX(state->n_extra, 1));
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        if (!*s->slot) {
            CK_FAIL(CL_CHECKPOINT_ERROR_INPUT, "model tensor '%s' has no data", s->name);
            return FALSE;
        }
        entries[i] = (ClSafetensorsEntry){ s->name, CL_DTYPE_F32, s->ndim, s->shape, *s->slot };
        hash_floats(sum, *s->slot, (size_t)cl_weight_spec_numel(s));
    }
    gint64 moment_shape[1] = { (gint64)n };
    entries[specs->len] = (ClSafetensorsEntry){ "adam.m", CL_DTYPE_F32, 1, moment_shape, opt->m };
    entries[specs->len + 1] =
        (ClSafetensorsEntry){ "adam.v", CL_DTYPE_F32, 1, moment_shape, opt->v };
    hash_floats(sum, opt->m, n);
    hash_floats(sum, opt->v, n);
    GString *extra = g_string_new(NULL);
    for (guint i = 0; i < state->n_extra; i++) {
        const ClCheckpointExtra *x = &state->extra[i];
        extra_shapes[i] = (gint64)x->n;
        entries[specs->len + 2 + i] =
            (ClSafetensorsEntry){ x->name, CL_DTYPE_F32, 1, &extra_shapes[i], x->data };
        hash_floats(sum, x->data, x->n);
        g_string_append_printf(extra, "%s%s", i ? "," : "", x->name);
    }
    g_autofree char *extra_str = g_string_free(extra, FALSE);

    g_autofree char *cfg_json = cl_model_config_to_json(&model->config);
    g_autofree char *tok_json = cl_tokenizer_to_json(model->tokenizer);
    g_autofree char *step = g_strdup_printf("%" G_GINT64_FORMAT, state->step);
    g_autofree char *adam_step = g_strdup_printf("%" G_GINT64_FORMAT, opt->step);
    g_autofree char *adam_options = options_to_json(&opt->opt);
    GString *rng = g_string_new(NULL);
    for (size_t i = 0; i < state->n_rng; i++)
        g_string_append_printf(rng, "%s%016" G_GINT64_MODIFIER "x", i ? "," : "", state->rng[i]);
    g_autofree char *rng_str = g_string_free(rng, FALSE);
    const char *meta[] = {
        "changelens.format",
        "1",
        "changelens.config",
        cfg_json,
        "changelens.tokenizer",
        tok_json,
        "changelens.checkpoint",
        CK_FORMAT,
        "train.step",
        step,
        "train.rng",
        rng_str,
        "train.cursor",
        cursor,
        "train.options",
        options,
        "adam.step",
        adam_step,
        "adam.options",
        adam_options,
        "train.data_sha256",
        g_checksum_get_string(sum),
        state->n_extra ? "train.extra" : NULL,
        extra_str,
        NULL,
    };
    if (!cl_safetensors_write(path, entries, n_entries, meta, NULL, error)) {
        g_prefix_error(error, "cannot write checkpoint: ");
        return FALSE;
    }
    return TRUE;
}

/* ---- loading -------------------------------------------------------------------------------- */

static const char *need_meta(const ClSafetensors *st, const char *key, GError **error)
{
    const char *v = cl_safetensors_metadata(st, key);
    if (!v)
        CK_FAIL(CL_CHECKPOINT_ERROR_FILE, "no %s in __metadata__", key);
    return v;
}

static gboolean parse_count(const char *key, const char *text, gint64 *out, GError **error)
{
    guint64 v;
    if (!g_ascii_string_to_unsigned(text, 10, 0, G_MAXINT64, &v, NULL)) {
        CK_FAIL(CL_CHECKPOINT_ERROR_FILE, "%s '%.40s' is not a step count", key, text);
        return FALSE;
    }
    *out = (gint64)v;
    return TRUE;
}

static gboolean parse_rng(const char *text, ClCheckpointState *s, GError **error)
{
    if (!*text)
        return TRUE;
    g_auto(GStrv) words = g_strsplit(text, ",", -1);
    guint n = g_strv_length(words);
    s->rng = g_new(guint64, n);
    s->n_rng = n;
    for (guint i = 0; i < n; i++) {
        if (strlen(words[i]) != 16 ||
            !g_ascii_string_to_unsigned(words[i], 16, 0, G_MAXUINT64, &s->rng[i], NULL)) {
            CK_FAIL(CL_CHECKPOINT_ERROR_FILE, "train.rng word %u '%.20s' is not 16 hex digits", i,
                    words[i]);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean parse_options(const char *text, ClAdamWOptions *o, GError **error)
{
    g_autoptr(JsonNode) root = cl_json_parse_strict(text, -1, CL_MODEL_ERROR_FILE, error);
    if (!root) {
        g_prefix_error(error, "adam.options: ");
        return FALSE;
    }
    JsonObject *obj = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    const char *keys[] = { "beta1", "beta2", "eps", "weight_decay" };
    double *dst[] = { &o->beta1, &o->beta2, &o->eps, &o->weight_decay };
    for (guint i = 0; i < G_N_ELEMENTS(keys); i++) {
        JsonNode *v = obj ? json_object_get_member(obj, keys[i]) : NULL;
        if (!v || !JSON_NODE_HOLDS_VALUE(v) ||
            (json_node_get_value_type(v) != G_TYPE_DOUBLE &&
             json_node_get_value_type(v) != G_TYPE_INT64)) {
            CK_FAIL(CL_CHECKPOINT_ERROR_FILE, "adam.options has no number '%s'", keys[i]);
            return FALSE;
        }
        *dst[i] = json_node_get_double(v);
    }
    if (!cl_adamw_options_validate(o, error)) {
        g_prefix_error(error, "adam.options: ");
        return FALSE;
    }
    return TRUE;
}

/* The tensor `name` as F32 with exactly `shape`, or an error naming what differs. */
static const ClSafeTensor *need_tensor(const ClSafetensors *st, const char *name, int ndim,
                                       const gint64 *shape, GError **error)
{
    const ClSafeTensor *t = cl_safetensors_get(st, name);
    if (!t) {
        CK_FAIL(CL_CHECKPOINT_ERROR_FILE, "missing tensor '%s'", name);
        return NULL;
    }
    if (t->dtype != CL_DTYPE_F32) {
        CK_FAIL(CL_CHECKPOINT_ERROR_FILE, "tensor '%s' is %s; checkpoints hold F32 only", name,
                cl_dtype_name(t->dtype));
        return NULL;
    }
    gboolean same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = t->shape[d] == shape[d];
    if (!same) {
        GString *got = g_string_new("("), *want = g_string_new("(");
        for (int d = 0; d < t->ndim; d++)
            g_string_append_printf(got, "%s%" G_GINT64_FORMAT, d ? ", " : "", t->shape[d]);
        for (int d = 0; d < ndim; d++)
            g_string_append_printf(want, "%s%" G_GINT64_FORMAT, d ? ", " : "", shape[d]);
        CK_FAIL(CL_CHECKPOINT_ERROR_MISMATCH,
                "tensor '%s' has shape %s), the checkpoint's config needs %s)", name, got->str,
                want->str);
        g_string_free(got, TRUE);
        g_string_free(want, TRUE);
        return NULL;
    }
    return t;
}

static void copy_f32(float *dst, const ClSafeTensor *t)
{
    memcpy(dst, t->data, (size_t)t->numel * sizeof(float)); /* any alignment */
#if G_BYTE_ORDER != G_LITTLE_ENDIAN
    for (guint64 i = 0; i < t->numel; i++) {
        guint32 u;
        memcpy(&u, &dst[i], 4);
        u = GUINT32_FROM_LE(u);
        memcpy(&dst[i], &u, 4);
    }
#endif
}

/* The trainer's extra vectors (`extra`, as train.extra lists them) distinct F32 vectors beside
 * the `expected` names (the model's and the moments', the extras' added), and no other tensor
 * in the file. */
static gboolean check_tensor_names(const ClSafetensors *st, char **extra, GHashTable *expected,
                                   GError **error)
{
    for (guint i = 0; extra[i]; i++) {
        const ClSafeTensor *t = cl_safetensors_get(st, extra[i]);
        if (!t || t->dtype != CL_DTYPE_F32 || t->ndim != 1 || t->numel == 0 ||
            g_hash_table_contains(expected, extra[i])) {
            CK_FAIL(CL_CHECKPOINT_ERROR_FILE,
                    "train.extra names '%.60s', which is not a "
                    "distinct non-empty F32 vector in the file",
                    extra[i]);
            return FALSE;
        }
        g_hash_table_add(expected, extra[i]);
    }
    for (guint i = 0; i < st->tensors->len; i++) {
        const ClSafeTensor *t = g_ptr_array_index(st->tensors, i);
        if (!g_hash_table_contains(expected, t->name)) {
            CK_FAIL(CL_CHECKPOINT_ERROR_FILE, "unexpected tensor '%s' (not part of this config)",
                    t->name);
            return FALSE;
        }
    }
    return TRUE;
}

/* The data's SHA-256 against train.data_sha256: the model's tensors (specs' order), the
 * moments, then the extras, as the file stores them. */
static gboolean check_sum(const ClSafetensors *st, const GPtrArray *specs, char **extra,
                          const char *data_sha, GError **error)
{
    const guint n_extra = g_strv_length(extra);
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    for (guint i = 0; i < specs->len + 2 + n_extra; i++) {
        const char *name = i < specs->len    ? ((ClWeightSpec *)g_ptr_array_index(specs, i))->name
                           : i == specs->len ? "adam.m"
                           : i == specs->len + 1 ? "adam.v"
                                                 : extra[i - specs->len - 2];
        const ClSafeTensor *t = cl_safetensors_get(st, name);
        const guint8 *bytes = t->data;
        guint64 left = t->end - t->begin;
        while (left) {
            guint64 chunk = MIN(left, (guint64)1 << 30);
            g_checksum_update(sum, bytes, (gssize)chunk);
            bytes += chunk;
            left -= chunk;
        }
    }
    if (g_ascii_strcasecmp(g_checksum_get_string(sum), data_sha) != 0) {
        CK_FAIL(CL_CHECKPOINT_ERROR_FILE,
                "the tensor data is corrupted (its SHA-256 differs "
                "from the one recorded at save): use an earlier checkpoint");
        return FALSE;
    }
    return TRUE;
}

/* The extra vectors into s->extra (s->n_extra counts those read, for the clear). */
static gboolean load_extra(ClCheckpointState *s, const ClSafetensors *st, char **extra,
                           GError **error)
{
    const guint n_extra = g_strv_length(extra);
    s->extra = g_new0(ClCheckpointExtra, MAX(n_extra, 1));
    for (guint i = 0; i < n_extra; i++) {
        const ClSafeTensor *t = cl_safetensors_get(st, extra[i]);
        ClCheckpointExtra *x = &s->extra[s->n_extra];
        x->data = g_try_malloc_n(t->numel, sizeof(float));
        if (!x->data) {
            CK_FAIL(CL_CHECKPOINT_ERROR_IO, "out of memory for tensor '%s'", extra[i]);
            return FALSE;
        }
        x->name = g_strdup(extra[i]);
        x->n = (size_t)t->numel;
        copy_f32(x->data, t);
        s->n_extra++;
    }
    return TRUE;
}

static ClCheckpoint *load_parsed(const ClSafetensors *st, GError **error)
{
    const char *format = cl_safetensors_metadata(st, "changelens.checkpoint");
    if (!format) {
        CK_FAIL(CL_CHECKPOINT_ERROR_FILE,
                "not a training checkpoint (no changelens.checkpoint "
                "in __metadata__%s)",
                cl_safetensors_metadata(st, "changelens.format") ? "; it is a model file" : "");
        return NULL;
    }
    if (strcmp(format, CK_FORMAT) != 0) {
        CK_FAIL(CL_CHECKPOINT_ERROR_FILE,
                "unsupported checkpoint format '%.20s' (this build reads " CK_FORMAT ")", format);
        return NULL;
    }
    const char *cfg_json, *tok_json, *step, *rng, *cursor, *options, *adam_step, *adam_options,
        *data_sha;
    if (!(cfg_json = need_meta(st, "changelens.config", error)) ||
        !(tok_json = need_meta(st, "changelens.tokenizer", error)) ||
        !(step = need_meta(st, "train.step", error)) ||
        !(rng = need_meta(st, "train.rng", error)) ||
        !(cursor = need_meta(st, "train.cursor", error)) ||
        !(options = need_meta(st, "train.options", error)) ||
        !(adam_step = need_meta(st, "adam.step", error)) ||
        !(adam_options = need_meta(st, "adam.options", error)) ||
        !(data_sha = need_meta(st, "train.data_sha256", error)))
        return NULL;

    g_autoptr(ClCheckpoint) ck = g_new0(ClCheckpoint, 1);
    ClModelConfig cfg;
    if (!cl_model_config_from_json(&cfg, cfg_json, error))
        return NULL;
    ClAdamWOptions aopt;
    if (!parse_count("train.step", step, &ck->state.step, error) ||
        !parse_rng(rng, &ck->state, error) || !parse_options(adam_options, &aopt, error) ||
        !json_ok("train.cursor", cursor, error) || !json_ok("train.options", options, error))
        return NULL;
    ck->state.cursor_json = g_strdup(cursor);
    ck->state.options_json = g_strdup(options);

    /* the model: config, tokenizer (strict JSON first: it is untrusted), tensors */
    g_autoptr(ClModel) model = g_new0(ClModel, 1);
    model->config = cfg;
    JsonNode *tok_root = cl_json_parse_strict(tok_json, -1, CL_MODEL_ERROR_TOKENIZER, error);
    if (!tok_root) {
        g_prefix_error(error, "tokenizer: ");
        return NULL;
    }
    json_node_unref(tok_root);
    if (!(model->tokenizer = cl_tokenizer_from_json(tok_json, error)))
        return NULL;
    if (cl_tokenizer_vocab_size(model->tokenizer) > cfg.vocab_size) {
        CK_FAIL(CL_CHECKPOINT_ERROR_FILE,
                "config: vocab_size (%d) is smaller than the "
                "tokenizer's %d tokens",
                cfg.vocab_size, cl_tokenizer_vocab_size(model->tokenizer));
        return NULL;
    }
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(&model->config, &model->w);
    g_autoptr(GHashTable) expected = g_hash_table_new(g_str_hash, g_str_equal);
    size_t n = 0;
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        if (!need_tensor(st, s->name, s->ndim, s->shape, error))
            return NULL;
        g_hash_table_add(expected, s->name);
        n += (size_t)cl_weight_spec_numel(s);
    }
    gint64 moment_shape[1] = { (gint64)n };
    GError *local = NULL;
    const ClSafeTensor *tm = need_tensor(st, "adam.m", 1, moment_shape, &local);
    const ClSafeTensor *tv = tm ? need_tensor(st, "adam.v", 1, moment_shape, &local) : NULL;
    if (!tv) {
        if (g_error_matches(local, CL_CHECKPOINT_ERROR, CL_CHECKPOINT_ERROR_MISMATCH))
            g_prefix_error(&local, "optimiser moments do not match the model: ");
        g_propagate_error(error, local);
        return NULL;
    }
    g_hash_table_add(expected, (gpointer) "adam.m");
    g_hash_table_add(expected, (gpointer) "adam.v");
    /* the trainer's extra vectors, as train.extra lists them */
    const char *extra_meta = cl_safetensors_metadata(st, "train.extra");
    g_auto(GStrv) extra =
        extra_meta && *extra_meta ? g_strsplit(extra_meta, ",", -1) : g_new0(char *, 1);
    /* the checksum before any allocation of the state's size is worth making */
    if (!check_tensor_names(st, extra, expected, error) ||
        !check_sum(st, specs, extra, data_sha, error))
        return NULL;

    model->arena = g_try_malloc_n(MAX(n, 1), sizeof(float));
    if (!model->arena) {
        CK_FAIL(CL_CHECKPOINT_ERROR_IO, "out of memory for %zu parameters", n);
        return NULL;
    }
    float *at = model->arena;
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        *s->slot = at;
        copy_f32(at, cl_safetensors_get(st, s->name));
        at += cl_weight_spec_numel(s);
    }
    if (model->config.tie_embeddings)
        model->w.lm_head = model->w.embed;
    model->n_params = n;

    ck->opt = cl_adamw_new_for_config(&cfg, &aopt, error);
    if (!ck->opt)
        return NULL;
    if (!parse_count("adam.step", adam_step, &ck->opt->step, error))
        return NULL;
    copy_f32(ck->opt->m, tm);
    copy_f32(ck->opt->v, tv);
    if (!load_extra(&ck->state, st, extra, error))
        return NULL;
    ck->model = g_steal_pointer(&model);
    return g_steal_pointer(&ck);
}

ClCheckpoint *cl_checkpoint_load(const char *path, GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    g_autoptr(ClSafetensors) st = cl_safetensors_open(path, error);
    if (!st)
        return NULL; /* the reader's messages name the file */
    ClCheckpoint *ck = load_parsed(st, error);
    if (!ck) {
        g_autofree char *display = g_filename_display_name(path);
        g_prefix_error(error, "%s: ", display);
    }
    return ck;
}

gboolean cl_checkpoint_check_config(const ClCheckpoint *ck, const ClModelConfig *cfg,
                                    GError **error)
{
    g_return_val_if_fail(ck != NULL && ck->model != NULL && cfg != NULL, FALSE);
    g_autofree char *a = cl_model_config_to_json(&ck->model->config);
    g_autofree char *b = cl_model_config_to_json(cfg);
    if (strcmp(a, b) == 0)
        return TRUE;
    g_autofree char *key = NULL, *va = NULL, *vb = NULL;
    if (cl_checkpoint_json_first_difference(a, b, &key, &va, &vb))
        CK_FAIL(CL_CHECKPOINT_ERROR_MISMATCH,
                "the checkpoint is for another model: its %s is %s, the config asks for %s", key,
                va, vb);
    else
        CK_FAIL(CL_CHECKPOINT_ERROR_MISMATCH, "the checkpoint is for another model config");
    return FALSE;
}

gboolean cl_checkpoint_json_first_difference(const char *a, const char *b, char **key, char **va,
                                             char **vb)
{
    g_return_val_if_fail(key != NULL && va != NULL && vb != NULL, FALSE);
    g_autoptr(JsonNode) na = a ? json_from_string(a, NULL) : NULL;
    g_autoptr(JsonNode) nb = b ? json_from_string(b, NULL) : NULL;
    if (!na || !nb || !JSON_NODE_HOLDS_OBJECT(na) || !JSON_NODE_HOLDS_OBJECT(nb))
        return FALSE;
    JsonObject *oa = json_node_get_object(na), *ob = json_node_get_object(nb);
    g_autoptr(GList) keys = json_object_get_members(oa);
    for (GList *k = keys; k; k = k->next) {
        JsonNode *x = json_object_get_member(oa, k->data);
        JsonNode *y = json_object_get_member(ob, k->data);
        if (y && json_node_equal(x, y))
            continue;
        *key = g_strdup(k->data);
        *va = json_to_string(x, FALSE);
        *vb = y ? json_to_string(y, FALSE) : g_strdup("(absent)");
        return TRUE;
    }
    return FALSE;
}

/* ---- rotation ------------------------------------------------------------------------------- */

char *cl_checkpoint_path(const char *dir, const char *prefix, gint64 step)
{
    g_return_val_if_fail(dir != NULL && prefix != NULL && step >= 0, NULL);
    g_autofree char *base = g_strdup_printf("%s-%08" G_GINT64_FORMAT ".safetensors", prefix, step);
    return g_build_filename(dir, base, NULL);
}

/* The step of a file name of the pattern, or -1. */
static gint64 name_step(const char *name, const char *prefix)
{
    size_t lp = strlen(prefix);
    if (strncmp(name, prefix, lp) != 0 || name[lp] != '-')
        return -1;
    const char *digits = name + lp + 1;
    const char *end = digits;
    while (g_ascii_isdigit(*end))
        end++;
    if (end - digits < 8 || end - digits > 18 || strcmp(end, ".safetensors") != 0)
        return -1;
    return g_ascii_strtoll(digits, NULL, 10);
}

typedef struct {
    gint64 step;
    char *name;
} StepFile;

static gint cmp_step_desc(gconstpointer a, gconstpointer b)
{
    gint64 x = ((const StepFile *)a)->step, y = ((const StepFile *)b)->step;
    return x < y ? 1 : x > y ? -1 : 0;
}

static GArray *list_steps(const char *dir, const char *prefix, GError **error)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, error);
    if (!d)
        return NULL;
    GArray *files = g_array_new(FALSE, FALSE, sizeof(StepFile));
    const char *name;
    while ((name = g_dir_read_name(d))) {
        gint64 step = name_step(name, prefix);
        if (step >= 0)
            g_array_append_val(files, ((StepFile){ step, g_strdup(name) }));
    }
    g_array_sort(files, cmp_step_desc);
    return files;
}

static void step_files_free(GArray *files)
{
    for (guint i = 0; i < files->len; i++)
        g_free(g_array_index(files, StepFile, i).name);
    g_array_free(files, TRUE);
}

gboolean cl_checkpoint_rotate(const char *dir, const char *prefix, guint keep, GError **error)
{
    g_return_val_if_fail(dir != NULL && prefix != NULL, FALSE);
    if (keep < 1) {
        CK_FAIL(CL_CHECKPOINT_ERROR_INPUT, "keep at least one checkpoint");
        return FALSE;
    }
    GArray *files = list_steps(dir, prefix, error);
    if (!files)
        return FALSE;
    gboolean ok = TRUE;
    for (guint i = keep; i < files->len; i++) {
        g_autofree char *path = g_build_filename(dir, g_array_index(files, StepFile, i).name, NULL);
        if (g_unlink(path) != 0 && errno != ENOENT) {
            int e = errno;
            g_autofree char *display = g_filename_display_name(path);
            g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e),
                        "cannot remove old checkpoint %s: %s", display, g_strerror(e));
            ok = FALSE;
            break;
        }
    }
    step_files_free(files);
    return ok;
}

char *cl_checkpoint_latest(const char *dir, const char *prefix, GError **error)
{
    g_return_val_if_fail(dir != NULL && prefix != NULL, NULL);
    GArray *files = list_steps(dir, prefix, error);
    if (!files)
        return NULL;
    char *path =
        files->len ? g_build_filename(dir, g_array_index(files, StepFile, 0).name, NULL) : NULL;
    step_files_free(files);
    return path;
}

gboolean cl_checkpoint_file_is_checkpoint(const char *path)
{
    g_autoptr(ClSafetensors) st = cl_safetensors_open(path, NULL);
    return st && cl_safetensors_metadata(st, "changelens.checkpoint") != NULL;
}

ClModel *cl_checkpoint_load_model(const char *path, GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    if (cl_checkpoint_file_is_checkpoint(path)) {
        g_autoptr(ClCheckpoint) ck = cl_checkpoint_load(path, error);
        return ck ? g_steal_pointer(&ck->model) : NULL;
    }
    ClModel *m = cl_model_load(path, error);
    if (m && !cl_model_make_trainable(m, error))
        g_clear_pointer(&m, cl_model_free);
    return m;
}
