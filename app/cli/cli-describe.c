/* cli-describe.c - `changelens-cli describe`: what changed across an image sequence, streamed,
 * with heatmap overlays and a JSON report; the work is in core/model/describe.c. */
#include <json-glib/json-glib.h>
#include "jsonnum.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/backend.h"
#include "cli.h"
#include "model/describe.h"
#include "image/geoexport.h"
#include "image/sequence.h"
#include "model/vist.h"

#define PROG "changelens-cli describe"
/* How much of the heat colour covers the image where the heat is highest. */
#define HEATMAP_OPACITY 0.6

static const char summary_text[] =
    "Describes what changed across an image sequence (the first image is the reference, each\n"
    "later one is read against its predecessor). Multi-frame files count as one image per frame;\n"
    "DICOM files are ordered by acquisition time. The description is streamed to stdout.\n"
    "\n"
    "Without --model and --random-init the default model is used: $CHANGELENS_MODEL, else\n"
    "data/models/changelens-default.safetensors of the source tree (or\n"
    "share/changelens/models/ when installed).\n"
    "Exit status: 0 done, 1 failure, 2 usage error.";

/* ---- streaming ---------------------------------------------------------------------------- */

/* ---- JSON --------------------------------------------------------------------------------- */

static void json_member_double(JsonBuilder *b, const char *key, double v)
{
    json_builder_set_member_name(b, key);
    if (isfinite(v))
        json_builder_add_double_value(b, cl_json_double(v));
    else
        json_builder_add_null_value(b);
}

static void json_member_string(JsonBuilder *b, const char *key, const char *v)
{
    json_builder_set_member_name(b, key);
    if (v)
        json_builder_add_string_value(b, v);
    else
        json_builder_add_null_value(b);
}

static void json_member_int(JsonBuilder *b, const char *key, gint64 v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_int_value(b, v);
}

typedef struct {
    const char *model_path; /* NULL for random init */
    const char *model_sha256;
    const char *preset;
    gint64 seed;
    const char *variant;
    const char *device;
    char **heatmap_files; /* per heatmap, NULL when not written */
    const char *object;   /* the object head's class name, NULL when none */
} JsonContext;

/* names joined with ", " ("none" for none) */
static char *join_names(const GPtrArray *names)
{
    if (!names || names->len == 0)
        return g_strdup("none");
    g_autoptr(GString) s = g_string_new(NULL);
    for (guint i = 0; i < names->len; i++)
        g_string_append_printf(s, "%s%s", i ? ", " : "", (const char *)names->pdata[i]);
    return g_string_free(g_steal_pointer(&s), FALSE);
}

static char *result_to_json(const ClDescribeResult *r, const ClSequence *seq, const JsonContext *c)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    g_autofree char *text = g_utf8_make_valid(r->text, -1);
    json_member_string(b, "text", text);
    json_builder_set_member_name(b, "tokens");
    json_builder_begin_array(b);
    for (guint i = 0; i < r->ids->len; i++)
        json_builder_add_int_value(b, g_array_index(r->ids, gint32, i));
    json_builder_end_array(b);
    json_member_string(b, "stop_reason", cl_stop_reason_name(r->stop_reason));
    json_member_double(b, "logprob", r->logprob);
    json_member_string(b, "domain", cl_chat_domain_name(r->domain));
    json_member_int(b, "prompt_positions", r->n_prompt);
    if (r->context_tokens > 0) {
        json_builder_set_member_name(b, "prior_reports");
        json_builder_begin_object(b);
        json_member_int(b, "tokens", r->context_tokens);
        json_member_int(b, "compressed_tokens", r->context_compressed);
        json_member_int(b, "pages", r->context_pages);
        json_member_int(b, "page_positions", (gint64)r->context_pages * r->n_visual_per_image);
        json_builder_end_object(b);
    }

    json_builder_set_member_name(b, "images");
    json_builder_begin_array(b);
    for (guint t = 0; t < cl_sequence_length(seq); t++) {
        const ClSequenceItem *it = cl_sequence_item(seq, t);
        json_builder_begin_object(b);
        json_member_string(b, "path", it->image->path);
        json_member_int(b, "frame", it->frame);
        json_member_string(b, "label", it->label);
        json_member_int(b, "width", it->image->width);
        json_member_int(b, "height", it->image->height);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);

    json_builder_set_member_name(b, "timings");
    json_builder_begin_object(b);
    json_member_double(b, "load_ms", r->load_ms);
    json_member_double(b, "preprocess_ms", r->preprocess_ms);
    json_builder_set_member_name(b, "encode_ms");
    json_builder_begin_array(b);
    double enc_total = 0;
    for (guint t = 0; t < r->n_images; t++) {
        json_builder_add_double_value(b, cl_json_double(r->encode_ms[t]));
        enc_total += r->encode_ms[t];
    }
    json_builder_end_array(b);
    json_member_double(b, "prefill_ms", r->prefill_ms);
    json_member_double(b, "decode_ms", r->decode_ms);
    json_member_int(b, "generated_tokens", r->ids->len);
    json_member_double(b, "tokens_per_s", r->tokens_per_s);
    json_member_double(b, "total_ms",
                       r->load_ms + r->preprocess_ms + enc_total + r->prefill_ms + r->decode_ms);
    json_builder_end_object(b);

    json_builder_set_member_name(b, "model");
    json_builder_begin_object(b);
    if (c->model_path) {
        json_member_string(b, "source", "file");
        json_member_string(b, "path", c->model_path);
        json_member_string(b, "sha256", c->model_sha256);
    } else {
        g_autofree char *desc =
            g_strdup_printf("random-init %s seed %" G_GINT64_FORMAT, c->preset, c->seed);
        json_member_string(b, "source", "random-init");
        json_member_string(b, "description", desc);
        json_member_string(b, "preset", c->preset);
        json_member_int(b, "seed", c->seed);
    }
    json_member_string(b, "variant", c->variant);
    json_builder_end_object(b);
    json_member_string(b, "device", c->device);

    json_builder_set_member_name(b, "heatmaps");
    json_builder_begin_array(b);
    for (guint i = 0; i < r->heatmaps->len; i++) {
        const ClHeatmap *hm = g_ptr_array_index(r->heatmaps, i);
        json_builder_begin_object(b);
        json_member_int(b, "image", hm->image_index + 1);
        json_member_string(b, "source", cl_heatmap_source_name(hm->source));
        json_member_int(b, "width", hm->width);
        json_member_int(b, "height", hm->height);
        json_member_double(b, "max", hm->max);
        json_builder_set_member_name(b, "values");
        json_builder_begin_array(b);
        for (int k = 0; k < hm->width * hm->height; k++)
            json_builder_add_double_value(
                b, cl_json_double(isfinite(hm->values[k]) ? hm->values[k] : 0.0));
        json_builder_end_array(b);
        json_member_string(b, "file", c->heatmap_files ? c->heatmap_files[i] : NULL);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);

    if (r->change_max >= 0) { /* the change head's call on the last image */
        json_builder_set_member_name(b, "change_probability_max");
        json_builder_add_double_value(b, cl_json_double(r->change_max));
        json_member_double(b, "change_threshold", r->change_threshold);
        /* the changed regions (grounding.h): 3 × 3 cell names and centres in [0, 1] */
        json_builder_set_member_name(b, "change_regions");
        json_builder_begin_array(b);
        for (int i = 0; i < r->regions.n; i++) {
            json_builder_begin_object(b);
            json_member_string(b, "position", cl_grounding_position_names[r->regions.cell[i]]);
            json_member_double(b, "x", r->regions.x[i]);
            json_member_double(b, "y", r->regions.y[i]);
            json_member_double(b, "mass", r->regions.mass[i]);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
    }
    if (c->object) { /* config.n_objects: what the object head sees where the change is */
        json_member_string(b, "changed_object", c->object);
        json_member_double(b, "changed_object_share", r->object_share);
    }
    if (r->findings_added && r->findings_missing) { /* a radiograph's findings the head sees */
        for (int added = 1; added >= 0; added--) {
            const GPtrArray *names = added ? r->findings_added : r->findings_missing;
            json_builder_set_member_name(b, added ? "findings_added" : "findings_missing");
            json_builder_begin_array(b);
            for (guint i = 0; i < names->len; i++)
                json_builder_add_string_value(b, names->pdata[i]);
            json_builder_end_array(b);
        }
    }
    json_builder_set_member_name(b, "notices");
    json_builder_begin_array(b);
    for (guint i = 0; i < r->notices->len; i++)
        json_builder_add_string_value(b, g_ptr_array_index(r->notices, i));
    json_builder_end_array(b);
    json_builder_end_object(b);

    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, TRUE);
    return json_generator_to_data(gen, NULL);
}

/* ---- the command -------------------------------------------------------------------------- */

typedef struct {
    char *model_path, *random_init, *variant, *device, *prompt, *heatmap, *domain_name;
    char *stream, *pages_prefix, *heatmap_source, *geotiff, *mask_threshold_text;
    double mask_threshold;
    gint64 seed, max_tokens, beam_size, sparse_topk;
    gboolean delta, json, no_change_gate, no_grounding;
    char **files, **reports;
    ClSveVariant sve_variant;
} DescribeArgs;

static void describe_args_clear(DescribeArgs *a)
{
    cl_cli_free_all(&a->model_path, &a->random_init, &a->variant, &a->device, &a->prompt,
                    &a->heatmap, &a->domain_name, &a->stream, &a->pages_prefix, &a->heatmap_source,
                    &a->geotiff, &a->mask_threshold_text, NULL);
    g_clear_pointer(&a->files, g_strfreev);
    g_clear_pointer(&a->reports, g_strfreev);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(DescribeArgs, describe_args_clear)

/* The options and the checks that need nothing read; returns -1 to go on, else the exit
 * status. */
static int parse_describe_args(int argc, char **argv, DescribeArgs *a)
{
    a->seed = -1, a->max_tokens = 256, a->beam_size = 1, a->sparse_topk = -1;
    const ClCliIntOption ints[] = {
        { "seed", 0, 0, G_MAXINT64, &a->seed },
        { "max-tokens", 'n', 1, G_MAXINT, &a->max_tokens },
        { "beam", 'b', 1, 64, &a->beam_size },
        { "sparse-prefill", 0, 0, G_MAXINT, &a->sparse_topk },
        { NULL },
    };
    GOptionEntry entries[] = {
        { "model", 'm', 0, G_OPTION_ARG_FILENAME, &a->model_path, "Model file (safetensors)",
          "FILE" },
        { "random-init", 0, 0, G_OPTION_ARG_STRING, &a->random_init,
          "Use an untrained model of this preset (tiny, base, large) instead of a file", "PRESET" },
        CL_CLI_INT_ENTRY("seed", 0, "Seed of --random-init (default 0)", "N"),
        { "variant", 0, 0, G_OPTION_ARG_STRING, &a->variant,
          "SVE variant of --random-init: stateless, cross, cross_ffn, self_ext, adaln_zero, "
          "self_ffn",
          "V" },
        { "device", 'd', 0, G_OPTION_ARG_STRING, &a->device,
          "auto (GPU when present, default), cpu or cuda", "DEVICE" },
        { "prompt", 'p', 0, G_OPTION_ARG_STRING, &a->prompt,
          "Ask this instead of the domain's final question", "TEXT" },
        { "domain", 0, 0, G_OPTION_ARG_STRING, &a->domain_name,
          "Conversation: generic, radiograph, aerial, edits, shapes (default: from the first "
          "image)",
          "NAME" },
        CL_CLI_INT_ENTRY("max-tokens", 'n', "Generate at most N tokens (default 256)", "N"),
        CL_CLI_INT_ENTRY("beam", 'b', "Beam search with N beams (1 = greedy)", "N"),
        { "stream", 0, 0, G_OPTION_ARG_STRING, &a->stream,
          "Streaming KV cache: every position attends to the first SINK positions and the last "
          "WINDOW ones (memory of SINK + WINDOW positions, no max_len bound; e.g. 256+2048)",
          "SINK+WINDOW" },
        CL_CLI_INT_ENTRY(
            "sparse-prefill", 0,
            "Offline sparse prefill: the prompt's queries, per block of 32 positions, attend to the "
            "first block, the previous one, their own and the K best others (K >= 0)",
            "K"),
        { "prior-report", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &a->reports,
          "A prior report or case note (UTF-8 text, repeatable) read with the images; a model "
          "with VIST2 keeps it as rendered pages' visual tokens",
          "FILE" },
        { "context-pages", 0, 0, G_OPTION_ARG_FILENAME, &a->pages_prefix,
          "Write the pages VIST2 rendered the prior reports into as PREFIX-1.png, PREFIX-2.png, …",
          "PREFIX" },
        { "heatmap", 0, 0, G_OPTION_ARG_FILENAME, &a->heatmap,
          "Write heatmap overlays PREFIX-2.png, PREFIX-3.png, … (one per image after the first)",
          "PREFIX" },
        { "geotiff", 0, 0, G_OPTION_ARG_FILENAME, &a->geotiff,
          "Write each heatmap on its image's own grid (same size, CRS and geotransform, through "
          "GDAL): PREFIX-N-heat.tif (Float32, 0..1), PREFIX-N-mask.tif (1 where the heat is at or "
          "above --mask-threshold) and PREFIX-N-regions.gpkg (the changed regions as polygons "
          "with area_m2), N = 2, 3, …",
          "PREFIX" },
        { "mask-threshold", 0, 0, G_OPTION_ARG_STRING, &a->mask_threshold_text,
          "The heat (0..1) from which --geotiff's mask counts a pixel as changed (default 0.5)",
          "T" },
        { "delta", 0, 0, G_OPTION_ARG_NONE, &a->delta,
          "Heatmaps from the paper's Δ map (a second encoder pass) instead of the update norms",
          NULL },
        { "no-change-gate", 0, 0, G_OPTION_ARG_NONE, &a->no_change_gate,
          "A model with a change head: do not steer the answer by the head's change call", NULL },
        { "no-grounding", 0, 0, G_OPTION_ARG_NONE, &a->no_grounding,
          "A model with a change head: do not hold the answer's position and object to what "
          "the heads found (docs/MODEL.md §3.13)",
          NULL },
        { "heatmap-source", 0, 0, G_OPTION_ARG_STRING, &a->heatmap_source,
          "auto (default: the change head's probabilities when the model has one, else the "
          "update norms), update_norm, delta or change",
          "SOURCE" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &a->json,
          "Print one JSON object (text, tokens, timings, model, device, heatmaps) instead of "
          "streaming",
          NULL },
        { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &a->files, NULL,
          "IMG1 IMG2 [IMG…]" },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- describe what changed across images");
    g_option_context_set_summary(ctx, summary_text);
    cl_cli_add_entries(ctx, entries, ints);
    if (!cl_cli_parse_options(ctx, PROG, &argc, &argv))
        return CL_CLI_EXIT_USAGE;
    if (!a->files || !a->files[0])
        return cl_cli_usage_error(PROG, "no images given");
    if (a->model_path && a->random_init)
        return cl_cli_usage_error(PROG, "--model and --random-init exclude each other");
    if (a->seed != -1 && !a->random_init)
        return cl_cli_usage_error(PROG, "--seed only applies to --random-init");
    a->mask_threshold = 0.5;
    if (a->mask_threshold_text) {
        g_autoptr(GError) perr = NULL;
        if (!a->geotiff)
            return cl_cli_usage_error(PROG, "--mask-threshold only applies to --geotiff");
        if (!cl_cli_parse_double("--mask-threshold", a->mask_threshold_text, 0, 1,
                                 &a->mask_threshold, &perr))
            return cl_cli_usage_error(PROG, "%s", perr->message);
    }
    if (a->variant && !a->random_init)
        return cl_cli_usage_error(PROG, "--variant only applies to --random-init (a model file "
                                        "has its variant built in)");
    if (!a->device)
        a->device = g_strdup("auto");
    if (strcmp(a->device, "auto") != 0 && strcmp(a->device, "cpu") != 0 &&
        strcmp(a->device, "cuda") != 0)
        return cl_cli_usage_error(PROG, "--device must be auto, cpu or cuda");
    a->sve_variant = CL_SVE_CROSS_FFN;
    if (a->variant && !cl_sve_variant_from_name(a->variant, &a->sve_variant))
        return cl_cli_usage_error(PROG, "unknown variant '%s'", a->variant);
    return -1;
}

/* The --prior-report files, stripped, joined by blank lines into context; returns -1 to go on,
 * else the exit status. */
static int read_prior_reports(char **reports, GString *context)
{
    for (int i = 0; reports && reports[i]; i++) {
        g_autofree char *text = NULL;
        gsize len = 0;
        g_autoptr(GError) rerr = NULL;
        if (!g_file_get_contents(reports[i], &text, &len, &rerr)) {
            fprintf(stderr, "%s: --prior-report: %s\n", PROG, rerr->message);
            return 1;
        }
        if (len > (1u << 20) || !g_utf8_validate(text, (gssize)len, NULL)) {
            fprintf(stderr, "%s: --prior-report %s: %s\n", PROG, reports[i],
                    len > (1u << 20) ? "larger than 1 MiB" : "not UTF-8 text");
            return 1;
        }
        g_strstrip(text);
        if (context->len && *text)
            g_string_append(context, "\n\n");
        g_string_append(context, text);
    }
    return -1;
}

/* The run's options from the arguments (opts->context points into context) and the
 * --random-init config; returns -1 to go on, else the exit status. */
static int describe_options(const DescribeArgs *a, GString *context, ClDescribeOptions *opts,
                            ClModelConfig *cfg)
{
    cl_describe_options_init(opts);
    int rc = read_prior_reports(a->reports, context);
    if (rc >= 0)
        return rc;
    if (a->sparse_topk >= 0 && a->stream)
        return cl_cli_usage_error(PROG, "--sparse-prefill and --stream exclude each other");
    if (a->sparse_topk >= 0) {
        opts->sparse_block = 32;
        opts->sparse_topk = (int)a->sparse_topk;
    }
    if (a->pages_prefix && !context->len)
        return cl_cli_usage_error(PROG, "--context-pages needs --prior-report");
    opts->context = context->len ? context->str : NULL;
    if (a->stream && !cl_cli_parse_stream(a->stream, &opts->stream_sink, &opts->stream_window))
        return cl_cli_usage_error(PROG, "--stream takes SINK+WINDOW, e.g. 256+2048");
    if (a->domain_name) {
        if (!cl_chat_domain_from_name(a->domain_name, &opts->domain))
            return cl_cli_usage_error(PROG, "unknown domain '%s'", a->domain_name);
        opts->auto_domain = FALSE;
    }
    if (a->random_init) {
        g_autoptr(GError) err = NULL;
        if (!cl_model_config_preset(cfg, a->random_init, &err))
            return cl_cli_usage_error(PROG, "--random-init: %s", err->message);
        cfg->sve_variant = a->sve_variant;
    }
    opts->question = a->prompt;
    opts->max_new_tokens = (int)a->max_tokens;
    opts->beam_size = (int)a->beam_size;
    opts->delta = a->delta;
    opts->heatmap_source = a->heatmap_source;
    opts->change_gate = !a->no_change_gate;
    opts->grounding = !a->no_grounding;
    opts->heatmaps = TRUE; /* cheap; the JSON reports them even without --heatmap */
    return -1;
}

/* What the run reads: the images (opened first, to fail fast on a bad path), the model and the
 * device. */
typedef struct {
    ClSequence *seq;
    ClModel *model;
    char *resolved_path; /* the model file; NULL for --random-init */
    ClBackend *be;
    char *backend_notice;
    double load_ms;
} DescribeInputs;

/* Returns -1 to go on, else the exit status. */
static int load_describe_inputs(const DescribeArgs *a, const ClModelConfig *cfg, DescribeInputs *in)
{
    g_autoptr(GError) err = NULL;
    gint64 t0 = g_get_monotonic_time();
    guint n_files = g_strv_length(a->files);
    in->seq = cl_sequence_open((const char *const *)a->files, n_files, NULL, &err);
    if (!in->seq) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        return 1;
    }
    if (cl_sequence_length(in->seq) < 2) {
        fprintf(stderr,
                "%s: %s holds one image; a description needs at least two (give more files, "
                "or a multi-frame file)\n",
                PROG, a->files[0]);
        return CL_CLI_EXIT_USAGE;
    }
    if (a->random_init) {
        in->model = cl_model_new_random(cfg, a->seed < 0 ? 0 : (guint64)a->seed, &err);
    } else {
        /* colour photographs, radiographs and aerial tiles get their own models where there
         * are (model.h) */
        ClChatDomain domain = CL_CHAT_DOMAIN_GENERIC;
        if (a->domain_name)
            cl_chat_domain_from_name(a->domain_name, &domain);
        else
            domain = cl_describe_detect_domain(cl_sequence_item(in->seq, 0)->image);
        in->resolved_path =
            a->model_path ? g_strdup(a->model_path) : cl_model_find_default_for(domain, &err);
        if (in->resolved_path)
            in->model = cl_model_load(in->resolved_path, &err);
    }
    if (!in->model) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        return 1;
    }
    in->be = cl_backend_new(a->device, &in->backend_notice, &err);
    if (!in->be) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        return 1;
    }
    in->load_ms = (g_get_monotonic_time() - t0) / 1000.0;
    return -1;
}

static void describe_inputs_clear(DescribeInputs *in)
{
    /* the backend first, the images last: the reverse of their making */
    g_clear_pointer(&in->be, cl_backend_free);
    g_clear_pointer(&in->model, cl_model_free);
    g_clear_pointer(&in->seq, cl_sequence_free);
    cl_cli_free_all(&in->backend_notice, &in->resolved_path, NULL);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(DescribeInputs, describe_inputs_clear)

/* The notices, the device fallback and the sequence's warnings first, on stderr. */
static void print_notices(const DescribeArgs *a, const DescribeInputs *in, ClDescribeResult *res)
{
    guint pos = 0;
    if (in->backend_notice)
        g_ptr_array_insert(res->notices, (gint)pos++, g_strdup(in->backend_notice));
    if (a->random_init)
        g_ptr_array_insert(res->notices, (gint)pos++,
                           g_strdup_printf("random-init %s seed %" G_GINT64_FORMAT
                                           ": an untrained model, its text is noise",
                                           a->random_init, a->seed < 0 ? (gint64)0 : a->seed));
    for (guint i = 0; i < in->seq->warnings->len; i++)
        g_ptr_array_insert(res->notices, (gint)pos++,
                           g_strdup(g_ptr_array_index(in->seq->warnings, i)));
    for (guint i = 0; i < res->notices->len; i++)
        fprintf(stderr, "%s: note: %s\n", PROG, (const char *)g_ptr_array_index(res->notices, i));
}

static void print_prior_reports(const ClDescribeResult *res)
{
    if (res->context_tokens > 0 && res->context_pages > 0)
        fprintf(stderr,
                "%s: prior reports: %d tokens, VIST2 kept %d of them as %d page%s (%d "
                "positions)\n",
                PROG, res->context_tokens, res->context_compressed, res->context_pages,
                res->context_pages == 1 ? "" : "s", res->context_pages * res->n_visual_per_image);
    else if (res->context_tokens > 0)
        fprintf(stderr, "%s: prior reports: %d tokens, read as text\n", PROG, res->context_tokens);
}

/* --context-pages and --heatmap files; *written gets each heatmap's file (NULL when not
 * written). Returns 1 when one could not be written, else 0. */
static int write_describe_images(const DescribeArgs *a, const DescribeInputs *in,
                                 const ClDescribeResult *res, char ***written)
{
    int rc = 0;
    for (guint i = 0; a->pages_prefix && i < res->context_page_pixels->len; i++) {
        const int S = in->model->config.image_size;
        g_autofree char *path = g_strdup_printf("%s-%u.png", a->pages_prefix, i + 1);
        g_autoptr(GError) perr = NULL;
        if (!cl_vist_write_page_png(g_ptr_array_index(res->context_page_pixels, i), S, path,
                                    &perr)) {
            fprintf(stderr, "%s: %s\n", PROG, perr->message);
            rc = 1;
        } else {
            fprintf(stderr, "%s: wrote %s (VIST2 page %u, %d × %d)\n", PROG, path, i + 1, S, S);
        }
    }
    *written = g_new0(char *, res->heatmaps->len + 1);
    for (guint i = 0; a->heatmap && i < res->heatmaps->len; i++) {
        const ClHeatmap *hm = g_ptr_array_index(res->heatmaps, i);
        int t = hm->image_index;
        const ClSequenceItem *it = cl_sequence_item(in->seq, (guint)t);
        g_autofree char *path = g_strdup_printf("%s-%d.png", a->heatmap, t + 1);
        g_autoptr(GError) herr = NULL;
        if (!cl_heatmap_write_png(hm, &res->letterbox[t], it->image, it->frame, NULL,
                                  HEATMAP_OPACITY, path, &herr)) {
            fprintf(stderr, "%s: %s\n", PROG, herr->message);
            rc = 1;
            continue;
        }
        fprintf(stderr, "%s: wrote %s (%s heatmap of image %d, %s, %u × %u)\n", PROG, path,
                cl_heatmap_source_name(hm->source), t + 1, it->label, it->image->width,
                it->image->height);
        (*written)[i] = g_steal_pointer(&path);
    }
    return rc;
}

/* --geotiff: each heatmap as heat and mask GeoTIFFs on its image's grid, and the mask's regions as
 * a GeoPackage. Returns 1 when one could not be written, else 0. */
static int write_describe_geotiffs(const DescribeArgs *a, const DescribeInputs *in,
                                   const ClDescribeResult *res)
{
    int rc = 0;
    for (guint i = 0; a->geotiff && i < res->heatmaps->len; i++) {
        const ClHeatmap *hm = g_ptr_array_index(res->heatmaps, i);
        int t = hm->image_index;
        const ClSequenceItem *it = cl_sequence_item(in->seq, (guint)t);
        const ClImage *img = it->image;
        g_autofree float *heat = cl_heatmap_to_image(hm, &res->letterbox[t]);
        if (!heat || !img->path) {
            fprintf(stderr, "%s: --geotiff: image %d (%s): %s\n", PROG, t + 1, it->label,
                    heat ? "no file to take the grid from" : "not enough memory");
            rc = 1;
            continue;
        }
        g_autofree char *heat_path = g_strdup_printf("%s-%d-heat.tif", a->geotiff, t + 1);
        g_autofree char *mask_path = g_strdup_printf("%s-%d-mask.tif", a->geotiff, t + 1);
        g_autofree char *gpkg_path = g_strdup_printf("%s-%d-regions.gpkg", a->geotiff, t + 1);
        g_autoptr(GError) gerr = NULL;
        gboolean geo = FALSE;
        guint n = 0;
        if (!cl_geo_write_geotiff(heat_path, img->path, heat, img->width, img->height, FALSE, 0,
                                  &geo, &gerr) ||
            !cl_geo_write_geotiff(mask_path, img->path, heat, img->width, img->height, TRUE,
                                  a->mask_threshold, NULL, &gerr) ||
            !cl_geo_write_regions(gpkg_path, mask_path, &n, &gerr)) {
            fprintf(stderr, "%s: --geotiff: %s\n", PROG, gerr->message);
            rc = 1;
            continue;
        }
        fprintf(stderr,
                "%s: wrote %s, %s and %s (%s heatmap of image %d on its grid%s; %u "
                "changed region%s at heat >= %g)\n",
                PROG, heat_path, mask_path, gpkg_path, cl_heatmap_source_name(hm->source), t + 1,
                geo ? "" : ", which has no georeferencing", n, n == 1 ? "" : "s",
                a->mask_threshold);
    }
    return rc;
}

/* The JSON object on stdout, or the one-line summary on stderr after the streamed text. */
static void print_describe_result(const DescribeArgs *a, const DescribeInputs *in,
                                  const ClDescribeResult *res, char **written)
{
    if (a->json) {
        JsonContext c = {
            .model_path = in->resolved_path,
            .model_sha256 = in->model->sha256,
            .preset = a->random_init,
            .seed = a->seed < 0 ? 0 : a->seed,
            .variant = cl_sve_variant_name(in->model->config.sve_variant),
            .device = cl_backend_name(in->be),
            .heatmap_files = written,
            .object = res->object_name,
        };
        g_autofree char *out = result_to_json(res, in->seq, &c);
        printf("%s\n", out);
        return;
    }
    double enc = 0;
    for (guint t = 0; t < res->n_images; t++)
        enc += res->encode_ms[t];
    fprintf(stderr,
            "%s: %s, %u images (%s), load %.0f ms, preprocess %.0f ms, encode %.0f ms, "
            "prefill %d positions %.0f ms, %u tokens in %.0f ms (%.1f tokens/s, %s)\n",
            PROG, cl_backend_name(in->be), cl_sequence_length(in->seq),
            cl_chat_domain_name(res->domain), in->load_ms, res->preprocess_ms, enc, res->n_prompt,
            res->prefill_ms, res->ids->len, res->decode_ms, res->tokens_per_s,
            cl_stop_reason_name(res->stop_reason));
    if (res->change_max >= 0) { /* what the heads found (docs/MODEL.md §3.10, §3.13) */
        g_autoptr(GString) found = g_string_new(NULL);
        for (int i = 0; i < res->regions.n; i++)
            g_string_append_printf(found, "%s%s", i ? " and " : "",
                                   cl_grounding_position_names[res->regions.cell[i]]);
        if (res->object_name)
            g_string_append_printf(found, "; the object there: %s (%.0f %%)", res->object_name,
                                   100 * res->object_share);
        if (res->findings_added && res->findings_missing) {
            g_autofree char *added = join_names(res->findings_added);
            g_autofree char *missing = join_names(res->findings_missing);
            g_string_append_printf(found, "; findings seen added: %s; missing: %s", added, missing);
        }
        fprintf(stderr, "%s: change head: largest probability %.2f%s%s\n", PROG, res->change_max,
                found->len ? ", changed at the " : " (no change)", found->str);
    }
}

int cl_cli_describe(int argc, char **argv)
{
    g_auto(DescribeArgs) a = { 0 };
    ClDescribeOptions opts;
    ClModelConfig cfg;
    g_autoptr(GString) context = g_string_new(NULL);
    g_auto(DescribeInputs) in = { 0 };
    int rc = parse_describe_args(argc, argv, &a);
    if (rc < 0)
        rc = describe_options(&a, context, &opts, &cfg);
    if (rc < 0)
        rc = load_describe_inputs(&a, &cfg, &in);
    if (rc >= 0)
        return rc;

    guint n_images = cl_sequence_length(in.seq);
    g_autofree ClDescribeImage *imgs = g_new0(ClDescribeImage, n_images);
    for (guint t = 0; t < n_images; t++) {
        imgs[t].image = cl_sequence_item(in.seq, t)->image;
        imgs[t].frame = cl_sequence_item(in.seq, t)->frame;
    }
    gboolean streamed_any = FALSE;
    if (!a.json) {
        opts.on_token = cl_cli_stream_token;
        opts.user_data = &streamed_any;
    }
    g_autoptr(GError) err = NULL;
    ClDescribeResult res;
    gboolean ok = cl_describe_run(in.be, in.model, imgs, n_images, &opts, &res, &err);
    res.load_ms = in.load_ms;
    if (streamed_any)
        fputc('\n', stdout);
    fflush(stdout);
    print_notices(&a, &in, &res);
    if (!ok) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        cl_describe_result_clear(&res);
        return 1;
    }
    print_prior_reports(&res);
    g_auto(GStrv) written = NULL;
    rc = write_describe_images(&a, &in, &res, &written);
    rc = write_describe_geotiffs(&a, &in, &res) || rc;
    print_describe_result(&a, &in, &res, written);
    cl_describe_result_clear(&res);
    return rc;
}
