/* runstate.c - the run's state beyond the model and its optimiser (trainer-private.h): the
 * options a checkpoint records and a resume must match, the auxiliary heads and their moments
 * as the checkpoint's extra tensors, the data cursor, and a resumed run's log. */
#include <string.h>

#include <json-glib/json-glib.h>

#include "jsonnum.h"
#include "train/trainer-private.h"

char *cl_trainer_options_to_json(const ClTrainerOptions *o)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
#define S(k, v) (json_builder_set_member_name(b, k), json_builder_add_string_value(b, v))
#define INT(k, v) (json_builder_set_member_name(b, k), json_builder_add_int_value(b, v))
#define D(k, v)                                                                                    \
    (json_builder_set_member_name(b, k), json_builder_add_double_value(b, cl_json_double(v)))
#define BOOL(k, v) (json_builder_set_member_name(b, k), json_builder_add_boolean_value(b, v))
    S("stage", cl_trainer_stage_name(o->stage));
    S("from", o->from ? o->from : "");
    S("variant", o->variant_set ? cl_sve_variant_name(o->variant) : "");
    BOOL("no_clone", o->no_clone);
    BOOL("no_zero_init", o->no_zero_init);
    D("sve_init_std", o->sve_init_std);
    S("first", o->first_set ? cl_sve_first_name(o->first) : "");
    BOOL("no_cross_pos", o->no_cross_pos);
    BOOL("no_stop_grad", o->no_stop_grad);
    S("task", o->task ? o->task : "");
    S("data", o->data ? o->data : "");
    BOOL("all_turns", o->all_turns);
    INT("steps", o->steps);
    INT("batch", o->batch);
    D("lr", o->lr);
    D("min_lr", o->min_lr);
    INT("warmup", o->warmup);
    D("weight_decay", o->weight_decay);
    D("clip", o->clip);
    D("aux_weight_objects", o->aux_weight_objects);
    D("aux_weight_changed", o->aux_weight_changed);
    /* only when set, so that the checkpoints made before them still resume */
    if (o->min_objects || o->max_objects) {
        INT("min_objects", o->min_objects);
        INT("max_objects", o->max_objects);
    }
    /* only when not the default, so that the checkpoints made before it still resume */
    if (o->dot_scale > 0 && o->dot_scale != 1)
        D("dot_scale", o->dot_scale);
    /* only when set, so that the checkpoints made before it still resume */
    if (o->dot_images)
        INT("dot_images", o->dot_images);
    /* only when on, so that the checkpoints made before it still resume */
    if (o->aux_on_visual)
        BOOL("aux_on_visual", TRUE);
    if (o->casa != CL_CASA_OFF)
        S("casa", cl_casa_variant_name(o->casa));
    if (o->casa_replace > 0)
        INT("casa_replace", o->casa_replace);
    if (o->casa_gist)
        BOOL("casa_gist", TRUE);
    if (o->casa_tv)
        BOOL("casa_tv", TRUE);
    if (o->change_marker)
        BOOL("change_marker", TRUE);
    if (o->vist_chunk != 0)
        INT("vist_chunk", o->vist_chunk);
    if (o->train_only && *o->train_only)
        S("train_only", o->train_only);
    if (o->hybrid_every > 0)
        INT("hybrid_every", o->hybrid_every);
    if (o->pvm_every > 0) {
        INT("pvm_every", o->pvm_every);
        INT("pvm_rank", o->pvm_rank > 0 ? o->pvm_rank : 32);
    }
    /* a string: JSON integers are signed 64-bit */
    g_autofree char *seed = g_strdup_printf("%" G_GUINT64_FORMAT, o->seed);
    S("seed", seed);
#undef S
#undef INT
#undef D
#undef BOOL
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return json_to_string(root, FALSE);
}

gboolean cl_trainer_options_match(const char *saved, const char *now, GError **error)
{
    g_autoptr(JsonNode) a = json_from_string(saved, NULL);
    if (!a || !JSON_NODE_HOLDS_OBJECT(a)) {
        FAIL(RESUME, "the checkpoint has no trainer options (not written by `train`)");
        return FALSE;
    }
    /* every option this run records (an option only recorded when set is absent before it) */
    g_autofree char *key = NULL, *in_now = NULL, *in_saved = NULL;
    if (!cl_checkpoint_json_first_difference(now, saved, &key, &in_now, &in_saved))
        return TRUE;
    FAIL(RESUME,
         "the checkpoint was trained with %s %s, this run asks for %s (resume with "
         "the options of the interrupted run)",
         key, in_saved, in_now);
    return FALSE;
}

/* The checkpoint's extra tensors: the four heads, then the heads' moments. */
#define AUX_N_EXTRA 6
static const char *const aux_moment_names[2] = { "aux.adam.m", "aux.adam.v" };

static void aux_extras(const ClTrainerAux *aux, ClCheckpointExtra *x)
{
    float *at = aux->heads->data;
    for (int i = 0; i < 4; i++) {
        size_t n = cl_train_aux_head_len(aux->heads->dim, i);
        x[i] = (ClCheckpointExtra){ (char *)cl_train_aux_head_names[i], at, n };
        at += n;
    }
    x[4] = (ClCheckpointExtra){ (char *)aux_moment_names[0], aux->opt->m, aux->opt->n };
    x[5] = (ClCheckpointExtra){ (char *)aux_moment_names[1], aux->opt->v, aux->opt->n };
}

gboolean cl_trainer_aux_restore(ClTrainerAux *aux, const ClCheckpoint *ck, GError **error)
{
    ClCheckpointExtra want[AUX_N_EXTRA];
    aux_extras(aux, want);
    for (int i = 0; i < AUX_N_EXTRA; i++) {
        const ClCheckpointExtra *x = cl_checkpoint_state_extra(&ck->state, want[i].name);
        if (!x || x->n != want[i].n) {
            g_set_error(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_RESUME,
                        "the checkpoint has no auxiliary head tensor '%s' of %zu values",
                        want[i].name, want[i].n);
            return FALSE;
        }
        memcpy(want[i].data, x->data, x->n * sizeof(float));
    }
    aux->opt->step = ck->opt->step;
    return TRUE;
}

gboolean cl_trainer_save_checkpoint(const char *dir, guint keep, const ClModel *model,
                                    const ClAdamW *opt, const ClTrainerAux *aux, gint64 step,
                                    guint64 rng, guint64 cursor, const char *options_json,
                                    char **path_out, GError **error)
{
    g_autofree char *path = cl_checkpoint_path(dir, "step", step);
    g_autofree char *cursor_json = g_strdup_printf("{\"next\":%" G_GUINT64_FORMAT "}", cursor);
    guint64 words[1] = { rng };
    ClCheckpointExtra extra[AUX_N_EXTRA];
    ClCheckpointState st = { step, words, 1, cursor_json, (char *)options_json, NULL, 0 };
    if (aux->heads) {
        aux_extras(aux, extra);
        st.extra = extra, st.n_extra = AUX_N_EXTRA;
    }
    if (!cl_checkpoint_save(path, model, opt, &st, error))
        return FALSE;
    if (keep > 0 && !cl_checkpoint_rotate(dir, "step", keep, error))
        return FALSE;
    g_free(*path_out);
    *path_out = g_steal_pointer(&path);
    return TRUE;
}

gboolean cl_trainer_parse_cursor(const char *json, guint64 *cursor, GError **error)
{
    g_autoptr(JsonParser) p = json_parser_new();
    if (json_parser_load_from_data(p, json, -1, NULL) && json_parser_get_root(p) &&
        JSON_NODE_HOLDS_OBJECT(json_parser_get_root(p))) {
        JsonObject *o = json_node_get_object(json_parser_get_root(p));
        if (json_object_has_member(o, "next")) {
            gint64 v = json_object_get_int_member(o, "next");
            if (v >= 0) {
                *cursor = (guint64)v;
                return TRUE;
            }
        }
    }
    g_set_error(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_RESUME,
                "the checkpoint's data cursor is not the trainer's (%s)", json);
    return FALSE;
}

gboolean cl_trainer_log_truncate(const char *path, gint64 step, double *elapsed, GError **error)
{
    *elapsed = 0;
    g_autofree char *text = NULL;
    gsize len = 0;
    if (!g_file_test(path, G_FILE_TEST_EXISTS))
        return TRUE;
    if (!g_file_get_contents(path, &text, &len, error))
        return FALSE;
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_autoptr(GString) kept = g_string_new(NULL);
    for (char **l = lines; *l; l++) {
        if (!**l)
            continue;
        g_autoptr(JsonParser) p = json_parser_new();
        if (!json_parser_load_from_data(p, *l, -1, NULL))
            continue; /* a line cut by a crash */
        JsonNode *root = json_parser_get_root(p);
        if (!root || !JSON_NODE_HOLDS_OBJECT(root)) /* a blank line has no root */
            continue;
        JsonObject *obj = json_node_get_object(root);
        if (json_object_has_member(obj, "step") && json_object_get_int_member(obj, "step") > step)
            continue;
        if (json_object_has_member(obj, "elapsed_s") &&
            JSON_NODE_TYPE(json_object_get_member(obj, "elapsed_s")) == JSON_NODE_VALUE)
            *elapsed = json_object_get_double_member(obj, "elapsed_s");
        g_string_append(kept, *l);
        g_string_append_c(kept, '\n');
    }
    return g_file_set_contents(path, kept->str, (gssize)kept->len, error);
}
