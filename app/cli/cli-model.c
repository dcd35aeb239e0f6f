/* cli-model.c - `changelens-cli model init|info|convert`: create, inspect and convert model
 * files (docs/MODEL.md). */
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "train/checkpoint.h"
#include "model/model.h"
#include "model/model-quant.h"
#include "model/safetensors.h"
#include "model/gguf-model.h"
#include "synth/radiograph.h"
#include "synth/synth.h"

#define PROG CL_CLI_NAME " model"

static const char model_usage[] =
    "Usage: changelens-cli model COMMAND [OPTIONS…]\n"
    "\n"
    "Commands:\n"
    "  init (--preset tiny|base|large | --config FILE.json) [--variant V] [--first own|null]\n"
    "       [--no-cross-pos] [--out-init-std X] [--visual-pos-grid SCALE] [--seed N]\n"
    "       [--dtype f32|f16|bf16] [--tokenizer TOK.json] --out FILE\n"
    "                                  write a randomly initialised model\n"
    "  info [--json] FILE              config, parameters, dtypes, sha256, tokenizer size\n"
    "  convert [--dtype D] [--quantize q8_0|q4_1] [--objects-from CHECKPOINT [--objects-task T]]\n"
    "          [--change-threshold P] IN OUT\n"
    "                                  rewrite a model file (safetensors or GGUF) in another\n"
    "                                  dtype, or with its decoder matrices quantized\n"
    "  fit-ood --model IN --out OUT    fit the statistics that flag unfamiliar images\n"
    "  graft [--seed N] [--dtype D] VISION LANGUAGE OUT\n"
    "                                  VISION's encoder and merger with LANGUAGE's decoder and\n"
    "                                  tokenizer (a GGUF file's): the merger's last layer new\n";

static int fail(const GError *err)
{
    fprintf(stderr, PROG ": %s\n", err->message);
    return 1;
}

/* "f32" etc. -> "F32"; NULL for anything else */
static const char *dtype_arg(const char *s)
{
    ClDtype dt;
    return s && cl_dtype_from_name(s, &dt) ? cl_dtype_name(dt) : NULL;
}

/* ---- init ----------------------------------------------------------------------------------- */

static int cmd_init(int argc, char **argv)
{
    g_autofree char *preset = NULL, *variant = NULL, *first = NULL, *dtype = NULL;
    g_autofree char *config = NULL, *out = NULL, *tokenizer = NULL;
    gboolean no_cross_pos = FALSE;
    double out_init_std = -1, pos_grid = 0;
    gint64 seed = 0;
    GOptionEntry entries[] = {
        { "preset", 0, 0, G_OPTION_ARG_STRING, &preset, "Size preset", "tiny|base|large" },
        { "config", 0, 0, G_OPTION_ARG_FILENAME, &config,
          "Config JSON (docs/MODEL.md §1; missing keys take tiny's values)", "FILE.json" },
        { "variant", 0, 0, G_OPTION_ARG_STRING, &variant, "SVE variant",
          "stateless|cross|cross_ffn|self_ext|adaln_zero|self_ffn" },
        { "first", 0, 0, G_OPTION_ARG_STRING, &first, "First image's state", "own|null" },
        { "no-cross-pos", 0, 0, G_OPTION_ARG_NONE, &no_cross_pos, "No RoPE in the state attention",
          NULL },
        { "out-init-std", 0, 0, G_OPTION_ARG_DOUBLE, &out_init_std,
          "Std of the SVE output weights at insertion (0 = zero init)", "X" },
        { "visual-pos-grid", 0, 0, G_OPTION_ARG_DOUBLE, &pos_grid,
          "With visual_pos: merger.pos as a 2-D sin-cos grid times SCALE, not random "
          "(docs/MODEL.md §3.8)",
          "SCALE" },
        { "seed", 0, 0, G_OPTION_ARG_INT64, &seed, "Random seed (default 0)", "N" },
        { "dtype", 0, 0, G_OPTION_ARG_STRING, &dtype, "Stored dtype (default f32)",
          "f32|f16|bf16" },
        { "tokenizer", 0, 0, G_OPTION_ARG_FILENAME, &tokenizer,
          "Tokenizer JSON (tokenizer train --out; default: bytes only)", "TOK.json" },
        { "out", 'o', 0, G_OPTION_ARG_FILENAME, &out, "Model file to write", "FILE" },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- write a randomly initialised model");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) err = NULL;
    if (!cl_cli_parse_options(ctx, PROG, &argc, &argv))
        return CL_CLI_EXIT_USAGE;
    if (argc > 1)
        return cl_cli_usage_error(PROG, "unexpected argument '%s'", argv[1]);
    if (!out)
        return cl_cli_usage_error(PROG, "--out FILE is required");
    if (!preset == !config)
        return cl_cli_usage_error(PROG,
                                  "give one of --preset tiny|base|large or --config FILE.json");
    const char *dt = dtype_arg(dtype ? dtype : "f32");
    if (!dt)
        return cl_cli_usage_error(PROG, "unknown --dtype '%s' (f32, f16 or bf16)", dtype);

    ClModelConfig cfg;
    if (preset) {
        if (!cl_model_config_preset(&cfg, preset, &err))
            return cl_cli_usage_error(PROG, "%s", err->message);
    } else {
        g_autofree char *text = NULL;
        if (!g_file_get_contents(config, &text, NULL, &err) ||
            !cl_model_config_from_json(&cfg, text, &err)) {
            g_prefix_error(&err, "%s: ", config);
            return fail(err);
        }
    }
    if (variant && !cl_sve_variant_from_name(variant, &cfg.sve_variant))
        return cl_cli_usage_error(PROG,
                                  "unknown --variant '%s' (stateless, cross, cross_ffn, self_ext, "
                                  "adaln_zero, self_ffn)",
                                  variant);
    if (first && !cl_sve_first_from_name(first, &cfg.sve_first))
        return cl_cli_usage_error(PROG, "unknown --first '%s' (own or null)", first);
    if (no_cross_pos)
        cfg.sve_cross_pos = FALSE;
    if (out_init_std != -1)
        cfg.sve_out_init_std = out_init_std;

    if (pos_grid != 0 && !cfg.visual_pos)
        return cl_cli_usage_error(PROG,
                                  "--visual-pos-grid needs a config with \"visual_pos\": true");
    if (pos_grid < 0 || !isfinite(pos_grid))
        return cl_cli_usage_error(PROG, "--visual-pos-grid must be a positive scale");

    g_autoptr(ClModel) model = cl_model_new_random(&cfg, (guint64)seed, &err);
    if (!model)
        return fail(err);
    if (pos_grid > 0)
        cl_model_init_visual_pos_grid(model, pos_grid);
    if (tokenizer) {
        g_autofree char *text = NULL;
        ClTokenizer *tok = NULL;
        if (g_file_get_contents(tokenizer, &text, NULL, &err))
            tok = cl_tokenizer_from_json(text, &err);
        if (!tok) {
            g_prefix_error(&err, "%s: ", tokenizer);
            return fail(err);
        }
        if (cl_tokenizer_vocab_size(tok) > cfg.vocab_size) {
            int n = cl_tokenizer_vocab_size(tok);
            cl_tokenizer_free(tok);
            return cl_cli_usage_error(PROG, "%s has %d tokens but the config's vocab_size is %d",
                                      tokenizer, n, cfg.vocab_size);
        }
        cl_tokenizer_free(model->tokenizer);
        model->tokenizer = tok;
    }
    if (!cl_model_save(model, out, dt, &err))
        return fail(err);
    printf("%s\n", out);
    printf("  %-12s %zu\n", "params", model->n_params);
    printf("  %-12s %s\n", "dtype", dt);
    printf("  %-12s %s\n", "sha256", model->sha256);
    return 0;
}

/* ---- info ----------------------------------------------------------------------------------- */

/* "F32" or "F16 (n), F32 (m)" when mixed */
static char *dtypes_of(const ClSafetensors *st, JsonBuilder *b)
{
    guint64 count[CL_DTYPE_U8 + 1] = { 0 };
    for (guint i = 0; i < st->tensors->len; i++)
        count[((const ClSafeTensor *)g_ptr_array_index(st->tensors, i))->dtype]++;
    GString *s = g_string_new(NULL);
    int kinds = 0;
    for (int d = 0; d <= CL_DTYPE_U8; d++)
        kinds += count[d] > 0;
    for (int d = 0; d <= CL_DTYPE_U8; d++) {
        if (!count[d])
            continue;
        if (s->len)
            g_string_append(s, ", ");
        g_string_append(s, cl_dtype_name(d));
        if (kinds > 1)
            g_string_append_printf(s, " (%" G_GUINT64_FORMAT " tensors%s)", count[d],
                                   d == CL_DTYPE_U8 ? " of quantized blocks" : "");
        if (b)
            json_builder_add_string_value(b, cl_dtype_name(d));
    }
    return g_string_free(s, FALSE);
}

static int cmd_info(int argc, char **argv)
{
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        { "json", 0, 0, G_OPTION_ARG_NONE, &json, "Print one JSON object", NULL },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("FILE - describe a model file");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) err = NULL;
    if (!cl_cli_parse_options(ctx, PROG, &argc, &argv))
        return CL_CLI_EXIT_USAGE;
    if (argc != 2)
        return cl_cli_usage_error(PROG,
                                  "give exactly one model FILE (usage: changelens-cli model info "
                                  "[--json] FILE)");
    const char *path = argv[1];
    g_autoptr(ClModel) model = cl_model_load(path, &err);
    if (!model)
        return fail(err);
    if (cl_file_is_gguf(path))
        return cl_cli_model_info_gguf(path, model, json);
    /* the header again, for the stored dtypes (the model holds f32) */
    g_autoptr(ClSafetensors) st = cl_safetensors_open(path, &err);
    if (!st)
        return fail(err);
    g_autofree char *cfg_json = cl_model_config_to_json(&model->config);
    int vocab = cl_tokenizer_vocab_size(model->tokenizer);
    if (json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "path");
        json_builder_add_string_value(b, path);
        json_builder_set_member_name(b, "config");
        g_autoptr(JsonNode) cfg_node = json_from_string(cfg_json, NULL);
        json_builder_add_value(b, g_steal_pointer(&cfg_node));
        json_builder_set_member_name(b, "params");
        json_builder_add_int_value(b, (gint64)model->n_params);
        json_builder_set_member_name(b, "tensors");
        json_builder_add_int_value(b, st->tensors->len);
        json_builder_set_member_name(b, "dtypes");
        json_builder_begin_array(b);
        g_free(dtypes_of(st, b));
        json_builder_end_array(b);
        json_builder_set_member_name(b, "file_size");
        json_builder_add_int_value(b, (gint64)st->size);
        json_builder_set_member_name(b, "sha256");
        json_builder_add_string_value(b, model->sha256);
        json_builder_set_member_name(b, "tokenizer_vocab");
        json_builder_add_int_value(b, vocab);
        json_builder_end_object(b);
        cl_cli_print_json(b);
        return 0;
    }
    const ClModelConfig *c = &model->config;
    g_autofree char *dts = dtypes_of(st, NULL);
    printf("%s\n", path);
    printf("  %-14s %zu in %u tensors (%s), %" G_GSIZE_FORMAT " bytes\n", "params", model->n_params,
           st->tensors->len, dts, st->size);
    printf("  %-14s %s\n", "sha256", model->sha256);
    printf("  %-14s %d × %d, %d channel%s, patch %d (grid %d × %d)\n", "image", c->image_size,
           c->image_size, c->channels, c->channels == 1 ? "" : "s", c->patch_size,
           cl_config_grid(c), cl_config_grid(c));
    printf("  %-14s %d × %d (%d heads, MLP %d), RoPE base %g\n", "encoder", c->enc_dim,
           c->enc_depth, c->enc_heads, c->enc_mlp, c->enc_rope_base);
    printf("  %-14s %s, first %s, cross_pos %s, out_init_std %g\n", "SVE",
           cl_sve_variant_name(c->sve_variant), cl_sve_first_name(c->sve_first),
           c->sve_cross_pos ? "on" : "off", c->sve_out_init_std);
    printf("  %-14s hidden %d%s%s\n", "merger", c->merger_hidden,
           c->visual_center ? ", tokens centred per image" : "",
           c->visual_pos ? ", learned positions" : "");
    printf("  %-14s %d × %d (%d/%d heads, MLP %d), RoPE base %g, max_len %d%s\n", "decoder",
           c->dec_dim, c->dec_depth, c->dec_heads, c->dec_kv_heads, c->dec_mlp, c->rope_base,
           c->max_len, c->tie_embeddings ? ", tied embeddings" : "");
    printf("  %-14s %d tokens (vocab_size %d)\n", "tokenizer", vocab, c->vocab_size);
    printf("  %-14s %s\n", "config", cfg_json);
    return 0;
}

/* ---- convert -------------------------------------------------------------------------------- */

/* whether the checkpoint's training tasks ("train.options" "task", e.g. "radiograph,aerial+changed,
 * photo-edits~2") include `task`; TRUE when it does not say (data from files) */
static gboolean trained_on(const ClSafetensors *st, const char *task, char **tasks)
{
    *tasks = NULL;
    const char *opts = cl_safetensors_metadata(st, "train.options");
    g_autoptr(JsonParser) p = json_parser_new();
    if (!opts || !json_parser_load_from_data(p, opts, -1, NULL) ||
        !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(p)))
        return TRUE;
    JsonObject *o = json_node_get_object(json_parser_get_root(p));
    const char *list = json_object_has_member(o, "task")
                           ? json_object_get_string_member_with_default(o, "task", NULL)
                           : NULL;
    if (!list || !*list)
        return TRUE;
    *tasks = g_strdup(list);
    g_auto(GStrv) parts = g_strsplit(list, ",", -1);
    for (int i = 0; parts[i]; i++) {
        const gsize n = strcspn(parts[i], "+~"); /* the mix's suffixes: "+changed", "~2" */
        if (n == strlen(task) && strncmp(parts[i], task, n) == 0)
            return TRUE;
    }
    return FALSE;
}

/* --objects-task: "photo-edits", "aerial", "radiograph", or two joined by a comma, the second
 * "radiograph" ("aerial,radiograph": one head trained on both tasks); *first, *findings: the
 * first one's coding, and whether radiograph findings come beside it */
static gboolean parse_objects_task(const char *arg, ClObjectTask *first, gboolean *findings)
{
    g_auto(GStrv) parts = g_strsplit(arg, ",", 0);
    const guint n = g_strv_length(parts);
    ClObjectTask second;
    *findings = FALSE;
    if (n < 1 || n > 2 || !cl_object_task_from_name(parts[0], first))
        return FALSE;
    if (n == 2) {
        if (!cl_object_task_from_name(parts[1], &second) || second != CL_OBJECTS_RADIOGRAPH ||
            *first == CL_OBJECTS_RADIOGRAPH)
            return FALSE;
        *findings = TRUE;
    }
    return TRUE;
}

/* --objects-from: the model with the object head (config.n_objects) whose weights are the
 * trainer's objects head in `ckpt` ("aux.objects.weight", "aux.objects.bias") and whose classes
 * are those of `task` (--objects-task): photo-edits' objects, the aerial task's kinds, the
 * radiograph task's findings, or aerial kinds with radiograph findings beside them */
static ClModel *with_object_head(const ClModel *model, const char *ckpt, const char *task,
                                 GError **error)
{
    ClObjectTask coding;
    gboolean findings;
    if (!parse_objects_task(task, &coding, &findings)) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "--objects-task %s: the object head's classes are those of photo-edits, "
                    "aerial or radiograph, or of one of the first two and radiograph "
                    "(\"aerial,radiograph\")",
                    task);
        return NULL;
    }
    g_autoptr(ClSafetensors) st = cl_safetensors_open(ckpt, error);
    if (!st)
        return NULL;
    const gint64 K = CL_CONFIG_OBJECT_OUT, D = model->config.enc_dim;
    const ClSafeTensor *w = cl_safetensors_get(st, "aux.objects.weight"),
                       *b = cl_safetensors_get(st, "aux.objects.bias");
    if (!w || !b || w->dtype != CL_DTYPE_F32 || b->dtype != CL_DTYPE_F32 ||
        w->numel != (guint64)(K * D) || b->numel != (guint64)K) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE,
                    "%s: no objects head for this model (aux.objects.weight: %" G_GINT64_FORMAT
                    " × %" G_GINT64_FORMAT " F32 values, aux.objects.bias: %" G_GINT64_FORMAT
                    "): train with --aux-objects",
                    ckpt, K, D, K);
        return NULL;
    }
    /* a head trained on other tasks' objects does not know these classes */
    for (int i = 0; i < 1 + findings; i++) {
        const char *name = cl_object_task_name(i ? CL_OBJECTS_RADIOGRAPH : coding);
        g_autofree char *tasks = NULL;
        if (!trained_on(st, name, &tasks)) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "%s: its objects head was trained on %s, not on %s: its labels are not "
                        "%s's classes (name the tasks it learnt with --objects-task "
                        "photo-edits|aerial|radiograph|aerial,radiograph)",
                        ckpt, tasks, name, name);
            return NULL;
        }
    }
    ClModelConfig cfg = model->config;
    cfg.object_task = coding;
    memset(cfg.object_names, 0, sizeof cfg.object_names);
    memset(cfg.finding_names, 0, sizeof cfg.finding_names);
    cfg.n_findings = 0;
    const char *const *radiograph = cl_synth_radiograph_categories();
    if (coding == CL_OBJECTS_AERIAL) {
        cfg.n_objects = cl_synth_aerial_n_kinds();
        for (int c = 0; c < cfg.n_objects; c++)
            g_strlcpy(cfg.object_names[c], cl_synth_aerial_kind_name(c), CL_CONFIG_OBJECT_NAME);
    } else if (coding == CL_OBJECTS_RADIOGRAPH) {
        cfg.n_objects = (int)g_strv_length((char **)radiograph);
        for (int c = 0; c < cfg.n_objects; c++)
            g_strlcpy(cfg.object_names[c], radiograph[c], CL_CONFIG_OBJECT_NAME);
    } else {
        cfg.n_objects = cl_synth_photo_n_objects();
        for (int c = 0; c < cfg.n_objects; c++)
            g_strlcpy(cfg.object_names[c], cl_synth_photo_object_name(c), CL_CONFIG_OBJECT_NAME);
    }
    for (int c = 0; findings && radiograph[c]; c++)
        g_strlcpy(cfg.finding_names[cfg.n_findings++], radiograph[c], CL_CONFIG_OBJECT_NAME);
    ClModel *m = cl_model_reshaped(model, &cfg, 0, "enc.objects.", error);
    if (!m)
        return NULL;
    memcpy(m->w.enc_objects_w, w->data, sizeof(float) * (size_t)(K * D));
    memcpy(m->w.enc_objects_b, b->data, sizeof(float) * (size_t)K);
    cl_model_weights_changed(m);
    return m;
}

static int cmd_convert(int argc, char **argv)
{
    g_autofree char *dtype = NULL, *quantize = NULL, *objects_from = NULL, *objects_task = NULL;
    double change_threshold = 0, sure_logprob = 0;
    gboolean no_objects = FALSE;
    GOptionEntry entries[] = {
        { "dtype", 0, 0, G_OPTION_ARG_STRING, &dtype,
          "Stored dtype of OUT's float tensors (default with --quantize: IN's; f32 for GGUF)",
          "f32|f16|bf16" },
        { "quantize", 0, 0, G_OPTION_ARG_STRING, &quantize,
          "Keep the decoder's attention, MLP and output matrices as blocks of this type "
          "(docs/MODEL.md §7)",
          "q8_0|q4_1" },
        { "objects-from", 0, 0, G_OPTION_ARG_FILENAME, &objects_from,
          "Add the object head (docs/MODEL.md §3.13) from a training checkpoint's objects loss "
          "head",
          "CHECKPOINT" },
        { "objects-task", 0, 0, G_OPTION_ARG_STRING, &objects_task,
          "With --objects-from: the task whose objects the head learnt, and so its classes: "
          "photo-edits' pasted objects (default), the aerial task's kinds (building, road, "
          "trees, water) or the radiograph task's findings; \"aerial,radiograph\": one head "
          "trained on both, its aerial kinds with the radiograph findings beside them; the "
          "checkpoint must have been trained on each",
          "photo-edits|aerial|radiograph|aerial,radiograph" },
        { "no-objects", 0, 0, G_OPTION_ARG_NONE, &no_objects,
          "Leave the object head and its class names out (a model grafted from the photo "
          "model and trained on other images, whose objects are not those classes)",
          NULL },
        { "change-threshold", 0, 0, G_OPTION_ARG_DOUBLE, &change_threshold,
          "The change head's largest probability from which describe calls a change (config "
          "change_threshold, docs/MODEL.md §3.10)",
          "P" },
        { "sure-logprob", 0, 0, G_OPTION_ARG_DOUBLE, &sure_logprob,
          "The answer's log-probability (< 0) below which describe says the model is unsure "
          "(config sure_logprob, docs/MODEL.md §3.14)",
          "L" },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("IN OUT - rewrite a model file");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) err = NULL;
    if (!cl_cli_parse_options(ctx, PROG, &argc, &argv))
        return CL_CLI_EXIT_USAGE;
    if (!dtype && !quantize && change_threshold == 0 && sure_logprob == 0 && !no_objects &&
        !objects_from && !objects_task)
        return cl_cli_usage_error(PROG, "--dtype f32|f16|bf16, --quantize q8_0|q4_1, "
                                        "--change-threshold P, --sure-logprob L, --objects-from "
                                        "CHECKPOINT or --no-objects is required");
    if (sure_logprob > 0)
        return cl_cli_usage_error(PROG, "--sure-logprob is a log-probability: below 0");
    if (no_objects && objects_from)
        return cl_cli_usage_error(PROG, "--no-objects and --objects-from exclude each other");
    if (objects_task && !objects_from)
        return cl_cli_usage_error(PROG, "--objects-task names the classes of --objects-from's "
                                        "head: give --objects-from CHECKPOINT");
    ClObjectTask coding;
    gboolean with_findings;
    if (objects_task && !parse_objects_task(objects_task, &coding, &with_findings))
        return cl_cli_usage_error(PROG,
                                  "unknown --objects-task '%s' (photo-edits, aerial, radiograph "
                                  "or aerial,radiograph)",
                                  objects_task);
    const char *dt = dtype_arg(dtype ? dtype : "f32");
    if (!dt)
        return cl_cli_usage_error(PROG, "unknown --dtype '%s' (f32, f16 or bf16)", dtype);
    ClQuantType qt = CL_QUANT_Q8_0;
    if (quantize && (!cl_quant_type_from_name(quantize, &qt) || !CL_QUANT_IS_BLOCK(qt)))
        return cl_cli_usage_error(PROG, "unknown --quantize '%s' (q8_0 or q4_1)", quantize);
    if (argc != 3)
        return cl_cli_usage_error(
            PROG, "give IN and OUT (usage: changelens-cli model convert [--dtype D] "
                  "[--quantize Q] IN OUT)");
    /* a GGUF file's quantized matrices are kept as they are (no second rounding when the type
     * is the same) */
    g_autoptr(ClModel) model = quantize && cl_file_is_gguf(argv[1])
                                   ? cl_model_load_gguf(argv[1], 0, TRUE, &err)
                               : cl_checkpoint_file_is_checkpoint(argv[1])
                                   ? cl_checkpoint_load_model(argv[1], &err) /* its model */
                                   : cl_model_load(argv[1], &err);
    if (!model)
        return fail(err);
    if (!dtype && !cl_file_is_gguf(argv[1])) {
        /* the float tensors stay as IN stores them (a model file is written in one dtype) */
        g_autoptr(ClSafetensors) st = cl_safetensors_open(argv[1], &err);
        if (!st)
            return fail(err);
        for (guint i = 0; i < st->tensors->len; i++) {
            const ClSafeTensor *t = g_ptr_array_index(st->tensors, i);
            if (t->dtype != CL_DTYPE_U8) {
                dt = cl_dtype_name(t->dtype);
                break;
            }
        }
    }
    if (objects_from) {
        ClModel *with = with_object_head(model, objects_from,
                                         objects_task ? objects_task : "photo-edits", &err);
        if (!with)
            return fail(err);
        cl_model_free(model);
        model = with;
    }
    if (no_objects && model->config.n_objects > 0) {
        ClModelConfig cfg = model->config;
        cfg.n_objects = cfg.n_findings = 0;
        cfg.object_task = CL_OBJECTS_PHOTO_EDITS;
        memset(cfg.object_names, 0, sizeof cfg.object_names);
        ClModel *without = cl_model_reshaped(model, &cfg, 0, "enc.objects.", &err);
        if (!without)
            return fail(err);
        cl_model_free(model);
        model = without;
    }
    if (change_threshold != 0) {
        ClModelConfig cfg = model->config;
        cfg.change_threshold = change_threshold;
        if (!cl_model_config_validate(&cfg, &err))
            return fail(err);
        model->config.change_threshold = change_threshold;
    }
    if (sure_logprob != 0)
        model->config.sure_logprob = sure_logprob;
    if (quantize && !cl_model_quantize(model, qt, &err)) {
        g_prefix_error(&err, "%s: ", argv[1]);
        return fail(err);
    }
    if (!cl_model_save(model, argv[2], dt, &err))
        return fail(err);
    printf("%s\n", argv[2]);
    printf("  %-12s %s\n", "dtype", dt);
    if (quantize)
        printf("  %-12s %s (decoder attention, MLP and output matrices)\n", "quantized",
               cl_quant_type_name(qt));
    printf("  %-12s %s\n", "sha256", model->sha256);
    return 0;
}

static int cmd_graft(int argc, char **argv)
{
    g_autofree char *dtype = NULL;
    gint64 seed = 0;
    GOptionEntry entries[] = {
        { "seed", 0, 0, G_OPTION_ARG_INT64, &seed, "Seed of the new tensors (default 0)", "N" },
        { "dtype", 0, 0, G_OPTION_ARG_STRING, &dtype, "Stored dtype (default f32)",
          "f32|f16|bf16" },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx =
        g_option_context_new("VISION LANGUAGE OUT - one model from two (docs/MODEL.md §4.7)");
    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!cl_cli_parse_options(ctx, PROG, &argc, &argv))
        return CL_CLI_EXIT_USAGE;
    const char *dt = dtype_arg(dtype ? dtype : "f32");
    if (!dt)
        return cl_cli_usage_error(PROG, "unknown --dtype '%s' (f32, f16 or bf16)", dtype);
    if (argc != 4)
        return cl_cli_usage_error(PROG, "give VISION, LANGUAGE and OUT");
    g_autoptr(GError) err = NULL;
    g_autoptr(ClModel) vision = cl_checkpoint_file_is_checkpoint(argv[1])
                                    ? cl_checkpoint_load_model(argv[1], &err)
                                    : cl_model_load(argv[1], &err);
    if (!vision)
        return fail(err);
    g_autoptr(ClModel) language = cl_model_load(argv[2], &err);
    if (!language)
        return fail(err);
    g_autoptr(ClModel) m = cl_model_grafted(vision, language, (guint64)seed, &err);
    if (!m || !cl_model_save(m, argv[3], dt, &err)) {
        g_prefix_error(&err, "%s + %s: ", argv[1], argv[2]);
        return fail(err);
    }
    printf("%s\n", argv[3]);
    printf("  %-12s %s (encoder, merger) + %s (decoder, tokenizer)\n", "from", argv[1], argv[2]);
    printf("  %-12s %s\n", "sha256", m->sha256);
    return 0;
}

int cl_cli_model(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(model_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? CL_CLI_EXIT_USAGE : 0;
    }
    const char *sub = argv[1];
    /* the subcommand's program name: "changelens-cli model init" */
    g_autofree char *prog = g_strdup_printf("%s %s", argv[0], sub);
    argv[1] = prog;
    if (strcmp(sub, "init") == 0)
        return cmd_init(argc - 1, argv + 1);
    if (strcmp(sub, "info") == 0)
        return cmd_info(argc - 1, argv + 1);
    if (strcmp(sub, "convert") == 0)
        return cmd_convert(argc - 1, argv + 1);
    if (strcmp(sub, "graft") == 0)
        return cmd_graft(argc - 1, argv + 1);
    if (strcmp(sub, "fit-ood") == 0) {
#ifdef CL_ENGINE_ONLY
        return cl_cli_usage_error(argv[0], "fit-ood: the engine-only program writes no data sets "
                                           "of image files (changelens-cli model fit-ood does)");
#else
        return cl_cli_model_fit_ood(argc - 1, argv + 1);
#endif
    }
    fprintf(stderr, PROG ": unknown command '%s'\n\n%s", sub, model_usage);
    return CL_CLI_EXIT_USAGE;
}
